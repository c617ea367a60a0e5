/*
 * mpi_icoll_test - the non-blocking collectives coll/cxl takes (MPI_Ibarrier,
 * MPI_Ibcast, MPI_Ireduce, MPI_Iallreduce, MPI_Igather, MPI_Iscatter,
 * MPI_Iallgather, MPI_Ireduce_scatter_block, MPI_Ialltoall), checked against
 * values computed locally, on any number of ranks (test/mpi/run-mpi-icoll.sh
 * runs it at np 1..8 with coll/cxl, without it, with coll/cxl's
 * non-blocking collectives off, with its teams made only at a blocking
 * collective, and with every team declined).
 *
 *   each       every I-collective alone x MPI_INT, MPI_DOUBLE, MPI_UINT8_T,
 *              MPI_INT64_T x SUM, MAX, BXOR (integers) for the reductions;
 *              MPI_BYTE, MPI_INT and a non-contiguous vector type (even
 *              ranks only: odd ranks describe the same bytes as MPI_INT, as
 *              MPI allows) for the movements x counts 0, 1, 7, 1001 and
 *              MPI_ICOLL_LARGE x every root (count 7; others: one root) x
 *              in-place forms; MPI_Ibarrier against a shared page (no rank
 *              may leave before every rank entered).  Completion rotates
 *              between MPI_Wait, a loop of MPI_Test and MPI_Waitall of one;
 *              results, guard bytes behind every buffer, the vector
 *              layout's gaps and the send buffers (unchanged) are checked
 *   many       40 MPI_Iallreduce outstanding at once (more than the
 *              library's 16 requests), completed in reverse order; then 18
 *              of all nine kinds completed by one MPI_Waitall, and 18 by a
 *              loop of MPI_Testall
 *   mixed      an MPI_Iallreduce outstanding across a blocking MPI_Bcast and
 *              MPI_Allreduce on the same communicator; an MPI_Ibcast across
 *              an MPI_Barrier
 *   local      initiation is local (np >= 2): rank 0 posts MPI_Ibarrier
 *              (MPI_Iallreduce) and only then sends to rank 1, which posts
 *              only after receiving; on a fresh MPI_Comm_dup (no team yet:
 *              with coll_cxl_nb_team, rank 0's call starts the team's
 *              creation and must not wait for rank 1) and on one that ran
 *              a blocking MPI_Barrier (a hang is the watchdog's)
 *   fallback   MPI_Iallreduce with a user operation on MPI_INT (also in
 *              place), MPI_LOR, and a derived datatype (contiguous(2,
 *              MPI_INT)) with a user operation: the previous module's
 *   overlap    an MPI_Iallreduce of MPI_ICOLL_LARGE values completed by
 *              MPI_Test between slices of local computation
 *   comms      calls outstanding on MPI_COMM_WORLD and a duplicate at once
 *              (world, dup, world; completed in the opposite order), and on
 *              the halves of an MPI_Comm_split with the world's
 *   nbteam     non-blocking calls on fresh MPI_Comm_dup communicators, no
 *              collective on them before (with coll_cxl_nb_team the first
 *              one starts the team, and they wait for it, held): (a) a
 *              batch posted back to back (MPI_Iallreduce, one with a user
 *              operation, MPI_Ibcast from the last rank, MPI_Iallgather,
 *              MPI_Ibarrier, MPI_Ialltoall) completed by one MPI_Waitall,
 *              and the coll_cxl_teams level one higher than before the dup
 *              (cxl); (b) 24 MPI_Iallreduce outstanding at once (more than
 *              the library's 16 requests), completed in reverse order;
 *              (c) a blocking MPI_Allreduce and MPI_Bcast while an
 *              MPI_Iallreduce is outstanding (they wait for the held call);
 *              (d) MPI_Request_free of the first MPI_Iallreduce, an
 *              MPI_Barrier, then an MPI_Iallreduce; (e) MPI_Comm_free with
 *              the dup's only call (an MPI_Iallreduce) outstanding, then
 *              MPI_Wait (pending calls of a freed communicator complete;
 *              where the call is Open MPI's libnbc, which crashes on it,
 *              MPI_Wait first: see nbteam_comm_free())
 *   idup       blocking collectives on MPI_COMM_WORLD while an MPI_Comm_idup
 *              of it is under way: Open MPI agrees on the new context id
 *              with MPI_Iallreduce calls of one MPI_INT (MPI_MAX, MPI_MIN)
 *              on the parent, started from its progress engine at moments
 *              that differ between ranks, which must not pair with the
 *              program's calls (coll_cxl_cid_prev hands them to the
 *              previous module).  IDUP_ROUNDS rounds: MPI_Comm_idup, on odd
 *              rounds the last rank sleeps 2 ms first, then IDUP_CALLS
 *              blocking MPI_Allreduce / MPI_Bcast (rank 0 sleeps 100 us
 *              every seventh), MPI_Wait, an MPI_Allreduce on the new
 *              communicator; counters: the program's calls all in the
 *              library, no non-blocking call in it, Open MPI's handed on.
 *              Then the program's own MPI_Iallreduce of that shape: the
 *              previous module's
 *   idupnb     (only where MPI_ICOLL_ONLY names it) idup's rounds with
 *              MPI_Iallreduce / MPI_Ibcast + MPI_Wait instead of the
 *              blocking calls: right with coll/cxl; Open MPI 4.1.4's libnbc
 *              alone pairs them with its context-id rounds and gets wrong
 *              results
 *   free       MPI_Request_free of an active MPI_Iallreduce, then an
 *              MPI_Barrier; later calls right (the freed call's data is not
 *              checked: MPI gives no completion guarantee).  Run last: the
 *              freed calls may complete during any later call
 *
 * MPI_ICOLL_ONLY=each,local,... runs only the sections named.  Before any
 * section, MPI_Ibarrier and MPI_Iallreduce on MPI_COMM_WORLD before its
 * first blocking collective (coll/cxl has no team for it yet: with
 * coll_cxl_nb_team the first of them starts it, and both run in the
 * library once it is made, the coll_cxl_teams level one higher; without
 * it they are the previous module's, no team), then a blocking
 * MPI_Allreduce (its team, if not made yet).
 *
 * Every call gets data derived from (rank, peer, index, call number), so
 * no two calls see the same bytes.  Which path ran is checked with
 * coll/cxl's MPI_T counters coll_cxl_calls (calls its library ran,
 * blocking or not), coll_cxl_nb_calls (non-blocking ones among them) and
 * coll_cxl_fallbacks (calls handed to the previous module), per call where
 * calls run one at a time, per section where several are outstanding:
 *
 *   MPI_ICOLL_EXPECT=cxl      non-blocking calls with predefined datatypes
 *                             and operations run in the library, one count
 *                             each, on a communicator with a team and (with
 *                             MPI_ICOLL_NBTEAM=1) on one without a team yet:
 *                             the first non-blocking call coll/cxl gets
 *                             starts the team, and it and later calls are
 *                             started (counted) once it is made; with
 *                             MPI_ICOLL_NBTEAM=0, before the team (made at
 *                             the communicator's first blocking collective
 *                             coll/cxl takes) in the previous module; with
 *                             a user operation, MPI_LOR or a derived
 *                             datatype in a reduction always in the previous
 *                             module (one fallback each), as is an
 *                             MPI_Iallreduce of one MPI_INT with MPI_MAX or
 *                             MPI_MIN (coll_cxl_cid_prev); calls Open MPI ends
 *                             before any component (MPI_Ibcast on one rank,
 *                             count 0 of MPI_Ibcast and the reductions) count
 *                             nowhere; other count 0 calls may count either
 *                             way; communicators smaller than
 *                             MPI_ICOLL_MIN_RANKS (default 2, the run's
 *                             coll_cxl_min_ranks) are not coll/cxl's
 *   MPI_ICOLL_EXPECT=nb-off   coll/cxl is there (its blocking calls count)
 *                             but takes no non-blocking call
 *                             (--mca coll_cxl_nonblocking 0)
 *   MPI_ICOLL_EXPECT=off      coll/cxl is not there or disabled (if its
 *                             counters exist they must stay 0)
 *   MPI_ICOLL_EXPECT=declined coll/cxl is there but every communicator's
 *                             team creation fails on every rank (the ranks
 *                             on two pools): every call that reaches it,
 *                             blocking or not, is handed to the previous
 *                             module (one fallback each), its library runs
 *                             none, the coll_cxl_teams level stays 0
 *   MPI_ICOLL_NBTEAM=1        the run's coll_cxl_nb_team (0: --mca
 *                             coll_cxl_nb_team 0, teams only at a blocking
 *                             collective); read with EXPECT=cxl
 *   MPI_ICOLL_THREAD=multiple MPI_Init_thread with that level (funneled,
 *                             serialized, multiple)
 *
 * Every rank prints its first failures to stderr ("FAIL: rank R: CHECK:
 * WHAT", MPI_ICOLL_MAX_PRINT of them, default 5); rank 0 then prints
 * "counters: calls N nb_calls N fallbacks N teams N" (sums over the ranks),
 * "digest: HEX" (a hash of every checked result of every rank, the same
 * with and without the component), "observed: N ...; N ..."
 * (MPI_Request_free refusals of Open MPI's libnbc, which frees no active
 * request; nbteam's MPI_Comm_free put off after its call where the call is
 * libnbc's, which crashes on a communicator freed under it) and
 * "mpi-icoll: N checks, N failed".  Exit status 1 if a check failed.
 * MPI_ICOLL_TIMEOUT (default 300 s) ends a hung job with the name of the
 * running check, and a rank that crashes prints it before its backtrace
 * ("mpi_icoll_test: signal 11 in check: ...").  Open MPI 4.1.4's op/avx saturates 8-bit sums: runs whose
 * non-blocking calls are Open MPI's need --mca op ^avx.
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MC_PROG "mpi_icoll_test"
#define MC_NAME "mpi-icoll"
#define MC_ENV  "MPI_ICOLL_"
#include "mpi_check.h"

/* MPI_ICOLL_EXPECT: the run's mode */
enum { EXPECT_CXL, EXPECT_OFF, EXPECT_NBOFF, EXPECT_DECLINED, EXPECT_LAST };
static const char *expect_names[EXPECT_LAST] = {"cxl", "off", "nb-off",
                                                "declined"};
static int g_expect = EXPECT_CXL;
/* MPI_ICOLL_NBTEAM: coll_cxl_nb_team (a non-blocking call starts a team) */
static int g_nbteam = 1;

