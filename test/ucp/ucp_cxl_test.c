/*
 * UCP-level functional test of the "cxl" UCT transport.
 *
 * Runs the public UCP API (tag, probe, stream, active messages, RMA and
 * every atomic) over UCX_TLS=cxl only, with content-verified results.
 *
 *   ucp_cxl_test loopback            one worker, an endpoint to itself
 *   ucp_cxl_test server PORT [ADDR]  waits on 127.0.0.1:PORT, or on the IPv4
 *                                    address ADDR (0: any port; the port is
 *                                    printed as "# listening on port N")
 *   ucp_cxl_test client HOST PORT    connects to the server
 *   ucp_cxl_test peer-failure        forks a server, warms up, kills it with
 *                                    SIGKILL and expects the endpoint's error
 *                                    handler (UCP_ERR_HANDLING_MODE_PEER)
 *   ucp_cxl_test channel-gap         optional regression (run-ucp-tests.sh
 *                                    runs it with UCP_CXL_TEST_EXTRA=1): a
 *                                    receive channel handed back before the
 *                                    receiver polled it hides the next one
 *
 * The process is expected to run with the module preloaded
 * (LD_PRELOAD=libuct_cxl.so), UCX_TLS=cxl and UCX_CXL_POOL=<pool file>.
 * Defaults set here when the variable is not set already:
 *   UCX_ALLOC_PRIO=md:cxl,huge,thp,mmap,heap  so that ucp_mem_map(ALLOCATE)
 *                                             takes pool memory
 *   UCX_KEEPALIVE_INTERVAL=1s                 (peer-failure only)
 * UCP_CXL_TEST_EXPECT_TL=NAME[,NAME...] (default cxl): the transports the
 * endpoint's lanes may use ("ep-uses-NAME"), e.g. tcp between two network
 * namespaces that map different pools (test/ns/test_ns_pods.sh).
 *
 * Output: one line per check, "ok NAME" or "FAIL NAME: details"; lines
 * starting with '#' are information; the last line is
 * "ucp: N passed, N failed".  Exit status 0 only when nothing failed.
 * Every wait has a deadline: a stuck operation is a failure, never a hang.
 */
#define _GNU_SOURCE
#include <ucp/api/ucp.h>

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define OP_TIMEOUT      30.0          /* seconds for any one wait */
#define PF_TIMEOUT      30.0          /* seconds for the error handler */
#define PF_CHILD_LIFE   90.0          /* the forked server never outlives this */
#define FULL_MASK       ((ucp_tag_t)-1)
#define AM_ID_DATA      11
#define AM_ID_REPLY     12
#define REGION_SIZE     (1ul << 20)
#define GUARD           64
#define GUARD_BYTE      0xA5
#define ATOMIC_SLOT     16
#define CANARY_BYTE     0xEE
#define DEFAULT_ALLOC_PRIO "md:cxl,huge,thp,mmap,heap"

/*
 * Tag receives never complete immediately: UCX 1.13 does not fill
 * param->recv_info.tag_info when ucp_tag_recv_nbx completes in place (the
 * message was already unexpected), so the length and sender tag are taken
 * from ucp_tag_recv_request_test() on a request instead.
 */
#define TAG_RECV_ATTR   UCP_OP_ATTR_FLAG_NO_IMM_CMPL

enum { MODE_LOOPBACK, MODE_SERVER, MODE_CLIENT, MODE_PEER_FAILURE };
enum { DIR_LB, DIR_C2S, DIR_S2C };

typedef struct {
    int           count;        /* messages delivered to the handler */
    uint8_t       hdr[64];
    size_t        hdr_len;
    void         *data;         /* copy of eager data */
    size_t        length;
    int           rndv;         /* UCP_AM_RECV_ATTR_FLAG_RNDV was set */
    void         *desc;         /* rendezvous descriptor */
    ucp_ep_h      reply_ep;
    int           bad_hdr_len;  /* header larger than hdr[] */
} am_rx_t;

static struct {
    int            mode;
    const char    *side;
    int            sock;        /* OOB socket, -1 in loopback */
    ucp_context_h  ctx;
    ucp_worker_h   worker;
    ucp_ep_h       ep;
    ucp_ep_h       stream_rx_ep;
    int            passed;
    int            failed;
    int            quiet;       /* forked pf server: results are information */
    /* RMA */
    ucp_mem_h      memh;
    uint8_t       *region;
    size_t         region_len;
    uint64_t       peer_addr;
    ucp_rkey_h     peer_rkey;
    /* active messages */
    am_rx_t        am_data;
    am_rx_t        am_reply;
    /* endpoint error handler */
    volatile int   ep_err_called;
    ucs_status_t   ep_err_status;
    double         ep_err_time;
} g = {.sock = -1};

/* ------------------------------------------------------------------ */
/* results                                                             */
/* ------------------------------------------------------------------ */

