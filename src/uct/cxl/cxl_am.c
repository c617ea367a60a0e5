/*
 * Active messages over pool channels: send (short, short_iov, bcopy),
 * receive (progress), pending queue, peer liveness.
 *
 * Send: reserve room in the claimed channel, write the payload, write it
 * back, fence, store the sequence number, write back the header line.
 * Receive: invalidate the header line at the read position, accept the
 * record only if its sequence number is the expected one, invalidate and
 * deliver the payload in place, publish the consumer position.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cxl_iface.h"

#include <uct/base/uct_iov.inl>
#include <uct/base/uct_worker.h>
#include <ucs/arch/cpu.h>
#include <ucs/debug/log.h>
#include <string.h>

/* The receiver's block still belongs to the interface we connected to:
 * one cached line, cheap enough for every flush. */
int uct_cxl_tx_peer_open(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx)
{
    cxl_coh_invalidate(iface->coh, tx->peer, UCT_CXL_LINE);
    return (tx->peer->magic == UCT_CXL_BLOCK_MAGIC) &&
           (tx->peer->iface_id == tx->peer_id);
}

/* ... and its process is alive (pid check or lease: a system call, so
 * only for keepalive, error paths and teardown). */
int uct_cxl_tx_peer_alive(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx)
{
    return uct_cxl_tx_peer_open(iface, tx) &&
           cxlpool_owner_alive(iface->pool->cxlpool, tx->peer->owner_token);
}

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

int uct_cxl_tx_has_resources(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx,
                             uint64_t need)
{
    uint64_t size = tx->ring_mask + 1;

    if (tx->head + need - tx->cached_tail <= size) {
        return 1;
    }
    cxl_coh_invalidate(iface->coh, (const void*)&tx->chan->tail, UCT_CXL_LINE);
    tx->cached_tail = tx->chan->tail;
    return tx->head + need - tx->cached_tail <= size;
}

/* Room for a record of up to max_length payload bytes, plus the filler. */
static UCS_F_ALWAYS_INLINE uint64_t uct_cxl_tx_need(uct_cxl_tx_t *tx,
                                                    uint32_t max_length)
{
    uint64_t rec  = uct_cxl_rec_size(max_length);
    uint64_t left = (tx->ring_mask + 1) - (tx->head & tx->ring_mask);

    return (rec > left) ? rec + left : rec;
}

/* Any send, the largest included, would find room: what pending_add and
 * the pending dispatch promise. */
static int uct_cxl_tx_can_send(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx)
{
    return uct_cxl_tx_has_resources(iface, tx,
                                    uct_cxl_tx_need(tx, iface->seg_size)) &&
           ((tx->bulk == NULL) ||
            uct_cxl_bulk_has_room(iface, tx, iface->seg_size));
}

/* Test-only fault injection (UCX_CXL_TEST_SKIP_WRITEBACK=record): leave
 * out the write-back of record bodies, to prove that the non-coherent
 * emulator catches a missing flush. */
int uct_cxl_test_skip_record_wb = 0;

