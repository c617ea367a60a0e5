/*
 * Reference arithmetic of the collectives tests (see coll_ref.h).
 */
#include "coll_ref.h"

#include <math.h>
#include <string.h>

/* ---- reference: 16-bit floats through double ---- */

const coll_ref_fmt_t coll_ref_fmt_f16  = {10, 5};
const coll_ref_fmt_t coll_ref_fmt_bf16 = {7, 8};

int coll_ref_fmt_bias(coll_ref_fmt_t f)
{
    return (1 << (f.ebits - 1)) - 1;
}

int coll_ref_fmt_isnan(coll_ref_fmt_t f, uint32_t bits)
{
    uint32_t e = (bits >> f.mbits) & ((1u << f.ebits) - 1);

    return (e == (1u << f.ebits) - 1) && (bits & ((1u << f.mbits) - 1));
}

double coll_ref_decode(coll_ref_fmt_t f, uint32_t bits)
{
    uint32_t emask = (1u << f.ebits) - 1;
    uint32_t e     = (bits >> f.mbits) & emask;
    uint32_t m     = bits & ((1u << f.mbits) - 1);
    double   s     = (bits >> (f.mbits + f.ebits)) & 1 ? -1.0 : 1.0;
    int      bias  = coll_ref_fmt_bias(f);

    if (e == emask) {
        return m ? NAN : s * INFINITY;
    }
    if (e == 0) {
        return s * ldexp((double)m, 1 - bias - f.mbits);
    }
    return s * ldexp((double)((1u << f.mbits) + m), (int)e - bias - f.mbits);
}

/* nearest representable, ties to even; v must not be NaN */
uint32_t coll_ref_encode(coll_ref_fmt_t f, double v)
{
    int      bias  = coll_ref_fmt_bias(f);
    int      emin  = 1 - bias;
    uint32_t sign  = signbit(v) ? 1u << (f.mbits + f.ebits) : 0;
    uint32_t inf   = sign | (((1u << f.ebits) - 1) << f.mbits);
    double   a     = fabs(v), n, frac, one = ldexp(1.0, f.mbits);
    int      e;

    if (isinf(a)) {
        return inf;
    }
    if (a == 0) {
        return sign;
    }
    frexp(a, &e);
    e -= 1;                               /* a in [2^e, 2^(e+1)) */
    if (e < emin) {
        e = emin;
    }
    n    = ldexp(a, f.mbits - e);         /* significand in quanta: exact */
    frac = n - floor(n);
    n    = floor(n);
    if ((frac > 0.5) || ((frac == 0.5) && (fmod(n, 2.0) == 1.0))) {
        n += 1;
    }
    if (n == 2 * one) {                   /* rounded up to the next binade */
        n  = one;
        e += 1;
    }
    if (n < one) {                        /* subnormal (e == emin) */
        return sign | (uint32_t)n;
    }
    if (e > bias) {
        return inf;
    }
    return sign | ((uint32_t)(e + bias) << f.mbits) | (uint32_t)(n - one);
}

/* ---- reference: one element of every dtype/op ---- */

int coll_ref_dtype_is_int(cxl_coll_dtype_t dt)
{
    return dt <= CXL_COLL_UINT64;
}

int coll_ref_dtype_is_signed(cxl_coll_dtype_t dt)
{
    return (dt == CXL_COLL_INT8) || (dt == CXL_COLL_INT16) ||
           (dt == CXL_COLL_INT32) || (dt == CXL_COLL_INT64);
}

uint64_t coll_ref_load_bits(const void *p, size_t size)
{
    switch (size) {
    case 1: return *(const uint8_t*)p;
    case 2: return *(const uint16_t*)p;
    case 4: return *(const uint32_t*)p;
    default: return *(const uint64_t*)p;
    }
}

void coll_ref_store_bits(void *p, size_t size, uint64_t v)
{
    switch (size) {
    case 1: *(uint8_t*)p = (uint8_t)v; break;
    case 2: *(uint16_t*)p = (uint16_t)v; break;
    case 4: *(uint32_t*)p = (uint32_t)v; break;
    default: *(uint64_t*)p = v; break;
    }
}

/* sign-extends the low size bytes of bits */
static __int128 coll_ref_sext(uint64_t bits, size_t size)
{
    int shift = 64 - 8 * (int)size;

    return (__int128)((int64_t)(bits << shift) >> shift);
}

