/*
 * test_coll_reduce [--bench [BYTES]] - the reduction kernels of libcxl_coll
 * (cxl_coll_reduce_apply) against the tests' own reference arithmetic
 * (coll_ref.c: integers in __int128, float32 in double, float64 in
 * __float128, float16/bfloat16 through double with an explicit rounding).
 *
 * Checked: every dtype x supported op x count (0, 1, 7, 1000, 65539) x
 * aliasing (dst distinct, dst == a, dst == b, dst == a == b), through the
 * dispatching entry, the portable loops alone and each build of them (x86-64
 * baseline and AVX2, where the CPU runs it); guard bytes around dst
 * and untouched inputs; unsupported combinations leave dst alone; wrap-
 * around (int8 127 + 1, 262144 int8 sums of 100 + 100); NaN/inf/signed
 * zero cases of min/max; the 16-bit conversions exhaustively (every value
 * decoded, every rounding midpoint and its neighbours encoded); buffers
 * off alignment.
 *
 * --bench prints the throughput of every kernel (no assertion on it).
 * Ends with "test_coll_reduce: N checks, N failed"; exit 1 on failure.
 */
#include "coll_reduce.h"
#include "coll_ref.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TEST_GUARD      64
#define TEST_GUARD_BYTE 0xa5
#define TEST_MAX_REPORT 20

static unsigned long test_checks, test_failed;
static uint64_t      test_rng = 0x9e3779b97f4a7c15ull;

static uint64_t test_rand(void)
{
    return coll_ref_rand(&test_rng);
}

#define TEST_FAIL(...) \
    do { \
        if (test_failed++ < TEST_MAX_REPORT) { \
            printf("FAIL: " __VA_ARGS__); \
            printf("\n"); \
        } \
    } while (0)

static void test_check(int ok, const char *what)
{
    test_checks++;
    if (!ok) {
        TEST_FAIL("%s", what);
    }
}

/* ---- inputs ---- */

static uint64_t test_gen(cxl_coll_dtype_t dt, size_t i)
{
    static const double fvals[] = {0.0, -0.0, 1.0, -1.0, 2.0, 0.5, 3.0,
                                   -7.0, INFINITY, -INFINITY, NAN, 1e-40,
                                   65504.0, 65519.0, 65520.0, 1e38};
    static const uint64_t ivals[] = {0, 1, 0xff, 0x7f, 0x80, 0x7fff, 0x8000,
                                     0xffff, 0x7fffffff, 0x80000000,
                                     0xffffffffull, 0x7fffffffffffffffull,
                                     0x8000000000000000ull, ~0ull, 2, 3};
    size_t size = cxl_coll_dtype_size(dt);
    uint64_t r  = test_rand(), bits = 0;
    float f;
    double d;

    switch (r % 4) {
    case 0: /* edge values */
        if (coll_ref_dtype_is_int(dt)) {
            return ivals[(r >> 8) % 16];
        }
        d = fvals[(r >> 8) % 16];
        break;
    case 1: /* small integers: equal values, exact sums, signed zeros */
        d = (double)(int)((r >> 8) % 17) - 8.0;
        if (coll_ref_dtype_is_int(dt)) {
            return (uint64_t)(int64_t)d;
        }
        break;
    default: /* any bits: every class of float */
        (void)i;
        return r >> (64 - 8 * size);
    }
    switch (dt) {
    case CXL_COLL_FLOAT32: f = (float)d; memcpy(&bits, &f, 4); return bits;
    case CXL_COLL_FLOAT64: memcpy(&bits, &d, 8); return bits;
    case CXL_COLL_FLOAT16:
        return isnan(d) ? 0x7e01 : coll_ref_encode(coll_ref_fmt_f16, d);
    default:
        return isnan(d) ? 0x7fc1 : coll_ref_encode(coll_ref_fmt_bf16, d);
    }
}

/* ---- one dtype x op x count x aliasing ---- */

