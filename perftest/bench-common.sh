# bench-common.sh - what the benchmark runners (perftest/run-*-bench.sh)
# share: their --help, errors, option values and timestamped progress.
# Sourced after PROG is set; msg needs RUNLOG and T_START.

# the script's header comment, as its --help
usage() { awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; }
die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }
# need OPTION ARGC: OPTION takes a value (ARGC: arguments left, itself included)
need() { [[ $2 -ge 2 ]] || die "$1 needs a value"; }
# progress on stderr and in the run's log, with the seconds since T_START
msg() { printf '%s: [%4ds] %s\n' "$PROG" "$((SECONDS - T_START))" "$*" | tee -a "$RUNLOG" >&2; }

# The pool's folder (--pool-dir): "huge" mounts a private tmpfs with
# huge=within_size (2 MiB pages, as a devdax CXL device maps; mode 0700,
# SIZE MiB), "shm" is /dev/shm (4 KiB pages unless it is mounted with
# huge=), anything else a writable folder.  Where mounting is refused,
# "huge" falls back to /dev/shm and says so in POOL_NOTE.  Sets POOL_DIR,
# POOL_MNT (to unmount: bench_pool_unmount) and POOL_NOTE; ERRLOG gets the
# mount's error.  Why: a reader's first touch of a 4 KiB pool page costs a
# fault (about 1.6 us under shadow paging), 512 times more of them than
# on 2 MiB pages.
bench_pool_dir() {   # bench_pool_dir SPEC SIZE_MIB ERRLOG
    POOL_MNT="" POOL_NOTE=""
    case $1 in
        huge)
            POOL_MNT=$(mktemp -d "/tmp/$PROG-pool.XXXXXX") || die "mktemp failed"
            if mount -t tmpfs -o "huge=within_size,size=${2}m,mode=0700" "$PROG" "$POOL_MNT" 2>"$3"; then
                POOL_DIR=$POOL_MNT
            else
                rmdir "$POOL_MNT"
                POOL_MNT=""
                POOL_NOTE="a huge-page tmpfs could not be mounted ($(head -n1 "$3")): the pool is in /dev/shm"
                msg "$POOL_NOTE"
                POOL_DIR=/dev/shm
            fi ;;
        shm) POOL_DIR=/dev/shm ;;
        *) [[ -d $1 && -w $1 ]] || die "--pool-dir $1: not a writable folder"
           POOL_DIR=$1 ;;
    esac
}
bench_pool_unmount() {
    if [[ -n $POOL_MNT ]]; then umount "$POOL_MNT" && rmdir "$POOL_MNT"; fi
    POOL_MNT=""
}
# bench_pool_pages CXLPOOL POOL JSON: `cxlpool info --json` into JSON; prints
# "page_size|page_source"
bench_pool_pages() {
    "$1" info "$2" --json >"$3" || return 1
    "$PY" -c 'import json, sys; i = json.load(open(sys.argv[1])); print(i["page_size"], i["page_source"], sep="|")' "$3"
}
