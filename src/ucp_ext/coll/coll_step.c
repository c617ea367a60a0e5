/*
 * Steps through the pool: the writer side (slot reuse, copy in, signal)
 * and the reader side (poll a peer's signal, make its data readable).
 * doc/design/collectives.md gives the protocol; every line written here is
 * in the own partition, every line read of a peer is invalidated first.
 */
#include "coll_int.h"

#include <string.h>
#include <immintrin.h>

/*
 * Every peer's done line >= need.  A peer's lines are read only when the
 * bound known of it is too low: the bound comes from its done line's last
 * value, and from its publications (cxl_coll_seen).  team->done_all, the
 * least of the bounds when they last all sufficed, answers most calls
 * without the loop.
 */
static cxl_coll_status_t cxl_coll_done_at_least(cxl_coll_team_t *team,
                                                uint64_t need)
{
    uint64_t least = UINT64_MAX;
    cxl_coll_word_line_t *line;
    cxl_coll_peer_t *peer;
    uint64_t v;
    int i;

    if (need <= team->done_all) {
        return CXL_COLL_OK;
    }
    for (i = 0; i < team->size; ++i) {
        peer = &team->peers[i];
        if (i == team->rank) {
            continue;
        }
        if (peer->done_lb < need) {
            line = cxl_coll_done_line(peer->part);
            cxl_coh_invalidate(team->coh, line, CXL_CACHE_LINE);
            v = cxl_coll_load(&line->value);
            if (v > peer->done_lb) {
                peer->done_lb = v;
            }
            if (v < need) {
                cxl_coll_block(team, i, &line->value, v);
                return CXL_COLL_INPROGRESS;
            }
        }
        least = (peer->done_lb < least) ? peer->done_lb : least;
    }
    team->done_all = least;
    return CXL_COLL_OK;
}

cxl_coll_status_t cxl_coll_peers_done(cxl_coll_team_t *team, uint64_t step)
{
    return cxl_coll_done_at_least(team, step);
}

uint8_t *cxl_coll_my_slot(cxl_coll_team_t *team, uint64_t step)
{
    return cxl_coll_slot_data(team->part, team->region, step);
}

void cxl_coll_put(cxl_coll_team_t *team, void *dst, const void *src,
                  size_t len)
{
    if (team->cfg.skip_wb) {
        memcpy(dst, src, len); /* test knob: readers must see stale data */
        return;
    }
    cxl_coh_copy(team->coh, dst, src, len);
    if ((team->coh == CXL_COH_HW) && (len >= 4096)) {
        /* memcpy may use non-temporal stores for long copies: order them
         * before the ready store that follows */
        _mm_sfence();
    }
}

void cxl_coll_put_wb(cxl_coll_team_t *team, const void *addr, size_t len)
{
    if (!team->cfg.skip_wb) {
        cxl_coh_writeback(team->coh, addr, len);
    }
}

/*
 * The signal of step, once its payload is in place: the call's hash,
 * fence (sw: the data written back before it; hw: stores in order), ready,
 * then seq, then the line written back.
 */
static inline void cxl_coll_sig_out(cxl_coll_team_t *team,
                                    cxl_coll_sig_t *sig, uint64_t step,
                                    uint64_t ready)
{
    sig->call = team->call->hash;
    cxl_coh_fence(team->coh);
    cxl_coll_store(&sig->ready,
                   cxl_coll_ready_make(cxl_coll_tag(team, step), ready));
    cxl_coll_store(&sig->seq, step);
    cxl_coh_publish(team->coh, sig, sizeof(*sig));
}

