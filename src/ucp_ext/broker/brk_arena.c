/*
 * The arena: one persistent pool extent that holds the broker's index and
 * cached chunks (brk_layout.h).  Created by the first `serve`, found again
 * by every later one, which rebuilds its heap from the records and puts
 * every chunk a dead broker left LOADING back to ABSENT: a fill is
 * published only after its bytes and CRC, so nothing half-filled survives.
 */
#include "brk_srv.h"

#include <ucx_cxl/coherence.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint32_t brk_hdr_crc(const brk_hdr_t *hdr)
{
    brk_hdr_t tmp = *hdr;

    tmp.crc = 0;
    return cxlpool_crc32c(0, &tmp, sizeof(tmp));
}

static uint32_t brk_vrec_crc(const brk_vrec_t *vrec)
{
    brk_vrec_t tmp = *vrec;

    tmp.crc = 0;
    return cxlpool_crc32c(0, &tmp, sizeof(tmp));
}

void brk_vrec_seal(brk_srv_t *srv, brk_vrec_t *vrec)
{
    vrec->crc = brk_vrec_crc(vrec);
    cxl_coh_writeback(srv->coh, vrec, sizeof(*vrec));
    cxl_coh_fence(srv->coh);
}

void brk_hdr_seal(brk_srv_t *srv)
{
    srv->hdr->crc = brk_hdr_crc(srv->hdr);
    cxl_coh_writeback(srv->coh, srv->hdr, sizeof(*srv->hdr));
    cxl_coh_fence(srv->coh);
}

void brk_cstate_set(brk_srv_t *srv, brk_cstate_t *cs, uint64_t word)
{
    /* off, len, crc were stored before: the word publishes them */
    cxl_coh_writeback(srv->coh, cs, sizeof(*cs));
    cxl_coh_fence(srv->coh);
    __atomic_store_n(&cs->word, word, __ATOMIC_RELEASE);
    cxl_coh_writeback(srv->coh, &cs->word, sizeof(cs->word));
    cxl_coh_fence(srv->coh);
}

void brk_arena_format(brk_srv_t *srv, uint8_t *base, uint64_t size)
{
    srv->hdr = (brk_hdr_t*)base;
    memset(srv->hdr, 0, BRK_HDR_REGION);
    srv->hdr->magic          = BRK_MAGIC;
    srv->hdr->layout_version = BRK_LAYOUT_VERSION;
    srv->hdr->hdr_size       = sizeof(brk_hdr_t);
    srv->hdr->arena_size     = size;
    srv->hdr->heap_off       = BRK_HDR_REGION;
    srv->hdr->chunk_size     = srv->params.chunk_size ? srv->params.chunk_size
                                                      : BRK_DEFAULT_CHUNK_SIZE;
    srv->hdr->create_ns      = brk_now_ns();
    srv->hdr->next_dsid      = 1;
    cxl_coh_writeback(srv->coh, srv->hdr, BRK_HDR_REGION);
    brk_hdr_seal(srv);
}

void brk_chunk_publish(brk_srv_t *srv, brk_vs_t *vs, uint32_t c, uint64_t word)
{
    vs->crt[c].word = word;
    brk_cstate_set(srv, &vs->states[c], word);
}

static int brk_arena_create(brk_srv_t *srv, cxlpool_extent_t *ext, char *err,
                            size_t errlen)
{
    uint64_t capacity = srv->params.capacity;
    cxlpool_stats_t st;
    cxlpool_status_t s;

    if (capacity == 0) {
        if (cxlpool_stats(srv->pool, &st) != CXLPOOL_OK) {
            snprintf(err, errlen, "%s", cxlpool_last_error());
            return CXL_BROKER_ERR_IO;
        }
        capacity = (st.largest_free / 2) & ~((2ull << 20) - 1);
    }
    if (capacity < (4ull << 20)) {
        snprintf(err, errlen, "capacity %" PRIu64 " bytes is below the "
                 "minimum of 4 MiB (pool too small or full: see cxlpool info)",
                 capacity);
        return CXL_BROKER_ERR_NO_SPACE;
    }
    s = cxlpool_alloc(srv->pool, BRK_HDR_REGION + capacity, 2ull << 20,
                      BRK_ARENA_NAME, CXLPOOL_ALLOC_PERSIST, ext);
    if (s != CXLPOOL_OK) {
        snprintf(err, errlen, "cannot allocate a %" PRIu64 " MiB cache in "
                 "the pool: %s", capacity >> 20, cxlpool_last_error());
        return CXL_BROKER_ERR_NO_SPACE;
    }
    brk_arena_format(srv, (uint8_t*)cxlpool_base(srv->pool) + ext->offset,
                     ext->length);
    return CXL_BROKER_OK;
}

