/*
 * Interface of the "cxl" transport, the TL registration, and the devices.
 *
 * Reachability is pool identity: the device address is the pool UUID, so
 * processes on different hosts (or in different namespaces) that map the
 * same pool reach each other, and processes on different pools do not.
 * Nothing here looks at boot ids, hostnames or /proc.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cxl_chan.h"

#include <uct/base/uct_worker.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/string.h>
#include <ucs/arch/cpu.h>
#include <string.h>
#include <unistd.h>

static const char *uct_cxl_test_skip_names[] = {
    [UCT_CXL_TEST_SKIP_NONE]       = "no",
    [UCT_CXL_TEST_SKIP_WRITEBACK]  = "writeback",
    [UCT_CXL_TEST_SKIP_INVALIDATE] = "invalidate",
    [UCT_CXL_TEST_SKIP_LAST]       = NULL
};

static ucs_config_field_t uct_cxl_iface_config_table[] = {
    /* buffers from uct_iface_mem_alloc() in the pool first: only pool
     * memory has keys other processes (and, with UCX_CXL_REG_ANY=y, even
     * this one) can use */
    {"", "ALLOC=md,huge,thp,mmap,heap", NULL,
     ucs_offsetof(uct_cxl_iface_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},

    /* cma's default: with UCX_TLS=cxl,cma UCP 1.13 cuts each rendezvous
     * into pieces by bandwidth relative to its fastest rma_bw lane, so a
     * higher value here would hand an ordinary buffer (which only cma can
     * reach) to cma in two pieces, two process_vm_readv calls per message */
    {"BW", "11145MBs",
     "Bandwidth of the pool memory, used by UCP to choose protocols and to\n"
     "split traffic across transports (the default is cma's: see README).",
     ucs_offsetof(uct_cxl_iface_config_t, bandwidth), UCS_CONFIG_TYPE_BW},

    {"SEG_SIZE", "8256",
     "Largest active-message bcopy payload.",
     ucs_offsetof(uct_cxl_iface_config_t, seg_size), UCS_CONFIG_TYPE_MEMUNITS},

    {"RING_SIZE", "64k",
     "Bytes of each receive channel (a power of two, at least 4 segments);\n"
     "bounds how much one sender can have in flight to one interface.",
     ucs_offsetof(uct_cxl_iface_config_t, ring_size), UCS_CONFIG_TYPE_MEMUNITS},

    {"BULK_SIZE", "512k",
     "Bytes of pool memory a sender takes, at its first large active message to\n"
     "a peer interface, for the payloads it has in flight to that peer (a\n"
     "power of two, at least 4 segments; 0: none, payloads go into the\n"
     "receiver's ring). Deep enough for the copy-in of the sender and the\n"
     "copy-out of the receiver to overlap; taken only by pairs that send.",
     ucs_offsetof(uct_cxl_iface_config_t, bulk_size), UCS_CONFIG_TYPE_MEMUNITS},

    {"NUM_CHANNELS", "128",
     "Receive channels per interface: how many sending interfaces can connect\n"
     "to it (all endpoints of one sending interface share one channel). In sw\n"
     "mode they are split evenly among the pool's host partitions. The receive\n"
     "block takes NUM_CHANNELS x (RING_SIZE + 128) bytes of pool.",
     ucs_offsetof(uct_cxl_iface_config_t, num_channels), UCS_CONFIG_TYPE_UINT},

    {"MAX_POLL", "16",
     "Records delivered per channel and progress call.",
     ucs_offsetof(uct_cxl_iface_config_t, max_poll), UCS_CONFIG_TYPE_UINT},

    {"EVENTS", "try",
     "Wake-up events (UCT_IFACE_FLAG_EVENT_RECV/EVENT_FD), so that UCP can\n"
     "sleep instead of polling. Only a peer on the same host can signal:\n"
     " try - on pools that can not span hosts (the emulated pool), in hw\n"
     "       mode only: sw mode is for peers on hosts that share no caches;\n"
     " yes - on any pool: asserts that every peer runs on this host;\n"
     " no  - never; UCP then polls this interface.",
     ucs_offsetof(uct_cxl_iface_config_t, events), UCS_CONFIG_TYPE_TERNARY},

    {"PEER_CHECK", "50us",
     "Software coherence only: how often a sender re-reads a receiver's header\n"
     "line from memory to see whether it closed (0: before every send). The\n"
     "receiver publishes its value in its block, and its close waits twice as\n"
     "long before the block is freed, so that no sender that still saw it open\n"
     "writes into the memory after it was reused.",
     ucs_offsetof(uct_cxl_iface_config_t, peer_check), UCS_CONFIG_TYPE_TIME},

    {"TEST_SKIP_WRITEBACK", "n",
     "Test only, never in production: leave out the write-back of active-\n"
     "message record bodies, so that tests can show that the non-coherent\n"
     "pool emulator (UCX_CXL_POOL=emulate-nc:PATH) catches a missing flush.",
     ucs_offsetof(uct_cxl_iface_config_t, test_skip_wb), UCS_CONFIG_TYPE_BOOL},

    {"TEST_SKIP_OWNER_SYNC", "no",
     "Test only, never in production: what this process, as the owner of pool\n"
     "memory, leaves out when peers of other hosts of a software-coherent pool\n"
     "ask it (so that tests can show that the emulator catches it):\n"
     " no         - nothing;\n"
     " writeback  - the write-back (and invalidate) before a get or a put;\n"
     " invalidate - the invalidate after a put.",
     ucs_offsetof(uct_cxl_iface_config_t, test_skip_owner),
     UCS_CONFIG_TYPE_ENUM(uct_cxl_test_skip_names)},

    {NULL}
};

