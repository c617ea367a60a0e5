/*
 * coll/cxl module: which communicators it takes, the library team of each
 * and the previous module's functions it falls back on.
 *
 * Every rank of a communicator must decide alike, or some would wait in
 * the library for ranks that went to the previous module.  comm_query
 * decides from what all ranks share (size, inter or intra, the MCA
 * parameters); its first collective then creates the team, and
 * cxl_coll_team_create() fails on every rank alike (members on different
 * pools: CXL_COLL_ERR_NOT_SAME_POOL), so a failure declines the
 * communicator everywhere.  The team is made at the communicator's first
 * collective, not in enable (see there; mca_coll_cxl_team_lazy): every
 * rank reaches that call in the same order, and a failure hands it and all
 * later ones to the previous module on every rank.  A blocking first call
 * makes it at once (cxl_coll_team_create); a non-blocking one starts it
 * (mca_coll_cxl_team_start) and the progress engine ends it, its calls
 * held meanwhile (coll_cxl_hold.c), so that starting stays local.
 *
 * The team is destroyed (collectively, over the previous allgather) from
 * the delete callback of a communicator attribute: MPI_Comm_free and
 * MPI_Finalize delete attributes while the communicator still works.  Its
 * destructor would be too late: point-to-point requests retain and release
 * the communicator, and a release from inside its destructor runs the
 * destructor again.
 */
#include "coll_cxl.h"

#include "ompi/attribute/attribute.h"
#include "opal/util/output.h"

#include <limits.h>
#include <pthread.h>
#include <string.h>

static void coll_cxl_module_construct(mca_coll_cxl_module_t *m)
{
    m->comm = NULL;
    m->team = NULL;
    m->lazy = 0;
    memset(&m->prev, 0, sizeof(m->prev));
    OBJ_CONSTRUCT(&m->lock, opal_mutex_t);
    m->nb_unposted = 0;
    m->nb_count    = 0;
    m->nb_pass     = 0;
    m->creq        = NULL;
    m->n_held      = 0;
    m->hold_pass   = 0;
}

