#!/usr/bin/env bash
#
# run-fuzz.sh - run the libFuzzer harnesses of test/fuzz (built by
# contrib/build.sh fuzz: clang-14 with ASan, UBSan and coverage), each for a
# bounded time, from its committed corpus test/fuzz/corpus/NAME (seed
# inputs plus the reproducer of every finding, so old findings are
# replayed first).  A crash, a sanitizer report, a leak, a hang (an input
# taking over 10 s) or a harness that cannot start fails that target; its
# reproducer is kept under the work directory and named in the output.
#
# Usage: run-fuzz.sh [--builddir DIR] [--time SECONDS] [--keep DIR] [NAME...]
#   --builddir DIR  the fuzz build (default TOP/build-fuzz)
#   --time S        seconds per target (default $FUZZ_TIME, else 10; make
#                   fuzz runs 300)
#   --keep DIR      keep the inputs each run found in DIR/NAME (default: a
#                   temporary directory, removed at the end); merge them
#                   into the corpus with libFuzzer's -merge=1 by hand
#   NAME...         harnesses to run (default: every test/fuzz/fuzz_* built)
#
# Prints per target "ok NAME: E execs in S s, cov C, ft F, corpus N" (E:
# executions, C: coverage edges reached, F: features) or "FAIL NAME: why",
# then "fuzz: N passed, N failed".  Exit status 0 only when nothing failed;
# 99 when the build has no harness.

set -u

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$SCRIPT_DIR/../.." && pwd)
BUILD=$TOP/build-fuzz
TIME=${FUZZ_TIME:-10}
KEEP=
names=()
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
        --builddir) BUILD=${2:?--builddir needs a directory}; shift 2 ;;
        --time) TIME=${2:?--time needs seconds}; shift 2 ;;
        --keep) KEEP=${2:?--keep needs a directory}; shift 2 ;;
        -*) echo "run-fuzz.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
        *) names+=("$1"); shift ;;
    esac
done
case "$TIME" in
    ''|*[!0-9]*) echo "run-fuzz.sh: --time '$TIME' is not a number of seconds" >&2; exit 2 ;;
esac
if [ ${#names[@]} -eq 0 ]; then
    for b in "$BUILD"/test/fuzz/fuzz_*; do
        [ -x "$b" ] && [ -f "$b" ] && names+=("$(basename "$b")")
    done
fi
if [ ${#names[@]} -eq 0 ]; then
    echo "run-fuzz.sh: no harness in $BUILD/test/fuzz (build with contrib/build.sh fuzz)" >&2
    exit 99
fi

work=$(mktemp -d /tmp/cxl-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
kept=()
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

for name in "${names[@]}"; do
    bin=$BUILD/test/fuzz/$name
    seeds=$TOP/test/fuzz/corpus/${name#fuzz_}
    if [ ! -x "$bin" ]; then
        echo "FAIL $name: $bin not built"
        failed=$((failed + 1)); continue
    fi
    if [ -n "$KEEP" ]; then
        found=$KEEP/$name
    else
        found=$work/$name
    fi
    mkdir -p "$found" "$work/art-$name"
    dirs=("$found")
    [ -d "$seeds" ] && dirs+=("$seeds")
    log=$work/$name.log
    # the time bound covers the replay of the corpus too; -timeout makes a
    # slow input a failure rather than a stall
    "$bin" -max_total_time="$TIME" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$work/art-$name/" \
        "${dirs[@]}" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    secs=$(sed -n 's/^stat::.*_time: *//p' "$log" | head -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | awk '{print $2}')
    ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | awk '{print $2}')
    ncorp=$(find "$found" -type f | wc -l)
    nseed=$( [ -d "$seeds" ] && find "$seeds" -type f | wc -l || echo 0)
    if [ $rc -eq 0 ] && [ -n "$execs" ]; then
        echo "ok $name: ${execs} execs in ${TIME} s, cov ${cov:-?}, ft ${ft:-?}, corpus $nseed seeds + $ncorp new"
        passed=$((passed + 1))
    else
        art=$(find "$work/art-$name" -type f | head -1)
        echo "FAIL $name: exit $rc after ${execs:-0} execs${art:+, reproducer $art}"
        grep -E "^(==[0-9]+==ERROR|SUMMARY|.*runtime error|ALARM|    #[0-9] )" "$log" | head -20 | sed 's/^/    /'
        if [ -n "$art" ]; then
            mkdir -p "${FUZZ_ARTIFACTS:-$TOP/build-fuzz/fuzz-artifacts}"
            cp "$art" "${FUZZ_ARTIFACTS:-$TOP/build-fuzz/fuzz-artifacts}/$name-$(basename "$art")" &&
                kept+=("${FUZZ_ARTIFACTS:-$TOP/build-fuzz/fuzz-artifacts}/$name-$(basename "$art")")
        fi
        failed=$((failed + 1))
    fi
done
for k in "${kept[@]+"${kept[@]}"}"; do
    echo "reproducer kept: $k (add it to test/fuzz/corpus/NAME once fixed)"
done
echo "fuzz: $passed passed, $failed failed"
[ $failed -eq 0 ]
