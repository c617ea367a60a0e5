/*
 * Active-message channels in the pool (see doc/design/am-channels.md).
 *
 * Each receiving interface owns a block in the pool: a header line and
 * num_channels single-producer/single-consumer byte rings.  A sending
 * endpoint claims one channel at connect time and is then the only writer
 * of that channel's producer line and ring; the receiver is the only
 * writer of the consumer line.  Records are cache-line aligned and carry a
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

/* Block header: written by the receiver at open and at close only. */
typedef struct {
    volatile uint64_t magic;        /* BLOCK_MAGIC while open */
    uint64_t          iface_id;
    uint64_t          owner_token;  /* receiver's pool attachment */
    uint32_t          num_channels;
    uint32_t          ring_size;    /* bytes, power of two */
    uint64_t          chan_stride;
    uint32_t          events;       /* senders must signal when armed */
    volatile uint32_t armed;        /* receiver sleeps: signal it */
    uint8_t           pad[16];
} __attribute__((aligned(UCT_CXL_LINE))) uct_cxl_block_hdr_t;

/*
 * Claim line, after the header: how many channels were ever claimed
 * (highest index + 1).  Senders raise it with a CAS-max when they claim,
 * i.e. once per connection; the receiver polls channels below it.
 */
typedef struct {
    volatile uint32_t num_claimed;
    uint8_t           pad[60];
} __attribute__((aligned(UCT_CXL_LINE))) uct_cxl_block_claim_t;

typedef struct {
    /* producer line: the claiming sender only */
    volatile uint64_t owner;        /* 0 free, else sender's pool token */
    volatile uint64_t head;         /* bytes produced, after the last record */
    volatile uint64_t seq;          /* sequence number of the next record */
    uint8_t           pad0[40];
    /* consumer line: the receiver only */
    volatile uint64_t tail __attribute__((aligned(UCT_CXL_LINE)));
    uint8_t           pad1[56];
} __attribute__((aligned(UCT_CXL_LINE))) uct_cxl_chan_ctl_t;

#define UCT_CXL_REC_PAD  0x1  /* filler up to the end of the ring */

/* Record header, at a line-aligned ring offset, followed by the payload. */
typedef struct {
    volatile uint32_t seq;          /* stored last: validates the record */
    uint8_t           am_id;
    uint8_t           flags;
    uint16_t          reserved;
    uint32_t          length;       /* payload bytes */
    uint32_t          reserved2;
} uct_cxl_rec_t;

#define UCT_CXL_REC_HDR   sizeof(uct_cxl_rec_t)

static inline uint64_t uct_cxl_rec_size(uint32_t length)
{
    return (UCT_CXL_REC_HDR + length + UCT_CXL_LINE - 1) &
           ~(uint64_t)(UCT_CXL_LINE - 1);
}

static inline uct_cxl_block_claim_t *
uct_cxl_block_claims(uct_cxl_block_hdr_t *hdr)
{
    return (uct_cxl_block_claim_t*)(hdr + 1);
}

static inline uct_cxl_chan_ctl_t *
uct_cxl_block_chan(uct_cxl_block_hdr_t *hdr, unsigned index)
{
    return (uct_cxl_chan_ctl_t*)((uint8_t*)hdr + sizeof(*hdr) +
                                 sizeof(uct_cxl_block_claim_t) +
                                 (uint64_t)index * hdr->chan_stride);
}

static inline uint8_t *uct_cxl_chan_ring(uct_cxl_chan_ctl_t *chan)
{
    return (uint8_t*)(chan + 1);
}

#endif
