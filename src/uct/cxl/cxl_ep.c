/*
 * Endpoint and RMA of the "cxl" transport: plain loads and stores on pool
 * memory.  Every write is followed by a write-back and every read preceded
 * by an invalidate; both cost nothing in hardware-coherent mode.  All
 * operations complete before they return, so flush only has to order them.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cxl_iface.h"

#include <uct/base/uct_iov.inl>
#include <uct/base/uct_worker.h>
#include <ucs/debug/log.h>
#include <ucs/arch/cpu.h>
#include <ucs/sys/math.h>
#include <string.h>
#include <unistd.h>

/*
 * Taking over from a dead owner: the producer line holds its position as
 * of its last store (every half ring, uct_cxl_tx_publish), and its records
 * after that are in the ring, each with the next sequence number.  Walk
 * them as the receiver would, to where the owner stopped: less than a lap,
 * so no position on the way was written twice since.
 */
static void uct_cxl_tx_walk(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx)
{
    uint64_t size   = tx->ring_mask + 1;
    uint64_t walked = 0;
    uint64_t rsize;
    uct_cxl_rec_t *rec;

    while (walked < size) {
        rec = (uct_cxl_rec_t*)(tx->ring + (tx->head & tx->ring_mask));
        cxl_coh_invalidate(iface->coh, rec, UCT_CXL_LINE);
        if (__atomic_load_n(&rec->seq, __ATOMIC_ACQUIRE) != tx->seq) {
            break;
        }
        rsize = uct_cxl_rec_size(rec->length);
        if (rsize > size - (tx->head & tx->ring_mask)) {
            break; /* the receiver stops the channel there */
        }
        tx->head += rsize;
        tx->seq++;
        walked   += rsize;
    }
}

/*
 * Claim a free channel in the own host's range of the peer's block.  The
 * claim is the only read-modify-write of the protocol, happens once per
 * pair of interfaces, and only processes of one host touch a range, so
 * the CAS never crosses hosts.  A new owner continues where the previous
 * one stopped (head and seq of the producer line, and after a dead owner
 * its records beyond that): sequence numbers only move forward.
 */
