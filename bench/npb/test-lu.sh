#!/usr/bin/env bash
# The LU benchmark as a test: builds bench/npb/lu.c with our mpicc and runs classes S and
# W on 4 ranks (a 2 x 2 process grid, so every sweep and halo message path is used) with
# our mpiexec. Passes only when every run exits 0 and prints "Verification    = SUCCESSFUL",
# i.e. all eleven values agree with the published ones within 1e-8.
#
#   bench/npb/test-lu.sh [PREFIX]      (PREFIX defaults to ./install)
#   NPB_CLASSES="S W A"                classes to run (default "S W")
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix=${1:-$root/install}
build="$root/build/npb"
[ -x "$prefix/bin/mpiexec" ] || { echo "test-lu.sh: $prefix/bin/mpiexec not found (make install first)" >&2; exit 2; }
"$here/build-lu.sh" "$prefix/bin/mpicc" "$build" >/dev/null || { echo "test-lu.sh: build failed" >&2; exit 1; }
failed=0
for class in ${NPB_CLASSES:-S W}; do
    out="$build/lu.$class.4.out"
    timeout -k 5 600 "$prefix/bin/mpiexec" -n 4 "$build/lu" "$class" >"$out" 2>&1 </dev/null
    rc=$?
    grep -E "FAIL|Ranks  |Time in|Verification  " "$out"
    if [ "$rc" -ne 0 ] || ! grep -q "Verification    = SUCCESSFUL" "$out"; then
        echo "test-lu.sh: LU class $class on 4 ranks did not verify (exit $rc); output in $out" >&2
        failed=1
    fi
done
[ "$failed" = 0 ]