static uct_iface_ops_t uct_cxl_iface_ops;

static const uct_cxl_rx_ops_t uct_cxl_rx_ops = {
    .am = uct_cxl_am_deliver,
    .op = uct_cxl_proxy_handle,
};

/* Receive, then what waits on this interface: answers and streams of
 * owner-executed operations, retired bulk rings, queued sends. */
static unsigned uct_cxl_iface_progress(uct_iface_h tl_iface)
{
    uct_cxl_iface_t *iface = ucs_derived_of(tl_iface, uct_cxl_iface_t);
    unsigned count;

    count = uct_cxl_chan_poll(iface);
    if (ucs_unlikely(iface->proxy_busy)) {
        count += uct_cxl_proxy_progress(iface);
    }
    if (ucs_unlikely(!ucs_list_is_empty(&iface->bulk_retired))) {
        count += uct_cxl_bulk_progress(iface);
    }
    return count + uct_cxl_am_dispatch_pending(iface);
}

static ucs_status_t uct_cxl_iface_query(uct_iface_h tl_iface,
                                        uct_iface_attr_t *attr)
{
    uct_cxl_iface_t *iface = ucs_derived_of(tl_iface, uct_cxl_iface_t);

    uct_base_iface_query(&iface->super, attr);

    attr->iface_addr_len  = sizeof(uct_cxl_iface_addr_t);
    attr->device_addr_len = sizeof(uct_cxl_device_addr_t);
    attr->ep_addr_len     = 0;
    attr->max_conn_priv   = 0;
    attr->cap.flags       = UCT_IFACE_FLAG_CONNECT_TO_IFACE |
                            UCT_IFACE_FLAG_AM_SHORT |
                            UCT_IFACE_FLAG_AM_BCOPY |
                            UCT_IFACE_FLAG_CB_SYNC |
                            UCT_IFACE_FLAG_EP_CHECK |
                            UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE |
                            UCT_IFACE_FLAG_PENDING;

    /*
     * RMA and atomics in both modes.  With software coherence a key of
     * pool memory of another host sends the operation through the memory's
     * owner, whose caches are the only ones that may hold its lines: it
     * executes atomics and small puts, and writes back and invalidates for
     * the gets and large puts the requester copies itself (cxl_proxy.c).
     * The atomics are CPU atomics of the owner's host, so ATOMIC_CPU holds.
     * get_short is hw-only: a get that needs the owner cannot complete
     * inside the call.
     */
    attr->cap.flags            |= UCT_IFACE_FLAG_PUT_SHORT |
                                  UCT_IFACE_FLAG_PUT_BCOPY |
                                  UCT_IFACE_FLAG_PUT_ZCOPY |
                                  UCT_IFACE_FLAG_GET_BCOPY |
                                  UCT_IFACE_FLAG_GET_ZCOPY |
                                  UCT_IFACE_FLAG_ATOMIC_CPU;
    if (iface->coh == CXL_COH_HW) {
        attr->cap.flags        |= UCT_IFACE_FLAG_GET_SHORT;
    }
    attr->cap.atomic32.op_flags =
    attr->cap.atomic64.op_flags = UCS_BIT(UCT_ATOMIC_OP_ADD) |
                                  UCS_BIT(UCT_ATOMIC_OP_AND) |
                                  UCS_BIT(UCT_ATOMIC_OP_OR)  |
                                  UCS_BIT(UCT_ATOMIC_OP_XOR);
    attr->cap.atomic32.fop_flags =
    attr->cap.atomic64.fop_flags = UCS_BIT(UCT_ATOMIC_OP_ADD)  |
                                   UCS_BIT(UCT_ATOMIC_OP_AND)  |
                                   UCS_BIT(UCT_ATOMIC_OP_OR)   |
                                   UCS_BIT(UCT_ATOMIC_OP_XOR)  |
                                   UCS_BIT(UCT_ATOMIC_OP_SWAP) |
                                   UCS_BIT(UCT_ATOMIC_OP_CSWAP);

    attr->cap.put.max_short       = UINT_MAX;
    attr->cap.put.max_bcopy       = UCT_CXL_PUT_MAX_BCOPY;
    attr->cap.put.min_zcopy       = 0;
    attr->cap.put.max_zcopy       = SIZE_MAX;
    attr->cap.put.opt_zcopy_align = 1;
    attr->cap.put.align_mtu       = 1;
    attr->cap.put.max_iov         = UCT_CXL_MAX_IOV;

    attr->cap.get.max_short       = (iface->coh == CXL_COH_HW) ? UINT_MAX : 0;
    attr->cap.get.max_bcopy       = SIZE_MAX;
    attr->cap.get.min_zcopy       = 0;
    attr->cap.get.max_zcopy       = SIZE_MAX;
    attr->cap.get.opt_zcopy_align = 1;
    attr->cap.get.align_mtu       = 1;
    attr->cap.get.max_iov         = UCT_CXL_MAX_IOV;

    attr->cap.am.max_short        = UCT_CXL_AM_MAX_SHORT;
    attr->cap.am.max_bcopy        = iface->seg_size;
    attr->cap.am.min_zcopy        = 0;
    attr->cap.am.max_zcopy        = 0;
    attr->cap.am.opt_zcopy_align  = 1;
    attr->cap.am.align_mtu        = 1;
    attr->cap.am.max_hdr          = 0;
    attr->cap.am.max_iov          = SIZE_MAX;

    if (iface->event_fd >= 0) {
        attr->cap.event_flags = UCT_IFACE_FLAG_EVENT_SEND_COMP |
                                UCT_IFACE_FLAG_EVENT_RECV |
                                UCT_IFACE_FLAG_EVENT_FD;
    }

    attr->latency             = ucs_linear_func_make(80e-9, 0);
    attr->bandwidth.dedicated = iface->bandwidth;
    attr->bandwidth.shared    = 0;
    attr->overhead            = 10e-9;
    attr->priority            = 0;
    return UCS_OK;
}

