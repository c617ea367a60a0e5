/*
 * The broker's requests: one handler per brk_req_type_t, called by the
 * main loop (never from inside UCP's callbacks) with the payload copied.
 */
#include "brk_srv.h"
#include "brk_wire.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static brk_handle_t *brk_handle_find(brk_conn_t *conn, uint64_t id)
{
    brk_handle_t *h;

    for (h = conn->handles; h != NULL; h = h->next_in_conn) {
        if (h->id == id) {
            return h;
        }
    }
    return NULL;
}

static void brk_dsinfo(brk_vs_t *vs, cxl_broker_dsinfo_t *info)
{
    memset(info, 0, sizeof(*info));
    snprintf(info->name, sizeof(info->name), "%s", vs->rec.name);
    info->version         = vs->rec.version;
    info->format          = vs->rec.format;
    info->policy          = vs->rec.policy;
    info->active          = vs->rec.state == BRK_VREC_ACTIVE;
    info->nsamples        = vs->rec.nsamples;
    info->nchunks         = vs->rec.nchunks;
    info->nfiles          = vs->rec.nfiles;
    info->bytes           = vs->rec.bytes;
    info->chunk_size      = vs->rec.chunk_size;
    info->resident_chunks = vs->resident_chunks;
    info->resident_bytes  = vs->resident_bytes;
    info->pin_bytes       = (vs->rec.policy == BRK_POLICY_PIN) ?
                            vs->pinned_bytes : 0;
    info->readers         = vs->nhandles;
    info->epoch           = vs->epoch;
}

void brk_handle_close(brk_srv_t *srv, brk_handle_t *h)
{
    brk_handle_t **pp;
    brk_vs_t *vs = h->vs;
    uint64_t c;

    for (pp = &vs->handles; *pp != NULL; pp = &(*pp)->next_in_vs) {
        if (*pp == h) {
            *pp = h->next_in_vs;
            break;
        }
    }
    for (pp = &h->conn->handles; *pp != NULL; pp = &(*pp)->next_in_conn) {
        if (*pp == h) {
            *pp = h->next_in_conn;
            break;
        }
    }
    vs->nhandles--;
    if (h->rpins != NULL) {
        for (c = 0; c < vs->rec.nchunks; ++c) {
            vs->crt[c].remote_pins -= h->rpins[c];
        }
        free(h->rpins);
    }
    if (h->bitmap_len) {
        /* the reader is gone or done with it: its bits no longer pin */
        brk_heap_free(&srv->heap, h->bitmap_off, h->bitmap_len);
    }
    free(h);
    brk_vs_reap(srv);
}

static void brk_req_hello(brk_srv_t *srv, brk_conn_t *conn, uint64_t id,
                          const brk_hello_req_t *req, int given)
{
    size_t rlen = sizeof(brk_hello_rep_t) + srv->rkey_len;
    brk_hello_rep_t *rep;
    cxlpool_info_t info;

    if (given) {
        conn->pid = req->pid;
        snprintf(conn->host, sizeof(conn->host), "%.*s",
                 (int)sizeof(req->host), req->host);
    }
    rep = calloc(1, rlen);
    if (rep == NULL) {
        brk_reply_error(srv, conn, id, BRK_REQ_HELLO, CXL_BROKER_ERR_NO_MEMORY,
                        "out of memory");
        return;
    }
    cxlpool_info(srv->pool, &info);
    rep->arena_va       = (uintptr_t)srv->arena_ucp;
    rep->arena_size     = srv->arena_size;
    rep->arena_pool_off = srv->arena_pool_off;
    memcpy(rep->pool_uuid, info.uuid, sizeof(rep->pool_uuid));
    snprintf(rep->pool_path, sizeof(rep->pool_path), "%s", info.path);
    rep->coherence      = srv->coh;
    rep->rkey_len       = (uint32_t)srv->rkey_len;
    memcpy(rep + 1, srv->rkey, srv->rkey_len);
    brk_reply(srv, conn, id, BRK_REQ_HELLO, CXL_BROKER_OK, rep, rlen);
    free(rep);
}

