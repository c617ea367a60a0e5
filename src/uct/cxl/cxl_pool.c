/*
 * Process-wide registry of attached pools.
 *
 * Component-level rkey_unpack() has no MD argument, so the pools a process
 * has attached are found here by UUID.  A pool stays attached while an MD
 * or an unpacked key refers to it.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cxl_md.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/string.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static UCS_LIST_HEAD(uct_cxl_pools);
static pthread_mutex_t uct_cxl_pools_lock = PTHREAD_MUTEX_INITIALIZER;

ucs_status_t uct_cxl_pool_status(cxlpool_status_t status)
{
    switch (status) {
    case CXLPOOL_OK:
        return UCS_OK;
    case CXLPOOL_ERR_NOENT:
    case CXLPOOL_ERR_NOT_FOUND:
        return UCS_ERR_NO_ELEM;
    case CXLPOOL_ERR_PERM:
        return UCS_ERR_UNREACHABLE;
    case CXLPOOL_ERR_NO_SPACE:
    case CXLPOOL_ERR_NO_SLOT:
        return UCS_ERR_NO_MEMORY;
    case CXLPOOL_ERR_EXISTS:
        return UCS_ERR_ALREADY_EXISTS;
    case CXLPOOL_ERR_UNSUPPORTED:
        return UCS_ERR_UNSUPPORTED;
    case CXLPOOL_ERR_IO:
        return UCS_ERR_IO_ERROR;
    case CXLPOOL_ERR_BUSY:
        return UCS_ERR_BUSY;
    default:
        return UCS_ERR_INVALID_PARAM;
    }
}

/*
 * "/dev/shm/ucx-cxl-0.pool" -> "ucx-cxl-0", "/dev/dax0.0" -> "dax0.0",
 * "emulate-nc:x.pool" -> "x"
 */
static void uct_cxl_pool_dev_name(const char *path, char *name, size_t max)
{
    const char *base;
    size_t len;

    if (!strncmp(path, CXLPOOL_EMULATE_NC_PREFIX,
                 strlen(CXLPOOL_EMULATE_NC_PREFIX))) {
        path += strlen(CXLPOOL_EMULATE_NC_PREFIX);
    }
    base = strrchr(path, '/');
    base = base ? base + 1 : path;
    len  = strlen(base);
    if ((len > 5) && !strcmp(base + len - 5, ".pool")) {
        len -= 5;
    }
    if (len >= max) {
        len = max - 1;
    }
    memcpy(name, base, len);
    name[len] = '\0';
}

static cxl_coh_mode_t uct_cxl_pool_coh(const char *path,
                                       const uct_cxl_md_config_t *cfg)
{
    cxlpool_info_t info;

    switch (cfg->coherence) {
    case UCT_CXL_COH_CFG_HW:
        return CXL_COH_HW;
    case UCT_CXL_COH_CFG_SW:
        return CXL_COH_SW;
    default:
        /* auto: the mode the pool was created for */
        return (cxlpool_probe(path, &info) == CXLPOOL_OK) ? info.coherence :
               CXL_COH_HW;
    }
}

