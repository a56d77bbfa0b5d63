#!/usr/bin/env bash
# The membership service's SIGKILL test against an installed Steadfast: 16-rank jobs where
# ranks kill themselves (one; two; the root, rank 0; the root and a child at once), over shm
# and tcp. Every survivor must report the same view (same epoch, members = exactly the
# survivors) within a bound, and finish MPI_Finalize. (`cargo test -p steadfast-capi --test
# ft_kill` runs the same program against the build tree.)
#
# Usage: scripts/membership-kill-test.sh [--prefix DIR] [--ranks N] [--paths "shm tcp"]
#                                         [--bound SECONDS] [--keep DIR]
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
prefix=$here/install
ranks=16
paths="shm tcp"
bound=10
keep=""
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=$2; shift 2 ;;
        --ranks) ranks=$2; shift 2 ;;
        --paths) paths=$2; shift 2 ;;
        --bound) bound=$2; shift 2 ;;
        --keep) keep=$2; shift 2 ;;
        -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
work=${keep:-$(mktemp -d)}
mkdir -p "$work"
"$prefix/bin/mpicc" -O2 -Wall -o "$work/view_kill" "$here/tests/c/ft/view_kill.c" || exit 1

passed=0; failed=0
run() {   # run PATH VICTIMS MODE-FLAGS...
    local path=$1 victims=$2; shift 2
    local out="$work/$path-${victims//,/_}"
    rm -rf "$out"; mkdir -p "$out"
    local start=$(date +%s.%N)
    timeout -k 5 60 "$prefix/bin/mpiexec" -n "$ranks" --path "$path" "$@" \
        "$work/view_kill" "$victims" "$out" "$bound" >"$out/stdout" 2>"$out/stderr"
    local code=$? why=""
    local took=$(echo "$(date +%s.%N) - $start" | bc)
    [ $code -eq 137 ] || why="launcher exit status $code (expected 137 = SIGKILL)"
    local ref="" survivors=0
    for ((r = 0; r < ranks; r++)); do
        if [[ ",$victims," == *",$r,"* ]]; then
            [ -e "$out/view.$r" ] && why="killed rank $r wrote a view"
            continue
        fi
        survivors=$((survivors + 1))
        if [ ! -s "$out/view.$r" ]; then why="survivor $r wrote no view"; continue; fi
        # Everything but the time must be identical: epoch, count and members.
        local v=$(sed 's/ seconds .*//' "$out/view.$r")
        [ -z "$ref" ] && ref=$v
        [ "$v" == "$ref" ] || why="rank $r: '$v' differs from '$ref'"
        [ "$(cat "$out/done.$r" 2>/dev/null)" == "0" ] || why="${why:-survivor $r did not finish MPI_Finalize}"
    done
    local n=$(echo "$ref" | awk '{print $4}')
    [ "$n" == "$survivors" ] || why="${why:-view has $n members, $survivors survived}"
    grep -q '^ok' "$out/verdict" 2>/dev/null || why="${why:-verdict: $(cat "$out/verdict" 2>/dev/null)}"
    local slowest=$(cat "$out"/view.* 2>/dev/null | awk '{print $NF}' | sort -g | tail -1)
    if [ -z "$why" ]; then
        passed=$((passed + 1))
        printf 'PASS %-4s kill %-5s %s; slowest survivor %.1f ms; job %.1f s\n' "$path" "$victims" "$ref" \
            "$(echo "$slowest * 1000" | bc)" "$took"
    else
        failed=$((failed + 1))
        echo "FAIL $path kill $victims: $why"
        tail -5 "$out/stderr" | sed 's/^/    | /'
    fi
}
for path in $paths; do
    for victims in 5 3,9 0 0,1; do
        run "$path" "$victims" --on-failure continue
    done
    run "$path" 0,1 --ft run-through
done
echo "$passed passed, $failed failed"
[ -z "$keep" ] && rm -rf "$work"
[ $failed -eq 0 ]
