#!/usr/bin/env python3
"""Channel broadcast on one host (docs/reproduction/channel-bcast.md): CSV and PNG in one run.

Builds bench/osu/osu.c with each MPI's wrapper and times MPI_Bcast the OSU way (every call
timed on its own, a barrier between calls, µs per call averaged over the ranks), alternating
the configurations round by round (--rounds, medians over the rounds):

  channels   8-byte broadcast, channels forced on, 2, 4, 8, 16, 32, 64 channels (paper Fig. 7),
             with the paper's delayed synchronization (STEADFAST_COLL_CHANNEL_SYNC=0) and with
             the default early one (half the channels)
  sizes      8 B ... 64 KiB: Steadfast channels (forced on), Steadfast tree (forced off),
             Steadfast default rule, Open MPI (vader), MPICH (paper Fig. 5)
  ranks      8 B and 4 KiB against the number of ranks (--fig6-ranks, 2 to 16): Steadfast
             channels, tree and default rule, Open MPI, MPICH (paper Fig. 6)
  crc        channels forced on with and without CRC, 8 B and 64 KiB (paper Fig. 8)
  loop       bench/bcast_loop.c: broadcasts back to back (no barrier), 8 B and 32 KiB:
             channels delayed and early, tree, default, Open MPI, MPICH
  target     issue 20's target, 8-byte MPI_Bcast <= 0.7x Open MPI's latency: channels
             forced on, the default rule and Open MPI, alternating, --target-rounds rounds
             (15: Open MPI's time moves 10-fold from launch to launch when ranks outnumber
             CPUs, so a median needs more rounds than the figures); every round's numbers
             in target.csv, the verdict printed

on 4 and 8 ranks (--ranks). Writes docs/reproduction/channel-bcast/{channels,sizes,ranks,crc,loop}.csv,
one PNG per figure (matplotlib), load.txt (load average before and after), target.csv and
target-load.txt.

  python3 bench/chbcast.py [--prefix install] [--rounds 5] [--ranks 4,8] [--quick]
                           [--target-rounds 15] [--target-only]
"""

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
SRC = BENCH / "osu" / "osu.c"
LOOP = BENCH / "bcast_loop.c"
OUT = ROOT / "docs" / "reproduction" / "channel-bcast"
OMPI = ["mpiexec.openmpi", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
        "--mca", "pml", "ob1", "--mca", "btl", "self,vader"]
