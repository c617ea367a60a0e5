#!/usr/bin/env bash
#
# run-devdax-vm.sh - ucx-cxl on real device DAX: Debian's kernel in QEMU
# guests with emulated persistent memory (make check-devdax).
#
# The guest (test/vm/build-guest.sh): Debian's linux-image-6.1 kernel and an
# initramfs with busybox, ndctl/daxctl/cxl, ucx_perftest and the project's
# cxlpool, libuct_cxl.so, ucp_cxl_test and cxlpool_holder, built from Debian
# packages into /var/cache/ucx-cxl/vm and rebuilt when any of them changes.
# Its checks: test/vm/guest-tests.sh.  Three boots of qemu-system-x86_64
# (Debian's QEMU 7.2), one vCPU and 512 MiB each, one after the other:
#
#   solo   q35 with cxl=on: a CXL Type-3 device (cxl-type3, 512 MiB of
#          persistent memory and a label area, behind pxb-cxl and cxl-rp, a
#          4 GiB fixed memory window).  In the guest: `cxl create-region`
#          (pmem), `ndctl create-namespace -m devdax -a 2M` on the region
#          cxl_pmem gives libnvdimm -> /dev/dax0.0.  `cxlpool list` finds it
#          through libdaxctl; the device switched to system-ram (daxctl, kmem)
#          is refused by cxlpool create/info/check with the reason, and
#          switched back; cxlpool create/info/check; a holder killed -9 is
#          seen dead by pid and reclaimed; ucp_cxl_test loopback, server +
#          client and peer-failure, ucx_perftest tag_bw between two processes
#          over UCX_TLS=cxl (the lanes say cxl/dax0.0); a collectives team
#          whose caller names no pool, UCX_CXL_POOL unset, has its partition
#          on the device (test/vm/vm_coll_pool), as the transport's 'auto'.
#   a, b   two guests (pc, nvdimm=on), each with an NVDIMM backed by ONE host
#          file (memory-backend-file share=on, 2 GiB + 128 KiB of labels,
#          sparse): two kernels, two boot ids.  a creates a devdax namespace
#          with 1 GiB alignment (1 GiB; its labels are in the shared file;
#          every mapping of such a device must be 1 GiB-aligned, the
#          superblock's too) and the pool, starts the
#          servers and prints "vm-sync: pool-ready"; then b boots and finds
#          the namespace and the pool (same uuid).  A QEMU socket network
#          (-netdev socket on 127.0.0.1, 10.0.2.1 and 10.0.2.2) carries the
#          connection setup: ucx_perftest tag_bw 32 x 1 MiB b -> a over
#          UCX_TLS=cxl,tcp (lanes cxl/dax0.0; eth0 moves < 4 MiB of the
#          32 MiB), ucp_cxl_test client/server over UCX_TLS=cxl alone.
#          First of all both add 1 to one pool word for 2 s at the same
#          time (test/vm/vm_atomics): the sum must be exact, or nothing
#          across the guests means anything.  b's
#          holder (lease 3 s, heartbeat) is seen alive by a after two leases,
#          killed -9 in b, seen dead by a through its lease and its 3
#          extents reclaimed by `cxlpool check --repair` in a.  Then a
#          collectives team of four ranks, two in each guest
#          (test/coll/coll_ucp_test: bootstrap over UCP, every collective
#          checked), runs through the device, on the pool and again on one
#          created --coherence sw --hosts 2 (a host 0, b host 1).  Both solo
#          and a end with `cxlpool destroy` (2 MiB and 1 GiB alignment).
#
# Why NVDIMM for the two guests: QEMU 7.2 emulates the CXL fixed memory
# window as MMIO (every guest access is a call into the cxl-type3 device
# model); an atomic instruction on MMIO is done as a read and a write under
# a lock of that one QEMU process, so it is not atomic against the other
# guest's QEMU (measured: two CXL guests lost 31-35% of 600000 atomic
# increments), and the pool's lock and the transport's channel claims are
# compare-and-swaps.  An NVDIMM is the host file mapped as guest RAM: with
# maxcpus=2 its atomics are the host's, across both guests (600000 of
# 600000).  See test/vm/README.md.
#
# KVM is used when a guest actually boots with -accel kvm within 20 s
# (probed once per host boot, cached); otherwise TCG, software emulation.
# The first line says which.
#
# Environment:
#   CXL_BUILDDIR     the build tree (default: build-release next to test/)
#   UCX_CXL_CACHE    cache root (default /var/cache/ucx-cxl; images in vm/)
#   CXL_VM_ACCEL     kvm or tcg: skip the probe
#   CXL_VM_KEEP      1: keep the scratch directory (consoles, backing files)
#   CXL_VM_PHASES    "solo pair" (default): which of the two parts to run
#   CXL_VM_SMP       QEMU's -smp (default 1,maxcpus=2); CXL_VM_SMP=1 is the
#                    negative control of the atomics check (it must fail)
# Output: each guest's console (prefixed [solo], [a], [b]), timings, then
# "vm-devdax: N passed, N failed" (the guests' checks and the host's).
# Exit: 0 all passed, 1 a check failed, 77 skipped (no QEMU, no kernel
# package, not root, ...: one line says why), 99 hard error.
set -u

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$SCRIPT_DIR/../.." && pwd)
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
    awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
    exit 0
