/*
 * Frames in the pool: loans of pool memory from a receiver to a sender
 * (see include/ucx_cxl/comm.h and doc/design/comm-pool-frames.md).
 *
 * The pool is the one the cxl transport of the process attaches
 * (cxl_pool_pick: the first of UCX_CXL_POOL unless 'auto', else the first
 * devdax device that holds a pool, else the per-user emulated default,
 * created on first use as the transport does).  One handle per process,
 * counted per opener (the binding opens it once per process and keeps it
 * until exit, so frames a program keeps stay mapped after the worker that
 * received them is gone).
 */
#include "comm_int.h"
#include "../common/cxl_pool_pick.h"

#include <ucx_cxl/coherence.h>
#include <ucx_cxl/cxlpool.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct cxl_comm_pool {
    cxlpool_t      *pool;
    uint8_t        *base;
    uint64_t        size;
    cxl_coh_mode_t  coh;
    uint8_t         uuid[CXLPOOL_UUID_LEN];
    pid_t           pid;        /* a forked child opens its own */
    unsigned        refcount;
};

static pthread_mutex_t  cxl_comm_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static cxl_comm_pool_t *cxl_comm_pool_proc;

static int cxl_comm_pool_do_open(cxl_comm_pool_t *p)
{
    cxlpool_params_t params;
    cxlpool_info_t info;
    cxl_pool_pick_src_t src;
    char path[256];

    if (cxl_pool_pick(path, sizeof(path), &src) != 0) {
        return cxl_comm_error(UCS_ERR_INVALID_PARAM, "the first pool of "
                              "UCX_CXL_POOL is longer than %zu characters",
                              sizeof(path) - 1);
    }
    cxl_pool_pick_params(path, src == CXL_POOL_PICK_DEFAULT, &params);
    if (cxlpool_open(&params, &p->pool) != CXLPOOL_OK) {
        return cxl_comm_error(UCS_ERR_NO_DEVICE, "pool %s: %s", path,
                              cxlpool_last_error());
    }
    cxlpool_info(p->pool, &info);
    p->base = cxlpool_base(p->pool);
    p->size = info.size;
    p->coh  = cxlpool_coherence(p->pool);
    memcpy(p->uuid, info.uuid, sizeof(p->uuid));
    return CXL_COMM_OK;
}

int cxl_comm_pool_open(cxl_comm_pool_t **pool_p)
{
    cxl_comm_pool_t *p;
    int rc;

    *pool_p = NULL;
    rc = cxl_comm_copy_threads();
    if (rc < 0) {
        return rc;
    }
    pthread_mutex_lock(&cxl_comm_pool_lock);
    p = cxl_comm_pool_proc;
    if ((p != NULL) && (p->pid == getpid())) {
        p->refcount++;
        *pool_p = p;
        pthread_mutex_unlock(&cxl_comm_pool_lock);
        return CXL_COMM_OK;
    }
    /* (a parent's handle: its attachment is not this process's) */
    p = calloc(1, sizeof(*p));
    if (p == NULL) {
        pthread_mutex_unlock(&cxl_comm_pool_lock);
        return cxl_comm_error(UCS_ERR_NO_MEMORY, "out of memory");
    }
    rc = cxl_comm_pool_do_open(p);
    if (rc != CXL_COMM_OK) {
        free(p);
        pthread_mutex_unlock(&cxl_comm_pool_lock);
        return rc;
    }
    p->pid             = getpid();
    p->refcount        = 1;
    cxl_comm_pool_proc = p;
    *pool_p            = p;
    pthread_mutex_unlock(&cxl_comm_pool_lock);
    return CXL_COMM_OK;
}

void cxl_comm_pool_close(cxl_comm_pool_t *pool)
{
    if (pool == NULL) {
        return;
    }
    pthread_mutex_lock(&cxl_comm_pool_lock);
    if (--pool->refcount == 0) {
        if (cxl_comm_pool_proc == pool) {
            cxl_comm_pool_proc = NULL;
        }
        if ((pool->pid == getpid()) && (pool->pool != NULL)) {
            cxlpool_close(pool->pool);
        }
        free(pool);
    }
    pthread_mutex_unlock(&cxl_comm_pool_lock);
}

void cxl_comm_pool_exit(void)
{
    cxl_comm_pool_t *p;

    pthread_mutex_lock(&cxl_comm_pool_lock);
    p = cxl_comm_pool_proc;
    if ((p != NULL) && (p->pid == getpid()) && (p->pool != NULL)) {
        cxlpool_close(p->pool);     /* frees the loans with the attachment */
        p->pool = NULL;
    }
    pthread_mutex_unlock(&cxl_comm_pool_lock);
}

