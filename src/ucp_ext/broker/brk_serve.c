/*
 * `cxl-broker serve`: the pool, the arena, the UCP listener and the main
 * loop.  The loop sleeps in epoll on UCP's wake-up fd, the reader
 * threads' eventfd and the scan threads' eventfd, with a 100 ms tick for
 * the lease check, so an idle broker uses no CPU.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "brk_srv.h"
#include "brk_wire.h"
#include "../common/cxl_uct_load.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BRK_TICK_MS       100
#define BRK_LEASE_EVERY_S 0.2
/* without wake-up events: keep polling this long after the last activity,
 * then sleep 1 ms at a time */
#define BRK_SPIN_S        0.005

typedef struct brk_msg {
    struct brk_msg *next;
    brk_conn_t     *conn;
    brk_req_hdr_t   hdr;
    size_t          len;
    void           *desc;       /* rendezvous data still to receive */
    int             ready;
    uint64_t        data[];     /* the payload: 8-aligned, as its structs */
} brk_msg_t;

static volatile sig_atomic_t brk_signalled;
static brk_msg_t *brk_msgs, **brk_msgs_tail = &brk_msgs;

double brk_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t brk_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void brk_log(brk_srv_t *srv, const char *fmt, ...)
{
    char tbuf[32];
    struct tm tm;
    time_t t;
    va_list ap;

    if (srv->params.quiet) {
        return;
    }
    t = time(NULL);
    localtime_r(&t, &tm);
    strftime(tbuf, sizeof(tbuf), "%H:%M:%S", &tm);
    fprintf(stderr, "cxl-broker %s: ", tbuf);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* ---- replies ---- */

static void brk_send_cb(void *request, ucs_status_t status, void *user_data)
{
    (void)status;
    free(user_data);
    ucp_request_free(request);
}

void brk_reply(brk_srv_t *srv, brk_conn_t *conn, uint64_t req_id, uint32_t type,
               int status, const void *payload, size_t len)
{
    ucp_request_param_t prm;
    brk_rep_hdr_t *hdr;
    ucs_status_ptr_t sp;

    if (conn->dead) {
        return;
    }
    /* UCP 1.13 reads the header until the send completes: it lives with
     * the payload in one buffer that the completion frees */
    hdr = malloc(sizeof(*hdr) + len);
    if (hdr == NULL) {
        brk_log(srv, "out of memory for a reply to pid %d", conn->pid);
        return;
    }
    hdr->type   = type;
    hdr->status = status;
    hdr->req_id = req_id;
    if (len) {
        memcpy(hdr + 1, payload, len);
    }
    memset(&prm, 0, sizeof(prm));
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    prm.cb.send      = brk_send_cb;
    prm.user_data    = hdr;
    sp = ucp_am_send_nbx(conn->ep, BRK_AM_REP, hdr, sizeof(*hdr), hdr + 1, len,
                         &prm);
    if (UCS_PTR_IS_ERR(sp)) {
        brk_log(srv, "reply to pid %d failed: %s", conn->pid,
                ucs_status_string(UCS_PTR_STATUS(sp)));
        free(hdr);
    } else if (sp == NULL) {
        free(hdr);
    }
}

void brk_reply_error(brk_srv_t *srv, brk_conn_t *conn, uint64_t req_id,
                     uint32_t type, int status, const char *fmt, ...)
{
    char msg[BRK_ERRMSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    brk_reply(srv, conn, req_id, type, status, msg, strlen(msg) + 1);
}

/* ---- connections ---- */

static void brk_conn_free(brk_srv_t *srv, brk_conn_t *conn)
{
    brk_conn_t **pp;

    for (pp = &srv->conns; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == conn) {
            *pp = conn->next;
            break;
        }
    }
    free(conn);
}

void brk_conn_drop(brk_srv_t *srv, brk_conn_t *conn, const char *why)
{
    ucp_request_param_t prm;
    ucs_status_ptr_t sp;
    brk_pending_t *pend;
    brk_add_job_t *job;
    brk_msg_t *m;

    if (conn->dead) {
        return;
    }
    brk_log(srv, "client pid %d (%s) gone: %s", conn->pid, conn->host, why);
    conn->dead = 1;
    while (conn->handles != NULL) {
        brk_handle_close(srv, conn->handles);
    }
    for (pend = srv->pendings; pend != NULL; pend = pend->next) {
        if (pend->conn == conn) {
            pend->conn = NULL;
        }
    }
    for (job = srv->adds; job != NULL; job = job->next) {
        if (job->conn == conn) {
            job->conn = NULL;
        }
    }
    for (m = brk_msgs; m != NULL; m = m->next) {
        if (m->conn == conn) {
            m->conn = NULL;
        }
    }
    memset(&prm, 0, sizeof(prm));
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags        = UCP_EP_CLOSE_FLAG_FORCE;
    sp = ucp_ep_close_nbx(conn->ep, &prm);
    if (UCS_PTR_IS_PTR(sp)) {
        ucp_request_free(sp);  /* completes on its own with the worker */
    }
    brk_conn_free(srv, conn);
}

static void brk_ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    brk_conn_t *conn = arg;

    (void)ep;
    conn->status = status;
    conn->token  = UINT64_MAX;  /* dropped from the main loop: lease check */
}

