#!/usr/bin/env bash
#
# run-mpi-single-host.sh - the README's recommended Open MPI line for ranks on
# one host, UCX_TLS=cxl,cma with UCX_CXL_RKEY_PTR=yes, does what the README
# says:
#
#   1. mpi_cxl_test (test/mpi, every byte checked; point-to-point 1 B ..
#      4 MiB from malloc'd buffers, collectives, MPI_Win_allocate windows in
#      the pool) passes on MPI_NP ranks with exactly that line
#      (--tune contrib/openmpi-cxl.conf, LD_PRELOAD of the module,
#      UCX_TLS=cxl,cma, UCX_CXL_RKEY_PTR=yes,
#      UCX_ALLOC_PRIO=md:cxl,huge,thp,mmap,heap)
#   2. lanes, from UCX's own UCX_LOG_LEVEL=info "ep_cfg[N]: ..." lines of
#      every rank: pml ucx's tag lanes are cxl and cma ("tag(cxl/DEV
#      cma/memory)": cxl for eager messages, rendezvous control and
#      pool-resident rendezvous, cma as a rendezvous lane for ordinary
#      buffers); osc ucx's rma and amo lanes are cxl alone (window memory
#      is in the pool); no other transport
#   3. ordinary (malloc'd) rendezvous buffers of the MPI job move with one
#      copy, by cma: more than 4 MiB cross between the ranks by
#      process_vm_readv/writev (strace -ff around each rank)
#   4. UCP, the same UCX environment, ucx_perftest tag_bw 1 MiB (server and
#      client, -n 40 -w 4), buffers outside the pool
#      (UCX_ALLOC_PRIO=thp,mmap,heap): cma moves the whole payload
#      (44 MiB), i.e. the data is copied once, by the kernel, and not by
#      UCP's active-message pipeline
#   5. the same with pool-resident buffers (UCX_ALLOC_PRIO=md:cxl,...): no
#      byte goes through cma; UCP's rkey_ptr rendezvous on the cxl lane
#      (`ucx_info -e`: "rkey_ptr" among the cxl lane's roles) copies the
#      data out of the pool.  (Without UCX_CXL_RKEY_PTR=yes UCP 1.13 splits
#      such a rendezvous between cxl's and cma's get_zcopy by bandwidth,
#      about half each, and this check fails.)
#
# Between hosts (pods in their own namespaces) cma does not reach and the
# same line keeps everything on cxl: test/ns/test_ns_pods.sh, checks 9-10.
#
#   test/mpi/run-mpi-single-host.sh [BUILDDIR]
#
#   BUILDDIR   build directory holding .libs/libuct_cxl.so and cxlpool
#              (default: $CXL_BUILDDIR, else build-release/ or build/ at the
#              top of the source tree)
#
# Environment:
#   MPI_NP=2                ranks
#   SINGLE_HOST_TLS=cxl,cma the UCX_TLS under test, and
#   SINGLE_HOST_RKEY_PTR=yes  the UCX_CXL_RKEY_PTR (only to see the checks
#                           fail with others, e.g. cxl, or try)
#
# Needs mpicc/mpirun (Open MPI) and ucx_perftest (ucx-utils); strace for the
# byte counts of 3-5 (without it they are reported as not run; 4 and 5 are
# also not run without ucx_perftest).
# Ends with "single-host: N passed, N failed"; exit 0 only when nothing
# failed, 99 when something needed is missing or the build fails.
set -uo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$SCRIPT_DIR/mpi-common.sh"
mpi_builddir "$0" "$@"

NP=${MPI_NP:-2}
TLS=${SINGLE_HOST_TLS:-cxl,cma}
RKEY_PTR=${SINGLE_HOST_RKEY_PTR:-yes}
MODULE=$BUILD/.libs/libuct_cxl.so
CXLPOOL=$BUILD/cxlpool
CONF=$TOP/contrib/openmpi-cxl.conf
SRC=$SCRIPT_DIR/mpi_cxl_test.c
BIN=$BUILD/test/mpi/mpi_cxl_test
POOL=/dev/shm/ucx-cxl-single-host-$$.pool
DEV=$(basename "$POOL" .pool)
ALLOC_PRIO=md:cxl,huge,thp,mmap,heap
PS=1048576                       # ucx_perftest message size
PN=40 PW=4                       # ucx_perftest iterations, warm-up
PAYLOAD=$(((PN + PW) * PS))

mpi_need "$MODULE" "$CXLPOOL" "$SRC" "$CONF"
HAVE_STRACE=0
command -v strace >/dev/null 2>&1 && HAVE_STRACE=1
HAVE_PERFTEST=0
command -v ucx_perftest >/dev/null 2>&1 && HAVE_PERFTEST=1

