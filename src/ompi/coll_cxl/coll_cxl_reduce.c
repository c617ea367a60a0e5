/*
 * The reductions: reduce, allreduce, reduce_scatter_block.  MPI requires
 * the same count, datatype and op on every rank, so deciding from them
 * keeps all ranks on the same path: the library for the predefined types
 * and operations it provides (cxl_coll_op_supported), the previous module
 * for the rest.  MPI_IN_PLACE maps to CXL_COLL_IN_PLACE (reduce: on the
 * root; allreduce and reduce_scatter_block: on every rank).  The
 * non-blocking forms (MPI_Ireduce...) decide alike and post the call.
 */
#include "coll_cxl.h"

/* "" if the library takes (dtype, op); else why not */
static const char *coll_cxl_reduce_check(const struct ompi_datatype_t *dtype,
                                         const struct ompi_op_t *op,
                                         cxl_coll_dtype_t *cdt,
                                         cxl_coll_op_t *cop)
{
    if (!mca_coll_cxl_reduce_dtype(dtype, cdt)) {
        return "datatype not reduced by the library (derived, or not a "
               "fixed-size integer, float or double)";
    }
    if (!mca_coll_cxl_reduce_op(op, cop)) {
        return "operation not reduced by the library (user-defined, "
               "logical, MINLOC/MAXLOC or REPLACE)";
    }
    if (!cxl_coll_op_supported(*cdt, *cop)) {
        return "operation not provided for this datatype";
    }
    return "";
}

/* 1: the library takes the call (args filled in); 0: the previous module
 * does (counted, with the reason) */
static int coll_cxl_reduce_take(mca_coll_cxl_module_t *m,
                                mca_coll_cxl_coll_t coll, cxl_coll_type_t type,
                                const void *sbuf, void *rbuf, int count,
                                const struct ompi_datatype_t *dtype,
                                const struct ompi_op_t *op, int root,
                                ompi_request_t **request,
                                cxl_coll_args_t *args)
{
    const char *why;

    if (!mca_coll_cxl_takes(m, coll, request)) {
        return 0;
    }
    why = coll_cxl_reduce_check(dtype, op, &args->dtype, &args->op);
    if (why[0] != '\0') {
        mca_coll_cxl_count_fallback(m, coll, why);
        return 0;
    }
    args->type  = type;
    args->sbuf  = (sbuf == MPI_IN_PLACE) ? CXL_COLL_IN_PLACE : sbuf;
    args->rbuf  = rbuf;
    args->count = (size_t)count;
    args->root  = root;
    return 1;
}

static int coll_cxl_reduce_any(const void *sbuf, void *rbuf, int count,
                               struct ompi_datatype_t *dtype,
                               struct ompi_op_t *op, int root,
                               struct ompi_communicator_t *comm,
                               mca_coll_cxl_module_t *m,
                               ompi_request_t **request)
{
    cxl_coll_args_t args;

    if (count < 0) {
        return MPI_ERR_COUNT; /* the same on every rank */
    }
    /* rbuf is insignificant off the root: never handed over there */
    if (!coll_cxl_reduce_take(m, COLL_CXL_REDUCE, CXL_COLL_REDUCE, sbuf,
                              (ompi_comm_rank(comm) == root) ? rbuf : NULL,
                              count, dtype, op, root, request, &args)) {
        return (request != NULL) ?
               m->prev.ireduce(sbuf, rbuf, count, dtype, op, root, comm,
                               request, m->prev.ireduce_module) :
               m->prev.reduce(sbuf, rbuf, count, dtype, op, root, comm,
                              m->prev.reduce_module);
    }
    return mca_coll_cxl_exec(m, &args, NULL, NULL, request);
}

static int coll_cxl_allreduce_any(const void *sbuf, void *rbuf, int count,
                                  struct ompi_datatype_t *dtype,
                                  struct ompi_op_t *op,
                                  struct ompi_communicator_t *comm,
                                  mca_coll_cxl_module_t *m,
                                  ompi_request_t **request)
{
    cxl_coll_args_t args;

    if (count < 0) {
        return MPI_ERR_COUNT;
    }
    if (!coll_cxl_reduce_take(m, COLL_CXL_ALLREDUCE, CXL_COLL_ALLREDUCE, sbuf,
                              rbuf, count, dtype, op, 0, request, &args)) {
        return (request != NULL) ?
               m->prev.iallreduce(sbuf, rbuf, count, dtype, op, comm, request,
                                  m->prev.iallreduce_module) :
               m->prev.allreduce(sbuf, rbuf, count, dtype, op, comm,
                                 m->prev.allreduce_module);
    }
    return mca_coll_cxl_exec(m, &args, NULL, NULL, request);
}

static int coll_cxl_reduce_scatter_block_any(const void *sbuf, void *rbuf,
                                             int rcount,
                                             struct ompi_datatype_t *dtype,
                                             struct ompi_op_t *op,
                                             struct ompi_communicator_t *comm,
                                             mca_coll_cxl_module_t *m,
                                             ompi_request_t **request)
{
    cxl_coll_args_t args;

    if (rcount < 0) {
        return MPI_ERR_COUNT;
    }
    if (!coll_cxl_reduce_take(m, COLL_CXL_REDUCE_SCATTER_BLOCK,
                              CXL_COLL_REDUCE_SCATTER, sbuf, rbuf, rcount,
                              dtype, op, 0, request, &args)) {
        return (request != NULL) ?
               m->prev.ireduce_scatter_block(
                       sbuf, rbuf, rcount, dtype, op, comm, request,
                       m->prev.ireduce_scatter_block_module) :
               m->prev.reduce_scatter_block(
                       sbuf, rbuf, rcount, dtype, op, comm,
                       m->prev.reduce_scatter_block_module);
    }
    return mca_coll_cxl_exec(m, &args, NULL, NULL, request);
}

