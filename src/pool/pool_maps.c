/*
 * Other mappings of a pool in this process.  The transport (libuct_cxl)
 * maps the pool itself, so memory that UCP keys for peers (ucp_mem_map)
 * must lie in the transport's mapping, not in the caller's: a program
 * that writes through its own handle finds the transport's view of the
 * same bytes here.  Only for backends where two mappings of one file are
 * the same memory: not the emulator, whose every mapping is a host of its
 * own.
 */
#include "pool_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

cxlpool_status_t cxlpool_foreach_mapping(cxlpool_t *pool,
                                         cxlpool_mapping_cb_t cb, void *arg)
{
    unsigned long long start, end, off, ino;
    unsigned maj, min;
    char perms[8], line[512];
    struct stat st;
    FILE *f;

    if (pool->emu != NULL) {
        return cxlpool_error(CXLPOOL_ERR_UNSUPPORTED, "pool %s: mappings of "
                             "an emulated non-coherent pool are separate "
                             "hosts, not aliases", pool->path);
    }
    if (fstat(pool->fd, &st) != 0) {
        return cxlpool_error_errno(errno, pool->path, "fstat");
    }
    f = fopen("/proc/self/maps", "r");
    if (f == NULL) {
        return cxlpool_error_errno(errno, "/proc/self/maps", "open");
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if ((sscanf(line, "%llx-%llx %7s %llx %x:%x %llu", &start, &end,
                    perms, &off, &maj, &min, &ino) != 7) ||
            (perms[3] != 's') || (ino != (unsigned long long)st.st_ino) ||
            (maj != major(st.st_dev)) || (min != minor(st.st_dev)) ||
            (start == (uintptr_t)pool->base) || (off >= pool->size)) {
            continue;
        }
        if (end - start > pool->size - off) {
            end = start + (pool->size - off);
        }
        cb((void*)(uintptr_t)start, end - start, off, arg);
    }
    fclose(f);
    return CXLPOOL_OK;
}
