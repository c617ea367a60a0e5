/*
 * The read path.  A sample is read in three steps:
 *  1. pin its chunk: a local reader sets the chunk's bit in its own pin
 *     bitmap, fences, and loads the chunk's state word; RESIDENT means
 *     pinned with no message.  Anything else, and every remote reader,
 *     asks the broker (BRK_REQ_PIN), which fills the chunk if needed.
 *     Pins stay cached (CXL_BROKER_PIN_CACHE chunks, least recently used
 *     given back first), so most reads cost no message at all;
 *  2. copy the sample's bytes from the arena into the caller's buffer:
 *     ucp_get, or, for a reader that maps the pool (unless
 *     CXL_BROKER_COPY=get), a memcpy out of its own mapping, as a view
 *     reads it.  UCX 1.13's get costs ~150-250 ns more per call than the
 *     copy itself (request, per-call registration of the buffer, lane
 *     lookup): a third of a 4 KiB read;
 *  3. check that the chunk's word is still the one pinned (seqlock): a
 *     chunk that changed under the get is an error, never wrong bytes.
 */
#include "brk_client_int.h"
#include "brk_scan.h"
#include "brk_wire.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define BRK_BATCH_INFLIGHT 64

static void brk_lru_unlink(cxl_broker_ds_t *ds, uint32_t c)
{
    uint32_t p = ds->lru_prev[c], n = ds->lru_next[c];

    if (p != BRK_NIL) {
        ds->lru_next[p] = n;
    } else {
        ds->lru_head = n;
    }
    if (n != BRK_NIL) {
        ds->lru_prev[n] = p;
    } else {
        ds->lru_tail = p;
    }
    ds->lru_prev[c] = ds->lru_next[c] = BRK_NIL;
}

static void brk_lru_push(cxl_broker_ds_t *ds, uint32_t c)
{
    ds->lru_prev[c] = ds->lru_tail;
    ds->lru_next[c] = BRK_NIL;
    if (ds->lru_tail != BRK_NIL) {
        ds->lru_next[ds->lru_tail] = c;
    } else {
        ds->lru_head = c;
    }
    ds->lru_tail = c;
}

static void brk_bit_set(cxl_broker_ds_t *ds, uint32_t c, int on)
{
    uint64_t *w = &ds->bitmap[c / 64];
    uint64_t v  = __atomic_load_n(w, __ATOMIC_RELAXED);

    /* this process is the only writer of its bitmap: no read-modify-write
     * atomics, a plain store of the new word */
    v = on ? (v | (1ull << (c % 64))) : (v & ~(1ull << (c % 64)));
    __atomic_store_n(w, v, __ATOMIC_RELAXED);
}

static void brk_msg_send(cxl_broker_ds_t *ds, uint32_t type,
                         const void *ents, uint32_t n, size_t ent_size)
{
    brk_pin_req_t *req;
    size_t len = sizeof(*req) + n * ent_size;

    req = malloc(len);
    if (req == NULL) {
        return;     /* only bookkeeping is lost, never a pin */
    }
    req->handle = ds->rep.handle;
    req->n      = n;
    req->flags  = 0;
    memcpy(req + 1, ents, n * ent_size);
    (void)brk_call_post(ds->b, type, req, len, 0);
    free(req);
}

static void brk_ids_send(cxl_broker_ds_t *ds, uint32_t type,
                         const uint32_t *ids, uint32_t n)
{
    brk_msg_send(ds, type, ids, n, sizeof(*ids));
}

void brk_touch_flush(cxl_broker_ds_t *ds)
{
    uint32_t i;

    if (ds->ntouch == 0) {
        return;
    }
    brk_msg_send(ds, BRK_REQ_TOUCH, ds->touch_buf, ds->ntouch,
                 sizeof(*ds->touch_buf));
    for (i = 0; i < ds->ntouch; ++i) {
        ds->touch_slot[ds->touch_buf[i].chunk] = 0;
    }
    ds->ntouch      = 0;
    ds->touch_reads = 0;
}

static void brk_touch(cxl_broker_ds_t *ds, uint32_t c)
{
    uint32_t slot = ds->touch_slot[c];

    if (slot == 0) {
        slot = ++ds->ntouch;
        ds->touch_slot[c]          = slot;
        ds->touch_buf[slot - 1].chunk = c;
        ds->touch_buf[slot - 1].reads = 0;
    }
    ds->touch_buf[slot - 1].reads++;
    if ((ds->ntouch == BRK_TOUCH) || (++ds->touch_reads == BRK_TOUCH_READS)) {
        brk_touch_flush(ds);
    }
}

