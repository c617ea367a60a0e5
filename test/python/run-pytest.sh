#!/usr/bin/env bash
#
# run-pytest.sh - the Python package's tests (python/tests, pytest) with
# Debian's /usr/bin/python3 (pytest, torch, numpy from Debian's packages):
# the suite starts its own cxl-broker on a pool under /dev/shm, writes its
# datasets into a temporary directory and removes both at the end
# (python/tests/conftest.py; what each test checks: the head of each
# test_*.py).  It takes about 30 s on 2 cores.
#
# Environment: CXL_BUILDDIR, the build tree whose cxlpool, cxl-broker and
# .libs/ the tests use (default: the directory of CXLPOOL_BIN when that is
# set, as under make check, else TOP/build-release); CXLPOOL_BIN and
# CXL_UCT_MODULE as for the other scripts (test/helpers/ucx-module.sh).
# Extra arguments go to pytest (e.g. -k resume, -x).
#
# Prints pytest's output, then "pytest: N skipped" when tests skipped (the
# GPU tests without a CUDA device) and "pytest: N passed, N failed" (errors
# count as failures).  Exit status 0 only when nothing failed; 77 (skipped)
# when /usr/bin/python3 lacks pytest, torch or numpy, or when the build's
# libraries need the ASan runtime; 99 when the build is missing.

set -u

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$SCRIPT_DIR/../.." && pwd)
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac

if [ -n "${CXL_BUILDDIR:-}" ]; then
    BUILD=$CXL_BUILDDIR
elif [ -n "${CXLPOOL_BIN:-}" ]; then
    BUILD=$(dirname "$CXLPOOL_BIN")
else
    BUILD=$TOP/build-release
fi
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || {
    echo "run-pytest.sh: build directory '$BUILD' not found (build first)" >&2
    exit 99
}
export CXLPOOL_BIN=${CXLPOOL_BIN:-$BUILD/cxlpool}
export CXL_UCT_MODULE=${CXL_UCT_MODULE:-$BUILD/.libs/libuct_cxl.so}
. "$TOP/test/helpers/ucx-module.sh"
cxl_ucx_setup run-pytest.sh "$TOP"
if [ ! -x "$BUILD/cxl-broker" ]; then
    echo "run-pytest.sh: $BUILD/cxl-broker not found (build first)" >&2
    exit 99
fi
if [ "$PRELOAD" != "$MODULE" ]; then
    # python cannot load the ASan runtime first, as the libraries need
    echo "run-pytest.sh: $MODULE needs the ASan runtime: skipped"
    exit 77
fi

PY=/usr/bin/python3
if ! "$PY" -c 'import pytest, torch, numpy' 2>/dev/null; then
    echo "run-pytest.sh: $PY lacks pytest, torch or numpy (contrib/setup-deps.sh" \
         "installs Debian's python3-pytest, -torch, -numpy): skipped"
    exit 77
fi

OUT=$(mktemp "${TMPDIR:-/tmp}/run-pytest.XXXXXX")
trap 'rm -f "$OUT"' EXIT
cd "$TOP"
# no bytecode or pytest cache in the source tree (read-only in distcheck)
PYTHONPATH=$TOP/python${PYTHONPATH:+:$PYTHONPATH} \
CXL_LIBDIR=$(dirname "$MODULE") CXL_BUILDDIR=$BUILD \
PYTHONDONTWRITEBYTECODE=1 \
    timeout 900 "$PY" -m pytest -q -rs -p no:cacheprovider --ignore=python/tests/dask python/tests "$@" \
    2>&1 | tee "$OUT"
rc=${PIPESTATUS[0]}

# the summary: "3 failed, 25 passed, 2 skipped, 1 error in 22.81s"
summary=$(grep -E '^=* ?[0-9]+ [a-z]+.* in [0-9.]+s' "$OUT" | tail -n 1)
num() { sed -nE "s/.*[^0-9]([0-9]+) $1.*/\\1/p" <<<" $summary" | head -n 1; }
passed=$(num passed)
failed=$(num failed)
errors=$(num 'errors?')
skipped=$(num skipped)
passed=${passed:-0}
failed=$((${failed:-0} + ${errors:-0}))
if [ "$rc" != 0 ] && [ "$failed" = 0 ]; then
    # interrupted, a collection error, the watchdog (124), ...
    echo "run-pytest.sh: pytest exited $rc$( [ "$rc" = 124 ] && echo ' (watchdog)')" \
         "with no failure counted"
    failed=1
fi
if [ "${skipped:-0}" != 0 ]; then
    echo "pytest: $skipped skipped"
fi
echo "pytest: $passed passed, $failed failed"
[ "$failed" = 0 ]
