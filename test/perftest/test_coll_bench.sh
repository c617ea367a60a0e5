#!/usr/bin/env bash
#
# test_coll_bench.sh - smoke run of the collective benchmark:
# perftest/run-coll-bench.sh --smoke (np 2, sizes 8 B and 4 KiB, one
# repetition, every run with -c) must finish, and its output must be
# well-formed: samples.csv has the documented header and, for tuned-ucx and
# ob1-vader, one row per collective and size with numbers that fit together
# (min <= avg <= max, iterations >= 1, no wrong element); results.csv,
# report.md and the plots exist.  coll/cxl: where the build has
# mca_coll_cxl.so its configurations (cxl and cxl-sw) must have been
# checked and measured the same way; where it has not, the report must
# say it is missing (not leave it out).  A negative control runs coll_bench -c --inject-error:
# the check must find the corrupted bytes and exit non-zero.
# No timing is asserted.  Ends with "coll-bench: N passed, N failed".
#
#   test/perftest/test_coll_bench.sh [BUILDDIR]   (default: $CXL_BUILDDIR,
#                                                  else build-release/)
set -u
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
. "$(dirname "${BASH_SOURCE[0]}")/smoke-common.sh"
for t in mpirun mpicc; do
    command -v "$t" >/dev/null 2>&1 || { echo "SKIP: $t not found"; exit 77; }
done
smoke_init test_coll_bench.sh "${1:-}" .libs/libuct_cxl.so
smoke_run run-coll-bench.sh 900

S=$out/run/samples.csv
want="config,rep,collective,bytes,np,iters,warmup,min_us,avg_us,max_us,errors,cxl_calls,cxl_fallbacks"
smoke_header "$S" "$want"

# rows of one configuration: 9 collectives, barrier once, 8 others x 2 sizes
check_config() {   # check_config LABEL
    local msgs
    msgs=$(awk -F, -v l="$1" '
        NR == 1 || $1 != l { next }
        {
            ++n
            if (NF != 13) { print "row " NR ": " NF " fields"; next }
            for (i = 4; i <= 13; ++i)
                if ($i !~ /^-?[0-9]+(\.[0-9]+)?$/) print "row " NR ": field " i " not a number: " $i
            if ($6 < 1) print "row " NR ": iters " $6
            if ($5 != 2) print "row " NR ": np " $5
            if (!($8 <= $9 && $9 <= $10)) print "row " NR ": min/avg/max " $8 "/" $9 "/" $10
            if ($11 != 0) print "row " NR ": " $11 " wrong elements"
            key = $3 "," $4
            if (key in seen) print "row " NR ": " key " twice"
            seen[key] = 1
        }
        END {
            split("barrier,0 bcast,8 bcast,4096 reduce,8 reduce,4096 allreduce,8 allreduce,4096 gather,8 gather,4096 scatter,8 scatter,4096 allgather,8 allgather,4096 reduce_scatter_block,8 reduce_scatter_block,4096 alltoall,8 alltoall,4096", want, " ")
            for (k in want) if (!(want[k] in seen)) print "no row for " want[k]
            if (n != 17) print n " rows, not 17"
        }' "$S")
    if [ -z "$msgs" ]; then
        ok "$1: 17 well-formed rows, every result right"
    else
        bad "$1:"
        echo "$msgs" | head -n 10 | sed 's/^/    /'
    fi
}
check_config tuned-ucx
check_config ob1-vader

R=$out/run/report.md
cxl_state=$(awk -F'|' '$1 == "cxl" { print $2 }' "$out/run/configs.txt" 2>/dev/null)
cxl_note=$(awk -F'|' '$1 == "cxl" { print $3 }' "$out/run/configs.txt" 2>/dev/null)
case "$cxl_state" in
    ok)
        check_config cxl
        if awk -F, '$1 == "cxl" && $12 > 0 { f = 1 } END { exit !f }' "$S"; then
            ok "cxl: coll/cxl's library ran calls (MPI_T coll_cxl_calls)"
        else
            bad "cxl: no call counted by coll_cxl_calls"
        fi
        sw_state=$(awk -F'|' '$1 == "cxl-sw" { print $2 }' "$out/run/configs.txt")
        if [ "$sw_state" = ok ]; then
            check_config cxl-sw
        else
            bad "cxl-sw: '$sw_state': $(awk -F'|' '$1 == "cxl-sw" { print $3 }' "$out/run/configs.txt")"
        fi ;;
    missing)
        if grep -q '^| cxl | .*\*\*MISSING\*\*' "$R" 2>/dev/null && grep -q 'coll/cxl was not measured' "$R"; then
            ok "cxl: component not built, and the report says so ($cxl_note)"
        else
            bad "cxl: component missing, but the report does not say so"
        fi ;;
    *)
        bad "cxl: the build has mca_coll_cxl.so, but its configuration is '$cxl_state': $cxl_note" ;;
esac

for f in results.csv report.md plots/plots.gp; do
    if [ -s "$out/run/$f" ]; then ok "$f written"; else bad "$f missing or empty"; fi
done
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "note: gnuplot not installed: PNGs not checked"
elif [ -s "$out/run/plots/lat-allreduce.png" ]; then
    ok "plots/lat-allreduce.png written"
