/*
 * RMA and atomics that need the memory's owner.
 *
 * Memory outside the pool.  A process cannot load or store another
 * process's private memory, but UCP registers every buffer it sends or
 * exposes, ordinary ones included.  The key of such memory names its owner
 * process (uct_cxl_proc_id()), and every operation on it becomes a record
 * in the channel to one of the owner's interfaces (flag UCT_CXL_REC_OP).
 * The owner executes it on its own memory when that interface progresses:
 * a put is copied in, an atomic is applied with the CPU, a get or a
 * fetching atomic is answered with records in the requester's own block.
 * The owner's own operations on such memory take the same path (a
 * loopback endpoint), so one memory never has two atomic paths.
 *
 * Pool memory of another host (software coherence, see
 * doc/design/sw-coherence.md).  The key names the owner and its host; only
 * the owner's host may hold the memory's lines in its caches, dirty or
 * stale.  Atomics, and puts that fit into one record, are executed by the
 * owner as above.  A larger put (put_zcopy) and every get move the data
 * themselves, with plain copies, after the owner answered a CLEAN request:
 * it wrote back and invalidated the range, so memory holds its latest
 * stores and no dirty line of its is left to overwrite the requester's
 * data later.  A put then writes the range's whole lines and writes them
 * back; its partial first and last lines go to the owner as small puts
 * (another host may store next to them), and an INVAL record makes the
 * owner drop what it may have cached since.  Until those records are out,
 * nothing else of the endpoint passes the put (UCT_CXL_HOLD_PUT/_DUE).  A
 * get invalidates the range after the answer and reads it.
 *
 * Order: the records of one channel execute in order.  What of a get's
 * answer does not fit into the requester's channel at once streams from
 * progress, straight from the owner's memory, until another operation
 * executes: then the rest is copied aside first, so no later operation
 * changes what an earlier get returns.  (Pausing the channel instead would
 * deadlock: answers can travel in the very channel that is paused, in
 * loopback, and between two owners that get from each other.)
 * Completion: a put or a non-fetching atomic completes locally at once
 * (a direct put once its data is written); an endpoint's flush completes
 * when the owner has consumed the channel up to its last operation and
 * every answer has arrived.  A fence holds later operations until every
 * answer arrived.  An owner found dead while answers are due fails the
 * endpoint, so nobody waits for it forever.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cxl_chan.h"

#include <uct/base/uct_iov.inl>
#include <ucs/debug/log.h>
#include <ucs/time/time.h>
#include <string.h>
#if defined(__x86_64__)
#  include <emmintrin.h>
#endif

enum {
    UCT_CXL_OP_PUT = 1,  /* data follows */
    UCT_CXL_OP_GET,      /* answer with 'length' bytes */
    UCT_CXL_OP_AMO,      /* apply 'amo', no answer */
    UCT_CXL_OP_FAMO,     /* apply 'amo', answer with the old value */
    UCT_CXL_OP_ANSWER,   /* to a GET, FAMO or CLEAN of the requester 'cookie' */
    UCT_CXL_OP_CLEAN,    /* pool memory: write back and invalidate 'value'
                          * bytes at 'addr', then answer (no data) */
    UCT_CXL_OP_INVAL     /* pool memory: invalidate 'value' bytes at 'addr' */
};

/* What a request waits for (uct_cxl_op_t::kind) */
enum {
    UCT_CXL_KIND_AMO           = -1, /* old value of a fetching atomic */
    /* UCT_CXL_PROXY_GET_BCOPY, _ZCOPY: data in the answer */
    UCT_CXL_KIND_POOL_GET_BCOPY = 3, /* clean, then read the pool range */
    UCT_CXL_KIND_POOL_GET_ZCOPY,
    UCT_CXL_KIND_POOL_PUT            /* clean, then write the pool range */
};

/*
 * Payload of an UCT_CXL_REC_OP record (before the data of PUT, ANSWER).
 * A record without data carries only the fields its operation uses, in
 * this order (uct_cxl_proxy_hdr_len), so that an atomic, its answer, and
 * the CLEAN/INVAL requests of pool memory fit into one cache line with the
 * record header: in sw mode every line is written back and invalidated.
 */
typedef struct {
    uint8_t  op;
    uint8_t  amo;          /* uct_atomic_op_t (UCT_ATOMIC_OP_CSWAP too) */
    uint8_t  size;         /* atomics: 4 or 8 */
    int8_t   status;       /* ANSWER: how the operation went */
    uint32_t length;       /* PUT, ANSWER: data bytes; GET: bytes asked */
    uint64_t addr;         /* owner's address; ANSWER: offset in the reply */
    uint64_t cookie;       /* GET, FAMO, CLEAN: the request; echoed by ANSWER */
    uint64_t value;        /* atomics: operand; ANSWER of FAMO: old value;
                            * CLEAN, INVAL: bytes */
    uct_cxl_iface_addr_t reply; /* GET, FAMO, CLEAN: where to answer */
    uint64_t compare;      /* CSWAP */
} UCS_S_PACKED uct_cxl_op_hdr_t;

/* A request that waits for its answer (requester side). */
struct uct_cxl_op {
    uint32_t              gen;
    unsigned              next_free;
    uct_cxl_ep_t         *ep;       /* NULL: free */
    uct_completion_t     *comp;
    int                   kind;     /* UCT_CXL_PROXY_GET_*, UCT_CXL_KIND_* */
    size_t                length;
    size_t                received;
    void                 *buffer;   /* atomic: result;
                                     * get_bcopy, pool put_short/bcopy:
                                     * staging, freed at the end */
    uint8_t              *pool_ptr; /* pool requests: the range, here */
    uint64_t              remote;   /* pool put: its owner's address */
    uct_unpack_callback_t unpack_cb;
    void                 *arg;
    size_t                iovcnt;
    uct_iov_t             iov[UCT_CXL_MAX_IOV];
    unsigned              size;     /* atomic result: 4 or 8 */
};

/* An answer that waits for room in the requester's block (owner side). */
struct uct_cxl_reply {
    ucs_list_link_t  list;
    uct_cxl_tx_t    *tx;
    uint64_t         cookie;
    const uint8_t   *src;           /* GET: data from offset src_off on */
    size_t           src_off;
    uint8_t         *copy;          /* ... copied aside, or NULL */
    size_t           length;
    size_t           done;
    uint64_t         value;         /* FAMO: the old value */
    int8_t           status;
};

/* The answer channel to a requester's interface, held until close. */
typedef struct {
    ucs_list_link_t  list;
    uct_cxl_tx_t    *tx;
} uct_cxl_reply_tx_t;

/* A record that follows a direct put's data, waiting for room (ep->due). */
typedef struct {
    ucs_list_link_t  list;
    uint8_t          op;            /* PUT of a partial line, or INVAL */
    uint8_t          length;        /* PUT: bytes in data */
    uint64_t         addr;
    uint64_t         value;         /* INVAL: bytes */
    uint8_t          data[UCT_CXL_LINE];
} uct_cxl_due_t;

#define UCT_CXL_OP_HDR  sizeof(uct_cxl_op_hdr_t)
/* the shortest header: everything before 'reply' */
#define UCT_CXL_OP_HDR_MIN  ucs_offsetof(uct_cxl_op_hdr_t, reply)
/* how often owners are checked for life while answers are due */
#define UCT_CXL_ALIVE_CHECK_MS  100
/* bytes of put_short/put_bcopy copies an endpoint keeps in flight */
#define UCT_CXL_STAGE_MAX       (1ul * 1024 * 1024)

