/*
 * coll_ucp_test - one rank of a job without MPI: bootstrap over UCP
 * (cxl_coll_ucp_bootstrap: TCP rendezvous at rank 0, endpoints over
 * UCX_TLS=cxl), create a collectives team with the UCP out-of-band
 * allgather, run the nine collectives with data that changes every call,
 * checked against values computed here, destroy.  Launched N times by
 * test/coll/run-coll-ucp.sh, one process per rank.
 *
 * Usage: coll_ucp_test --rank R --size N --rendezvous HOST:PORT [options]
 *   --timeout S      of the bootstrap and of every oob allgather (default 20)
 *   --scratch DIR    barrier check: markers DIR/b-ITER-RANK (default: none,
 *                    the barrier is then only checked for its status)
 *   --iters K        rounds over all collectives (default 2)
 *   --expect WHAT    ok (default); bootstrap-fail: the bootstrap must fail;
 *                    not-same-pool: team creation must fail with
 *                    CXL_COLL_ERR_NOT_SAME_POOL; team-fail: team creation
 *                    must fail (any error)
 *   --leave          leave right after the bootstrap, as a crash would
 *                    (_exit, no endpoint closed, no team)
 *   --stall S        after the bootstrap sleep S seconds (alive, no
 *                    progress, no team), then clean up and leave
 *   --late HOST:PORT (2 ranks) after the bootstrap, an allgather that rank
 *                    1 joins only after rank 0 gave up on it (its message
 *                    comes late), then a second bootstrap at HOST:PORT on
 *                    the same worker and prefix, whose allgather must get
 *                    its own blocks, not the late one
 *   --bad-input      first check that bad arguments of the helper's API
 *                    give CXL_COLL_ERR_INVAL and create nothing
 *   --demo           instead of the checks: per collective one line of what
 *                    ran (CXL_COLL_LOG) and the average latency of a
 *                    short loop at 8 B, 256 B, 4 KiB and 256 KiB (max over
 *                    ranks)
 * Rank 0 given port 0 prints "# rendezvous port P" once it listens.
 * Output: "ok ..." / "FAIL ...: ..." lines, '#' information, last line
 * "coll-ucp rank R: N passed, N failed"; exit status 0 only without
 * failures.
 */
#define _GNU_SOURCE
#include <ucx_cxl/coll_ucp.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NCOUNTS 5
static const size_t g_counts[NCOUNTS] = {0, 1, 13, 4099, 300001};

static struct {
    int            rank;
    int            size;
    const char    *rendezvous;
    double         timeout;
    const char    *scratch;
    int            iters;
    const char    *expect;
    int            leave;
    double         stall;
    int            bad_input;
    int            demo;
    const char    *late;
    int            passed;
    int            failed;
    ucp_context_h  ctx;
    ucp_worker_h   worker;
} g = {.rank = -1, .timeout = 20, .iters = 2, .expect = "ok"};

static void check(int ok, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...)
{
    va_list ap;

    printf("%s rank %d: ", ok ? "ok" : "FAIL", g.rank);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    ok ? ++g.passed : ++g.failed;
}

static int summary(void)
{
    printf("coll-ucp rank %d: %d passed, %d failed\n", g.rank, g.passed,
           g.failed);
    fflush(stdout);
    return g.failed ? 1 : 0;
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);

    if (p == NULL) {
        fprintf(stderr, "coll_ucp_test: out of memory (%zu bytes)\n", n);
        exit(2);
    }
    return p;
}

/* ---- inputs: every rank can compute every rank's data ---- */

static uint64_t gen(int rank, size_t i, unsigned seed)
{
    uint64_t x = (uint64_t)rank * 0x9E3779B97F4A7C15ull ^
                 (uint64_t)i * 0xBF58476D1CE4E5B9ull ^
                 (uint64_t)seed * 0x94D049BB133111EBull;

    x ^= x >> 31;
    x *= 0xD6E8FEB86659FD39ull;
    x ^= x >> 29;
    return x;
}

/* The reductions tested, with the reference arithmetic of this test. */
typedef struct {
    cxl_coll_dtype_t dtype;
    cxl_coll_op_t    op;
} combo_t;

static const combo_t g_combos[] = {
    {CXL_COLL_INT32,   CXL_COLL_SUM},
    {CXL_COLL_FLOAT64, CXL_COLL_MAX},
    {CXL_COLL_UINT16,  CXL_COLL_BXOR},
    {CXL_COLL_INT64,   CXL_COLL_MIN},
    {CXL_COLL_UINT8,   CXL_COLL_PROD},
};
#define NCOMBOS (sizeof(g_combos) / sizeof(g_combos[0]))

