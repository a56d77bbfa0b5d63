#!/usr/bin/env bash
# MPI_Bcast across hosts: the channels over IP multicast against the tree, on 2, 3 and 4
# hosts (network namespaces on one bridge, scripts/netns-lib.sh; one rank per host, tcp
# between hosts), 8 B to 64 KiB, OSU timing (bench/osu/osu.c, -k 3). Every configuration
# runs once per round, alternating; the CSV holds the median over the rounds with min and
# max (docs/reproduction/channel-bcast.md, "Across hosts").
#   bench/mcast.sh [--prefix DIR] [--rounds N] [--hosts "2 3 4"] [--per-host K] [--out FILE]
# (--per-host K: K ranks per host, which the SMP scheme serves through each host's
# shared-memory channels; the CSV's `hosts` column stays the number of hosts.)
# Root only (namespaces); prints SKIP otherwise.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
prefix=$root/install rounds=3 hostcounts="2 3 4" per=1 out=$root/docs/reproduction/channel-bcast/mcast.csv
while [ $# -gt 0 ]; do
    case $1 in
    --prefix) prefix=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --hosts) hostcounts=$2; shift 2 ;;
    --per-host) per=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
prefix=$(cd "$prefix" && pwd)
NS_PREFIX=sfmb$$
# shellcheck source=scripts/netns-lib.sh
. "$root/scripts/netns-lib.sh"
if ! why=$(netns_can); then
    echo "SKIP bench/mcast.sh: $why"
    exit 0
fi
work=$(mktemp -d /tmp/sf-mcast-bench.XXXXXX)
cleanup() { netns_down; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
"$prefix/bin/mpicc" -O2 -o "$work/osu" "$root/bench/osu/osu.c" || exit 1
max=0
for h in $hostcounts; do [ "$h" -gt $max ] && max=$h; done
netns_up "$max" || { echo "cannot build the namespaces" >&2; exit 1; }
for r in 1 2; do ip -n "$(ns sw)" link set "br$r" type bridge mcast_snooping 0; done
raw=$work/raw.txt
: > "$raw"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for round in $(seq 1 "$rounds"); do
    for h in $hostcounts; do
        hosts=$(for i in $(seq 1 "$h"); do printf '%s:%s,' "$(ns "h$i")" "$per"; done)
        hosts=${hosts%,}
        for mode in multicast tree; do
            m=on
            [ $mode = tree ] && m=off
            ip netns exec "$(ns h1)" env STEADFAST_COLL_MCAST=$m timeout 300 "$prefix/bin/steadfast" run \
                --hosts "$hosts" --agent "ip netns exec {host}" --control-addr 10.77.2.1 --path tcp -n $((h * per)) \
                "$work/osu" -b bcast -M 8 -m 65536 -f 8 -k 3 2>"$work/err" |
                awk -v h="$h" -v m="$mode" -v r="$round" '$1 == "bcast" { print h, m, r, $2, $3 }' >> "$raw"
            echo "round $round, $h hosts, $mode: $(grep -c "^$h $mode $round " "$raw") sizes" >&2
        done
    done
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
mkdir -p "$(dirname "$out")"
python3 - "$raw" "$out" <<'EOF'
import sys, statistics, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    h, m, r, size, us = line.split()
    rows[(int(h), int(size), m)].append(float(us))
with open(sys.argv[2], "w") as f:
    f.write("hosts,bytes,algorithm,median_us,min_us,max_us,runs\n")
    for (h, size, m), v in sorted(rows.items()):
        f.write(f"{h},{size},{m},{statistics.median(v):.2f},{min(v):.2f},{max(v):.2f},{len(v)}\n")
print(open(sys.argv[2]).read())
EOF