static double now_sec(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void summary(void)
{
    if (g.quiet) {
        return;
    }
    printf("ucp: %d passed, %d failed\n", g.passed, g.failed);
    fflush(stdout);
}

static void pass(const char *name)
{
    ++g.passed;
    printf("%sok %s\n", g.quiet ? "# pf-server: " : "", name);
    fflush(stdout);
}

static void vfail(const char *name, const char *fmt, va_list ap)
{
    ++g.failed;
    printf("%sFAIL %s: ", g.quiet ? "# pf-server: " : "", name);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
}

static void __attribute__((format(printf, 2, 3)))
fail(const char *name, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vfail(name, fmt, ap);
    va_end(ap);
}

/* Record a result; returns cond. */
static int __attribute__((format(printf, 3, 4)))
check(int cond, const char *name, const char *fmt, ...)
{
    va_list ap;

    if (cond) {
        pass(name);
    } else {
        va_start(ap, fmt);
        vfail(name, fmt, ap);
        va_end(ap);
    }
    return cond;
}

/* A failure after which nothing sensible can follow: report and leave. */
static void __attribute__((noreturn, format(printf, 2, 3)))
fatal(const char *name, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vfail(name, fmt, ap);
    va_end(ap);
    summary();
    _exit(1);
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
    va_list ap;

    printf("# %s: ", g.side);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

static const char *dir_name(int dir)
{
    return (dir == DIR_C2S) ? "c2s" : (dir == DIR_S2C) ? "s2c" : "lb";
}

/* This process sends (initiates) in direction dir. */
static int is_initiator(int dir)
{
    return (dir == DIR_LB) || ((dir == DIR_C2S) && (g.mode == MODE_CLIENT)) ||
           ((dir == DIR_S2C) && (g.mode == MODE_SERVER));
}

/* This process receives (is the target) in direction dir. */
static int is_target(int dir)
{
    return (dir == DIR_LB) || ((dir == DIR_C2S) && (g.mode == MODE_SERVER)) ||
           ((dir == DIR_S2C) && (g.mode == MODE_CLIENT));
}

/* "NAME DIR" plus the role in two-process runs */
static const char *cname(char *buf, size_t max, int dir, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static const char *cname(char *buf, size_t max, int dir, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(buf, max, fmt, ap);
    va_end(ap);
    if ((n >= 0) && ((size_t)n < max)) {
        if (dir == DIR_LB) {
            snprintf(buf + n, max - n, " lb");
        } else {
            snprintf(buf + n, max - n, " %s (%s)", dir_name(dir), g.side);
        }
    }
    return buf;
}

/* ------------------------------------------------------------------ */
/* data patterns                                                       */
/* ------------------------------------------------------------------ */

static uint8_t pat(size_t i, uint32_t seed)
{
    uint32_t x = (uint32_t)i * 2654435761u + seed * 0x9E3779B9u + 0x7f4a7c15u;

    x ^= x >> 15;
    x *= 0x2c1b3c6du;
    x ^= x >> 12;
    return (uint8_t)x;
}

static void fill(void *buf, size_t len, size_t base, uint32_t seed)
{
    uint8_t *p = buf;
    size_t i;

    for (i = 0; i < len; ++i) {
        p[i] = pat(base + i, seed);
    }
}

/* Index of the first byte that differs from the pattern, or len. */
static size_t verify(const void *buf, size_t len, size_t base, uint32_t seed)
{
    const uint8_t *p = buf;
    size_t i;

    for (i = 0; i < len; ++i) {
        if (p[i] != pat(base + i, seed)) {
            return i;
        }
    }
    return len;
}

static size_t verify_byte(const void *buf, size_t len, uint8_t value)
{
    const uint8_t *p = buf;
    size_t i;

    for (i = 0; i < len; ++i) {
        if (p[i] != value) {
            return i;
        }
    }
    return len;
}

static void *xmalloc(size_t len)
{
    void *p = malloc(len ? len : 1);

    if (p == NULL) {
        fatal("malloc", "cannot allocate %zu bytes", len);
    }
    return p;
}

/* ------------------------------------------------------------------ */
/* out-of-band channel (TCP or socketpair); loopback has none          */
/* ------------------------------------------------------------------ */

static void progress(void)
{
    if (g.worker != NULL) {
        ucp_worker_progress(g.worker);
    }
}

static void oob_send(const void *buf, size_t len)
{
    const uint8_t *p = buf;
    ssize_t n;

    while (len > 0) {
        n = send(g.sock, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            fatal("oob", "send: %s", strerror(errno));
        }
        p   += n;
        len -= n;
    }
}

/* Receive exactly len bytes, progressing the worker while waiting. */
static void oob_recv(void *buf, size_t len)
{
    double deadline = now_sec() + 2 * OP_TIMEOUT;
    uint8_t *p      = buf;
    struct pollfd pfd;
    ssize_t n;

    while (len > 0) {
        progress();
        pfd.fd     = g.sock;
        pfd.events = POLLIN;
        if (poll(&pfd, 1, 0) <= 0) {
            if (now_sec() > deadline) {
                fatal("oob", "no message from the peer within %.0f s",
                      2 * OP_TIMEOUT);
            }
            continue;
        }
        n = recv(g.sock, p, len, MSG_DONTWAIT);
        if (n == 0) {
            fatal("oob", "the peer closed the connection (it failed or "
                  "exited early)");
        } else if (n < 0) {
            if ((errno == EINTR) || (errno == EAGAIN)) {
                continue;
            }
            fatal("oob", "recv: %s", strerror(errno));
        }
        p   += n;
        len -= n;
    }
}

/* Send our blob, receive the peer's (malloc'ed). Loopback: a copy of ours. */
static void *oob_exchange(const void *mine, size_t len, size_t *theirs_len)
{
    uint32_t l = (uint32_t)len;
    void *theirs;

    if (g.sock < 0) {
        theirs = xmalloc(len);
        memcpy(theirs, mine, len);
        *theirs_len = len;
        return theirs;
    }

    oob_send(&l, sizeof(l));
    oob_send(mine, len);
    oob_recv(&l, sizeof(l));
    theirs = xmalloc(l);
    oob_recv(theirs, l);
    *theirs_len = l;
    return theirs;
}

static void barrier(void)
{
    char c = 'b', r;

    if (g.sock < 0) {
        return;
    }
    oob_send(&c, 1);
    oob_recv(&r, 1);
    if (r != 'b') {
        fatal("oob", "barrier: unexpected byte 0x%02x", (unsigned char)r);
    }
}

/* ------------------------------------------------------------------ */
/* request helpers                                                     */
/* ------------------------------------------------------------------ */

/* Wait for a request with a deadline; frees it; returns its status. */
static ucs_status_t wait_req(void *req, const char *name)
{
    double deadline = now_sec() + OP_TIMEOUT;
    ucs_status_t status;

    if (req == NULL) {
        return UCS_OK;
    }
    if (UCS_PTR_IS_ERR(req)) {
        return UCS_PTR_STATUS(req);
    }
    while ((status = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        progress();
        if (now_sec() > deadline) {
            fatal(name, "request did not complete within %.0f s", OP_TIMEOUT);
        }
    }
    ucp_request_free(req);
    return status;
}

static ucs_status_t wait_tag_recv(void *req, ucp_tag_recv_info_t *info,
                                  const char *name)
{
    double deadline = now_sec() + OP_TIMEOUT;
    ucs_status_t status;

    if (req == NULL) {
        return UCS_ERR_NO_PROGRESS; /* impossible with TAG_RECV_ATTR */
    }
    if (UCS_PTR_IS_ERR(req)) {
        return UCS_PTR_STATUS(req);
    }
    while ((status = ucp_tag_recv_request_test(req, info)) == UCS_INPROGRESS) {
        progress();
        if (now_sec() > deadline) {
            fatal(name, "receive did not complete within %.0f s", OP_TIMEOUT);
        }
    }
    ucp_request_free(req);
    return status;
}

static ucs_status_t wait_stream_recv(void *req, size_t *length,
                                     const char *name)
{
    double deadline = now_sec() + OP_TIMEOUT;
    ucs_status_t status;

    if (req == NULL) {
        return UCS_OK;
    }
    if (UCS_PTR_IS_ERR(req)) {
        return UCS_PTR_STATUS(req);
    }
    while ((status = ucp_stream_recv_request_test(req, length)) ==
           UCS_INPROGRESS) {
        progress();
        if (now_sec() > deadline) {
            fatal(name, "stream receive did not complete within %.0f s",
                  OP_TIMEOUT);
        }
    }
    ucp_request_free(req);
    return status;
}

static void wait_flag(volatile int *flag, int value, const char *name)
{
    double deadline = now_sec() + OP_TIMEOUT;

    while (*flag < value) {
        progress();
        if (now_sec() > deadline) {
            fatal(name, "nothing arrived within %.0f s", OP_TIMEOUT);
        }
    }
}

static ucs_status_t ep_flush(const char *name)
{
    ucp_request_param_t param = {.op_attr_mask = 0};

    return wait_req(ucp_ep_flush_nbx(g.ep, &param), name);
}

static ucs_status_t worker_flush(const char *name)
{
    ucp_request_param_t param = {.op_attr_mask = 0};

    return wait_req(ucp_worker_flush_nbx(g.worker, &param), name);
}

/* ------------------------------------------------------------------ */
/* set-up                                                              */
/* ------------------------------------------------------------------ */

static ucs_status_t am_cb(void *arg, const void *header, size_t header_length,
                          void *data, size_t length,
                          const ucp_am_recv_param_t *param)
{
    am_rx_t *rx = arg;

    if (header_length > sizeof(rx->hdr)) {
        rx->bad_hdr_len = 1;
        header_length   = sizeof(rx->hdr);
    }
    memcpy(rx->hdr, header, header_length);
    rx->hdr_len  = header_length;
    rx->length   = length;
    rx->reply_ep = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ?
                   param->reply_ep : NULL;
    rx->rndv     = !!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV);
    rx->desc     = NULL;
    free(rx->data);
    rx->data     = NULL;

    if (rx->rndv) {
        rx->desc = data; /* fetched with ucp_am_recv_data_nbx */
        rx->count++;
        return UCS_INPROGRESS;
    }

    rx->data = xmalloc(length);
    if (length > 0) {
        memcpy(rx->data, data, length);
    }
    rx->count++;
    return UCS_OK;
}

static void ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)arg;
    (void)ep;
    if (!g.ep_err_called) {
        g.ep_err_status = status;
        g.ep_err_time   = now_sec();
    }
    g.ep_err_called = 1;
}

static void set_am_handler(unsigned id, am_rx_t *rx)
{
    ucp_am_handler_param_t param;
    ucs_status_t status;

    memset(&param, 0, sizeof(param));
    param.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                       UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                       UCP_AM_HANDLER_PARAM_FIELD_CB |
                       UCP_AM_HANDLER_PARAM_FIELD_ARG;
    param.id         = id;
    param.flags      = UCP_AM_FLAG_WHOLE_MSG;
    param.cb         = am_cb;
    param.arg        = rx;
    status = ucp_worker_set_am_recv_handler(g.worker, &param);
    if (status != UCS_OK) {
        fatal("init", "ucp_worker_set_am_recv_handler(%u): %s", id,
              ucs_status_string(status));
    }
}

static void init_ucp(void)
{
    ucp_params_t params;
    ucp_worker_params_t wparams;
    ucp_config_t *config;
    ucs_status_t status;

    status = ucp_config_read(NULL, NULL, &config);
    if (status != UCS_OK) {
        fatal("init", "ucp_config_read: %s", ucs_status_string(status));
    }

    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES |
                        UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    params.features   = UCP_FEATURE_TAG | UCP_FEATURE_STREAM |
                        UCP_FEATURE_AM | UCP_FEATURE_RMA |
                        UCP_FEATURE_AMO32 | UCP_FEATURE_AMO64;
    params.mt_workers_shared = 0;
    status = ucp_init(&params, config, &g.ctx);
    ucp_config_release(config);
    if (status != UCS_OK) {
        fatal("init", "ucp_init: %s (is the cxl module preloaded and "
              "UCX_CXL_POOL a pool?)", ucs_status_string(status));
    }

    memset(&wparams, 0, sizeof(wparams));
    wparams.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
    status = ucp_worker_create(g.ctx, &wparams, &g.worker);
    if (status != UCS_OK) {
        fatal("init", "ucp_worker_create: %s", ucs_status_string(status));
    }

    set_am_handler(AM_ID_DATA, &g.am_data);
    set_am_handler(AM_ID_REPLY, &g.am_reply);
}

static void connect_ep(int err_mode_peer)
{
    ucp_address_t *addr;
    size_t addr_len, peer_len;
    ucp_ep_params_t ep_params;
    ucs_status_t status;
    void *peer;

    status = ucp_worker_get_address(g.worker, &addr, &addr_len);
    if (status != UCS_OK) {
        fatal("init", "ucp_worker_get_address: %s", ucs_status_string(status));
    }
    peer = oob_exchange(addr, addr_len, &peer_len);
    ucp_worker_release_address(g.worker, addr);

    memset(&ep_params, 0, sizeof(ep_params));
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep_params.address    = peer;
    if (err_mode_peer) {
        ep_params.field_mask        |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                       UCP_EP_PARAM_FIELD_ERR_HANDLER;
        ep_params.err_mode           = UCP_ERR_HANDLING_MODE_PEER;
        ep_params.err_handler.cb     = ep_err_cb;
        ep_params.err_handler.arg    = NULL;
    }
    status = ucp_ep_create(g.worker, &ep_params, &g.ep);
    free(peer);
    if (status != UCS_OK) {
        fatal("ep-create", "ucp_ep_create: %s", ucs_status_string(status));
    }
    pass("ep-create");
}

/* Does a ucp_ep_print_info lane line name one of the transports in the
 * comma-separated list tls ("... 0:cxl/dev.0 md[0] ...")? */
static int lane_on(const char *line, const char *tls)
{
    char needle[72];
    size_t len;

    while (*tls != '\0') {
        len = strcspn(tls, ",");
        if ((len > 0) && (len < sizeof(needle) - 3)) {
            snprintf(needle, sizeof(needle), ":%.*s/", (int)len, tls);
            if (strstr(line, needle) != NULL) {
                return 1;
            }
        }
        tls += len + (tls[len] == ',');
    }
    return 0;
}

/* The endpoint's lanes all go through cxl (ucp_ep_print_info), or through
 * the transports named by UCP_CXL_TEST_EXPECT_TL. */
static void check_ep_uses_cxl(void)
{
    char *text = NULL, *line, *save = NULL, *copy;
    const char *tl = getenv("UCP_CXL_TEST_EXPECT_TL");
    size_t size = 0;
    int lanes = 0, bad = 0;
    char badline[256] = "", name[80];
    FILE *f;

    if ((tl == NULL) || (tl[0] == '\0')) {
        tl = "cxl";
    }
    snprintf(name, sizeof(name), "ep-uses-%s", tl);
    f = open_memstream(&text, &size);
    if (f == NULL) {
        fail(name, "open_memstream: %s", strerror(errno));
        return;
    }
    ucp_ep_print_info(g.ep, f);
    fclose(f);

    copy = strdup(text ? text : "");
    for (line = strtok_r(copy, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        if (strstr(line, "lane[") == NULL) {
            continue;
        }
        ++lanes;
        if (!lane_on(line, tl)) {
            ++bad;
            snprintf(badline, sizeof(badline), "%s", line);
        }
    }
    if (check((lanes > 0) && (bad == 0), name,
              "%d lane(s), %d not on %s (%s); ucp_ep_print_info:\n%s",
              lanes, bad, tl, badline, text ? text : "")) {
        for (line = strtok_r(text, "\n", &save); line != NULL;
             line = strtok_r(NULL, "\n", &save)) {
            if (strstr(line, "lane[") != NULL) {
                note("%s", line + strspn(line, "# "));
            }
        }
    }
    free(copy);
    free(text);
}

/* ------------------------------------------------------------------ */
/* pool placement of ucp_mem_map(ALLOCATE) memory                      */
/* ------------------------------------------------------------------ */

#define EMULATE_NC_PREFIX "emulate-nc:"

/* The pool file; for "emulate-nc:PATH" it is PATH, and the process's memory
 * is its host's view PATH.host<k> (see src/pool/emulate_nc.c). */
static const char *pool_path(char *buf, size_t max)
{
    const char *env = getenv("UCX_CXL_POOL");

    if ((env != NULL) && (env[0] != '\0') && strcmp(env, "auto") &&
        (strchr(env, ',') == NULL)) {
        if (!strncmp(env, EMULATE_NC_PREFIX, strlen(EMULATE_NC_PREFIX))) {
            env += strlen(EMULATE_NC_PREFIX);
        }
        snprintf(buf, max, "%s", env);
    } else {
        snprintf(buf, max, "/dev/shm/ucx-cxl-%u.pool", (unsigned)getuid());
    }
    return buf;
}

/* Is the mapped file name the pool at path (or, emulated, its host view)? */
static int pool_file_is(const char *name, const char *path, int emu)
{
    size_t len = strlen(path);

    if (!emu) {
        return !strcmp(name, path);
    }
    return !strncmp(name, path, len) && !strncmp(name + len, ".host", 5) &&
           (name[len + 5] != '\0') &&
           (strspn(name + len + 5, "0123456789") == strlen(name + len + 5));
}

/* The address range of the pool file's mapping(s) in /proc/self/maps. */
static int pool_mapping(const char *path, uintptr_t *lo_p, uintptr_t *hi_p,
                        int *count_p)
{
    const char *env = getenv("UCX_CXL_POOL");
    int emu = (env != NULL) &&
              !strncmp(env, EMULATE_NC_PREFIX, strlen(EMULATE_NC_PREFIX));
    char real[PATH_MAX], line[PATH_MAX + 256], *name;
    unsigned long lo, hi;
    int count = 0;
    FILE *f;

    if (realpath(path, real) == NULL) {
        snprintf(real, sizeof(real), "%s", path);
    }
    f = fopen("/proc/self/maps", "r");
    if (f == NULL) {
        return -1;
    }
    *lo_p = UINTPTR_MAX;
    *hi_p = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        name = strchr(line, '/');
        if ((name == NULL) || (!pool_file_is(name, real, emu) &&
                               !pool_file_is(name, path, emu))) {
            continue;
        }
        if (sscanf(line, "%lx-%lx", &lo, &hi) != 2) {
            continue;
        }
        ++count;
        if (lo < *lo_p) {
            *lo_p = lo;
        }
        if (hi > *hi_p) {
            *hi_p = hi;
        }
    }
    fclose(f);
    *count_p = count;
    return 0;
}

static void check_mem_in_pool(void)
{
    const char *prio = getenv("UCX_ALLOC_PRIO");
    uintptr_t lo, hi, a = (uintptr_t)g.region;
    char path[PATH_MAX];
    int count;

    pool_path(path, sizeof(path));
    if ((prio == NULL) || strncmp(prio, "md:cxl", 6)) {
        note("UCX_ALLOC_PRIO=%s does not start with md:cxl: placement not "
             "checked", prio ? prio : "(unset)");
        return;
    }
    if (pool_mapping(path, &lo, &hi, &count) != 0) {
        fail("mem-map-in-pool", "cannot read /proc/self/maps: %s",
             strerror(errno));
        return;
    }
    if (!check(count > 0, "pool-mapped", "%s does not appear in "
               "/proc/self/maps", path)) {
        return;
    }
    check((a >= lo) && (a + g.region_len <= hi), "mem-map-in-pool",
          "ucp_mem_map(ALLOCATE) gave %p+%zu, outside the mapping of %s "
          "(0x%" PRIxPTR "-0x%" PRIxPTR ") with UCX_ALLOC_PRIO=%s",
          (void*)g.region, g.region_len, path, lo, hi, prio);
    note("region %p+%zu, pool %s mapped at 0x%" PRIxPTR "-0x%" PRIxPTR,
         (void*)g.region, g.region_len, path, lo, hi);
}

/* Map the 1 MiB RMA region with ucp_mem_map(ALLOCATE). */
static void map_region(void)
{
    ucp_mem_map_params_t mparams;
    ucp_mem_attr_t attr;
    ucs_status_t status;

    memset(&mparams, 0, sizeof(mparams));
    mparams.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                         UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                         UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    mparams.address    = NULL;
    mparams.length     = REGION_SIZE;
    mparams.flags      = UCP_MEM_MAP_ALLOCATE;
    status = ucp_mem_map(g.ctx, &mparams, &g.memh);
    if (status != UCS_OK) {
        fatal("mem-map", "ucp_mem_map(ALLOCATE, %lu): %s", REGION_SIZE,
              ucs_status_string(status));
    }

    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
    status = ucp_mem_query(g.memh, &attr);
    if (status != UCS_OK) {
        fatal("mem-map", "ucp_mem_query: %s", ucs_status_string(status));
    }
    g.region     = attr.address;
    g.region_len = attr.length;
    check(g.region_len >= REGION_SIZE, "mem-map", "length %zu < %lu",
          g.region_len, REGION_SIZE);
    check_mem_in_pool();
}

/* Map the RMA region and exchange its key with the peer. */
static void setup_rma(void)
{
    ucs_status_t status;
    void *rkey_buf, *blob, *peer;
    size_t rkey_len, peer_len;
    uint64_t addr;

    map_region();
    status = ucp_rkey_pack(g.ctx, g.memh, &rkey_buf, &rkey_len);
    if (status != UCS_OK) {
        fatal("rkey-pack", "ucp_rkey_pack: %s", ucs_status_string(status));
    }
    blob = xmalloc(sizeof(addr) + rkey_len);
    addr = (uintptr_t)g.region;
    memcpy(blob, &addr, sizeof(addr));
    memcpy((uint8_t*)blob + sizeof(addr), rkey_buf, rkey_len);
    ucp_rkey_buffer_release(rkey_buf);

    peer = oob_exchange(blob, sizeof(addr) + rkey_len, &peer_len);
    free(blob);
    if (peer_len <= sizeof(addr)) {
        fatal("rkey-unpack", "short key blob (%zu bytes)", peer_len);
    }
    memcpy(&g.peer_addr, peer, sizeof(addr));
    status = ucp_ep_rkey_unpack(g.ep, (uint8_t*)peer + sizeof(addr),
                                &g.peer_rkey);
    free(peer);
    if (status != UCS_OK) {
        fatal("rkey-unpack", "ucp_ep_rkey_unpack: %s",
              ucs_status_string(status));
    }
    pass("rkey-exchange");
}

/* ------------------------------------------------------------------ */
/* checks                                                              */
/* ------------------------------------------------------------------ */

static const size_t tag_sizes[] = {1, 8, 100, 1000, 8192, 65536, 1 << 20,
                                   4 << 20};

/* A first exchange in both directions: wires the endpoints up. */
static void test_wireup(void)
{
    ucp_request_param_t sp = {.op_attr_mask = 0};
    ucp_request_param_t rp;
    ucp_tag_recv_info_t info = {0, 0};
    uint8_t sbuf[64], rbuf[64];
    ucs_status_t st_s, st_r;
    ucp_tag_t tag = 0x5a5a0000;
    void *sreq, *rreq;

    fill(sbuf, sizeof(sbuf), 0, 1);
    memset(rbuf, 0, sizeof(rbuf));
    rp.op_attr_mask = TAG_RECV_ATTR;
    rreq = ucp_tag_recv_nbx(g.worker, rbuf, sizeof(rbuf), tag, FULL_MASK, &rp);
    sreq = ucp_tag_send_nbx(g.ep, sbuf, sizeof(sbuf), tag, &sp);
    st_s = wait_req(sreq, "wireup");
    st_r = wait_tag_recv(rreq, &info, "wireup");
    check((st_s == UCS_OK) && (st_r == UCS_OK) &&
          (info.length == sizeof(rbuf)) &&
          (verify(rbuf, sizeof(rbuf), 0, 1) == sizeof(rbuf)), "wireup",
          "send %s, recv %s, length %zu", ucs_status_string(st_s),
          ucs_status_string(st_r), info.length);
}

static void test_tag(int dir)
{
    ucp_request_param_t sp = {.op_attr_mask = 0};
    ucp_request_param_t rp;
    ucp_tag_recv_info_t info;
    ucs_status_t st_s = UCS_OK, st_r = UCS_OK;
    void *sreq = NULL, *rreq = NULL;
    uint8_t *sbuf = NULL, *rbuf = NULL;
    char name[96];
    size_t i, size, bad, gbad;
    uint32_t seed;
    ucp_tag_t tag;

    for (i = 0; i < sizeof(tag_sizes) / sizeof(tag_sizes[0]); ++i) {
        barrier();
        size = tag_sizes[i];
        tag  = 0x7a000000ull | ((uint64_t)dir << 16) | i;
        seed = 100 + (uint32_t)i + 17 * dir;
        cname(name, sizeof(name), dir, "tag %zuB", size);

        if (is_target(dir)) {
            /* buffer larger than the message: guard must stay untouched */
            rbuf = xmalloc(size + GUARD);
            memset(rbuf, 0, size);
            memset(rbuf + size, GUARD_BYTE, GUARD);
            memset(&info, 0, sizeof(info));
            rp.op_attr_mask = TAG_RECV_ATTR;
            rreq = ucp_tag_recv_nbx(g.worker, rbuf, size + GUARD, tag,
                                    FULL_MASK, &rp);
        }
        if (is_initiator(dir)) {
            sbuf = xmalloc(size);
            fill(sbuf, size, 0, seed);
            sreq = ucp_tag_send_nbx(g.ep, sbuf, size, tag, &sp);
        }
        if (is_target(dir)) {
            st_r = wait_tag_recv(rreq, &info, name);
        }
        if (is_initiator(dir)) {
            st_s = wait_req(sreq, name);
        }

        if (is_target(dir)) {
            bad  = (st_r == UCS_OK) ? verify(rbuf, size, 0, seed) : 0;
            gbad = verify_byte(rbuf + size, GUARD, GUARD_BYTE);
            check((st_s == UCS_OK) && (st_r == UCS_OK) &&
                  (info.length == size) && (info.sender_tag == tag) &&
                  (bad == size) && (gbad == GUARD), name,
                  "send %s, recv %s, length %zu (expected %zu), tag 0x%" PRIx64
                  " (expected 0x%" PRIx64 "), first bad byte %zd, guard "
                  "byte %zd overwritten", ucs_status_string(st_s),
                  ucs_status_string(st_r), info.length, size,
                  (uint64_t)info.sender_tag, (uint64_t)tag,
                  (bad == size) ? (ssize_t)-1 : (ssize_t)bad,
                  (gbad == GUARD) ? (ssize_t)-1 : (ssize_t)gbad);
        } else {
            check(st_s == UCS_OK, name, "send completed with %s",
                  ucs_status_string(st_s));
        }
        free(sbuf);
        free(rbuf);
        sbuf = rbuf = NULL;
    }
}

static void test_probe(int dir)
{
    static const size_t sizes[] = {1000, 1 << 20};
    ucp_request_param_t sp = {.op_attr_mask = 0};
    ucp_request_param_t rp = {.op_attr_mask = TAG_RECV_ATTR};
    ucp_tag_recv_info_t info, info2, rinfo;
    ucp_tag_message_h msg, msg2;
    ucs_status_t st_s = UCS_OK, st_r;
    uint8_t *sbuf = NULL, *rbuf;
    void *sreq = NULL, *rreq;
    double deadline;
    char name[96];
    size_t i, size, bad;
    uint32_t seed;
    ucp_tag_t tag;

    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        size = sizes[i];
        tag  = 0x3b000000ull | ((uint64_t)dir << 16) | i;
        seed = 300 + (uint32_t)i + 17 * dir;

        /* nothing with this tag was sent yet */
        if (is_target(dir)) {
            cname(name, sizeof(name), dir, "probe-empty %zuB", size);
            progress();
            msg = ucp_tag_probe_nb(g.worker, tag, FULL_MASK, 0, &info);
            check(msg == NULL, name, "probe found a message before any "
                  "was sent (length %zu)", info.length);
        }
        barrier();

        cname(name, sizeof(name), dir, "probe %zuB", size);
        if (is_initiator(dir)) {
            sbuf = xmalloc(size);
            fill(sbuf, size, 0, seed);
            sreq = ucp_tag_send_nbx(g.ep, sbuf, size, tag, &sp);
        }
        if (is_target(dir)) {
            deadline = now_sec() + OP_TIMEOUT;
            memset(&info, 0, sizeof(info));
            while ((msg = ucp_tag_probe_nb(g.worker, tag, FULL_MASK, 0,
                                           &info)) == NULL) {
                progress();
                if (now_sec() > deadline) {
                    fatal(name, "probe found nothing within %.0f s",
                          OP_TIMEOUT);
                }
            }
            /* probed, not removed: a second probe removes the same one */
            memset(&info2, 0, sizeof(info2));
            msg2 = ucp_tag_probe_nb(g.worker, tag, FULL_MASK, 1, &info2);
            rbuf = xmalloc(size);
            memset(rbuf, 0, size);
            memset(&rinfo, 0, sizeof(rinfo));
            if (msg2 != NULL) {
                rreq = ucp_tag_msg_recv_nbx(g.worker, rbuf, size, msg2, &rp);
                st_r = wait_tag_recv(rreq, &rinfo, name);
            } else {
                st_r = UCS_ERR_NO_MESSAGE;
            }
            if (is_initiator(dir)) {
                st_s = wait_req(sreq, name);
            }
            bad = (st_r == UCS_OK) ? verify(rbuf, size, 0, seed) : 0;
            check((msg2 == msg) && (info.length == size) &&
                  (info.sender_tag == tag) && (info2.length == size) &&
                  (st_s == UCS_OK) && (st_r == UCS_OK) && (bad == size), name,
                  "probe length %zu tag 0x%" PRIx64 ", second probe %p "
                  "(first %p) length %zu, send %s, msg_recv %s, first bad "
                  "byte %zd", info.length, (uint64_t)info.sender_tag,
                  (void*)msg2, (void*)msg, info2.length,
                  ucs_status_string(st_s), ucs_status_string(st_r),
                  (bad == size) ? (ssize_t)-1 : (ssize_t)bad);
            free(rbuf);
        } else {
            st_s = wait_req(sreq, name);
            check(st_s == UCS_OK, name, "send completed with %s",
                  ucs_status_string(st_s));
        }
        free(sbuf);
        sbuf = NULL;
        barrier();
    }
}

