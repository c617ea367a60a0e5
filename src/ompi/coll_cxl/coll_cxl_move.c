/*
 * barrier and the data movements: bcast, gather, scatter, allgather,
 * alltoall.  The library moves count bytes per rank (CXL_COLL_UINT8):
 * MPI requires every rank's send and receive descriptions to carry the
 * same number of bytes, while the datatypes themselves may differ from
 * rank to rank.  So every rank takes the library path whatever its own
 * datatype, and one whose buffer is not contiguous packs/unpacks it
 * (coll_cxl_stage.c).  Arguments MPI calls insignificant on a rank (the
 * receive side of a non-root gather, the send side of a non-root scatter)
 * are never looked at.  Each entry point has a non-blocking twin
 * (MPI_Ibcast...) that decides alike and posts the same call.
 */
#include "coll_cxl.h"

#include "ompi/datatype/ompi_datatype.h"

/* A byte movement of 'per' bytes per rank from s (NULL: in place, or
 * nothing to send on this rank) into r (NULL: nothing received here, or
 * in place for the root of scatter): run now (request NULL) or posted;
 * r is unpacked and both released when it ends. */
static int coll_cxl_move(mca_coll_cxl_module_t *m, cxl_coll_type_t type,
                         mca_coll_cxl_stage_t *s, const void *sbuf_arg,
                         mca_coll_cxl_stage_t *r, void *rbuf_arg,
                         size_t per, int root, ompi_request_t **request)
{
    cxl_coll_args_t args;

    args.type  = type;
    args.sbuf  = (s != NULL) ? s->ptr : sbuf_arg;
    args.rbuf  = (r != NULL) ? r->ptr : rbuf_arg;
    args.count = per;
    args.dtype = CXL_COLL_UINT8;
    args.op    = CXL_COLL_SUM;
    args.root  = root;
    return mca_coll_cxl_exec(m, &args, s, r, request);
}

static size_t coll_cxl_bytes(int count, const struct ompi_datatype_t *dtype)
{
    size_t size;

    ompi_datatype_type_size(dtype, &size);
    return (count > 0) ? (size_t)count * size : 0;
}

int mca_coll_cxl_barrier(struct ompi_communicator_t *comm,
                         mca_coll_base_module_t *module)
{
    mca_coll_cxl_module_t *m = (mca_coll_cxl_module_t *)module;
    cxl_coll_args_t args = {.type = CXL_COLL_BARRIER, .dtype = CXL_COLL_UINT8};

    if (!mca_coll_cxl_takes(m, COLL_CXL_BARRIER, NULL)) {
        return m->prev.barrier(comm, m->prev.barrier_module);
    }
    return mca_coll_cxl_run(m, &args);
}

int mca_coll_cxl_ibarrier(struct ompi_communicator_t *comm,
                          ompi_request_t **request,
                          mca_coll_base_module_t *module)
{
    mca_coll_cxl_module_t *m = (mca_coll_cxl_module_t *)module;
    cxl_coll_args_t args = {.type = CXL_COLL_BARRIER, .dtype = CXL_COLL_UINT8};

    COLL_CXL_NB_GATE(m, request, .coll = COLL_CXL_BARRIER);
    if (!mca_coll_cxl_takes(m, COLL_CXL_BARRIER, request)) {
        return m->prev.ibarrier(comm, request, m->prev.ibarrier_module);
    }
    return mca_coll_cxl_nb_post(m, &args, NULL, NULL, request);
}

static int coll_cxl_bcast_any(void *buf, int count,
                              struct ompi_datatype_t *dtype, int root,
                              struct ompi_communicator_t *comm,
                              mca_coll_cxl_module_t *m,
                              ompi_request_t **request)
{
    int is_root = (ompi_comm_rank(comm) == root);
    mca_coll_cxl_stage_t b;
    int rc;

    if (!mca_coll_cxl_takes(m, COLL_CXL_BCAST, request)) {
        return (request != NULL) ?
               m->prev.ibcast(buf, count, dtype, root, comm, request,
                              m->prev.ibcast_module) :
               m->prev.bcast(buf, count, dtype, root, comm,
                             m->prev.bcast_module);
    }
    rc = mca_coll_cxl_stage_in(&b, buf, (count > 0) ? (size_t)count : 0,
                               dtype, is_root);
    if (rc != OMPI_SUCCESS) {
        return mca_coll_cxl_fail_local(m, COLL_CXL_BCAST, rc,
                                       "staging buffer");
    }
    /* the root's copy is only read: nothing to unpack there */
    if (is_root) {
        return coll_cxl_move(m, CXL_COLL_BCAST, &b, NULL, NULL, b.ptr,
                             b.bytes, root, request);
    }
    return coll_cxl_move(m, CXL_COLL_BCAST, NULL, NULL, &b, NULL, b.bytes,
                         root, request);
}

