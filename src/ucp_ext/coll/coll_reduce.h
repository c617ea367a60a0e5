/*
 * Reduction kernels of libcxl_coll (interface shared with the collectives).
 */
#ifndef CXL_COLL_REDUCE_H
#define CXL_COLL_REDUCE_H

#include <ucx_cxl/coll.h>

#include <stddef.h>

/* dst[i] = a[i] OP b[i] for i < count; dst may equal a or b (not overlap partially).
 * Integer arithmetic wraps (computed in unsigned, no UB); float16/bfloat16 are computed
 * in float and rounded to nearest even; min/max of floats follow fmin/fmax semantics.
 * dtype/op must satisfy cxl_coll_op_supported(). */
void cxl_coll_reduce_apply(cxl_coll_dtype_t dtype, cxl_coll_op_t op, void *dst,
                           const void *a, const void *b, size_t count);

#endif