static ucs_status_t uct_cxl_tx_claim(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx)
{
    uint64_t token           = cxlpool_token(iface->pool->cxlpool);
    uct_cxl_block_hdr_t *hdr = tx->peer;
    unsigned per_host        = uct_cxl_block_per_host(hdr);
    unsigned host            = (hdr->num_hosts == 1) ? 0 : iface->host_index;
    uct_cxl_block_claim_t *claims;
    uct_cxl_chan_ctl_t *chan = NULL;
    uint32_t claimed;
    uint64_t expected        = 0;
    unsigned i;

    if (host >= hdr->num_hosts) {
        ucs_error("cxl: this process writes host range %u of pool %s, but "
                  "interface 0x%" PRIx64 " has only %u ranges", host,
                  iface->pool->path, tx->peer_id, hdr->num_hosts);
        return UCS_ERR_UNREACHABLE;
    }

    claims = uct_cxl_block_claims(hdr, host);
    for (i = 0; i < per_host; ++i) {
        chan     = uct_cxl_block_chan(hdr, host * per_host + i);
        expected = 0;
        cxl_coh_invalidate(iface->coh, chan, 2 * UCT_CXL_LINE);
        if ((chan->owner != 0) &&
            !cxlpool_owner_alive(iface->pool->cxlpool, chan->owner)) {
            /* its owner died: take over at its last published record */
            expected = chan->owner;
        }
        if (__atomic_compare_exchange_n(&chan->owner, &expected, token, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            break;
        }
    }

    if (i == per_host) {
        ucs_error("cxl: all %u receive channels of host range %u of interface "
                  "0x%" PRIx64 " are in use; raise UCX_CXL_NUM_CHANNELS on the "
                  "receiver", per_host, host, tx->peer_id);
        return UCS_ERR_NO_RESOURCE;
    }

    /* make the receiver poll up to this channel (CAS-max, claim time only) */
    cxl_coh_invalidate(iface->coh, claims, UCT_CXL_LINE);
    claimed = claims->num_claimed;
    while ((claimed < i + 1) &&
           !__atomic_compare_exchange_n(&claims->num_claimed, &claimed, i + 1,
                                        0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
    }
    cxl_coh_writeback(iface->coh, claims, UCT_CXL_LINE);

    tx->chan        = chan;
    tx->ring        = uct_cxl_chan_ring(chan);
    tx->ring_mask   = hdr->ring_size - 1;
    tx->head        = chan->head;
    tx->seq         = (uint32_t)chan->seq; /* set by the receiver at open */
    tx->cached_tail = chan->tail;
    if (expected != 0) {
        uct_cxl_tx_walk(iface, tx); /* its owner died: find where it stopped */
    }
    uct_cxl_tx_store_position(tx, iface->coh);
    cxl_coh_fence(iface->coh);
    ucs_debug("cxl: iface %p claimed channel %u of iface 0x%" PRIx64
              " (head %" PRIu64 " seq %u)", iface, host * per_host + i,
              tx->peer_id, tx->head, tx->seq);
    return UCS_OK;
}

/* Hand the channel back: the next owner continues at head/seq. */
static void uct_cxl_tx_release(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx)
{
    uct_cxl_tx_store_position(tx, iface->coh);
    cxl_coh_fence(iface->coh);
    __atomic_store_n(&tx->chan->owner, 0, __ATOMIC_RELEASE);
    cxl_coh_publish(iface->coh, tx->chan, UCT_CXL_LINE);
}

/* Check the peer block named by addr and map its header, or fail. */
static ucs_status_t uct_cxl_peer_block(uct_cxl_iface_t *iface,
                                       const uct_cxl_iface_addr_t *addr,
                                       uct_cxl_block_hdr_t **peer_p)
{
    uct_cxl_block_hdr_t *peer;

    /* the block must lie in our pool's heap and carry the peer's id */
    if ((addr->block_offset < iface->pool->heap_offset) ||
        (addr->block_offset > iface->pool->size - sizeof(*peer))) {
        ucs_error("cxl: peer block offset 0x%" PRIx64 " is outside pool %s",
                  addr->block_offset, iface->pool->path);
        return UCS_ERR_INVALID_ADDR;
    }
    peer = (uct_cxl_block_hdr_t*)(iface->pool->base + addr->block_offset);
    cxl_coh_invalidate(iface->coh, peer, sizeof(*peer));
    if ((peer->magic != UCT_CXL_BLOCK_MAGIC) || (peer->iface_id != addr->id) ||
        (peer->ring_size == 0) || (peer->ring_size & (peer->ring_size - 1)) ||
        (peer->num_hosts == 0) || (peer->num_hosts > UCT_CXL_MAX_HOSTS) ||
        (peer->num_channels < peer->num_hosts) ||
        (addr->block_offset + uct_cxl_block_size(peer->num_hosts,
                                                 peer->num_channels,
                                                 peer->chan_stride) >
         iface->pool->size)) {
        ucs_diag("cxl: no open interface 0x%" PRIx64 " at offset 0x%" PRIx64
                 " of pool %s", addr->id, addr->block_offset, iface->pool->path);
        return UCS_ERR_UNREACHABLE;
    }
    *peer_p = peer;
    return UCS_OK;
}

/* The channel to the interface at addr: shared, or claimed now. */
ucs_status_t uct_cxl_tx_get(uct_cxl_iface_t *iface,
                            const uct_cxl_iface_addr_t *addr,
                            uct_cxl_tx_t **tx_p)
{
    uct_cxl_block_hdr_t *peer;
    ucs_status_t status;
    uct_cxl_tx_t *tx;

    ucs_list_for_each(tx, &iface->tx_list, list) {
        /* a failed channel is never reused: a new interface may sit at
         * the same offset, and it gets a channel of its own */
        if ((tx->block_offset == addr->block_offset) &&
            (tx->peer_id == addr->id) && !tx->failed) {
            ++tx->refcount;
            *tx_p = tx;
            return UCS_OK;
        }
    }

    status = uct_cxl_peer_block(iface, addr, &peer);
    if (status != UCS_OK) {
        return status;
    }

    tx = ucs_calloc(1, sizeof(*tx), "cxl_tx");
    if (tx == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    tx->refcount     = 1;
    tx->block_offset = addr->block_offset;
    tx->peer_id      = addr->id;
    tx->peer         = peer;
    tx->signal_fd    = -1;
    /* sw: the first send re-reads the header, then every peer_check_us */
    tx->check_interval = ucs_time_from_usec(peer->peer_check_us);
    tx->check_due      = 0;
    status           = uct_cxl_tx_claim(iface, tx);
    if (status != UCS_OK) {
        ucs_free(tx);
        return status;
    }
    ucs_list_add_tail(&iface->tx_list, &tx->list);
    *tx_p = tx;
    return UCS_OK;
}

void uct_cxl_tx_put(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx)
{
    if (--tx->refcount > 0) {
        return;
    }
    ucs_list_del(&tx->list);
    if (tx->signal_fd >= 0) {
        close(tx->signal_fd);
    }
    if (!tx->failed && uct_cxl_tx_peer_alive(iface, tx)) {
        uct_cxl_tx_release(iface, tx);
    }
    ucs_free(tx);
}

static UCS_CLASS_INIT_FUNC(uct_cxl_ep_t, const uct_ep_params_t *params)
{
    uct_cxl_iface_t *iface = ucs_derived_of(params->iface, uct_cxl_iface_t);
    ucs_status_t status;

    UCT_EP_PARAMS_CHECK_DEV_IFACE_ADDRS(params);
    UCS_CLASS_CALL_SUPER_INIT(uct_base_ep_t, &iface->super);

    self->failed     = 0;
    self->err_cb_id  = UCS_CALLBACKQ_ID_NULL;
    self->in_pending = 0;
    self->outstanding = 0;
    self->stream.data = NULL;
    ucs_list_head_init(&self->flush_list);
    ucs_arbiter_group_init(&self->arb_group);

    status = uct_cxl_tx_get(iface,
                            (const uct_cxl_iface_addr_t*)params->iface_addr,
                            &self->tx);
    if (status != UCS_OK) {
        return status;
    }
    ucs_list_add_tail(&iface->ep_list, &self->list);
    return UCS_OK;
}

static UCS_CLASS_CLEANUP_FUNC(uct_cxl_ep_t)
{
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(self);

    ucs_list_del(&self->list);
    uct_cxl_proxy_ep_cleanup(self);
    uct_cxl_ep_pending_purge(&self->super.super, NULL, NULL);
    if (self->err_cb_id != UCS_CALLBACKQ_ID_NULL) {
        ucs_callbackq_remove_safe(&iface->super.worker->super.progress_q,
                                  self->err_cb_id);
    }
    uct_cxl_tx_put(iface, self->tx);
}

UCS_CLASS_DEFINE(uct_cxl_ep_t, uct_base_ep_t);
UCS_CLASS_DEFINE_NEW_FUNC(uct_cxl_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DEFINE_DELETE_FUNC(uct_cxl_ep_t, uct_ep_t);

#define UCT_CXL_RKEY_ADDR(_ptr, _rkey, _raddr, _len, _op) \
    do { \
        (_ptr) = uct_cxl_rkey_addr(_rkey, _raddr, _len); \
        if (ucs_unlikely((_ptr) == NULL)) { \
            ucs_error("cxl: " _op " of %zu bytes at 0x%" PRIx64 " lies " \
                      "outside its remote key", (size_t)(_len), \
                      (uint64_t)(_raddr)); \
            return UCS_ERR_INVALID_ADDR; \
        } \
    } while (0)

ucs_status_t uct_cxl_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                  unsigned length, uint64_t remote_addr,
                                  uct_rkey_t rkey)
{
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ucs_derived_of(tl_ep, uct_cxl_ep_t));
    void *dst;

    if (length == 0) {
        return UCS_OK; /* UCT allows an invalid key here */
    }
    if (ucs_unlikely(uct_cxl_rkey_proxied(rkey))) {
        return uct_cxl_proxy_put(ucs_derived_of(tl_ep, uct_cxl_ep_t),
                                 (const uct_cxl_rkey_t*)rkey, buffer, length,
                                 remote_addr);
    }
    UCT_CXL_RKEY_ADDR(dst, rkey, remote_addr, length, "put_short");
    memcpy(dst, buffer, length);
    cxl_coh_writeback(iface->coh, dst, length);
    return UCS_OK;
}

ssize_t uct_cxl_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb,
                             void *arg, uint64_t remote_addr, uct_rkey_t rkey)
{
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ucs_derived_of(tl_ep, uct_cxl_ep_t));
    const uct_cxl_rkey_t *key = (const uct_cxl_rkey_t*)rkey;
    ucs_status_t status;
    size_t length, room;
    void *dst;

    /*
     * The length is known only after packing.  With room for the largest
     * put_bcopy, pack in place; nearer to the end of the key, pack into a
     * bounce buffer and copy only what fits, so nothing lands past the key.
     */
    if (rkey == UCT_INVALID_RKEY) {
        dst  = NULL; /* UCT's zero-length put: only an empty pack is fine */
        room = 0;
    } else if (ucs_unlikely(uct_cxl_rkey_proxied(rkey))) {
        dst  = NULL; /* packed here, then sent to the owner */
        room = 0;
    } else {
        UCT_CXL_RKEY_ADDR(dst, rkey, remote_addr, 1, "put_bcopy");
        room = key->hi - (uintptr_t)dst;
    }
    if (ucs_likely(room >= UCT_CXL_PUT_MAX_BCOPY)) {
        length = pack_cb(dst, arg);
    } else {
        if (iface->bounce == NULL) {
            iface->bounce = ucs_malloc(UCT_CXL_PUT_MAX_BCOPY, "cxl_bounce");
            if (iface->bounce == NULL) {
                return UCS_ERR_NO_MEMORY;
            }
        }
        length = pack_cb(iface->bounce, arg);
        if (length == 0) {
            return 0;
        }
        if (uct_cxl_rkey_proxied(rkey)) {
            status = uct_cxl_proxy_put(ucs_derived_of(tl_ep, uct_cxl_ep_t), key,
                                       iface->bounce, length, remote_addr);
            return (status == UCS_OK) ? (ssize_t)length : status;
        }
        if (length > room) {
            ucs_error("cxl: put_bcopy of %zu bytes at 0x%" PRIx64 " passes the "
                      "end of its remote key (%zu bytes left)", length,
                      remote_addr, room);
            return UCS_ERR_INVALID_ADDR;
        }
        memcpy(dst, iface->bounce, length);
    }
    cxl_coh_writeback(iface->coh, dst, length);
    return length;
}