typedef void (*test_apply_fn_t)(cxl_coll_dtype_t, cxl_coll_op_t, void*,
                                const void*, const void*, size_t);

enum { TEST_ALIAS_NONE, TEST_ALIAS_A, TEST_ALIAS_B, TEST_ALIAS_AB };

static void test_case(test_apply_fn_t apply, const char *impl,
                      cxl_coll_dtype_t dt, cxl_coll_op_t op, size_t count,
                      int alias)
{
    size_t size = cxl_coll_dtype_size(dt), bytes = count * size, i;
    uint8_t *a = malloc(bytes + 1), *b = malloc(bytes + 1);
    uint8_t *buf = malloc(bytes + 2 * TEST_GUARD), *dst = buf + TEST_GUARD;
    uint8_t *a0 = malloc(bytes + 1), *b0 = malloc(bytes + 1);
    const void *pa, *pb;
    uint64_t x, y, exp, got;
    int any_nan, bad = 0, guards = 1;

    if (!a || !b || !buf || !a0 || !b0) {
        TEST_FAIL("out of memory");
        exit(1);
    }
    for (i = 0; i < count; i++) {
        coll_ref_store_bits(a + i * size, size, test_gen(dt, i));
        coll_ref_store_bits(b + i * size, size, test_gen(dt, i));
    }
    if (alias == TEST_ALIAS_AB) {
        memcpy(b, a, bytes);
    }
    memcpy(a0, a, bytes);
    memcpy(b0, b, bytes);
    memset(buf, TEST_GUARD_BYTE, bytes + 2 * TEST_GUARD);
    switch (alias) {
    case TEST_ALIAS_NONE: pa = a;   pb = b;   break;
    case TEST_ALIAS_A:    pa = dst; pb = b;   memcpy(dst, a, bytes); break;
    case TEST_ALIAS_B:    pa = a;   pb = dst; memcpy(dst, b, bytes); break;
    default:              pa = dst; pb = dst; memcpy(dst, a, bytes); break;
    }
    apply(dt, op, dst, pa, pb, count);

    for (i = 0; i < count; i++) {
        x   = coll_ref_load_bits(a0 + i * size, size);
        y   = coll_ref_load_bits(b0 + i * size, size);
        exp = coll_ref_op(dt, op, x, y, &any_nan);
        got = coll_ref_load_bits(dst + i * size, size);
        if (any_nan ? !coll_ref_is_nan(dt, got) : (got != exp)) {
            if (bad++ < 3) {
                TEST_FAIL("%s %s %s count %zu alias %d [%zu]: 0x%llx op 0x%llx"
                          " = 0x%llx, expected 0x%llx%s", impl,
                          cxl_coll_dtype_name(dt), cxl_coll_op_name(op), count,
                          alias, i, (unsigned long long)x,
                          (unsigned long long)y, (unsigned long long)got,
                          (unsigned long long)exp, any_nan ? " (NaN)" : "");
                test_failed--; /* counted once per case below */
            }
        }
    }
    for (i = 0; i < TEST_GUARD; i++) {
        guards &= (buf[i] == TEST_GUARD_BYTE) &&
                  (dst[bytes + i] == TEST_GUARD_BYTE);
    }
    test_check(bad == 0, "values (above)");
    test_check(guards, "guard bytes around dst overwritten");
    test_check(((pa == dst) || !memcmp(a, a0, bytes)) &&
               ((pb == dst) || !memcmp(b, b0, bytes)), "an input changed");
    free(a);
    free(b);
    free(buf);
    free(a0);
    free(b0);
}

/* the portable loops of each build, whichever the CPU would pick */
static void test_apply_base(cxl_coll_dtype_t dt, cxl_coll_op_t op, void *dst,
                            const void *a, const void *b, size_t n)
{
    cxl_coll_reduce_apply_isa(CXL_COLL_RED_ISA_BASE, dt, op, dst, a, b, n);
}

