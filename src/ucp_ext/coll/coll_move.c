/*
 * The block-move engine of bcast, gather, scatter, allgather and alltoall:
 * in each step (one round of at most a slot), every publishing rank writes
 * its blocks once into its slot (or points at its pool-resident buffer),
 * chunk by chunk with a ready mark after each, and every reader copies its
 * block of each publisher out as it becomes ready, visiting publishers in
 * a staggered order ((rank + i) % size) so they are not all read at once.
 *
 *               publishers      blocks  readers of w    reader r reads
 *   bcast       root            1       all but root    block 0
 *   gather      all but root    1       root            block 0
 *   allgather   all             1       all             block 0
 *   scatter     root            size    all but root    block r
 *   alltoall    all             size    all             block r
 */
#include "coll_int.h"

#include <string.h>

/* Whether rank r reads anything in a step (the mirror of publishes). */
static int cxl_coll_move_reads_any(const cxl_coll_req_t *req, int r)
{
    switch (req->args.type) {
    case CXL_COLL_BCAST:
    case CXL_COLL_SCATTER:
        return r != req->args.root;
    case CXL_COLL_GATHER:
        return r == req->args.root;
    default:
        return 1;
    }
}

void cxl_coll_plan_rounds(cxl_coll_req_t *req, unsigned nblocks)
{
    uint64_t cap = cxl_coll_round_cap(req->team, nblocks);

    req->nblocks     = nblocks;
    req->round       = (req->bytes < cap) ? req->bytes : cap;
    req->slot_stride = (req->round + 63) & ~63ull;
    req->nrounds     = (req->bytes == 0) ? 0 :
                       (req->bytes <= req->round) ? 1 :
                       (req->bytes + req->round - 1) / req->round;
}

cxl_coll_status_t cxl_coll_write_round(cxl_coll_req_t *req,
                                             uint64_t step, uint64_t off,
                                             uint64_t len)
{
    cxl_coll_team_t *team = req->team;
    uint64_t chunk        = team->cfg.chunk_size;
    uint8_t inl[CXL_COLL_INLINE_MAX];
    cxl_coll_status_t status;
    uint8_t *slot, *small, *stage;
    const uint8_t *from;
    uint64_t x, n, pos;
    cxl_coll_pub_kind_t kind;
    int signalled = 0;
    unsigned j;

    kind   = cxl_coll_pub_kind(req->nblocks, len, req->slot_stride);
    status = cxl_coll_slot_acquire(team, step, (kind == CXL_COLL_PUB_SLOT) &&
                                               !req->src_in_pool);
    if (status != CXL_COLL_OK) {
        return status;
    }
    if (kind == CXL_COLL_PUB_LL) {
        /* staged in layout: the own publication stays readable to this
         * rank (cxl_coll_peek) even where src is the result buffer */
        stage = cxl_coll_ll_stage(team, step);
        for (j = 0; j < req->nblocks; ++j) {
            memcpy(stage + j * req->slot_stride,
                   req->src + j * req->src_stride + off, len);
        }
        cxl_coll_publish_ll(team, step,
                            cxl_coll_layout_bytes(req->nblocks, len,
                                                  req->slot_stride),
                            req->slot_stride);
        if (req->fuse_dst != NULL) {
            memcpy(req->fuse_dst + off, stage, len);
        }
        return CXL_COLL_OK;
    }
    if (kind == CXL_COLL_PUB_INLINE) {
        if (req->nblocks == 1) {
            from = req->src + off;
        } else {
            from = inl; /* the blocks side by side */
            for (j = 0; j < req->nblocks; ++j) {
                memcpy(inl + j * len, req->src + j * req->src_stride + off,
                       len);
            }
        }
        if (req->fuse_dst != NULL) {
            memcpy(req->fuse_dst + off, from, len);
        }
        cxl_coll_publish(team, step, from, req->nblocks * len, NULL, len,
                         req->nblocks * len);
        return CXL_COLL_OK;
    }
    if (req->src_in_pool) {
        /* the readers copy straight from the user's pool buffer */
        for (j = 0; j < req->nblocks; ++j) {
            cxl_coll_put_wb(team, req->src + j * req->src_stride + off, len);
        }
        cxl_coll_publish(team, step, NULL, 0, req->src + off, req->src_stride,
                         0);
        req->user_step = step;
        return CXL_COLL_OK;
    }
    /*
     * The signal goes out with the first chunk: a signal with nothing
     * ready lets no reader start, and each store to the signal line a
     * reader polls costs it one more transfer of the line.
     */
    small = (kind == CXL_COLL_PUB_SMALL) ?
            cxl_coll_small_slot(team->part, step) : NULL;
    slot  = (small != NULL) ? small : cxl_coll_my_slot(team, step);
    for (j = 0; j < req->nblocks; ++j) {
        for (x = 0; x < len; x += n) {
            pos = j * req->slot_stride + x;
            if ((pos >= req->skip_lo) && (pos < req->skip_hi)) {
                /* nobody reads it: the own block or reduction slice */
                n = (req->skip_hi - pos < len - x) ? req->skip_hi - pos :
                    len - x;
                continue;
            }
            n = (len - x < chunk) ? len - x : chunk;
            if ((pos < req->skip_lo) && (req->skip_lo - pos < n)) {
                n = req->skip_lo - pos;
            }
            cxl_coll_put(team, slot + pos,
                         req->src + j * req->src_stride + off + x, n);
            if (signalled) {
                cxl_coll_publish_ready(team, step, pos + n);
            } else {
                cxl_coll_publish_in(team, step, NULL, 0, NULL, small,
                                    req->slot_stride, pos + n);
                signalled = 1;
            }
            if (req->fuse_dst != NULL) {
                /* the same bytes, still in the cache: no second pass over
                 * src at the end */
                memcpy(req->fuse_dst + off + x,
                       req->src + j * req->src_stride + off + x, n);
            }
        }
    }
    if (!signalled) {
        /* nothing anybody reads went into the slot: the signal alone */
        cxl_coll_publish_in(team, step, NULL, 0, NULL, small, req->slot_stride,
                            0);
    }
    return CXL_COLL_OK;
}

