/*
 * Messages: one UCP active message each, queued per endpoint in arrival
 * order.  Eager data UCP lets us keep (UCP_AM_RECV_ATTR_FLAG_DATA) is
 * held until the receive copies it out; anything else is copied at once.
 * Rendezvous data stays where it is until the receiver supplies a buffer,
 * then lands there directly (ucp_am_recv_data_nbx): a large frame is
 * never copied through an intermediate buffer.
 */
#include "comm_int.h"

#include <stdlib.h>
#include <string.h>

cxl_comm_req_t *cxl_comm_req_new(cxl_comm_worker_t *w)
{
    cxl_comm_req_t *req = calloc(1, sizeof(*req));

    if (req != NULL) {
        req->status = CXL_COMM_INPROGRESS;
        req->worker = w;
    } else {
        cxl_comm_error(UCS_ERR_NO_MEMORY, "out of memory");
    }
    return req;
}

void cxl_comm_req_done(void *request, ucs_status_t status, cxl_comm_req_t *req)
{
    if (request != NULL) {
        ucp_request_free(request);
    }
    req->worker->ncompleted++;
    if (req->orphan) {
        free(req);
        return;
    }
    req->status = (status == UCS_OK) ? CXL_COMM_OK : status;
}

int cxl_comm_req_status(const cxl_comm_req_t *req)
{
    return req->status;
}

void cxl_comm_req_free(cxl_comm_req_t *req)
{
    if (req == NULL) {
        return;
    }
    if (req->status == CXL_COMM_INPROGRESS) {
        req->orphan = 1;    /* its completion frees it */
        return;
    }
    free(req);
}

static ucs_status_t cxl_comm_am_cb(void *arg, const void *header,
                                   size_t header_len, void *data, size_t length,
                                   const ucp_am_recv_param_t *param)
{
    cxl_comm_worker_t *w = arg;
    cxl_comm_ep_t *ep;
    cxl_comm_msg_t *m;
    ucs_status_t ret = UCS_OK;

    uint32_t hdr;

    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ||
        ((ep = cxl_comm_ep_find(w, param->reply_ep)) == NULL)) {
        return UCS_OK;      /* an endpoint being closed: dropped */
    }
    hdr = 0;
    if (header_len == sizeof(hdr)) {
        memcpy(&hdr, header, sizeof(hdr));
        if (hdr != CXL_COMM_HDR_CONTROL) {
            cxl_comm_ep_peer_marker(ep, hdr);
            return UCS_OK;
        }
    }
    if (ep->closing || ep->peer_closed ||
        ((m = calloc(1, sizeof(*m))) == NULL)) {
        return UCS_OK;      /* closed here, or after the peer's CLOSE: dropped */
    }
    m->len     = length;
    m->control = (hdr == CXL_COMM_HDR_CONTROL);
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        m->rndv = 1;
        m->data = data;
        ret     = UCS_INPROGRESS;   /* until ucp_am_recv_data_nbx */
    } else if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA) {
        m->held = 1;
        m->data = data;
        ret     = UCS_INPROGRESS;
    } else {
        m->data = malloc(length ? length : 1);
        if (m->data == NULL) {
            free(m);
            ep->status = UCS_ERR_NO_MEMORY;
            cxl_comm_news(w, &ep->news);
            return UCS_OK;
        }
        memcpy(m->data, data, length);
    }
    *ep->tail = m;
    ep->tail  = &m->next;
    cxl_comm_news(w, &ep->news);
    return ret;
}

int cxl_comm_msg_init(cxl_comm_worker_t *w)
{
    ucp_am_handler_param_t amp;

    memset(&amp, 0, sizeof(amp));
    amp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                     UCP_AM_HANDLER_PARAM_FIELD_CB |
                     UCP_AM_HANDLER_PARAM_FIELD_ARG;
    amp.id  = CXL_COMM_AM_ID;
    amp.cb  = cxl_comm_am_cb;
    amp.arg = w;
    return ucp_worker_set_am_recv_handler(w->worker, &amp);
}

static void cxl_comm_msg_free(cxl_comm_worker_t *w, cxl_comm_msg_t *m)
{
    if (m->held || m->rndv) {
        /* a rendezvous nobody receives: releasing it drops the data */
        ucp_am_data_release(w->worker, m->data);
    } else {
        free(m->data);
    }
    free(m);
}

void cxl_comm_msg_drop_all(cxl_comm_ep_t *ep)
{
    cxl_comm_msg_t *m;

    while ((m = ep->head) != NULL) {
        ep->head = m->next;
        cxl_comm_msg_free(ep->worker, m);
    }
    ep->tail = &ep->head;
}

static void cxl_comm_send_cb(void *request, ucs_status_t status, void *arg)
{
    cxl_comm_req_done(request, status, arg);
}

static int cxl_comm_ep_usable(cxl_comm_ep_t *ep, const char *what)
{
    if (ep->status) {
        return cxl_comm_error(ep->status, "%s: %s", what,
                              ucs_status_string(ep->status));
    }
    if (ep->peer_closed) {
        return cxl_comm_error(UCS_ERR_CONNECTION_RESET, "%s: the peer closed "
                              "the connection", what);
    }
    if (!ep->ready) {
        return cxl_comm_error(UCS_ERR_NOT_CONNECTED, "%s: not connected yet",
                              what);
    }
    return CXL_COMM_OK;
}