fi
NAME=vm-devdax
B=${CXL_BUILDDIR:-$TOP/build-release}
CACHE=${UCX_CXL_CACHE:-/var/cache/ucx-cxl}/vm
LEASE_MS=3000
T_START=$SECONDS

skip() { echo "$NAME: SKIP: $*"; exit 77; }
PASS=0
FAIL=0
ok()   { PASS=$((PASS + 1)); echo "ok $1"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL $1: $2"; }

# ---- can this machine run it? ----
[ "$(id -u)" = 0 ] || skip "needs root (the guest image cache and apt-get download)"
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 is not installed (Debian: qemu-system-x86; contrib/setup-deps.sh)"
for t in cpio gzip depmod ndctl daxctl cxl ucx_perftest dpkg apt-cache; do
    command -v $t >/dev/null || skip "$t is not installed (contrib/setup-deps.sh)"
done
[ -x /bin/busybox ] && file /bin/busybox 2>/dev/null | grep -q 'statically linked' ||
    skip "/bin/busybox is not the static one (Debian: busybox-static)"
[ -x "$B/cxlpool" ] && [ -f "$B/.libs/libuct_cxl.so" ] || {
    echo "$NAME: no build in $B (contrib/build.sh release)" >&2; exit 99; }
make -C "$B" test/ucp/ucp_cxl_test test/helpers/cxlpool_holder test/vm/vm_atomics \
    test/vm/vm_coll_pool test/coll/coll_ucp_test >/dev/null 2>&1 || {
    echo "$NAME: cannot build the test programs in $B" >&2; exit 99; }

SCR=$(mktemp -d /var/tmp/ucx-cxl-vm.XXXXXX) || exit 99
QPIDS=()
cleanup() {
    local p
    for p in "${QPIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${QPIDS[@]}"; do wait "$p" 2>/dev/null; done
    if [ "${CXL_VM_KEEP:-0}" = 1 ]; then
        echo "# scratch kept: $SCR"
    else
        rm -rf "$SCR"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the image ----
t0=$SECONDS
IMG=$(bash "$SCRIPT_DIR/build-guest.sh" "$B" "$CACHE" 2>"$SCR/build.err")
rc=$?
cat "$SCR/build.err" | sed 's/^/# /'
if [ $rc != 0 ]; then
    grep -q 'apt-get download\|knows no linux-image' "$SCR/build.err" &&
        skip "no Debian kernel package obtainable: $(tail -n 1 "$SCR/build.err")"
    echo "$NAME: the guest image could not be built" >&2
    exit 99
fi
T_IMAGE=$((SECONDS - t0))

# ---- the accelerator ----
# qemu COMMON-ARGS: the common part of every guest's command line
# -smp 1,maxcpus=2: one vCPU, but TCG translates atomic instructions into
# host atomics only when the machine may have more than one (with
# maxcpus=1 a lock xadd is a plain load and store: two guests lost 21% of
# 600000 increments on one NVDIMM file; with maxcpus=2 none)
qemu_base() {
    QB=(qemu-system-x86_64 -accel "$ACCEL" -smp "${CXL_VM_SMP:-1,maxcpus=2}" -nodefaults -display none
        -no-reboot -kernel "$IMG/vmlinuz" -initrd "$IMG/initrd.gz")
}
probe_kvm() {
    local key cached
    [ -c /dev/kvm ] && [ -r /dev/kvm ] || { ACCEL=tcg; WHY="no /dev/kvm"; return; }
    key=$CACHE/accel.$(cat /proc/sys/kernel/random/boot_id 2>/dev/null).$(qemu-system-x86_64 --version | head -n 1 | cksum | cut -d' ' -f1)
    if [ -f "$key" ]; then
        read -r ACCEL WHY <"$key"
        WHY="$WHY (probed earlier in this host boot)"
        return
    fi
    ACCEL=kvm
    qemu_base
    timeout 20 "${QB[@]}" -M pc -m 256M -serial "file:$SCR/probe.console" \
        -append "console=ttyS0 quiet panic=-1 vmrole=probe" >/dev/null 2>&1
    if grep -q 'vm-guest: done probe' "$SCR/probe.console" 2>/dev/null; then
        ACCEL=kvm; WHY="a guest boots with -accel kvm"
    else
        ACCEL=tcg; WHY="/dev/kvm present but a guest did not boot with -accel kvm within 20 s"
    fi
    rm -f "$CACHE"/accel.*
    echo "$ACCEL $WHY" >"$key"
}
t0=$SECONDS
case "${CXL_VM_ACCEL:-}" in
    kvm|tcg) ACCEL=$CXL_VM_ACCEL; WHY="CXL_VM_ACCEL" ;;
    *) probe_kvm ;;
