/*
 * Harness: owner-executed operation records (cxl_proxy.c
 * uct_cxl_proxy_handle): a requester asks this process to put, get, apply
 * atomics, clean or invalidate at addresses it names, and answers its own
 * requests.  The record is the input, handed to the real handler of a real
 * interface (fuzz_uct_env.h) in a buffer of exactly its length, as the
 * channel layer hands it up.  Properties:
 *   - puts, atomics, gets and cleans touch only memory this process
 *     registered (the registered page between two guard pages, which stay
 *     untouched; ASan catches reads or writes past any other buffer);
 *   - an answer writes only into the request it answers, within its
 *     length (the requests' buffers have guards too);
 *   - answers go only to a channel inside the pool (fuzz_uct_chan checks
 *     the sender side of that).
 * Interface 0 keeps a few requests of its own waiting (a get_bcopy, a
 * get_zcopy, a fetching atomic, to interface 1, which never progresses
 * here), so that answers find something to answer; a request answered is
 * issued again.
 *
 * Input: bytes 0-1: the channel index (little endian, any value); the
 * rest: the record's payload (uct_cxl_op_hdr_t, then data).
 *
 * FUZZ_UCT_WRITE_SEEDS=DIR writes seeds (operation records the real
 * requester code wrote: put, atomic, fetching atomic, get, and answers to
 * the waiting requests) and exits.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "fuzz_uct_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_PROXY_REQS  3
#define FUZZ_PROXY_LEN   256
#define FUZZ_PROXY_GUARD 0xc3

static uct_ep_h         fuzz_proxy_ep;     /* interface 0 -> 1 */
static uct_rkey_bundle_t fuzz_proxy_rkey;  /* of the registered page */
static uint8_t         *fuzz_proxy_buf[FUZZ_PROXY_REQS]; /* guard | data | guard */
static uct_completion_t fuzz_proxy_comp[FUZZ_PROXY_REQS];
static int              fuzz_proxy_busy[FUZZ_PROXY_REQS];

static void fuzz_proxy_done(uct_completion_t *self)
{
    fuzz_proxy_busy[self - fuzz_proxy_comp] = 0;
}

static void fuzz_proxy_unpack(void *arg, const void *data, size_t length)
{
    uint8_t *dst = arg;

    if (length > FUZZ_PROXY_LEN) {
        fprintf(stderr, "fuzz_uct_proxy: get_bcopy unpacks %zu bytes of %u\n",
                length, FUZZ_PROXY_LEN);
        abort();
    }
    memcpy(dst, data, length);
}

/* Issue request i again if it was answered. */
static void fuzz_proxy_request(unsigned i)
{
    uint64_t raddr = (uintptr_t)fuzz_uct_reg();
    uint8_t *data  = fuzz_proxy_buf[i] + FUZZ_PROXY_LEN;
    uct_iov_t iov[2];
    ucs_status_t status;

    if (fuzz_proxy_busy[i]) {
        return;
    }
    fuzz_proxy_comp[i].func   = fuzz_proxy_done;
    fuzz_proxy_comp[i].count  = 1;
    fuzz_proxy_comp[i].status = UCS_OK;
    switch (i) {
    case 0:
        status = uct_ep_get_bcopy(fuzz_proxy_ep, fuzz_proxy_unpack, data,
                                  FUZZ_PROXY_LEN, raddr, fuzz_proxy_rkey.rkey,
                                  &fuzz_proxy_comp[i]);
        break;
    case 1:
        iov[0].buffer = data;
        iov[0].length = 40;
        iov[0].memh   = UCT_MEM_HANDLE_NULL;
        iov[0].stride = 64;
        iov[0].count  = 2;
        iov[1].buffer = data + 160;
        iov[1].length = 96;
        iov[1].memh   = UCT_MEM_HANDLE_NULL;
        iov[1].stride = 0;
        iov[1].count  = 1;
        status = uct_ep_get_zcopy(fuzz_proxy_ep, iov, 2, raddr + 256,
                                  fuzz_proxy_rkey.rkey, &fuzz_proxy_comp[i]);
        break;
    default:
        status = uct_ep_atomic64_fetch(fuzz_proxy_ep, UCT_ATOMIC_OP_ADD, 1,
                                       (uint64_t*)data, raddr + 512,
                                       fuzz_proxy_rkey.rkey,
                                       &fuzz_proxy_comp[i]);
        break;
    }
    fuzz_proxy_busy[i] = (status == UCS_INPROGRESS);
}

static void fuzz_proxy_check_bufs(void)
{
    unsigned i, k;

    for (i = 0; i < FUZZ_PROXY_REQS; ++i) {
        for (k = 0; k < FUZZ_PROXY_LEN; ++k) {
            if ((fuzz_proxy_buf[i][k] != FUZZ_PROXY_GUARD) ||
                (fuzz_proxy_buf[i][2 * FUZZ_PROXY_LEN + k] != FUZZ_PROXY_GUARD)) {
                fprintf(stderr, "fuzz_uct_proxy: an answer wrote next to the "
                        "buffer of request %u\n", i);
                abort();
            }
        }
    }
}

