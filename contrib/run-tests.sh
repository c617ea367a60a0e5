#!/usr/bin/env bash
#
# run-tests.sh - the one command that runs every test of ucx-cxl.
#
# On a fresh Debian bookworm machine it installs what it needs
# (contrib/setup-deps.sh), builds twice - release (-Werror) and
# ASan+UBSan - and runs `make check` in both builds: the googletest suites
# and the tests that drive the real binaries.  It ends with one line
# "N passed, N failed" and exits non-zero when anything failed.
#
# The release pass also runs UCX 1.13.1's own UCT test suite against the
# transport (make check-ucx-gtest; the first run builds UCX's gtest outside
# the tree, cached in /var/cache/ucx-cxl: 15-25 minutes once), then the same
# suite in software-coherent mode on the non-coherent pool emulator (make
# check-ucx-gtest-sw).  `make check` itself runs the UCP tests and the MPI
# program in both modes (test/sw/run-ucp-sw.sh, test/sw/run-mpi-sw.sh).
#
# Then MPICH's collective tests against coll/cxl (make check-mpich: the
# test suite of Debian's mpich 4.0.2 source package, fetched once into
# /var/cache/ucx-cxl; coll, threads/coll and threads/comm in hw mode,
# each failed run again without coll/cxl so Open MPI's own failures are
# told apart; about 9 minutes).
#
# The release pass ends with make check-devdax (test/vm/README.md): the
# project on real device DAX in QEMU guests, Debian's kernel, a CXL Type-3
# device and two guests sharing one NVDIMM file (about 1.5 minutes under
# software emulation once the guest image is cached; it says SKIP with the
# reason where the machine cannot run it).
#
# Then the ThreadSanitizer pass: contrib/build.sh tsan builds the threaded
# tests (the pool's, test_coll_threads, test_comm_copy, the broker daemon
# through test/tsan/tsan-broker.sh) with -fsanitize=thread and make
# check-tsan runs them (test/tsan/README.md; about 3 minutes).
#
# Last, the fuzz pass: contrib/build.sh fuzz (clang-14, ASan, UBSan,
# coverage) and make check-fuzz, every libFuzzer harness of test/fuzz for
# 10 s from its committed corpus (test/fuzz/run-fuzz.sh).
#
# Options: --no-sanitizers   skip the ASan/UBSan pass
#          --no-ucx-gtest    skip UCX's UCT suites (hw and sw)
#          --no-mpich        skip MPICH's collective tests (make check-mpich)
#          --no-vm           skip the QEMU guests (make check-devdax)
#          --no-tsan         skip the ThreadSanitizer pass
#          --no-fuzz         skip the fuzz pass
#          --help            this text
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
variants=(release sanitizers)
ucx_gtest=1
mpich=1
fuzz=1
tsan=1
vm=1
for arg in "$@"; do
    case "$arg" in
        --no-sanitizers) variants=(release) ;;
        --no-ucx-gtest) ucx_gtest=0 ;;
        --no-mpich) mpich=0 ;;
        --no-fuzz) fuzz=0 ;;
        --no-tsan) tsan=0 ;;
        --no-vm) vm=0 ;;
        -h|--help) # the header comment, whatever its length
            awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
            exit 0 ;;
        *) echo "run-tests.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done

"$top/contrib/setup-deps.sh" || { echo "run-tests.sh: set-up failed" >&2; exit 1; }

passed=0
failed=0

# Count one test program's results from its log: the "name: N passed, N
# failed" line of script tests, else gtest's summary, else the verdict.
count_log() {
    local log=$1 trs=${1%.log}.trs verdict p f
    verdict=$(sed -n 's/^:test-result: //p' "$trs" 2>/dev/null | head -1)
    p=$(sed -n 's/^[a-z0-9_-]*: \([0-9]*\) passed, \([0-9]*\) failed.*/\1/p' "$log" | tail -1)
    f=$(sed -n 's/^[a-z0-9_-]*: \([0-9]*\) passed, \([0-9]*\) failed.*/\2/p' "$log" | tail -1)
    if [ -z "$p" ]; then
        p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\..*/\1/p' "$log" | tail -1)
        f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\{0,1\}, listed below.*/\1/p' "$log" | tail -1)
    fi
    p=${p:-0}
    f=${f:-0}
    if [ "$verdict" != PASS ] && [ "$verdict" != SKIP ] && [ "$f" -eq 0 ]; then
        f=1   # crashed, leaked or failed outside the counted tests
    fi
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && [ "$verdict" = PASS ]; then
        p=1
    fi
    echo "  $(basename "$log" .log): $p passed, $f failed ($verdict)"
    passed=$((passed + p))
    failed=$((failed + f))
}