int brk_arena_check_hdr(const brk_hdr_t *hdr, uint64_t size, char *err,
                        size_t errlen)
{
    if ((size < BRK_HDR_REGION) || (hdr->magic != BRK_MAGIC) ||
        (hdr->crc != brk_hdr_crc(hdr))) {
        snprintf(err, errlen, "the pool's extent '%s' is not a broker arena "
                 "or its header is damaged (cxl-broker destroy removes it)",
                 BRK_ARENA_NAME);
        return CXL_BROKER_ERR_CORRUPT;
    }
    if ((hdr->layout_version != BRK_LAYOUT_VERSION) ||
        (hdr->hdr_size != sizeof(*hdr))) {
        snprintf(err, errlen, "broker arena layout %u (header of %u bytes), "
                 "this broker reads %u", hdr->layout_version, hdr->hdr_size,
                 BRK_LAYOUT_VERSION);
        return CXL_BROKER_ERR_UNSUPPORTED;
    }
    if ((hdr->arena_size != size) || (hdr->heap_off != BRK_HDR_REGION)) {
        snprintf(err, errlen, "broker arena header says %" PRIu64 " bytes, "
                 "the extent has %" PRIu64, hdr->arena_size, size);
        return CXL_BROKER_ERR_CORRUPT;
    }
    /* printed by "another broker serves this pool at ADDR" */
    if (memchr(hdr->addr, '\0', sizeof(hdr->addr)) == NULL) {
        snprintf(err, errlen, "broker arena header: the address is not "
                 "terminated (cxl-broker destroy removes the arena)");
        return CXL_BROKER_ERR_CORRUPT;
    }
    return CXL_BROKER_OK;
}

/* Chunk bytes of a recovered version: keep RESIDENT ones, drop the rest. */
static void brk_arena_recover_chunks(brk_srv_t *srv, brk_vs_t *vs)
{
    uint64_t c, w, off, len, bad = 0, kept = 0;
    brk_cstate_t *cs;
    uint32_t crc;
    int reserved;

    for (c = 0; c < vs->rec.nchunks; ++c) {
        /* read once: what is kept is this broker's copy from now on */
        cs  = &vs->states[c];
        w   = cs->word;
        off = cs->off;
        len = cs->len;
        crc = cs->crc;
        if (BRK_CSTATE_STATE(w) == BRK_CHUNK_ABSENT) {
            vs->crt[c].word = w;
            continue;
        }
        reserved = (BRK_CSTATE_STATE(w) == BRK_CHUNK_RESIDENT) &&
                   (len == vs->chunks[c].len) &&
                   !brk_heap_reserve(&srv->heap, off, len);
        if (reserved && (!srv->params.verify ||
                         (cxlpool_crc32c(0, srv->arena + off, len) == crc))) {
            vs->crt[c].word = w;
            vs->crt[c].off  = off;
            vs->crt[c].len  = len;
            vs->resident_chunks++;
            vs->resident_bytes += len;
            kept++;
            continue;
        }
        if (reserved) {
            /* only a range reserved here goes back: one that failed its
             * reservation may be another record's, or outside the heap */
            brk_heap_free(&srv->heap, off, len);
        }
        if (BRK_CSTATE_STATE(w) == BRK_CHUNK_RESIDENT) {
            bad++;
        }
        brk_chunk_publish(srv, vs, (uint32_t)c,
                          BRK_CSTATE_WORD(BRK_CSTATE_GEN(w) + 1,
                                          BRK_CHUNK_ABSENT));
    }
    if (bad) {
        brk_log(srv, "%s v%u: %" PRIu64 " resident chunks failed their check "
                "and will be read again", vs->rec.name, vs->rec.version, bad);
    }
    if (kept) {
        brk_log(srv, "%s v%u: %" PRIu64 " of %" PRIu64 " chunks resident "
                "from before the restart", vs->rec.name, vs->rec.version,
                kept, (uint64_t)vs->rec.nchunks);
    }
}

