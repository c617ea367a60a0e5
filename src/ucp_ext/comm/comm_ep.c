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

void cxl_comm_ep_unlink(cxl_comm_ep_t *ep)
{
    cxl_comm_ep_t **pp;

    for (pp = &ep->worker->eps; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == ep) {
            *pp = ep->next;
            return;
        }
    }
}

void cxl_comm_ep_err_cb(void *arg, ucp_ep_h uep, ucs_status_t status)
{
    cxl_comm_ep_t *ep = arg;

    (void)uep;
    if (ep->status == 0) {
        ep->status = (status < 0) ? status : UCS_ERR_CONNECTION_RESET;
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
    l->accepted[l->naccepted++] = ep;
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
    *listener_p = l;
    return CXL_COMM_OK;
}

unsigned cxl_comm_listener_port(const cxl_comm_listener_t *l)
{
    return l->port;
}

cxl_comm_ep_t *cxl_comm_accept(cxl_comm_listener_t *l)
{
    cxl_comm_ep_t *ep;

    if (l->naccepted == 0) {
        return NULL;
    }
    ep = l->accepted[0];
    memmove(&l->accepted[0], &l->accepted[1],
            (l->naccepted - 1) * sizeof(*l->accepted));
    l->naccepted--;
    return ep;
}

void cxl_comm_listener_close(cxl_comm_listener_t *l)
{
    while (l->naccepted) {
        cxl_comm_ep_close(cxl_comm_accept(l), 1);
    }
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
    *ep_p = ep;
    return CXL_COMM_OK;
}

int cxl_comm_ep_status(const cxl_comm_ep_t *ep)
{
    return ep->status;
}

const char *cxl_comm_ep_peer(const cxl_comm_ep_t *ep)
{
    return ep->peer;
}

static void cxl_comm_close_cb(void *request, ucs_status_t status, void *arg)
{
    cxl_comm_ep_t *ep = arg;

    (void)status;
    ucp_request_free(request);
    free(ep);
}

void cxl_comm_ep_close(cxl_comm_ep_t *ep, int force)
{
    ucp_request_param_t prm;
    ucs_status_ptr_t sp;

    if (ep == NULL) {
        return;
    }
    cxl_comm_ep_unlink(ep);
    cxl_comm_msg_drop_all(ep);
    ep->closing = 1;
    memset(&prm, 0, sizeof(prm));
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK |
                       UCP_OP_ATTR_FIELD_USER_DATA;
    prm.flags        = (force || ep->status) ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    prm.cb.send      = cxl_comm_close_cb;
    prm.user_data    = ep;
    sp = ucp_ep_close_nbx(ep->ep, &prm);
    if (!UCS_PTR_IS_PTR(sp)) {
        free(ep);       /* closed at once, or failed: nothing refers to it */
    }
}
