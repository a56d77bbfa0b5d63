#!/usr/bin/env bash
# Build and run the communicator / group / topology / attribute / error-handler tests.
#
#   tests/c/comm/run.sh [--prefix DIR] [--paths "shm tcp"] [--filter REGEX] [--max-np N]
#
# Each test's leading comment block gives "ranks: ..." (rank counts to run) and optionally
# "expect: fail" (the job must fail within 20 s and its output must name rank 1), as in
# tests/c/run-tests.sh. A normal run passes when the launcher exits 0 and the output
# contains " No Errors".
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
prefix="$root/install"
paths="shm"
filter=""
max_np=""
while [ $# -gt 0 ]; do
    case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --paths) paths=$2; shift 2 ;;
    --filter) filter=$2; shift 2 ;;
    --max-np) max_np=$2; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
# Value of "key: value" in the test's leading comment block (same rule as tests/c/run-tests.sh).
header() {
    sed -n '1,/\*\//p' "$1" | sed -n "s/^[ /*]*$2:[[:space:]]*//p" | head -n 1 | sed 's/[[:space:]]*\*\/.*$//; s/[[:space:]]*$//'
}
build="$here/build"
mkdir -p "$build"
cflags="-O2 -g -Wall -Wextra -Werror -Wno-stringop-overflow -Wno-format-truncation"
passed=0; failed=0
for src in "$here"/*.c; do
    name=$(basename "$src" .c)
    if [ -n "$filter" ] && ! echo "$name" | grep -Eq "$filter"; then continue; fi
    if ! "$prefix/bin/mpicc" $cflags -o "$build/$name" "$src" 2> "$build/$name.cc.log"; then
        echo "FAIL $name (compile: see $build/$name.cc.log)"; failed=$((failed+1)); continue
    fi
    ranks=$(header "$src" ranks)
    expect=$(header "$src" expect)
    for path in $paths; do
        for np in ${ranks:-2}; do
            if [ -n "$max_np" ] && [ "$np" -gt "$max_np" ]; then continue; fi
            log="$build/$name.$path.$np.log"
            start=$(date +%s%N)
            if [ "$expect" = fail ]; then
                timeout 20 "$prefix/bin/mpiexec" --path "$path" -n "$np" "$build/$name" > "$log" 2>&1
                rc=$?
                ok=0; [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q "rank 1" "$log" && ok=1
            else
                timeout 60 "$prefix/bin/mpiexec" --path "$path" -n "$np" "$build/$name" > "$log" 2>&1
                rc=$?
                ok=0; [ "$rc" -eq 0 ] && grep -q " No Errors" "$log" && ok=1
            fi
            t=$(( ($(date +%s%N) - start) / 1000000 ))
            if [ "$ok" = 1 ]; then
                printf "PASS %s np=%s path=%s (%s ms)\n" "$name" "$np" "$path" "$t"; passed=$((passed+1))
            else
                printf "FAIL %s np=%s path=%s rc=%s (log: %s)\n" "$name" "$np" "$path" "$rc" "$log"; failed=$((failed+1))
            fi
        done
    done
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
