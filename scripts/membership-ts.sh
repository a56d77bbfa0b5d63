#!/usr/bin/env bash
# Measures the membership service on this machine: stabilization time Ts after a single
# failure vs the number of ranks, for fan-out 2 and 4, over shm and tcp; detection latency;
# the per-hop latency L and the per-level processing cost Ocp; the paper's model
# Ts = 2·L·(H−1) + Ocp·H with the measured L and Ocp, and with a least-squares fit; the
# latency-model simulator with the same costs; a plot.
#
# Each run is one job of N ranks (tests/c/ft/view_kill.c) that kills the root's last child
# (rank min(2^k, N−1), the paper's example) with SIGKILL after a settle time, with
# STEADFAST_FT_TRACE on. From the traces (crates/runtime/src/ft/trace.rs):
#   Ts      = the root's `stable` line: its install of the new view -> its last FAILURE_ACK
#   detect  = first suspicion / launcher notice of the victim at any survivor - kill time
#   L       = one-way latency of FAILED_NODE and FAILURE_ACK frames (sender clock -> receipt)
#   Ocp     = handling time of FAILED_NODE at a node (recalculation + forwarding + its ack)
#
# Usage: scripts/membership-ts.sh [--prefix DIR] [--out DIR] [--reps N] [--sizes "2 4 .."]
#                                 [--fanouts "1 2"] [--paths "shm tcp"] [--no-plot] [--quick]
# Output: OUT/ts-runs.csv, OUT/ts-summary.md, OUT/ts.png (default OUT: docs/reproduction/membership)
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
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$prefix/bin/mpicc" -O2 -Wall -o "$work/view_kill" "$here/tests/c/ft/view_kill.c" || exit 1

runs=$work/runs
mkdir -p "$runs"
# Real-time control threads (the default) for the main series; one series without.
series() {   # series RT PATH K SIZES REPS
    local rt=$1 path=$2 k=$3 ns=$4 reps=$5
    for n in $ns; do
        local victim=$(( (1 << k) < n - 1 ? (1 << k) : n - 1 ))
        for ((rep = 1; rep <= reps; rep++)); do
            local d="$runs/rt$rt-$path-k$k-n$n-r$rep"
            mkdir -p "$d"
            echo "$(cut -d' ' -f1 /proc/loadavg)" >"$d/load"
            STEADFAST_FT_RT=$rt STEADFAST_FANOUT_LOG2=$k STEADFAST_FT_TRACE=$d \
                timeout -k 5 120 "$prefix/bin/mpiexec" -n "$n" --path "$path" --on-failure continue \
                "$work/view_kill" "$victim" "$d" 20 "$settle" >"$d/stdout" 2>"$d/stderr"
            printf '.'
        done
    done
}
echo "measuring (each dot is one job; load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
for path in $paths; do
    for k in $fanouts; do
        series 1 "$path" "$k" "$sizes" "$reps"
    done
done
series 0 shm 2 "4 16 64" 3
echo

python3 - "$runs" "$out" "$here" <<'PY'
import csv, glob, os, statistics, subprocess, sys
runs_dir, out, repo = sys.argv[1:4]

def height(n, k):
    d, i = 0, n - 1
    while i > 0:
        i = (i - 1) >> k
        d += 1
    return d + 1

def med(xs):
    return statistics.median(xs) if xs else float('nan')

rows = []
for d in sorted(glob.glob(os.path.join(runs_dir, '*'))):
    name = os.path.basename(d)
    rt, path, k, n, rep = name.split('-')
    rt, k, n, rep = int(rt[2:]), int(k[1:]), int(n[1:]), int(rep[1:])
    killed = glob.glob(os.path.join(d, 'killed.*'))
    traces = {}
    for f in glob.glob(os.path.join(d, 'ft.*.trace')):
        r = int(f.split('.')[-2])
        traces[r] = [l.split() for l in open(f) if l.strip()]
    row = dict(rt=rt, path=path, k=k, n=n, rep=rep, load=open(os.path.join(d, 'load')).read().strip(),
               ts_us='', detect_us='', via='', all_installed_us='', L_us='', Ocp_us='', ok=0)
    if not killed or not traces:
        rows.append(row); continue
    victim = int(killed[0].split('.')[-1])
    t_kill = float(open(killed[0]).read()) * 1e9
    root = min(traces)
    stable = [l for l in traces[root] if l[0] == 'stable' and int(l[2]) >= 1]
    inst = [l for l in traces[root] if l[0] == 'install' and int(l[2]) >= 1]
    if stable and inst:
        t0, t1 = int(inst[0][1]), int(stable[0][1])
        row['ts_us'] = int(stable[0][3]) / 1e3
        lat, ocp = [], []
        for tr in traces.values():
            for l in tr:
                if l[0] in ('rx', 'handled') and t0 <= int(l[1]) <= t1 + 10**6:
                    if l[0] == 'rx' and l[3] in ('FAILED_NODE', 'FAILURE_ACK'):
                        lat.append(int(l[4]) / 1e3)
                    if l[0] == 'handled' and l[3] == 'FAILED_NODE':
                        ocp.append(int(l[4]) / 1e3)
        row['L_us'] = med(lat) if lat else ''
        row['Ocp_us'] = med(ocp) if ocp else ''
    firsts = [(int(l[1]), l[0] if l[0] == 'notice' else l[3]) for tr in traces.values() for l in tr
              if (l[0] == 'notice' and int(l[2]) == victim) or (l[0] == 'suspect' and int(l[2]) == victim)]
    if firsts:
        t, via = min(firsts)
        row['detect_us'] = (t - t_kill) / 1e3
        row['via'] = 'launcher' if via == 'notice' else via
    installs = []
    for r, tr in traces.items():
        if r == victim: continue
        i = [int(l[1]) for l in tr if l[0] == 'install' and int(l[2]) >= 1]
        if i: installs.append(min(i))
    if len(installs) == len(traces) - (victim in traces):
        row['all_installed_us'] = (max(installs) - t_kill) / 1e3
    row['ok'] = int(row['ts_us'] != '')
    rows.append(row)

