/*
 * Residency of chunks: the single-flight fill, the pin check before an
 * eviction, and the answers to requests waiting for chunks.
 *
 * A chunk is filled by one reader thread however many requests ask for
 * it: the first request finds it ABSENT, takes space and marks it
 * LOADING; later ones queue as waiters until the fill publishes it.
 *
 * Pins: a remote handle's pins are counted here (rpins); a local reader
 * pins a chunk by setting its bit in its own bitmap in the arena, then
 * loads the chunk's word.  An eviction stores EVICTING, fences, then reads
 * every bitmap of the version: either the reader sees EVICTING (and asks
 * the broker) or the broker sees the bit (and puts the word back): the
 * store-fence-load pattern on both sides never lets both miss each other.
 */
#include "brk_srv.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cxl_broker_epoch_stat_t *brk_vs_epoch_stat(brk_vs_t *vs)
{
    cxl_broker_epoch_stat_t *e;

    if ((vs->nepochs == 0) || (vs->epochs[vs->nepochs - 1].epoch != vs->epoch)) {
        e = realloc(vs->epochs, (vs->nepochs + 1) * sizeof(*e));
        if (e == NULL) {
            return (vs->nepochs > 0) ? &vs->epochs[vs->nepochs - 1] : NULL;
        }
        vs->epochs = e;
        e = &vs->epochs[vs->nepochs++];
        memset(e, 0, sizeof(*e));
        snprintf(e->name, sizeof(e->name), "%s", vs->rec.name);
        e->version = vs->rec.version;
        e->epoch   = vs->epoch;
    }
    return &vs->epochs[vs->nepochs - 1];
}

static int brk_bitmap_test(brk_srv_t *srv, const brk_handle_t *h, uint32_t c)
{
    const uint64_t *bm = (const uint64_t*)(srv->arena + h->bitmap_off);

    return (__atomic_load_n(&bm[c / 64], __ATOMIC_RELAXED) >> (c % 64)) & 1;
}

int brk_cache_pinned(brk_srv_t *srv, brk_vs_t *vs, uint32_t c)
{
    const brk_handle_t *h;

    if (vs->crt[c].remote_pins) {
        return 1;
    }
    for (h = vs->handles; h != NULL; h = h->next_in_vs) {
        if (h->bitmap_len && brk_bitmap_test(srv, h, c)) {
            return 1;
        }
    }
    return 0;
}

