/*
 * coll_basic_test - focused process tests of libcxl_coll: team creation
 * (1, 2, 3, 5 ranks; two pools -> CXL_COLL_ERR_NOT_SAME_POOL), every
 * collective at small and pipelined (multi-round) sizes with every root
 * and the in-place forms, thousands of back-to-back calls with changing
 * data, non-blocking post/test with several outstanding (and BUSY), bad
 * input, pool-resident buffers read in place, software-coherent mode on
 * the emulate-nc emulator (each rank an emulated host of its own) with the
 * skip-write-back knob making a check fail, and kill -9 of a rank mid-
 * collective (the others get CXL_COLL_ERR_PEER_DEAD; the dead rank's
 * partition is then reclaimed).
 *
 * Usage: coll_basic_test [SECTION...]   (default: all)
 *   sections: create create-nb reuse teams alias alg kinds pmem same-pool
 *   coll b2b ahead
 *   nb bad inplace sw skipwb kill
 * Prints "ok N - ..." lines and "coll-basic: N passed, N failed".
 */
#include "coll_test_harness.h"

#include <ucx_cxl/cxlpool.h>

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_hw_path[256], g_hw_spec[256], g_hw2_path[256], g_hw2_spec[256];
static char g_sw_path[256], g_sw_spec[256];

#define FAILF(...) do { fprintf(stderr, __VA_ARGS__); return 1; } while (0)

/* ---- data patterns: change with rank, index and iteration ---- */
static int32_t pat(int r, size_t i, unsigned it)
{
    return (int32_t)(r * 1000003u + i * 7u + it * 13u + (i >> 9) * 977u);
}

static int32_t pat3(int from, int to, size_t i, unsigned it)
{
    return pat(from * 31 + to, i, it);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);

    if (p == NULL) {
        abort();
    }
    return p;
}

/*
 * One collective on int32 data (reductions: sum), checked against values
 * computed here.  Returns the number of wrong elements, or -1 on an error
 * status.
 */
static long run_one(cxl_coll_team_t *team, cxl_coll_type_t type, size_t count,
                    int root, unsigned it, int in_place, int32_t *pool_sbuf)
{
    int me = cxl_coll_team_rank(team), p = cxl_coll_team_size(team), w;
    size_t n = count * p, i;
    int32_t *s = xmalloc(n * 4), *rb = xmalloc(n * 4), want;
    const void *sarg = s;
    void *rarg = rb;
    cxl_coll_args_t a;
    cxl_coll_status_t st;
    long bad = 0;
    uint32_t sum;

    if (pool_sbuf != NULL) {
        free(s);
        s = pool_sbuf;
        sarg = s;
    }
    memset(rb, 0xa5, n * 4);
    switch (type) {
    case CXL_COLL_BCAST:
        for (i = 0; i < count; ++i) {
            rb[i] = (me == root) ? pat(root, i, it) : -1;
        }
        break;
    case CXL_COLL_SCATTER:
    case CXL_COLL_ALLTOALL:
    case CXL_COLL_REDUCE_SCATTER:
        for (w = 0; w < p; ++w) {
            for (i = 0; i < count; ++i) {
                s[w * count + i] = pat3(me, w, i, it);
            }
        }
        break;
    default:
        for (i = 0; i < count; ++i) {
            s[i] = pat(me, i, it);
        }
        break;
    }
    if (in_place) {
        switch (type) {
        case CXL_COLL_ALLREDUCE:
        case CXL_COLL_REDUCE:
            memcpy(rb, s, count * 4);
            sarg = CXL_COLL_IN_PLACE;
            break;
        case CXL_COLL_REDUCE_SCATTER:
        case CXL_COLL_ALLTOALL:
            memcpy(rb, s, n * 4);
            sarg = CXL_COLL_IN_PLACE;
            break;
        case CXL_COLL_ALLGATHER:
            memcpy(rb + me * count, s, count * 4);
            sarg = CXL_COLL_IN_PLACE;
            break;
        case CXL_COLL_GATHER:
            if (me == root) {
                memcpy(rb + me * count, s, count * 4);
                sarg = CXL_COLL_IN_PLACE;
            }
            break;
        case CXL_COLL_SCATTER:
            if (me == root) {
                rarg = (void*)CXL_COLL_IN_PLACE;
            }
            break;
        default:
            break;
        }
    }
    a.type  = type;
    a.sbuf  = (type == CXL_COLL_BCAST) ? NULL : sarg;
    a.rbuf  = rarg;
    a.count = count;
    a.dtype = CXL_COLL_INT32;
    a.op    = CXL_COLL_SUM;
    a.root  = root;
    st = cxl_coll_run(team, &a);
    if (st != CXL_COLL_OK) {
        fprintf(stderr, "rank %d: %s count %zu root %d: %s\n", me,
                cxl_coll_type_name(type), count, root, cxl_coll_last_error());
        bad = -1;
        goto out;
    }
    for (i = 0; i < n; ++i) {
        w = (int)(i / (count ? count : 1));
        switch (type) {
        case CXL_COLL_BCAST:
            if (i >= count) {
                continue;
            }
            want = pat(root, i, it);
            break;
        case CXL_COLL_GATHER:
            if (me != root) {
                continue;
            }
            /* fall through */
        case CXL_COLL_ALLGATHER:
            want = pat(w, i % count, it);
            break;
        case CXL_COLL_SCATTER:
            if (in_place && (me == root)) {
                continue;
            }
            if (i >= count) {
                continue;
            }
            want = pat3(root, me, i, it);
            break;
        case CXL_COLL_ALLTOALL:
            want = pat3(w, me, i % count, it);
            break;
        case CXL_COLL_REDUCE:
            if ((me != root) || (i >= count)) {
                continue;
            }
            /* fall through */
        case CXL_COLL_ALLREDUCE:
            if (i >= count) {
                continue;
            }
            for (sum = 0, w = 0; w < p; ++w) {
                sum += (uint32_t)pat(w, i, it);
            }
            want = (int32_t)sum;
            break;
        case CXL_COLL_REDUCE_SCATTER:
            if (i >= count) {
                continue;
            }
            for (sum = 0, w = 0; w < p; ++w) {
                sum += (uint32_t)pat3(w, me, i, it);
            }
            want = (int32_t)sum;
            break;
        default:
            continue;
        }
        if (rb[i] != want) {
            if (bad < 3) {
                fprintf(stderr, "rank %d: %s%s count %zu root %d it %u: "
                        "[%zu] = %d, want %d\n", me, cxl_coll_type_name(type),
                        in_place ? " (in place)" : "", count, root, it, i,
                        rb[i], want);
            }
            bad++;
        }
    }
out:
    if (pool_sbuf == NULL) {
        free(s);
    }
    free(rb);
    return bad;
}

static const cxl_coll_type_t g_types[] = {
    CXL_COLL_BCAST, CXL_COLL_REDUCE, CXL_COLL_ALLREDUCE, CXL_COLL_GATHER,
    CXL_COLL_SCATTER, CXL_COLL_ALLGATHER, CXL_COLL_REDUCE_SCATTER,
    CXL_COLL_ALLTOALL
};
#define N_TYPES (sizeof(g_types) / sizeof(g_types[0]))

/* ---- sections ---- */
static int rank_create(cxl_th_rank_t *r)
{
    cxl_coll_team_t *team;
    cxl_coll_status_t st;

    st = cxl_th_team(r, NULL, &team);
    if (st != CXL_COLL_OK) {
        FAILF("rank %d: team_create: %s\n", r->rank, cxl_coll_last_error());
    }
    if ((cxl_coll_team_rank(team) != r->rank) ||
        (cxl_coll_team_size(team) != r->size)) {
        FAILF("rank %d: team says rank %d of %d\n", r->rank,
              cxl_coll_team_rank(team), cxl_coll_team_size(team));
    }
    st = cxl_coll_barrier(team);
    if (st != CXL_COLL_OK) {
        FAILF("rank %d: barrier: %s\n", r->rank, cxl_coll_last_error());
    }
    cxl_coll_team_destroy(team);
    return 0;
}

/*
 * Team creation as a request (cxl_coll_team_create_start/_test) over the
 * harness's non-blocking exchange.  Rank 0 starts and tests before any
 * other rank started (they wait for its word): starting is local and the
 * test says INPROGRESS.  arg: a second pool for the last rank (every rank
 * must then fail with NOT_SAME_POOL), or NULL.
 */
