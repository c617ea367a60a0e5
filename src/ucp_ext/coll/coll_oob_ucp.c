/*
 * The out-of-band allgather of cxl_coll_team_create() over UCP tag
 * messages (libcxl_coll_ucp).
 *
 * Why a library of its own and not part of libcxl_coll: the Open MPI
 * component links libcxl_coll and gets its out-of-band exchange from MPI;
 * linking UCP into libcxl_coll would load libucp/libucs (and their
 * configuration parsing) into every process that uses the component, ob1
 * runs included, and tie the collectives to one UCP ABI for nothing.  Only
 * programs that bootstrap over UCP link libcxl_coll_ucp.
 *
 * One allgather: every rank sends its block to every other rank (tag =
 * prefix | instance | seq | sender) and receives theirs into a staging
 * buffer; the exact tag keeps consecutive calls apart (an early message
 * of call s+1 waits in UCP's unexpected queue until call s+1 posts its
 * receive).
 * Staging copies, not the caller's buffers, are handed to UCP, so a call
 * that fails can return while UCP may still touch what it was given.
 * Bootstrap sizes (a few hundred bytes per rank) make the N*(N-1) messages
 * cheaper than any multi-round scheme's latency.
 */
#include "coll_ucp_int.h"

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CXL_COLL_UCP_IDLE_SPIN  64     /* idle progress calls before yielding */
#define CXL_COLL_UCP_CANCEL_S   1.0    /* grace for cancelled receives */
#define CXL_COLL_UCP_LIST_MAX   8      /* ranks named in a timeout message */

/* One allgather in flight: what UCP was handed. */
struct cxl_coll_ucp_call {
    size_t                len;
    void                **sreq;     /* size entries; NULL: done or none */
    void                **rreq;
    uint8_t              *sdata;    /* copy of the caller's block */
    uint8_t              *rdata;    /* size * len, block k from rank k */
};

static __thread char cxl_coll_ucp_errbuf[512] = "no error";

double cxl_coll_ucp_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

cxl_coll_status_t cxl_coll_ucp_error(int rank, cxl_coll_status_t status,
                                     const char *fmt, ...)
{
    va_list ap;
    int n;

    n = snprintf(cxl_coll_ucp_errbuf, sizeof(cxl_coll_ucp_errbuf), "%s: ",
                 cxl_coll_strerror(status));
    if ((n >= 0) && ((size_t)n < sizeof(cxl_coll_ucp_errbuf))) {
        va_start(ap, fmt);
        vsnprintf(cxl_coll_ucp_errbuf + n, sizeof(cxl_coll_ucp_errbuf) - n,
                  fmt, ap);
        va_end(ap);
    }
    /* the team creation error only says "the out-of-band allgather failed" */
    fprintf(stderr, "cxl-coll-ucp[rank %d]: %s\n", rank, cxl_coll_ucp_errbuf);
    return status;
}

const char *cxl_coll_ucp_last_error(void)
{
    return cxl_coll_ucp_errbuf;
}

void cxl_coll_ucp_params_init(cxl_coll_ucp_params_t *params)
{
    memset(params, 0, sizeof(*params));
}

/*
 * The process's live objects.  Two on one worker with one tag prefix could
 * take each other's messages: a tag holds the prefix, the object's
 * instance (0 for every object of cxl_coll_ucp_oob_create), the call's
 * sequence number (every object counts from 0) and the sender's rank
 * only, so a call of one returned, as success, a block that a peer of the
 * other sent.
 */
static pthread_mutex_t     cxl_coll_ucp_live_lock = PTHREAD_MUTEX_INITIALIZER;
static cxl_coll_ucp_oob_t *cxl_coll_ucp_live;

