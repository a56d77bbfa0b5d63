#!/usr/bin/env bash
# Kill-and-recover tests of `--ft coordinated`: an unmodified MPI program
# (tests/c/ckpt/ring.c: ANY_SOURCE token ring, 800 KB rendezvous exchanges, allreduce, rank 0
# writing a file) is killed with SIGKILL at chosen points and must finish with stdout and its
# output file byte-identical to a fault-free run.
#
#   tests/ckpt/coordinated.sh [PREFIX]        (PREFIX: an installed Steadfast, default ./install)
#   CKPT_PATHS="shm tcp" CKPT_ROUNDS=100 tests/ckpt/coordinated.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix=${1:-$root/install}
prefix=$(cd "$prefix" && pwd)
run=$prefix/bin/steadfast
paths=${CKPT_PATHS:-shm tcp}
rounds=${CKPT_ROUNDS:-150}
work=$(mktemp -d /tmp/steadfast-coordinated.XXXXXX)
trap 'pkill -9 -f "ckpt-dir $work/ckpt" 2>/dev/null; rm -rf "$work"' EXIT

if [ "$(uname -m)" != x86_64 ] || ! setarch -R true 2>/dev/null; then
    echo "coordinated checkpoints: SKIP (needs x86-64 Linux and personality(ADDR_NO_RANDOMIZE))"
    exit 0
fi
"$prefix/bin/mpicc" -O2 -o "$work/ring" "$root/tests/c/ckpt/ring.c" || exit 1
args=("$rounds" 10000 100000)

"$run" run -n 3 "$work/ring" "${args[@]}" "$work/ref.log" > "$work/ref.out" || { echo "reference run failed"; exit 1; }

pass=0
fail=0

# pid of world rank $1 of the running test job (the launcher lists them in the checkpoint
# directory; a restored process's /proc/PID/cmdline shows its image's memory, not argv)
rank_pid() {
    awk -v r="$1" '$1 == r { print $2 }' "$work/ckpt/ranks"
}

# wait until the launcher's stderr has $2 lines matching $1 (at most 60 s)
wait_for() {
    for _ in $(seq 1 600); do
        local n
        n=$(grep -c -- "$1" "$work/err" 2>/dev/null)
        [ "${n:-0}" -ge "$2" ] && return 0
        sleep 0.1
    done
    return 1
}

# case NAME PATH STEPS...; a step is "after PATTERN COUNT", "sleep SECS" or "kill RANK..."
case_() {
    local name=$1 path=$2
    shift 2
    rm -f "$work/out" "$work/err" "$work/run.log"
    rm -rf "$work/ckpt"
    timeout 180 "$run" run --path "$path" --ft coordinated --ckpt-interval 1s --ckpt-dir "$work/ckpt" -n 3 \
        "$work/ring" "${args[@]}" "$work/run.log" > "$work/out" 2> "$work/err" &
    local job=$!
    local ok=1
    while [ $# -gt 0 ]; do
        case $1 in
            after) wait_for "$2" "$3" || ok=0; shift 3 ;;
            sleep) sleep "$2"; shift 2 ;;
            kill)
                shift
                local pids=()
                while [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; do pids+=("$(rank_pid "$1")"); shift; done
                kill -9 "${pids[@]}" 2>/dev/null || ok=0
                ;;
        esac
    done
    wait "$job"
    local status=$?
    if [ $ok = 1 ] && [ $status = 0 ] && cmp -s "$work/ref.out" "$work/out" && cmp -s "$work/ref.log" "$work/run.log" \
        && grep -q "rolling every rank back" "$work/err"; then
        echo "PASS $path: $name ($(grep -c 'committed' "$work/err") checkpoint(s), $(grep -c 'rolling every rank back' "$work/err") rollback(s))"
        pass=$((pass + 1))
    else
        echo "FAIL $path: $name (exit $status)"
        sed 's/^/    /' "$work/err" | tail -15
        cmp "$work/ref.out" "$work/out" | sed 's/^/    /'
        cmp "$work/ref.log" "$work/run.log" | sed 's/^/    /'
        fail=$((fail + 1))
    fi
}

for p in $paths; do
    case_ "one rank killed after a checkpoint" "$p" after "checkpoint 1 committed" 1 sleep 0.4 kill 1
    case_ "two ranks killed at once" "$p" after "checkpoint 1 committed" 1 sleep 0.7 kill 0 2
    case_ "a rank killed before the first checkpoint" "$p" sleep 0.3 kill 2
    case_ "killed again after a rollback" "$p" after "checkpoint 1 committed" 1 sleep 0.2 kill 2 \
        after "the job goes on" 1 sleep 0.5 kill 0
done
echo "coordinated checkpoints: $pass passed, $fail failed"
[ "$fail" = 0 ]
