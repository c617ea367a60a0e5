/*
 * Test harness for libcxl_coll process tests: fork N ranks, give them an
 * out-of-band allgather over a shared anonymous mapping, collect their exit
 * status under a watchdog, and make and remove pools (hw, or sw on the
 * emulate-nc emulator with every rank an emulated host of its own).
 * Reusable by other test programs (test/coll/).
 */
#ifndef CXL_COLL_TEST_HARNESS_H
#define CXL_COLL_TEST_HARNESS_H

#include <ucx_cxl/coll.h>

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CXL_TH_MAX_RANKS 16

typedef struct cxl_th cxl_th_t;

/* What a rank function gets. */
typedef struct {
    cxl_th_t   *th;
    int         rank;
    int         size;
    const char *pool;   /* spec to open: PATH or emulate-nc:PATH */
    void       *arg;
} cxl_th_rank_t;

typedef int (*cxl_th_fn_t)(cxl_th_rank_t *r); /* 0: pass */

/* cxl_coll_oob_allgather_t over the harness's shared mapping. */
int cxl_th_oob_allgather(void *arg, const void *sbuf, void *rbuf, size_t len);

/* The same exchange non-blocking (cxl_coll_oob_iallgather_t and
 * cxl_coll_oob_test_t), over another area of the mapping. */
int cxl_th_oob_iallgather(void *arg, const void *sbuf, void *rbuf, size_t len,
                          void **req);
int cxl_th_oob_test(void *arg, void *req);
/* 4 words every rank of the run shares (0 at its start) */
uint64_t *cxl_th_user(cxl_th_rank_t *r);

/* Team of r->size ranks on r->pool (pool_override: another path). */
cxl_coll_status_t cxl_th_team(cxl_th_rank_t *r, const char *pool_override,
                              cxl_coll_team_t **team);

/*
 * Run fn in size forked ranks on pool (sw > 0: emulate-nc spec and
 * UCX_CXL_HOST_INDEX=rank/sw, so sw ranks share each emulated host: 1,
 * each rank is a host of its own).
 * status[i] receives the wait status of rank i (may be NULL).  Returns the
 * number of ranks that did not exit with 0; on a watchdog expiry (seconds)
 * every rank is killed and counted as failed.
 */
int cxl_th_run(int size, const char *pool, int sw, cxl_th_fn_t fn, void *arg,
               unsigned watchdog_s, int *status);

/* The pid of rank i of the current run (for the parent, after fork). */
pid_t cxl_th_pid(int rank);

/*
 * Create a fresh pool file under /dev/shm (name with pid and tag; sw:
 * --coherence sw with 8 host partitions).  path receives the file; spec the
 * string ranks open.  Returns 0 on success.
 */
int  cxl_th_pool_create(const char *tag, int sw, size_t size, char *path,
                        size_t path_len, char *spec, size_t spec_len);
void cxl_th_pool_destroy(const char *path, int sw);

/* TAP-like reporting of the calling process. */
void cxl_th_check(int ok, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int  cxl_th_summary(const char *name); /* prints, returns exit status */

#endif
