/*
 * The broker's arena heap (src/ucp_ext/broker/brk_heap.c) against a shadow
 * of every range handed out: ranges never overlap and stay inside the
 * heap, ranges of BRK_DIO_MIN and more start on a BRK_DIO_ALIGN boundary
 * (the fill reads into chunks with O_DIRECT), the used count is the sum of
 * the rounded lengths, and freeing everything leaves the one range the
 * heap began with.  A heap that starts off a page boundary, with small
 * (metadata) and large (chunk) ranges mixed, and thousands of random
 * allocations and frees.  Last line "test_brk_heap: N passed, N failed".
 */
#include "brk_srv.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB       (1024ull * 1024ull)
#define MAX_LIVE  512

typedef struct {
    uint64_t off, len;
} th_range_t;

static unsigned th_pass, th_fail;

static void th_check(int ok, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void th_check(int ok, const char *fmt, ...)
{
    va_list ap;

    printf("%s ", ok ? "ok" : "FAIL");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (ok) {
        th_pass++;
    } else {
        th_fail++;
    }
}

static uint64_t th_round(uint64_t len)
{
    return ((len ? len : 1) + 63) & ~63ull;
}

static uint64_t th_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* every live range inside [start, end), none overlapping another or a
 * free range, large ones page-aligned; "" or what is wrong */
static const char *th_invariants(const brk_heap_t *h, const th_range_t *live,
                                 unsigned n, uint64_t *used)
{
    static char why[200];
    unsigned i, j;
    uint64_t k;

    *used = 0;
    for (i = 0; i < n; ++i) {
        const th_range_t *r = &live[i];

        *used += th_round(r->len);
        if ((r->off < h->start) || (r->off + th_round(r->len) > h->end)) {
            snprintf(why, sizeof(why), "range %" PRIu64 "+%" PRIu64
                     " outside the heap", r->off, r->len);
            return why;
        }
        if ((r->len >= BRK_DIO_MIN) && (r->off % BRK_DIO_ALIGN)) {
            snprintf(why, sizeof(why), "range of %" PRIu64 " bytes at %"
                     PRIu64 ": not on a page", r->len, r->off);
            return why;
        }
        for (j = i + 1; j < n; ++j) {
            if ((r->off < live[j].off + th_round(live[j].len)) &&
                (live[j].off < r->off + th_round(r->len))) {
                snprintf(why, sizeof(why), "ranges at %" PRIu64 " and %"
                         PRIu64 " overlap", r->off, live[j].off);
                return why;
            }
        }
        for (k = 0; k < h->nfree; ++k) {
            if ((r->off < h->free[k].off + h->free[k].len) &&
                (h->free[k].off < r->off + th_round(r->len))) {
                snprintf(why, sizeof(why), "range at %" PRIu64 " overlaps "
                         "free range %" PRIu64 "+%" PRIu64, r->off,
                         h->free[k].off, h->free[k].len);
                return why;
            }
        }
    }
    for (k = 1; k < h->nfree; ++k) {
        if (h->free[k - 1].off + h->free[k - 1].len >= h->free[k].off) {
            return "free ranges unsorted, overlapping or not coalesced";
        }
    }
    return (*used == h->used) ? "" : "used count differs from the ranges";
}

int main(void)
{
    static th_range_t live[MAX_LIVE];
    const uint64_t start = 4096 + 192, end = start + 96 * MIB;
    uint64_t seed = 0x9e3779b97f4a7c15ull, off, len, used, fails = 0;
    const char *why = "";
    unsigned n = 0, i, op, large_ok = 1;
    int rc;
    brk_heap_t h;

    th_check(brk_heap_init(&h, start, end) == 0, "heap of 96 MiB at %" PRIu64,
             start);

    /* a metadata blob, then chunks: the first chunk must skip to a page */
    rc = brk_heap_alloc(&h, 1000, &off);
    th_check((rc == 0) && (off == start), "a small range comes first, at "
             "the heap's start (%" PRIu64 ")", off);
    live[n++] = (th_range_t){off, 1000};
    for (i = 0; i < 8; ++i) {
        if (brk_heap_alloc(&h, 4 * MIB, &off) != 0) {
            large_ok = 0;
            break;
        }
        live[n++] = (th_range_t){off, 4 * MIB};
        large_ok &= (off % BRK_DIO_ALIGN) == 0;
    }
    th_check(large_ok, "8 chunks of 4 MiB after it start on pages");
    rc = brk_heap_alloc(&h, 100, &off);
    th_check(rc == 0, "a small range fits into the gap before the first "
             "chunk (at %" PRIu64 ")", off);
    live[n++] = (th_range_t){off, 100};
    th_check(off < live[1].off, "   it is the gap (%" PRIu64 " < %" PRIu64 ")",
             off, live[1].off);
    why = th_invariants(&h, live, n, &used);
    th_check(why[0] == '\0', "invariants after the first ranges %s", why);

    /* random allocations and frees of small and large ranges */
    for (op = 0; (op < 20000) && (why[0] == '\0'); ++op) {
        if ((n > 0) && ((n == MAX_LIVE) || (th_rand(&seed) % 3 == 0))) {
            i = (unsigned)(th_rand(&seed) % n);
            brk_heap_free(&h, live[i].off, live[i].len);
            live[i] = live[--n];
        } else {
            switch (th_rand(&seed) % 4) {
            case 0:
                len = 1 + th_rand(&seed) % 5000;
                break;
            case 1:
                len = 4 * MIB;
                break;
            case 2:
                len = BRK_DIO_MIN + th_rand(&seed) % (3 * MIB);
                break;
            default:
                len = th_rand(&seed) % (BRK_DIO_MIN + 1);
                break;
            }
            if (brk_heap_alloc(&h, len, &off) == 0) {
                live[n++] = (th_range_t){off, len};
            } else {
                fails++;
                if (brk_heap_largest(&h) >= th_round(len) + BRK_DIO_ALIGN) {
                    why = "an allocation failed with a free range large "
                          "enough for it and its alignment";
                }
            }
        }
        if ((why[0] == '\0') && (op % 97 == 0)) {
            why = th_invariants(&h, live, n, &used);
        }
    }
    if (why[0] == '\0') {
        why = th_invariants(&h, live, n, &used);
    }
    th_check(why[0] == '\0', "20000 random allocations and frees (%" PRIu64
             " refused for lack of space, %u live) %s", fails, n, why);

    while (n > 0) {
        --n;
        brk_heap_free(&h, live[n].off, live[n].len);
    }
    th_check((h.nfree == 1) && (h.free[0].off == h.start) &&
             (h.free[0].off + h.free[0].len == h.end) && (h.used == 0),
             "everything freed: one free range, the whole heap (%" PRIu64
             " ranges, used %" PRIu64 ")", h.nfree, h.used);
    brk_heap_fini(&h);
    printf("test_brk_heap: %u passed, %u failed\n", th_pass, th_fail);
    return th_fail ? 1 : 0;
}
