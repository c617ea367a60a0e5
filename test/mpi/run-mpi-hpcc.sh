#!/usr/bin/env bash
#
# run-mpi-hpcc.sh - an unchanged MPI application through coll/cxl: Debian's
# HPC Challenge (hpcc 1.5: HPL, PTRANS, RandomAccess, FFT, STREAM, DGEMM,
# latency/bandwidth), which checks its own results, over pml ucx with
# UCX_TLS=cxl, once with coll/cxl from the build tree and once without it.
#
#   test/mpi/run-mpi-hpcc.sh [BUILDDIR]
#
#   BUILDDIR   build directory holding .libs/libuct_cxl.so,
#              .libs/mca_coll_cxl.so and cxlpool (as run-mpi-coll.sh)
#
# Checks, each "ok ..." or "FAIL ...", at np 2 (process grid 1 x 2) and
# np 4 (2 x 2, oversubscribed on 2 cores):
#   np N cxl   hpcc ends with rc 0 and Success=1, HPL and PTRANS with "0
#              tests completed and failed residual checks", MPIRandomAccess
#              with 0 errors, MPIFFT's largest error below 1e-9; every rank
#              accepted MPI_COMM_WORLD, and every rank ran at least 100
#              collectives in the library (coll_cxl_verbose 20 prints one
#              line per call; hpcc makes ~1700 at np 4: allreduce,
#              alltoall, bcast, barrier, reduce, gather, allgather)
#   np N off   the same with --mca coll ^cxl
# The summary line of each run lists HPL's Tflops and the run's seconds
# (an observation: the problem is small, N = 1000).
#
# Environment:
#   MPI_HPCC_NPS="2 4"         the np values (a square or 1 x N grid each)
#   RUN_MPI_TIMEOUT=600        limit of each mpirun (seconds)
#   CXL_TEST_COHERENCE=hw      sw: on the strict non-coherent pool emulator
#
# Ends with "mpi-hpcc: N passed, N failed"; exit 0 only when nothing
# failed, 99 when something needed is missing (hpcc: apt-get install hpcc,
# done by contrib/setup-deps.sh).
set -uo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$SCRIPT_DIR/mpi-common.sh"
mpi_builddir "$0" "$@"

NPS=${MPI_HPCC_NPS:-2 4}
LIMIT=${RUN_MPI_TIMEOUT:-600}
HPCC=$(command -v hpcc) || {
    echo "run-mpi-hpcc.sh: hpcc not found (apt-get install hpcc)" >&2; exit 99; }
maxnp=1
for np in $NPS; do [ "$np" -gt "$maxnp" ] && maxnp=$np; done
mpi_coll_env "$maxnp"
echo "run-mpi-hpcc.sh: $HPCC"

PASS=0 FAIL=0
ok()   { PASS=$((PASS + 1)); echo "ok $1"; }
fail() {
    FAIL=$((FAIL + 1))
    echo "FAIL $1: $2"
    [ -n "${3:-}" ] && [ -f "$3" ] && tail -n 25 "$3" | sed 's/^/    /'
}

# hpccinf NP DIR: hpcc's input (HPL's format) for NP ranks: N = 1000, one
# process grid P x Q with P the largest divisor of NP up to its square
# root; PTRANS and the rest take their sizes from HPL's
hpccinf() {
    local np=$1 dir=$2 p=1 q i
    for ((i = 1; i * i <= np; ++i)); do
        [ $((np % i)) -eq 0 ] && p=$i
    done
    q=$((np / p))
    cat >"$dir/hpccinf.txt" <<EOF
HPLinpack benchmark input file (run-mpi-hpcc.sh)
ucx-cxl test
HPL.out      output file name (if any)
8            device out (6=stdout,7=stderr,file)
1            # of problems sizes (N)
1000         Ns
1            # of NBs
80           NBs
0            PMAP process mapping (0=Row-,1=Column-major)
1            # of process grids (P x Q)
$p            Ps
$q            Qs
16.0         threshold
1            # of panel fact
2            PFACTs (0=left, 1=Crout, 2=Right)
1            # of recursive stopping criterium
4            NBMINs (>= 1)
1            # of panels in recursion
2            NDIVs
1            # of recursive panel fact.
1            RFACTs (0=left, 1=Crout, 2=Right)
1            # of broadcast
1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
1            # of lookahead depth
1            DEPTHs (>=0)
2            SWAP (0=bin-exch,1=long,2=mix)
64           swapping threshold
0            L1 in (0=transposed,1=no-transposed) form
0            U  in (0=transposed,1=no-transposed) form
1            Equilibration (0=no,1=yes)
8            memory alignment in double (> 0)
##### This line (no. 32) is ignored (it serves as a separator). ######
0                               Number of additional problem sizes for PTRANS
1200                            values of N
0                               number of additional blocking sizes for PTRANS
40                              values of NB
EOF
    GRID="$p x $q"
}

