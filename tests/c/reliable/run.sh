#!/usr/bin/env bash
# Reliability tests with the C programs (seed 004's promise: no corrupt, lost,
# duplicated or misordered byte reaches the application):
#   1. the byte-verifying tests of tests/c over udp, two loopback routes, with
#      drop, duplication, reordering, wire corruption and bus errors injected;
#   2. a 64 MiB verified transfer over udp under heavier faults, whose
#      counters must show the faults injected, detected and repaired;
#   3. bus errors and wire corruption on shm and tcp: the receiver detects the
#      damage and the sender resends from the copy it keeps until the receiver
#      verified it; the programs must end with correct results and the counters
#      must show the damage injected, detected and repaired;
#   4. heavy damage on tcp anywhere in any frame (length words, acknowledgments
#      and repair requests included): the receiver loses the frame boundaries,
#      finds them again at the sync frame that starts the sender's answer, and
#      the counters must show that (resynced) besides the repair.
#
#   tests/c/reliable/run.sh [PREFIX]      (PREFIX defaults to ./install)
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
prefix=${1:-$root/install}
mpicc="$prefix/bin/mpicc"
mpiexec="$prefix/bin/mpiexec"
build="$root/tests/c/build/reliable"
mkdir -p "$build/logs"
[ -x "$mpiexec" ] || { echo "reliable/run.sh: $mpiexec not found (make install first)" >&2; exit 2; }