static void brk_unpin_flush(cxl_broker_ds_t *ds)
{
    if (ds->nunpin) {
        brk_ids_send(ds, BRK_REQ_UNPIN, ds->unpin_buf, ds->nunpin);
        ds->nunpin = 0;
    }
}

static void brk_unpin(cxl_broker_ds_t *ds, uint32_t c)
{
    if (ds->pin_word[c] == 0) {
        return;
    }
    brk_lru_unlink(ds, c);
    ds->pin_word[c] = 0;
    ds->npinned--;
    if (ds->bitmap != NULL) {
        brk_bit_set(ds, c, 0);
        return;
    }
    ds->unpin_buf[ds->nunpin++] = c;
    if (ds->nunpin == ds->b->pin_cache) {
        brk_unpin_flush(ds);
    }
}

/* Give back pins beyond the cache size, oldest first, none in use. */
static void brk_pins_trim(cxl_broker_ds_t *ds, uint32_t keep)
{
    uint32_t c = ds->lru_head, next;

    while ((ds->npinned > keep) && (c != BRK_NIL)) {
        next = ds->lru_next[c];
        if (ds->views[c] == 0) {
            brk_unpin(ds, c);
        }
        c = next;
    }
    brk_unpin_flush(ds);
}

static void brk_pinned(cxl_broker_ds_t *ds, uint32_t c, uint64_t word,
                       uint64_t off)
{
    if (ds->pin_word[c] == 0) {
        ds->npinned++;
        brk_lru_push(ds, c);
    }
    ds->pin_word[c] = word;
    ds->pin_off[c]  = off;
}

/*
 * Pin chunks[0..n) (distinct).  Local: bits first, one fence, then the
 * words; what is not resident, and everything for a remote reader, goes
 * to the broker in one request.
 */
static cxl_broker_status_t brk_pin_chunks(cxl_broker_ds_t *ds,
                                          const uint32_t *chunks, uint32_t n,
                                          uint8_t *asked)
{
    brk_pin_req_t *req;
    const brk_pin_ent_t *ent;
    uint32_t *ask, nask = 0, i, c;
    cxl_broker_status_t st, st2;
    char err[BRK_ERRMSG_MAX];
    void *data = NULL;
    size_t len = 0;
    uint64_t w, off;

    req = malloc(sizeof(*req) + n * sizeof(uint32_t));
    if (req == NULL) {
        return brk_cerr(CXL_BROKER_ERR_NO_MEMORY, "out of memory");
    }
    ask = (uint32_t*)(req + 1);
    for (i = 0; (asked != NULL) && (i < n); ++i) {
        asked[i] = (ds->bitmap == NULL);
    }
    if (ds->bitmap != NULL) {
        for (i = 0; i < n; ++i) {
            brk_bit_set(ds, chunks[i], 1);
        }
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        for (i = 0; i < n; ++i) {
            c = chunks[i];
            w   = __atomic_load_n(&ds->states[c].word, __ATOMIC_ACQUIRE);
            off = ds->states[c].off;
            /* the states are pool memory: a RESIDENT chunk is taken only
             * where it fits in the arena, else the broker is asked */
            if ((BRK_CSTATE_STATE(w) == BRK_CHUNK_RESIDENT) &&
                (off <= ds->b->arena_size) &&
                (ds->chunks[c].len <= ds->b->arena_size - off)) {
                brk_pinned(ds, c, w, off);
            } else {
                ask[nask++] = c;
                if (asked != NULL) {
                    asked[i] = 1;
                }
            }
        }
    } else {
        memcpy(ask, chunks, n * sizeof(uint32_t));
        nask = n;
    }
    if (nask == 0) {
        free(req);
        return CXL_BROKER_OK;
    }
    req->handle = ds->rep.handle;
    req->n      = nask;
    req->flags  = 0;
    brk_touch_flush(ds);
    st = brk_call(ds->b, BRK_REQ_PIN, req, sizeof(*req) + nask * sizeof(uint32_t),
                  &data, &len);
    st2 = brk_pin_rep_decode(data, len, ask, nask, ds->chunks,
                             ds->b->arena_size, &ent, err, sizeof(err));
    free(req);
    if (st2 != CXL_BROKER_OK) {
        free(data);
        return (st != CXL_BROKER_OK) ? st :
               brk_cerr(st2, "%s: %s", ds->name, err);
    }
    for (i = 0; i < nask; ++i) {
        if (ent[i].status == CXL_BROKER_OK) {
            brk_pinned(ds, ent[i].chunk, ent[i].word, ent[i].off);
        } else if (ds->bitmap != NULL) {
            brk_bit_set(ds, ent[i].chunk, 0);
        }
    }
    free(data);
    return st;
}

