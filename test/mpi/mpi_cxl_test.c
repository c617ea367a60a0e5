/*
 * mpi_cxl_test - MPI over the UCX "cxl" transport, with content verification.
 *
 * Run it with 4 ranks (any number >= 2 works) under Open MPI's pml ucx and
 * osc ucx with UCX_TLS=cxl (see test/mpi/run-mpi.sh):
 *
 *   point-to-point  MPI_Send/MPI_Recv ring, MPI_Isend/MPI_Irecv all-to-all,
 *                   MPI_ANY_SOURCE/MPI_ANY_TAG receives, MPI_Sendrecv,
 *                   MPI_Probe + MPI_Get_count; sizes 1 B .. 4 MiB, every
 *                   byte derived from (sender, receiver, size, index) and
 *                   verified, with guard bytes behind every receive buffer
 *   collectives     Barrier (ordering), Bcast, Reduce, Allreduce (exact
 *                   int/double sums, max), Allgather, Alltoall, Gather,
 *                   Scatter
 *   one-sided       windows from MPI_Win_allocate: Put/Get with fence,
 *                   passive target lock exclusive/shared, exclusive-lock
 *                   mutual exclusion, Accumulate SUM/MAX, Fetch_and_op
 *                   ticket counter, Compare_and_swap spin lock
 *   malloc'd window (MPI_CXL_SW_RMA=0 disables) Put/Get on an MPI_Win_create
 *                   window over malloc'd memory: memory outside the pool,
 *                   reached through its owner (UCX_CXL_REG_ANY=y, the
 *                   default) or UCP's software RMA over cxl active messages
 *                   (UCX_CXL_REG_ANY=n)
 *
 * Window memory lies in the CXL pool: checked against /proc/self/maps when
 * UCX_ALLOC_PRIO starts with "md:cxl" or MPI_CXL_CHECK_POOL=1
 * (MPI_CXL_CHECK_POOL=0 skips it).  The pool is UCX_CXL_POOL (first entry),
 * else the per-user default /dev/shm/ucx-cxl-UID.pool; for an emulated
 * non-coherent pool "emulate-nc:PATH" the memory must lie in the rank's
 * view of it, PATH.host<k>.
 *
 * Rank 0 prints one line per check ("PASS: ...", "FAIL: ..." with each
 * failing rank's first error), then "mpi: N passed, N failed"; every rank
 * exits 1 if any check failed.  A watchdog (alarm, MPI_CXL_TIMEOUT seconds
 * per check, default 120) reports the check that hung and ends the job.
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MSG_LEN   240
#define GUARD     64      /* guard bytes behind every receive buffer */
#define GUARD_VAL 0x5a
#define POISON    0xa5
#define MAX_SIZE  ((size_t)4 << 20)

static const size_t sizes[] = {1, 7, 64, 1000, 4096, 65536, 1 << 20, 4 << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static int g_rank, g_size;
static unsigned g_timeout = 120;
static char g_check[160] = "MPI_Init";
static char g_phase[96]  = "";
static volatile sig_atomic_t g_passed, g_failed;
static long g_nerr;
static char g_err[MSG_LEN];
static double g_t0;

/* ------------------------------------------------------------------ */
/* watchdog                                                            */

typedef struct {
    char   buf[1024];
    size_t len;
} sigbuf_t;

static void sb_str(sigbuf_t *b, const char *s)
{
    while (*s && b->len < sizeof(b->buf) - 1) {
        b->buf[b->len++] = *s++;
    }
}

static void sb_num(sigbuf_t *b, unsigned long v)
{
    char tmp[24];
    int n = 0;

    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v && n < (int)sizeof(tmp));
    while (n > 0 && b->len < sizeof(b->buf) - 1) {
        b->buf[b->len++] = tmp[--n];
    }
}

static void sb_write(int fd, const sigbuf_t *b)
{
    size_t off = 0;
    ssize_t w;

    while (off < b->len) {
        w = write(fd, b->buf + off, b->len - off);
        if (w <= 0) {
            if (w < 0 && errno == EINTR) {
                continue;
            }
            return;
        }
        off += (size_t)w;
    }
}

/* async-signal-safe: only write(2) and _exit(2) */
static void watchdog(int sig)
{
    sigbuf_t b = {.len = 0};

    (void)sig;
    sb_str(&b, "mpi: rank ");
    sb_num(&b, (unsigned long)g_rank);
    sb_str(&b, ": watchdog: check '");
    sb_str(&b, g_check);
    if (g_phase[0]) {
        sb_str(&b, "' [");
        sb_str(&b, g_phase);
        sb_str(&b, "]");
    } else {
        sb_str(&b, "'");
    }
    sb_str(&b, " did not finish within ");
    sb_num(&b, g_timeout);
    sb_str(&b, " s; aborting\n");
    sb_write(2, &b);
    if (g_rank == 0) {
        b.len = 0;
        sb_str(&b, "FAIL: ");
        sb_str(&b, g_check);
        sb_str(&b, ": hung (watchdog, ");
        sb_num(&b, g_timeout);
        sb_str(&b, " s");
        if (g_phase[0]) {
            sb_str(&b, ", in ");
            sb_str(&b, g_phase);
        }
        sb_str(&b, ")\nmpi: ");
        sb_num(&b, (unsigned long)g_passed);
        sb_str(&b, " passed, ");
        sb_num(&b, (unsigned long)g_failed + 1);
        sb_str(&b, " failed\n");
        sb_write(1, &b);
    }
    _exit(3);
}

static void arm_watchdog(void)
{
    /* rank 0 fires first, so that it can print the verdict before mpirun
     * takes the job down because another rank went away */
    alarm(g_rank == 0 ? g_timeout : g_timeout + 10);
}

/* ------------------------------------------------------------------ */
/* checks                                                              */