static void fuzz_proxy_seeds(const char *dir);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    uint8_t packed[sizeof(uct_cxl_packed_rkey_t)];
    uct_ep_params_t params;
    unsigned i;

    (void)argc;
    (void)argv;
    fuzz_uct_env_init();
    memset(&params, 0, sizeof(params));
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                        UCT_EP_PARAM_FIELD_IFACE_ADDR;
    params.iface      = fuzz_uct.iface[0];
    params.dev_addr   = (const uct_device_addr_t*)fuzz_uct.dev_addr;
    params.iface_addr = (const uct_iface_addr_t*)&fuzz_uct.addr[1];
    if ((uct_ep_create(&params, &fuzz_proxy_ep) != UCS_OK) ||
        (uct_md_mkey_pack(fuzz_uct.md, fuzz_uct.reg_memh, packed) != UCS_OK) ||
        (uct_rkey_unpack(&uct_cxl_component, packed, &fuzz_proxy_rkey) !=
         UCS_OK)) {
        fprintf(stderr, "fuzz_uct_proxy: endpoint or key\n");
        abort();
    }
    for (i = 0; i < FUZZ_PROXY_REQS; ++i) {
        fuzz_proxy_buf[i] = malloc(3 * FUZZ_PROXY_LEN);
        if (fuzz_proxy_buf[i] == NULL) {
            abort();
        }
        memset(fuzz_proxy_buf[i], FUZZ_PROXY_GUARD, 3 * FUZZ_PROXY_LEN);
        fuzz_proxy_request(i);
    }
    if (getenv("FUZZ_UCT_WRITE_SEEDS") != NULL) {
        fuzz_proxy_seeds(getenv("FUZZ_UCT_WRITE_SEEDS"));
        exit(0);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint16_t index;
    void *payload;
    unsigned i;

    if (size < sizeof(index)) {
        return 0;
    }
    memcpy(&index, data, sizeof(index));
    data += sizeof(index);
    size -= sizeof(index);
    /* exactly the record's bytes: ASan sees any read past them */
    payload = malloc(size ? size : 1);
    if (payload == NULL) {
        abort();
    }
    memcpy(payload, data, size);
    uct_cxl_proxy_handle(fuzz_uct.cxl[0], index, payload, (uint32_t)size);
    free(payload);
    /* answers that waited for room go out from the owner's progress */
    uct_iface_progress(fuzz_uct.iface[0]);
    fuzz_uct_check_guards("an operation record");
    fuzz_proxy_check_bufs();
    for (i = 0; i < FUZZ_PROXY_REQS; ++i) {
        fuzz_proxy_request(i);
    }
    return 0;
}

/* ---- seeds: records from interface 0's channel in interface 1's block ---- */

/* A seed as the harness reads its input: the channel index, the record. */
static void fuzz_proxy_write_seed(const char *dir, const char *kind, unsigned n,
                                  const uct_cxl_rec_t *rec)
{
    uint16_t index = 0;
    char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s-%u.bin", dir, kind, n);
    f = fopen(path, "wb");
    if ((f == NULL) || (fwrite(&index, sizeof(index), 1, f) != 1) ||
        (fwrite(rec + 1, 1, rec->length, f) != rec->length) || fclose(f)) {
        perror(path);
        abort();
    }
}

static void fuzz_proxy_dump(const char *dir)
{
    uct_cxl_iface_t *rx = fuzz_uct.cxl[1];
    uct_cxl_chan_ctl_t *chan = uct_cxl_iface_chan(rx, 0);
    uct_cxl_tx_t *tx = ucs_derived_of(fuzz_proxy_ep, uct_cxl_ep_t)->tx;
    uint8_t *ring = uct_cxl_chan_ring(chan);
    uint64_t pos = 0, size;
    uct_cxl_rec_t *rec;
    unsigned n = 0;

    while (pos < tx->head) {
        rec  = (uct_cxl_rec_t*)(ring + (pos & rx->ring_mask));
        size = uct_cxl_rec_ring_size(rec);
        if ((rec->flags & UCT_CXL_REC_OP) && !(rec->flags & UCT_CXL_REC_BULK)) {
            fuzz_proxy_write_seed(dir, "op", n++, rec);
        }
        pos += size;
    }
}

static void fuzz_proxy_seeds(const char *dir)
{
    uint64_t raddr = (uintptr_t)fuzz_uct_reg(), result;
    uct_completion_t comp = {.func = fuzz_proxy_done, .count = 100};
    uint8_t buf[64];

    memset(buf, 0x22, sizeof(buf));
    /* the waiting requests are in the ring already; add the others */
    uct_ep_put_short(fuzz_proxy_ep, buf, 48, raddr + 8, fuzz_proxy_rkey.rkey);
    uct_ep_atomic64_post(fuzz_proxy_ep, UCT_ATOMIC_OP_ADD, 5, raddr + 64,
                         fuzz_proxy_rkey.rkey);
    uct_ep_atomic_cswap64(fuzz_proxy_ep, 0, 1, raddr + 80, fuzz_proxy_rkey.rkey,
                          &result, &comp);
    fuzz_proxy_dump(dir);
    /* and answers: interface 1 executes the requests, answering into 0 */
    uct_iface_progress(fuzz_uct.iface[1]);
    {
        uct_cxl_iface_t *rx = fuzz_uct.cxl[0];
        uct_cxl_chan_ctl_t *chan = uct_cxl_iface_chan(rx, 0);
        uint8_t *ring = uct_cxl_chan_ring(chan);
        uint64_t pos = 0;
        uct_cxl_rec_t *rec;
        unsigned n = 0;

        rec = (uct_cxl_rec_t*)ring;
        while ((rec->seq == rx->rx[0].seq + n) && (pos <= rx->ring_mask)) {
            if (rec->flags & UCT_CXL_REC_OP) {
                fuzz_proxy_write_seed(dir, "answer", n, rec);
            }
            pos += uct_cxl_rec_ring_size(rec);
            rec  = (uct_cxl_rec_t*)(ring + pos);
            ++n;
        }
    }
}