/* ------------------------------------------------------------------ */
/* MPI_T counters of coll/cxl                                          */

enum { CNT_CALLS, CNT_NB, CNT_FALLBACKS, CNT_TEAMS, CNT_LAST };
static const char *cnt_names[CNT_LAST] = {"coll_cxl_calls",
                                          "coll_cxl_nb_calls",
                                          "coll_cxl_fallbacks",
                                          "coll_cxl_teams"}; /* a level */

/* ------------------------------------------------------------------ */
/* communicators and the path a call must take                         */

typedef struct {
    MPI_Comm    comm;
    const char *name;
    int         rank, size;
    int         team;    /* a blocking collective coll/cxl took ran on it
                          * (with g_nbteam a non-blocking call needs none:
                          * see icall_path()) */
} ic_comm_t;

static ic_comm_t g_world;

static void comm_init(ic_comm_t *c, MPI_Comm comm, const char *name)
{
    c->comm = comm;
    c->name = name;
    c->team = 0;
    MPI_Comm_rank(comm, &c->rank);
    MPI_Comm_size(comm, &c->size);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
}

/* coll/cxl is selected on it at all */
static int comm_ours(const ic_comm_t *c)
{
    return c->size >= g_min_ranks;
}

enum { PATH_LIB, PATH_PREV, PATH_NONE, PATH_ANY };

enum { K_BARRIER, K_BCAST, K_REDUCE, K_ALLREDUCE, K_GATHER, K_SCATTER,
       K_ALLGATHER, K_RSB, K_ALLTOALL, K_LAST };
static const char *k_nb_names[K_LAST] = {
    "MPI_Ibarrier", "MPI_Ibcast", "MPI_Ireduce", "MPI_Iallreduce",
    "MPI_Igather", "MPI_Iscatter", "MPI_Iallgather",
    "MPI_Ireduce_scatter_block", "MPI_Ialltoall"};
static const char *k_names[K_LAST] = {
    "MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Allreduce", "MPI_Gather",
    "MPI_Scatter", "MPI_Allgather", "MPI_Reduce_scatter_block",
    "MPI_Alltoall"};

static int is_reduction(int k)
{
    return (k == K_REDUCE) || (k == K_ALLREDUCE) || (k == K_RSB);
}

static int is_rooted(int k)
{
    return (k == K_BCAST) || (k == K_REDUCE) || (k == K_GATHER) ||
           (k == K_SCATTER);
}

/*
 * Expected counts over a stretch of calls: non-blocking ones in the
 * library, in the previous module, either way (count 0 that reaches the
 * component); blocking ones in the library.  Read against the counters'
 * changes once every call of the stretch completed.
 */
typedef struct {
    unsigned long long c0[CNT_LAST];
    long lib, prev, any, blk;
} tally_t;

static void tally_begin(tally_t *t)
{
    int c;

    memset(t, 0, sizeof(*t));
    for (c = 0; c < CNT_LAST; ++c) {
        t->c0[c] = mc_pvar(c);
    }
}

static void tally_path(tally_t *t, int blocking, int path)
{
    if (blocking) {
        t->blk += (path == PATH_LIB);
    } else if (path == PATH_LIB) {
        ++t->lib;
    } else if (path == PATH_PREV) {
        ++t->prev;
    } else if (path == PATH_ANY) {
        ++t->any;
    }
}

static int in_range(unsigned long long v, long lo, long extra)
{
    return (v >= (unsigned long long)lo) &&
           (v <= (unsigned long long)(lo + extra));
}

static void tally_check(const tally_t *t)
{
    unsigned long long dc = mc_pvar(CNT_CALLS) - t->c0[CNT_CALLS];
    unsigned long long dn = mc_pvar(CNT_NB) - t->c0[CNT_NB];
    unsigned long long df = mc_pvar(CNT_FALLBACKS) - t->c0[CNT_FALLBACKS];
    int ok;

    ++g_checks;
    if (g_expect == EXPECT_OFF) {
        ok = (dc == 0) && (dn == 0) && (df == 0);
    } else if (g_expect == EXPECT_NBOFF) {
        /* whether a call it hands on counts as a fallback is its business */
        ok = (dn == 0) && (dc == (unsigned long long)t->blk);
    } else if (g_expect == EXPECT_DECLINED) {
        /* no team: every call that reaches it, blocking or not, goes on */
        ok = (dc == 0) && (dn == 0) &&
             in_range(df, t->lib + t->prev + t->blk, t->any);
    } else {
        /* without coll_cxl_nb_calls (reported once) the other two still
         * tell where the calls went */
        ok = (!g_pvar_have[CNT_NB] || in_range(dn, t->lib, t->any)) &&
             in_range(dc, t->lib + t->blk, t->any) &&
             in_range(df, t->prev, t->any);
    }
    if (ok) {
        return;
    }
    if (g_expect == EXPECT_DECLINED) {
        mc_fail("coll/cxl counted %llu library calls (%llu non-blocking), %llu "
                "fallbacks; expected none in the library, %ld handed to the "
                "previous module (%ld non-blocking, %ld blocking), %ld of "
                "count 0 either way (every team declined)", dc, dn, df,
                t->lib + t->prev + t->blk, t->lib + t->prev, t->blk, t->any);
        return;
    }
    mc_fail("coll/cxl counted %llu library calls (%llu non-blocking), %llu "
            "fallbacks; expected %ld non-blocking + %ld blocking in the "
            "library, %ld handed to the previous module, %ld of count 0 "
            "either way%s", dc, dn, df,
            (g_expect == EXPECT_CXL) ? t->lib : 0, t->blk,
            (g_expect == EXPECT_CXL) ? t->prev : 0,
            (g_expect == EXPECT_CXL) ? t->any : 0,
            (g_expect == EXPECT_OFF) ? " (component off: none at all)" :
            (g_expect == EXPECT_NBOFF) ? " (coll_cxl_nonblocking 0: no "
                                         "non-blocking call in the library)" :
            g_nbteam ? " (coll_cxl_nb_team 1: a non-blocking call without a "
                       "team starts it and runs in the library)" :
                       " (coll_cxl_nb_team 0: no team before the first "
                       "blocking collective)");
}

/* one check: coll/cxl's coll_cxl_teams level (live teams) is want */
static void teams_check(unsigned long long want, const char *what)
{
    unsigned long long teams = mc_pvar(CNT_TEAMS);

    ++g_checks;
    if (teams != want) {
        mc_fail("coll_cxl_teams is %llu, expected %llu (%s)", teams, want,
                what);
    }
}

/* ------------------------------------------------------------------ */
/* reductions                                                          */

enum { N_RTYPES = 4, N_ROPS = 3, N_MTYPES = 3 };
static mc_rtype_t rtypes[N_RTYPES];
static mc_rop_t   rops[N_ROPS];

static void rtypes_init(void)
{
    rtypes[0] = (mc_rtype_t){MPI_INT, "MPI_INT", 's', sizeof(int)};
    rtypes[1] = (mc_rtype_t){MPI_DOUBLE, "MPI_DOUBLE", 'd', sizeof(double)};
    rtypes[2] = (mc_rtype_t){MPI_UINT8_T, "MPI_UINT8_T", 'u', sizeof(uint8_t)};
    rtypes[3] = (mc_rtype_t){MPI_INT64_T, "MPI_INT64_T", 's', sizeof(int64_t)};
    rops[0] = (mc_rop_t){MPI_SUM, "MPI_SUM", 0};
    rops[1] = (mc_rop_t){MPI_MAX, "MPI_MAX", 0};
    rops[2] = (mc_rop_t){MPI_BXOR, "MPI_BXOR", 1};
}

/* a send buffer still holds rank src's input */
static void unchanged(const mc_rtype_t *t, const mc_rop_t *o,
                      unsigned long call, int src, const void *buf,
                      size_t count)
{
    void *exp = malloc(count * t->size + 1);

    mc_gen(t, o, call, src, exp, 0, count);
    mc_check(memcmp(buf, exp, count * t->size) == 0,
             "send buffer changed by the call");
    free(exp);
}

/* ------------------------------------------------------------------ */
/* data movements                                                      */

static mc_mtype_t mtypes[N_MTYPES];

static void mtypes_init(void)
{
    mtypes[0] = (mc_mtype_t){"MPI_BYTE", MPI_BYTE, 1, 0};
    mtypes[1] = (mc_mtype_t){"MPI_INT", MPI_INT, 4, 0};
    mtypes[2] = mc_mtype_vec();
}

/* ------------------------------------------------------------------ */
/* one call: its buffers, its request, its checks                      */

typedef struct {
    int               kind;
    int               blocking; /* the blocking counterpart (mixed sections) */
    const mc_rtype_t *rt;       /* reductions */
    const mc_rop_t   *ro;
    const mc_mtype_t *mt;       /* movements */
    size_t            count;    /* elements per rank (per block) */
    int               root, in_place;
    ic_comm_t        *c;
    unsigned long     call;
    unsigned char    *sbuf, *rbuf;
    size_t            slen, rlen;
    MPI_Request       req;
    int               path;
    char              name[200];
} icall_t;

static int icall_path(const icall_t *ic)
{
    const ic_comm_t *c = ic->c;
    int one = (c->size == 1), zero = (ic->kind != K_BARRIER) &&
                                     (ic->count == 0);

    if (!comm_ours(c)) {
        return PATH_NONE;
    }
    if (ic->blocking) {
        /* Open MPI ends barriers and bcasts of one rank and every count 0
         * before any component */
        return (zero || (one && ((ic->kind == K_BARRIER) ||
                                 (ic->kind == K_BCAST)))) ?
               PATH_NONE : PATH_LIB;
    }
    /* MPI_Ibcast of one rank or count 0, the reductions' count 0: ended
     * in Open MPI (ompi/mpi/c) */
    if ((zero && ((ic->kind == K_BCAST) || is_reduction(ic->kind))) ||
        (one && (ic->kind == K_BCAST))) {
        return PATH_NONE;
    }
    if (zero) {
        return PATH_ANY;
    }
    /* coll_cxl_cid_prev: the shape of Open MPI's context-id agreement */
    if ((ic->kind == K_ALLREDUCE) && (ic->count == 1) &&
        (ic->rt->dt == MPI_INT) &&
        ((ic->ro->op == MPI_MAX) || (ic->ro->op == MPI_MIN))) {
        return PATH_PREV;
    }
    /* coll_cxl_nb_team: without a team the call starts its creation (or
     * waits for it) and is started in the library once it is made */
    return (c->team || g_nbteam) ? PATH_LIB : PATH_PREV;
}