/* Copy between local iov elements and one contiguous pool range. */
static void uct_cxl_iov_copy(const uct_iov_t *iov, size_t iovcnt, void *pool_ptr,
                             int to_pool)
{
    uint8_t *p = pool_ptr;
    size_t i, j;

    for (i = 0; i < iovcnt; ++i) {
        for (j = 0; j < iov[i].count; ++j) {
            uint8_t *buf = (uint8_t*)iov[i].buffer + j * iov[i].stride;
            if (to_pool) {
                memcpy(p, buf, iov[i].length);
            } else {
                memcpy(buf, p, iov[i].length);
            }
            p += iov[i].length;
        }
    }
}

ucs_status_t uct_cxl_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                  size_t iovcnt, uint64_t remote_addr,
                                  uct_rkey_t rkey, uct_completion_t *comp)
{
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ucs_derived_of(tl_ep, uct_cxl_ep_t));
    size_t length          = uct_iov_total_length(iov, iovcnt);
    void *dst;

    UCT_CHECK_PARAM(iovcnt <= UCT_CXL_MAX_IOV, "iovcnt %zu > %d", iovcnt,
                    UCT_CXL_MAX_IOV);
    if (length == 0) {
        return UCS_OK;
    }
    if (ucs_unlikely(uct_cxl_rkey_proxied(rkey))) {
        return uct_cxl_proxy_put_iov(ucs_derived_of(tl_ep, uct_cxl_ep_t),
                                     (const uct_cxl_rkey_t*)rkey, iov, iovcnt,
                                     length, remote_addr);
    }
    UCT_CXL_RKEY_ADDR(dst, rkey, remote_addr, length, "put_zcopy");
    uct_cxl_iov_copy(iov, iovcnt, dst, 1);
    cxl_coh_writeback(iface->coh, dst, length);
    return UCS_OK;
}