static size_t uct_cxl_proxy_chunk(uct_cxl_iface_t *iface)
{
    return iface->seg_size - UCT_CXL_OP_HDR;
}

/* ------------------------------------------------------------------ */
/* requester                                                            */
/* ------------------------------------------------------------------ */

/* The endpoint leads to an interface of the key's owner. */
static ucs_status_t uct_cxl_proxy_check(uct_cxl_ep_t *ep,
                                        const uct_cxl_rkey_t *key,
                                        uint64_t remote_addr, size_t length)
{
    if (ucs_unlikely(ep->failed || ep->tx->failed)) {
        uct_cxl_ep_set_failed(ep); /* reported once */
        return UCS_ERR_CONNECTION_RESET; /* the block may be reused already */
    }
    if (!uct_cxl_rkey_covers(key, remote_addr + key->delta, length)) {
        ucs_error("cxl: %zu bytes at 0x%" PRIx64 " lie outside their remote "
                  "key", length, remote_addr);
        return UCS_ERR_INVALID_ADDR;
    }
    if (ucs_unlikely(ep->tx->peer->proc_id != key->owner)) {
        ucs_error("cxl: remote key of memory %s used on an endpoint to "
                  "another process (owner %" PRIx64 ", peer %" PRIx64 ")",
                  (key->pool == NULL) ? "outside the pool" :
                  "of another host", key->owner, ep->tx->peer->proc_id);
        return UCS_ERR_UNREACHABLE;
    }
    return UCS_OK;
}

/* Header bytes a record of hdr carries (data always follows all of it). */
static size_t uct_cxl_proxy_hdr_len(const uct_cxl_op_hdr_t *hdr,
                                    uint32_t data_len)
{
    if (data_len > 0) {
        return UCT_CXL_OP_HDR;
    }
    switch (hdr->op) {
    case UCT_CXL_OP_FAMO:
        return (hdr->amo == UCT_ATOMIC_OP_CSWAP) ? UCT_CXL_OP_HDR :
               ucs_offsetof(uct_cxl_op_hdr_t, compare);
    case UCT_CXL_OP_GET:
    case UCT_CXL_OP_CLEAN:
        return ucs_offsetof(uct_cxl_op_hdr_t, compare);
    default: /* AMO, INVAL, ANSWER without data, an empty PUT */
        return UCT_CXL_OP_HDR_MIN;
    }
}

/* Write one operation or answer record on a channel (room checked). */
static void uct_cxl_proxy_emit(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx,
                               const uct_cxl_op_hdr_t *hdr, const void *data,
                               uint32_t data_len)
{
    size_t hdr_len = uct_cxl_proxy_hdr_len(hdr, data_len);
    void *payload;

    payload = uct_cxl_tx_reserve_op(iface, tx, hdr_len + data_len);
    memcpy(payload, hdr, hdr_len);
    if (data_len > 0) {
        memcpy(UCS_PTR_BYTE_OFFSET(payload, hdr_len), data, data_len);
    }
    uct_cxl_tx_commit_op(iface, tx, payload, hdr_len + data_len);
}

/* ... an operation of the endpoint: its flush waits until it executed */
static void uct_cxl_proxy_emit_op(uct_cxl_ep_t *ep, const uct_cxl_op_hdr_t *hdr,
                                  const void *data, uint32_t data_len)
{
    uct_cxl_proxy_emit(uct_cxl_ep_iface(ep), ep->tx, hdr, data, data_len);
    ep->tx->op_head = ep->tx->head;
}

/* Push put chunks while the channel has room; returns bytes written. */
static size_t uct_cxl_proxy_put_chunks(uct_cxl_ep_t *ep, const uint8_t *data,
                                       size_t length, uint64_t addr)
{
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ep);
    size_t chunk_max       = uct_cxl_proxy_chunk(iface);
    uct_cxl_op_hdr_t hdr   = {0};
    size_t done            = 0;
    size_t chunk;

    hdr.op = UCT_CXL_OP_PUT;
    while (done < length) {
        chunk = ucs_min(length - done, chunk_max);
        if (!uct_cxl_tx_room(iface, ep->tx, UCT_CXL_OP_HDR + chunk)) {
            break;
        }
        hdr.length = (uint32_t)chunk;
        hdr.addr   = addr + done;
        uct_cxl_proxy_emit_op(ep, &hdr, data + done, (uint32_t)chunk);
        done += chunk;
    }
    return done;
}

