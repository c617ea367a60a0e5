#!/usr/bin/env bash
#
# run-broker-kill.sh - kill -9 of a reader, of the broker, and readers of
# a dead broker (issue 13).
#   a. a reader killed while it holds pins: reader A holds zero-copy views
#      of every sample of dataset A (--hold, CXL_BROKER_PIN_CACHE=64), which
#      fills 14 MiB of a 16 MiB cache (policy lru: only A's pins keep it);
#      reader B of dataset B (one chunk of 4 MiB) fails with the no-space
#      error naming the cache's limit while A lives; after kill -9 of A, B
#      reads (--check) within 45 s (the pool lease is 30 s; the broker also
#      drops a client whose endpoint fails): the time is printed, and A's
#      pins are gone (stat pinned_chunks 0)
#   b. the broker killed during a fill: the broker runs under strace, which
#      delays each of its pread64 calls by 100 ms (strace -e inject), so
#      'cxl-broker warm' of 64 chunks of 1 MiB takes seconds; kill -9 once
#      8 chunks are resident.  The pool's index (read here from the pool
#      file) then has chunks LOADING (the kill hit fills in flight); the
#      warm client ends with the connection-lost error.  Restart: the
#      broker keeps the resident chunks (its log and ls), no chunk is
#      LOADING any more, a full --check read passes and reads from files
#      exactly the chunks that were not resident (each once); serve
#      --verify then finds every chunk's CRC right and reads nothing.
#      (Without strace the part is reported as not run.)
#   c. readers of a dead broker: a local and a remote (--local 0) reader
#      running --loop when the broker is killed -9 end with the
#      connection-lost error and exit 1 within 15 s (times printed); a
#      reader started with no broker fails within 15 s with "no broker at"
#      and exit 1.
#
# Environment: CXL_BUILDDIR (default TOP/build-release), CXLPOOL_BIN,
# CXL_UCT_MODULE, CXL_BROKER_BIN, BRK_READER; BRK_KEEP=1 keeps the outputs.
# Last line "broker-kill: N passed, N failed"; exit 0 only when nothing
# failed.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/broker-common.sh"
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
brk_init broker-kill
MIB=1048576

# ---- a. kill -9 of a reader holding pins ----
echo "# ---- a. kill -9 of a reader holding pins ----"
gen_files "$SCR/a" 14 $MIB 1
gen_files "$SCR/b" 2 $((4 * MIB)) 2
POOL=$(new_pool a 512m) || exit 99
if brk_start "$POOL" --capacity 16m; then
    cli add --chunk-size 1m --policy lru dsa "$SCR/a" >"$SCR/add-a.out" 2>&1 &&
        cli add --chunk-size 4m --policy lru dsb "$SCR/b" >"$SCR/add-b.out" 2>&1
    CHECK_WHY="$(cat "$SCR"/add-*.out)"
    verdict $? "a. datasets A (14 x 1 MiB) and B (2 x 4 MiB) added behind a 16 MiB cache"
    RENV=(CXL_BROKER_PIN_CACHE=64)
    rdr_bg "$SCR/a.out" --hold 60 dsa
    A=$RPID
    RENV=()
    for _ in $(seq 1 300); do
        grep -q '^brk_reader: holding' "$SCR/a.out" && break
        kill -0 "$A" 2>/dev/null || break
        sleep 0.1
    done
    CHECK_WHY="$(cat "$SCR/a.out")"
    check "a. reader A holds views of all 14 samples" grep -q '^brk_reader: holding 14 views' "$SCR/a.out"
    stat_json "$SCR/st-a.json"
    got=$(jget "$SCR/st-a.json" 'd["pinned_chunks"]')
    check "a. stat: 14 chunks pinned" [ "$got" = 14 ]
    rdr --expect-error dsb >"$SCR/b1.out" 2>&1
    WRC=$?
    echo "#   B while A lives: exit $WRC: $(head -n 1 "$SCR/b1.out")"
    CHECK_WHY="exit $WRC: $(tr '\n' ' ' <"$SCR/b1.out")"
    [ $WRC = 0 ] && grep -q 'no room for chunk 0 (4096 KiB): the cache of 16 MiB is full of chunks pinned by readers' "$SCR/b1.out"
    verdict $? "a. reader B fails with the no-space error naming the cache's 16 MiB while A lives"
    t0=$(date +%s.%N)
    kill9 "$A"
    took=
    for _ in $(seq 1 450); do
        if rdr --check dsb >"$SCR/b2.out" 2>&1; then
            took=$(elapsed "$t0")
            break
        fi
        sleep 0.1
    done
    echo "#   B after kill -9 of A: $(rsummary "$SCR/b2.out")"
    grep 'gone' "$BRK_LOG" | tail -n 3 | sed 's/^/#   /'
    CHECK_WHY="B still fails after 45 s: $(tr '\n' ' ' <"$SCR/b2.out")"
    check "a. after kill -9 of A, B reads (--check) within 45 s: after ${took:-never} s" [ -n "$took" ]
    stat_json "$SCR/st-a2.json"
    got=$(jget "$SCR/st-a2.json" 'd["pinned_chunks"]')
    check "a. A's pins are gone (stat: $got chunks pinned)" [ "$got" = 0 ]
    brk_stop TERM