static ucs_status_t uct_cxl_iface_get_device_address(uct_iface_h tl_iface,
                                                     uct_device_addr_t *addr)
{
    uct_cxl_iface_t *iface = ucs_derived_of(tl_iface, uct_cxl_iface_t);

    memcpy(((uct_cxl_device_addr_t*)addr)->uuid, iface->pool->uuid,
           CXLPOOL_UUID_LEN);
    return UCS_OK;
}

static ucs_status_t uct_cxl_iface_get_address(uct_iface_h tl_iface,
                                              uct_iface_addr_t *addr)
{
    uct_cxl_iface_t *iface = ucs_derived_of(tl_iface, uct_cxl_iface_t);

    ((uct_cxl_iface_addr_t*)addr)->block_offset = iface->block_offset;
    ((uct_cxl_iface_addr_t*)addr)->id           = iface->id;
    return UCS_OK;
}

static int uct_cxl_iface_is_reachable(const uct_iface_h tl_iface,
                                      const uct_device_addr_t *dev_addr,
                                      const uct_iface_addr_t *iface_addr)
{
    uct_cxl_iface_t *iface = ucs_derived_of(tl_iface, uct_cxl_iface_t);

    return (dev_addr != NULL) && (iface_addr != NULL) &&
           !memcmp(((const uct_cxl_device_addr_t*)dev_addr)->uuid,
                   iface->pool->uuid, CXLPOOL_UUID_LEN);
}