static int coll_cxl_gather_any(const void *sbuf, int scount,
                               struct ompi_datatype_t *sdtype, void *rbuf,
                               int rcount, struct ompi_datatype_t *rdtype,
                               int root, struct ompi_communicator_t *comm,
                               mca_coll_cxl_module_t *m,
                               ompi_request_t **request)
{
    int size = ompi_comm_size(comm);
    int in_place = (sbuf == MPI_IN_PLACE);
    mca_coll_cxl_stage_t s, r;
    size_t per;
    int rc;

    if (!mca_coll_cxl_takes(m, COLL_CXL_GATHER, request)) {
        return (request != NULL) ?
               m->prev.igather(sbuf, scount, sdtype, rbuf, rcount, rdtype,
                               root, comm, request, m->prev.igather_module) :
               m->prev.gather(sbuf, scount, sdtype, rbuf, rcount, rdtype,
                              root, comm, m->prev.gather_module);
    }
    if (ompi_comm_rank(comm) != root) {
        rc = mca_coll_cxl_stage_in(&s, sbuf, (scount > 0) ? (size_t)scount : 0,
                                   sdtype, 1);
        if (rc != OMPI_SUCCESS) {
            return mca_coll_cxl_fail_local(m, COLL_CXL_GATHER, rc,
                                           "staging buffer");
        }
        return coll_cxl_move(m, CXL_COLL_GATHER, &s, NULL, NULL, NULL,
                             s.bytes, root, request);
    }

    per = coll_cxl_bytes(rcount, rdtype);
    if (!in_place && (coll_cxl_bytes(scount, sdtype) != per)) {
        /* erroneous: signatures differ */
        return mca_coll_cxl_fail_local(m, COLL_CXL_GATHER, MPI_ERR_TRUNCATE,
                                       "send and receive sizes differ");
    }
    rc = mca_coll_cxl_stage_in(&r, rbuf, (per != 0) ?
                               (size_t)rcount * (size_t)size : 0, rdtype,
                               in_place);
    if (rc != OMPI_SUCCESS) {
        return mca_coll_cxl_fail_local(m, COLL_CXL_GATHER, rc,
                                       "staging buffer");
    }
    if (in_place) {
        return coll_cxl_move(m, CXL_COLL_GATHER, NULL, CXL_COLL_IN_PLACE,
                             &r, NULL, per, root, request);
    }
    rc = mca_coll_cxl_stage_in(&s, sbuf, (size_t)scount, sdtype, 1);
    if (rc != OMPI_SUCCESS) {
        (void)mca_coll_cxl_stage_out(&r, 0);
        return mca_coll_cxl_fail_local(m, COLL_CXL_GATHER, rc,
                                       "staging buffer");
    }
    return coll_cxl_move(m, CXL_COLL_GATHER, &s, NULL, &r, NULL, per, root, request);
}

