#!/usr/bin/env bash
# Measures the membership service on this machine: stabilization time Ts after a single
# failure vs the number of ranks, for fan-out 2 and 4, over shm and tcp; detection latency;
# the per-hop latency L and the per-level processing cost Ocp; the paper's model
# Ts = 2·L·(H−1) + Ocp·H with the measured L and Ocp, and with a least-squares fit; the
# latency-model simulator with the same costs; a plot.
#
# Each run is one job of N ranks (tests/c/ft/view_kill.c) that kills the root's last child
# (rank min(2^k, N−1), the paper's example) with SIGKILL after a settle time, with
# STEADFAST_FT_TRACE on. During the measurement the survivors are blocked in
# MPIX_Steadfast_wait_view (a condition variable: no CPU) until their own process installs the
# new view; then each writes its view to a file and resumes MPI point-to-point traffic (a send
# to the lowest survivor, a ring), so the ranks that already have the view compete for the
# CPUs with the control threads still stabilizing, as an application that reacts at once
# would. Traces and view files go to a tmpfs directory (/dev/shm when writable), so file
# creation by the survivors costs what it costs on tmpfs, not on the disk.
# Main series: the default configuration (no STEADFAST_FT_* tuning in the environment).
# Extra series at N = 4, 16, 64, shm, fan-out 4 (--extra): `rt`, real-time control threads
# (STEADFAST_FT_RT=1); `fair`, no deadline budget, the fair scheduler with the short slice
# (STEADFAST_FT_DL_RUNTIME_US=0); `slice0`, neither: the kernel's default time slice;
# `idle`, the default configuration with survivors that stay blocked after they saw the view
# (a small program built from this script: MPIX_Steadfast_wait_view, then a 0.2 s sleep and
# MPI_Finalize), which isolates the membership service from the application's own work.
# From the traces (crates/runtime/src/ft/trace.rs):
#   Ts      = the root's `stable` line: its install of the new view -> its last FAILURE_ACK
#   detect  = first suspicion / launcher notice of the victim at any survivor - kill time
#   L       = one-way latency of FAILED_NODE and FAILURE_ACK frames (sender clock -> receipt)
#   Ocp     = handling time of FAILED_NODE at a node (recalculation + forwarding + its ack)
#
# Usage: scripts/membership-ts.sh [--prefix DIR] [--out DIR] [--reps N] [--sizes "2 4 .."]
#                                 [--fanouts "1 2"] [--paths "shm tcp"] [--no-plot] [--quick]
#                                 [--extra "fair rt slice0 idle"] [--extra-sizes "4 16 64"]
#                                 [--analyze-only]   (redo tables and plot from OUT/ts-runs.csv)
# Output: OUT/ts-runs.csv (one line per job), OUT/ts-series.csv, OUT/ts-summary.md, OUT/ts.png
# (default OUT: docs/reproduction/membership)
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
prefix=$here/install
out=$here/docs/reproduction/membership
reps=5
sizes="2 3 4 5 6 8 16 21 22 32 64"
fanouts="1 2"
paths="shm tcp"
plot=yes
settle=0.3
analyze_only=no
extra="fair rt slice0 idle"
extra_sizes="4 16 64"
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --reps) reps=$2; shift 2 ;;
        --sizes) sizes=$2; shift 2 ;;
        --fanouts) fanouts=$2; shift 2 ;;
        --paths) paths=$2; shift 2 ;;
        --no-plot) plot=no; shift ;;
        --quick) reps=2; sizes="4 16 64"; shift ;;
        --analyze-only) analyze_only=yes; shift ;;
        --extra) extra=$2; shift 2 ;;
        --extra-sizes) extra_sizes=$2; shift 2 ;;
        -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
