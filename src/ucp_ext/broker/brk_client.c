/*
 * Client library: connecting, datasets, warm-up, epochs, statistics.
 * The read path is in brk_read.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "brk_client_int.h"
#include "brk_wire.h"
#include "../common/cxl_pool_pick.h"
#include "../common/cxl_uct_load.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define BRK_WARM_BATCH 16

void cxl_broker_params_init(cxl_broker_params_t *params)
{
    memset(params, 0, sizeof(*params));
    params->local = -1;
}

void cxl_broker_add_params_init(cxl_broker_add_params_t *params)
{
    memset(params, 0, sizeof(*params));
    params->format = CXL_BROKER_FMT_AUTO;
    params->policy = CXL_BROKER_POLICY_PIN;
}

const char *cxl_broker_default_addr(char *buf, size_t len)
{
    const char *env = getenv(CXL_BROKER_ENV);

    if ((env != NULL) && env[0]) {
        snprintf(buf, len, "%s", env);
    } else {
        snprintf(buf, len, "127.0.0.1:%u",
                 CXL_BROKER_DEFAULT_PORT_BASE + (unsigned)(getuid() % 1000));
    }
    return buf;
}

static void brk_ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    cxl_broker_t *b = arg;

    (void)ep;
    b->dead      = 1;
    b->ep_status = status;
}

static cxl_broker_status_t brk_ucp_open(cxl_broker_t *b)
{
    ucp_worker_params_t wp;
    ucp_params_t prm;
    ucp_config_t *cfg;
    ucs_status_t st;
    char err[512];

    if (cxl_uct_load(err, sizeof(err)) != 0) {
        return brk_cerr(CXL_BROKER_ERR_UCX, "%s", err);
    }
    if (ucp_config_read(NULL, NULL, &cfg) != UCS_OK) {
        return brk_cerr(CXL_BROKER_ERR_UCX, "ucp_config_read failed");
    }
    if (getenv("UCX_TLS") == NULL) {
        /* through the pool inside the pod, tcp from anywhere else */
        ucp_config_modify(cfg, "TLS", "cxl,tcp");
    }
    memset(&prm, 0, sizeof(prm));
    prm.field_mask = UCP_PARAM_FIELD_FEATURES;
    prm.features   = UCP_FEATURE_AM | UCP_FEATURE_RMA;
    st = ucp_init(&prm, cfg, &b->ucp);
    ucp_config_release(cfg);
    if (st != UCS_OK) {
        return brk_cerr(CXL_BROKER_ERR_UCX, "ucp_init: %s",
                        ucs_status_string(st));
    }
    memset(&wp, 0, sizeof(wp));
    wp.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    st = ucp_worker_create(b->ucp, &wp, &b->worker);
    if (st != UCS_OK) {
        return brk_cerr(CXL_BROKER_ERR_UCX, "ucp_worker_create: %s",
                        ucs_status_string(st));
    }
    if (brk_client_init_am(b)) {
        return brk_cerr(CXL_BROKER_ERR_UCX, "cannot set the reply handler");
    }
    return CXL_BROKER_OK;
}

/* Connecting failed: nobody answered at b->addr, for the reason why. */
static cxl_broker_status_t brk_no_broker(const cxl_broker_t *b, const char *why)
{
    return brk_cerr(CXL_BROKER_ERR_CONNECT, "no broker at %s (%s): start one "
                    "with 'cxl-broker serve', or name it with --broker or %s",
                    b->addr, why, CXL_BROKER_ENV);
}

/*
 * The endpoint's first flush completes once UCP has wired it up (its lanes
 * are final).  Nothing is sent before: UCP 1.13 sends a message posted
 * during wire-up with the protocol of the endpoint's first configuration
 * (tcp only) on the lanes of the final one, as libcxl_comm found
 * (comm_ep.c).  A broker that is not there fails the flush.
 */
