#!/usr/bin/env bash
#
# test_mpi_job.sh - mpi_job (mpi-common.sh) gives the checks each rank's
# lines whole.  run-mpi-coll.sh and run-mpi-icoll.sh count lines that every
# rank prints ("accepted", "FAIL: rank N: ..."); on mpirun's merged output a
# rank's line that reaches mpirun in two pieces has another rank's line
# between them, and the count comes out wrong (the hpcc test's count of
# calls per rank failed that way in 1 of ~6 runs, stop 41).
#
# Usage: test_mpi_job.sh [-h|--help]
# Runs 2 ranks through mpi_job: rank 0 writes each of its lines in two
# pieces 50 ms apart, rank 1 writes whole lines meanwhile.  Every line of
# both ranks must be in OUT whole, and mpirun's merged output (OUT.mpirun)
# must show the interleaving, else the test proves nothing.  Needs mpirun;
# exit 77 (skip) without it.  Ends with "mpi-job: N passed, N failed".
set -u
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$SCRIPT_DIR/mpi-common.sh"
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found"; exit 77; }

SCR=$(mktemp -d "${TMPDIR:-/tmp}/test-mpi-job.XXXXXX") || exit 99
trap 'rm -rf "$SCR"' EXIT
N=10
pass=0
fail=0

# rank 0: "rank 0 line I: " then, 50 ms later, "whole"; rank 1: its lines
# whole, 20 ms apart (both to stderr, unbuffered, like the component's
# verbose lines)
cat >"$SCR/rank.sh" <<'EOF'
n=$1
if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then
    for ((i = 0; i < n; i++)); do
        printf 'rank 0 line %d: ' "$i" >&2
        sleep 0.05
        printf 'whole\n' >&2
    done
else
    for ((i = 0; i < 2 * n; i++)); do
        printf 'rank 1 line %d: whole\n' "$i" >&2
        sleep 0.02
    done
fi
EOF
out=$SCR/job.out
mpi_job mpi-job 60 "$out" mpirun --allow-run-as-root --oversubscribe \
    --mca btl self --mca pml ob1 -np 2 bash "$SCR/rank.sh" "$N"

whole0=$(grep -cE '^rank 0 line [0-9]+: whole$' "$out")
whole1=$(grep -cE '^rank 1 line [0-9]+: whole$' "$out")
if [ "$RC" -eq 0 ] && [ "$whole0" -eq "$N" ] && [ "$whole1" -eq $((2 * N)) ]; then
    echo "ok: every line whole in OUT: $whole0 of rank 0 (written in two pieces), $whole1 of rank 1"
    pass=$((pass + 1))
else
    echo "FAIL: rc $RC, whole lines in OUT: rank 0 $whole0 of $N, rank 1 $whole1 of $((2 * N))"
    sed 's/^/    /' "$out" | head -n 20
    fail=$((fail + 1))
fi

# the control: the merged output breaks lines, so OUT alone explains the pass
merged=$(grep -cE '^rank 0 line [0-9]+: whole$' "$out.mpirun")
if [ "$merged" -lt "$N" ]; then
    echo "ok: control: mpirun's merged output has $merged of rank 0's $N lines whole"
    pass=$((pass + 1))
else
    echo "FAIL: control: mpirun's merged output kept all $N lines of rank 0 whole; the test shows nothing"
    fail=$((fail + 1))
fi

echo "mpi-job: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
