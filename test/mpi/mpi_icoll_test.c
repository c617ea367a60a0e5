/*
 * mpi_icoll_test - the non-blocking collectives coll/cxl takes (MPI_Ibarrier,
 * MPI_Ibcast, MPI_Ireduce, MPI_Iallreduce, MPI_Igather, MPI_Iscatter,
 * MPI_Iallgather, MPI_Ireduce_scatter_block, MPI_Ialltoall), checked against
 * values computed locally, on any number of ranks (test/mpi/run-mpi-icoll.sh
 * runs it at np 1..8 with coll/cxl, without it, and with coll/cxl's
 * non-blocking collectives off).
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
 *              only after receiving; on a fresh MPI_Comm_dup and on one
 *              that ran a blocking MPI_Barrier (a hang is the watchdog's)
 *   fallback   MPI_Iallreduce with a user operation on MPI_INT (also in
 *              place), MPI_LOR, and a derived datatype (contiguous(2,
 *              MPI_INT)) with a user operation: the previous module's
 *   overlap    an MPI_Iallreduce of MPI_ICOLL_LARGE values completed by
 *              MPI_Test between slices of local computation
 *   comms      calls outstanding on MPI_COMM_WORLD and a duplicate at once
 *              (world, dup, world; completed in the opposite order), and on
 *              the halves of an MPI_Comm_split with the world's
 *   free       MPI_Request_free of an active MPI_Iallreduce, then an
 *              MPI_Barrier; later calls right (the freed call's data is not
 *              checked: MPI gives no completion guarantee).  Run last: the
 *              freed calls may complete during any later call
 *
 * MPI_ICOLL_ONLY=each,local,... runs only the sections named.  Before any
 * section, MPI_Ibarrier and MPI_Iallreduce on MPI_COMM_WORLD before its
 * first blocking collective (coll/cxl has no team for it yet: the previous
 * module's), then a blocking MPI_Allreduce (its team).
 *
 * Every call gets data derived from (rank, peer, index, call number), so
 * no two calls see the same bytes.  Which path ran is checked with
 * coll/cxl's MPI_T counters coll_cxl_calls (calls its library ran,
 * blocking or not), coll_cxl_nb_calls (non-blocking ones among them) and
 * coll_cxl_fallbacks (calls handed to the previous module), per call where
 * calls run one at a time, per section where several are outstanding:
 *
 *   MPI_ICOLL_EXPECT=cxl      non-blocking calls with predefined datatypes
 *                             and operations on a communicator with a team
 *                             (made at its first blocking collective coll/cxl
 *                             takes) run in the library, one count each;
 *                             before the team, and with a user operation,
 *                             MPI_LOR or a derived datatype in a reduction,
 *                             in the previous module; calls Open MPI ends
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
 *   MPI_ICOLL_THREAD=multiple MPI_Init_thread with that level (funneled,
 *                             serialized, multiple)
 *
 * Every rank prints its first failures to stderr ("FAIL: rank R: CHECK:
 * WHAT", MPI_ICOLL_MAX_PRINT of them, default 5); rank 0 then prints
 * "counters: calls N nb_calls N fallbacks N teams N" (sums over the ranks),
 * "digest: HEX" (a hash of every checked result of every rank, the same
 * with and without the component), "observed: N ..." (MPI_Request_free
 * refusals of Open MPI's libnbc, which frees no active request) and
 * "mpi-icoll: N checks, N failed".  Exit status 1 if a check failed.
 * MPI_ICOLL_TIMEOUT (default 300 s) ends a hung job with the name of the
 * running check, and a rank that crashes prints it before its backtrace
 * ("mpi_icoll_test: signal 11 in check: ...").  Open MPI 4.1.4's op/avx saturates 8-bit sums: runs whose
 * non-blocking calls are Open MPI's need --mca op ^avx.
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define POISON    0xa5
#define GUARD     32

static int g_rank, g_size;
static long g_max_print = 5;     /* FAIL lines per rank (MPI_ICOLL_MAX_PRINT) */
static unsigned long g_call;          /* changes the data of every call */
static long g_checks, g_failed, g_observed;
static uint64_t g_digest = 1469598103934665603ull;
static char g_check[256] = "MPI_Init";
static size_t g_large = 65537;
static int g_min_ranks = 2;           /* coll_cxl_min_ranks of the run */
enum { EXPECT_CXL, EXPECT_OFF, EXPECT_NBOFF };
static int g_expect = EXPECT_CXL;

/* ------------------------------------------------------------------ */
/* reporting                                                           */

static void watchdog(int sig)
{
    static const char msg[] = "mpi_icoll_test: timeout in check: ";

    (void)sig;
    if (write(2, msg, sizeof(msg) - 1) < 0 ||
        write(2, g_check, strlen(g_check)) < 0 || write(2, "\n", 1) < 0) {
        _exit(3);
    }
    _exit(3);
}

/* a crash names the running check, then the handler that was there before
 * (UCX's: a backtrace) takes the fault again when the instruction retries */
static struct sigaction g_old_segv, g_old_bus;

static void on_fault(int sig)
{
    static const char msg[] = "mpi_icoll_test: signal NN in check: ";
    char line[sizeof(msg) + sizeof(g_check) + 1];
    size_t n = sizeof(msg) - 1, len = strlen(g_check);

    /* one write: the lines of ranks crashing together stay whole */
    memcpy(line, msg, n);
    line[23] = (char)('0' + sig / 10 % 10);
    line[24] = (char)('0' + sig % 10);
    memcpy(line + n, g_check, len);
    line[n + len] = '\n';
    if (write(2, line, n + len + 1) < 0) {
        /* nothing more to say */
    }
    sigaction(sig, (sig == SIGSEGV) ? &g_old_segv : &g_old_bus, NULL);
}

