/*
 * Active messages over the channels (cxl_chan.h): send (short, short_iov,
 * bcopy, inline or through the bulk ring), delivery of the records the
 * channel layer hands up, pending queue, peer liveness.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cxl_chan.h"

#include <uct/base/uct_iov.inl>
#include <uct/base/uct_worker.h>
#include <ucs/arch/cpu.h>
#include <ucs/debug/log.h>
#include <string.h>
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
    status = uct_cxl_chan_check(ep, iface, total);
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
    status = uct_cxl_chan_check(ep, iface, total);
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
    uct_cxl_tx_stream_bulk(tx, iface->coh, rec, stage, start, (uint32_t)length,
                           id, 0);
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
    uct_cxl_rec_t *rec;
    ucs_status_t status;
    uint64_t start;
    size_t length;
    void *payload;

    status = uct_cxl_chan_check(ep, iface, UCT_CXL_BULK_MIN_LENGTH);
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

    uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_SEND, id, payload,
                       length, "TX: AM_BCOPY (bulk)");
    uct_cxl_tx_publish_bulk(tx, iface->coh, rec, start, payload,
                            (uint32_t)length, id, 0);
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

    status = uct_cxl_chan_check(ep, iface, (uint32_t)iface->seg_size);
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

/* An active message the channel layer found: the data is valid only
 * inside the call (no UCT_CB_PARAM_FLAG_DESC), UCP copies what it keeps. */
void uct_cxl_am_deliver(uct_cxl_iface_t *iface, uint8_t am_id, void *data,
                        uint32_t length)
{
    uct_iface_trace_am(&iface->super, UCT_AM_TRACE_TYPE_RECV, am_id, data,
                       length, "RX: AM");
    uct_iface_invoke_am(&iface->super, am_id, data, length, 0);
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

/* Let queued requests send while their channel has room. */
unsigned uct_cxl_am_dispatch_pending(uct_cxl_iface_t *iface)
{
    unsigned count = 0;

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
