/*
 * Large copies into a loan, split with a helper thread.
 *
 * One core copies about 10 GB/s here and two about 18 (16 MiB, memcpy):
 * a loan's copy is the whole of the sender's work, while the receiver
 * waits, so a 16 MiB put spent 1.5 ms of its 2.7 in one memcpy.  Copies of
 * CXL_COMM_COPY_SPLIT bytes and more are cut into CHUNK pieces that the
 * caller and one helper thread take in turn (an atomic counter), so the
 * caller never waits for a helper that is not running: whatever the
 * helper did not take, the caller copies.  The extent is checked again
 * before every chunk (a receiver that failed the loan frees the extent).
 *
 * CXL_COMM_COPY_THREADS: 2 (default) the caller and one helper, 1 the
 * caller alone.  The helper is started at the first large copy and sleeps
 * on a condition variable between copies.
 */
#include "comm_int.h"

#include <ucs/sys/math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CXL_COMM_COPY_CHUNK  (1ul << 20)
#define CXL_COMM_COPY_SPLIT  (4ul << 20)

typedef struct {
    cxl_comm_copy_fn_t fn;          /* copies one chunk; 0 or an error */
    void              *arg;
    size_t             len;
    unsigned           nchunks;
    unsigned           next;        /* the next chunk to take (atomic) */
    int                failed;      /* a chunk failed: the others stop */
    int                helper_in;   /* the helper may still touch this */
} cxl_comm_copy_job_t;

static struct {
    pthread_mutex_t      lock;
    pthread_cond_t       cond;
    cxl_comm_copy_job_t *job;       /* posted, not taken yet */
    pid_t                pid;       /* of the process the helper runs in */
    int                  threads;   /* 0: not read yet */
} cxl_comm_copier = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                     NULL, 0, 0};

static void cxl_comm_copy_chunks(cxl_comm_copy_job_t *job)
{
    unsigned i;
    size_t off;

    while (!__atomic_load_n(&job->failed, __ATOMIC_RELAXED)) {
        i = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED);
        if (i >= job->nchunks) {
            break;
        }
        off = (size_t)i * CXL_COMM_COPY_CHUNK;
        if (job->fn(job->arg, off, ucs_min(CXL_COMM_COPY_CHUNK,
                                           job->len - off)) != 0) {
            __atomic_store_n(&job->failed, 1, __ATOMIC_RELAXED);
        }
    }
}

static void *cxl_comm_copy_helper(void *unused)
{
    cxl_comm_copy_job_t *job;

    (void)unused;
    for (;;) {
        pthread_mutex_lock(&cxl_comm_copier.lock);
        while (cxl_comm_copier.job == NULL) {
            pthread_cond_wait(&cxl_comm_copier.cond, &cxl_comm_copier.lock);
        }
        job                 = cxl_comm_copier.job;
        cxl_comm_copier.job = NULL;
        job->helper_in      = 1;    /* under the lock: the caller sees it */
        pthread_mutex_unlock(&cxl_comm_copier.lock);

        cxl_comm_copy_chunks(job);
        /* the last touch of the job (it lives on the caller's stack); the
         * release orders this thread's copies before the caller's return */
        __atomic_store_n(&job->helper_in, 0, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* Whether a helper runs in this process (started on first use). */
static int cxl_comm_copy_helper_ready(void)
{
    pthread_attr_t attr;
    pthread_t th;
    int ok;

    if (cxl_comm_copier.pid == getpid()) {
        return 1;
    }
    if (cxl_comm_copier.threads == 0) {
        /* (a bad setting was refused when the pool was opened) */
        cxl_comm_copier.threads = ucs_max(cxl_comm_copy_threads(), 1);
    }
    if (cxl_comm_copier.threads < 2) {
        return 0;
    }
    /* (a forked child has no helper: its parent's thread is not copied) */
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    ok = (pthread_create(&th, &attr, cxl_comm_copy_helper, NULL) == 0);
    pthread_attr_destroy(&attr);
    if (!ok) {
        cxl_comm_copier.threads = 1;    /* copies stay correct, one core */
        return 0;
    }
    cxl_comm_copier.pid = getpid();
    return 1;
}

int cxl_comm_copy_threads(void)
{
    const char *env = getenv("CXL_COMM_COPY_THREADS");

    if ((env != NULL) && strcmp(env, "1") && strcmp(env, "2")) {
        return cxl_comm_error(UCS_ERR_INVALID_PARAM, "CXL_COMM_COPY_THREADS=%s: "
                              "1 (the caller alone) or 2 (and a helper "
                              "thread)", env);
    }
    return ((env != NULL) && !strcmp(env, "1")) ? 1 : 2;
}

int cxl_comm_copy_split(size_t len, cxl_comm_copy_fn_t fn, void *arg)
{
    cxl_comm_copy_job_t job;
    int posted = 0;

    memset(&job, 0, sizeof(job));
    job.fn      = fn;
    job.arg     = arg;
    job.len     = len;
    job.nchunks = (len + CXL_COMM_COPY_CHUNK - 1) / CXL_COMM_COPY_CHUNK;

    pthread_mutex_lock(&cxl_comm_copier.lock);
    if ((len >= CXL_COMM_COPY_SPLIT) && (cxl_comm_copier.job == NULL) &&
        cxl_comm_copy_helper_ready()) {
        cxl_comm_copier.job = &job;     /* (another caller's: copy alone) */
        pthread_cond_signal(&cxl_comm_copier.cond);
        posted = 1;
    }
    pthread_mutex_unlock(&cxl_comm_copier.lock);

    cxl_comm_copy_chunks(&job);

    if (posted) {
        pthread_mutex_lock(&cxl_comm_copier.lock);
        if (cxl_comm_copier.job == &job) {
            cxl_comm_copier.job = NULL; /* the helper never took it */
        }
        pthread_mutex_unlock(&cxl_comm_copier.lock);
        /* it took it: at most one chunk is left in its hands */
        while (__atomic_load_n(&job.helper_in, __ATOMIC_ACQUIRE)) {
            sched_yield();
        }
    }
    return job.failed ? UCS_ERR_INVALID_ADDR : CXL_COMM_OK;
}
