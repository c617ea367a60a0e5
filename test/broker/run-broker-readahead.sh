#!/usr/bin/env bash
#
# run-broker-readahead.sh - how the broker reads files (issue 13): read-ahead
# after a miss, and O_DIRECT fills.
#   1. read-ahead (pin): a cold dataset of 24 chunks that fits the cache; a
#      reader reads one sample (--count 1).  Within 10 s every chunk is
#      resident, read once (file_bytes_read = the dataset's bytes), and stat
#      counts 23 read-ahead fills; --check of the whole dataset then reads
#      nothing more from the files
#   2. --readahead 0: the same read leaves exactly one chunk resident
#   3. read-ahead never evicts (lru): a dataset of 80 chunks of 128 KiB
#      behind a cache of 4 MiB; one sample read: chunks fill the free space
#      and stop there, with 0 evictions; then two whole epochs (--check)
#      still read correct bytes
#   4. O_DIRECT: in 1 every byte of the raw file (1 MiB records, 4 MiB
#      aligned chunks) was read with O_DIRECT (direct_bytes =
#      file_bytes_read) when the file system takes O_DIRECT (probed with
#      dd iflag=direct; otherwise the check says so and expects 0), and
#      the page cache holds at most 1/8 of the file after the fills
#      (fincore; the one sample --check compared is 1/24);
#      a serve --buffered broker reads the same dataset with direct_bytes 0
#      and the bytes are the same (digest)
#
# Environment: CXL_BUILDDIR (default TOP/build-release), CXLPOOL_BIN,
# CXL_UCT_MODULE, CXL_BROKER_BIN, BRK_READER; BRK_KEEP=1 keeps the outputs.
# Last line "broker-readahead: N passed, N failed"; exit 0 only when nothing
# failed.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/broker-common.sh"
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
brk_init broker-readahead

D=$SCR/data
mkdir -p "$D"
gen_raw "$D/ra.raw" $((24 * 1048576)) 5
RA_BYTES=$((24 * 1048576))

# drop_file FILE: its pages out of the page cache (written back first:
# posix_fadvise DONTNEED leaves dirty pages)
drop_file() { sync "$1"; dd if="$1" iflag=nocache count=0 status=none; }

# st FIELD...: the named counters of stat --json, space-separated
st() {
    local f expr="' '.join(str(d[k]) for k in ("
    for f in "$@"; do expr+="'$f', "; done
    stat_json "$SCR/st.json"
    jget "$SCR/st.json" "$expr))"
}

# resident NAME: resident bytes of dataset NAME (ls --json)
resident() {
    ls_json "$SCR/ls.json"
    jget "$SCR/ls.json" "sum(x['resident_bytes'] for x in d if x['name'] == '$1')"
}

# wait_resident NAME BYTES: up to 10 s for NAME to have BYTES resident
wait_resident() {
    local i
    for i in $(seq 1 100); do
        [ "$(resident "$1")" = "$2" ] && return 0
        sleep 0.1
    done
    return 1
}

# ---- 1. read-ahead after one miss ----
POOL=$(new_pool ra) || exit 99
brk_start "$POOL" --capacity 64m || finish
cli add --format raw --record-size 1m --chunk-size 1m ra "$D/ra.raw" >/dev/null 2>&1
drop_file "$D/ra.raw"
rdr --count 1 --check ra >"$SCR/one.out" 2>&1
CHECK_WHY="reader: $(rsummary "$SCR/one.out")"
check "1. a reader reads 1 sample of a cold dataset of 24 chunks" \
    [ "$(rfield "$SCR/one.out" samples)" = 1 -a "$(rfield "$SCR/one.out" errors)" = 0 ]
wait_resident ra $RA_BYTES
got="$(resident ra) $(st file_bytes_read readaheads direct_bytes)"
CHECK_WHY="resident, file_bytes_read, readaheads, direct_bytes: $got"
set -- $got
[ "$1" = $RA_BYTES ] && [ "$2" = $RA_BYTES ] && [ "$3" = 23 ]
verdict $? "1. read-ahead filled the other 23 chunks, each byte read once ($got)"
DIRECT1=$4
# before any --check reader reads the file itself
CACHED1=$(fincore -b -n -o RES "$D/ra.raw" 2>/dev/null | tr -d ' ')
rdr --order random --check ra >"$SCR/all.out" 2>&1
got=$(st file_bytes_read)
CHECK_WHY="reader: $(rsummary "$SCR/all.out"); file_bytes_read $got"
[ "$(rfield "$SCR/all.out" errors)" = 0 ] && [ "$(rfield "$SCR/all.out" samples)" = 24 ] &&
    [ "$got" = $RA_BYTES ]
