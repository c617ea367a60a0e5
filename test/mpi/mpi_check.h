/*
 * mpi_check.h - what the MPI collectives tests share: included by
 * test/mpi/mpi_coll_test.c (blocking collectives) and
 * test/mpi/mpi_icoll_test.c (non-blocking ones), each built alone by
 * test/mpi/mpi-common.sh's mpi_build (one mpicc -Wall -Wextra -Werror, no
 * library), so everything here is static, in each program's own copy:
 * plain static where both programs use it, static inline where one does.
 *
 *   checks       g_checks/g_failed, mc_fail() (the first MAX_PRINT "FAIL:
 *                rank R: CHECK: WHAT" lines), mc_check(), mc_mpi_ok();
 *                g_check names the running check
 *   abnormal end mc_watchdog() (MC_ENV "TIMEOUT") and mc_on_fault() (a
 *                crash, mc_fault_names_check()) print the running check
 *   digest       g_digest, an FNV-1a hash of every checked result, the
 *                same with and without coll/cxl
 *   data         mc_value()/mc_byte_of(): bytes derived from (call number,
 *                source rank, destination rank, index), so no two calls
 *                see the same data; reduction inputs and their reference
 *                results (mc_gen(), mc_reference(), mc_compare()); guarded
 *                buffers and the vector layout of the movements, with
 *                their gaps and guard bytes checked (mc_fill(),
 *                mc_expect_block(), mc_expect_gaps())
 *   barriers     mc_slots_*(): a page whose slots show a rank that left a
 *                barrier early
 *   counters     coll/cxl's MPI_T performance variables, looked up by name
 *                (mc_pvars_init(), mc_pvar())
 *   start, end   mc_init() (environment, watchdog, MPI_Init), mc_section(),
 *                mc_env_choice(); mc_summary_sums(), mc_print_totals(),
 *                mc_finalize()
 *
 * The program defines, before including it (after _GNU_SOURCE and the
 * system headers):
 *
 *   MC_PROG  its binary's name, for the watchdog's and crash lines
 *            ("mpi_coll_test")
 *   MC_NAME  its name in the summary line and the shared barrier page
 *            ("mpi-coll")
 *   MC_ENV   the prefix of its environment variables ("MPI_COLL_")
 *
 * Names here start with mc_ (MC_ for macros); the globals keep the g_ the
 * programs use for theirs.  Where the two programs' messages differed, a
 * parameter keeps each one's wording (mc_compare()'s and mc_expect_gaps()'s
 * what, NULL for the blocking test's).
 */
#ifndef TEST_MPI_CHECK_H_
#define TEST_MPI_CHECK_H_

#include <mpi.h>

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if !defined(MC_PROG) || !defined(MC_NAME) || !defined(MC_ENV)
#error "define MC_PROG, MC_NAME and MC_ENV before including mpi_check.h"
#endif

#define MC_POISON      0xa5    /* what buffers hold where no call may write */
#define MC_GUARD       32      /* bytes of MC_POISON behind every buffer */
#define MC_FNV_OFFSET  1469598103934665603ull
#define MC_FNV_PRIME   1099511628211ull
#define MC_SUM_MOD     1000003 /* the user operations sum modulo this */
#define MC_SUMMARY_MAX 8       /* counters a program sums at the end */

/* a name for a message, or nothing: ("what", ": ") or ("", "") for "%s%s" */
#define MC_WHAT(_what) ((_what) ? (_what) : ""), ((_what) ? ": " : "")

static int g_rank, g_size;
static long g_max_print = 5;          /* FAIL lines per rank (MAX_PRINT) */
static unsigned long g_call;          /* changes the data of every call */
/* g_observed: what Open MPI itself gets wrong, counted but not failed (each
 * program's "observed:" line says what) */
static long g_checks, g_failed, g_observed;
static uint64_t g_digest = MC_FNV_OFFSET;
static char g_check[256] = "MPI_Init";   /* the running check, in FAIL lines */
static size_t g_large = 65537;        /* elements of the large counts */
static int g_min_ranks = 2;           /* coll_cxl_min_ranks of the run */


