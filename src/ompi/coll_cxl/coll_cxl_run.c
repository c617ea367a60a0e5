/*
 * One collective through the library's blocking call.  While it waits it
 * keeps Open MPI's progress engine turning (a peer may wait in MPI_Wait
 * for a rendezvous send of this rank before it joins the collective) and
 * yields the CPU after a bounded spin (more ranks than cores): the team's
 * progress and spin parameters (coll_cxl_module.c).  A non-blocking call
 * goes to coll_cxl_nb.c instead.
 */
#include "coll_cxl.h"

#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

static const char *coll_cxl_type_names[CXL_COLL_TYPE_LAST] = {
    [CXL_COLL_BARRIER]        = "MPI_Barrier",
    [CXL_COLL_BCAST]          = "MPI_Bcast",
    [CXL_COLL_REDUCE]         = "MPI_Reduce",
    [CXL_COLL_ALLREDUCE]      = "MPI_Allreduce",
    [CXL_COLL_GATHER]         = "MPI_Gather",
    [CXL_COLL_SCATTER]        = "MPI_Scatter",
    [CXL_COLL_ALLGATHER]      = "MPI_Allgather",
    [CXL_COLL_REDUCE_SCATTER] = "MPI_Reduce_scatter_block",
    [CXL_COLL_ALLTOALL]       = "MPI_Alltoall",
};

const char *mca_coll_cxl_type_name(cxl_coll_type_t type)
{
    return (type < CXL_COLL_TYPE_LAST) ? coll_cxl_type_names[type] : "?";
}

int mca_coll_cxl_mpi_error(cxl_coll_status_t status)
{
    switch (status) {
    case CXL_COLL_OK:              return MPI_SUCCESS;
    case CXL_COLL_ERR_INVAL:       return MPI_ERR_ARG;
    case CXL_COLL_ERR_UNSUPPORTED: return MPI_ERR_UNSUPPORTED_OPERATION;
    case CXL_COLL_ERR_NO_MEMORY:   return MPI_ERR_NO_MEM;
    default:
        /* a dead peer, a timeout, the pool or the out-of-band exchange:
         * no MPI class of its own in Open MPI 4.1 (no ULFM) */
        return MPI_ERR_OTHER;
    }
}

/* the library's message with its detail, or at least the status's name */
const char *mca_coll_cxl_error_text(cxl_coll_status_t status)
{
    const char *detail = cxl_coll_last_error();

    return ((detail != NULL) && (detail[0] != '\0')) ? detail :
           cxl_coll_strerror(status);
}

/*
 * While the library waits (team parameter progress, every
 * coll_cxl_progress_interval polls): a call costs about as much as a
 * short collective, so a wait that ends within the interval makes none.
 */
void mca_coll_cxl_progress(void *arg)
{
    (void)arg;
    opal_progress();
}

int mca_coll_cxl_report(mca_coll_cxl_module_t *m, cxl_coll_type_t type,
                        cxl_coll_status_t status)
{
    /* always reported: the caller's error handler may not say why */
    ++mca_coll_cxl_component.n_errors;
    opal_output(0, "coll:cxl: %s on %s (cid %u, rank %d of %d) failed: %s",
                mca_coll_cxl_type_name(type), m->comm->c_name,
                (unsigned)m->comm->c_contextid, ompi_comm_rank(m->comm),
                ompi_comm_size(m->comm), mca_coll_cxl_error_text(status));
    return mca_coll_cxl_mpi_error(status);
}

int mca_coll_cxl_run(mca_coll_cxl_module_t *m, const cxl_coll_args_t *args)
{
    mca_coll_cxl_component_t *c = &mca_coll_cxl_component;
    cxl_coll_status_t status;

    COLL_CXL_VERBOSE(20, "coll:cxl: %s on %s (cid %u): library, %zu x %s",
                     mca_coll_cxl_type_name(args->type), m->comm->c_name,
                     (unsigned)m->comm->c_contextid, args->count,
                     cxl_coll_dtype_name(args->dtype));
    if (OPAL_UNLIKELY(m->nb_unposted != 0)) {
        /* non-blocking calls made before this one go first */
        mca_coll_cxl_nb_flush(m);
    }
    OPAL_THREAD_LOCK(&m->lock);
    status = cxl_coll_run(m->team, args);
    if (status != CXL_COLL_OK) {
        /* a local error (the arguments' check) leaves the peers in the
         * call: they learn from the abort line rather than run out of
         * step */
        cxl_coll_team_abort(m->team, status);
    }
    OPAL_THREAD_UNLOCK(&m->lock);
    ++c->n_calls;
    if (status == CXL_COLL_OK) {
        return MPI_SUCCESS;
    }
    return mca_coll_cxl_report(m, args->type, status);
}

int mca_coll_cxl_exec(mca_coll_cxl_module_t *m, const cxl_coll_args_t *args,
                      mca_coll_cxl_stage_t *s, mca_coll_cxl_stage_t *r,
                      ompi_request_t **request)
{
    int rc, rc2;

    if (request != NULL) {
        /* the request owns the staged buffers from here on */
        return mca_coll_cxl_nb_post(m, args, s, r, request);
    }
    rc = mca_coll_cxl_run(m, args);
    if (s != NULL) {
        (void)mca_coll_cxl_stage_out(s, 0);
    }
    if (r != NULL) {
        rc2 = mca_coll_cxl_stage_out(r, rc == MPI_SUCCESS);
        if (rc == MPI_SUCCESS) {
            rc = rc2;
        }
    }
    return rc;
}

int mca_coll_cxl_fail_local(mca_coll_cxl_module_t *m, mca_coll_cxl_coll_t coll,
                            int rc, const char *why)
{
    /* this rank does not make the call its peers make: they would wait
     * for it, or pair their next calls with its next ones */
    cxl_coll_team_abort(m->team, (rc == OMPI_ERR_OUT_OF_RESOURCE) ?
                                 CXL_COLL_ERR_NO_MEMORY : CXL_COLL_ERR_INVAL);
    ++mca_coll_cxl_component.n_errors;
    opal_output(0, "coll:cxl: %s on %s (cid %u, rank %d of %d) failed: %s; "
                "the communicator's coll/cxl team gave up",
                mca_coll_cxl_coll_name(coll), m->comm->c_name,
                (unsigned)m->comm->c_contextid, ompi_comm_rank(m->comm),
                ompi_comm_size(m->comm), why);
    return rc;
}

void mca_coll_cxl_count_fallback(mca_coll_cxl_module_t *m,
                                 mca_coll_cxl_coll_t coll, const char *why)
{
    ++mca_coll_cxl_component.n_fallbacks;
    COLL_CXL_VERBOSE(10, "coll:cxl: %s on %s (cid %u): previous module: %s",
                     mca_coll_cxl_coll_name(coll), m->comm->c_name,
                     (unsigned)m->comm->c_contextid, why);
}
