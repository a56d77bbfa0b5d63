#!/usr/bin/env python3
"""Costs of coordinated checkpointing (`mpiexec --ft coordinated`), measured side by side.

    python3 bench/ckpt.py [--prefix install] [--sizes 1,64,256,1024] [--ranks 3] [--rounds 3]
                          [--intervals 0.5,1,2,5] [--only overhead,netpipe,app,sizes,interval,restart]
                          [--plots DIR]

1. Overhead with no checkpoint in progress: bench/pingpong (2 ranks, shm) with and without
   `--ft coordinated`, alternating rounds; 1-byte latency and 1 MiB bandwidth, median ratios.
   The same with NetPIPE's NPmpi (1 B ... 8 MiB; fetched by scripts/fetch-netpipe.sh), and
   the run time of a communication-heavy program (tests/ckpt/ring.c: ANY_SOURCE token ring,
   800 KB exchanges, allreduce; 3 ranks).
2. Per image size (MiB of touched heap per rank, bench/ckpt_size.c): the time from a wave's
   start to its commit and the image size the launcher reports, and the run time of a
   10 s job checkpointed every 2 s against the same job without checkpoints.
3. Per interval (64 MiB per rank): the slowdown of the same job checkpointed every 0.5 ... 5 s.
4. Rollback: one rank killed after the first commit; the time from the kill until every rank
   is restored, and whether the answer is unchanged. Whole-job restart: the job killed with
   its launcher after the first commit, then `steadfast restart DIR`; the time from the
   command to every rank restored.

Images go with a copy on the launcher's checkpoint server (the default). CSV files and, with
matplotlib, PNG plots go to --plots DIR (default docs/performance).
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


def write_csv(path, header, rows):
    """One line per row; floats with 4 decimals."""
    with open(path, "w") as f:
        f.write(header + "\n")
        for r in rows:
            f.write(",".join(f"{x:.4f}" if isinstance(x, float) else str(x) for x in r) + "\n")


NETPIPE_SRC = f"{ROOT}/third_party/NetPIPE-3.7.2"


def npmpi(prefix, work):
    """NPmpi built with our mpicc in WORK (the source fetched if missing)."""
    if not os.path.exists(f"{NETPIPE_SRC}/makefile"):
        subprocess.run([f"{ROOT}/scripts/fetch-netpipe.sh"], check=True, stdout=subprocess.DEVNULL)
    d = f"{work}/netpipe"
    subprocess.run(["cp", "-r", NETPIPE_SRC, d], check=True)
    subprocess.run(["make", "-C", d, "mpi", f"MPICC={prefix}/bin/mpicc"], check=True, capture_output=True)
    return f"{d}/NPmpi"


def netpipe_run(prefix, exe, work, extra, upto):
    out = f"{work}/np.out"
    subprocess.run([f"{prefix}/bin/steadfast", "run", *extra, "-n", "2", exe, "-u", str(upto), "-o", out],
                   cwd=work, check=True, capture_output=True)
    rows = {}
    for line in open(out):
        f = line.split()
        if len(f) >= 3:
            # bytes, throughput (Mbps), time of one transfer (half a round trip) in seconds
            rows[int(float(f[0]))] = (float(f[1]), float(f[2]) * 1e6)
    return rows


def netpipe(prefix, work, rounds, csv_dir):
    exe = npmpi(prefix, work)
    upto = 8 << 20
    base, coord = [], []
    for _ in range(rounds):
        base.append(netpipe_run(prefix, exe, work, [], upto))
        coord.append(netpipe_run(prefix, exe, work, ["--ft", "coordinated"], upto))
    sizes_ = sorted(set.intersection(*(set(r) for r in base + coord)))
    print(f"\nNetPIPE (NPmpi, shm, 2 ranks, {rounds} alternating rounds), no checkpoint in progress:")
    print("| size | latency without | with --ft coordinated | ratio | bandwidth ratio (with / without) |")
    print("|---:|---:|---:|---:|---:|")
    rows = []
    for n in sizes_:
        tb = statistics.median(r[n][1] for r in base)
        tc = statistics.median(r[n][1] for r in coord)
        ratio = statistics.median(c[n][1] / b[n][1] for b, c in zip(base, coord))
        rows.append((n, tb, tc, ratio))
    shown = [r for r in rows if r[0] in (1, 8, 64, 512, 4096, 32768, 262144, 1048576, 8388608)] or rows
    for n, tb, tc, ratio in shown:
        print(f"| {n} B | {tb:.2f} us | {tc:.2f} us | {ratio:.3f} | {1 / ratio:.3f} |")
    small = [r[3] for r in rows if r[0] <= 64]
    large = [r[3] for r in rows if r[0] >= 1 << 20]
    if small and large:
        print(f"median time ratio: messages <= 64 B {statistics.median(small):.3f}, >= 1 MiB {statistics.median(large):.3f}")
    write_csv(f"{csv_dir}/ckpt-netpipe.csv", "bytes,usec_without,usec_with,ratio", rows)
    return rows


def app(prefix, work, rounds):
    exe = f"{work}/ring"
    build(prefix, f"{ROOT}/tests/ckpt/ring.c", exe)
    args = ["500", "10000", "100000", f"{work}/ring.log"]
    base, coord = [], []
    for _ in range(rounds):
        for extra, into in (([], base), (["--ft", "coordinated"], coord)):
            t0 = time.time()
            subprocess.run([f"{prefix}/bin/steadfast", "run", *extra, "-n", "3", exe, *args], check=True, capture_output=True)
            into.append(time.time() - t0)
    r = statistics.median(c / b for b, c in zip(base, coord))
    print(f"\ncommunication-heavy program (tests/ckpt/ring.c, 3 ranks, 500 rounds, {rounds} alternating rounds), no checkpoint:")
    print(f"  run time {statistics.median(base):.2f} s -> {statistics.median(coord):.2f} s  (ratio {r:.3f})")


def sizes(prefix, work, ranks, mibs, rounds, csv_dir):
    exe = f"{work}/ckpt_size"
    build(prefix, f"{ROOT}/bench/ckpt_size.c", exe)
    pat = re.compile(r"checkpoint \d+ committed: ([\d.]+) MiB in ([\d.]+) s")
    print(f"\nper image size, {ranks} ranks, 10 s of work, a checkpoint every 2 s ({rounds} alternating rounds):")
    print("| heap per rank | images per wave | wave start to commit | run time, no checkpoints | with checkpoints | slowdown |")
    print("|---:|---:|---:|---:|---:|---:|")
    rows = []
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
        img, wt = (statistics.median(size) if size else 0), (statistics.median(waves) if waves else 0)
        rows.append((mib, img, wt, mp, mc, mc / mp))
        print(f"| {mib} MiB | {img:.1f} MiB | {wt:.2f} s | {mp:.2f} s | {mc:.2f} s | {mc / mp:.3f} |")
    write_csv(f"{csv_dir}/ckpt-sizes.csv", "mib_per_rank,image_mib_per_wave,wave_seconds,run_without,run_with,slowdown", rows)
    return rows


def intervals(prefix, work, ranks, secs_list, rounds, csv_dir, mib=64):
    exe = f"{work}/ckpt_size"
    build(prefix, f"{ROOT}/bench/ckpt_size.c", exe)
    print(f"\nper interval, {mib} MiB per rank, {ranks} ranks, 10 s of work ({rounds} alternating rounds):")
    print("| interval | checkpoints | run time, no checkpoints | with checkpoints | slowdown |")
    print("|---:|---:|---:|---:|---:|")
    rows = []
    for iv in secs_list:
        plain, ck, n = [], [], []
        for _ in range(rounds):
            _, _, w0, _ = run_job(prefix, exe, ranks, mib, 10, [])
            d = tempfile.mkdtemp(dir=work)
            _, err, w1, _ = run_job(prefix, exe, ranks, mib, 10, ["--ft", "coordinated", "--ckpt-interval", f"{int(iv * 1000)}ms", "--ckpt-dir", d])
            subprocess.run(["rm", "-rf", d])
            plain.append(w0)
            ck.append(w1)
            n.append(sum("committed" in l for l in err))
        mp, mc = statistics.median(plain), statistics.median(ck)
        rows.append((iv, statistics.median(n), mp, mc, mc / mp))
        print(f"| {iv} s | {statistics.median(n):.0f} | {mp:.2f} s | {mc:.2f} s | {mc / mp:.3f} |")
    write_csv(f"{csv_dir}/ckpt-intervals.csv", "interval_s,checkpoints,run_without,run_with,slowdown", rows)
    return rows


def whole_job_restart(prefix, exe, ranks, mib, work):
    """Seconds from `steadfast restart DIR` until every rank is restored, and whether the
    answer is that of a fault-free run."""
    d = tempfile.mkdtemp(dir=work)
    cmd = [f"{prefix}/bin/steadfast", "run", "--ft", "coordinated", "--ckpt-interval", "1s", "--ckpt-dir", d,
           "-n", str(ranks), exe, str(mib), "6"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        if "committed" in line:
            break
    p.kill()
    p.wait()
    time.sleep(0.5)
    t0 = time.time()
    r = subprocess.Popen([f"{prefix}/bin/steadfast", "restart", d], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t = None
    for line in r.stderr:
        if t is None and "the job goes on" in line:
            t = time.time() - t0
    out = r.stdout.read()
    r.wait()
    subprocess.run(["rm", "-rf", d])
    return t, out, r.returncode


def rollbacks(prefix, work, ranks, mibs, csv_dir):
    exe = f"{work}/ckpt_size"
    build(prefix, f"{ROOT}/bench/ckpt_size.c", exe)
    print("\nrollback: rank 1 killed after the first commit; whole job: killed with its launcher, then steadfast restart")
    print("| heap per rank | kill to every rank restored | answer unchanged | steadfast restart to every rank restored | answer unchanged |")
    print("|---:|---:|:---:|---:|:---:|")
    rows = []
    for mib in mibs:
        out0, _, _, _ = run_job(prefix, exe, ranks, mib, 6, [])
        d = tempfile.mkdtemp(dir=work)
        out1, _, _, t = run_job(prefix, exe, ranks, mib, 6, ["--ft", "coordinated", "--ckpt-interval", "1s", "--ckpt-dir", d], kill_after_commit=True)
        subprocess.run(["rm", "-rf", d])
        same = out0.split()[:4] == out1.split()[:4]
        tw, out2, rc = whole_job_restart(prefix, exe, ranks, mib, work)
        # The restart prints only what comes after the checkpoint: its last line is the
        # answer (steps and checksum; the time it also prints differs).
        last = lambda o: (o.strip().splitlines() or [""])[-1].split()[:4]
        same2 = rc == 0 and last(out0) == last(out2)
        rows.append((mib, t or 0.0, tw or 0.0))
        fmt = lambda x: f"{x:.2f} s" if x else "not measured"
        print(f"| {mib} MiB | {fmt(t)} | {'yes' if same else 'NO'} | {fmt(tw)} | {'yes' if same2 else 'NO'} |")
    write_csv(f"{csv_dir}/ckpt-restart.csv", "mib_per_rank,rollback_s,whole_job_restart_s", rows)
    return rows


def plot(out_dir, size_rows, interval_rows, restart_rows):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not available (apt-get install python3-matplotlib): no plots")
        return
    if size_rows:
        fig, ax = plt.subplots(1, 2, figsize=(9, 3.4))
        xs = [r[0] for r in size_rows]
        ax[0].plot(xs, [r[2] for r in size_rows], marker="o", label="wave start to commit")
        if restart_rows:
            ax[0].plot([r[0] for r in restart_rows], [r[1] for r in restart_rows], marker="s", label="rollback (one rank killed)")
            ax[0].plot([r[0] for r in restart_rows], [r[2] for r in restart_rows], marker="^", label="steadfast restart (whole job)")
        ax[0].set_xscale("log", base=2)
        ax[0].set_xlabel("heap per rank (MiB)")
        ax[0].set_ylabel("seconds")
        ax[0].legend(fontsize=7)
        ax[1].plot(xs, [r[5] for r in size_rows], marker="o")
        ax[1].set_xscale("log", base=2)
        ax[1].set_xlabel("heap per rank (MiB)")
        ax[1].set_ylabel("slowdown (checkpoint every 2 s)")
        fig.tight_layout()
        fig.savefig(f"{out_dir}/ckpt-sizes.png", dpi=110)
    if interval_rows:
        fig, ax = plt.subplots(figsize=(4.5, 3.4))
        ax.plot([r[0] for r in interval_rows], [r[4] for r in interval_rows], marker="o")
        ax.set_xlabel("checkpoint interval (s)")
        ax.set_ylabel("slowdown (64 MiB per rank)")
        fig.tight_layout()
        fig.savefig(f"{out_dir}/ckpt-intervals.png", dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prefix", default=f"{ROOT}/install")
    ap.add_argument("--sizes", default="1,64,256,1024")
    ap.add_argument("--intervals", default="0.5,1,2,5")
    ap.add_argument("--ranks", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="overhead,netpipe,app,sizes,interval,restart")
    ap.add_argument("--plots", default=f"{ROOT}/docs/performance")
    a = ap.parse_args()
    prefix = os.path.abspath(a.prefix)
    only = set(a.only.split(","))
    os.makedirs(a.plots, exist_ok=True)
    mibs = [int(x) for x in a.sizes.split(",")]
    size_rows = interval_rows = restart_rows = None
    with tempfile.TemporaryDirectory(prefix="steadfast-ckpt-bench.") as work:
        if "overhead" in only:
            overhead(prefix, work, max(a.rounds, 5))
        if "netpipe" in only:
            netpipe(prefix, work, a.rounds, a.plots)
        if "app" in only:
            app(prefix, work, max(a.rounds, 5))
        if "sizes" in only:
            size_rows = sizes(prefix, work, a.ranks, mibs, a.rounds, a.plots)
        if "interval" in only:
            interval_rows = intervals(prefix, work, a.ranks, [float(x) for x in a.intervals.split(",")], a.rounds, a.plots)
        if "restart" in only:
            restart_rows = rollbacks(prefix, work, a.ranks, mibs, a.plots)
    plot(a.plots, size_rows, interval_rows, restart_rows)


if __name__ == "__main__":
    main()
