/*
 * test_coll_mismatch - calls that differ across the ranks of a team (an
 * erroneous program: counts, roots, collectives, datatypes or operations
 * not the same on every rank) end in CXL_COLL_ERR_MISMATCH, in bounded
 * time and without CXL_COLL_TIMEOUT, and write nothing into a result
 * buffer; calls that differ only where they may (the datatype of a data
 * movement of the same bytes, in-place on some ranks) still work.
 *
 * Before the check, such calls hung (each rank waiting for a publication
 * the other's call never makes) or returned success with data laid out
 * for another call.  Each case runs in fresh forked ranks with a fresh
 * team, in hw mode and in sw mode on the strict emulator (every rank a
 * host of its own); after the call every rank calls a barrier, which must
 * fail too (the team is unusable), and destroys the team.
 *
 * Ends with "test_coll_mismatch: N passed, N failed".
 */
#include "coll_test_harness.h"

#include <ucx_cxl/coll.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FAILF(...) do { fprintf(stderr, __VA_ARGS__); return 1; } while (0)
#define MM_MAX_RANKS 3
#define MM_GUARD     0xcd
#define MM_BOUND_S   10.0    /* every rank done within this */

typedef struct {
    cxl_coll_type_t  type;
    size_t           count;
    cxl_coll_dtype_t dtype;
    cxl_coll_op_t    op;
    int              root;
    int              in_place;
} mm_call_t;

/* what a rank's call must return */
enum {
    MM_MISMATCH,  /* CXL_COLL_ERR_MISMATCH, its result buffer untouched
                     but for its own block */
    MM_ANY_ERROR, /* an error, or success for a rank that needs nothing of
                     the others (a root that publishes and leaves) */
    MM_OK         /* success, right data: the calls agree */
};

typedef struct {
    const char *name;
    int         np;
    mm_call_t   call[MM_MAX_RANKS];
    int         expect[MM_MAX_RANKS];
} mm_case_t;

#define U8  CXL_COLL_UINT8
#define I32 CXL_COLL_INT32
#define BC  CXL_COLL_BCAST
#define AR  CXL_COLL_ALLREDUCE
#define SUM CXL_COLL_SUM
#define MIS MM_MISMATCH
#define ANY MM_ANY_ERROR

static const mm_case_t mm_cases[] = {
    /* a receiver that expects more or less than the root sends */
    {"bcast 8 B, receiver 16 B (both inline)", 2,
     {{BC, 8, U8, SUM, 0, 0}, {BC, 16, U8, SUM, 0, 0}}, {ANY, MIS}},
    {"bcast 16 B, receiver 8 B (both inline)", 2,
     {{BC, 16, U8, SUM, 0, 0}, {BC, 8, U8, SUM, 0, 0}}, {ANY, MIS}},
    {"bcast 100 B, receiver 200 B (flagged lines)", 2,
     {{BC, 100, U8, SUM, 0, 0}, {BC, 200, U8, SUM, 0, 0}}, {ANY, MIS}},
    {"bcast 200 B, receiver 100 B (flagged lines)", 2,
     {{BC, 200, U8, SUM, 0, 0}, {BC, 100, U8, SUM, 0, 0}}, {ANY, MIS}},
    {"bcast 8 B inline, receiver 100 B in flagged lines", 2,
     {{BC, 8, U8, SUM, 0, 0}, {BC, 100, U8, SUM, 0, 0}}, {ANY, MIS}},
    {"bcast 100 B in flagged lines, receiver 8 B inline", 2,
     {{BC, 100, U8, SUM, 0, 0}, {BC, 8, U8, SUM, 0, 0}}, {ANY, MIS}},
    {"bcast 3000 B, receiver 2000 B (small slot)", 2,
     {{BC, 3000, U8, SUM, 0, 0}, {BC, 2000, U8, SUM, 0, 0}}, {ANY, MIS}},
    {"bcast 64 KiB, receiver 128 KiB (data slot, requests)", 2,
     {{BC, 65536, U8, SUM, 0, 0}, {BC, 131072, U8, SUM, 0, 0}}, {ANY, MIS}},
    {"bcast of count 0 at the root, 8 B at the receiver", 2,
     {{BC, 0, U8, SUM, 0, 0}, {BC, 8, U8, SUM, 0, 0}}, {ANY, MIS}},
    /* both wait: nobody publishes what the other reads */
    {"bcast from root 1 on rank 0, from root 0 on rank 1", 2,
     {{BC, 8, U8, SUM, 1, 0}, {BC, 8, U8, SUM, 0, 0}}, {MIS, MIS}},
    {"gather to root 0 on rank 0, to root 1 on rank 1", 2,
     {{CXL_COLL_GATHER, 4, I32, SUM, 0, 0},
      {CXL_COLL_GATHER, 4, I32, SUM, 1, 0}}, {MIS, MIS}},
    /* all publish and read */
    {"allreduce sum on rank 0, max on rank 1", 2,
     {{AR, 4, I32, SUM, 0, 0}, {AR, 4, I32, CXL_COLL_MAX, 0, 0}},
     {MIS, MIS}},
    {"allreduce of int32 on rank 0, float32 on rank 1", 2,
     {{AR, 4, I32, SUM, 0, 0}, {AR, 4, CXL_COLL_FLOAT32, SUM, 0, 0}},
     {MIS, MIS}},
    {"barrier on rank 0, allreduce of 8 B on rank 1", 2,
     {{CXL_COLL_BARRIER, 0, U8, SUM, 0, 0}, {AR, 2, I32, SUM, 0, 0}},
     {MIS, MIS}},
    {"allreduce of 1 MiB on rank 0, 512 KiB on rank 1 (two-shot)", 2,
     {{AR, 262144, I32, SUM, 0, 0}, {AR, 131072, I32, SUM, 0, 0}},
     {MIS, MIS}},
    {"alltoall of 4 x int32 on ranks 0-1, 8 on rank 2", 3,
     {{CXL_COLL_ALLTOALL, 4, I32, SUM, 0, 0},
      {CXL_COLL_ALLTOALL, 4, I32, SUM, 0, 0},
      {CXL_COLL_ALLTOALL, 8, I32, SUM, 0, 0}}, {ANY, ANY, MIS}},
    /* differ only where they may */
    {"bcast of 8 x uint8 at the root, 1 x uint64 at the receiver", 2,
     {{BC, 8, U8, SUM, 0, 0}, {BC, 1, CXL_COLL_UINT64, SUM, 0, 0}},
     {MM_OK, MM_OK}},
    {"allgather in place on rank 1 only", 3,
     {{CXL_COLL_ALLGATHER, 5, I32, SUM, 0, 0},
      {CXL_COLL_ALLGATHER, 5, I32, SUM, 0, 1},
      {CXL_COLL_ALLGATHER, 5, I32, SUM, 0, 0}}, {MM_OK, MM_OK, MM_OK}},
};