static void fault_names_check(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_fault;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_old_segv);
    sigaction(SIGBUS, &sa, &g_old_bus);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    va_list ap;

    if (++g_failed <= g_max_print) {
        fprintf(stderr, "FAIL: rank %d: %s: ", g_rank, g_check);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
    }
}

static void check(int ok, const char *what)
{
    ++g_checks;
    if (!ok) {
        fail("%s", what);
    }
}

static void mpi_ok(int rc)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;

    ++g_checks;
    if (rc != MPI_SUCCESS) {
        MPI_Error_string(rc, msg, &len);
        fail("returned %d (%s)", rc, msg);
    }
}

static void digest(const void *buf, size_t len)
{
    const unsigned char *p = buf;
    size_t i;

    for (i = 0; i < len; ++i) {
        g_digest = (g_digest ^ p[i]) * 1099511628211ull;
    }
}

/* ------------------------------------------------------------------ */
/* data                                                                */

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* calls may be outstanding together: each carries its own call number */
static uint64_t value(unsigned long call, int src, int dst, size_t idx)
{
    return mix(((uint64_t)call << 40) ^ ((uint64_t)src << 52) ^
               ((uint64_t)dst << 32) ^ idx);
}

static unsigned char byte_of(unsigned long call, int src, int dst, size_t k)
{
    return (unsigned char)(value(call, src, dst, k / 8) >> (8 * (k % 8)));
}

