/*
 * rma_bench.c - UCP put/get bandwidth with a target that keeps progressing.
 *
 * ucx_perftest's ucp_put_bw responder stops progressing once it reads
 * sequence number 1 at the end of its buffer, which is also what the
 * second put of a run writes (UCX 1.13: psn_t is uint8_t, INITIAL_SN 0,
 * LAST_ITER_SN 1), and its ucp_get responder progresses about once per
 * millisecond in its socket barrier.  Where the target's CPU takes part in
 * RMA (cxl's software coherence across hosts), that measures the
 * benchmark's responder.  Here the target progresses until the initiator
 * says it is done, as an MPI process does while it waits in a window
 * synchronisation.
 *
 * One process forks: the child is the target (owner of the remote buffer),
 * the parent the initiator.  Each side puts the VAR=VALUE words of
 * --target-env / --initiator-env into its environment before ucp_init (the
 * cxl-xh configuration gives the two sides different UCX_CXL_HOST_INDEX).
 * Both buffers are allocated with ucp_mem_map(UCP_MEM_MAP_ALLOCATE), so
 * UCX_ALLOC_PRIO decides where they live (md:cxl: the pool).
 *
 * Prints one CSV line per figure on stdout (the format of mpi_bench.c):
 *
 *   <op>,<size in bytes>,<MB/s (%.6g)>,MB/s,higher
 *
 * MB/s is 2^20 bytes/s, as ucx_perftest prints.  It measures; it never
 * judges the numbers.
 *
 * Usage: rma_bench [--op put|get] [--sizes LIST] [--iters N] [--window W]
 *                  [--target-env "VAR=VALUE ..."] [--initiator-env "..."]
 */
#include <ucp/api/ucp.h>

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

#define MBYTE (1024.0 * 1024.0)

typedef struct {
    ucp_context_h context;
    ucp_worker_h  worker;
    ucp_mem_h     memh;
    void         *buf;
    size_t        length;
} rb_side_t;

static void die(const char *what, ucs_status_t status)
{
    fprintf(stderr, "rma_bench: %s: %s\n", what, ucs_status_string(status));
    exit(1);
}

