#!/usr/bin/env bash
# Reliability tests with the C programs (seed 004's promise: no corrupt, lost,
# duplicated or misordered byte reaches the application):
#   1. the byte-verifying tests of tests/c over udp, two loopback routes, with
#      drop, duplication, reordering, wire corruption and bus errors injected;
#   2. a 64 MiB verified transfer over udp under heavier faults, whose
#      counters must show the faults injected, detected and repaired;
#   3. bus errors and wire corruption on shm and tcp (which detect but cannot
#      resend): the job must fail naming the damage, and no damaged byte may
#      reach the application (the test's own byte checks stay silent).
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

# Damage on a path without retransmission: the job must stop with the detection
# message, and the test's byte checks must never have seen a bad byte.
detect() {   # detect PATH FAULTS
    local path=$1 f=$2 log="$build/logs/detect-$1-${2%%=*}.log"
    echo "== $path with STEADFAST_FAULTS=$f (single-copy off: everything goes through the checked path)"
    STEADFAST_CMA=0 STEADFAST_FAULTS="$f" timeout -k 5 60 "$mpiexec" --path "$path" -n 2 \
        "$build/pingpong_sizes" >"$log" 2>&1 </dev/null
    local rc=$?
    if [ $rc -eq 0 ]; then
        fail "$path $f: job succeeded although frames were damaged"
    elif ! grep -q "corrupt data from rank [01] detected on the $path path" "$log"; then
        fail "$path $f: exit $rc without the detection message"
        tail -n 10 "$log" | sed 's/^/    | /'
    elif grep -qE 'bytes wrong|Found [0-9]+ errors' "$log"; then
        fail "$path $f: damaged bytes reached the application"
        grep -E 'bytes wrong' "$log" | head -3 | sed 's/^/    | /'
    else
        pass "$path $f: damage detected, not delivered"
    fi
}
detect shm "path=shm,bus=0.02,seed=3"
detect shm "path=shm,corrupt=0.02,seed=3"
detect tcp "path=tcp,bus=0.02,seed=3"
detect tcp "path=tcp,corrupt=0.02,seed=3"

# Large messages: the receiver verifies rendezvous data while copying it into the
# application's buffer (one pass), so damaged bytes do land there; the receive must never
# complete from them. bigxfer checks every word of every message it sees complete.
detect_data() {   # detect_data PATH FAULTS WHAT
    local path=$1 f=$2 what=$3 log="$build/logs/detect-$1-data.log"
    echo "== $path bigxfer with damaged $what (checksum fused into the copy to the user buffer)"
    STEADFAST_CMA=0 STEADFAST_FAULTS="$f" timeout -k 5 60 \
        "$mpiexec" --path "$path" -n 2 "$build/bigxfer" -m 16 -s 512 >"$log" 2>&1 </dev/null
    local rc=$?
    if [ $rc -eq 0 ]; then
        fail "$path $what: job succeeded although they were damaged"
    elif ! grep -q "detected on the $path path (payload CRC32C mismatch" "$log"; then
        fail "$path $what: exit $rc without the payload detection message"
        tail -n 10 "$log" | sed 's/^/    | /'
    elif grep -qE 'words wrong|Found [0-9]+ errors' "$log"; then
        fail "$path $what: damaged bytes reached the application"
    else
        pass "$path $what: damage detected in the fused copy, receive never completed"
    fi
}
# Seed 6 damages a 512 KiB tcp data frame; on shm, large ring records are checked the same
# way (header first, payload in the copy-out).
detect_data tcp "path=tcp,corrupt=0.1,after=40,seed=6" "data frames"
detect_data shm "path=shm,corrupt=0.3,after=20,seed=1" "data records"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
