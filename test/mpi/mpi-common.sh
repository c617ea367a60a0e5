# mpi-common.sh - shell functions the test/mpi scripts share (sourced):
#
#   mpi_builddir SCRIPT [BUILDDIR|-h|--help]
#       --help: print SCRIPT's header comment and exit 0; else set BUILD to
#       BUILDDIR, $CXL_BUILDDIR, build-release/ or build/ at the top of the
#       source tree (absolute), and TOP; exit 99 if it is not there
#   mpi_need FILE...
#       mpicc and mpirun on PATH and every FILE present, else exit 99
#   mpi_build SRC BIN
#       mpicc -O2 -g -Wall -Wextra -Werror -o BIN SRC, else exit 99; BIN
#       is replaced in one rename, never seen half written
#   mpi_coherence POOL NP
#       from CXL_TEST_COHERENCE (hw, the default, or sw): COHERENCE, SPEC
#       (the pool as the ranks name it: POOL, or emulate-nc:POOL) and
#       CREATE_OPTS (cxlpool create: 1 GiB; sw: on the strict emulator with
#       at least 8 host partitions and one more than NP); exit 99 if bad
#   mpi_pool_destroy CXLPOOL SPEC POOL
#       destroy the pool (forced if it must be) and any emulated-host view
#   mpi_ompi_compdir
#       print Open MPI's own component directory (ompi_info): it stays on
#       mca_base_component_path after the build tree's
#   mpi_coll_env MAXNP
#       the setup of the coll/cxl scripts (after mpi_builddir): MODULE,
#       COMP, CXLPOOL, CONF; the pool POOL, named SPEC (mpi_coherence, 2
#       emulated hosts per rank for MAXNP ranks: a process's transport and
#       its collectives library each open the pool); OMPI_COMPDIR; SCR, a
#       scratch folder, removed at exit with the pools; BASE (mpirun and
#       its options) and ENVS (the ranks' environment: the transport, the
#       pool, sw coherence); exit 99 if anything needed is missing
#   mpi_pool_create POOL
#       cxlpool create POOL with CREATE_OPTS, else exit 99
#   mpi_coll_setup PROGRAM PREFIX MAXNP
#       mpi_coll_env MAXNP, and SRC (test/mpi/PROGRAM.c) built to BIN
#       (BUILD/test/mpi/PROGRAM); a second pool POOL2, named SPEC2 (for
#       runs whose ranks map different pools); ENVS gains PREFIX"LARGE"
#       and PREFIX"TIMEOUT" from the caller's environment or 65537 / 300
#   mpi_job NAME LIMIT OUT CMD...
#       run CMD (an mpirun line) for at most LIMIT seconds; OUT gets each
#       rank's output, rank after rank (mpirun's own in OUT.mpirun); set RC, SECS, RES (the last "NAME: N checks, N failed" line),
#       DIGEST (the last "digest:" line) and CNT (the last "counters:")
#   mpi_job_output OUT
#       OUT and mpirun's own lines of that run, for a failure report
#   mpi_passed NAME
#       after mpi_job: rc 0 and "NAME: N checks, 0 failed" with N > 0
#
# The caller sets SCRIPT_DIR (its own directory) before sourcing.