/* the movement views of this call */
static void icall_views(const icall_t *ic, mc_view_t *one, mc_view_t *all)
{
    *one = mc_view_of(ic->mt, ic->count, ic->c->rank);
    *all = mc_view_of(ic->mt, ic->count * (size_t)ic->c->size, ic->c->rank);
}

static void icall_fill_moves(icall_t *ic)
{
    size_t per = ic->count * ic->mt->unit, N = (size_t)ic->c->size, b;
    int me = ic->c->rank, root = ic->root, is_root = (me == root), r;
    mc_view_t one, all;

    icall_views(ic, &one, &all);
    ic->slen = ic->rlen = mc_span_of(&all, per * N);
    ic->sbuf = mc_alloc_guarded(ic->slen);
    ic->rbuf = mc_alloc_guarded(ic->rlen);
    switch (ic->kind) {
    case K_BCAST:
        if (is_root) {
            mc_fill(&one, ic->rbuf, 0, per, ic->call, root, 0);
        }
        break;
    case K_GATHER:
        if (ic->in_place && is_root) {
            mc_fill(&all, ic->rbuf, (size_t)me, per, ic->call, me, root);
        } else {
            mc_fill(&one, ic->sbuf, 0, per, ic->call, me, root);
        }
        break;
    case K_SCATTER:
        if (is_root) {
            for (b = 0; b < N; ++b) {
                mc_fill(&all, ic->sbuf, b, per, ic->call, root, (int)b);
            }
        }
        break;
    case K_ALLGATHER:
        if (ic->in_place) {
            mc_fill(&all, ic->rbuf, (size_t)me, per, ic->call, me, 0);
        } else {
            mc_fill(&one, ic->sbuf, 0, per, ic->call, me, 0);
        }
        break;
    default: /* K_ALLTOALL */
        for (r = 0; r < (int)N; ++r) {
            mc_fill(&all, ic->in_place ? ic->rbuf : ic->sbuf, (size_t)r, per,
                    ic->call, me, r);
        }
        break;
    }
}

static void icall_fill_reduction(icall_t *ic)
{
    size_t es = ic->rt->size;
    size_t total = (ic->kind == K_RSB) ? ic->count * (size_t)ic->c->size :
                                         ic->count;

    ic->slen = total * es;
    ic->rlen = ((ic->kind == K_RSB) && !ic->in_place) ? ic->count * es :
                                                        total * es;
    ic->sbuf = mc_alloc_guarded(ic->slen);
    ic->rbuf = mc_alloc_guarded(ic->rlen);
    mc_gen(ic->rt, ic->ro, ic->call, ic->c->rank,
           ic->in_place ? ic->rbuf : ic->sbuf, 0, total);
}

/* a new call (its own call number): buffers allocated and filled */
static void icall_init(icall_t *ic, int kind, ic_comm_t *c,
                       const mc_rtype_t *rt, const mc_rop_t *ro,
                       const mc_mtype_t *mt, size_t count, int root,
                       int in_place, int blocking)
{
    memset(ic, 0, sizeof(*ic));
    ic->kind     = kind;
    ic->blocking = blocking;
    ic->rt       = rt;
    ic->ro       = ro;
    ic->mt       = mt;
    ic->count    = (kind == K_BARRIER) ? 0 : count;
    ic->root     = is_rooted(kind) ? root : 0;
    ic->in_place = (kind == K_BARRIER || kind == K_BCAST) ? 0 : in_place;
    ic->c        = c;
    ic->call     = ++g_call;
    ic->req      = MPI_REQUEST_NULL;
    ic->path     = icall_path(ic);
    if (kind == K_BARRIER) {
        snprintf(ic->name, sizeof(ic->name), "%s on %s",
                 (blocking ? k_names : k_nb_names)[kind], c->name);
        return;
    }
    snprintf(ic->name, sizeof(ic->name), "%s %s%s%s count %zu root %d%s "
             "on %s", (blocking ? k_names : k_nb_names)[kind],
             is_reduction(kind) ? rt->name : mt->name,
             is_reduction(kind) ? " " : "", is_reduction(kind) ? ro->name : "",
             ic->count, ic->root, ic->in_place ? " in place" : "", c->name);
    if (is_reduction(kind)) {
        icall_fill_reduction(ic);
    } else {
        icall_fill_moves(ic);
    }
}

/* call i of a mix: kind k with a type, operation, root and in-place form
 * that vary with i */
static void icall_pick(icall_t *ic, int k, ic_comm_t *c, int i, size_t count)
{
    const mc_rtype_t *rt = &rtypes[i % N_RTYPES];
    const mc_rop_t *ro = &rops[(i / N_RTYPES) % N_ROPS];

    if (ro->bitwise && (rt->kind == 'd')) {
        ro = &rops[0];
    }
    icall_init(ic, k, c, rt, ro, &mtypes[i % N_MTYPES], count,
               (int)((unsigned)i * 7u % (unsigned)c->size), (i / 2) % 2, 0);
}

static void icall_post(icall_t *ic)
{
    MPI_Comm comm = ic->c->comm;
    int is_root = (ic->c->rank == ic->root), ip = ic->in_place, rc, cnt;
    MPI_Request *rq = &ic->req;
    void *sb, *rb;
    mc_view_t one, all;

    snprintf(g_check, sizeof(g_check), "%s", ic->name);
    if (ic->blocking && (ic->path == PATH_LIB)) {
        ic->c->team = 1;       /* its first such call makes the team */
    }
    cnt = (int)ic->count;
    if (is_reduction(ic->kind)) {
        MPI_Datatype dt = ic->rt->dt;
        MPI_Op op = ic->ro->op;

        sb = ip ? MPI_IN_PLACE : ic->sbuf;
        switch (ic->kind) {
        case K_REDUCE:
            /* non-roots of the in-place form send from their rbuf */
            sb = (ip && is_root) ? MPI_IN_PLACE : (ip ? ic->rbuf : ic->sbuf);
            rb = is_root ? ic->rbuf : NULL;
            rc = ic->blocking ?
                 MPI_Reduce(sb, rb, cnt, dt, op, ic->root, comm) :
                 MPI_Ireduce(sb, rb, cnt, dt, op, ic->root, comm, rq);
            break;
        case K_ALLREDUCE:
            rc = ic->blocking ?
                 MPI_Allreduce(sb, ic->rbuf, cnt, dt, op, comm) :
                 MPI_Iallreduce(sb, ic->rbuf, cnt, dt, op, comm, rq);
            break;
        default:
            rc = ic->blocking ?
                 MPI_Reduce_scatter_block(sb, ic->rbuf, cnt, dt, op, comm) :
                 MPI_Ireduce_scatter_block(sb, ic->rbuf, cnt, dt, op, comm,
                                           rq);
            break;
        }
        mc_mpi_ok(rc);
        return;
    }
    if (ic->kind == K_BARRIER) {
        rc = ic->blocking ? MPI_Barrier(comm) : MPI_Ibarrier(comm, rq);
        mc_mpi_ok(rc);
        return;
    }
    icall_views(ic, &one, &all);
    switch (ic->kind) {
    case K_BCAST:
        rc = ic->blocking ?
             MPI_Bcast(ic->rbuf, one.count, one.dt, ic->root, comm) :
             MPI_Ibcast(ic->rbuf, one.count, one.dt, ic->root, comm, rq);
        break;
    case K_GATHER:
        sb = (ip && is_root) ? MPI_IN_PLACE : ic->sbuf;
        rb = is_root ? ic->rbuf : NULL;
        rc = ic->blocking ?
             MPI_Gather(sb, one.count, one.dt, rb, one.count, one.dt,
                        ic->root, comm) :
             MPI_Igather(sb, one.count, one.dt, rb, one.count, one.dt,
                         ic->root, comm, rq);
        break;
    case K_SCATTER:
        sb = is_root ? ic->sbuf : NULL;
        rb = (ip && is_root) ? MPI_IN_PLACE : ic->rbuf;
        rc = ic->blocking ?
             MPI_Scatter(sb, one.count, one.dt, rb, one.count, one.dt,
                         ic->root, comm) :
             MPI_Iscatter(sb, one.count, one.dt, rb, one.count, one.dt,
                          ic->root, comm, rq);
        break;
    case K_ALLGATHER:
        sb = ip ? MPI_IN_PLACE : ic->sbuf;
        rc = ic->blocking ?
             MPI_Allgather(sb, one.count, one.dt, ic->rbuf, one.count,
                           one.dt, comm) :
             MPI_Iallgather(sb, one.count, one.dt, ic->rbuf, one.count,
                            one.dt, comm, rq);
        break;
    default:
        sb = ip ? MPI_IN_PLACE : ic->sbuf;
        rc = ic->blocking ?
             MPI_Alltoall(sb, one.count, one.dt, ic->rbuf, one.count, one.dt,
                          comm) :
             MPI_Ialltoall(sb, one.count, one.dt, ic->rbuf, one.count,
                           one.dt, comm, rq);
        break;
    }
    mc_mpi_ok(rc);
}

/* complete one request: MPI_Wait, a loop of MPI_Test or MPI_Waitall of one,
 * as 'how' says (modulo 3) */
static void complete(MPI_Request *req, unsigned long how)
{
    int rc, flag = 0;

    switch (how % 3) {
    case 0:
        rc = MPI_Wait(req, MPI_STATUS_IGNORE);
        break;
    case 1:
        do {
            rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
        } while ((rc == MPI_SUCCESS) && !flag);
        break;
    default:
        rc = MPI_Waitall(1, req, MPI_STATUSES_IGNORE);
        break;
    }
    mc_mpi_ok(rc);
    mc_check(*req == MPI_REQUEST_NULL,
             "the request is not MPI_REQUEST_NULL after completion");
}

static void icall_complete(icall_t *ic, unsigned long how)
{
    if (!ic->blocking) {
        snprintf(g_check, sizeof(g_check), "%s (completing: %s)", ic->name,
                 (how % 3 == 0) ? "MPI_Wait" :
                 (how % 3 == 1) ? "MPI_Test loop" : "MPI_Waitall");
        complete(&ic->req, how);
    }
}

