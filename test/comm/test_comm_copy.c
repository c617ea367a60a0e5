/*
 * test_comm_copy - libcxl_comm's large copies with the helper thread
 * (src/ucp_ext/comm/comm_copy.c), in one process, no UCP: what the Dask
 * backend's pool loans do, and what make check-tsan runs under
 * ThreadSanitizer.
 *   1. cxl_comm_copy_split of 16 MiB with a chunk function that records
 *      which thread copied each chunk; the caller's first chunk waits
 *      (bounded) until another thread has copied one: every chunk copied
 *      exactly once, at least one by the helper, the bytes right
 *   2. a chunk that fails: the split says so, and returns only when the
 *      helper is done with the job
 *   3. the public path: cxl_comm_pool_lend, _write (16 MiB + 100 bytes at
 *      an odd offset: split; 3000 bytes: the caller alone), _publish,
 *      _acquire, the bytes in the pool, _reclaim
 *   4. three threads writing 8 MiB loans at once, four rounds each (one
 *      caller at a time gets the helper, the others copy alone)
 * The pool: a fresh emulated one, /dev/shm/test_comm_copy-PID.pool, named
 * by UCX_CXL_POOL.  Prints "ok N - ..." / "not ok N - ...: why" and
 * "test_comm_copy: N passed, N failed"; exit 0 only when nothing failed.
 */
#include "comm_int.h"

#include <ucx_cxl/cxlpool.h>

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TCC_CHUNK   (1ul << 20)     /* comm_copy.c's CXL_COMM_COPY_CHUNK */
#define TCC_LEN     (16ul << 20)
#define TCC_NCHUNKS (TCC_LEN / TCC_CHUNK)
#define TCC_THREADS 3
#define TCC_ROUNDS  4

static unsigned tcc_passed, tcc_failed;

