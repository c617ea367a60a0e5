/*
 * Non-blocking calls made while their communicator's team is being made.
 *
 * A non-blocking collective's start must not wait for the other ranks
 * (MPI), and making a team is an exchange with all of them.  So the first
 * non-blocking call of a communicator without a team starts the creation
 * (mca_coll_cxl_team_start: the local part, and the first out-of-band
 * exchange over point-to-point messages), and that call and every later
 * non-blocking call of the communicator are held here: the program gets a
 * request at once, and Open MPI's progress engine ends the creation and
 * then starts the held calls in the order they were made, each as if it
 * were made now: in the library if the team was made, else in the
 * previous module (declined, as after a failed blocking creation).
 *
 * Why every non-blocking call waits, those the library would not take
 * too: the previous module (libnbc) pairs the ranks' calls by the order
 * in which each rank starts them.  A held call may only start once this
 * rank's creation ended, at a different moment on every rank, so a call
 * started directly meanwhile would overtake it on some ranks and not on
 * others.  Blocking calls wait for the held ones to start first
 * (mca_coll_cxl_hold_settle, from mca_coll_cxl_takes).
 *
 * A held call's request completes when the call it became completes.
 * Locks (no-ops without threads): hold_lock guards the list, the modules'
 * creq and n_held; taken before nb_lock, never after it.
 */
#include "coll_cxl.h"

#include "opal/runtime/opal_progress.h"

typedef struct mca_coll_cxl_held {
    mca_coll_cxl_req_t        base;
    struct mca_coll_cxl_held *next;
    mca_coll_cxl_call_t       call;
    ompi_request_t           *inner;   /* the started call's request */
    unsigned char             started;
} mca_coll_cxl_held_t;

static OBJ_CLASS_INSTANCE(mca_coll_cxl_held_t, ompi_coll_base_nbc_request_t,
                          NULL, NULL);

__thread int mca_coll_cxl_replaying;

/* The call, made now through the module's own entry point (which decides
 * library or previous module as for any call) */
static int coll_cxl_hold_start(mca_coll_cxl_held_t *q)
{
    const mca_coll_cxl_call_t *a = &q->call;
    mca_coll_base_module_t *mod  = &q->base.m->super;
    ompi_communicator_t *comm    = q->base.m->comm;
    ompi_request_t **r           = &q->inner;
    int rc;

    mca_coll_cxl_replaying = 1;
    switch (a->coll) {
    case COLL_CXL_BARRIER:
        rc = mca_coll_cxl_ibarrier(comm, r, mod);
        break;
    case COLL_CXL_BCAST:
        rc = mca_coll_cxl_ibcast(a->rbuf, a->rcount, a->rdtype, a->root,
                                 comm, r, mod);
        break;
    case COLL_CXL_REDUCE:
        rc = mca_coll_cxl_ireduce(a->sbuf, a->rbuf, a->scount, a->sdtype,
                                  a->op, a->root, comm, r, mod);
        break;
    case COLL_CXL_ALLREDUCE:
        rc = mca_coll_cxl_iallreduce(a->sbuf, a->rbuf, a->scount, a->sdtype,
                                     a->op, comm, r, mod);
        break;
    case COLL_CXL_GATHER:
        rc = mca_coll_cxl_igather(a->sbuf, a->scount, a->sdtype, a->rbuf,
                                  a->rcount, a->rdtype, a->root, comm, r,
                                  mod);
        break;
    case COLL_CXL_SCATTER:
        rc = mca_coll_cxl_iscatter(a->sbuf, a->scount, a->sdtype, a->rbuf,
                                   a->rcount, a->rdtype, a->root, comm, r,
                                   mod);
        break;
    case COLL_CXL_ALLGATHER:
        rc = mca_coll_cxl_iallgather(a->sbuf, a->scount, a->sdtype, a->rbuf,
                                     a->rcount, a->rdtype, comm, r, mod);
        break;
    case COLL_CXL_REDUCE_SCATTER_BLOCK:
        rc = mca_coll_cxl_ireduce_scatter_block(a->sbuf, a->rbuf, a->rcount,
                                                a->sdtype, a->op, comm, r,
                                                mod);
        break;
    case COLL_CXL_ALLTOALL:
        rc = mca_coll_cxl_ialltoall(a->sbuf, a->scount, a->sdtype, a->rbuf,
                                    a->rcount, a->rdtype, comm, r, mod);
        break;
    default:
        rc = MPI_ERR_INTERN;
        break;
    }
    mca_coll_cxl_replaying = 0;
    if (rc != OMPI_SUCCESS) {
        q->inner = NULL;
    }
    return rc;
}

/* The held call ended (hold_lock held): off the list, completed */
static void coll_cxl_hold_end(mca_coll_cxl_held_t **link, int rc)
{
    mca_coll_cxl_component_t *c = &mca_coll_cxl_component;
    mca_coll_cxl_held_t *q      = *link;

    *link = q->next;
    if (*link == NULL) {
        c->hold_tail = link;
    }
    c->hold_active--;
    OPAL_THREAD_LOCK(&c->nb_lock);
    mca_coll_cxl_req_complete(&q->base, rc);
    OPAL_THREAD_UNLOCK(&c->nb_lock);
}

/*
 * The progress pass (opal_progress): test the creations under way; once
 * one ended, start its module's held calls in order; complete those whose
 * started call completed.  Returns the number it completed.
 */
