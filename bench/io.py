#!/usr/bin/env python3
"""MPI-IO bandwidth comparison of Steadfast with Open MPI (ompio and ROMIO) and MPICH.

One invocation builds bench/io.c with each MPI's compiler wrapper and runs it on 4 ranks
(IOR-style: contiguous and strided, independent and collective) under

  Steadfast shm      STEADFAST_PATH=shm PREFIX/bin/mpiexec -n 4
  Open MPI ompio     mpiexec.openmpi --mca pml ob1 --mca btl self,vader --mca io ompio -n 4
  Open MPI ROMIO     the same with --mca io romio321 (the name ompi_info reports)
  MPICH (ROMIO)      mpiexec.mpich -n 4

for --rounds alternating rounds (the order rotates every round), and prints on stdout a
markdown table of median MiB/s per mode with Steadfast / best-other ratios and the target
(collective strided write and read >= 1.0x the best other MPI) as PASS/MISS.

Every mode's write and read run in separate processes (io.c's write / read phases). As root
the page cache is dropped (sync; echo 3 > /proc/sys/vm/drop_caches) before each write and
between write and read, so that reads come from the file system rather than memory; when
that is not possible the report says that the reads are cached. Progress goes to stderr;
raw outputs, per-round values (rounds.csv) and the report are kept under
bench/results/io-<timestamp>/. Standard library only.
"""

import argparse
import csv
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pingpong as pp  # noqa: E402  (configs, ensure_packages, run, log)

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
SRC = BENCH / "io.c"
MODES = ["contig-ind", "contig-coll", "strided-ind", "strided-coll"]
MODE_LABELS = {"contig-ind": "contiguous, independent", "contig-coll": "contiguous, collective",
               "strided-ind": "strided, independent", "strided-coll": "strided, collective"}
# The target: Steadfast / best other MPI, per (mode, direction).
TARGETS = [("strided-coll", "write", 1.0), ("strided-coll", "read", 1.0)]
DROP = Path("/proc/sys/vm/drop_caches")
log = pp.log