static UCS_F_ALWAYS_INLINE void uct_cxl_tx_publish(uct_cxl_tx_t *tx,
                                                   cxl_coh_mode_t coh,
                                                   uct_cxl_rec_t *rec,
                                                   uint64_t size)
{
    /* body (and header fields) first, then the sequence number */
    if (ucs_likely(!uct_cxl_test_skip_record_wb)) {
        cxl_coh_publish(coh, rec, size);
    }
    __atomic_store_n(&rec->seq, tx->seq, __ATOMIC_RELEASE);
    /* before the line is written back: the fence of the signal then waits
     * for this store only, not for a write-back in flight */
    uct_cxl_tx_signal(tx);
    cxl_coh_writeback(coh, rec, UCT_CXL_LINE);
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
 * written sees a body that is right either way.
 */
static UCS_F_ALWAYS_INLINE void
uct_cxl_tx_stream(uct_cxl_tx_t *tx, cxl_coh_mode_t coh, uct_cxl_rec_t *rec,
                  uct_cxl_rec_t *stage)
{
    uint64_t size = uct_cxl_rec_ring_size(stage);

    stage->seq = ~tx->seq;
    if (ucs_likely(!uct_cxl_test_skip_record_wb)) {
        cxl_coh_copy(coh, rec, stage, size);
    } else {
        memcpy(rec, stage, size);
    }
    cxl_coh_fence(coh);
    stage->seq = tx->seq;
    cxl_coh_copy(coh, rec, stage, UCT_CXL_LINE);
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
    stage->reserved2 = 0;
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

static UCS_F_ALWAYS_INLINE ucs_status_t
uct_cxl_ep_am_check(uct_cxl_ep_t *ep, uct_cxl_iface_t *iface,
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
    /*
     * Never write into a block its owner gave up: it may already belong to
     * a new interface, so the id counts, not just the magic.  In sw mode
     * the receiver's close is invisible to a cached copy, so the header
     * line is re-read from memory at least every peer_check_us; the
     * receiver frees its block only twice that long after its close.
     */
    if (iface->coh == CXL_COH_SW) {
        uct_cxl_tx_peer_refresh(iface, tx);
    }
    if (ucs_unlikely((tx->peer->magic != UCT_CXL_BLOCK_MAGIC) ||
                     (tx->peer->iface_id != tx->peer_id))) {
        tx->failed = 1;
        uct_cxl_ep_set_failed(ep);
        return UCS_ERR_CONNECTION_RESET;
    }
    return UCS_OK;
}

/* Fill in a record whose payload is written, publish it (and wake the peer). */
static UCS_F_ALWAYS_INLINE void
uct_cxl_ep_am_commit(uct_cxl_ep_t *ep, uct_cxl_iface_t *iface,
                     uct_cxl_rec_t *rec, uint8_t id, uint32_t length,
                     const char *title)
{
    rec->am_id  = id;
    rec->flags  = 0;
    rec->length = length;
    uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_SEND, id, rec + 1,
                       length, "TX: %s", title);
    uct_cxl_tx_publish(ep->tx, iface->coh, rec, uct_cxl_rec_size(length));
}

/* The same steps for the records of proxied operations (cxl_proxy.c). */
ucs_status_t uct_cxl_ep_send_check(uct_cxl_ep_t *ep, uint32_t max_length)
{
    return uct_cxl_ep_am_check(ep, uct_cxl_ep_iface(ep), max_length);
}

int uct_cxl_tx_room(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx,
                    uint32_t max_length)
{
    return uct_cxl_tx_has_resources(iface, tx, uct_cxl_tx_need(tx, max_length));
}

uct_cxl_rec_t *uct_cxl_tx_reserve_rec(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx,
                                      uint32_t max_length)
{
    return uct_cxl_tx_reserve(tx, iface->coh, max_length);
}

void uct_cxl_tx_commit_op(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx,
                          uct_cxl_rec_t *rec, uint32_t length)
{
    rec->am_id  = 0;
    rec->flags  = UCT_CXL_REC_OP;
    rec->length = length;
    uct_cxl_tx_publish(tx, iface->coh, rec, uct_cxl_rec_size(length));
}

ucs_status_t uct_cxl_ep_am_short(uct_ep_h tl_ep, uint8_t id, uint64_t header,
                                 const void *payload, unsigned length)
{
    uct_cxl_ep_t *ep       = ucs_derived_of(tl_ep, uct_cxl_ep_t);
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ep);
    uint32_t total         = sizeof(header) + length;
    uint64_t stage_buf[(UCT_CXL_REC_HDR + UCT_CXL_AM_MAX_SHORT) /
                       sizeof(uint64_t)] UCS_V_ALIGNED(UCT_CXL_LINE);
    uct_cxl_rec_t *rec;
    ucs_status_t status;

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_LENGTH(total, 0, UCT_CXL_AM_MAX_SHORT, "am_short");
    status = uct_cxl_ep_am_check(ep, iface, total);
    if (status != UCS_OK) {
        return status;
    }

    rec = uct_cxl_tx_reserve(ep->tx, iface->coh, total);
    if (iface->coh == CXL_COH_SW) {
        uct_cxl_rec_t *stage = (uct_cxl_rec_t*)stage_buf;

        memcpy(stage + 1, &header, sizeof(header));
        if (length > 0) {
            memcpy(UCS_PTR_BYTE_OFFSET(stage + 1, sizeof(header)), payload,
                   length);
        }
        uct_cxl_tx_stage(stage, id, total);
        uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_SEND, id,
                           stage + 1, total, "TX: AM_SHORT");
        uct_cxl_tx_stream(ep->tx, iface->coh, rec, stage);
        return UCS_OK;
    }
    memcpy(rec + 1, &header, sizeof(header));
    if (length > 0) { /* payload may be NULL then */
        memcpy(UCS_PTR_BYTE_OFFSET(rec + 1, sizeof(header)), payload, length);
    }
    uct_cxl_ep_am_commit(ep, iface, rec, id, total, "AM_SHORT");
    return UCS_OK;
}