static void brk_conn_cb(ucp_conn_request_h req, void *arg)
{
    brk_srv_t *srv = arg;
    ucp_ep_params_t prm;
    brk_conn_t *conn;
    ucs_status_t st;

    conn = calloc(1, sizeof(*conn));
    if (conn == NULL) {
        ucp_listener_reject(srv->listener, req);
        return;
    }
    memset(&prm, 0, sizeof(prm));
    prm.field_mask      = UCP_EP_PARAM_FIELD_CONN_REQUEST |
                          UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                          UCP_EP_PARAM_FIELD_ERR_HANDLER;
    prm.conn_request    = req;
    prm.err_mode        = UCP_ERR_HANDLING_MODE_PEER;
    prm.err_handler.cb  = brk_ep_err_cb;
    prm.err_handler.arg = conn;
    st = ucp_ep_create(srv->worker, &prm, &conn->ep);
    if (st != UCS_OK) {
        brk_log(srv, "cannot accept a client: %s", ucs_status_string(st));
        free(conn);
        return;
    }
    conn->id   = ++srv->next_id;
    conn->pid  = -1;
    snprintf(conn->host, sizeof(conn->host), "?");
    conn->next = srv->conns;
    srv->conns = conn;
}

void brk_lease_check(brk_srv_t *srv)
{
    brk_conn_t *conn, *next;

    for (conn = srv->conns; conn != NULL; conn = next) {
        next = conn->next;
        if (conn->token == UINT64_MAX) {
            brk_conn_drop(srv, conn, (conn->status == UCS_ERR_CONNECTION_RESET) ?
                          "disconnected" : ucs_status_string(conn->status));
        } else if (conn->token &&
                   !cxlpool_owner_alive(srv->pool, conn->token)) {
            brk_conn_drop(srv, conn, "pool lease expired");
        }
    }
}

/* ---- requests arrive ---- */

static brk_conn_t *brk_conn_by_ep(brk_srv_t *srv, ucp_ep_h ep)
{
    brk_conn_t *conn;

    for (conn = srv->conns; conn != NULL; conn = conn->next) {
        if (conn->ep == ep) {
            return conn;
        }
    }
    return NULL;
}

static void brk_recv_cb(void *request, ucs_status_t status, size_t length,
                        void *user_data)
{
    brk_msg_t *m = user_data;

    (void)length;
    m->ready = (status == UCS_OK) ? 1 : -1;
    ucp_request_free(request);
}

