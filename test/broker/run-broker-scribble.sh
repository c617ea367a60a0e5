#!/usr/bin/env bash
#
# run-broker-scribble.sh - the broker's index is pool memory that any
# process of the pool can rewrite at any time, also after a reader checked
# it (doc/design/trust-model.md).  A reader opens a dataset (its index is
# checked then), then writes garbage into one record of it (brk_reader
# --scribble), as a peer could, and reads on:
#   a. a sample's chunk index 0xfffffff0: the read of that sample fails
#      with the "record in the pool is corrupt" error (it indexed the
#      reader's pin arrays with it and crashed before the check at use);
#   b. a sample's length 2^40: the read fails with the same error;
#   c. a sample's offset 2^40, zero-copy view: the view is refused with it;
#   d. the broker's own use: a segment's length 2^40 in a chunk that is not
#      resident yet; the same reader then reads every sample and compares
#      it with its file: the broker fills from its private copy of the
#      index, so every byte is right (it filled by the rewritten segment
#      before);
#   f. the version record's chunk count 0xfffffff0, in a dataset twice the
#      size of the cache (lru: every pass evicts, and the victim search
#      walks the chunks): the same reader reads every sample right, and
#      the broker lives on (it walked the pool's count before);
#   g. a chunk never read made to look RESIDENT in its state word: a remote
#      reader, served by the broker, reads every sample right (the broker
#      answered by the pool's word with a range it never filled);
#   e. a reader opening a rewritten dataset afterwards is refused (the
#      index's CRC), and the broker still serves a dataset nobody wrote
#      into (--check).
#
# Environment: CXL_BUILDDIR (default TOP/build-release), CXLPOOL_BIN,
# CXL_UCT_MODULE, CXL_BROKER_BIN, BRK_READER; BRK_KEEP=1 keeps the outputs.
# Last line "broker-scribble: N passed, N failed"; exit 0 only when nothing
# failed.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/broker-common.sh"
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
brk_init broker-scribble

gen_files "$SCR/d" 64 20000 3
POOL=$(new_pool s 256m) || exit 99
if brk_start "$POOL" --capacity 24m; then
    for t in a b c; do
        cli add --chunk-size 64k "scr-$t" "$SCR/d" >>"$SCR/add.out" 2>&1 || break
    done
    CHECK_WHY="$(cat "$SCR/add.out")"
    verdict $? "three datasets of 64 samples of 20000 B in chunks of 64 KiB added, one per case"
    cli add --chunk-size 64k scr2 "$SCR/d" >"$SCR/add2.out" 2>&1 &&
        cli add --chunk-size 64k scr3 "$SCR/d" >"$SCR/add3.out" 2>&1
    CHECK_WHY="$(cat "$SCR"/add[23].out)"
    verdict $? "two more datasets of the same files added, not read yet"

    # one reader process per case: each rewrites a different record
    for c in "a:sample-chunk:5:" "b:sample-len:9:" "c:sample-off:13:--view"; do
        IFS=: read -r tag field idx extra <<<"$c"
        out=$SCR/$tag.out
        # shellcheck disable=SC2086
        rdr --local 1 --expect-error --scribble "$field:$idx" $extra "scr-$tag" \
            >"$out" 2>&1
        WRC=$?
        echo "#   $tag. $field of sample $idx: exit $WRC: $(head -n 1 "$out")"
        CHECK_WHY="exit $WRC: $(tr '\n' ' ' <"$out")"
        [ $WRC = 0 ] && grep -q "sample $idx: its record in the pool is corrupt" "$out"
        verdict $? "$tag. $field of sample $idx rewritten after open: its read fails with the corrupt-record error"
    done

    # d: the broker fills by its own copy of the index
    rdr --local 1 --check --scribble seg-len:3 scr2 >"$SCR/d.out" 2>&1
    WRC=$?
    CHECK_WHY="exit $WRC: $(tr '\n' ' ' <"$SCR/d.out")"
    [ $WRC = 0 ] && [ "$(rfield "$SCR/d.out" errors)" = 0 ] &&
        [ "$(rfield "$SCR/d.out" samples)" = 64 ]
    verdict $? "d. segment 3 rewritten (2^40 bytes) before its chunk's fill: all 64 samples read right (--check): the broker filled by its private index"

    gen_files "$SCR/f" 40 1048576 4
    cli add --chunk-size 1m --policy lru scr-f "$SCR/f" >"$SCR/addf.out" 2>&1
    CHECK_WHY="$(cat "$SCR/addf.out")"
    verdict $? "f. dataset of 40 MiB in chunks of 1 MiB (lru) behind a 24 MiB cache added"
    RENV=(CXL_BROKER_PIN_CACHE=1)
    rdr --local 1 --check --epochs 2 --scribble vrec-nchunks:0 scr-f >"$SCR/f.out" 2>&1
    WRC=$?
    RENV=()
    CHECK_WHY="exit $WRC: $(tr '\n' ' ' <"$SCR/f.out")"
    [ $WRC = 0 ] && [ "$(rfield "$SCR/f.out" errors)" = 0 ] &&
        [ "$(rfield "$SCR/f.out" samples)" = 80 ]
    verdict $? "f. version record's chunk count rewritten: two epochs with evictions read right (80 samples, 0 errors)"

    cli add --chunk-size 64k scr-g "$SCR/d" >"$SCR/addg.out" 2>&1 &&
        rdr --local 1 --epochs 0 --scribble chunk-resident:2 scr-g >"$SCR/g1.out" 2>&1
    CHECK_WHY="$(cat "$SCR/addg.out" "$SCR/g1.out")"
    verdict $? "g. chunk 2 of a new dataset marked RESIDENT in the pool by a reader"
    rdr --local 0 --check scr-g >"$SCR/g2.out" 2>&1
    WRC=$?
    CHECK_WHY="exit $WRC: $(tr '\n' ' ' <"$SCR/g2.out")"
    [ $WRC = 0 ] && [ "$(rfield "$SCR/g2.out" errors)" = 0 ] &&
        [ "$(rfield "$SCR/g2.out" samples)" = 64 ]
    verdict $? "g. a remote reader then reads all 64 samples right: the broker keeps chunk states privately"

    rdr scr-a >"$SCR/e1.out" 2>&1
    WRC=$?
    CHECK_WHY="exit $WRC: $(tr '\n' ' ' <"$SCR/e1.out")"
    [ $WRC = 1 ] && grep -q "scr-a: metadata: crc mismatch" "$SCR/e1.out"
    verdict $? "e. a new reader of the rewritten dataset is refused: metadata crc mismatch"
    rdr --check scr3 >"$SCR/e2.out" 2>&1
    WRC=$?
    CHECK_WHY="exit $WRC: $(tr '\n' ' ' <"$SCR/e2.out")"
    [ $WRC = 0 ] && [ "$(rfield "$SCR/e2.out" errors)" = 0 ]
    verdict $? "e. the broker still serves a dataset nobody wrote into (--check)"
    brk_stop
fi
finish
