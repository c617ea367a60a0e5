/*
 * Bulk rings: where a sender's am_bcopy payloads live (see
 * doc/design/am-channels.md, "Bulk records").
 *
 * A channel in the receiver's block is RING_SIZE bytes for every possible
 * sender; making it deep enough for streaming (a quarter MiB and more, where
 * the copy-in of the sender and the copy-out of the receiver overlap) would
 * cost NUM_CHANNELS times that for every interface.  Instead each sending
 * channel gets, at its first large am_bcopy, a ring of BULK_SIZE bytes of
 * pool memory owned by the sending process; the record in the receiver's
 * channel carries only where the payload is.  The receiver hands the
 * position back in the consumer line (bulk_tail), next to tail.
 *
 * A ring is freed only when the receiver has consumed every record that
 * points into it, or the receiver is gone: until then it waits on the
 * interface's retired list.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cxl_iface.h"

#include <ucs/debug/log.h>
#include <ucs/time/time.h>
#include <string.h>
#include <unistd.h>

/* A ring of a released channel that the receiver may still read. */
typedef struct {
    ucs_list_link_t      list;
    uint64_t             offset;     /* of the ring in the pool */
    uct_cxl_block_hdr_t *peer;
    uint64_t             peer_id;
    uct_cxl_chan_ctl_t  *chan;
    uint64_t             head;       /* channel position after our records */
    int                  local;      /* the reader is this process */
} uct_cxl_bulk_retired_t;

/* How long an interface that closes waits for its peers to read. */
#define UCT_CXL_BULK_CLOSE_WAIT  1.0   /* seconds */

ucs_status_t uct_cxl_bulk_attach(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx)
{
    cxlpool_extent_t ext;
    cxlpool_status_t cstatus;

    if ((iface->bulk_size == 0) || tx->bulk_failed || tx->failed) {
        return UCS_ERR_UNSUPPORTED;
    }

    uct_cxl_bulk_progress(iface); /* rings peers have read: free them first */
    cstatus = cxlpool_alloc(iface->pool->cxlpool, iface->bulk_size, 4096, NULL,
                            0, &ext);
    if (cstatus != CXLPOOL_OK) {
        /* still correct, only slower: say it once per interface */
        tx->bulk_failed = 1;
        if (!iface->bulk_warned) {
            iface->bulk_warned = 1;
            ucs_warn("cxl: no %zu bytes of pool %s for a bulk ring (%s): large "
                     "active messages go inline, with less in flight; grow the "
                     "pool or lower UCX_CXL_BULK_SIZE", iface->bulk_size,
                     iface->pool->path, cxlpool_last_error());
        }
        return UCS_ERR_NO_MEMORY;
    }

    tx->bulk             = iface->pool->base + ext.offset;
    tx->bulk_offset      = ext.offset;
    tx->bulk_mask        = iface->bulk_size - 1;
    tx->bulk_head        = 0;
    tx->bulk_cached_tail = 0;
    tx->bulk_rec0        = UINT64_MAX;
    ucs_debug("cxl: iface %p: bulk ring 0x%" PRIx64 "+%zu for channel to "
              "0x%" PRIx64, iface, ext.offset, iface->bulk_size, tx->peer_id);
    return UCS_OK;
}

static void uct_cxl_bulk_free(uct_cxl_iface_t *iface, uint64_t offset)
{
    cxlpool_status_t cstatus = cxlpool_free(iface->pool->cxlpool, offset);

    if (cstatus != CXLPOOL_OK) {
        ucs_error("cxl: cannot free bulk ring 0x%" PRIx64 " of pool %s: %s",
                  offset, iface->pool->path, cxlpool_last_error());
    }
}

/* The receiver is done with everything up to 'head', or will never read. */
static int uct_cxl_bulk_unused(uct_cxl_iface_t *iface,
                               const uct_cxl_bulk_retired_t *r)
{
    if (!uct_cxl_block_is_open(iface->coh, r->peer, r->peer_id)) {
        return 1;
    }
    cxl_coh_invalidate(iface->coh, (const void*)&r->chan->tail, UCT_CXL_LINE);
    return r->chan->tail >= r->head;
}

void uct_cxl_bulk_retire(uct_cxl_iface_t *iface, uct_cxl_tx_t *tx)
{
    uct_cxl_bulk_retired_t *r;

    if (tx->bulk == NULL) {
        return;
    }

    r = ucs_malloc(sizeof(*r), "cxl_bulk_retired");
    if (r != NULL) {
        r->offset  = tx->bulk_offset;
        r->peer    = tx->peer;
        r->peer_id = tx->peer_id;
        r->chan    = tx->chan;
        r->head    = tx->head;
        r->local   = (tx->peer->proc_id == uct_cxl_proc_id());
    }
    tx->bulk = NULL;

    if (tx->failed || (r == NULL) || uct_cxl_bulk_unused(iface, r)) {
        if (r == NULL) {
            /* cannot track it: freeing could hand a peer reused memory,
             * so it stays allocated until this process detaches */
            ucs_diag("cxl: bulk ring 0x%" PRIx64 " kept until the pool is "
                     "closed (out of memory)", tx->bulk_offset);
            return;
        }
        uct_cxl_bulk_free(iface, r->offset);
        ucs_free(r);
        return;
    }
    ucs_list_add_tail(&iface->bulk_retired, &r->list);
}

unsigned uct_cxl_bulk_progress(uct_cxl_iface_t *iface)
{
    uct_cxl_bulk_retired_t *r, *tmp;
    unsigned count = 0;

    ucs_list_for_each_safe(r, tmp, &iface->bulk_retired, list) {
        if (uct_cxl_bulk_unused(iface, r)) {
            ucs_list_del(&r->list);
            uct_cxl_bulk_free(iface, r->offset);
            ucs_free(r);
            ++count;
        }
    }
    return count;
}

void uct_cxl_bulk_iface_init(uct_cxl_iface_t *iface)
{
    iface->bulk_warned = 0;
    ucs_list_head_init(&iface->bulk_retired);
}

/* Rings only other processes still have to read. */
static int uct_cxl_bulk_remote_readers(uct_cxl_iface_t *iface)
{
    uct_cxl_bulk_retired_t *r;

    ucs_list_for_each(r, &iface->bulk_retired, list) {
        if (!r->local) {
            return 1;
        }
    }
    return 0;
}

void uct_cxl_bulk_iface_cleanup(uct_cxl_iface_t *iface)
{
    ucs_time_t deadline = ucs_get_time() +
                          ucs_time_from_sec(UCT_CXL_BULK_CLOSE_WAIT);
    uct_cxl_bulk_retired_t *r, *tmp;

    /* peers in other processes that progress read their last messages now */
    uct_cxl_bulk_progress(iface);
    while (uct_cxl_bulk_remote_readers(iface) && (ucs_get_time() < deadline)) {
        if (uct_cxl_bulk_progress(iface) == 0) {
            usleep(100);
        }
    }

    /*
     * Records still point into the rest: freed, the memory could be handed
     * out again while a reader follows them, so it stays allocated until
     * this process closes the pool, which happens after all its interfaces
     * closed (a reader in this process never sees it freed).
     */
    ucs_list_for_each_safe(r, tmp, &iface->bulk_retired, list) {
        if (!r->local) {
            ucs_diag("cxl: peer interface 0x%" PRIx64 " did not read its "
                     "last messages in %.1f s; bulk ring 0x%" PRIx64 " kept "
                     "until the pool is closed", r->peer_id,
                     UCT_CXL_BULK_CLOSE_WAIT, r->offset);
        }
        ucs_list_del(&r->list);
        ucs_free(r);
    }
}
