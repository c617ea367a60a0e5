#!/usr/bin/env bash
#
# test_dask_bench.sh - smoke run of the Dask comm benchmark:
# perftest/run-dask-bench.sh --smoke (put 1 KiB, 64 KiB, 1 MiB and the
# round trips, one repetition, cxl and tcp, every put checked with crc32 on
# both sides) must finish with exit 0, and its output must be well-formed:
# results.csv has the documented header and one row per figure, size and
# scheme with numbers that fit together (0 < min <= median <= max), the
# samples agree, meta.json records 6 intact checks, report.md has the
# targets table (the round-trip target with its verdict) and both tables.
# A negative control runs dask_bench.py --smoke --inject-error (one byte of
# every array flipped after its checksum was taken): every check must fail
# and the exit status be non-zero.  No timing is asserted.
# Ends with "dask-bench: N passed, N failed".
#
#   test/perftest/test_dask_bench.sh [BUILDDIR]   (default: $CXL_BUILDDIR,
#                                                  else build-release/)
set -u
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
. "$(dirname "${BASH_SOURCE[0]}")/smoke-common.sh"
PY=/usr/bin/python3
"$PY" -c 'import distributed, numpy' 2>/dev/null ||
    { echo "SKIP: $PY lacks python3-distributed or numpy"; exit 77; }
smoke_init test_dask_bench.sh "${1:-}" .libs/libuct_cxl.so .libs/libcxl_comm.so cxlpool
POOL=/dev/shm/ucx-cxl-dask-bench-test-$$.pool
smoke_on_exit '"$build/cxlpool" destroy --force "$POOL" >/dev/null 2>&1; rm -f "$POOL"'
smoke_run run-dask-bench.sh 600

R=$out/run/results.csv
smoke_header "$R" "figure,size,scheme,unit,better,rep1,median,min,max"
want="put,1024 put,65536 put,1048576 rtt,small rtt,1KiB"
why=$("$PY" - "$R" "$out/run/samples.csv" $want <<'EOF'
import csv, sys
rows = {(r["figure"], r["size"], r["scheme"]): r for r in csv.DictReader(open(sys.argv[1]))}
samples = list(csv.DictReader(open(sys.argv[2])))
errs = []
for fs in sys.argv[3:]:
    f, s = fs.split(",")
    for scheme in ("cxl", "tcp"):
        r = rows.get((f, s, scheme))
        if r is None:
            errs.append(f"no row {f} {s} {scheme}")
            continue
        try:
            lo, med, hi, r1 = (float(r[k]) for k in ("min", "median", "max", "rep1"))
        except ValueError:
            errs.append(f"{f} {s} {scheme}: not numbers")
            continue
        if not (0 < lo <= med <= hi) or r["unit"] != ("us" if f == "rtt" else "MB/s"):
            errs.append(f"{f} {s} {scheme}: min {lo} median {med} max {hi} unit {r['unit']}")
        sm = [x for x in samples if (x["figure"], x["size"], x["scheme"]) == (f, s, scheme)]
        if len(sm) != 1 or abs(float(sm[0]["value"]) - r1) > 1e-3 or int(sm[0]["iters"]) < 1:
            errs.append(f"{f} {s} {scheme}: samples {sm}")
if len(rows) != 2 * (len(sys.argv) - 3):
    errs.append(f"{len(rows)} rows")
print("; ".join(errs))
EOF
)
if [ -z "$why" ]; then
    ok "results.csv and samples.csv: every figure, size and scheme, 0 < min <= median <= max"
else
    bad "results.csv: $why"
fi
got=$("$PY" -c 'import json,sys; m=json.load(open(sys.argv[1])); print(sum(c["ok"] for c in m["checks"]), m["checks_failed"])' \
      "$out/run/meta.json" 2>&1)
if [ "$got" = "6 0" ]; then
    ok "meta.json: 6 checked transfers intact (3 sizes x 2 schemes), none failed"
else
    bad "meta.json checks: '$got'"
fi
M=$out/run/report.md
if grep -q '^## Targets' "$M" 2>/dev/null && grep -qE '^\| rtt <= 0.5x tcp \| small \| [0-9.]+ us \| [0-9.]+ us \| [0-9.]+x \| (met|MISSED) \|$' "$M" &&
   grep -q '^## put' "$M" && grep -q '^## rtt' "$M" && grep -q 'memcpy' "$M"; then
    ok "report.md: targets (rtt with its verdict), put and rtt tables, memcpy limit"
else
    bad "report.md incomplete: $(head -c 600 "$M" 2>/dev/null | tr '\n' ' ')"
fi

# negative control: the check must see corrupted arrays
"$build/cxlpool" create "$POOL" --size 256m >"$out/pool.out" 2>&1 || { bad "cxlpool create: $(cat "$out/pool.out")"; }
env -u LD_PRELOAD PYTHONPATH="$top/python" UCX_CXL_POOL="$POOL" \
    timeout -k 10 300 "$PY" "$top/perftest/dask_bench.py" --smoke --inject-error --out "$out/neg" \
    >"$out/neg.out" 2>&1
rc=$?
got=$("$PY" -c 'import json,sys; m=json.load(open(sys.argv[1])); print(sum(c["ok"] for c in m["checks"]), m["checks_failed"])' \
      "$out/neg/meta.json" 2>&1)
if [ $rc -ne 0 ] && [ "$got" = "0 6" ]; then
    ok "negative control: --inject-error fails all 6 checks (exit $rc)"
else
    bad "negative control: exit $rc, checks '$got': $(tail -n 5 "$out/neg.out" | tr '\n' ' ')"
fi
smoke_finish dask-bench