/* The endpoint stream data arrives on: in loopback UCP may have made a
 * second, internal endpoint for the other end of the connection. */
static ucp_ep_h stream_rx_ep(const char *name)
{
    ucp_stream_poll_ep_t pep;
    double deadline;
    ssize_t n;

    if (g.mode != MODE_LOOPBACK) {
        return g.ep;
    }
    if (g.stream_rx_ep != NULL) {
        return g.stream_rx_ep;
    }
    deadline = now_sec() + OP_TIMEOUT;
    for (;;) {
        progress();
        memset(&pep, 0, sizeof(pep));
        n = ucp_stream_worker_poll(g.worker, &pep, 1, 0);
        if (n == 1) {
            g.stream_rx_ep = pep.ep;
            note("stream data arrives on ep %p (own ep %p)", (void*)pep.ep,
                 (void*)g.ep);
            return pep.ep;
        } else if (n < 0) {
            fatal(name, "ucp_stream_worker_poll: %s",
                  ucs_status_string((ucs_status_t)n));
        }
        if (now_sec() > deadline) {
            fatal(name, "no endpoint with stream data within %.0f s",
                  OP_TIMEOUT);
        }
    }
}

static void stream_recv_check(const char *name, size_t size, uint32_t seed)
{
    ucp_request_param_t rp;
    ucs_status_t st_r;
    size_t length = 0, bad, gbad;
    uint8_t *rbuf;
    void *rreq;

    rbuf = xmalloc(size + GUARD);
    memset(rbuf, 0, size);
    memset(rbuf + size, GUARD_BYTE, GUARD);
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    rp.flags        = UCP_STREAM_RECV_FLAG_WAITALL;
    rreq = ucp_stream_recv_nbx(stream_rx_ep(name), rbuf, size, &length, &rp);
    if (rreq == NULL) {
        st_r = UCS_OK;
    } else {
        st_r = wait_stream_recv(rreq, &length, name);
    }
    bad  = (st_r == UCS_OK) ? verify(rbuf, size, 0, seed) : 0;
    gbad = verify_byte(rbuf + size, GUARD, GUARD_BYTE);
    check((st_r == UCS_OK) && (length == size) &&
          (bad == size) && (gbad == GUARD), name,
          "recv %s, length %zu (expected %zu), first bad byte %zd, "
          "guard byte %zd overwritten", ucs_status_string(st_r), length, size,
          (bad == size) ? (ssize_t)-1 : (ssize_t)bad,
          (gbad == GUARD) ? (ssize_t)-1 : (ssize_t)gbad);
    free(rbuf);
}