/* Element i of rank's input for dtype, stored at dst. */
static void input(cxl_coll_dtype_t dt, int rank, size_t i, unsigned seed,
                  void *dst)
{
    uint64_t x = gen(rank, i, seed);
    double d;

    switch (dt) {
    case CXL_COLL_FLOAT64:
        d = (double)((int64_t)(x % 20001) - 10000) * 0.25; /* exact */
        memcpy(dst, &d, 8);
        break;
    case CXL_COLL_INT64:
    case CXL_COLL_UINT64:
        memcpy(dst, &x, 8);
        break;
    case CXL_COLL_INT32:
    case CXL_COLL_UINT32:
        memcpy(dst, &x, 4);
        break;
    case CXL_COLL_INT16:
    case CXL_COLL_UINT16:
        memcpy(dst, &x, 2);
        break;
    default:
        *(uint8_t*)dst = (uint8_t)(x | 1); /* odd: products do not vanish */
        break;
    }
}

static void fill(cxl_coll_dtype_t dt, int rank, size_t base, size_t n,
                 unsigned seed, void *buf)
{
    size_t es = cxl_coll_dtype_size(dt), i;

    for (i = 0; i < n; ++i) {
        input(dt, rank, base + i, seed, (uint8_t*)buf + i * es);
    }
}

/* Element i of the reduction over all ranks (rank order), stored at dst. */
static void reduced(const combo_t *c, size_t i, unsigned seed, void *dst)
{
    uint64_t acc64 = 0, v64 = 0;
    uint32_t acc32 = 0, v32;
    uint16_t acc16 = 0, v16;
    uint8_t acc8 = 1, v[8];
    double accd = 0, vd;
    int64_t acci, vi;
    int r;

    for (r = 0; r < g.size; ++r) {
        input(c->dtype, r, i, seed, v);
        switch (c->dtype) {
        case CXL_COLL_INT32:
            memcpy(&v32, v, 4);
            acc32 += v32; /* wraps: unsigned */
            break;
        case CXL_COLL_FLOAT64:
            memcpy(&vd, v, 8);
            accd = ((r == 0) || (vd > accd)) ? vd : accd;
            break;
        case CXL_COLL_UINT16:
            memcpy(&v16, v, 2);
            acc16 ^= v16;
            break;
        case CXL_COLL_INT64:
            memcpy(&v64, v, 8);
            memcpy(&vi, &v64, 8);
            memcpy(&acci, &acc64, 8);
            if ((r == 0) || (vi < acci)) {
                acc64 = v64;
            }
            break;
        default:
            acc8 = (uint8_t)(acc8 * v[0]);
            break;
        }
    }
    switch (c->dtype) {
    case CXL_COLL_INT32:   memcpy(dst, &acc32, 4); break;
    case CXL_COLL_FLOAT64: memcpy(dst, &accd, 8);  break;
    case CXL_COLL_UINT16:  memcpy(dst, &acc16, 2); break;
    case CXL_COLL_INT64:   memcpy(dst, &acc64, 8); break;
    default:               *(uint8_t*)dst = acc8;  break;
    }
}

/* ---- one collective, checked ---- */

typedef struct {
    cxl_coll_team_t *team;
    cxl_coll_args_t  a;
    unsigned         seed;
    int              in_place;
    int              is_red;    /* a reduction: the op matters */
} call_t;

/* Run it; compare rbuf with want (bytes); 1 if right. */
static int run_check(call_t *c, const void *want, size_t bytes, void *rbuf)
{
    cxl_coll_status_t st = cxl_coll_run(c->team, &c->a);
    const uint8_t *w = want, *got = rbuf;
    size_t i;

    if (st != CXL_COLL_OK) {
        check(0, "%s count %zu %s%s: %s", cxl_coll_type_name(c->a.type),
              c->a.count, cxl_coll_dtype_name(c->a.dtype),
              c->in_place ? " in place" : "", cxl_coll_last_error());
        return 0;
    }
    for (i = 0; (i < bytes) && (w[i] == got[i]); ++i) {
    }
    if (i < bytes) {
        check(0, "%s count %zu %s%s root %d (seed %u): byte %zu of %zu is "
              "0x%02x, expected 0x%02x", cxl_coll_type_name(c->a.type),
              c->a.count, cxl_coll_dtype_name(c->a.dtype),
              c->in_place ? " in place" : "", c->a.root, c->seed, i, bytes,
              got[i], w[i]);
        return 0;
    }
    check(1, "%s count %zu %s%s%s%s root %d (seed %u), %zu bytes checked",
          cxl_coll_type_name(c->a.type), c->a.count,
          cxl_coll_dtype_name(c->a.dtype), c->is_red ? " " : "",
          c->is_red ? cxl_coll_op_name(c->a.op) : "",
          c->in_place ? " in place" : "", c->a.root, c->seed, bytes);
    return 1;
}

