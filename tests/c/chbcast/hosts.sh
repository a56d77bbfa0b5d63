#!/usr/bin/env bash
# Channel broadcast across hosts over IP multicast (docs/chbcast.md, "The multicast
# driver"), in network namespaces joined by a bridge (scripts/netns-lib.sh): chbcast.c on
# 4 ranks spread over 2 and 3 hosts (tcp between hosts, shm inside one), every byte checked,
# with its MPI_Ibcast phases (on the schedule across hosts, with blocking broadcasts among
# them on the stream) in every case but 6.
#   1. forced on (STEADFAST_COLL_MCAST=on): the log must show the multicast streams;
#   2. lost and damaged multicast writes (fault hook): repairs and NACKed synchronizations;
#   3. the primitive reported failed after 20 writes: failover to the tree;
#   4. the primitive silently cut after 30 writes: failover found by the repairs;
#   5. multicast cut to one host by the bridge before the start (no flooding of multicast
#      to its port): the probes find it, the communicators that include it use the tree
#      (that host's rank waits for a probe once, then declines every later stream);
#   6. the same cut in the middle of the run: failover, no broadcast lost;
#   7. the default rule (4 ranks, 12 KiB to 64 KiB): streams made;
#   8. forced off (STEADFAST_COLL_MCAST=off): no stream;
#   9. every program of tests/c/coll (1 to 8 ranks over the 3 hosts) with multicast forced on;
#  10. ranks of different thread levels (tests/c/threads/mixed_bcast.c), multicast forced on.
# Each case must print " No Errors". Skips (exit 0) where namespaces cannot be made.
#   tests/c/chbcast/hosts.sh [PREFIX]      (about 50 s)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
prefix=$(cd "${1:-$root/install}" && pwd)
NS_PREFIX=sfmc$$
# shellcheck source=scripts/netns-lib.sh
. "$root/scripts/netns-lib.sh"
if ! why=$(netns_can); then
    echo "SKIP channel broadcast across hosts: cannot create network namespaces here: $why"
    exit 0
fi
build=${CT_BUILD:-$root/tests/c/build/chbcast}
mkdir -p "$build"
if ! "$prefix/bin/mpicc" -O2 -g -Wall -Wextra -Werror -o "$build/chbcast" "$here/chbcast.c" 2>"$build/cc.log"; then
    echo "FAIL chbcast: does not compile"; sed 's/^/    /' "$build/cc.log" | head -20; exit 1
fi
job=""
cleanup() {
    [ -n "$job" ] && kill "$job" 2>/dev/null
    netns_down
}
trap cleanup EXIT
trap 'exit 130' INT TERM
netns_up 3 || { echo "FAIL channel broadcast across hosts: cannot build the namespaces"; exit 1; }
H1=$(ns h1) H2=$(ns h2) H3=$(ns h3) SW=$(ns sw)
# Without snooping the bridge floods multicast to every port whose mcast_flood is on, so
# turning it off on one port cuts multicast to that host and nothing else.
for r in 1 2; do ip -n "$SW" link set "br$r" type bridge mcast_snooping 0; done
cut() { ip netns exec "$SW" bridge link set dev "$1r2" mcast_flood "$2"; }

# Multicast packets host 2's IP layer received (IpExt InMcastPkts of its namespace).
mcast_rx() {
    ip netns exec "$H2" awk '/^IpExt:/ { if (!h) { for (i = 1; i <= NF; i++) n[i] = $i; h = 1 }
        else for (i = 1; i <= NF; i++) if (n[i] == "InMcastPkts") print $i }' /proc/net/netstat
}