ucs_status_t uct_cxl_ep_get_short(uct_ep_h tl_ep, void *buffer, unsigned length,
                                  uint64_t remote_addr, uct_rkey_t rkey)
{
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ucs_derived_of(tl_ep, uct_cxl_ep_t));
    void *src;

    if (length == 0) {
        return UCS_OK;
    }
    if (ucs_unlikely(uct_cxl_rkey_proxied(rkey))) {
        /*
         * get_short completes on return, but here only the owner's progress
         * can produce the data, and waiting for it would run callbacks
         * inside this call.  UCP uses get_short only for memory-type
         * copies, never on host memory of a peer.
         */
        ucs_error("cxl: get_short from memory outside the pool is not "
                  "supported (use get_bcopy or get_zcopy)");
        return UCS_ERR_UNSUPPORTED;
    }
    UCT_CXL_RKEY_ADDR(src, rkey, remote_addr, length, "get_short");
    cxl_coh_invalidate(iface->coh, src, length);
    memcpy(buffer, src, length);
    return UCS_OK;
}

ucs_status_t uct_cxl_ep_get_bcopy(uct_ep_h tl_ep, uct_unpack_callback_t unpack_cb,
                                  void *arg, size_t length, uint64_t remote_addr,
                                  uct_rkey_t rkey, uct_completion_t *comp)
{
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ucs_derived_of(tl_ep, uct_cxl_ep_t));
    void *src;

    if (length == 0) {
        unpack_cb(arg, NULL, 0);
        return UCS_OK;
    }
    if (ucs_unlikely(uct_cxl_rkey_proxied(rkey))) {
        return uct_cxl_proxy_get(ucs_derived_of(tl_ep, uct_cxl_ep_t),
                                 (const uct_cxl_rkey_t*)rkey,
                                 UCT_CXL_PROXY_GET_BCOPY, NULL, unpack_cb, arg,
                                 NULL, 0, length, remote_addr, comp);
    }
    UCT_CXL_RKEY_ADDR(src, rkey, remote_addr, length, "get_bcopy");
    cxl_coh_invalidate(iface->coh, src, length);
    unpack_cb(arg, src, length);
    return UCS_OK;
}

