#!/usr/bin/env python3
"""Ping-pong and small-collective comparison of Steadfast with Open MPI and MPICH.

One invocation builds bench/pingpong.c and bench/coll.c with each MPI's compiler
wrapper, runs them on

  Steadfast shm   STEADFAST_PATH=shm PREFIX/bin/mpiexec -n 2
  Steadfast tcp   PREFIX/bin/mpiexec --path tcp -n 2   (STEADFAST_PATH=tcp too)
  Open MPI vader  mpiexec.openmpi --mca pml ob1 --mca btl self,vader -n 2
  Open MPI tcp    mpiexec.openmpi --mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo -n 2
  MPICH           mpiexec.mpich -n 2

and prints, on stdout, a markdown table of latency and bandwidth per message size
with Steadfast/Open MPI ratios, the performance targets with PASS/MISS, and a
table of 8-byte Allreduce and Bcast times on 4 ranks. Progress goes to stderr;
raw outputs and the report are kept under bench/results/<timestamp>/.

Steadfast is skipped (columns show "-") while PREFIX/bin/mpiexec does not exist.
Missing Open MPI / MPICH packages are installed with apt-get unless --no-install.

Binding: every launcher's own binding is left off (Open MPI --bind-to none,
MPICH -bind-to none) and pingpong pins itself (-p: rank r on the r-th allowed
CPU), which is the same mechanism for every MPI. Standard library only.
"""

import argparse
import os
import re
import statistics
import shutil
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent

# Performance targets: (description, kind, size, transport, bound).
TARGETS = [
    ("shm 1 B latency, Steadfast / Open MPI vader <= 1.25", "lat", 1, "shm", 1.25),
    ("shm 1 MiB bandwidth, Steadfast / Open MPI vader >= 1.0", "bw", 1 << 20, "shm", 1.0),
    ("shm 8 MiB bandwidth, Steadfast / Open MPI vader >= 1.0", "bw", 8 << 20, "shm", 1.0),
    ("tcp 1 B latency, Steadfast / Open MPI tcp <= 1.0", "lat", 1, "tcp", 1.0),
]

PACKAGES = ["openmpi-bin", "libopenmpi-dev", "mpich", "libmpich-dev"]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def configs(prefix):
    """The MPI set-ups to compare, in table order."""
    sf_exec = str(prefix / "bin" / "mpiexec")
    ompi = ["mpiexec.openmpi", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
            "--mca", "pml", "ob1"]
    return [
        {"key": "sf-shm", "label": "Steadfast shm", "family": "steadfast",
         "env": {"STEADFAST_PATH": "shm"}, "launch": [sf_exec]},
        {"key": "sf-tcp", "label": "Steadfast tcp", "family": "steadfast",
         "env": {"STEADFAST_PATH": "tcp"}, "launch": [sf_exec, "--path", "tcp"]},
        {"key": "ompi-vader", "label": "Open MPI vader", "family": "openmpi", "env": {},
         "launch": ompi + ["--mca", "btl", "self,vader"]},
        {"key": "ompi-tcp", "label": "Open MPI tcp", "family": "openmpi", "env": {},
         "launch": ompi + ["--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo"]},
        {"key": "mpich", "label": "MPICH", "family": "mpich", "env": {},
         "launch": ["mpiexec.mpich", "-bind-to", "none"]},
    ]


def compilers(prefix):
    return {
        "steadfast": str(prefix / "bin" / "mpicc"),
        "openmpi": "mpicc.openmpi",
        "mpich": "mpicc.mpich",
    }