static void test_stream(int dir)
{
    static const size_t sizes[] = {1, 8, 100, 1000, 8192, 65536, 1 << 20};
    static const size_t parts[] = {100, 1000, 5000, 1, 64000};
    ucp_request_param_t sp = {.op_attr_mask = 0};
    ucs_status_t st_s = UCS_OK;
    void *sreq[8] = {NULL};
    uint8_t *sbuf = NULL;
    size_t i, size, off;
    char name[96];
    uint32_t seed;

    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        barrier();
        size = sizes[i];
        seed = 500 + (uint32_t)i + 17 * dir;
        cname(name, sizeof(name), dir, "stream %zuB", size);
        if (is_initiator(dir)) {
            sbuf    = xmalloc(size);
            fill(sbuf, size, 0, seed);
            sreq[0] = ucp_stream_send_nbx(g.ep, sbuf, size, &sp);
        }
        if (is_target(dir)) {
            stream_recv_check(name, size, seed);
        }
        if (is_initiator(dir)) {
            st_s = wait_req(sreq[0], name);
            if (is_target(dir)) {
                if (st_s != UCS_OK) {
                    fail(name, "send completed with %s",
                         ucs_status_string(st_s));
                }
            } else {
                check(st_s == UCS_OK, name, "send completed with %s",
                      ucs_status_string(st_s));
            }
        }
        free(sbuf);
        sbuf = NULL;
    }

    /* several sends arrive as one byte stream */
    barrier();
    size = 0;
    for (i = 0; i < sizeof(parts) / sizeof(parts[0]); ++i) {
        size += parts[i];
    }
    seed = 600 + 17 * dir;
    cname(name, sizeof(name), dir, "stream concat %zu parts %zuB",
          sizeof(parts) / sizeof(parts[0]), size);
    if (is_initiator(dir)) {
        sbuf = xmalloc(size);
        fill(sbuf, size, 0, seed);
        for (i = 0, off = 0; i < sizeof(parts) / sizeof(parts[0]); ++i) {
            sreq[i] = ucp_stream_send_nbx(g.ep, sbuf + off, parts[i], &sp);
            off    += parts[i];
        }
    }
    if (is_target(dir)) {
        stream_recv_check(name, size, seed);
    }
    if (is_initiator(dir)) {
        int nbad = 0;
        ucs_status_t st;

        for (i = 0; i < sizeof(parts) / sizeof(parts[0]); ++i) {
            st = wait_req(sreq[i], name);
            if (st != UCS_OK) {
                ++nbad;
                st_s = st;
            }
        }
        if (is_target(dir)) {
            if (nbad) {
                fail(name, "%d send(s) completed with %s", nbad,
                     ucs_status_string(st_s));
            }
        } else {
            check(nbad == 0, name, "%d send(s) completed with %s", nbad,
                  ucs_status_string(st_s));
        }
    }
    free(sbuf);
}

typedef struct {
    const char *what;
    size_t      size;
    unsigned    flags;     /* UCP_AM_SEND_FLAG_* */
    int         expect_rndv; /* 1 yes, 0 no, -1 either */
    int         reply;     /* answer over param->reply_ep */
} am_case_t;

static void am_reset(am_rx_t *rx)
{
    free(rx->data);
    memset(rx, 0, sizeof(*rx));
}

