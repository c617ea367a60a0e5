/*
 * mpi_coll_test - the collectives coll/cxl takes, checked against values
 * computed locally, on any number of ranks (test/mpi/run-mpi-coll.sh runs
 * it at np 1..8, with coll/cxl and without it).
 *
 *   reductions   MPI_Allreduce, MPI_Reduce (every root), and
 *                MPI_Reduce_scatter_block x the predefined integer types
 *                (fixed-size and C types), float, double x SUM PROD MIN MAX
 *                BAND BOR BXOR (bitwise: integers) x counts 0, 1, 7, 1001
 *                and MPI_COLL_LARGE x in-place forms
 *   movements    MPI_Barrier, MPI_Bcast, MPI_Gather, MPI_Scatter,
 *                MPI_Allgather, MPI_Alltoall x MPI_BYTE, MPI_CHAR,
 *                MPI_UINT16_T, MPI_INT, MPI_DOUBLE and a non-contiguous
 *                vector type (on even ranks only: odd ranks describe the
 *                same bytes as MPI_INT, as MPI allows) x the same counts x
 *                roots x in-place forms; gaps of the vector layout and
 *                guard bytes behind every buffer must stay untouched
 *   fallback     a derived datatype (with a user operation: MPI allows
 *                predefined ones on predefined types only), a user
 *                operation on MPI_INT, MPI_LOR and MPI_MAXLOC: right answers
 *                through the previous module
 *   split        MPI_Comm_split into two halves (non-powers of two): a
 *                team per communicator, used alternately
 *   dup          MPI_Comm_dup (its own team) and an intercommunicator
 *                (declined: coll/inter's)
 *   progress     a 4 MiB MPI_Isend that completes only if a rank waiting
 *                in MPI_Barrier keeps point-to-point progressing
 *   rma          MPI_Fetch_and_op on the memory of a rank that waits in
 *                MPI_Barrier (the transport executes them in its
 *                progress): right sums, the time per operation printed
 *   op/avx       MPI_Allreduce(SUM) of 262144 MPI_INT8_T values whose sum
 *                wraps: prints "avx-check: wrapped|saturated|other";
 *                MPI_COLL_AVX=require makes anything but "wrapped" a failure
 *
 * MPI_COLL_ONLY=avx,split... runs only the sections named (barrier,
 * reductions, moves, fallbacks, split, dup, progress, rma, avx; and winbuf
 * and allocmem, run only when named: an MPI_Win_allocate buffer as MPI_Bcast's
 * root; MPI_Alloc_mem buffers for bcast, allgather, alltoall and
 * allreduce).
 *
 * Every call gets data derived from (rank, peer, index, call number), so
 * no two calls see the same bytes.  Which path ran is checked per call
 * with coll/cxl's MPI_T counters (coll_cxl_calls, coll_cxl_fallbacks):
 *
 *   MPI_COLL_EXPECT=cxl       every call above runs in the library, the
 *                             fallback calls in the previous module (calls
 *                             with count 0 Open MPI ends before any
 *                             component: none may count them)
 *   MPI_COLL_EXPECT=off       the component is not there (no counters)
 *   MPI_COLL_EXPECT=declined  it is there but took no communicator (no
 *                             team; no call reaches its library)
 *   MPI_COLL_THREAD=multiple  MPI_Init_thread with that level (funneled,
 *                             serialized, multiple)
 *   MPI_COLL_MIN_RANKS=2      the run's coll_cxl_min_ranks: smaller split
 *                             communicators are not coll/cxl's
 *
 * Every rank prints its first failures to stderr ("FAIL: rank R: CHECK:
 * WHAT", MPI_COLL_MAX_PRINT of them, default 5); rank 0 then prints
 * "mpi-coll: N checks, N failed" and "digest: HEX" (a hash of every result
 * of every rank, which must be the same with and without the component),
 * and "counters: calls N fallbacks N teams N" (sums over the ranks).
 * Open MPI 4.1.4 computes MPI_MIN/MPI_MAX of MPI_UNSIGNED_LONG as signed
 * (op/base): those results are checked only with coll/cxl; without it the
 * program counts them ("observed: N results ...") and leaves them out of
 * the digest in every mode.
 * Exit status 1 if a check failed.  MPI_COLL_TIMEOUT (default 300 s) ends
 * a hung job with the name of the running check.
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MC_PROG "mpi_coll_test"
#define MC_NAME "mpi-coll"
#define MC_ENV  "MPI_COLL_"
#include "mpi_check.h"

/* MPI_COLL_EXPECT: the run's mode */
enum { EXPECT_CXL, EXPECT_OFF, EXPECT_DECLINED, EXPECT_LAST };
static const char *expect_names[EXPECT_LAST] = {"cxl", "off", "declined"};
static int g_expect = EXPECT_CXL;

/* one call at a time here: the data of the running call (g_call) */
static uint64_t value(int src, int dst, size_t idx)
{
    return mc_value(g_call, src, dst, idx);
}

/* ------------------------------------------------------------------ */
/* MPI_T counters of coll/cxl                                          */

enum { CNT_CALLS, CNT_FALLBACKS, CNT_TEAMS, CNT_LAST };
static const char *cnt_names[CNT_LAST] = {"coll_cxl_calls",
                                          "coll_cxl_fallbacks",
                                          "coll_cxl_teams"};   /* a level: live teams */
static int g_have_pvars;      /* all of them: the component is loaded */

/* path a call must take */
enum { PATH_LIB, PATH_PREV, PATH_NONE };
static unsigned long long g_c0, g_f0;

static void path_begin(void)
{
    g_c0 = mc_pvar(CNT_CALLS);
    g_f0 = mc_pvar(CNT_FALLBACKS);
}

static void path_end(int path)
{
    unsigned long long dc = mc_pvar(CNT_CALLS) - g_c0;
    unsigned long long df = mc_pvar(CNT_FALLBACKS) - g_f0;

    ++g_checks;
    if (g_expect == EXPECT_DECLINED) {
        /* its entry points stay and hand every call on */
        if (dc) {
            mc_fail("coll/cxl's library ran %llu calls: expected none", dc);
        }
    } else if ((g_expect != EXPECT_CXL) || (path == PATH_NONE)) {
        if (dc || df) {
            mc_fail("coll/cxl counted %llu calls, %llu fallbacks: expected "
                    "none", dc, df);
        }
    } else if ((path == PATH_LIB) && ((dc != 1) || (df != 0))) {
        mc_fail("not run by the library: %llu library calls, %llu fallbacks",
                dc, df);
    } else if ((path == PATH_PREV) && ((dc != 0) || (df == 0))) {
        mc_fail("not handed to the previous module: %llu library calls, "
                "%llu fallbacks", dc, df);
    }
}

