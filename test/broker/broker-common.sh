# broker-common.sh - sourced by test/broker/run-broker-*.sh: the programs,
# pools, brokers on private ports, readers, JSON fields, cleanup.
#
# brk_init NAME: finds the programs (CXL_BUILDDIR, default TOP/build-release;
#   CXLPOOL_BIN, CXL_UCT_MODULE, CXL_BROKER_BIN, BRK_READER), makes the
#   scratch directory SCR, sets the summary label NAME and the EXIT trap
#   (kills every broker and reader started here, removes pools and SCR).
#   Exits 99 when a program is missing.
# new_pool NAME [SIZE]: prints the path of a fresh pool (default 1g: every
#   process of the transport takes an interface's share of the pool).
# brk_start POOL [SERVE_OPTIONS...]: a broker on POOL on a free private
#   port of 127.0.0.1 (BRK_HOST to listen elsewhere); waits for its ready
#   line.  Sets BRK_PID, BRK_ADDR, BRK_LOG (stdout+stderr), BRK_POOL and
#   BENV (the clients' environment: module, pool, CXL_BROKER).  Returns 1
#   (after a fail line) when it does not get ready.  BRK_ENV=(VAR=VALUE...):
#   more environment for the broker; BRK_WRAP=(CMD ARGS...): a command
#   that execs it (its pid stays the broker's).
# brk_stop [SIGNAL]: stops the broker (default TERM) and waits for it
#   (bounded); KILL: kill -9.  Sets BRK_RC.
# cli ARGS...: cxl-broker ARGS with BENV under a watchdog.
# rdr ARGS...: brk_reader ARGS with BENV under a watchdog.
# rdr_bg OUT ARGS...: the same in the background (no timeout wrapper, so
#   its pid is the reader's: RPID, also appended to BG_PIDS); extra
#   environment in RENV=(VAR=VALUE...) for that call.
# kill9 PID [SECS]: kill -9 of a process started here, reaped.
# wait_bounded PID SECS: waits for PID at most SECS (then kills it, -9);
#   sets WRC (its exit status, 124 when it had to be killed).
# rfield FILE KEY: KEY's value (samples, bytes, digest, errors, local) in
#   brk_reader's summary line of FILE.
# jget FILE EXPR: a Python expression on d, the JSON document in FILE
#   (printed as Python does, with JSON's true and false).
# stat_json OUT / ls_json OUT: the broker's stat --json / ls --json in OUT.
# check NAME CMD...: ok NAME if CMD succeeds, else fail NAME (with CHECK_WHY).
# verdict RC NAME: ok NAME if RC is 0, else fail NAME (with CHECK_WHY); for
#   compound conditions: [ ... ] && [ ... ]; verdict $? NAME
# finish: prints the runtime and "NAME: N passed, N failed", exits 0 iff
#   nothing failed.

BRK_SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$BRK_SCRIPT_DIR/../.." && pwd)
WATCHDOG=${BRK_WATCHDOG:-120}
PY=/usr/bin/python3

brk_init() {
    BRK_NAME=$1
    BUILD=${CXL_BUILDDIR:-$TOP/build-release}
    export CXLPOOL_BIN=${CXLPOOL_BIN:-$BUILD/cxlpool}
    export CXL_UCT_MODULE=${CXL_UCT_MODULE:-$BUILD/.libs/libuct_cxl.so}
    . "$TOP/test/helpers/ucx-module.sh"
    cxl_ucx_setup "$BRK_NAME" "$TOP"
    BRK=${CXL_BROKER_BIN:-$BUILD/cxl-broker}
    READER=${BRK_READER:-$BUILD/test/broker/brk_reader}
    for f in "$BRK" "$READER"; do
        if [ ! -x "$f" ]; then
            echo "$BRK_NAME: '$f' not found (make check builds it)" >&2
            exit 99
        fi
    done
    if [ ! -x "$PY" ]; then
        echo "$BRK_NAME: $PY not found (the JSON checks need it)" >&2
        exit 99
    fi
    SCR=$(mktemp -d "${TMPDIR:-/tmp}/$BRK_NAME.XXXXXX") || exit 99
    POOLPFX=/dev/shm/$BRK_NAME-$$
    BRK_PIDS=()
    BG_PIDS=()
    RENV=()
    BENV=()
    BRK_ENV=()
    BRK_WRAP=()
    BRK_PID=
    # a port range of its own per script run, stepped over ports in use
    BRK_NEXT_PORT=$((20000 + ($$ % 1200) * 10))
    BRK_T0=$(date +%s.%N)
    trap brk_cleanup EXIT
    trap 'exit 130' INT TERM
    echo "# $BRK_NAME: broker $BRK"
    echo "# reader $READER, module $MODULE"
}

