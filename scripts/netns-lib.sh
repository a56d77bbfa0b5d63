# Shared helpers for the network-namespace scripts (sourced, not run).
#
# netns_up N     builds hosts $NS_PREFIX-h1..hN and a switch namespace $NS_PREFIX-sw
#                holding two bridges; host hI gets two veth pairs to the switch:
#                  r1 = 10.77.1.I/24 (route 1)    r2 = 10.77.2.I/24 (route 2)
#                MTU 9000 (jumbo frames, as the reliable channel's 8 KiB fragments
#                assume). Only addresses inside these namespaces are created.
# netns_down     deletes them (idempotent; call from a trap)
# netns_can      exits 0 if namespaces can be created here
#
# The launcher runs inside h1; its control server listens on 10.77.2.1 (route 2), so
# taking route 1 down never cuts the control connections.

NS_PREFIX=${NS_PREFIX:-sf$$}
NS_HOSTS=0

ns() { echo "$NS_PREFIX-$1"; }

netns_can() {
    [ "$(id -u)" = 0 ] || { echo "not root"; return 1; }
    command -v ip >/dev/null || { echo "iproute2 (ip) not installed"; return 1; }
    local probe="$NS_PREFIX-probe"
    if ! ip netns add "$probe" 2>/dev/null; then
        echo "ip netns add failed (no CAP_SYS_ADMIN or no network namespace support)"
        return 1
    fi
    if ! ip link add name t0 netns "$probe" type veth peer name t1 netns "$probe" 2>/dev/null; then
        ip netns del "$probe" 2>/dev/null
        echo "cannot create veth pairs"
        return 1
    fi
    ip netns del "$probe" 2>/dev/null
    return 0
}

netns_down() {
    local h
    for h in $(seq 1 "$NS_HOSTS") sw; do
        ip netns del "$(ns "h$h")" 2>/dev/null
        ip netns del "$(ns "$h")" 2>/dev/null
    done
    return 0
}

netns_up() {
    local n=$1 i r sw
    NS_HOSTS=$n
    sw=$(ns sw)
    ip netns add "$sw" || return 1
    ip -n "$sw" link set lo up
    for r in 1 2; do
        ip -n "$sw" link add "br$r" type bridge || return 1
        ip -n "$sw" link set "br$r" mtu 9000 up
    done
    for i in $(seq 1 "$n"); do
        local h
        h=$(ns "h$i")
        ip netns add "$h" || return 1
        ip -n "$h" link set lo up
        for r in 1 2; do
            ip link add name "r$r" netns "$h" type veth peer name "h${i}r$r" netns "$sw" || return 1
            ip -n "$sw" link set "h${i}r$r" mtu 9000 master "br$r" up
            ip -n "$h" link set "r$r" mtu 9000 up
            ip -n "$h" addr add "10.77.$r.$i/24" dev "r$r"
        done
    done
    # Links take a moment to come up.
    sleep 0.5
    return 0
}

# Current progress (MiB) printed by bigxfer in LOG (0 if none yet).
netns_progress() {
    grep -oE '^(\[[^]]*\] *)?progress [0-9]+' "$1" 2>/dev/null | tail -n 1 | grep -oE '[0-9]+$' || echo 0
}

# Waits until bigxfer's progress in LOG reaches MIB or the job PID ends; fails after SECS.
netns_wait_progress() {
    local log=$1 mib=$2 secs=$3 pid=$4 t=0
    while [ "$(netns_progress "$log")" -lt "$mib" ]; do
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
        t=$((t + 1))
        [ $t -lt $((secs * 10)) ] || return 1
    done
    return 0
}
