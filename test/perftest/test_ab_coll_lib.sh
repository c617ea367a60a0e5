#!/usr/bin/env bash
#
# test_ab_coll_lib.sh - smoke run of perftest/ab-coll-lib.sh: the library
# of HEAD against the files as they are (--a-rev HEAD --b-rev WORKTREE),
# one repetition of bcast and allreduce at 8 B and 4 KiB, must finish;
# both libraries must have been compiled, samples.csv must hold one row per
# build, collective and size with a number, and ab.md one row per cell.
# A folder that holds a component too runs it on its side.
# Bad input must fail with a message and no run: an unknown revision, a
# missing build, a folder without the library.  No timing is asserted.
# Ends with "ab-coll-lib: N passed, N failed".
#
#   test/perftest/test_ab_coll_lib.sh [BUILDDIR]   (default: $CXL_BUILDDIR,
#                                                   else build-release/)
set -u
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
. "$(dirname "${BASH_SOURCE[0]}")/smoke-common.sh"
for t in mpirun mpicc git; do
    command -v "$t" >/dev/null 2>&1 || { echo "SKIP: $t not found"; exit 77; }
done
smoke_init test_ab_coll_lib.sh "${1:-}" .libs/libuct_cxl.so cxlpool
if [ ! -f "$build/.libs/mca_coll_cxl.so" ]; then
    echo "SKIP: this build has no mca_coll_cxl.so (no Open MPI headers)"
    exit 77
fi
git -C "$top" rev-parse --verify -q HEAD >/dev/null ||
    { echo "SKIP: $top is not a git checkout"; exit 77; }
AB=$top/perftest/ab-coll-lib.sh

smoke_exec ab-coll-lib.sh 600 "$AB" --a-rev HEAD --b-rev WORKTREE \
    --builddir "$build" --reps 1 --sizes 8,4K --colls bcast,allreduce \
    --budget 0.01 --out "$out/run"
for b in A B; do
    if [ -f "$out/run/lib-$b/libcxl_coll.so.0" ]; then
        ok "library $b compiled"
    else
        bad "library $b not compiled"
    fi
done
smoke_header "$out/run/samples.csv" "build,rep,collective,bytes,avg_us"
rows=$(awk -F, 'NR > 1 && $1 ~ /^[AB]$/ && $2 == 1 && $5 ~ /^[0-9]+(\.[0-9]+)?$/' \
       "$out/run/samples.csv" 2>/dev/null | wc -l)
if [ "$rows" -eq 8 ]; then
    ok "samples.csv: 8 rows (2 builds x 2 collectives x 2 sizes)"
else
    bad "samples.csv: $rows well-formed rows, want 8"
fi
cells=$(grep -cE '^\| (bcast|allreduce) \| (8|4096) \|' "$out/run/ab.md" 2>/dev/null)
if [ "${cells:-0}" -eq 4 ]; then
    ok "ab.md: 4 cells"
else
    bad "ab.md: ${cells:-0} cells, want 4"
fi

# a folder with a component of its own: that side runs it
mkdir -p "$out/both"
cp -f "$out/run/lib-A/libcxl_coll.so.0" "$build/.libs/mca_coll_cxl.so" "$out/both/" 2>/dev/null
smoke_exec "ab-coll-lib.sh, A with its component" 600 "$AB" --a "$out/both" \
    --b-rev WORKTREE --builddir "$build" --reps 1 --sizes 8 --colls bcast \
    --budget 0.01 --out "$out/run2"
if grep -q "component A \`$out/both/mca_coll_cxl.so\`, B \`$build/.libs/mca_coll_cxl.so\`" \
       "$out/run2/ab.md" 2>/dev/null &&
   [ -f "$out/run2/bin/coll-A/mca_coll_cxl.so" ]; then
    ok "a folder's own component runs on its side (ab.md names both)"
else
    bad "ab.md does not name A's own component: $(sed -n 3p "$out/run2/ab.md" 2>/dev/null)"
fi

# bad input: an error that says what, nothing run
expect_error() {   # expect_error WHAT PATTERN ARGS...
    local what=$1 pat=$2 o rc
    shift 2
    o=$("$AB" --builddir "$build" --out "$out/bad" "$@" 2>&1)
    rc=$?
    if [ $rc -ne 0 ] && printf '%s\n' "$o" | grep -q -- "$pat" &&
       [ ! -e "$out/bad/samples.csv" ]; then
        ok "$what: refused ($(printf '%s\n' "$o" | tail -n1))"
    else
        bad "$what: exit $rc, output: $o"
    fi
    rm -rf "$out/bad"
}
expect_error "unknown revision" "no such revision" --a-rev no-such-rev-xyz --b-rev HEAD
expect_error "one build only" "give both builds" --a-rev HEAD
expect_error "folder without the library" "holds no libcxl_coll.so.0" \
    --a "$out" --b-rev HEAD
smoke_finish ab-coll-lib
