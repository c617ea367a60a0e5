#!/usr/bin/env bash
#
# run-broker-cli.sh - the cxl-broker command line (issue 13).
#   1. every command's --help (and cxl-broker --help) exits 0 and prints a
#      Usage line on stdout; no command exits 2; an unknown command or
#      option exits non-zero
#   2. bad input, each one line on stderr that names the file or the limit,
#      a non-zero exit and nothing on stdout: a missing path, an unreadable
#      file, a truncated .tar, a .tar with a corrupted header, a .npy whose
#      header does not parse, a .npy shorter than its header says, --format
#      raw without --record-size, a raw file that is not whole records,
#      --pin-bytes over the capacity, a bad file re-added under the name of
#      a resident dataset, warm/rm/evict of an unknown dataset.  After each
#      bad add the resident dataset 'good' still reads (--check), with its
#      version and resident bytes unchanged, and no bad name is listed.
#      (The broker runs without CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH, so a
#      file of mode 000 is unreadable to it although it runs as root.)
#   3. ls --json, stat --json and add --json parse as JSON, a dataset name
#      with a quote and a backslash included; ls --json also without
#      LD_PRELOAD (the library loads the cxl module: no UCX warning)
#   4. a client of a stopped broker (ls, stat, add, and a reader): one line
#      "no broker at ADDR", exit 1
#   5. zero configuration: in a private mount and network namespace
#      (unshare, a fresh tmpfs on /dev/shm, its own loopback, so the real
#      default pool and port are untouched), 'cxl-broker serve' with no
#      options creates the default pool and listens on the default
#      address; 'cxl-broker ls', 'add' and a reader with no --broker and no
#      CXL_BROKER or UCX_CXL_POOL find it; the real /dev/shm's default pool
#      is as it was.  Reported as not run (with the reason) where unshare is
#      refused.
#
# Environment: CXL_BUILDDIR (default TOP/build-release), CXLPOOL_BIN,
# CXL_UCT_MODULE, CXL_BROKER_BIN, BRK_READER; BRK_KEEP=1 keeps the outputs.
# Last line "broker-cli: N passed, N failed"; exit 0 only when nothing
# failed.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/broker-common.sh"
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
brk_init broker-cli

# ---- 1. help, unknown commands and options ----
for c in "" serve add ls warm stat evict rm destroy; do
    "$BRK" $c --help >"$SCR/help.out" 2>"$SCR/help.err"
    rc=$?
    CHECK_WHY="exit $rc: $(head -n 2 "$SCR/help.out" | tr '\n' ' ')"
    [ $rc = 0 ] && grep -q "^Usage: cxl-broker ${c:-COMMAND}" "$SCR/help.out"
    verdict $? "1. cxl-broker ${c:+$c }--help: exit 0, $(grep -m1 '^Usage:' "$SCR/help.out")"
done
"$BRK" >/dev/null 2>&1
check "1. cxl-broker with no command exits 2" [ $? = 2 ]
"$BRK" frobnicate >"$SCR/u.out" 2>"$SCR/u.err"
rc=$?
CHECK_WHY="exit $rc: $(head -n 1 "$SCR/u.err")"
[ $rc != 0 ] && grep -q "unknown command 'frobnicate'" "$SCR/u.err"
verdict $? "1. an unknown command: exit $rc, $(head -n 1 "$SCR/u.err")"
for c in serve add ls warm stat evict rm destroy; do
    "$BRK" $c --bogus-option >/dev/null 2>&1
    rc=$?
    check "1. cxl-broker $c --bogus-option exits non-zero ($rc)" [ $rc != 0 ]
done

# ---- the broker of 2..4, without the capabilities that let root read anything ----
POOL=$(new_pool cli 512m) || exit 99
BRK_WRAP=(setpriv --bounding-set=-dac_override,-dac_read_search --)
brk_start "$POOL" --capacity 64m || finish
BRK_WRAP=()
D=$SCR/data
gen_files "$D/good" 50 40000 1
cli add --chunk-size 256k good "$D/good" >"$SCR/add-good.out" 2>&1
cli warm good >/dev/null 2>&1
ls_json "$SCR/ls-good.json"
GOOD=$(jget "$SCR/ls-good.json" "[(x['version'], x['resident_bytes']) for x in d if x['name'] == 'good']")
check "2. dataset 'good' added and warmed: (version, resident bytes) $GOOD" [ "$GOOD" = "[(1, 2000000)]" ]

