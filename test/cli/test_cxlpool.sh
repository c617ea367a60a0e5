#!/usr/bin/env bash
#
# Drives the real cxlpool binary (and the cxlpool_holder test helper) through
# every subcommand and every error path.
#
#   CXLPOOL_BIN     path of cxlpool         (default: ../../build/cxlpool)
#   CXLPOOL_HOLDER  path of cxlpool_holder  (default: ../../build/test/helpers/cxlpool_holder)
#
# Exit codes checked: 0 success, 1 failure/damaged pool, 2 usage error; every
# error must be exactly one line on stderr starting with "cxlpool: ".
# Prints "cli: N passed, N failed" last and exits non-zero if any case failed.

set -u

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CXL=${CXLPOOL_BIN:-$SCRIPT_DIR/../../build/cxlpool}
HOLDER=${CXLPOOL_HOLDER:-$SCRIPT_DIR/../../build/test/helpers/cxlpool_holder}

for bin in "$CXL" "$HOLDER"; do
    if [ ! -x "$bin" ]; then
        echo "test_cxlpool.sh: $bin not found or not executable (build first)" >&2
        exit 99
    fi
done
if ! command -v jq >/dev/null 2>&1; then
    echo "test_cxlpool.sh: jq is required" >&2
    exit 99
fi

SCR=$(mktemp -d "${TMPDIR:-/tmp}/cxlpool-clitest.XXXXXX") || exit 99
POOLPFX=/dev/shm/cxlpool-clitest-$$
DEFPOOL=/dev/shm/ucx-cxl-$(id -u).pool
DEFPOOL_OURS=0
HOLDERS=()

