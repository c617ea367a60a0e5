#!/usr/bin/env bash
#
# run-mpi-coll.sh - Open MPI's collectives through coll/cxl: build
# test/mpi/mpi_coll_test.c and run it over pml ucx with UCX_TLS=cxl (the
# transport preloaded, contrib/openmpi-cxl.conf as run-mpi.sh uses it) at
# every np, once with coll/cxl from the build tree and once without it.
#
#   test/mpi/run-mpi-coll.sh [BUILDDIR]
#
#   BUILDDIR   build directory holding .libs/libuct_cxl.so,
#              .libs/mca_coll_cxl.so and cxlpool (default: $CXL_BUILDDIR,
#              else build-release/ or build/ at the top of the source tree);
#              the program goes to BUILDDIR/test/mpi/mpi_coll_test
#
# Checks, each "ok ..." or "FAIL ...":
#   ompi_info    lists coll/cxl (API 2.0.0) from the build tree and every
#                coll_cxl_* parameter with its help text
#   np N cxl     coll/cxl selected (--mca mca_base_component_path with the
#                build tree first; np 1: coll_cxl_min_ranks 1 and priority
#                90, above coll/self): every result right, every call on
#                the path expected (the program reads coll/cxl's MPI_T
#                counters per call), and every rank's verbose output says
#                MPI_COMM_WORLD was accepted and the intercommunicator (np
#                >= 2) declined
#   np N off     the same program with --mca coll ^cxl --mca op ^avx (see
#                op/avx): every result right and the same digest of all
#                results as with coll/cxl
#   pairs        sw only: np 4 cxl with two ranks per emulated host
#                (UCX_CXL_HOST_INDEX = rank / 2 for the transport and the
#                library alike), every result right
#   thread       np 3 under MPI_THREAD_MULTIPLE: MPI_Comm_dup and _split
#                communicators get teams (at their first collective; they
#                hung at creation), results right
#   local error  np 2: the root of a gather passes a send size unlike its
#                receive size (only it sees the error): every later call
#                on that communicator fails on every rank (they returned
#                success with wrong values, then hung)
#   mismatch     np 2: rank 1 receives a bcast of 2 ints where the root
#                sends 1 (erroneous): it fails, and every later call on
#                that communicator on every rank (it returned success
#                with an int never sent)
#   declined     np 2 with the ranks' teams on two different pools
#                (CXL_COLL_POOL): every rank declines (verbose:
#                "team creation failed"), every call runs in the previous
#                module (with --mca op ^avx), results right
#   control      coll/cxl loaded but below coll/tuned (priority 20): the
#                program must fail (its per-call path check catches a
#                component that is selected nowhere); and with Open MPI's
#                progress engine never called while waiting
#                (coll_cxl_progress_interval and coll_cxl_spin_count
#                2000000000: a spin without progress) the program's
#                progress check must hang until its watchdog ends it
#   yield        coll_cxl_progress_interval 2000000000 alone: a wait that
#                yields progresses before every yield, so the progress and
#                rma sections pass
#   mpool/cxl    ompi_info lists mpool/cxl and its parameters with help;
#                np 3 with contrib/openmpi-cxl.conf (mpool_cxl_priority
#                60): MPI_Alloc_mem buffers as bcast, allgather, alltoall
#                and allreduce inputs, results right, and CXL_COLL_LOG says
#                bcast and allgather read them in place from the pool; the
#                same with --mca mpool_cxl_priority 0 (malloc'd memory):
#                results right, copied through the slot
#   op/avx       an observation, no check: Open MPI's default operations
#                on 262144 MPI_INT8_T values (op/avx) without coll/cxl;
#                with coll/cxl the sum must wrap as C does (np N cxl)
#
# Environment:
#   MPI_COLL_NPS="1 2 3 4 5 6 7 8"   the np values
#   MPI_COLL_LARGE=65537              elements of the large counts
#   MPI_COLL_TIMEOUT=300              watchdog of the program (seconds)
#   RUN_MPI_TIMEOUT=600               limit of each mpirun (seconds)
#   CXL_TEST_COHERENCE=hw             sw: on the strict non-coherent pool
#                                     emulator, each rank an emulated host
#                                     (as run-mpi.sh; 2 host partitions per
#                                     rank: the transport's, the library's),
#                                     plus np 4 with two ranks per host
#
# Ends with "mpi-coll: N passed, N failed"; exit 0 only when nothing failed,
# 99 when something needed is missing or the build fails.
set -uo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$SCRIPT_DIR/mpi-common.sh"
mpi_builddir "$0" "$@"

