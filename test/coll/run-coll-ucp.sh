#!/usr/bin/env bash
#
# run-coll-ucp.sh - collectives bootstrapped over UCP, as a program without
# MPI does it: N separate processes of test/coll/coll_ucp_test, launched
# here, each with UCX_TLS=cxl and the module preloaded, meet through the
# TCP rendezvous of cxl_coll_ucp_bootstrap() at rank 0 (127.0.0.1, a port
# rank 0 picks and prints), create a team with the UCP out-of-band
# allgather and run the nine collectives with checked results.
#   1. N = 1, 2, 3, 4: every collective, checked; then the pool is clean
#      (N = 1 first checks the helper's answers to bad arguments)
#   2. three ranks, rank 2's team on another pool (CXL_COLL_POOL): every
#      rank fails with CXL_COLL_ERR_NOT_SAME_POOL
#   3. rank 2 of 3 never starts: ranks 0 and 1 fail the bootstrap within
#      the timeout (--timeout 3)
#      3b. rank 2 of 3 sends its hello and is stopped (SIGSTOP) before
#      the check allgather, rank 1 comes 2 s later: rank 0 fails within
#      the timeout (4 s) plus 1.5 s of its start, not rendezvous + timeout
#   4. rank 0 never starts: rank 1 fails the bootstrap within the timeout;
#      4b. rank 0's address drops SYNs (a listener with a full backlog):
#      rank 1 fails within 10 s of a 2 s timeout
#      4c. a client connects to rank 0 before rank 1 and sends nothing:
#      rank 0 drops it after a second and the job runs (--timeout 5)
#   5. rank 1 says the job has 3 ranks, rank 0 says 2: both fail
#   6. rank 2 of 3 bootstraps and dies (_exit) before team creation: ranks
#      0 and 1 fail team creation instead of hanging (--timeout 5)
#   7. rank 2 of 3 bootstraps and stalls (alive, never calls the team
#      creation): ranks 0 and 1 fail team creation at the timeout (5 s)
#   7b. a late message: rank 0's allgather times out without rank 1,
#      whose block comes later; both bootstrap again on the same worker
#      and prefix (--late), and the new object's allgather must get rank
#      1's new block (it got the late one, as success)
#   8. (sw only) CXL_COLL_TEST_SKIP_WB=y on 2 ranks: the checks must
#      see wrong results (the test can fail)
# CXL_TEST_COHERENCE=sw: the same in software-coherent mode on the strict
# non-coherent pool emulator: pools --coherence sw (1 GiB), every process
# gets UCX_CXL_POOL=emulate-nc:POOL, UCX_CXL_COHERENCE=sw and no
# UCX_CXL_HOST_INDEX, so each is an emulated host of its own; prints
# "coll-ucp-sw: N passed, N failed".
# Every process runs under a watchdog (timeout 120): a hang is a failure.
#
# Usage: run-coll-ucp.sh               the tests (make check)
#        run-coll-ucp.sh --demo [N]    the demo: N ranks (default 2) print
#                                      per collective what ran and its
#                                      average latency at 8 B, 256 B, 4 KiB, 256 KiB
# Environment: CXL_BUILDDIR (default: TOP/build-release), CXLPOOL_BIN and
# CXL_UCT_MODULE (default: in CXL_BUILDDIR), COLL_UCP_TEST (default:
# CXL_BUILDDIR/test/coll/coll_ucp_test).
#
# Prints every process's output, then "coll-ucp: N passed, N failed": the
# sum of the ranks' "coll-ucp rank R: N passed, N failed" lines plus this
# script's own checks (exit codes, pool state).  Exit status 0 only when
# nothing failed.

set -u

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$SCRIPT_DIR/../.." && pwd)
MODE=test
NDEMO=2
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
    --demo) MODE=demo; NDEMO=${2:-2} ;;
    "") ;;
    *) echo "run-coll-ucp.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac
