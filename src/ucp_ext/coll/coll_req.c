/*
 * Requests: argument checks, post, the in-order queue of a team, test,
 * wait, free; and the blocking forms (post + wait).  Each collective is a
 * state machine (req->progress) that returns CXL_COLL_INPROGRESS where it
 * would have to wait; test() runs the queue from its head, so a test of a
 * later request progresses the earlier ones, and requests complete in post
 * order, as every rank posts them.
 */
#include "coll_int.h"

#include <string.h>

/* the collective's name, for the messages of cxl_coll_check_args() only */
#define CXL_COLL_CHECK_NAME cxl_coll_type_name(a->type)

/* How sbuf and rbuf of a call lie (cxl_coll_args_alias). */
enum {
    CXL_COLL_APART,
    CXL_COLL_OVERLAP,     /* in part: refused */
    CXL_COLL_AS_SBUF_IP,  /* exactly the in-place form, sbuf's */
    CXL_COLL_AS_RBUF_IP   /* exactly the in-place form, rbuf's (scatter) */
};

/*
 * Whether the input and the result of a call with both overlap (block:
 * bytes of one rank's block).  The paths read the own input at different
 * times relative to writing the result (a one-shot reduction of a request
 * on rank 2 and up folds into rbuf before it reads its own input, the
 * short path copies it first), and peers read a pool-resident sbuf in
 * place while its owner writes rbuf: an overlapping call would come out
 * different by path and by rank.  MPI forbids both, but where sbuf is
 * exactly what the in-place form reads (allreduce of x into x, allgather
 * from the own block of rbuf), codes do it and it worked: that is run as
 * the in-place form; any other overlap is refused.
 */
static int cxl_coll_args_alias(const cxl_coll_args_t *a, int p, int me,
                               int is_root, size_t block)
{
    size_t all = block * (size_t)p, slen, rlen, own = block * (size_t)me;
    uintptr_t s = (uintptr_t)a->sbuf, r = (uintptr_t)a->rbuf;

    if ((a->sbuf == CXL_COLL_IN_PLACE) || (a->rbuf == CXL_COLL_IN_PLACE) ||
        (s >= r + all) || (r >= s + all)) {
        return CXL_COLL_APART; /* apart by more than any extent: one test */
    }
    switch (a->type) {
    case CXL_COLL_REDUCE:
        slen = block;
        rlen = is_root ? block : 0;      /* the other ranks': unused */
        if (is_root && (s == r)) {
            return CXL_COLL_AS_SBUF_IP;
        }
        break;
    case CXL_COLL_ALLREDUCE:
    case CXL_COLL_REDUCE_SCATTER:        /* in place: the input in rbuf */
    case CXL_COLL_ALLTOALL:
        slen = (a->type == CXL_COLL_ALLREDUCE) ? block : all;
        rlen = (a->type == CXL_COLL_ALLTOALL) ? all : block;
        if (s == r) {
            return CXL_COLL_AS_SBUF_IP;
        }
        break;
    case CXL_COLL_GATHER:
    case CXL_COLL_ALLGATHER:
        slen = block;
        rlen = (is_root || (a->type == CXL_COLL_ALLGATHER)) ? all : 0;
        if ((rlen != 0) && (s == r + own)) {
            return CXL_COLL_AS_SBUF_IP;  /* the own block of rbuf */
        }
        break;
    case CXL_COLL_SCATTER:
        slen = is_root ? all : 0;
        rlen = block;
        if ((slen != 0) && (r == s + own)) {
            return CXL_COLL_AS_RBUF_IP;  /* the own block of sbuf */
        }
        break;
    default:
        return CXL_COLL_APART; /* bcast: one buffer */
    }
    return ((slen > 0) && (rlen > 0) && (s < r + rlen) && (r < s + slen)) ?
           CXL_COLL_OVERLAP : CXL_COLL_APART;
}

/*
 * Which buffers a rank must pass, by collective and role; *es_p: the
 * element size.  On the path of every call: the names of the messages are
 * looked up only once something is wrong.
 */
