#!/usr/bin/env bash
#
# test_rma_bench.sh - perftest/rma_bench (UCP put/get bandwidth with a
# target that keeps progressing): --help and bad arguments; put and get in
# hw mode; put and get of pool buffers across two sw host partitions
# (through the memory's owner), one and four operations in flight, each
# finishing within its timeout with one well-formed line per size.  Before
# rma_bench freed its requests in their callbacks, every operation that
# waits for the owner's answer hung here.  No timing is asserted.  Ends
# with "rma-bench: N passed, N failed".
#
#   test/perftest/test_rma_bench.sh [BUILDDIR]   (default: $CXL_BUILDDIR,
#                                                  else build-release/)
set -u
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
. "$(dirname "${BASH_SOURCE[0]}")/smoke-common.sh"
smoke_init test_rma_bench.sh "${1:-}" .libs/libuct_cxl.so perftest/rma_bench cxlpool
RB=$build/perftest/rma_bench
HW=/dev/shm/rma-bench-test-$$-hw.pool
XH=/dev/shm/rma-bench-test-$$-xh.pool
smoke_on_exit "rm -f '$HW' '$XH' '$XH'.host*"
"$build/cxlpool" create "$HW" --size 256M >/dev/null || { echo "cannot create $HW"; exit 99; }
"$build/cxlpool" create "$XH" --size 256M --coherence sw --hosts 2 >/dev/null ||
    { echo "cannot create $XH"; exit 99; }

# expect RC DESC CMD...: exit status RC
expect() {
    local want=$1 desc=$2 rc
    shift 2
    "$@" >"$out/o" 2>"$out/e"
    rc=$?
    if [ "$rc" = "$want" ]; then ok "$desc"; else bad "$desc: exit $rc (want $want): $(head -c 300 "$out/e")"; fi
}
expect 0 "--help" "$RB" --help
grep -q -- "--window" "$out/o" && ok "--help names --window" || bad "--help names --window"
expect 2 "bad --op" "$RB" --op swap
grep -q "put or get" "$out/e" && ok "bad --op says what is allowed" || bad "bad --op message: $(cat "$out/e")"
expect 2 "bad --sizes" "$RB" --sizes 0
expect 2 "bad --window" "$RB" --window 0
expect 2 "bad env word" "$RB" --target-env NOEQUALS

# lines OP SIZES: one "op,size,MB/s,MB/s,higher" line per size, MB/s > 0
lines() {
    local op=$1 sizes=$2 s
    for s in $sizes; do
        if grep -Eq "^$op,$s,[0-9][0-9.e+-]*,MB/s,higher$" "$out/o" &&
           awk -F, -v o="$op" -v s="$s" '$1 == o && $2 == s && $3 > 0 { f = 1 } END { exit !f }' "$out/o"; then
            ok "$op $s: one well-formed line"
        else
            bad "$op $s: no well-formed line in: $(cat "$out/o")"
        fi
    done
}

base=(env LD_PRELOAD="$build/.libs/libuct_cxl.so" UCX_TLS=cxl
      UCX_ALLOC_PRIO=md:cxl,thp,mmap,heap)
for op in put get; do
    expect 0 "hw $op" timeout -k 5 60 "${base[@]}" UCX_CXL_POOL="$HW" UCX_CXL_COHERENCE=hw \
        "$RB" --op "$op" --sizes 4k,1M --iters 30
    lines "$op" "4096 1048576"
    for w in 1 4; do
        expect 0 "sw across hosts $op, $w in flight" timeout -k 5 60 "${base[@]}" \
            UCX_CXL_POOL="$XH" UCX_CXL_COHERENCE=sw "$RB" --op "$op" --sizes 8,1M \
            --iters 30 --window "$w" --target-env UCX_CXL_HOST_INDEX=0 \
            --initiator-env UCX_CXL_HOST_INDEX=1
        lines "$op" "8 1048576"
    done
done

echo "rma-bench: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
