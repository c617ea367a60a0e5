#!/usr/bin/env bash
#
# test_mpi_build.sh - mpi_build (mpi-common.sh) replaces its program in one
# step: while other test scripts rebuild the same program, a script that runs
# it never finds it missing or half written.  run-mpi.sh, run-mpi-reg-n.sh,
# run-mpi-single-host.sh and run-mpi-sw.sh all build
# BUILDDIR/test/mpi/mpi_cxl_test and `make check -j` runs them at once; the
# linker unlinks and rewrites its output, and mpirun once failed with "could
# not access or execute an executable" in that window (CI, stop 28).
#
# Usage: test_mpi_build.sh [-h|--help]
# Builds mpi_cxl_test once, then rebuilds it from 3 concurrent mpi_build
# calls, ROUNDS times (default 4), while a watcher checks the program's size
# as fast as the shell can.  Needs mpicc; exit 77 (skip) without it.
# Ends with "mpi-build: N passed, N failed".
set -u
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$SCRIPT_DIR/mpi-common.sh"
command -v mpicc >/dev/null 2>&1 || { echo "SKIP: mpicc not found"; exit 77; }

ROUNDS=${ROUNDS:-4}
SCR=$(mktemp -d "${TMPDIR:-/tmp}/test-mpi-build.XXXXXX") || exit 99
trap 'rm -rf "$SCR"' EXIT
BIN=$SCR/mpi_cxl_test
pass=0
fail=0

(mpi_build "$SCRIPT_DIR/mpi_cxl_test.c" "$BIN") >/dev/null || exit 99
size=$(stat -c %s "$BIN") || exit 99

# the watcher: every observation of BIN must be the whole program
: > "$SCR/bad"
( while [ ! -e "$SCR/stop" ]; do
      s=$(stat -c %s "$BIN" 2>/dev/null || echo missing)
      [ "$s" = "$size" ] || echo "$s" >> "$SCR/bad"
  done ) &
watcher=$!
seen=0
for ((r = 0; r < ROUNDS; r++)); do
    pids=()
    for i in 1 2 3; do
        (mpi_build "$SCRIPT_DIR/mpi_cxl_test.c" "$BIN") >/dev/null 2>"$SCR/err.$i" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || { echo "FAIL: mpi_build failed:"; cat "$SCR"/err.*; fail=$((fail + 1)); }; done
done
touch "$SCR/stop"
wait "$watcher"

nbad=$(wc -l < "$SCR/bad")
if [ "$nbad" -eq 0 ]; then
    echo "ok: $((ROUNDS * 3)) concurrent rebuilds, the program always whole ($size bytes)"
    pass=$((pass + 1))
else
    echo "FAIL: the program was missing or partial $nbad times during rebuilds:" \
         "$(sort | uniq -c < "$SCR/bad" | head -5 | tr '\n' ' ')"
    fail=$((fail + 1))
fi
left=$(find "$SCR" -name 'mpi_cxl_test?*' | wc -l)
if [ "$left" -eq 0 ]; then
    echo "ok: no temporary files left beside the program"; pass=$((pass + 1))
else
    echo "FAIL: $left temporary files left beside the program"; fail=$((fail + 1))
fi
echo "mpi-build: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