int mca_coll_cxl_reduce(const void *sbuf, void *rbuf, int count,
                        struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                        int root, struct ompi_communicator_t *comm,
                        mca_coll_base_module_t *module)
{
    return coll_cxl_reduce_any(sbuf, rbuf, count, dtype, op, root, comm,
                               (mca_coll_cxl_module_t *)module, NULL);
}

int mca_coll_cxl_ireduce(const void *sbuf, void *rbuf, int count,
                         struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                         int root, struct ompi_communicator_t *comm,
                         ompi_request_t **request,
                         mca_coll_base_module_t *module)
{
    mca_coll_cxl_module_t *m = (mca_coll_cxl_module_t *)module;

    COLL_CXL_NB_GATE(m, request, .coll = COLL_CXL_REDUCE, .sbuf = sbuf,
                     .rbuf = rbuf, .scount = count, .sdtype = dtype, .op = op,
                     .root = root);
    return coll_cxl_reduce_any(sbuf, rbuf, count, dtype, op, root, comm, m,
                               request);
}

int mca_coll_cxl_allreduce(const void *sbuf, void *rbuf, int count,
                           struct ompi_datatype_t *dtype,
                           struct ompi_op_t *op,
                           struct ompi_communicator_t *comm,
                           mca_coll_base_module_t *module)
{
    return coll_cxl_allreduce_any(sbuf, rbuf, count, dtype, op, comm,
                                  (mca_coll_cxl_module_t *)module, NULL);
}

/*
 * Open MPI 4.1's communicator constructors agree on a context id through
 * MPI_Iallreduce calls of one MPI_INT with MPI_MAX or MPI_MIN on the
 * parent (comm_cid.c), each started from the progress engine when the one
 * before it ended.  Under MPI_Comm_idup that moment differs between ranks
 * (inside a blocking collective of the program on one rank, before it on
 * another), while the team pairs calls by their order on each rank: such
 * a call would pair with one of the program's.  Nothing in the arguments
 * tells the two kinds apart, so every call of that shape goes to the
 * previous module, which pairs its calls apart from the team's.
 */
static int coll_cxl_cid_shape(int count, const struct ompi_datatype_t *dtype,
                              const struct ompi_op_t *op)
{
    return (count == 1) && (dtype == MPI_INT) &&
           ((op == MPI_MAX) || (op == MPI_MIN));
}

int mca_coll_cxl_iallreduce(const void *sbuf, void *rbuf, int count,
                            struct ompi_datatype_t *dtype,
                            struct ompi_op_t *op,
                            struct ompi_communicator_t *comm,
                            ompi_request_t **request,
                            mca_coll_base_module_t *module)
{
    mca_coll_cxl_module_t *m = (mca_coll_cxl_module_t *)module;

    if (OPAL_UNLIKELY(coll_cxl_cid_shape(count, dtype, op)) &&
        mca_coll_cxl_component.cid_prev) {
        /* before the gate: never held, never starts a team */
        mca_coll_cxl_count_fallback(m, COLL_CXL_ALLREDUCE,
                                    "one MPI_INT with MPI_MAX or MPI_MIN, "
                                    "the shape of Open MPI's context-id "
                                    "agreement (coll_cxl_cid_prev)");
        return m->prev.iallreduce(sbuf, rbuf, count, dtype, op, comm, request,
                                  m->prev.iallreduce_module);
    }
    COLL_CXL_NB_GATE(m, request, .coll = COLL_CXL_ALLREDUCE, .sbuf = sbuf,
                     .rbuf = rbuf, .scount = count, .sdtype = dtype, .op = op);
    return coll_cxl_allreduce_any(sbuf, rbuf, count, dtype, op, comm, m,
                                  request);
}

int mca_coll_cxl_reduce_scatter_block(const void *sbuf, void *rbuf,
                                      int rcount,
                                      struct ompi_datatype_t *dtype,
                                      struct ompi_op_t *op,
                                      struct ompi_communicator_t *comm,
                                      mca_coll_base_module_t *module)
{
    return coll_cxl_reduce_scatter_block_any(sbuf, rbuf, rcount, dtype, op,
                                             comm,
                                             (mca_coll_cxl_module_t *)module,
                                             NULL);
}

int mca_coll_cxl_ireduce_scatter_block(const void *sbuf, void *rbuf,
                                       int rcount,
                                       struct ompi_datatype_t *dtype,
                                       struct ompi_op_t *op,
                                       struct ompi_communicator_t *comm,
                                       ompi_request_t **request,
                                       mca_coll_base_module_t *module)
{
    mca_coll_cxl_module_t *m = (mca_coll_cxl_module_t *)module;

    COLL_CXL_NB_GATE(m, request, .coll = COLL_CXL_REDUCE_SCATTER_BLOCK,
                     .sbuf = sbuf, .rbuf = rbuf, .rcount = rcount,
                     .sdtype = dtype, .op = op);
    return coll_cxl_reduce_scatter_block_any(sbuf, rbuf, rcount, dtype, op,
                                             comm, m, request);
}