NPS=${MPI_COLL_NPS:-1 2 3 4 5 6 7 8}
LIMIT=${RUN_MPI_TIMEOUT:-600}
maxnp=1
for np in $NPS; do [ "$np" -gt "$maxnp" ] && maxnp=$np; done
mpi_coll_setup mpi_coll_test MPI_COLL_ "$maxnp"
echo "run-mpi-coll.sh: mpirun line (np N, coll/cxl):"
echo "  $(printf '%q ' "${BASE[@]}" -np N --mca coll_cxl_verbose 1 "${ENVS[@]}" \
      -x MPI_COLL_EXPECT=cxl -x MPI_COLL_AVX=require "$BIN")"

PASS=0 FAIL=0
ok()   { PASS=$((PASS + 1)); echo "ok $1"; }
# a failed run's telling lines; a process killed by a signal (UCX's
# "Caught signal" and its backtrace, mpirun's "exited on signal") too
fail() { FAIL=$((FAIL + 1)); echo "FAIL $1: $2"; mpi_job_output "$3" | sed 's/^/    /' | grep -E 'FAIL|rror|coll:cxl|mpi-coll:|timeout|[Ss]ignal|Illegal|backtrace|^ *[0-9]+ +0x' | head -40; }

# --- ompi_info: the component and every parameter with its help -------------
# info_check FRAMEWORK API MIN: ompi_info lists FRAMEWORK/cxl of API version
# API with at least MIN parameters, each with a help text
# (ompi_info takes the component path from the environment, not --mca)
info_check() {
    local fw=$1 api=$2 min=$3 out=$SCR/info.$1.out nparam nhelp
    OMPI_MCA_mca_base_component_path="$BUILD/.libs:$OMPI_COMPDIR" \
        ompi_info --param "$fw" cxl --level 9 --parsable >"$out" 2>&1
    nparam=$(grep -c "^mca:$fw:cxl:param:${fw}_cxl_[a-z_]*:value:" "$out")
    nhelp=$(grep -cE "^mca:$fw:cxl:param:${fw}_cxl_[a-z_]*:help:.{20,}" "$out")
    if grep -q "^mca:$fw:cxl:version:\"api:$api\"" "$out" &&
       [ "$nparam" -ge "$min" ] && [ "$nparam" -eq "$nhelp" ]; then
        ok "ompi_info: $fw/cxl ($fw API $api), $nparam parameters, each with help"
    else
        fail "ompi_info ($fw)" "$nparam parameters, $nhelp with help" "$out"
    fi
}
info_check coll 2.0.0 9

# job OUT ARGS...: one mpirun (mpi_job: RC, RES, DIGEST, CNT, SECS)
job() {
    local out=$1
    shift
    mpi_job mpi-coll "$LIMIT" "$out" "${BASE[@]}" "$@"
}

# passed: rc 0 and "N checks, 0 failed" with N > 0
passed() {
    mpi_passed mpi-coll
}

