#!/usr/bin/env bash
#
# run-mpi-icoll.sh - Open MPI's non-blocking collectives (MPI_Ibarrier,
# MPI_Ibcast, ... MPI_Ialltoall) through coll/cxl: build
# test/mpi/mpi_icoll_test.c and run it over pml ucx with UCX_TLS=cxl (the
# transport preloaded, contrib/openmpi-cxl.conf as run-mpi-coll.sh uses it)
# at every np, with coll/cxl from the build tree, without it, and with its
# non-blocking collectives off; at np 2 also with its teams declined (two
# pools) and with teams made only at a blocking collective.
#
#   test/mpi/run-mpi-icoll.sh [BUILDDIR]
#
#   BUILDDIR   build directory holding .libs/libuct_cxl.so,
#              .libs/mca_coll_cxl.so and cxlpool (default: $CXL_BUILDDIR,
#              else build-release/ or build/ at the top of the source tree);
#              the program goes to BUILDDIR/test/mpi/mpi_icoll_test
#
# Checks, each "ok ..." or "FAIL ...":
#   ompi_info    lists coll_cxl_nonblocking, coll_cxl_nb_team and
#                coll_cxl_cid_prev with their help texts
#   np N cxl     coll/cxl selected (--mca mca_base_component_path with the
#                build tree first; np 1: coll_cxl_min_ranks 1 and priority
#                90, above coll/self): every section of the program (its
#                nbteam section included), every result right, and every
#                non-blocking call on the path expected: the program reads
#                coll/cxl's MPI_T counters (coll_cxl_calls, coll_cxl_nb_calls,
#                coll_cxl_fallbacks, the coll_cxl_teams level) per call, or
#                per section where calls are outstanding together; calls on
#                a communicator without a team yet start one
#                (coll_cxl_nb_team, on by default) and run in the library;
#                a coll/cxl without coll_cxl_nb_calls fails
#   np N off     the same program with --mca coll ^cxl --mca op ^avx (Open
#                MPI's libnbc; op/avx saturates 8-bit sums): every result
#                right and the same digest of all results as with coll/cxl
#   np N nb-off  np 2 and 3: --mca coll_cxl_nonblocking 0 --mca op ^avx:
#                coll/cxl takes the blocking calls only (coll_cxl_nb_calls
#                stays 0), results right, the same digest
#   thread       np 2 under MPI_THREAD_MULTIPLE with coll/cxl: results
#                right, calls on their paths, the same digest
#   declined     np 2 with the ranks' teams on two different pools
#                (CXL_COLL_POOL, MPMD; --mca op ^avx --mca coll_cxl_verbose
#                1): every rank's verbose output says MPI_COMM_WORLD's team
#                was started at a non-blocking collective and declined
#                ("team creation failed"); every call, held ones included,
#                is counted a fallback, no team, results right, the same
#                digest
#   nb_team 0    np 2 with --mca coll_cxl_nb_team 0 (and op ^avx): calls
#                before a communicator's first blocking collective are the
#                previous module's (MPI_ICOLL_NBTEAM=0), no verbose line says
#                a team was started at a non-blocking collective, the same
#                digest
#   control      np 2, the nbteam section with --mca coll_cxl_nb_team 0 but
#                the program expecting coll_cxl_nb_team: it must fail, each of
#                its five counter checks on every rank, results still right
#   idupnb       np 2, MPI_Iallreduce/MPI_Ibcast on MPI_COMM_WORLD while an
#                MPI_Comm_idup of it is under way: right with coll/cxl (the
#                same without coll/cxl is printed as a note: Open MPI 4.1.4
#                gets some wrong)
#   control      np 2, the idup section with --mca coll_cxl_cid_prev 0: it
#                must fail (Open MPI's context-id calls pair with the
#                program's in the team: "the ranks' calls differ")
#
# Environment:
#   MPI_ICOLL_NPS="1 2 3 4 5 8"   the np values
#   MPI_ICOLL_LARGE=65537         elements of the large counts
#   MPI_ICOLL_TIMEOUT=300         watchdog of the program (seconds)
#   RUN_MPI_TIMEOUT=600           limit of each mpirun (seconds)
#   CXL_TEST_COHERENCE=hw         sw: on the strict non-coherent pool
#                                 emulator, each rank an emulated host (as
#                                 run-mpi-coll.sh; 2 host partitions per
#                                 rank: the transport's, the library's)
#
# Ends with "mpi-icoll: N passed, N failed"; exit 0 only when nothing
# failed, 99 when something needed is missing or the build fails.
set -uo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$SCRIPT_DIR/mpi-common.sh"
mpi_builddir "$0" "$@"