brk_cleanup() {
    local pid
    for pid in ${BG_PIDS[@]+"${BG_PIDS[@]}"} ${BRK_PIDS[@]+"${BRK_PIDS[@]}"}; do
        kill -TERM "$pid" 2>/dev/null
    done
    for pid in ${BG_PIDS[@]+"${BG_PIDS[@]}"} ${BRK_PIDS[@]+"${BRK_PIDS[@]}"}; do
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    rm -f "$POOLPFX"-*
    if [ -n "${BRK_KEEP:-}" ]; then
        echo "# outputs kept in $SCR"
    else
        rm -rf "$SCR"
    fi
}

new_pool() {
    local pool=$POOLPFX-$1.pool
    rm -f "$pool"
    if ! "$CXL" create --size "${2:-1g}" "$pool" >"$SCR/create.out" 2>&1; then
        echo "cxlpool create $pool: $(cat "$SCR/create.out")" >&2
        return 1
    fi
    echo "$pool"
}

brk_free_port() {
    local p=$BRK_NEXT_PORT
    while ss -Htan 2>/dev/null | awk '{print $4}' | grep -q ":$p\$"; do
        p=$((p + 1))
    done
    BRK_NEXT_PORT=$((p + 1))
    echo "$p"
}

brk_start() {
    local pool=$1 try port
    shift
    BRK_POOL=$pool
    for try in 1 2 3 4 5; do
        port=$(brk_free_port)
        BRK_ADDR=${BRK_HOST:-127.0.0.1}:$port
        BRK_LOG=$SCR/broker-$port.log
        env -u CXL_BROKER "LD_PRELOAD=$PRELOAD" "UCX_CXL_POOL=$pool" \
            ${BRK_ENV[@]+"${BRK_ENV[@]}"} ${BRK_WRAP[@]+"${BRK_WRAP[@]}"} \
            "$BRK" serve --pool "$pool" --listen "$BRK_ADDR" "$@" >"$BRK_LOG" 2>&1 &
        BRK_PID=$!
        BRK_PIDS+=("$BRK_PID")
        BRK_T=$(date +%s.%N) BRK_N=0
        for _ in $(seq 1 600); do
            grep -q '^cxl-broker: ready on ' "$BRK_LOG" 2>/dev/null && break
            kill -0 "$BRK_PID" 2>/dev/null || { BRK_N="$BRK_N, then gone"; break; }
            BRK_N=$((BRK_N + 1))
            sleep 0.05
        done
        if grep -q '^cxl-broker: ready on ' "$BRK_LOG"; then
            BENV=("LD_PRELOAD=$PRELOAD" "UCX_CXL_POOL=$pool" "CXL_BROKER=$BRK_ADDR")
            return 0
        fi
        kill9 "$BRK_PID"
        grep -q 'cannot listen' "$BRK_LOG" || break
    done
    fail "broker start on $pool" "no ready line after $BRK_N polls in $(elapsed "$BRK_T") s (exit status $WRC$(
         [ "$WRC" -gt 128 ] && echo ", signal $((WRC - 128))")): $(tail -n 3 "$BRK_LOG" | tr '\n' ' ')"
    return 1
}