cleanup() {
    local pid
    for pid in "${HOLDERS[@]}"; do
        kill -9 "$pid" 2>/dev/null
    done
    for pid in "${HOLDERS[@]}"; do
        wait "$pid" 2>/dev/null
    done
    rm -f "$POOLPFX"-*
    if [ "$DEFPOOL_OURS" = 1 ]; then
        rm -f "$DEFPOOL"
    fi
    rm -rf "$SCR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PASS=0
FAIL=0
OUT=$SCR/stdout
ERR=$SCR/stderr
RC=0
CMDLINE=

pool() { echo "$POOLPFX-$1.pool"; }

show_last() {
    echo "    command: $CMDLINE"
    echo "    exit:    $RC"
    echo "    --- stdout ---"
    sed 's/^/    | /' "$OUT"
    echo "    --- stderr ---"
    sed 's/^/    | /' "$ERR"
}

pass() { PASS=$((PASS + 1)); }

failed() {
    FAIL=$((FAIL + 1))
    echo "FAIL: $1"
    [ $# -gt 1 ] && echo "    $2"
    show_last
}

# run CMD...: run a command, capture stdout/stderr/rc (not a test case)
run() {
    CMDLINE="$*"
    "$@" >"$OUT" 2>"$ERR"
    RC=$?
}

# t DESC RC CMD...: run CMD, expect exit RC.  On success stderr must be
# empty; on failure it must be exactly one line starting with "cxlpool: ".
t() {
    local desc=$1 want=$2 lines
    shift 2
    run "$@"
    LAST_DESC=$desc
    if [ "$RC" != "$want" ]; then
        failed "$desc" "expected exit $want, got $RC"
        return 1
    fi
    lines=$(wc -l <"$ERR")
    if [ "$want" = 0 ]; then
        if [ -s "$ERR" ]; then
            failed "$desc" "expected empty stderr on success"
            return 1
        fi
    elif [ "$lines" != 1 ] || ! head -n1 "$ERR" | grep -q '^cxlpool: '; then
        failed "$desc" "expected exactly one stderr line starting with 'cxlpool: '"
        return 1
    fi
    pass
}

# t_raw DESC RC CMD...: like t, without the stderr shape rule
t_raw() {
    local desc=$1 want=$2
    shift 2
    run "$@"
    LAST_DESC=$desc
    if [ "$RC" != "$want" ]; then
        failed "$desc" "expected exit $want, got $RC"
        return 1
    fi
    pass
}

# grep checks on the last command's output (extended regexps)
out_has()  { if grep -Eq -- "$1" "$OUT"; then pass; else failed "$LAST_DESC: stdout has /$1/"; fi; }
out_lacks() { if grep -Eq -- "$1" "$OUT"; then failed "$LAST_DESC: stdout lacks /$1/"; else pass; fi; }
err_has()  { if grep -Eq -- "$1" "$ERR"; then pass; else failed "$LAST_DESC: stderr has /$1/"; fi; }
err_hasF() { if grep -Fq -- "$1" "$ERR"; then pass; else failed "$LAST_DESC: stderr has '$1'"; fi; }
out_hasF() { if grep -Fq -- "$1" "$OUT"; then pass; else failed "$LAST_DESC: stdout has '$1'"; fi; }
out_empty() { if [ -s "$OUT" ]; then failed "$LAST_DESC: stdout empty"; else pass; fi; }

# jq_ok DESC EXPR: the last stdout is valid JSON and EXPR is true on it
jq_ok() {
    if jq -e "$2" "$OUT" >"$SCR/jq.out" 2>&1; then
        pass
    else
        failed "$1" "jq -e '$2' -> $(head -c 300 "$SCR/jq.out")"
    fi
}

# check DESC CONDITION...: a plain shell condition as a test case
check() {
    local desc=$1
    shift
    if "$@"; then pass; else failed "$desc" "condition failed: $*"; fi
}

unchanged() { cmp -s "$1" "$2"; }
mode_of() { stat -c %a "$1"; }
no_tmp_left() { ! compgen -G "$1.tmp.*" >/dev/null; }
absent() { [ ! -e "$1" ]; }
present() { [ -e "$1" ]; }

# start_holder POOL ARGS...: start a holding cxlpool_holder in the background,
# wait for its "ready PID" line; sets HPID (0 on failure).
HN=0
start_holder() {
    local p=$1 i hout
    shift
    HN=$((HN + 1))
    hout=$SCR/holder.$HN
    "$HOLDER" "$p" -H "$@" >"$hout.out" 2>"$hout.err" &
    HPID=$!
    HOLDERS+=("$HPID")
    for ((i = 0; i < 200; ++i)); do
        if grep -q '^ready ' "$hout.out" 2>/dev/null; then
            break
        fi
        if ! kill -0 "$HPID" 2>/dev/null; then
            break
        fi
        sleep 0.02
    done
    if grep -qx "ready $HPID" "$hout.out" 2>/dev/null; then
        pass
    else
        CMDLINE="$HOLDER $p -H $*"
        RC=?
        cp "$hout.out" "$OUT"
        cp "$hout.err" "$ERR"
        failed "holder on $p becomes ready"
        HPID=0
    fi
}

# kill_holder PID: kill -9 a holder and reap it; forget it so that cleanup
# never signals a pid that may since have been reused
kill_holder() {
    local keep=() pid
    [ "$1" != 0 ] || return 0
    { kill -9 "$1"; wait "$1"; } 2>/dev/null
    for pid in "${HOLDERS[@]}"; do
        [ "$pid" = "$1" ] || keep+=("$pid")
    done
    HOLDERS=("${keep[@]}")
}

NB=(setpriv --reuid=65534 --regid=65534 --clear-groups)

# ======================================================================
# help, version, usage errors
# ======================================================================

t "--help" 0 "$CXL" --help
for c in create list info check destroy; do out_has "^  $c"; done
out_hasF "UCX_CXL_POOL_SIZE"
out_hasF "UCX_CXL_HOST_INDEX"
t "-h" 0 "$CXL" -h
out_has "^usage: cxlpool COMMAND"
t "help (no command)" 0 "$CXL" help
out_has "^usage: cxlpool COMMAND"

declare -A OPTS=(
    [create]="--size --group --numa-node --max-extents --max-attach --coherence --hosts --force"
    [list]="--json"
    [info]="--json"
    [check]="--repair --host-index"
    [destroy]="--force"
)
for c in create list info check destroy; do
    t "help $c" 0 "$CXL" help "$c"
    out_has "^usage: cxlpool $c"
    cp "$OUT" "$SCR/help.$c"
    for o in ${OPTS[$c]}; do out_hasF "$o"; done
    t "$c --help" 0 "$CXL" "$c" --help
    check "$c --help equals help $c" unchanged "$OUT" "$SCR/help.$c"
    t "$c -h" 0 "$CXL" "$c" -h
    check "$c -h equals help $c" unchanged "$OUT" "$SCR/help.$c"
done
t "help bogus" 2 "$CXL" help bogus
err_hasF "unknown command 'bogus'"

t "--version" 0 "$CXL" --version
out_has '^cxlpool \(ucx-cxl\) [^ ]+$'
CONFIG_H=$(dirname "$CXL")/config.h
if [ -f "$CONFIG_H" ]; then
    PKGVER=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$CONFIG_H")
    if [ -n "$PKGVER" ]; then
        run "$CXL" --version
        LAST_DESC="--version"
        out_hasF "cxlpool (ucx-cxl) $PKGVER"
    fi
fi

t_raw "no arguments" 2 "$CXL"
out_empty
err_has "^usage: cxlpool COMMAND"
err_has "^  create"

t "unknown command" 2 "$CXL" frobnicate
err_hasF "unknown command 'frobnicate'"
err_hasF "cxlpool --help"

P=$(pool usage)
t "create: unknown long option" 2 "$CXL" create "$P" --bogus
err_hasF "unknown option '--bogus'"
err_hasF "cxlpool create --help"
t "info: unknown short option" 2 "$CXL" info -x "$P"
err_hasF "unknown option '-x'"
t "info: unknown grouped short options name the option" 2 "$CXL" info -xy "$P"
err_hasF "unknown option '-x"
t "list: unknown option" 2 "$CXL" list --bogus
err_hasF "unknown option '--bogus'"
t "list: --json takes no value" 2 "$CXL" list --json=1
err_hasF "--json=1"
t "check: unknown option" 2 "$CXL" check --fix "$P"
err_hasF "unknown option '--fix'"
t "destroy: unknown option" 2 "$CXL" destroy -f "$P"
err_hasF "unknown option '-f'"
t "create: --size without value" 2 "$CXL" create "$P" --size
err_hasF "option '--size' needs a value"
t "create: -s without value" 2 "$CXL" create "$P" -s
err_hasF "option '-s' needs a value"
t "create: --numa-node without value" 2 "$CXL" create "$P" --size 8M --numa-node
err_hasF "option '--numa-node' needs a value"
t "create: --size abc" 2 "$CXL" create "$P" --size abc
err_hasF "invalid size 'abc'"
t "create: --size 0" 2 "$CXL" create "$P" --size 0
err_hasF "invalid size '0'"
t "create: --size -64M" 2 "$CXL" create "$P" --size -64M
err_hasF "invalid size '-64M'"
t "create: --size 64X" 2 "$CXL" create "$P" --size 64X
t "create: --size overflowing" 2 "$CXL" create "$P" --size 99999999999T
t "create: --size 3M (not a multiple of 2 MiB)" 1 "$CXL" create "$P" --size 3M
err_hasF "not a multiple of 2 MiB"
err_hasF "$P"
check "create --size 3M leaves no pool" absent "$P"
check "create --size 3M leaves no temporary file" no_tmp_left "$P"
t "create: --size 2M too small" 1 "$CXL" create "$P" --size 2M
err_hasF "too small"
check "create --size 2M leaves no pool" absent "$P"
check "create --size 2M leaves no temporary file" no_tmp_left "$P"
t "create: --max-extents abc" 2 "$CXL" create "$P" --size 8M --max-extents abc
err_hasF "invalid value 'abc' for --max-extents"
t "create: --max-attach too large" 2 "$CXL" create "$P" --size 8M --max-attach 70000
err_hasF "invalid value '70000' for --max-attach"
t "create: --numa-node -1" 2 "$CXL" create "$P" --size 8M --numa-node -1
t "create: --numa-node 9999" 2 "$CXL" create "$P" --size 8M --numa-node 9999
err_hasF "invalid value '9999' for --numa-node"
t "create: --coherence bogus" 2 "$CXL" create "$P" --size 8M --coherence bogus
err_hasF "invalid coherence 'bogus'"
t "create: extra argument" 2 "$CXL" create "$P" extra --size 8M
err_hasF "unexpected argument 'extra'"
t "list: extra argument" 2 "$CXL" list extra
err_hasF "unexpected argument 'extra'"
t "info: extra argument" 2 "$CXL" info "$P" extra
err_hasF "unexpected argument 'extra'"
t "check: extra argument" 2 "$CXL" check "$P" extra
err_hasF "unexpected argument 'extra'"
t "destroy: extra argument" 2 "$CXL" destroy "$P" extra
err_hasF "unexpected argument 'extra'"
check "usage errors create nothing" absent "$P"

# ======================================================================
# create
# ======================================================================

P1=$(pool 1)
t "create 64M" 0 "$CXL" create "$P1" --size 64M
out_has "^created emulated pool $P1: 67108864 bytes, uuid [0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"
UUID1=$(sed -n 's/.*uuid \([0-9a-f-]*\)$/\1/p' "$OUT")
check "create: default mode 0600" [ "$(mode_of "$P1")" = 600 ]
check "create: file size 64M" [ "$(stat -c %s "$P1")" = 67108864 ]
check "create leaves no temporary file" no_tmp_left "$P1"
cp "$P1" "$SCR/p1.copy"
t "create refuses an existing pool" 1 "$CXL" create "$P1" --size 64M
err_hasF "never reformatted"
err_hasF "$P1"
check "refused create left the pool unchanged" unchanged "$P1" "$SCR/p1.copy"
t "create --force still refuses an existing pool file" 1 "$CXL" create "$P1" --size 8M --force
err_hasF "never reformatted"
check "refused create --force left the pool unchanged" unchanged "$P1" "$SCR/p1.copy"
rm -f "$SCR/p1.copy"

PG=$(pool group)
t "create --group" 0 bash -c 'umask 077; exec "$@"' _ "$CXL" create "$PG" --size 8M --group
check "create --group: mode 0660 despite umask 077" [ "$(mode_of "$PG")" = 660 ]

PN=$(pool numa)
t "create --numa-node 0" 0 "$CXL" create "$PN" --size 8M --numa-node 0
out_hasF "created emulated pool $PN"
PNX=$(pool numa-missing)
t "create --numa-node of a missing node" 1 "$CXL" create "$PNX" --size 8M --numa-node 4000
err_hasF "NUMA node 4000 does not exist"
check "failed create (missing NUMA node) leaves no pool" absent "$PNX"
rm -f "$PNX"

PO=$(pool opts)
# sw pools get 8 host partitions by default, too many for 4 slots and 16 MiB
t "create --max-extents/--max-attach/--coherence sw/--hosts" 0 "$CXL" create "$PO" --size=16MiB --max-extents 2000 --max-attach 4 --coherence sw --hosts 2
out_hasF ", 2 host partitions"
t "info of a pool made with options" 0 "$CXL" info --json "$PO"
jq_ok "options recorded" '.size == 16777216 and .extents_max == 2000 and .attach_max == 4 and .nr_hosts == 2 and .coherence == "sw"'
t "info of a sw pool says so" 0 "$CXL" info "$PO"
out_has "^coherence +sw$"
# a read-only check read sw pools as hw (no invalidate before a load)
t "check of a sw pool reads it as sw" 0 "$CXL" check "$PO"
out_has "^checking $PO \\(sw coherence\\)$"

PE=$(pool env)
t "create without --size uses UCX_CXL_POOL_SIZE" 0 env UCX_CXL_POOL_SIZE=8M "$CXL" create "$PE"
out_hasF "$PE: 8388608 bytes"

# default path
if [ -e "$DEFPOOL" ]; then
    echo "NOTE: $DEFPOOL already exists; skipping the default-path cases (not touching a user's pool)"
else
    t "create with default path" 0 env UCX_CXL_POOL_SIZE=64M "$CXL" create
    if [ -e "$DEFPOOL" ]; then DEFPOOL_OURS=1; fi
    out_hasF "created emulated pool $DEFPOOL: 67108864 bytes"
    check "default pool created at $DEFPOOL" present "$DEFPOOL"
    t "info with default path" 0 "$CXL" info
    out_has "^pool +$DEFPOOL$"
    out_has "^size +67108864 bytes$"
    t "check with default path" 0 "$CXL" check
    out_hasF "$DEFPOOL: clean"
    t "create with default path refuses the existing pool" 1 env UCX_CXL_POOL_SIZE=64M "$CXL" create
    err_hasF "never reformatted"
    t "destroy with default path" 0 "$CXL" destroy
    out_hasF "destroyed $DEFPOOL"
    check "default pool removed" absent "$DEFPOOL"
    if [ ! -e "$DEFPOOL" ]; then DEFPOOL_OURS=0; fi
    t "info with default path, no pool" 1 "$CXL" info
    err_hasF "$DEFPOOL: no such pool"
fi

# ======================================================================
# list
# ======================================================================

NOTPOOL=$(pool notpool)
printf 'hello, not a pool\n' >"$NOTPOOL"
t "list" 0 "$CXL" list
out_has "^emulated +$P1 +67108864 +uuid $UUID1$"
out_has "^emulated +$PG +8388608 "
out_lacks "$NOTPOOL"
t "list --json" 0 "$CXL" list --json
jq_ok "list --json is an array" 'type == "array"'
jq_ok "list --json has pool 1 with its uuid" \
    "[.[] | select(.path == \"$P1\" and .kind == \"emulated\" and .size == 67108864 and .uuid == \"$UUID1\")] | length == 1"
jq_ok "list --json has the group pool" "any(.[]; .path == \"$PG\")"
jq_ok "list --json omits non-pool files" "all(.[]; .path != \"$NOTPOOL\")"

# ======================================================================
# info
# ======================================================================

t "info" 0 "$CXL" info "$P1"
out_has "^pool +$P1$"
out_has "^backend +emulated$"
out_has "^uuid +$UUID1$"
out_has "^size +67108864 bytes$"
out_has "^layout +1\.1$"
out_has "^hosts +1 host partition\(s\)$"
out_has "^coherence +hw$"
out_has "^attachments +0 of 256$"
out_has "^  \(none\)$"

t "holder with persistent named allocation" 0 "$HOLDER" "$P1" -n 2 -N keepme -p
start_holder "$P1" -n 1 -N live1
HP=$HPID
t "info with a live holder" 0 "$CXL" info "$P1"
out_has "^attachments +1 of 256$"
out_has "^  slot 0 +pid $HP +host .* alive$"
out_has "^  keepme +offset 0x[0-9a-f]+ +length 4096 \(persistent\)$"
out_has "^  live1 +offset 0x[0-9a-f]+ +length 4096$"
t "info --json with a live holder" 0 "$CXL" info --json "$P1"
jq_ok "info --json: uuid/size/path" \
    ".uuid == \"$UUID1\" and .size == 67108864 and .path == \"$P1\" and .backend == \"emulated\" and .layout_version == \"1.1\" and .nr_hosts == 1"
jq_ok "info --json: space" \
    '.used_bytes == 12288 and .extents_used == 3 and .heap_offset + .heap_size == .size and .used_bytes + .free_bytes == .heap_size'
jq_ok "info --json: one live attachment" \
    ".attach_used == 1 and (.attachments | length) == 1 and .attachments[0].pid == $HP and .attachments[0].alive == true and .attachments[0].same_host == true"
jq_ok "info --json: named allocations" \
    '(.named | length) == 2 and any(.named[]; .name == "keepme" and .persistent == true and .length == 4096) and any(.named[]; .name == "live1" and .persistent == false)'
kill_holder "$HP"
t "info after the holder died shows it DEAD" 0 "$CXL" info "$P1"
out_has "^  slot 0 +pid $HP .* DEAD$"
t "info --json after the holder died" 0 "$CXL" info --json "$P1"
jq_ok "info --json: dead attachment" ".attachments[0].pid == $HP and .attachments[0].alive == false"
t "check --repair after holder death" 0 "$CXL" check --repair "$P1"
t "info --json after repair" 0 "$CXL" info --json "$P1"
jq_ok "info --json: only persistent allocations remain" \
    '.used_bytes == 8192 and .attach_used == 0 and (.attachments | length) == 0 and (.named | map(.name)) == ["keepme"]'

PM=$(pool missing)
t "info on a missing pool" 1 "$CXL" info "$PM"
err_hasF "$PM: no such pool"
t "info --json on a missing pool" 1 "$CXL" info --json "$PM"
out_empty
t "check on a missing pool" 1 "$CXL" check "$PM"
err_hasF "$PM: no such pool"
t "info on a non-pool file" 1 "$CXL" info "$NOTPOOL"
err_hasF "$NOTPOOL: not a ucx-cxl pool (bad magic"
t "check on a non-pool file" 1 "$CXL" check "$NOTPOOL"
err_hasF "bad magic"
EMPTY=$(pool empty)
: >"$EMPTY"
t "info on an empty file" 1 "$CXL" info "$EMPTY"
err_hasF "$EMPTY: empty file, not a ucx-cxl pool"
check "empty file left empty" [ ! -s "$EMPTY" ]
t "info on a directory" 1 "$CXL" info /dev/shm
err_hasF "/dev/shm"

# corruption cases: each on a fresh 8M pool
flip_byte() { # FILE OFFSET
    local old
    old=$(od -An -tu1 -j"$2" -N1 "$1" | tr -d ' ')
    printf "\\x$(printf %02x $((old ^ 0x5a)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
set_byte() { # FILE OFFSET HEXBYTE
    printf "\\x$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
corrupt_case() { # NAME PATTERN MUTATION...
    local name=$1 pattern=$2 pc
    shift 2
    pc=$(pool "c-$name")
    t "$name: create" 0 "$CXL" create "$pc" --size 8M || return
    "$@" "$pc"
    cp "$pc" "$SCR/corrupt.copy"
    t "$name: info fails" 1 "$CXL" info "$pc"
    err_hasF "$pattern"
    err_hasF "$pc"
    out_empty
    check "$name: info left the file unchanged" unchanged "$pc" "$SCR/corrupt.copy"
    t "$name: info --json fails" 1 "$CXL" info --json "$pc"
    err_hasF "$pattern"
    out_empty
    t "$name: check fails" 1 "$CXL" check "$pc"
    err_hasF "$pattern"
    check "$name: check left the file unchanged" unchanged "$pc" "$SCR/corrupt.copy"
    t "$name: check --repair fails" 1 "$CXL" check --repair "$pc"
    err_hasF "$pattern"
    check "$name: check --repair left the file unchanged" unchanged "$pc" "$SCR/corrupt.copy"
    t_raw "$name: holder cannot attach" 1 "$HOLDER" "$pc"
    err_hasF "$pattern"
    check "$name: holder left the file unchanged" unchanged "$pc" "$SCR/corrupt.copy"
    rm -f "$SCR/corrupt.copy"
}
m_truncate() { truncate -s 4M "$1"; }
m_truncate_tiny() { truncate -s 100 "$1"; }
m_append() { head -c 4096 /dev/zero >>"$1"; }
m_uuid() { flip_byte "$1" 20; }
m_uuid_first() { flip_byte "$1" 16; }
m_uuid_last() { flip_byte "$1" 31; }
m_version() { set_byte "$1" 8 02; }
m_magic() { flip_byte "$1" 0; }
corrupt_case truncated "truncated" m_truncate
corrupt_case truncated-tiny "truncated" m_truncate_tiny
corrupt_case resized "resized" m_append
corrupt_case uuid-byte "checksum" m_uuid
corrupt_case uuid-byte16 "checksum" m_uuid_first
corrupt_case uuid-byte31 "checksum" m_uuid_last
corrupt_case version "version" m_version
corrupt_case magic "bad magic" m_magic
t "list with damaged pools present" 0 "$CXL" list --json
jq_ok "list --json omits every damaged pool" "all(.[]; .path | startswith(\"$POOLPFX-c-\") | not)"
t "list (text) with damaged pools present" 0 "$CXL" list
out_lacks "$POOLPFX-c-"
rm -f "$POOLPFX"-c-*

# ======================================================================
# permissions (needs root, setpriv and user nobody)
# ======================================================================

if [ "$(id -u)" != 0 ]; then
    echo "NOTE: not root; skipping the permission cases"
elif ! command -v setpriv >/dev/null 2>&1 || ! id nobody >/dev/null 2>&1; then
    echo "NOTE: setpriv or user nobody missing; skipping the permission cases"
elif ! "${NB[@]}" "$CXL" --version >/dev/null 2>&1; then
    echo "NOTE: user nobody cannot run $CXL; skipping the permission cases"
else
    cp "$P1" "$SCR/p1.copy"
    t "nobody: info on a 0600 root pool" 1 "${NB[@]}" "$CXL" info "$P1"
    err_hasF "permission denied"
    err_hasF "$P1"
    t "nobody: check on a 0600 root pool" 1 "${NB[@]}" "$CXL" check --repair "$P1"
    err_hasF "permission denied"
    t "nobody: destroy a 0600 root pool" 1 "${NB[@]}" "$CXL" destroy --force "$P1"
    err_hasF "permission denied"
    t_raw "nobody: holder on a 0600 root pool" 1 "${NB[@]}" "$HOLDER" "$P1"
    err_hasF "permission denied"
    check "nobody left the 0600 pool unchanged" unchanged "$P1" "$SCR/p1.copy"
    rm -f "$SCR/p1.copy"
    t "nobody: list does not show root's 0600 pool" 0 "${NB[@]}" "$CXL" list --json
    jq_ok "nobody: list --json omits $P1" "all(.[]; .path != \"$P1\")"

    chgrp nogroup "$PG"
    t "nobody: info on a --group pool of group nogroup" 0 "${NB[@]}" "$CXL" info --json "$PG"
    jq_ok "nobody: group pool readable" ".path == \"$PG\" and .size == 8388608"
    t "nobody: holder allocates in the group pool" 0 "${NB[@]}" "$HOLDER" "$PG" -n 1 -N bynobody -p
    out_has "^extent [0-9]+ 4096$"
    t "nobody: check on the group pool" 0 "${NB[@]}" "$CXL" check "$PG"
    out_hasF "$PG: clean"
    t "root sees nobody's named allocation" 0 "$CXL" info --json "$PG"
    jq_ok "group pool has 'bynobody'" 'any(.named[]; .name == "bynobody" and .persistent == true)'
    chgrp root "$PG"
    t "nobody: --group pool of another group" 1 "${NB[@]}" "$CXL" info "$PG"
    err_hasF "permission denied"
fi

# ======================================================================
# check
# ======================================================================

PC=$(pool check)
t "check: create" 0 "$CXL" create "$PC" --size 16M
t "check on a clean pool" 0 "$CXL" check "$PC"
out_has "^checking $PC \\(hw coherence\\)$"
out_hasF "$PC: clean"
out_hasF "0 bad record(s), 0 overlap(s), 0 out of bounds, 0 dead attachment(s), 0 extent(s) (0 bytes)"
t "check --repair on a clean pool" 0 "$CXL" check --repair "$PC"
out_hasF "$PC: clean"
out_lacks "repaired"

start_holder "$PC" -n 3
HD=$HPID
t "check with a live holder is clean" 0 "$CXL" check "$PC"
out_hasF "$PC: clean"
kill_holder "$HD"
t "check after kill -9 of a holder" 1 "$CXL" check "$PC"
out_has "attachment 0: pid $HD on .* is dead \(process gone\)"
out_has "held by dead owner"
check "check lists 3 dead-owner extents" [ "$(grep -c 'held by dead owner slot' "$OUT")" = 3 ]
out_hasF "1 dead attachment(s), 3 extent(s) (12288 bytes) held by dead owners"
err_hasF "$PC: 3 extent(s) held by dead owners"
err_hasF "cxlpool check --repair $PC"
cp "$PC" "$SCR/pc.copy"
t "check without --repair does not modify the pool" 1 "$CXL" check "$PC"
t "info does not reclaim" 0 "$CXL" info --json "$PC"
jq_ok "dead owner still holds 3 extents" '.extents_used == 3 and .attach_used == 1'
t "check --repair reclaims" 0 "$CXL" check --repair "$PC"
out_hasF "repaired: reclaimed 3 extent(s) and 1 attachment(s) of dead owners"
out_hasF "$PC: clean"
t "second check is clean" 0 "$CXL" check "$PC"
out_hasF "$PC: clean"
out_hasF "0 dead attachment(s), 0 extent(s) (0 bytes)"
t "info after repair" 0 "$CXL" info --json "$PC"
jq_ok "everything free after repair" '.used_bytes == 0 and .extents_used == 0 and .attach_used == 0 and .free_ranges == 1'
rm -f "$SCR/pc.copy"

# a live holder's extents are never reclaimed
PL=$(pool live)
t "live: create" 0 "$CXL" create "$PL" --size 16M
t "live: persistent allocation" 0 "$HOLDER" "$PL" -n 1 -N persist -p
start_holder "$PL" -n 2 -N alive
HA=$HPID
start_holder "$PL" -n 3 -N doomed
HB=$HPID
kill_holder "$HB"
t "live+dead: check reports only the dead holder" 1 "$CXL" check "$PL"
out_has "pid $HB .* is dead"
out_lacks "pid $HA "
out_hasF "1 dead attachment(s), 3 extent(s) (12288 bytes) held by dead owners"
t "live+dead: check --repair" 0 "$CXL" check --repair "$PL"
out_hasF "repaired: reclaimed 3 extent(s) and 1 attachment(s) of dead owners"
t "live+dead: info --json after repair" 0 "$CXL" info --json "$PL"
jq_ok "live attachment kept" \
    "(.attachments | length) == 1 and .attachments[0].pid == $HA and .attachments[0].alive == true and .attach_used == 1"
jq_ok "live extents kept" \
    '.used_bytes == 12288 and .extents_used == 3 and (.named | map(.name) | sort) == ["alive", "persist"]'
t "live: second check clean" 0 "$CXL" check "$PL"
kill_holder "$HA"
t "live: check after the live one died" 1 "$CXL" check "$PL"
out_hasF "2 extent(s) (8192 bytes) held by dead owners"
t "live: check --repair after all died" 0 "$CXL" check --repair "$PL"
out_hasF "repaired: reclaimed 2 extent(s) and 1 attachment(s) of dead owners"
t "live: info --json at the end" 0 "$CXL" info --json "$PL"
jq_ok "only the persistent allocation remains" \
    '.used_bytes == 4096 and .extents_used == 1 and .attach_used == 0 and (.attachments | length) == 0 and (.named | map(.name)) == ["persist"]'
t "live: final check clean" 0 "$CXL" check "$PL"

# ======================================================================
# host partitions (software-coherent multi-host pools)
# ======================================================================

PH=$(pool hosts)
t "hosts: --hosts 0 is a usage error" 2 "$CXL" create "$PH" --size 32M --hosts 0
err_hasF "invalid value '0' for --hosts (1..64)"
t "hosts: --hosts 65 is a usage error" 2 "$CXL" create "$PH" --size 32M --hosts 65
err_hasF "invalid value '65' for --hosts (1..64)"
t "hosts: --hosts x is a usage error" 2 "$CXL" create "$PH" --size 32M --hosts x
t "hosts: too small for 8 arenas" 1 "$CXL" create "$PH" --size 16M --hosts 8
err_hasF "too small for 8 host partitions"
check "hosts: refused create leaves no pool" absent "$PH"
check "hosts: refused create leaves no temporary file" no_tmp_left "$PH"
t "hosts: --hosts 3 on a hw pool needs more slots than 2" 1 "$CXL" create "$PH" --size 32M --hosts 3 --max-attach 2
check "hosts: refused create (slots) leaves no pool" absent "$PH"

PD=$(pool swdefault)
t "hosts: sw pool without --hosts" 0 "$CXL" create "$PD" --size 64M --coherence sw
out_hasF ", 8 host partitions"
t "hosts: info --json of the default sw pool" 0 "$CXL" info --json "$PD"
jq_ok "hosts: sw default is 8 partitions" '.nr_hosts == 8 and .layout_version == "1.1"'
t "hosts: info through the emulator" 0 "$CXL" info "emulate-nc:$PD"
out_has "^backend +emulate-nc$"
t "hosts: info --json through the emulator" 0 "$CXL" info --json "emulate-nc:$PD"
jq_ok "hosts: the emulator is its own backend" '.backend == "emulate-nc"'

t "hosts: create --hosts 4" 0 "$CXL" create "$PH" --size 64M --coherence sw --hosts 4
out_has "^created emulated pool $PH: 67108864 bytes, uuid [0-9a-f-]+, 4 host partitions$"
t "hosts: info" 0 "$CXL" info "$PH"
out_has "^layout +1\.1$"
out_has "^hosts +4 host partition\(s\)$"
t "hosts: info --json" 0 "$CXL" info --json "$PH"
jq_ok "hosts: nr_hosts 4, free space in 4 arenas" \
    '.nr_hosts == 4 and .free_ranges == 4 and .free_bytes == .heap_size'

t_raw "hosts: a writer without a host index is refused" 1 "$HOLDER" "$PH" -n 1
err_hasF "set UCX_CXL_HOST_INDEX"
t_raw "hosts: a bad UCX_CXL_HOST_INDEX is refused" 1 env UCX_CXL_HOST_INDEX=one "$HOLDER" "$PH" -n 1
err_hasF "UCX_CXL_HOST_INDEX='one'"
t_raw "hosts: an out-of-range UCX_CXL_HOST_INDEX is refused" 1 env UCX_CXL_HOST_INDEX=4 "$HOLDER" "$PH" -n 1
err_hasF "out of range"
t "hosts: persistent allocation by host 0" 0 env UCX_CXL_HOST_INDEX=0 "$HOLDER" "$PH" -n 1 -N keep0 -p
UCX_CXL_HOST_INDEX=1 start_holder "$PH" -n 2 -N on1
H1=$HPID
UCX_CXL_HOST_INDEX=2 start_holder "$PH" -n 1 -N on2
H2=$HPID
t "hosts: info --json with holders on hosts 1 and 2" 0 "$CXL" info --json "$PH"
jq_ok "hosts: attachments sit in their hosts' partitions" \
    "[.attachments[] | select(.pid == $H1)][0].host_partition == 1 and [.attachments[] | select(.pid == $H2)][0].host_partition == 2"
jq_ok "hosts: slots of partitions 1 and 2 (64 slots each)" \
    "[.attachments[] | select(.pid == $H1)][0].slot == 64 and [.attachments[] | select(.pid == $H2)][0].slot == 128"
jq_ok "hosts: names of all partitions listed" '(.named | map(.name) | sort) == ["keep0", "on1", "on2"]'
kill_holder "$H1"
cp "$PH" "$SCR/ph.copy"
t "hosts: check reports the dead owner of partition 1" 1 "$CXL" check "$PH"
out_has "attachment 64 \(host partition 1\): pid $H1 on .* is dead \(process gone\)"
check "hosts: 2 dead-owner extents of partition 1" [ "$(grep -c 'extent [0-9]* (host partition 1): .* held by dead owner' "$OUT")" = 2 ]
out_hasF "1 dead attachment(s), 2 extent(s) (8192 bytes) held by dead owners"
t "hosts: check --repair without a host index" 1 "$CXL" check --repair "$PH"
err_hasF "set UCX_CXL_HOST_INDEX (or --host-index)"
t "hosts: check --repair --host-index 4 is out of range" 1 "$CXL" check --repair --host-index 4 "$PH"
err_hasF "out of range"
t "hosts: --host-index 64 is a usage error" 2 "$CXL" check --repair --host-index 64 "$PH"
t "hosts: check --repair --host-index 0 leaves partition 1 alone" 1 "$CXL" check --repair --host-index 0 "$PH"
out_lacks "repaired:"
err_hasF "2 extent(s) and 1 attachment(s) of dead owners are in other host partitions"
err_hasF "--host-index K"
check "hosts: repair of partition 0 wrote nothing of partition 1" unchanged "$PH" "$SCR/ph.copy"
t "hosts: check --repair --host-index 1" 0 "$CXL" check --repair --host-index 1 "$PH"
out_hasF "repaired: reclaimed 2 extent(s) and 1 attachment(s) of dead owners in this host's partition"
out_hasF "$PH: clean"
t "hosts: info --json after repair of partition 1" 0 "$CXL" info --json "$PH"
jq_ok "hosts: host 2's holder and host 0's persistent extent kept" \
    "(.attachments | length) == 1 and .attachments[0].pid == $H2 and (.named | map(.name) | sort) == [\"keep0\", \"on2\"]"
kill_holder "$H2"
t "hosts: UCX_CXL_HOST_INDEX selects the partition for --repair" 0 env UCX_CXL_HOST_INDEX=2 "$CXL" check --repair "$PH"
out_hasF "repaired: reclaimed 1 extent(s) and 1 attachment(s) of dead owners in this host's partition"
t "hosts: clean at the end" 0 "$CXL" check "$PH"
rm -f "$SCR/ph.copy"
t "hosts: destroy" 0 "$CXL" destroy "$PH"
t "hosts: destroy the default sw pool" 0 "$CXL" destroy "$PD"

# ======================================================================
# destroy
# ======================================================================

PD=$(pool destroy)
t "destroy: create" 0 "$CXL" create "$PD" --size 8M
start_holder "$PD" -n 1
HX=$HPID
t "destroy refuses with a live holder" 1 "$CXL" destroy "$PD"
err_hasF "$PD: 1 process(es) still attached"
err_hasF "--force"
check "refused destroy keeps the pool" present "$PD"
t "pool still usable after refused destroy" 0 "$CXL" check "$PD"
t "destroy --force with a live holder" 0 "$CXL" destroy --force "$PD"
out_hasF "destroyed $PD"
check "destroy --force removed the pool" absent "$PD"
kill_holder "$HX"

PD2=$(pool destroy2)
t "destroy: create (dead holder)" 0 "$CXL" create "$PD2" --size 8M
start_holder "$PD2" -n 2
kill_holder "$HPID"
t "destroy with only a dead holder" 0 "$CXL" destroy "$PD2"
out_hasF "destroyed $PD2"
check "destroy removed the pool" absent "$PD2"

t "destroy an idle pool" 0 "$CXL" destroy "$PE"
check "idle pool removed" absent "$PE"
t "destroy a missing pool" 1 "$CXL" destroy "$PM"
err_hasF "$PM: no such pool"
t "destroy the pool just destroyed" 1 "$CXL" destroy "$PE"
err_hasF "no such pool"
cp "$NOTPOOL" "$SCR/notpool.copy"
t "destroy refuses a non-pool file" 1 "$CXL" destroy "$NOTPOOL"
err_hasF "bad magic"
check "non-pool file still exists" present "$NOTPOOL"
check "non-pool file unchanged" unchanged "$NOTPOOL" "$SCR/notpool.copy"
t "destroy --force refuses a non-pool file" 1 "$CXL" destroy --force "$NOTPOOL"
err_hasF "bad magic"
check "non-pool file still exists after --force" present "$NOTPOOL"
t "destroy refuses an empty file" 1 "$CXL" destroy "$EMPTY"
check "empty file still exists" present "$EMPTY"
t "destroy refuses a directory" 1 "$CXL" destroy "$SCR"
check "directory still exists" present "$SCR"
for p in "$P1" "$PG" "$PN" "$PO" "$PC" "$PL"; do
    t "destroy $(basename "$p")" 0 "$CXL" destroy "$p"
    check "$(basename "$p") removed" absent "$p"
done
t "list no longer shows destroyed pools" 0 "$CXL" list --json
jq_ok "list --json has none of this test's pools" "all(.[]; .path | startswith(\"$POOLPFX-\") | not)"

echo "cli: $PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