# err1 NAME WANT... -- CMD...: CMD fails with one line on stderr that
# contains every WANT, nothing on stdout
err1() {
    local name=$1 w want=() rc n why=''
    shift
    while [ "$1" != -- ]; do
        want+=("$1")
        shift
    done
    shift
    "$@" >"$SCR/e.out" 2>"$SCR/e.err"
    rc=$?
    n=$(wc -l <"$SCR/e.err")
    [ $rc != 0 ] || why+="exit 0; "
    [ "$n" = 1 ] || why+="$n lines on stderr; "
    [ -s "$SCR/e.out" ] && why+="stdout: $(head -c 200 "$SCR/e.out"); "
    for w in "${want[@]}"; do
        grep -qF -- "$w" "$SCR/e.err" || why+="no '$w'; "
    done
    if [ -z "$why" ]; then
        ok "$name: exit $rc, $(cat "$SCR/e.err")"
    else
        fail "$name" "$why stderr: $(head -c 600 "$SCR/e.err" | tr '\n' '|')"
    fi
}

# intact WHAT: 'good' still reads, unchanged, and no bad name is listed
intact() {
    local got
    ls_json "$SCR/ls-i.json"
    got=$(jget "$SCR/ls-i.json" "([(x['version'], x['resident_bytes']) for x in d if x['name'] == 'good'], sorted(x['name'] for x in d if x['name'].startswith('bad')))")
    rdr --check good >"$SCR/i.out" 2>&1
    CHECK_WHY="exit $?: $(rsummary "$SCR/i.out"); ls: $got"
    [ "$(rfield "$SCR/i.out" errors)" = 0 ] && [ "$(rfield "$SCR/i.out" samples)" = 50 ] &&
        [ "$got" = "($GOOD, [])" ]
    verdict $? "   after $1: 'good' reads (--check), version and resident bytes unchanged, no bad dataset listed"
}

# ---- 2. bad input ----
# (destroy read the serving broker's pid and address for its refusal from
# the arena after it had unmapped the pool: a segfault instead)
err1 "2. destroy while the broker serves" "a broker (pid" "serves this pool at $BRK_ADDR: stop it first" -- \
    cli destroy --pool "$POOL"
intact "a refused destroy"
err1 "2. add of a missing path" "$D/nope" "No such file" -- cli add bad1 "$D/nope"
intact "a missing path"

gen_files "$D/unr" 5 1000 1
chmod 000 "$D/unr/s000003.bin"
err1 "2. add of a directory with an unreadable file" "$D/unr/s000003.bin" "Permission denied" -- \
    cli add bad2 "$D/unr"
intact "an unreadable file"

gen_tar "$D/sh" 1 20 5
size=$(stat -c %s "$D/sh-0.tar")
head -c $((size / 2 + 100)) "$D/sh-0.tar" >"$D/cut.tar"
err1 "2. add of a truncated .tar" "$D/cut.tar" "truncated" -- cli add bad3 "$D/cut.tar"
intact "a truncated .tar"

cp "$D/sh-0.tar" "$D/hdr.tar"
# the second member's header: its checksum field (offset 148) spoiled
off=$("$PY" -c 'import sys, tarfile; print(tarfile.open(sys.argv[1]).getmembers()[1].offset)' "$D/hdr.tar")
printf 'XXXXXX' | dd of="$D/hdr.tar" bs=1 seek=$((off + 148)) conv=notrunc status=none
err1 "2. add of a .tar with a corrupted header" "$D/hdr.tar" "does not parse" -- cli add bad4 "$D/hdr.tar"
intact "a corrupted .tar header"

