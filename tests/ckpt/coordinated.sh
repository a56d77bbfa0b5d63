#!/usr/bin/env bash
# Kill-and-recover tests of `--ft coordinated`: unmodified MPI programs are killed with
# SIGKILL at chosen and at random points and must finish with stdout and their output
# files byte-identical to a fault-free run.
#
# Programs: tests/ckpt/ring.c (ANY_SOURCE token ring, 800 KB rendezvous exchanges,
# allreduce, rank 0 writing a file with stdio), tests/ckpt/stencil.c (2-D Jacobi stencil,
# halo exchange with Sendrecv and with Isend/Irecv left in flight during the interior
# update, checksum reductions, every rank appending to its own file with write(2)),
# tests/ckpt/ring.py (mpi4py, when scripts/mpi4py-tests.sh built mpi4py here), and
# tests/ckpt/threads.c (a thread of its own: must be refused with a clear error).
#
# Cases, on shm and tcp: one rank killed after a checkpoint, two at once, one before the
# first checkpoint, one again after a rollback, one while an image is damaged, one while a
# checkpoint wave is in progress (once the wave started, `-v`, and a rank took its cut, the
# launcher is stopped, so the kill lands before the commit), one while the job is being
# rolled back (stopped once a new process was started and before the job went on), kills
# at random points (seeded; the seed is printed and CKPT_SEED=N replays the same schedule),
# the stencil killed after a checkpoint and at random points, and the whole job killed then
# `steadfast restart` (after a commit, during a wave, and killed again after the restart).
#
#   tests/ckpt/coordinated.sh [PREFIX]        (PREFIX: an installed Steadfast, default ./install)
#   CKPT_PATHS="shm tcp"  paths to run on
#   CKPT_FULL=1           the longer form: 4 random-kill cases per program and path instead
#                         of 1, the mid-checkpoint and mid-rollback kills on the stencil
#                         too, and the mpi4py program on tcp as well (~1.6x as long)
#   CKPT_SEED=N           seed of the random kills (default: $RANDOM, printed)
#   CKPT_ONLY=REGEX       only the cases whose "PATH: NAME" matches (grep -E)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix=${1:-$root/install}
prefix=$(cd "$prefix" && pwd)
run=$prefix/bin/steadfast
paths=${CKPT_PATHS:-shm tcp}
full=${CKPT_FULL:-0}
seed=${CKPT_SEED:-$RANDOM}
work=$(mktemp -d /tmp/steadfast-coordinated.XXXXXX)
trap 'pkill -9 -f "ckpt-dir $work/ckpt" 2>/dev/null; pkill -9 -f "ckpt-server --dir $work/store" 2>/dev/null; rm -rf "$work"' EXIT

if [ "$(uname -m)" != x86_64 ] || ! setarch -R true 2>/dev/null; then
    echo "coordinated checkpoints: SKIP (needs x86-64 Linux and personality(ADDR_NO_RANDOMIZE))"
    exit 0
fi
"$prefix/bin/mpicc" -O2 -o "$work/ring" "$here/ring.c" || exit 1
"$prefix/bin/mpicc" -O2 -o "$work/stencil" "$here/stencil.c" || exit 1
"$prefix/bin/mpicc" -O2 -o "$work/threads" "$here/threads.c" -lpthread || exit 1
"$prefix/bin/mpicxx" -O2 -o "$work/ringxx" "$here/ring.cpp" || exit 1
ring_args=(200 10000 100000)
stencil_args=(2000 16 20000 100 0)

# A program under test: its command line (files named with $out, the run's prefix), the
# reference stdout and the names of the files it writes (compared as $work/ref.F / $work/run.F).
# ($ref_ms: the fault-free run's time, which bounds the random kill times.)
use_ring() {
    prog=("$work/ring" "${ring_args[@]}" "$work/run.log")
    ref_out=$work/ref-ring.out
    files=(log)
    ref_ms=$ring_ms
}
use_cxx() {
    prog=("$work/ringxx" "${ring_args[@]}" "$work/run.cxx")
    ref_out=$work/ref-cxx.out
    files=(cxx)
    ref_ms=$cxx_ms
}
use_stencil() {
    prog=("$work/stencil" "${stencil_args[@]}" "$work/run.st")
    ref_out=$work/ref-stencil.out
    files=(st.0 st.1 st.2)
    ref_ms=$stencil_ms
}
now_ms() { date +%s%3N; }
t=$(now_ms)
"$run" run -n 3 "$work/ring" "${ring_args[@]}" "$work/ref.log" > "$work/ref-ring.out" || { echo "reference run failed"; exit 1; }
ring_ms=$(($(now_ms) - t)) t=$(now_ms)
"$run" run -n 3 "$work/stencil" "${stencil_args[@]}" "$work/ref.st" > "$work/ref-stencil.out" || { echo "reference run failed"; exit 1; }
stencil_ms=$(($(now_ms) - t)) t=$(now_ms)
"$run" run -n 3 "$work/ringxx" "${ring_args[@]}" "$work/ref.cxx" > "$work/ref-cxx.out" || { echo "reference run failed"; exit 1; }
cxx_ms=$(($(now_ms) - t))
echo "random kills: seed $seed (CKPT_SEED=$seed replays the same schedule)"
RANDOM=$seed

