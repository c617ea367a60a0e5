/*
 * Requests to the broker: an active message with a reply endpoint; the
 * answer lands in the slot of its req_id.  Up to BRK_CALL_SLOTS requests
 * may be outstanding (warm keeps two, so the reader threads never idle).
 * A failed endpoint (the broker died) ends every wait at once.
 */
#include "brk_client_int.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    brk_call_slot_t *slot;
} brk_rndv_t;

static void brk_rndv_cb(void *request, ucs_status_t status, size_t length,
                        void *user_data)
{
    brk_call_slot_t *slot = user_data;

    (void)length;
    if (status != UCS_OK) {
        slot->status = CXL_BROKER_ERR_UCX;
    }
    slot->done = 1;
    ucp_request_free(request);
}

static brk_call_slot_t *brk_slot_find(cxl_broker_t *b, uint64_t id)
{
    unsigned i;

    for (i = 0; i < BRK_CALL_SLOTS; ++i) {
        if (b->slots[i].req_id == id) {
            return &b->slots[i];
        }
    }
    return NULL;
}

static ucs_status_t brk_rep_cb(void *arg, const void *header, size_t header_len,
                               void *data, size_t length,
                               const ucp_am_recv_param_t *param)
{
    cxl_broker_t *b = arg;
    const brk_rep_hdr_t *hdr = header;
    brk_call_slot_t *slot;
    ucp_request_param_t prm;
    ucs_status_ptr_t sp;

    if ((header_len != sizeof(*hdr)) || (hdr->req_id == 0) ||
        ((slot = brk_slot_find(b, hdr->req_id)) == NULL) || slot->done) {
        return UCS_OK;
    }
    slot->status = hdr->status;
    slot->len    = length;
    slot->data   = malloc(length ? length : 1);
    if (slot->data == NULL) {
        slot->status = CXL_BROKER_ERR_NO_MEMORY;
        slot->done   = 1;
        return UCS_OK;
    }
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        memset(&prm, 0, sizeof(prm));
        prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                           UCP_OP_ATTR_FIELD_USER_DATA;
        prm.cb.recv_am   = brk_rndv_cb;
        prm.user_data    = slot;
        sp = ucp_am_recv_data_nbx(b->worker, data, slot->data, length, &prm);
        if (UCS_PTR_IS_ERR(sp)) {
            slot->status = CXL_BROKER_ERR_UCX;
            slot->done   = 1;
        } else if (sp == NULL) {
            slot->done = 1;
        }
        return UCS_OK;
    }
    memcpy(slot->data, data, length);
    slot->done = 1;
    return UCS_OK;
}

int brk_client_init_am(cxl_broker_t *b)
{
    ucp_am_handler_param_t amp;

    memset(&amp, 0, sizeof(amp));
    amp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                     UCP_AM_HANDLER_PARAM_FIELD_CB |
                     UCP_AM_HANDLER_PARAM_FIELD_ARG;
    amp.id  = BRK_AM_REP;
    amp.cb  = brk_rep_cb;
    amp.arg = b;
    return (ucp_worker_set_am_recv_handler(b->worker, &amp) == UCS_OK) ? 0 : -1;
}

static cxl_broker_status_t brk_gone(cxl_broker_t *b)
{
    return brk_cerr(CXL_BROKER_ERR_DISCONNECTED, "broker %s: connection "
                    "lost (%s): is cxl-broker serve still running?", b->addr,
                    ucs_status_string(b->ep_status));
}

/*
 * A UCP request on the broker's endpoint failed.  A failure of the
 * connection is the broker's death, also when UCP completes the request
 * before it runs the endpoint's error handler (then b->dead is not set
 * yet, and the reader saw "ucp_get: Endpoint timeout" instead of the
 * connection-lost error, in about 1 of 4 runs of run-broker-kill.sh c).
 */
