#!/usr/bin/env python3
"""One-sided (RMA) micro-benchmarks: Steadfast shm against Open MPI and MPICH.

Builds bench/osu/rma.c with each MPI's compiler wrapper and runs it on 2 ranks of one host,
pinned one rank per CPU, for every configuration in turn (alternating, --rounds times,
medians over the rounds):

  sf-shm       Steadfast, STEADFAST_PATH=shm
  ompi         Open MPI, ob1 + vader, --mca osc sm,pt2pt: its shared-memory component for
               MPI_Win_allocate windows, pt2pt (active messages over vader) for MPI_Win_create
               windows, which osc sm does not take
  ompi-pt2pt   Open MPI, ob1 + vader, --mca osc pt2pt for both window kinds
  mpich        MPICH (its default device)

Tests (rma.c): put, get and accumulate latency over sizes, fetch_and_op and compare_and_swap
latency, put and get bandwidth (windows of 64 operations); each with lock/unlock per epoch,
with flush in one lock, and with fence; windows from MPI_Win_allocate and MPI_Win_create.

Prints a markdown report: the put/get latency target (Steadfast / Open MPI on shm <= 1.0,
per test, synchronization and window: geometric mean over sizes and the worst size), a
summary of Steadfast / other ratios, and full tables. Every ratio is a ratio of times
(Steadfast's time per operation over the other's; for bandwidth the other's MB/s over
Steadfast's): below 1 Steadfast is faster.

Open MPI runs with OMPI_MCA_btl_vader_single_copy_mechanism=none: with the default (CMA),
Debian's Open MPI 4.1.4 dies with a segmentation fault in the vader BTL's receive path in
the barrier after cas_lat on MPI_Win_allocate windows. The setting only changes how vader
moves large point-to-point messages (osc sm's puts and gets are its own memcpy).

  python3 bench/rma.py                    # 5 rounds, 1 B ... 1 MiB, sizes x2 apart
  python3 bench/rma.py --quick            # 3 rounds, sizes x4 apart, 20 ms per size
Standard library only.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import osu  # noqa: E402  (build, gmean, shutil_which)
import pingpong as pp  # noqa: E402  (ensure_packages, run, fmt, size_label)

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
SRC = BENCH / "osu" / "rma.c"

TESTS = ["put_lat", "get_lat", "acc_lat", "fop_lat", "cas_lat", "put_bw", "get_bw"]
SYNCS = ["lock", "flush", "fence"]
WINDOWS = ["allocate", "create"]
TARGET_TESTS = ["put_lat", "get_lat"]
TARGET_BOUND = 1.0


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def configs(prefix):
    ompi = ["mpiexec.openmpi", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
            "--mca", "pml", "ob1", "--mca", "btl", "self,vader"]
    ompi_env = {"OMPI_MCA_btl_vader_single_copy_mechanism": "none"}
    return [
        {"key": "sf-shm", "label": "Steadfast shm", "family": "steadfast",
         "env": {"STEADFAST_PATH": "shm"}, "launch": [str(prefix / "bin" / "mpiexec")]},
        {"key": "ompi", "label": "Open MPI osc sm,pt2pt", "family": "openmpi",
         "env": dict(ompi_env), "launch": ompi + ["--mca", "osc", "sm,pt2pt"]},
        {"key": "ompi-pt2pt", "label": "Open MPI osc pt2pt", "family": "openmpi",
         "env": dict(ompi_env), "launch": ompi + ["--mca", "osc", "pt2pt"]},
        {"key": "mpich", "label": "MPICH", "family": "mpich", "env": {},
         "launch": ["mpiexec.mpich", "-bind-to", "none"]},
    ]


def parse(text):
    """{"test/sync/window": {size: value}} from rma's output."""
    res = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) == 3 and not line.startswith("#") and f[0].count("/") == 2:
            try:
                res.setdefault(f[0], {})[int(f[1])] = float(f[2])
            except ValueError:
                pass
    return res


def is_bw(key):
    return key.split("/")[0].endswith("_bw")


def as_time(key, v):
    if v is None or v <= 0:
        return None
    return 1.0 / v if is_bw(key) else v


def order(key):
    t, s, w = key.split("/")
    return (WINDOWS.index(w), TESTS.index(t), SYNCS.index(s))


