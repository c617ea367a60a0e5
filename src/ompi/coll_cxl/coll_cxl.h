/*
 * coll/cxl: an Open MPI (4.1, coll API 2.0.0, module 2.3.0) collective
 * component that runs barrier, bcast, reduce, allreduce, gather, scatter,
 * allgather, reduce_scatter_block and alltoall, blocking and non-blocking
 * (MPI_Ibarrier...), through libcxl_coll (<ucx_cxl/coll.h>) on
 * communicators whose ranks all map one CXL pool.
 *
 * Each module keeps the functions of the module it replaces ("prev") and
 * hands them every call it does not take.  A call takes the library path
 * or the fallback on every rank alike: the decision depends only on what
 * MPI requires to be the same on all ranks (datatype and op of the
 * reductions, the byte count of a data movement), never on a rank's own
 * buffer layout; a rank whose datatype is not contiguous packs and unpacks
 * locally instead.
 */
#ifndef MCA_COLL_CXL_H
#define MCA_COLL_CXL_H

#include "ompi_config.h"

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/coll.h"
#include "ompi/request/request.h"
#include "opal/threads/mutex.h"
#include "ompi/datatype/ompi_datatype.h"

#include <ucx_cxl/coll.h>

BEGIN_C_DECLS

/* Collectives the component can take (bits of mca_coll_cxl_component.colls) */
typedef enum {
    COLL_CXL_BARRIER = 0,
    COLL_CXL_BCAST,
    COLL_CXL_REDUCE,
    COLL_CXL_ALLREDUCE,
    COLL_CXL_GATHER,
    COLL_CXL_SCATTER,
    COLL_CXL_ALLGATHER,
    COLL_CXL_REDUCE_SCATTER_BLOCK,
    COLL_CXL_ALLTOALL,
    COLL_CXL_LAST
} mca_coll_cxl_coll_t;

typedef struct {
    mca_coll_base_component_2_0_0_t super;
    int          priority;
    bool         enable;
    int          verbose;
    int          output;          /* opal_output stream of coll_cxl_verbose */
    int          min_ranks;
    char        *collectives;     /* names, comma separated, or "all" */
    unsigned     colls;           /* parsed: bit per mca_coll_cxl_coll_t */
    char        *pool;            /* "" : the library's choice */
    size_t       region_size;     /* 0 : the library's configuration */
    int          progress_interval;
    int          spin_count;
    bool         nonblocking;     /* take MPI_Ibarrier... too */
    bool         nb_team;         /* a non-blocking call makes the team */
    bool         cid_prev;        /* context-id shaped calls: previous */
    /* MPI_T performance variables (counters of this process) */
    unsigned long long n_teams;
    unsigned long long n_calls;
    unsigned long long n_nb_calls;
    unsigned long long n_nb_teams;
    unsigned long long n_fallbacks;
    unsigned long long n_errors;
    /* non-blocking calls under way (coll_cxl_nb.c) */
    opal_mutex_t nb_lock;
    struct mca_coll_cxl_request *nb_head, **nb_tail;
    unsigned     nb_active;       /* requests on the list */
    unsigned     nb_pass;         /* progress passes (coll_cxl_nb.c) */
    int          nb_busy;         /* a progress pass is under way */
    int          nb_registered;   /* with opal_progress */
    /* calls held while their team is made (coll_cxl_hold.c) */
    opal_mutex_t hold_lock;
    struct mca_coll_cxl_held *hold_head, **hold_tail;
    unsigned     hold_active;     /* held calls not ended */
    unsigned     hold_pass;
    int          hold_busy;
    int          hold_registered;
} mca_coll_cxl_component_t;

OMPI_MODULE_DECLSPEC extern mca_coll_cxl_component_t mca_coll_cxl_component;

