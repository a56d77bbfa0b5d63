#!/usr/bin/env bash
# Run-through fault tolerance, end to end: builds examples/ft_solver.c and runs it under
# `mpiexec -v --ft run-through` with ranks killed (SIGKILL) at chosen iterations. A case
# passes when
#   - the launcher exits 137 (128 + SIGKILL: it reports the first failed rank) or 0 when
#     nothing was killed, within the timeout;
#   - stderr names exactly the killed ranks as failed ("rank R (pid P) killed by signal 9"),
#     so every survivor exited 0, which ft_solver does only when its answer is correct;
#   - stdout has the final line "... answer correct (N ranks started, M finished)" with the
#     expected M, and a recovery line naming the dead world ranks;
#   - no rank is left running.
#
#   tests/c/ft/run.sh [PREFIX]      (PREFIX defaults to ./install)
#
# It also runs the small programs of this folder whose header names this driver
# (failure visibility to a rank that only polls).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
prefix=${1:-$root/install}
mpicc="$prefix/bin/mpicc"
mpiexec="$prefix/bin/mpiexec"
build="$root/tests/c/build/ft"
mkdir -p "$build/logs"
[ -x "$mpiexec" ] || { echo "ft/run.sh: $mpiexec not found (make install first)" >&2; exit 2; }

passed=0
failed=0

# poll_case NAME NP: every survivor (all ranks but one) must print "rank R: ok".
poll_case() {
    local name=$1 np=$2 out="$build/logs/$1.out" err="$build/logs/$1.err" why=""
    if ! "$mpicc" -O2 -Wall -Werror -o "$build/$name" "$here/$name.c" >"$build/logs/$name.build" 2>&1; then
        echo "FAIL $name (compile)"; failed=$((failed + 1)); return
    fi
    for path in shm tcp; do
        STEADFAST_PATH=$path timeout -k 5 30 "$mpiexec" -v --ft run-through -n "$np" "$build/$name" \
            >"$out" 2>"$err" </dev/null
        local oks; oks=$(grep -cE '^rank [0-9]+: ok$' "$out")
        if [ "$oks" -eq $((np - 1)) ]; then
            echo "PASS $name np=$np path=$path"; passed=$((passed + 1))
        else
            echo "FAIL $name np=$np path=$path: $oks of $((np - 1)) survivors ok"
            sed 's/^/    | /' "$out" "$err" | tail -n 20
            failed=$((failed + 1))
        fi
    done
}

bin="$build/ft_solver"
if ! "$mpicc" -O2 -Wall -Wextra -Werror -o "$bin" "$root/examples/ft_solver.c" -lm \
    >"$build/logs/ft_solver.build" 2>&1; then
    echo "FAIL ft_solver (compile)"; sed 's/^/    | /' "$build/logs/ft_solver.build"; exit 1
fi

# case NAME NP FINISHED "DEAD WORLD RANKS" PATH [solver args...]
case_() {
    local name=$1 np=$2 finished=$3 dead=$4 path=$5; shift 5
    local out="$build/logs/$name.out" err="$build/logs/$name.err" why="" want_rc=137
    [ -z "$dead" ] && want_rc=0
    local t0; t0=$(date +%s.%N)
    STEADFAST_PATH=$path timeout -k 5 30 "$mpiexec" -v --ft run-through -n "$np" "$bin" "$@" \
        >"$out" 2>"$err" </dev/null
    local rc=$?
    local dt; dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    if [ $rc -eq 124 ] || { [ $rc -eq 137 ] && awk -v d="$dt" 'BEGIN { exit !(d >= 30) }'; }; then
        why="timed out"
    elif [ $rc -ne $want_rc ]; then
        why="launcher exit status $rc, expected $want_rc"
    fi
    # Failures the launcher reported, as "rank R" words, sorted.
    local reported want_reported
    reported=$(grep -oE '^steadfast run: rank [0-9]+ \(pid [0-9]+\) .*' "$err" |
        sed -E 's/^steadfast run: rank ([0-9]+) \(pid [0-9]+\) (.*)/\1:\2/' | sort -n | tr '\n' ' ')
    want_reported=$(for r in $dead; do echo "$r:killed by signal 9 (SIGKILL)"; done | sort -n | tr '\n' ' ')
    [ "$reported" = "$want_reported" ] || why="${why:+$why; }launcher reported failures '$reported', expected '$want_reported'"
    if ! grep -qE "answer correct \($np ranks started, $finished finished\)$" "$out"; then
        why="${why:+$why; }no 'answer correct ($np ranks started, $finished finished)' line"
    fi
    if grep -q WRONG "$out"; then why="${why:+$why; }wrong answer"; fi
    if [ -n "$dead" ]; then
        local listed
        listed=$(sed -nE 's/^iteration -?[0-9]+: world rank\(s\) ([0-9,]+) failed.*/\1/p' "$out" |
            tr ',' '\n' | sort -n | tr '\n' ' ')
        local want_listed; want_listed=$(printf '%s\n' $dead | sort -n | tr '\n' ' ')
        [ "$listed" = "$want_listed" ] || why="${why:+$why; }recoveries named ranks '$listed', expected '$want_listed'"
    fi
    local left; left=$(pgrep -f -x -- "$bin( .*)?" | tr '\n' ' ')
    if [ -n "$left" ]; then
        why="${why:+$why; }ranks left running (pids $left)"
        # shellcheck disable=SC2086
        kill -9 $left 2>/dev/null
    fi
    if [ -z "$why" ]; then
        echo "PASS ft_solver $name np=$np path=$path ($dt s)"; passed=$((passed + 1))
    else
        echo "FAIL ft_solver $name np=$np path=$path ($dt s): $why"
        for f in "$out" "$err"; do
            [ -s "$f" ] && { echo "    --- ${f##*/}"; tail -n 20 "$f" | sed 's/^/    | /'; }
        done
        failed=$((failed + 1))
    fi
}