void cxl_coll_publish_in(cxl_coll_team_t *team, uint64_t step,
                         const void *inl, size_t inl_len, const void *buf,
                         const uint8_t *slot, uint64_t stride, uint64_t ready)
{
    cxl_coll_sig_t *sig       = cxl_coll_sig(team->part, step);
    cxl_coll_mypub_t *mypub   = &team->mypub[cxl_coll_sig_of(step)];

    if (inl != NULL) {
        memcpy(sig->u.inl, inl, inl_len);
        mypub->base   = (const uint8_t*)sig->u.inl;
        mypub->stride = stride;
    } else if (buf != NULL) {
        sig->u.ext.buf_off = (uint64_t)((const uint8_t*)buf - team->pool_base);
        sig->u.ext.stride  = stride;
        mypub->base        = buf;
        mypub->stride      = stride;
    } else {
        sig->u.ext.buf_off = 0;
        sig->u.ext.stride  = stride;
        mypub->stride      = stride;
        if (slot != NULL) {
            mypub->base = slot;
        } else {
            mypub->base = cxl_coll_my_slot(team, step);
            team->data_step[cxl_coll_slot_of(step)] = step;
        }
    }
    cxl_coll_sig_out(team, sig, step, ready);
}

void cxl_coll_publish_signal(cxl_coll_team_t *team, uint64_t step)
{
    /* as cxl_coll_publish() of 0 inline bytes, without the own copy (no
     * data for anyone to read back) */
    cxl_coll_sig_out(team, cxl_coll_sig(team->part, step), step, 0);
}

/*
 * Peer's signal line of step: OK once it holds step, a ready word of step
 * (*ready: its bytes, *raw: the word) and the hash of this rank's call;
 * INPROGRESS (the word to watch noted) or the calls' mismatch otherwise.
 */
static inline cxl_coll_status_t cxl_coll_sig_look(cxl_coll_team_t *team,
                                                  int peer, uint64_t step,
                                                  cxl_coll_sig_t **sig_p,
                                                  int64_t *ready,
                                                  uint64_t *raw)
{
    cxl_coll_sig_t *sig = cxl_coll_sig(team->peers[peer].part, step);
    uint64_t seq;

    cxl_coh_invalidate(team->coh, sig, sizeof(*sig));
    seq = cxl_coll_load(&sig->seq);
    if (seq != step) {
        cxl_coll_block(team, peer, &sig->seq, seq);
        return CXL_COLL_INPROGRESS;
    }
    *raw   = cxl_coll_load(&sig->ready);
    *ready = cxl_coll_ready_bytes(*raw, cxl_coll_tag(team, step));
    if (*ready < 0) {
        cxl_coll_block(team, peer, &sig->ready, *raw);
        return CXL_COLL_INPROGRESS;
    }
    if (sig->call != team->call->hash) {
        return cxl_coll_call_differs(team, peer);
    }
    cxl_coll_seen(team, peer, step);
    *sig_p = sig;
    return CXL_COLL_OK;
}

cxl_coll_status_t cxl_coll_peek_signal(cxl_coll_team_t *team, int peer,
                                       uint64_t step)
{
    cxl_coll_sig_t *sig;
    uint64_t raw;
    int64_t ready;

    return cxl_coll_sig_look(team, peer, step, &sig, &ready, &raw);
}

const char *cxl_coll_pub_kind_name(cxl_coll_pub_kind_t kind)
{
    switch (kind) {
    case CXL_COLL_PUB_INLINE: return "inline in the signal line";
    case CXL_COLL_PUB_LL:     return "in flagged lines";
    case CXL_COLL_PUB_SMALL:  return "through the small slot";
    default:                  return "through the slot";
    }
}

uint8_t *cxl_coll_ll_stage(cxl_coll_team_t *team, uint64_t step)
{
    return team->ll_own + (size_t)cxl_coll_sig_of(step) * CXL_COLL_LL_MAX;
}

void cxl_coll_publish_ll(cxl_coll_team_t *team, uint64_t step, uint64_t len,
                         uint64_t stride)
{
    const uint8_t *stage      = cxl_coll_ll_stage(team, step);
    cxl_coll_mypub_t *mypub   = &team->mypub[cxl_coll_sig_of(step)];
    /* test knob, sw only: the flags reach memory, the payload does not */
    int payload = !team->cfg.skip_wb || (team->coh == CXL_COH_HW);
    uint64_t x, flag = cxl_coll_ll_flag(cxl_coll_tag(team, step),
                                        team->call->hash);
    cxl_coll_ll_line_t *line;
    unsigned i;

    mypub->base   = stage;
    mypub->stride = stride;
    for (i = 0, x = 0; x < len; ++i, x += CXL_COLL_LL_PAYLOAD) {
        line = cxl_coll_ll_line(team->part, step, i);
        if (!payload) {
            /* stale bytes under a new flag */
        } else if (len - x >= CXL_COLL_LL_PAYLOAD) {
            memcpy(line->w, stage + x, CXL_COLL_LL_PAYLOAD);
        } else {
            memcpy(line->w, stage + x, len - x);
        }
        /* after the payload (release; hw: stores in order) */
        cxl_coll_store(&line->flag, flag);
    }
    /* sw: each line goes to memory whole, so the flags need no fence of
     * their own before them */
    cxl_coh_publish(team->coh, cxl_coll_ll_line(team->part, step, 0),
                    (size_t)i * CXL_CACHE_LINE);
}

