/*
 * Test harness of the libcxl_coll process tests (see the header).  The
 * out-of-band allgather uses atomics on an anonymous shared mapping: it is
 * the test's own bootstrap on one machine, not pool memory.
 */
#include "coll_test_harness.h"

#include <ucx_cxl/cxlpool.h>

#include <errno.h>
#include <glob.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CXL_TH_OOB_BYTES (64 * 1024)

struct cxl_th {
    int      size;
    uint64_t arrived;                      /* barrier counter */
    pid_t    pids[CXL_TH_MAX_RANKS];
    uint8_t  data[CXL_TH_OOB_BYTES];
    /* the non-blocking exchange: exchange g uses slot g % 2, done once
     * nb_in[g % 2] reaches (g / 2 + 1) * size.  A rank starts g + 2 only
     * after g + 1 ended, which needs every rank to have started g + 1,
     * after reading g: a slot is never written while read. */
    uint64_t nb_in[2];
    uint8_t  nb_data[2][CXL_TH_OOB_BYTES];
    uint64_t user[4];
};

static cxl_th_t *cxl_th_shared;
static unsigned  cxl_th_pass, cxl_th_fail;

void cxl_th_check(int ok, const char *fmt, ...)
{
    va_list ap;

    printf("%s %u - ", ok ? "ok" : "not ok", cxl_th_pass + cxl_th_fail + 1);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    if (ok) {
        cxl_th_pass++;
    } else {
        cxl_th_fail++;
    }
}

int cxl_th_summary(const char *name)
{
    printf("%s: %u passed, %u failed\n", name, cxl_th_pass, cxl_th_fail);
    return (cxl_th_fail == 0) ? 0 : 1;
}

static uint64_t cxl_th_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Barrier number gen of all ranks; fails if a peer is gone or after 60 s. */
static int cxl_th_barrier(cxl_th_t *th, uint64_t gen)
{
    uint64_t start = cxl_th_now_ms(), target = gen * th->size;
    unsigned spins = 0;
    int i;

    while (__atomic_load_n(&th->arrived, __ATOMIC_ACQUIRE) < target) {
        if (++spins < 100) {
            continue;
        }
        sched_yield();
        if ((spins % 1024) == 0) {
            for (i = 0; i < th->size; ++i) {
                if ((kill(th->pids[i], 0) != 0) && (errno == ESRCH)) {
                    return -1;
                }
            }
            if (cxl_th_now_ms() - start > 60000) {
                return -1;
            }
        }
    }
    return 0;
}

static __thread uint64_t cxl_th_gen; /* per process: barriers passed */

int cxl_th_oob_allgather(void *arg, const void *sbuf, void *rbuf, size_t len)
{
    cxl_th_rank_t *r = arg;
    cxl_th_t *th     = r->th;

    if (len * th->size > CXL_TH_OOB_BYTES) {
        return -1;
    }
    /* no one still reads the previous exchange once all arrived here */
    __atomic_fetch_add(&th->arrived, 1, __ATOMIC_ACQ_REL);
    if (cxl_th_barrier(th, ++cxl_th_gen) != 0) {
        return -1;
    }
    memcpy(th->data + r->rank * len, sbuf, len);
    __atomic_fetch_add(&th->arrived, 1, __ATOMIC_ACQ_REL);
    if (cxl_th_barrier(th, ++cxl_th_gen) != 0) {
        return -1;
    }
    memcpy(rbuf, th->data, len * th->size);
    return 0;
}

static __thread uint64_t cxl_th_nb_gen; /* per process: exchanges started */

typedef struct {
    uint64_t gen;
    void    *rbuf;
    size_t   len;
} cxl_th_nb_req_t;

int cxl_th_oob_iallgather(void *arg, const void *sbuf, void *rbuf, size_t len,
                          void **req)
{
    cxl_th_rank_t *r = arg;
    cxl_th_t *th     = r->th;
    cxl_th_nb_req_t *q;
    uint64_t gen = cxl_th_nb_gen;

    if ((len * th->size > CXL_TH_OOB_BYTES) ||
        ((q = malloc(sizeof(*q))) == NULL)) {
        return -1;
    }
    memcpy(th->nb_data[gen % 2] + r->rank * len, sbuf, len);
    __atomic_fetch_add(&th->nb_in[gen % 2], 1, __ATOMIC_ACQ_REL);
    q->gen  = gen;
    q->rbuf = rbuf;
    q->len  = len;
    ++cxl_th_nb_gen;
    *req = q;
    return 0;
}

int cxl_th_oob_test(void *arg, void *req)
{
    cxl_th_rank_t *r   = arg;
    cxl_th_t *th       = r->th;
    cxl_th_nb_req_t *q = req;
    uint64_t want      = (q->gen / 2 + 1) * (uint64_t)th->size;

    if (__atomic_load_n(&th->nb_in[q->gen % 2], __ATOMIC_ACQUIRE) < want) {
        return 0;
    }
    memcpy(q->rbuf, th->nb_data[q->gen % 2], q->len * th->size);
    free(q);
    return 1;
}

