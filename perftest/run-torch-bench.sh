#!/usr/bin/env bash
#
# run-torch-bench.sh - a PyTorch training loop's data path on the broker:
# ucx_cxl.data.CXLDataset against the map-style datasets PyTorch users
# write, in one command (perftest/torch_bench.py measures, torch_report.py
# writes the report).
#
# It creates a pool (cxlpool create --size 1g, on a tmpfs: memory, as a
# CXL pool is, and not dropped with the page cache; 2 MiB pages, see
# --pool-dir), two datasets in a
# temporary folder on disk (small: 20000 samples of 4 KiB, large: 200 of
# 1 MiB; one file per sample, and the same samples as the rows of one .npy
# file), starts `cxl-broker serve` and registers the two file sets, then
# for every repetition and dataset runs the modes ALTERNATING (cxl-item,
# files, cxl, npy, cxl-batch, pread for the small set; cxl, files,
# cxl-nocopy, npy, pread for the large one), each in a fresh process:
#   cxl         CXLDataset in a DataLoader as users write it (batch_size,
#               default collate; torch 1.13 calls its __getitems__: one
#               read_batch per batch)
#   cxl-item    the same with __getitems__ disabled (__getitem__ per sample)
#   cxl-batch   the batch path: DataLoader(ds, batch_size=None,
#               sampler=BatchSampler(...)), batches stacked by the reads
#   cxl-nocopy  CXLDataset(copy=False): zero-copy views of the pool
#   files       a Dataset that reads the sample's file (np.fromfile)
#   pread       a Dataset that preads the sample's record from one file
#   npy         np.load(mmap_mode='r'), the sample's row copied out
# For every num_workers (0, 1, 2, 4; one DataLoader, persistent workers):
# a cold epoch (the broker's copy evicted with `cxl-broker evict`, the page
# cache dropped: echo 3 > /proc/sys/vm/drop_caches, as root; at 0 and 4
# workers, an uncounted first epoch at the others) and --warm warm epochs; the loop touches every byte (an int64 sum of each batch).
# PSS is summed over the main process and its workers (smaps_rollup,
# sampled every 50 ms during the epoch).  Also: the memcpy limit (1 MiB
# numpy copies out of a buffer bigger than the LLC, one thread) and a
# cProfile of one warm 4 KiB epoch per CXL mode (perf of the C side where
# perf works).
#
# Output folder (default perftest/out/torch-<date>-<time>/):
#   report.md    machine (cores, LLC, load at start and end), targets of
#                issue 14 met/missed with ratios, tables per dataset
#                (median [min-max] of the repetitions), profile notes;
#                also printed at the end
#   results.csv  set,mode,workers,kind,figure,unit,rep1..repN,median,min,
#                max,n
#   samples.csv  every epoch of every run (torch_bench.py's columns)
#   limits.csv   memcpy and touch limits
#   raw/         every run's output, profiles, commands.log, broker.log
#
# Usage: perftest/run-torch-bench.sh [--reps N] [--quick] [--smoke]
#          [--out DIR] [--builddir DIR] [--small N:SIZE] [--large N:SIZE]
#          [--workers LIST] [--warm N] [--cold-workers LIST] [--batch N]
#          [--cuda] [--cuda-only]
#          [--no-perf] [--keep-data] [--help]
#   --reps N        repetitions (default 5; --quick 1)
#   --quick         1 repetition
#   --smoke         tiny datasets (256 x 4 KiB, 8 x 1 MiB), 1 repetition,
#                   workers 0,2, 1 warm epoch, every sample checked (CRC32
#                   against its file, each exactly once per epoch), no
#                   profile: what make check runs (test_torch_bench.sh)
#   --small N:SIZE  the small set (default 20000:4K)
#   --large N:SIZE  the large set (default 200:1M)
#   --workers LIST  num_workers values (default 0,1,2,4)
#   --warm N        warm epochs per worker count (default 2)
#   --cold-workers LIST  num_workers values with a cold epoch (default
#                   0,4; "all"); the others start with an uncounted epoch
#   --batch N       batch size of the small set (default 64; the large set
#                   is read sample by sample)
#   --cuda          also the GPU section (torch_bench.py cuda: samples to
#                   device memory through a StagingRing against the
#                   baseline pin_memory=True + .cuda()) where
#                   ucx_cxl.data.cuda_status() finds a GPU; OUT/cuda.csv
#   --cuda-only     the GPU section alone (test/gpu/run-gpu-tests.sh)
#   --no-perf       no perf record of the profiled epoch
#   --keep-data     keep the temporary datasets (their folder is printed)
#   --out DIR       output folder
#   --pool-dir D    where the 1 GiB pool lives: huge (default) a private
#                   tmpfs mounted huge=within_size for the run, so the pool
#                   is mapped with 2 MiB pages as a devdax CXL device is
#                   (falls back to /dev/shm, said in the report, where
#                   mounting is refused); shm: /dev/shm (4 KiB pages
#                   unless it is mounted with huge=); or a folder.  The
#                   report gives the pages `cxlpool info` reported
#   --builddir DIR  build folder (default: build build-release/ with
#                   contrib/build.sh)
#   -h, --help      this text
# Nothing here asserts timings; it measures and reports.  On a shared
# machine the numbers are noisy: the report gives the load average.
set -uo pipefail

