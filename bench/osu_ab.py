#!/usr/bin/env python3
"""Alternating launches of one OSU-style test at a few sizes, for comparing library builds or
settings where a whole suite (bench/osu.py) would take too long.

    python3 bench/osu_ab.py -n 4 --rounds 8 --osu "-b gather -M 65536 -m 1048576 -f 4" \\
        before=LD_LIBRARY_PATH=/tmp/lib-before after= ompi=openmpi

Each NAME=SETTINGS is one configuration: SETTINGS is `openmpi`, `mpich`, or Steadfast's shm
path with environment variables `VAR=VALUE;VAR=VALUE` (empty for the defaults;
`LD_LIBRARY_PATH=DIR` runs the `libmpi_abi.so.1` in DIR instead of the installed one). Every
round launches each configuration once, in a new random order (seeded), a short pause
between launches: on this kind of shared machine a launch can land in a fast or a slow state
that lasts the whole launch, so only many short launches in mixed order average it out. The
table gives, per test and size, the median over the rounds of each launch's fastest batch
(time in µs; for bw, bibw and mr the throughput osu prints, where above 1 is faster) and each
configuration's ratio to the first. Add the same configuration twice (with an unused
variable) to see the noise.
"""
import argparse
import collections
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OMPI = ["mpiexec.openmpi", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
        "--mca", "pml", "ob1", "--mca", "btl", "self,vader"]
MPICH = ["mpiexec.mpich", "-bind-to", "none"]


def build(cc, out):
    r = subprocess.run([cc, "-O2", "-Wno-stringop-overflow", "-o", str(out), str(ROOT / "bench/osu/osu.c")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{cc} could not build bench/osu/osu.c:\n{r.stderr}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=2, help="ranks")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--osu", required=True, help="osu arguments, e.g. \"-b latency -M 0 -m 1024 -f 4 -p\"")
    ap.add_argument("--ms", type=int, default=40, help="target ms per size (osu -t)")
    ap.add_argument("--batches", type=int, default=3, help="timed batches per size, fastest kept (osu -k)")
    ap.add_argument("--prefix", default=str(ROOT / "install"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("configs", nargs="+", metavar="NAME=SETTINGS")
    a = ap.parse_args()
    prefix = Path(a.prefix)
    tmp = Path(tempfile.mkdtemp(prefix="osu_ab."))
    cfgs = []
    for c in a.configs:
        name, _, setting = c.partition("=")
        cfgs.append((name, setting))
    binaries = {}
    for _, setting in cfgs:
        fam = setting if setting in ("openmpi", "mpich") else "steadfast"
        if fam not in binaries:
            cc = {"openmpi": "mpicc.openmpi", "mpich": "mpicc.mpich"}.get(fam, str(prefix / "bin/mpicc"))
            binaries[fam] = tmp / f"osu.{fam}"
            build(cc, binaries[fam])
    args = a.osu.split() + ["-t", str(a.ms), "-k", str(a.batches)]
    rng = random.Random(a.seed)
    res = collections.defaultdict(list)
    for rnd in range(a.rounds):
        order = cfgs[:]
        rng.shuffle(order)
        for name, setting in order:
            time.sleep(0.3)
            env = dict(os.environ)
            if setting == "openmpi":
                cmd = OMPI + ["-n", str(a.n), str(binaries["openmpi"])]
            elif setting == "mpich":
                cmd = MPICH + ["-n", str(a.n), str(binaries["mpich"])]
            else:
                env["STEADFAST_PATH"] = "shm"
                for kv in filter(None, setting.split(";")):
                    k, _, v = kv.partition("=")
                    env[k] = v
                cmd = [str(prefix / "bin/mpiexec"), "-n", str(a.n), str(binaries["steadfast"])]
            r = subprocess.run(cmd + args, env=env, capture_output=True, text=True, timeout=900)
            if r.returncode != 0:
                print(f"round {rnd + 1}: {name} failed (exit {r.returncode}): {r.stderr.strip()[-300:]}",
                      file=sys.stderr)
            for line in r.stdout.splitlines():
                f = line.split()
                if line.startswith("#") or len(f) < 3:
                    continue
                # The first value is what bench/osu.py reports too: osu has already kept
                # the fastest batch; collectives add the fastest and slowest rank's time
                # after the average over the ranks.
                try:
                    value = float(f[2])
                    size = int(f[1])
                except ValueError:
                    continue
                res[(name, f[0], size)].append(value)
        print(f"round {rnd + 1}/{a.rounds} done", file=sys.stderr)
    keys = sorted({(t, s) for (_, t, s) in res})
    names = [c[0] for c in cfgs]
    print(f"{a.n} ranks, {a.rounds} rounds: median of each launch's fastest batch; ratios to {names[0]}")
    print("| test | size | " + " | ".join(names) + " | " + " | ".join(f"{n}/{names[0]}" for n in names[1:]) + " |")
    print("|---|---:|" + "---:|" * (2 * len(names) - 1))
    for t, s in keys:
        med = [statistics.median(res[(n, t, s)]) if res[(n, t, s)] else float("nan") for n in names]
        print(f"| {t} | {s} | " + " | ".join(f"{m:.4g}" for m in med) + " | "
              + " | ".join(f"{m / med[0]:.2f}" for m in med[1:]) + " |")


if __name__ == "__main__":
    main()