/* ------------------------------------------------------------------ */
/* reductions                                                          */

static mc_rtype_t rtypes[20];
static int        n_rtypes;
static mc_rop_t   rops[7];

static void rtypes_init(void)
{
#define RT(_dt, _kind, _ctype) \
    rtypes[n_rtypes++] = (mc_rtype_t){_dt, #_dt, _kind, sizeof(_ctype)}
    RT(MPI_INT8_T, 's', int8_t);        RT(MPI_UINT8_T, 'u', uint8_t);
    RT(MPI_INT16_T, 's', int16_t);      RT(MPI_UINT16_T, 'u', uint16_t);
    RT(MPI_INT32_T, 's', int32_t);      RT(MPI_UINT32_T, 'u', uint32_t);
    RT(MPI_INT64_T, 's', int64_t);      RT(MPI_UINT64_T, 'u', uint64_t);
    RT(MPI_SIGNED_CHAR, 's', signed char);
    RT(MPI_UNSIGNED_CHAR, 'u', unsigned char);
    RT(MPI_SHORT, 's', short);          RT(MPI_UNSIGNED_SHORT, 'u', unsigned short);
    RT(MPI_INT, 's', int);              RT(MPI_UNSIGNED, 'u', unsigned);
    RT(MPI_LONG, 's', long);            RT(MPI_UNSIGNED_LONG, 'u', unsigned long);
    RT(MPI_LONG_LONG, 's', long long);
    RT(MPI_UNSIGNED_LONG_LONG, 'u', unsigned long long);
    RT(MPI_FLOAT, 'f', float);          RT(MPI_DOUBLE, 'd', double);
#undef RT
    rops[0] = (mc_rop_t){MPI_SUM, "MPI_SUM", 0};
    rops[1] = (mc_rop_t){MPI_PROD, "MPI_PROD", 0};
    rops[2] = (mc_rop_t){MPI_MIN, "MPI_MIN", 0};
    rops[3] = (mc_rop_t){MPI_MAX, "MPI_MAX", 0};
    rops[4] = (mc_rop_t){MPI_BAND, "MPI_BAND", 1};
    rops[5] = (mc_rop_t){MPI_BOR, "MPI_BOR", 1};
    rops[6] = (mc_rop_t){MPI_BXOR, "MPI_BXOR", 1};
}

/* Results Open MPI 4.1.4's own operations get wrong (op/base computes
 * MPI_MIN/MPI_MAX of MPI_UNSIGNED_LONG as signed): without coll/cxl they
 * are observed (g_observed), not failed, and no mode puts them into the
 * digest. */
static int ompi_defect(const mc_rtype_t *t, const mc_rop_t *o)
{
    return (t->dt == MPI_UNSIGNED_LONG) &&
           ((o->op == MPI_MIN) || (o->op == MPI_MAX));
}

static void compare(const mc_rtype_t *t, const void *got, const void *expected,
                    size_t count, int observe_only, int add_digest)
{
    if (observe_only) {
        g_observed += (memcmp(got, expected, count * t->size) != 0);
        return;
    }
    mc_compare(t, got, expected, count, NULL, add_digest);
}

enum { R_ALLREDUCE, R_REDUCE, R_RSB };

static void test_reduction(int kind, const mc_rtype_t *t, const mc_rop_t *o,
                           size_t count, int root, int in_place)
{
    static const char *kn[] = {"MPI_Allreduce", "MPI_Reduce",
                               "MPI_Reduce_scatter_block"};
    size_t total = (kind == R_RSB) ? count * (size_t)g_size : count;
    size_t bytes = total * t->size;
    void *sbuf = mc_alloc_guarded(bytes), *rbuf, *exp;
    size_t rlen, first, n;
    int rc, is_root = (g_rank == root);

    ++g_call;
    snprintf(g_check, sizeof(g_check), "%s %s %s count %zu root %d%s",
             kn[kind], t->name, o->name, count, root,
             in_place ? " in place" : "");
    rlen = (kind == R_RSB) ? (in_place ? bytes : count * t->size) : bytes;
    rbuf = mc_alloc_guarded(rlen);
    mc_gen(t, o, g_call, g_rank, in_place ? rbuf : sbuf, 0, total);

    path_begin();
    if (kind == R_ALLREDUCE) {
        rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : sbuf, rbuf, (int)count,
                           t->dt, o->op, MPI_COMM_WORLD);
    } else if (kind == R_REDUCE) {
        rc = MPI_Reduce((in_place && is_root) ? MPI_IN_PLACE :
                        (in_place ? rbuf : sbuf), is_root ? rbuf : NULL,
                        (int)count, t->dt, o->op, root, MPI_COMM_WORLD);
    } else {
        rc = MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : sbuf, rbuf,
                                      (int)count, t->dt, o->op,
                                      MPI_COMM_WORLD);
    }
    /* Open MPI returns before the component for count 0 */
    path_end((count == 0) ? PATH_NONE : PATH_LIB);
    mc_mpi_ok(rc);

    first = (kind == R_RSB) ? (size_t)g_rank * count : 0;
    n     = count;
    if ((kind != R_REDUCE) || is_root) {
        exp = malloc(n * t->size + 1);
        mc_reference(t, o, g_call, g_size, exp, first, n);
        compare(t, rbuf, exp, n,
                ompi_defect(t, o) && (g_expect != EXPECT_CXL),
                !ompi_defect(t, o));
        free(exp);
    }
    mc_check_guards(rbuf, rlen, sbuf, bytes);
    free(sbuf);
    free(rbuf);
}