static void die_errno(const char *what)
{
    fprintf(stderr, "rma_bench: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* 1 if every word of "A=1 B=2" is VAR=VALUE (NULL: none) */
static int env_words_valid(const char *words)
{
    const char *w = words, *end, *eq;

    while ((w != NULL) && (*w != '\0')) {
        while (*w == ' ') {
            ++w;
        }
        if (*w == '\0') {
            break;
        }
        end = strchr(w, ' ');
        end = (end != NULL) ? end : w + strlen(w);
        eq  = memchr(w, '=', (size_t)(end - w));
        if ((eq == NULL) || (eq == w)) {
            fprintf(stderr, "rma_bench: '%.*s' is not VAR=VALUE\n", (int)(end - w), w);
            return 0;
        }
        w = end;
    }
    return 1;
}

/* "A=1 B=2" -> setenv for each word (the string is copied; checked by
 * env_words_valid before) */
static void put_env(const char *words)
{
    char *copy, *tok, *save, *eq;

    if (words == NULL) {
        return;
    }
    copy = strdup(words);
    for (tok = strtok_r(copy, " ", &save); tok != NULL;
         tok = strtok_r(NULL, " ", &save)) {
        eq  = strchr(tok, '=');
        *eq = '\0';
        setenv(tok, eq + 1, 1);
    }
    free(copy);
}

static void send_all(int fd, const void *p, size_t len)
{
    const char *c = p;
    ssize_t n;

    while (len > 0) {
        n = write(fd, c, len);
        if (n <= 0) {
            die_errno("write to the peer process");
        }
        c += n;
        len -= (size_t)n;
    }
}

static void recv_all(int fd, void *p, size_t len)
{
    char *c = p;
    ssize_t n;

    while (len > 0) {
        n = read(fd, c, len);
        if (n <= 0) {
            fprintf(stderr, "rma_bench: the peer process is gone\n");
            exit(1);
        }
        c += n;
        len -= (size_t)n;
    }
}

/* length-prefixed blob */
static void send_blob(int fd, const void *p, size_t len)
{
    uint64_t l = len;

    send_all(fd, &l, sizeof(l));
    send_all(fd, p, len);
}

static void *recv_blob(int fd, size_t *len)
{
    uint64_t l;
    void *p;

    recv_all(fd, &l, sizeof(l));
    p = malloc(l ? l : 1);
    recv_all(fd, p, l);
    *len = l;
    return p;
}

static void side_init(rb_side_t *s, size_t length)
{
    ucp_params_t params = {0};
    ucp_worker_params_t wparams = {0};
    ucp_mem_map_params_t mparams = {0};
    ucp_mem_attr_t attr;
    ucs_status_t status;

    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features   = UCP_FEATURE_RMA;
    status = ucp_init(&params, NULL, &s->context);
    if (status != UCS_OK) {
        die("ucp_init", status);
    }
    wparams.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
    status = ucp_worker_create(s->context, &wparams, &s->worker);
    if (status != UCS_OK) {
        die("ucp_worker_create", status);
    }
    mparams.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                         UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    mparams.length     = length;
    mparams.flags      = UCP_MEM_MAP_ALLOCATE;
    status = ucp_mem_map(s->context, &mparams, &s->memh);
    if (status != UCS_OK) {
        die("ucp_mem_map", status);
    }
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
    status = ucp_mem_query(s->memh, &attr);
    if (status != UCS_OK) {
        die("ucp_mem_query", status);
    }
    s->buf    = attr.address;
    s->length = length;
    memset(s->buf, 0x5a, length);
}

static void side_fini(rb_side_t *s)
{
    ucp_mem_unmap(s->context, s->memh);
    ucp_worker_destroy(s->worker);
    ucp_cleanup(s->context);
}

/* the target: publish the buffer, progress until told to stop */
static int run_target(int fd, size_t length, const char *env)
{
    ucp_address_t *addr;
    size_t addr_len, rkey_len;
    void *rkey_buf;
    uint64_t vaddr;
    ucs_status_t status;
    rb_side_t s;
    unsigned n = 0;
    char c;

    put_env(env);
    side_init(&s, length);
    status = ucp_worker_get_address(s.worker, &addr, &addr_len);
    if (status != UCS_OK) {
        die("ucp_worker_get_address", status);
    }
    status = ucp_rkey_pack(s.context, s.memh, &rkey_buf, &rkey_len);
    if (status != UCS_OK) {
        die("ucp_rkey_pack", status);
    }
    vaddr = (uintptr_t)s.buf;
    send_blob(fd, addr, addr_len);
    send_blob(fd, rkey_buf, rkey_len);
    send_all(fd, &vaddr, sizeof(vaddr));
    ucp_rkey_buffer_release(rkey_buf);
    ucp_worker_release_address(s.worker, addr);

    /* progress until the initiator writes a byte (or goes away) */
    for (;;) {
        ucp_worker_progress(s.worker);
        if ((++n % 256) == 0) {
            struct pollfd pfd = {fd, POLLIN, 0};
            if (poll(&pfd, 1, 0) > 0) {
                break;
            }
        }
    }
    if (read(fd, &c, 1) == 1) {
        send_all(fd, &c, 1); /* stays until the initiator is done with us */
        recv_all(fd, &c, 1);
    }
    side_fini(&s);
    return 0;
}

static int inflight;

/* frees the request here: a request freed while in flight gets no callback */
static void rb_done(void *request, ucs_status_t status, void *user_data)
{
    (void)user_data;
    ucp_request_free(request);
    if (status != UCS_OK) {
        fprintf(stderr, "rma_bench: operation failed: %s\n",
                ucs_status_string(status));
        exit(1);
    }
    --inflight;
}

static void wait_request(ucp_worker_h worker, ucs_status_ptr_t req,
                         const char *what)
{
    ucs_status_t status;

    if (req == NULL) {
        return;
    }
    if (UCS_PTR_IS_ERR(req)) {
        die(what, UCS_PTR_STATUS(req));
    }
    do {
        ucp_worker_progress(worker);
        status = ucp_request_check_status(req);
    } while (status == UCS_INPROGRESS);
    ucp_request_free(req);
    if (status != UCS_OK) {
        die(what, status);
    }
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* n operations of size bytes, at most window in flight, then a flush */
static double run_ops(rb_side_t *s, ucp_ep_h ep, ucp_rkey_h rkey,
                      uint64_t vaddr, int is_put, size_t size, long n,
                      int window)
{
    ucp_request_param_t param = {0};
    ucs_status_ptr_t req;
    double t0;
    long i;

    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
    param.cb.send      = rb_done;
    t0 = now_s();
    for (i = 0; i < n; ++i) {
        while (inflight >= window) {
            ucp_worker_progress(s->worker);
        }
        req = is_put ? ucp_put_nbx(ep, s->buf, size, vaddr, rkey, &param) :
                       ucp_get_nbx(ep, s->buf, size, vaddr, rkey, &param);
        if (UCS_PTR_IS_ERR(req)) {
            die(is_put ? "ucp_put_nbx" : "ucp_get_nbx", UCS_PTR_STATUS(req));
        }
        if (req != NULL) {
            ++inflight;
        }
    }
    while (inflight > 0) {
        ucp_worker_progress(s->worker);
    }
    param.op_attr_mask = 0;
    wait_request(s->worker, ucp_ep_flush_nbx(ep, &param), "ucp_ep_flush_nbx");
    return now_s() - t0;
}

/* the buffer holds max bytes, the largest of sizes */
static int run_initiator(int fd, const char *op, const size_t *sizes,
                         int nsizes, size_t max, long iters, int window,
                         const char *env)
{
    ucp_ep_params_t eparams = {0};
    void *addr, *rkey_buf;
    size_t addr_len, rkey_len;
    ucp_request_param_t param = {0};
    ucs_status_t status;
    uint64_t vaddr;
    ucp_rkey_h rkey;
    rb_side_t s;
    ucp_ep_h ep;
    int is_put = !strcmp(op, "put"), i;
    long n;
    double t;
    char c = 'x';

    put_env(env);
    side_init(&s, max);
    addr     = recv_blob(fd, &addr_len);
    rkey_buf = recv_blob(fd, &rkey_len);
    recv_all(fd, &vaddr, sizeof(vaddr));

    eparams.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    eparams.address    = addr;
    status = ucp_ep_create(s.worker, &eparams, &ep);
    if (status != UCS_OK) {
        die("ucp_ep_create", status);
    }
    status = ucp_ep_rkey_unpack(ep, rkey_buf, &rkey);
    if (status != UCS_OK) {
        die("ucp_ep_rkey_unpack", status);
    }

    for (i = 0; i < nsizes; ++i) {
        n = iters > 0 ? iters : (long)((256ul << 20) / sizes[i]);
        n = (n < 20) ? 20 : n;
        run_ops(&s, ep, rkey, vaddr, is_put, sizes[i], n / 10 + 2, window);
        t = run_ops(&s, ep, rkey, vaddr, is_put, sizes[i], n, window);
        printf("%s,%zu,%.6g,MB/s,higher\n", op, sizes[i],
               (double)sizes[i] * n / t / MBYTE);
        fflush(stdout);
    }

    ucp_rkey_destroy(rkey);
    param.op_attr_mask = 0;
    wait_request(s.worker, ucp_ep_close_nbx(ep, &param), "ucp_ep_close_nbx");
    send_all(fd, &c, 1);   /* the target stops progressing */
    recv_all(fd, &c, 1);
    side_fini(&s);
    send_all(fd, &c, 1);   /* and may go */
    free(addr);
    free(rkey_buf);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: rma_bench [--op put|get] [--sizes LIST] [--iters N] [--window W]\n"
            "                 [--target-env \"VAR=VALUE ...\"] [--initiator-env \"...\"]\n"
            "\n"
            "UCP put or get bandwidth from a forked initiator to a target process that\n"
            "keeps progressing until the initiator is done.  Prints\n"
            "<op>,<size>,<MB/s>,MB/s,higher per size.\n"
            "\n"
            "  --op OP              put or get (default put)\n"
            "  --sizes LIST         sizes, k/M suffixes (default 1M)\n"
            "  --iters N            operations per size (default 256 MiB worth, at least 20)\n"
            "  --window W           operations in flight (default 1)\n"
            "  --target-env S       VAR=VALUE words for the target's environment\n"
            "  --initiator-env S    VAR=VALUE words for the initiator's environment\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"op", required_argument, NULL, 'o'},
        {"sizes", required_argument, NULL, 's'},
        {"iters", required_argument, NULL, 'n'},
        {"window", required_argument, NULL, 'w'},
        {"target-env", required_argument, NULL, 't'},
        {"initiator-env", required_argument, NULL, 'i'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}
    };
    const char *op = "put", *tenv = NULL, *ienv = NULL;
    size_t sizes[MAX_SIZES] = {1u << 20};
    int nsizes = 1, window = 1, c, sv[2], st, rc, i;
    size_t max = 0;
    long iters = 0;
    pid_t pid;

    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': op = optarg; break;
        case 's': nsizes = parse_sizes(optarg, sizes); break;
        case 'n': iters = strtol(optarg, NULL, 0); break;
        case 'w': window = atoi(optarg); break;
        case 't': tenv = optarg; break;
        case 'i': ienv = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "rma_bench: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (strcmp(op, "put") && strcmp(op, "get")) {
        fprintf(stderr, "rma_bench: --op must be put or get, not '%s'\n", op);
        return 2;
    }
    if (nsizes <= 0) {
        fprintf(stderr, "rma_bench: bad --sizes list\n");
        return 2;
    }
    if (!env_words_valid(tenv) || !env_words_valid(ienv)) {
        return 2;
    }
    if ((window < 1) || (iters < 0)) {
        fprintf(stderr, "rma_bench: --window must be at least 1, --iters not negative\n");
        return 2;
    }

    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
        die_errno("socketpair");
    }
    for (i = 0; i < nsizes; ++i) {
        max = (sizes[i] > max) ? sizes[i] : max; /* both buffers hold it */
    }
    pid = fork();
    if (pid < 0) {
        die_errno("fork");
    }
    if (pid == 0) {
        close(sv[0]);
        _exit(run_target(sv[1], max, tenv) ? 1 : 0);
    }
    close(sv[1]);
    rc = run_initiator(sv[0], op, sizes, nsizes, max, iters, window, ienv);
    if ((waitpid(pid, &st, 0) != pid) || !WIFEXITED(st) || WEXITSTATUS(st)) {
        fprintf(stderr, "rma_bench: the target process failed\n");
        return 1;
    }
    return rc;
}