/* Register oob; 0, or -1 if a live object has its worker and prefix. */
static int cxl_coll_ucp_live_add(cxl_coll_ucp_oob_t *oob)
{
    cxl_coll_ucp_oob_t *o;
    int rc = 0;

    pthread_mutex_lock(&cxl_coll_ucp_live_lock);
    for (o = cxl_coll_ucp_live; o != NULL; o = o->next) {
        if ((o->worker == oob->worker) && (o->prefix == oob->prefix)) {
            rc = -1;
            break;
        }
    }
    if (rc == 0) {
        oob->next          = cxl_coll_ucp_live;
        cxl_coll_ucp_live  = oob;
    }
    pthread_mutex_unlock(&cxl_coll_ucp_live_lock);
    return rc;
}

static void cxl_coll_ucp_live_del(cxl_coll_ucp_oob_t *oob)
{
    cxl_coll_ucp_oob_t **p;

    pthread_mutex_lock(&cxl_coll_ucp_live_lock);
    for (p = &cxl_coll_ucp_live; *p != NULL; p = &(*p)->next) {
        if (*p == oob) {
            *p = oob->next;
            break;
        }
    }
    pthread_mutex_unlock(&cxl_coll_ucp_live_lock);
}

cxl_coll_status_t cxl_coll_ucp_oob_alloc(const cxl_coll_ucp_params_t *params,
                                         cxl_coll_ucp_oob_t **oob_p)
{
    cxl_coll_ucp_oob_t *oob;
    unsigned prefix;
    int rank = params ? params->rank : -1;

    if (oob_p != NULL) {
        *oob_p = NULL; /* on every failure */
    }
    if ((params == NULL) || (oob_p == NULL)) {
        return cxl_coll_ucp_error(rank, CXL_COLL_ERR_INVAL,
                                  "params and oob_p are required");
    }
    if ((params->worker == NULL) || (params->size < 1) ||
        (params->size > CXL_COLL_UCP_MAX_RANKS) || (params->rank < 0) ||
        (params->rank >= params->size)) {
        return cxl_coll_ucp_error(rank, CXL_COLL_ERR_INVAL, "worker %s, rank "
                                  "%d of %d (a worker, 1 to %d ranks, 0 <= "
                                  "rank < size)", params->worker ? "set" :
                                  "missing", params->rank, params->size,
                                  CXL_COLL_UCP_MAX_RANKS);
    }
    if (!(params->timeout >= 0) || (params->timeout > 1e6)) {
        return cxl_coll_ucp_error(rank, CXL_COLL_ERR_INVAL, "timeout %g s "
                                  "(0: default, else up to 1e6)",
                                  params->timeout);
    }
    prefix = params->tag_prefix ? params->tag_prefix :
             CXL_COLL_UCP_TAG_PREFIX;
    if (prefix > 0xffff) {
        return cxl_coll_ucp_error(rank, CXL_COLL_ERR_INVAL, "tag_prefix 0x%x "
                                  "does not fit 16 bits", prefix);
    }

    oob = calloc(1, sizeof(*oob));
    if ((oob == NULL) ||
        ((oob->eps = calloc(params->size, sizeof(*oob->eps))) == NULL)) {
        free(oob);
        return cxl_coll_ucp_error(rank, CXL_COLL_ERR_NO_MEMORY, "oob object "
                                  "of %d ranks", params->size);
    }
    oob->worker  = params->worker;
    oob->rank    = params->rank;
    oob->size    = params->size;
    oob->timeout = params->timeout ? params->timeout :
                   CXL_COLL_UCP_TIMEOUT_DEFAULT;
    oob->prefix  = (uint64_t)prefix << CXL_COLL_UCP_PFX_SHIFT;
    if (cxl_coll_ucp_live_add(oob) != 0) {
        free(oob->eps);
        free(oob);
        return cxl_coll_ucp_error(rank, CXL_COLL_ERR_INVAL, "tag_prefix 0x%x "
                                  "is in use on this worker by another live "
                                  "oob object: each needs its own (their "
                                  "messages would mix)", prefix);
    }
    *oob_p       = oob;
    return CXL_COLL_OK;
}

