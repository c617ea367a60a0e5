#!/bin/sh
#
# guest-init.sh - /init of the guest built by test/vm/build-guest.sh
# (busybox sh).  Mounts proc/sys/devtmpfs, loads the modules for emulated
# persistent memory (NVDIMM or CXL), device DAX, kmem and e1000, sets the
# network from the kernel command line, runs /guest-tests.sh ROLE and
# powers the machine off, whatever the tests did.
#
# Kernel command line (set by run-devdax-vm.sh):
#   vmrole=ROLE     passed to /guest-tests.sh (solo, a, b, ...)
#   vmip=ADDR/LEN   eth0's address (no network without it)
#   vmpeer=ADDR     the other guest's address, exported as VM_PEER
#   vmlease=MS      exported as VM_LEASE_MS
# Every line the tests print goes to the console (ttyS0), where the host
# collects the "ok"/"FAIL" lines; the last line is "vm-guest: done ROLE".
export PATH=/opt/ucx-cxl/bin:/usr/bin:/bin:/usr/sbin:/sbin
export LD_LIBRARY_PATH=/opt/ucx-cxl/lib
export HOME=/tmp TMPDIR=/tmp

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/shm /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run

VM_ROLE=solo
VM_IP=
VM_PEER=
VM_LEASE_MS=
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        vmrole=*)  VM_ROLE=${arg#vmrole=} ;;
        vmip=*)    VM_IP=${arg#vmip=} ;;
        vmpeer=*)  VM_PEER=${arg#vmpeer=} ;;
        vmlease=*) VM_LEASE_MS=${arg#vmlease=} ;;
    esac
done
export VM_ROLE VM_IP VM_PEER VM_LEASE_MS

# modprobe prints nothing for modules whose hardware is absent
for m in nfit nd_pmem dax_pmem device_dax kmem cxl_acpi cxl_pci cxl_mem cxl_pmem e1000; do
    modprobe "$m" 2>/dev/null
done
ip link set lo up
if [ -n "$VM_IP" ]; then
    ip addr add "$VM_IP" dev eth0 && ip link set eth0 up
fi

echo "vm-guest: role $VM_ROLE, kernel $(uname -r), boot_id $(cat /proc/sys/kernel/random/boot_id)"
/bin/sh /guest-tests.sh "$VM_ROLE"
rc=$?
echo "vm-guest: done $VM_ROLE (exit $rc, uptime $(cut -d" " -f1 /proc/uptime) s)"
sync
poweroff -f
# without ACPI poweroff, -no-reboot makes QEMU exit on reboot
reboot -f
