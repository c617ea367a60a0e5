#!/usr/bin/env bash
#
# run-broker-bench.sh - the dataset-chunk broker (issue 13) against what
# data loaders do today, in one command: reader processes (1, 2, 4) read
# random samples (4 KiB, 64 KiB, 1 MiB) of one raw file of fixed-size
# records per size, with perftest/broker_bench.c, in five modes run
# ALTERNATING (broker, broker-get, view, pread, mmap, memcpy, broker, ...)
# --reps times:
#   broker  cxl_broker_read_batch() through the broker (--batch samples per
#           call): pins by message or bitmap, then, as a reader that maps
#           the pool does by default, a memcpy out of its own mapping
#   broker-get  the same with CXL_BROKER_COPY=get: every sample a ucp_get
#           out of the pool into the reader's buffer (what readers in
#           other pods do, over tcp)
#   view    cxl_broker_view() (zero-copy view of the resident sample in
#           this process's mapping of the pool) and a memcpy out of it
#   pread   pread() of sample i at i * SIZE from the file in the page cache
#   mmap    memcpy of sample i out of an mmap of the file (MAP_POPULATE)
#   memcpy  the limit: memcpy of SIZE blocks at random offsets out of a
#           1 GiB buffer (larger than the LLC), same processes and timing;
#           at 1 MiB also "memcpy-ds" out of a buffer of the dataset's size
# Every run: setup and --warmup seconds untimed, then --seconds timed; the
# PSS of every reader (and, broker mode, of the broker) is read from
# /proc/PID/smaps_rollup half-way through, with the file's bytes in the
# page cache (mincore) and the pool file's allocated bytes.
#
# Before measuring, a correctness pass reads every sample once in every
# mode with --check (each sample compared with its bytes in the file) and
# compares the order-independent digests of the three modes.
#
# Cold epoch (after the warm repetitions): per size, alternating, with the
# page cache dropped before each (echo 3 > /proc/sys/vm/drop_caches when
# permitted, else posix_fadvise(DONTNEED) of the dataset files: see
# --drop) and the broker's chunks evicted: raw file read bandwidth (dd,
# bs=4M, and broker_bench's sequential 4 MiB preads timed like an epoch),
# `cxl-broker warm` (the broker's sequential fill), the first epoch
# through the broker (every sample once, a random permutation, split among
# --cold-readers readers) and the same epoch with pread.  The broker's
# counters (stat --json) before and after each broker epoch show how many
# bytes it read from the files.  Per repetition also the fill's CPU
# ceiling: CRC32C of 4 MiB chunks as the broker computes it
# (cxlpool_crc32c) and with the SSE4.2 instruction.
#
# Once (unless --no-profile or without perf): perf record -g of one broker
# reader at 4 KiB, and of the broker daemon during a cold `cxl-broker warm`
# of the largest dataset; raw/profile-*.txt and a summary in the report.
#
# Output folder (default perftest/out/broker-<date>-<time>/):
#   report.md    machine, load, datasets, correctness pass, TARGETS
#                (met/missed with the ratio), tables per size, memory
#                (PSS) per mode and readers, cold epoch, profile; also
#                printed at the end
#   results.csv  figure,record,readers,mode,unit,rep1..repN,median,min,max,
#                ok_reps,note
#   runs.csv     every warm run: label,record,readers,rep,rc,cpu_busy_pct
#                (the second before it),load1
#   samples.csv  every total row of broker_bench with its rep (header
#                inside; columns as in broker_bench.c) ; readers.csv: every
#                per-reader row
#   cold.csv     rep,record,readers,kind,seconds,bytes,gb_per_s,
#                cache_before_kib,fill_bytes,file_bytes_read,ok
#   check.csv    the correctness pass
#   plots/*.png  samples/s against readers per size, PSS against readers
#   raw/, logs/  every run's output, commands, broker log, stat, profile
#
# Method: nothing asserts timings; medians of the repetitions with their
# min-max.  The machine's cores are counted: more readers than cores is
# marked "oversubscribed" (4 readers on a 2-core machine are).
#
# Usage: perftest/run-broker-bench.sh [--reps N] [--quick] [--smoke]
#          [--out DIR] [--builddir DIR] [--sizes LIST] [--readers LIST]
#          [--cold-readers LIST] [--batch K] [--seconds S] [--warmup S]
#          [--mib LIST] [--drop global|file] [--pool-dir huge|shm|DIR]
#          [--no-cold] [--no-profile]
#          [--timeout S] [--wait-idle PCT] [--wait-max S] [--help]
#   --reps N       repetitions (default 5; --quick 1; --smoke 1)
#   --quick        1 repetition, 0.5 s runs
#   --smoke        tiny datasets (4-8 MiB), readers 1,2, 1 repetition,
#                  0.2 s runs, every read checked (--check in every run),
#                  a 64 MiB memcpy source, cold epoch with --drop file;
#                  what make check runs
#                  (test/perftest/test_broker_bench.sh); timings mean nothing
#   --out DIR      output folder
#   --builddir DIR build folder (default: contrib/build.sh release)
#   --sizes LIST   record sizes (default 4k,64k,1m)
#   --readers LIST reader processes (default 1,2,4)
#   --cold-readers LIST  readers of the cold epoch (default 1,4)
#   --batch K      samples per cxl_broker_read_batch (default 16)
#   --seconds S    timed seconds per run (default 1; quick 0.5)
#   --warmup S     untimed seconds per run (default 0.3)
#   --mib LIST     dataset MiB per size (default 64,96,128: 288 MiB in all,
#                  in a 1 GiB pool with a 400 MiB cache)
#   --drop M       global: drop_caches (default when /proc/sys/vm/drop_caches
#                  is writable); file: posix_fadvise DONTNEED of our files
#   --pool-dir D   where the 1 GiB pool lives: huge (default) a private
#                  tmpfs mounted huge=within_size for the run, so the pool
#                  is mapped with 2 MiB pages as a DAX device is (falls
#                  back to shm, said in the report, where mounting is
#                  refused); shm: /dev/shm (4 KiB pages unless it is
#                  mounted with huge=); or a directory.  `cxlpool info`
#                  says which pages the pool got; the report shows it
#   --no-cold      no cold epoch; --no-profile: no perf record
#   --timeout S    limit of one broker_bench run (default 120)
#   --wait-idle P  before every warm run wait until the CPUs were at most
#                  P % busy over one second (other work on a shared
#                  machine), at most --wait-max seconds (default 300) per
#                  run; 0 (default): do not wait.  The busy share before
#                  every run is in runs.csv and the report either way
#   -h, --help     this text
set -uo pipefail