static void icall_verify_reduction(icall_t *ic)
{
    const mc_rtype_t *t = ic->rt;
    int me = ic->c->rank, is_root = (me == ic->root);
    size_t total = (ic->kind == K_RSB) ? ic->count * (size_t)ic->c->size :
                                         ic->count;
    void *exp;

    if ((ic->kind != K_REDUCE) || is_root) {
        exp = malloc(ic->count * t->size + 1);
        mc_reference(t, ic->ro, ic->call, ic->c->size, exp,
                     (ic->kind == K_RSB) ? (size_t)me * ic->count : 0,
                     ic->count);
        mc_compare(t, ic->rbuf, exp, ic->count, "result", 1);
        free(exp);
    }
    if (!ic->in_place) {
        unchanged(t, ic->ro, ic->call, me, ic->sbuf, total);
    } else if ((ic->kind == K_REDUCE) && !is_root) {
        unchanged(t, ic->ro, ic->call, me, ic->rbuf, total);
    }
    mc_check_guards(ic->rbuf, ic->rlen, ic->sbuf, ic->slen);
}

static void icall_verify_moves(icall_t *ic)
{
    size_t per = ic->count * ic->mt->unit, N = (size_t)ic->c->size, b;
    int me = ic->c->rank, root = ic->root, is_root = (me == root);
    unsigned long call = ic->call;
    mc_view_t one, all;

    icall_views(ic, &one, &all);
    switch (ic->kind) {
    case K_BCAST:
        /* the root's buffer is its send buffer: unchanged */
        mc_expect_block(&one, ic->rbuf, 0, per, call, root, 0, 1, "bcast");
        mc_expect_gaps(&one, ic->rbuf, per, "bcast buffer");
        break;
    case K_GATHER:
        if (is_root) {
            for (b = 0; b < N; ++b) {
                mc_expect_block(&all, ic->rbuf, b, per, call, (int)b, root, 1,
                                "gather");
            }
            mc_expect_gaps(&all, ic->rbuf, per * N, "gather receive buffer");
        }
        if (!(ic->in_place && is_root)) {
            mc_expect_block(&one, ic->sbuf, 0, per, call, me, root, 0,
                            "gather send buffer (changed)");
            mc_expect_gaps(&one, ic->sbuf, per, "gather send buffer");
        }
        break;
    case K_SCATTER:
        if (ic->in_place && is_root) {
            mc_expect_block(&all, ic->sbuf, (size_t)me, per, call, root, me, 1,
                            "scatter (in place: the root's block kept)");
        } else {
            mc_expect_block(&one, ic->rbuf, 0, per, call, root, me, 1,
                            "scatter");
            mc_expect_gaps(&one, ic->rbuf, per, "scatter receive buffer");
        }
        if (is_root) {
            for (b = 0; b < N; ++b) {
                mc_expect_block(&all, ic->sbuf, b, per, call, root, (int)b, 0,
                                "scatter send buffer (changed)");
            }
            mc_expect_gaps(&all, ic->sbuf, per * N, "scatter send buffer");
        }
        break;
    case K_ALLGATHER:
        for (b = 0; b < N; ++b) {
            mc_expect_block(&all, ic->rbuf, b, per, call, (int)b, 0, 1,
                            "allgather");
        }
        mc_expect_gaps(&all, ic->rbuf, per * N, "allgather receive buffer");
        if (!ic->in_place) {
            mc_expect_block(&one, ic->sbuf, 0, per, call, me, 0, 0,
                            "allgather send buffer (changed)");
            mc_expect_gaps(&one, ic->sbuf, per, "allgather send buffer");
        }
        break;
    default:
        for (b = 0; b < N; ++b) {
            mc_expect_block(&all, ic->rbuf, b, per, call, (int)b, me, 1,
                            "alltoall");
        }
        mc_expect_gaps(&all, ic->rbuf, per * N, "alltoall receive buffer");
        if (!ic->in_place) {
            for (b = 0; b < N; ++b) {
                mc_expect_block(&all, ic->sbuf, b, per, call, me, (int)b, 0,
                                "alltoall send buffer (changed)");
            }
            mc_expect_gaps(&all, ic->sbuf, per * N, "alltoall send buffer");
        }
        break;
    }
}

/* results, send buffers, gaps and guards; then the buffers are freed */
static void icall_finish(icall_t *ic)
{
    snprintf(g_check, sizeof(g_check), "%s", ic->name);
    if (is_reduction(ic->kind)) {
        icall_verify_reduction(ic);
    } else if (ic->kind != K_BARRIER) {
        icall_verify_moves(ic);
    }
    free(ic->sbuf);
    free(ic->rbuf);
    ic->sbuf = ic->rbuf = NULL;
}

/* one call alone: post, complete, its own counter check, verify */
static void icall_run(icall_t *ic)
{
    tally_t t;

    tally_begin(&t);
    tally_path(&t, ic->blocking, ic->path);
    icall_post(ic);
    icall_complete(ic, ic->call);
    snprintf(g_check, sizeof(g_check), "%s", ic->name);
    tally_check(&t);
    icall_finish(ic);
}

/* a blocking collective coll/cxl takes on c, so that c has a team: a
 * barrier, and on one rank (whose barrier Open MPI ends before any
 * component) an allreduce.  Call numbers stay in step on every rank of
 * MPI_COMM_WORLD, whatever the size of c (the halves of a split differ). */
static void make_team(ic_comm_t *c)
{
    icall_t ic;

    icall_init(&ic, K_BARRIER, c, NULL, NULL, NULL, 0, 0, 0, 1);
    icall_run(&ic);
    if (c->size == 1) {
        icall_init(&ic, K_ALLREDUCE, c, &rtypes[0], &rops[0], NULL, 1, 0, 0,
                   1);
        icall_run(&ic);
    } else {
        ++g_call;
    }
}

/* ------------------------------------------------------------------ */
/* each: every I-collective alone                                      */

/* the large count: sums of every type, and MPI_MAX of doubles and MPI_BXOR
 * of bytes */
static int large_combo(int ti, int oi)
{
    return (rops[oi].op == MPI_SUM) ||
           ((rtypes[ti].dt == MPI_DOUBLE) && (rops[oi].op == MPI_MAX)) ||
           ((rtypes[ti].dt == MPI_UINT8_T) && (rops[oi].op == MPI_BXOR));
}

static void each_reductions(ic_comm_t *w)
{
    static const int kinds[] = {K_ALLREDUCE, K_REDUCE, K_RSB};
    size_t counts[] = {0, 1, 7, 1001, g_large};
    int ki, ti, oi, ci, ip, root;
    icall_t ic;

    for (ki = 0; ki < 3; ++ki) {
        for (ti = 0; ti < N_RTYPES; ++ti) {
            for (oi = 0; oi < N_ROPS; ++oi) {
                if (rops[oi].bitwise && (rtypes[ti].kind == 'd')) {
                    continue;
                }
                for (ci = 0; ci < 5; ++ci) {
                    if ((ci == 4) && !large_combo(ti, oi)) {
                        continue;
                    }
                    for (ip = 0; ip < 2; ++ip) {
                        for (root = 0; root < w->size; ++root) {
                            /* every root for count 7, else one */
                            int r = ((kinds[ki] == K_REDUCE) && (ci == 2)) ?
                                    root :
                                    (int)((g_call + 1) % (unsigned)w->size);

                            icall_init(&ic, kinds[ki], w, &rtypes[ti],
                                       &rops[oi], NULL, counts[ci], r, ip, 0);
                            icall_run(&ic);
                            if ((kinds[ki] != K_REDUCE) || (ci != 2)) {
                                break;
                            }
                        }
                    }
                }
            }
        }
    }
}

static void each_moves(ic_comm_t *w)
{
    static const int kinds[] = {K_BCAST, K_GATHER, K_SCATTER, K_ALLGATHER,
                                K_ALLTOALL};
    size_t counts[] = {0, 1, 7, 1001, g_large};
    int ki, ti, ci, ip, root;
    icall_t ic;

    for (ti = 0; ti < N_MTYPES; ++ti) {
        for (ci = 0; ci < 5; ++ci) {
            for (ki = 0; ki < 5; ++ki) {
                for (ip = 0; ip < 2; ++ip) {
                    if ((kinds[ki] == K_BCAST) && ip) {
                        continue;      /* no in-place form */
                    }
                    for (root = 0; root < w->size; ++root) {
                        int every = is_rooted(kinds[ki]) && (ci == 2);
                        int r = every ? root :
                                (int)((g_call + 1) % (unsigned)w->size);

                        icall_init(&ic, kinds[ki], w, NULL, NULL, &mtypes[ti],
                                   counts[ci], r, ip, 0);
                        icall_run(&ic);
                        if (!every) {
                            break;
                        }
                    }
                }
            }
        }
    }
}

/* MPI_Ibarrier: before posting, every rank stores the round into its slot
 * of a shared page; once the barrier completed, every rank must see every
 * slot at that round.  Rank 0 (or the last rank) is late on some rounds. */
static void each_barrier(ic_comm_t *w)
{
    volatile unsigned long *slot;
    icall_t ic;
    int i;

    snprintf(g_check, sizeof(g_check), "each: MPI_Ibarrier's shared page");
    slot = mc_slots_map();
    if (slot == NULL) {
        return;
    }
    for (i = 1; i <= 15; ++i) {
        icall_init(&ic, K_BARRIER, w, NULL, NULL, NULL, 0, 0, 0, 0);
        mc_slots_enter(slot, i);
        icall_run(&ic);
        snprintf(g_check, sizeof(g_check), "%s #%d", ic.name, i);
        mc_slots_check(slot, i);
    }
    mc_slots_unmap(slot);
}

static void test_each(ic_comm_t *w)
{
    each_barrier(w);
    each_reductions(w);
    each_moves(w);
}

/* ------------------------------------------------------------------ */
/* many: calls outstanding together                                    */

/* n calls posted back to back, completed by one MPI_Waitall or a loop of
 * MPI_Testall */
static void many_all(icall_t *ic, int n, int testall, tally_t *t)
{
    MPI_Request reqs[64];
    int i, rc, flag = 0;

    for (i = 0; i < n; ++i) {
        tally_path(t, 0, ic[i].path);
        icall_post(&ic[i]);
        reqs[i] = ic[i].req;
    }
    snprintf(g_check, sizeof(g_check), "many: %d calls of all kinds "
             "outstanding, completed by %s", n,
             testall ? "a loop of MPI_Testall" : "one MPI_Waitall");
    if (testall) {
        do {
            rc = MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE);
        } while ((rc == MPI_SUCCESS) && !flag);
    } else {
        rc = MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
    }
    mc_mpi_ok(rc);
    for (i = 0, flag = 1; i < n; ++i) {
        flag = flag && (reqs[i] == MPI_REQUEST_NULL);
    }
    mc_check(flag, "a request is not MPI_REQUEST_NULL after completion");
    for (i = 0; i < n; ++i) {
        icall_finish(&ic[i]);
    }
}