mpi_builddir() {
    local script=$1 name
    shift
    name=$(basename "$script")
    TOP=$(cd "$SCRIPT_DIR/../.." && pwd)
    if [ $# -ge 1 ]; then
        BUILD=$1
    elif [ -n "${CXL_BUILDDIR:-}" ]; then
        BUILD=$CXL_BUILDDIR
    elif [ -d "$TOP/build-release" ]; then
        BUILD=$TOP/build-release
    else
        BUILD=$TOP/build
    fi
    case "$BUILD" in
        -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$script"; exit 0 ;;
    esac
    BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || {
        echo "$name: build directory '${1:-}' not found" >&2; exit 99; }
}

mpi_need() {
    local tool f
    for tool in mpicc mpirun; do
        command -v "$tool" >/dev/null 2>&1 || {
            echo "$(basename "$0"): $tool not found (apt-get install openmpi-bin libopenmpi-dev)" >&2
            exit 99; }
    done
    for f in "$@"; do
        [ -e "$f" ] || { echo "$(basename "$0"): $f not found (build first)" >&2; exit 99; }
    done
}

mpi_build() {
    local tmp
    mkdir -p "$(dirname "$2")" || exit 99
    echo "$(basename "$0"): mpicc -O2 -g -Wall -Wextra -Werror -o $2 $1"
    # Several scripts build the same program while others run it (make
    # check -j); the linker rewrites its output in place, so link beside it
    # and rename: a reader sees the old program or the new one, whole.
    tmp=$(mktemp "$2.XXXXXX") || exit 99
    if ! mpicc -O2 -g -Wall -Wextra -Werror -o "$tmp" "$1"; then
        rm -f "$tmp"
        echo "$(basename "$0"): building $1 failed" >&2
        exit 99
    fi
    chmod 755 "$tmp" && mv -f "$tmp" "$2" || { rm -f "$tmp"; exit 99; }
}

mpi_coherence() {
    local hosts
    COHERENCE=${CXL_TEST_COHERENCE:-hw}
    case "$COHERENCE" in
        hw) SPEC=$1
            CREATE_OPTS=(--size 1G) ;;
        sw) SPEC=emulate-nc:$1
            hosts=$(($2 + 1 > 8 ? $2 + 1 : 8))
            CREATE_OPTS=(--size "$((hosts > 8 ? hosts * 128 : 1024))M"
                         --coherence sw --hosts "$hosts") ;;
        *)  echo "$(basename "$0"): CXL_TEST_COHERENCE must be hw or sw, not '$COHERENCE'" >&2
            exit 99 ;;
    esac
}

mpi_pool_destroy() {
    local cxlpool=$1 spec=$2 pool=$3
    if [ -e "$pool" ]; then
        "$cxlpool" destroy "$spec" >/dev/null 2>&1 ||
            "$cxlpool" destroy "$spec" --force >/dev/null 2>&1 || rm -f "$pool"
    fi
    rm -f "$pool".host*
}

mpi_ompi_compdir() {
    local d
    d=$(ompi_info --path pkglibdir --parsable 2>/dev/null |
        sed -n 's/^path:pkglibdir://p')
    echo "${d:-/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3}"
}

mpi_coll_cleanup() {
    mpi_pool_destroy "$CXLPOOL" "$SPEC" "$POOL"
    if [ -n "${POOL2:-}" ]; then
        mpi_pool_destroy "$CXLPOOL" "$SPEC2" "$POOL2"
    fi
    rm -rf "$SCR"
}

mpi_coll_env() {
    local maxnp=$1 name tag
    name=$(basename "$0")
    tag=${name%.sh}
    MODULE=$BUILD/.libs/libuct_cxl.so
    COMP=$BUILD/.libs/mca_coll_cxl.so
    CXLPOOL=$BUILD/cxlpool
    CONF=$TOP/contrib/openmpi-cxl.conf
    POOL=/dev/shm/ucx-cxl-$tag-$$.pool
    mpi_coherence "$POOL" "$((2 * maxnp))"
    mpi_need "$MODULE" "$COMP" "$CXLPOOL" "$CONF"
    OMPI_COMPDIR=$(mpi_ompi_compdir)

    POOL2=                            # mpi_coll_setup's, if any
    SCR=$(mktemp -d "${TMPDIR:-/tmp}/$tag.XXXXXX") || exit 99
    trap mpi_coll_cleanup EXIT
    trap 'exit 130' INT TERM
    mpi_pool_create "$POOL"

    BASE=(mpirun --allow-run-as-root --oversubscribe --tune "$CONF"
          --mca mca_base_component_path "$BUILD/.libs:$OMPI_COMPDIR")
    ENVS=(-x "LD_PRELOAD=$MODULE" -x UCX_TLS=cxl -x "UCX_CXL_POOL=$SPEC")
    if [ "$COHERENCE" = sw ]; then
        unset UCX_CXL_HOST_INDEX      # each rank an emulated host of its own
        ENVS+=(-x UCX_CXL_COHERENCE=sw)
    fi
    echo "$name: pool $SPEC (${CREATE_OPTS[*]}), component $COMP"
}

