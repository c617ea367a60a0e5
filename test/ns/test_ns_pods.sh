#!/usr/bin/env bash
#
# Multi-host pods on one machine.  Two "pods" are built from namespaces: each
# has its own network namespace (its own loopback, and one end of a veth pair
# this script creates: pod-1 10.77.0.1/24, pod-2 10.77.0.2/24), its own UTS
# namespace (hostnames pod-1 and pod-2) and its own IPC namespace.  Each pod
# also gets a private mount namespace with a fresh sysfs on /sys, as
# `ip netns exec` does, so that UCX's tcp transport (which lists
# /sys/class/net) sees the pod's interfaces; every other mount, /dev/shm
# included, is the same filesystem, so pool files are shared by path.
#
# Traffic is test/ucp/ucp_cxl_test in server/client mode (its worker
# addresses and keys travel over a TCP socket, across the veth between pods):
# tag, probe, stream, AM, RMA and atomics, content-checked in both
# directions.  Lanes are proven from UCX's own output: with UCX_LOG_LEVEL=info
# UCP 1.13.1 prints, for each endpoint configuration,
#   ucp_worker.c:NNNN UCX  INFO    ep_cfg[0]: tag(cxl/DEV) rma(cxl/DEV) ...
# and ucp_ep_print_info's "lane[N]: ... TL/DEV" lines come out as well.
#
# (a) one pool file shared by both pods (a multi-host pod sharing CXL memory)
#   1. UCX_TLS=cxl between the pods: reachable, traffic flows, lanes cxl,
#      and under 1 MiB crosses the veth (only the test's own socket)
#   2. UCX_TLS=posix between the pods: unreachable (other IPC/UTS namespace)
#   3. UCX_TLS=posix inside one pod: reachable (control for 2)
#   4. UCX_TLS=cxl between pods that map different pools: unreachable
#   9. UCX_TLS=cxl,cma UCX_CXL_RKEY_PTR=yes (the README's single-host line)
#      between the pods:
#      cma does not reach across (its address names the IPC namespace, like
#      posix in 2), so every lane is cxl, none cma; under 1 MiB crosses the
#      veth, and no byte moves between the programs by process_vm_readv/
#      writev (strace)
#  10. the same line inside pod-1 (control for 9): am, tag, rma, amo and
#      stream on cxl, cma as a rendezvous (rma_bw) lane, and the ordinary
#      (malloc'd) rendezvous buffers of the 1 MiB and 4 MiB tag messages
#      move by process_vm_readv (more than 4 MiB, strace)
# (b) each pod maps its own pool (pool A in pod-1, pool B in pod-2),
#     UCX_TLS=cxl,tcp
#   5. inside pod-1 with default settings (UCX_CXL_REG_ANY=y): every lane
#      cxl, none tcp (ep_cfg and lane lines); under 1 MiB over lo
#   6. inside pod-2 with UCX_CXL_REG_ANY=y set: the same with pool B
#   7. pod-1 to pod-2: lanes tcp on the veth devices only (no cxl, not lo);
#      the payload (> 4 MiB) crosses the veth, nothing goes over lo
#   8. inside pod-1 with UCX_CXL_REG_ANY=n: the am lane (eager tag, AM,
#      stream), rma and amo are cxl; the memory domain registers only pool
#      memory, so UCP 1.13 adds tcp lanes, as rendezvous bandwidth
#      (rma_bw) and wireup lanes only, and at least one of them; the
#      rendezvous payload (> 4 MiB) goes over lo
#
# Coherence mode: NS_PODS_COHERENCE (or the first argument) = auto | hw | sw
#   hw    the checks above on ordinary (hardware-coherent) pools
#   sw    checks 1 and 4 on software-coherent pools opened through the
#         non-coherent emulator (UCX_CXL_POOL=emulate-nc:PATH,
#         UCX_CXL_COHERENCE=sw; pod-1 is emulated host 0, pod-2 host 1);
#         skipped (77) when the emulator is not there yet
#   auto  (default) hw, then sw where a probe finds the emulator
#
# Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN), unshare/nsenter (util-linux) and
# ip (iproute2); strace for the byte counts of 9 and 10 (without it those two
# checks are reported as not run).  Where the kernel refuses the namespaces or the veth pair,
# it says so and exits 77 (skipped).  Every program runs under timeout(1);
# pods, veths, pools and files are removed on every exit path.
#
# Environment (set by make check; defaults for a run by hand from the
# source tree: ../../build):
#   CXLPOOL_BIN, CXL_UCT_MODULE, UCP_CXL_TEST
#   NS_PODS_KEEP=1   keep the programs' outputs (the directory is printed)
# Last line: "ns-pods: N passed, N failed"; exit 0 only when nothing failed.

