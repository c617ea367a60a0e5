/*
 * reduce, allreduce and reduce_scatter.  Every element is reduced by one
 * rank, always as ((x0 OP x1) OP x2) ... OP x(N-1), so every rank gets
 * bitwise identical results whatever the timing.
 *
 *  one-shot (bytes <= CXL_COLL_ONESHOT_MAX, one round; on 2 ranks, or
 *      reduce on up to 3, any size in rounds): every rank publishes its
 *      vector (inline up to 40 B); the result ranks (all for allreduce,
 *      the root for reduce) reduce all of them.  1 step per round.
 *  two-shot (larger; in rounds of a slot): step A, every rank publishes
 *      the round of its vector; rank i reduces slice i of it from every
 *      rank, chunk by chunk as they arrive, into its slot of step B and
 *      signals each chunk; then the result ranks copy all slices of step
 *      B.  2 steps per round.
 *  reduce_scatter: step A with size blocks per rank (like alltoall);
 *      rank i reduces block i of every rank into its rbuf.  1 step per
 *      round.
 */
#include "coll_int.h"
#include "coll_far.h"

#include <string.h>

enum {
    CXL_COLL_RED_WRITE = 0, /* publish the input of the round (step A) */
    CXL_COLL_RED_OPEN_B,    /* open step B for the reduced slice */
    CXL_COLL_RED_REDUCE,    /* reduce the own slice, chunk by chunk */
    CXL_COLL_RED_GATHER,    /* copy the reduced slices of step B */
};

static int cxl_coll_red_twoshot(const cxl_coll_req_t *req)
{
    return !req->oneshot && (req->args.type != CXL_COLL_REDUCE_SCATTER);
}

/* Whether this rank ends up with the whole result. */
static int cxl_coll_red_result(const cxl_coll_req_t *req)
{
    return (req->args.type == CXL_COLL_ALLREDUCE) ||
           (req->team->rank == req->args.root);
}

/*
 * Whether this rank publishes its input: not the root of a one-shot
 * reduce that reads its own input from src (nobody else reads it).
 */
static int cxl_coll_red_publishes(const cxl_coll_req_t *req)
{
    return !(req->oneshot && req->own_src &&
             (req->args.type == CXL_COLL_REDUCE) &&
             (req->team->rank == req->args.root));
}

/* Slice of rank i in a round of len bytes: 64-byte aligned parts. */
static void cxl_coll_red_slice(const cxl_coll_req_t *req, uint64_t len, int i,
                               uint64_t *lo, uint64_t *hi)
{
    uint64_t per = (len + req->team->size - 1) / req->team->size;

    per = (per + 63) & ~63ull;
    *lo = ((uint64_t)i * per < len) ? (uint64_t)i * per : len;
    *hi = (*lo + per < len) ? *lo + per : len;
}

/*
 * dst[0, n) = OP over ranks of bytes [boff, boff+n) of block bi of their
 * publications of step (the own one from req->src where req->own_src);
 * INPROGRESS until all have them ready.  dst may be the own input only
 * where the own rank is 0 or 1: the first operation reads x0 and x1
 * before it writes.
 */
static cxl_coll_status_t cxl_coll_red_chunk(cxl_coll_req_t *req, uint64_t step,
                                            uint64_t off, uint64_t len,
                                            unsigned bi, uint64_t boff,
                                            uint64_t n, void *dst)
{
    cxl_coll_team_t *team = req->team;
    cxl_coll_pub_t *pubs  = team->pubs;
    int me = team->rank;
    cxl_coll_status_t status;
    const uint8_t *p, *p0 = NULL;
    int w;

    for (w = 0; w < team->size; ++w) {
        if ((w == me) && req->own_src) {
            pubs[w].base   = req->src + off;
            pubs[w].stride = req->src_stride;
            pubs[w].ready  = UINT64_MAX;
            pubs[w].inl    = 1; /* own memory: nothing to invalidate */
            continue;
        }
        status = cxl_coll_peek(team, w, step, req->nblocks, len,
                               req->slot_stride, &pubs[w]);
        if (status != CXL_COLL_OK) {
            return status;
        }
        if (pubs[w].ready < bi * pubs[w].stride + boff + n) {
            cxl_coll_block_ready(team, w, &pubs[w]);
            return CXL_COLL_INPROGRESS;
        }
    }
    for (w = 0; w < team->size; ++w) {
        p = pubs[w].base + bi * pubs[w].stride + boff;
        cxl_coll_fetch(team, &pubs[w], p, n);
        if (w == 0) {
            p0 = p;
            if (team->size == 1) {
                memcpy(dst, p, n);
            }
        } else {
            /* x0 OP x1 in one pass, then the rest in rank order */
            cxl_coll_far_reduce(req->args.dtype, req->args.op, dst,
                                (w == 1) ? p0 : dst, p, n / req->es,
                                (((w == 1) && !pubs[0].inl) ?
                                 CXL_COLL_FAR_A : 0) |
                                (!pubs[w].inl ? CXL_COLL_FAR_B : 0));
        }
    }
    return CXL_COLL_OK;
}

