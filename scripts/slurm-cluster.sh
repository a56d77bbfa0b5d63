#!/usr/bin/env bash
# A multi-node Slurm cluster on one machine: one `slurmd` per emulated node, each in its own
# network and UTS namespace (its own host name, one veth on a bridge), plus a head node
# running `slurmctld` and the clients (srun, salloc, sbatch). munge is shared (its socket is
# a file). The one-node cluster of scripts/slurm-setup.sh is left alone: this one has its
# own configuration file (SLURM_CONF), state directory and namespaces.
#
#   head  sfc-head  10.79.0.254  slurmctld; the bridge sfc-br lives here
#   node  sfc-n1 .. sfc-nN  10.79.0.1 .. 10.79.0.N  slurmd, STEADFAST_CLUSTER_CPUS CPUs each
#
# Usage: scripts/slurm-cluster.sh up [N]     bring up N nodes (default 3); exit 77 when it
#                                            cannot run here (reason printed)
#        scripts/slurm-cluster.sh down       stop every daemon, delete the namespaces
#        scripts/slurm-cluster.sh exec CMD…  run CMD on the head node (SLURM_CONF set)
#        scripts/slurm-cluster.sh on NODE CMD…   run CMD on a node (sfc-n2) or the head
# There is one such cluster per machine: scripts/slurm-cluster-tests.sh and
# scripts/bench-startup.sh --cluster hold /run/steadfast-slurm-cluster.lock (flock) while
# they use it; do the same when scripting `up` … `down` yourself.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
P=sfc
state=/var/lib/steadfast-slurm-cluster
conf=$state/slurm.conf
cpus=${STEADFAST_CLUSTER_CPUS:-32}
skip() { echo "slurm-cluster: $*" >&2; exit 77; }

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
stop_daemon() {   # stop_daemon PIDFILE: SIGTERM, wait at most 15 s, then SIGKILL
    pid_alive "$1" || { rm -f "$1"; return 0; }
    local pid; pid=$(cat "$1")
    kill "$pid" 2>/dev/null
    for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
    rm -f "$1"
}

