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
 *
 * The mappings are read from /proc/self/maps once per team, at the first
 * lookup (a call large enough to be read in place), not at creation: the
 * kernel's listing and its parsing were ~70 % of a team's creation
 * (perf, stop 39), which a communicator's first call pays, and a program
 * of small messages never needs them.
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

void cxl_coll_alias_init(cxl_coll_team_t *team, const char *path)
{
    team->nalias        = 0;
    team->alias_pending = (team->coh == CXL_COH_HW) && (path != NULL) &&
                          (strncmp(path, CXLPOOL_EMULATE_NC_PREFIX,
                                   strlen(CXLPOOL_EMULATE_NC_PREFIX)) != 0);
}

const void *cxl_coll_alias(cxl_coll_team_t *team, const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p;
    unsigned i;

    if (team->alias_pending) {
        team->alias_pending = 0;
        /* none found (or none to find) leaves nalias 0: copy as usual */
        (void)cxlpool_foreach_mapping(team->pool, cxl_coll_alias_cb, team);
    }

    for (i = 0; i < team->nalias; ++i) {
        if ((a >= team->alias[i].start) && (a < team->alias[i].end) &&
            (len <= team->alias[i].end - a)) {
            return team->pool_base + team->alias[i].off +
                   (a - team->alias[i].start);
        }
    }
    return p;
}