# mpi_pool_create POOL: cxlpool create with CREATE_OPTS, else exit 99
mpi_pool_create() {
    if ! "$CXLPOOL" create "$1" "${CREATE_OPTS[@]}" >"$SCR/create.out" 2>&1; then
        echo "$(basename "$0"): cxlpool create $1: $(cat "$SCR/create.out")" >&2
        exit 99
    fi
}

mpi_coll_setup() {
    local prog=$1 prefix=$2 maxnp=$3 name tag spec large timeout
    name=$(basename "$0")
    tag=${name%.sh}
    SRC=$SCRIPT_DIR/$prog.c
    BIN=$BUILD/test/mpi/$prog
    mpi_need "$SRC"
    mpi_coll_env "$maxnp"
    mpi_build "$SRC" "$BIN"
    POOL2=/dev/shm/ucx-cxl-$tag-2-$$.pool
    spec=$SPEC
    mpi_coherence "$POOL2" "$((2 * maxnp))"
    SPEC2=$SPEC
    SPEC=$spec
    mpi_pool_create "$POOL2"

    large=${prefix}LARGE
    timeout=${prefix}TIMEOUT
    ENVS+=(-x "$large=${!large:-65537}" -x "$timeout=${!timeout:-300}")
}

mpi_job() {
    local name=$1 limit=$2 out=$3 t0 t1 cmd a r own=0
    shift 3
    # Each rank's output in a file of its own, and OUT their concatenation
    # in rank order: on mpirun's own output the ranks' lines interleave,
    # even within a line, and a check that counts lines per rank miscounts.
    # mpirun's output stays in OUT.mpirun (its own messages: a rank's
    # signal, a failed launch); a caller that names --output-filename
    # itself gets mpirun's output in OUT.
    for a in "$@"; do
        [ "$a" = --output-filename ] && own=1
    done
    if [ "$own" -eq 0 ] && [ "$(basename "$1")" = mpirun ]; then
        rm -rf "$out.d"
        cmd=("$1" --output-filename "$out.d" "${@:2}")
    else
        cmd=("$@")
    fi
    t0=$(date +%s.%N)
    timeout --kill-after=15 "$limit" "${cmd[@]}" >"$out.mpirun" 2>&1
    RC=$?
    t1=$(date +%s.%N)
    : >"$out"
    r=0
    while [ -d "$out.d/1/rank.$r" ]; do
        cat "$out.d/1/rank.$r"/std* >>"$out" 2>/dev/null
        r=$((r + 1))
    done
    [ -s "$out" ] || cp "$out.mpirun" "$out"
    SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    RES=$(grep -E "^$name: [0-9]+ checks, [0-9]+ failed" "$out" | tail -n 1)
    DIGEST=$(sed -n 's/^digest: //p' "$out" | tail -n 1)
    CNT=$(sed -n 's/^counters: //p' "$out" | tail -n 1)
}

# mpi_job_output OUT: what a failure report shows, the ranks' output and
# mpirun's own lines about them (a rank's signal, an abort)
mpi_job_output() {
    cat "$1"
    [ -f "$1.mpirun" ] &&
        grep -E '^(mpirun|Primary job|--------)|exited on signal|aborted' "$1.mpirun"
    return 0
}

mpi_passed() {
    [ "$RC" -eq 0 ] && [[ $RES =~ ^$1:\ [1-9][0-9]*\ checks,\ 0\ failed ]]
}
