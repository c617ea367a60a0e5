/*
 * Eviction policies (doc/design/broker.md, "Eviction").
 *
 *  pin   the first chunks filled, up to the pin budget, stay; the others
 *        stream through what is left, first in first out.  Every epoch of
 *        a random order then hits exactly the pinned share, where LRU over
 *        a dataset larger than the cache hits almost nothing.
 *  lru   least recently requested first.
 *  plan  the chunk whose next use in the announced epoch order is
 *        furthest away first (Belady), and the next chunks of the order
 *        are filled ahead of the readers.
 *
 * Victims come first from retired versions, then from the requesting
 * version by its policy, then from other versions by LRU; a chunk pinned
 * by a reader or in a pin policy's resident subset is never one.
 */
#include "brk_srv.h"

#include <stdlib.h>
#include <string.h>

uint64_t brk_pin_budget(const brk_srv_t *srv, const brk_vs_t *vs)
{
    uint64_t cap = srv->heap.end - srv->heap.start, window;

    if (vs->rec.pin_bytes) {
        return vs->rec.pin_bytes;
    }
    window = vs->rec.chunk_size * 4;
    if (window < cap / 8) {
        window = cap / 8;
    }
    return (cap > window) ? cap - window : 0;
}

uint64_t brk_plan_next_use(const brk_vs_t *vs, uint32_t c)
{
    const brk_plan_t *p = &vs->plan;
    uint64_t lo, hi, mid;

    if ((p->first == NULL) || (c >= vs->rec.nchunks)) {
        return UINT64_MAX;
    }
    lo = p->first[c];
    hi = p->first[c + 1];
    while (lo < hi) {                  /* first position >= clock */
        mid = lo + (hi - lo) / 2;
        if (p->pos[mid] < p->clock) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return (lo < p->first[c + 1]) ? p->pos[lo] : UINT64_MAX;
}

void brk_plan_touch(brk_vs_t *vs, uint32_t c)
{
    uint64_t next = brk_plan_next_use(vs, c);

    if (next != UINT64_MAX) {
        vs->plan.clock = next;
    }
}

void brk_plan_free(brk_plan_t *plan)
{
    free(plan->pos);
    free(plan->first);
    free(plan->seq);
    memset(plan, 0, sizeof(*plan));
}

int brk_plan_set(brk_vs_t *vs, const uint64_t *order, uint64_t n)
{
    uint64_t nchunks = vs->rec.nchunks, i, len = 0;
    brk_plan_t p;
    uint64_t *fill;
    uint32_t c, prev = UINT32_MAX;

    memset(&p, 0, sizeof(p));
    p.first = calloc(nchunks + 1, sizeof(*p.first));
    p.seq   = malloc((n ? n : 1) * sizeof(*p.seq));
    if ((p.first == NULL) || (p.seq == NULL)) {
        brk_plan_free(&p);
        return -1;
    }
    for (i = 0; i < n; ++i) {
        if (order[i] >= vs->rec.nsamples) {
            brk_plan_free(&p);
            return -2;
        }
        c = vs->samples[order[i]].chunk;
        if (c != prev) {               /* a run of one chunk is one use */
            p.seq[len++] = c;
            p.first[c + 1]++;
            prev = c;
        }
    }
    for (i = 0; i < nchunks; ++i) {
        p.first[i + 1] += p.first[i];
    }
    p.pos = malloc((len ? len : 1) * sizeof(*p.pos));
    fill  = malloc((nchunks ? nchunks : 1) * sizeof(*fill));
    if ((p.pos == NULL) || (fill == NULL)) {
        free(fill);
        brk_plan_free(&p);
        return -1;
    }
    memcpy(fill, p.first, nchunks * sizeof(*fill));
    for (i = 0; i < len; ++i) {
        p.pos[fill[p.seq[i]]++] = (uint32_t)i;
    }
    free(fill);
    p.len = len;
    brk_plan_free(&vs->plan);
    vs->plan = p;
    return 0;
}

/* Whether chunk c of vs may be a victim at all, and its rank (higher goes
 * first) within its class. */
static int brk_policy_rank(brk_srv_t *srv, brk_vs_t *vs, uint32_t c,
                           int by_policy, uint64_t *rank)
{
    const brk_crt_t *crt = &vs->crt[c];

    if ((BRK_CSTATE_STATE(vs->crt[c].word) != BRK_CHUNK_RESIDENT) ||
        (crt->tried == srv->alloc_round) || brk_cache_pinned(srv, vs, c)) {
        return 0;
    }
    if (vs->rec.state == BRK_VREC_RETIRING) {
        *rank = UINT64_MAX - crt->last_use;
        return 1;
    }
    if (crt->pinned) {
        return 0;
    }
    if (!by_policy) {
        *rank = UINT64_MAX - crt->last_use;
        return 1;
    }
    switch (vs->rec.policy) {
    case BRK_POLICY_PIN:
        *rank = UINT64_MAX - crt->fill_seq;
        break;
    case BRK_POLICY_PLAN:
        *rank = brk_plan_next_use(vs, c);
        if (vs->plan.first == NULL) {
            *rank = UINT64_MAX - crt->last_use; /* no plan yet: LRU */
        }
        break;
    default:
        *rank = UINT64_MAX - crt->last_use;
        break;
    }
    return 1;
}

int brk_policy_victim(brk_srv_t *srv, brk_vs_t *for_vs, int allow_own,
                      brk_vs_t **vs_p, uint32_t *chunk_p)
{
    int cls, found, best_cls = 3;
    uint64_t rank, best_rank = 0, c;
    brk_vs_t *vs;

    for (vs = srv->versions; vs != NULL; vs = vs->next) {
        if (vs->rec.state == BRK_VREC_RETIRING) {
            cls = 0;
        } else if (vs == for_vs) {
            if (!allow_own) {
                continue;
            }
            cls = 1;
        } else {
            cls = 2;
        }
        if (cls > best_cls) {
            continue;
        }
        for (c = 0; c < vs->rec.nchunks; ++c) {
            found = brk_policy_rank(srv, vs, (uint32_t)c, cls == 1, &rank);
            if (found && ((cls < best_cls) || (rank > best_rank))) {
                best_cls  = cls;
                best_rank = rank;
                *vs_p     = vs;
                *chunk_p  = (uint32_t)c;
            }
        }
    }
    return (best_cls < 3) ? 0 : -1;
}

/*
 * Read-ahead under pin and lru.  A random first epoch asks for its chunks
 * one miss at a time, so one reader keeps one fill in flight and the disk
 * sees scattered 4 MiB reads.  After a miss the chunks that follow it in
 * file order are filled too, up to srv->readahead fills in flight, one
 * pass over the dataset: the disk reads sequentially and in parallel, and
 * later misses find their chunk LOADING or RESIDENT.  Read-ahead takes only
 * free space, never evicts, and under pin fills no more than the pin
 * budget keeps: everything it loads stays until an epoch uses it.
 */
static void brk_readahead(brk_srv_t *srv, brk_vs_t *vs, uint32_t c)
{
    uint32_t n = vs->rec.nchunks;
    uint64_t off, len, budget = UINT64_MAX;

    if ((srv->readahead == 0) || (n == 0) ||
        (vs->rec.state != BRK_VREC_ACTIVE)) {
        return;
    }
    if ((c != UINT32_MAX) && (vs->ra_left == 0) && (c < n)) {
        vs->ra_next = (c + 1 < n) ? c + 1 : 0;
        vs->ra_left = n - 1;
    }
    if (vs->rec.policy == BRK_POLICY_PIN) {
        budget = brk_pin_budget(srv, vs);
    }
    while ((vs->ra_left > 0) && (vs->inflight < srv->readahead)) {
        c   = vs->ra_next;
        len = vs->chunks[c].len;
        if (BRK_CSTATE_STATE(vs->crt[c].word) == BRK_CHUNK_ABSENT) {
            if ((budget != UINT64_MAX) &&
                (vs->pinned_bytes + (uint64_t)(vs->inflight + 1) *
                 vs->rec.chunk_size > budget)) {
                vs->ra_left = 0;    /* the rest would only stream */
                return;
            }
            if (brk_heap_alloc(&srv->heap, len, &off)) {
                vs->ra_left = 0;    /* no free space: never evict for it */
                return;
            }
            srv->readaheads++;
            brk_cache_prefetch(srv, vs, c, off);
        }
        vs->ra_next = (c + 1 < n) ? c + 1 : 0;
        vs->ra_left--;
    }
}

void brk_plan_prefetch(brk_srv_t *srv, brk_vs_t *vs)
{
    brk_plan_t *p = &vs->plan;
    uint64_t pos, end, off, next, rank;
    brk_vs_t *vvs;
    uint32_t c, vc;

    if ((p->seq == NULL) || (vs->rec.state != BRK_VREC_ACTIVE)) {
        return;
    }
    end = p->clock + 1 + srv->prefetch;
    for (pos = p->clock + 1; (pos < p->len) && (pos < end) &&
                             (vs->inflight < srv->prefetch); ++pos) {
        c = p->seq[pos];
        if (BRK_CSTATE_STATE(vs->crt[c].word) != BRK_CHUNK_ABSENT) {
            continue;
        }
        srv->alloc_round++;
        /* only evict what is needed later than this chunk */
        while (brk_heap_alloc(&srv->heap, vs->chunks[c].len, &off)) {
            if (brk_policy_victim(srv, vs, 1, &vvs, &vc)) {
                return;
            }
            next = brk_plan_next_use(vvs, vc);
            rank = (vvs == vs) ? next : UINT64_MAX;
            if ((vvs == vs) && (vvs->rec.state == BRK_VREC_ACTIVE) &&
                (rank <= pos)) {
                return;
            }
            vvs->crt[vc].tried = srv->alloc_round;
            brk_cache_evict(srv, vvs, vc);
        }
        brk_cache_prefetch(srv, vs, c, off);
    }
}

void brk_policy_ahead(brk_srv_t *srv, brk_vs_t *vs, uint32_t c)
{
    if (vs->rec.policy == BRK_POLICY_PLAN) {
        brk_plan_prefetch(srv, vs);
    } else {
        brk_readahead(srv, vs, c);
    }
}
