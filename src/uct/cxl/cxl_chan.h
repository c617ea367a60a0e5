/*
 * The channel layer, sender side (inline, for the data path of the active
 * messages and of the owner-executed operations): room, peer checks,
 * reserve, publish.  Exported entry points and the receive side (poll,
 * deliver by record type) are in cxl_chan.c; the layout of a channel in
 * cxl_channel.h; doc/design/am-channels.md describes the protocol.
 */
#ifndef UCT_CXL_CHAN_H
#define UCT_CXL_CHAN_H

#include "cxl_iface.h"

#include <ucs/sys/math.h>
#include <ucs/time/time.h>
#include <string.h>

/* Test-only fault injection (UCX_CXL_TEST_SKIP_WRITEBACK=record): leave
 * out the write-back of record bodies, to prove that the non-coherent
 * emulator catches a missing flush. */
extern int uct_cxl_test_skip_record_wb;

/* sw mode: one-line records go out in one atomic 64-byte store
 * (cxl_coh_line_atomic(), set at interface creation). */
extern int uct_cxl_line_atomic;

/* sw mode: re-read the receiver's header line when its interval is up
 * (the clock is read first: a check covers sends until then + interval) */
static UCS_F_ALWAYS_INLINE void uct_cxl_tx_peer_refresh(uct_cxl_iface_t *iface,
                                                        uct_cxl_tx_t *tx)
{
    ucs_time_t now = ucs_get_time();

    if (now >= tx->check_due) {
        cxl_coh_invalidate(iface->coh, tx->peer, UCT_CXL_LINE);
        tx->check_due = now + tx->check_interval;
    }
}

/*
 * The receiver's block is still the interface connected to: a new one may
 * already live in a block its owner gave up, so the id counts, not just
 * the magic.  In sw mode the receiver's close is invisible to a cached
 * copy, so the header line is re-read from memory at least every
 * peer_check_us; the receiver frees its block only twice that long after
 * its close.  A sender checks this before every record it writes.
 */
static UCS_F_ALWAYS_INLINE int uct_cxl_tx_peer_current(uct_cxl_iface_t *iface,
                                                       uct_cxl_tx_t *tx)
{
    if (iface->coh == CXL_COH_SW) {
        uct_cxl_tx_peer_refresh(iface, tx);
    }
    return (tx->peer->magic == UCT_CXL_BLOCK_MAGIC) &&
           (tx->peer->iface_id == tx->peer_id);
}

/* Room for a record of up to max_length payload bytes, plus the filler. */
static UCS_F_ALWAYS_INLINE uint64_t uct_cxl_tx_need(uct_cxl_tx_t *tx,
                                                    uint32_t max_length)
{
    uint64_t rec  = uct_cxl_rec_size(max_length);
    uint64_t left = (tx->ring_mask + 1) - (tx->head & tx->ring_mask);

    return (rec > left) ? rec + left : rec;
}

static UCS_F_ALWAYS_INLINE void uct_cxl_tx_publish(uct_cxl_tx_t *tx,
                                                   cxl_coh_mode_t coh,
                                                   uct_cxl_rec_t *rec,
                                                   uint64_t size)
{
    uint64_t line[UCT_CXL_LINE / sizeof(uint64_t)];

    rec->check = uct_cxl_rec_check(tx->seq, tx->first);
    if ((size == UCT_CXL_LINE) && (coh == CXL_COH_SW) && uct_cxl_line_atomic &&
        ucs_likely(!uct_cxl_test_skip_record_wb)) {
        /* one line: stored again whole with its sequence number, in one
         * atomic store (see uct_cxl_tx_stream); the instruction drops the
         * sender's cached copy of the line first */
        __atomic_store_n(&rec->seq, tx->seq, __ATOMIC_RELAXED);
        memcpy(line, rec, UCT_CXL_LINE);
        cxl_coh_store_line(coh, rec, line);
        uct_cxl_tx_signal(tx);
        goto out;
    }
    /* body (and header fields) first, then the sequence number */
    if (ucs_likely(!uct_cxl_test_skip_record_wb)) {
        cxl_coh_publish(coh, rec, size);
    }
    __atomic_store_n(&rec->seq, tx->seq, __ATOMIC_RELEASE);
    /* before the line is written back: the fence of the signal then waits
     * for this store only, not for a write-back in flight */
    uct_cxl_tx_signal(tx);
    cxl_coh_writeback(coh, rec, UCT_CXL_LINE);
out:
    tx->head += size;
    tx->seq++;
    /*
     * Producer line: where a later owner of the channel continues.  It is
     * stored at release, and here only every half ring, so that an owner
     * taking over from a dead one has less than a lap of records to walk
     * (uct_cxl_tx_claim).  Each store is written back at once: this host
     * never keeps a dirty line of the peer's block, which a later flush
     * (or an eviction) would write over the memory after it was reused.
     */
    if (ucs_unlikely(tx->head - tx->chan_head >= (tx->ring_mask + 1) / 2)) {
        uct_cxl_tx_store_position(tx, coh);
    }
}