static void *alloc_guarded(size_t len)
{
    unsigned char *p = malloc(len + GUARD);

    if (p == NULL) {
        fprintf(stderr, "mpi_icoll_test: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(p, POISON, len + GUARD);
    return p;
}

static int guard_ok(const void *buf, size_t len)
{
    const unsigned char *p = (const unsigned char *)buf + len;
    size_t i;

    for (i = 0; i < GUARD; ++i) {
        if (p[i] != POISON) {
            return 0;
        }
    }
    return 1;
}

/* ------------------------------------------------------------------ */
/* MPI_T counters of coll/cxl                                          */

enum { CNT_CALLS, CNT_NB, CNT_FALLBACKS, CNT_TEAMS, CNT_LAST };
static const char *cnt_names[CNT_LAST] = {"coll_cxl_calls",
                                          "coll_cxl_nb_calls",
                                          "coll_cxl_fallbacks",
                                          "coll_cxl_teams"}; /* a level */
static MPI_T_pvar_session g_session;
static MPI_T_pvar_handle  g_handle[CNT_LAST];
static int g_have[CNT_LAST];
static int g_session_ok;

static void pvars_init(void)
{
    int provided, num, i, c, namelen, desclen, verb, vclass, bind, ro, cont,
        atomic, count;
    char name[256], desc[1024];
    MPI_Datatype dt;
    MPI_T_enum et;

    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS ||
        MPI_T_pvar_get_num(&num) != MPI_SUCCESS ||
        MPI_T_pvar_session_create(&g_session) != MPI_SUCCESS) {
        return;
    }
    g_session_ok = 1;
    for (i = 0; i < num; ++i) {
        namelen = sizeof(name);
        desclen = sizeof(desc);
        if (MPI_T_pvar_get_info(i, name, &namelen, &verb, &vclass, &dt, &et,
                                desc, &desclen, &bind, &ro, &cont,
                                &atomic) != MPI_SUCCESS) {
            continue;
        }
        for (c = 0; c < CNT_LAST; ++c) {
            if (!g_have[c] && (strcmp(name, cnt_names[c]) == 0) &&
                (MPI_T_pvar_handle_alloc(g_session, i, NULL, &g_handle[c],
                                         &count) == MPI_SUCCESS)) {
                g_have[c] = 1;
            }
        }
    }
}

static unsigned long long pvar(int c)
{
    unsigned long long v = 0;

    if (g_have[c]) {
        MPI_T_pvar_read(g_session, g_handle[c], &v);
    }
    return v;
}

/* ------------------------------------------------------------------ */
/* communicators and the path a call must take                         */

typedef struct {
    MPI_Comm    comm;
    const char *name;
    int         rank, size;
    int         team;    /* a blocking collective coll/cxl took ran on it */
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
        t->c0[c] = pvar(c);
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
    unsigned long long dc = pvar(CNT_CALLS) - t->c0[CNT_CALLS];
    unsigned long long dn = pvar(CNT_NB) - t->c0[CNT_NB];
    unsigned long long df = pvar(CNT_FALLBACKS) - t->c0[CNT_FALLBACKS];
    int ok;

    ++g_checks;
    if (g_expect == EXPECT_OFF) {
        ok = (dc == 0) && (dn == 0) && (df == 0);
    } else if (g_expect == EXPECT_NBOFF) {
        /* whether a call it hands on counts as a fallback is its business */
        ok = (dn == 0) && (dc == (unsigned long long)t->blk);
    } else {
        /* without coll_cxl_nb_calls (reported once) the other two still
         * tell where the calls went */
        ok = (!g_have[CNT_NB] || in_range(dn, t->lib, t->any)) &&
             in_range(dc, t->lib + t->blk, t->any) &&
             in_range(df, t->prev, t->any);
    }
    if (!ok) {
        fail("coll/cxl counted %llu library calls (%llu non-blocking), %llu "
             "fallbacks; expected %ld non-blocking + %ld blocking in the "
             "library, %ld handed to the previous module, %ld of count 0 "
             "either way%s", dc, dn, df,
             (g_expect == EXPECT_CXL) ? t->lib : 0, t->blk,
             (g_expect == EXPECT_CXL) ? t->prev : 0,
             (g_expect == EXPECT_CXL) ? t->any : 0,
             (g_expect == EXPECT_OFF) ? " (component off: none at all)" :
             (g_expect == EXPECT_NBOFF) ? " (coll_cxl_nonblocking 0: no "
                                          "non-blocking call in the library)" :
             "");
    }
}

/* ------------------------------------------------------------------ */
/* reductions                                                          */

typedef struct {
    MPI_Datatype dt;
    const char  *name;
    char         kind;   /* 's'/'u' integer, 'd' double */
    size_t       size;
} rtype_t;

typedef struct {
    MPI_Op      op;
    const char *name;
    int         bitwise;
} rop_t;

enum { N_RTYPES = 4, N_ROPS = 3, N_MTYPES = 3 };
static rtype_t rtypes[N_RTYPES];
static rop_t   rops[N_ROPS];

static void rtypes_init(void)
{
    rtypes[0] = (rtype_t){MPI_INT, "MPI_INT", 's', sizeof(int)};
    rtypes[1] = (rtype_t){MPI_DOUBLE, "MPI_DOUBLE", 'd', sizeof(double)};
    rtypes[2] = (rtype_t){MPI_UINT8_T, "MPI_UINT8_T", 'u', sizeof(uint8_t)};
    rtypes[3] = (rtype_t){MPI_INT64_T, "MPI_INT64_T", 's', sizeof(int64_t)};
    rops[0] = (rop_t){MPI_SUM, "MPI_SUM", 0};
    rops[1] = (rop_t){MPI_MAX, "MPI_MAX", 0};
    rops[2] = (rop_t){MPI_BXOR, "MPI_BXOR", 1};
}

/* element idx of rank src's input: doubles are small integers, so sums
 * are exact in any order */
static void gen_elem(const rtype_t *t, const rop_t *o, unsigned long call,
                     int src, size_t idx, void *out)
{
    uint64_t h = value(call, src, 0, idx);
    double d;

    if (t->kind != 'd') {
        memcpy(out, &h, t->size);   /* little endian: the low bytes */
        return;
    }
    d = (o->op == MPI_MAX) ? (double)((int)(h % 2001) - 1000) :
                             (double)((int)(h % 17) - 8);
    memcpy(out, &d, sizeof(d));
}

static void gen(const rtype_t *t, const rop_t *o, unsigned long call, int src,
                void *buf, size_t first, size_t count)
{
    size_t i;

    for (i = 0; i < count; ++i) {
        gen_elem(t, o, call, src, first + i, (char *)buf + i * t->size);
    }
}

/* acc = acc OP x, one element, integers modulo 2^bits as C wraps */
static void elem_op(const rtype_t *t, const rop_t *o, void *acc,
                    const void *x)
{
    if (t->kind != 'd') {
        uint64_t a = 0, b = 0, r;
        int64_t sa, sb;
        int sh = 64 - 8 * (int)t->size;

        memcpy(&a, acc, t->size);
        memcpy(&b, x, t->size);
        sa = (int64_t)(a << sh) >> sh;
        sb = (int64_t)(b << sh) >> sh;
        if (o->op == MPI_SUM) {
            r = a + b;
        } else if (o->op == MPI_MAX) {
            r = (t->kind == 's') ? ((sa > sb) ? a : b) : ((a > b) ? a : b);
        } else {
            r = a ^ b;
        }
        memcpy(acc, &r, t->size);
    } else {
        double a, b;

        memcpy(&a, acc, 8);
        memcpy(&b, x, 8);
        a = (o->op == MPI_SUM) ? a + b : ((b > a) ? b : a);
        memcpy(acc, &a, 8);
    }
}

/* expected[0..count) = reduction over the nranks ranks of elements first.. */
static void reference(const rtype_t *t, const rop_t *o, unsigned long call,
                      int nranks, void *expected, size_t first, size_t count)
{
    unsigned char x[8];
    size_t i;
    int r;

    for (i = 0; i < count; ++i) {
        void *acc = (char *)expected + i * t->size;

        gen_elem(t, o, call, 0, first + i, acc);
        for (r = 1; r < nranks; ++r) {
            gen_elem(t, o, call, r, first + i, x);
            elem_op(t, o, acc, x);
        }
    }
}

/* got[0..count) == expected; the result goes into the digest */
static void compare(const rtype_t *t, const void *got, const void *expected,
                    size_t count, const char *what)
{
    size_t i;

    ++g_checks;
    for (i = 0; i < count; ++i) {
        if (memcmp((const char *)got + i * t->size,
                   (const char *)expected + i * t->size, t->size) != 0) {
            uint64_t g = 0, e = 0;

            memcpy(&g, (const char *)got + i * t->size, t->size);
            memcpy(&e, (const char *)expected + i * t->size, t->size);
            fail("%s: element %zu of %zu: got 0x%llx, expected 0x%llx", what,
                 i, count, (unsigned long long)g, (unsigned long long)e);
            return;
        }
    }
    digest(got, count * t->size);
}

/* a send buffer still holds rank src's input */
static void unchanged(const rtype_t *t, const rop_t *o, unsigned long call,
                      int src, const void *buf, size_t count)
{
    void *exp = malloc(count * t->size + 1);

    gen(t, o, call, src, exp, 0, count);
    check(memcmp(buf, exp, count * t->size) == 0,
          "send buffer changed by the call");
    free(exp);
}

/* ------------------------------------------------------------------ */
/* data movements                                                      */

/* A rank's description of its bytes: a predefined type, or (VEC, even
 * ranks only) 2 ints out of every 3, which odd ranks describe as MPI_INT. */
typedef struct {
    const char  *name;
    MPI_Datatype dt;
    size_t       unit;      /* bytes per element */
    int          vec;
} mtype_t;

static mtype_t mtypes[N_MTYPES];
static MPI_Datatype g_vec;

static void mtypes_init(void)
{
    MPI_Type_vector(2, 1, 2, MPI_INT, &g_vec);
    MPI_Type_commit(&g_vec);
    mtypes[0] = (mtype_t){"MPI_BYTE", MPI_BYTE, 1, 0};
    mtypes[1] = (mtype_t){"MPI_INT", MPI_INT, 4, 0};
    mtypes[2] = (mtype_t){"vector(2,1,2,MPI_INT) / MPI_INT", g_vec, 8, 1};
}

/* this rank's view of 'elems' elements of t */
typedef struct {
    MPI_Datatype dt;
    int          count;     /* per block, in dt */
    int          vec;       /* non-contiguous layout here */
} view_t;

static view_t view_of(const mtype_t *t, size_t elems, int rank)
{
    view_t v = {t->dt, (int)elems, 0};

    if (t->vec) {
        if (rank % 2 == 0) {
            v.vec = 1;
        } else {
            v.dt    = MPI_INT;
            v.count = (int)(2 * elems);
        }
    }
    return v;
}

/* buffer offset of packed byte k (vector: 8 data bytes per 12) */
static size_t off_of(const view_t *v, size_t k)
{
    return v->vec ? (k / 8) * 12 + ((k % 8) / 4) * 8 + k % 4 : k;
}

static size_t span_of(const view_t *v, size_t bytes)
{
    return v->vec ? (bytes / 8) * 12 : bytes;
}

/* block b (of 'per' bytes) of buf: bytes of (src, dst) */
static void fill(const view_t *v, void *buf, size_t b, size_t per,
                 unsigned long call, int src, int dst)
{
    size_t k;

    for (k = 0; k < per; ++k) {
        ((unsigned char *)buf)[off_of(v, b * per + k)] =
            byte_of(call, src, dst, k);
    }
}

/* block b holds (src, dst)'s bytes; into the digest if 'result' (a send
 * buffer's own data is checked, not hashed) */
static void expect_block(const view_t *v, const void *buf, size_t b,
                         size_t per, unsigned long call, int src, int dst,
                         int result, const char *what)
{
    const unsigned char *p = buf;
    size_t k;

    ++g_checks;
    for (k = 0; k < per; ++k) {
        unsigned char got = p[off_of(v, b * per + k)];

        if (got != byte_of(call, src, dst, k)) {
            fail("%s block %zu (from rank %d) byte %zu of %zu: 0x%02x, "
                 "expected 0x%02x", what, b, src, k, per, got,
                 byte_of(call, src, dst, k));
            return;
        }
    }
    if (result) {
        for (k = 0; k < per; ++k) {
            g_digest = (g_digest ^ p[off_of(v, b * per + k)]) *
                       1099511628211ull;
        }
    }
}

/* the vector layout's gaps and the guard stay POISON */
static void expect_gaps(const view_t *v, const void *buf, size_t bytes,
                        const char *what)
{
    const unsigned char *p = buf;
    size_t span = span_of(v, bytes), i;

    ++g_checks;
    if (v->vec) {
        for (i = 0; i < span; ++i) {
            if ((i % 12 >= 4) && (i % 12 < 8) && (p[i] != POISON)) {
                fail("%s: gap byte %zu of the vector layout overwritten",
                     what, i);
                return;
            }
        }
    }
    if (!guard_ok(buf, span)) {
        fail("%s: guard bytes behind the buffer overwritten", what);
    }
}

/* ------------------------------------------------------------------ */
/* one call: its buffers, its request, its checks                      */

typedef struct {
    int            kind;
    int            blocking;  /* the blocking counterpart (mixed sections) */
    const rtype_t *rt;        /* reductions */
    const rop_t   *ro;
    const mtype_t *mt;        /* movements */
    size_t         count;     /* elements per rank (per block) */
    int            root, in_place;
    ic_comm_t     *c;
    unsigned long  call;
    unsigned char *sbuf, *rbuf;
    size_t         slen, rlen;
    MPI_Request    req;
    int            path;
    char           name[200];
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
    return c->team ? PATH_LIB : PATH_PREV;
}

/* the movement views of this call */
static void icall_views(const icall_t *ic, view_t *one, view_t *all)
{
    *one = view_of(ic->mt, ic->count, ic->c->rank);
    *all = view_of(ic->mt, ic->count * (size_t)ic->c->size, ic->c->rank);
}

static void icall_fill_moves(icall_t *ic)
{
    size_t per = ic->count * ic->mt->unit, N = (size_t)ic->c->size, b;
    int me = ic->c->rank, root = ic->root, is_root = (me == root), r;
    view_t one, all;

    icall_views(ic, &one, &all);
    ic->slen = ic->rlen = span_of(&all, per * N);
    ic->sbuf = alloc_guarded(ic->slen);
    ic->rbuf = alloc_guarded(ic->rlen);
    switch (ic->kind) {
    case K_BCAST:
        if (is_root) {
            fill(&one, ic->rbuf, 0, per, ic->call, root, 0);
        }
        break;
    case K_GATHER:
        if (ic->in_place && is_root) {
            fill(&all, ic->rbuf, (size_t)me, per, ic->call, me, root);
        } else {
            fill(&one, ic->sbuf, 0, per, ic->call, me, root);
        }
        break;
    case K_SCATTER:
        if (is_root) {
            for (b = 0; b < N; ++b) {
                fill(&all, ic->sbuf, b, per, ic->call, root, (int)b);
            }
        }
        break;
    case K_ALLGATHER:
        if (ic->in_place) {
            fill(&all, ic->rbuf, (size_t)me, per, ic->call, me, 0);
        } else {
            fill(&one, ic->sbuf, 0, per, ic->call, me, 0);
        }
        break;
    default: /* K_ALLTOALL */
        for (r = 0; r < (int)N; ++r) {
            fill(&all, ic->in_place ? ic->rbuf : ic->sbuf, (size_t)r, per,
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
    ic->sbuf = alloc_guarded(ic->slen);
    ic->rbuf = alloc_guarded(ic->rlen);
    gen(ic->rt, ic->ro, ic->call, ic->c->rank,
        ic->in_place ? ic->rbuf : ic->sbuf, 0, total);
}

/* a new call (its own call number): buffers allocated and filled */
static void icall_init(icall_t *ic, int kind, ic_comm_t *c, const rtype_t *rt,
                       const rop_t *ro, const mtype_t *mt, size_t count,
                       int root, int in_place, int blocking)
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
    const rtype_t *rt = &rtypes[i % N_RTYPES];
    const rop_t *ro = &rops[(i / N_RTYPES) % N_ROPS];

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
    view_t one, all;

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
        mpi_ok(rc);
        return;
    }
    if (ic->kind == K_BARRIER) {
        rc = ic->blocking ? MPI_Barrier(comm) : MPI_Ibarrier(comm, rq);
        mpi_ok(rc);
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
    mpi_ok(rc);
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
    mpi_ok(rc);
    check(*req == MPI_REQUEST_NULL,
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
    const rtype_t *t = ic->rt;
    int me = ic->c->rank, is_root = (me == ic->root);
    size_t total = (ic->kind == K_RSB) ? ic->count * (size_t)ic->c->size :
                                         ic->count;
    void *exp;

    if ((ic->kind != K_REDUCE) || is_root) {
        exp = malloc(ic->count * t->size + 1);
        reference(t, ic->ro, ic->call, ic->c->size, exp,
                  (ic->kind == K_RSB) ? (size_t)me * ic->count : 0,
                  ic->count);
        compare(t, ic->rbuf, exp, ic->count, "result");
        free(exp);
    }
    if (!ic->in_place) {
        unchanged(t, ic->ro, ic->call, me, ic->sbuf, total);
    } else if ((ic->kind == K_REDUCE) && !is_root) {
        unchanged(t, ic->ro, ic->call, me, ic->rbuf, total);
    }
    check(guard_ok(ic->rbuf, ic->rlen) && guard_ok(ic->sbuf, ic->slen),
          "guard bytes behind a buffer overwritten");
}

static void icall_verify_moves(icall_t *ic)
{
    size_t per = ic->count * ic->mt->unit, N = (size_t)ic->c->size, b;
    int me = ic->c->rank, root = ic->root, is_root = (me == root);
    unsigned long call = ic->call;
    view_t one, all;

    icall_views(ic, &one, &all);
    switch (ic->kind) {
    case K_BCAST:
        /* the root's buffer is its send buffer: unchanged */
        expect_block(&one, ic->rbuf, 0, per, call, root, 0, 1, "bcast");
        expect_gaps(&one, ic->rbuf, per, "bcast buffer");
        break;
    case K_GATHER:
        if (is_root) {
            for (b = 0; b < N; ++b) {
                expect_block(&all, ic->rbuf, b, per, call, (int)b, root, 1,
                             "gather");
            }
            expect_gaps(&all, ic->rbuf, per * N, "gather receive buffer");
        }
        if (!(ic->in_place && is_root)) {
            expect_block(&one, ic->sbuf, 0, per, call, me, root, 0,
                         "gather send buffer (changed)");
            expect_gaps(&one, ic->sbuf, per, "gather send buffer");
        }
        break;
    case K_SCATTER:
        if (ic->in_place && is_root) {
            expect_block(&all, ic->sbuf, (size_t)me, per, call, root, me, 1,
                         "scatter (in place: the root's block kept)");
        } else {
            expect_block(&one, ic->rbuf, 0, per, call, root, me, 1,
                         "scatter");
            expect_gaps(&one, ic->rbuf, per, "scatter receive buffer");
        }
        if (is_root) {
            for (b = 0; b < N; ++b) {
                expect_block(&all, ic->sbuf, b, per, call, root, (int)b, 0,
                             "scatter send buffer (changed)");
            }
            expect_gaps(&all, ic->sbuf, per * N, "scatter send buffer");
        }
        break;
    case K_ALLGATHER:
        for (b = 0; b < N; ++b) {
            expect_block(&all, ic->rbuf, b, per, call, (int)b, 0, 1,
                         "allgather");
        }
        expect_gaps(&all, ic->rbuf, per * N, "allgather receive buffer");
        if (!ic->in_place) {
            expect_block(&one, ic->sbuf, 0, per, call, me, 0, 0,
                         "allgather send buffer (changed)");
            expect_gaps(&one, ic->sbuf, per, "allgather send buffer");
        }
        break;
    default:
        for (b = 0; b < N; ++b) {
            expect_block(&all, ic->rbuf, b, per, call, (int)b, me, 1,
                         "alltoall");
        }
        expect_gaps(&all, ic->rbuf, per * N, "alltoall receive buffer");
        if (!ic->in_place) {
            for (b = 0; b < N; ++b) {
                expect_block(&all, ic->sbuf, b, per, call, me, (int)b, 0,
                             "alltoall send buffer (changed)");
            }
            expect_gaps(&all, ic->sbuf, per * N, "alltoall send buffer");
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
    char name[64];
    unsigned long base = 0;
    volatile unsigned long *slot;
    int fd, i, r, late;
    icall_t ic;

    if (g_rank == 0) {
        base = (unsigned long)getpid();
    }
    MPI_Bcast(&base, 1, MPI_UNSIGNED_LONG, 0, MPI_COMM_WORLD);
    snprintf(name, sizeof(name), "/mpi-icoll-test-%lu", base);
    snprintf(g_check, sizeof(g_check), "each: MPI_Ibarrier's shared page");
    fd = shm_open(name, O_RDWR | O_CREAT, 0600);
    if ((fd < 0) || (ftruncate(fd, 4096) != 0)) {
        fail("shm_open %s failed", name);
        return;
    }
    slot = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (slot == MAP_FAILED) {
        fail("mmap of %s failed", name);
        return;
    }
    MPI_Barrier(MPI_COMM_WORLD);     /* everyone mapped it */
    if (g_rank == 0) {
        shm_unlink(name);
    }
    for (i = 1; i <= 15; ++i) {
        icall_init(&ic, K_BARRIER, w, NULL, NULL, NULL, 0, 0, 0, 0);
        late = ((i % 3 == 0) && (g_rank == 0)) ||
               ((i % 3 == 1) && (g_rank == g_size - 1));
        if (late) {
            usleep(2000);
        }
        __atomic_store_n(&slot[g_rank], (unsigned long)i, __ATOMIC_RELEASE);
        icall_run(&ic);
        snprintf(g_check, sizeof(g_check), "%s #%d", ic.name, i);
        ++g_checks;
        for (r = 0; r < g_size; ++r) {
            unsigned long v = __atomic_load_n(&slot[r], __ATOMIC_ACQUIRE);

            if (v < (unsigned long)i) {
                fail("rank %d left the barrier before rank %d entered it "
                     "(its slot says round %lu)", g_rank, r, v);
                break;
            }
        }
    }
    munmap((void *)slot, 4096);
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
    mpi_ok(rc);
    for (i = 0, flag = 1; i < n; ++i) {
        flag = flag && (reqs[i] == MPI_REQUEST_NULL);
    }
    check(flag, "a request is not MPI_REQUEST_NULL after completion");
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
            mpi_ok(rc);
        } else if (c->rank == 1) {
            snprintf(g_check, sizeof(g_check), "%s", ic.name);
            rc = MPI_Recv(&token, 1, MPI_INT, 0, LOCAL_TAG, c->comm,
                          MPI_STATUS_IGNORE);
            mpi_ok(rc);
            check(token == (int)ic.call, "rank 0's message");
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
            mpi_ok(rc);
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

enum { FB_MOD = 1000003 };

static void user_sum_mod(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int i, *a = in, *b = inout;

    (void)dt;
    for (i = 0; i < *len; ++i) {
        b[i] = (a[i] + b[i]) % FB_MOD;
    }
}

/* the same for a datatype of 2 ints: len counts pairs */
static void user_sum_pair(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int n = 2 * *len;

    user_sum_mod(in, inout, &n, dt);
}

/* one MPI_Iallreduce of n_ints ints (n_dt of dt) with op, which the
 * previous module must run: lor folds with ||, else sums modulo FB_MOD */
static void fallback_one(ic_comm_t *w, const char *what, MPI_Datatype dt,
                         int n_dt, MPI_Op op, int n_ints, int lor,
                         int in_place)
{
    unsigned long call = ++g_call;
    size_t len = (size_t)n_ints * sizeof(int);
    int *in = alloc_guarded(len), *out = alloc_guarded(len);
    int *exp = malloc(len), i, r, v, rc;
    MPI_Request req = MPI_REQUEST_NULL;
    tally_t t;

    snprintf(g_check, sizeof(g_check), "fallback: MPI_Iallreduce %s%s on %s",
             what, in_place ? " in place" : "", w->name);
    for (i = 0; i < n_ints; ++i) {
        exp[i] = 0;
        for (r = 0; r < w->size; ++r) {
            v = lor ? (value(call, r, 0, (size_t)i) % 5 == 0) :
                      (int)(value(call, r, 0, (size_t)i) % FB_MOD);
            exp[i] = lor ? (exp[i] || v) : (exp[i] + v) % FB_MOD;
            if (r == w->rank) {
                (in_place ? out : in)[i] = v;
            }
        }
    }
    tally_begin(&t);
    tally_path(&t, 0, comm_ours(w) ? PATH_PREV : PATH_NONE);
    rc = MPI_Iallreduce(in_place ? MPI_IN_PLACE : in, out, n_dt, dt, op,
                        w->comm, &req);
    mpi_ok(rc);
    complete(&req, call);
    tally_check(&t);
    ++g_checks;
    for (i = 0; i < n_ints; ++i) {
        if (out[i] != exp[i]) {
            fail("element %d of %d: %d, expected %d", i, n_ints, out[i],
                 exp[i]);
            break;
        }
    }
    if (i == n_ints) {
        digest(out, len);
    }
    if (!in_place) {
        for (i = 0; i < n_ints; ++i) {
            v = lor ? (value(call, w->rank, 0, (size_t)i) % 5 == 0) :
                      (int)(value(call, w->rank, 0, (size_t)i) % FB_MOD);
            if (in[i] != v) {
                break;
            }
        }
        check(i == n_ints, "send buffer changed by the call");
    }
    check(guard_ok(in, len) && guard_ok(out, len),
          "guard bytes behind a buffer overwritten");
    free(in);
    free(out);
    free(exp);
}

static void test_fallback(ic_comm_t *w)
{
    enum { N = 301 };
    MPI_Datatype pair;
    MPI_Op op, op_pair;

    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    MPI_Op_create(user_sum_mod, 1, &op);
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
                mpi_ok(rc);
                break;
            }
            if (!flag && (now() - t0 > 120.0)) {
                fail("not complete after %ld slices (120 s) of MPI_Test",
                     slices);
                MPI_Wait(&ic.req, MPI_STATUS_IGNORE);
                break;
            }
        }
        memset(again, 0, sizeof(again));
        for (s = 0; s < slices; ++s) {
            compute_slice(again, NW, s);
        }
        check(memcmp(work, again, sizeof(work)) == 0,
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
    mpi_ok(rc);
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
    mpi_ok(rc);
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
/* free: MPI_Request_free of an active request                         */

/* buffers of freed calls: MPI never says when they are done with, so they
 * stay until after MPI_Finalize */
static void *g_freed[16];
static int g_n_freed;

static void test_free(ic_comm_t *w)
{
    icall_t ic;
    int round, j, rc;
    char msg[MPI_MAX_ERROR_STRING];
    int len;

    for (round = 0; round < 3; ++round) {
        for (j = 0; j < ((round == 1) ? 2 : 1); ++j) {
            icall_pick(&ic, K_ALLREDUCE, w, round + j, 1001 + (size_t)round);
            icall_post(&ic);
            snprintf(g_check, sizeof(g_check), "free: MPI_Request_free of an "
                     "active %s", ic.name);
            rc = MPI_Request_free(&ic.req);
            ++g_checks;
            if (rc == MPI_SUCCESS) {
                if (ic.req != MPI_REQUEST_NULL) {
                    fail("the request is not MPI_REQUEST_NULL after "
                         "MPI_Request_free");
                }
            } else if ((g_expect == EXPECT_CXL) && (ic.path == PATH_LIB)) {
                len = 0;
                MPI_Error_string(rc, msg, &len);
                fail("returned %d (%s)", rc, msg);
                MPI_Wait(&ic.req, MPI_STATUS_IGNORE);
            } else {
                /* Open MPI 4.1.4's libnbc frees no active request
                 * (MPI_ERR_REQUEST): the request stays, wait for it */
                ++g_observed;
                MPI_Wait(&ic.req, MPI_STATUS_IGNORE);
            }
            if (g_n_freed + 2 <= (int)(sizeof(g_freed) / sizeof(g_freed[0]))) {
                g_freed[g_n_freed++] = ic.sbuf;
                g_freed[g_n_freed++] = ic.rbuf;
            }
        }
        snprintf(g_check, sizeof(g_check), "free: MPI_Barrier after "
                 "MPI_Request_free (#%d)", round);
        rc = MPI_Barrier(w->comm);
        mpi_ok(rc);
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

/* MPI_ICOLL_ONLY: a comma-separated list of sections to run (default all) */
static int section(const char *name)
{
    const char *only = getenv("MPI_ICOLL_ONLY"), *p;
    size_t n = strlen(name);

    if ((only == NULL) || (only[0] == '\0')) {
        return 1;
    }
    for (p = only; (p = strstr(p, name)) != NULL; p += n) {
        if (((p == only) || (p[-1] == ',')) &&
            ((p[n] == '\0') || (p[n] == ','))) {
            return 1;
        }
    }
    return 0;
}

/* the counters the mode needs; MPI_COMM_WORLD's calls before its first
 * blocking collective (no team yet), then that collective (its team) */
static void setup(ic_comm_t *w)
{
    icall_t ic;
    unsigned long long teams;
    int c;

    snprintf(g_check, sizeof(g_check), "coll/cxl counters");
    if (g_expect != EXPECT_OFF) {
        for (c = 0; c < CNT_LAST; ++c) {
            ++g_checks;
            if (g_have[c]) {
                continue;
            }
            if (c == CNT_NB) {
                fail("coll/cxl's MPI_T counter coll_cxl_nb_calls not found: "
                     "this coll/cxl counts no non-blocking collectives (it "
                     "does not take them)");
            } else {
                fail("coll/cxl's MPI_T counter %s not found: component not "
                     "loaded", cnt_names[c]);
            }
        }
    }
    icall_init(&ic, K_BARRIER, w, NULL, NULL, NULL, 0, 0, 0, 0);
    snprintf(ic.name, sizeof(ic.name), "setup: MPI_Ibarrier on "
             "MPI_COMM_WORLD before its first blocking collective");
    icall_run(&ic);
    icall_pick(&ic, K_ALLREDUCE, w, 0, 3);
    snprintf(ic.name, sizeof(ic.name), "setup: MPI_Iallreduce on "
             "MPI_COMM_WORLD before its first blocking collective");
    icall_run(&ic);
    /* coll/cxl makes MPI_COMM_WORLD's team at its first blocking
     * collective (not a barrier: Open MPI ends one of a single rank
     * before any module) */
    icall_init(&ic, K_ALLREDUCE, w, &rtypes[0], &rops[0], NULL, 1, 0, 0, 1);
    snprintf(ic.name, sizeof(ic.name), "setup: MPI_COMM_WORLD's first "
             "blocking collective (MPI_Allreduce)");
    icall_run(&ic);
    teams = pvar(CNT_TEAMS);
    ++g_checks;
    if ((g_expect != EXPECT_OFF) && comm_ours(w) && (teams < 1)) {
        fail("coll/cxl created no team for MPI_COMM_WORLD");
    }
}

int main(int argc, char **argv)
{
    const char *e;
    unsigned timeout = 300;
    unsigned long long c0[CNT_LAST], sums[7], mine[7];
    int thread = MPI_THREAD_SINGLE, provided = MPI_THREAD_SINGLE;
    long failed_all = 0, checks_all = 0;
    uint64_t *digests = NULL;
    int i;

    if ((e = getenv("MPI_ICOLL_TIMEOUT")) != NULL) {
        timeout = (unsigned)atoi(e);
    }
    signal(SIGALRM, watchdog);
    alarm(timeout);
    if ((e = getenv("MPI_ICOLL_EXPECT")) != NULL) {
        g_expect = (strcmp(e, "off") == 0) ? EXPECT_OFF :
                   (strcmp(e, "nb-off") == 0) ? EXPECT_NBOFF : EXPECT_CXL;
    }
    if ((e = getenv("MPI_ICOLL_MAX_PRINT")) != NULL) {
        g_max_print = atol(e);
    }
    if ((e = getenv("MPI_ICOLL_MIN_RANKS")) != NULL) {
        g_min_ranks = atoi(e);
    }
    if ((e = getenv("MPI_ICOLL_LARGE")) != NULL) {
        g_large = (size_t)atol(e);
    }
    if ((e = getenv("MPI_ICOLL_THREAD")) != NULL) {
        thread = !strcmp(e, "multiple") ? MPI_THREAD_MULTIPLE :
                 !strcmp(e, "serialized") ? MPI_THREAD_SERIALIZED :
                 !strcmp(e, "funneled") ? MPI_THREAD_FUNNELED :
                 MPI_THREAD_SINGLE;
        MPI_Init_thread(&argc, &argv, thread, &provided);
    } else {
        MPI_Init(&argc, &argv);
    }
    fault_names_check();      /* after MPI_Init: UCX's handler is set */
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    comm_init(&g_world, MPI_COMM_WORLD, "MPI_COMM_WORLD");
    pvars_init();
    rtypes_init();
    mtypes_init();
    snprintf(g_check, sizeof(g_check), "MPI_Init_thread");
    check(provided >= thread, "the thread level asked for not provided");
    for (i = 0; i < CNT_LAST; ++i) {
        c0[i] = pvar(i);
    }

    setup(&g_world);
    if (section("each")) {
        test_each(&g_world);
    }
    if (section("many")) {
        test_many(&g_world);
    }
    if (section("mixed")) {
        test_mixed(&g_world);
    }
    if (section("local")) {
        test_local();
    }
    if (section("fallback")) {
        test_fallback(&g_world);
    }
    if (section("overlap")) {
        test_overlap(&g_world);
    }
    if (section("comms")) {
        test_comms(&g_world);
    }
    if (section("free")) {
        test_free(&g_world);
    }

    snprintf(g_check, sizeof(g_check), "summary");
    mine[0] = (unsigned long long)g_checks;
    mine[1] = (unsigned long long)g_failed;
    mine[2] = pvar(CNT_CALLS) - c0[CNT_CALLS];
    mine[3] = pvar(CNT_NB) - c0[CNT_NB];
    mine[4] = pvar(CNT_FALLBACKS) - c0[CNT_FALLBACKS];
    mine[5] = pvar(CNT_TEAMS);
    mine[6] = (unsigned long long)g_observed;
    MPI_Reduce(mine, sums, 7, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0,
               MPI_COMM_WORLD);
    if (g_rank == 0) {
        digests = malloc(sizeof(uint64_t) * (size_t)g_size);
    }
    MPI_Gather(&g_digest, 1, MPI_UINT64_T, digests, 1, MPI_UINT64_T, 0,
               MPI_COMM_WORLD);
    if (g_rank == 0) {
        uint64_t d = 1469598103934665603ull;

        for (i = 0; i < g_size; ++i) {
            d = (d ^ digests[i]) * 1099511628211ull;
        }
        checks_all = (long)sums[0];
        failed_all = (long)sums[1];
        printf("counters: calls %llu nb_calls %llu fallbacks %llu teams %llu"
               "%s\n", sums[2], sums[3], sums[4], sums[5],
               !g_have[CNT_CALLS] ? " (no coll/cxl counters)" :
               !g_have[CNT_NB] ? " (no coll_cxl_nb_calls)" : "");
        printf("digest: %016llx\n", (unsigned long long)d);
        printf("observed: %llu MPI_Request_free of an active request refused "
               "(Open MPI's libnbc: MPI_ERR_REQUEST; waited for instead)\n",
               sums[6]);
        printf("mpi-icoll: %ld checks, %ld failed (%d ranks, %lu calls "
               "each)\n", checks_all, failed_all, g_size, g_call);
        fflush(stdout);
        free(digests);
    }
    MPI_Bcast(&failed_all, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    MPI_Type_free(&g_vec);
    for (i = 0; i < CNT_LAST; ++i) {
        if (g_have[i]) {
            MPI_T_pvar_handle_free(g_session, &g_handle[i]);
        }
    }
    if (g_session_ok) {
        MPI_T_pvar_session_free(&g_session);
    }
    MPI_T_finalize();
    MPI_Finalize();
    for (i = 0; i < g_n_freed; ++i) {
        free(g_freed[i]);
    }
    return (failed_all == 0) ? 0 : 1;
}
