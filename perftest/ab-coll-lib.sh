#!/usr/bin/env bash
#
# ab-coll-lib.sh - two builds of libcxl_coll side by side under coll/cxl at
# the MPI level: the same transport, pool and coll_bench, the library
# swapped (LD_LIBRARY_PATH, which comes before the component's RUNPATH)
# and, where a side's folder holds one, the mca_coll_cxl.so too; runs
# alternating A, B, A, B, ...  It answers "did this change of the library
# (or of library and component) make it faster"; perftest/run-coll-bench.sh
# answers "against what Open MPI users have today".
#
# Usage: perftest/ab-coll-lib.sh (--a DIR | --a-rev REV) (--b DIR | --b-rev REV)
#          [--builddir DIR] [--reps N] [--sizes LIST] [--colls LIST]
#          [--budget S] [--out DIR] [--help]
#   --a DIR, --b DIR    folders holding a libcxl_coll.so.0 (a build's .libs/);
#                       one that also holds an mca_coll_cxl.so swaps the
#                       Open MPI component too (a change of both)
#   --a-rev, --b-rev R  the library of git revision R (a commit, tag or
#                       HEAD~2; "WORKTREE": the files as they are now),
#                       compiled here from that revision's sources alone
#                       with the build folder's configuration header and
#                       pool libraries
#   --builddir DIR      build folder of everything else (default
#                       build-release: libuct_cxl.so, cxlpool,
#                       mca_coll_cxl.so)
#   --reps N            repetitions per build (default 3)
#   --sizes LIST        coll_bench sizes (default 1K,4K,16K,64K,256K,1M)
#   --colls LIST        collectives (default all but barrier)
#   --budget S          seconds per collective and size per run (default 0.2)
#   --out DIR           output folder (default perftest/out/ab-<date>-<time>)
# np = 2, one rank per core, pml ucx with UCX_TLS=cxl on a private pool, as
# run-coll-bench.sh's "cxl" configuration.  Output: samples.csv
# (build,rep,collective,bytes,avg_us), ab.md (per cell the median [min-max]
# of each build and B/A; "≈" where the ranges overlap), commands.log, and
# the libraries compiled.  Nothing asserts timings.
set -euo pipefail

PROG=ab-coll-lib
SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)
REPO_DIR=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=perftest/bench-common.sh
. "$SCRIPT_DIR/bench-common.sh"

A_DIR="" B_DIR="" A_REV="" B_REV="" BUILDDIR="$REPO_DIR/build-release"
REPS=3 SIZES=1K,4K,16K,64K,256K,1M BUDGET=0.2 OUT=""
COLLS=bcast,reduce,allreduce,gather,scatter,allgather,reduce_scatter,alltoall
while (($#)); do
    case $1 in
    --a) need "$1" $#; A_DIR=$2; shift 2 ;;
    --b) need "$1" $#; B_DIR=$2; shift 2 ;;
    --a-rev) need "$1" $#; A_REV=$2; shift 2 ;;
    --b-rev) need "$1" $#; B_REV=$2; shift 2 ;;
    --builddir) need "$1" $#; BUILDDIR=$2; shift 2 ;;
    --reps) need "$1" $#; REPS=$2; shift 2 ;;
    --sizes) need "$1" $#; SIZES=$2; shift 2 ;;
    --colls) need "$1" $#; COLLS=$2; shift 2 ;;
    --budget) need "$1" $#; BUDGET=$2; shift 2 ;;
    --out) need "$1" $#; OUT=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
    esac