static void test_apply_avx2(cxl_coll_dtype_t dt, cxl_coll_op_t op, void *dst,
                            const void *a, const void *b, size_t n)
{
    cxl_coll_reduce_apply_isa(CXL_COLL_RED_ISA_AVX2, dt, op, dst, a, b, n);
}

static void test_matrix(void)
{
    static const size_t counts[] = {0, 1, 7, 1000, (1 << 16) + 3};
    static const struct {
        test_apply_fn_t    fn;
        const char         *name;
        int                isa;   /* -1: the dispatching entries */
    } impls[] = {{cxl_coll_reduce_apply, "apply", -1},
                 {cxl_coll_reduce_apply_generic, "generic", -1},
                 {test_apply_base, "base build", CXL_COLL_RED_ISA_BASE},
                 {test_apply_avx2, "avx2 build", CXL_COLL_RED_ISA_AVX2}};
    unsigned dt, op, c, alias, k;

    for (k = 0; k < sizeof(impls) / sizeof(impls[0]); k++) {
        if ((impls[k].isa >= 0) &&
            !cxl_coll_reduce_isa_usable((cxl_coll_red_isa_t)impls[k].isa)) {
            printf("test_coll_reduce: the %s does not run on this CPU: not "
                   "checked here\n", impls[k].name);
            continue;
        }
        for (dt = 0; dt < CXL_COLL_DTYPE_LAST; dt++) {
            for (op = 0; op < CXL_COLL_OP_LAST; op++) {
                if (!cxl_coll_op_supported(dt, op)) {
                    continue;
                }
                for (c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
                    for (alias = 0; alias < 4; alias++) {
                        test_case(impls[k].fn, impls[k].name, dt, op,
                                  counts[c], alias);
                    }
                }
            }
        }
    }
}

/* dst is not touched where cxl_coll_op_supported() says no */
static void test_unsupported(void)
{
    uint8_t dst[64], a[64], b[64], i;
    unsigned dt, op;
    int untouched, n = 0;

    for (i = 0; i < 64; i++) {
        a[i] = i;
        b[i] = 3 * i;
    }
    for (dt = 0; dt <= CXL_COLL_DTYPE_LAST; dt++) {
        for (op = 0; op <= CXL_COLL_OP_LAST; op++) {
            if ((dt < CXL_COLL_DTYPE_LAST) && (op < CXL_COLL_OP_LAST) &&
                cxl_coll_op_supported(dt, op)) {
                continue;
            }
            memset(dst, 0x5a, sizeof(dst));
            cxl_coll_reduce_apply(dt, op, dst, a, b, 8);
            cxl_coll_reduce_apply_generic(dt, op, dst, a, b, 8);
            untouched = 1;
            for (i = 0; i < 64; i++) {
                untouched &= (dst[i] == 0x5a);
            }
            test_check(untouched, "an unsupported combination wrote dst");
            n++;
        }
    }
    /* 4 float dtypes x 3 bitwise ops, and the out-of-range ones */
    test_check(n == 12 + (CXL_COLL_OP_LAST + 1) + CXL_COLL_DTYPE_LAST,
               "unexpected number of unsupported combinations");
}

/* ---- named cases ---- */