static ucs_status_t uct_cxl_iface_flush(uct_iface_h tl_iface, unsigned flags,
                                        uct_completion_t *comp)
{
    uct_cxl_iface_t *iface = ucs_derived_of(tl_iface, uct_cxl_iface_t);
    ucs_status_t status    = UCS_OK;
    uct_cxl_ep_t *ep;

    /* a peer found gone is reported before the flush completes */
    ucs_list_for_each(ep, &iface->ep_list, list) {
        if (!ep->failed &&
            (ep->tx->failed || !uct_cxl_tx_peer_open(iface, ep->tx))) {
            ep->tx->failed = 1;
            uct_cxl_ep_set_failed(ep);
        }
        if ((ep->err_cb_id != UCS_CALLBACKQ_ID_NULL) ||
            !uct_cxl_proxy_ep_idle(ep)) {
            status = UCS_INPROGRESS; /* the caller progresses and retries */
        }
    }

    cxl_coh_fence(iface->coh);
    ucs_memory_cpu_store_fence();
    return status;
}

static ucs_status_t uct_cxl_iface_fence(uct_iface_h tl_iface, unsigned flags)
{
    uct_cxl_iface_t *iface = ucs_derived_of(tl_iface, uct_cxl_iface_t);
    uct_cxl_ep_t *ep;

    cxl_coh_fence(iface->coh);
    ucs_memory_cpu_fence();
    ucs_list_for_each(ep, &iface->ep_list, list) {
        uct_cxl_proxy_ep_fence(ep);
    }
    return UCS_OK;
}