/* The rest of a put goes out from progress; the caller's data is copied. */
static ucs_status_t uct_cxl_proxy_stream(uct_cxl_ep_t *ep, const uint8_t *data,
                                         size_t length, uint64_t addr)
{
    ep->stream.data = ucs_malloc(length, "cxl_put_stream");
    if (ep->stream.data == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    memcpy(ep->stream.data, data, length);
    ep->stream.length = length;
    ep->stream.done   = 0;
    ep->stream.addr   = addr;
    uct_cxl_ep_iface(ep)->proxy_busy = 1;
    return UCS_OK;
}

static ucs_status_t uct_cxl_proxy_pool_put(uct_cxl_ep_t *ep,
                                           const uct_cxl_rkey_t *key,
                                           const uct_iov_t *iov, size_t iovcnt,
                                           size_t length, uint64_t remote_addr,
                                           uct_completion_t *comp,
                                           void *staging);

/* A staging buffer of at least length bytes: the one kept from the last
 * put if it is large enough (no mmap and page faults per large put). */
static void *uct_cxl_proxy_staging_get(uct_cxl_iface_t *iface, size_t length)
{
    void *buf;

    if ((iface->staging != NULL) && (iface->staging_size >= length)) {
        buf            = iface->staging;
        iface->staging = NULL;
        return buf;
    }
    return ucs_malloc(length, "cxl_put_staging");
}

static void uct_cxl_proxy_staging_put(uct_cxl_iface_t *iface, void *buf,
                                      size_t length)
{
    if ((iface->staging == NULL) || (iface->staging_size < length)) {
        ucs_free(iface->staging);
        iface->staging      = buf;
        iface->staging_size = length;
    } else {
        ucs_free(buf);
    }
}

/*
 * put_short and put_bcopy complete on return: a large one into pool memory
 * of another host is copied aside and then goes the way of a put_zcopy
 * (one more copy, but at memcpy speed instead of streaming through the
 * owner).  The copies in flight are bounded (UCT_CXL_HOLD_STAGE).
 */
static ucs_status_t uct_cxl_proxy_pool_put_copy(uct_cxl_ep_t *ep,
                                                const uct_cxl_rkey_t *key,
                                                const void *data,
                                                size_t length,
                                                uint64_t remote_addr)
{
    uct_iov_t iov;
    ucs_status_t status;
    void *staging;

    /* what uct_cxl_proxy_pool_put would refuse, before copying */
    if ((ep->stream.data != NULL) || (ep->hold & ~UCT_CXL_HOLD_PUT)) {
        return UCS_ERR_NO_RESOURCE;
    }
    staging = uct_cxl_proxy_staging_get(uct_cxl_ep_iface(ep), length);
    if (staging == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    memcpy(staging, data, length);
    iov.buffer = staging;
    iov.length = length;
    iov.memh   = NULL;
    iov.stride = length;
    iov.count  = 1;
    status     = uct_cxl_proxy_pool_put(ep, key, &iov, 1, length, remote_addr,
                                        NULL, staging);
    if (status != UCS_INPROGRESS) {
        uct_cxl_proxy_staging_put(uct_cxl_ep_iface(ep), staging, length);
        return status;
    }
    return UCS_OK;
}

ucs_status_t uct_cxl_proxy_put(uct_cxl_ep_t *ep, const uct_cxl_rkey_t *key,
                               const void *data, size_t length,
                               uint64_t remote_addr)
{
    ucs_status_t status;
    size_t done;

    if ((key->pool != NULL) &&
        (length > uct_cxl_proxy_chunk(uct_cxl_ep_iface(ep)))) {
        return uct_cxl_proxy_pool_put_copy(ep, key, data, length,
                                           remote_addr);
    }
    status = uct_cxl_proxy_check(ep, key, remote_addr, length);
    if (status != UCS_OK) {
        return status;
    }
    status = uct_cxl_ep_send_check(ep, UCT_CXL_OP_HDR +
                                   ucs_min(length,
                                           uct_cxl_proxy_chunk(uct_cxl_ep_iface(ep))));
    if (status != UCS_OK) {
        return status;
    }

    done = uct_cxl_proxy_put_chunks(ep, data, length, remote_addr);
    if (done == length) {
        return UCS_OK;
    }
    /* larger than the room: locally complete, the rest streams */
    return uct_cxl_proxy_stream(ep, (const uint8_t*)data + done, length - done,
                                remote_addr + done);
}

ucs_status_t uct_cxl_proxy_put_iov(uct_cxl_ep_t *ep, const uct_cxl_rkey_t *key,
                                   const uct_iov_t *iov, size_t iovcnt,
                                   size_t length, uint64_t remote_addr,
                                   uct_completion_t *comp)
{
    ucs_iov_iter_t iter;
    ucs_status_t status;
    void *buf;

    /* pool memory: more than one record's worth is copied by the requester
     * itself, at memcpy speed, instead of streaming through the owner */
    if ((key->pool != NULL) &&
        (length > uct_cxl_proxy_chunk(uct_cxl_ep_iface(ep)))) {
        return uct_cxl_proxy_pool_put(ep, key, iov, iovcnt, length,
                                      remote_addr, comp, NULL);
    }
    if ((iovcnt == 1) && (iov[0].count == 1)) {
        return uct_cxl_proxy_put(ep, key, iov[0].buffer, length, remote_addr);
    }
    buf = ucs_malloc(length, "cxl_put_iov");
    if (buf == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    ucs_iov_iter_init(&iter);
    uct_iov_to_buffer(iov, iovcnt, &iter, buf, SIZE_MAX);
    status = uct_cxl_proxy_put(ep, key, buf, length, remote_addr);
    ucs_free(buf);
    return status;
}

static ucs_status_t uct_cxl_proxy_op_alloc(uct_cxl_iface_t *iface,
                                           unsigned *index_p)
{
    unsigned i, size;
    uct_cxl_op_t *ops;

    if (iface->ops_free == iface->ops_size) {
        size = ucs_max(iface->ops_size * 2, 64);
        ops  = ucs_realloc(iface->ops, size * sizeof(*ops), "cxl_ops");
        if (ops == NULL) {
            return UCS_ERR_NO_MEMORY;
        }
        for (i = iface->ops_size; i < size; ++i) {
            memset(&ops[i], 0, sizeof(ops[i]));
            ops[i].next_free = i + 1;
        }
        iface->ops      = ops;
        iface->ops_free = iface->ops_size;
        iface->ops_size = size;
    }
    *index_p        = iface->ops_free;
    iface->ops_free = iface->ops[*index_p].next_free;
    return UCS_OK;
}

/* Why later sends of ep must wait, after its state changed. */
static void uct_cxl_proxy_update_hold(uct_cxl_ep_t *ep)
{
    unsigned hold = 0;

    if (ep->put_wait > 0) {
        hold |= UCT_CXL_HOLD_PUT;
    }
    if (ep->staged >= UCT_CXL_STAGE_MAX) {
        hold |= UCT_CXL_HOLD_STAGE;
    }
    if (!ucs_list_is_empty(&ep->due)) {
        hold |= UCT_CXL_HOLD_DUE;
    }
    if ((ep->hold & UCT_CXL_HOLD_FENCE) && (ep->outstanding > 0)) {
        hold |= UCT_CXL_HOLD_FENCE;
    }
    ep->hold = hold;
}

static void uct_cxl_proxy_op_release(uct_cxl_iface_t *iface, unsigned index)
{
    uct_cxl_op_t *op = &iface->ops[index];

    if (op->kind == UCT_CXL_PROXY_GET_BCOPY) {
        ucs_free(op->buffer);
    } else if (op->kind == UCT_CXL_KIND_POOL_PUT) {
        op->ep->put_wait--;
        if (op->buffer != NULL) {
            op->ep->staged -= op->length;
            uct_cxl_proxy_staging_put(iface, op->buffer, op->length);
        }
    }
    op->ep->outstanding--;
    uct_cxl_proxy_update_hold(op->ep);
    op->ep        = NULL;
    op->gen++;
    op->next_free = iface->ops_free;
    iface->ops_free = index;
}

/* A request that will wait for an answer, or NULL and *status_p; the
 * caller checked that its record can be sent. */
static uct_cxl_op_t *uct_cxl_proxy_op_new(uct_cxl_ep_t *ep, int kind,
                                          uct_completion_t *comp,
                                          ucs_status_t *status_p)
{
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ep);
    uct_cxl_op_t *op;
    unsigned index;

    *status_p = uct_cxl_proxy_op_alloc(iface, &index);
    if (*status_p != UCS_OK) {
        return NULL;
    }
    op            = &iface->ops[index];
    op->ep        = ep;
    op->comp      = comp;
    op->kind      = kind;
    op->length    = 0;
    op->received  = 0;
    op->buffer    = NULL;
    op->unpack_cb = NULL;
    op->arg       = NULL;
    op->iovcnt    = 0;
    op->size      = 0;
    op->pool_ptr  = NULL;
    op->remote    = 0;
    ep->outstanding++;
    iface->proxy_busy = 1; /* progress watches the owner's life meanwhile */
    return op;
}

/* Send the request record of op. */
static ucs_status_t uct_cxl_proxy_op_send(uct_cxl_ep_t *ep, uct_cxl_op_t *op,
                                          uct_cxl_op_hdr_t *hdr)
{
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ep);

    hdr->cookie             = ((uint64_t)op->gen << 32) | (op - iface->ops);
    hdr->reply.block_offset = iface->block_offset;
    hdr->reply.id           = iface->id;
    uct_cxl_proxy_emit_op(ep, hdr, NULL, 0);
    return UCS_INPROGRESS;
}

/* Bytes of a direct put before its first whole line, and its whole lines
 * (the rest is the partial last line). */
static void uct_cxl_proxy_put_split(const uint8_t *dst, size_t length,
                                    size_t *head_p, size_t *body_p)
{
    size_t head = (UCT_CXL_LINE - ((uintptr_t)dst & (UCT_CXL_LINE - 1))) &
                  (UCT_CXL_LINE - 1);

    *head_p = ucs_min(head, length);
    *body_p = (length - *head_p) & ~(size_t)(UCT_CXL_LINE - 1);
}

/*
 * A put into pool memory of another host, larger than one record: the
 * owner writes back and invalidates the whole lines first, so that no
 * dirty line of its overwrites the data later; the data is copied when
 * the answer arrives (uct_cxl_proxy_pool_write).
 */
static ucs_status_t uct_cxl_proxy_pool_put(uct_cxl_ep_t *ep,
                                           const uct_cxl_rkey_t *key,
                                           const uct_iov_t *iov, size_t iovcnt,
                                           size_t length, uint64_t remote_addr,
                                           uct_completion_t *comp,
                                           void *staging)
{
    uct_cxl_op_hdr_t hdr = {0};
    size_t head, body;
    ucs_status_t status;
    uct_cxl_op_t *op;
    unsigned hold;

    UCT_CHECK_PARAM(iovcnt <= UCT_CXL_MAX_IOV, "iovcnt %zu > %d", iovcnt,
                    UCT_CXL_MAX_IOV);
    status = uct_cxl_proxy_check(ep, key, remote_addr, length);
    if (status != UCS_OK) {
        return status;
    }
    /* earlier direct puts need not be waited for: the owner answers in
     * order, and the data and records of each go out in that order */
    hold      = ep->hold;
    ep->hold &= ~UCT_CXL_HOLD_PUT;
    status    = uct_cxl_ep_send_check(ep, UCT_CXL_OP_HDR);
    ep->hold  = hold;
    if (status != UCS_OK) {
        return status;
    }
    op = uct_cxl_proxy_op_new(ep, UCT_CXL_KIND_POOL_PUT, comp, &status);
    if (op == NULL) {
        return status;
    }
    op->length   = length;
    op->pool_ptr = (uint8_t*)(uintptr_t)(remote_addr + key->delta);
    op->remote   = remote_addr;
    op->iovcnt   = iovcnt;
    op->buffer   = staging;
    memcpy(op->iov, iov, iovcnt * sizeof(*iov));
    ep->put_wait++;
    if (staging != NULL) {
        ep->staged += length;
    }
    uct_cxl_proxy_update_hold(ep);

    uct_cxl_proxy_put_split(op->pool_ptr, length, &head, &body);
    hdr.op    = UCT_CXL_OP_CLEAN;
    hdr.addr  = remote_addr + head;
    hdr.value = body;
    return uct_cxl_proxy_op_send(ep, op, &hdr);
}

/* A get from pool memory of another host: the owner writes back its
 * stores first, then the requester reads memory itself. */
static ucs_status_t uct_cxl_proxy_pool_get(uct_cxl_ep_t *ep,
                                           const uct_cxl_rkey_t *key, int kind,
                                           uct_unpack_callback_t unpack_cb,
                                           void *arg, const uct_iov_t *iov,
                                           size_t iovcnt, size_t length,
                                           uint64_t remote_addr,
                                           uct_completion_t *comp)
{
    uct_cxl_op_hdr_t hdr = {0};
    ucs_status_t status;
    uct_cxl_op_t *op;

    status = uct_cxl_ep_send_check(ep, UCT_CXL_OP_HDR);
    if (status != UCS_OK) {
        return status;
    }
    op = uct_cxl_proxy_op_new(ep, (kind == UCT_CXL_PROXY_GET_BCOPY) ?
                                  UCT_CXL_KIND_POOL_GET_BCOPY :
                                  UCT_CXL_KIND_POOL_GET_ZCOPY,
                              comp, &status);
    if (op == NULL) {
        return status;
    }
    op->length    = length;
    op->pool_ptr  = (uint8_t*)(uintptr_t)(remote_addr + key->delta);
    op->unpack_cb = unpack_cb;
    op->arg       = arg;
    op->iovcnt    = iovcnt;
    if (iovcnt > 0) {
        memcpy(op->iov, iov, iovcnt * sizeof(*iov));
    }
    hdr.op    = UCT_CXL_OP_CLEAN;
    hdr.addr  = remote_addr;
    hdr.value = length;
    return uct_cxl_proxy_op_send(ep, op, &hdr);
}

ucs_status_t uct_cxl_proxy_get(uct_cxl_ep_t *ep, const uct_cxl_rkey_t *key,
                               int kind, void *buffer,
                               uct_unpack_callback_t unpack_cb, void *arg,
                               const uct_iov_t *iov, size_t iovcnt,
                               size_t length, uint64_t remote_addr,
                               uct_completion_t *comp)
{
    uct_cxl_op_hdr_t hdr = {0};
    ucs_status_t status;
    uct_cxl_op_t *op;

    UCT_CHECK_PARAM(iovcnt <= UCT_CXL_MAX_IOV, "iovcnt %zu > %d", iovcnt,
                    UCT_CXL_MAX_IOV);
    status = uct_cxl_proxy_check(ep, key, remote_addr, length);
    if (status != UCS_OK) {
        return status;
    }
    if (key->pool != NULL) {
        return uct_cxl_proxy_pool_get(ep, key, kind, unpack_cb, arg, iov,
                                      iovcnt, length, remote_addr, comp);
    }
    if (length > UINT32_MAX) {
        return UCS_ERR_INVALID_PARAM;
    }
    status = uct_cxl_ep_send_check(ep, UCT_CXL_OP_HDR);
    if (status != UCS_OK) {
        return status;
    }
    op = uct_cxl_proxy_op_new(ep, kind, comp, &status);
    if (op == NULL) {
        return status;
    }
    op->length    = length;
    op->buffer    = buffer;
    op->unpack_cb = unpack_cb;
    op->arg       = arg;
    op->iovcnt    = iovcnt;
    if (iovcnt > 0) {
        memcpy(op->iov, iov, iovcnt * sizeof(*iov));
    }
    if (kind == UCT_CXL_PROXY_GET_BCOPY) {
        op->buffer = ucs_malloc(length, "cxl_get_bcopy"); /* staging */
        if (op->buffer == NULL) {
            uct_cxl_proxy_op_release(uct_cxl_ep_iface(ep),
                                     op - uct_cxl_ep_iface(ep)->ops);
            return UCS_ERR_NO_MEMORY;
        }
    }
    hdr.op     = UCT_CXL_OP_GET;
    hdr.length = (uint32_t)length;
    hdr.addr   = remote_addr;
    return uct_cxl_proxy_op_send(ep, op, &hdr);
}

ucs_status_t uct_cxl_proxy_amo(uct_cxl_ep_t *ep, const uct_cxl_rkey_t *key,
                               unsigned opcode, unsigned size, uint64_t value,
                               uint64_t compare, void *result,
                               uint64_t remote_addr, uct_completion_t *comp)
{
    uct_cxl_op_hdr_t hdr = {0};
    ucs_status_t status;
    uct_cxl_op_t *op;

    status = uct_cxl_proxy_check(ep, key, remote_addr, size);
    if (status != UCS_OK) {
        return status;
    }
    if (remote_addr % size) {
        ucs_error("cxl: atomic on %u bytes at 0x%" PRIx64 " is misaligned",
                  size, remote_addr);
        return UCS_ERR_INVALID_ADDR;
    }
    hdr.amo     = (uint8_t)opcode;
    hdr.size    = (uint8_t)size;
    hdr.addr    = remote_addr;
    hdr.value   = value;
    hdr.compare = compare;
    if (result == NULL) {
        status = uct_cxl_ep_send_check(ep, UCT_CXL_OP_HDR);
        if (status != UCS_OK) {
            return status;
        }
        hdr.op = UCT_CXL_OP_AMO;
        uct_cxl_proxy_emit_op(ep, &hdr, NULL, 0);
        return UCS_OK;
    }

    status = uct_cxl_ep_send_check(ep, UCT_CXL_OP_HDR);
    if (status != UCS_OK) {
        return status;
    }
    op = uct_cxl_proxy_op_new(ep, UCT_CXL_KIND_AMO, comp, &status);
    if (op == NULL) {
        return status;
    }
    op->buffer = result;
    op->size   = size;
    hdr.op     = UCT_CXL_OP_FAMO;
    return uct_cxl_proxy_op_send(ep, op, &hdr);
}

/* Scatter answer data at offset into the request's destination. */
static void uct_cxl_proxy_deliver(uct_cxl_op_t *op, size_t offset,
                                  const uint8_t *data, size_t length)
{
    size_t i, j, pos = 0, n;
    uint8_t *dst;

    if ((op->kind != UCT_CXL_PROXY_GET_ZCOPY) &&
        (op->kind != UCT_CXL_KIND_POOL_GET_ZCOPY)) {
        memcpy((uint8_t*)op->buffer + offset, data, length);
        return;
    }
    for (i = 0; (i < op->iovcnt) && (length > 0); ++i) {
        for (j = 0; (j < op->iov[i].count) && (length > 0); ++j) {
            if (offset < pos + op->iov[i].length) {
                dst = (uint8_t*)op->iov[i].buffer + j * op->iov[i].stride +
                      (offset - pos);
                n   = ucs_min(length, pos + op->iov[i].length - offset);
                memcpy(dst, data, n);
                data   += n;
                offset += n;
                length -= n;
            }
            pos += op->iov[i].length;
        }
    }
}

static void uct_cxl_proxy_complete(uct_cxl_iface_t *iface, unsigned index,
                                   ucs_status_t status)
{
    uct_cxl_op_t *op       = &iface->ops[index];
    uct_completion_t *comp = op->comp;

    if ((status == UCS_OK) && (op->kind == UCT_CXL_PROXY_GET_BCOPY)) {
        op->unpack_cb(op->arg, op->buffer, op->length);
    }
    uct_cxl_proxy_op_release(iface, index);
    if (comp != NULL) {
        uct_invoke_completion(comp, status);
    }
}

/*
 * Copy into pool memory that is to be written back at once: whole lines
 * with non-temporal stores, which go to memory without filling the cache
 * (the write-back that follows then finds little to do, a copy and a
 * write-back of dirty lines cost about three times as much); the rest of
 * a line with plain stores, so that no line mixes both kinds.
 */
static void uct_cxl_proxy_copy_out(uint8_t *dst, const uint8_t *src,
                                   size_t length)
{
#if defined(__x86_64__)
    size_t head = (UCT_CXL_LINE - ((uintptr_t)dst & (UCT_CXL_LINE - 1))) &
                  (UCT_CXL_LINE - 1);
    size_t i, lines;

    if (length < head + UCT_CXL_LINE) {
        memcpy(dst, src, length);
        return;
    }
    memcpy(dst, src, head);
    dst    += head;
    src    += head;
    length -= head;
    lines   = length / UCT_CXL_LINE;
    for (i = 0; i < lines * (UCT_CXL_LINE / 16); ++i) {
        _mm_stream_si128((__m128i*)dst + i,
                         _mm_loadu_si128((const __m128i*)src + i));
    }
    memcpy(dst + lines * UCT_CXL_LINE, src + lines * UCT_CXL_LINE,
           length - lines * UCT_CXL_LINE);
#else
    memcpy(dst, src, length);
#endif
}

/* Copy length bytes from offset on of an iov (count and stride honoured);
 * out: into pool memory about to be written back. */
static void uct_cxl_proxy_iov_gather(const uct_iov_t *iov, size_t iovcnt,
                                     size_t offset, uint8_t *dst, size_t length,
                                     int out)
{
    size_t i, j, pos = 0, n;
    const uint8_t *src;

    for (i = 0; (i < iovcnt) && (length > 0); ++i) {
        for (j = 0; (j < iov[i].count) && (length > 0); ++j) {
            if (offset < pos + iov[i].length) {
                n   = ucs_min(length, pos + iov[i].length - offset);
                src = (const uint8_t*)iov[i].buffer + j * iov[i].stride +
                      (offset - pos);
                if (out) {
                    uct_cxl_proxy_copy_out(dst, src, n);
                } else {
                    memcpy(dst, src, n);
                }
                dst    += n;
                offset += n;
                length -= n;
            }
            pos += iov[i].length;
        }
    }
}

/* Send a due record if the channel has room; 1 when sent. */
static int uct_cxl_proxy_due_send(uct_cxl_ep_t *ep, const uct_cxl_due_t *due)
{
    uct_cxl_op_hdr_t hdr = {0};

    if (!uct_cxl_tx_room(uct_cxl_ep_iface(ep), ep->tx,
                         UCT_CXL_OP_HDR + due->length)) {
        return 0;
    }
    hdr.op     = due->op;
    hdr.addr   = due->addr;
    hdr.value  = due->value;
    hdr.length = due->length;
    uct_cxl_proxy_emit_op(ep, &hdr, due->data, due->length);
    return 1;
}

/* A record that must follow a direct put's data: sent now, or queued in
 * order behind the endpoint's earlier ones (nothing passes them). */
static void uct_cxl_proxy_due(uct_cxl_ep_t *ep, uint8_t op, uint64_t addr,
                              uint64_t value, const uint8_t *data,
                              size_t length)
{
    uct_cxl_due_t tmp, *due;

    ucs_assert(length <= sizeof(tmp.data));
    tmp.op     = op;
    tmp.length = (uint8_t)length;
    tmp.addr   = addr;
    tmp.value  = value;
    if (length > 0) {
        memcpy(tmp.data, data, length);
    }
    if (ucs_list_is_empty(&ep->due) && uct_cxl_proxy_due_send(ep, &tmp)) {
        return;
    }
    due = ucs_malloc(sizeof(*due), "cxl_due");
    if (due == NULL) {
        /* the owner would keep stale lines of the put: fail instead */
        ucs_error("cxl: no memory to queue a record of a put; the endpoint "
                  "fails");
        uct_cxl_ep_set_failed(ep);
        return;
    }
    *due = tmp;
    ucs_list_add_tail(&ep->due, &due->list);
    ep->hold |= UCT_CXL_HOLD_DUE;
    uct_cxl_ep_iface(ep)->proxy_busy = 1;
}

/* Queued due records of ep go out while there is room; how many did. */
static unsigned uct_cxl_proxy_due_progress(uct_cxl_ep_t *ep)
{
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ep);
    unsigned count         = 0;
    uct_cxl_due_t *due;
    int gone;

    if (!ep->failed && !ep->tx->failed &&
        !uct_cxl_tx_peer_current(iface, ep->tx)) {
        ep->tx->failed = 1; /* never write into a block given up */
        uct_cxl_ep_set_failed(ep);
    }
    gone = ep->failed || ep->tx->failed;

    while (!ucs_list_is_empty(&ep->due)) {
        due = ucs_list_head(&ep->due, uct_cxl_due_t, list);
        if (!gone && !uct_cxl_proxy_due_send(ep, due)) {
            break;
        }
        ucs_list_del(&due->list);
        ucs_free(due);
        ++count;
    }
    uct_cxl_proxy_update_hold(ep);
    return count;
}

