#!/usr/bin/env bash
#
# run-bench.sh - side-by-side benchmarks of the "cxl" UCX transport against
# the transports UCX users have today (posix, sysv, cma, tcp, sm), at the
# UCT, UCP and MPI layers, plus the machine's own limits.
#
# One command runs the whole matrix and writes into the output folder:
#   results.csv    one row per figure x transport x variant x unit:
#                  figure,layer,transport,variant,unit,better,rep1..repN,
#                  median,min,max,ok_reps,note
#   report.md      machine, targets (met/missed, with the numbers),
#                  side-by-side tables, n/a and failures (also printed)
#   plots/*.png    ratio bar charts, bandwidth/latency vs size (gnuplot)
#   raw/           every ucx_perftest / mpirun / limits output, batch files
#   logs/          capabilities (ucx_info -d), UCP lanes (ucx_info -e)
#
# Method
#   * every figure is measured for cxl and every peer ALTERNATING
#     (cxl posix sysv ... cxl posix sysv ...), --reps times; medians with
#     the min-max spread are reported, and the ratio cxl/peer per figure.
#   * UCT and UCP figures run as two processes: a server
#     `ucx_perftest -p PORT -c 0` and a client
#     `ucx_perftest 127.0.0.1 -p PORT -c 1` (pinned to the two cores), a
#     fresh port for every pair, `timeout` around each.  Figures of one
#     family (e.g. all get sizes) run in one pair via a batch file (-b).
#     A pair that fails or times out records every figure it did not
#     finish as FAILED for that repetition; nothing is dropped silently.
#   * figures a transport cannot do (from `ucx_info -d`) are not run and
#     are reported as "n/a (reason)".
#   * a private pool is created for the run and destroyed at the end.
#   * UCT cxl runs use UCX_CXL_ALLOC=md: ucx_perftest's buffers come from
#     the cxl MD, i.e. the pool.
#   * cxl is measured twice: "cxl" (UCX_CXL_COHERENCE=hw, the CPU keeps the
#     pool coherent) and "cxl-sw" (UCX_CXL_COHERENCE=sw on a second private
#     pool, a real /dev/shm file created with --coherence sw --hosts 1):
#     every cross-host write is written back (CLWB/CLFLUSHOPT + fence) and
#     every read of another host's data is preceded by a flush.  RMA and
#     atomics are offered (not get_short); with one host partition both
#     processes are on the memory owner's host, so they use plain loads,
#     stores and CPU atomics as in hw mode.  The path across hosts, through
#     the owner, is "cxl-xh": a third pool file with two host partitions,
#     the server on host 0 and the client on host 1 (UCX_CXL_HOST_INDEX);
#     it runs the UCP RMA family of pool buffers (ucp_put_bw, ucp_get,
#     ucp_fadd; and rma_bench.c's put/get, whose target keeps progressing,
#     since ucx_perftest's responders do not).  The ratio cxl-sw/cxl is
#     the cost of software coherence
#     on this CPU; cxl-xh/cxl that of sw RMA and atomics across hosts.
#   * "cxl-emu" (UCX_CXL_POOL=emulate-nc:POOL, every process its own
#     emulated host) runs a few UCP figures with small iteration counts; its
#     numbers measure the emulator's memcpy, not hardware (--no-emu: skip).
#   * MPI (perftest/mpi_bench.c, Open MPI pml/osc ucx, 2 ranks) runs four
#     configurations alternately: UCX_TLS=cxl; the README's single-host
#     line "cxl+cma" (UCX_TLS=cxl,cma UCX_CXL_RKEY_PTR=yes,
#     UCX_ALLOC_PRIO=md:cxl,...: cma's single copy for ordinary rendezvous
#     buffers); UCX_TLS=posix (the
#     ordinary-buffer peer of cxl); UCX_TLS=sm.  The report's targets:
#     cxl >= posix and cxl+cma >= sm in bandwidth (64 KiB-4 MiB), cxl+cma
#     <= sm in latency (8 B-4 MiB).
#   * nothing here asserts timings; it measures and reports.
#
# Usage: perftest/run-bench.sh [--quick] [--reps N] [--out DIR]
#                              [--builddir DIR] [--timeout S] [--no-sw]
#                              [--no-emu] [--help]
#
set -uo pipefail

PROG=run-bench
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$SCRIPT_DIR/.." && pwd)

QUICK=0
REPS=""
OUT=""
BUILDDIR=""
BATCH_TIMEOUT=""
CXL_ENV_STR=""
SW=1
EMU=1

