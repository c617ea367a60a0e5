/*
 * Reduction kernels: dst[i] = a[i] OP b[i] for every supported datatype and
 * operation (semantics in coll_reduce.h).
 *
 * Each kernel has four loops, chosen by how dst aliases the inputs, so every
 * loop can declare its pointers restrict without lying: d, a, b distinct;
 * d == a; d == b; d == a == b.  The loops run in blocks of a fixed number of
 * elements: GCC vectorises a loop of known trip count already at -O2 (its
 * "very cheap" cost model refuses loops that need an epilogue or a runtime
 * alias check), and the remainder runs the same expression one by one.
 *
 * Signed sum/prod/band/bor/bxor run on the unsigned type of the same width:
 * two's complement makes the bits identical and unsigned overflow wraps by
 * definition.  8/16-bit operands promote to int, so products multiply by 1u
 * first (65535 * 65535 overflows int).
 */
#include "coll_reduce.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#  include <cpuid.h>
#  include <immintrin.h>
#endif

/*
 * Every kernel is built twice: for the x86-64 baseline and with AVX2, picked
 * once per process (cxl_coll_red_isa_best).  32-byte vectors took a 2-rank
 * float allreduce of 64 KiB from 4.7 to 3.9 us and of 256 KiB from 16.7 to
 * 15.4 us on the project's AMD VM.  Element-wise IEEE operations give the
 * same bits in either build, so ranks on hosts with and without AVX2 agree;
 * the tests run both builds through cxl_coll_reduce_apply_isa().  (Not GCC's
 * target_clones: its ifunc offers the tests no way to run the other clone.)
 */
#if defined(__x86_64__) && defined(__ELF__)
#  define CXL_COLL_RED_HAVE_AVX2 1
#  define CXL_COLL_RED_TARGET_AVX2 __attribute__((target("avx2")))
#else
#  define CXL_COLL_RED_HAVE_AVX2 0
#endif

/* the loops are compiled inside each build of their kernel */
#define CXL_COLL_RED_INLINE static inline __attribute__((always_inline))

/* elements per inner loop: 256 bytes of the widest type */
#define CXL_COLL_RED_BLOCK 32


#define CXL_COLL_RED_LOOP(_stmt) \
    size_t _j, _i; \
    for (_j = 0; _j + CXL_COLL_RED_BLOCK <= n; _j += CXL_COLL_RED_BLOCK) { \
        for (_i = _j; _i < _j + CXL_COLL_RED_BLOCK; _i++) { \
            _stmt; \
        } \
    } \
    for (_i = _j; _i < n; _i++) { \
        _stmt; \
    }

/* Kernel _name over element type _t computing _OP(x, y) per element. */
#define CXL_COLL_RED_KERNEL(_name, _t, _OP) \
    CXL_COLL_RED_INLINE void _name##_dab(_t *restrict d, \
                                         const _t *restrict a, \
                                         const _t *restrict b, size_t n) \
    { \
        CXL_COLL_RED_LOOP(d[_i] = _OP(a[_i], b[_i])) \
    } \
    CXL_COLL_RED_INLINE void _name##_db(_t *restrict d, \
                                        const _t *restrict b, size_t n) \
    { \
        CXL_COLL_RED_LOOP(d[_i] = _OP(d[_i], b[_i])) \
    } \
    CXL_COLL_RED_INLINE void _name##_ad(_t *restrict d, \
                                        const _t *restrict a, size_t n) \
    { \
        CXL_COLL_RED_LOOP(d[_i] = _OP(a[_i], d[_i])) \
    } \
    CXL_COLL_RED_INLINE void _name##_dd(_t *restrict d, size_t n) \
    { \
        CXL_COLL_RED_LOOP(d[_i] = _OP(d[_i], d[_i])) \
    } \
    CXL_COLL_RED_ENTRY(_name, _base, ) \
    CXL_COLL_RED_ENTRY_AVX2(_name)

