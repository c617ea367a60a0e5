#!/usr/bin/env bash
#
# run-dask-pods.sh - a Dask cluster over protocol cxl across two pods
# (issue 15), with the pods of test/ns (test/ns/ns-pods-common.sh: network,
# UTS, IPC and mount namespaces on one machine), joined by a bridge
# (10.79.0.1 and 10.79.0.2):
#   pod-1  `dask scheduler --protocol cxl`, worker w1 (`dask worker
#          cxl://10.79.0.1:PORT`) and the client, all on pool P (a file
#          under the shared /dev/shm)
#   pod-2  worker w2 on a DIFFERENT pool at the same path: pod-2 has a
#          tmpfs of its own on /dev/shm, where its pool is created (another
#          uuid).  No pool is shared across the pods, so between them only
#          tcp can carry the bytes; inside pod-1 cxl does.
# Checks: both workers join; w1 computes a 32 MiB array from one made on
# w2 and w2 one from w1's (results right: the workers moved the data both
# ways); the client gathers 32 MiB that w1 holds (w1 -> scheduler ->
# client, inside pod-1) and the pod-1 interfaces (lo and its veth) carry
# under a tenth of it: the pool carried it; the cross-pod transfer puts at
# least the array's bytes on pod-1's veth (tcp carried it).
# Lanes of every open comm after that (ucx_cxl.dask.comm_lanes, run on the
# scheduler and the workers: UCP's am/am_bw lanes per endpoint, by the
# pod of the peer): the scheduler's and w1's comms with pod-1 use cxl only,
# theirs with pod-2 tcp only, w2's with pod-1 tcp only; and UCX's own lines
# (UCX_LOG_LEVEL=info, "ep_cfg[N]: am(...)"): cxl in the scheduler's and
# w1's, none in w2's.
# Exits 77 (skipped) with the reason where the kernel refuses the
# namespaces, a bridge or a veth pair.
#
# Environment: CXL_BUILDDIR (default TOP/build-release), CXLPOOL_BIN;
# DASK_PODS_KEEP=1 keeps the logs (the scratch folder is printed).
# Last line "dask-pods: N passed, N failed"; exit 0 only when nothing failed.
set -u
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
. "$top/test/helpers/ucx-module.sh"
build=${CXL_BUILDDIR:-$top/build-release}
CXL=${CXLPOOL_BIN:-$build/cxlpool}
PY=/usr/bin/python3
for f in "$CXL" "$build/.libs/libuct_cxl.so" "$build/.libs/libcxl_comm.so"; do
    [ -e "$f" ] || { echo "dask-pods: $f not found (build first)" >&2; exit 99; }
done
for t in unshare nsenter ip timeout; do
    command -v "$t" >/dev/null ||
        { echo "dask-pods: '$t' not installed (util-linux, iproute2)" >&2; exit 99; }
done
"$PY" -c 'import distributed, numpy' 2>/dev/null ||
    { echo "dask-pods: $PY lacks python3-distributed or numpy (contrib/setup-deps.sh)" >&2; exit 99; }

SCR=$(mktemp -d "${TMPDIR:-/tmp}/dask-pods.XXXXXX") || exit 99
POD_PIDS=()
VETHS=()
BG=()
POOL=/dev/shm/ucx-cxl-dask-pods-$$.pool
. "$top/test/ns/ns-pods-common.sh"
cleanup() {
    local p i
    # each is a timeout(1) process: TERM reaches its program, KILL would not
    for p in ${BG[@]+"${BG[@]}"}; do
        kill -TERM "$p" 2>/dev/null
    done
    for p in ${BG[@]+"${BG[@]}"}; do
        for i in $(seq 1 100); do
            kill -0 "$p" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$p" 2>/dev/null; then
            pkill -KILL -P "$p"     # its program first: KILL stays with timeout
            kill -KILL "$p"
        fi
        wait "$p"
    done
    pods_cleanup         # pod-2's tmpfs (and its pool) goes with it
    rm -f "$POOL"
    [ "${DASK_PODS_KEEP:-0}" = 1 ] || rm -rf "$SCR"
} 2>/dev/null    # not even bash's "Killed" line of a job killed here
trap cleanup EXIT
skip() { echo "SKIP: $1"; exit 77; }
finish() {
    [ "${DASK_PODS_KEEP:-0}" = 1 ] && echo "# logs kept in $SCR"
    echo "dask-pods: $PASS passed, $FAIL failed"
    [ "$FAIL" = 0 ]
    exit
}

