#!/usr/bin/env bash
# Builds and runs the C integration tests in this folder against any MPI.
#
#   tests/c/run-tests.sh --mpicc CMD --mpiexec "CMD [args]" [--paths "shm tcp"]
#                        [--filter REGEX] [--build-dir DIR] [options]
#
# Each test declares in its leading comment:
#   ranks: 1 2 4      rank counts to run it with (default: 2)
#   timeout: 60       seconds per run (default: 60)
#   expect: fail      the job must fail: the launcher exits non-zero within
#                     fail-within seconds (default 10) and names rank 1 on stderr
#   mem-gib: 8        skip when MemAvailable is smaller
#   skip-env: VAR     skip when the environment variable VAR is set and non-empty
#
# A normal test passes when the launcher exits 0 and rank 0 printed " No Errors".
# Every run is one output line: PASS/FAIL/SKIP name np=N path=P (T s); the last line
# is "N passed, N failed, N skipped". Exit status is non-zero if anything failed.
#
# Options:
#   --mpicc CMD            compiler wrapper (default: mpicc)
#   --mpiexec "CMD ARGS"   launcher with extra arguments (default: mpiexec)
#   --np-flag FLAG         flag that sets the rank count (default: -n)
#   --paths "P1 P2"        run every test once per path with STEADFAST_PATH=P;
#                          "default" leaves STEADFAST_PATH unset (default: default)
#   --filter REGEX         only tests whose name matches (grep -E)
#   --build-dir DIR        where binaries and logs go (default: tests/c/build)
#   --cflags "FLAGS"       compiler flags (default: -O2 -g -Wall -Wextra -Werror
#                          -Wno-stringop-overflow)
#   --max-np N             skip runs with more than N ranks
#   --timeout-scale F      multiply every timeout by F (slow machines, valgrind)
#   --no-stderr-check      expected-failure tests: do not require the rank on stderr
#   --list                 print the tests and their declared rank counts, then exit
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mpicc="mpicc"
mpiexec="mpiexec"
np_flag="-n"
paths="default"
filter=""
build_dir="$here/build"
# -Wno-stringop-overflow: GCC 12 warns about MPI_STATUSES_IGNORE ((MPI_Status *)1)
# passed for an array parameter in MPICH's prototypes; that is a false positive.
cflags="-O2 -g -Wall -Wextra -Werror -Wno-stringop-overflow"
max_np=""
timeout_scale="1"
stderr_check=1
list_only=0

die() { echo "run-tests.sh: $*" >&2; exit 2; }
need_arg() { [ $# -ge 2 ] || die "$1 needs an argument"; }

while [ $# -gt 0 ]; do
    case "$1" in
    --mpicc) need_arg "$@"; mpicc=$2; shift 2 ;;
    --mpiexec) need_arg "$@"; mpiexec=$2; shift 2 ;;
    --np-flag) need_arg "$@"; np_flag=$2; shift 2 ;;
    --paths) need_arg "$@"; paths=$2; shift 2 ;;
    --filter) need_arg "$@"; filter=$2; shift 2 ;;
    --build-dir) need_arg "$@"; build_dir=$2; shift 2 ;;
    --cflags) need_arg "$@"; cflags=$2; shift 2 ;;
    --max-np) need_arg "$@"; max_np=$2; shift 2 ;;
    --timeout-scale) need_arg "$@"; timeout_scale=$2; shift 2 ;;
    --no-stderr-check) stderr_check=0; shift ;;
    --list) list_only=1; shift ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option: $1 (see --help)" ;;
    esac
done

command -v timeout >/dev/null || die "coreutils timeout is required"
mkdir -p "$build_dir/logs" || die "cannot create $build_dir"
build_dir=$(cd "$build_dir" && pwd)

# Value of "key: value" in the test's leading comment block.
header() {
    sed -n '1,/\*\//p' "$1" | sed -n "s/^[ /*]*$2:[[:space:]]*//p" | head -n 1 | sed 's/[[:space:]]*\*\/.*$//; s/[[:space:]]*$//'
}

