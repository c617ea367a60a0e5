#!/usr/bin/env bash
#
# run-broker-fill.sh - the single-flight fill and restart persistence of the
# dataset-chunk broker (issue 13).
#   1. for each format (files: a directory of brk_reader --gen files; npy:
#      .npy arrays written by a stdlib writer; tar: WebDataset shards made
#      by GNU tar; raw: fixed-size records), a cold dataset read by 8
#      concurrent brk_reader processes (--check; sequential and random
#      orders with different seeds, batches, zero-copy views, some remote:
#      --local 0): every reader exits 0 with errors 0, all digests are
#      identical, and the broker's counters (stat --json) show each file
#      byte read once: file_bytes_read and fill_bytes grew by exactly the
#      dataset's bytes (computed here, not taken from the broker) and
#      fills by its number of chunks
#   2. restart: SIGTERM, serve again on the same pool: exit status 0,
#      boot 2, ls shows every dataset fully resident, reading everything
#      again (--check) reads 0 bytes from files and the digests are those
#      of 1
#   3. serve --verify after one byte of a resident chunk was flipped in the
#      pool file: the broker says 1 chunk failed its check, reads that chunk
#      (and only it) again, and a --check reader of that dataset passes
#
# Environment: CXL_BUILDDIR (default TOP/build-release), CXLPOOL_BIN,
# CXL_UCT_MODULE, CXL_BROKER_BIN, BRK_READER; BRK_KEEP=1 keeps the outputs.
# Last line "broker-fill: N passed, N failed"; exit 0 only when nothing
# failed.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/broker-common.sh"
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
brk_init broker-fill

POOL=$(new_pool fill) || exit 99
brk_start "$POOL" --capacity 192m || finish

# ---- the datasets ----
D=$SCR/data
mkdir -p "$D"
gen_files "$D/files" 300 40000 7
gen_npy "$D/npy" a 3 2000 "32,8" "<f4" 5     # rows of 1 KiB
gen_npy "$D/npy" b 1 7001 "" "|u1" 6        # 7001 one-byte rows
gen_tar "$D/shard" 2 150 11
gen_raw "$D/rec.raw" $((6 * 1048576)) 3
gen_raw "$D/rec2.raw" $((3 * 1048576 + 4096 * 7)) 4

declare -A DSBYTES DSOPTS DSPATHS
DSBYTES[files]=$((300 * 40000))
DSPATHS[files]="$D/files"
DSOPTS[files]="--chunk-size 1m"
DSBYTES[npy]=$((3 * 2000 * 1024 + 7001))
DSPATHS[npy]="$D/npy/a000.npy $D/npy/a001.npy $D/npy/a002.npy $D/npy/b000.npy"
DSOPTS[npy]="--chunk-size 512k"
DSBYTES[tar]=$(tar_bytes "$D/shard-0.tar" "$D/shard-1.tar")
DSPATHS[tar]="$D/shard-0.tar $D/shard-1.tar"
DSOPTS[tar]="--chunk-size 1m"
DSBYTES[raw]=$((6 * 1048576 + 3 * 1048576 + 4096 * 7))
DSPATHS[raw]="$D/rec.raw $D/rec2.raw"
DSOPTS[raw]="--format raw --record-size 4096 --chunk-size 1m"
FORMATS="files npy tar raw"
declare -A DIGEST NCHUNKS

# the eight readers' options
ROPTS=("" "--order random --seed 11" "--local 0" "--local 0 --order random --seed 13 --batch 8"
       "--batch 16 --order random --seed 17" "--view --order random --seed 23"
       "--local 0 --batch 4 --order random --seed 29" "--order random --seed 19 --epochs 2")