esac
T_PROBE=$((SECONDS - t0))
echo "# $NAME: accelerator $ACCEL ($([ "$ACCEL" = tcg ] && echo 'software emulation, ')$WHY)"
echo "# image $IMG (kernel $(cat "$IMG/kernel-version"), $(du -h "$IMG/initrd.gz" | cut -f1) initramfs), ${T_IMAGE}s"
qemu_base

# start_guest NAME TIMEOUT ARGS...: a guest in the background, console to
# $SCR/NAME.console; its pid in GPID_NAME
start_guest() {
    local n=$1 to=$2
    shift 2
    timeout "$to" "${QB[@]}" -serial "file:$SCR/$n.console" "$@" \
        >"$SCR/$n.qemu" 2>&1 &
    QPIDS+=($!)
    eval "GPID_$n=$!"
    eval "GT0_$n=$SECONDS"
}

# finish_guest NAME: wait for it; its console, its summary, its timing
finish_guest() {
    local n=$1 pid rc t0 line p f
    eval "pid=\$GPID_$n; t0=\$GT0_$n"
    wait "$pid"
    rc=$?
    tr -d '\r' <"$SCR/$n.console" >"$SCR/$n.log" 2>/dev/null
    sed "s/^/[$n] /" "$SCR/$n.log"
    if [ -s "$SCR/$n.qemu" ]; then
        grep -v 'host doesn.t support requested feature' "$SCR/$n.qemu" | sed "s/^/[$n qemu] /"
    fi
    echo "# guest $n: $((SECONDS - t0)) s from start to power-off (qemu exit $rc)"
    eval "GTIME_$n=$((SECONDS - t0))"
    line=$(grep -E "^vm-summary: $n: [0-9]+ passed, [0-9]+ failed$" "$SCR/$n.log" | tail -n 1)
    if [ -z "$line" ]; then
        fail "guest $n ran its checks to the end" "no summary line (qemu exit $rc$([ $rc = 124 ] && echo ', killed by the timeout'))"
        return
    fi
    p=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed$/\1/' <<<"$line")
    f=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed$/\2/' <<<"$line")
    PASS=$((PASS + p))
    FAIL=$((FAIL + f))
    if [ $rc != 0 ]; then
        fail "guest $n powers off" "qemu exit $rc"
    fi
}

info_of() { sed -n "s/^vm-info: $2 //p" "$SCR/$1.log" | head -n 1; }
bootid_of() { sed -n 's/^vm-guest: role .*, boot_id //p' "$SCR/$1.log" | head -n 1; }

PHASES=" ${CXL_VM_PHASES:-solo pair} "