static int rank_create_nb(cxl_th_rank_t *r)
{
    volatile uint64_t *word = cxl_th_user(r);
    const char *other       = r->arg;
    cxl_coll_team_params_t params;
    cxl_coll_team_creq_t *creq;
    cxl_coll_team_t *team = NULL;
    cxl_coll_status_t st;
    int32_t in, out;

    cxl_coll_team_params_init(&params);
    params.rank           = r->rank;
    params.size           = r->size;
    params.oob_allgather  = cxl_th_oob_allgather;
    params.oob_iallgather = cxl_th_oob_iallgather;
    params.oob_test       = cxl_th_oob_test;
    params.oob_arg        = r;
    params.pool_path      = (other && (r->rank == r->size - 1)) ? other :
                            r->pool;
    if (r->rank != 0) {
        while (__atomic_load_n(word, __ATOMIC_ACQUIRE) == 0) {
            sched_yield();
        }
    }
    st = cxl_coll_team_create_start(&params, &creq);
    if (st != CXL_COLL_OK) {
        FAILF("rank %d: team_create_start: %s\n", r->rank,
              cxl_coll_last_error());
    }
    if ((r->rank == 0) && (r->size > 1)) {
        st = cxl_coll_team_create_test(creq, &team);
        if (st != CXL_COLL_INPROGRESS) {
            FAILF("rank 0: test before any peer started gave %s\n",
                  cxl_coll_strerror(st));
        }
        __atomic_store_n(word, 1, __ATOMIC_RELEASE);
    }
    while ((st = cxl_coll_team_create_test(creq, &team)) ==
           CXL_COLL_INPROGRESS) {
        sched_yield();
    }
    if (other != NULL) {
        if (st != CXL_COLL_ERR_NOT_SAME_POOL) {
            FAILF("rank %d: two pools gave %s (%s)\n", r->rank,
                  cxl_coll_strerror(st), cxl_coll_last_error());
        }
        return 0;
    }
    if (st != CXL_COLL_OK) {
        FAILF("rank %d: team_create_test: %s\n", r->rank,
              cxl_coll_last_error());
    }
    /* the team works, and its destroy (the blocking exchange) too */
    in = r->rank + 1;
    st = cxl_coll_allreduce(team, &in, &out, 1, CXL_COLL_INT32, CXL_COLL_SUM);
    if ((st != CXL_COLL_OK) || (out != r->size * (r->size + 1) / 2)) {
        FAILF("rank %d: allreduce on the team: %s, %d\n", r->rank,
              cxl_coll_strerror(st), (int)out);
    }
    cxl_coll_team_destroy(team);
    return 0;
}

/* Parameters the request form refuses, locally, before any exchange */
static int rank_create_nb_inval(cxl_th_rank_t *r)
{
    cxl_coll_team_params_t params;
    cxl_coll_team_creq_t *creq = NULL;
    cxl_coll_status_t st;

    cxl_coll_team_params_init(&params);
    params.rank           = r->rank;
    params.size           = r->size;
    params.oob_allgather  = cxl_th_oob_allgather;
    params.oob_iallgather = cxl_th_oob_iallgather; /* without its test */
    params.oob_arg        = r;
    st = cxl_coll_team_create_start(&params, &creq);
    if ((st != CXL_COLL_ERR_INVAL) || (creq != NULL) ||
        (strstr(cxl_coll_last_error(), "oob_test missing") == NULL)) {
        FAILF("rank %d: oob_iallgather without oob_test gave %s (%s)\n",
              r->rank, cxl_coll_strerror(st), cxl_coll_last_error());
    }
    return 0;
}

/* attachments of this process in the pool at spec */
static void count_own_attach(const cxlpool_attach_info_t *att, void *arg)
{
    if (att->alive && (att->pid == getpid())) {
        ++*(unsigned*)arg;
    }
}

/* Three teams of one process at once (a communicator each, as MPI makes
 * them): they share the process's pool handle, one attachment, not three
 * (each open maps the whole pool and takes a slot). */
static int rank_teams(cxl_th_rank_t *r)
{
    cxl_coll_team_t *team[3];
    cxlpool_params_t params;
    unsigned own = 0, i;
    cxlpool_t *pool;

    for (i = 0; i < 3; ++i) {
        if (cxl_th_team(r, NULL, &team[i]) != CXL_COLL_OK) {
            FAILF("rank %d: team %u: %s\n", r->rank, i, cxl_coll_last_error());
        }
    }
    for (i = 0; i < 3; ++i) {
        if (cxl_coll_barrier(team[i]) != CXL_COLL_OK) {
            FAILF("rank %d: barrier of team %u: %s\n", r->rank, i,
                  cxl_coll_last_error());
        }
    }
    cxlpool_params_init(&params);
    params.path  = r->pool;
    params.flags = CXLPOOL_NO_ATTACH | CXLPOOL_NO_HEARTBEAT;
    if (cxlpool_open(&params, &pool) != CXLPOOL_OK) {
        FAILF("rank %d: inspect the pool: %s\n", r->rank, cxlpool_last_error());
    }
    cxlpool_foreach_attach(pool, count_own_attach, &own);
    cxlpool_close(pool);
    for (i = 0; i < 3; ++i) {
        cxl_coll_team_destroy(team[i]);
    }
    if (own != 1) {
        FAILF("rank %d: %u attachments for 3 teams (want 1)\n", r->rank, own);
    }
    return 0;
}

/* CXL_COLL_LOG on, this rank's stderr into a log file of its own */
static int log_begin(cxl_th_rank_t *r, const char *what, char *path,
                     size_t len)
{
    snprintf(path, len, "/tmp/coll-%s-%d-%d.log", what, (int)getppid(),
             r->rank);
    if (freopen(path, "w", stderr) == NULL) {
        FAILF("rank %d: freopen: %s\n", r->rank, strerror(errno));
    }
    setenv("CXL_COLL_LOG", "y", 1);
    return 0;
}

/* The log so far into text (the file is removed). */
static void log_read(const char *path, char *text, size_t len)
{
    size_t got;
    FILE *f;

    fflush(stderr);
    f = fopen(path, "r");
    got = (f != NULL) ? fread(text, 1, len - 1, f) : 0;
    if (f != NULL) {
        fclose(f);
    }
    text[got] = '\0';
    unlink(path);
}

/* 0 when the first line of text containing `line` also contains `word` */
static int text_says(cxl_th_rank_t *r, const char *text, const char *line,
                     const char *word)
{
    const char *at  = strstr(text, line);
    const char *eol = (at != NULL) ? strchr(at, '\n') : NULL;
    const char *w   = (at != NULL) ? strstr(at, word) : NULL;

    if ((w == NULL) || ((eol != NULL) && (w > eol))) {
        /* stderr is the unlinked log file now */
        printf("rank %d: '%s' does not say '%s'; its log:\n%s\n", r->rank,
               line, word, text);
        return 1;
    }
    return 0;
}

/* 0 when the log's first line containing `line` also contains `word`
 * (the log is removed either way) */
static int log_says(cxl_th_rank_t *r, const char *path, const char *line,
                    const char *word)
{
    char text[8192];

    log_read(path, text, sizeof(text));
    return text_says(r, text, line, word);
}

static int log_inplace(cxl_th_rank_t *r, const char *path, const char *line)
{
    return log_says(r, path, line, "read in place");
}

/* bcast (root 0) and allgather of n int32 from buf (this rank's values),
 * into out (n x size); 0 when every result is right */
static int bcast_allgather_from(cxl_th_rank_t *r, cxl_coll_team_t *team,
                                int32_t *buf, int32_t *out, size_t n)
{
    size_t i;

    for (i = 0; i < n; ++i) {
        buf[i] = (int32_t)(r->rank * 100000 + i);
    }
    if (cxl_coll_bcast(team, (r->rank == 0) ? buf : out, n, CXL_COLL_INT32,
                       0) != CXL_COLL_OK) {
        FAILF("rank %d: bcast: %s\n", r->rank, cxl_coll_last_error());
    }
    for (i = 0; (r->rank != 0) && (i < n); ++i) {
        if (out[i] != (int32_t)i) {
            FAILF("rank %d: bcast element %zu = %d\n", r->rank, i, out[i]);
        }
    }
    if (cxl_coll_allgather(team, buf, out, n, CXL_COLL_INT32) != CXL_COLL_OK) {
        FAILF("rank %d: allgather: %s\n", r->rank, cxl_coll_last_error());
    }
    for (i = 0; i < n * r->size; ++i) {
        if (out[i] != (int32_t)((i / n) * 100000 + i % n)) {
            FAILF("rank %d: allgather element %zu = %d\n", r->rank, i, out[i]);
        }
    }
    return 0;
}

/*
 * A buffer in another mapping of the pool (as the transport's, where UCP
 * puts MPI_Alloc_mem memory) is read in place: each rank maps the pool a
 * second time, allocates its input there, and the log line of bcast and
 * allgather must say "read in place"; the results must be right.
 */