static void test_many(ic_comm_t *w)
{
    enum { N_AR = 40, N_MIX = 2 * K_LAST };
    icall_t *ic = calloc(N_AR, sizeof(*ic));
    size_t count;
    tally_t t;
    int i, pass;

    tally_begin(&t);
    /* 40 MPI_Iallreduce back to back, completed last first */
    for (i = 0; i < N_AR; ++i) {
        count = (i % 10 == 9) ? g_large / 4 + 1 :
                1 + ((size_t)i * 97) % 600;
        /* distinct send and receive buffers, types and operations */
        icall_init(&ic[i], K_ALLREDUCE, w, &rtypes[i % N_RTYPES],
                   &rops[(i / N_RTYPES) % (N_ROPS - (i % N_RTYPES == 1))],
                   NULL, count, 0, 0, 0);
        tally_path(&t, 0, ic[i].path);
        icall_post(&ic[i]);
    }
    for (i = N_AR - 1; i >= 0; --i) {
        snprintf(g_check, sizeof(g_check), "many: %d MPI_Iallreduce "
                 "outstanding, completing #%d (MPI_Wait): %s", N_AR, i,
                 ic[i].name);
        complete(&ic[i].req, 0);
    }
    for (i = 0; i < N_AR; ++i) {
        icall_finish(&ic[i]);
    }
    /* all nine kinds twice: one MPI_Waitall; again: MPI_Testall */
    for (pass = 0; pass < 2; ++pass) {
        for (i = 0; i < N_MIX; ++i) {
            count = (i == 5 + pass) ? g_large / 8 + 1 :
                    1 + ((size_t)i * 53) % 300;
            icall_pick(&ic[i], i % K_LAST, w, i + pass, count);
        }
        many_all(ic, N_MIX, pass, &t);
    }
    snprintf(g_check, sizeof(g_check), "many: counters over %d + 2 x %d "
             "calls", N_AR, N_MIX);
    tally_check(&t);
    free(ic);
}

/* ------------------------------------------------------------------ */
/* mixed: blocking collectives while a non-blocking one is outstanding */

static void test_mixed(ic_comm_t *w)
{
    size_t counts[] = {1, 7, 1001, g_large};
    icall_t nb, b1, b2;
    tally_t t;
    int i;

    tally_begin(&t);
    for (i = 0; i < 4; ++i) {
        /* MPI_Iallreduce across MPI_Bcast and MPI_Allreduce */
        icall_pick(&nb, K_ALLREDUCE, w, i, counts[i]);
        tally_path(&t, 0, nb.path);
        icall_post(&nb);
        icall_init(&b1, K_BCAST, w, NULL, NULL, &mtypes[1 + i % 2],
                   counts[i], i % w->size, 0, 1);
        tally_path(&t, 1, b1.path);
        icall_post(&b1);
        icall_finish(&b1);
        icall_init(&b2, K_ALLREDUCE, w, &rtypes[3 - i % 2], &rops[i % 2], NULL,
                   counts[i], 0, i % 2, 1);
        tally_path(&t, 1, b2.path);
        icall_post(&b2);
        icall_finish(&b2);
        icall_complete(&nb, (unsigned long)i);
        icall_finish(&nb);

        /* MPI_Ibcast across MPI_Barrier */
        icall_init(&nb, K_BCAST, w, NULL, NULL, &mtypes[i % N_MTYPES],
                   counts[i], (i + 1) % w->size, 0, 0);
        tally_path(&t, 0, nb.path);
        icall_post(&nb);
        icall_init(&b1, K_BARRIER, w, NULL, NULL, NULL, 0, 0, 0, 1);
        tally_path(&t, 1, b1.path);
        icall_post(&b1);
        icall_complete(&nb, (unsigned long)i + 1);
        icall_finish(&nb);
    }
    snprintf(g_check, sizeof(g_check), "mixed: counters");
    tally_check(&t);
}

/* ------------------------------------------------------------------ */
/* local: initiation does not wait for the other ranks                 */

enum { LOCAL_TAG = 4242 };

static void local_rounds(ic_comm_t *c, int kind)
{
    icall_t ic;
    tally_t t;
    int round, token = -1, rc;

    for (round = 0; round < 3; ++round) {
        icall_init(&ic, kind, c, &rtypes[0], &rops[round % 2], NULL, 4, 0, 0,
                   0);
        snprintf(ic.name, sizeof(ic.name), "local: %s on %s (#%d): rank 0 "
                 "posts, then sends to rank 1, which posts only after "
                 "receiving", k_nb_names[kind], c->name, round);
        tally_begin(&t);
        tally_path(&t, 0, ic.path);
        if (c->rank == 0) {
            icall_post(&ic);
            token = (int)ic.call;
            rc = MPI_Send(&token, 1, MPI_INT, 1, LOCAL_TAG, c->comm);
            mc_mpi_ok(rc);
        } else if (c->rank == 1) {
            snprintf(g_check, sizeof(g_check), "%s", ic.name);
            rc = MPI_Recv(&token, 1, MPI_INT, 0, LOCAL_TAG, c->comm,
                          MPI_STATUS_IGNORE);
            mc_mpi_ok(rc);
            mc_check(token == (int)ic.call, "rank 0's message");
            icall_post(&ic);
        } else {
            icall_post(&ic);
        }
        icall_complete(&ic, ic.call);
        snprintf(g_check, sizeof(g_check), "%s", ic.name);
        tally_check(&t);
        icall_finish(&ic);
    }
}

static void test_local(void)
{
    static const int kinds[] = {K_BARRIER, K_ALLREDUCE};
    static const char *names[] = {"a fresh dup of MPI_COMM_WORLD",
                                  "a dup of MPI_COMM_WORLD after a blocking "
                                  "MPI_Barrier"};
    ic_comm_t c;
    MPI_Comm dup;
    int ki, v, rc;

    if (g_size < 2) {
        return;
    }
    for (ki = 0; ki < 2; ++ki) {
        for (v = 0; v < 2; ++v) {
            snprintf(g_check, sizeof(g_check), "local: MPI_Comm_dup");
            rc = MPI_Comm_dup(MPI_COMM_WORLD, &dup);
            mc_mpi_ok(rc);
            if (rc != MPI_SUCCESS) {
                return;
            }
            comm_init(&c, dup, names[v]);
            if (v) {
                make_team(&c);
            }
            local_rounds(&c, kinds[ki]);
            MPI_Comm_free(&dup);
        }
    }
}

/* ------------------------------------------------------------------ */
/* fallback: what the library does not take                            */

/* mc_user_sum_mod for a datatype of 2 ints: len counts pairs */
static void user_sum_pair(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int n = 2 * *len;

    mc_user_sum_mod(in, inout, &n, dt);
}

/* an MPI_Iallreduce of n_ints ints (n_dt of dt) with op, which the
 * previous module must run: lor folds with ||, else sums modulo MC_SUM_MOD.
 * fb_init() computes its data and result, fb_post() posts it, fb_finish()
 * checks it once completed (and frees its buffers). */
typedef struct {
    ic_comm_t    *w;
    unsigned long call;
    MPI_Datatype  dt;
    MPI_Op        op;
    int           n_dt, n_ints, lor, in_place;
    size_t        len;
    int          *in, *out, *exp;
    MPI_Request   req;
    char          name[200];
} fbcall_t;

/* element i of rank r's input */
static int fb_value(const fbcall_t *f, int r, int i)
{
    uint64_t v = mc_value(f->call, r, 0, (size_t)i);

    return f->lor ? (v % 5 == 0) : (int)(v % MC_SUM_MOD);
}

static void fb_init(fbcall_t *f, const char *section, ic_comm_t *w,
                    const char *what, MPI_Datatype dt, int n_dt, MPI_Op op,
                    int n_ints, int lor, int in_place)
{
    int i, r, v;

    memset(f, 0, sizeof(*f));
    f->w        = w;
    f->call     = ++g_call;
    f->dt       = dt;
    f->op       = op;
    f->n_dt     = n_dt;
    f->n_ints   = n_ints;
    f->lor      = lor;
    f->in_place = in_place;
    f->len      = (size_t)n_ints * sizeof(int);
    f->in       = mc_alloc_guarded(f->len);
    f->out      = mc_alloc_guarded(f->len);
    f->exp      = malloc(f->len);
    f->req      = MPI_REQUEST_NULL;
    snprintf(f->name, sizeof(f->name), "%s: MPI_Iallreduce %s%s on %s",
             section, what, in_place ? " in place" : "", w->name);
    for (i = 0; i < n_ints; ++i) {
        f->exp[i] = 0;
        for (r = 0; r < w->size; ++r) {
            v = fb_value(f, r, i);
            f->exp[i] = lor ? (f->exp[i] || v) : (f->exp[i] + v) % MC_SUM_MOD;
            if (r == w->rank) {
                (in_place ? f->out : f->in)[i] = v;
            }
        }
    }
}

static void fb_post(fbcall_t *f)
{
    int rc;

    snprintf(g_check, sizeof(g_check), "%s", f->name);
    rc = MPI_Iallreduce(f->in_place ? MPI_IN_PLACE : f->in, f->out, f->n_dt,
                        f->dt, f->op, f->w->comm, &f->req);
    mc_mpi_ok(rc);
}

static void fb_finish(fbcall_t *f)
{
    int i;

    snprintf(g_check, sizeof(g_check), "%s", f->name);
    ++g_checks;
    for (i = 0; i < f->n_ints; ++i) {
        if (f->out[i] != f->exp[i]) {
            mc_fail("element %d of %d: %d, expected %d", i, f->n_ints,
                    f->out[i], f->exp[i]);
            break;
        }
    }
    if (i == f->n_ints) {
        mc_digest(f->out, f->len);
    }
    if (!f->in_place) {
        for (i = 0; i < f->n_ints; ++i) {
            if (f->in[i] != fb_value(f, f->w->rank, i)) {
                break;
            }
        }
        mc_check(i == f->n_ints, "send buffer changed by the call");
    }
    mc_check_guards(f->in, f->len, f->out, f->len);
    free(f->in);
    free(f->out);
    free(f->exp);
    f->in = f->out = f->exp = NULL;
}

