#!/usr/bin/env bash
# Build mpi4py from its PyPI source distribution against our mpicc, in a virtual environment
# outside the repository, and run mpi4py's own test suite (test/ of the sdist) with our
# launcher. Prints one line per rank count with rank 0's unittest counts; exits non-zero if
# any run fails, errors or hangs (the per-run timeout ends it).
#
# Usage: scripts/mpi4py-tests.sh [--prefix PREFIX] [--np "1 2 4"] [--quick] [--workdir DIR]
#                                [--timeout SECS] [--version V]
#   --prefix   Steadfast installation (default ./install; `make` builds it)
#   --np       rank counts to run (default "1 2 4")
#   --quick    the short form for `make test`: 1 and 2 ranks, a subset of test modules
#   --workdir  where the sdist, its build and the virtual environment go
#              (default ${TMPDIR:-/tmp}/steadfast-mpi4py; reused while libmpi_abi.so is unchanged)
#   --timeout  seconds per run before it counts as a hang (default 900; 300 with --quick)
#   --version  mpi4py version (default 4.1.2)
# Skips (exit 0, says why) when python3 with venv/pip is missing, when the package index
# cannot be reached, or when the library lacks functions mpi4py needs at import (MPI-IO,
# until it lands: see tests/abi/pending-symbols.txt).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
prefix=$here/install
nps="1 2 4"
quick=0
workdir=${TMPDIR:-/tmp}/steadfast-mpi4py
timeout=""
version=4.1.2
while [ $# -gt 0 ]; do
    case $1 in
    --prefix) prefix=$2; shift 2 ;;
    --np) nps=$2; shift 2 ;;
    --quick) quick=1; nps="1 2"; shift ;;
    --workdir) workdir=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --version) version=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "mpi4py-tests: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ -n "$timeout" ] || timeout=$([ $quick = 1 ] && echo 300 || echo 900)
prefix=$(cd "$prefix" && pwd) || { echo "mpi4py-tests: no installation at $prefix (run make)"; exit 1; }
skip() { echo "mpi4py-tests: SKIP: $*"; exit 0; }

command -v python3 >/dev/null || skip "python3 is not installed"
python3 -c 'import venv, ensurepip' 2>/dev/null || skip "python3 lacks venv/ensurepip (apt-get install python3-venv)"
lib=$prefix/lib/libmpi_abi.so
[ -e "$lib" ] || { echo "mpi4py-tests: $lib not found (run make)"; exit 1; }

mkdir -p "$workdir"
venv=$workdir/venv-$version
stamp=$venv/.built-against
libsum=$(sha256sum "$lib" | cut -c1-16)
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" || skip "cannot create a virtual environment"
fi
# Rebuilt when the library changed, or when an interrupted run left the stamp without the
# package (pip uninstalls it first).
if [ "$(cat "$stamp" 2>/dev/null)" != "$libsum" ] || ! "$venv/bin/python" -c 'import mpi4py' 2>/dev/null; then
    sdist=$workdir/sdist
    mkdir -p "$sdist"
    if [ ! -e "$sdist/mpi4py-$version.tar.gz" ]; then
        "$venv/bin/pip" download -q --no-binary :all: --no-deps "mpi4py==$version" -d "$sdist" \
            || skip "cannot download the mpi4py $version source distribution (no package index?)"
    fi
    echo "mpi4py-tests: building mpi4py $version against $prefix/bin/mpicc (a few minutes)"
    "$venv/bin/pip" uninstall -q -y mpi4py >/dev/null 2>&1
    if ! MPICC=$prefix/bin/mpicc "$venv/bin/pip" install -q --no-cache-dir --no-binary mpi4py \
            "$sdist/mpi4py-$version.tar.gz" > "$workdir/build.log" 2>&1; then
        tail -n 30 "$workdir/build.log"
        echo "mpi4py-tests: FAIL: mpi4py does not build against our mpicc (log: $workdir/build.log)"
        exit 1
    fi
    echo "$libsum" > "$stamp"
fi
src=$workdir/mpi4py-$version
[ -d "$src/test" ] || tar xzf "$workdir/sdist/mpi4py-$version.tar.gz" -C "$workdir"

# mpi4py resolves every MPI function it wraps when it loads.
if ! out=$(env LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$venv/bin/python" -c 'from mpi4py import MPI' 2>&1); then
    missing=$(printf '%s\n' "$out" | grep -o 'undefined symbol: [A-Za-z_0-9]*' | head -1)
    case $missing in
    *MPI_File_*|*MPI_Register_datarep*) skip "mpi4py cannot load: $missing (MPI-IO is not in this build yet)" ;;
    esac
    printf '%s\n' "$out" | tail -n 5
    echo "mpi4py-tests: FAIL: mpi4py does not import"
    exit 1
fi

# MPI_Comm_spawn works under our launcher (docs/mpi5.md): mpi4py's spawn tests run
# (test_spawn, and mpi4py.futures' pools in test_util_pool, which start workers). The
# universe is made larger than the job so that what sizes itself by MPI_UNIVERSE_SIZE
# (mpi4py.futures' default worker count) has room beyond the world.
# test_dynproc runs: ports, accept/connect, name publishing and MPI_Comm_join work between
# the processes of one job (docs/mpi5.md).
args=()
if [ $quick = 1 ]; then
    # The short form: environment, point-to-point, collectives, datatypes, one-sided,
    # sessions, partitioned communication, ULFM (agree and iagree ordered against barriers)
    # and spawning.
    args=(test_environ test_status test_request test_p2p_buf test_p2p_buf_part test_cco_buf
          test_win test_rma test_rma_nb test_session test_mpiabi test_handle test_errorcode
          test_ulfm test_spawn)
fi
rc=0
for np in $nps; do
    log=$workdir/run-np$np.log
    start=$(date +%s)
    run_args=("${args[@]}")
    env LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$prefix/bin/mpiexec" --timeout "$timeout" --universe-size $((np + 4)) -n "$np" \
        "$venv/bin/python" "$src/test/main.py" "${run_args[@]}" > "$log" 2>&1
    status=$?
    secs=$(( $(date +%s) - start ))
    # Every rank prints its own unittest summary; rank 0's comes first.
    ran=$(grep -m1 -o '^Ran [0-9]* test' "$log" | grep -o '[0-9]*')
    result=$(grep -m1 -E '^(OK|FAILED)' "$log")
    skipped=$(printf '%s' "$result" | grep -o 'skipped=[0-9]*' | cut -d= -f2)
    failures=$(printf '%s' "$result" | grep -o 'failures=[0-9]*' | cut -d= -f2)
    errors=$(printf '%s' "$result" | grep -o 'errors=[0-9]*' | cut -d= -f2)
    ran=${ran:-0}; skipped=${skipped:-0}; failures=${failures:-0}; errors=${errors:-0}
    passed=$((ran - skipped - failures - errors))
    verdict=PASS
    if [ $status -ne 0 ] || [ "$ran" = 0 ] || [ $((failures + errors)) -ne 0 ]; then verdict=FAIL; rc=1; fi
    echo "$verdict mpi4py $version np=$np: $ran tests, $passed passed, $skipped skipped, $failures failures, $errors errors, exit $status (${secs} s; log $log)"
    if [ $verdict = FAIL ]; then
        grep -E '^(FAIL|ERROR):' "$log" | sort -u | head -n 30 | sed 's/^/    /'
    fi
done
exit $rc
