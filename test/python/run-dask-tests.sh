#!/usr/bin/env bash
#
# run-dask-tests.sh - the Dask comm backend's tests: /usr/bin/python3 -m
# pytest -q python/tests/dask (the comm contract of distributed on cxl,
# libcxl_comm's wire-up, LocalCluster(protocol="cxl") against tcp, a worker
# killed with SIGKILL), with PYTHONPATH=TOP/python and the libraries of the
# build folder (CXL_LIBDIR where it is not TOP/build-release or
# TOP/build, which the package finds itself).  The caller's UCX_* variables and
# LD_PRELOAD are cleared (the package loads the transport itself; the
# backend's default UCX_TLS is cxl,tcp).  The tests make their own pool
# under /dev/shm.  Ends with "dask: N passed, N failed".
# Exit 0 iff nothing failed; 77 when Debian's python3-distributed or
# pytest is missing; 99 when the build is.
#
#   test/python/run-dask-tests.sh [BUILDDIR] [PYTEST ARGS...]
#                         (BUILDDIR default: $CXL_BUILDDIR, else build-release/)
set -u
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
build=${CXL_BUILDDIR:-$top/build-release}
if [ $# -gt 0 ] && [ -d "$1" ]; then
    build=$1
    shift
fi
build=$(cd "$build" 2>/dev/null && pwd) || { echo "run-dask-tests.sh: no build folder '$build'" >&2; exit 99; }
PY=/usr/bin/python3
for f in .libs/libuct_cxl.so .libs/libcxl_comm.so cxlpool; do
    [ -e "$build/$f" ] || { echo "run-dask-tests.sh: $build/$f not found (build first)" >&2; exit 99; }
done
"$PY" -c 'import distributed, dask, numpy, pandas, pytest' 2>/dev/null ||
    { echo "SKIP: $PY lacks distributed, dask, numpy, pandas or pytest"; exit 77; }

while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^UCX_' || true)
unset LD_PRELOAD
export PYTHONPATH=$top/python CXLPOOL_BIN=$build/cxlpool
if [ "$build" != "$top/build-release" ] && [ "$build" != "$top/build" ]; then
    # the package finds those two itself; UCX warns about UCX_ variables
    # it does not know (on stdout)
    export CXL_LIBDIR=$build/.libs UCX_WARN_UNUSED_ENV_VARS=n
fi

out=$(mktemp "${TMPDIR:-/tmp}/dask-tests.XXXXXX") || exit 99
trap 'rm -f "$out"' EXIT
cd "$top" || exit 99
timeout -k 10 900 "$PY" -m pytest -q -p no:cacheprovider python/tests/dask "$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
last=$(grep -E '^[0-9]+ (passed|failed|error)|^=+ .*(passed|failed|error)' "$out" | tail -n 1)
num() { printf '%s\n' "$last" | grep -oE "[0-9]+ $1" | grep -oE '^[0-9]+' || echo 0; }
passed=$(num passed)
failed=$(( $(num failed) + $(num error) ))
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
    echo "run-dask-tests.sh: pytest exit status $rc$( [ "$rc" = 124 ] && echo ' (timed out)')"
    failed=1
fi
echo "dask: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