/* one such call alone, with its own counter check */
static void fallback_one(ic_comm_t *w, const char *what, MPI_Datatype dt,
                         int n_dt, MPI_Op op, int n_ints, int lor,
                         int in_place)
{
    fbcall_t f;
    tally_t t;

    fb_init(&f, "fallback", w, what, dt, n_dt, op, n_ints, lor, in_place);
    tally_begin(&t);
    tally_path(&t, 0, comm_ours(w) ? PATH_PREV : PATH_NONE);
    fb_post(&f);
    complete(&f.req, f.call);
    tally_check(&t);
    fb_finish(&f);
}

static void test_fallback(ic_comm_t *w)
{
    enum { N = 301 };
    MPI_Datatype pair;
    MPI_Op op, op_pair;

    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    MPI_Op_create(mc_user_sum_mod, 1, &op);
    MPI_Op_create(user_sum_pair, 1, &op_pair);

    fallback_one(w, "MPI_INT, a user operation (sum mod 1000003)", MPI_INT,
                 N, op, N, 0, 0);
    fallback_one(w, "MPI_INT, a user operation (sum mod 1000003)", MPI_INT,
                 N, op, N, 0, 1);
    fallback_one(w, "MPI_INT MPI_LOR", MPI_INT, N, MPI_LOR, N, 1, 0);
    fallback_one(w, "contiguous(2, MPI_INT), a user operation", pair, N,
                 op_pair, 2 * N, 0, 0);

    MPI_Op_free(&op);
    MPI_Op_free(&op_pair);
    MPI_Type_free(&pair);
}

/* ------------------------------------------------------------------ */
/* overlap: MPI_Test between slices of local computation               */

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* a slice of local work: deterministic, so it can be checked */
static void compute_slice(double *work, int n, long slice)
{
    int j;

    for (j = 0; j < n; ++j) {
        work[j] = work[j] * 0.5 + (double)((j + slice) % 7);
    }
}

static void test_overlap(ic_comm_t *w)
{
    enum { NW = 4096 };
    static double work[NW], again[NW];
    icall_t ic;
    tally_t t;
    long slices, s;
    int round, flag, rc;
    double t0;

    for (round = 0; round < 2; ++round) {
        icall_init(&ic, K_ALLREDUCE, w, &rtypes[round ? 3 : 1],
                   &rops[round], NULL, g_large, 0, round, 0);
        snprintf(ic.name + strlen(ic.name), sizeof(ic.name) - strlen(ic.name),
                 " (overlap: MPI_Test between compute slices)");
        tally_begin(&t);
        tally_path(&t, 0, ic.path);
        icall_post(&ic);
        memset(work, 0, sizeof(work));
        t0 = now();
        for (slices = 0, flag = 0; !flag; ++slices) {
            compute_slice(work, NW, slices);
            rc = MPI_Test(&ic.req, &flag, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS) {
                mc_mpi_ok(rc);
                break;
            }
            if (!flag && (now() - t0 > 120.0)) {
                mc_fail("not complete after %ld slices (120 s) of MPI_Test",
                        slices);
                MPI_Wait(&ic.req, MPI_STATUS_IGNORE);
                break;
            }
        }
        memset(again, 0, sizeof(again));
        for (s = 0; s < slices; ++s) {
            compute_slice(again, NW, s);
        }
        mc_check(memcmp(work, again, sizeof(work)) == 0,
                 "local computation between MPI_Test calls went wrong");
        tally_check(&t);
        icall_finish(&ic);
        if (g_rank == 0) {
            printf("overlap: %s completed after %ld compute slices\n",
                   ic.name, slices);
        }
    }
}

/* ------------------------------------------------------------------ */
/* comms: calls outstanding on several communicators                   */

/* three calls (a on x, b on y, c on x), posted in that order, completed in
 * the opposite */
static void comms_three(ic_comm_t *x, ic_comm_t *y, int round, tally_t *t)
{
    icall_t ic[3];
    ic_comm_t *on[3] = {x, y, x};
    int i;

    for (i = 0; i < 3; ++i) {
        icall_pick(&ic[i], (round + 3 * i) % K_LAST, on[i], round + i,
                   (round % 4 == 3) ? g_large / 8 + 1 :
                   1 + (size_t)(round * 31 + i * 7) % 250);
        tally_path(t, 0, ic[i].path);
        icall_post(&ic[i]);
    }
    for (i = 2; i >= 0; --i) {
        icall_complete(&ic[i], (unsigned long)(round + i));
    }
    for (i = 0; i < 3; ++i) {
        icall_finish(&ic[i]);
    }
}

static void test_comms(ic_comm_t *w)
{
    ic_comm_t d, h;
    MPI_Comm dup, half;
    tally_t t;
    int round, rc;

    snprintf(g_check, sizeof(g_check), "comms: MPI_Comm_dup");
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    mc_mpi_ok(rc);
    if (rc != MPI_SUCCESS) {
        return;
    }
    comm_init(&d, dup, "a dup of MPI_COMM_WORLD");
    make_team(w);
    make_team(&d);
    tally_begin(&t);
    for (round = 0; round < 9; ++round) {
        comms_three(w, &d, round, &t);
    }
    snprintf(g_check, sizeof(g_check), "comms: counters (MPI_COMM_WORLD "
             "and a dup)");
    tally_check(&t);

    snprintf(g_check, sizeof(g_check), "comms: MPI_Comm_split");
    rc = MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, g_rank, &half);
    mc_mpi_ok(rc);
    if (rc == MPI_SUCCESS) {
        comm_init(&h, half, (g_rank % 2) ? "the odd half" : "the even half");
        make_team(&h);
        tally_begin(&t);
        for (round = 0; round < 9; ++round) {
            comms_three(&h, w, round, &t);
        }
        snprintf(g_check, sizeof(g_check), "comms: counters (halves of an "
                 "MPI_Comm_split and MPI_COMM_WORLD)");
        tally_check(&t);
        MPI_Comm_free(&half);
    }
    MPI_Comm_free(&dup);
}

/* ------------------------------------------------------------------ */
/* MPI_Request_free of an active request (free and nbteam sections)     */

/* buffers of freed calls: MPI never says when they are done with, so they
 * stay until after MPI_Finalize */
static void *g_freed[16];
static int g_n_freed;

/* one check: MPI_Request_free of ic's active request (section: the name's
 * prefix); the call's data is not checked (MPI gives no completion
 * guarantee), its buffers are kept */
static void free_active(icall_t *ic, const char *section)
{
    int rc;

    snprintf(g_check, sizeof(g_check), "%s: MPI_Request_free of an active "
             "%s", section, ic->name);
    rc = MPI_Request_free(&ic->req);
    ++g_checks;
    if (rc == MPI_SUCCESS) {
        if (ic->req != MPI_REQUEST_NULL) {
            mc_fail("the request is not MPI_REQUEST_NULL after "
                    "MPI_Request_free");
        }
    } else if ((g_expect == EXPECT_CXL) && (ic->path == PATH_LIB)) {
        mc_fail_rc(rc);
        MPI_Wait(&ic->req, MPI_STATUS_IGNORE);
    } else {
        /* Open MPI 4.1.4's libnbc frees no active request
         * (MPI_ERR_REQUEST): the request stays, wait for it */
        ++g_observed;
        MPI_Wait(&ic->req, MPI_STATUS_IGNORE);
    }
    if (g_n_freed + 2 <= (int)(sizeof(g_freed) / sizeof(g_freed[0]))) {
        g_freed[g_n_freed++] = ic->sbuf;
        g_freed[g_n_freed++] = ic->rbuf;
    } else {
        /* never: the sections free at most 8 calls */
        mc_fail("no room to keep a freed call's buffers");
    }
    ic->sbuf = ic->rbuf = NULL;
}

/* ------------------------------------------------------------------ */
/* nbteam: non-blocking calls on a communicator without a team          */

/* c: a fresh MPI_Comm_dup of MPI_COMM_WORLD, no collective on it yet;
 * *teams0: the coll_cxl_teams level before it.  0 (a FAIL line) if the
 * dup failed. */
static int nbteam_dup(ic_comm_t *c, const char *name,
                      unsigned long long *teams0)
{
    MPI_Comm dup;
    int rc;

    snprintf(g_check, sizeof(g_check), "nbteam: MPI_Comm_dup for %s", name);
    *teams0 = mc_pvar(CNT_TEAMS);
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    mc_mpi_ok(rc);
    if (rc != MPI_SUCCESS) {
        return 0;
    }
    comm_init(c, dup, name);
    return 1;
}

/* the team a fresh communicator has once non-blocking calls alone ran on
 * it (1 or 0), or (blocking) once a blocking collective ran too */
static unsigned long long nbteam_made(const ic_comm_t *c, int blocking)
{
    if (!comm_ours(c)) {
        return 0;
    }
    return ((g_expect == EXPECT_CXL) && (blocking || g_nbteam)) ||
           ((g_expect == EXPECT_NBOFF) && blocking);
}

static void nbteam_free(ic_comm_t *c)
{
    snprintf(g_check, sizeof(g_check), "nbteam: MPI_Comm_free of %s",
             c->name);
    mc_mpi_ok(MPI_Comm_free(&c->comm));
}

