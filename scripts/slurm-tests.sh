#!/usr/bin/env bash
# Steadfast under the process managers of clusters, on a one-node Slurm cluster started by
# scripts/slurm-setup.sh:
#   - C test programs under `srun --mpi=pmi2`, `srun --mpi=pmix` (and, full run, `sbatch`), our `mpiexec` inside
#     `salloc`, and MPICH's `mpiexec.hydra` (PMI-1); over shm and (full run) tcp;
#   - MPI_Abort ends the job under each of them;
#   - abort mode: a rank that exits early ends the job (no hang) under srun and Hydra;
#   - run-through fault tolerance under srun: a task is killed, the survivors finish with the
#     right answer (examples/ft_solver.c) and no task but the killed one fails;
#   - (full run) MPICH's test suite, fast subset, with `srun --mpi=pmi2` and `--mpi=pmix`.
# A normal case passes when the launcher exits 0 and rank 0 printed " No Errors".
#
# Usage: scripts/slurm-tests.sh [--short] [PREFIX]      (PREFIX defaults to ./install)
#   --short   the subset `make test` runs (about 20 s once Slurm is installed)
# Skips (exit 0, with a message) when the cluster cannot start here (not root, no packages);
# the Hydra cases still run when `mpiexec.hydra` exists.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
short=no
[ "${1:-}" = --short ] && { short=yes; shift; }
prefix=${1:-$here/install}
mpicc="$prefix/bin/mpicc"
mpiexec="$prefix/bin/mpiexec"
build="$here/tests/c/build/sched"
mkdir -p "$build/logs"
touch "$build/.start"
[ -x "$mpiexec" ] || { echo "slurm-tests: $mpiexec not found (make install first)" >&2; exit 2; }

passed=0; failed=0; skipped=0
slurm=yes
"$here/scripts/slurm-setup.sh"
case $? in
    0) ;;
    77) slurm=no; echo "SKIP Slurm cases: the cluster cannot start here (reason above)" ;;
    *) echo "FAIL slurm-setup.sh"; failed=$((failed + 1)); slurm=no ;;
esac
hydra=yes
command -v mpiexec.hydra >/dev/null || { hydra=no; echo "SKIP Hydra cases: mpiexec.hydra not installed (apt-get install mpich)"; }

compile() {   # compile NAME SOURCE [flags...]
    local name=$1 src=$2; shift 2
    "$mpicc" -O2 -I"$here/tests/c" -o "$build/$name" "$src" "$@" >"$build/logs/$name.build" 2>&1 && return 0
    echo "FAIL compile $name"; sed 's/^/    | /' "$build/logs/$name.build"; failed=$((failed + 1)); return 1
}

# run LABEL TIMEOUT COMMAND...: passes on exit 0 with a " No Errors" line.
run() {
    local label=$1 t=$2; shift 2
    local log="$build/logs/$(echo "$label" | tr -c 'A-Za-z0-9_.-' '_').log"
    local t0; t0=$(date +%s.%N)
    timeout -k 5 "$t" "$@" >"$log" 2>&1 </dev/null
    local rc=$?
    local dt; dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    if [ $rc -eq 0 ] && grep -q '^ No Errors$' "$log"; then
        echo "PASS $label (${dt} s)"; passed=$((passed + 1))
    else
        echo "FAIL $label: exit $rc (${dt} s)"; tail -n 15 "$log" | sed 's/^/    | /'; failed=$((failed + 1))
    fi
}

# must_fail LABEL PATTERN RC COMMAND...: the job must end non-zero within 20 s, its output
# must match PATTERN (grep -E) or its status be RC (unless RC is -: Hydra may kill a rank
# before forwarding its last stderr line), and no rank may get past its receive from the
# failed rank.
must_fail() {
    local label=$1 pattern=$2 want=$3; shift 3
    local log="$build/logs/$(echo "$label" | tr -c 'A-Za-z0-9_.-' '_').log"
    local t0; t0=$(date +%s.%N)
    timeout -k 5 20 "$@" >"$log" 2>&1 </dev/null
    local rc=$?
    local dt; dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 -o "${dt%.*}" -lt 20 ] \
        && { grep -qE "$pattern" "$log" || [ "$want" = "$rc" ]; } && ! grep -qE 'receive from the (aborted|exited) rank completed' "$log"; then
        echo "PASS $label (exit $rc, ${dt} s)"; passed=$((passed + 1))
    else
        echo "FAIL $label: exit $rc (${dt} s)"; tail -n 15 "$log" | sed 's/^/    | /'; failed=$((failed + 1))
    fi
}