static void test_one(cxl_coll_team_t *team, cxl_coll_type_t type, size_t count,
                     int root, const combo_t *cb, unsigned seed, int in_place)
{
    cxl_coll_dtype_t dt = cb->dtype;
    size_t es = cxl_coll_dtype_size(dt), blk = count * es, n = g.size;
    uint8_t *s = xmalloc(n * blk), *r = xmalloc(n * blk);
    uint8_t *want = xmalloc(n * blk);
    size_t bytes = 0, i;
    call_t c;
    int k;

    memset(&c, 0, sizeof(c));
    c.team    = team;
    c.seed    = seed;
    c.a.type  = type;
    c.a.sbuf  = s;
    c.a.rbuf  = r;
    c.a.count = count;
    c.a.dtype = dt;
    c.a.op    = cb->op;
    c.a.root  = root;
    memset(r, 0xa5, n * blk);

    switch (type) {
    case CXL_COLL_BCAST:
        if (g.rank == root) {
            fill(dt, root, 0, count, seed, r);
        }
        fill(dt, root, 0, count, seed, want);
        bytes = blk;
        break;
    case CXL_COLL_REDUCE:
    case CXL_COLL_ALLREDUCE:
        fill(dt, g.rank, 0, count, seed, in_place ? r : s);
        if (in_place) {
            c.a.sbuf = CXL_COLL_IN_PLACE;
        }
        for (i = 0; i < count; ++i) {
            reduced(cb, i, seed, want + i * es);
        }
        bytes = ((type == CXL_COLL_ALLREDUCE) || (g.rank == root)) ? blk : 0;
        break;
    case CXL_COLL_REDUCE_SCATTER:
        fill(dt, g.rank, 0, n * count, seed, s);
        for (i = 0; i < count; ++i) {
            reduced(cb, g.rank * count + i, seed, want + i * es);
        }
        bytes = blk;
        break;
    case CXL_COLL_GATHER:
    case CXL_COLL_ALLGATHER:
        fill(dt, g.rank, 0, count, seed, s);
        for (k = 0; k < g.size; ++k) {
            fill(dt, k, 0, count, seed, want + k * blk);
        }
        bytes = ((type == CXL_COLL_ALLGATHER) || (g.rank == root)) ?
                n * blk : 0;
        break;
    case CXL_COLL_SCATTER:
        fill(dt, root, 0, n * count, seed, s); /* only the root's is read */
        fill(dt, root, g.rank * count, count, seed, want);
        bytes = blk;
        break;
    case CXL_COLL_ALLTOALL:
        fill(dt, g.rank, 0, n * count, seed, s);
        for (k = 0; k < g.size; ++k) {
            fill(dt, k, g.rank * count, count, seed, want + k * blk);
        }
        bytes = n * blk;
        break;
    default:
        break;
    }
    c.in_place = in_place;
    c.is_red   = (type == CXL_COLL_REDUCE) || (type == CXL_COLL_ALLREDUCE) ||
                 (type == CXL_COLL_REDUCE_SCATTER);
    run_check(&c, want, bytes, r);
    free(s);
    free(r);
    free(want);
}

/* The barrier: each rank leaves a marker, then must see everybody's. */
static void test_barrier(cxl_coll_team_t *team, unsigned it)
{
    char path[512];
    cxl_coll_status_t st;
    int k, fd, missing = -1;

    if (g.scratch != NULL) {
        /* the rank that goes last varies, and lags: a barrier that does
         * not wait lets the others miss its marker */
        if ((int)(it % g.size) == g.rank) {
            usleep(20000);
        }
        snprintf(path, sizeof(path), "%s/b-%u-%d", g.scratch, it, g.rank);
        fd = open(path, O_CREAT | O_WRONLY, 0600);
        if (fd >= 0) {
            close(fd);
        }
    }
    st = cxl_coll_barrier(team);
    for (k = 0; (g.scratch != NULL) && (k < g.size) && (missing < 0); ++k) {
        snprintf(path, sizeof(path), "%s/b-%u-%d", g.scratch, it, k);
        if (access(path, F_OK) != 0) {
            missing = k;
        }
    }
    if (missing >= 0) {
        check(0, "barrier %u: the marker of rank %d is missing after it", it,
              missing);
    } else {
        check(st == CXL_COLL_OK, "barrier %u%s: %s", it,
              g.scratch ? " (markers of every rank seen)" : "",
              (st == CXL_COLL_OK) ? "ok" : cxl_coll_last_error());
    }
}

