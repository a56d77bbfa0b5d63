#!/usr/bin/env python3
"""OSU-style micro-benchmark suite: Steadfast (shm, tcp) against Open MPI and MPICH.

Builds bench/osu/osu.c with each MPI's compiler wrapper and runs, for every configuration in
turn (alternating, --rounds times, medians over the rounds):

  2 ranks        latency, bw, bibw (0 B ... max), pinned one rank per CPU
  2, 4, 8 ranks  mr (multi-pair message rate), barrier, bcast, reduce, allreduce, gather,
                 scatter, allgather, alltoall, reduce_scatter, scan (4 B ... max, a barrier
                 between calls as OSU times them), iallreduce and ibcast (overlap test)
  4, 8 ranks     pairs (every rank ping-pongs with rank r xor 1, all at once) and ring (one
                 message round the ranks), 0 B ... 1 KiB, unpinned: latency with more ranks
                 than CPUs, where each hop hands a CPU from one process to another

and prints a markdown report: a summary of Steadfast / other ratios per test and rank count
(geometric mean and worst over sizes), then the full tables. Every ratio is a ratio of times
(Steadfast's time per operation over the other's): below 1 Steadfast is faster, for bandwidth
and message rate too (there it is the other's throughput over Steadfast's). PNG plots (time
or throughput against size, one line per MPI) go to docs/performance/ (--plots).

  python3 bench/osu.py                    # full suite, 5 rounds (tens of minutes when busy)
  python3 bench/osu.py --quick            # 3 rounds, fewer sizes, 2 and 4 ranks
  python3 bench/osu.py --ci               # short regression check against bench/osu/baseline.json

--ci runs a small subset (Steadfast shm against Open MPI, 2 and 4 ranks, sizes 4 B, 1 KiB,
64 KiB; best of 3 rounds of 3 batches) and fails when the geometric-mean ratio of a test is
more than --threshold times (default 2.5) its value in the baseline and above 1 (a test still
ahead of Open MPI never fails): ratios, not absolute times, so a slow or busy machine slows
every MPI alike. When a test fails, the rounds are run once more and the best of all decides.
It skips (exit 0, with a message) when Open MPI cannot be installed. --write-baseline stores the current ratios as the new baseline.
Standard library only; matplotlib (python3-matplotlib) only for the plots.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pingpong as pp  # noqa: E402  (configs, ensure_packages, run)

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
SRC = BENCH / "osu" / "osu.c"
BASELINE = BENCH / "osu" / "baseline.json"

P2P = ["latency", "bw", "bibw"]
COLL = ["barrier", "bcast", "reduce", "allreduce", "gather", "scatter", "allgather", "alltoall",
        "reduce_scatter", "scan"]
NBC = ["iallreduce", "ibcast"]
MULTI = ["mr"] + COLL + NBC
# Ping-pong among more ranks than two (time per hop of the slowest rank), up to PINGS_MAX bytes.
PINGS = ["pairs", "ring"]
PINGS_MAX = 1024
THROUGHPUT = {"bw", "bibw", "mr"}  # bigger is better; everything else is µs
UNITS = {"bw": "MB/s", "bibw": "MB/s", "mr": "msg/s"}

# CI subset: what runs, where, and at which sizes (osu -M lo -m hi -f factor).
CI_TESTS = {2: ["latency", "bw", "mr"],
            4: ["pairs", "ring", "barrier", "bcast", "reduce", "allreduce", "gather", "scatter", "allgather",
                "alltoall", "reduce_scatter", "scan"]}
CI_SIZES = (4, 65536, 16)  # 4 B, 64 B, 1 KiB, 16 KiB, 64 KiB


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def all_configs(prefix, ab):
    """The set-ups of pingpong.py, plus sf-ab: Steadfast shm with the --ab variables set
    (to compare a setting with the default in the same alternating rounds)."""
    cfgs = {c["key"]: c for c in pp.configs(prefix)}
    if ab:
        env = dict(kv.split("=", 1) for kv in ab.split(","))
        env["STEADFAST_PATH"] = "shm"
        cfgs["sf-ab"] = {"key": "sf-ab", "label": "Steadfast shm " + ab, "family": "steadfast",
                         "env": env, "launch": [str(prefix / "bin" / "mpiexec")]}
    return cfgs


def compilers(prefix):
    return {"steadfast": str(prefix / "bin" / "mpicc"), "openmpi": "mpicc.openmpi",
            "mpich": "mpicc.mpich"}


def build(family, cc, out, src=None):
    """Builds SRC (default osu.c) with one MPI's wrapper into OUT; (ok, why not)."""
    src = Path(src or SRC)
    if (family == "steadfast" and not Path(cc).exists()) or \
            (family != "steadfast" and not shutil_which(cc)):
        return False, f"{cc} not found"
    out.parent.mkdir(parents=True, exist_ok=True)
    # GCC 12 misreads MPI_STATUSES_IGNORE in MPICH's prototypes as a zero-length array.
    flags = ["-O2", "-Wall"] + ([] if family == "steadfast" else ["-Wno-stringop-overflow"])
    r = subprocess.run([cc] + flags + ["-o", str(out), str(src)], capture_output=True, text=True)
    if r.returncode != 0:
        (out.parent / "build.log").write_text(r.stdout + r.stderr)
        return False, f"{src.name} does not build: " + (r.stderr.strip().splitlines() or ["?"])[0]
    return True, ""