static void test_am(int dir)
{
    static const am_case_t cases[] = {
        {"small",             100,       0,                      0, 1},
        {"header-only",       0,         0,                      0, 0},
        {"8KiB",              8192,      0,                     -1, 0},
        {"64KiB eager",       65536,     UCP_AM_SEND_FLAG_EAGER, 0, 0},
        {"1MiB rndv",         1 << 20,   UCP_AM_SEND_FLAG_RNDV,  1, 1},
        {"1MiB default",      1 << 20,   0,                     -1, 0},
    };
    ucp_request_param_t sp, rp, pp;
    ucs_status_t st_s = UCS_OK, st_r = UCS_OK, st_p = UCS_OK;
    uint8_t hdr[24], *sbuf = NULL, *rbuf = NULL, reply[32];
    void *sreq = NULL, *rreq, *preq = NULL;
    size_t i, size, bad, hbad;
    am_rx_t *rx = &g.am_data;
    const void *data;
    char name[96], rname[96];
    uint32_t seed;
    int ok;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        /* reset before the barrier: once the peer passes it, its message
         * may arrive while this side still progresses inside barrier() */
        am_reset(&g.am_data);
        am_reset(&g.am_reply);
        barrier();
        size = cases[i].size;
        seed = 700 + (uint32_t)i + 17 * dir;
        cname(name, sizeof(name), dir, "am %s %zuB", cases[i].what, size);
        cname(rname, sizeof(rname), dir, "am %s reply", cases[i].what);

        if (is_initiator(dir)) {
            fill(hdr, sizeof(hdr), 0, seed + 1000);
            sbuf = xmalloc(size);
            fill(sbuf, size, 0, seed);
            memset(&sp, 0, sizeof(sp));
            sp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
            sp.flags        = cases[i].flags |
                              (cases[i].reply ? UCP_AM_SEND_FLAG_REPLY : 0);
            sreq = ucp_am_send_nbx(g.ep, AM_ID_DATA, hdr, sizeof(hdr), sbuf,
                                   size, &sp);
        }

        if (is_target(dir)) {
            wait_flag(&rx->count, 1, name);
            rbuf = NULL;
            st_r = UCS_OK;
            if (rx->rndv) {
                rbuf = xmalloc(size + GUARD);
                memset(rbuf, 0, size);
                memset(rbuf + size, GUARD_BYTE, GUARD);
                memset(&rp, 0, sizeof(rp));
                rp.op_attr_mask = 0;
                rreq = ucp_am_recv_data_nbx(g.worker, rx->desc, rbuf,
                                            rx->length, &rp);
                st_r = wait_req(rreq, name);
                data = rbuf;
            } else {
                data = rx->data;
            }
            bad  = ((st_r == UCS_OK) && (rx->length == size)) ?
                   verify(data, size, 0, seed) : 0;
            hbad = (rx->hdr_len == sizeof(hdr)) ?
                   verify(rx->hdr, sizeof(hdr), 0, seed + 1000) : 0;
            ok   = (st_r == UCS_OK) && (rx->count == 1) &&
                   (rx->length == size) && (bad == size) &&
                   (rx->hdr_len == sizeof(hdr)) && (hbad == sizeof(hdr)) &&
                   ((cases[i].expect_rndv < 0) ||
                    (rx->rndv == cases[i].expect_rndv)) &&
                   (!cases[i].reply || (rx->reply_ep != NULL)) &&
                   (!rx->rndv || (verify_byte(rbuf + size, GUARD,
                                              GUARD_BYTE) == GUARD));
            check(ok, name, "recv_data %s, %d delivery(ies), length %zu "
                  "(expected %zu), header length %zu (expected %zu), header "
                  "bad byte %zd, data bad byte %zd, rndv %d (expected %d), "
                  "reply_ep %p", ucs_status_string(st_r), rx->count,
                  rx->length, size, rx->hdr_len, sizeof(hdr),
                  (hbad == sizeof(hdr)) ? (ssize_t)-1 : (ssize_t)hbad,
                  (bad == size) ? (ssize_t)-1 : (ssize_t)bad, rx->rndv,
                  cases[i].expect_rndv, (void*)rx->reply_ep);
            if (cases[i].reply && (rx->reply_ep != NULL)) {
                fill(reply, sizeof(reply), 0, seed + 2000);
                memset(&pp, 0, sizeof(pp));
                preq = ucp_am_send_nbx(rx->reply_ep, AM_ID_REPLY, NULL, 0,
                                       reply, sizeof(reply), &pp);
            }
            free(rbuf);
            rbuf = NULL;
        }

        if (is_initiator(dir)) {
            st_s = wait_req(sreq, name);
            if (!is_target(dir) || (st_s != UCS_OK)) {
                check(st_s == UCS_OK, name, "send completed with %s",
                      ucs_status_string(st_s));
            }
        }
        if (is_target(dir) && (preq != NULL)) {
            st_p = wait_req(preq, rname);
            preq = NULL;
            if (st_p != UCS_OK) {
                fail(rname, "reply send completed with %s",
                     ucs_status_string(st_p));
            }
        }
        if (is_initiator(dir) && cases[i].reply) {
            wait_flag(&g.am_reply.count, 1, rname);
            check((g.am_reply.count == 1) && !g.am_reply.rndv &&
                  (g.am_reply.hdr_len == 0) &&
                  (g.am_reply.length == sizeof(reply)) &&
                  (verify(g.am_reply.data, sizeof(reply), 0, seed + 2000) ==
                   sizeof(reply)), rname,
                  "%d reply(ies), length %zu, header %zu, rndv %d, content %s",
                  g.am_reply.count, g.am_reply.length, g.am_reply.hdr_len,
                  g.am_reply.rndv,
                  (g.am_reply.data && (g.am_reply.length == sizeof(reply)) &&
                   (verify(g.am_reply.data, sizeof(reply), 0, seed + 2000) ==
                    sizeof(reply))) ? "ok" : "wrong");
        }
        free(sbuf);
        sbuf = NULL;
    }
    barrier();
    am_reset(&g.am_data);
    am_reset(&g.am_reply);
}

typedef struct {
    size_t offset;
    size_t length;
} range_t;

/* Non-overlapping ranges of the 1 MiB region, odd offsets included. */
static const range_t put_ranges[] = {
    {0, 1}, {3, 8}, {17, 100}, {200, 1000}, {4097, 8192}, {65536, 65536},
    {131079, 262144}, {524288, 524288}
};
/* second round (worker flush): other sizes and offsets */
static const range_t put_ranges2[] = {
    {1, 2}, {12, 4}, {1500, 64}, {2048, 2048}, {40000, 20000},
    {393230, 100000}
};
static const range_t get_ranges[] = {
    {0, 1}, {5, 8}, {99, 100}, {1234, 1000}, {8191, 8193}, {65536, 65536},
    {200000, 300001}, {0, 1 << 20}
};

#define NRANGES(_r) (sizeof(_r) / sizeof((_r)[0]))

/* The target's view after a round of puts: pattern base_seed everywhere
 * except the ranges, which hold pattern seed0 + k relative to their start. */
static void verify_put_round(int dir, const char *what, const range_t *r,
                             size_t n, uint32_t base_seed, uint32_t seed0)
{
    uint8_t *expect = xmalloc(REGION_SIZE);
    char name[96];
    size_t k, i;

    fill(expect, REGION_SIZE, 0, base_seed);
    for (k = 0; k < n; ++k) {
        fill(expect + r[k].offset, r[k].length, 0, seed0 + (uint32_t)k);
    }
    for (k = 0; k < n; ++k) {
        cname(name, sizeof(name), dir, "%s %zuB @%zu", what, r[k].length,
              r[k].offset);
        for (i = 0; i < r[k].length; ++i) {
            if (g.region[r[k].offset + i] != expect[r[k].offset + i]) {
                break;
            }
        }
        if (i == r[k].length) {
            pass(name);
        } else {
            fail(name, "target byte %zu of the range (region offset %zu) is "
                 "0x%02x, expected 0x%02x", i, r[k].offset + i,
                 g.region[r[k].offset + i], expect[r[k].offset + i]);
        }
    }
    cname(name, sizeof(name), dir, "%s outside ranges untouched", what);
    for (i = 0; i < REGION_SIZE; ++i) {
        if (g.region[i] != expect[i]) {
            break;
        }
    }
    check(i == REGION_SIZE, name, "target region offset %zu is 0x%02x, "
          "expected 0x%02x", i, (i < REGION_SIZE) ? g.region[i] : 0,
          (i < REGION_SIZE) ? expect[i] : 0);
    free(expect);
}

static void put_round(int dir, const char *what, const range_t *r, size_t n,
                      uint32_t base_seed, uint32_t seed0, int worker_fl)
{
    ucp_request_param_t param = {.op_attr_mask = 0};
    uint8_t *src[16];
    void *req[16];
    ucs_status_t st, st_fl;
    char name[96];
    size_t k;

    if (is_target(dir)) {
        fill(g.region, REGION_SIZE, 0, base_seed);
    }
    barrier();

    if (is_initiator(dir)) {
        for (k = 0; k < n; ++k) {
            src[k] = xmalloc(r[k].length);
            fill(src[k], r[k].length, 0, seed0 + (uint32_t)k);
            req[k] = ucp_put_nbx(g.ep, src[k], r[k].length,
                                 g.peer_addr + r[k].offset, g.peer_rkey,
                                 &param);
        }
        for (k = 0; k < n; ++k) {
            cname(name, sizeof(name), dir, "%s", what);
            st = wait_req(req[k], name);
            if (st != UCS_OK) {
                fail(name, "ucp_put_nbx(%zu bytes at offset %zu) completed "
                     "with %s", r[k].length, r[k].offset,
                     ucs_status_string(st));
            }
        }
        cname(name, sizeof(name), dir, "%s %s", what,
              worker_fl ? "ucp_worker_flush_nbx" : "ucp_ep_flush_nbx");
        st_fl = worker_fl ? worker_flush(name) : ep_flush(name);
        check(st_fl == UCS_OK, name, "flush completed with %s",
              ucs_status_string(st_fl));
        for (k = 0; k < n; ++k) {
            free(src[k]);
        }
    }
    barrier();

    if (is_target(dir)) {
        verify_put_round(dir, what, r, n, base_seed, seed0);
    }
    barrier();
}

static void test_put(int dir)
{
    put_round(dir, "put", put_ranges, NRANGES(put_ranges), 800 + dir,
              900 + 20 * dir, 0);
    put_round(dir, "put2", put_ranges2, NRANGES(put_ranges2), 810 + dir,
              950 + 20 * dir, 1);
}