static void run_tests(cxl_coll_team_t *team)
{
    static const cxl_coll_type_t types[] = {
        CXL_COLL_BCAST, CXL_COLL_REDUCE, CXL_COLL_ALLREDUCE, CXL_COLL_GATHER,
        CXL_COLL_SCATTER, CXL_COLL_ALLGATHER, CXL_COLL_REDUCE_SCATTER,
        CXL_COLL_ALLTOALL};
    static const combo_t move = {CXL_COLL_INT32, CXL_COLL_SUM};
    unsigned it, t, ci, seed = 1;
    const combo_t *cb;
    int root;

    for (it = 0; (int)it < g.iters; ++it) {
        test_barrier(team, it);
        for (t = 0; t < sizeof(types) / sizeof(types[0]); ++t) {
            for (ci = 0; ci < NCOUNTS; ++ci) {
                root = (int)((it + t + ci) % g.size);
                cb   = ((types[t] == CXL_COLL_REDUCE) ||
                        (types[t] == CXL_COLL_ALLREDUCE) ||
                        (types[t] == CXL_COLL_REDUCE_SCATTER)) ?
                       &g_combos[(it + ci + t) % NCOMBOS] : &move;
                test_one(team, types[t], g_counts[ci], root, cb, seed++, 0);
            }
        }
        /* the in-place form of allreduce, once per round */
        test_one(team, CXL_COLL_ALLREDUCE, 4099, 0, &g_combos[it % NCOMBOS],
                 seed++, 1);
    }
}

/* ---- demo ---- */

static const cxl_coll_type_t g_demo_types[] = {
    CXL_COLL_BARRIER, CXL_COLL_BCAST, CXL_COLL_REDUCE, CXL_COLL_ALLREDUCE,
    CXL_COLL_GATHER, CXL_COLL_SCATTER, CXL_COLL_ALLGATHER,
    CXL_COLL_REDUCE_SCATTER, CXL_COLL_ALLTOALL};
static const size_t g_demo_bytes[] = {8, 256, 4096, 262144};
#define NDEMO_TYPES (sizeof(g_demo_types) / sizeof(g_demo_types[0]))
#define NDEMO_SIZES (sizeof(g_demo_bytes) / sizeof(g_demo_bytes[0]))

static cxl_coll_status_t demo_call(cxl_coll_team_t *team,
                                   cxl_coll_type_t type, size_t bytes,
                                   void *s, void *r, unsigned seed)
{
    cxl_coll_args_t a;

    memset(&a, 0, sizeof(a));
    ((uint32_t*)s)[0] = seed; /* the data changes every call */
    a.type  = type;
    a.sbuf  = s;
    a.rbuf  = r;
    a.count = bytes / 4;
    a.dtype = CXL_COLL_INT32;
    a.op    = CXL_COLL_SUM;
    a.root  = 0;
    return cxl_coll_run(team, &a);
}

static cxl_coll_team_t *make_team(cxl_coll_ucp_oob_t *oob)
{
    cxl_coll_team_params_t tp;
    cxl_coll_team_t *team = NULL;
    cxl_coll_status_t st;

    cxl_coll_team_params_init(&tp);
    cxl_coll_ucp_team_params(oob, &tp);
    st = cxl_coll_team_create(&tp, &team);
    if (st != CXL_COLL_OK) {
        check(0, "team create: %s", cxl_coll_last_error());
        return NULL;
    }
    return team;
}