void cxl_coll_publish_ready(cxl_coll_team_t *team, uint64_t step,
                            uint64_t ready)
{
    cxl_coll_sig_t *sig = cxl_coll_sig(team->part, step);

    cxl_coh_fence(team->coh);
    cxl_coll_store(&sig->ready,
                   cxl_coll_ready_make(cxl_coll_tag(team, step), ready));
    cxl_coh_publish(team->coh, sig, sizeof(*sig));
}

void cxl_coll_step_done(cxl_coll_team_t *team, uint64_t step)
{
    cxl_coll_word_line_t *line = cxl_coll_done_line(team->part);

    cxl_coll_store(&line->value, step);
    cxl_coh_publish(team->coh, line, sizeof(*line));
}

int cxl_coll_in_pool(const cxl_coll_team_t *team, const void *p, size_t len)
{
    uintptr_t a    = (uintptr_t)p;
    uintptr_t heap = (uintptr_t)team->pool_base + team->heap_offset;
    uintptr_t end  = (uintptr_t)team->pool_base + team->pool_size;

    return (a >= heap) && (a <= end) && (len <= end - a);
}

/*
 * A peer's flagged lines of step, len bytes of layout: INPROGRESS until
 * every line carries step, then their payload copied whole into the
 * peer's buffer (a line of step is not written again before this rank's
 * done line passes step, so one look at each flag suffices).
 */
static cxl_coll_status_t cxl_coll_peek_ll(cxl_coll_team_t *team, int peer,
                                          uint64_t step, uint64_t len,
                                          uint64_t stride, cxl_coll_pub_t *pub)
{
    cxl_coll_peer_t *p = &team->peers[peer];
    unsigned i, nlines = (unsigned)((len + CXL_COLL_LL_PAYLOAD - 1) /
                                    CXL_COLL_LL_PAYLOAD);
    cxl_coll_ll_line_t *line;
    uint64_t x, missing = 0, tstep = cxl_coll_tag(team, step);
    uint64_t flag = cxl_coll_ll_flag(tstep, team->call->hash);

    if (p->ll_step != step) {
        /*
         * Poll all lines with independent loads and one branch: their
         * transfers overlap.  Line by line, each line's load would wait
         * for the branch on the one before, one transfer after the other.
         * sw: each line reaches memory whole (flag and payload of one
         * write-back), in any order.
         */
        for (i = 0; i < nlines; ++i) {
            line = cxl_coll_ll_line(p->part, step, i);
            cxl_coh_invalidate(team->coh, line, CXL_CACHE_LINE);
            missing |= cxl_coll_load(&line->flag) ^ flag;
        }
        if (missing != 0) {
            /* line 0 is in every publication of the step: of this step,
             * but not of this call? */
            x = cxl_coll_load(&cxl_coll_ll_line(p->part, step, 0)->flag);
            if ((x != flag) && cxl_coll_ll_same_step(x, tstep)) {
                return cxl_coll_call_differs(team, peer);
            }
            /* watch the last line still missing: written last (a second
             * look, on this path only) */
            for (i = nlines; i-- > 0;) {
                line = cxl_coll_ll_line(p->part, step, i);
                x    = cxl_coll_load(&line->flag);
                if (x != flag) {
                    cxl_coll_block(team, peer, &line->flag, x);
                    break;
                }
            }
            team->blocked_peer = peer;
            return CXL_COLL_INPROGRESS;
        }
        for (i = 0, x = 0; x < len; ++i, x += CXL_COLL_LL_PAYLOAD) {
            line = cxl_coll_ll_line(p->part, step, i);
            memcpy(p->ll_buf + x, line->w, (len - x < CXL_COLL_LL_PAYLOAD) ?
                                           len - x : CXL_COLL_LL_PAYLOAD);
        }
        p->ll_step = step;
        cxl_coll_seen(team, peer, step);
    }
    pub->base       = p->ll_buf;
    pub->stride     = stride;
    pub->ready      = len;
    pub->inl        = 1; /* a local copy: nothing to invalidate */
    pub->ready_word = NULL;
    return CXL_COLL_OK;
}

