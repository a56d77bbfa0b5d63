#!/usr/bin/env bash
# Bring up a one-node Slurm cluster on this machine (munge + slurmctld + slurmd as root),
# idempotently: installs Debian's packages if missing, writes /etc/slurm/slurm.conf, starts
# the daemons that are not running and waits until the node is idle.
#
# The node declares STEADFAST_SLURM_CPUS CPUs (default 16) whatever the machine has
# (`SlurmdParameters=config_overrides`), so oversubscribed jobs can be submitted.
#
# Usage: scripts/slurm-setup.sh [--stop | --install-only]
#   --install-only: only install the packages (scripts/slurm-cluster.sh uses it)
#   exit 0: cluster up (or stopped with --stop); exit 77: cannot run here (not root, no
#   packages, daemons do not start) — the reason is printed.
set -u
cpus=${STEADFAST_SLURM_CPUS:-16}
state=/var/lib/steadfast-slurm
conf=/etc/slurm/slurm.conf
skip() { echo "slurm-setup: $*" >&2; exit 77; }

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
# stop_daemon PIDFILE: SIGTERM, then wait (at most 15 s) until the process is gone.
stop_daemon() {
    pid_alive "$1" || { rm -f "$1"; return 0; }
    local pid; pid=$(cat "$1")
    kill "$pid" 2>/dev/null
    for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
    rm -f "$1"
}

if [ "${1:-}" = --stop ]; then
    for f in "$state/slurmd.pid" "$state/slurmctld.pid" "$state/munged.pid"; do
        stop_daemon "$f"
    done
    exit 0
fi

[ "$(id -u)" = 0 ] || skip "needs root (daemons and /etc/slurm)"

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
    || ! command -v srun >/dev/null || ! command -v munged >/dev/null \
    || [ ! -e /usr/lib/x86_64-linux-gnu/libpmi2.so.0 ] || ! command -v mpiexec.hydra >/dev/null; then
    echo "slurm-setup: installing slurm, munge, libpmi2, libpmix and mpich (hydra)"
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -q && apt-get install -y -q --no-install-recommends \
        slurmctld slurmd slurm-client munge libpmi2-0 libpmix-dev mpich; } >/tmp/slurm-setup-apt.log 2>&1 \
        || skip "apt-get install failed (see /tmp/slurm-setup-apt.log)"
fi

[ "${1:-}" = --install-only ] && exit 0

mkdir -p "$state"/{ctld,spool,log} /etc/slurm /run/munge /var/log/munge /var/lib/munge
host=$(hostname -s)

# munge: one key per machine, created once.
if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown munge:munge /etc/munge/munge.key /run/munge /var/log/munge /var/lib/munge 2>/dev/null
chmod 400 /etc/munge/munge.key
if ! pid_alive "$state/munged.pid"; then
    # Debian's munged refuses to run as root unless forced; run it as its own user.
    runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid >/dev/null 2>&1 \
        || skip "munged does not start"
    for _ in $(seq 50); do [ -s /run/munge/munged.pid ] && break; sleep 0.1; done
    cp /run/munge/munged.pid "$state/munged.pid" 2>/dev/null || skip "munged wrote no pid file"
fi
munge -n 2>/dev/null | unmunge >/dev/null 2>&1 || skip "munge does not work (credential round trip failed)"

new_conf=$(cat <<EOF
# Written by steadfast scripts/slurm-setup.sh: one node, $cpus declared CPUs.
ClusterName=steadfast
SlurmctldHost=$host
AuthType=auth/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=5
MessageTimeout=20
SlurmdTimeout=60
InactiveLimit=0
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
)
restart=no
if [ ! -f "$conf" ] || [ "$(cat "$conf")" != "$new_conf" ]; then
    printf '%s\n' "$new_conf" >"$conf"
    restart=yes
fi
if [ $restart = yes ]; then
    stop_daemon "$state/slurmd.pid"
    stop_daemon "$state/slurmctld.pid"
fi
if ! pid_alive "$state/slurmctld.pid"; then
    /usr/sbin/slurmctld -i >>"$state/log/start.log" 2>&1 || skip "slurmctld does not start ($state/log/slurmctld.log)"
fi
if ! pid_alive "$state/slurmd.pid"; then
    /usr/sbin/slurmd >>"$state/log/start.log" 2>&1 || skip "slurmd does not start ($state/log/slurmd.log)"
fi
for _ in $(seq 60); do
    st=$(timeout 5 sinfo -h -n "$host" -o %t 2>/dev/null | head -1)
    case "$st" in
        idle|mix|alloc) echo "slurm-setup: node $host is $st ($cpus CPUs)"; exit 0 ;;
        down*|drain*|fail*) scontrol update nodename="$host" state=resume >/dev/null 2>&1 ;;
    esac
    sleep 0.5
done
skip "node $host did not become idle (state: ${st:-unknown}; logs in $state/log)"
