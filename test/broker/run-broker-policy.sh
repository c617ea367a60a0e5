#!/usr/bin/env bash
#
# run-broker-policy.sh - eviction policies of the broker when the dataset
# is larger than the cache (issue 13).
# A dataset of 80 files of 128 KiB (10 MiB) in chunks of 128 KiB, one
# sample per chunk, behind a cache of 4 MiB (serve --capacity 4m, the
# minimum: 2.5 times smaller than the dataset).  For each policy (pin, lru,
# plan) a broker of its own on a pool of its own, and one reader
# (CXL_BROKER_PIN_CACHE=1, so its own pins hold one chunk) reading 4 epochs
# in random order (--order random --epochs 4, the same seed for all three,
# --check; plan with --announce: the broker knows each epoch's order).
# The broker's per-epoch counters (stat --json epochs[]) are printed as a
# table; checks on epochs 1..3 (epoch 0 is the cold one):
#   pin   the hits of epochs 1..3 are equal within 4 (the streaming window:
#         the capacity less the pinned subset, 4 chunks) and > 0
#   lru   the hit rate of each epoch is below half the capacity fraction
#         (4 MiB / 10 MiB = 0.4): the known collapse of LRU on a repeated
#         random permutation, where a chunk's next use is about a whole
#         epoch away and the cache holds less than an epoch
#   plan  the hit rate of each epoch is above pin's and lru's in the same
#         epoch
# and for every policy: the reader exits 0 with errors 0 (--check: every
# sample is its file's bytes under eviction), the same digest under every
# policy, the cache evicted (the dataset did not fit), and its capacity is
# 4 MiB.
#
# Environment: CXL_BUILDDIR (default TOP/build-release), CXLPOOL_BIN,
# CXL_UCT_MODULE, CXL_BROKER_BIN, BRK_READER; BRK_KEEP=1 keeps the outputs.
# Last line "broker-policy: N passed, N failed"; exit 0 only when nothing
# failed.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/broker-common.sh"
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
brk_init broker-policy

NF=80 FSIZE=131072 SEED=7 CAP=$((4 * 1048576))
gen_files "$SCR/ds" $NF $FSIZE 1
declare -A RATE HITS DIGEST
TABLE=$(printf '# %-6s %5s %6s %6s %8s %6s %9s' POLICY EPOCH HITS MISSES HIT_RATE FILLS EVICTIONS)
for pol in pin lru plan; do
    POOL=$(new_pool "$pol" 512m) || exit 99
    brk_start "$POOL" --capacity 4m || continue
    if ! cli add --chunk-size 128k --policy "$pol" ds "$SCR/ds" >"$SCR/add-$pol.out" 2>&1; then
        fail "$pol: add" "$(cat "$SCR/add-$pol.out")"
        brk_stop TERM
        continue
    fi
    extra=()
    [ "$pol" = plan ] && extra=(--announce)
    RENV=(CXL_BROKER_PIN_CACHE=1)
    rdr --check --order random --epochs 4 --seed $SEED ${extra[@]+"${extra[@]}"} ds \
        >"$SCR/r-$pol.out" 2>&1
    WRC=$?
    RENV=()
    DIGEST[$pol]=$(rfield "$SCR/r-$pol.out" digest)
    CHECK_WHY="exit $WRC: $(tr '\n' ' ' <"$SCR/r-$pol.out")"
    [ $WRC = 0 ] && [ "$(rfield "$SCR/r-$pol.out" errors)" = 0 ] &&
        [ "$(rfield "$SCR/r-$pol.out" samples)" = $((4 * NF)) ]
    verdict $? "$pol: the reader reads 4 epochs (--check) with errors 0: $(rsummary "$SCR/r-$pol.out")"
    stat_json "$SCR/st-$pol.json"
    got=$(jget "$SCR/st-$pol.json" '(d["capacity"], d["evictions"] > 0)')
    CHECK_WHY="(capacity, evicted) = $got"
    check "$pol: a cache of 4 MiB that evicted" [ "$got" = "($CAP, true)" ]
    for e in 0 1 2 3; do
        row=$(jget "$SCR/st-$pol.json" "' '.join(str(x[k]) for x in d['epochs'] if x['name'] == 'ds' and x['epoch'] == $e for k in ('hits', 'misses', 'hit_rate', 'fills', 'evictions'))")
        set -- $row
        TABLE+=$'\n'$(printf '# %-6s %5s %6s %6s %8s %6s %9s' "$pol" "$e" "${1:-?}" \
                       "${2:-?}" "${3:-?}" "${4:-?}" "${5:-?}")
        HITS[$pol.$e]=${1:-}
        RATE[$pol.$e]=${3:-}
    done
    brk_stop TERM
done

echo "# the broker's counters per epoch (stat --json epochs[]):"
echo "$TABLE"

# lt A B: A < B (decimals)
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && b != "" && a + 0 < b + 0) }'; }

h="${HITS[pin.1]:-} ${HITS[pin.2]:-} ${HITS[pin.3]:-}"
CHECK_WHY="hits of epochs 1..3: $h"
echo "$h" | awk 'NF == 3 { mn = $1; mx = $1; for (i = 2; i <= 3; i++) { if ($i < mn) mn = $i; if ($i > mx) mx = $i }
                           exit !(mn > 0 && mx - mn <= 4) } NF != 3 { exit 1 }'
verdict $? "pin: a constant hit count per epoch (epochs 1..3: $h; within 4, > 0)"
for e in 1 2 3; do
    CHECK_WHY="hit rate ${RATE[lru.$e]:-?}"
    check "lru: epoch $e hit rate ${RATE[lru.$e]:-?} < 0.2 (half the capacity fraction 0.4: the collapse)" \
        lt "${RATE[lru.$e]:-}" 0.2
done
for e in 1 2 3; do
    CHECK_WHY="plan ${RATE[plan.$e]:-?}, pin ${RATE[pin.$e]:-?}, lru ${RATE[lru.$e]:-?}"
    lt "${RATE[pin.$e]:-}" "${RATE[plan.$e]:-}" && lt "${RATE[lru.$e]:-}" "${RATE[plan.$e]:-}"
    verdict $? "plan: epoch $e hit rate ${RATE[plan.$e]:-?} beats pin's ${RATE[pin.$e]:-?} and lru's ${RATE[lru.$e]:-?}"
done
d=$(printf '%s\n' "${DIGEST[@]}" | sort -u | grep -c .)
CHECK_WHY="digests pin ${DIGEST[pin]:-} lru ${DIGEST[lru]:-} plan ${DIGEST[plan]:-}"
[ "$d" = 1 ] && [ "${#DIGEST[@]}" = 3 ]
verdict $? "the same bytes under every policy (digest ${DIGEST[pin]:-})"
finish