static ucs_status_t brk_am_cb(void *arg, const void *header, size_t header_len,
                              void *data, size_t length,
                              const ucp_am_recv_param_t *param)
{
    brk_srv_t *srv = arg;
    ucp_request_param_t prm;
    ucs_status_ptr_t sp;
    brk_conn_t *conn;
    brk_msg_t *m;

    if ((header_len != sizeof(brk_req_hdr_t)) ||
        !(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ||
        ((conn = brk_conn_by_ep(srv, param->reply_ep)) == NULL)) {
        return UCS_OK;          /* not ours to answer */
    }
    m = malloc(sizeof(*m) + length);
    if (m == NULL) {
        return UCS_OK;
    }
    m->next = NULL;
    m->conn = conn;
    memcpy(&m->hdr, header, sizeof(m->hdr));
    m->len   = length;
    m->desc  = NULL;
    m->ready = 1;
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        m->ready = 0;
        memset(&prm, 0, sizeof(prm));
        prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                           UCP_OP_ATTR_FIELD_USER_DATA;
        prm.cb.recv_am   = brk_recv_cb;
        prm.user_data    = m;
        sp = ucp_am_recv_data_nbx(srv->worker, data, m->data, length, &prm);
        if (UCS_PTR_IS_ERR(sp)) {
            free(m);
            return UCS_OK;
        }
        if (sp == NULL) {
            m->ready = 1;
        }
    } else if (length) {
        memcpy(m->data, data, length);
    }
    *brk_msgs_tail = m;
    brk_msgs_tail  = &m->next;
    return UCS_OK;
}

static void brk_dispatch_msgs(brk_srv_t *srv)
{
    brk_msg_t *m;

    while (((m = brk_msgs) != NULL) && (m->ready != 0)) {
        brk_msgs = m->next;
        if (brk_msgs == NULL) {
            brk_msgs_tail = &brk_msgs;
        }
        if ((m->conn != NULL) && (m->ready > 0)) {
            brk_req_dispatch(srv, m->conn, &m->hdr, m->data, m->len);
        }
        free(m);
    }
}

/* ---- set-up ---- */

static int brk_parse_addr(const char *addr, struct sockaddr_storage *ss,
                          socklen_t *sslen, char *err, size_t errlen)
{
    char host[BRK_ADDR_MAX], port[8];
    struct addrinfo hints, *res;
    uint16_t pnum;
    int rc;

    if (brk_addr_split(addr, 1, host, sizeof(host), &pnum, err, errlen)) {
        return -1;
    }
    snprintf(port, sizeof(port), "%u", pnum);
    memset(&hints, 0, sizeof(hints));
    hints.ai_family   = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags    = AI_PASSIVE | AI_NUMERICSERV;
    rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "address '%s': %s", addr, gai_strerror(rc));
        return -1;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *sslen = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

typedef struct {
    brk_srv_t *srv;
    void      *found;
} brk_alias_arg_t;

static void brk_alias_cb(void *start, uint64_t len, uint64_t pool_off,
                         void *arg)
{
    brk_alias_arg_t *a = arg;

    if ((a->found == NULL) && (pool_off <= a->srv->arena_pool_off) &&
        (a->srv->arena_pool_off + a->srv->arena_size <= pool_off + len)) {
        a->found = (uint8_t*)start + (a->srv->arena_pool_off - pool_off);
    }
}

