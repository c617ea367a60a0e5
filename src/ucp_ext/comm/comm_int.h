/*
 * libcxl_comm internals: worker (comm_worker.c), endpoints and listeners
 * (comm_ep.c), messages and requests (comm_msg.c).
 */
#ifndef CXL_COMM_INT_H
#define CXL_COMM_INT_H

#include <ucx_cxl/comm.h>
#include <ucp/api/ucp.h>
#include <ucs/datastruct/khash.h>
#include <stdarg.h>

#define CXL_COMM_AM_ID 0x71u

/*
 * Close markers: active messages of no data with a 4-byte AM header (data
 * messages have none, the binding's control messages CXL_COMM_HDR_CONTROL).
 * A graceful close sends CLOSE and keeps the UCP
 * endpoint until the peer answers CLOSE_ACK (or CLOSE: both closed), fails,
 * or CXL_COMM_LINGER_S passed: only then is it disconnected.  Without it
 * the last messages before a close could be lost: UCP drops what arrives
 * for an endpoint it has marked failed, and the peer's disconnect (tcp
 * connection manager, async thread) may be seen before the data in the
 * pool's ring is polled.
 */
#define CXL_COMM_HDR_CLOSE      1u
#define CXL_COMM_HDR_CLOSE_ACK  2u
#define CXL_COMM_LINGER_S       2.0
/* The binding's control messages carry this header (with their data). */
#define CXL_COMM_HDR_CONTROL    3u

typedef struct cxl_comm_msg {
    struct cxl_comm_msg *next;
    size_t               len;
    void                *data;      /* eager: UCP's (held) or a copy */
    int                  held;      /* data is UCP's: ucp_am_data_release */
    int                  rndv;      /* data is a rendezvous descriptor */
    int                  control;   /* a control message of the binding */
} cxl_comm_msg_t;

struct cxl_comm_req {
    int                status;      /* CXL_COMM_INPROGRESS until done */
    int                orphan;      /* freed by the caller while in flight */
    cxl_comm_worker_t *worker;
};

/* Something the binding should look at (cxl_comm_poll): an endpoint with
 * a message, a state change, or a listener with a connection to take. */
typedef struct cxl_comm_news {
    struct cxl_comm_news *next;
    uintptr_t             user;     /* the binding's cookie; 0: none */
    int                   queued;
} cxl_comm_news_t;

struct cxl_comm_ep {
    cxl_comm_news_t      news;      /* first: news lists hold its address */
    cxl_comm_ep_t       *next;      /* worker->eps */
    cxl_comm_worker_t   *worker;
    cxl_comm_listener_t *listener;  /* accepted, not taken yet */
    ucp_ep_h             ep;
    int                  status;    /* 0, or the UCS status that failed it */
    int                  ready;     /* wire-up done (the first flush) */
    int                  flushing;  /* that flush is in flight */
    int                  closing;   /* closed by the binding */
    int                  close_done;
    int                  lingering; /* closed, waiting for the peer's answer */
    int                  linger_done; /* the answer (or a failure) came */
    double               linger_until;
    int                  peer_closed; /* the peer sent CLOSE */
    int                  send_ack;  /* CLOSE_ACK to send (after progress) */
    cxl_comm_msg_t      *head, **tail; /* arrived, in order */
    char                 peer[64];
    char                 local[64];
};

struct cxl_comm_listener {
    cxl_comm_news_t    news;        /* first, as in cxl_comm_ep */
    cxl_comm_worker_t *worker;
    ucp_listener_h     listener;
    unsigned           port;
    cxl_comm_ep_t    **accepted;    /* queue of endpoints not yet taken */
    unsigned           naccepted, cap;
    cxl_comm_listener_t *next, **pprev; /* the worker's open listeners */
};

KHASH_MAP_INIT_INT64(cxl_comm_eps, cxl_comm_ep_t*)

struct cxl_comm_worker {
    ucp_context_h      ucp;
    ucp_worker_h       worker;
    int                efd;
    cxl_comm_ep_t     *eps;
    cxl_comm_listener_t *listeners; /* open ones: closed before the worker */
    unsigned           nfreeing;    /* closed endpoints UCP still holds */
    unsigned           nsweep;      /* endpoints with lingering/send_ack */
    unsigned long      ncompleted;  /* requests completed, ever */
    khash_t(cxl_comm_eps) by_uep;   /* ucp_ep_h -> endpoint, for messages */
    cxl_comm_news_t   *news_head, **news_tail;
};

/* Large copies (comm_copy.c): fn(arg, offset, len) copies one chunk of
 * [0, len), 0 or a failure; chunks go to the caller and a helper thread. */
typedef int (*cxl_comm_copy_fn_t)(void *arg, size_t offset, size_t len);
int  cxl_comm_copy_split(size_t len, cxl_comm_copy_fn_t fn, void *arg);
/* CXL_COMM_COPY_THREADS: 1 or 2, or a failure for another value. */
int  cxl_comm_copy_threads(void);

int  cxl_comm_error(int status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void cxl_comm_news(cxl_comm_worker_t *w, cxl_comm_news_t *n);
void cxl_comm_news_drop(cxl_comm_worker_t *w, cxl_comm_news_t *n);
cxl_comm_ep_t *cxl_comm_ep_new(cxl_comm_worker_t *w);
cxl_comm_ep_t *cxl_comm_ep_find(cxl_comm_worker_t *w, ucp_ep_h uep);
void cxl_comm_ep_unlink(cxl_comm_ep_t *ep);
void cxl_comm_ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status);
void cxl_comm_ep_marker(cxl_comm_ep_t *ep, uint32_t hdr);
void cxl_comm_ep_peer_marker(cxl_comm_ep_t *ep, uint32_t hdr);
void cxl_comm_sweep(cxl_comm_worker_t *w);
int  cxl_comm_msg_init(cxl_comm_worker_t *w);
void cxl_comm_msg_drop_all(cxl_comm_ep_t *ep);
cxl_comm_req_t *cxl_comm_req_new(cxl_comm_worker_t *w);
void cxl_comm_req_done(void *request, ucs_status_t status, cxl_comm_req_t *req);

#endif