static int rank_alias(cxl_th_rank_t *r)
{
    const size_t n = 32768; /* 128 KiB of int32: not inline */
    cxlpool_params_t params;
    cxlpool_extent_t ext;
    cxl_coll_team_t *team;
    int32_t *buf, *out;
    cxlpool_t *pool;
    char logpath[128];

    if (log_begin(r, "alias", logpath, sizeof(logpath)) != 0) {
        return 1;
    }
    /* mapped before the team, as the transport maps the pool in
     * MPI_Init before the communicators get their collectives */
    cxlpool_params_init(&params);
    params.path = r->pool;
    if ((cxlpool_open(&params, &pool) != CXLPOOL_OK) ||
        (cxlpool_alloc(pool, n * 4, 4096, NULL, 0, &ext) != CXLPOOL_OK)) {
        FAILF("rank %d: a second mapping: %s\n", r->rank, cxlpool_last_error());
    }
    if (cxl_th_team(r, NULL, &team) != CXL_COLL_OK) {
        FAILF("rank %d: team_create: %s\n", r->rank, cxl_coll_last_error());
    }
    buf = (int32_t*)((uint8_t*)cxlpool_base(pool) + ext.offset);
    out = xmalloc(n * 4 * r->size);
    if (bcast_allgather_from(r, team, buf, out, n) != 0) {
        return 1;
    }
    cxl_coll_team_destroy(team);
    cxlpool_free(pool, ext.offset);
    cxlpool_close(pool);
    free(out);
    return log_inplace(r, logpath, "allgather 32768 x int32: flat");
}

/*
 * The allreduce algorithm by team size: 2 ranks reduce one-shot at every
 * size, in rounds (the same bytes cross as in two-shot, in half the
 * steps); 3 ranks two-shot.  A vector of 2 rounds, results checked.
 */
static int rank_alg(cxl_th_rank_t *r)
{
    const size_t n = (3u << 20) / 4 + 5; /* more than a slot */
    char logpath[128], line[64];
    cxl_coll_team_t *team;
    long bad;

    if (log_begin(r, "alg", logpath, sizeof(logpath)) != 0) {
        return 1;
    }
    if (cxl_th_team(r, NULL, &team) != CXL_COLL_OK) {
        FAILF("rank %d: team_create: %s\n", r->rank, cxl_coll_last_error());
    }
    bad = run_one(team, CXL_COLL_ALLREDUCE, n, 0, 7, 0, NULL);
    if (bad != 0) {
        FAILF("rank %d: allreduce: %ld wrong\n", r->rank, bad);
    }
    cxl_coll_team_destroy(team);
    snprintf(line, sizeof(line), "allreduce %zu x int32 sum:", n);
    return log_says(r, logpath, line, (r->size == 2) ? "one-shot in rounds" :
                                      "two-shot");
}

/*
 * Where each size of publication goes, as the log line says: bcast of 20,
 * 500 and 5000 int32 (80 B: flagged lines, 2000 B: the small slot,
 * 20000 B: a data slot), results checked.
 */
static int rank_kinds(cxl_th_rank_t *r)
{
    static const struct {
        size_t      count;
        const char *where;
    } k[] = {
        {20, "in flagged lines"},
        {500, "through the small slot"},
        {5000, "through the slot"},
    };
    char logpath[128], line[64], text[8192];
    cxl_coll_team_t *team;
    unsigned i;
    long bad;
    int fail = 0;

    if (log_begin(r, "kinds", logpath, sizeof(logpath)) != 0) {
        return 1;
    }
    if (cxl_th_team(r, NULL, &team) != CXL_COLL_OK) {
        FAILF("rank %d: team_create: %s\n", r->rank, cxl_coll_last_error());
    }
    for (i = 0; i < sizeof(k) / sizeof(k[0]); ++i) {
        bad = run_one(team, CXL_COLL_BCAST, k[i].count, 1, i, 0, NULL);
        if (bad != 0) {
            FAILF("rank %d: bcast of %zu: %ld wrong\n", r->rank, k[i].count,
                  bad);
        }
    }
    cxl_coll_team_destroy(team);
    log_read(logpath, text, sizeof(text));
    for (i = 0; i < sizeof(k) / sizeof(k[0]); ++i) {
        snprintf(line, sizeof(line), "bcast %zu x int32 root 1:", k[i].count);
        fail |= text_says(r, text, line, k[i].where);
    }
    return fail;
}

/*
 * cxl_coll_pool_mem_alloc() (MPI_Alloc_mem through mpool/cxl): memory
 * allocated before any team, from the pool the team then uses, is read in
 * place by bcast and allgather, the results right; its misuse is an error
 * (length 0, an alignment not a power of 2, a pointer it did not give, a
 * second free, a forked child freeing its parent's buffer), NULL is a
 * no-op, and freed memory goes back to the pool.
 */
static int rank_pmem(cxl_th_rank_t *r)
{
    const size_t n = 32768; /* 128 KiB of int32: not inline */
    cxl_coll_team_t *team;
    int32_t *buf, *out, *big;
    char logpath[128];
    int status;
    pid_t pid;

    if (log_begin(r, "pmem", logpath, sizeof(logpath)) != 0) {
        return 1;
    }
    if ((cxl_coll_pool_mem_alloc(r->pool, 0, 0) != NULL) ||
        (cxl_coll_pool_mem_alloc(r->pool, 4096, 3) != NULL)) {
        FAILF("rank %d: length 0 or alignment 3 allocated\n", r->rank);
    }
    buf = cxl_coll_pool_mem_alloc(r->pool, n * 4, 0);
    big = cxl_coll_pool_mem_alloc(r->pool, 3 << 20, 1 << 20);
    if ((buf == NULL) || (big == NULL)) {
        FAILF("rank %d: pool_mem_alloc: %s\n", r->rank, cxl_coll_last_error());
    }
    if (((uintptr_t)buf % 4096) || ((uintptr_t)big % (1 << 20))) {
        FAILF("rank %d: %p / %p not aligned\n", r->rank, (void*)buf,
              (void*)big);
    }
    memset(big, 0x5a, 3 << 20);
    if ((cxl_coll_pool_mem_free(big) != CXL_COLL_OK) ||
        (cxl_coll_pool_mem_free(big) != CXL_COLL_ERR_INVAL) ||
        (cxl_coll_pool_mem_free(buf + 1) != CXL_COLL_ERR_INVAL) ||
        (cxl_coll_pool_mem_free(NULL) != CXL_COLL_OK)) {
        FAILF("rank %d: a second free or a foreign pointer not refused\n",
              r->rank);
    }
    pid = fork();
    if (pid == 0) {
        _exit((cxl_coll_pool_mem_free(buf) == CXL_COLL_ERR_INVAL) ? 0 : 1);
    }
    if ((pid < 0) || (waitpid(pid, &status, 0) != pid) ||
        !WIFEXITED(status) || (WEXITSTATUS(status) != 0)) {
        FAILF("rank %d: a forked child freed its parent's buffer\n", r->rank);
    }
    if (cxl_th_team(r, NULL, &team) != CXL_COLL_OK) {
        FAILF("rank %d: team_create: %s\n", r->rank, cxl_coll_last_error());
    }
    out = xmalloc(n * 4 * r->size);
    if (bcast_allgather_from(r, team, buf, out, n) != 0) {
        return 1;
    }
    cxl_coll_team_destroy(team);
    if (cxl_coll_pool_mem_free(buf) != CXL_COLL_OK) {
        FAILF("rank %d: pool_mem_free: %s\n", r->rank, cxl_coll_last_error());
    }
    free(out);
    return log_inplace(r, logpath, "allgather 32768 x int32: flat");
}

static int rank_same_pool(cxl_th_rank_t *r)
{
    cxl_coll_team_t *team = NULL;
    cxl_coll_status_t st;

    st = cxl_th_team(r, (r->rank == 1) ? g_hw2_spec : NULL, &team);
    if (st != CXL_COLL_ERR_NOT_SAME_POOL) {
        FAILF("rank %d: team_create on two pools gave %s (%s)\n", r->rank,
              cxl_coll_strerror(st), cxl_coll_last_error());
    }
    if (strstr(cxl_coll_last_error(), "pool") == NULL) {
        FAILF("rank %d: error without detail: %s\n", r->rank,
              cxl_coll_last_error());
    }
    return 0;
}

static const size_t g_counts[] = {0, 1, 7, 1000, 70001};