usage() {
    cat <<EOF
Usage: ${0##*/} [--quick] [--reps N] [--out DIR] [--builddir DIR] [--timeout S]
                    [--cxl-env "VAR=VALUE ..."] [--no-sw] [--no-emu]

Runs the side-by-side benchmark matrix (UCT, UCP, MPI, machine limits) of
the cxl transport against posix, sysv, cma, tcp and sm, and writes
results.csv, report.md and PNG plots into the output folder; prints the
report.  cxl runs twice: hardware-coherent ("cxl") and software-coherent
("cxl-sw", UCX_CXL_COHERENCE=sw on a real pool file; sw/hw ratios in
sw_hw.csv and the report), the UCP RMA of pool buffers across two sw
host partitions ("cxl-xh": through the memory's owner; also with rma_bench,
whose target keeps progressing), plus a few UCP figures on the emulate-nc
emulator ("cxl-emu", a separate table: the emulator's speed, not hardware).
MPI (hw only) runs UCX_TLS=cxl against UCX_TLS=posix, and the README's
single-host line ("cxl+cma": UCX_TLS=cxl,cma) against UCX_TLS=sm.

  --quick         3 repetitions, fewer sizes and iterations (project demo;
                  about 4 minutes on a busy 2-vCPU VM; the default about 10, more
                  when the machine is busy)
  --reps N        repetitions per figure (default 5; --quick: 3); at least 1
  --out DIR       output folder (default perftest/out/<date>-<time>)
  --builddir DIR  the ucx-cxl build folder holding .libs/libuct_cxl.so and
                  cxlpool (default: install the dependencies with
                  contrib/setup-deps.sh and build build-release/ with
                  contrib/build.sh, as on a fresh clone)
  --timeout S     first-repetition timeout of one server/client pair in
                  seconds (default 90; --quick 45); later repetitions use
                  3x the longest earlier run of the same pair + 10 s; a pair
                  that timed out twice is not run again (recorded FAILED)
  --cxl-env STR   extra environment for every cxl run (UCT, UCP, MPI, the
                  residency probe), e.g. "UCX_CXL_REG_ANY=y"; recorded in
                  the report
  --no-sw         do not measure cxl-sw (nor cxl-emu)
  --no-emu        do not measure cxl-emu
  -h, --help      this text
EOF
}

die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }

while (($#)); do
    case $1 in
        --quick) QUICK=1 ;;
        --reps) [[ $# -ge 2 ]] || die "--reps needs a value"; REPS=$2; shift ;;
        --reps=*) REPS=${1#*=} ;;
        --out) [[ $# -ge 2 ]] || die "--out needs a value"; OUT=$2; shift ;;
        --out=*) OUT=${1#*=} ;;
        --builddir) [[ $# -ge 2 ]] || die "--builddir needs a value"; BUILDDIR=$2; shift ;;
        --builddir=*) BUILDDIR=${1#*=} ;;
        --timeout) [[ $# -ge 2 ]] || die "--timeout needs a value"; BATCH_TIMEOUT=$2; shift ;;
        --timeout=*) BATCH_TIMEOUT=${1#*=} ;;
        --cxl-env) [[ $# -ge 2 ]] || die "--cxl-env needs a value"; CXL_ENV_STR=$2; shift ;;
        --cxl-env=*) CXL_ENV_STR=${1#*=} ;;
        --no-sw) SW=0; EMU=0 ;;
        --no-emu) EMU=0 ;;
        -h | --help) usage; exit 0 ;;
        *) printf '%s: unknown option %q (see --help)\n' "$PROG" "$1" >&2; exit 2 ;;
    esac
    shift
done

if [[ -z $REPS ]]; then
    REPS=$((QUICK ? 3 : 5))
fi
[[ $REPS =~ ^[0-9]+$ ]] && ((REPS >= 1)) || die "--reps must be a positive integer"
if [[ -z $BATCH_TIMEOUT ]]; then
    BATCH_TIMEOUT=$((QUICK ? 45 : 90))
fi
[[ $BATCH_TIMEOUT =~ ^[0-9]+$ ]] && ((BATCH_TIMEOUT >= 5)) || die "--timeout must be an integer >= 5"
read -r -a CXL_ENV <<<"$CXL_ENV_STR"
for v in "${CXL_ENV[@]}"; do
    [[ $v =~ ^[A-Za-z_][A-Za-z0-9_]*=.*$ ]] || die "--cxl-env: '$v' is not VAR=VALUE"
done

# ---------------------------------------------------------------------------
# Tools and inputs
# ---------------------------------------------------------------------------
if [[ -z $BUILDDIR ]]; then
    "$REPO_DIR/contrib/setup-deps.sh" >&2 || die "contrib/setup-deps.sh failed"
    BUILDDIR=$("$REPO_DIR/contrib/build.sh" release) || die "contrib/build.sh release failed"
fi
BUILDDIR=$(cd "$BUILDDIR" 2>/dev/null && pwd) || die "build folder '$BUILDDIR' does not exist"
MODULE_SRC="$BUILDDIR/.libs/libuct_cxl.so"
[[ -f $MODULE_SRC ]] || die "$MODULE_SRC not found; build the project first (or pass --builddir)"
CXLPOOL="$BUILDDIR/cxlpool"
[[ -x $CXLPOOL ]] || die "$CXLPOOL not found; build the project first (or pass --builddir)"
PY=/usr/bin/python3
for t in ucx_perftest ucx_info mpirun mpicc gcc timeout awk "$PY"; do
    command -v "$t" >/dev/null 2>&1 || die "'$t' not found (contrib/setup-deps.sh installs what the project needs)"
done
HAVE_GNUPLOT=0
command -v gnuplot >/dev/null 2>&1 && HAVE_GNUPLOT=1
NCPU=$(nproc 2>/dev/null || echo 1)
((NCPU >= 2)) || die "needs at least 2 CPUs (ucx_perftest -c 0 / -c 1); this machine has $NCPU"

if [[ -z $OUT ]]; then
    OUT="$SCRIPT_DIR/out/$(date +%Y%m%d-%H%M%S)"
fi
mkdir -p "$OUT" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)
RAW="$OUT/raw"
LOGS="$OUT/logs"
BIN="$OUT/bin"
PLOTS="$OUT/plots"
mkdir -p "$RAW" "$LOGS" "$BIN" "$PLOTS"
SAMPLES="$RAW/samples.csv"
: >"$SAMPLES"
: >"$RAW/figures.txt"   # layer|figure in definition order (for the report)
RUNLOG="$OUT/run.log"
: >"$RUNLOG"
CMDLOG="$RAW/commands.log"
: >"$CMDLOG"

T_START=$SECONDS
msg() { printf '%s: [%4ds] %s\n' "$PROG" "$((SECONDS - T_START))" "$*" | tee -a "$RUNLOG" >&2; }

# A clean UCX environment: the caller's UCX_* settings would change what is
# measured.  Every run below sets what it needs explicitly.
while read -r v; do
    unset "$v"
done < <(compgen -e | grep -E '^UCX_' || true)
unset LD_PRELOAD

# Snapshot of the module: the build folder may be rebuilt while we run.
MODULE="$BIN/libuct_cxl.so"
cp -f -- "$MODULE_SRC" "$MODULE" || die "cannot copy $MODULE_SRC"
MODULE_SHA=$(sha256sum "$MODULE" | cut -d' ' -f1)

# Helper programs, built into the output folder.
gcc -O2 -Wall -pthread -I"$SCRIPT_DIR/../include" -o "$BIN/limits" "$SCRIPT_DIR/limits.c" \
    "$SCRIPT_DIR/../src/coherence/cxl_coherence.c" >"$LOGS/build-limits.log" 2>&1 ||
    die "building limits.c failed (see $LOGS/build-limits.log)"
mpicc -O2 -Wall -o "$BIN/mpi_bench" "$SCRIPT_DIR/mpi_bench.c" >"$LOGS/build-mpi_bench.log" 2>&1 ||
    die "building mpi_bench.c failed (see $LOGS/build-mpi_bench.log)"
gcc -O2 -Wall -o "$BIN/rma_bench" "$SCRIPT_DIR/rma_bench.c" -lucp -lucs >"$LOGS/build-rma_bench.log" 2>&1 ||
    die "building rma_bench.c failed (see $LOGS/build-rma_bench.log)"

# ---------------------------------------------------------------------------
# Private pool
# ---------------------------------------------------------------------------
POOL_TAG="ucx-cxl-bench-$$-$RANDOM"
POOL="/dev/shm/$POOL_TAG.pool"
DEV=$(basename "$POOL" .pool)
# software coherence on a real (directly mapped) pool file: one host
# partition, so that only the coherence mode differs from $POOL
POOL_SW="/dev/shm/$POOL_TAG-sw.pool"
DEV_SW=$(basename "$POOL_SW" .pool)
# the strict non-coherent emulator (every process its own emulated host)
POOL_EMU="/dev/shm/$POOL_TAG-emu.pool"
# software coherence across hosts: a real pool file with two host
# partitions, the server writing partition 0 and the client partition 1
# (UCX_CXL_HOST_INDEX), so RMA and atomics go through the memory's owner
POOL_XH="/dev/shm/$POOL_TAG-xh.pool"
declare -A SERVER_PIDS=()   # pid -> 1: our running ucx_perftest servers
cleanup() {
    local p
    for p in "${!SERVER_PIDS[@]}"; do
        kill -TERM "$p" 2>/dev/null
    done
    for p in "$POOL" "$POOL_SW" "$POOL_EMU" "$POOL_XH"; do
        if [[ -e $p ]]; then
            "$CXLPOOL" destroy "$p" >>"$LOGS/pool.log" 2>&1 ||
                "$CXLPOOL" destroy "$p" --force >>"$LOGS/pool.log" 2>&1 ||
                rm -f -- "$p"
        fi
    done
}
trap cleanup EXIT
trap 'msg "interrupted"; exit 130' INT TERM
"$CXLPOOL" create "$POOL" --size 1G >"$LOGS/pool.log" 2>&1 ||
    die "cxlpool create $POOL failed: $(tail -n1 "$LOGS/pool.log")"
msg "private pool $POOL (UCT device '$DEV'); output in $OUT"
if ((SW)); then
    if "$CXLPOOL" create "$POOL_SW" --size 1G --coherence sw --hosts 1 >>"$LOGS/pool.log" 2>&1; then
        msg "private sw pool $POOL_SW (UCT device '$DEV_SW', UCX_CXL_COHERENCE=sw)"
    else
        msg "cxlpool create $POOL_SW --coherence sw failed: $(tail -n1 "$LOGS/pool.log"); no cxl-sw/cxl-emu figures"
        SW=0 EMU=0
    fi
fi
XH=$SW
if ((XH)); then
    if "$CXLPOOL" create "$POOL_XH" --size 1G --coherence sw --hosts 2 >>"$LOGS/pool.log" 2>&1; then
        msg "private two-host sw pool $POOL_XH (cxl-xh: server host 0, client host 1)"
    else
        msg "cxlpool create $POOL_XH --coherence sw --hosts 2 failed: $(tail -n1 "$LOGS/pool.log"); no cxl-xh figures"
        XH=0
    fi
fi
if ((EMU)); then
    if "$CXLPOOL" create "$POOL_EMU" --size 1G --coherence sw >>"$LOGS/pool.log" 2>&1; then
        msg "private emulator pool emulate-nc:$POOL_EMU"
    else
        msg "cxlpool create $POOL_EMU --coherence sw failed: $(tail -n1 "$LOGS/pool.log"); no cxl-emu figures"
        EMU=0
    fi
fi

BASE_ENV=(LD_PRELOAD="$MODULE" UCX_CXL_POOL="$POOL")
# What makes a cxl label: the environment every cxl run of that label gets
# last (after --cxl-env), so that it cannot be overridden by accident.
SW_ENV=(UCX_CXL_POOL="$POOL_SW" UCX_CXL_COHERENCE=sw)
EMU_ENV=(UCX_CXL_POOL="emulate-nc:$POOL_EMU" UCX_CXL_COHERENCE=sw)
XH_ENV=(UCX_CXL_POOL="$POOL_XH" UCX_CXL_COHERENCE=sw)
label_env() {   # label_env LABEL -> words on stdout
    case $1 in
        cxl) echo "UCX_CXL_COHERENCE=hw" ;;
        cxl-sw) echo "${SW_ENV[*]}" ;;
        cxl-emu) echo "${EMU_ENV[*]}" ;;
        cxl-xh) echo "${XH_ENV[*]}" ;;
    esac
}
# side_env LABEL srv|cli -> what only one side of a pair gets
side_env() {
    [[ $1 == cxl-xh ]] || return 0
    if [[ $2 == srv ]]; then echo "UCX_CXL_HOST_INDEX=0"; else echo "UCX_CXL_HOST_INDEX=1"; fi
}
is_cxl() { [[ $1 == cxl || $1 == cxl-* ]]; }

