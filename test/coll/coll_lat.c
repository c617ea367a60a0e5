/*
 * coll_lat - a quick latency loop of libcxl_coll (not a benchmark: see
 * perftest/ for that): NP ranks on POOL, ITERS calls each of barrier,
 * 8-byte bcast and 8-byte allreduce after a warm-up; rank 0 prints the
 * average per call.  Usage: coll_lat POOL [NP [ITERS [ONLY]]]; ONLY
 * (barrier, bcast or allreduce) runs that loop alone, for a profile of
 * one collective (callgrind attributes a shared callee to no caller).
 */
#include "coll_test_harness.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static unsigned g_iters = 20000;
static int g_only = -1; /* the loop to run alone (k below), or -1 */
static const char *const g_names[3] = {"barrier", "bcast", "allreduce"};

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
        t[k] = 0;
        if ((g_only >= 0) && ((int)k != g_only)) {
            continue;
        }
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
        printf("np %d:", r->size);
        for (k = 0; k < 3; ++k) {
            if ((g_only < 0) || ((int)k == g_only)) {
                printf("%s %s%s %.3f us", (k == 0) || (g_only >= 0) ? "" : ",",
                       g_names[k], (k == 0) ? "" : " 8 B", t[k]);
            }
        }
        printf(" (average of %u)\n", g_iters);
    }
    cxl_coll_team_destroy(team);
    return 0;
}

int main(int argc, char **argv)
{
    const char *pool;
    int np;

    if (argc < 2) {
        fprintf(stderr, "usage: coll_lat POOL [NP [ITERS [barrier|bcast|"
                "allreduce]]]\n");
        return 2;
    }
    if (argc > 4) {
        for (g_only = 2; (g_only >= 0) && strcmp(argv[4], g_names[g_only]);
             --g_only) {
        }
        if (g_only < 0) {
            fprintf(stderr, "coll_lat: unknown collective '%s' (barrier, "
                    "bcast or allreduce)\n", argv[4]);
            return 2;
        }
    }
    pool = argv[1];
    np   = (argc > 2) ? atoi(argv[2]) : 2;
    if (argc > 3) {
        g_iters = (unsigned)atoi(argv[3]);
    }
    return cxl_th_run(np, pool, 0, lat_rank, NULL, 600, NULL) ? 1 : 0;
}
