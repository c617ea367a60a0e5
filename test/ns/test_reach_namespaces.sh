#!/usr/bin/env bash
#
# Reachability is pool identity, not host identity: a process in its own
# UTS and IPC namespaces (another hostname, other SysV/POSIX IPC) reaches a
# peer over UCX_TLS=cxl when both map the same pool, while UCX_TLS=posix
# between the same two processes is unreachable, and cxl with different
# pools is unreachable too.  Needs unshare(1) and CAP_SYS_ADMIN; where the
# kernel refuses the namespaces the test says so and is skipped (exit 77).
set -u
BUILD=${CXL_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)/build-release}
MODULE=${CXL_UCT_MODULE:-$BUILD/.libs/libuct_cxl.so}
CXLPOOL=${CXLPOOL_BIN:-$BUILD/cxlpool}
A=/dev/shm/cxl-ns-a-$$.pool
B=/dev/shm/cxl-ns-b-$$.pool
pass=0 fail=0
trap 'rm -f "$A" "$B"' EXIT

if ! unshare --uts --ipc true 2>/dev/null; then
    echo "SKIP: the kernel refuses new UTS/IPC namespaces here (unshare --uts --ipc)"
    exit 77
fi
"$CXLPOOL" create "$A" --size 128M >/dev/null && "$CXLPOOL" create "$B" --size 128M >/dev/null ||
    { echo "FAIL: cannot create pools"; exit 1; }

# listening PORT: whether a socket listens on the TCP port (the server's
# namespaces share our network namespace)
listening() {
    local hex
    hex=$(printf ':%04X' "$1")
    awk -v p="$hex" 'NR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p { f = 1 }
                     END { exit !f }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# pair NAME EXPECT(ok|unreachable) TLS SERVER_POOL CLIENT_POOL
pair() {
    local name=$1 expect=$2 tls=$3 spool=$4 cpool=$5 port=$((30000 + RANDOM % 20000)) out got
    unshare --uts --ipc sh -c "hostname pod-b; exec env LD_PRELOAD=$MODULE UCX_TLS=$tls \
        UCX_CXL_POOL=$spool timeout 20 ucx_perftest -p $port -c 0 -t tag_lat -n 1000" \
        >/dev/null 2>&1 &
    # (a fixed 1 s was too short while CI loaded both cores: "connect()
    # failed: Connection refused")
    for _ in $(seq 1 200); do
        listening "$port" && break
        sleep 0.05
    done
    out=$(LD_PRELOAD=$MODULE UCX_TLS=$tls UCX_CXL_POOL=$cpool timeout 20 \
          ucx_perftest 127.0.0.1 -p "$port" -c 1 -t tag_lat -n 1000 2>&1)
    wait
    if echo "$out" | grep -q '^Final:'; then got=ok
    elif echo "$out" | grep -q 'unreachable'; then got=unreachable
    else got=error; fi
    if [ "$got" = "$expect" ]; then
        echo "ok: $name ($got)"; pass=$((pass + 1))
    else
        echo "FAIL: $name: expected $expect, got $got"; echo "$out" | tail -3; fail=$((fail + 1))
    fi
}

pair "cxl, same pool, other UTS+IPC namespace" ok cxl "$A" "$A"
pair "posix, other UTS+IPC namespace" unreachable posix "$A" "$A"
pair "cxl, different pools" unreachable cxl "$A" "$B"
echo "ns: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
