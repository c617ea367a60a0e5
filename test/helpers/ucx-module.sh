# ucx-module.sh - sourced by the scripts that run programs over UCX_TLS=cxl
# (test/ucp/run-ucp-tests.sh, test/coll/run-coll-ucp.sh): where cxlpool and
# the module are, what to preload, result counting, and pool files.
#
# cxl_ucx_setup NAME TOP: sets CXL (cxlpool: CXLPOOL_BIN, default
#   TOP/build/cxlpool), MODULE (CXL_UCT_MODULE, else .libs/libuct_cxl.so
#   next to CXLPOOL_BIN when that is set, else TOP/build/.libs/...) and
#   PRELOAD (the module; a module that links libasan gets the ASan runtime
#   before it, "ASan runtime does not come first in initial library list").
#   Exits 99 with "NAME: ..." when something is missing.
# ok NAME / fail NAME WHY: this script's own checks (PASS, FAIL).
# count OUT RC NAME: adds the program's "LABEL: N passed, N failed" line to
#   PASS and FAIL (LABEL: the regex SUMMARY_LABEL, default "ucp").
# show NAME FILE: prints FILE between "--- NAME ---" lines.
# spec / make_pool / pool_clean / destroy_pool: pool files POOLPFX-NAME.pool
#   of POOL_SIZE with CREATE_OPTS, named emulate-nc:PATH when COHERENCE=sw;
#   scratch files go to SCR.
# repair_args NAME POOL: sets REPAIR, the options of 'cxlpool check
#   --repair' for the one dead attachment in POOL: none in hw mode; in sw
#   mode --host-index K, K its host partition.

cxl_ucx_setup() {
    local name=$1 top=$2 asan_rt

    CXL=${CXLPOOL_BIN:-$top/build/cxlpool}
    if [ -n "${CXL_UCT_MODULE:-}" ]; then
        MODULE=$CXL_UCT_MODULE
    elif [ -n "${CXLPOOL_BIN:-}" ] &&
         [ -f "$(dirname "$CXLPOOL_BIN")/.libs/libuct_cxl.so" ]; then
        MODULE=$(dirname "$CXLPOOL_BIN")/.libs/libuct_cxl.so   # same build tree
    else
        MODULE=$top/build/.libs/libuct_cxl.so
    fi
    if [ ! -x "$CXL" ]; then
        echo "$name: cxlpool '$CXL' not found or not executable (build first)" >&2
        exit 99
    fi
    if [ ! -f "$MODULE" ]; then
        echo "$name: transport module '$MODULE' not found (build first)" >&2
        exit 99
    fi
    MODULE=$(cd "$(dirname "$MODULE")" && pwd)/$(basename "$MODULE")
    PRELOAD=$MODULE
    asan_rt=$(ldd "$MODULE" 2>/dev/null | awk '/libasan\.so/ {print $3; exit}')
    if [ -n "$asan_rt" ]; then
        PRELOAD=$asan_rt:$MODULE
    fi
}

PASS=0
FAIL=0
ok()   { PASS=$((PASS + 1)); echo "ok $1"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL $1: $2"; }

count() {
    local out=$1 rc=$2 name=$3 label=${SUMMARY_LABEL:-ucp} line p f
    line=$(grep -E "^$label: [0-9]+ passed, [0-9]+ failed\$" "$out" | tail -n 1)
    if [ -z "$line" ]; then
        fail "$name" "no '$label: N passed, N failed' line (exit status $rc$( \
              [ "$rc" = 124 ] && echo ', killed by the watchdog'))"
        return
    fi
    p=$(sed -E 's/^.*: ([0-9]+) passed, ([0-9]+) failed$/\1/' <<<"$line")
    f=$(sed -E 's/^.*: ([0-9]+) passed, ([0-9]+) failed$/\2/' <<<"$line")
    PASS=$((PASS + p))
    FAIL=$((FAIL + f))
    if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
        fail "$name" "exit status $rc although no check failed"
    fi
}

show() {
    echo "--- $1 ---"
    cat "$2"
    echo "--- end of $1 ---"
}

spec() {
    if [ "${COHERENCE:-hw}" = sw ]; then
        echo "emulate-nc:$1"
    else
        echo "$1"
    fi
}

# make_pool NAME: prints the path of a fresh pool
make_pool() {
    local pool=$POOLPFX-$1.pool
    rm -f "$pool" "$pool".host*
    if ! "$CXL" create "$pool" --size "$POOL_SIZE" \
            ${CREATE_OPTS[@]+"${CREATE_OPTS[@]}"} >"$SCR/create.out" 2>&1; then
        fail "pool create $1" "$(cat "$SCR/create.out")"
        return 1
    fi
    echo "$pool"
}

# pool_clean NAME POOL: nothing left in the pool after clean exits
pool_clean() {
    local name=$1 pool=$2 out=$SCR/check.out rc views
    if [ "${COHERENCE:-hw}" = sw ]; then
        # the last process of an emulated host removes its view
        views=$(ls "$pool".host* 2>/dev/null | tr '\n' ' ')
        if [ -z "$views" ]; then
            ok "$name: no emulated-host view left"
        else
            fail "$name: no emulated-host view left" "$views"
        fi
    fi
    "$CXL" check "$(spec "$pool")" >"$out" 2>&1
    rc=$?
    if [ $rc = 0 ]; then
        ok "$name: cxlpool check clean"
    else
        fail "$name: cxlpool check clean" "exit $rc: $(tr '\n' ' ' <"$out")"
    fi
    "$CXL" info "$(spec "$pool")" >"$out" 2>&1
    if grep -qE '^used +0 bytes in 0 of' "$out" &&
       grep -qE '^attachments +0 of' "$out"; then
        ok "$name: no extents or attachments left"
    else
        fail "$name: no extents or attachments left" \
             "$(grep -E '^(used|attachments)' "$out" | tr '\n' ' ')"
    fi
}

destroy_pool() {
    local s
    s=$(spec "$1")
    "$CXL" destroy "$s" >/dev/null 2>&1 || "$CXL" destroy "$s" --force \
        >/dev/null 2>&1 || rm -f "$1"
    rm -f "$1".host*
}

repair_args() {
    local name=$1 pool=$2 parts
    REPAIR=()
    if [ "${COHERENCE:-hw}" = sw ]; then
        # A process may repair only its own host partition; the dead process
        # was an emulated host of its own, so acting as that host now that
        # its process is dead is legitimate.  Its partition: the
        # host_partition of the dead attachment in 'cxlpool info --json'.
        "$CXL" info "$(spec "$pool")" --json >"$SCR/info.json" 2>&1
        parts=$(grep -o '{"slot":[^}]*}' "$SCR/info.json" |
                grep '"alive":false' |
                sed -n 's/.*"host_partition":\([0-9][0-9]*\).*/\1/p' | sort -u)
        if [ "$(echo "$parts" | grep -c .)" = 1 ]; then
            ok "$name: the dead attachment's host partition is $parts"
            echo "# sw mode: check --repair acts as the dead process's emulated host: --host-index $parts"
            REPAIR=(--host-index "$parts")
        else
            fail "$name: the dead attachment's host partition" \
                 "expected one, found '$(echo $parts)' in: $(cat "$SCR/info.json")"
        fi
    fi
}