static int rank_coll(cxl_th_rank_t *r)
{
    cxl_coll_team_t *team;
    unsigned it = 0, t, c, ip;
    int root;
    long bad;

    if (cxl_th_team(r, NULL, &team) != CXL_COLL_OK) {
        FAILF("rank %d: team_create: %s\n", r->rank, cxl_coll_last_error());
    }
    for (t = 0; t < N_TYPES; ++t) {
        for (c = 0; c < sizeof(g_counts) / sizeof(g_counts[0]); ++c) {
            for (ip = 0; ip < 2; ++ip) {
                for (root = 0; root < r->size; ++root) {
                    bad = run_one(team, g_types[t], g_counts[c], root, ++it,
                                  ip, NULL);
                    if (bad != 0) {
                        FAILF("rank %d: %s count %zu root %d%s: %ld bad\n",
                              r->rank, cxl_coll_type_name(g_types[t]),
                              g_counts[c], root, ip ? " in place" : "", bad);
                    }
                    if ((g_types[t] != CXL_COLL_BCAST) &&
                        (g_types[t] != CXL_COLL_REDUCE) &&
                        (g_types[t] != CXL_COLL_GATHER) &&
                        (g_types[t] != CXL_COLL_SCATTER)) {
                        break; /* no root */
                    }
                }
            }
        }
    }
    if (cxl_coll_barrier(team) != CXL_COLL_OK) {
        FAILF("rank %d: barrier: %s\n", r->rank, cxl_coll_last_error());
    }
    cxl_coll_team_destroy(team);
    return 0;
}

/* float32 and int8 allreduce: bitwise equal to rank-order arithmetic */
static int rank_types(cxl_th_rank_t *r)
{
    cxl_coll_team_t *team;
    size_t n = 50000, i;
    float *f = xmalloc(n * 4), *fr = xmalloc(n * 4), acc = 0;
    int8_t *b = xmalloc(n), *br = xmalloc(n);
    int w;

    if (cxl_th_team(r, NULL, &team) != CXL_COLL_OK) {
        FAILF("rank %d: team_create: %s\n", r->rank, cxl_coll_last_error());
    }
    for (i = 0; i < n; ++i) {
        f[i] = (float)pat(r->rank, i, 5) * 1e-7f + 0.1f;
        b[i] = (int8_t)(100 + r->rank * 7 + i);
    }
    if ((cxl_coll_allreduce(team, f, fr, n, CXL_COLL_FLOAT32, CXL_COLL_SUM) !=
         CXL_COLL_OK) ||
        (cxl_coll_allreduce(team, b, br, n, CXL_COLL_INT8, CXL_COLL_SUM) !=
         CXL_COLL_OK)) {
        FAILF("rank %d: allreduce: %s\n", r->rank, cxl_coll_last_error());
    }
    for (i = 0; i < n; ++i) {
        int8_t want8 = 0;
        uint32_t u = 0;

        for (w = 0; w < r->size; ++w) {
            float v = (float)pat(w, i, 5) * 1e-7f + 0.1f;

            acc = (w == 0) ? v : acc + v;
            u  += (uint8_t)(100 + w * 7 + i);
        }
        want8 = (int8_t)(uint8_t)u;
        if ((memcmp(&acc, &fr[i], 4) != 0) || (br[i] != want8)) {
            FAILF("rank %d: [%zu] float %a want %a, int8 %d want %d\n",
                  r->rank, i, fr[i], acc, br[i], want8);
        }
    }
    cxl_coll_team_destroy(team);
    free(f);
    free(fr);
    free(b);
    free(br);
    return 0;
}

static int rank_b2b(cxl_th_rank_t *r)
{
    cxl_coll_team_t *team;
    unsigned it;
    long bad;
    cxl_coll_type_t t;

    if (cxl_th_team(r, NULL, &team) != CXL_COLL_OK) {
        FAILF("rank %d: team_create: %s\n", r->rank, cxl_coll_last_error());
    }
    for (it = 0; it < 3000; ++it) {
        if ((it % 5) == 4) {
            if (cxl_coll_barrier(team) != CXL_COLL_OK) {
                FAILF("rank %d: barrier %u: %s\n", r->rank, it,
                      cxl_coll_last_error());
            }
            continue;
        }
        t   = g_types[it % N_TYPES];
        bad = run_one(team, t, 1 + (it % 13), it % r->size, it, 0, NULL);
        if (bad != 0) {
            FAILF("rank %d: iteration %u (%s): %ld bad\n", r->rank, it,
                  cxl_coll_type_name(t), bad);
        }
    }
    cxl_coll_team_destroy(team);
    return 0;
}

/*
 * The root runs ahead of late readers: bcasts from rank 0, mostly inline
 * (they reuse a signal line only after CXL_COLL_NSIG steps) and some
 * through a data slot, while the other ranks start each call late.  A writer that took a data slot or a line before every
 * reader had finished with its last step shows up as wrong data.
 */
static int rank_ahead(cxl_th_rank_t *r)
{
    cxl_coll_team_t *team;
    unsigned it;
    size_t count;
    long bad;
    int big;

    if (cxl_th_team(r, NULL, &team) != CXL_COLL_OK) {
        FAILF("rank %d: team_create: %s\n", r->rank, cxl_coll_last_error());
    }
    for (it = 0; it < 900; ++it) {
        /* first a data slot every third step (each data slot written
         * again 2 steps on), then runs of 19 inline steps (the signal
         * lines wrap) */
        big   = (it < 450) ? ((it % 3) == 2) : ((it % 20) == 19);
        count = big ? 20000 + it : 1 + (it % 9);
        if ((r->rank != 0) && ((it % 7) < 3)) {
            usleep(100 * (unsigned)r->rank);
        }
        bad = run_one(team, CXL_COLL_BCAST, count, 0, it, 0, NULL);
        if (bad != 0) {
            FAILF("rank %d: bcast %u of %zu elements: %ld bad\n", r->rank,
                  it, count, bad);
        }
    }
    if (cxl_coll_barrier(team) != CXL_COLL_OK) {
        FAILF("rank %d: barrier: %s\n", r->rank, cxl_coll_last_error());
    }
    cxl_coll_team_destroy(team);
    return 0;
}

/* Several outstanding requests, completed by testing the last one. */
static int rank_nb(cxl_th_rank_t *r)
{
    enum { NREQ = 4, CNT = 3000 };
    cxl_coll_req_t *req[NREQ + 1];
    int32_t *s[NREQ], *rb[NREQ];
    cxl_coll_team_t *team;
    cxl_coll_args_t a;
    cxl_coll_status_t st;
    unsigned spins = 0;
    int i, w;
    size_t j;

    setenv("CXL_COLL_MAX_REQS", "4", 1);
    if (cxl_th_team(r, NULL, &team) != CXL_COLL_OK) {
        FAILF("rank %d: team_create: %s\n", r->rank, cxl_coll_last_error());
    }
    for (i = 0; i < NREQ; ++i) {
        s[i]  = xmalloc(CNT * 4 * r->size);
        rb[i] = xmalloc(CNT * 4 * r->size);
        for (j = 0; j < CNT; ++j) {
            s[i][j] = pat(r->rank, j, i);
        }
        a.type  = (i % 2) ? CXL_COLL_ALLGATHER : CXL_COLL_ALLREDUCE;
        a.sbuf  = s[i];
        a.rbuf  = rb[i];
        a.count = CNT;
        a.dtype = CXL_COLL_INT32;
        a.op    = CXL_COLL_SUM;
        a.root  = 0;
        st = cxl_coll_post(team, &a, &req[i]);
        if (st != CXL_COLL_OK) {
            FAILF("rank %d: post %d: %s\n", r->rank, i, cxl_coll_last_error());
        }
    }
    /* one more than CXL_COLL_MAX_REQS */
    st = cxl_coll_post(team, &a, &req[NREQ]);
    if (st != CXL_COLL_ERR_BUSY) {
        FAILF("rank %d: post beyond the limit gave %s\n", r->rank,
              cxl_coll_strerror(st));
    }
    /* testing the last progresses the earlier ones, in order */
    while ((st = cxl_coll_test(req[NREQ - 1])) == CXL_COLL_INPROGRESS) {
        if (++spins > 50) {
            sched_yield();
        }
    }
    if (st != CXL_COLL_OK) {
        FAILF("rank %d: test: %s\n", r->rank, cxl_coll_last_error());
    }
    for (i = 0; i < NREQ; ++i) {
        st = cxl_coll_test(req[i]);
        if (st != CXL_COLL_OK) {
            FAILF("rank %d: request %d after the last: %s\n", r->rank, i,
                  cxl_coll_strerror(st));
        }
        cxl_coll_req_free(req[i]);
        for (j = 0; j < CNT * (size_t)((i % 2) ? r->size : 1); ++j) {
            int32_t want;
            uint32_t sum = 0;

            if (i % 2) {
                want = pat((int)(j / CNT), j % CNT, i);
            } else {
                for (w = 0; w < r->size; ++w) {
                    sum += (uint32_t)pat(w, j, i);
                }
                want = (int32_t)sum;
            }
            if (rb[i][j] != want) {
                FAILF("rank %d: request %d [%zu] = %d, want %d\n", r->rank, i,
                      j, rb[i][j], want);
            }
        }
        free(s[i]);
        free(rb[i]);
    }
    /* freed requests make room again */
    if (cxl_coll_barrier(team) != CXL_COLL_OK) {
        FAILF("rank %d: barrier: %s\n", r->rank, cxl_coll_last_error());
    }
    cxl_coll_team_destroy(team);
    return 0;
}

