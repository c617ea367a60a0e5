#!/usr/bin/env bash
#
# setup-deps.sh - the single set-up step of the ucx-cxl project.
#
# What it does (every step prints one short "setup-deps: ..." line on stderr;
# heavy command output goes to $UCX_CXL_CACHE/setup-deps.log, whose last 30
# lines are printed if a step fails):
#
#   1. Installs every Debian package the project needs (list: DEB_PACKAGES
#      below). Only packages that dpkg reports as not installed are fetched;
#      "apt-get update" runs at most once, and only if something is missing.
#   2. Fetches Debian's source package of EXACTLY the installed UCX version
#      (dpkg-query's ${Version} of libucx0) - the plugin needs UCT's internal
#      headers (src/uct/base/*.h, ...), which no binary package ships.  If no
#      deb-src entry for this release (bookworm) is configured, it writes
#      /etc/apt/sources.list.d/ucx-cxl-src.sources first.  The source is kept
#      in a cache directory outside the repository.  If the archive no longer
#      has the installed version's source, it stops (exit 1) and says so.
#   3. Configures that source tree (configure only, no make) with the feature
#      options from the "# Configured with:" line of `ucx_info -v`, so that
#      config.h - and therefore struct layouts - match the installed
#      libuct.so.  It then checks config.h: ENABLE_ASSERT is 1, ENABLE_STATS
#      is undefined, ENABLE_MT is 1, uct_MODULES equals the string compiled
#      into the installed libuct.so.0, and the UCT version in
#      /usr/include/uct/api/version.h matches.  Any mismatch stops it.
#   4. Records the result:
#        $UCX_CXL_CACHE/current      -> ucx-<version>   (symlink)
#        $UCX_CXL_CACHE/current.env  UCX_SRC_DIR=, UCX_BUILD_DIR=, UCX_VERSION=,
#                                    UCX_CONF_OPTS= (the derived feature options)
#      Consumers can simply `. "$UCX_CXL_CACHE/current.env"`.
#
# Cache layout ($UCX_CXL_CACHE, default /var/cache/ucx-cxl):
#   setup-deps.log                 log of all runs (appended, trimmed at 4 MiB)
#   ucx-<version>/dl/              the downloaded .dsc/.orig/.debian files
#   ucx-<version>/src/             unpacked, Debian-patched source  (UCX_SRC_DIR)
#   ucx-<version>/build/           configure output, config.h       (UCX_BUILD_DIR)
#   ucx-<version>/install/         --prefix given to configure (nothing installed)
#   ucx-<version>/.setup-done      marker: version + exact configure options
#
# A second run finds the marker, skips download/configure, re-runs the cheap
# checks and finishes in seconds.  --force redoes the source step.
#
# Usage:   contrib/setup-deps.sh [--force] [--help]
# Env:     UCX_CXL_CACHE   cache directory (default /var/cache/ucx-cxl)
# Needs:   root (or password-less sudo) whenever apt has work to do.
# Exit:    0 ok, 1 failure/mismatch, 2 bad command line.
#
set -euo pipefail

# ---------------------------------------------------------------------------
# Debian packages the project needs.  Extend here.
# ---------------------------------------------------------------------------
DEB_PACKAGES=(
    build-essential autoconf automake libtool pkg-config
    libucx-dev libucx0 ucx-utils
    libdaxctl-dev libnuma-dev numactl
    googletest libgtest-dev
    dpkg-dev xz-utils jq util-linux iproute2
    libibverbs-dev librdmacm-dev
    valgrind openmpi-bin libopenmpi-dev
    # an unchanged MPI application that checks its own results, through
    # coll/cxl (test/mpi/run-mpi-hpcc.sh)
    hpcc
    gnuplot-nox
    # strace: the byte counts of run-mpi-single-host.sh and the pods test
    # (without it those checks are "not run"); python3 (/usr/bin/python3):
    # perftest/report.py
    strace python3
    # the Python package (python/ucx_cxl) under Debian's /usr/bin/python3:
    # PyTorch datasets and the Dask comm backend, their tests
    python3-numpy python3-torch python3-pytest python3-dask python3-distributed
    python3-pandas
    # the fuzz pass (test/fuzz): clang with libFuzzer and the sanitizer
    # runtimes
    clang-14 libclang-rt-14-dev
    # test/vm (make check-devdax): QEMU guests with Debian's kernel (fetched
    # by `apt-get download`, not installed), an initramfs of busybox, the
    # nvdimm/CXL tools (ndctl, daxctl; cxl is in ndctl), cpio, depmod (kmod)
    qemu-system-x86 busybox-static ndctl daxctl cpio kmod file
)

