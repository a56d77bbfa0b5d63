#!/usr/bin/env bash
# Conformance run: MPICH's own test suite (test/mpi of Debian's `mpich` source package), built
# with our mpicc, run with our launcher, graded by MPICH's rules; prints a table per directory.
#
# Usage: scripts/mpich-tests.sh [--prefix PREFIX] [--dirs "basic init ..."] [--fast]
#            [--mpicc CMD] [--mpiexec CMD] [--jobs N] [--out FILE] [--timeout SECS]
#            [--tests REGEX] [--maxnp N] [--strict] [--rebuild] [--verbose] [--fetch-only]
#   --prefix PREFIX   library to test: PREFIX/bin/mpicc and PREFIX/bin/mpiexec (default ./install)
#   --mpicc/--mpiexec override them, e.g. --mpicc mpicc.mpich --mpiexec mpiexec.mpich
#   --dirs "ft" --mpiexec "PREFIX/bin/mpiexec --ft run-through"   runs the fault-tolerance tests
# Everything else is documented in docs/conformance.md and `scripts/mpich/runner.py --help`.
#
# The sources are fetched once into third_party/mpich/ (not committed).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
third=$here/third_party/mpich
sources=/etc/apt/sources.list.d/debian.sources

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"
    elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"
    else echo "error: need root for: $*" >&2; return 1
    fi
}

find_orig() { ls "$third"/mpich_*.orig.tar.* 2>/dev/null | head -n 1 || true; }

fetch() {
    mkdir -p "$third"
    # Enable source packages (idempotent: adds deb-src to every Types: line that lacks it).
    if [ -f "$sources" ] && grep -Eq '^Types:' "$sources" && \
       grep -E '^Types:' "$sources" | grep -vq 'deb-src'; then
        echo "== enabling deb-src in $sources"
        as_root sed -i -E '/^Types:/{/deb-src/!s/$/ deb-src/}' "$sources"
        as_root apt-get update -qq
    fi
    if [ -z "$(apt-cache showsrc mpich 2>/dev/null | head -n 1)" ]; then
        echo "== apt-get update (no source record for mpich yet)"
        as_root apt-get update -qq
    fi
    if ! command -v dpkg-source >/dev/null 2>&1; then
        echo "== installing dpkg-dev"
        as_root apt-get install -y -qq dpkg-dev
    fi
    echo "== apt-get source --download-only mpich (into $third)"
    # A missing Debian patch archive is not fatal: the upstream tarball is what we use.
    (cd "$third" && apt-get source --download-only mpich) || \
        echo "warning: apt-get source reported an error; checking for the upstream tarball" >&2
}

fetch_only=no
args=()
for a in "$@"; do
    case "$a" in
        --fetch-only) fetch_only=yes ;;
        -h|--help) sed -n '2,13p' "$0"; exec python3 "$here/scripts/mpich/runner.py" --help ;;
        *) args+=("$a") ;;
    esac
done

orig=$(find_orig)
if [ -z "$orig" ]; then
    fetch
    orig=$(find_orig)
fi
if [ -z "$orig" ]; then
    echo "error: no mpich_*.orig.tar.* in $third after apt-get source" >&2
    exit 1
fi
ver=$(basename "$orig" | sed -E 's/^mpich_(.*)\.orig\.tar\..*$/\1/')
src=$third/mpich-$ver/test/mpi
if [ ! -f "$src/runtests.in" ]; then
    echo "== unpacking test/mpi from $(basename "$orig")"
    tar -xf "$orig" -C "$third" "mpich-$ver/test/mpi"
fi
[ "$fetch_only" = yes ] && { echo "$src"; exit 0; }

# Shared machine: stay below interactive work (builds also default to --jobs 2).
exec nice -n 10 python3 "$here/scripts/mpich/runner.py" --srcdir "$src" \
    --suite "MPICH $ver test/mpi" ${args[@]+"${args[@]}"}