static int coll_cxl_hold_progress(void)
{
    mca_coll_cxl_component_t *c = &mca_coll_cxl_component;
    mca_coll_cxl_held_t *q, **link;
    mca_coll_cxl_module_t *m;
    unsigned pass;
    int events = 0, rc;

    if (c->hold_active == 0) {
        return 0;
    }
    if (OPAL_THREAD_TRYLOCK(&c->hold_lock)) {
        return 0;
    }
    if (c->hold_busy) {
        /* a pass further up this thread's stack (a started call's own
         * progress) */
        OPAL_THREAD_UNLOCK(&c->hold_lock);
        return 0;
    }
    c->hold_busy = 1;
    pass         = ++c->hold_pass;
    link         = &c->hold_head;
    while ((q = *link) != NULL) {
        m = q->base.m;
        if (!q->started) {
            /* an earlier held call of the module waits: so does this */
            if ((m->hold_pass == pass) || !mca_coll_cxl_team_test(m)) {
                m->hold_pass = pass;
                link         = &q->next;
                continue;
            }
            rc         = coll_cxl_hold_start(q);
            q->started = 1;
            m->n_held--;
            if (rc != OMPI_SUCCESS) {
                coll_cxl_hold_end(link, rc);
                ++events;
                continue;
            }
        }
        if ((q->inner != NULL) && !REQUEST_COMPLETE(q->inner)) {
            link = &q->next;
            continue;
        }
        rc = MPI_SUCCESS;
        if (q->inner != NULL) {
            rc = q->inner->req_status.MPI_ERROR;
            (void)ompi_request_free(&q->inner);
        }
        coll_cxl_hold_end(link, rc);
        ++events;
    }
    c->hold_busy = 0;
    OPAL_THREAD_UNLOCK(&c->hold_lock);
    return events;
}

/* hold_lock held */
static int coll_cxl_hold_register(void)
{
    mca_coll_cxl_component_t *c = &mca_coll_cxl_component;
    int rc;

    if (c->hold_registered) {
        return OMPI_SUCCESS;
    }
    rc = opal_progress_register(coll_cxl_hold_progress);
    c->hold_registered = (rc == OPAL_SUCCESS);
    return rc;
}

int mca_coll_cxl_hold(mca_coll_cxl_module_t *m, const mca_coll_cxl_call_t *call,
                      ompi_request_t **request, int *rc)
{
    mca_coll_cxl_component_t *c = &mca_coll_cxl_component;
    mca_coll_cxl_held_t *q;

    OPAL_THREAD_LOCK(&c->hold_lock);
    if (!mca_coll_cxl_hold_pending(m)) {
        /* nothing under way: hold only to make the team */
        if (!m->lazy || !c->nb_team) {
            OPAL_THREAD_UNLOCK(&c->hold_lock);
            return 0;
        }
        if ((coll_cxl_hold_register() != OMPI_SUCCESS) ||
            (mca_coll_cxl_team_start(m) != OMPI_SUCCESS)) {
            /* declined (said so); the call goes on to the previous
             * module like every later one */
            m->lazy = 0;
            OPAL_THREAD_UNLOCK(&c->hold_lock);
            return 0;
        }
    }
    q = OBJ_NEW(mca_coll_cxl_held_t);
    if (q == NULL) {
        /*
         * The call fails here and its peers make it: as when a library
         * call can not start for want of memory, the program gets the
         * error; the communicator's later collectives may not pair up.
         */
        OPAL_THREAD_UNLOCK(&c->hold_lock);
        opal_output(0, "coll:cxl: comm %s (cid %u): no memory to hold a "
                    "non-blocking %s", m->comm->c_name,
                    (unsigned)m->comm->c_contextid,
                    mca_coll_cxl_coll_name(call->coll));
        ++c->n_errors;
        *rc = OMPI_ERR_OUT_OF_RESOURCE;
        return 1;
    }
    mca_coll_cxl_req_init(&q->base, m);
    q->next    = NULL;
    q->call    = *call;
    q->inner   = NULL;
    q->started = 0;
    *c->hold_tail = q;
    c->hold_tail  = &q->next;
    c->hold_active++;
    m->n_held++;
    OPAL_THREAD_LOCK(&c->nb_lock);
    m->nb_count++; /* a drain waits for it */
    OPAL_THREAD_UNLOCK(&c->nb_lock);
    OPAL_THREAD_UNLOCK(&c->hold_lock);
    COLL_CXL_VERBOSE(20, "coll:cxl: non-blocking %s on %s (cid %u): held "
                     "while the team is made",
                     mca_coll_cxl_coll_name(call->coll), m->comm->c_name,
                     (unsigned)m->comm->c_contextid);
    *request = &q->base.super.super;
    *rc      = OMPI_SUCCESS;
    return 1;
}

void mca_coll_cxl_hold_settle(mca_coll_cxl_module_t *m)
{
    /* coll_cxl_hold_progress among opal_progress's functions */
    mca_coll_cxl_progress_while(m, mca_coll_cxl_hold_pending);
}

void mca_coll_cxl_hold_fini(void)
{
    mca_coll_cxl_component_t *c = &mca_coll_cxl_component;

    if (c->hold_registered) {
        opal_progress_unregister(coll_cxl_hold_progress);
        c->hold_registered = 0;
    }
}
