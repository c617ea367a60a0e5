#!/usr/bin/env bash
#
# run-demo.sh - the main job of ucx-cxl, on any Linux box.
#
# Installs what is needed (contrib/setup-deps.sh), builds, then:
#   1. creates (or attaches) the per-user default emulated pool
#      /dev/shm/ucx-cxl-UID.pool (size: UCX_CXL_POOL_SIZE, default 1G)
#      and shows it;
#   2. runs UCX's ucx_perftest between two processes over UCX_TLS=cxl and,
#      in the same run, the same tests over UCX_TLS=posix, and prints the
#      numbers side by side with the ratio cxl/posix;
#   3. runs the Open MPI test program (pml ucx + osc ucx, 4 ranks) with
#      UCX_TLS=cxl: point-to-point, collectives, one-sided on pool memory;
#   4. kills a process that holds pool memory with SIGKILL and shows that
#      `cxlpool check --repair` reclaims exactly what it held;
#   5. collectives through the pool (libcxl_coll): two processes without
#      MPI bootstrap a team over UCP and run the nine collectives (which
#      algorithm ran and where the data went: flagged lines, small slot,
#      slot; latency at 8 B / 256 B / 4 KiB / 256 KiB); then MPI with
#      coll/cxl next to coll/tuned over the same UCX_TLS=cxl and to
#      ob1+vader, three short alternating runs (perftest/run-coll-bench.sh
#      measures it properly) with the hand-written reference of the same
#      runs (perftest/ref_coll.c), the same for the non-blocking forms
#      (MPI_Iallreduce... + MPI_Wait against libnbc), and a program that
#      only starts non-blocking collectives (perftest/run-coll-first.sh:
#      the first call makes the team without waiting);
#   6. the dataset-chunk broker: `cxl-broker serve` on the default pool,
#      a dataset of files added and warmed (progress), four reader
#      processes reading it at once, two copying out of their own mapping
#      of the pool and two with ucp_get (every file byte read from disk
#      once), `stat` with the hit counts, then a kill -9 of the
#      broker and a restart that finds the chunks still resident; then a
#      hostile peer: a process of the pool rewrites a dataset's index
#      after its reader checked it, the reader reports the corrupt record
#      instead of following it, a new reader is refused by the index's
#      CRC, and everyone else reads on (doc/design/trust-model.md);
#   7. PyTorch on the broker (python/ucx_cxl, Debian's /usr/bin/python3):
#      a DataLoader with two workers over CXLDataset and EpochSampler, a
#      resume from mid-epoch, a zero-copy tensor;
#   8. Dask with protocol="cxl" (the comm backend over UCP) next to "tcp":
#      the same dask.array computation on both.
# The default pool is left in place; remove it with
# `build-release/cxlpool destroy`.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
    "") ;;
    *) echo "run-demo.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

"$top/contrib/setup-deps.sh"
dir=$("$top/contrib/build.sh" release)
make -C "$dir" -j"$(nproc)" test/helpers/cxlpool_holder test/broker/brk_reader test/coll/coll_ucp_test >/dev/null
cxlpool="$dir/cxlpool"
holder="$dir/test/helpers/cxlpool_holder"
module="$dir/.libs/libuct_cxl.so"
pool="/dev/shm/ucx-cxl-$(id -u).pool"
dev=$(basename "$pool" .pool)

echo
echo "== 1. the default emulated pool"
if [ -e "$pool" ]; then
    echo "\$ cxlpool info   (it exists: attached, never reformatted)"
else
    echo "\$ cxlpool create --size ${UCX_CXL_POOL_SIZE:-1G}"
    "$cxlpool" create --size "${UCX_CXL_POOL_SIZE:-1G}"
fi
"$cxlpool" info
echo
echo "\$ LD_PRELOAD=libuct_cxl.so ucx_info -d   (the cxl part)"
LD_PRELOAD=$module ucx_info -d | sed -n '/Memory domain: cxl/,/iface address/p' |
    grep -E 'Memory domain|Component|Transport|Device|allocate|put_zcopy|am_short|am_bcopy|atomic_fadd|device address'

# ---- 2. two processes, cxl next to posix ----
port=$((20000 + RANDOM % 20000))
# perf TL uct|ucp TEST [ARGS...]: prints "<typical latency us> <bandwidth MB/s>"
perf() {
    local tl=$1 layer=$2 test=$3; shift 3
    local env=(env LD_PRELOAD="$module" UCX_CXL_POOL="$pool" ${PERF_ENV:-})
    local args=(-t "$test" "$@")
    local out srv
    if [ "$layer" = uct ]; then
        if [ "$tl" = cxl ]; then args+=(-x cxl -d "$dev"); else args+=(-x "$tl" -d memory); fi
    else
        env+=(UCX_TLS="$tl")
    fi
    port=$((port + 1))
    "${env[@]}" timeout 60 ucx_perftest -p "$port" -c 0 "${args[@]}" >/dev/null 2>&1 &
    srv=$!
    sleep 0.5
    out=$("${env[@]}" timeout 60 ucx_perftest 127.0.0.1 -p "$port" -c 1 "${args[@]}" \
          2>/dev/null | awk '/^Final:/ {print $3, $7}')
    wait "$srv" || true
    echo "${out:-fail fail}"
}

