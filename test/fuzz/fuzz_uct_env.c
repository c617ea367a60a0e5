/* The real transport stack for the harnesses (fuzz_uct_env.h). */
#define _GNU_SOURCE
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "fuzz_uct_env.h"
#include "fuzz_pool_file.h"

#include "pool_int.h"

#include <ucs/async/async.h>
#include <ucs/config/global_opts.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

fuzz_uct_env_t fuzz_uct;

/* the block headers as the interfaces wrote them (peers may scribble) */
static uct_cxl_block_hdr_t fuzz_uct_hdr[FUZZ_UCT_IFACES];

#define fuzz_uct_check(_cond, _what) \
    do { \
        if (!(_cond)) { \
            fprintf(stderr, "fuzz_uct: %s failed\n", _what); \
            abort(); \
        } \
    } while (0)

static void fuzz_uct_fix_id(unsigned i)
{
    uct_cxl_iface_t *iface = fuzz_uct.cxl[i];
    unsigned ch, n = iface->num_hosts * iface->per_host;

    iface->id              = 0x66757a7a00000001ull + i; /* "fuzz" */
    iface->block->iface_id = iface->id;
    for (ch = 0; ch < n; ++ch) {
        iface->rx[ch].seq   = uct_cxl_chan_first_seq(iface->id, ch);
        iface->rx[ch].first = iface->rx[ch].seq;
        uct_cxl_block_chan(iface->block, ch)->seq = iface->rx[ch].seq;
    }
    fuzz_uct_hdr[i]                  = *iface->block;
    fuzz_uct.addr[i].block_offset    = iface->block_offset;
    fuzz_uct.addr[i].id              = iface->id;
}

