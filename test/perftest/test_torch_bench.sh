#!/usr/bin/env bash
#
# test_torch_bench.sh - smoke run of the PyTorch data-loading benchmark:
# perftest/run-torch-bench.sh --smoke (256 samples of 4 KiB, 8 of 1 MiB,
# num_workers 0 and 2, one cold and one warm epoch per mode, every sample
# checked) must finish, and its output must be well-formed: samples.csv
# has torch_bench.py's columns and one row per set, mode, num_workers and
# epoch, every number a number, every epoch all samples and bytes, every
# sample's CRC32 equal to its file's and each read exactly once (the check
# column); the cold epochs of the CXL modes found nothing resident after
# the eviction and made the broker read the whole dataset from the files
# (its fill counter); results.csv, limits.csv and report.md (with its
# targets table) are written; the report gives the pool's pages as
# cxlpool info said (2 MiB on the run's own huge-page tmpfs, where it may
# mount one), and the mount is gone.  A negative control runs torch_bench.py
# epoch --check --inject-error (one bit of one sample flipped per epoch):
# the check must report the sample and exit non-zero.
# No timing is asserted.  Ends with "torch-bench: N passed, N failed".
#
#   test/perftest/test_torch_bench.sh [BUILDDIR]  (default: $CXL_BUILDDIR,
#                                                  else build-release/)
set -u
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
. "$(dirname "${BASH_SOURCE[0]}")/smoke-common.sh"
PY=/usr/bin/python3
if [ ! -x "$PY" ] || ! "$PY" -c 'import torch, numpy' 2>/dev/null; then
    echo "SKIP: $PY with torch and numpy not found (python3-torch, python3-numpy)"
    exit 77
fi
smoke_init test_torch_bench.sh "${1:-}" .libs/libuct_cxl.so .libs/libcxl_broker.so cxlpool cxl-broker
data=""
smoke_on_exit '[ -n "$data" ] && rm -rf "$data"'
smoke_run run-torch-bench.sh 900 --keep-data
data=$(sed -n 's/^data=//p' "$out/run/meta.env" 2>/dev/null)

S=$out/run/samples.csv
msgs=$(cd "$top/perftest" && "$PY" - "$S" <<'EOF'
import csv, sys
import torch_bench as t
path = sys.argv[1]
try:
    rows = list(csv.reader(open(path, newline="")))
except OSError as e:
    print(f"{path}: {e}"); sys.exit()
if not rows or rows[0] != t.COLUMNS:
    print(f"header {rows[0] if rows else None} != {t.COLUMNS}"); sys.exit()
col = {c: k for k, c in enumerate(t.COLUMNS)}
sets = {"small": (256, 4096), "large": (8, 1 << 20)}
seen = {}
for n, r in enumerate(rows[1:], 2):
    if len(r) != len(t.COLUMNS):
        print(f"row {n}: {len(r)} fields"); continue
    g = lambda c: r[col[c]]
    try:
        for c in ("workers", "rep", "epoch", "samples", "bytes", "nproc", "pss_samples"):
            int(g(c))
        for c in ("seconds", "samples_per_s", "gb_per_s", "pss_peak_mib", "pss_mean_mib", "load1"):
            float(g(c))
    except ValueError as e:
        print(f"row {n}: not a number: {e}"); continue
    key = (g("set"), g("mode"), int(g("workers")), g("kind"))
    seen[key] = seen.get(key, 0) + 1
    N, B = sets.get(g("set"), (None, None))
    if N is None or g("mode") not in t.MODES[g("set")]:
        print(f"row {n}: set/mode {g('set')}/{g('mode')}"); continue
    if int(g("samples")) != N or int(g("bytes")) != N * B:
        print(f"row {n} {key}: {g('samples')} samples, {g('bytes')} bytes (want {N}, {N * B})")
    if g("check") != "ok":
        print(f"row {n} {key}: check '{g('check')}'")
    if float(g("seconds")) <= 0 or float(g("pss_peak_mib")) <= 0:
        print(f"row {n} {key}: seconds {g('seconds')}, PSS {g('pss_peak_mib')}")
    if int(g("nproc")) != 1 + int(g("workers")):
        print(f"row {n} {key}: {g('nproc')} processes measured, want {1 + int(g('workers'))}")
    if g("kind") == "cold":
        if g("dropped") != "1":
            print(f"row {n} {key}: page cache not dropped ({g('dropped')!r})")
        if g("mode") in t.CXL_MODES:
            if g("resident_after_evict") != "0":
                print(f"row {n} {key}: {g('resident_after_evict')} chunks resident after the eviction")
            if g("fill_bytes") == "" or int(g("fill_bytes")) != N * B:
                print(f"row {n} {key}: the broker read {g('fill_bytes')!r} bytes from the files "
                      f"in the cold epoch, want {N * B}")
for s, modes in t.MODES.items():
    for m in modes:
        for w in (0, 2):
            for k in ("cold", "warm"):
                if seen.get((s, m, w, k), 0) != 1:
                    print(f"{s} {m} workers {w} {k}: {seen.get((s, m, w, k), 0)} rows, want 1")
EOF
)
if [ -z "$msgs" ]; then
    ok "samples.csv: a well-formed row per set, mode, num_workers and epoch; every sample right, cold epochs cold"
else
    bad "samples.csv:"
    echo "$msgs" | head -n 15 | sed 's/^/    /'
fi

for f in results.csv limits.csv report.md; do
    if [ -s "$out/run/$f" ]; then ok "$f written"; else bad "$f missing or empty"; fi
done
if awk -F, '$1 == "memcpy" && $6 + 0 > 0 { f = 1 } END { exit !f }' "$out/run/limits.csv" 2>/dev/null; then
    ok "limits.csv has the memcpy limit"
else
    bad "limits.csv has no memcpy figure"
fi
R=$out/run/report.md
smoke_pool_pages "$out/run" run-torch-bench
if grep -q '^## Targets' "$R" 2>/dev/null && grep -q '^| 4 KiB warm samples/s' "$R" &&
    grep -q '^| 1 MiB copy=False' "$R" && grep -q '^| PSS flat in workers' "$R"; then
    ok "report.md has the three targets"
else
    bad "report.md lacks the targets table"
fi

# negative control: the check catches a flipped bit (files mode: no broker)
if [ -n "$data" ] && [ -d "$data/small" ]; then
    (cd "$top/perftest" && timeout -k 5 300 "$PY" torch_bench.py epoch --set small --mode files \
        --data "$data" --workers 0 --warm 1 --no-cold --check --inject-error --csv "$out/neg.csv") \
        >"$out/neg.out" 2>&1
    nrc=$?
    if [ $nrc -ne 0 ] && grep -q 'FAIL sample [0-9]*: crc' "$out/neg.out"; then
        ok "negative control: --inject-error caught ($(grep -o 'FAIL sample [0-9]*' "$out/neg.out" | head -n1), exit $nrc)"
    else
        bad "negative control: exit $nrc, no failed sample reported:"
        sed 's/^/    /' "$out/neg.out" | tail -n 5
    fi
else
    bad "negative control: the smoke run's datasets are gone ('$data')"
fi

smoke_finish torch-bench
