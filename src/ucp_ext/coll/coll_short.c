/*
 * The short path: a blocking collective of one step whose publications
 * fit a signal line, the flagged lines or the small slot (a layout of at
 * most CXL_COLL_SMALL_MAX bytes) runs straight through, without a
 * request, while none of the team's requests is queued.
 *
 * It makes the same step as the request path (coll_barrier.c,
 * coll_move.c, coll_reduce_alg.c): the same lines, the same stores in the
 * same order, the same done line, the same reduction order.  So ranks
 * that take either path for one call work together, and a rank that
 * still has a request queued simply takes the request path.  What it
 * leaves out is the work around the stores: a short call's time is the
 * writer's work up to its signal store plus one crossing plus the
 * reader's work after it.  A root's MPI_Bcast of 8 B took 948
 * instructions through the request path, ~630 through this one
 * (callgrind; doc/design/collectives.md, "The short path").  Its
 * publications and reads go through the shared cxl_coll_publish*() and
 * cxl_coll_peek(), so the protocol lives in coll_step.c alone.
 */
#include "coll_int.h"
#include "coll_reduce.h"

#include <string.h>

/* The waiting state of one call (a request keeps the same in itself). */
typedef struct {
    cxl_coll_call_t call;
    uint64_t        post_ns;
    unsigned        polls;
    cxl_coll_idle_t idle;
} cxl_coll_short_wait_t;

static void cxl_coll_short_wait_init(const cxl_coll_team_t *team,
                                     cxl_coll_short_wait_t *w)
{
    w->post_ns = 0;
    w->polls   = 0;
    cxl_coll_idle_init(team, &w->idle);
}

/*
 * A look found nothing: liveness, timeout, then spin or yield.  An error
 * makes the team unusable, as the request path's does (cxl_coll_test).
 */
static cxl_coll_status_t cxl_coll_short_idle(cxl_coll_team_t *team,
                                             cxl_coll_short_wait_t *w)
{
    cxl_coll_status_t status;

    status = cxl_coll_wait_check_at(team, &w->call, &w->post_ns, &w->polls);
    if (status != CXL_COLL_INPROGRESS) {
        cxl_coll_abort(team, status);
        return status;
    }
    cxl_coll_idle(team, &w->idle);
    return CXL_COLL_INPROGRESS;
}

static void cxl_coll_short_layout(cxl_coll_short_layout_t *l,
                                  unsigned nblocks, uint64_t len)
{
    l->nblocks = nblocks;
    l->len     = len;
    l->stride  = (len + 63) & ~63ull;
    l->kind    = cxl_coll_pub_kind(nblocks, len, l->stride);
}

/*
 * Publish the blocks of src (block j at src + j * len) in step, as
 * cxl_coll_write_round() would: inline, in flagged lines or through the
 * small slot (never in place from a pool buffer: the writer's choice,
 * which readers learn from the signal).  Block `skip` (< 0: none), which
 * nobody reads, stays out of the small slot: its lines would only delay
 * the signal behind them (reduce_scatter of 256 B per rank: 0.43 us
 * without them, 0.67 with).
 */
static cxl_coll_status_t cxl_coll_short_publish(cxl_coll_team_t *team,
                                                cxl_coll_short_wait_t *w,
                                                uint64_t step,
                                                const uint8_t *src,
                                                const cxl_coll_short_layout_t *l,
                                                int skip)
{
    uint64_t total = l->nblocks * l->len;
    cxl_coll_status_t status;
    uint8_t *to;
    unsigned j;

    /* the lines' last step (step - NSIG) read by every peer */
    while ((status = cxl_coll_slot_acquire(team, step, 0)) != CXL_COLL_OK) {
        if ((status != CXL_COLL_INPROGRESS) ||
            ((status = cxl_coll_short_idle(team, w)) != CXL_COLL_INPROGRESS)) {
            return status;
        }
    }
    switch (l->kind) {
    case CXL_COLL_PUB_INLINE:
        cxl_coll_publish(team, step, src, total, NULL, l->len, total);
        break;
    case CXL_COLL_PUB_LL:
        to = cxl_coll_ll_stage(team, step);
        for (j = 0; j < l->nblocks; ++j) {
            memcpy(to + j * l->stride, src + j * l->len, l->len);
        }
        cxl_coll_publish_ll(team, step,
                            cxl_coll_layout_bytes(l->nblocks, l->len,
                                                  l->stride), l->stride);
        break;
    default:
        to = cxl_coll_small_slot(team->part, step);
        for (j = 0; j < l->nblocks; ++j) {
            if ((int)j != skip) {
                cxl_coll_put(team, to + j * l->stride, src + j * l->len,
                             l->len);
            }
        }
        cxl_coll_publish_in(team, step, NULL, 0, NULL, to, l->stride,
                            cxl_coll_layout_bytes(l->nblocks, l->len,
                                                  l->stride));
        break;
    }
    return CXL_COLL_OK;
}

