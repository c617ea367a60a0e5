/*
 * test_coll_far - the reads of a peer's lines with their lines requested
 * ahead (coll_far.c) against the plain operations they stand for.
 *
 * cxl_coll_far_copy(): every length around the thresholds and piece
 * boundaries (0 .. 64 KiB + 1), source and destination off alignment,
 * guard bytes around the destination, the source unchanged.
 * cxl_coll_far_reduce(): every dtype x supported op x count x which
 * operands are far (none, a, b, both) x aliasing (dst distinct, dst == a,
 * dst == b), bitwise equal to cxl_coll_reduce_apply() on the same random
 * inputs (test_coll_reduce checks that one against reference arithmetic).
 *
 * Ends with "test_coll_far: N checks, N failed"; exit 1 on failure.
 */
#include "coll_far.h"
#include "coll_ref.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_GUARD      64
#define TEST_GUARD_BYTE 0x5a

static unsigned long test_checks, test_failed;
static uint64_t      test_rng = 0x2545f4914f6cdd1dull;

static void test_fill(uint8_t *p, size_t len)
{
    size_t i;

    for (i = 0; i < len; i++) {
        p[i] = (uint8_t)(coll_ref_rand(&test_rng) >> 56);
    }
}

static void *test_alloc(size_t len)
{
    void *p = malloc(len ? len : 1);

    if (p == NULL) {
        fprintf(stderr, "test_coll_far: out of memory\n");
        exit(1);
    }
    return p;
}

static void test_check(int ok, const char *fmt, size_t a, size_t b, size_t c)
{
    test_checks++;
    if (!ok) {
        test_failed++;
        if (test_failed <= 20) {
            fprintf(stderr, "FAIL: ");
            fprintf(stderr, fmt, a, b, c);
            fprintf(stderr, "\n");
        }
    }
}

/* the TEST_GUARD + off bytes before buf + TEST_GUARD + off and the
 * TEST_GUARD after its len bytes are untouched */
static int test_guards(const uint8_t *buf, size_t off, size_t len)
{
    size_t i;

    for (i = 0; i < TEST_GUARD + off; i++) {
        if (buf[i] != TEST_GUARD_BYTE) {
            return 0;
        }
    }
    for (i = 0; i < TEST_GUARD; i++) {
        if (buf[TEST_GUARD + off + len + i] != TEST_GUARD_BYTE) {
            return 0;
        }
    }
    return 1;
}

static void test_copy(void)
{
    static const size_t lens[] = {0, 1, 63, 64, 127, 128, 129, 1000, 1023,
                                  1024, 1025, 2049, 4095, 4096, 4097, 5121,
                                  8191, 16384, 65537};
    static const size_t offs[] = {0, 3, 61};
    size_t k, s, d, len;
    uint8_t *src, *src0, *buf;

    for (k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
        len  = lens[k];
        src  = test_alloc(len + 64);
        src0 = test_alloc(len + 64);
        buf  = test_alloc(len + 64 + 2 * TEST_GUARD);
        for (s = 0; s < sizeof(offs) / sizeof(offs[0]); s++) {
            for (d = 0; d < sizeof(offs) / sizeof(offs[0]); d++) {
                test_fill(src, len + 64);
                memcpy(src0, src, len + 64);
                memset(buf, TEST_GUARD_BYTE, len + 64 + 2 * TEST_GUARD);
                cxl_coll_far_copy(buf + TEST_GUARD + offs[d], src + offs[s],
                                  len);
                test_check(!memcmp(buf + TEST_GUARD + offs[d], src + offs[s],
                                   len),
                           "far copy of %zu B (src +%zu, dst +%zu): wrong "
                           "bytes", len, offs[s], offs[d]);
                test_check(test_guards(buf, offs[d], len),
                           "far copy of %zu B (src +%zu, dst +%zu): guard "
                           "bytes overwritten", len, offs[s], offs[d]);
                test_check(!memcmp(src, src0, len + 64),
                           "far copy of %zu B (src +%zu, dst +%zu): source "
                           "changed", len, offs[s], offs[d]);
            }
        }
        free(src);
        free(src0);
        free(buf);
    }
}

enum { TEST_ALIAS_NONE, TEST_ALIAS_A, TEST_ALIAS_B, TEST_ALIAS_LAST };

/* off: b lies that many bytes off the allocation's alignment (a peer's
 * pool buffer at any offset): the kernels must not see it */
static void test_reduce_case(cxl_coll_dtype_t dt, cxl_coll_op_t op,
                             size_t count, unsigned far, int alias,
                             size_t off)
{
    size_t es = cxl_coll_dtype_size(dt), len = count * es;
    uint8_t *a = test_alloc(len), *b = test_alloc(len);
    uint8_t *bmis = test_alloc(len + off);
    uint8_t *exp = test_alloc(len), *buf = test_alloc(len + 2 * TEST_GUARD);
    uint8_t *dst = buf + TEST_GUARD;
    const void *pa = a, *pb = b;

    test_fill(a, len);
    test_fill(b, len);
    cxl_coll_reduce_apply(dt, op, exp, a, b, count);
    memset(buf, TEST_GUARD_BYTE, len + 2 * TEST_GUARD);
    if (alias == TEST_ALIAS_A) {
        pa = memcpy(dst, a, len);
    } else if (alias == TEST_ALIAS_B) {
        pb = memcpy(dst, b, len);
    }
    if ((off > 0) && (alias != TEST_ALIAS_B)) {
        pb = memcpy(bmis + off, b, len);
    }
    cxl_coll_far_reduce(dt, op, dst, pa, pb, count, far);
    test_checks++;
    if (memcmp(dst, exp, len) || !test_guards(buf, 0, len)) {
        test_failed++;
        if (test_failed <= 20) {
            fprintf(stderr, "FAIL: far reduce %s %s count %zu far %u alias "
                    "%d b +%zu: %s\n", cxl_coll_dtype_name(dt),
                    cxl_coll_op_name(op), count, far, alias, off,
                    memcmp(dst, exp, len) ? "differs from "
                    "cxl_coll_reduce_apply()" : "guard bytes overwritten");
        }
    }
    free(a);
    free(b);
    free(bmis);
    free(exp);
    free(buf);
}

static void test_reduce(void)
{
    static const size_t counts[] = {0, 1, 17, 129, 1000, 4099, 65539};
    unsigned dt, op, far, c;
    int alias;

    for (dt = 0; dt < CXL_COLL_DTYPE_LAST; dt++) {
        for (op = 0; op < CXL_COLL_OP_LAST; op++) {
            if (!cxl_coll_op_supported(dt, op)) {
                continue;
            }
            for (c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
                for (far = 0; far <= (CXL_COLL_FAR_A | CXL_COLL_FAR_B);
                     far++) {
                    for (alias = 0; alias < TEST_ALIAS_LAST; alias++) {
                        test_reduce_case(dt, op, counts[c], far, alias, 0);
                        test_reduce_case(dt, op, counts[c], far, alias, 1);
                    }
                }
            }
        }
    }
}

int main(void)
{
    test_copy();
    test_reduce();
    printf("test_coll_far: %lu checks, %lu failed\n", test_checks,
           test_failed);
    return test_failed ? 1 : 0;
}
