/*
 * ucx-cxl collectives: barrier, broadcast, reduce, allreduce, gather,
 * scatter, allgather, reduce-scatter and alltoall among processes that map
 * one CXL pool.  Data and signals travel through the pool: each rank owns a
 * partition of the team's region, writes its data there once and signals
 * readiness with single-writer sequence lines; the others read.
 *
 * A team is created collectively from a caller-supplied out-of-band
 * allgather (MPI, UCP, sockets: whatever the program has), so the library
 * needs no launcher of its own.  Results are bitwise identical on every
 * rank and do not depend on timing: reductions run in rank order 0..N-1.
 * Integer arithmetic wraps as in C (two's complement, no saturation).
 *
 * Both coherence modes of the pool work: in software-coherent mode every
 * line another rank reads is written back and fenced before its signal,
 * every read of another rank's data is preceded by an invalidate, and no
 * atomic read-modify-write crosses hosts.
 *
 * Threads: a team is used by one thread at a time.
 */
#ifndef UCX_CXL_COLL_H
#define UCX_CXL_COLL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cxl_coll_team cxl_coll_team_t;
typedef struct cxl_coll_req  cxl_coll_req_t;

typedef enum {
    CXL_COLL_OK = 0,
    CXL_COLL_INPROGRESS,        /* cxl_coll_test(): not finished yet */
    CXL_COLL_ERR_INVAL,         /* bad argument (count, root, buffer, op) */
    CXL_COLL_ERR_UNSUPPORTED,   /* datatype/op combination not provided */
    CXL_COLL_ERR_NO_MEMORY,     /* no pool space or host memory */
    CXL_COLL_ERR_NOT_SAME_POOL, /* team members map different pools */
    CXL_COLL_ERR_PEER_DEAD,     /* a member's lease expired mid-collective */
    CXL_COLL_ERR_TIMEOUT,       /* CXL_COLL_TIMEOUT passed */
    CXL_COLL_ERR_OOB,           /* the out-of-band allgather failed */
    CXL_COLL_ERR_POOL,          /* the pool could not be opened or used */
    CXL_COLL_ERR_BUSY,          /* too many requests posted and not freed
                                   (posts; a blocking call has a request
                                   of its own, unless it is made from the
                                   team's progress function while another
                                   blocking call of the team waits) */
    CXL_COLL_ERR_MISMATCH,      /* the ranks' calls differ: collective,
                                   count, root, datatype or operation (an
                                   erroneous program; the team is unusable
                                   after it, as after any error) */
    CXL_COLL_ERR_LAST
} cxl_coll_status_t;

typedef enum {
    CXL_COLL_INT8 = 0,
    CXL_COLL_UINT8,
    CXL_COLL_INT16,
    CXL_COLL_UINT16,
    CXL_COLL_INT32,
    CXL_COLL_UINT32,
    CXL_COLL_INT64,
    CXL_COLL_UINT64,
    CXL_COLL_FLOAT32,
    CXL_COLL_FLOAT64,
    CXL_COLL_FLOAT16,           /* IEEE 754 binary16 */
    CXL_COLL_BFLOAT16,
    CXL_COLL_DTYPE_LAST
} cxl_coll_dtype_t;

typedef enum {
    CXL_COLL_SUM = 0,
    CXL_COLL_PROD,
    CXL_COLL_MIN,
    CXL_COLL_MAX,
    CXL_COLL_BAND,              /* bitwise ops: integer types only */
    CXL_COLL_BOR,
    CXL_COLL_BXOR,
    CXL_COLL_OP_LAST
} cxl_coll_op_t;

typedef enum {
    CXL_COLL_BARRIER = 0,
    CXL_COLL_BCAST,
    CXL_COLL_REDUCE,
    CXL_COLL_ALLREDUCE,
    CXL_COLL_GATHER,
    CXL_COLL_SCATTER,
    CXL_COLL_ALLGATHER,
    CXL_COLL_REDUCE_SCATTER,    /* block variant: count elements per rank */
    CXL_COLL_ALLTOALL,
    CXL_COLL_TYPE_LAST
} cxl_coll_type_t;

/* sbuf of the in-place forms (MPI_IN_PLACE semantics of the same call). */
#define CXL_COLL_IN_PLACE ((const void *)1)

/*
 * Out-of-band allgather used once by cxl_coll_team_create() and
 * cxl_coll_team_destroy(): every rank contributes len bytes of sbuf, rbuf
 * receives size * len bytes in rank order.  Returns 0 on success.
 */
typedef int (*cxl_coll_oob_allgather_t)(void *arg, const void *sbuf,
                                        void *rbuf, size_t len);

/*
 * The same exchange, non-blocking (cxl_coll_team_create_start): start it,
 * setting *req to a handle (returns 0 on success); oob_test(arg, req)
 * returns 0 while it runs, 1 once rbuf holds every rank's part, < 0 if it
 * failed, and releases req whenever it returns anything but 0.  sbuf and
 * rbuf stay valid until then.
 */