cxl_coll_status_t cxl_coll_peek(cxl_coll_team_t *team, int peer, uint64_t step,
                                unsigned nblocks, uint64_t blk,
                                uint64_t slot_stride, cxl_coll_pub_t *pub)
{
    uint64_t total = (uint64_t)nblocks * blk;
    cxl_coll_sig_t *sig = NULL; /* set by cxl_coll_sig_look() */
    cxl_coll_pub_kind_t kind;
    uint64_t off, stride, extent, raw;
    cxl_coll_status_t status;
    int64_t ready;

    if (peer == team->rank) {
        /* own data: published before this rank reads anything of step */
        pub->base   = team->mypub[cxl_coll_sig_of(step)].base;
        pub->stride = team->mypub[cxl_coll_sig_of(step)].stride;
        pub->ready  = UINT64_MAX;
        pub->inl    = 1; /* nothing to invalidate */
        pub->ready_word = NULL;
        return CXL_COLL_OK;
    }

    kind = cxl_coll_pub_kind(nblocks, blk, slot_stride);
    if (kind == CXL_COLL_PUB_LL) {
        return cxl_coll_peek_ll(team, peer, step,
                                cxl_coll_layout_bytes(nblocks, blk,
                                                      slot_stride),
                                slot_stride, pub);
    }
    status = cxl_coll_sig_look(team, peer, step, &sig, &ready, &raw);
    if (status != CXL_COLL_OK) {
        return status;
    }
    pub->ready_word = NULL;

    if (kind == CXL_COLL_PUB_INLINE) {
        pub->base   = (const uint8_t*)sig->u.inl;
        pub->stride = blk;
        pub->ready  = total;
        pub->inl    = 1;
        return CXL_COLL_OK;
    }

    off    = sig->u.ext.buf_off;
    stride = sig->u.ext.stride;
    pub->inl = 0;
    if (off == 0) {
        pub->base   = (kind == CXL_COLL_PUB_SMALL) ?
                      cxl_coll_small_slot(team->peers[peer].part, step) :
                      cxl_coll_slot_data(team->peers[peer].part, team->region,
                                         step);
        pub->stride = slot_stride;
        pub->ready  = (uint64_t)ready;
        /* chunks still to come: the ready word grows */
        pub->ready_word = &sig->ready;
        pub->ready_seen = raw;
        return CXL_COLL_OK;
    }

    /* a user buffer in the pool: the offset comes from shared memory */
    extent = (nblocks - 1) * stride + blk;
    if (((nblocks > 1) && ((stride < blk) || (stride > team->pool_size))) ||
        (off < team->heap_offset) || (off > team->pool_size) ||
        (extent > team->pool_size - off)) {
        return cxl_coll_error(CXL_COLL_ERR_POOL, "rank %d published step %llu "
                              "at pool offset 0x%llx stride %llu, outside the "
                              "heap [0x%llx, 0x%llx)", peer,
                              (unsigned long long)step, (unsigned long long)off,
                              (unsigned long long)stride,
                              (unsigned long long)team->heap_offset,
                              (unsigned long long)team->pool_size);
    }
    pub->base   = team->pool_base + off;
    pub->stride = stride;
    pub->ready  = UINT64_MAX;
    return CXL_COLL_OK;
}

void cxl_coll_fetch(cxl_coll_team_t *team, const cxl_coll_pub_t *pub,
                    const void *p, size_t len)
{
    if (!pub->inl) {
        cxl_coh_invalidate(team->coh, p, len);
    }
}
