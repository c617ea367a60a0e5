#!/usr/bin/env bash
#
# build.sh VARIANT - configure and build ucx-cxl in build-VARIANT/.
#   VARIANT: release (default; -Wall -Wextra -Werror), sanitizers
#   (the same plus AddressSanitizer and UndefinedBehaviorSanitizer) or
#   fuzz (clang-14, coverage + ASan + UBSan; builds only the libFuzzer
#   harnesses of test/fuzz and what they link) or tsan (ThreadSanitizer;
#   builds only the threaded tests of make check-tsan and what they link).
# Runs autogen.sh when configure is missing or older than its inputs.
# Prints the build directory on stdout.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
variant=${1:-release}
target=all
case "$variant" in
    release)    extra=() ;;
    sanitizers) extra=(--enable-sanitizers) ;;
    fuzz)       extra=(--enable-fuzzing CC=clang-14 CXX=clang++-14); target=fuzz-programs ;;
    tsan)       extra=(--enable-tsan); target=tsan-programs ;;
    -h|--help)  awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
    *)          echo "build.sh: unknown variant '$variant' (release, sanitizers, fuzz or tsan)" >&2; exit 2 ;;
esac

cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt configure ]; then
    echo "build: autogen.sh" >&2
    ./autogen.sh >/dev/null 2>&1 || { ./autogen.sh; exit 1; }
fi

dir="$top/build-$variant"
mkdir -p "$dir"
cd "$dir"
if [ ! -f Makefile ] || [ "$top/configure" -nt config.status ]; then
    echo "build: configure ${extra[*]:-} in $dir" >&2
    "$top/configure" -q "${extra[@]}" >configure.out 2>&1 || { cat configure.out >&2; exit 1; }
fi
echo "build: make in $dir" >&2
make -j"$(nproc)" "$target" >make.out 2>&1 || { tail -40 make.out >&2; exit 1; }
echo "$dir"