# on NAME CMD...: CMD in namespace NAME (sfc-head, sfc-n1, ...) with that host name, its own
# /tmp and /dev/shm ($state/fs/NAME/tmp and $state/shm/NAME, a tmpfs, bound over them, as
# separate machines would have: Slurm's PMIx plugin names its directories in /tmp after the
# job only) and /etc/netns/NAME/hosts bound over /etc/hosts (every node resolves the others).
# Not `ip netns exec`: it mounts a fresh /sys, without the cgroup file system slurmd wants.
#
# Directories under /tmp that every node must see as they are (this checkout and its install
# when they live there, as a CI clone may; more with SFC_KEEP=DIR:DIR) are bound back in.
keep_dirs() {
    local root; root=$(cd "$(dirname "$0")/.." && pwd)
    printf '%s\n' "$root" ${SFC_KEEP:+${SFC_KEEP//:/ }} | grep '^/tmp/' | sort -u | tr '\n' ' '
}
on() {
    local name=$1; shift
    mkdir -p "$state/hosttmp"
    SLURM_CONF=$conf SFC_KEEP_DIRS=$(keep_dirs) nsenter --net="/run/netns/$name" unshare --uts --mount --propagation private -- \
        sh -c 'mount --bind "/etc/netns/$0/hosts" /etc/hosts && mount --bind /tmp "$1/hosttmp" \
               && mount --bind "$1/fs/$0/tmp" /tmp \
               && for k in $SFC_KEEP_DIRS; do mkdir -p "$k" && mount --bind "$1/hosttmp${k#/tmp}" "$k" || exit 1; done \
               && mount --bind "$1/shm/$0" /dev/shm && hostname "$0" && shift && exec "$@"' \
        "$name" "$state" "$@"
}

down() {
    local n
    for f in "$state"/pids/slurmd.*.pid "$state/pids/slurmctld.pid"; do
        [ -e "$f" ] && stop_daemon "$f"
    done
    # Steps' slurmstepd and leftover tasks live in the node namespaces: end them by namespace.
    for n in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$P-(head|n[0-9]+)$"); do
        local pids; pids=$(ip netns pids "$n" 2>/dev/null)
        [ -n "$pids" ] && kill -9 $pids 2>/dev/null
        ip netns del "$n" 2>/dev/null
        rm -rf "/etc/netns/$n" "${state:?}/fs/$n"
    done
    mountpoint -q "$state/shm" 2>/dev/null && umount "$state/shm"
    if [ -f "$state/pids/munged.started" ]; then
        stop_daemon "$state/pids/munged.pid"
        rm -f "$state/pids/munged.started"
    fi
    return 0
}

up() {
    local nodes=${1:-3} i
    [ "$(id -u)" = 0 ] || skip "needs root (namespaces, daemons)"
    command -v ip >/dev/null && command -v unshare >/dev/null || skip "needs ip (iproute2) and unshare (util-linux)"
    "$here/scripts/slurm-setup.sh" --install-only || exit $?
    down
    mkdir -p "$state"/{ctld,spool,log,pids}
    # A fresh controller numbers jobs from 1 again: files of the last cluster's steps
    # (PMIx sockets named after job and step) must go.
    rm -rf "${state:?}"/ctld/* "$state"/log/* "$state"/spool/*

    # munge: shared with the one-node cluster; start it if nobody runs it.
    if ! pgrep -x munged >/dev/null; then
        mkdir -p /run/munge /var/log/munge /var/lib/munge
        [ -s /etc/munge/munge.key ] || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
        chown munge:munge /etc/munge/munge.key /run/munge /var/log/munge /var/lib/munge 2>/dev/null
        chmod 400 /etc/munge/munge.key
        runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid >/dev/null 2>&1 || skip "munged does not start"
        for _ in $(seq 50); do [ -s /run/munge/munged.pid ] && break; sleep 0.1; done
        cp /run/munge/munged.pid "$state/pids/munged.pid" && touch "$state/pids/munged.started"
    fi
    munge -n 2>/dev/null | unmunge >/dev/null 2>&1 || skip "munge does not work (credential round trip failed)"

    # Network: the bridge in the head namespace, one veth per node.
    ip netns add "$P-head" || skip "ip netns add failed"
    ip -n "$P-head" link set lo up
    ip -n "$P-head" link add "$P-br" type bridge || { down; skip "cannot create a bridge"; }
    ip -n "$P-head" addr add 10.79.0.254/24 dev "$P-br"
    ip -n "$P-head" link set "$P-br" up
    local hosts="127.0.0.1 localhost
10.79.0.254 $P-head"
    local nodelist=""
    for i in $(seq 1 "$nodes"); do
        local n="$P-n$i"
        ip netns add "$n" || { down; skip "ip netns add failed"; }
        ip -n "$n" link set lo up
        ip link add name eth0 netns "$n" type veth peer name "n$i" netns "$P-head" || { down; skip "cannot create veth pairs"; }
        ip -n "$P-head" link set "n$i" master "$P-br" up
        ip -n "$n" addr add "10.79.0.$i/24" dev eth0
        ip -n "$n" link set eth0 up
        hosts="$hosts
10.79.0.$i $n"
        nodelist="$nodelist${nodelist:+,}$n"
    done
    # Shared memory of the nodes: one tmpfs (a plain directory if it cannot be mounted), not
    # under /dev/shm, whose name a node's own /dev/shm hides.
    mkdir -p "$state/shm"
    mountpoint -q "$state/shm" || mount -t tmpfs -o mode=755 sfc-shm "$state/shm" 2>/dev/null || true
    for n in "$P-head" $(echo "$nodelist" | tr , ' '); do
        mkdir -p "/etc/netns/$n" "$state/fs/$n/tmp" "$state/shm/$n"
        chmod 1777 "$state/fs/$n/tmp" "$state/shm/$n"
        printf '%s\n' "$hosts" >"/etc/netns/$n/hosts"
    done

    cat >"$conf" <<EOF
# Written by steadfast scripts/slurm-cluster.sh: $nodes nodes in network namespaces.
ClusterName=steadfast-mn
SlurmctldHost=$P-head(10.79.0.254)
AuthType=auth/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool/%n
SlurmctldPidFile=$state/pids/slurmctld.pid
SlurmdPidFile=$state/pids/slurmd.%n.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.%n.log
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
NodeName=$P-n[1-$nodes] CPUs=$cpus State=UNKNOWN
PartitionName=main Nodes=$P-n[1-$nodes] Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
    for i in $(seq 1 "$nodes"); do mkdir -p "$state/spool/$P-n$i"; done
    on "$P-head" /usr/sbin/slurmctld -i -f "$conf" >>"$state/log/start.log" 2>&1 \
        || { down; skip "slurmctld does not start ($state/log/slurmctld.log)"; }
    for i in $(seq 1 "$nodes"); do
        on "$P-n$i" /usr/sbin/slurmd -f "$conf" >>"$state/log/start.log" 2>&1 \
            || { down; skip "slurmd on $P-n$i does not start ($state/log/slurmd.$P-n$i.log)"; }
    done
    local st=""
    for _ in $(seq 120); do
        st=$(on "$P-head" timeout 5 sinfo -h -o '%D %t' 2>/dev/null | tr '\n' ' ')
        [ "$st" = "$nodes idle " ] && { echo "slurm-cluster: $nodes nodes idle ($nodelist, $cpus CPUs each)"; return 0; }
        case "$st" in *down*|*drain*|*fail*) on "$P-head" scontrol update nodename="$nodelist" state=resume >/dev/null 2>&1 ;; esac
        sleep 0.5
    done
    echo "slurm-cluster: nodes did not become idle (sinfo: ${st:-nothing}; logs in $state/log)" >&2
    down
    exit 1
}

case ${1:-} in
    up) shift; up "$@" ;;
    down) down ;;
    exec) shift; on "$P-head" "$@" ;;
    on) shift; on "$@" ;;
    *) sed -n '2,18p' "$0" >&2; exit 2 ;;
esac