typedef int (*cxl_coll_oob_iallgather_t)(void *arg, const void *sbuf,
                                         void *rbuf, size_t len, void **req);
typedef int (*cxl_coll_oob_test_t)(void *arg, void *req);

typedef struct {
    int                      rank;
    int                      size;
    cxl_coll_oob_allgather_t oob_allgather;
    void                    *oob_arg;
    /* Optional (both or neither): the non-blocking exchange that
     * cxl_coll_team_create_start() uses; oob_allgather is still required
     * (cxl_coll_team_destroy). */
    cxl_coll_oob_iallgather_t oob_iallgather;
    cxl_coll_oob_test_t      oob_test;
    /* Pool to use; NULL: CXL_COLL_POOL, else the pool the cxl transport
     * attaches first (the first of UCX_CXL_POOL unless "auto", else the
     * first devdax device that holds a pool, else the per-user default). */
    const char              *pool_path;
    /* Bytes of pool memory each rank owns for the team; 0: the
     * configuration (CXL_COLL_REGION_SIZE). */
    size_t                   region_size;
    /* How blocking calls and cxl_coll_wait() wait.  progress(progress_arg)
     * runs every progress_interval polls (0: 256) while they spin, and
     * before every yield after that (NULL: never), so the caller's own
     * communication keeps moving: Open MPI's opal_progress(), for a peer
     * that sits in MPI_Wait for this rank before it joins the collective,
     * or whose one-sided operations on this rank's memory the transport
     * executes in this rank's progress.  spin: polls before every further
     * poll yields the CPU (sched_yield); < 0 (cxl_coll_team_params_init):
     * the configuration (CXL_COLL_SPIN). */
    void                   (*progress)(void *arg);
    void                    *progress_arg;
    unsigned                 progress_interval;
    int                      spin;
} cxl_coll_team_params_t;

/*
 * Arguments of one collective.  count is in elements of dtype:
 *  - bcast: count elements of buf (rbuf; sbuf unused);
 *  - reduce, allreduce: count elements in sbuf and rbuf;
 *  - gather, scatter, allgather, alltoall: count elements per rank
 *    (per pair of ranks for alltoall);
 *  - reduce_scatter: count elements per rank; sbuf holds size * count.
 * root: bcast, reduce, gather, scatter.  op: the reductions.
 * In-place forms, as in MPI: sbuf = CXL_COLL_IN_PLACE takes the input
 * from rbuf (reduce/allreduce/reduce_scatter: rbuf holds the input; for
 * reduce_scatter rbuf then holds size * count elements and the rank's
 * block ends up at its start), or from the rank's own block of rbuf
 * (gather on the root, allgather, alltoall).  Scatter: the root passes
 * rbuf = CXL_COLL_IN_PLACE and its own block stays in sbuf.  A call whose
 * sbuf is exactly what its in-place form reads (sbuf == rbuf for reduce
 * on the root, allreduce, reduce_scatter and alltoall; sbuf = the own
 * block of rbuf for allgather and gather's root; scatter's root: rbuf =
 * its own block of sbuf) runs as that form.  Any other overlap of sbuf
 * and rbuf: CXL_COLL_ERR_INVAL (MPI forbids both).
 */
typedef struct {
    cxl_coll_type_t  type;
    const void      *sbuf;
    void            *rbuf;
    size_t           count;
    cxl_coll_dtype_t dtype;
    cxl_coll_op_t    op;
    int              root;
} cxl_coll_args_t;

void        cxl_coll_team_params_init(cxl_coll_team_params_t *params);
const char *cxl_coll_strerror(cxl_coll_status_t status);
/* The message of the last error of this thread, with its detail. */
const char *cxl_coll_last_error(void);

size_t      cxl_coll_dtype_size(cxl_coll_dtype_t dtype);
const char *cxl_coll_dtype_name(cxl_coll_dtype_t dtype);
const char *cxl_coll_op_name(cxl_coll_op_t op);
const char *cxl_coll_type_name(cxl_coll_type_t type);
/* Whether op is provided for dtype (bitwise ops: integers only). */
int         cxl_coll_op_supported(cxl_coll_dtype_t dtype, cxl_coll_op_t op);

/* Collective over all ranks of params; fails on every rank alike. */
cxl_coll_status_t cxl_coll_team_create(const cxl_coll_team_params_t *params,
                                       cxl_coll_team_t **team_p);
/*
 * The same creation as a request, for callers that must not wait for the
 * other ranks now: start does the local part (pool, partition) and starts
 * the first exchange over oob_iallgather (over oob_allgather, blocking,
 * without it); then cxl_coll_team_create_test() until it returns anything
 * but CXL_COLL_INPROGRESS: CXL_COLL_OK with *team_p set, or the error
 * every rank gets alike.  The request is freed then (and only then).
 * A start that fails (bad parameters, no memory, the exchange) returns
 * the error and no request.
 */
typedef struct cxl_coll_team_creq cxl_coll_team_creq_t;
cxl_coll_status_t cxl_coll_team_create_start(const cxl_coll_team_params_t *params,
                                             cxl_coll_team_creq_t **creq_p);
