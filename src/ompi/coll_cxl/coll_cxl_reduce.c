/*
 * The reductions: reduce, allreduce, reduce_scatter_block.  MPI requires
 * the same count, datatype and op on every rank, so deciding from them
 * keeps all ranks on the same path: the library for the predefined types
 * and operations it provides (cxl_coll_op_supported), the previous module
 * for the rest.  MPI_IN_PLACE maps to CXL_COLL_IN_PLACE (reduce: on the
 * root; allreduce and reduce_scatter_block: on every rank).
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

int mca_coll_cxl_reduce(const void *sbuf, void *rbuf, int count,
                        struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                        int root, struct ompi_communicator_t *comm,
                        mca_coll_base_module_t *module)
{
    mca_coll_cxl_module_t *m = (mca_coll_cxl_module_t *)module;
    cxl_coll_args_t args;
    const char *why;

    if (count < 0) {
        return MPI_ERR_COUNT; /* the same on every rank */
    }
    why = (m->team == NULL) ? "no team" :
          coll_cxl_reduce_check(dtype, op, &args.dtype, &args.op);
    if (why[0] != '\0') {
        mca_coll_cxl_count_fallback(m, COLL_CXL_REDUCE, why);
        return m->prev.reduce(sbuf, rbuf, count, dtype, op, root, comm,
                              m->prev.reduce_module);
    }
    args.type  = CXL_COLL_REDUCE;
    args.sbuf  = (sbuf == MPI_IN_PLACE) ? CXL_COLL_IN_PLACE : sbuf;
    args.rbuf  = (ompi_comm_rank(comm) == root) ? rbuf : NULL;
    args.count = (size_t)count;
    args.root  = root;
    return mca_coll_cxl_run(m, &args);
}

int mca_coll_cxl_allreduce(const void *sbuf, void *rbuf, int count,
                           struct ompi_datatype_t *dtype,
                           struct ompi_op_t *op,
                           struct ompi_communicator_t *comm,
                           mca_coll_base_module_t *module)
{
    mca_coll_cxl_module_t *m = (mca_coll_cxl_module_t *)module;
    cxl_coll_args_t args;
    const char *why;

    if (count < 0) {
        return MPI_ERR_COUNT; /* the same on every rank */
    }
    why = (m->team == NULL) ? "no team" :
          coll_cxl_reduce_check(dtype, op, &args.dtype, &args.op);
    if (why[0] != '\0') {
        mca_coll_cxl_count_fallback(m, COLL_CXL_ALLREDUCE, why);
        return m->prev.allreduce(sbuf, rbuf, count, dtype, op, comm,
                                 m->prev.allreduce_module);
    }
    args.type  = CXL_COLL_ALLREDUCE;
    args.sbuf  = (sbuf == MPI_IN_PLACE) ? CXL_COLL_IN_PLACE : sbuf;
    args.rbuf  = rbuf;
    args.count = (size_t)count;
    args.root  = 0;
    return mca_coll_cxl_run(m, &args);
}

int mca_coll_cxl_reduce_scatter_block(const void *sbuf, void *rbuf,
                                      int rcount,
                                      struct ompi_datatype_t *dtype,
                                      struct ompi_op_t *op,
                                      struct ompi_communicator_t *comm,
                                      mca_coll_base_module_t *module)
{
    mca_coll_cxl_module_t *m = (mca_coll_cxl_module_t *)module;
    cxl_coll_args_t args;
    const char *why;

    if (rcount < 0) {
        return MPI_ERR_COUNT;
    }
    why = (m->team == NULL) ? "no team" :
          coll_cxl_reduce_check(dtype, op, &args.dtype, &args.op);
    if (why[0] != '\0') {
        mca_coll_cxl_count_fallback(m, COLL_CXL_REDUCE_SCATTER_BLOCK, why);
        return m->prev.reduce_scatter_block(sbuf, rbuf, rcount, dtype, op,
                                            comm,
                                            m->prev.reduce_scatter_block_module);
    }
    args.type  = CXL_COLL_REDUCE_SCATTER;
    args.sbuf  = (sbuf == MPI_IN_PLACE) ? CXL_COLL_IN_PLACE : sbuf;
    args.rbuf  = rbuf;
    args.count = (size_t)rcount;
    args.root  = 0;
    return mca_coll_cxl_run(m, &args);
}