static void phase(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void phase(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(g_phase, sizeof(g_phase), fmt, ap);
    va_end(ap);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    va_list ap;

    if (g_nerr++ == 0) {
        va_start(ap, fmt);
        vsnprintf(g_err, sizeof(g_err), fmt, ap);
        va_end(ap);
    }
}

static void mpi_failed(const char *what, int rc, int line)
{
    char str[MPI_MAX_ERROR_STRING];
    int len = 0;

    if (MPI_Error_string(rc, str, &len) != MPI_SUCCESS) {
        snprintf(str, sizeof(str), "error %d", rc);
    }
    fail("line %d: %s: %s", line, what, str);
}

#define MPICHK(_call) \
    do { \
        int rc_ = (_call); \
        if (rc_ != MPI_SUCCESS) { \
            mpi_failed(#_call, rc_, __LINE__); \
        } \
    } while (0)

static void check_begin(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void check_begin(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(g_check, sizeof(g_check), fmt, ap);
    va_end(ap);
    g_phase[0] = '\0';
    g_nerr     = 0;
    g_err[0]   = '\0';
    arm_watchdog();
    g_t0 = MPI_Wtime();
}

typedef struct {
    long nerr;
    char msg[MSG_LEN];
} report_t;

/* Collect every rank's verdict at rank 0, print it, agree on it. */
static void check_end(void)
{
    report_t mine, *all = NULL;
    double dt = MPI_Wtime() - g_t0;
    int verdict = 0, i, rc;

    phase("collecting results");
    memset(&mine, 0, sizeof(mine));
    mine.nerr = g_nerr;
    memcpy(mine.msg, g_err, sizeof(mine.msg));
    if (g_rank == 0) {
        all = calloc((size_t)g_size, sizeof(*all));
        if (all == NULL) {
            fprintf(stderr, "mpi: out of memory\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    rc = MPI_Gather(&mine, (int)sizeof(mine), MPI_BYTE, all, (int)sizeof(mine),
                    MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "mpi: rank %d: MPI_Gather of the results of '%s' "
                "failed (%d)\n", g_rank, g_check, rc);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (g_rank == 0) {
        for (i = 0; i < g_size; ++i) {
            verdict |= (all[i].nerr != 0);
        }
        if (!verdict) {
            printf("PASS: %s (%.3f s)\n", g_check, dt);
        } else {
            printf("FAIL: %s (%.3f s)\n", g_check, dt);
            for (i = 0; i < g_size; ++i) {
                if (all[i].nerr != 0) {
                    all[i].msg[MSG_LEN - 1] = '\0';
                    printf("    rank %d: %ld error%s, first: %s\n", i,
                           all[i].nerr, (all[i].nerr == 1) ? "" : "s",
                           all[i].msg);
                }
            }
        }
        fflush(stdout);
        free(all);
    }
    rc = MPI_Bcast(&verdict, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "mpi: rank %d: MPI_Bcast of the verdict of '%s' "
                "failed (%d)\n", g_rank, g_check, rc);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (verdict) {
        ++g_failed;
    } else {
        ++g_passed;
    }
    g_phase[0] = '\0';
    alarm(0);
}

static void check_skip(const char *name, const char *why)
{
    if (g_rank == 0) {
        printf("SKIP: %s (%s)\n", name, why);
        fflush(stdout);
    }
}

/* ------------------------------------------------------------------ */
/* data patterns                                                       */

static inline uint8_t pat(int src, int dst, size_t size, size_t i)
{
    uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull;

    x ^= ((uint64_t)(unsigned)src << 48) ^ ((uint64_t)(unsigned)dst << 32);
    x ^= (uint64_t)size * 0xc2b2ae3d27d4eb4full;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    return (uint8_t)x;
}

static void fill(uint8_t *buf, int src, int dst, size_t size)
{
    size_t i;

    for (i = 0; i < size; ++i) {
        buf[i] = pat(src, dst, size, i);
    }
}

static const char *fmtsize(size_t size)
{
    static char s[4][32];
    static int k;
    char *p = s[k++ & 3];

    if (size >= (1u << 20) && size % (1u << 20) == 0) {
        snprintf(p, 32, "%zu MiB", size >> 20);
    } else if (size >= 1024 && size % 1024 == 0) {
        snprintf(p, 32, "%zu KiB", size >> 10);
    } else {
        snprintf(p, 32, "%zu B", size);
    }
    return p;
}

/* receive buffer: poisoned payload followed by GUARD guard bytes */
static void prep_recv(uint8_t *buf, size_t size)
{
    memset(buf, POISON, size);
    memset(buf + size, GUARD_VAL, GUARD);
}

/* verify size bytes of pattern (src -> dst), and the guard behind them */
static int verify(const uint8_t *buf, int src, int dst, size_t size,
                  int guard, const char *what)
{
    size_t i, bad = 0, first = 0;

    for (i = 0; i < size; ++i) {
        if (buf[i] != pat(src, dst, size, i)) {
            if (bad++ == 0) {
                first = i;
            }
        }
    }
    if (bad) {
        fail("%s, %s from rank %d to %d: %zu of %zu bytes wrong, first at "
             "byte %zu: 0x%02x, expected 0x%02x", what, fmtsize(size), src,
             dst, bad, size, first, buf[first], pat(src, dst, size, first));
        return -1;
    }
    if (guard) {
        for (i = 0; i < GUARD; ++i) {
            if (buf[size + i] != GUARD_VAL) {
                fail("%s, %s from rank %d: byte %zu behind the message "
                     "overwritten (0x%02x)", what, fmtsize(size), src, i,
                     buf[size + i]);
                return -1;
            }
        }
    }
    return 0;
}

static void check_status(const MPI_Status *st, int src, int tag, size_t size,
                         const char *what)
{
    int count = -1;

    if (st->MPI_SOURCE != src) {
        fail("%s, %s: status source %d, expected %d", what, fmtsize(size),
             st->MPI_SOURCE, src);
    }
    if (st->MPI_TAG != tag) {
        fail("%s, %s: status tag %d, expected %d", what, fmtsize(size),
             st->MPI_TAG, tag);
    }
    MPICHK(MPI_Get_count(st, MPI_BYTE, &count));
    if (count != (int)size) {
        fail("%s, %s: MPI_Get_count %d, expected %zu", what, fmtsize(size),
             count, size);
    }
}

static void *xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);

    if (p == NULL) {
        fprintf(stderr, "mpi: rank %d: out of memory (%zu bytes)\n", g_rank,
                size);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

/* ------------------------------------------------------------------ */
/* point-to-point                                                      */

static uint8_t *g_sbuf, *g_rbuf;          /* MAX_SIZE + GUARD each */
static uint8_t **g_sbufs, **g_rbufs;      /* one per peer */

static void p2p_ring(size_t size, int si)
{
    int next = (g_rank + 1) % g_size;
    int prev = (g_rank + g_size - 1) % g_size;
    int tag  = 100 + si;
    MPI_Status st;

    check_begin("p2p: MPI_Send/MPI_Recv ring, %s", fmtsize(size));
    fill(g_sbuf, g_rank, next, size);
    prep_recv(g_rbuf, size);
    /* rank 0 starts the ring: no cycle of blocking sends */
    if (g_rank == 0) {
        phase("MPI_Send to %d", next);
        MPICHK(MPI_Send(g_sbuf, (int)size, MPI_BYTE, next, tag, MPI_COMM_WORLD));
        phase("MPI_Recv from %d", prev);
        MPICHK(MPI_Recv(g_rbuf, (int)size, MPI_BYTE, prev, tag, MPI_COMM_WORLD,
                        &st));
    } else {
        phase("MPI_Recv from %d", prev);
        MPICHK(MPI_Recv(g_rbuf, (int)size, MPI_BYTE, prev, tag, MPI_COMM_WORLD,
                        &st));
        phase("MPI_Send to %d", next);
        MPICHK(MPI_Send(g_sbuf, (int)size, MPI_BYTE, next, tag, MPI_COMM_WORLD));
    }
    check_status(&st, prev, tag, size, "MPI_Recv");
    verify(g_rbuf, prev, g_rank, size, 1, "MPI_Recv");
    check_end();
}

static void p2p_alltoall_nb(size_t size, int si)
{
    MPI_Request *reqs = xmalloc(2 * (size_t)g_size * sizeof(*reqs));
    MPI_Status *sts   = xmalloc(2 * (size_t)g_size * sizeof(*sts));
    int tag = 200 + si, p;

    check_begin("p2p: MPI_Isend/MPI_Irecv all-to-all (self included), %s",
                fmtsize(size));
    for (p = 0; p < g_size; ++p) {
        prep_recv(g_rbufs[p], size);
        fill(g_sbufs[p], g_rank, p, size);
    }
    for (p = 0; p < g_size; ++p) {
        MPICHK(MPI_Irecv(g_rbufs[p], (int)size, MPI_BYTE, p, tag,
                         MPI_COMM_WORLD, &reqs[p]));
    }
    for (p = 0; p < g_size; ++p) {
        int dst = (g_rank + p) % g_size; /* stagger the destinations */
        MPICHK(MPI_Isend(g_sbufs[dst], (int)size, MPI_BYTE, dst, tag,
                         MPI_COMM_WORLD, &reqs[g_size + dst]));
    }
    phase("MPI_Waitall");
    MPICHK(MPI_Waitall(2 * g_size, reqs, sts));
    for (p = 0; p < g_size; ++p) {
        check_status(&sts[p], p, tag, size, "MPI_Irecv");
        verify(g_rbufs[p], p, g_rank, size, 1, "MPI_Irecv");
    }
    check_end();
    free(reqs);
    free(sts);
}

/* root receives n-1 messages with MPI_ANY_SOURCE, MPI_ANY_TAG */
static void p2p_any_source(size_t size, int si)
{
    int root = si % g_size, k, src;
    int *seen = calloc((size_t)g_size, sizeof(int));
    MPI_Status st;

    check_begin("p2p: MPI_ANY_SOURCE/MPI_ANY_TAG receives at rank %d, %s",
                root, fmtsize(size));
    if (seen == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (g_rank == root) {
        for (k = 0; k < g_size - 1; ++k) {
            prep_recv(g_rbuf, size);
            phase("receive %d of %d", k + 1, g_size - 1);
            MPICHK(MPI_Recv(g_rbuf, (int)size, MPI_BYTE, MPI_ANY_SOURCE,
                            MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            src = st.MPI_SOURCE;
            if ((src < 0) || (src >= g_size) || (src == root)) {
                fail("MPI_ANY_SOURCE, %s: status source %d", fmtsize(size), src);
                continue;
            }
            if (seen[src]++) {
                fail("MPI_ANY_SOURCE, %s: second message from rank %d",
                     fmtsize(size), src);
            }
            check_status(&st, src, 1000 + src, size, "MPI_ANY_SOURCE");
            verify(g_rbuf, src, root, size, 1, "MPI_ANY_SOURCE");
        }
        for (k = 0; k < g_size; ++k) {
            if ((k != root) && !seen[k]) {
                fail("MPI_ANY_SOURCE, %s: nothing from rank %d", fmtsize(size),
                     k);
            }
        }
    } else {
        fill(g_sbuf, g_rank, root, size);
        phase("MPI_Send to %d", root);
        MPICHK(MPI_Send(g_sbuf, (int)size, MPI_BYTE, root, 1000 + g_rank,
                        MPI_COMM_WORLD));
    }
    check_end();
    free(seen);
}

static void p2p_sendrecv(size_t size, int si)
{
    int tag = 300 + si, k, dst, src;
    MPI_Status st;

    check_begin("p2p: MPI_Sendrecv shifts 1..%d, %s", g_size - 1,
                fmtsize(size));
    for (k = 1; k < g_size; ++k) {
        dst = (g_rank + k) % g_size;
        src = (g_rank + g_size - k) % g_size;
        fill(g_sbuf, g_rank, dst, size);
        prep_recv(g_rbuf, size);
        phase("shift %d", k);
        MPICHK(MPI_Sendrecv(g_sbuf, (int)size, MPI_BYTE, dst, tag, g_rbuf,
                            (int)size, MPI_BYTE, src, tag, MPI_COMM_WORLD, &st));
        check_status(&st, src, tag, size, "MPI_Sendrecv");
        verify(g_rbuf, src, g_rank, size, 1, "MPI_Sendrecv");
    }
    check_end();
}

static void p2p_probe(size_t size, int si)
{
    int next = (g_rank + 1) % g_size;
    int prev = (g_rank + g_size - 1) % g_size;
    int tag  = 400 + si, count = -1, icount = -1;
    MPI_Request req;
    MPI_Status st, rst;
    uint8_t *buf;

    check_begin("p2p: MPI_Probe/MPI_Get_count, %s", fmtsize(size));
    fill(g_sbuf, g_rank, next, size);
    MPICHK(MPI_Isend(g_sbuf, (int)size, MPI_BYTE, next, tag, MPI_COMM_WORLD,
                     &req));
    phase("MPI_Probe");
    MPICHK(MPI_Probe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st));
    if (st.MPI_SOURCE != prev) {
        fail("MPI_Probe: source %d, expected %d", st.MPI_SOURCE, prev);
    }
    MPICHK(MPI_Get_count(&st, MPI_BYTE, &count));
    if (count != (int)size) {
        fail("MPI_Get_count(MPI_BYTE) after MPI_Probe: %d, expected %zu", count,
             size);
        count = (int)size;
    }
    MPICHK(MPI_Get_count(&st, MPI_INT, &icount));
    if (size % sizeof(int) == 0 ? (icount != (int)(size / sizeof(int))) :
                                  (icount != MPI_UNDEFINED)) {
        fail("MPI_Get_count(MPI_INT) after MPI_Probe of %zu bytes: %d", size,
             icount);
    }
    buf = xmalloc((size_t)count + GUARD);
    prep_recv(buf, (size_t)count);
    phase("MPI_Recv of the probed message");
    MPICHK(MPI_Recv(buf, count, MPI_BYTE, st.MPI_SOURCE, tag, MPI_COMM_WORLD,
                    &rst));
    check_status(&rst, prev, tag, size, "MPI_Recv after MPI_Probe");
    verify(buf, prev, g_rank, size, 1, "MPI_Recv after MPI_Probe");
    phase("MPI_Wait for the send");
    MPICHK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    free(buf);
    check_end();
}

/* ------------------------------------------------------------------ */
/* collectives                                                         */

static double now_real(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void coll_barrier(void)
{
    double t[2], *all = xmalloc(2 * (size_t)g_size * sizeof(double));
    double max_enter, min_exit;
    struct timespec delay = {0, 30 * 1000 * 1000};
    int round, i;

    check_begin("coll: MPI_Barrier (no rank leaves before the last enters)");
    for (round = 0; round < g_size; ++round) {
        phase("ordering round %d", round);
        MPICHK(MPI_Barrier(MPI_COMM_WORLD));
        if (g_rank == round) {
            nanosleep(&delay, NULL); /* the late rank of this round */
        }
        t[0] = now_real();
        MPICHK(MPI_Barrier(MPI_COMM_WORLD));
        t[1] = now_real();
        MPICHK(MPI_Allgather(t, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE,
                             MPI_COMM_WORLD));
        max_enter = all[0];
        min_exit  = all[1];
        for (i = 0; i < g_size; ++i) {
            max_enter = (all[2 * i] > max_enter) ? all[2 * i] : max_enter;
            min_exit  = (all[2 * i + 1] < min_exit) ? all[2 * i + 1] : min_exit;
        }
        if (min_exit < max_enter) {
            fail("round %d: a rank left MPI_Barrier %.6f s before rank %d "
                 "entered it", round, max_enter - min_exit, round);
        }
    }
    phase("1000 barriers");
    for (i = 0; i < 1000; ++i) {
        MPICHK(MPI_Barrier(MPI_COMM_WORLD));
    }
    free(all);
    check_end();
}

static void coll_bcast(void)
{
    size_t si, size;
    int root;

    check_begin("coll: MPI_Bcast, every root, 1 B .. 4 MiB");
    for (si = 0; si < NSIZES; ++si) {
        size = sizes[si];
        for (root = 0; root < g_size; ++root) {
            phase("%s from root %d", fmtsize(size), root);
            if (g_rank == root) {
                fill(g_rbuf, root, g_size, size);
                memset(g_rbuf + size, GUARD_VAL, GUARD);
            } else {
                prep_recv(g_rbuf, size);
            }
            MPICHK(MPI_Bcast(g_rbuf, (int)size, MPI_BYTE, root, MPI_COMM_WORLD));
            verify(g_rbuf, root, g_size, size, 1, "MPI_Bcast");
            if ((size > 65536) && (root > 0)) {
                break; /* large sizes: roots 0 and 1 are enough */
            }
        }
    }
    check_end();
}

static const int counts[] = {1, 1000, 262144};
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))

/* rank r contributes ival(r, i) and dval(r, i); sums are exact */
static int ival(int r, int i)
{
    return (r + 1) * (i % 1000 + 1);
}

static double dval(int r, int i)
{
    return (double)i + 0.25 * (r + 1);
}

static int imaxval(int r, int i)
{
    return ((i * 7 + r * 13) % 101) - 50;
}

static void reduce_verify(const int *isum, const double *dsum, const int *imax,
                          int count, const char *what)
{
    long n = g_size, tri = n * (n + 1) / 2;
    int i, r, m;
    double de;

    for (i = 0; i < count; ++i) {
        if (isum[i] != (int)(tri * (i % 1000 + 1))) {
            fail("%s MPI_INT MPI_SUM, count %d: element %d is %d, expected %ld",
                 what, count, i, isum[i], tri * (i % 1000 + 1));
            return;
        }
        de = (double)n * i + 0.25 * (double)tri;
        if (dsum[i] != de) {
            fail("%s MPI_DOUBLE MPI_SUM, count %d: element %d is %.17g, "
                 "expected %.17g", what, count, i, dsum[i], de);
            return;
        }
        if (imax != NULL) {
            for (m = INT_MIN, r = 0; r < g_size; ++r) {
                m = (imaxval(r, i) > m) ? imaxval(r, i) : m;
            }
            if (imax[i] != m) {
                fail("%s MPI_INT MPI_MAX, count %d: element %d is %d, expected "
                     "%d", what, count, i, imax[i], m);
                return;
            }
        }
    }
}

static void coll_reduce(int all)
{
    int maxc = counts[NCOUNTS - 1], ci, i, root, count;
    int *is = xmalloc((size_t)maxc * sizeof(int));
    int *ir = xmalloc((size_t)maxc * sizeof(int));
    int *ms = xmalloc((size_t)maxc * sizeof(int));
    int *mr = xmalloc((size_t)maxc * sizeof(int));
    double *ds = xmalloc((size_t)maxc * sizeof(double));
    double *dr = xmalloc((size_t)maxc * sizeof(double));

    if (all) {
        check_begin("coll: MPI_Allreduce MPI_SUM int/double (exact), MPI_MAX "
                    "int; 1, 1000, 262144 elements");
    } else {
        check_begin("coll: MPI_Reduce MPI_SUM int/double (exact), MPI_MAX int "
                    "to every root; 1, 1000, 262144 elements");
    }
    for (ci = 0; ci < (int)NCOUNTS; ++ci) {
        count = counts[ci];
        for (i = 0; i < count; ++i) {
            is[i] = ival(g_rank, i);
            ds[i] = dval(g_rank, i);
            ms[i] = imaxval(g_rank, i);
        }
        for (root = 0; root < g_size; ++root) {
            memset(ir, 0xff, (size_t)count * sizeof(int));
            memset(mr, 0xff, (size_t)count * sizeof(int));
            memset(dr, 0xff, (size_t)count * sizeof(double));
            phase("%d elements, root %d", count, root);
            if (all) {
                MPICHK(MPI_Allreduce(is, ir, count, MPI_INT, MPI_SUM,
                                     MPI_COMM_WORLD));
                MPICHK(MPI_Allreduce(ds, dr, count, MPI_DOUBLE, MPI_SUM,
                                     MPI_COMM_WORLD));
                MPICHK(MPI_Allreduce(ms, mr, count, MPI_INT, MPI_MAX,
                                     MPI_COMM_WORLD));
                reduce_verify(ir, dr, mr, count, "MPI_Allreduce");
                break; /* no root */
            }
            MPICHK(MPI_Reduce(is, ir, count, MPI_INT, MPI_SUM, root,
                              MPI_COMM_WORLD));
            MPICHK(MPI_Reduce(ds, dr, count, MPI_DOUBLE, MPI_SUM, root,
                              MPI_COMM_WORLD));
            MPICHK(MPI_Reduce(ms, mr, count, MPI_INT, MPI_MAX, root,
                              MPI_COMM_WORLD));
            if (g_rank == root) {
                reduce_verify(ir, dr, mr, count, "MPI_Reduce");
            }
        }
    }
    free(is);
    free(ir);
    free(ms);
    free(mr);
    free(ds);
    free(dr);
    check_end();
}

static const size_t blocks[] = {1, 1000, 65536, 1 << 20};
#define NBLOCKS (sizeof(blocks) / sizeof(blocks[0]))

static void coll_allgather(void)
{
    uint8_t *all = xmalloc((size_t)g_size * (1 << 20) + GUARD);
    size_t bi, bs;
    int p;

    check_begin("coll: MPI_Allgather, blocks 1 B .. 1 MiB");
    for (bi = 0; bi < NBLOCKS; ++bi) {
        bs = blocks[bi];
        phase("block %s", fmtsize(bs));
        fill(g_sbuf, g_rank, g_size, bs);
        prep_recv(all, (size_t)g_size * bs);
        MPICHK(MPI_Allgather(g_sbuf, (int)bs, MPI_BYTE, all, (int)bs, MPI_BYTE,
                             MPI_COMM_WORLD));
        for (p = 0; p < g_size; ++p) {
            verify(all + (size_t)p * bs, p, g_size, bs, 0, "MPI_Allgather");
        }
        verify(all + (size_t)g_size * bs, 0, 0, 0, 1, "MPI_Allgather");
    }
    free(all);
    check_end();
}

static void coll_alltoall(void)
{
    uint8_t *sb = xmalloc((size_t)g_size * (1 << 20));
    uint8_t *rb = xmalloc((size_t)g_size * (1 << 20) + GUARD);
    size_t bi, bs;
    int p;

    check_begin("coll: MPI_Alltoall, blocks 1 B .. 1 MiB");
    for (bi = 0; bi < NBLOCKS; ++bi) {
        bs = blocks[bi];
        phase("block %s", fmtsize(bs));
        for (p = 0; p < g_size; ++p) {
            fill(sb + (size_t)p * bs, g_rank, p, bs);
        }
        prep_recv(rb, (size_t)g_size * bs);
        MPICHK(MPI_Alltoall(sb, (int)bs, MPI_BYTE, rb, (int)bs, MPI_BYTE,
                            MPI_COMM_WORLD));
        for (p = 0; p < g_size; ++p) {
            verify(rb + (size_t)p * bs, p, g_rank, bs, 0, "MPI_Alltoall");
        }
        verify(rb + (size_t)g_size * bs, 0, 0, 0, 1, "MPI_Alltoall");
    }
    free(sb);
    free(rb);
    check_end();
}

static void coll_gather_scatter(void)
{
    uint8_t *big = xmalloc((size_t)g_size * (1 << 20) + GUARD);
    size_t bi, bs;
    int p, root;

    check_begin("coll: MPI_Gather and MPI_Scatter, every root, blocks 1 B .. "
                "1 MiB");
    for (bi = 0; bi < NBLOCKS; ++bi) {
        bs = blocks[bi];
        for (root = 0; root < g_size; ++root) {
            phase("MPI_Gather, block %s, root %d", fmtsize(bs), root);
            fill(g_sbuf, g_rank, root, bs);
            if (g_rank == root) {
                prep_recv(big, (size_t)g_size * bs);
            }
            MPICHK(MPI_Gather(g_sbuf, (int)bs, MPI_BYTE, big, (int)bs, MPI_BYTE,
                              root, MPI_COMM_WORLD));
            if (g_rank == root) {
                for (p = 0; p < g_size; ++p) {
                    verify(big + (size_t)p * bs, p, root, bs, 0, "MPI_Gather");
                }
                verify(big + (size_t)g_size * bs, 0, 0, 0, 1, "MPI_Gather");
            }

            phase("MPI_Scatter, block %s, root %d", fmtsize(bs), root);
            if (g_rank == root) {
                for (p = 0; p < g_size; ++p) {
                    fill(big + (size_t)p * bs, root, p, bs);
                }
            }
            prep_recv(g_rbuf, bs);
            MPICHK(MPI_Scatter(big, (int)bs, MPI_BYTE, g_rbuf, (int)bs,
                               MPI_BYTE, root, MPI_COMM_WORLD));
            verify(g_rbuf, root, g_rank, bs, 1, "MPI_Scatter");
        }
    }
    free(big);
    check_end();
}

/* ------------------------------------------------------------------ */
/* one-sided                                                           */

#define SLOT      MAX_SIZE           /* one origin's region in a window */
#define N_FAO     1000
#define N_CAS     200
#define N_EXCL    200

#define EMU_NC "emulate-nc:"

/* Is the pool (first entry of UCX_CXL_POOL) an emulate-nc pool? */
static int pool_emulated(void)
{
    const char *env = getenv("UCX_CXL_POOL");

    return (env != NULL) && !strncmp(env, EMU_NC, strlen(EMU_NC));
}

/* the pool file UCX's cxl transport maps (UCX_CXL_POOL, else the default);
 * for "emulate-nc:PATH" the file PATH, of which each emulated host maps its
 * own view PATH.host<k> */
static void pool_path(char *path, size_t max)
{
    const char *env = getenv("UCX_CXL_POOL");
    size_t len;

    if ((env == NULL) || (*env == '\0') || !strncmp(env, "auto", 4)) {
        snprintf(path, max, "/dev/shm/ucx-cxl-%u.pool", (unsigned)getuid());
        return;
    }
    if (pool_emulated()) {
        env += strlen(EMU_NC);
    }
    len = strcspn(env, ",");
    snprintf(path, max, "%.*s", (int)len, env);
}

/* Is the mapped file 'name' the pool 'path' (emulated: a view of it)? */
static int pool_file_match(const char *name, const char *path)
{
    size_t len = strlen(path);
    const char *k;

    if (!pool_emulated()) {
        return !strcmp(name, path);
    }
    if (strncmp(name, path, len) || strncmp(name + len, ".host", 5)) {
        return 0;
    }
    k = name + len + 5;
    return (*k != '\0') && (strspn(k, "0123456789") == strlen(k));
}

/* /proc/self/maps names the file by its canonical path */
static void canonical(char *path, size_t max)
{
    char real[PATH_MAX];

    if (realpath(path, real) != NULL) {
        snprintf(path, max, "%s", real);
    }
}

/*
 * Is [addr, addr+len) inside mappings of 'path' in /proc/self/maps?
 * Returns 1 yes, 0 no; lo_p, hi_p: the (merged) mapping of the pool holding
 * addr, off_p: the file offset of addr; nmaps_p: mappings of the pool found.
 */
static int in_pool(const char *path, uintptr_t addr, size_t len,
                   uintptr_t *lo_p, uintptr_t *hi_p, uint64_t *off_p,
                   int *nmaps_p)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096], name[4096];
    unsigned long lo, hi, off, ino;
    uintptr_t cur_lo = 0, cur_hi = 0;
    uint64_t cur_off = 0;
    int found = 0, n;

    *nmaps_p = 0;
    if (f == NULL) {
        return 0;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        name[0] = '\0';
        n = sscanf(line, "%lx-%lx %*s %lx %*s %lu %4095[^\n]", &lo, &hi, &off,
                   &ino, name);
        if ((n < 5) || !pool_file_match(name, path)) {
            continue;
        }
        ++*nmaps_p;
        if ((cur_hi == lo) && (cur_hi != 0)) {
            cur_hi = hi;              /* adjacent mapping of the same file */
        } else {
            cur_lo  = lo;
            cur_hi  = hi;
            cur_off = off;
        }
        if ((addr >= cur_lo) && (addr < cur_hi)) {
            *lo_p  = cur_lo;
            *off_p = cur_off + (addr - cur_lo);
            found  = 1;
        }
        if (found && (addr + len <= cur_hi)) {
            *hi_p = cur_hi;
            fclose(f);
            return 1;
        }
    }
    fclose(f);
    return 0;
}

static int pool_check_wanted(void)
{
    const char *chk  = getenv("MPI_CXL_CHECK_POOL");
    const char *prio = getenv("UCX_ALLOC_PRIO");

    if (chk != NULL && *chk != '\0') {
        return atoi(chk) != 0;
    }
    return (prio != NULL) && !strncmp(prio, "md:cxl", 6);
}

static void check_pool(void *data_base, size_t data_len, void *atom_base,
                       size_t atom_len)
{
    char path[PATH_MAX + 1];
    uintptr_t lo = 0, hi = 0;
    uint64_t off = 0;
    int nmaps = 0, i;
    void *bases[2]  = {data_base, atom_base};
    size_t lens[2]  = {data_len, atom_len};
    const char *names[2] = {"data window", "atomics window"};

    pool_path(path, sizeof(path));
    canonical(path, sizeof(path));
    if (!pool_check_wanted()) {
        if (g_rank == 0) {
            printf("INFO: rank 0: window base %p (%zu bytes)\n", data_base,
                   data_len);
        }
        check_skip("one-sided: MPI_Win_allocate memory lies in the CXL pool",
                   "UCX_ALLOC_PRIO does not start with md:cxl; "
                   "MPI_CXL_CHECK_POOL=1 forces it");
        return;
    }
    check_begin("one-sided: MPI_Win_allocate memory lies in the CXL pool %s",
                path);
    for (i = 0; i < 2; ++i) {
        if (!in_pool(path, (uintptr_t)bases[i], lens[i], &lo, &hi, &off,
                     &nmaps)) {
            if (nmaps == 0) {
                fail("the pool %s is not mapped in this process", path);
            } else {
                fail("%s %p+%zu is not inside the %d mapping(s) of %s",
                     names[i], bases[i], lens[i], nmaps, path);
            }
        } else if ((g_rank == 0) && (i == 0)) {
            printf("INFO: rank 0: window base %p (%zu bytes) lies in %s "
                   "mapped at 0x%lx-0x%lx, pool offset 0x%llx\n", bases[i],
                   lens[i], path, (unsigned long)lo, (unsigned long)hi,
                   (unsigned long long)off);
            fflush(stdout);
        }
    }
    check_end();
}

/* local access to my own window: lock myself */
static void self_lock(MPI_Win win, int type)
{
    MPICHK(MPI_Win_lock(type, g_rank, 0, win));
}

static void self_unlock(MPI_Win win)
{
    MPICHK(MPI_Win_unlock(g_rank, win));
}

static void rma_fence_put(uint8_t *wbase, MPI_Win win, const char *label)
{
    size_t si, size;
    int t;

    check_begin("one-sided: MPI_Put with MPI_Win_fence, every pair, 1 B .. "
                "4 MiB%s", label);
    for (si = 0; si < NSIZES; ++si) {
        size = sizes[si];
        phase("MPI_Put %s: preparing", fmtsize(size));
        memset(wbase, POISON, (size_t)g_size * SLOT);
        for (t = 0; t < g_size; ++t) {
            fill(g_sbufs[t], g_rank, t, size);
        }
        phase("MPI_Put %s: opening MPI_Win_fence", fmtsize(size));
        MPICHK(MPI_Win_fence(0, win));
        phase("MPI_Put %s: issuing", fmtsize(size));
        for (t = 0; t < g_size; ++t) {
            int dst = (g_rank + t) % g_size;
            MPICHK(MPI_Put(g_sbufs[dst], (int)size, MPI_BYTE, dst,
                           (MPI_Aint)g_rank * SLOT, (int)size, MPI_BYTE, win));
        }
        phase("MPI_Put %s: closing MPI_Win_fence", fmtsize(size));
        MPICHK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
        for (t = 0; t < g_size; ++t) {
            uint8_t *slot = wbase + (size_t)t * SLOT;
            verify(slot, t, g_rank, size, 0, "MPI_Put");
            if ((size < SLOT) && (slot[size] != POISON)) {
                fail("MPI_Put %s from rank %d wrote beyond its end (0x%02x)",
                     fmtsize(size), t, slot[size]);
            }
        }
    }
    check_end();
}

static void rma_fence_get(uint8_t *wbase, MPI_Win win, const char *label)
{
    size_t si, size;
    int t;

    check_begin("one-sided: MPI_Get with MPI_Win_fence, every pair, 1 B .. "
                "4 MiB%s", label);
    for (si = 0; si < NSIZES; ++si) {
        size = sizes[si];
        phase("MPI_Get %s: preparing", fmtsize(size));
        for (t = 0; t < g_size; ++t) {
            fill(wbase + (size_t)t * SLOT, g_rank, t, size);
            prep_recv(g_rbufs[t], size);
        }
        phase("MPI_Get %s: opening MPI_Win_fence", fmtsize(size));
        MPICHK(MPI_Win_fence(0, win));
        phase("MPI_Get %s: issuing", fmtsize(size));
        for (t = 0; t < g_size; ++t) {
            int src = (g_rank + t) % g_size;
            MPICHK(MPI_Get(g_rbufs[src], (int)size, MPI_BYTE, src,
                           (MPI_Aint)g_rank * SLOT, (int)size, MPI_BYTE, win));
        }
        phase("MPI_Get %s: closing MPI_Win_fence", fmtsize(size));
        MPICHK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
        for (t = 0; t < g_size; ++t) {
            verify(g_rbufs[t], t, g_rank, size, 1, "MPI_Get");
        }
    }
    check_end();
}

/* every rank Puts into every target under an exclusive lock */
static void rma_lock_put(uint8_t *wbase, MPI_Win win)
{
    size_t si, size;
    int t, dst;

    check_begin("one-sided: MPI_Win_lock(EXCLUSIVE) + MPI_Put, every pair, "
                "1 B .. 4 MiB");
    for (si = 0; si < NSIZES; ++si) {
        size = sizes[si];
        phase("MPI_Put %s", fmtsize(size));
        self_lock(win, MPI_LOCK_EXCLUSIVE);
        memset(wbase, POISON, (size_t)g_size * SLOT);
        self_unlock(win);
        for (t = 0; t < g_size; ++t) {
            fill(g_sbufs[t], g_rank, t, size);
        }
        MPICHK(MPI_Barrier(MPI_COMM_WORLD));
        for (t = 0; t < g_size; ++t) {
            dst = (g_rank + t) % g_size;
            phase("MPI_Put %s: lock/put/unlock of rank %d", fmtsize(size), dst);
            MPICHK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, dst, 0, win));
            MPICHK(MPI_Put(g_sbufs[dst], (int)size, MPI_BYTE, dst,
                           (MPI_Aint)g_rank * SLOT, (int)size, MPI_BYTE, win));
            MPICHK(MPI_Win_unlock(dst, win));
        }
        MPICHK(MPI_Barrier(MPI_COMM_WORLD));
        self_lock(win, MPI_LOCK_SHARED);
        for (t = 0; t < g_size; ++t) {
            uint8_t *slot = wbase + (size_t)t * SLOT;
            verify(slot, t, g_rank, size, 0, "MPI_Put (lock exclusive)");
            if ((size < SLOT) && (slot[size] != POISON)) {
                fail("MPI_Put %s from rank %d wrote beyond its end (0x%02x)",
                     fmtsize(size), t, slot[size]);
            }
        }
        self_unlock(win);
    }
    check_end();
}

/* every rank Gets from every target at once under shared locks */
static void rma_lock_get(uint8_t *wbase, MPI_Win win)
{
    size_t si, size;
    int t, src;

    check_begin("one-sided: MPI_Win_lock(SHARED) + MPI_Get, all ranks at "
                "once, 1 B .. 4 MiB");
    for (si = 0; si < NSIZES; ++si) {
        size = sizes[si];
        phase("MPI_Get %s", fmtsize(size));
        self_lock(win, MPI_LOCK_EXCLUSIVE);
        for (t = 0; t < g_size; ++t) {
            fill(wbase + (size_t)t * SLOT, g_rank, t, size);
        }
        self_unlock(win);
        for (t = 0; t < g_size; ++t) {
            prep_recv(g_rbufs[t], size);
        }
        MPICHK(MPI_Barrier(MPI_COMM_WORLD));
        for (t = 0; t < g_size; ++t) {
            src = (g_rank + t) % g_size;
            phase("MPI_Get %s: lock/get/unlock of rank %d", fmtsize(size), src);
            MPICHK(MPI_Win_lock(MPI_LOCK_SHARED, src, 0, win));
            MPICHK(MPI_Get(g_rbufs[src], (int)size, MPI_BYTE, src,
                           (MPI_Aint)g_rank * SLOT, (int)size, MPI_BYTE, win));
            MPICHK(MPI_Win_unlock(src, win));
        }
        for (t = 0; t < g_size; ++t) {
            verify(g_rbufs[t], t, g_rank, size, 1, "MPI_Get (lock shared)");
        }
        MPICHK(MPI_Barrier(MPI_COMM_WORLD)); /* nobody refills too early */
    }
    check_end();
}

/* MPI_Win_lock_all: Put, flush, Get back the same bytes from each target */
static void rma_lock_all_flush(MPI_Win win)
{
    size_t si, size;
    int t, dst;

    check_begin("one-sided: MPI_Win_lock_all + MPI_Put, MPI_Win_flush, MPI_Get "
                "read-back, 1 B .. 4 MiB");
    MPICHK(MPI_Win_lock_all(0, win));
    for (si = 0; si < NSIZES; ++si) {
        size = sizes[si];
        phase("%s", fmtsize(size));
        for (t = 0; t < g_size; ++t) {
            dst = (g_rank + t) % g_size;
            fill(g_sbufs[dst], g_rank, dst + 7 * g_size, size);
            prep_recv(g_rbufs[dst], size);
            MPICHK(MPI_Put(g_sbufs[dst], (int)size, MPI_BYTE, dst,
                           (MPI_Aint)g_rank * SLOT, (int)size, MPI_BYTE, win));
            MPICHK(MPI_Win_flush(dst, win));
            MPICHK(MPI_Get(g_rbufs[dst], (int)size, MPI_BYTE, dst,
                           (MPI_Aint)g_rank * SLOT, (int)size, MPI_BYTE, win));
            MPICHK(MPI_Win_flush(dst, win));
            verify(g_rbufs[dst], g_rank, dst + 7 * g_size, size, 1,
                   "MPI_Get after MPI_Put + MPI_Win_flush");
        }
    }
    MPICHK(MPI_Win_unlock_all(win));
    MPICHK(MPI_Barrier(MPI_COMM_WORLD));
    check_end();
}

/* non-atomic read-modify-write of one counter under exclusive locks */
static void rma_lock_exclusion(int64_t *abase, MPI_Win awin)
{
    const int target = g_size - 1;
    int64_t v, expect = (int64_t)g_size * N_EXCL;
    int k;

    check_begin("one-sided: MPI_Win_lock(EXCLUSIVE) mutual exclusion, "
                "%d x Get+flush+Put of one counter from every rank", N_EXCL);
    if (g_rank == target) {
        self_lock(awin, MPI_LOCK_EXCLUSIVE);
        abase[0] = 0;
        self_unlock(awin);
    }
    MPICHK(MPI_Barrier(MPI_COMM_WORLD));
    for (k = 0; k < N_EXCL; ++k) {
        phase("iteration %d", k);
        MPICHK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, awin));
        v = -1;
        MPICHK(MPI_Get(&v, 1, MPI_INT64_T, target, 0, 1, MPI_INT64_T, awin));
        MPICHK(MPI_Win_flush(target, awin));
        ++v;
        MPICHK(MPI_Put(&v, 1, MPI_INT64_T, target, 0, 1, MPI_INT64_T, awin));
        MPICHK(MPI_Win_unlock(target, awin));
    }
    MPICHK(MPI_Barrier(MPI_COMM_WORLD));
    if (g_rank == target) {
        self_lock(awin, MPI_LOCK_SHARED);
        v = abase[0];
        self_unlock(awin);
        if (v != expect) {
            fail("counter is %lld, expected %lld: exclusive lock epochs "
                 "overlapped or lost updates", (long long)v, (long long)expect);
        }
    }
    check_end();
}