/* ------------------------------------------------------------------ */
/* naming the running check when the run ends abnormally               */

/*
 * One write of "MC_PROG: EVENT in check: CHECK\n" to stderr, from a signal
 * handler (write only; no stdio): the lines of ranks that fail together
 * stay whole.
 */
static void mc_say_check(const char *event)
{
    static const char in[] = " in check: ";
    char line[sizeof(MC_PROG) + 16 + sizeof(in) + sizeof(g_check)];
    size_t n = 0, len;

    len = strlen(MC_PROG ": ");
    memcpy(line + n, MC_PROG ": ", len);
    n  += len;
    len = strnlen(event, 15);
    memcpy(line + n, event, len);
    n  += len;
    memcpy(line + n, in, sizeof(in) - 1);
    n  += sizeof(in) - 1;
    len = strnlen(g_check, sizeof(g_check) - 1);
    memcpy(line + n, g_check, len);
    n  += len;
    line[n++] = '\n';
    if (write(2, line, n) < 0) {
        /* nothing more to say */
    }
}

/* MC_ENV "TIMEOUT" ran out: a hung job ends with the check it hung in */
static void mc_watchdog(int sig)
{
    (void)sig;
    mc_say_check("timeout");
    _exit(3);
}

/* a crash names the running check, then the handler that was there before
 * (UCX's: a backtrace) takes the fault again when the instruction retries */
static struct sigaction g_old_segv, g_old_bus;

static inline void mc_on_fault(int sig)
{
    char event[] = "signal NN";

    event[7] = (char)('0' + sig / 10 % 10);
    event[8] = (char)('0' + sig % 10);
    mc_say_check(event);
    sigaction(sig, (sig == SIGSEGV) ? &g_old_segv : &g_old_bus, NULL);
}

/* after MPI_Init, so that UCX's handler is the one handed the fault */
static inline void mc_fault_names_check(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = mc_on_fault;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_old_segv);
    sigaction(SIGBUS, &sa, &g_old_bus);
}


/* ------------------------------------------------------------------ */
/* checks                                                              */

/* every failure counts; only the first g_max_print of a rank are printed,
 * so that a broken path does not bury the first (telling) lines */
static void mc_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void mc_fail(const char *fmt, ...)
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

static void mc_check(int ok, const char *what)
{
    ++g_checks;
    if (!ok) {
        mc_fail("%s", what);
    }
}

static void mc_fail_rc(int rc)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;

    MPI_Error_string(rc, msg, &len);
    mc_fail("returned %d (%s)", rc, msg);
}

/* an MPI call returned MPI_SUCCESS (the communicators return errors) */
static void mc_mpi_ok(int rc)
{
    ++g_checks;
    if (rc != MPI_SUCCESS) {
        mc_fail_rc(rc);
    }
}

static void mc_digest(const void *buf, size_t len)
{
    const unsigned char *p = buf;
    size_t i;

    for (i = 0; i < len; ++i) {
        g_digest = (g_digest ^ p[i]) * MC_FNV_PRIME;
    }
}

/* collective: every rank's digest, folded in rank order at rank 0 (0 on
 * the others) */
static uint64_t mc_digest_gather(void)
{
    uint64_t *digests = NULL, d = MC_FNV_OFFSET;
    int i;

    if (g_rank == 0) {
        digests = malloc(sizeof(uint64_t) * (size_t)g_size);
    }
    MPI_Gather(&g_digest, 1, MPI_UINT64_T, digests, 1, MPI_UINT64_T, 0,
               MPI_COMM_WORLD);
    if (g_rank != 0) {
        return 0;
    }
    for (i = 0; i < g_size; ++i) {
        d = (d ^ digests[i]) * MC_FNV_PRIME;
    }
    free(digests);
    return d;
}

/*
 * Collective, at the end: sums over the ranks, at rank 0, of {g_checks,
 * g_failed, the program's n (at most MC_SUMMARY_MAX) counters, g_observed}
 * into sums[0..n+3) (zero on the other ranks); returns the digest of every
 * rank, folded in rank order at rank 0 (mc_digest_gather()).
 */
