/*
 * Harness: what a peer hands over in bytes to reach this process's pool:
 * packed remote keys (cxl_md.c uct_cxl_rkey_unpack, cxl_pool.c), device
 * and interface addresses (cxl_iface.c reachability, cxl_chan.c peer block
 * and channel claim) with the peer block itself.  Real stack:
 * fuzz_uct_env.h.  Properties:
 *   - an accepted key of pool memory grants only a range inside the pool's
 *     heap, and rkey_ptr never gives an address outside what it grants;
 *     a key of memory outside the pool is only usable through its owner;
 *   - an endpoint created to an address has its channel (producer line,
 *     consumer line, ring) inside the pool, and a send on it stays there;
 *   - ASan: no access outside what the process mapped.
 *
 * Input: byte 0: bit 0 selects the address path (else the key path), bit
 * 1 makes the harness fix the key's checksum (the fuzzer cannot compute
 * crc32c).  Key path: the packed key, then 8 bytes of a remote address
 * (rkey_ptr).  Address path: 16 bytes device address, 16 bytes interface
 * address (an offset in the pool and an interface id), then the peer
 * block written at the harness's scratch area of the pool.
 *
 * FUZZ_UCT_WRITE_SEEDS=DIR writes seeds (the real keys of pool memory and
 * of memory outside the pool, the real addresses and blocks) and exits.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "fuzz_uct_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define fuzz_rkey_fail(...) \
    do { \
        fprintf(stderr, "fuzz_uct_rkey: " __VA_ARGS__); \
        fputc('\n', stderr); \
        abort(); \
    } while (0)

static void fuzz_rkey_seeds(const char *dir);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_uct_env_init();
    if (getenv("FUZZ_UCT_WRITE_SEEDS") != NULL) {
        fuzz_rkey_seeds(getenv("FUZZ_UCT_WRITE_SEEDS"));
        exit(0);
    }
    return 0;
}

static void fuzz_rkey_key(const uint8_t *data, size_t size, int fix_crc)
{
    uct_cxl_packed_rkey_t packed;
    uct_rkey_bundle_t bundle;
    const uct_cxl_rkey_t *key;
    uint64_t raddr = 0;
    uintptr_t heap_lo, heap_hi;
    void *laddr;

    memset(&packed, 0, sizeof(packed));
    memcpy(&packed, data, ucs_min(size, sizeof(packed)));
    if (size > sizeof(packed)) {
        memcpy(&raddr, data + sizeof(packed),
               ucs_min(size - sizeof(packed), sizeof(raddr)));
    }
    if (fix_crc) {
        packed.crc = 0;
        packed.crc = cxlpool_crc32c(0, &packed, sizeof(packed));
    }
    if (uct_rkey_unpack(&uct_cxl_component, &packed, &bundle) != UCS_OK) {
        return;
    }
    key     = (const uct_cxl_rkey_t*)bundle.rkey;
    heap_lo = (uintptr_t)fuzz_uct.pool->base + fuzz_uct.pool->heap_offset;
    heap_hi = (uintptr_t)fuzz_uct.pool->base + fuzz_uct.pool->size;
    if (key->pool != NULL) {
        if ((key->lo < heap_lo) || (key->hi > heap_hi) || (key->lo >= key->hi)) {
            fuzz_rkey_fail("key of pool memory grants [%#lx, %#lx), outside "
                           "the heap [%#lx, %#lx)", (unsigned long)key->lo,
                           (unsigned long)key->hi, (unsigned long)heap_lo,
                           (unsigned long)heap_hi);
        }
    } else if (!key->via_owner) {
        fuzz_rkey_fail("key of memory outside the pool is usable directly");
    }
    if (uct_rkey_ptr(&uct_cxl_component, &bundle, raddr, &laddr) == UCS_OK) {
        if ((key->pool == NULL) || ((uintptr_t)laddr < key->lo) ||
            ((uintptr_t)laddr >= key->hi)) {
            fuzz_rkey_fail("rkey_ptr gave %p outside the key's range", laddr);
        }
    }
    uct_rkey_release(&uct_cxl_component, &bundle);
}

static void fuzz_rkey_addr(const uint8_t *data, size_t size)
{
    uint8_t dev[sizeof(uct_cxl_device_addr_t)];
    uct_cxl_iface_addr_t addr;
    uintptr_t lo = (uintptr_t)fuzz_uct.pool->base + fuzz_uct.pool->heap_offset;
    uintptr_t hi = (uintptr_t)fuzz_uct.pool->base + fuzz_uct.pool->size;
    uint8_t *scratch = fuzz_uct.pool->base + fuzz_uct.scratch_offset;
    uct_ep_params_t params;
    uct_cxl_tx_t *tx;
    uint64_t payload = 42;
    uct_ep_h ep;

    if (size < sizeof(dev) + sizeof(addr)) {
        return;
    }
    memcpy(dev, data, sizeof(dev));
    memcpy(&addr, data + sizeof(dev), sizeof(addr));
    data += sizeof(dev) + sizeof(addr);
    size -= sizeof(dev) + sizeof(addr);
    memset(scratch, 0, FUZZ_UCT_SCRATCH);
    memcpy(scratch, data, ucs_min(size, FUZZ_UCT_SCRATCH));

    if (!uct_iface_is_reachable(fuzz_uct.iface[1], (uct_device_addr_t*)dev,
                                (uct_iface_addr_t*)&addr)) {
        return;
    }
    memset(&params, 0, sizeof(params));
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                        UCT_EP_PARAM_FIELD_IFACE_ADDR;
    params.iface      = fuzz_uct.iface[1];
    params.dev_addr   = (const uct_device_addr_t*)dev;
    params.iface_addr = (const uct_iface_addr_t*)&addr;
    if (uct_ep_create(&params, &ep) != UCS_OK) {
        return;
    }
    tx = ucs_derived_of(ep, uct_cxl_ep_t)->tx;
    if (((uintptr_t)tx->peer < lo) || ((uintptr_t)tx->chan < lo) ||
        ((uintptr_t)tx->ring < (uintptr_t)(tx->chan + 1)) ||
        ((uintptr_t)tx->ring > hi) || (tx->ring_mask >= hi - (uintptr_t)tx->ring)) {
        fuzz_rkey_fail("channel at %p, ring %p + %lu outside the heap "
                       "[%#lx, %#lx)", (void*)tx->chan, (void*)tx->ring,
                       (unsigned long)tx->ring_mask + 1, (unsigned long)lo,
                       (unsigned long)hi);
    }
    uct_ep_am_short(ep, 1, 0, &payload, sizeof(payload));
    uct_ep_destroy(ep);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    if (data[0] & 1) {
        fuzz_rkey_addr(data + 1, size - 1);
    } else {
        fuzz_rkey_key(data + 1, size - 1, data[0] & 2);
    }
    fuzz_uct_progress(1);
    return 0;
}

/* ---- seeds ---- */