verdict $? "1. the whole dataset then reads correctly (--check) with nothing more read from the file"
DIGEST1=$(rfield "$SCR/all.out" digest)

# ---- 4. O_DIRECT (the fills of 1) ----
if dd if="$D/ra.raw" of=/dev/null bs=1M count=1 iflag=direct status=none 2>/dev/null; then
    check "4. O_DIRECT: every byte of the fills of 1 read with O_DIRECT (direct_bytes $DIRECT1)" \
        [ "$DIRECT1" = $RA_BYTES ]
    cached=$CACHED1
    CHECK_WHY="fincore: ${cached:-unavailable}"
    [ -n "$cached" ] && [ "$cached" -le $((RA_BYTES / 8)) ]
    verdict $? "4. O_DIRECT: the page cache holds at most 1/8 of the file after the fills (${cached:-?} bytes)"
else
    check "4. O_DIRECT: the file system of $D refuses O_DIRECT (dd iflag=direct), so none is used (direct_bytes $DIRECT1)" \
        [ "$DIRECT1" = 0 ]
fi
brk_stop TERM

# ---- 2. --readahead 0 ----
POOL2=$(new_pool ra0) || exit 99
brk_start "$POOL2" --capacity 64m --readahead 0 --buffered || finish
cli add --format raw --record-size 1m --chunk-size 1m ra "$D/ra.raw" >/dev/null 2>&1
rdr --count 1 ra >"$SCR/one0.out" 2>&1
sleep 0.5
got="$(resident ra) $(st readaheads direct_bytes)"
CHECK_WHY="reader: $(rsummary "$SCR/one0.out"); resident, readaheads, direct_bytes: $got"
[ "$got" = "1048576 0 0" ]
verdict $? "2. --readahead 0 --buffered: one sample read leaves one chunk resident, 0 read-ahead fills, 0 direct bytes"
rdr --order random --check ra >"$SCR/all0.out" 2>&1
got=$(st direct_bytes file_bytes_read)
CHECK_WHY="reader: $(rsummary "$SCR/all0.out"); direct_bytes, file_bytes_read: $got"
[ "$(rfield "$SCR/all0.out" errors)" = 0 ] && [ "$got" = "0 $RA_BYTES" ] &&
    [ "$(rfield "$SCR/all0.out" digest)" = "$DIGEST1" ]
verdict $? "4. --buffered: the dataset reads through the page cache only, same digest as the O_DIRECT fills"
brk_stop TERM

# ---- 3. read-ahead never evicts ----
POOL3=$(new_pool ralru) || exit 99
brk_start "$POOL3" --capacity 4m || finish
gen_files "$D/lru" 80 131072 3
cli add --policy lru --chunk-size 128k lru "$D/lru" >/dev/null 2>&1
rdr --count 1 lru >"$SCR/lru1.out" 2>&1
sleep 1
got="$(resident lru) $(st readaheads evictions capacity used)"
CHECK_WHY="reader: $(rsummary "$SCR/lru1.out"); resident, readaheads, evictions, capacity, used: $got"
set -- $got
[ "$3" = 0 ] && [ "$2" -gt 0 ] && [ "$1" -gt $((4 * 131072)) ] && [ "$1" -lt $((80 * 131072)) ]
verdict $? "3. lru, 10 MiB behind 4 MiB: read-ahead fills free space, stops there, 0 evictions ($got)"
rdr --order random --epochs 2 --check lru >"$SCR/lru2.out" 2>&1
CHECK_WHY="reader: $(rsummary "$SCR/lru2.out")"
[ "$(rfield "$SCR/lru2.out" errors)" = 0 ] && [ "$(rfield "$SCR/lru2.out" samples)" = 160 ]
verdict $? "3. then 2 random epochs under eviction read correct bytes (--check)"
brk_stop TERM

finish