static uint64_t mc_summary_sums(const unsigned long long *counters, int n,
                                unsigned long long *sums)
{
    unsigned long long mine[MC_SUMMARY_MAX + 3];
    int i;

    mine[0] = (unsigned long long)g_checks;
    mine[1] = (unsigned long long)g_failed;
    for (i = 0; i < n; ++i) {
        mine[2 + i] = counters[i];
    }
    mine[2 + n] = (unsigned long long)g_observed;
    memset(sums, 0, sizeof(*sums) * (size_t)(n + 3));
    MPI_Reduce(mine, sums, n + 3, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0,
               MPI_COMM_WORLD);
    return mc_digest_gather();
}

/* rank 0's last line, the one the scripts read */
static void mc_print_totals(long checks, long failed)
{
    printf(MC_NAME ": %ld checks, %ld failed (%d ranks, %lu calls each)\n",
           checks, failed, g_size, g_call);
    fflush(stdout);
}


/* ------------------------------------------------------------------ */
/* data                                                                */

static uint64_t mc_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* 8 bytes of (call, src, dst) at index idx: the call number is explicit,
 * since non-blocking calls may be outstanding together */
static uint64_t mc_value(unsigned long call, int src, int dst, size_t idx)
{
    return mc_mix(((uint64_t)call << 40) ^ ((uint64_t)src << 52) ^
                  ((uint64_t)dst << 32) ^ idx);
}

static unsigned char mc_byte_of(unsigned long call, int src, int dst,
                                size_t k)
{
    return (unsigned char)(mc_value(call, src, dst, k / 8) >> (8 * (k % 8)));
}

