/*
 * ucx-cxl message endpoints over UCP (libcxl_comm), for language bindings
 * that cannot drive UCP's parameter structures themselves: the Dask comm
 * backend of the Python package is built on it.
 *
 * One worker per thread of use (an event loop).  Endpoints come from
 * cxl_comm_connect() (UCP sockaddr connection establishment) or from a
 * listener.  A message is one UCP active message: sent from the caller's
 * buffer without a copy (completion through a request), received in
 * order per endpoint into a buffer the caller supplies once it knows the
 * length.  Transports are UCX's choice under UCX_TLS (default here:
 * "cxl,tcp"); rendezvous data moves on the active-message lanes (default
 * UCX_MAX_RNDV_LANES=0: with peer error handling UCP would otherwise move
 * it over tcp even where cxl connects).  Every endpoint uses peer error
 * handling, so a dead peer fails its endpoint instead of hanging it.
 */
#ifndef UCX_CXL_COMM_H
#define UCX_CXL_COMM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cxl_comm_worker   cxl_comm_worker_t;
typedef struct cxl_comm_listener cxl_comm_listener_t;
typedef struct cxl_comm_ep       cxl_comm_ep_t;
typedef struct cxl_comm_req      cxl_comm_req_t;

/* Status codes: 0 success, 1 in progress, < 0 failures (a UCS status). */
#define CXL_COMM_OK          0
#define CXL_COMM_INPROGRESS  1

/* The last error of this thread, one line. */
const char *cxl_comm_last_error(void);

int      cxl_comm_worker_create(cxl_comm_worker_t **worker_p);
/* Closes the listeners and endpoints still open (forced), then the worker. */
void     cxl_comm_worker_destroy(cxl_comm_worker_t *worker);
/* File descriptor that becomes readable on events; -1 without wake-up. */
int      cxl_comm_worker_efd(cxl_comm_worker_t *worker);
/* Progress; returns the number of events handled. */
unsigned cxl_comm_progress(cxl_comm_worker_t *worker);
/* Progress for at most usec microseconds, yielding the CPU whenever a
 * round found nothing, until a request completes or something has news
 * (cxl_comm_poll); returns the events handled.  For a transfer in flight
 * whose next step needs the peer (room in its ring). */
unsigned cxl_comm_progress_wait(cxl_comm_worker_t *worker, unsigned usec);
/* Arm the fd: 1 when the caller may sleep on it, 0 when events are
 * pending (poll again first).  A refusal for a wake-up that was pending
 * only is retried once after a progress that found nothing. */
int      cxl_comm_worker_arm(cxl_comm_worker_t *worker);
/* Progress, then the cookies (cxl_comm_ep_set_user/listener_set_user) of
 * at most max endpoints and listeners with news since they were last
 * returned: an endpoint got a message, became connected or failed; a
 * listener has an endpoint to accept.  Returns how many were written;
 * news of objects without a cookie are dropped. */
int      cxl_comm_poll(cxl_comm_worker_t *worker, uintptr_t *news, int max);

/* Listen on host:port (port 0: any); the port actually bound. */
int      cxl_comm_listen(cxl_comm_worker_t *worker, const char *host,
                         unsigned port, cxl_comm_listener_t **listener_p);
unsigned cxl_comm_listener_port(const cxl_comm_listener_t *listener);
void     cxl_comm_listener_set_user(cxl_comm_listener_t *listener, uintptr_t user);
/* The next accepted endpoint that is connected, or NULL. */
cxl_comm_ep_t *cxl_comm_accept(cxl_comm_listener_t *listener);
void     cxl_comm_listener_close(cxl_comm_listener_t *listener);

/* Starts connecting: the endpoint is usable once cxl_comm_ep_status says
 * so (a connection nobody accepts fails it: UCS_ERR_UNREACHABLE, ...). */
int      cxl_comm_connect(cxl_comm_worker_t *worker, const char *host,
                          unsigned port, cxl_comm_ep_t **ep_p);
void     cxl_comm_ep_set_user(cxl_comm_ep_t *ep, uintptr_t user);
/* 0 while usable, CXL_COMM_INPROGRESS while connecting (UCP wires it up;
 * nothing can be sent yet), else the UCS status that failed it. */
int      cxl_comm_ep_status(const cxl_comm_ep_t *ep);
/* "HOST:PORT" of the peer: as the listener saw it for accepted endpoints,
 * the address connected to for connectors. */
const char *cxl_comm_ep_peer(const cxl_comm_ep_t *ep);
/* "HOST:PORT" of this side's connection ("" while connecting). */
const char *cxl_comm_ep_local(cxl_comm_ep_t *ep);
/* UCP's description of a connected endpoint (ucp_ep_print_info: its
 * lanes, "lane[N]: ... TL/DEV ... am am_bw#0 keepalive"), into buf. */
int      cxl_comm_ep_info(cxl_comm_ep_t *ep, char *buf, size_t len);
/* Close: flushes unless force; frees the endpoint when done. */
void     cxl_comm_ep_close(cxl_comm_ep_t *ep, int force);

