#!/usr/bin/env bash
# CPU binding (`mpiexec --bind-to`, docs/launcher.md): bind.c on 2, 3 and 5 ranks with
# none, core and hwthread (5 ranks wrap around on a machine with fewer CPUs), and with
# the policy named by the environment variable instead of the option.
#   tests/c/bind/run.sh [PREFIX]      (a few seconds)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
prefix=${1:-$root/install}
build=${CT_BUILD:-$root/tests/c/build/bind}
mkdir -p "$build"
if ! "$prefix/bin/mpicc" -O2 -g -Wall -Wextra -Werror -o "$build/bind" "$here/bind.c" 2>"$build/cc.log"; then
    echo "FAIL bind: does not compile"; sed 's/^/    /' "$build/cc.log" | head -20; exit 1
fi
# The CPUs this script may use and the cores they belong to (package, core id).
read -r ncpus ncores < <(python3 -c '
import os
cpus = sorted(os.sched_getaffinity(0))
def topo(c, what):
    try:
        with open(f"/sys/devices/system/cpu/cpu{c}/topology/{what}") as f:
            return f.read().strip()
    except OSError:
        return None
cores = {(topo(c, "physical_package_id"), topo(c, "core_id")) if topo(c, "core_id") is not None else ("cpu", c) for c in cpus}
print(len(cpus), len(cores))')
pass=0; fail=0
# case NAME NP WHAT LAUNCHER-ARGS...
case_() {
    local name=$1 np=$2 what=$3; shift 3
    local log="$build/$name.$np.log"
    local units=$ncpus
    [ "$what" = core ] && units=$ncores
    timeout -k 5 60 "$prefix/bin/mpiexec" -n "$np" "$@" "$build/bind" "$what" "$ncpus" "$units" >"$log" 2>&1
    local rc=$?
    if [ $rc -eq 0 ] && grep -q " No Errors" "$log"; then
        echo "PASS $name np=$np"; pass=$((pass+1))
    else
        echo "FAIL $name np=$np (exit $rc)"; tail -15 "$log" | sed 's/^/    /'; fail=$((fail+1))
    fi
}
for np in 2 3 5; do
    case_ none "$np" none
    case_ none-option "$np" none --bind-to none
    case_ core "$np" core --bind-to core
    case_ hwthread "$np" hwthread --bind-to hwthread
done
case_ hwthread-single-dash 3 hwthread -bind-to hwthread
case_ hwthread-env 3 hwthread -x STEADFAST_BIND_TO=hwthread
# A bound rank sees one CPU; its waits must still spin when the host has a CPU for every
# rank (they yielded at once, as if oversubscribed: a ping-pong three times as slow), and
# yield at once when it has not.
# spin_case NAME NP EXPECTED WHAT LAUNCHER-ARGS...
spin_case() {
    local name=$1 np=$2 want=$3 what=$4; shift 4
    local log="$build/spin-$name.$np.log"
    local units=$ncpus
    [ "$what" = core ] && units=$ncores
    timeout -k 5 60 "$prefix/bin/mpiexec" -n "$np" -x STEADFAST_LOG=steadfast_core=debug "$@" "$build/bind" "$what" "$ncpus" "$units" >"$log" 2>&1
    local got
    got=$(grep -c "ranks, $ncpus CPUs for them: $want" "$log")
    if [ "$got" -eq "$np" ]; then
        echo "PASS spin-$name np=$np"; pass=$((pass+1))
    else
        echo "FAIL spin-$name np=$np: $got of $np ranks say \"$want\""; grep -E "ranks, [0-9]* CPUs|Error" "$log" | head -5 | sed 's/^/    /'; fail=$((fail+1))
    fi
}
spin_case unbound "$ncpus" "waits spin" none
spin_case core "$ncores" "waits spin" core --bind-to core
spin_case hwthread "$ncpus" "waits spin" hwthread --bind-to hwthread
spin_case over $((ncpus + 1)) "oversubscribed" hwthread --bind-to hwthread
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
