#!/usr/bin/env bash
# The job key never crosses the wire (issue 21, defect 2). Runs a two-rank job over the
# tcp path and over the udp path under strace, records every byte written to a TCP or UDP
# socket by the launcher and the ranks (control handshake, data-path handshake, frames,
# datagrams, probes), and checks that the job key appears in none of them, in any of the
# forms it exists in (8 bytes little- or big-endian, 16 hex digits).
#   tests/security/wire.sh [PREFIX]      (PREFIX defaults to ./install)
# Skips (exit 0, says so) without strace or python3.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix=${1:-$root/install}
command -v strace >/dev/null || { echo "SKIP key on the wire: strace not installed"; exit 0; }
command -v python3 >/dev/null || { echo "SKIP key on the wire: python3 not installed"; exit 0; }
build=$(mktemp -d /tmp/steadfast-wire.XXXXXX)
trap 'rm -rf "$build"' EXIT
"$prefix/bin/mpicc" -o "$build/key_probe" "$here/key_probe.c" || exit 1
fail=0
for path in tcp udp; do
    # -yy names each descriptor (TCP:[...], UDP:[...], pipe, file): only sockets count.
    if ! strace -f -yy -xx -s 4194304 -o "$build/trace.$path" \
        -e trace=write,writev,send,sendto,sendmsg,sendmmsg \
        "$prefix/bin/mpiexec" -n 2 --path "$path" --timeout 60 "$build/key_probe" "$build/key.$path" \
        > "$build/out.$path" 2>&1; then
        echo "FAIL key on the wire ($path): the job failed"; cat "$build/out.$path"; fail=1; continue
    fi
    python3 - "$build/trace.$path" "$build/key.$path" "$path" <<'PY' || fail=1
import re, sys
trace, keyfile, path = sys.argv[1:]
key = int(open(keyfile).read().strip(), 16)
forms = [key.to_bytes(8, "little"), key.to_bytes(8, "big"), ("%016x" % key).encode(), ("%016X" % key).encode()]
sent = {"TCP": bytearray(), "UDP": bytearray()}
calls = {"TCP": 0, "UDP": 0}
for line in open(trace, errors="replace"):
    m = re.search(r"\b(write|writev|send|sendto|sendmsg|sendmmsg)\(\d+<(TCP|UDP)v?6?:", line)
    if not m:
        continue
    proto = m.group(2)
    calls[proto] += 1
    # Every "\xNN" run in the call is data (strace -xx prints all of it in hex).
    for run in re.findall(r'"((?:\\x[0-9a-f]{2})+)"', line):
        sent[proto] += bytes.fromhex(run.replace("\\x", ""))
total = sum(len(b) for b in sent.values())
need = "UDP" if path == "udp" else "TCP"
if len(sent[need]) < 1 << 20:
    print(f"FAIL key on the wire ({path}): only {len(sent[need])} bytes captured on {need} sockets (test did not test)")
    sys.exit(1)
for proto, data in sent.items():
    for f in forms:
        if f in data:
            print(f"FAIL key on the wire ({path}): the job key ({f!r}) was sent on a {proto} socket")
            sys.exit(1)
print(f"PASS key on the wire ({path}): {calls['TCP']} tcp and {calls['UDP']} udp sends, {total} bytes, no job key")
PY
done
exit $fail
