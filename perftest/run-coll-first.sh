#!/usr/bin/env bash
#
# run-coll-first.sh - a program that only starts non-blocking collectives
# (perftest/coll_first.c: MPI_Iallreduce of 8 bytes + MPI_Wait on fresh
# communicators, never a blocking collective on them) under coll/cxl and
# under what it gets without it, in one command.  Shows what a team made
# at a non-blocking call costs once (the first call) and gives (the calls
# after it).
#
# Configurations, run ALTERNATING, --reps times:
#   cxl          coll/cxl (coll_cxl_nb_team true, the default): the first
#                call starts the team without waiting and is held until
#                it is made; later calls run in the library
#   cxl-nbteam0  coll/cxl with coll_cxl_nb_team false (before stop 39):
#                no blocking collective ever makes a team, so every call
#                is libnbc's
#   cxl-cid0     coll/cxl with coll_cxl_cid_prev false (before stop 40):
#                Open MPI's context-id calls of each MPI_Comm_dup run in
#                MPI_COMM_WORLD's team, not in libnbc
#   libnbc       Open MPI's default selection without coll/cxl (libnbc
#                over pml ucx with UCX_TLS=cxl)
# All four on pml ucx over the ucx-cxl transport (LD_PRELOAD of
# libuct_cxl.so, --tune contrib/openmpi-cxl.conf), np 2 bound to cores.
#
# Figures (us), for the first call, the later calls and the MPI_Comm_dup
# that made the communicator: per communicator the slowest rank's; per run
# the median over --dups communicators; per configuration the median
# [min-max] over the runs, and the ratio of cxl's median to each other's.
# Nothing is asserted: it measures and reports (results.md, results.csv,
# raw/).
#
# Usage: perftest/run-coll-first.sh [--reps N] [--dups N] [--calls N]
#          [--out DIR] [--builddir DIR] [--help]
#   --reps N       runs per configuration (default 5)
#   --dups N       fresh communicators per run (default 20)
#   --calls N      calls timed after the first, per communicator
#                  (default 200)
#   --out DIR      output folder (default perftest/out/coll-first-<date>)
#   --builddir DIR build folder with .libs/libuct_cxl.so,
#                  .libs/mca_coll_cxl.so and cxlpool (default
#                  build-release, built by contrib/build.sh if missing)
#   -h, --help     this text
set -uo pipefail

PROG=run-coll-first
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$SCRIPT_DIR/.." && pwd)
REPS=5 DUPS=20 CALLS=200 OUT="" BUILDDIR=""

. "$SCRIPT_DIR/bench-common.sh"

while (($#)); do
    case $1 in
        --reps) need "$1" $#; REPS=$2; shift ;;
        --dups) need "$1" $#; DUPS=$2; shift ;;
        --calls) need "$1" $#; CALLS=$2; shift ;;
        --out) need "$1" $#; OUT=$2; shift ;;
        --builddir) need "$1" $#; BUILDDIR=$2; shift ;;
        -h | --help) usage; exit 0 ;;
        *) printf '%s: unknown option %q (see --help)\n' "$PROG" "$1" >&2; exit 2 ;;
    esac
    shift
done
for v in REPS DUPS CALLS; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "--${v,,} ${!v}: not a positive number"
done

if [[ -z $BUILDDIR ]]; then
    BUILDDIR=$REPO_DIR/build-release
    [[ -f $BUILDDIR/.libs/mca_coll_cxl.so ]] ||
        "$REPO_DIR/contrib/build.sh" release >&2 || die "contrib/build.sh release failed"
fi
BUILDDIR=$(cd "$BUILDDIR" && pwd) || die "--builddir: no such folder"
MODULE=$BUILDDIR/.libs/libuct_cxl.so
COMPDIR=$BUILDDIR/.libs
for f in "$MODULE" "$COMPDIR/mca_coll_cxl.so" "$BUILDDIR/cxlpool"; do
    [[ -f $f ]] || die "$f missing (build with contrib/build.sh release)"
