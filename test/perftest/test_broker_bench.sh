#!/usr/bin/env bash
#
# test_broker_bench.sh - smoke run of the broker benchmark:
# perftest/run-broker-bench.sh --smoke (tiny datasets of 4 KiB, 64 KiB and
# 1 MiB records, readers 1 and 2, one repetition, every read checked
# against the file) must finish, and its output must be well-formed and
# every read correct:
#   - samples.csv has the documented header and one total row per size,
#     reader count and mode (broker, view, pread, mmap, memcpy; memcpy-ds at
#     1 MiB) with numbers, samples > 0, no sample differing from the file,
#     PSS read, broker readers local (the pool mapped); readers.csv has one
#     row per reader whose samples add up to the total
#   - check.csv: every sample of every dataset read once in every mode,
#     none differing from the file, one digest per size for all modes
#   - cold.csv: raw dd and sequential pread, broker warm, broker and pread
#     epochs per size, the CRC32C ceilings, all ok, the file out of the page cache before each, the broker's cold
#     epoch reading each file byte exactly once (stat file_bytes_read)
#   - report.md (targets, correctness line), results.csv and the plots
# A negative control runs broker_bench --check --inject-error: the check
# must find the corrupted samples and exit non-zero.
# The pool's page size (cxlpool info) is in the report: 2 MiB on the
# run's own huge-page tmpfs, where it may mount one.
# The memcpy limit run with no warm-up takes (almost) no page fault in its
# timed window: it measures the copy, not the kernel.
# No timing is asserted.  Ends with "broker-bench: N passed, N failed".
#
#   test/perftest/test_broker_bench.sh [BUILDDIR]   (default: $CXL_BUILDDIR,
#                                                    else build-release/)
set -u
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
. "$(dirname "${BASH_SOURCE[0]}")/smoke-common.sh"
[ -d /dev/shm ] && [ -w /dev/shm ] || { echo "SKIP: /dev/shm not writable"; exit 77; }
command -v fincore >/dev/null 2>&1 || { echo "SKIP: fincore (util-linux) not found"; exit 77; }
smoke_init test_broker_bench.sh "${1:-}" .libs/libuct_cxl.so cxl-broker cxlpool
smoke_run run-broker-bench.sh 600

R=$out/run
S=$R/samples.csv
want="rep,label,row,mode,record,readers,reader,batch,phase,seconds,samples,bytes,samples_per_s,gb_per_s,min_reader_sps,max_reader_sps,pss_kib,pss_anon_kib,pss_file_kib,pss_shmem_kib,rss_kib,other_pss_kib,file_cache_kib,pool_kib,local,errors,digest,faults"
smoke_header "$S" "$want"

