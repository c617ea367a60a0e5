/*
 * test_coll_threads - teams of several threads of one process, made, used
 * and destroyed at the same time: what an MPI_THREAD_MULTIPLE program
 * does when each of its threads creates communicators (MPICH's
 * threads/comm tests), and what coll/cxl turns into teams.
 *
 * Every rank runs TH_THREADS threads; thread t of every rank forms team
 * t with thread t of the others, over an out-of-band exchange of its own.
 * Each thread makes TH_ROUNDS teams one after the other, and on each runs
 * an allreduce, a bcast from a root that changes and a barrier, with
 * inputs that depend on rank, thread and round; every result is checked
 * against the value computed here.  So team creation (the pool's
 * partitions, the lock), calls and destruction (partition reuse) of the
 * threads of one process overlap in every way the scheduler finds.  np 2
 * and 3, hw and sw (the strict emulator, every rank a host of its own).
 *
 * Ends with "test_coll_threads: N passed, N failed".
 */
#include "coll_test_harness.h"

#include <ucx_cxl/coll.h>

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define TH_THREADS  4
#ifndef TH_ROUNDS
#define TH_ROUNDS   100
#endif
#define TH_COUNT    64            /* elements of the allreduce and bcast */
#define TH_OOB_MAX  4096          /* bytes per rank of one exchange */
#define TH_REGION   (256u << 10)  /* pool bytes per rank and team */

/*
 * One thread index's exchange, shared by the forked ranks: a rank writes
 * its part and then its generation; it reads once every rank's
 * generation is there, then says so in done.  A part is overwritten only
 * after every rank has read the exchange before (done), so one buffer
 * serves every generation.
 */
typedef struct {
    uint64_t seq[CXL_TH_MAX_RANKS];
    uint64_t done[CXL_TH_MAX_RANKS];
    char     data[CXL_TH_MAX_RANKS][TH_OOB_MAX];
} th_chan_t;

static th_chan_t *th_chans; /* TH_THREADS of them, MAP_SHARED */

typedef struct {
    cxl_th_rank_t *r;
    int            thread;
    uint64_t       gen;
    int            failed;
    char           why[160];
} th_thread_t;

static void th_wait_all(const uint64_t *word, int size, uint64_t gen)
{
    int i;

    for (i = 0; i < size; ++i) {
        while (__atomic_load_n(&word[i], __ATOMIC_ACQUIRE) < gen) {
            sched_yield();
        }
    }
}

static int th_oob_allgather(void *arg, const void *sbuf, void *rbuf,
                            size_t len)
{
    th_thread_t *t = arg;
    th_chan_t *c   = &th_chans[t->thread];
    int size = t->r->size, i;
    uint64_t gen;

    if (len > TH_OOB_MAX) {
        return -1;
    }
    gen = ++t->gen;
    th_wait_all(c->done, size, gen - 1);
    memcpy(c->data[t->r->rank], sbuf, len);
    __atomic_store_n(&c->seq[t->r->rank], gen, __ATOMIC_RELEASE);
    th_wait_all(c->seq, size, gen);
    for (i = 0; i < size; ++i) {
        memcpy((char*)rbuf + i * len, c->data[i], len);
    }
    __atomic_store_n(&c->done[t->r->rank], gen, __ATOMIC_RELEASE);
    return 0;
}

static int64_t th_value(int rank, int thread, int round, int i)
{
    return (int64_t)rank * 1000003 + thread * 10007 + round * 101 + i;
}

static int th_fail(th_thread_t *t, int round, const char *what,
                   cxl_coll_status_t st)
{
    snprintf(t->why, sizeof(t->why), "thread %d round %d: %s (%s)",
             t->thread, round, what,
             (st != CXL_COLL_OK) ? cxl_coll_last_error() : "wrong result");
    t->failed = 1;
    return 1;
}