/*
 * sw mode: a record staged whole at stage (header, payload, zeroes up to
 * the end of its last line) into the ring at rec, and published, with
 * non-temporal stores of whole lines only (cxl_coh_copy): no line of the
 * ring is read for ownership (the receiver keeps invalidating them), none
 * is left in the cache, and no line is written in part.  First the whole
 * record with a sequence number that is not the one expected, fence, then
 * its first line again with the right one.  The two writes of the first
 * line differ only in that word, so a reader that catches the line half
 * written sees a body that is right either way.  Records of one line take
 * one atomic line store instead where the CPU has one.
 */
static UCS_F_ALWAYS_INLINE void
uct_cxl_tx_stream(uct_cxl_tx_t *tx, cxl_coh_mode_t coh, uct_cxl_rec_t *rec,
                  uct_cxl_rec_t *stage)
{
    uint64_t size = uct_cxl_rec_ring_size(stage);

    /* right in both writes: the first one's seq is what keeps it out */
    stage->check = uct_cxl_rec_check(tx->seq, tx->first);
    if ((size == UCT_CXL_LINE) && uct_cxl_line_atomic) {
        /*
         * A record of one line, stored whole with its sequence number in
         * one 64-byte atomic write (MOVDIR64B): a reader sees all of it or
         * none of it, so neither the first write nor the fence between
         * the two is needed (on the VM 0.18 us of am_lat).
         */
        stage->seq = tx->seq;
        if (ucs_likely(!uct_cxl_test_skip_record_wb)) {
            cxl_coh_store_line(coh, rec, stage);
        } else {
            memcpy(rec, stage, UCT_CXL_LINE);
        }
        goto out;
    }
    stage->seq = ~tx->seq;
    if (ucs_likely(!uct_cxl_test_skip_record_wb)) {
        cxl_coh_copy(coh, rec, stage, size);
    } else {
        memcpy(rec, stage, size);
    }
    cxl_coh_fence(coh);
    stage->seq = tx->seq;
    cxl_coh_copy(coh, rec, stage, UCT_CXL_LINE);
out:
    uct_cxl_tx_signal(tx);
    tx->head += size;
    tx->seq++;
    if (ucs_unlikely(tx->head - tx->chan_head >= (tx->ring_mask + 1) / 2)) {
        uct_cxl_tx_store_position(tx, coh);
    }
}

/* ... the header of the staged record, and zeroes after its payload up to
 * the end of the line (nothing of an earlier message leaks into the ring) */
static UCS_F_ALWAYS_INLINE void
uct_cxl_tx_stage(uct_cxl_rec_t *stage, uint8_t id, uint32_t length)
{
    stage->am_id     = id;
    stage->flags     = 0;
    stage->reserved  = 0;
    stage->length    = length;
    memset(UCS_PTR_BYTE_OFFSET(stage + 1, length), 0,
           uct_cxl_rec_size(length) - UCT_CXL_REC_HDR - length);
}

/* Reserve a record; writes a filler first if it would wrap. */
static UCS_F_ALWAYS_INLINE uct_cxl_rec_t *
uct_cxl_tx_reserve(uct_cxl_tx_t *tx, cxl_coh_mode_t coh, uint32_t max_length)
{
    uint64_t left = (tx->ring_mask + 1) - (tx->head & tx->ring_mask);
    uct_cxl_rec_t *rec;

    if (ucs_unlikely(uct_cxl_rec_size(max_length) > left)) {
        rec         = (uct_cxl_rec_t*)(tx->ring + (tx->head & tx->ring_mask));
        rec->am_id  = 0;
        rec->flags  = UCT_CXL_REC_PAD;
        rec->length = (uint32_t)(left - UCT_CXL_REC_HDR);
        uct_cxl_tx_publish(tx, coh, rec, left);
    }
    return (uct_cxl_rec_t*)(tx->ring + (tx->head & tx->ring_mask));
}