uint64_t *cxl_th_user(cxl_th_rank_t *r)
{
    return r->th->user;
}

cxl_coll_status_t cxl_th_team(cxl_th_rank_t *r, const char *pool_override,
                              cxl_coll_team_t **team)
{
    cxl_coll_team_params_t params;

    cxl_coll_team_params_init(&params);
    params.rank          = r->rank;
    params.size          = r->size;
    params.oob_allgather = cxl_th_oob_allgather;
    params.oob_arg       = r;
    params.pool_path     = pool_override ? pool_override : r->pool;
    return cxl_coll_team_create(&params, team);
}

pid_t cxl_th_pid(int rank)
{
    return cxl_th_shared ? cxl_th_shared->pids[rank] : -1;
}

int cxl_th_run(int size, const char *pool, int sw, cxl_th_fn_t fn, void *arg,
               unsigned watchdog_s, int *status)
{
    cxl_th_rank_t r;
    int failed = 0, left, i, st;
    uint64_t start;
    char host[16];
    pid_t pid;

    if ((size < 1) || (size > CXL_TH_MAX_RANKS)) {
        return size;
    }
    if (cxl_th_shared == NULL) {
        cxl_th_shared = mmap(NULL, sizeof(cxl_th_t), PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (cxl_th_shared == MAP_FAILED) {
            cxl_th_shared = NULL;
            return size;
        }
    }
    memset(cxl_th_shared, 0, sizeof(*cxl_th_shared));
    cxl_th_shared->size = size;
    fflush(stdout);
    fflush(stderr);
    for (i = 0; i < size; ++i) {
        cxl_th_shared->pids[i] = getpid(); /* alive until the fork below */
    }
    for (i = 0; i < size; ++i) {
        pid = fork();
        if (pid == 0) {
            if (sw) {
                snprintf(host, sizeof(host), "%d", i / sw);
                setenv("UCX_CXL_HOST_INDEX", host, 1);
            }
            cxl_th_gen = 0;
            r.th   = cxl_th_shared;
            r.rank = i;
            r.size = size;
            r.pool = pool;
            r.arg  = arg;
            st = fn(&r);
            fflush(NULL);
            _exit(st);
        }
        cxl_th_shared->pids[i] = pid;
        if (status) {
            status[i] = -1;
        }
    }

    start = cxl_th_now_ms();
    left  = size;
    while (left > 0) {
        pid = waitpid(-1, &st, WNOHANG);
        if (pid > 0) {
            for (i = 0; i < size; ++i) {
                if (cxl_th_shared->pids[i] == pid) {
                    if (status) {
                        status[i] = st;
                    }
                    if (!WIFEXITED(st) || (WEXITSTATUS(st) != 0)) {
                        failed++;
                    }
                    left--;
                }
            }
            continue;
        }
        if (cxl_th_now_ms() - start > watchdog_s * 1000ull) {
            fprintf(stderr, "harness: watchdog (%u s): killing the ranks\n",
                    watchdog_s);
            for (i = 0; i < size; ++i) {
                kill(cxl_th_shared->pids[i], SIGKILL);
            }
            while (waitpid(-1, &st, 0) > 0) {
            }
            return size;
        }
        usleep(2000);
    }
    return failed;
}

int cxl_th_pool_create(const char *tag, int sw, size_t size, char *path,
                       size_t path_len, char *spec, size_t spec_len)
{
    cxlpool_params_t params;
    cxlpool_t *pool;

    snprintf(path, path_len, "/dev/shm/cxl-coll-test-%d-%s.pool", (int)getpid(),
             tag);
    unlink(path);
    cxlpool_params_init(&params);
    params.path      = path;
    params.size      = size;
    params.flags     = CXLPOOL_CREATE | CXLPOOL_EXCL | CXLPOOL_NO_ATTACH |
                       CXLPOOL_NO_HEARTBEAT;
    params.coherence = sw ? CXL_COH_SW : CXL_COH_HW;
    params.nr_hosts  = sw ? 8 : 0;
    if (cxlpool_open(&params, &pool) != CXLPOOL_OK) {
        fprintf(stderr, "harness: pool %s: %s\n", path, cxlpool_last_error());
        return -1;
    }
    cxlpool_close(pool);
    snprintf(spec, spec_len, "%s%s", sw ? CXLPOOL_EMULATE_NC_PREFIX : "", path);
    return 0;
}

void cxl_th_pool_destroy(const char *path, int sw)
{
    char pattern[300];
    glob_t g;
    size_t i;

    cxlpool_destroy(path, 1);
    unlink(path);
    if (sw) {
        snprintf(pattern, sizeof(pattern), "%s.host*", path);
        if (glob(pattern, 0, NULL, &g) == 0) {
            for (i = 0; i < g.gl_pathc; ++i) {
                unlink(g.gl_pathv[i]);
            }
            globfree(&g);
        }
    }
}
