#!/usr/bin/env bash
# Benchmarks of run-through fault tolerance (bench/ft_latency.c), one markdown report on
# stdout. All ranks run on this machine, which lets the victim and the survivors share
# CLOCK_MONOTONIC.
#   detect   time from a rank's death (its own timestamp just before raise(SIGKILL)) to the
#            return, with an error, of every survivor's pending call: MPI_Recv from the
#            victim, or MPI_Barrier; 4, 8, 16 ranks; per run the slowest survivor and the
#            median survivor, then the median over --runs runs
#   ops      MPIX_Comm_agree and MPIX_Comm_shrink (+ MPI_Comm_free) per call, 2, 4, 8, 16
#            ranks, fault-free and on the same communicator after one rank died and every
#            survivor acknowledged it; median over runs of each run's median batch
#   bcast    8-byte MPI_Bcast from rank 0 in run-through mode (--ft run-through) and in the
#            default mode, fault-free, and in run-through mode with 1 and 2 dead ranks
#            (N/2, then 1) whose failures the survivors know and acknowledged. Whatever
#            the library does is recorded: a time, or the error a survivor got and how
#            long its call took to return
#
#   scripts/bench-ft.sh [--prefix DIR] [--runs N (default 7)] [--only detect,ops,bcast]
#
# Not a test: it prints numbers (µs). Raw output goes to bench/results/ft-<timestamp>/.
# About a minute on a 2-core machine; every job is bounded by a 60 s timeout.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
prefix=$root/install
runs=7
only="detect,ops,bcast"
while [ $# -gt 0 ]; do
    case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-ft.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
mpiexec=$prefix/bin/mpiexec
[ -x "$mpiexec" ] || { echo "bench-ft.sh: $mpiexec not found (make install first)" >&2; exit 2; }
out=$root/bench/results/ft-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
bin=$out/ft_latency
"$prefix/bin/mpicc" -O2 -Wall -o "$bin" "$root/bench/ft_latency.c" || exit 1
want() { case ",$only," in *",$1,"*) return 0 ;; esac; return 1; }

# median of the numbers on stdin ("-" when there are none)
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
fmt() { awk -v v="$1" 'BEGIN { if (v == "-") print "-"; else if (v >= 1000) printf "%.0f\n", v; else if (v >= 10) printf "%.1f\n", v; else printf "%.2f\n", v }'; }
# job LOG TIMEOUT MPIEXEC-ARGS... : one job, stdout+stderr in LOG, exit status ignored
# (in run-through mode the launcher exits 137 because a rank was killed)
job() { local log=$1; shift; timeout -k 5 60 "$mpiexec" "$@" >"$log" 2>&1 </dev/null; echo "exit $?" >>"$log"; }

start=$(date +%s)
load_before=$(uptime)
echo "# Run-through fault tolerance benchmarks"
echo
echo "$(date '+%Y-%m-%d %H:%M'), $(nproc) CPUs, $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), --runs $runs"
echo "load before: ${load_before#*load average: }"

if want detect; then
    echo
    echo "## Failure detection: death to the pending call's error (µs)"
    echo
    echo "| ranks | survivors blocked in | slowest survivor (median of runs) | median survivor (median of runs) | runs with a result | error class |"
    echo "|---:|---|---:|---:|---:|---|"
    for n in 4 8 16; do
        for v in recv barrier; do
            maxes=""; meds=""; ok=0; classes=""
            for r in $(seq 1 "$runs"); do
                log=$out/detect-$v-n$n-r$r.log
                FT_T0_FILE=$out/t0-$v-$n-$r job "$log" --ft run-through -n "$n" "$bin" detect "$v"
                cnt=$(grep -c '^detect ' "$log")
                # every survivor must have reported, else the run does not count
                [ "$cnt" -eq $((n - 1)) ] || continue
                ok=$((ok + 1))
                maxes="$maxes $(grep '^detect ' "$log" | awk '{ print $3 }' | sort -g | tail -n 1)"
                meds="$meds $(grep '^detect ' "$log" | awk '{ print $3 }' | median)"
                classes="$classes $(grep '^detect ' "$log" | awk '{ print $4 }')"
            done
            cls=$(printf '%s\n' $classes | sort -u | tr '\n' ' ' | sed 's/ $//')
            echo "| $n | $( [ $v = recv ] && echo 'MPI_Recv from the victim' || echo MPI_Barrier) | $(fmt "$(printf '%s\n' $maxes | median)") | $(fmt "$(printf '%s\n' $meds | median)") | $ok/$runs | ${cls:--} |"
        done
    done