NPS=${MPI_ICOLL_NPS:-1 2 3 4 5 8}
LIMIT=${RUN_MPI_TIMEOUT:-600}
maxnp=3                             # the nb-off runs' np
for np in $NPS; do [ "$np" -gt "$maxnp" ] && maxnp=$np; done
mpi_coll_setup mpi_icoll_test MPI_ICOLL_ "$maxnp"
echo "run-mpi-icoll.sh: mpirun line (np N, coll/cxl):"
echo "  $(printf '%q ' "${BASE[@]}" -np N "${ENVS[@]}" \
      -x MPI_ICOLL_EXPECT=cxl -x MPI_ICOLL_MIN_RANKS=2 "$BIN")"

PASS=0 FAIL=0
ok()   { PASS=$((PASS + 1)); echo "ok $1"; }
# a failed run's telling lines; a process killed by a signal (UCX's
# "Caught signal" and its backtrace, mpirun's "exited on signal") too
# (coll/cxl's error lines repeat for every later call of a failed team:
# the first 5 of them)
fail() {
    FAIL=$((FAIL + 1)); echo "FAIL $1: $2"
    mpi_job_output "$3" | sed 's/^/    /' |
        grep -E 'FAIL|rror|coll:cxl|mpi-icoll:|counters:|timeout|[Ss]ignal|Illegal|backtrace|^ *[0-9]+ +0x|mca_coll_cxl\.so' |
        awk '/coll:cxl:/ && ++n > 5 { next } { print }' | head -40
}

# --- ompi_info: the parameters that turn the non-blocking forms off, and
# --- the teams started by them -------------------------------------------------
# (ompi_info takes the component path from the environment, not --mca)
out=$SCR/info.out
OMPI_MCA_mca_base_component_path="$BUILD/.libs:$OMPI_COMPDIR" \
    ompi_info --param coll cxl --level 9 --parsable >"$out" 2>&1
for param in coll_cxl_nonblocking coll_cxl_nb_team coll_cxl_cid_prev; do
    if grep -q "^mca:coll:cxl:param:$param:value:" "$out" &&
       grep -qE "^mca:coll:cxl:param:$param:help:.{20,}" "$out"; then
        ok "ompi_info: $param ($(sed -n "s/^mca:coll:cxl:param:$param:value://p" "$out")), with help"
    else
        fail "ompi_info" "$param not listed with a help text" "$out"
    fi
done

# job OUT ARGS...: one mpirun (mpi_job: RC, RES, DIGEST, CNT, SECS)
job() {
    local out=$1
    shift
    mpi_job mpi-icoll "$LIMIT" "$out" "${BASE[@]}" "$@"
}

# passed: rc 0 and "N checks, 0 failed" with N > 0
passed() {
    mpi_passed mpi-icoll
}

