/*
 * Host partitions: which part of the metadata this process may write.
 *
 * Hosts sharing a software-coherent (CXL 2.0) pool have no coherence and no
 * atomic read-modify-write between them, so no cache line may be written by
 * two hosts.  The pool is split into nr_hosts partitions (lock line,
 * attachment slots, extent records, heap arena); processes of host k write
 * only partition k and read everything.  Processes of one host share
 * caches, so CAS among them on their own lock line stays correct.
 */
#include "pool_int.h"

#include <stdlib.h>
#include <errno.h>
#include <string.h>

#define CXLPOOL_HOST_INDEX_ENV "UCX_CXL_HOST_INDEX"

void cxlpool_partition_init(cxlpool_t *pool)
{
    pool->nr_hosts = cxlpool_sb_nr_hosts(pool->sb);
}

int cxlpool_parse_host_index(const char *str, int *index)
{
    unsigned long v;
    char *end;

    *index = -1;
    if ((str == NULL) || !strcmp(str, "auto")) {
        return 0;
    }
    errno = 0;
    v     = strtoul(str, &end, 10);
    if ((*str < '0') || (*str > '9') || (*end != '\0') || (errno != 0) ||
        (v >= CXLPOOL_MAX_HOSTS)) {
        return -1;
    }
    *index = (int)v;
    return 0;
}

/* UCX_CXL_HOST_INDEX: unset or "auto" -> -1, else a decimal index. */
static cxlpool_status_t cxlpool_host_index_env(cxlpool_t *pool, int *index)
{
    const char *env = getenv(CXLPOOL_HOST_INDEX_ENV);

    if (cxlpool_parse_host_index(env, index) != 0) {
        return cxlpool_error(CXLPOOL_ERR_INVAL,
                             "%s: %s='%s' is not a host index: give a decimal "
                             "number 0..%u (the pool has %u host partition(s))"
                             " or 'auto'", pool->path, CXLPOOL_HOST_INDEX_ENV,
                             env, pool->nr_hosts - 1, pool->nr_hosts);
    }
    return CXLPOOL_OK;
}

cxlpool_status_t cxlpool_host_resolve(cxlpool_t *pool,
                                      const cxlpool_params_t *params)
{
    int attach = !(params->flags & (CXLPOOL_NO_ATTACH | CXLPOOL_READONLY));
    int sw     = (pool->coh == CXL_COH_SW) ||
                 (pool->sb->coherence == CXL_COH_SW);
    const char *from = "params.host_index";
    cxlpool_status_t status;
    int index;

    if ((pool->emu != NULL) || (pool->backend == CXLPOOL_BACKEND_EMULATE_NC)) {
        /* the emulator picked its emulated host already; keep its choice */
        index = (int)pool->host_index;
        from  = "the emulate-nc backend";
    } else {
        index = params->host_index;
        if (index < -1) {
            return cxlpool_error(CXLPOOL_ERR_INVAL,
                                 "%s: host index %d is invalid (-1: auto, "
                                 "else 0..%u)", pool->path, index,
                                 pool->nr_hosts - 1);
        }
        if (index == -1) {
            status = cxlpool_host_index_env(pool, &index);
            if (status != CXLPOOL_OK) {
                return status;
            }
            from = CXLPOOL_HOST_INDEX_ENV;
        }
        if ((index == -1) && ((pool->nr_hosts == 1) || !sw)) {
            /* hardware keeps one partition coherent for every process */
            index = 0;
        } else if (index == -1) {
            if (attach) {
                return cxlpool_error(CXLPOOL_ERR_INVAL,
                                     "%s: this software-coherent pool has %u "
                                     "host partitions and a process writes "
                                     "only its own host's: set %s to this "
                                     "host's index (0..%u, the same for all "
                                     "processes of a host, different for "
                                     "every host)", pool->path, pool->nr_hosts,
                                     CXLPOOL_HOST_INDEX_ENV, pool->nr_hosts - 1);
            }
            /* a reader needs no partition; its writes will ask for one */
            pool->host_index = CXLPOOL_HOST_INDEX_NONE;
            pool->lock       = NULL;
            return CXLPOOL_OK;
        }
    }

    if ((index < 0) || ((uint32_t)index >= pool->nr_hosts)) {
        return cxlpool_error(CXLPOOL_ERR_INVAL,
                             "%s: host index %d (from %s) is out of range: the "
                             "pool has %u host partition(s), 0..%u", pool->path,
                             index, from, pool->nr_hosts, pool->nr_hosts - 1);
    }

    pool->host_index = (uint32_t)index;
    pool->lock       = (cxlpool_lock_t*)(pool->base + CXLPOOL_LOCK_OFFSET) +
                       index;
    return CXLPOOL_OK;
}

cxlpool_status_t cxlpool_partition_required(cxlpool_t *pool, const char *what)
{
    if (pool->rdonly) {
        /* the mapping is read-only: the lock alone would fault */
        return cxlpool_error(CXLPOOL_ERR_INVAL, "%s: cannot %s: opened "
                             "read-only", pool->path, what);
    }
    if (pool->host_index != CXLPOOL_HOST_INDEX_NONE) {
        return CXLPOOL_OK;
    }
    return cxlpool_error(CXLPOOL_ERR_INVAL,
                         "%s: cannot %s: this software-coherent pool has %u "
                         "host partitions and this handle has none; set %s "
                         "(or --host-index) to this host's index 0..%u",
                         pool->path, what, pool->nr_hosts,
                         CXLPOOL_HOST_INDEX_ENV, pool->nr_hosts - 1);
}

void cxlpool_own_slots(cxlpool_t *pool, uint32_t *first, uint32_t *end)
{
    *first = cxlpool_part_first(pool->sb->max_attach, pool->nr_hosts,
                                pool->host_index);
    *end   = cxlpool_part_first(pool->sb->max_attach, pool->nr_hosts,
                                pool->host_index + 1);
}

void cxlpool_own_records(cxlpool_t *pool, uint32_t *first, uint32_t *end)
{
    *first = cxlpool_part_first(pool->sb->max_extents, pool->nr_hosts,
                                pool->host_index);
    *end   = cxlpool_part_first(pool->sb->max_extents, pool->nr_hosts,
                                pool->host_index + 1);
}

uint32_t cxlpool_slot_part(cxlpool_t *pool, uint32_t slot)
{
    return cxlpool_part_of(pool->sb->max_attach, pool->nr_hosts, slot);
}

uint32_t cxlpool_record_part(cxlpool_t *pool, uint32_t index)
{
    return cxlpool_part_of(pool->sb->max_extents, pool->nr_hosts, index);
}