static void brk_req_open(brk_srv_t *srv, brk_conn_t *conn, uint64_t id,
                         const brk_open_req_t *req, const char *name)
{
    brk_open_rep_t rep;
    brk_handle_t *h;
    brk_vs_t *vs;

    vs = brk_vs_find(srv, name, req->version);
    if ((vs == NULL) || (vs->rec.state != BRK_VREC_ACTIVE &&
                         req->version == 0)) {
        brk_reply_error(srv, conn, id, BRK_REQ_OPEN, CXL_BROKER_ERR_NOT_FOUND,
                        req->version ? "no dataset '%s' version %u (cxl-broker "
                        "ls)" : "no dataset '%s'%.0u (cxl-broker ls lists "
                        "them; cxl-broker add registers one)", name,
                        req->version);
        return;
    }
    if (vs->rec.state != BRK_VREC_ACTIVE) {
        brk_reply_error(srv, conn, id, BRK_REQ_OPEN, CXL_BROKER_ERR_NOT_FOUND,
                        "dataset '%s' version %u is retired: open the newest",
                        name, req->version);
        return;
    }
    h = calloc(1, sizeof(*h));
    if (h == NULL) {
        goto nomem;
    }
    if (req->local && req->token) {
        h->bitmap_len = ((vs->rec.nchunks + 511) / 512) * 64;
        if (brk_cache_alloc(srv, NULL, h->bitmap_len, 1, &h->bitmap_off)) {
            brk_reply_error(srv, conn, id, BRK_REQ_OPEN, CXL_BROKER_ERR_NO_SPACE,
                            "no room for a pin bitmap of %" PRIu64 " bytes",
                            h->bitmap_len);
            free(h);
            return;
        }
        memset(srv->arena + h->bitmap_off, 0, h->bitmap_len);
        cxl_coh_writeback(srv->coh, srv->arena + h->bitmap_off, h->bitmap_len);
        cxl_coh_fence(srv->coh);
        conn->token = req->token;
    } else {
        h->rpins = calloc(vs->rec.nchunks ? vs->rec.nchunks : 1,
                          sizeof(*h->rpins));
        if (h->rpins == NULL) {
            free(h);
            goto nomem;
        }
    }
    h->id           = ++srv->next_id;
    h->conn         = conn;
    h->vs           = vs;
    h->next_in_vs   = vs->handles;
    vs->handles     = h;
    h->next_in_conn = conn->handles;
    conn->handles   = h;
    vs->nhandles++;

    memset(&rep, 0, sizeof(rep));
    rep.handle     = h->id;
    rep.dsid       = vs->rec.dsid;
    rep.version    = vs->rec.version;
    rep.format     = vs->rec.format;
    rep.nsamples   = vs->rec.nsamples;
    rep.nchunks    = vs->rec.nchunks;
    rep.meta_off   = vs->rec.meta_off;
    rep.meta_len   = vs->rec.meta_len;
    rep.states_off = vs->rec.states_off;
    rep.bitmap_off = h->bitmap_len ? h->bitmap_off : 0;
    rep.bitmap_len = h->bitmap_len;
    brk_reply(srv, conn, id, BRK_REQ_OPEN, CXL_BROKER_OK, &rep, sizeof(rep));
    return;
nomem:
    brk_reply_error(srv, conn, id, BRK_REQ_OPEN, CXL_BROKER_ERR_NO_MEMORY,
                    "out of memory");
}

