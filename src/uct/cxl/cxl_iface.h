/*
 * Interface of the "cxl" transport: one per pool device.
 */
#ifndef UCT_CXL_IFACE_H
#define UCT_CXL_IFACE_H

#include "cxl_md.h"
#include "cxl_channel.h"

#include <uct/base/uct_iface.h>
#include <ucs/datastruct/arbiter.h>
#include <ucs/time/time.h>

#define UCT_CXL_MAX_IOV      16
/* put_bcopy packs in place in the pool; memory outside the pool needs a
 * local pack buffer of this size (cxl_ep.c) */
#define UCT_CXL_PUT_MAX_BCOPY (4ul * 1024 * 1024)
/* header + payload of am_short: a record of at most four cache lines */
#define UCT_CXL_AM_MAX_SHORT (4 * UCT_CXL_LINE - UCT_CXL_REC_HDR)
/* record lines of channels invalidated together before they are polled */
#define UCT_CXL_POLL_BATCH   32
/* progress calls between two looks at the claim lines of the own block */
#define UCT_CXL_CLAIM_POLL   16

typedef struct uct_cxl_iface_config {
    uct_iface_config_t super;
    double             bandwidth;    /* bytes/sec, for protocol selection */
    size_t             seg_size;     /* max AM bcopy payload */
    size_t             ring_size;    /* bytes per receive channel */
    size_t             bulk_size;    /* bytes of a sender's bulk ring, 0: none */
    unsigned           num_channels; /* senders one interface can accept */
    unsigned           max_poll;     /* records per progress call */
    int                events;       /* ucs_ternary_auto_value_t-like: yes/no/try */
    int                test_skip_wb; /* test only: no record write-back */
    int                test_skip_owner; /* test only: UCT_CXL_TEST_SKIP_* */
    double             peer_check;   /* sw: header re-read interval, seconds */
} uct_cxl_iface_config_t;

/* UCX_CXL_TEST_SKIP_OWNER_SYNC (test only): what an owner leaves out of the
 * write-back and invalidate requests of peers on other hosts */
enum {
    UCT_CXL_TEST_SKIP_NONE       = 0,
    UCT_CXL_TEST_SKIP_WRITEBACK  = 1, /* before a get or a direct put */
    UCT_CXL_TEST_SKIP_INVALIDATE = 2, /* after a direct put */
    UCT_CXL_TEST_SKIP_LAST
};

/*
 * Interface address: where the receive block lives in the pool, and the
 * interface id written in its header (guards against a reused block).
 */
typedef struct uct_cxl_iface_addr {
    uint64_t block_offset;
    uint64_t id;
} UCS_S_PACKED uct_cxl_iface_addr_t;

/* Receiver-local state of one channel. */
typedef struct uct_cxl_reply uct_cxl_reply_t;
typedef struct uct_cxl_op    uct_cxl_op_t;

typedef struct {
    uint64_t pos;          /* bytes consumed */
    uint64_t published;    /* last value written to the consumer line */
    uint64_t bulk_tail;    /* bulk_end of the last consumed bulk record */
    uint32_t seq;          /* next expected record */
    uint32_t first;        /* the channel's first number: records' check */
    uint16_t head_fresh;   /* sw: the line at pos was invalidated since it
                            * was last looked at (uct_cxl_iface_progress) */
    uint16_t burst;        /* sw: the last poll found more than one record:
                            * invalidate each next record in the loop */
} uct_cxl_rx_chan_t;

/* Device address: the pool identity, the same length in every process. */
typedef struct uct_cxl_device_addr {
    uint8_t uuid[CXLPOOL_UUID_LEN];
} UCS_S_PACKED uct_cxl_device_addr_t;

struct uct_cxl_iface;

/*
 * Where the channel layer delivers records, by their type: the layers
 * above it register here, so a record flows up in one direction.
 */
typedef struct uct_cxl_rx_ops {
    /* an active message; data valid only inside the call */
    void (*am)(struct uct_cxl_iface *iface, uint8_t am_id, void *data,
               uint32_t length);
    /* an operation for this process to execute, or an answer to one of its
     * own, from channel 'index' (cxl_proxy.c) */
    void (*op)(struct uct_cxl_iface *iface, unsigned index,
               const void *payload, uint32_t length);
} uct_cxl_rx_ops_t;