static int coll_cxl_scatter_any(const void *sbuf, int scount,
                                struct ompi_datatype_t *sdtype, void *rbuf,
                                int rcount, struct ompi_datatype_t *rdtype,
                                int root, struct ompi_communicator_t *comm,
                                mca_coll_cxl_module_t *m,
                                ompi_request_t **request)
{
    int size = ompi_comm_size(comm);
    mca_coll_cxl_stage_t s, r;
    size_t per;
    int rc;

    if (!mca_coll_cxl_takes(m, COLL_CXL_SCATTER, request)) {
        return (request != NULL) ?
               m->prev.iscatter(sbuf, scount, sdtype, rbuf, rcount, rdtype,
                                root, comm, request,
                                m->prev.iscatter_module) :
               m->prev.scatter(sbuf, scount, sdtype, rbuf, rcount, rdtype,
                               root, comm, m->prev.scatter_module);
    }
    if (ompi_comm_rank(comm) != root) {
        rc = mca_coll_cxl_stage_in(&r, rbuf, (rcount > 0) ? (size_t)rcount : 0,
                                   rdtype, 0);
        if (rc != OMPI_SUCCESS) {
            return mca_coll_cxl_fail_local(m, COLL_CXL_SCATTER, rc,
                                           "staging buffer");
        }
        return coll_cxl_move(m, CXL_COLL_SCATTER, NULL, NULL, &r, NULL,
                             r.bytes, root, request);
    }

    per = coll_cxl_bytes(scount, sdtype);
    if ((rbuf != MPI_IN_PLACE) && (coll_cxl_bytes(rcount, rdtype) != per)) {
        return mca_coll_cxl_fail_local(m, COLL_CXL_SCATTER, MPI_ERR_TRUNCATE,
                                       "send and receive sizes differ");
    }
    rc = mca_coll_cxl_stage_in(&s, sbuf, (per != 0) ?
                               (size_t)scount * (size_t)size : 0, sdtype, 1);
    if (rc != OMPI_SUCCESS) {
        return mca_coll_cxl_fail_local(m, COLL_CXL_SCATTER, rc,
                                       "staging buffer");
    }
    if (rbuf == MPI_IN_PLACE) {
        /* the root's own block stays where it is in sbuf */
        return coll_cxl_move(m, CXL_COLL_SCATTER, &s, NULL, NULL,
                             (void *)CXL_COLL_IN_PLACE, per, root, request);
    }
    rc = mca_coll_cxl_stage_in(&r, rbuf, (size_t)rcount, rdtype, 0);
    if (rc != OMPI_SUCCESS) {
        (void)mca_coll_cxl_stage_out(&s, 0);
        return mca_coll_cxl_fail_local(m, COLL_CXL_SCATTER, rc,
                                       "staging buffer");
    }
    return coll_cxl_move(m, CXL_COLL_SCATTER, &s, NULL, &r, NULL, per, root, request);
}

/* allgather and alltoall: the same shape; the send side holds one block
 * (allgather) or one per rank (alltoall) */
static int coll_cxl_all(mca_coll_cxl_module_t *m, cxl_coll_type_t type,
                        const void *sbuf, int scount,
                        const struct ompi_datatype_t *sdtype, size_t sblocks,
                        void *rbuf, int rcount, const struct ompi_datatype_t *rdtype,
                        int size, ompi_request_t **request)
{
    mca_coll_cxl_coll_t coll = (type == CXL_COLL_ALLGATHER) ?
                               COLL_CXL_ALLGATHER : COLL_CXL_ALLTOALL;
    int in_place = (sbuf == MPI_IN_PLACE);
    mca_coll_cxl_stage_t s, r;
    size_t per;
    int rc;

    per = in_place ? coll_cxl_bytes(rcount, rdtype) :
                     coll_cxl_bytes(scount, sdtype);
    if (!in_place && (coll_cxl_bytes(rcount, rdtype) != per)) {
        return mca_coll_cxl_fail_local(m, coll, MPI_ERR_TRUNCATE,
                                       "send and receive sizes differ");
    }
    rc = mca_coll_cxl_stage_in(&r, rbuf, (per != 0) ?
                               (size_t)rcount * (size_t)size : 0, rdtype,
                               in_place);
    if (rc != OMPI_SUCCESS) {
        return mca_coll_cxl_fail_local(m, coll, rc,
                                       "staging buffer");
    }
    if (in_place) {
        return coll_cxl_move(m, type, NULL, CXL_COLL_IN_PLACE, &r, NULL,
                             per, 0, request);
    }
    rc = mca_coll_cxl_stage_in(&s, sbuf, (per != 0) ?
                               (size_t)scount * sblocks : 0, sdtype, 1);
    if (rc != OMPI_SUCCESS) {
        (void)mca_coll_cxl_stage_out(&r, 0);
        return mca_coll_cxl_fail_local(m, coll, rc,
                                       "staging buffer");
    }
    return coll_cxl_move(m, type, &s, NULL, &r, NULL, per, 0, request);
}