pass=0; fail=0
# case NAME HOSTS EXPECT ENV...   (EXPECT: mcast, failover, tree, unavailable, cut-midway)
case_() {
    local name=$1 hosts=$2 expect=$3; shift 3
    local log="$build/hosts-$name.log"
    local start; start=$(date +%s.%N)
    local rounds=300
    # chbcast.c's MPI_Ibcast phases (several outstanding, a blocking MPI_Bcast among them,
    # fresh communicators), except where the run must outlast the cut: 20000 rounds make
    # 5000 of them, over the tree once cut.
    local phases=(ibcast)
    [ "$expect" = cut-midway ] && rounds=20000 phases=()
    local rx0 early=0; rx0=$(mcast_rx)
    ip netns exec "$H1" env STEADFAST_LOG=steadfast_core::coll::channels=info "$@" \
        timeout -k 5 180 "$prefix/bin/steadfast" run --hosts "$hosts" --agent "ip netns exec {host}" \
        --control-addr 10.77.2.1 --path tcp -n 4 "$build/chbcast" "$rounds" "${phases[@]}" >"$log" 2>&1 &
    job=$!
    if [ "$expect" = cut-midway ]; then
        # Cut once the streams carry broadcasts.
        local t=0
        while ! grep -q "multicast stream" "$log" && [ $t -lt 300 ]; do sleep 0.1; t=$((t + 1)); done
        sleep 0.3
        kill -0 "$job" 2>/dev/null || { echo "    the job ended before the cut"; early=1; }
        cut h2 off
    fi
    wait "$job"
    local rc=$? ok=1
    job=""
    cut h2 on
    grep -q " No Errors" "$log" || ok=0
    [ $early -eq 0 ] || ok=0
    # The broadcasts went over multicast, not all over repairs: host 2 received at least
    # one multicast datagram per round.
    local rx=$(($(mcast_rx) - rx0))
    case $expect in
    mcast) grep -q "multicast stream" "$log" || ok=0
        # One rank per host in the group, its host-mates on the host's channels.
        [ "$hosts" = "$two" ] && { grep -q "reads the host's channels" "$log" || ok=0; }
        [ "$rx" -ge "$rounds" ] || { echo "    host 2 received only $rx multicast packets"; ok=0; } ;;
    failover | cut-midway) grep -q "primitive abandoned" "$log" || ok=0 ;;
    tree) ! grep -q "multicast stream" "$log" || ok=0
        [ "$rx" -eq 0 ] || { echo "    host 2 received $rx multicast packets"; ok=0; } ;;
    # The probes of every stream that includes host 2 fail, each only once per rank.
    # The communicator of ranks 1 and 3 (hosts 1 and 3) keeps its stream.
    unavailable) [ "$(grep -c "no probe of multicast stream" "$log")" = 1 ] || ok=0
        [ "$(grep -c "channel broadcast: multicast stream" "$log")" = 2 ] || ok=0 ;;
    esac
    local t; t=$(echo "$(date +%s.%N) - $start" | bc)
    if [ $rc -eq 0 ] && [ $ok -eq 1 ]; then
        printf "PASS %s on %s (%.1f s, %s multicast packets into host 2)\n" "$name" "$hosts" "$t" "$rx"; pass=$((pass+1))
    else
        printf "FAIL %s on %s (exit %s, expected %s, %.1f s)\n" "$name" "$hosts" "$rc" "$expect" "$t"
        tail -15 "$log" | sed 's/^/    /'; fail=$((fail+1))
    fi
}
on=STEADFAST_COLL_MCAST=on
two="$H1:2,$H2:2" three="$H1:2,$H2:1,$H3:1"
case_ forced "$two" mcast $on
case_ forced "$three" mcast $on
case_ faults "$three" mcast $on STEADFAST_COLL_CHANNEL_FAULTS=drop=0.02,corrupt=0.02,seed=3
case_ failover "$two" failover $on STEADFAST_COLL_CHANNEL_FAULTS=fail_after=20,seed=5
case_ silent-cut "$three" failover $on STEADFAST_COLL_CHANNEL_FAULTS=cut_after=30,seed=7
cut h2 off
case_ unavailable "$three" unavailable $on
case_ cut-midway "$three" cut-midway $on
case_ rule "$three" mcast
case_ forced-off "$two" tree STEADFAST_COLL_MCAST=off

# Every collective test of tests/c/coll on 1 to 8 ranks spread over the 3 hosts in blocks,
# with the multicast channels forced on.
printf '#!/bin/sh\nexec ip netns exec %s "%s" run --hosts "%s,%s,%s" --agent "ip netns exec {host}" --control-addr 10.77.2.1 --path tcp "$@"\n' \
    "$H1" "$prefix/bin/steadfast" "$H1" "$H2" "$H3" > "$build/hosts-mpiexec"
chmod +x "$build/hosts-mpiexec"
start=$(date +%s.%N)
if STEADFAST_COLL_MCAST=on CT_BUILD="$build/coll" "$root/tests/c/coll/run.sh" --mpicc "$prefix/bin/mpicc" \
    --mpiexec "$build/hosts-mpiexec" >"$build/hosts-coll.log" 2>&1; then
    printf "PASS tests/c/coll on 3 hosts, multicast forced on (%s; %.1f s)\n" "$(tail -1 "$build/hosts-coll.log")" \
        "$(echo "$(date +%s.%N) - $start" | bc)"
    pass=$((pass+1))
else
    echo "FAIL tests/c/coll on 3 hosts, multicast forced on"; grep FAIL "$build/hosts-coll.log" | sed 's/^/    /'
    fail=$((fail+1))
fi

# Ranks of different thread levels (even ranks at MPI_THREAD_MULTIPLE, which run their
# blocking broadcasts as requests) in multicast broadcasts, 4 ranks over the 3 hosts.
log="$build/hosts-mixed.log"
start=$(date +%s.%N)
if ! "$prefix/bin/mpicc" -O2 -g -Wall -Wextra -Werror -o "$build/mixed_bcast" "$root/tests/c/threads/mixed_bcast.c" 2>"$log"; then
    echo "FAIL mixed thread levels: threads/mixed_bcast.c does not compile"; fail=$((fail+1))
elif STEADFAST_COLL_MCAST=on STEADFAST_LOG=steadfast_core::coll::channels=info timeout -k 5 120 \
    "$build/hosts-mpiexec" -n 4 "$build/mixed_bcast" >"$log" 2>&1 && grep -q " No Errors" "$log" &&
    grep -q "multicast stream" "$log"; then
    printf "PASS mixed thread levels, multicast forced on (%.1f s)\n" "$(echo "$(date +%s.%N) - $start" | bc)"
    pass=$((pass+1))
else
    echo "FAIL mixed thread levels, multicast forced on"; tail -15 "$log" | sed 's/^/    /'; fail=$((fail+1))
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