# ft_case LABEL NP KILLED COMMAND...: ft_solver with one rank killed must finish with the right
# answer on the survivors, and the launcher must report only the killed task as failed.
ft_case() {
    local label=$1 np=$2 killed=$3; shift 3
    local log="$build/logs/$(echo "$label" | tr -c 'A-Za-z0-9_.-' '_').log" why=""
    local t0; t0=$(date +%s.%N)
    STEADFAST_FT=run-through timeout -k 5 40 "$@" >"$log" 2>&1 </dev/null
    local rc=$?
    local dt; dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    [ $rc -eq 124 ] && why="timed out"
    grep -qE "answer correct \($np ranks started, $((np - 1)) finished\)" "$log" || why="${why:+$why; }no correct answer from $((np - 1)) survivors"
    grep -qE "world rank\(s\) $killed failed" "$log" || why="${why:+$why; }rank $killed not reported failed"
    # srun names every task that did not exit 0: only the killed one may appear.
    local bad; bad=$(grep -E 'srun: error: .*task' "$log" | grep -vE "task $killed: Killed" || true)
    [ -z "$bad" ] || why="${why:+$why; }other tasks failed: $bad"
    local left; left=$(pgrep -f -x -- "$build/ft_solver( .*)?" | tr '\n' ' ')
    [ -z "$left" ] || { why="${why:+$why; }ranks left running ($left)"; kill -9 $left 2>/dev/null; }
    if [ -z "$why" ]; then
        echo "PASS $label (${dt} s)"; passed=$((passed + 1))
    else
        echo "FAIL $label (${dt} s): $why"; tail -n 15 "$log" | sed 's/^/    | /'; failed=$((failed + 1))
    fi
}

progs="ring hosts"
[ $short = no ] && progs="ring hosts sendrecv anysource probe alltoall bcast comm_split"
src_of() {
    case $1 in
        hosts) echo "$here/tests/c/sched/hosts.c" ;;
        alltoall|bcast) echo "$here/tests/c/coll/$1.c" ;;
        comm_split) echo "$here/tests/c/comm/$1.c" ;;
        *) echo "$here/tests/c/$1.c" ;;
    esac
}
built=""
for p in $progs; do
    compile "$p" "$(src_of "$p")" && built="$built $p"
done
compile abort_rank "$here/tests/c/sched/abort_rank.c" || true
compile exit_code "$here/tests/c/exit_code.c" || true
compile ft_solver "$here/examples/ft_solver.c" -lm || true

if [ $short = yes ]; then paths="shm"; sizes="4"; else paths="shm tcp"; sizes="4 8"; fi
cd "$build"
for p in $built; do
    for np in $sizes; do
        for path in $paths; do
            e="env STEADFAST_PATH=$path"
            if [ $slurm = yes ]; then
                run "$p np=$np path=$path srun --mpi=pmi2" 60 $e srun -n "$np" --mpi=pmi2 "./$p"
                run "$p np=$np path=$path srun --mpi=pmix" 60 $e srun -n "$np" --mpi=pmix "./$p"
                run "$p np=$np path=$path salloc + mpiexec" 60 $e salloc -Q -n "$np" "$mpiexec" -n "$np" "./$p"
            fi
            [ $hydra = yes ] && run "$p np=$np path=$path mpiexec.hydra" 60 $e mpiexec.hydra -n "$np" "./$p"
        done
    done
done

# Tasks Slurm binds one CPU each (SLURM_CPU_BIND_TYPE set, as task/affinity does; here
# taskset stands in for the binding, the test cluster runs task/none) must still spin in
# their waits when the host has a CPU for each: they saw one CPU and yielded at once (a
# 1-byte ping-pong three times as slow). The engine's debug log says which it chose.
if [ $slurm = yes ] && [ -x ring ] && [ "$(nproc)" -ge 2 ]; then
    log="$build/logs/spin_slurm_bound.log"
    timeout -k 5 60 env STEADFAST_LOG=steadfast_core=debug SLURM_CPU_BIND_TYPE=mask_cpu: \
        srun -n 2 --mpi=pmi2 --export=ALL sh -c 'exec taskset -c "$SLURM_LOCALID" ./ring' >"$log" 2>&1 </dev/null
    n=$(grep -c 'ranks, [0-9]* CPUs for them: waits spin' "$log")
    if [ "$n" -eq 2 ] && grep -q '^ No Errors$' "$log"; then
        echo "PASS ring np=2 srun, tasks bound one CPU each: waits spin"; passed=$((passed + 1))
    else
        echo "FAIL ring np=2 srun, tasks bound one CPU each: $n of 2 ranks spin"; grep -E 'CPUs for them|Error' "$log" | head -4 | sed 's/^/    | /'; failed=$((failed + 1))
    fi
fi

if [ $short = no ] && [ -x ring ]; then
    # Without Slurm's libpmi2 the library speaks PMI-1 to the same pmi2 plugin.
    [ $slurm = yes ] && run "ring np=4 srun --mpi=pmi2, libpmi2 missing (PMI-1 fallback)" 60 \
        env STEADFAST_PMI2_LIB=/nonexistent/libpmi2.so.0 srun -n 4 --mpi=pmi2 ./ring
    # Hydra inside an allocation starts its proxies through srun.
    [ $slurm = yes ] && [ $hydra = yes ] && run "ring np=4 salloc + mpiexec.hydra" 60 \
        salloc -Q -n 4 mpiexec.hydra -n 4 ./ring