ucs_status_t uct_cxl_ep_am_short_iov(uct_ep_h tl_ep, uint8_t id,
                                     const uct_iov_t *iov, size_t iovcnt)
{
    uct_cxl_ep_t *ep       = ucs_derived_of(tl_ep, uct_cxl_ep_t);
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ep);
    uint32_t total         = (uint32_t)uct_iov_total_length(iov, iovcnt);
    uint64_t stage_buf[(UCT_CXL_REC_HDR + UCT_CXL_AM_MAX_SHORT) /
                       sizeof(uint64_t)] UCS_V_ALIGNED(UCT_CXL_LINE);
    ucs_iov_iter_t iov_iter;
    uct_cxl_rec_t *rec;
    ucs_status_t status;

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_LENGTH(total, 0, UCT_CXL_AM_MAX_SHORT, "am_short_iov");
    status = uct_cxl_ep_am_check(ep, iface, total);
    if (status != UCS_OK) {
        return status;
    }

    rec = uct_cxl_tx_reserve(ep->tx, iface->coh, total);
    ucs_iov_iter_init(&iov_iter);
    if (iface->coh == CXL_COH_SW) {
        uct_cxl_rec_t *stage = (uct_cxl_rec_t*)stage_buf;

        uct_iov_to_buffer(iov, iovcnt, &iov_iter, stage + 1, SIZE_MAX);
        uct_cxl_tx_stage(stage, id, total);
        uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_SEND, id,
                           stage + 1, total, "TX: AM_SHORT_IOV");
        uct_cxl_tx_stream(ep->tx, iface->coh, rec, stage);
        return UCS_OK;
    }
    uct_iov_to_buffer(iov, iovcnt, &iov_iter, rec + 1, SIZE_MAX);
    uct_cxl_ep_am_commit(ep, iface, rec, id, total, "AM_SHORT_IOV");
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
 * sw mode, through the bulk ring: packed aside like the inline am_bcopy,
 * then the payload goes into the bulk ring with non-temporal stores and
 * the record that points at it is streamed; the record's fence orders
 * both (uct_cxl_tx_stream).
 */
