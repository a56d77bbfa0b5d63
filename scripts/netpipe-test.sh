#!/usr/bin/env bash
# Builds NetPIPE's NPmpi with an MPI compiler wrapper and runs it on 2 ranks
# over a bounded size range: an integrity pass (-i: every byte checked) and
# timed passes with blocking receives, preposted receives (-a) and
# synchronous sends (-S). Prints PASS or FAIL per pass and overall.
#
#   scripts/netpipe-test.sh [--mpicc CMD] [--mpiexec "CMD ARGS"] [--max BYTES]
#                           [--timeout SECONDS] [--build-dir DIR]
#
# Defaults: PREFIX/bin/mpicc and PREFIX/bin/mpiexec (PREFIX defaults to
# ./install), --max 1048576, --timeout 60 per pass. Fetch the source first
# with scripts/fetch-netpipe.sh (done automatically if missing).
# Validate against another MPI, e.g.:
#   scripts/netpipe-test.sh --mpicc mpicc.mpich --mpiexec mpiexec.mpich
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prefix=${PREFIX:-$root/install}
mpicc="$prefix/bin/mpicc"
mpiexec="$prefix/bin/mpiexec"
max=1048576
tmo=60
build_dir=""

die() { echo "netpipe-test: $*" >&2; echo "FAIL netpipe (setup)"; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
    --mpicc) mpicc=$2; shift 2 ;;
    --mpiexec) mpiexec=$2; shift 2 ;;
    --max) max=$2; shift 2 ;;
    --timeout) tmo=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1" ;;
    esac
done

src="$root/third_party/NetPIPE-3.7.2"
if [ ! -f "$src/makefile" ]; then
    "$root/scripts/fetch-netpipe.sh" >&2 || die "cannot fetch NetPIPE"
fi
# One build folder per compiler so builds with different MPIs do not mix.
if [ -z "$build_dir" ]; then
    tag=$(printf '%s' "$mpicc" | tr -c 'A-Za-z0-9._-' '_')
    build_dir="$root/third_party/netpipe-build/$tag"
fi
rm -rf "$build_dir" && mkdir -p "$build_dir" || die "cannot create $build_dir"
cp -r "$src/." "$build_dir/" || die "cannot copy the source"
if ! make -C "$build_dir" mpi MPICC="$mpicc" >"$build_dir/build.log" 2>&1; then
    tail -n 20 "$build_dir/build.log" >&2
    echo "FAIL netpipe (build with $mpicc)"
    exit 1
fi

failed=0
# run NAME EXPECT ARGS...: one NPmpi job on 2 ranks; EXPECT is "integrity" or "perf".
run() {
    local name=$1 kind=$2; shift 2
    local log="$build_dir/$name.log" out="$build_dir/$name.np" t0 t1 rc why=""
    rm -f "$out"
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086  # the launcher is a word list
    (cd "$build_dir" && timeout -k 5 "$tmo" $mpiexec -n 2 "$build_dir/NPmpi" -u "$max" "$@" -o "$out") \
        >"$log" 2>&1 </dev/null
    rc=$?
    t1=$(date +%s.%N)
    local dt
    dt=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        why="timed out after $tmo s"
    elif [ $rc -ne 0 ]; then
        why="exit status $rc"
    elif [ "$kind" = integrity ]; then
        if grep -qi "integrity check failed\|fail" "$log"; then
            why="integrity check failed"
        elif ! grep -q "Integrity check passed" "$log"; then
            why="no 'Integrity check passed' lines"
        fi
    else
        # The last line of the output file is the largest size with a
        # positive rate: the run reached the end.
        local last
        last=$(awk 'NF == 3 { s = $1; r = $2 } END { if (r > 0) print s }' "$out" 2>/dev/null)
        if [ -z "$last" ]; then
            why="no results in $out"
        elif [ "$last" -lt "$max" ]; then
            why="stopped at $last bytes, expected $max"
        fi
    fi
    if [ -z "$why" ]; then
        echo "PASS netpipe $name np=2 ($dt s)"
    else
        echo "FAIL netpipe $name np=2 ($dt s): $why"
        tail -n 15 "$log" | sed 's/^/    | /'
        failed=$((failed + 1))
    fi
}

run integrity integrity -i -p 0 -n 5
run blocking perf -p 0 -n 10
run preposted perf -p 0 -n 10 -a
run ssend perf -p 0 -n 10 -S

if [ $failed -eq 0 ]; then
    echo "PASS netpipe ($mpicc)"
else
    echo "FAIL netpipe ($mpicc): $failed of 4 passes failed"
    exit 1
fi