static cxl_broker_status_t brk_ep_wired(cxl_broker_t *b)
{
    double deadline = brk_cnow() + b->timeout;
    ucp_request_param_t prm;
    ucs_status_ptr_t sp;
    ucs_status_t st;

    memset(&prm, 0, sizeof(prm));
    sp = ucp_ep_flush_nbx(b->ep, &prm);
    if (sp == NULL) {
        return CXL_BROKER_OK;
    }
    if (UCS_PTR_IS_ERR(sp)) {
        st = UCS_PTR_STATUS(sp);
    } else {
        while (((st = ucp_request_check_status(sp)) == UCS_INPROGRESS) &&
               (brk_cnow() < deadline)) {
            ucp_worker_progress(b->worker);
        }
        /* one still in flight ends with the forced close of the
         * endpoint (cxl_broker_disconnect) and is released then */
        ucp_request_free(sp);
        if (st == UCS_INPROGRESS) {
            st = UCS_ERR_TIMED_OUT;
        }
    }
    if (st == UCS_OK) {
        return CXL_BROKER_OK;
    }
    b->dead      = 1;
    b->ep_status = b->ep_status ? b->ep_status : st;
    return brk_no_broker(b, (st == UCS_ERR_TIMED_OUT) ? "no connection in time"
                            : ucs_status_string(b->ep_status));
}

static cxl_broker_status_t brk_ep_open(cxl_broker_t *b)
{
    struct addrinfo hints, *res;
    char host[BRK_ADDR_MAX], port[8], err[BRK_ADDR_MAX + 64];
    ucp_ep_params_t prm;
    ucs_status_t st;
    uint16_t pnum;
    int rc;

    if (brk_addr_split(b->addr, 0, host, sizeof(host), &pnum, err,
                       sizeof(err))) {
        return brk_cerr(CXL_BROKER_ERR_INVAL, "broker %s", err);
    }
    snprintf(port, sizeof(port), "%u", pnum);
    memset(&hints, 0, sizeof(hints));
    hints.ai_family   = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags    = AI_NUMERICSERV;
    rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        return brk_cerr(CXL_BROKER_ERR_CONNECT, "broker address '%s': %s",
                        b->addr, gai_strerror(rc));
    }
    memset(&prm, 0, sizeof(prm));
    prm.field_mask       = UCP_EP_PARAM_FIELD_FLAGS |
                           UCP_EP_PARAM_FIELD_SOCK_ADDR |
                           UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                           UCP_EP_PARAM_FIELD_ERR_HANDLER;
    prm.flags            = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    prm.sockaddr.addr    = res->ai_addr;
    prm.sockaddr.addrlen = res->ai_addrlen;
    prm.err_mode         = UCP_ERR_HANDLING_MODE_PEER;
    prm.err_handler.cb   = brk_ep_err_cb;
    prm.err_handler.arg  = b;
    st = ucp_ep_create(b->worker, &prm, &b->ep);
    freeaddrinfo(res);
    if (st != UCS_OK) {
        return brk_cerr(CXL_BROKER_ERR_CONNECT, "broker %s: %s", b->addr,
                        ucs_status_string(st));
    }
    return brk_ep_wired(b);
}

/*
 * Views hand out pointers into the arena, and a torch tensor cannot be
 * made read-only: a write through one would change the chunk for every
 * reader of the pod.  So views point into a read-only mapping of the
 * arena (the same pages), where such a write faults; without one (the
 * pool cannot be mapped so), into the pool's own mapping.
 */
static void brk_map_ro(cxl_broker_t *b, uint64_t map_align)
{
    long page       = sysconf(_SC_PAGESIZE);
    uint64_t align  = (page > 0) ? (uint64_t)page : 4096;
    uint64_t lo, hi;
    void *p;
    int fd;

    /* a device maps only at its own alignment: cover the arena with whole
     * aligned units and point into them */
    if ((map_align > align) && !(map_align & (map_align - 1))) {
        align = map_align;
    }
    lo = b->arena_pool_off & ~(align - 1);
    hi = (b->arena_pool_off + b->arena_size + align - 1) & ~(align - 1);
    b->arena_ro = b->arena;
    fd = open(b->pool_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return;
    }
    p = mmap(NULL, hi - lo, PROT_READ, MAP_SHARED, fd, (off_t)lo);
    close(fd);
    if (p != MAP_FAILED) {
        b->ro_map   = p;
        b->ro_len   = hi - lo;
        b->arena_ro = (const uint8_t*)p + (b->arena_pool_off - lo);
    }
}

