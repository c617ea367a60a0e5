#!/usr/bin/env bash
#
# build-ucx-gtest.sh - build UCX's own gtest objects (once, cached) so that
# run-ucx-gtest.sh can link small wrapper test files against them.
#
# What it does (one "build-ucx-gtest: ..." line per step on stderr; the heavy
# output goes to a log file whose tail is printed on failure):
#
#   1. Reads $UCX_CXL_CACHE/current.env (written by contrib/setup-deps.sh):
#      UCX_SRC_DIR, UCX_BUILD_DIR, UCX_VERSION.
#   2. Configures a SEPARATE build directory of that same source with the
#      feature options of the installed UCX (the "# Configured with:" line of
#      `ucx_info -v`, filtered exactly like setup-deps.sh does) plus
#        --enable-gtest                  (the point of this build)
#        --disable-doxygen-doc --without-java --without-go
#                                        (build-only; a JDK and maven are
#                                         installed here and maven needs the
#                                         network)
#      and a private --prefix (never installed), so that the build-tree libucs
#      loads only build-tree modules.
#   3. Checks that the resulting config.h equals $UCX_BUILD_DIR/config.h
#      (which setup-deps.sh verified against the installed libuct), ignoring
#      only install-path strings - i.e. the gtest build has the same ABI.
#   4. make -j$(nproc) (this includes test/gtest, the full gtest binary),
#      then checks the objects run-ucx-gtest.sh needs.  With GCC >= 12,
#      configure also gets GTEST_CXXFLAGS=-Wno-error=use-after-free (a false
#      positive in UCX's test/gtest/ucm/malloc_hook.cc under UCX's -Werror;
#      GTEST_CXXFLAGS reaches test/gtest only).
#   5. Writes a marker; a later run with the same version/options only
#      re-checks the marker and the objects (seconds).
#
# Cache layout (outside the repository):
#   $UCX_CXL_CACHE/ucx-$UCX_VERSION/gtest-build/           build dir
#   $UCX_CXL_CACHE/ucx-$UCX_VERSION/gtest-build/.ucx-cxl-gtest-done   marker
#   $UCX_CXL_CACHE/ucx-$UCX_VERSION/gtest-build.log         log (appended)
#   $UCX_CXL_CACHE/ucx-$UCX_VERSION/gtest-build.env         result, for scripts
#
# Usage: build-ucx-gtest.sh [--force] [--jobs N] [--print-env] [--help]
# Env:   UCX_CXL_CACHE        cache root (default /var/cache/ucx-cxl)
#        UCX_GTEST_BUILD_DIR  override the build directory
# Exit:  0 ok, 1 failure, 2 bad command line.
#
set -euo pipefail

PROG=build-ucx-gtest
MARKER_SCHEMA=1
CACHE=${UCX_CXL_CACHE:-/var/cache/ucx-cxl}
FORCE=0
PRINT_ENV=0
JOBS=$(nproc 2>/dev/null || echo 2)
START_TS=$SECONDS
LOG=""

msg() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() {
    msg "ERROR: $*"
    if [[ -n $LOG && -f $LOG ]]; then
        msg "last 40 lines of $LOG:"
        tail -n 40 "$LOG" >&2
    fi
    exit 1
}
usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

while (($#)); do
    case $1 in
        --force) FORCE=1 ;;
        --jobs) [[ $# -ge 2 ]] || { usage >&2; exit 2; }; JOBS=$2; shift ;;
        --jobs=*) JOBS=${1#--jobs=} ;;
        --print-env) PRINT_ENV=1 ;;
        -h | --help) usage; exit 0 ;;
        *) msg "unknown argument '$1'"; usage >&2; exit 2 ;;
    esac
    shift
done

ENV_FILE="$CACHE/current.env"
[[ -r $ENV_FILE ]] || die "$ENV_FILE not found; run contrib/setup-deps.sh first."
# shellcheck disable=SC1090
. "$ENV_FILE"
: "${UCX_SRC_DIR:?UCX_SRC_DIR not set in $ENV_FILE}"
: "${UCX_BUILD_DIR:?UCX_BUILD_DIR not set in $ENV_FILE}"
: "${UCX_VERSION:?UCX_VERSION not set in $ENV_FILE}"
[[ -x $UCX_SRC_DIR/configure && -d $UCX_SRC_DIR/test/gtest/uct ]] ||
    die "UCX source at $UCX_SRC_DIR is incomplete (no configure or test/gtest/uct)."
[[ -f $UCX_BUILD_DIR/config.h ]] ||
    die "$UCX_BUILD_DIR/config.h missing; run contrib/setup-deps.sh."