static UCS_CLASS_INIT_FUNC(uct_cxl_iface_t, uct_md_h tl_md, uct_worker_h worker,
                           const uct_iface_params_t *params,
                           const uct_iface_config_t *tl_config)
{
    uct_cxl_iface_config_t *config = ucs_derived_of(tl_config,
                                                    uct_cxl_iface_config_t);
    uct_cxl_md_t *md               = ucs_derived_of(tl_md, uct_cxl_md_t);
    uint64_t stride, block_size;
    cxlpool_status_t cstatus;
    size_t am_align, am_align_offset;
    ucs_status_t status;
    cxlpool_extent_t ext;
    unsigned i;

    UCT_CHECK_PARAM(params->field_mask & UCT_IFACE_PARAM_FIELD_OPEN_MODE,
                    "UCT_IFACE_PARAM_FIELD_OPEN_MODE is not defined");
    if (!(params->open_mode & UCT_IFACE_OPEN_MODE_DEVICE)) {
        ucs_error("cxl: only UCT_IFACE_OPEN_MODE_DEVICE is supported");
        return UCS_ERR_UNSUPPORTED;
    }

    if (ucs_derived_of(worker, uct_priv_worker_t)->thread_mode ==
        UCS_THREAD_MODE_MULTI) {
        ucs_error("cxl: UCS_THREAD_MODE_MULTI workers are not supported; use "
                  "one worker per thread (UCS_THREAD_MODE_SINGLE/SERIALIZED)");
        return UCS_ERR_UNSUPPORTED;
    }

    UCS_CLASS_CALL_SUPER_INIT(uct_base_iface_t, &uct_cxl_iface_ops,
                              &uct_base_iface_internal_ops, tl_md, worker,
                              params, tl_config
                              UCS_STATS_ARG((params->field_mask &
                                             UCT_IFACE_PARAM_FIELD_STATS_ROOT) ?
                                            params->stats_root : NULL)
                              UCS_STATS_ARG(UCT_CXL_NAME));

    self->pool = NULL;
    for (i = 0; i < md->num_pools; ++i) {
        if (!strcmp(md->pools[i]->dev_name, params->mode.device.dev_name)) {
            self->pool = md->pools[i];
            break;
        }
    }
    if (self->pool == NULL) {
        ucs_error("cxl: no attached pool is named '%s'",
                  params->mode.device.dev_name);
        return UCS_ERR_NO_DEVICE;
    }

    if ((config->ring_size & (config->ring_size - 1)) ||
        (config->ring_size < 4 * uct_cxl_rec_size(config->seg_size)) ||
        (config->ring_size > (1ul << 30)) || (config->num_channels == 0) ||
        (config->seg_size == 0) || (config->max_poll == 0)) {
        ucs_error("cxl: UCX_CXL_RING_SIZE (%zu) must be a power of two of at "
                  "least 4 x UCX_CXL_SEG_SIZE (%zu) and NUM_CHANNELS, MAX_POLL "
                  "non-zero", config->ring_size, config->seg_size);
        return UCS_ERR_INVALID_PARAM;
    }

    if ((config->bulk_size != 0) &&
        ((config->bulk_size & (config->bulk_size - 1)) ||
         (config->bulk_size < 4 * ucs_align_up_pow2(config->seg_size,
                                                    UCT_CXL_LINE)) ||
         (config->bulk_size > (1ul << 30)) ||
         (config->seg_size > UCT_CXL_BULK_MAX_LENGTH))) {
        ucs_error("cxl: UCX_CXL_BULK_SIZE (%zu) must be 0 or a power of two "
                  "of at least 4 x UCX_CXL_SEG_SIZE (%zu), at most 1g",
                  config->bulk_size, config->seg_size);
        return UCS_ERR_INVALID_PARAM;
    }

    /* payloads start 16 bytes into a line-aligned record; only validate */
    if ((params->field_mask & UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT) &&
        !ucs_is_pow2(params->am_alignment)) {
        ucs_error("cxl: AM alignment %zu is not a power of two",
                  params->am_alignment);
        return UCS_ERR_INVALID_PARAM;
    }
    status = uct_iface_param_am_alignment(params, config->seg_size, 0, 0,
                                          &am_align, &am_align_offset);
    if (status != UCS_OK) {
        return status;
    }

    self->coh        = self->pool->coh;
    self->bandwidth  = config->bandwidth;
    self->seg_size   = config->seg_size;
    self->bulk_size  = config->bulk_size;
    self->max_poll   = config->max_poll;
    self->claim_poll = 1; /* at the first progress call */
    self->peer_check_us = (self->pool->coh != CXL_COH_SW) ? 0 :
                          (unsigned)ucs_min(config->peer_check * 1e6 + 0.5,
                                            (double)UINT32_MAX / 2);
    self->pack_buf   = NULL;
    self->tx_bounce  = NULL;
    self->id         = ucs_generate_uuid((uintptr_t)self);

    /*
     * Host ranges: in sw mode every host of the pool gets its own range of
     * channels (and claim line), so that no line of the block is written
     * by two hosts and claims need no cross-host CAS.
     */
    self->num_hosts  = (self->coh == CXL_COH_SW) ?
                       cxlpool_nr_hosts(self->pool->cxlpool) : 1;
    self->host_index = cxlpool_host_index(self->pool->cxlpool);
    if ((self->num_hosts == 0) || (self->num_hosts > UCT_CXL_MAX_HOSTS) ||
        (config->num_channels < self->num_hosts)) {
        ucs_error("cxl: UCX_CXL_NUM_CHANNELS (%u) must be at least the number "
                  "of hosts of pool %s (%u)", config->num_channels,
                  self->pool->path, self->num_hosts);
        return UCS_ERR_INVALID_PARAM;
    }
    self->per_host = config->num_channels / self->num_hosts;
    uct_cxl_test_skip_record_wb = config->test_skip_wb;
    uct_cxl_line_atomic         = cxl_coh_line_atomic();
    self->test_skip_owner       = config->test_skip_owner;
    if (config->test_skip_owner != UCT_CXL_TEST_SKIP_NONE) {
        ucs_warn("cxl: UCX_CXL_TEST_SKIP_OWNER_SYNC=%s is set: peers' "
                 "requests are not fully executed (test only)",
                 uct_cxl_test_skip_names[config->test_skip_owner]);
    }
    if (config->test_skip_wb) {
        ucs_warn("cxl: UCX_CXL_TEST_SKIP_WRITEBACK is set: records are not "
                 "written back (test only)");
    }

    /* the receive block: header line, claim lines, then the channels */
    stride     = sizeof(uct_cxl_chan_ctl_t) + config->ring_size;
    block_size = uct_cxl_block_size(self->num_hosts, config->num_channels,
                                    stride);
    cstatus    = cxlpool_alloc(self->pool->cxlpool, block_size, 4096, NULL, 0,
                               &ext);
    if (cstatus != CXLPOOL_OK) {
        ucs_error("cxl: cannot allocate a %" PRIu64 "-byte receive block: %s",
                  block_size, cxlpool_last_error());
        return uct_cxl_pool_status(cstatus);
    }

    self->rx     = ucs_calloc(config->num_channels, sizeof(*self->rx), "cxl_rx");
    self->active = ucs_calloc(self->num_hosts, sizeof(*self->active),
                              "cxl_active");
    if ((self->coh == CXL_COH_SW) &&
        (ucs_posix_memalign((void**)&self->tx_bounce, UCT_CXL_LINE,
                            uct_cxl_rec_size(self->seg_size),
                            "cxl_tx_bounce") != 0)) {
        self->tx_bounce = NULL;
    }
    if ((self->rx == NULL) || (self->active == NULL) ||
        ((self->coh == CXL_COH_SW) && (self->tx_bounce == NULL))) {
        cxlpool_free(self->pool->cxlpool, ext.offset);
        ucs_free(self->rx);
        ucs_free(self->active);
        ucs_free(self->tx_bounce);
        return UCS_ERR_NO_MEMORY;
    }
    /* a fresh block: zeroed, and every channel starts at a sequence
     * number of this interface's own, so that no stale record matches */
    self->block_offset = ext.offset;
    self->block        = (uct_cxl_block_hdr_t*)(self->pool->base + ext.offset);
    memset(self->block, 0, block_size);
    self->block->iface_id     = self->id;
    self->block->owner_token  = cxlpool_token(self->pool->cxlpool);
    self->block->num_channels = config->num_channels;
    self->block->num_hosts    = self->num_hosts;
    self->block->ring_size    = (uint32_t)config->ring_size;
    self->block->chan_stride  = stride;
    self->block->proc_id      = uct_cxl_proc_id();
    self->block->peer_check_us = self->peer_check_us;
    self->chans       = (uint8_t*)uct_cxl_block_chan(self->block, 0);
    self->chan_stride = stride;
    self->ring_mask   = config->ring_size - 1;
    for (i = 0; i < config->num_channels; ++i) {
        self->rx[i].seq   = uct_cxl_chan_first_seq(self->id, i);
        self->rx[i].first = self->rx[i].seq;
        uct_cxl_block_chan(self->block, i)->seq = self->rx[i].seq;
    }

    status = uct_cxl_iface_event_init(self, config->events);
    if (status != UCS_OK) {
        cxlpool_free(self->pool->cxlpool, ext.offset);
        ucs_free(self->rx);
        ucs_free(self->active);
        ucs_free(self->tx_bounce);
        return status;
    }
    self->block->events = (self->event_fd < 0) ? 0 :
                          uct_cxl_membarrier_registered ?
                          UCT_CXL_EVENTS_MEMBARRIER : UCT_CXL_EVENTS_FENCE;
    cxl_coh_publish(self->coh, self->block, block_size);
    self->block->magic = UCT_CXL_BLOCK_MAGIC;
    cxl_coh_publish(self->coh, self->block, UCT_CXL_LINE);

    ucs_arbiter_init(&self->arbiter);
    ucs_list_head_init(&self->ep_list);
    ucs_list_head_init(&self->tx_list);
    uct_cxl_proxy_iface_init(self);
    uct_cxl_bulk_iface_init(self);
    self->rx_ops = &uct_cxl_rx_ops;
    ucs_debug("cxl: iface %p id 0x%" PRIx64 " on pool %s (coherence %s), "
              "block 0x%" PRIx64 "+%" PRIu64, self, self->id, self->pool->path,
              cxl_coh_mode_name(self->coh), self->block_offset, block_size);
    return UCS_OK;
}