case_ no-failure        4 4 ""      shm
case_ kill-2-at-50      4 3 "2"     shm --kill-rank 2 --kill-iter 50
case_ kill-2-at-50      4 3 "2"     tcp --kill-rank 2 --kill-iter 50
case_ kill-0-at-35      4 3 "0"     shm --kill-rank 0 --kill-iter 35
# A rank and its buddy at once: their block is lost and restarts from zero.
case_ kill-1-2-at-33    4 2 "1 2"   shm --kill-rank 1 --kill-iter 33 --kill-rank 2 --kill-iter 33
# Three failures one after the other, down to 5 of 8.
case_ kill-3-in-turn    8 5 "5 0 7" shm --kill-rank 5 --kill-iter 20 --kill-rank 0 --kill-iter 60 \
    --kill-rank 7 --kill-iter 120
# A second rank dies in the middle of the recovery (after the shrink): agree says retry.
case_ kill-in-recovery  6 4 "2 4"   shm --kill-rank 2 --kill-iter 50 --kill-rank 4 --kill-iter -1

poll_case get_failed_poll 3
poll_case bcast_dead 6
poll_case bcast_dead 16
poll_case reduce_dead 5
poll_case fence_dead 3
poll_case fence_dead 4
poll_case send_dead 3

# relaunch_case PATH: `--on-failure relaunch` starts the killed rank again; the new
# incarnation exchanges messages with the survivors (relaunch.c) and the job ends with 0.
relaunch_case() {
    local path=$1 name=relaunch out="$build/logs/relaunch.$1.out" err="$build/logs/relaunch.$1.err" why=""
    if ! "$mpicc" -O2 -Wall -Werror -o "$build/$name" "$here/$name.c" >"$build/logs/$name.build" 2>&1; then
        echo "FAIL $name (compile)"; failed=$((failed + 1)); return
    fi
    STEADFAST_PATH=$path timeout -k 5 60 "$mpiexec" --on-failure relaunch -n 4 "$build/$name" \
        >"$out" 2>"$err" </dev/null
    local rc=$?
    [ $rc -eq 0 ] || why="launcher exit status $rc, expected 0"
    for want in "rank 0 incarnation 0: ok" "rank 1 incarnation 0: ok" "rank 2 incarnation 1: ok" \
        "rank 3 incarnation 0: ok"; do
        grep -q "^$want" "$out" || why="${why:+$why; }no '$want' line"
    done
    grep -q "rank 2 (pid [0-9]*) killed by signal 9 (SIGKILL); starting it again as incarnation 1" "$err" ||
        why="${why:+$why; }the launcher did not report the relaunch"
    if [ -z "$why" ]; then
        echo "PASS $name np=4 path=$path"; passed=$((passed + 1))
    else
        echo "FAIL $name np=4 path=$path: $why"
        sed 's/^/    | /' "$out" "$err" | tail -n 20
        failed=$((failed + 1))
    fi
}
relaunch_case shm
relaunch_case tcp
relaunch_case udp

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