/* The owner cleaned the range of a get: read it from memory. */
static void uct_cxl_proxy_pool_read(uct_cxl_iface_t *iface, uct_cxl_op_t *op)
{
    /* lines of an earlier read of this host may be stale now */
    cxl_coh_invalidate(iface->coh, op->pool_ptr, op->length);
    if (op->kind == UCT_CXL_KIND_POOL_GET_BCOPY) {
        op->unpack_cb(op->arg, op->pool_ptr, op->length);
    } else {
        uct_cxl_proxy_deliver(op, 0, op->pool_ptr, op->length);
    }
}

/*
 * The owner cleaned the whole lines of a put: write them and write them
 * back; the partial first and last lines go to the owner to store (a peer
 * may store into the rest of them), and the owner then drops what it may
 * have loaded of the whole lines since it cleaned them.  The records'
 * publish fences the write-back before them.
 */
static void uct_cxl_proxy_pool_write(uct_cxl_iface_t *iface, uct_cxl_op_t *op)
{
    uint8_t head_data[UCT_CXL_LINE], tail_data[UCT_CXL_LINE];
    uct_cxl_ep_t *ep = op->ep;
    size_t head, body, tail;

    uct_cxl_proxy_put_split(op->pool_ptr, op->length, &head, &body);
    tail = op->length - head - body;
    uct_cxl_proxy_iov_gather(op->iov, op->iovcnt, 0, head_data, head, 0);
    uct_cxl_proxy_iov_gather(op->iov, op->iovcnt, head, op->pool_ptr + head,
                             body, 1);
    uct_cxl_proxy_iov_gather(op->iov, op->iovcnt, head + body, tail_data,
                             tail, 0);
    /* also what the non-temporal stores left in the cache (the emulator
     * sees nothing else) */
    cxl_coh_writeback(iface->coh, op->pool_ptr + head, body);

    uct_cxl_proxy_due(ep, UCT_CXL_OP_INVAL, op->remote + head, body, NULL, 0);
    if (head > 0) {
        uct_cxl_proxy_due(ep, UCT_CXL_OP_PUT, op->remote, 0, head_data, head);
    }
    if (tail > 0) {
        uct_cxl_proxy_due(ep, UCT_CXL_OP_PUT, op->remote + head + body, 0,
                          tail_data, tail);
    }
}