/*
 * sw mode: senders trust their cached copy of the header line for up to
 * peer_check_us after they last read it from memory.  A sender that read
 * it just before CLOSED landed may still write for that long; the block is
 * freed only after twice that time, so those writes land in a block
 * nobody else owns yet (doc/design/sw-coherence.md).
 */
static void uct_cxl_iface_linger(unsigned usec)
{
    ucs_time_t end = ucs_get_time() + ucs_time_from_usec(usec);
    ucs_time_t now;

    while ((now = ucs_get_time()) < end) {
        usleep(ucs_max(ucs_time_to_usec(end - now), 1.0));
    }
}

static UCS_CLASS_CLEANUP_FUNC(uct_cxl_iface_t)
{
    uct_base_iface_progress_disable(&self->super.super,
                                    UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    ucs_arbiter_cleanup(&self->arbiter);
    uct_cxl_proxy_iface_cleanup(self);
    uct_cxl_bulk_iface_cleanup(self);

    /* tell connected senders before the memory can be reused */
    self->block->magic = UCT_CXL_BLOCK_CLOSED;
    cxl_coh_publish(self->coh, self->block, UCT_CXL_LINE);
    uct_cxl_iface_event_cleanup(self);
    if (self->peer_check_us > 0) {
        uct_cxl_iface_linger(2 * self->peer_check_us);
    }
    cxlpool_free(self->pool->cxlpool, self->block_offset);
    ucs_free(self->pack_buf);
    ucs_free(self->tx_bounce);
    ucs_free(self->rx);
    ucs_free(self->active);
}

UCS_CLASS_DEFINE(uct_cxl_iface_t, uct_base_iface_t);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_cxl_iface_t, uct_iface_t);
static UCS_CLASS_DEFINE_NEW_FUNC(uct_cxl_iface_t, uct_iface_t, uct_md_h,
                                 uct_worker_h, const uct_iface_params_t*,
                                 const uct_iface_config_t*);

