#!/usr/bin/env bash
# `--ft coordinated` across hosts: two hosts (network namespaces joined by a bridge, tcp
# between them), each with its own node-local checkpoint directory (a private mount of the
# same path), the launcher's checkpoint server holding the second copy of every image. A
# rank of the second host is killed after its host's copy of the last checkpoint was
# wiped: the job rolls back, every rank restores from its own host's copy, and the one whose
# copy is gone fetches it from the checkpoint server (only that one; the launcher only has
# the server check its copies, it fetches nothing). Then a whole host dies (its ranks are
# killed and its agent cannot reach it): its ranks move to the other host and restore from
# the server's copies. The output must be byte-identical to a fault-free run.
#
# Then message logging (`--ft pessimistic`) across the same two hosts with a standalone event
# logger on a third host (`steadfast event-logger`): a rank of the second host is killed; only
# it is started again, and it replays the receptions the logger on the third host kept.
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
    pkill -9 -f "ckpt-dir $work/mlog" 2>/dev/null
    pkill -9 -f "event-logger --dir $work/evlog" 2>/dev/null
    netns_down
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$prefix/bin/mpicc" -O2 -o "$work/ring" "$here/ring.c" || exit 1
netns_up 3 || { echo "FAIL coordinated across hosts: cannot build the namespaces"; exit 1; }
H1=$(ns h1) H2=$(ns h2)
mkdir -p "$work/ckpt" "$work/node-$H1" "$work/node-$H2"

# The remote-start agent: into the host's namespace, with the host's own disk mounted at
# the checkpoint directory's path (the launcher keeps its own files and the checkpoint
# server's copies at that path on its side).
cat > "$work/agent" <<EOF
#!/bin/sh
host=\$1
shift
# A host marked dead cannot be reached: the agent fails as ssh does.
[ -e "$work/dead-\$host" ] && exit 255
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

