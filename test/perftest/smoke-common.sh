# smoke-common.sh - what the benchmarks' smoke tests (test/perftest/
# test_*_bench.sh) share: the build's files, a scratch folder, the count of
# checks, and the run of a benchmark in its --smoke mode.  Sourced; sets
# top (the source tree), build (absolute) and out (removed at exit, with
# whatever smoke_on_exit added).

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
pass=0
fail=0
SMOKE_EXIT=()
ok() { echo "ok: $*"; pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

# smoke_on_exit CMD...: also run CMD when the test ends
smoke_on_exit() { SMOKE_EXIT+=("$*"); }
smoke_cleanup() {
    local c
    rm -rf "$out"
    for c in "${SMOKE_EXIT[@]+"${SMOKE_EXIT[@]}"}"; do
        eval "$c"
    done
}

# smoke_init NAME BUILD FILE...: the build folder (BUILD, else
# $CXL_BUILDDIR, else build-release/) must hold each FILE (exit 99)
smoke_init() {
    local name=$1 f
    build=${2:-${CXL_BUILDDIR:-$top/build-release}}
    shift 2
    build=$(cd "$build" 2>/dev/null && pwd) ||
        { echo "$name: no build folder" >&2; exit 99; }
    for f in "$@"; do
        [ -e "$build/$f" ] || { echo "$name: $build/$f not found" >&2; exit 99; }
    done
    out=$(mktemp -d "${TMPDIR:-/tmp}/${name%.sh}.XXXXXX") || exit 99
    trap smoke_cleanup EXIT
}

# smoke_exec LABEL SECONDS CMD...: run CMD (output in $out/runner.out)
smoke_exec() {
    local label=$1 secs=$2 rc
    shift 2
    timeout -k 10 "$secs" "$@" >"$out/runner.out" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        ok "$label finished"
    else
        bad "$label exit $rc:"
        tail -n 20 "$out/runner.out" | sed 's/^/    /'
    fi
}

# smoke_run SCRIPT SECONDS [ARGS...]: perftest/SCRIPT --smoke into $out/run
smoke_run() {
    local script=$1 secs=$2
    shift 2
    smoke_exec "$script --smoke" "$secs" "$top/perftest/$script" --smoke \
        --builddir "$build" --out "$out/run" "$@"
}

# smoke_header FILE WANT: FILE's first line is WANT
smoke_header() {
    if [ -f "$1" ] && [ "$(head -n1 "$1")" = "$2" ]; then
        ok "$(basename "$1") header"
    else
        bad "$(basename "$1") header: '$(head -n1 "$1" 2>/dev/null)'"
    fi
}

# smoke_finish LABEL: the closing line and the exit status
smoke_finish() {
    echo "$1: $pass passed, $fail failed"
    [ $fail -eq 0 ]
}

# smoke_pool_pages RUNDIR PROG: the pool's pages in meta.env as `cxlpool
# info` said (RUNDIR/raw/pool-info.json), in report.md; 2 MiB where the run
# mounted its own huge-page tmpfs (/tmp/PROG-pool.*), and that mount gone
smoke_pool_pages() {
    local psize ppath pline pwant
    psize=$(sed -n 's/^pool_page_size=//p' "$1/meta.env")
    ppath=$(sed -n 's/^pool=//p' "$1/meta.env")
    pline=$(grep -m1 -E '^\| pool pages \||pages \*\*' "$1/report.md" 2>/dev/null)
    case $ppath in
        /tmp/"$2"-pool.*) pwant=2097152 ;;
        *) pwant=$psize ;;
    esac
    if [ -n "$psize" ] && [ "$psize" = "$pwant" ] &&
       grep -q "\"page_size\":$psize," "$1/raw/pool-info.json" &&
       case $psize in 2097152) [[ $pline == *"2 MiB"* ]] ;; 4096) [[ $pline == *"4 KiB"* ]] ;; *) false ;; esac &&
       ! grep -q " ${ppath%/*} " /proc/self/mounts; then
        ok "pool pages: $psize bytes (${ppath%/*}), in the report, the run's mount gone"
    else
        bad "pool pages: meta $psize (want $pwant) for $ppath, report '$pline'"
    fi
}