static uct_iface_ops_t uct_cxl_iface_ops = {
    .ep_put_short             = uct_cxl_ep_put_short,
    .ep_put_bcopy             = uct_cxl_ep_put_bcopy,
    .ep_put_zcopy             = uct_cxl_ep_put_zcopy,
    .ep_get_short             = uct_cxl_ep_get_short,
    .ep_get_bcopy             = uct_cxl_ep_get_bcopy,
    .ep_get_zcopy             = uct_cxl_ep_get_zcopy,
    .ep_atomic_cswap64        = uct_cxl_ep_atomic_cswap64,
    .ep_atomic_cswap32        = uct_cxl_ep_atomic_cswap32,
    .ep_atomic64_post         = uct_cxl_ep_atomic64_post,
    .ep_atomic32_post         = uct_cxl_ep_atomic32_post,
    .ep_atomic64_fetch        = uct_cxl_ep_atomic64_fetch,
    .ep_atomic32_fetch        = uct_cxl_ep_atomic32_fetch,
    .ep_am_short              = uct_cxl_ep_am_short,
    .ep_am_short_iov          = uct_cxl_ep_am_short_iov,
    .ep_am_bcopy              = uct_cxl_ep_am_bcopy,
    .ep_pending_add           = uct_cxl_ep_pending_add,
    .ep_pending_purge         = uct_cxl_ep_pending_purge,
    .ep_check                 = uct_cxl_ep_check,
    .ep_flush                 = uct_cxl_ep_flush,
    .ep_fence                 = uct_cxl_ep_fence,
    .ep_create                = UCS_CLASS_NEW_FUNC_NAME(uct_cxl_ep_t),
    .ep_destroy               = UCS_CLASS_DELETE_FUNC_NAME(uct_cxl_ep_t),
    .iface_flush              = uct_cxl_iface_flush,
    .iface_fence              = uct_cxl_iface_fence,
    .iface_progress_enable    = uct_base_iface_progress_enable,
    .iface_progress_disable   = uct_base_iface_progress_disable,
    .iface_progress           = uct_cxl_iface_progress,
    .iface_event_fd_get       = uct_cxl_iface_event_fd_get,
    .iface_event_arm          = uct_cxl_iface_event_arm,
    .iface_close              = UCS_CLASS_DELETE_FUNC_NAME(uct_cxl_iface_t),
    .iface_query              = uct_cxl_iface_query,
    .iface_get_device_address = uct_cxl_iface_get_device_address,
    .iface_get_address        = uct_cxl_iface_get_address,
    .iface_is_reachable       = uct_cxl_iface_is_reachable
};