static ssize_t
uct_cxl_ep_am_bcopy_bulk_sw(uct_cxl_ep_t *ep, uct_cxl_iface_t *iface,
                            uint8_t id, uct_pack_callback_t pack_cb, void *arg,
                            uint64_t start, void *payload)
{
    uct_cxl_rec_t *stage = iface->tx_bounce;
    uct_cxl_tx_t *tx     = ep->tx;
    uct_cxl_rec_bulk_t *desc;
    uct_cxl_rec_t *rec;
    size_t length;

    length = pack_cb(stage + 1, arg);
    UCT_CHECK_LENGTH(length, 0, iface->seg_size, "am_bcopy");
    rec = uct_cxl_tx_reserve(tx, iface->coh, UCT_CXL_BULK_MIN_LENGTH);
    uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_SEND, id, stage + 1,
                       length, "TX: AM_BCOPY");
    if (length <= UCT_CXL_BULK_MIN_LENGTH) {
        uct_cxl_tx_stage(stage, id, (uint32_t)length);
        uct_cxl_tx_stream(tx, iface->coh, rec, stage);
        return length;
    }

    if (ucs_likely(!uct_cxl_test_skip_record_wb)) {
        cxl_coh_copy(iface->coh, payload, stage + 1, length);
    } else {
        memcpy(payload, stage + 1, length);
    }
    desc = (uct_cxl_rec_bulk_t*)(stage + 1);
    uct_cxl_bulk_describe(tx, start, length, desc);
    uct_cxl_tx_stage(stage, id, sizeof(*desc));
    stage->flags  = UCT_CXL_REC_BULK;
    stage->length = (uint32_t)length;
    uct_cxl_tx_stream(tx, iface->coh, rec, stage);
    return length;
}

/*
 * am_bcopy through the bulk ring: pack into the own ring, then publish a
 * record that points at it.  A short payload is copied into the record
 * instead (one place for the receiver to read, no bulk space held).
 */
static ssize_t uct_cxl_ep_am_bcopy_bulk(uct_cxl_ep_t *ep, uct_cxl_iface_t *iface,
                                        uint8_t id, uct_pack_callback_t pack_cb,
                                        void *arg)
{
    uct_cxl_tx_t *tx = ep->tx;
    uct_cxl_rec_bulk_t *desc;
    uct_cxl_rec_t *rec;
    ucs_status_t status;
    uint64_t start;
    size_t length;
    void *payload;

    status = uct_cxl_ep_am_check(ep, iface, UCT_CXL_BULK_MIN_LENGTH);
    if (status != UCS_OK) {
        return status;
    }
    if (ucs_unlikely(!uct_cxl_bulk_has_room(iface, tx, iface->seg_size))) {
        return UCS_ERR_NO_RESOURCE;
    }

    start   = uct_cxl_bulk_start(tx, iface->seg_size);
    payload = tx->bulk + (start & tx->bulk_mask);
    if (iface->coh == CXL_COH_SW) {
        return uct_cxl_ep_am_bcopy_bulk_sw(ep, iface, id, pack_cb, arg,
                                           start, payload);
    }
    length  = pack_cb(payload, arg);
    UCT_CHECK_LENGTH(length, 0, iface->seg_size, "am_bcopy");

    rec = uct_cxl_tx_reserve(tx, iface->coh, UCT_CXL_BULK_MIN_LENGTH);
    if (length <= UCT_CXL_BULK_MIN_LENGTH) {
        memcpy(rec + 1, payload, length);
        uct_cxl_ep_am_commit(ep, iface, rec, id, (uint32_t)length, "AM_BCOPY");
        return length;
    }

    /* the payload is ordered before the record by the record's publish */
    if (ucs_likely(!uct_cxl_test_skip_record_wb)) {
        cxl_coh_writeback(iface->coh, payload, length);
    }
    desc = (uct_cxl_rec_bulk_t*)(rec + 1);
    uct_cxl_bulk_describe(tx, start, length, desc);
    rec->am_id  = id;
    rec->flags  = UCT_CXL_REC_BULK;
    rec->length = (uint32_t)length;
    uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_SEND, id, payload,
                       length, "TX: AM_BCOPY (bulk)");
    uct_cxl_tx_publish(tx, iface->coh, rec,
                       uct_cxl_rec_size(sizeof(uct_cxl_rec_bulk_t)));
    return length;
}