def ensure_packages(no_install):
    """Installs the Debian MPI packages when a wrapper is missing."""
    needed = ["mpicc.openmpi", "mpiexec.openmpi", "mpicc.mpich", "mpiexec.mpich"]
    missing = [c for c in needed if shutil.which(c) is None]
    if not missing:
        return
    if no_install:
        log(f"missing {', '.join(missing)}; --no-install given, those columns will be empty")
        return
    cmd = ["apt-get", "install", "-y", "--no-install-recommends"] + PACKAGES
    if os.geteuid() != 0:
        if shutil.which("sudo") is None:
            log(f"missing {', '.join(missing)} and not root: install {' '.join(PACKAGES)}")
            return
        cmd = ["sudo"] + cmd
    log("installing " + " ".join(PACKAGES))
    rc = subprocess.run(cmd, stdout=sys.stderr, stderr=sys.stderr).returncode
    if rc != 0:
        log(f"apt-get install failed with status {rc}; continuing with what is there")


def build(family, cc, out_dir):
    """Compiles pingpong and coll with one MPI's wrapper; returns (ok, reason)."""
    if family == "steadfast" and not Path(cc).exists():
        return False, f"{cc} not found"
    if family != "steadfast" and shutil.which(cc) is None:
        return False, f"{cc} not found"
    out_dir.mkdir(parents=True, exist_ok=True)
    for prog in ("pingpong", "coll"):
        cmd = [cc, "-O2", "-Wall", "-o", str(out_dir / prog), str(BENCH / f"{prog}.c")]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            (out_dir / f"{prog}.build.log").write_text(r.stdout + r.stderr)
            first = (r.stderr.strip().splitlines() or ["?"])[0]
            return False, f"{prog}.c does not build: {first}"
    return True, ""


def run(cfg, np, argv, timeout, log_path):
    """Runs one job; returns (stdout or None, reason)."""
    env = dict(os.environ)
    env.update(cfg["env"])
    cmd = cfg["launch"] + ["-n", str(np)] + argv
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        log_path.write_text(" ".join(cmd) + "\n" + out)
        return None, f"timed out after {timeout} s"
    except OSError as e:
        return None, str(e)
    dt = time.monotonic() - t0
    log_path.write_text(f"$ {' '.join(cmd)}\n# {dt:.1f} s, exit {r.returncode}\n{r.stdout}\n"
                        f"--- stderr\n{r.stderr}")
    if r.returncode != 0:
        tail = " | ".join(r.stderr.strip().splitlines()[-3:])
        return None, f"exit status {r.returncode}: {tail}"
    return r.stdout, ""


