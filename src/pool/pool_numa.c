/*
 * NUMA placement of a pool, to stand in for a CPU-less CXL memory node.
 *
 * For tmpfs files the policy set with mbind() on a shared mapping is kept
 * by the file (shared policy), so it binds every later page of the pool,
 * whoever touches it first.
 */
#include "pool_int.h"

#include <errno.h>
#include <numa.h>
#include <numaif.h>
#include <string.h>

#define CXLPOOL_NUMA_MASK_LONGS 64

cxlpool_status_t cxlpool_numa_check(const char *path, int node)
{
    if (numa_available() < 0) {
        return cxlpool_error(CXLPOOL_ERR_UNSUPPORTED,
                             "%s: NUMA binding to node %d requested, but this "
                             "kernel has no NUMA support", path, node);
    }
    if ((node < 0) || (node > numa_max_node()) ||
        (node >= CXLPOOL_NUMA_MASK_LONGS * (int)(8 * sizeof(long))) ||
        !numa_bitmask_isbitset(numa_all_nodes_ptr, node)) {
        return cxlpool_error(CXLPOOL_ERR_INVAL,
                             "%s: NUMA node %d does not exist (nodes 0-%d)",
                             path, node, numa_max_node());
    }
    return CXLPOOL_OK;
}

cxlpool_status_t cxlpool_numa_bind(const char *path, void *addr, uint64_t len,
                                   int node)
{
    unsigned long mask[CXLPOOL_NUMA_MASK_LONGS];
    cxlpool_status_t status;

    status = cxlpool_numa_check(path, node);
    if (status != CXLPOOL_OK) {
        return status;
    }

    memset(mask, 0, sizeof(mask));
    mask[node / (8 * sizeof(long))] |= 1ul << (node % (8 * sizeof(long)));
    if (mbind(addr, len, MPOL_BIND, mask, sizeof(mask) * 8, 0) < 0) {
        return cxlpool_error_errno(errno, path, "mbind");
    }
    return CXLPOOL_OK;
}
