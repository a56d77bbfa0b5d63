#!/usr/bin/env bash
# Every function include/mpi.h and include/mpi-ext.h declare must be exported by the built
# libmpi_abi.so, in both its MPI_ and PMPI_ forms (MPIX_/PMPIX_ for the extensions).
# Functions listed in tests/abi/pending-symbols.txt are reported as pending instead of
# failing; that list holds only the MPI-IO calls (MPI_File_*, MPI_Register_datarep*) whose
# implementation is under way, and must shrink to empty. A listed name that the library
# does export fails the check too, so the list cannot go stale.
# Usage: scripts/check-abi-symbols.sh [LIBRARY]   (default: ./install/lib/libmpi_abi.so)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
lib=${1:-$here/install/lib/libmpi_abi.so}
pending_file=$here/tests/abi/pending-symbols.txt
[ -e "$lib" ] || { echo "check-abi-symbols: $lib not found (run make)"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# Prototypes: a return type, the name, an opening parenthesis; typedefs excluded.
grep -hE '^[A-Za-z_][A-Za-z0-9_ ]*[ *]P?MPIX?_[A-Za-z0-9_]+\(' "$here/include/mpi.h" "$here/include/mpi-ext.h" \
    | grep -v '^typedef' | grep -oE 'P?MPIX?_[A-Za-z0-9_]+\(' | tr -d '(' | sort -u > "$tmp/declared"
nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u > "$tmp/exported"
{ grep -vE '^\s*(#|$)' "$pending_file" || true; } | awk '{print $1}' | sort -u > "$tmp/pending"

comm -23 "$tmp/declared" "$tmp/exported" > "$tmp/missing"
comm -23 "$tmp/missing" "$tmp/pending" > "$tmp/unexpected"
comm -12 "$tmp/pending" "$tmp/exported" > "$tmp/stale"
comm -23 "$tmp/pending" "$tmp/declared" >> "$tmp/stale"

declared=$(wc -l < "$tmp/declared"); missing=$(wc -l < "$tmp/missing")
echo "check-abi-symbols: $declared functions declared, $((declared - missing)) exported, $(comm -12 "$tmp/missing" "$tmp/pending" | wc -l) pending (tests/abi/pending-symbols.txt)"
rc=0
if [ -s "$tmp/unexpected" ]; then
    echo "declared in mpi.h but missing from $(basename "$lib") ($(wc -l < "$tmp/unexpected")):"
    sed 's/^/  /' "$tmp/unexpected"; rc=1
fi
if [ -s "$tmp/stale" ]; then
    echo "listed as pending but exported (or not declared); remove from tests/abi/pending-symbols.txt:"
    sed 's/^/  /' "$tmp/stale"; rc=1
fi
exit $rc
