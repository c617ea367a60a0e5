# outside-suite.sh - what the runners of other projects' MPI test suites
# share (sourced by contrib/run-mpi4py-tests.sh and
# contrib/run-mpich-coll-tests.sh): their --help, the build folder's files,
# the pool, the ranks' environment and the mpirun options per mode.
#
#   suite_help SCRIPT ARG
#       print SCRIPT's header comment and exit if ARG is empty (status 1),
#       -h or --help (status 0)
#   suite_build BUILDARG
#       BUILD (BUILDARG, default TOP/build-release), MODULE, CXLPOOL,
#       COMPDIR (Open MPI's component folder); exit 2 if a file is missing
#   suite_pool TAG HOSTS KEEP
#       SCR (a scratch folder, removed at exit unless KEEP is not empty);
#       a 1 GiB pool /dev/shm/ucx-cxl-TAG-PID.pool, destroyed at exit, hw
#       or, with CXL_TEST_COHERENCE=sw, on the strict non-coherent emulator
#       with HOSTS emulated hosts (2 per rank: a rank's transport and its
#       coll/cxl each open the pool); ENVS, the ranks' -x options
#   suite_mca MODE
#       MCA, the mpirun options of a run with coll/cxl (MODE cxl: its
#       verbose line per communicator) or without it (MODE off)
#
# The caller sets SUITE (its name, for messages) and TOP before sourcing.

suite_help() {
    case "${2:-}" in
        ""|-h|--help)
            awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$1"
            [ -n "${2:-}" ]; exit $? ;;
    esac
}

suite_build() {
    local f
    BUILD=$(cd "${1:-$TOP/build-release}" 2>/dev/null && pwd) || {
        echo "$SUITE: no build folder '${1:-$TOP/build-release}'" >&2; exit 2; }
    MODULE=$BUILD/.libs/libuct_cxl.so
    CXLPOOL=$BUILD/cxlpool
    for f in "$MODULE" "$BUILD/.libs/mca_coll_cxl.so" "$CXLPOOL"; do
        [ -e "$f" ] || { echo "$SUITE: $f not found (build first)" >&2; exit 2; }
    done
    COMPDIR=$(ompi_info --path pkglibdir --parsable 2>/dev/null |
              sed -n 's/^path:pkglibdir://p')
    COMPDIR=${COMPDIR:-/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3}
}

suite_pool() {
    local tag=$1 hosts=$2 keep=$3 opts
    SUITE_POOL=/dev/shm/ucx-cxl-$tag-$$.pool
    SCR=$(mktemp -d "${TMPDIR:-/tmp}/run-$tag.XXXXXX") || exit 2
    SUITE_SPEC=$SUITE_POOL
    SUITE_KEEP=$keep
    trap '"$CXLPOOL" destroy "$SUITE_SPEC" >/dev/null 2>&1 || rm -f "$SUITE_POOL"
          [ -n "$SUITE_KEEP" ] || rm -rf "$SCR"' EXIT
    trap 'exit 130' INT TERM
    ENVS=(-x "LD_PRELOAD=$MODULE" -x UCX_TLS=cxl)
    case "${CXL_TEST_COHERENCE:-hw}" in
        hw) opts=(--size 1G) ;;
        sw) SUITE_SPEC=emulate-nc:$SUITE_POOL
            opts=(--size 1G --coherence sw --hosts "$hosts")
            unset UCX_CXL_HOST_INDEX
            ENVS+=(-x UCX_CXL_COHERENCE=sw) ;;
        *)  echo "$SUITE: CXL_TEST_COHERENCE must be hw or sw" >&2; exit 2 ;;
    esac
    ENVS+=(-x "UCX_CXL_POOL=$SUITE_SPEC")
    "$CXLPOOL" create "$SUITE_POOL" "${opts[@]}" >"$SCR/create.out" 2>&1 || {
        echo "$SUITE: cxlpool create: $(cat "$SCR/create.out")" >&2; exit 2; }
}

suite_mca() {
    MCA=(--allow-run-as-root --oversubscribe --tune "$TOP/contrib/openmpi-cxl.conf"
         --mca mca_base_component_path "$BUILD/.libs:$COMPDIR")
    if [ "$1" = cxl ]; then
        MCA+=(--mca coll_cxl_verbose 1)
    else
        MCA+=(--mca coll ^cxl)
    fi
}
