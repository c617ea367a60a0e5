/*
 * coll_bench.c - OSU-style benchmark of the MPI collectives, for
 * perftest/run-coll-bench.sh (our own code; it follows the semantics of
 * the OSU micro-benchmarks, not their source).
 *
 * For every collective and size: warm-up iterations, then timed
 * iterations; before every iteration an untimed MPI_Barrier (and, in the
 * data-varying mode, an untimed rewrite of the input), around the call
 * MPI_Wtime().  Every rank averages its own timed iterations; rank 0
 * collects these averages over point-to-point messages (not through the
 * collectives under test) and prints their minimum, mean and maximum.
 * The barrier is timed call by call without an extra barrier in between
 * (each timed barrier is the synchronisation of the next).
 *
 * Output: CSV on stdout (rank 0), a header line and then one line per
 * collective, size and repetition:
 *
 *   collective,bytes,np,rep,iters,warmup,min_us,avg_us,max_us,errors,
 *   cxl_calls,cxl_fallbacks
 *
 * bytes is the size argument: the whole buffer of bcast, reduce and
 * allreduce; one rank's block of gather, scatter, allgather,
 * reduce_scatter_block (the recvcount) and alltoall (one block per pair
 * of ranks), as MPI's count arguments mean it; 0 for barrier.  errors is
 * the number of wrong elements found by -c over all ranks and iterations
 * (0 without -c).  cxl_calls and cxl_fallbacks: over all ranks, the calls
 * of this cell (warm-up, timed and the untimed barriers) that coll/cxl's
 * library ran and that coll/cxl handed to the module it replaced (its
 * MPI_T counters coll_cxl_calls/coll_cxl_fallbacks); -1 without coll/cxl.
 * Progress and notes go to stderr.
 *
 * --nonblocking times MPI_I<collective> followed by MPI_Wait instead
 * (libnbc for the baselines, coll/cxl's requests for it).  --overlap US
 * puts US microseconds of computation (a loop that calls nothing of MPI)
 * between the two and reports the time beyond it (avg_us = the whole
 * minus US): the communication that the computation did not hide.
 *
 * The program measures and prints; it never judges the numbers.  Its exit
 * status is 0, 1 when -c found wrong results, 2 for bad usage.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

#define CB_TAG        7711
#define CB_POISON     0xa5
#define CB_MAX_ERRORS 5       /* mismatches printed per rank */

typedef enum {
    CB_BARRIER = 0,
    CB_BCAST,
    CB_REDUCE,
    CB_ALLREDUCE,
    CB_GATHER,
    CB_SCATTER,
    CB_ALLGATHER,
    CB_REDUCE_SCATTER,
    CB_ALLTOALL,
    CB_LAST
} cb_coll_t;

static const char *cb_coll_names[CB_LAST] = {
    "barrier", "bcast", "reduce", "allreduce", "gather", "scatter",
    "allgather", "reduce_scatter_block", "alltoall"
};

typedef enum {
    CB_DT_FLOAT = 0,
    CB_DT_DOUBLE,
    CB_DT_INT32,
    CB_DT_INT64,
    CB_DT_LAST
} cb_dtype_t;

static const char *cb_dtype_names[CB_DT_LAST] = {
    "float", "double", "int32", "int64"
};

typedef struct {
    int    colls[CB_LAST];      /* 1: measure this collective */
    size_t sizes[MAX_SIZES];
    int    nsizes;
    long   iters;               /* timed iterations; 0: OSU-like default */
    long   warmup;              /* -1: OSU-like default */
    long   min_iters;           /* lower bound when the budget cuts */
    double budget;              /* seconds per collective and size, 0: none */
    int    reps;
    int    rep_base;
    int    data_varying;
    int    check;
    int    root_shift;
    int    root;
    int    use_alloc_mem;
    int    nonblocking;         /* MPI_I<coll> + MPI_Wait */
    double overlap_us;          /* --overlap: computation between them */
    int    verbose;
    int    inject_error;        /* test only: corrupt one received byte */
    cb_dtype_t dtype;
} cb_opts_t;

static int rank, nprocs;

static MPI_Datatype cb_mpi_dtype(cb_dtype_t dt)
{
    switch (dt) {
    case CB_DT_DOUBLE: return MPI_DOUBLE;
    case CB_DT_INT32:  return MPI_INT32_T;
    case CB_DT_INT64:  return MPI_INT64_T;
    default:           return MPI_FLOAT;
    }
}

static size_t cb_dtype_size(cb_dtype_t dt)
{
    return (dt == CB_DT_DOUBLE || dt == CB_DT_INT64) ? 8 : 4;
}

static int cb_is_reduction(cb_coll_t c)
{
    return (c == CB_REDUCE) || (c == CB_ALLREDUCE) ||
           (c == CB_REDUCE_SCATTER);
}

static int cb_has_root(cb_coll_t c)
{
    return (c == CB_BCAST) || (c == CB_REDUCE) || (c == CB_GATHER) ||
           (c == CB_SCATTER);
}

/* ---- p2p helpers: statistics never go through the collectives measured */

