#!/usr/bin/env bash
# Builds the LU benchmark with the given MPI C compiler wrapper.
# Usage: bench/npb/build-lu.sh MPICC OUTDIR    (writes OUTDIR/lu)
# Example: bench/npb/build-lu.sh install/bin/mpicc build/npb
#          bench/npb/build-lu.sh mpicc.openmpi build/npb-openmpi
set -eu
if [ $# -ne 2 ]; then
    echo "usage: $0 MPICC OUTDIR" >&2
    exit 2
fi
mpicc=$1
out=$2
src=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
# -O3 without -ffast-math: verification compares to 1e-8 and reassociation is not needed.
# MPICH's MPI_STATUSES_IGNORE is a sentinel pointer that GCC takes for a zero-sized array
# (-Wstringop-overflow); that warning says nothing about this program.
"$mpicc" -O3 -std=c11 -Wall -Wextra -Wno-stringop-overflow -o "$out/lu" "$src/lu.c" -lm
echo "built $out/lu with $mpicc"