cxl_coll_status_t cxl_coll_ucp_oob_create(const cxl_coll_ucp_params_t *params,
                                          cxl_coll_ucp_oob_t **oob_p)
{
    cxl_coll_ucp_oob_t *oob;
    cxl_coll_status_t status;
    int k;

    status = cxl_coll_ucp_oob_alloc(params, oob_p);
    if (status != CXL_COLL_OK) {
        return status;
    }
    oob = *oob_p;
    for (k = 0; k < oob->size; ++k) {
        if ((params->eps == NULL) ||
            ((k != oob->rank) && (params->eps[k] == NULL))) {
            *oob_p = NULL;
            cxl_coll_ucp_oob_destroy(oob);
            return cxl_coll_ucp_error(params->rank, CXL_COLL_ERR_INVAL,
                                      "no endpoint to rank %d (eps: one per "
                                      "rank, NULL only at the own rank)", k);
        }
        oob->eps[k] = (k == oob->rank) ? NULL : params->eps[k];
    }
    return CXL_COLL_OK;
}

static void cxl_coll_ucp_call_free(cxl_coll_ucp_call_t *call)
{
    if (call != NULL) {
        free(call->sreq);
        free(call->rreq);
        free(call->sdata);
        free(call->rdata);
        free(call);
    }
}

static cxl_coll_ucp_call_t *cxl_coll_ucp_call_alloc(int size, size_t len)
{
    cxl_coll_ucp_call_t *call = calloc(1, sizeof(*call));

    if (call == NULL) {
        return NULL;
    }
    call->len   = len;
    call->sreq  = calloc(size, sizeof(*call->sreq));
    call->rreq  = calloc(size, sizeof(*call->rreq));
    call->sdata = malloc(len ? len : 1);
    call->rdata = malloc(len ? len * size : 1);
    if ((call->sreq == NULL) || (call->rreq == NULL) ||
        (call->sdata == NULL) || (call->rdata == NULL)) {
        cxl_coll_ucp_call_free(call);
        return NULL;
    }
    return call;
}

static ucp_tag_t cxl_coll_ucp_tag(const cxl_coll_ucp_oob_t *oob, uint32_t seq,
                                  int sender)
{
    uint64_t s = (uint64_t)seq & CXL_COLL_UCP_SEQ_MASK;

    return oob->prefix | oob->instance | (s << CXL_COLL_UCP_SEQ_SHIFT) |
           (uint64_t)sender;
}

/*
 * Gives up on a call: cancels its receives (waiting briefly for UCP to
 * complete them) and keeps the call, whose sends UCP may still read, as
 * the object's orphan.  The object fails every later call.
 */
static void cxl_coll_ucp_abandon(cxl_coll_ucp_oob_t *oob,
                                 cxl_coll_ucp_call_t *call, int status)
{
    double deadline = cxl_coll_ucp_now() + CXL_COLL_UCP_CANCEL_S;
    int k, left;

    for (k = 0; k < oob->size; ++k) {
        if (call->rreq[k] != NULL) {
            ucp_request_cancel(oob->worker, call->rreq[k]);
        }
    }
    do {
        left = 0;
        ucp_worker_progress(oob->worker);
        for (k = 0; k < oob->size; ++k) {
            if ((call->rreq[k] != NULL) &&
                (ucp_request_check_status(call->rreq[k]) != UCS_INPROGRESS)) {
                ucp_request_free(call->rreq[k]);
                call->rreq[k] = NULL;
            }
            left += (call->rreq[k] != NULL);
        }
    } while (left && (cxl_coll_ucp_now() < deadline));

    /* what is still pending is released to UCP, which goes on with it */
    for (k = 0; k < oob->size; ++k) {
        if (call->rreq[k] != NULL) {
            ucp_request_free(call->rreq[k]);
        }
        if (call->sreq[k] != NULL) {
            ucp_request_free(call->sreq[k]);
        }
    }
    oob->failed = status;
    if (oob->orphan == NULL) {
        oob->orphan = call;
    }
    /* else: a second failure cannot happen, every later call fails first */
}