set -u

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$SCRIPT_DIR/../.." && pwd)
CXL=${CXLPOOL_BIN:-$TOP/build/cxlpool}
MODULE=${CXL_UCT_MODULE:-$(dirname "$CXL")/.libs/libuct_cxl.so}
PROG=${UCP_CXL_TEST:-$(dirname "$CXL")/test/ucp/ucp_cxl_test}
MODE=${1:-${NS_PODS_COHERENCE:-auto}}
WATCHDOG=120
NET=10.77.0

case $MODE in
    auto|hw|sw) ;;
    *) echo "test_ns_pods.sh: coherence mode '$MODE': auto, hw or sw" >&2; exit 99 ;;
esac
for f in "$CXL" "$PROG"; do
    [ -x "$f" ] || { echo "test_ns_pods.sh: '$f' not found (build first)" >&2; exit 99; }
done
[ -f "$MODULE" ] || { echo "test_ns_pods.sh: module '$MODULE' not found (build first)" >&2; exit 99; }
for t in unshare nsenter ip timeout; do
    command -v "$t" >/dev/null ||
        { echo "test_ns_pods.sh: '$t' not installed (util-linux, iproute2, coreutils)" >&2; exit 99; }
done
MODULE=$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE")
PRELOAD=$MODULE
ASAN_RT=$(ldd "$MODULE" 2>/dev/null | awk '/libasan\.so/ {print $3; exit}')
[ -n "$ASAN_RT" ] && PRELOAD=$ASAN_RT:$MODULE

SCR=$(mktemp -d "${TMPDIR:-/tmp}/ns-pods.XXXXXX") || exit 99
POOLPFX=/dev/shm/ns-pods-$$
VETH1=nsp1-$$          # pod-1's end (15 characters at most)
VETH2=nsp2-$$
POD_PIDS=()
VETHS=()
BG_PIDS=()
. "$SCRIPT_DIR/ns-pods-common.sh"

cleanup() {
    local pid
    for pid in ${BG_PIDS[@]+"${BG_PIDS[@]}"}; do kill -TERM "$pid" 2>/dev/null; done
    sleep 0.2
    for pid in ${BG_PIDS[@]+"${BG_PIDS[@]}"}; do
        kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    done
    pods_cleanup
    rm -f "$POOLPFX"-*
    if [ -n "${NS_PODS_KEEP:-}" ]; then echo "# outputs kept in $SCR"; else rm -rf "$SCR"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PASS=0 FAIL=0
ok()   { PASS=$((PASS + 1)); echo "ok $1"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL $1: $2"; }
skip() { echo "SKIP: $1"; exit 77; }

# ---- pods (ns-pods-common.sh) ----
why=$(pods_refused) && skip "$why"
pod_start pod-1 && P1=$POD && pod_start pod-2 && P2=$POD ||
    skip "cannot set up a pod in its namespaces: $(cat "$SCR"/pod-*.holder 2>/dev/null | tr '\n' ' ')"
pods_link "$P1" "$VETH1" "$NET.1/24" "$P2" "$VETH2" "$NET.2/24"
case $? in
    2) skip "the kernel refuses a veth pair (ip link add type veth: $VETH_ERR)" ;;
    1) fail "pods: veth set-up" "$VETH_ERR"
       echo "ns-pods: $PASS passed, $FAIL failed"
       exit 1 ;;
esac

# the pods really are apart: own namespaces, hostnames, interfaces
why=
for ns in net uts ipc; do
    a=$(readlink "/proc/$P1/ns/$ns") b=$(readlink "/proc/$P2/ns/$ns") c=$(readlink "/proc/self/ns/$ns")
    [ "$a" != "$b" ] && [ "$a" != "$c" ] && [ "$b" != "$c" ] || why+="$ns namespace shared ($a $b $c); "