PROG=run-broker-bench
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$SCRIPT_DIR/.." && pwd)

REPS="" QUICK=0 SMOKE=0 OUT="" BUILDDIR="" SIZES="4k,64k,1m" READERS=""
COLD_READERS="" BATCH=16 SECS="" WARMUP="" MIBS="" DROP="" COLD=1 PROFILE=1
RUN_TO=120 MEMSRC=1g WAIT_IDLE=0 WAIT_MAX=300 POOL_DIR=huge

. "$SCRIPT_DIR/bench-common.sh"

while (($#)); do
    case $1 in
        --reps) need "$1" $#; REPS=$2; shift ;;
        --quick) QUICK=1 ;;
        --smoke) SMOKE=1 ;;
        --out) need "$1" $#; OUT=$2; shift ;;
        --builddir) need "$1" $#; BUILDDIR=$2; shift ;;
        --sizes) need "$1" $#; SIZES=$2; shift ;;
        --readers) need "$1" $#; READERS=$2; shift ;;
        --cold-readers) need "$1" $#; COLD_READERS=$2; shift ;;
        --batch) need "$1" $#; BATCH=$2; shift ;;
        --seconds) need "$1" $#; SECS=$2; shift ;;
        --warmup) need "$1" $#; WARMUP=$2; shift ;;
        --mib) need "$1" $#; MIBS=$2; shift ;;
        --drop) need "$1" $#; DROP=$2; shift ;;
        --pool-dir) need "$1" $#; POOL_DIR=$2; shift ;;
        --no-cold) COLD=0 ;;
        --no-profile) PROFILE=0 ;;
        --timeout) need "$1" $#; RUN_TO=$2; shift ;;
        --wait-idle) need "$1" $#; WAIT_IDLE=$2; shift ;;
        --wait-max) need "$1" $#; WAIT_MAX=$2; shift ;;
        -h | --help) usage; exit 0 ;;
        *) printf '%s: unknown option %q (see --help)\n' "$PROG" "$1" >&2; exit 2 ;;
    esac
    shift
done

if ((SMOKE)); then
    : "${REPS:=1}" "${READERS:=1,2}" "${COLD_READERS:=2}" "${SECS:=0.2}" \
      "${WARMUP:=0.05}" "${MIBS:=4,4,8}" "${DROP:=file}"
    MEMSRC=64m
    PROFILE=0
elif ((QUICK)); then
    : "${REPS:=1}" "${SECS:=0.5}"
fi
: "${REPS:=5}" "${READERS:=1,2,4}" "${COLD_READERS:=1,4}" "${SECS:=1}" \
  "${WARMUP:=0.3}" "${MIBS:=64,96,128}"
if [[ -z $DROP ]]; then
    if [[ -w /proc/sys/vm/drop_caches ]] && (echo 1 >/proc/sys/vm/drop_caches) 2>/dev/null; then
        DROP=global
    else
        DROP=file
    fi
