#!/usr/bin/env bash
# Channel broadcast on one host (docs/chbcast.md): chbcast.c under the selection rule, forced
# on and forced off, with 16, 2 and 1 channels, with the paper's delayed and with early
# synchronization (the default: half the channels; every broadcast), without CRC, with
# lost and damaged channel writes, and with the channels failing part way (every broadcast
# then goes over the tree), and on a /dev/shm too small for them.
#   tests/c/chbcast/run.sh [PREFIX]      (about 30 s)
# Each case must print " No Errors"; the log must show the segment was (or was not) made,
# and the failover case that the primitive was abandoned.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
prefix=${1:-$root/install}
build=${CT_BUILD:-$root/tests/c/build/chbcast}
mkdir -p "$build"
if ! "$prefix/bin/mpicc" -O2 -g -Wall -Wextra -Werror -o "$build/chbcast" "$here/chbcast.c" 2>"$build/cc.log"; then
    echo "FAIL chbcast: does not compile"; sed 's/^/    /' "$build/cc.log" | head -20; exit 1
fi
pass=0; fail=0
wrap=()
# The MPI_Ibcast phases of chbcast.c, in every case (hosts.sh runs without them).
phases=(ibcast)
# case NAME NP EXPECT ENV...   (EXPECT: channels, tree, failover; run under "${wrap[@]}")
case_() {
    local name=$1 np=$2 expect=$3; shift 3
    local log="$build/$name.$np.log"
    local start; start=$(date +%s.%N)
    "${wrap[@]}" env STEADFAST_LOG=steadfast_core::coll::channels=info "$@" \
        timeout -k 5 120 "$prefix/bin/mpiexec" -n "$np" "$build/chbcast" 300 "${phases[@]}" >"$log" 2>&1
    local rc=$? ok=1
    grep -q " No Errors" "$log" || ok=0
    case $expect in
    channels) grep -q "channel broadcast: segment" "$log" || ok=0 ;;
    tree) ! grep -q "channel broadcast: segment" "$log" || ok=0 ;;
    failover) grep -q "primitive abandoned" "$log" || ok=0 ;;
    esac
    local t; t=$(echo "$(date +%s.%N) - $start" | bc)
    if [ $rc -eq 0 ] && [ $ok -eq 1 ]; then
        printf "PASS %s np=%s (%.1f s)\n" "$name" "$np" "$t"; pass=$((pass+1))
    else
        printf "FAIL %s np=%s (exit %s, expected %s, %.1f s)\n" "$name" "$np" "$rc" "$expect" "$t"
        tail -15 "$log" | sed 's/^/    /'; fail=$((fail+1))
    fi
}
on=STEADFAST_COLL_FORCE=bcast=channels
for np in 4 8; do
    case_ forced "$np" channels $on
    case_ faults "$np" channels $on STEADFAST_COLL_CHANNEL_FAULTS=drop=0.02,corrupt=0.02,seed=$np
done
# A communicator freed right after its last broadcasts (chbcast.c's churn phase) while a
# rank still waits for a frame it lost: its root must keep answering (the freed
# communicator's driver stays until its last synchronization). Both seeds hung in
# MPI_Bcast on the freed communicator, its roots in the next MPI_Comm_split.
for seed in 8 9; do
    case_ free-faults-seed$seed 4 channels $on STEADFAST_COLL_CHANNEL_FAULTS=drop=0.02,corrupt=0.02,seed=$seed
done
case_ rule 4 channels
case_ forced-off 4 tree STEADFAST_COLL_FORCE=bcast=binomial
case_ two-channels 8 channels $on STEADFAST_COLL_CHANNELS=2
case_ one-channel-no-crc 4 channels $on STEADFAST_COLL_CHANNELS=1 STEADFAST_COLL_CHANNEL_CRC=0
case_ delayed-sync 4 channels $on STEADFAST_COLL_CHANNEL_SYNC=0
case_ early-sync-every-one 8 channels $on STEADFAST_COLL_CHANNELS=4 STEADFAST_COLL_CHANNEL_SYNC=1
case_ delayed-sync-faults 8 channels $on STEADFAST_COLL_CHANNEL_SYNC=0 STEADFAST_COLL_CHANNEL_FAULTS=drop=0.02,corrupt=0.02,seed=5
case_ failover 4 failover $on STEADFAST_COLL_CHANNEL_FAULTS=fail_after=20,drop=0.01,seed=9
case_ failover 8 failover $on STEADFAST_COLL_CHANNEL_FAULTS=fail_after=20,seed=11
# A /dev/shm too small for the channels (a container's is often 64 MiB): a channel's pages
# are backed before a root writes them, and only while half the shared memory unpromised at
# the start stays so (the rings' and slot segments' unwritten pages count as taken), so the
# broadcasts move to the tree instead of a SIGBUS.
# Needs a private mount namespace (root); skipped otherwise.
if [ "$(id -u)" = 0 ] && unshare -m --propagation private true 2>/dev/null; then
    wrap=(unshare -m --propagation private sh -c 'mount -t tmpfs -o size=12m tmpfs /dev/shm && exec "$@"' sh)
    case_ small-shm 4 failover $on
    wrap=()
else
    echo "SKIP small-shm: a private mount namespace needs root"
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