/* What every record of an endpoint passes before it is reserved: the
 * endpoint and the channel alive, no overtaking, room, the receiver's block
 * still the one connected to. */
static UCS_F_ALWAYS_INLINE ucs_status_t
uct_cxl_chan_check(uct_cxl_ep_t *ep, uct_cxl_iface_t *iface,
                   uint32_t max_length)
{
    uct_cxl_tx_t *tx = ep->tx;

    if (ucs_unlikely(ep->failed || tx->failed)) {
        uct_cxl_ep_set_failed(ep);
        return UCS_ERR_CONNECTION_RESET;
    }
    /* no overtaking: with requests queued, only their dispatch may send,
     * and nothing passes a put that is still being streamed or moved */
    if (ucs_unlikely((!ucs_arbiter_group_is_empty(&ep->arb_group) &&
                      !ep->in_pending) || uct_cxl_ep_held(ep))) {
        return UCS_ERR_NO_RESOURCE;
    }
    if (ucs_unlikely(!uct_cxl_tx_has_resources(iface, tx,
                                               uct_cxl_tx_need(tx, max_length)))) {
        return UCS_ERR_NO_RESOURCE;
    }
    /* never write into a block its owner gave up */
    if (ucs_unlikely(!uct_cxl_tx_peer_current(iface, tx))) {
        tx->failed = 1;
        uct_cxl_ep_set_failed(ep);
        return UCS_ERR_CONNECTION_RESET;
    }
    return UCS_OK;
}

/* The record's payload for a message at bulk position start; the message
 * then holds the bulk ring up to its end. */
static UCS_F_ALWAYS_INLINE void
uct_cxl_bulk_describe(uct_cxl_tx_t *tx, uint64_t start, size_t length,
                      uct_cxl_rec_bulk_t *desc)
{
    desc->offset   = tx->bulk_offset + (start & tx->bulk_mask);
    desc->bulk_end = ucs_align_up_pow2(start + length, UCT_CXL_LINE);
    tx->bulk_head  = desc->bulk_end;
    if (ucs_unlikely(tx->bulk_rec0 == UINT64_MAX)) {
        tx->bulk_rec0 = tx->head; /* where this record goes */
    }
}

/*
 * Publish the record at rec that announces a payload already in the bulk
 * ring at position start: the payload's write-back is ordered before the
 * record by the record's own publish.
 */
static UCS_F_ALWAYS_INLINE void
uct_cxl_tx_publish_bulk(uct_cxl_tx_t *tx, cxl_coh_mode_t coh, uct_cxl_rec_t *rec,
                        uint64_t start, const void *payload, uint32_t length,
                        uint8_t am_id, uint8_t flags)
{
    if (ucs_likely(!uct_cxl_test_skip_record_wb)) {
        cxl_coh_writeback(coh, payload, length);
    }
    uct_cxl_bulk_describe(tx, start, length, (uct_cxl_rec_bulk_t*)(rec + 1));
    rec->am_id  = am_id;
    rec->flags  = flags | UCT_CXL_REC_BULK;
    rec->length = length;
    uct_cxl_tx_publish(tx, coh, rec, uct_cxl_rec_size(sizeof(uct_cxl_rec_bulk_t)));
}

/*
 * sw mode: the same record staged (its descriptor in stage, whose payload
 * the caller wrote and wrote back, or copied with non-temporal stores) and
 * streamed into the ring at rec, whose fence orders the payload first.
 */
static UCS_F_ALWAYS_INLINE void
uct_cxl_tx_stream_bulk(uct_cxl_tx_t *tx, cxl_coh_mode_t coh, uct_cxl_rec_t *rec,
                       uct_cxl_rec_t *stage, uint64_t start, uint32_t length,
                       uint8_t am_id, uint8_t flags)
{
    uct_cxl_bulk_describe(tx, start, length, (uct_cxl_rec_bulk_t*)(stage + 1));
    uct_cxl_tx_stage(stage, am_id, sizeof(uct_cxl_rec_bulk_t));
    stage->flags  = flags | UCT_CXL_REC_BULK;
    stage->length = length;
    uct_cxl_tx_stream(tx, coh, rec, stage);
}

#endif