/* The previous module's blocking functions, saved at enable time */
typedef struct {
    mca_coll_base_module_barrier_fn_t              barrier;
    mca_coll_base_module_t                        *barrier_module;
    mca_coll_base_module_bcast_fn_t                bcast;
    mca_coll_base_module_t                        *bcast_module;
    mca_coll_base_module_reduce_fn_t               reduce;
    mca_coll_base_module_t                        *reduce_module;
    mca_coll_base_module_allreduce_fn_t            allreduce;
    mca_coll_base_module_t                        *allreduce_module;
    mca_coll_base_module_gather_fn_t               gather;
    mca_coll_base_module_t                        *gather_module;
    mca_coll_base_module_scatter_fn_t              scatter;
    mca_coll_base_module_t                        *scatter_module;
    mca_coll_base_module_allgather_fn_t            allgather;
    mca_coll_base_module_t                        *allgather_module;
    mca_coll_base_module_reduce_scatter_block_fn_t reduce_scatter_block;
    mca_coll_base_module_t                        *reduce_scatter_block_module;
    mca_coll_base_module_alltoall_fn_t             alltoall;
    mca_coll_base_module_t                        *alltoall_module;
    /* and the non-blocking ones */
    mca_coll_base_module_ibarrier_fn_t              ibarrier;
    mca_coll_base_module_t                         *ibarrier_module;
    mca_coll_base_module_ibcast_fn_t                ibcast;
    mca_coll_base_module_t                         *ibcast_module;
    mca_coll_base_module_ireduce_fn_t               ireduce;
    mca_coll_base_module_t                         *ireduce_module;
    mca_coll_base_module_iallreduce_fn_t            iallreduce;
    mca_coll_base_module_t                         *iallreduce_module;
    mca_coll_base_module_igather_fn_t               igather;
    mca_coll_base_module_t                         *igather_module;
    mca_coll_base_module_iscatter_fn_t              iscatter;
    mca_coll_base_module_t                         *iscatter_module;
    mca_coll_base_module_iallgather_fn_t            iallgather;
    mca_coll_base_module_t                         *iallgather_module;
    mca_coll_base_module_ireduce_scatter_block_fn_t ireduce_scatter_block;
    mca_coll_base_module_t                         *ireduce_scatter_block_module;
    mca_coll_base_module_ialltoall_fn_t             ialltoall;
    mca_coll_base_module_t                         *ialltoall_module;
} mca_coll_cxl_prev_t;

typedef struct {
    mca_coll_base_module_t super;
    ompi_communicator_t   *comm;
    /* NULL before enable and once disabled: every call falls back */
    cxl_coll_team_t       *team;
    /* the team is made at the first call, not at enable
     * (coll_cxl_module.c) */
    int                    lazy;
    mca_coll_cxl_prev_t    prev;
    /* the team is one thread's at a time: a blocking call holds it, the
     * progress of non-blocking calls tries it (no-op without threads) */
    opal_mutex_t           lock;
    unsigned               nb_unposted; /* non-blocking calls waiting for a
                                           free library request */
    unsigned               nb_count;    /* non-blocking calls under way */
    unsigned               nb_pass;     /* pass that found one in progress */
    /* a team made without waiting (coll_cxl_hold.c): the creation under
     * way, and the non-blocking calls held until it ends */
    cxl_coll_team_creq_t  *creq;
    unsigned               n_held;      /* held, not started yet */
    unsigned               hold_pass;   /* pass that left one held */
} mca_coll_cxl_module_t;

OBJ_CLASS_DECLARATION(mca_coll_cxl_module_t);

/* Make a lazy module's team (collective: the first call of a collective
 * coll/cxl takes on the communicator, on every rank); 1 once it has one. */
int mca_coll_cxl_team_lazy(mca_coll_cxl_module_t *m);
/* The same without waiting: start it (local; m->creq), then test it from
 * progress; its end accepts or declines the communicator.  0: started;
 * else the communicator was declined. */
int  mca_coll_cxl_team_start(mca_coll_cxl_module_t *m);
/* 1 once the creation ended (m->creq NULL, m->team set or declined) */
int  mca_coll_cxl_team_test(mca_coll_cxl_module_t *m);

/* Whether the library runs the module's calls: a team, made now if lazy */
static inline int mca_coll_cxl_team_ready(mca_coll_cxl_module_t *m)
{
    return OPAL_LIKELY(m->team != NULL) || mca_coll_cxl_team_lazy(m);
}

