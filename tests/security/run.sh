#!/usr/bin/env bash
# Descriptor flood by another user (issue 21, defect 3): while a two-rank tcp job under
# `ulimit -n 256` calls MPI_Iprobe in a loop for 6 s, user 65534 opens 250 connections
# (half silent, half sending junk) to every port the ranks listen on. Every MPI_Iprobe
# must succeed and each rank must stay well below the limit.
#   tests/security/run.sh [PREFIX]      (PREFIX defaults to ./install)
# Skips (exit 0, says so) without root, setpriv, python3 or ss.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix=${1:-$root/install}
for c in setpriv ss; do
    command -v $c >/dev/null || { echo "SKIP security flood: $c not installed"; exit 0; }
done
# The system python (a per-user python may not be readable by user 65534).
py=/usr/bin/python3
[ -x "$py" ] || { echo "SKIP security flood: /usr/bin/python3 not installed"; exit 0; }
[ "$(id -u)" = 0 ] || { echo "SKIP security flood: needs root to act as another user"; exit 0; }
build=$(mktemp -d /tmp/steadfast-sec.XXXXXX)
trap 'rm -rf "$build"' EXIT
chmod 755 "$build"
cp "$here/flood.py" "$build/" && chmod 644 "$build/flood.py"
"$prefix/bin/mpicc" -o "$build/iprobe_flood" "$here/iprobe_flood.c" || exit 1
( ulimit -n 256; exec "$prefix/bin/mpiexec" -n 2 --path tcp --timeout 60 "$build/iprobe_flood" ) \
    > "$build/out.txt" 2>&1 &
job=$!
ports=""
for _ in $(seq 50); do
    sleep 0.1
    pids=$(pgrep -f "^$build/iprobe_flood" | tr '\n' ' ')
    ports=$(for p in $pids; do ss -ltnpH | grep "pid=$p," | awk '{print $4}' | sed 's/.*://'; done | sort -u | tr '\n' ' ')
    [ "$(echo $ports | wc -w)" -ge 4 ] && break
done
echo "ranks listen on: $ports"
flood=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$py" "$build/flood.py" $ports)
echo "$flood"
opened=$(echo "$flood" | grep -oE 'opened [0-9]+' | awk '{print $2}')
wait $job; rc=$?
cat "$build/out.txt"
most=$(grep -oE 'most open files [0-9]+' "$build/out.txt" | awk '{print $4}' | sort -n | tail -1)
if [ "${opened:-0}" -lt 200 ]; then
    echo "FAIL security flood: the flood opened only ${opened:-0} connections (test did not test)"
    exit 1
fi
if [ "$rc" = 0 ] && [ "$(grep -c ': 0 failed Iprobe calls' "$build/out.txt")" = 2 ] && [ "${most:-999}" -lt 200 ]; then
    echo "PASS security flood (most open files $most of 256)"
    exit 0
fi
echo "FAIL security flood (launcher exit $rc)"
exit 1
