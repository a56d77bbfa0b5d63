#!/usr/bin/env bash
# The slot collectives and the shm rings on a /dev/shm too small for their default sizes (a
# container's is often 64 MiB; here 2 to 12 MiB, in a private mount namespace): big_slots.c
# and many_segments.c on 4 and 8 ranks must pass, their large calls taking the messages
# through rings sized to what fits (docs/collectives.md, STEADFAST_SHM_RING in
# docs/configuration.md).
#   tests/c/coll/small-shm.sh [PREFIX]      (needs root for the mount namespace; skips otherwise)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
prefix=${1:-$root/install}
build=${CT_BUILD:-$root/tests/c/build/coll-small-shm}
mkdir -p "$build"
if [ "$(id -u)" != 0 ] || ! unshare -m --propagation private true 2>/dev/null; then
    echo "SKIP small-shm: a private mount namespace needs root"; exit 0
fi
for prog in big_slots many_segments; do
    if ! "$prefix/bin/mpicc" -O2 -g -Wall -Wextra -Werror -o "$build/$prog" "$here/$prog.c" 2>"$build/cc.log"; then
        echo "FAIL $prog: does not compile"; sed 's/^/    /' "$build/cc.log" | head -20; exit 1
    fi
done
pass=0; fail=0
# many_segments.c: several communicators' slot and channel segments and every pair's rings
# on one small /dev/shm (each segment sized by free space alone overcommitted it: SIGBUS).
for run in big_slots:4:4m big_slots:8:4m big_slots:8:2m many_segments:4:4m many_segments:8:2m many_segments:8:12m; do
    IFS=: read -r prog np size <<<"$run"
    log="$build/small-shm.$prog.$np.$size.log"
    unshare -m --propagation private sh -c "mount -t tmpfs -o size=$size tmpfs /dev/shm && exec \"\$@\"" sh \
        env STEADFAST_LOG=steadfast_core::coll::slots=info timeout -k 5 120 "$prefix/bin/mpiexec" -n "$np" "$build/$prog" >"$log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q " No Errors" "$log"; then
        echo "PASS small-shm $prog np=$np /dev/shm=$size"; pass=$((pass+1))
    else
        echo "FAIL small-shm $prog np=$np /dev/shm=$size (exit $rc)"; tail -15 "$log" | sed 's/^/    /'; fail=$((fail+1))
    fi
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
