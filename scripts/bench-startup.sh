#!/usr/bin/env bash
# Start-up time of an N-rank job (MPI_Init + MPI_Finalize, nothing else) under srun with
# PMI-2 and PMIx, under our launcher and under MPICH's Hydra, for Steadfast and, where Debian's
# packages are installed, for MPICH (mpicc.mpich) and Open MPI (mpicc.openmpi; its Debian build
# supports only PMIx under srun). Wall time of the whole launch, median of REPS runs.
#
# Usage: scripts/bench-startup.sh [--cluster] [-n N] [-r REPS] [PREFIX]   (64 ranks, 5 runs)
#   default     the one-node cluster of scripts/slurm-setup.sh
#   --cluster   the three emulated nodes of scripts/slurm-cluster.sh (brought up, then torn
#               down): srun -N 3, our launcher inside `salloc -N 3` (ranks started through
#               srun) and with --hosts and a namespace agent (as ssh would), Hydra and Open
#               MPI's mpirun inside the allocation (both start their daemons through srun)
# N may exceed the cores: srun -O oversubscribes (the emulated nodes declare 32 CPUs each).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
np=64; reps=5; cluster=no
while [ $# -gt 0 ]; do
    case $1 in
        -n) np=$2; shift 2 ;;
        -r) reps=$2; shift 2 ;;
        --cluster) cluster=yes; shift ;;
        *) break ;;
    esac
done
prefix=${1:-$here/install}
build="$here/tests/c/build/startup"
mkdir -p "$build"
if [ $cluster = yes ]; then
    # The lock scripts/slurm-cluster-tests.sh takes: one cluster per machine.
    exec 9>/run/steadfast-slurm-cluster.lock
    flock -w 1200 9 || { echo "bench-startup: the multi-node cluster stays busy" >&2; exit 1; }
    "$here/scripts/slurm-cluster.sh" up 3 >/dev/null || { echo "bench-startup: the multi-node cluster is not available" >&2; exit 1; }
    trap '"$here/scripts/slurm-cluster.sh" down' EXIT
else
    "$here/scripts/slurm-setup.sh" >/dev/null || { echo "bench-startup: the Slurm cluster is not available" >&2; exit 1; }
fi
cat >"$build/hello.c" <<'EOF'
#include <mpi.h>
int main(int argc, char **argv) { MPI_Init(&argc, &argv); MPI_Finalize(); return 0; }
EOF
"$prefix/bin/mpicc" -O2 -o "$build/hello.steadfast" "$build/hello.c" || exit 1
command -v mpicc.mpich >/dev/null && mpicc.mpich -O2 -o "$build/hello.mpich" "$build/hello.c" 2>/dev/null
command -v mpicc.openmpi >/dev/null && mpicc.openmpi -O2 -o "$build/hello.ompi" "$build/hello.c" 2>/dev/null

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "%.2f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

measure() {   # measure LABEL COMMAND...: median of the runs that succeeded; failures counted
    local label=$1; shift
    local times="" bad=0 i
    for i in $(seq "$reps"); do
        local t0; t0=$(date +%s.%N)
        if timeout -k 5 120 "$@" >/dev/null 2>"$build/last.err" </dev/null; then
            times="$times $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')"
        else
            bad=$((bad + 1)); cp "$build/last.err" "$build/failed.$bad.err"
            echo "    run $i of \"$label\" failed (stderr in $build/failed.$bad.err):" >&2
            sed 's/^/    /' "$build/last.err" | tail -n 3 >&2
            # A launcher that cannot start at all fails every time: stop after two.
            [ -z "$times" ] && [ $bad -ge 2 ] && break
        fi
    done
    local t="failed"
    [ -n "$times" ] && t=$(printf '%s\n' $times | median)
    [ $bad -gt 0 ] && t="$t ($bad failed)"
    printf '| %-52s | %8s |\n' "$label" "$t"
}

cd "$build"
if [ $cluster = yes ]; then
    c="$here/scripts/slurm-cluster.sh"
    on="$c exec"
    # Open MPI refuses root unless told; its mpirun starts one daemon per node through srun.
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    echo "Start-up of $np ranks on 3 emulated nodes (MPI_Init + MPI_Finalize), median of $reps runs, seconds; $(nproc) cores"
    printf '| %-52s | %8s |\n' "library, launcher" "time"
    printf '|%s|%s|\n' "------------------------------------------------------" "----------"
    measure "Steadfast, srun -N 3 --mpi=pmi2" $on srun -Q -N 3 -n "$np" --mpi=pmi2 ./hello.steadfast
    measure "Steadfast, srun -N 3 --mpi=pmix" $on srun -Q -N 3 -n "$np" --mpi=pmix ./hello.steadfast
    measure "Steadfast, salloc -N 3 + steadfast run (srun per rank)" $on salloc -Q -N 3 -n "$np" "$prefix/bin/mpiexec" -n "$np" ./hello.steadfast
    measure "Steadfast, steadfast run --hosts (namespace agent)" $on "$prefix/bin/mpiexec" -n "$np" \
        --hosts sfc-n1,sfc-n2,sfc-n3 --agent "$c on {host}" ./hello.steadfast
    command -v mpiexec.hydra >/dev/null && measure "Steadfast, salloc -N 3 + mpiexec.hydra (PMI-1)" \
        $on salloc -Q -N 3 -n "$np" mpiexec.hydra -n "$np" ./hello.steadfast
    if [ -x hello.mpich ]; then
        measure "MPICH, srun -N 3 --mpi=pmi2" $on srun -Q -N 3 -n "$np" --mpi=pmi2 ./hello.mpich
        measure "MPICH, salloc -N 3 + mpiexec.hydra" $on salloc -Q -N 3 -n "$np" mpiexec.hydra -n "$np" ./hello.mpich
    fi
    if [ -x hello.ompi ]; then
        measure "Open MPI, srun -N 3 --mpi=pmix" $on srun -Q -N 3 -n "$np" --mpi=pmix ./hello.ompi
        measure "Open MPI, salloc -N 3 + mpirun" $on salloc -Q -N 3 -n "$np" mpirun.openmpi -n "$np" ./hello.ompi
    fi
    exit 0
fi
cd "$build"
echo "Start-up of $np ranks (MPI_Init + MPI_Finalize), median of $reps runs, seconds; $(nproc) cores"
printf '| %-52s | %8s |\n' "library, launcher" "time"
printf '|%s|%s|\n' "--------------------------------------------" "----------"
measure "Steadfast, srun --mpi=pmi2" srun -Q -O -n "$np" --mpi=pmi2 ./hello.steadfast
measure "Steadfast, srun --mpi=pmix" srun -Q -O -n "$np" --mpi=pmix ./hello.steadfast
measure "Steadfast, steadfast run (mpiexec)" "$prefix/bin/mpiexec" -n "$np" ./hello.steadfast
command -v mpiexec.hydra >/dev/null && measure "Steadfast, mpiexec.hydra (PMI-1)" mpiexec.hydra -n "$np" ./hello.steadfast
if [ -x hello.mpich ]; then
    measure "MPICH, srun --mpi=pmi2" srun -Q -O -n "$np" --mpi=pmi2 ./hello.mpich
    measure "MPICH, mpiexec.hydra" mpiexec.hydra -n "$np" ./hello.mpich
fi
if [ -x hello.ompi ]; then
    measure "Open MPI, srun --mpi=pmix" srun -Q -O -n "$np" --mpi=pmix ./hello.ompi
    measure "Open MPI, mpirun.openmpi" mpirun.openmpi --oversubscribe --allow-run-as-root -n "$np" ./hello.ompi
fi