static void test_wrap(void)
{
    enum { N = 262144 };
    int8_t *x = malloc(N), *y = malloc(N);
    int8_t  i8a = 127, i8b = 1, i8r;
    int16_t i16a = 32767, i16b = 1, i16r;
    uint16_t u16a = 65535, u16r;
    int32_t i32a = INT32_MIN, i32b = -1, i32r;
    int64_t i64a = INT64_MAX, i64b = 2, i64r;
    uint8_t u8a = 200, u8b = 100, u8r;
    size_t i;
    int ok = 1;

    cxl_coll_reduce_apply(CXL_COLL_INT8, CXL_COLL_SUM, &i8r, &i8a, &i8b, 1);
    test_check(i8r == -128, "int8 127 + 1 != -128");
    cxl_coll_reduce_apply(CXL_COLL_UINT8, CXL_COLL_SUM, &u8r, &u8a, &u8b, 1);
    test_check(u8r == 44, "uint8 200 + 100 != 44");
    cxl_coll_reduce_apply(CXL_COLL_INT16, CXL_COLL_SUM, &i16r, &i16a, &i16b, 1);
    test_check(i16r == -32768, "int16 32767 + 1 != -32768");
    cxl_coll_reduce_apply(CXL_COLL_UINT16, CXL_COLL_PROD, &u16r, &u16a, &u16a,
                          1);
    test_check(u16r == 1, "uint16 65535 * 65535 != 1");
    cxl_coll_reduce_apply(CXL_COLL_INT32, CXL_COLL_SUM, &i32r, &i32a, &i32b, 1);
    test_check(i32r == INT32_MAX, "int32 INT_MIN + -1 != INT_MAX");
    cxl_coll_reduce_apply(CXL_COLL_INT32, CXL_COLL_PROD, &i32r, &i32a, &i32b,
                          1);
    test_check(i32r == INT32_MIN, "int32 INT_MIN * -1 != INT_MIN");
    cxl_coll_reduce_apply(CXL_COLL_INT64, CXL_COLL_PROD, &i64r, &i64a, &i64b,
                          1);
    test_check(i64r == -2, "int64 INT64_MAX * 2 != -2");

    /* the sum Open MPI's op/avx saturates: 262144 int8, 100 + 100 each,
     * then 1000 more accumulations of 100 into the same vector */
    memset(x, 100, N);
    memset(y, 100, N);
    cxl_coll_reduce_apply(CXL_COLL_INT8, CXL_COLL_SUM, x, x, y, N);
    for (i = 0; i < N; i++) {
        ok &= (x[i] == -56);
    }
    test_check(ok, "262144 int8 100 + 100 != -56 (saturated?)");
    for (i = 0; i < 1000; i++) {
        cxl_coll_reduce_apply(CXL_COLL_INT8, CXL_COLL_SUM, x, x, y, N);
    }
    /* -56 + 1000 * 100 = 99944 = 390 * 256 + 104 */
    for (ok = 1, i = 0; i < N; i++) {
        ok &= (x[i] == 104);
    }
    test_check(ok, "int8 accumulation of 1000 * 100 does not wrap");
    free(x);
    free(y);
}

static int test_f32_eq(float x, float y)
{
    return !memcmp(&x, &y, sizeof(x));
}