static void uct_cxl_proxy_answer(uct_cxl_iface_t *iface,
                                 const uct_cxl_op_hdr_t *hdr,
                                 const uint8_t *data, uint32_t data_len)
{
    unsigned index   = (unsigned)(hdr->cookie & UINT32_MAX);
    uint32_t gen     = (uint32_t)(hdr->cookie >> 32);
    uct_cxl_op_t *op;

    if ((index >= iface->ops_size) || (iface->ops[index].ep == NULL) ||
        (iface->ops[index].gen != gen)) {
        ucs_debug("cxl: answer to a request that is gone (cookie 0x%" PRIx64
                  ")", hdr->cookie);
        return;
    }
    op = &iface->ops[index];
    if (hdr->status != UCS_OK) {
        uct_cxl_proxy_complete(iface, index, (ucs_status_t)hdr->status);
        return;
    }
    if ((op->kind == UCT_CXL_KIND_POOL_GET_BCOPY) ||
        (op->kind == UCT_CXL_KIND_POOL_GET_ZCOPY)) {
        uct_cxl_proxy_pool_read(iface, op);
        uct_cxl_proxy_complete(iface, index, UCS_OK);
        return;
    }
    if (op->kind == UCT_CXL_KIND_POOL_PUT) {
        uct_cxl_proxy_pool_write(iface, op);
        uct_cxl_proxy_complete(iface, index, UCS_OK);
        return;
    }
    if (op->kind < 0) {
        if (op->size == sizeof(uint32_t)) {
            *(uint32_t*)op->buffer = (uint32_t)hdr->value;
        } else {
            *(uint64_t*)op->buffer = hdr->value;
        }
        uct_cxl_proxy_complete(iface, index, UCS_OK);
        return;
    }
    if ((hdr->addr > op->length) || (data_len > op->length - hdr->addr)) {
        ucs_error("cxl: answer of %u bytes at %" PRIu64 " does not fit a "
                  "request of %zu bytes", data_len, hdr->addr, op->length);
        uct_cxl_proxy_complete(iface, index, UCS_ERR_IO_ERROR);
        return;
    }
    uct_cxl_proxy_deliver(op, hdr->addr, data, data_len);
    op->received += data_len;
    if (op->received == op->length) {
        uct_cxl_proxy_complete(iface, index, UCS_OK);
    }
}