static void fuzz_rkey_write(const char *dir, const char *what, uint8_t ctl,
                            const void *a, size_t alen, const void *b,
                            size_t blen, const void *c, size_t clen)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s.bin", dir, what);
    f = fopen(path, "wb");
    if ((f == NULL) || (fwrite(&ctl, 1, 1, f) != 1) ||
        (fwrite(a, 1, alen, f) != alen) || (fwrite(b, 1, blen, f) != blen) ||
        (fwrite(c, 1, clen, f) != clen) || fclose(f)) {
        perror(path);
        abort();
    }
}

static void fuzz_rkey_seeds(const char *dir)
{
    uct_cxl_iface_t *iface = fuzz_uct.cxl[0];
    uct_cxl_packed_rkey_t packed;
    uct_cxl_iface_addr_t addr;
    uint64_t raddr, block_len;

    uct_md_mkey_pack(fuzz_uct.md, fuzz_uct.key_memh, &packed);
    raddr = (uintptr_t)fuzz_uct.key_area + 128;
    fuzz_rkey_write(dir, "key-pool", 0, &packed, sizeof(packed), &raddr,
                    sizeof(raddr), NULL, 0);
    fuzz_rkey_write(dir, "key-pool-fixcrc", 2, &packed, sizeof(packed), &raddr,
                    sizeof(raddr), NULL, 0);
    uct_md_mkey_pack(fuzz_uct.md, fuzz_uct.reg_memh, &packed);
    raddr = (uintptr_t)fuzz_uct_reg();
    fuzz_rkey_write(dir, "key-local", 0, &packed, sizeof(packed), &raddr,
                    sizeof(raddr), NULL, 0);

    /* interface 0's header and claim lines at the scratch area, with
     * its real address there */
    addr.block_offset = fuzz_uct.scratch_offset;
    addr.id           = iface->id;
    block_len         = sizeof(uct_cxl_block_hdr_t) +
                        iface->num_hosts * sizeof(uct_cxl_block_claim_t) +
                        2 * sizeof(uct_cxl_chan_ctl_t);
    fuzz_rkey_write(dir, "addr-block", 1, fuzz_uct.dev_addr,
                    sizeof(fuzz_uct.dev_addr), &addr, sizeof(addr),
                    iface->block, block_len);
    fuzz_rkey_write(dir, "addr-iface1", 1, fuzz_uct.dev_addr,
                    sizeof(fuzz_uct.dev_addr), &fuzz_uct.addr[0],
                    sizeof(addr), NULL, 0);
}