PROG=run-torch-bench
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$SCRIPT_DIR/.." && pwd)

REPS="" QUICK=0 SMOKE=0 OUT="" BUILDDIR="" SMALL="" LARGE="" WORKERS=""
WARM="" BATCH=64 CUDA=0 CPU=1 PERF=1 KEEP=0 COLDW="" POOL_DIR=huge

. "$SCRIPT_DIR/bench-common.sh"

while (($#)); do
    case $1 in
        --reps) need "$1" $#; REPS=$2; shift ;;
        --quick) QUICK=1 ;;
        --smoke) SMOKE=1 ;;
        --out) need "$1" $#; OUT=$2; shift ;;
        --pool-dir) need "$1" $#; POOL_DIR=$2; shift ;;
        --builddir) need "$1" $#; BUILDDIR=$2; shift ;;
        --small) need "$1" $#; SMALL=$2; shift ;;
        --large) need "$1" $#; LARGE=$2; shift ;;
        --workers) need "$1" $#; WORKERS=$2; shift ;;
        --warm) need "$1" $#; WARM=$2; shift ;;
        --cold-workers) need "$1" $#; COLDW=$2; shift ;;
        --batch) need "$1" $#; BATCH=$2; shift ;;
        --cuda) CUDA=1 ;;
        --cuda-only) CUDA=1; CPU=0 ;;
        --no-perf) PERF=0 ;;
        --keep-data) KEEP=1 ;;
        -h | --help) usage; exit 0 ;;
        *) printf '%s: unknown option %q (see --help)\n' "$PROG" "$1" >&2; exit 2 ;;
    esac
    shift
done
if ((SMOKE)); then
    : "${REPS:=1}" "${SMALL:=256:4K}" "${LARGE:=8:1M}" "${WORKERS:=0,2}" "${WARM:=1}" "${COLDW:=all}"
elif ((QUICK)); then
    : "${REPS:=1}"