# ---------------------------------------------------------------------------
# Machine record
# ---------------------------------------------------------------------------
{
    printf 'date=%s\n' "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    printf 'host=%s\n' "$(hostname)"
    printf 'cpu=%s\n' "$(awk -F': *' '/^model name/{print $2; exit}' /proc/cpuinfo)"
    printf 'ncpu=%s\n' "$NCPU"
    printf 'kernel=%s\n' "$(uname -srm)"
    printf 'ucx=%s\n' "$(ucx_info -v | sed -n 's/^# Version *//p')"
    printf 'ompi=%s\n' "$(mpirun --version 2>/dev/null | head -n1)"
    printf 'hypervisor=%s\n' "$(lscpu 2>/dev/null | awk -F': *' '/Hypervisor vendor/{print $2}')"
    printf 'module=%s\n' "$MODULE_SRC"
    printf 'module_sha256=%s\n' "$MODULE_SHA"
    printf 'pool=%s\n' "$POOL"
    printf 'sw=%s\n' "$SW"
    printf 'pool_sw=%s\n' "$( ((SW)) && echo "$POOL_SW")"
    printf 'emu=%s\n' "$EMU"
    printf 'pool_emu=%s\n' "$( ((EMU)) && echo "emulate-nc:$POOL_EMU")"
    printf 'pool_xh=%s\n' "$( ((XH)) && echo "$POOL_XH")"
    printf 'mode=%s\n' "$( ((QUICK)) && echo quick || echo default)"
    printf 'reps=%s\n' "$REPS"
    printf 'load_start=%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
    printf 'gnuplot=%s\n' "$HAVE_GNUPLOT"
    printf 'cxl_env=%s\n' "${CXL_ENV[*]}"
} >"$OUT/meta.env"

# ---------------------------------------------------------------------------
# Capabilities (what each UCT transport can do) and UCP lanes
# ---------------------------------------------------------------------------
env "${BASE_ENV[@]}" "${CXL_ENV[@]}" $(label_env cxl) ucx_info -d >"$LOGS/ucx_info-d.txt" 2>&1
if ((SW)); then
    # cxl-sw: what the transport advertises with software coherence
    env "${BASE_ENV[@]}" "${CXL_ENV[@]}" $(label_env cxl-sw) ucx_info -d >"$LOGS/ucx_info-d-sw.txt" 2>&1
fi
# "tl dev cap maxbytes" (maxbytes: a number, or inf); atomics only with 64-bit
caps_of() { awk '
    function bytes(s,   n, u) {
        if (s ~ /^unlimited/) return "inf"
        if (s !~ /^<= *[0-9]/) return "inf"
        sub(/^<= */, "", s); sub(/[ ,].*$/, "", s)
        n = s + 0; u = substr(s, length(s))
        if (u == "K") n *= 1024; else if (u == "M") n *= 1048576; else if (u == "G") n *= 1073741824
        if (n > 1e15) return "inf"
        return sprintf("%.0f", n)
    }
    /^#[ \t]+Transport:/ { tl = $3 }
    /^#[ \t]+Device:/    { dev = $3 }
    /^#[ \t]+[a-z_]+:/ && tl != "" {
        key = $2; sub(/:$/, "", key)
        if (key ~ /^atomic_/) { if ($0 ~ /64 bit/) print tl, dev, key, "8"; next }
        if (key ~ /^(am|put|get)_(short|bcopy|zcopy)$/) {
            val = $0; sub(/^#[ \t]+[a-z_]+: */, "", val)
            print tl, dev, key, bytes(val)
        }
    }' "$@"; }
caps_of "$LOGS/ucx_info-d.txt" | sort -u >"$LOGS/caps.txt"
grep -q "^cxl $DEV " "$LOGS/caps.txt" ||
    die "ucx_info -d with the module preloaded shows no cxl/$DEV transport (see $LOGS/ucx_info-d.txt)"
if ((SW)); then
    caps_of "$LOGS/ucx_info-d-sw.txt" | awk -v d="$DEV_SW" '$1 == "cxl" && $2 == d' >>"$LOGS/caps.txt"
    if ! grep -q "^cxl $DEV_SW " "$LOGS/caps.txt"; then
        msg "ucx_info -d with UCX_CXL_COHERENCE=sw shows no cxl/$DEV_SW transport (see $LOGS/ucx_info-d-sw.txt); no cxl-sw/cxl-emu figures"
        SW=0 EMU=0
        sed -i 's/^sw=.*/sw=0/; s/^emu=.*/emu=0/' "$OUT/meta.env"
    fi
fi

# cap_check TL DEV CAP SIZE [LABEL]: empty if the transport can do it, else
# the reason
cap_check() {
    local max who="$1/$2"
    [[ $1 == cxl ]] && who=cxl   # its device is the (private) pool's name
    max=$(awk -v t="$1" -v d="$2" -v c="$3" '$1 == t && $2 == d && $3 == c {print $4; exit}' "$LOGS/caps.txt")
    if [[ -z $max && ${5:-} == cxl-sw ]]; then
        echo "not advertised in sw mode: $3"
    elif [[ -z $max ]]; then
        echo "$who has no $3 (ucx_info -d)"
    elif [[ $max != inf ]] && (($4 > max)); then
        echo "$who $3 is limited to $max bytes (ucx_info -d)"
    fi
}

# UCT transports: label transport device
UCT_TLS=("cxl cxl $DEV")
((SW)) && UCT_TLS+=("cxl-sw cxl $DEV_SW")
UCT_TLS+=("posix posix memory" "sysv sysv memory" "cma cma memory" "tcp tcp lo")
# UCP configurations: label|environment (cxl labels also get label_env)
UCP_CFGS=(
    "cxl|UCX_TLS=cxl"
)
((SW)) && UCP_CFGS+=("cxl-sw|UCX_TLS=cxl")
((EMU)) && UCP_CFGS+=("cxl-emu|UCX_TLS=cxl")
((XH)) && UCP_CFGS+=("cxl-xh|UCX_TLS=cxl")
UCP_CFGS+=(
    "posix|UCX_TLS=posix"
    "sysv|UCX_TLS=sysv"
    "cma+posix|UCX_TLS=cma,posix"
    "tcp|UCX_TLS=tcp UCX_NET_DEVICES=lo"
    "sm|UCX_TLS=sm"
)
for c in "${UCP_CFGS[@]}"; do
    label=${c%%|*}
    read -r -a cenv <<<"${c#*|}"
    if is_cxl "$label"; then
        cenv+=("${CXL_ENV[@]}")
        read -r -a lenv <<<"$(label_env "$label")"
        cenv+=("${lenv[@]}")
    fi
    env "${BASE_ENV[@]}" "${cenv[@]}" $(side_env "$label" srv) ucx_info -e -u t >"$LOGS/ucp-lanes-$label.txt" 2>&1
done
# the MPI single-host line (UCX_TLS=cxl,cma): cxl's am lane, a cma rma_bw lane
env "${BASE_ENV[@]}" "${CXL_ENV[@]}" UCX_TLS=cxl,cma UCX_CXL_RKEY_PTR=yes ucx_info -e -u t \
    >"$LOGS/ucp-lanes-cxl+cma.txt" 2>&1

# ---------------------------------------------------------------------------
# Sizes and iteration counts
# ---------------------------------------------------------------------------
if ((QUICK)); then
    BW_BUDGET=$((64 << 20))      # bytes per bandwidth figure
    LAT_N=10000 MR_N=50000 MIN_N=10
    PUT_SIZES=(65536 1048576 4194304)
    GET_SIZES=(8 65536 1048576 4194304)
    TAG_LAT_SIZES=(8 1048576)
    TAG_BW_SIZES=(8 65536 1048576 4194304)
    UCP_PUT_SIZES=(65536 1048576 4194304)
    UCP_GET_SIZES=(8 1048576 4194304)
    MPI_ARGS=(--quick --sizes 8,64K,1M,4M)
    LIMIT_ARGS=(--trials 7 --chunks 31)
else
    BW_BUDGET=$((256 << 20))
    LAT_N=50000 MR_N=200000 MIN_N=20
    PUT_SIZES=(65536 1048576 4194304)
    GET_SIZES=(8 256 4096 65536 1048576 4194304)
    TAG_LAT_SIZES=(8 1024 65536 1048576 4194304)
    TAG_BW_SIZES=(8 1024 65536 1048576 4194304)
    UCP_PUT_SIZES=(65536 1048576 4194304)
    UCP_GET_SIZES=(8 65536 1048576 4194304)
    MPI_ARGS=()
    LIMIT_ARGS=()
fi
LIMIT_SIZES="8192,65536,1048576,4194304,67108864"

fmt_size() {
    local s=$1
    if ((s >= 1048576 && s % 1048576 == 0)); then echo "$((s / 1048576))MiB"
    elif ((s >= 1024 && s % 1024 == 0)); then echo "$((s / 1024))KiB"
    else echo "${s}B"; fi
}

# iters KIND SIZE DIV -> "-n N -w W"; DIV slows transports down (tcp)
iters() {
    local kind=$1 size=$2 div=$3 n
    case $kind in
        lat) if ((size <= 8192)); then n=$((LAT_N / div))
             else n=$((BW_BUDGET / 4 / size / div)); fi ;;
        mr) n=$((MR_N / div)) ;;
        *) n=$((BW_BUDGET / size / div)); ((n > MR_N)) && n=$MR_N ;;
    esac
    ((n < MIN_N)) && n=$MIN_N
    local w=$((n / 10))
    ((w > 2000)) && w=2000
    ((w < 2)) && w=2
    echo "-n $n -w $w"
}