# run_check DIR NAME TITLE SHOW: make check-NAME in DIR, counted like a
# test; the log's lines that match the regex SHOW are shown
run_check() {
    local dir=$1 name=$2 rc
    echo "=== $3 ==="
    make -C "$dir" "check-$name" >"$dir/$name.log" 2>&1
    rc=$?
    grep -E "$4" "$dir/$name.log" | sort -u
    echo ":test-result: $([ $rc -eq 0 ] && echo PASS || echo FAIL)" >"$dir/$name.trs"
    count_log "$dir/$name.log"
    [ $rc -eq 0 ] || tail -30 "$dir/$name.log"
}

# run_devdax DIR: make check-devdax in DIR, counted like a test; a skip
# (the script's "vm-devdax: SKIP: why") is shown and counts nothing
run_devdax() {
    local dir=$1 rc
    echo "=== real device DAX in QEMU guests (make check-devdax) ==="
    make -C "$dir" check-devdax >"$dir/devdax.log" 2>&1
    rc=$?
    if grep -q '^vm-devdax: SKIP: ' "$dir/devdax.log"; then
        grep '^vm-devdax: SKIP: ' "$dir/devdax.log"
        echo ":test-result: SKIP" >"$dir/devdax.trs"
        return
    fi
    grep -E '^(# vm-devdax: accelerator|# timings:|FAIL |\[[a-z]*\] FAIL )' "$dir/devdax.log"
    echo ":test-result: $([ $rc -eq 0 ] && echo PASS || echo FAIL)" >"$dir/devdax.trs"
    count_log "$dir/devdax.log"
    [ $rc -eq 0 ] || tail -30 "$dir/devdax.log"
}

for variant in "${variants[@]}"; do
    echo "=== $variant build ==="
    if ! dir=$("$top/contrib/build.sh" "$variant"); then
        echo "run-tests.sh: $variant build failed" >&2
        failed=$((failed + 1))
        continue
    fi
    make -C "$dir" -j"$(nproc)" check >"$dir/check.out" 2>&1
    rc=$?
    grep -E '^(PASS|FAIL|XFAIL|XPASS|SKIP|ERROR):' "$dir/check.out"
    while IFS= read -r log; do
        count_log "$log"
    done < <(find "$dir/test" -name '*.log' | sort)
    if [ $rc -ne 0 ]; then
        echo "run-tests.sh: make check failed in $dir (rc $rc); logs under $dir/test"
        for log in $(grep -l -E '^:test-result: (FAIL|ERROR)' $(find "$dir/test" -name '*.trs') 2>/dev/null); do
            # the failures themselves first: the tail alone often holds
            # only a summary that names the failed test
            echo "--- ${log%.trs}.log (failures)"
            grep -E -A8 ': Failure$|^not ok|^FAIL|ERROR: AddressSanitizer|runtime error:|^E +' \
                "${log%.trs}.log" | head -80
            echo "--- ${log%.trs}.log (last 40 lines)"
            tail -40 "${log%.trs}.log"
        done
        [ "$failed" -gt 0 ] || failed=1
    fi
    if [ "$variant" = release ] && [ "$ucx_gtest" = 1 ]; then
        run_check "$dir" ucx-gtest \
            "UCX 1.13.1 UCT suite against cxl (test/ucx-gtest/SKIPS.md)" \
            '^(ucx-gtest:|\[  FAILED  \] cxl/)'
        run_check "$dir" ucx-gtest-sw \
            "the same in sw mode on the non-coherent pool emulator" \
            '^(ucx-gtest-sw:|\[  FAILED  \] cxl/)'
    fi
    if [ "$variant" = release ] && [ "$mpich" = 1 ]; then
        run_check "$dir" mpich \
            "MPICH 4.0.2's collective tests with coll/cxl (contrib/run-mpich-coll-tests.sh)" \
            '^(run-mpich-coll-tests:|FAIL |not built )'
    fi
    if [ "$variant" = release ] && [ "$vm" = 1 ]; then
        run_devdax "$dir"
    fi
done

# run_build_check VARIANT NAME TITLE SHOW: contrib/build.sh VARIANT, then
# run_check in its build directory
run_build_check() {
    local dir
    echo "=== $1 build ==="
    if ! dir=$("$top/contrib/build.sh" "$1"); then
        echo "run-tests.sh: $1 build failed" >&2
        failed=$((failed + 1))
        return
    fi
    run_check "$dir" "$2" "$3" "$4"
}

if [ "$tsan" = 1 ]; then
    run_build_check tsan tsan "ThreadSanitizer over the threaded tests (make check-tsan, test/tsan)" \
        '^(ok |FAIL |tsan:| +[0-9]+ (SUMMARY|\[  FAILED))'
fi

if [ "$fuzz" = 1 ]; then
    run_build_check fuzz fuzz "libFuzzer harnesses (make check-fuzz, test/fuzz)" \
        '^(ok |FAIL |    |reproducer )'
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