static void rma_accumulate(int *wbase, MPI_Win win, MPI_Op op, int passive)
{
    static const int acounts[] = {1, 1000, 65536};
    const int reps = 3;
    int ci, count, i, r, target, rep, m;
    int *src = xmalloc(65536 * sizeof(int));
    long tri = (long)g_size * (g_size + 1) / 2, e;

    check_begin("one-sided: MPI_Accumulate %s from every rank to one target "
                "(%s), 1, 1000, 65536 ints", (op == MPI_SUM) ? "MPI_SUM" :
                "MPI_MAX", passive ? "MPI_Win_lock SHARED, concurrent" :
                "MPI_Win_fence");
    for (ci = 0; ci < 3; ++ci) {
        count  = acounts[ci];
        target = ci % g_size;
        phase("%d ints to rank %d", count, target);
        if (g_rank == target) {
            if (passive) {
                self_lock(win, MPI_LOCK_EXCLUSIVE);
            }
            for (i = 0; i < count; ++i) {
                wbase[i] = (op == MPI_SUM) ? 0 : INT_MIN;
            }
            if (passive) {
                self_unlock(win);
            }
        }
        for (i = 0; i < count; ++i) {
            src[i] = (op == MPI_SUM) ? ival(g_rank, i) : imaxval(g_rank, i);
        }
        if (passive) {
            MPICHK(MPI_Barrier(MPI_COMM_WORLD));
            MPICHK(MPI_Win_lock(MPI_LOCK_SHARED, target, 0, win));
        } else {
            MPICHK(MPI_Win_fence(0, win));
        }
        for (rep = 0; rep < reps; ++rep) {
            MPICHK(MPI_Accumulate(src, count, MPI_INT, target, 0, count, MPI_INT,
                                  op, win));
        }
        if (passive) {
            MPICHK(MPI_Win_unlock(target, win));
            MPICHK(MPI_Barrier(MPI_COMM_WORLD));
            if (g_rank == target) {
                self_lock(win, MPI_LOCK_SHARED);
            }
        } else {
            MPICHK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
        }
        if (g_rank == target) {
            for (i = 0; i < count; ++i) {
                if (op == MPI_SUM) {
                    e = reps * tri * (i % 1000 + 1);
                } else {
                    for (m = INT_MIN, r = 0; r < g_size; ++r) {
                        m = (imaxval(r, i) > m) ? imaxval(r, i) : m;
                    }
                    e = m;
                }
                if (wbase[i] != e) {
                    fail("%d ints at rank %d: element %d is %d, expected %ld",
                         count, target, i, wbase[i], e);
                    break;
                }
            }
            if (passive) {
                self_unlock(win);
            }
        }
        MPICHK(MPI_Barrier(MPI_COMM_WORLD));
    }
    free(src);
    check_end();
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;

    return (x > y) - (x < y);
}