# summary KEY FILE: a value of hpcc's summary section
summary() {
    sed -n "s/^$1=//p" "$2" | tail -n 1
}

# verify LABEL DIR LOG: hpcc's own checks; sets WHY to what failed
verify() {
    local dir=$1 out=$1/hpccoutf.txt fft bad
    WHY=
    [ "$RC" -eq 0 ] || WHY="rc $RC"
    [ -f "$out" ] || { WHY="${WHY:+$WHY, }no hpccoutf.txt"; return; }
    [ "$(summary Success "$out")" = 1 ] || WHY="${WHY:+$WHY, }Success is not 1"
    bad=$(grep -cE '^ *[1-9][0-9]* tests completed and failed residual checks' "$out")
    [ "$(grep -cE '^ *0 tests completed and failed residual checks' "$out")" -ge 2 ] &&
        [ "$bad" -eq 0 ] || WHY="${WHY:+$WHY, }HPL or PTRANS failed a residual check"
    [ "$(summary MPIRandomAccess_Errors "$out")" = 0 ] ||
        WHY="${WHY:+$WHY, }MPIRandomAccess errors: $(summary MPIRandomAccess_Errors "$out")"
    fft=$(summary MPIFFT_maxErr "$out")
    awk -v e="${fft:-1}" 'BEGIN { exit !(e < 1e-9) }' ||
        WHY="${WHY:+$WHY, }MPIFFT_maxErr ${fft:-missing}"
}

for np in $NPS; do
    for mode in cxl off; do
        dir=$SCR/$mode.$np
        mkdir -p "$dir"
        hpccinf "$np" "$dir"
        log=$dir/mpirun.out
        if [ "$mode" = cxl ]; then
            # each rank's output in a file of its own: on mpirun's output
            # the ranks' lines interleave, even inside a line
            extra=(--mca coll_cxl_verbose 20 --output-filename "$dir/ranks")
        else
            extra=(--mca coll ^cxl)
        fi
        (cd "$dir" && mpi_job mpi-hpcc "$LIMIT" "$log" "${BASE[@]}" -np "$np" \
            "${extra[@]}" "${ENVS[@]}" "$HPCC"; echo "$RC $SECS" >"$dir/rc")
        read -r RC SECS <"$dir/rc"
        verify "$dir"
        tf=$(summary HPL_Tflops "$dir/hpccoutf.txt" 2>/dev/null)
        if [ "$mode" = cxl ]; then
            acc=0 least=
            for f in "$dir"/ranks/1/rank.*/stderr; do
                [ -f "$f" ] || continue
                grep -qE "coll:cxl: comm MPI_COMM_WORLD \(cid 0, rank [0-9]+ of $np\): accepted" "$f" &&
                    acc=$((acc + 1))
                # the collectives this rank ran in the library
                n=$(grep -cE 'coll:cxl: MPI_[A-Za-z]+ on .*: library,' "$f")
                [ -z "$least" ] || [ "$n" -lt "$least" ] && least=$n
            done
            [ "$acc" -eq "$np" ] || WHY="${WHY:+$WHY, }MPI_COMM_WORLD accepted on $acc of $np ranks"
            [ "${least:-0}" -ge 100 ] || WHY="${WHY:+$WHY, }fewest library calls of a rank: ${least:-0}"
            what="MPI_COMM_WORLD accepted on every rank, at least $least collectives per rank in the library"
        else
            what="coll/cxl excluded"
        fi
        if [ -z "$WHY" ]; then
            ok "np $np $mode (grid $GRID): hpcc's checks pass (Success=1, HPL and PTRANS residuals, RandomAccess 0 errors, FFT error $(summary MPIFFT_maxErr "$dir/hpccoutf.txt")); $what; HPL ${tf:-?} Tflops (${SECS} s)"
        else
            cp "$dir/hpccoutf.txt" "$log.hpccoutf" 2>/dev/null
            fail "np $np $mode (grid $GRID)" "$WHY" "$log"
        fi
    done
done

echo "mpi-hpcc: $PASS passed, $FAIL failed"
[ $FAIL -eq 0 ]