static void test_reductions(void)
{
    size_t counts[] = {0, 1, 7, 1001, g_large};
    int ti, oi, ci, root, ip;

    for (ti = 0; ti < n_rtypes; ++ti) {
        for (oi = 0; oi < 7; ++oi) {
            if (rops[oi].bitwise && (rtypes[ti].kind == 'f' ||
                                     rtypes[ti].kind == 'd')) {
                continue;
            }
            for (ci = 0; ci < 5; ++ci) {
                /* large vectors: sum and one other op per type */
                if ((ci == 4) && (oi != 0) && (oi != (ti % 6) + 1)) {
                    continue;
                }
                for (ip = 0; ip < 2; ++ip) {
                    test_reduction(R_ALLREDUCE, &rtypes[ti], &rops[oi],
                                   counts[ci], 0, ip);
                    test_reduction(R_RSB, &rtypes[ti], &rops[oi], counts[ci],
                                   0, ip);
                    if (ci == 2) {
                        /* every root for one count */
                        for (root = 0; root < g_size; ++root) {
                            test_reduction(R_REDUCE, &rtypes[ti], &rops[oi],
                                           counts[ci], root, ip);
                        }
                    } else {
                        test_reduction(R_REDUCE, &rtypes[ti], &rops[oi],
                                       counts[ci],
                                       (int)(g_call % (unsigned)g_size), ip);
                    }
                }
            }
        }
    }
}

/* ------------------------------------------------------------------ */
/* data movements                                                      */

static mc_mtype_t mtypes[6];

static void mtypes_init(void)
{
    mtypes[0] = (mc_mtype_t){"MPI_BYTE", MPI_BYTE, 1, 0};
    mtypes[1] = (mc_mtype_t){"MPI_CHAR", MPI_CHAR, 1, 0};
    mtypes[2] = (mc_mtype_t){"MPI_UINT16_T", MPI_UINT16_T, 2, 0};
    mtypes[3] = (mc_mtype_t){"MPI_INT", MPI_INT, 4, 0};
    mtypes[4] = (mc_mtype_t){"MPI_DOUBLE", MPI_DOUBLE, 8, 0};
    mtypes[5] = mc_mtype_vec();
}

enum { M_BCAST, M_GATHER, M_SCATTER, M_ALLGATHER, M_ALLTOALL };

static void test_move(int kind, const mc_mtype_t *t, size_t elems, int root,
                      int in_place)
{
    static const char *kn[] = {"MPI_Bcast", "MPI_Gather", "MPI_Scatter",
                               "MPI_Allgather", "MPI_Alltoall"};
    size_t per = elems * t->unit, N = (size_t)g_size, b;
    mc_view_t one = mc_view_of(t, elems, g_rank);
    mc_view_t all = mc_view_of(t, elems * N, g_rank);
    int is_root = (g_rank == root), rc = MPI_SUCCESS, r;
    /* Open MPI returns before the component for count 0, and for a bcast
     * on one rank */
    int path = ((elems == 0) || ((kind == M_BCAST) && (g_size == 1))) ?
               PATH_NONE : PATH_LIB;
    unsigned long call;
    unsigned char *sbuf, *rbuf;

    call = ++g_call;
    snprintf(g_check, sizeof(g_check), "%s %s count %zu root %d%s", kn[kind],
             t->name, elems, root, in_place ? " in place" : "");
    sbuf = mc_alloc_guarded(mc_span_of(&all, per * N));
    rbuf = mc_alloc_guarded(mc_span_of(&all, per * N));
    path_begin();
    switch (kind) {
    case M_BCAST:
        if (is_root) {
            mc_fill(&one, rbuf, 0, per, call, root, 0);
        }
        rc = MPI_Bcast(rbuf, one.count, one.dt, root, MPI_COMM_WORLD);
        path_end(path);
        mc_expect_block(&one, rbuf, 0, per, call, root, 0, 1, "bcast");
        mc_expect_gaps(&one, rbuf, per, NULL);
        break;
    case M_GATHER:
        if (in_place && is_root) {
            mc_fill(&all, rbuf, (size_t)g_rank, per, call, g_rank, root);
        } else {
            mc_fill(&one, sbuf, 0, per, call, g_rank, root);
        }
        rc = MPI_Gather((in_place && is_root) ? MPI_IN_PLACE : sbuf,
                        one.count, one.dt, is_root ? rbuf : NULL, one.count,
                        one.dt, root, MPI_COMM_WORLD);
        path_end(path);
        if (is_root) {
            for (b = 0; b < N; ++b) {
                mc_expect_block(&all, rbuf, b, per, call, (int)b, root, 1,
                                "gather");
            }
            mc_expect_gaps(&all, rbuf, per * N, NULL);
        }
        break;
    case M_SCATTER:
        if (is_root) {
            for (b = 0; b < N; ++b) {
                mc_fill(&all, sbuf, b, per, call, root, (int)b);
            }
        }
        rc = MPI_Scatter(is_root ? sbuf : NULL, one.count, one.dt,
                         (in_place && is_root) ? MPI_IN_PLACE : rbuf,
                         one.count, one.dt, root, MPI_COMM_WORLD);
        path_end(path);
        if (in_place && is_root) {
            mc_expect_block(&all, sbuf, (size_t)g_rank, per, call, root,
                            g_rank, 1, "scatter (in place: root's block kept)");
        } else {
            mc_expect_block(&one, rbuf, 0, per, call, root, g_rank, 1,
                            "scatter");
            mc_expect_gaps(&one, rbuf, per, NULL);
        }
        break;
    case M_ALLGATHER:
        if (in_place) {
            mc_fill(&all, rbuf, (size_t)g_rank, per, call, g_rank, 0);
        } else {
            mc_fill(&one, sbuf, 0, per, call, g_rank, 0);
        }
        rc = MPI_Allgather(in_place ? MPI_IN_PLACE : sbuf, one.count, one.dt,
                           rbuf, one.count, one.dt, MPI_COMM_WORLD);
        path_end(path);
        for (b = 0; b < N; ++b) {
            mc_expect_block(&all, rbuf, b, per, call, (int)b, 0, 1,
                            "allgather");
        }
        mc_expect_gaps(&all, rbuf, per * N, NULL);
        break;
    default:
        for (r = 0; r < g_size; ++r) {
            mc_fill(&all, in_place ? rbuf : sbuf, (size_t)r, per, call,
                    g_rank, r);
        }
        rc = MPI_Alltoall(in_place ? MPI_IN_PLACE : sbuf, one.count, one.dt,
                          rbuf, one.count, one.dt, MPI_COMM_WORLD);
        path_end(path);
        for (b = 0; b < N; ++b) {
            mc_expect_block(&all, rbuf, b, per, call, (int)b, g_rank, 1,
                            "alltoall");
        }
        mc_expect_gaps(&all, rbuf, per * N, NULL);
        break;
    }
    mc_mpi_ok(rc);
    free(sbuf);
    free(rbuf);
}