def shutil_which(cmd):
    import shutil
    return shutil.which(cmd)


def parse(text):
    """{test: {size: value}} from osu's output (first value: µs, MB/s or msg/s)."""
    res = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 3 and not line.startswith("#"):
            try:
                res.setdefault(f[0], {})[int(f[1])] = float(f[2])
                if f[0] in NBC and len(f) >= 4:
                    res.setdefault(f[0] + "%", {})[int(f[1])] = float(f[3])
            except ValueError:
                pass
    return res


def as_time(test, v):
    """A value turned into 'time per operation' so that every ratio reads the same way."""
    if v is None or v <= 0:
        return None
    return 1.0 / v if test in THROUGHPUT else v


def size_label(n):
    return pp.size_label(n)


def fmt(x):
    return pp.fmt(x)


def gmean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def jobs_for(args):
    """[(ranks, tests, extra osu args)] in the order one round runs them."""
    if args.ci:
        lo, hi, f = CI_SIZES
        return [(n, t, ["-M", str(lo), "-m", str(hi), "-f", str(f)] + (["-p"] if n == 2 else []))
                for n, t in CI_TESTS.items()]
    size = ["-m", str(args.max_size), "-f", str(args.factor)]
    out = []
    for n in args.ranks:
        tests = [t for t in MULTI if t in args.tests]
        if n == 2:
            p2p = [t for t in P2P if t in args.tests]
            if p2p:
                out.append((2, p2p, ["-M", "0", "-p"] + size))
        pings = [t for t in PINGS if t in args.tests]
        if n > 2 and pings:
            out.append((n, pings, ["-M", "0", "-m", str(min(args.max_size, PINGS_MAX)),
                                   "-f", str(args.factor)]))
        if tests:
            out.append((n, tests, ["-M", "4"] + size))
    return out