SCR=$(mktemp -d "${TMPDIR:-/tmp}/single-host.XXXXXX") || exit 99
SPIDS=()
cleanup() {
    local p
    for p in ${SPIDS[@]+"${SPIDS[@]}"}; do kill -TERM "$p" 2>/dev/null; done
    mpi_pool_destroy "$CXLPOOL" "$POOL" "$POOL"
    rm -rf "$SCR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PASS=0 FAIL=0
ok()   { PASS=$((PASS + 1)); echo "ok $1"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL $1: $2"; }
notrun() { echo "# not run: $1"; }

# vm_bytes FILE...: bytes process_vm_readv/writev moved to or from another
# process, from strace logs ("[PID ]process_vm_readv(TARGET, ...) = N";
# with -ff the caller is the file's .PID suffix); UCX's cma module probes
# by writing a few bytes to the calling process itself, which do not count
vm_bytes() {
    local f
    for f in "$@"; do
        # a call that another thread's event interrupts is split by strace
        # -f into "<unfinished ...>" and "<... resumed> ... = N": its target
        # is on the first line, its result on the second
        awk -v self="${f##*.}" '
            { l = $0; if (l ~ /^[0-9]+ /) { self = $1; sub(/^[0-9]+ +/, "", l) } }
            l ~ /^process_vm_(read|write)v\([0-9]+,/ {
                t = l; sub(/^[^(]*\(/, "", t); sub(/,.*/, "", t)
                if (l ~ /<unfinished \.\.\.>$/) { pend[self] = t; next }
                if ((t != self) && (l ~ / = [0-9]+$/)) { n = split(l, w, " "); b += w[n] }
            }
            l ~ /^<\.\.\. process_vm_(read|write)v resumed>/ && (self in pend) {
                if ((pend[self] != self) && (l ~ / = [0-9]+$/)) { n = split(l, w, " "); b += w[n] }
                delete pend[self]
            } END { print b + 0 }' "$f"
    done | awk '{ s += $1 } END { print s + 0 }'
}

# --- build, pool ----------------------------------------------------------
mpi_build "$SRC" "$BIN"
if ! "$CXLPOOL" create "$POOL" --size 1G >"$SCR/create.out" 2>&1; then
    echo "run-mpi-single-host.sh: cxlpool create $POOL: $(cat "$SCR/create.out")" >&2
    exit 99
fi

# --- 1-3: the MPI job ----------------------------------------------------
CMD=(mpirun -np "$NP" --allow-run-as-root --oversubscribe --tune "$CONF"
     -x "LD_PRELOAD=$MODULE" -x "UCX_TLS=$TLS" -x "UCX_CXL_RKEY_PTR=$RKEY_PTR"
     -x "UCX_ALLOC_PRIO=$ALLOC_PRIO"
     -x "UCX_CXL_POOL=$POOL" -x UCX_LOG_LEVEL=info -x "UCX_LOG_FILE=$SCR/ucx.%p.log")
TRACE=()
[ $HAVE_STRACE = 1 ] &&
    TRACE=(strace -ff -qq -e trace=process_vm_readv,process_vm_writev -o "$SCR/vm")
echo "# mpirun line (the README's, plus UCX_LOG_LEVEL/UCX_LOG_FILE${TRACE[*]:+ and strace}):"
echo "#   $(printf '%q ' "${CMD[@]}" ${TRACE[@]+"${TRACE[@]}"} "$BIN")"
timeout --kill-after=15 600 "${CMD[@]}" ${TRACE[@]+"${TRACE[@]}"} "$BIN" >"$SCR/mpi.out" 2>&1
rc=$?
res=$(grep -E '^mpi: [0-9]+ passed, [0-9]+ failed$' "$SCR/mpi.out" | tail -n 1)
if [ $rc -eq 0 ] && [[ $res =~ ^mpi:\ [1-9][0-9]*\ passed,\ 0\ failed$ ]]; then
    ok "1. mpi_cxl_test with UCX_TLS=$TLS UCX_CXL_RKEY_PTR=$RKEY_PTR on $NP ranks: ${res#mpi: }"
else
    grep -E '^(FAIL|mpi:)' "$SCR/mpi.out" | head -n 10 | sed 's/^/#   /'
    tail -n 5 "$SCR/mpi.out" | sed 's/^/#   /'
    fail "1. mpi_cxl_test with UCX_TLS=$TLS on $NP ranks" "mpirun rc $rc, ${res:-no result line}"
fi

cfg=$(cat "$SCR"/ucx.*.log 2>/dev/null | grep -o 'ep_cfg\[[0-9]*\]: .*' | sort | uniq -c)
echo "# ep_cfg lines of all ranks (UCX_LOG_LEVEL=info):"
echo "$cfg" | sed 's/^/#   /'
why=''
ntag=0 nrma=0
while read -r _ _ l; do
    [ -n "$l" ] || continue
    if grep -q 'tag(' <<<"$l"; then
        ntag=$((ntag + 1))
        grep -qE "tag\\(cxl/$DEV cma/memory\\)" <<<"$l" || why+="tag lanes not 'cxl/$DEV cma/memory': $l; "
    fi
    if grep -q 'rma(' <<<"$l"; then
        nrma=$((nrma + 1))
        grep -qE "rma\\(cxl/$DEV\\) amo\\(cxl/$DEV\\)" <<<"$l" || why+="rma/amo not on cxl alone: $l; "
    fi
    other=$(grep -oE '[a-z_0-9]+/[^ )]+' <<<"$l" | cut -d/ -f1 | sort -u | grep -vxE 'cxl|cma' | tr '\n' ' ')
    [ -z "$other" ] || why+="other transports: $other; "
done <<<"$cfg"
[ $ntag -gt 0 ] || why+="no tag ep_cfg line (pml ucx); "
[ $nrma -gt 0 ] || why+="no rma ep_cfg line (osc ucx); "
if [ -z "$why" ]; then
    ok "2. lanes: pml ucx tag on cxl/$DEV + cma/memory (rendezvous), osc ucx rma/amo on cxl/$DEV alone"
else
    fail "2. lanes" "$why"
fi

if [ $HAVE_STRACE = 0 ]; then
    notrun "3. MPI rendezvous bytes by cma (strace is not installed)"
else
    b=$(vm_bytes "$SCR"/vm.*)
    if [ "$b" -gt 4194304 ]; then
        ok "3. the MPI job's ordinary rendezvous buffers move by cma: $b bytes by process_vm_readv/writev between ranks (> 4194304)"
    else
        fail "3. MPI rendezvous bytes by cma" "$b bytes by process_vm_readv/writev between ranks (needed > 4194304)"
    fi
fi

# --- 4-5: UCP, ucx_perftest ------------------------------------------------
# perf_pair NAME ALLOC_PRIO: a tag_bw pair, both under strace; the bytes cma
# moved in VM, the client's output in $SCR/NAME.cli
perf_pair() {
    local name=$1 ap=$2 port spid i crc
    local envs=(env "LD_PRELOAD=$MODULE" "UCX_TLS=$TLS" "UCX_CXL_POOL=$POOL"
                "UCX_CXL_RKEY_PTR=$RKEY_PTR" "UCX_ALLOC_PRIO=$ap")
    local st=(strace -f -qq -e trace=process_vm_readv,process_vm_writev)
    for ((i = 0; i < 20; ++i)); do
        port=$((20000 + (RANDOM % 30000)))
        "${envs[@]}" timeout -k 5 120 "${st[@]}" -o "$SCR/$name.srv.vm" \
            ucx_perftest -p "$port" -c 0 >"$SCR/$name.srv" 2>&1 &
        spid=$!
        SPIDS=("$spid")
        sleep 0.5
        kill -0 "$spid" 2>/dev/null && break
        wait "$spid" 2>/dev/null
    done
    "${envs[@]}" timeout -k 5 120 "${st[@]}" -o "$SCR/$name.cli.vm" \
        ucx_perftest 127.0.0.1 -p "$port" -c 1 -t tag_bw -s "$PS" -n "$PN" -w "$PW" -f \
        >"$SCR/$name.cli" 2>&1
    crc=$?
    [ $crc -eq 0 ] || kill -TERM "$spid" 2>/dev/null
    wait "$spid" 2>/dev/null
    SPIDS=()
    VM=$(vm_bytes "$SCR/$name.srv.vm" "$SCR/$name.cli.vm")
    PRC=$crc
}
if [ $HAVE_STRACE = 0 ] || [ $HAVE_PERFTEST = 0 ]; then
    why="strace or ucx_perftest is not installed"
    notrun "4. UCP tag_bw, buffers outside the pool: the payload by cma ($why)"
    notrun "5. UCP tag_bw, pool-resident buffers: nothing by cma ($why)"
else
    perf_pair host thp,mmap,heap
    if [ $PRC -eq 0 ] && [ "$VM" -ge $PAYLOAD ]; then
        ok "4. UCP tag_bw 1 MiB, buffers outside the pool: $VM bytes by cma (payload $PAYLOAD): one copy, by the kernel"
    else
        tail -n 3 "$SCR/host.cli" | sed 's/^/#   /'
        fail "4. UCP tag_bw 1 MiB, buffers outside the pool" "client rc $PRC, $VM bytes by cma (needed >= $PAYLOAD)"
    fi
    perf_pair pool "$ALLOC_PRIO"
    keys=$(env "LD_PRELOAD=$MODULE" "UCX_TLS=$TLS" "UCX_CXL_POOL=$POOL" \
               "UCX_CXL_RKEY_PTR=$RKEY_PTR" ucx_info -e -u t 2>&1)
    cxllane=$(grep -E '^# *lane\[[0-9]+\]: *[0-9]+:cxl/' <<<"$keys" | head -n 1 |
              sed -E 's/.*sysdev\[[0-9]+\] *//')
    if [ $PRC -eq 0 ] && [ "$VM" -eq 0 ] && grep -qw rkey_ptr <<<"$cxllane"; then
        ok "5. UCP tag_bw 1 MiB, pool-resident buffers: 0 of $PAYLOAD bytes by cma, all through cxl (cxl lane: $cxllane)"
    else
        tail -n 3 "$SCR/pool.cli" | sed 's/^/#   /'
        fail "5. UCP tag_bw 1 MiB, pool-resident buffers" "client rc $PRC, $VM of $PAYLOAD bytes by cma (needed 0); cxl lane roles: '$cxllane' (needed rkey_ptr)"
    fi
fi

echo "single-host: $PASS passed, $FAIL failed"
[ $FAIL -eq 0 ]