for f in $FORMATS; do
    echo "# ---- $f: ${DSPATHS[$f]} ----"
    # shellcheck disable=SC2086
    if ! cli add ${DSOPTS[$f]} --json "ds-$f" ${DSPATHS[$f]} >"$SCR/add-$f.json" 2>"$SCR/add-$f.err"; then
        fail "$f: add" "$(cat "$SCR/add-$f.err")"
        continue
    fi
    cat "$SCR/add-$f.json"
    NCHUNKS[$f]=$(jget "$SCR/add-$f.json" 'd["chunks"]')
    got=$(jget "$SCR/add-$f.json" 'd["bytes"]')
    CHECK_WHY="add says $got bytes, the files have ${DSBYTES[$f]}"
    check "$f: the index has the dataset's ${DSBYTES[$f]} bytes" [ "$got" = "${DSBYTES[$f]}" ]
    got=$(jget "$SCR/add-$f.json" 'd["format"]')
    check "$f: format $got" [ "$got" = "$f" ]
    stat_json "$SCR/st0-$f.json"
    t0=$(date +%s.%N)
    pids=()
    for i in 0 1 2 3 4 5 6 7; do
        # shellcheck disable=SC2086
        rdr_bg "$SCR/r-$f-$i.out" --check ${ROPTS[$i]} "ds-$f"
        pids+=("$RPID")
    done
    bad='' digests=''
    for i in 0 1 2 3 4 5 6 7; do
        wait_bounded "${pids[$i]}" "$WATCHDOG"
        out=$SCR/r-$f-$i.out
        echo "#   reader $i (${ROPTS[$i]:-seq}): exit $WRC: $(rsummary "$out")"
        if [ "$WRC" != 0 ] || [ "$(rfield "$out" errors)" != 0 ]; then
            bad+="reader $i: exit $WRC, $(grep -v '^brk_reader: samples' "$out" | head -2 | tr '\n' ' '); "
        fi
        digests+="$(rfield "$out" digest) "
    done
    echo "#   8 readers in $(elapsed "$t0") s"
    CHECK_WHY=$bad
    check "$f: 8 concurrent readers exit 0 with errors 0 (--check: every sample is its file's bytes)" [ -z "$bad" ]
    DIGEST[$f]=$(echo "$digests" | tr ' ' '\n' | grep . | sort -u)
    CHECK_WHY="digests: $digests"
    check "$f: all 8 digests identical (${DIGEST[$f]})" [ "$(echo "${DIGEST[$f]}" | grep -c .)" = 1 ]
    want=$(( $(jget "$SCR/add-$f.json" 'd["samples"]') ))
    got=$(rfield "$SCR/r-$f-0.out" samples)
    check "$f: a reader got all $want samples" [ "$got" = "$want" ]
    stat_json "$SCR/st1-$f.json"
    for k in file_bytes_read fill_bytes fills fill_errors evictions; do
        eval "d_$k=\$(( \$(jget \"\$SCR/st1-\$f.json\" 'd[\"$k\"]') - \$(jget \"\$SCR/st0-\$f.json\" 'd[\"$k\"]') ))"
    done
    echo "#   broker: file_bytes_read +$d_file_bytes_read, fill_bytes +$d_fill_bytes, fills +$d_fills, fill_errors +$d_fill_errors, evictions +$d_evictions"
    CHECK_WHY="file_bytes_read grew by $d_file_bytes_read"
    check "$f: single flight: file_bytes_read grew by exactly ${DSBYTES[$f]} (each file byte read once)" \
        [ "$d_file_bytes_read" = "${DSBYTES[$f]}" ]
    CHECK_WHY="fill_bytes grew by $d_fill_bytes, fills by $d_fills, fill_errors $d_fill_errors, evictions $d_evictions"
    [ "$d_fills" = "${NCHUNKS[$f]}" ] && [ "$d_fill_bytes" = "${DSBYTES[$f]}" ] &&
        [ "$d_fill_errors" = 0 ] && [ "$d_evictions" = 0 ]
    verdict $? "$f: fills = chunks (${NCHUNKS[$f]}), fill_bytes = ${DSBYTES[$f]}, no fill error, no eviction"
done