/* Whether chunk c still holds what was pinned. */
static cxl_broker_status_t brk_check_word(cxl_broker_ds_t *ds, uint32_t c)
{
    uint64_t w;
    cxl_broker_status_t st;

    if (ds->bitmap != NULL) {
        w = __atomic_load_n(&ds->states[c].word, __ATOMIC_ACQUIRE);
    } else {
        st = brk_get(ds->b, &w, sizeof(w), ds->rep.states_off +
                     (uint64_t)c * sizeof(brk_cstate_t));
        if (st != CXL_BROKER_OK) {
            return st;
        }
    }
    if (w != ds->pin_word[c]) {
        return brk_cerr(CXL_BROKER_ERR_STALE, "%s: chunk %u changed during "
                        "the read (word %#" PRIx64 " -> %#" PRIx64 ")",
                        ds->name, c, ds->pin_word[c], w);
    }
    return CXL_BROKER_OK;
}

/*
 * Sample i as this process may use it.  In a local reader the record is
 * pool memory that any process of the pool can rewrite at any time, after
 * the check at open: so it is loaded once, and its chunk, file and extent
 * are checked against what this process knows privately before anything
 * indexes or copies by it (doc/design/trust-model.md).  A record that
 * fails is the pool's corruption, reported, never followed.
 */
static cxl_broker_status_t brk_ds_sample(const cxl_broker_ds_t *ds, uint64_t i,
                                         brk_sample_t *s)
{
    const brk_sample_t *p = &ds->samples[i];

    s->chunk = __atomic_load_n(&p->chunk, __ATOMIC_RELAXED);
    s->file  = __atomic_load_n(&p->file, __ATOMIC_RELAXED);
    s->off   = __atomic_load_n(&p->off, __ATOMIC_RELAXED);
    s->len   = __atomic_load_n(&p->len, __ATOMIC_RELAXED);
    if ((s->chunk >= ds->rep.nchunks) || (s->file >= ds->mh.nfiles) ||
        (s->off > ds->b->arena_size) || (s->len > ds->b->arena_size - s->off)) {
        return brk_cerr(CXL_BROKER_ERR_CORRUPT, "%s: sample %" PRIu64 ": its "
                        "record in the pool is corrupt (chunk %u of %" PRIu64
                        ", file %u of %" PRIu64 ", bytes %" PRIu64 " at %"
                        PRIu64 ")", ds->name, i, s->chunk, ds->rep.nchunks,
                        s->file, ds->mh.nfiles, s->len, s->off);
    }
    return CXL_BROKER_OK;
}

/* The bytes of sample s in pinned chunk s->chunk lie inside the arena. */
static cxl_broker_status_t brk_ds_extent(const cxl_broker_ds_t *ds,
                                         uint64_t i, const brk_sample_t *s)
{
    uint64_t base = ds->pin_off[s->chunk];

    if ((base > ds->b->arena_size) ||
        (s->off + s->len > ds->b->arena_size - base)) {
        return brk_cerr(CXL_BROKER_ERR_CORRUPT, "%s: sample %" PRIu64 ": %"
                        PRIu64 " bytes at %" PRIu64 " of chunk %u (at %" PRIu64
                        ") lie outside the arena", ds->name, i, s->len, s->off,
                        s->chunk, base);
    }
    return CXL_BROKER_OK;
}