# row LABEL COLUMN(1 latency, 2 bandwidth) UNIT LAYER TEST [ARGS...]
row() {
    local label=$1 col=$2 unit=$3 layer=$4; shift 4
    local c p
    c=$(perf cxl "$layer" "$@" | cut -d' ' -f"$col")
    p=$(perf posix "$layer" "$@" | cut -d' ' -f"$col")
    printf '%-36s %10s %-5s %10s %-5s %8s\n' "$label" "$c" "$unit" "$p" "$unit" \
        "$(awk -v a="$c" -v b="$p" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }')"
}

echo
echo "== 2. two processes: UCX over cxl next to posix (ucx_perftest, one run each)"
printf '%-36s %16s %16s %8s\n' "figure" "cxl" "posix" "cxl/posix"
row "UCT am_lat 8 B short (median)"      1 us    uct am_lat -D short -n 50000
row "UCT put_lat 8 B (median)"           1 us    uct put_lat -n 50000
row "UCT put_bw 1 MiB bcopy"             2 MB/s  uct put_bw -D bcopy -s 1048576 -n 2000
row "UCT fadd 64-bit (median)"           1 us    uct fadd -n 50000
row "UCP tag_lat 8 B (median)"           1 us    ucp tag_lat -n 20000
row "UCP tag_bw 64 KiB"                  2 MB/s  ucp tag_bw -s 65536 -n 2000
# malloc'd buffers: their rendezvous goes through the bulk rings
PERF_ENV=UCX_ALLOC_PRIO=thp,mmap,heap \
row "UCP tag_bw 1 MiB, malloc'd buffers" 2 MB/s  ucp tag_bw -s 1048576 -n 500
row "UCP ucp_put_bw 64 KiB"              2 MB/s  ucp ucp_put_bw -s 65536 -n 2000
echo "(the full side-by-side matrix with repetitions: perftest/run-bench.sh)"

echo
echo "== 3. Open MPI, 4 ranks, pml ucx + osc ucx, UCX_TLS=cxl only"
RUN_MPI_NEGATIVE=0 bash "$top/test/mpi/run-mpi.sh" "$dir" 2>&1 |
    grep -E '^(mpirun|run-mpi.sh: (lanes|mpirun took)|INFO: rank 0: window|FAIL|mpi: [0-9]+ passed)'

echo
echo "== 4. kill -9 a process holding pool memory; check finds it, --repair reclaims it"
tmp=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
for i in 0 1; do
    "$holder" "$pool" -H -n 2 -s 1M -N "demo-holder$i" >"$tmp/h$i" 2>&1 &
    pids+=($!)
done
for i in 0 1; do
    for _ in $(seq 100); do grep -q '^ready' "$tmp/h$i" && break; sleep 0.05; done
    grep -q '^ready' "$tmp/h$i" || { cat "$tmp/h$i"; exit 1; }
done
{ kill -9 "${pids[0]}"; wait "${pids[0]}"; } 2>/dev/null || true
"$cxlpool" check 2>&1 || true
"$cxlpool" check --repair
kill "${pids[1]}" 2>/dev/null || true
wait 2>/dev/null || true
pids=()
"$cxlpool" check --repair >/dev/null
echo
echo "== 5. collectives through the pool (libcxl_coll)"
echo "-- a program without MPI: 2 processes bootstrap over UCP (UCX_TLS=cxl), create a team, run the nine collectives"
CXL_BUILDDIR=$dir bash "$top/test/coll/run-coll-ucp.sh" --demo 2 2>&1 |
    grep -E '^(cxl-coll\[rank 0\]: (barrier|[a-z_]+ 65536 x|(bcast|allreduce) (64|1024) x)|# [0-9]+ ranks|# collective|  [a-z_]+ +[0-9]|coll-ucp-demo:)'
echo "-- MPI, 2 ranks: coll/cxl next to coll/tuned (pml ucx, UCX_TLS=cxl) and ob1+vader; 3 alternating repetitions, medians in us"
"$top/perftest/run-coll-bench.sh" --builddir "$dir" --reps 3 --sizes 8,4096,262144 --no-sw \
    --budget 0.05 --out "$tmp/coll" >"$tmp/coll.log" 2>&1 || { tail -20 "$tmp/coll.log"; exit 1; }