/*
 * Whether the library takes a call of the module (else counted as a
 * fallback, with why).  A blocking call (request NULL) makes a lazy
 * module's team; a non-blocking one never does: its start must not wait
 * for the other ranks (MPI), and making the team is an exchange with all
 * of them.  Ranks make their blocking collectives in one order, so all
 * see the same answer.
 */
int mca_coll_cxl_takes(mca_coll_cxl_module_t *m, mca_coll_cxl_coll_t coll,
                       ompi_request_t **request);

/*
 * The out-of-band allgathers of a team (coll_cxl_oob.c): the blocking one
 * over the previous module's allgather, the non-blocking one over
 * point-to-point messages of a tag of its own (arg: the module).
 */
int mca_coll_cxl_oob_allgather(void *arg, const void *sbuf, void *rbuf,
                               size_t len);
int mca_coll_cxl_oob_iallgather(void *arg, const void *sbuf, void *rbuf,
                                size_t len, void **req);
int mca_coll_cxl_oob_test(void *arg, void *req);

/*
 * A non-blocking call's arguments, kept while it is held (coll_cxl_hold.c):
 * bcast: buf in rbuf, count in rcount, dtype in rdtype; the reductions:
 * count in scount (reduce_scatter_block: rcount), dtype in sdtype.
 */
typedef struct {
    mca_coll_cxl_coll_t      coll;
    const void              *sbuf;
    void                    *rbuf;
    int                      scount, rcount;
    struct ompi_datatype_t  *sdtype, *rdtype;
    struct ompi_op_t        *op;
    int                      root;
} mca_coll_cxl_call_t;

/* set while a held call is started: it passes the gate */
extern __thread int mca_coll_cxl_replaying;

/* A team being made at a non-blocking call, or calls held for it */
static inline int mca_coll_cxl_hold_pending(const mca_coll_cxl_module_t *m)
{
    return (m->creq != NULL) || (m->n_held != 0);
}

/* Whether a non-blocking call must look at holding (cheap, unlocked): its
 * team not made yet (lazy), or pending as above */
static inline int mca_coll_cxl_nb_gated(const mca_coll_cxl_module_t *m)
{
    return OPAL_UNLIKELY(m->lazy || mca_coll_cxl_hold_pending(m)) &&
           !mca_coll_cxl_replaying;
}

/* The start of a non-blocking entry point: returns if the call is held
 * (the arguments: initialisers of its mca_coll_cxl_call_t) */
#define COLL_CXL_NB_GATE(_m, _request, ...) \
    do { \
        if (mca_coll_cxl_nb_gated(_m)) { \
            mca_coll_cxl_call_t _call = {__VA_ARGS__}; \
            int _rc; \
            if (mca_coll_cxl_hold((_m), &_call, (_request), &_rc)) { \
                return _rc; \
            } \
        } \
    } while (0)

/*
 * Hold the call if its team is being made, or start making it (the first
 * non-blocking call of a lazy module, coll_cxl_nb_team): 1 with *request
 * and *rc set; 0: not held, the caller goes on.
 */
int  mca_coll_cxl_hold(mca_coll_cxl_module_t *m, const mca_coll_cxl_call_t *call,
                       ompi_request_t **request, int *rc);
/* before a blocking call: the team's creation ended, held calls started */
void mca_coll_cxl_hold_settle(mca_coll_cxl_module_t *m);
void mca_coll_cxl_hold_fini(void);

/*
 * Open MPI 4.1's MPI_I... bindings take the returned request for an
 * ompi_coll_base_nbc_request_t: for a derived datatype they retain it in
 * the four words after ompi_request_t (a callback they chain in front of
 * req_complete_cb, its data, the two objects) and release it from that
 * callback (ompi_coll_base_retain_datatypes).  A plain ompi_request_t had
 * them written over m, next and lreq (mpi_icoll_test: a crash at the first
 * vector datatype).  So the request is one of that class, laid out as
 * coll/base/coll_base_util.h has it; that header is not included because
 * through ompi/op/op.h it needs Fortran headers Debian's libopenmpi-dev
 * does not ship.
 */