static void test_moves(void)
{
    size_t counts[] = {0, 1, 7, 1001, g_large};
    int ti, ci, root, ip, k;

    for (ti = 0; ti < 6; ++ti) {
        for (ci = 0; ci < 5; ++ci) {
            /* large: bytes, int and the vector type */
            if ((ci == 4) && (ti != 0) && (ti != 3) && (ti != 5)) {
                continue;
            }
            for (k = M_BCAST; k <= M_ALLTOALL; ++k) {
                for (ip = 0; ip < 2; ++ip) {
                    if ((k == M_BCAST) && ip) {
                        continue;      /* no in-place form */
                    }
                    if ((k == M_ALLGATHER) || (k == M_ALLTOALL)) {
                        test_move(k, &mtypes[ti], counts[ci], 0, ip);
                    } else if (ci == 2) {
                        for (root = 0; root < g_size; ++root) {
                            test_move(k, &mtypes[ti], counts[ci], root, ip);
                        }
                    } else {
                        test_move(k, &mtypes[ti], counts[ci],
                                  (int)(g_call % (unsigned)g_size), ip);
                    }
                }
            }
        }
    }
}

/* barrier: before it every rank stores the round into its slot of a
 * shared page; after it every rank must see every slot at that round.
 * Rank 0 (or the last rank) is slow to enter on some rounds, so a barrier
 * that lets ranks out early would show (the check itself is not timed). */
static void test_barrier(void)
{
    volatile unsigned long *slot;
    int i, rc;

    slot = mc_slots_map();
    if (slot == NULL) {
        return;
    }
    for (i = 1; i <= 60; ++i) {
        ++g_call;
        snprintf(g_check, sizeof(g_check), "MPI_Barrier #%d", i);
        mc_slots_enter(slot, i);
        path_begin();
        rc = MPI_Barrier(MPI_COMM_WORLD);
        path_end((g_size > 1) ? PATH_LIB : PATH_NONE); /* MPI ends 1-rank barriers */
        mc_mpi_ok(rc);
        mc_slots_check(slot, i);
    }
    mc_slots_unmap(slot);
}

/* ------------------------------------------------------------------ */
/* fallbacks                                                           */

/* mc_user_sum_mod for a datatype of 3 ints: len counts triples */
static void user_sum_tri(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int n = 3 * *len;

    mc_user_sum_mod(in, inout, &n, dt);
}

static void test_fallbacks(void)
{
    enum { N = 301 };
    int in[3 * N], out[3 * N], exp[3 * N], i, r, rc;
    MPI_Datatype tri;
    MPI_Op op, op_tri;
    struct { int v, r; } pin[N], pout[N];

    MPI_Type_contiguous(3, MPI_INT, &tri);
    MPI_Type_commit(&tri);
    MPI_Op_create(mc_user_sum_mod, 1, &op);
    MPI_Op_create(user_sum_tri, 1, &op_tri);

    ++g_call;
    snprintf(g_check, sizeof(g_check), "fallback: MPI_Allreduce of a "
             "derived datatype (contiguous(3, MPI_INT)), user operation");
    for (i = 0; i < 3 * N; ++i) {
        in[i] = (int)(value(g_rank, 0, (size_t)i) % MC_SUM_MOD);
        exp[i] = 0;
        for (r = 0; r < g_size; ++r) {
            exp[i] = (exp[i] + (int)(value(r, 0, (size_t)i) % MC_SUM_MOD)) %
                     MC_SUM_MOD;
        }
    }
    path_begin();
    rc = MPI_Allreduce(in, out, N, tri, op_tri, MPI_COMM_WORLD);
    path_end(PATH_PREV);
    mc_mpi_ok(rc);
    mc_check(memcmp(out, exp, sizeof(out)) == 0, "wrong sums");
    mc_digest(out, sizeof(out));

    ++g_call;
    snprintf(g_check, sizeof(g_check), "fallback: MPI_Allreduce and "
             "MPI_Reduce with a user operation (sum mod 1000003)");
    for (i = 0; i < N; ++i) {
        in[i] = (int)(value(g_rank, 0, (size_t)i) % MC_SUM_MOD);
        exp[i] = 0;
        for (r = 0; r < g_size; ++r) {
            exp[i] = (exp[i] + (int)(value(r, 0, (size_t)i) % MC_SUM_MOD)) %
                     MC_SUM_MOD;
        }
    }
    path_begin();
    rc = MPI_Allreduce(in, out, N, MPI_INT, op, MPI_COMM_WORLD);
    path_end(PATH_PREV);
    mc_mpi_ok(rc);
    mc_check(memcmp(out, exp, N * sizeof(int)) == 0, "allreduce: wrong result");
    memset(out, 0, sizeof(out));
    path_begin();
    rc = MPI_Reduce(in, out, N, MPI_INT, op, g_size - 1, MPI_COMM_WORLD);
    path_end(PATH_PREV);
    mc_mpi_ok(rc);
    if (g_rank == g_size - 1) {
        mc_check(memcmp(out, exp, N * sizeof(int)) == 0,
                 "reduce: wrong result");
    }
    mc_digest(exp, N * sizeof(int));

    ++g_call;
    snprintf(g_check, sizeof(g_check), "fallback: MPI_Allreduce MPI_LOR");
    for (i = 0; i < N; ++i) {
        in[i] = (value(g_rank, 0, (size_t)i) % 5 == 0);
        exp[i] = 0;
        for (r = 0; r < g_size; ++r) {
            exp[i] = exp[i] || (value(r, 0, (size_t)i) % 5 == 0);
        }
    }
    path_begin();
    rc = MPI_Allreduce(in, out, N, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    path_end(PATH_PREV);
    mc_mpi_ok(rc);
    for (i = 0; i < N; ++i) {
        out[i] = (out[i] != 0);
    }
    mc_check(memcmp(out, exp, N * sizeof(int)) == 0, "wrong result");
    mc_digest(out, N * sizeof(int));

    ++g_call;
    snprintf(g_check, sizeof(g_check), "fallback: MPI_Allreduce MPI_MAXLOC "
             "of MPI_2INT");
    for (i = 0; i < N; ++i) {
        pin[i].v = (int)(value(g_rank, 0, (size_t)i) % 7);
        pin[i].r = g_rank;
    }
    path_begin();
    rc = MPI_Allreduce(pin, pout, N, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD);
    path_end(PATH_PREV);
    mc_mpi_ok(rc);
    for (i = 0; i < N; ++i) {
        int best = -1, who = -1;

        for (r = 0; r < g_size; ++r) {
            int v = (int)(value(r, 0, (size_t)i) % 7);

            if (v > best) {   /* ties: the lowest rank */
                best = v;
                who  = r;
            }
        }
        if ((pout[i].v != best) || (pout[i].r != who)) {
            mc_fail("element %d: (%d, %d), expected (%d, %d)", i, pout[i].v,
                    pout[i].r, best, who);
            break;
        }
    }
    ++g_checks;
    mc_digest(pout, sizeof(pout));

    MPI_Op_free(&op);
    MPI_Op_free(&op_tri);
    MPI_Type_free(&tri);
}

/* ------------------------------------------------------------------ */
/* a split communicator: its own team, used between calls on the world */

static void test_split(void)
{
    MPI_Comm half;
    int hr, hs, i, rc;
    long v, sum, expect;
    int *a2a_s, *a2a_r;

    snprintf(g_check, sizeof(g_check), "MPI_Comm_split");
    rc = MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, g_rank, &half);
    mc_mpi_ok(rc);
    if (rc != MPI_SUCCESS) {
        return;
    }
    MPI_Comm_rank(half, &hr);
    MPI_Comm_size(half, &hs);
    a2a_s = malloc(sizeof(int) * (size_t)hs);
    a2a_r = malloc(sizeof(int) * (size_t)hs);
    for (i = 0; i < 20; ++i) {
        ++g_call;
        snprintf(g_check, sizeof(g_check), "split communicator (%d ranks) "
                 "#%d", hs, i);
        v = (long)(value(g_rank, 0, 0) % 1000);
        path_begin();
        rc = MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, half);
        path_end((hs >= g_min_ranks) ? PATH_LIB : PATH_NONE);
        mc_mpi_ok(rc);
        expect = 0;
        for (int r = g_rank % 2; r < g_size; r += 2) {
            expect += (long)(value(r, 0, 0) % 1000);
        }
        mc_check(sum == expect, "allreduce on the split communicator");
        for (int r = 0; r < hs; ++r) {
            a2a_s[r] = hr * 1000 + r + (int)g_call;
        }
        path_begin();
        rc = MPI_Alltoall(a2a_s, 1, MPI_INT, a2a_r, 1, MPI_INT, half);
        path_end((hs >= g_min_ranks) ? PATH_LIB : PATH_NONE);
        mc_mpi_ok(rc);
        for (int r = 0; r < hs; ++r) {
            if (a2a_r[r] != r * 1000 + hr + (int)g_call) {
                mc_fail("alltoall on the split communicator: block %d", r);
                break;
            }
        }
        ++g_checks;
        /* and the world's team in between */
        path_begin();
        rc = MPI_Barrier(MPI_COMM_WORLD);
        path_end((g_size > 1) ? PATH_LIB : PATH_NONE);
        mc_mpi_ok(rc);
    }
    free(a2a_s);
    free(a2a_r);
    MPI_Comm_free(&half);
}