int brk_cache_evict(brk_srv_t *srv, brk_vs_t *vs, uint32_t c)
{
    brk_cstate_t *cs = &vs->states[c];
    brk_crt_t *crt   = &vs->crt[c];
    uint64_t w = crt->word, g = BRK_CSTATE_GEN(w);
    cxl_broker_epoch_stat_t *es;

    if ((BRK_CSTATE_STATE(w) != BRK_CHUNK_RESIDENT) || vs->crt[c].remote_pins) {
        return 0;
    }
    __atomic_store_n(&cs->word, BRK_CSTATE_WORD(g + 1, BRK_CHUNK_EVICTING),
                     __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (brk_cache_pinned(srv, vs, c)) {
        /* a reader pinned it meanwhile: the bytes never changed */
        __atomic_store_n(&cs->word, w, __ATOMIC_RELEASE);
        return 0;
    }
    brk_chunk_publish(srv, vs, c, BRK_CSTATE_WORD(g + 2, BRK_CHUNK_ABSENT));
    brk_heap_free(&srv->heap, crt->off, crt->len);
    vs->resident_chunks--;
    vs->resident_bytes -= crt->len;
    if (vs->crt[c].pinned) {
        vs->crt[c].pinned  = 0;
        vs->pinned_bytes  -= crt->len;
    }
    vs->crt[c].warm = 0;
    srv->evictions++;
    es = brk_vs_epoch_stat(vs);
    if (es != NULL) {
        es->evictions++;
    }
    return 1;
}

int brk_cache_alloc(brk_srv_t *srv, brk_vs_t *vs, uint64_t len,
                    int allow_evict_own, uint64_t *off)
{
    brk_vs_t *vvs;
    uint32_t vc;

    srv->alloc_round++;
    while (brk_heap_alloc(&srv->heap, len, off)) {
        if (len > srv->heap.end - srv->heap.start) {
            return -1;
        }
        if (brk_policy_victim(srv, vs, allow_evict_own, &vvs, &vc)) {
            return -1;
        }
        vvs->crt[vc].tried = srv->alloc_round;
        brk_cache_evict(srv, vvs, vc);
    }
    return 0;
}

static void brk_pending_entry(brk_srv_t *srv, brk_pending_t *pend,
                              uint32_t slot, int status, const brk_crt_t *cs)
{
    brk_pin_ent_t *e = &pend->ent[slot];

    e->status = status;
    if ((status == CXL_BROKER_OK) && (cs != NULL)) {
        e->word = cs->word;
        e->off  = cs->off;
        e->len  = cs->len;
    }
    if (--pend->remaining == 0) {
        brk_pending_done(srv, pend);
    }
}

static void brk_cache_start_fill(brk_srv_t *srv, brk_vs_t *vs, uint32_t c,
                                 uint64_t off)
{
    brk_cstate_t *cs = &vs->states[c];
    brk_crt_t *crt   = &vs->crt[c];
    brk_fill_job_t *job;

    cs->off  = crt->off = off;
    cs->len  = crt->len = vs->chunks[c].len;
    cs->crc  = 0;
    brk_chunk_publish(srv, vs, c, BRK_CSTATE_WORD(BRK_CSTATE_GEN(crt->word) + 1,
                                                  BRK_CHUNK_LOADING));
    job = calloc(1, sizeof(*job));
    if (job == NULL) {
        brk_fill_job_t fake = {.vs = vs, .chunk = c,
                               .status = CXL_BROKER_ERR_NO_MEMORY};
        snprintf(fake.err, sizeof(fake.err), "out of memory");
        vs->inflight++;
        brk_cache_fill_done(srv, &fake);
        return;
    }
    job->vs    = vs;
    job->chunk = c;
    job->dst   = srv->arena + off;
    vs->inflight++;
    brk_fill_post(&srv->fill, job);
}

void brk_cache_request(brk_srv_t *srv, brk_vs_t *vs, uint32_t c,
                       brk_pending_t *pend, uint32_t slot)
{
    brk_crt_t *crt   = &vs->crt[c];
    const brk_crt_t *cs = crt;
    int fill_only    = (pend != NULL) && (pend->flags & BRK_PIN_FILL_ONLY);
    cxl_broker_epoch_stat_t *es = brk_vs_epoch_stat(vs);
    brk_waiter_t *w;
    uint64_t off;

    if (!fill_only) {
        crt->last_use = ++srv->clock;
        brk_plan_touch(vs, c);
    }
    switch (BRK_CSTATE_STATE(cs->word)) {
    case BRK_CHUNK_RESIDENT:
        if (!fill_only) {
            srv->hits++;
            if (es != NULL) {
                es->hits++;
            }
        }
        if (pend != NULL) {
            brk_pending_entry(srv, pend, slot, CXL_BROKER_OK, cs);
        }
        return;
    case BRK_CHUNK_LOADING:
        break;
    default:
        if (brk_cache_alloc(srv, vs, vs->chunks[c].len, !fill_only, &off)) {
            if (pend != NULL) {
                if (pend->err[0] == '\0') {
                    snprintf(pend->err, sizeof(pend->err), "%s v%u: no room "
                             "for chunk %u (%" PRIu64 " KiB): the cache of "
                             "%" PRIu64 " MiB is full of chunks pinned by "
                             "readers or by the pin policy", vs->rec.name,
                             vs->rec.version, c, vs->chunks[c].len >> 10,
                             (srv->heap.end - srv->heap.start) >> 20);
                }
                brk_pending_entry(srv, pend, slot, CXL_BROKER_ERR_NO_SPACE,
                                  NULL);
            }
            return;
        }
        crt->warm = fill_only;
        brk_cache_start_fill(srv, vs, c, off);
        break;
    }
    if (!fill_only) {
        brk_policy_ahead(srv, vs, c);
        srv->misses++;
        if (es != NULL) {
            es->misses++;
        }
    }
    if (pend == NULL) {
        return;
    }
    w = malloc(sizeof(*w));
    if (w == NULL) {
        brk_pending_entry(srv, pend, slot, CXL_BROKER_ERR_NO_MEMORY, NULL);
        return;
    }
    w->pend      = pend;
    w->slot      = slot;
    w->next      = crt->waiters;
    crt->waiters = w;
}

/* Reads the client served from a chunk it had pinned: hits. */
void brk_cache_touch(brk_srv_t *srv, brk_vs_t *vs, uint32_t c,
                     uint32_t reads)
{
    cxl_broker_epoch_stat_t *es = brk_vs_epoch_stat(vs);

    vs->crt[c].last_use = ++srv->clock;
    brk_plan_touch(vs, c);
    srv->hits += reads;
    if (es != NULL) {
        es->hits += reads;
    }
    if (vs->rec.policy == BRK_POLICY_PLAN) {
        brk_plan_prefetch(srv, vs);
    }
}

/* Plan prefetch and pin-policy bookkeeping start fills with no waiter. */
void brk_cache_prefetch(brk_srv_t *srv, brk_vs_t *vs, uint32_t c, uint64_t off)
{
    brk_cache_start_fill(srv, vs, c, off);
}

void brk_cache_fill_done(brk_srv_t *srv, brk_fill_job_t *job)
{
    brk_vs_t *vs     = job->vs;
    brk_cstate_t *pcs = &vs->states[job->chunk];
    brk_crt_t *crt    = &vs->crt[job->chunk];
    const brk_crt_t *cs = crt;
    cxl_broker_epoch_stat_t *es = brk_vs_epoch_stat(vs);
    uint64_t pin_budget;
    brk_waiter_t *w;
    int status = job->status;

    vs->inflight--;
    srv->file_bytes_read += job->bytes_read;
    srv->direct_bytes    += job->direct_bytes;
    srv->fill_seconds    += job->seconds;
    if (status == CXL_BROKER_OK) {
        pcs->crc = job->crc;
        brk_chunk_publish(srv, vs, job->chunk,
                          BRK_CSTATE_WORD(BRK_CSTATE_GEN(cs->word) + 1,
                                          BRK_CHUNK_RESIDENT));
        vs->resident_chunks++;
        vs->resident_bytes += cs->len;
        srv->fills++;
        srv->fill_bytes += cs->len;
        if (es != NULL) {
            es->fills++;
            es->fill_bytes += cs->len;
        }
        crt->fill_seq = ++srv->fill_seq;
        if (vs->rec.policy == BRK_POLICY_PIN) {
            pin_budget = brk_pin_budget(srv, vs);
            if (vs->pinned_bytes + cs->len <= pin_budget) {
                crt->pinned       = 1;
                vs->pinned_bytes += cs->len;
            }
        }
    } else {
        srv->fill_errors++;
        vs->ra_left = 0;        /* read no further ahead into errors */
        brk_log(srv, "fill of %s v%u chunk %u failed: %s", vs->rec.name,
                vs->rec.version, job->chunk, job->err);
        brk_heap_free(&srv->heap, cs->off, cs->len);
        brk_chunk_publish(srv, vs, job->chunk,
                          BRK_CSTATE_WORD(BRK_CSTATE_GEN(cs->word) + 1,
                                          BRK_CHUNK_ABSENT));
    }
    while ((w = crt->waiters) != NULL) {
        crt->waiters = w->next;
        if ((status != CXL_BROKER_OK) && (w->pend->err[0] == '\0')) {
            snprintf(w->pend->err, sizeof(w->pend->err), "%s", job->err);
        }
        brk_pending_entry(srv, w->pend, w->slot, status,
                          (status == CXL_BROKER_OK) ? cs : NULL);
        free(w);
    }
    brk_policy_ahead(srv, vs, UINT32_MAX);
    brk_vs_reap(srv);
}

void brk_pending_done(brk_srv_t *srv, brk_pending_t *pend)
{
    brk_pending_t **pp;
    size_t elen = strlen(pend->err) + 1;
    size_t len  = sizeof(brk_pin_rep_t) + pend->n * sizeof(brk_pin_ent_t) + elen;
    brk_pin_rep_t *rep;
    int status = CXL_BROKER_OK;
    uint32_t i;

    for (pp = &srv->pendings; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == pend) {
            *pp = pend->next;
            break;
        }
    }
    for (i = 0; i < pend->n; ++i) {
        if ((status == CXL_BROKER_OK) && (pend->ent[i].status != CXL_BROKER_OK)) {
            status = pend->ent[i].status;
        }
    }
    brk_req_unpin_failed(srv, pend);
    if (pend->conn != NULL) {
        rep = malloc(len);
        if (rep == NULL) {
            brk_reply_error(srv, pend->conn, pend->req_id, BRK_REQ_PIN,
                            CXL_BROKER_ERR_NO_MEMORY, "out of memory");
        } else {
            rep->n   = pend->n;
            rep->pad = 0;
            memcpy(rep + 1, pend->ent, pend->n * sizeof(brk_pin_ent_t));
            memcpy((uint8_t*)(rep + 1) + pend->n * sizeof(brk_pin_ent_t),
                   pend->err, elen);
            brk_reply(srv, pend->conn, pend->req_id, BRK_REQ_PIN, status,
                      rep, len);
            free(rep);
        }
    }
    free(pend);
}