typedef struct uct_cxl_iface {
    uct_base_iface_t     super;
    const uct_cxl_rx_ops_t *rx_ops;
    uct_cxl_pool_t      *pool;
    cxl_coh_mode_t       coh;
    uint64_t             id;
    double               bandwidth;
    size_t               seg_size;
    unsigned             max_poll;
    unsigned             peer_check_us; /* published in the own block header */
    uct_cxl_block_hdr_t *block;      /* receive block in the pool */
    uint64_t             block_offset;
    /* the block's geometry as this interface made it: any process that
     * maps the pool may write the header, so the receiver never takes
     * addresses from there */
    uint8_t             *chans;      /* channel 0 */
    uint64_t             chan_stride;
    uint64_t             ring_mask;  /* ring bytes - 1 */
    unsigned             num_hosts;  /* host ranges of the own block */
    unsigned             per_host;   /* channels per host range */
    unsigned             host_index; /* own range in peers' blocks */
    unsigned            *active;     /* per range: channels ever claimed */
    unsigned             claim_poll; /* progress calls until the claim lines
                                      * are read again */
    uct_cxl_rx_chan_t   *rx;
    void                *pack_buf;   /* put_bcopy outside the pool, lazily */
    size_t               bulk_size;  /* of each bulk ring, 0: none */
    int                  bulk_warned; /* pool full for a bulk ring: said so */
    ucs_list_link_t      bulk_retired; /* bulk rings peers may still read */
    uct_cxl_rec_t       *tx_bounce;  /* sw: am_bcopy stages its record here */
    ucs_arbiter_t        arbiter;    /* endpoints with pending requests */
    ucs_list_link_t      ep_list;    /* all endpoints, for iface_flush */
    ucs_list_link_t      tx_list;    /* channels claimed in peers' blocks */
    /* operations on memory outside the pool (cxl_proxy.c) */
    int                  proxy_busy; /* answers, streams or flushes waiting */
    ucs_list_link_t      replies;    /* answers waiting for room, in order */
    ucs_list_link_t      reply_txs;  /* channels held for answers */
    uct_cxl_op_t        *ops;        /* requests waiting for an answer */
    unsigned             ops_size;
    unsigned             ops_free;   /* head of the free slots, or ops_size */
    ucs_time_t           proxy_alive_check; /* last liveness check of owners */
    void                *staging;    /* kept copy buffer of a large put */
    size_t               staging_size;
    int                  test_skip_owner; /* UCT_CXL_TEST_SKIP_* (test only) */
    int                  event_fd;   /* read end of the wake-up FIFO, or -1 */
    int                  event_wfd;  /* own writer: no EOF while senders come and go */
    char                 event_path[64];
} uct_cxl_iface_t;

/* Own receive channel 'index', by the interface's own geometry. */
static UCS_F_ALWAYS_INLINE uct_cxl_chan_ctl_t *
uct_cxl_iface_chan(uct_cxl_iface_t *iface, unsigned index)
{
    return (uct_cxl_chan_ctl_t*)(iface->chans +
                                 (uint64_t)index * iface->chan_stride);
}

/*
 * Sender side of one channel in a peer's block.  All endpoints of an
 * interface to the same peer interface share it (refcount): records of
 * one channel are delivered in order, so each endpoint keeps its order,
 * and a receiver serves as many endpoints as it likes per channel.
 */
typedef struct uct_cxl_tx {
    ucs_list_link_t      list;       /* in iface->tx_list */
    unsigned             refcount;   /* endpoints using it */
    uint64_t             block_offset;
    uint64_t             peer_id;
    uct_cxl_block_hdr_t *peer;       /* receiver's block header */
    uct_cxl_chan_ctl_t  *chan;       /* the claimed channel */
    uint8_t             *ring;
    uint64_t             ring_mask;
    uint64_t             head;
    uint64_t             cached_tail;
    uint32_t             seq;
    uint32_t             first;      /* the channel's first number (check) */
    uint64_t             chan_head;  /* head last stored in the producer line */
    ucs_time_t           check_interval; /* sw: the peer's peer_check_us */
    ucs_time_t           check_due;  /* sw: re-read the peer's header from then */
    uint64_t             op_head;    /* head after the last proxied operation */
    /* bulk ring (cxl_bulk.c): am_bcopy payloads, in this process's pool
     * memory; the records in the peer's ring only point at them */
    uint8_t             *bulk;       /* NULL: none (yet) */
    uint64_t             bulk_offset; /* its pool offset */
    uint64_t             bulk_mask;  /* its size - 1 */
    uint64_t             bulk_head;  /* position after the last payload */
    uint64_t             bulk_cached_tail;
    uct_cxl_rec_t       *op_rec;     /* reserved operation record, NULL: */
    uint64_t             op_start;   /* ... its payload at this bulk position */
    uint64_t             bulk_rec0;  /* ring position of the first bulk
                                      * record, UINT64_MAX: none yet */
    int                  bulk_failed; /* no pool space: payloads go inline */
    int                  failed;     /* peer gone: never written again */
    int                  signal_fd;  /* peer's wake-up FIFO; -1 not open, -2 none */
} uct_cxl_tx_t;