cxl_broker_status_t cxl_broker_open(cxl_broker_t *b, const char *name,
                                    uint32_t version, cxl_broker_ds_t **ds_p)
{
    brk_open_req_t req;
    cxl_broker_ds_t *ds;
    cxl_broker_status_t st;
    char err[256] = "";
    void *data = NULL;
    size_t len = 0;
    uint64_t nch, i;

    if ((name == NULL) || (strlen(name) >= BRK_NAME_MAX)) {
        return brk_cerr(CXL_BROKER_ERR_INVAL, "dataset name too long");
    }
    memset(&req, 0, sizeof(req));
    snprintf(req.name, sizeof(req.name), "%s", name);
    req.version = version;
    req.local   = b->arena != NULL;
    req.token   = (b->pool != NULL) ? cxlpool_token(b->pool) : 0;
    st = brk_call(b, BRK_REQ_OPEN, &req, sizeof(req), &data, &len);
    if (st != CXL_BROKER_OK) {
        return st;
    }
    ds = calloc(1, sizeof(*ds));
    if (ds == NULL) {
        free(data);
        return brk_cerr(CXL_BROKER_ERR_NO_MEMORY, "out of memory");
    }
    ds->b = b;
    snprintf(ds->name, sizeof(ds->name), "%s", name);
    st = brk_open_rep_decode(data, len, b->arena_size, b->arena != NULL,
                             &ds->rep, err, sizeof(err));
    free(data);
    if (st != CXL_BROKER_OK) {
        st = brk_cerr(st, "%s: %s", name, err);
        goto fail;
    }
    if (b->arena != NULL) {
        ds->states = (const brk_cstate_t*)(b->arena + ds->rep.states_off);
        if (ds->rep.bitmap_len) {
            ds->bitmap = (uint64_t*)(b->arena + ds->rep.bitmap_off);
        }
    }
    if (b->arena != NULL) {
        /* in place: one copy of the index for every reader process (their
         * memory stays flat in the number of workers); pool memory any
         * process of the pod may write, so only its header is kept as
         * checked, and each record is checked again at its use */
        ds->meta = (const brk_meta_t*)(b->arena + ds->rep.meta_off);
    } else {
        ds->meta_copy = malloc(ds->rep.meta_len ? ds->rep.meta_len : 1);
        if (ds->meta_copy == NULL) {
            st = brk_cerr(CXL_BROKER_ERR_NO_MEMORY, "out of memory");
            goto fail;
        }
        st = brk_get(b, ds->meta_copy, ds->rep.meta_len, ds->rep.meta_off);
        if (st != CXL_BROKER_OK) {
            goto fail;
        }
        ds->meta = ds->meta_copy;
    }
    if (brk_meta_check_hdr(ds->meta, ds->rep.meta_len, &ds->mh, err,
                           sizeof(err)) ||
        (ds->mh.nsamples != ds->rep.nsamples) ||
        (ds->mh.nchunks != ds->rep.nchunks)) {
        st = brk_cerr(CXL_BROKER_ERR_CORRUPT, "%s: %s", name,
                      err[0] ? err : "metadata: does not match the open answer");
        goto fail;
    }
    ds->samples = (const brk_sample_t*)((const uint8_t*)ds->meta +
                                        ds->mh.samples_off);
    ds->chunks  = (const brk_chunk_t*)((const uint8_t*)ds->meta +
                                       ds->mh.chunks_off);
    ds->files   = (const brk_file_t*)((const uint8_t*)ds->meta +
                                      ds->mh.files_off);
    ds->strings = (const char*)ds->meta + ds->mh.strings_off;
    nch = ds->rep.nchunks ? ds->rep.nchunks : 1;
    ds->pin_word  = calloc(nch, sizeof(*ds->pin_word));
    ds->pin_off   = calloc(nch, sizeof(*ds->pin_off));
    ds->views     = calloc(nch, sizeof(*ds->views));
    ds->lru_prev  = malloc(nch * sizeof(*ds->lru_prev));
    ds->lru_next  = malloc(nch * sizeof(*ds->lru_next));
    ds->unpin_buf = malloc((b->pin_cache + 1) * sizeof(*ds->unpin_buf));
    ds->touch_buf  = malloc(BRK_TOUCH * sizeof(*ds->touch_buf));
    ds->touch_slot = calloc(nch, sizeof(*ds->touch_slot));
    if (!ds->pin_word || !ds->pin_off || !ds->views || !ds->lru_prev ||
        !ds->lru_next || !ds->unpin_buf || !ds->touch_buf ||
        !ds->touch_slot) {
        st = brk_cerr(CXL_BROKER_ERR_NO_MEMORY, "out of memory");
        goto fail;
    }
    for (i = 0; i < nch; ++i) {
        ds->lru_prev[i] = ds->lru_next[i] = BRK_NIL;
    }
    ds->lru_head = ds->lru_tail = BRK_NIL;
    *ds_p = ds;
    return CXL_BROKER_OK;
fail:
    cxl_broker_close(ds);
    return st;
}

void cxl_broker_close(cxl_broker_ds_t *ds)
{
    brk_handle_req_t req;

    if (ds == NULL) {
        return;
    }
    if (ds->rep.handle && !ds->b->dead) {
        if ((ds->touch_buf != NULL) && (ds->touch_slot != NULL)) {
            brk_touch_flush(ds);
        }
        req.handle = ds->rep.handle;
        (void)brk_call(ds->b, BRK_REQ_CLOSE, &req, sizeof(req), NULL, NULL);
    }
    free(ds->meta_copy);
    free(ds->pin_word);
    free(ds->pin_off);
    free(ds->views);
    free(ds->lru_prev);
    free(ds->lru_next);
    free(ds->unpin_buf);
    free(ds->touch_buf);
    free(ds->touch_slot);
    free(ds);
}

