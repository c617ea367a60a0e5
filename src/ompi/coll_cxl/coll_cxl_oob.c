/*
 * The out-of-band allgathers the library's team creation and destruction
 * use (cxl_coll_team_params_t), on the module's communicator.
 *
 * Blocking: the previous module's allgather (point-to-point based; never
 * this module's).
 *
 * Non-blocking, for a team made at a non-blocking collective
 * (coll_cxl_hold.c): every rank sends its part to every other rank and
 * receives theirs, as point-to-point messages of a tag no other
 * collective uses, so the exchange is its own channel: it can neither
 * match nor be matched by libnbc's calls, whose tags follow the order in
 * which each rank starts them (the second exchange starts when the first
 * ends, at a different moment on every rank).  Between two ranks the
 * messages of one communicator and tag are received in the order they
 * were sent, so the second exchange never takes the first's.  Completion
 * is read from the requests, never waited for: the test runs inside
 * Open MPI's progress engine.
 */
#include "coll_cxl.h"

#include "ompi/mca/coll/base/coll_tags.h"
#include "ompi/mca/pml/pml.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* below MPI_ANY_TAG (-1), above the blocking collectives' tags */
#define COLL_CXL_OOB_TAG (MCA_COLL_BASE_TAG_ALLGATHER + 1)

int mca_coll_cxl_oob_allgather(void *arg, const void *sbuf, void *rbuf,
                               size_t len)
{
    mca_coll_cxl_module_t *m = arg;
    int rc;

    if (len > INT_MAX) {
        return -1;
    }
    rc = m->prev.allgather(sbuf, (int)len, MPI_BYTE, rbuf, (int)len,
                           MPI_BYTE, m->comm, m->prev.allgather_module);
    return (rc == OMPI_SUCCESS) ? 0 : -1;
}

/* One exchange under way: a receive from and a send to every peer */
typedef struct {
    int             n;
    ompi_request_t *reqs[];
} coll_cxl_oob_req_t;

/* Requests that ended (all of them, or a start failed): released */
static int coll_cxl_oob_release(coll_cxl_oob_req_t *x)
{
    int rc = 1, i;

    for (i = 0; i < x->n; ++i) {
        if (x->reqs[i]->req_status.MPI_ERROR != MPI_SUCCESS) {
            rc = -1;
        }
        (void)ompi_request_free(&x->reqs[i]);
    }
    free(x);
    return rc;
}

int mca_coll_cxl_oob_iallgather(void *arg, const void *sbuf, void *rbuf,
                                size_t len, void **req)
{
    mca_coll_cxl_module_t *m = arg;
    ompi_communicator_t *comm = m->comm;
    int rank = ompi_comm_rank(comm), size = ompi_comm_size(comm);
    coll_cxl_oob_req_t *x;
    ompi_request_t *r;
    int peer, rc;

    if (len > INT_MAX) {
        return -1;
    }
    x = malloc(sizeof(*x) + 2 * (size_t)size * sizeof(x->reqs[0]));
    if (x == NULL) {
        return -1;
    }
    x->n = 0;
    memcpy((char *)rbuf + (size_t)rank * len, sbuf, len);
    for (peer = 0; peer < size; ++peer) {
        if (peer == rank) {
            continue;
        }
        rc = MCA_PML_CALL(irecv((char *)rbuf + (size_t)peer * len, (int)len,
                                MPI_BYTE, peer, COLL_CXL_OOB_TAG, comm, &r));
        if (rc != OMPI_SUCCESS) {
            goto err;
        }
        x->reqs[x->n++] = r;
        rc = MCA_PML_CALL(isend(sbuf, (int)len, MPI_BYTE, peer,
                                COLL_CXL_OOB_TAG, MCA_PML_BASE_SEND_STANDARD,
                                comm, &r));
        if (rc != OMPI_SUCCESS) {
            goto err;
        }
        x->reqs[x->n++] = r;
    }
    *req = x;
    return 0;

err:
    /*
     * The peers would wait for this rank's part: the creation fails here
     * (the caller declines the communicator) and theirs hang, as with a
     * failed blocking allgather.  What was started must end before its
     * buffers go: the receives are cancelled (even entries), the sends
     * of a few bytes leave eagerly.
     */
    opal_output(0, "coll:cxl: comm %s (cid %u, rank %d): the team's "
                "out-of-band exchange could not start a message to rank %d "
                "(%d)", comm->c_name, (unsigned)comm->c_contextid, rank, peer,
                rc);
    for (peer = 0; peer < x->n; peer += 2) {
        (void)ompi_request_cancel(x->reqs[peer]);
    }
    (void)ompi_request_wait_all((size_t)x->n, x->reqs, MPI_STATUSES_IGNORE);
    (void)coll_cxl_oob_release(x);
    return -1;
}

int mca_coll_cxl_oob_test(void *arg, void *req)
{
    coll_cxl_oob_req_t *x = req;
    int i;

    (void)arg;
    for (i = 0; i < x->n; ++i) {
        if (!REQUEST_COMPLETE(x->reqs[i])) {
            return 0;
        }
    }
    return coll_cxl_oob_release(x);
}