/* len bytes and MC_GUARD more, all MC_POISON */
static void *mc_alloc_guarded(size_t len)
{
    unsigned char *p = malloc(len + MC_GUARD);

    if (p == NULL) {
        fprintf(stderr, MC_PROG ": out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(p, MC_POISON, len + MC_GUARD);
    return p;
}

/* the guard behind len bytes of buf is still MC_POISON */
static int mc_guard_ok(const void *buf, size_t len)
{
    const unsigned char *p = (const unsigned char *)buf + len;
    size_t i;

    for (i = 0; i < MC_GUARD; ++i) {
        if (p[i] != MC_POISON) {
            return 0;
        }
    }
    return 1;
}

/* the guards behind both buffers of a call */
static void mc_check_guards(const void *a, size_t alen, const void *b,
                            size_t blen)
{
    mc_check(mc_guard_ok(a, alen) && mc_guard_ok(b, blen),
             "guard bytes behind a buffer overwritten");
}


/* ------------------------------------------------------------------ */
/* reductions: each program picks its types and operations             */

typedef struct {
    MPI_Datatype dt;
    const char  *name;
    char         kind;   /* 's'/'u' integer, 'f' float, 'd' double */
    size_t       size;
} mc_rtype_t;

typedef struct {
    MPI_Op      op;
    const char *name;
    int         bitwise;
} mc_rop_t;

/* element idx of rank src's input to call: floats are small integers (sums
 * and min/max exact in any order) or powers of two (products exact) */
static void mc_gen_elem(const mc_rtype_t *t, const mc_rop_t *o,
                        unsigned long call, int src, size_t idx, void *out)
{
    uint64_t h = mc_value(call, src, 0, idx);
    static const float pf[4] = {1.0f, -1.0f, 2.0f, 0.5f};
    float f;
    double d;

    if ((t->kind == 's') || (t->kind == 'u')) {
        memcpy(out, &h, t->size);   /* little endian: the low bytes */
        return;
    }
    if (o->op == MPI_PROD) {
        f = pf[h % 4];
    } else if ((o->op == MPI_MIN) || (o->op == MPI_MAX)) {
        f = (float)((int)(h % 2001) - 1000);
    } else {
        f = (float)((int)(h % 17) - 8);
    }
    d = f;
    if (t->kind == 'f') {
        memcpy(out, &f, sizeof(f));
    } else {
        memcpy(out, &d, sizeof(d));
    }
}

static void mc_gen(const mc_rtype_t *t, const mc_rop_t *o, unsigned long call,
                   int src, void *buf, size_t first, size_t count)
{
    size_t i;

    for (i = 0; i < count; ++i) {
        mc_gen_elem(t, o, call, src, first + i, (char *)buf + i * t->size);
    }
}

/* acc = acc OP x, one element, integers modulo 2^bits as C wraps (which
 * op/avx's saturating 8-bit sums do not) */
static void mc_elem_op(const mc_rtype_t *t, const mc_rop_t *o, void *acc,
                       const void *x)
{
    if ((t->kind == 's') || (t->kind == 'u')) {
        uint64_t a = 0, b = 0, r;
        int64_t sa, sb;
        int sh = 64 - 8 * (int)t->size;

        memcpy(&a, acc, t->size);
        memcpy(&b, x, t->size);
        sa = (int64_t)(a << sh) >> sh;
        sb = (int64_t)(b << sh) >> sh;
        if (o->op == MPI_SUM) {
            r = a + b;
        } else if (o->op == MPI_PROD) {
            r = a * b;
        } else if (o->op == MPI_MIN) {
            r = (t->kind == 's') ? ((sa < sb) ? a : b) : ((a < b) ? a : b);
        } else if (o->op == MPI_MAX) {
            r = (t->kind == 's') ? ((sa > sb) ? a : b) : ((a > b) ? a : b);
        } else if (o->op == MPI_BAND) {
            r = a & b;
        } else if (o->op == MPI_BOR) {
            r = a | b;
        } else {
            r = a ^ b;
        }
        memcpy(acc, &r, t->size);
    } else if (t->kind == 'f') {
        float a, b;

        memcpy(&a, acc, 4);
        memcpy(&b, x, 4);
        a = (o->op == MPI_SUM) ? a + b : (o->op == MPI_PROD) ? a * b :
            (o->op == MPI_MIN) ? ((b < a) ? b : a) : ((b > a) ? b : a);
        memcpy(acc, &a, 4);
    } else {
        double a, b;

        memcpy(&a, acc, 8);
        memcpy(&b, x, 8);
        a = (o->op == MPI_SUM) ? a + b : (o->op == MPI_PROD) ? a * b :
            (o->op == MPI_MIN) ? ((b < a) ? b : a) : ((b > a) ? b : a);
        memcpy(acc, &a, 8);
    }
}

/* expected[0..count) = reduction over the nranks ranks of call's elements
 * first.. */
static void mc_reference(const mc_rtype_t *t, const mc_rop_t *o,
                         unsigned long call, int nranks, void *expected,
                         size_t first, size_t count)
{
    unsigned char x[8];
    size_t i;
    int r;

    for (i = 0; i < count; ++i) {
        void *acc = (char *)expected + i * t->size;

        mc_gen_elem(t, o, call, 0, first + i, acc);
        for (r = 1; r < nranks; ++r) {
            mc_gen_elem(t, o, call, r, first + i, x);
            mc_elem_op(t, o, acc, x);
        }
    }
}

/* one check: got[0..count) == expected, else a FAIL line for the first
 * element that differs ("WHAT: element ...", or no prefix if what is
 * NULL); a right result goes into the digest if add_digest */
static void mc_compare(const mc_rtype_t *t, const void *got,
                       const void *expected, size_t count, const char *what,
                       int add_digest)
{
    size_t i;

    ++g_checks;
    for (i = 0; i < count; ++i) {
        if (memcmp((const char *)got + i * t->size,
                   (const char *)expected + i * t->size, t->size) != 0) {
            uint64_t g = 0, e = 0;

            memcpy(&g, (const char *)got + i * t->size, t->size);
            memcpy(&e, (const char *)expected + i * t->size, t->size);
            mc_fail("%s%selement %zu of %zu: got 0x%llx, expected 0x%llx",
                    MC_WHAT(what), i, count, (unsigned long long)g,
                    (unsigned long long)e);
            return;
        }
    }
    if (add_digest) {
        mc_digest(got, count * t->size);
    }
}

/* the user operation of the fallback checks: coll/cxl takes predefined
 * operations only, so this one must reach the previous module */
static void mc_user_sum_mod(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int i, *a = in, *b = inout;

    (void)dt;
    for (i = 0; i < *len; ++i) {
        b[i] = (a[i] + b[i]) % MC_SUM_MOD;
    }
}


/* ------------------------------------------------------------------ */
/* data movements                                                      */

/* A rank's description of its bytes: a predefined type, or (vec, even
 * ranks only) 2 ints out of every 3, which odd ranks describe as MPI_INT. */
typedef struct {
    const char  *name;
    MPI_Datatype dt;
    size_t       unit;      /* bytes per element */
    int          vec;
} mc_mtype_t;

/* this rank's view of 'elems' elements of an mc_mtype_t */
typedef struct {
    MPI_Datatype dt;
    int          count;     /* per block, in dt */
    int          vec;       /* non-contiguous layout here */
} mc_view_t;

static MPI_Datatype g_vec;  /* vector(2, 1, 2, MPI_INT): see mc_off_of() */

/* the vector type, created: the movement type that is non-contiguous on
 * even ranks (freed by mc_finalize()) */
static mc_mtype_t mc_mtype_vec(void)
{
    MPI_Type_vector(2, 1, 2, MPI_INT, &g_vec);
    MPI_Type_commit(&g_vec);
    return (mc_mtype_t){"vector(2,1,2,MPI_INT) / MPI_INT", g_vec, 8, 1};
}

static mc_view_t mc_view_of(const mc_mtype_t *t, size_t elems, int rank)
{
    mc_view_t v = {t->dt, (int)elems, 0};

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
static size_t mc_off_of(const mc_view_t *v, size_t k)
{
    return v->vec ? (k / 8) * 12 + ((k % 8) / 4) * 8 + k % 4 : k;
}

static size_t mc_span_of(const mc_view_t *v, size_t bytes)
{
    return v->vec ? (bytes / 8) * 12 : bytes;
}

/* block b (of 'per' bytes) of buf: call's bytes of (src, dst) */
static void mc_fill(const mc_view_t *v, void *buf, size_t b, size_t per,
                    unsigned long call, int src, int dst)
{
    size_t k;

    for (k = 0; k < per; ++k) {
        ((unsigned char *)buf)[mc_off_of(v, b * per + k)] =
            mc_byte_of(call, src, dst, k);
    }
}

/* one check: block b holds call's bytes of (src, dst); into the digest if
 * 'result' (a send buffer's own data is checked, not hashed) */
static void mc_expect_block(const mc_view_t *v, const void *buf, size_t b,
                            size_t per, unsigned long call, int src, int dst,
                            int result, const char *what)
{
    const unsigned char *p = buf;
    size_t k;

    ++g_checks;
    for (k = 0; k < per; ++k) {
        unsigned char got = p[mc_off_of(v, b * per + k)];

        if (got != mc_byte_of(call, src, dst, k)) {
            mc_fail("%s block %zu (from rank %d) byte %zu of %zu: 0x%02x, "
                    "expected 0x%02x", what, b, src, k, per, got,
                    mc_byte_of(call, src, dst, k));
            return;
        }
    }
    if (result) {
        for (k = 0; k < per; ++k) {
            g_digest = (g_digest ^ p[mc_off_of(v, b * per + k)]) *
                       MC_FNV_PRIME;
        }
    }
}

/* one check: the vector layout's gaps and the guard stay MC_POISON ("WHAT:
 * ..." and "the buffer"; without what, no prefix and "a buffer") */
static void mc_expect_gaps(const mc_view_t *v, const void *buf, size_t bytes,
                           const char *what)
{
    const unsigned char *p = buf;
    size_t span = mc_span_of(v, bytes), i;

    ++g_checks;
    if (v->vec) {
        for (i = 0; i < span; ++i) {
            if ((i % 12 >= 4) && (i % 12 < 8) && (p[i] != MC_POISON)) {
                mc_fail("%s%sgap byte %zu of the vector layout overwritten",
                        MC_WHAT(what), i);
                return;
            }
        }
    }
    if (!mc_guard_ok(buf, span)) {
        mc_fail("%s%sguard bytes behind %s buffer overwritten", MC_WHAT(what),
                what ? "the" : "a");
    }
}


/* ------------------------------------------------------------------ */
/* barrier checks: a page every rank of MPI_COMM_WORLD maps; slot r holds
 * the round rank r entered.  A barrier that lets a rank out before every
 * rank entered shows as a slot behind the round. */

/* collective; NULL (after a FAIL line) if the page could not be mapped */
static volatile unsigned long *mc_slots_map(void)
{
    char name[64];
    unsigned long base = 0;
    volatile unsigned long *slot;
    int fd;

    if (g_rank == 0) {
        base = (unsigned long)getpid();
    }
    MPI_Bcast(&base, 1, MPI_UNSIGNED_LONG, 0, MPI_COMM_WORLD);
    snprintf(name, sizeof(name), "/" MC_NAME "-test-%lu", base);
    fd = shm_open(name, O_RDWR | O_CREAT, 0600);
    if ((fd < 0) || (ftruncate(fd, 4096) != 0)) {
        mc_fail("shm_open %s failed", name);
        return NULL;
    }
    slot = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (slot == MAP_FAILED) {
        mc_fail("mmap of %s failed", name);
        return NULL;
    }
    MPI_Barrier(MPI_COMM_WORLD);     /* everyone mapped it */
    if (g_rank == 0) {
        shm_unlink(name);
    }
    return slot;
}

static void mc_slots_unmap(volatile unsigned long *slot)
{
    munmap((void *)slot, 4096);
}

/* before the barrier of round i: rank 0 (or the last rank) is late on some
 * rounds, so that the others wait in it (the check itself is not timed) */
static void mc_slots_enter(volatile unsigned long *slot, int i)
{
    int late = ((i % 3 == 0) && (g_rank == 0)) ||
               ((i % 3 == 1) && (g_rank == g_size - 1));

    if (late) {
        usleep(2000);
    }
    __atomic_store_n(&slot[g_rank], (unsigned long)i, __ATOMIC_RELEASE);
}

/* one check, after the barrier of round i: every rank entered it */
static void mc_slots_check(volatile unsigned long *slot, int i)
{
    int r;

    ++g_checks;
    for (r = 0; r < g_size; ++r) {
        unsigned long v = __atomic_load_n(&slot[r], __ATOMIC_ACQUIRE);

        if (v < (unsigned long)i) {
            mc_fail("rank %d left the barrier before rank %d entered it "
                    "(its slot says round %lu)", g_rank, r, v);
            break;
        }
    }
}


/* ------------------------------------------------------------------ */
/* MPI_T counters of coll/cxl                                          */

#define MC_PVARS_MAX 8

static MPI_T_pvar_session g_pvar_session;
static int g_pvar_session_ok;
static int g_pvar_n;
static MPI_T_pvar_handle g_pvar_handle[MC_PVARS_MAX];
static int g_pvar_have[MC_PVARS_MAX];   /* found, a handle allocated */

/* a handle for each of the n variables named (the first of a name): each
 * program reads the counters it knows; one missing is reported by it */
static void mc_pvars_init(const char *const *names, int n)
{
    int provided, num, i, c, namelen, desclen, verb, vclass, bind, ro, cont,
        atomic, count;
    char name[256], desc[1024];
    MPI_Datatype dt;
    MPI_T_enum et;

    g_pvar_n = n;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS ||
        MPI_T_pvar_get_num(&num) != MPI_SUCCESS ||
        MPI_T_pvar_session_create(&g_pvar_session) != MPI_SUCCESS) {
        return;
    }
    g_pvar_session_ok = 1;
    for (i = 0; i < num; ++i) {
        namelen = sizeof(name);
        desclen = sizeof(desc);
        if (MPI_T_pvar_get_info(i, name, &namelen, &verb, &vclass, &dt, &et,
                                desc, &desclen, &bind, &ro, &cont,
                                &atomic) != MPI_SUCCESS) {
            continue;
        }
        for (c = 0; c < n; ++c) {
            if (!g_pvar_have[c] && (strcmp(name, names[c]) == 0) &&
                (MPI_T_pvar_handle_alloc(g_pvar_session, i, NULL,
                                         &g_pvar_handle[c],
                                         &count) == MPI_SUCCESS)) {
                g_pvar_have[c] = 1;
            }
        }
    }
}

/* counter c's value, 0 if it is not there */
static unsigned long long mc_pvar(int c)
{
    unsigned long long v = 0;

    if (g_pvar_have[c]) {
        MPI_T_pvar_read(g_pvar_session, g_pvar_handle[c], &v);
    }
    return v;
}

static void mc_pvars_fini(void)
{
    int c;

    for (c = 0; c < g_pvar_n; ++c) {
        if (g_pvar_have[c]) {
            MPI_T_pvar_handle_free(g_pvar_session, &g_pvar_handle[c]);
        }
    }
    if (g_pvar_session_ok) {
        MPI_T_pvar_session_free(&g_pvar_session);
    }
    MPI_T_finalize();
}


/* ------------------------------------------------------------------ */
/* environment, start and end                                          */

/*
 * Before MPI_Init: the watchdog (MC_ENV "TIMEOUT", default 300 s: a hung
 * job must end, naming its check), MC_ENV "MAX_PRINT", "MIN_RANKS",
 * "LARGE"; then MPI_Init, or MPI_Init_thread at the level MC_ENV "THREAD"
 * names (funneled, serialized, multiple: MPI_Comm_dup and _split hung
 * above MPI_THREAD_SINGLE while coll/cxl made teams when Open MPI enabled
 * it).  *thread: the level asked for; g_rank and g_size set.
 */
static void mc_init(int *argc, char ***argv, int *thread, int *provided)
{
    const char *e;
    unsigned timeout = 300;

    if ((e = getenv(MC_ENV "TIMEOUT")) != NULL) {
        timeout = (unsigned)atoi(e);
    }
    signal(SIGALRM, mc_watchdog);
    alarm(timeout);
    if ((e = getenv(MC_ENV "MAX_PRINT")) != NULL) {
        g_max_print = atol(e);
    }
    if ((e = getenv(MC_ENV "MIN_RANKS")) != NULL) {
        g_min_ranks = atoi(e);
    }
    if ((e = getenv(MC_ENV "LARGE")) != NULL) {
        g_large = (size_t)atol(e);
    }
    *thread   = MPI_THREAD_SINGLE;
    *provided = MPI_THREAD_SINGLE;
    if ((e = getenv(MC_ENV "THREAD")) != NULL) {
        *thread = !strcmp(e, "multiple") ? MPI_THREAD_MULTIPLE :
                  !strcmp(e, "serialized") ? MPI_THREAD_SERIALIZED :
                  !strcmp(e, "funneled") ? MPI_THREAD_FUNNELED :
                  MPI_THREAD_SINGLE;
        MPI_Init_thread(argc, argv, *thread, provided);
    } else {
        MPI_Init(argc, argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
}

/* the index of MC_ENV var's value in names[1..n); 0 (the default, whose
 * name names[0] is) if it is unset or none of them */
static int mc_env_choice(const char *var, const char *const *names, int n)
{
    char full[64];
    const char *e;
    int i;

    snprintf(full, sizeof(full), MC_ENV "%s", var);
    if ((e = getenv(full)) != NULL) {
        for (i = 1; i < n; ++i) {
            if (strcmp(e, names[i]) == 0) {
                return i;
            }
        }
    }
    return 0;
}

/* MC_ENV "ONLY": a comma-separated list of sections to run (default all) */
static int mc_section(const char *name)
{
    const char *only = getenv(MC_ENV "ONLY"), *p;
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

/* collective, after rank 0's summary: every rank's exit status (1 if any
 * check failed anywhere), with MPI and the counters finalized */
static int mc_finalize(long failed_all)
{
    MPI_Bcast(&failed_all, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    MPI_Type_free(&g_vec);
    mc_pvars_fini();
    MPI_Finalize();
    return (failed_all == 0) ? 0 : 1;
}

#endif
