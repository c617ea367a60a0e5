/*
 * Reference arithmetic of the collectives tests (test_coll_reduce,
 * coll_check), written independently of the library's kernels: integers in
 * __int128 from sign- or zero-extended operands, then truncated; float32 in
 * double and float64 in __float128, rounded once (both carry more than
 * twice the precision plus two bits: the correctly rounded result);
 * float16/bfloat16 decoded to double with ldexp, operated on, and encoded
 * with an explicit round to nearest even of the scaled significand.
 * Values travel as bit patterns in the low bytes of a uint64_t.
 */
#ifndef COLL_REF_H
#define COLL_REF_H

#include <ucx_cxl/coll.h>

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int mbits;  /* stored mantissa bits */
    int ebits;
} coll_ref_fmt_t;

extern const coll_ref_fmt_t coll_ref_fmt_f16;
extern const coll_ref_fmt_t coll_ref_fmt_bf16;

int      coll_ref_fmt_bias(coll_ref_fmt_t f);
int      coll_ref_fmt_isnan(coll_ref_fmt_t f, uint32_t bits);
double   coll_ref_decode(coll_ref_fmt_t f, uint32_t bits);
/* nearest representable, ties to even; v must not be NaN */
uint32_t coll_ref_encode(coll_ref_fmt_t f, double v);

int      coll_ref_dtype_is_int(cxl_coll_dtype_t dt);
int      coll_ref_dtype_is_signed(cxl_coll_dtype_t dt);
uint64_t coll_ref_load_bits(const void *p, size_t size);
void     coll_ref_store_bits(void *p, size_t size, uint64_t v);
int      coll_ref_is_nan(cxl_coll_dtype_t dt, uint64_t bits);
/* xorshift64* step of *state (nonzero): the tests' pseudo-random bits */
uint64_t coll_ref_rand(uint64_t *state);

/*
 * x OP y as cxl_coll_reduce_apply() defines it; *any_nan is set when the
 * result is a NaN whose payload is the CPU's business (sum/prod), so any
 * NaN is right.  min/max select an operand's bits: NaN ignored, both NaN
 * give y, equal values give x.
 */
uint64_t coll_ref_op(cxl_coll_dtype_t dt, cxl_coll_op_t op, uint64_t x,
                     uint64_t y, int *any_nan);

#endif