int mca_coll_cxl_bcast(void *buf, int count, struct ompi_datatype_t *dtype,
                       int root, struct ompi_communicator_t *comm,
                       mca_coll_base_module_t *module)
{
    return coll_cxl_bcast_any(buf, count, dtype, root, comm,
                              (mca_coll_cxl_module_t *)module, NULL);
}

int mca_coll_cxl_ibcast(void *buf, int count, struct ompi_datatype_t *dtype,
                        int root, struct ompi_communicator_t *comm,
                        ompi_request_t **request,
                        mca_coll_base_module_t *module)
{
    mca_coll_cxl_module_t *m = (mca_coll_cxl_module_t *)module;

    COLL_CXL_NB_GATE(m, request, .coll = COLL_CXL_BCAST, .rbuf = buf,
                     .rcount = count, .rdtype = dtype, .root = root);
    return coll_cxl_bcast_any(buf, count, dtype, root, comm, m, request);
}

int mca_coll_cxl_gather(const void *sbuf, int scount,
                        struct ompi_datatype_t *sdtype, void *rbuf,
                        int rcount, struct ompi_datatype_t *rdtype, int root,
                        struct ompi_communicator_t *comm,
                        mca_coll_base_module_t *module)
{
    return coll_cxl_gather_any(sbuf, scount, sdtype, rbuf, rcount, rdtype,
                               root, comm, (mca_coll_cxl_module_t *)module,
                               NULL);
}

int mca_coll_cxl_igather(const void *sbuf, int scount,
                         struct ompi_datatype_t *sdtype, void *rbuf,
                         int rcount, struct ompi_datatype_t *rdtype, int root,
                         struct ompi_communicator_t *comm,
                         ompi_request_t **request,
                         mca_coll_base_module_t *module)
{
    mca_coll_cxl_module_t *m = (mca_coll_cxl_module_t *)module;

    COLL_CXL_NB_GATE(m, request, .coll = COLL_CXL_GATHER, .sbuf = sbuf,
                     .scount = scount, .sdtype = sdtype, .rbuf = rbuf,
                     .rcount = rcount, .rdtype = rdtype, .root = root);
    return coll_cxl_gather_any(sbuf, scount, sdtype, rbuf, rcount, rdtype,
                               root, comm, m, request);
}

int mca_coll_cxl_scatter(const void *sbuf, int scount,
                         struct ompi_datatype_t *sdtype, void *rbuf,
                         int rcount, struct ompi_datatype_t *rdtype, int root,
                         struct ompi_communicator_t *comm,
                         mca_coll_base_module_t *module)
{
    return coll_cxl_scatter_any(sbuf, scount, sdtype, rbuf, rcount, rdtype,
                                root, comm, (mca_coll_cxl_module_t *)module,
                                NULL);
}

int mca_coll_cxl_iscatter(const void *sbuf, int scount,
                          struct ompi_datatype_t *sdtype, void *rbuf,
                          int rcount, struct ompi_datatype_t *rdtype, int root,
                          struct ompi_communicator_t *comm,
                          ompi_request_t **request,
                          mca_coll_base_module_t *module)
{
    mca_coll_cxl_module_t *m = (mca_coll_cxl_module_t *)module;

    COLL_CXL_NB_GATE(m, request, .coll = COLL_CXL_SCATTER, .sbuf = sbuf,
                     .scount = scount, .sdtype = sdtype, .rbuf = rbuf,
                     .rcount = rcount, .rdtype = rdtype, .root = root);
    return coll_cxl_scatter_any(sbuf, scount, sdtype, rbuf, rcount, rdtype,
                                root, comm, m, request);
}