/* (a) a batch of six calls posted back to back, one MPI_Waitall */
static void nbteam_batch(void)
{
    enum { N_IC = 5 };
    ic_comm_t c;
    icall_t ic[N_IC];
    fbcall_t fb;
    MPI_Request reqs[N_IC + 1];
    unsigned long long teams0;
    MPI_Op op;
    tally_t t;
    int i, rc, flag;

    if (!nbteam_dup(&c, "a fresh dup (nbteam: a batch before any team)",
                    &teams0)) {
        return;
    }
    MPI_Op_create(mc_user_sum_mod, 1, &op);
    tally_begin(&t);
    icall_init(&ic[0], K_ALLREDUCE, &c, &rtypes[0], &rops[0], NULL, 1001, 0,
               0, 0);
    fb_init(&fb, "nbteam", &c, "MPI_INT, a user operation (sum mod 1000003)",
            MPI_INT, 301, op, 301, 0, 0);
    icall_init(&ic[1], K_BCAST, &c, NULL, NULL, &mtypes[1], 7, c.size - 1, 0,
               0);
    icall_init(&ic[2], K_ALLGATHER, &c, NULL, NULL, &mtypes[2], 9, 0, 0, 0);
    icall_init(&ic[3], K_BARRIER, &c, NULL, NULL, NULL, 0, 0, 0, 0);
    icall_init(&ic[4], K_ALLTOALL, &c, NULL, NULL, &mtypes[1], 5, 0, 0, 0);
    /* posted in the order MPI_Iallreduce, the user operation's,
     * MPI_Ibcast, MPI_Iallgather, MPI_Ibarrier, MPI_Ialltoall */
    for (i = 0; i < N_IC; ++i) {
        tally_path(&t, 0, ic[i].path);
        icall_post(&ic[i]);
        reqs[i + (i > 0)] = ic[i].req;
        if (i == 0) {
            tally_path(&t, 0, comm_ours(&c) ? PATH_PREV : PATH_NONE);
            fb_post(&fb);
            reqs[1] = fb.req;
        }
    }
    snprintf(g_check, sizeof(g_check), "nbteam: %d calls posted on %s, "
             "completed by one MPI_Waitall", N_IC + 1, c.name);
    rc = MPI_Waitall(N_IC + 1, reqs, MPI_STATUSES_IGNORE);
    mc_mpi_ok(rc);
    for (i = 0, flag = 1; i < N_IC + 1; ++i) {
        flag = flag && (reqs[i] == MPI_REQUEST_NULL);
    }
    mc_check(flag, "a request is not MPI_REQUEST_NULL after completion");
    snprintf(g_check, sizeof(g_check), "nbteam: counters over the batch on "
             "%s", c.name);
    tally_check(&t);
    snprintf(g_check, sizeof(g_check), "nbteam: coll_cxl_teams after the "
             "batch on %s", c.name);
    teams_check(teams0 + nbteam_made(&c, 0), "one more than before the dup "
                "with coll_cxl_nb_team and a team, else as many");
    fb_finish(&fb);
    for (i = 0; i < N_IC; ++i) {
        icall_finish(&ic[i]);
    }
    MPI_Op_free(&op);
    nbteam_free(&c);
}

/* (b) 24 MPI_Iallreduce outstanding at once, completed last first */
static void nbteam_many(void)
{
    enum { N_AR = 24 };
    icall_t *ic;
    ic_comm_t c;
    unsigned long long teams0;
    size_t count;
    tally_t t;
    int i;

    if (!nbteam_dup(&c, "a fresh dup (nbteam: 24 calls before any team)",
                    &teams0)) {
        return;
    }
    ic = calloc(N_AR, sizeof(*ic));
    tally_begin(&t);
    for (i = 0; i < N_AR; ++i) {
        count = (i == 11) ? g_large / 4 + 1 : 1 + ((size_t)i * 131) % 700;
        /* as in many: no MPI_BXOR of doubles */
        icall_init(&ic[i], K_ALLREDUCE, &c, &rtypes[i % N_RTYPES],
                   &rops[(i / N_RTYPES) % (N_ROPS - (i % N_RTYPES == 1))],
                   NULL, count, 0, 0, 0);
        tally_path(&t, 0, ic[i].path);
        icall_post(&ic[i]);
    }
    for (i = N_AR - 1; i >= 0; --i) {
        snprintf(g_check, sizeof(g_check), "nbteam: %d MPI_Iallreduce "
                 "outstanding on %s, completing #%d (MPI_Wait): %s", N_AR,
                 c.name, i, ic[i].name);
        complete(&ic[i].req, 0);
    }
    snprintf(g_check, sizeof(g_check), "nbteam: counters over %d "
             "MPI_Iallreduce on %s", N_AR, c.name);
    tally_check(&t);
    for (i = 0; i < N_AR; ++i) {
        icall_finish(&ic[i]);
    }
    free(ic);
    nbteam_free(&c);
}

/* (c) blocking MPI_Allreduce and MPI_Bcast while the first MPI_Iallreduce
 * is outstanding (held until the team is made) */
static void nbteam_blocking(void)
{
    ic_comm_t c;
    icall_t nb, b1, b2;
    unsigned long long teams0;
    tally_t t;

    if (!nbteam_dup(&c, "a fresh dup (nbteam: blocking calls across the "
                    "first call)", &teams0)) {
        return;
    }
    tally_begin(&t);
    icall_pick(&nb, K_ALLREDUCE, &c, 5, 1001);
    tally_path(&t, 0, nb.path);
    icall_post(&nb);
    icall_init(&b1, K_ALLREDUCE, &c, &rtypes[1], &rops[0], NULL, 1001, 0, 0,
               1);
    tally_path(&t, 1, b1.path);
    icall_post(&b1);
    icall_finish(&b1);
    icall_init(&b2, K_BCAST, &c, NULL, NULL, &mtypes[1], 257, c.size - 1, 0,
               1);
    tally_path(&t, 1, b2.path);
    icall_post(&b2);
    icall_finish(&b2);
    icall_complete(&nb, 0);
    snprintf(g_check, sizeof(g_check), "nbteam: counters (an MPI_Iallreduce "
             "across MPI_Allreduce and MPI_Bcast on %s)", c.name);
    tally_check(&t);
    snprintf(g_check, sizeof(g_check), "nbteam: coll_cxl_teams after "
             "MPI_Allreduce and MPI_Bcast on %s", c.name);
    teams_check(teams0 + nbteam_made(&c, 1), "one more than before the dup "
                "once a blocking collective ran on it");
    icall_finish(&nb);
    nbteam_free(&c);
}

/* (d) MPI_Request_free of the first call, an MPI_Barrier, then a call */
static void nbteam_request_free(void)
{
    ic_comm_t c;
    icall_t ic;
    unsigned long long teams0;
    tally_t t;

    if (!nbteam_dup(&c, "a fresh dup (nbteam: MPI_Request_free of the "
                    "first call)", &teams0)) {
        return;
    }
    tally_begin(&t);
    icall_pick(&ic, K_ALLREDUCE, &c, 2, 1003);
    tally_path(&t, 0, ic.path);
    icall_post(&ic);
    free_active(&ic, "nbteam");
    /* the freed call is started (and counted) before the barrier runs */
    icall_init(&ic, K_BARRIER, &c, NULL, NULL, NULL, 0, 0, 0, 1);
    tally_path(&t, 1, ic.path);
    icall_post(&ic);
    icall_pick(&ic, K_ALLREDUCE, &c, 3, 1001);
    tally_path(&t, 0, ic.path);
    icall_post(&ic);
    icall_complete(&ic, 0);
    snprintf(g_check, sizeof(g_check), "nbteam: counters (a freed "
             "MPI_Iallreduce, MPI_Barrier, MPI_Iallreduce on %s)", c.name);
    tally_check(&t);
    icall_finish(&ic);
    nbteam_free(&c);
}

/* MPI_Comm_free of a communicator whose call is libnbc's, put off until
 * the call completed (see nbteam_comm_free()) */
static long g_free_waited;

/* (e) MPI_Comm_free while the only call is outstanding, then MPI_Wait.
 * Open MPI 4.1.4's libnbc crashes on it (SIGSEGV in its progress, pml ucx
 * and ob1 alike, without coll/cxl too): where the call is libnbc's (the
 * modes other than cxl, or a fallback counted when it was posted: a call
 * coll/cxl holds is counted once it starts) it is waited for first, and
 * counted on the "observed:" line; the counter check stays. */
static void nbteam_comm_free(void)
{
    ic_comm_t c;
    icall_t ic;
    unsigned long long teams0, f0;
    tally_t t;
    int ours;

    if (!nbteam_dup(&c, "a fresh dup (nbteam: freed with its only call "
                    "outstanding)", &teams0)) {
        return;
    }
    tally_begin(&t);
    icall_pick(&ic, K_ALLREDUCE, &c, 6, 777);
    tally_path(&t, 0, ic.path);
    f0 = mc_pvar(CNT_FALLBACKS);
    icall_post(&ic);
    ours = (g_expect == EXPECT_CXL) && (mc_pvar(CNT_FALLBACKS) == f0);
    if (ours) {
        nbteam_free(&c);
        icall_complete(&ic, 0);
    } else {
        ++g_free_waited;
        icall_complete(&ic, 0);
        nbteam_free(&c);
    }
    snprintf(g_check, sizeof(g_check), "nbteam: counters (an MPI_Iallreduce "
             "completed after MPI_Comm_free of %s)", c.name);
    tally_check(&t);
    icall_finish(&ic);
}

static void test_nbteam(void)
{
    nbteam_batch();
    nbteam_many();
    nbteam_blocking();
    nbteam_request_free();
    nbteam_comm_free();
}

/* ------------------------------------------------------------------ */
/* idup: blocking collectives on the parent of an MPI_Comm_idup         */

/* a section run only where MPI_ICOLL_ONLY names it */
static int only_named(const char *name)
{
    const char *only = getenv("MPI_ICOLL_ONLY");

    return (only != NULL) && (only[0] != '\0') && mc_section(name);
}

#define IDUP_ROUNDS 6
#define IDUP_CALLS  40

/* the counters over one round: the program's calls (blk blocking and lib
 * non-blocking ones coll/cxl's) in the library, no other non-blocking call
 * there; Open MPI's agreement calls, which reach coll/cxl on
 * MPI_COMM_WORLD, handed on */
static void idup_counters(const tally_t *t, int round)
{
    unsigned long long dc = mc_pvar(CNT_CALLS) - t->c0[CNT_CALLS];
    unsigned long long dn = mc_pvar(CNT_NB) - t->c0[CNT_NB];
    unsigned long long df = mc_pvar(CNT_FALLBACKS) - t->c0[CNT_FALLBACKS];
    unsigned long long blk = (unsigned long long)t->blk;
    unsigned long long lib = (unsigned long long)t->lib;
    int ok;

    snprintf(g_check, sizeof(g_check), "idup: counters (round %d)", round);
    ++g_checks;
    switch (g_expect) {
    case EXPECT_OFF:
        ok = (dc == 0) && (dn == 0) && (df == 0);
        break;
    case EXPECT_DECLINED:
        ok = (dc == 0) && (dn == 0) && (df >= blk + lib);
        break;
    case EXPECT_NBOFF:
        ok = (dc == blk) && (dn == 0);
        break;
    default:
        ok = (dc == blk + lib) && (dn == lib) &&
             ((df > 0) || !comm_ours(&g_world));
        break;
    }
    if (!ok) {
        mc_fail("coll/cxl counted %llu library calls (%llu non-blocking), "
                "%llu fallbacks; expected the program's %llu blocking and "
                "%llu non-blocking calls in the library, no other "
                "non-blocking one, and Open MPI's context-id MPI_Iallreduce "
                "calls handed on (coll_cxl_cid_prev)", dc, dn, df, blk, lib);
    }
}