/* Send len bytes from buf (kept valid until the request completes). */
cxl_comm_req_t *cxl_comm_send(cxl_comm_ep_t *ep, const void *buf, size_t len);
/* The same without a request for what completes at once: CXL_COMM_OK
 * (done), CXL_COMM_INPROGRESS with *req_p (release it once done), or a
 * failure (< 0; cxl_comm_last_error). */
int      cxl_comm_send_nb(cxl_comm_ep_t *ep, const void *buf, size_t len,
                          cxl_comm_req_t **req_p);
/* Whether a message has arrived on ep: 1 (CXL_COMM_CONTROL for a control
 * message) and its length; else 0 while
 * the endpoint is usable, its status (< 0) once nothing more can come
 * (failed, or the peer closed). */
int      cxl_comm_recv_peek(cxl_comm_ep_t *ep, size_t *len);
/* Receive the next message into buf (len >= its length). */
cxl_comm_req_t *cxl_comm_recv(cxl_comm_ep_t *ep, void *buf, size_t len);
/* The same, returning like cxl_comm_send_nb. */
int      cxl_comm_recv_nb(cxl_comm_ep_t *ep, void *buf, size_t len,
                          cxl_comm_req_t **req_p);
/* Control messages of the binding (its own protocol beside the data):
 * sent like cxl_comm_send_nb, queued in order with the data messages, and
 * told apart by cxl_comm_recv_peek returning CXL_COMM_CONTROL for them;
 * at most CXL_COMM_CONTROL_MAX bytes, received like any message. */
#define CXL_COMM_CONTROL      2
#define CXL_COMM_CONTROL_MAX  256
int      cxl_comm_send_control_nb(cxl_comm_ep_t *ep, const void *buf,
                                  size_t len, cxl_comm_req_t **req_p);
/* A request's status (CXL_COMM_INPROGRESS until done), and its release
 * (a request released in progress completes on its own). */
int      cxl_comm_req_status(const cxl_comm_req_t *req);
void     cxl_comm_req_free(cxl_comm_req_t *req);

/*
 * Frames in the pool (doc/design/comm-pool-frames.md).  A receiver lends
 * the sender an extent of the pool, the sender copies a message's frames
 * straight into it, and the receiver uses them where they are: one copy,
 * where a message through the transport is copied into the pool and out
 * of it again.  The extent is the receiver's (allocated and freed by it,
 * reclaimed with its other allocations when it dies): a sender that dies
 * takes nothing a receiver still uses with it.  The messages that
 * negotiate a loan are the binding's (control messages above).
 */
typedef struct cxl_comm_pool cxl_comm_pool_t;
typedef struct {
    uint64_t offset;    /* of the extent, from the pool's base */
    uint64_t length;    /* bytes lent */
    uint32_t index;     /* the extent's record and generation: a writer */
    uint32_t gen;       /* checks them before every write */
} cxl_comm_loan_t;

/* The pool the cxl transport attaches (the first of UCX_CXL_POOL, else a
 * devdax device holding a pool, else the emulated per-user default),
 * opened once per process and counted: one _close per _open. */
int      cxl_comm_pool_open(cxl_comm_pool_t **pool_p);
void     cxl_comm_pool_close(cxl_comm_pool_t *pool);
/* At process exit: detach from the pool now, whatever still refers to the
 * handle (the loans go with the attachment; later calls do nothing or
 * fail).  Nothing may read a loan afterwards. */
void     cxl_comm_pool_exit(void);
/* Identity (CXLPOOL_UUID_LEN bytes), mapping and size. */
void     cxl_comm_pool_uuid(const cxl_comm_pool_t *pool, uint8_t *uuid);
void    *cxl_comm_pool_base(const cxl_comm_pool_t *pool);
uint64_t cxl_comm_pool_size(const cxl_comm_pool_t *pool);
/* The receiver: allocate len bytes (64-byte aligned) to lend, and free
 * them once nothing uses the frames (offset: loan->offset). */
int      cxl_comm_pool_lend(cxl_comm_pool_t *pool, uint64_t len,
                            cxl_comm_loan_t *loan);
int      cxl_comm_pool_reclaim(cxl_comm_pool_t *pool, uint64_t offset);
/* The sender: copy len bytes from src to the loan's byte at, refused
 * unless the loan names an allocated extent with room for them; then
 * cxl_comm_pool_publish() before telling the receiver. */
int      cxl_comm_pool_write(cxl_comm_pool_t *pool, const cxl_comm_loan_t *loan,
                             uint64_t at, const void *src, size_t len);
void     cxl_comm_pool_publish(cxl_comm_pool_t *pool);
/* The receiver, told the loan is written, before it reads it (sw
 * coherence: drops stale lines). */
void     cxl_comm_pool_acquire(cxl_comm_pool_t *pool, const cxl_comm_loan_t *loan);

#ifdef __cplusplus
}
#endif

#endif
