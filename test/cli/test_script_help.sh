#!/usr/bin/env bash
#
# test_script_help.sh - every script whose --help prints its header comment
# prints all of it and nothing else: exit 0, the last line printed is the
# header's last comment line, and no line of code leaks out.  (run-demo.sh
# printed "set -euo pipefail"; run-mpi.sh cut its "Exit status" paragraph
# after its header grew: both printed fixed line ranges.)
# Ends with "script-help: N passed, N failed".
set -u
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
pass=0
fail=0

for s in contrib/run-tests.sh contrib/run-demo.sh contrib/build.sh \
         test/mpi/run-mpi.sh test/mpi/run-mpi-single-host.sh \
         test/mpi/run-mpi-coll.sh test/mpi/run-mpi-icoll.sh \
         test/mpi/test_mpi_build.sh test/mpi/test_mpi_job.sh \
         contrib/run-mpi4py-tests.sh contrib/run-mpich-coll-tests.sh \
         contrib/get-mpich-tests.sh \
         test/coll/run-coll-ucp.sh \
         test/broker/run-broker-fill.sh test/broker/run-broker-version.sh \
         test/broker/run-broker-policy.sh test/broker/run-broker-kill.sh \
         test/broker/run-broker-cli.sh test/broker/run-broker-pods.sh \
         test/broker/run-broker-scribble.sh \
         test/python/run-pytest.sh \
         test/python/run-dask-tests.sh test/ns/run-dask-pods.sh \
         perftest/run-dask-bench.sh test/perftest/test_dask_bench.sh \
         test/perftest/test_coll_report.sh \
         test/fuzz/run-fuzz.sh test/tsan/run-tsan.sh \
         test/vm/run-devdax-vm.sh test/vm/build-guest.sh; do
    out=$(bash "$top/$s" --help 2>&1)
    rc=$?
    # the header: from line 3 to the line before the first non-comment line
    end=$(awk 'NR >= 3 && !/^#/ { print NR - 1; exit }' "$top/$s")
    want=$(sed -n "${end}p" "$top/$s" | sed 's/^# \{0,1\}//')
    got=$(printf '%s\n' "$out" | tail -n 1)
    if [ $rc -ne 0 ]; then
        echo "FAIL: $s --help exits $rc"; fail=$((fail + 1))
    elif [ "$got" != "$want" ]; then
        echo "FAIL: $s --help ends with '$got', its header with '$want'"
        fail=$((fail + 1))
    elif printf '%s\n' "$out" | grep -qE '^(set -|top=|case |for |if \[)'; then
        echo "FAIL: $s --help prints code"; fail=$((fail + 1))
    else
        echo "ok: $s --help"; pass=$((pass + 1))
    fi
done
echo "script-help: $pass passed, $fail failed"
[ $fail -eq 0 ]