mkdir -p "$out"
if [ "$analyze_only" = no ]; then
if [ -w /dev/shm ]; then work=$(mktemp -d -p /dev/shm); else work=$(mktemp -d); fi
trap 'rm -rf "$work"' EXIT
"$prefix/bin/mpicc" -O2 -Wall -o "$work/view_kill" "$here/tests/c/ft/view_kill.c" || exit 1
# Same kill as view_kill (same arguments), but the survivors stay blocked after the view.
cat >"$work/idle_kill.c" <<'EOF'
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv)
{
    int rank, e;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int victim = atoi(argv[1]);
    double settle = atof(argv[4]);
    MPI_Barrier(MPI_COMM_WORLD);
    struct timespec ts = {(time_t)settle, (long)((settle - (double)(time_t)settle) * 1e9)};
    nanosleep(&ts, NULL);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == victim) {
        char path[4096];
        snprintf(path, sizeof path, "%s/killed.%d", argv[2], rank);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "%.9f\n", MPI_Wtime());
            fclose(f);
        }
        raise(SIGKILL);
    }
    MPIX_Steadfast_wait_view(1, atof(argv[3]), &e);
    struct timespec rest = {0, 200000000};
    nanosleep(&rest, NULL);
    MPI_Finalize();
    return 0;
}
EOF
"$prefix/bin/mpicc" -O2 -Wall -o "$work/idle_kill" "$work/idle_kill.c" || exit 1

runs=$work/runs
mkdir -p "$runs"
# series CFG PATH K SIZES REPS: CFG def (default configuration), fair, rt, slice0 or idle (above).
unset STEADFAST_FT_RT STEADFAST_FT_SLICE_US STEADFAST_FT_TRACE_SCHED STEADFAST_FT_DL_RUNTIME_US \
    STEADFAST_FT_DL_PERIOD_US STEADFAST_FANOUT_LOG2
series() {
    local cfg=$1 path=$2 k=$3 ns=$4 reps=$5
    local env=() prog=$work/view_kill
    case $cfg in
        rt) env=(STEADFAST_FT_RT=1) ;;
        fair) env=(STEADFAST_FT_DL_RUNTIME_US=0) ;;
        slice0) env=(STEADFAST_FT_DL_RUNTIME_US=0 STEADFAST_FT_SLICE_US=0) ;;
        idle) prog=$work/idle_kill ;;
    esac
    for n in $ns; do
        local victim=$(( (1 << k) < n - 1 ? (1 << k) : n - 1 ))
        for ((rep = 1; rep <= reps; rep++)); do
            local d="$runs/$cfg-$path-k$k-n$n-r$rep"
            mkdir -p "$d"
            echo "$(cut -d' ' -f1 /proc/loadavg)" >"$d/load"
            env "${env[@]}" STEADFAST_FANOUT_LOG2=$k STEADFAST_FT_TRACE=$d \
                timeout -k 5 120 "$prefix/bin/mpiexec" -n "$n" --path "$path" --on-failure continue \
                "$prog" "$victim" "$d" 20 "$settle" >"$d/stdout" 2>"$d/stderr"
            printf '.'
        done
    done
}
echo "measuring (each dot is one job; load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
for path in $paths; do
    for k in $fanouts; do
        series def "$path" "$k" "$sizes" "$reps"
    done
done
for cfg in $extra; do
    series "$cfg" shm 2 "$extra_sizes" "$reps"
done
echo

