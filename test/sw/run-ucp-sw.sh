#!/usr/bin/env bash
#
# run-ucp-sw.sh - test/ucp/run-ucp-tests.sh in software-coherent mode on the
# strict non-coherent pool emulator (CXL_TEST_COHERENCE=sw; see that
# script's header): every pool emulate-nc, UCX_CXL_COHERENCE=sw, each
# process an emulated host of its own.  A test of its own in `make check`,
# with its own log and its own "ucp-tests-sw: N passed, N failed" line.
export CXL_TEST_COHERENCE=sw
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../ucp/run-ucp-tests.sh" "$@"