/* Copy out what is ready of every publisher; OK once all is here. */
static cxl_coll_status_t cxl_coll_move_read(cxl_coll_req_t *req,
                                            uint64_t step, uint64_t off,
                                            uint64_t len)
{
    cxl_coll_team_t *team = req->team;
    int me = team->rank, missing = 0, i, w;
    unsigned bi = (req->nblocks == 1) ? 0 : (unsigned)me;
    cxl_coll_status_t status;
    cxl_coll_pub_t pub;
    uint64_t start, have;
    const uint8_t *p;

    for (i = 1; i < team->size; ++i) {
        w = cxl_coll_peer_at(team, me, i);
        if (!cxl_coll_move_reads(&req->args, me, w) || (req->got[w] == len)) {
            continue;
        }
        status = cxl_coll_peek(team, w, step, req->nblocks, len,
                               req->slot_stride, &pub);
        if (status == CXL_COLL_INPROGRESS) {
            missing = 1;
            continue;
        } else if (status != CXL_COLL_OK) {
            return status;
        }
        start = bi * pub.stride;
        have  = (pub.ready > start) ? pub.ready - start : 0;
        have  = (have < len) ? have : len;
        if (have > req->got[w]) {
            p = pub.base + start + req->got[w];
            cxl_coll_fetch(team, &pub, p, have - req->got[w]);
            cxl_coll_pub_copy(pub.inl, req->dst + w * req->dst_stride + off +
                                    req->got[w], p, have - req->got[w]);
            req->got[w] = have;
        }
        if (have < len) {
            cxl_coll_block_ready(team, w, &pub);
            missing = 1;
        }
    }
    return missing ? CXL_COLL_INPROGRESS : CXL_COLL_OK;
}

/*
 * Bytes [off, off+len) of this rank's own block: a local copy, unless it is
 * in place already.
 */
static void cxl_coll_move_local(cxl_coll_req_t *req, uint64_t off,
                                uint64_t len)
{
    const uint8_t *from;
    uint8_t *to;

    cxl_coll_move_own(&req->args, req->team->rank, req->bytes, &from, &to);
    if (from != NULL) {
        memmove(to + off, from + off, len);
    }
}

static cxl_coll_status_t cxl_coll_move_progress(cxl_coll_req_t *req)
{
    cxl_coll_team_t *team = req->team;
    cxl_coll_status_t status;
    uint64_t step, off, len;

    while (req->k < req->nsteps) {
        step = req->step0 + req->k;
        off  = req->k * req->round;
        len  = (req->bytes - off < req->round) ? req->bytes - off : req->round;
        if (req->phase == 0) {
            if (cxl_coll_move_publishes(&req->args, team->rank)) {
                status = cxl_coll_write_round(req, step, off, len);
                if (status != CXL_COLL_OK) {
                    return status;
                }
            }
            req->phase = 1;
            if (req->local_copy && cxl_coll_move_reads_any(req, team->rank)) {
                /*
                 * Between writing and reading: a reader that starts right
                 * behind the peer's writes waits on every chunk, one
                 * that copies its own block first finds them written
                 * (alltoall 1 MiB 115 -> 96 us)
                 */
                cxl_coll_move_local(req, off, len);
            }
        }
        status = cxl_coll_move_read(req, step, off, len);
        if (status != CXL_COLL_OK) {
            return status;
        }
        cxl_coll_step_done(team, step);
        cxl_coll_got_clear(req);
        req->phase = 0;
        req->k++;
    }
    if (req->local_copy && ((req->nsteps == 0) ||
                            !cxl_coll_move_reads_any(req, team->rank))) {
        /* a rank that reads nothing (scatter root): last, so that the
         * readers of the last round copy meanwhile */
        cxl_coll_move_local(req, 0, req->bytes);
        req->local_copy = 0;
    }
    if (req->user_step != 0) {
        /* the user may reuse the buffer once nobody reads it */
        return cxl_coll_peers_done(team, req->user_step);
    }
    return CXL_COLL_OK;
}

