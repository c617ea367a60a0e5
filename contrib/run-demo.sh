#!/usr/bin/env bash
#
# run-demo.sh - the main job of ucx-cxl on any Linux box.
#
# Installs what is needed (contrib/setup-deps.sh), builds, then:
#   1. creates (or attaches) the per-user default emulated pool
#      /dev/shm/ucx-cxl-UID.pool (size: UCX_CXL_POOL_SIZE, default 1G),
#   2. starts four processes that attach it at the same time, each placing
#      a named extent in it, and shows the pool as they hold them,
#   3. kills one of them with SIGKILL and shows that `cxlpool check
#      --repair` reclaims exactly what it held.
# The default pool is left in place for later runs; remove it with
# `build-release/cxlpool destroy`.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in
    -h|--help) sed -n '3,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    "") ;;
    *) echo "run-demo.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

"$top/contrib/setup-deps.sh"
dir=$("$top/contrib/build.sh" release)
make -C "$dir" -j"$(nproc)" test/helpers/cxlpool_holder >/dev/null
cxlpool="$dir/cxlpool"
holder="$dir/test/helpers/cxlpool_holder"
pool="/dev/shm/ucx-cxl-$(id -u).pool"

echo
echo "== 1. the default emulated pool"
if [ -e "$pool" ]; then
    echo "\$ cxlpool info  (already exists: attaching, never reformatting)"
else
    echo "\$ cxlpool create --size ${UCX_CXL_POOL_SIZE:-1G}"
    "$cxlpool" create --size "${UCX_CXL_POOL_SIZE:-1G}"
fi
"$cxlpool" info

echo
echo "== 2. four processes attach the pool at once, each holding a named extent"
pids=()
tmp=$(mktemp -d)
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
for i in 0 1 2 3; do
    "$holder" "$pool" -H -n 2 -s 1M -N "demo-rank$i" >"$tmp/h$i" 2>&1 &
    pids+=($!)
done
for i in 0 1 2 3; do
    for _ in $(seq 100); do grep -q '^ready' "$tmp/h$i" && break; sleep 0.05; done
    grep -q '^ready' "$tmp/h$i" || { cat "$tmp/h$i"; exit 1; }
done
"$cxlpool" info

echo
echo "== 3. kill -9 one process; check finds its extents, --repair reclaims them"
kill -9 "${pids[0]}"
wait "${pids[0]}" 2>/dev/null || true
"$cxlpool" check || true
"$cxlpool" check --repair
kill "${pids[@]:1}" 2>/dev/null || true
wait 2>/dev/null || true
pids=()
"$cxlpool" check --repair >/dev/null
echo
echo "== the pool after everyone left"
"$cxlpool" info