/* Post the receives and sends of call number seq; 0 or a status. */
static int cxl_coll_ucp_post(cxl_coll_ucp_oob_t *oob,
                             cxl_coll_ucp_call_t *call, uint32_t seq)
{
    ucp_request_param_t rp, sp;
    void *req;
    int i, k;

    memset(&rp, 0, sizeof(rp));
    memset(&sp, 0, sizeof(sp));
    /* the length comes from ucp_tag_recv_request_test(): never immediate */
    rp.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    for (k = 0; k < oob->size; ++k) {
        if (k == oob->rank) {
            continue;
        }
        req = ucp_tag_recv_nbx(oob->worker, call->rdata + k * call->len,
                               call->len, cxl_coll_ucp_tag(oob, seq, k),
                               (ucp_tag_t)-1, &rp);
        if (UCS_PTR_IS_ERR(req)) {
            return cxl_coll_ucp_error(oob->rank, CXL_COLL_ERR_OOB, "allgather "
                                      "#%u: receive from rank %d: %s", seq, k,
                                      ucs_status_string(UCS_PTR_STATUS(req)));
        }
        call->rreq[k] = req;
    }
    /* staggered, so rank 0 is not everyone's first destination */
    for (i = 1; i < oob->size; ++i) {
        k   = (oob->rank + i) % oob->size;
        req = ucp_tag_send_nbx(oob->eps[k], call->sdata, call->len,
                               cxl_coll_ucp_tag(oob, seq, oob->rank), &sp);
        if (UCS_PTR_IS_ERR(req)) {
            return cxl_coll_ucp_error(oob->rank, CXL_COLL_ERR_OOB, "allgather "
                                      "#%u: send to rank %d: %s (did it die "
                                      "or leave?)", seq, k,
                                      ucs_status_string(UCS_PTR_STATUS(req)));
        }
        call->sreq[k] = req; /* NULL: completed in place */
    }
    return 0;
}

/* "2, 5, 7" of the ranks whose message has not arrived. */
static void cxl_coll_ucp_missing(const cxl_coll_ucp_oob_t *oob,
                                 const cxl_coll_ucp_call_t *call, char *buf,
                                 size_t len)
{
    size_t n = 0;
    int k, listed = 0, more = 0;

    buf[0] = '\0';
    for (k = 0; k < oob->size; ++k) {
        if ((call->rreq[k] == NULL) && (call->sreq[k] == NULL)) {
            continue;
        }
        if (listed == CXL_COLL_UCP_LIST_MAX) {
            ++more;
            continue;
        }
        if (n < len) {
            n += snprintf(buf + n, len - n, "%s%d%s", listed ? ", " : "", k,
                          (call->rreq[k] == NULL) ? " (send)" : "");
        }
        ++listed;
    }
    if (more && (n < len)) {
        snprintf(buf + n, len - n, " and %d more", more);
    }
}

/*
 * Progress until every request of the call completed; 0 or a status.  The
 * result needs every peer's block; whether a peer got this rank's block is
 * the peer's business.  So the failure of a peer's endpoint (bootstrap
 * endpoints), or of a send to it, fails the call only while that peer's
 * block is still missing: a peer that has sent its block may finish, close
 * its endpoints and exit before this rank is done.
 */