static void brk_req_pin(brk_srv_t *srv, brk_conn_t *conn, uint64_t id,
                        const brk_req_t *r)
{
    const brk_pin_req_t *req = &r->u.pin;
    const uint32_t *chunks   = r->chunks;
    brk_pending_t *pend;
    brk_handle_t *h;
    uint32_t i, c;
    int pin;

    h = brk_handle_find(conn, req->handle);
    if (h == NULL) {
        brk_reply_error(srv, conn, id, BRK_REQ_PIN, CXL_BROKER_ERR_INVAL,
                        "no open dataset handle %" PRIu64, req->handle);
        return;
    }
    pend = calloc(1, sizeof(*pend) + req->n * sizeof(brk_pin_ent_t));
    if (pend == NULL) {
        brk_reply_error(srv, conn, id, BRK_REQ_PIN, CXL_BROKER_ERR_NO_MEMORY,
                        "out of memory");
        return;
    }
    pend->conn      = conn;
    pend->req_id    = id;
    pend->handle    = h->id;
    pend->flags     = req->flags;
    pend->n         = req->n;
    pend->remaining = req->n + 1;   /* + 1: until every chunk is asked for */
    pend->next      = srv->pendings;
    srv->pendings   = pend;
    pin = (h->rpins != NULL) && !(req->flags & BRK_PIN_FILL_ONLY);
    for (i = 0; i < req->n; ++i) {
        c = chunks[i];
        pend->ent[i].chunk = c;
        if (c >= h->vs->rec.nchunks) {
            pend->ent[i].status = CXL_BROKER_ERR_INVAL;
            snprintf(pend->err, sizeof(pend->err), "chunk %u out of range", c);
            pend->remaining--;
            continue;
        }
        if (pin) {
            /* pinned before it is even resident: nothing may evict it
             * between its fill and the reader's get */
            h->rpins[c]++;
            h->vs->crt[c].remote_pins++;
        }
        brk_cache_request(srv, h->vs, c, pend, i);
    }
    if (--pend->remaining == 0) {
        brk_pending_done(srv, pend);
    }
}

/* pending_done() calls this for a remote handle's entries that failed */
void brk_req_unpin_failed(brk_srv_t *srv, brk_pending_t *pend)
{
    brk_handle_t *h;
    uint32_t i, c;

    if ((pend->conn == NULL) || (pend->flags & BRK_PIN_FILL_ONLY) ||
        ((h = brk_handle_find(pend->conn, pend->handle)) == NULL) ||
        (h->rpins == NULL)) {
        return;
    }
    (void)srv;
    for (i = 0; i < pend->n; ++i) {
        c = pend->ent[i].chunk;
        if ((pend->ent[i].status != CXL_BROKER_OK) &&
            (c < h->vs->rec.nchunks) && h->rpins[c]) {
            h->rpins[c]--;
            h->vs->crt[c].remote_pins--;
        }
    }
}

static void brk_req_unpin(brk_srv_t *srv, brk_conn_t *conn,
                          const brk_req_t *r)
{
    const brk_pin_req_t *req = &r->u.pin;
    const uint32_t *chunks   = r->chunks;
    brk_handle_t *h;
    uint32_t i, c;

    (void)srv;
    if (((h = brk_handle_find(conn, req->handle)) == NULL) ||
        (h->rpins == NULL)) {
        return;
    }
    for (i = 0; i < req->n; ++i) {
        c = chunks[i];
        if ((c < h->vs->rec.nchunks) && h->rpins[c]) {
            h->rpins[c]--;
            h->vs->crt[c].remote_pins--;
        }
    }
}

static void brk_req_touch(brk_srv_t *srv, brk_conn_t *conn,
                          const brk_req_t *r)
{
    const brk_pin_req_t *req     = &r->u.pin;
    const brk_touch_ent_t *touch = r->touches;
    brk_handle_t *h;
    uint32_t i;

    if ((h = brk_handle_find(conn, req->handle)) == NULL) {
        return;
    }
    for (i = 0; i < req->n; ++i) {
        if (touch[i].chunk < h->vs->rec.nchunks) {
            brk_cache_touch(srv, h->vs, touch[i].chunk, touch[i].reads);
        }
    }
}

static void brk_req_epoch(brk_srv_t *srv, brk_conn_t *conn, uint64_t id,
                          const brk_req_t *r)
{
    const brk_epoch_req_t *req = &r->u.epoch;
    brk_handle_t *h;
    int rc;

    if ((h = brk_handle_find(conn, req->handle)) == NULL) {
        brk_reply_error(srv, conn, id, BRK_REQ_EPOCH, CXL_BROKER_ERR_INVAL,
                        "no open dataset handle %" PRIu64, req->handle);
        return;
    }
    if (req->epoch != h->vs->epoch) {
        h->vs->epoch = req->epoch;
        (void)brk_vs_epoch_stat(h->vs);
    }
    if (req->n) {
        rc = brk_plan_set(h->vs, r->order, req->n);
        if (rc) {
            brk_reply_error(srv, conn, id, BRK_REQ_EPOCH, (rc == -2) ?
                            CXL_BROKER_ERR_INVAL : CXL_BROKER_ERR_NO_MEMORY,
                            (rc == -2) ? "epoch order names a sample past the "
                            "end of %s" : "out of memory for the plan of %s",
                            h->vs->rec.name);
            return;
        }
        if (h->vs->rec.policy == BRK_POLICY_PLAN) {
            brk_plan_prefetch(srv, h->vs);
        }
    }
    brk_reply(srv, conn, id, BRK_REQ_EPOCH, CXL_BROKER_OK, NULL, 0);
}

