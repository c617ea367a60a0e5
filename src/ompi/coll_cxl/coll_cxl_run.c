/*
 * One collective through the library: post, then poll it while keeping
 * Open MPI's progress engine turning (a peer may wait in MPI_Wait for a
 * rendezvous send of this rank before it joins the collective), and
 * yield the CPU after a bounded spin (more ranks than cores).
 */
#include "coll_cxl.h"

#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

#include <immintrin.h>
#include <sched.h>

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

/* MPI error class of a library status */
static int coll_cxl_mpi_error(cxl_coll_status_t status)
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

static cxl_coll_status_t coll_cxl_wait(cxl_coll_req_t *req)
{
    const mca_coll_cxl_component_t *c = &mca_coll_cxl_component;
    int until_progress = c->progress_interval;
    int spins          = c->spin_count;
    cxl_coll_status_t status;

    /* counters, not a modulo: a 64-bit division costs more than a poll */
    for (;;) {
        status = cxl_coll_test(req);
        if (status != CXL_COLL_INPROGRESS) {
            return status;
        }
        if (--until_progress == 0) {
            opal_progress();
            until_progress = c->progress_interval;
        }
        if (spins > 0) {
            --spins;
            _mm_pause();
        } else {
            sched_yield();
        }
    }
}

int mca_coll_cxl_run(mca_coll_cxl_module_t *m, const cxl_coll_args_t *args)
{
    mca_coll_cxl_component_t *c = &mca_coll_cxl_component;
    const char *name = (args->type < CXL_COLL_TYPE_LAST) ?
                       coll_cxl_type_names[args->type] : "?";
    cxl_coll_status_t status;
    cxl_coll_req_t *req = NULL;

    COLL_CXL_VERBOSE(20, "coll:cxl: %s on %s (cid %u): library, %zu x %s",
                     name, m->comm->c_name, (unsigned)m->comm->c_contextid,
                     args->count, cxl_coll_dtype_name(args->dtype));
    status = cxl_coll_post(m->team, args, &req);
    if (status == CXL_COLL_OK) {
        status = coll_cxl_wait(req);
        cxl_coll_req_free(req);
    }
    ++c->n_calls;
    if (status == CXL_COLL_OK) {
        return MPI_SUCCESS;
    }

    /* always reported: the caller's error handler may not say why */
    ++c->n_errors;
    opal_output(0, "coll:cxl: %s on %s (cid %u, rank %d of %d) failed: %s",
                name, m->comm->c_name, (unsigned)m->comm->c_contextid,
                ompi_comm_rank(m->comm), ompi_comm_size(m->comm),
                mca_coll_cxl_error_text(status));
    return coll_cxl_mpi_error(status);
}

void mca_coll_cxl_count_fallback(mca_coll_cxl_module_t *m,
                                 mca_coll_cxl_coll_t coll, const char *why)
{
    ++mca_coll_cxl_component.n_fallbacks;
    COLL_CXL_VERBOSE(10, "coll:cxl: %s on %s (cid %u): previous module: %s",
                     mca_coll_cxl_coll_name(coll), m->comm->c_name,
                     (unsigned)m->comm->c_contextid, why);
}