# ---- 1. one guest, the CXL Type-3 device ----
if [[ $PHASES == *" solo "* ]]; then
truncate -s 512M "$SCR/cxl-pmem.raw"
truncate -s 256K "$SCR/cxl-lsa.raw"
start_guest solo 300 -M q35,cxl=on -m 512M,maxmem=2G,slots=4 \
    -object "memory-backend-file,id=cxl-mem0,share=on,mem-path=$SCR/cxl-pmem.raw,size=512M" \
    -object "memory-backend-file,id=cxl-lsa0,share=on,mem-path=$SCR/cxl-lsa.raw,size=256K" \
    -device pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1 \
    -device cxl-rp,port=0,bus=cxl.1,id=cxl_rp0,chassis=0,slot=2 \
    -device cxl-rp,port=1,bus=cxl.1,id=cxl_rp1,chassis=0,slot=3 \
    -device cxl-type3,bus=cxl_rp0,memdev=cxl-mem0,lsa=cxl-lsa0,id=cxl-pmem0 \
    -M cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G \
    -append "console=ttyS0 quiet panic=-1 vmrole=solo"
finish_guest solo
fi

# ---- 2. two guests, one NVDIMM backing file ----
if [[ $PHASES == *" pair "* ]]; then
# the label area is carved from the backend: 2 GiB + 128 KiB of labels; a
# 1 GiB-aligned namespace starts 1 GiB in (its info block comes first) and
# gets the second GiB (the file is sparse: the first costs nothing)
NV_SIZE=$((2048 * 1048576 + 131072))
truncate -s $NV_SIZE "$SCR/nvdimm.raw"
nv_args() {
    echo -M pc,nvdimm=on -m 512M,slots=2,maxmem=3G \
        -object "memory-backend-file,id=nv0,share=on,mem-path=$SCR/nvdimm.raw,size=$NV_SIZE" \
        -device nvdimm,id=nvdimm0,memdev=nv0,label-size=128K
}
CMD_COMMON="console=ttyS0 quiet panic=-1 vmlease=$LEASE_MS"
for try in 1 2 3 4 5; do
    PORT=$((20000 + RANDOM % 30000))
    # shellcheck disable=SC2046  # nv_args: words without spaces
    start_guest a 300 $(nv_args) \
        -netdev "socket,id=n0,listen=127.0.0.1:$PORT" \
        -device e1000,netdev=n0,mac=52:54:00:c1:00:0a \
        -append "$CMD_COMMON vmrole=a vmip=10.0.2.1/24 vmpeer=10.0.2.2"
    sleep 1
    kill -0 "$GPID_a" 2>/dev/null && break
    wait "$GPID_a" 2>/dev/null
    grep -q 'Address already in use' "$SCR/a.qemu" || break
done
t0=$SECONDS
while [ $((SECONDS - t0)) -lt 200 ] && kill -0 "$GPID_a" 2>/dev/null &&
      ! grep -q 'vm-sync: pool-ready' "$SCR/a.console" 2>/dev/null; do
    sleep 0.5
done
T_A_READY=$((SECONDS - GT0_a))
if grep -q 'vm-sync: pool-ready' "$SCR/a.console" 2>/dev/null; then
    # shellcheck disable=SC2046
    start_guest b 300 $(nv_args) \
        -netdev "socket,id=n0,connect=127.0.0.1:$PORT" \
        -device e1000,netdev=n0,mac=52:54:00:c1:00:0b \
        -append "$CMD_COMMON vmrole=b vmip=10.0.2.2/24 vmpeer=10.0.2.1"
    finish_guest b
else
    fail "guest a gets the pool ready" "no 'vm-sync: pool-ready' within 200 s"
fi
finish_guest a

# ---- the host's checks across the guests ----
ba=$(bootid_of a)
bb=$(bootid_of b 2>/dev/null)
if [ -n "$ba" ] && [ -n "$bb" ] && [ "$ba" != "$bb" ]; then
    ok "two kernels: boot ids $ba (a) and $bb (b)"
else
    fail "two kernels with two boot ids" "a '$ba', b '$bb'"
fi
ua=$(info_of a pool-uuid)
ub=$(info_of b pool-uuid 2>/dev/null)
if [ -n "$ua" ] && [ "$ua" = "$ub" ]; then
    ok "one device: a and b see the pool $ua"
else
    fail "one pool on the shared device" "a '$ua', b '$ub'"
fi
fi

echo "# timings: image ${T_IMAGE}s, accelerator probe ${T_PROBE}s, solo ${GTIME_solo:-?}s, a ready after ${T_A_READY:-?}s, a ${GTIME_a:-?}s, b ${GTIME_b:-?}s, whole test $((SECONDS - T_START))s ($ACCEL)"
echo "$NAME: $PASS passed, $FAIL failed"
[ $FAIL = 0 ]