/* The line of CXL_COLL_LOG for a data movement (not on the path of a call
 * without it: its buffers alone cost more than a short collective's post) */
static void __attribute__((noinline))
cxl_coll_move_log(const cxl_coll_req_t *req)
{
    const cxl_coll_team_t *team = req->team;
    const cxl_coll_args_t *a    = &req->args;
    char b1[32], b2[32], rootstr[24] = "";
    const char *how;

    how = (req->nsteps == 0) ? "nothing to move" :
          req->src_in_pool ? "read in place from the pool buffer" :
          cxl_coll_pub_kind_name(cxl_coll_req_kind(req));
    if (CXL_COLL_TYPE_BIT(a->type) & CXL_COLL_ROOTED) {
        snprintf(rootstr, sizeof(rootstr), " root %d", a->root);
    }
    cxl_coll_log(team, "%s %zu x %s%s: flat, %llu round(s) of %s per "
                 "block, %u block(s), chunk %s, %s",
                 cxl_coll_type_name(a->type), a->count,
                 cxl_coll_dtype_name(a->dtype), rootstr,
                 (unsigned long long)req->nsteps,
                 cxl_coll_bytes_str(req->round, b1, sizeof(b1)),
                 req->nblocks,
                 cxl_coll_bytes_str(team->cfg.chunk_size, b2, sizeof(b2)),
                 how);
}

cxl_coll_status_t cxl_coll_move_post(cxl_coll_req_t *req)
{
    cxl_coll_team_t *team    = req->team;
    const cxl_coll_args_t *a = &req->args;
    int me = team->rank, multi, in_place;

    multi     = (a->type == CXL_COLL_SCATTER) || (a->type == CXL_COLL_ALLTOALL);
    req->bytes = a->count * req->es;
    cxl_coll_plan_rounds(req, multi ? (unsigned)team->size : 1);
    req->nsteps = (team->size > 1) ? req->nrounds : 0;

    in_place   = (a->sbuf == CXL_COLL_IN_PLACE);
    req->src   = cxl_coll_move_src(a, me, req->bytes);
    req->src_stride = multi ? req->bytes : 0;
    req->dst        = a->rbuf;
    req->dst_stride = ((a->type == CXL_COLL_BCAST) ||
                       (a->type == CXL_COLL_SCATTER)) ? 0 : req->bytes;
    /* in place from the pool, unless this rank overwrites what it offers
     * (in-place alltoall); never for what goes into a signal line or
     * flagged lines (below) */
    if (team->cfg.pool_inplace && (req->src != NULL) &&
        (req->src != CXL_COLL_IN_PLACE) &&
        (cxl_coll_req_kind(req) >= CXL_COLL_PUB_SMALL)) {
        /* a buffer in the transport's mapping of the pool: the same
         * bytes in the library's (coll_alias.c) */
        req->src = cxl_coll_alias(team, req->src,
                                  (req->nblocks - 1) * req->src_stride +
                                  req->bytes);
    }
    /* (not for what goes into a signal line or flagged lines: copying
     * it costs less than the readers' extra transfer) */
    req->src_in_pool = team->cfg.pool_inplace && (req->nsteps > 0) &&
                       (cxl_coll_req_kind(req) >= CXL_COLL_PUB_SMALL) &&
                       cxl_coll_move_publishes(&req->args, me) &&
                       !((a->type == CXL_COLL_ALLTOALL) && in_place) &&
                       cxl_coll_in_pool(team, req->src,
                                        (req->nblocks - 1) * req->src_stride +
                                        req->bytes);
    if (multi) {
        /* the own block moves by the local copy: never into the slot */
        req->skip_lo = (uint64_t)me * req->slot_stride;
        req->skip_hi = req->skip_lo + req->slot_stride;
    }
    req->progress   = cxl_coll_move_progress;
    req->local_copy = 1;
    if ((a->type == CXL_COLL_ALLGATHER) && !in_place && !req->src_in_pool &&
        (req->nsteps > 0)) {
        /* the own block goes into the slot and into rbuf: one pass */
        req->fuse_dst   = (uint8_t*)a->rbuf + (size_t)me * req->bytes;
        req->local_copy = 0;
    }

    if (team->cfg.log) {
        cxl_coll_move_log(req);
    }
    return CXL_COLL_OK;
}