pass=0
fail=0

# Whether case "$1" runs (CKPT_ONLY).
wanted() {
    [ -z "${CKPT_ONLY:-}" ] || grep -qE -- "$CKPT_ONLY" <<< "$1"
}

# pid of world rank $1 of the running test job (the launcher lists them in the checkpoint
# directory; a restored process's /proc/PID/cmdline shows its image's memory, not argv)
rank_pid() {
    awk -v r="$1" '$1 == r { print $2 }' "$work/ckpt/ranks"
}

# wait until the launcher's stderr has $2 lines matching $1 (at most 60 s; $3: poll period)
wait_for() {
    local period=${3:-0.1}
    local until=$((SECONDS + 60))
    while [ $SECONDS -lt $until ]; do
        local n
        n=$(grep -c -- "$1" "$work/err" 2>/dev/null)
        [ "${n:-0}" -ge "$2" ] && return 0
        sleep "$period"
    done
    return 1
}

# Kill rank $1 while a checkpoint wave is in progress: once a wave started (`-v` reports
# it) and a rank took its cut (the wave's directory appears), the launcher is stopped, so
# no wave can commit; if this one had not committed yet, the rank is killed before the
# launcher goes on. A wave that committed first: the next one.
during_wave() {
    local lpid seen w
    lpid=$(cat "$work/ckpt/launcher.pid") || return 1
    for _ in 1 2 3 4 5; do
        seen=$(grep -c "checkpoint [0-9]* started" "$work/err")
        wait_for "checkpoint [0-9]* started" $((seen + 1)) 0.005 || return 1
        w=$(grep -o "checkpoint [0-9]* started" "$work/err" | tail -1 | cut -d' ' -f2)
        local until=$((SECONDS + 10))
        while [ ! -d "$work/ckpt/wave-$w" ] && [ $SECONDS -lt $until ]; do sleep 0.002; done
        kill -STOP "$lpid"
        if ! grep -q "checkpoint $w committed" "$work/err"; then
            kill -9 "$(rank_pid "$1")"
            kill -CONT "$lpid"
            note="rank $1 killed during checkpoint $w"
            killed_wave=$w
            return 0
        fi
        kill -CONT "$lpid"
    done
    return 1
}

# Kill rank $1, then a process of the rollback this starts, before the job went on: once
# the launcher (a child subreaper) has a child that is none of the ranks it had, the
# launcher is stopped, so the job cannot go on; if it had not gone on yet, that new process
# is killed before the launcher continues. Otherwise, again (the next kill of $1 rolls back
# once more). Run without periodic checkpoints: an image writer orphaned by the kill would
# become the launcher's child too.
during_rollback() {
    local lpid kids old cur resumed victim p
    lpid=$(cat "$work/ckpt/launcher.pid") || return 1
    kids=/proc/$lpid/task/$lpid/children
    for _ in 1 2 3 4 5 6 7 8; do
        resumed=$(grep -c "the job goes on" "$work/err")
        read -r old < "$kids"
        kill -9 "$(rank_pid "$1")" || return 1
        # Builtins only: the restore takes a few milliseconds.
        victim=
        local until=$((SECONDS + 30))
        while [ -z "$victim" ] && [ $SECONDS -lt $until ]; do
            cur=
            read -r cur < "$kids"
            for p in $cur; do [[ " $old " == *" $p "* ]] || { victim=$p; break; }; done
        done
        [ -n "$victim" ] || return 1
        kill -STOP "$lpid"
        if [ "$(grep -c "the job goes on" "$work/err")" = "$resumed" ]; then
            kill -9 "$victim"
            kill -CONT "$lpid"
            note="pid $victim of rollback $((resumed + 1)) killed"
            return 0
        fi
        kill -CONT "$lpid"
        wait_for "the job goes on" $((resumed + 1)) || return 1
        sleep 0.2
    done
    return 1
}

