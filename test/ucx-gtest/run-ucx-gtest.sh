#!/usr/bin/env bash
#
# run-ucx-gtest.sh - run UCX's own UCT gtest suites against ONE transport
# (default: the out-of-tree "cxl" module), without modifying the UCX tree.
#
# Usage:
#   run-ucx-gtest.sh MODULE_SO|- [--part 1|2|all] [--all] [--filter F] [--list]
#                    [--keep-going] [--tl NAME] [--md-component NAME] [--builddir DIR]
#                    [--jobs N] [--timeout SEC] [--log FILE] [-- ARGS...]
#
#   MODULE_SO       the transport module to LD_PRELOAD (e.g.
#                   build-release/.libs/libuct_cxl.so); "-" for none (for a
#                   transport built into UCX, e.g. --tl posix).
#   --part N        which list of UCX test files: 1, 2 or all (default all).
#   --all           same as --part all.
#   --filter F      extra gtest filter, combined with "<tl>/*": positive
#                   patterns not starting with "<tl>/" get that prefix (so
#                   "uct_flush_test.*" or "*flush*" work); negative patterns
#                   ("-...") are passed as they are.
#   --list          only list the selected tests (--gtest_list_tests).
#   --keep-going    when a test crashes (signal, abort, --timeout), run the
#                   tests that did not run yet again (up to 50 attempts); the
#                   crashed tests count as failed.  Useful while a module is
#                   young.  Without it the run stops at the first crash.
#   --tl NAME       transport name to instantiate the suites for (default cxl).
#                   Each transport gets its own set of wrapper objects.
#   --md-component NAME
#                   MD component name for test_md.cc (default: the tl name).
#   --builddir DIR  where wrapper objects and binaries go
#                   (default ${UCX_CXL_CACHE:-/var/cache/ucx-cxl}/ucx-gtest-cxl).
#   --jobs N        parallel compiles (default nproc).
#   --timeout SEC   kill the gtest run after SEC seconds (default: none; UCX's
#                   own per-test watchdog still applies).
#   --log FILE      gtest output log (default <builddir>/tl-<tl>/last-run-<part>.log).
#   -- ARGS         passed to the gtest binary (e.g. -s 42 for the seed).
#
# Steps:
#   1. build-ucx-gtest.sh (cached): UCX built with --enable-gtest outside the
#      repository.
#   2. Compiles the selected cxl_test_*.cc wrappers of this directory with the
#      flags of UCX's test/gtest/Makefile (printed by make itself), plus
#      -DUCX_GTEST_TL=<tl>; only wrappers whose source, included headers or
#      flags changed are recompiled.  Links them, via UCX's libtool exactly
#      like the in-tree gtest, with the already-built common/ and uct/ gtest
#      objects, libgtest and the build-tree libucs/libuct/libucp/libucm.
#   3. Runs the binary with LD_PRELOAD=MODULE_SO (preceded by the ASan
#      runtime when the module is ASan-instrumented; ASAN_OPTIONS defaults to
#      detect_leaks=0), UCX_HANDLE_ERRORS=bt and
#      UCX_LOG_LEVEL=warn (both overridable from the environment) and
#      LD_LIBRARY_PATH = build-tree .libs dirs first, so the module's
#      DT_NEEDED libucs/libuct.so.0 bind to the SAME copy as the binary's.
#      Before the run it verifies that (LD_DEBUG=libs): exactly one copy of
#      each UCX library in the process.
#   4. Prints a summary: gtest's counts, every failed test with its messages,
#      every skipped test with its reason (UCX's "[     SKIP ] (reason)" lines;
#      note that gtest itself counts those as passed), and finally
#        ucx-gtest: N passed, N failed, N skipped
#
# Exit: 0 all selected tests passed or were skipped; 1 failures, a crash, no
#       tests, or a build error; 2 bad command line.
#
set -euo pipefail

PROG=run-ucx-gtest
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${UCX_CXL_CACHE:-/var/cache/ucx-cxl}

