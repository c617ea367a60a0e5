#!/usr/bin/env bash
#
# run-gpu-tests.sh - the Python package's GPU tests and the GPU benchmark,
# on a machine with a CUDA device (nvidia-smi and ucx_cxl.data.cuda_status()).
# Without one it prints one line, "SKIP: ..." with cuda_status()'s message,
# and exits 77.
#
# 1. pytest of python/tests/test_gpu*.py where there are such tests;
# 2. the staging check: perftest/run-torch-bench.sh --cuda-only --smoke:
#    every sample of a small and a large dataset goes from the pool through
#    a StagingRing slot (pinned, cudaHostAlloc) into device memory
#    (cudaMalloc through ctypes: Debian's python3-torch has no CUDA), is
#    copied back (cudaMemcpy device to host) and compared with its file
#    (CRC32), and so is the baseline's path (a collated batch copied into
#    pinned memory, then to the device; pin_memory=True + .cuda() where
#    torch has CUDA);
# 3. the GPU benchmark: perftest/run-torch-bench.sh --cuda-only (--reps,
#    default 1; 20000 x 4 KiB and 200 x 1 MiB): samples/s and GB/s to the
#    device, staging ring against the baseline; report in OUT/report.md.
# --fake-cudart runs 1 and 2 through test/gpu/fake_cudart.c (host memory
# posing as device memory) instead: it checks the code paths where there
# is no GPU, and the check's negative control (FAKE_CUDART_CORRUPT: a bit
# flipped in every copy to the device must be found); no benchmark.
# Ends with "gpu: N passed, N failed"; exit 0 iff none failed.
#
#   test/gpu/run-gpu-tests.sh [--fake-cudart] [--reps N] [--out DIR] [BUILDDIR]
#   BUILDDIR: default $CXL_BUILDDIR, else build-release/
set -u
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
FAKE=0 REPS=1 OUT="" build=""
while (($#)); do
    case $1 in
        -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
        --fake-cudart) FAKE=1 ;;
        --reps) REPS=${2:?--reps needs a value}; shift ;;
        --out) OUT=${2:?--out needs a value}; shift ;;
        -*) echo "run-gpu-tests.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) build=$1 ;;
    esac
    shift
done
build=${build:-${CXL_BUILDDIR:-$top/build-release}}
PY=/usr/bin/python3
if [ ! -x "$PY" ] || ! "$PY" -c 'import torch, numpy' 2>/dev/null; then
    echo "SKIP: $PY with torch and numpy not found (python3-torch, python3-numpy)"
    exit 77
fi
for f in .libs/libuct_cxl.so .libs/libcxl_broker.so cxlpool cxl-broker; do
    [ -e "$build/$f" ] || { echo "run-gpu-tests.sh: $build/$f not found" >&2; exit 99; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpu-tests.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
export PYTHONPATH="$top/python${PYTHONPATH:+:$PYTHONPATH}"
export CXL_LIBDIR="$build/.libs" UCX_WARN_UNUSED_ENV_VARS=n CXL_BUILDDIR="$build"

if ((FAKE)); then
    mkdir -p "$tmp/cuda/lib64"
    gcc -O2 -Wall -Wextra -Werror -shared -fPIC -o "$tmp/cuda/lib64/libcudart.so" \
        "$top/test/gpu/fake_cudart.c" >"$tmp/gcc.log" 2>&1 ||
        { echo "run-gpu-tests.sh: building fake_cudart.c failed:"; cat "$tmp/gcc.log"; exit 99; }
    export CUDA_HOME="$tmp/cuda"
    echo "note: --fake-cudart: host memory posing as a GPU (the code paths, not a GPU)"
fi
status=$("$PY" -c 'from ucx_cxl.data import cuda_status
ok, why = cuda_status()
print("ok" if ok else why)' 2>&1 | tail -n 1)
if [ "$status" != ok ]; then
    smi="nvidia-smi not found"
    if command -v nvidia-smi >/dev/null 2>&1; then
        smi="nvidia-smi: $(nvidia-smi -L 2>&1 | head -n 1)"
    fi
    echo "SKIP: no usable GPU: $status ($smi)"
    exit 77
fi
if ((!FAKE)) && command -v nvidia-smi >/dev/null 2>&1; then
    echo "note: $(nvidia-smi -L 2>&1 | head -n 1)"
fi

pass=0
fail=0
ok() { echo "ok: $*"; pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

# 1. the package's GPU tests
shopt -s nullglob
gtests=("$top"/python/tests/test_gpu*.py)
shopt -u nullglob
if ((${#gtests[@]})); then
    (cd "$top/python" && timeout -k 10 900 "$PY" -m pytest -q -rs "${gtests[@]}") >"$tmp/pytest.out" 2>&1
    rc=$?
    summary=$(tail -n 1 "$tmp/pytest.out")
    if [ $rc -eq 0 ]; then
        ok "pytest ${gtests[*]##*/}: $summary"
    else
        bad "pytest ${gtests[*]##*/} exit $rc: $summary"
        tail -n 30 "$tmp/pytest.out" | sed 's/^/    /'
    fi
else
    echo "note: no python/tests/test_gpu*.py: the staging check below is the GPU test"
fi

# 2. the staging check: every sample to the device and back, compared
staging() {   # staging LABEL OUTDIR [ENV...]
    local label=$1 dir=$2
    shift 2
    env "$@" timeout -k 10 900 "$top/perftest/run-torch-bench.sh" --cuda-only --smoke \
        --builddir "$build" --out "$dir" >"$dir.log" 2>&1
}
staging check "$tmp/check"
rc=$?
rows=$(awk -F, 'NR > 1 && $21 == "ok"' "$tmp/check/cuda.csv" 2>/dev/null | wc -l)
if [ $rc -eq 0 ] && [ "$rows" -ge 4 ]; then
    ok "staging check: small and large sets, staging ring and baseline, every sample on the device equal to its file ($rows rows)"
else
    bad "staging check: exit $rc, $rows checked rows of 4:"
    grep -h -E 'FAIL|Error|error' "$tmp/check.log" "$tmp"/check/raw/cuda-*.log 2>/dev/null | head -n 10 | sed 's/^/    /'
fi
if ((FAKE)); then
    staging negative "$tmp/neg" FAKE_CUDART_CORRUPT=1
    nrc=$?
    if [ $nrc -ne 0 ] && grep -q 'on the device: crc' "$tmp"/neg/raw/cuda-small-rep1.log 2>/dev/null; then
        ok "negative control: a bit flipped in every copy to the device is found (exit $nrc)"
    else
        bad "negative control: corrupted device copies went unnoticed (exit $nrc)"
    fi
fi

# 3. the GPU benchmark
if ((!FAKE)); then
    out=${OUT:-$top/perftest/out/gpu-$(date +%Y%m%d-%H%M%S)}
    timeout -k 10 1800 "$top/perftest/run-torch-bench.sh" --cuda-only --reps "$REPS" \
        --builddir "$build" --out "$out" >"$tmp/bench.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && [ -s "$out/cuda.csv" ]; then
        ok "GPU benchmark: $out/report.md"
        sed -n '/^## GPU/,/^## /p' "$out/report.md" | sed '$d'
    else
        bad "GPU benchmark exit $rc (see $out/run.log)"
        tail -n 10 "$tmp/bench.log" | sed 's/^/    /'
    fi
fi

echo "gpu: $pass passed, $fail failed"
[ $fail -eq 0 ]