UCX_BIN_PKG=libucx0                       # the package whose version we match
UCX_RELATED_PKGS=(libucx-dev ucx-utils)   # must have the same version
SRC_LIST_FILE=/etc/apt/sources.list.d/ucx-cxl-src.sources
DEBIAN_MIRROR=http://deb.debian.org/debian
DEBIAN_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
MARKER_SCHEMA=1                           # bump to invalidate old caches

PROG=setup-deps
CACHE=${UCX_CXL_CACHE:-/var/cache/ucx-cxl}
LOG=""
FORCE=0
APT_UPDATED=0
START_TS=$SECONDS

usage() {
    cat <<EOF
Usage: ${0##*/} [--force] [--help]

Installs the Debian packages ucx-cxl needs, fetches Debian's source package
of exactly the installed UCX version and configures it (config.h and
generated headers only) so its struct layouts match the installed libuct.

Options:
  --force     redo the source step (download, unpack, configure) even if
              the cache says it is done
  -h, --help  print this help and exit

Environment:
  UCX_CXL_CACHE   cache directory, outside the repository
                  (default: /var/cache/ucx-cxl; now: ${CACHE})

Results:
  \$UCX_CXL_CACHE/current      symlink to ucx-<version>
  \$UCX_CXL_CACHE/current.env  UCX_SRC_DIR=..., UCX_BUILD_DIR=..., UCX_VERSION=...
  \$UCX_CXL_CACHE/setup-deps.log  log (appended per run)
EOF
}

msg() { printf '%s: %s\n' "$PROG" "$*" >&2; }

die() {   # die <paragraph...>
    printf '%s: ERROR: %s\n' "$PROG" "$*" >&2
    exit 1
}

log_tail() {
    if [[ -n $LOG && -s $LOG ]]; then
        printf '%s: ---- last 30 lines of %s ----\n' "$PROG" "$LOG" >&2
        tail -n 30 "$LOG" >&2
        printf '%s: ---- end of log ----\n' "$PROG" >&2
    fi
}

# run <description> <command...>: output to the log; on failure show its tail.
run() {
    local what=$1 rc=0
    shift
    printf '\n### %s: %s\n### $ %s\n' "$(date '+%F %T')" "$what" "$*" >>"$LOG"
    "$@" >>"$LOG" 2>&1 || rc=$?
    if ((rc != 0)); then
        printf '%s: ERROR: %s failed (exit %d)\n' "$PROG" "$what" "$rc" >&2
        log_tail
        exit 1
    fi
}

on_unexpected_error() {
    printf '%s: ERROR: unexpected failure at line %s (exit %s)\n' \
        "$PROG" "$1" "$2" >&2
    log_tail
    exit 1
}

# as_root <command...>: run directly as root, else through password-less sudo.
as_root() {
    if ((EUID == 0)); then
        "$@"
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo -n "$@"
    else
        die "'$*' needs root; re-run as root (or with password-less sudo)."
    fi
}

apt_update_once() {
    ((APT_UPDATED)) && return 0
    msg "apt-get update"
    run "apt-get update" as_root apt-get update
    APT_UPDATED=1
}

pkg_installed() {
    [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true) == "install ok installed" ]]
}

pkg_version() {   # pkg_version <pkg> [<dpkg-query field>]
    dpkg-query -W -f="\${${2:-Version}}" "$1" 2>/dev/null || true
}

# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------
for arg in "$@"; do
    case $arg in
        -h | --help) usage; exit 0 ;;
        --force) FORCE=1 ;;
        *)
            printf '%s: error: unknown option %q (see --help)\n' "$PROG" "$arg" >&2
            exit 2
            ;;
    esac
done