static int brk_ucp_init(brk_srv_t *srv, char *err, size_t errlen)
{
    ucp_am_handler_param_t amp;
    ucp_listener_params_t lp;
    ucp_worker_params_t wp;
    ucp_mem_map_params_t mp;
    ucp_params_t prm;
    ucp_config_t *cfg;
    struct sockaddr_storage ss;
    socklen_t sslen;
    brk_alias_arg_t alias = {.srv = srv};
    ucs_status_t st;

    if (cxl_uct_load(err, errlen) != 0) {
        return -1;
    }
    if (ucp_config_read(NULL, NULL, &cfg) != UCS_OK) {
        snprintf(err, errlen, "ucp_config_read failed");
        return -1;
    }
    memset(&prm, 0, sizeof(prm));
    prm.field_mask = UCP_PARAM_FIELD_FEATURES;
    prm.features   = UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
    st = ucp_init(&prm, cfg, &srv->ucp);
    ucp_config_release(cfg);
    if (st != UCS_OK) {
        snprintf(err, errlen, "ucp_init: %s (UCX_TLS=%s)",
                 ucs_status_string(st), getenv("UCX_TLS"));
        return -1;
    }
    memset(&wp, 0, sizeof(wp));
    wp.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    st = ucp_worker_create(srv->ucp, &wp, &srv->worker);
    if (st != UCS_OK) {
        snprintf(err, errlen, "ucp_worker_create: %s", ucs_status_string(st));
        return -1;
    }
    /* keys must name the transport's mapping of the arena, not ours */
    if (cxlpool_foreach_mapping(srv->pool, brk_alias_cb, &alias) == CXLPOOL_OK &&
        alias.found != NULL) {
        srv->arena_ucp = alias.found;
    } else {
        srv->arena_ucp = srv->arena;
        brk_log(srv, "the transport does not map pool %s (UCX_TLS=%s): "
                "readers' gets are served by this process", cxlpool_last_error(),
                getenv("UCX_TLS"));
    }
    memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                    UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address    = srv->arena_ucp;
    mp.length     = srv->arena_size;
    st = ucp_mem_map(srv->ucp, &mp, &srv->memh);
    if (st == UCS_OK) {
        st = ucp_rkey_pack(srv->ucp, srv->memh, &srv->rkey, &srv->rkey_len);
    }
    if ((st != UCS_OK) || (srv->rkey_len > BRK_RKEY_MAX)) {
        snprintf(err, errlen, "cannot key the arena for readers: %s",
                 ucs_status_string(st));
        return -1;
    }
    memset(&amp, 0, sizeof(amp));
    amp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                     UCP_AM_HANDLER_PARAM_FIELD_CB |
                     UCP_AM_HANDLER_PARAM_FIELD_ARG;
    amp.id  = BRK_AM_REQ;
    amp.cb  = brk_am_cb;
    amp.arg = srv;
    st = ucp_worker_set_am_recv_handler(srv->worker, &amp);
    if (st != UCS_OK) {
        snprintf(err, errlen, "ucp_worker_set_am_recv_handler: %s",
                 ucs_status_string(st));
        return -1;
    }
    if (brk_parse_addr(srv->addr, &ss, &sslen, err, errlen)) {
        return -1;
    }
    memset(&lp, 0, sizeof(lp));
    lp.field_mask         = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
                            UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr      = (const struct sockaddr*)&ss;
    lp.sockaddr.addrlen   = sslen;
    lp.conn_handler.cb    = brk_conn_cb;
    lp.conn_handler.arg   = srv;
    st = ucp_listener_create(srv->worker, &lp, &srv->listener);
    if (st != UCS_OK) {
        snprintf(err, errlen, "cannot listen on %s: %s (another broker "
                 "there? --listen HOST:PORT)", srv->addr, ucs_status_string(st));
        return -1;
    }
    return 0;
}

static void brk_ucp_fini(brk_srv_t *srv)
{
    while (srv->conns != NULL) {
        brk_conn_drop(srv, srv->conns, "broker stopping");
    }
    if (srv->listener != NULL) {
        ucp_listener_destroy(srv->listener);
    }
    if (srv->rkey != NULL) {
        ucp_rkey_buffer_release(srv->rkey);
    }
    if (srv->memh != NULL) {
        ucp_mem_unmap(srv->ucp, srv->memh);
    }
    if (srv->worker != NULL) {
        ucp_worker_progress(srv->worker);
        ucp_worker_destroy(srv->worker);
    }
    if (srv->ucp != NULL) {
        ucp_cleanup(srv->ucp);
    }
}

static void brk_on_signal(int sig)
{
    (void)sig;
    brk_signalled = 1;
}

/* ---- the loop ---- */

/*
 * Whether the cxl transport can wake this process: it signals only on
 * pools that cannot span hosts (emulated, under /dev/shm) in hw mode, or
 * where UCX_CXL_EVENTS=yes says every peer shares the host.  Elsewhere
 * the wake-up fd never fires for cxl traffic and the loop must poll.
 */