case "$NDEMO" in
    [1-9]|1[0-6]) ;;
    *) echo "run-coll-ucp.sh: --demo N: 1 to 16 ranks, not '$NDEMO'" >&2; exit 2 ;;
esac

BUILD=${CXL_BUILDDIR:-$TOP/build-release}
export CXLPOOL_BIN=${CXLPOOL_BIN:-$BUILD/cxlpool}
export CXL_UCT_MODULE=${CXL_UCT_MODULE:-$BUILD/.libs/libuct_cxl.so}
. "$TOP/test/helpers/ucx-module.sh"
cxl_ucx_setup run-coll-ucp.sh "$TOP"
PROG=${COLL_UCP_TEST:-$BUILD/test/coll/coll_ucp_test}
if [ ! -x "$PROG" ]; then
    echo "run-coll-ucp.sh: test program '$PROG' not found (make check builds it)" >&2
    exit 99
fi

WATCHDOG=120
COHERENCE=${CXL_TEST_COHERENCE:-hw}
COH_ENV=()
case "$COHERENCE" in
    hw) NAME=coll-ucp; POOL_SIZE=256M; CREATE_OPTS=() ;;
    # each emulated host gets 1/8 of the heap (a transport interface ~8.4
    # MiB, a team partition 4 MiB)
    sw) NAME=coll-ucp-sw; POOL_SIZE=1G; CREATE_OPTS=(--coherence sw)
        COH_ENV=(-u UCX_CXL_HOST_INDEX UCX_CXL_COHERENCE=sw) ;;
    *)  echo "run-coll-ucp.sh: CXL_TEST_COHERENCE must be hw or sw, not '$COHERENCE'" >&2
        exit 99 ;;
esac
SUMMARY_LABEL='coll-ucp rank [0-9]+'
SCR=$(mktemp -d "${TMPDIR:-/tmp}/coll-ucp.XXXXXX") || exit 99
POOLPFX=/dev/shm/collucp-$$
BG_PIDS=()

