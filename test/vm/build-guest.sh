#!/usr/bin/env bash
#
# build-guest.sh BUILDDIR CACHEDIR - the guest of test/vm/run-devdax-vm.sh:
# Debian's kernel and an initramfs with the project's binaries, built from
# Debian packages into CACHEDIR (outside the repository), reused while the
# inputs are unchanged.  Prints the image directory (kernel: vmlinuz, initrd:
# initrd.gz) on stdout; progress goes to stderr.
#
#   kernel   the linux-image-6.1.*-amd64 that Debian's linux-image-amd64
#            depends on, fetched with `apt-get download` and unpacked with
#            `dpkg -x` into CACHEDIR/kernel-VERSION (nothing is installed on
#            the host); its modules for NVDIMM/CXL, device DAX, kmem and
#            e1000 go into the initramfs with a modules.dep (depmod -b)
#   tools    busybox (busybox-static), ndctl, daxctl, cxl (Debian's ndctl),
#            ucx_perftest and ucx_info (ucx-utils)
#   project  BUILDDIR's cxlpool, libcxlpool.so, libuct_cxl.so,
#            test/ucp/ucp_cxl_test, test/helpers/cxlpool_holder,
#            cxl-broker, test/broker/brk_reader, libcxl_coll.so,
#            libcxl_coll_ucp.so, test/coll/coll_ucp_test,
#            test/vm/vm_atomics, test/vm/vm_coll_pool (built with
#            `make check` or by run-devdax-vm.sh) under /opt/ucx-cxl
#   libs     every shared library these need, found with ldd
#   scripts  test/vm/guest-init.sh as /init, test/vm/guest-tests.sh
#
# The image directory is CACHEDIR/image-HASH, HASH a sha256 over the
# kernel package name, this script, the guest scripts and every file put
# into the initramfs; other image-* directories are removed when a new one
# is built.  Needs: apt-get (or the kernel .deb already in CACHEDIR/dl),
# dpkg, depmod (kmod), cpio, gzip, busybox-static.
# Exit: 0 ok, 1 failure, 2 bad command line.
set -euo pipefail

if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
    awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
    exit 0
fi
[ $# -eq 2 ] || { echo "usage: build-guest.sh BUILDDIR CACHEDIR (see --help)" >&2; exit 2; }
B=$(cd "$1" && pwd)
CACHE=$2
HERE=$(cd "$(dirname "$0")" && pwd)
msg() { echo "build-guest: $*" >&2; }
die() { echo "build-guest: ERROR: $*" >&2; exit 1; }

mkdir -p "$CACHE/dl"
exec 8>"$CACHE/.build.lock"
flock 8

# ---- the kernel package ----
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
       sed -n 's/^ *Depends: \(linux-image-6\.1[^ ]*-amd64\)$/\1/p' | head -n 1)
if [ -z "$kpkg" ]; then
    # no apt index: whatever kernel .deb an earlier run left
    deb=$(ls "$CACHE"/dl/linux-image-6.1*-amd64_*.deb 2>/dev/null | tail -n 1 || true)
    [ -n "$deb" ] || die "apt-cache knows no linux-image-amd64 and $CACHE/dl has no kernel .deb"
    kpkg=$(basename "$deb" | cut -d_ -f1)
fi
deb=$(ls "$CACHE"/dl/"$kpkg"_*.deb 2>/dev/null | tail -n 1 || true)
if [ -z "$deb" ]; then
    msg "downloading $kpkg"
    (cd "$CACHE/dl" && apt-get download "$kpkg" >/dev/null 2>&1) ||
        die "apt-get download $kpkg failed"
    deb=$(ls "$CACHE"/dl/"$kpkg"_*.deb | tail -n 1)
