#!/usr/bin/env bash
# LU with a rank killed: for each fault-tolerance mode, runs LU on 4 ranks fault-free, then
# again with one rank killed (SIGKILL) once the run has printed a given step, and reports
# both times and whether the recovered run still verified (all eleven values within 1e-8
# of the published ones, so a recovery that replays a message wrongly shows).
#
#   bench/npb/lu-recover.sh [--prefix PREFIX] [--class W] [--modes "coordinated pessimistic causal"]
#                           [--rank 2] [--at-step 50] [--ckpt-interval 2s]
#
# Coordinated checkpoints roll every rank back to the last checkpoint (taken every
# --ckpt-interval); pessimistic and causal logging restart only the killed rank.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix=$root/install
class=W
modes="coordinated pessimistic causal"
victim=2
at_step=50
interval=2s
while [ $# -gt 0 ]; do
    case $1 in
        --prefix) prefix=$2; shift 2 ;;
        --class) class=$2; shift 2 ;;
        --modes) modes=$2; shift 2 ;;
        --rank) victim=$2; shift 2 ;;
        --at-step) at_step=$2; shift 2 ;;
        --ckpt-interval) interval=$2; shift 2 ;;
        *) echo "usage: $0 [--prefix P] [--class C] [--modes M] [--rank R] [--at-step N] [--ckpt-interval T]" >&2; exit 2 ;;
    esac
done
build=$root/build/npb/steadfast
"$here/build-lu.sh" "$prefix/bin/mpicc" "$build" >/dev/null || exit 1
work=$(mktemp -d /tmp/lu-recover.XXXXXX)
trap 'rm -rf "$work"' EXIT

field() { sed -n "s/^ $1 *= *//p" "$2"; }
# The largest relative difference to the published values that the run printed.
max_diff() { awk '/^   (residual|error|surface)/ { if ($5 + 0 > m) m = $5 + 0 } END { printf "%.1e", m }' "$1"; }

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# "lu time" is what the program reports (its timed loop, slowest rank); "wall" is the whole
# mpiexec command, start-up and recovery included.
echo "| mode | fault-free: lu time / wall (s) | verified | rank $victim killed at step $at_step: lu time / wall (s) | recoveries | verified |"
echo "|---|---|---|---|---|---|"
status=0
for mode in $modes; do
    extra=()
    [ "$mode" = coordinated ] && extra=(--ckpt-interval "$interval")
    start=$(now)
    "$prefix/bin/mpiexec" --ft "$mode" "${extra[@]}" -n 4 "$build/lu" "$class" >"$work/$mode.clean" 2>&1 </dev/null
    clean_wall=$(elapsed "$start")
    clean_t=$(field "Time in seconds" "$work/$mode.clean")
    clean_v=$(field Verification "$work/$mode.clean")

    dir=$work/$mode.ckpt
    start=$(now)
    timeout 900 "$prefix/bin/mpiexec" -v --ft "$mode" "${extra[@]}" --ckpt-dir "$dir" --max-restarts 3 \
        -n 4 "$build/lu" "$class" >"$work/$mode.out" 2>"$work/$mode.err" </dev/null &
    job=$!
    killed=no
    until=$((SECONDS + 600))
    while [ $SECONDS -lt $until ] && kill -0 "$job" 2>/dev/null; do
        if grep -qE "^ step +$at_step\$" "$work/$mode.out" 2>/dev/null && [ -s "$dir/ranks" ]; then
            pid=$(awk -v r="$victim" '$1 == r { print $2 }' "$dir/ranks")
            [ -n "$pid" ] && kill -9 "$pid" && killed=yes
            break
        fi
        sleep 0.05
    done
    wait "$job"
    rc=$?
    wall=$(elapsed "$start")
    t=$(field "Time in seconds" "$work/$mode.out")
    v=$(field Verification "$work/$mode.out")
    # Logging restarts the killed rank; coordinated checkpointing restores every rank.
    again=$(grep -cE "starting it again|every rank restored checkpoint" "$work/$mode.err")
    [ "$killed" = yes ] || v="not killed (the run ended before step $at_step)"
    [ "$rc" = 0 ] || v="${v:-no result} (exit $rc)"
    [ "$v" = SUCCESSFUL ] && v="$v (max diff $(max_diff "$work/$mode.out"))"
    [ "$clean_v" = SUCCESSFUL ] && clean_v="$clean_v (max diff $(max_diff "$work/$mode.clean"))"
    echo "| $mode | ${clean_t:-?} / $clean_wall | ${clean_v:-?} | ${t:-?} / $wall | $again | ${v:-?} |"
    if [[ "$v" != SUCCESSFUL* ]] || [[ "$clean_v" != SUCCESSFUL* ]]; then
        status=1
        sed 's/^/    /' "$work/$mode.err" | tail -20 >&2
    fi
done
exit $status