why=$(pods_refused) && skip "$why"
pod_start dk-pod-1 && P1=$POD && pod_start dk-pod-2 "mount -t tmpfs dkpod2-shm /dev/shm" && P2=$POD ||
    skip "cannot set up a pod in its namespaces: $(cat "$SCR"/dk-pod-*.holder 2>/dev/null | tr '\n' ' ')"
BR=dpbr-$$
rc=0
pods_bridge "$BR" || rc=$?
[ $rc = 0 ] && { pods_join "$BR" "$P1" dpa-$$ dpab-$$ 10.79.0.1/24 || rc=$?; }
[ $rc = 0 ] && { pods_join "$BR" "$P2" dpb-$$ dpbb-$$ 10.79.0.2/24 || rc=$?; }
case $rc in
    2) skip "the kernel refuses a bridge or a veth pair: $VETH_ERR" ;;
    1) fail "pods: network set-up" "$VETH_ERR"; finish ;;
esac
V1=dpa-$$
H1=10.79.0.1 H2=10.79.0.2

# the pools: P in the shared /dev/shm, another one at the same path in pod-2
"$CXL" create "$POOL" --size 512m >"$SCR/pool1.out" 2>&1 &&
    in_pod "$P2" "$CXL" create "$POOL" --size 512m >"$SCR/pool2.out" 2>&1
rc=$?
u1=$("$CXL" info "$POOL" --json 2>/dev/null | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["uuid"])' 2>/dev/null)
u2=$(in_pod "$P2" "$CXL" info "$POOL" --json 2>/dev/null | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["uuid"])' 2>/dev/null)
if [ $rc = 0 ] && [ -n "$u1" ] && [ -n "$u2" ] && [ "$u1" != "$u2" ]; then
    ok "pools: pod-1 and pod-2 map different pools at $POOL ($u1, $u2)"
else
    fail "pools: pod-1 and pod-2 map different pools" "rc $rc, uuids '$u1' '$u2': $(cat "$SCR"/pool*.out | tr '\n' ' ')"
    finish
fi

# every Dask process: the package from this tree, lanes in its log
DENV=(env -u LD_PRELOAD PYTHONPATH="$top/python" UCX_CXL_POOL="$POOL" UCX_LOG_LEVEL=info
      DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=30s)
[ "$build" != "$top/build-release" ] && [ "$build" != "$top/build" ] &&
    DENV+=(CXL_LIBDIR="$build/.libs" UCX_WARN_UNUSED_ENV_VARS=n)
PORT=$((20000 + $$ % 20000))
SCHED=cxl://$H1:$PORT

# bg POD LOG CMD...: CMD in POD in the background (nsenter execs env and
# timeout in place, so $! is timeout's pid: not a subshell's, whose TERM
# would not reach the program)
bg() {
    local pod=$1 log=$2
    shift 2
    nsenter -t "$pod" --net --uts --ipc --mount -- "${DENV[@]}" timeout -k 5 300 "$@" >"$log" 2>&1 &
    BG+=($!)
}
bg "$P1" "$SCR/scheduler.log" "$PY" -m distributed.cli.dask_scheduler \
    --protocol cxl --host "$H1" --port "$PORT" --no-dashboard
for _ in $(seq 1 300); do
    grep -q "Scheduler at:" "$SCR/scheduler.log" && break
    sleep 0.1
