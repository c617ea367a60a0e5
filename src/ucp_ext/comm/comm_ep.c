/*
 * Endpoints and listeners.  Every endpoint has peer error handling: a
 * peer that dies or closes fails the endpoint (status), and the binding
 * fails the reads waiting on it.
 */
#include "comm_int.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

cxl_comm_ep_t *cxl_comm_ep_new(cxl_comm_worker_t *w)
{
    cxl_comm_ep_t *ep = calloc(1, sizeof(*ep));

    if (ep == NULL) {
        return NULL;
    }
    ep->worker = w;
    ep->tail   = &ep->head;
    ep->next   = w->eps;
    w->eps     = ep;
    return ep;
}

/* The endpoint of a UCP endpoint (messages name theirs by reply ep). */
cxl_comm_ep_t *cxl_comm_ep_find(cxl_comm_worker_t *w, ucp_ep_h uep)
{
    khiter_t it = kh_get(cxl_comm_eps, &w->by_uep, (uint64_t)(uintptr_t)uep);

    return (it == kh_end(&w->by_uep)) ? NULL : kh_value(&w->by_uep, it);
}

static int cxl_comm_ep_index(cxl_comm_ep_t *ep)
{
    int ret;
    khiter_t it = kh_put(cxl_comm_eps, &ep->worker->by_uep,
                         (uint64_t)(uintptr_t)ep->ep, &ret);

    if (ret == UCS_KH_PUT_FAILED) {
        return cxl_comm_error(UCS_ERR_NO_MEMORY, "out of memory");
    }
    kh_value(&ep->worker->by_uep, it) = ep;
    return CXL_COMM_OK;
}

/* Out of the worker's lists: no message, error or news reaches it again. */
void cxl_comm_ep_unlink(cxl_comm_ep_t *ep)
{
    cxl_comm_worker_t *w = ep->worker;
    cxl_comm_ep_t **pp;
    khiter_t it;

    for (pp = &w->eps; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == ep) {
            *pp = ep->next;
            break;
        }
    }
    if (ep->ep != NULL) {
        it = kh_get(cxl_comm_eps, &w->by_uep, (uint64_t)(uintptr_t)ep->ep);
        if ((it != kh_end(&w->by_uep)) && (kh_value(&w->by_uep, it) == ep)) {
            kh_del(cxl_comm_eps, &w->by_uep, it);
        }
    }
    cxl_comm_news_drop(w, &ep->news);
}

/* News of an endpoint: to its listener while nobody took it yet. */
static void cxl_comm_ep_news(cxl_comm_ep_t *ep)
{
    cxl_comm_news(ep->worker, (ep->listener != NULL) ? &ep->listener->news
                                                     : &ep->news);
}

/* A closed endpoint goes once UCP holds no request of it any more. */
static void cxl_comm_ep_free(cxl_comm_ep_t *ep)
{
    if (!ep->flushing && ep->close_done) {
        ep->worker->nfreeing--;
        free(ep);
    }
}

/*
 * The first flush of an endpoint completes once UCP has wired it up (its
 * lanes are final).  Until then nothing is sent on it: UCP 1.13 would send
 * a message posted during wire-up with the protocol it chose for the
 * endpoint's first configuration (tcp only) on the lanes of the final one
 * (cxl), whose limits differ ("Invalid am_short_iov length", an assertion
 * in ucp_am_zcopy_common).  A connection that cannot be made (nobody
 * listens) fails this flush.
 */
static void cxl_comm_ready_cb(void *request, ucs_status_t status, void *arg)
{
    cxl_comm_ep_t *ep = arg;

    ucp_request_free(request);
    ep->flushing = 0;
    if (ep->closing) {
        cxl_comm_ep_free(ep);
        return;
    }
    if (status == UCS_OK) {
        ep->ready = 1;
    } else if (ep->status == 0) {
        ep->status = status;
    }
    cxl_comm_ep_news(ep);
}