/* nb: the program's calls are MPI_Iallreduce / MPI_Ibcast + MPI_Wait */
static void idup_round(int round, int nb)
{
    ic_comm_t d;
    MPI_Request req;
    MPI_Comm dup;
    icall_t ic;
    tally_t t;
    int i, rc;

    tally_begin(&t);
    snprintf(g_check, sizeof(g_check), "idup: MPI_Comm_idup of "
             "MPI_COMM_WORLD (round %d)", round);
    rc = MPI_Comm_idup(MPI_COMM_WORLD, &dup, &req);
    mc_mpi_ok(rc);
    if (rc != MPI_SUCCESS) {
        return;
    }
    if ((round & 1) && (g_world.rank == g_world.size - 1)) {
        usleep(2000); /* the others' agreement steps start in their calls */
    }
    for (i = 0; i < IDUP_CALLS; ++i) {
        if ((i % 4) == 3) {
            icall_init(&ic, K_BCAST, &g_world, NULL, NULL,
                       &mtypes[i % N_MTYPES], (size_t)(1 + i),
                       i % g_world.size, 0, !nb);
        } else {
            icall_init(&ic, K_ALLREDUCE, &g_world, &rtypes[i % N_RTYPES],
                       &rops[0], NULL, (size_t)(1 + i % 5), 0, 0, !nb);
        }
        tally_path(&t, !nb, ic.path);
        icall_post(&ic);
        icall_complete(&ic, 0);
        icall_finish(&ic);
        if ((g_world.rank == 0) && ((i % 7) == 0)) {
            usleep(100);
        }
    }
    snprintf(g_check, sizeof(g_check), "idup: MPI_Wait for MPI_Comm_idup "
             "(round %d)", round);
    rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    mc_mpi_ok(rc);
    idup_counters(&t, round);
    if (rc != MPI_SUCCESS) {
        return;
    }
    comm_init(&d, dup, "an MPI_Comm_idup of MPI_COMM_WORLD");
    icall_init(&ic, K_ALLREDUCE, &d, &rtypes[3], &rops[0], NULL, 3, 0, 0, 1);
    icall_run(&ic);
    snprintf(g_check, sizeof(g_check), "idup: MPI_Comm_free (round %d)",
             round);
    mc_mpi_ok(MPI_Comm_free(&d.comm));
}

static void test_idup(int nb)
{
    icall_t ic;
    int round;

    for (round = 0; round < IDUP_ROUNDS; ++round) {
        idup_round(round, nb);
    }
    if (nb) {
        return;
    }
    /* the program's own call of the agreement's shape */
    icall_init(&ic, K_ALLREDUCE, &g_world, &rtypes[0], &rops[1], NULL, 1, 0,
               0, 0);
    icall_run(&ic);
}

/* ------------------------------------------------------------------ */
/* free: MPI_Request_free of an active request                         */

static void test_free(ic_comm_t *w)
{
    icall_t ic;
    int round, j, rc;

    for (round = 0; round < 3; ++round) {
        for (j = 0; j < ((round == 1) ? 2 : 1); ++j) {
            icall_pick(&ic, K_ALLREDUCE, w, round + j, 1001 + (size_t)round);
            icall_post(&ic);
            free_active(&ic, "free");
        }
        snprintf(g_check, sizeof(g_check), "free: MPI_Barrier after "
                 "MPI_Request_free (#%d)", round);
        rc = MPI_Barrier(w->comm);
        mc_mpi_ok(rc);
        /* later calls: right results (no counter check: the freed call
         * may be counted when it ends, inside them) */
        icall_pick(&ic, K_ALLREDUCE, w, round, 7 + (size_t)round);
        icall_post(&ic);
        icall_complete(&ic, (unsigned long)round);
        icall_finish(&ic);
        icall_init(&ic, K_ALLREDUCE, w, &rtypes[round % N_RTYPES], &rops[0],
                   NULL, 1001, 0, round % 2, 1);
        snprintf(ic.name, sizeof(ic.name), "free: MPI_Allreduce after "
                 "MPI_Request_free (#%d)", round);
        icall_post(&ic);
        icall_finish(&ic);
    }
}

/* ------------------------------------------------------------------ */

/* the counters the mode needs; MPI_COMM_WORLD's calls before its first
 * blocking collective (no team yet: with coll_cxl_nb_team they make it),
 * then that collective (its team, if not made yet) */
static void setup(ic_comm_t *w)
{
    icall_t ic;
    unsigned long long teams;
    int c;

    snprintf(g_check, sizeof(g_check), "coll/cxl counters");
    if (g_expect != EXPECT_OFF) {
        for (c = 0; c < CNT_LAST; ++c) {
            ++g_checks;
            if (g_pvar_have[c]) {
                continue;
            }
            if (c == CNT_NB) {
                mc_fail("coll/cxl's MPI_T counter coll_cxl_nb_calls not found: "
                        "this coll/cxl counts no non-blocking collectives (it "
                        "does not take them)");
            } else {
                mc_fail("coll/cxl's MPI_T counter %s not found: component not "
                        "loaded", cnt_names[c]);
            }
        }
    }
    teams = mc_pvar(CNT_TEAMS);
    icall_init(&ic, K_BARRIER, w, NULL, NULL, NULL, 0, 0, 0, 0);
    snprintf(ic.name, sizeof(ic.name), "setup: MPI_Ibarrier on "
             "MPI_COMM_WORLD before its first blocking collective");
    icall_run(&ic);
    icall_pick(&ic, K_ALLREDUCE, w, 0, 3);
    snprintf(ic.name, sizeof(ic.name), "setup: MPI_Iallreduce on "
             "MPI_COMM_WORLD before its first blocking collective");
    icall_run(&ic);
    /* with coll_cxl_nb_team the MPI_Ibarrier started MPI_COMM_WORLD's
     * team, made before either call ran */
    snprintf(g_check, sizeof(g_check), "setup: coll_cxl_teams after "
             "MPI_COMM_WORLD's non-blocking calls, before any blocking one");
    teams_check((g_expect == EXPECT_DECLINED) ? 0 :
                teams + nbteam_made(w, 0),
                (g_expect == EXPECT_DECLINED) ? "every team declined" :
                g_nbteam ? "coll_cxl_nb_team: made by the MPI_Ibarrier" :
                "coll_cxl_nb_team 0: no team before a blocking collective");
    /* else coll/cxl makes MPI_COMM_WORLD's team at its first blocking
     * collective (not a barrier: Open MPI ends one of a single rank
     * before any module) */
    icall_init(&ic, K_ALLREDUCE, w, &rtypes[0], &rops[0], NULL, 1, 0, 0, 1);
    snprintf(ic.name, sizeof(ic.name), "setup: MPI_COMM_WORLD's first "
             "blocking collective (MPI_Allreduce)");
    icall_run(&ic);
    snprintf(g_check, sizeof(g_check), "setup: coll_cxl_teams after "
             "MPI_COMM_WORLD's first blocking collective");
    teams_check((g_expect == EXPECT_DECLINED) ? 0 :
                teams + nbteam_made(w, 1),
                (g_expect == EXPECT_DECLINED) ? "every team declined" :
                "MPI_COMM_WORLD's team");
}

int main(int argc, char **argv)
{
    unsigned long long c0[CNT_LAST], sums[8], mine[5];
    int thread, provided;
    const char *e;
    uint64_t d;
    int i, rc;

    g_expect = mc_env_choice("EXPECT", expect_names, EXPECT_LAST);
    if ((e = getenv("MPI_ICOLL_NBTEAM")) != NULL) {
        g_nbteam = (atoi(e) != 0);
    }
    mc_init(&argc, &argv, &thread, &provided);
    mc_fault_names_check();   /* after MPI_Init: UCX's handler is set */
    comm_init(&g_world, MPI_COMM_WORLD, "MPI_COMM_WORLD");
    mc_pvars_init(cnt_names, CNT_LAST);
    rtypes_init();
    mtypes_init();
    snprintf(g_check, sizeof(g_check), "MPI_Init_thread");
    mc_check(provided >= thread, "the thread level asked for not provided");
    for (i = 0; i < CNT_LAST; ++i) {
        c0[i] = mc_pvar(i);
    }

    setup(&g_world);
    if (mc_section("each")) {
        test_each(&g_world);
    }
    if (mc_section("many")) {
        test_many(&g_world);
    }
    if (mc_section("mixed")) {
        test_mixed(&g_world);
    }
    if (mc_section("local")) {
        test_local();
    }
    if (mc_section("fallback")) {
        test_fallback(&g_world);
    }
    if (mc_section("overlap")) {
        test_overlap(&g_world);
    }
    if (mc_section("comms")) {
        test_comms(&g_world);
    }
    if (mc_section("nbteam")) {
        test_nbteam();
    }
    if (mc_section("idup")) {
        test_idup(0);
    }
    if (only_named("idupnb")) {
        test_idup(1);
    }
    if (mc_section("free")) {
        test_free(&g_world);
    }

    snprintf(g_check, sizeof(g_check), "summary");
    mine[0] = mc_pvar(CNT_CALLS) - c0[CNT_CALLS];
    mine[1] = mc_pvar(CNT_NB) - c0[CNT_NB];
    mine[2] = mc_pvar(CNT_FALLBACKS) - c0[CNT_FALLBACKS];
    mine[3] = mc_pvar(CNT_TEAMS);
    mine[4] = (unsigned long long)g_free_waited;
    d = mc_summary_sums(mine, 5, sums);
    if (g_rank == 0) {
        printf("counters: calls %llu nb_calls %llu fallbacks %llu teams %llu"
               "%s\n", sums[2], sums[3], sums[4], sums[5],
               !g_pvar_have[CNT_CALLS] ? " (no coll/cxl counters)" :
               !g_pvar_have[CNT_NB] ? " (no coll_cxl_nb_calls)" : "");
        printf("digest: %016llx\n", (unsigned long long)d);
        printf("observed: %llu MPI_Request_free of an active request refused "
               "(Open MPI's libnbc: MPI_ERR_REQUEST; waited for instead); "
               "%llu MPI_Comm_free with a libnbc call outstanding put off "
               "(libnbc crashes on it; waited for first)\n", sums[7],
               sums[6]);
        mc_print_totals((long)sums[0], (long)sums[1]);
    }
    rc = mc_finalize((long)sums[1]);
    for (i = 0; i < g_n_freed; ++i) {
        free(g_freed[i]);
    }
    return rc;
}