done
if grep -q "Scheduler at: *$SCHED" "$SCR/scheduler.log"; then
    ok "dask scheduler --protocol cxl in pod-1 at $SCHED"
else
    fail "dask scheduler --protocol cxl in pod-1" "$(tail -n 20 "$SCR/scheduler.log" | tr '\n' ' ')"
    finish
fi
wargs=(--nthreads 1 --no-nanny --no-dashboard --memory-limit 0)
bg "$P1" "$SCR/w1.log" "$PY" -m distributed.cli.dask_worker "$SCHED" --host "$H1" --name w1 "${wargs[@]}"
bg "$P2" "$SCR/w2.log" "$PY" -m distributed.cli.dask_worker "$SCHED" --host "$H2" --name w2 "${wargs[@]}"

cat >"$SCR/client.py" <<'EOF'
import sys, time, zlib
import numpy as np
from distributed import Client, wait

N = 32 << 20

def make(seed):
    return np.random.default_rng(seed).integers(0, 255, N, dtype=np.uint8)

def combine(a, b):
    return a ^ b

def crc(x):
    return zlib.crc32(memoryview(x))

def netdev():
    d = {}
    for line in open("/proc/net/dev").read().splitlines()[2:]:
        name, rest = line.split(":", 1)
        f = rest.split()
        d[name.strip()] = int(f[0]) + int(f[8])
    return d

sched, veth = sys.argv[1], sys.argv[2]
c = Client(sched, timeout=60)
c.wait_for_workers(2, timeout=60)
names = {w["name"]: a for a, w in c.scheduler_info()["workers"].items()}
print("workers", sorted(names.items()), flush=True)
a = c.submit(make, 1, workers=["w1"], pure=False)
b = c.submit(make, 2, workers=["w2"], pure=False)
wait([a, b])
exp = crc(make(1) ^ make(2))
# inside pod-1: w1's 32 MiB to the client (through the scheduler)
n0 = netdev()
got = c.gather(a)
n1 = netdev()
print("intra", crc(got) == crc(make(1)), n1["lo"] - n0["lo"], n1[veth] - n0[veth], flush=True)
# across: w1 gets b from w2, w2 gets a from w1
n0 = netdev()
x = c.submit(combine, a, b, workers=["w1"], pure=False)
y = c.submit(combine, b, a, workers=["w2"], pure=False)
wait([x, y])
n1 = netdev()
cx = c.submit(crc, x, workers=["w1"], pure=False).result()
cy = c.submit(crc, y, workers=["w2"], pure=False).result()
print("cross", cx == exp, cy == exp, n1[veth] - n0[veth], n1["lo"] - n0["lo"], flush=True)
# the lanes of every open comm, per process and peer pod (by the peer's host)
from ucx_cxl.dask import comm_lanes
procs = {"scheduler": c.run_on_scheduler(comm_lanes)}
for addr, lanes in c.run(comm_lanes).items():
    procs[[n for n, a in names.items() if a == addr][0]] = lanes
for name, comms in sorted(procs.items()):
    for peer, lanes in sorted(comms.items()):
        pod = {"10.79.0.1": "pod-1", "10.79.0.2": "pod-2"}.get(peer[6:].rsplit(":", 1)[0], "?")
        am = ",".join(sorted(set(lanes.get("am", []) + lanes.get("am_bw", []))))
        print("lanes", name, pod, peer, am or "-", flush=True)
c.close()
EOF
in_pod "$P1" "${DENV[@]}" UCX_LOG_LEVEL=warn timeout -k 5 180 "$PY" "$SCR/client.py" "$SCHED" "$V1" \
    >"$SCR/client.log" 2>&1
rc=$?
echo "# client (exit $rc): $(grep -E '^(workers|intra|cross)' "$SCR/client.log" | tr '\n' ';')"
if grep -q "^workers.*'w1', 'cxl://$H1:.*'w2', 'cxl://$H2:" "$SCR/client.log"; then
    ok "workers w1 (pod-1) and w2 (pod-2) joined over cxl://"
