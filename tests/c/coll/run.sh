#!/usr/bin/env bash
# Build and run the collective tests in this folder.
#   tests/c/coll/run.sh [--mpicc CMD] [--mpiexec "CMD ARGS"] [--filter REGEX] [--max-np N]
# Each test's leading comment says `ranks: ...` and optionally `timeout: SECONDS`.
# A run passes when the launcher exits 0 and rank 0 printed " No Errors".
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
mpicc="$root/install/bin/mpicc"
mpiexec="$root/install/bin/mpiexec"
filter=""
max_np=64
while [ $# -gt 0 ]; do
    case "$1" in
    --mpicc) mpicc=$2; shift 2 ;;
    --mpiexec) mpiexec=$2; shift 2 ;;
    --filter) filter=$2; shift 2 ;;
    --max-np) max_np=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
build=${CT_BUILD:-$here/build}
mkdir -p "$build"
pass=0; fail=0
for src in "$here"/*.c; do
    name=$(basename "$src" .c)
    [ -n "$filter" ] && ! echo "$name" | grep -Eq "$filter" && continue
    ranks=$(sed -n 's/^[ /*]*ranks:[[:space:]]*//p' "$src" | head -1)
    tmo=$(sed -n 's/^[ /*]*timeout:[[:space:]]*//p' "$src" | head -1)
    tmo=${tmo:-60}
    if ! $mpicc -O2 -g -Wall -Wextra -Werror -o "$build/$name" "$src" -lm 2>"$build/$name.cc.log"; then
        echo "FAIL $name: does not compile"; sed 's/^/    /' "$build/$name.cc.log" | head -20
        fail=$((fail+1)); continue
    fi
    for np in ${ranks:-2}; do
        [ "$np" -gt "$max_np" ] && continue
        log="$build/$name.$np.log"
        start=$(date +%s.%N)
        timeout -k 5 "$tmo" $mpiexec -n "$np" "$build/$name" >"$log" 2>&1
        rc=$?
        t=$(echo "$(date +%s.%N) - $start" | bc)
        if [ $rc -eq 0 ] && grep -q " No Errors" "$log"; then
            printf "PASS %s np=%s (%.1f s)\n" "$name" "$np" "$t"; pass=$((pass+1))
        else
            printf "FAIL %s np=%s (exit %s, %.1f s)\n" "$name" "$np" "$rc" "$t"; tail -15 "$log" | sed 's/^/    /'
            fail=$((fail+1))
        fi
    done
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
