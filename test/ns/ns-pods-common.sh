# ns-pods-common.sh - sourced by test/ns/test_ns_pods.sh and
# test/broker/run-broker-pods.sh: "pods" built from namespaces on one
# machine.  A pod is a holder process in its own network, UTS, IPC and
# mount namespaces, with a fresh sysfs on /sys (as `ip netns exec` does, so
# that UCX's tcp transport, which lists /sys/class/net, sees the pod's
# interfaces) and its loopback up; every other mount, /dev/shm included,
# is the same filesystem, so pool files are shared by path.
#
# The caller sets SCR (a scratch directory) and POD_PIDS=() and VETHS=()
# before, and calls pods_cleanup from its EXIT trap.
#
# pods_refused: prints why the kernel refuses the pods' namespaces (and
#   returns 0), or returns 1 when it allows them.
# pod_start NAME [SETUP]: a pod with hostname NAME; SETUP, shell commands
#   run in it first (e.g. a tmpfs on /dev/shm: a pod without the pool).
#   Its holder's pid in POD (also appended to POD_PIDS); 1 if it failed.
# in_pod PID CMD...: CMD in the pod of holder PID.
# pods_link PID_A VETH_A ADDR_A PID_B VETH_B ADDR_B: a veth pair between two
#   pods (ADDR: a.b.c.d/len), both ends up.  Returns 2 (VETH_ERR says why)
#   when the kernel refuses a veth pair, 1 when the set-up failed after.
# pods_bridge BR: a bridge BR in this namespace (the pods' switch), up;
#   returns 2 (VETH_ERR) when the kernel refuses it.
# pods_join BR PID VETH_POD VETH_BR ADDR: pod PID joins bridge BR by a veth
#   pair: VETH_POD in the pod with address ADDR (a.b.c.d/len), VETH_BR on
#   the bridge, both up.  Returns as pods_link.
# pods_cleanup: kills the holders and deletes the veths and bridges.

POD_FLAGS=(--net --uts --ipc --mount --propagation private)

pods_refused() {
    local err
    err=$(unshare "${POD_FLAGS[@]}" -- sh -c 'mount -t sysfs pod-sysfs /sys' 2>&1) && return 1
    echo "the kernel refuses new network/UTS/IPC/mount namespaces or a sysfs mount in them (unshare ${POD_FLAGS[*]}: ${err:-exit status $?})"
    return 0
}

pod_start() {
    local name=$1 setup=${2:-true} ready=$SCR/$1.ready
    unshare "${POD_FLAGS[@]}" -- sh -c "mount -t sysfs pod-sysfs /sys &&
        hostname $name && ip link set lo up && $setup && : >$ready && exec sleep 900" \
        >"$SCR/$name.holder" 2>&1 &
    POD=$!
    POD_PIDS+=("$POD")
    for _ in $(seq 1 100); do
        [ -e "$ready" ] && return 0
        kill -0 "$POD" 2>/dev/null || break
        sleep 0.05
    done
    return 1
}

in_pod() { local pid=$1; shift; nsenter -t "$pid" --net --uts --ipc --mount -- "$@"; }

pods_link() {
    local pa=$1 va=$2 aa=$3 pb=$4 vb=$5 ab=$6
    VETH_ERR=$(ip link add "$va" type veth peer name "$vb" 2>&1) || return 2
    VETHS+=("$va" "$vb")
    if ! VETH_ERR=$( { ip link set "$va" netns "$pa" && ip link set "$vb" netns "$pb" &&
            in_pod "$pa" ip addr add "$aa" dev "$va" &&
            in_pod "$pa" ip link set "$va" up &&
            in_pod "$pb" ip addr add "$ab" dev "$vb" &&
            in_pod "$pb" ip link set "$vb" up; } 2>&1); then
        return 1
    fi
    for _ in $(seq 1 100); do
        [ "$(in_pod "$pa" cat "/sys/class/net/$va/operstate" 2>/dev/null)" = up ] &&
        [ "$(in_pod "$pb" cat "/sys/class/net/$vb/operstate" 2>/dev/null)" = up ] && break
        sleep 0.05
    done
    return 0
}

pods_bridge() {
    VETH_ERR=$(ip link add "$1" type bridge 2>&1) || return 2
    VETHS+=("$1")
    VETH_ERR=$(ip link set "$1" up 2>&1) || return 1
    return 0
}

pods_join() {
    local br=$1 pid=$2 v=$3 vb=$4 addr=$5
    VETH_ERR=$(ip link add "$v" type veth peer name "$vb" 2>&1) || return 2
    VETHS+=("$vb")
    if ! VETH_ERR=$( { ip link set "$vb" master "$br" && ip link set "$vb" up &&
            ip link set "$v" netns "$pid" &&
            in_pod "$pid" ip addr add "$addr" dev "$v" &&
            in_pod "$pid" ip link set "$v" up; } 2>&1); then
        return 1
    fi
    for _ in $(seq 1 100); do
        [ "$(in_pod "$pid" cat "/sys/class/net/$v/operstate" 2>/dev/null)" = up ] && break
        sleep 0.05
    done
    return 0
}

pods_cleanup() {
    local pid v
    # the last process of a network namespace takes its veth end with it,
    # and a veth pair goes when either end goes
    for pid in ${POD_PIDS[@]+"${POD_PIDS[@]}"}; do
        kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    done
    for v in ${VETHS[@]+"${VETHS[@]}"}; do
        ip link del "$v" 2>/dev/null
    done
}