static int expect_err(int rank, const char *what, cxl_coll_status_t got,
                      cxl_coll_status_t want)
{
    if (got != want) {
        fprintf(stderr, "rank %d: %s gave %s, want %s (%s)\n", rank, what,
                cxl_coll_strerror(got), cxl_coll_strerror(want),
                cxl_coll_last_error());
        return 1;
    }
    return 0;
}

static int rank_bad(cxl_th_rank_t *r)
{
    cxl_coll_team_t *team;
    int32_t x[4] = {1, 2, 3, 4}, y[4];
    float f = 1.0f, g;
    int fails = 0;
    long bad;

    if (cxl_th_team(r, NULL, &team) != CXL_COLL_OK) {
        FAILF("rank %d: team_create: %s\n", r->rank, cxl_coll_last_error());
    }
    fails += expect_err(r->rank, "count overflow",
                        cxl_coll_allreduce(team, x, y, SIZE_MAX / 2,
                                           CXL_COLL_INT32, CXL_COLL_SUM),
                        CXL_COLL_ERR_INVAL);
    fails += expect_err(r->rank, "root out of range",
                        cxl_coll_bcast(team, x, 4, CXL_COLL_INT32, r->size),
                        CXL_COLL_ERR_INVAL);
    fails += expect_err(r->rank, "negative root",
                        cxl_coll_reduce(team, x, y, 4, CXL_COLL_INT32,
                                        CXL_COLL_SUM, -1), CXL_COLL_ERR_INVAL);
    fails += expect_err(r->rank, "band on float32",
                        cxl_coll_allreduce(team, &f, &g, 1, CXL_COLL_FLOAT32,
                                           CXL_COLL_BAND),
                        CXL_COLL_ERR_UNSUPPORTED);
    fails += expect_err(r->rank, "bad datatype",
                        cxl_coll_allgather(team, x, y, 1,
                                           (cxl_coll_dtype_t)99),
                        CXL_COLL_ERR_UNSUPPORTED);
    fails += expect_err(r->rank, "bad op",
                        cxl_coll_allreduce(team, x, y, 1, CXL_COLL_INT32,
                                           (cxl_coll_op_t)42),
                        CXL_COLL_ERR_UNSUPPORTED);
    fails += expect_err(r->rank, "NULL sbuf",
                        cxl_coll_allreduce(team, NULL, y, 4, CXL_COLL_INT32,
                                           CXL_COLL_SUM), CXL_COLL_ERR_INVAL);
    fails += expect_err(r->rank, "NULL rbuf",
                        cxl_coll_allgather(team, x, NULL, 1, CXL_COLL_INT32),
                        CXL_COLL_ERR_INVAL);
    fails += expect_err(r->rank, "count 0 with NULL buffers",
                        cxl_coll_allreduce(team, NULL, NULL, 0, CXL_COLL_INT32,
                                           CXL_COLL_SUM), CXL_COLL_OK);
    if (strstr(cxl_coll_last_error(), "NULL") == NULL) {
        fprintf(stderr, "rank %d: last error lost its detail: %s\n", r->rank,
                cxl_coll_last_error());
        fails++;
    }
    /* nothing corrupted: the team still works */
    bad = run_one(team, CXL_COLL_ALLREDUCE, 1000, 0, 77, 0, NULL);
    bad += run_one(team, CXL_COLL_BCAST, 5, r->size - 1, 78, 0, NULL);
    if (bad != 0) {
        fprintf(stderr, "rank %d: collectives after the errors: %ld bad\n",
                r->rank, bad);
        fails++;
    }
    cxl_coll_team_destroy(team);
    return fails ? 1 : 0;
}

/* Inputs in cxl_coll_mem_alloc() memory: read in place (the log says so). */
static int rank_inplace(cxl_th_rank_t *r)
{
    static const cxl_coll_type_t types[] = {
        CXL_COLL_BCAST, CXL_COLL_ALLGATHER, CXL_COLL_ALLREDUCE,
        CXL_COLL_ALLTOALL, CXL_COLL_GATHER, CXL_COLL_SCATTER,
        CXL_COLL_REDUCE, CXL_COLL_REDUCE_SCATTER
    };
    size_t cnt = 40000, t, n;
    char logpath[300], line[512];
    int32_t *pbuf;
    cxl_coll_team_t *team;
    long bad;
    FILE *log;
    int found = 0;

    snprintf(logpath, sizeof(logpath), "/dev/shm/cxl-coll-test-%d-log%d",
             (int)getppid(), r->rank);
    if ((freopen(logpath, "w", stderr) == NULL)) {
        return 1;
    }
    setenv("CXL_COLL_LOG", "1", 1);
    if (cxl_th_team(r, NULL, &team) != CXL_COLL_OK) {
        FAILF("rank %d: team_create: %s\n", r->rank, cxl_coll_last_error());
    }
    pbuf = cxl_coll_mem_alloc(team, cnt * 4 * r->size);
    if (pbuf == NULL) {
        FAILF("rank %d: mem_alloc: %s\n", r->rank, cxl_coll_last_error());
    }
    for (t = 0; t < sizeof(types) / sizeof(types[0]); ++t) {
        for (n = 0; n < 3; ++n) {
            /* bcast: its buffer is rbuf, so only its root reads in place */
            bad = run_one(team, types[t], cnt / (1 + n * 7), (int)(t + n) % r->size,
                          (unsigned)(t * 3 + n), 0,
                          (types[t] == CXL_COLL_BCAST) ? NULL : pbuf);
            if (bad != 0) {
                FAILF("rank %d: %s from a pool buffer: %ld bad\n", r->rank,
                      cxl_coll_type_name(types[t]), bad);
            }
        }
    }
    cxl_coll_mem_free(team, pbuf);
    cxl_coll_team_destroy(team);
    fflush(stderr);
    log = fopen(logpath, "r");
    while ((log != NULL) && fgets(line, sizeof(line), log)) {
        found += (strstr(line, "in place") != NULL);
    }
    if (log) {
        fclose(log);
    }
    unlink(logpath);
    if (found < 5) {
        fprintf(stdout, "# rank %d: only %d log lines say 'in place'\n",
                r->rank, found);
        return 1;
    }
    return 0;
}

/* With the write-back of data left out, a sw reader must see stale data. */
static int rank_skipwb(cxl_th_rank_t *r)
{
    cxl_coll_team_t *team;
    long bad = 0;
    unsigned it;

    setenv("CXL_COLL_TEST_SKIP_WB", "y", 1);
    if (cxl_th_team(r, NULL, &team) != CXL_COLL_OK) {
        FAILF("rank %d: team_create: %s\n", r->rank, cxl_coll_last_error());
    }
    for (it = 0; it < 3; ++it) {
        bad += labs(run_one(team, CXL_COLL_ALLGATHER, 20000, 0, it + 1, 0,
                            NULL));
    }
    cxl_coll_team_destroy(team);
    /* exit 3: this rank saw wrong data, as it must */
    return (bad > 0) ? 3 : 0;
}