OBJ_CLASS_DECLARATION(ompi_coll_base_nbc_request_t);

typedef struct {
    ompi_request_t super;
    void          *chained_cb;      /* the bindings' words: */
    void          *chained_cb_data; /*   never touched here */
    void          *retained[2];
} coll_cxl_nbc_base_t;

/*
 * What the component's two kinds of MPI request share (coll_cxl_nb.c): a
 * call of the library, and a call held while its team is made
 * (coll_cxl_hold.c).  ended and freed change under nb_lock.
 */
typedef struct {
    coll_cxl_nbc_base_t    super;
    mca_coll_cxl_module_t *m;
    unsigned char          ended;  /* complete for MPI */
    unsigned char          freed;  /* MPI_Request_free before that */
} mca_coll_cxl_req_t;

void mca_coll_cxl_req_init(mca_coll_cxl_req_t *b, mca_coll_cxl_module_t *m);
/* The end of the call (nb_lock held): completed with rc, released if the
 * program freed it already; one call fewer under way on the module */
void mca_coll_cxl_req_complete(mca_coll_cxl_req_t *b, int rc);
void mca_coll_cxl_req_release(mca_coll_cxl_req_t *b);

/* component / module */
int mca_coll_cxl_init_query(bool enable_progress_threads,
                            bool enable_mpi_threads);
mca_coll_base_module_t *
mca_coll_cxl_comm_query(struct ompi_communicator_t *comm, int *priority);
const char *mca_coll_cxl_coll_name(mca_coll_cxl_coll_t coll);

/* the level is checked first: per-call messages cost nothing when off */
#define COLL_CXL_VERBOSE(_level, ...) \
    do { \
        if (mca_coll_cxl_component.verbose >= (_level)) { \
            opal_output_verbose(_level, mca_coll_cxl_component.output, \
                                __VA_ARGS__); \
        } \
    } while (0)

/* datatypes and operations (coll_cxl_dtype.c) */
int mca_coll_cxl_reduce_dtype(const struct ompi_datatype_t *dtype,
                              cxl_coll_dtype_t *out);
int mca_coll_cxl_reduce_op(const struct ompi_op_t *op, cxl_coll_op_t *out);

/* staging of non-contiguous user buffers (coll_cxl_stage.c) */
typedef struct {
    void                  *ptr;    /* what the library reads/writes */
    void                  *tmp;    /* packed copy, or NULL: ptr is the user's */
    void                  *user;
    const struct ompi_datatype_t *dtype;
    size_t                 count;  /* elements of dtype */
    size_t                 bytes;  /* count * size of dtype */
} mca_coll_cxl_stage_t;

/* The temporary copy of a buffer that is not contiguous (packed from it
 * with pack); out of line: the contiguous case below is every call's. */
int  mca_coll_cxl_stage_tmp(mca_coll_cxl_stage_t *st, int pack);
/* The packed copy unpacked into the user's buffer (with unpack) and
 * freed. */
int  mca_coll_cxl_stage_release(mca_coll_cxl_stage_t *st, int unpack);

/*
 * st describes count elements of dtype at buf as the library reads or
 * writes them: in place from the true lower bound where the layout is
 * contiguous, else a temporary copy (packed from buf with pack).  Inline:
 * on the path of every call (the out-of-line pair cost ~60 instructions
 * per allgather, callgrind).
 */
static inline int mca_coll_cxl_stage_in(mca_coll_cxl_stage_t *st,
                                        const void *buf, size_t count,
                                        const struct ompi_datatype_t *dtype,
                                        int pack)
{
    ptrdiff_t true_lb, true_extent;
    size_t size;

    ompi_datatype_type_size(dtype, &size);
    st->user  = (void *)buf;
    st->dtype = dtype;
    st->count = count;
    st->bytes = count * size;
    st->tmp   = NULL;
    if (st->bytes == 0) {
        st->ptr = (void *)buf;
        return OMPI_SUCCESS;
    }
    /* the count only matters as one or more */
    if (ompi_datatype_is_contiguous_memory_layout(dtype, (count > 1) ? 2 : 1)) {
        ompi_datatype_get_true_extent(dtype, &true_lb, &true_extent);
        st->ptr = (char *)buf + true_lb;
        return OMPI_SUCCESS;
    }
    return mca_coll_cxl_stage_tmp(st, pack);
}