int brk_arena_recover(brk_srv_t *srv, uint8_t *base, uint64_t size,
                      char *err, size_t errlen)
{
    brk_vrec_t *vrec;
    brk_vs_t *vs;
    uint32_t i;

    srv->arena      = base;
    srv->arena_size = size;
    srv->hdr        = (brk_hdr_t*)base;
    srv->vrecs      = (brk_vrec_t*)(srv->arena + sizeof(brk_hdr_t));
    if (brk_heap_init(&srv->heap, srv->hdr->heap_off, srv->arena_size)) {
        snprintf(err, errlen, "out of memory");
        return CXL_BROKER_ERR_NO_MEMORY;
    }
    cxl_coh_invalidate(srv->coh, srv->vrecs,
                       BRK_MAX_VERSIONS * sizeof(brk_vrec_t));
    for (i = 0; i < BRK_MAX_VERSIONS; ++i) {
        vrec = &srv->vrecs[i];
        if (vrec->state == BRK_VREC_FREE) {
            continue;
        }
        if ((vrec->crc != brk_vrec_crc(vrec)) ||
            (memchr(vrec->name, '\0', sizeof(vrec->name)) == NULL)) {
            brk_log(srv, "version record %u fails its checksum: left alone", i);
            continue;
        }
        if (vrec->state != BRK_VREC_ACTIVE) {
            /* BUILDING: a publish that did not finish; RETIRING: readers
             * of the old broker are gone with it (another value: damaged) */
            brk_log(srv, "%s v%u: %s, freed", vrec->name, vrec->version,
                    (vrec->state == BRK_VREC_BUILDING) ? "not finished" :
                    (vrec->state == BRK_VREC_RETIRING) ? "retired" :
                    "in an unknown state");
            memset(vrec, 0, sizeof(*vrec));
            cxl_coh_writeback(srv->coh, vrec, sizeof(*vrec));
            continue;
        }
        err[0] = '\0';
        vs = brk_vs_attach(srv, i, err, errlen);
        if (vs == NULL) {
            brk_log(srv, "%s v%u: %s: left alone", vrec->name, vrec->version,
                    err);
            continue;
        }
        brk_arena_recover_chunks(srv, vs);
    }
    err[0] = '\0';
    return CXL_BROKER_OK;
}

int brk_arena_open(brk_srv_t *srv, char *err, size_t errlen)
{
    cxlpool_extent_t ext;
    int rc;

    if (cxlpool_lookup(srv->pool, BRK_ARENA_NAME, &ext) == CXLPOOL_OK) {
        srv->hdr = (brk_hdr_t*)((uint8_t*)cxlpool_base(srv->pool) + ext.offset);
        cxl_coh_invalidate(srv->coh, srv->hdr, BRK_HDR_REGION);
        rc = brk_arena_check_hdr(srv->hdr, ext.length, err, errlen);
        if (rc != CXL_BROKER_OK) {
            return rc;
        }
        if (srv->params.capacity &&
            (srv->params.capacity != ext.length - BRK_HDR_REGION)) {
            brk_log(srv, "the arena exists with a capacity of %" PRIu64
                    " MiB: --capacity ignored (cxl-broker destroy to change it)",
                    (ext.length - BRK_HDR_REGION) >> 20);
        }
    } else {
        rc = brk_arena_create(srv, &ext, err, errlen);
        if (rc != CXL_BROKER_OK) {
            return rc;
        }
    }
    if ((srv->hdr->broker_token != 0) &&
        (srv->hdr->broker_token != cxlpool_token(srv->pool)) &&
        cxlpool_owner_alive(srv->pool, srv->hdr->broker_token)) {
        snprintf(err, errlen, "another broker (pid %d) serves this pool at %s",
                 srv->hdr->broker_pid, srv->hdr->addr);
        return CXL_BROKER_ERR_BUSY;
    }
    srv->arena_pool_off = ext.offset;
    rc = brk_arena_recover(srv, (uint8_t*)srv->hdr, ext.length, err, errlen);
    if (rc != CXL_BROKER_OK) {
        return rc;
    }
    srv->hdr->boot++;
    srv->hdr->start_ns     = brk_now_ns();
    srv->hdr->broker_token = cxlpool_token(srv->pool);
    srv->hdr->broker_pid   = (int32_t)getpid();
    brk_hdr_seal(srv);
    return CXL_BROKER_OK;
}