VDIR="$CACHE/ucx-${UCX_VERSION//:/_}"
GDIR=${UCX_GTEST_BUILD_DIR:-$VDIR/gtest-build}
LOG="${GDIR%/}.log"
RESULT_ENV="${GDIR%/}.env"
PREFIX_DIR="${GDIR%/}-install"      # configure --prefix; nothing is installed
MARKER="$GDIR/.ucx-cxl-gtest-done"
mkdir -p "$(dirname "$GDIR")"

# --- configure options ------------------------------------------------------
# The same feature options as the installed UCX, as contrib/setup-deps.sh
# derived them from 'ucx_info -v' (one place decides what matches the ABI).
: "${UCX_CONF_OPTS:?UCX_CONF_OPTS not set in $ENV_FILE; rerun contrib/setup-deps.sh}"
read -r -a CONF_OPTS <<<"$UCX_CONF_OPTS"
# Build-only additions (no effect on config.h / struct layouts).
CONF_OPTS+=(--enable-gtest --disable-doxygen-doc --without-java --without-go)

# GCC 12 reports a false-positive -Wuse-after-free in UCX 1.13.1's own
# test/gtest/ucm/malloc_hook.cc (is_ptr_in_range() compares a freed pointer's
# value) and UCX always builds with -Werror.  test/gtest/configure.m4 starts
# GTEST_CXXFLAGS from the environment, and only test/gtest (and its bundled
# googletest) use it, so that is where -Wno-error=use-after-free goes.  Not
# CXXFLAGS: at configure time UCX's CHECK_COMPILER_FLAG resets CXXFLAGS to
# CFLAGS, and a make-time override drops the "-nostdlib -fno-exceptions ..."
# that src/tools/perf/lib appends, after which ucx_perftest fails to link
# (undefined __gxx_personality_v0).
GTEST_CXXFLAGS=""
if printf 'int main(){return 0;}\n' |
        g++ -Werror -Wno-error=use-after-free -x c++ -fsyntax-only - >/dev/null 2>&1; then
    GTEST_CXXFLAGS="-Wno-error=use-after-free"
fi
CONF_VARS=()
[[ -n $GTEST_CXXFLAGS ]] && CONF_VARS+=("GTEST_CXXFLAGS=$GTEST_CXXFLAGS")

# Objects run-ucx-gtest.sh links against (relative to $GDIR/test/gtest).
NEEDED=(
    gtest
    common/googletest/.libs/libgtest.a
    common/gtest-main.o common/gtest-test_gtest_cmn.o common/gtest-mem_buffer.o
    common/gtest-test_helpers.o common/gtest-test_watchdog.o common/gtest-test.o
    common/gtest-test_perf.o
    uct/gtest-uct_test.o uct/gtest-uct_p2p_test.o uct/gtest-test_amo.o
)

MARKER_CONTENT=$(printf 'schema=%s\nversion=%s\nsrc=%s\ncompiler=%s\nconfigure_options=--prefix=%s %s\nconfigure_vars=%s\n' \
    "$MARKER_SCHEMA" "$UCX_VERSION" "$UCX_SRC_DIR" \
    "$(g++ --version 2>/dev/null | head -n1)" "$PREFIX_DIR" "${CONF_OPTS[*]}" "${CONF_VARS[*]}")

write_result_env() {
    {
        printf '# written by %s\n' "$PROG"
        printf 'UCX_SRC_DIR=%s\n' "$UCX_SRC_DIR"
        printf 'UCX_VERSION=%s\n' "$UCX_VERSION"
        printf 'UCX_GTEST_BUILD_DIR=%s\n' "$GDIR"
        printf 'UCX_GTEST_CXXFLAGS=%s\n' "$GTEST_CXXFLAGS"
    } >"$RESULT_ENV.tmp"
    mv -f "$RESULT_ENV.tmp" "$RESULT_ENV"
}

objects_ok() {
    local f
    for f in "${NEEDED[@]}"; do
        [[ -e $GDIR/test/gtest/$f ]] || return 1
    done
    [[ -e $GDIR/src/ucs/.libs/libucs.so && -e $GDIR/src/uct/.libs/libuct.so ]]
}

finish() {
    write_result_env
    msg "ready: $GDIR ($((SECONDS - START_TS)) s)"
    if ((PRINT_ENV)); then
        cat "$RESULT_ENV"
    fi
    exit 0
}

# --- fast path (no lock needed: read-only) ---------------------------------
if ((!FORCE)) && [[ -f $MARKER && $(<"$MARKER") == "$MARKER_CONTENT" ]] && objects_ok; then
    msg "cached ($MARKER matches)"
    finish
fi

# --- serialize concurrent builds -------------------------------------------
exec 9>"${GDIR%/}.lock"
if ! flock -n 9; then
    msg "another build holds ${GDIR%/}.lock; waiting ..."
    flock 9
