/*
 * 32/64-bit atomics of the "cxl" transport, with __atomic builtins only.
 *
 * Debian's libuct (GCC 12) miscompiles uct_sm_ep_atomic{32,64}_fetch for
 * and/or/xor, so nothing here reuses them.  These are CPU atomics: correct
 * across processes of one host and on hardware-coherent pools.  With
 * software coherence, atomics on pool memory of another host are executed
 * by the memory's owner on its host (cxl_proxy.c), so all atomics on one
 * memory are CPU atomics of one host.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cxl_iface.h"

#include <ucs/debug/log.h>

#define UCT_CXL_AMO_ADDR(_ptr, _ep, _rkey, _raddr, _size) \
    do { \
        (_ptr) = uct_cxl_rkey_addr(_rkey, _raddr, _size); \
        if (ucs_unlikely(((_ptr) == NULL) || \
                         ((uintptr_t)(_ptr) % (_size) != 0))) { \
            ucs_error("cxl: atomic on %d bytes at 0x%" PRIx64 " is outside " \
                      "its remote key or misaligned", (int)(_size), \
                      (uint64_t)(_raddr)); \
            return UCS_ERR_INVALID_ADDR; \
        } \
    } while (0)

#define UCT_CXL_AMO_FUNCS(_bits) \
    ucs_status_t uct_cxl_ep_atomic##_bits##_post(uct_ep_h tl_ep, \
                                                 unsigned opcode, \
                                                 uint##_bits##_t value, \
                                                 uint64_t remote_addr, \
                                                 uct_rkey_t rkey) \
    { \
        uct_cxl_ep_t *ep = ucs_derived_of(tl_ep, uct_cxl_ep_t); \
        uint##_bits##_t old; \
        ucs_status_t status; \
        void *ptr; \
        \
        if (ucs_unlikely(opcode == UCT_ATOMIC_OP_SWAP)) { \
            return UCS_ERR_UNSUPPORTED; /* post has no swap */ \
        } \
        if (ucs_unlikely(uct_cxl_rkey_proxied(rkey))) { \
            return uct_cxl_proxy_amo(ep, (const uct_cxl_rkey_t*)rkey, opcode, \
                                     sizeof(old), value, 0, NULL, remote_addr, \
                                     NULL); \
        } \
        UCT_CXL_AMO_ADDR(ptr, ep, rkey, remote_addr, sizeof(old)); \
        status = UCT_CXL_AMO_APPLY(uint##_bits##_t, ptr, opcode, value, &old); \
        return status; \
    } \
    \
    ucs_status_t uct_cxl_ep_atomic##_bits##_fetch(uct_ep_h tl_ep, \
                                                  unsigned opcode, \
                                                  uint##_bits##_t value, \
                                                  uint##_bits##_t *result, \
                                                  uint64_t remote_addr, \
                                                  uct_rkey_t rkey, \
                                                  uct_completion_t *comp) \
    { \
        uct_cxl_ep_t *ep = ucs_derived_of(tl_ep, uct_cxl_ep_t); \
        ucs_status_t status; \
        void *ptr; \
        \
        if (ucs_unlikely(uct_cxl_rkey_proxied(rkey))) { \
            return uct_cxl_proxy_amo(ep, (const uct_cxl_rkey_t*)rkey, opcode, \
                                     sizeof(*result), value, 0, result, \
                                     remote_addr, comp); \
        } \
        UCT_CXL_AMO_ADDR(ptr, ep, rkey, remote_addr, sizeof(*result)); \
        status = UCT_CXL_AMO_APPLY(uint##_bits##_t, ptr, opcode, value, result); \
        return status; \
    } \
    \
    ucs_status_t uct_cxl_ep_atomic_cswap##_bits(uct_ep_h tl_ep, \
                                                uint##_bits##_t compare, \
                                                uint##_bits##_t swap, \
                                                uint64_t remote_addr, \
                                                uct_rkey_t rkey, \
                                                uint##_bits##_t *result, \
                                                uct_completion_t *comp) \
    { \
        uct_cxl_ep_t *ep = ucs_derived_of(tl_ep, uct_cxl_ep_t); \
        uint##_bits##_t expected = compare; \
        void *ptr; \
        \
        if (ucs_unlikely(uct_cxl_rkey_proxied(rkey))) { \
            return uct_cxl_proxy_amo(ep, (const uct_cxl_rkey_t*)rkey, \
                                     UCT_ATOMIC_OP_CSWAP, sizeof(*result), \
                                     swap, compare, result, remote_addr, comp); \
        } \
        UCT_CXL_AMO_ADDR(ptr, ep, rkey, remote_addr, sizeof(*result)); \
        /* on failure the builtin stores the current value in expected */ \
        __atomic_compare_exchange_n((uint##_bits##_t*)ptr, &expected, swap, 0, \
                                    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); \
        *result = expected; \
        return UCS_OK; \
    }

UCT_CXL_AMO_FUNCS(32)
UCT_CXL_AMO_FUNCS(64)