static void test_float_cases(void)
{
    float nan = NAN, one = 1.0f, pz = 0.0f, nz = -0.0f, inf = INFINITY;
    float ninf = -INFINITY, r;
    double dn = NAN, d1 = 2.0, dr;
    uint16_t h1 = 0x3c00, hnan = 0x7e05, hr, hmax = 0x7bff, h16 = 0x4c00;
    uint16_t h8 = 0x4800;

#define TEST_F32(_op, _x, _y, _exp, _what) \
    cxl_coll_reduce_apply(CXL_COLL_FLOAT32, _op, &r, &(_x), &(_y), 1); \
    test_check(test_f32_eq(r, _exp), _what)

    TEST_F32(CXL_COLL_MIN, nan, one, one, "fmin(NaN, 1) != 1");
    TEST_F32(CXL_COLL_MIN, one, nan, one, "fmin(1, NaN) != 1");
    TEST_F32(CXL_COLL_MAX, nan, one, one, "fmax(NaN, 1) != 1");
    TEST_F32(CXL_COLL_MAX, one, nan, one, "fmax(1, NaN) != 1");
    TEST_F32(CXL_COLL_MIN, nz, pz, nz, "min(-0, +0) != -0 (first)");
    TEST_F32(CXL_COLL_MIN, pz, nz, pz, "min(+0, -0) != +0 (first)");
    TEST_F32(CXL_COLL_MAX, ninf, inf, inf, "max(-inf, inf) != inf");
    TEST_F32(CXL_COLL_MIN, ninf, nan, ninf, "min(-inf, NaN) != -inf");
    cxl_coll_reduce_apply(CXL_COLL_FLOAT32, CXL_COLL_MIN, &r, &nan, &nan, 1);
    test_check(isnan(r), "min(NaN, NaN) is not NaN");
    cxl_coll_reduce_apply(CXL_COLL_FLOAT32, CXL_COLL_SUM, &r, &inf, &ninf, 1);
    test_check(isnan(r), "inf + -inf is not NaN");
    cxl_coll_reduce_apply(CXL_COLL_FLOAT32, CXL_COLL_PROD, &r, &inf, &pz, 1);
    test_check(isnan(r), "inf * 0 is not NaN");
    cxl_coll_reduce_apply(CXL_COLL_FLOAT64, CXL_COLL_MAX, &dr, &dn, &d1, 1);
    test_check(dr == 2.0, "float64 fmax(NaN, 2) != 2");
    cxl_coll_reduce_apply(CXL_COLL_FLOAT16, CXL_COLL_MIN, &hr, &hnan, &h1, 1);
    test_check(hr == h1, "float16 min(NaN, 1) != 1");
    cxl_coll_reduce_apply(CXL_COLL_FLOAT16, CXL_COLL_MAX, &hr, &h1, &hnan, 1);
    test_check(hr == h1, "float16 max(1, NaN) != 1");
    cxl_coll_reduce_apply(CXL_COLL_FLOAT16, CXL_COLL_SUM, &hr, &hmax, &h16, 1);
    test_check(hr == 0x7c00, "float16 65504 + 16 (tie at 65520) != inf");
    cxl_coll_reduce_apply(CXL_COLL_FLOAT16, CXL_COLL_SUM, &hr, &hmax, &h8, 1);
    test_check(hr == hmax, "float16 65504 + 8 != 65504");
    cxl_coll_reduce_apply(CXL_COLL_FLOAT16, CXL_COLL_SUM, &hr, &h1, &hnan, 1);
    test_check((hr & 0x7e00) == 0x7e00, "float16 1 + NaN is not a quiet NaN");
#undef TEST_F32
}

/* ---- 16-bit conversions ---- */

static int test_f32_bits_eq(float f, uint32_t bits)
{
    return cxl_coll_f32_to_bits(f) == bits;
}

/* every value of the format decoded exactly (NaN payload kept) */
static void test_decode_all(coll_ref_fmt_t fmt, float (*to_f32)(uint16_t),
                            const char *name)
{
    uint32_t h, exp, bad = 0;
    float    ref;

    for (h = 0; h < 0x10000; h++) {
        if (coll_ref_fmt_isnan(fmt, h)) {
            exp = ((h & 0x8000) << 16) | 0x7f800000 |
                  ((h & ((1u << fmt.mbits) - 1)) << (23 - fmt.mbits));
        } else {
            ref = (float)coll_ref_decode(fmt, h);
            exp = cxl_coll_f32_to_bits(ref);
        }
        if (!test_f32_bits_eq(to_f32((uint16_t)h), exp) && (bad++ < 3)) {
            TEST_FAIL("%s 0x%04x decodes to 0x%08x, expected 0x%08x", name, h,
                      cxl_coll_f32_to_bits(to_f32((uint16_t)h)), exp);
            test_failed--;
        }
    }
    test_check(bad == 0, "decoding (above)");
}