/*
 * Reduce [lo, hi) of the round into out; in_slot: out is the slot of
 * step B, each chunk signalled there, and copied on into copy (if not
 * NULL) while it is still in the cache.
 */
static cxl_coll_status_t cxl_coll_red_reduce(cxl_coll_req_t *req,
                                             uint64_t step, uint64_t off,
                                             uint64_t len, unsigned bi,
                                             uint64_t lo, uint64_t hi,
                                             uint8_t *out, uint64_t step_b,
                                             int in_slot, uint8_t *copy)
{
    cxl_coll_team_t *team = req->team;
    cxl_coll_status_t status;
    uint64_t n, c;

    while (req->cursor < hi - lo) {
        c = req->cursor;
        n = hi - lo - c;
        n = (n < team->cfg.chunk_size) ? n : team->cfg.chunk_size;
        status = cxl_coll_red_chunk(req, step, off, len, bi, lo + c, n,
                                    out + c);
        if (status != CXL_COLL_OK) {
            return status;
        }
        req->cursor += n;
        if (in_slot) {
            if (copy != NULL) {
                memcpy(copy + c, out + c, n);
            }
            cxl_coll_put_wb(team, out + c, n);
            cxl_coll_publish_ready(team, step_b, req->cursor);
        }
    }
    return CXL_COLL_OK;
}

/* Copy the reduced slices of step B into dst + off. */
static cxl_coll_status_t cxl_coll_red_gather(cxl_coll_req_t *req,
                                             uint64_t step_b, uint64_t off,
                                             uint64_t len)
{
    cxl_coll_team_t *team = req->team;
    int me = team->rank, missing = 0, i, w;
    cxl_coll_status_t status;
    uint64_t lo, hi, have;
    cxl_coll_pub_t pub;
    const uint8_t *p;

    for (i = 1; i < team->size; ++i) { /* the own slice is there already */
        w = cxl_coll_peer_at(team, me, i);
        cxl_coll_red_slice(req, len, w, &lo, &hi);
        if (req->got[w] == hi - lo) {
            continue;
        }
        status = cxl_coll_peek(team, w, step_b, 1, hi - lo, 0, &pub);
        if (status == CXL_COLL_INPROGRESS) {
            missing = 1;
            continue;
        } else if (status != CXL_COLL_OK) {
            return status;
        }
        have = (pub.ready < hi - lo) ? pub.ready : hi - lo;
        if (have > req->got[w]) {
            p = pub.base + req->got[w];
            cxl_coll_fetch(team, &pub, p, have - req->got[w]);
            cxl_coll_pub_copy(pub.inl, req->dst + off + lo + req->got[w], p,
                              have - req->got[w]);
            req->got[w] = have;
        }
        if (have < hi - lo) {
            cxl_coll_block_ready(team, w, &pub);
            missing = 1;
        }
    }
    return missing ? CXL_COLL_INPROGRESS : CXL_COLL_OK;
}