/* The call ended (unpack: successfully): st's copy, if any, unpacked and
 * released. */
static inline int mca_coll_cxl_stage_out(mca_coll_cxl_stage_t *st,
                                         int unpack)
{
    return (st->tmp == NULL) ? OMPI_SUCCESS :
           mca_coll_cxl_stage_release(st, unpack);
}

/* one collective through the library, with progress (coll_cxl_run.c) */
int  mca_coll_cxl_run(mca_coll_cxl_module_t *m, const cxl_coll_args_t *args);
/* MPI error class of a library status */
int  mca_coll_cxl_mpi_error(cxl_coll_status_t status);
const char *mca_coll_cxl_type_name(cxl_coll_type_t type);
/* An error of the library on a call of the module: reported, counted;
 * returns its MPI error class */
int  mca_coll_cxl_report(mca_coll_cxl_module_t *m, cxl_coll_type_t type,
                         cxl_coll_status_t status);

/*
 * A call the library takes, run now (request NULL: blocking) or posted as
 * a non-blocking request that completes from Open MPI's progress engine
 * (coll_cxl_nb.c).  s and r: staged buffers (NULL: none) released when
 * the call ends, r unpacked if it succeeded.
 */
int  mca_coll_cxl_exec(mca_coll_cxl_module_t *m, const cxl_coll_args_t *args,
                       mca_coll_cxl_stage_t *s, mca_coll_cxl_stage_t *r,
                       ompi_request_t **request);
/* non-blocking calls (coll_cxl_nb.c) */
int  mca_coll_cxl_nb_post(mca_coll_cxl_module_t *m,
                          const cxl_coll_args_t *args,
                          const mca_coll_cxl_stage_t *s,
                          const mca_coll_cxl_stage_t *r,
                          ompi_request_t **request);
/* before a blocking call: the module's non-blocking calls all posted to
 * the library, which keeps the order */
void mca_coll_cxl_nb_flush(mca_coll_cxl_module_t *m);
/* Open MPI's progress while cond(m), yielding the CPU after a bounded
 * spin (more ranks than cores) */
void mca_coll_cxl_progress_while(mca_coll_cxl_module_t *m,
                                 int (*cond)(const mca_coll_cxl_module_t *m));
/* before the team goes: every non-blocking call of the module ended */
void mca_coll_cxl_nb_drain(mca_coll_cxl_module_t *m);
void mca_coll_cxl_nb_fini(void);
/* the team's progress function: Open MPI's progress engine */
void mca_coll_cxl_progress(void *arg);
const char *mca_coll_cxl_error_text(cxl_coll_status_t status);
/* An error this rank found alone in a call the library took (rc): gives
 * up the team so that the peers fail instead of running out of step;
 * reported with why; returns rc */
int mca_coll_cxl_fail_local(mca_coll_cxl_module_t *m, mca_coll_cxl_coll_t coll,
                            int rc, const char *why);
void mca_coll_cxl_count_fallback(mca_coll_cxl_module_t *m,
                                 mca_coll_cxl_coll_t coll, const char *why);

/* entry points (coll_cxl_reduce.c, coll_cxl_move.c) */
int mca_coll_cxl_barrier(struct ompi_communicator_t *comm,
                         mca_coll_base_module_t *module);
int mca_coll_cxl_bcast(void *buf, int count, struct ompi_datatype_t *dtype,
                       int root, struct ompi_communicator_t *comm,
                       mca_coll_base_module_t *module);
int mca_coll_cxl_reduce(const void *sbuf, void *rbuf, int count,
                        struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                        int root, struct ompi_communicator_t *comm,
                        mca_coll_base_module_t *module);
int mca_coll_cxl_allreduce(const void *sbuf, void *rbuf, int count,
                           struct ompi_datatype_t *dtype,
                           struct ompi_op_t *op,
                           struct ompi_communicator_t *comm,
                           mca_coll_base_module_t *module);
