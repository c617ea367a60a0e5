/*
 * coll_lat - a quick latency loop of libcxl_coll (not a benchmark: see
 * perftest/ for that): NP ranks on POOL, ITERS calls each of barrier,
 * 8-byte bcast and 8-byte allreduce after a warm-up; rank 0 prints the
 * average per call.  Usage: coll_lat POOL [NP [ITERS]]
 */
#include "coll_test_harness.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static unsigned g_iters = 20000;

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int lat_rank(cxl_th_rank_t *r)
{
    cxl_coll_team_t *team;
    uint64_t x = 1, y;
    double t0, t[3];
    unsigned i, k;

    if (cxl_th_team(r, NULL, &team) != CXL_COLL_OK) {
        fprintf(stderr, "team: %s\n", cxl_coll_last_error());
        return 1;
    }
    for (k = 0; k < 3; ++k) {
        for (i = 0; i < g_iters / 10; ++i) { /* warm-up */
            cxl_coll_barrier(team);
        }
        t0 = now_us();
        for (i = 0; i < g_iters; ++i) {
            x += i;
            if (((k == 0) && (cxl_coll_barrier(team) != CXL_COLL_OK)) ||
                ((k == 1) && (cxl_coll_bcast(team, &x, 1, CXL_COLL_UINT64,
                                             0) != CXL_COLL_OK)) ||
                ((k == 2) && (cxl_coll_allreduce(team, &x, &y, 1,
                                                 CXL_COLL_UINT64,
                                                 CXL_COLL_SUM) != CXL_COLL_OK))) {
                fprintf(stderr, "rank %d: %s\n", r->rank, cxl_coll_last_error());
                return 1;
            }
        }
        t[k] = (now_us() - t0) / g_iters;
    }
    if (r->rank == 0) {
        printf("np %d: barrier %.3f us, bcast 8 B %.3f us, allreduce 8 B "
               "%.3f us (average of %u)\n", r->size, t[0], t[1], t[2], g_iters);
    }
    cxl_coll_team_destroy(team);
    return 0;
}

int main(int argc, char **argv)
{
    const char *pool;
    int np;

    if (argc < 2) {
        fprintf(stderr, "usage: coll_lat POOL [NP [ITERS]]\n");
        return 2;
    }
    pool = argv[1];
    np   = (argc > 2) ? atoi(argv[2]) : 2;
    if (argc > 3) {
        g_iters = (unsigned)atoi(argv[3]);
    }
    return cxl_th_run(np, pool, 0, lat_rank, NULL, 600, NULL) ? 1 : 0;
}
