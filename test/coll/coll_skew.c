/*
 * coll_skew - where the time of a short collective after a barrier goes
 * (not a benchmark: perftest/ has that).  Two ranks, pinned to CPUs 0 and
 * 1, run ITERS times { barrier; COLL of 8 bytes } as coll_bench's timed
 * loop does, and stamp CLOCK_MONOTONIC (one clock for both) at barrier
 * entry, barrier exit and collective exit.  Printed, as medians over the
 * second half of the iterations:
 *
 *   root / other          each rank's time in the collective (coll_bench
 *                         averages these two)
 *   barrier exit skew     other's barrier exit minus the root's
 *   done gap              other's collective exit minus the root's
 *
 * For bcast the other rank's time is the exit skew plus the root's time
 * plus the done gap, which is one publication crossing between the cores.
 *
 * Then quartiles of the mean of the two ranks, of the rank that left the
 * barrier first and the one that left it last, and of the exit skew.
 *
 * Usage: coll_skew POOL [bcast|allreduce|barrier [ITERS]]
 * POOL: a pool file (cxlpool create --size 256M POOL).
 */
#define _GNU_SOURCE
#include "coll_test_harness.h"

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

typedef struct {
    uint64_t bar_in, bar_out, done;
} skew_stamp_t;

typedef enum { SKEW_BCAST, SKEW_ALLREDUCE, SKEW_BARRIER } skew_coll_t;

static skew_stamp_t *g_stamps;  /* [rank][iteration], shared by the ranks */
static unsigned      g_iters = 200000;
static skew_coll_t   g_coll;

static uint64_t skew_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static cxl_coll_status_t skew_call(cxl_coll_team_t *team, uint64_t *x,
                                   uint64_t *y)
{
    switch (g_coll) {
    case SKEW_BCAST:
        return cxl_coll_bcast(team, x, 1, CXL_COLL_UINT64, 0);
    case SKEW_ALLREDUCE:
        return cxl_coll_allreduce(team, x, y, 1, CXL_COLL_UINT64,
                                  CXL_COLL_SUM);
    default:
        return cxl_coll_barrier(team);
    }
}

static int skew_rank(cxl_th_rank_t *r)
{
    skew_stamp_t *st = g_stamps + (size_t)r->rank * g_iters;
    cxl_coll_team_t *team;
    uint64_t x = 1, y;
    cpu_set_t cpus;
    unsigned i;

    CPU_ZERO(&cpus);
    CPU_SET(r->rank, &cpus);
    if (sched_setaffinity(0, sizeof(cpus), &cpus) != 0) {
        perror("coll_skew: sched_setaffinity");
        return 1;
    }
    if (cxl_th_team(r, NULL, &team) != CXL_COLL_OK) {
        fprintf(stderr, "coll_skew: team: %s\n", cxl_coll_last_error());
        return 1;
    }
    for (i = 0; i < g_iters; ++i) {
        st[i].bar_in = skew_now();
        if (cxl_coll_barrier(team) != CXL_COLL_OK) {
            goto err;
        }
        st[i].bar_out = skew_now();
        if (skew_call(team, &x, &y) != CXL_COLL_OK) {
            goto err;
        }
        st[i].done = skew_now();
        x += i;
    }
    cxl_coll_team_destroy(team);
    return 0;

err:
    fprintf(stderr, "coll_skew: rank %d: %s\n", r->rank, cxl_coll_last_error());
    cxl_coll_team_destroy(team);
    return 1;
}

static int skew_cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;

    return (x > y) - (x < y);
}

/* median of what over the second half of the iterations */
static int64_t skew_median(int64_t (*what)(const skew_stamp_t *root,
                                           const skew_stamp_t *other),
                           int64_t *v)
{
    unsigned i, n = g_iters - g_iters / 2;

    for (i = 0; i < n; ++i) {
        v[i] = what(&g_stamps[g_iters / 2 + i],
                    &g_stamps[g_iters + g_iters / 2 + i]);
    }
    qsort(v, n, sizeof(*v), skew_cmp);
    return v[n / 2];
}

static int64_t skew_root(const skew_stamp_t *a, const skew_stamp_t *b)
{
    (void)b;
    return (int64_t)(a->done - a->bar_out);
}

static int64_t skew_other(const skew_stamp_t *a, const skew_stamp_t *b)
{
    (void)a;
    return (int64_t)(b->done - b->bar_out);
}

static int64_t skew_entry(const skew_stamp_t *a, const skew_stamp_t *b)
{
    return (int64_t)(b->bar_in - a->bar_in);
}