/* Whether path (maybe "prefix:path") names the file st describes. */
static int brk_same_file(const char *path, const struct stat *st)
{
    const char *colon = strrchr(path, ':');
    struct stat ps;

    if ((colon != NULL) && (stat(path, &ps) != 0)) {
        path = colon + 1;       /* a prefixed pool spec (emulate-nc:PATH) */
    }
    return (stat(path, &ps) == 0) && (ps.st_dev == st->st_dev) &&
           (ps.st_ino == st->st_ino);
}

/*
 * This process maps the broker's pool, but its cxl transport may attach
 * other pools (UCX_CXL_POOL unset picks the devdax pools, else the
 * per-user default): then every request and every get goes over tcp,
 * about ten times slower, and nothing would say so.  Say it once, with
 * the fix.
 */
static void brk_check_transport_pool(const cxl_broker_t *b)
{
    const char *env = getenv("UCX_CXL_POOL");
    char pick[256], *list, *tok, *save = NULL;
    cxl_pool_pick_src_t src;
    struct stat st;
    int found = 0;

    if ((stat(b->pool_path, &st) != 0) ||
        (cxl_pool_pick(pick, sizeof(pick), &src) != 0)) {
        return;                 /* cannot tell */
    }
    if (src != CXL_POOL_PICK_LISTED) {
        if (!strncmp(b->pool_path, "/dev/dax", 8)) {
            return;             /* auto attaches every devdax pool */
        }
        /* the default only where no devdax device holds a pool */
        found = (src == CXL_POOL_PICK_DEFAULT) && brk_same_file(pick, &st);
    } else if ((list = strdup(env)) != NULL) {
        for (tok = strtok_r(list, ",", &save); (tok != NULL) && !found;
             tok = strtok_r(NULL, ",", &save)) {
            found = brk_same_file(tok, &st);
        }
        free(list);
    } else {
        return;
    }
    if (!found) {
        fprintf(stderr, "cxl-broker client: the broker at %s serves pool %s, "
                "which this process's cxl transport does not attach "
                "(UCX_CXL_POOL=%s): requests and gets go over tcp; set "
                "UCX_CXL_POOL=%s\n", b->addr, b->pool_path,
                (env != NULL) ? env : "unset, the default pool",
                b->pool_path);
    }
}

/* Map the broker's pool here when it is the same pool (uuid). */
static cxl_broker_status_t brk_local_open(cxl_broker_t *b, int want)
{
    cxlpool_params_t pp;
    cxlpool_info_t info;

    if ((cxlpool_probe(b->pool_path, &info) != CXLPOOL_OK) ||
        memcmp(info.uuid, b->uuid, sizeof(b->uuid))) {
        if (want == 1) {
            return brk_cerr(CXL_BROKER_ERR_UNSUPPORTED, "broker %s serves pool "
                            "%s, which this process cannot map", b->addr,
                            b->pool_path);
        }
        return CXL_BROKER_OK;
    }
    cxlpool_params_init(&pp);
    pp.path = b->pool_path;
    if (cxlpool_open(&pp, &b->pool) != CXLPOOL_OK) {
        if (want == 1) {
            return brk_cerr(CXL_BROKER_ERR_UNSUPPORTED, "pool %s: %s",
                            b->pool_path, cxlpool_last_error());
        }
        b->pool = NULL;
        return CXL_BROKER_OK;
    }
    b->arena = (uint8_t*)cxlpool_base(b->pool) + b->arena_pool_off;
    brk_map_ro(b, info.map_align);
    b->copy_mapped = !b->copy_get && (b->arena_ro != NULL);
    brk_check_transport_pool(b);
    return CXL_BROKER_OK;
}

