/*
 * Elementwise reduction kernels of the collectives and the conversions of
 * the 16-bit floating-point types.
 */
#ifndef CXL_COLL_REDUCE_H
#define CXL_COLL_REDUCE_H

#include <ucx_cxl/coll.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/*
 * dst[i] = a[i] OP b[i] for i < count; dst may equal a or b (not overlap
 * partially).  Integer arithmetic wraps (computed in unsigned, no UB);
 * float32/float64 are computed in their own type (the result is the C
 * expression a[i] + b[i] resp. a[i] * b[i]); float16/bfloat16 are computed
 * in float and rounded to nearest even, which is the correctly rounded
 * result (float carries more than twice their precision plus two bits).
 *
 * min/max of floats follow fmin/fmax: a NaN operand is ignored when the
 * other is a number; when both are NaN the result is b.  Equal operands
 * (including -0 against +0) give a, so the result of a fixed reduction
 * order does not depend on anything else.  min/max of float16/bfloat16
 * return one input's bits unchanged (NaN payloads included).  sum/prod
 * results that are NaN have the payload the CPU produces; float16/bfloat16
 * NaNs come out quiet with the upper payload bits kept.
 *
 * dtype/op must satisfy cxl_coll_op_supported(); otherwise dst is not
 * touched.
 */
void cxl_coll_reduce_apply(cxl_coll_dtype_t dtype, cxl_coll_op_t op, void *dst,
                           const void *a, const void *b, size_t count);

/* A kernel: dst[i] = a[i] OP b[i] for i < count, as cxl_coll_reduce_apply()
 * but with every pointer aligned to the element size. */
typedef void (*cxl_coll_red_fn_t)(void *dst, const void *a, const void *b,
                                  size_t count);

/* Whether dst, a and b all lie on es-byte boundaries (es a power of 2),
 * as a kernel needs them. */
static inline int cxl_coll_red_aligned(size_t es, const void *dst,
                                       const void *a, const void *b)
{
    return (((uintptr_t)dst | (uintptr_t)a | (uintptr_t)b) & (es - 1)) == 0;
}

/* The kernel cxl_coll_reduce_apply() runs for dtype and op (NULL where
 * cxl_coll_op_supported() says no): for a caller that reduces one pair of
 * aligned buffers in pieces, looked up once. */
cxl_coll_red_fn_t cxl_coll_reduce_kernel(cxl_coll_dtype_t dtype,
                                         cxl_coll_op_t op);

/* The same with the portable loops only, without the CPU-specific paths
 * (float16 sum/prod with F16C): the tests compare both. */
void cxl_coll_reduce_apply_generic(cxl_coll_dtype_t dtype, cxl_coll_op_t op,
                                   void *dst, const void *a, const void *b,
                                   size_t count);

/* The builds of the portable loops: the x86-64 baseline (SSE2) and AVX2.
 * The generic entry runs the widest one the CPU has. */
typedef enum {
    CXL_COLL_RED_ISA_BASE,
    CXL_COLL_RED_ISA_AVX2,
    CXL_COLL_RED_ISA_LAST
} cxl_coll_red_isa_t;

/* 1 if this build has the kernels for isa and the CPU runs them */
int cxl_coll_reduce_isa_usable(cxl_coll_red_isa_t isa);

/* The portable loops of one build (the tests run every usable one); dst is
 * not touched where isa is not usable. */
void cxl_coll_reduce_apply_isa(cxl_coll_red_isa_t isa, cxl_coll_dtype_t dtype,
                               cxl_coll_op_t op, void *dst, const void *a,
                               const void *b, size_t count);

static inline float cxl_coll_bits_to_f32(uint32_t bits)
{
    float f;

    memcpy(&f, &bits, sizeof(f));
    return f;
}

static inline uint32_t cxl_coll_f32_to_bits(float f)
{
    uint32_t bits;

    memcpy(&bits, &f, sizeof(bits));
    return bits;
}

/*
 * The conversions are branch-free (both sides of every case computed, then
 * selected) so that GCC vectorises the loops that call them.  Comparisons
 * are on int32_t: absolute values fit, and SSE2 compares signed only.
 */

/* IEEE binary16 to float: exact; subnormals become normal floats; inf and
 * NaN (payload included) carry over. */
static inline float cxl_coll_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    int32_t  em   = h & 0x7fff;             /* exponent and mantissa */
    uint32_t norm = ((uint32_t)em << 13) + (112u << 23); /* rebias 15->127 */
    uint32_t inf  = ((uint32_t)em << 13) | 0x7f800000;
    /* subnormal m * 2^-24: (1 + m/1024) * 2^-14 - 2^-14, exact in float */
    float    sub  = cxl_coll_bits_to_f32(((uint32_t)em << 13) | (113u << 23)) -
                    cxl_coll_bits_to_f32(113u << 23);
    uint32_t bits;

    bits = (em >= 0x7c00) ? inf : norm;
    bits = (em < 0x0400) ? cxl_coll_f32_to_bits(sub) : bits;
    return cxl_coll_bits_to_f32(bits | sign);
}

/* float to IEEE binary16, round to nearest even; NaN stays NaN (quiet, the
 * upper payload bits kept). */
static inline uint16_t cxl_coll_f32_to_f16(float f)
{
    uint32_t bits = cxl_coll_f32_to_bits(f);
    uint32_t sign = (bits >> 16) & 0x8000;
    int32_t  abs  = bits & 0x7fffffff;
    uint32_t uabs = (uint32_t)abs;
    uint32_t nan  = 0x7e00 | ((uabs >> 13) & 0x3ff);
    /* normal half: rebias 127->15, drop 13 bits rounding to nearest even;
     * a carry out of the mantissa moves into the exponent as it should */
    uint32_t norm = (uabs - (112u << 23) + 0xfff + ((uabs >> 13) & 1)) >> 13;
    /* below 2^-14: adding 0.5f leaves units of 2^-24 in the low mantissa
     * bits, rounded by the FPU to nearest even like every float operation */
    uint32_t sub  = cxl_coll_f32_to_bits(cxl_coll_bits_to_f32(uabs) + 0.5f) -
                    0x3f000000;
    uint32_t r;

    r = (abs < 0x38800000) ? sub : norm;
    r = (abs >= 0x477ff000) ? 0x7c00 : r;   /* >= 65520 rounds to inf */
    r = (abs > 0x7f800000) ? nan : r;
    return (uint16_t)(r | sign);
}

static inline float cxl_coll_bf16_to_f32(uint16_t h)
{
    return cxl_coll_bits_to_f32((uint32_t)h << 16);
}

/* float to bfloat16, round to nearest even; NaN stays NaN (quiet). */
static inline uint16_t cxl_coll_f32_to_bf16(float f)
{
    uint32_t bits = cxl_coll_f32_to_bits(f);
    uint32_t rne  = (bits + 0x7fff + ((bits >> 16) & 1)) >> 16;
    uint32_t nan  = (bits >> 16) | 0x40;

    return (uint16_t)(((int32_t)(bits & 0x7fffffff) > 0x7f800000) ? nan : rne);
}

#endif
