/*
 * Harness: the receive path of the transport (cxl_chan.c poll, cxl_am.c
 * delivery, cxl_bulk.c descriptors, cxl_proxy.c for operation records) on
 * channels whose producer line and records a peer wrote arbitrarily.  A
 * sender owns its channel's ring, so it can write anything there; the
 * receiver must never read or write outside its block and the pool's heap
 * because of it, and at worst stops the channel.  The harness uses a real
 * interface (fuzz_uct_env.h), writes the input over its receive block and
 * progresses the worker.  Properties:
 *   - every active message handed up lies inside the pool's heap, and an
 *     inline one inside its ring (never across the ring's end);
 *   - the receiver writes nothing into its rings or its header (only the
 *     consumer lines), whatever they hold;
 *   - operation records write only into registered memory (guard pages);
 *   - ASan: no access outside what the process mapped.
 *
 * Input: byte 0: claimed channels (bits 0-1), the next 64 bytes replace
 * the block header (bit 2: a peer scribbled on it), progress rounds - 1
 * (bits 3-4); bytes 1-4: the sequence number the receiver expects;
 * bytes 5-6: its read position in lines; then (the header and) the bytes
 * of the channels: producer line, consumer line, ring, next channel.
 *
 * FUZZ_UCT_WRITE_SEEDS=DIR writes seeds whose records the real sender
 * wrote (active messages short/bcopy/bulk, put, get, atomics) and exits.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "fuzz_uct_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint8_t *fuzz_chan_orig;   /* what the channels held before polling */
static size_t   fuzz_chan_len;

/* Channel 0 of the interface under test, by its own geometry (the header
 * in the pool may be scribbled on). */
static uint8_t *fuzz_chan_base(void)
{
    uct_cxl_iface_t *iface = fuzz_uct.cxl[0];

    return (uint8_t*)iface->block + sizeof(uct_cxl_block_hdr_t) +
           iface->num_hosts * sizeof(uct_cxl_block_claim_t);
}

static ucs_status_t fuzz_chan_am_cb(void *arg, void *data, size_t length,
                                    unsigned flags)
{
    uct_cxl_iface_t *iface = fuzz_uct.cxl[0];
    uint64_t stride = sizeof(uct_cxl_chan_ctl_t) + fuzz_uct_ring_size(0);
    uint64_t mask   = fuzz_uct_ring_size(0) - 1, off;
    unsigned ch, n  = iface->num_hosts * iface->per_host;
    uint8_t *ring;

    (void)arg;
    (void)flags;
    /* a bulk payload may be anywhere in the heap, an inline one only in
     * the ring, from the record at the read position to the ring's end */
    if (!fuzz_uct_in_heap(data, length)) {
        goto bad;
    }
    for (ch = 0; ch < n; ++ch) {
        ring = fuzz_chan_base() + ch * stride + sizeof(uct_cxl_chan_ctl_t);
        off  = iface->rx[ch].pos & mask;
        if ((uint8_t*)data == ring + off + UCT_CXL_REC_HDR) {
            if (length > mask + 1 - off - UCT_CXL_REC_HDR) {
                goto bad;
            }
        }
    }
    return UCS_OK;
bad:
    fprintf(stderr, "fuzz_uct_chan: active message of %zu bytes at %p "
            "outside its ring or the heap (block %p)\n", length, data,
            (void*)iface->block);
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

static void fuzz_chan_seeds(const char *dir);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    unsigned id;

    (void)argc;
    (void)argv;
    fuzz_uct_env_init();
    for (id = 0; id < UCT_AM_ID_MAX; ++id) {
        uct_iface_set_am_handler(fuzz_uct.iface[0], id, fuzz_chan_am_cb, NULL,
                                 0);
    }
    fuzz_chan_len  = 2 * (sizeof(uct_cxl_chan_ctl_t) + fuzz_uct_ring_size(0));
    fuzz_chan_orig = malloc(fuzz_chan_len);
    if (fuzz_chan_orig == NULL) {
        abort();
    }
    if (getenv("FUZZ_UCT_WRITE_SEEDS") != NULL) {
        fuzz_chan_seeds(getenv("FUZZ_UCT_WRITE_SEEDS"));
        exit(0);
    }
    return 0;
}