cxl_broker_status_t cxl_broker_connect(const cxl_broker_params_t *params,
                                       cxl_broker_t **broker_p)
{
    cxl_broker_params_t def;
    brk_hello_rep_t rep;
    const void *rkey;
    char err[BRK_ERRMSG_MAX];
    brk_hello_req_t req;
    cxl_broker_status_t st;
    cxl_broker_t *b;
    const char *env;
    void *data = NULL;
    size_t len = 0;
    ucs_status_t us;

    if (params == NULL) {
        cxl_broker_params_init(&def);
        params = &def;
    }
    b = calloc(1, sizeof(*b));
    if (b == NULL) {
        return brk_cerr(CXL_BROKER_ERR_NO_MEMORY, "out of memory");
    }
    b->timeout   = (params->timeout_s > 0) ? params->timeout_s : 10.0;
    env          = getenv("CXL_BROKER_PIN_CACHE");
    b->pin_cache = (env != NULL) ? (unsigned)strtoul(env, NULL, 0) : 64;
    if (b->pin_cache == 0) {
        b->pin_cache = 1;
    }
    env = getenv("CXL_BROKER_COPY");
    if ((env != NULL) && strcmp(env, "get") && strcmp(env, "map")) {
        free(b);
        return brk_cerr(CXL_BROKER_ERR_INVAL, "CXL_BROKER_COPY='%s': get or "
                        "map", env);
    }
    b->copy_get = (env != NULL) && !strcmp(env, "get");
    if (params->addr != NULL) {
        if (strlen(params->addr) >= sizeof(b->addr)) {
            free(b);
            return brk_cerr(CXL_BROKER_ERR_INVAL, "broker address '%s': "
                            "longer than %zu characters", params->addr,
                            sizeof(b->addr) - 1);
        }
        snprintf(b->addr, sizeof(b->addr), "%s", params->addr);
    } else {
        cxl_broker_default_addr(b->addr, sizeof(b->addr));
    }
    st = brk_ucp_open(b);
    if (st == CXL_BROKER_OK) {
        st = brk_ep_open(b);
    }
    if (st != CXL_BROKER_OK) {
        cxl_broker_disconnect(b);
        return st;
    }
    memset(&req, 0, sizeof(req));
    req.pid = (int32_t)getpid();
    gethostname(req.host, sizeof(req.host) - 1);
    st = brk_call(b, BRK_REQ_HELLO, &req, sizeof(req), &data, &len);
    if (st != CXL_BROKER_OK) {
        if ((st == CXL_BROKER_ERR_DISCONNECTED) || (st == CXL_BROKER_ERR_TIMEOUT)) {
            st = brk_no_broker(b, b->dead ? ucs_status_string(b->ep_status)
                                          : "no answer");
        }
        cxl_broker_disconnect(b);
        return st;
    }
    st = brk_hello_rep_decode(data, len, &rep, &rkey, err, sizeof(err));
    if (st != CXL_BROKER_OK) {
        free(data);
        cxl_broker_disconnect(b);
        return brk_cerr(st, "broker %s: %s", b->addr, err);
    }
    b->arena_va       = rep.arena_va;
    b->arena_size     = rep.arena_size;
    b->arena_pool_off = rep.arena_pool_off;
    memcpy(b->uuid, rep.pool_uuid, sizeof(b->uuid));
    snprintf(b->pool_path, sizeof(b->pool_path), "%s", rep.pool_path);
    us = ucp_ep_rkey_unpack(b->ep, rkey, &b->rkey);
    free(data);
    if (us != UCS_OK) {
        cxl_broker_disconnect(b);
        return brk_cerr(CXL_BROKER_ERR_UCX, "broker %s: cannot unpack its "
                        "key: %s", b->addr, ucs_status_string(us));
    }
    if (params->local != 0) {
        st = brk_local_open(b, params->local);
        if (st != CXL_BROKER_OK) {
            cxl_broker_disconnect(b);
            return st;
        }
    }
    *broker_p = b;
    return CXL_BROKER_OK;
}