cxl_broker_status_t brk_req_failed(cxl_broker_t *b, ucs_status_t us,
                                   const char *what)
{
    switch (us) {
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_UNREACHABLE:
        if (!b->dead) {
            b->dead      = 1;
            b->ep_status = us;
        }
        break;
    default:
        break;
    }
    if (b->dead) {
        return brk_gone(b);
    }
    return brk_cerr(CXL_BROKER_ERR_UCX, "%s: %s", what, ucs_status_string(us));
}

int brk_call_post(cxl_broker_t *b, uint32_t type, const void *payload,
                  size_t len, int want_reply)
{
    brk_call_slot_t *slot = NULL, tmp;
    ucp_request_param_t prm;
    ucs_status_ptr_t sp;
    unsigned i;

    if (b->dead) {
        return -(int)brk_gone(b);
    }
    for (i = 0; want_reply && (i < BRK_CALL_SLOTS); ++i) {
        if (b->slots[i].req_id == 0) {
            slot = &b->slots[i];
            break;
        }
    }
    if (want_reply && (slot == NULL)) {
        return -(int)brk_cerr(CXL_BROKER_ERR_BUSY, "too many requests in flight");
    }
    if (slot == NULL) {
        slot = &tmp;
    }
    memset(slot, 0, sizeof(*slot));
    slot->hdr.type   = type;
    slot->hdr.proto  = BRK_PROTO_VERSION;
    slot->hdr.req_id = want_reply ? ++b->next_req : 0;
    slot->req_id     = slot->hdr.req_id;
    memset(&prm, 0, sizeof(prm));
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags        = UCP_AM_SEND_FLAG_REPLY;
    sp = ucp_am_send_nbx(b->ep, BRK_AM_REQ, &slot->hdr, sizeof(slot->hdr),
                         payload, len, &prm);
    if (UCS_PTR_IS_ERR(sp)) {
        slot->req_id = 0;
        return -(int)brk_cerr(CXL_BROKER_ERR_UCX, "broker %s: send: %s",
                              b->addr, ucs_status_string(UCS_PTR_STATUS(sp)));
    }
    if (!want_reply) {
        /* header and payload are on the caller's stack: see them out */
        while ((sp != NULL) && (ucp_request_check_status(sp) == UCS_INPROGRESS)
               && !b->dead) {
            ucp_worker_progress(b->worker);
        }
        if (sp != NULL) {
            ucp_request_free(sp);
        }
        return 0;
    }
    slot->sreq = sp;
    return (int)(slot - b->slots);
}

/* a slot's send must be complete before the slot (its header) is reused,
 * and before the caller's payload goes */
static void brk_slot_release(cxl_broker_t *b, brk_call_slot_t *slot)
{
    double deadline = brk_cnow() + b->timeout;
    int cancelled = 0;

    if (slot->sreq != NULL) {
        while (ucp_request_check_status(slot->sreq) == UCS_INPROGRESS) {
            if ((b->dead || (brk_cnow() > deadline)) && !cancelled) {
                /* a send the broker never takes: the connection is gone
                 * (the header it reads is this slot's, so it must end) */
                if (!b->dead) {
                    b->dead      = 1;
                    b->ep_status = UCS_ERR_TIMED_OUT;
                }
                ucp_request_cancel(b->worker, slot->sreq);
                cancelled = 1;
                deadline  = brk_cnow() + 1.0;
            } else if (cancelled && (brk_cnow() > deadline)) {
                /* not even the cancel completed: leave the request to UCP
                 * and never reuse this slot's header */
                slot->sreq   = NULL;
                slot->req_id = UINT64_MAX;
                return;
            }
            ucp_worker_progress(b->worker);
        }
        ucp_request_free(slot->sreq);
        slot->sreq = NULL;
    }
    slot->req_id = 0;
}

/* The error text of a failed answer: the payload, or for a PIN answer
 * with its entries (brk_pending_done) what follows them. */
