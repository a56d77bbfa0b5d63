#!/usr/bin/env bash
# Runs LU for each class and rank count under Steadfast and, when installed, Debian's
# Open MPI and MPICH; prints one Markdown table row per run (bench/npb/LU.md).
#
#   bench/npb/lu-table.sh [--prefix PREFIX] [--classes "S W"] [--ranks "1 4"]
#                         [--mpis "steadfast openmpi mpich"] [--reps N]
#
# "steadfast:MODE" in --mpis runs our mpiexec with --ft MODE (abort, coordinated,
# pessimistic, causal): the fault-tolerance protocols side by side, without faults.
# Each MPI gets its own build of lu.c (build/npb/<mpi>/lu). With --reps N each case runs N
# times and the row shows the fastest time (and its Mop/s) followed by all times, since a
# shared machine only ever slows a run down. A case verifies only if every run verified.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix=$root/install
classes="S W"
ranks="1 4"
mpis="steadfast openmpi mpich"
reps=1
while [ $# -gt 0 ]; do
    case $1 in
        --prefix) prefix=$2; shift 2 ;;
        --classes) classes=$2; shift 2 ;;
        --ranks) ranks=$2; shift 2 ;;
        --mpis) mpis=$2; shift 2 ;;
        --reps) reps=$2; shift 2 ;;
        *) echo "usage: $0 [--prefix P] [--classes C] [--ranks R] [--mpis M] [--reps N]" >&2; exit 2 ;;
    esac
done

launcher() {   # launcher MPI NP: the command line that starts NP ranks
    case $1 in
        steadfast) echo "$prefix/bin/mpiexec -n $2" ;;
        steadfast:*) echo "$prefix/bin/mpiexec --ft ${1#steadfast:} -n $2" ;;
        # Two cores: Open MPI refuses more ranks than cores without --oversubscribe.
        openmpi) echo "mpirun.openmpi --oversubscribe --allow-run-as-root -n $2" ;;
        mpich) echo "mpiexec.mpich -n $2" ;;
    esac
}
compiler() {
    case $1 in
        steadfast*) echo "$prefix/bin/mpicc" ;;
        openmpi) echo "mpicc.openmpi" ;;
        mpich) echo "mpicc.mpich" ;;
    esac
}

echo "| class | ranks | MPI | best time (s) | Mop/s | verification | all times (s) |"
echo "|---|---|---|---|---|---|---|"
for mpi in $mpis; do
    cc=$(compiler "$mpi")
    if ! command -v "$cc" >/dev/null 2>&1; then
        echo "lu-table.sh: $cc not found, skipping $mpi" >&2
        continue
    fi
    "$here/build-lu.sh" "$cc" "$root/build/npb/${mpi%%:*}" >/dev/null || { echo "lu-table.sh: build with $cc failed" >&2; continue; }
    for class in $classes; do
        for np in $ranks; do
            best="" bestmops="" all="" verdict=SUCCESSFUL
            for rep in $(seq 1 "$reps"); do
                out="$root/build/npb/${mpi%%:*}/lu.$class.$np.${mpi#*:}.$rep.out"
                $(launcher "$mpi" "$np") "$root/build/npb/${mpi%%:*}/lu" "$class" >"$out" 2>&1 </dev/null
                t=$(sed -n 's/^ Time in seconds = *//p' "$out")
                mops=$(sed -n 's/^ Mop\/s total *= *//p' "$out")
                v=$(sed -n 's/^ Verification *= *//p' "$out")
                [ "$v" = SUCCESSFUL ] || verdict="${v:-no result} (see $out)"
                all="$all ${t:-?}"
                if [ -n "$t" ] && { [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; }; then
                    best=$t bestmops=$mops
                fi
            done
            echo "| $class | $np | $mpi | ${best:-?} | ${bestmops:-?} | $verdict |$all |"
        done
    done
done