/* every rank passes v; every rank gets the maximum */
static double cb_agree_max(double v)
{
    double x;

    if (rank == 0) {
        for (int r = 1; r < nprocs; ++r) {
            MPI_Recv(&x, 1, MPI_DOUBLE, r, CB_TAG, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            v = (x > v) ? x : v;
        }
        for (int r = 1; r < nprocs; ++r) {
            MPI_Send(&v, 1, MPI_DOUBLE, r, CB_TAG, MPI_COMM_WORLD);
        }
    } else {
        MPI_Send(&v, 1, MPI_DOUBLE, 0, CB_TAG, MPI_COMM_WORLD);
        MPI_Recv(&v, 1, MPI_DOUBLE, 0, CB_TAG, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    }
    return v;
}

/* rank 0 gets min/mean/max of v[0] and the sums of v[1..n-1] (a sum is
 * -1 when some rank passed -1: a counter it does not have) */
static void cb_collect(double *v, int n, double *vmin, double *vavg,
                       double *vmax)
{
    double x[4];

    if (rank != 0) {
        MPI_Send(v, n, MPI_DOUBLE, 0, CB_TAG, MPI_COMM_WORLD);
        return;
    }
    *vmin = *vmax = *vavg = v[0];
    for (int r = 1; r < nprocs; ++r) {
        MPI_Recv(x, n, MPI_DOUBLE, r, CB_TAG, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        *vmin  = (x[0] < *vmin) ? x[0] : *vmin;
        *vmax  = (x[0] > *vmax) ? x[0] : *vmax;
        *vavg += x[0];
        for (int i = 1; i < n; ++i) {
            v[i] = (v[i] < 0 || x[i] < 0) ? -1 : v[i] + x[i];
        }
    }
    *vavg /= nprocs;
}

/* ---- data patterns ------------------------------------------------------
 * Movement collectives (bytes): block b written by rank r in iteration seed
 * t is a sequence of 64-bit words base(r, b, t) + k * K, cheap to write and
 * to check, different for every rank, block and iteration.
 * Reductions: element i of rank r is (r + 1) * m(i, t) with m in 1..61, so
 * sums over up to a few hundred ranks are exact in float. */
#define CB_K 0x9e3779b97f4a7c15ULL
/* bcast/scatter data do not depend on which rank is the root: without
 * the data-varying mode a rank that becomes root sends what it received */
#define CB_ROOT_ID 0xfff

static uint64_t cb_base(int r, int b, uint64_t t)
{
    uint64_t x = (t + 1) * 0xbf58476d1ce4e5b9ULL;
    x ^= ((uint64_t)r << 40) ^ ((uint64_t)b << 20) ^ 0x94d049bb133111ebULL;
    return x ^ (x >> 29);
}

static uint8_t cb_byte_at(uint64_t base, size_t j)
{
    uint64_t w = base + (j / 8) * CB_K;
    return (uint8_t)(w >> (8 * (j % 8)));
}

static void cb_fill_block(void *buf, size_t len, uint64_t base)
{
    uint8_t *p = buf;
    size_t nw = len / 8, j;
    uint64_t w = base;

    for (j = 0; j < nw; ++j, w += CB_K) {
        memcpy(p + 8 * j, &w, 8);
    }
    for (j = 8 * nw; j < len; ++j) {
        p[j] = cb_byte_at(base, j);
    }
}

static long cb_check_block(const void *buf, size_t len, uint64_t base,
                           const char *what, int from, long *printed)
{
    const uint8_t *p = buf;
    long bad = 0;

    for (size_t j = 0; j < len; ++j) {
        uint8_t want = cb_byte_at(base, j);
        if (p[j] != want) {
            if ((*printed)++ < CB_MAX_ERRORS) {
                fprintf(stderr, "coll_bench: rank %d: %s: byte %zu of the "
                        "block from rank %d is 0x%02x, expected 0x%02x\n",
                        rank, what, j, from, p[j], want);
            }
            ++bad;
        }
    }
    return bad;
}

static unsigned cb_m0(uint64_t t, size_t first)
{
    return (unsigned)((first + t) % 61) + 1;
}

/* element values of rank r for elements first..first+n-1 */
static void cb_fill_red(void *buf, cb_dtype_t dt, size_t n, size_t first,
                        int r, uint64_t t)
{
    unsigned m = cb_m0(t, first);
    int64_t f = r + 1;

    for (size_t i = 0; i < n; ++i) {
        switch (dt) {
        case CB_DT_FLOAT:  ((float *)buf)[i]   = (float)(f * m); break;
        case CB_DT_DOUBLE: ((double *)buf)[i]  = (double)(f * m); break;
        case CB_DT_INT32:  ((int32_t *)buf)[i] = (int32_t)(f * m); break;
        default:           ((int64_t *)buf)[i] = f * m; break;
        }
        m = (m == 61) ? 1 : m + 1;
    }
}

static long cb_check_red(const void *buf, cb_dtype_t dt, size_t n,
                         size_t first, uint64_t t, const char *what,
                         long *printed)
{
    int64_t rsum = (int64_t)nprocs * (nprocs + 1) / 2;
    unsigned m = cb_m0(t, first);
    long bad = 0;
    double got;

    for (size_t i = 0; i < n; ++i) {
        int64_t want = rsum * m;
        switch (dt) {
        case CB_DT_FLOAT:  got = ((const float *)buf)[i]; break;
        case CB_DT_DOUBLE: got = ((const double *)buf)[i]; break;
        case CB_DT_INT32:  got = ((const int32_t *)buf)[i]; break;
        default:           got = (double)((const int64_t *)buf)[i]; break;
        }
        if (got != (double)want) {
            if ((*printed)++ < CB_MAX_ERRORS) {
                fprintf(stderr, "coll_bench: rank %d: %s: element %zu is "
                        "%.17g, expected %lld\n", rank, what, first + i, got,
                        (long long)want);
            }
            ++bad;
        }
        m = (m == 61) ? 1 : m + 1;
    }
    return bad;
}

/* ---- coll/cxl's counters (MPI_T performance variables) --------------------
 * coll/cxl counts the calls its library ran and those it handed to the
 * module it replaced; the CSV shows both per cell, so a cell measured with
 * coll/cxl selected but run by coll/tuned is visible.  Absent (-1) when
 * the component is not loaded. */
typedef enum {
    CB_CNT_CALLS = 0,
    CB_CNT_FALLBACKS,
    CB_CNT_LAST
} cb_counter_t;

static const char *cb_counter_names[CB_CNT_LAST] = {
    "coll_cxl_calls", "coll_cxl_fallbacks"
};

static MPI_T_pvar_session cb_session;
static MPI_T_pvar_handle  cb_handles[CB_CNT_LAST];
static int                cb_have[CB_CNT_LAST];

static void cb_counters_init(void)
{
    int provided, num, i, c;

    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS ||
        MPI_T_pvar_get_num(&num) != MPI_SUCCESS ||
        MPI_T_pvar_session_create(&cb_session) != MPI_SUCCESS) {
        return;
    }
    for (i = 0; i < num; ++i) {
        char name[256], desc[256];
        int nlen = sizeof(name), dlen = sizeof(desc), verb, vclass, bind;
        int ro, cont, atomic, count;
        MPI_Datatype dt;
        MPI_T_enum et;

        if (MPI_T_pvar_get_info(i, name, &nlen, &verb, &vclass, &dt, &et,
                                desc, &dlen, &bind, &ro, &cont,
                                &atomic) != MPI_SUCCESS ||
            dt != MPI_UNSIGNED_LONG_LONG || bind != MPI_T_BIND_NO_OBJECT) {
            continue;
        }
        for (c = 0; c < CB_CNT_LAST; ++c) {
            if (strcmp(name, cb_counter_names[c]) ||
                MPI_T_pvar_handle_alloc(cb_session, i, NULL, &cb_handles[c],
                                        &count) != MPI_SUCCESS ||
                count != 1) {
                continue;
            }
            cb_have[c] = cont ||
                         (MPI_T_pvar_start(cb_session, cb_handles[c]) ==
                          MPI_SUCCESS);
        }
    }
}

/* the counter's value, -1 when there is none */
static double cb_counter(cb_counter_t c)
{
    unsigned long long v;

    if (!cb_have[c] ||
        MPI_T_pvar_read(cb_session, cb_handles[c], &v) != MPI_SUCCESS) {
        return -1;
    }
    return (double)v;
}

/* ---- one collective ------------------------------------------------------ */

typedef struct {
    cb_coll_t  coll;
    size_t     bytes;           /* size argument */
    size_t     count;           /* elements (reductions) or bytes */
    char      *sbuf;
    char      *rbuf;
    const cb_opts_t *opts;
} cb_case_t;

static int cb_root(const cb_case_t *cs, long it)
{
    if (!cb_has_root(cs->coll)) {
        return 0;
    }
    return cs->opts->root_shift ? (int)(it % nprocs) : cs->opts->root;
}

/* write the input of iteration seed t (root: the iteration's root) */
static void cb_fill_input(const cb_case_t *cs, uint64_t t, int root)
{
    size_t b = cs->bytes;
    cb_dtype_t dt = cs->opts->dtype;

    switch (cs->coll) {
    case CB_BCAST:
        if (rank == root) {
            cb_fill_block(cs->rbuf, b, cb_base(CB_ROOT_ID, 0, t));
        }
        break;
    case CB_REDUCE:
    case CB_ALLREDUCE:
        cb_fill_red(cs->sbuf, dt, cs->count, 0, rank, t);
        break;
    case CB_REDUCE_SCATTER:
        cb_fill_red(cs->sbuf, dt, cs->count * nprocs, 0, rank, t);
        break;
    case CB_GATHER:
    case CB_ALLGATHER:
        cb_fill_block(cs->sbuf, b, cb_base(rank, 0, t));
        break;
    case CB_SCATTER:
        if (rank == root) {
            for (int d = 0; d < nprocs; ++d) {
                cb_fill_block(cs->sbuf + d * b, b,
                              cb_base(CB_ROOT_ID, d, t));
            }
        }
        break;
    case CB_ALLTOALL:
        for (int d = 0; d < nprocs; ++d) {
            cb_fill_block(cs->sbuf + d * b, b, cb_base(rank, d, t));
        }
        break;
    default:
        break;
    }
}

/* poison what the collective must overwrite (only with -c) */
static void cb_poison_output(const cb_case_t *cs, int root)
{
    size_t b = cs->bytes, esz = cb_dtype_size(cs->opts->dtype);

    switch (cs->coll) {
    case CB_BCAST:
        if (rank != root) {
            memset(cs->rbuf, CB_POISON, b);
        }
        break;
    case CB_REDUCE:
    case CB_ALLREDUCE:
        memset(cs->rbuf, CB_POISON, cs->count * esz);
        break;
    case CB_REDUCE_SCATTER:
        memset(cs->rbuf, CB_POISON, cs->count * esz);
        break;
    case CB_GATHER:
    case CB_ALLGATHER:
    case CB_ALLTOALL:
        memset(cs->rbuf, CB_POISON, b * nprocs);
        break;
    case CB_SCATTER:
        memset(cs->rbuf, CB_POISON, b);
        break;
    default:
        break;
    }
}

static long cb_check_output(const cb_case_t *cs, uint64_t t, int root,
                            long *printed)
{
    const char *name = cb_coll_names[cs->coll];
    cb_dtype_t dt = cs->opts->dtype;
    size_t b = cs->bytes;
    long bad = 0;

    switch (cs->coll) {
    case CB_BCAST:
        bad = cb_check_block(cs->rbuf, b, cb_base(CB_ROOT_ID, 0, t), name,
                             root, printed);
        break;
    case CB_REDUCE:
        if (rank == root) {
            bad = cb_check_red(cs->rbuf, dt, cs->count, 0, t, name, printed);
        }
        break;
    case CB_ALLREDUCE:
        bad = cb_check_red(cs->rbuf, dt, cs->count, 0, t, name, printed);
        break;
    case CB_REDUCE_SCATTER:
        bad = cb_check_red(cs->rbuf, dt, cs->count, (size_t)rank * cs->count,
                           t, name, printed);
        break;
    case CB_GATHER:
        if (rank == root) {
            for (int s = 0; s < nprocs; ++s) {
                bad += cb_check_block(cs->rbuf + s * b, b, cb_base(s, 0, t),
                                      name, s, printed);
            }
        }
        break;
    case CB_ALLGATHER:
        for (int s = 0; s < nprocs; ++s) {
            bad += cb_check_block(cs->rbuf + s * b, b, cb_base(s, 0, t), name,
                                  s, printed);
        }
        break;
    case CB_SCATTER:
        bad = cb_check_block(cs->rbuf, b, cb_base(CB_ROOT_ID, rank, t), name,
                             root, printed);
        break;
    case CB_ALLTOALL:
        for (int s = 0; s < nprocs; ++s) {
            bad += cb_check_block(cs->rbuf + s * b, b, cb_base(s, rank, t),
                                  name, s, printed);
        }
        break;
    default:
        break;
    }
    return bad;
}

static int cb_call_blocking(const cb_case_t *cs, int root)
{
    MPI_Datatype rt = cb_mpi_dtype(cs->opts->dtype);
    int n = (int)cs->count;
    MPI_Comm w = MPI_COMM_WORLD;

    switch (cs->coll) {
    case CB_BARRIER:
        return MPI_Barrier(w);
    case CB_BCAST:
        return MPI_Bcast(cs->rbuf, n, MPI_CHAR, root, w);
    case CB_REDUCE:
        return MPI_Reduce(cs->sbuf, cs->rbuf, n, rt, MPI_SUM, root, w);
    case CB_ALLREDUCE:
        return MPI_Allreduce(cs->sbuf, cs->rbuf, n, rt, MPI_SUM, w);
    case CB_GATHER:
        return MPI_Gather(cs->sbuf, n, MPI_CHAR, cs->rbuf, n, MPI_CHAR, root,
                          w);
    case CB_SCATTER:
        return MPI_Scatter(cs->sbuf, n, MPI_CHAR, cs->rbuf, n, MPI_CHAR, root,
                           w);
    case CB_ALLGATHER:
        return MPI_Allgather(cs->sbuf, n, MPI_CHAR, cs->rbuf, n, MPI_CHAR, w);
    case CB_REDUCE_SCATTER:
        return MPI_Reduce_scatter_block(cs->sbuf, cs->rbuf, n, rt, MPI_SUM, w);
    case CB_ALLTOALL:
        return MPI_Alltoall(cs->sbuf, n, MPI_CHAR, cs->rbuf, n, MPI_CHAR, w);
    default:
        return MPI_ERR_OTHER;
    }
}

/* --overlap: us of work that makes no MPI call */
static void cb_compute(double us)
{
    double t0 = MPI_Wtime();
    volatile unsigned long x = 0;

    while ((MPI_Wtime() - t0) * 1e6 < us) {
        x = x * 2862933555777941757ul + 3037000493ul;
    }
}

/* --nonblocking: the same call started with MPI_I<coll>, ended by
 * MPI_Wait; with --overlap, computation in between */
static int cb_call_nonblocking(const cb_case_t *cs, int root)
{
    MPI_Datatype rt = cb_mpi_dtype(cs->opts->dtype);
    int n = (int)cs->count, rc;
    MPI_Comm w = MPI_COMM_WORLD;
    MPI_Request req;

    switch (cs->coll) {
    case CB_BARRIER:
        rc = MPI_Ibarrier(w, &req);
        break;
    case CB_BCAST:
        rc = MPI_Ibcast(cs->rbuf, n, MPI_CHAR, root, w, &req);
        break;
    case CB_REDUCE:
        rc = MPI_Ireduce(cs->sbuf, cs->rbuf, n, rt, MPI_SUM, root, w, &req);
        break;
    case CB_ALLREDUCE:
        rc = MPI_Iallreduce(cs->sbuf, cs->rbuf, n, rt, MPI_SUM, w, &req);
        break;
    case CB_GATHER:
        rc = MPI_Igather(cs->sbuf, n, MPI_CHAR, cs->rbuf, n, MPI_CHAR, root,
                         w, &req);
        break;
    case CB_SCATTER:
        rc = MPI_Iscatter(cs->sbuf, n, MPI_CHAR, cs->rbuf, n, MPI_CHAR, root,
                          w, &req);
        break;
    case CB_ALLGATHER:
        rc = MPI_Iallgather(cs->sbuf, n, MPI_CHAR, cs->rbuf, n, MPI_CHAR, w,
                            &req);
        break;
    case CB_REDUCE_SCATTER:
        rc = MPI_Ireduce_scatter_block(cs->sbuf, cs->rbuf, n, rt, MPI_SUM, w,
                                       &req);
        break;
    case CB_ALLTOALL:
        rc = MPI_Ialltoall(cs->sbuf, n, MPI_CHAR, cs->rbuf, n, MPI_CHAR, w,
                           &req);
        break;
    default:
        return MPI_ERR_OTHER;
    }
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    if (cs->opts->overlap_us > 0) {
        cb_compute(cs->opts->overlap_us);
    }
    return MPI_Wait(&req, MPI_STATUS_IGNORE);
}

static int cb_call(const cb_case_t *cs, int root)
{
    return cs->opts->nonblocking ? cb_call_nonblocking(cs, root) :
                                   cb_call_blocking(cs, root);
}

/* One iteration: the untimed preparation, the timed call, the untimed
 * check.  Returns the call's time in seconds; *wall gets the whole. */
static double cb_iteration(const cb_case_t *cs, long it, uint64_t seed,
                           long *errs, long *printed, double *wall)
{
    const cb_opts_t *o = cs->opts;
    int root = cb_root(cs, it);
    double w0 = MPI_Wtime(), t0, t;

    if (cs->coll != CB_BARRIER) {
        if (o->data_varying) {
            cb_fill_input(cs, seed, root);
        }
        if (o->check) {
            cb_poison_output(cs, root);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    t0 = MPI_Wtime();
    if (cb_call(cs, root) != MPI_SUCCESS) {
        fprintf(stderr, "coll_bench: rank %d: %s failed\n", rank,
                cb_coll_names[cs->coll]);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* --overlap: what the computation did not hide */
    t = MPI_Wtime() - t0 - o->overlap_us * 1e-6;
    if (o->inject_error && rank == nprocs - 1 && cs->coll != CB_BARRIER &&
        !(cb_has_root(cs->coll) && cs->coll != CB_BCAST &&
          cs->coll != CB_SCATTER && rank != root)) {
        /* the last rank's output, where it has one: proves -c sees it */
        cs->rbuf[0] ^= 0x01;
    }
    if (o->check && cs->coll != CB_BARRIER) {
        *errs += cb_check_output(cs, o->data_varying ? seed : 0, root,
                                 printed);
    }
    *wall = MPI_Wtime() - w0;
    return t;
}

/* Measures one collective and size; prints its CSV line on rank 0 and
 * returns the number of wrong elements of all ranks (on every rank). */
static long cb_run_case(cb_case_t *cs, int rep)
{
    const cb_opts_t *o = cs->opts;
    int small = cs->bytes <= 8192;
    long iters = o->iters ? o->iters : (small ? 1000 : 100);
    long warm = (o->warmup > 0) ? o->warmup : (small ? 100 : 10);
    long errs = 0, printed = 0, it = 0, n, esum;
    double sum = 0, wall, wsum = 0, est, vmin = 0, vavg = 0, vmax = 0;
    double v[2 + CB_CNT_LAST], c0[CB_CNT_LAST], t_loop;
    int c;
    /* the seed differs per iteration, size and repetition */
    uint64_t seed = ((uint64_t)rep << 40) ^ ((uint64_t)cs->bytes << 8) ^
                    (uint64_t)cs->coll;

    if (!o->data_varying) {
        /* the same input every iteration (seed 0); every rank that will
         * be a root writes the root's part */
        cb_fill_input(cs, 0, o->root_shift ? rank : o->root);
    }

    for (c = 0; c < CB_CNT_LAST; ++c) {
        c0[c] = cb_counter((cb_counter_t)c);
    }
    /* two probe iterations (counted as warm-up; the first may pay for
     * connections and page faults) size the rest */
    cb_iteration(cs, it++, seed++, &errs, &printed, &wall);
    est = wall;
    cb_iteration(cs, it++, seed++, &errs, &printed, &wall);
    est = cb_agree_max((wall < est) ? wall : est);
    warm = (warm < 2) ? 2 : warm;
    if (o->budget > 0 && est * warm > o->budget * 0.2) {
        warm = (long)(o->budget * 0.2 / est);
        warm = (warm < 2) ? 2 : warm;
    }
    for (; it < warm; ++it) {
        cb_iteration(cs, it, seed++, &errs, &printed, &wall);
        wsum += wall;
    }
    if (warm > 2) {
        est = cb_agree_max(wsum / (double)(warm - 2));
    }
    if (o->budget > 0 && est * iters > o->budget * 0.8) {
        n = (long)(o->budget * 0.8 / est);
        n = (n < o->min_iters) ? o->min_iters : n;
        iters = (n < iters) ? n : iters;
    }
    t_loop = MPI_Wtime();
    for (n = 0; n < iters; ++n, ++it) {
        sum += cb_iteration(cs, it, seed++, &errs, &printed, &wall);
        /* iterations that got slower than the warm-up said (a busy
         * machine) stop the cell at twice its budget; every rank agrees
         * (untimed, every 16 iterations) */
        if (o->budget > 0 && n + 1 >= o->min_iters && (n + 1) % 16 == 0 &&
            cb_agree_max(MPI_Wtime() - t_loop) > 2 * o->budget) {
            iters = n + 1;
            break;
        }
    }
    v[0] = sum * 1e6 / (double)iters;
    v[1] = (double)errs;
    for (c = 0; c < CB_CNT_LAST; ++c) {
        double now = cb_counter((cb_counter_t)c);
        v[2 + c] = (now < 0 || c0[c] < 0) ? -1 : now - c0[c];
    }
    cb_collect(v, 2 + CB_CNT_LAST, &vmin, &vavg, &vmax);
    esum = (long)v[1];
    if (rank == 0) {
        printf("%s,%zu,%d,%d,%ld,%ld,%.3f,%.3f,%.3f,%ld,%.0f,%.0f\n",
               cb_coll_names[cs->coll], cs->bytes, nprocs, rep, iters, warm,
               vmin, vavg, vmax, esum, v[2 + CB_CNT_CALLS],
               v[2 + CB_CNT_FALLBACKS]);
        fflush(stdout);
        if (o->verbose) {
            fprintf(stderr, "coll_bench: rep %d %s %zu B: %.3f us avg "
                    "(%ld iterations)\n", rep, cb_coll_names[cs->coll],
                    cs->bytes, vavg, iters);
        }
        if (esum > 0) {
            fprintf(stderr, "coll_bench: %s %zu B: %ld wrong elements\n",
                    cb_coll_names[cs->coll], cs->bytes, esum);
        }
    }
    return (long)cb_agree_max(rank == 0 ? (double)esum : 0);
}

/* ---- options ------------------------------------------------------------ */

static void cb_usage(FILE *f)
{
    fprintf(f,
"Usage: mpirun -np N [MPI options] coll_bench [options]\n"
"\n"
"OSU-style latency of MPI collectives: per collective and size a warm-up,\n"
"then timed iterations, each preceded by an untimed MPI_Barrier (the\n"
"barrier itself is timed call by call); every rank averages its timed\n"
"iterations, rank 0 prints the minimum, mean and maximum of these averages\n"
"as CSV on stdout:\n"
"  collective,bytes,np,rep,iters,warmup,min_us,avg_us,max_us,errors,\n"
"  cxl_calls,cxl_fallbacks\n"
"bytes: the buffer of bcast/reduce/allreduce; one rank's block of gather,\n"
"scatter, allgather, reduce_scatter_block and alltoall; 0 for barrier.\n"
"cxl_calls/cxl_fallbacks: calls of the cell (all ranks, untimed barriers\n"
"included) run by coll/cxl's library / handed back to the module it\n"
"replaced (MPI_T counters of coll/cxl; -1 when it is not loaded).\n"
"\n"
"  --colls LIST     collectives, comma-separated (default all): barrier,\n"
"                   bcast, reduce, allreduce, gather, scatter, allgather,\n"
"                   reduce_scatter_block (or reduce_scatter), alltoall\n"
"  --sizes LIST     sizes in bytes, comma-separated with k/M suffixes, or\n"
"                   MIN:MAX for the powers of 2 between them (default\n"
"                   8,16,64,256,1K,4K,16K,64K,256K,1M,4M)\n"
"  --iters N        timed iterations per size (default 1000 up to 8 KiB,\n"
"                   100 above); the budget may lower it\n"
"  --warmup N       warm-up iterations (default 100 up to 8 KiB, 10 above;\n"
"                   at least 2, which also size the rest)\n"
"  --budget S       about S seconds of wall time per collective and size\n"
"                   (default 0.25; 0: no limit): warm-up and timed\n"
"                   iterations are cut to fit, never below --min-iters;\n"
"                   timed iterations stop at twice the budget\n"
"  --min-iters N    timed iterations at least (default 10)\n"
"  --reps N         repeat the whole matrix N times (default 1)\n"
"  --rep K          number of the first repetition in the CSV (default 1)\n"
"  --no-dv          do not rewrite the input before every iteration (the\n"
"                   default rewrites it: reused buffers stay in cache and a\n"
"                   non-coherent pool could hide a missing write-back)\n"
"  -c, --check      check every result against locally computed values\n"
"                   (untimed; wrong elements in the errors column, exit 1)\n"
"  --root R         root of bcast, reduce, gather, scatter (default 0)\n"
"  --root-shift     the root moves every iteration (iteration %% np)\n"
"  --dtype T        reduction type: float (default), double, int32, int64;\n"
"                   MPI_SUM; the others move MPI_CHAR\n"
"  --alloc-mem      buffers from MPI_Alloc_mem instead of malloc\n"
"  --nonblocking    time MPI_I<collective> + MPI_Wait instead of the\n"
"                   blocking call (the untimed barriers stay MPI_Barrier)\n"
"  --overlap US     with --nonblocking: US microseconds of computation\n"
"                   between start and MPI_Wait; the figures are the time\n"
"                   beyond it (the communication it did not hide)\n"
"  --inject-error   test only: after every call the last rank flips a bit\n"
"                   of its output (where it has one), so -c must report\n"
"                   errors and exit 1\n"
"  -v, --verbose    a progress line per collective and size on stderr\n"
"  -h, --help       this text\n");
}

static int cb_parse_colls(const char *s, int *colls)
{
    char buf[256], *tok, *save = NULL;
    int c;

    if (strlen(s) >= sizeof(buf)) {
        return -1;
    }
    strcpy(buf, s);
    memset(colls, 0, CB_LAST * sizeof(*colls));
    for (tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (!strcmp(tok, "all")) {
            for (c = 0; c < CB_LAST; ++c) {
                colls[c] = 1;
            }
            continue;
        }
        if (!strcmp(tok, "reduce_scatter")) {
            tok = "reduce_scatter_block";
        }
        for (c = 0; c < CB_LAST; ++c) {
            if (!strcmp(tok, cb_coll_names[c])) {
                colls[c] = 1;
                break;
            }
        }
        if (c == CB_LAST) {
            return -1;
        }
    }
    return 0;
}

/* "MIN:MAX" (powers of 2) or a list */
static int cb_parse_sizes(const char *s, size_t *sizes)
{
    size_t lo, hi, v;
    const char *colon = strchr(s, ':');
    char a[64];
    int n = 0;

    if (!colon) {
        return parse_sizes(s, sizes);
    }
    if ((size_t)(colon - s) >= sizeof(a)) {
        return -1;
    }
    memcpy(a, s, colon - s);
    a[colon - s] = '\0';
    if (parse_sizes(a, &lo) != 1 || parse_sizes(colon + 1, &hi) != 1 ||
        lo > hi) {
        return -1;
    }
    for (v = lo; v <= hi && n < MAX_SIZES; v *= 2) {
        sizes[n++] = v;
    }
    return (v <= hi) ? -1 : n;
}

static long cb_long(const char *s, long lo)
{
    char *end;
    long v = strtol(s, &end, 10);
    return (*s && !*end && v >= lo) ? v : lo - 1;
}

/* a number >= 0, else -1 (out of range for the checks below) */
static double cb_nonneg(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    return (!*end && v >= 0) ? v : -1;
}

/* 0: run, 1: exit 0 (help), 2: usage error */
static int cb_parse(int argc, char **argv, cb_opts_t *o)
{
    int i, c;

    memset(o, 0, sizeof(*o));
    for (c = 0; c < CB_LAST; ++c) {
        o->colls[c] = 1;
    }
    o->nsizes       = parse_sizes("8,16,64,256,1K,4K,16K,64K,256K,1M,4M",
                                  o->sizes);
    o->warmup       = -1;
    o->min_iters    = 10;
    o->budget       = 0.25;
    o->reps         = 1;
    o->rep_base     = 1;
    o->data_varying = 1;

    for (i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = (i + 1 < argc) ? argv[i + 1] : NULL;
        int used = 1;

        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            return 1;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--check")) {
            o->check = 1; used = 0;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            o->verbose = 1; used = 0;
        } else if (!strcmp(a, "--no-dv")) {
            o->data_varying = 0; used = 0;
        } else if (!strcmp(a, "--root-shift")) {
            o->root_shift = 1; used = 0;
        } else if (!strcmp(a, "--inject-error")) {
            o->inject_error = 1; used = 0;
        } else if (!strcmp(a, "--nonblocking")) {
            o->nonblocking = 1; used = 0;
        } else if (!strcmp(a, "--alloc-mem")) {
            o->use_alloc_mem = 1; used = 0;
        } else if (!v) {
            fprintf(stderr, "coll_bench: unknown option or missing value: "
                    "%s\n", a);
            return 2;
        } else if (!strcmp(a, "--colls")) {
            if (cb_parse_colls(v, o->colls) < 0) {
                fprintf(stderr, "coll_bench: bad --colls '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--sizes")) {
            o->nsizes = cb_parse_sizes(v, o->sizes);
            if (o->nsizes <= 0) {
                fprintf(stderr, "coll_bench: bad --sizes '%s' (at most %d "
                        "sizes)\n", v, MAX_SIZES);
                return 2;
            }
        } else if (!strcmp(a, "--iters")) {
            o->iters = cb_long(v, 1);
        } else if (!strcmp(a, "--warmup")) {
            o->warmup = cb_long(v, 1);
        } else if (!strcmp(a, "--min-iters")) {
            o->min_iters = cb_long(v, 1);
        } else if (!strcmp(a, "--reps")) {
            o->reps = (int)cb_long(v, 1);
        } else if (!strcmp(a, "--rep")) {
            o->rep_base = (int)cb_long(v, 0);
        } else if (!strcmp(a, "--root")) {
            o->root = (int)cb_long(v, 0);
        } else if (!strcmp(a, "--budget")) {
            o->budget = cb_nonneg(v);
        } else if (!strcmp(a, "--overlap")) {
            o->overlap_us = cb_nonneg(v);
        } else if (!strcmp(a, "--dtype")) {
            for (c = 0; c < CB_DT_LAST; ++c) {
                if (!strcmp(v, cb_dtype_names[c])) {
                    break;
                }
            }
            if (c == CB_DT_LAST) {
                fprintf(stderr, "coll_bench: bad --dtype '%s'\n", v);
                return 2;
            }
            o->dtype = (cb_dtype_t)c;
        } else {
            fprintf(stderr, "coll_bench: unknown option %s\n", a);
            return 2;
        }
        i += used;
    }
    if (o->iters < 0 || o->warmup < -1 || o->warmup == 0 ||
        o->min_iters < 1 || o->reps < 1 || o->rep_base < 0 || o->root < 0 ||
        o->budget < 0 || o->overlap_us < 0) {
        fprintf(stderr, "coll_bench: a numeric option is out of range "
                "(see --help)\n");
        return 2;
    }
    if ((o->overlap_us > 0) && !o->nonblocking) {
        fprintf(stderr, "coll_bench: --overlap needs --nonblocking\n");
        return 2;
    }
    return 0;
}

static void *cb_alloc(const cb_opts_t *o, size_t len)
{
    void *p = NULL;

    if (o->use_alloc_mem) {
        if (MPI_Alloc_mem((MPI_Aint)len, MPI_INFO_NULL, &p) != MPI_SUCCESS) {
            p = NULL;
        }
    } else if (posix_memalign(&p, 4096, len) != 0) {
        p = NULL;
    }
    if (p) {
        memset(p, 0, len); /* the pages exist before the first timing */
    }
    return p;
}

static void cb_free(const cb_opts_t *o, void *p)
{
    if (o->use_alloc_mem) {
        MPI_Free_mem(p);
    } else {
        free(p);
    }
}

int main(int argc, char **argv)
{
    cb_opts_t o;
    size_t max_size = 0, esz, buflen;
    char *sbuf, *rbuf;
    double t_start;
    long total_errors = 0;
    int ret;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    cb_counters_init();

    ret = cb_parse(argc, argv, &o);
    if (ret == 0 && o.root >= nprocs) {
        if (rank == 0) {
            fprintf(stderr, "coll_bench: --root %d needs more than %d "
                    "ranks\n", o.root, nprocs);
        }
        ret = 2;
    }
    if (ret != 0) {
        if (rank == 0) {
            cb_usage(ret == 1 ? stdout : stderr);
        }
        MPI_Finalize();
        return (ret == 1) ? 0 : 2;
    }

    /* one blocking collective before the first cell, in every
     * configuration: coll/cxl makes a communicator's team at its first
     * blocking collective (a non-blocking start must not wait for the
     * other ranks), so with --nonblocking the first cell would otherwise
     * run in the module below it */
    MPI_Barrier(MPI_COMM_WORLD);

    esz = cb_dtype_size(o.dtype);
    for (int i = 0; i < o.nsizes; ++i) {
        max_size = (o.sizes[i] > max_size) ? o.sizes[i] : max_size;
    }
    buflen = max_size * (size_t)nprocs;
    sbuf = cb_alloc(&o, buflen);
    rbuf = cb_alloc(&o, buflen);
    if (!sbuf || !rbuf) {
        fprintf(stderr, "coll_bench: rank %d: cannot allocate 2 x %zu "
                "bytes\n", rank, buflen);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0) {
        fprintf(stderr, "coll_bench: np %d, %s data, %s, reductions %s "
                "MPI_SUM, root %s, budget %g s per size%s\n", nprocs,
                o.data_varying ? "varying (rewritten every iteration)" :
                                 "constant",
                o.check ? "results checked (-c)" : "results not checked",
                cb_dtype_names[o.dtype],
                o.root_shift ? "shifting" : "fixed", o.budget,
                o.use_alloc_mem ? ", MPI_Alloc_mem buffers" : "");
        printf("collective,bytes,np,rep,iters,warmup,min_us,avg_us,max_us,"
               "errors,cxl_calls,cxl_fallbacks\n");
        fflush(stdout);
    }

    t_start = MPI_Wtime();
    for (int rep = o.rep_base; rep < o.rep_base + o.reps; ++rep) {
        for (int c = 0; c < CB_LAST; ++c) {
            cb_case_t cs = {.coll = (cb_coll_t)c, .sbuf = sbuf, .rbuf = rbuf,
                            .opts = &o};
            if (!o.colls[c]) {
                continue;
            }
            if (c == CB_BARRIER) {
                total_errors += cb_run_case(&cs, rep);
                continue;
            }
            for (int i = 0; i < o.nsizes; ++i) {
                cs.bytes = o.sizes[i];
                cs.count = cb_is_reduction(cs.coll) ? cs.bytes / esz :
                                                      cs.bytes;
                if (cb_is_reduction(cs.coll) &&
                    (cs.count == 0 || cs.bytes % esz != 0)) {
                    if (rank == 0 && rep == o.rep_base) {
                        fprintf(stderr, "coll_bench: %s: %zu B is not a "
                                "multiple of the %zu-byte %s, skipped\n",
                                cb_coll_names[c], cs.bytes, esz,
                                cb_dtype_names[o.dtype]);
                    }
                    continue;
                }
                total_errors += cb_run_case(&cs, rep);
            }
        }
    }
    if (rank == 0) {
        fprintf(stderr, "coll_bench: done in %.1f s%s\n",
                MPI_Wtime() - t_start,
                o.check ? (total_errors ? ", WRONG RESULTS (see above)" :
                                          ", all results checked and right") :
                          "");
    }

    cb_free(&o, rbuf);
    cb_free(&o, sbuf);
    MPI_T_finalize();
    MPI_Finalize();
    return (total_errors > 0) ? 1 : 0;
}