static void run_demo(cxl_coll_ucp_oob_t *oob)
{
    size_t maxb = g_demo_bytes[NDEMO_SIZES - 1] * g.size;
    uint8_t *s = xmalloc(maxb), *r = xmalloc(maxb);
    double lat[NDEMO_SIZES], t0, all;
    cxl_coll_team_t *team;
    unsigned t, z, k, iters, seed = 0;
    cxl_coll_status_t st = CXL_COLL_OK;
    cxl_coll_args_t a;

    memset(s, 1, maxb);
    /* pass 1: the library's line of what ran, once per collective/size */
    setenv("CXL_COLL_LOG", "y", 1);
    team = make_team(oob);
    unsetenv("CXL_COLL_LOG");
    for (t = 0; (team != NULL) && (t < NDEMO_TYPES); ++t) {
        for (z = 0; (z < NDEMO_SIZES) && (st == CXL_COLL_OK); ++z) {
            fflush(stdout);
            st = demo_call(team, g_demo_types[t], g_demo_bytes[z], s, r,
                           ++seed);
            fflush(stderr);
            if (g_demo_types[t] == CXL_COLL_BARRIER) {
                break;
            }
        }
    }
    if (team != NULL) {
        cxl_coll_team_destroy(team);
    }
    /* pass 2: latency loops on a team that does not log */
    team = (st == CXL_COLL_OK) ? make_team(oob) : NULL;
    if ((g.rank == 0) && (team != NULL)) {
        printf("# %d ranks, average latency of one call, max over ranks "
               "(%s)\n# %-15s", g.size, "int32, sum, root 0", "collective");
        for (z = 0; z < NDEMO_SIZES; ++z) {
            printf(" %9zu B", g_demo_bytes[z]);
        }
        printf("\n");
    }
    for (t = 0; (team != NULL) && (t < NDEMO_TYPES) && (st == CXL_COLL_OK);
         ++t) {
        for (z = 0; (z < NDEMO_SIZES) && (st == CXL_COLL_OK); ++z) {
            iters = (g_demo_bytes[z] > 65536) ? 50 : 300;
            for (k = 0; (k < 10) && (st == CXL_COLL_OK); ++k) {
                st = demo_call(team, g_demo_types[t], g_demo_bytes[z], s, r,
                               ++seed);
            }
            st = (st == CXL_COLL_OK) ? cxl_coll_barrier(team) : st;
            t0 = now();
            for (k = 0; (k < iters) && (st == CXL_COLL_OK); ++k) {
                st = demo_call(team, g_demo_types[t], g_demo_bytes[z], s, r,
                               ++seed);
            }
            lat[z] = (now() - t0) / iters * 1e6;
            memset(&a, 0, sizeof(a));
            a.type  = CXL_COLL_ALLREDUCE;
            a.sbuf  = &lat[z];
            a.rbuf  = &all;
            a.count = 1;
            a.dtype = CXL_COLL_FLOAT64;
            a.op    = CXL_COLL_MAX;
            st      = (st == CXL_COLL_OK) ? cxl_coll_run(team, &a) : st;
            lat[z]  = all;
            if (g_demo_types[t] == CXL_COLL_BARRIER) {
                break;
            }
        }
        if ((g.rank == 0) && (st == CXL_COLL_OK)) {
            printf("  %-15s", cxl_coll_type_name(g_demo_types[t]));
            for (k = 0; k < z + (g_demo_types[t] == CXL_COLL_BARRIER); ++k) {
                printf(" %8.2f us", lat[k]);
            }
            printf("\n");
        }
    }
    check((team != NULL) && (st == CXL_COLL_OK), "demo: %s",
          (st == CXL_COLL_OK) ? "every collective ran" : cxl_coll_last_error());
    if (team != NULL) {
        cxl_coll_team_destroy(team);
    }
    free(s);
    free(r);
}

/* ---- bad input: clear errors, nothing created ---- */

static void bad_boot(const char *what, int rank, int size,
                     const char *rendezvous, double timeout, unsigned prefix,
                     ucp_worker_h worker)
{
    cxl_coll_ucp_params_t p;
    cxl_coll_ucp_oob_t *oob = (cxl_coll_ucp_oob_t*)&p; /* must become NULL */
    cxl_coll_status_t st;

    cxl_coll_ucp_params_init(&p);
    p.worker     = worker;
    p.rank       = rank;
    p.size       = size;
    p.rendezvous = rendezvous;
    p.timeout    = timeout;
    p.tag_prefix = prefix;
    st = cxl_coll_ucp_bootstrap(&p, &oob);
    check((st == CXL_COLL_ERR_INVAL) && (oob == NULL), "bad input, %s: %s "
          "(%s)", what, cxl_coll_strerror(st), cxl_coll_ucp_last_error());
}

