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

#include <ucs/debug/log.h>
#include <ucs/arch/cpu.h>
#include <ucs/sys/math.h>
#include <string.h>

static UCS_CLASS_INIT_FUNC(uct_cxl_ep_t, const uct_ep_params_t *params)
{
    uct_cxl_iface_t *iface = ucs_derived_of(params->iface, uct_cxl_iface_t);
    const uct_cxl_iface_addr_t *addr;

    UCT_EP_PARAMS_CHECK_DEV_IFACE_ADDRS(params);
    UCS_CLASS_CALL_SUPER_INIT(uct_base_ep_t, &iface->super);

    addr          = (const uct_cxl_iface_addr_t*)params->iface_addr;
    self->peer_id = addr->id;
    ucs_debug("cxl: ep %p on %s connected to iface 0x%" PRIx64, self,
              iface->pool->dev_name, self->peer_id);
    return UCS_OK;
}

static UCS_CLASS_CLEANUP_FUNC(uct_cxl_ep_t)
{
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
    void *dst;
    size_t length;

    /* the length is known only after packing: check the start, then the end */
    UCT_CXL_RKEY_ADDR(dst, rkey, remote_addr, 0, "put_bcopy");
    length = pack_cb(dst, arg);
    if (ucs_unlikely(length > key->hi - (uintptr_t)dst)) {
        ucs_fatal("cxl: put_bcopy packed %zu bytes past the end of its remote "
                  "key", length);
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
        for (j = 0; j < ucs_max(iov[i].count, 1u); ++j) {
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

static size_t uct_cxl_iov_length(const uct_iov_t *iov, size_t iovcnt)
{
    size_t i, total = 0;

    for (i = 0; i < iovcnt; ++i) {
        total += iov[i].length * ucs_max(iov[i].count, 1u);
    }
    return total;
}

ucs_status_t uct_cxl_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                  size_t iovcnt, uint64_t remote_addr,
                                  uct_rkey_t rkey, uct_completion_t *comp)
{
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ucs_derived_of(tl_ep, uct_cxl_ep_t));
    size_t length          = uct_cxl_iov_length(iov, iovcnt);
    void *dst;

    UCT_CHECK_PARAM(iovcnt <= UCT_CXL_MAX_IOV, "iovcnt %zu > %d", iovcnt,
                    UCT_CXL_MAX_IOV);
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
    size_t length          = uct_cxl_iov_length(iov, iovcnt);
    void *src;

    UCT_CHECK_PARAM(iovcnt <= UCT_CXL_MAX_IOV, "iovcnt %zu > %d", iovcnt,
                    UCT_CXL_MAX_IOV);
    UCT_CXL_RKEY_ADDR(src, rkey, remote_addr, length, "get_zcopy");
    cxl_coh_invalidate(iface->coh, src, length);
    uct_cxl_iov_copy(iov, iovcnt, src, 0);
    return UCS_OK;
}

ucs_status_t uct_cxl_ep_flush(uct_ep_h tl_ep, unsigned flags,
                              uct_completion_t *comp)
{
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ucs_derived_of(tl_ep, uct_cxl_ep_t));

    /* operations completed when they returned; written-back lines must
     * reach memory before anything that follows the flush */
    cxl_coh_fence(iface->coh);
    ucs_memory_cpu_store_fence();
    return UCS_OK;
}

ucs_status_t uct_cxl_ep_fence(uct_ep_h tl_ep, unsigned flags)
{
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ucs_derived_of(tl_ep, uct_cxl_ep_t));

    cxl_coh_fence(iface->coh);
    ucs_memory_cpu_fence();
    return UCS_OK;
}