static int th_round(th_thread_t *t, int round)
{
    cxl_th_rank_t *r = t->r;
    int64_t in[TH_COUNT], out[TH_COUNT], want;
    cxl_coll_team_params_t params;
    cxl_coll_team_t *team;
    cxl_coll_status_t st;
    int root = (round + t->thread) % r->size, i, q;

    cxl_coll_team_params_init(&params);
    params.rank          = r->rank;
    params.size          = r->size;
    params.oob_allgather = th_oob_allgather;
    params.oob_arg       = t;
    params.pool_path     = r->pool;
    params.region_size   = TH_REGION;
    st = cxl_coll_team_create(&params, &team);
    if (st != CXL_COLL_OK) {
        return th_fail(t, round, "team create", st);
    }

    for (i = 0; i < TH_COUNT; ++i) {
        in[i] = th_value(r->rank, t->thread, round, i);
    }
    st = cxl_coll_allreduce(team, in, out, TH_COUNT, CXL_COLL_INT64,
                            CXL_COLL_SUM);
    if (st != CXL_COLL_OK) {
        cxl_coll_team_destroy(team);
        return th_fail(t, round, "allreduce", st);
    }
    for (i = 0; i < TH_COUNT; ++i) {
        for (want = 0, q = 0; q < r->size; ++q) {
            want += th_value(q, t->thread, round, i);
        }
        if (out[i] != want) {
            cxl_coll_team_destroy(team);
            return th_fail(t, round, "allreduce", CXL_COLL_OK);
        }
    }

    for (i = 0; i < TH_COUNT; ++i) {
        out[i] = (r->rank == root) ? th_value(root, t->thread, round, i) : -1;
    }
    st = cxl_coll_bcast(team, out, TH_COUNT, CXL_COLL_INT64, root);
    if (st != CXL_COLL_OK) {
        cxl_coll_team_destroy(team);
        return th_fail(t, round, "bcast", st);
    }
    for (i = 0; i < TH_COUNT; ++i) {
        if (out[i] != th_value(root, t->thread, round, i)) {
            cxl_coll_team_destroy(team);
            return th_fail(t, round, "bcast", CXL_COLL_OK);
        }
    }

    st = cxl_coll_barrier(team);
    cxl_coll_team_destroy(team);
    return (st == CXL_COLL_OK) ? 0 : th_fail(t, round, "barrier", st);
}

static void *th_thread(void *arg)
{
    th_thread_t *t = arg;
    int round;

    for (round = 0; round < TH_ROUNDS; ++round) {
        if (th_round(t, round) != 0) {
            /* the peers' thread t waits for this one's next exchange:
             * the watchdog ends the run, this line says why */
            fprintf(stderr, "rank %d: %s\n", t->r->rank, t->why);
            exit(1);
        }
    }
    return NULL;
}

static int th_rank(cxl_th_rank_t *r)
{
    th_thread_t t[TH_THREADS];
    pthread_t tid[TH_THREADS];
    int i, n;

    for (n = 0; n < TH_THREADS; ++n) {
        memset(&t[n], 0, sizeof(t[n]));
        t[n].r      = r;
        t[n].thread = n;
        if (pthread_create(&tid[n], NULL, th_thread, &t[n]) != 0) {
            fprintf(stderr, "rank %d: pthread_create failed\n", r->rank);
            return 1;
        }
    }
    for (i = 0; i < n; ++i) {
        pthread_join(tid[i], NULL);
    }
    return 0;
}

int main(int argc, char **argv)
{
    char path[256], spec[300];
    int sw, np, failed;

    (void)argv;
    if (argc != 1) {
        printf("usage: test_coll_threads\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    unsetenv("CXL_COLL_TEST_SKIP_WB");
    unsetenv("CXL_COLL_POOL");
    th_chans = mmap(NULL, TH_THREADS * sizeof(*th_chans),
                    PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (th_chans == MAP_FAILED) {
        cxl_th_check(0, "map the exchange areas");
        return cxl_th_summary("test_coll_threads");
    }
    for (sw = 0; sw < 2; ++sw) {
        if (cxl_th_pool_create(sw ? "th-sw" : "th-hw", sw, 64ull << 20, path,
                               sizeof(path), spec, sizeof(spec)) != 0) {
            cxl_th_check(0, "create the %s pool", sw ? "sw" : "hw");
            return cxl_th_summary("test_coll_threads");
        }
        for (np = 2; np <= 3; ++np) {
            memset(th_chans, 0, TH_THREADS * sizeof(*th_chans));
            failed = cxl_th_run(np, spec, sw, th_rank, NULL, 120, NULL);
            cxl_th_check(failed == 0, "%s np %d: %d threads per rank, each "
                         "making %d teams with allreduce, bcast and barrier "
                         "(%d of %d ranks failed)", sw ? "sw" : "hw", np,
                         TH_THREADS, TH_ROUNDS, failed, np);
        }
        cxl_th_pool_destroy(path, sw);
    }
    return cxl_th_summary("test_coll_threads");
}
