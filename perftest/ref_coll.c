/*
 * ref_coll.c - hand-written two-core collectives, timed the way
 * coll_bench.c times MPI's: the practical reference of the latency
 * targets in perftest/run-coll-bench.sh's report.
 *
 * Two threads pinned to --cpu-a and --cpu-b (rank 0 and rank 1) run
 * coll_bench's loop with nothing between them but cache lines: before
 * every iteration an untimed barrier (each stores its own flag line and
 * waits for the other's), then the timed call between two
 * clock_gettime(CLOCK_MONOTONIC) reads (what MPI_Wtime costs), then new
 * data for the next call.  No MPI, no library, no argument checks, no
 * slot reuse, no liveness checks: one flag per rank and the data beside
 * it.  Up to a few lines that is the whole transfer, so an implementation
 * is faster only with a faster pattern, or by moving part of the call's
 * wait into the untimed barrier's exit skew; from about 1 KiB how the
 * lines are read matters (its plain copy of lines the other core just
 * wrote is slower than coll/cxl's), so run-coll-bench.sh runs it up to
 * 256 B.
 *
 *   barrier    both store their flag (one line each), wait for the other's
 *   bcast      rank 0 stores SIZE bytes and then its flag; rank 1 waits for
 *              the flag and copies the bytes
 *   exchange   both store SIZE bytes and their flag, wait for the other's
 *              flag and copy its bytes: what each rank of allgather,
 *              alltoall, reduce_scatter_block needs at np = 2
 *   allreduce  exchange, then the sum of the two int32 vectors
 *
 * Each receiver checks, untimed, the first and last word it got against
 * the other rank's data of the call (exit 1 on a mismatch).
 * Up to 56 bytes travel in the flag's own line (the flag stored last),
 * larger ones in lines of their own before it.  Prints, per pattern and
 * size, the median over --trials of the mean of the two ranks' average
 * call (coll_bench's avg_us), and each rank's:
 *
 *   refcoll,<pattern>,<size>,<mean ns>,<rank 0 ns>,<rank 1 ns>
 *
 * This program measures and prints; it never judges the numbers.
 *
 * Usage: ref_coll [--sizes LIST] [--max-size N] [--iters N] [--trials N]
 *                 [--cpu-a N] [--cpu-b N]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

#define LINE       64
#define INLINE_MAX 56        /* payload bytes sharing the flag's line */
#define MAX_BYTES  (4u << 20)
#define MAX_TRIALS 101

typedef enum { RC_BARRIER, RC_BCAST, RC_EXCHANGE, RC_ALLREDUCE } rc_kind_t;

static const char *const rc_names[] = {"barrier", "bcast", "exchange",
                                       "allreduce"};

/* What one rank writes; the other only reads it. */
typedef struct {
    _Alignas(LINE) volatile uint64_t bar;       /* untimed barrier */
    _Alignas(2 * LINE) volatile uint64_t flag;  /* the call's signal */
    uint8_t inl[INLINE_MAX];                    /* small payload */
    _Alignas(2 * LINE) uint8_t data[];          /* larger payload */
} rc_pub_t;

typedef struct {
    rc_pub_t *pub[2];
    rc_kind_t kind;
    size_t    size;
    long      iters;
    int       cpu[2];
    double    avg_ns[2];
    long      wrong[2]; /* calls whose result was not the other's data */
    int       err;
} rc_run_t;

static inline uint64_t rc_now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static inline void rc_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static inline void rc_wait(volatile uint64_t *flag, uint64_t v)
{
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) < v) {
        rc_relax();
    }
}

static inline uint8_t *rc_payload(rc_pub_t *p, size_t size)
{
    return (size <= INLINE_MAX) ? p->inl : p->data;
}

/* One call of iteration i on rank me; src holds this call's data. */
static void rc_call(rc_run_t *r, int me, uint64_t i, const uint8_t *src,
                    uint8_t *dst)
{
    rc_pub_t *mine = r->pub[me], *other = r->pub[1 - me];
    int32_t *d;
    const int32_t *s;
    size_t k;

    switch (r->kind) {
    case RC_BARRIER:
        __atomic_store_n(&mine->flag, i, __ATOMIC_RELEASE);
        rc_wait(&other->flag, i);
        break;
    case RC_BCAST:
        if (me == 0) {
            memcpy(rc_payload(mine, r->size), src, r->size);
            __atomic_store_n(&mine->flag, i, __ATOMIC_RELEASE);
        } else {
            rc_wait(&other->flag, i);
            memcpy(dst, rc_payload(other, r->size), r->size);
        }
        break;
    case RC_EXCHANGE:
    case RC_ALLREDUCE:
        memcpy(rc_payload(mine, r->size), src, r->size);
        __atomic_store_n(&mine->flag, i, __ATOMIC_RELEASE);
        rc_wait(&other->flag, i);
        if (r->kind == RC_EXCHANGE) {
            memcpy(dst, rc_payload(other, r->size), r->size);
            break;
        }
        /* fixed order (rank 0's + rank 1's), as coll/cxl folds */
        d = (int32_t*)dst;
        s = (const int32_t*)rc_payload(other, r->size);
        for (k = 0; k < r->size / sizeof(int32_t); ++k) {
            d[k] = (int32_t)((uint32_t)((const int32_t*)src)[k] +
                             (uint32_t)s[k]);
        }
        break;
    }
}

