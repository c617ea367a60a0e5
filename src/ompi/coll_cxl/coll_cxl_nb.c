/*
 * Non-blocking collectives (MPI_Ibarrier, MPI_Ibcast...): an Open MPI
 * request around a library request (cxl_coll_post), completed from Open
 * MPI's progress engine, so MPI_Wait, MPI_Test, MPI_Waitall and the
 * progress of any other MPI call finish it.
 *
 * Order.  The library completes a team's calls in the order they were
 * posted and runs a blocking call after every call posted before it.  It
 * holds CXL_COLL_MAX_REQS posted calls; a call made while that many are
 * under way waits here, unposted, and every later call of the module
 * waits behind it (m->nb_unposted), so the library still sees them in the
 * program's order.  A blocking call first posts the module's waiting
 * ones (mca_coll_cxl_nb_flush).
 *
 * Starting a call never waits for another rank (MPI: a non-blocking
 * collective's start is local): a module whose team is not made yet hands
 * the call to the previous module (coll_cxl_move.c).
 *
 * Locks (no-ops without threads).  nb_lock: the component's list of calls
 * under way, in posting order, and a call's end.  m->lock: the team, held
 * by a blocking call for its length and by a start; the progress pass only
 * tries it, and leaves the module to the blocking call that holds it
 * (that call drives the team's queue itself; the pass completes what it
 * finished later).  Order: nb_lock, then m->lock; never the other way
 * while waiting.
 */
#include "coll_cxl.h"

#include "opal/runtime/opal_progress.h"

#include <sched.h>

/* A non-blocking call of the component */
typedef struct mca_coll_cxl_request {
    mca_coll_cxl_req_t           base;
    struct mca_coll_cxl_request *next;  /* the component's list */
    cxl_coll_req_t              *lreq;  /* NULL: not posted yet */
    cxl_coll_args_t              args;
    mca_coll_cxl_stage_t         s, r;  /* staged buffers, if has_s/has_r */
    unsigned char                has_s, has_r;
} mca_coll_cxl_request_t;

static OBJ_CLASS_INSTANCE(mca_coll_cxl_request_t, ompi_coll_base_nbc_request_t,
                          NULL, NULL);

/* polls of a flush or drain before each sched_yield() */
#define COLL_CXL_NB_SPIN 1000

void mca_coll_cxl_req_release(mca_coll_cxl_req_t *b)
{
    OMPI_REQUEST_FINI(&b->super.super);
    OBJ_RELEASE(b);
}

/* MPI_Wait/MPI_Test after the end, or MPI_Request_free at any time */
static int coll_cxl_req_free(ompi_request_t **rptr)
{
    mca_coll_cxl_req_t *b = (mca_coll_cxl_req_t *)*rptr;
    int ended;

    OPAL_THREAD_LOCK(&mca_coll_cxl_component.nb_lock);
    ended = b->ended;
    if (!ended) {
        b->freed = 1; /* released when it ends */
    }
    OPAL_THREAD_UNLOCK(&mca_coll_cxl_component.nb_lock);
    if (ended) {
        mca_coll_cxl_req_release(b);
    }
    *rptr = MPI_REQUEST_NULL;
    return OMPI_SUCCESS;
}

/* MPI does not allow cancelling a collective: the call goes on */
static int coll_cxl_req_cancel(ompi_request_t *req, int flag)
{
    (void)req;
    (void)flag;
    return OMPI_SUCCESS;
}

void mca_coll_cxl_req_init(mca_coll_cxl_req_t *b, mca_coll_cxl_module_t *m)
{
    OMPI_REQUEST_INIT(&b->super.super, false);
    b->super.super.req_type            = OMPI_REQUEST_COLL;
    b->super.super.req_state           = OMPI_REQUEST_ACTIVE;
    b->super.super.req_status          = ompi_status_empty;
    b->super.super.req_free            = coll_cxl_req_free;
    b->super.super.req_cancel          = coll_cxl_req_cancel;
    b->super.super.req_mpi_object.comm = m->comm;
    b->m     = m;
    b->ended = 0;
    b->freed = 0;
}

void mca_coll_cxl_req_complete(mca_coll_cxl_req_t *b, int rc)
{
    b->m->nb_count--;
    b->super.super.req_status.MPI_ERROR = rc;
    b->ended = 1;
    /* completed even when freed: the completion callback releases what
     * the bindings retained; under nb_lock, a waiter in another thread
     * frees it only after */
    ompi_request_complete(&b->super.super, true);
    if (b->freed) {
        mca_coll_cxl_req_release(b);
    }
}