python3 - "$runs" "$out" <<'PY'
# Part 1: one line per job from its traces -> OUT/ts-runs.csv
import csv, glob, os, statistics, sys
runs_dir, out = sys.argv[1:3]
rows = []
for d in sorted(glob.glob(os.path.join(runs_dir, '*'))):
    cfg, path, k, n, rep = os.path.basename(d).split('-')
    row = dict(cfg=cfg, path=path, k=int(k[1:]), n=int(n[1:]), rep=int(rep[1:]),
               load=open(os.path.join(d, 'load')).read().strip(), ts_us='', detect_us='', via='',
               connection_us='', launcher_us='', all_installed_us='', L_us='', Ocp_us='', ok=0)
    rows.append(row)
    killed = glob.glob(os.path.join(d, 'killed.*'))
    traces = {int(f.split('.')[-2]): [l.split() for l in open(f) if l.strip()]
              for f in glob.glob(os.path.join(d, 'ft.*.trace'))}
    if not killed or not traces:
        continue
    victim = int(killed[0].split('.')[-1])
    t_kill = float(open(killed[0]).read()) * 1e9
    root = min(traces)
    stable = [l for l in traces[root] if l[0] == 'stable' and int(l[2]) >= 1]
    inst = [l for l in traces[root] if l[0] == 'install' and int(l[2]) >= 1]
    if stable and inst:
        t0, t1 = int(inst[0][1]), int(stable[0][1])
        row['ts_us'] = int(stable[0][3]) / 1e3
        lat = [int(l[4]) / 1e3 for tr in traces.values() for l in tr
               if l[0] == 'rx' and l[3] in ('FAILED_NODE', 'FAILURE_ACK') and t0 <= int(l[1]) <= t1]
        ocp = [int(l[4]) / 1e3 for tr in traces.values() for l in tr
               if l[0] == 'handled' and l[3] == 'FAILED_NODE' and t0 <= int(l[1]) <= t1]
        row['L_us'] = statistics.median(lat) if lat else ''
        row['Ocp_us'] = statistics.median(ocp) if ocp else ''
        row['ok'] = 1
    firsts = [(int(l[1]), 'launcher' if l[0] == 'notice' else l[3]) for tr in traces.values() for l in tr
              if l[0] in ('notice', 'suspect') and int(l[2]) == victim]
    if firsts:
        t, row['via'] = min(firsts)
        row['detect_us'] = (t - t_kill) / 1e3
        for src in ('connection', 'launcher'):
            ts_src = [t for t, v in firsts if v == src]
            if ts_src:
                row[src + '_us'] = (min(ts_src) - t_kill) / 1e3
    installs = [min(int(l[1]) for l in tr if l[0] == 'install' and int(l[2]) >= 1)
                for r, tr in traces.items() if any(l[0] == 'install' and int(l[2]) >= 1 for l in tr)]
    if len(installs) == len(traces):
        row['all_installed_us'] = (max(installs) - t_kill) / 1e3
with open(os.path.join(out, 'ts-runs.csv'), 'w', newline='') as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    for r in rows:
        w.writerow({k: (f'{v:.1f}' if isinstance(v, float) else v) for k, v in r.items()})
PY
rm -rf "$work"
fi

python3 - "$out" "$here" <<'PY'
# Part 2: tables from OUT/ts-runs.csv -> OUT/ts-summary.md, OUT/ts-series.csv
import csv, os, statistics, subprocess, sys
out, repo = sys.argv[1:3]
rows = list(csv.DictReader(open(os.path.join(out, 'ts-runs.csv'))))
for r in rows:
    for key in ('k', 'n', 'rep', 'ok'):
        r[key] = int(r[key])

def height(n, k):
    d, i = 0, n - 1
    while i > 0:
        i = (i - 1) >> k
        d += 1
    return d + 1

def med(xs):
    return statistics.median(xs) if xs else float('nan')

def vals(rs, key):
    return [float(r[key]) for r in rs if r.get(key, '') != '']

def group(key):
    g = {}
    for r in rows:
        if (r['cfg'], r['path'], r['k']) == key:
            g.setdefault(r['n'], []).append(r)
    return g

def model(n, k, L, O):
    h = height(n, k)
    return 2 * L * (h - 1) + O * h

def fit(points):
    """Least squares Ts = L·2(H−1) + Ocp·H (N ≥ 3), costs kept non-negative."""
    a = [(2 * (height(n, k) - 1), height(n, k), ts) for n, k, ts in points if n >= 3]
    s11 = sum(x * x for x, _, _ in a); s12 = sum(x * y for x, y, _ in a); s22 = sum(y * y for _, y, _ in a)
    b1 = sum(x * t for x, _, t in a); b2 = sum(y * t for _, y, t in a)
    det = s11 * s22 - s12 * s12
    if not a or abs(det) < 1e-9:
        return float('nan'), float('nan')
    l, o = (b1 * s22 - b2 * s12) / det, (s11 * b2 - s12 * b1) / det
    if l < 0:
        return 0.0, b2 / s22
    if o < 0:
        return b1 / s11, 0.0
    return l, o

def sim(L, O):
    """The latency-model simulator (crates/protocols/membership, example ts_table)."""
    try:
        txt = subprocess.run(['cargo', 'run', '-q', '--release', '-p', 'steadfast-membership', '--example',
                              'ts_table', f'{L:.2f}', f'{O:.2f}'], cwd=repo, capture_output=True, text=True,
                             timeout=900).stdout
    except Exception:
        return {}
    table = {}
    for line in txt.splitlines():
        c = [x.strip() for x in line.strip('|').split('|')]
        if len(c) == 9 and c[0].isdigit():
            table[int(c[0])] = {1: (c[3], c[4]), 2: (c[7], c[8])}
    return table

