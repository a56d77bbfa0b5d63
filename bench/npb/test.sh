#!/usr/bin/env bash
# Build CG, IS, MG and FT with our mpicc and run each at classes S and W on 4 ranks with our
# mpiexec; passes only when every run prints "Verification = SUCCESSFUL" and exits 0.
#   bench/npb/test.sh [PREFIX]      (PREFIX defaults to ./install)
#   NPB_CLASSES="S W A"             classes to run (default "S W")
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix=${1:-$root/install}
out="$root/build/npb/test"
[ -x "$prefix/bin/mpiexec" ] || { echo "npb/test.sh: $prefix/bin/mpiexec not found (make install first)" >&2; exit 2; }
rm -rf "$out"
"$here/build.sh" "$prefix/bin/mpicc" "$out" >/dev/null || { echo "FAIL build"; exit 1; }
failed=0
for class in ${NPB_CLASSES:-S W}; do
    for kernel in cg is mg ft; do
        log="$out/$kernel.$class.4.log"
        timeout -k 5 300 "$prefix/bin/mpiexec" -n 4 "$out/$kernel" "$class" >"$log" 2>&1 </dev/null
        status=$?
        line=$(grep -E '^ Time in seconds' "$log" | tr -s ' ')
        if [ "$status" -eq 0 ] && grep -qE '^ Verification += +SUCCESSFUL$' "$log"; then
            echo "ok   $kernel class $class, 4 ranks:$line"
        else
            echo "FAIL $kernel class $class, 4 ranks (exit $status); log $log:"
            tail -n 15 "$log"
            failed=$((failed + 1))
        fi
    done
done
[ "$failed" -eq 0 ]