cxl_coll_status_t cxl_coll_check_args(const cxl_coll_team_t *team,
                                      const cxl_coll_args_t *a, size_t *es_p,
                                      cxl_coll_args_t *copy,
                                      const cxl_coll_args_t **use)
{
    int p = team->size, me = team->rank, root_ok, is_root;
    int need_s = 0, need_r = 0;
    size_t es, bytes;

    if ((unsigned)a->type >= CXL_COLL_TYPE_LAST) {
        return cxl_coll_error(CXL_COLL_ERR_INVAL, "collective type %d",
                              (int)a->type);
    }
    *es_p = es = cxl_coll_dtype_size(a->dtype);
    if (a->type == CXL_COLL_BARRIER) {
        return CXL_COLL_OK;
    }
    if (es == 0) {
        return cxl_coll_error(CXL_COLL_ERR_UNSUPPORTED, "%s: datatype %d",
                              CXL_COLL_CHECK_NAME, (int)a->dtype);
    }
    if ((CXL_COLL_TYPE_BIT(a->type) & CXL_COLL_REDUCING) &&
        !cxl_coll_op_supported(a->dtype, a->op)) {
        return cxl_coll_error(CXL_COLL_ERR_UNSUPPORTED, "%s: operation %s (%d)"
                              " on %s", CXL_COLL_CHECK_NAME,
                              cxl_coll_op_name(a->op), (int)a->op,
                              cxl_coll_dtype_name(a->dtype));
    }
    root_ok = (a->root >= 0) && (a->root < p);
    if ((CXL_COLL_TYPE_BIT(a->type) & CXL_COLL_ROOTED) && !root_ok) {
        return cxl_coll_error(CXL_COLL_ERR_INVAL, "%s: root %d of a team of "
                              "%d", CXL_COLL_CHECK_NAME, a->root, p);
    }
    /* count * es, times p where a buffer holds a block per rank, in size_t
     * and in the pool's offsets */
    if (__builtin_mul_overflow(a->count, es, &bytes) ||
        __builtin_mul_overflow(bytes, (size_t)p, &bytes) ||
        (bytes > (1ull << 62))) {
        return cxl_coll_error(CXL_COLL_ERR_INVAL, "%s: count %zu of %s (%zu "
                              "bytes each) times %d ranks does not fit",
                              CXL_COLL_CHECK_NAME, a->count,
                              cxl_coll_dtype_name(a->dtype), es, p);
    }
    if (a->count == 0) {
        return CXL_COLL_OK;
    }
    is_root = root_ok && (a->root == me);
    switch (a->type) {
    case CXL_COLL_BCAST:
        need_r = 1;
        break;
    case CXL_COLL_REDUCE:
        need_s = 1;
        need_r = is_root || (a->sbuf == CXL_COLL_IN_PLACE);
        break;
    case CXL_COLL_GATHER:
        need_s = 1;
        need_r = is_root;
        break;
    case CXL_COLL_SCATTER:
        need_s = is_root;
        need_r = 1;
        break;
    default:
        need_s = need_r = 1;
        break;
    }
    if ((need_s && (a->sbuf == NULL)) || (need_r && (a->rbuf == NULL))) {
        return cxl_coll_error(CXL_COLL_ERR_INVAL, "%s: %s is NULL on rank %d "
                              "with count %zu", CXL_COLL_CHECK_NAME,
                              (need_s && (a->sbuf == NULL)) ? "sbuf" : "rbuf",
                              me, a->count);
    }
    if ((a->rbuf == CXL_COLL_IN_PLACE) &&
        !((a->type == CXL_COLL_SCATTER) && is_root)) {
        return cxl_coll_error(CXL_COLL_ERR_INVAL, "%s: rbuf CXL_COLL_IN_PLACE "
                              "is for the root of a scatter only",
                              CXL_COLL_CHECK_NAME);
    }
    if ((a->sbuf == CXL_COLL_IN_PLACE) &&
        ((a->type == CXL_COLL_SCATTER) || (a->type == CXL_COLL_BCAST) ||
         ((a->type == CXL_COLL_GATHER) && !is_root))) {
        return cxl_coll_error(CXL_COLL_ERR_INVAL, "%s: sbuf CXL_COLL_IN_PLACE "
                              "is not an in-place form of it on rank %d",
                              CXL_COLL_CHECK_NAME, me);
    }
    switch (cxl_coll_args_alias(a, p, me, is_root, a->count * es)) {
    case CXL_COLL_OVERLAP:
        return cxl_coll_error(CXL_COLL_ERR_INVAL, "%s: sbuf and rbuf overlap "
                              "on rank %d (the in-place form passes "
                              "CXL_COLL_IN_PLACE)", CXL_COLL_CHECK_NAME, me);
    case CXL_COLL_AS_SBUF_IP:
        *copy      = *a;
        copy->sbuf = CXL_COLL_IN_PLACE;
        *use       = copy;
        break;
    case CXL_COLL_AS_RBUF_IP:
        *copy      = *a;
        copy->rbuf = (void*)CXL_COLL_IN_PLACE;
        *use       = copy;
        break;
    default:
        break;
    }
    return CXL_COLL_OK;
}

