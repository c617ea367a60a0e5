/*
 * Active-message channels in the pool (see doc/design/am-channels.md).
 *
 * Each receiving interface owns a block in the pool: a header line, one
 * claim line per host range, and num_channels single-producer/single-
 * consumer byte rings.  A sending interface claims one channel of the
 * range of its host when its first endpoint to that receiver connects
 * (all its endpoints to that receiver share it) and is then the only
 * writer of that channel's producer line and ring; the receiver is the
 * only writer of the consumer line.  Records are cache-line aligned and carry a
 * sequence number that is stored last: the receiver accepts a record only
 * when its sequence number is the next one it expects, so nothing on the
 * data path needs an atomic read-modify-write.
 */
#ifndef UCT_CXL_CHANNEL_H
#define UCT_CXL_CHANNEL_H

#include <stdint.h>
#include <ucx_cxl/coherence.h>

#define UCT_CXL_LINE          64
#define UCT_CXL_BLOCK_MAGIC   0x4b434c4258435543ull  /* "CUCXBLCK" */
#define UCT_CXL_BLOCK_CLOSED  0x44534f4c43584355ull  /* "UCXCLOSD" */
#define UCT_CXL_CHAN_RETIRED  UINT64_MAX

enum {
    UCT_CXL_EVENTS_FENCE      = 1,
    UCT_CXL_EVENTS_MEMBARRIER = 2
};

/* Block header: written by the receiver at open and at close only. */
typedef struct {
    volatile uint64_t magic;        /* BLOCK_MAGIC while open */
    uint64_t          iface_id;
    uint64_t          owner_token;  /* receiver's pool attachment */
    uint32_t          num_channels;
    uint32_t          ring_size;    /* bytes, power of two */
    uint64_t          chan_stride;
    uint32_t          events;       /* senders must signal when armed:
                                     * UCT_CXL_EVENTS_FENCE (fence, then
                                     * look at armed) or _MEMBARRIER (the
                                     * receiver's membarrier() at arm is the
                                     * fence of registered senders) */
    volatile uint32_t armed;        /* receiver sleeps: signal it */
    uint32_t          num_hosts;    /* host ranges of channels (1 in hw mode) */
    uint32_t          peer_check_us; /* sw mode: senders re-read this line at
                                      * least this often (0: before every
                                      * send); the receiver's close waits
                                      * twice as long before freeing the block */
    uint64_t          proc_id;      /* receiver's process (uct_cxl_proc_id()) */
} __attribute__((aligned(UCT_CXL_LINE))) uct_cxl_block_hdr_t;

/*
 * Claim lines, one per host range, after the header: how many channels of
 * that range were ever claimed (highest index in the range + 1).  Senders
 * of that host raise it with a CAS-max when they claim, i.e. once per pair
 * of interfaces; the receiver polls the channels below it.  Only processes
 * of one host write a range's claim line and producer lines, so the CAS
 * never crosses hosts.
 */
typedef struct {
    volatile uint32_t num_claimed;
    uint8_t           pad[60];
} __attribute__((aligned(UCT_CXL_LINE))) uct_cxl_block_claim_t;

#define UCT_CXL_MAX_HOSTS     64

typedef struct {
    /* producer line: the claiming sender only */
    volatile uint64_t owner;        /* 0 free, else sender's pool token */
    volatile uint64_t head;         /* bytes produced, after the last record */
    volatile uint64_t seq;          /* sequence number of the next record */
    uint8_t           pad0[40];
    /* consumer line: the receiver only */
    volatile uint64_t tail __attribute__((aligned(UCT_CXL_LINE)));
    volatile uint64_t bulk_tail;    /* bulk_end of the last consumed bulk
                                     * record, of whichever owner */
    uint8_t           pad1[48];
} __attribute__((aligned(UCT_CXL_LINE))) uct_cxl_chan_ctl_t;

#define UCT_CXL_REC_PAD  0x1  /* filler up to the end of the ring */
#define UCT_CXL_REC_OP   0x2  /* an operation for the receiver to execute on
                               * its own memory, or its answer (cxl_proxy.c) */
#define UCT_CXL_REC_BULK 0x4  /* an active message whose payload lies in the
                               * sender's bulk ring (uct_cxl_rec_bulk_t) */

/* sw mode: ring lines a receiver fetches at once while one-line records
 * stream (cxl_chan.c, uct_cxl_rx_fetch_window) */
#define UCT_CXL_RX_WINDOW 16

/* Record header, at a line-aligned ring offset, followed by the payload. */
typedef struct {
    volatile uint32_t seq;          /* stored last: validates the record */
    uint8_t           am_id;
    uint8_t           flags;
    uint16_t          reserved;
    uint32_t          length;       /* payload bytes */
    uint32_t          check;        /* uct_cxl_rec_check(seq, channel) */
} uct_cxl_rec_t;