# ---------------------------------------------------------------------------
# Sample recording
# ---------------------------------------------------------------------------
# samples.csv: figure,layer,transport,variant,unit,better,rep,value,status,note
record() {   # record figure layer transport variant unit better rep value status note
    local note=${10//,/;}
    note=${note//$'\n'/ }
    printf '%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$9" "$note" >>"$SAMPLES"
}

# Emit the metrics of one ucx_perftest CSV result line.
# emit_metrics figure kind layer tl variant rep csvline size
#   csv: name,iters,p50_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr
# MB/s is printed with two decimals only; where the message rate (an
# integer) has more digits (small messages), MB/s is computed from it.
emit_metrics() {
    local fig=$1 kind=$2 layer=$3 tl=$4 var=$5 rep=$6 line=$7 size=${8:-0}
    local f bw mr
    IFS=, read -r -a f <<<"$line"
    bw=$(awk -v b="${f[6]}" -v m="${f[8]}" -v s="$size" \
        'BEGIN { if (s > 0 && m + 0 > 100 * (b + 0)) printf "%.6g", m * s / 1048576; else printf "%s", b + 0 }')
    mr=$(awk -v v="${f[8]}" 'BEGIN{printf "%.6g", v / 1e6}')
    case $kind in
        lat)
            record "$fig" "$layer" "$tl" "$var" "us(p50)" lower "$rep" "${f[2]// /}" ok ""
            record "$fig" "$layer" "$tl" "$var" "us(avg)" lower "$rep" "${f[4]// /}" ok "" ;;
        bw)
            record "$fig" "$layer" "$tl" "$var" "MB/s" higher "$rep" "$bw" ok "" ;;
        mr)
            record "$fig" "$layer" "$tl" "$var" "Mmsg/s" higher "$rep" "$mr" ok "" ;;
        bwmr)
            record "$fig" "$layer" "$tl" "$var" "MB/s" higher "$rep" "$bw" ok ""
            record "$fig" "$layer" "$tl" "$var" "Mmsg/s" higher "$rep" "$mr" ok "" ;;
    esac
}

emit_failed() {   # emit_failed figure kind layer tl variant rep note
    local fig=$1 kind=$2 layer=$3 tl=$4 var=$5 rep=$6 note=$7
    case $kind in
        lat) record "$fig" "$layer" "$tl" "$var" "us(p50)" lower "$rep" "" failed "$note"
             record "$fig" "$layer" "$tl" "$var" "us(avg)" lower "$rep" "" failed "$note" ;;
        bw) record "$fig" "$layer" "$tl" "$var" "MB/s" higher "$rep" "" failed "$note" ;;
        mr) record "$fig" "$layer" "$tl" "$var" "Mmsg/s" higher "$rep" "" failed "$note" ;;
        bwmr) record "$fig" "$layer" "$tl" "$var" "MB/s" higher "$rep" "" failed "$note"
              record "$fig" "$layer" "$tl" "$var" "Mmsg/s" higher "$rep" "" failed "$note" ;;
    esac
}

emit_na() {   # emit_na figure kind layer tl variant reason
    local fig=$1 kind=$2 layer=$3 tl=$4 var=$5 note=$6
    case $kind in
        lat) record "$fig" "$layer" "$tl" "$var" "us(p50)" lower 0 "" na "$note"
             record "$fig" "$layer" "$tl" "$var" "us(avg)" lower 0 "" na "$note" ;;
        bw) record "$fig" "$layer" "$tl" "$var" "MB/s" higher 0 "" na "$note" ;;
        mr) record "$fig" "$layer" "$tl" "$var" "Mmsg/s" higher 0 "" na "$note" ;;
        bwmr) record "$fig" "$layer" "$tl" "$var" "MB/s" higher 0 "" na "$note"
              record "$fig" "$layer" "$tl" "$var" "Mmsg/s" higher 0 "" na "$note" ;;
    esac
}