static int test_encode_one(coll_ref_fmt_t fmt, uint16_t (*from_f32)(float),
                           const char *name, float f)
{
    uint32_t bits = cxl_coll_f32_to_bits(f), exp;
    uint16_t got  = from_f32(f);

    if (isnan(f)) {
        /* quiet, sign and upper payload kept */
        exp = ((bits >> 16) & 0x8000) |
              (((1u << fmt.ebits) - 1) << fmt.mbits) |
              (1u << (fmt.mbits - 1)) |
              ((bits & 0x7fffff) >> (23 - fmt.mbits));
    } else {
        exp = coll_ref_encode(fmt, (double)f);
    }
    if (got != exp) {
        TEST_FAIL("%s encode %a (0x%08x) = 0x%04x, expected 0x%04x", name,
                  (double)f, bits, got, exp);
        test_failed--;
        return 0;
    }
    return 1;
}

/*
 * Every rounding decision: for each non-negative finite value v of the
 * format with quantum q, the floats v, v + q/2 (the tie), and their float
 * neighbours, with both signs; then a million random floats.
 */
static void test_encode_all(coll_ref_fmt_t fmt, uint16_t (*from_f32)(float),
                            const char *name)
{
    uint32_t h, emax = ((1u << fmt.ebits) - 1) << fmt.mbits, e, k;
    double   v, q;
    float    fs[6];
    int      bias = coll_ref_fmt_bias(fmt), sign;
    unsigned long bad = 0;

    for (h = 0; h < emax; h++) {
        e = h >> fmt.mbits;
        v = coll_ref_decode(fmt, h);
        q = ldexp(1.0, (e ? (int)e : 1) - bias - fmt.mbits);
        fs[0] = (float)v;
        fs[1] = (float)(v + q / 2);      /* exact in float */
        fs[2] = nextafterf(fs[0], INFINITY);
        fs[3] = nextafterf(fs[0], 0.0f);
        fs[4] = nextafterf(fs[1], INFINITY);
        fs[5] = nextafterf(fs[1], 0.0f);
        for (k = 0; k < 6; k++) {
            for (sign = 0; sign < 2; sign++) {
                bad += !test_encode_one(fmt, from_f32, name,
                                        sign ? -fs[k] : fs[k]);
            }
        }
    }
    for (k = 0; k < (1u << 20); k++) {
        bad += !test_encode_one(fmt, from_f32, name,
                                cxl_coll_bits_to_f32((uint32_t)test_rand()));
    }
    bad += !test_encode_one(fmt, from_f32, name, INFINITY);
    bad += !test_encode_one(fmt, from_f32, name, -INFINITY);
    bad += !test_encode_one(fmt, from_f32, name, FLT_MAX);
    bad += !test_encode_one(fmt, from_f32, name, cxl_coll_bits_to_f32(1));
    bad += !test_encode_one(fmt, from_f32, name,
                            cxl_coll_bits_to_f32(0x7f800001)); /* sNaN */
    test_check(bad == 0, "encoding (above)");
}

static void test_conversions(void)
{
    test_decode_all(coll_ref_fmt_f16, cxl_coll_f16_to_f32, "float16");
    test_decode_all(coll_ref_fmt_bf16, cxl_coll_bf16_to_f32, "bfloat16");
    test_encode_all(coll_ref_fmt_f16, cxl_coll_f32_to_f16, "float16");
    test_encode_all(coll_ref_fmt_bf16, cxl_coll_f32_to_bf16, "bfloat16");
}

/* ---- throughput ---- */

