#!/usr/bin/env bash
#
# run-broker-pods.sh - the broker's readers in other pods (issue 13), with
# the pods of test/ns (test/ns/ns-pods-common.sh: network, UTS, IPC and
# mount namespaces on one machine):
#   pod-1  the broker, listening on its veth address 10.78.0.1, and reader A
#   pod-2  reader B; pod-1 and pod-2 share the pool file (/dev/shm is the
#          same filesystem)
#   pod-3  a fresh tmpfs on /dev/shm: no pool at all; readers C1 (the
#          default UCX_TLS=cxl,tcp, no pool to find) and C2 (UCX_TLS=tcp
#          --local 0, random order, batches)
# The pods' veths (10.78.0.1, .2, .3) are ports of one bridge: one
# network.  (With a veth pair per pod pair, pod-1 had two subnets, and
# clients of other pods lost their connection to the broker now and then.)
# Checks: A and B, reading the cold dataset at the same time (B with
# zero-copy views), and C1 and C2 all exit 0 with errors 0 (--check), the
# same digest; local is 1 for A and B (they map the broker's pool), 0 for
# C1 and C2; the files were read once for all of them (stat
# file_bytes_read = the dataset's bytes); B's bytes came through the pool
# (pod-2's veth carried less than a tenth of the dataset) and C's over
# tcp (pod-3's veth carried at least twice the dataset: both readers).
# Exits 77 (skipped) with the reason where the kernel refuses the
# namespaces, a bridge or a veth pair.
#
# Environment: CXL_BUILDDIR (default TOP/build-release), CXLPOOL_BIN,
# CXL_UCT_MODULE, CXL_BROKER_BIN, BRK_READER; BRK_KEEP=1 keeps the outputs.
# Last line "broker-pods: N passed, N failed"; exit 0 only when nothing
# failed.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/broker-common.sh"
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
brk_init broker-pods
for t in unshare nsenter ip; do
    command -v "$t" >/dev/null ||
        { echo "broker-pods: '$t' not installed (util-linux, iproute2)" >&2; exit 99; }
done
POD_PIDS=()
VETHS=()
. "$TOP/test/ns/ns-pods-common.sh"
trap 'brk_cleanup; pods_cleanup' EXIT
skip() { echo "SKIP: $1"; exit 77; }

why=$(pods_refused) && skip "$why"
pod_start pod-1 && P1=$POD && pod_start pod-2 && P2=$POD &&
    pod_start pod-3 "mount -t tmpfs pod3-shm /dev/shm" && P3=$POD ||
    skip "cannot set up a pod in its namespaces: $(cat "$SCR"/pod-*.holder 2>/dev/null | tr '\n' ' ')"
# one network: the pods' veths on a bridge of this namespace, 10.78.0.0/24
BR=bpbr-$$
rc=0
pods_bridge "$BR" || rc=$?
[ $rc = 0 ] && { pods_join "$BR" "$P1" bpa-$$ bpab-$$ 10.78.0.1/24 || rc=$?; }
[ $rc = 0 ] && { pods_join "$BR" "$P2" bpb-$$ bpbb-$$ 10.78.0.2/24 || rc=$?; }
[ $rc = 0 ] && { pods_join "$BR" "$P3" bpc-$$ bpcb-$$ 10.78.0.3/24 || rc=$?; }
case $rc in
    2) skip "the kernel refuses a bridge or a veth pair: $VETH_ERR" ;;
    1) fail "pods: network set-up" "$VETH_ERR"; finish ;;
esac
V2=bpb-$$ V3=bpc-$$
why=
for ns in net uts ipc mnt; do
    a=$(readlink "/proc/$P1/ns/$ns") b=$(readlink "/proc/$P2/ns/$ns") c=$(readlink "/proc/$P3/ns/$ns")
    [ "$a" != "$b" ] && [ "$a" != "$c" ] && [ "$b" != "$c" ] || why+="$ns namespace shared ($a $b $c); "
done
CHECK_WHY=$why
check "pods: pod-1, pod-2, pod-3 in their own net/UTS/IPC/mount namespaces" [ -z "$why" ]

POOL=$(new_pool pods 1g) || exit 99
vis=$(in_pod "$P2" ls "$POOL" 2>&1)/$(in_pod "$P3" ls "$POOL" 2>&1)
CHECK_WHY="ls in pod-2/pod-3: $vis"
[ "$(in_pod "$P2" ls "$POOL" 2>/dev/null)" = "$POOL" ] && ! in_pod "$P3" test -e "$POOL"
verdict $? "pods: pod-2 sees the pool file, pod-3 does not"

