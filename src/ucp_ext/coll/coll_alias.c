/*
 * Other mappings of the team's pool in this process.  The transport
 * (libuct_cxl) maps the pool itself, and memory UCP allocates there
 * (MPI_Alloc_mem, MPI_Win_allocate with UCX_ALLOC_PRIO=md:cxl,...) lies in
 * that mapping, not in the library's.  Such a buffer is the same memory as
 * the library's mapping at the same file offset, so a collective may hand
 * its pool offset to the peers and let them read it in place.  Only for
 * hardware-coherent pools: on a software-coherent one the two mappings of
 * one process are one host's caches on hardware, but two emulated hosts
 * on the emulator (each its own view file), and nothing here could tell.
 */
#include "coll_int.h"

#include <string.h>

static void cxl_coll_alias_cb(void *start, uint64_t len, uint64_t pool_off,
                              void *arg)
{
    cxl_coll_team_t *team = arg;

    if (team->nalias < CXL_COLL_MAX_ALIAS) {
        team->alias[team->nalias].start = (uintptr_t)start;
        team->alias[team->nalias].end   = (uintptr_t)start + (uintptr_t)len;
        team->alias[team->nalias].off   = pool_off;
        team->nalias++;
    }
}

void cxl_coll_alias_scan(cxl_coll_team_t *team, const char *path)
{
    team->nalias = 0;
    if ((team->coh != CXL_COH_HW) || (path == NULL) ||
        (strncmp(path, CXLPOOL_EMULATE_NC_PREFIX,
                 strlen(CXLPOOL_EMULATE_NC_PREFIX)) == 0)) {
        return;
    }
    /* no mappings found (or none to find) leaves nalias 0: copy as usual */
    (void)cxlpool_foreach_mapping(team->pool, cxl_coll_alias_cb, team);
}

const void *cxl_coll_alias(const cxl_coll_team_t *team, const void *p,
                           size_t len)
{
    uintptr_t a = (uintptr_t)p;
    unsigned i;

    for (i = 0; i < team->nalias; ++i) {
        if ((a >= team->alias[i].start) && (a < team->alias[i].end) &&
            (len <= team->alias[i].end - a)) {
            return team->pool_base + team->alias[i].off +
                   (a - team->alias[i].start);
        }
    }
    return p;
}
