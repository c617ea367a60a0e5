#!/usr/bin/env bash
#
# run-coll-bench.sh - the MPI collectives side by side: coll/cxl (the
# collectives over the CXL pool, mca_coll_cxl.so) against what Open MPI
# users get today, with perftest/coll_bench.c (OSU-style), in one command.
#
# Configurations (labels as in the report), run ALTERNATING, --reps times
# (tuned-ucx, ob1-vader, cxl, cxl-sw, tuned-ucx, ob1-vader, ...):
#   tuned-ucx  Open MPI's default collective selection (coll/tuned over
#              point-to-point) on pml ucx with UCX_TLS=cxl: every message
#              over the ucx-cxl transport (LD_PRELOAD of libuct_cxl.so,
#              --tune contrib/openmpi-cxl.conf, as test/mpi/run-mpi.sh)
#   ob1-vader  what MPI users get by default on one host: pml ob1 with
#              btl vader (shared memory) and self, coll/tuned
#   cxl        coll/cxl on the same pml ucx / UCX_TLS=cxl line, on a hw
#              (coherent) pool: mca_coll_cxl.so from the build folder
#              (--coll-cxl), found through mca_base_component_path
#   cxl-sw     coll/cxl in software-coherent mode on the strict
#              non-coherent pool emulator (UCX_CXL_POOL=emulate-nc:POOL,
#              UCX_CXL_COHERENCE=sw, every rank an emulated host of its
#              own); the emulator's write-back and invalidate are memcpy
#              through a file, so these numbers measure the emulator
# Both baselines exclude coll/cxl (--mca coll ^cxl) even if it is
# installed where Open MPI looks by default.  Without the component the
# two cxl configurations are reported as missing (with where it was
# looked for), never left out silently.
# After the configurations, each repetition also runs the hand-written
# reference (perftest/ref_coll.c, np = 2, sizes up to 256 B): barrier,
# bcast, exchange and allreduce between two threads with nothing but
# cache lines, timed as coll_bench times MPI's; the report sets the
# latency targets against it.
#
# Before the measured repetitions every configuration runs once with -c
# (every result checked against locally computed values, few iterations)
# and with coll_base_verbose: the report shows which coll components
# MPI_COMM_WORLD got.  A cxl configuration whose MPI_COMM_WORLD did not
# enable coll/cxl, or whose check found wrong results, is not measured
# (reported with the reason): its numbers would not be coll/cxl's.
#
# Output folder (default perftest/out/coll-<date>-<time>/):
#   summary.md    one compact table (collective x 8 B/4 KiB/256 KiB/4 MiB)
#   report.md     machine (cores, memcpy bandwidth, load), targets of
#                 issue 12 met/missed per cell, per collective a table
#                 size x configuration (median [min-max] of the
#                 repetitions, us), ratios; also printed at the end
#   results.csv   collective,bytes,config,unit,rep1..repN,median,min,max,
#                 ok_reps,note
#   samples.csv   every CSV line of every run, with config and rep
#   runs.csv      every measured run: config,rep,seconds,rc,cpu_busy_pct
#                 (over the second before it),load1,rtt_ns (the cache-line
#                 round trip between the two cores right before it;
#                 config "hand-written" for the reference's runs)
#   plots/*.png   latency vs size per collective, coll/cxl speed-up over
#                 the best baseline (gnuplot)
#   raw/, logs/   coll_bench output of every run (ref_coll-rN.csv: the
#                 reference's), commands, selection logs
#
# Method: coll_bench's avg_us (the mean over ranks of the per-rank average)
# is the figure; min/max across ranks are kept in samples.csv.  np = 2 by
# default (ranks bound to cores); --np above the core count is run with
# --oversubscribe --bind-to none and marked "oversubscribed".  Nothing here
# asserts timings; it measures and reports.
#
# Usage: perftest/run-coll-bench.sh [--reps N] [--np N] [--sizes LIST]
#          [--colls LIST] [--budget S] [--quick] [--smoke] [--out DIR]
#          [--builddir DIR] [--coll-cxl PATH] [--no-cxl] [--no-sw]
#          [--cxl-env "VAR=V ..."] [--cxl-mca "NAME VALUE ..."]
#          [--timeout S] [--wait-idle PCT] [--wait-rtt NS] [--wait-max S]
#          [--nonblocking] [--overlap US] [--help]
#   --reps N       repetitions per configuration (default 5; --quick 3)
#   --np N         ranks (default 2)
#   --sizes LIST   coll_bench sizes (default 8,16,64,256,1K,4K,16K,64K,
#                  256K,1M,4M; --quick 8,64,1K,4K,64K,256K,1M,4M)
#   --colls LIST   collectives (default all nine)
#   --budget S     seconds per collective and size per run (default 0.25;
#                  --quick 0.1)
#   --quick        3 repetitions, fewer sizes, smaller budget
#   --smoke        1 repetition, sizes 8,4K, budget 0.02, every run with
#                  -c, short machine limits: the registered test
#   --out DIR      output folder
#   --builddir DIR build folder with .libs/libuct_cxl.so and cxlpool
#                  (default: build build-release/ with contrib/build.sh)
#   --coll-cxl P   mca_coll_cxl.so, or a folder holding it (default: the
#                  first of BUILDDIR/.libs/, BUILDDIR/src/ompi/coll_cxl/.libs/,
#                  anything named mca_coll_cxl.so under BUILDDIR)
#   --no-cxl       baselines only (cxl and cxl-sw reported as not run)
#   --no-sw        no cxl-sw
#   --cxl-env STR  extra environment of the cxl configurations
#   --cxl-mca STR  MCA parameters of the cxl configurations, pairs of
#                  words (default "coll_cxl_priority 90")
#   --timeout S    limit of one mpirun (default 900; smoke 120)
#   --wait-idle P  before every measured run wait until the CPUs were at
#                  most P % busy over one second (other work on a shared
#                  machine), at most --wait-max seconds (default 300) per
#                  run; 0 (default): do not wait.  The busy share before
#                  every run is in runs.csv and the report either way
#   --nonblocking  time MPI_I<collective> + MPI_Wait (the baselines' libnbc
#                  against coll/cxl's requests) instead of the blocking
#                  calls; the report says so in its title
#   --overlap US   with --nonblocking (implied): US microseconds of
#                  computation between start and MPI_Wait; the figures are
#                  the time beyond it, the communication it did not hide
#   --wait-rtt NS  before every measured run wait until the cache-line
#                  round trip between the two cores is at most NS ns (a
#                  VM whose host moves its vCPUs: this one flips between
#                  ~110 and ~450 ns), at most --wait-max seconds per run,
#                  then run anyway; 0 (default): do not wait.  Every
#                  configuration waits alike, and the round trip before
#                  every run is in runs.csv and the report either way
#   -h, --help     this text
set -uo pipefail