ssize_t uct_cxl_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id,
                            uct_pack_callback_t pack_cb, void *arg,
                            unsigned flags)
{
    uct_cxl_ep_t *ep       = ucs_derived_of(tl_ep, uct_cxl_ep_t);
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ep);
    uct_cxl_rec_t *rec;
    ucs_status_t status;
    size_t length;

    UCT_CHECK_AM_ID(id);
    if (flags & UCT_SEND_FLAG_PEER_CHECK) {
        uct_cxl_ep_check(tl_ep, 0, NULL);
    }
    if (ep->tx->bulk != NULL) {
        return uct_cxl_ep_am_bcopy_bulk(ep, iface, id, pack_cb, arg);
    }

    status = uct_cxl_ep_am_check(ep, iface, (uint32_t)iface->seg_size);
    if (status != UCS_OK) {
        return status;
    }

    /* room for a full segment is reserved; the record takes what is packed */
    rec = uct_cxl_tx_reserve(ep->tx, iface->coh, (uint32_t)iface->seg_size);
    if (iface->coh == CXL_COH_SW) {
        /* packed aside, then streamed into the ring */
        length = pack_cb(iface->tx_bounce + 1, arg);
        UCT_CHECK_LENGTH(length, 0, iface->seg_size, "am_bcopy");
        uct_cxl_tx_stage(iface->tx_bounce, id, (uint32_t)length);
        uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_SEND, id,
                           iface->tx_bounce + 1, length, "TX: AM_BCOPY");
        uct_cxl_tx_stream(ep->tx, iface->coh, rec, iface->tx_bounce);
    } else {
        length = pack_cb(rec + 1, arg);
        UCT_CHECK_LENGTH(length, 0, iface->seg_size, "am_bcopy");
        uct_cxl_ep_am_commit(ep, iface, rec, id, (uint32_t)length, "AM_BCOPY");
    }
    /* a pair that sends large messages gets the depth of a bulk ring */
    if (ucs_unlikely(length > UCT_CXL_BULK_MIN_LENGTH)) {
        uct_cxl_bulk_attach(iface, ep->tx);
    }
    return length;
}

/*
 * A bulk record may point only into the pool's heap, at a whole message:
 * its sender is a peer, and the receiver dereferences what it says.
 */
static int uct_cxl_rx_bulk_valid(uct_cxl_iface_t *iface,
                                 const uct_cxl_rec_t *rec)
{
    const uct_cxl_rec_bulk_t *desc = (const uct_cxl_rec_bulk_t*)(rec + 1);
    uint64_t heap = iface->pool->heap_offset, size = iface->pool->size;

    return (rec->length <= UCT_CXL_BULK_MAX_LENGTH) &&
           (desc->offset >= heap) && (desc->offset <= size) &&
           (rec->length <= size - desc->offset);
}

/*
 * The rest of a record whose first line was just loaded with its sequence
 * number: that load fetched the line from memory after its invalidate, and
 * the sender wrote the line's other words back before the sequence number
 * (uct_cxl_tx_publish; uct_cxl_tx_stream writes them the same in both of
 * its writes), so only the lines after the first are fetched again.
 */
static UCS_F_ALWAYS_INLINE void
uct_cxl_rx_fetch_body(uct_cxl_iface_t *iface, uct_cxl_rec_t *rec, uint64_t size)
{
    if (size > UCT_CXL_LINE) {
        cxl_coh_invalidate(iface->coh, UCS_PTR_BYTE_OFFSET(rec, UCT_CXL_LINE),
                           size - UCT_CXL_LINE);
    }
}

