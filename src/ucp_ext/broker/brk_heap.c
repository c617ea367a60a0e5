/*
 * The arena's heap, as free ranges kept in broker memory.  The index in
 * the pool is the truth: at start the broker rebuilds this from the
 * ranges live records hold (brk_heap_reserve), so nothing about free
 * space is ever persisted or needs recovery.  Ranges are multiples of a
 * cache line, so two chunks never share a line; ranges of BRK_DIO_MIN and
 * more start on a page (O_DIRECT fills).
 */
#include "brk_srv.h"

#include <stdlib.h>
#include <string.h>

#define BRK_HEAP_ALIGN 64ull

static uint64_t brk_heap_round(uint64_t len)
{
    return (len + BRK_HEAP_ALIGN - 1) & ~(BRK_HEAP_ALIGN - 1);
}

static int brk_heap_insert_at(brk_heap_t *heap, uint64_t i, uint64_t off,
                              uint64_t len)
{
    brk_range_t *r;

    if (heap->nfree == heap->cap) {
        r = realloc(heap->free, (heap->cap ? heap->cap * 2 : 64) * sizeof(*r));
        if (r == NULL) {
            return -1;
        }
        heap->free = r;
        heap->cap  = heap->cap ? heap->cap * 2 : 64;
    }
    memmove(&heap->free[i + 1], &heap->free[i],
            (heap->nfree - i) * sizeof(*heap->free));
    heap->free[i].off = off;
    heap->free[i].len = len;
    heap->nfree++;
    return 0;
}

static void brk_heap_remove_at(brk_heap_t *heap, uint64_t i)
{
    memmove(&heap->free[i], &heap->free[i + 1],
            (heap->nfree - i - 1) * sizeof(*heap->free));
    heap->nfree--;
}

int brk_heap_init(brk_heap_t *heap, uint64_t start, uint64_t end)
{
    memset(heap, 0, sizeof(*heap));
    heap->start = brk_heap_round(start);
    heap->end   = end & ~(BRK_HEAP_ALIGN - 1);
    if (heap->end <= heap->start) {
        return -1;
    }
    return brk_heap_insert_at(heap, 0, heap->start, heap->end - heap->start);
}

void brk_heap_fini(brk_heap_t *heap)
{
    free(heap->free);
    memset(heap, 0, sizeof(*heap));
}

int brk_heap_alloc(brk_heap_t *heap, uint64_t len, uint64_t *off)
{
    uint64_t i, best = UINT64_MAX, align, a, gap = 0, g, end;

    len   = brk_heap_round(len ? len : 1);
    /* large ranges (chunks) start on a page: the fill reads into them with
     * O_DIRECT.  Ranges keep their 64-byte rounded length, so 4 MiB chunks
     * packed back to back stay aligned and a gap before one is rare (a
     * metadata blob in front of it) and stays free for small ranges. */
    align = (len >= BRK_DIO_MIN) ? BRK_DIO_ALIGN : BRK_HEAP_ALIGN;
    /* best fit: chunks are mostly one size, so holes get reused whole */
    for (i = 0; i < heap->nfree; ++i) {
        a = (heap->free[i].off + align - 1) & ~(align - 1);
        g = a - heap->free[i].off;
        if ((heap->free[i].len >= len) && (heap->free[i].len - len >= g) &&
            ((best == UINT64_MAX) || (heap->free[i].len < heap->free[best].len))) {
            best = i;
            gap  = g;
            if (heap->free[i].len == len) {
                break;
            }
        }
    }
    if (best == UINT64_MAX) {
        return -1;
    }
    *off = heap->free[best].off + gap;
    if (gap == 0) {
        heap->free[best].off += len;
        heap->free[best].len -= len;
        if (heap->free[best].len == 0) {
            brk_heap_remove_at(heap, best);
        }
    } else {
        end = heap->free[best].off + heap->free[best].len;
        heap->free[best].len = gap;
        if ((end > *off + len) &&
            brk_heap_insert_at(heap, best + 1, *off + len, end - *off - len)) {
            heap->free[best].len = end - heap->free[best].off; /* undo */
            return -1;
        }
    }
    heap->used += len;
    return 0;
}

int brk_heap_reserve(brk_heap_t *heap, uint64_t off, uint64_t len)
{
    uint64_t i, end;
    brk_range_t r;

    len = brk_heap_round(len ? len : 1);
    if ((off % BRK_HEAP_ALIGN) || (off < heap->start) || (off > heap->end) ||
        (len > heap->end - off)) {
        return -1;
    }
    end = off + len;
    for (i = 0; i < heap->nfree; ++i) {
        r = heap->free[i];
        if ((off >= r.off) && (end <= r.off + r.len)) {
            if ((off == r.off) && (end == r.off + r.len)) {
                brk_heap_remove_at(heap, i);
            } else if (off == r.off) {
                heap->free[i].off = end;
                heap->free[i].len = r.off + r.len - end;
            } else if (end == r.off + r.len) {
                heap->free[i].len = off - r.off;
            } else {
                heap->free[i].len = off - r.off;
                if (brk_heap_insert_at(heap, i + 1, end, r.off + r.len - end)) {
                    heap->free[i].len = r.len;
                    return -1;
                }
            }
            heap->used += len;
            return 0;
        }
    }
    return -1;      /* overlaps something in use: the index is inconsistent */
}

void brk_heap_free(brk_heap_t *heap, uint64_t off, uint64_t len)
{
    uint64_t i;

    len = brk_heap_round(len ? len : 1);
    for (i = 0; (i < heap->nfree) && (heap->free[i].off < off); ++i) {
    }
    heap->used -= len;
    if ((i > 0) && (heap->free[i - 1].off + heap->free[i - 1].len == off)) {
        heap->free[i - 1].len += len;
        if ((i < heap->nfree) && (off + len == heap->free[i].off)) {
            heap->free[i - 1].len += heap->free[i].len;
            brk_heap_remove_at(heap, i);
        }
        return;
    }
    if ((i < heap->nfree) && (off + len == heap->free[i].off)) {
        heap->free[i].off  = off;
        heap->free[i].len += len;
        return;
    }
    if (brk_heap_insert_at(heap, i, off, len)) {
        /* out of memory: the range is lost until the next start, which
         * rebuilds the heap from the index */
        return;
    }
}

uint64_t brk_heap_largest(const brk_heap_t *heap)
{
    uint64_t i, m = 0;

    for (i = 0; i < heap->nfree; ++i) {
        m = (heap->free[i].len > m) ? heap->free[i].len : m;
    }
    return m;
}