void brk_arena_close(brk_srv_t *srv)
{
    brk_waiter_t *w;
    uint64_t c;

    while (srv->versions != NULL) {
        brk_vs_t *vs  = srv->versions;
        srv->versions = vs->next;
        for (c = 0; c < vs->rec.nchunks; ++c) {
            while ((w = vs->crt[c].waiters) != NULL) {
                vs->crt[c].waiters = w->next;
                free(w);
            }
        }
        brk_plan_free(&vs->plan);
        free((void*)vs->meta);
        free(vs->crt);
        free(vs->epochs);
        free(vs);
    }
    if (srv->hdr != NULL) {
        srv->hdr->broker_token = 0;
        srv->hdr->addr[0]      = '\0';
        brk_hdr_seal(srv);
    }
    brk_heap_fini(&srv->heap);
}

/* Runtime state over a checked record rec (a copy) of slot and its
 * checked metadata copy meta, whose ranges are accounted for; takes meta
 * (freed on failure). */
static brk_vs_t *brk_vs_new(brk_srv_t *srv, uint32_t slot,
                            const brk_vrec_t *rec, void *meta)
{
    brk_meta_view_t view;
    brk_vs_t *vs;

    vs = calloc(1, sizeof(*vs));
    if (vs != NULL) {
        vs->crt = calloc(rec->nchunks ? rec->nchunks : 1, sizeof(*vs->crt));
    }
    if ((vs == NULL) || (vs->crt == NULL)) {
        free(vs);
        free(meta);
        return NULL;
    }
    brk_meta_view(meta, &view);
    vs->slot    = slot;
    vs->vrec    = &srv->vrecs[slot];
    vs->rec     = *rec;
    vs->meta    = view.meta;
    vs->samples = view.samples;
    vs->chunks  = view.chunks;
    vs->segs    = view.segs;
    vs->files   = view.files;
    vs->strings = view.strings;
    vs->states  = (brk_cstate_t*)(srv->arena + rec->states_off);
    vs->next      = srv->versions;
    srv->versions = vs;
    return vs;
}

/* A copy of the blob at [off, off + len) of the arena (8-aligned). */
static void *brk_meta_copy(brk_srv_t *srv, uint64_t off, uint64_t len)
{
    void *copy = malloc(len ? len : 1);

    if (copy != NULL) {
        memcpy(copy, srv->arena + off, len);
    }
    return copy;
}

/* Runtime state over a version record found at start: checks the record
 * and its metadata, and reserves their ranges. */