# ---------------------------------------------------------------------------
# Cache dir, log, lock
# ---------------------------------------------------------------------------
if [[ $CACHE != /* ]]; then
    CACHE="$PWD/$CACHE"
fi
mkdir -p "$CACHE" 2>/dev/null || as_root install -d -m 0755 "$CACHE"
[[ -w $CACHE ]] || die "cache directory $CACHE is not writable; run as root or set UCX_CXL_CACHE to a writable directory."
LOG="$CACHE/setup-deps.log"
# Appended across runs (so a cached run keeps the last real one); trimmed when big.
if [[ -f $LOG ]] && (($(stat -c %s "$LOG") > 4194304)); then
    tail -c 1048576 "$LOG" >"$LOG.tmp" && mv -f -- "$LOG.tmp" "$LOG"
fi
printf '\n######## %s: %s %s (pid %d)\n' "$(date '+%F %T')" "$0" "$*" $$ >>"$LOG"
set -E
trap 'on_unexpected_error "$LINENO" "$?"' ERR

exec 9>"$CACHE/.lock"
if command -v flock >/dev/null 2>&1 && ! flock -n 9; then
    msg "waiting for another setup-deps run (lock $CACHE/.lock)"
    flock 9
fi

# ---------------------------------------------------------------------------
# Step 1: Debian packages
# ---------------------------------------------------------------------------
missing=()
for p in "${DEB_PACKAGES[@]}"; do
    pkg_installed "$p" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
    msg "packages: all ${#DEB_PACKAGES[@]} installed"
else
    msg "packages: installing ${#missing[@]} missing: ${missing[*]}"
    apt_update_once
    run "apt-get install ${missing[*]}" as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends "${missing[@]}"
    still=()
    for p in "${missing[@]}"; do
        pkg_installed "$p" || still+=("$p")
    done
    ((${#still[@]} == 0)) || die "still not installed after apt-get install: ${still[*]}"
fi

# ---------------------------------------------------------------------------
# Installed UCX: version and configure options
# ---------------------------------------------------------------------------
UCX_VERSION=$(pkg_version "$UCX_BIN_PKG")
UCX_SRC_PKG=$(pkg_version "$UCX_BIN_PKG" source:Package)
UCX_SRC_VERSION=$(pkg_version "$UCX_BIN_PKG" source:Version)
[[ -n $UCX_VERSION && -n $UCX_SRC_PKG && -n $UCX_SRC_VERSION ]] ||
    die "cannot read the version of $UCX_BIN_PKG from dpkg."
for p in "${UCX_RELATED_PKGS[@]}"; do
    v=$(pkg_version "$p")
    [[ $v == "$UCX_VERSION" ]] ||
        die "$p is version '$v' but $UCX_BIN_PKG is '$UCX_VERSION'; headers, tools and library must come from one UCX build. Install matching versions (apt-get install $UCX_BIN_PKG=$UCX_VERSION ${UCX_RELATED_PKGS[*]/%/=$UCX_VERSION}) and re-run."
done
UCX_UPSTREAM=${UCX_SRC_VERSION#*:}   # drop epoch
UCX_UPSTREAM=${UCX_UPSTREAM%-*}      # drop Debian revision
MULTIARCH=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
LIBUCT=/usr/lib/$MULTIARCH/libuct.so.0
UCT_VERSION_H=/usr/include/uct/api/version.h

ucx_info_out=$(ucx_info -v 2>/dev/null) || die "'ucx_info -v' failed; is ucx-utils installed correctly?"
configured_with=$(sed -n 's/^# Configured with: *//p' <<<"$ucx_info_out")
[[ -n $configured_with ]] || die "'ucx_info -v' printed no '# Configured with:' line; cannot derive configure options."
info_ver=$(sed -n 's/^# Version *//p' <<<"$ucx_info_out")
[[ $info_ver == "$UCX_UPSTREAM" ]] ||
    die "ucx_info reports UCX '$info_ver' but package $UCX_BIN_PKG is '$UCX_VERSION' (upstream '$UCX_UPSTREAM'); fix the UCX installation and re-run."

# Keep feature options only; drop build-system-only ones and install paths.
CONF_OPTS=()
read -r -a _tokens <<<"$configured_with"
for t in "${_tokens[@]}"; do
    t=${t#\'}; t=${t%\'}
    case $t in
        --disable-option-checking | --disable-silent-rules | \
        --disable-maintainer-mode | --disable-dependency-tracking | \
        --enable-option-checking* | --enable-silent-rules | \
        --enable-maintainer-mode | --enable-dependency-tracking) ;;
        --enable-* | --disable-* | --with-* | --without-*) CONF_OPTS+=("$t") ;;
        *) ;;  # --build=, --host=, --prefix=, --libdir=, ... and anything else
    esac