/*
 * Block bi of peer's publication of step, waited for: *data, readable (in
 * sw mode invalidated), where cxl_coll_peek() finds it; *inl: it lies in
 * a copy of this rank's, not in the peer's lines (cxl_coll_pub_t.inl).
 * Nothing of it is written again before this rank's done line passes
 * step.
 */
static cxl_coll_status_t cxl_coll_short_await(cxl_coll_team_t *team,
                                              cxl_coll_short_wait_t *w,
                                              int peer, uint64_t step,
                                              const cxl_coll_short_layout_t *l,
                                              unsigned bi,
                                              const uint8_t **data, int *inl)
{
    cxl_coll_status_t status;
    cxl_coll_pub_t pub;

    for (;;) {
        status = cxl_coll_peek(team, peer, step, l->nblocks, l->len,
                               l->stride, &pub);
        if ((status == CXL_COLL_OK) &&
            (pub.ready >= bi * pub.stride + l->len)) {
            *data = pub.base + bi * pub.stride;
            *inl  = pub.inl;
            cxl_coll_fetch(team, &pub, *data, l->len);
            return CXL_COLL_OK;
        }
        if ((status != CXL_COLL_OK) && (status != CXL_COLL_INPROGRESS)) {
            cxl_coll_abort(team, status);
            return status;
        }
        team->blocked_peer = (unsigned)peer;
        status = cxl_coll_short_idle(team, w);
        if (status != CXL_COLL_INPROGRESS) {
            return status;
        }
    }
}

/*
 * dst = x OP y.  A short vector (the kernel alone in cxl_coll_far_reduce())
 * runs the prepared call's kernel in line: through cxl_coll_far_reduce()
 * an 8-byte allreduce paid ~70 instructions per fold for the kernel's
 * lookup, the element size and the checks (callgrind).  Operands off
 * their alignment take the checked way.
 */
static inline void cxl_coll_short_red(const cxl_coll_short_call_t *c,
                                      void *dst, const void *x,
                                      const void *y, unsigned far)
{
    const cxl_coll_args_t *a = &c->args;

    if ((c->layout.len <= CXL_COLL_FAR_MIN) && (c->red != NULL) &&
        cxl_coll_red_aligned(c->es, dst, x, y)) {
        c->red(dst, x, y, a->count);
    } else {
        cxl_coll_far_reduce(a->dtype, a->op, dst, x, y, a->count, far);
    }
}

/* The reductions: rank w's input at team->pubs[w].base (a peer's lines
 * unless .inl), folded in rank order into dst: (x0 OP x1) OP x2 ..., as
 * cxl_coll_red_chunk() does. */
static void cxl_coll_short_fold(const cxl_coll_team_t *team,
                                const cxl_coll_short_call_t *c, void *dst)
{
    const cxl_coll_pub_t *in = team->pubs;
    int w;

    cxl_coll_short_red(c, dst, in[0].base, in[1].base,
                       (in[0].inl ? 0 : CXL_COLL_FAR_A) |
                       (in[1].inl ? 0 : CXL_COLL_FAR_B));
    for (w = 2; w < team->size; ++w) {
        cxl_coll_short_red(c, dst, dst, in[w].base,
                           in[w].inl ? 0 : CXL_COLL_FAR_B);
    }
}

static cxl_coll_status_t cxl_coll_short_reduce(cxl_coll_team_t *team,
                                               cxl_coll_short_wait_t *wt,
                                               const cxl_coll_short_call_t *c,
                                               uint64_t step)
{
    const cxl_coll_args_t *a         = &c->args;
    const cxl_coll_short_layout_t *l = &c->layout;
    int me = team->rank, rs = (a->type == CXL_COLL_REDUCE_SCATTER);
    int result = (a->type != CXL_COLL_REDUCE) || (me == a->root);
    const uint8_t *src = (a->sbuf == CXL_COLL_IN_PLACE) ? a->rbuf : a->sbuf;
    unsigned bi = rs ? (unsigned)me : 0;
    size_t len  = l->len;
    uint8_t mine[CXL_COLL_SMALL_MAX], *dst = a->rbuf;
    const uint8_t *own = src + (size_t)bi * len;
    cxl_coll_status_t status;
    const uint8_t *data;
    int i, w;

    /* a reduce's root reads its own input: nobody else does */
    if (!result || (a->type != CXL_COLL_REDUCE)) {
        status = cxl_coll_short_publish(team, wt, step, src, l,
                                        rs ? me : -1);
        if (status != CXL_COLL_OK) {
            return status;
        }
    }
    if (result) {
        if ((me >= 2) && (own < dst + len) && (dst < own + len)) {
            /* in place: the passes before this rank's overwrite it */
            own = memcpy(mine, own, len);
        }
        team->pubs[me].base = own;
        team->pubs[me].inl  = 1;
        for (i = 1; i < team->size; ++i) {
            w      = cxl_coll_peer_at(team, me, i);
            status = cxl_coll_short_await(team, wt, w, step, l, bi, &data,
                                          &team->pubs[w].inl);
            if (status != CXL_COLL_OK) {
                return status;
            }
            team->pubs[w].base = data;
        }
        cxl_coll_short_fold(team, c, dst);
    }
    cxl_coll_step_done(team, step);
    return CXL_COLL_OK;
}