# case NAME PATH STEPS...; a step is "after PATTERN COUNT", "sleep SECS", "kill RANK...",
# "damage RANK", "checkpoint" (one now), "during-wave RANK", "during-rollback RANK" or "random N" (N kills of
# one or two random ranks at random times; a kill that finds the rank gone counts anyway).
case_() {
    local name=$1 path=$2
    shift 2
    wanted "$path: $name" || return 0
    rm -f "$work/out" "$work/err"
    for f in "${files[@]}"; do rm -f "$work/run.$f"; done
    rm -rf "$work/ckpt"
    # shellcheck disable=SC2086 # $server: options, split on purpose
    timeout 180 "$run" run -v --path "$path" --ft coordinated --ckpt-interval "${interval:-500ms}" --ckpt-dir "$work/ckpt" ${server:-} \
        --max-restarts 10 -n 3 "${prog[@]}" > "$work/out" 2> "$work/err" &
    local job=$!
    local ok=1
    note=
    killed_wave=
    wait_for "checkpoints of this job go to" 1 0.01 || ok=0
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
            nolocal)
                # --ckpt-local drop: once the ranks learnt of the commit, no local image
                # or record is left (the server's copies are under ckpt/server/).
                local left=
                for _ in $(seq 1 100); do
                    left=$(ls "$work"/ckpt/wave-*/rank-*.img "$work"/ckpt/wave-*/rank-*.rec 2>/dev/null)
                    [ -z "$left" ] && break
                    sleep 0.02
                done
                [ -z "$left" ] || { note="local copies left: $left"; ok=0; }
                shift
                ;;
            kill)
                shift
                local pids=()
                while [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; do pids+=("$(rank_pid "$1")"); shift; done
                kill -9 "${pids[@]}" 2>/dev/null || ok=0
                ;;
            during-wave) during_wave "$2" || ok=0; shift 2 ;;
            during-rollback) during_rollback "$2" || ok=0; shift 2 ;;
            checkpoint) "$run" checkpoint "$work/ckpt" > /dev/null || ok=0; shift ;;
            random)
                local k plan=
                for ((k = 0; k < $2; k++)); do
                    # 0.2 to 1.4 s apart, and within half the fault-free run's time of the
                    # previous (so that on a fast machine the first lands before the end);
                    # one rank, or two at once one time in four
                    local span=$((ref_ms / 2))
                    [ $span -gt 1200 ] && span=1200
                    [ $span -lt 100 ] && span=100
                    local t=$((200 + RANDOM % span)) r1=$((RANDOM % 3)) r2=$((RANDOM % 3)) two=$((RANDOM % 4))
                    sleep "$((t / 1000)).$(printf %03d $((t % 1000)))"
                    local victims=("$r1")
                    [ "$two" = 0 ] && [ "$r2" != "$r1" ] && victims+=("$r2")
                    plan+="${plan:+, }rank ${victims[*]} after ${t} ms"
                    local pids=()
                    for v in "${victims[@]}"; do pids+=("$(rank_pid "$v")"); done
                    kill -9 "${pids[@]}" 2>/dev/null
                done
                note="killed $plan"
                shift 2
                ;;
        esac
    done
    wait "$job"
    local status=$?
    if [ -n "$killed_wave" ]; then
        # Either outcome is right: the rank may have reported its part before it died.
        if grep -q "checkpoint $killed_wave abandoned" "$work/err"; then note+=", which was abandoned"; else note+=", which committed"; fi
    fi
    local same=1
    cmp -s "$ref_out" "$work/out" || same=0
    for f in "${files[@]}"; do cmp -s "$work/ref.$f" "$work/run.$f" || same=0; done
    if [ $ok = 1 ] && [ $status = 0 ] && [ $same = 1 ] && grep -q "rolling every rank back" "$work/err" \
        && { [ -z "${expect:-}" ] || grep -q "$expect" "$work/err"; }; then
        echo "PASS $path: $name ($(grep -c 'committed' "$work/err") checkpoint(s), $(grep -c 'rolling every rank back' "$work/err") rollback(s)${note:+; $note})"
        pass=$((pass + 1))
    else
        echo "FAIL $path: $name (exit $status${note:+; $note})"
        grep -v "checkpoint [0-9]* started" "$work/err" | sed 's/^/    /' | tail -15
        cmp "$ref_out" "$work/out" | sed 's/^/    /'
        for f in "${files[@]}"; do cmp "$work/ref.$f" "$work/run.$f" | sed 's/^/    /'; done
        fail=$((fail + 1))
    fi
}