/* a ticket counter: every ticket handed out once, final == n * N_FAO */
static void rma_fetch_and_op(int64_t *abase, MPI_Win awin)
{
    const int target = 0;
    int64_t one = 1, *tickets = xmalloc(N_FAO * sizeof(int64_t));
    int64_t *all = NULL, v, i;
    int k;

    check_begin("one-sided: MPI_Fetch_and_op MPI_SUM ticket counter, %d from "
                "every rank", N_FAO);
    if (g_rank == target) {
        self_lock(awin, MPI_LOCK_EXCLUSIVE);
        abase[1] = 0;
        self_unlock(awin);
        all = xmalloc((size_t)g_size * N_FAO * sizeof(int64_t));
    }
    MPICHK(MPI_Barrier(MPI_COMM_WORLD));
    MPICHK(MPI_Win_lock(MPI_LOCK_SHARED, target, 0, awin));
    for (k = 0; k < N_FAO; ++k) {
        phase("ticket %d", k);
        tickets[k] = -1;
        MPICHK(MPI_Fetch_and_op(&one, &tickets[k], MPI_INT64_T, target,
                                1 * sizeof(int64_t), MPI_SUM, awin));
        MPICHK(MPI_Win_flush(target, awin));
        if (k > 0 && tickets[k] <= tickets[k - 1]) {
            fail("ticket %d is %lld, not above the previous one %lld", k,
                 (long long)tickets[k], (long long)tickets[k - 1]);
        }
    }
    MPICHK(MPI_Win_unlock(target, awin));
    phase("gathering the tickets");
    MPICHK(MPI_Gather(tickets, N_FAO, MPI_INT64_T, all, N_FAO, MPI_INT64_T,
                      target, MPI_COMM_WORLD));
    MPICHK(MPI_Barrier(MPI_COMM_WORLD));
    if (g_rank == target) {
        qsort(all, (size_t)g_size * N_FAO, sizeof(int64_t), cmp_i64);
        for (i = 0; i < (int64_t)g_size * N_FAO; ++i) {
            if (all[i] != i) {
                fail("sorted tickets: position %lld holds %lld (duplicate or "
                     "lost ticket)", (long long)i, (long long)all[i]);
                break;
            }
        }
        self_lock(awin, MPI_LOCK_SHARED);
        v = abase[1];
        self_unlock(awin);
        if (v != (int64_t)g_size * N_FAO) {
            fail("final counter %lld, expected %lld", (long long)v,
                 (long long)g_size * N_FAO);
        }
    }
    free(all);
    free(tickets);
    check_end();
}