done
OUT=${OUT:-$REPO_DIR/perftest/out/coll-first-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT/raw" || die "can not create $OUT"
RUNLOG=$OUT/run.log T_START=$SECONDS
: >"$RUNLOG"

BIN=$OUT/coll_first
mpicc -O2 -g -Wall -Wextra -Werror -o "$BIN" "$SCRIPT_DIR/coll_first.c" \
    2>"$OUT/build.log" || die "mpicc failed: $(head -n5 "$OUT/build.log")"

POOL=/dev/shm/$PROG-$$.pool
"$BUILDDIR/cxlpool" create "$POOL" --size 512M >"$OUT/pool.log" 2>&1 ||
    die "cxlpool create $POOL: $(cat "$OUT/pool.log")"
trap 'rm -f "$POOL"' EXIT

OMPI_COMP=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
BASE=(mpirun --allow-run-as-root -np 2 --bind-to core
      --tune "$REPO_DIR/contrib/openmpi-cxl.conf"
      --mca mca_base_component_path "$COMPDIR:$OMPI_COMP"
      -x "LD_PRELOAD=$MODULE" -x UCX_TLS=cxl -x "UCX_CXL_POOL=$POOL")
CONFIGS=(cxl cxl-nbteam0 cxl-cid0 libnbc)
config_args() {
    case $1 in
        cxl) echo "--mca coll_cxl_priority 90 --mca coll_cxl_nb_team 1" ;;
        cxl-nbteam0) echo "--mca coll_cxl_priority 90 --mca coll_cxl_nb_team 0" ;;
        cxl-cid0) echo "--mca coll_cxl_priority 90 --mca coll_cxl_cid_prev 0" ;;
        libnbc) echo "--mca coll ^cxl" ;;
    esac
}

echo "config,rep,first_med,first_min,first_max,steady_med,steady_min,steady_max,dup_med,dup_min,dup_max" >"$OUT/results.csv"
msg "np 2, $DUPS communicators x (1 + $CALLS) calls per run, $REPS runs per configuration, alternating"
for ((rep = 1; rep <= REPS; ++rep)); do
    for cfg in "${CONFIGS[@]}"; do
        raw=$OUT/raw/$cfg-$rep.out
        # shellcheck disable=SC2046
        timeout 600 "${BASE[@]}" $(config_args "$cfg") "$BIN" "$DUPS" "$CALLS" >"$raw" 2>&1
        rc=$?
        line=$(grep -E '^[0-9.]+(,[0-9.]+){8}$' "$raw" | tail -n1)
        if [[ $rc -ne 0 || -z $line ]]; then
            msg "$cfg run $rep: rc $rc, no result (see $raw)"
            continue
        fi
        echo "$cfg,$rep,$line" >>"$OUT/results.csv"
        msg "$cfg run $rep: first ${line%%,*} us, steady $(cut -d, -f4 <<<"$line") us, MPI_Comm_dup $(cut -d, -f7 <<<"$line") us"
    done
done

/usr/bin/python3 - "$OUT/results.csv" "$OUT/results.md" "$DUPS" "$CALLS" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
cfgs = ["cxl", "cxl-nbteam0", "cxl-cid0", "libnbc"]
def col(cfg, key):
    return [float(r[key]) for r in rows if r["config"] == cfg]
def cell(v):
    return "%.3g [%.3g-%.3g]" % (statistics.median(v), min(v), max(v)) if v else "no run"
out = ["# A program that only starts non-blocking collectives",
       "",
       "MPI_Iallreduce of 8 B + MPI_Wait, np 2, %s fresh communicators x "
       "(1 + %s calls) per run; median [min-max] over the runs of each "
       "run's median over its communicators (the slowest rank's), us." % (sys.argv[3], sys.argv[4]),
       "",
       "| configuration | runs | first call (team made) | later calls | later calls: cxl / this | MPI_Comm_dup |",
       "|---|---|---|---|---|---|"]
cxl = col("cxl", "steady_med")
for c in cfgs:
    s = col(c, "steady_med")
    ratio = "%.2fx" % (statistics.median(cxl) / statistics.median(s)) if cxl and s else "-"
    out.append("| %s | %d | %s | %s | %s | %s |" % (c, len(s), cell(col(c, "first_med")), cell(s), ratio, cell(col(c, "dup_med"))))
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print("\n".join(out))
EOF
msg "report: $OUT/results.md"
