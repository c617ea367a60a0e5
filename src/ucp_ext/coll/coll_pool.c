/*
 * The pools of the process, shared by its teams.  Each cxlpool_open() maps
 * the whole pool and takes an attachment slot (and, on the emulator, a
 * host of its own), so a program that creates a team per communicator
 * (MPI_Comm_dup, MPI_Comm_split) must not open the pool once per team:
 * teams on the same pool path share one handle, counted.  Keyed by the
 * path as given: "emulate-nc:PATH" (an emulated host's view) and "PATH"
 * (a direct mapping) are different attachments of one pool.
 */
#include "coll_int.h"
#include "../common/cxl_pool_pick.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct cxl_coll_pool_ent {
    struct cxl_coll_pool_ent *next;
    cxlpool_t                *pool;
    pid_t                     pid;      /* the opener: a forked child must
                                           not use its parent's attachment */
    unsigned                  refcount;
    int                       has_part; /* an ended team's partition: */
    uint64_t                  part_len; /* its region size */
    cxlpool_extent_t          part;
    uint64_t                  part_use; /* teams it served */
    char                      path[];
} cxl_coll_pool_ent_t;

static pthread_mutex_t      cxl_coll_pools_lock = PTHREAD_MUTEX_INITIALIZER;
static cxl_coll_pool_ent_t *cxl_coll_pools;

cxl_coll_status_t cxl_coll_pool_get(const char *key, int create,
                                    cxlpool_t **pool_p)
{
    pid_t pid = getpid();
    cxl_coll_pool_ent_t *ent;
    cxlpool_params_t params;
    cxlpool_status_t st;

    pthread_mutex_lock(&cxl_coll_pools_lock);
    for (ent = cxl_coll_pools; ent != NULL; ent = ent->next) {
        if ((ent->pid == pid) && !strcmp(ent->path, key)) {
            ent->refcount++;
            *pool_p = ent->pool;
            pthread_mutex_unlock(&cxl_coll_pools_lock);
            return CXL_COLL_OK;
        }
    }
    ent = malloc(sizeof(*ent) + strlen(key) + 1);
    if (ent == NULL) {
        pthread_mutex_unlock(&cxl_coll_pools_lock);
        return cxl_coll_error(CXL_COLL_ERR_NO_MEMORY, "out of memory");
    }
    /* only for an open: the pick probes the file (its page size), which
     * was most of a later team's creation */
    cxl_pool_pick_params(key, create, &params);
    st = cxlpool_open(&params, &ent->pool);
    if (st != CXLPOOL_OK) {
        free(ent);
        pthread_mutex_unlock(&cxl_coll_pools_lock);
        return cxl_coll_error(CXL_COLL_ERR_POOL, "%s", cxlpool_last_error());
    }
    ent->pid      = pid;
    ent->refcount = 1;
    ent->has_part = 0;
    strcpy(ent->path, key);
    ent->next      = cxl_coll_pools;
    cxl_coll_pools = ent;
    *pool_p        = ent->pool;
    pthread_mutex_unlock(&cxl_coll_pools_lock);
    return CXL_COLL_OK;
}

void cxl_coll_pool_put(cxlpool_t *pool)
{
    cxl_coll_pool_ent_t **pp, *ent;

    pthread_mutex_lock(&cxl_coll_pools_lock);
    for (pp = &cxl_coll_pools; (ent = *pp) != NULL; pp = &ent->next) {
        if (ent->pool == pool) {
            if (--ent->refcount == 0) {
                *pp = ent->next;
                if (ent->has_part) {
                    (void)cxlpool_free(ent->pool, ent->part.offset);
                }
                cxlpool_close(ent->pool);
                free(ent);
            }
            break;
        }
    }
    pthread_mutex_unlock(&cxl_coll_pools_lock);
}

/* the entry of an open handle (cxl_coll_pools_lock held), NULL if none */
static cxl_coll_pool_ent_t *cxl_coll_pool_ent(const cxlpool_t *pool)
{
    cxl_coll_pool_ent_t *ent;

    for (ent = cxl_coll_pools; ent != NULL; ent = ent->next) {
        if (ent->pool == pool) {
            break;
        }
    }
    return ent;
}

