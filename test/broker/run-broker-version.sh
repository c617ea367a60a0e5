#!/usr/bin/env bash
#
# run-broker-version.sh - dataset versions of the broker (issue 13): a swap
# while readers read.
#   1. a directory of brk_reader --gen files of pattern tag 1 is added
#      (version 1) and warmed; adding it again unchanged keeps version 1
#   2. three readers (--pattern --loop: local, zero-copy views, remote
#      --local 0 with batches) open version 1 and read it over and over;
#      meanwhile the files are written again with tag 2 (same names and
#      sizes, new mtimes) and added: version 2, ls shows v1 retiring with
#      its 3 readers and v2 active
#   3. a reader started after reads version 2: --check (the bytes of the
#      new files) and --pattern pass, its digest is not version 1's;
#      opening version 1 by number is refused (retired)
#   4. the old readers end with errors 0 (--pattern: no sample mixes the
#      versions) and version 1's digest; once the last one is gone,
#      version 1 leaves ls (bounded wait), the broker logs it freed, the
#      cache's used bytes drop by at least its size and the resident chunk
#      bytes are version 2's alone
#   5. adding the changed dataset again, unchanged now, keeps version 2
#   6. files that change without an add: version 2 evicted, its files
#      written again with tag 3: a reader of version 2 fails with the
#      broker's "changed since it was added" error and exit status 1, and
#      never gets a byte of the new files (--pattern: nothing mixed)
#
# Environment: CXL_BUILDDIR (default TOP/build-release), CXLPOOL_BIN,
# CXL_UCT_MODULE, CXL_BROKER_BIN, BRK_READER; BRK_KEEP=1 keeps the outputs.
# Last line "broker-version: N passed, N failed"; exit 0 only when nothing
# failed.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/broker-common.sh"
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
brk_init broker-version

POOL=$(new_pool ver) || exit 99
brk_start "$POOL" --capacity 128m || finish
DS=$SCR/ds
N=200 SIZE=50000 BYTES=$((200 * 50000))

# ls_ver FILE VERSION EXPR: EXPR of version VERSION's entry x in ls --json
ls_ver() {
    jget "$1" "[$3 for x in d if x['name'] == 'ds' and x['version'] == $2]"
}

# ---- 1. version 1 ----
gen_files "$DS" $N $SIZE 1
cli add --chunk-size 1m --json ds "$DS" >"$SCR/add1.json" 2>&1
cat "$SCR/add1.json"
got=$(jget "$SCR/add1.json" '(d["version"], d["new"])')
check "1. add: version 1, new" [ "$got" = "(1, true)" ]
cli warm ds >"$SCR/warm.out" 2>&1
WRC=$?
CHECK_WHY="exit $WRC: $(tail -n 2 "$SCR/warm.out" | tr '\n' ' ')"
check "1. warm ds: exit 0 ($(tail -n 1 "$SCR/warm.out"))" [ $WRC = 0 ]
cli add --chunk-size 1m --json ds "$DS" >"$SCR/add1b.json" 2>&1
got=$(jget "$SCR/add1b.json" '(d["version"], d["new"])')
CHECK_WHY="add answered $(cat "$SCR/add1b.json")"
check "1. add of the unchanged dataset keeps version 1" [ "$got" = "(1, false)" ]
rdr --pattern --check ds >"$SCR/v1.out" 2>&1
V1=$(rfield "$SCR/v1.out" digest)
CHECK_WHY="$(rsummary "$SCR/v1.out")"
[ "$(rfield "$SCR/v1.out" errors)" = 0 ] && [ -n "$V1" ]
verdict $? "1. version 1 reads with --check --pattern: digest $V1"

# ---- 2. the swap under three readers ----
OPTS=("--pattern --loop 8" "--pattern --loop 8 --view --order random --seed 3"
      "--pattern --loop 8 --local 0 --order random --seed 5 --batch 8")
pids=()
for i in 0 1 2; do
    # shellcheck disable=SC2086
    rdr_bg "$SCR/old-$i.out" ${OPTS[$i]} ds
    pids+=("$RPID")
done
n=0
for _ in $(seq 1 200); do
    ls_json "$SCR/ls-open.json"
    n=$(ls_ver "$SCR/ls-open.json" 1 "x['readers']")
    [ "$n" = "[3]" ] && break
    sleep 0.05
done
check "2. the three readers opened version 1" [ "$n" = "[3]" ]
m1=$(stat -c %y "$DS/s000000.bin")
gen_files "$DS" $N $SIZE 2
m2=$(stat -c %y "$DS/s000000.bin")
CHECK_WHY="mtime $m1 -> $m2"
check "2. the files are written again with tag 2 (mtime $m2)" [ "$m1" != "$m2" ]
cli add --chunk-size 1m --json ds "$DS" >"$SCR/add2.json" 2>&1
cat "$SCR/add2.json"
got=$(jget "$SCR/add2.json" '(d["version"], d["new"])')
check "2. add of the changed dataset: version 2, new" [ "$got" = "(2, true)" ]
ls_json "$SCR/ls-swap.json"
cli ls | sed 's/^/#   /'
r1=$(ls_ver "$SCR/ls-swap.json" 1 "(x['active'], x['readers'])")
r2=$(ls_ver "$SCR/ls-swap.json" 2 "(x['active'], x['readers'])")
CHECK_WHY="v1 (active, readers) $r1, v2 $r2"
[ "$r1" = "[(false, 3)]" ] && [ "$r2" = "[(true, 0)]" ]
verdict $? "2. ls: version 1 retiring with its 3 readers, version 2 active"