#undef CXL_COLL_CHECK_NAME

static void cxl_coll_req_release(cxl_coll_req_t *req)
{
    req->in_use = 0;
    req->freed  = 0;
}

/*
 * Post a call whose arguments passed cxl_coll_check_args() (es: its
 * element size) on a team that has not failed.  A blocking call (own)
 * takes the request beyond the CXL_COLL_MAX_REQS of cxl_coll_post(),
 * which only it uses and frees before it returns: requests the caller
 * has not freed, whose number is local, can not make one rank's blocking
 * call fail while its peers wait in the collective.
 */
static cxl_coll_status_t cxl_coll_post_checked(cxl_coll_team_t *team,
                                               const cxl_coll_args_t *args,
                                               size_t es, int own,
                                               cxl_coll_req_t **req_p)
{
    unsigned i, n = (unsigned)team->cfg.max_reqs, cap = n + 1;
    cxl_coll_status_t status;
    cxl_coll_req_t *req = NULL;

    if (own) {
        /* in use only if a blocking call of the team is under way: one
         * made from the team's progress function */
        req = team->reqs[n].in_use ? NULL : &team->reqs[n];
    } else if (team->q_count < n) {
        for (i = 0; i < n; ++i) {
            if (!team->reqs[i].in_use) {
                req = &team->reqs[i];
                break;
            }
        }
    }
    if (req == NULL) {
        return own ? cxl_coll_error(CXL_COLL_ERR_BUSY, "a blocking %s while "
                                    "another one of the team waits (from "
                                    "its progress function?)",
                                    cxl_coll_type_name(args->type)) :
                     cxl_coll_error(CXL_COLL_ERR_BUSY, "%u collectives "
                                    "outstanding or not freed "
                                    "(CXL_COLL_MAX_REQS)", n);
    }

    /* req->got is all zero here: cxl_coll_got_clear() after each use */
    req->args        = *args;
    req->status      = CXL_COLL_INPROGRESS;
    req->in_use      = 1;
    req->freed       = 0;
    req->queued      = 1;
    req->k           = 0;
    req->phase       = 0;
    req->cursor      = 0;
    req->user_step   = 0;
    req->nsteps      = 0;
    req->step0       = team->next_step;
    req->es          = es;
    req->src_in_pool = 0;
    req->oneshot     = 0;
    req->lag         = 1;
    req->own_src     = 0;
    req->fuse_dst    = NULL;
    req->skip_lo     = 0;
    req->skip_hi     = 0;
    req->post_ns     = 0;
    req->polls       = 0;
    switch (args->type) {
    case CXL_COLL_BARRIER:
        status = cxl_coll_barrier_post(req);
        break;
    case CXL_COLL_REDUCE:
    case CXL_COLL_ALLREDUCE:
    case CXL_COLL_REDUCE_SCATTER:
        status = cxl_coll_reduce_post(req);
        break;
    default:
        status = cxl_coll_move_post(req);
        break;
    }
    if (status != CXL_COLL_OK) {
        cxl_coll_req_release(req);
        return status;
    }
    cxl_coll_call_start(team, args, es, req->step0, req->nsteps, &req->call);
    req->call.lag = req->lag;
    team->next_step += req->nsteps;
    i = team->q_head + team->q_count; /* < 2 cap: no division in the call */
    team->queue[(i >= cap) ? i - cap : i] = req;
    team->q_count++;
    *req_p = req;
    return CXL_COLL_OK;
}