/* ------------------------------------------------------------------ */
/* owner                                                                */
/* ------------------------------------------------------------------ */

/* Compare-and-swap, or the operation UCT_CXL_AMO_APPLY does; old value. */
#define UCT_CXL_PROXY_AMO(_type, _hdr, _old_p) \
    ({ \
        _type *_pp = (_type*)(uintptr_t)(_hdr)->addr; \
        _type  _c = (_type)(_hdr)->compare; \
        ucs_status_t _pst = UCS_OK; \
        if ((_hdr)->amo == UCT_ATOMIC_OP_CSWAP) { \
            __atomic_compare_exchange_n(_pp, &_c, (_type)(_hdr)->value, 0, \
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); \
            *(_old_p) = _c; \
        } else { \
            _pst = UCT_CXL_AMO_APPLY(_type, _pp, (_hdr)->amo, \
                                     (_type)(_hdr)->value, _old_p); \
        } \
        _pst; \
    })

static ucs_status_t uct_cxl_proxy_apply_amo(const uct_cxl_op_hdr_t *hdr,
                                            uint64_t *old)
{
    uint32_t old32 = 0;
    ucs_status_t status;

    if ((hdr->size != 4) && (hdr->size != 8)) {
        return UCS_ERR_INVALID_PARAM;
    }
    if ((hdr->addr % hdr->size) ||
        !uct_cxl_local_reg_covers(hdr->addr, hdr->size)) {
        return UCS_ERR_INVALID_ADDR;
    }
    if (hdr->size == 4) {
        status = UCT_CXL_PROXY_AMO(uint32_t, hdr, &old32);
        *old   = old32;
        return status;
    }
    return UCT_CXL_PROXY_AMO(uint64_t, hdr, old);
}

/* The channel to answer on, shared with endpoints to the requester (if
 * any); answers hold a reference until the interface closes, so that an
 * answer never outlives its channel. */
static uct_cxl_tx_t *uct_cxl_proxy_reply_tx(uct_cxl_iface_t *iface,
                                            const uct_cxl_iface_addr_t *addr)
{
    uct_cxl_reply_tx_t *rtx;

    ucs_list_for_each(rtx, &iface->reply_txs, list) {
        if ((rtx->tx->block_offset == addr->block_offset) &&
            (rtx->tx->peer_id == addr->id) && !rtx->tx->failed) {
            return rtx->tx;
        }
    }
    rtx = ucs_malloc(sizeof(*rtx), "cxl_reply_tx");
    if (rtx == NULL) {
        return NULL;
    }
    if (uct_cxl_tx_get(iface, addr, &rtx->tx) != UCS_OK) {
        ucs_free(rtx);
        return NULL;
    }
    ucs_list_add_tail(&iface->reply_txs, &rtx->list);
    return rtx->tx;
}

/* Send what fits of an answer; 1 when all of it is out. */
static int uct_cxl_proxy_reply_push(uct_cxl_iface_t *iface,
                                    uct_cxl_reply_t *reply)
{
    size_t chunk_max     = uct_cxl_proxy_chunk(iface);
    uct_cxl_op_hdr_t hdr = {0};
    size_t chunk;

    hdr.op     = UCT_CXL_OP_ANSWER;
    hdr.cookie = reply->cookie;
    hdr.status = reply->status;
    hdr.value  = reply->value;
    /* at least one record: an answer without data carries status or value */
    do {
        if (reply->tx->failed || !uct_cxl_tx_peer_current(iface, reply->tx)) {
            return 1; /* the requester is gone: nobody to answer */
        }
        chunk = ucs_min(reply->length - reply->done, chunk_max);
        if (!uct_cxl_tx_room(iface, reply->tx, UCT_CXL_OP_HDR + chunk)) {
            return 0;
        }
        hdr.addr   = reply->done;
        hdr.length = (uint32_t)chunk;
        uct_cxl_proxy_emit(iface, reply->tx, &hdr, (chunk == 0) ? NULL :
                           reply->src + (reply->done - reply->src_off),
                           (uint32_t)chunk);
        reply->done += chunk;
    } while (reply->done < reply->length);
    return 1;
}