fi
# Somebody else may have finished while we waited.
if ((!FORCE)) && [[ -f $MARKER && $(<"$MARKER") == "$MARKER_CONTENT" ]] && objects_ok; then
    msg "cached ($MARKER matches, built by a concurrent run)"
    finish
fi

{
    printf '\n===== %s %s: %s =====\n' "$PROG" "$(date '+%F %T')" "$GDIR"
} >>"$LOG"
msg "log: $LOG"

rm -f "$MARKER"
# Re-configure from scratch when forced or when the options changed.
OPTS_FILE="$GDIR/.ucx-cxl-configure-options"
WANT_OPTS="--prefix=$PREFIX_DIR ${CONF_OPTS[*]} ${CONF_VARS[*]} src=$UCX_SRC_DIR"
if ((FORCE)) || [[ ! -f $GDIR/config.status || ! -f $OPTS_FILE || $(<"$OPTS_FILE") != "$WANT_OPTS" ]]; then
    if [[ -d $GDIR ]]; then
        msg "removing old build dir $GDIR"
        rm -rf -- "$GDIR"
    fi
    mkdir -p "$GDIR"
    msg "configure: --prefix=$PREFIX_DIR ${CONF_OPTS[*]} ${CONF_VARS[*]}"
    t0=$SECONDS
    (cd "$GDIR" && env ${CONF_VARS[@]+"${CONF_VARS[@]}"} \
        "$UCX_SRC_DIR/configure" --prefix="$PREFIX_DIR" "${CONF_OPTS[@]}") >>"$LOG" 2>&1 ||
        die "configure failed"
    printf '%s\n' "$WANT_OPTS" >"$OPTS_FILE"
    msg "configure done ($((SECONDS - t0)) s)"
else
    msg "configure cached (same options), continuing with make"
fi

if [[ -n $GTEST_CXXFLAGS ]]; then
    grep -q -e "^GTEST_CXXFLAGS = .*$GTEST_CXXFLAGS" "$GDIR/test/gtest/Makefile" ||
        die "GTEST_CXXFLAGS='$GTEST_CXXFLAGS' did not reach $GDIR/test/gtest/Makefile"
fi
grep -q '^HAVE_GTEST_TRUE=' "$GDIR/config.log" &&
    grep -q "^HAVE_GTEST_TRUE=''" "$GDIR/config.log" ||
    die "configure did not enable gtest (see $GDIR/config.log)"

# --- ABI check: config.h must equal the one setup-deps.sh verified ----------
normalize_config_h() {
    # Drop install-path dependent defines and the JNI header probes (only
    # used by the Java bindings, which this build disables); keep the rest.
    grep -E '^#define' "$1" |
        grep -v -E '^#define (UCX_CONFIGURE_FLAGS|UCX_CONFIG_DIR|UCX_MODULE_DIR|UCX_PREFIX|UCX_LIBDIR|HAVE_JNI_H|HAVE_JNI_MD_H)\b' |
        grep -v -F -e "$2" |
        sort
}
if ! diff <(normalize_config_h "$UCX_BUILD_DIR/config.h" "$(dirname "$UCX_BUILD_DIR")/install") \
          <(normalize_config_h "$GDIR/config.h" "$PREFIX_DIR") >>"$LOG" 2>&1; then
    die "config.h of $GDIR differs from $UCX_BUILD_DIR/config.h (diff in log); the gtest build would not match the installed UCX ABI."
fi
msg "config.h matches $UCX_BUILD_DIR/config.h (install paths aside)"

# --- build ------------------------------------------------------------------
msg "make -j$JOBS (UCX libraries, tools and the full test/gtest binary; 15-25 minutes on 2 cores)"
t0=$SECONDS
make -C "$GDIR" -j"$JOBS" >>"$LOG" 2>&1 || die "make failed"
msg "make done ($((SECONDS - t0)) s)"
t0=$SECONDS
make -C "$GDIR/test/gtest" -j"$JOBS" >>"$LOG" 2>&1 || die "make -C test/gtest failed"
msg "make -C test/gtest done ($((SECONDS - t0)) s)"

missing=()
for f in "${NEEDED[@]}"; do
    [[ -e $GDIR/test/gtest/$f ]] || missing+=("$f")
done
((${#missing[@]} == 0)) || die "build finished but these are missing in $GDIR/test/gtest: ${missing[*]}"
objects_ok || die "build finished but libucs/libuct .so are missing in $GDIR/src"

printf '%s\n' "$MARKER_CONTENT" >"$MARKER.tmp"
mv -f "$MARKER.tmp" "$MARKER"
finish