typedef struct uct_cxl_ep {
    uct_base_ep_t        super;
    ucs_list_link_t      list;       /* in iface->ep_list */
    uct_cxl_tx_t        *tx;         /* shared channel to the peer */
    int                  failed;     /* reported to the user (once) */
    ucs_arbiter_group_t  arb_group;
    int                  err_cb_id;
    int                  in_pending; /* running one of its queued requests */
    unsigned             outstanding; /* proxied requests without answer */
    unsigned             hold;       /* UCT_CXL_HOLD_*: later sends wait */
    unsigned             put_wait;   /* direct puts waiting for the owner */
    size_t               staged;     /* bytes of their copies (put_short/bcopy) */
    ucs_list_link_t      due;        /* their records, waiting for room */
    ucs_list_link_t      flush_list; /* flush completions waiting */
    struct {
        uint8_t         *data;       /* NULL: no put being streamed */
        size_t           length;
        size_t           done;
        uint64_t         addr;
    } stream;                        /* a proxied put larger than the room */
} uct_cxl_ep_t;

#define uct_cxl_ep_iface(_ep) \
    ucs_derived_of((_ep)->super.super.iface, uct_cxl_iface_t)

/* Why later sends of an endpoint wait (cxl_proxy.c) */
#define UCT_CXL_HOLD_PUT    UCS_BIT(0) /* a direct put waits for the owner */
#define UCT_CXL_HOLD_DUE    UCS_BIT(1) /* records of a direct put wait for room */
#define UCT_CXL_HOLD_FENCE  UCS_BIT(2) /* a fence waits for what came before */
#define UCT_CXL_HOLD_STAGE  UCS_BIT(3) /* enough copied put data in flight */

/*
 * Nothing may be sent on ep now (UCS_ERR_NO_RESOURCE, pending requests
 * stay queued): a put still streams, or an earlier operation whose data
 * the requester moves itself has not reached the point where later
 * records may follow it.
 */
static UCS_F_ALWAYS_INLINE int uct_cxl_ep_held(const uct_cxl_ep_t *ep)
{
    return (ep->stream.data != NULL) || (ep->hold != 0);
}

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

/* active messages (cxl_am.c) */
ucs_status_t uct_cxl_ep_am_short(uct_ep_h tl_ep, uint8_t id, uint64_t header,
                                 const void *payload, unsigned length);
ucs_status_t uct_cxl_ep_am_short_iov(uct_ep_h tl_ep, uint8_t id,
                                     const uct_iov_t *iov, size_t iovcnt);
ssize_t uct_cxl_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id,
                            uct_pack_callback_t pack_cb, void *arg,
                            unsigned flags);
void uct_cxl_am_deliver(uct_cxl_iface_t *iface, uint8_t am_id, void *data,
                        uint32_t length);
unsigned uct_cxl_am_dispatch_pending(uct_cxl_iface_t *iface);
ucs_status_t uct_cxl_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req,
                                    unsigned flags);
void uct_cxl_ep_pending_purge(uct_ep_h tl_ep, uct_pending_purge_callback_t cb,
                              void *arg);
ucs_status_t uct_cxl_ep_check(uct_ep_h tl_ep, unsigned flags,
                              uct_completion_t *comp);
void uct_cxl_ep_set_failed(uct_cxl_ep_t *ep);

/* the channel layer (cxl_chan.c; inline sender side in cxl_chan.h) */
int            uct_cxl_tx_has_resources(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx,
                                        uint64_t need);
int            uct_cxl_tx_can_send(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx);
int            uct_cxl_tx_peer_open(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx);
int            uct_cxl_tx_peer_alive(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx);
ucs_status_t   uct_cxl_ep_send_check(uct_cxl_ep_t *ep, uint32_t max_length);
int            uct_cxl_tx_room(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx,
                               uint32_t max_length);