void cxl_broker_disconnect(cxl_broker_t *b)
{
    ucp_request_param_t prm;
    ucs_status_ptr_t sp;

    if (b == NULL) {
        return;
    }
    if (b->rkey != NULL) {
        ucp_rkey_destroy(b->rkey);
    }
    if (b->ep != NULL) {
        memset(&prm, 0, sizeof(prm));
        prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        prm.flags        = b->dead ? UCP_EP_CLOSE_FLAG_FORCE : 0;
        sp = ucp_ep_close_nbx(b->ep, &prm);
        if (UCS_PTR_IS_PTR(sp)) {
            double deadline = brk_cnow() + 2.0;
            while ((ucp_request_check_status(sp) == UCS_INPROGRESS) &&
                   (brk_cnow() < deadline)) {
                ucp_worker_progress(b->worker);
            }
            ucp_request_free(sp);
        }
    }
    if (b->worker != NULL) {
        ucp_worker_destroy(b->worker);
    }
    if (b->ucp != NULL) {
        ucp_cleanup(b->ucp);
    }
    if (b->ro_map != NULL) {
        munmap(b->ro_map, b->ro_len);
    }
    if (b->pool != NULL) {
        cxlpool_close(b->pool);
    }
    free(b);
}

int cxl_broker_is_local(const cxl_broker_t *b)
{
    return b->arena != NULL;
}

/* ---- datasets ---- */

cxl_broker_status_t cxl_broker_add(cxl_broker_t *b, const char *name,
                                   const char *const *paths, unsigned npaths,
                                   const cxl_broker_add_params_t *params,
                                   cxl_broker_dsinfo_t *info)
{
    cxl_broker_add_params_t def;
    brk_add_req_t *req;
    size_t len = sizeof(*req), off;
    cxl_broker_status_t st;
    void *data = NULL;
    size_t rlen = 0;
    unsigned i;

    if ((name == NULL) || (strlen(name) >= BRK_NAME_MAX) || (npaths == 0)) {
        return brk_cerr(CXL_BROKER_ERR_INVAL, "add: a name of 1 to %u "
                        "characters and at least one path", BRK_NAME_MAX - 1);
    }
    if (params == NULL) {
        cxl_broker_add_params_init(&def);
        params = &def;
    }
    for (i = 0; i < npaths; ++i) {
        len += strlen(paths[i]) + 1;
    }
    req = calloc(1, len);
    if (req == NULL) {
        return brk_cerr(CXL_BROKER_ERR_NO_MEMORY, "out of memory");
    }
    snprintf(req->name, sizeof(req->name), "%s", name);
    req->format      = params->format;
    req->policy      = params->policy;
    req->chunk_size  = params->chunk_size;
    req->record_size = params->record_size;
    req->pin_bytes   = params->pin_bytes;
    req->npaths      = npaths;
    for (i = 0, off = sizeof(*req); i < npaths; ++i) {
        memcpy((char*)req + off, paths[i], strlen(paths[i]) + 1);
        off += strlen(paths[i]) + 1;
    }
    /* a scan of a large directory may take long */
    {
        double saved = b->timeout;
        b->timeout   = (saved < 3600) ? 3600 : saved;
        st = brk_call(b, BRK_REQ_ADD, req, len, &data, &rlen);
        b->timeout   = saved;
    }
    free(req);
    if ((st == CXL_BROKER_OK) && (info != NULL)) {
        if (rlen < sizeof(*info)) {
            free(data);
            return brk_cerr(CXL_BROKER_ERR_CORRUPT, "malformed add answer");
        }
        memcpy(info, data, sizeof(*info));
    }
    free(data);
    return st;
}

static cxl_broker_status_t brk_name_call(cxl_broker_t *b, uint32_t type,
                                         const char *name, uint64_t *count)
{
    brk_name_req_t req;
    cxl_broker_status_t st;
    void *data = NULL;
    size_t len = 0;

    memset(&req, 0, sizeof(req));
    if ((name != NULL) && (strlen(name) >= sizeof(req.name))) {
        return brk_cerr(CXL_BROKER_ERR_INVAL, "dataset name too long");
    }
    if (name != NULL) {
        snprintf(req.name, sizeof(req.name), "%s", name);
    }
    st = brk_call(b, type, &req, sizeof(req), &data, &len);
    if ((st == CXL_BROKER_OK) && (count != NULL)) {
        *count = (len >= sizeof(brk_count_rep_t)) ?
                 ((brk_count_rep_t*)data)->count : 0;
    }
    free(data);
    return st;
}