def run_rounds(args, cfgs, out_dir, built, notes):
    """data[config][key][size] = [value per round]."""
    data = {}
    argv_tail = ["-b", ",".join(args.tests), "-s", ",".join(args.syncs),
                 "-m", str(args.max_size), "-f", str(args.factor), "-t", str(args.ms), "-p"]
    for rnd in range(args.rounds):
        for cfg in cfgs:
            ok, why = built[cfg["family"]]
            if not ok:
                if rnd == 0:
                    notes.append(f"{cfg['label']}: not run ({why})")
                continue
            binary = out_dir / "build" / cfg["family"] / "rma"
            got = {}
            # One launch per window kind, so that a kind an implementation refuses (its
            # constructor fails and aborts the job) costs only that kind's columns.
            for w in args.windows:
                argv = [str(binary)] + argv_tail + ["-w", w]
                log_file = out_dir / f"{cfg['key']}.{w}.{rnd}.log"
                t0 = time.monotonic()
                out, why = pp.run(cfg, 2, argv, args.timeout, log_file)
                if out is None:
                    note = f"{cfg['label']}: MPI_Win_{w} windows failed ({why})"
                    if note not in notes:
                        notes.append(note)
                    continue
                got.update(parse(out))
                log(f"round {rnd + 1}/{args.rounds}: {cfg['label']} MPI_Win_{w} "
                    f"{time.monotonic() - t0:.0f} s")
            for key, rows in got.items():
                d = data.setdefault(cfg["key"], {}).setdefault(key, {})
                for n, v in rows.items():
                    d.setdefault(n, []).append(v)
    return data


def medians(data):
    return {c: {k: {n: statistics.median(vs) for n, vs in rows.items()}
                for k, rows in per.items()} for c, per in data.items()}


def ratios(med, a, b):
    out = {}
    for key, rows in med.get(a, {}).items():
        other = med.get(b, {}).get(key, {})
        for n, v in rows.items():
            ta, tb = as_time(key, v), as_time(key, other.get(n))
            if ta and tb:
                out.setdefault(key, {})[n] = ta / tb
    return out


def fmt(x):
    """Values below 1 (µs of the small operations) with three decimals: two would round
    0.014 and 0.026 to the same 0.01 and 0.03 that hide a 1.9x ratio."""
    return "-" if x is None else f"{x:.3f}" if x < 1 else pp.fmt(x)


def summary_cell(r):
    if not r:
        return "-"
    worst = max(r, key=lambda n: r[n])
    return f"{pp.fmt(osu.gmean(r.values()))} ({pp.fmt(r[worst])} at {pp.size_label(worst)})"


