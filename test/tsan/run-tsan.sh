#!/usr/bin/env bash
#
# run-tsan.sh BUILDDIR PROGRAM... - the threaded tests under ThreadSanitizer
# (make check-tsan in a build of contrib/build.sh tsan).
#
# Runs each PROGRAM (relative to BUILDDIR) with test/tsan/tsan.supp, which
# leaves out only the non-coherent emulator's own copies of view words
# (test/tsan/README.md).  A PROGRAM ending in .sh is a script of the source
# tree (relative to its top, e.g. test/tsan/tsan-broker.sh) that runs
# programs of BUILDDIR, named to it by CXL_BUILDDIR.  A program passes when
# it exits 0 and ThreadSanitizer reported nothing, in it or in any process
# it started: the reports of every process go to BUILDDIR/NAME.tsan.d/
# (TSAN_OPTIONS log_path) and are appended to the log, BUILDDIR/NAME.tsan.log.
# Refuses (exit 99) programs that are not built with ThreadSanitizer: a
# plain build would pass without checking anything (a script exits 99 for
# its programs).  UCX_MEM_EVENTS=no: UCX's memory hooks patch madvise,
# which glibc calls as a thread exits, after ThreadSanitizer dropped the
# thread's state; the hook's rwlock then faults in TSan's interceptor (any
# TSan program that loads libucs and ends a thread; not a race).
#
# Ends with "tsan: N passed, N failed"; exit 0 only when nothing failed.
set -uo pipefail

if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
    awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
    exit 0
fi
[ $# -ge 2 ] || { echo "usage: run-tsan.sh BUILDDIR PROGRAM..." >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/test/helpers/realbin.sh"
build=$(cd "$1" && pwd)
shift
supp=$here/tsan.supp
pass=0
fail=0

for prog in "$@"; do
    case $prog in
        *.sh)
            name=$(basename "$prog" .sh)
            cmd=(env "CXL_BUILDDIR=$build" bash "$top/$prog")
            ;;
        *)
            name=$(basename "$prog")
            if ! ldd "$(realbin "$build/$prog")" 2>/dev/null | grep -q 'libtsan'; then
                echo "run-tsan.sh: $prog is not built with ThreadSanitizer (contrib/build.sh tsan)" >&2
                exit 99
            fi
            cmd=("$build/$prog")
            ;;
    esac
    log=$build/$name.tsan.log
    reports=$build/$name.tsan.d
    rm -rf "$reports"
    mkdir -p "$reports"
    t0=$SECONDS
    UCX_MEM_EVENTS=no \
    TSAN_OPTIONS="suppressions=$supp second_deadlock_stack=1 log_path=$reports/report ${TSAN_OPTIONS:-}" \
        "${cmd[@]}" >"$log" 2>&1
    rc=$?
    if [ $rc -eq 99 ] && [ "${prog%.sh}" != "$prog" ]; then
        tail -n 3 "$log" >&2
        exit 99
    fi
    last=$(tail -n 1 "$log" | tr -s ' ')
    cat "$reports"/report.* >>"$log" 2>/dev/null
    races=$(grep -c '^WARNING: ThreadSanitizer' "$log")
    if [ $rc -eq 0 ] && [ "$races" -eq 0 ]; then
        pass=$((pass + 1))
        echo "ok $prog: $last; no report ($((SECONDS - t0)) s)"
    else
        fail=$((fail + 1))
        echo "FAIL $prog: exit $rc, $races report(s) (log $log)"
        grep -E '^(SUMMARY: ThreadSanitizer|\[  FAILED  \]|not ok|FAIL )' "$log" | sort | uniq -c | head -20
    fi
done

echo "tsan: $pass passed, $fail failed"
[ $fail -eq 0 ]
