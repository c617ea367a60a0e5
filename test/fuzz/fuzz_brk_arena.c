/*
 * Harness: the broker's restart recovery (brk_arena.c) on an arena image
 * a peer may have scribbled on: the header, the version records, the
 * metadata blobs and chunk-state arrays they point at (input format in
 * fuzz_brk_arena.h; the flags let the fuzzer store right CRCs, as a peer
 * that writes on purpose would).  The arena is a buffer of exactly its
 * size, so ASan sees any access past it.  A refused header is one line;
 * after recovery:
 *   - every attached version is ACTIVE, its name terminated, its metadata
 *     accepted by brk_meta_check and safe to walk, its chunk states all
 *     ABSENT or RESIDENT, a RESIDENT one as long as its chunk;
 *   - the heap is exact: the ranges in use (metadata, states, resident
 *     chunks) and the free ranges lie inside the heap, none overlaps
 *     another, together they cover it, and `used` is their sum;
 *   - handing out every free range and writing it stays inside the arena.
 */
#include "fuzz_brk.h"
#include "fuzz_brk_arena.h"

#include "brk_srv.h"

#include <ucx_cxl/cxlpool.h>

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_ROUND64(x) (((x) + 63) & ~(uint64_t)63)

typedef struct {
    uint64_t off, len;
    int      free;
} fuzz_range_t;

static int fuzz_range_cmp(const void *a, const void *b)
{
    const fuzz_range_t *x = a, *y = b;

    return (x->off < y->off) ? -1 : (x->off > y->off);
}

/* The image into a zeroed arena; the CRCs the flags ask for. */
static void fuzz_arena_load(uint8_t *arena, uint8_t flags, const uint8_t *p,
                            size_t n)
{
    size_t head = sizeof(brk_hdr_t) + FUZZ_ARENA_VRECS * sizeof(brk_vrec_t);
    brk_hdr_t *hdr    = (brk_hdr_t*)arena;
    brk_vrec_t *vrecs = (brk_vrec_t*)(arena + sizeof(brk_hdr_t));
    const size_t mcrc = offsetof(brk_meta_t, crc);
    brk_cstate_t *cs;
    brk_vrec_t *v;
    uint32_t i, crc;
    uint64_t c, soff, nch, moff, mlen;

    memset(arena, 0, FUZZ_ARENA_SIZE);
    memcpy(arena, p, (n < head) ? n : head);
    if (n > head) {
        n -= head;
        memcpy(arena + BRK_HDR_REGION, p + head,
               (n < FUZZ_ARENA_HEAP) ? n : FUZZ_ARENA_HEAP);
    }
    for (i = 0; i < FUZZ_ARENA_VRECS; ++i) {
        v = &vrecs[i];
        moff = v->meta_off;
        mlen = v->meta_len;
        if ((flags & FUZZ_ARENA_FIX_META) && (mlen >= sizeof(brk_meta_t)) &&
            (moff <= FUZZ_ARENA_SIZE) && (mlen <= FUZZ_ARENA_SIZE - moff)) {
            memset(arena + moff + mcrc, 0, sizeof(crc));
            crc = cxlpool_crc32c(0, arena + moff, mlen);
            memcpy(arena + moff + mcrc, &crc, sizeof(crc));
        }
        /* copies: the states may overlap the record they are fixed from */
        soff = v->states_off;
        nch  = v->nchunks;
        if ((flags & FUZZ_ARENA_FIX_CHUNKS) && (soff % 8 == 0) &&
            (nch <= FUZZ_ARENA_SIZE / sizeof(*cs)) &&
            (soff <= FUZZ_ARENA_SIZE) &&
            (nch * sizeof(*cs) <= FUZZ_ARENA_SIZE - soff)) {
            for (c = 0; c < nch; ++c) {
                cs = (brk_cstate_t*)(arena + soff) + c;
                if ((cs->off <= FUZZ_ARENA_SIZE) &&
                    (cs->len <= FUZZ_ARENA_SIZE - cs->off)) {
                    cs->crc = cxlpool_crc32c(0, arena + cs->off, cs->len);
                }
            }
        }
        if (flags & FUZZ_ARENA_FIX_VRECS) {
            v->crc = 0;
            v->crc = cxlpool_crc32c(0, v, sizeof(*v));
        }
    }
    if (flags & FUZZ_ARENA_FIX_HDR) {
        hdr->crc = 0;
        hdr->crc = cxlpool_crc32c(0, hdr, sizeof(*hdr));
    }
}

static void fuzz_arena_check_vs(brk_srv_t *srv, brk_vs_t *vs)
{
    const brk_vrec_t *v = &vs->rec;
    char err[256];
    uint64_t c;
    uint32_t st;

    if ((vs->vrec < srv->vrecs) || (vs->vrec >= srv->vrecs + BRK_MAX_VERSIONS) ||
        memcmp(vs->vrec, v, sizeof(*v)) || (v->state != BRK_VREC_ACTIVE) ||
        (memchr(v->name, '\0', sizeof(v->name)) == NULL)) {
        fuzz_brk_fail("attached version record %u is not a sound ACTIVE one",
                      vs->slot);
    }
    /* the broker's own copy, equal to the arena's right after recovery */
    if (memcmp(vs->meta, srv->arena + v->meta_off, v->meta_len) ||
        brk_meta_check(vs->meta, v->meta_len, err, sizeof(err)) ||
        (vs->meta->nchunks != v->nchunks)) {
        fuzz_brk_fail("version %u: its metadata is not what was checked",
                      vs->slot);
    }
    fuzz_brk_walk_meta(vs->meta, v->meta_len);
    for (c = 0; c < v->nchunks; ++c) {
        st = BRK_CSTATE_STATE(vs->crt[c].word);
        if ((vs->crt[c].word != vs->states[c].word) ||
            ((st == BRK_CHUNK_RESIDENT) &&
             ((vs->crt[c].off != vs->states[c].off) ||
              (vs->crt[c].len != vs->states[c].len)))) {
            fuzz_brk_fail("version %u chunk %llu: the broker's copy of its "
                          "state differs from the arena's", vs->slot,
                          (unsigned long long)c);
        }
        if ((st != BRK_CHUNK_ABSENT) && (st != BRK_CHUNK_RESIDENT)) {
            fuzz_brk_fail("version %u chunk %llu left in state %u", vs->slot,
                          (unsigned long long)c, st);
        }
        if ((st == BRK_CHUNK_RESIDENT) &&
            (vs->crt[c].len != vs->chunks[c].len)) {
            fuzz_brk_fail("version %u chunk %llu resident with %llu of its "
                          "%llu bytes", vs->slot, (unsigned long long)c,
                          (unsigned long long)vs->crt[c].len,
                          (unsigned long long)vs->chunks[c].len);
        }
    }
}