/* The end of a call (nb_lock held): staged buffers out, then complete */
static void coll_cxl_nb_end(mca_coll_cxl_request_t *q,
                            cxl_coll_status_t status)
{
    int rc = MPI_SUCCESS, rc2;

    if (status != CXL_COLL_OK) {
        rc = mca_coll_cxl_report(q->base.m, q->args.type, status);
    }
    if (q->has_s) {
        (void)mca_coll_cxl_stage_out(&q->s, 0);
    }
    if (q->has_r) {
        rc2 = mca_coll_cxl_stage_out(&q->r, rc == MPI_SUCCESS);
        if (rc == MPI_SUCCESS) {
            rc = rc2;
        }
    }
    mca_coll_cxl_req_complete(&q->base, rc);
}

/*
 * Post the call if it is not (a library request free), then test it; with
 * m->lock held.  A post that fails for any other reason than the library's
 * requests all in use, or a test that ends in an error, leaves the team
 * failed (the library's test did that already; a post's failure must be
 * made so, or the peers would wait for this rank's call).
 */
static cxl_coll_status_t coll_cxl_nb_step(mca_coll_cxl_request_t *q)
{
    mca_coll_cxl_module_t *m = q->base.m;
    cxl_coll_status_t status;

    if (q->lreq == NULL) {
        status = cxl_coll_post(m->team, &q->args, &q->lreq);
        if (status == CXL_COLL_ERR_BUSY) {
            return CXL_COLL_INPROGRESS;
        }
        m->nb_unposted--;
        if (status != CXL_COLL_OK) {
            q->lreq = NULL;
            cxl_coll_team_abort(m->team, status);
            return status;
        }
    }
    status = cxl_coll_test(q->lreq);
    if (status != CXL_COLL_INPROGRESS) {
        cxl_coll_req_free(q->lreq);
        q->lreq = NULL;
    }
    return status;
}

/*
 * The progress pass (opal_progress): every call under way, in posting
 * order; after one of a module that is still running, the module's later
 * calls are not looked at in this pass (the library finishes them in
 * order).  Returns the number of calls it completed.
 */
static int coll_cxl_nb_progress(void)
{
    mca_coll_cxl_component_t *c = &mca_coll_cxl_component;
    mca_coll_cxl_request_t *q, **link;
    cxl_coll_status_t status;
    mca_coll_cxl_module_t *m;
    unsigned pass;
    int events = 0;

    if (c->nb_active == 0) {
        return 0; /* the common case: a load and a branch */
    }
    if (OPAL_THREAD_TRYLOCK(&c->nb_lock)) {
        return 0; /* another thread's pass */
    }
    if (c->nb_busy) {
        /* a pass further up this thread's stack */
        OPAL_THREAD_UNLOCK(&c->nb_lock);
        return 0;
    }
    c->nb_busy = 1;
    pass       = ++c->nb_pass;
    link       = &c->nb_head;
    while ((q = *link) != NULL) {
        m = q->base.m;
        if ((m->nb_pass == pass) || OPAL_THREAD_TRYLOCK(&m->lock)) {
            m->nb_pass = pass;
            link       = &q->next;
            continue;
        }
        status = coll_cxl_nb_step(q);
        OPAL_THREAD_UNLOCK(&m->lock);
        if (status == CXL_COLL_INPROGRESS) {
            m->nb_pass = pass;
            link       = &q->next;
            continue;
        }
        *link = q->next;
        if (*link == NULL) {
            c->nb_tail = link;
        }
        c->nb_active--;
        coll_cxl_nb_end(q, status);
        ++events;
    }
    c->nb_busy = 0;
    OPAL_THREAD_UNLOCK(&c->nb_lock);
    return events;
}

/* a call that does not start: its staged buffers go (copies: the
 * caller's stage structs are its own) */
static void coll_cxl_nb_unstage(const mca_coll_cxl_stage_t *s,
                                const mca_coll_cxl_stage_t *r)
{
    mca_coll_cxl_stage_t tmp;

    if (s != NULL) {
        tmp = *s;
        (void)mca_coll_cxl_stage_out(&tmp, 0);
    }
    if (r != NULL) {
        tmp = *r;
        (void)mca_coll_cxl_stage_out(&tmp, 0);
    }
}

/* with opal_progress from the first non-blocking call on (a progress
 * function costs every progress call a call) */
static int coll_cxl_nb_register(void)
{
    mca_coll_cxl_component_t *c = &mca_coll_cxl_component;
    int rc = OMPI_SUCCESS;

    OPAL_THREAD_LOCK(&c->nb_lock);
    if (!c->nb_registered) {
        rc = opal_progress_register(coll_cxl_nb_progress);
        c->nb_registered = (rc == OPAL_SUCCESS);
    }
    OPAL_THREAD_UNLOCK(&c->nb_lock);
    return rc;
}