# ---------------------------------------------------------------------------
# Server/client pairs
# ---------------------------------------------------------------------------
PORT=$((20000 + ($$ * 7 + RANDOM) % 30000))
# tcp_port PORT [STATE]: a local socket on PORT exists (in STATE, e.g. 0A =
# listening, if given)
tcp_port() {
    local hex
    hex=$(printf ':%04X' "$1")
    awk -v p="$hex" -v st="${2:-}" \
        'FNR > 1 && substr($2, length($2) - 4) == p && (st == "" || $4 == st) {f = 1} END {exit !f}' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
port_in_use() { tcp_port "$1"; }
next_port() {
    local tries=0
    while :; do
        PORT=$((PORT + 1))
        ((PORT > 60000)) && PORT=20001
        port_in_use "$PORT" || break
        ((++tries > 1000)) && break
    done
}
listening() { tcp_port "$1" 0A; }

# stall_watch PID FILE: stop a client that printed a UCX error and then
# printed nothing for 5 s (e.g. an operation UCP cannot complete), instead of
# waiting for the pair's timeout; leaves FILE.stalled behind
stall_watch() {
    local pid=$1 f=$2 last=-1 same=0 sz
    while kill -0 "$pid" 2>/dev/null; do
        sleep 1
        sz=$(stat -c %s "$f" 2>/dev/null || echo 0)
        if ((sz == last)) && grep -q 'UCX  ERROR' "$f" 2>/dev/null; then
            if ((++same >= 5)); then
                : >"$f.stalled"
                kill -TERM "$pid" 2>/dev/null
                return
            fi
        else
            same=0
        fi
        last=$sz
    done
}

declare -A BATCH_MAXDUR=()   # key -> longest successful duration (s)
declare -A BATCH_TIMEOUTS=() # key -> how many times it timed out
SEQ=0

# run_batch KEY LAYER TL VARIANT REP ENVSTR BATCHFILE LINESPEC -- perftest args
#   TL: the label recorded (cxl, cxl-sw, cxl-emu, posix, ...)
#   LINESPEC: file with "name|figure|kind" per batch line
run_batch() {
    local key=$1 layer=$2 tl=$3 var=$4 rep=$5 envstr=$6 batch=$7 spec=$8
    shift 9
    local -a penv lenv args=("$@")
    read -r -a penv <<<"$envstr"
    if is_cxl "$tl"; then
        penv+=("${CXL_ENV[@]}")
        read -r -a lenv <<<"$(label_env "$tl")"
        penv+=("${lenv[@]}")
    fi
    local to=$BATCH_TIMEOUT
    if [[ -n ${BATCH_MAXDUR[$key]:-} ]]; then
        to=$((3 * BATCH_MAXDUR[$key] + 10))
        ((to > 3 * BATCH_TIMEOUT)) && to=$((3 * BATCH_TIMEOUT))
    fi
    local name fig kind size line first=""
    if ((${BATCH_TIMEOUTS[$key]:-0} >= 2)); then
        msg "  SKIPPED $key r$rep (timed out in 2 earlier repetitions)"
        while IFS='|' read -r name fig kind size; do
            emit_failed "$fig" "$kind" "$layer" "$tl" "$var" "$rep" \
                "not run: this pair timed out in 2 earlier repetitions"
        done <"$spec"
        return
    fi
    SEQ=$((SEQ + 1))
    local base
    base=$(printf '%s/%04d-%s-r%d' "$RAW" "$SEQ" "${key//[^A-Za-z0-9_.+-]/_}" "$rep")
    cp -f -- "$batch" "$base.batch"
    next_port
    local port=$PORT
    printf '[%s] %s: env %s %s ucx_perftest -p %d -c 0 -b %s %s  //  ... ucx_perftest 127.0.0.1 -p %d -c 1 -v -f -b ... (timeout %ds)\n' \
        "$(date +%T)" "$key r$rep" "${BASE_ENV[*]}" "${penv[*]}" "$port" "$base.batch" "${args[*]}" "$port" "$to" >>"$CMDLOG"

    local t0=$SECONDS
    env "${BASE_ENV[@]}" "${penv[@]}" $(side_env "$tl" srv) timeout -k 5 $((to + 10)) \
        ucx_perftest -p "$port" -c 0 -b "$base.batch" "${args[@]}" >"$base.srv" 2>&1 &
    local spid=$! i
    SERVER_PIDS[$spid]=1
    for ((i = 0; i < 500; ++i)); do
        listening "$port" && break
        kill -0 "$spid" 2>/dev/null || break
        sleep 0.02
    done
    env "${BASE_ENV[@]}" "${penv[@]}" $(side_env "$tl" cli) timeout -k 5 "$to" \
        ucx_perftest 127.0.0.1 -p "$port" -c 1 -v -f -b "$base.batch" "${args[@]}" >"$base.cli" 2>&1 &
    local cpid=$! wpid crc stalled=0
    stall_watch "$cpid" "$base.cli" &
    wpid=$!
    wait "$cpid"
    crc=$?
    kill "$wpid" 2>/dev/null
    wait "$wpid" 2>/dev/null
    if [[ -e $base.cli.stalled ]]; then
        stalled=1
        rm -f -- "$base.cli.stalled"
    fi
    if ((crc != 0)); then
        # the server may spin forever waiting for a dead client
        for ((i = 0; i < 100; ++i)); do
            kill -0 "$spid" 2>/dev/null || break
            sleep 0.05
        done
        kill -TERM "$spid" 2>/dev/null
    fi
    wait "$spid" 2>/dev/null
    local src=$?
    unset "SERVER_PIDS[$spid]"
    local dur=$((SECONDS - t0))
    if ((crc == 0 && src == 0)); then
        if ((dur > ${BATCH_MAXDUR[$key]:-0})); then
            BATCH_MAXDUR[$key]=$dur
        fi
    fi

    local why=""
    if ((stalled)); then
        why="stopped after $dur s: no output for 5 s after a UCX error"
    elif ((crc == 124 || crc == 137)); then
        why="timeout after ${to}s (client rc=$crc)"
        BATCH_TIMEOUTS[$key]=$((${BATCH_TIMEOUTS[$key]:-0} + 1))
    elif ((crc != 0)); then
        why="client rc=$crc"
    elif ((src != 0)); then
        why="server rc=$src"
    fi
    if [[ -n $why ]]; then
        local err
        # also after a timeout: a pair that loops on an error says why
        err=$(grep -h -m1 -E 'ERROR|error|Assertion|Segmentation|abort' "$base.cli" "$base.srv" 2>/dev/null |
            head -n1 | sed -E 's/^\[[^]]*\] *\[[^]]*\] *//' | cut -c1-160)
        [[ -n $err ]] && why="$why: $err"
        msg "  FAILED $key r$rep ($why); raw: ${base#"$OUT"/}.{cli,srv}"
    fi

    while IFS='|' read -r name fig kind size; do
        line=$(grep -E "^$name," "$base.cli" | grep -v '\[thread' | tail -n1)
        if [[ -n $line && $(awk -F, '{print NF}' <<<"$line") -ge 9 ]]; then
            emit_metrics "$fig" "$kind" "$layer" "$tl" "$var" "$rep" "$line" "$size"
        elif [[ -z $first ]]; then
            first=$fig
            emit_failed "$fig" "$kind" "$layer" "$tl" "$var" "$rep" "${why:-no result line in client output}"
        else
            emit_failed "$fig" "$kind" "$layer" "$tl" "$var" "$rep" "not run: '$first' before it in the same pair failed"
        fi
    done <"$spec"
}

# ---------------------------------------------------------------------------
# UCT matrix
# ---------------------------------------------------------------------------
# spec line: "name|figure|kind|args|cap"
uct_family() {   # uct_family FAMILY -> spec lines on stdout
    local s l f
    case $1 in
        all)
            for f in am put get amo; do uct_family "$f"; done
            ;;
        am)
            echo "am_lat_8_short|am_lat 8B short|lat|-t am_lat -D short -s 8 $(iters lat 8 1)|am_short|8"
            echo "am_lat_1k_bcopy|am_lat 1KiB bcopy|lat|-t am_lat -D bcopy -s 1024 $(iters lat 1024 1)|am_bcopy|1024"
            echo "am_bw_8_short|am_bw 8B short|mr|-t am_bw -D short -s 8 $(iters mr 8 1)|am_short|8"
            echo "am_bw_8k_bcopy|am_bw 8KiB bcopy|bw|-t am_bw -D bcopy -s 8192 $(iters bw 8192 1)|am_bcopy|8192"
            ;;
        put)
            echo "put_lat_8_short|put_lat 8B short|lat|-t put_lat -D short -s 8 $(iters lat 8 1)|put_short|8"
            for l in bcopy zcopy; do
                for s in "${PUT_SIZES[@]}"; do
                    echo "put_bw_${s}_$l|put_bw $(fmt_size "$s") $l|bw|-t put_bw -D $l -s $s $(iters bw "$s" 1)|put_$l|$s"
                done
            done
            ;;
        get)
            for l in bcopy zcopy; do
                for s in "${GET_SIZES[@]}"; do
                    local k=bw
                    ((s <= 8)) && k=bwmr
                    echo "get_${s}_$l|get $(fmt_size "$s") $l|$k|-t get -D $l -s $s $(iters bw "$s" 1)|get_$l|$s"
                done
            done
            ;;
        amo)
            echo "add_lat_8|add_lat 8B|lat|-t add_lat -s 8 $(iters lat 8 1)|atomic_add|8"
            echo "fadd_8|fadd 8B|lat|-t fadd -s 8 $(iters lat 8 1)|atomic_fadd|8"
            echo "cswap_8|cswap 8B|lat|-t cswap -s 8 $(iters lat 8 1)|atomic_cswap|8"
            ;;
    esac
}