/* UCX_CXL_HOST_INDEX: "auto" -> -1 (the pool library decides), or 0..63 */
static ucs_status_t uct_cxl_pool_host_index(const uct_cxl_md_config_t *cfg,
                                            int *index)
{
    if (cxlpool_parse_host_index(cfg->host_index, index) != 0) {
        ucs_error("cxl: UCX_CXL_HOST_INDEX='%s' is invalid: 'auto' or a host "
                  "partition 0..%d", cfg->host_index, CXLPOOL_MAX_HOSTS - 1);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

ucs_status_t uct_cxl_pool_get(const char *path, const uct_cxl_md_config_t *cfg,
                              uct_cxl_pool_t **pool_p)
{
    char defpath[64];
    cxlpool_params_t params;
    cxlpool_status_t cstatus;
    cxlpool_info_t info;
    uct_cxl_pool_t *pool;
    ucs_status_t status = UCS_OK;

    cxlpool_default_path(defpath, sizeof(defpath));
    if (path == NULL) {
        path = defpath;
    }

    pthread_mutex_lock(&uct_cxl_pools_lock);
    /*
     * Keyed by the whole spec: "emulate-nc:PATH" (an emulated host's view)
     * and "PATH" (a direct mapping) are different attachments of one pool.
     */
    ucs_list_for_each(pool, &uct_cxl_pools, list) {
        if (!strcmp(pool->path, path)) {
            if ((cfg->coherence != UCT_CXL_COH_CFG_AUTO) &&
                (pool->coh != (cxl_coh_mode_t)cfg->coherence)) {
                ucs_warn("cxl: pool %s is already attached in this process "
                         "with coherence %s; UCX_CXL_COHERENCE=%s is ignored",
                         pool->path, cxl_coh_mode_name(pool->coh),
                         cxl_coh_mode_name((cxl_coh_mode_t)cfg->coherence));
            }
            ++pool->refcount;
            *pool_p = pool;
            goto out;
        }
    }

    pool = ucs_calloc(1, sizeof(*pool), "cxl_pool");
    if (pool == NULL) {
        status = UCS_ERR_NO_MEMORY;
        goto out;
    }

    cxlpool_params_init(&params);
    status = uct_cxl_pool_host_index(cfg, &params.host_index);
    if (status != UCS_OK) {
        ucs_free(pool);
        goto out;
    }
    params.path      = path; /* emulate-nc:PATH passes through unchanged */
    params.numa_node = cfg->numa_node;
    params.coherence = uct_cxl_pool_coh(path, cfg);
    if (!strcmp(path, defpath)) {
        /* only the emulated default is created on first use */
        params.flags = CXLPOOL_CREATE;
        params.size  = cfg->pool_size;
    }

    cstatus = cxlpool_open(&params, &pool->cxlpool);
    if (cstatus != CXLPOOL_OK) {
        ucs_error("cxl: %s", cxlpool_last_error());
        ucs_free(pool);
        status = uct_cxl_pool_status(cstatus);
        goto out;
    }

    cxlpool_info(pool->cxlpool, &info);
    pool->refcount    = 1;
    pthread_mutex_init(&pool->allocs_lock, NULL);
    ucs_list_head_init(&pool->allocs);
    pool->base        = cxlpool_base(pool->cxlpool);
    pool->size        = info.size;
    pool->heap_offset = info.heap_offset;
    pool->coh         = cxlpool_coherence(pool->cxlpool); /* emulate-nc: sw */
    pool->host_index  = info.host_index;
    pool->test_via_owner = cfg->test_via_owner;
    pool->backend     = info.backend;
    memcpy(pool->uuid, info.uuid, sizeof(pool->uuid));
    ucs_strncpy_zero(pool->path, path, sizeof(pool->path));
    uct_cxl_pool_dev_name(path, pool->dev_name, sizeof(pool->dev_name));
    ucs_list_add_tail(&uct_cxl_pools, &pool->list);
    ucs_debug("cxl: attached pool %s (%s, %" PRIu64 " bytes, coherence %s, "
              "host partition %u of %u)", pool->path, pool->dev_name,
              pool->size, cxl_coh_mode_name(pool->coh), info.host_index,
              info.nr_hosts);
    *pool_p = pool;

out:
    pthread_mutex_unlock(&uct_cxl_pools_lock);
    return status;
}

int uct_cxl_pool_alloc_covers(uintptr_t addr, size_t length)
{
    uct_cxl_pool_t *pool;
    uct_cxl_memh_t *memh;
    uintptr_t base;
    int found = 0;

    pthread_mutex_lock(&uct_cxl_pools_lock);
    ucs_list_for_each(pool, &uct_cxl_pools, list) {
        base = (uintptr_t)pool->base;
        if ((addr < base) || (addr - base >= pool->size)) {
            continue;
        }
        pthread_mutex_lock(&pool->allocs_lock);
        ucs_list_for_each(memh, &pool->allocs, list) {
            if ((addr >= (uintptr_t)memh->address) &&
                (length <= memh->length) &&
                (addr - (uintptr_t)memh->address <= memh->length - length)) {
                found = 1;
                break;
            }
        }
        pthread_mutex_unlock(&pool->allocs_lock);
        break;
    }
    pthread_mutex_unlock(&uct_cxl_pools_lock);
    return found;
}

void uct_cxl_pool_put(uct_cxl_pool_t *pool)
{
    pthread_mutex_lock(&uct_cxl_pools_lock);
    if (--pool->refcount == 0) {
        ucs_list_del(&pool->list);
        cxlpool_close(pool->cxlpool);
        pthread_mutex_destroy(&pool->allocs_lock);
        ucs_free(pool);
    }
    pthread_mutex_unlock(&uct_cxl_pools_lock);
}

uct_cxl_pool_t *uct_cxl_pool_find_uuid(const uint8_t *uuid)
{
    uct_cxl_pool_t *pool, *found = NULL;

    pthread_mutex_lock(&uct_cxl_pools_lock);
    ucs_list_for_each(pool, &uct_cxl_pools, list) {
        if (!memcmp(pool->uuid, uuid, sizeof(pool->uuid))) {
            ++pool->refcount;
            found = pool;
            break;
        }
    }
    pthread_mutex_unlock(&uct_cxl_pools_lock);
    return found;
}

uct_cxl_pool_t *uct_cxl_pool_find_addr(const void *addr, size_t length)
{
    uintptr_t a = (uintptr_t)addr;
    uct_cxl_pool_t *pool, *found = NULL;

    pthread_mutex_lock(&uct_cxl_pools_lock);
    ucs_list_for_each(pool, &uct_cxl_pools, list) {
        uintptr_t base = (uintptr_t)pool->base;
        if ((a >= base) && (a - base <= pool->size) &&
            (length <= pool->size - (a - base))) {
            found = pool;
            break;
        }
    }
    pthread_mutex_unlock(&uct_cxl_pools_lock);
    return found;
}
