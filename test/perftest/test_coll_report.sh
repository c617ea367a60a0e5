#!/usr/bin/env bash
#
# test_coll_report.sh - perftest/coll_report.py on a synthetic run whose
# answers are known: four repetitions, two that began in the VM's fast
# state (round trip 60 ns) and two in its slow state (460 ns), with
# numbers chosen so that each state's targets come out differently from
# the medians over all four.  Checks the "Targets by VM state" table: per
# state the repetitions it used, the targets met, the misses whose target
# lies below the crossing floor (c, c/2 for bcast; c = half the round
# trip), those whose target lies below the state's hand-written reference
# (raw/ref_coll-rN.csv, config hand-written in runs.csv) and the others;
# that summary.md then adds each state's medians; and that a run without
# round trips leaves the table out.  No program is run but the report.  Ends with
# "coll-report: N passed, N failed".
#
#   test/perftest/test_coll_report.sh
set -u
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
pass=0 fail=0
ok()  { echo "ok: $*"; pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_coll_report.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# make_run DIR WITH_RTT: the synthetic run (ob1-vader is the best baseline
# everywhere; tuned-ucx is slower in every cell)
make_run() {
    local d=$1 with_rtt=$2 rep cfg
    mkdir -p "$d/raw"
    printf 'np=2\nreps=4\n' > "$d/meta.env"
    printf 'tuned-ucx|ok|\nob1-vader|ok|\ncxl|ok|\n' > "$d/configs.txt"
    echo "config,rep,collective,bytes,np,iters,warmup,min_us,avg_us,max_us,errors,cxl_calls,cxl_fallbacks" \
        > "$d/samples.csv"
    # row CFG REP COLL BYTES AVG
    row() { echo "$1,$2,$3,$4,2,100,10,$5,$5,$5,0,0,0" >> "$d/samples.csv"; }
    for rep in 1 2 3 4; do
        if [ "$rep" -le 2 ]; then   # fast state: c = 0.030 us
            row ob1-vader $rep barrier 0 0.200
            row cxl       $rep barrier 0 0.050     # 0.25x: met
            row ob1-vader $rep bcast 8 0.200
            row cxl       $rep bcast 8 0.150       # 0.75x: target 0.1 > c/2
            row ob1-vader $rep allgather 8 0.200
            row cxl       $rep allgather 8 0.150   # 0.75x: target 0.1 > c
            row ob1-vader $rep allgather 1048576 100
            row cxl       $rep allgather 1048576 100   # bw 1.00x
        else                        # slow state: c = 0.230 us
            row ob1-vader $rep barrier 0 0.440
            row cxl       $rep barrier 0 0.400     # 0.91x: target 0.22 < c
            row ob1-vader $rep bcast 8 0.250
            row cxl       $rep bcast 8 0.200       # 0.80x: target 0.125, c/2 0.115
            row ob1-vader $rep allgather 8 0.440
            row cxl       $rep allgather 8 0.400   # 0.91x: target 0.22 < c
            row ob1-vader $rep allgather 1048576 100
            row cxl       $rep allgather 1048576 50    # bw 2.00x: met
        fi
        # the hand-written reference (ns): fast: bcast under its target
        # (0.1 us), exchange above it; slow: bcast above it (0.125)
        if [ "$rep" -le 2 ]; then
            printf 'refcoll,barrier,0,40,40,40\nrefcoll,bcast,8,80,20,140\nrefcoll,exchange,8,120,120,120\n'
        else
            printf 'refcoll,barrier,0,300,300,300\nrefcoll,bcast,8,180,20,340\nrefcoll,exchange,8,330,330,330\n'
        fi > "$d/raw/ref_coll-r$rep.csv"
        row tuned-ucx $rep barrier 0 9
        row tuned-ucx $rep bcast 8 9
        row tuned-ucx $rep allgather 8 9
        row tuned-ucx $rep allgather 1048576 900
    done
    echo "config,rep,seconds,rc,cpu_busy_pct,load1,rtt_ns" > "$d/runs.csv"
    for rep in 1 2 3 4; do
        for cfg in tuned-ucx ob1-vader cxl hand-written; do
            if [ "$with_rtt" = 1 ]; then
                echo "$cfg,$rep,1,0,0,0.10,$( [ "$rep" -le 2 ] && echo 60 || echo 460 )" >> "$d/runs.csv"
            else
                echo "$cfg,$rep,1,0,0,0.10," >> "$d/runs.csv"
            fi
        done
    done
}

# the table row of a state, fields split at '|'
state_row() { grep "^| $2 |" "$1/report.md"; }
field() { echo "$1" | awk -F'|' -v n="$2" '{ gsub(/^ +| +$/, "", $n); print $n }'; }

make_run "$tmp/a" 1
if "$PY" "$SRC/perftest/coll_report.py" "$tmp/a" > "$tmp/a.log" 2>&1; then
    ok "coll_report.py ran on the synthetic run"
else
    bad "coll_report.py failed:"; sed 's/^/    /' "$tmp/a.log"
fi
if grep -q "^## Targets by VM state" "$tmp/a/report.md" 2>/dev/null; then
    ok "the report has the by-state section"
else
    bad "no \"Targets by VM state\" section in report.md"
fi

fast=$(state_row "$tmp/a" fast)
slow=$(state_row "$tmp/a" slow)
check() {   # check WHAT GOT WANT
    if [ "$2" = "$3" ]; then ok "$1: $2"; else bad "$1: got '$2', want '$3'"; fi
}
check "fast: repetitions" "$(field "$fast" 3)" "tuned-ucx: 1 2, ob1-vader: 1 2, cxl: 1 2, hand-written: 1 2"
check "fast: round trip" "$(field "$fast" 4)" "median 60 ns (c = 0.030 µs)"
check "fast: met" "$(field "$fast" 5)" "**1 of 4**"
check "fast: below the floor" "$(field "$fast" 6)" "0"
check "fast: below the hand-written reference" "$(field "$fast" 7)" \
    "1: allgather 8 B 0.75× (hand-written 0.60×)"
check "fast: otherwise" "$(field "$fast" 8)" "bcast 8 B 0.75×, allgather 1 MiB bw 1.00×"
check "slow: repetitions" "$(field "$slow" 3)" "tuned-ucx: 3 4, ob1-vader: 3 4, cxl: 3 4, hand-written: 3 4"
check "slow: met" "$(field "$slow" 5)" "**1 of 4**"
check "slow: below the floor" "$(field "$slow" 6)" "2"
check "slow: below the hand-written reference" "$(field "$slow" 7)" \
    "1: bcast 8 B 0.80× (hand-written 0.72×)"
check "slow: otherwise" "$(field "$slow" 8)" "none"
if grep -q '| hand-written | cxl / hand-written | hand-written / best |' "$tmp/a/report.md" &&
   grep -q '^| 8 B | .* | 0.130 \[0.080–0.180\] | 1.35× | 0.58× |' "$tmp/a/report.md"; then
    ok "per-collective table: the reference over all four repetitions (bcast 8 B)"
else
    bad "per-collective table: no hand-written columns, or wrong bcast 8 B values:"
    grep -A4 '^### bcast' "$tmp/a/report.md" | sed 's/^/    /'
fi
if grep -q "each on its own" "$tmp/a/summary.md" 2>/dev/null &&
   grep -qF '| bcast 8 B | 0.200 / 0.150: 0.75× ✗ | 0.080: 0.40× | 0.250 / 0.200: 0.80× ✗ | 0.180: 0.72× |' \
       "$tmp/a/summary.md"; then
    ok "summary.md: both states met, each on its own (bcast 8 B)"
else
    bad "summary.md: no per-state table, or wrong bcast 8 B row:"
    grep 'bcast 8 B' "$tmp/a/summary.md" | sed 's/^/    /'
fi
if grep -qF 'medians, µs: barrier 0.170, bcast 8 B 0.130, exchange 8 B 0.225.' \
       "$tmp/a/summary.md" 2>/dev/null; then
    ok "summary.md: the hand-written reference's medians over all repetitions"
else
    bad "summary.md: no hand-written reference line, or wrong medians:"
    grep -i 'hand-written reference' "$tmp/a/summary.md" | sed 's/^/    /'
fi
if grep -q "[0-9] of 4 met" "$tmp/a/report.md"; then
    ok "the whole-run summary is still there"
else
    bad "the whole-run summary (N of 4 met) is missing"
fi

make_run "$tmp/b" 0
"$PY" "$SRC/perftest/coll_report.py" "$tmp/b" > "$tmp/b.log" 2>&1 ||
    { bad "coll_report.py failed without round trips:"; sed 's/^/    /' "$tmp/b.log"; }
if [ -f "$tmp/b/report.md" ] && ! grep -q "^## Targets by VM state" "$tmp/b/report.md"; then
    ok "no round trips in runs.csv: no by-state section"
else
    bad "without round trips the by-state section must be left out"
fi

echo "coll-report: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