cxl_coll_status_t cxl_coll_team_create_test(cxl_coll_team_creq_t *creq,
                                            cxl_coll_team_t **team_p);
/* Collective; frees the rank's pool partition once no peer reads it. */
void              cxl_coll_team_destroy(cxl_coll_team_t *team);
/*
 * Give up the team outside a collective, for an error its peers can not
 * see (a call this rank will not make, found by the caller's own checks):
 * its queued requests fail with status, its later calls fail, and peers
 * that wait for it get CXL_COLL_ERR_PEER_DEAD ("gave up the team")
 * instead of running out of step with it.  Only destroy remains.  No-op
 * on a team that failed already or with status CXL_COLL_OK.
 */
void              cxl_coll_team_abort(cxl_coll_team_t *team,
                                      cxl_coll_status_t status);
int               cxl_coll_team_rank(const cxl_coll_team_t *team);
int               cxl_coll_team_size(const cxl_coll_team_t *team);

/*
 * Non-blocking form: post, then cxl_coll_test() until it returns anything
 * but CXL_COLL_INPROGRESS (or cxl_coll_wait()), then cxl_coll_req_free().
 * Collectives of one team complete in the order they were posted; every
 * rank posts the same sequence: the same collective, count, root, and for
 * reductions datatype and op (a data movement may name another datatype
 * of the same bytes).  Where ranks do not, the ranks that see it get
 * CXL_COLL_ERR_MISMATCH: at once where a publication of the other call is
 * there to read, else within CXL_COLL_PEER_CHECK of waiting (sw mode:
 * once the other rank waits too, or destroys the team); nothing of the
 * other call's data is read.
 */
cxl_coll_status_t cxl_coll_post(cxl_coll_team_t *team,
                                const cxl_coll_args_t *args,
                                cxl_coll_req_t **req_p);
cxl_coll_status_t cxl_coll_test(cxl_coll_req_t *req);
cxl_coll_status_t cxl_coll_wait(cxl_coll_req_t *req);
void              cxl_coll_req_free(cxl_coll_req_t *req);

/* Blocking forms. */
cxl_coll_status_t cxl_coll_run(cxl_coll_team_t *team,
                               const cxl_coll_args_t *args);
cxl_coll_status_t cxl_coll_barrier(cxl_coll_team_t *team);
cxl_coll_status_t cxl_coll_bcast(cxl_coll_team_t *team, void *buf,
                                 size_t count, cxl_coll_dtype_t dtype,
                                 int root);
cxl_coll_status_t cxl_coll_reduce(cxl_coll_team_t *team, const void *sbuf,
                                  void *rbuf, size_t count,
                                  cxl_coll_dtype_t dtype, cxl_coll_op_t op,
                                  int root);
cxl_coll_status_t cxl_coll_allreduce(cxl_coll_team_t *team, const void *sbuf,
                                     void *rbuf, size_t count,
                                     cxl_coll_dtype_t dtype, cxl_coll_op_t op);
cxl_coll_status_t cxl_coll_gather(cxl_coll_team_t *team, const void *sbuf,
                                  void *rbuf, size_t count,
                                  cxl_coll_dtype_t dtype, int root);
cxl_coll_status_t cxl_coll_scatter(cxl_coll_team_t *team, const void *sbuf,
                                   void *rbuf, size_t count,
                                   cxl_coll_dtype_t dtype, int root);
cxl_coll_status_t cxl_coll_allgather(cxl_coll_team_t *team, const void *sbuf,
                                     void *rbuf, size_t count,
                                     cxl_coll_dtype_t dtype);
cxl_coll_status_t cxl_coll_reduce_scatter(cxl_coll_team_t *team,
                                          const void *sbuf, void *rbuf,
                                          size_t count, cxl_coll_dtype_t dtype,
                                          cxl_coll_op_t op);
cxl_coll_status_t cxl_coll_alltoall(cxl_coll_team_t *team, const void *sbuf,
                                    void *rbuf, size_t count,
                                    cxl_coll_dtype_t dtype);

/*
 * Pool memory for user buffers: a collective whose buffers lie in the
 * team's pool reads them in place, without the copy into the team region.
 */
void *cxl_coll_mem_alloc(cxl_coll_team_t *team, size_t length);
void  cxl_coll_mem_free(cxl_coll_team_t *team, void *ptr);

/*
 * The same without a team, for allocators that run apart from any team
 * (Open MPI's MPI_Alloc_mem through mpool/cxl): from the pool a team of
 * this process would use given the same pool_path (NULL: CXL_COLL_POOL,
 * else the transport's pool), so a team there reads the buffer in place.
 * align: 0 or a power of 2 (at least a page is used).  NULL on failure
 * (cxl_coll_last_error() says why).  Free in the process that allocated.
 */
void             *cxl_coll_pool_mem_alloc(const char *pool_path, size_t length,
                                          size_t align);
cxl_coll_status_t cxl_coll_pool_mem_free(void *ptr);

#ifdef __cplusplus
}
#endif

#endif