# The whole job killed (its launcher, and with it every rank), then `steadfast restart`:
# what the first run printed up to the checkpoint followed by what the restart prints is
# the fault-free output, and so is the file. MODE: `committed` (killed right after
# checkpoint 2 committed), `mid-wave` (killed at the start of checkpoint 2), `then-kill`
# (killed after checkpoint 1, restarted with --ckpt-interval, a rank killed at its first commit).
restart_case() {
    local path=$1 mode=$2 name when="checkpoint 2 committed" more=()
    case $mode in
        committed) name="the whole job killed and started again with steadfast restart" ;;
        mid-wave) name="the whole job killed during a checkpoint and started again with steadfast restart"
            when="checkpoint 2 started" ;;
        then-kill) name="steadfast restart with checkpoints, then a rank killed"
            when="checkpoint 1 committed" more=(--ckpt-interval 500ms) ;;
    esac
    wanted "$path: $name" || return 0
    rm -rf "$work/ckpt" "$work/out" "$work/out2" "$work/err" "$work/run.log"
    "$run" run -v --path "$path" --ft coordinated --ckpt-interval 500ms --ckpt-dir "$work/ckpt" -n 3 \
        "$work/ring" "${ring_args[@]}" "$work/run.log" > "$work/out" 2> "$work/err" &
    local job=$! ok=1
    wait_for "$when" 1 0.01 || ok=0
    kill -9 "$job"
    wait "$job" 2>/dev/null
    sleep 0.5
    # Rank 0's stdout position at the cut the restart starts from (read first: a restarted
    # job with checkpoints of its own rewrites COMMITTED).
    local mark
    mark=$(awk '$1 == "mark" && $2 == 0 { print $3 }' "$work/ckpt/COMMITTED")
    timeout 180 "$run" restart "${more[@]}" "$work/ckpt" > "$work/out2" 2>> "$work/err" &
    job=$!
    if [ "$mode" = then-kill ]; then
        # the restart's first commit is checkpoint 2 (killed at once: the job may be short)
        wait_for "checkpoint 2 committed" 1 0.01 && kill -9 "$(rank_pid 1)" || ok=0
    fi
    wait "$job" || ok=0
    { head -c "${mark:-0}" "$work/out"; cat "$work/out2"; } > "$work/joined"
    if [ $ok = 1 ] && cmp -s "$work/ref-ring.out" "$work/joined" && cmp -s "$work/ref.log" "$work/run.log" \
        && grep -q "restarting the job from checkpoint" "$work/err" \
        && { [ "$mode" != then-kill ] || grep -q "rolling every rank back to checkpoint [2-9]" "$work/err"; }; then
        echo "PASS $path: $name ($(grep -o "from checkpoint [0-9]*" "$work/err" | head -1))"
        pass=$((pass + 1))
    else
        echo "FAIL $path: $name"
        sed 's/^/    /' "$work/err" | tail -15
        cmp "$work/ref-ring.out" "$work/joined" | sed 's/^/    /'
        cmp "$work/ref.log" "$work/run.log" | sed 's/^/    /'
        fail=$((fail + 1))
    fi
}

# A program with a thread of its own is refused with a clear error, without any rollback:
# threads.c MODE must end the job with status $2 (fail: any but 0) and the launcher's stderr must say $3.
threads_case() {
    local mode=$1 want=$2 says=$3
    wanted "threads: $mode" || return 0
    rm -rf "$work/ckpt"
    timeout 60 "$run" run --ft coordinated --ckpt-interval 200ms --ckpt-dir "$work/ckpt" -n 3 \
        "$work/threads" "$mode" > "$work/out" 2> "$work/err"
    local status=$?
    if { [ "$want" = fail ] && [ "$status" != 0 ] || [ "$status" = "$want" ]; } && grep -q -- "$says" "$work/err" && ! grep -q "rolling every rank back" "$work/err"; then
        echo "PASS a program with its own thread ($mode) is refused (exit $status)"
        pass=$((pass + 1))
    else
        echo "FAIL a program with its own thread ($mode) is refused (exit $status, expected $want)"
        sed 's/^/    /' "$work/err" | tail -8
        fail=$((fail + 1))
    fi
}