fi
[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "--reps must be a positive integer"
[[ $BATCH =~ ^[1-9][0-9]*$ ]] || die "--batch must be a positive integer"
[[ $RUN_TO =~ ^[1-9][0-9]*$ ]] || die "--timeout must be a positive integer"
[[ $DROP == global || $DROP == file ]] || die "--drop takes global or file"
[[ $WAIT_IDLE =~ ^[0-9]+$ && $WAIT_IDLE -le 100 ]] || die "--wait-idle takes a percentage 0..100"
[[ $WAIT_MAX =~ ^[0-9]+$ ]] || die "--wait-max takes seconds"
IFS=, read -r -a SIZE_LIST <<<"$SIZES"
IFS=, read -r -a READER_LIST <<<"$READERS"
IFS=, read -r -a COLD_LIST <<<"$COLD_READERS"
IFS=, read -r -a MIB_LIST <<<"$MIBS"
((${#MIB_LIST[@]} == ${#SIZE_LIST[@]})) || die "--mib needs one value per size (${#SIZE_LIST[@]})"
to_bytes() {   # 4k -> 4096
    local v=${1,,} m=1
    case $v in
        *k) m=1024; v=${v%k} ;;
        *m) m=1048576; v=${v%m} ;;
        *g) m=1073741824; v=${v%g} ;;
    esac
    [[ $v =~ ^[0-9]+$ ]] || return 1
    echo $((v * m))
}
REC=()
for s in "${SIZE_LIST[@]}"; do
    b=$(to_bytes "$s") || die "bad size '$s'"
    REC+=("$b")
done
for n in "${READER_LIST[@]}" "${COLD_LIST[@]}"; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || die "bad reader count '$n'"
done

# ---------------------------------------------------------------------------
# Build and tools
# ---------------------------------------------------------------------------
if [[ -z $BUILDDIR ]]; then
    BUILDDIR=$("$REPO_DIR/contrib/build.sh" release) || die "contrib/build.sh release failed"
fi
BUILDDIR=$(cd "$BUILDDIR" 2>/dev/null && pwd) || die "build folder '$BUILDDIR' does not exist"
MODULE="$BUILDDIR/.libs/libuct_cxl.so"
CXLPOOL="$BUILDDIR/cxlpool"
BROKER="$BUILDDIR/cxl-broker"
BB="$BUILDDIR/perftest/broker_bench"
[[ -f $MODULE ]] || die "$MODULE not found; build the project first (or pass --builddir)"
[[ -x $CXLPOOL && -x $BROKER ]] || die "cxlpool or cxl-broker missing in $BUILDDIR; build the project first"
PY=/usr/bin/python3
for t in timeout dd "$PY"; do
    command -v "$t" >/dev/null 2>&1 || die "'$t' not found (contrib/setup-deps.sh installs what the project needs)"
done
HAVE_GNUPLOT=0
command -v gnuplot >/dev/null 2>&1 && HAVE_GNUPLOT=1
HAVE_PERF=0
((PROFILE)) && command -v perf >/dev/null 2>&1 && HAVE_PERF=1
NCPU=$(nproc 2>/dev/null || echo 1)

[[ -n $OUT ]] || OUT="$SCRIPT_DIR/out/broker-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)
RAW="$OUT/raw" LOGS="$OUT/logs" PLOTS="$OUT/plots"
mkdir -p "$RAW" "$LOGS" "$PLOTS"
CMDLOG="$LOGS/commands.log"
RUNLOG="$OUT/run.log"
: >"$CMDLOG"
: >"$RUNLOG"
T_START=$SECONDS

# broker_bench is a check program: build it (cheap when it is up to date)
make -C "$BUILDDIR" perftest/broker_bench >"$LOGS/build-broker_bench.log" 2>&1 ||
    die "building perftest/broker_bench failed (see $LOGS/build-broker_bench.log)"
[[ -x $BB ]] || die "$BB not built"

# a clean environment: the caller's UCX settings would change what is measured
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(UCX_|CXL_BROKER)' || true)
unset LD_PRELOAD

# ---------------------------------------------------------------------------
# Data, pool, broker
# ---------------------------------------------------------------------------
DATA=$(mktemp -d "${BBENCH_DATA_DIR:-/var/tmp}/ucx-cxl-bbench.XXXXXX") || die "mktemp failed"
POOL="" POOL_MNT="" POOL_NOTE=""
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
        "$CXLPOOL" destroy "$POOL" >>"$LOGS/pool.log" 2>&1 ||
            "$CXLPOOL" destroy "$POOL" --force >>"$LOGS/pool.log" 2>&1 || rm -f -- "$POOL"
    fi
    bench_pool_unmount
    rm -rf -- "$DATA"
}
trap cleanup EXIT
trap 'msg "interrupted"; exit 130' INT TERM

bench_pool_dir "$POOL_DIR" 1100 "$LOGS/pool-mount.log"
POOL="$POOL_DIR/ucx-cxl-bbench-$$-$RANDOM.pool"