static double test_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_bench(size_t bytes)
{
    char *a = malloc(bytes), *b = malloc(bytes), *d = malloc(bytes);
    unsigned dt, op, k;
    size_t reps, n;
    double t0, el;

    memset(a, 1, bytes);
    memset(b, 2, bytes);
    memset(d, 0, bytes);
    printf("GB/s of dst, %zu bytes (the loops read 2x that and write 1x)\n",
           bytes);
    printf("%-9s", "");
    for (op = 0; op < CXL_COLL_OP_LAST; op++) {
        printf(" %7s", cxl_coll_op_name(op));
    }
    printf("\n");
    for (dt = 0; dt < CXL_COLL_DTYPE_LAST; dt++) {
        printf("%-9s", cxl_coll_dtype_name(dt));
        n = bytes / cxl_coll_dtype_size(dt);
        for (op = 0; op < CXL_COLL_OP_LAST; op++) {
            if (!cxl_coll_op_supported(dt, op)) {
                printf(" %7s", "-");
                continue;
            }
            reps = 0;
            t0   = test_now();
            do {
                for (k = 0; k < 4; k++) {
                    cxl_coll_reduce_apply(dt, op, d, a, b, n);
                }
                reps += 4;
                el    = test_now() - t0;
            } while (el < 0.1);
            printf(" %7.2f", (double)bytes * reps / el / 1e9);
        }
        printf("\n");
    }
    free(a);
    free(b);
    free(d);
}

/*
 * Misaligned buffers: a peer may publish a pool buffer at any offset and a
 * caller may pass any address.  Every kernel on inputs and output 1, 3 and
 * 5 bytes off alignment gives the bytes the aligned run gives (under the
 * sanitizers a typed access to a misaligned element aborts: it did before
 * such buffers went through aligned bounce buffers).
 */
static void test_misaligned(void)
{
    enum { N = 37, MAXES = 8 };
    uint8_t *ab = malloc(N * MAXES + 16), *bb = malloc(N * MAXES + 16);
    uint8_t *db = malloc(N * MAXES + 16), *ref = malloc(N * MAXES);
    uint8_t *a = ab + 1, *b = bb + 3, *d = db + 5;
    _Alignas(16) uint8_t aa[N * MAXES], ba[N * MAXES];
    cxl_coll_dtype_t dt;
    cxl_coll_op_t op;
    unsigned bad = 0;
    size_t es, i;

    for (dt = 0; dt < CXL_COLL_DTYPE_LAST; dt++) {
        es = cxl_coll_dtype_size(dt);
        for (i = 0; i < N * es; i++) {
            aa[i] = (uint8_t)test_rand();
            ba[i] = (uint8_t)test_rand();
        }
        if ((dt == CXL_COLL_FLOAT16) || (dt == CXL_COLL_BFLOAT16) ||
            (dt == CXL_COLL_FLOAT32) || (dt == CXL_COLL_FLOAT64)) {
            /* finite values: NaN payloads need not be reproduced bitwise */
            for (i = 0; i < N * es; i += es) {
                aa[i + es - 1] = 0x3c;
                ba[i + es - 1] = 0x3c;
            }
        }
        memcpy(a, aa, N * es);
        memcpy(b, ba, N * es);
        for (op = 0; op < CXL_COLL_OP_LAST; op++) {
            if (!cxl_coll_op_supported(dt, op)) {
                continue;
            }
            cxl_coll_reduce_apply(dt, op, ref, aa, ba, N);
            cxl_coll_reduce_apply(dt, op, d, a, b, N);
            bad += (memcmp(d, ref, N * es) != 0);
            memcpy(d, a, N * es); /* in place: dst == a */
            cxl_coll_reduce_apply(dt, op, d, d, b, N);
            bad += (memcmp(d, ref, N * es) != 0);
        }
    }
    test_check(bad == 0, "misaligned inputs and outputs (1, 3, 5 bytes off) "
               "give the aligned results, every dtype and op");
    free(ab);
    free(bb);
    free(db);
    free(ref);
}

int main(int argc, char **argv)
{
    if ((argc > 1) && !strcmp(argv[1], "--bench")) {
        test_bench((argc > 2) ? strtoul(argv[2], NULL, 0) : 16384);
        return 0;
    }
    test_conversions();
    test_wrap();
    test_float_cases();
    test_unsupported();
    test_matrix();
    test_misaligned();
    printf("test_coll_reduce: %lu checks, %lu failed\n", test_checks,
           test_failed);
    return test_failed ? 1 : 0;
}