cleanup() {
    local pid
    for pid in "${BG_PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null
    done
    for pid in "${BG_PIDS[@]}"; do
        wait "$pid" 2>/dev/null
    done
    rm -f "$POOLPFX"-*.pool "$POOLPFX"-*.pool.host*
    rm -rf "$SCR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# launch OUT [VAR=VALUE...] -- ARGS...: one rank in the background (its pid
# is appended to BG_PIDS) on the pool $POOL
launch() {
    local out=$1 envs=()
    shift
    while [ "$1" != -- ]; do
        envs+=("$1")
        shift
    done
    shift
    env ${COH_ENV[@]+"${COH_ENV[@]}"} \
        "LD_PRELOAD=$PRELOAD${LD_PRELOAD:+:$LD_PRELOAD}" UCX_TLS=cxl \
        "UCX_CXL_POOL=$(spec "$POOL")" ${envs[@]+"${envs[@]}"} \
        timeout -k 5 "$WATCHDOG" "$PROG" "$@" >"$out" 2>&1 &
    BG_PIDS+=($!)
}

# job NAME SIZE "RANKS" ARGS...: start the listed ranks of a job of SIZE
# (rank 0 first, the others once it printed its port; without rank 0 they
# get RDV), wait for all, show and count each.  RENV[r]: an extra
# VAR=VALUE for rank r; RARGS[r]: extra arguments; AFTER_ROOT: a command
# run with rank 0's port before the others start.
declare -A RENV RARGS
RDV=
AFTER_ROOT=
QUIET=0          # 1: show rank 0's output, the others' only on failure
EXPECT_WRONG=0   # 1: the ranks must report wrong results (expect_wrong)
job() {
    local name=$1 size=$2 ranks=$3 r port= rdv=$RDV out rc
    shift 3
    BG_PIDS=()
    for r in $ranks; do
        out=$SCR/$name.$r.out
        if [ "$r" = 0 ]; then
            launch "$out" ${RENV[0]:-} -- --rank 0 --size "$size" \
                --rendezvous 127.0.0.1:0 "$@" ${RARGS[0]:-}
            if [ "$size" -gt 1 ]; then
                for _ in $(seq 1 400); do
                    port=$(sed -n 's/^# rendezvous port \([0-9][0-9]*\)$/\1/p' \
                           "$out" 2>/dev/null)
                    [ -n "$port" ] && break
                    kill -0 "${BG_PIDS[0]}" 2>/dev/null || break
                    sleep 0.05
                done
                [ -z "$port" ] && fail "$name" "rank 0 did not print its port"
                rdv=127.0.0.1:${port:-1}
                [ -n "$AFTER_ROOT" ] && $AFTER_ROOT "${port:-1}"
            fi
        else
            launch "$out" ${RENV[$r]:-} -- --rank "$r" --size "$size" \
                --rendezvous "$rdv" "$@" ${RARGS[$r]:-}
        fi
    done
    set -- $ranks
    for r in "${BG_PIDS[@]}"; do
        wait "$r"
        rc=$?
        out=$SCR/$name.$1.out
        if [ "$QUIET" = 0 ] || [ "$1" = 0 ] || [ $rc != 0 ]; then
            show "$name rank $1" "$out"
        fi
        if [ "$EXPECT_WRONG" = 1 ]; then
            expect_wrong "$name rank $1" "$out" $rc
        else
            count "$out" $rc "$name rank $1"
        fi
        shift
    done
    BG_PIDS=()
    RENV=()
    RARGS=()
    RDV=
    AFTER_ROOT=
    EXPECT_WRONG=0
}

# expect_wrong NAME OUT RC: a rank that had to see wrong results did, and
# said so (FAIL lines, a summary with failures), without being killed
expect_wrong() {
    local name=$1 out=$2 rc=$3 nbad
    nbad=$(grep -cE '^FAIL rank [0-9]+: .* is 0x[0-9a-f]+, expected' "$out")
    if [ "$rc" = 1 ] && [ "$nbad" -gt 0 ] &&
       grep -qE "^${SUMMARY_LABEL}: [0-9]+ passed, [1-9][0-9]* failed\$" "$out"; then
        ok "$name: $nbad wrong result(s) seen, as they must be"
    else
        fail "$name" "expected wrong results and exit status 1, got $nbad and $rc"
    fi
}

echo "# program: $PROG"
echo "# module:  $MODULE"
echo "# cxlpool: $CXL"
echo "# coherence: $COHERENCE$([ "$COHERENCE" = sw ] && echo ' (emulate-nc pools, each process its own emulated host)')"

if [ "$MODE" = demo ]; then
    POOL=$(make_pool demo) || exit 1
    QUIET=1
    job demo "$NDEMO" "$(seq -s ' ' 0 $((NDEMO - 1)))" --demo
    destroy_pool "$POOL"
    echo "coll-ucp-demo: $PASS passed, $FAIL failed"
    [ "$FAIL" = 0 ]
    exit
fi

# ---- 1. N = 1..4, every collective ----
for n in 1 2 3 4; do
    POOL=$(make_pool "n$n") || continue
    mkdir -p "$SCR/markers-$n"
    [ "$n" = 1 ] && RARGS[0]=--bad-input
    job "np$n" "$n" "$(seq -s ' ' 0 $((n - 1)))" --scratch "$SCR/markers-$n"
    pool_clean "np$n" "$POOL"
    destroy_pool "$POOL"
done

# ---- 2. one rank's team on another pool ----
if POOL=$(make_pool sp) && OTHER=$(make_pool sp-other); then
    RENV[2]=CXL_COLL_POOL=$(spec "$OTHER")
    job not-same-pool 3 "0 1 2" --expect not-same-pool
    pool_clean "not-same-pool" "$POOL"
    pool_clean "not-same-pool (the other pool)" "$OTHER"
    destroy_pool "$POOL"
    destroy_pool "$OTHER"
fi

# ---- 3. rank 2 of 3 never starts ----
if POOL=$(make_pool m2); then
    job missing-rank 3 "0 1" --timeout 3 --expect bootstrap-fail
    pool_clean "missing-rank" "$POOL"
    destroy_pool "$POOL"
fi

# ---- 3b. rank 2 of 3 stops after its hello ----
# the check allgather got a timeout of its own: rendezvous + 4 s
# hello_then_stop PORT: rank 2 connects and sends its hello, is stopped,
# and rank 1 starts 2 s later
hello_then_stop() {
    local hex i
    launch "$SCR/stopped.2.out" -- --rank 2 --size 3 \
        --rendezvous "127.0.0.1:$1" --timeout 4 --expect bootstrap-fail
    STOP_PID=${BG_PIDS[-1]}
    unset 'BG_PIDS[-1]'
    hex=$(printf '%04X' "$1")
    for i in $(seq 1 100); do   # its connection, established (state 01)
        awk -v p=":$hex" '$3 ~ p"$" && $4 == "01" {f=1} END {exit !f}' \
            /proc/net/tcp && break
        sleep 0.05
    done
    sleep 0.5                   # the hello follows the connect at once
    pkill -STOP -P "$STOP_PID"
    sleep 2
}
if POOL=$(make_pool ck); then
    AFTER_ROOT=hello_then_stop
    job stopped-rank 3 "0 1" --timeout 4 --expect bootstrap-fail
    pkill -CONT -P "$STOP_PID"
    wait "$STOP_PID"
    count "$SCR/stopped.2.out" $? "stopped-rank rank 2 (stopped)"
    # rank 0's own clock: it waited ~2.5 s of it for rank 1
    secs=$(sed -n 's/.*bootstrap fails: .* after \([0-9.]*\) s.*/\1/p' \
           "$SCR/stopped-rank.0.out" | head -n1)
    if [ -n "$secs" ] && awk -v s="$secs" 'BEGIN {exit !(s <= 5.5)}'; then
        ok "stopped-rank: rank 0 gave up after $secs s of its own (timeout 4 s, rank 1 came after about 2.5 s)"
    else
        fail "stopped-rank" "rank 0 gave up after ${secs:-?} s against a timeout of 4 s"
    fi
    pool_clean "stopped-rank" "$POOL"
    destroy_pool "$POOL"
fi

# ---- 4. rank 0 never starts (nobody listens on port 1) ----
if POOL=$(make_pool m0); then
    RDV=127.0.0.1:1
    job missing-root 2 "1" --timeout 3 --expect bootstrap-fail
    pool_clean "missing-root" "$POOL"
    destroy_pool "$POOL"
fi

# ---- 4b. rank 0's address drops SYNs (a full backlog, as a firewall) ----
# connect() blocked without the bootstrap's deadline: ~127 s, the kernel's
SYN_PY='import socket, sys, time
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(0)
c = socket.create_connection(l.getsockname())
print(l.getsockname()[1], flush=True)
time.sleep(60)'
if POOL=$(make_pool syn) && command -v /usr/bin/python3 >/dev/null; then
    /usr/bin/python3 -c "$SYN_PY" >"$SCR/syn.port" 2>&1 &
    SYN_PID=$!
    for _ in $(seq 1 100); do
        [ -s "$SCR/syn.port" ] && break
        sleep 0.05
    done
    RDV=127.0.0.1:$(head -n1 "$SCR/syn.port")
    t0=$(date +%s)
    job syn-drop 2 "1" --timeout 2 --expect bootstrap-fail
    t1=$(date +%s)
    if [ $((t1 - t0)) -le 10 ]; then
        ok "syn-drop: rank 1 gave up the bootstrap after $((t1 - t0)) s (timeout 2 s)"
    else
        fail "syn-drop" "rank 1 took $((t1 - t0)) s against a timeout of 2 s"
    fi
    kill "$SYN_PID" 2>/dev/null
    wait "$SYN_PID" 2>/dev/null
    pool_clean "syn-drop" "$POOL"
    destroy_pool "$POOL"
fi

# ---- 4c. a silent client at rank 0's port, ahead of rank 1 ----
# rank 0 read its hello until the bootstrap's deadline, then blamed rank 1
SILENT_PY='import socket, sys, time
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
print("connected", flush=True)
time.sleep(60)'
silent_client() {
    /usr/bin/python3 -c "$SILENT_PY" "$1" >"$SCR/silent.out" 2>&1 &
    SILENT_PID=$!
    for _ in $(seq 1 100); do
        grep -q connected "$SCR/silent.out" 2>/dev/null && break
        sleep 0.05
    done
}
if POOL=$(make_pool sc) && command -v /usr/bin/python3 >/dev/null; then
    AFTER_ROOT=silent_client
    t0=$(date +%s)
    job silent-client 2 "0 1" --timeout 5
    t1=$(date +%s)
    # the job's ranks passed (counted above) only if rank 0 dropped it
    if grep -q connected "$SCR/silent.out"; then
        ok "silent-client: the client was connected ahead of rank 1; the job took $((t1 - t0)) s (timeout 5 s)"
    else
        fail "silent-client" "the client did not connect: $(head -n1 "$SCR/silent.out" 2>/dev/null)"
    fi
    kill "$SILENT_PID" 2>/dev/null
    wait "$SILENT_PID" 2>/dev/null
    pool_clean "silent-client" "$POOL"
    destroy_pool "$POOL"
fi

# ---- 5. the ranks disagree on the size ----
if POOL=$(make_pool sz); then
    RARGS[1]="--size 3"
    job size-mismatch 2 "0 1" --timeout 10 --expect bootstrap-fail
    pool_clean "size-mismatch" "$POOL"
    destroy_pool "$POOL"
fi

# ---- 6. a rank dies between bootstrap and team creation ----
if POOL=$(make_pool lv); then
    RARGS[2]="--leave"
    RARGS[0]="--expect team-fail"
    RARGS[1]="--expect team-fail"
    job rank-dies 3 "0 1 2" --timeout 5
    # the dead rank's transport attachment stays behind (reclaimed here);
    # the others' teams must not
    repair_args rank-dies "$POOL"
    "$CXL" check --repair ${REPAIR[@]+"${REPAIR[@]}"} "$(spec "$POOL")" \
        >"$SCR/repair.out" 2>&1
    show "cxlpool check --repair ${REPAIR[*]:-}" "$SCR/repair.out"
    pool_clean "rank-dies (after check --repair)" "$POOL"
    destroy_pool "$POOL"
fi

# ---- 7. a rank stays alive but never calls team creation ----
if POOL=$(make_pool st); then
    RARGS[2]="--stall 8"
    RARGS[0]="--expect team-fail"
    RARGS[1]="--expect team-fail"
    job rank-stalls 3 "0 1 2" --timeout 5
    pool_clean "rank-stalls" "$POOL"
    destroy_pool "$POOL"
fi

# ---- 7b. a late message of a failed call, then a new object ----
if POOL=$(make_pool lt) && command -v /usr/bin/python3 >/dev/null; then
    P2=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    RARGS[0]="--late 127.0.0.1:$P2"
    RARGS[1]="--late 127.0.0.1:$P2"
    job late-message 2 "0 1" --timeout 3
    pool_clean "late-message" "$POOL"
    destroy_pool "$POOL"
fi

# ---- 8. sw mode: without the write-back of published data
#      (CXL_COLL_TEST_SKIP_WB=y, test only) readers on other emulated
#      hosts see stale memory, and the checks of this program must say so ----
if [ "$COHERENCE" = sw ] && POOL=$(make_pool wb); then
    RENV[0]=CXL_COLL_TEST_SKIP_WB=y
    RENV[1]=CXL_COLL_TEST_SKIP_WB=y
    EXPECT_WRONG=1
    job skip-wb 2 "0 1" --iters 1
    destroy_pool "$POOL"
fi

echo "$NAME: $PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