for np in $NPS; do
    extra=() min=2
    if [ "$np" -eq 1 ]; then
        # a single-rank MPI_COMM_WORLD is coll/self's (priority 75) unless
        # coll/cxl is above it and takes one rank
        extra=(--mca coll_cxl_min_ranks 1 --mca coll_cxl_priority 90)
        min=1
    fi
    out=$SCR/cxl.$np.out
    job "$out" -np "$np" "${extra[@]}" --mca coll_cxl_verbose 1 "${ENVS[@]}" \
        -x MPI_COLL_EXPECT=cxl -x "MPI_COLL_MIN_RANKS=$min" \
        -x MPI_COLL_AVX=require "$BIN"
    acc=$(grep -cE "coll:cxl: comm MPI_COMM_WORLD \(cid 0, rank [0-9]+ of $np\): accepted" "$out")
    # the intercommunicator of the program's "dup" section: declined
    inter=$(grep -cE 'coll:cxl: comm .*: declined: intercommunicator' "$out")
    [ "$np" -lt 2 ] && inter=$np
    cxl_digest=$DIGEST
    cnt=$(sed -n 's/^counters: //p' "$out" | tail -n 1)
    if passed && [ "$acc" -eq "$np" ] && [ "$inter" -eq "$np" ]; then
        ok "np $np cxl: ${RES#mpi-coll: }; $cnt; MPI_COMM_WORLD accepted on $acc ranks, the intercommunicator declined (${SECS} s)"
    else
        fail "np $np cxl" "rc $RC, '${RES:-no result line}', MPI_COMM_WORLD accepted on $acc of $np ranks, intercommunicator declined on $inter" "$out"
    fi
    [ "$np" -eq 2 ] && grep -m1 '^avx-check:' "$out" | sed 's/^/    with coll\/cxl: /'
    grep -m1 '^rma:' "$out" | sed 's/^/    with coll\/cxl: /'

    out=$SCR/off.$np.out
    job "$out" -np "$np" --mca coll ^cxl --mca op ^avx "${ENVS[@]}" \
        -x MPI_COLL_EXPECT=off -x MPI_COLL_AVX=require "$BIN"
    obs=$(sed -n 's/^observed: \([0-9]*\) .*/\1/p' "$out" | tail -n 1)
    if passed && [ -n "$DIGEST" ] && [ "$DIGEST" = "$cxl_digest" ]; then
        ok "np $np off: ${RES#mpi-coll: }; digest $DIGEST as with coll/cxl (${SECS} s; ${obs:-?} MPI_UNSIGNED_LONG MIN/MAX results of Open MPI's own ops differ from C)"
    else
        fail "np $np off" "rc $RC, '${RES:-no result line}', digest '$DIGEST' (coll/cxl: '$cxl_digest')" "$out"
    fi
    grep -m1 '^rma:' "$out" | sed 's/^/    without: /'
done

# --- sw: two ranks per emulated host, as on a pod of multi-core hosts -------
# Each rank's transport and library name the host rank / 2 (an explicit
# index is shared): ranks 0 and 1 share one view (one cache), 2 and 3
# another, and the pool is non-coherent only between the pairs.
if [ "$COHERENCE" = sw ]; then
    np=4
    wrap=$SCR/host-pairs.sh
    printf '%s\n' '#!/bin/sh' \
        'UCX_CXL_HOST_INDEX=$((OMPI_COMM_WORLD_RANK / 2)) exec "$@"' >"$wrap"
    chmod +x "$wrap"
    out=$SCR/pairs.$np.out
    job "$out" -np "$np" --mca coll_cxl_verbose 1 "${ENVS[@]}" \
        -x MPI_COLL_EXPECT=cxl -x MPI_COLL_AVX=require "$wrap" "$BIN"
    acc=$(grep -cE "coll:cxl: comm MPI_COMM_WORLD \(cid 0, rank [0-9]+ of $np\): accepted" "$out")
    if passed && [ "$acc" -eq "$np" ]; then
        ok "np $np cxl, two ranks per emulated host (hosts 0 0 1 1): ${RES#mpi-coll: } (${SECS} s)"
    else
        fail "np $np cxl, two ranks per emulated host" "rc $RC, '${RES:-no result line}', MPI_COMM_WORLD accepted on $acc of $np ranks" "$out"
    fi
fi

# --- MPI_THREAD_MULTIPLE: teams at the first collective -------------------
# Open MPI enables a new communicator's modules inside its progress engine;
# above MPI_THREAD_SINGLE its waits there block, and coll/cxl's team
# creation in enable (an allgather of the previous module) waited forever:
# every MPI_Comm_dup and _split hung.  The dup and split sections make communicators; each must be
# accepted (its team made at its first collective) and every result right.
np=3
out=$SCR/thread.$np.out
job "$out" -np "$np" --mca coll_cxl_verbose 1 "${ENVS[@]}" \
    -x MPI_COLL_EXPECT=cxl -x MPI_COLL_THREAD=multiple -x MPI_COLL_TIMEOUT=120 \
    -x MPI_COLL_ONLY=barrier,reductions,split,dup "$BIN"
lazy=$(grep -cE 'coll:cxl: comm .*: team at the first collective' "$out")
dups=$(grep -cE "coll:cxl: comm .*DUP FROM.*: accepted" "$out")
if passed && [ "$dups" -ge "$np" ]; then
    ok "np $np MPI_THREAD_MULTIPLE: ${RES#mpi-coll: }; $lazy communicators with a team at their first collective, dups accepted on $dups ranks (${SECS} s)"
