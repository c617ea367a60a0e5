/*
 * Names and sizes of the public enums of <ucx_cxl/coll.h>: one table per
 * enum, indexed by its value, so a new value without a name fails to build.
 */
#include <ucx_cxl/coll.h>

#define CXL_COLL_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define CXL_COLL_NAME(table, value, last) \
    (((unsigned)(value) < (unsigned)(last)) ? (table)[value] : "unknown")

static const char *const cxl_coll_status_names[] = {
    [CXL_COLL_OK]                = "success",
    [CXL_COLL_INPROGRESS]        = "in progress",
    [CXL_COLL_ERR_INVAL]         = "invalid argument",
    [CXL_COLL_ERR_UNSUPPORTED]   = "datatype or operation not supported",
    [CXL_COLL_ERR_NO_MEMORY]     = "out of memory",
    [CXL_COLL_ERR_NOT_SAME_POOL] = "team members do not map the same pool",
    [CXL_COLL_ERR_PEER_DEAD]     = "a team member died",
    [CXL_COLL_ERR_TIMEOUT]       = "timed out",
    [CXL_COLL_ERR_OOB]           = "out-of-band exchange failed",
    [CXL_COLL_ERR_POOL]          = "pool error",
    [CXL_COLL_ERR_BUSY]          = "too many outstanding collectives",
    [CXL_COLL_ERR_MISMATCH]      = "the ranks' calls differ",
};

static const struct {
    const char *name;
    size_t      size;
} cxl_coll_dtypes[] = {
    [CXL_COLL_INT8]     = {"int8", 1},
    [CXL_COLL_UINT8]    = {"uint8", 1},
    [CXL_COLL_INT16]    = {"int16", 2},
    [CXL_COLL_UINT16]   = {"uint16", 2},
    [CXL_COLL_INT32]    = {"int32", 4},
    [CXL_COLL_UINT32]   = {"uint32", 4},
    [CXL_COLL_INT64]    = {"int64", 8},
    [CXL_COLL_UINT64]   = {"uint64", 8},
    [CXL_COLL_FLOAT32]  = {"float32", 4},
    [CXL_COLL_FLOAT64]  = {"float64", 8},
    [CXL_COLL_FLOAT16]  = {"float16", 2},
    [CXL_COLL_BFLOAT16] = {"bfloat16", 2},
};

static const char *const cxl_coll_op_names[] = {
    [CXL_COLL_SUM]  = "sum",
    [CXL_COLL_PROD] = "prod",
    [CXL_COLL_MIN]  = "min",
    [CXL_COLL_MAX]  = "max",
    [CXL_COLL_BAND] = "band",
    [CXL_COLL_BOR]  = "bor",
    [CXL_COLL_BXOR] = "bxor",
};

static const char *const cxl_coll_type_names[] = {
    [CXL_COLL_BARRIER]        = "barrier",
    [CXL_COLL_BCAST]          = "bcast",
    [CXL_COLL_REDUCE]         = "reduce",
    [CXL_COLL_ALLREDUCE]      = "allreduce",
    [CXL_COLL_GATHER]         = "gather",
    [CXL_COLL_SCATTER]        = "scatter",
    [CXL_COLL_ALLGATHER]      = "allgather",
    [CXL_COLL_REDUCE_SCATTER] = "reduce_scatter",
    [CXL_COLL_ALLTOALL]       = "alltoall",
};

_Static_assert(CXL_COLL_ARRAY_SIZE(cxl_coll_status_names) == CXL_COLL_ERR_LAST,
               "a status without a name");
_Static_assert(CXL_COLL_ARRAY_SIZE(cxl_coll_dtypes) == CXL_COLL_DTYPE_LAST,
               "a datatype without a name");
_Static_assert(CXL_COLL_ARRAY_SIZE(cxl_coll_op_names) == CXL_COLL_OP_LAST,
               "an operation without a name");
_Static_assert(CXL_COLL_ARRAY_SIZE(cxl_coll_type_names) == CXL_COLL_TYPE_LAST,
               "a collective without a name");

const char *cxl_coll_strerror(cxl_coll_status_t status)
{
    return CXL_COLL_NAME(cxl_coll_status_names, status, CXL_COLL_ERR_LAST);
}

size_t cxl_coll_dtype_size(cxl_coll_dtype_t dtype)
{
    return ((unsigned)dtype < CXL_COLL_DTYPE_LAST) ?
           cxl_coll_dtypes[dtype].size : 0;
}

const char *cxl_coll_dtype_name(cxl_coll_dtype_t dtype)
{
    return ((unsigned)dtype < CXL_COLL_DTYPE_LAST) ?
           cxl_coll_dtypes[dtype].name : "unknown";
}

const char *cxl_coll_op_name(cxl_coll_op_t op)
{
    return CXL_COLL_NAME(cxl_coll_op_names, op, CXL_COLL_OP_LAST);
}

const char *cxl_coll_type_name(cxl_coll_type_t type)
{
    return CXL_COLL_NAME(cxl_coll_type_names, type, CXL_COLL_TYPE_LAST);
}

int cxl_coll_op_supported(cxl_coll_dtype_t dtype, cxl_coll_op_t op)
{
    if (((unsigned)dtype >= CXL_COLL_DTYPE_LAST) ||
        ((unsigned)op >= CXL_COLL_OP_LAST)) {
        return 0;
    }
    switch (op) {
    case CXL_COLL_BAND:
    case CXL_COLL_BOR:
    case CXL_COLL_BXOR:
        return dtype <= CXL_COLL_UINT64;
    default:
        return 1;
    }
}
