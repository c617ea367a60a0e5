/*
 * Reads of bytes another core has just written.  Every line of a peer's
 * publication sits in the writer's cache, so each costs this core one
 * crossing.  A plain loop over them keeps few of those transfers in
 * flight: the hardware prefetchers start streaming only after several
 * misses in a row, and a reduction loop stalls on each line it has not
 * got.  So the first CXL_COLL_FAR_AHEAD bytes are requested at once, and
 * then each piece of CXL_COLL_FAR_PIECE bytes that far ahead of the piece
 * in use: the transfers overlap from the first line on.
 *
 * Only bytes the caller has been told are ready are touched: requesting a
 * line the writer is still writing would pull it back and forth between
 * the cores.
 *
 * Two processes on this VM's two cores, one writing a buffer, the other
 * reading it once it is flagged (slow state, medians of 10000 reads each,
 * alternating): copy of 4 KiB 411 -> 291 ns, 16 KiB 1002 -> 722 ns;
 * float sum (dst = own + peer's) of 4 KiB 491 -> 301 ns, 16 KiB 1482 ->
 * 772 ns, 64 KiB 5190 -> 2715 ns, 256 KiB 14838 -> 10329 ns.  Ahead 8 KiB
 * in pieces of 2 KiB, or 2 KiB in pieces of 512 B, were slower in
 * coll_bw; so was leaving publications of up to 1 KiB alone (allreduce
 * of 512 B 0.41 -> 0.47 us).
 */
#include "coll_far.h"

#include <stdint.h>
#include <string.h>

#define CXL_COLL_FAR_AHEAD 4096
#define CXL_COLL_FAR_PIECE 1024
#define CXL_COLL_FAR_LINE  64
/* up to this many bytes the plain loop: a reduction of more than two
 * lines gains (CXL_COLL_FAR_MIN, coll_far.h), a copy only from more
 * than 1 KiB */
#define CXL_COLL_FAR_COPY_MIN 1024
#define CXL_COLL_FAR_COPY_MAX 16384

/* Ask for the lines of [p, p + len) (a hint: nothing faults). */
static inline void cxl_coll_far_request(const uint8_t *p, size_t len)
{
    uintptr_t a   = (uintptr_t)p & ~(uintptr_t)(CXL_COLL_FAR_LINE - 1);
    uintptr_t end = (uintptr_t)p + len;

    for (; a < end; a += CXL_COLL_FAR_LINE) {
        __builtin_prefetch((const void*)a, 0, 3);
    }
}

/* The bytes of [x + AHEAD, x + AHEAD + PIECE) that lie below len. */
static inline size_t cxl_coll_far_next(size_t x, size_t len)
{
    size_t at = x + CXL_COLL_FAR_AHEAD;

    if (at >= len) {
        return 0;
    }
    return (len - at < CXL_COLL_FAR_PIECE) ? len - at : CXL_COLL_FAR_PIECE;
}

void cxl_coll_far_copy(void *dst, const void *src, size_t len)
{
    const uint8_t *s = src;
    uint8_t *d       = dst;
    size_t x, n, next;

    if ((len <= CXL_COLL_FAR_COPY_MIN) || (len > CXL_COLL_FAR_COPY_MAX)) {
        /* long copies: memcpy streams them well by itself (a reader of
         * 64 KiB chunks behind their writer: bcast of 256 KiB 11.0 us
         * plain, 12.4-14.2 in pieces) */
        memcpy(d, s, len);
        return;
    }
    cxl_coll_far_request(s, (len < CXL_COLL_FAR_AHEAD) ? len :
                            CXL_COLL_FAR_AHEAD);
    for (x = 0; x < len; x += n) {
        n    = (len - x < CXL_COLL_FAR_PIECE) ? len - x : CXL_COLL_FAR_PIECE;
        next = cxl_coll_far_next(x, len);
        if (next > 0) {
            cxl_coll_far_request(s + x + CXL_COLL_FAR_AHEAD, next);
        }
        memcpy(d + x, s + x, n);
    }
}

/* fn, or the checked entry where there is none */
static inline void cxl_coll_far_apply(cxl_coll_red_fn_t fn,
                                      cxl_coll_dtype_t dtype,
                                      cxl_coll_op_t op, void *dst,
                                      const void *a, const void *b,
                                      size_t count)
{
    if (fn != NULL) {
        fn(dst, a, b, count);
    } else {
        cxl_coll_reduce_apply(dtype, op, dst, a, b, count);
    }
}

void cxl_coll_far_reduce(cxl_coll_dtype_t dtype, cxl_coll_op_t op,
                         void *dst, const void *a, const void *b,
                         size_t count, unsigned far)
{
    size_t es = cxl_coll_dtype_size(dtype), len = count * es, x, n, next;
    const uint8_t *pa = a, *pb = b;
    uint8_t *d        = dst;
    cxl_coll_red_fn_t fn;

    /* the kernel looked up once, not for every piece; NULL off alignment
     * (cxl_coll_reduce_apply() bounces such pieces: each keeps the
     * start's alignment) */
    fn = cxl_coll_red_aligned(es, dst, a, b) ?
         cxl_coll_reduce_kernel(dtype, op) : NULL;
    if ((far == 0) || (len <= CXL_COLL_FAR_MIN)) {
        cxl_coll_far_apply(fn, dtype, op, dst, a, b, count);
        return;
    }
    n = (len < CXL_COLL_FAR_AHEAD) ? len : CXL_COLL_FAR_AHEAD;
    if (far & CXL_COLL_FAR_A) {
        cxl_coll_far_request(pa, n);
    }
    if (far & CXL_COLL_FAR_B) {
        cxl_coll_far_request(pb, n);
    }
    /* pieces of whole elements: PIECE is a multiple of every size */
    for (x = 0; x < len; x += n) {
        n    = (len - x < CXL_COLL_FAR_PIECE) ? len - x : CXL_COLL_FAR_PIECE;
        next = cxl_coll_far_next(x, len);
        if ((next > 0) && (far & CXL_COLL_FAR_A)) {
            cxl_coll_far_request(pa + x + CXL_COLL_FAR_AHEAD, next);
        }
        if ((next > 0) && (far & CXL_COLL_FAR_B)) {
            cxl_coll_far_request(pb + x + CXL_COLL_FAR_AHEAD, next);
        }
        cxl_coll_far_apply(fn, dtype, op, d + x, pa + x, pb + x, n / es);
    }
}