fi

# ---- b. kill -9 of the broker during a fill ----
echo "# ---- b. kill -9 of the broker during a fill ----"
NB=64
if ! command -v strace >/dev/null 2>&1; then
    echo "# not run: b. (strace is not installed: it slows the broker's reads down)"
else
    gen_files "$SCR/c" $NB $MIB 3
    POOL=$(new_pool b 512m) || exit 99
    # the broker under strace: every pread64 of a fill takes 100 ms more
    SLOW=$SCR/slow-broker
    # (no exec: strace kills itself with its child's SIGKILL, sh exits)
    printf '#!/bin/sh\nstrace -f -qq -o /dev/null -e trace=pread64 -e inject=pread64:delay_exit=100000 %s "$@"\n' \
        "$BRK" >"$SLOW"
    chmod +x "$SLOW"
    REAL_BRK=$BRK
    BRK=$SLOW
    brk_start "$POOL" --capacity 100m --readers 2
    started=$?
    BRK=$REAL_BRK
    if [ $started = 0 ]; then
        cli add --chunk-size 1m dsc "$SCR/c" >"$SCR/add-c.out" 2>&1
        check "b. dataset C (64 x 1 MiB) added" [ $? = 0 ]
        SPID=$(ps -o pid= --ppid "$BRK_PID" | tr -d ' ')
        BPID=$(ps -o pid= --ppid "${SPID:-1}" | tr -d ' ')
        ps -o pid=,comm= -p "$BPID" | grep -q cxl-broker
        CHECK_WHY="the broker's pid under strace: ${BPID:-none}"
        verdict $? "b. the broker runs under strace (pid ${BPID:-none})"
        cli warm dsc >"$SCR/warm.out" 2>&1 &
        W=$!
        BG_PIDS+=("$W")
        st=none
        for _ in $(seq 1 300); do
            st=$(arena_states "$POOL" dsc)
            set -- $st
            [ "$st" != none ] && [ "$3" -ge 8 ] && break
            sleep 0.05
        done
        t0=$(date +%s.%N)
        kill -KILL "$BPID"
        sleep 0.2
        st=$(arena_states "$POOL" dsc)
        echo "#   at the kill: absent loading resident evicting other = $st"
        set -- $st
        CHECK_WHY="chunk states $st"
        [ "$st" != none ] && [ "$2" -gt 0 ] && [ "$3" -ge 8 ] && [ "$3" -lt $NB ] && [ "$4" = 0 ] && [ "$5" = 0 ]
        verdict $? "b. killed during the fill: $2 chunks LOADING, $3 resident in the pool's index"
        R=${3:-0}
        wait_bounded "$W" 30
        echo "#   warm: exit $WRC after $(elapsed "$t0") s: $(tail -n 1 "$SCR/warm.out")"
        CHECK_WHY="exit $WRC: $(tail -n 2 "$SCR/warm.out" | tr '\n' ' ')"
        [ "$WRC" = 1 ] && grep -q 'connection lost' "$SCR/warm.out"
        verdict $? "b. the warm client ends with the connection-lost error, exit 1"
        wait_bounded "$BRK_PID" 10
        BRK_PID=
        if brk_start "$POOL"; then
            grep -E 'resident from before|failed their check|left alone|freed' "$BRK_LOG" | sed 's/^/#   /'
            check "b. restart: the broker keeps the $R resident chunks" \
                grep -q "dsc v1: $R of $NB chunks resident from before the restart" "$BRK_LOG"
            st=$(arena_states "$POOL" dsc)
            CHECK_WHY="chunk states $st"
            check "b. restart: no chunk LOADING any more ($st)" [ "$st" = "$((NB - R)) 0 $R 0 0" ]
            ls_json "$SCR/ls-b.json"
            got=$(jget "$SCR/ls-b.json" "[x['resident_chunks'] for x in d if x['name'] == 'dsc']")
            check "b. restart: ls lists $R chunks resident" [ "$got" = "[$R]" ]
            rdr --check --order random --seed 3 dsc >"$SCR/c1.out" 2>&1
            WRC=$?
            echo "#   read after the restart: exit $WRC: $(rsummary "$SCR/c1.out")"
            CHECK_WHY="exit $WRC: $(tr '\n' ' ' <"$SCR/c1.out")"
            [ $WRC = 0 ] && [ "$(rfield "$SCR/c1.out" errors)" = 0 ] &&
                [ "$(rfield "$SCR/c1.out" samples)" = $NB ]
            verdict $? "b. a full --check read after the restart passes (no chunk half-filled)"
            stat_json "$SCR/st-b.json"
            got=$(jget "$SCR/st-b.json" '(d["fills"], d["file_bytes_read"], d["fill_errors"])')
            CHECK_WHY="(fills, file_bytes_read, fill_errors) = $got"
            check "b. only the $((NB - R)) chunks not resident were read, each once" \
                [ "$got" = "($((NB - R)), $(((NB - R) * MIB)), 0)" ]
            brk_stop TERM
            if brk_start "$POOL" --verify; then
                grep -E 'dsc v1: .*(resident from before|failed their check)' "$BRK_LOG" | sed 's/^/#   /'
                grep -q "dsc v1: $NB of $NB chunks resident from before the restart" "$BRK_LOG" &&
                    ! grep -q 'failed their check' "$BRK_LOG"
                verdict $? "b. serve --verify: all $NB chunks pass their CRC check"
                rdr --check dsc >"$SCR/c2.out" 2>&1
                WRC=$?
                stat_json "$SCR/st-b2.json"
                got=$(jget "$SCR/st-b2.json" '(d["fills"], d["file_bytes_read"])')
                CHECK_WHY="exit $WRC, (fills, file_bytes_read) = $got: $(rsummary "$SCR/c2.out")"
                [ $WRC = 0 ] && [ "$(rfield "$SCR/c2.out" errors)" = 0 ] && [ "$got" = "(0, 0)" ]
                verdict $? "b. serve --verify: a --check read passes and reads nothing from files"
                brk_stop TERM
            fi
        fi
    fi