#define COLL_CXL_PREV_RELEASE(_m, _f) \
    do { \
        if ((_m)->prev._f##_module != NULL) { \
            OBJ_RELEASE((_m)->prev._f##_module); \
            (_m)->prev._f##_module = NULL; \
        } \
    } while (0)

static void coll_cxl_module_destruct(mca_coll_cxl_module_t *m)
{
    /* the attribute's delete callback holds a reference: the team is gone
     * unless the attribute could not be set (then it stays until exit:
     * nothing collective can run on a communicator being destructed) */
    if (m->team != NULL) {
        opal_output(0, "coll:cxl: a team outlived its communicator; its pool "
                    "memory is released when the process ends");
    }
    COLL_CXL_PREV_RELEASE(m, barrier);
    COLL_CXL_PREV_RELEASE(m, bcast);
    COLL_CXL_PREV_RELEASE(m, reduce);
    COLL_CXL_PREV_RELEASE(m, allreduce);
    COLL_CXL_PREV_RELEASE(m, gather);
    COLL_CXL_PREV_RELEASE(m, scatter);
    COLL_CXL_PREV_RELEASE(m, allgather);
    COLL_CXL_PREV_RELEASE(m, reduce_scatter_block);
    COLL_CXL_PREV_RELEASE(m, alltoall);
    COLL_CXL_PREV_RELEASE(m, ibarrier);
    COLL_CXL_PREV_RELEASE(m, ibcast);
    COLL_CXL_PREV_RELEASE(m, ireduce);
    COLL_CXL_PREV_RELEASE(m, iallreduce);
    COLL_CXL_PREV_RELEASE(m, igather);
    COLL_CXL_PREV_RELEASE(m, iscatter);
    COLL_CXL_PREV_RELEASE(m, iallgather);
    COLL_CXL_PREV_RELEASE(m, ireduce_scatter_block);
    COLL_CXL_PREV_RELEASE(m, ialltoall);
    OBJ_DESTRUCT(&m->lock);
}

OBJ_CLASS_INSTANCE(mca_coll_cxl_module_t, mca_coll_base_module_t,
                   coll_cxl_module_construct, coll_cxl_module_destruct);

/* Delete callback of the communicator's coll/cxl attribute: called on
 * every rank by MPI_Comm_free / MPI_Finalize while the communicator works.
 * Calls the previous allgather makes meanwhile find m->team NULL and fall
 * back instead of entering the team being destroyed. */
static int coll_cxl_attr_delete(MPI_Comm comm, int keyval, void *attr,
                                void *extra)
{
    mca_coll_cxl_module_t *m = attr;
    cxl_coll_team_t *team = m->team;

    (void)comm;
    (void)keyval;
    (void)extra;
    m->lazy = 0; /* nothing collective runs on it from here on */
    /* its non-blocking calls end first, held ones and a team creation
     * under way included (MPI: pending operations on a freed communicator
     * complete normally) */
    mca_coll_cxl_nb_drain(m);
    team = m->team;
    if (team != NULL) {
        m->team = NULL;
        cxl_coll_team_destroy(team);
        __atomic_fetch_sub(&mca_coll_cxl_component.n_teams, 1,
                           __ATOMIC_RELAXED);
    }
    OBJ_RELEASE(m);
    return MPI_SUCCESS;
}

/* MPI_Comm_dup does not copy the attribute */
static int coll_cxl_attr_copy(MPI_Comm oldcomm, int keyval, void *extra,
                              void *attr_in, void *attr_out, int *flag,
                              MPI_Comm newcomm)
{
    (void)oldcomm;
    (void)keyval;
    (void)extra;
    (void)attr_in;
    (void)attr_out;
    (void)newcomm;
    *flag = 0;
    return MPI_SUCCESS;
}

static int coll_cxl_keyval = MPI_KEYVAL_INVALID;
/* teams are made at first collectives, which threads may run at once */
static pthread_mutex_t coll_cxl_keyval_lock = PTHREAD_MUTEX_INITIALIZER;

/* ties the team's life to the communicator's attributes */
static int coll_cxl_attach(mca_coll_cxl_module_t *m, ompi_communicator_t *comm)
{
    ompi_attribute_fn_ptr_union_t copy_fn, del_fn;
    int rc;

    pthread_mutex_lock(&coll_cxl_keyval_lock);
    if (coll_cxl_keyval == MPI_KEYVAL_INVALID) {
        /* not copied by MPI_Comm_dup: the new communicator gets a
         * selection, and a team, of its own */
        copy_fn.attr_communicator_copy_fn = coll_cxl_attr_copy;
        del_fn.attr_communicator_delete_fn = coll_cxl_attr_delete;
        rc = ompi_attr_create_keyval(COMM_ATTR, copy_fn, del_fn,
                                     &coll_cxl_keyval, NULL, 0, NULL);
        if (rc != OMPI_SUCCESS) {
            coll_cxl_keyval = MPI_KEYVAL_INVALID;
            pthread_mutex_unlock(&coll_cxl_keyval_lock);
            return rc;
        }
    }
    pthread_mutex_unlock(&coll_cxl_keyval_lock);
    OBJ_RETAIN(m);
    rc = ompi_attr_set_c(COMM_ATTR, comm, &comm->c_keyhash, coll_cxl_keyval,
                         m, false);
    if (rc != OMPI_SUCCESS) {
        OBJ_RELEASE(m);
    }
    return rc;
}

static void coll_cxl_decline(ompi_communicator_t *comm, const char *why)
{
    COLL_CXL_VERBOSE(1, "coll:cxl: comm %s (cid %u, rank %d of %d): "
                     "declined: %s", comm->c_name, (unsigned)comm->c_contextid,
                     ompi_comm_rank(comm), ompi_comm_size(comm), why);
}

#define COLL_CXL_SAVE(_m, _comm, _f) \
    do { \
        (_m)->prev._f         = (_comm)->c_coll->coll_##_f; \
        (_m)->prev._f##_module = (_comm)->c_coll->coll_##_f##_module; \
        if ((_m)->prev._f##_module != NULL) { \
            OBJ_RETAIN((_m)->prev._f##_module); \
        } \
    } while (0)

#define COLL_CXL_KEEP_NB(_m, _f) \
    do { \
        if ((_m)->prev._f == NULL) { \
            (_m)->super.coll_##_f = NULL; \
        } \
    } while (0)

static void coll_cxl_team_params(mca_coll_cxl_module_t *m,
                                 cxl_coll_team_params_t *params)
{
    mca_coll_cxl_component_t *c = &mca_coll_cxl_component;

    cxl_coll_team_params_init(params);
    params->rank          = ompi_comm_rank(m->comm);
    params->size          = ompi_comm_size(m->comm);
    params->oob_allgather = mca_coll_cxl_oob_allgather;
    params->oob_arg       = m;
    if ((c->pool != NULL) && (c->pool[0] != '\0')) {
        params->pool_path = c->pool;
    }
    if (c->region_size != 0) {
        params->region_size = c->region_size;
    }
    /* how the library's blocking calls wait (coll_cxl_run.c) */
    params->progress          = mca_coll_cxl_progress;
    params->progress_interval = (unsigned)c->progress_interval;
    params->spin              = c->spin_count;
}

/* The end of a team creation, alike on every rank: accepted or declined */
static int coll_cxl_team_done(mca_coll_cxl_module_t *m,
                              cxl_coll_status_t status, cxl_coll_team_t *team)
{
    mca_coll_cxl_component_t *c = &mca_coll_cxl_component;
    ompi_communicator_t *comm   = m->comm;
    char why[320];

    if (status != CXL_COLL_OK) {
        snprintf(why, sizeof(why), "team creation failed: %s",
                 mca_coll_cxl_error_text(status));
        coll_cxl_decline(comm, why);
        return OMPI_ERROR;
    }
    m->team = team;
    /* first collectives of two communicators may run in two threads */
    __atomic_fetch_add(&c->n_teams, 1, __ATOMIC_RELAXED);
    COLL_CXL_VERBOSE(1, "coll:cxl: comm %s (cid %u, rank %d of %d): "
                     "accepted: library team of %d ranks, priority %d, "
                     "collectives %s", comm->c_name,
                     (unsigned)comm->c_contextid, ompi_comm_rank(comm),
                     ompi_comm_size(comm), cxl_coll_team_size(team),
                     c->priority, c->collectives);
    return OMPI_SUCCESS;
}

static void coll_cxl_attach_or_say(mca_coll_cxl_module_t *m)
{
    if (coll_cxl_attach(m, m->comm) != OMPI_SUCCESS) {
        /* a local failure (memory): the team stays usable, only its pool
         * memory is not given back before the process ends */
        opal_output(0, "coll:cxl: comm %s (cid %u): could not set the "
                    "attribute that frees the team", m->comm->c_name,
                    (unsigned)m->comm->c_contextid);
    }
}

/* The library team of the module's communicator (collective) */
static int coll_cxl_team_make(mca_coll_cxl_module_t *m)
{
    cxl_coll_team_params_t params;
    cxl_coll_team_t *team = NULL;
    cxl_coll_status_t status;

    coll_cxl_team_params(m, &params);
    status = cxl_coll_team_create(&params, &team);
    if (coll_cxl_team_done(m, status, team) != OMPI_SUCCESS) {
        return OMPI_ERROR;
    }
    coll_cxl_attach_or_say(m);
    return OMPI_SUCCESS;
}

int mca_coll_cxl_team_start(mca_coll_cxl_module_t *m)
{
    cxl_coll_team_params_t params;
    cxl_coll_status_t status;

    m->lazy = 0; /* once, as for a blocking call */
    coll_cxl_team_params(m, &params);
    params.oob_iallgather = mca_coll_cxl_oob_iallgather;
    params.oob_test       = mca_coll_cxl_oob_test;
    status = cxl_coll_team_create_start(&params, &m->creq);
    if (status != CXL_COLL_OK) {
        m->creq = NULL;
        return coll_cxl_team_done(m, status, NULL);
    }
    /* the attribute now: a communicator freed before the creation ends
     * waits for it (and its held calls) in the delete callback */
    coll_cxl_attach_or_say(m);
    COLL_CXL_VERBOSE(1, "coll:cxl: comm %s (cid %u, rank %d of %d): team "
                     "started at a non-blocking collective (made without "
                     "waiting; its calls are held until then)",
                     m->comm->c_name, (unsigned)m->comm->c_contextid,
                     ompi_comm_rank(m->comm), ompi_comm_size(m->comm));
    return OMPI_SUCCESS;
}

int mca_coll_cxl_team_test(mca_coll_cxl_module_t *m)
{
    cxl_coll_team_t *team = NULL;
    cxl_coll_status_t status;

    if (m->creq == NULL) {
        return 1;
    }
    status = cxl_coll_team_create_test(m->creq, &team);
    if (status == CXL_COLL_INPROGRESS) {
        return 0;
    }
    m->creq = NULL; /* freed by the test */
    if (coll_cxl_team_done(m, status, team) == OMPI_SUCCESS) {
        ++mca_coll_cxl_component.n_nb_teams;
    }
    return 1;
}

int mca_coll_cxl_team_lazy(mca_coll_cxl_module_t *m)
{
    if (!m->lazy) {
        return 0;
    }
    /* once: a failure declines the communicator on every rank alike, and
     * its calls go to the previous module from now on */
    m->lazy = 0;
    return coll_cxl_team_make(m) == OMPI_SUCCESS;
}

int mca_coll_cxl_takes(mca_coll_cxl_module_t *m, mca_coll_cxl_coll_t coll,
                       ompi_request_t **request)
{
    if (request == NULL) {
        if (OPAL_UNLIKELY(mca_coll_cxl_hold_pending(m))) {
            /* a team being made at a non-blocking call: it ends, and the
             * calls held for it start, before this one */
            mca_coll_cxl_hold_settle(m);
        }
        if (mca_coll_cxl_team_ready(m)) {
            return 1;
        }
        mca_coll_cxl_count_fallback(m, coll, "no team");
        return 0;
    }
    if (m->team != NULL) {
        return 1;
    }
    mca_coll_cxl_count_fallback(m, coll, m->lazy ?
                                "no team yet (coll_cxl_nb_team is false: "
                                "it is made at the first blocking "
                                "collective)" : "no team");
    return 0;
}

static int coll_cxl_module_enable(mca_coll_base_module_t *module,
                                  struct ompi_communicator_t *comm)
{
    mca_coll_cxl_module_t *m = (mca_coll_cxl_module_t *)module;

    m->comm = comm;
    /* modules are enabled from the lowest priority up: what the
     * communicator holds now is what this module replaces */
    COLL_CXL_SAVE(m, comm, barrier);
    COLL_CXL_SAVE(m, comm, bcast);
    COLL_CXL_SAVE(m, comm, reduce);
    COLL_CXL_SAVE(m, comm, allreduce);
    COLL_CXL_SAVE(m, comm, gather);
    COLL_CXL_SAVE(m, comm, scatter);
    COLL_CXL_SAVE(m, comm, allgather);
    COLL_CXL_SAVE(m, comm, reduce_scatter_block);
    COLL_CXL_SAVE(m, comm, alltoall);
    COLL_CXL_SAVE(m, comm, ibarrier);
    COLL_CXL_SAVE(m, comm, ibcast);
    COLL_CXL_SAVE(m, comm, ireduce);
    COLL_CXL_SAVE(m, comm, iallreduce);
    COLL_CXL_SAVE(m, comm, igather);
    COLL_CXL_SAVE(m, comm, iscatter);
    COLL_CXL_SAVE(m, comm, iallgather);
    COLL_CXL_SAVE(m, comm, ireduce_scatter_block);
    COLL_CXL_SAVE(m, comm, ialltoall);
    /* a non-blocking form without one below to fall back on stays with
     * whoever has it (the selection copies the module's functions after
     * enable) */
    COLL_CXL_KEEP_NB(m, ibarrier);
    COLL_CXL_KEEP_NB(m, ibcast);
    COLL_CXL_KEEP_NB(m, ireduce);
    COLL_CXL_KEEP_NB(m, iallreduce);
    COLL_CXL_KEEP_NB(m, igather);
    COLL_CXL_KEEP_NB(m, iscatter);
    COLL_CXL_KEEP_NB(m, iallgather);
    COLL_CXL_KEEP_NB(m, ireduce_scatter_block);
    COLL_CXL_KEEP_NB(m, ialltoall);
    if ((m->prev.barrier == NULL) || (m->prev.bcast == NULL) ||
        (m->prev.reduce == NULL) || (m->prev.allreduce == NULL) ||
        (m->prev.gather == NULL) || (m->prev.scatter == NULL) ||
        (m->prev.allgather == NULL) || (m->prev.reduce_scatter_block == NULL) ||
        (m->prev.alltoall == NULL)) {
        /* the same lower modules run on every rank: all decline */
        coll_cxl_decline(comm, "no lower-priority module to fall back on");
        return OMPI_ERROR;
    }

    /*
     * Open MPI enables the modules of a communicator made after MPI_Init
     * (MPI_Comm_dup, _split...) from inside its progress engine.  With
     * threads (above MPI_THREAD_SINGLE, or a progress thread) its waits
     * there block on a condition only the progressing thread would
     * signal, and the allgather team creation needs hung every such
     * communicator.  So the first collective on the communicator makes
     * the team, on every rank at the same call, whatever the thread level
     * of each.
     */
    m->lazy = 1;
    COLL_CXL_VERBOSE(1, "coll:cxl: comm %s (cid %u, rank %d of %d): team at "
                     "the first collective", comm->c_name,
                     (unsigned)comm->c_contextid, ompi_comm_rank(comm),
                     ompi_comm_size(comm));
    return OMPI_SUCCESS;
}

int mca_coll_cxl_init_query(bool enable_progress_threads,
                            bool enable_mpi_threads)
{
    /* a team serves one thread at a time; MPI allows one collective per
     * communicator at a time, so MPI_THREAD_MULTIPLE is fine too */
    (void)enable_progress_threads;
    (void)enable_mpi_threads;
    return OMPI_SUCCESS;
}

mca_coll_base_module_t *
mca_coll_cxl_comm_query(struct ompi_communicator_t *comm, int *priority)
{
    mca_coll_cxl_component_t *c = &mca_coll_cxl_component;
    mca_coll_cxl_module_t *m;
    mca_coll_base_module_t *b;
    char why[128];

    if (!c->enable) {
        coll_cxl_decline(comm, "coll_cxl_enable is false");
        return NULL;
    }
    if (OMPI_COMM_IS_INTER(comm)) {
        coll_cxl_decline(comm, "intercommunicator");
        return NULL;
    }
    if (ompi_comm_size(comm) < c->min_ranks) {
        snprintf(why, sizeof(why), "%d rank(s), fewer than coll_cxl_min_ranks=%d",
                 ompi_comm_size(comm), c->min_ranks);
        coll_cxl_decline(comm, why);
        return NULL;
    }
    if (c->colls == 0) {
        coll_cxl_decline(comm, "coll_cxl_collectives names no collective");
        return NULL;
    }
    if (c->priority < 0) {
        coll_cxl_decline(comm, "negative coll_cxl_priority");
        return NULL;
    }

    m = OBJ_NEW(mca_coll_cxl_module_t);
    if (m == NULL) {
        return NULL;
    }
    b = &m->super;
    b->coll_module_enable  = coll_cxl_module_enable;
#define COLL_CXL_TAKE(_bit, _f) \
    if (c->colls & (1u << (_bit))) { \
        b->coll_##_f = mca_coll_cxl_##_f; \
    }
    COLL_CXL_TAKE(COLL_CXL_BARRIER, barrier);
    COLL_CXL_TAKE(COLL_CXL_BCAST, bcast);
    COLL_CXL_TAKE(COLL_CXL_REDUCE, reduce);
    COLL_CXL_TAKE(COLL_CXL_ALLREDUCE, allreduce);
    COLL_CXL_TAKE(COLL_CXL_GATHER, gather);
    COLL_CXL_TAKE(COLL_CXL_SCATTER, scatter);
    COLL_CXL_TAKE(COLL_CXL_ALLGATHER, allgather);
    COLL_CXL_TAKE(COLL_CXL_REDUCE_SCATTER_BLOCK, reduce_scatter_block);
    COLL_CXL_TAKE(COLL_CXL_ALLTOALL, alltoall);
    if (c->nonblocking) {
        COLL_CXL_TAKE(COLL_CXL_BARRIER, ibarrier);
        COLL_CXL_TAKE(COLL_CXL_BCAST, ibcast);
        COLL_CXL_TAKE(COLL_CXL_REDUCE, ireduce);
        COLL_CXL_TAKE(COLL_CXL_ALLREDUCE, iallreduce);
        COLL_CXL_TAKE(COLL_CXL_GATHER, igather);
        COLL_CXL_TAKE(COLL_CXL_SCATTER, iscatter);
        COLL_CXL_TAKE(COLL_CXL_ALLGATHER, iallgather);
        COLL_CXL_TAKE(COLL_CXL_REDUCE_SCATTER_BLOCK, ireduce_scatter_block);
        COLL_CXL_TAKE(COLL_CXL_ALLTOALL, ialltoall);
    }
#undef COLL_CXL_TAKE

    *priority = c->priority;
    return b;
}