done
h1=$(in_pod "$P1" hostname) h2=$(in_pod "$P2" hostname)
[ "$h1" = pod-1 ] && [ "$h2" = pod-2 ] || why+="hostnames '$h1' '$h2'; "
if1=$(in_pod "$P1" ls /sys/class/net | tr '\n' ' ')
if2=$(in_pod "$P2" ls /sys/class/net | tr '\n' ' ')
[ "$if1" = "lo $VETH1 " ] && [ "$if2" = "lo $VETH2 " ] || why+="interfaces pod-1: $if1, pod-2: $if2; "
for p in "1 $P1 $VETH1" "2 $P2 $VETH2"; do
    set -- $p
    [ "$(in_pod "$2" cat "/sys/class/net/$3/operstate")" = up ] || why+="$3 not up; "
done
if [ -z "$why" ]; then
    ok "pods: pod-1 ($NET.1 on $VETH1) and pod-2 ($NET.2 on $VETH2) in their own net/UTS/IPC namespaces"
else
    fail "pods: separate namespaces" "$why"
fi

# ---- pools ----
# make_pool NAME [COHERENCE]: prints the path of a fresh pool
make_pool() {
    local pool=$POOLPFX-$1.pool
    "$CXL" create "$pool" --size 256M ${2:+--coherence "$2"} >"$SCR/create.out" 2>&1 ||
        { echo "cxlpool create $pool: $(cat "$SCR/create.out")" >&2; return 1; }
    echo "$pool"
}
# dev_of POOL: the UCT device name (the file name without .pool)
dev_of() { local b=${1##*/}; echo "${b%.pool}"; }

# ---- one server/client run ----
# run_pair NAME SERVER_POD SERVER_POOL CLIENT_POD CLIENT_POOL ADDR TLS EXPECT_TL [ENV...]
# The server runs in SERVER_POD and listens on ADDR, the client runs in
# CLIENT_POD; ENV goes to both, SRV_ENV/CLI_ENV to one side.  Outputs in
# $SCR/NAME.srv and $SCR/NAME.cli, exit statuses in SRC and CRC, the IP
# bytes each pod moved meanwhile in NET1 and NET2 ("IF +BYTES, ...").
# With TRACE_VM=1 (reset after the run) both programs run under strace,
# which logs their process_vm_readv/writev calls to $SCR/NAME.{srv,cli}.vm.
run_pair() {
    local name=$1 spod=$2 spool=$3 cpod=$4 cpool=$5 addr=$6 tls=$7 exp=$8 port='' srv b1 b2
    shift 8
    local common=(env "LD_PRELOAD=$PRELOAD" "UCX_TLS=$tls" UCX_LOG_LEVEL=info
                  "UCP_CXL_TEST_EXPECT_TL=$exp" "$@")
    local tsrv=() tcli=()
    if [ "${TRACE_VM:-0}" = 1 ]; then
        tsrv=(strace -f -qq -e trace=process_vm_readv,process_vm_writev -o "$SCR/$name.srv.vm")
        tcli=(strace -f -qq -e trace=process_vm_readv,process_vm_writev -o "$SCR/$name.cli.vm")
    fi
    b1=$(net_bytes "$P1") b2=$(net_bytes "$P2")
    in_pod "$spod" "${common[@]}" "UCX_CXL_POOL=$spool" ${SRV_ENV[@]+"${SRV_ENV[@]}"} \
        timeout -k 5 "$WATCHDOG" ${tsrv[@]+"${tsrv[@]}"} "$PROG" server 0 "$addr" >"$SCR/$name.srv" 2>&1 &
    srv=$!
    BG_PIDS=("$srv")
    for _ in $(seq 1 200); do
        port=$(sed -n 's/^# listening on port \([0-9][0-9]*\)$/\1/p' "$SCR/$name.srv")
        [ -n "$port" ] && break
        kill -0 "$srv" 2>/dev/null || break
        sleep 0.05
    done
    if [ -z "$port" ]; then
        echo "(the server did not report its port)" >"$SCR/$name.cli"
        kill -TERM "$srv" 2>/dev/null
        CRC=99
    else
        in_pod "$cpod" "${common[@]}" "UCX_CXL_POOL=$cpool" ${CLI_ENV[@]+"${CLI_ENV[@]}"} \
            timeout -k 5 "$WATCHDOG" ${tcli[@]+"${tcli[@]}"} "$PROG" client "$addr" "$port" >"$SCR/$name.cli" 2>&1
        CRC=$?
    fi
    wait "$srv"
    SRC=$?
    BG_PIDS=()
    SRV_ENV=() CLI_ENV=() TRACE_VM=0
    NET1=$(net_delta "$b1" "$(net_bytes "$P1")")
    NET2=$(net_delta "$b2" "$(net_bytes "$P2")")
    echo "# $name: UCX_TLS=$tls${*:+ $*}; server in pod-$([ "$spod" = "$P1" ] && echo 1 || echo 2) on $addr, client in pod-$([ "$cpod" = "$P1" ] && echo 1 || echo 2)"
    echo "#   IP bytes sent+received meanwhile: pod-1 $NET1; pod-2 $NET2"
}
SRV_ENV=() CLI_ENV=()

# net_bytes POD: "IF=BYTES ..." (received + sent) per interface of POD
net_bytes() {
    in_pod "$1" cat /proc/net/dev |
        awk 'NR > 2 { gsub(/:/, " "); printf "%s=%d ", $1, $2 + $10 }'
}
# net_delta BEFORE AFTER: "IF +BYTES, ..."
net_delta() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        n = split(a, x, " "); for (i = 1; i <= n; i++) { split(x[i], kv, "="); old[kv[1]] = kv[2] }
        n = split(b, x, " "); for (i = 1; i <= n; i++) { split(x[i], kv, "=");
            printf "%s%s +%d", (i > 1 ? ", " : ""), kv[1], kv[2] - old[kv[1]] } }'
}
# bytes_of NETn IF: the byte count of IF in a net_delta string
bytes_of() { sed -n "s/.*\\b$2 +\\([0-9]*\\).*/\\1/p" <<<"$1" | grep . || echo 0; }