else
    fail "np $np MPI_THREAD_MULTIPLE" "rc $RC, '${RES:-no result line}', dup communicators accepted on $dups of $np ranks" "$out"
fi

# --- an error one rank alone sees: the team gives up, no call runs askew -
np=2
out=$SCR/localerr.$np.out
job "$out" -np "$np" "${ENVS[@]}" -x MPI_COLL_EXPECT=cxl \
    -x MPI_COLL_ONLY=localerr -x MPI_COLL_TIMEOUT=60 "$BIN"
if passed; then
    ok "np $np local error: ${RES#mpi-coll: }; the root's gather failed alone, every later call on the communicator failed on every rank (${SECS} s)"
else
    fail "np $np local error" "rc $RC, '${RES:-no result line}'" "$out"
fi

# --- ranks whose calls differ: an error, not a hang or another's data ---
out=$SCR/mismatch.$np.out
job "$out" -np "$np" "${ENVS[@]}" -x MPI_COLL_EXPECT=cxl \
    -x MPI_COLL_ONLY=mismatch -x MPI_COLL_TIMEOUT=60 "$BIN"
mm=$(grep -c "the ranks' calls differ" "$out")
if passed && [ "$mm" -ge 1 ]; then
    ok "np $np mismatch: ${RES#mpi-coll: }; rank 1's bcast of 2 ints of the root's 1 failed, every later call on the communicator failed on every rank, $mm lines name it (${SECS} s)"
else
    fail "np $np mismatch" "rc $RC, '${RES:-no result line}', $mm lines name the mismatch" "$out"
fi

# --- the ranks' teams on two pools: declined, previous module -------------
out=$SCR/declined.out
# (-x applies to one application context: each gets all)
DENVS=("${ENVS[@]}" -x MPI_COLL_EXPECT=declined -x MPI_COLL_AVX=require)
job "$out" --mca coll_cxl_verbose 1 --mca op ^avx \
    -np 1 "${DENVS[@]}" env "CXL_COLL_POOL=$SPEC" "$BIN" : \
    -np 1 "${DENVS[@]}" env "CXL_COLL_POOL=$SPEC2" "$BIN"
dec=$(grep -cE 'coll:cxl: comm MPI_COMM_WORLD \(cid 0, rank [0-9]+ of 2\): declined: team creation failed' "$out")
if passed && [ "$dec" -eq 2 ]; then
    ok "declined: teams on two pools: MPI_COMM_WORLD declined on both ranks, ${RES#mpi-coll: } (${SECS} s)"
    grep -m1 'declined: team creation failed' "$out" | sed 's/^/    /'
else
    fail "declined" "rc $RC, '${RES:-no result line}', declined on $dec of 2 ranks" "$out"
fi

# --- control: a component that runs nowhere must fail the program -----------
out=$SCR/control.out
job "$out" -np 2 --mca coll_cxl_priority 20 "${ENVS[@]}" -x MPI_COLL_EXPECT=cxl \
    -x MPI_COLL_ONLY=barrier,fallbacks "$BIN"
if [ "$RC" -ne 0 ] && grep -q 'not run by the library' "$out"; then
    ok "control: coll/cxl below coll/tuned fails the program (rc $RC, 'not run by the library')"
else
    fail "control" "rc $RC, '${RES:-no result line}': the path check did not catch it" "$out"
fi

# --- control: without Open MPI's progress while waiting, the progress
# --- section must hang (and its watchdog end it) ----------------------------
out=$SCR/control-progress.out
job "$out" -np 2 --mca coll_cxl_progress_interval 2000000000 \
    --mca coll_cxl_spin_count 2000000000 "${ENVS[@]}" \
    -x MPI_COLL_EXPECT=cxl -x MPI_COLL_ONLY=progress -x MPI_COLL_TIMEOUT=15 "$BIN"
if [ "$RC" -ne 0 ] && grep -q 'timeout in check: progress' "$out"; then
    ok "control: coll_cxl_progress_interval and spin_count 2000000000 (spins, no progress while waiting) hang the progress check (watchdog, rc $RC)"
else
    fail "control (progress)" "rc $RC, '${RES:-no result line}': the progress check did not catch it" "$out"
fi

# --- a wait that yields progresses at every yield, whatever the interval
# --- (before: every progress_interval yields, and this hung) ----------------
out=$SCR/yield-progress.out
job "$out" -np 2 --mca coll_cxl_progress_interval 2000000000 "${ENVS[@]}" \
    -x MPI_COLL_EXPECT=cxl -x MPI_COLL_ONLY=progress,rma -x MPI_COLL_TIMEOUT=60 "$BIN"
