/*
 * The channel layer: claim and release of a channel in a peer's block, the
 * exported sender entry points (for the owner-executed operations, pending
 * and flush), and the receive side: poll the
 * channels, check each record, and deliver it by its type to the layer
 * above (active messages, or operations for the owner: iface->rx_ops).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cxl_chan.h"

#include <ucs/debug/log.h>
#include <ucs/sys/math.h>
#include <unistd.h>

int uct_cxl_test_skip_record_wb = 0;
int uct_cxl_line_atomic         = 0;

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
        if (!uct_cxl_rec_valid(rec, tx->seq, tx->first)) {
            break;
        }
        /* as the receiver steps: a BULK record holds only its descriptor
         * in the ring, whatever the length of its message */
        rsize = uct_cxl_rec_ring_size(rec);
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
static ucs_status_t uct_cxl_tx_claim(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx,
                                     const uct_cxl_block_hdr_t *geom)
{
    uint64_t token           = cxlpool_token(iface->pool->cxlpool);
    const uct_cxl_block_hdr_t *hdr = geom; /* checked copy of tx->peer */
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

    claims = uct_cxl_block_claims(tx->peer, host);
    for (i = 0; i < per_host; ++i) {
        chan     = (uct_cxl_chan_ctl_t*)((uint8_t*)tx->peer + sizeof(*hdr) +
                   (uint64_t)hdr->num_hosts * sizeof(uct_cxl_block_claim_t) +
                   (uint64_t)(host * per_host + i) * hdr->chan_stride);
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
    /* records are line aligned; the producer line is the previous owner's
     * (or whoever scribbled on it): a misaligned head would put records
     * across lines and the ring's end */
    tx->head        = chan->head & ~(uint64_t)(UCT_CXL_LINE - 1);
    tx->seq         = (uint32_t)chan->seq; /* set by the receiver at open */
    tx->first       = uct_cxl_chan_first_seq(tx->peer_id, host * per_host + i);
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

/*
 * The geometry a peer's block header claims is possible: rings of a power
 * of two inside channels of a line-aligned stride, all channels inside the
 * pool.  The header is in shared memory and the address came from the
 * peer: a sender writes where these fields say (uct_cxl_tx_claim).
 */
static int uct_cxl_peer_geometry_valid(const uct_cxl_block_hdr_t *peer,
                                       uint64_t room)
{
    uint64_t fixed;

    if ((peer->ring_size == 0) || (peer->ring_size & (peer->ring_size - 1)) ||
        (peer->ring_size < UCT_CXL_LINE) ||
        (peer->num_hosts == 0) || (peer->num_hosts > UCT_CXL_MAX_HOSTS) ||
        (peer->num_channels < peer->num_hosts) ||
        (peer->chan_stride % UCT_CXL_LINE) ||
        (peer->chan_stride < sizeof(uct_cxl_chan_ctl_t) + peer->ring_size)) {
        return 0;
    }
    fixed = sizeof(*peer) +
            (uint64_t)peer->num_hosts * sizeof(uct_cxl_block_claim_t);
    /* block_size() as a division: num_channels * chan_stride can wrap */
    return (fixed <= room) &&
           (peer->chan_stride <= (room - fixed) / peer->num_channels);
}

/* Check the peer block named by addr and map its header, or fail. */
static ucs_status_t uct_cxl_peer_block(uct_cxl_iface_t *iface,
                                       const uct_cxl_iface_addr_t *addr,
                                       uct_cxl_block_hdr_t **peer_p,
                                       uct_cxl_block_hdr_t *geom)
{
    uct_cxl_block_hdr_t *peer;

    /* the block must lie in our pool's heap, line aligned (its lines are
     * written with atomics), and carry the peer's id */
    if ((addr->block_offset < iface->pool->heap_offset) ||
        (addr->block_offset > iface->pool->size - sizeof(*peer)) ||
        (addr->block_offset % UCT_CXL_LINE)) {
        ucs_error("cxl: peer block offset 0x%" PRIx64 " is outside pool %s",
                  addr->block_offset, iface->pool->path);
        return UCS_ERR_INVALID_ADDR;
    }
    peer = (uct_cxl_block_hdr_t*)(iface->pool->base + addr->block_offset);
    cxl_coh_invalidate(iface->coh, peer, sizeof(*peer));
    /* one copy, checked and then used: the header may change meanwhile */
    memcpy(geom, peer, sizeof(*geom));
    if ((geom->magic != UCT_CXL_BLOCK_MAGIC) || (geom->iface_id != addr->id) ||
        !uct_cxl_peer_geometry_valid(geom,
                                     iface->pool->size - addr->block_offset)) {
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
    uct_cxl_block_hdr_t *peer, geom;
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

    status = uct_cxl_peer_block(iface, addr, &peer, &geom);
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
    tx->check_interval = ucs_time_from_usec(geom.peer_check_us);
    tx->check_due      = 0;
    status           = uct_cxl_tx_claim(iface, tx, &geom);
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
    } else {
        tx->failed = 1; /* nobody reads its bulk ring any more */
    }
    uct_cxl_bulk_retire(iface, tx);
    ucs_free(tx);
}

/* The receiver's block still belongs to the interface we connected to:
 * one cached line, cheap enough for every flush. */
int uct_cxl_tx_peer_open(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx)
{
    return uct_cxl_block_is_open(iface->coh, tx->peer, tx->peer_id);
}

/* ... and its process is alive (pid check or lease: a system call, so
 * only for keepalive, error paths and teardown). */
int uct_cxl_tx_peer_alive(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx)
{
    return uct_cxl_tx_peer_open(iface, tx) &&
           cxlpool_owner_alive(iface->pool->cxlpool, tx->peer->owner_token);
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

/* Any send, the largest included, would find room: what pending_add and
 * the pending dispatch promise. */
int uct_cxl_tx_can_send(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx)
{
    return uct_cxl_tx_has_resources(iface, tx,
                                    uct_cxl_tx_need(tx, iface->seg_size)) &&
           ((tx->bulk == NULL) ||
            uct_cxl_bulk_has_room(iface, tx, iface->seg_size));
}

/* The same steps for the records of proxied operations (cxl_proxy.c). */
ucs_status_t uct_cxl_ep_send_check(uct_cxl_ep_t *ep, uint32_t max_length)
{
    return uct_cxl_chan_check(ep, uct_cxl_ep_iface(ep), max_length);
}

/*
 * Room for an operation record of max_length payload bytes.  A large one
 * goes into the bulk ring when the channel has one (the first takes one):
 * the owner's answers and the chunks of a put stream a bulk ring's worth
 * per progress turn of the peer, not a receive ring's.
 */
int uct_cxl_tx_room(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx,
                    uint32_t max_length)
{
    if (!uct_cxl_tx_has_resources(iface, tx, uct_cxl_tx_need(tx, max_length))) {
        return 0;
    }
    if (max_length <= UCT_CXL_BULK_MIN_LENGTH) {
        return 1;
    }
    if (tx->bulk == NULL) {
        uct_cxl_bulk_attach(iface, tx);
    }
    return (tx->bulk == NULL) || uct_cxl_bulk_has_room(iface, tx, max_length);
}

/*
 * Where to write an operation record's payload of length bytes (room
 * checked), then uct_cxl_tx_commit_op().  sw mode: an inline record is
 * staged (iface->tx_bounce) and streamed into the ring like an active
 * message's (uct_cxl_tx_stream): written in place, its first store read
 * the ring line for ownership from memory, a round trip on the path of
 * every operation and answer (perf: 18% of an owner answering fetching
 * atomics, on one load).
 */
void *uct_cxl_tx_reserve_op(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx,
                            uint32_t length)
{
    if ((length > UCT_CXL_BULK_MIN_LENGTH) && (tx->bulk != NULL) &&
        uct_cxl_bulk_has_room(iface, tx, length)) {
        tx->op_rec   = NULL;
        tx->op_start = uct_cxl_bulk_start(tx, length);
        return tx->bulk + (tx->op_start & tx->bulk_mask);
    }
    tx->op_rec = uct_cxl_tx_reserve(tx, iface->coh, length);
    if ((iface->tx_bounce != NULL) && (length <= iface->seg_size)) {
        return iface->tx_bounce + 1;
    }
    return tx->op_rec + 1;
}

void uct_cxl_tx_commit_op(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx,
                          void *payload, uint32_t length)
{
    uct_cxl_rec_t *stage = iface->tx_bounce;
    uct_cxl_rec_t *rec   = tx->op_rec;

    if ((rec != NULL) && (stage != NULL) && (payload == stage + 1)) {
        uct_cxl_tx_stage(stage, 0, length);
        stage->flags = UCT_CXL_REC_OP;
        uct_cxl_tx_stream(tx, iface->coh, rec, stage);
        return;
    }
    if (rec != NULL) {
        rec->am_id  = 0;
        rec->flags  = UCT_CXL_REC_OP;
        rec->length = length;
        uct_cxl_tx_publish(tx, iface->coh, rec, uct_cxl_rec_size(length));
        return;
    }

    rec = uct_cxl_tx_reserve(tx, iface->coh, sizeof(uct_cxl_rec_bulk_t));
    if (stage == NULL) {
        uct_cxl_tx_publish_bulk(tx, iface->coh, rec, tx->op_start, payload,
                                length, 0, UCT_CXL_REC_OP);
        return;
    }
    /* the descriptor staged too */
    if (ucs_likely(!uct_cxl_test_skip_record_wb)) {
        cxl_coh_writeback(iface->coh, payload, length);
    }
    uct_cxl_tx_stream_bulk(tx, iface->coh, rec, stage, tx->op_start, length, 0,
                           UCT_CXL_REC_OP);
}

/*
 * The header and bulk descriptor of a record, loaded once: the ring is
 * shared memory a peer may write at any time, so what is checked must be
 * what is used (a second load of 'length' after the bounds check could see
 * a different value).  Each field is one relaxed atomic load, which the
 * compiler cannot repeat or defer.
 */
typedef struct {
    uint8_t  am_id;
    uint8_t  flags;
    uint32_t length;
    uint64_t ring_size;         /* ring bytes of the record */
    uint64_t bulk_offset;       /* BULK: pool offset of the message */
    uint64_t bulk_end;
} uct_cxl_rx_rec_t;

static UCS_F_ALWAYS_INLINE void
uct_cxl_rx_snapshot(const uct_cxl_rec_t *rec, uct_cxl_rx_rec_t *r)
{
    const uct_cxl_rec_bulk_t *desc = (const uct_cxl_rec_bulk_t*)(rec + 1);

    r->am_id  = __atomic_load_n(&rec->am_id, __ATOMIC_RELAXED);
    r->flags  = __atomic_load_n(&rec->flags, __ATOMIC_RELAXED);
    r->length = __atomic_load_n(&rec->length, __ATOMIC_RELAXED);
    if (r->flags & UCT_CXL_REC_BULK) {
        r->ring_size   = uct_cxl_rec_size(sizeof(uct_cxl_rec_bulk_t));
        r->bulk_offset = __atomic_load_n(&desc->offset, __ATOMIC_RELAXED);
        r->bulk_end    = __atomic_load_n(&desc->bulk_end, __ATOMIC_RELAXED);
    } else {
        r->ring_size   = uct_cxl_rec_size(r->length);
        r->bulk_offset = 0;
        r->bulk_end    = 0;
    }
}

/*
 * A bulk record may point only into the pool's heap, at a whole message:
 * its sender is a peer, and the receiver dereferences what it says.
 */
static int uct_cxl_rx_bulk_valid(uct_cxl_iface_t *iface,
                                 const uct_cxl_rx_rec_t *r)
{
    uint64_t heap = iface->pool->heap_offset, size = iface->pool->size;

    return (r->length <= UCT_CXL_BULK_MAX_LENGTH) &&
           (r->bulk_offset >= heap) && (r->bulk_offset <= size) &&
           (r->length <= size - r->bulk_offset);
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

/*
 * sw mode, one-line records streaming: the lines from pos on (UCT_CXL_RX_WINDOW, up
 * to the ring's end) invalidated together and their loads started, so the
 * misses of the records that follow overlap instead of costing a memory
 * round trip each.  Returns the ring position up to which lines are fresh.
 */
static uint64_t uct_cxl_rx_fetch_window(uct_cxl_iface_t *iface, uint8_t *ring,
                                        uint64_t pos)
{
    uint64_t left = (iface->ring_mask + 1 - (pos & iface->ring_mask)) /
                    UCT_CXL_LINE;
    unsigned n    = (unsigned)ucs_min(left, UCT_CXL_RX_WINDOW);
    const void *lines[UCT_CXL_RX_WINDOW];
    unsigned i;

    for (i = 0; i < n; ++i) {
        lines[i] = ring + (pos & iface->ring_mask) + (uint64_t)i * UCT_CXL_LINE;
    }
    cxl_coh_invalidate_lines(iface->coh, lines, n);
    return pos + (uint64_t)n * UCT_CXL_LINE;
}

/* Deliver the records of one channel; returns how many were delivered. */
static unsigned uct_cxl_iface_poll_chan(uct_cxl_iface_t *iface, unsigned index,
                                        unsigned budget)
{
    uct_cxl_chan_ctl_t *chan = uct_cxl_iface_chan(iface, index);
    uct_cxl_rx_chan_t *rx    = &iface->rx[index];
    uint64_t mask            = iface->ring_mask;
    uint8_t *ring            = uct_cxl_chan_ring(chan);
    unsigned count           = 0;
    uct_cxl_rx_rec_t r;
    uct_cxl_rec_t *rec;
    int inval                = !rx->head_fresh;
    uint64_t fresh_end       = rx->pos; /* lines before it: fresh */
    uint64_t size            = 0;
    void *data;

    rx->head_fresh = 0;
    while (count < budget) {
        rec = (uct_cxl_rec_t*)(ring + (rx->pos & mask));
        /*
         * sw mode: only the first look is invalidated.  After a record the
         * next one is a plain load: a line still cached from an earlier lap
         * holds an older sequence and does not match, so the loop ends and
         * the next poll invalidates it; a match can only come from memory,
         * after the sender's write-back.  This keeps a memory round trip
         * off the path between a delivery and the reply it triggers.
         */
        if (inval && (rx->pos >= fresh_end)) {
            /* a window only behind one-line records: lines of a longer
             * one are invalidated again once its seq was seen */
            if (rx->burst && (size == UCT_CXL_LINE) &&
                (iface->coh == CXL_COH_SW)) {
                fresh_end = uct_cxl_rx_fetch_window(iface, ring, rx->pos);
            } else {
                cxl_coh_invalidate(iface->coh, rec, UCT_CXL_LINE);
            }
        }
        inval = rx->burst;
        if (!uct_cxl_rec_valid(rec, rx->seq, rx->first)) {
            break; /* not written yet (maybe an earlier lap's payload) */
        }

        uct_cxl_rx_snapshot(rec, &r);
        size = r.ring_size;
        if (ucs_unlikely((size > mask + 1 - (rx->pos & mask)) ||
                         (r.am_id >= UCT_AM_ID_MAX) ||
                         ((r.flags & UCT_CXL_REC_BULK) &&
                          !uct_cxl_rx_bulk_valid(iface, &r)))) {
            ucs_error("cxl: corrupt record in channel %u at %" PRIu64
                      " (length %u, am_id %u, flags 0x%x); channel stopped",
                      index, rx->pos, r.length, r.am_id, r.flags);
            rx->seq--; /* never matches again */
            break;
        }

        if (r.flags & UCT_CXL_REC_BULK) {
            data = iface->pool->base + r.bulk_offset;
            cxl_coh_invalidate(iface->coh, data, r.length);
            rx->bulk_tail = r.bulk_end;
            if (r.flags & UCT_CXL_REC_OP) {
                iface->rx_ops->op(iface, index, data, r.length);
            } else {
                iface->rx_ops->am(iface, r.am_id, data, r.length);
            }
            ++count;
        } else if (r.flags & UCT_CXL_REC_OP) {
            uct_cxl_rx_fetch_body(iface, rec, size);
            iface->rx_ops->op(iface, index, rec + 1, r.length);
            ++count;
        } else if (!(r.flags & UCT_CXL_REC_PAD)) {
            uct_cxl_rx_fetch_body(iface, rec, size);
            iface->rx_ops->am(iface, r.am_id, rec + 1, r.length);
            ++count;
        }
        rx->pos += size;
        rx->seq++;
    }

    rx->burst = (count > 1);
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
    uint64_t mask = iface->ring_mask;
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
            lines[n] = uct_cxl_chan_ring(uct_cxl_iface_chan(iface, idx)) +
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

/*
 * Deliver what the channels of this interface hold, each record to the
 * layer its type names (iface->rx_ops); returns how many were delivered.
 */
unsigned uct_cxl_chan_poll(uct_cxl_iface_t *iface)
{
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
    return count;
}