# ---- 3. a new reader gets version 2 ----
rdr --pattern --check --order random --seed 9 ds >"$SCR/v2.out" 2>&1
WRC=$?
V2=$(rfield "$SCR/v2.out" digest)
echo "#   new reader: exit $WRC: $(rsummary "$SCR/v2.out")"
CHECK_WHY="exit $WRC, digest $V2 (v1 $V1): $(grep -v '^brk_reader: samples' "$SCR/v2.out" | head -2 | tr '\n' ' ')"
[ $WRC = 0 ] && [ "$(rfield "$SCR/v2.out" errors)" = 0 ] && [ -n "$V2" ] && [ "$V2" != "$V1" ]
verdict $? "3. a reader started after the swap reads version 2 (--check of the new files, --pattern; digest $V2 != $V1)"
rdr --version 1 ds >"$SCR/open-v1.out" 2>&1
WRC=$?
CHECK_WHY="exit $WRC: $(cat "$SCR/open-v1.out" | tr '\n' ' ')"
[ $WRC != 0 ] && grep -q 'version 1 is retired' "$SCR/open-v1.out"
verdict $? "3. opening version 1 by number is refused: $(head -n 1 "$SCR/open-v1.out")"
stat_json "$SCR/st-before.json"

# ---- 4. the old readers finish on version 1 ----
bad=''
for i in 0 1 2; do
    wait_bounded "${pids[$i]}" 60
    out=$SCR/old-$i.out
    echo "#   old reader $i (${OPTS[$i]}): exit $WRC: $(rsummary "$out")"
    if [ "$WRC" != 0 ] || [ "$(rfield "$out" errors)" != 0 ] ||
       [ "$(rfield "$out" digest)" != "$V1" ]; then
        bad+="reader $i: exit $WRC, $(rsummary "$out") $(grep -v '^brk_reader: samples' "$out" | head -2 | tr '\n' ' '); "
    fi
done
CHECK_WHY=$bad
check "4. the old readers end with errors 0, no sample mixed (--pattern), version 1's digest $V1" [ -z "$bad" ]
t0=$(date +%s.%N)
gone=
for _ in $(seq 1 200); do
    ls_json "$SCR/ls-after.json"
    if [ "$(ls_ver "$SCR/ls-after.json" 1 1)" = "[]" ]; then
        gone=$(elapsed "$t0")
        break
    fi
    sleep 0.05
done
CHECK_WHY="still listed after 10 s: $(ls_ver "$SCR/ls-after.json" 1 x)"
check "4. version 1 leaves ls after its last reader (${gone:-never} s)" [ -n "$gone" ]
check "4. the broker logs version 1 freed" grep -q 'ds v1: freed' "$BRK_LOG"
grep 'ds v1: freed' "$BRK_LOG" | sed 's/^/#   /'
stat_json "$SCR/st-after.json"
u0=$(jget "$SCR/st-before.json" 'd["used"]')
u1=$(jget "$SCR/st-after.json" 'd["used"]')
cb=$(jget "$SCR/st-after.json" 'd["chunk_bytes"]')
rb=$(ls_ver "$SCR/ls-after.json" 2 "x['resident_bytes']")
echo "#   used $u0 -> $u1 bytes; chunk bytes $cb, version 2 resident $rb"
CHECK_WHY="used $u0 -> $u1"
check "4. the cache's used bytes drop by at least version 1's $BYTES" [ $((u0 - u1)) -ge $BYTES ]
CHECK_WHY="chunk_bytes $cb, version 2 resident_bytes $rb"
check "4. the resident chunk bytes are version 2's alone" [ "[$cb]" = "$rb" ]

# ---- 5. unchanged again ----
cli add --chunk-size 1m --json ds "$DS" >"$SCR/add3.json" 2>&1
got=$(jget "$SCR/add3.json" '(d["version"], d["new"])')
CHECK_WHY="add answered $(cat "$SCR/add3.json")"
check "5. add of the unchanged dataset keeps version 2" [ "$got" = "(2, false)" ]

# ---- 6. files changed under a version, no add ----
cli evict ds >"$SCR/evict.out" 2>&1
CHECK_WHY="$(cat "$SCR/evict.out")"
check "6. evict ds: $(cat "$SCR/evict.out")" grep -q '^10 chunks evicted$' "$SCR/evict.out"
gen_files "$DS" $N $SIZE 3
rdr --pattern ds >"$SCR/v2-changed.out" 2>&1
WRC=$?
echo "#   reader of version 2 over changed files: exit $WRC: $(grep -v '^brk_reader: samples' "$SCR/v2-changed.out" | head -n 1)"
CHECK_WHY="exit $WRC: $(tr '\n' ' ' <"$SCR/v2-changed.out")"
[ $WRC = 1 ] && grep -q "s000000.bin changed since it was added" "$SCR/v2-changed.out" &&
    ! grep -q 'mixes versions' "$SCR/v2-changed.out"
verdict $? "6. a reader of version 2 over changed files fails naming the file, nothing mixed"

brk_stop TERM
check "the broker stops on SIGTERM with exit status 0" [ "$BRK_RC" = 0 ]
finish