void cxl_broker_ds_info(const cxl_broker_ds_t *ds, cxl_broker_dsinfo_t *info)
{
    memset(info, 0, sizeof(*info));
    snprintf(info->name, sizeof(info->name), "%s", ds->name);
    info->version  = ds->rep.version;
    info->format   = ds->rep.format;
    info->active   = 1;
    info->nsamples = ds->rep.nsamples;
    info->nchunks  = ds->rep.nchunks;
    info->nfiles   = ds->mh.nfiles;
}

uint64_t cxl_broker_nsamples(const cxl_broker_ds_t *ds)
{
    return ds->rep.nsamples;
}

uint64_t cxl_broker_sample_len(const cxl_broker_ds_t *ds, uint64_t i)
{
    return (i < ds->rep.nsamples) ? ds->samples[i].len : 0;
}

uint64_t cxl_broker_nchunks(const cxl_broker_ds_t *ds)
{
    return ds->rep.nchunks;
}

int cxl_broker_chunk_samples(const cxl_broker_ds_t *ds, uint64_t c,
                             uint64_t *first, uint64_t *count)
{
    if (c >= ds->rep.nchunks) {
        return -1;
    }
    *first = ds->chunks[c].first_sample;
    *count = ds->chunks[c].nsamples;
    return 0;
}

cxl_broker_status_t cxl_broker_sample_lens(const cxl_broker_ds_t *ds,
                                           uint64_t *lens)
{
    uint64_t i;

    for (i = 0; i < ds->rep.nsamples; ++i) {
        lens[i] = ds->samples[i].len;
    }
    return CXL_BROKER_OK;
}

/* The path (info = 0) or the format's info of sample i's file, checked
 * against the string table like every record read from the pool. */
static const char *brk_ds_string(const cxl_broker_ds_t *ds, uint64_t i,
                                 int info, size_t *len)
{
    const brk_file_t *f;
    brk_sample_t s;
    uint32_t off, n;

    if ((i >= ds->rep.nsamples) || (brk_ds_sample(ds, i, &s) != CXL_BROKER_OK)) {
        return NULL;
    }
    f   = &ds->files[s.file];
    off = __atomic_load_n(info ? &f->info_off : &f->path_off, __ATOMIC_RELAXED);
    n   = __atomic_load_n(info ? &f->info_len : &f->path_len, __ATOMIC_RELAXED);
    if ((off > ds->mh.strings_len) || (n > ds->mh.strings_len - off)) {
        brk_cerr(CXL_BROKER_ERR_CORRUPT, "%s: file %u: its record in the pool "
                 "is corrupt (%u bytes at %u of %" PRIu64 ")", ds->name,
                 s.file, n, off, ds->mh.strings_len);
        return NULL;
    }
    *len = n;
    return ds->strings + off;
}

const char *cxl_broker_sample_info(const cxl_broker_ds_t *ds, uint64_t i,
                                   size_t *len)
{
    return brk_ds_string(ds, i, 1, len);
}

const char *cxl_broker_common_info(const cxl_broker_ds_t *ds, size_t *len)
{
    const char *first = NULL, *p;
    uint32_t f, off, n;

    for (f = 0; f < ds->mh.nfiles; ++f) {
        off = __atomic_load_n(&ds->files[f].info_off, __ATOMIC_RELAXED);
        n   = __atomic_load_n(&ds->files[f].info_len, __ATOMIC_RELAXED);
        if ((off > ds->mh.strings_len) || (n > ds->mh.strings_len - off)) {
            brk_cerr(CXL_BROKER_ERR_CORRUPT, "%s: file %u: its record in the "
                     "pool is corrupt (%u bytes at %u of %" PRIu64 ")",
                     ds->name, f, n, off, ds->mh.strings_len);
            return NULL;
        }
        p = ds->strings + off;
        if (first == NULL) {
            first = p;
            *len  = n;
        } else if ((n != *len) || memcmp(p, first, n)) {
            return NULL;
        }
    }
    return first;
}

const char *cxl_broker_sample_path(const cxl_broker_ds_t *ds, uint64_t i,
                                   size_t *len)
{
    return brk_ds_string(ds, i, 0, len);
}

cxl_broker_status_t cxl_broker_read(cxl_broker_ds_t *ds, uint64_t i, void *buf,
                                    size_t len, size_t *got)
{
    cxl_broker_iov_t iov = {.index = i, .buf = buf, .len = len};
    cxl_broker_status_t st;

    st = cxl_broker_read_batch(ds, &iov, 1);
    if (got != NULL) {
        *got = iov.got;
    }
    return st;
}