typedef struct {
    rc_run_t *run;
    int       me;
} rc_arg_t;

/* The data rank `who` sends in call i: every byte (uint8_t)(i + who). */
static inline uint8_t rc_byte(long i, int who)
{
    return (uint8_t)((uint64_t)i + (uint64_t)who);
}

/*
 * Untimed: did the call deliver the other rank's data of this call (the
 * first and the last word), so that nothing is measured that moves
 * nothing?
 */
static int rc_check(const rc_run_t *r, int me, long i, const uint8_t *dst)
{
    size_t n = r->size, last = (n >= 4) ? n - 4 : 0;
    uint32_t w_me, w_other, got;

    if ((r->kind == RC_BARRIER) || (n == 0) ||
        ((r->kind == RC_BCAST) && (me == 0))) {
        return 1;
    }
    if (r->kind != RC_ALLREDUCE) {
        return (dst[0] == rc_byte(i, 1 - me)) &&
               (dst[n - 1] == rc_byte(i, 1 - me));
    }
    w_me    = rc_byte(i, me) * 0x01010101u;
    w_other = rc_byte(i, 1 - me) * 0x01010101u;
    memcpy(&got, dst, sizeof(got));
    if (got != w_me + w_other) {
        return 0;
    }
    memcpy(&got, dst + last, sizeof(got));
    return got == w_me + w_other;
}

static void *rc_rank(void *arg)
{
    rc_run_t *r = ((rc_arg_t*)arg)->run;
    int me      = ((rc_arg_t*)arg)->me;
    size_t alloc = (r->size + LINE) & ~(size_t)(LINE - 1); /* aligned_alloc */
    long warm = r->iters / 10 + 10, i;
    uint64_t t0, sum = 0, step = 0;
    uint8_t *src, *dst;
    cpu_set_t set;

    CPU_ZERO(&set);
    CPU_SET(r->cpu[me], &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0) {
        r->err = 1;
    }
    src = aligned_alloc(LINE, alloc);
    dst = aligned_alloc(LINE, alloc);
    if ((src == NULL) || (dst == NULL)) {
        r->err = 1; /* the other rank still needs our barriers */
    }
    for (i = -warm; i < r->iters; ++i) {
        /* new data every call, outside the timed part */
        if (src != NULL) {
            memset(src, rc_byte(i, me), r->size);
        }
        ++step;
        __atomic_store_n(&r->pub[me]->bar, step, __ATOMIC_RELEASE);
        rc_wait(&r->pub[1 - me]->bar, step);
        if ((src == NULL) || (dst == NULL)) {
            if (r->kind != RC_BCAST || me == 0) {
                __atomic_store_n(&r->pub[me]->flag, step, __ATOMIC_RELEASE);
            }
            continue;
        }
        t0 = rc_now();
        rc_call(r, me, step, src, dst);
        if (i >= 0) {
            sum += rc_now() - t0;
        }
        r->wrong[me] += !rc_check(r, me, i, dst);
    }
    r->avg_ns[me] = (double)sum / (double)r->iters;
    free(src);
    free(dst);
    return NULL;
}

/* One trial: both ranks, fresh lines; the mean of their averages. */
static int rc_trial(rc_kind_t kind, size_t size, long iters, const int cpu[2],
                    double out[3])
{
    rc_run_t r = {.kind = kind, .size = size, .iters = iters,
                  .cpu = {cpu[0], cpu[1]}};
    rc_arg_t a[2] = {{&r, 0}, {&r, 1}};
    size_t len = sizeof(rc_pub_t) + ((size > INLINE_MAX) ? size : 0);
    pthread_t th;
    int k, rc;

    len = (len + 4095) & ~(size_t)4095;
    for (k = 0; k < 2; ++k) {
        r.pub[k] = aligned_alloc(4096, len);
        if (r.pub[k] == NULL) {
            fprintf(stderr, "ref_coll: out of memory for %zu bytes\n", len);
            free(r.pub[0]);
            return 1;
        }
        memset(r.pub[k], 0, len);
    }
    rc = pthread_create(&th, NULL, rc_rank, &a[1]);
    if (rc != 0) {
        fprintf(stderr, "ref_coll: pthread_create: %s\n", strerror(rc));
        free(r.pub[0]);
        free(r.pub[1]);
        return 1;
    }
    rc_rank(&a[0]);
    pthread_join(th, NULL);
    free(r.pub[0]);
    free(r.pub[1]);
    if (r.err) {
        fprintf(stderr, "ref_coll: cannot pin to cpus %d and %d, or out of "
                "memory\n", cpu[0], cpu[1]);
        return 1;
    }
    if (r.wrong[0] + r.wrong[1] != 0) {
        fprintf(stderr, "ref_coll: %s of %zu bytes delivered wrong data in "
                "%ld calls\n", rc_names[kind], size, r.wrong[0] + r.wrong[1]);
        return 1;
    }
    out[0] = (r.avg_ns[0] + r.avg_ns[1]) / 2.0;
    out[1] = r.avg_ns[0];
    out[2] = r.avg_ns[1];
    return 0;
}