/* ------------------------------------------------------------------ */
/* MPI_Comm_dup (a team of its own) and an intercommunicator (declined:
 * its collectives stay with coll/inter)                               */

/* A duplicate of MPI_COMM_WORLD whose errors return (checked as
 * "SECTION: MPI_Comm_dup"): a section whose calls are meant to fail. */
static int dup_errors_return(const char *section, MPI_Comm *c)
{
    int rc;

    snprintf(g_check, sizeof(g_check), "%s: MPI_Comm_dup", section);
    rc = MPI_Comm_dup(MPI_COMM_WORLD, c);
    mc_mpi_ok(rc);
    if (rc == MPI_SUCCESS) {
        MPI_Comm_set_errhandler(*c, MPI_ERRORS_RETURN);
    }
    return rc;
}

/*
 * localerr (only when named in MPI_COLL_ONLY; np >= 2): on a duplicate of
 * MPI_COMM_WORLD with MPI_ERRORS_RETURN, the root of a gather passes a
 * send size that differs from its receive size (erroneous), which only it
 * can see: it gets an error while the others' gather succeeds.  Every
 * later call on that communicator must then fail on every rank, in
 * bounded time (the program's watchdog): coll/cxl returned the error
 * without its team, the others went on one step ahead, and the next
 * allreduce returned success with wrong values, the bcast after it too,
 * then both ranks hung.
 */
static void test_localerr(void)
{
    int sb[2] = {g_rank, g_rank}, *rb, rc, v, sum = 0, i, later_ok = 0;
    MPI_Comm c;

    if (dup_errors_return("localerr", &c) != MPI_SUCCESS) {
        return;
    }
    rb = calloc((size_t)g_size * 2, sizeof(int));
    snprintf(g_check, sizeof(g_check), "localerr: gather, root's send "
             "size wrong");
    rc = MPI_Gather(sb, (g_rank == 0) ? 1 : 2, MPI_INT, rb, 2, MPI_INT, 0, c);
    ++g_checks;
    if ((g_rank == 0) && (rc == MPI_SUCCESS)) {
        mc_fail("the root's gather with a send size unlike its receive size "
                "succeeded");
    }
    for (i = 0; i < 3; ++i) {
        snprintf(g_check, sizeof(g_check), "localerr: allreduce %d after", i);
        v  = g_rank + 1;
        rc = MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, c);
        later_ok += (rc == MPI_SUCCESS);
        snprintf(g_check, sizeof(g_check), "localerr: bcast %d after", i);
        v  = (g_rank == 0) ? 1000 + i : -1;
        rc = MPI_Bcast(&v, 1, MPI_INT, 0, c);
        later_ok += (rc == MPI_SUCCESS);
    }
    snprintf(g_check, sizeof(g_check), "localerr: calls after the error");
    /* the team gave up: the calls fail (a success here had wrong data) */
    mc_check(later_ok == 0, "every call after the root's error fails");
    free(rb);
    MPI_Comm_free(&c);
}