# with the hand-written reference of the same runs (perftest/ref_coll.c):
# what two threads with nothing but cache lines take, timed the same way
grep -E '^\||each on its own|^Hand-written reference' "$tmp/coll/summary.md"
echo "-- the same, non-blocking: MPI_Ibcast, MPI_Iallreduce... + MPI_Wait (coll/cxl's requests against libnbc)"
"$top/perftest/run-coll-bench.sh" --builddir "$dir" --reps 3 --sizes 8,4096,262144 --no-sw \
    --colls barrier,bcast,allreduce,allgather,alltoall --nonblocking \
    --budget 0.05 --out "$tmp/icoll" >"$tmp/icoll.log" 2>&1 || { tail -20 "$tmp/icoll.log"; exit 1; }
grep -E '^\|' "$tmp/icoll/summary.md"
echo "-- a program that only starts non-blocking collectives: its communicators' teams are made without waiting (first call), then MPI_Iallreduce of 8 B runs in the library; 3 alternating runs, medians [min-max] in us"
"$top/perftest/run-coll-first.sh" --builddir "$dir" --reps 3 --out "$tmp/first" \
    >"$tmp/first.log" 2>&1 || { tail -20 "$tmp/first.log"; exit 1; }
grep -E '^\|' "$tmp/first/results.md"
echo "(alternating repetitions, every size, sw mode: perftest/run-coll-bench.sh; --nonblocking, --overlap US; perftest/run-coll-first.sh)"

echo
echo "== 6. the dataset-chunk broker: one copy per pool, read by every process (readers 1-2 copy out of their mapping, 3-4 with ucp_get)"
broker="$dir/cxl-broker"
reader="$dir/test/broker/brk_reader"
bport=$((20000 + $$ % 20000))
export CXL_BROKER=127.0.0.1:$bport
"$reader" --gen "$tmp/ds" 400 65536 7
serve_broker() {
    LD_PRELOAD="$module" "$broker" serve --listen "$CXL_BROKER" --capacity 64m \
        >"$tmp/serve.out" 2>"$tmp/serve.log" &
    bpid=$!
    pids=("$bpid")
    for _ in $(seq 200); do grep -q '^cxl-broker: ready' "$tmp/serve.out" && break; sleep 0.05; done
    grep -q '^cxl-broker: ready' "$tmp/serve.out" || { cat "$tmp/serve.log"; exit 1; }
    sed 's/^/  broker log: /' "$tmp/serve.log"
}
serve_broker
echo "\$ cxl-broker add demo $tmp/ds"
LD_PRELOAD="$module" "$broker" add demo "$tmp/ds"
LD_PRELOAD="$module" "$broker" warm demo
rpids=()
for i in 1 2 3 4; do
    copy=map
    ((i > 2)) && copy=get
    CXL_BROKER_COPY=$copy LD_PRELOAD="$module" "$reader" --check --order random --seed "$i" --epochs 2 demo >"$tmp/r$i" 2>&1 &
    rpids+=($!)
done
for i in 1 2 3 4; do
    wait "${rpids[$((i - 1))]}" || { cat "$tmp/r$i"; exit 1; }
    echo "  reader $i ($( ((i > 2)) && echo ucp_get || echo 'own mapping')): $(grep '^brk_reader: samples' "$tmp/r$i")"
done
echo "\$ cxl-broker stat"
LD_PRELOAD="$module" "$broker" stat
echo "-- kill -9 the broker, start it again: the chunks are still resident"
kill -9 "$bpid"; wait "$bpid" 2>/dev/null || true
serve_broker
LD_PRELOAD="$module" "$broker" ls
LD_PRELOAD="$module" "$reader" --check demo | sed 's/^/  /'
LD_PRELOAD="$module" "$broker" stat | grep -E '^(cache|requests)'
echo "-- a hostile peer: it rewrites sample 5's chunk index in the pool after the reader checked the index"
LD_PRELOAD="$module" "$broker" add demo-x "$tmp/ds" >/dev/null
LD_PRELOAD="$module" "$reader" --local 1 --expect-error --scribble sample-chunk:5 demo-x | sed 's/^/  /'
echo "-- a new reader of that dataset is refused; readers of the others go on"
LD_PRELOAD="$module" "$reader" demo-x 2>&1 | grep -v '^brk_reader: samples' | sed 's/^/  /' || true
LD_PRELOAD="$module" "$reader" --check demo | sed 's/^/  /'

echo
echo "== 7. PyTorch: an unchanged DataLoader loop over the broker (python/ucx_cxl)"
PYTHONPATH="$top/python" CXL_LIBDIR="$dir/.libs" /usr/bin/python3 "$top/contrib/demo-torch.py" demo
kill "$bpid"; wait "$bpid" 2>/dev/null || true
pids=()
LD_PRELOAD="$module" "$broker" destroy >/dev/null

echo
echo "== 8. Dask: LocalCluster(protocol=\"cxl\"), the comm backend over UCP, next to tcp"
PYTHONPATH="$top/python" CXL_LIBDIR="$dir/.libs" /usr/bin/python3 "$top/contrib/demo-dask.py" 2>&1 |
    grep -vE 'UserWarning|warnings.warn|resource_tracker'

echo
echo "== the pool after everyone left"
"$cxlpool" info | grep -E '^(pool|used|free|attachments)'