static int64_t skew_exit(const skew_stamp_t *a, const skew_stamp_t *b)
{
    return (int64_t)(b->bar_out - a->bar_out);
}

static int64_t skew_done(const skew_stamp_t *a, const skew_stamp_t *b)
{
    return (int64_t)(b->done - a->done);
}

/* what coll_bench averages: the two ranks' times of one call */
static int64_t skew_mean(const skew_stamp_t *a, const skew_stamp_t *b)
{
    return (skew_root(a, b) + skew_other(a, b)) / 2;
}

/* the time of the rank that left the barrier first */
static int64_t skew_first(const skew_stamp_t *a, const skew_stamp_t *b)
{
    return (a->bar_out <= b->bar_out) ? skew_root(a, b) : skew_other(a, b);
}

/* ... and of the one that left it last */
static int64_t skew_last(const skew_stamp_t *a, const skew_stamp_t *b)
{
    return (a->bar_out <= b->bar_out) ? skew_other(a, b) : skew_root(a, b);
}

static int64_t skew_abs_exit(const skew_stamp_t *a, const skew_stamp_t *b)
{
    int64_t d = skew_exit(a, b);

    return (d < 0) ? -d : d;
}

/* quartiles of what over the second half of the iterations */
static void skew_quartiles(int64_t (*what)(const skew_stamp_t *,
                                           const skew_stamp_t *),
                           int64_t *v, int64_t q[3])
{
    unsigned n = g_iters - g_iters / 2;

    (void)skew_median(what, v); /* sorts v */
    q[0] = v[n / 4];
    q[1] = v[n / 2];
    q[2] = v[(3 * n) / 4];
}

int main(int argc, char **argv)
{
    static const char *names[] = {"bcast", "allreduce", "barrier"};
    size_t bytes;
    int64_t *v;
    int c;

    if ((argc < 2) || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(stderr, "usage: coll_skew POOL [bcast|allreduce|barrier "
                "[ITERS]]\n");
        return (argc < 2) ? 2 : 0;
    }
    g_coll = SKEW_BCAST;
    if (argc > 2) {
        for (c = 0; c < 3; ++c) {
            if (!strcmp(argv[2], names[c])) {
                break;
            }
        }
        if (c == 3) {
            fprintf(stderr, "coll_skew: unknown collective '%s'\n", argv[2]);
            return 2;
        }
        g_coll = (skew_coll_t)c;
    }
    if (argc > 3) {
        g_iters = (unsigned)strtoul(argv[3], NULL, 0);
        if (g_iters < 2) {
            fprintf(stderr, "coll_skew: ITERS must be at least 2\n");
            return 2;
        }
    }
    bytes    = 2 * (size_t)g_iters * sizeof(*g_stamps);
    g_stamps = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    v        = malloc(g_iters * sizeof(*v));
    if ((g_stamps == MAP_FAILED) || (v == NULL)) {
        fprintf(stderr, "coll_skew: out of memory\n");
        return 1;
    }
    if (cxl_th_run(2, argv[1], 0, skew_rank, NULL, 600, NULL) != 0) {
        return 1;
    }
    printf("coll_skew %s%s, np 2, %u iterations (medians of the second "
           "half, ns): root %lld, other %lld; barrier entry other - root "
           "%lld, exit other - root %lld; done other - root %lld\n",
           names[g_coll], (g_coll == SKEW_BARRIER) ? "" : " 8 B", g_iters, (long long)skew_median(skew_root, v),
           (long long)skew_median(skew_other, v),
           (long long)skew_median(skew_entry, v),
           (long long)skew_median(skew_exit, v),
           (long long)skew_median(skew_done, v));
    {
        static const struct {
            const char *name;
            int64_t (*what)(const skew_stamp_t*, const skew_stamp_t*);
        } q[] = {
            {"mean of the two ranks", skew_mean},
            {"first to leave the barrier", skew_first},
            {"last to leave the barrier", skew_last},
            {"|barrier exit skew|", skew_abs_exit},
        };
        int64_t r[3];
        unsigned k;

        for (k = 0; k < sizeof(q) / sizeof(q[0]); ++k) {
            skew_quartiles(q[k].what, v, r);
            printf("  %-28s quartiles %lld / %lld / %lld ns\n", q[k].name,
                   (long long)r[0], (long long)r[1], (long long)r[2]);
        }
    }
    free(v);
    munmap(g_stamps, bytes);
    return 0;
}