#define MM_NCASES (sizeof(mm_cases) / sizeof(mm_cases[0]))

static double mm_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Bytes of the result buffer of rank me's call. */
static size_t mm_rlen(const mm_call_t *c, int me, int np, size_t es)
{
    switch (c->type) {
    case CXL_COLL_GATHER:
        return (me == c->root) ? c->count * es * np : 0;
    case CXL_COLL_ALLGATHER:
    case CXL_COLL_ALLTOALL:
        return c->count * es * np;
    case CXL_COLL_BARRIER:
        return 0;
    default:
        return c->count * es;
    }
}

/* Input element e of rank q: what a good call's result is made of. */
static uint8_t mm_in(int q, size_t e)
{
    return (uint8_t)(q * 37 + e * 11 + 1);
}

/* The result of a good call (the agreeing cases: bcast, allgather). */
static int mm_right(const mm_call_t *c, int np, const uint8_t *rb,
                    size_t es)
{
    size_t e, blk = c->count * es;
    int q;

    if (c->type == CXL_COLL_BCAST) {
        for (e = 0; e < blk; ++e) {
            if (rb[e] != mm_in(c->root, e)) {
                return 0;
            }
        }
        return 1;
    }
    for (q = 0; q < np; ++q) {
        for (e = 0; e < blk; ++e) {
            if (rb[q * blk + e] != mm_in(q, e)) {
                return 0;
            }
        }
    }
    return 1;
}