# vm_bytes NAME: bytes that process_vm_readv/writev moved between two
# processes in NAME's programs (from their strace logs: "PID
# process_vm_readv(TARGET, ...) = BYTES"); UCX's cma module probes with a
# few bytes written to the calling process itself, which are not counted
vm_bytes() {
    cat "$SCR/$1.srv.vm" "$SCR/$1.cli.vm" 2>/dev/null |
        awk '$2 ~ /^process_vm_(read|write)v\([0-9]+,/ && / = [0-9]+$/ {
                 t = $2; sub(/^[^(]*\(/, "", t); sub(/,.*/, "", t)
                 if (t != $1) b += $NF
             } END { print b + 0 }'
}
HAVE_STRACE=0
command -v strace >/dev/null 2>&1 && HAVE_STRACE=1
# check_vm_bytes NAME WHAT CMP LIMIT: the bytes process_vm_readv/writev
# moved in NAME's programs -CMP LIMIT (-eq 0: cma moved nothing)
check_vm_bytes() {
    local name=$1 what=$2 cmp=$3 lim=$4 b
    if [ $HAVE_STRACE = 0 ]; then
        echo "# not run: $what: process_vm_readv/writev bytes (strace is not installed)"
        return
    fi
    if [ ! -e "$SCR/$name.srv.vm" ] || [ ! -e "$SCR/$name.cli.vm" ]; then
        fail "$what: process_vm_readv/writev bytes" "no strace log of both programs"
        return
    fi
    b=$(vm_bytes "$name")
    if test "$b" "$cmp" "$lim"; then
        ok "$what: $b bytes by process_vm_readv/writev ($cmp $lim)"
    else
        show_once "$name"
        fail "$what: process_vm_readv/writev bytes $cmp $lim" "$b"
    fi
}

show() {
    echo "--- $1: server ---"; cat "$SCR/$1.srv"
    echo "--- $1: client ---"; cat "$SCR/$1.cli"
    echo "--- end of $1 ---"
}
SHOWN=
show_once() { [ "$SHOWN" = "$1" ] || show "$1"; SHOWN=$1; }

# passed_all FILE: "ucp: N passed, 0 failed" with N > 0; prints N
passed_all() {
    sed -n 's/^ucp: \([1-9][0-9]*\) passed, 0 failed$/\1/p' "$1" | tail -n 1 | grep .
}
# ep_cfg FILE: UCX's lane-selection lines of FILE, from "ucp_worker.c"
ep_cfg() {
    grep -E 'UCX +INFO +ep_cfg\[[0-9]+\]: ' "$1" | sed -E 's/^.*(ucp_worker\.c:[0-9]+ +UCX +INFO +)/\1/'
}
# lanes FILE: ucp_ep_print_info's lane lines, as the program noted them
lanes() { grep -E '^# (server|client): +lane\[[0-9]+\]:' "$1"; }

# check_traffic NAME WHAT: both sides passed every check
check_traffic() {
    local name=$1 what=$2 ns nc
    ns=$(passed_all "$SCR/$name.srv") nc=$(passed_all "$SCR/$name.cli")
    if [ "$SRC" = 0 ] && [ "$CRC" = 0 ] && [ -n "$ns" ] && [ -n "$nc" ]; then
        ok "$what: traffic content-checked ($ns server + $nc client UCP checks passed)"
    else
        show_once "$name"
        fail "$what: traffic" "exit status server $SRC, client $CRC$( \
              [ "$SRC" = 124 ] || [ "$CRC" = 124 ] && echo ' (watchdog)'); $( \
              grep -h '^FAIL' "$SCR/$name.srv" "$SCR/$name.cli" | head -3 | tr '\n' ' ')"
    fi
}

# check_lanes_only NAME WHAT TL DEV_SRV DEV_CLI FORBIDDEN: on each side,
# every ep_cfg line names TL/DEV for tag and no FORBIDDEN transport at all,
# and every lane of ucp_ep_print_info is on TL/DEV (rma_bw lanes included,
# which the ep_cfg line does not name)
check_lanes_only() {
    local name=$1 what=$2 tl=$3 ds=$4 dc=$5 bad=$6 side dev l why='' n
    for side in srv cli; do
        dev=$ds; [ $side = cli ] && dev=$dc
        n=0
        while read -r l; do
            [ -n "$l" ] || continue
            n=$((n + 1))
            grep -q "tag($tl/${dev}[ )]" <<<"$l" || why+="$side: tag not on $tl/$dev; "
            grep -q "[( ]$bad/" <<<"$l" && why+="$side: $bad lane; "
        done <<<"$(ep_cfg "$SCR/$name.$side")"
        [ $n -gt 0 ] || why+="$side: no ep_cfg line; "
        n=0
        while read -r l; do
            [ -n "$l" ] || continue
            n=$((n + 1))
            grep -q "[0-9]:$tl/$dev\\.[0-9]" <<<"$l" ||
                why+="$side: lane not on $tl/$dev: '$(sed 's/^# [a-z]*: *//' <<<"$l")'; "
        done <<<"$(lanes "$SCR/$name.$side")"
        [ $n -gt 0 ] || why+="$side: no lane line; "
    done
    if [ -z "$why" ]; then
        ok "$what: UCP lanes all on $tl ($tl/$ds, $tl/$dc), none on $bad"
        ep_cfg "$SCR/$name.srv" | sed 's/^/#   server: /'
        ep_cfg "$SCR/$name.cli" | sed 's/^/#   client: /'
        lanes "$SCR/$name.cli" | sed 's/^# client: */#   client: /'
    else
        show_once "$name"
        fail "$what: UCP lanes all on $tl, none on $bad" "$why"
    fi
}

# check_lanes_primary NAME WHAT TL DEV OTHER: TL/DEV carries the am lane
# (eager tag/AM/stream) and amo, rma/amo/stream list TL/DEV only; there is
# at least one OTHER lane, and other transports' lanes are only rendezvous
# bandwidth (rma_bw) or wireup lanes
check_lanes_primary() {
    local name=$1 what=$2 tl=$3 dev=$4 other=$5 side l roles why='' n no
    for side in srv cli; do
        n=0
        while read -r l; do
            [ -n "$l" ] || continue
            n=$((n + 1))
            for f in rma amo stream; do
                grep -qE "(^| )$f\\($tl/$dev\\)" <<<"$l" || why+="$side: $f not on $tl/$dev alone; "
            done
            grep -q "tag($tl/${dev}[ )]" <<<"$l" || why+="$side: tag not on $tl/$dev; "
        done <<<"$(ep_cfg "$SCR/$name.$side")"
        [ $n -gt 0 ] || why+="$side: no ep_cfg line; "
        n=0 no=0
        while read -r l; do
            [ -n "$l" ] || continue
            roles=$(sed -E 's/.*sysdev\[[0-9]+\] *//' <<<"$l")
            if grep -q ":$tl/$dev\\." <<<"$l"; then
                grep -qw am <<<"$roles" && n=$((n + 1))
            else
                grep -q "[0-9]:$other/" <<<"$l" && grep -q 'rma_bw#' <<<"$roles" && no=$((no + 1))
                grep -qvE '^((rma_bw#[0-9]+|wireup) *)+$' <<<"$roles" &&
                    why+="$side: lane '$l' does more than rma_bw/wireup; "
            fi
        done <<<"$(lanes "$SCR/$name.$side")"
        [ $n = 1 ] || why+="$side: the am lane is not on $tl/$dev; "
        [ $no -gt 0 ] || why+="$side: no $other rma_bw lane; "
    done
    if [ -z "$why" ]; then
        ok "$what: UCP's am, tag, rma, amo and stream lanes on $tl/$dev; $other lanes, only rma_bw/wireup"
        ep_cfg "$SCR/$name.cli" | sed 's/^/#   client: /'
        lanes "$SCR/$name.cli" | sed 's/^# client: */#   client: /'
    else
        show_once "$name"
        fail "$what: UCP's primary lanes on $tl/$dev, $other only rma_bw/wireup" "$why"
    fi
}

# check_bytes WHAT NETn IF CMP LIMIT: pod's IP bytes on IF -lt/-gt LIMIT
check_bytes() {
    local what=$1 net=$2 ifc=$3 cmp=$4 lim=$5 b
    b=$(bytes_of "$net" "$ifc")
    if test "$b" "$cmp" "$lim"; then
        ok "$what: $b IP bytes on $ifc ($cmp $lim)"
    else
        fail "$what: IP bytes on $ifc $cmp $lim" "$b"
    fi
}

# check_unreachable NAME WHAT TL: both sides fail ucp_ep_create and UCX
# names TL/... as unreachable
check_unreachable() {
    local name=$1 what=$2 tl=$3 f why='' line
    for f in "$SCR/$name.srv" "$SCR/$name.cli"; do
        line=$(grep -m1 "no .* transport to .*$tl/[^ ]* - Destination is unreachable" "$f")
        if [ -z "$line" ] || ! grep -q '^FAIL ep-create: .*Destination is unreachable' "$f"; then
            why+="${f##*.}: no 'Destination is unreachable' for $tl; "
        fi
        grep -q '^ok ep-create' "$f" && why+="${f##*.}: ep-create passed; "
    done
    if [ -z "$why" ]; then
        ok "$what: unreachable"
        echo "#   $(sed -E 's/^.*(select\.c:[0-9]+ +UCX +ERROR)/\1/' <<<"$line")"
    else
        show_once "$name"
        fail "$what: unreachable" "$why"
    fi
}

# ---- the software-coherence emulator, probed ----
# EMU_CREATE: how an emulate-nc pool is created (a cxlpool argument prefix)
EMU_WHY='' EMU_CREATE=''
emu_probe() {
    local pool=$POOLPFX-probe.pool form out
    for form in "emulate-nc:" ""; do
        rm -f "$pool"
        if "$CXL" create "$form$pool" --size 64M --coherence sw >/dev/null 2>&1 ||
           "$CXL" create "$form$pool" --size 64M >/dev/null 2>&1; then
            out=$(env "LD_PRELOAD=$PRELOAD" UCX_TLS=cxl "UCX_CXL_POOL=emulate-nc:$pool" \
                  UCX_CXL_COHERENCE=sw timeout -k 5 60 ucx_info -d 2>&1)
            rm -f "$POOLPFX"-probe*
            if grep -q 'Transport: cxl' <<<"$out"; then
                EMU_CREATE=$form
                return 0
            fi
            EMU_WHY="ucx_info -d lists no cxl transport for UCX_CXL_POOL=emulate-nc:POOL: $(grep -m1 'UCX  ERROR' <<<"$out" | sed 's/.*UCX  ERROR *//')"
        fi
    done
    [ -n "$EMU_WHY" ] || EMU_WHY="cxlpool create emulate-nc:POOL / --coherence sw fails"
    return 1
}
make_emu_pool() {
    local pool=$POOLPFX-$1.pool
    "$CXL" create "$EMU_CREATE$pool" --size 256M --coherence sw >"$SCR/create.out" 2>&1 ||
    "$CXL" create "$EMU_CREATE$pool" --size 256M >"$SCR/create.out" 2>&1 ||
        { echo "cxlpool create $EMU_CREATE$pool: $(cat "$SCR/create.out")" >&2; return 1; }
    echo "$pool"
}

# ---- (a) and (b) on ordinary pools ----
run_hw() {
    local S A B
    S=$(make_pool shared) && A=$(make_pool A) && B=$(make_pool B) ||
        { fail "hw: pools" "cannot create the pools"; return; }
    local DS DA DB
    DS=$(dev_of "$S") DA=$(dev_of "$A") DB=$(dev_of "$B")

    echo "# (a) pod-1 and pod-2 share one pool: $S"
    run_pair shared-cxl "$P2" "$S" "$P1" "$S" "$NET.2" cxl cxl
    check_traffic    shared-cxl "1. shared pool, cxl, pod-1 <-> pod-2"
    check_lanes_only shared-cxl "1. shared pool, cxl, pod-1 <-> pod-2" cxl "$DS" "$DS" tcp
    check_bytes "1. shared pool, cxl, pod-1 <-> pod-2: the payload goes through the pool, only the test's own socket over the veth" \
        "$NET1" "$VETH1" -lt 1048576

    run_pair shared-posix "$P2" "$S" "$P1" "$S" "$NET.2" posix posix \
        UCX_ALLOC_PRIO=huge,thp,mmap,heap
    check_unreachable shared-posix "2. posix, pod-1 <-> pod-2 (own IPC/UTS namespaces)" posix

    run_pair pod1-posix "$P1" "$S" "$P1" "$S" 127.0.0.1 posix posix \
        UCX_ALLOC_PRIO=huge,thp,mmap,heap
    check_traffic    pod1-posix "3. posix inside pod-1 (control for 2)"
    check_lanes_only pod1-posix "3. posix inside pod-1 (control for 2)" posix memory memory cxl

    run_pair diff-cxl "$P2" "$B" "$P1" "$A" "$NET.2" cxl cxl
    check_unreachable diff-cxl "4. different pools, cxl, pod-1 <-> pod-2" cxl

    # the README's single-host line: cma takes ordinary rendezvous buffers
    # where it reaches (one host), and cannot reach across pods
    TRACE_VM=$HAVE_STRACE
    run_pair shared-cxlcma "$P2" "$S" "$P1" "$S" "$NET.2" cxl,cma cxl UCX_CXL_RKEY_PTR=yes
    check_traffic    shared-cxlcma "9. shared pool, cxl,cma, pod-1 <-> pod-2"
    check_lanes_only shared-cxlcma "9. shared pool, cxl,cma, pod-1 <-> pod-2" cxl "$DS" "$DS" cma
    check_bytes "9. shared pool, cxl,cma, pod-1 <-> pod-2: the payload goes through the pool, only the test's own socket over the veth" \
        "$NET1" "$VETH1" -lt 1048576
    check_vm_bytes shared-cxlcma "9. shared pool, cxl,cma, pod-1 <-> pod-2: nothing moves by cma" -eq 0

    TRACE_VM=$HAVE_STRACE
    run_pair pod1-cxlcma "$P1" "$S" "$P1" "$S" 127.0.0.1 cxl,cma cxl,cma UCX_CXL_RKEY_PTR=yes
    check_traffic       pod1-cxlcma "10. cxl,cma inside pod-1 (control for 9)"
    check_lanes_primary pod1-cxlcma "10. cxl,cma inside pod-1 (control for 9)" cxl "$DS" cma
    check_vm_bytes pod1-cxlcma "10. cxl,cma inside pod-1: ordinary rendezvous buffers move by cma" -gt 4194304

    echo "# (b) pool A in pod-1 ($A), pool B in pod-2 ($B), UCX_TLS=cxl,tcp"
    # UCX_CXL_REG_ANY=y (the default): the cxl memory domain registers any
    # memory, so inside a pod UCP needs no tcp lane at all
    run_pair pod1-cxltcp "$P1" "$A" "$P1" "$A" 127.0.0.1 cxl,tcp cxl
    check_traffic    pod1-cxltcp "5. cxl,tcp inside pod-1 (default settings)"
    check_lanes_only pod1-cxltcp "5. cxl,tcp inside pod-1 (default settings)" cxl "$DA" "$DA" tcp
    check_bytes "5. cxl,tcp inside pod-1: the payload goes through pool A, only the test's own socket over lo" \
        "$NET1" lo -lt 1048576

    run_pair pod2-cxltcp "$P2" "$B" "$P2" "$B" 127.0.0.1 cxl,tcp cxl UCX_CXL_REG_ANY=y
    check_traffic    pod2-cxltcp "6. cxl,tcp inside pod-2 (UCX_CXL_REG_ANY=y)"
    check_lanes_only pod2-cxltcp "6. cxl,tcp inside pod-2 (UCX_CXL_REG_ANY=y)" cxl "$DB" "$DB" tcp
    check_bytes "6. cxl,tcp inside pod-2: the payload goes through pool B, only the test's own socket over lo" \
        "$NET2" lo -lt 1048576

    run_pair cross-cxltcp "$P2" "$B" "$P1" "$A" "$NET.2" cxl,tcp tcp
    check_traffic    cross-cxltcp "7. cxl,tcp pod-1 <-> pod-2"
    check_lanes_only cross-cxltcp "7. cxl,tcp pod-1 <-> pod-2" tcp "$VETH2" "$VETH1" cxl
    check_bytes "7. cxl,tcp pod-1 <-> pod-2: the payload crosses the veth" "$NET1" "$VETH1" -gt 4194304
    check_bytes "7. cxl,tcp pod-1 <-> pod-2: nothing over pod-1's loopback" "$NET1" lo -lt 65536

    # With UCX_CXL_REG_ANY=n the cxl memory domain registers only pool
    # memory, so UCP 1.13 gives rendezvous zero-copy of ordinary buffers to
    # tcp (rma_bw lanes); everything else stays on cxl.
    run_pair pod1-cxltcp-pool "$P1" "$A" "$P1" "$A" 127.0.0.1 cxl,tcp cxl,tcp UCX_CXL_REG_ANY=n
    check_traffic       pod1-cxltcp-pool "8. cxl,tcp inside pod-1 (UCX_CXL_REG_ANY=n)"
    check_lanes_primary pod1-cxltcp-pool "8. cxl,tcp inside pod-1 (UCX_CXL_REG_ANY=n)" cxl "$DA" tcp
    check_bytes "8. cxl,tcp inside pod-1 (UCX_CXL_REG_ANY=n): the rendezvous payload takes the tcp rma_bw lanes over lo" \
        "$NET1" lo -gt 4194304
}

# ---- (a) on software-coherent pools through the emulator ----
run_sw() {
    local S A B
    S=$(make_emu_pool sw-shared) && A=$(make_emu_pool sw-A) && B=$(make_emu_pool sw-B) ||
        { fail "sw: pools" "cannot create emulate-nc pools"; return; }
    echo "# (a, sw) emulate-nc:$S shared by pod-1 (emulated host 0) and pod-2 (host 1)"
    SRV_ENV=(UCX_CXL_HOST_INDEX=1) CLI_ENV=(UCX_CXL_HOST_INDEX=0)
    run_pair sw-shared-cxl "$P2" "emulate-nc:$S" "$P1" "emulate-nc:$S" "$NET.2" cxl cxl \
        UCX_CXL_COHERENCE=sw
    check_traffic    sw-shared-cxl "1sw. shared emulate-nc pool, cxl, pod-1 <-> pod-2"
    check_lanes_only sw-shared-cxl "1sw. shared emulate-nc pool, cxl, pod-1 <-> pod-2" \
        cxl "$(dev_of "$S")" "$(dev_of "$S")" tcp
    check_bytes "1sw. shared emulate-nc pool: the payload goes through the pool" \
        "$NET1" "$VETH1" -lt 1048576
    SRV_ENV=(UCX_CXL_HOST_INDEX=1) CLI_ENV=(UCX_CXL_HOST_INDEX=0)
    run_pair sw-diff-cxl "$P2" "emulate-nc:$B" "$P1" "emulate-nc:$A" "$NET.2" cxl cxl \
        UCX_CXL_COHERENCE=sw
    check_unreachable sw-diff-cxl "4sw. different emulate-nc pools, cxl, pod-1 <-> pod-2" cxl
}

echo "# program: $PROG"
echo "# module:  $MODULE"
echo "# mode:    $MODE"
[ "$MODE" = sw ] || run_hw
if [ "$MODE" != hw ]; then
    if emu_probe; then
        run_sw
    elif [ "$MODE" = sw ]; then
        skip "the non-coherent pool emulator is not available ($EMU_WHY)"
    else
        echo "# sw variant not run: the non-coherent pool emulator is not available ($EMU_WHY)"
    fi
fi

echo "ns-pods: $PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