/*
 * mismatch (only when named in MPI_COLL_ONLY; np >= 2): on a duplicate of
 * MPI_COMM_WORLD with MPI_ERRORS_RETURN, an erroneous program whose ranks
 * call differently: rank 1 receives a bcast of 2 ints where the root sends
 * 1.  Every rank but the root (which may have sent and left) must get an
 * error, and every later call on the communicator fails on every rank, in
 * bounded time (the program's watchdog): coll/cxl returned success with an
 * int the root never sent, and then an allreduce in which one rank sums
 * and the others take the max, with each rank's own answer.
 */
static void test_mismatch(void)
{
    int v[2] = {-1, -1}, rc, sum = 0, i, later_ok = 0;
    MPI_Comm c;

    if (dup_errors_return("mismatch", &c) != MPI_SUCCESS) {
        return;
    }
    snprintf(g_check, sizeof(g_check), "mismatch: bcast, rank 1 expects "
             "2 ints of the root's 1");
    if (g_rank == 0) {
        v[0] = 1234;
    }
    rc = MPI_Bcast(v, (g_rank == 1) ? 2 : 1, MPI_INT, 0, c);
    ++g_checks;
    if ((g_rank == 1) && (rc == MPI_SUCCESS)) {
        mc_fail("rank 1's bcast of 2 ints where the root sent 1 succeeded "
                "(%d %d)", v[0], v[1]);
    }
    for (i = 0; i < 3; ++i) {
        snprintf(g_check, sizeof(g_check), "mismatch: allreduce %d after", i);
        v[0] = g_rank + 1;
        rc   = MPI_Allreduce(v, &sum, 1, MPI_INT,
                             (g_rank == 0) ? MPI_SUM : MPI_MAX, c);
        later_ok += (rc == MPI_SUCCESS);
    }
    snprintf(g_check, sizeof(g_check), "mismatch: calls after the error");
    mc_check(later_ok == 0, "every call after the mismatched bcast fails");
    MPI_Comm_free(&c);
}

/*
 * winbuf (only when named in MPI_COLL_ONLY): MPI_Win_allocate memory (osc
 * ucx allocates it with ucp_mem_map: in the pool with
 * UCX_ALLOC_PRIO=md:cxl,...) as the root's MPI_Bcast buffer; the script
 * checks that coll/cxl's library read it in place (CXL_COLL_LOG).
 */
static void test_winbuf(void)
{
    const int n = 1 << 18;
    int *buf = NULL, i, bad = 0, rc;
    MPI_Win win;

    snprintf(g_check, sizeof(g_check), "winbuf: bcast from window memory");
    rc = MPI_Win_allocate((MPI_Aint)n * (MPI_Aint)sizeof(int), sizeof(int),
                          MPI_INFO_NULL, MPI_COMM_WORLD, &buf, &win);
    mc_mpi_ok(rc);
    if (rc != MPI_SUCCESS) {
        return;
    }
    for (i = 0; i < n; ++i) {
        buf[i] = (g_rank == 0) ? i : -1;
    }
    ++g_call;
    path_begin();
    rc = MPI_Bcast(buf, n, MPI_INT, 0, MPI_COMM_WORLD);
    path_end(PATH_LIB);
    mc_mpi_ok(rc);
    for (i = 0; i < n; ++i) {
        bad += (buf[i] != i);
    }
    mc_check(bad == 0, "bcast result in every rank's window memory");
    MPI_Win_free(&win);
}

/*
 * allocmem (only when named in MPI_COLL_ONLY): MPI_Alloc_mem buffers (from
 * the pool with mpool/cxl) as inputs of bcast, allgather, alltoall and
 * allreduce, each result checked; the script checks, with CXL_COLL_LOG,
 * whether coll/cxl's library read them in place.  Data changes with every
 * call (g_call), so a buffer left stale by an in-place read shows.
 */