passed=0
failed=0
pass() { echo "PASS $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }

faults="path=udp,drop=0.01,dup=0.01,reorder=0.05,corrupt=0.001,bus=0.0001,seed=7"
echo "== byte-verifying tests over udp, routes 127.0.0.1,127.0.0.2, STEADFAST_FAULTS=$faults"
if STEADFAST_FAULTS="$faults" STEADFAST_ROUTES=127.0.0.1,127.0.0.2 \
    "$root/tests/c/run-tests.sh" --mpicc "$mpicc" --mpiexec "$mpiexec" --paths udp \
    --build-dir "$build/suite" --timeout-scale 2 --max-np 4 \
    --filter '^(pingpong_sizes|order|anysource|ssend|probe)$'; then
    pass "C tests over udp with faults"
else
    fail "C tests over udp with faults"
fi

"$mpicc" -O2 -Wall -Werror -I"$root/tests/c" -o "$build/bigxfer" "$here/bigxfer.c" || { fail "bigxfer (compile)"; exit 1; }
"$mpicc" -O2 -I"$root/tests/c" -o "$build/pingpong_sizes" "$root/tests/c/pingpong_sizes.c" || { fail "pingpong_sizes (compile)"; exit 1; }
"$mpicc" -O2 -I"$root/tests/c/coll" -o "$build/gather" "$root/tests/c/coll/gather.c" || { fail "gather (compile)"; exit 1; }

# Value of counter NAME summed over the "steadfast stats rank R: packets ..." lines.
counter() {
    grep -E '^steadfast stats rank [0-9]+: packets' "$2" | grep -oE " $1=[0-9]+" | cut -d= -f2 |
        awk '{ s += $1 } END { print s + 0 }'
}

heavy="path=udp,drop=0.02,dup=0.02,reorder=0.05,corrupt=0.005,bus=0.002,seed=11"
echo "== bigxfer 64 MiB over udp, STEADFAST_FAULTS=$heavy"
out="$build/logs/bigxfer-faults.out"
if STEADFAST_STATS=1 STEADFAST_FAULTS="$heavy" STEADFAST_ROUTES=127.0.0.1,127.0.0.2 \
    timeout -k 5 180 "$mpiexec" --path udp -n 2 "$build/bigxfer" -m 64 -s 512 >"$out" 2>&1 </dev/null &&
    grep -q '^ No Errors$' "$out"; then
    inj=$(grep -oE 'injected drop=[0-9]+ dup=[0-9]+ reorder=[0-9]+ corrupt=[0-9]+ bus=[0-9]+' "$out" |
        grep -oE '[0-9]+' | awk '{ s += $1 } END { print s + 0 }')
    det=$(counter corrupt_detected "$out")
    re=$(counter retransmitted "$out")
    if [ "$inj" -gt 0 ] && [ "$det" -gt 0 ] && [ "$re" -gt 0 ]; then
        pass "bigxfer over udp with faults (injected $inj, corrupt detected $det, retransmitted $re)"
    else
        fail "bigxfer over udp with faults: counters do not show the faults (injected $inj, detected $det, retransmitted $re)"
        tail -n 20 "$out" | sed 's/^/    | /'
    fi
else
    fail "bigxfer over udp with faults"
    tail -n 20 "$out" | sed 's/^/    | /'
fi

# Damage on shm and tcp: the receiver finds it by the end-to-end checksum, asks for the
# data again, and the sender resends it from the copy it keeps until the receiver verified
# it. The job must end with correct results, and the counters must show the damage
# injected, detected and repaired (single copy off: everything goes through the checked
# path).
# Whether a damaged run ended well, every byte verified by the program; fails it and says
# why if not.
survived() {   # survived EXIT LOG WHAT
    local rc=$1 log=$2 what=$3
    if [ "$rc" -ne 0 ] || ! grep -q '^ No Errors$' "$log"; then
        fail "$what: exit $rc, damage not survived"
        tail -n 10 "$log" | sed 's/^/    | /'
        return 1
    fi
    if grep -qE 'bytes wrong|words wrong' "$log"; then
        fail "$what: damaged bytes reached the application"
        return 1
    fi
}

repaired() {   # [RESYNC=1] [NP=N] repaired PATH FAULTS PROGRAM ARGS...  (RESYNC=1: resyncs required)
    local path=$1 f=$2 prog=$3 need_resync=${RESYNC:-0} np=${NP:-2}
    shift 3
    local log="$build/logs/repair-$path-${f#path=*,}-$prog.log"
    log=${log//[=,]/_}
    echo "== $prog over $path with STEADFAST_FAULTS=$f"
    STEADFAST_STATS=1 STEADFAST_CMA=0 STEADFAST_FAULTS="$f" timeout -k 5 90 \
        "$mpiexec" --path "$path" -n "$np" "$build/$prog" "$@" >"$log" 2>&1 </dev/null
    local rc=$?
    local inj det re rs
    rs=$(counter resynced "$log")
    inj=$(grep -oE 'injected drop=[0-9]+ dup=[0-9]+ reorder=[0-9]+ corrupt=[0-9]+ bus=[0-9]+' "$log" |
        grep -oE '(corrupt|bus)=[0-9]+' | cut -d= -f2 | awk '{ s += $1 } END { print s + 0 }')
    det=$(counter corrupt_detected "$log")
    re=$(counter retransmitted "$log")
    survived $rc "$log" "$prog over $path with $f" || return 0
    if [ "$inj" -eq 0 ] || [ "$det" -eq 0 ] || [ "$re" -eq 0 ]; then
        fail "$prog over $path with $f: counters do not show the repair (injected $inj, detected $det, resent $re)"
        tail -n 10 "$log" | sed 's/^/    | /'
    elif [ "$need_resync" = 1 ] && [ "$rs" -eq 0 ]; then
        fail "$prog over $path with $f: no damaged length word was found again (resynced $rs)"
        tail -n 10 "$log" | sed 's/^/    | /'
    else
        pass "$prog over $path with $f: correct run (injected $inj, detected $det, resent $re, resynced $rs)"
    fi
}
# Small and large messages both ways (eager, rendezvous data), then a one-way bulk
# transfer of large messages: damage to the sender's copy on the way (corrupt) and to
# the receiver's memory before the check (bus).
for path in shm tcp; do
    repaired $path "path=$path,corrupt=0.02,seed=3" pingpong_sizes
    repaired $path "path=$path,bus=0.02,seed=3" pingpong_sizes
    repaired $path "path=$path,corrupt=0.05,bus=0.05,seed=6" bigxfer -m 16 -s 512
    # Eager messages of 1 and 4 KiB into receives posted ahead of them (on shm these are
    # copied into the receive while being checked: a damaged one must leave it posted).
    repaired $path "path=$path,corrupt=0.02,bus=0.02,seed=4" bigxfer -m 4 -s 1 -r
    repaired $path "path=$path,corrupt=0.02,bus=0.02,seed=5" bigxfer -m 8 -s 4 -r
done
# Gathers of 80 KB blocks on 4 ranks: on a host with fewer CPUs the blocks of the ranks
# other than the root do not wait for the root's FIN, and what is resent comes from the
# path's copy, not from the sender's buffer.
NP=4 repaired shm "path=shm,corrupt=0.05,bus=0.05,seed=3" gather

# Heavy damage on tcp anywhere in a frame, length words and control frames included:
# small messages (a length word is a large part of their frames) and a bulk transfer
# whose receiver's acknowledgments are damaged too.
RESYNC=1 repaired tcp "path=tcp,corrupt=0.1,bus=0.1,seed=8" pingpong_sizes
RESYNC=1 repaired tcp "path=tcp,corrupt=0.1,bus=0.1,seed=9" bigxfer -m 16 -s 64

# Single copy on (STEADFAST_CMA=1):
# a rendezvous message is read straight from the sender's memory, outside the ring and its
# records' checksums. The sender's CRC32C of its data comes with the announcement; a copy
# that does not match it is read again (and after three bad reads the ring carries it).
# bus damages those copies after the read. No resend is involved: the sender's buffer is
# still there.
single_copy() {   # single_copy FAULTS PROGRAM ARGS...
    local f=$1 prog=$2
    shift 2
    local log="$build/logs/single-copy-${f}-$prog.log"
    log=${log//[=,]/_}
    echo "== $prog over shm, single copy, with STEADFAST_FAULTS=$f"
    STEADFAST_STATS=1 STEADFAST_CMA=1 STEADFAST_FAULTS="$f" timeout -k 5 90 \
        "$mpiexec" --path shm -n 2 "$build/$prog" "$@" >"$log" 2>&1 </dev/null
    local rc=$?
    local inj det
    inj=$(grep -oE 'injected drop=[0-9]+ dup=[0-9]+ reorder=[0-9]+ corrupt=[0-9]+ bus=[0-9]+' "$log" |
        grep -oE 'bus=[0-9]+' | cut -d= -f2 | awk '{ s += $1 } END { print s + 0 }')
    det=$(counter corrupt_detected "$log")
    survived $rc "$log" "$prog single copy with $f" || return 0
    if [ "$inj" -eq 0 ] || [ "$det" -lt "$inj" ]; then
        fail "$prog single copy with $f: counters do not show every damaged copy caught (injected $inj, detected $det)"
        tail -n 10 "$log" | sed 's/^/    | /'
    else
        pass "$prog single copy with $f: correct run (injected $inj, detected $det)"
    fi
}
single_copy "path=shm,bus=0.2,seed=4" bigxfer -m 16 -s 512
single_copy "path=shm,bus=0.2,seed=4" pingpong_sizes

# More ranks and patterns (any-source, ordering, synchronous sends, probes): every
# pair's ring or connection repairs its own damage.
for path in shm tcp; do
    f="path=$path,corrupt=0.01,bus=0.01,seed=5"
    # tcp: heavier, so that length words and control frames are hit too.
    [ $path = tcp ] && f="path=tcp,corrupt=0.05,bus=0.05,seed=5"
    echo "== byte-verifying tests over $path, STEADFAST_FAULTS=$f"
    if STEADFAST_CMA=0 STEADFAST_FAULTS="$f" \
        "$root/tests/c/run-tests.sh" --mpicc "$mpicc" --mpiexec "$mpiexec" --paths $path \
        --build-dir "$build/suite" --timeout-scale 2 --max-np 4 \
        --filter '^(pingpong_sizes|order|anysource|ssend|probe)$'; then
        pass "C tests over $path with faults"
    else
        fail "C tests over $path with faults"
    fi
done

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