brk_stop() {
    local sig=${1:-TERM}
    BRK_RC=
    [ -n "$BRK_PID" ] || return 0
    kill "-$sig" "$BRK_PID" 2>/dev/null
    wait_bounded "$BRK_PID" 30
    BRK_RC=$WRC
    BRK_PID=
} 2>/dev/null   # no "Killed" line of the job

# kill9 PID [SECS]: kill -9 PID and reap it (WRC), without bash's "Killed" line
kill9() {
    kill -KILL "$1" 2>/dev/null
    wait_bounded "$1" "${2:-10}"
} 2>/dev/null

wait_bounded() {
    local pid=$1 secs=$2 i
    for i in $(seq 1 $((secs * 20))); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        WRC=124
        return
    fi
    wait "$pid" 2>/dev/null
    WRC=$?
} 2>/dev/null   # not even bash's "Killed" line of a job killed here

cli() {
    env "${BENV[@]}" timeout -k 5 "$WATCHDOG" "$BRK" "$@"
}

rdr() {
    env "${BENV[@]}" ${RENV[@]+"${RENV[@]}"} timeout -k 5 "$WATCHDOG" "$READER" "$@"
}

rdr_bg() {
    local out=$1
    shift
    env "${BENV[@]}" ${RENV[@]+"${RENV[@]}"} "$READER" "$@" >"$out" 2>&1 &
    RPID=$!
    BG_PIDS+=("$RPID")
}

rfield() {
    awk -v k="$2" '/^brk_reader: samples / { for (i = 2; i < NF; i++) if ($i == k) v = $(i + 1) }
                   END { print v }' "$1"
}

# rsummary FILE: the reader's summary line, or what it printed instead
rsummary() {
    local l
    l=$(grep '^brk_reader: samples ' "$1" | tail -n 1)
    [ -n "$l" ] && echo "$l" || tail -n 2 "$1" | tr '\n' ' '
}

jget() {
    "$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
v = eval(sys.argv[2])
print(v if isinstance(v, str) else
      str(v).replace("True", "true").replace("False", "false"))' "$1" "$2"
}

stat_json() { cli stat --json >"$1" 2>"$1.err"; }
ls_json()   { cli ls --json >"$1" 2>"$1.err"; }

# elapsed T0: seconds since T0 (date +%s.%N), one decimal
elapsed() {
    awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'
}

CHECK_WHY=
check() {
    local name=$1
    shift
    if "$@"; then
        ok "$name"
    else
        fail "$name" "${CHECK_WHY:-$*}"
    fi
    CHECK_WHY=
}

verdict() {
    if [ "$1" = 0 ]; then
        ok "$2"
    else
        fail "$2" "${CHECK_WHY:-condition false}"
    fi
    CHECK_WHY=
}

finish() {
    echo "# $BRK_NAME: runtime $(elapsed "$BRK_T0") s"
    echo "$BRK_NAME: $PASS passed, $FAIL failed"
    [ "$FAIL" = 0 ]
    exit
}

# ---- datasets ----
# gen_files DIR N SIZE TAG: brk_reader's pattern files (s000000.bin, ...)
gen_files() { mkdir -p "$(dirname "$1")" && "$READER" --gen "$@"; }

# gen_npy DIR PREFIX NFILES ROWS ROWSHAPE DESCR SEED: .npy files
#   DIR/PREFIXnnn.npy written by a
#   stdlib writer (format 1.0, numpy's 64-byte aligned header), random rows;
#   ROWSHAPE like "32,8" (a row of 32 x 8 items of DESCR, e.g. <f4 or |u1)
gen_npy() {
    "$PY" - "$@" <<'PYEOF'
import os, random, struct, sys
d, pfx, nfiles, rows, rshape, descr, seed = sys.argv[1:8]
dims = [int(x) for x in rshape.split(",") if x]
item = int(descr[2:])
rowbytes = item
for x in dims:
    rowbytes *= x
rnd = random.Random(int(seed))
os.makedirs(d, exist_ok=True)
for f in range(int(nfiles)):
    shape = (int(rows),) + tuple(dims)
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, ", ".join(str(x) for x in shape) + ("," if len(shape) == 1 else ""))
    pad = 64 - (10 + len(hdr) + 1) % 64
    hdr = hdr + " " * (pad % 64) + "\n"
    with open(os.path.join(d, "%s%03d.npy" % (pfx, f)), "wb") as o:
        o.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        o.write(rnd.randbytes(int(rows) * rowbytes))