done
msg "installed UCX $UCX_VERSION (source $UCX_SRC_PKG $UCX_SRC_VERSION), feature options: ${CONF_OPTS[*]}"

VDIR="$CACHE/ucx-${UCX_SRC_VERSION//:/_}"
DL_DIR="$VDIR/dl"
SRC_DIR="$VDIR/src"
BUILD_DIR="$VDIR/build"
PREFIX_DIR="$VDIR/install"
MARKER="$VDIR/.setup-done"
MARKER_CONTENT=$(printf 'schema=%s\nversion=%s\nconfigure_options=--prefix=%s %s\n' \
    "$MARKER_SCHEMA" "$UCX_SRC_VERSION" "$PREFIX_DIR" "${CONF_OPTS[*]}")

# ---------------------------------------------------------------------------
# Step 2: source package (skipped when the marker matches)
# ---------------------------------------------------------------------------
have_src_for_release() {   # configured deb-src lines for <suite>
    local releases
    # shellcheck disable=SC2016  # literal apt format / bash -c script
    releases=$(apt-get indextargets --no-release-info --format '$(RELEASE)' \
        'Created-By: Sources' 2>/dev/null || true)
    grep -qx -- "$1" <<<"$releases"
}
src_index_present() {      # downloaded Sources index for <suite>
    local f
    # shellcheck disable=SC2016  # literal apt format / bash -c script
    while read -r f; do
        compgen -G "${f}*" >/dev/null && return 0
    done < <(apt-get indextargets --no-release-info --format '$(FILENAME)' \
        'Created-By: Sources' "Release: $1" 2>/dev/null)
    return 1
}

version_mismatch() {   # version_mismatch [<version the archive gave>]
    local available got hint
    available=$(apt-cache showsrc "$UCX_SRC_PKG" 2>/dev/null |
        sed -n 's/^Version: //p' | sort -u | paste -sd' ' -)
    if [[ -n ${1:-} ]]; then
        got="$1 (versions the archive lists: ${available:-none})"
    else
        got="${available:-none} (requested version not found)"
    fi
    hint="<version>"
    [[ -n $available && $available != *' '* ]] && hint=$available
    die "version mismatch: the installed UCX is $UCX_BIN_PKG $UCX_VERSION (source package $UCX_SRC_PKG $UCX_SRC_VERSION), but the source package obtainable from the configured deb-src archives is $got. The plugin compiles against UCT's internal headers and must use exactly the source of the installed binary. Either install the UCX packages whose source is available (apt-get install $UCX_BIN_PKG=$hint ${UCX_RELATED_PKGS[*]/%/=$hint}) and re-run, or add a deb-src entry that still carries $UCX_SRC_VERSION (e.g. a http://snapshot.debian.org/archive/debian/<date>/ URI) and re-run with --force."
}

fetch_source() {
    (cd "$DL_DIR" && apt-get source --download-only "$UCX_SRC_PKG=$UCX_SRC_VERSION") >>"$LOG" 2>&1
}