PROG=run-coll-bench
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$SCRIPT_DIR/.." && pwd)

REPS="" NP=2 SIZES="" COLLS=all BUDGET="" QUICK=0 SMOKE=0 OUT="" BUILDDIR=""
COLL_CXL="" CXL=1 SW=1 CXL_ENV_STR="" CXL_MCA_STR="coll_cxl_priority 90"
MPI_TO="" WAIT_IDLE=0 WAIT_RTT=0 WAIT_MAX=300 NONBLOCKING=0 OVERLAP=0

. "$SCRIPT_DIR/bench-common.sh"

while (($#)); do
    case $1 in
        --reps) need "$1" $#; REPS=$2; shift ;;
        --np) need "$1" $#; NP=$2; shift ;;
        --sizes) need "$1" $#; SIZES=$2; shift ;;
        --colls) need "$1" $#; COLLS=$2; shift ;;
        --budget) need "$1" $#; BUDGET=$2; shift ;;
        --quick) QUICK=1 ;;
        --smoke) SMOKE=1 ;;
        --out) need "$1" $#; OUT=$2; shift ;;
        --builddir) need "$1" $#; BUILDDIR=$2; shift ;;
        --coll-cxl) need "$1" $#; COLL_CXL=$2; shift ;;
        --no-cxl) CXL=0 ;;
        --no-sw) SW=0 ;;
        --cxl-env) need "$1" $#; CXL_ENV_STR=$2; shift ;;
        --cxl-mca) need "$1" $#; CXL_MCA_STR=$2; shift ;;
        --timeout) need "$1" $#; MPI_TO=$2; shift ;;
        --wait-idle) need "$1" $#; WAIT_IDLE=$2; shift ;;
        --wait-rtt) need "$1" $#; WAIT_RTT=$2; shift ;;
        --wait-max) need "$1" $#; WAIT_MAX=$2; shift ;;
        --nonblocking) NONBLOCKING=1 ;;
        --overlap) need "$1" $#; OVERLAP=$2; NONBLOCKING=1; shift ;;
        -h | --help) usage; exit 0 ;;
        *) printf '%s: unknown option %q (see --help)\n' "$PROG" "$1" >&2; exit 2 ;;
    esac
    shift
done

if ((SMOKE)); then
    : "${REPS:=1}" "${SIZES:=8,4K}" "${BUDGET:=0.02}" "${MPI_TO:=120}"
elif ((QUICK)); then
    : "${REPS:=3}" "${SIZES:=8,64,1K,4K,64K,256K,1M,4M}" "${BUDGET:=0.1}"