TOTAL_MIB=0
for m in "${MIB_LIST[@]}"; do TOTAL_MIB=$((TOTAL_MIB + m)); done
CAP_MIB=$((TOTAL_MIB + TOTAL_MIB / 4 + 32))
((CAP_MIB < 64)) && CAP_MIB=64
((CAP_MIB <= 900)) || die "datasets of $TOTAL_MIB MiB do not fit a 1 GiB pool (--mib)"
"$CXLPOOL" create "$POOL" --size 1g >"$LOGS/pool.log" 2>&1 ||
    die "cxlpool create $POOL failed: $(tail -n1 "$LOGS/pool.log")"
POOL_PAGES=$(bench_pool_pages "$CXLPOOL" "$POOL" "$RAW/pool-info.json" 2>>"$LOGS/pool.log") ||
    die "cxlpool info $POOL failed: $(tail -n1 "$LOGS/pool.log")"
PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
ADDR="127.0.0.1:$PORT"
# only what uses UCX gets the module: the pread/mmap readers' PSS is theirs
export UCX_CXL_POOL="$POOL" CXL_BROKER="$ADDR"
printf '[%s] %s\n' "$(date +%T)" "$BROKER serve --pool $POOL --listen $ADDR --capacity ${CAP_MIB}m" >>"$CMDLOG"
LD_PRELOAD="$MODULE" "$BROKER" serve --pool "$POOL" --listen "$ADDR" --capacity "${CAP_MIB}m" \
    >"$LOGS/broker.out" 2>"$LOGS/broker.log" &
BROKER_PID=$!
for _ in $(seq 300); do
    grep -q 'ready on' "$LOGS/broker.out" 2>/dev/null && break
    kill -0 "$BROKER_PID" 2>/dev/null || break
    sleep 0.1
done
grep -q 'ready on' "$LOGS/broker.out" 2>/dev/null ||
    die "the broker did not start: $(tail -n 3 "$LOGS/broker.log")"
msg "broker pid $BROKER_PID on $ADDR, pool $POOL (1 GiB, cache ${CAP_MIB} MiB); data in $DATA"

brk() {   # brk ARGS...: the CLI, logged
    printf '[%s] cxl-broker %s\n' "$(date +%T)" "$*" >>"$CMDLOG"
    LD_PRELOAD="$MODULE" timeout -k 5 300 "$BROKER" "$@"
}
DS=() FILES=() NREC=()
for i in "${!SIZE_LIST[@]}"; do
    rec=${REC[i]}
    n=$((MIB_LIST[i] * 1048576 / rec))
    ((n >= 1)) || die "--mib ${MIB_LIST[i]} is smaller than one ${SIZE_LIST[i]} record"
    f="$DATA/r${SIZE_LIST[i]}.raw"
    "$BB" --gen "$f" "$n" "$rec" "$((i + 1))" || die "cannot write $f"
    DS+=("bb${SIZE_LIST[i]}") FILES+=("$f") NREC+=("$n")
    brk add --format raw --record-size "$rec" --policy pin "bb${SIZE_LIST[i]}" "$f" \
        >>"$LOGS/broker-cli.log" 2>&1 || die "cxl-broker add failed: $(tail -n1 "$LOGS/broker-cli.log")"
done
sync
warm_all() {
    local i
    for i in "${!DS[@]}"; do
        brk warm "${DS[i]}" >>"$LOGS/broker-cli.log" 2>&1 ||
            die "cxl-broker warm ${DS[i]} failed: $(tail -n1 "$LOGS/broker-cli.log")"
        cat "${FILES[i]}" >/dev/null    # the page-cache baseline is warm too
    done
}
warm_all
brk ls --json >"$RAW/ls-warm.json" 2>>"$LOGS/broker-cli.log"

# ---------------------------------------------------------------------------
# Machine record
# ---------------------------------------------------------------------------
{
    printf 'date=%s\n' "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    printf 'host=%s\n' "$(hostname)"
    printf 'cpu=%s\n' "$(awk -F': *' '/^model name/{print $2; exit}' /proc/cpuinfo)"
    printf 'ncpu=%s\n' "$NCPU"
    printf 'llc=%s\n' "$(lscpu 2>/dev/null | awk -F': *' '/^L3 cache/ { print $2; exit }')"
    printf 'mem=%s\n' "$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
    printf 'kernel=%s\n' "$(uname -srm)"
    printf 'ucx=%s\n' "$(ucx_info -v 2>/dev/null | sed -n 's/^# Version *//p')"
    printf 'reps=%s\n' "$REPS"
    printf 'sizes=%s\n' "$SIZES"
    printf 'records=%s\n' "${REC[*]}"
    printf 'nrecords=%s\n' "${NREC[*]}"
    printf 'mib=%s\n' "${MIB_LIST[*]}"
    printf 'readers=%s\n' "$READERS"
    printf 'cold_readers=%s\n' "$COLD_READERS"
    printf 'batch=%s\n' "$BATCH"
    printf 'seconds=%s\n' "$SECS"
    printf 'warmup=%s\n' "$WARMUP"
    printf 'mode=%s\n' "$( ((SMOKE)) && echo smoke || { ((QUICK)) && echo quick || echo default; })"
    printf 'drop=%s\n' "$DROP"
    printf 'memcpy_src=%s\n' "$MEMSRC"
    printf 'wait_idle=%s\n' "$WAIT_IDLE"
    printf 'cold=%s\n' "$COLD"
    printf 'pool=%s\n' "$POOL"
    printf 'pool_page_size=%s\n' "${POOL_PAGES%%|*}"
    printf 'pool_page_source=%s\n' "${POOL_PAGES#*|}"
    printf 'pool_note=%s\n' "$POOL_NOTE"
    printf 'capacity_mib=%s\n' "$CAP_MIB"
    printf 'data_dir=%s\n' "$DATA"
    printf 'data_fs=%s\n' "$(df -T "$DATA" 2>/dev/null | awk 'NR == 2 { print $2 " on " $1 }')"
    printf 'module_sha256=%s\n' "$(sha256sum "$MODULE" | cut -c1-16)"
    printf 'libbroker_sha256=%s\n' "$(sha256sum "$BUILDDIR/.libs/libcxl_broker.so" 2>/dev/null | cut -c1-16)"
    printf 'git=%s\n' "$(git -C "$REPO_DIR" describe --always --dirty 2>/dev/null)"
    printf 'load_start=%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
    printf 'gnuplot=%s\n' "$HAVE_GNUPLOT"
} >"$OUT/meta.env"

