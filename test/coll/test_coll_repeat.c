/*
 * test_coll_repeat - blocking calls that repeat the call before, or change
 * one of its arguments: cxl_coll_run() keeps the short path's last call
 * prepared and runs a call with the same arguments without checking them
 * again (coll_req.c), so every argument must make a call a new one.
 *
 * All ranks make the same sequence of calls on one team; each differs
 * from the one before in one field of cxl_coll_args_t (collective, sbuf,
 * rbuf, count, datatype, operation, root) or repeats it.  Inputs change
 * with every call; every rank checks its whole result buffer (the result
 * and the guard bytes after it) against values it computes itself.  A
 * call with a root out of range between two repeats must fail and leave
 * the team working.  np 2 and 3, hw and sw (the strict emulator, every
 * rank a host of its own).
 *
 * Ends with "test_coll_repeat: N passed, N failed".
 */
#include "coll_test_harness.h"

#include <ucx_cxl/coll.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RP_CMAX  8       /* elements per rank at most */
#define RP_GUARD 0xa5

/* one field changed per step; RP_NONE repeats the call before */
enum { RP_NONE, RP_TYPE, RP_SBUF, RP_RBUF, RP_COUNT, RP_DTYPE, RP_OP,
       RP_ROOT, RP_BADROOT };

typedef struct {
    int    what;   /* RP_* */
    int    value;  /* the new value: type, buffer 0-2, count, dtype, op, root */
} rp_step_t;

static const rp_step_t rp_steps[] = {
    {RP_NONE, 0},                        /* allreduce int32 sum of 4: */
    {RP_NONE, 0},                        /*   the same again */
    {RP_RBUF, 2},                        /* off the int32 alignment */
    {RP_NONE, 0},
    {RP_SBUF, 2},
    {RP_RBUF, 0},
    {RP_SBUF, 0},
    {RP_DTYPE, CXL_COLL_FLOAT32},        /* a float sum of int bits differs */
    {RP_OP, CXL_COLL_MAX},
    {RP_COUNT, 5},
    {RP_NONE, 0},
    {RP_RBUF, 1},
    {RP_SBUF, 1},
    {RP_NONE, 0},
    {RP_TYPE, CXL_COLL_REDUCE},
    {RP_ROOT, 1},
    {RP_NONE, 0},
    {RP_BADROOT, 0},                     /* refused; the team goes on */
    {RP_NONE, 0},
    {RP_TYPE, CXL_COLL_REDUCE_SCATTER},
    {RP_DTYPE, CXL_COLL_INT32},
    {RP_TYPE, CXL_COLL_ALLGATHER},
    {RP_NONE, 0},
    {RP_TYPE, CXL_COLL_ALLTOALL},
    {RP_COUNT, 2},
    {RP_RBUF, 0},
    {RP_TYPE, CXL_COLL_BCAST},
    {RP_ROOT, 0},
    {RP_TYPE, CXL_COLL_GATHER},
    {RP_TYPE, CXL_COLL_SCATTER},
    {RP_SBUF, 0},
    {RP_NONE, 0},
};
#define RP_NSTEPS (sizeof(rp_steps) / sizeof(rp_steps[0]))

/* input element e of rank q in call k: exact in int32 and float */
static double rp_in(unsigned k, int q, size_t e)
{
    return (double)(k * 1000 + (unsigned)q * 100 + e + 1) *
           (((k + (unsigned)q) & 1) ? -1 : 1);
}

/* element i of a buffer that may lie off its alignment */
static void rp_store(cxl_coll_dtype_t dt, void *p, size_t i, double v)
{
    float f   = (float)v;
    int32_t x = (int32_t)v;

    memcpy((uint8_t*)p + i * 4, (dt == CXL_COLL_FLOAT32) ? (void*)&f :
                                                          (void*)&x, 4);
}

static double rp_fold(const cxl_coll_args_t *a, unsigned k, int np,
                      size_t e)
{
    double x = rp_in(k, 0, e), y;
    int q;

    for (q = 1; q < np; ++q) {
        y = rp_in(k, q, e);
        x = (a->op == CXL_COLL_SUM) ? x + y : ((y > x) ? y : x);
    }
    return x;
}

/* Fill rank me's input of call k; write the expected result buffer. */
static size_t rp_expect(const cxl_coll_args_t *a, unsigned k, int me, int np,
                        void *in, void *exp)
{
    size_t c = a->count, e, out = 0;
    int q, result = 1;

    for (e = 0; e < (size_t)np * c; ++e) {
        rp_store(a->dtype, in, e, rp_in(k, me, e));
    }
    switch (a->type) {
    case CXL_COLL_ALLREDUCE:
    case CXL_COLL_REDUCE:
        result = (a->type == CXL_COLL_ALLREDUCE) || (me == a->root);
        for (e = 0; result && (e < c); ++e) {
            rp_store(a->dtype, exp, e, rp_fold(a, k, np, e));
        }
        out = result ? c : 0;
        break;
    case CXL_COLL_REDUCE_SCATTER:
        for (e = 0; e < c; ++e) {
            rp_store(a->dtype, exp, e, rp_fold(a, k, np, (size_t)me * c + e));
        }
        out = c;
        break;
    case CXL_COLL_ALLGATHER:
    case CXL_COLL_GATHER:
        result = (a->type == CXL_COLL_ALLGATHER) || (me == a->root);
        for (q = 0; result && (q < np); ++q) {
            for (e = 0; e < c; ++e) {
                rp_store(a->dtype, exp, (size_t)q * c + e, rp_in(k, q, e));
            }
        }
        out = result ? (size_t)np * c : 0;
        break;
    case CXL_COLL_ALLTOALL:
        for (q = 0; q < np; ++q) {
            for (e = 0; e < c; ++e) {
                rp_store(a->dtype, exp, (size_t)q * c + e,
                         rp_in(k, q, (size_t)me * c + e));
            }
        }
        out = (size_t)np * c;
        break;
    case CXL_COLL_SCATTER:
        for (e = 0; e < c; ++e) {
            rp_store(a->dtype, exp, e, rp_in(k, a->root, (size_t)me * c + e));
        }
        out = c;
        break;
    case CXL_COLL_BCAST: /* the root's input is its rbuf */
        for (e = 0; e < c; ++e) {
            rp_store(a->dtype, exp, e, rp_in(k, a->root, e));
        }
        out = c;
        break;
    default:
        break;
    }
    return out * 4; /* int32 and float32 */
}