static void test_allocmem(void)
{
    const int n = 1 << 16;      /* ints per rank: 256 KiB */
    int *in = NULL, *out = NULL, i, r, bad, rc, call, c;

    snprintf(g_check, sizeof(g_check), "allocmem: MPI_Alloc_mem buffers");
    rc = MPI_Alloc_mem((MPI_Aint)n * g_size * (MPI_Aint)sizeof(int),
                       MPI_INFO_NULL, &in);
    mc_mpi_ok(rc);
    if (rc != MPI_SUCCESS) {
        return;
    }
    rc = MPI_Alloc_mem((MPI_Aint)n * g_size * (MPI_Aint)sizeof(int),
                       MPI_INFO_NULL, &out);
    mc_mpi_ok(rc);
    if (rc != MPI_SUCCESS) {
        MPI_Free_mem(in);
        return;
    }
    for (call = 0; call < 3; ++call) {
        snprintf(g_check, sizeof(g_check), "allocmem: bcast %d", call);
        c = (int)(++g_call % 1000);
        for (i = 0; i < n; ++i) {
            in[i] = (g_rank == 0) ? i + c : -1;
        }
        path_begin();
        rc = MPI_Bcast(in, n, MPI_INT, 0, MPI_COMM_WORLD);
        path_end(PATH_LIB);
        mc_mpi_ok(rc);
        for (i = 0, bad = 0; i < n; ++i) {
            bad += (in[i] != i + c);
        }
        mc_check(bad == 0, "bcast from MPI_Alloc_mem memory");

        snprintf(g_check, sizeof(g_check), "allocmem: allgather %d", call);
        c = (int)(++g_call % 1000);
        for (i = 0; i < n; ++i) {
            in[i] = g_rank * 1000003 + i + c;
        }
        path_begin();
        rc = MPI_Allgather(in, n, MPI_INT, out, n, MPI_INT, MPI_COMM_WORLD);
        path_end(PATH_LIB);
        mc_mpi_ok(rc);
        for (r = 0, bad = 0; r < g_size; ++r) {
            for (i = 0; i < n; ++i) {
                bad += (out[(size_t)r * n + i] != r * 1000003 + i + c);
            }
        }
        mc_check(bad == 0, "allgather from MPI_Alloc_mem memory");

        snprintf(g_check, sizeof(g_check), "allocmem: alltoall %d", call);
        c = (int)(++g_call % 1000);
        for (r = 0; r < g_size; ++r) {
            for (i = 0; i < n / g_size; ++i) {
                in[r * (n / g_size) + i] = g_rank * 7919 + r * 31 + i + c;
            }
        }
        path_begin();
        rc = MPI_Alltoall(in, n / g_size, MPI_INT, out, n / g_size, MPI_INT,
                          MPI_COMM_WORLD);
        path_end(PATH_LIB);
        mc_mpi_ok(rc);
        for (r = 0, bad = 0; r < g_size; ++r) {
            for (i = 0; i < n / g_size; ++i) {
                bad += (out[r * (n / g_size) + i] !=
                        r * 7919 + g_rank * 31 + i + c);
            }
        }
        mc_check(bad == 0, "alltoall from MPI_Alloc_mem memory");

        snprintf(g_check, sizeof(g_check), "allocmem: allreduce %d", call);
        c = (int)(++g_call % 1000);
        for (i = 0; i < n; ++i) {
            in[i] = g_rank + i + c;
        }
        path_begin();
        rc = MPI_Allreduce(in, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        path_end(PATH_LIB);
        mc_mpi_ok(rc);
        for (i = 0, bad = 0; i < n; ++i) {
            bad += (out[i] != g_size * (i + c) + g_size * (g_size - 1) / 2);
        }
        mc_check(bad == 0, "allreduce from MPI_Alloc_mem memory");
    }
    mc_mpi_ok(MPI_Free_mem(out));
    mc_mpi_ok(MPI_Free_mem(in));
}

static void test_dup_inter(void)
{
    MPI_Comm dup, half, inter;
    long v, sum, expect = 0;
    int r, rc;

    snprintf(g_check, sizeof(g_check), "MPI_Comm_dup: allreduce");
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    mc_mpi_ok(rc);
    if (rc == MPI_SUCCESS) {
        ++g_call;
        v = (long)(value(g_rank, 0, 1) % 100000);
        for (r = 0; r < g_size; ++r) {
            expect += (long)(value(r, 0, 1) % 100000);
        }
        path_begin();
        rc = MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, dup);
        path_end(PATH_LIB);
        mc_mpi_ok(rc);
        mc_check(sum == expect, "allreduce on the duplicate");
        MPI_Comm_free(&dup);
    }
    if (g_size < 2) {
        return;
    }
    snprintf(g_check, sizeof(g_check), "intercommunicator: allreduce");
    MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, g_rank, &half);
    rc = MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - g_rank % 2, 99,
                              &inter);
    mc_mpi_ok(rc);
    if (rc == MPI_SUCCESS) {
        ++g_call;
        /* an intercommunicator allreduce: the sum of the other group */
        v = (long)(value(g_rank, 0, 2) % 100000);
        expect = 0;
        for (r = 1 - g_rank % 2; r < g_size; r += 2) {
            expect += (long)(value(r, 0, 2) % 100000);
        }
        /* no path check: coll/inter runs it on the local communicators,
         * whose collectives may well be coll/cxl's */
        rc = MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, inter);
        mc_mpi_ok(rc);
        mc_check(sum == expect, "allreduce on the intercommunicator");
        MPI_Comm_free(&inter);
    }
    MPI_Comm_free(&half);
}

/* ------------------------------------------------------------------ */
/* progress: a rank waiting in a collective keeps point-to-point moving.
 * Rank 0 posts a large send to rank 1 and enters a barrier; rank 1 only
 * enters it after receiving: if the barrier did not progress rank 0's
 * send (rendezvous), the job would hang (MPI_COLL_TIMEOUT reports it). */

static void test_progress(void)
{
    enum { LEN = 4 << 20 };
    char *buf;
    MPI_Request req;
    int rc, i;

    if (g_size < 2) {
        return;
    }
    buf = malloc(LEN);
    for (i = 0; i < 3; ++i) {
        ++g_call;
        snprintf(g_check, sizeof(g_check), "progress: 4 MiB MPI_Isend "
                 "0 -> 1 across an MPI_Barrier (#%d)", i);
        if (g_rank == 0) {
            memset(buf, (int)(g_call & 0xff), LEN);
            MPI_Isend(buf, LEN, MPI_BYTE, 1, 5, MPI_COMM_WORLD, &req);
        } else if (g_rank == 1) {
            memset(buf, 0, LEN);
            MPI_Recv(buf, LEN, MPI_BYTE, 0, 5, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            mc_check((buf[0] == (char)(g_call & 0xff)) &&
                     (buf[LEN - 1] == (char)(g_call & 0xff)),
                     "received data");
        }
        path_begin();
        rc = MPI_Barrier(MPI_COMM_WORLD);
        path_end(PATH_LIB);
        mc_mpi_ok(rc);
        if (g_rank == 0) {
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
    }
    free(buf);
}

/* rma: one-sided operations on the memory of a rank that waits in a
 * collective.  The cxl transport executes an atomic on memory outside the
 * pool in its owner's progress, so the last rank, in MPI_Barrier, must
 * keep progressing while rank 0 makes them (before coll/cxl progressed at
 * every yield of a long wait, each took ~700 us at np 2 instead of ~6;
 * test_coll_lines "idle" checks the rule itself).  The time per operation
 * is printed, not checked. */
static void test_rma(void)
{
    enum { N = 500 };
    int target = g_size - 1, rc, i, inorder = 1;
    long *mem, one = 1, old = -1;
    MPI_Win win;
    double t0 = 0, t1 = 0;

    if (g_size < 2) {
        return;
    }
    ++g_call;
    snprintf(g_check, sizeof(g_check), "rma: %d MPI_Fetch_and_op 0 -> %d "
             "while rank %d waits in MPI_Barrier", N, target, target);
    mem = calloc(4, sizeof(long));
    rc  = MPI_Win_create(mem, 4 * sizeof(long), sizeof(long), MPI_INFO_NULL,
                         MPI_COMM_WORLD, &win);
    mc_mpi_ok(rc);
    if (rc != MPI_SUCCESS) {
        free(mem);
        return;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) {
        t0 = MPI_Wtime();
        MPI_Win_lock(MPI_LOCK_SHARED, target, 0, win);
        for (i = 0; i < N; ++i) {
            MPI_Fetch_and_op(&one, &old, MPI_LONG, target, 0, MPI_SUM, win);
            MPI_Win_flush(target, win);
            inorder &= (old == i);
        }
        MPI_Win_unlock(target, win);
        t1 = MPI_Wtime();
        mc_check(inorder, "each fetch returned the count before it");
    }
    path_begin();
    rc = MPI_Barrier(MPI_COMM_WORLD);
    path_end(PATH_LIB);
    mc_mpi_ok(rc);
    if (g_rank == target) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, win);
        mc_check(mem[0] == N, "the target's word holds the sum");
        MPI_Win_unlock(target, win);
    }
    if (g_rank == 0) {
        printf("rma: %d MPI_Fetch_and_op on rank %d in MPI_Barrier: %.1f us "
               "each (np %d)\n", N, target, (t1 - t0) * 1e6 / N, g_size);
    }
    MPI_Win_free(&win);
    free(mem);
}