# one total row per size, reader count and mode, every one well-formed
msgs=$(awk -F, '
    NR == 1 { next }
    {
        ++n
        if (NF != 28) { print "row " NR ": " NF " fields"; next }
        for (i = 10; i <= 21; ++i)
            if ($i !~ /^[0-9]+(\.[0-9]+)?$/) print "row " NR ": field " i " not a number: " $i
        if ($3 != "total") print "row " NR ": not a total row"
        if ($11 < 1) print "row " NR ": no samples"
        if ($12 != $11 * $5) print "row " NR ": bytes " $12 " != samples x record"
        if ($26 != 0) print "row " NR ": " $26 " samples differ from the file"
        if ($17 < 1) print "row " NR ": no PSS read"
        if (($2 == "broker" || $2 == "broker-get" || $2 == "view") && $25 != 1) print "row " NR ": broker reader not local"
        if (($2 == "broker" || $2 == "broker-get" || $2 == "view") && $22 < 1) print "row " NR ": no broker PSS"
        if ($15 > $16) print "row " NR ": per-reader min > max"
        key = $2 "," $5 "," $6
        if (key in seen) print "row " NR ": " key " twice"
        seen[key] = 1
    }
    END {
        split("4096 65536 1048576", recs, " ")
        for (r in recs) for (k = 1; k <= 2; ++k) {
            split("broker broker-get view pread mmap memcpy", ms, " ")
            for (m in ms) if (!((ms[m] "," recs[r] "," k) in seen)) print "no row for " ms[m] " " recs[r] " readers " k
            if (recs[r] == 1048576 && !(("memcpy-ds," recs[r] "," k) in seen)) print "no memcpy-ds row for readers " k
        }
        if (n != 38) print n " rows, not 38"
    }' "$S" 2>&1)
if [ -z "$msgs" ]; then
    ok "samples.csv: 38 well-formed rows (3 sizes x 2 reader counts x 6 modes + memcpy-ds), no wrong sample"
else
    bad "samples.csv:"
    echo "$msgs" | head -n 10 | sed 's/^/    /'
fi

# per-reader rows add up to the totals
msgs=$(awk -F, '
    FNR == 1 { next }
    FILENAME ~ /readers.csv$/ { k = $2 "," $5 "," $6; cnt[k]++; sum[k] += $11; next }
    { k = $2 "," $5 "," $6; tot[k] = $11; nr[k] = $6 }
    END {
        for (k in tot) {
            if (cnt[k] != nr[k]) print k ": " cnt[k] " reader rows, " nr[k] " readers"
            if (sum[k] != tot[k]) print k ": readers read " sum[k] ", the total says " tot[k]
        }
    }' "$R/readers.csv" "$S" 2>&1)
if [ -z "$msgs" ] && [ -s "$R/readers.csv" ]; then
    ok "readers.csv: one row per reader, samples add up to the totals"
else
    bad "readers.csv:"
    echo "$msgs" | head -n 10 | sed 's/^/    /'
fi

# correctness pass: every sample once, in every mode, the same digest
nrec=$(sed -n 's/^nrecords=//p' "$R/meta.env" 2>/dev/null)
msgs=$(awk -F, -v nrec="$nrec" '
    BEGIN { split(nrec, nr, " "); want["4096"] = nr[1]; want["65536"] = nr[2]; want["1048576"] = nr[3] }
    NR == 1 { next }
    {
        ++n
        if ($7 != 0) print $1 " " $2 ": exit " $7
        if ($5 != 0) print $1 " " $2 ": " $5 " samples differ from the file"
        if ($4 != want[$1]) print $1 " " $2 ": " $4 " samples, the dataset has " want[$1]
        if (($1 in dg) && dg[$1] != $6) print $1 ": digest of " $2 " " $6 " != " dg[$1]
        dg[$1] = $6
        seen[$1 "," $2] = 1
    }
    END {
        for (r in want) { split("broker broker-get view pread mmap", ms, " "); for (m in ms) if (!((r "," ms[m]) in seen)) print "no check of " ms[m] " at " r }
        if (n != 15) print n " rows, not 15"
    }' "$R/check.csv" 2>&1)
if [ -z "$msgs" ] && [ -n "$nrec" ]; then
    ok "correctness pass: every sample of every dataset read once per mode, equal to the file, one digest per size"
else
    bad "correctness pass:"
    echo "$msgs" | head -n 10 | sed 's/^/    /'
fi

# cold epoch rows
msgs=$(awk -F, '
    NR == 1 { next }
    {
        ++n
        if ($11 != 1) print $2 " " $4 " n" $3 ": not ok"
        if ($4 ~ /^crc/) { crc[$4] = 1; if ($6 < 1) print $4 ": no bytes"; next }
        if ($8 != 0) print $2 " " $4 ": " $8 " KiB of the file still cached before the cold run"
        if ($6 < 1 || $5 <= 0) print $2 " " $4 ": no bytes or time"
        if (($4 == "broker-epoch" || $4 == "broker-warm") && $9 != $6)
            print $2 " " $4 ": the broker read " $9 " bytes from the file for a " $6 "-byte dataset"
        seen[$2 "," $4] = 1
    }
    END {
        split("4096 65536 1048576", recs, " ")
        split("raw-dd raw-pread broker-warm broker-epoch pread-epoch", ks, " ")
        for (r in recs) for (k in ks) if (!((recs[r] "," ks[k]) in seen)) print "no " ks[k] " row at " recs[r]
        if (!("crc" in crc) || !("crc-hw" in crc)) print "no crc / crc-hw rows"
        if (n != 17) print n " rows, not 17"
    }' "$R/cold.csv" 2>&1)
if [ -z "$msgs" ] && [ -s "$R/cold.csv" ]; then
    ok "cold.csv: 17 rows, uncached before each, each file byte read once by the broker's cold epoch"
else
    bad "cold.csv:"
    echo "$msgs" | head -n 10 | sed 's/^/    /'
fi

for f in results.csv report.md plots/plots.gp; do
    if [ -s "$R/$f" ]; then ok "$f written"; else bad "$f missing or empty"; fi
done
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "note: gnuplot not installed: PNGs not checked"
elif [ -s "$R/plots/sps-4KiB.png" ] && [ -s "$R/plots/pss.png" ]; then
    ok "plots/sps-4KiB.png, plots/pss.png written"
else
    bad "plots missing"
fi
if grep -q '^## Targets (issue 13)' "$R/report.md" 2>/dev/null &&
   [ "$(grep -cE '^\| (warm|cold) .*(✓ met|✗ missed)' "$R/report.md")" -ge 7 ] &&
   grep -q '^\*\*All reads correct\*\*' "$R/report.md"; then
    ok "report.md: targets evaluated, all reads correct"
else
    bad "report.md: no targets table or no 'All reads correct'"
fi

smoke_pool_pages "$R" run-broker-bench

# negative control: the check sees corrupted samples
bb=$build/perftest/broker_bench
if "$bb" --gen "$out/neg.raw" 256 4096 9 2>"$out/neg.err"; then
    "$bb" --mode pread --file "$out/neg.raw" --record 4096 --epoch --check --inject-error \
        >"$out/neg.csv" 2>>"$out/neg.err"
    nrc=$?
    nerr=$(awk -F, '$1 == "total" { print $24 }' "$out/neg.csv")
    if [ $nrc -ne 0 ] && [ "${nerr:-0}" -eq 16 ]; then
        ok "negative control: --check --inject-error found all 16 corrupted samples, exit $nrc"
    else
        bad "negative control: exit $nrc, ${nerr:-no} samples found differing (want 16, one per batch)"
    fi
else
    bad "negative control: broker_bench --gen failed: $(head -n1 "$out/neg.err")"
fi

# the memcpy limit is a copy, not page faults: the shared source is mapped
# into the reader's page tables before the timed window (with no warm-up,
# every first touch of a page used to fault in the window: on a nested VM
# the "limit" was a tenth of the copy)
"$bb" --mode memcpy --memcpy-src 256m --record 4096 --readers 2 --warmup 0 \
    --seconds 0.2 >"$out/flt.csv" 2>"$out/flt.err"
frc=$?
read -r fs ff <<<"$(awk -F, '$1 == "total" { print $9, $26 }' "$out/flt.csv")"
if [ $frc -eq 0 ] && [ "${fs:-0}" -gt 0 ] && [ -n "${ff:-}" ] && [ $((ff * 100)) -le "$fs" ]; then
    ok "memcpy limit: $ff page faults in a timed window of $fs samples (no warm-up)"
else
    bad "memcpy limit: exit $frc, ${ff:-?} page faults in a timed window of ${fs:-?} samples (want <= 1 %)"
fi

# every row carries the page faults of its timed window
flt_modes=$(awk -F, 'NR > 1 && $28 !~ /^[0-9]+$/ { print $4 }' "$S" | sort -u | tr '\n' ' ')
if [ -z "$flt_modes" ]; then
    ok "samples.csv: a page-fault count in every row"
else
    bad "samples.csv: no page-fault count for $flt_modes"
fi

smoke_finish broker-bench