static int brk_cxl_events(brk_srv_t *srv)
{
    const char *ev = getenv("UCX_CXL_EVENTS");
    cxlpool_info_t info;

    if ((ev != NULL) && (!strcasecmp(ev, "y") || !strcasecmp(ev, "yes") ||
                         !strcmp(ev, "1") || !strcasecmp(ev, "on"))) {
        return 1;
    }
    if ((ev != NULL) && (!strcasecmp(ev, "n") || !strcasecmp(ev, "no") ||
                         !strcmp(ev, "0") || !strcasecmp(ev, "off"))) {
        return 0;
    }
    cxlpool_info(srv->pool, &info);
    return (srv->coh == CXL_COH_HW) && !strncmp(info.path, "/dev/shm/", 9);
}

static void brk_loop(brk_srv_t *srv)
{
    int events = brk_cxl_events(srv);
    double last_busy = brk_now();
    unsigned busy;
    struct epoll_event ev, evs[4];
    double last_lease = 0;
    brk_fill_job_t *job, *next;
    int ep, wfd, n;
    uint64_t cnt;
    ucs_status_t st;

    ep = epoll_create1(EPOLL_CLOEXEC);
    if ((ep < 0) || (ucp_worker_get_efd(srv->worker, &wfd) != UCS_OK)) {
        brk_log(srv, "no wake-up fd: polling");
        wfd = -1;
    }
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    if (wfd >= 0) {
        ev.data.fd = wfd;
        epoll_ctl(ep, EPOLL_CTL_ADD, wfd, &ev);
    }
    ev.data.fd = srv->fill.efd;
    epoll_ctl(ep, EPOLL_CTL_ADD, srv->fill.efd, &ev);
    ev.data.fd = srv->add_efd;
    epoll_ctl(ep, EPOLL_CTL_ADD, srv->add_efd, &ev);

    if (!events) {
        brk_log(srv, "the transport has no wake-up events for this pool "
                "(outside /dev/shm, or sw mode): polling, every 1 ms when idle");
    }
    while (!brk_signalled) {
        busy = 0;
        while (ucp_worker_progress(srv->worker)) {
            busy = 1;
        }
        busy |= (brk_msgs != NULL);
        brk_dispatch_msgs(srv);
        for (job = brk_fill_collect(&srv->fill); job != NULL; job = next) {
            next = job->next;
            brk_cache_fill_done(srv, job);
            free(job);
            busy = 1;
        }
        if (srv->adds != NULL) {
            if (read(srv->add_efd, &cnt, sizeof(cnt)) < 0) {
                /* nothing signalled */
            }
            brk_add_finish(srv);
        }
        if (brk_now() - last_lease >= BRK_LEASE_EVERY_S) {
            brk_lease_check(srv);
            last_lease = brk_now();
        }
        if ((brk_msgs != NULL) && (brk_msgs->ready != 0)) {
            continue;
        }
        if (busy) {
            last_busy = brk_now();
        }
        if (!events) {
            if (brk_now() - last_busy < BRK_SPIN_S) {
                continue;
            }
            n = epoll_wait(ep, evs, 4, 1);
            continue;
        }
        if (wfd >= 0) {
            st = ucp_worker_arm(srv->worker);
            if (st == UCS_ERR_BUSY) {
                continue;
            }
        }
        n = epoll_wait(ep, evs, 4, (wfd >= 0) ? BRK_TICK_MS : 1);
        (void)n;
    }
    close(ep);
}