/* Deliver the records of one channel; returns how many were delivered. */
static unsigned uct_cxl_iface_poll_chan(uct_cxl_iface_t *iface, unsigned index,
                                        unsigned budget)
{
    uct_cxl_chan_ctl_t *chan = uct_cxl_block_chan(iface->block, index);
    uct_cxl_rx_chan_t *rx    = &iface->rx[index];
    uint64_t mask            = iface->block->ring_size - 1;
    uint8_t *ring            = uct_cxl_chan_ring(chan);
    unsigned count           = 0;
    const uct_cxl_rec_bulk_t *desc;
    uct_cxl_rec_t *rec;
    uint64_t size;
    void *data;

    while (count < budget) {
        rec = (uct_cxl_rec_t*)(ring + (rx->pos & mask));
        if (!rx->head_fresh) {
            cxl_coh_invalidate(iface->coh, rec, UCT_CXL_LINE);
        }
        rx->head_fresh = 0;
        if (__atomic_load_n(&rec->seq, __ATOMIC_ACQUIRE) != rx->seq) {
            break;
        }

        size = uct_cxl_rec_ring_size(rec);
        if (ucs_unlikely((size > mask + 1 - (rx->pos & mask)) ||
                         (rec->am_id >= UCT_AM_ID_MAX) ||
                         ((rec->flags & UCT_CXL_REC_BULK) &&
                          !uct_cxl_rx_bulk_valid(iface, rec)))) {
            ucs_error("cxl: corrupt record in channel %u at %" PRIu64
                      " (length %u, am_id %u, flags 0x%x); channel stopped",
                      index, rx->pos, rec->length, rec->am_id, rec->flags);
            rx->seq--; /* never matches again */
            break;
        }

        if (rec->flags & UCT_CXL_REC_BULK) {
            desc = (const uct_cxl_rec_bulk_t*)(rec + 1);
            data = iface->pool->base + desc->offset;
            cxl_coh_invalidate(iface->coh, data, rec->length);
            uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_RECV,
                               rec->am_id, data, rec->length, "RX: AM (bulk)");
            rx->bulk_tail = desc->bulk_end;
            uct_iface_invoke_am(&iface->super, rec->am_id, data, rec->length,
                                0);
            ++count;
        } else if (rec->flags & UCT_CXL_REC_OP) {
            uct_cxl_rx_fetch_body(iface, rec, size);
            uct_cxl_proxy_handle(iface, index, rec + 1, rec->length);
            ++count;
        } else if (!(rec->flags & UCT_CXL_REC_PAD)) {
            uct_cxl_rx_fetch_body(iface, rec, size);
            uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_RECV,
                               rec->am_id, rec + 1, rec->length, "RX: AM");
            /* delivered in place: the data is valid only inside the call */
            uct_iface_invoke_am(&iface->super, rec->am_id, rec + 1,
                                rec->length, 0);
            ++count;
        }
        rx->pos += size;
        rx->seq++;
    }

    if (rx->pos != rx->published) {
        /* bulk_tail first: a sender that sees the new tail must not free
         * bulk space by an older one (both only ever grow) */
        chan->bulk_tail = rx->bulk_tail;
        chan->tail      = rx->pos;
        rx->published   = rx->pos;
        cxl_coh_writeback(iface->coh, (const void*)&chan->tail, UCT_CXL_LINE);
    }
    return count;
}

static ucs_arbiter_cb_result_t
uct_cxl_ep_process_pending(ucs_arbiter_t *arbiter, ucs_arbiter_group_t *group,
                           ucs_arbiter_elem_t *elem, void *arg)
{
    uct_cxl_ep_t *ep       = ucs_container_of(group, uct_cxl_ep_t, arb_group);
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ep);
    uct_pending_req_t *req = ucs_container_of(elem, uct_pending_req_t, priv);
    unsigned *count        = arg;
    ucs_status_t status;

    if (!ep->tx->failed &&
        (uct_cxl_ep_held(ep) || !uct_cxl_tx_can_send(iface, ep->tx))) {
        return UCS_ARBITER_CB_RESULT_RESCHED_GROUP;
    }

    ep->in_pending = 1;
    status         = req->func(req);
    ep->in_pending = 0;
    if (status == UCS_OK) {
        (*count)++;
        return UCS_ARBITER_CB_RESULT_REMOVE_ELEM;
    } else if (status == UCS_INPROGRESS) {
        (*count)++;
        return UCS_ARBITER_CB_RESULT_NEXT_GROUP;
    }
    return UCS_ARBITER_CB_RESULT_RESCHED_GROUP;
}