int mca_coll_cxl_nb_post(mca_coll_cxl_module_t *m,
                         const cxl_coll_args_t *args,
                         const mca_coll_cxl_stage_t *s,
                         const mca_coll_cxl_stage_t *r,
                         ompi_request_t **request)
{
    mca_coll_cxl_component_t *c = &mca_coll_cxl_component;
    cxl_coll_status_t status    = CXL_COLL_OK;
    cxl_coll_status_t kick      = CXL_COLL_INPROGRESS;
    mca_coll_cxl_request_t *q;

    q = (OPAL_LIKELY(c->nb_registered) ||
         (coll_cxl_nb_register() == OMPI_SUCCESS)) ?
        OBJ_NEW(mca_coll_cxl_request_t) : NULL;
    if (q == NULL) {
        /* the call is not made here: the peers must not wait for it */
        coll_cxl_nb_unstage(s, r);
        OPAL_THREAD_LOCK(&m->lock);
        cxl_coll_team_abort(m->team, CXL_COLL_ERR_NO_MEMORY);
        OPAL_THREAD_UNLOCK(&m->lock);
        return mca_coll_cxl_report(m, args->type, CXL_COLL_ERR_NO_MEMORY);
    }
    mca_coll_cxl_req_init(&q->base, m);
    q->next  = NULL;
    q->lreq  = NULL;
    q->args  = *args;
    q->has_s = (s != NULL);
    q->has_r = (r != NULL);
    if (s != NULL) {
        q->s = *s;
    }
    if (r != NULL) {
        q->r = *r;
    }

    COLL_CXL_VERBOSE(20, "coll:cxl: non-blocking %s on %s (cid %u): "
                     "library, %zu x %s", mca_coll_cxl_type_name(args->type),
                     m->comm->c_name, (unsigned)m->comm->c_contextid,
                     args->count, cxl_coll_dtype_name(args->dtype));
    OPAL_THREAD_LOCK(&m->lock);
    if (m->nb_unposted == 0) {
        status = cxl_coll_post(m->team, &q->args, &q->lreq);
        if (status == CXL_COLL_OK) {
            /* one pass now: this rank's part of the first step goes out
             * before the caller computes, so the peers can go on without
             * it; a call that ends there (a bcast root's publication)
             * ends here, and MPI_Wait finds it complete */
            kick = cxl_coll_test(q->lreq);
            if (kick != CXL_COLL_INPROGRESS) {
                cxl_coll_req_free(q->lreq);
                q->lreq = NULL;
            }
        } else if (status == CXL_COLL_ERR_BUSY) {
            q->lreq = NULL; /* posted by a progress pass */
            status  = CXL_COLL_OK;
            m->nb_unposted++;
        } else {
            /* the arguments' check, or a failed team: the peers learn it
             * from the abort line, as for a blocking call */
            cxl_coll_team_abort(m->team, status);
        }
    } else {
        m->nb_unposted++; /* behind the module's unposted calls */
    }
    OPAL_THREAD_UNLOCK(&m->lock);
    ++c->n_calls;
    ++c->n_nb_calls;
    if (status != CXL_COLL_OK) {
        q->base.ended = 1;
        mca_coll_cxl_req_release(&q->base);
        coll_cxl_nb_unstage(s, r);
        return mca_coll_cxl_report(m, args->type, status);
    }

    OPAL_THREAD_LOCK(&c->nb_lock);
    m->nb_count++;
    if (kick != CXL_COLL_INPROGRESS) {
        coll_cxl_nb_end(q, kick); /* its outcome is MPI_Wait's to see */
    } else {
        *c->nb_tail = q;
        c->nb_tail  = &q->next;
        c->nb_active++;
    }
    OPAL_THREAD_UNLOCK(&c->nb_lock);
    *request = &q->base.super.super;
    return OMPI_SUCCESS;
}

void mca_coll_cxl_progress_while(mca_coll_cxl_module_t *m,
                                 int (*cond)(const mca_coll_cxl_module_t *m))
{
    unsigned spins = 0;

    while (cond(m)) {
        opal_progress(); /* coll_cxl_nb_progress among the others */
        if (++spins >= COLL_CXL_NB_SPIN) {
            sched_yield(); /* more ranks than cores */
        }
    }
}

static int coll_cxl_nb_has_unposted(const mca_coll_cxl_module_t *m)
{
    return m->nb_unposted != 0;
}

static int coll_cxl_nb_has_any(const mca_coll_cxl_module_t *m)
{
    return m->nb_count != 0;
}

void mca_coll_cxl_nb_flush(mca_coll_cxl_module_t *m)
{
    mca_coll_cxl_progress_while(m, coll_cxl_nb_has_unposted);
}

void mca_coll_cxl_nb_drain(mca_coll_cxl_module_t *m)
{
    mca_coll_cxl_progress_while(m, coll_cxl_nb_has_any);
}

void mca_coll_cxl_nb_fini(void)
{
    mca_coll_cxl_component_t *c = &mca_coll_cxl_component;

    if (c->nb_registered) {
        opal_progress_unregister(coll_cxl_nb_progress);
        c->nb_registered = 0;
    }
}
