#!/usr/bin/env bash
#
# run-mpi-reg-n.sh - test/mpi/run-mpi.sh with UCX_CXL_REG_ANY=n
# (CXL_TEST_REG_ANY=n; see that script's header), the mode without
# UCT_MD_FLAG_REG: only pool allocations register, rkey_ptr is offered, and
# UCP emulates RMA and atomics on ordinary memory (osc ucx's state,
# MPI_Win_create windows) with active messages itself.  The default mode
# (y: the owner executes operations on memory outside the pool) is
# run-mpi.sh.  Run by `make check` (outside the sanitizer build, like
# run-mpi.sh).
export CXL_TEST_REG_ANY=n
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/run-mpi.sh" "$@"