f0 = lambda x: f'{x:.0f}' if x == x else '–'
CFG_ORDER = {'def': 0, 'idle': 1, 'fair': 2, 'slice0': 3, 'rt': 4}
CFG_NAME = {'def': 'default configuration',
            'idle': 'default configuration, survivors stay blocked after the view',
            'fair': 'fair scheduler with the short slice, no deadline budget (STEADFAST_FT_DL_RUNTIME_US=0)',
            'slice0': "fair scheduler with the kernel's default slice (STEADFAST_FT_DL_RUNTIME_US=0 STEADFAST_FT_SLICE_US=0)",
            'rt': 'real-time control threads (STEADFAST_FT_RT=1)'}
keys = sorted({(r['cfg'], r['path'], r['k']) for r in rows}, key=lambda s: (CFG_ORDER.get(s[0], 9), s[1], s[2]))
lines = []
emit = lines.append
loads = [float(r['load']) for r in rows]
emit(f'{len(rows)} jobs, {sum(r["ok"] for r in rows)} with a complete trace; 1-minute load average '
     f'{min(loads):.1f}–{max(loads):.1f} during the runs (2 cores). Times in µs.\n')
series_rows = []
for key in keys:
    cfg, path, k = key
    g = group(key)
    L = med([x for rs in g.values() for x in vals(rs, 'L_us')])
    O = med([x for rs in g.values() for x in vals(rs, 'Ocp_us')])
    fl, fo = fit([(n, k, med(vals(rs, 'ts_us'))) for n, rs in g.items() if vals(rs, 'ts_us')])
    st = sim(L, O) if L == L and O == O else {}
    ld = [float(r['load']) for rs in g.values() for r in rs]
    emit(f'#### {path}, fan-out {1 << k} (k = {k}), {CFG_NAME.get(cfg, cfg)}\n')
    emit(f'1-minute load average {min(ld):.1f}–{max(ld):.1f} during this series.\n')
    emit(f'Series medians: L = {L:.0f} µs, Ocp = {O:.0f} µs. Least-squares fit of the model to the Ts '
         f'medians (N ≥ 3, costs ≥ 0): L = {fl:.0f} µs, Ocp = {fo:.0f} µs.\n')
    emit('| N | H | runs | Ts median | Ts min–max | L at N | Ocp at N | model, L and Ocp at N | model, series L and Ocp | sim, series L and Ocp | sim + contention | detection: first (by) | broken connection | launcher notice | view at every survivor |')
    emit('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
    for n in sorted(g):
        rs = g[n]
        ts = vals(rs, 'ts_us')
        ln, on = med(vals(rs, 'L_us')), med(vals(rs, 'Ocp_us'))
        s = st.get(n, {}).get(k, ('–', '–'))
        vias = '/'.join(sorted({r['via'] for r in rs if r['via']}))
        emit(f'| {n} | {height(n, k)} | {len(ts)}/{len(rs)} | {f0(med(ts))} | '
             f'{f0(min(ts)) if ts else "–"}–{f0(max(ts)) if ts else "–"} | {f0(ln)} | {f0(on)} | '
             f'{f0(model(n, k, ln, on)) if ln == ln else "–"} | {f0(model(n, k, L, O))} | {s[0]} | {s[1]} | '
             f'{f0(med(vals(rs, "detect_us")))} ({vias}) | {f0(med(vals(rs, "connection_us")))} | '
             f'{f0(med(vals(rs, "launcher_us")))} | {f0(med(vals(rs, "all_installed_us")))} |')
        if ts:
            series_rows.append([cfg, path, k, n, height(n, k), f'{med(ts):.1f}', f'{min(ts):.1f}', f'{max(ts):.1f}',
                                f'{model(n, k, ln, on):.1f}' if ln == ln else '', f'{model(n, k, L, O):.1f}',
                                f'{ln:.1f}' if ln == ln else ''])
    emit('')
with open(os.path.join(out, 'ts-summary.md'), 'w') as f:
    f.write('\n'.join(lines) + '\n')
with open(os.path.join(out, 'ts-series.csv'), 'w', newline='') as f:
    w = csv.writer(f)
    w.writerow(['cfg', 'path', 'k', 'n', 'H', 'ts_median_us', 'ts_min_us', 'ts_max_us', 'model_at_n_us',
                'model_series_us', 'L_at_n_us'])
    w.writerows(series_rows)
print('\n'.join(lines))
PY

if [ "$plot" = yes ]; then
    # matplotlib in a private virtual environment (nothing installed system-wide).
    venv=$here/target/plot-venv
    if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
        python3 -m venv "$venv" && "$venv/bin/pip" install -q matplotlib || { echo "no matplotlib: plot skipped"; exit 0; }
    fi
    "$venv/bin/python" - "$out" <<'PY'
import csv, os, sys
import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt
out = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(out, 'ts-series.csv'))))
fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5.2), gridspec_kw={'width_ratios': [3, 2]})
colors = {1: 'tab:blue', 2: 'tab:red', 3: 'tab:olive', 4: 'tab:brown'}
keys = sorted({(r['cfg'], r['path'], int(r['k'])) for r in rows}, key=lambda s: ({'def': 0}.get(s[0], 1), s[0], s[1], s[2]))
for (cfg, path, k) in keys:
    s = sorted([r for r in rows if (r['cfg'], r['path'], int(r['k'])) == (cfg, path, k)], key=lambda r: int(r['n']))
    n = [int(r['n']) for r in s if int(r['n']) > 2]
    s = [r for r in s if int(r['n']) > 2]
    med = [float(r['ts_median_us']) for r in s]
    lo = [m - float(r['ts_min_us']) for m, r in zip(med, s)]
    hi = [float(r['ts_max_us']) - m for m, r in zip(med, s)]
    main = cfg == 'def'
    label = f'{path}, fan-out {1 << k}' + {'def': '', 'rt': ', real-time control threads',
                                           'fair': ', fair scheduler (no deadline budget)',
                                           'slice0': ", fair, kernel's default slice",
                                           'idle': ', survivors blocked'}.get(cfg, cfg)
    ax.errorbar(n, med, yerr=[lo, hi], fmt=dict(shm='o', tcp='s')[path] if main else dict(rt='^', fair='<', slice0='v', idle='D').get(cfg, 'x'),
                color=colors[k] if main else dict(rt='tab:green', fair='tab:orange', slice0='tab:gray', idle='tab:purple').get(cfg, 'k'),
                alpha=1.0 if main else 0.6, capsize=3, label=f'measured: {label}',
                mfc='none' if path == 'tcp' else None)
    if main and path == 'shm':
        ax.plot(n, [float(r['model_at_n_us']) for r in s], color=colors[k], ls='--',
                label=f'model 2L(H−1)+Ocp·H, L and Ocp measured at each N (fan-out {1 << k})')
        ax.step(n, [float(r['model_series_us']) for r in s], where='mid', color=colors[k], ls=':',
                label=f'model with the series medians of L and Ocp (fan-out {1 << k})')
    if main:
        bx.plot(n, [float(r['L_at_n_us']) for r in s], marker=dict(shm='o', tcp='s')[path], color=colors[k],
                mfc='none' if path == 'tcp' else colors[k], label=f'{path}, fan-out {1 << k}')
ax.set_xscale('log', base=2); ax.set_yscale('log')
ax.set_xlabel('ranks N (2 cores: N > 2 shares the cores, N ≥ 8 is oversubscribed)')
ax.set_ylabel('Ts after one failure (µs)')
ax.set_title('Membership stabilization time, default configuration (median, min–max)')
ax.axhline(1000, color='grey', lw=0.8)
ax.text(3, 1060, '1 ms (target for N = 16)', color='grey', fontsize=8)
ax.legend(fontsize=7, loc='upper left')
ax.grid(True, which='both', alpha=0.3)
bx.set_xscale('log', base=2)
bx.set_xlabel('ranks N')
bx.set_ylabel('median one-way latency L of FAILED_NODE / FAILURE_ACK (µs)')
bx.set_title('L grows with N: the control threads share 2 cores')
bx.grid(True, which='both', alpha=0.3)
bx.legend(fontsize=7)
fig.tight_layout()
fig.savefig(os.path.join(out, 'ts.png'), dpi=110)
print('plot:', os.path.join(out, 'ts.png'))
PY
fi
