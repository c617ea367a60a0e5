/*
 * Reads of bytes another core has just written: a peer's publication in
 * its small slot, data slot or pool buffer (coll_far.c).
 */
#ifndef CXL_COLL_FAR_H
#define CXL_COLL_FAR_H

#include "coll_reduce.h"

#include <stddef.h>

/* Bytes up to which cxl_coll_far_reduce() is the kernel alone: the lines
 * of a reduction of more than two are worth requesting ahead. */
#define CXL_COLL_FAR_MIN 128

/* Operands of cxl_coll_far_reduce() that lie in a peer's publication. */
#define CXL_COLL_FAR_A 1u
#define CXL_COLL_FAR_B 2u

/* memcpy(dst, src, len), src's lines requested ahead of their use. */
void cxl_coll_far_copy(void *dst, const void *src, size_t len);

/* cxl_coll_reduce_apply(), the lines of the operands named in far
 * (CXL_COLL_FAR_A, CXL_COLL_FAR_B) requested ahead of their use. */
void cxl_coll_far_reduce(cxl_coll_dtype_t dtype, cxl_coll_op_t op,
                         void *dst, const void *a, const void *b,
                         size_t count, unsigned far);

#endif