# same_digest NP RUN: DIGEST is the one of the first run at np NP that
# passed (none yet: this one is); DNOTE says which
declare -A DIGESTS=() DFIRST=()
same_digest() {
    local want=${DIGESTS[$1]:-}
    [ -n "$DIGEST" ] || return 1
    if [ -z "$want" ]; then
        DIGESTS[$1]=$DIGEST
        DFIRST[$1]=$2
        DNOTE="digest $DIGEST (the first run at np $1 that passed)"
        return 0
    fi
    DNOTE="digest $DIGEST as with ${DFIRST[$1]}"
    [ "$DIGEST" = "$want" ]
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
    job "$out" -np "$np" "${extra[@]}" "${ENVS[@]}" \
        -x MPI_ICOLL_EXPECT=cxl -x "MPI_ICOLL_MIN_RANKS=$min" "$BIN"
    if passed && same_digest "$np" "coll/cxl"; then
        ok "np $np cxl: ${RES#mpi-icoll: }; $CNT; $DNOTE (${SECS} s)"
    else
        fail "np $np cxl" "rc $RC, '${RES:-no result line}', ${CNT:-no counters}, digest '$DIGEST' (others at np $np: '${DIGESTS[$np]:-}')" "$out"
    fi

    out=$SCR/off.$np.out
    job "$out" -np "$np" --mca coll ^cxl --mca op ^avx "${ENVS[@]}" \
        -x MPI_ICOLL_EXPECT=off "$BIN"
    if passed && same_digest "$np" "libnbc (coll ^cxl)"; then
        ok "np $np off: ${RES#mpi-icoll: }; $DNOTE (${SECS} s)"
    else
        fail "np $np off" "rc $RC, '${RES:-no result line}', digest '$DIGEST' (others at np $np: '${DIGESTS[$np]:-}')" "$out"
    fi
done

# --- coll_cxl_nonblocking 0: the blocking calls only -------------------------
# (the non-blocking ones are libnbc's, whose 8-bit sums need op ^avx)
for np in 2 3; do
    out=$SCR/nboff.$np.out
    job "$out" -np "$np" --mca coll_cxl_nonblocking 0 --mca op ^avx \
        "${ENVS[@]}" -x MPI_ICOLL_EXPECT=nb-off "$BIN"
    if passed && same_digest "$np" "coll_cxl_nonblocking 0"; then
        ok "np $np nb-off (coll_cxl_nonblocking 0): ${RES#mpi-icoll: }; $CNT; $DNOTE (${SECS} s)"
    else
        fail "np $np nb-off" "rc $RC, '${RES:-no result line}', ${CNT:-no counters}, digest '$DIGEST' (others at np $np: '${DIGESTS[$np]:-}')" "$out"
    fi
done

# --- MPI_THREAD_MULTIPLE: requests completed from the progress engine with
# --- the locks taken ---------------------------------------------------------
np=2
out=$SCR/thread.$np.out
job "$out" -np "$np" "${ENVS[@]}" -x MPI_ICOLL_EXPECT=cxl \
    -x MPI_ICOLL_THREAD=multiple "$BIN"
if passed && same_digest "$np" "MPI_THREAD_MULTIPLE"; then
    ok "np $np MPI_THREAD_MULTIPLE: ${RES#mpi-icoll: }; $CNT; $DNOTE (${SECS} s)"
else
    fail "np $np MPI_THREAD_MULTIPLE" "rc $RC, '${RES:-no result line}', ${CNT:-no counters}, digest '$DIGEST' (others at np $np: '${DIGESTS[$np]:-}')" "$out"
fi

# --- the ranks' teams on two pools: every team declined ----------------------
# MPI_COMM_WORLD's first call (the program's MPI_Ibarrier) starts its team,
# whose creation fails on both ranks; the held calls, and every later one,
# go to libnbc (op ^avx: 8-bit sums)
np=2
out=$SCR/declined.out
# (-x applies to one application context: each gets all)
DENVS=("${ENVS[@]}" -x MPI_ICOLL_EXPECT=declined)
job "$out" --mca coll_cxl_verbose 1 --mca op ^avx \
    -np 1 "${DENVS[@]}" env "CXL_COLL_POOL=$SPEC" "$BIN" : \
    -np 1 "${DENVS[@]}" env "CXL_COLL_POOL=$SPEC2" "$BIN"
dec=$(grep -cE 'coll:cxl: comm MPI_COMM_WORLD \(cid 0, rank [0-9]+ of 2\): declined: team creation failed' "$out")
started=$(grep -cE 'coll:cxl: comm MPI_COMM_WORLD .*team started at a non-blocking collective' "$out")
if passed && [ "$dec" -eq 2 ] && [ "$started" -eq 2 ] &&
   same_digest "$np" "every team declined"; then
    ok "np $np declined (teams on two pools): ${RES#mpi-icoll: }; $CNT; MPI_COMM_WORLD's team started at a non-blocking call and declined on both ranks; $DNOTE (${SECS} s)"
    grep -m1 'declined: team creation failed' "$out" | sed 's/^/    /'
else
    fail "np $np declined" "rc $RC, '${RES:-no result line}', ${CNT:-no counters}, MPI_COMM_WORLD's team started at a non-blocking call on $started and declined on $dec of 2 ranks, digest '$DIGEST' (others at np $np: '${DIGESTS[$np]:-}')" "$out"
fi

# --- coll_cxl_nb_team 0: no team before a blocking collective ----------------
# (calls before it are libnbc's, whose 8-bit sums need op ^avx)
out=$SCR/nbteam0.$np.out
job "$out" -np "$np" --mca coll_cxl_nb_team 0 --mca coll_cxl_verbose 1 \
    --mca op ^avx "${ENVS[@]}" -x MPI_ICOLL_EXPECT=cxl -x MPI_ICOLL_NBTEAM=0 \
    "$BIN"
started=$(grep -c 'team started at a non-blocking collective' "$out")
if passed && [ "$started" -eq 0 ] && same_digest "$np" "coll_cxl_nb_team 0"; then
    ok "np $np nb_team 0 (coll_cxl_nb_team 0): ${RES#mpi-icoll: }; $CNT; no team started at a non-blocking call; $DNOTE (${SECS} s)"
else
    fail "np $np nb_team 0" "rc $RC, '${RES:-no result line}', ${CNT:-no counters}, $started verbose lines say a team was started at a non-blocking call, digest '$DIGEST' (others at np $np: '${DIGESTS[$np]:-}')" "$out"
fi

# --- control: the nbteam section must tell coll_cxl_nb_team 0 from 1 --------
# (every FAIL line printed: MPI_ICOLL_MAX_PRINT; results must stay right;
# the ranks' FAIL lines may interleave, so they are counted where they
# start, not by line)
out=$SCR/control-nbteam.$np.out
job "$out" -np "$np" --mca coll_cxl_nb_team 0 --mca op ^avx "${ENVS[@]}" \
    -x MPI_ICOLL_EXPECT=cxl -x MPI_ICOLL_NBTEAM=1 -x MPI_ICOLL_ONLY=nbteam \
    -x MPI_ICOLL_MAX_PRINT=100 -x MPI_ICOLL_TIMEOUT=120 "$BIN"
cfail=$(grep -oE 'FAIL: rank [0-9]+: nbteam: counters ' "$out" | wc -l)
rfail=$(grep -oE 'element [0-9]+ of [0-9]+|block [0-9]+ \(from rank|guard bytes behind|gap byte [0-9]+|send buffer changed' "$out" | wc -l)
if [ "$RC" -ne 0 ] && [ "$cfail" -eq $((5 * np)) ] && [ "$rfail" -eq 0 ]; then
    ok "control: coll_cxl_nb_team 0 against the nbteam section's expectations fails it (rc $RC; its 5 counter checks on all $np ranks, no wrong result)"
else
    fail "control (nb_team)" "rc $RC, '${RES:-no result line}': $cfail of $((5 * np)) nbteam counter checks failed, $rfail wrong results" "$out"
fi

# --- idupnb: the program's non-blocking calls during an MPI_Comm_idup -------
# (right with coll/cxl; Open MPI alone is reported, not judged: libnbc pairs
# them with its context-id rounds, at moments that vary from run to run)
out=$SCR/idupnb.$np.out
job "$out" -np "$np" "${ENVS[@]}" -x MPI_ICOLL_EXPECT=cxl \
    -x MPI_ICOLL_ONLY=idupnb "$BIN"
if passed; then
    ok "np $np idupnb (MPI_Iallreduce/MPI_Ibcast on MPI_COMM_WORLD during its MPI_Comm_idup): ${RES#mpi-icoll: }; $CNT (${SECS} s)"
else
    fail "np $np idupnb" "rc $RC, '${RES:-no result line}', ${CNT:-no counters}" "$out"
fi
out=$SCR/idupnb-off.$np.out
job "$out" -np "$np" --mca coll ^cxl --mca op ^avx "${ENVS[@]}" \
    -x MPI_ICOLL_EXPECT=off -x MPI_ICOLL_ONLY=idupnb -x MPI_ICOLL_TIMEOUT=20 \
    "$BIN"
first=$(grep -m1 -E 'FAIL: |timeout' "$out" | cut -c1-160)
echo "note: the same without coll/cxl (Open MPI's libnbc): rc $RC, ${RES:-no result line}${first:+; first: $first}"

# --- control: the idup section must tell coll_cxl_cid_prev 0 from 1 ---------
# (Open MPI's context-id calls in the team pair with the program's blocking
# calls on some ranks: "the ranks' calls differ", or a counter check)
out=$SCR/control-cid.$np.out
job "$out" -np "$np" --mca coll_cxl_cid_prev 0 "${ENVS[@]}" \
    -x MPI_ICOLL_EXPECT=cxl -x MPI_ICOLL_ONLY=idup -x MPI_ICOLL_TIMEOUT=120 \
    "$BIN"
differ=$(grep -c "the ranks' calls differ: rank" "$out")
cfail=$(grep -oE 'FAIL: rank [0-9]+: idup: counters ' "$out" | wc -l)
if [ "$RC" -ne 0 ] && [ $((differ + cfail)) -gt 0 ]; then
    ok "control: coll_cxl_cid_prev 0 fails the idup section (rc $RC; $differ ranks' calls differ, $cfail counter checks failed)"
else
    fail "control (cid_prev)" "rc $RC, '${RES:-no result line}': $differ 'calls differ' lines, $cfail idup counter checks failed" "$out"
fi

echo "mpi-icoll: $PASS passed, $FAIL failed"
[ $FAIL -eq 0 ]
