/*
 * Placeholder scalar reduction kernels (the `reduce` branch provides the
 * real ones): one loop per type and operation, integers in unsigned
 * arithmetic so they wrap, float16/bfloat16 through float.
 */
#include "coll_reduce.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static float cxl_coll_f16_to_f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff, bits;
    float f;

    if (exp == 0) {
        f = ldexpf((float)man, -24);
        return sign ? -f : f;
    }
    if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    }
    memcpy(&f, &bits, sizeof(f));
    return f;
}

static uint16_t cxl_coll_f_to_f16(float f)
{
    uint32_t bits, sign, man, lsb;
    int32_t exp;
    float a;

    memcpy(&bits, &f, sizeof(bits));
    sign = (bits >> 16) & 0x8000;
    if (isnan(f)) {
        return (uint16_t)(sign | 0x7e00);
    }
    a = fabsf(f);
    if (a >= 65520.0f) {
        return (uint16_t)(sign | 0x7c00);
    }
    if (a < 6.103515625e-05f) {
        /* subnormal: a / 2^-24, rounded to nearest even */
        return (uint16_t)(sign | (uint32_t)nearbyintf(a * 16777216.0f));
    }
    exp = (int32_t)((bits >> 23) & 0xff) - 127 + 15;
    man = bits & 0x7fffff;
    lsb = (man >> 13) & 1;
    man += 0xfff + lsb;
    if (man & 0x800000) {
        man = 0;
        exp++;
    }
    return (uint16_t)(sign | ((uint32_t)exp << 10) | (man >> 13));
}

static float cxl_coll_bf16_to_f(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;

    memcpy(&f, &bits, sizeof(f));
    return f;
}

static uint16_t cxl_coll_f_to_bf16(float f)
{
    uint32_t bits;

    memcpy(&bits, &f, sizeof(bits));
    if (isnan(f)) {
        return (uint16_t)((bits >> 16) | 0x40);
    }
    bits += 0x7fff + ((bits >> 16) & 1);
    return (uint16_t)(bits >> 16);
}

#define CXL_COLL_INT_LOOP(T, UT, ST)                                         \
    do {                                                                     \
        T *d = dst;                                                          \
        const T *x = a, *y = b;                                              \
        size_t i;                                                            \
        for (i = 0; i < count; ++i) {                                        \
            UT u = (UT)x[i], v = (UT)y[i];                                   \
            ST s = (ST)x[i], t = (ST)y[i];                                   \
            switch (op) {                                                    \
            case CXL_COLL_SUM:  d[i] = (T)(UT)((uintmax_t)u + v); break;              \
            case CXL_COLL_PROD: d[i] = (T)(UT)((uintmax_t)u * v); break;              \
            case CXL_COLL_MIN:  d[i] = (T)((s < t) ? s : t); break;          \
            case CXL_COLL_MAX:  d[i] = (T)((s > t) ? s : t); break;          \
            case CXL_COLL_BAND: d[i] = (T)(u & v); break;                    \
            case CXL_COLL_BOR:  d[i] = (T)(u | v); break;                    \
            default:            d[i] = (T)(u ^ v); break;                    \
            }                                                                \
        }                                                                    \
    } while (0)

static float cxl_coll_fop(cxl_coll_op_t op, float x, float y)
{
    switch (op) {
    case CXL_COLL_SUM:  return x + y;
    case CXL_COLL_PROD: return x * y;
    case CXL_COLL_MIN:  return fminf(x, y);
    default:            return fmaxf(x, y);
    }
}

static double cxl_coll_dop(cxl_coll_op_t op, double x, double y)
{
    switch (op) {
    case CXL_COLL_SUM:  return x + y;
    case CXL_COLL_PROD: return x * y;
    case CXL_COLL_MIN:  return fmin(x, y);
    default:            return fmax(x, y);
    }
}

void cxl_coll_reduce_apply(cxl_coll_dtype_t dtype, cxl_coll_op_t op, void *dst,
                           const void *a, const void *b, size_t count)
{
    size_t i;

    switch (dtype) {
    case CXL_COLL_INT8:   CXL_COLL_INT_LOOP(int8_t, uint8_t, int8_t); break;
    case CXL_COLL_UINT8:  CXL_COLL_INT_LOOP(uint8_t, uint8_t, uint8_t); break;
    case CXL_COLL_INT16:  CXL_COLL_INT_LOOP(int16_t, uint16_t, int16_t); break;
    case CXL_COLL_UINT16: CXL_COLL_INT_LOOP(uint16_t, uint16_t, uint16_t); break;
    case CXL_COLL_INT32:  CXL_COLL_INT_LOOP(int32_t, uint32_t, int32_t); break;
    case CXL_COLL_UINT32: CXL_COLL_INT_LOOP(uint32_t, uint32_t, uint32_t); break;
    case CXL_COLL_INT64:  CXL_COLL_INT_LOOP(int64_t, uint64_t, int64_t); break;
    case CXL_COLL_UINT64: CXL_COLL_INT_LOOP(uint64_t, uint64_t, uint64_t); break;
    case CXL_COLL_FLOAT32: {
        float *d = dst;
        const float *x = a, *y = b;
        for (i = 0; i < count; ++i) {
            d[i] = cxl_coll_fop(op, x[i], y[i]);
        }
        break;
    }
    case CXL_COLL_FLOAT64: {
        double *d = dst;
        const double *x = a, *y = b;
        for (i = 0; i < count; ++i) {
            d[i] = cxl_coll_dop(op, x[i], y[i]);
        }
        break;
    }
    case CXL_COLL_FLOAT16: {
        uint16_t *d = dst;
        const uint16_t *x = a, *y = b;
        for (i = 0; i < count; ++i) {
            d[i] = cxl_coll_f_to_f16(cxl_coll_fop(op, cxl_coll_f16_to_f(x[i]),
                                                  cxl_coll_f16_to_f(y[i])));
        }
        break;
    }
    case CXL_COLL_BFLOAT16: {
        uint16_t *d = dst;
        const uint16_t *x = a, *y = b;
        for (i = 0; i < count; ++i) {
            d[i] = cxl_coll_f_to_bf16(cxl_coll_fop(op, cxl_coll_bf16_to_f(x[i]),
                                                   cxl_coll_bf16_to_f(y[i])));
        }
        break;
    }
    default:
        break;
    }
}