# --- the UCX test files (wrappers are $HERE/cxl_<name>.cc) -------------------
PART1=(
    test_md test_p2p_rma
    test_amo_add_xor test_amo_and_or test_amo_cswap
    test_amo_fadd_fxor test_amo_fand_for test_amo_swap
    test_flush test_fence test_zcopy_comp
)
PART2=(
    test_p2p_am test_many2one_am test_pending test_event test_peer_failure
    test_uct_ep test_p2p_err test_p2p_mix test_progress
)
# Already-built objects of UCX's gtest that the wrappers need (relative to
# <gtest build>/test/gtest).  uct/gtest-test_amo.o is the shared base of the
# test_amo_* files; it instantiates nothing itself.
GTEST_OBJS=(
    common/gtest-main.o common/gtest-test_gtest_cmn.o common/gtest-mem_buffer.o
    common/gtest-test_helpers.o common/gtest-test_watchdog.o common/gtest-test.o
    common/gtest-test_perf.o
    uct/gtest-uct_test.o uct/gtest-uct_p2p_test.o uct/gtest-test_amo.o
)

msg() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { msg "ERROR: $*"; exit 1; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
bad_usage() { msg "$*"; usage >&2; exit 2; }

MODULE=""
PART=all
FILTER=""
LIST=0
TL=cxl
MD_COMPONENT=""
BUILDDIR=""
JOBS=$(nproc 2>/dev/null || echo 2)
TIMEOUT=0
RUNLOG=""
EXTRA=()
HAVE_MODULE_ARG=0
KEEP_GOING=0
MAX_ATTEMPTS=50

while (($#)); do
    case $1 in
        --part) (($# >= 2)) || bad_usage "--part needs a value"; PART=$2; shift ;;
        --part=*) PART=${1#*=} ;;
        --all) PART=all ;;
        --filter) (($# >= 2)) || bad_usage "--filter needs a value"; FILTER=$2; shift ;;
        --filter=*) FILTER=${1#*=} ;;
        --list) LIST=1 ;;
        --keep-going) KEEP_GOING=1 ;;
        --tl) (($# >= 2)) || bad_usage "--tl needs a value"; TL=$2; shift ;;
        --tl=*) TL=${1#*=} ;;
        --md-component) (($# >= 2)) || bad_usage "--md-component needs a value"; MD_COMPONENT=$2; shift ;;
        --md-component=*) MD_COMPONENT=${1#*=} ;;
        --builddir) (($# >= 2)) || bad_usage "--builddir needs a value"; BUILDDIR=$2; shift ;;
        --builddir=*) BUILDDIR=${1#*=} ;;
        --jobs) (($# >= 2)) || bad_usage "--jobs needs a value"; JOBS=$2; shift ;;
        --jobs=*) JOBS=${1#*=} ;;
        --timeout) (($# >= 2)) || bad_usage "--timeout needs a value"; TIMEOUT=$2; shift ;;
        --timeout=*) TIMEOUT=${1#*=} ;;
        --log) (($# >= 2)) || bad_usage "--log needs a value"; RUNLOG=$2; shift ;;
        --log=*) RUNLOG=${1#*=} ;;
        -h | --help) usage; exit 0 ;;
        --) shift; EXTRA=("$@"); break ;;
        -) ((HAVE_MODULE_ARG)) && bad_usage "more than one MODULE_SO"; MODULE=""; HAVE_MODULE_ARG=1 ;;
        -*) bad_usage "unknown option '$1'" ;;
        *) ((HAVE_MODULE_ARG)) && bad_usage "more than one MODULE_SO ('$1')"; MODULE=$1; HAVE_MODULE_ARG=1 ;;
    esac
    shift
done
((HAVE_MODULE_ARG)) || bad_usage "missing MODULE_SO (use '-' for none)"

case $PART in
    1) FILES=("${PART1[@]}") ;;
    2) FILES=("${PART2[@]}") ;;
    all) FILES=("${PART1[@]}" "${PART2[@]}") ;;
    *) bad_usage "--part must be 1, 2 or all (got '$PART')" ;;