MPICH = ["mpiexec.mpich", "-bind-to", "none"]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def build(cc, out, extra, src=SRC):
    if not shutil.which(cc) and not Path(cc).exists():
        return False
    r = subprocess.run([cc, "-O2", "-Wall"] + extra + ["-o", str(out), str(src)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        log(f"{cc}: osu.c does not build: {r.stderr.strip()[:300]}")
    return r.returncode == 0


def run(launch, env, np, argv, timeout=300, spread=False):
    e = dict(os.environ)
    e.update(env)
    try:
        r = subprocess.run(launch + ["-n", str(np)] + argv, capture_output=True, text=True, env=e,
                           timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        log(f"timed out: {' '.join(launch)} -n {np}")
        return {}
    if r.returncode != 0:
        log(f"failed ({r.returncode}): {' '.join(launch)} -n {np}: {r.stderr.strip()[-300:]}")
        return {}
    res = {}
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) >= 3 and f[0] in ("bcast", "loop"):
            # osu.c prints the mean over the ranks, then the fastest and slowest rank.
            res[int(f[1])] = tuple(float(x) for x in f[2:5]) if spread else float(f[2])
    return res


def loadavg():
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prefix", default=str(ROOT / "install"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ranks", default="4,8")
    ap.add_argument("--quick", action="store_true", help="3 rounds, fewer channel counts, 5 target rounds")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--plot-only", action="store_true", help="draw the PNG files from the CSV files")
    ap.add_argument("--fig6-ranks", default="2,4,8,16", help="rank counts of the ranks figure")
    ap.add_argument("--target-rounds", type=int, default=15, help="rounds of the target check (0: none)")
    ap.add_argument("--target-only", action="store_true", help="only the target check")
    a = ap.parse_args()
    if a.plot_only:
        plot(Path(a.out), [int(x) for x in a.ranks.split(",")], [int(x) for x in a.fig6_ranks.split(",")])
        return
    rounds = 3 if a.quick else a.rounds
    ranks = [int(x) for x in a.ranks.split(",")]
    fig6_ranks = [int(x) for x in a.fig6_ranks.split(",")]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    bins = ROOT / "build" / "chbcast"
    bins.mkdir(parents=True, exist_ok=True)
    prefix = Path(a.prefix).resolve()
    sf_exec = [str(prefix / "bin" / "mpiexec")]
    have = {"sf": build(str(prefix / "bin" / "mpicc"), bins / "osu-sf", []),
            "ompi": build("mpicc.openmpi", bins / "osu-ompi", ["-Wno-stringop-overflow"]),
            "mpich": build("mpicc.mpich", bins / "osu-mpich", ["-Wno-stringop-overflow"])}
    loop_ok = {"sf": build(str(prefix / "bin" / "mpicc"), bins / "loop-sf", [], LOOP),
               "ompi": have["ompi"] and build("mpicc.openmpi", bins / "loop-ompi", [], LOOP),
               "mpich": have["mpich"] and build("mpicc.mpich", bins / "loop-mpich", [], LOOP)}
    if not have["sf"] or not loop_ok["sf"]:
        sys.exit("cannot build osu.c or bcast_loop.c with Steadfast's mpicc")
    on = {"STEADFAST_COLL_FORCE": "bcast=channels"}
    channels = [2, 4, 16, 64] if a.quick else [2, 4, 8, 16, 32, 64]
    size_args = ["-M", "8", "-m", "65536", "-f", "4", "-k", "3"]
    small = ["-M", "8", "-m", "8", "-k", "3"]
    # (figure, label, launch, env, argv)
    jobs = []
    for c in channels:
        jobs.append(("channels", f"delayed {c}", sf_exec, dict(on, STEADFAST_COLL_CHANNELS=str(c), STEADFAST_COLL_CHANNEL_SYNC="0"), small))
        jobs.append(("channels", f"early {c}", sf_exec, dict(on, STEADFAST_COLL_CHANNELS=str(c)), small))
    jobs.append(("sizes", "steadfast channels", sf_exec, on, size_args))
    jobs.append(("sizes", "steadfast tree", sf_exec, {"STEADFAST_COLL_FORCE": "bcast=binomial"}, size_args))
    jobs.append(("sizes", "steadfast default", sf_exec, {}, size_args))
    if have["ompi"]:
        jobs.append(("sizes", "open mpi", OMPI, {}, size_args))
    if have["mpich"]:
        jobs.append(("sizes", "mpich", MPICH, {}, size_args))
    crc_args = ["-M", "8", "-m", "65536", "-f", "8192", "-k", "3"]
    jobs.append(("crc", "crc on", sf_exec, on, crc_args))
    jobs.append(("crc", "crc off", sf_exec, dict(on, STEADFAST_COLL_CHANNEL_CRC="0"), crc_args))
    # Back to back: iterations so that the slowest configuration takes about a second.
    # (MPICH's 32 KiB broadcast takes 10-50 ms a call when ranks outnumber CPUs.)
    for size, iters in ((8, "20000"), (32768, "500")):
        loop = ["LOOP", str(size), iters]
        jobs.append(("loop", "steadfast channels delayed", sf_exec, dict(on, STEADFAST_COLL_CHANNEL_SYNC="0"), loop))
        jobs.append(("loop", "steadfast channels early", sf_exec, on, loop))
        jobs.append(("loop", "steadfast tree", sf_exec, {"STEADFAST_COLL_FORCE": "bcast=binomial"}, loop))
        jobs.append(("loop", "steadfast default", sf_exec, {}, loop))
        if loop_ok["ompi"]:
            jobs.append(("loop", "open mpi", OMPI, {}, loop))
        if loop_ok["mpich"]:
            jobs.append(("loop", "mpich", MPICH, {}, loop))
    # Fig. 6: on its own rank counts, so it is a job list of its own.
    fig6_args = ["-M", "8", "-m", "4096", "-f", "512", "-k", "3"]
    fig6 = [("ranks", "steadfast channels", sf_exec, on, fig6_args),
            ("ranks", "steadfast tree", sf_exec, {"STEADFAST_COLL_FORCE": "bcast=binomial"}, fig6_args),
            ("ranks", "steadfast default", sf_exec, {}, fig6_args)]
    if have["ompi"]:
        fig6.append(("ranks", "open mpi", OMPI, {}, fig6_args))
    if have["mpich"]:
        fig6.append(("ranks", "mpich", MPICH, {}, fig6_args))
    binary = {"steadfast": bins / "osu-sf", "open mpi": bins / "osu-ompi", "mpich": bins / "osu-mpich"}
    loop_binary = {"steadfast": bins / "loop-sf", "open mpi": bins / "loop-ompi", "mpich": bins / "loop-mpich"}
    samples = {}  # (figure, label, np, size) -> [µs]
    loads = [f"start {time.strftime('%Y-%m-%d %H:%M:%S')} load {loadavg()} cpus {os.cpu_count()}"]
    if a.target_only:
        rounds = 0
    for r in range(rounds):
        log(f"round {r + 1}/{rounds} (load {loadavg()})")
        for np, js in [(np, jobs) for np in ranks] + [(np, fig6) for np in fig6_ranks]:
            for fig, label, launch, env, argv in js:
                fam = "open mpi" if label == "open mpi" else "mpich" if label == "mpich" else "steadfast"
                if argv[0] == "LOOP":
                    res = run(launch, env, np, [str(loop_binary[fam])] + argv[1:])
                else:
                    res = run(launch, env, np, [str(binary[fam]), "-b", "bcast"] + argv)
                for size, us in res.items():
                    samples.setdefault((fig, label, np, size), []).append(us)
        loads.append(f"after round {r + 1}: load {loadavg()}")
    verdict = []
    if a.target_rounds > 0 and have["ompi"]:
        verdict = target(min(a.target_rounds, 5) if a.quick else a.target_rounds, ranks, sf_exec, on, binary, out)
    if a.target_only:
        print("\n".join(verdict))
        return
    (out / "load.txt").write_text("\n".join(loads) + "\n")
    for fig in ("channels", "sizes", "ranks", "crc", "loop"):
        rows = sorted((k, v) for k, v in samples.items() if k[0] == fig)
        with open(out / f"{fig}.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["config", "ranks", "bytes", "median_us", "min_us", "max_us", "rounds"])
            for (_, label, np, size), v in rows:
                w.writerow([label, np, size, f"{statistics.median(v):.3f}", f"{min(v):.3f}",
                            f"{max(v):.3f}", len(v)])
    plot(out, ranks, fig6_ranks)
    for k, v in sorted(samples.items()):
        print(f"{k[0]:8} {k[1]:20} np={k[2]} {k[3]:>6} B  median {statistics.median(v):9.3f} us  "
              f"(min {min(v):.3f}, max {max(v):.3f}, {len(v)} rounds)")
    print("\n".join(loads))
    print("\n".join(verdict))


def target(rounds, ranks, sf_exec, on, binary, out):
    """Issue 20's target: 8-byte MPI_Bcast at most 0.7 times Open MPI's latency in the same
    run, CRC on. Alternating rounds of the channels (forced on), the default rule and Open
    MPI on every rank count; writes every round to target.csv (the load to
    target-load.txt) and returns the verdict."""
    loads = [f"start {time.strftime('%Y-%m-%d %H:%M:%S')} load {loadavg()} cpus {os.cpu_count()}"]
    configs = [("channels", sf_exec, on, "steadfast"), ("default", sf_exec, {}, "steadfast"),
               ("open mpi", OMPI, {}, "open mpi")]
    got = {}  # (config, np) -> [(round, mean, fastest rank, slowest rank)]
    for r in range(rounds):
        log(f"target round {r + 1}/{rounds} (load {loadavg()})")
        for np in ranks:
            for label, launch, env, fam in configs:
                res = run(launch, env, np, [str(binary[fam]), "-b", "bcast", "-M", "8", "-m", "8", "-k", "3"], spread=True)
                if 8 in res:
                    got.setdefault((label, np), []).append((r + 1,) + res[8])
        loads.append(f"after target round {r + 1}: load {loadavg()}")
    with open(out / "target.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["config", "ranks", "round", "mean_us", "fastest_rank_us", "slowest_rank_us"])
        for (label, np), rows in sorted(got.items()):
            for row in rows:
                w.writerow([label, np] + [row[0]] + [f"{x:.3f}" for x in row[1:]])
    (out / "target-load.txt").write_text("\n".join(loads) + "\n")
    verdict = []
    for np in ranks:
        ompi = got.get(("open mpi", np), [])
        if not ompi:
            verdict.append(f"target, {np} ranks: no Open MPI result")
            continue
        o = statistics.median(x[1] for x in ompi)
        for label in ("channels", "default"):
            mine = got.get((label, np), [])
            if not mine:
                verdict.append(f"target, {np} ranks, {label}: no result")
                continue
            m = statistics.median(x[1] for x in mine)
            by_round = {x[0]: x[1] for x in ompi}
            faster = sum(1 for x in mine if x[0] in by_round and x[1] < by_round[x[0]])
            verdict.append(f"target, {np} ranks, {label}: median {m:.3f} us against Open MPI's {o:.3f} us = "
                           f"{m / o:.2f}x ({'met' if m <= 0.7 * o else 'NOT met'}: <= 0.7x); faster than Open MPI "
                           f"in {faster} of {len(mine)} rounds; ours {min(x[1] for x in mine):.3f}-{max(x[1] for x in mine):.3f}, "
                           f"Open MPI {min(x[1] for x in ompi):.3f}-{max(x[1] for x in ompi):.3f} us")
    return verdict


def read_csv(path):
    """{(config, ranks, bytes): median µs} from one of the CSV files."""
    rows = {}
    if path.exists():
        with open(path) as f:
            for r in csv.DictReader(f):
                rows[(r["config"], int(r["ranks"]), int(r["bytes"]))] = float(r["median_us"])
    return rows


def plot(out, ranks, fig6_ranks):
    """PNG files from the CSV files (Debian's python3-matplotlib; when the running Python
    lacks it, /usr/bin/python3 is asked to draw them with --plot-only)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        system = "/usr/bin/python3"
        if Path(system).exists() and Path(sys.executable).resolve() != Path(system).resolve():
            subprocess.run([system, __file__, "--plot-only", "--out", str(out),
                            "--ranks", ",".join(map(str, ranks)), "--fig6-ranks", ",".join(map(str, fig6_ranks))])
        else:
            log("matplotlib missing (python3-matplotlib): no PNG")
        return
    chans = read_csv(out / "channels.csv")
    fig, axes = plt.subplots(1, len(ranks), figsize=(5 * len(ranks), 4), squeeze=False)
    for ax, np in zip(axes[0], ranks):
        for mode, what in (("delayed", "delayed synchronization (paper)"), ("early", "early synchronization (default)")):
            pts = sorted((int(k[0].split()[-1]), v) for k, v in chans.items()
                         if k[1] == np and k[0].split()[0] == mode)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=f"channels, {what}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("channels")
        ax.set_ylabel("8-byte MPI_Bcast latency (µs, median)")
        ax.set_title(f"{np} ranks")
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / "channels.png", dpi=100)
    plt.close(fig)
    sizes = read_csv(out / "sizes.csv")
    fig, axes = plt.subplots(1, len(ranks), figsize=(5 * len(ranks), 4), squeeze=False)
    labels = sorted({k[0] for k in sizes})
    for ax, np in zip(axes[0], ranks):
        for label in labels:
            pts = sorted((k[2], v) for k, v in sizes.items() if k[0] == label and k[1] == np)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("bytes")
        ax.set_ylabel("MPI_Bcast latency (µs, median)")
        ax.set_title(f"{np} ranks")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "sizes.png", dpi=100)
    plt.close(fig)
    by_ranks = read_csv(out / "ranks.csv")
    if by_ranks:
        sizes6 = sorted({k[2] for k in by_ranks})
        fig, axes = plt.subplots(1, len(sizes6), figsize=(5 * len(sizes6), 4), squeeze=False)
        labels = sorted({k[0] for k in by_ranks})
        for ax, size in zip(axes[0], sizes6):
            for label in labels:
                pts = sorted((k[1], v) for k, v in by_ranks.items() if k[0] == label and k[2] == size)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=label)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(fig6_ranks, [str(x) for x in fig6_ranks])
            ax.set_xlabel("ranks (2 CPUs)")
            ax.set_ylabel("MPI_Bcast latency (µs, median)")
            ax.set_title(f"{size} bytes")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "ranks.png", dpi=100)
        plt.close(fig)


if __name__ == "__main__":
    main()