static cxl_coll_status_t cxl_coll_red_progress(cxl_coll_req_t *req)
{
    cxl_coll_team_t *team = req->team;
    int twoshot = cxl_coll_red_twoshot(req), me = team->rank;
    uint8_t tmp[CXL_COLL_INLINE_MAX];
    uint64_t step, step_b, r, off, len, lo, hi;
    cxl_coll_status_t status;
    int in_slot, result = cxl_coll_red_result(req);
    uint8_t *out;

    while (req->k < req->nsteps) {
        r      = twoshot ? req->k >> 1 : req->k;
        step   = req->step0 + req->k;
        step_b = step + 1;
        off    = r * req->round;
        len    = (req->bytes - off < req->round) ? req->bytes - off : req->round;
        if (twoshot) {
            cxl_coll_red_slice(req, len, me, &lo, &hi);
        } else {
            lo = 0;
            hi = len;
        }
        in_slot = twoshot && (hi - lo > CXL_COLL_INLINE_MAX);

        switch (req->phase) {
        case CXL_COLL_RED_WRITE:
            if (twoshot) {
                /* the own slice is reduced from src: never published */
                req->skip_lo = lo;
                req->skip_hi = hi;
            }
            if (cxl_coll_red_publishes(req)) {
                status = cxl_coll_write_round(req, step, off, len);
                if (status != CXL_COLL_OK) {
                    return status;
                }
            }
            req->phase = twoshot ? CXL_COLL_RED_OPEN_B : CXL_COLL_RED_REDUCE;
            /* fall through */
        case CXL_COLL_RED_OPEN_B:
            if (twoshot) {
                status = cxl_coll_slot_acquire(team, step_b, in_slot);
                if (status != CXL_COLL_OK) {
                    return status;
                }
                if (in_slot) {
                    /* open B now: readers copy each chunk once reduced */
                    cxl_coll_publish(team, step_b, NULL, 0, NULL, 0, 0);
                }
            }
            req->phase = CXL_COLL_RED_REDUCE;
            /* fall through */
        case CXL_COLL_RED_REDUCE:
            if (twoshot) {
                out = in_slot ? cxl_coll_my_slot(team, step_b) : tmp;
                status = cxl_coll_red_reduce(req, step, off, len, 0, lo, hi,
                                             out, step_b, in_slot,
                                             result ? req->dst + off + lo :
                                             NULL);
                if (status != CXL_COLL_OK) {
                    return status;
                }
                if (!in_slot) {
                    cxl_coll_publish(team, step_b, tmp, hi - lo, NULL, hi - lo,
                                     hi - lo);
                    if (result && (hi > lo)) {
                        memcpy(req->dst + off + lo, tmp, hi - lo);
                    }
                }
            } else if (req->args.type == CXL_COLL_REDUCE_SCATTER) {
                status = cxl_coll_red_reduce(req, step, off, len, (unsigned)me,
                                             0, len, req->dst + off, 0, 0,
                                             NULL);
                if (status != CXL_COLL_OK) {
                    return status;
                }
            } else if (result) {
                status = cxl_coll_red_reduce(req, step, off, len, 0, 0, len,
                                             req->dst + off, 0, 0, NULL);
                if (status != CXL_COLL_OK) {
                    return status;
                }
            }
            cxl_coll_step_done(team, step);
            req->cursor = 0;
            req->phase  = CXL_COLL_RED_GATHER;
            if (!twoshot) {
                req->phase = CXL_COLL_RED_WRITE;
                req->k++;
                continue;
            }
            /* fall through */
        default:
            if (result) {
                status = cxl_coll_red_gather(req, step_b, off, len);
                if (status != CXL_COLL_OK) {
                    return status;
                }
            }
            cxl_coll_step_done(team, step_b);
            cxl_coll_got_clear(req);
            req->phase = CXL_COLL_RED_WRITE;
            req->k    += 2;
            break;
        }
    }
    if (req->user_step != 0) {
        return cxl_coll_peers_done(team, req->user_step);
    }
    return CXL_COLL_OK;
}

/* The line of CXL_COLL_LOG for a reduction (off the path of a call
 * without it) */