def romio_component():
    """Open MPI's ROMIO io component is named after the ROMIO version (romio321 in 4.1)."""
    try:
        out = subprocess.run(["ompi_info"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"MCA io:\s+(romio\d*)", out)
    return m.group(1) if m else None


def configs(prefix):
    """The MPI set-ups, in table order: pingpong.py's shm launch lines, Open MPI twice."""
    base = {c["key"]: c for c in pp.configs(prefix)}
    romio = romio_component() or "romio321"
    ompi = base["ompi-vader"]
    return [
        dict(base["sf-shm"]),
        {"key": "ompi-ompio", "label": "Open MPI ompio", "family": "openmpi", "env": {},
         "launch": ompi["launch"] + ["--mca", "io", "ompio"]},
        {"key": "ompi-romio", "label": f"Open MPI ROMIO ({romio})", "family": "openmpi",
         "env": {}, "launch": ompi["launch"] + ["--mca", "io", romio]},
        dict(base["mpich"], label="MPICH (ROMIO)"),
    ]


def build(family, cc, out):
    if (family == "steadfast" and not Path(cc).exists()) or \
            (family != "steadfast" and shutil.which(cc) is None):
        return False, f"{cc} not found"
    out.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([cc, "-O2", "-Wall", "-o", str(out), str(SRC)], capture_output=True,
                       text=True)
    if r.returncode != 0:
        (out.parent / "build.log").write_text(r.stdout + r.stderr)
        return False, "io.c does not build: " + (r.stderr.strip().splitlines() or ["?"])[0]
    return True, ""


def can_drop():
    return os.geteuid() == 0 and DROP.exists() and os.access(DROP, os.W_OK)


def drop_caches():
    """Writes dirty pages back, then empties the page cache, dentries and inodes."""
    os.sync()
    DROP.write_text("3\n")


def parse(text):
    """{(mode, "write"|"read"): MiB/s} from io.c's output lines."""
    res = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        f = line.split()
        if f and f[0] in MODES:
            for m in re.finditer(r"(write|read)\s+([0-9.]+) MiB/s", line):
                res[(f[0], m.group(1))] = float(m.group(2))
    return res


def fmt(x):
    if x is None:
        return "-"
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prefix", default=os.environ.get("PREFIX", str(ROOT / "install")),
                    help="Steadfast install prefix (default: $PREFIX or ./install)")
    ap.add_argument("--size-mib", type=int,
                    help="file size in MiB, over all ranks (default 256; 1024 for 1 GiB)")
    ap.add_argument("--np", type=int, default=4, help="ranks (default 4)")
    ap.add_argument("--piece", type=int, default=4096, help="strided piece in bytes")
    ap.add_argument("--rounds", type=int,
                    help="alternating rounds (default 5); the table shows medians over them")
    ap.add_argument("--quick", action="store_true",
                    help="smoke check: 1 round on a 16 MiB file (unless given otherwise)")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated io.c modes")
    ap.add_argument("--only", default="", help="comma-separated config keys "
                    "(sf-shm,ompi-ompio,ompi-romio,mpich)")
    ap.add_argument("--dir", default="/tmp", help="where the files go (a local file system)")
    ap.add_argument("--no-drop", action="store_true",
                    help="never drop the page cache (reads then come from memory)")
    ap.add_argument("--no-install", action="store_true", help="never call apt-get")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per job")
    ap.add_argument("--results", default=str(BENCH / "results"), help="where raw output goes")
    args = ap.parse_args()
    if args.rounds is None:
        args.rounds = 1 if args.quick else 5
    if args.size_mib is None:
        args.size_mib = 16 if args.quick else 256
    modes = [m for m in args.modes.split(",") if m]
    if set(modes) - set(MODES):
        ap.error(f"unknown mode(s): {', '.join(sorted(set(modes) - set(MODES)))}")
    if args.size_mib % args.np:
        ap.error(f"--size-mib {args.size_mib} is not a multiple of --np {args.np}")
    block_mib = args.size_mib // args.np

    prefix = Path(args.prefix).resolve()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out_dir = Path(args.results) / f"io-{stamp}"
    out_dir.mkdir(parents=True, exist_ok=True)
    pp.ensure_packages(args.no_install)

    cfgs = configs(prefix)
    if args.only:
        keep = set(args.only.split(","))
        unknown = keep - {c["key"] for c in cfgs}
        if unknown:
            ap.error(f"unknown config(s): {', '.join(sorted(unknown))}")
        cfgs = [c for c in cfgs if c["key"] in keep]
    compilers = {"steadfast": str(prefix / "bin" / "mpicc"), "openmpi": "mpicc.openmpi",
                 "mpich": "mpicc.mpich"}
    built = {}
    for fam in {c["family"] for c in cfgs}:
        if fam == "steadfast" and not (prefix / "bin" / "mpiexec").exists():
            built[fam] = (False, f"{prefix}/bin/mpiexec does not exist yet")
        else:
            built[fam] = build(fam, compilers[fam], out_dir / "build" / fam / "io")
        if not built[fam][0]:
            log(f"{fam}: skipped ({built[fam][1]})")

    drop = can_drop() and not args.no_drop
    if not drop:
        log("the page cache is not dropped (" + ("--no-drop" if args.no_drop else "needs root and a writable " + str(DROP))
            + "): the reads come from memory")
    work = Path(args.dir) / f"steadfast-io.{os.getpid()}"
    work.mkdir(parents=True)
    load0 = os.getloadavg()
    t_start = time.monotonic()
    vals, notes = {}, []
    # Written as the samples come, so that an interrupted run keeps what it measured.
    csv_file = open(out_dir / "rounds.csv", "w", newline="")
    csv_out = csv.writer(csv_file)
    csv_out.writerow(["round", "config", "mode", "phase", "mib_per_s"])
    try:
        for rnd in range(max(1, args.rounds)):
            k = rnd % len(cfgs)
            for cfg in cfgs[k:] + cfgs[:k]:
                ok, why = built[cfg["family"]]
                if not ok:
                    if rnd == 0:
                        notes.append(f"{cfg['label']}: not run ({why})")
                    continue
                binary = str(out_dir / "build" / cfg["family"] / "io")
                # Each configuration has its own directory, so that a failed run's file
                # never stands in for another's.
                d = work / cfg["key"]
                d.mkdir(exist_ok=True)
                for mode in modes:
                    got = {}
                    for phase in ("write", "read"):
                        if drop:
                            drop_caches()
                        log(f"round {rnd + 1}: {cfg['label']}: {mode} {phase} ...")
                        try:
                            out, why = pp.run(cfg, args.np, [binary, str(d), str(block_mib),
                                                              str(args.piece), phase, mode],
                                              args.timeout,
                                              out_dir / f"{cfg['key']}.{mode}.{phase}.{rnd}.log")
                        except OSError as e:
                            # A full disk (shared with other jobs) costs this sample, not
                            # the whole run.
                            out, why = None, str(e)
                        if out is None:
                            notes.append(f"{cfg['label']}: {mode} {phase} failed in round "
                                         f"{rnd + 1} ({why})")
                            break
                        got.update(parse(out))
                    for f in d.iterdir():
                        f.unlink()
                    for (m, ph), v in got.items():
                        vals.setdefault((cfg["key"], m, ph), []).append(v)
                        csv_out.writerow([rnd + 1, cfg["key"], m, ph, v])
                    csv_file.flush()
                    log(f"round {rnd + 1}: {cfg['label']}: {mode} "
                        + "  ".join(f"{ph} {got[(mode, ph)]:.0f}" for ph in ("write", "read")
                                    if (mode, ph) in got) + " MiB/s")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        csv_file.close()
    load1 = os.getloadavg()
    minutes = (time.monotonic() - t_start) / 60

    med = {key: statistics.median(v) for key, v in vals.items()}
    shown = [c for c in cfgs if any(k[0] == c["key"] for k in med)]
    others = [c for c in shown if c["family"] != "steadfast"]
    have_sf = any(c["key"] == "sf-shm" for c in shown)

    def best_other(mode, ph):
        cand = [(med[(c["key"], mode, ph)], c["label"]) for c in others
                if (c["key"], mode, ph) in med]
        return max(cand) if cand else (None, None)

    def sf_ratio(mode, ph):
        b, _ = best_other(mode, ph)
        a = med.get(("sf-shm", mode, ph))
        return None if a is None or not b else a / b

    nrounds = max(1, args.rounds)
    head = ["mode", "op"] + [c["label"] for c in shown]
    if have_sf and others:
        head += ["best other", "Steadfast / best"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    for mode in modes:
        for ph in ("write", "read"):
            row = [MODE_LABELS[mode], ph] + [fmt(med.get((c["key"], mode, ph))) for c in shown]
            if have_sf and others:
                b, who = best_other(mode, ph)
                r = sf_ratio(mode, ph)
                row += [who or "-", "-" if r is None else f"{r:.2f}"]
            lines.append("| " + " | ".join(row) + " |")

    report = [f"## MPI-IO bandwidth ({args.np} ranks, {args.size_mib} MiB file in {args.dir}, "
              f"{block_mib} MiB per rank in 1 MiB calls, strided piece {args.piece} B): "
              f"MiB/s, median of {nrounds} alternating round{'s' if nrounds > 1 else ''}", ""]
    report += lines
    if nrounds > 1:
        # The host's noise is large: show how far the rounds spread around the medians.
        report += ["", "Spread over the rounds (min – max MiB/s):", "",
                   "| mode | op | " + " | ".join(c["label"] for c in shown) + " |",
                   "|---|---|" + "---:|" * len(shown)]
        for mode in modes:
            for ph in ("write", "read"):
                cells = []
                for c in shown:
                    v = vals.get((c["key"], mode, ph))
                    cells.append(f"{fmt(min(v))} – {fmt(max(v))}" if v else "-")
                report.append(f"| {MODE_LABELS[mode]} | {ph} | " + " | ".join(cells) + " |")
    report += ["", "Writes are timed up to MPI_File_sync. "
               + ("The page cache was dropped before every write and between write and read, "
                  "so the reads come from the disk."
                  if drop else "The page cache was NOT dropped: the reads come from memory "
                  "and say little about the file system."), "", "## Target", ""]
    if not any(mode in modes for mode, _, _ in TARGETS):
        report.append("- n/a: the collective strided mode was not run")
    for mode, ph, bound in TARGETS:
        if mode not in modes:
            continue
        r = sf_ratio(mode, ph)
        verdict = "n/a" if r is None else ("PASS" if r >= bound else "MISS")
        b, who = best_other(mode, ph)
        report.append(f"- {verdict}: {MODE_LABELS[mode]} {ph}, Steadfast / best other "
                      f"({who or '-'}) >= {bound} (measured {'-' if r is None else f'{r:.2f}'})")
    ncpu = os.cpu_count() or 1
    report += ["", f"Machine: {ncpu} CPUs, load average (1/5/15 min) "
               f"{load0[0]:.2f}/{load0[1]:.2f}/{load0[2]:.2f} before and "
               f"{load1[0]:.2f}/{load1[1]:.2f}/{load1[2]:.2f} after {minutes:.0f} minutes of "
               f"runs; raw output in {out_dir}."]
    if args.np > ncpu:
        report.append(f"Note: {args.np} ranks on {ncpu} CPUs are oversubscribed; MPIs that "
                      "busy-poll while waiting in a collective lose most.")
    if max(load0[0], load1[0]) > 0.5 * ncpu:
        report.append(f"Warning: the machine was busy (load > {0.5 * ncpu:.0f}); numbers are noisy.")
    for n in notes:
        report.append(f"- {n}")
    text = "\n".join(report) + "\n"
    (out_dir / "report.md").write_text(text)
    sys.stdout.write(text)
    return 1 if notes and not med else 0


if __name__ == "__main__":
    sys.exit(main())