static void brk_req_rm(brk_srv_t *srv, brk_conn_t *conn, uint64_t id,
                       const char *name)
{
    brk_vs_t *vs;

    vs = brk_vs_find(srv, name, 0);
    if (vs == NULL) {
        brk_reply_error(srv, conn, id, BRK_REQ_RM, CXL_BROKER_ERR_NOT_FOUND,
                        "no dataset '%s'", name);
        return;
    }
    brk_log(srv, "%s v%u: removed (%u readers finish on it)", name,
            vs->rec.version, vs->nhandles);
    brk_vs_retire(srv, vs);
    brk_reply(srv, conn, id, BRK_REQ_RM, CXL_BROKER_OK, NULL, 0);
}

static void brk_req_evict(brk_srv_t *srv, brk_conn_t *conn, uint64_t id,
                          const char *name)
{
    brk_count_rep_t rep = {0};
    brk_vs_t *vs;
    uint64_t c;
    int any = 0;

    for (vs = srv->versions; vs != NULL; vs = vs->next) {
        if (name[0] && strcmp(name, vs->rec.name)) {
            continue;
        }
        any = 1;
        vs->ra_left = 0;        /* and read no further ahead into it */
        for (c = 0; c < vs->rec.nchunks; ++c) {
            rep.count += (uint64_t)brk_cache_evict(srv, vs, (uint32_t)c);
        }
    }
    if (!any && name[0]) {
        brk_reply_error(srv, conn, id, BRK_REQ_EVICT, CXL_BROKER_ERR_NOT_FOUND,
                        "no dataset '%s'", name);
        return;
    }
    brk_reply(srv, conn, id, BRK_REQ_EVICT, CXL_BROKER_OK, &rep, sizeof(rep));
}

static void brk_req_list(brk_srv_t *srv, brk_conn_t *conn, uint64_t id)
{
    brk_list_rep_t *rep;
    cxl_broker_dsinfo_t *info;
    uint32_t n = 0;
    brk_vs_t *vs;

    for (vs = srv->versions; vs != NULL; vs = vs->next) {
        n++;
    }
    rep = calloc(1, sizeof(*rep) + n * sizeof(*info));
    if (rep == NULL) {
        brk_reply_error(srv, conn, id, BRK_REQ_LIST, CXL_BROKER_ERR_NO_MEMORY,
                        "out of memory");
        return;
    }
    info = (cxl_broker_dsinfo_t*)(rep + 1);
    for (vs = srv->versions; vs != NULL; vs = vs->next) {
        brk_dsinfo(vs, &info[rep->n++]);
    }
    brk_reply(srv, conn, id, BRK_REQ_LIST, CXL_BROKER_OK, rep,
              sizeof(*rep) + n * sizeof(*info));
    free(rep);
}