/* ------------------------------------------------------------------ */
/* op/avx: 8-bit sums of long vectors                                  */

static void test_avx(int require)
{
    enum { N8 = 262144 };
    int8_t *in = malloc(N8), *out = malloc(N8);
    int8_t wrapped = (int8_t)(uint8_t)(100u * (unsigned)g_size);
    int8_t saturated = (100 * g_size > 127) ? 127 : (int8_t)(100 * g_size);
    int i, nw = 0, ns = 0, rc, all[2], sum[2];
    const char *what;

    ++g_call;
    snprintf(g_check, sizeof(g_check), "op/avx: MPI_Allreduce SUM of %d "
             "MPI_INT8_T values 100", N8);
    memset(in, 100, N8);
    path_begin();
    rc = MPI_Allreduce(in, out, N8, MPI_INT8_T, MPI_SUM, MPI_COMM_WORLD);
    path_end(PATH_LIB);
    mc_mpi_ok(rc);
    for (i = 0; i < N8; ++i) {
        nw += (out[i] == wrapped);
        ns += (out[i] == saturated);
    }
    all[0] = (nw == N8);
    all[1] = (ns == N8);
    MPI_Allreduce(all, sum, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    what = (sum[0] == g_size) ? "wrapped" :
           (sum[1] == g_size) ? "saturated" : "other";
    if (g_rank == 0) {
        printf("avx-check: %s (%d ranks: the C sum wraps to %d, saturation "
               "gives %d; element 0 = %d)\n", what, g_size, wrapped, saturated,
               out[0]);
    }
    if (require) {
        mc_check(nw == N8, "the 8-bit sum did not wrap as C does");
    }
    free(in);
    free(out);
}

/* ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    static const char *avx_names[] = {"observe", "require"};
    unsigned long long c0, f0, t0, sums[6], mine[3];
    int thread, provided;
    uint64_t d;
    int i, avx;

    g_expect = mc_env_choice("EXPECT", expect_names, EXPECT_LAST);
    avx      = mc_env_choice("AVX", avx_names, 2);
    mc_init(&argc, &argv, &thread, &provided);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    mc_pvars_init(cnt_names, CNT_LAST);
    for (i = 0, g_have_pvars = 1; i < CNT_LAST; ++i) {
        g_have_pvars = g_have_pvars && g_pvar_have[i];
    }
    rtypes_init();
    mtypes_init();

    snprintf(g_check, sizeof(g_check), "coll/cxl counters");
    ++g_checks;
    if ((g_expect == EXPECT_OFF) && g_have_pvars) {
        mc_fail("coll/cxl is loaded (its MPI_T counters exist) but should "
                "not be");
    } else if ((g_expect != EXPECT_OFF) && !g_have_pvars) {
        mc_fail("coll/cxl's MPI_T counters (coll_cxl_calls...) not found: "
                "component not loaded");
    }
    /* coll/cxl makes MPI_COMM_WORLD's team at its first collective (not
     * a barrier: Open MPI ends one of a single rank before any module) */
    {
        int one = 1, all = 0;

        MPI_Allreduce(&one, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    }
    t0 = mc_pvar(CNT_TEAMS);
    ++g_checks;
    if ((g_expect == EXPECT_CXL) && (t0 < 1)) {
        mc_fail("coll/cxl created no team for MPI_COMM_WORLD");
    } else if ((g_expect == EXPECT_DECLINED) && (t0 != 0)) {
        mc_fail("coll/cxl created %llu team(s) but should have declined", t0);
    }
    c0 = mc_pvar(CNT_CALLS);
    f0 = mc_pvar(CNT_FALLBACKS);

    if (mc_section("barrier")) {
        test_barrier();
    }
    if (mc_section("reductions")) {
        test_reductions();
    }
    if (mc_section("moves")) {
        test_moves();
    }
    if (mc_section("fallbacks")) {
        test_fallbacks();
    }
    if (mc_section("split")) {
        test_split();
    }
    if (mc_section("dup")) {
        test_dup_inter();
    }
    if (mc_section("progress")) {
        test_progress();
    }
    if (mc_section("rma")) {
        test_rma();
    }
    if (mc_section("avx")) {
        test_avx(avx);
    }
    if ((getenv("MPI_COLL_ONLY") != NULL) && mc_section("localerr") &&
        (g_size > 1)) {
        test_localerr();
    }
    if ((getenv("MPI_COLL_ONLY") != NULL) && mc_section("mismatch") &&
        (g_size >= 2)) {
        test_mismatch();
    }
    if ((getenv("MPI_COLL_ONLY") != NULL) && mc_section("winbuf")) {
        test_winbuf();
    }
    if ((getenv("MPI_COLL_ONLY") != NULL) && mc_section("allocmem")) {
        test_allocmem();
    }

    snprintf(g_check, sizeof(g_check), "summary");
    mine[0] = mc_pvar(CNT_CALLS) - c0;
    mine[1] = mc_pvar(CNT_FALLBACKS) - f0;
    mine[2] = mc_pvar(CNT_TEAMS);
    d = mc_summary_sums(mine, 3, sums);
    if (g_rank == 0) {
        printf("counters: calls %llu fallbacks %llu teams %llu\n", sums[2],
               sums[3], sums[4]);
        printf("digest: %016llx\n", (unsigned long long)d);
        printf("observed: %llu results of MPI_MIN/MPI_MAX on MPI_UNSIGNED_LONG "
               "differ from C (Open MPI's own operations; checked only with "
               "coll/cxl)\n", sums[5]);
        mc_print_totals((long)sums[0], (long)sums[1]);
    }
    return mc_finalize((long)sums[1]);
}