/* spin lock with MPI_Compare_and_swap guarding a Get/Put counter increment */
static void rma_compare_and_swap(int64_t *abase, MPI_Win awin)
{
    const int target = g_size > 1 ? 1 : 0;
    const MPI_Aint lock_disp = 2 * sizeof(int64_t);
    const MPI_Aint cnt_disp  = 3 * sizeof(int64_t);
    int64_t me = g_rank + 1, zero = 0, res, v, spins = 0;
    int k;

    check_begin("one-sided: MPI_Compare_and_swap spin lock, %d increments "
                "from every rank", N_CAS);
    if (g_rank == target) {
        self_lock(awin, MPI_LOCK_EXCLUSIVE);
        abase[2] = 0;
        abase[3] = 0;
        self_unlock(awin);
    }
    MPICHK(MPI_Barrier(MPI_COMM_WORLD));
    MPICHK(MPI_Win_lock_all(0, awin));
    for (k = 0; k < N_CAS && g_nerr == 0; ++k) {
        phase("acquire %d", k);
        do {
            res = -1;
            MPICHK(MPI_Compare_and_swap(&me, &zero, &res, MPI_INT64_T, target,
                                        lock_disp, awin));
            MPICHK(MPI_Win_flush(target, awin));
            if ((res != 0) && ((res < 1) || (res > g_size) || (res == me))) {
                fail("MPI_Compare_and_swap returned %lld: no rank's id",
                     (long long)res);
                break;
            }
            ++spins;
        } while (res != 0 && g_nerr == 0);
        if (g_nerr) {
            break;
        }
        phase("critical section %d", k);
        v = -1;
        MPICHK(MPI_Get(&v, 1, MPI_INT64_T, target, cnt_disp, 1, MPI_INT64_T,
                       awin));
        MPICHK(MPI_Win_flush(target, awin));
        ++v;
        MPICHK(MPI_Put(&v, 1, MPI_INT64_T, target, cnt_disp, 1, MPI_INT64_T,
                       awin));
        MPICHK(MPI_Win_flush(target, awin));
        phase("release %d", k);
        res = -1;
        MPICHK(MPI_Compare_and_swap(&zero, &me, &res, MPI_INT64_T, target,
                                    lock_disp, awin));
        MPICHK(MPI_Win_flush(target, awin));
        if (res != me) {
            fail("releasing the lock: it held %lld, expected my id %lld "
                 "(mutual exclusion broken)", (long long)res, (long long)me);
        }
    }
    MPICHK(MPI_Win_unlock_all(awin));
    MPICHK(MPI_Barrier(MPI_COMM_WORLD));
    if (g_rank == target) {
        self_lock(awin, MPI_LOCK_SHARED);
        v   = abase[3];
        res = abase[2];
        self_unlock(awin);
        if (v != (int64_t)g_size * N_CAS) {
            fail("counter %lld, expected %lld", (long long)v,
                 (long long)g_size * N_CAS);
        }
        if (res != 0) {
            fail("lock word %lld after all released, expected 0",
                 (long long)res);
        }
    }
    (void)spins;
    check_end();
}