static void brk_req_stat(brk_srv_t *srv, brk_conn_t *conn, uint64_t id)
{
    cxl_broker_epoch_stat_t *es;
    cxl_broker_stat_t *st;
    brk_list_rep_t *cnt;
    uint32_t n = 0, i;
    brk_conn_t *cc;
    brk_vs_t *vs;
    uint64_t c;
    size_t len;
    uint8_t *buf;

    for (vs = srv->versions; vs != NULL; vs = vs->next) {
        n += vs->nepochs;
    }
    len = sizeof(*st) + sizeof(*cnt) + n * sizeof(*es);
    buf = calloc(1, len);
    if (buf == NULL) {
        brk_reply_error(srv, conn, id, BRK_REQ_STAT, CXL_BROKER_ERR_NO_MEMORY,
                        "out of memory");
        return;
    }
    st  = (cxl_broker_stat_t*)buf;
    cnt = (brk_list_rep_t*)(st + 1);
    es  = (cxl_broker_epoch_stat_t*)(cnt + 1);
    st->capacity        = srv->heap.end - srv->heap.start;
    st->used            = srv->heap.used;
    st->fills           = srv->fills;
    st->fill_bytes      = srv->fill_bytes;
    st->fill_errors     = srv->fill_errors;
    st->file_bytes_read = srv->file_bytes_read;
    st->direct_bytes    = srv->direct_bytes;
    st->hits            = srv->hits;
    st->misses          = srv->misses;
    st->evictions       = srv->evictions;
    st->readaheads      = srv->readaheads;
    st->boot            = srv->hdr->boot;
    st->fill_seconds    = srv->fill_seconds;
    snprintf(st->addr, sizeof(st->addr), "%s", srv->addr);
    {
        cxlpool_info_t info;
        cxlpool_info(srv->pool, &info);
        snprintf(st->pool, sizeof(st->pool), "%s", info.path);
    }
    for (cc = srv->conns; cc != NULL; cc = cc->next) {
        st->clients += !cc->dead;
    }
    for (vs = srv->versions; vs != NULL; vs = vs->next) {
        st->resident_chunks += vs->resident_chunks;
        st->chunk_bytes     += vs->resident_bytes;
        for (c = 0; c < vs->rec.nchunks; ++c) {
            st->pinned_chunks += (uint64_t)brk_cache_pinned(srv, vs, (uint32_t)c);
        }
        for (i = 0; i < vs->nepochs; ++i) {
            es[cnt->n++] = vs->epochs[i];
        }
    }
    brk_reply(srv, conn, id, BRK_REQ_STAT, CXL_BROKER_OK, buf, len);
    free(buf);
}

void brk_req_dispatch(brk_srv_t *srv, brk_conn_t *conn, const brk_req_hdr_t *hdr,
                      const void *p, size_t len)
{
    char err[BRK_ERRMSG_MAX];
    brk_handle_t *h;
    brk_req_t req;
    int rc;

    rc = brk_req_decode(hdr, p, len, &req, err, sizeof(err));
    if (rc != CXL_BROKER_OK) {
        /* UNPIN and TOUCH have no answer: a malformed one is dropped */
        if ((hdr->type != BRK_REQ_UNPIN) && (hdr->type != BRK_REQ_TOUCH)) {
            brk_reply_error(srv, conn, hdr->req_id, hdr->type, rc, "%s", err);
        }
        return;
    }
    switch (req.type) {
    case BRK_REQ_HELLO:
        brk_req_hello(srv, conn, hdr->req_id, &req.u.hello,
                      len >= sizeof(req.u.hello));
        break;
    case BRK_REQ_OPEN:
        brk_req_open(srv, conn, hdr->req_id, &req.u.open, req.name);
        break;
    case BRK_REQ_CLOSE:
        h = brk_handle_find(conn, req.u.handle.handle);
        if (h != NULL) {
            brk_handle_close(srv, h);
        }
        brk_reply(srv, conn, hdr->req_id, hdr->type, CXL_BROKER_OK, NULL, 0);
        break;
    case BRK_REQ_PIN:
        brk_req_pin(srv, conn, hdr->req_id, &req);
        break;
    case BRK_REQ_UNPIN:
        brk_req_unpin(srv, conn, &req);
        break;
    case BRK_REQ_EPOCH:
        brk_req_epoch(srv, conn, hdr->req_id, &req);
        break;
    case BRK_REQ_TOUCH:
        brk_req_touch(srv, conn, &req);
        break;
    case BRK_REQ_ADD:
        brk_add_start(srv, conn, hdr->req_id, &req);
        break;
    case BRK_REQ_RM:
        brk_req_rm(srv, conn, hdr->req_id, req.name);
        break;
    case BRK_REQ_EVICT:
        brk_req_evict(srv, conn, hdr->req_id, req.name);
        break;
    case BRK_REQ_LIST:
        brk_req_list(srv, conn, hdr->req_id);
        break;
    case BRK_REQ_STAT:
        brk_req_stat(srv, conn, hdr->req_id);
        break;
    default:            /* brk_req_decode refused it already */
        break;
    }
}