"$PY" -c 'import struct, sys
h = "{\x27descr\x27: \x27<f4\x27, \x27fortran_order\x27: False, \x27shape\x27: (10, 4 }"
h += " " * (63 - (10 + len(h)) % 64) + "\n"
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + bytes(160))' "$D/hdr.npy"
err1 "2. add of a .npy whose header does not parse" "$D/hdr.npy" "does not parse" -- cli add bad5 "$D/hdr.npy"
intact "a bad .npy header"

gen_npy "$D/npy" a 1 100 "16" "<f4" 1
size=$(stat -c %s "$D/npy/a000.npy")
head -c $((size - 64)) "$D/npy/a000.npy" >"$D/short.npy"
err1 "2. add of a .npy shorter than its header says" "$D/short.npy" -- cli add bad6 "$D/short.npy"
intact "a short .npy"

gen_raw "$D/r.raw" 10000 1
err1 "2. add --format raw without --record-size" "--record-size" -- cli add --format raw bad7 "$D/r.raw"
err1 "2. add of a raw file that is not whole records" "$D/r.raw" "not a multiple of the record size 4096" -- \
    cli add --format raw --record-size 4096 bad8 "$D/r.raw"
intact "a raw file of part records"

err1 "2. add --pin-bytes over the capacity" "--pin-bytes 100 MiB" "capacity of 64 MiB" -- \
    cli add --pin-bytes 100m bad9 "$D/good"
intact "--pin-bytes over the capacity"

err1 "2. add of a bad file under the name of the resident dataset" "$D/hdr.tar" -- cli add good "$D/hdr.tar"
intact "a bad re-add of 'good'"

for c in warm rm evict; do
    err1 "2. $c of an unknown dataset" "no dataset 'nosuch'" -- cli $c nosuch
done
intact "warm, rm, evict of an unknown dataset"

# ---- 3. JSON ----
Q='q"x\y'
cli add --json "$Q" "$D/good" >"$SCR/add-q.json" 2>&1
got=$(jget "$SCR/add-q.json" 'd["name"]')
CHECK_WHY="add --json: $(cat "$SCR/add-q.json")"
check "3. add --json parses, the name with a quote and a backslash comes back" [ "$got" = "$Q" ]
ls_json "$SCR/ls.json"
got=$(jget "$SCR/ls.json" "sorted(x['name'] for x in d)")
CHECK_WHY="ls --json: $(head -c 400 "$SCR/ls.json")"
check "3. ls --json parses and lists both datasets" [ "$got" = "['good', 'q\"x\\\\y']" ]
stat_json "$SCR/st.json"
got=$(jget "$SCR/st.json" '(d["capacity"], d["resident_chunks"] >= 8, isinstance(d["epochs"], list))')
CHECK_WHY="stat --json: $(head -c 400 "$SCR/st.json")"
check "3. stat --json parses (capacity, resident chunks, epochs list)" [ "$got" = "(67108864, true, true)" ]
# without LD_PRELOAD the client library loads the cxl module itself; UCX
# said "transport 'cxl' is not available" on stdout before, ahead of the JSON
NOPRE=()
for e in "${BENV[@]}"; do [[ $e == LD_PRELOAD=* ]] || NOPRE+=("$e"); done
env -u LD_PRELOAD "${NOPRE[@]}" timeout -k 5 "$WATCHDOG" "$BRK" ls --json \
    >"$SCR/ls-nopre.json" 2>"$SCR/ls-nopre.err"
got=$(jget "$SCR/ls-nopre.json" "sorted(x['name'] for x in d)" 2>&1)
CHECK_WHY="ls --json without LD_PRELOAD: $(head -c 300 "$SCR/ls-nopre.json") $(head -c 300 "$SCR/ls-nopre.err")"
! grep -q "UCX  WARN" "$SCR/ls-nopre.json" "$SCR/ls-nopre.err" && [ "$got" = "['good', 'q\"x\\\\y']" ]
verdict $? "3. ls --json without LD_PRELOAD: no UCX warning, the JSON parses"