static void test_bad_input(void)
{
    cxl_coll_ucp_params_t p;
    cxl_coll_ucp_oob_t *oob = NULL, *oob2 = NULL;
    ucp_ep_h eps[2] = {NULL, NULL};
    cxl_coll_status_t st;
    char buf[8];
    int rc;

    st = cxl_coll_ucp_bootstrap(NULL, &oob);
    check(st == CXL_COLL_ERR_INVAL, "bad input, no params: %s",
          cxl_coll_strerror(st));
    bad_boot("no worker", 0, 2, "127.0.0.1:0", 1, 0, NULL);
    bad_boot("rank 2 of 2", 2, 2, "127.0.0.1:0", 1, 0, g.worker);
    bad_boot("size 0", 0, 0, "127.0.0.1:0", 1, 0, g.worker);
    bad_boot("no rendezvous for 2 ranks", 0, 2, NULL, 1, 0, g.worker);
    bad_boot("rendezvous without a port", 0, 2, "127.0.0.1", 1, 0, g.worker);
    bad_boot("rendezvous with an empty port", 0, 2, "127.0.0.1:", 1, 0,
             g.worker);
    bad_boot("rendezvous with port 70000", 0, 2, "127.0.0.1:70000", 1, 0,
             g.worker);
    bad_boot("rendezvous with port 12x", 0, 2, "127.0.0.1:12x", 1, 0,
             g.worker);
    bad_boot("rendezvous without a host", 0, 2, ":5000", 1, 0, g.worker);
    bad_boot("unclosed IPv6 bracket", 0, 2, "[::1:5000", 1, 0, g.worker);
    /* read as port 0 (the text after the bracket's colon was ignored) */
    bad_boot("IPv6 port 50:00", 0, 2, "[::1]:50:00", 1, 0, g.worker);
    bad_boot("port +5000", 0, 2, "127.0.0.1:+5000", 1, 0, g.worker);
    bad_boot("port ' 5000'", 0, 2, "127.0.0.1: 5000", 1, 0, g.worker);
    bad_boot("port 0 at rank 1", 1, 2, "127.0.0.1:0", 1, 0, g.worker);
    bad_boot("host that does not resolve", 1, 2, "no-such-host.invalid:5000",
             1, 0, g.worker);
    bad_boot("negative timeout", 0, 2, "127.0.0.1:0", -1, 0, g.worker);
    bad_boot("tag prefix over 16 bits", 0, 2, "127.0.0.1:0", 1, 0x10000,
             g.worker);

    cxl_coll_ucp_params_init(&p);
    p.worker = g.worker;
    p.rank   = 0;
    p.size   = 2;
    st = cxl_coll_ucp_oob_create(&p, &oob);
    check((st == CXL_COLL_ERR_INVAL) && (oob == NULL), "bad input, oob "
          "without eps: %s", cxl_coll_strerror(st));
    p.eps = eps;
    st = cxl_coll_ucp_oob_create(&p, &oob);
    check((st == CXL_COLL_ERR_INVAL) && (oob == NULL), "bad input, oob "
          "without an endpoint to rank 1: %s (%s)", cxl_coll_strerror(st),
          cxl_coll_ucp_last_error());
    rc = cxl_coll_ucp_allgather(NULL, buf, buf, sizeof(buf));
    check(rc == CXL_COLL_ERR_INVAL, "bad input, allgather without oob: %d",
          rc);

    /* one rank needs no endpoints: then a NULL buffer is the bad input */
    p.size = 1;
    p.eps  = eps;
    st = cxl_coll_ucp_oob_create(&p, &oob);
    check(st == CXL_COLL_OK, "oob of one rank: %s", cxl_coll_strerror(st));
    if (st == CXL_COLL_OK) {
        rc = cxl_coll_ucp_allgather(oob, NULL, buf, sizeof(buf));
        check(rc == CXL_COLL_ERR_INVAL, "bad input, allgather with no sbuf: "
              "%d", rc);
        rc = cxl_coll_ucp_allgather(oob, "abcdefg", buf, sizeof(buf));
        check((rc == 0) && !memcmp(buf, "abcdefg", 8), "allgather of one "
              "rank copies: %d", rc);
        /* a second live object on the worker with the same prefix would
         * take the first one's messages (a call returned another team's
         * block as success): refused; another prefix is fine, and the
         * prefix is free again once the first is destroyed */
        st = cxl_coll_ucp_oob_create(&p, &oob2);
        check((st == CXL_COLL_ERR_INVAL) && (oob2 == NULL) &&
              (strstr(cxl_coll_ucp_last_error(), "in use") != NULL),
              "a second oob on the worker with its prefix: %s (%s)",
              cxl_coll_strerror(st), cxl_coll_ucp_last_error());
        p.tag_prefix = CXL_COLL_UCP_TAG_PREFIX + 1;
        st = cxl_coll_ucp_oob_create(&p, &oob2);
        check(st == CXL_COLL_OK, "a second oob with another prefix: %s",
              cxl_coll_strerror(st));
        cxl_coll_ucp_oob_destroy(oob2);
        cxl_coll_ucp_oob_destroy(oob);
        p.tag_prefix = 0;
        st = cxl_coll_ucp_oob_create(&p, &oob2);
        check(st == CXL_COLL_OK, "the prefix again once its object is "
              "destroyed: %s", cxl_coll_strerror(st));
        cxl_coll_ucp_oob_destroy(oob2);
    }
}