static cxl_broker_status_t brk_batch_once(cxl_broker_ds_t *ds,
                                          cxl_broker_iov_t *iov, size_t n)
{
    ucs_status_ptr_t reqs[BRK_BATCH_INFLIGHT];
    uint32_t chunks[BRK_BATCH_INFLIGHT], nch = 0, j, c;
    uint8_t held[BRK_BATCH_INFLIGHT], asked[BRK_BATCH_INFLIGHT];
    uint8_t bad[BRK_BATCH_INFLIGHT];
    brk_sample_t smp[BRK_BATCH_INFLIGHT], *s;
    ucp_request_param_t prm;
    cxl_broker_status_t st = CXL_BROKER_OK;
    ucs_status_t us;
    size_t k;

    /* distinct chunks this piece needs and has not pinned */
    for (k = 0; k < n; ++k) {
        held[k] = 0;
        iov[k].status = brk_ds_sample(ds, iov[k].index, &smp[k]);
        bad[k]        = (iov[k].status != CXL_BROKER_OK);
        if (bad[k]) {
            continue;
        }
        c = smp[k].chunk;
        if (ds->pin_word[c] != 0) {
            /* most recently used, and held (like a view) so that trimming
             * the cache below cannot give it back */
            brk_lru_unlink(ds, c);
            brk_lru_push(ds, c);
            ds->views[c]++;
            held[k] = 1;
            continue;
        }
        for (j = 0; (j < nch) && (chunks[j] != c); ++j) {
        }
        if (j == nch) {
            chunks[nch++] = c;
        }
    }
    if (ds->npinned + nch > ds->b->pin_cache) {
        brk_pins_trim(ds, (ds->b->pin_cache > nch) ? ds->b->pin_cache - nch : 0);
    }
    if (nch) {
        st = brk_pin_chunks(ds, chunks, nch, asked);
        if (st == CXL_BROKER_ERR_NO_SPACE) {
            /* our own cached pins may be what fills the cache */
            brk_pins_trim(ds, 0);
            st = brk_pin_chunks(ds, chunks, nch, asked);
        }
    }
    /* every read the broker did not see as a request is a hit to report */
    for (k = 0; k < n; ++k) {
        if (bad[k]) {
            continue;
        }
        c = smp[k].chunk;
        if (held[k]) {
            ds->views[c]--;
            brk_touch(ds, c);
            continue;
        }
        for (j = 0; (j < nch) && (chunks[j] != c); ++j) {
        }
        if ((j < nch) && asked[j]) {
            asked[j] = 0;           /* its request counted this one */
        } else if (ds->pin_word[c] != 0) {
            brk_touch(ds, c);
        }
    }
    memset(&prm, 0, sizeof(prm));
    for (k = 0; k < n; ++k) {
        s       = &smp[k];
        reqs[k] = NULL;
        if (bad[k]) {
            continue;
        }
        if (ds->pin_word[s->chunk] == 0) {
            iov[k].status = (st != CXL_BROKER_OK) ? st : CXL_BROKER_ERR_IO;
            continue;
        }
        iov[k].got = s->len;
        if (s->len > iov[k].len) {
            iov[k].status = brk_cerr(CXL_BROKER_ERR_INVAL, "%s: sample %" PRIu64
                                     " has %" PRIu64 " bytes, the buffer %zu",
                                     ds->name, iov[k].index, s->len, iov[k].len);
            continue;
        }
        iov[k].status = brk_ds_extent(ds, iov[k].index, s);
        if ((iov[k].status != CXL_BROKER_OK) || (s->len == 0)) {
            continue;
        }
        if (ds->b->copy_mapped) {
            /* in the pool's mapping here, inside the arena (checked by
             * brk_ds_extent), pinned: what a view reads */
            memcpy(iov[k].buf, ds->b->arena_ro + ds->pin_off[s->chunk] +
                   s->off, s->len);
            continue;
        }
        reqs[k] = ucp_get_nbx(ds->b->ep, iov[k].buf, s->len,
                              ds->b->arena_va + ds->pin_off[s->chunk] + s->off,
                              ds->b->rkey, &prm);
        if (UCS_PTR_IS_ERR(reqs[k])) {
            iov[k].status = brk_req_failed(ds->b, UCS_PTR_STATUS(reqs[k]),
                                           "ucp_get");
            reqs[k] = NULL;
        }
    }
    for (k = 0; k < n; ++k) {
        if (reqs[k] == NULL) {
            continue;
        }
        while ((us = ucp_request_check_status(reqs[k])) == UCS_INPROGRESS) {
            ucp_worker_progress(ds->b->worker);
        }
        ucp_request_free(reqs[k]);
        if (us != UCS_OK) {
            iov[k].status = brk_req_failed(ds->b, us, "ucp_get");
        }
    }
    /* the seqlock check, once per chunk */
    for (k = 0; k < n; ++k) {
        if (bad[k]) {
            continue;
        }
        c = smp[k].chunk;
        if ((iov[k].status == CXL_BROKER_OK) &&
            (brk_check_word(ds, c) != CXL_BROKER_OK)) {
            for (j = (uint32_t)k; j < n; ++j) {
                if (!bad[j] && (smp[j].chunk == c)) {
                    iov[j].status = CXL_BROKER_ERR_STALE;
                }
            }
            brk_unpin(ds, c);
            brk_unpin_flush(ds);
        }
    }
    for (k = 0; k < n; ++k) {
        if (iov[k].status != CXL_BROKER_OK) {
            return iov[k].status;
        }
    }
    return CXL_BROKER_OK;
}