# tcp is two orders of magnitude slower: fewer iterations
tl_div() { [[ $1 == tcp* ]] && echo 10 || echo 1; }

scale_iters() {   # scale_iters ARGS DIV -> ARGS with -n/-w divided
    local a=$1 div=$2
    ((div == 1)) && { echo "$a"; return; }
    awk -v d="$div" -v m="$MIN_N" '{
        for (i = 1; i <= NF; ++i) {
            if (($i == "-n" || $i == "-w") && i < NF) {
                v = int($(i + 1) / d); if ($i == "-n" && v < m) v = m
                if ($i == "-w" && v < 2) v = 2
                $(i + 1) = v; ++i
            }
        }
        print }' <<<"$a"
}

# One server/client pair per family, transport and repetition; --quick
# runs all UCT (and all UCP) figures of a transport in one pair to save the
# process start-ups.
if ((QUICK)); then UCT_FAMILIES=(all); else UCT_FAMILIES=(am put get amo); fi
msg "UCT: ${#UCT_FAMILIES[@]} families x ${#UCT_TLS[@]} transports x $REPS reps (alternating)"
for fam in "${UCT_FAMILIES[@]}"; do
    # n/a lines (once) and, per transport, the runnable batch
    declare -A FAM_BATCH=() FAM_SPEC=()
    for t in "${UCT_TLS[@]}"; do
        read -r lbl tl dev <<<"$t"
        div=$(tl_div "$lbl")
        bf="$RAW/uct-$fam-$lbl.batch.tmp"
        sf="$RAW/uct-$fam-$lbl.spec.tmp"
        : >"$bf"; : >"$sf"
        while IFS='|' read -r name fig kind args cap size; do
            echo "uct|$fig" >>"$RAW/figures.txt"
            reason=$(cap_check "$tl" "$dev" "$cap" "$size" "$lbl")
            if [[ -z $reason ]]; then
                echo "$name $(scale_iters "$args" "$div")" >>"$bf"
                echo "$name|$fig|$kind|$size" >>"$sf"
            else
                emit_na "$fig" "$kind" uct "$lbl" - "$reason"
            fi
        done < <(uct_family "$fam")
        if [[ -s $bf ]]; then
            FAM_BATCH[$lbl]=$bf
            FAM_SPEC[$lbl]=$sf
        fi
    done
    for ((rep = 1; rep <= REPS; ++rep)); do
        for t in "${UCT_TLS[@]}"; do
            read -r lbl tl dev <<<"$t"
            [[ -n ${FAM_BATCH[$lbl]:-} ]] || continue
            # cxl: buffers from the cxl MD, i.e. the pool, even if the MD
            # registers ordinary memory (UCX_CXL_REG_ANY=y)
            uenv=""
            is_cxl "$lbl" && uenv="UCX_CXL_ALLOC=md"
            run_batch "uct-$fam-$lbl" uct "$lbl" - "$rep" "$uenv" "${FAM_BATCH[$lbl]}" "${FAM_SPEC[$lbl]}" -- \
                -x "$tl" -d "$dev"
        done
    done
    msg "  uct $fam done"
    unset FAM_BATCH FAM_SPEC
done

# ---------------------------------------------------------------------------
# UCP matrix
# ---------------------------------------------------------------------------
ucp_family() {   # ucp_family FAMILY [RMA_DIV]
    local s k n f rdiv=${2:-1}
    case $1 in
        all)
            for f in tag rma; do ucp_family "$f" "$rdiv"; done
            ;;
        tag)
            for s in "${TAG_LAT_SIZES[@]}"; do
                echo "tag_lat_$s|tag_lat $(fmt_size "$s")|lat|-t tag_lat -s $s $(iters lat "$s" 1)"
            done
            for s in "${TAG_BW_SIZES[@]}"; do
                k=bw; ((s <= 8)) && k=bwmr
                echo "tag_bw_$s|tag_bw $(fmt_size "$s")|$k|-t tag_bw -s $s $(iters bw "$s" 1)"
            done
            ;;
        rma)
            for s in "${UCP_PUT_SIZES[@]}"; do
                echo "ucp_put_bw_$s|ucp_put_bw $(fmt_size "$s")|bw|-t ucp_put_bw -s $s $(iters bw "$s" "$rdiv")"
            done
            for s in "${UCP_GET_SIZES[@]}"; do
                k=bw; ((s <= 8)) && k=bwmr
                # without a registered remote buffer UCP emulates get with
                # active messages, about 1 ms per operation: few iterations
                # for small gets
                if ((s <= 8)); then n="-n $((QUICK ? 200 : 500)) -w 10"; else n=$(iters bw "$s" "$rdiv"); fi
                echo "ucp_get_$s|ucp_get $(fmt_size "$s")|$k|-t ucp_get -s $s $n"
            done
            echo "ucp_fadd_8|ucp_fadd 8B|lat|-t ucp_fadd -s 8 $(iters lat 8 1)"
            ;;
    esac
}

# Gets of pool buffers with 8 in flight, cxl and cxl-xh: across sw hosts
# a get waits for one progress call of the owner, and ucx_perftest's
# responder progresses about once per millisecond (in its socket
# barrier's 1 ms polls), which one get at a time measures instead of the
# transport.
deep_gets() {   # deep_gets LABEL VAR FAMILY
    [[ ($1 == cxl || $1 == cxl-xh) && $2 == pool && ($3 == rma || $3 == all) ]] || return 0
    echo "ucp_get_x8_1048576|ucp_get_x8 1MiB|bw|-t ucp_get -s 1048576 -O 8 $(iters bw 1048576 1)"
}

# cxl-emu: a few figures of a family, small iteration counts (the
# emulator copies every written-back / invalidated line through a file;
# its numbers are the emulator's, not hardware's)
emu_family() {   # emu_family FAMILY
    local f
    case $1 in
        all) for f in tag rma; do emu_family "$f"; done ;;
        tag)
            echo "tag_lat_8|tag_lat 8B|lat|-t tag_lat -s 8 -n 2000 -w 100"
            echo "tag_bw_65536|tag_bw 64KiB|bw|-t tag_bw -s 65536 -n 200 -w 10"
            echo "tag_bw_1048576|tag_bw 1MiB|bw|-t tag_bw -s 1048576 -n 40 -w 4"
            ;;
        rma)
            echo "ucp_put_bw_65536|ucp_put_bw 64KiB|bw|-t ucp_put_bw -s 65536 -n 100 -w 10"
            echo "ucp_get_1048576|ucp_get 1MiB|bw|-t ucp_get -s 1048576 -n 20 -w 2"
            echo "ucp_fadd_8|ucp_fadd 8B|lat|-t ucp_fadd -s 8 -n 1000 -w 50"
            ;;
    esac
}