int mca_coll_cxl_reduce_scatter_block(const void *sbuf, void *rbuf,
                                      int rcount,
                                      struct ompi_datatype_t *dtype,
                                      struct ompi_op_t *op,
                                      struct ompi_communicator_t *comm,
                                      mca_coll_base_module_t *module);
int mca_coll_cxl_gather(const void *sbuf, int scount,
                        struct ompi_datatype_t *sdtype, void *rbuf,
                        int rcount, struct ompi_datatype_t *rdtype, int root,
                        struct ompi_communicator_t *comm,
                        mca_coll_base_module_t *module);
int mca_coll_cxl_scatter(const void *sbuf, int scount,
                         struct ompi_datatype_t *sdtype, void *rbuf,
                         int rcount, struct ompi_datatype_t *rdtype, int root,
                         struct ompi_communicator_t *comm,
                         mca_coll_base_module_t *module);
int mca_coll_cxl_allgather(const void *sbuf, int scount,
                           struct ompi_datatype_t *sdtype, void *rbuf,
                           int rcount, struct ompi_datatype_t *rdtype,
                           struct ompi_communicator_t *comm,
                           mca_coll_base_module_t *module);
int mca_coll_cxl_alltoall(const void *sbuf, int scount,
                          struct ompi_datatype_t *sdtype, void *rbuf,
                          int rcount, struct ompi_datatype_t *rdtype,
                          struct ompi_communicator_t *comm,
                          mca_coll_base_module_t *module);

/* the non-blocking entry points */
int mca_coll_cxl_ibarrier(struct ompi_communicator_t *comm,
                          ompi_request_t **request,
                          mca_coll_base_module_t *module);
int mca_coll_cxl_ibcast(void *buf, int count, struct ompi_datatype_t *dtype,
                        int root, struct ompi_communicator_t *comm,
                        ompi_request_t **request,
                        mca_coll_base_module_t *module);
int mca_coll_cxl_ireduce(const void *sbuf, void *rbuf, int count,
                         struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                         int root, struct ompi_communicator_t *comm,
                         ompi_request_t **request,
                         mca_coll_base_module_t *module);
int mca_coll_cxl_iallreduce(const void *sbuf, void *rbuf, int count,
                            struct ompi_datatype_t *dtype,
                            struct ompi_op_t *op,
                            struct ompi_communicator_t *comm,
                            ompi_request_t **request,
                            mca_coll_base_module_t *module);
int mca_coll_cxl_ireduce_scatter_block(const void *sbuf, void *rbuf,
                                       int rcount,
                                       struct ompi_datatype_t *dtype,
                                       struct ompi_op_t *op,
                                       struct ompi_communicator_t *comm,
                                       ompi_request_t **request,
                                       mca_coll_base_module_t *module);
int mca_coll_cxl_igather(const void *sbuf, int scount,
                         struct ompi_datatype_t *sdtype, void *rbuf,
                         int rcount, struct ompi_datatype_t *rdtype, int root,
                         struct ompi_communicator_t *comm,
                         ompi_request_t **request,
                         mca_coll_base_module_t *module);
int mca_coll_cxl_iscatter(const void *sbuf, int scount,
                          struct ompi_datatype_t *sdtype, void *rbuf,
                          int rcount, struct ompi_datatype_t *rdtype, int root,
                          struct ompi_communicator_t *comm,
                          ompi_request_t **request,
                          mca_coll_base_module_t *module);
int mca_coll_cxl_iallgather(const void *sbuf, int scount,
                            struct ompi_datatype_t *sdtype, void *rbuf,
                            int rcount, struct ompi_datatype_t *rdtype,
                            struct ompi_communicator_t *comm,
                            ompi_request_t **request,
                            mca_coll_base_module_t *module);
int mca_coll_cxl_ialltoall(const void *sbuf, int scount,
                           struct ompi_datatype_t *sdtype, void *rbuf,
                           int rcount, struct ompi_datatype_t *rdtype,
                           struct ompi_communicator_t *comm,
                           ompi_request_t **request,
                           mca_coll_base_module_t *module);

END_C_DECLS

#endif
