#!/usr/bin/env bash
#
# Runs ucp_cxl_test over the "cxl" transport through UCP:
#   1. loopback                 one process, an endpoint to its own worker
#   2. server + client          two processes, worker addresses over TCP
#   3. peer-failure             the program forks a server, kills it with
#                               SIGKILL, expects the error handler; then
#                               'cxlpool check' must see the dead attachment,
#                               'check --repair' reclaim it, 'check' pass
#
# Every program run gets UCX_TLS=cxl (nothing else), the module preloaded and
# its own pool file, created and destroyed here, and runs under a watchdog
# (timeout 120).  Other settings, documented:
#   UCX_ALLOC_PRIO=md:cxl,huge,thp,mmap,heap  ucp_mem_map(ALLOCATE) memory
#                                             comes from the pool (checked
#                                             against /proc/self/maps)
#   UCX_KEEPALIVE_INTERVAL=1s                 peer-failure only: how soon UCP
#                                             checks the peer (default 20s)
#
# Environment:
#   CXLPOOL_BIN      cxlpool                (default: ../../build/cxlpool)
#   CXL_UCT_MODULE   libuct_cxl.so          (default: .libs/libuct_cxl.so next to
#                    CXLPOOL_BIN when that is set, else
#                    ../../build/.libs/libuct_cxl.so); a module that links
#                    libasan gets the ASan runtime preloaded before it
#   UCP_CXL_TEST     the test program       (default: test/ucp/ucp_cxl_test under
#                    the current directory (make check), next to this script,
#                    or ../../build/test/ucp/; else it is compiled into a
#                    temporary directory with gcc ... -lucp -lucs)
#   CXL_TEST_COHERENCE  hw (default) or sw.  sw: the same tests in software-
#                    coherent mode on the strict non-coherent pool emulator
#                    (doc/design/sw-coherence.md): every pool is created with
#                    --coherence sw (1 GiB, 8 host partitions), every program
#                    gets UCX_CXL_POOL=emulate-nc:POOL and
#                    UCX_CXL_COHERENCE=sw and no UCX_CXL_HOST_INDEX, so each
#                    process is an emulated host of its own and all traffic
#                    between processes crosses emulated hosts.  The cxlpool
#                    checks open the pool the same way (an emulated host of
#                    their own, seeing only what the programs wrote back).
#                    Adapted in sw mode: after the peer-failure kill,
#                    'check --repair' runs as the dead process's host
#                    (--host-index K, K its attachment's host_partition from
#                    'cxlpool info --json'), since a process may repair only
#                    its own partition; after clean exits no view
#                    (POOL.host<k>) may be left.
#
# Prints every program's output, then "ucp-tests: N passed, N failed"
# ("ucp-tests-sw: ..." in sw mode): the sum of the programs' "ucp: N passed,
# N failed" lines plus this script's own checks (pool state, exit codes).
# Exit status 0 only when nothing failed.

set -u

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$SCRIPT_DIR/../.." && pwd)
# cxlpool, the module, what to preload; results and pool files
. "$TOP/test/helpers/ucx-module.sh"
WATCHDOG=120
ALLOC_PRIO=md:cxl,huge,thp,mmap,heap
KEEPALIVE=1s
COHERENCE=${CXL_TEST_COHERENCE:-hw}
case "$COHERENCE" in
    hw) NAME=ucp-tests; POOL_SIZE=256M; CREATE_OPTS=() ;;
    # every emulated host gets 1/8 of the heap; an interface's receive
    # block alone is ~8.4 MiB
    sw) NAME=ucp-tests-sw; POOL_SIZE=1G; CREATE_OPTS=(--coherence sw) ;;
    *)  echo "run-ucp-tests.sh: CXL_TEST_COHERENCE must be hw or sw, not '$COHERENCE'" >&2
        exit 99 ;;
esac

cxl_ucx_setup run-ucp-tests.sh "$TOP"

SCR=$(mktemp -d "${TMPDIR:-/tmp}/ucp-cxl-test.XXXXXX") || exit 99
POOLPFX=/dev/shm/ucpt-$$
BG_PIDS=()