# variant environment for a UCP configuration
ucp_variant_env() {   # ucp_variant_env LABEL VARIANT
    case $2 in
        host) echo "UCX_ALLOC_PRIO=thp,mmap,heap" ;;
        pool) if is_cxl "$1"; then echo "UCX_ALLOC_PRIO=md:cxl,thp,mmap,heap"; else echo ""; fi ;;
    esac
}

if ((QUICK)); then UCP_FAMILIES=(all); else UCP_FAMILIES=(tag rma); fi

# Where do ucx_perftest's UCP buffers live?  Run one 4 MiB tag_bw pair per
# allocation setting and sample the pool's used bytes while it runs: with
# md:cxl first the four 4 MiB buffers (send+receive, both processes) must
# show up in the pool, with thp,mmap,heap only the interfaces' receive
# blocks do.
pool_used() {
    "$CXLPOOL" info "$POOL" --json 2>/dev/null | grep -o '"used_bytes":[0-9]*' | cut -d: -f2
}
pool_probe() {   # pool_probe ALLOC_PRIO -> "idle_bytes max_bytes_during_run"
    local ap=$1 idle max=0 u port spid cpid i
    idle=$(pool_used)
    next_port
    port=$PORT
    env "${BASE_ENV[@]}" "${CXL_ENV[@]}" UCX_TLS=cxl UCX_ALLOC_PRIO="$ap" timeout -k 5 40 \
        ucx_perftest -p "$port" -c 0 >"$RAW/pool-probe-$ap.srv" 2>&1 &
    spid=$!
    SERVER_PIDS[$spid]=1
    for ((i = 0; i < 500; ++i)); do
        listening "$port" && break
        kill -0 "$spid" 2>/dev/null || break
        sleep 0.02
    done
    env "${BASE_ENV[@]}" "${CXL_ENV[@]}" UCX_TLS=cxl UCX_ALLOC_PRIO="$ap" timeout -k 5 30 \
        ucx_perftest 127.0.0.1 -p "$port" -c 1 -t tag_bw -s 4194304 -n 400 -w 10 -v -f \
        >"$RAW/pool-probe-$ap.cli" 2>&1 &
    cpid=$!
    while kill -0 "$cpid" 2>/dev/null; do
        u=$(pool_used)
        [[ -n $u ]] && ((u > max)) && max=$u
        sleep 0.05
    done
    wait "$cpid" 2>/dev/null
    kill -0 "$spid" 2>/dev/null && sleep 1
    kill -TERM "$spid" 2>/dev/null
    wait "$spid" 2>/dev/null
    unset "SERVER_PIDS[$spid]"
    echo "${idle:-?} $max"
}
read -r probe_idle probe_pool <<<"$(pool_probe md:cxl,thp,mmap,heap)"
read -r _ probe_host <<<"$(pool_probe thp,mmap,heap)"
{
    printf 'probe_idle=%s\n' "$probe_idle"
    printf 'probe_pool=%s\n' "$probe_pool"
    printf 'probe_host=%s\n' "$probe_host"
} >>"$OUT/meta.env"
msg "pool residency probe (tag_bw 4 MiB, UCX_TLS=cxl): pool used bytes idle $probe_idle, max with md:cxl first $probe_pool, with thp,mmap,heap $probe_host"
UCP_VARIANTS=(host pool)
msg "UCP: ${#UCP_FAMILIES[@]} families x ${#UCP_VARIANTS[@]} buffer variants x ${#UCP_CFGS[@]} configurations x $REPS reps (alternating)"
for fam in "${UCP_FAMILIES[@]}"; do
    for var in "${UCP_VARIANTS[@]}"; do
        declare -A FAM_BATCH=() FAM_SPEC=()
        for c in "${UCP_CFGS[@]}"; do
            label=${c%%|*}
            # the emulator: ordinary buffers only (a separate small table)
            [[ $label == cxl-emu && $var != host ]] && continue
            # across sw hosts: the RMA and atomics of pool buffers (what
            # goes through the memory's owner)
            [[ $label == cxl-xh && ( $var != pool || $fam == tag ) ]] && continue
            div=$(tl_div "$label")
            bf="$RAW/ucp-$fam-$var-$label.batch.tmp"
            sf="$RAW/ucp-$fam-$var-$label.spec.tmp"
            : >"$bf"; : >"$sf"
            # with ordinary buffers UCP emulates put/get over active
            # messages (no registration), 10-100x slower: fewer iterations
            rdiv=1
            [[ $var == host ]] && rdiv=4
            while IFS='|' read -r name fig kind args; do
                echo "ucp|$fig" >>"$RAW/figures.txt"
                echo "$name $(scale_iters "$args" "$div")" >>"$bf"
                echo "$name|$fig|$kind|$(awk '{for (i = 1; i < NF; ++i) if ($i == "-s") print $(i + 1)}' <<<"$args")" >>"$sf"
            done < <(if [[ $label == cxl-emu ]]; then emu_family "$fam";
                     elif [[ $label == cxl-xh ]]; then ucp_family rma "$rdiv";
                     else ucp_family "$fam" "$rdiv"; fi
                     deep_gets "$label" "$var" "$fam")
            FAM_BATCH[$label]=$bf
            FAM_SPEC[$label]=$sf
        done
        for ((rep = 1; rep <= REPS; ++rep)); do
            for c in "${UCP_CFGS[@]}"; do
                label=${c%%|*}
                [[ -n ${FAM_BATCH[$label]:-} ]] || continue
                envstr="${c#*|} $(ucp_variant_env "$label" "$var")"
                run_batch "ucp-$fam-$var-$label" ucp "$label" "$var" "$rep" "$envstr" \
                    "${FAM_BATCH[$label]}" "${FAM_SPEC[$label]}" --
            done
        done
        msg "  ucp $fam/$var done"
        unset FAM_BATCH FAM_SPEC
    done
