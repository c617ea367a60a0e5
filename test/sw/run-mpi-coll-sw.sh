#!/usr/bin/env bash
#
# run-mpi-coll-sw.sh - test/mpi/run-mpi-coll.sh in software-coherent mode on
# the strict non-coherent pool emulator (CXL_TEST_COHERENCE=sw; see that
# script's header), at np 2, 3 and 8 unless MPI_COLL_NPS says otherwise.
# Run by `make check` where coll/cxl is built (outside the sanitizer build).
export CXL_TEST_COHERENCE=sw
export MPI_COLL_NPS=${MPI_COLL_NPS:-2 3 8}
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../mpi/run-mpi-coll.sh" "$@"