cleanup() {
    local pid
    # TERM first: timeout(1) passes it on to the program
    for pid in "${BG_PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null
    done
    sleep 0.2
    for pid in "${BG_PIDS[@]}"; do
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    rm -f "$POOLPFX"-*.pool "$POOLPFX"-*.pool.host*
    rm -rf "$SCR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the program ----
PROG=${UCP_CXL_TEST:-}
if [ -z "$PROG" ]; then
    for cand in "$PWD/test/ucp/ucp_cxl_test" "$SCRIPT_DIR/ucp_cxl_test" \
                "$TOP/build/test/ucp/ucp_cxl_test"; do
        if [ -x "$cand" ]; then
            PROG=$cand
            break
        fi
    done
fi
if [ -z "$PROG" ]; then
    PROG=$SCR/ucp_cxl_test
    if ! gcc -Wall -Wextra -Werror -o "$PROG" "$SCRIPT_DIR/ucp_cxl_test.c" \
            -lucp -lucs; then
        echo "run-ucp-tests.sh: cannot build $SCRIPT_DIR/ucp_cxl_test.c" >&2
        exit 99
    fi
fi
if [ ! -x "$PROG" ]; then
    echo "run-ucp-tests.sh: test program '$PROG' not found" >&2
    exit 99
fi

# launch POOL ARGS...: the program under the watchdog, with UCX_TLS=cxl,
# the module preloaded and its pool; EXTRA_ENV adds settings
EXTRA_ENV=()
COH_ENV=()
[ "$COHERENCE" = sw ] && COH_ENV=(-u UCX_CXL_HOST_INDEX UCX_CXL_COHERENCE=sw)
launch() {
    local pool=$1
    shift
    env ${COH_ENV[@]+"${COH_ENV[@]}"} \
        "LD_PRELOAD=$PRELOAD${LD_PRELOAD:+:$LD_PRELOAD}" \
        UCX_TLS=cxl \
        "UCX_CXL_POOL=$(spec "$pool")" \
        "UCX_ALLOC_PRIO=$ALLOC_PRIO" \
        ${EXTRA_ENV[@]+"${EXTRA_ENV[@]}"} \
        timeout -k 5 "$WATCHDOG" "$PROG" "$@"
}

echo "# program: $PROG"
echo "# module:  $MODULE"
echo "# preload: $PRELOAD"
echo "# cxlpool: $CXL"
echo "# coherence: $COHERENCE$([ "$COHERENCE" = sw ] && echo ' (emulate-nc pools, each process its own emulated host)')"

# ---- 1. loopback ----
if POOL=$(make_pool lb); then
    launch "$POOL" loopback >"$SCR/lb.out" 2>&1
    rc=$?
    show "loopback" "$SCR/lb.out"
    count "$SCR/lb.out" $rc "loopback"
    pool_clean "loopback" "$POOL"
    destroy_pool "$POOL"
fi

# ---- 2. server + client over TCP on 127.0.0.1 ----
if POOL=$(make_pool cs); then
    launch "$POOL" server 0 >"$SCR/srv.out" 2>&1 &
    SRV=$!
    BG_PIDS+=("$SRV")
    PORT=
    for _ in $(seq 1 200); do
        PORT=$(sed -n 's/^# listening on port \([0-9][0-9]*\)$/\1/p' "$SCR/srv.out")
        [ -n "$PORT" ] && break
        kill -0 "$SRV" 2>/dev/null || break
        sleep 0.05
    done
    if [ -z "$PORT" ]; then
        fail "client/server" "the server did not report its port"
        kill -TERM "$SRV" 2>/dev/null
        wait "$SRV" 2>/dev/null
        show "server" "$SCR/srv.out"
        count "$SCR/srv.out" 1 "server"
    else
        launch "$POOL" client 127.0.0.1 "$PORT" >"$SCR/cli.out" 2>&1
        crc=$?
        wait "$SRV"
        src=$?
        show "server" "$SCR/srv.out"
        show "client" "$SCR/cli.out"
        count "$SCR/srv.out" $src "server"
        count "$SCR/cli.out" $crc "client"
    fi
    BG_PIDS=()
    pool_clean "client/server" "$POOL"
    destroy_pool "$POOL"
fi

# ---- 3. peer failure, then recovery of the dead peer's pool state ----
if POOL=$(make_pool pf); then
    EXTRA_ENV=("UCX_KEEPALIVE_INTERVAL=$KEEPALIVE")
    launch "$POOL" peer-failure >"$SCR/pf.out" 2>&1
    rc=$?
    EXTRA_ENV=()
    show "peer-failure" "$SCR/pf.out"
    count "$SCR/pf.out" $rc "peer-failure"

    out=$SCR/check.out
    "$CXL" check "$(spec "$POOL")" >"$out" 2>&1
    rc=$?
    show "cxlpool check (after the kill)" "$out"
    dead=$(sed -n 's/.* \([0-9][0-9]*\) dead attachment(s).*/\1/p' "$out")
    dext=$(sed -n 's/.* \([0-9][0-9]*\) extent(s) ([0-9]* bytes) held by dead owners.*/\1/p' "$out")
    if [ "$rc" = 1 ] && [ "${dead:-0}" -ge 1 ] && [ "${dext:-0}" -ge 1 ]; then
        ok "peer-failure: check reports the dead attachment ($dead) and its extents ($dext)"
    else
        fail "peer-failure: check reports the dead attachment" \
             "exit $rc (expected 1), ${dead:-?} dead attachment(s), ${dext:-?} dead extent(s)"
    fi

    repair_args peer-failure "$POOL"
    "$CXL" check --repair ${REPAIR[@]+"${REPAIR[@]}"} "$(spec "$POOL")" >"$out" 2>&1
    rc=$?
    show "cxlpool check --repair ${REPAIR[*]:-}" "$out"
    if [ "$rc" = 0 ] && grep -q 'reclaimed' "$out"; then
        ok "peer-failure: check --repair reclaims"
    else
        fail "peer-failure: check --repair reclaims" "exit $rc: $(tr '\n' ' ' <"$out")"
    fi

    "$CXL" check "$(spec "$POOL")" >"$out" 2>&1
    rc=$?
    show "cxlpool check (after the repair)" "$out"
    if [ "$rc" = 0 ] && grep -q ' 0 dead attachment(s)' "$out"; then
        ok "peer-failure: check clean after the repair"
    else
        fail "peer-failure: check clean after the repair" "exit $rc: $(tr '\n' ' ' <"$out")"
    fi
    pool_clean "peer-failure (repaired)" "$POOL"
    destroy_pool "$POOL"
fi

# ---- 4. regression: a receive channel handed back before the receiver
#      polled it used to hide every channel above it ----
if POOL=$(make_pool cg); then
    launch "$POOL" channel-gap >"$SCR/cg.out" 2>&1
    rc=$?
    show "channel-gap" "$SCR/cg.out"
    count "$SCR/cg.out" $rc "channel-gap"
    destroy_pool "$POOL"
fi

echo "$NAME: $PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
