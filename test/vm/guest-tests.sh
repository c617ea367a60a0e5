#!/bin/sh
#
# guest-tests.sh ROLE - the checks inside a guest of test/vm/run-devdax-vm.sh
# (busybox sh; /init runs it with the modules loaded and the network up).
#
#   solo  the CXL Type-3 device: a pmem region (cxl create-region), a devdax
#         namespace on it (ndctl), `cxlpool list` finds it (libdaxctl), a
#         device in system-ram mode (daxctl, kmem) is refused with its
#         reason and switched back, `cxlpool create/info/check`, a killed
#         holder seen dead by pid and reclaimed, ucp_cxl_test (loopback,
#         two processes, peer failure) and ucx_perftest between two
#         processes over UCX_TLS=cxl on the device; a collectives team
#         with UCX_CXL_POOL unset has its partition on the device
#   a     first of two guests sharing one NVDIMM backing file: creates the
#         devdax namespace (1 GiB alignment; labels live in the shared file)
#         and the pool,
#         starts the servers (ucx_perftest, ucp_cxl_test), prints
#         "vm-sync: pool-ready" (the host then boots b), judges b's killed
#         holder by its lease and reclaims its memory
#         (a and b first check that atomics on the pool are atomic between
#         them: test/vm/vm_atomics)
#   b     the second guest: the clients over UCX_TLS=cxl,tcp (perftest) and
#         UCX_TLS=cxl (ucp_cxl_test), a holder with a heartbeat, killed -9
#         when a says so; then a collectives team of four ranks, two in
#         each guest (coll_ucp_test), every collective checked
# a and b talk over the socket network (busybox nc, ports 5001 on a and
# 5002 on b) at the points where one must wait for the other.
#
# Output: "ok ROLE: NAME" / "FAIL ROLE: NAME: why" per check, programs'
# output indented by "  | ", "vm-info: KEY VALUE" lines the host compares,
# and last "vm-summary: ROLE: N passed, N failed".
R=${1:-solo}
PASS=0
FAIL=0
ok()   { PASS=$((PASS + 1)); echo "ok $R: $1"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL $R: $1: $2"; }
show() { sed 's/^/  | /' "$@"; }
oneline() { tr '\n' ' ' <"$1" | cut -c1-400; }
MODULE=/opt/ucx-cxl/lib/libuct_cxl.so
ALLOC_PRIO=md:cxl,huge,thp,mmap,heap
LEASE=${VM_LEASE_MS:-3000}
A_IP=10.0.2.1
B_IP=10.0.2.2
hostname "vm-$R"

# count NAME FILE RC: add a program's "ucp: N passed, N failed" line
count() {
    line=$(grep -E '^ucp: [0-9]+ passed, [0-9]+ failed$' "$2" | tail -n 1)
    if [ -z "$line" ]; then
        fail "$1" "no 'ucp: N passed, N failed' line (exit $3)"
        return
    fi
    p=$(echo "$line" | sed -E 's/^ucp: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
    PASS=$((PASS + p))
    FAIL=$((FAIL + f))
    echo "# $1: $p passed, $f failed (exit $3)"
    [ "$3" = 0 ] || [ "$f" != 0 ] || fail "$1" "exit $3 although no check failed"
}

# ucx ARGS...: a program with the module, the device pool and a watchdog
ucx() {
    env LD_PRELOAD=$MODULE UCX_CXL_POOL=$DEV UCX_ALLOC_PRIO=$ALLOC_PRIO \
        timeout 150 "$@"
}

# devdax_of REGION ALIGN: create a devdax namespace unless the region has
# one; prints /dev/daxX.Y
devdax_of() {
    out=$(ndctl list -r "$1" -N 2>/dev/null)
    if ! echo "$out" | grep -q '"mode":"devdax"'; then
        out=$(ndctl create-namespace -r "$1" -m devdax -a "$2" 2>&1) || {
            echo "ndctl create-namespace -r $1: $out" >&2
            return 1
        }
        out=$(ndctl list -r "$1" -N -X 2>/dev/null)
    else
        out=$(ndctl list -r "$1" -N -X 2>/dev/null)
    fi
    c=$(echo "$out" | grep -o '"chardev":"dax[0-9.]*"' | head -n 1 | cut -d'"' -f4)
    [ -n "$c" ] && [ -c "/dev/$c" ] && echo "/dev/$c"
}

# pool_create: cxlpool create/info/check on $DEV
pool_create() {
    if cxlpool create "$DEV" --force >/tmp/create.out 2>&1 &&
       grep -q "$DEV" /tmp/create.out; then
        ok "cxlpool create $DEV ($(oneline /tmp/create.out))"
    else
        fail "cxlpool create $DEV" "$(oneline /tmp/create.out)"
    fi
    if cxlpool create "$DEV" >/tmp/create2.out 2>&1; then
        fail "a second create without --force is refused" "it succeeded: $(oneline /tmp/create2.out)"
    elif grep -q 'already holds a ucx-cxl pool' /tmp/create2.out; then
        ok "a second create without --force is refused"
    else
        fail "a second create without --force is refused" "wrong message: $(oneline /tmp/create2.out)"
    fi
    cxlpool info "$DEV" >/tmp/info.out 2>&1
    isize=$(sed -n 's/^size  *\([0-9]*\) bytes$/\1/p' /tmp/info.out)
    if grep -q '^backend  *devdax' /tmp/info.out && [ "$isize" = "$DSIZE" ]; then
        ok "cxlpool info: backend devdax, the whole device ($isize bytes)"
    else
        show /tmp/info.out
        fail "cxlpool info" "backend devdax and size $DSIZE expected"
    fi
    UUID=$(sed -n 's/^uuid  *//p' /tmp/info.out)
    echo "vm-info: pool-uuid $UUID"
    check_clean "cxlpool check after create"
}

# destroy_pool: cxlpool destroy, then the device holds no pool
destroy_pool() {
    if cxlpool destroy "$DEV" >/tmp/destroy.out 2>&1 &&
       ! cxlpool info "$DEV" >/tmp/info.out 2>&1 && grep -q 'not a ucx-cxl pool' /tmp/info.out; then
        ok "cxlpool destroy $DEV (align $DALIGN): info then says 'not a ucx-cxl pool'"
    else
        show /tmp/destroy.out /tmp/info.out
        fail "cxlpool destroy $DEV (align $DALIGN)" "failed"
    fi
}

check_clean() {
    if cxlpool check "$DEV" >/tmp/check.out 2>&1 && grep -q ': clean$' /tmp/check.out; then
        ok "$1: clean"
    else
        show /tmp/check.out
        fail "$1" "not clean"
    fi
}

# no_leftovers NAME: no extents or attachments left in the pool
no_leftovers() {
    cxlpool info "$DEV" >/tmp/info.out 2>&1
    if grep -qE '^used +0 bytes in 0 of' /tmp/info.out &&
       grep -qE '^attachments +0 of' /tmp/info.out; then
        ok "$1: no extents or attachments left"
    else
        fail "$1: no extents or attachments left" \
             "$(grep -E '^(used|attachments|  slot)' /tmp/info.out | tr '\n' ' ')"
    fi
}

# lanes NAME LOG TLS...: the ep_cfg lines of UCX_LOG_LEVEL=info name a cxl
# tag lane on this device
lanes() {
    cfg=$(grep -o 'ep_cfg\[[0-9]*\]: .*' "$2" | sort -u)
    echo "$cfg" | sed 's/^/# /'
    if echo "$cfg" | grep -q "tag(.*cxl/$DEVNAME"; then
        ok "$1: the tag lanes say cxl/$DEVNAME ($(echo "$cfg" | grep 'tag(' | head -n 1))"
    else
        fail "$1: the tag lanes say cxl/$DEVNAME" "ep_cfg: $(echo "$cfg" | tr '\n' ' ')"
    fi
}

# wait_for FILE PATTERN SECS: until FILE has a line matching PATTERN
wait_for() {
    i=0
    while [ $i -lt $(($3 * 10)) ]; do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}

# wait_listen PORT: until a TCP socket of this guest listens on PORT (30 s)
wait_listen() {
    i=0
    while [ $i -lt 60 ] && ! netstat -ltn 2>/dev/null | grep -q ":$1 "; do
        sleep 0.5
        i=$((i + 1))
    done
}

# send HOST PORT MESSAGE: retried until the peer listens (60 s)
send() {
    i=0
    while [ $i -lt 120 ]; do
        echo "$3" | nc "$1" "$2" 2>/dev/null && return 0
        sleep 0.5
        i=$((i + 1))
    done
    return 1
}

# recv PORT MESSAGE SECS: listen for one message starting with MESSAGE
recv() {
    timeout "$3" nc -l -p "$1" >/tmp/recv.$1 2>/dev/null
    grep -q "^$2" /tmp/recv.$1
}

# final FILE: perftest's "Final:" line as "N MB/s, N usec average"
final() {
    grep -E '^Final: ' "$1" | tail -n 1 |
        awk '{ printf "%s MB/s, %s usec per message", $6, $4 }'
}

# wait_dev: libnvdimm and CXL probe asynchronously after modprobe
wait_dev() {
    i=0
    while [ $i -lt 300 ]; do
        ndctl list -R 2>/dev/null | grep -q '"dev":"region' &&
            { [ "$1" != dax ] || ls /dev/dax* >/dev/null 2>&1; } && return 0
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}

net_bytes() {
    echo $(($(cat /sys/class/net/eth0/statistics/rx_bytes) + \
            $(cat /sys/class/net/eth0/statistics/tx_bytes)))
}

# ---------------------------------------------------------------- setup ---
setup_cxl() {
    cxl list -M >/tmp/cxl.json 2>&1
    mem=$(grep -o '"memdev":"mem[0-9]*"' /tmp/cxl.json | head -n 1 | cut -d'"' -f4)
    psize=$(grep -o '"pmem_size":[0-9]*' /tmp/cxl.json | head -n 1 | cut -d: -f2)
    dec=$(cxl list -D -d root 2>/dev/null | grep -o '"decoder":"decoder[0-9.]*"' |
          head -n 1 | cut -d'"' -f4)
    if [ -n "$mem" ] && [ -n "$dec" ] && [ "${psize:-0}" -gt 0 ]; then
        ok "cxl list: memdev $mem with $psize bytes of pmem, root decoder $dec"
    else
        show /tmp/cxl.json
        fail "cxl list: a CXL memdev with pmem and a root decoder" "none"
        return 1
    fi
    if cxl create-region -m -t pmem -d "$dec" -w 1 "$mem" >/tmp/region.out 2>&1; then
        region=$(grep -o '"region":"region[0-9]*"' /tmp/region.out | head -n 1 | cut -d'"' -f4)
        ok "cxl create-region: $region ($(grep -o '"size":"[^"]*"' /tmp/region.out))"
    else
        show /tmp/region.out
        fail "cxl create-region" "failed"
        return 1
    fi
    # the CXL pmem region appears as a libnvdimm region (cxl_pmem)
    nreg=$(ndctl list -R 2>/dev/null | grep -o '"dev":"region[0-9]*"' | head -n 1 | cut -d'"' -f4)
    DEV=$(devdax_of "$nreg" 2M 2>/tmp/ns.err)
    if [ -n "$DEV" ]; then
        ok "ndctl create-namespace -m devdax -a 2M on $nreg: $DEV"
    else
        fail "devdax namespace on the CXL region" "$(oneline /tmp/ns.err)"
        return 1
    fi
}

setup_nvdimm() {
    wait_dev region
    nreg=$(ndctl list -R 2>/dev/null | grep -o '"dev":"region[0-9]*"' | head -n 1 | cut -d'"' -f4)
    # a fresh label area: the kernel shows one label-less raw namespace
    # over the whole region; labels first (they live in the shared file)
    if ndctl list -r "$nreg" -N 2>/dev/null | grep -q '"mode":"raw"'; then
        { ndctl disable-region "$nreg" && ndctl init-labels -f all &&
          ndctl enable-region "$nreg"; } >/tmp/labels.out 2>&1
        if ndctl list -r "$nreg" -N 2>/dev/null | grep -q '"mode":"raw"'; then
            fail "ndctl init-labels on the NVDIMM" "$(oneline /tmp/labels.out)"
            return 1
        fi
        ok "ndctl init-labels: the NVDIMM has a label area (label-size 128K)"
    fi
    # 1 GiB alignment here (2 MiB on the CXL device): every mapping of the
    # device must be aligned to it, the superblock's too
    DEV=$(devdax_of "$nreg" 1G 2>/tmp/ns.err)
    if [ -n "$DEV" ]; then
        ok "ndctl create-namespace -m devdax -a 1G on NVDIMM $nreg: $DEV"
    else
        fail "devdax namespace on the NVDIMM" "region '$nreg': $(oneline /tmp/ns.err)"
        return 1
    fi
}

# after setup: DEVNAME, DSIZE, DALIGN from daxctl; cxlpool list must agree
describe_dev() {
    DEVNAME=${DEV#/dev/}
    daxctl list -d "$DEVNAME" >/tmp/dax.json 2>&1
    DSIZE=$(grep -o '"size":[0-9]*' /tmp/dax.json | head -n 1 | cut -d: -f2)
    DALIGN=$(grep -o '"align":[0-9]*' /tmp/dax.json | head -n 1 | cut -d: -f2)
    echo "vm-info: device $DEV size $DSIZE align $DALIGN"
    cxlpool list >/tmp/list.out 2>&1
    cxlpool list --json >/tmp/list.json 2>&1
    if grep -qE "^devdax +$DEV +$DSIZE +align $DALIGN( |$)" /tmp/list.out &&
       ! grep "$DEV" /tmp/list.out | grep -q system-ram &&
       grep -q "\"kind\":\"devdax\",\"path\":\"$DEV\",\"size\":$DSIZE" /tmp/list.json; then
        ok "cxlpool list finds $DEV through libdaxctl ($DSIZE bytes, align $DALIGN)"
    else
        show /tmp/list.out /tmp/list.json
        fail "cxlpool list finds $DEV" "want size $DSIZE align $DALIGN"
    fi
}

# ------------------------------------------------------------ system-ram ---
system_ram() {
    if ! daxctl reconfigure-device --mode=system-ram "$DEVNAME" >/tmp/sr.out 2>&1 ||
       ! daxctl list -d "$DEVNAME" | grep -q '"mode":"system-ram"'; then
        show /tmp/sr.out
        fail "daxctl reconfigure-device --mode=system-ram (kmem)" "failed"
        return
    fi
    ok "daxctl reconfigure-device --mode=system-ram: $(grep -o '"online_memblocks":[0-9]*' /tmp/sr.out) of $(grep -o '"total_memblocks":[0-9]*' /tmp/sr.out)"
    cxlpool list >/tmp/list.out 2>&1
    if grep "$DEV" /tmp/list.out | grep -q 'system-ram: not usable'; then
        ok "cxlpool list marks $DEV system-ram: not usable"
    else
        fail "cxlpool list marks $DEV system-ram" "$(oneline /tmp/list.out)"
    fi
    for cmd in create info check; do
        if cxlpool $cmd "$DEV" >/tmp/sr.out 2>&1; then
            fail "cxlpool $cmd refuses a system-ram device" "it succeeded: $(oneline /tmp/sr.out)"
        elif grep -q 'device is in system-ram mode' /tmp/sr.out; then
            ok "cxlpool $cmd refuses a system-ram device: $(oneline /tmp/sr.out)"
        else
            fail "cxlpool $cmd refuses a system-ram device with its reason" "$(oneline /tmp/sr.out)"
        fi
    done
    # memory blocks first offline (movable, so this can succeed), then devdax
    daxctl offline-memory "$DEVNAME" >/tmp/sr.out 2>&1
    if daxctl reconfigure-device --mode=devdax "$DEVNAME" >>/tmp/sr.out 2>&1 &&
       daxctl list -d "$DEVNAME" | grep -q '"mode":"devdax"' && [ -c "$DEV" ]; then
        ok "daxctl offline-memory + reconfigure-device --mode=devdax: back in devdax mode"
    else
        show /tmp/sr.out
        fail "back to devdax mode" "failed"
    fi
}

# -------------------------------------------------------------- holders ---
# holder_local: a killed holder on this host, judged by pid, reclaimed
holder_local() {
    cxlpool_holder "$DEV" -n 2 -s 4m -H >/tmp/holder.out 2>&1 &
    hp=$!
    if ! wait_for /tmp/holder.out '^ready' 30; then
        fail "holder attaches the device pool" "$(oneline /tmp/holder.out)"
        kill -9 $hp 2>/dev/null
        return
    fi
    kill -9 $hp
    wait $hp 2>/dev/null
    cxlpool check "$DEV" >/tmp/check.out 2>&1
    rc=$?
    if [ $rc = 1 ] && grep -q ' 1 dead attachment(s), 2 extent(s) (8388608 bytes) held by dead owners' /tmp/check.out &&
       grep -q 'is dead (process gone)' /tmp/check.out; then
        ok "kill -9 of a holder: check sees it dead by pid, 2 extents (8 MiB) held"
    else
        show /tmp/check.out
        fail "kill -9 of a holder: check sees it dead" "exit $rc"
    fi
    if cxlpool check --repair "$DEV" >/tmp/check.out 2>&1 && grep -q 'reclaimed 2 extent(s) and 1 attachment(s)' /tmp/check.out; then
        ok "check --repair reclaims the holder's 2 extents and its slot"
    else
        show /tmp/check.out
        fail "check --repair reclaims" "failed"
    fi
    no_leftovers "after the repair"
}

# --------------------------------------------------------------- UCP ------
ucp_local() {
    ucx env UCX_TLS=cxl ucp_cxl_test loopback >/tmp/lb.out 2>&1
    rc=$?
    show /tmp/lb.out | tail -n 5
    count "ucp_cxl_test loopback" /tmp/lb.out $rc

    ucx env UCX_TLS=cxl ucp_cxl_test server 0 >/tmp/srv.out 2>&1 &
    sp=$!
    if wait_for /tmp/srv.out '^# listening on port' 60; then
        port=$(sed -n 's/^# listening on port \([0-9]*\)$/\1/p' /tmp/srv.out)
        ucx env UCX_TLS=cxl ucp_cxl_test client 127.0.0.1 "$port" >/tmp/cli.out 2>&1
        crc=$?
        wait $sp
        src=$?
        count "ucp_cxl_test server (two processes)" /tmp/srv.out $src
        count "ucp_cxl_test client (two processes)" /tmp/cli.out $crc
    else
        kill $sp 2>/dev/null
        show /tmp/srv.out
        fail "ucp_cxl_test server" "did not report its port"
    fi
    no_leftovers "after ucp_cxl_test loopback and server/client"

    ucx env UCX_TLS=cxl UCX_KEEPALIVE_INTERVAL=1s ucp_cxl_test peer-failure >/tmp/pf.out 2>&1
    rc=$?
    count "ucp_cxl_test peer-failure" /tmp/pf.out $rc
    cxlpool check --repair "$DEV" >/tmp/check.out 2>&1
    if grep -q 'reclaimed' /tmp/check.out; then
        ok "peer-failure: check --repair reclaims the killed server"
    else
        show /tmp/check.out
        fail "peer-failure: check --repair reclaims" "nothing reclaimed"
    fi
    check_clean "after the peer-failure repair"
}

# perf NAME TLS SERVER-ARGS / client: ucx_perftest tag_bw, 1 MiB x 32
PERF_ARGS="-t tag_bw -s 1048576 -n 32 -w 2"
perf_local() {
    ucx env UCX_TLS=cxl ucx_perftest -p 13337 >/tmp/pts.out 2>&1 &
    sp=$!
    sleep 2
    i=0
    while [ $i -lt 30 ]; do
        ucx env UCX_TLS=cxl UCX_LOG_LEVEL=info ucx_perftest 127.0.0.1 -p 13337 \
            $PERF_ARGS >/tmp/ptc.out 2>&1 && break
        grep -q 'Connection refused\|connect' /tmp/ptc.out || break
        sleep 1
        i=$((i + 1))
    done
    wait $sp
    src=$?
    if grep -qE '^Final: +32 ' /tmp/ptc.out && [ $src = 0 ]; then
        ok "ucx_perftest tag_bw 32 x 1 MiB between two processes over UCX_TLS=cxl: $(final /tmp/ptc.out)"
    else
        show /tmp/ptc.out /tmp/pts.out | tail -n 30
        fail "ucx_perftest tag_bw over UCX_TLS=cxl" "server exit $src"
    fi
    lanes "ucx_perftest (two processes)" /tmp/ptc.out
    no_leftovers "after ucx_perftest"
}

# ---------------------------------------------------------- collectives ---
# coll_auto: with UCX_CXL_POOL unset, a team whose caller names no pool is
# in the pool the transport's 'auto' attaches (this device), not in the
# emulated default (it was, before the extensions shared one rule)
coll_auto() {
    rm -f /dev/shm/ucx-cxl-*.pool
    # a default pool that fits the guest's /dev/shm, should one be made:
    # then a wrong pick shows where the team went, not a failed create
    env -u UCX_CXL_POOL -u CXL_COLL_POOL UCX_CXL_POOL_SIZE=64m \
        timeout 120 vm_coll_pool 90 >/tmp/cp.out 2>&1 &
    cp=$!
    if ! wait_for /tmp/cp.out '^ready pid' 60; then
        show /tmp/cp.out
        fail "a collectives team with UCX_CXL_POOL unset" "not created"
        kill $cp 2>/dev/null
        wait $cp 2>/dev/null
        return
    fi
    name=cxl-coll:$(printf %x "$(sed -n 's/^ready pid //p' /tmp/cp.out)"):
    cxlpool info "$DEV" >/tmp/cpi.out 2>&1
    ls /dev/shm >/tmp/cpshm.out 2>&1
    kill -TERM $cp
    wait $cp
    rc=$?
    if grep -q "^  $name" /tmp/cpi.out; then
        ok "a team with UCX_CXL_POOL unset has its partition on $DEV: $(grep "^  $name" /tmp/cpi.out | head -n 1 | tr -s ' ')"
    else
        show /tmp/cpi.out
        fail "a team with UCX_CXL_POOL unset has its partition on $DEV" \
             "no $name... in cxlpool info (/dev/shm: $(oneline /tmp/cpshm.out))"
    fi
    if grep -q 'ucx-cxl-.*\.pool' /tmp/cpshm.out; then
        fail "no emulated default pool is made for the team" "$(oneline /tmp/cpshm.out)"
        rm -f /dev/shm/ucx-cxl-*.pool
    else
        ok "no emulated default pool is made for the team"
    fi
    if [ $rc = 0 ] && grep -q '^done' /tmp/cp.out; then
        ok "the team is destroyed on SIGTERM"
    else
        show /tmp/cp.out
        fail "the team is destroyed on SIGTERM" "exit $rc"
    fi
    no_leftovers "after the team"
}

# ------------------------------------------------------------ broker ------
# the dataset-chunk broker on the device: its arena is an extent of the
# device pool, local readers read through zero-copy views, and the views'
# read-only mapping of the arena must be made at the device's alignment
# (a 1 GiB-aligned device refused the page-aligned one and views fell back
# to the writable mapping)
broker_local() {
    mkdir -p /tmp/bds
    brk_reader --gen /tmp/bds 24 65536 5 || { fail "broker dataset" "gen"; return; }
    ucx cxl-broker serve --pool "$DEV" --listen 127.0.0.1:18555 --capacity 16m \
        >/tmp/bs.out 2>/tmp/bs.log &
    bp=$!
    if ! wait_for /tmp/bs.out '^cxl-broker: ready' 60; then
        show /tmp/bs.log
        fail "cxl-broker serve on $DEV" "not ready"
        killall -TERM cxl-broker 2>/dev/null
        kill $bp 2>/dev/null
        return
    fi
    ok "cxl-broker serves a pool on $DEV: $(head -n 1 /tmp/bs.out)"
    if ucx env CXL_BROKER=127.0.0.1:18555 cxl-broker add vmds /tmp/bds >/tmp/ba.out 2>&1 &&
       ucx env CXL_BROKER=127.0.0.1:18555 brk_reader --local 1 --view --check vmds \
           >/tmp/br.out 2>&1 &&
       grep -q 'samples 24 .* errors 0 local 1 views-read-only 1' /tmp/br.out; then
        ok "a local reader checks all 24 samples through read-only zero-copy views: $(grep '^brk_reader: samples' /tmp/br.out)"
    else
        show /tmp/ba.out /tmp/br.out
        fail "broker reader on $DEV" "$(oneline /tmp/br.out)"
    fi
    # destroy refuses while the broker serves (a one-line error; it read
    # the broker's address from the unmapped arena and crashed before)
    if cxl-broker destroy --pool "$DEV" >/tmp/bd.out 2>&1; then
        fail "cxl-broker destroy while the broker serves" "not refused"
    elif [ "$(wc -l </tmp/bd.out)" = 1 ] && grep -q 'serves this pool at 127.0.0.1:18555: stop it first' /tmp/bd.out; then
        ok "cxl-broker destroy while the broker serves is refused: $(cat /tmp/bd.out)"
    else
        fail "cxl-broker destroy while the broker serves" "$(oneline /tmp/bd.out)"
    fi
    # $bp is the subshell of the ucx function: stop the broker itself
    killall -TERM cxl-broker 2>/dev/null
    kill $bp 2>/dev/null
    wait $bp 2>/dev/null
    i=0
    while [ $i -lt 100 ] && ! cxl-broker destroy --pool "$DEV" >/tmp/bd.out 2>&1; do
        sleep 0.1
        i=$((i + 1))
    done
    if [ $i -lt 100 ]; then
        ok "cxl-broker destroy removes its arena once the broker stopped: $(cat /tmp/bd.out)"
    else
        cxlpool info "$DEV" | show
        fail "cxl-broker destroy after the broker stopped" "$(oneline /tmp/bd.out)"
    fi
}

# ------------------------------------------- collectives across guests ---
# A team of four ranks, 0 and 1 in a, 2 and 3 in b: coll_ucp_test
# bootstraps over UCP (rendezvous at rank 0 on a's address, endpoints over
# UCX_TLS=cxl alone) and checks every collective; the team's lines and
# slots are in the pool on the shared device, so the data crosses the
# kernels through it.  Twice: on the hw pool, and on a pool created
# --coherence sw --hosts 2 with each guest a host of its own (COLL_ENV).
COLL_PORT=13340
COLL_ENV=
COLL_WHAT=hw

# coll_rank R: start rank R in the background (its output in /tmp/coll.R)
coll_rank() {
    ucx env UCX_TLS=cxl $COLL_ENV coll_ucp_test --rank "$1" --size 4 \
        --rendezvous "$A_IP:$COLL_PORT" --timeout 60 >/tmp/coll.$1 2>&1 &
}

# coll_count R PID: wait for rank R and add its "coll-ucp rank R: N
# passed, N failed" line
coll_count() {
    wait "$2"
    rc=$?
    line=$(grep -E "^coll-ucp rank $1: [0-9]+ passed, [0-9]+ failed\$" /tmp/coll.$1)
    p=$(echo "$line" | sed -nE 's/.*: ([0-9]+) passed.*/\1/p')
    f=$(echo "$line" | sed -nE 's/.* ([0-9]+) failed$/\1/p')
    if [ "$rc" = 0 ] && [ -n "$p" ] && [ "$p" -gt 0 ] && [ "$f" = 0 ]; then
        ok "collectives across the guests ($COLL_WHAT), rank $1 of 4 (ranks 0, 1 in a, 2, 3 in b): $p checks passed"
    else
        show /tmp/coll.$1 | grep -E 'FAIL|rror|coll-ucp' | head -n 20
        fail "collectives across the guests ($COLL_WHAT), rank $1 of 4" "exit $rc, '${line:-no result line}'"
    fi
}

# coll_across_a STEP: ranks 0 and 1, b told to start 2 and 3 by STEP
coll_across_a() {
    coll_rank 0
    c0=$!
    wait_listen $COLL_PORT
    coll_rank 1
    c1=$!
    timeout 150 nc -l -p 5001 >/tmp/recv.5001 2>/dev/null &
    lis=$!
    send $B_IP 5002 "$1" || fail "tell b to start its ranks" "b does not listen"
    coll_count 0 $c0
    coll_count 1 $c1
    wait $lis
    grep -q '^colldone' /tmp/recv.5001 || fail "b reports its ranks' end" "no message"
    no_leftovers "after the collectives across the guests ($COLL_WHAT)"
}

# the same team on a software-coherent pool: guest a is host 0, b host 1
coll_sw_across_a() {
    if cxlpool create "$DEV" --force --coherence sw --hosts 2 >/tmp/create.out 2>&1; then
        ok "cxlpool create $DEV --coherence sw --hosts 2 ($(oneline /tmp/create.out))"
    else
        fail "cxlpool create $DEV --coherence sw --hosts 2" "$(oneline /tmp/create.out)"
        return
    fi
    COLL_ENV="UCX_CXL_COHERENCE=sw UCX_CXL_HOST_INDEX=0"
    COLL_WHAT="sw, a host 0, b host 1"
    coll_across_a collsw
    destroy_pool
}

coll_across_b() {
    n0=$(net_bytes)
    coll_rank 2
    c2=$!
    coll_rank 3
    c3=$!
    coll_count 2 $c2
    coll_count 3 $c3
    n1=$(net_bytes)
    # the all-to-all alone moves 2.4 MB per rank
    if [ $((n1 - n0)) -lt 1048576 ]; then
        ok "the collectives' data ($COLL_WHAT) went through the device: eth0 moved $((n1 - n0)) bytes"
    else
        fail "the collectives' data ($COLL_WHAT) went through the device" "eth0 moved $((n1 - n0)) bytes (>= 1 MiB)"
    fi
}

# ------------------------------------------------------------ the roles ---
role_solo() {
    setup_cxl || return
    describe_dev
    system_ram
    pool_create
    holder_local
    ucp_local
    perf_local
    coll_auto
    check_clean "at the end"
    destroy_pool
}

role_a() {
    setup_nvdimm || return
    describe_dev
    pool_create
    vm_atomics "$DEV" create 2 >/tmp/atomics.out 2>&1 &
    atp=$!
    # the servers first, so that b finds them when it boots
    ucx env UCX_TLS=cxl,tcp ucx_perftest -p 13337 >/tmp/pts.out 2>&1 &
    pts=$!
    ucx env UCX_TLS=cxl ucp_cxl_test server 13338 $A_IP >/tmp/srv.out 2>&1 &
    ucs=$!
    timeout 90 nc -l -p 5001 >/tmp/recv.5001 2>/dev/null &
    lis=$!
    wait_for /tmp/srv.out '^# listening on port' 60 ||
        fail "ucp_cxl_test server starts" "$(oneline /tmp/srv.out)"
    wait_listen 13337
    echo "vm-sync: pool-ready"

    wait $atp
    rc=$?
    if [ $rc = 0 ]; then
        ok "atomic fetch-add on the pool is atomic across the guests: $(oneline /tmp/atomics.out)"
    else
        fail "atomic fetch-add on the pool across the guests" "exit $rc: $(oneline /tmp/atomics.out)"
    fi
    wait $pts
    rc=$?
    if [ $rc = 0 ]; then
        ok "ucx_perftest server (client in the other guest) exits 0"
    else
        show /tmp/pts.out | tail -n 20
        fail "ucx_perftest server" "exit $rc"
    fi
    wait $ucs
    rc=$?
    show /tmp/srv.out | tail -n 5
    count "ucp_cxl_test server (client in the other guest)" /tmp/srv.out $rc

    # b's holder: alive through its heartbeat, then killed
    wait $lis
    if ! grep -q '^held' /tmp/recv.5001; then
        fail "b reports its holder" "no message"
        return
    fi
    sleep $((2 * LEASE / 1000 + 1))
    cxlpool info "$DEV" --json >/tmp/info.json 2>&1
    remote=$(grep -o '{"slot":[^}]*}' /tmp/info.json | grep '"same_host":false')
    if echo "$remote" | grep -q '"alive":true' && echo "$remote" | grep -q "\"lease_ms\":$LEASE"; then
        ok "b's holder is alive after 2 leases (its heartbeat crosses guests): $remote"
    else
        fail "b's holder alive through its heartbeat" "$(oneline /tmp/info.json)"
    fi
    timeout 60 nc -l -p 5001 >/tmp/recv.5001 2>/dev/null &
    lis=$!
    send $B_IP 5002 kill || fail "tell b to kill its holder" "b does not listen"
    wait $lis
    grep -q '^killed' /tmp/recv.5001 || fail "b reports the kill" "no message"
    t0=$(date +%s)
    i=0
    while [ $i -lt $((4 * LEASE / 100)) ]; do
        cxlpool check "$DEV" >/tmp/check.out 2>&1
        [ $? = 1 ] && grep -q 'is dead' /tmp/check.out && break
        sleep 0.1
        i=$((i + 1))
    done
    t1=$(date +%s)
    if grep -q ' 1 dead attachment(s), 3 extent(s) (6291456 bytes) held by dead owners' /tmp/check.out &&
       grep -q 'is dead (lease expired' /tmp/check.out; then
        ok "a sees b's killed holder dead by its lease within $((t1 - t0)) s (lease $LEASE ms): $(grep 'is dead' /tmp/check.out)"
    else
        show /tmp/check.out
        fail "a sees b's killed holder dead by its lease" "not within 4 leases"
    fi
    if cxlpool check --repair "$DEV" >/tmp/check.out 2>&1 &&
       grep -q 'reclaimed 3 extent(s) and 1 attachment(s)' /tmp/check.out; then
        ok "a reclaims the memory of b's dead holder (3 extents, 6 MiB)"
    else
        show /tmp/check.out
        fail "a reclaims b's dead holder" "failed"
    fi
    no_leftovers "after the cross-guest repair"
    coll_across_a coll
    broker_local
    check_clean "at the end"
    destroy_pool
    coll_sw_across_a
    send $B_IP 5002 done || fail "tell b we are done" "b does not listen"
}

role_b() {
    wait_dev dax
    DEV=
    for d in /dev/dax*; do
        [ -c "$d" ] && DEV=$d && break
    done
    if [ -z "$DEV" ]; then
        fail "the namespace a created is here" "no /dev/dax* ($(ndctl list -N 2>&1 | tr '\n' ' '))"
        return
    fi
    ok "the devdax namespace a created is here: $DEV"
    describe_dev
    cxlpool info "$DEV" >/tmp/info.out 2>&1
    UUID=$(sed -n 's/^uuid  *//p' /tmp/info.out)
    echo "vm-info: pool-uuid $UUID"
    check_clean "b sees a's pool"

    # a waits for this one first: both add to one word for 2 s
    if vm_atomics "$DEV" join 2 >/tmp/atomics.out 2>&1; then
        ok "atomic fetch-add on the pool is atomic across the guests: $(oneline /tmp/atomics.out)"
    else
        fail "atomic fetch-add on the pool across the guests" "$(oneline /tmp/atomics.out)"
    fi

    # first: a's ucp_cxl_test server waits 60 s for its client
    ucx env UCX_TLS=cxl ucp_cxl_test client $A_IP 13338 >/tmp/cli.out 2>&1
    rc=$?
    show /tmp/cli.out | tail -n 5
    count "ucp_cxl_test client (server in the other guest, UCX_TLS=cxl)" /tmp/cli.out $rc


    # ucx_perftest client over cxl,tcp: the lanes say cxl, the payload
    # (32 MiB) does not cross the network
    n0=$(net_bytes)
    i=0
    while [ $i -lt 60 ]; do
        ucx env UCX_TLS=cxl,tcp UCX_LOG_LEVEL=info ucx_perftest $A_IP -p 13337 \
            $PERF_ARGS >/tmp/ptc.out 2>&1 && break
        sleep 1
        i=$((i + 1))
    done
    n1=$(net_bytes)
    if grep -qE '^Final: +32 ' /tmp/ptc.out; then
        ok "ucx_perftest tag_bw 32 x 1 MiB from guest b to guest a over UCX_TLS=cxl,tcp: $(final /tmp/ptc.out)"
    else
        show /tmp/ptc.out | tail -n 30
        fail "ucx_perftest b -> a" "no result"
    fi
    lanes "ucx_perftest b -> a" /tmp/ptc.out
    if [ $((n1 - n0)) -lt 4194304 ]; then
        ok "the 32 MiB went through the device: eth0 moved $((n1 - n0)) bytes"
    else
        fail "the payload went through the device" "eth0 moved $((n1 - n0)) bytes (>= 4 MiB)"
    fi

    # a holder with a short lease and a heartbeat, killed when a says so
    timeout 120 nc -l -p 5002 >/tmp/recv.5002 2>/dev/null &
    lis=$!
    cxlpool_holder "$DEV" -n 3 -s 2m -H -L "$LEASE" -B >/tmp/holder.out 2>&1 &
    hp=$!
    if wait_for /tmp/holder.out '^ready' 30; then
        ok "holder attached with lease $LEASE ms and a heartbeat"
    else
        fail "holder attaches" "$(oneline /tmp/holder.out)"
    fi
    send $A_IP 5001 "held $hp" || fail "tell a about the holder" "a does not listen"
    wait $lis
    grep -q '^kill' /tmp/recv.5002 || fail "a asks for the kill" "no message"
    kill -9 $hp
    wait $hp 2>/dev/null
    send $A_IP 5001 killed || fail "tell a about the kill" "a does not listen"
    # then a names each step (its send retries until this one listens)
    while :; do
        timeout 150 nc -l -p 5002 >/tmp/recv.5002 2>/dev/null
        step=$(head -n 1 /tmp/recv.5002)
        case "$step" in
            coll)   COLL_ENV= COLL_WHAT=hw ;;
            collsw) COLL_ENV="UCX_CXL_COHERENCE=sw UCX_CXL_HOST_INDEX=1"
                    COLL_WHAT="sw, a host 0, b host 1" ;;
            done)   break ;;
            *)      fail "a names the next step" "got '$step'"
                    break ;;
        esac
        coll_across_b
        send $A_IP 5001 colldone || fail "tell a the ranks ended" "a does not listen"
    done
}

case "$R" in
    solo) role_solo ;;
    a)    role_a ;;
    b)    role_b ;;
    probe) ;;
    *)    fail "role" "unknown role '$R'" ;;
esac
echo "vm-summary: $R: $PASS passed, $FAIL failed"