cxl_coll_status_t cxl_coll_post(cxl_coll_team_t *team,
                                const cxl_coll_args_t *args,
                                cxl_coll_req_t **req_p)
{
    cxl_coll_status_t status;
    cxl_coll_args_t copy;
    size_t es = 0;

    if ((team == NULL) || (args == NULL) || (req_p == NULL)) {
        return cxl_coll_error(CXL_COLL_ERR_INVAL, "post: team, args or req_p "
                              "is NULL");
    }
    if (team->failed != CXL_COLL_OK) {
        return cxl_coll_error(team->failed, "the team failed in an earlier "
                              "collective and can only be destroyed");
    }
    status = cxl_coll_check_args(team, args, &es, &copy, &args);
    if (status != CXL_COLL_OK) {
        return status; /* nothing posted: the step counter is untouched */
    }
    return cxl_coll_post_checked(team, args, es, 0, req_p);
}

/*
 * Whether the word the last poll of the head request waited for is
 * unchanged: then the progress function would stop where it stopped, and
 * is not run.  A look at one word instead of a pass through the
 * collective's state, once the request has waited CXL_COLL_WATCH_AFTER
 * polls: a long wait (more ranks than cores, a late peer) then costs the
 * CPU and the rank waited for less (np = 4 on 2 cores: barrier 13-17 ->
 * 11-15 us).  Not sooner: in the first polls of a short wait it made allreduce
 * of 1 KiB slower (0.56 -> 0.62 us, alternating runs), for no reason
 * found.  Every CXL_COLL_WATCH_POLLS polls the pass runs anyway.
 */
static int cxl_coll_watch_unchanged(cxl_coll_team_t *team,
                                    const cxl_coll_req_t *head)
{
    if ((head->polls < CXL_COLL_WATCH_AFTER) ||
        (team->watch_polls >= CXL_COLL_WATCH_POLLS)) {
        return 0;
    }
    cxl_coh_invalidate(team->coh, team->watch, sizeof(*team->watch));
    if (cxl_coll_load(team->watch) != team->watch_seen) {
        return 0;
    }
    ++team->watch_polls;
    return 1;
}

static void cxl_coll_dequeue(cxl_coll_team_t *team, cxl_coll_status_t status)
{
    cxl_coll_req_t *head = team->queue[team->q_head];

    head->status = status;
    head->queued = 0;
    team->q_head = (team->q_head + 1 == (unsigned)team->cfg.max_reqs + 1) ?
                   0 : team->q_head + 1;
    team->q_count--;
    if (head->freed) {
        cxl_coll_req_release(head);
    }
}

cxl_coll_status_t cxl_coll_test(cxl_coll_req_t *req)
{
    cxl_coll_team_t *team;
    cxl_coll_req_t *head;
    cxl_coll_status_t status;

    if ((req == NULL) || !req->in_use) {
        return cxl_coll_error(CXL_COLL_ERR_INVAL, "test of a request that is "
                              "not posted");
    }
    team = req->team;
    while (req->queued) {
        head = team->queue[team->q_head];
        if ((team->watch != NULL) && cxl_coll_watch_unchanged(team, head)) {
            status = CXL_COLL_INPROGRESS;
        } else {
            team->watch = NULL; /* set again by a pass that stops */
            team->call  = &head->call;
            status      = head->progress(head);
            if (status != CXL_COLL_INPROGRESS) {
                team->watch = NULL; /* blocks of a pass that went on */
            }
        }
        if (status == CXL_COLL_INPROGRESS) {
            status = cxl_coll_wait_check(head);
            if (status == CXL_COLL_INPROGRESS) {
                return status;
            }
        }
        if (status != CXL_COLL_OK) {
            /* the team is unusable: peers learn it from the abort line,
             * and everything queued fails alike */
            cxl_coll_abort(team, status);
            while (team->q_count > 0) {
                cxl_coll_dequeue(team, status);
            }
            break;
        }
        cxl_coll_dequeue(team, CXL_COLL_OK);
    }
    return req->status;
}