/* the entry of one build of a kernel: the loop for how dst aliases */
#define CXL_COLL_RED_ENTRY(_name, _suffix, _attr) \
    _attr static void _name##_suffix(void *dst, const void *a, const void *b, \
                                     size_t n) \
    { \
        if (dst == a) { \
            if (dst == b) { \
                _name##_dd(dst, n); \
            } else { \
                _name##_db(dst, b, n); \
            } \
        } else if (dst == b) { \
            _name##_ad(dst, a, n); \
        } else { \
            _name##_dab(dst, a, b, n); \
        } \
    }

#if CXL_COLL_RED_HAVE_AVX2
#  define CXL_COLL_RED_ENTRY_AVX2(_name) \
    CXL_COLL_RED_ENTRY(_name, _avx2, CXL_COLL_RED_TARGET_AVX2)
#else
#  define CXL_COLL_RED_ENTRY_AVX2(_name)
#endif

#define CXL_COLL_RED_SUM(_x, _y)  ((_x) + (_y))
#define CXL_COLL_RED_PROD(_x, _y) ((_x) * (_y))
#define CXL_COLL_RED_MIN(_x, _y)  (((_y) < (_x)) ? (_y) : (_x))
#define CXL_COLL_RED_MAX(_x, _y)  (((_y) > (_x)) ? (_y) : (_x))
#define CXL_COLL_RED_BAND(_x, _y) ((_x) & (_y))
#define CXL_COLL_RED_BOR(_x, _y)  ((_x) | (_y))
#define CXL_COLL_RED_BXOR(_x, _y) ((_x) ^ (_y))
/* unsigned arithmetic of at least int width: no promotion to signed int */
#define CXL_COLL_RED_USUM(_x, _y)  (1u * (_x) + (_y))
#define CXL_COLL_RED_UPROD(_x, _y) (1u * (_x) * (_y))
/* fmin/fmax: take y when it is smaller (larger) or x is NaN; | not || keeps
 * the select branch-free */
#define CXL_COLL_RED_FMIN(_x, _y) ((((_y) < (_x)) | ((_x) != (_x))) ? (_y) : (_x))
#define CXL_COLL_RED_FMAX(_x, _y) ((((_y) > (_x)) | ((_x) != (_x))) ? (_y) : (_x))

#define CXL_COLL_RED_INT_KERNELS(_bits) \
    CXL_COLL_RED_KERNEL(cxl_coll_red_u##_bits##_sum, uint##_bits##_t, \
                        CXL_COLL_RED_USUM) \
    CXL_COLL_RED_KERNEL(cxl_coll_red_u##_bits##_prod, uint##_bits##_t, \
                        CXL_COLL_RED_UPROD) \
    CXL_COLL_RED_KERNEL(cxl_coll_red_u##_bits##_band, uint##_bits##_t, \
                        CXL_COLL_RED_BAND) \
    CXL_COLL_RED_KERNEL(cxl_coll_red_u##_bits##_bor, uint##_bits##_t, \
                        CXL_COLL_RED_BOR) \
    CXL_COLL_RED_KERNEL(cxl_coll_red_u##_bits##_bxor, uint##_bits##_t, \
                        CXL_COLL_RED_BXOR) \
    CXL_COLL_RED_KERNEL(cxl_coll_red_u##_bits##_min, uint##_bits##_t, \
                        CXL_COLL_RED_MIN) \
    CXL_COLL_RED_KERNEL(cxl_coll_red_u##_bits##_max, uint##_bits##_t, \
                        CXL_COLL_RED_MAX) \
    CXL_COLL_RED_KERNEL(cxl_coll_red_s##_bits##_min, int##_bits##_t, \
                        CXL_COLL_RED_MIN) \
    CXL_COLL_RED_KERNEL(cxl_coll_red_s##_bits##_max, int##_bits##_t, \
                        CXL_COLL_RED_MAX)

CXL_COLL_RED_INT_KERNELS(8)
CXL_COLL_RED_INT_KERNELS(16)
CXL_COLL_RED_INT_KERNELS(32)
CXL_COLL_RED_INT_KERNELS(64)

