#!/usr/bin/env bash
#
# run-dask-bench.sh - Dask's comm layer over the pool: the cxl backend
# (ucx_cxl.dask, UCX_TLS=cxl,tcp by default) against Dask's default tcp on
# loopback, in one command (issue 15).  perftest/dask_bench.py runs two
# processes connected with distributed.comm (as two workers are) and
# measures, alternating cxl and tcp (the order reversed every other
# repetition), --reps times:
#   put SIZE   a message with a numpy array of SIZE bytes (to_serialize),
#              deserialised by the receiver, answered with a small ack:
#              MB/s (2^20 B/s), sizes 1 KiB .. 256 MiB
#   rtt small  a small message and its echo: microseconds (also 1 KiB)
# and the machine's memcpy bandwidth (perftest/limits.c).  The first put
# of every size and scheme is checked (crc32 on both sides).
#
# Output folder (default perftest/out/dask-<date>-<time>/):
#   report.md     machine, load at start and end, memcpy limits, targets
#                 of issue 15 (>= 3x tcp throughput from 16 MiB, <= 0.5x
#                 tcp round trip for small messages) met/missed with the
#                 ratios, tables (median [min-max]); also printed
#   results.csv   figure,size,scheme,unit,better,rep1..repN,median,min,max
#   samples.csv   every sample (with its iteration count)
#   meta.json     versions, environment, checks; limits.csv; run.log
#
# Usage: perftest/run-dask-bench.sh [--reps N] [--quick] [--smoke]
#          [--sizes LIST] [--budget S] [--rtt-iters N] [--out DIR]
#          [--builddir DIR] [--cxl-env "VAR=V ..."] [--help]
#   --reps N       repetitions (default 5; --quick 3)
#   --quick        3 repetitions, budget 0.1 s, 500 round trips
#   --smoke        sizes 1K,64K,1M, one repetition, every put checked, short
#                  limits: the registered test (test/perftest/test_dask_bench.sh)
#   --sizes LIST   put sizes (default 1K,4K,16K,64K,256K,1M,4M,16M,64M,256M)
#   --budget S     seconds per put sample (default 0.2)
#   --rtt-iters N  round trips per rtt sample (default 2000)
#   --out DIR      output folder
#   --builddir DIR build folder (default: build build-release/ with
#                  contrib/build.sh)
#   --cxl-env STR  extra environment of the run (UCX_* settings to try)
#   -h, --help     this text
# The caller's UCX_* variables are cleared; the pool is private
# (/dev/shm/ucx-cxl-dask-bench-PID.pool, removed at the end).  Nothing
# asserts timings: on a busy machine the numbers are noisy (the report
# prints the load).  Exit status: that of dask_bench.py (1 when a check or
# a run failed).
set -uo pipefail

PROG=run-dask-bench
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$SCRIPT_DIR/.." && pwd)
REPS="" QUICK=0 SMOKE=0 SIZES="" BUDGET="" RTT="" OUT="" BUILDDIR="" CXL_ENV_STR=""

. "$SCRIPT_DIR/bench-common.sh"

while (($#)); do
    case $1 in
        --reps) need "$1" $#; REPS=$2; shift ;;
        --quick) QUICK=1 ;;
        --smoke) SMOKE=1 ;;
        --sizes) need "$1" $#; SIZES=$2; shift ;;
        --budget) need "$1" $#; BUDGET=$2; shift ;;
        --rtt-iters) need "$1" $#; RTT=$2; shift ;;
        --out) need "$1" $#; OUT=$2; shift ;;
        --builddir) need "$1" $#; BUILDDIR=$2; shift ;;
        --cxl-env) need "$1" $#; CXL_ENV_STR=$2; shift ;;
        -h | --help) usage; exit 0 ;;
        *) printf '%s: unknown option %q (see --help)\n' "$PROG" "$1" >&2; exit 2 ;;
    esac
    shift
done
if ((QUICK)); then
    : "${REPS:=3}" "${BUDGET:=0.1}" "${RTT:=500}"
fi
[[ -z $REPS || $REPS =~ ^[1-9][0-9]*$ ]] || die "--reps must be a positive integer"

if [[ -z $BUILDDIR ]]; then
    BUILDDIR=$("$REPO_DIR/contrib/build.sh" release) || die "contrib/build.sh release failed"
