#!/usr/bin/env bash
# Fetches NetPIPE 3.7.2 from Debian's source package into third_party/ and
# unpacks it as third_party/NetPIPE-3.7.2 (third_party/ is not tracked).
#
#   scripts/fetch-netpipe.sh [--force]
#
# Needs deb-src enabled (Types: deb deb-src in /etc/apt/sources.list.d/*.sources);
# run apt-get update once after enabling it. Only the upstream *.orig.tar.* is
# used: if the Debian patch archive cannot be fetched, that is fine.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest="$root/third_party"
src_dir="$dest/NetPIPE-3.7.2"
force=0
[ "${1:-}" = "--force" ] && force=1

if [ -f "$src_dir/makefile" ] && [ $force = 0 ]; then
    echo "NetPIPE already unpacked in $src_dir"
    exit 0
fi
mkdir -p "$dest/netpipe-src" || exit 1
cd "$dest/netpipe-src" || exit 1

if ! ls netpipe_3.7.2.orig.tar.* >/dev/null 2>&1; then
    if ! apt-cache showsrc netpipe >/dev/null 2>&1 || [ -z "$(apt-cache showsrc netpipe 2>/dev/null)" ]; then
        echo "fetch-netpipe: no source record for netpipe; enable deb-src on the Types: line of" >&2
        echo "  /etc/apt/sources.list.d/debian.sources and run apt-get update" >&2
        exit 1
    fi
    # A missing Debian patch archive makes apt-get fail, but the upstream
    # archive still arrives; judge by the file, not the exit status.
    apt-get source --download-only netpipe || echo "fetch-netpipe: apt-get source reported an error; checking what arrived" >&2
fi
orig=$(ls netpipe_3.7.2.orig.tar.* 2>/dev/null | head -n 1)
if [ -z "$orig" ]; then
    echo "fetch-netpipe: netpipe_3.7.2.orig.tar.* was not downloaded" >&2
    exit 1
fi
rm -rf "$src_dir"
tar -xf "$orig" -C "$dest" || { echo "fetch-netpipe: cannot unpack $orig" >&2; exit 1; }
if [ ! -f "$src_dir/makefile" ]; then
    # The tarball's top folder name is not under our control; find it.
    top=$(tar -tf "$orig" | head -n 1 | cut -d/ -f1)
    [ -n "$top" ] && [ -d "$dest/$top" ] && [ "$dest/$top" != "$src_dir" ] && mv "$dest/$top" "$src_dir"
fi
if [ ! -f "$src_dir/makefile" ]; then
    echo "fetch-netpipe: unpacked, but $src_dir/makefile is missing" >&2
    exit 1
fi
echo "NetPIPE 3.7.2 unpacked in $src_dir (from $orig)"