/* Every range in use or free: inside the heap, disjoint, covering it. */
static void fuzz_arena_check_heap(brk_srv_t *srv)
{
    brk_heap_t *h = &srv->heap;
    fuzz_range_t *r;
    uint64_t n = h->nfree, cap = h->nfree + 2, i, c, used = 0, at;
    brk_vs_t *vs;

    for (vs = srv->versions; vs != NULL; vs = vs->next) {
        cap += 2 + vs->rec.nchunks;
    }
    r = malloc(cap * sizeof(*r));
    if (r == NULL) {
        abort();
    }
    for (i = 0; i < h->nfree; ++i) {
        r[i].off  = h->free[i].off;
        r[i].len  = h->free[i].len;
        r[i].free = 1;
        if ((i > 0) && (h->free[i].off <= h->free[i - 1].off)) {
            fuzz_brk_fail("free ranges out of order");
        }
    }
    for (vs = srv->versions; vs != NULL; vs = vs->next) {
        r[n++] = (fuzz_range_t){ vs->rec.meta_off,
                                 FUZZ_ROUND64(vs->rec.meta_len ?
                                              vs->rec.meta_len : 1), 0 };
        r[n++] = (fuzz_range_t){ vs->rec.states_off,
                                 FUZZ_ROUND64(vs->rec.nchunks ?
                                              vs->rec.nchunks *
                                              sizeof(brk_cstate_t) : 1), 0 };
        for (c = 0; c < vs->rec.nchunks; ++c) {
            if (BRK_CSTATE_STATE(vs->crt[c].word) == BRK_CHUNK_RESIDENT) {
                r[n++] = (fuzz_range_t){ vs->crt[c].off,
                                         FUZZ_ROUND64(vs->crt[c].len ?
                                                      vs->crt[c].len : 1),
                                         0 };
            }
        }
    }
    qsort(r, n, sizeof(*r), fuzz_range_cmp);
    for (i = 0, at = h->start; i < n; ++i) {
        if ((r[i].off != at) || (r[i].len == 0) ||
            (r[i].len > h->end - r[i].off)) {
            fuzz_brk_fail("heap [%llu, %llu): range %llu is %llu bytes at "
                          "%llu (%s), expected one at %llu",
                          (unsigned long long)h->start,
                          (unsigned long long)h->end, (unsigned long long)i,
                          (unsigned long long)r[i].len,
                          (unsigned long long)r[i].off,
                          r[i].free ? "free" : "in use",
                          (unsigned long long)at);
        }
        at += r[i].len;
        used += r[i].free ? 0 : r[i].len;
    }
    if ((at != h->end) || (used != h->used)) {
        fuzz_brk_fail("heap ranges end at %llu of %llu, %llu bytes in use, "
                      "the heap counts %llu", (unsigned long long)at,
                      (unsigned long long)h->end, (unsigned long long)used,
                      (unsigned long long)h->used);
    }
    free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[BRK_ERRMSG_MAX];
    brk_srv_t srv;
    uint8_t *arena;
    uint64_t off, len;
    brk_vs_t *vs;

    if (size < 1) {
        return 0;
    }
    arena = malloc(FUZZ_ARENA_SIZE);
    if (arena == NULL) {
        abort();
    }
    fuzz_arena_load(arena, data[0], data + 1, size - 1);
    memset(&srv, 0, sizeof(srv));
    srv.params.quiet  = 1;
    srv.params.verify = !!(data[0] & FUZZ_ARENA_VERIFY);
    srv.coh           = CXL_COH_HW;
    err[0] = '\0';
    if (brk_arena_check_hdr((const brk_hdr_t*)arena, FUZZ_ARENA_SIZE, err,
                            sizeof(err)) != CXL_BROKER_OK) {
        fuzz_brk_check_err(err);
        free(arena);
        return 0;
    }
    if (brk_arena_recover(&srv, arena, FUZZ_ARENA_SIZE, err,
                          sizeof(err)) == CXL_BROKER_OK) {
        for (vs = srv.versions; vs != NULL; vs = vs->next) {
            fuzz_arena_check_vs(&srv, vs);
        }
        fuzz_arena_check_heap(&srv);
        /* what the heap hands out next is written by fills: inside */
        while (((len = brk_heap_largest(&srv.heap)) > 0) &&
               (brk_heap_alloc(&srv.heap, len, &off) == 0)) {
            memset(arena + off, 0xa5, len);
        }
    } else {
        fuzz_brk_check_err(err);
    }
    brk_arena_close(&srv);
    free(arena);
    return 0;
}