/*
 * A window over malloc'd memory (MPI_CXL_SW_RMA=0 turns it off).  Regression:
 * Put > 512 KiB used to hang in MPI_Win_fence (ep_flush refused while UCP's
 * flush request sat in the pending queue).  The memory is outside the pool:
 * with UCX_CXL_REG_ANY=y (default) every rank's operations on it are
 * executed by its owner; with n, UCP emulates RMA with active messages.
 */
static void rma_win_create_sw(void)
{
    static const char *name = "one-sided: MPI_Win_create on malloc'd memory "
                              "(outside the pool: executed by its owner)";
    const char *env = getenv("MPI_CXL_SW_RMA");
    const char *label = " (MPI_Win_create window, software RMA)";
    size_t wlen = (size_t)g_size * SLOT;
    uint8_t *mem;
    MPI_Win win;
    int rc;

    if ((env != NULL) && (atoi(env) == 0)) {
        check_skip(name, "disabled with MPI_CXL_SW_RMA=0");
        return;
    }
    mem = xmalloc(wlen);
    check_begin("%s: MPI_Win_create %zu MiB per rank", name, wlen >> 20);
    rc = MPI_Win_create(mem, (MPI_Aint)wlen, 1, MPI_INFO_NULL, MPI_COMM_WORLD,
                        &win);
    if (rc != MPI_SUCCESS) {
        mpi_failed("MPI_Win_create", rc, __LINE__);
    }
    check_end();
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rc == MPI_SUCCESS) {
        MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
        rma_fence_put(mem, win, label);
        rma_fence_get(mem, win, label);
        check_begin("%s: MPI_Win_free", name);
        MPICHK(MPI_Win_free(&win));
        check_end();
    }
    free(mem);
}

/* ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    const char *env = getenv("MPI_CXL_TIMEOUT");
    struct sigaction sa;
    uint8_t *wdata = NULL;
    int64_t *watom = NULL;
    MPI_Win dwin, awin;
    size_t si, wlen;
    int p, rc;
    double t_start;

    if ((env != NULL) && (atoi(env) > 0)) {
        g_timeout = (unsigned)atoi(env);
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = watchdog;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm(g_timeout + 10);

    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        fprintf(stderr, "mpi: MPI_Init failed\n");
        return 2;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    arm_watchdog();
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (g_size < 2) {
        fprintf(stderr, "mpi: run with at least 2 ranks (mpirun -np 4)\n");
        MPI_Finalize();
        return 2;
    }
    t_start = MPI_Wtime();
    if (g_rank == 0) {
        printf("mpi: %d ranks, watchdog %u s per check, UCX_TLS=%s, "
               "UCX_ALLOC_PRIO=%s\n", g_size, g_timeout,
               getenv("UCX_TLS") ? getenv("UCX_TLS") : "(unset)",
               getenv("UCX_ALLOC_PRIO") ? getenv("UCX_ALLOC_PRIO") : "(unset)");
        fflush(stdout);
    }

    g_sbuf  = xmalloc(MAX_SIZE + GUARD);
    g_rbuf  = xmalloc(MAX_SIZE + GUARD);
    g_sbufs = xmalloc((size_t)g_size * sizeof(*g_sbufs));
    g_rbufs = xmalloc((size_t)g_size * sizeof(*g_rbufs));
    for (p = 0; p < g_size; ++p) {
        g_sbufs[p] = xmalloc(MAX_SIZE + GUARD);
        g_rbufs[p] = xmalloc(MAX_SIZE + GUARD);
    }

    /* point-to-point */
    for (si = 0; si < NSIZES; ++si) {
        p2p_ring(sizes[si], (int)si);
    }
    for (si = 0; si < NSIZES; ++si) {
        p2p_alltoall_nb(sizes[si], (int)si);
    }
    for (si = 0; si < NSIZES; ++si) {
        p2p_any_source(sizes[si], (int)si);
    }
    for (si = 0; si < NSIZES; ++si) {
        p2p_sendrecv(sizes[si], (int)si);
    }
    for (si = 0; si < NSIZES; ++si) {
        p2p_probe(sizes[si], (int)si);
    }

    /* collectives */
    coll_barrier();
    coll_bcast();
    coll_reduce(0);
    coll_reduce(1);
    coll_allgather();
    coll_alltoall();
    coll_gather_scatter();

    /* one-sided */
    wlen = (size_t)g_size * SLOT;
    check_begin("one-sided: MPI_Win_allocate %zu MiB + 4 KiB per rank",
                wlen >> 20);
    rc = MPI_Win_allocate((MPI_Aint)wlen, 1, MPI_INFO_NULL, MPI_COMM_WORLD,
                          &wdata, &dwin);
    if (rc != MPI_SUCCESS) {
        mpi_failed("MPI_Win_allocate (data)", rc, __LINE__);
    }
    if (rc == MPI_SUCCESS) {
        rc = MPI_Win_allocate(4096, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &watom,
                              &awin);
        if (rc != MPI_SUCCESS) {
            mpi_failed("MPI_Win_allocate (atomics)", rc, __LINE__);
            MPI_Win_free(&dwin);
        }
    }
    check_end();
    /* the windows exist everywhere or the one-sided checks are skipped */
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rc == MPI_SUCCESS) {
        MPI_Win_set_errhandler(dwin, MPI_ERRORS_RETURN);
        MPI_Win_set_errhandler(awin, MPI_ERRORS_RETURN);
        check_pool(wdata, wlen, watom, 4096);
        rma_fence_put(wdata, dwin, "");
        rma_fence_get(wdata, dwin, "");
        rma_lock_put(wdata, dwin);
        rma_lock_get(wdata, dwin);
        rma_lock_all_flush(dwin);
        rma_lock_exclusion(watom, awin);
        rma_accumulate((int*)wdata, dwin, MPI_SUM, 0);
        rma_accumulate((int*)wdata, dwin, MPI_SUM, 1);
        rma_accumulate((int*)wdata, dwin, MPI_MAX, 1);
        rma_fetch_and_op(watom, awin);
        rma_compare_and_swap(watom, awin);

        check_begin("one-sided: MPI_Win_free");
        MPICHK(MPI_Win_free(&awin));
        MPICHK(MPI_Win_free(&dwin));
        check_end();
    } else {
        check_skip("one-sided checks", "MPI_Win_allocate failed");
    }
    rma_win_create_sw();

    for (p = 0; p < g_size; ++p) {
        free(g_sbufs[p]);
        free(g_rbufs[p]);
    }
    free(g_sbufs);
    free(g_rbufs);
    free(g_sbuf);
    free(g_rbuf);

    snprintf(g_check, sizeof(g_check), "MPI_Finalize");
    g_phase[0] = '\0';
    arm_watchdog();
    if (g_rank == 0) {
        printf("mpi: checks took %.2f s\n", MPI_Wtime() - t_start);
    }
    rc = MPI_Finalize();
    alarm(0);
    if (rc != MPI_SUCCESS) {
        ++g_failed;
        if (g_rank == 0) {
            printf("FAIL: MPI_Finalize returned %d\n", rc);
        }
    }
    if (g_rank == 0) {
        printf("mpi: %d passed, %d failed\n", (int)g_passed, (int)g_failed);
        fflush(stdout);
    }
    return g_failed ? 1 : 0;
}