/* Rank size-1 dies (SIGKILL) in the middle of a multi-round allgather. */
static int rank_kill(cxl_th_rank_t *r)
{
    /* 4 MB per block: more than a slot (2 MiB of the 4 MiB region), so the
     * dying rank's first test() can publish one round at most and the
     * others must miss the rest (a rank that published everything before
     * it died is not missed: rank_dead_after_publish) */
    size_t cnt = 1000000;
    int32_t *s = xmalloc(cnt * 4), *rb = xmalloc(cnt * 4 * r->size);
    cxl_coll_team_t *team;
    cxl_coll_req_t *req;
    cxl_coll_args_t a;
    cxl_coll_status_t st;

    if (cxl_th_team(r, NULL, &team) != CXL_COLL_OK) {
        FAILF("rank %d: team_create: %s\n", r->rank, cxl_coll_last_error());
    }
    if (run_one(team, CXL_COLL_ALLREDUCE, 100, 0, 1, 0, NULL) != 0) {
        FAILF("rank %d: allreduce before the kill failed\n", r->rank);
    }
    memset(s, 1, cnt * 4);
    a.type  = CXL_COLL_ALLGATHER;
    a.sbuf  = s;
    a.rbuf  = rb;
    a.count = cnt;
    a.dtype = CXL_COLL_INT32;
    a.op    = CXL_COLL_SUM;
    a.root  = 0;
    if (cxl_coll_post(team, &a, &req) != CXL_COLL_OK) {
        FAILF("rank %d: post: %s\n", r->rank, cxl_coll_last_error());
    }
    if (r->rank == r->size - 1) {
        cxl_coll_test(req);       /* publishes its first round */
        raise(SIGKILL);
    }
    st = cxl_coll_wait(req);
    cxl_coll_req_free(req);
    if (st != CXL_COLL_ERR_PEER_DEAD) {
        FAILF("rank %d: allgather with a dead peer gave %s\n", r->rank,
              cxl_coll_strerror(st));
    }
    printf("# rank %d: %s\n", r->rank, cxl_coll_last_error());
    /* the team is unusable now, and says so */
    st = cxl_coll_barrier(team);
    if (st != CXL_COLL_ERR_PEER_DEAD) {
        FAILF("rank %d: barrier on a failed team gave %s\n", r->rank,
              cxl_coll_strerror(st));
    }
    cxl_coll_team_destroy(team);
    free(s);
    free(rb);
    return 0;
}

/*
 * A rank that published its part and then died is not missed: rank 2
 * gathers (a non-root only publishes) and kills itself; rank 1 comes 200 ms
 * later, so the root waits for rank 1 long enough to look at its peers'
 * liveness.  The root must finish with both blocks (before, it checked
 * every peer and failed on rank 2), and the next collective, which needs
 * rank 2, fails with PEER_DEAD.
 */
static int rank_dead_after_publish(cxl_th_rank_t *r)
{
    int32_t sblk[16], rblk[3 * 16];
    cxl_coll_team_t *team;
    cxl_coll_status_t st;
    int i;

    if (cxl_th_team(r, NULL, &team) != CXL_COLL_OK) {
        FAILF("rank %d: team_create: %s\n", r->rank, cxl_coll_last_error());
    }
    for (i = 0; i < 16; ++i) {
        sblk[i] = r->rank * 1000 + i;
    }
    if (r->rank == 1) {
        usleep(200000);
    }
    st = cxl_coll_gather(team, sblk, (r->rank == 0) ? rblk : NULL, 16,
                         CXL_COLL_INT32, 0);
    if (r->rank == 2) {
        raise(SIGKILL);
    }
    if (st != CXL_COLL_OK) {
        FAILF("rank %d: gather with a peer that died after publishing: %s\n",
              r->rank, cxl_coll_last_error());
    }
    if (r->rank == 0) {
        for (i = 0; i < 3 * 16; ++i) {
            if (rblk[i] != (i / 16) * 1000 + (i % 16)) {
                FAILF("rank 0: gathered element %d = %d\n", i, rblk[i]);
            }
        }
    }
    st = cxl_coll_barrier(team);
    if (st != CXL_COLL_ERR_PEER_DEAD) {
        FAILF("rank %d: barrier without rank 2 gave %s\n", r->rank,
              cxl_coll_strerror(st));
    }
    cxl_coll_team_destroy(team);
    return 0;
}

/* A bad CXL_COLL_* value on one rank fails the team on every rank. */
static int rank_badcfg(cxl_th_rank_t *r)
{
    cxl_coll_team_t *team = NULL;
    cxl_coll_status_t st;

    if (r->rank == 1) {
        setenv("CXL_COLL_CHUNK_SIZE", "12q", 1);
    }
    st = cxl_th_team(r, NULL, &team);
    if (st != CXL_COLL_ERR_INVAL) {
        FAILF("rank %d: team with a bad CXL_COLL_CHUNK_SIZE on rank 1 gave"
              " %s\n", r->rank, cxl_coll_strerror(st));
    }
    if ((r->rank == 1) &&
        (strstr(cxl_coll_last_error(), "CXL_COLL_CHUNK_SIZE='12q'") == NULL)) {
        FAILF("rank 1: the error does not name the value: %s\n",
              cxl_coll_last_error());
    }
    if ((r->rank == 0) && (strstr(cxl_coll_last_error(), "rank 1") == NULL)) {
        FAILF("rank 0: the error does not name rank 1: %s\n",
              cxl_coll_last_error());
    }
    return 0;
}

/*
 * CXL_COLL_TIMEOUT: rank 0 times out in a barrier that rank 1 enters
 * only after rank 0 gave up (ordered by the harness's exchange, not by
 * time); it completes (rank 0 had arrived), and in the next one rank 1
 * sees rank 0's abort line: PEER_DEAD, no hang.
 */
static int rank_timeout(cxl_th_rank_t *r)
{
    cxl_coll_team_t *team;
    cxl_coll_status_t st;
    int x = 0, all[2];

    setenv("CXL_COLL_TIMEOUT", "100ms", 1);
    if (cxl_th_team(r, NULL, &team) != CXL_COLL_OK) {
        FAILF("rank %d: team_create: %s\n", r->rank, cxl_coll_last_error());
    }
    if (r->rank == 0) {
        st = cxl_coll_barrier(team);
        cxl_th_oob_allgather(r, &x, all, sizeof(x));
        if (st != CXL_COLL_ERR_TIMEOUT) {
            FAILF("rank 0: barrier without rank 1 gave %s\n",
                  cxl_coll_strerror(st));
        }
    } else {
        cxl_th_oob_allgather(r, &x, all, sizeof(x));
        /* rank 0 had arrived at the first barrier before it gave up */
        st = cxl_coll_barrier(team);
        if (st != CXL_COLL_OK) {
            FAILF("rank 1: the barrier rank 0 had arrived at: %s\n",
                  cxl_coll_last_error());
        }
        st = cxl_coll_barrier(team);
        if ((st != CXL_COLL_ERR_PEER_DEAD) ||
            (strstr(cxl_coll_last_error(), "gave up") == NULL)) {
            FAILF("rank 1: barrier after rank 0 gave up: %s\n",
                  cxl_coll_last_error());
        }
    }
    cxl_coll_team_destroy(team);
    return 0;
}

/* ---- the parent ---- */
/* The ranks' stderr of rank_inplace: shown if they failed, then removed. */
static void inplace_logs(int np, int show)
{
    char path[300], line[512];
    FILE *f;
    int i;

    for (i = 0; i < np; ++i) {
        snprintf(path, sizeof(path), "/dev/shm/cxl-coll-test-%d-log%d",
                 (int)getpid(), i);
        f = show ? fopen(path, "r") : NULL;
        while ((f != NULL) && fgets(line, sizeof(line), f)) {
            printf("# rank %d: %s", i, line);
        }
        if (f != NULL) {
            fclose(f);
        }
        unlink(path);
    }
}

static int want(const char *sel, int argc, char **argv)
{
    int i;

    if (argc < 2) {
        return 1;
    }
    for (i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], sel)) {
            return 1;
        }
    }
    return 0;
}

typedef struct {
    unsigned dead_extents;
    unsigned coll_extents;
} pool_state_t;

static void count_extent(const cxlpool_extent_t *e, void *arg)
{
    pool_state_t *ps = arg;

    if (!strncmp(e->name, "cxl-coll", 8)) {
        ps->coll_extents++;
    }
}

/* Dead extents and team extents of a pool, seen without an attachment. */
static int pool_state(const char *spec, pool_state_t *ps)
{
    cxlpool_check_report_t rep;
    cxlpool_params_t params;
    cxlpool_t *pool;

    memset(ps, 0, sizeof(*ps));
    cxlpool_params_init(&params);
    params.path  = spec;
    params.flags = CXLPOOL_NO_ATTACH | CXLPOOL_NO_HEARTBEAT;
    if (cxlpool_open(&params, &pool) != CXLPOOL_OK) {
        fprintf(stderr, "open %s: %s\n", spec, cxlpool_last_error());
        return -1;
    }
    memset(&rep, 0, sizeof(rep));
    cxlpool_check(pool, 0, &rep, NULL, NULL);
    ps->dead_extents = rep.dead_extents;
    cxlpool_foreach_extent(pool, count_extent, ps);
    cxlpool_close(pool);
    return 0;
}

/*
 * Team partitions reused by the process (coll_pool.c): with a team kept
 * alive (the pool stays open), REUSE_ROUNDS teams one after another, each
 * running allreduces of every publication kind (inline, flagged lines,
 * small slot, data slots in rounds) with data of its own, checked.  While
 * a later team runs, and after each team's destroy, the pool holds two
 * partitions per rank (the kept team's, the idle one), never three: the
 * team took the idle one instead of allocating.  arg: the pool spec, for
 * rank 0's count.
 */