void fuzz_uct_env_init(void)
{
    uct_md_config_t *md_config;
    uct_iface_config_t *config;
    uct_tl_resource_desc_t *res;
    uct_iface_params_t params;
    cxlpool_extent_t ext;
    char path[128];
    unsigned count, i;

    /* corrupt records are reported with ucs_error: one line per input
     * would be most of the time spent */
    ucs_global_opts.log_component.log_level = UCS_LOG_LEVEL_FATAL;

    /* a fixed identity: seeds name the pool in keys and addresses */
    fuzz_pool_file_make(32ull << 20, "fuzz-cxl-pool-01", path, sizeof(path));
    setenv("UCX_CXL_POOL", path, 1);
    setenv("UCX_CXL_COHERENCE", "hw", 1);
    setenv("UCX_CXL_RING_SIZE", "64k", 1);
    setenv("UCX_CXL_BULK_SIZE", "64k", 1);
    setenv("UCX_CXL_NUM_CHANNELS", "2", 1);
    setenv("UCX_CXL_EVENTS", "no", 1);
    setenv("UCX_CXL_REG_ANY", "y", 1);

    fuzz_uct_check(uct_md_config_read(&uct_cxl_component, NULL, NULL,
                                      &md_config) == UCS_OK, "md config");
    fuzz_uct_check(uct_md_open(&uct_cxl_component, UCT_CXL_NAME, md_config,
                               &fuzz_uct.md) == UCS_OK, "uct_md_open");
    uct_config_release(md_config);

    fuzz_uct_check(uct_md_query_tl_resources(fuzz_uct.md, &res, &count) ==
                   UCS_OK && (count >= 1), "tl resources");
    fuzz_uct_check(ucs_async_context_create(UCS_ASYNC_MODE_POLL,
                                            &fuzz_uct.async) == UCS_OK,
                   "async context");
    fuzz_uct_check(uct_worker_create(fuzz_uct.async, UCS_THREAD_MODE_SINGLE,
                                     &fuzz_uct.worker) == UCS_OK, "worker");
    fuzz_uct_check(uct_md_iface_config_read(fuzz_uct.md, UCT_CXL_NAME, NULL,
                                            NULL, &config) == UCS_OK,
                   "iface config");
    memset(&params, 0, sizeof(params));
    params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                  UCT_IFACE_PARAM_FIELD_DEVICE;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = UCT_CXL_NAME;
    params.mode.device.dev_name = res[0].dev_name;
    for (i = 0; i < FUZZ_UCT_IFACES; ++i) {
        fuzz_uct_check(uct_iface_open(fuzz_uct.md, fuzz_uct.worker, &params,
                                      config, &fuzz_uct.iface[i]) == UCS_OK,
                       "uct_iface_open");
        fuzz_uct.cxl[i] = ucs_derived_of(fuzz_uct.iface[i], uct_cxl_iface_t);
        fuzz_uct_fix_id(i);
    }
    uct_config_release(config);
    uct_release_tl_resource_list(res);
    fuzz_uct.pool = fuzz_uct.cxl[0]->pool;
    fuzz_uct_check(uct_iface_get_device_address(fuzz_uct.iface[0],
                   (uct_device_addr_t*)fuzz_uct.dev_addr) == UCS_OK,
                   "device address");

    fuzz_uct.page     = (size_t)sysconf(_SC_PAGESIZE);
    fuzz_uct.reg_area = mmap(NULL, 3 * fuzz_uct.page, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    fuzz_uct_check(fuzz_uct.reg_area != MAP_FAILED, "mmap");
    memset(fuzz_uct.reg_area, FUZZ_UCT_GUARD, 3 * fuzz_uct.page);
    fuzz_uct_check(uct_md_mem_reg(fuzz_uct.md, fuzz_uct_reg(), fuzz_uct.page,
                                  UCT_MD_MEM_ACCESS_ALL, &fuzz_uct.reg_memh) ==
                   UCS_OK, "mem_reg");

    /* pool memory with a key, and room for a peer block a harness writes */
    fuzz_uct_check(cxlpool_alloc(fuzz_uct.pool->cxlpool, 64 << 10, 4096,
                                 "fuzz-key", 0, &ext) == CXLPOOL_OK, "alloc");
    fuzz_uct.key_area = fuzz_uct.pool->base + ext.offset;
    fuzz_uct_check(uct_md_mem_reg(fuzz_uct.md, fuzz_uct.key_area, 64 << 10,
                                  UCT_MD_MEM_ACCESS_ALL, &fuzz_uct.key_memh) ==
                   UCS_OK, "mem_reg pool");
    fuzz_uct_check(cxlpool_alloc(fuzz_uct.pool->cxlpool, FUZZ_UCT_SCRATCH,
                                 4096, "fuzz-scratch", 0, &ext) == CXLPOOL_OK,
                   "alloc scratch");
    fuzz_uct.scratch_offset = ext.offset;
}

void fuzz_uct_check_guards(const char *what)
{
    const uint8_t *g[2] = {fuzz_uct.reg_area,
                           fuzz_uct.reg_area + 2 * fuzz_uct.page};
    size_t i, k;

    for (k = 0; k < 2; ++k) {
        for (i = 0; i < fuzz_uct.page; ++i) {
            if (g[k][i] != FUZZ_UCT_GUARD) {
                fprintf(stderr, "fuzz_uct: %s wrote byte %zd next to the "
                        "registered memory\n", what,
                        (k == 0) ? (ssize_t)i - (ssize_t)fuzz_uct.page :
                                   (ssize_t)(fuzz_uct.page + i));
                abort();
            }
        }
    }
}

void fuzz_uct_rx_reset(unsigned i, uint32_t seq)
{
    uct_cxl_iface_t *iface = fuzz_uct.cxl[i];
    unsigned ch, n = iface->num_hosts * iface->per_host;
    uct_cxl_chan_ctl_t *chan;

    *iface->block = fuzz_uct_hdr[i];
    memset(uct_cxl_block_claims(iface->block, 0), 0,
           iface->num_hosts * sizeof(uct_cxl_block_claim_t));
    for (ch = 0; ch < n; ++ch) {
        chan = uct_cxl_block_chan(iface->block, ch);
        memset(chan, 0, iface->block->chan_stride);
        chan->seq = seq;
        memset(&iface->rx[ch], 0, sizeof(iface->rx[ch]));
        iface->rx[ch].seq   = seq;
        iface->rx[ch].first = uct_cxl_chan_first_seq(iface->id, ch);
    }
    memset(iface->active, 0, iface->num_hosts * sizeof(*iface->active));
    iface->claim_poll = 1;
}

uint64_t fuzz_uct_ring_size(unsigned i)
{
    return fuzz_uct_hdr[i].ring_size;
}

int fuzz_uct_in_heap(const void *p, uint64_t len)
{
    uintptr_t lo = (uintptr_t)fuzz_uct.pool->base + fuzz_uct.pool->heap_offset;
    uintptr_t hi = (uintptr_t)fuzz_uct.pool->base + fuzz_uct.pool->size;

    return ((uintptr_t)p >= lo) && ((uintptr_t)p <= hi) &&
           (len <= hi - (uintptr_t)p);
}

void fuzz_uct_progress(unsigned rounds)
{
    unsigned i;

    /* each interface directly: none is enabled on the worker */
    while (rounds-- > 0) {
        for (i = 0; i < FUZZ_UCT_IFACES; ++i) {
            uct_iface_progress(fuzz_uct.iface[i]);
        }
    }
}