static int cxl_coll_ucp_complete(cxl_coll_ucp_oob_t *oob,
                                 cxl_coll_ucp_call_t *call, uint32_t seq)
{
    double start    = cxl_coll_ucp_now();
    double deadline = (oob->deadline > 0) ? oob->deadline :
                      start + oob->timeout;
    ucp_tag_recv_info_t info;
    ucs_status_t st;
    unsigned idle = 0;
    char list[160];
    int k, pending;

    for (;;) {
        pending = 0;
        for (k = 0; k < oob->size; ++k) {
            if (call->sreq[k] != NULL) {
                st = ucp_request_check_status(call->sreq[k]);
                if (st != UCS_INPROGRESS) {
                    ucp_request_free(call->sreq[k]);
                    call->sreq[k] = NULL;
                    /* the result needs every block, not that every
                     * peer got this one: a peer whose block is here may
                     * have finished and left */
                    if ((st != UCS_OK) && (call->rreq[k] != NULL)) {
                        return cxl_coll_ucp_error(oob->rank, CXL_COLL_ERR_OOB,
                                                  "allgather #%u: send to "
                                                  "rank %d failed: %s", seq, k,
                                                  ucs_status_string(st));
                    }
                }
            }
            if (call->rreq[k] != NULL) {
                st = ucp_tag_recv_request_test(call->rreq[k], &info);
                if (st != UCS_INPROGRESS) {
                    ucp_request_free(call->rreq[k]);
                    call->rreq[k] = NULL;
                    if ((st != UCS_OK) || (info.length != call->len)) {
                        return cxl_coll_ucp_error(oob->rank, CXL_COLL_ERR_OOB,
                                                  "allgather #%u of %zu bytes:"
                                                  " receive from rank %d: %s "
                                                  "(%zu bytes; do all ranks "
                                                  "pass the same length?)",
                                                  seq, call->len, k,
                                                  ucs_status_string(st),
                                                  (st == UCS_OK) ?
                                                  info.length : 0);
                    }
                }
            }
            if ((call->sreq[k] == NULL) && (call->rreq[k] == NULL)) {
                continue;
            }
            ++pending;
            /* a send on a failed endpoint completes with an error soon */
            if ((oob->peers != NULL) && oob->peers[k].failed &&
                (call->rreq[k] != NULL)) {
                return cxl_coll_ucp_error(oob->rank, CXL_COLL_ERR_OOB,
                                          "allgather #%u: the endpoint to "
                                          "rank %d failed: %s (the rank died "
                                          "or left)", seq, k,
                                          ucs_status_string(
                                              oob->peers[k].status));
            }
        }
        if (pending == 0) {
            return 0;
        }
        if (cxl_coll_ucp_now() > deadline) {
            cxl_coll_ucp_missing(oob, call, list, sizeof(list));
            return cxl_coll_ucp_error(oob->rank, CXL_COLL_ERR_TIMEOUT,
                                      "allgather #%u of %zu bytes: nothing "
                                      "from rank(s) %s within %.3g s (a rank "
                                      "did not make the call, or it is stuck "
                                      "or dead)", seq, call->len, list,
                                      deadline - start);
        }
        /* ranks may outnumber cores: let the one awaited run */
        if (ucp_worker_progress(oob->worker) != 0) {
            idle = 0;
        } else if (++idle > CXL_COLL_UCP_IDLE_SPIN) {
            sched_yield();
        }
    }
}

int cxl_coll_ucp_allgather(void *arg, const void *sbuf, void *rbuf, size_t len)
{
    cxl_coll_ucp_oob_t *oob = arg;
    cxl_coll_ucp_call_t *call;
    uint32_t seq;
    int k, status;

    if (oob == NULL) {
        return cxl_coll_ucp_error(-1, CXL_COLL_ERR_INVAL, "allgather: no oob "
                                  "object");
    }
    if ((len > 0) && ((sbuf == NULL) || (rbuf == NULL))) {
        return cxl_coll_ucp_error(oob->rank, CXL_COLL_ERR_INVAL, "allgather "
                                  "of %zu bytes: sbuf %p, rbuf %p", len, sbuf,
                                  rbuf);
    }
    if (len > SIZE_MAX / (size_t)oob->size) {
        return cxl_coll_ucp_error(oob->rank, CXL_COLL_ERR_INVAL, "allgather "
                                  "of %zu bytes from %d ranks does not fit",
                                  len, oob->size);
    }
    if (oob->failed) {
        return cxl_coll_ucp_error(oob->rank, oob->failed, "allgather: an "
                                  "earlier call of this oob object failed");
    }
    seq = oob->seq++;
    if (oob->size == 1) {
        memmove(rbuf, sbuf, len);
        return 0;
    }
    call = cxl_coll_ucp_call_alloc(oob->size, len);
    if (call == NULL) {
        return cxl_coll_ucp_error(oob->rank, CXL_COLL_ERR_NO_MEMORY,
                                  "allgather of %zu bytes from %d ranks", len,
                                  oob->size);
    }
    if (len > 0) {
        memcpy(call->sdata, sbuf, len);
    }
    status = cxl_coll_ucp_post(oob, call, seq);
    if (status == 0) {
        status = cxl_coll_ucp_complete(oob, call, seq);
    }
    if (status != 0) {
        cxl_coll_ucp_abandon(oob, call, status);
        return status;
    }
    for (k = 0; k < oob->size; ++k) {
        memcpy((uint8_t*)rbuf + k * len,
               (k == oob->rank) ? call->sdata : call->rdata + k * len, len);
    }
    cxl_coll_ucp_call_free(call);
    return 0;
}