static int coll_cxl_allgather_any(const void *sbuf, int scount,
                                  struct ompi_datatype_t *sdtype, void *rbuf,
                                  int rcount, struct ompi_datatype_t *rdtype,
                                  struct ompi_communicator_t *comm,
                                  mca_coll_cxl_module_t *m,
                                  ompi_request_t **request)
{
    if (!mca_coll_cxl_takes(m, COLL_CXL_ALLGATHER, request)) {
        return (request != NULL) ?
               m->prev.iallgather(sbuf, scount, sdtype, rbuf, rcount, rdtype,
                                  comm, request, m->prev.iallgather_module) :
               m->prev.allgather(sbuf, scount, sdtype, rbuf, rcount, rdtype,
                                 comm, m->prev.allgather_module);
    }
    return coll_cxl_all(m, CXL_COLL_ALLGATHER, sbuf, scount, sdtype, 1,
                        rbuf, rcount, rdtype, ompi_comm_size(comm), request);
}

static int coll_cxl_alltoall_any(const void *sbuf, int scount,
                                 struct ompi_datatype_t *sdtype, void *rbuf,
                                 int rcount, struct ompi_datatype_t *rdtype,
                                 struct ompi_communicator_t *comm,
                                 mca_coll_cxl_module_t *m,
                                 ompi_request_t **request)
{
    int size = ompi_comm_size(comm);

    if (!mca_coll_cxl_takes(m, COLL_CXL_ALLTOALL, request)) {
        return (request != NULL) ?
               m->prev.ialltoall(sbuf, scount, sdtype, rbuf, rcount, rdtype,
                                 comm, request, m->prev.ialltoall_module) :
               m->prev.alltoall(sbuf, scount, sdtype, rbuf, rcount, rdtype,
                                comm, m->prev.alltoall_module);
    }
    return coll_cxl_all(m, CXL_COLL_ALLTOALL, sbuf, scount, sdtype,
                        (size_t)size, rbuf, rcount, rdtype, size, request);
}

int mca_coll_cxl_allgather(const void *sbuf, int scount,
                           struct ompi_datatype_t *sdtype, void *rbuf,
                           int rcount, struct ompi_datatype_t *rdtype,
                           struct ompi_communicator_t *comm,
                           mca_coll_base_module_t *module)
{
    return coll_cxl_allgather_any(sbuf, scount, sdtype, rbuf, rcount, rdtype,
                                  comm, (mca_coll_cxl_module_t *)module, NULL);
}

int mca_coll_cxl_iallgather(const void *sbuf, int scount,
                            struct ompi_datatype_t *sdtype, void *rbuf,
                            int rcount, struct ompi_datatype_t *rdtype,
                            struct ompi_communicator_t *comm,
                            ompi_request_t **request,
                            mca_coll_base_module_t *module)
{
    mca_coll_cxl_module_t *m = (mca_coll_cxl_module_t *)module;

    COLL_CXL_NB_GATE(m, request, .coll = COLL_CXL_ALLGATHER, .sbuf = sbuf,
                     .scount = scount, .sdtype = sdtype, .rbuf = rbuf,
                     .rcount = rcount, .rdtype = rdtype);
    return coll_cxl_allgather_any(sbuf, scount, sdtype, rbuf, rcount, rdtype,
                                  comm, m, request);
}

int mca_coll_cxl_alltoall(const void *sbuf, int scount,
                          struct ompi_datatype_t *sdtype, void *rbuf,
                          int rcount, struct ompi_datatype_t *rdtype,
                          struct ompi_communicator_t *comm,
                          mca_coll_base_module_t *module)
{
    return coll_cxl_alltoall_any(sbuf, scount, sdtype, rbuf, rcount, rdtype,
                                 comm, (mca_coll_cxl_module_t *)module, NULL);
}

int mca_coll_cxl_ialltoall(const void *sbuf, int scount,
                           struct ompi_datatype_t *sdtype, void *rbuf,
                           int rcount, struct ompi_datatype_t *rdtype,
                           struct ompi_communicator_t *comm,
                           ompi_request_t **request,
                           mca_coll_base_module_t *module)
{
    mca_coll_cxl_module_t *m = (mca_coll_cxl_module_t *)module;

    COLL_CXL_NB_GATE(m, request, .coll = COLL_CXL_ALLTOALL, .sbuf = sbuf,
                     .scount = scount, .sdtype = sdtype, .rbuf = rbuf,
                     .rcount = rcount, .rdtype = rdtype);
    return coll_cxl_alltoall_any(sbuf, scount, sdtype, rbuf, rcount, rdtype,
                                 comm, m, request);
}