static void cxl_comm_ep_local_addr(cxl_comm_ep_t *ep)
{
    ucp_ep_attr_t attr;
    const struct sockaddr_in *sin;
    char host[INET6_ADDRSTRLEN] = "";

    attr.field_mask = UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR;
    if (ucp_ep_query(ep->ep, &attr) != UCS_OK) {
        return;
    }
    sin = (const void*)&attr.local_sockaddr;
    if (sin->sin_family == AF_INET) {
        inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
        snprintf(ep->local, sizeof(ep->local), "%s:%u", host,
                 ntohs(sin->sin_port));
    }
}

static int cxl_comm_ep_start(cxl_comm_ep_t *ep)
{
    ucp_request_param_t prm;
    ucs_status_ptr_t sp;
    int rc;

    rc = cxl_comm_ep_index(ep);
    if (rc != 0) {
        return rc;
    }
    memset(&prm, 0, sizeof(prm));
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    prm.cb.send      = cxl_comm_ready_cb;
    prm.user_data    = ep;
    sp = ucp_ep_flush_nbx(ep->ep, &prm);
    if (UCS_PTR_IS_PTR(sp)) {
        ep->flushing = 1;
    } else if (sp == NULL) {
        ep->ready = 1;
        cxl_comm_ep_news(ep);
    } else {
        ep->status = UCS_PTR_STATUS(sp);
        cxl_comm_ep_news(ep);
    }
    return CXL_COMM_OK;
}

void cxl_comm_ep_err_cb(void *arg, ucp_ep_h uep, ucs_status_t status)
{
    cxl_comm_ep_t *ep = arg;

    (void)uep;
    if (ep->status == 0) {
        ep->status = (status < 0) ? status : UCS_ERR_CONNECTION_RESET;
    }
    if (ep->lingering) {
        ep->linger_done = 1;    /* the sweep disconnects it */
    } else if (!ep->closing) {
        cxl_comm_ep_news(ep);
    }
}

static int cxl_comm_sockaddr(const char *host, unsigned port,
                             struct sockaddr_storage *ss, socklen_t *len)
{
    struct addrinfo hints, *res;
    char ports[16];
    int rc;