def report(args, cfgs, med, notes, out_dir, load0, load1, took):
    shown = [c["key"] for c in cfgs if c["key"] in med]
    labels = {c["key"]: c["label"] for c in cfgs}
    pairs = [(a, b, name) for a, b, name in
             [("sf-shm", "ompi", "SF/OMPI"), ("sf-shm", "ompi-pt2pt", "SF/OMPI-pt2pt"),
              ("sf-shm", "mpich", "SF/MPICH")] if a in med and b in med]
    rat = {p[2]: ratios(med, p[0], p[1]) for p in pairs}
    keys = sorted({k for c in med for k in med[c]}, key=order)
    lines = [f"# One-sided suite: 2 ranks on one host, {args.rounds} alternating rounds, medians",
             "", "Ratios are Steadfast's time per operation over the other MPI's (bandwidth: "
             "the other's MB/s over Steadfast's): < 1 means Steadfast is faster.", ""]
    if "SF/OMPI" in rat:
        lines += [f"## Target: put/get latency, Steadfast shm / Open MPI (osc sm,pt2pt) "
                  f"<= {TARGET_BOUND}", "",
                  "| test | sync | window | geometric mean (worst size) | verdict |",
                  "|---|---|---|---:|---|"]
        for key in keys:
            t, s, w = key.split("/")
            if t not in TARGET_TESTS:
                continue
            r = rat["SF/OMPI"].get(key)
            verdict = "-" if not r else \
                "PASS" if osu.gmean(r.values()) <= TARGET_BOUND else "MISS"
            lines.append(f"| {t} | {s} | {w} | {summary_cell(r)} | {verdict} |")
        lines.append("")
    lines += ["## Summary: geometric mean over sizes (worst size in brackets)", "",
              "| test | sync | window | " + " | ".join(p[2] for p in pairs) + " |",
              "|---|---|---|" + "---:|" * len(pairs)]
    for key in keys:
        lines.append(f"| {' | '.join(key.split('/'))} | "
                     + " | ".join(summary_cell(rat[p[2]].get(key)) for p in pairs) + " |")
    lines += ["", "## Full tables", ""]
    for key in keys:
        t, s, w = key.split("/")
        unit = "MB/s" if is_bw(key) else "µs"
        lines += [f"### {t}, {s}, MPI_Win_{w} ({unit})", "",
                  "| size | " + " | ".join(labels[k] for k in shown) + " | "
                  + " | ".join(p[2] for p in pairs) + " |",
                  "|---:|" + "---:|" * (len(shown) + len(pairs))]
        sizes = sorted({n for k in shown for n in med[k].get(key, {})})
        for n in sizes:
            row = [pp.size_label(n)] + [fmt(med[k].get(key, {}).get(n)) for k in shown] + \
                  [pp.fmt(rat[p[2]].get(key, {}).get(n)) for p in pairs]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    ncpu = os.cpu_count() or 1
    lines.append(f"Machine: {ncpu} CPUs, load average {load0:.2f} before and {load1:.2f} after; "
                 f"{took:.0f} s; raw output in {out_dir}.")
    if max(load0, load1) > 0.5 * ncpu:
        lines.append(f"Warning: the machine was busy (load > {0.5 * ncpu:.0f}); numbers are noisy.")
    lines += [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--prefix", default=os.environ.get("PREFIX", str(ROOT / "install")))
    ap.add_argument("--quick", action="store_true", help="3 rounds, sizes x4 apart, 20 ms per size")
    ap.add_argument("--only", default="sf-shm,ompi,ompi-pt2pt,mpich",
                    help="configs (default: all four)")
    ap.add_argument("--tests", default=",".join(TESTS))
    ap.add_argument("--syncs", default=",".join(SYNCS))
    ap.add_argument("--windows", default=",".join(WINDOWS))
    ap.add_argument("--rounds", type=int, default=0, help="alternating rounds (default 5)")
    ap.add_argument("--max-size", type=int, default=1 << 20)
    ap.add_argument("--factor", type=int, default=0, help="size step (default 2)")
    ap.add_argument("--ms", type=float, default=0, help="target ms per size (default 40)")
    ap.add_argument("--no-install", action="store_true")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--results", default=str(BENCH / "results"))
    args = ap.parse_args()
    defaults = dict(rounds=3, factor=4, ms=20) if args.quick else dict(rounds=5, factor=2, ms=40)
    for k, v in defaults.items():
        if not getattr(args, k):
            setattr(args, k, v)
    args.tests = args.tests.split(",")
    args.syncs = args.syncs.split(",")
    args.windows = args.windows.split(",")
    for name, got, known in (("test", args.tests, TESTS), ("sync", args.syncs, SYNCS),
                             ("window", args.windows, WINDOWS)):
        if set(got) - set(known):
            ap.error(f"unknown {name}(s): " + ", ".join(sorted(set(got) - set(known))))

    prefix = Path(args.prefix).resolve()
    every = {c["key"]: c for c in configs(prefix)}
    keys = args.only.split(",")
    if set(keys) - set(every):
        ap.error("unknown config(s): " + ", ".join(sorted(set(keys) - set(every))))
    cfgs = [every[k] for k in keys]
    out_dir = Path(args.results) / ("rma-" + time.strftime("%Y%m%d-%H%M%S"))
    out_dir.mkdir(parents=True, exist_ok=True)
    pp.ensure_packages(args.no_install)
    built = {}
    for fam, cc in osu.compilers(prefix).items():
        if fam == "steadfast" and not (prefix / "bin" / "mpiexec").exists():
            built[fam] = (False, f"{prefix}/bin/mpiexec does not exist (run make)")
        else:
            built[fam] = osu.build(fam, cc, out_dir / "build" / fam / "rma", SRC)
        if not built[fam][0]:
            log(f"{fam}: skipped ({built[fam][1]})")
    notes = []
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    data = run_rounds(args, cfgs, out_dir, built, notes)
    took = time.monotonic() - t0
    med = medians(data)
    (out_dir / "medians.json").write_text(json.dumps(med, indent=1))
    text = report(args, cfgs, med, notes, out_dir, load0, os.getloadavg()[0], took)
    (out_dir / "report.md").write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