/* A request for an operation UCP answered with sp (NULL: done at once). */
static int cxl_comm_req_of(ucs_status_ptr_t sp, cxl_comm_req_t *req,
                           cxl_comm_req_t **req_p, const char *what)
{
    if (UCS_PTR_IS_PTR(sp)) {
        *req_p = req;
        return CXL_COMM_INPROGRESS;     /* its callback completes req */
    }
    free(req);
    if (UCS_PTR_IS_ERR(sp)) {
        return cxl_comm_error(UCS_PTR_STATUS(sp), "%s: %s", what,
                              ucs_status_string(UCS_PTR_STATUS(sp)));
    }
    return CXL_COMM_OK;
}

static int cxl_comm_send_am(cxl_comm_ep_t *ep, const void *hdr,
                            size_t hdr_len, const void *buf, size_t len,
                            cxl_comm_req_t **req_p)
{
    ucp_request_param_t prm;
    ucs_status_ptr_t sp;
    cxl_comm_req_t *req;
    int rc;

    *req_p = NULL;
    rc = cxl_comm_ep_usable(ep, "send");
    if (rc != 0) {
        return rc;
    }
    req = cxl_comm_req_new(ep->worker);
    if (req == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    memset(&prm, 0, sizeof(prm));
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                       UCP_OP_ATTR_FIELD_FLAGS;
    prm.cb.send      = cxl_comm_send_cb;
    prm.user_data    = req;
    prm.flags        = UCP_AM_SEND_FLAG_REPLY;
    sp = ucp_am_send_nbx(ep->ep, CXL_COMM_AM_ID, hdr, hdr_len, buf, len, &prm);
    return cxl_comm_req_of(sp, req, req_p, "send");
}

int cxl_comm_send_nb(cxl_comm_ep_t *ep, const void *buf, size_t len,
                     cxl_comm_req_t **req_p)
{
    return cxl_comm_send_am(ep, NULL, 0, buf, len, req_p);
}

int cxl_comm_send_control_nb(cxl_comm_ep_t *ep, const void *buf, size_t len,
                             cxl_comm_req_t **req_p)
{
    /* (the header stays UCP's until the send completes: a constant) */
    static const uint32_t hdr = CXL_COMM_HDR_CONTROL;

    if (len > CXL_COMM_CONTROL_MAX) {
        *req_p = NULL;
        return cxl_comm_error(UCS_ERR_INVALID_PARAM, "control message of %zu "
                              "bytes (at most %d)", len, CXL_COMM_CONTROL_MAX);
    }
    return cxl_comm_send_am(ep, &hdr, sizeof(hdr), buf, len, req_p);
}

cxl_comm_req_t *cxl_comm_send(cxl_comm_ep_t *ep, const void *buf, size_t len)
{
    cxl_comm_req_t *req = NULL;
    int rc = cxl_comm_send_nb(ep, buf, len, &req);

    if (rc == CXL_COMM_INPROGRESS) {
        return req;
    }
    if ((rc < 0) && (ep->status || !ep->ready)) {
        return NULL;            /* the endpoint is unusable */
    }
    req = cxl_comm_req_new(ep->worker);
    if (req != NULL) {
        req->status = rc;
    }
    return req;
}

int cxl_comm_recv_peek(cxl_comm_ep_t *ep, size_t *len)
{
    if (ep->head == NULL) {
        /* nothing more will come from a failed or closed endpoint */
        return (ep->status || ep->peer_closed) ? cxl_comm_ep_status(ep) : 0;
    }
    *len = ep->head->len;
    return ep->head->control ? CXL_COMM_CONTROL : 1;
}

static void cxl_comm_recv_cb(void *request, ucs_status_t status, size_t length,
                             void *arg)
{
    (void)length;
    cxl_comm_req_done(request, status, arg);
}

int cxl_comm_recv_nb(cxl_comm_ep_t *ep, void *buf, size_t len,
                     cxl_comm_req_t **req_p)
{
    ucp_request_param_t prm;
    cxl_comm_msg_t *m = ep->head;
    ucs_status_ptr_t sp;
    cxl_comm_req_t *req;

    *req_p = NULL;
    if (m == NULL) {
        return cxl_comm_error(UCS_ERR_NO_ELEM, "recv: no message has arrived");
    }
    if (len < m->len) {
        return cxl_comm_error(UCS_ERR_MESSAGE_TRUNCATED, "recv: message of %zu "
                              "bytes, buffer of %zu", m->len, len);
    }
    ep->head = m->next;
    if (ep->head == NULL) {
        ep->tail = &ep->head;
    }
    if (!m->rndv) {
        memcpy(buf, m->data, m->len);
        cxl_comm_msg_free(ep->worker, m);
        return CXL_COMM_OK;
    }
    req = cxl_comm_req_new(ep->worker);
    if (req == NULL) {
        /* the rendezvous can not be received: its data is dropped */
        cxl_comm_msg_free(ep->worker, m);
        return UCS_ERR_NO_MEMORY;
    }
    memset(&prm, 0, sizeof(prm));
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    prm.cb.recv_am   = cxl_comm_recv_cb;
    prm.user_data    = req;
    sp = ucp_am_recv_data_nbx(ep->worker->worker, m->data, buf, m->len, &prm);
    free(m);
    return cxl_comm_req_of(sp, req, req_p, "recv");
}

cxl_comm_req_t *cxl_comm_recv(cxl_comm_ep_t *ep, void *buf, size_t len)
{
    cxl_comm_req_t *req = NULL;
    int rc;

    if ((ep->head == NULL) || (len < ep->head->len)) {
        cxl_comm_recv_nb(ep, buf, len, &req);   /* sets the error */
        return NULL;
    }
    rc = cxl_comm_recv_nb(ep, buf, len, &req);
    if (rc == CXL_COMM_INPROGRESS) {
        return req;
    }
    req = cxl_comm_req_new(ep->worker);
    if (req != NULL) {
        req->status = rc;
    }
    return req;
}