/* ---- UCP and the job ---- */

static void listening(void *arg, int port)
{
    (void)arg;
    printf("# rendezvous port %d\n", port);
    fflush(stdout);
}

static int init_ucp(void)
{
    ucp_params_t params;
    ucp_worker_params_t wparams;
    ucs_status_t st;

    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features   = UCP_FEATURE_TAG;
    st = ucp_init(&params, NULL, &g.ctx);
    if (st != UCS_OK) {
        check(0, "ucp_init: %s (module preloaded, UCX_CXL_POOL a pool?)",
              ucs_status_string(st));
        return -1;
    }
    memset(&wparams, 0, sizeof(wparams));
    wparams.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
    st = ucp_worker_create(g.ctx, &wparams, &g.worker);
    if (st != UCS_OK) {
        check(0, "ucp_worker_create: %s", ucs_status_string(st));
        ucp_cleanup(g.ctx);
        return -1;
    }
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: coll_ucp_test --rank R --size N --rendezvous "
            "HOST:PORT [--timeout S] [--scratch DIR] [--iters K]\n"
            "       [--expect ok|bootstrap-fail|not-same-pool|team-fail] "
            "[--leave] [--stall S] [--late HOST:PORT] [--bad-input] "
            "[--demo]\n");
    exit(2);
}

static void parse(int argc, char **argv)
{
    int i;

    for (i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--leave")) {
            g.leave = 1;
        } else if (!strcmp(argv[i], "--bad-input")) {
            g.bad_input = 1;
        } else if (!strcmp(argv[i], "--demo")) {
            g.demo = 1;
        } else if (i + 1 >= argc) {
            usage();
        } else if (!strcmp(argv[i], "--rank")) {
            g.rank = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--size")) {
            g.size = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--rendezvous")) {
            g.rendezvous = argv[++i];
        } else if (!strcmp(argv[i], "--timeout")) {
            g.timeout = atof(argv[++i]);
        } else if (!strcmp(argv[i], "--scratch")) {
            g.scratch = argv[++i];
        } else if (!strcmp(argv[i], "--iters")) {
            g.iters = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--stall")) {
            g.stall = atof(argv[++i]);
        } else if (!strcmp(argv[i], "--expect")) {
            g.expect = argv[++i];
        } else if (!strcmp(argv[i], "--late")) {
            g.late = argv[++i];
        } else {
            usage();
        }
    }
    if ((g.rank < 0) || (g.size < 1) || (g.rank >= g.size) ||
        (g.late && (g.size != 2)) ||
        (strcmp(g.expect, "ok") && strcmp(g.expect, "bootstrap-fail") &&
         strcmp(g.expect, "not-same-pool") && strcmp(g.expect, "team-fail"))) {
        usage();
    }
}

/*
 * A late message of a failed call, and a new object on the same worker
 * and prefix (--late): rank 0's allgather on a times out while rank 1 has
 * not called; rank 1 calls once it did (and completes: rank 0's block was
 * queued for it), so its block reaches rank 0's worker after rank 0 gave
 * up.  Both then bootstrap again at rdv2; the allgather of the new object
 * is its call #1, as the failed one was: it must get rank 1's new block.
 */