randoms=1
[ "$full" = 1 ] && randoms=4
for p in $paths; do
    use_ring
    case_ "one rank killed after a checkpoint" "$p" after "checkpoint 1 committed" 1 sleep 0.4 kill 1
    case_ "two ranks killed at once" "$p" after "checkpoint 1 committed" 1 sleep 0.7 kill 0 2
    case_ "a rank killed before the first checkpoint" "$p" sleep 0.3 kill 2
    case_ "killed again after a rollback" "$p" after "checkpoint 1 committed" 1 sleep 0.2 kill 2 \
        after "the job goes on" 1 sleep 0.5 kill 0
    expect="cannot be used" case_ "a damaged image, on the checkpoint server too: the previous checkpoint is used" "$p" \
        after "checkpoint 2 committed" 1 damage 1 kill 0
    expect="fetched" case_ "a rank's local copy lost with it: the checkpoint server's copy is used" "$p" \
        after "checkpoint 2 committed" 1 lose 1 kill 1
    server="--ckpt-local drop" expect="fetched" case_ "no local copies (--ckpt-local drop): the images come from the checkpoint server" "$p" \
        after "checkpoint 2 committed" 1 nolocal kill 1
    case_ "a rank killed during a checkpoint" "$p" after "checkpoint 1 committed" 1 during-wave 1
    interval=3600s expect="during the rollback" case_ "a rank killed during a rollback" "$p" \
        sleep 0.3 checkpoint after "checkpoint 1 committed" 1 during-rollback 1
    for ((i = 0; i < randoms; i++)); do
        case_ "kills at random points" "$p" random $((1 + RANDOM % 3))
    done
    restart_case "$p" committed
    restart_case "$p" mid-wave
    restart_case "$p" then-kill
    use_cxx
    case_ "a C++ program: one rank killed after a checkpoint" "$p" after "checkpoint 1 committed" 1 sleep 0.4 kill 1
    use_stencil
    case_ "stencil: one rank killed after a checkpoint" "$p" after "checkpoint 1 committed" 1 sleep 0.3 kill 1
    for ((i = 0; i < randoms; i++)); do
        case_ "stencil: kills at random points" "$p" random $((1 + RANDOM % 3))
    done
    if [ "$full" = 1 ]; then
        case_ "stencil: a rank killed during a checkpoint" "$p" after "checkpoint 1 committed" 1 during-wave 0
        interval=3600s expect="during the rollback" case_ "stencil: a rank killed during a rollback" "$p" \
            sleep 0.3 checkpoint after "checkpoint 1 committed" 1 during-rollback 2
    fi
done
# A standalone checkpoint server, as a job spanning hosts uses it.
"$run" ckpt-server --dir "$work/store" --key-file "$work/store.key" > "$work/store.out" 2>&1 &
store=$!
for _ in $(seq 1 100); do grep -qs listening "$work/store.out" && break; sleep 0.1; done
addr=$(sed -n 's/.*listening on \([^,]*\),.*/\1/p' "$work/store.out")
use_ring
server="--ckpt-server $addr --ckpt-server-key-file $work/store.key" expect="fetched" \
    case_ "a standalone steadfast ckpt-server: a lost local copy comes from it" "${paths##* }" \
    after "checkpoint 2 committed" 1 lose 2 kill 2
kill "$store" 2>/dev/null
threads_case init fail "MPI_Init failed: --ft coordinated cannot checkpoint this process: it runs 1 thread(s) of its own.*(MPI_ERR_UNSUPPORTED_OPERATION)"
threads_case fatal fail "MPI_Allreduce: --ft coordinated cannot checkpoint this process: it runs 1 thread(s) of its own.*(MPI_ERR_UNSUPPORTED_OPERATION)"
threads_case return 42 "MPI_Abort with code 42"
# An mpi4py program, if the mpi4py suite built mpi4py against this library.
py=$(ls -d "${TMPDIR:-/tmp}"/steadfast-mpi4py/venv-*/bin/python 2>/dev/null | tail -1)
if [ -n "$py" ] && LD_LIBRARY_PATH=$prefix/lib "$py" -c 'import mpi4py.MPI' 2>/dev/null; then
    export LD_LIBRARY_PATH=$prefix/lib
    "$run" run -n 3 "$py" "$here/ring.py" 150 > "$work/pyref.out" || { echo "mpi4py reference run failed"; exit 1; }
    prog=("$py" "$here/ring.py" 150)
    ref_out=$work/pyref.out
    files=()
    pypaths=shm
    [ "$full" = 1 ] && pypaths=$paths
    for p in $pypaths; do
        case_ "an mpi4py program, one rank killed after a checkpoint" "$p" after "checkpoint 1 committed" 1 sleep 0.3 kill 1
    done
else
    echo "SKIP mpi4py: not built here (scripts/mpi4py-tests.sh builds it)"
fi
echo "coordinated checkpoints: $pass passed, $fail failed (seed $seed)"
[ "$fail" = 0 ]