static void __attribute__((noinline))
cxl_coll_red_log(const cxl_coll_req_t *req)
{
    const cxl_coll_team_t *team = req->team;
    const cxl_coll_args_t *a    = &req->args;
    int rs = (a->type == CXL_COLL_REDUCE_SCATTER);
    char b1[32], b2[32], rootstr[24] = "";

    if (a->type == CXL_COLL_REDUCE) {
        snprintf(rootstr, sizeof(rootstr), " root %d", a->root);
    }
    cxl_coll_log(team, "%s %zu x %s %s%s: %s, %llu round(s) of %s, chunk "
                 "%s%s%s", cxl_coll_type_name(a->type), a->count,
                 cxl_coll_dtype_name(a->dtype), cxl_coll_op_name(a->op),
                 rootstr,
                 (req->nsteps == 0) ? "local" :
                 rs ? "flat reduce-scatter" :
                 !req->oneshot ? "two-shot" :
                 (req->nrounds <= 1) ? "one-shot" :
                 (a->type == CXL_COLL_REDUCE) ? "rooted" :
                 "one-shot in rounds",
                 (unsigned long long)req->nrounds,
                 cxl_coll_bytes_str(req->round, b1, sizeof(b1)),
                 cxl_coll_bytes_str(team->cfg.chunk_size, b2, sizeof(b2)),
                 (req->nsteps == 0) ? "" : ", input ",
                 (req->nsteps == 0) ? "" :
                 req->src_in_pool ? "read in place from the pool" :
                 cxl_coll_pub_kind_name(cxl_coll_req_kind(req)));
}

cxl_coll_status_t cxl_coll_reduce_post(cxl_coll_req_t *req)
{
    cxl_coll_team_t *team    = req->team;
    const cxl_coll_args_t *a = &req->args;
    int rs = (a->type == CXL_COLL_REDUCE_SCATTER);
    int in_place = (a->sbuf == CXL_COLL_IN_PLACE);

    req->bytes = a->count * req->es;
    req->src   = in_place ? (const uint8_t*)a->rbuf : (const uint8_t*)a->sbuf;
    req->dst   = a->rbuf;
    req->src_stride = rs ? req->bytes : 0;
    req->dst_stride = 0;
    cxl_coll_plan_rounds(req, rs ? (unsigned)team->size : 1);
    /* doc/design/collectives.md */
    req->oneshot = !rs && cxl_coll_red_oneshot(team, a->type, req->bytes,
                                               req->nrounds);
    /* the own input is read from src, unless the result overwrites it
     * under the reduction (one-shot in place: rbuf is the own input and
     * the result; safe only for ranks 0 and 1, see cxl_coll_red_chunk) */
    req->own_src = !(in_place && req->oneshot && (team->rank >= 2));
    if (rs) {
        /* rank i reduces block i from its own src: never published */
        req->skip_lo = (uint64_t)team->rank * req->slot_stride;
        req->skip_hi = req->skip_lo + req->slot_stride;
    }
    req->nsteps  = (team->size == 1) ? 0 :
                   (rs || req->oneshot) ? req->nrounds : 2 * req->nrounds;
    /* step B opens before step A is done (cxl_coll_seen) */
    req->lag     = cxl_coll_red_twoshot(req) ? 2 : 1;
    /* peers may read the input in place, unless this rank overwrites it */
    if (team->cfg.pool_inplace && (req->src != NULL) &&
        (req->src != CXL_COLL_IN_PLACE) &&
        (cxl_coll_req_kind(req) >= CXL_COLL_PUB_SMALL)) {
        /* a buffer in the transport's mapping of the pool: the same
         * bytes in the library's (coll_alias.c) */
        req->src = cxl_coll_alias(team, req->src,
                                  (req->nblocks - 1) * req->src_stride +
                                  req->bytes);
    }
    req->src_in_pool = team->cfg.pool_inplace && !in_place &&
                       (req->nsteps > 0) &&
                       (cxl_coll_req_kind(req) >= CXL_COLL_PUB_SMALL) &&
                       cxl_coll_in_pool(team, req->src,
                                        (req->nblocks - 1) * req->src_stride +
                                        req->bytes);
    req->progress = cxl_coll_red_progress;

    if ((team->size == 1) && !in_place && (req->bytes > 0) &&
        ((a->type != CXL_COLL_REDUCE) || (a->root == team->rank))) {
        memmove(a->rbuf, a->sbuf, req->bytes);
    }
    if (team->cfg.log) {
        cxl_coll_red_log(req);
    }
    return CXL_COLL_OK;
}