/* Grow the polled ranges to the channels senders claimed: all claim lines
 * (contiguous) in one invalidate. */
void uct_cxl_iface_poll_claims(uct_cxl_iface_t *iface)
{
    uct_cxl_block_claim_t *claims = uct_cxl_block_claims(iface->block, 0);
    unsigned host;

    cxl_coh_invalidate(iface->coh, claims,
                       iface->num_hosts * sizeof(*claims));
    for (host = 0; host < iface->num_hosts; ++host) {
        iface->active[host] = ucs_min(claims[host].num_claimed,
                                      iface->per_host);
    }
}

/*
 * sw mode: the record line at the read position of every polled channel,
 * invalidated together (and their loads started), so that looking at n
 * channels costs about one memory round trip instead of n;
 * uct_cxl_iface_poll_chan then looks at them without invalidating again.
 */
static void uct_cxl_iface_fetch_heads(uct_cxl_iface_t *iface)
{
    uint64_t mask = iface->block->ring_size - 1;
    const void *lines[UCT_CXL_POLL_BATCH];
    uct_cxl_rx_chan_t *rxs[UCT_CXL_POLL_BATCH];
    unsigned host, i, j, n = 0;
    uct_cxl_rx_chan_t *rx;
    unsigned idx;

    for (host = 0; host < iface->num_hosts; ++host) {
        for (i = 0; i < iface->active[host]; ++i) {
            idx = host * iface->per_host + i;
            rx  = &iface->rx[idx];
            if (rx->head_fresh) {
                continue;
            }
            lines[n] = uct_cxl_chan_ring(uct_cxl_block_chan(iface->block, idx)) +
                       (rx->pos & mask);
            rxs[n++] = rx;
            if (n == UCT_CXL_POLL_BATCH) {
                cxl_coh_invalidate_lines(iface->coh, lines, n);
                for (j = 0; j < n; ++j) {
                    rxs[j]->head_fresh = 1;
                }
                n = 0;
            }
        }
    }
    if (n > 0) {
        cxl_coh_invalidate_lines(iface->coh, lines, n);
        for (j = 0; j < n; ++j) {
            rxs[j]->head_fresh = 1;
        }
    }
}

unsigned uct_cxl_iface_progress(uct_iface_h tl_iface)
{
    uct_cxl_iface_t *iface = ucs_derived_of(tl_iface, uct_cxl_iface_t);
    unsigned count = 0, host, i, first;

    if (ucs_unlikely(iface->block->armed)) {
        iface->block->armed = 0; /* awake: senders need not signal */
        cxl_coh_writeback(iface->coh, iface->block, UCT_CXL_LINE);
    }

    /* senders raise num_claimed once per pair of interfaces: look every
     * UCT_CXL_CLAIM_POLL calls (and before sleeping, uct_cxl_iface_has_rx) */
    if (ucs_unlikely(--iface->claim_poll == 0)) {
        iface->claim_poll = UCT_CXL_CLAIM_POLL;
        uct_cxl_iface_poll_claims(iface);
    }

    if (iface->coh == CXL_COH_SW) {
        uct_cxl_iface_fetch_heads(iface);
    }
    for (host = 0; host < iface->num_hosts; ++host) {
        first = host * iface->per_host;
        for (i = 0; i < iface->active[host]; ++i) {
            count += uct_cxl_iface_poll_chan(iface, first + i, iface->max_poll);
        }
    }

    if (ucs_unlikely(iface->proxy_busy)) {
        count += uct_cxl_proxy_progress(iface);
    }
    if (ucs_unlikely(!ucs_list_is_empty(&iface->bulk_retired))) {
        count += uct_cxl_bulk_progress(iface);
    }

    if (!ucs_arbiter_is_empty(&iface->arbiter)) {
        ucs_arbiter_dispatch(&iface->arbiter, 1, uct_cxl_ep_process_pending,
                             &count);
    }
    return count;
}