static int mm_rank(cxl_th_rank_t *r)
{
    const mm_case_t *k = r->arg;
    const mm_call_t *c = &k->call[r->rank];
    size_t es = cxl_coll_dtype_size(c->dtype), slen, rlen, e, own;
    cxl_coll_status_t st, st2;
    cxl_coll_team_t *team;
    cxl_coll_args_t a;
    uint8_t *sb, *rb;
    double t0, dt;
    int expect = k->expect[r->rank], touched = 0, agreed = 0;

    rlen = mm_rlen(c, r->rank, r->size, es);
    slen = (c->type == CXL_COLL_ALLTOALL) ? c->count * es * r->size :
           c->count * es;
    sb   = malloc(slen + 1);
    rb   = malloc(rlen + 1);
    if ((sb == NULL) || (rb == NULL)) {
        FAILF("rank %d: out of memory\n", r->rank);
    }
    for (e = 0; e < slen; ++e) {
        sb[e] = mm_in(r->rank, (c->type == CXL_COLL_ALLTOALL) ?
                      e % (c->count * es) : e);
    }
    memset(rb, MM_GUARD, rlen + 1);
    if (cxl_th_team(r, NULL, &team) != CXL_COLL_OK) {
        FAILF("rank %d: team: %s\n", r->rank, cxl_coll_last_error());
    }

    memset(&a, 0, sizeof(a));
    a.type  = c->type;
    a.count = c->count;
    a.dtype = c->dtype;
    a.op    = c->op;
    a.root  = c->root;
    a.sbuf  = sb;
    a.rbuf  = rb;
    if (c->type == CXL_COLL_BCAST) {
        a.sbuf = NULL;
        if (r->rank == c->root) {
            memcpy(rb, sb, rlen);
        }
    } else if (c->in_place && (c->type == CXL_COLL_ALLGATHER)) {
        memcpy(rb + r->rank * c->count * es, sb, c->count * es);
        a.sbuf = CXL_COLL_IN_PLACE;
    }
    t0 = mm_now();
    st = cxl_coll_run(team, &a);
    if (st != CXL_COLL_OK) {
        printf("# rank %d: %s: %s\n", r->rank, cxl_coll_strerror(st),
               cxl_coll_last_error());
    }
    st2 = cxl_coll_barrier(team);
    dt  = mm_now() - t0;
    cxl_coll_team_destroy(team);

    /* the own block may hold the own data (copied before any read);
     * nothing else may have changed */
    own = ((c->type == CXL_COLL_GATHER) || (c->type == CXL_COLL_ALLGATHER) ||
           (c->type == CXL_COLL_ALLTOALL)) ? r->rank * c->count * es : rlen;
    if ((c->type == CXL_COLL_BCAST) && (r->rank == c->root)) {
        touched = 0; /* the root's buffer is its input */
    } else {
        for (e = 0; e < rlen; ++e) {
            touched |= (rb[e] != MM_GUARD) &&
                        ((e < own) || (e >= own + c->count * es));
        }
    }
    touched |= (rb[rlen] != MM_GUARD);
    if (expect == MM_OK) {
        if ((st != CXL_COLL_OK) || (st2 != CXL_COLL_OK) ||
            !mm_right(c, r->size, rb, es)) {
            FAILF("rank %d: %s / barrier %s / result %s\n", r->rank,
                  cxl_coll_strerror(st), cxl_coll_strerror(st2),
                  mm_right(c, r->size, rb, es) ? "right" : "wrong");
        }
        agreed = 1;
    } else if ((expect == MM_MISMATCH) &&
               ((st != CXL_COLL_ERR_MISMATCH) || touched)) {
        FAILF("rank %d: the call gave %s, result buffer %s (want %s, "
              "untouched)\n", r->rank, cxl_coll_strerror(st),
              touched ? "written" : "untouched",
              cxl_coll_strerror(CXL_COLL_ERR_MISMATCH));
    }
    if (!agreed && (st2 == CXL_COLL_OK)) {
        FAILF("rank %d: the barrier after the call succeeded on a team "
              "whose ranks' calls differed\n", r->rank);
    }
    if (dt > MM_BOUND_S) {
        FAILF("rank %d: %.1f s (bound %.0f s)\n", r->rank, dt, MM_BOUND_S);
    }
    free(sb);
    free(rb);
    return 0;
}

int main(int argc, char **argv)
{
    char path[2][256], spec[2][300];
    unsigned wd = 60;
    int sw, failed;
    size_t i;

    if ((argc == 3) && !strcmp(argv[1], "--watchdog")) {
        wd = (unsigned)atoi(argv[2]); /* seconds per case */
    } else if (argc != 1) {
        printf("usage: test_coll_mismatch [--watchdog S]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    unsetenv("CXL_COLL_TIMEOUT"); /* the bound is the check's, not a timer's */
    unsetenv("CXL_COLL_TEST_SKIP_WB");
    unsetenv("CXL_COLL_POOL");
    for (sw = 0; sw < 2; ++sw) {
        if (cxl_th_pool_create(sw ? "mm-sw" : "mm-hw", sw, 128ull << 20,
                               path[sw], sizeof(path[sw]), spec[sw],
                               sizeof(spec[sw])) != 0) {
            cxl_th_check(0, "create the %s pool", sw ? "sw" : "hw");
            return cxl_th_summary("test_coll_mismatch");
        }
        for (i = 0; i < MM_NCASES; ++i) {
            failed = cxl_th_run(mm_cases[i].np, spec[sw], sw, mm_rank,
                                (void*)&mm_cases[i], wd, NULL);
            cxl_th_check(failed == 0, "%s: %s (%d of %d ranks failed)",
                         sw ? "sw" : "hw", mm_cases[i].name, failed,
                         mm_cases[i].np);
        }
        cxl_th_pool_destroy(path[sw], sw);
    }
    return cxl_th_summary("test_coll_mismatch");
}
