#!/usr/bin/env bash
#
# run-coll-ucp-sw.sh - test/coll/run-coll-ucp.sh in software-coherent mode
# on the non-coherent pool emulator (CXL_TEST_COHERENCE=sw: each process an
# emulated host of its own; CXL_COLL_TEST_SKIP_WB=y must make the
# checks fail).  Prints "coll-ucp-sw: N passed, N failed".
export CXL_TEST_COHERENCE=sw
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/run-coll-ucp.sh" "$@"