int brk_serve(const brk_serve_params_t *params)
{
    struct sigaction sa;
    cxlpool_params_t pp;
    cxlpool_info_t info;
    char err[BRK_ERRMSG_MAX] = "", path[256];
    brk_srv_t *srv;
    cxlpool_status_t ps;
    unsigned nreaders = params->readers ? params->readers : 4;
    int rc = 1;

    if ((params->listen != NULL) &&
        (strlen(params->listen) >= sizeof(srv->addr))) {
        fprintf(stderr, "cxl-broker: --listen '%s': longer than %zu "
                "characters\n", params->listen, sizeof(srv->addr) - 1);
        return 1;
    }
    srv = calloc(1, sizeof(*srv));
    if (srv == NULL) {
        fprintf(stderr, "cxl-broker: out of memory\n");
        return 1;
    }
    srv->params   = *params;
    srv->prefetch = 8;
    srv->readahead = params->readahead_set ? params->readahead : nreaders;
    srv->add_efd  = -1;
    srv->fill.efd = -1;
    if (params->listen != NULL) {
        snprintf(srv->addr, sizeof(srv->addr), "%s", params->listen);
    } else {
        cxl_broker_default_addr(srv->addr, sizeof(srv->addr));
    }
    cxlpool_params_init(&pp);
    pp.path = params->pool_path;
    if (pp.path == NULL) {
        pp.path   = cxlpool_default_path(path, sizeof(path));
        pp.flags |= CXLPOOL_CREATE;
    }
    /* the transport attaches the same pool, and UCP defaults to it */
    setenv("UCX_CXL_POOL", pp.path, 0);
    setenv("UCX_TLS", "cxl,tcp", 0);
    ps = cxlpool_open(&pp, &srv->pool);
    if (ps != CXLPOOL_OK) {
        fprintf(stderr, "cxl-broker: %s\n", cxlpool_last_error());
        free(srv);
        return 1;
    }
    if (strcmp(getenv("UCX_CXL_POOL"), pp.path)) {
        fprintf(stderr, "cxl-broker: UCX_CXL_POOL=%s but the broker serves "
                "pool %s: the transport must map the broker's pool\n",
                getenv("UCX_CXL_POOL"), pp.path);
        goto out;
    }
    srv->coh = cxlpool_coherence(srv->pool);
    if (srv->coh != CXL_COH_HW) {
        fprintf(stderr, "cxl-broker: pool %s is software-coherent: the broker "
                "serves hardware-coherent pools only so far\n", pp.path);
        goto out;
    }
    if (brk_arena_open(srv, err, sizeof(err)) != CXL_BROKER_OK) {
        fprintf(stderr, "cxl-broker: %s\n", err);
        goto out_arena;
    }
    srv->add_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if ((srv->add_efd < 0) ||
        brk_fill_start(&srv->fill, nreaders, srv->coh, !params->buffered)) {
        fprintf(stderr, "cxl-broker: cannot start reader threads\n");
        goto out_arena;
    }
    if (brk_ucp_init(srv, err, sizeof(err))) {
        fprintf(stderr, "cxl-broker: %s\n", err);
        goto out_ucp;
    }
    snprintf(srv->hdr->addr, sizeof(srv->hdr->addr), "%s", srv->addr);
    brk_hdr_seal(srv);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = brk_on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    cxlpool_info(srv->pool, &info);
    brk_log(srv, "serving pool %s on %s: capacity %" PRIu64 " MiB, %" PRIu64
            " MiB in use, %u reader threads, start %u", info.path, srv->addr,
            (srv->heap.end - srv->heap.start) >> 20, srv->heap.used >> 20,
            srv->fill.nthreads, srv->hdr->boot);
    printf("cxl-broker: ready on %s\n", srv->addr);
    fflush(stdout);
    brk_loop(srv);
    brk_log(srv, "stopping");
    rc = 0;
out_ucp:
    srv->stop = 1;
    brk_ucp_fini(srv);
    brk_fill_stop(&srv->fill);
    brk_add_finish(srv);
    while (srv->pendings != NULL) {
        brk_pending_t *p = srv->pendings;
        srv->pendings = p->next;
        free(p);
    }
out_arena:
    brk_arena_close(srv);
    if (srv->add_efd >= 0) {
        close(srv->add_efd);
    }
out:
    cxlpool_close(srv->pool);
    free(srv);
    return rc;
}