PYEOF
}

# gen_tar OUT_PREFIX NSHARDS NSAMPLES SEED: WebDataset shards OUT_PREFIX-K.tar
#   made by GNU tar from key.jpg / key.cls / key.json member files
gen_tar() {
    local pfx=$1 nshards=$2 n=$3 seed=$4 k dir
    for k in $(seq 0 $((nshards - 1))); do
        dir=$pfx-$k.d
        "$PY" - "$dir" "$n" "$((seed + k))" <<'PYEOF' || return 1
import os, random, sys
d, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(seed)
os.makedirs(d, exist_ok=True)
for i in range(n):
    key = "%s%06d" % (os.path.basename(d)[:6].replace(".", "_"), i)
    open(os.path.join(d, key + ".jpg"), "wb").write(rnd.randbytes(rnd.randint(2000, 40000)))
    open(os.path.join(d, key + ".cls"), "w").write("%d\n" % rnd.randint(0, 999))
    if i % 3 == 0:
        open(os.path.join(d, key + ".json"), "w").write('{"i": %d}\n' % i)
PYEOF
        (cd "$dir" && ls | LC_ALL=C sort | tar -cf "$pfx-$k.tar" -T -) || return 1
        rm -rf "$dir"
    done
}

# tar_bytes TAR...: the bytes of the shards' samples (each member's header
#   blocks and padded data, up to the end of the last member), by Python's
#   tarfile, to check the broker's count against
tar_bytes() {
    "$PY" -c 'import sys, tarfile
t = 0
for p in sys.argv[1:]:
    m = tarfile.open(p).getmembers()[-1]
    t += m.offset_data + (m.size + 511) // 512 * 512
print(t)' "$@"
}

# gen_raw FILE SIZE SEED: SIZE random bytes
gen_raw() {
    "$PY" -c 'import random, sys
open(sys.argv[1], "wb").write(random.Random(int(sys.argv[3])).randbytes(int(sys.argv[2])))' "$@"
}

# arena_states POOL NAME: "absent loading resident evicting other" counts of the
# chunk states of the active version of dataset NAME, read from the pool
# file (the arena is the pool's named extent "cxl-broker"; layout as in
# src/ucp_ext/broker/brk_layout.h); "none" if not found
arena_states() {
    local off
    off=$("$CXL" info "$1" --json 2>/dev/null | "$PY" -c 'import json, sys
print([x["offset"] for x in json.load(sys.stdin)["named"] if x["name"] == "cxl-broker"][0])' 2>/dev/null)
    "$PY" - "$1" "${off:-x}" "$2" <<'PYEOF'
import struct, sys
pool, off, name = sys.argv[1], sys.argv[2], sys.argv[3]
if not off.isdigit():
    print("none"); sys.exit()
off = int(off)
with open(pool, "rb") as f:
    def rd(o, n):
        f.seek(off + o)
        return f.read(n)
    if rd(0, 8) != b"UCLXBRK1":
        print("none"); sys.exit()
    hdr_size = struct.unpack("<I", rd(12, 4))[0]
    for i in range(256):
        v = rd(hdr_size + 256 * i, 256)
        state = struct.unpack_from("<I", v, 48)[0]
        if v[:48].split(b"\0")[0].decode() != name or state != 2:
            continue
        nchunks = struct.unpack_from("<Q", v, 80)[0]
        states_off = struct.unpack_from("<Q", v, 136)[0]
        raw = rd(states_off, 32 * nchunks)
        n = [0, 0, 0, 0, 0]
        for c in range(nchunks):
            n[min(struct.unpack_from("<Q", raw, 32 * c)[0] & 0xff, 4)] += 1
        print(*n); sys.exit()
print("none")
PYEOF
}
