#!/usr/bin/env bash
# Run the NPB kernels with Steadfast, Open MPI and MPICH and print a markdown table of
# times (the median of --reps runs) and Mop/s. A run that does not verify shows FAILED.
#   bench/npb/compare.sh [--prefix DIR] [--kernels "cg is mg ft"] [--classes "S W A"]
#                        [--ranks "4 8"] [--mpis "steadfast openmpi mpich"] [--reps N]
# Logs go to bench/results/npb-<time>/. Open MPI and MPICH are skipped when their
# wrappers are not installed (apt-get install openmpi-bin libopenmpi-dev mpich libmpich-dev).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix=$root/install kernels="cg is mg ft" classes="S W A" ranks="4 8"
mpis="steadfast openmpi mpich" reps=1
while [ $# -gt 0 ]; do
    case $1 in
    --prefix) prefix=$2; shift 2 ;;
    --kernels) kernels=$2; shift 2 ;;
    --classes) classes=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --mpis) mpis=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    *) echo "compare.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
logs=$root/bench/results/npb-$(date -u +%Y%m%dT%H%M%S)
mkdir -p "$logs"

wrapper() {
    case $1 in
    steadfast) echo "$prefix/bin/mpicc" ;;
    openmpi) echo mpicc.openmpi ;;
    mpich) echo mpicc.mpich ;;
    esac
}
launch() {   # launch MPI N: the launcher command line, launcher binding off everywhere
    case $1 in
    steadfast) echo "$prefix/bin/mpiexec -n $2" ;;
    openmpi) echo "mpirun.openmpi --oversubscribe --allow-run-as-root --bind-to none --mca pml ob1 -n $2" ;;
    mpich) echo "mpiexec.mpich -bind-to none -n $2" ;;
    esac
}

usable=""
for mpi in $mpis; do
    cc=$(wrapper "$mpi")
    if ! command -v "$cc" >/dev/null 2>&1 && [ ! -x "$cc" ]; then
        echo "skipping $mpi: $cc not found" >&2; continue
    fi
    if "$here/build.sh" "$cc" "$logs/bin-$mpi" >"$logs/build-$mpi.log" 2>&1; then
        usable="$usable $mpi"
    else
        echo "skipping $mpi: build failed ($logs/build-$mpi.log)" >&2
    fi
done

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $reps run(s) per cell, median"
echo
header="| kernel | class | ranks |"; rule="|---|---|---|"
for mpi in $usable; do header="$header $mpi s (Mop/s) |"; rule="$rule---|"; done
echo "$header"; echo "$rule"
for kernel in $kernels; do
    for cls in $classes; do
        for n in $ranks; do
            row="| $kernel | $cls | $n |"
            for mpi in $usable; do
                times=""; mops=""; ok=1
                for rep in $(seq "$reps"); do
                    log="$logs/$kernel.$cls.$n.$mpi.$rep.log"
                    # shellcheck disable=SC2046  # the launcher line is a list of words
                    timeout -k 5 900 $(launch "$mpi" "$n") "$logs/bin-$mpi/$kernel" "$cls" \
                        >"$log" 2>&1 </dev/null || ok=0
                    grep -qE '^ Verification += +SUCCESSFUL$' "$log" || ok=0
                    times="$times $(awk '/^ Time in seconds/ {print $NF}' "$log")"
                    mops="$mops $(awk '/^ Mop\/s total/ {print $NF}' "$log")"
                done
                if [ "$ok" -eq 1 ]; then
                    t=$(printf '%s\n' $times | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
                    m=$(printf '%s\n' $mops | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
                    row="$row $t ($m) |"
                else
                    row="$row FAILED |"
                fi
            done
            echo "$row"
        done
    done
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); logs in $logs"
