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
    char                      path[];
} cxl_coll_pool_ent_t;

static pthread_mutex_t      cxl_coll_pools_lock = PTHREAD_MUTEX_INITIALIZER;
static cxl_coll_pool_ent_t *cxl_coll_pools;

cxl_coll_status_t cxl_coll_pool_get(const char *key, cxlpool_params_t *params,
                                    cxlpool_t **pool_p)
{
    pid_t pid = getpid();
    cxl_coll_pool_ent_t *ent;
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
    st = cxlpool_open(params, &ent->pool);
    if (st != CXLPOOL_OK) {
        free(ent);
        pthread_mutex_unlock(&cxl_coll_pools_lock);
        return cxl_coll_error(CXL_COLL_ERR_POOL, "%s", cxlpool_last_error());
    }
    ent->pid      = pid;
    ent->refcount = 1;
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
                cxlpool_close(ent->pool);
                free(ent);
            }
            break;
        }
    }
    pthread_mutex_unlock(&cxl_coll_pools_lock);
}
