/*
 * Pool memory for user buffers without a team: cxl_coll_pool_mem_alloc()
 * allocates from the pool a team of this process would use (the same
 * counted handle, so the same mapping), for allocators that run before or
 * apart from any team, such as Open MPI's MPI_Alloc_mem (mpool/cxl).  A
 * collective whose input lies there is read by the peers in place.
 *
 * Each allocation holds one reference on the pool handle and is owned by
 * this process's attachment: a process that dies with allocations out
 * leaves them to `cxlpool check`, like any dead owner's.  A forked child
 * does not own its parent's allocations (the parent's pid is recorded).
 */
#include "coll_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct cxl_coll_pmem {
    struct cxl_coll_pmem *next;
    void                 *ptr;
    cxlpool_t            *pool;
    uint64_t              offset;
    pid_t                 pid;
} cxl_coll_pmem_t;

static pthread_mutex_t  cxl_coll_pmem_lock = PTHREAD_MUTEX_INITIALIZER;
static cxl_coll_pmem_t *cxl_coll_pmems;

void *cxl_coll_pool_mem_alloc(const char *pool_path, size_t length,
                              size_t align)
{
    cxl_coll_config_t cfg;
    cxl_coll_status_t status;
    cxlpool_extent_t ext;
    cxlpool_status_t st;
    cxl_coll_pmem_t *m;
    const char *path;
    char pathbuf[256];

    if (length == 0) {
        cxl_coll_error(CXL_COLL_ERR_INVAL, "pool_mem_alloc: length 0");
        return NULL;
    }
    if ((align & (align - 1)) != 0) {
        cxl_coll_error(CXL_COLL_ERR_INVAL, "pool_mem_alloc: alignment %zu is "
                       "not a power of 2", align);
        return NULL;
    }
    /* page aligned at least: no cache line is shared with another
     * process's data, and a page is the unit any mapping of it has */
    if (align < 4096) {
        align = 4096;
    }
    status = cxl_coll_config_read(&cfg);
    if (status != CXL_COLL_OK) {
        return NULL;
    }
    m = malloc(sizeof(*m));
    if (m == NULL) {
        cxl_coll_error(CXL_COLL_ERR_NO_MEMORY, "pool_mem_alloc bookkeeping");
        return NULL;
    }
    status = cxl_coll_pool_pick_get(pool_path, &cfg, pathbuf, sizeof(pathbuf),
                                    &path, &m->pool);
    if (status != CXL_COLL_OK) {
        free(m);
        return NULL;
    }
    st = cxlpool_alloc(m->pool, length, align, NULL, 0, &ext);
    if (st != CXLPOOL_OK) {
        cxl_coll_error((st == CXLPOOL_ERR_NO_SPACE) ? CXL_COLL_ERR_NO_MEMORY :
                       CXL_COLL_ERR_POOL, "pool_mem_alloc of %zu bytes in %s: "
                       "%s", length, path, cxlpool_last_error());
        cxl_coll_pool_put(m->pool);
        free(m);
        return NULL;
    }
    m->offset = ext.offset;
    m->ptr    = cxlpool_base(m->pool) + ext.offset;
    m->pid    = getpid();
    pthread_mutex_lock(&cxl_coll_pmem_lock);
    m->next        = cxl_coll_pmems;
    cxl_coll_pmems = m;
    pthread_mutex_unlock(&cxl_coll_pmem_lock);
    return m->ptr;
}

cxl_coll_status_t cxl_coll_pool_mem_free(void *ptr)
{
    cxl_coll_pmem_t **pp, *m;
    pid_t pid = getpid();
    cxlpool_status_t st;

    if (ptr == NULL) {
        return CXL_COLL_OK;
    }
    pthread_mutex_lock(&cxl_coll_pmem_lock);
    for (pp = &cxl_coll_pmems; (m = *pp) != NULL; pp = &m->next) {
        if ((m->ptr == ptr) && (m->pid == pid)) {
            *pp = m->next;
            break;
        }
    }
    pthread_mutex_unlock(&cxl_coll_pmem_lock);
    if (m == NULL) {
        return cxl_coll_error(CXL_COLL_ERR_INVAL, "pool_mem_free: %p is no "
                              "cxl_coll_pool_mem_alloc() buffer of this "
                              "process", ptr);
    }
    st = cxlpool_free(m->pool, m->offset);
    cxl_coll_pool_put(m->pool);
    free(m);
    if (st != CXLPOOL_OK) {
        return cxl_coll_error(CXL_COLL_ERR_POOL, "pool_mem_free of %p: %s",
                              ptr, cxlpool_last_error());
    }
    return CXL_COLL_OK;
}