# ---- 3b. hit counts: reads served from cached pins are reported in
# counted batches (one TOUCH per 4096 reads); stat must count every read ----
gen_raw "$D/cnt.raw" $((9001 * 64)) 3
cli add --format raw --record-size 64 --chunk-size 256k cnt "$D/cnt.raw" >/dev/null 2>&1
cli warm cnt >/dev/null 2>&1
rdr --order random --epochs 2 --check cnt >"$SCR/cnt.out" 2>&1
stat_json "$SCR/st-cnt.json"
got=$(jget "$SCR/st-cnt.json" "(sum(x['hits'] for x in d['epochs'] if x['name'] == 'cnt'), sum(x['misses'] for x in d['epochs'] if x['name'] == 'cnt'))")
CHECK_WHY="reader: $(rsummary "$SCR/cnt.out"); (hits, misses) $got"
[ "$(rfield "$SCR/cnt.out" errors)" = 0 ] && [ "$got" = "(18002, 0)" ]
verdict $? "3. 2 epochs of 9001 samples from 3 warm chunks: stat counts 18002 hits, 0 misses"

# CXL_BROKER_COPY: both ways read the same bytes; a bad value is refused
for m in get map; do
    RENV=("CXL_BROKER_COPY=$m")
    rdr --order random --check cnt >"$SCR/copy-$m.out" 2>&1
done
RENV=()
CHECK_WHY="get: $(rsummary "$SCR/copy-get.out"); map: $(rsummary "$SCR/copy-map.out")"
[ "$(rfield "$SCR/copy-get.out" errors)" = 0 ] && [ "$(rfield "$SCR/copy-map.out" errors)" = 0 ] &&
    [ "$(rfield "$SCR/copy-get.out" digest)" = "$(rfield "$SCR/copy-map.out" digest)" ] &&
    [ "$(rfield "$SCR/copy-get.out" samples)" = 9001 ]
verdict $? "3. CXL_BROKER_COPY=get and =map read the same bytes (--check, one digest)"
RENV=("CXL_BROKER_COPY=bogus")
rdr cnt >"$SCR/copy-bad.out" 2>&1
rc=$?
RENV=()
CHECK_WHY="exit $rc: $(head -c 300 "$SCR/copy-bad.out")"
[ $rc != 0 ] && grep -q "CXL_BROKER_COPY='bogus': get or map" "$SCR/copy-bad.out"
verdict $? "3. CXL_BROKER_COPY=bogus: the connect fails and says what is allowed"

# a reader whose cxl transport attaches another pool than the broker's is
# told so (every request and get would go over tcp, silently)
OTHER=$(new_pool cli-other 64m)
RENV=("UCX_CXL_POOL=$OTHER")
rdr --check cnt >"$SCR/other.out" 2>&1
RENV=()
CHECK_WHY="$(head -c 600 "$SCR/other.out" | tr '\n' '|')"
[ "$(rfield "$SCR/other.out" errors)" = 0 ] &&
    grep -q "serves pool $POOL, which this process's cxl transport does not attach (UCX_CXL_POOL=$OTHER).*set UCX_CXL_POOL=$POOL" "$SCR/other.out" &&
    ! grep -q "does not attach" "$SCR/cnt.out"
verdict $? "3. a reader on the broker's pool with UCX_CXL_POOL naming another pool gets one line saying so (and reads correctly); one with the right pool gets none"

# ---- 4. clients of a stopped broker ----
ADDR=$BRK_ADDR
brk_stop TERM
check "4. the broker stops with exit status 0" [ "$BRK_RC" = 0 ]
for c in ls stat; do
    err1 "4. $c of a stopped broker" "no broker at $ADDR" -- cli $c
done
err1 "4. add to a stopped broker" "no broker at $ADDR" -- cli add x "$D/good"
rdr good >"$SCR/nob.out" 2>&1
rc=$?
CHECK_WHY="exit $rc: $(cat "$SCR/nob.out")"
[ $rc = 1 ] && [ "$(wc -l <"$SCR/nob.out")" = 1 ] && grep -q "no broker at $ADDR" "$SCR/nob.out"
verdict $? "4. a reader of a stopped broker: exit 1, $(head -n 1 "$SCR/nob.out")"