source_step() {
    local codename suites dsc dsc_ver
    codename=$( (. /etc/os-release && printf '%s' "${VERSION_CODENAME:-}") || true)
    codename=${codename:-bookworm}
    suites="$codename $codename-updates"

    if have_src_for_release "$codename"; then
        msg "deb-src for $codename already configured"
    else
        msg "adding deb-src for $codename: $SRC_LIST_FILE"
        printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s\n' \
            "$DEBIAN_MIRROR" "$suites" "$DEBIAN_KEYRING" |
            as_root tee "$SRC_LIST_FILE" >/dev/null
        APT_UPDATED=0   # the new entry needs its own update
        apt_update_once
    fi
    if ((!APT_UPDATED)) && ! src_index_present "$codename"; then
        apt_update_once
    fi

    [[ -n $VDIR && $VDIR == "$CACHE"/ucx-* ]] || die "refusing to clean unexpected directory '$VDIR'."
    rm -rf -- "$VDIR"
    mkdir -p "$DL_DIR"

    msg "downloading source $UCX_SRC_PKG=$UCX_SRC_VERSION into $DL_DIR"
    printf '\n### apt-get source --download-only %s=%s\n' "$UCX_SRC_PKG" "$UCX_SRC_VERSION" >>"$LOG"
    if ! fetch_source; then
        if ((APT_UPDATED)); then
            log_tail
            version_mismatch ""
        fi
        msg "source not found in the current apt index, refreshing it"
        apt_update_once
        if ! fetch_source; then
            log_tail
            version_mismatch ""
        fi
    fi
    dsc=$(compgen -G "$DL_DIR/${UCX_SRC_PKG}_*.dsc" | head -n1 || true)
    [[ -n $dsc ]] || version_mismatch "missing (no .dsc was downloaded)"
    dsc_ver=$(sed -n 's/^Version: //p' "$dsc" | head -n1)
    [[ $dsc_ver == "$UCX_SRC_VERSION" ]] || version_mismatch "$dsc_ver"

    msg "unpacking $(basename "$dsc") into $SRC_DIR"
    run "dpkg-source -x" dpkg-source -x "$dsc" "$SRC_DIR"
    # dpkg-source leaves a copy/link of the orig tarball next to the target.
    find "$VDIR" -maxdepth 1 -name "${UCX_SRC_PKG}_*.orig*.tar.*" -delete
    [[ -f $SRC_DIR/src/uct/base/uct_iface.h ]] ||
        die "unpacked source $SRC_DIR lacks src/uct/base/uct_iface.h; unexpected package layout."

    if [[ ! -x $SRC_DIR/configure ]]; then
        msg "running autogen.sh (no configure in the source package)"
        # shellcheck disable=SC2016  # literal apt format / bash -c script
        run "autogen.sh" bash -c 'cd "$1" && ./autogen.sh' _ "$SRC_DIR"
    fi

    msg "configuring in $BUILD_DIR (takes a minute or two)"
    mkdir -p "$BUILD_DIR"
    # shellcheck disable=SC2016  # literal apt format / bash -c script
    run "configure" bash -c 'cd "$1" && shift && "$@"' _ "$BUILD_DIR" \
        "$SRC_DIR/configure" --prefix="$PREFIX_DIR" "${CONF_OPTS[@]}"
}

marker_ok() {
    [[ -f $MARKER && -f $BUILD_DIR/config.h && -f $SRC_DIR/src/uct/base/uct_iface.h ]] &&
        [[ $(<"$MARKER") == "$MARKER_CONTENT" ]]
}

if ((FORCE)); then
    msg "--force: redoing the source step"
    source_step
    new_source=1
elif marker_ok; then
    msg "source step cached ($MARKER matches), skipping download/configure"
    new_source=0
else
    source_step
    new_source=1
fi

# ---------------------------------------------------------------------------
# Step 3: verify the generated tree against the installed binary
# ---------------------------------------------------------------------------
msg "verifying $BUILD_DIR/config.h against $LIBUCT"
CONFIG_H="$BUILD_DIR/config.h"
[[ -f $CONFIG_H ]] || die "$CONFIG_H is missing after configure."
cfg_define() {   # value of '#define NAME value' in config.h, empty if undefined
    sed -n "s/^#define $1 \\(.*\\)\$/\\1/p" "$CONFIG_H" | head -n1
}
problems=()
[[ $(cfg_define ENABLE_ASSERT) == 1 ]] ||
    problems+=("ENABLE_ASSERT is '$(cfg_define ENABLE_ASSERT)', expected 1")
grep -q '^#define ENABLE_STATS\b' "$CONFIG_H" &&
    problems+=("ENABLE_STATS is defined, expected undefined")
[[ $(cfg_define ENABLE_MT) == 1 ]] ||
    problems+=("ENABLE_MT is '$(cfg_define ENABLE_MT)', expected 1")