def run_suite(args, cfgs, out_dir, built):
    """data[key][ranks][test][size] = [value per round]; notes."""
    data, notes = {}, []
    jobs = jobs_for(args)
    for rnd in range(args.rounds):
        for job, (ranks, tests, extra) in enumerate(jobs):
            for cfg in cfgs:
                ok, why = built[cfg["family"]]
                if not ok:
                    if rnd == 0 and ranks == jobs[0][0]:
                        notes.append(f"{cfg['label']}: not run ({why})")
                    continue
                binary = out_dir / "build" / cfg["family"] / "osu"
                argv = [str(binary), "-b", ",".join(tests), "-t", str(args.ms),
                        "-k", str(args.batches)] + extra
                # One file per launch: with 2 ranks the point-to-point tests and the
                # collectives are separate launches of the same round.
                log_file = out_dir / f"{cfg['key']}.n{ranks}.j{job}.{rnd}.log"
                t0 = time.monotonic()
                out, why = pp.run(cfg, ranks, argv, args.timeout, log_file)
                if out is None and cfg["family"] == "openmpi" and \
                        "OMPI_MCA_btl_vader_single_copy_mechanism" not in cfg["env"]:
                    log(f"{cfg['label']}: {why}; retrying with single-copy mechanism off")
                    cfg["env"]["OMPI_MCA_btl_vader_single_copy_mechanism"] = "none"
                    out, why = pp.run(cfg, ranks, argv, args.timeout, log_file)
                    if out is not None:
                        notes.append(f"{cfg['label']}: ran with "
                                     "OMPI_MCA_btl_vader_single_copy_mechanism=none")
                if out is None:
                    notes.append(f"{cfg['label']}: {ranks} ranks failed in round {rnd + 1} ({why})")
                    continue
                log(f"round {rnd + 1}/{args.rounds}: {cfg['label']} {ranks} ranks "
                    f"{','.join(tests)} {time.monotonic() - t0:.0f} s")
                for test, rows in parse(out).items():
                    d = data.setdefault(cfg["key"], {}).setdefault(ranks, {}).setdefault(test, {})
                    for n, v in rows.items():
                        d.setdefault(n, []).append(v)
    return data, notes


def medians(data, stat):
    """Median (or, with --stat min, best) over the rounds; best means fastest."""
    def pick(test, vs):
        if stat == "median":
            return statistics.median(vs)
        return max(vs) if test in THROUGHPUT else min(vs)
    return {k: {r: {t: {n: pick(t, vs) for n, vs in rows.items()}
                    for t, rows in tests.items()} for r, tests in per.items()}
            for k, per in data.items()}


def both(src, a, b):
    """(ranks, test, size, a's entry, b's entry) for every size both have in `src`
    (medians or per-round lists); not the overlap percentages."""
    for ranks, tests in src.get(a, {}).items():
        for test, rows in tests.items():
            if test.endswith("%"):
                continue
            other = src.get(b, {}).get(ranks, {}).get(test, {})
            for n, va in rows.items():
                if n in other:
                    yield ranks, test, n, va, other[n]


def ratios(med, a, b):
    """{(ranks, test): {size: time ratio a/b}} where both have a value."""
    out = {}
    for ranks, test, n, va, vb in both(med, a, b):
        ta, tb = as_time(test, va), as_time(test, vb)
        if ta and tb:
            out.setdefault((ranks, test), {})[n] = ta / tb
    return out


def paired_ratios(data, a, b):
    """{(ranks, test): {size: median over the rounds of round i's time ratio a/b}}: where the
    machine switches between a fast and a slow state for tens of seconds at a time, both
    launches of a round mostly land in the same state, and the medians of each MPI's own
    rounds may not (one landing three slow rounds of five, the other two)."""
    out = {}
    for ranks, test, n, va, vb in both(data, a, b):
        rs = [as_time(test, x) / as_time(test, y) for x, y in zip(va, vb)
              if as_time(test, x) and as_time(test, y)]
        if len(va) == len(vb) and rs:
            out.setdefault((ranks, test), {})[n] = statistics.median(rs)
    return out


def test_order(key):
    ranks, test = key
    order = P2P + PINGS + MULTI
    return (test not in P2P, ranks, order.index(test) if test in order else 99)