/*
 * Partitions of ended teams.  A team's partition costs the pool's
 * allocator: its metadata lock, which every rank of a new team takes at
 * the same moment, and two scans of the extent table (the name, the free
 * ranges) under it, ~80 % of a team's creation.  A program that makes and
 * frees communicators (MPI_Comm_dup / MPI_Comm_free in a loop, a library
 * that duplicates the caller's communicator per call) pays it each time.
 * So the process keeps the partition of its last ended team on each pool,
 * one, for its next team of the same region size.  Only a team whose
 * destroy exchange passed gives it back: no peer reads it again.  A kept
 * partition stays the process's extent, named as before, reclaimed with
 * the attachment if the process dies; the pool gets it back when the
 * process's last team on it ends (cxl_coll_pool_put).  Its generation
 * does not change, so the next team mixes the number of teams it served
 * into its tag instead (coll_team.c, cxl_coll_team_tag).
 */
int cxl_coll_pool_part_take(cxlpool_t *pool, uint64_t length,
                            cxlpool_extent_t *ext, uint64_t *use)
{
    cxl_coll_pool_ent_t *ent;
    int taken = 0;

    pthread_mutex_lock(&cxl_coll_pools_lock);
    ent = cxl_coll_pool_ent(pool);
    if ((ent != NULL) && ent->has_part && (ent->part_len == length)) {
        *ext          = ent->part;
        *use          = ent->part_use + 1;
        ent->has_part = 0;
        taken         = 1;
    }
    pthread_mutex_unlock(&cxl_coll_pools_lock);
    return taken;
}

void cxl_coll_pool_part_keep(cxlpool_t *pool, uint64_t length,
                             const cxlpool_extent_t *ext, uint64_t use)
{
    cxl_coll_pool_ent_t *ent;
    int kept = 0;

    pthread_mutex_lock(&cxl_coll_pools_lock);
    ent = cxl_coll_pool_ent(pool);
    if ((ent != NULL) && !ent->has_part) {
        ent->part     = *ext;
        ent->part_len = length;
        ent->part_use = use;
        ent->has_part = 1;
        kept          = 1;
    }
    pthread_mutex_unlock(&cxl_coll_pools_lock);
    if (!kept) {
        (void)cxlpool_free(pool, ext->offset);
    }
}

/*
 * The pool of a team or of cxl_coll_pool_mem_alloc(): the caller's,
 * CXL_COLL_POOL, else the transport's (cxl_pool_pick: the first of
 * UCX_CXL_POOL unless 'auto', else the first devdax device that holds a
 * pool, else the per-user emulated default), so that the team is where the
 * transport's peers are and buffers in the transport's pool are read in
 * place.  *create: it is that default, which
 * the first user creates, as the transport does.
 */
static cxl_coll_status_t cxl_coll_pool_path(const char *given,
                                            const cxl_coll_config_t *cfg,
                                            char *buf, size_t len,
                                            const char **path, int *create)
{
    cxl_pool_pick_src_t src;

    *create = 0;
    if ((given != NULL) && (given[0] != '\0')) {
        *path = given;
        return CXL_COLL_OK;
    }
    if (cfg->pool[0] != '\0') {
        *path = cfg->pool;
        return CXL_COLL_OK;
    }
    if (cxl_pool_pick(buf, len, &src) != 0) {
        return cxl_coll_error(CXL_COLL_ERR_POOL, "the first pool of "
                              "UCX_CXL_POOL is longer than %zu characters",
                              len - 1);
    }
    *path   = buf;
    *create = (src == CXL_POOL_PICK_DEFAULT);
    return CXL_COLL_OK;
}

cxl_coll_status_t cxl_coll_pool_pick_get(const char *given,
                                         const cxl_coll_config_t *cfg,
                                         char *buf, size_t len,
                                         const char **path, cxlpool_t **pool_p)
{
    cxl_coll_status_t status;
    int create;

    status = cxl_coll_pool_path(given, cfg, buf, len, path, &create);
    if (status != CXL_COLL_OK) {
        return status;
    }
    return cxl_coll_pool_get(*path, create, pool_p);
}