else
    bad "plots/lat-allreduce.png missing"
fi
if grep -q '^### allreduce' "$R" 2>/dev/null && grep -q '^| 4 KiB | ' "$R"; then
    ok "report.md has the per-collective tables"
else
    bad "report.md has no per-collective tables"
fi

# the floors: limits measured the cross-core copies of the sizes run, and
# the report shows them (np 2)
L=$out/run/raw/limits.csv
if awk -F, '$1 == "xread" && $2 == 4096 && $3 > 0 { r = 1 } END { exit !r }' "$L" 2>/dev/null; then
    ok "limits: xread measured (4 KiB read $(awk -F, '$1 == "xread" && $2 == 4096 { print $3 }' "$L") ns)"
else
    bad "limits: no xread lines in raw/limits.csv"
fi
if grep -q '| floor | cxl / floor | best / floor |' "$R" 2>/dev/null && grep -q '\*\*floor\*\* (np = 2)' "$R"; then
    ok "report.md shows the floors and says what they are"
else
    bad "report.md has no floor columns"
fi
# the hand-written reference (ref_coll.c) ran in the repetition: the
# barrier and each pattern of 8 B (the smoke sizes up to 256 B), its data
# checked (it exits 1 otherwise); the report sets the targets against it
F=$out/run/raw/ref_coll-r1.csv
nref=$(awk -F, '$1 == "refcoll" && NF == 6 && $4 > 0 && $5 > 0 && $6 > 0' "$F" 2>/dev/null | wc -l)
if [ "$nref" -eq 4 ] && grep -q '^hand-written,1,[0-9]*,0,' "$out/run/runs.csv"; then
    ok "hand-written reference: barrier and 3 patterns of 8 B measured ($(awk -F, '$2 == "bcast" && $3 == 8 { print $4 }' "$F") ns bcast 8 B)"
else
    bad "hand-written reference: $nref of 4 rows in raw/ref_coll-r1.csv, or no run in runs.csv"
fi
if grep -q '| hand-written | cxl / hand-written | hand-written / best |' "$R" 2>/dev/null &&
   grep -q '\*\*hand-written\*\* (np = 2' "$R"; then
    ok "report.md sets the targets against the hand-written reference"
else
    bad "report.md has no hand-written reference columns"
fi

# negative control: the check sees corrupted results
"$out/run/bin/coll_bench" --help >/dev/null 2>&1 || true
timeout -k 10 120 mpirun -np 2 --allow-run-as-root --bind-to none --mca pml ob1 \
    --mca btl self,vader --mca coll ^cxl "$out/run/bin/coll_bench" -c --inject-error \
    --colls bcast,allreduce,alltoall --sizes 8,4K --iters 5 --warmup 2 \
    >"$out/neg.csv" 2>"$out/neg.err"
nrc=$?
nerr=$(awk -F, 'NR > 1 && NF == 12 { s += $10 } END { print s + 0 }' "$out/neg.csv")
nrows=$(awk -F, 'NR > 1 && NF == 12' "$out/neg.csv" | wc -l)
if [ $nrc -ne 0 ] && [ "$nrows" -eq 6 ] && awk -F, 'NR > 1 && NF == 12 && $10 == 0 { z = 1 } END { exit z }' "$out/neg.csv"; then
    ok "negative control: -c --inject-error found $nerr wrong elements in all 6 cells, exit $nrc"
else
    bad "negative control: exit $nrc, $nrows rows, $nerr wrong elements (every cell must have some)"
    sed 's/^/    /' "$out/neg.csv" | head -n 8
fi

# the non-blocking form (--nonblocking, --overlap): every result right,
# every cell there; --overlap alone is a usage error
timeout -k 10 120 mpirun -np 2 --allow-run-as-root --bind-to none --mca pml ob1 \
    --mca btl self,vader --mca coll ^cxl "$out/run/bin/coll_bench" -c --nonblocking \
    --overlap 2 --sizes 8,4K --iters 5 --warmup 2 >"$out/nb.csv" 2>"$out/nb.err"
brc=$?
brows=$(awk -F, 'NR > 1 && NF == 12' "$out/nb.csv" | wc -l)
berr=$(awk -F, 'NR > 1 && NF == 12 { s += $10 } END { print s + 0 }' "$out/nb.csv")
if [ $brc -eq 0 ] && [ "$brows" -eq 17 ] && [ "$berr" -eq 0 ]; then
    ok "coll_bench -c --nonblocking --overlap 2: 17 cells, every result right"
else
    bad "coll_bench -c --nonblocking --overlap 2: exit $brc, $brows rows, $berr wrong elements"
    sed 's/^/    /' "$out/nb.err" | head -n 5
fi
"$out/run/bin/coll_bench" --overlap 2 >/dev/null 2>"$out/ov.err"
orc=$?
if [ $orc -eq 2 ] && grep -q -- '--overlap needs --nonblocking' "$out/ov.err"; then
    ok "coll_bench --overlap without --nonblocking: usage error (exit 2)"
else
    bad "coll_bench --overlap without --nonblocking: exit $orc, '$(head -n1 "$out/ov.err")'"
fi

smoke_finish coll-bench