fi

if want ops; then
    echo
    echo "## MPIX_Comm_agree and MPIX_Comm_shrink (µs per call, slowest rank)"
    echo
    echo "| ranks | agree, fault-free | agree, 1 failed (acked) | shrink, fault-free | shrink, 1 failed (acked) |"
    echo "|---:|---:|---:|---:|---:|"
    for n in 2 4 8 16; do
        for r in $(seq 1 "$runs"); do
            job "$out/ops-n$n-r$r.log" --ft run-through -n "$n" "$bin" ops
        done
        cell() {   # OP COND: median over runs, or the first non-number seen
            local vals; vals=$(cat "$out"/ops-n$n-r*.log | awk -v o="$1" -v c="$2" '$1 == "ops" && $2 == o && $3 == c { print $4 }')
            if printf '%s\n' $vals | grep -q error; then echo "error"; else fmt "$(printf '%s\n' $vals | median)"; fi
        }
        echo "| $n | $(cell agree none) | $(cell agree 1-acked) | $(cell shrink none) | $(cell shrink 1-acked) |"
    done
fi

if want bcast; then
    echo
    echo "## 8-byte MPI_Bcast from rank 0 (µs per call, slowest survivor)"
    echo
    echo "Dead ranks: 1 = rank N/2 (the root's largest subtree), 2 = ranks N/2 and 1; failures known"
    echo "and acknowledged before timing. \"error C after T\": the first call returned C at some"
    echo "survivor, and the slowest survivor's call returned after T µs."
    echo
    echo "| ranks | mode | 0 dead | 1 dead | 2 dead |"
    echo "|---:|---|---:|---:|---:|"
    for n in 4 8 16; do
        for mode in default run-through; do
            for r in $(seq 1 "$runs"); do
                if [ $mode = default ]; then
                    job "$out/bcast-$mode-n$n-r$r.log" -n "$n" "$bin" bcast
                else
                    job "$out/bcast-$mode-n$n-r$r.log" --ft run-through -n "$n" "$bin" bcast run-through
                fi
            done
            cell() {   # DEAD
                local f=("$out"/bcast-$mode-n$n-r*.log) vals errs
                vals=$(cat "${f[@]}" | awk -v d="$1" '$1 == "bcast" && $2 == d && $3 != "error" { print $3 }')
                errs=$(cat "${f[@]}" | awk -v d="$1" '$1 == "bcast" && $2 == d && $3 == "error" { print $4 }' | sort -u | tr '\n' ' ' | sed 's/ $//')
                if [ -n "$errs" ]; then
                    local t; t=$(cat "${f[@]}" | awk -v d="$1" '$1 == "bcast" && $2 == d && $3 == "error" { print $5 }' | median)
                    echo "error $errs after $(fmt "$t")$( [ -n "$vals" ] && echo "; ok in some runs: $(fmt "$(printf '%s\n' $vals | median)")")"
                elif [ -n "$vals" ]; then
                    fmt "$(printf '%s\n' $vals | median)"
                else
                    echo "-"
                fi
            }
            if [ $mode = default ]; then
                echo "| $n | default (--ft abort) | $(cell 0) | n/a | n/a |"
            else
                echo "| $n | --ft run-through | $(cell 0) | $(cell 1) | $(cell 2) |"
            fi
        done
    done
fi

echo
echo "load after: $(uptime | sed 's/.*load average: //'); $(( $(date +%s) - start )) s; raw output in ${out#"$root"/}"