static int rp_rank(cxl_th_rank_t *r)
{
    enum { LEN = CXL_TH_MAX_RANKS * RP_CMAX * 4 };
    /* buffer 2 lies one byte off the elements' alignment */
    static _Alignas(64) uint8_t smem[3][LEN + 64], rmem[3][LEN + 64];
    static uint8_t exp[LEN];
    uint8_t *sbuf[3] = {smem[0], smem[1], smem[2] + 1};
    uint8_t *rbuf[3] = {rmem[0], rmem[1], rmem[2] + 1};
    cxl_coll_args_t a = {.type = CXL_COLL_ALLREDUCE, .count = 4,
                         .dtype = CXL_COLL_INT32, .op = CXL_COLL_SUM};
    int sb = 0, rb = 0, fails = 0;
    cxl_coll_team_t *team;
    cxl_coll_status_t st;
    size_t n, i;
    unsigned k;

    if (cxl_th_team(r, NULL, &team) != CXL_COLL_OK) {
        fprintf(stderr, "rank %d: team: %s\n", r->rank, cxl_coll_last_error());
        return 1;
    }
    for (k = 0; k < RP_NSTEPS; ++k) {
        const rp_step_t *s = &rp_steps[k];
        cxl_coll_args_t bad;

        switch (s->what) {
        case RP_TYPE:  a.type  = (cxl_coll_type_t)s->value; break;
        case RP_SBUF:  sb      = s->value; break;
        case RP_RBUF:  rb      = s->value; break;
        case RP_COUNT: a.count = (size_t)s->value; break;
        case RP_DTYPE: a.dtype = (cxl_coll_dtype_t)s->value; break;
        case RP_OP:    a.op    = (cxl_coll_op_t)s->value; break;
        case RP_ROOT:  a.root  = s->value; break;
        case RP_BADROOT:
            bad      = a;
            bad.root = r->size;
            st = cxl_coll_run(team, &bad);
            if (st != CXL_COLL_ERR_INVAL) {
                fprintf(stderr, "rank %d step %u: root %d of %d: %s, not "
                        "invalid argument\n", r->rank, k, bad.root, r->size,
                        cxl_coll_strerror(st));
                fails++;
            }
            continue;
        default: break;
        }
        a.sbuf = sbuf[sb]; /* bcast: unused, but part of the call */
        a.rbuf = rbuf[rb];
        memset(rbuf[rb], RP_GUARD, LEN);
        n = rp_expect(&a, k, r->rank, r->size, sbuf[sb], exp);
        if ((a.type == CXL_COLL_BCAST) && (r->rank == a.root)) {
            memcpy(rbuf[rb], exp, n);
        }
        st = cxl_coll_run(team, &a);
        if (st != CXL_COLL_OK) {
            fprintf(stderr, "rank %d step %u (%s): %s\n", r->rank, k,
                    cxl_coll_type_name(a.type), cxl_coll_last_error());
            fails++;
            break;
        }
        for (i = 0; i < LEN; ++i) {
            if (rbuf[rb][i] != ((i < n) ? exp[i] : RP_GUARD)) {
                fprintf(stderr, "rank %d step %u: %s %s %s count %zu root "
                        "%d sbuf %d rbuf %d: byte %zu is 0x%02x, not 0x%02x\n",
                        r->rank, k, cxl_coll_type_name(a.type),
                        cxl_coll_dtype_name(a.dtype), cxl_coll_op_name(a.op),
                        a.count, a.root, sb, rb, i, rbuf[rb][i],
                        (i < n) ? exp[i] : RP_GUARD);
                fails++;
                break;
            }
        }
    }
    if ((fails == 0) && (cxl_coll_barrier(team) != CXL_COLL_OK)) {
        fails++;
    }
    cxl_coll_team_destroy(team);
    return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
    char path[256], spec[300];
    int sw, np, failed;

    (void)argv;
    if (argc != 1) {
        printf("usage: test_coll_repeat\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    unsetenv("CXL_COLL_TEST_SKIP_WB");
    unsetenv("CXL_COLL_POOL");
    for (sw = 0; sw < 2; ++sw) {
        if (cxl_th_pool_create(sw ? "rp-sw" : "rp-hw", sw, 64ull << 20, path,
                               sizeof(path), spec, sizeof(spec)) != 0) {
            cxl_th_check(0, "create the %s pool", sw ? "sw" : "hw");
            return cxl_th_summary("test_coll_repeat");
        }
        for (np = 2; np <= 3; ++np) {
            failed = cxl_th_run(np, spec, sw, rp_rank, NULL, 60, NULL);
            cxl_th_check(failed == 0, "%s np %d: %zu calls, each repeating "
                         "or changing one argument of the one before (%d of "
                         "%d ranks failed)", sw ? "sw" : "hw", np, RP_NSTEPS,
                         failed, np);
        }
        cxl_th_pool_destroy(path, sw);
    }
    return cxl_th_summary("test_coll_repeat");
}
