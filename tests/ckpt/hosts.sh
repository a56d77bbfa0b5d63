#!/usr/bin/env bash
# `--ft coordinated` across hosts: two hosts (network namespaces joined by a bridge, tcp
# between them), each with its own node-local checkpoint directory (a private mount of the
# same path), the launcher's checkpoint server holding the second copy of every image. A
# rank of the second host is killed after its host's copy of the last checkpoint was
# wiped: the job rolls back, every rank restores from its own host's copy, and the one whose
# copy is gone fetches it from the checkpoint server (only that one; the launcher only has
# the server check its copies, it fetches nothing). The output must be byte-identical to a
# fault-free run.
#
#   tests/ckpt/hosts.sh [PREFIX]        (PREFIX: an installed Steadfast, default ./install)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix=$(cd "${1:-$root/install}" && pwd)
run=$prefix/bin/steadfast
# shellcheck source=scripts/netns-lib.sh
. "$root/scripts/netns-lib.sh"

if [ "$(uname -m)" != x86_64 ] || ! setarch -R true 2>/dev/null; then
    echo "coordinated across hosts: SKIP (needs x86-64 Linux and personality(ADDR_NO_RANDOMIZE))"
    exit 0
fi
if ! why=$(netns_can); then
    echo "coordinated across hosts: SKIP (cannot create network namespaces here: $why)"
    exit 0
fi
if ! unshare -m --propagation private true 2>/dev/null; then
    echo "coordinated across hosts: SKIP (cannot make private mounts here)"
    exit 0
fi
work=$(mktemp -d /tmp/steadfast-ckpt-hosts.XXXXXX)
job=""
cleanup() {
    [ -n "$job" ] && kill -9 "$job" 2>/dev/null
    pkill -9 -f "ckpt-dir $work/ckpt" 2>/dev/null
    netns_down
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$prefix/bin/mpicc" -O2 -o "$work/ring" "$here/ring.c" || exit 1
netns_up 2 || { echo "FAIL coordinated across hosts: cannot build the namespaces"; exit 1; }
H1=$(ns h1) H2=$(ns h2)
mkdir -p "$work/ckpt" "$work/node-$H1" "$work/node-$H2"

# The remote-start agent: into the host's namespace, with the host's own disk mounted at
# the checkpoint directory's path (the launcher keeps its own files and the checkpoint
# server's copies at that path on its side).
cat > "$work/agent" <<EOF
#!/bin/sh
host=\$1
shift
exec ip netns exec "\$host" unshare -m --propagation private \
    sh -c 'mount --bind "\$0" "\$1" && shift && exec "\$@"' "$work/node-\$host" "$work/ckpt" "\$@"
EOF
chmod +x "$work/agent"

args=(300 10000 100000)
common=(--hosts "$H1:2,$H2:2" --agent "$work/agent {host}" --control-addr 10.77.2.1 --path tcp -n 4)
# Rank 0 (host 1) writes the output file on host 1's view, which is the launcher's: the
# file path is outside the checkpoint directory, so both hosts see the same file.
ip netns exec "$H1" "$run" run "${common[@]}" "$work/ring" "${args[@]}" "$work/ref.log" > "$work/ref.out" 2> "$work/ref.err" \
    || { echo "FAIL coordinated across hosts: the fault-free run failed"; sed 's/^/    /' "$work/ref.err" | tail; exit 1; }

ip netns exec "$H1" "$run" run "${common[@]}" --ft coordinated --ckpt-interval 500ms --ckpt-dir "$work/ckpt" \
    "$work/ring" "${args[@]}" "$work/run.log" > "$work/out" 2> "$work/err" &
job=$!
ok=1
for _ in $(seq 1 600); do
    grep -q "checkpoint 2 committed" "$work/err" 2>/dev/null && break
    sleep 0.1
done
grep -q "checkpoint 2 committed" "$work/err" || ok=0
w=$(awk '$1 == "wave" { print $2 }' "$work/ckpt/COMMITTED")
# Host 2's copy of rank 3's part of the committed checkpoint is lost; rank 3 dies.
rm -f "$work/node-$H2/wave-$w/rank-3.img" "$work/node-$H2/wave-$w/rank-3.rec"
kill -9 "$(awk '$1 == 3 { print $2 }' "$work/ckpt/ranks")" 2>/dev/null || ok=0
timeout 180 tail --pid="$job" -f /dev/null
wait "$job"
status=$?
job=""
fetched=$(grep -c "fetched .* from the checkpoint server" "$work/err")
if [ $ok = 1 ] && [ $status = 0 ] && cmp -s "$work/ref.out" "$work/out" && cmp -s "$work/ref.log" "$work/run.log" \
    && grep -q "every rank restored checkpoint" "$work/err" && grep -q "rank 3: the local copy of checkpoint" "$work/err" \
    && ! grep -q "rank [012]: the local copy of checkpoint" "$work/err" && ! grep -q "falling back" "$work/err" \
    && [ -z "$(ls -A "$work/ckpt" | grep '^wave-')" ]; then
    echo "PASS coordinated across hosts: rank 3's host lost its copy; it alone fetched it from the checkpoint server ($fetched fetch line(s)); output unchanged"
    echo "coordinated across hosts: 1 passed, 0 failed"
else
    echo "FAIL coordinated across hosts (exit $status)"
    sed 's/^/    /' "$work/err" | tail -20
    cmp "$work/ref.out" "$work/out" | sed 's/^/    /'
    cmp "$work/ref.log" "$work/run.log" | sed 's/^/    /'
    echo "coordinated across hosts: 0 passed, 1 failed"
    exit 1
fi