# ---- restart: nothing is read again ----
# resident DS: "resident_chunks chunks" of DS in ls --json
ls_resident() {
    jget "$1" "[(x['resident_chunks'], x['chunks'], x['version']) for x in d if x['name'] == '$2']"
}
reread_all() {
    local what=$1 f out
    for f in $FORMATS; do
        out=$SCR/re-$what-$f.out
        rdr --check --order random --seed 5 "ds-$f" >"$out" 2>&1
        WRC=$?
        echo "#   $f: exit $WRC: $(rsummary "$out")"
        CHECK_WHY="exit $WRC, digest $(rfield "$out" digest) (before: ${DIGEST[$f]}): $(grep -v '^brk_reader: samples' "$out" | head -2 | tr '\n' ' ')"
        [ "$WRC" = 0 ] && [ "$(rfield "$out" errors)" = 0 ] &&
            [ "$(rfield "$out" digest)" = "${DIGEST[$f]}" ]
        verdict $? "$what: ds-$f reads back (--check), the same digest as before"
    done
}

echo "# ---- restart ----"
brk_stop TERM
check "restart: the broker stops on SIGTERM with exit status 0" [ "$BRK_RC" = 0 ]
brk_start "$POOL" || finish
grep -E 'resident from before|failed their check|freed|left alone' "$BRK_LOG" | sed 's/^/#   /'
# (version records 247..255 overlapped the heap, whose first bytes, the
# index of the first dataset, made them fail their checksum here)
CHECK_WHY="$(grep -E 'fails its checksum|left alone' "$BRK_LOG" | head -3 | tr '\n' ' ')"
check "restart: every version record and index is intact (none 'left alone')" \
    [ "$(grep -cE 'fails its checksum|left alone' "$BRK_LOG")" = 0 ]
ls_json "$SCR/ls-restart.json"
for f in $FORMATS; do
    r=$(ls_resident "$SCR/ls-restart.json" "ds-$f")
    CHECK_WHY="ls: (resident, chunks, version) = $r"
    check "restart: ds-$f is listed fully resident, version 1" \
        [ "$r" = "[(${NCHUNKS[$f]}, ${NCHUNKS[$f]}, 1)]" ]
done
reread_all restart
stat_json "$SCR/st-restart.json"
got=$(jget "$SCR/st-restart.json" '(d["boot"], d["file_bytes_read"], d["fills"], d["misses"])')
CHECK_WHY="(boot, file_bytes_read, fills, misses) = $got"
check "restart: start 2, nothing read from files again (0 bytes, 0 fills, 0 misses)" \
    [ "$got" = "(2, 0, 0, 0)" ]

# ---- serve --verify, with one resident byte flipped ----
echo "# ---- serve --verify ----"
brk_stop TERM
check "verify: the broker stops on SIGTERM with exit status 0" [ "$BRK_RC" = 0 ]
# the first 64 bytes of raw record 0 are unique in the pool: its chunk's copy
flip=$("$PY" - "$POOL" "$D/rec.raw" <<'PYEOF'
import mmap, sys
key = open(sys.argv[2], "rb").read(64)
with open(sys.argv[1], "r+b") as f:
    m = mmap.mmap(f.fileno(), 0)
    at = m.find(key)
    if at < 0 or m.find(key, at + 1) >= 0:
        print("none")
    else:
        m[at + 10] ^= 0xff
        print(at + 10)
    m.close()
PYEOF
)
CHECK_WHY="the bytes of record 0 are found $flip times in the pool"
check "verify: one copy of raw record 0 in the pool, a byte flipped at $flip" [ "$flip" != none ]
brk_start "$POOL" --verify || finish
grep -E 'resident from before|failed their check' "$BRK_LOG" | tail -n 8 | sed 's/^/#   /'
CHECK_WHY="$(grep 'failed their check' "$BRK_LOG" | tr '\n' ' ')"
[ "$(grep -c 'failed their check' "$BRK_LOG")" = 1 ] &&
    grep -q 'ds-raw v1: 1 resident chunks failed their check' "$BRK_LOG"
verdict $? "verify: exactly ds-raw's chunk fails its CRC check at start"
reread_all verify
stat_json "$SCR/st-verify.json"
got=$(jget "$SCR/st-verify.json" '(d["boot"], d["file_bytes_read"], d["fills"])')
CHECK_WHY="(boot, file_bytes_read, fills) = $got"
check "verify: start 3, only the damaged chunk read again (1 fill of 1 MiB)" \
    [ "$got" = "(3, 1048576, 1)" ]
brk_stop TERM
check "verify: the broker stops with exit status 0" [ "$BRK_RC" = 0 ]
finish