done
[[ -n $A_DIR$A_REV && -n $B_DIR$B_REV ]] || die "give both builds: --a DIR or --a-rev REV, and --b DIR or --b-rev REV"
[[ -z $A_DIR || -z $A_REV ]] || die "--a and --a-rev: one of them"
[[ -z $B_DIR || -z $B_REV ]] || die "--b and --b-rev: one of them"
[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "--reps $REPS: a positive integer"
BUILDDIR=$(cd "$BUILDDIR" 2>/dev/null && pwd) || die "build folder $BUILDDIR does not exist (contrib/build.sh release)"
for f in .libs/libuct_cxl.so .libs/mca_coll_cxl.so cxlpool ucx_cxl_config.h; do
    [[ -e $BUILDDIR/$f ]] || die "$BUILDDIR/$f not found: build the project first (contrib/build.sh release)"
done
for t in mpirun mpicc ompi_info gcc git timeout /usr/bin/python3; do
    command -v "$t" >/dev/null 2>&1 || die "'$t' not found (contrib/setup-deps.sh)"
done

[[ -n $OUT ]] || OUT="$SCRIPT_DIR/out/ab-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)
RUNLOG="$OUT/run.log" CMDLOG="$OUT/commands.log"
: >"$RUNLOG"
: >"$CMDLOG"
T_START=$SECONDS

# libcxl_coll.so.0 of revision $1 into folder $2, from that revision's
# Makefile.am source list
build_rev() {   # build_rev REV DIR LABEL
    local rev=$1 dir=$2 src="$2/src" srcs
    mkdir -p "$src"
    if [[ $rev == WORKTREE ]]; then
        (cd "$REPO_DIR" && tar cf - Makefile.am include src) | tar xf - -C "$src"
    else
        git -C "$REPO_DIR" rev-parse --verify -q "$rev^{commit}" >/dev/null ||
            die "--${3,,}-rev $rev: no such revision"
        git -C "$REPO_DIR" archive "$rev" Makefile.am include src | tar xf - -C "$src"
    fi
    srcs=$(sed -n '/^libcxl_coll_la_SOURCES/,/[^\\]$/p' "$src/Makefile.am" |
           grep -o 'src/[^ ]*\.c' || true)
    [[ -n $srcs ]] || die "revision $rev: no libcxl_coll_la_SOURCES in its Makefile.am"
    # shellcheck disable=SC2086
    (cd "$src" && gcc -std=gnu11 -O2 -g -shared -fPIC -DHAVE_CONFIG_H \
        -Wl,-Bsymbolic-functions -I"$BUILDDIR" -Iinclude -Isrc/ucp_ext/coll \
        -Isrc/pool -Isrc/ucp_ext/common -o "$dir/libcxl_coll.so.0" $srcs \
        -L"$BUILDDIR/.libs" -Wl,-rpath,"$BUILDDIR/.libs" -lcxl_poolpick \
        -lcxlpool -lpthread -lm) >"$dir/build.log" 2>&1 ||
        die "building the library of $rev failed (see $dir/build.log)"
    echo "$rev $(git -C "$REPO_DIR" rev-parse --short "$rev" 2>/dev/null || echo worktree)" >"$dir/revision"
}
lib_of() {  # lib_of LABEL DIR REV -> folder with libcxl_coll.so.0
    local d
    if [[ -n $3 ]]; then
        d="$OUT/lib-$1"
        msg "build $1: libcxl_coll of $3"
        build_rev "$3" "$d" "$1"
    else
        d=$(cd "$2" 2>/dev/null && pwd) || die "--${1,,} $2 does not exist"
        [[ -f $d/libcxl_coll.so.0 ]] || die "$d holds no libcxl_coll.so.0"
    fi
    echo "$d"
}
LIB_A=$(lib_of A "$A_DIR" "$A_REV")
LIB_B=$(lib_of B "$B_DIR" "$B_REV")

while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(UCX_|OMPI_MCA_|CXL_COLL_)' || true)
unset LD_PRELOAD
BIN="$OUT/bin"
mkdir -p "$BIN"
cp -f "$BUILDDIR/.libs/libuct_cxl.so" "$BIN/"
# each side's component: its folder's, else the build folder's
comp_of() {   # comp_of LABEL LIBDIR -> the mca_coll_cxl.so it runs
    local f="$2/mca_coll_cxl.so"
    [[ -f $f ]] || f="$BUILDDIR/.libs/mca_coll_cxl.so"
    mkdir -p "$BIN/coll-$1"
    cp -f "$f" "$BIN/coll-$1/mca_coll_cxl.so"
    echo "$f"
}
COMP_A=$(comp_of A "$LIB_A")
COMP_B=$(comp_of B "$LIB_B")
mpicc -O2 -Wall -Wextra -Werror -o "$BIN/coll_bench" "$SCRIPT_DIR/coll_bench.c" \
    >"$OUT/build-coll_bench.log" 2>&1 || die "building coll_bench.c failed (see $OUT/build-coll_bench.log)"
POOL="/dev/shm/ucx-cxl-ab-$$.pool"
trap 'rm -f "$POOL"' EXIT
"$BUILDDIR/cxlpool" create "$POOL" --size 512M >/dev/null || die "cxlpool create $POOL failed"
OMPI_PATH="$(ompi_info --path libdir --parsable 2>/dev/null | sed -n 's/^path:libdir://p')/openmpi3"

SAMPLES="$OUT/samples.csv"
echo "build,rep,collective,bytes,avg_us" >"$SAMPLES"
for ((rep = 1; rep <= REPS; rep++)); do
    for label in A B; do
        lib=$LIB_A
        [[ $label == B ]] && lib=$LIB_B
        cmd=(timeout 600 mpirun -np 2 --allow-run-as-root --bind-to core
             --tune "$REPO_DIR/contrib/openmpi-cxl.conf"
             -x LD_PRELOAD="$BIN/libuct_cxl.so" -x UCX_TLS=cxl
             -x LD_LIBRARY_PATH="$lib" -x UCX_CXL_POOL="$POOL"
             -x UCX_CXL_COHERENCE=hw
             --mca mca_base_component_path "$BIN/coll-$label:$OMPI_PATH"
             --mca coll_cxl_priority 90
             "$BIN/coll_bench" --sizes "$SIZES" --colls "$COLLS"
             --budget "$BUDGET")
        echo "[$(date +%T)] $label rep $rep: ${cmd[*]}" >>"$CMDLOG"
        "${cmd[@]}" >"$OUT/raw-$label-$rep.txt" 2>>"$OUT/stderr.log" ||
            die "build $label, repetition $rep: mpirun failed (see $OUT/stderr.log)"
        # coll_bench CSV: collective,bytes,np,rep,iters,warmup,min,avg,...
        awk -F, -v b="$label" -v r="$rep" \
            '$2 ~ /^[0-9]+$/ && $1 != "collective" { print b "," r "," $1 "," $2 "," $8 }' \
            "$OUT/raw-$label-$rep.txt" >>"$SAMPLES"
        msg "rep $rep/$REPS build $label done"
    done
done

/usr/bin/python3 - "$SAMPLES" "$OUT/ab.md" "$LIB_A" "$LIB_B" "$COMP_A" "$COMP_B" <<'EOF'
import collections, csv, statistics, sys
samples, out, lib_a, lib_b, comp_a, comp_b = sys.argv[1:7]
d = collections.defaultdict(list)
for r in csv.DictReader(open(samples)):
    d[(r['collective'], int(r['bytes']), r['build'])].append(float(r['avg_us']))
cells = sorted({(c, b) for c, b, _ in d})
lines = ["# libcxl_coll A/B (perftest/ab-coll-lib.sh)", "",
         f"A: `{lib_a}`, B: `{lib_b}`; component "
         + (f"`{comp_a}` in both" if comp_a == comp_b else
            f"A `{comp_a}`, B `{comp_b}`") + "; np 2, coll/cxl over pml ucx, "
         "UCX_TLS=cxl; coll_bench avg_us (mean of the ranks); median "
         "[min-max] of the repetitions, alternating A, B.", "",
         "| collective | bytes | A (us) | B (us) | B/A |", "|---|---|---|---|---|"]
for c, b in cells:
    a, n = d.get((c, b, 'A'), []), d.get((c, b, 'B'), [])
    if not a or not n:
        continue
    ma, mb = statistics.median(a), statistics.median(n)
    overlap = " ≈" if min(n) <= max(a) and min(a) <= max(n) else ""
    lines.append(f"| {c} | {b} | {ma:.3f} [{min(a):.3f}-{max(a):.3f}] | "
                 f"{mb:.3f} [{min(n):.3f}-{max(n):.3f}] | {mb / ma:.2f}{overlap} |")
open(out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
msg "done: $OUT/ab.md"
