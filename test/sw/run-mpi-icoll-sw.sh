#!/usr/bin/env bash
#
# run-mpi-icoll-sw.sh - test/mpi/run-mpi-icoll.sh in software-coherent mode
# on the strict non-coherent pool emulator (CXL_TEST_COHERENCE=sw; see that
# script's header), at np 2 and 3 unless MPI_ICOLL_NPS says otherwise:
# every run of that script (the program's every section, nbteam included;
# the declined run's two pools both on the emulator).
# Run by `make check` where coll/cxl is built (outside the sanitizer build).
export CXL_TEST_COHERENCE=sw
export MPI_ICOLL_NPS=${MPI_ICOLL_NPS:-2 3}
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../mpi/run-mpi-icoll.sh" "$@"