esac
ident='^[A-Za-z_][A-Za-z0-9_]*$'
[[ $TL =~ $ident ]] || bad_usage "--tl '$TL' is not a C identifier"
MD_COMPONENT=${MD_COMPONENT:-$TL}
[[ $MD_COMPONENT =~ $ident ]] || bad_usage "--md-component '$MD_COMPONENT' is not a C identifier"
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || bad_usage "--jobs must be a positive number"
[[ $TIMEOUT =~ ^[0-9]+$ ]] || bad_usage "--timeout must be a number of seconds"

if [[ -n $MODULE ]]; then
    [[ -f $MODULE ]] || die "module '$MODULE' not found"
    MODULE=$(readlink -f -- "$MODULE")
fi

BUILDDIR=${BUILDDIR:-$CACHE/ucx-gtest-cxl}
mkdir -p "$BUILDDIR"
BUILDDIR=$(cd "$BUILDDIR" && pwd)
TLDIR="$BUILDDIR/tl-$TL"
mkdir -p "$TLDIR"
RUNLOG=${RUNLOG:-$TLDIR/last-run-part$PART.log}
START_TS=$SECONDS

# --- 1. UCX gtest build (cached) -----------------------------------------------
build_out=$(bash "$HERE/build-ucx-gtest.sh" --print-env) || die "build-ucx-gtest.sh failed"
UCX_SRC_DIR=$(sed -n 's/^UCX_SRC_DIR=//p' <<<"$build_out")
G=$(sed -n 's/^UCX_GTEST_BUILD_DIR=//p' <<<"$build_out")
[[ -n $UCX_SRC_DIR && -n $G && -d $G/test/gtest ]] || die "unexpected output of build-ucx-gtest.sh: $build_out"
GT="$G/test/gtest"
UCX_LIBDIRS="$G/src/ucs/.libs:$G/src/uct/.libs:$G/src/ucp/.libs:$G/src/ucm/.libs"

# --- 2. compile and link -------------------------------------------------------
exec 8>"$TLDIR/.lock"
flock 8     # one build per transport dir at a time (released before the run)

# Flags exactly as test/gtest/Makefile would use them for gtest-*.o and the
# gtest link (make expands them; $(info) prints them without a shell).
cat >"$TLDIR/print-flags.mk" <<'EOF'
.PHONY: ucx-cxl-print-flags
ucx-cxl-print-flags:
	$(info UCXCXL_CXX=$(CXX))
	$(info UCXCXL_COMPILE=$(DEFS) $(DEFAULT_INCLUDES) $(INCLUDES) $(gtest_CPPFLAGS) $(CPPFLAGS) $(gtest_CXXFLAGS) $(CXXFLAGS))
	$(info UCXCXL_LINK=$(LIBTOOL) --tag=CXX $(AM_LIBTOOLFLAGS) $(LIBTOOLFLAGS) --mode=link $(CXXLD) $(gtest_CXXFLAGS) $(CXXFLAGS) $(gtest_LDFLAGS) $(LDFLAGS))
	$(info UCXCXL_LDADD=$(gtest_LDADD) $(LIBS))
	@:
EOF
flags_out=$(make -s -C "$GT" -f Makefile -f "$TLDIR/print-flags.mk" ucx-cxl-print-flags 2>&1) ||
    die "could not read the flags of $GT/Makefile: $flags_out"
