#!/usr/bin/env bash
# One-sided communication with window members on different hosts (docs/mpi5.md, "One-sided
# communication", the network path), in network namespaces joined by a bridge
# (scripts/netns-lib.sh): rma_basic.c, rma_atomic.c, rma_lock_handoff.c and
# rma_fence_create.c with the ranks spread over 2 hosts, one rank per host (every target
# remote) and two per host (shm fast path to the host-mate, the network to the others), over
# udp (the default between hosts) and tcp.
# Each case must print " No Errors". Skips (exit 0) where namespaces cannot be made.
#   tests/c/rma/hosts.sh [PREFIX]      (about 20 to 30 s)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
prefix=$(cd "${1:-$root/install}" && pwd)
NS_PREFIX=sfrma$$
# shellcheck source=scripts/netns-lib.sh
. "$root/scripts/netns-lib.sh"
if ! why=$(netns_can); then
    echo "SKIP one-sided communication across hosts: cannot create network namespaces here: $why"
    exit 0
fi
build=${CT_BUILD:-$root/tests/c/build/rma-hosts}
mkdir -p "$build"
for t in rma_basic rma_atomic rma_lock_handoff rma_fence_create; do
    if ! "$prefix/bin/mpicc" -O2 -g -Wall -Wextra -Werror -Wno-stringop-overflow -o "$build/$t" "$here/$t.c" 2>"$build/$t.cc.log"; then
        echo "FAIL $t: does not compile"; sed 's/^/    /' "$build/$t.cc.log" | head -20; exit 1
    fi
done
job=""
cleanup() {
    [ -n "$job" ] && kill "$job" 2>/dev/null
    netns_down
}
trap cleanup EXIT
trap 'exit 130' INT TERM
netns_up 2 || { echo "FAIL one-sided communication across hosts: cannot build the namespaces"; exit 1; }
H1=$(ns h1) H2=$(ns h2)

pass=0; fail=0
# case PROGRAM HOSTS NP NET_PATH
case_() {
    local prog=$1 hosts=$2 np=$3 net=$4
    local log="$build/$prog-$np-$net.log"
    local start; start=$(date +%s.%N)
    ip netns exec "$H1" env STEADFAST_NET_PATH="$net" timeout -k 5 60 "$prefix/bin/steadfast" run --hosts "$hosts" \
        --agent "ip netns exec {host}" --control-addr 10.77.2.1 -n "$np" "$build/$prog" >"$log" 2>&1 &
    job=$!
    wait "$job"
    local rc=$?
    job=""
    local t; t=$(echo "$(date +%s.%N) - $start" | bc)
    if [ $rc -eq 0 ] && grep -q " No Errors" "$log"; then
        printf "PASS %s np=%s on %s over %s (%.1f s)\n" "$prog" "$np" "$hosts" "$net" "$t"; pass=$((pass+1))
    else
        printf "FAIL %s np=%s on %s over %s (exit %s, %.1f s)\n" "$prog" "$np" "$hosts" "$net" "$rc" "$t"
        tail -15 "$log" | sed 's/^/    /'; fail=$((fail+1))
    fi
}
one="$H1:1,$H2:1" two="$H1:2,$H2:2"
for net in udp tcp; do
    case_ rma_basic "$one" 2 "$net"
    case_ rma_basic "$two" 4 "$net"
    case_ rma_atomic "$one" 2 "$net"
    case_ rma_atomic "$two" 4 "$net"
    case_ rma_lock_handoff "$one" 2 "$net"
    case_ rma_lock_handoff "$two" 4 "$net"
    case_ rma_fence_create "$one" 2 "$net"
    case_ rma_fence_create "$two" 4 "$net"
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