/* One device per attached pool, named after it. */
static ucs_status_t
uct_cxl_query_tl_devices(uct_md_h tl_md, uct_tl_device_resource_t **devices_p,
                         unsigned *num_devices_p)
{
    uct_cxl_md_t *md = ucs_derived_of(tl_md, uct_cxl_md_t);
    uct_tl_device_resource_t *devices;
    unsigned i;

    devices = ucs_calloc(ucs_max(md->num_pools, 1), sizeof(*devices),
                         "cxl devices");
    if (devices == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    for (i = 0; i < md->num_pools; ++i) {
        ucs_strncpy_zero(devices[i].name, md->pools[i]->dev_name,
                         sizeof(devices[i].name));
        devices[i].type       = UCT_DEVICE_TYPE_SHM;
        devices[i].sys_device = UCS_SYS_DEVICE_ID_UNKNOWN;
    }

    *devices_p     = devices;
    *num_devices_p = md->num_pools;
    return UCS_OK;
}

UCT_TL_DEFINE_ENTRY(&uct_cxl_component, cxl, uct_cxl_query_tl_devices,
                    uct_cxl_iface_t, "CXL_", uct_cxl_iface_config_table,
                    uct_cxl_iface_config_t);

/* ELF constructor: loading the module (LD_PRELOAD, DT_NEEDED, dlopen, or
 * UCX_PLUGIN_PATH on UCX >= 1.22) registers the component. */
UCT_SINGLE_TL_INIT(&uct_cxl_component, cxl, ctor,,)