fi
KVER=${kpkg#linux-image-}
KDIR=$CACHE/kernel-$KVER
if [ ! -f "$KDIR/.done" ]; then
    msg "unpacking $(basename "$deb")"
    rm -rf "$KDIR"
    mkdir -p "$KDIR"
    dpkg -x "$deb" "$KDIR/root"
    cp "$KDIR/root/boot/vmlinuz-$KVER" "$KDIR/vmlinuz"
    touch "$KDIR/.done"
fi
MODSRC=$KDIR/root/lib/modules/$KVER

# ---- what goes in ----
. "$HERE/../helpers/realbin.sh"    # realbin: the ELF behind a libtool wrapper
PROJ_BINS=("$(realbin "$B/cxlpool")" "$(realbin "$B/cxl-broker")")
for t in test/ucp/ucp_cxl_test test/helpers/cxlpool_holder test/vm/vm_atomics \
         test/broker/brk_reader test/vm/vm_coll_pool test/coll/coll_ucp_test; do
    [ -x "$B/$t" ] || die "$B/$t is missing (make -C $B $t)"
    PROJ_BINS+=("$(realbin "$B/$t")")
done
PROJ_LIBS=("$B/.libs/libcxlpool.so.0" "$B/.libs/libuct_cxl.so"
           "$B/.libs/libcxl_broker.so.0" "$B/.libs/libcxl_coll.so.0"
           "$B/.libs/libcxl_coll_ucp.so.0")
SYS_BINS=(/usr/bin/ndctl /usr/bin/daxctl /usr/bin/cxl /usr/bin/ucx_perftest
          /usr/bin/ucx_info)
for f in /bin/busybox "${SYS_BINS[@]}" "${PROJ_BINS[@]}" "${PROJ_LIBS[@]}"; do
    [ -e "$f" ] || die "$f is missing"
done
file /bin/busybox | grep -q 'statically linked' ||
    die "/bin/busybox is not static (install busybox-static)"
MODS=(nfit libnvdimm nd_pmem nd_btt dax_pmem device_dax kmem
      cxl_acpi cxl_pci cxl_mem cxl_pmem e1000)
SCRIPTS=("$HERE/guest-init.sh" "$HERE/guest-tests.sh")

libs_of() {   # every shared library (and the loader) of ELF files
    LD_LIBRARY_PATH=$B/.libs ldd "$@" 2>/dev/null |
        awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && $2 ~ /^\(0x/ { print $1 }' |
        grep -v "^$B/" | sort -u
}
mapfile -t LIBS < <(libs_of "${SYS_BINS[@]}" "${PROJ_BINS[@]}" "${PROJ_LIBS[@]}")
mapfile -t KOS < <(for m in "${MODS[@]}"; do
    line=$(grep -E "(^|/)$m\.ko:" "$MODSRC/modules.dep" 2>/dev/null ||
           { depmod -b "$KDIR/root" "$KVER" && grep -E "(^|/)$m\.ko:" "$MODSRC/modules.dep"; }) ||
        die "module $m not in $kpkg"
    echo "$line" | tr -d ':' | tr ' ' '\n'
done | grep . | sort -u)

hash=$( { echo "$kpkg"; sha256sum "$0" "${SCRIPTS[@]}" /bin/busybox "${SYS_BINS[@]}" \
            "${PROJ_BINS[@]}" "${PROJ_LIBS[@]}" "${LIBS[@]}" | cut -d' ' -f1; } |
        sha256sum | cut -c1-16)
IMG=$CACHE/image-$hash
if [ -f "$IMG/.done" ]; then
    msg "cached image $IMG"
    echo "$IMG"
    exit 0
fi

msg "building $IMG (kernel $KVER)"
t0=$SECONDS
rm -rf "$IMG"
mkdir -p "$IMG"
R=$IMG/root
mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,run,mnt,etc,opt/ucx-cxl/bin,opt/ucx-cxl/lib}
cp /bin/busybox "$R/bin/busybox"
for a in $(/bin/busybox --list); do
    [ "$a" = busybox ] || ln -s busybox "$R/bin/$a"
done
for f in "${SYS_BINS[@]}"; do cp -L "$f" "$R/usr/bin/"; done
for f in "${PROJ_BINS[@]}"; do
    n=$(basename "$f"); n=${n#lt-}
    cp -L "$f" "$R/opt/ucx-cxl/bin/$n"
done
for l in "${PROJ_LIBS[@]}"; do cp -L "$l" "$R/opt/ucx-cxl/lib/"; done
for l in "${LIBS[@]}"; do
    mkdir -p "$R$(dirname "$l")"
    cp -L "$l" "$R$l"
done
for k in "${KOS[@]}"; do
    mkdir -p "$R/lib/modules/$KVER/$(dirname "$k")"
    cp "$MODSRC/$k" "$R/lib/modules/$KVER/$k"
done
cp "$MODSRC"/modules.order "$MODSRC"/modules.builtin "$MODSRC"/modules.builtin.modinfo \
    "$R/lib/modules/$KVER/"
depmod -b "$R" "$KVER"
cp "$HERE/guest-init.sh" "$R/init"
cp "$HERE/guest-tests.sh" "$R/guest-tests.sh"
chmod 755 "$R/init" "$R/guest-tests.sh"
echo "root:x:0:0:root:/:/bin/sh" >"$R/etc/passwd"
echo "root:x:0:" >"$R/etc/group"
(cd "$R" && find . | sort | cpio -o -H newc --quiet | gzip -1) >"$IMG/initrd.gz"
cp "$KDIR/vmlinuz" "$IMG/vmlinuz"
echo "$KVER" >"$IMG/kernel-version"
rm -rf "$R"
touch "$IMG/.done"
for old in "$CACHE"/image-*; do
    [ "$old" = "$IMG" ] || rm -rf "$old"
done
msg "built $IMG in $((SECONDS - t0))s ($(du -h "$IMG/initrd.gz" | cut -f1) initramfs)"
echo "$IMG"