# ---------------------------------------------------------------------------
# Running broker_bench
# ---------------------------------------------------------------------------
SEQ=0
# bench NAME ARGS...: raw/NNNN-NAME.{csv,err}; sets JOB_BASE, JOB_RC
bench() {
    local name=$1 pre=""
    shift
    SEQ=$((SEQ + 1))
    JOB_BASE=$(printf '%s/%04d-%s' "$RAW" "$SEQ" "$name")
    [[ " $* " == *" --mode broker "* || " $* " == *" --mode view "* ]] && pre=$MODULE
    printf '[%s] %s\n' "$(date +%T)" "$(printf '%q ' ${pre:+LD_PRELOAD=$pre} timeout -k 5 "$RUN_TO" "$BB" "$@")" >>"$CMDLOG"
    LD_PRELOAD=$pre timeout -k 5 "$RUN_TO" "$BB" "$@" >"$JOB_BASE.csv" 2>"$JOB_BASE.err" &
    RUN_PID=$!
    wait "$RUN_PID"
    JOB_RC=$?
    RUN_PID=""
    return $JOB_RC
}
job_why() {
    if ((JOB_RC == 124 || JOB_RC == 137)); then echo "timeout after $RUN_TO s"; else
        echo "rc=$JOB_RC: $(grep -m1 . "$JOB_BASE.err" | cut -c1-200)"; fi
}
# the arguments of one mode at size index i
mode_args() {   # mode_args MODE I
    local i=$2
    case $1 in
        broker | view) printf '%s\n' --mode "$1" --dataset "${DS[i]}" --file "${FILES[i]}" \
                    --pss-pid "$BROKER_PID" --pool-file "$POOL" ;;
        broker-get) printf '%s\n' --mode broker --copy get --dataset "${DS[i]}" --file "${FILES[i]}" \
                    --pss-pid "$BROKER_PID" --pool-file "$POOL" ;;
        pread | mmap) printf '%s\n' --mode "$1" --file "${FILES[i]}" ;;
        memcpy) printf '%s\n' --mode memcpy --memcpy-src "$MEMSRC" --file "${FILES[i]}" ;;
        memcpy-ds) printf '%s\n' --mode memcpy --memcpy-src "$((NREC[i] * REC[i]))" --file "${FILES[i]}" ;;
    esac
    printf '%s\n' --record "${REC[i]}" --batch "$BATCH"
}
HDR=$("$BB" --header --mode memcpy --memcpy-src 1m --record 1m --seconds 0.01 --warmup 0 | head -n1)
echo "rep,label,$HDR" >"$OUT/samples.csv"
echo "rep,label,$HDR" >"$OUT/readers.csv"
# append_rows REP LABEL CSV
append_rows() {
    awk -F, -v r="$1" -v l="$2" '$1 == "total" { print r "," l "," $0 }' "$3" >>"$OUT/samples.csv"
    awk -F, -v r="$1" -v l="$2" '$1 == "reader" { print r "," l "," $0 }' "$3" >>"$OUT/readers.csv"
}
: >"$OUT/failures.txt"

