/*
 * Internal types of libcxl_coll: the team, a request, the configuration,
 * and the functions the files of the library share.
 */
#ifndef CXL_COLL_INT_H
#define CXL_COLL_INT_H

#include <ucx_cxl/coll.h>
#include <ucx_cxl/cxlpool.h>

#define CXL_COLL_MAX_ALIAS 8  /* other mappings of the pool tracked */

#include "coll_region.h"
#include "coll_far.h"

#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define CXL_COLL_MAX_RANKS 4096

/* Collectives by role, as bit masks of their type: test with
 * CXL_COLL_TYPE_BIT(type) & CXL_COLL_ROOTED. */
#define CXL_COLL_TYPE_BIT(_t) (1u << (_t))
#define CXL_COLL_ROOTED       (CXL_COLL_TYPE_BIT(CXL_COLL_BCAST) | \
                               CXL_COLL_TYPE_BIT(CXL_COLL_REDUCE) | \
                               CXL_COLL_TYPE_BIT(CXL_COLL_GATHER) | \
                               CXL_COLL_TYPE_BIT(CXL_COLL_SCATTER))
#define CXL_COLL_REDUCING     (CXL_COLL_TYPE_BIT(CXL_COLL_REDUCE) | \
                               CXL_COLL_TYPE_BIT(CXL_COLL_ALLREDUCE) | \
                               CXL_COLL_TYPE_BIT(CXL_COLL_REDUCE_SCATTER))

/* ---- configuration (coll_config.c) ---- */
typedef struct {
    char     pool[256];
    uint64_t region_size;
    uint64_t chunk_size;
    uint64_t oneshot_max;
    uint64_t max_reqs;
    uint64_t spin;
    uint64_t peer_check_ns;
    uint64_t timeout_ns;
    int      pool_inplace;
    int      log;
    int      help;
    int      skip_wb;
} cxl_coll_config_t;

cxl_coll_status_t cxl_coll_config_read(cxl_coll_config_t *cfg);
void              cxl_coll_config_print(FILE *stream);