#define REUSE_ROUNDS 4

static int reuse_allreduce(cxl_coll_team_t *team, int rank, int size,
                           int round)
{
    static const size_t counts[] = {3, 50, 700, 200000};
    int64_t *in, *out, want;
    size_t k, i;
    int bad = 0;

    in  = malloc(200000 * sizeof(*in));
    out = malloc(200000 * sizeof(*out));
    if ((in == NULL) || (out == NULL)) {
        free(in);
        free(out);
        return 1;
    }
    for (k = 0; k < sizeof(counts) / sizeof(counts[0]); ++k) {
        for (i = 0; i < counts[k]; ++i) {
            in[i] = (int64_t)(rank + 1) * 1000003 + (int64_t)round * 7919 +
                    (int64_t)i;
        }
        if (cxl_coll_allreduce(team, in, out, counts[k], CXL_COLL_INT64,
                               CXL_COLL_SUM) != CXL_COLL_OK) {
            fprintf(stderr, "rank %d round %d count %zu: %s\n", rank, round,
                    counts[k], cxl_coll_last_error());
            bad = 1;
            break;
        }
        for (i = 0; i < counts[k]; ++i) {
            want = (int64_t)size * (size + 1) / 2 * 1000003 +
                   (int64_t)size * ((int64_t)round * 7919 + (int64_t)i);
            if (out[i] != want) {
                fprintf(stderr, "rank %d round %d count %zu: element %zu "
                        "%lld, expected %lld\n", rank, round, counts[k], i,
                        (long long)out[i], (long long)want);
                bad = 1;
                break;
            }
        }
    }
    free(in);
    free(out);
    return bad;
}

static int rank_reuse(cxl_th_rank_t *r)
{
    const char *spec = r->arg;
    cxl_coll_team_t *keep, *team;
    pool_state_t ps;
    int round;

    if (cxl_th_team(r, NULL, &keep) != CXL_COLL_OK) {
        FAILF("rank %d: the kept team: %s\n", r->rank, cxl_coll_last_error());
    }
    for (round = 0; round < REUSE_ROUNDS; ++round) {
        if (cxl_th_team(r, NULL, &team) != CXL_COLL_OK) {
            FAILF("rank %d round %d: team_create: %s\n", r->rank, round,
                  cxl_coll_last_error());
        }
        if (reuse_allreduce(team, r->rank, r->size, round) != 0) {
            FAILF("rank %d round %d: wrong allreduce\n", r->rank, round);
        }
        /* the team runs on the idle partitions: no third one per rank */
        if ((round > 0) && (r->rank == 0) &&
            ((pool_state(spec, &ps) != 0) ||
             (ps.coll_extents != 2u * (unsigned)r->size))) {
            FAILF("round %d: %u team partitions in the pool while the team "
                  "runs, expected %d (it took the idle ones)\n", round,
                  ps.coll_extents, 2 * r->size);
        }
        cxl_coll_team_destroy(team);
        if (cxl_coll_barrier(keep) != CXL_COLL_OK) {
            FAILF("rank %d round %d: barrier: %s\n", r->rank, round,
                  cxl_coll_last_error());
        }
        if ((r->rank == 0) &&
            ((pool_state(spec, &ps) != 0) ||
             (ps.coll_extents != 2u * (unsigned)r->size))) {
            FAILF("round %d: %u team partitions in the pool, expected %d (a "
                  "kept team's and an idle one per rank)\n", round,
                  ps.coll_extents, 2 * r->size);
        }
        if (cxl_coll_barrier(keep) != CXL_COLL_OK) {
            FAILF("rank %d round %d: barrier: %s\n", r->rank, round,
                  cxl_coll_last_error());
        }
    }
    cxl_coll_team_destroy(keep);
    return 0;
}

/* check --repair as the dead rank's host (sw) or any process (hw). */
static int pool_repair(const char *spec, int host)
{
    cxlpool_check_report_t rep;
    cxlpool_params_t params;
    cxlpool_t *pool;

    cxlpool_params_init(&params);
    params.path       = spec;
    params.flags      = CXLPOOL_NO_HEARTBEAT;
    params.host_index = host;
    if (cxlpool_open(&params, &pool) != CXLPOOL_OK) {
        fprintf(stderr, "open %s: %s\n", spec, cxlpool_last_error());
        return -1;
    }
    memset(&rep, 0, sizeof(rep));
    cxlpool_check(pool, 1, &rep, NULL, NULL);
    cxlpool_close(pool);
    return 0;
}

static void kill_test(const char *spec, int sw, const char *mode)
{
    int status[3], failed, i, survivors_ok = 1;
    pool_state_t before, after;

    failed = cxl_th_run(3, spec, sw, rank_kill, NULL, 120, status);
    for (i = 0; i < 2; ++i) {
        survivors_ok &= WIFEXITED(status[i]) && (WEXITSTATUS(status[i]) == 0);
    }
    cxl_th_check(survivors_ok && (failed == 1) && WIFSIGNALED(status[2]) &&
                 (WTERMSIG(status[2]) == SIGKILL), "%s kill -9 of rank 2 "
                 "mid-allgather: ranks 0 and 1 get PEER_DEAD", mode);
    if (pool_state(spec, &before) != 0) {
        cxl_th_check(0, "%s pool state after the kill", mode);
        return;
    }
    cxl_th_check((before.dead_extents >= 1) && (before.coll_extents == 1),
                 "%s check sees the dead rank's partition (%u dead extents, "
                 "%u team extents left)", mode, before.dead_extents,
                 before.coll_extents);
    pool_repair(spec, sw ? 2 : -1);
    if (pool_state(spec, &after) != 0) {
        cxl_th_check(0, "%s pool state after the repair", mode);
        return;
    }
    cxl_th_check((after.dead_extents == 0) && (after.coll_extents == 0),
                 "%s check --repair reclaims it (%u dead, %u team extents "
                 "left)", mode, after.dead_extents, after.coll_extents);
}