def report(args, cfgs, med, notes, out_dir, load0, load1, data=None):
    shown = [c["key"] for c in cfgs]
    labels = {c["key"]: c["label"] for c in cfgs}
    # Steadfast tcp is compared with Open MPI tcp when that ran, else with Open MPI's default.
    tcp_ref = "ompi-tcp" if "ompi-tcp" in med else "ompi-vader"
    pairs = [(a, b, name) for a, b, name in
             [("sf-shm", "ompi-vader", "shm/OMPI"), ("sf-shm", "mpich", "shm/MPICH"),
              ("sf-ab", "ompi-vader", "ab/OMPI"), ("sf-shm", "sf-ab", "shm/ab"),
              ("sf-tcp", tcp_ref, "tcp/OMPI" + ("-tcp" if tcp_ref == "ompi-tcp" else ""))]
             if a in med and b in med]
    rat = {p[2]: ratios(med, p[0], p[1]) for p in pairs}
    # The same ratios paired by round (see `paired_ratios`), for the summary.
    paired = [(p[2] + " paired", paired_ratios(data, p[0], p[1])) for p in pairs
              if data and p[0] == "sf-shm" and p[1] == "ompi-vader" and args.rounds > 1]
    keys = sorted({k for r in rat.values() for k in r}, key=test_order)
    lines = [f"# OSU-style suite: {args.rounds} alternating rounds, "
             + ("medians" if args.stat == "median" else "best of the rounds")
             + (f", fastest of {args.batches} batches" if args.batches > 1 else ""), "",
             "Ratios are Steadfast's time per operation over the other MPI's (for bw, bibw "
             "and mr: the other's throughput over Steadfast's): < 1 means Steadfast is faster.",
             "", "## Summary: geometric mean over sizes (worst size in brackets)", ""]
    if paired:
        lines += ["A *paired* column takes, for each size, the median over the rounds of that "
                  "round's ratio instead of the ratio of the medians.", ""]
    lines += ["| test | ranks | " + " | ".join([p[2] for p in pairs] + [q[0] for q in paired]) + " |",
              "|---|---:|" + "---:|" * (len(pairs) + len(paired))]
    for key in keys:
        row = [key[1], str(key[0])]
        for r in [rat[p[2]].get(key) for p in pairs] + [q[1].get(key) for q in paired]:
            if not r:
                row.append("-")
                continue
            worst = max(r, key=lambda n: r[n])
            row.append(f"{fmt(gmean(r.values()))} ({fmt(r[worst])} at {size_label(worst)})")
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "## Full tables", ""]
    for key in keys:
        ranks, test = key
        unit = UNITS.get(test, "µs")
        lines += [f"### {test}, {ranks} ranks ({unit})", "",
                  "| size | " + " | ".join(labels[k] for k in shown) + " | "
                  + " | ".join(p[2] for p in pairs) + " |",
                  "|---:|" + "---:|" * (len(shown) + len(pairs))]
        sizes = sorted({n for k in shown for n in med.get(k, {}).get(ranks, {}).get(test, {})})
        for n in sizes:
            row = [size_label(n)]
            for k in shown:
                v = med.get(k, {}).get(ranks, {}).get(test, {}).get(n)
                pct = med.get(k, {}).get(ranks, {}).get(test + "%", {}).get(n)
                row.append("-" if v is None else fmt(v) + (f" ({pct:.0f}% ovl)" if pct is not None else ""))
            for p in pairs:
                row.append(fmt(rat[p[2]].get(key, {}).get(n)))
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    ncpu = os.cpu_count() or 1
    lines.append(f"Machine: {ncpu} CPUs, load average {load0:.1f} before and {load1:.1f} after; "
                 f"raw output in {out_dir}.")
    if max(load0, load1) > 0.5 * ncpu:
        lines.append(f"Warning: the machine was busy (load > {0.5 * ncpu:.0f}); numbers are noisy.")
    lines += [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n", rat


def plots(args, cfgs, med, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib not available (apt-get install python3-matplotlib): no plots")
        return []
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for ranks in sorted({r for k in med for r in med[k]}):
        tests = [t for t in P2P + PINGS + MULTI
                 if any(t in med[k].get(ranks, {}) for k in med)]
        if not tests:
            continue
        cols = 4
        rows = (len(tests) + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.2 * rows), squeeze=False)
        for i, test in enumerate(tests):
            ax = axes[i // cols][i % cols]
            for c in cfgs:
                rows_ = med.get(c["key"], {}).get(ranks, {}).get(test, {})
                pts = sorted((n, v) for n, v in rows_.items() if v > 0)
                if not pts:
                    continue
                xs = [max(n, 1) for n, _ in pts]
                ax.plot(xs, [v for _, v in pts], marker=".", label=c["label"])
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{test} ({UNITS.get(test, 'µs')})", fontsize=9)
            ax.tick_params(labelsize=7)
            ax.grid(True, which="major", alpha=0.3)
        for j in range(len(tests), rows * cols):
            axes[j // cols][j % cols].axis("off")
        axes[0][0].legend(fontsize=7)
        fig.suptitle(f"OSU-style suite, {ranks} ranks on {os.cpu_count()} CPUs "
                     f"(median of {args.rounds} alternating rounds; x: bytes)", fontsize=10)
        fig.tight_layout()
        path = out / f"osu-{ranks}ranks.png"
        fig.savefig(path, dpi=64)
        plt.close(fig)
        written.append(path)
    return written


def ci_check(args, rat, baseline_path):
    """Compares the ratios' geometric means with the baseline; returns the exit status."""
    key = "shm/OMPI"
    now = {f"{t}@{r}": gmean(v.values()) for (r, t), v in rat.get(key, {}).items()}
    if args.write_baseline:
        doc = {"pair": "Steadfast shm / Open MPI vader, time ratio, geometric mean over sizes, "
                       f"{args.stat} of {args.rounds} rounds, fastest of {args.batches} batches",
               "sizes": list(CI_SIZES),
               "ratios": {k: round(v, 3) for k, v in sorted(now.items()) if v}}
        Path(args.write_baseline).write_text(json.dumps(doc, indent=1) + "\n")
        log(f"baseline written to {args.write_baseline}")
        return 0
    if not now:
        print("osu CI: no Steadfast/Open MPI ratios were measured; see the notes above")
        return 1
    base = json.loads(Path(baseline_path).read_text())["ratios"]
    bad = []
    print(f"| test | baseline | now | now/baseline (fails above {args.threshold}) |")
    print("|---|---:|---:|---:|")
    for k in sorted(base):
        v = now.get(k)
        if v is None:
            bad.append(f"{k}: not measured")
            print(f"| {k} | {base[k]:.2f} | - | - |")
            continue
        q = v / base[k]
        # A test still at or ahead of Open MPI never fails: tiny baselines are the noisiest.
        worse = q > args.threshold and v > 1.0
        print(f"| {k} | {base[k]:.2f} | {v:.2f} | {q:.2f}{' REGRESSION' if worse else ''} |")
        if worse:
            bad.append(f"{k}: ratio {v:.2f}, baseline {base[k]:.2f}")
    if bad:
        print("osu CI: regression against " + str(baseline_path) + ":\n  " + "\n  ".join(bad))
        return 1
    print("osu CI: no ratio regressed beyond the threshold")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--prefix", default=os.environ.get("PREFIX", str(ROOT / "install")))
    ap.add_argument("--quick", action="store_true",
                    help="3 rounds, 2 and 4 ranks, sizes x4 apart, 20 ms per size")
    ap.add_argument("--ci", action="store_true", help="short regression check (see above)")
    ap.add_argument("--only", default="", help="configs: sf-shm,sf-tcp,ompi-vader,ompi-tcp,mpich "
                    "(default all but ompi-tcp; --ci: sf-shm,ompi-vader)")
    ap.add_argument("--ab", default="", help="also run Steadfast shm with these variables "
                    "(VAR=VALUE,...) as config sf-ab, e.g. STEADFAST_COLL_FORCE=barrier=dissemination")
    ap.add_argument("--tests", default="", help="comma-separated subset of "
                    + ",".join(P2P + PINGS + MULTI))
    ap.add_argument("--ranks", default="", help="rank counts (default 2,4,8)")
    ap.add_argument("--rounds", type=int, default=0, help="alternating rounds (default 5)")
    ap.add_argument("--max-size", type=int, default=1 << 20)
    ap.add_argument("--factor", type=int, default=0, help="size step (default 2)")
    ap.add_argument("--ms", type=float, default=0, help="target ms per size (default 60)")
    ap.add_argument("--batches", type=int, default=0,
                    help="timed batches per size, fastest kept (default 1 as OSU; --ci: 3)")
    ap.add_argument("--stat", default="", choices=["", "median", "min"],
                    help="over rounds: median (default) or best (--ci)")
    ap.add_argument("--plots", default=str(ROOT / "docs" / "performance"),
                    help="where PNGs go ('' for none; --ci: none)")
    ap.add_argument("--baseline", default=str(BASELINE))
    ap.add_argument("--write-baseline", default="", help="--ci: store the ratios here instead")
    ap.add_argument("--threshold", type=float, default=2.5)
    ap.add_argument("--no-install", action="store_true")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--results", default=str(BENCH / "results"))
    args = ap.parse_args()

    if args.ci:
        defaults = dict(rounds=3, ms=4, only="sf-shm,ompi-vader", ranks="2,4", factor=16,
                        batches=3, stat="min")
        args.plots = ""
    elif args.quick:
        defaults = dict(rounds=3, ms=20, only="sf-shm,sf-tcp,ompi-vader,mpich", ranks="2,4",
                        factor=4, batches=1, stat="median")
    else:
        defaults = dict(rounds=5, ms=60, only="sf-shm,sf-tcp,ompi-vader,mpich", ranks="2,4,8",
                        factor=2, batches=1, stat="median")
    for k, v in defaults.items():
        if not getattr(args, k):
            setattr(args, k, v)
    args.ranks = [int(x) for x in str(args.ranks).split(",")]
    args.tests = set(args.tests.split(",")) if args.tests else set(P2P + PINGS + MULTI)
    unknown = args.tests - set(P2P + PINGS + MULTI)
    if unknown:
        ap.error("unknown test(s): " + ", ".join(sorted(unknown)))

    prefix = Path(args.prefix).resolve()
    every = all_configs(prefix, args.ab)
    if args.ab and "sf-ab" not in args.only.split(","):
        args.only += ",sf-ab"
    keys = args.only.split(",")
    if set(keys) - set(every):
        ap.error("unknown config(s): " + ", ".join(sorted(set(keys) - set(every))))
    cfgs = [every[k] for k in keys]
    out_dir = Path(args.results) / ("osu-" + time.strftime("%Y%m%d-%H%M%S"))
    out_dir.mkdir(parents=True, exist_ok=True)
    pp.ensure_packages(args.no_install)
    built = {}
    for fam, cc in compilers(prefix).items():
        if fam == "steadfast" and not (prefix / "bin" / "mpiexec").exists():
            built[fam] = (False, f"{prefix}/bin/mpiexec does not exist (run make)")
        else:
            built[fam] = build(fam, cc, out_dir / "build" / fam / "osu")
        if not built[fam][0]:
            log(f"{fam}: skipped ({built[fam][1]})")

    if args.ci and not (built["steadfast"][0] and built["openmpi"][0]):
        print("osu CI: skipped: " + "; ".join(f"{f}: {w}" for f, (ok, w) in built.items()
                                               if not ok and f != "mpich"))
        return 0
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    data, notes = run_suite(args, cfgs, out_dir, built)
    med = medians(data, args.stat)
    load1 = os.getloadavg()[0]
    (out_dir / "medians.json").write_text(json.dumps(
        {k: {str(r): t for r, t in v.items()} for k, v in med.items()}, indent=1))
    text, rat = report(args, cfgs, med, notes, out_dir, load0, load1, data)
    (out_dir / "report.md").write_text(text)
    log(f"suite took {time.monotonic() - t0:.0f} s")
    if args.ci:
        status = ci_check(args, rat, args.baseline)
        if status != 0 and not args.write_baseline:
            # The machine this runs on is shared: one more set of rounds, then the best of all.
            log("a ratio regressed: measuring once more before failing")
            more, notes2 = run_suite(args, cfgs, out_dir, built)
            for k, per in more.items():
                for r, tests in per.items():
                    for t, rows in tests.items():
                        for n, vs in rows.items():
                            data.setdefault(k, {}).setdefault(r, {}).setdefault(t, {}) \
                                .setdefault(n, []).extend(vs)
            args.rounds *= 2  # the report counts both sets
            text, rat = report(args, cfgs, medians(data, args.stat), notes + notes2, out_dir,
                               load0, os.getloadavg()[0], data)
            (out_dir / "report.md").write_text(text)
            status = ci_check(args, rat, args.baseline)
        if status != 0:
            sys.stdout.write(text)
        return status
    sys.stdout.write(text)
    if args.plots:
        for p in plots(args, cfgs, med, Path(args.plots)):
            log(f"plot: {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