if passed; then
    ok "yield: coll_cxl_progress_interval 2000000000 with the default spin: the progress and rma sections pass, progress at every yield (${SECS} s; $(sed -n 's/^rma: //p' "$out"))"
else
    fail "yield (progress)" "rc $RC, '${RES:-no result line}'" "$out"
fi

# --- window memory in the pool is read in place (hw: on the emulator the
# --- transport's mapping is another emulated host's view) -------------------
if [ "$COHERENCE" != sw ]; then
    out=$SCR/winbuf.out
    job "$out" -np 2 "${ENVS[@]}" -x UCX_ALLOC_PRIO=md:cxl,huge,thp,mmap,heap \
        -x CXL_COLL_LOG=y -x MPI_COLL_EXPECT=cxl -x MPI_COLL_ONLY=winbuf "$BIN"
    if passed && grep -q 'bcast 1048576 x uint8 root 0: .*read in place from the pool buffer' "$out"; then
        ok "MPI_Win_allocate memory as MPI_Bcast's root buffer: read in place from the pool"
    else
        fail "winbuf" "rc $RC, '${RES:-no result line}': not read in place" "$out"
    fi
fi

# --- MPI_Alloc_mem from the pool (mpool/cxl): read in place -----------------
info_check mpool 3.0.0 3
# np 3: allgather and alltoall blocks of a rank are not the whole buffer
for prio in conf 0; do
    out=$SCR/allocmem.$prio.out
    pr=()
    [ "$prio" = 0 ] && pr=(--mca mpool_cxl_priority 0)
    job "$out" -np 3 "${pr[@]}" "${ENVS[@]}" -x CXL_COLL_LOG=y \
        -x MPI_COLL_EXPECT=cxl -x MPI_COLL_ONLY=allocmem "$BIN"
    # bcast: the root's line says how it published (in place or through
    # the slot); allgather: every rank's
    inb=$(grep -c 'bcast 262144 x uint8 root 0: .*read in place from the pool buffer' "$out")
    ing=$(grep -c 'allgather 262144 x uint8: .*read in place from the pool buffer' "$out")
    sg=$(grep -c 'allgather 262144 x uint8: .*through the slot' "$out")
    if [ "$prio" = conf ]; then
        # 3 calls: the root's 3 bcast lines, 3 ranks' 9 allgather lines
        if passed && [ "$inb" -eq 3 ] && [ "$ing" -eq 9 ] && [ "$sg" -eq 0 ]; then
            ok "mpool/cxl: MPI_Alloc_mem buffers, np 3: ${RES#mpi-coll: }; read in place by bcast ($inb of 3 root calls) and allgather ($ing of 9)"
        else
            fail "mpool/cxl" "rc $RC, '${RES:-no result line}': in place: bcast $inb of 3, allgather $ing of 9; allgather through the slot $sg" "$out"
        fi
    elif passed && [ "$inb" -eq 0 ] && [ "$ing" -eq 0 ] && [ "$sg" -eq 9 ]; then
        ok "mpool/cxl off (mpool_cxl_priority 0): MPI_Alloc_mem is malloc, np 3: ${RES#mpi-coll: }; allgather copied through the slot"
    else
        fail "mpool/cxl off" "rc $RC, '${RES:-no result line}': in place $inb + $ing, allgather through the slot $sg of 9" "$out"
    fi
done

# --- op/avx: Open MPI's default operations, an observation --------------------
out=$SCR/avx.out
job "$out" -np 2 --mca coll ^cxl "${ENVS[@]}" -x MPI_COLL_EXPECT=off \
    -x MPI_COLL_ONLY=avx "$BIN"
avx=$(grep -m1 '^avx-check:' "$out")
if [ "$RC" -eq 0 ] && [ -n "$avx" ]; then
    echo "# observation: without coll/cxl, Open MPI's default ops: $avx"
    case "$avx" in
        "avx-check: saturated"*)
            echo "#   (op/avx saturates 8-bit sums; the 'np N off' runs use --mca op ^avx)" ;;
    esac
else
    echo "# observation: op/avx run failed (rc $RC)"
fi

echo "mpi-coll: $PASS passed, $FAIL failed"
[ $FAIL -eq 0 ]
