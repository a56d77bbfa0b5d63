#!/usr/bin/env bash
# Parallel HDF5 as a real MPI-IO client: Debian's hdf5 source package, configured with our
# mpicc and --enable-parallel, runs its own parallel test suite (testpar) with our launcher.
#
# Usage: scripts/hdf5-tests.sh [--prefix PREFIX] [--np N] [--tests "t_mpi testphdf5 ..."]
#                              [--short] [--fetch-only] [--rebuild]
#   --prefix PREFIX  library to test (PREFIX/bin/mpicc, PREFIX/bin/mpiexec; default ./install)
#   --np N           processes per test (default 4)
#   --tests LIST     testpar programs to run (default: every program `make check` would run)
#   --short          the quick form for `make test`: t_mpi and the short testphdf5 subset
#   --rebuild        configure and build again
# Sources are fetched once into third_party/hdf5/ (not committed); the build goes to
# build/hdf5/. Configure and build take about 7 minutes on two busy cores; see docs/io.md.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
prefix=$here/install
np=4
tests=""
short=no
fetch_only=no
rebuild=no
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=$2; shift 2 ;;
        --np) np=$2; shift 2 ;;
        --tests) tests=$2; shift 2 ;;
        --short) short=yes; shift ;;
        --fetch-only) fetch_only=yes; shift ;;
        --rebuild) rebuild=yes; shift ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
prefix=$(cd "$prefix" && pwd)
third=$here/third_party/hdf5
build=$here/build/hdf5
sources=/etc/apt/sources.list.d/debian.sources

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"
    elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"
    else echo "error: need root for: $*" >&2; return 1
    fi
}

orig() { ls "$third"/hdf5_*.orig.tar.* 2>/dev/null | head -n 1 || true; }

if [ -z "$(orig)" ]; then
    mkdir -p "$third"
    if [ -f "$sources" ] && grep -E '^Types:' "$sources" | grep -vq 'deb-src'; then
        echo "== enabling deb-src in $sources"
        as_root sed -i -E '/^Types:/{/deb-src/!s/$/ deb-src/}' "$sources"
        as_root apt-get update -qq
    fi
    if [ -z "$(apt-cache showsrc hdf5 2>/dev/null | head -n 1)" ]; then
        as_root apt-get update -qq
    fi
    echo "== apt-get source --download-only hdf5 (into $third)"
    (cd "$third" && apt-get source --download-only hdf5) || true
    if [ -z "$(orig)" ]; then
        echo "SKIP: the hdf5 source package is not available (no deb-src access)"
        exit 0
    fi
fi
[ "$fetch_only" = yes ] && exit 0

src=$build/src
if [ "$rebuild" = yes ] || [ ! -f "$build/built" ]; then
    rm -rf "$build"
    mkdir -p "$src"
    echo "== unpacking $(basename "$(orig)")"
    tar -xf "$(orig)" -C "$src" --strip-components=1
    cd "$src"
    echo "== configure (CC=$prefix/bin/mpicc --enable-parallel)"
    # Only the C library and its tests: Fortran, C++, Java and the high-level library are not
    # MPI-IO clients of their own.
    CC="$prefix/bin/mpicc" ./configure --enable-parallel --disable-fortran --disable-cxx \
        --disable-java --disable-hl --enable-build-mode=production --disable-dependency-tracking \
        --prefix="$build/install" >"$build/configure.log" 2>&1 \
        || { echo "configure failed; see $build/configure.log"; tail -20 "$build/configure.log"; exit 1; }
    echo "== make (library, test library, testpar)"
    jobs=$(nproc)
    { make -j"$jobs" -C src && make -j"$jobs" -C test libh5test.la && make -j"$jobs" -C testpar \
        $(cd testpar && sed -n 's/^TEST_PROG_PARA *= *//p' Makefile.in | tr -d '\\') ; } \
        >"$build/make.log" 2>&1 || { echo "build failed; see $build/make.log"; tail -30 "$build/make.log"; exit 1; }
    touch "$build/built"
fi
cd "$src/testpar"
if [ -z "$tests" ]; then
    tests=$(sed -n 's/^TEST_PROG_PARA *= *//p' Makefile | tr -d '\\')
fi
if [ "$short" = yes ]; then
    tests="t_mpi testphdf5"
fi
mpiexec="$prefix/bin/mpiexec"
pass=0; fail=0; failed=""
export HDF5_PARAPREFIX=${HDF5_PARAPREFIX:-$build/run}
mkdir -p "$HDF5_PARAPREFIX"
for t in $tests; do
    [ -x "./$t" ] || make -j"$(nproc)" "$t" >>"$build/make.log" 2>&1 || true
    args=""
    # The short form runs testphdf5's quick subset (-x excludes; -o only runs named tests).
    if [ "$short" = yes ] && [ "$t" = testphdf5 ]; then
        args="-o mpiodup -o split -o props -o idsetw -o idsetr -o cdsetw -o cdsetr -o eidsetw -o eidsetr -o ecdsetw -o ecdsetr -o selnone -o ndsetw -o ccontw -o ccontr -o cchunk1 -o atomicity"
    fi
    start=$(date +%s)
    if timeout -k 5 1200 "$mpiexec" -n "$np" "./$t" $args >"$build/$t.log" 2>&1; then
        echo "PASS $t np=$np ($(( $(date +%s) - start )) s)"; pass=$((pass+1))
    else
        echo "FAIL $t np=$np ($(( $(date +%s) - start )) s): see $build/$t.log"; tail -15 "$build/$t.log" | sed 's/^/    | /'
        fail=$((fail+1)); failed="$failed $t"
    fi
done
echo "hdf5 testpar: $pass passed, $fail failed${failed:+ (failed:$failed)}"
[ "$fail" = 0 ]