cxl_broker_status_t cxl_broker_read_batch(cxl_broker_ds_t *ds,
                                          cxl_broker_iov_t *iov, size_t n)
{
    cxl_broker_status_t st, first = CXL_BROKER_OK;
    size_t k, piece;
    int retry;

    for (k = 0; k < n; ++k) {
        if (iov[k].index >= ds->rep.nsamples) {
            return brk_cerr(CXL_BROKER_ERR_INVAL, "%s: sample %" PRIu64 " of %"
                            PRIu64, ds->name, iov[k].index, ds->rep.nsamples);
        }
    }
    for (k = 0; k < n; k += piece) {
        piece = (n - k < BRK_BATCH_INFLIGHT) ? n - k : BRK_BATCH_INFLIGHT;
        for (retry = 0; retry < 3; ++retry) {
            st = brk_batch_once(ds, &iov[k], piece);
            if (st != CXL_BROKER_ERR_STALE) {
                break;
            }
        }
        if ((st != CXL_BROKER_OK) && (first == CXL_BROKER_OK)) {
            first = st;
        }
    }
    return first;
}

cxl_broker_status_t cxl_broker_read_rows(cxl_broker_ds_t *ds,
                                         const uint64_t *idx, size_t n,
                                         void *buf, size_t row)
{
    cxl_broker_iov_t iov[BRK_BATCH_INFLIGHT];
    cxl_broker_status_t st, first = CXL_BROKER_OK;
    size_t k, m, piece;
    uint64_t len;

    /* checked whole before anything is read: a bad index fails the batch
     * as read_batch does, not half way through it */
    for (k = 0; k < n; ++k) {
        if (idx[k] >= ds->rep.nsamples) {
            return brk_cerr(CXL_BROKER_ERR_INVAL, "%s: sample %" PRIu64 " of %"
                            PRIu64, ds->name, idx[k], ds->rep.nsamples);
        }
        len = __atomic_load_n(&ds->samples[idx[k]].len, __ATOMIC_RELAXED);
        if (len != row) {
            return brk_cerr(CXL_BROKER_ERR_INVAL, "%s: sample %" PRIu64 " has "
                            "%" PRIu64 " bytes, the rows %zu", ds->name, idx[k],
                            len, row);
        }
    }
    for (k = 0; k < n; k += piece) {
        piece = (n - k < BRK_BATCH_INFLIGHT) ? n - k : BRK_BATCH_INFLIGHT;
        for (m = 0; m < piece; ++m) {
            iov[m].index  = idx[k + m];
            iov[m].buf    = (uint8_t*)buf + (k + m) * row;
            iov[m].len    = row;
            iov[m].got    = 0;
            iov[m].status = CXL_BROKER_OK;
        }
        st = cxl_broker_read_batch(ds, iov, piece);
        /* a record rewritten in the pool since the check above: a row
         * must never be left partly unwritten without an error */
        for (m = 0; (st == CXL_BROKER_OK) && (m < piece); ++m) {
            if (iov[m].got != row) {
                st = brk_cerr(CXL_BROKER_ERR_CORRUPT, "%s: sample %" PRIu64
                              " read %zu bytes of a %zu-byte row", ds->name,
                              iov[m].index, iov[m].got, row);
            }
        }
        if ((st != CXL_BROKER_OK) && (first == CXL_BROKER_OK)) {
            first = st;
        }
    }
    return first;
}