cxl_broker_status_t cxl_broker_rm(cxl_broker_t *b, const char *name)
{
    if (name == NULL) {
        return brk_cerr(CXL_BROKER_ERR_INVAL, "rm: no dataset name");
    }
    return brk_name_call(b, BRK_REQ_RM, name, NULL);
}

cxl_broker_status_t cxl_broker_evict(cxl_broker_t *b, const char *name,
                                     uint64_t *chunks_evicted)
{
    return brk_name_call(b, BRK_REQ_EVICT, name, chunks_evicted);
}

cxl_broker_status_t cxl_broker_list(cxl_broker_t *b, cxl_broker_list_cb_t cb,
                                    void *arg)
{
    const cxl_broker_dsinfo_t *info;
    const void *elems;
    cxl_broker_status_t st;
    char err[BRK_ERRMSG_MAX];
    void *data = NULL;
    size_t len = 0;
    uint32_t i, n;

    st = brk_call(b, BRK_REQ_LIST, NULL, 0, &data, &len);
    if (st != CXL_BROKER_OK) {
        return st;
    }
    st = brk_array_rep_decode(data, len, 0, sizeof(*info), &n, &elems, err,
                              sizeof(err));
    if (st != CXL_BROKER_OK) {
        free(data);
        return brk_cerr(st, "list: %s", err);
    }
    info = elems;
    for (i = 0; i < n; ++i) {
        cb(&info[i], arg);
    }
    free(data);
    return CXL_BROKER_OK;
}

cxl_broker_status_t cxl_broker_stat(cxl_broker_t *b, cxl_broker_stat_t *stat,
                                    cxl_broker_epoch_cb_t cb, void *arg)
{
    const cxl_broker_epoch_stat_t *es;
    const void *elems;
    cxl_broker_status_t st;
    char err[BRK_ERRMSG_MAX];
    void *data = NULL;
    size_t len = 0;
    uint32_t i, n;

    st = brk_call(b, BRK_REQ_STAT, NULL, 0, &data, &len);
    if (st != CXL_BROKER_OK) {
        return st;
    }
    st = brk_array_rep_decode(data, len, sizeof(*stat), sizeof(*es), &n,
                              &elems, err, sizeof(err));
    if (st != CXL_BROKER_OK) {
        free(data);
        return brk_cerr(st, "stat: %s", err);
    }
    es = elems;
    memcpy(stat, data, sizeof(*stat));
    for (i = 0; (cb != NULL) && (i < n); ++i) {
        cb(&es[i], arg);
    }
    free(data);
    return CXL_BROKER_OK;
}

cxl_broker_status_t cxl_broker_epoch(cxl_broker_ds_t *ds, uint32_t epoch,
                                     const uint64_t *order, uint64_t n)
{
    brk_epoch_req_t *req;
    cxl_broker_status_t st;
    uint64_t i;

    for (i = 0; i < n; ++i) {
        if (order[i] >= ds->rep.nsamples) {
            return brk_cerr(CXL_BROKER_ERR_INVAL, "epoch order: sample %"
                            PRIu64 " of %s has only %" PRIu64, order[i],
                            ds->name, ds->rep.nsamples);
        }
    }
    req = malloc(sizeof(*req) + n * sizeof(uint64_t));
    if (req == NULL) {
        return brk_cerr(CXL_BROKER_ERR_NO_MEMORY, "out of memory");
    }
    brk_touch_flush(ds);    /* reads so far belong to the epoch before */
    req->handle = ds->rep.handle;
    req->epoch  = epoch;
    req->pad    = 0;
    req->n      = n;
    if (n) {
        memcpy(req + 1, order, n * sizeof(uint64_t));
    }
    st = brk_call(ds->b, BRK_REQ_EPOCH, req, sizeof(*req) + n * sizeof(uint64_t),
                  NULL, NULL);
    free(req);
    return st;
}