CXL_COLL_RED_KERNEL(cxl_coll_red_f32_sum, float, CXL_COLL_RED_SUM)
CXL_COLL_RED_KERNEL(cxl_coll_red_f32_prod, float, CXL_COLL_RED_PROD)
CXL_COLL_RED_KERNEL(cxl_coll_red_f32_min, float, CXL_COLL_RED_FMIN)
CXL_COLL_RED_KERNEL(cxl_coll_red_f32_max, float, CXL_COLL_RED_FMAX)
CXL_COLL_RED_KERNEL(cxl_coll_red_f64_sum, double, CXL_COLL_RED_SUM)
CXL_COLL_RED_KERNEL(cxl_coll_red_f64_prod, double, CXL_COLL_RED_PROD)
CXL_COLL_RED_KERNEL(cxl_coll_red_f64_min, double, CXL_COLL_RED_FMIN)
CXL_COLL_RED_KERNEL(cxl_coll_red_f64_max, double, CXL_COLL_RED_FMAX)

/* 16-bit floats: sum/prod in float, rounded back; min/max compare in float
 * and select the operand's own bits */
#define CXL_COLL_RED_HALF_OPS(_h, _to_f32, _from_f32) \
    static inline uint16_t cxl_coll_red_##_h##_sum1(uint16_t x, uint16_t y) \
    { \
        return _from_f32(_to_f32(x) + _to_f32(y)); \
    } \
    static inline uint16_t cxl_coll_red_##_h##_prod1(uint16_t x, uint16_t y) \
    { \
        return _from_f32(_to_f32(x) * _to_f32(y)); \
    } \
    static inline uint16_t cxl_coll_red_##_h##_min1(uint16_t x, uint16_t y) \
    { \
        float fx = _to_f32(x), fy = _to_f32(y); \
        return (((fy < fx) | (fx != fx)) ? y : x); \
    } \
    static inline uint16_t cxl_coll_red_##_h##_max1(uint16_t x, uint16_t y) \
    { \
        float fx = _to_f32(x), fy = _to_f32(y); \
        return (((fy > fx) | (fx != fx)) ? y : x); \
    } \
    CXL_COLL_RED_KERNEL(cxl_coll_red_##_h##_sum, uint16_t, \
                        cxl_coll_red_##_h##_sum1) \
    CXL_COLL_RED_KERNEL(cxl_coll_red_##_h##_prod, uint16_t, \
                        cxl_coll_red_##_h##_prod1) \
    CXL_COLL_RED_KERNEL(cxl_coll_red_##_h##_min, uint16_t, \
                        cxl_coll_red_##_h##_min1) \
    CXL_COLL_RED_KERNEL(cxl_coll_red_##_h##_max, uint16_t, \
                        cxl_coll_red_##_h##_max1)

CXL_COLL_RED_HALF_OPS(f16, cxl_coll_f16_to_f32, cxl_coll_f32_to_f16)
CXL_COLL_RED_HALF_OPS(bf16, cxl_coll_bf16_to_f32, cxl_coll_f32_to_bf16)

#define CXL_COLL_RED_INT_ROW(_s, _bits, _isa) \
    { \
        [CXL_COLL_SUM]  = cxl_coll_red_u##_bits##_sum##_isa, \
        [CXL_COLL_PROD] = cxl_coll_red_u##_bits##_prod##_isa, \
        [CXL_COLL_MIN]  = cxl_coll_red_##_s##_bits##_min##_isa, \
        [CXL_COLL_MAX]  = cxl_coll_red_##_s##_bits##_max##_isa, \
        [CXL_COLL_BAND] = cxl_coll_red_u##_bits##_band##_isa, \
        [CXL_COLL_BOR]  = cxl_coll_red_u##_bits##_bor##_isa, \
        [CXL_COLL_BXOR] = cxl_coll_red_u##_bits##_bxor##_isa, \
    }

#define CXL_COLL_RED_FLOAT_ROW(_f, _isa) \
    { \
        [CXL_COLL_SUM]  = cxl_coll_red_##_f##_sum##_isa, \
        [CXL_COLL_PROD] = cxl_coll_red_##_f##_prod##_isa, \
        [CXL_COLL_MIN]  = cxl_coll_red_##_f##_min##_isa, \
        [CXL_COLL_MAX]  = cxl_coll_red_##_f##_max##_isa, \
    }

/* one build's kernels; NULL where cxl_coll_op_supported() says no */
#define CXL_COLL_RED_TABLE(_isa) \
    { \
        [CXL_COLL_INT8]     = CXL_COLL_RED_INT_ROW(s, 8, _isa), \
        [CXL_COLL_UINT8]    = CXL_COLL_RED_INT_ROW(u, 8, _isa), \
        [CXL_COLL_INT16]    = CXL_COLL_RED_INT_ROW(s, 16, _isa), \
        [CXL_COLL_UINT16]   = CXL_COLL_RED_INT_ROW(u, 16, _isa), \
        [CXL_COLL_INT32]    = CXL_COLL_RED_INT_ROW(s, 32, _isa), \
        [CXL_COLL_UINT32]   = CXL_COLL_RED_INT_ROW(u, 32, _isa), \
        [CXL_COLL_INT64]    = CXL_COLL_RED_INT_ROW(s, 64, _isa), \
        [CXL_COLL_UINT64]   = CXL_COLL_RED_INT_ROW(u, 64, _isa), \
        [CXL_COLL_FLOAT32]  = CXL_COLL_RED_FLOAT_ROW(f32, _isa), \
        [CXL_COLL_FLOAT64]  = CXL_COLL_RED_FLOAT_ROW(f64, _isa), \
        [CXL_COLL_FLOAT16]  = CXL_COLL_RED_FLOAT_ROW(f16, _isa), \
        [CXL_COLL_BFLOAT16] = CXL_COLL_RED_FLOAT_ROW(bf16, _isa), \
    }

static const cxl_coll_red_fn_t
cxl_coll_red_table[CXL_COLL_RED_ISA_LAST][CXL_COLL_DTYPE_LAST]
                  [CXL_COLL_OP_LAST] = {
    [CXL_COLL_RED_ISA_BASE] = CXL_COLL_RED_TABLE(_base),
#if CXL_COLL_RED_HAVE_AVX2
    [CXL_COLL_RED_ISA_AVX2] = CXL_COLL_RED_TABLE(_avx2),
#endif
};

int cxl_coll_reduce_isa_usable(cxl_coll_red_isa_t isa)
{
    switch (isa) {
    case CXL_COLL_RED_ISA_BASE:
        return 1;
#if CXL_COLL_RED_HAVE_AVX2
    case CXL_COLL_RED_ISA_AVX2:
        /* "avx2" also says the OS saves the ymm state */
        return __builtin_cpu_supports("avx2");
#endif
    default:
        return 0;
    }
}

/* the widest usable build, found once (the same answer in every thread) */
static cxl_coll_red_isa_t cxl_coll_red_isa_best(void)
{
    static int best = -1;

    if (best < 0) {
        best = cxl_coll_reduce_isa_usable(CXL_COLL_RED_ISA_AVX2) ?
               CXL_COLL_RED_ISA_AVX2 : CXL_COLL_RED_ISA_BASE;
    }
    return (cxl_coll_red_isa_t)best;
}

#if defined(__x86_64__)
/*
 * float16 with the F16C conversions (8 lanes, exact, round to nearest
 * even): 5-30 times the speed of the portable loops, whose conversions GCC
 * vectorises badly or not at all.  min/max compare in float and blend the
 * operands' own bits, as the portable loops do.  Every block loads both
 * inputs before it stores, so dst may equal a or b; the remainder of fewer
 * than 8 elements runs the portable loop.
 */
#define CXL_COLL_RED_F16C_LOAD(_p) \
    _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(_p)))

/* 8 x 32-bit compare mask to 8 x 16-bit (0 or -1 saturate unchanged) */
#define CXL_COLL_RED_F16C_MASK16(_m) \
    _mm_packs_epi32(_mm256_castsi256_si128(_mm256_castps_si256(_m)), \
                    _mm256_extractf128_si256(_mm256_castps_si256(_m), 1))

__attribute__((target("avx,f16c")))
static void cxl_coll_red_f16c(cxl_coll_op_t op, void *dst, const void *a,
                              const void *b, size_t n)
{
    uint16_t *d       = dst;
    const uint16_t *x = a, *y = b;
    size_t i          = 0;
    __m128i hx, hy;
    __m256 vx, vy, take_y;

    switch (op) {
    case CXL_COLL_SUM:
        for (; i + 8 <= n; i += 8) {
            vx = _mm256_add_ps(CXL_COLL_RED_F16C_LOAD(x + i),
                               CXL_COLL_RED_F16C_LOAD(y + i));
            _mm_storeu_si128((__m128i*)(d + i),
                             _mm256_cvtps_ph(vx, _MM_FROUND_TO_NEAREST_INT));
        }
        break;
    case CXL_COLL_PROD:
        for (; i + 8 <= n; i += 8) {
            vx = _mm256_mul_ps(CXL_COLL_RED_F16C_LOAD(x + i),
                               CXL_COLL_RED_F16C_LOAD(y + i));
            _mm_storeu_si128((__m128i*)(d + i),
                             _mm256_cvtps_ph(vx, _MM_FROUND_TO_NEAREST_INT));
        }
        break;
    default: /* min, max: y where y < x (y > x) or x is NaN */
        for (; i + 8 <= n; i += 8) {
            hx     = _mm_loadu_si128((const __m128i*)(x + i));
            hy     = _mm_loadu_si128((const __m128i*)(y + i));
            vx     = _mm256_cvtph_ps(hx);
            vy     = _mm256_cvtph_ps(hy);
            take_y = _mm256_or_ps(_mm256_cmp_ps(vx, vx, _CMP_UNORD_Q),
                                  (op == CXL_COLL_MIN) ?
                                  _mm256_cmp_ps(vy, vx, _CMP_LT_OQ) :
                                  _mm256_cmp_ps(vy, vx, _CMP_GT_OQ));
            _mm_storeu_si128((__m128i*)(d + i),
                             _mm_blendv_epi8(hx, hy,
                                             CXL_COLL_RED_F16C_MASK16(take_y)));
        }
        break;
    }
    cxl_coll_reduce_apply_generic(CXL_COLL_FLOAT16, op, d + i, x + i, y + i,
                                  n - i);
}

static int cxl_coll_red_have_f16c(void)
{
    static int have = -1;   /* the same answer in every thread: no race */

    if (have < 0) {
        /* F16C from CPUID.1:ECX (clang 14 does not know "f16c" for
         * __builtin_cpu_supports); "avx" also says the OS saves the state */
        unsigned eax, ebx, ecx = 0, edx;

        have = __builtin_cpu_supports("avx") &&
               __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
    }
    return have;
}
#endif

/*
 * A buffer off its element alignment: a peer may publish a pool buffer at
 * any offset and a caller may pass any address, and the typed kernels'
 * access to a misaligned element is undefined (found by fuzz_coll_sig).
 * Such inputs go through aligned bounce buffers, a block at a time; each
 * block reads both inputs before it writes the output, so dst == a or
 * dst == b still work.  Aligned buffers, the normal case, keep the
 * kernels' own loops.
 */
#define CXL_COLL_RED_BOUNCE 512

static void cxl_coll_red_misaligned(cxl_coll_red_fn_t fn, size_t es,
                                    void *dst, const void *a, const void *b,
                                    size_t count)
{
    _Alignas(64) uint8_t ta[CXL_COLL_RED_BOUNCE], tb[CXL_COLL_RED_BOUNCE];
    _Alignas(64) uint8_t td[CXL_COLL_RED_BOUNCE];
    size_t per = CXL_COLL_RED_BOUNCE / es, n, i;

    for (i = 0; i < count; i += n) {
        n = (count - i < per) ? count - i : per;
        memcpy(ta, (const uint8_t*)a + i * es, n * es);
        memcpy(tb, (const uint8_t*)b + i * es, n * es);
        fn(td, ta, tb, n);
        memcpy((uint8_t*)dst + i * es, td, n * es);
    }
}

/* fn over dst, a, b; the bounce buffers where one is off alignment */
static inline void cxl_coll_red_call(cxl_coll_red_fn_t fn,
                                     cxl_coll_dtype_t dtype, void *dst,
                                     const void *a, const void *b,
                                     size_t count)
{
    size_t es;

    if (fn == NULL) {
        return;
    }
    es = cxl_coll_dtype_size(dtype);
    if (!cxl_coll_red_aligned(es, dst, a, b)) {
        cxl_coll_red_misaligned(fn, es, dst, a, b, count);
        return;
    }
    fn(dst, a, b, count);
}

/* the kernels of a build the CPU runs (checked by the callers, once) */
static void cxl_coll_red_run(cxl_coll_red_isa_t isa, cxl_coll_dtype_t dtype,
                             cxl_coll_op_t op, void *dst, const void *a,
                             const void *b, size_t count)
{
    if (((unsigned)dtype < CXL_COLL_DTYPE_LAST) &&
        ((unsigned)op < CXL_COLL_OP_LAST)) {
        cxl_coll_red_call(cxl_coll_red_table[isa][dtype][op], dtype, dst, a,
                          b, count);
    }
}

void cxl_coll_reduce_apply_isa(cxl_coll_red_isa_t isa, cxl_coll_dtype_t dtype,
                               cxl_coll_op_t op, void *dst, const void *a,
                               const void *b, size_t count)
{
    if (cxl_coll_reduce_isa_usable(isa)) { /* 0 for an isa out of range */
        cxl_coll_red_run(isa, dtype, op, dst, a, b, count);
    }
}

void cxl_coll_reduce_apply_generic(cxl_coll_dtype_t dtype, cxl_coll_op_t op,
                                   void *dst, const void *a, const void *b,
                                   size_t count)
{
    cxl_coll_red_run(cxl_coll_red_isa_best(), dtype, op, dst, a, b, count);
}

#if defined(__x86_64__)
#define CXL_COLL_RED_F16C_ENTRY(_op, _name) \
    static void cxl_coll_red_f16c_##_name(void *dst, const void *a, \
                                          const void *b, size_t n) \
    { \
        cxl_coll_red_f16c(_op, dst, a, b, n); \
    }

CXL_COLL_RED_F16C_ENTRY(CXL_COLL_SUM, sum)
CXL_COLL_RED_F16C_ENTRY(CXL_COLL_PROD, prod)
CXL_COLL_RED_F16C_ENTRY(CXL_COLL_MIN, min)
CXL_COLL_RED_F16C_ENTRY(CXL_COLL_MAX, max)
#endif

/*
 * The kernel cxl_coll_reduce_apply() runs for each datatype and operation:
 * the widest build of the portable loops, F16C for float16 where the CPU
 * has it.  Chosen when the library is loaded, so that a call costs one
 * lookup: through the choice on every call, a reduction of one element
 * took 130 instructions, 117 of them before the kernel's loop (callgrind,
 * allreduce of 8 B).
 */
static cxl_coll_red_fn_t cxl_coll_red_sel[CXL_COLL_DTYPE_LAST]
                                         [CXL_COLL_OP_LAST];

__attribute__((constructor)) static void cxl_coll_red_select(void)
{
    memcpy(cxl_coll_red_sel, cxl_coll_red_table[cxl_coll_red_isa_best()],
           sizeof(cxl_coll_red_sel));
#if defined(__x86_64__)
    if (cxl_coll_red_have_f16c()) {
        cxl_coll_red_sel[CXL_COLL_FLOAT16][CXL_COLL_SUM]  = cxl_coll_red_f16c_sum;
        cxl_coll_red_sel[CXL_COLL_FLOAT16][CXL_COLL_PROD] = cxl_coll_red_f16c_prod;
        cxl_coll_red_sel[CXL_COLL_FLOAT16][CXL_COLL_MIN]  = cxl_coll_red_f16c_min;
        cxl_coll_red_sel[CXL_COLL_FLOAT16][CXL_COLL_MAX]  = cxl_coll_red_f16c_max;
    }
#endif
}

cxl_coll_red_fn_t cxl_coll_reduce_kernel(cxl_coll_dtype_t dtype,
                                         cxl_coll_op_t op)
{
    return (((unsigned)dtype < CXL_COLL_DTYPE_LAST) &&
            ((unsigned)op < CXL_COLL_OP_LAST)) ? cxl_coll_red_sel[dtype][op] :
           NULL;
}

void cxl_coll_reduce_apply(cxl_coll_dtype_t dtype, cxl_coll_op_t op, void *dst,
                           const void *a, const void *b, size_t count)
{
    cxl_coll_red_call(cxl_coll_reduce_kernel(dtype, op), dtype, dst, a, b,
                      count);
}