cxl_broker_status_t cxl_broker_view(cxl_broker_ds_t *ds, uint64_t i,
                                    cxl_broker_view_t *view)
{
    brk_sample_t s;
    cxl_broker_status_t st;
    uint32_t c;

    if (ds->bitmap == NULL) {
        return brk_cerr(CXL_BROKER_ERR_UNSUPPORTED, "%s: zero-copy views need "
                        "the broker's pool mapped here (pool %s)", ds->name,
                        ds->b->pool_path);
    }
    if (i >= ds->rep.nsamples) {
        return brk_cerr(CXL_BROKER_ERR_INVAL, "%s: sample %" PRIu64 " of %"
                        PRIu64, ds->name, i, ds->rep.nsamples);
    }
    st = brk_ds_sample(ds, i, &s);
    if (st != CXL_BROKER_OK) {
        return st;
    }
    c = s.chunk;
    if (ds->pin_word[c] == 0) {
        if (ds->npinned >= ds->b->pin_cache) {
            brk_pins_trim(ds, ds->b->pin_cache - 1);
        }
        st = brk_pin_chunks(ds, &c, 1, NULL);
        if (st != CXL_BROKER_OK) {
            return st;
        }
    }
    st = brk_ds_extent(ds, i, &s);
    if (st != CXL_BROKER_OK) {
        return st;
    }
    ds->views[c]++;
    view->data  = ds->b->arena_ro + ds->pin_off[c] + s.off;
    view->len   = s.len;
    view->chunk = c;
    return CXL_BROKER_OK;
}

void cxl_broker_view_release(cxl_broker_ds_t *ds, cxl_broker_view_t *view)
{
    if ((view->chunk < ds->rep.nchunks) && ds->views[view->chunk]) {
        ds->views[view->chunk]--;
        /* views pin beyond the cache: give those pins back with the last
         * view, not at the next read, which may never come */
        if ((ds->views[view->chunk] == 0) && (ds->npinned > ds->b->pin_cache)) {
            brk_pins_trim(ds, ds->b->pin_cache);
        }
    }
    view->data = NULL;
}

cxl_broker_status_t cxl_broker_warm(cxl_broker_ds_t *ds,
                                    cxl_broker_progress_cb_t cb, void *arg)
{
    enum { BATCH = 16, DEPTH = 2 };
    struct {
        brk_pin_req_t req;
        uint32_t      chunk[BATCH];
    } msg[DEPTH];
    int slot[DEPTH];
    uint64_t next = 0, total = 0, done = 0, c, nch = ds->rep.nchunks;
    cxl_broker_status_t st = CXL_BROKER_OK, s2;
    double last = 0, now;
    unsigned d, i;
    void *data;
    size_t len;

    for (c = 0; c < nch; ++c) {
        total += ds->chunks[c].len;
    }
    for (d = 0; d < DEPTH; ++d) {
        slot[d] = -1;
    }
    for (;;) {
        for (d = 0; d < DEPTH; ++d) {    /* keep DEPTH requests in flight */
            if ((slot[d] >= 0) || (next >= nch) || (st != CXL_BROKER_OK)) {
                continue;
            }
            msg[d].req.handle = ds->rep.handle;
            msg[d].req.flags  = BRK_PIN_FILL_ONLY;
            for (i = 0; (i < BATCH) && (next < nch); ++i) {
                msg[d].chunk[i] = (uint32_t)next++;
            }
            msg[d].req.n = i;
            slot[d] = brk_call_post(ds->b, BRK_REQ_PIN, &msg[d],
                                    sizeof(brk_pin_req_t) + i * sizeof(uint32_t),
                                    1);
            if (slot[d] < 0) {
                st      = (cxl_broker_status_t)-slot[d];
                slot[d] = -1;
            }
        }
        for (d = 0; d < DEPTH; ++d) {
            if (slot[d] >= 0) {
                break;
            }
        }
        if (d == DEPTH) {
            break;
        }
        data = NULL;
        s2 = brk_call_wait(ds->b, slot[d], &data, &len);
        slot[d] = -1;
        if ((data != NULL) && (len >= sizeof(brk_pin_rep_t))) {
            const brk_pin_rep_t *rep = data;
            const brk_pin_ent_t *ent = (const brk_pin_ent_t*)(rep + 1);
            for (i = 0; (i < rep->n) &&
                        (i < (len - sizeof(*rep)) / sizeof(*ent)); ++i) {
                if (ent[i].status == CXL_BROKER_OK) {
                    done += ent[i].len;
                }
            }
        }
        free(data);
        if ((s2 != CXL_BROKER_OK) && (st == CXL_BROKER_OK)) {
            st = s2;   /* keep its text: cxl_broker_last_error() */
        }
        now = brk_cnow();
        if ((cb != NULL) && ((now - last >= 0.1) || (next >= nch))) {
            cb(done, total, arg);
            last = now;
        }
    }
    if (cb != NULL) {
        cb(done, total, arg);
    }
    return st;
}