fi

# A batch job: sbatch runs the script on the allocation, each srun inside it is one step.
if [ $short = no ] && [ $slurm = yes ] && [ -x ring ] && [ -x hosts ]; then
    printf '#!/bin/sh\nsrun --mpi=pmix ./ring\nsrun --mpi=pmi2 ./hosts\n' >job.sh
    rm -f sbatch.out
    t0=$(date +%s)
    if timeout -k 5 90 sbatch -Q --wait -n 4 -o sbatch.out job.sh >"$build/logs/sbatch.log" 2>&1 \
        && [ "$(grep -c '^ No Errors$' sbatch.out 2>/dev/null)" = 2 ]; then
        echo "PASS sbatch -n 4 (ring under pmix, hosts under pmi2) ($(( $(date +%s) - t0 )) s)"; passed=$((passed + 1))
    else
        echo "FAIL sbatch -n 4"; cat "$build/logs/sbatch.log" sbatch.out 2>/dev/null | tail -n 15 | sed 's/^/    | /'
        failed=$((failed + 1))
    fi
fi

abort_msg='MPI_Abort called with error code 7'
# Abort mode without help from the process manager (no srun -K1): the survivors' membership
# service sees rank 1 die and they leave, so the job ends instead of hanging.
left_msg='rank\(s\) 1 failed; ending the job'
if [ -x abort_rank ] && [ -x exit_code ]; then
    if [ $slurm = yes ]; then
        must_fail "MPI_Abort srun --mpi=pmi2" "$abort_msg" - srun -n 3 --mpi=pmi2 ./abort_rank
        must_fail "rank exits early, abort mode, srun --mpi=pmix" "$left_msg" - srun -n 3 --mpi=pmix ./exit_code
        if [ $short = no ]; then
            must_fail "MPI_Abort srun --mpi=pmix" "$abort_msg" - srun -n 3 --mpi=pmix ./abort_rank
            must_fail "rank exits early, abort mode, srun --mpi=pmi2" "$left_msg" - srun -n 3 --mpi=pmi2 ./exit_code
        fi
    fi
    if [ $hydra = yes ]; then
        must_fail "MPI_Abort mpiexec.hydra" "$abort_msg" 7 mpiexec.hydra -n 3 ./abort_rank
        [ $short = no ] && must_fail "rank exits early, abort mode, mpiexec.hydra" "BAD TERMINATION|$left_msg" - mpiexec.hydra -n 3 ./exit_code
    fi
fi

if [ -x ft_solver ] && [ $slurm = yes ]; then
    ft_case "run-through srun --mpi=pmi2 -K0: kill rank 2 of 4" 4 2 \
        srun -K0 -n 4 --mpi=pmi2 ./ft_solver --kill-rank 2 --kill-iter 50
    if [ $short = no ]; then
        ft_case "run-through srun --mpi=pmix -K0: kill rank 0 of 4" 4 0 \
            srun -K0 -n 4 --mpi=pmix ./ft_solver --kill-rank 0 --kill-iter 35
        ft_case "run-through srun --mpi=pmi2 -K0 tcp: kill rank 5 of 8" 8 5 \
            env STEADFAST_PATH=tcp srun -K0 -n 8 --mpi=pmi2 ./ft_solver --kill-rank 5 --kill-iter 40
    fi
fi

# MPICH's test suite (fast subset) with srun as the launcher, graded by MPICH's rules.
if [ $short = no ] && [ $slurm = yes ] && [ -x "$here/scripts/mpich-tests.sh" ]; then
    for m in pmi2 pmix; do
        log="$build/logs/mpich-srun-$m.log"
        if "$here/scripts/mpich-tests.sh" --prefix "$prefix" --fast --mpiexec "srun -Q --mpi=$m" \
            --out "$build/logs/mpich-srun-$m.txt" >"$log" 2>&1; then
            echo "PASS MPICH fast subset under srun --mpi=$m: $(grep -E '^all ' "$log" | tail -n 1)"; passed=$((passed + 1))
        else
            echo "FAIL MPICH fast subset under srun --mpi=$m"; grep -E '^(FAIL|TIMEOUT)|^all ' "$log" | tail -n 15 | sed 's/^/    | /'
            failed=$((failed + 1))
        fi
    done
fi

# A killed rank leaves its shared-memory segment, so its job directory stays: remove those
# of this run.
left=$(find /dev/shm -maxdepth 1 -name 'steadfast-pmi-*' -newer "$build/.start" 2>/dev/null)
echo "job directories left in /dev/shm by this run (killed ranks leave theirs): $(echo "$left" | grep -c .)"
[ -n "$left" ] && rm -rf $left
echo "slurm/hydra: $passed passed, $failed failed"
[ $failed -eq 0 ]
