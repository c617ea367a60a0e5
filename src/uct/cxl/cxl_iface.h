/*
 * Interface of the "cxl" transport: one per pool device.
 */
#ifndef UCT_CXL_IFACE_H
#define UCT_CXL_IFACE_H

#include "cxl_md.h"

#include <uct/base/uct_iface.h>

#define UCT_CXL_MAX_IOV 16

typedef struct uct_cxl_iface_config {
    uct_iface_config_t super;
    double             bandwidth;  /* bytes/sec, for protocol selection */
} uct_cxl_iface_config_t;

/* Interface address: unique id of the interface within its pool. */
typedef struct uct_cxl_iface_addr {
    uint64_t id;
} UCS_S_PACKED uct_cxl_iface_addr_t;

/* Device address: the pool identity, the same length in every process. */
typedef struct uct_cxl_device_addr {
    uint8_t uuid[CXLPOOL_UUID_LEN];
} UCS_S_PACKED uct_cxl_device_addr_t;

typedef struct uct_cxl_iface {
    uct_base_iface_t  super;
    uct_cxl_pool_t   *pool;
    cxl_coh_mode_t    coh;
    uint64_t          id;
    double            bandwidth;
} uct_cxl_iface_t;

typedef struct uct_cxl_ep {
    uct_base_ep_t     super;
    uint64_t          peer_id;
} uct_cxl_ep_t;

#define uct_cxl_ep_iface(_ep) \
    ucs_derived_of((_ep)->super.super.iface, uct_cxl_iface_t)

UCS_CLASS_DECLARE_NEW_FUNC(uct_cxl_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DECLARE_DELETE_FUNC(uct_cxl_ep_t, uct_ep_t);

/* RMA (cxl_ep.c) */
ucs_status_t uct_cxl_ep_put_short(uct_ep_h tl_ep, const void *buffer,
                                  unsigned length, uint64_t remote_addr,
                                  uct_rkey_t rkey);
ssize_t uct_cxl_ep_put_bcopy(uct_ep_h tl_ep, uct_pack_callback_t pack_cb,
                             void *arg, uint64_t remote_addr, uct_rkey_t rkey);
ucs_status_t uct_cxl_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                  size_t iovcnt, uint64_t remote_addr,
                                  uct_rkey_t rkey, uct_completion_t *comp);
ucs_status_t uct_cxl_ep_get_short(uct_ep_h tl_ep, void *buffer, unsigned length,
                                  uint64_t remote_addr, uct_rkey_t rkey);
ucs_status_t uct_cxl_ep_get_bcopy(uct_ep_h tl_ep, uct_unpack_callback_t unpack_cb,
                                  void *arg, size_t length, uint64_t remote_addr,
                                  uct_rkey_t rkey, uct_completion_t *comp);
ucs_status_t uct_cxl_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov,
                                  size_t iovcnt, uint64_t remote_addr,
                                  uct_rkey_t rkey, uct_completion_t *comp);
ucs_status_t uct_cxl_ep_flush(uct_ep_h tl_ep, unsigned flags,
                              uct_completion_t *comp);
ucs_status_t uct_cxl_ep_fence(uct_ep_h tl_ep, unsigned flags);

/* atomics (cxl_amo.c) */
ucs_status_t uct_cxl_ep_atomic32_post(uct_ep_h tl_ep, unsigned opcode,
                                      uint32_t value, uint64_t remote_addr,
                                      uct_rkey_t rkey);
ucs_status_t uct_cxl_ep_atomic64_post(uct_ep_h tl_ep, unsigned opcode,
                                      uint64_t value, uint64_t remote_addr,
                                      uct_rkey_t rkey);
ucs_status_t uct_cxl_ep_atomic32_fetch(uct_ep_h tl_ep, unsigned opcode,
                                       uint32_t value, uint32_t *result,
                                       uint64_t remote_addr, uct_rkey_t rkey,
                                       uct_completion_t *comp);
ucs_status_t uct_cxl_ep_atomic64_fetch(uct_ep_h tl_ep, unsigned opcode,
                                       uint64_t value, uint64_t *result,
                                       uint64_t remote_addr, uct_rkey_t rkey,
                                       uct_completion_t *comp);
ucs_status_t uct_cxl_ep_atomic_cswap32(uct_ep_h tl_ep, uint32_t compare,
                                       uint32_t swap, uint64_t remote_addr,
                                       uct_rkey_t rkey, uint32_t *result,
                                       uct_completion_t *comp);
ucs_status_t uct_cxl_ep_atomic_cswap64(uct_ep_h tl_ep, uint64_t compare,
                                       uint64_t swap, uint64_t remote_addr,
                                       uct_rkey_t rkey, uint64_t *result,
                                       uct_completion_t *comp);

#endif
