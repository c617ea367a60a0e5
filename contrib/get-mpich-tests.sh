#!/usr/bin/env bash
#
# get-mpich-tests.sh - MPICH's test suite (test/mpi) from Debian's own
# source package of mpich (bookworm: 4.0.2), for run-mpich-coll-tests.sh.
# Downloads the package's sources with apt-get (deb-src must be
# configured: contrib/setup-deps.sh does it), unpacks test/mpi of the
# upstream tarball alone, and prints the folder to pass as MPICHDIR.
# Nothing of MPICH is built or installed; a second run prints the cached
# folder at once.
#
#   contrib/get-mpich-tests.sh [--help]
#
# Environment:
#   UCX_CXL_CACHE=/var/cache/ucx-cxl   where it lives: mpich-VERSION/
#   MPICH_SRC_VERSION=4.0.2-3          the Debian version to fetch
set -euo pipefail

case "${1:-}" in
    -h|--help)
        awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
        exit 0 ;;
    "") ;;
    *) echo "get-mpich-tests: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

CACHE=${UCX_CXL_CACHE:-/var/cache/ucx-cxl}
VERSION=${MPICH_SRC_VERSION:-4.0.2-3}
UP=${VERSION%-*}
DIR=$CACHE/mpich-$UP
if [ -f "$DIR/test/mpi/coll/testlist.in" ]; then
    echo "$DIR"
    exit 0
fi

DL=$CACHE/mpich-dl
mkdir -p "$DL"
fetch() {
    (cd "$DL" && apt-get source --download-only "mpich=$VERSION") \
        >"$DL/apt.log" 2>&1
}
if ! fetch; then
    echo "get-mpich-tests: mpich=$VERSION not in the apt index; apt-get update" >&2
    apt-get update >>"$DL/apt.log" 2>&1 || true
    fetch || {
        echo "get-mpich-tests: apt-get source mpich=$VERSION failed (deb-src" \
             "configured? contrib/setup-deps.sh does it):" >&2
        tail -n 5 "$DL/apt.log" >&2
        exit 1
    }
fi
tarball=$(ls "$DL"/mpich_"$UP".orig.tar.* 2>/dev/null | head -n 1)
[ -n "$tarball" ] || {
    echo "get-mpich-tests: no mpich_$UP.orig.tar.* in $DL" >&2; exit 1; }

# unpack beside, then move in whole: a half-unpacked folder is never used
rm -rf "$DIR.part"
mkdir -p "$DIR.part"
tar -xf "$tarball" -C "$DIR.part" --strip-components=1 "mpich-$UP/test/mpi" || {
    echo "get-mpich-tests: $tarball has no mpich-$UP/test/mpi" >&2; exit 1; }
[ -f "$DIR.part/test/mpi/coll/testlist.in" ] || {
    echo "get-mpich-tests: $tarball: no test/mpi/coll/testlist.in" >&2; exit 1; }
rm -rf "$DIR"
mv "$DIR.part" "$DIR"
rm -f "$DL"/mpich_*
echo "$DIR"