static void test_get(int dir)
{
    ucp_request_param_t param = {.op_attr_mask = 0};
    uint32_t seed = 1100 + dir;
    ucs_status_t st;
    uint8_t *dst;
    size_t k, bad, gbad;
    char name[96];

    if (is_target(dir)) {
        fill(g.region, REGION_SIZE, 0, seed);
    }
    barrier();

    if (is_initiator(dir)) {
        for (k = 0; k < NRANGES(get_ranges); ++k) {
            cname(name, sizeof(name), dir, "get %zuB @%zu",
                  get_ranges[k].length, get_ranges[k].offset);
            dst = xmalloc(get_ranges[k].length + GUARD);
            memset(dst, 0, get_ranges[k].length);
            memset(dst + get_ranges[k].length, GUARD_BYTE, GUARD);
            st = wait_req(ucp_get_nbx(g.ep, dst, get_ranges[k].length,
                                      g.peer_addr + get_ranges[k].offset,
                                      g.peer_rkey, &param), name);
            bad  = (st == UCS_OK) ?
                   verify(dst, get_ranges[k].length, get_ranges[k].offset,
                          seed) : 0;
            gbad = verify_byte(dst + get_ranges[k].length, GUARD, GUARD_BYTE);
            check((st == UCS_OK) && (bad == get_ranges[k].length) &&
                  (gbad == GUARD), name, "completed with %s, first bad byte "
                  "%zd, guard byte %zd overwritten", ucs_status_string(st),
                  (bad == get_ranges[k].length) ? (ssize_t)-1 : (ssize_t)bad,
                  (gbad == GUARD) ? (ssize_t)-1 : (ssize_t)gbad);
            free(dst);
        }
    }
    barrier();
}

/* ---- atomics ---- */

typedef struct {
    const char      *name;
    ucp_atomic_op_t  op;
    int              fetch;     /* reply buffer given */
    uint64_t         init;
    uint64_t         operand;   /* buffer (compare value for CSWAP) */
    uint64_t         swap;      /* CSWAP: reply buffer in */
    uint64_t         mem;       /* expected memory afterwards */
    uint64_t         result;    /* expected fetched value */
} amo_case_t;

#define AMO_MAX 32

static size_t amo_cases(int bits, amo_case_t *c)
{
    uint64_t mask = (bits == 32) ? 0xffffffffull : ~0ull;
    uint64_t A    = (bits == 32) ? 0xF0F01234ull : 0xF0F0123456789ABCull;
    uint64_t V    = (bits == 32) ? 0x0FF0FF11ull : 0x0FF0FFFF00001111ull;
    uint64_t W    = (bits == 32) ? 0xFFFFFFFFull : 0x00000000FFFFFFFFull;
    size_t n = 0;

#define AMO(_n, _op, _f, _i, _o, _s, _m, _r) \
    c[n++] = (amo_case_t){_n, _op, _f, (_i) & mask, (_o) & mask, (_s) & mask, \
                          (_m) & mask, (_r) & mask}
    AMO("add",          UCP_ATOMIC_OP_ADD,   0, A, V, 0, A + V, 0);
    AMO("add-carry",    UCP_ATOMIC_OP_ADD,   0, W, 1, 0, W + 1, 0);
    AMO("and",          UCP_ATOMIC_OP_AND,   0, A, V, 0, A & V, 0);
    AMO("or",           UCP_ATOMIC_OP_OR,    0, A, V, 0, A | V, 0);
    AMO("xor",          UCP_ATOMIC_OP_XOR,   0, A, V, 0, A ^ V, 0);
    AMO("fadd",         UCP_ATOMIC_OP_ADD,   1, A, V, 0, A + V, A);
    AMO("fadd-carry",   UCP_ATOMIC_OP_ADD,   1, W, 1, 0, W + 1, W);
    AMO("fand",         UCP_ATOMIC_OP_AND,   1, A, V, 0, A & V, A);
    AMO("for",          UCP_ATOMIC_OP_OR,    1, A, V, 0, A | V, A);
    AMO("fxor",         UCP_ATOMIC_OP_XOR,   1, A, V, 0, A ^ V, A);
    AMO("swap",         UCP_ATOMIC_OP_SWAP,  1, A, V, 0, V, A);
    AMO("cswap-equal",  UCP_ATOMIC_OP_CSWAP, 1, A, A, V, V, A);
    AMO("cswap-differ", UCP_ATOMIC_OP_CSWAP, 1, A, A ^ 0x10, V, A, A);
    AMO("cswap-differ-high", UCP_ATOMIC_OP_CSWAP, 1, A,
        A ^ (1ull << (bits - 1)), V, A, A);
#undef AMO
    return n;
}

static void amo_store(uint8_t *p, int bits, uint64_t v)
{
    uint32_t v32 = (uint32_t)v;

    if (bits == 32) {
        memcpy(p, &v32, 4);
    } else {
        memcpy(p, &v, 8);
    }
}

static uint64_t amo_load(const uint8_t *p, int bits)
{
    uint32_t v32;
    uint64_t v64;

    if (bits == 32) {
        memcpy(&v32, p, 4);
        return v32;
    }
    memcpy(&v64, p, 8);
    return v64;
}

/* slot k: ATOMIC_SLOT bytes of canary with the value at +8 */
static void test_atomics_width(int dir, int bits)
{
    amo_case_t c[AMO_MAX];
    size_t n = amo_cases(bits, c), k, cb;
    size_t base = (bits == 32) ? 0 : 4096;
    uint64_t operand[AMO_MAX], reply[AMO_MAX];
    uint32_t operand32[AMO_MAX], reply32[AMO_MAX];
    ucp_request_param_t param;
    void *req[AMO_MAX];
    ucs_status_t st[AMO_MAX], st_fl;
    uint8_t *slot;
    uint64_t mem, got;
    char name[96];

    if (is_target(dir)) {
        memset(g.region + base, CANARY_BYTE, AMO_MAX * ATOMIC_SLOT);
        for (k = 0; k < n; ++k) {
            amo_store(g.region + base + k * ATOMIC_SLOT + 8, bits, c[k].init);
        }
    }
    barrier();

    if (is_initiator(dir)) {
        for (k = 0; k < n; ++k) {
            memset(&param, 0, sizeof(param));
            param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
            param.datatype     = ucp_dt_make_contig(bits / 8);
            operand[k]   = c[k].operand;
            operand32[k] = (uint32_t)c[k].operand;
            reply[k]     = c[k].swap;            /* CSWAP: the swap value */
            reply32[k]   = (uint32_t)c[k].swap;
            if (c[k].fetch) {
                param.op_attr_mask |= UCP_OP_ATTR_FIELD_REPLY_BUFFER;
                param.reply_buffer  = (bits == 32) ? (void*)&reply32[k] :
                                                     (void*)&reply[k];
            }
            req[k] = ucp_atomic_op_nbx(g.ep, c[k].op,
                                       (bits == 32) ? (void*)&operand32[k] :
                                                      (void*)&operand[k],
                                       1, g.peer_addr + base + k * ATOMIC_SLOT
                                       + 8, g.peer_rkey, &param);
        }
        for (k = 0; k < n; ++k) {
            cname(name, sizeof(name), dir, "amo%d %s", bits, c[k].name);
            st[k] = wait_req(req[k], name);
        }
        cname(name, sizeof(name), dir, "amo%d ucp_ep_flush_nbx", bits);
        st_fl = ep_flush(name);
        check(st_fl == UCS_OK, name, "flush completed with %s",
              ucs_status_string(st_fl));

        /* the initiator checks completion and the fetched values */
        for (k = 0; k < n; ++k) {
            cname(name, sizeof(name), dir, "amo%d %s%s", bits, c[k].name,
                  c[k].fetch ? " fetched" : " completion");
            got = (bits == 32) ? reply32[k] : reply[k];
            if (c[k].fetch) {
                check((st[k] == UCS_OK) && (got == c[k].result), name,
                      "status %s, fetched 0x%" PRIx64 ", expected 0x%" PRIx64
                      " (init 0x%" PRIx64 ", operand 0x%" PRIx64 ")",
                      ucs_status_string(st[k]), got, c[k].result, c[k].init,
                      c[k].operand);
            } else {
                check(st[k] == UCS_OK, name, "status %s",
                      ucs_status_string(st[k]));
            }
        }
    }
    barrier();

    if (is_target(dir)) {
        /* the target checks memory, and that nothing next to it changed */
        for (k = 0; k < n; ++k) {
            slot = g.region + base + k * ATOMIC_SLOT;
            mem  = amo_load(slot + 8, bits);
            cname(name, sizeof(name), dir, "amo%d %s memory", bits,
                  c[k].name);
            for (cb = 0; cb < ATOMIC_SLOT; ++cb) {
                if (((cb < 8) || (cb >= 8 + (size_t)bits / 8)) &&
                    (slot[cb] != CANARY_BYTE)) {
                    break;
                }
            }
            check((mem == c[k].mem) && (cb == ATOMIC_SLOT), name,
                  "memory 0x%" PRIx64 ", expected 0x%" PRIx64 " (init 0x%"
                  PRIx64 ", operand 0x%" PRIx64 "%s)%s", mem, c[k].mem,
                  c[k].init, c[k].operand,
                  (c[k].op == UCP_ATOMIC_OP_CSWAP) ? ", cswap" : "",
                  (cb == ATOMIC_SLOT) ? "" : "; a neighbouring byte changed");
        }
    }
    barrier();
}