fi
: "${REPS:=5}" "${SIZES:=8,16,64,256,1K,4K,16K,64K,256K,1M,4M}" "${BUDGET:=0.25}" "${MPI_TO:=900}"
[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "--reps must be a positive integer"
[[ $NP =~ ^[1-9][0-9]*$ ]] || die "--np must be a positive integer"
[[ $MPI_TO =~ ^[1-9][0-9]*$ ]] || die "--timeout must be a positive integer"
[[ $WAIT_IDLE =~ ^[0-9]+$ && $WAIT_IDLE -le 100 ]] || die "--wait-idle takes a percentage 0..100"
[[ $WAIT_MAX =~ ^[0-9]+$ ]] || die "--wait-max takes seconds"
[[ $WAIT_RTT =~ ^[0-9]+$ ]] || die "--wait-rtt takes nanoseconds"
[[ $OVERLAP =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--overlap takes microseconds"
read -r -a CXL_MCA_WORDS <<<"$CXL_MCA_STR"
((${#CXL_MCA_WORDS[@]} % 2 == 0)) || die "--cxl-mca takes NAME VALUE pairs"
read -r -a CXL_ENV <<<"$CXL_ENV_STR"

# ---------------------------------------------------------------------------
# Build and tools
# ---------------------------------------------------------------------------
if [[ -z $BUILDDIR ]]; then
    BUILDDIR=$("$REPO_DIR/contrib/build.sh" release) || die "contrib/build.sh release failed"
fi
BUILDDIR=$(cd "$BUILDDIR" 2>/dev/null && pwd) || die "build folder '$BUILDDIR' does not exist"
MODULE_SRC="$BUILDDIR/.libs/libuct_cxl.so"
CXLPOOL="$BUILDDIR/cxlpool"
CONF="$REPO_DIR/contrib/openmpi-cxl.conf"
[[ -f $MODULE_SRC ]] || die "$MODULE_SRC not found; build the project first (or pass --builddir)"
[[ -x $CXLPOOL ]] || die "$CXLPOOL not found; build the project first (or pass --builddir)"
[[ -f $CONF ]] || die "$CONF not found"
PY=/usr/bin/python3
for t in mpirun mpicc ompi_info gcc timeout "$PY"; do
    command -v "$t" >/dev/null 2>&1 || die "'$t' not found (contrib/setup-deps.sh installs what the project needs)"
done
HAVE_GNUPLOT=0
command -v gnuplot >/dev/null 2>&1 && HAVE_GNUPLOT=1
NCPU=$(nproc 2>/dev/null || echo 1)
OVERSUB=0
((NP > NCPU)) && OVERSUB=1

[[ -n $OUT ]] || OUT="$SCRIPT_DIR/out/coll-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)
RAW="$OUT/raw" LOGS="$OUT/logs" BIN="$OUT/bin" PLOTS="$OUT/plots"
mkdir -p "$RAW" "$LOGS" "$BIN" "$PLOTS"
SAMPLES="$OUT/samples.csv"
echo "config,rep,collective,bytes,np,iters,warmup,min_us,avg_us,max_us,errors,cxl_calls,cxl_fallbacks" >"$SAMPLES"
STATUS="$OUT/configs.txt"   # label|state|note (written before the report)
CMDLOG="$LOGS/commands.log"
: >"$CMDLOG"
RUNLOG="$OUT/run.log"
: >"$RUNLOG"
T_START=$SECONDS

# a clean environment: the caller's UCX/OMPI settings would change what is
# measured; every run sets what it needs
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(UCX_|OMPI_MCA_)' || true)
unset LD_PRELOAD

# snapshots: a rebuild while we run must not mix two builds
MODULE="$BIN/libuct_cxl.so"
cp -f -- "$MODULE_SRC" "$MODULE" || die "cannot copy $MODULE_SRC"
MODULE_SHA=$(sha256sum "$MODULE" | cut -d' ' -f1)
mpicc -O2 -g -Wall -Wextra -Werror -o "$BIN/coll_bench" "$SCRIPT_DIR/coll_bench.c" \
    >"$LOGS/build-coll_bench.log" 2>&1 || die "building coll_bench.c failed (see $LOGS/build-coll_bench.log)"
gcc -O2 -Wall -pthread -I"$REPO_DIR/include" -o "$BIN/limits" "$SCRIPT_DIR/limits.c" \
    "$REPO_DIR/src/coherence/cxl_coherence.c" >"$LOGS/build-limits.log" 2>&1 ||
    die "building limits.c failed (see $LOGS/build-limits.log)"
gcc -O2 -Wall -Wextra -Werror -pthread -o "$BIN/ref_coll" "$SCRIPT_DIR/ref_coll.c" \
    >"$LOGS/build-ref_coll.log" 2>&1 ||
    die "building ref_coll.c failed (see $LOGS/build-ref_coll.log)"

# ---------------------------------------------------------------------------
# coll/cxl: where is the component?
# ---------------------------------------------------------------------------
COMP_SRC="" COMP_WHY="" COMP_SHA=""
find_component() {
    local c
    if [[ -n $COLL_CXL ]]; then
        c=$COLL_CXL
        [[ -d $c ]] && c="$c/mca_coll_cxl.so"
        [[ -f $c ]] && { echo "$c"; return; }
        return
    fi
    for c in "$BUILDDIR/.libs/mca_coll_cxl.so" "$BUILDDIR/src/ompi/coll_cxl/.libs/mca_coll_cxl.so"; do
        [[ -f $c ]] && { echo "$c"; return; }
    done
    find "$BUILDDIR" -name mca_coll_cxl.so -type f 2>/dev/null | sort | head -n1
}
if ((CXL)); then
    COMP_SRC=$(find_component)
    if [[ -z $COMP_SRC ]]; then
        if [[ -n $COLL_CXL ]]; then
            COMP_WHY="mca_coll_cxl.so not found at --coll-cxl $COLL_CXL"
        else
            COMP_WHY="mca_coll_cxl.so not built: looked in $BUILDDIR/.libs/, $BUILDDIR/src/ompi/coll_cxl/.libs/ and under $BUILDDIR (build the component, or pass --coll-cxl)"
        fi
    fi
else
    COMP_WHY="not run (--no-cxl)"
fi
OMPI_PATH=$(ompi_info --parsable --param mca base --level 9 2>/dev/null |
    sed -n 's/^mca:mca:base:param:mca_base_component_path:value:"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p')
[[ -n $OMPI_PATH ]] || OMPI_PATH="$(ompi_info --path libdir --parsable 2>/dev/null | sed -n 's/^path:libdir://p')/openmpi3"
COMP_DIR="$BIN/coll"
if [[ -n $COMP_SRC ]]; then
    mkdir -p "$COMP_DIR"
    cp -f -- "$COMP_SRC" "$COMP_DIR/mca_coll_cxl.so" || die "cannot copy $COMP_SRC"
    COMP_SHA=$(sha256sum "$COMP_DIR/mca_coll_cxl.so" | cut -d' ' -f1)
    msg "coll/cxl: $COMP_SRC (snapshot in $COMP_DIR)"
    # what Open MPI sees of it
    ompi_info --mca mca_base_component_path "$COMP_DIR:$OMPI_PATH" --param coll cxl --level 9 \
        >"$LOGS/ompi_info-coll-cxl.txt" 2>&1
else
    msg "coll/cxl: MISSING: $COMP_WHY"
fi

# ---------------------------------------------------------------------------
# Private pools
# ---------------------------------------------------------------------------
TAG="ucx-cxl-collbench-$$-$RANDOM"
POOL="/dev/shm/$TAG.pool"
POOL_SW="/dev/shm/$TAG-sw.pool"
SW_HOSTS=$((NP + 1 > 8 ? NP + 1 : 8))
RUN_PID=""
cleanup() {
    local p
    if [[ -n $RUN_PID ]]; then kill -TERM "$RUN_PID" 2>/dev/null; wait "$RUN_PID" 2>/dev/null; fi
    for p in "$POOL" "$POOL_SW"; do
        [[ -e $p ]] || continue
        local spec=$p
        [[ $p == "$POOL_SW" ]] && spec="emulate-nc:$p"
        "$CXLPOOL" destroy "$spec" >>"$LOGS/pool.log" 2>&1 ||
            "$CXLPOOL" destroy "$spec" --force >>"$LOGS/pool.log" 2>&1 || rm -f -- "$p"
    done
    rm -f -- "$POOL_SW".host*
}
trap cleanup EXIT
trap 'msg "interrupted"; exit 130' INT TERM
"$CXLPOOL" create "$POOL" --size 1G >"$LOGS/pool.log" 2>&1 ||
    die "cxlpool create $POOL failed: $(tail -n1 "$LOGS/pool.log")"
SW_OK=0
if ((SW)) && [[ -n $COMP_SRC ]]; then
    if "$CXLPOOL" create "$POOL_SW" --size "$((SW_HOSTS > 8 ? SW_HOSTS * 128 : 1024))M" \
        --coherence sw --hosts "$SW_HOSTS" >>"$LOGS/pool.log" 2>&1; then
        SW_OK=1
    else
        SW_WHY="cxlpool create --coherence sw failed: $(tail -n1 "$LOGS/pool.log")"
    fi
fi

# ---------------------------------------------------------------------------
# Configurations: label -> mpirun options and rank environment
# ---------------------------------------------------------------------------
if ((OVERSUB)); then BIND=(--oversubscribe --bind-to none); else BIND=(--bind-to core); fi
BASE=(mpirun -np "$NP" --allow-run-as-root "${BIND[@]}")
UCX_LINE=(--tune "$CONF" -x LD_PRELOAD="$MODULE" -x UCX_TLS=cxl)
cfg_args() {   # cfg_args LABEL -> the words between mpirun's options and the program
    local v i
    case $1 in
        tuned-ucx) printf '%s\n' "${UCX_LINE[@]}" --mca coll ^cxl -x UCX_CXL_POOL="$POOL" ;;
        ob1-vader) printf '%s\n' --mca pml ob1 --mca btl self,vader --mca coll ^cxl ;;
        cxl | cxl-sw)
            printf '%s\n' "${UCX_LINE[@]}" --mca mca_base_component_path "$COMP_DIR:$OMPI_PATH"
            for ((i = 0; i < ${#CXL_MCA_WORDS[@]}; i += 2)); do
                printf '%s\n' --mca "${CXL_MCA_WORDS[i]}" "${CXL_MCA_WORDS[i + 1]}"
            done
            if [[ $1 == cxl ]]; then
                printf '%s\n' -x UCX_CXL_POOL="$POOL" -x UCX_CXL_COHERENCE=hw
            else
                printf '%s\n' -x UCX_CXL_POOL="emulate-nc:$POOL_SW" -x UCX_CXL_COHERENCE=sw
            fi
            for v in "${CXL_ENV[@]}"; do printf '%s\n' -x "$v"; done ;;
    esac
}
# state of every configuration: ok, missing, failed, skipped; with a note
declare -A CSTATE=() CNOTE=()
set_status() { CSTATE[$1]=$2; CNOTE[$1]=${3//|/\/}; }
CONFIGS=(tuned-ucx ob1-vader)
set_status tuned-ucx ok "coll/tuned (default selection) over pml ucx, UCX_TLS=cxl"
set_status ob1-vader ok "coll/tuned over pml ob1 + btl vader (shared memory)"
if [[ -n $COMP_SRC ]]; then
    CONFIGS+=(cxl)
    set_status cxl ok "coll/cxl over pml ucx, UCX_TLS=cxl, hw-coherent pool"
    if ((SW_OK)); then
        CONFIGS+=(cxl-sw)
        set_status cxl-sw ok "coll/cxl, sw coherence on the emulate-nc emulator ($SW_HOSTS host partitions, every rank its own)"
    elif ((SW)); then
        set_status cxl-sw failed "$SW_WHY"
    else
        set_status cxl-sw skipped "not run (--no-sw)"
    fi
else
    set_status cxl missing "$COMP_WHY"
    set_status cxl-sw missing "$COMP_WHY"
fi
write_status() {
    local l
    : >"$STATUS"
    for l in tuned-ucx ob1-vader cxl cxl-sw; do
        printf '%s|%s|%s\n' "$l" "${CSTATE[$l]}" "${CNOTE[$l]}" >>"$STATUS"
    done
}

# ---------------------------------------------------------------------------
# Machine record
# ---------------------------------------------------------------------------
{
    printf 'date=%s\n' "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    printf 'host=%s\n' "$(hostname)"
    printf 'cpu=%s\n' "$(awk -F': *' '/^model name/{print $2; exit}' /proc/cpuinfo)"
    printf 'ncpu=%s\n' "$NCPU"
    printf 'kernel=%s\n' "$(uname -srm)"
    printf 'ucx=%s\n' "$(ucx_info -v 2>/dev/null | sed -n 's/^# Version *//p')"
    printf 'ompi=%s\n' "$(mpirun --version 2>/dev/null | head -n1)"
    printf 'np=%s\n' "$NP"
    printf 'oversubscribed=%s\n' "$OVERSUB"
    printf 'reps=%s\n' "$REPS"
    printf 'sizes=%s\n' "$SIZES"
    printf 'colls=%s\n' "$COLLS"
    printf 'budget=%s\n' "$BUDGET"
    printf 'mode=%s\n' "$( ((SMOKE)) && echo smoke || { ((QUICK)) && echo quick || echo default; })"
    printf 'module=%s\n' "$MODULE_SRC"
    printf 'module_sha256=%s\n' "$MODULE_SHA"
    printf 'component=%s\n' "$COMP_SRC"
    printf 'component_sha256=%s\n' "$COMP_SHA"
    printf 'component_path=%s\n' "$COMP_DIR:$OMPI_PATH"
    printf 'cxl_mca=%s\n' "$CXL_MCA_STR"
    printf 'cxl_env=%s\n' "${CXL_ENV[*]}"
    printf 'pool=%s\n' "$POOL"
    printf 'pool_sw=%s\n' "$( ((SW_OK)) && echo "emulate-nc:$POOL_SW")"
    printf 'load_start=%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
    printf 'gnuplot=%s\n' "$HAVE_GNUPLOT"
    printf 'wait_idle=%s\n' "$WAIT_IDLE"
    printf 'wait_rtt=%s\n' "$WAIT_RTT"
    printf 'wait_max=%s\n' "$WAIT_MAX"
    printf 'nonblocking=%s\n' "$NONBLOCKING"
    printf 'overlap_us=%s\n' "$OVERLAP"
} >"$OUT/meta.env"

# ---------------------------------------------------------------------------
# Running one coll_bench job
# ---------------------------------------------------------------------------
SEQ=0
JOB_EXTRA=()   # extra mpirun options of the next run_job
# run_job LABEL NAME TIMEOUT COLL_BENCH_ARGS...: raw/NNNN-NAME.{csv,err};
# prints a progress line every 30 s; returns mpirun's status
run_job() {
    local label=$1 name=$2 to=$3 base rc t0 next lines
    shift 3
    local -a cmd cargs
    SEQ=$((SEQ + 1))
    base=$(printf '%s/%04d-%s' "$RAW" "$SEQ" "$name")
    mapfile -t cargs < <(cfg_args "$label")
    cmd=("${BASE[@]}" "${cargs[@]}" "${JOB_EXTRA[@]}" "$BIN/coll_bench" "$@")
    printf '[%s] timeout %s %s\n' "$(date +%T)" "$to" "$(printf '%q ' "${cmd[@]}")" >>"$CMDLOG"
    t0=$SECONDS
    next=$((t0 + 30))
    timeout -k 10 "$to" "${cmd[@]}" >"$base.csv" 2>"$base.err" &
    RUN_PID=$!
    while kill -0 "$RUN_PID" 2>/dev/null; do
        sleep 0.2
        if ((SECONDS >= next)); then
            lines=$(($(wc -l <"$base.csv") - 1))
            msg "    ... $name: $((SECONDS - t0)) s, $((lines < 0 ? 0 : lines)) results so far"
            next=$((SECONDS + 30))
        fi
    done
    wait "$RUN_PID"
    rc=$?
    RUN_PID=""
    JOB_BASE=$base
    JOB_SECS=$((SECONDS - t0))
    return $rc
}
job_why() {   # job_why RC BASE TIMEOUT
    if (($1 == 124 || $1 == 137)); then
        echo "timeout after $3 s"
    else
        echo "mpirun rc=$1: $(grep -v '^\[' "$2.err" | grep -m1 -iE 'error|abort|wrong|not found|fail|unable' | cut -c1-200)"
    fi
}
append_samples() {   # append_samples LABEL REP CSVFILE
    awk -F, -v OFS=, -v l="$1" -v r="$2" 'NR > 1 && NF == 12 {
        print l, r, $1, $2, $3, $5, $6, $7, $8, $9, $10, $11, $12 }' "$3" >>"$SAMPLES"
}
csv_rows() { awk -F, 'NR > 1 && NF == 12' "$1" | wc -l; }
# the rows coll_bench prints for one run (for the check of completeness)
EXPECTED_ROWS=""

# ---------------------------------------------------------------------------
# Validation and selection (once per configuration, before measuring)
# ---------------------------------------------------------------------------
COMMON=(--sizes "$SIZES" --colls "$COLLS" --budget "$BUDGET")
if ((SMOKE)); then
    VAL_ARGS=(--sizes "$SIZES" --colls "$COLLS" -c --root-shift --iters 5 --warmup 1 --min-iters 2 --budget 0.01)
else
    VAL_ARGS=(--sizes "$SIZES" --colls "$COLLS" -c --root-shift --iters 20 --warmup 2 --min-iters 2 --budget 0.05)
fi
if ((NONBLOCKING)); then
    COMMON+=(--nonblocking --overlap "$OVERLAP")
    VAL_ARGS+=(--nonblocking)
fi
# enabled coll components of MPI_COMM_WORLD, highest priority first
selected_colls() {   # selected_colls ERRFILE -> "cxl:90 tuned:30 ..." (MPI_COMM_WORLD)
    awk '
        /coll:base:comm_select: new communicator:/ {
            cur[$1] = ($0 ~ /MPI_COMM_WORLD/); next }
        cur[$1] && /coll:base:comm_select: selecting .*Enabled/ {
            s = $0; sub(/.*selecting +/, "", s)
            name = s; sub(/,.*/, "", name)
            pr = s; sub(/.*priority +/, "", pr); sub(/,.*/, "", pr)
            if (!((name ":" pr) in seen)) { seen[name ":" pr] = 1; print name ":" pr }
        }' "$1" | sort -t: -k2,2nr -k1,1 | tr '\n' ' ' | sed 's/ $//'
}
msg "np $NP ($( ((OVERSUB)) && echo "OVERSUBSCRIBED: $NCPU cores" || echo "$NCPU cores")), sizes $SIZES, $REPS reps; configurations: ${CONFIGS[*]}; output in $OUT"
MEASURE=()
for label in "${CONFIGS[@]}"; do
    JOB_EXTRA=(--mca coll_base_verbose 20)
    run_job "$label" "check-$label" "$MPI_TO" "${VAL_ARGS[@]}"
    rc=$?
    JOB_EXTRA=()
    sel=$(selected_colls "$JOB_BASE.err")
    # the verbose lines do not belong into the error log one reads
    grep -E 'coll:base:comm_select|coll:cxl|cxl' "$JOB_BASE.err" >"$LOGS/selection-$label.txt"
    grep -vE '^\[[^]]*\] (mca: base:|coll:)' "$JOB_BASE.err" >"$JOB_BASE.err.tmp" && mv "$JOB_BASE.err.tmp" "$JOB_BASE.err"
    printf '%s|%s\n' "$label" "$sel" >>"$OUT/selection.txt"
    [[ -z $EXPECTED_ROWS && $rc == 0 ]] && EXPECTED_ROWS=$(csv_rows "$JOB_BASE.csv")
    wrong=$(awk -F, 'NR > 1 && NF == 12 { s += $10 } END { print s + 0 }' "$JOB_BASE.csv")
    libcalls=$(awk -F, 'NR > 1 && NF == 12 && $11 > 0 { s += $11 } END { print s + 0 }' "$JOB_BASE.csv")
    awk -F, -v OFS=, -v l="$label" 'NR > 1 && NF == 12 { print l, $1, $2, $10, $11, $12 }' \
        "$JOB_BASE.csv" >>"$OUT/validation.csv"
    top=${sel%% *}
    if ((rc != 0)) && ((wrong == 0)); then
        why=$(job_why "$rc" "$JOB_BASE" "$MPI_TO")
        msg "  $label: check run FAILED ($why); raw: ${JOB_BASE#"$OUT"/}.{csv,err}; not measured"
        set_status "$label" failed "check run failed: $why"
    elif ((wrong > 0)); then
        msg "  $label: check run found $wrong WRONG elements (raw: ${JOB_BASE#"$OUT"/}.err); not measured"
        set_status "$label" failed "-c found $wrong wrong elements (see validation.csv, ${JOB_BASE#"$OUT"/}.err)"
    elif [[ $label == cxl* && ${top%%:*} != cxl ]]; then
        msg "  $label: coll/cxl was NOT selected on MPI_COMM_WORLD (enabled: ${sel:-none}; logs/selection-$label.txt); not measured"
        set_status "$label" failed "coll/cxl not selected on MPI_COMM_WORLD (enabled, by priority: ${sel:-none}); see logs/selection-$label.txt"
    elif [[ $label == cxl* ]] && ((libcalls == 0)); then
        msg "  $label: coll/cxl selected, but its library ran no call (MPI_T coll_cxl_calls; raw: ${JOB_BASE#"$OUT"/}.csv); not measured"
        set_status "$label" failed "coll/cxl selected, but its library ran no call (MPI_T counter coll_cxl_calls)"
    else
        msg "  $label: results right (-c, $(csv_rows "$JOB_BASE.csv") rows, ${JOB_SECS}s); coll components: $sel"
        MEASURE+=("$label")
    fi
done

# ---------------------------------------------------------------------------
# Measured repetitions, alternating
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
wait_idle() {   # sets BUSY: the busy share right before the run
    local t0=$SECONDS said=0
    BUSY=$(cpu_busy)
    ((WAIT_IDLE > 0)) || return 0
    while ((BUSY > WAIT_IDLE && SECONDS - t0 < WAIT_MAX)); do
        ((said)) || msg "    waiting for the CPUs to be at most $WAIT_IDLE % busy (now $BUSY %, at most ${WAIT_MAX}s)"
        said=1
        sleep 2
        BUSY=$(cpu_busy)
    done
    ((BUSY > WAIT_IDLE)) && msg "    still $BUSY % busy after ${WAIT_MAX}s: running anyway"
    return 0
}
# The cache-line round trip between the two cores right before each run:
# on a VM it changes while the host moves the vCPUs (this 2-vCPU VM flips
# between ~110 and ~450 ns), and every short collective pays it
rtt_probe() {   # sets RTT (ns, median of 21 chunks of 2000 round trips)
    RTT=$(timeout -k 2 10 "$BIN/limits" --sizes 8K --ms 1 --trials 1 \
              --chunks 21 --cpu-a 0 --cpu-b "$((NCPU > 1 ? 1 : 0))" 2>/dev/null |
          awk -F, '$1 == "cacheline_rt" { printf "%.0f", $3 }')
    [[ -n $RTT ]] || RTT=NA
}
wait_rtt() {    # sets RTT: the round trip right before the run
    local t0=$SECONDS said=0
    rtt_probe
    ((WAIT_RTT > 0)) || return 0
    while [[ $RTT == NA || ${RTT%.*} -gt $WAIT_RTT ]] && ((SECONDS - t0 < WAIT_MAX)); do
        ((said)) || msg "    waiting for a line round trip of at most $WAIT_RTT ns (now $RTT ns, at most ${WAIT_MAX}s)"
        said=1
        sleep 1
        rtt_probe
    done
    [[ $RTT == NA || ${RTT%.*} -gt $WAIT_RTT ]] &&
        msg "    round trip still $RTT ns after ${WAIT_MAX}s: running anyway"
    return 0
}
# The hand-written reference (perftest/ref_coll.c): the latency targets'
# patterns between two threads with nothing but cache lines, timed as
# coll_bench times MPI's, once per repetition after the configurations
# (the VM state changes between repetitions): the sizes of the list up to
# 256 B, where one flag and the lines beside it are the whole transfer
# (ref_coll --max-size; np = 2 only, none for a MIN:MAX range)
REF=0
((NP == 2)) && [[ $SIZES != *:* ]] && REF=1
REF_ARGS=(--sizes "$SIZES" --max-size 256 --trials 1
          --iters "$( ((SMOKE)) && echo 2000 || echo 100000)"
          --cpu-a 0 --cpu-b "$((NCPU > 1 ? 1 : 0))")
run_ref() {     # REP: ref_coll once, a row in runs.csv
    local rep=$1 t0=$SECONDS rc
    wait_idle
    load1=$(cut -d' ' -f1 /proc/loadavg)
    wait_rtt
    timeout -k 2 120 "$BIN/ref_coll" "${REF_ARGS[@]}" >"$RAW/ref_coll-r$rep.csv" \
        2>"$RAW/ref_coll-r$rep.err"
    rc=$?
    printf '%s,%s,%s,%s,%s,%s,%s\n' hand-written "$rep" "$((SECONDS - t0))" "$rc" "$BUSY" \
        "$load1" "$RTT" >>"$OUT/runs.csv"
    if ((rc != 0)); then
        msg "  FAILED hand-written reference r$rep (exit $rc): $(head -n1 "$RAW/ref_coll-r$rep.err")"
    else
        msg "  rep $rep/$REPS hand-written reference (ref_coll, sizes up to 256 B): $((SECONDS - t0))s (line round trip $RTT ns)"
    fi
}
echo "config,rep,seconds,rc,cpu_busy_pct,load1,rtt_ns" >"$OUT/runs.csv"
RUN_ARGS=("${COMMON[@]}")
((SMOKE)) && RUN_ARGS+=(-c --iters 20 --warmup 2 --min-iters 2)
msg "measuring: ${MEASURE[*]:-nothing} x $REPS reps (alternating)"
declare -A FAILS=() TIMED_OUT=()
for ((rep = 1; rep <= REPS; ++rep)); do
    for label in "${MEASURE[@]}"; do
        if [[ -n ${TIMED_OUT[$label]:-} ]]; then
            FAILS[$label]="${FAILS[$label]}; r$rep: not run after a timeout"
            continue
        fi
        wait_idle
        load1=$(cut -d' ' -f1 /proc/loadavg)
        wait_rtt
        run_job "$label" "$label-r$rep" "$MPI_TO" "${RUN_ARGS[@]}" --rep "$rep"
        rc=$?
        printf '%s,%s,%s,%s,%s,%s,%s\n' "$label" "$rep" "$JOB_SECS" "$rc" "$BUSY" "$load1" \
            "$RTT" >>"$OUT/runs.csv"
        append_samples "$label" "$rep" "$JOB_BASE.csv"
        n=$(csv_rows "$JOB_BASE.csv")
        if ((rc != 0)); then
            why=$(job_why "$rc" "$JOB_BASE" "$MPI_TO")
            msg "  FAILED $label r$rep ($why; $n rows); raw: ${JOB_BASE#"$OUT"/}.{csv,err}"
            FAILS[$label]="${FAILS[$label]:+${FAILS[$label]}; }r$rep: $why"
            ((rc == 124 || rc == 137)) && TIMED_OUT[$label]=1
        else
            msg "  rep $rep/$REPS $label: $n rows in ${JOB_SECS}s (CPUs $BUSY % busy before, load $load1, line round trip $RTT ns)"
        fi
    done
    ((REF)) && run_ref "$rep"
done
for label in "${!FAILS[@]}"; do
    printf '%s|%s\n' "$label" "${FAILS[$label]}" >>"$OUT/failures.txt"
done
[[ -n $EXPECTED_ROWS ]] && printf 'expected_rows=%s\n' "$EXPECTED_ROWS" >>"$OUT/meta.env"

# ---------------------------------------------------------------------------
# Machine limits: memcpy bandwidth, cache-line round trip, cross-core copies
# ---------------------------------------------------------------------------
LIMIT_ARGS=(--sizes 8192,65536,1048576,4194304,67108864 --cpu-a 0 --cpu-b "$((NCPU > 1 ? 1 : 0))")
# the floors of the report: cross-core copies of the sizes measured (a
# MIN:MAX range is coll_bench's own syntax; limits gets the list only)
[[ $SIZES == *:* ]] || LIMIT_ARGS+=(--xread "$SIZES")
((SMOKE)) && LIMIT_ARGS+=(--ms 20 --trials 3 --chunks 5)
msg "limits: memcpy and cache-line round trip"
timeout -k 5 120 "$BIN/limits" "${LIMIT_ARGS[@]}" >"$RAW/limits.csv" 2>"$RAW/limits.err" ||
    msg "  limits failed: $(head -n1 "$RAW/limits.err")"

printf 'load_end=%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.env"
printf 'duration_s=%s\n' "$((SECONDS - T_START))" >>"$OUT/meta.env"

write_status

# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------
trap - EXIT
cleanup
msg "pools destroyed; writing the report"
"$PY" "$SCRIPT_DIR/coll_report.py" "$OUT" || die "coll_report.py failed"
if ((HAVE_GNUPLOT)); then
    (cd "$PLOTS" && gnuplot plots.gp) >"$LOGS/gnuplot.log" 2>&1 ||
        msg "gnuplot failed (see $LOGS/gnuplot.log); the tables are complete"
else
    msg "gnuplot not found (Debian package gnuplot-nox): no PNG plots; data in $PLOTS"
fi
msg "done in $((SECONDS - T_START))s: $OUT/report.md, $OUT/results.csv, $PLOTS/"
cat "$OUT/report.md"