void cxl_coll_team_abort(cxl_coll_team_t *team, cxl_coll_status_t status)
{
    if ((team == NULL) || (status == CXL_COLL_OK) ||
        (team->failed != CXL_COLL_OK)) {
        return;
    }
    cxl_coll_abort(team, status);
    while (team->q_count > 0) {
        cxl_coll_dequeue(team, status);
    }
}

cxl_coll_status_t cxl_coll_wait(cxl_coll_req_t *req)
{
    cxl_coll_status_t status;
    cxl_coll_idle_t idle;

    status = cxl_coll_test(req); /* also rejects a request not posted */
    if (status != CXL_COLL_INPROGRESS) {
        return status;
    }
    cxl_coll_idle_init(req->team, &idle);
    for (;;) {
        cxl_coll_idle(req->team, &idle);
        status = cxl_coll_test(req);
        if (status != CXL_COLL_INPROGRESS) {
            return status;
        }
    }
}

void cxl_coll_req_free(cxl_coll_req_t *req)
{
    if ((req == NULL) || !req->in_use) {
        return;
    }
    if (req->queued) {
        req->freed = 1; /* released when it completes */
        return;
    }
    cxl_coll_req_release(req);
}

/* The same arguments, field by field (the struct has padding). */
static inline int cxl_coll_args_same(const cxl_coll_args_t *a,
                                     const cxl_coll_args_t *b)
{
    return (a->type == b->type) & (a->sbuf == b->sbuf) &
           (a->rbuf == b->rbuf) & (a->count == b->count) &
           (a->dtype == b->dtype) & (a->op == b->op) & (a->root == b->root);
}

/*
 * A blocking call.  Codes make one collective with the same arguments
 * over and over (a training loop's allreduce of its gradients, a solver's
 * dot product, a benchmark): the checks, the short path's fit and the
 * call's hash depend on the arguments and the team alone, so the short
 * path's last call is kept prepared (team->memo), and a call with the
 * same arguments runs it without them: ~240 of the ~960 instructions of
 * an 8-byte allreduce in the library outside the polls (callgrind,
 * coll_lat; test_coll_repeat changes one argument at a time).
 */
cxl_coll_status_t cxl_coll_run(cxl_coll_team_t *team,
                               const cxl_coll_args_t *args)
{
    const cxl_coll_args_t *use = args;
    const cxl_coll_call_t *outer;
    cxl_coll_short_call_t nested, *sc;
    cxl_coll_status_t status;
    cxl_coll_args_t copy;
    cxl_coll_req_t *req;
    size_t es;
    int fits;

    if ((team == NULL) || (args == NULL) || (team->failed != CXL_COLL_OK)) {
        return cxl_coll_post(team, args, &req); /* its error */
    }
    /* the call of a short call this one is made in the wait of (from the
     * progress function), whose checks compare its hash: given back */
    outer = team->call;
    if (team->q_count == 0) {
        /* nothing queued that must complete first */
        if ((args->type == CXL_COLL_BARRIER) && (team->size > 1)) {
            status = cxl_coll_short_barrier(team); /* nothing to check */
            goto out_short;
        }
        if (team->memo_valid && !team->memo_busy &&
            cxl_coll_args_same(args, &team->memo_key)) {
            status = cxl_coll_short_run(team, &team->memo);
            goto out_short;
        }
    }
    status = cxl_coll_check_args(team, args, &es, &copy, &use);
    if (status != CXL_COLL_OK) {
        return status;
    }
    if (team->q_count == 0) {
        /* a call from the progress function while the kept one runs
         * prepares on its own stack: the kept one stays as it is */
        sc = team->memo_busy ? &nested : &team->memo;
        fits = cxl_coll_short_prepare(team, use, es, sc);
        if (!team->memo_busy) {
            team->memo_valid = fits;
            team->memo_key   = *args;
        }
        if (fits) {
            status = cxl_coll_short_run(team, sc);
            goto out_short;
        }
    }
    status = cxl_coll_post_checked(team, use, es, 1, &req);
    if (status != CXL_COLL_OK) {
        return status;
    }
    status = cxl_coll_wait(req);
    cxl_coll_req_free(req);
    team->call = outer;
    return status;

out_short:
    team->call = outer; /* the short call's is gone with its frame */
    return status;
}