void          *uct_cxl_tx_reserve_op(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx,
                                     uint32_t length);
void           uct_cxl_tx_commit_op(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx,
                                    void *payload, uint32_t length);
void           uct_cxl_iface_poll_claims(uct_cxl_iface_t *iface);
unsigned       uct_cxl_chan_poll(uct_cxl_iface_t *iface);

/* claim and release of channels (cxl_chan.c) */
ucs_status_t uct_cxl_tx_get(uct_cxl_iface_t *iface,
                            const uct_cxl_iface_addr_t *addr,
                            uct_cxl_tx_t **tx_p);
void         uct_cxl_tx_put(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx);

/*
 * RMA and atomics that need the memory's owner (cxl_proxy.c): on memory
 * outside the pool the owner executes them on its own memory when its
 * interface progresses; on pool memory of another host of a software-
 * coherent pool it executes atomics and small puts, and writes back and
 * invalidates its caches for the gets and large puts the requester does
 * itself.
 */
ucs_status_t uct_cxl_proxy_put(uct_cxl_ep_t *ep, const uct_cxl_rkey_t *key,
                               const void *data, size_t length,
                               uint64_t remote_addr);
ucs_status_t uct_cxl_proxy_put_iov(uct_cxl_ep_t *ep, const uct_cxl_rkey_t *key,
                                   const uct_iov_t *iov, size_t iovcnt,
                                   size_t length, uint64_t remote_addr,
                                   uct_completion_t *comp);
ucs_status_t uct_cxl_proxy_get(uct_cxl_ep_t *ep, const uct_cxl_rkey_t *key,
                               int kind, void *buffer,
                               uct_unpack_callback_t unpack_cb, void *arg,
                               const uct_iov_t *iov, size_t iovcnt,
                               size_t length, uint64_t remote_addr,
                               uct_completion_t *comp);
ucs_status_t uct_cxl_proxy_amo(uct_cxl_ep_t *ep, const uct_cxl_rkey_t *key,
                               unsigned opcode, unsigned size, uint64_t value,
                               uint64_t compare, void *result,
                               uint64_t remote_addr, uct_completion_t *comp);
void         uct_cxl_proxy_handle(uct_cxl_iface_t *iface, unsigned index,
                                  const void *payload, uint32_t length);
unsigned     uct_cxl_proxy_progress(uct_cxl_iface_t *iface);
int          uct_cxl_proxy_ep_idle(uct_cxl_ep_t *ep);
ucs_status_t uct_cxl_proxy_ep_flush(uct_cxl_ep_t *ep, uct_completion_t *comp);
void         uct_cxl_proxy_ep_fence(uct_cxl_ep_t *ep);
void         uct_cxl_proxy_ep_fail(uct_cxl_ep_t *ep, ucs_status_t status);
void         uct_cxl_proxy_ep_cleanup(uct_cxl_ep_t *ep);
void         uct_cxl_proxy_iface_init(uct_cxl_iface_t *iface);
void         uct_cxl_proxy_iface_cleanup(uct_cxl_iface_t *iface);

#define UCT_CXL_PROXY_GET_BCOPY  1
#define UCT_CXL_PROXY_GET_ZCOPY  2

/*
 * Bulk rings (cxl_bulk.c).  An am_bcopy payload is packed into the
 * sender's own bulk ring in the pool, and the record in the receiver's
 * channel only says where it is: a channel's depth is then the bulk ring
 * (BULK_SIZE) instead of the receiver's RING_SIZE, and pool space grows
 * with the pairs that really send, not with NUM_CHANNELS.
 */
#define UCT_CXL_BULK_MIN_LENGTH  1024  /* shorter payloads stay inline */
#define UCT_CXL_BULK_MAX_LENGTH  (1ul << 30) /* largest SEG_SIZE accepted */

ucs_status_t uct_cxl_bulk_attach(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx);
void         uct_cxl_bulk_retire(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx);
unsigned     uct_cxl_bulk_progress(uct_cxl_iface_t *iface);
void         uct_cxl_bulk_iface_init(uct_cxl_iface_t *iface);
void         uct_cxl_bulk_iface_cleanup(uct_cxl_iface_t *iface);

/* Bulk position where a payload of up to max_length bytes would start:
 * it never wraps, so it skips the rest of the ring when that is shorter. */
