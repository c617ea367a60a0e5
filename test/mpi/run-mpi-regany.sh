#!/usr/bin/env bash
#
# run-mpi-regany.sh - test/mpi/run-mpi.sh with UCX_CXL_REG_ANY=y
# (CXL_TEST_REG_ANY=y; see that script's header): UCP registers every
# buffer on cxl, window memory from MPI_Win_allocate lies in the pool, and
# osc ucx's own state (ordinary memory) is reached through active messages
# by every rank, its owner included.  Regression: the owner used to reach
# its state with CPU atomics while the others went through active messages,
# and the MPI_Compare_and_swap spin lock hung.  Run by `make check`
# (outside the sanitizer build, like run-mpi.sh).
export CXL_TEST_REG_ANY=y
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/run-mpi.sh" "$@"