fi

# ---- c. readers of a dead broker ----
echo "# ---- c. readers of a dead broker ----"
gen_files "$SCR/d" 100 100000 4
POOL=$(new_pool c 512m) || exit 99
if brk_start "$POOL" --capacity 64m; then
    cli add --chunk-size 1m dsd "$SCR/d" >/dev/null 2>&1
    cli warm dsd >/dev/null 2>&1
    rdr_bg "$SCR/l0.out" --loop 60 dsd
    L0=$RPID
    rdr_bg "$SCR/l1.out" --loop 60 --local 0 --order random --batch 8 dsd
    L1=$RPID
    sleep 1
    t0=$(date +%s.%N)
    brk_stop KILL
    for r in "0 $L0 local" "1 $L1 remote"; do
        set -- $r
        wait_bounded "$2" 15
        took=$(elapsed "$t0")
        out=$SCR/l$1.out
        echo "#   $3 reader: exit $WRC after $took s: $(grep -v '^brk_reader: samples' "$out" | head -n 1)"
        CHECK_WHY="exit $WRC: $(tr '\n' ' ' <"$out")"
        [ "$WRC" = 1 ] && grep -q 'connection lost' "$out"
        verdict $? "c. a $3 reader of the killed broker ends with the connection-lost error within 15 s ($took s)"
    done
    t0=$(date +%s.%N)
    rdr dsd >"$SCR/nob.out" 2>&1
    WRC=$?
    took=$(elapsed "$t0")
    echo "#   with no broker: exit $WRC after $took s: $(head -n 1 "$SCR/nob.out")"
    CHECK_WHY="exit $WRC after $took s: $(tr '\n' ' ' <"$SCR/nob.out")"
    [ $WRC = 1 ] && grep -q "no broker at $BRK_ADDR" "$SCR/nob.out" &&
        awk -v t="$took" 'BEGIN { exit !(t < 15) }'
    verdict $? "c. a reader with no broker fails with 'no broker at $BRK_ADDR' within 15 s ($took s)"
fi
finish