fields = ['rt', 'path', 'k', 'n', 'rep', 'load', 'ts_us', 'detect_us', 'via', 'all_installed_us', 'L_us', 'Ocp_us', 'ok']
with open(os.path.join(out, 'ts-runs.csv'), 'w', newline='') as f:
    w = csv.DictWriter(f, fieldnames=fields)
    w.writeheader()
    for r in rows:
        w.writerow({k: (f'{v:.1f}' if isinstance(v, float) else v) for k, v in r.items()})

def group(rt, path, k):
    g = {}
    for r in rows:
        if (r['rt'], r['path'], r['k']) == (rt, path, k):
            g.setdefault(r['n'], []).append(r)
    return g

def vals(rs, key):
    return [float(r[key]) for r in rs if r[key] != '']

def fit(points):
    # least squares Ts = L·2(H−1) + Ocp·H over (n, k, Ts) with n ≥ 3
    a = [(2 * (height(n, k) - 1), height(n, k), ts) for n, k, ts in points if n >= 3]
    s11 = sum(x * x for x, _, _ in a); s12 = sum(x * y for x, y, _ in a); s22 = sum(y * y for _, y, _ in a)
    b1 = sum(x * t for x, _, t in a); b2 = sum(y * t for _, y, t in a)
    det = s11 * s22 - s12 * s12
    if not a or abs(det) < 1e-9:
        return float('nan'), float('nan')
    l, o = (b1 * s22 - b2 * s12) / det, (s11 * b2 - s12 * b1) / det
    # Costs cannot be negative: fit the other one alone then.
    if l < 0:
        return 0.0, b2 / s22
    if o < 0:
        return b1 / s11, 0.0
    return l, o

lines = []
emit = lines.append
series_keys = sorted({(r['rt'], r['path'], r['k']) for r in rows}, key=lambda s: (-s[0], s[1], s[2]))
global_L = {}; global_O = {}; fits = {}
for key in series_keys:
    rt, path, k = key
    g = group(*key)
    allL = [x for rs in g.values() for x in vals(rs, 'L_us')]
    allO = [x for rs in g.values() for x in vals(rs, 'Ocp_us')]
    global_L[key], global_O[key] = med(allL), med(allO)
    fits[key] = fit([(n, k, med(vals(rs, 'ts_us'))) for n, rs in g.items() if vals(rs, 'ts_us')])

def sim(L, O):
    try:
        txt = subprocess.run(['cargo', 'run', '-q', '--release', '-p', 'steadfast-membership', '--example',
                              'ts_table', f'{L:.2f}', f'{O:.2f}'], cwd=repo, capture_output=True, text=True,
                             timeout=600).stdout
    except Exception:
        return {}
    table = {}
    for line in txt.splitlines():
        c = [x.strip() for x in line.strip('|').split('|')]
        if len(c) == 9 and c[0].isdigit():
            table[int(c[0])] = {1: (float(c[3]), float(c[4])), 2: (float(c[7]), float(c[8]))}
    return table

emit(f'Runs: {len(rows)} jobs, {sum(r["ok"] for r in rows)} with a complete trace; '
     f'load average during the runs {min(float(r["load"]) for r in rows):.1f}–{max(float(r["load"]) for r in rows):.1f} '
     f'(2 cores).\n')
