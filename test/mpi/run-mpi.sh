#!/usr/bin/env bash
#
# run-mpi.sh - build test/mpi/mpi_cxl_test.c with mpicc and run it on 4 ranks
# of Open MPI (pml ucx, osc ucx) with UCX_TLS=cxl: all MPI traffic over the
# ucx-cxl transport, one-sided window memory in a private CXL pool.
#
#   test/mpi/run-mpi.sh [BUILDDIR]
#
#   BUILDDIR   build directory holding .libs/libuct_cxl.so and cxlpool
#              (default: $CXL_BUILDDIR, else build-release/ or build/ at the
#              top of the source tree);
#              the test program goes to BUILDDIR/test/mpi/mpi_cxl_test
#
# Environment:
#   MPI_NP=4                ranks
#   MPI_CXL_TIMEOUT=120     per-check watchdog of the program (seconds)
#   MPI_CXL_SW_RMA=1        0: skip the MPI_Win_create (software RMA) checks
#                           checks of the program
#   RUN_MPI_TIMEOUT=1800    limit of the whole mpirun (seconds)
#   RUN_MPI_TUNE=1          1: MCA parameters from --tune contrib/openmpi-cxl.conf
#                           0: the same parameters as --mca options
#   RUN_MPI_NEGATIVE=1      0: skip the negative control
#   CXL_TEST_REG_ANY        y or n: the ranks get UCX_CXL_REG_ANY=y|n (unset:
#                           the default, y); the script checks in every
#                           rank's UCX log that the setting arrived
#   CXL_TEST_COHERENCE=hw   sw: the same job in software-coherent mode on the
#                           strict non-coherent pool emulator
#                           (doc/design/sw-coherence.md): the pool is created
#                           with --coherence sw (1 GiB, at least 8 host
#                           partitions and one more than the ranks: each
#                           emulated host gets 1/N of the heap), the ranks get
#                           UCX_CXL_POOL=emulate-nc:POOL and
#                           UCX_CXL_COHERENCE=sw and no UCX_CXL_HOST_INDEX, so
#                           every rank is an emulated host of its own and all
#                           MPI traffic crosses emulated hosts.  The window
#                           placement check then looks for the rank's view
#                           POOL.host<k>.  sw mode adds two checks after the
#                           job: 'cxlpool check' of the pool (as an emulated
#                           host of its own, so it sees only what the ranks
#                           wrote back) is clean with nothing allocated or
#                           attached, and no view is left; and it ends with
#                           "mpi-sw: N passed, N failed" (the program's
#                           counts plus the lane check and those two).
#
# The run is made with UCX_LOG_LEVEL=info (UCX_LOG_FILE: per-rank files, of
# which warnings and errors are shown), which makes UCX 1.13 log each
# endpoint configuration ("ep_cfg[N]: tag(cxl/...)"); the script checks that
# every lane is on cxl.  A negative control then runs the same job without
# LD_PRELOAD of the module: it must fail to start (no usable transports).
# Its outcome is reported but does not change the exit status.
#
# Exit status: the test program's (mpirun's); 1 also when a lane not on cxl
# was seen; 99 when something needed is missing or the build fails.
set -uo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$SCRIPT_DIR/mpi-common.sh"
mpi_builddir "$0" "$@"

NP=${MPI_NP:-4}
MODULE=$BUILD/.libs/libuct_cxl.so
CXLPOOL=$BUILD/cxlpool
CONF=$TOP/contrib/openmpi-cxl.conf
SRC=$SCRIPT_DIR/mpi_cxl_test.c
OUTDIR=$BUILD/test/mpi
BIN=$OUTDIR/mpi_cxl_test
POOL=/dev/shm/ucx-cxl-mpitest-$$.pool
ALLOC_PRIO=md:cxl,huge,thp,mmap,heap
mpi_coherence "$POOL" "$NP"

mpi_need "$MODULE" "$CXLPOOL" "$SRC" "$CONF"