# ---------------------------------------------------------------------------
# Correctness pass: every sample once in every mode, compared with the file
# ---------------------------------------------------------------------------
echo "record,mode,readers,samples,errors,digest,rc" >"$OUT/check.csv"
msg "correctness pass: every sample once per mode (--epoch --check), digests compared"
CHECK_FAIL=0
for i in "${!SIZE_LIST[@]}"; do
    for m in broker broker-get view pread mmap; do
        mapfile -t a < <(mode_args "$m" "$i")
        bench "check-$m-${SIZE_LIST[i]}" "${a[@]}" --readers 2 --epoch --check --seed 7
        awk -F, -v m="$m" -v rc="$JOB_RC" '$1 == "total" { print $3 "," m "," $4 "," $9 "," $24 "," $25 "," rc }' \
            "$JOB_BASE.csv" >>"$OUT/check.csv"
        if ((JOB_RC != 0)); then
            msg "  FAILED: check $m ${SIZE_LIST[i]}: $(job_why)"
            CHECK_FAIL=1
        fi
    done
    d=$(awk -F, -v r="${REC[i]}" '$1 == r { print $6 }' "$OUT/check.csv" | sort -u | wc -l)
    e=$(awk -F, -v r="${REC[i]}" '$1 == r { s += $5 } END { print s + 0 }' "$OUT/check.csv")
    if ((d == 1 && e == 0)); then
        msg "  ${SIZE_LIST[i]}: ${NREC[i]} samples, broker = broker-get = view = pread = mmap = file (digest $(awk -F, -v r="${REC[i]}" '$1 == r { print $6; exit }' "$OUT/check.csv"))"
    else
        msg "  ${SIZE_LIST[i]}: MISMATCH: $d different digests, $e samples differ from the file"
        CHECK_FAIL=1
    fi
done
printf 'check_fail=%s\n' "$CHECK_FAIL" >>"$OUT/meta.env"

# ---------------------------------------------------------------------------
# Warm: alternating modes, --reps times
# ---------------------------------------------------------------------------
cpu_busy() {   # percent of all CPUs busy over one second (/proc/stat)
    local a b
    a=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6; exit }' /proc/stat)
    sleep 1
    b=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6; exit }' /proc/stat)
    awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " ")
        busy = y[1] - x[1]; idle = y[2] - x[2]
        printf "%.0f", (busy + idle > 0) ? 100 * busy / (busy + idle) : 0 }'
}
BUSY=""
wait_idle() {   # sets BUSY: the busy share right before the run (with --wait-idle)
    local t0=$SECONDS said=0
    BUSY=""
    ((WAIT_IDLE > 0)) || return 0
    BUSY=$(cpu_busy)
    while ((BUSY > WAIT_IDLE && SECONDS - t0 < WAIT_MAX)); do
        ((said)) || msg "    waiting for the CPUs to be at most $WAIT_IDLE % busy (now $BUSY %, at most ${WAIT_MAX}s)"
        said=1
        sleep 2
        BUSY=$(cpu_busy)
    done
    ((BUSY > WAIT_IDLE)) && msg "    still $BUSY % busy after ${WAIT_MAX}s: running anyway"
    return 0
}
echo "label,record,readers,rep,rc,cpu_busy_pct,load1" >"$OUT/runs.csv"
EXTRA=()
((SMOKE)) && EXTRA=(--check)
msg "warm: sizes $SIZES x readers $READERS x (broker broker-get view pread mmap memcpy) x $REPS reps, ${SECS}s each$( \
    ((SMOKE)) && echo ', every read checked')"
for ((rep = 1; rep <= REPS; ++rep)); do
    for i in "${!SIZE_LIST[@]}"; do
        modes=(broker broker-get view pread mmap memcpy)
        ((REC[i] == 1048576)) && modes+=(memcpy-ds)
        for n in "${READER_LIST[@]}"; do
            for m in "${modes[@]}"; do
                mapfile -t a < <(mode_args "$m" "$i")
                # the page-cache baseline reads a cached file (other work on
                # the machine may drop caches; cheap when it is cached)
                [[ $m == pread || $m == mmap ]] && cat "${FILES[i]}" >/dev/null
                wait_idle
                load1=$(cut -d' ' -f1 /proc/loadavg)
                bench "$m-${SIZE_LIST[i]}-n$n-r$rep" "${a[@]}" --readers "$n" --seconds "$SECS" \
                    --warmup "$WARMUP" --seed "$rep" "${EXTRA[@]}"
                printf '%s,%s,%s,%s,%s,%s,%s\n' "$m" "${REC[i]}" "$n" "$rep" "$JOB_RC" "$BUSY" "$load1" >>"$OUT/runs.csv"
                append_rows "$rep" "$m" "$JOB_BASE.csv"
                if ((JOB_RC != 0)); then
                    msg "  FAILED $m ${SIZE_LIST[i]} n$n r$rep: $(job_why)"
                    printf '%s|%s|%s|r%s: %s\n' "$m" "${REC[i]}" "$n" "$rep" "$(job_why)" >>"$OUT/failures.txt"
                fi
            done
        done
    done
    msg "  rep $rep/$REPS done (load $(cut -d' ' -f1 /proc/loadavg))"
done