# the broker in pod-1 on its veth address
BRK_HOST=10.78.0.1
BRK_WRAP=(nsenter -t "$P1" --net --uts --ipc --mount --)
brk_start "$POOL" --capacity 256m || finish
BRK_WRAP=()
echo "# broker in pod-1 on $BRK_ADDR"
ADDR=$BRK_ADDR
gen_files "$SCR/ds" 400 50000 5
BYTES=$((400 * 50000))
in_pod "$P1" env "${BENV[@]}" timeout 60 "$BRK" add --chunk-size 1m ds "$SCR/ds" >"$SCR/add.out" 2>&1
rc=$?
CHECK_WHY="$(cat "$SCR/add.out")"
check "the dataset added from pod-1: $(cat "$SCR/add.out")" [ $rc = 0 ]

# net_bytes POD IF: bytes received + sent on IF in POD
net_bytes() {
    in_pod "$1" cat /proc/net/dev | awk -v i="$2:" '$1 == i { print $2 + $10 }'
}
b2=$(net_bytes "$P2" "$V2") b3=$(net_bytes "$P3" "$V3")

# pod_rdr POD OUT ENV... -- ARGS...: a reader in POD in the background
pod_rdr() {
    local pod=$1 out=$2 envs=()
    shift 2
    while [ "$1" != -- ]; do
        envs+=("$1")
        shift
    done
    shift
    in_pod "$pod" env "${envs[@]}" timeout -k 5 "$WATCHDOG" "$READER" "$@" >"$out" 2>&1 &
    RPID=$!
    BG_PIDS+=("$RPID")
}
MOD=LD_PRELOAD=$PRELOAD
pod_rdr "$P1" "$SCR/A.out" "$MOD" "UCX_CXL_POOL=$POOL" "CXL_BROKER=$ADDR" -- --check ds
PA=$RPID
pod_rdr "$P2" "$SCR/B.out" "$MOD" "UCX_CXL_POOL=$POOL" "CXL_BROKER=$ADDR" -- --check --view --order random --seed 3 ds
PB=$RPID
wait "$PA"; RA=$?
wait "$PB"; RB=$?
b2=$(( $(net_bytes "$P2" "$V2") - b2 ))
pod_rdr "$P3" "$SCR/C1.out" "$MOD" "CXL_BROKER=$ADDR" -- --check ds
wait "$RPID"; RC1=$?
pod_rdr "$P3" "$SCR/C2.out" "$MOD" UCX_TLS=tcp "CXL_BROKER=$ADDR" -- --check --local 0 --order random --seed 5 --batch 8 ds
wait "$RPID"; RC2=$?
b3=$(( $(net_bytes "$P3" "$V3") - b3 ))

digests=''
for r in "A pod-1 $RA 1" "B pod-2 $RB 1" "C1 pod-3 $RC1 0" "C2 pod-3 $RC2 0"; do
    set -- $r
    out=$SCR/$1.out
    echo "#   reader $1 in $2: exit $3: $(rsummary "$out")"
    CHECK_WHY="exit $3: $(tr '\n' ' ' <"$out" | head -c 600)"
    [ "$3" = 0 ] && [ "$(rfield "$out" errors)" = 0 ] && [ "$(rfield "$out" samples)" = 400 ] &&
        [ "$(rfield "$out" local)" = "$4" ]
    verdict $? "reader $1 in $2 reads every sample (--check, errors 0), local $4"
    digests+="$(rfield "$out" digest) "
done
n=$(echo "$digests" | tr ' ' '\n' | grep . | sort -u | grep -c .)
CHECK_WHY="digests '$digests'"
[ "$n" = 1 ] && [ "$(echo "$digests" | wc -w)" = 4 ]
verdict $? "the four readers' digests are identical (${digests% })"
in_pod "$P1" env "${BENV[@]}" timeout 60 "$BRK" stat --json >"$SCR/st.json" 2>&1
got=$(jget "$SCR/st.json" 'd["file_bytes_read"]')
check "the files were read once for every pod (file_bytes_read $got = $BYTES)" [ "$got" = "$BYTES" ]
echo "#   IP bytes meanwhile: pod-2's veth $b2, pod-3's veth $b3 (the dataset: $BYTES)"
CHECK_WHY="$b2 bytes"
check "B's bytes came through the pool: pod-2's veth carried $b2 < $((BYTES / 10))" [ "$b2" -lt $((BYTES / 10)) ]
CHECK_WHY="$b3 bytes"
check "C's bytes came over tcp: pod-3's veth carried $b3 >= $((2 * BYTES))" [ "$b3" -ge $((2 * BYTES)) ]
brk_stop TERM
check "the broker stops with exit status 0" [ "$BRK_RC" = 0 ]
finish