static int rc_cmp(const void *a, const void *b)
{
    const double *x = a, *y = b;

    return (x[0] > y[0]) - (x[0] < y[0]);
}

static int rc_measure(rc_kind_t kind, size_t size, long iters, int trials,
                      const int cpu[2])
{
    static double v[MAX_TRIALS][3];
    const double *m;
    int t;

    for (t = 0; t < trials; ++t) {
        if (rc_trial(kind, size, iters, cpu, v[t]) != 0) {
            return 1;
        }
    }
    /* the trial of median mean, with its two ranks */
    qsort(v, (size_t)trials, sizeof(v[0]), rc_cmp);
    m = v[trials / 2];
    printf("refcoll,%s,%zu,%.1f,%.1f,%.1f\n", rc_names[kind], size, m[0],
           m[1], m[2]);
    fflush(stdout);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ref_coll [--sizes LIST] [--max-size N] [--iters N] [--trials N]\n"
            "                [--cpu-a N] [--cpu-b N]\n"
            "Hand-written two-core barrier, bcast, exchange and allreduce,\n"
            "timed as coll_bench times MPI's (untimed barrier between calls,\n"
            "clock_gettime around each); prints\n"
            "  refcoll,<pattern>,<size>,<mean ns>,<rank 0 ns>,<rank 1 ns>\n"
            "  --sizes   payload sizes, comma-separated, K/M suffixes, at most\n"
            "            4M (default 8,64,256); allreduce takes sizes\n"
            "            that are multiples of 4\n"
            "  --max-size  leave out the sizes of the list above N bytes (a\n"
            "            caller's list of every size; the barrier still runs)\n"
            "  --iters   timed calls per trial (default 100000)\n"
            "  --trials  trials per pattern and size; the median is printed\n"
            "            (default 5)\n"
            "  --cpu-a, --cpu-b  the cores of rank 0 and 1 (default 0, 1)\n");
}

int main(int argc, char **argv)
{
    size_t sizes[MAX_SIZES];
    int nsizes = parse_sizes("8,64,256", sizes);
    int trials = 5, cpu[2] = {0, 1}, s, k;
    long iters = 100000, max_size = (long)MAX_BYTES;
    char *end;

    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = (i + 1 < argc) ? argv[i + 1] : NULL;

        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (v == NULL) {
            usage(stderr);
            return 2;
        }
        errno = 0;
        if (!strcmp(a, "--sizes")) {
            nsizes = parse_sizes(v, sizes);
        } else if (!strcmp(a, "--max-size")) {
            max_size = strtol(v, &end, 10);
        } else if (!strcmp(a, "--iters")) {
            iters = strtol(v, &end, 10);
        } else if (!strcmp(a, "--trials")) {
            trials = (int)strtol(v, &end, 10);
        } else if (!strcmp(a, "--cpu-a")) {
            cpu[0] = (int)strtol(v, &end, 10);
        } else if (!strcmp(a, "--cpu-b")) {
            cpu[1] = (int)strtol(v, &end, 10);
        } else {
            fprintf(stderr, "ref_coll: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
        if ((strcmp(a, "--sizes") != 0) && ((errno != 0) || (*end != '\0'))) {
            fprintf(stderr, "ref_coll: %s wants a number, not '%s'\n", a, v);
            return 2;
        }
        ++i;
    }
    if ((nsizes <= 0) || (iters <= 0) || (trials <= 0) || (max_size < 0) ||
        (trials > MAX_TRIALS) || (cpu[0] < 0) || (cpu[1] < 0)) {
        usage(stderr);
        return 2;
    }
    for (s = k = 0; s < nsizes; ++s) {
        if (sizes[s] <= (size_t)max_size) {
            sizes[k++] = sizes[s];
        }
    }
    nsizes = k;
    for (s = 0; s < nsizes; ++s) {
        if (sizes[s] > MAX_BYTES) {
            fprintf(stderr, "ref_coll: size %zu above %u\n", sizes[s],
                    MAX_BYTES);
            return 2;
        }
    }
    if (rc_measure(RC_BARRIER, 0, iters, trials, cpu) != 0) {
        return 1;
    }
    for (s = 0; s < nsizes; ++s) {
        for (k = RC_BCAST; k <= RC_ALLREDUCE; ++k) {
            if ((k == RC_ALLREDUCE) && (sizes[s] % sizeof(int32_t) != 0)) {
                continue;
            }
            if (rc_measure((rc_kind_t)k, sizes[s], iters, trials, cpu) != 0) {
                return 1;
            }
        }
    }
    return 0;
}