/* N fetch-adds in a row: every fetched value is the previous sum. */
static void test_atomic_sequence(int dir, int bits)
{
    const unsigned count = 1000;
    size_t off = 8192 + (bits == 32 ? 0 : 64);
    ucp_request_param_t param;
    uint64_t one64 = 1, res64, init = (bits == 32) ? 0xFFFFFF00u :
                                      0xFFFFFFFFFFFFFF00ull;
    uint32_t one32 = 1, res32;
    uint64_t got = 0, expect = 0, mem;
    ucs_status_t st = UCS_OK;
    unsigned i, bad = 0;
    char name[96];

    cname(name, sizeof(name), dir, "amo%d fadd x%u sequence", bits, count);
    if (is_target(dir)) {
        amo_store(g.region + off, bits, init);
    }
    barrier();
    if (is_initiator(dir)) {
        for (i = 0; i < count; ++i) {
            memset(&param, 0, sizeof(param));
            param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE |
                                 UCP_OP_ATTR_FIELD_REPLY_BUFFER;
            param.datatype     = ucp_dt_make_contig(bits / 8);
            param.reply_buffer = (bits == 32) ? (void*)&res32 : (void*)&res64;
            res32 = 0;
            res64 = 0;
            st = wait_req(ucp_atomic_op_nbx(g.ep, UCP_ATOMIC_OP_ADD,
                                            (bits == 32) ? (void*)&one32 :
                                                           (void*)&one64,
                                            1, g.peer_addr + off, g.peer_rkey,
                                            &param), name);
            got    = (bits == 32) ? res32 : res64;
            expect = (init + i) & ((bits == 32) ? 0xffffffffull : ~0ull);
            if ((st != UCS_OK) || (got != expect)) {
                bad = i + 1;
                break;
            }
        }
        check(bad == 0, name, "operation %u: status %s, fetched 0x%" PRIx64
              ", expected 0x%" PRIx64, bad ? bad - 1 : 0,
              ucs_status_string(st), got, expect);
        ep_flush(name);
    }
    barrier();
    if (is_target(dir)) {
        cname(name, sizeof(name), dir, "amo%d fadd x%u memory", bits, count);
        mem    = amo_load(g.region + off, bits);
        expect = (init + count) & ((bits == 32) ? 0xffffffffull : ~0ull);
        check(mem == expect, name, "memory 0x%" PRIx64 ", expected 0x%"
              PRIx64, mem, expect);
    }
    barrier();
}

static void test_atomics(int dir)
{
    test_atomics_width(dir, 32);
    test_atomics_width(dir, 64);
    test_atomic_sequence(dir, 32);
    test_atomic_sequence(dir, 64);
}

/* ------------------------------------------------------------------ */
/* teardown                                                            */
/* ------------------------------------------------------------------ */

static void close_ep(ucp_ep_h ep, int force, const char *name)
{
    ucp_request_param_t param;
    ucs_status_t st;

    memset(&param, 0, sizeof(param));
    if (force) {
        param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        param.flags        = UCP_EP_CLOSE_FLAG_FORCE;
    }
    st = wait_req(ucp_ep_close_nbx(ep, &param), name);
    check((st == UCS_OK) || (force && (st != UCS_INPROGRESS)), name,
          "ucp_ep_close_nbx completed with %s", ucs_status_string(st));
}

static void teardown(void)
{
    ucs_status_t st;

    barrier();
    if (g.peer_rkey != NULL) {
        ucp_rkey_destroy(g.peer_rkey);
        g.peer_rkey = NULL;
    }
    barrier();
    close_ep(g.ep, 0, "ep-close");
    g.ep = NULL;
    barrier();
    if (g.memh != NULL) {
        st = ucp_mem_unmap(g.ctx, g.memh);
        check(st == UCS_OK, "mem-unmap", "ucp_mem_unmap: %s",
              ucs_status_string(st));
        g.memh = NULL;
    }
    barrier();
    ucp_worker_destroy(g.worker);
    g.worker = NULL;
    ucp_cleanup(g.ctx);
    g.ctx = NULL;
    am_reset(&g.am_data);
    am_reset(&g.am_reply);
}

/* ------------------------------------------------------------------ */
/* modes                                                               */
/* ------------------------------------------------------------------ */

static void run_functional(void)
{
    static const int lb_dirs[] = {DIR_LB};
    static const int cs_dirs[] = {DIR_C2S, DIR_S2C};
    const int *dirs = (g.mode == MODE_LOOPBACK) ? lb_dirs : cs_dirs;
    size_t ndirs    = (g.mode == MODE_LOOPBACK) ? 1 : 2;
    size_t d;

    setenv("UCX_ALLOC_PRIO", DEFAULT_ALLOC_PRIO, 0);
    note("UCX_TLS=%s UCX_CXL_POOL=%s UCX_ALLOC_PRIO=%s",
         getenv("UCX_TLS") ? getenv("UCX_TLS") : "(unset)",
         getenv("UCX_CXL_POOL") ? getenv("UCX_CXL_POOL") : "(unset)",
         getenv("UCX_ALLOC_PRIO"));

    init_ucp();
    connect_ep(0);
    test_wireup();
    barrier();
    check_ep_uses_cxl();
    setup_rma();

    for (d = 0; d < ndirs; ++d) {
        test_tag(dirs[d]);
        test_probe(dirs[d]);
        test_stream(dirs[d]);
        test_am(dirs[d]);
        test_put(dirs[d]);
        test_get(dirs[d]);
        test_atomics(dirs[d]);
    }
    teardown();
}

static int run_server(const char *port_str, const char *addr_str)
{
    struct sockaddr_in sa;
    socklen_t salen = sizeof(sa);
    struct pollfd pfd;
    int lfd, one = 1;
    char *end;
    long port = strtol(port_str, &end, 10);

    if ((*end != '\0') || (port < 0) || (port > 65535)) {
        fprintf(stderr, "ucp_cxl_test: bad port '%s'\n", port_str);
        return 2;
    }
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0) {
        fatal("oob", "socket: %s", strerror(errno));
    }
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&sa, 0, sizeof(sa));
    sa.sin_family      = AF_INET;
    sa.sin_port        = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if ((addr_str != NULL) && (inet_pton(AF_INET, addr_str, &sa.sin_addr) != 1)) {
        fprintf(stderr, "ucp_cxl_test: bad IPv4 address '%s'\n", addr_str);
        return 2;
    }
    if (bind(lfd, (struct sockaddr*)&sa, sizeof(sa)) ||
        listen(lfd, 1) ||
        getsockname(lfd, (struct sockaddr*)&sa, &salen)) {
        fatal("oob", "bind/listen %s:%ld: %s",
              addr_str ? addr_str : "127.0.0.1", port, strerror(errno));
    }
    printf("# listening on port %u\n", ntohs(sa.sin_port));
    fflush(stdout);

    pfd.fd     = lfd;
    pfd.events = POLLIN;
    if (poll(&pfd, 1, (int)(2 * OP_TIMEOUT * 1000)) <= 0) {
        fatal("oob", "no client connected within %.0f s", 2 * OP_TIMEOUT);
    }
    g.sock = accept(lfd, NULL, NULL);
    if (g.sock < 0) {
        fatal("oob", "accept: %s", strerror(errno));
    }
    close(lfd);
    setsockopt(g.sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    run_functional();
    close(g.sock);
    return 0;
}

