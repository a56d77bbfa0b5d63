#!/usr/bin/env bash
# Build the NPB kernels with any MPI's C compiler wrapper.
#   bench/npb/build.sh [MPICC [OUTDIR]]
# MPICC defaults to ./install/bin/mpicc, OUTDIR to build/npb/<name of MPICC>.
# Extra flags come from CFLAGS (default -O2). The class is chosen at run time (./cg A);
# -DNPB_DEFAULT_CLASS='"W"' in CFLAGS changes the class used when none is given.
# Kernels whose source is missing (lu.c is written separately) are skipped.
set -eu
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
mpicc=${1:-$root/install/bin/mpicc}
out=${2:-$root/build/npb/$(basename "$mpicc")}
cflags=${CFLAGS:--O2}
mkdir -p "$out"
for kernel in cg is mg ft lu; do
    [ -f "$here/$kernel.c" ] || continue
    # shellcheck disable=SC2086  # CFLAGS is a list of flags
    "$mpicc" $cflags -Wall -o "$out/$kernel" "$here/$kernel.c" "$here/common.c" -lm
    echo "built $out/$kernel"
done