get_flag() { sed -n "s/^UCXCXL_$1=//p" <<<"$flags_out"; }
# The strings are shell words as make would hand them to sh (they contain
# -DTOP_SRCDIR=\"...\"), so split them the same way.
eval "CXX_CMD=($(get_flag CXX))"
eval "COMPILE_FLAGS=($(get_flag COMPILE))"
eval "LINK_CMD=($(get_flag LINK))"
eval "LDADD=($(get_flag LDADD))"
((${#CXX_CMD[@]} && ${#COMPILE_FLAGS[@]} && ${#LINK_CMD[@]} && ${#LDADD[@]})) ||
    die "empty flags from $GT/Makefile: $flags_out"
COMPILE_FLAGS+=("-DUCX_GTEST_TL=$TL" "-DUCX_GTEST_MD_COMPONENT=$MD_COMPONENT")

# Anything that changes the objects: flags, gtest build dir, compiler.
flags_sig=$(printf '%s\n' "$G" "${CXX_CMD[@]}" "${COMPILE_FLAGS[@]}" "$("${CXX_CMD[0]}" --version | head -n1)" | md5sum | cut -d' ' -f1)

# needs_rebuild OBJ SRC: true when OBJ is missing/stale.
needs_rebuild() {
    local obj=$1 src=$2 dep
    [[ -f $obj && -f $obj.d && -f $obj.sig ]] || return 0
    [[ $(<"$obj.sig") == "$flags_sig" ]] || return 0
    [[ $src -nt $obj ]] && return 0
    # Prerequisites recorded by -MMD (paths relative to $GT, where we compile).
    while read -r dep; do
        [[ -z $dep ]] && continue
        [[ $dep == /* ]] || dep="$GT/$dep"
        [[ -e $dep ]] || return 0
        [[ $dep -nt $obj ]] && return 0
    done < <(sed -e 's/\\$//' -e 's/^[^:]*:[[:space:]]*//' "$obj.d" | tr ' ' '\n')
    return 1
}

compile_one() {
    local src="$HERE/cxl_$1.cc" obj="$TLDIR/cxl_$1.o"
    if (cd "$GT" && "${CXX_CMD[@]}" "${COMPILE_FLAGS[@]}" -MMD -MP -MF "$obj.d" \
            -c -o "$obj.tmp.o" "$src") >"$obj.log" 2>&1; then
        mv -f "$obj.tmp.o" "$obj"
        printf '%s\n' "$flags_sig" >"$obj.sig"
        return 0
    fi
    rm -f "$obj.tmp.o"
    return 1
}

OBJS=()
TODO=()
for f in "${FILES[@]}"; do
    src="$HERE/cxl_$f.cc"
    [[ -f $src ]] || die "wrapper $src missing"
    [[ -f $UCX_SRC_DIR/test/gtest/uct/$f.cc ]] || die "UCX test file uct/$f.cc missing in $UCX_SRC_DIR"
    OBJS+=("$TLDIR/cxl_$f.o")
    needs_rebuild "$TLDIR/cxl_$f.o" "$src" && TODO+=("$f")
done

if ((${#TODO[@]})); then
    msg "compiling ${#TODO[@]} wrapper(s) for tl=$TL with -j$JOBS: ${TODO[*]}"
    t0=$SECONDS
    failed=()
    for f in "${TODO[@]}"; do
        while (($(jobs -rp | wc -l) >= JOBS)); do wait -n || true; done
        compile_one "$f" &
    done
    wait || true
    for f in "${TODO[@]}"; do
        needs_rebuild "$TLDIR/cxl_$f.o" "$HERE/cxl_$f.cc" && failed+=("$f")
    done
    if ((${#failed[@]})); then
        for f in "${failed[@]}"; do
            msg "compile of cxl_$f.cc failed (log $TLDIR/cxl_$f.o.log), last lines:"
            tail -n 30 "$TLDIR/cxl_$f.o.log" >&2
        done
        die "${#failed[@]} wrapper(s) failed to compile"
    fi
    msg "compiled in $((SECONDS - t0)) s"
else
    msg "wrapper objects for tl=$TL are up to date"
fi

BIN="$TLDIR/gtest_${TL}_part$PART"
LINK_INPUTS=("${OBJS[@]}")
for o in "${GTEST_OBJS[@]}"; do
    [[ -f $GT/$o ]] || die "gtest object $GT/$o missing; re-run build-ucx-gtest.sh --force"
    LINK_INPUTS+=("$GT/$o")
done
relink=0
[[ -x $BIN ]] || relink=1
if ((!relink)); then
    for o in "${LINK_INPUTS[@]}" "$G/src/ucs/.libs/libucs.so" "$G/src/uct/.libs/libuct.so" \
             "$G/src/ucp/.libs/libucp.so" "$GT/common/googletest/.libs/libgtest.a"; do
        if [[ $o -nt $BIN ]]; then relink=1; break; fi
    done
fi
if ((relink)); then
    msg "linking $BIN"
    t0=$SECONDS
    if ! (cd "$GT" && "${LINK_CMD[@]}" -o "$BIN.tmp" "${LINK_INPUTS[@]}" "${LDADD[@]}") \
            >"$BIN.link.log" 2>&1; then
        tail -n 30 "$BIN.link.log" >&2
        die "link failed (log $BIN.link.log)"
    fi
    mv -f "$BIN.tmp" "$BIN"
    msg "linked in $((SECONDS - t0)) s"
fi
flock -u 8

# --- 3. run ------------------------------------------------------------------
# Combine "<tl>/*" with the user filter.
POS=()
NEG=""
if [[ -n $FILTER ]]; then
    pos_part=${FILTER%%-*}
    [[ $FILTER == *-* ]] && NEG=${FILTER#*-}
    IFS=: read -r -a _pats <<<"$pos_part"
    for p in "${_pats[@]}"; do
        [[ -z $p ]] && continue
        [[ $p == "$TL/"* ]] && POS+=("$p") || POS+=("$TL/$p")
    done
fi
((${#POS[@]})) || POS=("$TL/*")
GTEST_FILTER=$(IFS=:; printf '%s' "${POS[*]}")
[[ -n $NEG ]] && GTEST_FILTER+="-$NEG"

RUN_ENV=(
    "LD_LIBRARY_PATH=$UCX_LIBDIRS${MODULE:+:$(dirname "$MODULE")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    "UCX_HANDLE_ERRORS=${UCX_HANDLE_ERRORS:-bt}"
    "UCX_LOG_LEVEL=${UCX_LOG_LEVEL:-warn}"
)
PRELOAD=$MODULE
if [[ -n $MODULE ]]; then
    # A module built with -fsanitize=address (e.g. a build-sanitizers tree)
    # needs the ASan runtime first in the process; the gtest binary is not
    # instrumented, so preload the runtime the module was linked with.
    asan_lib=$(readelf -d "$MODULE" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(libasan\.so[^]]*\)\].*/\1/p' | head -n1)
    if [[ -n $asan_lib ]]; then
        asan_path=$(ldconfig -p | awk -v n="$asan_lib" '$1 == n { print $NF; exit }')
        [[ -n $asan_path ]] || asan_path=$(gcc -print-file-name="$asan_lib" 2>/dev/null || true)
        [[ -f $asan_path ]] || die "module needs $asan_lib, which was not found"
        PRELOAD="$asan_path:$MODULE"
        RUN_ENV+=("ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}")
        msg "module is ASan-instrumented: preloading $asan_path first"
    fi
    RUN_ENV+=("LD_PRELOAD=$PRELOAD${LD_PRELOAD:+:$LD_PRELOAD}")
fi

# One copy of each UCX library in the process?  Registration of the tests
# (which enumerates components, loading UCX modules) is enough to see it.
dbgdir=$(mktemp -d "$TLDIR/ld-debug.XXXXXX")
env "${RUN_ENV[@]}" LD_DEBUG=libs LD_DEBUG_OUTPUT="$dbgdir/ld" \
    "$BIN" --gtest_list_tests --gtest_filter="$GTEST_FILTER" >"$dbgdir/list.out" 2>&1 && list_rc=0 || list_rc=$?
ucx_objs=$(cat "$dbgdir"/ld* 2>/dev/null | sed -n 's/.*calling init: //p' |
           grep -E '/lib(ucs|uct|ucp|ucm)\.so' | sort -u | while read -r p; do readlink -f "$p"; done | sort -u)
dups=$(sed 's#.*/##' <<<"$ucx_objs" | sed 's/\.so.*//' | sort | uniq -d)
if [[ -n $dups ]]; then
    printf '%s\n' "$ucx_objs" >&2
    rm -rf "$dbgdir"
    die "more than one copy of $(tr '\n' ' ' <<<"$dups")in the process (list above)"
fi
if ((list_rc != 0)); then
    cat "$dbgdir/list.out" >&2
    rm -rf "$dbgdir"
    die "the test binary failed to start/list tests (exit status $list_rc, output above)"
fi
[[ -z $MODULE ]] || grep -q -F -- "$MODULE" <(cat "$dbgdir"/ld* | sed -n 's/.*calling init: //p' | while read -r p; do readlink -f "$p"; done) ||
    { rm -rf "$dbgdir"; die "LD_PRELOAD of $MODULE did not load it"; }
msg "one copy of each UCX library: $(tr '\n' ' ' <<<"$ucx_objs")"
ntests=$(grep -c '^  ' "$dbgdir/list.out" || true)
if ((LIST)); then
    grep -v -E '^(\[|$)' "$dbgdir/list.out" | grep -v 'Using random seed' || true
    rm -rf "$dbgdir"
    msg "$ntests test(s) match '$GTEST_FILTER'"
    exit 0
fi
rm -rf "$dbgdir"
((ntests > 0)) || die "no test matches '$GTEST_FILTER' - is transport '$TL' registered (module loaded, resources available)?"

msg "running $ntests test(s): $(basename "$BIN") --gtest_filter='$GTEST_FILTER' ${EXTRA[*]:-}"
msg "env: ${RUN_ENV[*]}"
msg "log: $RUNLOG"
runner=()
((TIMEOUT > 0)) && runner=(timeout --kill-after=30 "$TIMEOUT")
: >"$RUNLOG"
EXCLUDED=()   # --keep-going: tests that ran in an earlier attempt
attempt=0
any_crash=0
t0=$SECONDS
while :; do
    attempt=$((attempt + 1))
    filt=$GTEST_FILTER
    if ((${#EXCLUDED[@]})); then
        excl=$(IFS=:; printf '%s' "${EXCLUDED[*]}")
        [[ $filt == *-* ]] && filt+=":$excl" || filt+="-$excl"
    fi
    printf '##### ucx-gtest attempt %d\n' "$attempt" >>"$RUNLOG"
    set +e
    env "${RUN_ENV[@]}" ${runner[@]+"${runner[@]}"} "$BIN" --gtest_color=no --gtest_filter="$filt" \
        ${EXTRA[@]+"${EXTRA[@]}"} 2>&1 | tee -a "$RUNLOG"
    rc=${PIPESTATUS[0]}
    set -e
    this_log=$(awk -v n="$attempt" '/^##### ucx-gtest attempt /{a++} a == n' "$RUNLOG")
    # Did this attempt end inside a test (crash, abort, timeout)?
    crashed_test=$(awk '
        /^\[ RUN      \] / { cur = $4; next }
        /^\[       OK \] / { cur = ""; next }
        /^\[  (FAILED|SKIPPED) \] / { n = $4; sub(/,$/, "", n); if (n == cur) cur = "" }
        END { print cur }' <<<"$this_log")
    [[ -n $crashed_test ]] && any_crash=1
    ((KEEP_GOING)) && [[ -n $crashed_test ]] || break
    if ((attempt >= MAX_ATTEMPTS)); then
        msg "keep-going: giving up after $attempt attempts"
        break
    fi
    mapfile -t _ran < <(awk '/^\[ RUN      \] /{print $4}' <<<"$this_log")
    EXCLUDED+=("${_ran[@]}")
    msg "keep-going: $crashed_test did not finish (exit status $rc); running the remaining tests again without the ${#EXCLUDED[@]} that already ran"
done
run_s=$((SECONDS - t0))

# --- 4. summary --------------------------------------------------------------
summary=$(awk '
    function flush_msg(name, text,   n, lines, i, out) {
        n = split(text, lines, "\n"); out = ""
        for (i = 1; i <= n && i <= 40; i++) if (lines[i] != "") out = out "      " lines[i] "\n"
        if (n > 40) out = out "      ... (" n - 40 " more lines in the log)\n"
        return out
    }
    function crash() {
        nf++; crashed = crashed " " cur
        fl = fl "  " cur "   <-- did not finish (crash, abort or timeout)\n" flush_msg(cur, buf)
        cur = ""
    }
    /^##### ucx-gtest attempt / { if (cur != "") crash(); att = $4; next }
    /^\[ RUN      \] / { if (cur != "") crash(); cur = $4; buf = ""; skip = 0; reason = ""; next }
    /^\[ +SKIP +\]/ && cur != "" {
        skip = 1; r = $0; sub(/^\[ +SKIP +\] */, "", r); reason = r; next
    }
    /^\[       OK \] / && cur != "" {
        if (skip) { ns++; sk = sk "  " cur "  " (reason == "" ? "(no reason given)" : reason) "\n" }
        else np++
        cur = ""; next
    }
    { name = $4; sub(/,$/, "", name) }
    /^\[  SKIPPED \] / && cur != "" && name == cur {
        ns++; r = buf; gsub(/\n+$/, "", r); gsub(/\n/, " | ", r)
        sk = sk "  " cur "  (" (r == "" ? "GTEST_SKIP" : r) ")\n"; cur = ""; next
    }
    /^\[  FAILED  \] / && cur != "" && name == cur {
        nf++; fl = fl "  " cur "\n" flush_msg(cur, buf); cur = ""; next
    }
    /^\[==========\] .* ran\./ || /^\[  PASSED  \] [0-9]+ test/ || /^\[  FAILED  \] [0-9]+ test/ ||
    /^\[  SKIPPED \] [0-9]+ test/ || /^ *[0-9]+ FAILED TESTS?$/ || /YOU HAVE [0-9]+ DISABLED/ {
        totals = totals "  " (att > 1 ? "(attempt " att ") " : "") $0 "\n"; next
    }
    cur != "" { buf = buf $0 "\n" }
    END {
        if (cur != "") crash()
        printf "gtest result counts:\n%s", (totals == "" ? "  (none - gtest did not finish)\n" : totals)
        printf "FAILED tests (%d):\n%s", nf, (fl == "" ? "  none\n" : fl)
        printf "SKIPPED tests (%d), with reason:\n%s", ns, (sk == "" ? "  none\n" : sk)
        printf "COUNTS %d %d %d %s\n", np, nf, ns, (crashed == "" ? "-" : substr(crashed, 2))
    }' "$RUNLOG")
read -r _ n_pass n_fail n_skip crashed < <(grep '^COUNTS ' <<<"$summary")

echo
echo "===================== ucx-gtest summary ====================="
echo "transport: $TL   part: $PART   module: ${MODULE:-none}"
echo "binary: $BIN"
echo "filter: $GTEST_FILTER   exit status: $rc$( ((attempt > 1)) && echo " (attempt $attempt of $attempt)")"
echo "time: ${run_s} s running tests, $((SECONDS - START_TS)) s in total (build + run)"
echo "log: $RUNLOG"
grep -v '^COUNTS ' <<<"$summary"
if [[ $crashed != - ]]; then
    if ((KEEP_GOING)); then
        echo "NOTE: did not finish (crash/abort/timeout): $crashed; $attempt attempt(s), each crashed test excluded from the next."
    else
        echo "NOTE: the run ended inside $crashed (exit status $rc); tests after it did not run (use --keep-going)."
    fi
fi
echo "ucx-gtest: $n_pass passed, $n_fail failed, $n_skip skipped"

if ((rc != 0 || n_fail > 0 || any_crash)); then
    exit 1
fi
if ((n_pass + n_skip == 0)); then
    msg "no test ran"
    exit 1
fi
exit 0
