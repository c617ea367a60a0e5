#!/usr/bin/env bash
#
# run-mpi-sw.sh - test/mpi/run-mpi.sh in software-coherent mode on the
# strict non-coherent pool emulator (CXL_TEST_COHERENCE=sw; see that
# script's header): the pool emulate-nc, UCX_CXL_COHERENCE=sw, each rank an
# emulated host of its own.  Ends with its own "mpi-sw: N passed, N failed"
# line.  Run by `make check` (outside the sanitizer build, like run-mpi.sh)
# and alone by `make check-mpi-sw`.
export CXL_TEST_COHERENCE=sw
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../mpi/run-mpi.sh" "$@"