for key in series_keys:
    rt, path, k = key
    g = group(*key)
    L, O = global_L[key], global_O[key]
    fl, fo = fits[key]
    st = sim(L, O) if L == L and O == O else {}
    emit(f'### {path}, fan-out {1 << k} (k = {k}), control thread {"real-time" if rt else "default scheduling"}\n')
    emit(f'Measured medians over all runs of the series: L = {L:.1f} µs, Ocp = {O:.1f} µs. '
         f'Least-squares fit of the model to the Ts medians (N ≥ 3): L = {fl:.1f} µs, Ocp = {fo:.1f} µs.\n')
    emit('| N | H | runs | Ts median | Ts min–max | model (measured L, Ocp) | model (fit) | sim | sim, contention | L median | Ocp median | detection median | all survivors installed |')
    emit('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
    for n in sorted(g):
        rs = g[n]
        ts = vals(rs, 'ts_us'); h = height(n, k)
        model = 2 * L * (h - 1) + O * h
        mfit = 2 * fl * (h - 1) + fo * h
        s = st.get(n, {}).get(k, ('', ''))
        det = vals(rs, 'detect_us'); inst = vals(rs, 'all_installed_us')
        vias = sorted({r['via'] for r in rs if r['via']})
        f = lambda x: f'{x:.0f}' if isinstance(x, float) and x == x else '–'
        emit(f'| {n} | {h} | {len(ts)}/{len(rs)} | {f(med(ts))} | {f(min(ts)) if ts else "–"}–{f(max(ts)) if ts else "–"} '
             f'| {f(model)} | {f(mfit)} | {s[0] if s[0] != "" else "–"} | {s[1] if s[1] != "" else "–"} '
             f'| {f(med(vals(rs, "L_us")))} | {f(med(vals(rs, "Ocp_us")))} | {f(med(det))} ({"/".join(vias)}) | {f(med(inst))} |')
    emit('')
with open(os.path.join(out, 'ts-summary.md'), 'w') as fsum:
    fsum.write('\n'.join(lines) + '\n')
print('\n'.join(lines))

with open(os.path.join(out, 'ts-series.csv'), 'w', newline='') as f:
    w = csv.writer(f)
    w.writerow(['rt', 'path', 'k', 'n', 'H', 'ts_median_us', 'ts_min_us', 'ts_max_us', 'model_us', 'fit_model_us'])
    for key in series_keys:
        rt, path, k = key
        L, O = global_L[key], global_O[key]; fl, fo = fits[key]
        for n, rs in sorted(group(*key).items()):
            ts = vals(rs, 'ts_us'); h = height(n, k)
            if ts:
                w.writerow([rt, path, k, n, h, f'{med(ts):.1f}', f'{min(ts):.1f}', f'{max(ts):.1f}',
                            f'{2 * L * (h - 1) + O * h:.1f}', f'{2 * fl * (h - 1) + fo * h:.1f}'])
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
fig, ax = plt.subplots(figsize=(8, 5))
colors = {1: 'tab:blue', 2: 'tab:red'}
for (rt, path, k) in sorted({(r['rt'], r['path'], int(r['k'])) for r in rows}, reverse=True):
    s = sorted([r for r in rows if (r['rt'], r['path'], int(r['k'])) == (rt, path, k)], key=lambda r: int(r['n']))
    n = [int(r['n']) for r in s]
    med = [float(r['ts_median_us']) for r in s]
    lo = [m - float(r['ts_min_us']) for m, r in zip(med, s)]
    hi = [float(r['ts_max_us']) - m for m, r in zip(med, s)]
    label = f'{path}, fan-out {1 << k}' + ('' if rt == '1' else ', default scheduling')
    style = dict(shm='o', tcp='s')[path]
    ax.errorbar(n, med, yerr=[lo, hi], fmt=style, color=colors[k], alpha=1.0 if rt == '1' else 0.4,
                capsize=3, label=f'measured: {label}', mfc='none' if path == 'tcp' else None)
    if rt == '1' and path == 'shm':
        ax.step(n, [float(r['model_us']) for r in s], where='mid', color=colors[k], ls='--',
                label=f'model 2L(H−1)+Ocp·H, measured L, Ocp (fan-out {1 << k})')
        ax.step(n, [float(r['fit_model_us']) for r in s], where='mid', color=colors[k], ls=':',
                label=f'model, least-squares L, Ocp (fan-out {1 << k})')
ax.set_xscale('log', base=2)
ax.set_yscale('log')
ax.set_xlabel('ranks N (2 cores: N ≥ 8 is oversubscribed)')
ax.set_ylabel('Ts after one failure (µs)')
ax.set_title('Membership stabilization time on this machine')
ax.axhline(1000, color='grey', lw=0.8)
ax.text(2, 1050, 'target for N = 16: 1 ms', color='grey', fontsize=8)
ax.legend(fontsize=7)
ax.grid(True, which='both', alpha=0.3)
fig.tight_layout()
fig.savefig(os.path.join(out, 'ts.png'), dpi=120)
print('plot:', os.path.join(out, 'ts.png'))
PY
fi