ucs_status_t uct_cxl_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req,
                                    unsigned flags)
{
    uct_cxl_ep_t *ep       = ucs_derived_of(tl_ep, uct_cxl_ep_t);
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ep);

    if (!ep->failed && !ep->tx->failed &&
        ucs_arbiter_group_is_empty(&ep->arb_group) &&
        !uct_cxl_ep_held(ep) && uct_cxl_tx_can_send(iface, ep->tx)) {
        return UCS_ERR_BUSY;
    }

    UCS_STATIC_ASSERT(sizeof(uct_pending_req_priv_arb_t) <=
                      UCT_PENDING_REQ_PRIV_LEN);
    uct_pending_req_arb_group_push(&ep->arb_group, req);
    ucs_arbiter_group_schedule(&iface->arbiter, &ep->arb_group);
    return UCS_OK;
}

static ucs_arbiter_cb_result_t
uct_cxl_ep_purge_cb(ucs_arbiter_t *arbiter, ucs_arbiter_group_t *group,
                    ucs_arbiter_elem_t *elem, void *arg)
{
    uct_pending_req_t *req   = ucs_container_of(elem, uct_pending_req_t, priv);
    uct_purge_cb_args_t *cba = arg;

    if (cba->cb != NULL) {
        cba->cb(req, cba->arg);
    } else {
        ucs_debug("cxl: ep %p: purged pending request %p",
                  ucs_container_of(group, uct_cxl_ep_t, arb_group), req);
    }
    return UCS_ARBITER_CB_RESULT_REMOVE_ELEM;
}

void uct_cxl_ep_pending_purge(uct_ep_h tl_ep, uct_pending_purge_callback_t cb,
                              void *arg)
{
    uct_cxl_ep_t *ep       = ucs_derived_of(tl_ep, uct_cxl_ep_t);
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ep);
    uct_purge_cb_args_t args = {cb, arg};

    ucs_arbiter_group_purge(&iface->arbiter, &ep->arb_group,
                            uct_cxl_ep_purge_cb, &args);
}

static unsigned uct_cxl_ep_err_progress(void *arg)
{
    uct_cxl_ep_t *ep       = arg;
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ep);

    ep->err_cb_id = UCS_CALLBACKQ_ID_NULL;
    uct_cxl_proxy_ep_fail(ep, UCS_ERR_ENDPOINT_TIMEOUT);
    uct_iface_handle_ep_err(&iface->super.super, &ep->super.super,
                            UCS_ERR_ENDPOINT_TIMEOUT);
    return 1;
}

/* Report the peer's failure once, from progress (never from inside a call). */
void uct_cxl_ep_set_failed(uct_cxl_ep_t *ep)
{
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ep);

    if (ep->failed) {
        return;
    }
    ep->failed = 1;
    ucs_diag("cxl: ep %p: peer interface 0x%" PRIx64 " is gone", ep,
             ep->tx->peer_id);
    ep->err_cb_id = ucs_callbackq_add_safe(&iface->super.worker->super.progress_q,
                                           uct_cxl_ep_err_progress, ep,
                                           UCS_CALLBACKQ_FLAG_ONESHOT);
}

ucs_status_t uct_cxl_ep_check(uct_ep_h tl_ep, unsigned flags,
                              uct_completion_t *comp)
{
    uct_cxl_ep_t *ep       = ucs_derived_of(tl_ep, uct_cxl_ep_t);
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ep);

    UCT_EP_KEEPALIVE_CHECK_PARAM(flags, comp);
    if (!ep->failed &&
        (ep->tx->failed || !uct_cxl_tx_peer_alive(iface, ep->tx))) {
        ep->tx->failed = 1;
        uct_cxl_ep_set_failed(ep);
    }
    return UCS_OK;
}