fi
BUILDDIR=$(cd "$BUILDDIR" 2>/dev/null && pwd) || die "build folder '$BUILDDIR' does not exist"
CXLPOOL=$BUILDDIR/cxlpool
for f in "$BUILDDIR/.libs/libuct_cxl.so" "$BUILDDIR/.libs/libcxl_comm.so" "$CXLPOOL"; do
    [[ -e $f ]] || die "$f not found; build the project first (or pass --builddir)"
done
PY=/usr/bin/python3
for t in gcc timeout "$PY"; do
    command -v "$t" >/dev/null 2>&1 || die "'$t' not found (contrib/setup-deps.sh installs what the project needs)"
done
"$PY" -c 'import distributed, numpy' 2>/dev/null || die "$PY lacks python3-distributed or numpy"

[[ -n $OUT ]] || OUT="$SCRIPT_DIR/out/dask-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT/bin" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)
RUNLOG=$OUT/run.log
: >"$RUNLOG"
T_START=$SECONDS

while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^UCX_' || true)
unset LD_PRELOAD
read -r -a CXL_ENV <<<"$CXL_ENV_STR"

POOL=/dev/shm/ucx-cxl-dask-bench-$$.pool
cleanup() { "$CXLPOOL" destroy --force "$POOL" >/dev/null 2>&1; rm -f "$POOL"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
"$CXLPOOL" create "$POOL" --size 1g >"$OUT/pool.out" 2>&1 || die "cxlpool create: $(cat "$OUT/pool.out")"

gcc -O2 -Wall -pthread -I"$REPO_DIR/include" -o "$OUT/bin/limits" "$SCRIPT_DIR/limits.c" \
    "$REPO_DIR/src/coherence/cxl_coherence.c" >"$OUT/build-limits.log" 2>&1 ||
    die "building limits.c failed (see $OUT/build-limits.log)"
NCPU=$(nproc 2>/dev/null || echo 1)
# memcpy is what is used here; its cache-line ping-pongs are kept short
LIMIT_ARGS=(--sizes 1048576,16777216,67108864,268435456 --cpu-a 0 --cpu-b "$((NCPU > 1 ? 1 : 0))"
            --chunk 200 --chunks 5)
((SMOKE)) && LIMIT_ARGS=(--sizes 1048576 --cpu-a 0 --cpu-b "$((NCPU > 1 ? 1 : 0))" --ms 20
                         --trials 3 --chunk 100 --chunks 3)
msg "limits: memcpy"
timeout -k 5 120 "$OUT/bin/limits" "${LIMIT_ARGS[@]}" >"$OUT/limits.csv" 2>"$OUT/limits.err" ||
    msg "  limits failed: $(head -n1 "$OUT/limits.err")"

args=(--out "$OUT")
[[ -n $REPS ]] && args+=(--reps "$REPS")
[[ -n $SIZES ]] && args+=(--sizes "$SIZES")
[[ -n $BUDGET ]] && args+=(--budget "$BUDGET")
[[ -n $RTT ]] && args+=(--rtt-iters "$RTT")
((SMOKE)) && args+=(--smoke)
LIBENV=()
[[ $BUILDDIR != "$REPO_DIR/build-release" && $BUILDDIR != "$REPO_DIR/build" ]] &&
    LIBENV=(CXL_LIBDIR="$BUILDDIR/.libs" UCX_WARN_UNUSED_ENV_VARS=n)
msg "dask_bench.py ${args[*]} ${CXL_ENV[*]:-}"
env PYTHONPATH="$REPO_DIR/python" UCX_CXL_POOL="$POOL" ${LIBENV[@]+"${LIBENV[@]}"} \
    ${CXL_ENV[@]+"${CXL_ENV[@]}"} \
    timeout -k 10 3600 "$PY" "$SCRIPT_DIR/dask_bench.py" "${args[@]}" 2>&1 | tee -a "$RUNLOG" >&2
rc=${PIPESTATUS[0]}
msg "dask_bench.py exit $rc"
"$PY" "$SCRIPT_DIR/dask_report.py" "$OUT" >"$OUT/report.out" 2>&1 || msg "dask_report.py failed: $(tail -n 3 "$OUT/report.out")"
[[ -f $OUT/report.md ]] && cat "$OUT/report.md"
msg "output in $OUT"
exit "$rc"