    snprintf(ports, sizeof(ports), "%u", port);
    memset(&hints, 0, sizeof(hints));
    hints.ai_family   = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags    = AI_PASSIVE;
    rc = getaddrinfo((host && host[0]) ? host : NULL, ports, &hints, &res);
    if (rc != 0) {
        return cxl_comm_error(UCS_ERR_INVALID_ADDR, "address %s:%u: %s",
                              host ? host : "", port, gai_strerror(rc));
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

static void cxl_comm_conn_cb(ucp_conn_request_h creq, void *arg)
{
    cxl_comm_listener_t *l = arg;
    ucp_conn_request_attr_t attr;
    ucp_ep_params_t prm;
    cxl_comm_ep_t *ep, **q;
    char host[INET6_ADDRSTRLEN] = "";
    unsigned port = 0;

    if ((l->naccepted == l->cap) &&
        ((q = realloc(l->accepted, (l->cap ? 2 * l->cap : 16) * sizeof(*q))) != NULL)) {
        l->accepted = q;
        l->cap      = l->cap ? 2 * l->cap : 16;
    }
    ep = (l->naccepted < l->cap) ? cxl_comm_ep_new(l->worker) : NULL;
    if (ep == NULL) {
        ucp_listener_reject(l->listener, creq);
        return;
    }
    attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
    if (ucp_conn_request_query(creq, &attr) == UCS_OK) {
        const struct sockaddr_in *sin = (const void*)&attr.client_address;
        if (sin->sin_family == AF_INET) {
            inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
            port = ntohs(sin->sin_port);
        }
    }
    snprintf(ep->peer, sizeof(ep->peer), "%s:%u", host, port);
    memset(&prm, 0, sizeof(prm));
    prm.field_mask      = UCP_EP_PARAM_FIELD_CONN_REQUEST |
                          UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                          UCP_EP_PARAM_FIELD_ERR_HANDLER;
    prm.conn_request    = creq;
    prm.err_mode        = UCP_ERR_HANDLING_MODE_PEER;
    prm.err_handler.cb  = cxl_comm_ep_err_cb;
    prm.err_handler.arg = ep;
    if (ucp_ep_create(l->worker->worker, &prm, &ep->ep) != UCS_OK) {
        cxl_comm_ep_unlink(ep);
        free(ep);
        return;
    }
    ep->listener = l;
    l->accepted[l->naccepted++] = ep;
    if (cxl_comm_ep_start(ep) != 0) {
        ep->status = UCS_ERR_NO_MEMORY;
        cxl_comm_ep_news(ep);
    }
}

int cxl_comm_listen(cxl_comm_worker_t *w, const char *host, unsigned port,
                    cxl_comm_listener_t **listener_p)
{
    ucp_listener_params_t lp;
    ucp_listener_attr_t attr;
    struct sockaddr_storage ss;
    cxl_comm_listener_t *l;
    socklen_t len;
    ucs_status_t st;
    int rc;

    rc = cxl_comm_sockaddr(host, port, &ss, &len);
    if (rc != 0) {
        return rc;
    }
    l = calloc(1, sizeof(*l));
    if (l == NULL) {
        return cxl_comm_error(UCS_ERR_NO_MEMORY, "out of memory");
    }
    l->worker = w;
    memset(&lp, 0, sizeof(lp));
    lp.field_mask       = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
                          UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr    = (const struct sockaddr*)&ss;
    lp.sockaddr.addrlen = len;
    lp.conn_handler.cb  = cxl_comm_conn_cb;
    lp.conn_handler.arg = l;
    st = ucp_listener_create(w->worker, &lp, &l->listener);
    if (st != UCS_OK) {
        free(l);
        return cxl_comm_error(st, "listen on %s:%u: %s", host ? host : "",
                              port, ucs_status_string(st));
    }
    attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    if (ucp_listener_query(l->listener, &attr) == UCS_OK) {
        l->port = ntohs(((const struct sockaddr_in*)&attr.sockaddr)->sin_port);
    } else {
        l->port = port;
    }
    /* linked, so that a worker destroyed with it open closes it first:
     * UCP warns about the listener's async handler otherwise */
    l->next  = w->listeners;
    l->pprev = &w->listeners;
    if (w->listeners != NULL) {
        w->listeners->pprev = &l->next;
    }
    w->listeners = l;
    *listener_p  = l;
    return CXL_COMM_OK;
}

unsigned cxl_comm_listener_port(const cxl_comm_listener_t *l)
{
    return l->port;
}

void cxl_comm_listener_set_user(cxl_comm_listener_t *l, uintptr_t user)
{
    l->news.user = user;
}

static void cxl_comm_listener_take(cxl_comm_listener_t *l, unsigned i)
{
    memmove(&l->accepted[i], &l->accepted[i + 1],
            (l->naccepted - i - 1) * sizeof(*l->accepted));
    l->naccepted--;
}

/* The first accepted endpoint that is wired up; those that failed before
 * anyone took them are closed on the way. */
cxl_comm_ep_t *cxl_comm_accept(cxl_comm_listener_t *l)
{
    cxl_comm_ep_t *ep;
    unsigned i = 0;

    while (i < l->naccepted) {
        ep = l->accepted[i];
        if (ep->status) {
            cxl_comm_listener_take(l, i);
            ep->listener = NULL;
            cxl_comm_ep_close(ep, 1);
        } else if (ep->ready) {
            cxl_comm_listener_take(l, i);
            ep->listener = NULL;
            return ep;
        } else {
            ++i;
        }
    }
    return NULL;
}

void cxl_comm_listener_close(cxl_comm_listener_t *l)
{
    cxl_comm_ep_t *ep;

    while (l->naccepted) {
        ep = l->accepted[0];
        cxl_comm_listener_take(l, 0);
        ep->listener = NULL;
        cxl_comm_ep_close(ep, 1);
    }
    cxl_comm_news_drop(l->worker, &l->news);
    if (l->next != NULL) {
        l->next->pprev = l->pprev;
    }
    *l->pprev = l->next;
    ucp_listener_destroy(l->listener);
    free(l->accepted);
    free(l);
}

int cxl_comm_connect(cxl_comm_worker_t *w, const char *host, unsigned port,
                     cxl_comm_ep_t **ep_p)
{
    struct sockaddr_storage ss;
    ucp_ep_params_t prm;
    cxl_comm_ep_t *ep;
    socklen_t len;
    ucs_status_t st;
    int rc;

    rc = cxl_comm_sockaddr(host, port, &ss, &len);
    if (rc != 0) {
        return rc;
    }
    ep = cxl_comm_ep_new(w);
    if (ep == NULL) {
        return cxl_comm_error(UCS_ERR_NO_MEMORY, "out of memory");
    }
    memset(&prm, 0, sizeof(prm));
    prm.field_mask       = UCP_EP_PARAM_FIELD_FLAGS |
                           UCP_EP_PARAM_FIELD_SOCK_ADDR |
                           UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                           UCP_EP_PARAM_FIELD_ERR_HANDLER;
    prm.flags            = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    prm.sockaddr.addr    = (const struct sockaddr*)&ss;
    prm.sockaddr.addrlen = len;
    prm.err_mode         = UCP_ERR_HANDLING_MODE_PEER;
    prm.err_handler.cb   = cxl_comm_ep_err_cb;
    prm.err_handler.arg  = ep;
    st = ucp_ep_create(w->worker, &prm, &ep->ep);
    if (st != UCS_OK) {
        cxl_comm_ep_unlink(ep);
        free(ep);
        return cxl_comm_error(st, "connect to %s:%u: %s", host, port,
                              ucs_status_string(st));
    }
    snprintf(ep->peer, sizeof(ep->peer), "%s:%u", host, port);
    rc = cxl_comm_ep_start(ep);
    if (rc != 0) {
        cxl_comm_ep_close(ep, 1);
        return rc;
    }
    *ep_p = ep;
    return CXL_COMM_OK;
}

void cxl_comm_ep_set_user(cxl_comm_ep_t *ep, uintptr_t user)
{
    ep->news.user = user;
}

int cxl_comm_ep_status(const cxl_comm_ep_t *ep)
{
    if (ep->status) {
        return ep->status;
    }
    if (ep->peer_closed) {
        return UCS_ERR_CONNECTION_RESET;
    }
    return ep->ready ? CXL_COMM_OK : CXL_COMM_INPROGRESS;
}

const char *cxl_comm_ep_peer(const cxl_comm_ep_t *ep)
{
    return ep->peer;
}

int cxl_comm_ep_info(cxl_comm_ep_t *ep, char *buf, size_t len)
{
    FILE *f;

    if (len == 0) {
        return cxl_comm_error(UCS_ERR_INVALID_PARAM, "info: no room");
    }
    buf[0] = '\0';
    if (ep->status || !ep->ready) {
        return cxl_comm_error(UCS_ERR_NOT_CONNECTED, "info: not connected");
    }
    f = fmemopen(buf, len, "w");
    if (f == NULL) {
        return cxl_comm_error(UCS_ERR_NO_MEMORY, "info: fmemopen: %m");
    }
    ucp_ep_print_info(ep->ep, f);
    fclose(f);                  /* NUL-terminated, truncated to fit */
    return CXL_COMM_OK;
}

const char *cxl_comm_ep_local(cxl_comm_ep_t *ep)
{
    if ((ep->local[0] == '\0') && ep->ready && !ep->status) {
        cxl_comm_ep_local_addr(ep);
    }
    return ep->local;
}

static void cxl_comm_close_cb(void *request, ucs_status_t status, void *arg)
{
    cxl_comm_ep_t *ep = arg;

    (void)status;
    ucp_request_free(request);
    ep->close_done = 1;
    cxl_comm_ep_free(ep);
}

/* The UCP endpoint goes (the binding closed it before). */
static void cxl_comm_ep_finish(cxl_comm_ep_t *ep, int force)
{
    ucp_request_param_t prm;
    ucs_status_ptr_t sp;

    cxl_comm_ep_unlink(ep);
    memset(&prm, 0, sizeof(prm));
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK |
                       UCP_OP_ATTR_FIELD_USER_DATA;
    /* an endpoint that never got wired up has nothing to flush */
    prm.flags        = (force || ep->status || !ep->ready) ?
                       UCP_EP_CLOSE_FLAG_FORCE : 0;
    prm.cb.send      = cxl_comm_close_cb;
    prm.user_data    = ep;
    sp = ucp_ep_close_nbx(ep->ep, &prm);
    if (!UCS_PTR_IS_PTR(sp)) {
        /* closed at once, or failed: only the first flush may still
         * refer to it (it frees it when it completes) */
        ep->close_done = 1;
        cxl_comm_ep_free(ep);
    }
}

static double cxl_comm_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void cxl_comm_ep_close(cxl_comm_ep_t *ep, int force)
{
    if (ep == NULL) {
        return;
    }
    if (ep->closing) {          /* lingering: now at once */
        if (ep->lingering) {
            ep->lingering = 0;
            ep->worker->nsweep--;
            cxl_comm_ep_finish(ep, 1);
        }
        return;
    }
    if (ep->send_ack) {
        ep->send_ack = 0;
        ep->worker->nsweep--;
    }
    cxl_comm_news_drop(ep->worker, &ep->news);
    ep->news.user = 0;
    cxl_comm_msg_drop_all(ep);
    ep->closing = 1;
    ep->worker->nfreeing++;
    if (force || ep->status || !ep->ready || ep->peer_closed) {
        cxl_comm_ep_finish(ep, force || ep->peer_closed);
        return;
    }
    /* graceful: CLOSE, then the UCP endpoint stays for the peer's answer */
    ep->lingering    = 1;
    ep->linger_until = cxl_comm_now() + CXL_COMM_LINGER_S;
    ep->worker->nsweep++;
    cxl_comm_ep_marker(ep, CXL_COMM_HDR_CLOSE);
}

static const uint32_t cxl_comm_hdrs[] = {
    0, CXL_COMM_HDR_CLOSE, CXL_COMM_HDR_CLOSE_ACK
};

static void cxl_comm_marker_cb(void *request, ucs_status_t status, void *arg)
{
    (void)status;
    (void)arg;
    ucp_request_free(request);
}

/* A marker: its header is a constant, so nothing has to outlive it. */
void cxl_comm_ep_marker(cxl_comm_ep_t *ep, uint32_t hdr)
{
    ucp_request_param_t prm;
    ucs_status_ptr_t sp;

    memset(&prm, 0, sizeof(prm));
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_FLAGS;
    prm.cb.send      = cxl_comm_marker_cb;
    prm.flags        = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER;
    sp = ucp_am_send_nbx(ep->ep, CXL_COMM_AM_ID, &cxl_comm_hdrs[hdr],
                         sizeof(uint32_t), NULL, 0, &prm);
    if (UCS_PTR_IS_ERR(sp) && ep->lingering) {
        ep->linger_done = 1;    /* nobody will answer it */
    }
}

/* A marker arrived (from the message handler: nothing is sent or closed
 * here, the sweep after progress does it). */
void cxl_comm_ep_peer_marker(cxl_comm_ep_t *ep, uint32_t hdr)
{
    if (ep->lingering) {
        ep->linger_done = 1;    /* CLOSE_ACK, or CLOSE: both closed */
        return;
    }
    if (ep->closing || ep->peer_closed || (hdr != CXL_COMM_HDR_CLOSE)) {
        return;
    }
    ep->peer_closed = 1;
    ep->send_ack    = 1;
    ep->worker->nsweep++;
    cxl_comm_ep_news(ep);
}

/* After progress: answers to CLOSE, and lingering endpoints whose peer
 * answered, failed, or took too long. */
void cxl_comm_sweep(cxl_comm_worker_t *w)
{
    cxl_comm_ep_t *ep, *next;
    double now = cxl_comm_now();

    for (ep = w->eps; (ep != NULL) && (w->nsweep > 0); ep = next) {
        next = ep->next;
        if (ep->send_ack) {
            ep->send_ack = 0;
            w->nsweep--;
            if (!ep->status) {
                cxl_comm_ep_marker(ep, CXL_COMM_HDR_CLOSE_ACK);
            }
        }
        if (ep->lingering &&
            (ep->linger_done || ep->status || (now >= ep->linger_until))) {
            ep->lingering = 0;
            w->nsweep--;
            cxl_comm_ep_finish(ep, ep->status != 0);
        }
    }
}
