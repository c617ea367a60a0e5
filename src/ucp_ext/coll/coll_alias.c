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

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

void cxl_coll_alias_scan(cxl_coll_team_t *team, const char *path)
{
    unsigned long long start, end, off, ino;
    unsigned maj, min;
    char perms[8], line[512];
    struct stat st;
    FILE *f;

    team->nalias = 0;
    if ((team->coh != CXL_COH_HW) || (path == NULL) ||
        (strncmp(path, CXLPOOL_EMULATE_NC_PREFIX,
                 strlen(CXLPOOL_EMULATE_NC_PREFIX)) == 0) ||
        (stat(path, &st) != 0)) {
        return;
    }
    f = fopen("/proc/self/maps", "r");
    if (f == NULL) {
        return;
    }
    while ((team->nalias < CXL_COLL_MAX_ALIAS) &&
           (fgets(line, sizeof(line), f) != NULL)) {
        if ((sscanf(line, "%llx-%llx %7s %llx %x:%x %llu", &start, &end,
                    perms, &off, &maj, &min, &ino) != 7) ||
            (perms[3] != 's') || (ino != (unsigned long long)st.st_ino) ||
            (maj != major(st.st_dev)) || (min != minor(st.st_dev)) ||
            (start == (uintptr_t)team->pool_base) ||
            (off >= team->pool_size)) {
            continue;
        }
        team->alias[team->nalias].start = (uintptr_t)start;
        team->alias[team->nalias].end   = (uintptr_t)start +
            (uintptr_t)((end - start < team->pool_size - off) ?
                        end - start : team->pool_size - off);
        team->alias[team->nalias].off   = off;
        team->nalias++;
    }
    fclose(f);
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