cfg_modules=$(cfg_define uct_MODULES)
cfg_modules=${cfg_modules#\"}; cfg_modules=${cfg_modules%\"}
[[ -r $LIBUCT ]] || die "cannot read the installed $LIBUCT."
# uct_MODULES is a ':'-separated list of lower-case module names.
mapfile -t lib_modules < <(strings "$LIBUCT" | grep -E '^(:[a-z][a-z0-9_]*)+$' | sort -u)
if ((${#lib_modules[@]} == 1)); then
    [[ $cfg_modules == "${lib_modules[0]}" ]] ||
        problems+=("uct_MODULES is '$cfg_modules' but $LIBUCT has '${lib_modules[0]}'")
else
    found=0
    for m in "${lib_modules[@]}"; do [[ $m == "$cfg_modules" ]] && found=1; done
    ((found)) ||
        problems+=("uct_MODULES '$cfg_modules' not found in $LIBUCT (candidates: ${lib_modules[*]:-none})")
fi

uct_ver_string() { sed -n 's/^#define UCT_VERNO_STRING *"\(.*\)"/\1/p' "$1" | head -n1; }
sys_uct_ver=$(uct_ver_string "$UCT_VERSION_H")
[[ $sys_uct_ver == "$UCX_UPSTREAM" ]] ||
    problems+=("$UCT_VERSION_H says UCT '$sys_uct_ver', expected '$UCX_UPSTREAM'")
gen_version_h="$BUILD_DIR/src/uct/api/version.h"
if [[ -f $gen_version_h ]]; then
    gen_uct_ver=$(uct_ver_string "$gen_version_h")
    [[ $gen_uct_ver == "$sys_uct_ver" ]] ||
        problems+=("generated $gen_version_h says UCT '$gen_uct_ver', installed says '$sys_uct_ver'")
fi

# Full cross-check: `ucx_info -b` prints the config.h the installed UCX was
# built with.  Differences are only warned about (details in the log); the
# hard requirements are the checks above.  Allowed: the configure command line
# itself and Java (JNI) detection, which only matters for the Java bindings.
CONFIG_DIFF_ALLOWED='^(UCX_CONFIGURE_FLAGS|HAVE_JNI_H|HAVE_JNI_MD_H)$'
defines_of() {    # "NAME value" for every top-level #define, sorted
    grep -E '^#define [A-Za-z_][A-Za-z0-9_]*' |
        sed -E 's/^#define ([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*(.*[^[:space:]])?[[:space:]]*$/\1 \2/' |
        sort -u
}
if build_cfg=$(ucx_info -b 2>/dev/null) && [[ -n $build_cfg ]]; then
    cfg_diff=$(diff <(defines_of <<<"$build_cfg") <(defines_of <"$CONFIG_H") || true)
    diff_names=$(sed -nE 's/^[<>] ([A-Za-z0-9_]+).*/\1/p' <<<"$cfg_diff" |
        sort -u | grep -Ev "$CONFIG_DIFF_ALLOWED" | paste -sd' ' - || true)
    if [[ -n $diff_names ]]; then
        printf '\n### config.h vs "ucx_info -b" (< installed, > generated)\n%s\n' "$cfg_diff" >>"$LOG"
        msg "WARNING: config.h differs from 'ucx_info -b' in: $diff_names (details in $LOG)"
    else
        msg "config.h matches 'ucx_info -b' of the installed UCX"
    fi
fi

if ((${#problems[@]})); then
    printf '%s: ERROR: the configured UCX source does not match the installed UCX %s:\n' \
        "$PROG" "$UCX_VERSION" >&2
    for p in "${problems[@]}"; do
        printf '%s:   - %s\n' "$PROG" "$p" >&2
    done
    printf '%s: struct layouts would differ from the installed libuct. Check the configure options (see %s), make sure the optional libraries the Debian build used are installed (e.g. libibverbs-dev, librdmacm-dev), then re-run with --force.\n' \
        "$PROG" "$LOG" >&2
    rm -f -- "$MARKER"
    exit 1
fi

# ---------------------------------------------------------------------------
# Step 4: record the result
# ---------------------------------------------------------------------------
if ((new_source)) || [[ ! -f $MARKER ]]; then
    printf '%s\n' "$MARKER_CONTENT" >"$MARKER.tmp"
    mv -f -- "$MARKER.tmp" "$MARKER"
fi
ln -sfn -- "$(basename "$VDIR")" "$CACHE/current"
{
    printf '# written by contrib/setup-deps.sh on %s\n' "$(date '+%F %T')"
    printf 'UCX_SRC_DIR=%q\n' "$SRC_DIR"
    printf 'UCX_BUILD_DIR=%q\n' "$BUILD_DIR"
    printf 'UCX_VERSION=%q\n' "$UCX_SRC_VERSION"
    # the feature options that make struct layouts match (for other builds)
    printf 'UCX_CONF_OPTS=%q\n' "${CONF_OPTS[*]}"
} >"$CACHE/current.env.tmp"
mv -f -- "$CACHE/current.env.tmp" "$CACHE/current.env"
msg "recorded $CACHE/current -> $(basename "$VDIR") and $CACHE/current.env ($((SECONDS - START_TS))s)"

printf '%s: UCX %s source ready in %s\n' "$PROG" "$UCX_SRC_VERSION" "$SRC_DIR"