fi
: "${REPS:=5}" "${SMALL:=20000:4K}" "${LARGE:=200:1M}" "${WORKERS:=0,1,2,4}" "${WARM:=2}" "${COLDW:=0,4}"
[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "--reps must be a positive integer"
[[ $WARM =~ ^[1-9][0-9]*$ ]] || die "--warm must be a positive integer"
[[ $BATCH =~ ^[1-9][0-9]*$ ]] || die "--batch must be a positive integer"
[[ $WORKERS =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--workers takes a list like 0,1,2,4"
for s in "$SMALL" "$LARGE"; do
    [[ $s =~ ^[1-9][0-9]*:[1-9][0-9]*[KkMm]?$ ]] || die "dataset '$s': N:SIZE, e.g. 20000:4K"
done

# ---------------------------------------------------------------------------
# Build and tools
# ---------------------------------------------------------------------------
PY=/usr/bin/python3
[[ -x $PY ]] || die "$PY not found (Debian's python3 with python3-torch and python3-numpy)"
"$PY" -c 'import torch, numpy' 2>/dev/null ||
    die "$PY cannot import torch and numpy (contrib/setup-deps.sh installs python3-torch, python3-numpy)"
if [[ -z $BUILDDIR ]]; then
    BUILDDIR=$("$REPO_DIR/contrib/build.sh" release) || die "contrib/build.sh release failed"
fi
BUILDDIR=$(cd "$BUILDDIR" 2>/dev/null && pwd) || die "build folder '$BUILDDIR' does not exist"
CXLPOOL="$BUILDDIR/cxlpool"
CLI="$BUILDDIR/cxl-broker"
MODULE="$BUILDDIR/.libs/libuct_cxl.so"
for f in "$CXLPOOL" "$CLI"; do
    [[ -x $f ]] || die "$f not found; build the project first (or pass --builddir)"
done
[[ -f $MODULE && -f $BUILDDIR/.libs/libcxl_broker.so ]] ||
    die "$BUILDDIR/.libs has no libuct_cxl.so / libcxl_broker.so; build the project first"
BENCH="$SCRIPT_DIR/torch_bench.py"
NCPU=$(nproc 2>/dev/null || echo 1)

[[ -n $OUT ]] || OUT="$SCRIPT_DIR/out/torch-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT/raw" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)
RAW="$OUT/raw"
SAMPLES="$OUT/samples.csv"
: >"$SAMPLES"
CMDLOG="$RAW/commands.log"
: >"$CMDLOG"
RUNLOG="$OUT/run.log"
: >"$RUNLOG"
T_START=$SECONDS

# a clean environment: every process gets what it needs
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(UCX_|CXL_BROKER)' || true)
unset LD_PRELOAD

# ---------------------------------------------------------------------------
# Pool, datasets, broker
# ---------------------------------------------------------------------------
TAG="ucx-cxl-torchbench-$$-$RANDOM"
POOL="" POOL_MNT="" POOL_NOTE=""
DATA=$(mktemp -d "${TMPDIR:-/var/tmp}/$TAG.XXXXXX") || die "cannot create a data folder"
BROKER_PID="" RUN_PID=""
cleanup() {
    if [[ -n $RUN_PID ]]; then kill -TERM "$RUN_PID" 2>/dev/null; wait "$RUN_PID" 2>/dev/null; fi
    if [[ -n $BROKER_PID ]]; then
        kill -TERM "$BROKER_PID" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$BROKER_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$BROKER_PID" 2>/dev/null
        wait "$BROKER_PID" 2>/dev/null
        BROKER_PID=""
    fi
    if [[ -n $POOL && -e $POOL ]]; then
        "$CXLPOOL" destroy "$POOL" >>"$RAW/pool.log" 2>&1 ||
            "$CXLPOOL" destroy "$POOL" --force >>"$RAW/pool.log" 2>&1 || rm -f -- "$POOL"
    fi
    bench_pool_unmount
    if ((KEEP)); then
        msg "datasets kept in $DATA"
    else
        rm -rf -- "$DATA"
    fi
}
trap cleanup EXIT
trap 'msg "interrupted"; exit 130' INT TERM
bench_pool_dir "$POOL_DIR" 1100 "$RAW/pool-mount.log"
POOL="$POOL_DIR/$TAG.pool"

export PYTHONPATH="$REPO_DIR/python${PYTHONPATH:+:$PYTHONPATH}"
export CXL_LIBDIR="$BUILDDIR/.libs"
# UCX warns (on stdout) about every UCX_* variable it does not know, and
# the package's CXL_LIBDIR is one
export UCX_WARN_UNUSED_ENV_VARS=n
export UCX_CXL_POOL="$POOL"
cli() { LD_PRELOAD="$MODULE" "$CLI" "$@"; }

msg "datasets: small $SMALL, large $LARGE in $DATA"
"$PY" "$BENCH" gen "$DATA" --small "$SMALL" --large "$LARGE" >"$RAW/gen.log" 2>&1 ||
    die "torch_bench.py gen failed: $(tail -n1 "$RAW/gen.log")"
"$CXLPOOL" create "$POOL" --size 1g >"$RAW/pool.log" 2>&1 ||
    die "cxlpool create $POOL failed: $(tail -n1 "$RAW/pool.log")"
POOL_PAGES=$(bench_pool_pages "$CXLPOOL" "$POOL" "$RAW/pool-info.json" 2>>"$RAW/pool.log") ||
    die "cxlpool info $POOL failed: $(tail -n1 "$RAW/pool.log")"
PORT=""
for _ in 1 2 3 4 5; do
    p=$((20000 + RANDOM % 20000))
    LD_PRELOAD="$MODULE" "$CLI" serve --pool "$POOL" --listen "127.0.0.1:$p" --capacity 768m \
        >"$RAW/broker.log" 2>&1 &
    BROKER_PID=$!
    for _ in $(seq 100); do
        grep -q '^cxl-broker: ready' "$RAW/broker.log" 2>/dev/null && break
        kill -0 "$BROKER_PID" 2>/dev/null || break
        sleep 0.1
    done
    if grep -q '^cxl-broker: ready' "$RAW/broker.log"; then PORT=$p; break; fi
    kill "$BROKER_PID" 2>/dev/null
    wait "$BROKER_PID" 2>/dev/null
    BROKER_PID=""
done
[[ -n $PORT ]] || die "cxl-broker serve did not start: $(tail -n1 "$RAW/broker.log")"
export CXL_BROKER="127.0.0.1:$PORT"
msg "broker on $CXL_BROKER (pool $POOL, capacity 768 MiB)"
for set in small large; do
    cli add "tb-$set" "$DATA/$set" >>"$RAW/add.log" 2>&1 ||
        die "cxl-broker add tb-$set failed: $(tail -n1 "$RAW/add.log")"
done
cli ls >>"$RAW/add.log" 2>&1

# ---------------------------------------------------------------------------
# Machine record
# ---------------------------------------------------------------------------
LLC=$(cat /sys/devices/system/cpu/cpu0/cache/index3/size 2>/dev/null ||
      cat /sys/devices/system/cpu/cpu0/cache/index2/size 2>/dev/null)
CAN_DROP=0
[[ -w /proc/sys/vm/drop_caches ]] && CAN_DROP=1
{
    printf 'date=%s\n' "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    printf 'host=%s\n' "$(hostname)"
    printf 'cpu=%s\n' "$(awk -F': *' '/^model name/{print $2; exit}' /proc/cpuinfo)"
    printf 'ncpu=%s\n' "$NCPU"
    printf 'llc=%s\n' "$LLC"
    printf 'mem=%s\n' "$(awk '/^MemTotal/{printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
    printf 'kernel=%s\n' "$(uname -srm)"
    printf 'python=%s\n' "$("$PY" -c 'import sys; print(sys.version.split()[0])')"
    printf 'torch=%s\n' "$("$PY" -c 'import torch; print(torch.__version__)')"
    printf 'numpy=%s\n' "$("$PY" -c 'import numpy; print(numpy.__version__)')"
    printf 'commit=%s\n' "$(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null)$(git -C "$REPO_DIR" diff --quiet HEAD -- python perftest 2>/dev/null || echo '+changes')"
    printf 'reps=%s\n' "$REPS"
    printf 'workers=%s\n' "$WORKERS"
    printf 'warm=%s\n' "$WARM"
    printf 'cold_workers=%s\n' "$COLDW"
    printf 'batch=%s\n' "$BATCH"
    printf 'small=%s\n' "$SMALL"
    printf 'large=%s\n' "$LARGE"
    printf 'mode=%s\n' "$( ((SMOKE)) && echo smoke || { ((QUICK)) && echo quick || echo default; })"
    printf 'data=%s\n' "$DATA"
    printf 'data_fs=%s\n' "$(df -PT "$DATA" | awk 'NR == 2 {print $2 " on " $1}')"
    printf 'pool=%s\n' "$POOL"
    printf 'pool_page_size=%s\n' "${POOL_PAGES%%|*}"
    printf 'pool_page_source=%s\n' "${POOL_PAGES#*|}"
    printf 'pool_note=%s\n' "$POOL_NOTE"
    printf 'broker=%s\n' "$CXL_BROKER"
    printf 'drop_caches=%s\n' "$CAN_DROP"
    printf 'cuda=%s\n' "$("$PY" -c 'from ucx_cxl.data import cuda_status; ok, why = cuda_status(); print("a GPU is usable" if ok else why)' 2>&1 | tail -n1)"
    printf 'load_start=%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/meta.env"
((CAN_DROP)) || msg "note: /proc/sys/vm/drop_caches is not writable (not root): cold epochs read files from the page cache"

# ---------------------------------------------------------------------------
# Limits and profile
# ---------------------------------------------------------------------------
msg "memcpy limit"
if ((SMOKE)); then MC=(--buf 64M --passes 2); else MC=(--passes 5); fi
"$PY" "$BENCH" memcpy "${MC[@]}" --csv "$OUT/limits.csv" >"$RAW/limits.log" 2>&1 ||
    msg "  memcpy failed: $(tail -n1 "$RAW/limits.log")"
cat "$RAW/limits.log" >&2

if ! ((SMOKE)) && ((CPU)); then
    for mode in cxl-item cxl cxl-batch files npy; do
        msg "profile: one warm small epoch, $mode, num_workers 0"
        printf '[%s] %s\n' "$(date +%T)" "$PY $BENCH profile --set small --mode $mode" >>"$CMDLOG"
        timeout -k 5 300 "$PY" "$BENCH" profile --set small --mode "$mode" --data "$DATA" \
            --name tb-small --batch "$BATCH" --out "$RAW/profile-small-$mode.txt" \
            >>"$RAW/profile.log" 2>&1 || msg "  profile $mode failed: $(tail -n1 "$RAW/profile.log")"
    done
    if ((PERF)) && command -v perf >/dev/null 2>&1; then
        msg "perf: the C side of 10 warm small epochs, cxl-item, cxl and cxl-batch (num_workers 0)"
        for mode in cxl-item cxl cxl-batch; do
            rm -f "$RAW/perf.ctl" "$RAW/perf.ack"
            mkfifo "$RAW/perf.ctl" "$RAW/perf.ack" || break
            # events enabled only around the measured epochs (not the imports)
            timeout -k 5 300 perf record -F 4000 -D -1 --control "fifo:$RAW/perf.ctl,$RAW/perf.ack" \
                -o "$RAW/perf-$mode.data" -- \
                "$PY" "$BENCH" profile --set small --mode "$mode" --data "$DATA" --name tb-small \
                --batch "$BATCH" --out "$RAW/profile-perf-$mode.txt" --perf-ctl "$RAW/perf.ctl" \
                --perf-ack "$RAW/perf.ack" >>"$RAW/perf.log" 2>&1 &&
                perf report -i "$RAW/perf-$mode.data" --stdio --no-children --sort dso \
                    >"$RAW/perf-$mode-dso.txt" 2>>"$RAW/perf.log" &&
                perf report -i "$RAW/perf-$mode.data" --stdio --no-children --sort dso,sym \
                    2>>"$RAW/perf.log" | grep -v '^#' | grep -v '^$' | head -n 60 >"$RAW/perf-$mode-sym.txt" ||
                msg "  perf $mode failed (see raw/perf.log)"
            rm -f "$RAW/perf-$mode.data" "$RAW/perf.ctl" "$RAW/perf.ack" "$RAW/profile-perf-$mode.txt"*
        done
    fi
fi

# ---------------------------------------------------------------------------
# Repetitions: modes alternating, every one in a fresh process
# ---------------------------------------------------------------------------
modes_of() {
    "$PY" -c "import sys; sys.path.insert(0, '$SCRIPT_DIR'); import torch_bench as t; print(' '.join(t.MODES['$1']))"
}
declare -A MODES=()
for set in small large; do MODES[$set]=$(modes_of "$set") || die "torch_bench.py: no modes"; done
FAILS=0
CHECK=()
((SMOKE)) && CHECK=(--check)
for ((rep = 1; rep <= REPS; ++rep)); do
    for set in small large; do
        ((CPU)) || continue
        for mode in ${MODES[$set]}; do
            log="$RAW/epoch-$set-$mode-rep$rep.log"
            cmd=("$PY" "$BENCH" epoch --set "$set" --mode "$mode" --data "$DATA" --name "tb-$set"
                 --workers "$WORKERS" --cold-workers "$COLDW" --warm "$WARM" --batch "$BATCH" --rep "$rep"
                 --csv "$SAMPLES" --cli "$CLI" "${CHECK[@]}")
            printf '[%s] %s\n' "$(date +%T)" "${cmd[*]}" >>"$CMDLOG"
            t0=$SECONDS
            LD_PRELOAD="" timeout -k 10 900 "${cmd[@]}" >"$log" 2>&1 &
            RUN_PID=$!
            wait "$RUN_PID"
            rc=$?
            RUN_PID=""
            if ((rc != 0)); then
                FAILS=$((FAILS + 1))
                printf '%s|%s|%s|rc=%s: %s\n' "$set" "$mode" "$rep" "$rc" \
                    "$(grep -m1 -E 'Error|FAIL|error' "$log" | cut -c1-240)" >>"$OUT/failures.txt"
                msg "  rep $rep/$REPS $set $mode: FAILED rc=$rc (see $log)"
            else
                msg "  rep $rep/$REPS $set $mode: $((SECONDS - t0)) s (load $(cut -d' ' -f1 /proc/loadavg))"
            fi
        done
    done
    if ((CUDA)); then
        for set in small large; do
            LD_PRELOAD="" timeout -k 10 600 "$PY" "$BENCH" cuda --set "$set" --data "$DATA" \
                --name "tb-$set" --rep "$rep" --batch "$BATCH" --csv "$OUT/cuda.csv" \
                "${CHECK[@]}" >"$RAW/cuda-$set-rep$rep.log" 2>&1
            rc=$?
            if ((rc == 77)); then
                msg "cuda: $(grep -m1 SKIP "$RAW/cuda-$set-rep$rep.log")"
                CUDA=0
                break
            elif ((rc != 0)); then
                FAILS=$((FAILS + 1))
                printf '%s|cuda|%s|rc=%s: %s\n' "$set" "$rep" "$rc" \
                    "$(grep -m1 -E 'Error|FAIL' "$RAW/cuda-$set-rep$rep.log" | cut -c1-240)" >>"$OUT/failures.txt"
                msg "  rep $rep/$REPS cuda $set: FAILED rc=$rc (see $RAW/cuda-$set-rep$rep.log)"
            else
                msg "  rep $rep/$REPS cuda $set: $(grep -c '^torch_bench: cuda' "$RAW/cuda-$set-rep$rep.log") figures"
            fi
        done
    fi
done
cli stat --json >"$RAW/broker-stat.json" 2>>"$RAW/broker.log"
printf 'load_end=%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.env"
printf 'duration_s=%s\n' "$((SECONDS - T_START))" >>"$OUT/meta.env"
printf 'failures=%s\n' "$FAILS" >>"$OUT/meta.env"

# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------
trap - EXIT
cleanup
msg "broker stopped, pool destroyed; writing the report"
"$PY" "$SCRIPT_DIR/torch_report.py" "$OUT" || die "torch_report.py failed"
msg "done in $((SECONDS - T_START))s: $OUT/report.md, $OUT/results.csv"
cat "$OUT/report.md"
((FAILS == 0))