static void uct_cxl_proxy_reply(uct_cxl_iface_t *iface,
                                const uct_cxl_op_hdr_t *hdr,
                                ucs_status_t status, uint64_t value)
{
    uct_cxl_reply_t tmp = {}, *reply;
    uct_cxl_tx_t *tx;

    tx = uct_cxl_proxy_reply_tx(iface, &hdr->reply);
    if (tx == NULL) {
        ucs_debug("cxl: cannot answer interface 0x%" PRIx64 " (gone?)",
                  hdr->reply.id);
        return;
    }
    tmp.tx     = tx;
    tmp.cookie = hdr->cookie;
    tmp.value  = value;
    tmp.status = (int8_t)status;
    if ((hdr->op == UCT_CXL_OP_GET) && (status == UCS_OK)) {
        tmp.src    = (const uint8_t*)(uintptr_t)hdr->addr;
        tmp.length = hdr->length;
    }
    /* answers leave in order: only an empty queue may send at once; what
     * waits is kept (no allocation for the answers that go out at once) */
    if (ucs_list_is_empty(&iface->replies) &&
        uct_cxl_proxy_reply_push(iface, &tmp)) {
        return;
    }
    reply = ucs_malloc(sizeof(*reply), "cxl_reply");
    if (reply == NULL) {
        ucs_error("cxl: no memory for an answer; the requester will wait");
        return;
    }
    *reply            = tmp;
    iface->proxy_busy = 1;
    ucs_list_add_tail(&iface->replies, &reply->list);
}

/* Another operation executes: answers still streaming from the owner's
 * memory take what they have left now, before it can change. */
static void uct_cxl_proxy_snapshot(uct_cxl_iface_t *iface)
{
    uct_cxl_reply_t *reply;
    size_t left;

    ucs_list_for_each(reply, &iface->replies, list) {
        left = reply->length - reply->done;
        if ((reply->copy != NULL) || (left == 0)) {
            continue;
        }
        reply->copy = ucs_malloc(left, "cxl_answer");
        if (reply->copy == NULL) {
            ucs_error("cxl: no memory to keep %zu bytes of an answer; it "
                      "fails", left);
            reply->status = UCS_ERR_NO_MEMORY;
            reply->length = reply->done; /* a bare status, no more data */
            continue;
        }
        memcpy(reply->copy, reply->src + (reply->done - reply->src_off), left);
        reply->src     = reply->copy;
        reply->src_off = reply->done;
    }
}

void uct_cxl_proxy_handle(uct_cxl_iface_t *iface, unsigned index,
                          const void *payload, uint32_t length)
{
    const uint8_t *data = (const uint8_t*)payload + UCT_CXL_OP_HDR;
    ucs_status_t status = UCS_OK;
    uint64_t old        = 0;
    uct_cxl_op_hdr_t h  = {0};
    const uct_cxl_op_hdr_t *hdr = &h;

    /* fields a short record leaves out are 0 */
    memcpy(&h, payload, ucs_min(length, UCT_CXL_OP_HDR));
    if ((length < UCT_CXL_OP_HDR_MIN) ||
        (((h.op == UCT_CXL_OP_PUT) || (h.op == UCT_CXL_OP_ANSWER)) &&
         (h.length > 0) &&
         ((length < UCT_CXL_OP_HDR) || (h.length > length - UCT_CXL_OP_HDR)))) {
        ucs_error("cxl: malformed operation record in channel %u", index);
        return;
    }

    if ((hdr->op != UCT_CXL_OP_ANSWER) && !ucs_list_is_empty(&iface->replies)) {
        uct_cxl_proxy_snapshot(iface);
    }

    switch (hdr->op) {
    case UCT_CXL_OP_PUT:
        if (!uct_cxl_local_reg_covers(hdr->addr, hdr->length)) {
            ucs_error("cxl: put of %u bytes at 0x%" PRIx64 " is outside this "
                      "process's registered memory; dropped", hdr->length,
                      hdr->addr);
            return;
        }
        memcpy((void*)(uintptr_t)hdr->addr, data, hdr->length);
        return;
    case UCT_CXL_OP_AMO:
        status = uct_cxl_proxy_apply_amo(hdr, &old);
        if (status != UCS_OK) {
            ucs_error("cxl: atomic at 0x%" PRIx64 " failed: %s; dropped",
                      hdr->addr, ucs_status_string(status));
        }
        return;
    case UCT_CXL_OP_FAMO:
        status = uct_cxl_proxy_apply_amo(hdr, &old);
        uct_cxl_proxy_reply(iface, hdr, status, old);
        return;
    case UCT_CXL_OP_GET:
        if (!uct_cxl_local_reg_covers(hdr->addr, hdr->length)) {
            status = UCS_ERR_INVALID_ADDR;
        }
        uct_cxl_proxy_reply(iface, hdr, status, 0);
        return;
    case UCT_CXL_OP_CLEAN:
        /* this host may hold the latest stores, or lines a peer's put
         * would be overwritten by: write back and drop them */
        if (!uct_cxl_local_reg_covers(hdr->addr, hdr->value)) {
            status = UCS_ERR_INVALID_ADDR;
        } else if (iface->test_skip_owner != UCT_CXL_TEST_SKIP_WRITEBACK) {
            cxl_coh_invalidate(iface->coh, (const void*)(uintptr_t)hdr->addr,
                               hdr->value);
        }
        uct_cxl_proxy_reply(iface, hdr, status, 0);
        return;
    case UCT_CXL_OP_INVAL:
        /* a peer wrote the lines: drop what this host loaded of them */
        if (!uct_cxl_local_reg_covers(hdr->addr, hdr->value)) {
            ucs_error("cxl: invalidate of %" PRIu64 " bytes at 0x%" PRIx64
                      " is outside this process's registered memory; "
                      "dropped", hdr->value, hdr->addr);
        } else if (iface->test_skip_owner != UCT_CXL_TEST_SKIP_INVALIDATE) {
            cxl_coh_invalidate(iface->coh, (const void*)(uintptr_t)hdr->addr,
                               hdr->value);
        }
        return;
    case UCT_CXL_OP_ANSWER:
        uct_cxl_proxy_answer(iface, hdr, data, hdr->length);
        return;
    default:
        ucs_error("cxl: unknown operation %u in channel %u", hdr->op, index);
        return;
    }
}

/* ------------------------------------------------------------------ */
/* progress, flush, failure                                             */
/* ------------------------------------------------------------------ */

int uct_cxl_proxy_ep_idle(uct_cxl_ep_t *ep)
{
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ep);
    uct_cxl_tx_t *tx       = ep->tx;

    if ((ep->outstanding > 0) || (ep->stream.data != NULL) ||
        !ucs_list_is_empty(&ep->due)) {
        return 0;
    }
    if (ep->failed || tx->failed || (tx->cached_tail >= tx->op_head)) {
        return 1;
    }
    /* executed once the owner consumed the channel up to the last one */
    cxl_coh_invalidate(iface->coh, (const void*)&tx->chan->tail, UCT_CXL_LINE);
    tx->cached_tail = tx->chan->tail;
    return tx->cached_tail >= tx->op_head;
}