SCR=$(mktemp -d "${TMPDIR:-/tmp}/run-mpi.XXXXXX") || exit 99
cleanup() {
    mpi_pool_destroy "$CXLPOOL" "$SPEC" "$POOL"
    rm -rf "$SCR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- build -------------------------------------------------------------
mpi_build "$SRC" "$BIN"

# --- private pool -------------------------------------------------------
if ! "$CXLPOOL" create "$POOL" "${CREATE_OPTS[@]}"; then
    echo "run-mpi.sh: could not create the pool $POOL" >&2
    exit 99
fi

# --- the run -------------------------------------------------------------
MCA=(--mca pml ucx --mca osc ucx --mca opal_common_ucx_tls any
     --mca opal_common_ucx_devices any)
if [ "${RUN_MPI_TUNE:-1}" = 1 ]; then
    MCA=(--tune "$CONF")
fi
ENVS=(-x "UCX_TLS=cxl" -x "UCX_ALLOC_PRIO=$ALLOC_PRIO" -x "UCX_CXL_POOL=$SPEC")
if [ "$COHERENCE" = sw ]; then
    # each rank an emulated host of its own: no UCX_CXL_HOST_INDEX
    unset UCX_CXL_HOST_INDEX
    ENVS+=(-x "UCX_CXL_COHERENCE=sw")
    echo "run-mpi.sh: sw mode: pool emulate-nc:$POOL (${CREATE_OPTS[*]}), each rank its own emulated host"
fi
REG_ANY=${CXL_TEST_REG_ANY:-}
case "$REG_ANY" in
    "") ;;
    y|n) ENVS+=(-x "UCX_CXL_REG_ANY=$REG_ANY")
         echo "run-mpi.sh: UCX_CXL_REG_ANY=$REG_ANY" ;;
    *) echo "run-mpi.sh: CXL_TEST_REG_ANY must be y or n, not '$REG_ANY'" >&2
       exit 99 ;;
esac
[ -n "${MPI_CXL_TIMEOUT:-}" ] && ENVS+=(-x "MPI_CXL_TIMEOUT=$MPI_CXL_TIMEOUT")
[ -n "${MPI_CXL_SW_RMA:-}" ] && ENVS+=(-x "MPI_CXL_SW_RMA=$MPI_CXL_SW_RMA")
BASE=(mpirun -np "$NP" --allow-run-as-root --oversubscribe "${MCA[@]}")
# UCX logs to stdout by default: send it to per-rank files (%p: pid)
UCXLOG=$SCR/ucx.%p.log
CMD=("${BASE[@]}" -x "LD_PRELOAD=$MODULE" "${ENVS[@]}" -x UCX_LOG_LEVEL=info
     -x "UCX_LOG_FILE=$UCXLOG" "$BIN")

echo "run-mpi.sh: mpirun line:"
echo "  $(printf '%q ' "${CMD[@]}")"
[ "${RUN_MPI_TUNE:-1}" = 1 ] && {
    echo "run-mpi.sh: parameters from $CONF:"
    grep -E '^[a-z_]+ *=' "$CONF" | sed 's/^/    /'
}

t0=$(date +%s.%N)
timeout --kill-after=15 "${RUN_MPI_TIMEOUT:-1800}" "${CMD[@]}" | tee "$SCR/mpi.out"
rc=${PIPESTATUS[0]}
t1=$(date +%s.%N)

# UCX's warnings and errors (its log went to files)
cat "$SCR"/ucx.*.log 2>/dev/null | grep -E 'UCX +(WARN|ERROR|FATAL)' | sed 's/^/ucx: /'
[ $rc -eq 124 ] && echo "run-mpi.sh: mpirun killed after ${RUN_MPI_TIMEOUT:-1800} s"

# --- did UCX really use cxl? ------------------------------------------------
lanes=$(cat "$SCR"/ucx.*.log 2>/dev/null | grep -o 'ep_cfg\[[0-9]*\]: .*' |
        sort | uniq -c)
lane_rc=0
if [ -z "$lanes" ]; then
    if [ $rc -ne 0 ]; then
        echo "run-mpi.sh: lanes: no ep_cfg line logged (killed ranks lose their buffered UCX log)"
    else
        echo "run-mpi.sh: lanes: UCX logged no ep_cfg line (UCX_LOG_LEVEL=info); relying on UCX_TLS=cxl"
    fi
else
    echo "run-mpi.sh: lanes (ep_cfg lines of all ranks, UCX_LOG_LEVEL=info):"
    echo "$lanes" | sed 's/^/    /'
    other=$(echo "$lanes" | grep -o '([^)]*)' | tr -d '()' | tr ' ' '\n' |
            grep '/' | cut -d/ -f1 | sort -u | grep -v -x cxl)
    if [ -n "$other" ]; then
        echo "run-mpi.sh: lanes: FAIL: transports other than cxl in use: $other"
        lane_rc=1
    else
        echo "run-mpi.sh: lanes: every lane (tag for pml ucx, rma/amo for osc ucx) is on cxl"
    fi