ucs_status_t uct_cxl_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                  size_t iovcnt, uint64_t remote_addr,
                                  uct_rkey_t rkey, uct_completion_t *comp)
{
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ucs_derived_of(tl_ep, uct_cxl_ep_t));
    size_t length          = uct_iov_total_length(iov, iovcnt);
    void *src;

    UCT_CHECK_PARAM(iovcnt <= UCT_CXL_MAX_IOV, "iovcnt %zu > %d", iovcnt,
                    UCT_CXL_MAX_IOV);
    if (length == 0) {
        return UCS_OK;
    }
    if (ucs_unlikely(uct_cxl_rkey_proxied(rkey))) {
        return uct_cxl_proxy_get(ucs_derived_of(tl_ep, uct_cxl_ep_t),
                                 (const uct_cxl_rkey_t*)rkey,
                                 UCT_CXL_PROXY_GET_ZCOPY, NULL, NULL, NULL,
                                 iov, iovcnt, length, remote_addr, comp);
    }
    UCT_CXL_RKEY_ADDR(src, rkey, remote_addr, length, "get_zcopy");
    cxl_coh_invalidate(iface->coh, src, length);
    uct_cxl_iov_copy(iov, iovcnt, src, 0);
    return UCS_OK;
}

ucs_status_t uct_cxl_ep_flush(uct_ep_h tl_ep, unsigned flags,
                              uct_completion_t *comp)
{
    uct_cxl_ep_t *ep       = ucs_derived_of(tl_ep, uct_cxl_ep_t);
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ep);

    if (flags & UCT_FLUSH_FLAG_CANCEL) {
        uct_cxl_ep_pending_purge(tl_ep, NULL, NULL);
        uct_cxl_proxy_ep_fail(ep, UCS_ERR_CANCELED);
        return UCS_OK;
    }
    /*
     * Queued requests go first; UCP's own flush request may be one of them,
     * and is let through when the dispatch runs it.
     */
    if (!ucs_arbiter_group_is_empty(&ep->arb_group) && !ep->in_pending) {
        return UCS_ERR_NO_RESOURCE;
    }
    if (!ep->failed && (ep->tx->failed || !uct_cxl_tx_peer_open(iface, ep->tx))) {
        uct_cxl_ep_set_failed(ep);
    }

    /* operations completed when they returned; written-back lines must
     * reach memory before anything that follows the flush */
    cxl_coh_fence(iface->coh);
    ucs_memory_cpu_store_fence();
    /* ... except those the owner of memory outside the pool executes */
    return uct_cxl_proxy_ep_flush(ep, comp);
}

ucs_status_t uct_cxl_ep_fence(uct_ep_h tl_ep, unsigned flags)
{
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ucs_derived_of(tl_ep, uct_cxl_ep_t));

    cxl_coh_fence(iface->coh);
    ucs_memory_cpu_fence();
    return UCS_OK;
}