static UCS_F_ALWAYS_INLINE uint64_t uct_cxl_bulk_start(const uct_cxl_tx_t *tx,
                                                       size_t max_length)
{
    uint64_t left = tx->bulk_mask + 1 - (tx->bulk_head & tx->bulk_mask);

    return tx->bulk_head + ((left < max_length) ? left : 0);
}

/* Room for a payload of up to max_length bytes in the bulk ring. */
static UCS_F_ALWAYS_INLINE int
uct_cxl_bulk_has_room(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx,
                      size_t max_length)
{
    uint64_t end = uct_cxl_bulk_start(tx, max_length) + max_length;

    if (end - tx->bulk_cached_tail <= tx->bulk_mask + 1) {
        return 1;
    }
    /*
     * One line holds both positions the receiver hands back.  bulk_tail is
     * ours only once the receiver consumed our first bulk record: before,
     * it may still be a previous owner's of the channel (records are
     * consumed in order, so afterwards it never is again).
     */
    cxl_coh_invalidate(iface->coh, (const void*)&tx->chan->tail, UCT_CXL_LINE);
    tx->cached_tail = tx->chan->tail;
    if (tx->cached_tail > tx->bulk_rec0) {
        tx->bulk_cached_tail = tx->chan->bulk_tail;
    }
    return end - tx->bulk_cached_tail <= tx->bulk_mask + 1;
}

/* wake-up (cxl_event.c) */
ucs_status_t uct_cxl_iface_event_init(uct_cxl_iface_t *iface, int mode);
void uct_cxl_iface_event_cleanup(uct_cxl_iface_t *iface);
ucs_status_t uct_cxl_iface_event_fd_get(uct_iface_h tl_iface, int *fd_p);
ucs_status_t uct_cxl_iface_event_arm(uct_iface_h tl_iface, unsigned events);
void uct_cxl_tx_signal_slow(uct_cxl_tx_t *tx);
/* This process is registered for membarrier(GLOBAL_EXPEDITED) (cxl_event.c). */
extern int uct_cxl_membarrier_registered;

/* Store head and seq in the producer line, and write it back at once. */
static UCS_F_ALWAYS_INLINE void uct_cxl_tx_store_position(uct_cxl_tx_t *tx,
                                                          cxl_coh_mode_t coh)
{
    tx->chan->head = tx->head;
    tx->chan->seq  = tx->seq;
    tx->chan_head  = tx->head;
    cxl_coh_writeback(coh, tx->chan, UCT_CXL_LINE);
}

/*
 * A receiver that sleeps wants a signal after each record it may miss:
 * called between a record's sequence number store and its write-back
 * (uct_cxl_tx_publish).  Events exist only where every peer shares the
 * receiver's host, and so its caches (cxl_event.c).
 */
static UCS_F_ALWAYS_INLINE void uct_cxl_tx_signal(uct_cxl_tx_t *tx)
{
    if (ucs_unlikely(tx->peer->events)) {
        uct_cxl_tx_signal_slow(tx);
    }
}

/* Apply a non-compare opcode; returns the old value.  One body for both
 * widths, for the transport's own atomics (cxl_amo.c) and for those an
 * owner executes on memory outside the pool (cxl_proxy.c). */
#define UCT_CXL_AMO_APPLY(_type, _ptr, _opcode, _value, _old_p) \
    ({ \
        ucs_status_t _st = UCS_OK; \
        switch (_opcode) { \
        case UCT_ATOMIC_OP_ADD: \
            *(_old_p) = __atomic_fetch_add((_type*)(_ptr), _value, \
                                           __ATOMIC_SEQ_CST); \
            break; \
        case UCT_ATOMIC_OP_AND: \
            *(_old_p) = __atomic_fetch_and((_type*)(_ptr), _value, \
                                           __ATOMIC_SEQ_CST); \
            break; \
        case UCT_ATOMIC_OP_OR: \
            *(_old_p) = __atomic_fetch_or((_type*)(_ptr), _value, \
                                          __ATOMIC_SEQ_CST); \
            break; \
        case UCT_ATOMIC_OP_XOR: \
            *(_old_p) = __atomic_fetch_xor((_type*)(_ptr), _value, \
                                           __ATOMIC_SEQ_CST); \
            break; \
        case UCT_ATOMIC_OP_SWAP: \
            *(_old_p) = __atomic_exchange_n((_type*)(_ptr), _value, \
                                            __ATOMIC_SEQ_CST); \
            break; \
        default: \
            _st = UCS_ERR_UNSUPPORTED; \
            break; \
        } \
        _st; \
    })

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