# ---------------------------------------------------------------------------
# Profile: one broker reader at the smallest size
# ---------------------------------------------------------------------------
if ((HAVE_PERF)); then
    msg "profile: perf record -g of one broker reader at ${SIZE_LIST[0]}"
    mapfile -t a < <(mode_args broker 0)
    printf '[%s] perf record -g -F 999 -o %s -- %s\n' "$(date +%T)" "$RAW/perf.data" "$BB ${a[*]} --readers 1 --seconds 3" >>"$CMDLOG"
    if timeout -k 5 120 perf record -g -F 999 -o "$RAW/perf.data" -- \
        env LD_PRELOAD="$MODULE" "$BB" "${a[@]}" --readers 1 --seconds 3 --warmup 0.3 >"$RAW/profile-run.csv" 2>"$LOGS/perf-record.log"; then
        perf report -i "$RAW/perf.data" --stdio --no-children --sort symbol --comm broker_bench \
            --percent-limit 0.3 2>/dev/null | grep -v '^$' | head -n 400 >"$RAW/profile-self.txt"
        perf report -i "$RAW/perf.data" --stdio --children --sort symbol -g none --comm broker_bench \
            --percent-limit 1 2>/dev/null | grep -v '^$' | head -n 200 >"$RAW/profile-children.txt"
        perf report -i "$RAW/perf.data" --stdio --no-children --sort dso --comm broker_bench \
            2>/dev/null | grep -v '^$' | head -n 60 >"$RAW/profile-dso.txt"
        rm -f "$RAW/perf.data" "$RAW/perf.data.old"
    else
        msg "  perf record failed (see $LOGS/perf-record.log)"
    fi
    # the broker daemon while it fills the largest dataset cold
    j=$((${#DS[@]} - 1))
    msg "profile: perf record -g of the broker during a cold cxl-broker warm ${DS[j]}"
    brk evict "${DS[j]}" >>"$LOGS/broker-cli.log" 2>&1
    sync
    [[ $DROP == global ]] && { echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null
    dd if="${FILES[j]}" iflag=nocache count=0 status=none 2>/dev/null
    perf record -g -F 999 -p "$BROKER_PID" -o "$RAW/perf-broker.data" >>"$LOGS/perf-record.log" 2>&1 &
    PERF_PID=$!
    sleep 0.5
    brk warm "${DS[j]}" >>"$LOGS/broker-cli.log" 2>&1
    kill -INT "$PERF_PID" 2>/dev/null
    wait "$PERF_PID" 2>/dev/null
    perf report -i "$RAW/perf-broker.data" --stdio --no-children --sort symbol --percent-limit 0.3 \
        2>/dev/null | grep -v '^$' | head -n 200 >"$RAW/profile-broker-fill.txt"
    rm -f "$RAW/perf-broker.data" "$RAW/perf-broker.data.old"
    cat "${FILES[j]}" >/dev/null
fi

# ---------------------------------------------------------------------------
# Cold epoch
# ---------------------------------------------------------------------------
drop_cache() {   # drop_cache FILE...
    local f
    sync
    if [[ $DROP == global ]]; then
        echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
    fi
    for f in "$@"; do   # posix_fadvise(DONTNEED) of the whole file
        dd if="$f" iflag=nocache count=0 status=none 2>/dev/null || true
    done
}
cache_kib() {   # KiB of FILE in the page cache
    fincore -b -n -o RES "$1" 2>/dev/null | awk '{ printf "%d", $1 / 1024 }'
}
stat_field() {   # stat_field FIELD: from cxl-broker stat --json
    brk stat --json 2>/dev/null | "$PY" -c 'import json, sys; print(json.load(sys.stdin).get(sys.argv[1], -1))' "$1"
}
if ((COLD)); then
    echo "rep,record,readers,kind,seconds,bytes,gb_per_s,cache_before_kib,fill_bytes,file_bytes_read,ok" >"$OUT/cold.csv"
    msg "cold epoch: per size raw dd, cxl-broker warm, broker epoch, pread epoch (readers $COLD_READERS); page cache dropped ($DROP) before each"
    for ((rep = 1; rep <= REPS; ++rep)); do
        for i in "${!SIZE_LIST[@]}"; do
            f=${FILES[i]} bytes=$((NREC[i] * REC[i]))
            # raw file read bandwidth: one sequential read
            drop_cache "$f"
            cb=$(cache_kib "$f")
            t0=$(date +%s.%N)
            dd if="$f" of=/dev/null bs=4M status=none
            rc=$?
            t1=$(date +%s.%N)
            awk -v r="$rep" -v rec="${REC[i]}" -v b="$bytes" -v t0="$t0" -v t1="$t1" -v cb="$cb" -v rc="$rc" \
                'BEGIN { s = t1 - t0; printf "%s,%s,1,raw-dd,%.6f,%d,%.4f,%s,,,%d\n", r, rec, s, b, b / s / 1e9, cb, rc == 0 }' >>"$OUT/cold.csv"
            # the same, timed like the epochs (after open): sequential 4 MiB preads
            drop_cache "$f"
            cb=$(cache_kib "$f")
            bench "cold-rawpread-${SIZE_LIST[i]}-r$rep" --mode pread --file "$f" --record 4m --epoch --order seq
            awk -F, -v r="$rep" -v rec="${REC[i]}" -v cb="$cb" -v rc="$JOB_RC" \
                '$1 == "total" { printf "%s,%s,1,raw-pread,%s,%s,%s,%s,,,%d\n", r, rec, $8, $10, $12, cb, rc == 0 }' \
                "$JOB_BASE.csv" >>"$OUT/cold.csv"
            # the broker's own sequential fill
            brk evict "${DS[i]}" >>"$LOGS/broker-cli.log" 2>&1
            drop_cache "$f"
            cb=$(cache_kib "$f")
            fb0=$(stat_field file_bytes_read)
            t0=$(date +%s.%N)
            brk warm "${DS[i]}" >>"$LOGS/broker-cli.log" 2>&1
            rc=$?
            t1=$(date +%s.%N)
            fb1=$(stat_field file_bytes_read)
            awk -v r="$rep" -v rec="${REC[i]}" -v b="$bytes" -v t0="$t0" -v t1="$t1" -v cb="$cb" -v rc="$rc" -v fb=$((fb1 - fb0)) \
                'BEGIN { s = t1 - t0; printf "%s,%s,1,broker-warm,%.6f,%d,%.4f,%s,%d,%d,%d\n", r, rec, s, b, b / s / 1e9, cb, fb, fb, rc == 0 }' >>"$OUT/cold.csv"
            for n in "${COLD_LIST[@]}"; do
                for m in broker pread; do
                    [[ $m == broker ]] && brk evict "${DS[i]}" >>"$LOGS/broker-cli.log" 2>&1
                    drop_cache "$f"
                    cb=$(cache_kib "$f")
                    fb0=$(stat_field file_bytes_read)
                    mapfile -t a < <(mode_args "$m" "$i")
                    bench "cold-$m-${SIZE_LIST[i]}-n$n-r$rep" "${a[@]}" --readers "$n" --epoch \
                        --seed "$((100 + rep))" "${EXTRA[@]}"
                    fb1=$(stat_field file_bytes_read)
                    [[ $m == broker ]] || fb1=$fb0
                    awk -F, -v r="$rep" -v n="$n" -v m="$m" -v cb="$cb" -v rc="$JOB_RC" -v fb=$((fb1 - fb0)) \
                        '$1 == "total" { printf "%s,%s,%s,%s-epoch,%s,%s,%s,%s,%s,%s,%d\n", r, $3, n, m, $8, $10, $12, cb, (m == "broker") ? fb : "", (m == "broker") ? fb : "", rc == 0 }' \
                        "$JOB_BASE.csv" >>"$OUT/cold.csv"
                    ((JOB_RC == 0)) || msg "  FAILED cold $m ${SIZE_LIST[i]} n$n r$rep: $(job_why)"
                done
            done
        done
        # the fill's CPU ceiling: CRC32C of 4 MiB chunks (the broker's) and with SSE4.2
        for m in crc crc-hw; do
            bench "cold-$m-r$rep" --mode "$m" --record 4m --memcpy-src "$MEMSRC" --seconds "$SECS" --warmup 0.1
            awk -F, -v r="$rep" -v m="$m" -v rc="$JOB_RC" \
                '$1 == "total" { printf "%s,%s,1,%s,%s,%s,%s,,,,%d\n", r, $3, m, $8, $10, $12, rc == 0 }' \
                "$JOB_BASE.csv" >>"$OUT/cold.csv"
        done
        msg "  cold rep $rep/$REPS done"
    done
    warm_all
fi

brk stat --json >"$RAW/broker-stat.json" 2>>"$LOGS/broker-cli.log"
brk ls --json >"$RAW/ls-end.json" 2>>"$LOGS/broker-cli.log"
printf 'broker_pss_kib=%s\n' "$(awk '/^Pss:/ { print $2 }' "/proc/$BROKER_PID/smaps_rollup" 2>/dev/null)" >>"$OUT/meta.env"
printf 'load_end=%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.env"
printf 'duration_s=%s\n' "$((SECONDS - T_START))" >>"$OUT/meta.env"

# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------
trap - EXIT
cleanup
msg "broker stopped, pool destroyed; writing the report"
"$PY" "$SCRIPT_DIR/broker_report.py" "$OUT" || die "broker_report.py failed"
if ((HAVE_GNUPLOT)); then
    (cd "$PLOTS" && gnuplot plots.gp) >"$LOGS/gnuplot.log" 2>&1 ||
        msg "gnuplot failed (see $LOGS/gnuplot.log); the tables are complete"
else
    msg "gnuplot not found (Debian package gnuplot-nox): no PNG plots; data in $PLOTS"
fi
msg "done in $((SECONDS - T_START))s: $OUT/report.md"
cat "$OUT/report.md"
[[ $CHECK_FAIL == 0 && ! -s $OUT/failures.txt ]]
