#!/usr/bin/env bash
# Steadfast on a multi-node Slurm cluster (scripts/slurm-cluster.sh: three emulated nodes,
# each a network + UTS namespace with its own host name, slurmd on each, slurmctld and the
# clients on a head namespace), torn down at the end whatever happens:
#   - ring and hosts (all pairs, 1 B - 1 MiB, every byte checked) with
#     `srun -N 3 -n 6 --mpi=pmi2` and `--mpi=pmix`; the path each rank picked for each peer
#     is checked: shm to the rank on its own node, tcp (or udp) to the four on the others;
#   - an sbatch job (srun steps under pmix and pmi2, then our mpiexec inside the batch script);
#   - `steadfast run` (mpiexec) inside `salloc -N 3`: the ranks land on the allocated nodes
#     (through srun) and talk across them;
#   - MPI_Abort and a run-through job under `srun -K0` that loses a task and finishes;
#   - recovery under our launcher in the allocation: relaunch of a killed rank on its node
#     (full run: also run-through);
#   - MPICH's Hydra inside the allocation (`salloc -N 3 mpiexec.hydra`: proxies started by
#     srun on each node);
#   - (full run) the same programs over the tcp path and the udp path between nodes, and
#     MPICH's test suite, fast subset, under `srun -N 3 --mpi=pmi2`.
# A normal case passes when the launcher exits 0 and rank 0 printed " No Errors".
#
# Usage: scripts/slurm-cluster-tests.sh [--short] [PREFIX]     (PREFIX defaults to ./install)
#   --short   the subset `make test` runs (about 20 s once Slurm is installed)
# Skips (exit 0, with a message) when the cluster cannot be built here (not root, no
# namespaces, no packages).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
short=no
[ "${1:-}" = --short ] && { short=yes; shift; }
prefix=${1:-$here/install}
prefix=$(cd "$prefix" 2>/dev/null && pwd) || { echo "slurm-cluster-tests: no install prefix ${1:-}" >&2; exit 2; }
mpicc="$prefix/bin/mpicc"
mpiexec="$prefix/bin/mpiexec"
build="$here/tests/c/build/cluster"
cluster="$here/scripts/slurm-cluster.sh"
[ -x "$mpiexec" ] || { echo "slurm-cluster-tests: $mpiexec not found (make install first)" >&2; exit 2; }
mkdir -p "$build/logs"
rm -f "$build"/logs/*

# One cluster per machine: a second run waits for the first (its `up` would tear the first's
# cluster down).
[ "$(id -u)" = 0 ] || { echo "SKIP multi-node Slurm cluster: needs root (namespaces, daemons)"; exit 0; }
exec 9>/run/steadfast-slurm-cluster.lock
flock -w 1200 9 || { echo "FAIL another run holds /run/steadfast-slurm-cluster.lock for 20 minutes"; exit 1; }
"$cluster" up 3
case $? in
    0) ;;
    77) echo "SKIP multi-node Slurm cluster: it cannot be built here (reason above)"; exit 0 ;;
    *) echo "FAIL slurm-cluster.sh up"; exit 1 ;;
esac
trap '"$cluster" down' EXIT
# on_head CMD...: CMD on the head node, where the Slurm clients run.
on_head() { "$cluster" exec "$@"; }

passed=0; failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1"; [ -n "${2:-}" ] && tail -n 15 "$2" | sed 's/^/    | /'; failed=$((failed + 1)); }
logname() { echo "$build/logs/$(echo "$1" | tr -c 'A-Za-z0-9_.-' '_').log"; }
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

compile() {   # compile NAME SOURCE [flags...]
    local name=$1 src=$2; shift 2
    "$mpicc" -O2 -I"$here/tests/c" -o "$build/$name" "$src" "$@" >"$build/logs/$name.build" 2>&1 && return 0
    fail "compile $name" "$build/logs/$name.build"; return 1
}
compile ring "$here/tests/c/ring.c"
compile hosts "$here/tests/c/sched/hosts.c"
compile abort_rank "$here/tests/c/sched/abort_rank.c"
compile ft_solver "$here/examples/ft_solver.c" -lm

# paths_ok LOG NET: every one of the 6 ranks (2 per node, in node order) logged shm to its
# node's other rank and NET to the 4 ranks of the other nodes.
paths_ok() {
    local log=$1 net=$2 r partner others want
    for r in 0 1 2 3 4 5; do
        partner=$((r ^ 1))
        case $((r / 2)) in 0) others="2-5" ;; 1) others="0-1,4-5" ;; 2) others="0-3" ;; esac
        want="rank=$r host=$((r / 2)) peers=shm:$partner $net:$others"
        sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -q "path to each peer $want\$" || { echo "rank $r: expected \"$want\"" >>"$log"; return 1; }
    done
}

# run LABEL NET COMMAND...: on the head node; exit 0 and " No Errors" from rank 0; with
# NET (tcp/udp) also the path check (STEADFAST_LOG makes each rank log its choice).
run() {
    local label=$1 net=$2; shift 2
    local log; log=$(logname "$label")
    local t0; t0=$(date +%s.%N)
    ( cd "$build" && STEADFAST_LOG=steadfast_paths::setup=debug timeout -k 5 120 "$cluster" exec "$@" ) >"$log" 2>&1 </dev/null
    local rc=$? dt; dt=$(elapsed "$t0")
    if [ $rc -ne 0 ] || ! grep -q '^ No Errors$' "$log"; then
        fail "$label: exit $rc (${dt} s)" "$log"
    elif [ "$net" != - ] && ! paths_ok "$log" "$net"; then
        fail "$label: wrong path between ranks (${dt} s)" "$log"
    else
        pass "$label (${dt} s)"
    fi
}

srun6="srun -N 3 -n 6 --ntasks-per-node=2"
for p in ring hosts; do
    [ -x "$build/$p" ] || continue
    run "$p srun --mpi=pmi2 (3 nodes, 6 ranks)" tcp $srun6 --mpi=pmi2 ./$p
    run "$p srun --mpi=pmix (3 nodes, 6 ranks)" tcp $srun6 --mpi=pmix ./$p
done
if [ $short = no ] && [ -x "$build/hosts" ]; then
    run "hosts srun --mpi=pmi2, udp between nodes" udp env STEADFAST_NET_PATH=udp $srun6 --mpi=pmi2 ./hosts
    run "hosts srun --mpi=pmix, tcp everywhere" - env STEADFAST_PATH=tcp $srun6 --mpi=pmix ./hosts
    run "ring srun --mpi=pmi2, 12 ranks" - srun -N 3 -n 12 --mpi=pmi2 ./ring
fi

# Our launcher inside an allocation: the ranks must land on the allocated nodes.
if [ -x "$build/hosts" ]; then
    log=$(logname "salloc mpiexec placement")
    t0=$(date +%s.%N)
    ( cd "$build" && timeout -k 5 60 "$cluster" exec salloc -Q -N 3 -n 6 --ntasks-per-node=2 "$mpiexec" -n 6 hostname ) >"$log" 2>&1 </dev/null
    rc=$?
    got=$(grep -E '^sfc-n[0-9]+$' "$log" | sort | uniq -c | awk '{ printf "%s:%s ", $2, $1 }')
    if [ $rc -eq 0 ] && [ "$got" = "sfc-n1:2 sfc-n2:2 sfc-n3:2 " ]; then
        pass "steadfast run inside salloc -N 3 places 2 ranks per node ($(elapsed "$t0") s)"
    else
        fail "steadfast run inside salloc -N 3: exit $rc, ranks on: ${got:-none}" "$log"
    fi
    # Our launcher's default between hosts is the reliable udp path.
    run "hosts salloc -N 3 + mpiexec -n 6" udp salloc -Q -N 3 -n 6 --ntasks-per-node=2 "$mpiexec" -n 6 ./hosts
    [ $short = no ] && run "ring salloc -N 3 + mpiexec -n 12 (oversubscribed)" - \
        salloc -Q -N 3 -n 6 --ntasks-per-node=2 "$mpiexec" -n 12 ./ring
fi

# A batch job: the script runs on the first node; each srun is a step over the allocation,
# and our mpiexec places its ranks through srun as well.
if [ $short = no ] && [ -x "$build/ring" ] && [ -x "$build/hosts" ]; then
    printf '#!/bin/sh\nsrun --mpi=pmix ./ring\nsrun --mpi=pmi2 ./hosts\n%s -n 6 ./hosts\n' "$mpiexec" >"$build/job.sh"
    rm -f "$build/sbatch.out"
    t0=$(date +%s.%N)
    log=$(logname sbatch)
    if ( cd "$build" && timeout -k 5 120 "$cluster" exec sbatch -Q --wait -N 3 -n 6 --ntasks-per-node=2 -o sbatch.out job.sh ) >"$log" 2>&1 \
        && [ "$(grep -c '^ No Errors$' "$build/sbatch.out" 2>/dev/null)" = 3 ]; then
        pass "sbatch -N 3 -n 6: srun --mpi=pmix ring, srun --mpi=pmi2 hosts, mpiexec hosts ($(elapsed "$t0") s)"
    else
        cat "$build/sbatch.out" >>"$log" 2>/dev/null
        fail "sbatch -N 3 -n 6" "$log"
    fi
fi

# MPI_Abort across nodes ends the whole step quickly.
if [ -x "$build/abort_rank" ]; then
    log=$(logname "MPI_Abort srun pmi2")
    t0=$(date +%s.%N)
    ( cd "$build" && timeout -k 5 30 "$cluster" exec $srun6 --mpi=pmi2 ./abort_rank ) >"$log" 2>&1 </dev/null
    rc=$?
    # 137: Slurm ends the step with SIGKILL; a timeout would show as 124.
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q 'MPI_Abort called with error code 7' "$log" \
        && ! grep -qE 'receive from the (aborted|exited) rank completed' "$log"; then
        pass "MPI_Abort srun --mpi=pmi2 across 3 nodes (exit $rc, $(elapsed "$t0") s)"
    else
        fail "MPI_Abort srun --mpi=pmi2 across 3 nodes: exit $rc" "$log"
    fi
fi

# ft_case LABEL NP KILLED COMMAND...: ft_solver loses rank KILLED; the survivors must finish
# with the right answer, and srun may report only the killed task as failed.
ft_case() {
    local label=$1 np=$2 killed=$3; shift 3
    local log; log=$(logname "$label")
    local why="" t0; t0=$(date +%s.%N)
    ( cd "$build" && STEADFAST_FT=run-through timeout -k 5 90 "$cluster" exec "$@" ) >"$log" 2>&1 </dev/null
    local rc=$?
    [ $rc -eq 124 ] && why="timed out"
    grep -qE "answer correct \($np ranks started, $((np - 1)) finished\)" "$log" || why="${why:+$why; }no correct answer from $((np - 1)) survivors"
    grep -qE "world rank\(s\) $killed failed" "$log" || why="${why:+$why; }rank $killed not reported failed"
    local bad; bad=$(grep -E 'srun: error: .*task' "$log" | grep -vE "task $killed: Killed" || true)
    [ -z "$bad" ] || why="${why:+$why; }other tasks failed: $bad"
    if [ -z "$why" ]; then pass "$label ($(elapsed "$t0") s)"; else fail "$label: $why" "$log"; fi
}
if [ -x "$build/ft_solver" ]; then
    ft_case "run-through srun -K0 --mpi=pmi2 -N 3: kill rank 3 of 6" 6 3 \
        $srun6 -K0 --mpi=pmi2 ./ft_solver --kill-rank 3 --kill-iter 50
    [ $short = no ] && ft_case "run-through srun -K0 --mpi=pmix -N 3: kill rank 0 of 6" 6 0 \
        $srun6 -K0 --mpi=pmix ./ft_solver --kill-rank 0 --kill-iter 35
fi

# Recovery under our launcher inside the allocation: it learns of a failure from the rank's
# srun exiting, so the modes that need it (relaunch) work across nodes too.
if [ -x "$build/ft_solver" ] && [ $short = no ]; then
    label="run-through salloc -N 3 + mpiexec --ft run-through: kill rank 3 of 6"
    log=$(logname "$label"); t0=$(date +%s.%N)
    ( cd "$build" && timeout -k 5 90 "$cluster" exec salloc -Q -N 3 -n 6 --ntasks-per-node=2 \
        "$mpiexec" --ft run-through -n 6 ./ft_solver --kill-rank 3 --kill-iter 50 ) >"$log" 2>&1 </dev/null
    rc=$?; why=""
    grep -qE "answer correct \(6 ranks started, 5 finished\)" "$log" || why="no correct answer from 5 survivors"
    grep -qE "world rank\(s\) 3 failed" "$log" || why="${why:+$why; }rank 3 not reported failed"
    [ "$(grep -c 'srun: error' "$log")" = 1 ] || why="${why:+$why; }not exactly one failed srun"
    if [ -z "$why" ]; then pass "$label ($(elapsed "$t0") s)"; else fail "$label: exit $rc; $why" "$log"; fi
fi
if compile relaunch "$here/tests/c/ft/relaunch.c"; then
    label="relaunch salloc -N 2 + mpiexec --on-failure relaunch: rank 2 started again on its node"
    log=$(logname "$label"); t0=$(date +%s.%N)
    ( cd "$build" && timeout -k 5 90 "$cluster" exec salloc -Q -N 2 -n 4 --ntasks-per-node=2 \
        "$mpiexec" --on-failure relaunch -n 4 ./relaunch ) >"$log" 2>&1 </dev/null
    rc=$?; why=""
    [ $rc -eq 0 ] || why="exit $rc, expected 0"
    for want in "rank 0 incarnation 0: ok" "rank 1 incarnation 0: ok" "rank 2 incarnation 1: ok" "rank 3 incarnation 0: ok"; do
        grep -q "^$want" "$log" || why="${why:+$why; }no '$want' line"
    done
    grep -q "rank 2 (pid [0-9]*) .*; starting it again as incarnation 1" "$log" || why="${why:+$why; }the launcher did not report the relaunch"
    if [ -z "$why" ]; then pass "$label ($(elapsed "$t0") s)"; else fail "$label: $why" "$log"; fi
fi

# MPICH's Hydra inside the allocation starts one proxy per node through srun (PMI-1).
if command -v mpiexec.hydra >/dev/null && [ -x "$build/hosts" ]; then
    run "hosts salloc -N 3 + mpiexec.hydra -n 6 (PMI-1)" tcp \
        salloc -Q -N 3 -n 6 --ntasks-per-node=2 mpiexec.hydra -n 6 ./hosts
else
    echo "SKIP Hydra across nodes: mpiexec.hydra not installed"
fi

# MPICH's test suite (fast subset) with srun over the three nodes as the launcher.
if [ $short = no ] && [ -x "$here/scripts/mpich-tests.sh" ]; then
    log="$build/logs/mpich-srun-cluster.log"
    t0=$(date +%s.%N)
    if "$here/scripts/mpich-tests.sh" --prefix "$prefix" --fast \
        --mpiexec "$cluster exec srun -Q -N 1-3 -m cyclic --mpi=pmi2" \
        --out "$build/logs/mpich-srun-cluster.txt" >"$log" 2>&1; then
        pass "MPICH fast subset under srun -N 1-3 -m cyclic --mpi=pmi2: $(grep -E '^all ' "$log" | tail -n 1) ($(elapsed "$t0") s)"
    else
        fail "MPICH fast subset under srun on 3 nodes" "$log"
        grep -E '^(FAIL|TIMEOUT)' "$log" | head -n 20 | sed 's/^/    | /'
    fi
fi

echo "multi-node slurm: $passed passed, $failed failed"
[ $failed -eq 0 ]