/* ---- errors and the debug line (coll_error.c) ---- */
cxl_coll_status_t cxl_coll_error(cxl_coll_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void cxl_coll_log(const cxl_coll_team_t *team, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "64 KiB", "1 MiB", "12 B" */
const char *cxl_coll_bytes_str(uint64_t bytes, char *buf, size_t len);

/*
 * One call as every rank must make it alike (coll_call.c): its steps,
 * what it is, the bytes of a rank's block, and a hash of what and bytes
 * that its publications carry.
 */
typedef struct {
    uint64_t callno;  /* the rank's count of calls, this one included */
    uint64_t first;   /* first step */
    uint64_t nsteps;  /* 0: the call makes no step */
    uint64_t what;    /* collective, and root, op, dtype where they matter */
    uint64_t bytes;
    uint64_t hash;
    uint64_t lag;     /* a peer that published a step s of this call has
                         finished every step before s - lag (cxl_coll_seen) */
} cxl_coll_call_t;

/* The layout of a one-step publication of nblocks blocks of len bytes
 * (the short path's). */
typedef struct {
    unsigned            nblocks;
    uint64_t            len;     /* bytes of a block */
    uint64_t            stride;  /* between blocks in a slot (plan_rounds) */
    cxl_coll_pub_kind_t kind;
} cxl_coll_short_layout_t;

/* A call the short path takes, prepared once (cxl_coll_short_prepare):
 * its arguments as checked, its layout, its call (first and callno set
 * per call) and, for a reduction, the kernel and the element size. */
typedef struct {
    cxl_coll_args_t         args;
    cxl_coll_short_layout_t layout;
    cxl_coll_call_t         call;
    cxl_coll_red_fn_t       red;
    size_t                  es;
} cxl_coll_short_call_t;

/* ---- team ---- */
typedef struct {
    uint8_t  *part;       /* the peer's partition in this mapping */
    uint64_t  token;      /* its pool attachment */
    uint32_t  ext_index;  /* its partition's extent: freed (the peer left */
    uint32_t  ext_gen;    /*   the team) once the generation changes */
    uint32_t  host;
    uint64_t  done_lb;    /* lower bound of its done line (coll_step.c) */
    uint64_t  ll_step;    /* step whose flagged lines ll_buf holds whole */
    uint8_t  *ll_buf;     /* CXL_COLL_LL_MAX: their payload, in layout */
} cxl_coll_peer_t;

/* What each rank tells the others at creation (coll_team.c). */
#define CXL_COLL_OOB_VERSION 4 /* partition layout: 2 flagged lines,
                                  3 call records; part_use */
typedef struct {
    uint64_t magic;
    uint32_t version;
    int32_t  status;        /* this rank's pool open / allocation */
    int32_t  rank;
    int32_t  size;
    uint8_t  uuid[CXLPOOL_UUID_LEN];
    uint64_t part_off;
    uint64_t part_len;
    uint32_t ext_index;
    uint32_t ext_gen;
    uint64_t part_use;      /* teams the extent served before (coll_pool.c) */
    uint64_t token;
    uint32_t host;
    uint32_t coh;
    uint64_t region;
    uint64_t oneshot_max;   /* the algorithm choice must agree */
} cxl_coll_oob_rec_t;

/* What this rank published in a slot, for reading its own data back. */
typedef struct {
    const uint8_t *base;
    uint64_t       stride;
} cxl_coll_mypub_t;

struct cxl_coll_team {
    int                 rank;
    int                 size;
    cxl_coll_oob_allgather_t oob;    /* kept for the destroy */
    void               *oob_arg;
    cxl_coll_config_t   cfg;
    cxlpool_t          *pool;
    uint8_t            *pool_base;
    uint64_t            pool_size;
    uint64_t            heap_offset;
    /* other mappings of the pool in this process (coll_alias.c) */
    struct {
        uintptr_t start, end;
        uint64_t  off;  /* pool offset of start */
    }                   alias[CXL_COLL_MAX_ALIAS];
    unsigned            nalias;
    int                 alias_pending; /* scan at the first lookup */
    cxl_coh_mode_t      coh;
    uint64_t            region;      /* bytes of each partition */
    uint64_t            slot_bytes;
    cxlpool_extent_t    part_ext;    /* own partition */
    uint8_t            *part;
    uint64_t            part_use;    /* earlier teams of part_ext */
    int                 part_idle;   /* the destroy's exchange passed: no
                                        peer reads it again (kept for the
                                        process's next team) */
    uint64_t            tag;         /* xor'ed into the step that ready
                                        words and flagged lines carry, the
                                        same on all ranks, another in every
                                        team: lines of another team (a
                                        freed partition, reused) never pass
                                        for this one's */
    int                 keep_pool;   /* a peer may still read the own
                                        partition: the pool handle (whose
                                        close frees it) stays open */
    cxl_coll_peer_t    *peers;
    cxl_coll_mypub_t    mypub[CXL_COLL_NSIG];
    uint8_t            *ll_own;      /* NSIG x LL_MAX: the own flagged
                                        publications, in layout */
    uint64_t            data_step[CXL_COLL_NSLOTS]; /* last step that wrote
                                        data slot k (0: none yet) */
    struct cxl_coll_pub *pubs;       /* scratch: one per rank */

    uint64_t            next_step;   /* first step of the next posted request */
    const cxl_coll_call_t *call;     /* the call being progressed (its
                                        publications carry its hash), or
                                        cxl_coll_call_none */
    uint64_t            callno;      /* calls recorded (coll_call.c) */
    uint64_t            rec_flushed; /* sw: records up to this callno
                                        written back */
    uint64_t            done_all;    /* every peer's done line is >= this */
    cxl_coll_status_t   failed;      /* a collective failed: team unusable */

    cxl_coll_req_t     *reqs;        /* max_reqs requests */
    uint64_t           *got_mem;     /* per-peer counters of all requests */
    cxl_coll_req_t    **queue;       /* posted, in order */
    unsigned            q_head;
    unsigned            q_count;

    uint64_t            last_check_ns;
    unsigned            blocked_peer; /* who a failed poll waited for */
    const uint64_t     *watch;       /* a word of blocked_peer that must
                                        change before the head request can
                                        advance (NULL: none known) */
    uint64_t            watch_seen;  /*   and its value then */
    unsigned            watch_polls; /* polls answered from the watch */

    void              (*progress)(void *arg); /* the caller's, while a */
    void               *progress_arg;            /*   blocking call waits */
    unsigned            progress_interval;       /*   every this many polls */

    /* the last call of cxl_coll_run() the short path took, prepared:
     * the next with the same arguments skips the checks (coll_req.c) */
    int                 memo_valid;
    int                 memo_busy;   /*   running (cxl_coll_short_run reads
                                          it in place): a call from the
                                          progress function meanwhile
                                          leaves it alone */
    cxl_coll_args_t     memo_key;    /*   its arguments as passed */
    cxl_coll_short_call_t memo;

    uint64_t           *mem_offs;    /* cxl_coll_mem_alloc() extents */
    unsigned            mem_count;
    unsigned            mem_cap;
};

/* Free what cxl_coll_mem_alloc() handed out and was not freed. */
void cxl_coll_mem_cleanup(cxl_coll_team_t *team);

/* (rank + i) % size for 0 < i < size, without a division in the poll */
static inline int cxl_coll_peer_at(const cxl_coll_team_t *team, int rank,
                                   int i)
{
    int w = rank + i;

    return (w >= team->size) ? w - team->size : w;
}

/*
 * A poll of the head request found it waiting for peer, and for word, seen
 * holding `seen`, to change: once the request has polled
 * CXL_COLL_WATCH_AFTER times, cxl_coll_test() looks at that word alone
 * until it changes (at most CXL_COLL_WATCH_POLLS polls in a row), not
 * through the progress function.  The word must be one the request cannot
 * complete without: the last peer a pass found missing, not the first.
 */
#define CXL_COLL_WATCH_POLLS 64u
#define CXL_COLL_WATCH_AFTER 32u

static inline void cxl_coll_block(cxl_coll_team_t *team, int peer,
                                  const uint64_t *word, uint64_t seen)
{
    team->blocked_peer = (unsigned)peer;
    team->watch        = word;
    team->watch_seen   = seen;
    team->watch_polls  = 0;
}

/* The step as ready words and flagged lines carry it (team->tag). */
static inline uint64_t cxl_coll_tag(const cxl_coll_team_t *team,
                                    uint64_t step)
{
    return step ^ team->tag;
}

/* ---- requests (coll_req.c) ---- */
/*
 * The arguments' errors, as every post reports them; *es_p: element size;
 * *use: a, or *copy where a is an in-place form written with pointers
 * (sbuf == rbuf...) and copy says CXL_COLL_IN_PLACE.
 */
cxl_coll_status_t cxl_coll_check_args(const cxl_coll_team_t *team,
                                      const cxl_coll_args_t *a, size_t *es_p,
                                      cxl_coll_args_t *copy,
                                      const cxl_coll_args_t **use);
typedef cxl_coll_status_t (*cxl_coll_progress_t)(cxl_coll_req_t *req);

struct cxl_coll_req {
    cxl_coll_team_t    *team;
    cxl_coll_args_t     args;
    cxl_coll_progress_t progress;
    cxl_coll_status_t   status;
    int                 in_use;
    int                 queued;
    int                 freed;
    uint64_t            post_ns;     /* 0 until the first clock read */
    unsigned            polls;       /* of the request while in progress */

    uint64_t            step0;       /* first step */
    uint64_t            nsteps;
    cxl_coll_call_t     call;        /* as recorded at the post */
    uint64_t            k;           /* current step, 0..nsteps */
    int                 phase;
    uint64_t            cursor;      /* bytes done by this rank in the step */
    uint64_t           *got;         /* per peer: bytes consumed in the step */
    uint64_t            user_step;   /* last step published from a user pool
                                        buffer: readers must finish it */

    /* set up by the collective's post */
    size_t              es;          /* element size */
    uint64_t            bytes;       /* bytes of a block */
    uint64_t            round;       /* bytes of a block per round */
    uint64_t            nrounds;
    unsigned            nblocks;     /* blocks per publication */
    uint64_t            slot_stride; /* bytes between blocks in a slot */
    const uint8_t      *src;         /* resolved input: block j at */
    uint64_t            src_stride;  /*   src + j * src_stride */
    uint8_t            *dst;         /* resolved output: data of rank w */
    uint64_t            dst_stride;  /*   at dst + w * dst_stride */
    int                 src_in_pool; /* peers read src in place */
    int                 local_copy;  /* the own block moves by a local copy:
                                        a rank that reads copies each
                                        round's part between its write and
                                        its read, one that does not copies
                                        it all at the end */
    uint8_t            *fuse_dst;    /* write_round also copies each chunk of
                                        the own block here, while it is in
                                        the cache (allgather) */
    int                 oneshot;     /* reductions: one-shot or two-shot */
    unsigned            lag;         /* its call's (cxl_coll_call_t.lag) */
    int                 own_src;     /* reductions: the own input is read
                                        from src, not from the publication */
    uint64_t            skip_lo;     /* write_round leaves [skip_lo, skip_hi) */
    uint64_t            skip_hi;     /*   of the slot layout out: nobody reads
                                        it (the own block or slice) */
};

/*
 * req->got back to zero, as the next request on it expects (post does not
 * clear it): after every step that used it.  A loop, not memset(): two
 * words on two ranks.
 */
static inline void cxl_coll_got_clear(cxl_coll_req_t *req)
{
    int i;

    for (i = 0; i < req->team->size; ++i) {
        req->got[i] = 0;
    }
}

uint64_t cxl_coll_now_ns(void);

/* ---- other mappings of the team's pool (coll_alias.c) ---- */
/* Whether to look for them (hw-coherent pools only): in /proc/self/maps,
 * at the first lookup. */
void        cxl_coll_alias_init(cxl_coll_team_t *team, const char *path);
/* [p, p+len) in another mapping of the pool: the same bytes in the
 * library's mapping; otherwise p. */
const void *cxl_coll_alias(cxl_coll_team_t *team, const void *p, size_t len);

/* ---- the pools of the process, shared by its teams (coll_pool.c) ---- */
/* The handle of pool `key` (opened on first use, with the parameters of
 * cxl_pool_pick_params; create: the per-user default, made if missing),
 * counted; cxl_coll_pool_put() drops it. */
cxl_coll_status_t cxl_coll_pool_get(const char *key, int create,
                                    cxlpool_t **pool_p);
void              cxl_coll_pool_put(cxlpool_t *pool);
/* A team partition of `length` bytes that an ended team of the process
 * left idle on this pool: 1 with *ext and *use (the teams it served
 * before, for the tag); 0: none, allocate one. */
int               cxl_coll_pool_part_take(cxlpool_t *pool, uint64_t length,
                                          cxlpool_extent_t *ext,
                                          uint64_t *use);
/* An ended team's idle partition: kept for the next (one per pool),
 * else freed. */
void              cxl_coll_pool_part_keep(cxlpool_t *pool, uint64_t length,
                                          const cxlpool_extent_t *ext,
                                          uint64_t use);
/* The pool of a team or of cxl_coll_pool_mem_alloc(): `given`, else
 * CXL_COLL_POOL, else the transport's (cxl_pool_pick), counted as above;
 * *path: its key (given, cfg->pool or buf). */
cxl_coll_status_t cxl_coll_pool_pick_get(const char *given,
                                         const cxl_coll_config_t *cfg,
                                         char *buf, size_t len,
                                         const char **path, cxlpool_t **pool_p);

/* ---- pool steps (coll_step.c) ---- */
/* Every peer's done >= step (readers finished with what it published). */
cxl_coll_status_t cxl_coll_peers_done(cxl_coll_team_t *team, uint64_t step);

/*
 * Step may publish: every peer's done >= step - NSIG (its signal line),
 * and with data_slot also >= the last step that wrote its data slot.
 * Inline: team->done_all answers nearly every call without a look at a
 * line (two calls deep, it cost a short call ~30 instructions).
 */
static inline cxl_coll_status_t cxl_coll_slot_acquire(cxl_coll_team_t *team,
                                                      uint64_t step,
                                                      int data_slot)
{
    uint64_t need = (step > CXL_COLL_NSIG) ? step - CXL_COLL_NSIG : 0;
    uint64_t last;

    if (data_slot) {
        last = team->data_step[cxl_coll_slot_of(step)];
        need = (last > need) ? last : need;
    }
    if (need <= team->done_all) {
        return CXL_COLL_OK;
    }
    return cxl_coll_peers_done(team, need);
}
/*
 * Peer published step of this rank's current call (its hash checked): it
 * has finished every step before step - 1, since a rank works through its
 * steps in order and publishes a step only once it is done with the one
 * before, except the second step of a two-shot reduction's round, which
 * it opens before it has finished the first.  The call's lag says which:
 * the peer's done line is >= step - lag without reading it.
 */
static inline void cxl_coll_seen(cxl_coll_team_t *team, int peer,
                                 uint64_t step)
{
    cxl_coll_peer_t *p = &team->peers[peer];
    uint64_t lag       = team->call->lag;

    if ((step > lag) && (p->done_lb < step - lag)) {
        p->done_lb = step - lag;
    }
}

uint8_t *cxl_coll_my_slot(cxl_coll_team_t *team, uint64_t step);
/* Copy published data into the own slot (and write it back in sw mode). */
void     cxl_coll_put(cxl_coll_team_t *team, void *dst, const void *src,
                      size_t len);
/* Write back data already in place in the pool (user buffer, reduction). */
void     cxl_coll_put_wb(cxl_coll_team_t *team, const void *addr, size_t len);
/* cxl_coll_publish, the data (if in no signal line or user buffer) in slot:
 * the small slot of step's signal line, or NULL for its data slot */
void     cxl_coll_publish_in(cxl_coll_team_t *team, uint64_t step,
                             const void *inl, size_t inl_len, const void *buf,
                             const uint8_t *slot, uint64_t stride,
                             uint64_t ready);
/*
 * Publish step: inline payload (inl != NULL, inl_len <= INLINE_MAX), a
 * user pool buffer (buf != NULL: offset and stride), else the slot.
 */
static inline void cxl_coll_publish(cxl_coll_team_t *team, uint64_t step,
                                    const void *inl, size_t inl_len,
                                    const void *buf, uint64_t stride,
                                    uint64_t ready)
{
    cxl_coll_publish_in(team, step, inl, inl_len, buf, NULL, stride, ready);
}
/* More bytes of the slot of step are ready (a high-water mark). */
void     cxl_coll_publish_ready(cxl_coll_team_t *team, uint64_t step,
                                uint64_t ready);
/* Where a publication of this kind goes, for the log line. */
const char *cxl_coll_pub_kind_name(cxl_coll_pub_kind_t kind);
/* The own staging buffer of step's flagged lines (CXL_COLL_LL_MAX bytes). */
uint8_t *cxl_coll_ll_stage(cxl_coll_team_t *team, uint64_t step);
/*
 * Publish step as flagged lines: layout bytes [0, len) of the staging
 * buffer (blocks stride apart), len <= CXL_COLL_LL_MAX.
 */
void     cxl_coll_publish_ll(cxl_coll_team_t *team, uint64_t step,
                             uint64_t len, uint64_t stride);
void     cxl_coll_step_done(cxl_coll_team_t *team, uint64_t step);

/* What a reader sees of a peer's publication of a step. */
typedef struct cxl_coll_pub {
    const uint8_t *base;   /* block 0 */
    uint64_t       stride; /* bytes between blocks */
    uint64_t       ready;  /* bytes of the layout ready from base */
    int            inl;    /* nothing to invalidate: data lies in the
                              signal line, or was copied out of flagged
                              lines */
    const uint64_t *ready_word; /* where ready comes from, and its value */
    uint64_t       ready_seen;  /*   (NULL: it will not grow) */
} cxl_coll_pub_t;

/* peer's publication pub has less ready than needed: watch its ready word */
static inline void cxl_coll_block_ready(cxl_coll_team_t *team, int peer,
                                        const cxl_coll_pub_t *pub)
{
    if (pub->ready_word != NULL) {
        cxl_coll_block(team, peer, pub->ready_word, pub->ready_seen);
    } else {
        team->blocked_peer = (unsigned)peer; /* cannot grow: no watch */
        team->watch        = NULL;
    }
}

/*
 * Peer's publication of step, made of nblocks blocks of blk bytes laid
 * out at slot_stride in its slot (or as it says: inline, user buffer; or
 * in flagged lines or the small slot, where cxl_coll_pub_kind() says so).
 * INPROGRESS until published; ready grows on later calls.
 */
cxl_coll_status_t cxl_coll_peek(cxl_coll_team_t *team, int peer, uint64_t step,
                                unsigned nblocks, uint64_t blk,
                                uint64_t slot_stride, cxl_coll_pub_t *pub);
/* Make [p, p+len) of a peer's publication readable (invalidate in sw). */
void     cxl_coll_fetch(cxl_coll_team_t *team, const cxl_coll_pub_t *pub,
                        const void *p, size_t len);
/* Copy len fetched bytes of a publication at p to dst: their lines
 * requested ahead (coll_far.c) unless they are this rank's own already
 * (inl: cxl_coll_pub_t.inl). */
static inline void cxl_coll_pub_copy(int inl, void *dst, const void *p,
                                     size_t len)
{
    if (inl) {
        memcpy(dst, p, len);
    } else {
        cxl_coll_far_copy(dst, p, len);
    }
}
/* Whether [p, p+len) lies in this process's mapping of the pool heap. */
int      cxl_coll_in_pool(const cxl_coll_team_t *team, const void *p,
                          size_t len);

/* ---- calls that differ across ranks (coll_call.c) ---- */
/*
 * The call of args (es: element size) taking steps [first, first+nsteps),
 * not numbered.  Data movements compare bytes only (a bcast of 8 x uint8
 * against 1 x uint64 moves the same bytes, and codes do it); reductions
 * also the datatype and the operation.  Inline: on the path of every call.
 */
static inline void cxl_coll_call_make(const cxl_coll_args_t *args, size_t es,
                                      uint64_t first, uint64_t nsteps,
                                      cxl_coll_call_t *call)
{
    unsigned bit  = CXL_COLL_TYPE_BIT(args->type);
    uint64_t what = (uint64_t)args->type, h;

    if (bit & CXL_COLL_REDUCING) {
        what |= ((uint64_t)args->dtype << 8) | ((uint64_t)args->op << 16);
    }
    if (bit & CXL_COLL_ROOTED) {
        what |= (uint64_t)(uint32_t)args->root << 32;
    }
    call->first  = first;
    call->nsteps = nsteps;
    call->lag    = 1; /* 2 for a two-shot reduction (cxl_coll_reduce_post) */
    call->what   = what;
    call->bytes  = (args->type == CXL_COLL_BARRIER) ? 0 : args->count * es;
    /* any bit of what or bytes reaches the low 23 bits flagged lines
     * use; no call hashes to 0, what a zeroed line holds */
    h          = (((what + 1) * 0x9e3779b97f4a7c15ull) ^ call->bytes) *
                 0xbf58476d1ce4e5b9ull;
    call->hash = h ^ (h >> 32);
}

/* Number call and say in the own record ring that this rank makes it
 * (before its steps). */
void cxl_coll_call_record(cxl_coll_team_t *team, cxl_coll_call_t *call);
/* cxl_coll_call_make(), then cxl_coll_call_record(). */
void cxl_coll_call_start(cxl_coll_team_t *team, const cxl_coll_args_t *args,
                         size_t es, uint64_t first, uint64_t nsteps,
                         cxl_coll_call_t *call);
/* The call of a team with no call made yet (team->call is never NULL). */
extern const cxl_coll_call_t cxl_coll_call_none;
/* sw: write back the records not yet written back (a waiting rank). */
void cxl_coll_call_flush(cxl_coll_team_t *team);
/*
 * A waiting rank's look at peer's record of the call numbered like call:
 * CXL_COLL_ERR_MISMATCH where it is another (a hang otherwise: each waits
 * for what the other's call never publishes), else OK.
 */
cxl_coll_status_t cxl_coll_call_check(cxl_coll_team_t *team,
                                      const cxl_coll_call_t *call, int peer);
/* peer published a step of team->call for another call. */
cxl_coll_status_t cxl_coll_call_differs(cxl_coll_team_t *team, int peer);

/* ---- waiting (coll_wait.c) ---- */
/*
 * After a poll of call found nothing: peer liveness, calls that differ,
 * and the timeout.  *polls and *post_ns are the call's (0 at its post).
 */
cxl_coll_status_t cxl_coll_wait_check_at(cxl_coll_team_t *team,
                                         const cxl_coll_call_t *call,
                                         uint64_t *post_ns, unsigned *polls);
static inline cxl_coll_status_t cxl_coll_wait_check(cxl_coll_req_t *req)
{
    return cxl_coll_wait_check_at(req->team, &req->call, &req->post_ns,
                                  &req->polls);
}

/* A blocking wait between two polls: spin, then yield; the caller's
 * progress function every team->progress_interval polls while it spins,
 * then before every yield. */
typedef struct {
    unsigned spins;
    unsigned until_progress;
} cxl_coll_idle_t;

static inline void cxl_coll_idle_init(const cxl_coll_team_t *team,
                                      cxl_coll_idle_t *idle)
{
    idle->spins          = 0;
    idle->until_progress = team->progress_interval;
}

void              cxl_coll_idle(const cxl_coll_team_t *team,
                                cxl_coll_idle_t *idle);
/* This rank gives up: peers waiting for it see its abort line. */
void              cxl_coll_abort(cxl_coll_team_t *team, cxl_coll_status_t st);
/*
 * Before a failed team frees its partition: a live peer may still copy
 * what this rank published last (a root returns once its data is out).
 * Waits, at most CXL_COLL_DRAIN_NS, until every peer's done line reached
 * the last step this rank took, or the peer died, gave up or left.  1:
 * nobody reads the partition any more; 0: the bound passed.
 */
#define CXL_COLL_DRAIN_NS 1000000000ull
int               cxl_coll_drain(cxl_coll_team_t *team);

/*
 * A signal without data (barrier): the lines of cxl_coll_publish() and
 * cxl_coll_peek() of 0 inline bytes, with less around them.  peek: OK once
 * peer signalled step (for the same call), else INPROGRESS or an error.
 */
void              cxl_coll_publish_signal(cxl_coll_team_t *team,
                                          uint64_t step);
cxl_coll_status_t cxl_coll_peek_signal(cxl_coll_team_t *team, int peer,
                                       uint64_t step);

/* ---- the short path (coll_short.c) ---- */
/*
 * sc prepared for a valid call (es: its element size): 1 if the short
 * path takes it, else 0 (sc then undefined).
 */
int               cxl_coll_short_prepare(const cxl_coll_team_t *team,
                                         const cxl_coll_args_t *a, size_t es,
                                         cxl_coll_short_call_t *sc);
/* Run it, blocking; only while no request of the team is queued.  sc is
 * read in place while the call waits: it must not change meanwhile. */
cxl_coll_status_t cxl_coll_short_run(cxl_coll_team_t *team,
                                     const cxl_coll_short_call_t *sc);
/* A barrier of a team of 2 or more, the same way, with less around it. */
cxl_coll_status_t cxl_coll_short_barrier(cxl_coll_team_t *team);

/* ---- the collectives: set up req, return its progress function ---- */
cxl_coll_status_t cxl_coll_barrier_post(cxl_coll_req_t *req);
cxl_coll_status_t cxl_coll_move_post(cxl_coll_req_t *req);
cxl_coll_status_t cxl_coll_reduce_post(cxl_coll_req_t *req);

/*
 * Publish this rank's blocks of a round (bytes [off, off+len) of each
 * block of req->src): inline, in place from the pool, or chunk by chunk
 * through the slot, leaving out [req->skip_lo, req->skip_hi) of the slot
 * layout.  INPROGRESS while the slot is still being read.
 */
cxl_coll_status_t cxl_coll_write_round(cxl_coll_req_t *req, uint64_t step,
                                       uint64_t off, uint64_t len);

/* Rounds of a publication of nblocks blocks of bytes each in one slot. */
void cxl_coll_plan_rounds(cxl_coll_req_t *req, unsigned nblocks);

/* Bytes of a block per round when a slot holds nblocks blocks (no
 * division for the common case, one block: a 64-bit division costs as
 * much as a short collective's publication). */
static inline uint64_t cxl_coll_round_cap(const cxl_coll_team_t *team,
                                          unsigned nblocks)
{
    return ((nblocks == 1) ? team->slot_bytes :
            team->slot_bytes / nblocks) & ~63ull;
}

/* Whether rank w publishes in a step of a data movement (coll_move.c). */
static inline int cxl_coll_move_publishes(const cxl_coll_args_t *a, int w)
{
    switch (a->type) {
    case CXL_COLL_BCAST:
    case CXL_COLL_SCATTER:
        return w == a->root;
    case CXL_COLL_GATHER:
        return w != a->root;
    default:
        return 1;
    }
}

/* Whether rank r reads rank w's publication in such a step. */
static inline int cxl_coll_move_reads(const cxl_coll_args_t *a, int r, int w)
{
    if ((r == w) || !cxl_coll_move_publishes(a, w)) {
        return 0;
    }
    return (a->type != CXL_COLL_GATHER) || (r == a->root);
}

/*
 * The input of rank me's publication in such a step (where
 * cxl_coll_move_publishes(a, me)): block j at src + j * len where the
 * publication holds a block per rank (scatter, alltoall), else block 0.
 */
static inline const uint8_t *cxl_coll_move_src(const cxl_coll_args_t *a,
                                               int me, uint64_t len)
{
    int in_place = (a->sbuf == CXL_COLL_IN_PLACE);

    switch (a->type) {
    case CXL_COLL_BCAST:
        return (const uint8_t*)a->rbuf;
    case CXL_COLL_ALLGATHER:
        return in_place ? (const uint8_t*)a->rbuf + (size_t)me * len :
                          (const uint8_t*)a->sbuf;
    case CXL_COLL_ALLTOALL:
        /* in place too: published before rbuf changes */
        return in_place ? (const uint8_t*)a->rbuf : (const uint8_t*)a->sbuf;
    default:
        return (const uint8_t*)a->sbuf;
    }
}

/*
 * Rank me's own block of the result (len bytes), which moves by a local
 * copy, not through the pool: *from to *to, or *from = NULL where nothing
 * moves (no own block, or in place already).
 */
static inline void cxl_coll_move_own(const cxl_coll_args_t *a, int me,
                                     uint64_t len, const uint8_t **from,
                                     uint8_t **to)
{
    const uint8_t *sbuf = (const uint8_t*)a->sbuf;
    uint8_t *rbuf       = (uint8_t*)a->rbuf;
    int in_place        = (a->sbuf == CXL_COLL_IN_PLACE);

    *from = NULL;
    *to   = NULL;
    switch (a->type) {
    case CXL_COLL_GATHER:
        if ((me == a->root) && !in_place) {
            *from = sbuf;
            *to   = rbuf + (size_t)me * len;
        }
        break;
    case CXL_COLL_ALLGATHER:
        if (!in_place) {
            *from = sbuf;
            *to   = rbuf + (size_t)me * len;
        }
        break;
    case CXL_COLL_SCATTER:
        if ((me == a->root) && (a->rbuf != CXL_COLL_IN_PLACE)) {
            *from = sbuf + (size_t)me * len;
            *to   = rbuf;
        }
        break;
    case CXL_COLL_ALLTOALL:
        if (!in_place) {
            *from = sbuf + (size_t)me * len;
            *to   = rbuf + (size_t)me * len;
        }
        break;
    default:
        break;
    }
    if (*from == *to) {
        *from = NULL;
    }
}

/* reduce on up to this many ranks: rooted (one-shot in rounds) */
#define CXL_COLL_RED_ROOTED_MAX 3

/*
 * Whether a reduce or allreduce of bytes in nrounds rounds reduces
 * one-shot (coll_reduce_alg.c): small enough for one round, a reduce on
 * few ranks (the root reads p vectors once; two-shot moves more bytes
 * through it), or 2 ranks (two-shot crosses the same bytes as one-shot in
 * twice the steps).
 */
static inline int cxl_coll_red_oneshot(const cxl_coll_team_t *team,
                                       cxl_coll_type_t type, uint64_t bytes,
                                       uint64_t nrounds)
{
    return ((bytes <= team->cfg.oneshot_max) && (nrounds <= 1)) ||
           ((type == CXL_COLL_REDUCE) &&
            (team->size <= CXL_COLL_RED_ROOTED_MAX)) ||
           (team->size == 2);
}

/* Where a full round of req goes (after cxl_coll_plan_rounds). */
static inline cxl_coll_pub_kind_t cxl_coll_req_kind(const cxl_coll_req_t *req)
{
    return cxl_coll_pub_kind(req->nblocks, req->round, req->slot_stride);
}

#endif