static uint64_t coll_ref_int(cxl_coll_dtype_t dt, cxl_coll_op_t op,
                             uint64_t x, uint64_t y)
{
    size_t   size = cxl_coll_dtype_size(dt);
    __int128 sx, sy, r;

    if (coll_ref_dtype_is_signed(dt)) {
        sx = coll_ref_sext(x, size);
        sy = coll_ref_sext(y, size);
    } else {
        sx = (__int128)x;
        sy = (__int128)y;
    }
    switch (op) {
    case CXL_COLL_SUM:  r = sx + sy; break;
    /* |operands| < 2^64, so the product fits in 127 bits + sign only for
     * 32-bit and smaller; take the low 64 bits through unsigned __int128 */
    case CXL_COLL_PROD:
        r = (__int128)((unsigned __int128)sx * (unsigned __int128)sy);
        break;
    case CXL_COLL_MIN:  r = (sx <= sy) ? sx : sy; break;
    case CXL_COLL_MAX:  r = (sx >= sy) ? sx : sy; break;
    case CXL_COLL_BAND: r = sx & sy; break;
    case CXL_COLL_BOR:  r = sx | sy; break;
    default:            r = sx ^ sy; break;
    }
    /* truncation modulo 2^(8 * size) */
    return (uint64_t)(unsigned __int128)r &
           ((size == 8) ? ~0ull : (1ull << (8 * size)) - 1);
}

/* min/max select of fmin/fmax semantics: NaN ignored, both NaN -> y,
 * equal -> x; returns 1 to take y */
static int coll_ref_take_y(cxl_coll_op_t op, double x, double y)
{
    if (isnan(x)) {
        return 1;
    }
    if (isnan(y)) {
        return 0;
    }
    if (x == y) {
        return 0;
    }
    return (op == CXL_COLL_MIN) ? (y < x) : (y > x);
}

/* expected bits; *any_nan set when any NaN is an acceptable result */
uint64_t coll_ref_op(cxl_coll_dtype_t dt, cxl_coll_op_t op, uint64_t x,
                         uint64_t y, int *any_nan)
{
    coll_ref_fmt_t fmt;
    float fx, fy, fr;
    double dx, dy, dr;
    uint64_t bits;

    *any_nan = 0;
    if (coll_ref_dtype_is_int(dt)) {
        return coll_ref_int(dt, op, x, y);
    }
    switch (dt) {
    case CXL_COLL_FLOAT32:
        memcpy(&fx, &x, 4); /* little endian: the low bytes */
        memcpy(&fy, &y, 4);
        if ((op == CXL_COLL_MIN) || (op == CXL_COLL_MAX)) {
            return coll_ref_take_y(op, fx, fy) ? y : x;
        }
        fr = (float)((op == CXL_COLL_SUM) ? (double)fx + (double)fy :
                                            (double)fx * (double)fy);
        *any_nan = isnan(fr);
        bits     = 0;
        memcpy(&bits, &fr, 4);
        return bits;
    case CXL_COLL_FLOAT64:
        memcpy(&dx, &x, 8);
        memcpy(&dy, &y, 8);
        if ((op == CXL_COLL_MIN) || (op == CXL_COLL_MAX)) {
            return coll_ref_take_y(op, dx, dy) ? y : x;
        }
        dr = (double)((op == CXL_COLL_SUM) ? (__float128)dx + (__float128)dy :
                                             (__float128)dx * (__float128)dy);
        *any_nan = isnan(dr);
        memcpy(&bits, &dr, 8);
        return bits;
    default:
        fmt = (dt == CXL_COLL_FLOAT16) ? coll_ref_fmt_f16 : coll_ref_fmt_bf16;
        dx  = coll_ref_decode(fmt, (uint32_t)x);
        dy  = coll_ref_decode(fmt, (uint32_t)y);
        if ((op == CXL_COLL_MIN) || (op == CXL_COLL_MAX)) {
            return coll_ref_take_y(op, dx, dy) ? y : x;
        }
        dr = (op == CXL_COLL_SUM) ? dx + dy : dx * dy;
        if (isnan(dr)) {
            *any_nan = 1;
            return 0x7fff;
        }
        return coll_ref_encode(fmt, dr);
    }
}

int coll_ref_is_nan(cxl_coll_dtype_t dt, uint64_t bits)
{
    float f;
    double d;

    switch (dt) {
    case CXL_COLL_FLOAT32: memcpy(&f, &bits, 4); return isnan(f);
    case CXL_COLL_FLOAT64: memcpy(&d, &bits, 8); return isnan(d);
    case CXL_COLL_FLOAT16: return coll_ref_fmt_isnan(coll_ref_fmt_f16, (uint32_t)bits);
    case CXL_COLL_BFLOAT16: return coll_ref_fmt_isnan(coll_ref_fmt_bf16, (uint32_t)bits);
    default: return 0;
    }
}

uint64_t coll_ref_rand(uint64_t *state)
{
    uint64_t x = *state;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 2685821657736338717ull;
}