static void tcc_check(int ok, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void tcc_check(int ok, const char *fmt, ...)
{
    va_list ap;

    printf("%sok %u - ", ok ? "" : "not ", tcc_passed + tcc_failed + 1);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (ok) {
        tcc_passed++;
    } else {
        tcc_failed++;
    }
}

static double tcc_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void tcc_fill(uint8_t *buf, size_t len, unsigned seed)
{
    uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
    size_t i;

    for (i = 0; i < len; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
}

/* ---- 1, 2: the split itself ---- */
typedef struct {
    uint8_t       *dst;
    const uint8_t *src;
    pthread_t      caller;
    unsigned       times[TCC_NCHUNKS];  /* copies of each chunk (atomic) */
    unsigned       by_helper;           /* chunks copied by another thread */
    unsigned       caller_waited;       /* the caller's first chunk waited */
    unsigned       fail_chunk;          /* this chunk fails; ~0u: none */
} tcc_split_t;

static int tcc_chunk(void *arg, size_t off, size_t len)
{
    tcc_split_t *t = arg;
    unsigned i     = (unsigned)(off / TCC_CHUNK);
    double until;

    if (i == t->fail_chunk) {
        return -1;
    }
    if (!pthread_equal(pthread_self(), t->caller)) {
        memcpy(t->dst + off, t->src + off, len);
        __atomic_fetch_add(&t->times[i], 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&t->by_helper, 1, __ATOMIC_RELEASE);
        return 0;
    }
    if (!__atomic_exchange_n(&t->caller_waited, 1, __ATOMIC_RELAXED)) {
        /* the caller's first chunk: let the helper take one (10 s at most,
         * a helper that never runs fails the check below) */
        until = tcc_now() + 10;
        while (!__atomic_load_n(&t->by_helper, __ATOMIC_ACQUIRE) &&
               (tcc_now() < until)) {
            sched_yield();
        }
    }
    memcpy(t->dst + off, t->src + off, len);
    __atomic_fetch_add(&t->times[i], 1, __ATOMIC_RELAXED);
    return 0;
}

static void tcc_split(uint8_t *src, uint8_t *dst)
{
    tcc_split_t t;
    unsigned i, bad = 0;
    int rc;

    memset(&t, 0, sizeof(t));
    t.dst        = dst;
    t.src        = src;
    t.caller     = pthread_self();
    t.fail_chunk = ~0u;
    tcc_fill(src, TCC_LEN, 1);
    memset(dst, 0, TCC_LEN);
    rc = cxl_comm_copy_split(TCC_LEN, tcc_chunk, &t);
    for (i = 0; i < TCC_NCHUNKS; ++i) {
        bad += (t.times[i] != 1);
    }
    tcc_check(rc == CXL_COMM_OK, "split of 16 MiB returns OK (%d)", rc);
    tcc_check(bad == 0, "every one of %lu chunks copied exactly once (%u not)",
              TCC_NCHUNKS, bad);
    tcc_check(t.by_helper > 0, "the helper thread copied %u of them",
              t.by_helper);
    tcc_check(!memcmp(src, dst, TCC_LEN), "the 16 MiB arrived intact");

    /* 2: chunk 5 fails; the helper may hold one more when the split ends */
    memset(&t, 0, sizeof(t));
    t.dst        = dst;
    t.src        = src;
    t.caller     = pthread_self();
    t.caller_waited = 1;
    t.fail_chunk = 5;
    rc = cxl_comm_copy_split(TCC_LEN, tcc_chunk, &t);
    for (i = 0, bad = 0; i < TCC_NCHUNKS; ++i) {
        bad += (t.times[i] > 1);
    }
    tcc_check(rc == UCS_ERR_INVALID_ADDR, "a failing chunk fails the split "
              "(%d), no chunk copied twice (%u)", rc, bad);
}

/* ---- 3, 4: loans ---- */
/* lend len + at, write len bytes at `at`, check them in the pool, reclaim */
static int tcc_loan(cxl_comm_pool_t *pool, const uint8_t *src, size_t len,
                    uint64_t at, char *why, size_t whylen)
{
    cxl_comm_loan_t loan;
    const uint8_t *p;
    int rc;

    rc = cxl_comm_pool_lend(pool, len + at, &loan);
    if (rc != CXL_COMM_OK) {
        snprintf(why, whylen, "lend %zu: %s", len + at, cxl_comm_last_error());
        return -1;
    }
    rc = cxl_comm_pool_write(pool, &loan, at, src, len);
    if (rc != CXL_COMM_OK) {
        snprintf(why, whylen, "write %zu at %llu: %s", len,
                 (unsigned long long)at, cxl_comm_last_error());
        cxl_comm_pool_reclaim(pool, loan.offset);
        return -1;
    }
    cxl_comm_pool_publish(pool);
    cxl_comm_pool_acquire(pool, &loan);
    p = (const uint8_t*)cxl_comm_pool_base(pool) + loan.offset + at;
    if (memcmp(p, src, len)) {
        snprintf(why, whylen, "%zu bytes at %llu of the loan differ", len,
                 (unsigned long long)at);
        cxl_comm_pool_reclaim(pool, loan.offset);
        return -1;
    }
    if (cxl_comm_pool_reclaim(pool, loan.offset) != CXL_COMM_OK) {
        snprintf(why, whylen, "reclaim: %s", cxl_comm_last_error());
        return -1;
    }
    return 0;
}

typedef struct {
    cxl_comm_pool_t *pool;
    unsigned         id;
    int              rc;
    char             why[256];
} tcc_thread_t;

static void *tcc_thread(void *arg)
{
    tcc_thread_t *t = arg;
    size_t len      = 8ul << 20;
    uint8_t *src    = malloc(len);
    unsigned r;

    t->rc = -1;
    if (src == NULL) {
        snprintf(t->why, sizeof(t->why), "out of memory");
        return NULL;
    }
    for (r = 0; r < TCC_ROUNDS; ++r) {
        tcc_fill(src, len, 100 + t->id * TCC_ROUNDS + r);
        if (tcc_loan(t->pool, src, len, 64 * r, t->why, sizeof(t->why))) {
            free(src);
            return NULL;
        }
    }
    free(src);
    t->rc = 0;
    return NULL;
}

int main(void)
{
    tcc_thread_t t[TCC_THREADS];
    pthread_t tid[TCC_THREADS];
    cxl_comm_pool_t *pool = NULL;
    cxlpool_params_t params;
    cxlpool_t *cp;
    uint8_t *src, *dst;
    char path[128], why[256];
    unsigned i, n;
    int rc;

    setvbuf(stdout, NULL, _IOLBF, 0);
    setenv("CXL_COMM_COPY_THREADS", "2", 1);
    src = malloc(TCC_LEN + 100);
    dst = malloc(TCC_LEN);
    if ((src == NULL) || (dst == NULL)) {
        tcc_check(0, "allocate the buffers");
        goto out;
    }
    tcc_split(src, dst);

    snprintf(path, sizeof(path), "/dev/shm/test_comm_copy-%d.pool", (int)getpid());
    unlink(path);
    cxlpool_params_init(&params);
    params.path  = path;
    params.size  = 256ull << 20;
    params.flags = CXLPOOL_CREATE | CXLPOOL_EXCL | CXLPOOL_NO_ATTACH;
    if (cxlpool_open(&params, &cp) != CXLPOOL_OK) {
        tcc_check(0, "create the pool %s: %s", path, cxlpool_last_error());
        goto out;
    }
    cxlpool_close(cp);
    setenv("UCX_CXL_POOL", path, 1);
    rc = cxl_comm_pool_open(&pool);
    tcc_check(rc == CXL_COMM_OK, "cxl_comm_pool_open of %s (%s)", path,
              (rc == CXL_COMM_OK) ? "ok" : cxl_comm_last_error());
    if (rc != CXL_COMM_OK) {
        goto out_pool;
    }

    /* 3 */
    tcc_fill(src, TCC_LEN + 100, 7);
    why[0] = '\0';
    tcc_check(!tcc_loan(pool, src, TCC_LEN + 100, 4097, why, sizeof(why)),
              "a loan of 16 MiB + 100 bytes written at offset 4097 (split "
              "with the helper) holds the bytes%s%s", why[0] ? ": " : "", why);
    why[0] = '\0';
    tcc_check(!tcc_loan(pool, src + 5, 3000, 3, why, sizeof(why)),
              "3000 bytes at offset 3 (the caller alone)%s%s",
              why[0] ? ": " : "", why);

    /* 4 */
    for (n = 0; n < TCC_THREADS; ++n) {
        memset(&t[n], 0, sizeof(t[n]));
        t[n].pool = pool;
        t[n].id   = n;
        if (pthread_create(&tid[n], NULL, tcc_thread, &t[n]) != 0) {
            tcc_check(0, "pthread_create");
            break;
        }
    }
    for (i = 0; i < n; ++i) {
        pthread_join(tid[i], NULL);
        tcc_check(t[i].rc == 0, "thread %u: %d loans of 8 MiB written while "
                  "%d other threads wrote theirs%s%s", i, TCC_ROUNDS,
                  TCC_THREADS - 1, t[i].why[0] ? ": " : "", t[i].why);
    }
    cxl_comm_pool_close(pool);
out_pool:
    cxlpool_destroy(path, 1);
out:
    free(src);
    free(dst);
    printf("test_comm_copy: %u passed, %u failed\n", tcc_passed, tcc_failed);
    return tcc_failed ? 1 : 0;
}
