#!/usr/bin/env bash
# Kill-and-recover tests of `--ft coordinated`: an unmodified MPI program
# (tests/ckpt/ring.c: ANY_SOURCE token ring, 800 KB rendezvous exchanges, allreduce, rank 0
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
rounds=${CKPT_ROUNDS:-200}
work=$(mktemp -d /tmp/steadfast-coordinated.XXXXXX)
trap 'pkill -9 -f "ckpt-dir $work/ckpt" 2>/dev/null; pkill -9 -f "ckpt-server --dir $work/store" 2>/dev/null; rm -rf "$work"' EXIT

if [ "$(uname -m)" != x86_64 ] || ! setarch -R true 2>/dev/null; then
    echo "coordinated checkpoints: SKIP (needs x86-64 Linux and personality(ADDR_NO_RANDOMIZE))"
    exit 0
fi
"$prefix/bin/mpicc" -O2 -o "$work/ring" "$here/ring.c" || exit 1
args=("$rounds" 10000 100000)

"$run" run -n 3 "$work/ring" "${args[@]}" "$work/ref.log" > "$work/ref.out" || { echo "reference run failed"; exit 1; }
# What a case runs (the C ring writes a file too; the Python one does not).
prog=("$work/ring" "${args[@]}" "$work/run.log")
ref_out=$work/ref.out
ref_log=$work/ref.log

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
    rm -f "$work/out" "$work/err"
    if [ -n "$ref_log" ]; then rm -f "$work/run.log"; fi
    rm -rf "$work/ckpt"
    # shellcheck disable=SC2086 # $server: options, split on purpose
    timeout 180 "$run" run --path "$path" --ft coordinated --ckpt-interval 500ms --ckpt-dir "$work/ckpt" ${server:-} -n 3 \
        "${prog[@]}" > "$work/out" 2> "$work/err" &
    local job=$!
    local ok=1
    while [ $# -gt 0 ]; do
        case $1 in
            after) wait_for "$2" "$3" || ok=0; shift 3 ;;
            sleep) sleep "$2"; shift 2 ;;
            damage)
                # Flip bytes in the region data of rank $2's image of the committed wave,
                # in the local copy and in the checkpoint server's.
                local w img
                w=$(awk '$1 == "wave" { print $2 }' "$work/ckpt/COMMITTED")
                for img in "$work/ckpt/wave-$w/rank-$2.img" "$work"/ckpt/server/*/"wave-$w/rank-$2.img"; do
                    printf '\xff\xff\xff\xff' | dd of="$img" bs=1 seek=12288 conv=notrunc status=none || ok=0
                done
                shift 2
                ;;
            lose)
                # Rank $2's local copy of the committed wave is gone (its node's disk).
                local w
                w=$(awk '$1 == "wave" { print $2 }' "$work/ckpt/COMMITTED")
                rm -f "$work/ckpt/wave-$w/rank-$2.img" "$work/ckpt/wave-$w/rank-$2.rec" || ok=0
                shift 2
                ;;
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
    if [ $ok = 1 ] && [ $status = 0 ] && cmp -s "$ref_out" "$work/out" && { [ -z "$ref_log" ] || cmp -s "$ref_log" "$work/run.log"; } \
        && grep -q "rolling every rank back" "$work/err" && { [ -z "${expect:-}" ] || grep -q "$expect" "$work/err"; }; then
        echo "PASS $path: $name ($(grep -c 'committed' "$work/err") checkpoint(s), $(grep -c 'rolling every rank back' "$work/err") rollback(s))"
        pass=$((pass + 1))
    else
        echo "FAIL $path: $name (exit $status)"
        sed 's/^/    /' "$work/err" | tail -15
        cmp "$ref_out" "$work/out" | sed 's/^/    /'
        [ -z "$ref_log" ] || cmp "$ref_log" "$work/run.log" | sed 's/^/    /'
        fail=$((fail + 1))
    fi
}

# The whole job killed (its launcher, and with it every rank), then `steadfast restart`:
# what the first run printed up to the checkpoint followed by what the restart prints is
# the fault-free output, and so is the file.
restart_case() {
    local path=$1
    rm -rf "$work/ckpt" "$work/out" "$work/out2" "$work/err" "$work/run.log"
    "$run" run --path "$path" --ft coordinated --ckpt-interval 500ms --ckpt-dir "$work/ckpt" -n 3 \
        "$work/ring" "${args[@]}" "$work/run.log" > "$work/out" 2> "$work/err" &
    local job=$! ok=1
    wait_for "checkpoint 2 committed" 1 || ok=0
    kill -9 "$job"
    wait "$job" 2>/dev/null
    sleep 0.5
    timeout 180 "$run" restart "$work/ckpt" > "$work/out2" 2>> "$work/err" || ok=0
    local mark
    mark=$(awk '$1 == "mark" && $2 == 0 { print $3 }' "$work/ckpt/COMMITTED")
    { head -c "${mark:-0}" "$work/out"; cat "$work/out2"; } > "$work/joined"
    if [ $ok = 1 ] && cmp -s "$work/ref.out" "$work/joined" && cmp -s "$work/ref.log" "$work/run.log" \
        && grep -q "restarting the job from checkpoint" "$work/err"; then
        echo "PASS $path: the whole job killed and started again with steadfast restart"
        pass=$((pass + 1))
    else
        echo "FAIL $path: the whole job killed and started again with steadfast restart"
        sed 's/^/    /' "$work/err" | tail -15
        cmp "$work/ref.out" "$work/joined" | sed 's/^/    /'
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
    expect="cannot be used" case_ "a damaged image, on the checkpoint server too: the previous checkpoint is used" "$p" \
        after "checkpoint 2 committed" 1 damage 1 kill 0
    expect="fetched" case_ "a rank's local copy lost with it: the checkpoint server's copy is used" "$p" \
        after "checkpoint 2 committed" 1 lose 1 kill 1
    restart_case "$p"
done
# A standalone checkpoint server, as a job spanning hosts uses it.
"$run" ckpt-server --dir "$work/store" --key-file "$work/store.key" > "$work/store.out" 2>&1 &
store=$!
for _ in $(seq 1 100); do grep -qs listening "$work/store.out" && break; sleep 0.1; done
addr=$(sed -n 's/.*listening on \([^,]*\),.*/\1/p' "$work/store.out")
p=${paths##* }
server="--ckpt-server $addr --ckpt-server-key-file $work/store.key" expect="fetched" \
    case_ "a standalone steadfast ckpt-server: a lost local copy comes from it" "$p" \
    after "checkpoint 2 committed" 1 lose 2 kill 2
kill "$store" 2>/dev/null
# An mpi4py program, if the mpi4py suite built mpi4py against this library.
py=$(ls -d "${TMPDIR:-/tmp}"/steadfast-mpi4py/venv-*/bin/python 2>/dev/null | tail -1)
if [ -n "$py" ] && LD_LIBRARY_PATH=$prefix/lib "$py" -c 'import mpi4py.MPI' 2>/dev/null; then
    export LD_LIBRARY_PATH=$prefix/lib
    "$run" run -n 3 "$py" "$here/ring.py" 150 > "$work/pyref.out" || { echo "mpi4py reference run failed"; exit 1; }
    prog=("$py" "$here/ring.py" 150)
    ref_out=$work/pyref.out
    ref_log=
    case_ "an mpi4py program, one rank killed after a checkpoint" shm after "checkpoint 1 committed" 1 sleep 0.3 kill 1
else
    echo "SKIP mpi4py: not built here (scripts/mpi4py-tests.sh builds it)"
fi
echo "coordinated checkpoints: $pass passed, $fail failed"
[ "$fail" = 0 ]