/* The receiver wrote only consumer lines of its channels (but for one
 * this process claimed to send on: answers may go to the own interface). */
static void fuzz_chan_check_rings(void)
{
    uint64_t token     = cxlpool_token(fuzz_uct.pool->cxlpool);
    const uint8_t *now = fuzz_chan_base();
    uint64_t stride    = sizeof(uct_cxl_chan_ctl_t) + fuzz_uct_ring_size(0);
    uint64_t ch, line  = offsetof(uct_cxl_chan_ctl_t, tail);

    for (ch = 0; ch < 2; ++ch) {
        const uint8_t *a = now + ch * stride, *b = fuzz_chan_orig + ch * stride;

        if (((const uct_cxl_chan_ctl_t*)a)->owner == token) {
            continue;
        }
        if (memcmp(a, b, line) ||
            memcmp(a + sizeof(uct_cxl_chan_ctl_t), b + sizeof(uct_cxl_chan_ctl_t),
                   stride - sizeof(uct_cxl_chan_ctl_t))) {
            fprintf(stderr, "fuzz_uct_chan: the receiver wrote into the "
                    "producer line or the ring of channel %lu\n",
                    (unsigned long)ch);
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uct_cxl_iface_t *iface = fuzz_uct.cxl[0];
    uct_cxl_block_hdr_t saved;
    uint8_t *chans;
    uint32_t seq;
    uint16_t pos;
    uint8_t ctl;
    size_t n;

    if (size < 7) {
        return 0;
    }
    ctl = data[0];
    memcpy(&seq, data + 1, sizeof(seq));
    memcpy(&pos, data + 5, sizeof(pos));
    data += 7;
    size -= 7;

    fuzz_uct_rx_reset(0, seq);
    chans = fuzz_chan_base();
    /* the receiver is at line pos of channel 0 (and consumed up to it) */
    iface->rx[0].pos       = (uint64_t)pos * UCT_CXL_LINE;
    iface->rx[0].published = iface->rx[0].pos;
    ((uct_cxl_chan_ctl_t*)chans)->tail = iface->rx[0].pos;
    uct_cxl_block_claims(iface->block, 0)->num_claimed = ctl & 3;

    saved = *iface->block;
    if ((ctl & 4) && (size >= sizeof(uct_cxl_block_hdr_t))) {
        memcpy(iface->block, data, sizeof(uct_cxl_block_hdr_t));
        data += sizeof(uct_cxl_block_hdr_t);
        size -= sizeof(uct_cxl_block_hdr_t);
    }
    n = (size < fuzz_chan_len) ? size : fuzz_chan_len;
    memcpy(chans, data, n);
    memcpy(fuzz_chan_orig, chans, fuzz_chan_len);

    fuzz_uct_progress(1 + ((ctl >> 3) & 3));

    fuzz_chan_check_rings();
    fuzz_uct_check_guards("an operation record");
    /* the header is the receiver's own: only 'armed' may change */
    if (!(ctl & 4) && memcmp(&saved, iface->block, sizeof(saved))) {
        fprintf(stderr, "fuzz_uct_chan: the receiver changed its header\n");
        abort();
    }
    return 0;
}

/* ---- seeds: records of the real sender (interface 1 to interface 0) ---- */

static size_t fuzz_chan_pack(void *dest, void *arg)
{
    size_t len = *(size_t*)arg;

    memset(dest, 0xab, len);
    return len;
}

static void fuzz_chan_unpack(void *arg, const void *data, size_t length)
{
    (void)arg;
    (void)data;
    (void)length;
}

static void fuzz_chan_comp(uct_completion_t *self)
{
    (void)self;
}

static void fuzz_chan_write(const char *dir, const char *what, uint8_t ctl)
{
    uct_cxl_iface_t *iface = fuzz_uct.cxl[0];
    uct_cxl_chan_ctl_t *chan = uct_cxl_block_chan(iface->block, 0);
    uint32_t seq = uct_cxl_chan_first_seq(iface->id, 0);
    /* the sender's position: its producer line is stored only now and then */
    uct_cxl_tx_t *tx = ucs_list_head(&fuzz_uct.cxl[1]->tx_list, uct_cxl_tx_t,
                                     list);
    uint64_t len = sizeof(*chan) + tx->head;
    uint16_t pos = 0;
    char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s.bin", dir, what);
    f = fopen(path, "wb");
    if ((f == NULL) || (fwrite(&ctl, 1, 1, f) != 1) ||
        (fwrite(&seq, sizeof(seq), 1, f) != 1) ||
        (fwrite(&pos, sizeof(pos), 1, f) != 1) ||
        (fwrite(chan, 1, len, f) != len) || fclose(f)) {
        perror(path);
        abort();
    }
}

static void fuzz_chan_seeds(const char *dir)
{
    uct_cxl_iface_t *rx = fuzz_uct.cxl[0];
    uct_completion_t comp = {.func = fuzz_chan_comp, .count = 100};
    uct_rkey_bundle_t rkey;
    uct_ep_params_t params;
    uint8_t packed[256], buf[64];
    uint64_t result, raddr = (uintptr_t)fuzz_uct_reg();
    size_t sizes[3] = {100, 4000, 6000};
    uct_ep_h ep;
    unsigned i;

    memset(&params, 0, sizeof(params));
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                        UCT_EP_PARAM_FIELD_IFACE_ADDR;
    params.iface      = fuzz_uct.iface[1];
    params.dev_addr   = (const uct_device_addr_t*)fuzz_uct.dev_addr;
    params.iface_addr = (const uct_iface_addr_t*)&fuzz_uct.addr[0];
    if ((uct_ep_create(&params, &ep) != UCS_OK) ||
        (uct_md_mkey_pack(fuzz_uct.md, fuzz_uct.reg_memh, packed) != UCS_OK) ||
        (uct_rkey_unpack(&uct_cxl_component, packed, &rkey) != UCS_OK)) {
        fprintf(stderr, "fuzz_uct_chan: seed endpoint\n");
        abort();
    }

    memset(buf, 0x11, sizeof(buf));
    uct_ep_am_short(ep, 1, 0x1122334455667788ull, buf, 20);
    fuzz_chan_write(dir, "am-short", 1 | (1 << 3));
    for (i = 0; i < 3; ++i) {
        uct_ep_am_bcopy(ep, 2, fuzz_chan_pack, &sizes[i], 0);
    }
    fuzz_chan_write(dir, "am-bcopy-bulk", 1 | (1 << 3));
    uct_ep_put_short(ep, buf, 48, raddr + 8, rkey.rkey);
    uct_ep_atomic64_post(ep, UCT_ATOMIC_OP_ADD, 5, raddr + 64, rkey.rkey);
    fuzz_chan_write(dir, "am-put-amo", 1 | (1 << 3));
    uct_ep_get_bcopy(ep, fuzz_chan_unpack, NULL, 32, raddr + 128, rkey.rkey,
                     &comp);
    uct_ep_atomic64_fetch(ep, UCT_ATOMIC_OP_ADD, 1, &result, raddr + 72,
                          rkey.rkey, &comp);
    uct_ep_atomic_cswap64(ep, 0, 1, raddr + 80, rkey.rkey, &result, &comp);
    fuzz_chan_write(dir, "am-put-amo-get", 1 | (2 << 3));
    (void)rx;
}