def parse_pingpong(text):
    rows = {}
    for line in text.splitlines():
        m = re.fullmatch(r"\s*(\d+)\s+([0-9.]+)\s+([0-9.]+)\s*", line)
        if m:
            rows[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
    return rows


def parse_coll(text):
    res = {}
    for line in text.splitlines():
        m = re.fullmatch(r"\s*(\w+)\s+(\d+)\s+([0-9.]+)\s*", line)
        if m:
            res[m.group(1)] = float(m.group(3))
    return res


def size_label(n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return f"{n >> 10} KiB"
    return f"{n} B"


def fmt(x, digits=2):
    if x is None:
        return "-"
    if x >= 1000:
        return f"{x:.0f}"
    if x >= 100:
        return f"{x:.1f}"
    return f"{x:.{digits}f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prefix", default=os.environ.get("PREFIX", str(ROOT / "install")),
                    help="Steadfast install prefix (default: $PREFIX or ./install)")
    ap.add_argument("--max-size", type=int, default=8 << 20, help="largest message (bytes)")
    ap.add_argument("--batches", type=int, default=7, help="timed batches per size")
    ap.add_argument("--batch-ms", type=float, default=20, help="target length of one batch")
    ap.add_argument("--stat", choices=["median", "min"], default="median",
                    help="ping-pong statistic over batches; min is steadier on a busy machine")
    ap.add_argument("--only", default="", help="comma-separated config keys to run "
                    "(sf-shm,sf-tcp,ompi-vader,ompi-tcp,mpich)")
    ap.add_argument("--no-coll", action="store_true", help="skip the collective table")
    ap.add_argument("--coll-ranks", type=int, default=4)
    ap.add_argument("--no-pin", action="store_true", help="do not pin the ping-pong ranks")
    ap.add_argument("--no-install", action="store_true", help="never call apt-get")
    ap.add_argument("--rounds", type=int, default=7,
                    help="run every configuration this many times, alternating, and report "
                         "the median over rounds (the host's noise then hits all alike)")
    ap.add_argument("--timeout", type=int, default=240, help="seconds per job")
    ap.add_argument("--results", default=str(BENCH / "results"), help="where raw output goes")
    args = ap.parse_args()

    prefix = Path(args.prefix).resolve()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out_dir = Path(args.results) / stamp
    out_dir.mkdir(parents=True, exist_ok=True)
    ensure_packages(args.no_install)

    cfgs = configs(prefix)
    if args.only:
        keep = set(args.only.split(","))
        unknown = keep - {c["key"] for c in cfgs}
        if unknown:
            ap.error(f"unknown config(s): {', '.join(sorted(unknown))}")
        cfgs = [c for c in cfgs if c["key"] in keep]

    have_sf = (prefix / "bin" / "mpiexec").exists()
    built = {}
    for fam, cc in compilers(prefix).items():
        if fam == "steadfast" and not have_sf:
            built[fam] = (False, f"{prefix}/bin/mpiexec does not exist yet")
            continue
        built[fam] = build(fam, cc, out_dir / "build" / fam)
        if not built[fam][0]:
            log(f"{fam}: skipped ({built[fam][1]})")

    load0 = os.getloadavg()[0]
    pp, coll, notes = {}, {}, []
    pp_args = ["-m", str(args.max_size), "-b", str(args.batches), "-t", str(args.batch_ms),
               "-s", args.stat]
    if not args.no_pin:
        pp_args.append("-p")
    pp_runs, coll_runs = {}, {}
    for rnd in range(max(1, args.rounds)):
        for cfg in cfgs:
            ok, why = built[cfg["family"]]
            if not ok:
                if rnd == 0:
                    notes.append(f"{cfg['label']}: not run ({why})")
                continue
            binary = out_dir / "build" / cfg["family"]
            log(f"{cfg['label']}: pingpong (round {rnd + 1}) ...")
            t0 = time.monotonic()
            log_file = out_dir / f"pingpong.{cfg['key']}.{rnd}.log"
            out, why = run(cfg, 2, [str(binary / "pingpong")] + pp_args, args.timeout, log_file)
            if out is None and cfg["family"] == "openmpi" and rnd == 0:
                # Cross-memory attach is refused in some containers; retry without it.
                log(f"{cfg['label']}: {why}; retrying with single-copy mechanism off")
                cfg["env"]["OMPI_MCA_btl_vader_single_copy_mechanism"] = "none"
                out, why = run(cfg, 2, [str(binary / "pingpong")] + pp_args, args.timeout, log_file)
                if out is not None:
                    notes.append(f"{cfg['label']}: ran with OMPI_MCA_btl_vader_single_copy_mechanism=none")
            if out is None:
                notes.append(f"{cfg['label']}: pingpong failed in round {rnd + 1} ({why})")
            else:
                pp_runs.setdefault(cfg["key"], []).append(parse_pingpong(out))
                log(f"{cfg['label']}: pingpong done in {time.monotonic() - t0:.0f} s")
            if args.no_coll:
                continue
            log(f"{cfg['label']}: coll on {args.coll_ranks} ranks ...")
            out, why = run(cfg, args.coll_ranks, [str(binary / "coll")], args.timeout,
                           out_dir / f"coll.{cfg['key']}.{rnd}.log")
            if out is None:
                notes.append(f"{cfg['label']}: coll failed in round {rnd + 1} ({why})")
            else:
                coll_runs.setdefault(cfg["key"], []).append(parse_coll(out))
    # Median over rounds, per size (latency; bandwidth follows from it) and per collective.
    for key, runs in pp_runs.items():
        merged = {}
        for n in set().union(*runs):
            lats = [r[n][0] for r in runs if n in r]
            lat = statistics.median(lats)
            merged[n] = (lat, n / lat if lat > 0 else 0.0)
        pp[key] = merged
    for key, runs in coll_runs.items():
        coll[key] = {op: statistics.median([r[op] for r in runs if op in r])
                     for op in set().union(*runs)}
    load1 = os.getloadavg()[0]

    # Ping-pong table.
    sizes = [0] + [1 << k for k in range(0, 64) if (1 << k) <= args.max_size]
    labels = {c["key"]: c["label"] for c in configs(prefix)}
    shown = [c["key"] for c in cfgs]

    def get(key, n):
        return pp.get(key, {}).get(n)

    lines = []
    head = ["size"] + [f"{labels[k]} µs / MB/s" for k in shown]
    pairs = [("shm", "sf-shm", "ompi-vader"), ("tcp", "sf-tcp", "ompi-tcp")]
    pairs = [p for p in pairs if p[1] in shown and p[2] in shown]
    for name, a, b in pairs:
        head += [f"{name} lat ratio", f"{name} bw ratio"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join(["---:"] * len(head)) + "|")
    for n in sizes:
        row = [size_label(n)]
        for k in shown:
            v = get(k, n)
            row.append("-" if v is None else f"{fmt(v[0])} / {fmt(v[1], 1) if n else '-'}")
        for name, a, b in pairs:
            va, vb = get(a, n), get(b, n)
            row.append(fmt(ratio(va and va[0], vb and vb[0])))
            row.append(fmt(ratio(va and va[1], vb and vb[1])) if n else "-")
        lines.append("| " + " | ".join(row) + " |")

    report = [f"## Ping-pong (2 ranks, {args.stat} of {args.batches} batches, median of "
              f"{max(1, args.rounds)} alternating rounds): half round-trip "
              "latency µs / bandwidth MB/s", ""]
    report += lines
    report += ["", "Ratios are Steadfast / Open MPI: latency ratio < 1 and bandwidth ratio > 1 "
               "favour Steadfast.", "", "## Targets", ""]
    for desc, kind, n, path, bound in TARGETS:
        a = get(f"sf-{path}", n)
        b = get("ompi-vader" if path == "shm" else "ompi-tcp", n)
        idx = 0 if kind == "lat" else 1
        r = ratio(a and a[idx], b and b[idx])
        if r is None:
            verdict = "n/a"
        elif (kind == "lat" and r <= bound) or (kind == "bw" and r >= bound):
            verdict = "PASS"
        else:
            verdict = "MISS"
        report.append(f"- {verdict}: {desc} (measured {fmt(r, 3)})")

    if not args.no_coll:
        report += ["", f"## Collectives ({args.coll_ranks} ranks): µs per call, "
                   f"median batch, slowest rank, median of {max(1, args.rounds)} rounds", "",
                   "| MPI | Allreduce 8 B | Bcast 8 B |", "|---|---:|---:|"]
        for k in shown:
            if k in coll:
                report.append(f"| {labels[k]} | {fmt(coll[k].get('allreduce'))} | "
                              f"{fmt(coll[k].get('bcast'))} |")
    ncpu = os.cpu_count() or 1
    report += ["", f"Machine: {ncpu} CPUs, load average {load0:.1f} before and {load1:.1f} "
               f"after the runs; raw output in {out_dir}."]
    if max(load0, load1) > 0.5 * ncpu:
        report.append(f"Warning: the machine was busy (load > {0.5 * ncpu:.0f}); numbers are noisy"
                      + ("; --stat min is steadier." if args.stat == "median" else "."))
    if args.coll_ranks > ncpu and not args.no_coll:
        report.append(f"Note: {args.coll_ranks} collective ranks on {ncpu} CPUs are "
                      "oversubscribed; busy-polling MPIs suffer most.")
    for n in notes:
        report.append(f"- {n}")
    text = "\n".join(report) + "\n"
    (out_dir / "report.md").write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