int main(int argc, char **argv)
{
    static const int sizes[] = {1, 2, 3, 5};
    int status[CXL_TH_MAX_RANKS], failed, i, saw;
    pool_state_t ps = {0}; /* printed even where pool_state() fails */
    size_t k;

    setvbuf(stdout, NULL, _IOLBF, 0);
    /* small regions and chunks: many rounds and chunks at test sizes */
    setenv("CXL_COLL_REGION_SIZE", "256k", 0);
    setenv("CXL_COLL_CHUNK_SIZE", "8k", 0);
    setenv("CXL_COLL_ONESHOT_MAX", "4k", 0);
    unsetenv("CXL_COLL_TEST_SKIP_WB");
    unsetenv("CXL_COLL_POOL");

    if ((cxl_th_pool_create("hw", 0, 256ull << 20, g_hw_path,
                            sizeof(g_hw_path), g_hw_spec,
                            sizeof(g_hw_spec)) != 0) ||
        (cxl_th_pool_create("hw2", 0, 64ull << 20, g_hw2_path,
                            sizeof(g_hw2_path), g_hw2_spec,
                            sizeof(g_hw2_spec)) != 0) ||
        (cxl_th_pool_create("sw", 1, 256ull << 20, g_sw_path,
                            sizeof(g_sw_path), g_sw_spec,
                            sizeof(g_sw_spec)) != 0)) {
        cxl_th_check(0, "create the test pools");
        return cxl_th_summary("coll-basic");
    }

    if (want("create", argc, argv)) {
        for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); ++k) {
            failed = cxl_th_run(sizes[k], g_hw_spec, 0, rank_create, NULL, 60,
                                NULL);
            cxl_th_check(failed == 0, "team create + barrier + destroy, %d "
                         "rank(s)", sizes[k]);
        }
        cxl_th_check((pool_state(g_hw_spec, &ps) == 0) &&
                     (ps.coll_extents == 0), "no team partition left after "
                     "destroy (%u)", ps.coll_extents);
    }
    if (want("create-nb", argc, argv)) {
        for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); ++k) {
            failed = cxl_th_run(sizes[k], g_hw_spec, 0, rank_create_nb, NULL,
                                60, NULL);
            cxl_th_check(failed == 0, "team create as a request (start is "
                         "local, test INPROGRESS until the peers start) + "
                         "allreduce + destroy, %d rank(s)", sizes[k]);
        }
        failed = cxl_th_run(3, g_hw_spec, 0, rank_create_nb, g_hw2_spec, 60,
                            NULL);
        cxl_th_check(failed == 0, "team create as a request, the last of 3 "
                     "ranks on another pool: NOT_SAME_POOL on every rank");
        failed = cxl_th_run(1, g_hw_spec, 0, rank_create_nb_inval, NULL, 60,
                            NULL);
        cxl_th_check(failed == 0, "oob_iallgather without oob_test: "
                     "CXL_COLL_ERR_INVAL, no request");
        cxl_th_check((pool_state(g_hw_spec, &ps) == 0) &&
                     (ps.coll_extents == 0), "no team partition left after "
                     "the requests (%u)", ps.coll_extents);
    }
    if (want("reuse", argc, argv)) {
        failed = cxl_th_run(3, g_hw_spec, 0, rank_reuse, g_hw_spec, 60, NULL);
        cxl_th_check(failed == 0, "%d teams one after another, each on the "
                     "partitions the one before left idle (3 ranks, a team "
                     "kept alive): allreduces of every publication kind "
                     "right, two partitions per rank in the pool",
                     REUSE_ROUNDS);
        failed = cxl_th_run(2, g_sw_spec, 1, rank_reuse, g_sw_spec, 60, NULL);
        cxl_th_check(failed == 0, "the same in sw mode (2 ranks, each an "
                     "emulated host)");
        cxl_th_check((pool_state(g_hw_spec, &ps) == 0) &&
                     (ps.coll_extents == 0), "no team partition left once "
                     "the process's last team on the pool ended (%u)",
                     ps.coll_extents);
    }
    if (want("teams", argc, argv)) {
        failed = cxl_th_run(2, g_hw_spec, 0, rank_teams, NULL, 60, NULL);
        cxl_th_check(failed == 0, "three teams of one process share one pool "
                     "attachment");
    }
    if (want("alias", argc, argv)) {
        failed = cxl_th_run(2, g_hw_spec, 0, rank_alias, NULL, 60, NULL);
        cxl_th_check(failed == 0, "buffers in another mapping of the pool "
                     "(the transport's) are read in place");
    }
    if (want("alg", argc, argv)) {
        for (k = 2; k <= 3; ++k) {
            failed = cxl_th_run((int)k, g_hw_spec, 0, rank_alg, NULL, 60,
                                NULL);
            cxl_th_check(failed == 0, "allreduce in rounds on %d ranks: %s, "
                         "results right", (int)k,
                         (k == 2) ? "one-shot" : "two-shot");
        }
    }
    if (want("kinds", argc, argv)) {
        failed = cxl_th_run(2, g_hw_spec, 0, rank_kinds, NULL, 60, NULL);
        cxl_th_check(failed == 0, "bcast of 80 B, 2000 B and 20000 B: in "
                     "flagged lines, the small slot, a data slot (log), "
                     "results right");
    }
    if (want("pmem", argc, argv)) {
        failed = cxl_th_run(2, g_hw_spec, 0, rank_pmem, NULL, 60, NULL);
        cxl_th_check(failed == 0, "cxl_coll_pool_mem_alloc() memory (before "
                     "any team) is read in place; misuse is refused");
    }
    if (want("same-pool", argc, argv)) {
        failed = cxl_th_run(2, g_hw_spec, 0, rank_same_pool, NULL, 60, NULL);
        cxl_th_check(failed == 0, "two pools: every rank fails with "
                     "NOT_SAME_POOL, no hang");
    }
    if (want("coll", argc, argv)) {
        for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); ++k) {
            failed = cxl_th_run(sizes[k], g_hw_spec, 0, rank_coll, NULL, 300,
                                NULL);
            cxl_th_check(failed == 0, "hw: every collective, counts 0..70001, "
                         "every root, in place, %d rank(s)", sizes[k]);
        }
        failed = cxl_th_run(3, g_hw_spec, 0, rank_types, NULL, 60, NULL);
        cxl_th_check(failed == 0, "hw: float32 and int8 allreduce equal "
                     "rank-order arithmetic bitwise, 3 ranks");
    }
    if (want("b2b", argc, argv)) {
        failed = cxl_th_run(3, g_hw_spec, 0, rank_b2b, NULL, 300, NULL);
        cxl_th_check(failed == 0, "hw: 3000 back-to-back collectives with "
                     "changing data, 3 ranks");
        /* 8 ranks on however few cores: the waits yield */
        failed = cxl_th_run(8, g_hw_spec, 0, rank_b2b, NULL, 300, NULL);
        cxl_th_check(failed == 0, "hw: 3000 back-to-back collectives, 8 ranks");
    }
    if (want("ahead", argc, argv)) {
        failed = cxl_th_run(3, g_hw_spec, 0, rank_ahead, NULL, 120, NULL);
        cxl_th_check(failed == 0, "hw: a root running ahead of late readers "
                     "(inline and slot bcasts mixed) never overwrites what "
                     "they still read");
        failed = cxl_th_run(2, g_sw_spec, 1, rank_ahead, NULL, 120, NULL);
        cxl_th_check(failed == 0, "sw: a root running ahead of late readers");
    }
    if (want("nb", argc, argv)) {
        failed = cxl_th_run(3, g_hw_spec, 0, rank_nb, NULL, 60, NULL);
        cxl_th_check(failed == 0, "hw: 4 outstanding requests, BUSY beyond, "
                     "completed in order by testing the last");
    }
    if (want("bad", argc, argv)) {
        failed = cxl_th_run(2, g_hw_spec, 0, rank_bad, NULL, 60, NULL);
        cxl_th_check(failed == 0, "bad input: clear errors, the team still "
                     "works");
        failed = cxl_th_run(2, g_hw_spec, 0, rank_timeout, NULL, 60, NULL);
        cxl_th_check(failed == 0, "CXL_COLL_TIMEOUT: TIMEOUT on the waiting"
                     " rank, PEER_DEAD (gave up) on the late one");
        failed = cxl_th_run(2, g_hw_spec, 0, rank_badcfg, NULL, 60, NULL);
        cxl_th_check(failed == 0, "a bad CXL_COLL_CHUNK_SIZE on one rank: "
                     "INVAL on both, naming the variable and the rank");
    }
    if (want("inplace", argc, argv)) {
        failed = cxl_th_run(3, g_hw_spec, 0, rank_inplace, NULL, 60, NULL);
        inplace_logs(3, failed != 0);
        cxl_th_check(failed == 0, "hw: pool-resident inputs read in place");
    }
    if (want("sw", argc, argv)) {
        failed = cxl_th_run(3, g_sw_spec, 1, rank_coll, NULL, 300, NULL);
        cxl_th_check(failed == 0, "sw (emulate-nc, 3 emulated hosts): every "
                     "collective, every root, in place");
        failed = cxl_th_run(2, g_sw_spec, 1, rank_b2b, NULL, 300, NULL);
        cxl_th_check(failed == 0, "sw: 3000 back-to-back collectives, 2 ranks");
        failed = cxl_th_run(3, g_sw_spec, 1, rank_inplace, NULL, 120, NULL);
        inplace_logs(3, failed != 0);
        cxl_th_check(failed == 0, "sw: pool-resident inputs read in place");
        failed = cxl_th_run(5, g_sw_spec, 1, rank_types, NULL, 120, NULL);
        cxl_th_check(failed == 0, "sw: float32/int8 allreduce, 5 ranks");
    }
    if (want("skipwb", argc, argv)) {
        failed = cxl_th_run(2, g_sw_spec, 1, rank_skipwb, NULL, 120, status);
        for (saw = 0, i = 0; i < 2; ++i) {
            saw += WIFEXITED(status[i]) && (WEXITSTATUS(status[i]) == 3);
        }
        cxl_th_check(saw >= 1, "sw: CXL_COLL_TEST_SKIP_WB=y makes the "
                     "allgather check fail (%d of 2 ranks saw stale data)",
                     saw);
    }
    if (want("kill", argc, argv)) {
        {
            int st3[3], failed3;

            failed3 = cxl_th_run(3, g_hw_spec, 0, rank_dead_after_publish,
                                 NULL, 60, st3);
            cxl_th_check((failed3 == 1) && WIFEXITED(st3[0]) &&
                         (WEXITSTATUS(st3[0]) == 0) && WIFEXITED(st3[1]) &&
                         (WEXITSTATUS(st3[1]) == 0), "a rank that died after "
                         "publishing its block is not missed by that gather");
            pool_repair(g_hw_spec, -1);
        }
        kill_test(g_hw_spec, 0, "hw:");
        kill_test(g_sw_spec, 1, "sw:");
    }

    cxl_th_pool_destroy(g_hw_path, 0);
    cxl_th_pool_destroy(g_hw2_path, 0);
    cxl_th_pool_destroy(g_sw_path, 1);
    return cxl_th_summary("coll-basic");
}