fi
# --- CXL_TEST_REG_ANY: did every rank run with it? -------------------------
if [ -n "$REG_ANY" ] && [ $rc -eq 0 ]; then
    nlogs=$(ls "$SCR"/ucx.*.log 2>/dev/null | wc -l)
    nset=$(grep -l "UCX_\\* env variables:.*UCX_CXL_REG_ANY=$REG_ANY" "$SCR"/ucx.*.log 2>/dev/null | wc -l)
    if [ "$nlogs" -ge "$NP" ] && [ "$nset" -eq "$nlogs" ]; then
        echo "run-mpi.sh: UCX_CXL_REG_ANY=$REG_ANY seen in all $nlogs rank logs"
    else
        echo "run-mpi.sh: FAIL: UCX_CXL_REG_ANY=$REG_ANY in $nset of $nlogs rank logs"
        lane_rc=1
    fi
fi
echo "run-mpi.sh: pool after the job:"
"$CXLPOOL" info "$SPEC" 2>&1 | grep -E '^(used|attachments) ' | sed 's/^/    /'

# --- sw mode: what the ranks wrote back leaves a clean pool, no view -------
sw_pass=0
sw_fail=0
if [ "$COHERENCE" = sw ]; then
    [ $lane_rc -eq 0 ] && sw_pass=$((sw_pass + 1)) || sw_fail=$((sw_fail + 1))
    "$CXLPOOL" check "$SPEC" >"$SCR/check.out" 2>&1
    crc=$?
    "$CXLPOOL" info "$SPEC" >"$SCR/info.out" 2>&1
    if [ $crc -eq 0 ] && grep -qE '^used +0 bytes in 0 of' "$SCR/info.out" &&
       grep -qE '^attachments +0 of' "$SCR/info.out"; then
        echo "run-mpi.sh: PASS: sw: pool clean after the job (check, nothing allocated or attached)"
        sw_pass=$((sw_pass + 1))
    else
        echo "run-mpi.sh: FAIL: sw: pool clean after the job: check exit $crc:"
        sed 's/^/    /' "$SCR/check.out" "$SCR/info.out"
        sw_fail=$((sw_fail + 1))
    fi
    views=$(ls "$POOL".host* 2>/dev/null | tr '\n' ' ')
    if [ -z "$views" ]; then
        echo "run-mpi.sh: PASS: sw: no emulated-host view left"
        sw_pass=$((sw_pass + 1))
    else
        echo "run-mpi.sh: FAIL: sw: no emulated-host view left: $views"
        sw_fail=$((sw_fail + 1))
    fi
fi

# --- negative control: no module, no transport --------------------------
if [ "${RUN_MPI_NEGATIVE:-1}" = 1 ]; then
    NEG=("${BASE[@]}" "${ENVS[@]}" "$BIN")
    echo "run-mpi.sh: negative control (no LD_PRELOAD):"
    echo "  $(printf '%q ' "${NEG[@]}")"
    timeout --kill-after=10 120 "${NEG[@]}" >"$SCR/neg.out" 2>&1
    nrc=$?
    why=$(grep -m1 -o 'no usable transports[^"]*' "$SCR/neg.out")
    if [ $nrc -ne 0 ]; then
        echo "run-mpi.sh: negative control: failed to start as expected (rc $nrc): ${why:-$(grep -m1 -i error "$SCR/neg.out")}"
    else
        echo "run-mpi.sh: negative control: WARNING: the job ran without the cxl module (rc 0)"
    fi
fi

awk -v a="$t0" -v b="$t1" -v rc="$rc" 'BEGIN { printf "run-mpi.sh: mpirun took %.2f s (rc %d)\n", b - a, rc }'
if [ $rc -eq 0 ] && [ $lane_rc -ne 0 ]; then
    rc=1
fi
if [ "$COHERENCE" = sw ]; then
    line=$(grep -E '^mpi: [0-9]+ passed, [0-9]+ failed$' "$SCR/mpi.out" | tail -n 1)
    p=$(sed -E 's/^mpi: ([0-9]+) passed, ([0-9]+) failed$/\1/' <<<"$line")
    f=$(sed -E 's/^mpi: ([0-9]+) passed, ([0-9]+) failed$/\2/' <<<"$line")
    if [ -z "$line" ]; then
        echo "run-mpi.sh: the program printed no 'mpi: N passed, N failed' line (rc $rc)"
        p=0
        f=1
    elif [ $rc -ne 0 ] && [ "$f" = 0 ] && [ $lane_rc -eq 0 ]; then
        f=1   # failed outside the counted checks
    fi
    [ $sw_fail -eq 0 ] || { [ $rc -ne 0 ] || rc=1; }
    echo "mpi-sw: $((p + sw_pass)) passed, $((f + sw_fail)) failed"
fi
exit $rc
