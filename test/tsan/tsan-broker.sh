#!/usr/bin/env bash
#
# tsan-broker.sh - the broker daemon's threads under ThreadSanitizer: make
# check-tsan runs it through run-tsan.sh with CXL_BUILDDIR the build of
# contrib/build.sh tsan, whose cxl-broker, brk_reader and libuct_cxl.so
# are all built with -fsanitize=thread (refused, exit 99, otherwise).
#   1. cxl-broker serve --readers 4: four fill threads
#   2. add ds-a (a directory of brk_reader --gen files): the add thread
#   3. three brk_reader --check processes read ds-a concurrently (the fill
#      threads fill its chunks while the main loop serves them) while
#      add ds-b (raw records) runs the add thread a second time; then a
#      --check reader of ds-b fills its chunks
#   4. the broker's counters: fills = chunks of both, file_bytes_read =
#      their bytes, no fill error; SIGTERM: exit status 0
# Every reader checks every sample against the bytes of its file; a
# process with a ThreadSanitizer report exits 66 (and run-tsan.sh collects
# the report through TSAN_OPTIONS log_path).  A few seconds.
# Last line "tsan-broker: N passed, N failed"; exit 0 only when nothing
# failed.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../broker/broker-common.sh"
. "$here/../helpers/realbin.sh"
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
brk_init tsan-broker
for f in "$BRK" "$READER" "$MODULE"; do
    if ! ldd "$(realbin "$f")" 2>/dev/null | grep -q libtsan; then
        echo "tsan-broker: $f is not built with ThreadSanitizer (contrib/build.sh tsan)" >&2
        exit 99
    fi
done

# No LD_PRELOAD of the module (run-tsan.sh sets UCX_MEM_EVENTS=no): it
# would load the TSan runtime into the uninstrumented env and timeout too;
# cxl-broker and brk_reader load it themselves (cxl_uct_load.c).
# shellcheck disable=SC2034 # read by brk_start (broker-common.sh)
PRELOAD=

POOL=$(new_pool tsan 256m) || exit 99
D=$SCR/data
gen_files "$D/a" 48 65536 5 || exit 99         # 3 MiB, 12 chunks of 256 KiB
gen_raw "$D/b.raw" $((2 * 1048576)) 9 || exit 99   # 2 MiB, 8 chunks
brk_start "$POOL" --capacity 64m --readers 4 || finish

# add: the scan thread
if ! cli add --chunk-size 256k --json ds-a "$D/a" >"$SCR/add-a.json" 2>&1; then
    fail "add ds-a" "$(cat "$SCR/add-a.json")"
    finish
fi
ca=$(jget "$SCR/add-a.json" 'd["chunks"]')
ba=$(jget "$SCR/add-a.json" 'd["bytes"]')
check "add ds-a: 48 files, $ba bytes in $ca chunks" [ "$ba" = $((48 * 65536)) ]

# three readers fill ds-a (four fill threads) while ds-b is added
ROPTS=("" "--order random --seed 3" "--order random --seed 7 --batch 8")
pids=()
for i in 0 1 2; do
    # shellcheck disable=SC2086
    rdr_bg "$SCR/r-a-$i.out" --check ${ROPTS[$i]} ds-a
    pids+=("$RPID")
done
cli add --format raw --record-size 4096 --chunk-size 256k --json ds-b \
    "$D/b.raw" >"$SCR/add-b.json" 2>&1
arc=$?
digests=''
for i in 0 1 2; do
    wait_bounded "${pids[$i]}" "$WATCHDOG"
    out=$SCR/r-a-$i.out
    echo "#   ds-a reader $i (${ROPTS[$i]:-seq}): exit $WRC: $(rsummary "$out")"
    CHECK_WHY="exit $WRC: $(grep -v '^brk_reader: samples' "$out" | head -3 | tr '\n' ' ')"
    [ "$WRC" = 0 ] && [ "$(rfield "$out" errors)" = 0 ] &&
        [ "$(rfield "$out" samples)" = 48 ]
    verdict $? "ds-a reader $i: exit 0, 48 samples, each its file's bytes (--check)"
    digests+="$(rfield "$out" digest) "
done
CHECK_WHY="digests: $digests"
check "ds-a: the three readers' digests agree" \
    [ "$(echo "$digests" | tr ' ' '\n' | grep . | sort -u | grep -c .)" = 1 ]
CHECK_WHY="exit $arc: $(cat "$SCR/add-b.json")"
check "add ds-b during the reads: exit 0" [ "$arc" = 0 ]
cb=$(jget "$SCR/add-b.json" 'd["chunks"]' 2>/dev/null)
bb=$(jget "$SCR/add-b.json" 'd["bytes"]' 2>/dev/null)
out=$SCR/r-b.out
rdr --check --order random --seed 5 ds-b >"$out" 2>&1
WRC=$?
echo "#   ds-b reader: exit $WRC: $(rsummary "$out")"
CHECK_WHY="exit $WRC: $(grep -v '^brk_reader: samples' "$out" | head -3 | tr '\n' ' ')"
[ "$WRC" = 0 ] && [ "$(rfield "$out" errors)" = 0 ] &&
    [ "$(rfield "$out" samples)" = 512 ]
verdict $? "ds-b reader: exit 0, 512 records, each its file's bytes (--check)"

stat_json "$SCR/st.json"
got=$(jget "$SCR/st.json" '(d["fills"], d["file_bytes_read"], d["fill_errors"])')
CHECK_WHY="(fills, file_bytes_read, fill_errors) = $got"
check "the fill threads filled every chunk once: ($((ca + cb)), $((ba + bb)), 0)" \
    [ "$got" = "($((ca + cb)), $((ba + bb)), 0)" ]
brk_stop TERM
CHECK_WHY="exit $BRK_RC: $(tail -n 5 "$BRK_LOG" | tr '\n' ' ')"
check "the broker stops on SIGTERM with exit status 0" [ "$BRK_RC" = 0 ]
finish