void cxl_coll_ucp_team_params(cxl_coll_ucp_oob_t *oob,
                              cxl_coll_team_params_t *params)
{
    params->rank          = oob->rank;
    params->size          = oob->size;
    params->oob_allgather = cxl_coll_ucp_allgather;
    params->oob_arg       = oob;
}

ucp_ep_h cxl_coll_ucp_ep(const cxl_coll_ucp_oob_t *oob, int rank)
{
    return ((oob == NULL) || (rank < 0) || (rank >= oob->size)) ? NULL :
           oob->eps[rank];
}

/*
 * Endpoints the bootstrap made: flush-close (delivers what was sent, so a
 * peer still in its last allgather gets this rank's message); an endpoint
 * that failed, or all after a failed call, are closed by force.  Up to the
 * timeout; what did not close is left to UCP.
 */
static int cxl_coll_ucp_close_eps(cxl_coll_ucp_oob_t *oob)
{
    double deadline = cxl_coll_ucp_now() + oob->timeout;
    ucp_request_param_t param;
    void **req, *r;
    int k, left, all = 1;

    req = calloc(oob->size, sizeof(*req));
    for (k = 0; k < oob->size; ++k) {
        if (oob->eps[k] == NULL) {
            continue;
        }
        memset(&param, 0, sizeof(param));
        if (oob->failed || oob->peers[k].failed) {
            param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
            param.flags        = UCP_EP_CLOSE_FLAG_FORCE;
        }
        r = ucp_ep_close_nbx(oob->eps[k], &param);
        if (UCS_PTR_IS_PTR(r) && (req != NULL)) {
            req[k] = r;
        } else if (UCS_PTR_IS_PTR(r)) {
            ucp_request_free(r); /* no memory to track it: let it go */
            all = 0;
        }
        oob->eps[k] = NULL;
    }
    do {
        left = 0;
        ucp_worker_progress(oob->worker);
        for (k = 0; (req != NULL) && (k < oob->size); ++k) {
            if ((req[k] != NULL) &&
                (ucp_request_check_status(req[k]) != UCS_INPROGRESS)) {
                ucp_request_free(req[k]);
                req[k] = NULL;
            }
            left += (req != NULL) && (req[k] != NULL);
        }
    } while (left && (cxl_coll_ucp_now() < deadline));
    for (k = 0; (req != NULL) && (k < oob->size); ++k) {
        if (req[k] != NULL) {
            ucp_request_free(req[k]);
            all = 0;
        }
    }
    free(req);
    return all;
}

void cxl_coll_ucp_oob_destroy(cxl_coll_ucp_oob_t *oob)
{
    int closed = 0;

    if (oob == NULL) {
        return;
    }
    cxl_coll_ucp_live_del(oob);
    if (oob->peers != NULL) {
        closed = cxl_coll_ucp_close_eps(oob);
    }
    /* once its endpoints are closed UCP no longer reads a failed call's
     * buffers; on the caller's endpoints it may: leave them */
    if (closed) {
        cxl_coll_ucp_call_free(oob->orphan);
    }
    free(oob->peers);
    free(oob->eps);
    free(oob);
}