static int run_client(const char *host, const char *port_str)
{
    struct addrinfo hints, *res = NULL;
    double deadline = now_sec() + 2 * OP_TIMEOUT;
    int one = 1, rc;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family   = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    rc = getaddrinfo(host, port_str, &hints, &res);
    if (rc != 0) {
        fatal("oob", "getaddrinfo(%s, %s): %s", host, port_str,
              gai_strerror(rc));
    }
    for (;;) {
        g.sock = socket(AF_INET, SOCK_STREAM, 0);
        if (g.sock < 0) {
            fatal("oob", "socket: %s", strerror(errno));
        }
        if (connect(g.sock, res->ai_addr, res->ai_addrlen) == 0) {
            break;
        }
        close(g.sock);
        if (now_sec() > deadline) {
            fatal("oob", "cannot connect to %s:%s: %s", host, port_str,
                  strerror(errno));
        }
        usleep(100000);
    }
    freeaddrinfo(res);
    setsockopt(g.sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    run_functional();
    close(g.sock);
    return 0;
}

/* ---- peer failure ---- */

#define PF_TAG_PING  0xfa110001ull
#define PF_TAG_PONG  0xfa110002ull
#define PF_TAG_AFTER 0xfa110003ull
#define PF_SIZE      65536

/* The forked server: warm up, say ready, then stay alive until killed. */
static void __attribute__((noreturn)) pf_server(void)
{
    ucp_request_param_t sp = {.op_attr_mask = 0};
    ucp_request_param_t rp = {.op_attr_mask = TAG_RECV_ATTR};
    ucp_tag_recv_info_t info = {0, 0};
    uint8_t *buf = xmalloc(PF_SIZE);
    double end;
    ucs_status_t st;
    char ready;

    /* its lines are information only: it never lives to print a summary */
    init_ucp();
    connect_ep(1);
    map_region(); /* pool memory the dead process leaves behind */
    st = wait_tag_recv(ucp_tag_recv_nbx(g.worker, buf, PF_SIZE, PF_TAG_PING,
                                        FULL_MASK, &rp), &info, "pf warm-up");
    ready = ((st == UCS_OK) && (info.length == PF_SIZE) &&
             (verify(buf, PF_SIZE, 0, 42) == PF_SIZE)) ? 'R' : 'F';
    st = wait_req(ucp_tag_send_nbx(g.ep, buf, PF_SIZE, PF_TAG_PONG, &sp),
                  "pf warm-up");
    if (st != UCS_OK) {
        ready = 'F';
    }
    note("warm-up done (%c), pid %d waits to be killed", ready, (int)getpid());
    oob_send(&ready, 1);

    end = now_sec() + PF_CHILD_LIFE;
    while (now_sec() < end) {
        ucp_worker_progress(g.worker);
        usleep(1000);
    }
    note("was never killed; leaving");
    _exit(3);
}

static int run_peer_failure(void)
{
    ucp_request_param_t sp = {.op_attr_mask = 0};
    ucp_request_param_t rp = {.op_attr_mask = TAG_RECV_ATTR};
    ucp_tag_recv_info_t info = {0, 0};
    static uint8_t small[64];
    uint8_t *buf;
    void *reqs[1024];
    size_t nreqs = 0, k, ncompl_err = 0, ncompl_ok = 0;
    ucs_status_t st, st2;
    double t_kill, deadline, next_send;
    int sv[2], wstatus;
    pid_t pid;
    char ready;
    void *req;

    setenv("UCX_ALLOC_PRIO", DEFAULT_ALLOC_PRIO, 0);
    setenv("UCX_KEEPALIVE_INTERVAL", "1s", 0);
    printf("# peer-failure: UCX_TLS=%s UCX_CXL_POOL=%s "
           "UCX_KEEPALIVE_INTERVAL=%s\n",
           getenv("UCX_TLS") ? getenv("UCX_TLS") : "(unset)",
           getenv("UCX_CXL_POOL") ? getenv("UCX_CXL_POOL") : "(unset)",
           getenv("UCX_KEEPALIVE_INTERVAL"));
    fflush(stdout);

    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
        fatal("pf", "socketpair: %s", strerror(errno));
    }
    pid = fork();
    if (pid < 0) {
        fatal("pf", "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(sv[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        g.quiet = 1;
        g.sock = sv[1];
        g.side = "pf-server";
        pf_server();
    }
    close(sv[1]);
    g.sock = sv[0];
    g.side = "pf-client";

    init_ucp();
    connect_ep(1);

    buf = xmalloc(PF_SIZE);
    fill(buf, PF_SIZE, 0, 42);
    st  = wait_req(ucp_tag_send_nbx(g.ep, buf, PF_SIZE, PF_TAG_PING, &sp),
                   "pf warm-up");
    memset(buf, 0, PF_SIZE);
    st2 = wait_tag_recv(ucp_tag_recv_nbx(g.worker, buf, PF_SIZE, PF_TAG_PONG,
                                         FULL_MASK, &rp), &info, "pf warm-up");
    oob_recv(&ready, 1);
    check((st == UCS_OK) && (st2 == UCS_OK) && (info.length == PF_SIZE) &&
          (verify(buf, PF_SIZE, 0, 42) == PF_SIZE) && (ready == 'R'),
          "pf warm-up", "send %s, recv %s (length %zu), server says %c",
          ucs_status_string(st), ucs_status_string(st2), info.length, ready);
    free(buf);
    check(!g.ep_err_called, "pf no error before the kill",
          "error handler called with %s while the peer was alive",
          ucs_status_string(g.ep_err_status));
    check_ep_uses_cxl();

    /* kill -9 the server and reap it: a zombie would still own its pid */
    if (kill(pid, SIGKILL)) {
        fatal("pf kill", "kill(%d, SIGKILL): %s", (int)pid, strerror(errno));
    }
    t_kill = now_sec();
    if (waitpid(pid, &wstatus, 0) != pid) {
        fatal("pf kill", "waitpid(%d): %s", (int)pid, strerror(errno));
    }
    check(WIFSIGNALED(wstatus) && (WTERMSIG(wstatus) == SIGKILL),
          "pf server killed", "server exit status 0x%x", wstatus);
    note("server pid %d killed with SIGKILL", (int)pid);

    /* keep sending and progressing until the error handler or the deadline */
    deadline  = t_kill + PF_TIMEOUT;
    next_send = 0;
    while (!g.ep_err_called && (now_sec() < deadline)) {
        if ((now_sec() >= next_send) &&
            (nreqs < sizeof(reqs) / sizeof(reqs[0]))) {
            req = ucp_tag_send_nbx(g.ep, small, sizeof(small), PF_TAG_AFTER,
                                   &sp);
            if (UCS_PTR_IS_PTR(req)) {
                reqs[nreqs++] = req;
            } else if (UCS_PTR_IS_ERR(req)) {
                ++ncompl_err;
            } else {
                ++ncompl_ok;
            }
            next_send = now_sec() + 0.02;
        }
        ucp_worker_progress(g.worker);
    }
    if (g.ep_err_called) {
        note("error handler called %.2f s after the kill with %s",
             g.ep_err_time - t_kill, ucs_status_string(g.ep_err_status));
    }
    check(g.ep_err_called &&
          ((g.ep_err_status == UCS_ERR_ENDPOINT_TIMEOUT) ||
           (g.ep_err_status == UCS_ERR_CONNECTION_RESET)),
          "pf error handler called",
          g.ep_err_called ? "called with %s (expected Endpoint timeout or "
                            "Connection reset)" :
                            "%snot called within %.0f s of the kill "
                            "(UCX_KEEPALIVE_INTERVAL=%s)",
          g.ep_err_called ? ucs_status_string(g.ep_err_status) : "",
          PF_TIMEOUT, getenv("UCX_KEEPALIVE_INTERVAL"));

    /* every send posted to the dead peer completes, none hangs */
    deadline = now_sec() + OP_TIMEOUT;
    for (k = 0; k < nreqs; ++k) {
        while ((st = ucp_request_check_status(reqs[k])) == UCS_INPROGRESS) {
            ucp_worker_progress(g.worker);
            if (now_sec() > deadline) {
                break;
            }
        }
        if (st == UCS_INPROGRESS) {
            break;
        }
        if (st == UCS_OK) {
            ++ncompl_ok;
        } else {
            ++ncompl_err;
        }
        ucp_request_free(reqs[k]);
    }
    check(k == nreqs, "pf sends to the dead peer complete",
          "%zu of %zu outstanding sends still incomplete %.0f s after the "
          "error", nreqs - k, nreqs, OP_TIMEOUT);
    note("%zu send(s) after the kill: %zu completed ok (buffered before the "
         "failure was known), %zu with an error", ncompl_ok + ncompl_err +
         (nreqs - k), ncompl_ok, ncompl_err);
    if (k != nreqs) {
        summary();
        _exit(1); /* requests still reference the endpoint */
    }

    if (g.ep_err_called) {
        /* a send on the failed endpoint is refused */
        st = wait_req(ucp_tag_send_nbx(g.ep, small, sizeof(small),
                                       PF_TAG_AFTER, &sp), "pf send after "
                      "failure");
        check(st != UCS_OK, "pf send after failure fails",
              "a send on the failed endpoint completed with %s",
              ucs_status_string(st));
    }

    close_ep(g.ep, 1, "pf ep-close force");
    g.ep = NULL;
    ucp_worker_destroy(g.worker);
    g.worker = NULL;
    ucp_cleanup(g.ctx);
    g.ctx = NULL;
    close(g.sock);
    pass("pf cleanup");
    return 0;
}

/* ---- channel gap (optional; not run by run-ucp-tests.sh) ---- */

static ucp_worker_h cg_worker(void)
{
    ucp_worker_params_t wparams;
    ucp_worker_h worker;
    ucs_status_t status;

    memset(&wparams, 0, sizeof(wparams));
    wparams.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
    status = ucp_worker_create(g.ctx, &wparams, &worker);
    if (status != UCS_OK) {
        fatal("channel-gap", "ucp_worker_create: %s",
              ucs_status_string(status));
    }
    return worker;
}

static ucp_ep_h cg_ep(ucp_worker_h worker, const ucp_address_t *addr)
{
    ucp_ep_params_t params;
    ucs_status_t status;
    ucp_ep_h ep;

    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    params.address    = addr;
    status = ucp_ep_create(worker, &params, &ep);
    if (status != UCS_OK) {
        fatal("channel-gap", "ucp_ep_create: %s", ucs_status_string(status));
    }
    return ep;
}

/*
 * Senders A and B connect to receiver R before R ever progresses (A takes
 * receive channel 0 of R, B channel 1); A's worker is destroyed, which
 * hands channel 0 back; then B sends to R.  R must still get it.
 */
static int run_channel_gap(void)
{
    ucp_request_param_t sp = {.op_attr_mask = 0};
    ucp_request_param_t rp = {.op_attr_mask = TAG_RECV_ATTR};
    ucp_worker_h r, a, b;
    ucp_address_t *raddr;
    size_t rlen;
    uint8_t sbuf[64], rbuf[64];
    void *sreq, *rreq;
    double deadline;
    int done;

    setenv("UCX_ALLOC_PRIO", DEFAULT_ALLOC_PRIO, 0);
    init_ucp();           /* g.worker is R */
    r = g.worker;
    a = cg_worker();
    b = cg_worker();
    if (ucp_worker_get_address(r, &raddr, &rlen) != UCS_OK) {
        fatal("channel-gap", "ucp_worker_get_address failed");
    }
    (void)cg_ep(a, raddr);    /* destroyed with its worker */
    g.ep = cg_ep(b, raddr);
    ucp_worker_release_address(r, raddr);
    ucp_worker_destroy(a);

    fill(sbuf, sizeof(sbuf), 0, 77);
    memset(rbuf, 0, sizeof(rbuf));
    sreq = ucp_tag_send_nbx(g.ep, sbuf, sizeof(sbuf), 0xc9, &sp);
    rreq = ucp_tag_recv_nbx(r, rbuf, sizeof(rbuf), 0xc9, FULL_MASK, &rp);
    deadline = now_sec() + 5;
    do {
        ucp_worker_progress(r);
        ucp_worker_progress(b);
        done = !UCS_PTR_IS_PTR(rreq) ||
               (ucp_request_check_status(rreq) != UCS_INPROGRESS);
    } while (!done && (now_sec() < deadline));
    check(done && (verify(rbuf, sizeof(rbuf), 0, 77) == sizeof(rbuf)),
          "channel-gap: B's message reaches R after A left",
          "not delivered within 5 s: R polls its channels only up to the "
          "first unowned one, and A's channel 0 was handed back before R "
          "ever progressed, so B's channel 1 is never polled");
    /* requests and workers are left to process exit: B's may never end */
    (void)sreq;
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: ucp_cxl_test loopback\n"
            "       ucp_cxl_test server PORT [ADDR] (0: any; printed)\n"
            "       ucp_cxl_test client HOST PORT\n"
            "       ucp_cxl_test peer-failure\n"
            "       ucp_cxl_test channel-gap       (optional regression)\n"
            "env: LD_PRELOAD=libuct_cxl.so UCX_TLS=cxl UCX_CXL_POOL=PATH\n");
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);

    if ((argc == 2) && !strcmp(argv[1], "loopback")) {
        g.mode = MODE_LOOPBACK;
        g.side = "loopback";
        run_functional();
    } else if (((argc == 3) || (argc == 4)) && !strcmp(argv[1], "server")) {
        g.mode = MODE_SERVER;
        g.side = "server";
        if (run_server(argv[2], (argc == 4) ? argv[3] : NULL) != 0) {
            return 2;
        }
    } else if ((argc == 4) && !strcmp(argv[1], "client")) {
        g.mode = MODE_CLIENT;
        g.side = "client";
        run_client(argv[2], argv[3]);
    } else if ((argc == 2) && !strcmp(argv[1], "peer-failure")) {
        g.mode = MODE_PEER_FAILURE;
        g.side = "pf-client";
        run_peer_failure();
    } else if ((argc == 2) && !strcmp(argv[1], "channel-gap")) {
        g.mode = MODE_LOOPBACK;
        g.side = "channel-gap";
        run_channel_gap();
        summary();
        fflush(stdout);
        _exit(g.failed ? 1 : 0);
    } else {
        usage();
        return 2;
    }

    summary();
    return g.failed ? 1 : 0;
}