# ---- 5. zero configuration ----
DEF=/dev/shm/ucx-cxl-$(id -u).pool
# (inode and size: another program may use the real default pool meanwhile)
before=$(stat -c '%i %s' "$DEF" 2>/dev/null || echo absent)
cat >"$SCR/zc.sh" <<EOF
set -u
mount -t tmpfs zc-shm /dev/shm || exit 3
ip link set lo up || exit 4
export LD_PRELOAD=$PRELOAD
unset CXL_BROKER UCX_CXL_POOL UCX_TLS
$BRK serve >$SCR/zc-serve.log 2>&1 &
b=\$!
for _ in \$(seq 1 200); do
    grep -q '^cxl-broker: ready on ' $SCR/zc-serve.log && break
    sleep 0.05
done
echo "ZC ready \$(sed -n 's/^cxl-broker: ready on //p' $SCR/zc-serve.log)"
echo "ZC pool \$(ls /dev/shm/*.pool 2>/dev/null | tr '\n' ' ')"
timeout 60 $BRK ls >$SCR/zc-ls.out 2>&1; echo "ZC ls \$?"
timeout 60 $BRK add good $D/good >$SCR/zc-add.out 2>&1; echo "ZC add \$?"
timeout 60 $READER --check good >$SCR/zc-rd.out 2>&1; echo "ZC read \$?"
kill -TERM \$b; wait \$b; echo "ZC stop \$?"
EOF
if ! err=$(unshare --mount --net --propagation private -- true 2>&1); then
    echo "# not run: 5. zero configuration (unshare --mount --net refused: $err)"
else
    unshare --mount --net --propagation private -- timeout -k 5 120 bash "$SCR/zc.sh" >"$SCR/zc.out" 2>&1
    zrc=$?
    sed 's/^/#   /' "$SCR/zc.out"
    zc() { sed -n "s/^ZC $1 //p" "$SCR/zc.out"; }
    CHECK_WHY="exit $zrc: $(tr '\n' ' ' <"$SCR/zc.out") $(cat "$SCR/zc-serve.log" 2>/dev/null | tr '\n' ' ')"
    check "5. zero config: serve with no options is ready on the default address ($(zc ready))" \
        [ "$(zc ready)" = "127.0.0.1:$((17300 + $(id -u) % 1000))" ]
    CHECK_WHY="pools in the namespace's /dev/shm: $(zc pool)"
    check "5. zero config: it created the default pool $DEF" [ "$(zc pool)" = "$DEF " ]
    CHECK_WHY="exit $(zc ls): $(cat "$SCR/zc-ls.out" 2>/dev/null)"
    [ "$(zc ls)" = 0 ] && grep -q '^no datasets' "$SCR/zc-ls.out"
    verdict $? "5. zero config: cxl-broker ls with no --broker finds it: $(head -n 1 "$SCR/zc-ls.out" 2>/dev/null)"
    CHECK_WHY="add exit $(zc add): $(cat "$SCR/zc-add.out" 2>/dev/null); read exit $(zc read): $(cat "$SCR/zc-rd.out" 2>/dev/null)"
    [ "$(zc add)" = 0 ] && [ "$(zc read)" = 0 ] && [ "$(rfield "$SCR/zc-rd.out" local)" = 1 ] &&
        [ "$(rfield "$SCR/zc-rd.out" errors)" = 0 ]
    verdict $? "5. zero config: add and a reader (--check, local) with no address or pool set: $(rsummary "$SCR/zc-rd.out")"
    check "5. zero config: the broker stops with exit status 0" [ "$(zc stop)" = 0 ]
    after=$(stat -c '%i %s' "$DEF" 2>/dev/null || echo absent)
    CHECK_WHY="before: $before, after: $after"
    check "5. zero config: the real $DEF is untouched ($after)" [ "$before" = "$after" ]
fi
finish