static void brk_reply_text(const brk_call_slot_t *slot, const char **text,
                           size_t *tlen)
{
    const brk_pin_rep_t *rep = slot->data;
    size_t skip;

    *text = (slot->data != NULL) ? slot->data : "";
    *tlen = (slot->data != NULL) ? slot->len : 0;
    if ((slot->hdr.type == BRK_REQ_PIN) && (*tlen >= sizeof(*rep)) &&
        ((*tlen - sizeof(*rep)) / sizeof(brk_pin_ent_t) >= rep->n)) {
        skip   = sizeof(*rep) + rep->n * sizeof(brk_pin_ent_t);
        *text += skip;
        *tlen -= skip;
    }
    *tlen = strnlen(*text, *tlen);
}

cxl_broker_status_t brk_call_wait(cxl_broker_t *b, int idx, void **data,
                                  size_t *len)
{
    brk_call_slot_t *slot = &b->slots[idx];
    double deadline = brk_cnow() + b->timeout;
    cxl_broker_status_t st;
    unsigned spins = 0;
    const char *text;
    size_t tlen;

    while (!slot->done) {
        if (b->dead) {
            free(slot->data);
            brk_slot_release(b, slot);
            return brk_gone(b);
        }
        if (ucp_worker_progress(b->worker) == 0) {
            if ((++spins & 1023) == 0) {
                if (brk_cnow() > deadline) {
                    free(slot->data);
                    brk_slot_release(b, slot);
                    return brk_cerr(CXL_BROKER_ERR_TIMEOUT, "broker %s: no "
                                    "answer in %.0f s", b->addr, b->timeout);
                }
            }
        }
    }
    st = (cxl_broker_status_t)slot->status;
    if (st != CXL_BROKER_OK) {
        brk_reply_text(slot, &text, &tlen);
        brk_cerr(st, "%.*s", (int)tlen, text);
    }
    if (data != NULL) {
        *data = slot->data;
        *len  = slot->len;
    } else {
        free(slot->data);
    }
    brk_slot_release(b, slot);
    return st;
}

cxl_broker_status_t brk_call(cxl_broker_t *b, uint32_t type,
                             const void *payload, size_t len,
                             void **data, size_t *rlen)
{
    void *d = NULL;
    size_t l = 0;
    cxl_broker_status_t st;
    int slot;

    slot = brk_call_post(b, type, payload, len, 1);
    if (slot < 0) {
        return (cxl_broker_status_t)-slot;
    }
    st = brk_call_wait(b, slot, &d, &l);
    if ((st != CXL_BROKER_OK) && (type != BRK_REQ_PIN)) {
        free(d);
        return st;
    }
    if (data != NULL) {
        *data = d;
        *rlen = l;
    } else {
        free(d);
    }
    return st;
}

cxl_broker_status_t brk_get(cxl_broker_t *b, void *buf, size_t len,
                            uint64_t arena_off)
{
    ucp_request_param_t prm;
    ucs_status_ptr_t sp;
    ucs_status_t st;

    memset(&prm, 0, sizeof(prm));
    sp = ucp_get_nbx(b->ep, buf, len, b->arena_va + arena_off, b->rkey, &prm);
    if (UCS_PTR_IS_ERR(sp)) {
        return brk_cerr(CXL_BROKER_ERR_UCX, "ucp_get of %zu bytes: %s", len,
                        ucs_status_string(UCS_PTR_STATUS(sp)));
    }
    if (sp == NULL) {
        return CXL_BROKER_OK;
    }
    while ((st = ucp_request_check_status(sp)) == UCS_INPROGRESS) {
        if (b->dead) {
            ucp_request_cancel(b->worker, sp);
        }
        ucp_worker_progress(b->worker);
    }
    ucp_request_free(sp);
    if (st != UCS_OK) {
        return brk_req_failed(b, st, "ucp_get");
    }
    return CXL_BROKER_OK;
}