pass=0
fail=0
# scenario NAME SETUP CHECK: run the job, after checkpoint 2 do SETUP (a shell function),
# then expect CHECK (a shell function) to hold and the output to be unchanged.
scenario() {
    local name=$1 setup=$2 check=$3
    rm -rf "$work/ckpt" "$work/out" "$work/err" "$work/run.log" "$work"/dead-*
    mkdir -p "$work/ckpt"
    rm -rf "$work/node-$H1"/* "$work/node-$H2"/*
    ip netns exec "$H1" "$run" run "${common[@]}" --ft coordinated --ckpt-interval 500ms --ckpt-dir "$work/ckpt" \
        --max-restarts 6 "$work/ring" "${args[@]}" "$work/run.log" > "$work/out" 2> "$work/err" &
    job=$!
    local ok=1
    for _ in $(seq 1 600); do
        grep -q "checkpoint 2 committed" "$work/err" 2>/dev/null && break
        sleep 0.1
    done
    grep -q "checkpoint 2 committed" "$work/err" || ok=0
    w=$(awk '$1 == "wave" { print $2 }' "$work/ckpt/COMMITTED")
    $setup || ok=0
    timeout 180 tail --pid="$job" -f /dev/null
    wait "$job"
    local status=$?
    job=""
    if [ $ok = 1 ] && [ $status = 0 ] && cmp -s "$work/ref.out" "$work/out" && cmp -s "$work/ref.log" "$work/run.log" \
        && grep -q "every rank restored checkpoint" "$work/err" && $check; then
        echo "PASS coordinated across hosts: $name"
        pass=$((pass + 1))
    else
        echo "FAIL coordinated across hosts: $name (exit $status)"
        sed 's/^/    /' "$work/err" | tail -20
        cmp "$work/ref.out" "$work/out" | sed 's/^/    /'
        cmp "$work/ref.log" "$work/run.log" | sed 's/^/    /'
        fail=$((fail + 1))
    fi
}

# Host 2's copy of rank 3's part of the committed checkpoint is lost; rank 3 dies.
lose_copy() {
    rm -f "$work/node-$H2/wave-$w/rank-3.img" "$work/node-$H2/wave-$w/rank-3.rec"
    kill -9 "$(awk '$1 == 3 { print $2 }' "$work/ckpt/ranks")"
}
# Rank 3 alone fetched; the launcher pulled nothing into its own directory; no fallback.
only_rank_3_fetched() {
    grep -q "rank 3: the local copy of checkpoint" "$work/err" && ! grep -q "rank [012]: the local copy of checkpoint" "$work/err" \
        && ! grep -q "falling back" "$work/err" && [ -z "$(ls -A "$work/ckpt" | grep '^wave-')" ]
}
# Host 2 dies: its ranks are killed and it cannot be reached any more.
host_dies() {
    touch "$work/dead-$H2"
    kill -9 "$(awk '$1 == 2 { print $2 }' "$work/ckpt/ranks")" "$(awk '$1 == 3 { print $2 }' "$work/ckpt/ranks")"
}
# Ranks 2 and 3 moved to host 1 and restored from the server's copies.
moved_to_host_1() {
    grep -q "host $H2 cannot be reached; moving rank 2 to $H1, rank 3 to $H1" "$work/err" \
        && grep -q "rank 2: the local copy of checkpoint" "$work/err" && grep -q "rank 3: the local copy of checkpoint" "$work/err"
}

scenario "rank 3's host lost its copy; rank 3 alone fetched it from the checkpoint server" lose_copy only_rank_3_fetched
scenario "host 2 cannot be reached any more; its ranks move to host 1 and restore from the server's copies" host_dies moved_to_host_1

# Message logging with the event logger on host 3.
H3=$(ns h3)
ip netns exec "$H3" "$run" event-logger --dir "$work/evlog" --listen 10.77.2.3:7300 > "$work/evlog.out" 2>&1 &
evlog=$!
for _ in $(seq 1 500); do grep -q 'listening on' "$work/evlog.out" && break; sleep 0.02; done
rm -f "$work/out" "$work/err" "$work/run.log" "$work"/dead-*
ip netns exec "$H1" "$run" run "${common[@]}" --ft pessimistic --ckpt-dir "$work/mlog" --event-logger 10.77.2.3:7300 \
    --event-logger-key-file "$work/evlog/key" "$work/ring" "${args[@]}" "$work/run.log" > "$work/out" 2> "$work/err" &
job=$!
ok=1
for _ in $(seq 1 1200); do [ "$(wc -l < "$work/out" 2>/dev/null || echo 0)" -ge 100 ] && break; sleep 0.05; done
before=$(cat "$work/mlog/ranks" 2>/dev/null)
# The journals are on the logger's side while the job runs.
ls "$work"/evlog/job-*/rank-3.events > /dev/null 2>&1 || ok=0
kill -9 "$(awk '$1 == 3 { print $2 }' <<< "$before")" || ok=0
timeout 180 tail --pid="$job" -f /dev/null
wait "$job"
status=$?
job=""
kept=1
for r in 0 1 2; do [ "$(awk -v r=$r '$1 == r { print $2 }' <<< "$before")" = "$(awk -v r=$r '$1 == r { print $2 }' "$work/mlog/ranks")" ] || kept=0; done
if [ $ok = 1 ] && [ $status = 0 ] && [ $kept = 1 ] && cmp -s "$work/ref.out" "$work/out" && cmp -s "$work/ref.log" "$work/run.log" \
    && [ "$(grep -c 'starting it again' "$work/err")" = 1 ] && [ -z "$(ls "$work/evlog" | grep '^job-')" ]; then
    echo "PASS message logging across hosts: rank 3 killed, its receptions replayed from the event logger on a third host"
    pass=$((pass + 1))
else
    echo "FAIL message logging across hosts (exit $status; journals seen $ok; others kept $kept)"
    sed 's/^/    /' "$work/err" | tail -20
    sed 's/^/    event logger: /' "$work/evlog.out"
    cmp "$work/ref.out" "$work/out" | sed 's/^/    /'
    fail=$((fail + 1))
fi
kill "$evlog" 2>/dev/null
echo "checkpoints across hosts: $pass passed, $fail failed"
[ "$fail" = 0 ]
