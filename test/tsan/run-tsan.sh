#!/usr/bin/env bash
#
# run-tsan.sh BUILDDIR PROGRAM... - the threaded tests under ThreadSanitizer
# (make check-tsan in a build of contrib/build.sh tsan).
#
# Runs each PROGRAM (relative to BUILDDIR) with test/tsan/tsan.supp, which
# leaves out only the non-coherent emulator's own copies of view words
# (test/tsan/README.md).  A program passes when it exits 0 and
# ThreadSanitizer reported nothing, in it or in any process it forked.
# Refuses (exit 99) programs that are not built with ThreadSanitizer: a
# plain build would pass without checking anything.
#
# Ends with "tsan: N passed, N failed"; exit 0 only when nothing failed.
set -uo pipefail

if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
    awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
    exit 0
fi
[ $# -ge 2 ] || { echo "usage: run-tsan.sh BUILDDIR PROGRAM..." >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$1
shift
supp=$here/tsan.supp
pass=0
fail=0

for prog in "$@"; do
    bin=$build/$prog
    # libtool wrappers: the ELF is under .libs
    elf=$bin
    [ -x "$(dirname "$bin")/.libs/$(basename "$bin")" ] &&
        elf=$(dirname "$bin")/.libs/$(basename "$bin")
    [ -x "$(dirname "$bin")/.libs/lt-$(basename "$bin")" ] &&
        elf=$(dirname "$bin")/.libs/lt-$(basename "$bin")
    if ! ldd "$elf" 2>/dev/null | grep -q 'libtsan'; then
        echo "run-tsan.sh: $prog is not built with ThreadSanitizer (contrib/build.sh tsan)" >&2
        exit 99
    fi
    log=$build/$(basename "$prog").tsan.log
    t0=$SECONDS
    TSAN_OPTIONS="suppressions=$supp second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
        "$bin" >"$log" 2>&1
    rc=$?
    races=$(grep -c '^WARNING: ThreadSanitizer' "$log")
    if [ $rc -eq 0 ] && [ "$races" -eq 0 ]; then
        pass=$((pass + 1))
        echo "ok $prog: $(tail -n 1 "$log" | tr -s ' '); no report ($((SECONDS - t0)) s)"
    else
        fail=$((fail + 1))
        echo "FAIL $prog: exit $rc, $races report(s) (log $log)"
        grep -E '^(SUMMARY: ThreadSanitizer|\[  FAILED  \]|not ok)' "$log" | sort | uniq -c | head -20
    fi
done

echo "tsan: $pass passed, $fail failed"
[ $fail -eq 0 ]