/*
 * bcast, gather, scatter, allgather, alltoall: the publishers and readers
 * of coll_move.c.  Reader r takes block 0 of every publication, or block
 * r where a publication holds a block per rank.
 */
static cxl_coll_status_t cxl_coll_short_move(cxl_coll_team_t *team,
                                             cxl_coll_short_wait_t *wt,
                                             const cxl_coll_short_call_t *c,
                                             uint64_t step)
{
    const cxl_coll_args_t *a         = &c->args;
    const cxl_coll_short_layout_t *l = &c->layout;
    int me = team->rank, i, w, inl;
    int multi = (a->type == CXL_COLL_SCATTER) ||
                (a->type == CXL_COLL_ALLTOALL);
    unsigned bi = multi ? (unsigned)me : 0;
    size_t len  = l->len;
    const uint8_t *own, *data;
    uint8_t *rbuf = a->rbuf, *dst;
    cxl_coll_status_t status;

    if (cxl_coll_move_publishes(a, me)) {
        status = cxl_coll_short_publish(team, wt, step,
                                        cxl_coll_move_src(a, me, len), l,
                                        multi ? me : -1);
        if (status != CXL_COLL_OK) {
            return status;
        }
    }
    cxl_coll_move_own(a, me, len, &own, &dst);
    if (own != NULL) {
        memmove(dst, own, len);
    }
    for (i = 1; i < team->size; ++i) {
        w = cxl_coll_peer_at(team, me, i);
        if (!cxl_coll_move_reads(a, me, w)) {
            continue;
        }
        status = cxl_coll_short_await(team, wt, w, step, l, bi, &data,
                                      &inl);
        if (status != CXL_COLL_OK) {
            return status;
        }
        dst = ((a->type == CXL_COLL_BCAST) || (a->type == CXL_COLL_SCATTER)) ?
              rbuf : rbuf + (size_t)w * len;
        cxl_coll_pub_copy(inl, dst, data, len);
    }
    cxl_coll_step_done(team, step);
    return CXL_COLL_OK;
}

/* The line of CXL_COLL_LOG (off the path of a call without it). */
static void __attribute__((noinline))
cxl_coll_short_log(const cxl_coll_team_t *team, const cxl_coll_args_t *a,
                   cxl_coll_pub_kind_t kind)
{
    char what[96] = "", rootstr[24] = "";

    if (a->type == CXL_COLL_BARRIER) {
        cxl_coll_log(team, "barrier: short path (blocking, no request), "
                     "all-read-all of %d signal lines, 1 step", team->size);
        return;
    }
    if (CXL_COLL_TYPE_BIT(a->type) & CXL_COLL_ROOTED) {
        snprintf(rootstr, sizeof(rootstr), " root %d", a->root);
    }
    if (CXL_COLL_TYPE_BIT(a->type) & CXL_COLL_REDUCING) {
        snprintf(what, sizeof(what), " %s", cxl_coll_op_name(a->op));
    }
    cxl_coll_log(team, "%s %zu x %s%s%s: short path (blocking, no request), "
                 "1 step, %s", cxl_coll_type_name(a->type), a->count,
                 cxl_coll_dtype_name(a->dtype), what, rootstr,
                 cxl_coll_pub_kind_name(kind));
}

/*
 * A barrier: the request path's step (coll_barrier.c, the same lines),
 * without the argument checks, the layout and the generic publication
 * and read around it: ~190 instructions in the library per call outside
 * the polls, ~140 fewer than when it went through cxl_coll_short_run()
 * (callgrind, coll_lat); coll_lat np 2, slow state, 6 runs alternating:
 * 0.337 -> 0.274 us (doc/design/collectives.md, "The short path").
 */