static cxl_coll_status_t cxl_coll_run_args(cxl_coll_team_t *team,
                                           cxl_coll_type_t type,
                                           const void *sbuf, void *rbuf,
                                           size_t count,
                                           cxl_coll_dtype_t dtype,
                                           cxl_coll_op_t op, int root)
{
    cxl_coll_args_t args;

    args.type  = type;
    args.sbuf  = sbuf;
    args.rbuf  = rbuf;
    args.count = count;
    args.dtype = dtype;
    args.op    = op;
    args.root  = root;
    return cxl_coll_run(team, &args);
}

cxl_coll_status_t cxl_coll_barrier(cxl_coll_team_t *team)
{
    return cxl_coll_run_args(team, CXL_COLL_BARRIER, NULL, NULL, 0,
                             CXL_COLL_UINT8, CXL_COLL_SUM, 0);
}

cxl_coll_status_t cxl_coll_bcast(cxl_coll_team_t *team, void *buf,
                                 size_t count, cxl_coll_dtype_t dtype, int root)
{
    return cxl_coll_run_args(team, CXL_COLL_BCAST, NULL, buf, count, dtype,
                             CXL_COLL_SUM, root);
}

cxl_coll_status_t cxl_coll_reduce(cxl_coll_team_t *team, const void *sbuf,
                                  void *rbuf, size_t count,
                                  cxl_coll_dtype_t dtype, cxl_coll_op_t op,
                                  int root)
{
    return cxl_coll_run_args(team, CXL_COLL_REDUCE, sbuf, rbuf, count, dtype,
                             op, root);
}

cxl_coll_status_t cxl_coll_allreduce(cxl_coll_team_t *team, const void *sbuf,
                                     void *rbuf, size_t count,
                                     cxl_coll_dtype_t dtype, cxl_coll_op_t op)
{
    return cxl_coll_run_args(team, CXL_COLL_ALLREDUCE, sbuf, rbuf, count,
                             dtype, op, 0);
}

cxl_coll_status_t cxl_coll_gather(cxl_coll_team_t *team, const void *sbuf,
                                  void *rbuf, size_t count,
                                  cxl_coll_dtype_t dtype, int root)
{
    return cxl_coll_run_args(team, CXL_COLL_GATHER, sbuf, rbuf, count, dtype,
                             CXL_COLL_SUM, root);
}

cxl_coll_status_t cxl_coll_scatter(cxl_coll_team_t *team, const void *sbuf,
                                   void *rbuf, size_t count,
                                   cxl_coll_dtype_t dtype, int root)
{
    return cxl_coll_run_args(team, CXL_COLL_SCATTER, sbuf, rbuf, count, dtype,
                             CXL_COLL_SUM, root);
}

cxl_coll_status_t cxl_coll_allgather(cxl_coll_team_t *team, const void *sbuf,
                                     void *rbuf, size_t count,
                                     cxl_coll_dtype_t dtype)
{
    return cxl_coll_run_args(team, CXL_COLL_ALLGATHER, sbuf, rbuf, count,
                             dtype, CXL_COLL_SUM, 0);
}

cxl_coll_status_t cxl_coll_reduce_scatter(cxl_coll_team_t *team,
                                          const void *sbuf, void *rbuf,
                                          size_t count, cxl_coll_dtype_t dtype,
                                          cxl_coll_op_t op)
{
    return cxl_coll_run_args(team, CXL_COLL_REDUCE_SCATTER, sbuf, rbuf, count,
                             dtype, op, 0);
}

cxl_coll_status_t cxl_coll_alltoall(cxl_coll_team_t *team, const void *sbuf,
                                    void *rbuf, size_t count,
                                    cxl_coll_dtype_t dtype)
{
    return cxl_coll_run_args(team, CXL_COLL_ALLTOALL, sbuf, rbuf, count, dtype,
                             CXL_COLL_SUM, 0);
}