else
    fail "workers w1 (pod-1) and w2 (pod-2) joined" "exit $rc: $(tail -n 15 "$SCR/client.log" | tr '\n' ' ')"
fi
N=$((32 << 20))
set -- $(grep '^intra' "$SCR/client.log")
if [ "${2:-}" = True ] && [ "${3:-$N}" -lt $((N / 10)) ] && [ "${4:-$N}" -lt $((N / 10)) ]; then
    ok "inside pod-1: 32 MiB from w1 to the client intact, lo $3 B and veth $4 B (< $((N / 10))): through the pool"
else
    fail "inside pod-1: 32 MiB from w1 to the client through the pool" "intra: ${*:-missing}"
fi
set -- $(grep '^cross' "$SCR/client.log")
if [ "${2:-}" = True ] && [ "${3:-}" = True ] && [ "${4:-0}" -ge "$N" ]; then
    ok "across the pods: w1 and w2 combined each other's 32 MiB right, pod-1's veth carried $4 B (>= $N): tcp"
else
    fail "across the pods: w1 and w2 combined each other's arrays over tcp" "cross: ${*:-missing}"
fi

# lanes of every open comm (ucx_cxl.dask.comm_lanes: ucp_ep_print_info's
# am/am_bw lanes) by process and the pod of its peer
grep '^lanes' "$SCR/client.log" | sed 's/^/# /'
lanes_ok() {   # lanes_ok PROC POD WANT(cxl|tcp): a comm there, each one WANT only
    local l
    l=$(awk -v p="$1" -v q="$2" '$1 == "lanes" && $2 == p && $3 == q { print $5 }' "$SCR/client.log")
    [ -n "$l" ] || return 1
    if [ "$3" = cxl ]; then
        ! grep -qv '^cxl/[^,]*$' <<<"$l"
    else
        ! grep -q 'cxl/' <<<"$l" && ! grep -qv 'tcp/' <<<"$l"
    fi
}
for c in "scheduler pod-1 cxl" "scheduler pod-2 tcp" "w1 pod-1 cxl" "w1 pod-2 tcp" "w2 pod-1 tcp"; do
    set -- $c
    if lanes_ok "$1" "$2" "$3"; then
        ok "lanes: $1's comms with $2 use $3 only"
    else
        fail "lanes: $1's comms with $2 use $3 only" "$(grep "^lanes $1 $2 " "$SCR/client.log" | tr '\n' ';')"
    fi
done
# and UCX's own configuration lines (UCX_LOG_LEVEL=info, ep_cfg[N]: ...)
for p in scheduler w1 w2; do
    echo "# $p ep_cfg: $(grep -oE 'ep_cfg\[[0-9]+\]: .*' "$SCR/$p.log" | sort -u | tr '\n' ';')"
done
if grep -qE 'ep_cfg\[[0-9]+\]: am\(cxl/' "$SCR/w1.log" && grep -qE 'ep_cfg\[[0-9]+\]: am\(cxl/' "$SCR/scheduler.log" &&
   grep -q 'ep_cfg' "$SCR/w2.log" && ! grep -E 'ep_cfg' "$SCR/w2.log" | grep -q 'cxl/'; then
    ok "ep_cfg lines: cxl in pod-1's scheduler and w1, none in pod-2's w2"
else
    fail "ep_cfg lines: cxl in pod-1, none in pod-2" "see the lines above"
fi
for p in scheduler w1 w2; do
    if grep -E 'UCX +(ERROR|FATAL)|Traceback' "$SCR/$p.log" >"$SCR/$p.err"; then
        fail "$p: no UCX error or traceback in its log" "$(head -n 5 "$SCR/$p.err" | tr '\n' ' ')"
    else
        ok "$p: no UCX error or traceback in its log"
    fi
done
finish
