#!/usr/bin/env python3
"""Costs of coordinated checkpointing (`mpiexec --ft coordinated`), measured side by side.

    python3 bench/ckpt.py [--prefix install] [--sizes 1,64,256] [--ranks 3] [--rounds 3]

1. Overhead with no checkpoint in progress: bench/pingpong (2 ranks, shm) with and without
   `--ft coordinated`, alternating rounds; 1-byte latency and 1 MiB bandwidth, median ratios.
2. Per image size (MiB of touched heap per rank, bench/ckpt_size.c): the time from a wave's
   start to its commit and the image size the launcher reports, and the run time of a
   10 s job checkpointed every 2 s against the same job without checkpoints.
3. Rollback: one rank killed after the first commit; the time from the kill until every rank
   is restored, and whether the answer is unchanged.
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build(prefix, src, out):
    subprocess.run([f"{prefix}/bin/mpicc", "-O2", "-o", out, src], check=True)


def pingpong(prefix, exe, extra):
    r = subprocess.run([f"{prefix}/bin/steadfast", "run", *extra, "-n", "2", exe, "-m", "1048576", "-q"],
                       capture_output=True, text=True, check=True)
    rows = {int(l.split()[0]): float(l.split()[1]) for l in r.stdout.splitlines() if l and l[0].isdigit()}
    return rows[1], rows[1048576]


def overhead(prefix, work, rounds):
    exe = f"{work}/pingpong"
    build(prefix, f"{ROOT}/bench/pingpong.c", exe)
    base, coord = [], []
    for _ in range(rounds):
        base.append(pingpong(prefix, exe, []))
        coord.append(pingpong(prefix, exe, ["--ft", "coordinated"]))
    lat = statistics.median(c[0] / b[0] for b, c in zip(base, coord))
    bw = statistics.median(b[1] / c[1] for b, c in zip(base, coord))
    print(f"no checkpoint in progress, shm, 2 ranks ({rounds} alternating rounds):")
    print(f"  1 B latency   {statistics.median(b[0] for b in base):.2f} us -> {statistics.median(c[0] for c in coord):.2f} us  (ratio {lat:.3f})")
    print(f"  1 MiB time    ratio {bw:.3f} (time with / without)")


def run_job(prefix, exe, ranks, mib, secs, extra, kill_after_commit=False):
    cmd = [f"{prefix}/bin/steadfast", "run", *extra, "-n", str(ranks), exe, str(mib), str(secs)]
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err_lines = []
    killed_at = restored_at = None
    if kill_after_commit:
        ckdir = extra[extra.index("--ckpt-dir") + 1]
        os.set_blocking(p.stderr.fileno(), False)
        buf = ""
        out = b""
        while True:
            try:
                chunk = os.read(p.stderr.fileno(), 65536)
            except BlockingIOError:
                chunk = None
            if chunk == b"":
                break
            buf += (chunk or b"").decode(errors="replace")
            if killed_at is None and "committed" in buf:
                pid = [l.split()[1] for l in open(f"{ckdir}/ranks") if l.split()[0] == "1"][0]
                os.kill(int(pid), signal.SIGKILL)
                killed_at = time.time()
            if killed_at and restored_at is None and "the job goes on" in buf:
                restored_at = time.time()
            if chunk is None:
                time.sleep(0.005)
        out = p.stdout.read().decode()
        p.wait()
        err_lines = buf.splitlines()
    else:
        out, err = p.communicate()
        out, err_lines = out.decode(), err.decode().splitlines()
    wall = time.time() - t0
    if p.returncode != 0:
        sys.exit(f"job failed ({p.returncode}): {' '.join(cmd)}\n" + "\n".join(err_lines[-10:]))
    return out, err_lines, wall, (restored_at - killed_at) if restored_at and killed_at else None


def sizes(prefix, work, ranks, mibs, rounds):
    exe = f"{work}/ckpt_size"
    build(prefix, f"{ROOT}/bench/ckpt_size.c", exe)
    pat = re.compile(r"checkpoint \d+ committed: ([\d.]+) MiB in ([\d.]+) s")
    print(f"\nper image size, {ranks} ranks, 10 s of work, a checkpoint every 2 s ({rounds} alternating rounds):")
    print("| heap per rank | images per wave | wave start to commit | run time, no checkpoints | with checkpoints | slowdown |")
    print("|---:|---:|---:|---:|---:|---:|")
    for mib in mibs:
        plain, ck, waves, size = [], [], [], []
        for _ in range(rounds):
            out0, _, w0, _ = run_job(prefix, exe, ranks, mib, 10, [])
            plain.append(w0)
            d = tempfile.mkdtemp(dir=work)
            out1, err, w1, _ = run_job(prefix, exe, ranks, mib, 10, ["--ft", "coordinated", "--ckpt-interval", "2s", "--ckpt-dir", d])
            ck.append(w1)
            if out0.split()[:4] != out1.split()[:4]:
                sys.exit(f"answers differ: {out0!r} {out1!r}")
            for l in err:
                m = pat.search(l)
                if m:
                    size.append(float(m.group(1)))
                    waves.append(float(m.group(2)))
            subprocess.run(["rm", "-rf", d])
        mp, mc = statistics.median(plain), statistics.median(ck)
        print(f"| {mib} MiB | {statistics.median(size) if size else 0:.1f} MiB | {statistics.median(waves) if waves else 0:.2f} s "
              f"| {mp:.2f} s | {mc:.2f} s | {mc / mp:.3f} |")
    print("\nrollback: rank 1 killed after the first commit")
    print("| heap per rank | kill to every rank restored | answer unchanged |")
    print("|---:|---:|:---:|")
    for mib in mibs:
        out0, _, _, _ = run_job(prefix, exe, ranks, mib, 6, [])
        d = tempfile.mkdtemp(dir=work)
        out1, _, _, t = run_job(prefix, exe, ranks, mib, 6, ["--ft", "coordinated", "--ckpt-interval", "1s", "--ckpt-dir", d], kill_after_commit=True)
        subprocess.run(["rm", "-rf", d])
        same = out0.split()[:4] == out1.split()[:4]
        print(f"| {mib} MiB | {t:.2f} s | {'yes' if same else 'NO'} |" if t else f"| {mib} MiB | not measured | {same} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prefix", default=f"{ROOT}/install")
    ap.add_argument("--sizes", default="1,64,256")
    ap.add_argument("--ranks", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    prefix = os.path.abspath(a.prefix)
    with tempfile.TemporaryDirectory(prefix="steadfast-ckpt-bench.") as work:
        overhead(prefix, work, max(a.rounds, 5))
        sizes(prefix, work, a.ranks, [int(x) for x in a.sizes.split(",")], a.rounds)


if __name__ == "__main__":
    main()