mem_avail_gib() {
    awk '/^MemAvailable:/ { printf "%d", $2 / 1048576 }' /proc/meminfo 2>/dev/null || echo 0
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
scaled() { awk -v t="$1" -v f="$timeout_scale" 'BEGIN { v = t * f; printf "%d", (v < 1 ? 1 : v) }'; }

show_tail() {
    # Last lines of a run's output, indented, stdout then stderr.
    local f
    for f in "$@"; do
        [ -s "$f" ] || continue
        echo "    --- ${f##*/} (last 20 lines)"
        tail -n 20 "$f" | sed 's/^/    | /'
    done
}

# Ranks left behind by a launcher are reported (and then ended, by pid).
orphans() {
    local bin=$1 re
    re=$(printf '%s' "$bin" | sed 's/[]\.[*^$()+?{|]/\\&/g')
    pgrep -f -x -- "$re" 2>/dev/null | tr '\n' ' '
}

passed=0
failed=0
skipped=0

tests=()
for src in "$here"/*.c "$here"/*/*.c; do
    name=${src#"$here"/}; name=${name%.c}
    if [ -n "$filter" ] && ! printf '%s\n' "$name" | grep -Eq -- "$filter"; then
        continue
    fi
    # Programs with a `driver:` header need arguments; their own driver runs them.
    [ -n "$(header "$src" driver)" ] && continue
    tests+=("$name")
done
[ ${#tests[@]} -gt 0 ] || die "no test matches '${filter}'"

if [ $list_only = 1 ]; then
    for name in "${tests[@]}"; do
        src="$here/$name.c"
        printf '%-16s ranks: %-10s %s\n' "$name" "$(header "$src" ranks)" \
            "$( [ "$(header "$src" expect)" = fail ] && echo '(expected failure)')"
    done
    exit 0
fi

for name in "${tests[@]}"; do
    src="$here/$name.c"
    bin="$build_dir/${name//\//_}"
    ranks=$(header "$src" ranks); ranks=${ranks:-2}
    tmo=$(header "$src" timeout); tmo=$(scaled "${tmo:-60}")
    expect=$(header "$src" expect)
    fail_within=$(header "$src" fail-within); fail_within=$(scaled "${fail_within:-10}")
    mem_gib=$(header "$src" mem-gib)
    skip_env=$(header "$src" skip-env)

    # shellcheck disable=SC2086  # the compiler command and flags are word lists
    logname=${name//\//_}
    if ! $mpicc $cflags -I"$here" -I"$(dirname "$src")" -o "$bin" "$src" >"$build_dir/logs/$logname.build" 2>&1; then
        echo "FAIL $name (compile)"
        show_tail "$build_dir/logs/$logname.build"
        failed=$((failed + 1))
        continue
    fi

    for path in $paths; do
        for np in $ranks; do
            tag="$name np=$np path=$path"
            if [ -n "$skip_env" ] && [ -n "${!skip_env:-}" ]; then
                echo "SKIP $tag: $skip_env is set"; skipped=$((skipped + 1)); continue
            fi
            if [ -n "$mem_gib" ] && [ "$(mem_avail_gib)" -lt "$mem_gib" ]; then
                echo "SKIP $tag: needs ${mem_gib} GiB available, have $(mem_avail_gib)"
                skipped=$((skipped + 1)); continue
            fi
            if [ -n "$max_np" ] && [ "$np" -gt "$max_np" ]; then
                echo "SKIP $tag: more than --max-np $max_np ranks"; skipped=$((skipped + 1)); continue
            fi
            out="$build_dir/logs/$logname.np$np.$path.out"
            err="$build_dir/logs/$logname.np$np.$path.err"
            t0=$(now)
            # shellcheck disable=SC2086  # the launcher command is a word list
            if [ "$path" = default ]; then
                timeout -k 5 "$tmo" $mpiexec $np_flag "$np" "$bin" >"$out" 2>"$err" </dev/null
            else
                STEADFAST_PATH=$path timeout -k 5 "$tmo" $mpiexec $np_flag "$np" "$bin" >"$out" 2>"$err" </dev/null
            fi
            rc=$?
            t1=$(now)
            dt=$(elapsed "$t0" "$t1")
            timed_out=0
            if [ $rc -eq 124 ] || { [ $rc -eq 137 ] && awk -v d="$dt" -v t="$tmo" 'BEGIN { exit !(d >= t) }'; }; then
                timed_out=1
            fi
            why=""
            if [ "$expect" = fail ]; then
                if [ $timed_out = 1 ]; then
                    why="launcher still running after ${tmo} s (killed)"
                elif [ $rc -eq 0 ]; then
                    why="launcher exited 0 although rank 1 failed"
                elif awk -v d="$dt" -v t="$fail_within" 'BEGIN { exit !(d > t) }'; then
                    why="launcher took ${dt} s to report the failure (limit ${fail_within} s)"
                elif [ $stderr_check = 1 ] && ! grep -Eiq 'rank[^0-9a-z]{0,3}1([^0-9]|$)' "$err"; then
                    why="exit status $rc, but stderr does not name rank 1"
                fi
            else
                if [ $timed_out = 1 ]; then
                    why="timed out after ${tmo} s"
                elif [ $rc -ne 0 ]; then
                    why="exit status $rc"
                elif ! grep -q '^ No Errors$' "$out"; then
                    why="exit status 0 but no ' No Errors' line"
                fi
            fi
            left=$(orphans "$bin")
            if [ -n "$left" ]; then
                sleep 1
                left=$(orphans "$bin")
                if [ -n "$left" ]; then
                    why="${why:+$why; }ranks left running after the launcher exited (pids $left)"
                    # shellcheck disable=SC2086
                    kill -9 $left 2>/dev/null
                fi
            fi
            if [ -z "$why" ]; then
                echo "PASS $tag ($dt s)"
                passed=$((passed + 1))
            else
                echo "FAIL $tag ($dt s): $why"
                show_tail "$out" "$err"
                failed=$((failed + 1))
            fi
        done
    done
done

if [ $skipped -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ $failed -eq 0 ]
