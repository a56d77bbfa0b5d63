#!/usr/bin/env bash
# MPICH's fault-tolerance tests (test/mpi/ft, 22 programs) with our launcher in run-through
# mode, graded by MPICH's own rules (scripts/mpich/runner.py). Fails unless every test passes,
# except ft/revoke_shrink, which no MPI can pass (docs/conformance.md explains why).
# Usage: scripts/ft-tests.sh [PREFIX] [RUNS]   (PREFIX defaults to ./install, RUNS to 1)
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
prefix=$(cd "${1:-$here/install}" && pwd)
runs=${2:-1}
out="$here/build/ft-tests"
mkdir -p "$out"
status=0
for run in $(seq 1 "$runs"); do
    "$here/scripts/mpich-tests.sh" --prefix "$prefix" --dirs ft \
        --mpiexec "$prefix/bin/mpiexec --ft run-through" --out "$out/run$run.json" | grep -E '^(PASS|FAIL|TIMEOUT|BUILD|SKIP)|^ft ' 
    python3 - "$out/run$run.json" "$run" <<'PY' || status=1
import json, sys
d = json.load(open(sys.argv[1]))
impossible = {"revoke_shrink"}
bad = [t for t in d["tests"] if t["status"] != "pass" and t["name"] not in impossible]
passed = sum(t["status"] == "pass" for t in d["tests"])
print(f"ft run {sys.argv[2]}: {passed} of {len(d['tests'])} pass; unexpected failures: {len(bad)}")
for t in bad:
    print(f"  {t['id']}: {t['status']} {t['reason']}")
sys.exit(1 if bad or len(d["tests"]) != 22 else 0)
PY
done
exit $status
