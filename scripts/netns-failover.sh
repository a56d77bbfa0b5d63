#!/usr/bin/env bash
# Multi-host route failover and fail-back, in network namespaces (seed 004: "a job
# survives a failed route as long as one route between the two hosts remains").
#
#   scripts/netns-failover.sh [PREFIX]        (PREFIX defaults to ./install)
#
# Builds three namespaces (hosts) joined by two networks, 10.77.1.0/24 (route 1) and
# 10.77.2.0/24 (route 2), each host with one veth pair into each (scripts/netns-lib.sh),
# and runs `steadfast run --hosts … --agent "ip netns exec {host}"` from host 1:
#
#   1. a verified transfer (tests/c/reliable/bigxfer.c) from host 1 to host 2 over udp,
#      striped on both routes; at 64 MiB route 1 of host 2 goes down
#      (`ip link set r1 down`); the transfer must keep going on route 2; the route comes
#      back up and the transfer must fail back (traffic on both routes again); the job
#      must finish with every byte checked (>= 320 MiB in all);
#   2. four ranks on three hosts (two on host 1, over shared memory; udp between hosts),
#      byte-verifying tests with faults injected on udp.
#
# Skips (exit 0, with a message) where namespaces cannot be created; the namespaces are
# deleted on every exit.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
prefix=${1:-$root/install}
prefix=$(cd "$prefix" 2>/dev/null && pwd) || { echo "netns-failover: no install prefix $1" >&2; exit 2; }
NS_PREFIX=sfnf$$
# shellcheck source=scripts/netns-lib.sh
. "$here/netns-lib.sh"

if ! why=$(netns_can); then
    echo "SKIP netns-failover: cannot create network namespaces here: $why"
    exit 0
fi
[ -x "$prefix/bin/steadfast" ] || { echo "netns-failover: $prefix/bin/steadfast not found (make install)" >&2; exit 2; }

work=$(mktemp -d /tmp/sf-netns.XXXXXX)
job=""
cleanup() {
    [ -n "$job" ] && kill "$job" 2>/dev/null
    netns_down
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

build="$root/tests/c/build/reliable"
mkdir -p "$build"
"$prefix/bin/mpicc" -O2 -Wall -Werror -I"$root/tests/c" -o "$build/bigxfer" "$root/tests/c/reliable/bigxfer.c" || exit 1

netns_up 3 || { echo "FAIL netns-failover: cannot build the namespaces"; exit 1; }
H1=$(ns h1) H2=$(ns h2) H3=$(ns h3)
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
pass() { echo "PASS $*"; }

run_in_h1() {
    ip netns exec "$H1" env STEADFAST_ROUTES=10.77.1.0/24,10.77.2.0/24 "$@"
}

# ---- 1. failover and fail-back during a verified transfer ---------------------------
log="$work/xfer.log"
stop="$work/stop"
echo "== transfer host 1 -> host 2 over udp on two routes; route 1 of host 2 goes down at 64 MiB"
STEADFAST_STATS=1 run_in_h1 "$prefix/bin/steadfast" run --hosts "$H1,$H2" \
    --agent "ip netns exec {host}" --control-addr 10.77.2.1 --path udp -n 2 --timeout 300 \
    "$build/bigxfer" -m 320 -s 1024 -p 16 -f "$stop" >"$log" 2>&1 &
job=$!
step() { echo "   $(date +%T.%N | cut -c1-12) $*"; }
if ! netns_wait_progress "$log" 64 120 "$job"; then
    fail "transfer did not reach 64 MiB"
    tail -n 20 "$log" | sed 's/^/    | /'
    exit 1
fi
before=$(netns_progress "$log")
step "progress ${before} MiB: ip -n $H2 link set r1 down"
ip -n "$H2" link set r1 down
if netns_wait_progress "$log" $((before + 96)) 120 "$job"; then
    step "progress $(netns_progress "$log") MiB with route 1 down"
else
    fail "no progress after route 1 went down"
fi
step "ip -n $H2 link set r1 up"
ip -n "$H2" link set r1 up
mid=$(netns_progress "$log")
# Fail-back needs a probe (every 100 ms) and then traffic: give it data and a moment.
netns_wait_progress "$log" $((mid + 96)) 120 "$job" || fail "no progress after route 1 came back"
sleep 1
step "progress $(netns_progress "$log") MiB; stopping"
touch "$stop"
wait "$job"
rc=$?
job=""
grep -E '^(\[[^]]*\] *)?done ' "$log" | sed 's/^/   /'
if [ $rc -ne 0 ] || ! grep -q '^ No Errors$' "$log"; then
    fail "transfer job (exit $rc)"
    tail -n 30 "$log" | sed 's/^/    | /'
else
    total=$(grep -oE 'done [0-9]+' "$log" | grep -oE '[0-9]+$')
    [ "${total:-0}" -ge 320 ] || fail "only ${total:-0} MiB transferred"
    # Route 0 is 10.77.1.0/24 (first in STEADFAST_ROUTES) on both ranks.
    if ! grep -qE 'route 0 to rank [01] .* failed at' "$log"; then
        fail "the failed route was not detected"
    fi
    if ! grep -qE 'route 0 to rank [01] .* restored at' "$log"; then
        fail "the route was not restored (no fail-back)"
    fi
    sender=$(grep -E 'steadfast stats rank 0: to rank 1 route 0 ' "$log")
    since=$(echo "$sender" | grep -oE '[0-9]+ since last restore' | grep -oE '^[0-9]+')
    if [ "${since:-0}" -gt 0 ] && echo "$sender" | grep -q ' up$'; then
        pass "failover and fail-back: ${total} MiB verified; route 0 carried ${since} frames after fail-back"
    else
        fail "no traffic on route 0 after fail-back: ${sender:-no route line}"
    fi
    grep -E 'failed at|restored at|stall_ms' "$log" | sed 's/^/   /'
fi

# ---- 2. four ranks on three hosts: shm inside host 1, udp between hosts ----------------
echo "== 4 ranks on 3 hosts (2 on host 1 over shm), byte-verifying tests, faults on udp"
for t in anysource order; do
    "$prefix/bin/mpicc" -O2 -I"$root/tests/c" -o "$build/$t" "$root/tests/c/$t.c" || { fail "$t (compile)"; continue; }
    np=4
    [ $t = order ] && np=2
    hosts="$H1:2,$H2:1,$H3:1"
    [ $t = order ] && hosts="$H1:1,$H3:1"
    out="$work/$t.log"
    if STEADFAST_STATS=1 STEADFAST_FAULTS="path=udp,drop=0.01,dup=0.01,reorder=0.02,corrupt=0.002,bus=0.001,seed=5" \
        run_in_h1 "$prefix/bin/steadfast" run --hosts "$hosts" --agent "ip netns exec {host}" \
        --control-addr 10.77.2.1 -n $np --timeout 120 "$build/$t" >"$out" 2>&1 </dev/null &&
        grep -q '^ No Errors$' "$out"; then
        shm_line=$(grep -cE '^steadfast stats rank [01]: shm: packets' "$out")
        if [ $t = anysource ] && [ "$shm_line" -lt 1 ]; then
            fail "$t: ranks 0 and 1 (same host) did not use shared memory"
        else
            pass "$t on hosts $hosts"
        fi
    else
        fail "$t on hosts $hosts"
        tail -n 20 "$out" | sed 's/^/    | /'
    fi
done

if [ $failed -eq 0 ]; then
    echo "netns-failover: all passed"
else
    echo "netns-failover: $failed failed"
fi
[ $failed -eq 0 ]
