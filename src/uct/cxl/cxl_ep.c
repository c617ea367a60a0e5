/*
 * Endpoint and RMA of the "cxl" transport: plain loads and stores on pool
 * memory whose caches are coherent with this process's (a hardware-coherent
 * pool, or, with software coherence, memory owned on this very host), so
 * no write-back or invalidate is needed.  These operations complete before
 * they return, so flush only has to order them.  Keys whose memory needs
 * its owner (memory outside the pool; pool memory of another host) go to
 * cxl_proxy.c, whose operations flush waits for.
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
    self->hold        = 0;
    self->put_wait    = 0;
    self->staged      = 0;
    self->stream.data = NULL;
    ucs_list_head_init(&self->due);
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
    return UCS_OK;
}

/*
 * put_bcopy to a key without directly writable memory behind it: UCT's
 * invalid key of a zero-length put, or memory that needs its owner, which
 * receives the data in records.  Only here the data is packed into a local
 * buffer.
 */
static UCS_F_NOINLINE ssize_t
uct_cxl_ep_put_bcopy_local(uct_cxl_ep_t *ep, uct_pack_callback_t pack_cb,
                           void *arg, uint64_t remote_addr, uct_rkey_t rkey)
{
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ep);
    ucs_status_t status;
    size_t length;

    if (iface->pack_buf == NULL) {
        iface->pack_buf = ucs_malloc(UCT_CXL_PUT_MAX_BCOPY, "cxl_pack_buf");
        if (iface->pack_buf == NULL) {
            return UCS_ERR_NO_MEMORY;
        }
    }
    length = pack_cb(iface->pack_buf, arg);
    if (length == 0) {
        return 0;
    }
    if (rkey == UCT_INVALID_RKEY) {
        ucs_error("cxl: put_bcopy of %zu bytes at 0x%" PRIx64 " without a "
                  "remote key (allowed only for zero length)", length,
                  remote_addr);
        return UCS_ERR_INVALID_ADDR;
    }
    if (length > UCT_CXL_PUT_MAX_BCOPY) {
        /* reported after the fact, like an overrun of a pool key below */
        ucs_error("cxl: put_bcopy packed %zu bytes, more than max_bcopy (%lu)",
                  length, UCT_CXL_PUT_MAX_BCOPY);
        return UCS_ERR_INVALID_PARAM;
    }
    status = uct_cxl_proxy_put(ep, (const uct_cxl_rkey_t*)rkey,
                               iface->pack_buf, length, remote_addr);
    return (status == UCS_OK) ? (ssize_t)length : status;
}

ssize_t uct_cxl_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb,
                             void *arg, uint64_t remote_addr, uct_rkey_t rkey)
{
    uct_cxl_ep_t *ep          = ucs_derived_of(tl_ep, uct_cxl_ep_t);
    const uct_cxl_rkey_t *key = (const uct_cxl_rkey_t*)rkey;
    size_t length, room;
    void *dst;

    if (ucs_unlikely((rkey == UCT_INVALID_RKEY) ||
                     uct_cxl_rkey_proxied(rkey))) {
        return uct_cxl_ep_put_bcopy_local(ep, pack_cb, arg, remote_addr, rkey);
    }

    /*
     * Pack straight into the pool.  UCT's contract (which shared-memory
     * transports rely on as well) is that a put_bcopy lies inside its
     * remote key and the pack callback writes exactly the bytes it
     * returns.  The length is known only after packing, so the check below
     * reports a caller bug after the fact: it cannot prevent it, the bytes
     * past the key are already written.
     */
    UCT_CXL_RKEY_ADDR(dst, rkey, remote_addr, 1, "put_bcopy");
    room   = key->hi - (uintptr_t)dst;
    length = pack_cb(dst, arg);
    if (ucs_unlikely(length > room)) {
        ucs_error("cxl: put_bcopy of %zu bytes at 0x%" PRIx64 " passed the "
                  "end of its remote key (%zu bytes left): the pack callback "
                  "wrote past the key", length, remote_addr, room);
        return UCS_ERR_INVALID_ADDR;
    }
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
    size_t length = uct_iov_total_length(iov, iovcnt);
    void *dst;

    UCT_CHECK_PARAM(iovcnt <= UCT_CXL_MAX_IOV, "iovcnt %zu > %d", iovcnt,
                    UCT_CXL_MAX_IOV);
    if (length == 0) {
        return UCS_OK;
    }
    if (ucs_unlikely(uct_cxl_rkey_proxied(rkey))) {
        return uct_cxl_proxy_put_iov(ucs_derived_of(tl_ep, uct_cxl_ep_t),
                                     (const uct_cxl_rkey_t*)rkey, iov, iovcnt,
                                     length, remote_addr, comp);
    }
    UCT_CXL_RKEY_ADDR(dst, rkey, remote_addr, length, "put_zcopy");
    uct_cxl_iov_copy(iov, iovcnt, dst, 1);
    return UCS_OK;
}

ucs_status_t uct_cxl_ep_get_short(uct_ep_h tl_ep, void *buffer, unsigned length,
                                  uint64_t remote_addr, uct_rkey_t rkey)
{
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
        ucs_error("cxl: get_short from memory that needs its owner (outside "
                  "the pool, or of another host) is not supported (use "
                  "get_bcopy or get_zcopy)");
        return UCS_ERR_UNSUPPORTED;
    }
    UCT_CXL_RKEY_ADDR(src, rkey, remote_addr, length, "get_short");
    memcpy(buffer, src, length);
    return UCS_OK;
}

ucs_status_t uct_cxl_ep_get_bcopy(uct_ep_h tl_ep, uct_unpack_callback_t unpack_cb,
                                  void *arg, size_t length, uint64_t remote_addr,
                                  uct_rkey_t rkey, uct_completion_t *comp)
{
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
    unpack_cb(arg, src, length);
    return UCS_OK;
}

ucs_status_t uct_cxl_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                  size_t iovcnt, uint64_t remote_addr,
                                  uct_rkey_t rkey, uct_completion_t *comp)
{
    size_t length = uct_iov_total_length(iov, iovcnt);
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
    uct_cxl_ep_t *ep       = ucs_derived_of(tl_ep, uct_cxl_ep_t);
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ep);

    cxl_coh_fence(iface->coh);
    ucs_memory_cpu_fence();
    uct_cxl_proxy_ep_fence(ep);
    return UCS_OK;
}