cxl_coll_status_t cxl_coll_short_barrier(cxl_coll_team_t *team)
{
    static const cxl_coll_args_t args = {.type  = CXL_COLL_BARRIER,
                                         .dtype = CXL_COLL_UINT8};
    uint64_t step = team->next_step++;
    cxl_coll_short_wait_t wt;
    cxl_coll_status_t status;
    int i, w;

    if (team->cfg.log) {
        cxl_coll_short_log(team, &args, CXL_COLL_PUB_INLINE);
    }
    cxl_coll_short_wait_init(team, &wt);
    cxl_coll_call_make(&args, 1, step, 1, &wt.call); /* constants, inline */
    cxl_coll_call_record(team, &wt.call);
    team->call = &wt.call;
    while ((status = cxl_coll_slot_acquire(team, step, 0)) != CXL_COLL_OK) {
        if ((status != CXL_COLL_INPROGRESS) ||
            ((status = cxl_coll_short_idle(team, &wt)) != CXL_COLL_INPROGRESS)) {
            return status;
        }
    }
    cxl_coll_publish_signal(team, step);
    for (i = 1; i < team->size; ++i) {
        w = cxl_coll_peer_at(team, team->rank, i);
        while ((status = cxl_coll_peek_signal(team, w, step)) != CXL_COLL_OK) {
            if (status != CXL_COLL_INPROGRESS) {
                cxl_coll_abort(team, status);
                return status;
            }
            team->blocked_peer = (unsigned)w;
            status = cxl_coll_short_idle(team, &wt);
            if (status != CXL_COLL_INPROGRESS) {
                return status;
            }
        }
    }
    cxl_coll_step_done(team, step);
    return CXL_COLL_OK;
}

int cxl_coll_short_prepare(const cxl_coll_team_t *team,
                           const cxl_coll_args_t *a, size_t es,
                           cxl_coll_short_call_t *sc)
{
    uint64_t bytes = a->count * es;
    unsigned nblocks;

    if (team->size < 2) {
        return 0; /* no step: the request path's local copy */
    }
    /* a barrier takes cxl_coll_short_barrier(), not this path */
    switch (a->type) {
    case CXL_COLL_SCATTER:
    case CXL_COLL_ALLTOALL:
    case CXL_COLL_REDUCE_SCATTER:
        nblocks = (unsigned)team->size; /* a block per rank */
        break;
    case CXL_COLL_REDUCE:
    case CXL_COLL_ALLREDUCE:
        /* one-shot, as cxl_coll_reduce_post() decides it (one round) */
        if (!cxl_coll_red_oneshot(team, a->type, bytes, 1)) {
            return 0;
        }
        nblocks = 1;
        break;
    default:
        nblocks = 1;
        break;
    }
    /* a step with data (count 0 makes none), in one round (plan_rounds;
     * check_args bounded count * es * size) whose layout fits the small
     * slot */
    cxl_coll_short_layout(&sc->layout, nblocks, bytes);
    if ((bytes == 0) || (bytes > cxl_coll_round_cap(team, nblocks)) ||
        (cxl_coll_layout_bytes(nblocks, bytes, sc->layout.stride) >
         CXL_COLL_SMALL_MAX)) {
        return 0;
    }
    sc->args = *a;
    /* the call is the request path's of the same arguments: one step */
    cxl_coll_call_make(a, es, 0, 1, &sc->call);
    sc->red = (CXL_COLL_TYPE_BIT(a->type) & CXL_COLL_REDUCING) ?
              cxl_coll_reduce_kernel(a->dtype, a->op) : NULL;
    sc->es  = es;
    return 1;
}

cxl_coll_status_t cxl_coll_short_run(cxl_coll_team_t *team,
                                     const cxl_coll_short_call_t *c)
{
    uint64_t step = team->next_step++;
    cxl_coll_short_wait_t wt;
    cxl_coll_status_t status;
    int busy = team->memo_busy;

    if (team->cfg.log) {
        cxl_coll_short_log(team, &c->args, c->layout.kind);
    }
    cxl_coll_short_wait_init(team, &wt);
    wt.call       = c->call;
    wt.call.first = step;
    cxl_coll_call_record(team, &wt.call);
    team->call = &wt.call;
    /* c in place, not a copy (~25 instructions a call): a blocking call
     * from the progress function meanwhile does not prepare another in
     * the memo (cxl_coll_run) */
    team->memo_busy = 1;
    switch (c->args.type) {
    case CXL_COLL_REDUCE:
    case CXL_COLL_ALLREDUCE:
    case CXL_COLL_REDUCE_SCATTER:
        status = cxl_coll_short_reduce(team, &wt, c, step);
        break;
    default:
        status = cxl_coll_short_move(team, &wt, c, step);
        break;
    }
    team->memo_busy = busy;
    return status;
}
