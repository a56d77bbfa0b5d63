#!/usr/bin/env python3
"""Costs of message logging (`mpiexec --ft pessimistic|causal|channel-memory`), measured side by side.

    python3 bench/mlog.py [--prefix install] [--rounds 3] [--only netpipe,recovery,memory]
                          [--upto BYTES] [--paths shm,tcp] [--plots DIR]

1. Failure-free overhead: NetPIPE's NPmpi (2 ranks, 1 B ... 8 MiB; fetched by
   scripts/fetch-netpipe.sh) with no fault tolerance, pessimistic and causal logging, on shm
   and on tcp, in alternating rounds; the median time of one transfer and the ratios.
2. Recovery of one rank against the amount of replay: tests/ckpt/ring.c (3 ranks) of 100,
   200 and 400 rounds, rank 1 killed once 90 % of the rounds are printed, in each mode
   without process images (the rank re-executes from its start) and with them
   (`--ckpt-interval 200ms`: from its newest image); the restarted rank reports how many
   events it replayed and how long the replay took (STEADFAST_STATS=1), and the job's run
   time is compared with a fault-free run.
3. Log memory: the bytes in each rank's sender-based log at the end of the same program of
   50 ... 400 rounds, without process images (the log only grows) and with them (each
   image frees the others' logs of what it holds); for channel memories, which keep no
   sender-based log, the bytes the channel memory server holds.

CSV files and, with matplotlib, PNG plots go to --plots DIR (default docs/performance).
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckpt import ROOT, build, npmpi, netpipe_run, write_csv  # noqa: E402

MODES = [("none", []), ("pessimistic", ["--ft", "pessimistic"]), ("causal", ["--ft", "causal"])]
LOGGING = ("pessimistic", "causal", "channel-memory")
IMAGES = ["--ckpt-interval", "200ms"]
SHOWN = (1, 8, 64, 512, 4096, 32768, 262144, 1048576, 8388608)


def netpipe(prefix, work, rounds, csv_dir, upto, paths):
    exe = npmpi(prefix, work)
    out = {}
    for path in paths:
        runs = {m: [] for m, _ in MODES}
        for _ in range(rounds):
            for m, extra in MODES:
                runs[m].append(netpipe_run(prefix, exe, work, ["--path", path, *extra], upto))
        sizes = sorted(set.intersection(*(set(r) for rs in runs.values() for r in rs)))
        print(f"\nNetPIPE (NPmpi, {path}, 2 ranks, {rounds} alternating rounds): time of one transfer")
        print("| size | no fault tolerance | pessimistic | ratio | causal | ratio |")
        print("|---:|---:|---:|---:|---:|---:|")
        rows = []
        for n in sizes:
            t = {m: statistics.median(r[n][1] for r in runs[m]) for m, _ in MODES}
            ratio = {m: statistics.median(c[n][1] / b[n][1] for b, c in zip(runs["none"], runs[m])) for m, _ in MODES[1:]}
            rows.append((n, t["none"], t["pessimistic"], ratio["pessimistic"], t["causal"], ratio["causal"]))
        for r in rows:
            if r[0] in SHOWN:
                print(f"| {r[0]} B | {r[1]:.2f} us | {r[2]:.2f} us | {r[3]:.3f} | {r[4]:.2f} us | {r[5]:.3f} |")
        write_csv(f"{csv_dir}/mlog-netpipe-{path}.csv", "bytes,usec_none,usec_pessimistic,ratio_pessimistic,usec_causal,ratio_causal", rows)
        out[path] = rows
    return out


def ring_job(prefix, exe, work, rounds, mode, kill_at=None, extra=()):
    """Run the ring; with kill_at (a fraction), kill rank 1 once that share of the rounds is
    printed. Returns (seconds, stderr, stdout)."""
    logdir = f"{work}/log"
    subprocess.run(["rm", "-rf", logdir])
    cmd = [f"{prefix}/bin/steadfast", "run", "--ckpt-dir", logdir, *(["--ft", mode] if mode != "none" else []), *extra,
           "-n", "3", exe, str(rounds), "10000", "100000", f"{work}/ring.log"]
    env = dict(os.environ, STEADFAST_STATS="1")
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    out_lines = []
    if kill_at is not None:
        want = int(rounds * kill_at)
        while len(out_lines) < want:
            line = p.stdout.readline()
            if not line:
                break
            out_lines.append(line)
        pid = None
        for line in open(f"{logdir}/ranks"):
            r, q = line.split()
            if r == "1":
                pid = int(q)
        os.kill(pid, signal.SIGKILL)
    rest, err = p.communicate()
    return time.time() - t0, err, "".join(out_lines) + rest


def recovery(prefix, work, csv_dir):
    exe = f"{work}/ring"
    build(prefix, f"{ROOT}/tests/ckpt/ring.c", exe)
    rows = []
    print("\nRecovery of one rank (tests/ckpt/ring.c, 3 ranks, rank 1 killed at 90 % of the rounds):")
    print("| mode | images | rounds | events replayed | replay time | job time: no fault tolerance | this mode, fault-free | with the failure | output identical |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    ref = {}
    for rounds in (100, 200, 400):
        ref[rounds] = ring_job(prefix, exe, work, rounds, "none")
    for mode in LOGGING:
        for images in (False, True):
            for rounds in (100, 200, 400):
                t_ref, _, out_ref = ref[rounds]
                t_ff, _, _ = ring_job(prefix, exe, work, rounds, mode, extra=IMAGES if images else ())
                t, err, out = ring_job(prefix, exe, work, rounds, mode, kill_at=0.9, extra=IMAGES if images else ())
                m = re.search(r"replayed (\d+) events in ([0-9.]+) s", err)
                ev, secs = (int(m.group(1)), float(m.group(2))) if m else (0, float("nan"))
                img = re.search(r"from its process image (\d+)", err)
                same = out == out_ref
                where = f"image {img.group(1)}" if img else ("none taken" if images else "no")
                rows.append((mode, int(images), rounds, ev, secs, t_ref, t_ff, t, int(same)))
                print(f"| {mode} | {where} | {rounds} | {ev} | {secs:.3f} s | {t_ref:.2f} s | {t_ff:.2f} s | {t:.2f} s | {'yes' if same else 'NO'} |")
    write_csv(f"{csv_dir}/mlog-recovery.csv", "mode,images,rounds,events,replay_s,job_s_no_ft,job_s_mode_fault_free,job_s_with_failure,identical", rows)
    return rows


def memory(prefix, work, csv_dir):
    exe = f"{work}/ring"
    build(prefix, f"{ROOT}/tests/ckpt/ring.c", exe)
    rows = []
    print("\nLog memory at the end (tests/ckpt/ring.c, 3 ranks, 800 KB exchanges): each rank's sender-based")
    print("log; channel memories: the bytes the server keeps for all ranks")
    print("| mode | images | rounds | rank 0 | rank 1 | rank 2 |")
    print("|---|---|---:|---:|---:|---:|")
    for mode in LOGGING:
        for images in (False, True):
            for rounds in (50, 100, 200, 400):
                _, err, _ = ring_job(prefix, exe, work, rounds, mode, extra=IMAGES if images else ())
                if mode == "channel-memory":
                    kept = sum(int(b) for b in re.findall(r"stats channel memory \d+: .*holding (\d+) bytes at the end", err))
                    mib = [kept / 2**20, float("nan"), float("nan")]
                else:
                    per = {int(a): int(b) for a, b in re.findall(r"stats rank (\d+): message log (\d+) bytes", err)}
                    mib = [per.get(r, 0) / 2**20 for r in range(3)]
                rows.append((mode, int(images), rounds, *mib))
                cells = f"{mib[0]:.1f} MiB (server) | | " if mode == "channel-memory" else " | ".join(f"{x:.1f} MiB" for x in mib)
                print(f"| {mode} | {'yes' if images else 'no'} | {rounds} | {cells} |")
    write_csv(f"{csv_dir}/mlog-memory.csv", "mode,images,rounds,rank0_or_server_mib,rank1_mib,rank2_mib", rows)
    return rows


def plot(out_dir, np_rows, rec_rows, mem_rows):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plots")
        return
    if np_rows:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for ax, (path, rows) in zip(axes, np_rows.items()):
            n = [r[0] for r in rows]
            ax.plot(n, [r[3] for r in rows], marker="o", label="pessimistic")
            ax.plot(n, [r[5] for r in rows], marker="s", label="causal")
            ax.axhline(1.0, color="gray", lw=0.8)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("message size (bytes)")
            ax.set_ylabel("time of one transfer / without fault tolerance")
            ax.set_title(f"NetPIPE, {path}")
            ax.legend()
        fig.tight_layout()
        fig.savefig(f"{out_dir}/mlog-netpipe.png", dpi=110)
    if rec_rows:
        fig, ax = plt.subplots(figsize=(6, 4))
        for mode in LOGGING:
            for images in (0, 1):
                rs = [r for r in rec_rows if r[0] == mode and r[1] == images]
                ax.plot([r[2] for r in rs], [r[4] for r in rs], marker="os"[images], ls=":" if images else "-",
                        label=f"{mode}{' with images' if images else ''}")
        ax.set_xlabel("rounds of the program (rank 1 killed at 90 %)")
        ax.set_ylabel("replay time (s)")
        ax.set_title("Recovery of one rank")
        ax.legend()
        fig.tight_layout()
        fig.savefig(f"{out_dir}/mlog-recovery.png", dpi=110)
    if mem_rows:
        fig, ax = plt.subplots(figsize=(6, 4))
        for mode in LOGGING:
            for images in (0, 1):
                rs = [r for r in mem_rows if r[0] == mode and r[1] == images]
                what = "server" if mode == "channel-memory" else "largest rank"
                ax.plot([r[2] for r in rs], [max(x for x in r[3:] if x == x) for r in rs], marker="os"[images],
                        ls=":" if images else "-", label=f"{mode}{' with images' if images else ''} ({what})")
        ax.set_xlabel("rounds of the program")
        ax.set_ylabel("log memory at the end (MiB)")
        ax.set_title("Log memory with and without process images")
        ax.legend()
        fig.tight_layout()
        fig.savefig(f"{out_dir}/mlog-memory.png", dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prefix", default=f"{ROOT}/install")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="netpipe,recovery,memory")
    ap.add_argument("--upto", type=int, default=8 << 20, help="largest NetPIPE message (bytes)")
    ap.add_argument("--paths", default="shm,tcp")
    ap.add_argument("--plots", default=f"{ROOT}/docs/performance")
    a = ap.parse_args()
    prefix = os.path.abspath(a.prefix)
    only = a.only.split(",")
    os.makedirs(a.plots, exist_ok=True)
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as work:
        np_rows = netpipe(prefix, work, a.rounds, a.plots, a.upto, a.paths.split(",")) if "netpipe" in only else {}
        rec = recovery(prefix, work, a.plots) if "recovery" in only else []
        mem = memory(prefix, work, a.plots) if "memory" in only else []
    plot(a.plots, np_rows, rec, mem)


if __name__ == "__main__":
    main()
