/*
 * The worker: one UCP context and worker, with wake-up, and the list of
 * its endpoints (active messages find theirs by reply endpoint).
 */
#include "comm_int.h"
#include "../common/cxl_uct_load.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static __thread char cxl_comm_errbuf[512];

const char *cxl_comm_last_error(void)
{
    return cxl_comm_errbuf;
}

int cxl_comm_error(int status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(cxl_comm_errbuf, sizeof(cxl_comm_errbuf), fmt, ap);
    va_end(ap);
    return status;
}

int cxl_comm_worker_create(cxl_comm_worker_t **worker_p)
{
    ucp_worker_params_t wp;
    ucp_params_t prm;
    ucp_config_t *cfg;
    cxl_comm_worker_t *w;
    ucs_status_t st;
    char ebuf[512];

    if (cxl_uct_load(ebuf, sizeof(ebuf)) != 0) {
        return cxl_comm_error(UCS_ERR_NO_DEVICE, "%s", ebuf);
    }
    w = calloc(1, sizeof(*w));
    if (w == NULL) {
        return cxl_comm_error(UCS_ERR_NO_MEMORY, "out of memory");
    }
    w->efd       = -1;
    w->news_tail = &w->news_head;
    kh_init_inplace(cxl_comm_eps, &w->by_uep);
    st = ucp_config_read(NULL, NULL, &cfg);
    if (st != UCS_OK) {
        kh_destroy_inplace(cxl_comm_eps, &w->by_uep);
        free(w);
        return cxl_comm_error(st, "ucp_config_read: %s", ucs_status_string(st));
    }
    if (getenv("UCX_TLS") == NULL) {
        ucp_config_modify(cfg, "TLS", "cxl,tcp");
    }
    /*
     * Rendezvous through the active-message lanes (cxl inside a pod, tcp
     * across), not through "rma_bw" lanes: with peer error handling UCP
     * 1.13 takes rma_bw lanes only from memory domains that can invalidate
     * (UCT_MD_FLAG_INVALIDATE), which cxl's cannot, so every rendezvous
     * went over tcp's get_zcopy, also between processes of one pool
     * (16 MiB: 2.0 GB/s against 6.5 through the pool here).
     */
    if (getenv("UCX_MAX_RNDV_LANES") == NULL) {
        ucp_config_modify(cfg, "MAX_RNDV_LANES", "0");
    }
    memset(&prm, 0, sizeof(prm));
    prm.field_mask = UCP_PARAM_FIELD_FEATURES;
    prm.features   = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    st = ucp_init(&prm, cfg, &w->ucp);
    ucp_config_release(cfg);
    if (st != UCS_OK) {
        kh_destroy_inplace(cxl_comm_eps, &w->by_uep);
        free(w);
        return cxl_comm_error(st, "ucp_init: %s", ucs_status_string(st));
    }
    memset(&wp, 0, sizeof(wp));
    wp.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    st = ucp_worker_create(w->ucp, &wp, &w->worker);
    if (st != UCS_OK) {
        ucp_cleanup(w->ucp);
        kh_destroy_inplace(cxl_comm_eps, &w->by_uep);
        free(w);
        return cxl_comm_error(st, "ucp_worker_create: %s", ucs_status_string(st));
    }
    if (ucp_worker_get_efd(w->worker, &w->efd) != UCS_OK) {
        w->efd = -1;
    }
    st = cxl_comm_msg_init(w);
    if (st != UCS_OK) {
        cxl_comm_worker_destroy(w);
        return cxl_comm_error(st, "cannot set the message handler");
    }
    *worker_p = w;
    return CXL_COMM_OK;
}

void cxl_comm_worker_destroy(cxl_comm_worker_t *w)
{
    unsigned i;

    while (w->listeners != NULL) {    /* (their accepted endpoints too) */
        cxl_comm_listener_close(w->listeners);
    }
    while (w->eps != NULL) {
        cxl_comm_ep_close(w->eps, 1);
    }
    /* forced closes and first flushes complete (with an error) in a few
     * progress calls; UCP warns about requests a worker is destroyed with */
    for (i = 0; (w->nfreeing > 0) && (i < 100000); ++i) {
        cxl_comm_progress(w);
    }
    ucp_worker_destroy(w->worker);
    ucp_cleanup(w->ucp);
    kh_destroy_inplace(cxl_comm_eps, &w->by_uep);
    free(w);
}

void cxl_comm_news(cxl_comm_worker_t *w, cxl_comm_news_t *n)
{
    if (n->queued) {
        return;
    }
    n->queued     = 1;
    n->next       = NULL;
    *w->news_tail = n;
    w->news_tail  = &n->next;
}

void cxl_comm_news_drop(cxl_comm_worker_t *w, cxl_comm_news_t *n)
{
    cxl_comm_news_t **pp;

    if (!n->queued) {
        return;
    }
    for (pp = &w->news_head; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == n) {
            *pp = n->next;
            if (w->news_tail == &n->next) {
                w->news_tail = pp;
            }
            break;
        }
    }
    n->queued = 0;
}

int cxl_comm_poll(cxl_comm_worker_t *w, uintptr_t *news, int max)
{
    cxl_comm_news_t *n;
    int count = 0;

    cxl_comm_progress(w);
    while ((count < max) && ((n = w->news_head) != NULL)) {
        w->news_head = n->next;
        if (w->news_head == NULL) {
            w->news_tail = &w->news_head;
        }
        n->queued = 0;
        if (n->user != 0) {
            news[count++] = n->user;
        }
    }
    return count;
}

int cxl_comm_worker_efd(cxl_comm_worker_t *w)
{
    return w->efd;
}

unsigned cxl_comm_progress(cxl_comm_worker_t *w)
{
    unsigned n = 0, k;

    while ((k = ucp_worker_progress(w->worker)) != 0) {
        n += k;
    }
    if (w->nsweep > 0) {
        cxl_comm_sweep(w);
    }
    return n;
}

unsigned cxl_comm_progress_wait(cxl_comm_worker_t *w, unsigned usec)
{
    unsigned long done = w->ncompleted;
    struct timespec ts;
    double end;
    unsigned n = 0, k;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    end = ts.tv_sec + ts.tv_nsec * 1e-9 + usec * 1e-6;
    for (;;) {
        k  = cxl_comm_progress(w);
        n += k;
        if ((w->news_head != NULL) || (w->ncompleted != done)) {
            break;
        }
        clock_gettime(CLOCK_MONOTONIC, &ts);
        if (ts.tv_sec + ts.tv_nsec * 1e-9 >= end) {
            break;
        }
        if (k == 0) {
            sched_yield();      /* the peer may be waiting for this core */
        }
    }
    return n;
}

int cxl_comm_worker_arm(cxl_comm_worker_t *w)
{
    unsigned long done = w->ncompleted;
    int i;

    if (w->efd < 0) {
        return 0;
    }
    /*
     * A refusal often only means that a wake-up was pending, for events
     * the caller has handled already (the arm drained it): then a progress
     * finds nothing and the second arm succeeds, which saves the caller a
     * round of polling per message.
     */
    for (i = 0; i < 2; ++i) {
        if (ucp_worker_arm(w->worker) == UCS_OK) {
            return 1;
        }
        if (cxl_comm_progress(w) || (w->news_head != NULL) ||
            (w->ncompleted != done)) {
            return 0;
        }
    }
    return 0;
}