#define UCT_CXL_REC_HDR   sizeof(uct_cxl_rec_t)

/*
 * Payload of a BULK record: where the message lies in the pool (in the
 * sending process's bulk ring, see cxl_bulk.c) and the sender's bulk
 * position after it, which the receiver hands back in bulk_tail once the
 * record is consumed.  'length' of the record header is the message length.
 */
typedef struct {
    uint64_t offset;                /* pool offset of the message */
    uint64_t bulk_end;              /* sender's bulk position after it */
} uct_cxl_rec_bulk_t;

static inline uint64_t uct_cxl_rec_size(uint32_t length)
{
    return (UCT_CXL_REC_HDR + length + UCT_CXL_LINE - 1) &
           ~(uint64_t)(UCT_CXL_LINE - 1);
}

/* Ring bytes a record takes: a BULK record carries only its descriptor. */
static inline uint64_t uct_cxl_rec_ring_size(const uct_cxl_rec_t *rec)
{
    return uct_cxl_rec_size((rec->flags & UCT_CXL_REC_BULK) ?
                            (uint32_t)sizeof(uct_cxl_rec_bulk_t) :
                            rec->length);
}

/*
 * First sequence number of channel 'index' of the interface 'iface_id'.
 * Each interface starts its channels at numbers of its own, so a record
 * that a late sender of an earlier interface in the same memory leaves in
 * the ring (it checked the header just before the block was reused)
 * matches only by a 1 in 2^32 chance instead of always.  Never 0.
 */
static inline uint32_t uct_cxl_chan_first_seq(uint64_t iface_id,
                                              unsigned index)
{
    uint64_t x = iface_id + (index + 1) * 0x9e3779b97f4a7c15ull;

    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return ((uint32_t)x != 0) ? (uint32_t)x : 1;
}

/*
 * The second word that makes a line a record: a position that held the
 * middle of a long record in one lap is a header position in the next, and
 * until the sender gets there it holds whatever that payload was, the
 * expected sequence number included (zeroes when the numbers wrap through
 * 0).  A record needs both words; 'first' is its channel's first sequence
 * number (uct_cxl_chan_first_seq), so a copy of a record of another channel
 * or interface does not pass either.
 */
static inline uint32_t uct_cxl_rec_check(uint32_t seq, uint32_t first)
{
    return ~seq ^ first;
}

/* rec is the record numbered seq of the channel that starts at first
 * (the line loaded after whatever invalidate the caller needs) */
static inline int uct_cxl_rec_valid(const uct_cxl_rec_t *rec, uint32_t seq,
                                    uint32_t first)
{
    return (__atomic_load_n(&rec->seq, __ATOMIC_ACQUIRE) == seq) &&
           (__atomic_load_n(&rec->check, __ATOMIC_RELAXED) ==
            uct_cxl_rec_check(seq, first));
}

/* The block at hdr is still interface iface_id's (its header line read
 * from memory). */
static inline int uct_cxl_block_is_open(cxl_coh_mode_t coh,
                                        uct_cxl_block_hdr_t *hdr,
                                        uint64_t iface_id)
{
    cxl_coh_invalidate(coh, hdr, UCT_CXL_LINE);
    return (hdr->magic == UCT_CXL_BLOCK_MAGIC) && (hdr->iface_id == iface_id);
}

/* Claim line of host range 'host'. */
static inline uct_cxl_block_claim_t *
uct_cxl_block_claims(uct_cxl_block_hdr_t *hdr, unsigned host)
{
    return (uct_cxl_block_claim_t*)(hdr + 1) + host;
}

/* Bytes of a block with these parameters. */
static inline uint64_t uct_cxl_block_size(unsigned num_hosts,
                                          unsigned num_channels,
                                          uint64_t chan_stride)
{
    return sizeof(uct_cxl_block_hdr_t) +
           (uint64_t)num_hosts * sizeof(uct_cxl_block_claim_t) +
           (uint64_t)num_channels * chan_stride;
}

/* Channels of one host range: [host * per_host, (host + 1) * per_host). */
static inline unsigned uct_cxl_block_per_host(const uct_cxl_block_hdr_t *hdr)
{
    return hdr->num_channels / hdr->num_hosts;
}

static inline uct_cxl_chan_ctl_t *
uct_cxl_block_chan(uct_cxl_block_hdr_t *hdr, unsigned index)
{
    return (uct_cxl_chan_ctl_t*)((uint8_t*)hdr + sizeof(*hdr) +
                                 (uint64_t)hdr->num_hosts *
                                 sizeof(uct_cxl_block_claim_t) +
                                 (uint64_t)index * hdr->chan_stride);
}

static inline uint8_t *uct_cxl_chan_ring(uct_cxl_chan_ctl_t *chan)
{
    return (uint8_t*)(chan + 1);
}

#endif