void cxl_comm_pool_uuid(const cxl_comm_pool_t *pool, uint8_t *uuid)
{
    memcpy(uuid, pool->uuid, sizeof(pool->uuid));
}

void *cxl_comm_pool_base(const cxl_comm_pool_t *pool)
{
    return pool->base;
}

uint64_t cxl_comm_pool_size(const cxl_comm_pool_t *pool)
{
    return pool->size;
}

int cxl_comm_pool_lend(cxl_comm_pool_t *pool, uint64_t len,
                       cxl_comm_loan_t *loan)
{
    cxlpool_extent_t ext;
    cxlpool_status_t st;

    if (pool->pool == NULL) {
        return cxl_comm_error(UCS_ERR_NO_DEVICE, "the pool was detached at exit");
    }
    st = cxlpool_alloc(pool->pool, len ? len : 1, CXLPOOL_MIN_ALIGN,
                       NULL, 0, &ext);
    if (st != CXLPOOL_OK) {
        return cxl_comm_error(UCS_ERR_NO_RESOURCE, "no %llu bytes of the "
                              "pool for frames: %s", (unsigned long long)len,
                              cxlpool_last_error());
    }
    loan->offset = ext.offset;
    loan->length = len;
    loan->index  = ext.index;
    loan->gen    = ext.gen;
    return CXL_COMM_OK;
}

int cxl_comm_pool_reclaim(cxl_comm_pool_t *pool, uint64_t offset)
{
    if (pool->pool == NULL) {
        return CXL_COMM_OK;     /* detached at exit: gone with it */
    }
    if (cxlpool_free(pool->pool, offset) != CXLPOOL_OK) {
        return cxl_comm_error(UCS_ERR_INVALID_PARAM, "freeing frames at %llu: "
                              "%s", (unsigned long long)offset,
                              cxlpool_last_error());
    }
    return CXL_COMM_OK;
}

typedef struct {
    cxl_comm_pool_t       *pool;
    const cxl_comm_loan_t *loan;
    uint8_t               *dst;
    const uint8_t         *src;
} cxl_comm_pool_wjob_t;

static int cxl_comm_loan_valid(cxl_comm_pool_t *pool, const cxl_comm_loan_t *loan)
{
    return cxlpool_extent_check(pool->pool, loan->index, loan->gen,
                                loan->offset, loan->length) == CXLPOOL_OK;
}

/* One chunk (any thread): the extent is still the loan's, then the copy,
 * ordered before whatever this thread stores next. */
static int cxl_comm_pool_write_chunk(void *arg, size_t off, size_t len)
{
    cxl_comm_pool_wjob_t *wj = arg;

    if (!cxl_comm_loan_valid(wj->pool, wj->loan)) {
        return -1;
    }
    cxl_coh_copy(wj->pool->coh, wj->dst + off, wj->src + off, len);
    cxl_coh_fence(wj->pool->coh);
    return 0;
}

int cxl_comm_pool_write(cxl_comm_pool_t *pool, const cxl_comm_loan_t *loan,
                        uint64_t at, const void *src, size_t len)
{
    cxl_comm_pool_wjob_t wj;

    /* the loan came from the peer: nothing outside the extent it names
     * (allocated, this generation) is written */
    if (pool->pool == NULL) {
        return cxl_comm_error(UCS_ERR_NO_DEVICE, "the pool was detached at exit");
    }
    if ((at > loan->length) || (len > loan->length - at) ||
        !cxl_comm_loan_valid(pool, loan)) {
        return cxl_comm_error(UCS_ERR_INVALID_ADDR, "loan of %llu bytes at "
                              "%llu (extent %u gen %u): no room for %zu bytes "
                              "at %llu, or not an allocation of the pool",
                              (unsigned long long)loan->length,
                              (unsigned long long)loan->offset, loan->index,
                              loan->gen, len, (unsigned long long)at);
    }
    wj.pool = pool;
    wj.loan = loan;
    wj.dst  = pool->base + loan->offset + at;
    wj.src  = src;
    if (cxl_comm_copy_split(len, cxl_comm_pool_write_chunk, &wj) != CXL_COMM_OK) {
        return cxl_comm_error(UCS_ERR_INVALID_ADDR, "loan at %llu (extent %u "
                              "gen %u) was taken back during the copy",
                              (unsigned long long)loan->offset, loan->index,
                              loan->gen);
    }
    return CXL_COMM_OK;
}

void cxl_comm_pool_publish(cxl_comm_pool_t *pool)
{
    cxl_coh_fence(pool->coh);
}

void cxl_comm_pool_acquire(cxl_comm_pool_t *pool, const cxl_comm_loan_t *loan)
{
    if (pool->pool == NULL) {
        return;
    }
    cxl_coh_invalidate(pool->coh, pool->base + loan->offset, loan->length);
}