brk_vs_t *brk_vs_attach(brk_srv_t *srv, uint32_t slot, char *err, size_t errlen)
{
    brk_vrec_t rec = srv->vrecs[slot], *vrec = &rec;   /* read once */
    const brk_meta_t *meta;
    uint64_t states_len;
    void *copy;
    brk_vs_t *vs;

    if ((rec.state != BRK_VREC_ACTIVE) || (rec.crc != brk_vrec_crc(&rec)) ||
        (memchr(rec.name, '\0', sizeof(rec.name)) == NULL)) {
        snprintf(err, errlen, "version record changed while read");
        return NULL;
    }
    /* the records are read in place: 8-aligned (the heap hands out
     * 64-byte multiples, so anything else was not written by a broker) */
    if ((vrec->meta_off % 8) || (vrec->states_off % 8) ||
        (vrec->meta_off < srv->heap.start) ||
        (vrec->meta_off > srv->arena_size) ||
        (vrec->meta_len > srv->arena_size - vrec->meta_off) ||
        (vrec->nchunks > (srv->arena_size / sizeof(brk_cstate_t))) ||
        (vrec->states_off > srv->arena_size) ||
        (vrec->nchunks * sizeof(brk_cstate_t) >
         srv->arena_size - vrec->states_off)) {
        snprintf(err, errlen, "version record out of the arena's bounds");
        return NULL;
    }
    cxl_coh_invalidate(srv->coh, srv->arena + vrec->meta_off, vrec->meta_len);
    copy = brk_meta_copy(srv, vrec->meta_off, vrec->meta_len);
    if (copy == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    meta = copy;
    if (brk_meta_check(meta, vrec->meta_len, err, errlen) ||
        (meta->nchunks != vrec->nchunks) || (meta->nsamples != vrec->nsamples)) {
        if (!err[0]) {
            snprintf(err, errlen, "metadata does not match its record");
        }
        free(copy);
        return NULL;
    }
    states_len = vrec->nchunks * sizeof(brk_cstate_t);
    if (brk_heap_reserve(&srv->heap, vrec->meta_off, vrec->meta_len)) {
        snprintf(err, errlen, "metadata overlaps other records");
        free(copy);
        return NULL;
    }
    if (brk_heap_reserve(&srv->heap, vrec->states_off, states_len)) {
        brk_heap_free(&srv->heap, vrec->meta_off, vrec->meta_len);
        snprintf(err, errlen, "chunk states overlap other records");
        free(copy);
        return NULL;
    }
    vs = brk_vs_new(srv, slot, vrec, copy);
    if (vs == NULL) {
        brk_heap_free(&srv->heap, vrec->meta_off, vrec->meta_len);
        brk_heap_free(&srv->heap, vrec->states_off, states_len);
        snprintf(err, errlen, "out of memory");
    }
    return vs;
}

brk_vs_t *brk_vs_find(brk_srv_t *srv, const char *name, uint32_t version)
{
    brk_vs_t *vs, *best = NULL;

    for (vs = srv->versions; vs != NULL; vs = vs->next) {
        if (strcmp(vs->rec.name, name)) {
            continue;
        }
        if (version ? (vs->rec.version == version)
                    : (vs->rec.state == BRK_VREC_ACTIVE)) {
            best = vs;
        }
    }
    return best;
}

int brk_vs_publish(brk_srv_t *srv, const char *name, const brk_add_req_t *req,
                   brk_desc_t *desc, brk_vs_t **vs_p, char *err, size_t errlen)
{
    brk_vs_t *old = brk_vs_find(srv, name, 0), *vs;
    uint64_t meta_len = brk_desc_meta_size(desc), meta_off, states_off;
    uint64_t states_len = desc->nchunks * sizeof(brk_cstate_t);
    uint64_t capacity = srv->heap.end - srv->heap.start;
    uint32_t slot, version = 0;
    brk_vrec_t *vrec;
    void *copy;

    if (old && (old->rec.fingerprint == desc->fingerprint) &&
        (old->rec.policy == req->policy) &&
        (old->rec.pin_bytes == req->pin_bytes)) {
        *vs_p = old;               /* unchanged: same version */
        return CXL_BROKER_OK;
    }
    if (req->pin_bytes > capacity) {
        snprintf(err, errlen, "--pin-bytes %" PRIu64 " MiB exceeds the "
                 "broker's capacity of %" PRIu64 " MiB", req->pin_bytes >> 20,
                 capacity >> 20);
        return CXL_BROKER_ERR_NO_SPACE;
    }
    for (vs = srv->versions; vs != NULL; vs = vs->next) {
        if (!strcmp(vs->rec.name, name) && (vs->rec.version > version)) {
            version = vs->rec.version;
        }
    }
    for (slot = 0; slot < BRK_MAX_VERSIONS; ++slot) {
        if ((srv->vrecs[slot].state == BRK_VREC_FREE) &&
            (srv->vrecs[slot].crc == 0)) {
            break;
        }
    }
    if (slot == BRK_MAX_VERSIONS) {
        snprintf(err, errlen, "all %u version records are in use (cxl-broker "
                 "rm old datasets)", BRK_MAX_VERSIONS);
        return CXL_BROKER_ERR_NO_SPACE;
    }
    /* the broker's own copy of the blob, what it reads from then on */
    copy = malloc(meta_len);
    if (copy == NULL) {
        snprintf(err, errlen, "out of memory");
        return CXL_BROKER_ERR_NO_MEMORY;
    }
    brk_desc_write_meta(desc, copy);
    if (brk_cache_alloc(srv, NULL, meta_len, 1, &meta_off)) {
        free(copy);
        snprintf(err, errlen, "%s: the index of %" PRIu64 " samples (%" PRIu64
                 " KiB) does not fit in the cache", name, desc->nsamples,
                 meta_len >> 10);
        return CXL_BROKER_ERR_NO_SPACE;
    }
    if (brk_cache_alloc(srv, NULL, states_len, 1, &states_off)) {
        brk_heap_free(&srv->heap, meta_off, meta_len);
        free(copy);
        snprintf(err, errlen, "%s: the state of %" PRIu64 " chunks does not "
                 "fit in the cache", name, desc->nchunks);
        return CXL_BROKER_ERR_NO_SPACE;
    }
    vrec = &srv->vrecs[slot];
    memset(vrec, 0, sizeof(*vrec));
    snprintf(vrec->name, sizeof(vrec->name), "%s", name);
    vrec->state       = BRK_VREC_BUILDING;
    vrec->version     = version + 1;
    vrec->dsid        = srv->hdr->next_dsid++;
    vrec->format      = desc->format;
    vrec->policy      = req->policy;
    vrec->nsamples    = desc->nsamples;
    vrec->nchunks     = desc->nchunks;
    vrec->nfiles      = desc->nfiles;
    vrec->bytes       = desc->bytes;
    vrec->chunk_size  = desc->chunk_size;
    vrec->record_size = desc->record_size;
    vrec->pin_bytes   = req->pin_bytes;
    vrec->meta_off    = meta_off;
    vrec->meta_len    = meta_len;
    vrec->states_off  = states_off;
    vrec->fingerprint = desc->fingerprint;
    vrec->create_ns   = brk_now_ns();
    brk_vrec_seal(srv, vrec);
    brk_hdr_seal(srv);

    memcpy(srv->arena + meta_off, copy, meta_len);
    memset(srv->arena + states_off, 0, states_len);
    cxl_coh_writeback(srv->coh, srv->arena + meta_off, meta_len);
    cxl_coh_writeback(srv->coh, srv->arena + states_off, states_len);
    cxl_coh_fence(srv->coh);
    vrec->state = BRK_VREC_ACTIVE;
    brk_vrec_seal(srv, vrec);

    vs = brk_vs_new(srv, slot, vrec, copy);
    if (vs == NULL) {
        snprintf(err, errlen, "out of memory");
        return CXL_BROKER_ERR_NO_MEMORY;
    }
    if (old != NULL) {
        brk_vs_retire(srv, old);
    }
    *vs_p = vs;
    return CXL_BROKER_OK;
}

void brk_vs_retire(brk_srv_t *srv, brk_vs_t *vs)
{
    vs->rec.state = BRK_VREC_RETIRING;
    *vs->vrec     = vs->rec;       /* the pool's copy may have been changed */
    brk_vrec_seal(srv, vs->vrec);
    vs->rec.crc   = vs->vrec->crc;
    brk_vs_reap(srv);
}

void brk_vs_free(brk_srv_t *srv, brk_vs_t *vs)
{
    brk_vs_t **pp;
    uint64_t c;

    for (c = 0; c < vs->rec.nchunks; ++c) {
        if (BRK_CSTATE_STATE(vs->crt[c].word) == BRK_CHUNK_RESIDENT) {
            brk_heap_free(&srv->heap, vs->crt[c].off, vs->crt[c].len);
        }
    }
    brk_heap_free(&srv->heap, vs->rec.meta_off, vs->rec.meta_len);
    brk_heap_free(&srv->heap, vs->rec.states_off,
                  vs->rec.nchunks * sizeof(brk_cstate_t));
    brk_log(srv, "%s v%u: freed (%" PRIu64 " chunks, %" PRIu64 " MiB)",
            vs->rec.name, vs->rec.version, vs->resident_chunks,
            vs->resident_bytes >> 20);
    memset(vs->vrec, 0, sizeof(*vs->vrec));
    cxl_coh_writeback(srv->coh, vs->vrec, sizeof(*vs->vrec));
    cxl_coh_fence(srv->coh);
    for (pp = &srv->versions; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == vs) {
            *pp = vs->next;
            break;
        }
    }
    brk_plan_free(&vs->plan);
    free((void*)vs->meta);
    free(vs->crt);
    free(vs->epochs);
    free(vs);
}

void brk_vs_reap(brk_srv_t *srv)
{
    brk_vs_t *vs, *next;

    for (vs = srv->versions; vs != NULL; vs = next) {
        next = vs->next;
        if ((vs->rec.state == BRK_VREC_RETIRING) && (vs->nhandles == 0) &&
            (vs->inflight == 0)) {
            brk_vs_free(srv, vs);
        }
    }
}