static void test_late(cxl_coll_ucp_oob_t *a, const char *rdv2)
{
    char mine[8] = "", all[2][8];
    cxl_coll_ucp_params_t p;
    cxl_coll_ucp_oob_t *b = NULL;
    int rc, peer = 1 - g.rank;

    if (g.rank == 1) {
        usleep((useconds_t)((g.timeout + 0.5) * 1e6));
    }
    snprintf(mine, sizeof(mine), "A-%d", g.rank);
    rc = cxl_coll_ucp_allgather(a, mine, all, sizeof(mine));
    if (g.rank == 0) {
        check(rc != 0, "late: the allgather on the first object fails "
              "without rank 1 (%s)", rc ? cxl_coll_ucp_last_error() : "ok");
    } else {
        printf("# rank 1: its late allgather on the first object: %s\n",
               rc ? cxl_coll_ucp_last_error() : "completed");
    }
    cxl_coll_ucp_oob_destroy(a);

    cxl_coll_ucp_params_init(&p);
    p.worker     = g.worker;
    p.rank       = g.rank;
    p.size       = g.size;
    p.rendezvous = rdv2;
    p.timeout    = g.timeout;
    rc = cxl_coll_ucp_bootstrap(&p, &b);
    check(rc == CXL_COLL_OK, "late: a second bootstrap on the same worker "
          "and prefix: %s", rc ? cxl_coll_ucp_last_error() : "ok");
    if (rc != CXL_COLL_OK) {
        return;
    }
    snprintf(mine, sizeof(mine), "B-%d", g.rank);
    memset(all, 0, sizeof(all));
    rc = cxl_coll_ucp_allgather(b, mine, all, sizeof(mine));
    check((rc == 0) && (all[peer][0] == 'B') && (all[peer][2] == '0' + peer),
          "late: the second object's allgather gets rank %d's block of it "
          "(\"%.7s\", rc %d), not a late one of the first", peer, all[peer],
          rc);
    cxl_coll_ucp_oob_destroy(b);
}

int main(int argc, char **argv)
{
    cxl_coll_ucp_params_t p;
    cxl_coll_ucp_oob_t *oob = NULL;
    cxl_coll_team_params_t tp;
    cxl_coll_team_t *team = NULL;
    cxl_coll_status_t st;
    double t0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    parse(argc, argv);
    if (init_ucp() != 0) {
        return summary();
    }

    if (g.bad_input) {
        test_bad_input();
    }
    cxl_coll_ucp_params_init(&p);
    p.worker     = g.worker;
    p.rank       = g.rank;
    p.size       = g.size;
    p.rendezvous = g.rendezvous;
    p.timeout    = g.timeout;
    p.listening  = listening;
    t0 = now();
    st = cxl_coll_ucp_bootstrap(&p, &oob);
    if (!strcmp(g.expect, "bootstrap-fail")) {
        check(st != CXL_COLL_OK, "bootstrap fails: %s after %.1f s (%s)",
              cxl_coll_strerror(st), now() - t0, (st == CXL_COLL_OK) ? "" :
              cxl_coll_ucp_last_error());
        goto out;
    }
    check(st == CXL_COLL_OK, "bootstrap of %d ranks over UCP: %s", g.size,
          (st == CXL_COLL_OK) ? "ok" : cxl_coll_ucp_last_error());
    if (st != CXL_COLL_OK) {
        goto out;
    }
    if (g.late != NULL) {
        test_late(oob, g.late);
        oob = NULL;
        goto out;
    }
    if (g.stall > 0) {
        /* alive, but never makes the next call */
        printf("# rank %d stalls %.1f s after the bootstrap\n", g.rank,
               g.stall);
        fflush(stdout);
        usleep((useconds_t)(g.stall * 1e6));
        goto out;
    }
    if (g.leave) {
        /* not before the others are past their bootstrap: this is the
         * death between bootstrap and team creation */
        usleep(500000);
        printf("# rank %d leaves after the bootstrap, as if it crashed\n",
               g.rank);
        _exit(summary());
    }

    if (g.demo) {
        run_demo(oob);
        goto out;
    }

    cxl_coll_team_params_init(&tp);
    cxl_coll_ucp_team_params(oob, &tp);
    t0 = now();
    st = cxl_coll_team_create(&tp, &team);
    if (!strcmp(g.expect, "not-same-pool")) {
        check(st == CXL_COLL_ERR_NOT_SAME_POOL, "team on different pools "
              "fails with CXL_COLL_ERR_NOT_SAME_POOL: %s",
              (st == CXL_COLL_OK) ? "created" : cxl_coll_last_error());
    } else if (!strcmp(g.expect, "team-fail")) {
        check(st != CXL_COLL_OK, "team creation fails: %s after %.1f s (%s)",
              cxl_coll_strerror(st), now() - t0, (st == CXL_COLL_OK) ? "" :
              cxl_coll_ucp_last_error());
    } else {
        check(st == CXL_COLL_OK, "team create: %s", (st == CXL_COLL_OK) ?
              "ok" : cxl_coll_last_error());
        if (st == CXL_COLL_OK) {
            run_tests(team);
        }
    }
    if (st == CXL_COLL_OK) {
        cxl_coll_team_destroy(team);
    }

out:
    cxl_coll_ucp_oob_destroy(oob);
    ucp_worker_destroy(g.worker);
    ucp_cleanup(g.ctx);
    return summary();
}