done
rm -f "$RAW"/*.tmp

# ---------------------------------------------------------------------------
# UCP put/get with a target that keeps progressing (perftest/rma_bench.c):
# ucx_perftest's responders stop progressing early (ucp_put_bw) or
# progress once per millisecond (ucp_get), which is what one-sided
# operations through the memory's owner (cxl-xh) would measure.  cxl (hw)
# and cxl-xh alternately, pool-resident buffers, one operation in flight.
# ---------------------------------------------------------------------------
if ((XH)); then
    msg "UCP rma_bench (a progressing target): put/get 1 MiB, cxl and cxl-xh x $REPS reps (alternating)"
    RMA_ITERS=$((QUICK ? 128 : 512))
    for ((rep = 1; rep <= REPS; ++rep)); do
        for label in cxl cxl-xh; do
            for op in put get; do
                SEQ=$((SEQ + 1))
                base=$(printf '%s/%04d-rma-%s-%s-r%d' "$RAW" "$SEQ" "$label" "$op" "$rep")
                fig="rma_bench $op 1MiB"
                ((rep == 1)) && [[ $label == cxl ]] && echo "ucp|$fig" >>"$RAW/figures.txt"
                read -r -a lenv <<<"$(label_env "$label")"
                cmd=(env "${BASE_ENV[@]}" UCX_TLS=cxl UCX_ALLOC_PRIO=md:cxl,thp,mmap,heap
                     "${CXL_ENV[@]}" "${lenv[@]}" "$BIN/rma_bench" --op "$op" --sizes 1M
                     --iters "$RMA_ITERS")
                [[ $label == cxl-xh ]] && cmd+=(--target-env "$(side_env cxl-xh srv)"
                                                --initiator-env "$(side_env cxl-xh cli)")
                printf '[%s] rma %s %s r%d: %s\n' "$(date +%T)" "$label" "$op" "$rep" "${cmd[*]}" >>"$CMDLOG"
                timeout -k 5 120 "${cmd[@]}" >"$base.out" 2>"$base.err"
                rc=$?
                line=$(grep -E "^$op,1048576," "$base.out" | tail -n1)
                if ((rc == 0)) && [[ -n $line ]]; then
                    IFS=, read -r _ _ val _ _ <<<"$line"
                    record "$fig" ucp "$label" pool "MB/s" higher "$rep" "$val" ok ""
                else
                    why="rc=$rc: $(head -n1 "$base.err" | cut -c1-160)"
                    msg "  FAILED rma $label $op r$rep ($why); raw: ${base#"$OUT"/}.{out,err}"
                    record "$fig" ucp "$label" pool "MB/s" higher "$rep" "" failed "$why"
                fi
            done
        done
    done
fi

# ---------------------------------------------------------------------------
# MPI
# ---------------------------------------------------------------------------
# label|environment of the ranks: cxl alone; the README's single-host line
# (cxl+cma: UCX_TLS=cxl,cma UCX_CXL_RKEY_PTR=yes with pool allocation:
# cma's single copy for ordinary rendezvous buffers, cxl's for pool ones); posix, the ordinary-buffer peer of cxl;
# sm, what UCX users get by default.  cxl labels also get --cxl-env.
MPI_CFGS=(
    "cxl|UCX_TLS=cxl"
    "cxl+cma|UCX_TLS=cxl,cma UCX_CXL_RKEY_PTR=yes UCX_ALLOC_PRIO=md:cxl,huge,thp,mmap,heap"
    "posix|UCX_TLS=posix"
    "sm|UCX_TLS=sm"
)
MPI_TO=$((QUICK ? 120 : 300))
msg "MPI: mpi_bench x ${#MPI_CFGS[@]} (UCX_TLS=cxl / cxl,cma / posix / sm) x $REPS reps (alternating)"
mpi_expected() {   # the figures mpi_bench prints (for failure records)
    local sizes osizes s t
    if ((QUICK)); then sizes="8 65536 1048576 4194304"; else sizes="8 1024 65536 1048576 4194304"; fi
    osizes="8 65536"
    for t in lat bw bibw; do for s in $sizes; do echo "$t $s"; done; done
    for t in put_lat get_lat; do for s in $osizes; do echo "$t $s"; done; done
    echo "acc_lat 8"
}
for ((rep = 1; rep <= REPS; ++rep)); do
    for c in "${MPI_CFGS[@]}"; do
        tls=${c%%|*}
        read -r -a menv <<<"${c#*|}"
        SEQ=$((SEQ + 1))
        base=$(printf '%s/%04d-mpi-%s-r%d' "$RAW" "$SEQ" "${tls//[^A-Za-z0-9_.+-]/_}" "$rep")
        cmd=(mpirun -np 2 --allow-run-as-root --oversubscribe --bind-to core
             --mca pml ucx --mca osc ucx
             --mca opal_common_ucx_tls any --mca opal_common_ucx_devices any
             -x LD_PRELOAD="$MODULE" -x UCX_CXL_POOL="$POOL")
        for v in "${menv[@]}"; do cmd+=(-x "$v"); done
        if [[ $tls == cxl* ]]; then
            for v in "${CXL_ENV[@]}"; do cmd+=(-x "$v"); done
        fi
        cmd+=("$BIN/mpi_bench" "${MPI_ARGS[@]}")
        printf '[%s] mpi %s r%d: timeout %d %s\n' "$(date +%T)" "$tls" "$rep" "$MPI_TO" "${cmd[*]}" >>"$CMDLOG"
        timeout -k 10 "$MPI_TO" "${cmd[@]}" >"$base.out" 2>"$base.err"
        rc=$?
        why=""
        if ((rc == 124 || rc == 137)); then why="timeout after ${MPI_TO}s"
        elif ((rc != 0)); then why="mpirun rc=$rc: $(grep -m1 -iE 'error|abort' "$base.err" | cut -c1-160)"; fi
        [[ -n $why ]] && msg "  FAILED mpi $tls r$rep ($why); raw: ${base#"$OUT"/}.{out,err}"
        while read -r t s; do
            line=$(grep -E "^$t,$s," "$base.out" | tail -n1)
            fig="mpi_$t $(fmt_size "$s")"
            ((rep == 1)) && [[ $tls == cxl ]] && echo "mpi|$fig" >>"$RAW/figures.txt"
            if [[ -n $line ]]; then
                IFS=, read -r _ _ val unit better <<<"$line"
                [[ $unit == us ]] && unit="us(avg)"
                record "$fig" mpi "$tls" - "$unit" "$better" "$rep" "$val" ok ""
            else
                case $t in *lat) unit="us(avg)" better=lower ;; *) unit="MB/s" better=higher ;; esac
                record "$fig" mpi "$tls" - "$unit" "$better" "$rep" "" failed "${why:-no result line}"
            fi
        done < <(mpi_expected)
    done
done

# ---------------------------------------------------------------------------
# Machine limits (same run; once per repetition)
# ---------------------------------------------------------------------------
msg "limits: memcpy ($LIMIT_SIZES), cache-line round trip, and both with software coherence, $REPS reps"
for ((rep = 1; rep <= REPS; ++rep)); do
    SEQ=$((SEQ + 1))
    base=$(printf '%s/%04d-limits-r%d' "$RAW" "$SEQ" "$rep")
    timeout -k 5 120 "$BIN/limits" --sizes "$LIMIT_SIZES" "${LIMIT_ARGS[@]}" --cpu-a 0 --cpu-b 1 \
        >"$base.out" 2>"$base.err"
    rc=$?
    while IFS=, read -r what size v1 _; do
        case $what in
            memcpy) record "memcpy $(fmt_size "$size")" limit machine - "MB/s" higher "$rep" "$v1" ok "" ;;
            cacheline_rt) record "cacheline round trip" limit machine - "ns(p50)" lower "$rep" "$v1" ok "" ;;
            cacheline_oneway) record "cacheline one-way" limit machine - "ns(p50)" lower "$rep" "$v1" ok "" ;;
            cacheline_rt_avg) record "cacheline round trip" limit machine - "ns(avg)" lower "$rep" "$v1" ok "" ;;
            swline_rt) record "sw cacheline round trip" limit machine - "ns(p50)" lower "$rep" "$v1" ok "" ;;
            swline_oneway) record "sw cacheline one-way" limit machine - "ns(p50)" lower "$rep" "$v1" ok "" ;;
            swcopy_in) record "sw copy-in $(fmt_size "$size")" limit machine - "MB/s" higher "$rep" "$v1" ok "" ;;
            swcopy_out) record "sw copy-out $(fmt_size "$size")" limit machine - "MB/s" higher "$rep" "$v1" ok "" ;;
            swinval) record "sw invalidate $(fmt_size "$size")" limit machine - "MB/s" higher "$rep" "$v1" ok "" ;;
        esac
    done <"$base.out"
    ((rc == 0)) || msg "  FAILED limits r$rep (rc=$rc): $(head -n1 "$base.err")"
done

printf 'load_end=%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.env"
printf 'duration_s=%s\n' "$((SECONDS - T_START))" >>"$OUT/meta.env"

# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------
trap - EXIT
cleanup
msg "pool destroyed; writing report"
"$PY" "$SCRIPT_DIR/report.py" "$OUT" || die "report.py failed"
if ((HAVE_GNUPLOT)); then
    (cd "$PLOTS" && gnuplot plots.gp) >"$LOGS/gnuplot.log" 2>&1 ||
        msg "gnuplot failed (see $LOGS/gnuplot.log); the tables are complete"
else
    msg "gnuplot not found (Debian package gnuplot-nox): no PNG plots; data in $PLOTS"
fi
msg "done in $((SECONDS - T_START))s: $OUT/report.md, $OUT/results.csv, $PLOTS/"
cat "$OUT/report.md"
