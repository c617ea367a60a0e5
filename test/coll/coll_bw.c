/*
 * coll_bw - a library-level loop for profiling libcxl_coll at one message
 * size (not a benchmark: perftest/ has that): NP ranks on POOL run ITERS
 * calls of COLL with BYTES per block (the message for bcast, reduce,
 * allreduce; per rank or pair for the others; float32 sum for the
 * reductions), a barrier before each, after ITERS/10 warm-up calls.
 * Rank 0 prints the median and mean of its per-call times.
 * Usage: coll_bw POOL NP COLL BYTES [ITERS [root]]
 * COLL: bcast reduce allreduce gather scatter allgather reduce_scatter
 * alltoall.  Buffers are ordinary memory (not pool-resident).
 * COLL_BW_ALL=1: every rank prints.  COLL_BW_DV=1: the input is rewritten
 * before every call (as perftest/coll_bench does by default), so the
 * writer's source lies dirty in its own cache, not clean and shared.
 * COLL_BW_COUNT=1 (sw mode): the ranks also print the software-coherence
 * operations of one timed call on average (cxl_coh_count_*), against the
 * lines of the message.
 */
#include "coll_test_harness.h"

#include <ucx_cxl/coherence.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *g_coll;
static size_t      g_bytes;
static unsigned    g_iters = 200;
static int         g_root;
static int         g_all; /* COLL_BW_ALL=1: every rank prints */
static int         g_dv;  /* COLL_BW_DV=1: input rewritten every call */
static int         g_count; /* COLL_BW_COUNT=1: sw operations per call */

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;

    return (x > y) - (x < y);
}

static cxl_coll_status_t bw_call(cxl_coll_team_t *team, void *s, void *r)
{
    size_t n = g_bytes, nf = g_bytes / 4;

    if (!strcmp(g_coll, "bcast")) {
        return cxl_coll_bcast(team, r, n, CXL_COLL_UINT8, g_root);
    } else if (!strcmp(g_coll, "reduce")) {
        return cxl_coll_reduce(team, s, r, nf, CXL_COLL_FLOAT32, CXL_COLL_SUM,
                               g_root);
    } else if (!strcmp(g_coll, "allreduce")) {
        return cxl_coll_allreduce(team, s, r, nf, CXL_COLL_FLOAT32,
                                  CXL_COLL_SUM);
    } else if (!strcmp(g_coll, "gather")) {
        return cxl_coll_gather(team, s, r, n, CXL_COLL_UINT8, g_root);
    } else if (!strcmp(g_coll, "scatter")) {
        return cxl_coll_scatter(team, s, r, n, CXL_COLL_UINT8, g_root);
    } else if (!strcmp(g_coll, "allgather")) {
        return cxl_coll_allgather(team, s, r, n, CXL_COLL_UINT8);
    } else if (!strcmp(g_coll, "reduce_scatter")) {
        return cxl_coll_reduce_scatter(team, s, r, nf, CXL_COLL_FLOAT32,
                                       CXL_COLL_SUM);
    } else if (!strcmp(g_coll, "alltoall")) {
        return cxl_coll_alltoall(team, s, r, n, CXL_COLL_UINT8);
    }
    return CXL_COLL_ERR_INVAL;
}

/* the call's input: the root's buffer of a bcast, else the send buffer */
static void bw_fill(const cxl_th_rank_t *r, uint8_t *s, uint8_t *d,
                    size_t len, unsigned it)
{
    if (!strcmp(g_coll, "bcast")) {
        if (r->rank == g_root) {
            memset(d, (int)(it & 255), g_bytes);
        }
    } else {
        memset(s, (int)(it & 63), len); /* small floats: sums stay finite */
    }
}

static int bw_rank(cxl_th_rank_t *r)
{
    size_t len = g_bytes * (size_t)r->size + 64;
    cxl_coh_counts_t c0, c1, tot = {0};
    cxl_coll_team_t *team;
    uint8_t *s, *d;
    double *t, t0, sum = 0;
    unsigned i;

    t = calloc(g_iters, sizeof(*t));
    s = malloc(len);
    d = malloc(len);
    if ((t == NULL) || (s == NULL) || (d == NULL)) {
        return 1;
    }
    for (i = 0; i < len / 4; ++i) {
        ((float*)s)[i] = (float)((i + r->rank) & 255);
    }
    memset(d, 0, len);
    if (cxl_th_team(r, NULL, &team) != CXL_COLL_OK) {
        fprintf(stderr, "team: %s\n", cxl_coll_last_error());
        return 1;
    }
    for (i = 0; i < g_iters / 10 + g_iters; ++i) {
        if (g_dv) {
            bw_fill(r, s, d, len, i);
        }
        if (cxl_coll_barrier(team) != CXL_COLL_OK) {
            goto err;
        }
        if (g_count && (i == g_iters / 10)) {
            cxl_coh_count_start();
        }
        cxl_coh_count_get(&c0);
        t0 = now_us();
        if (bw_call(team, s, d) != CXL_COLL_OK) {
            goto err;
        }
        if (i >= g_iters / 10) {
            t[i - g_iters / 10] = now_us() - t0;
            cxl_coh_count_get(&c1);
            tot.writeback        += c1.writeback - c0.writeback;
            tot.writeback_lines  += c1.writeback_lines - c0.writeback_lines;
            tot.invalidate       += c1.invalidate - c0.invalidate;
            tot.invalidate_lines += c1.invalidate_lines - c0.invalidate_lines;
            tot.fence            += c1.fence - c0.fence;
        }
    }
    if (g_count) {
        printf("rank %d, per call: %.1f write-backs of %.1f lines, %.1f "
               "invalidates of %.1f lines, %.1f fences (message: %zu lines)\n",
               r->rank, (double)tot.writeback / g_iters,
               (double)tot.writeback_lines / g_iters,
               (double)tot.invalidate / g_iters,
               (double)tot.invalidate_lines / g_iters,
               (double)tot.fence / g_iters, (g_bytes + 63) / 64);
        cxl_coh_count_stop();
    }
    for (i = 0; i < g_iters; ++i) {
        sum += t[i];
    }
    qsort(t, g_iters, sizeof(*t), cmp_double);
    if ((r->rank == 0) || g_all) {
        printf("%s np %d %zu B: median %.2f us, mean %.2f us (%u calls)%s\n",
               g_coll, r->size, g_bytes, t[g_iters / 2], sum / g_iters,
               g_iters, g_all ? (r->rank == 0 ? " rank 0" : " other") : "");
    }
    cxl_coll_team_destroy(team);
    return 0;
err:
    fprintf(stderr, "rank %d: %s\n", r->rank, cxl_coll_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    int np;

    if (argc < 5) {
        fprintf(stderr, "usage: coll_bw POOL NP COLL BYTES [ITERS [ROOT]]\n");
        return 2;
    }
    g_all   = getenv("COLL_BW_ALL") != NULL;
    g_dv    = getenv("COLL_BW_DV") != NULL;
    g_count = getenv("COLL_BW_COUNT") != NULL;
    np      = atoi(argv[2]);
    g_coll  = argv[3];
    g_bytes = strtoull(argv[4], NULL, 0);
    if (argc > 5) {
        g_iters = (unsigned)atoi(argv[5]);
    }
    if (argc > 6) {
        g_root = atoi(argv[6]);
    }
    if ((g_iters == 0) || (np < 1) || (g_root >= np)) {
        return 2;
    }
    return cxl_th_run(np, argv[1], 0, bw_rank, NULL, 600, NULL) ? 1 : 0;
}