typedef struct {
    ucs_list_link_t   list;
    uct_completion_t *comp;
} uct_cxl_flush_req_t;

ucs_status_t uct_cxl_proxy_ep_flush(uct_cxl_ep_t *ep, uct_completion_t *comp)
{
    uct_cxl_flush_req_t *req;

    if (ucs_list_is_empty(&ep->flush_list) && uct_cxl_proxy_ep_idle(ep)) {
        return UCS_OK;
    }
    if (comp != NULL) {
        req = ucs_malloc(sizeof(*req), "cxl_flush");
        if (req == NULL) {
            return UCS_ERR_NO_MEMORY;
        }
        req->comp = comp;
        ucs_list_add_tail(&ep->flush_list, &req->list);
        uct_cxl_ep_iface(ep)->proxy_busy = 1;
    }
    return UCS_INPROGRESS;
}

/* Complete the waiting flushes with status (or just forget them). */
static void uct_cxl_proxy_flushes_done(uct_cxl_ep_t *ep, ucs_status_t status,
                                       int notify)
{
    uct_cxl_flush_req_t *req;

    while (!ucs_list_is_empty(&ep->flush_list)) {
        req = ucs_list_extract_head(&ep->flush_list, uct_cxl_flush_req_t, list);
        if (notify) {
            uct_invoke_completion(req->comp, status);
        }
        ucs_free(req);
    }
}

/* Drop what the endpoint still waits for; notify: complete it with status. */
static void uct_cxl_proxy_ep_drop(uct_cxl_ep_t *ep, ucs_status_t status,
                                  int notify)
{
    uct_cxl_iface_t *iface = uct_cxl_ep_iface(ep);
    unsigned i;

    for (i = 0; (i < iface->ops_size) && (ep->outstanding > 0); ++i) {
        if (iface->ops[i].ep != ep) {
            continue;
        }
        if (notify) {
            uct_cxl_proxy_complete(iface, i, status);
        } else {
            uct_cxl_proxy_op_release(iface, i);
        }
    }
    ucs_free(ep->stream.data);
    ep->stream.data = NULL;
    while (!ucs_list_is_empty(&ep->due)) {
        ucs_free(ucs_list_extract_head(&ep->due, uct_cxl_due_t, list));
    }
    uct_cxl_proxy_update_hold(ep);
    uct_cxl_proxy_flushes_done(ep, status, notify);
}

void uct_cxl_proxy_ep_fence(uct_cxl_ep_t *ep)
{
    /* the requester moves the data of pool requests itself, after the
     * answer: later operations must not overtake them meanwhile */
    if (ep->outstanding > 0) {
        ep->hold |= UCT_CXL_HOLD_FENCE;
    }
}

/* Fail what the endpoint still waits for (peer gone, or flush cancel). */
void uct_cxl_proxy_ep_fail(uct_cxl_ep_t *ep, ucs_status_t status)
{
    uct_cxl_proxy_ep_drop(ep, status, 1);
}

/* Endpoint destroyed: forget its requests without calling anybody back. */
void uct_cxl_proxy_ep_cleanup(uct_cxl_ep_t *ep)
{
    uct_cxl_proxy_ep_drop(ep, UCS_ERR_CANCELED, 0);
}

/*
 * Answers or flushes of ep wait for its peer: fail the endpoint if the
 * peer is gone (its process died or its interface closed), so that they
 * complete with an error instead of waiting forever.  Rate-limited: the
 * liveness check of a process is a system call.
 */
static int uct_cxl_proxy_ep_waits(uct_cxl_ep_t *ep)
{
    return (ep->outstanding > 0) || !ucs_list_is_empty(&ep->flush_list);
}

static void uct_cxl_proxy_check_alive(uct_cxl_iface_t *iface)
{
    ucs_time_t now = ucs_get_time();
    uct_cxl_ep_t *ep;

    if (now - iface->proxy_alive_check <
        ucs_time_from_msec(UCT_CXL_ALIVE_CHECK_MS)) {
        return;
    }
    iface->proxy_alive_check = now;
    ucs_list_for_each(ep, &iface->ep_list, list) {
        if (uct_cxl_proxy_ep_waits(ep) && !ep->failed && !ep->tx->failed &&
            !uct_cxl_tx_peer_alive(iface, ep->tx)) {
            ep->tx->failed = 1;
            uct_cxl_ep_set_failed(ep);
        }
    }
}

unsigned uct_cxl_proxy_progress(uct_cxl_iface_t *iface)
{
    uct_cxl_reply_t *reply, *tmp;
    unsigned count = 0;
    int busy       = 0;
    int waits      = 0;
    uct_cxl_ep_t *ep;
    size_t done;
    int gone;

    /* answers in arrival order */
    ucs_list_for_each_safe(reply, tmp, &iface->replies, list) {
        if (!uct_cxl_proxy_reply_push(iface, reply)) {
            busy = 1;
            break; /* in order */
        }
        ucs_list_del(&reply->list);
        ucs_free(reply->copy);
        ucs_free(reply);
        ++count;
    }

    ucs_list_for_each(ep, &iface->ep_list, list) {
        if (!ucs_list_is_empty(&ep->due)) {
            count += uct_cxl_proxy_due_progress(ep);
            busy  |= !ucs_list_is_empty(&ep->due);
        }
        if (ep->stream.data != NULL) {
            gone = ep->failed || ep->tx->failed;
            if (!gone) {
                done = uct_cxl_proxy_put_chunks(ep, ep->stream.data +
                                                    ep->stream.done,
                                                ep->stream.length -
                                                    ep->stream.done,
                                                ep->stream.addr +
                                                    ep->stream.done);
                ep->stream.done += done;
                count           += (done > 0);
            }
            if (gone || (ep->stream.done == ep->stream.length)) {
                ucs_free(ep->stream.data);
                ep->stream.data = NULL;
            } else {
                busy = 1;
            }
        }
        if (!ucs_list_is_empty(&ep->flush_list)) {
            if (uct_cxl_proxy_ep_idle(ep)) {
                uct_cxl_proxy_flushes_done(ep, (ep->failed || ep->tx->failed) ?
                                           UCS_ERR_ENDPOINT_TIMEOUT : UCS_OK, 1);
                ++count;
            } else {
                busy = 1;
            }
        }
        waits |= uct_cxl_proxy_ep_waits(ep);
    }
    if (waits) {
        uct_cxl_proxy_check_alive(iface);
    }
    iface->proxy_busy = busy || waits;
    return count;
}

void uct_cxl_proxy_iface_init(uct_cxl_iface_t *iface)
{
    iface->proxy_busy = 0;
    iface->ops        = NULL;
    iface->ops_size   = 0;
    iface->ops_free   = 0;
    iface->proxy_alive_check = ucs_get_time();
    iface->staging           = NULL;
    iface->staging_size      = 0;
    ucs_list_head_init(&iface->replies);
    ucs_list_head_init(&iface->reply_txs);
}

void uct_cxl_proxy_iface_cleanup(uct_cxl_iface_t *iface)
{
    uct_cxl_reply_t *reply, *rtmp;
    uct_cxl_reply_tx_t *rtx, *ttmp;

    ucs_list_for_each_safe(reply, rtmp, &iface->replies, list) {
        ucs_free(reply->copy);
        ucs_free(reply);
    }
    ucs_list_for_each_safe(rtx, ttmp, &iface->reply_txs, list) {
        uct_cxl_tx_put(iface, rtx->tx);
        ucs_free(rtx);
    }
    ucs_free(iface->staging);
    ucs_free(iface->ops);
}
