/*
 * The broker daemon's private state (doc/design/broker.md).  One thread
 * (the main loop) owns all of it; reader threads only fill chunk bytes
 * they were handed and report back through brk_fill_t; the scan thread of
 * an ADD only builds a brk_desc_t.
 */
#ifndef BRK_SRV_H
#define BRK_SRV_H

#include "brk_layout.h"
#include "brk_proto.h"
#include "brk_scan.h"

#include <ucx_cxl/cxlpool.h>
#include <ucp/api/ucp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>

typedef struct brk_srv     brk_srv_t;
typedef struct brk_vs      brk_vs_t;
typedef struct brk_conn    brk_conn_t;
typedef struct brk_handle  brk_handle_t;
typedef struct brk_pending brk_pending_t;

/* ---- serve parameters (cxl-broker serve) ---- */
typedef struct {
    const char *pool_path;      /* NULL: the per-user default pool */
    const char *listen;         /* "HOST:PORT"; NULL: the default address */
    uint64_t    capacity;       /* heap bytes at creation; 0: half the pool */
    uint64_t    chunk_size;     /* default of new datasets; 0: 4 MiB */
    unsigned    readers;        /* reader threads; 0: 4 */
    unsigned    readahead;      /* pin/lru read-ahead depth in chunks */
    int         buffered;       /* no O_DIRECT reads of dataset files */
    int         readahead_set;  /* 0: readahead is the default (readers) */
    int         verify;         /* CRC-check resident chunks at start */
    int         quiet;
} brk_serve_params_t;

int brk_serve(const brk_serve_params_t *params);

/* ---- heap: free ranges of the arena, in broker memory ---- */
typedef struct {
    uint64_t off, len;
} brk_range_t;

typedef struct {
    brk_range_t *free;          /* sorted by off, coalesced */
    uint64_t     nfree, cap;
    uint64_t     start, end;    /* heap bounds (arena offsets) */
    uint64_t     used;
} brk_heap_t;

int  brk_heap_init(brk_heap_t *heap, uint64_t start, uint64_t end);
void brk_heap_fini(brk_heap_t *heap);
/* 0 and *off, or -1 if no free range is large enough */
int  brk_heap_alloc(brk_heap_t *heap, uint64_t len, uint64_t *off);
/* take a specific range (restart: what the index says is in use) */
int  brk_heap_reserve(brk_heap_t *heap, uint64_t off, uint64_t len);
void brk_heap_free(brk_heap_t *heap, uint64_t off, uint64_t len);
uint64_t brk_heap_largest(const brk_heap_t *heap);

/* ---- reader threads ---- */
typedef struct brk_fill_job {
    struct brk_fill_job *next;
    brk_vs_t   *vs;
    uint32_t    chunk;
    uint8_t    *dst;            /* the chunk's bytes in the broker's mapping */
    /* results */
    int         status;         /* cxl_broker_status_t */
    uint32_t    crc;
    uint64_t    bytes_read;
    uint64_t    direct_bytes;   /* of them, read with O_DIRECT */
    double      seconds;
    char        err[BRK_ERRMSG_MAX];
} brk_fill_job_t;

typedef struct {
    pthread_mutex_t  lock;
    pthread_cond_t   cond;
    brk_fill_job_t  *todo, **todo_tail;
    brk_fill_job_t  *done;
    pthread_t       *threads;
    unsigned         nthreads;
    int              stop;
    int              efd;       /* eventfd: done jobs to collect */
    cxl_coh_mode_t   coh;
    int              direct;    /* O_DIRECT reads where aligned */
} brk_fill_t;

/* O_DIRECT: offsets, lengths and buffers in multiples of this (the
 * largest logical block size in use); files below BRK_DIO_MIN are read
 * through the page cache */
#define BRK_DIO_ALIGN 4096
#define BRK_DIO_MIN   (64 * 1024)

int  brk_fill_start(brk_fill_t *fill, unsigned nthreads, cxl_coh_mode_t coh,
                    int direct);
void brk_fill_stop(brk_fill_t *fill);
void brk_fill_post(brk_fill_t *fill, brk_fill_job_t *job);
brk_fill_job_t *brk_fill_collect(brk_fill_t *fill);

/* ---- runtime state of a dataset version ---- */
typedef struct brk_waiter {
    struct brk_waiter *next;
    brk_pending_t     *pend;
    uint32_t           slot;    /* entry of pend->ent */
} brk_waiter_t;

typedef struct {
    /* the chunk's state as this broker last published it: the pool's copy
     * (vs->states) is for readers and may be scribbled on by any process
     * of the pod, so the broker never reads it back after recovery */
    uint64_t      word, off, len;
    uint64_t      last_use;     /* lru: request clock */
    uint64_t      fill_seq;     /* pin: streamed chunks go first-in first-out */
    uint32_t      remote_pins;  /* pins of remote handles */
    uint8_t       pinned;       /* pin policy: part of the resident subset */
    uint8_t       warm;         /* filled by warm */
    uint64_t      tried;        /* alloc round that tried to evict it */
    brk_waiter_t *waiters;      /* while LOADING */
} brk_crt_t;

typedef struct {
    uint32_t *pos;              /* plan positions of each chunk, CSR */
    uint64_t *first;            /* nchunks + 1 */
    uint32_t *seq;              /* chunk at each plan position */
    uint64_t  len;              /* plan length in chunk steps */
    uint64_t  clock;            /* furthest position requested */
} brk_plan_t;

/*
 * The arena is pool memory that any process of the pod can write, so the
 * broker reads its own copies: rec of the version record (vrec is where
 * it writes), meta of the checked metadata blob (malloc'ed), crt[].word/
 * off/len of the chunk states.  The pool is only written.
 */
struct brk_vs {
    brk_vs_t           *next;
    uint32_t            slot;   /* in the version table */
    brk_vrec_t         *vrec;   /* the record in the arena: written only */
    brk_vrec_t          rec;    /* what it holds, read from here */
    const brk_meta_t   *meta;   /* own copy of the blob */
    const brk_sample_t *samples;
    const brk_chunk_t  *chunks;
    const brk_seg_t    *segs;
    const brk_file_t   *files;
    const char         *strings;
    brk_cstate_t       *states;
    brk_crt_t          *crt;
    brk_handle_t       *handles;    /* open handles */
    uint32_t            nhandles;
    uint32_t            inflight;   /* fill jobs outstanding */
    uint64_t            pinned_bytes;
    uint64_t            resident_chunks, resident_bytes;
    uint32_t            epoch;
    cxl_broker_epoch_stat_t *epochs; /* [0..nepochs) */
    uint32_t            nepochs;
    brk_plan_t          plan;
    uint32_t            ra_next;    /* read-ahead: next chunk to look at */
    uint32_t            ra_left;    /*   chunks still to look at; 0: idle */
};

/* ---- clients ---- */
struct brk_handle {
    brk_handle_t *next_in_vs;
    brk_handle_t *next_in_conn;
    uint64_t      id;
    brk_conn_t   *conn;
    brk_vs_t     *vs;
    uint64_t      bitmap_off;   /* local: the reader's pin bitmap */
    uint64_t      bitmap_len;
    uint32_t     *rpins;        /* remote: pins per chunk */
};

struct brk_conn {
    brk_conn_t   *next;
    ucp_ep_h      ep;
    uint64_t      id;
    uint64_t      token;        /* pool attachment of a local client */
    int32_t       pid;
    int           dead;
    ucs_status_t  status;       /* why the endpoint failed */
    char          host[64];
    brk_handle_t *handles;
};

/* a request waiting for chunks to become resident */
struct brk_pending {
    brk_conn_t    *conn;
    uint64_t       req_id;
    uint64_t       handle;
    uint32_t       remaining;
    uint32_t       flags;
    uint32_t       n;
    brk_pending_t *next;        /* srv->pendings */
    char           err[BRK_ERRMSG_MAX]; /* the first failure's text */
    brk_pin_ent_t  ent[];
};

/* an ADD being scanned by its own thread */
typedef struct brk_add_job {
    struct brk_add_job *next;
    brk_conn_t   *conn;
    uint64_t      req_id;
    brk_add_req_t req;
    char        **paths;
    unsigned      npaths;
    brk_desc_t    desc;
    int           rc;
    char          err[BRK_ERRMSG_MAX];
    pthread_t     thread;
    int           efd;          /* srv->add_efd */
    int           finished;
} brk_add_job_t;

struct brk_srv {
    brk_serve_params_t params;
    cxlpool_t      *pool;
    cxl_coh_mode_t  coh;
    uint8_t        *arena;      /* own mapping */
    uint8_t        *arena_ucp;  /* the mapping UCP keys (transport's) */
    uint64_t        arena_pool_off;
    uint64_t        arena_size;
    brk_hdr_t      *hdr;
    brk_vrec_t     *vrecs;
    brk_heap_t      heap;
    brk_fill_t      fill;
    brk_vs_t       *versions;
    brk_conn_t     *conns;
    brk_pending_t  *pendings;
    brk_add_job_t  *adds;
    uint64_t        next_id;
    uint64_t        clock;      /* chunk requests served */
    uint64_t        fill_seq;
    uint64_t        alloc_round;
    unsigned        prefetch;   /* plan: chunks ahead to fill */
    unsigned        readahead;  /* pin/lru: fills in flight after a miss */
    int             add_efd;    /* eventfd: an ADD scan finished */
    /* UCP */
    ucp_context_h   ucp;
    ucp_worker_h    worker;
    ucp_listener_h  listener;
    ucp_mem_h       memh;
    void           *rkey;
    size_t          rkey_len;
    char            addr[BRK_ADDR_MAX];
    /* counters */
    uint64_t        fills, fill_bytes, fill_errors, file_bytes_read;
    uint64_t        direct_bytes;
    uint64_t        hits, misses, evictions, readaheads;
    double          fill_seconds;
    volatile int    stop;
};

/* logging */
void brk_log(brk_srv_t *srv, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* arena: create or find, recover, version records */
int  brk_arena_open(brk_srv_t *srv, char *err, size_t errlen);
/* a new, empty arena of size bytes at base (its header and records) */
void brk_arena_format(brk_srv_t *srv, uint8_t *base, uint64_t size);
/* the header of an arena of size bytes: CXL_BROKER_OK or why not */
int  brk_arena_check_hdr(const brk_hdr_t *hdr, uint64_t size, char *err,
                         size_t errlen);
/* restart recovery on an arena whose header passed the check (and that no
 * live broker serves): rebuild the heap from the records, attach every
 * sound ACTIVE version, free unfinished and retired ones, drop chunks not
 * RESIDENT; touches nothing outside [base, base + size) */
int  brk_arena_recover(brk_srv_t *srv, uint8_t *base, uint64_t size,
                       char *err, size_t errlen);
void brk_arena_close(brk_srv_t *srv);
void brk_vrec_seal(brk_srv_t *srv, brk_vrec_t *vrec);
void brk_hdr_seal(brk_srv_t *srv);
brk_vs_t *brk_vs_attach(brk_srv_t *srv, uint32_t slot, char *err, size_t errlen);
void brk_vs_free(brk_srv_t *srv, brk_vs_t *vs);
brk_vs_t *brk_vs_find(brk_srv_t *srv, const char *name, uint32_t version);
/* publish a scanned dataset: 0, or a status with err filled */
int  brk_vs_publish(brk_srv_t *srv, const char *name, const brk_add_req_t *req,
                    brk_desc_t *desc, brk_vs_t **vs_p, char *err, size_t errlen);
void brk_vs_retire(brk_srv_t *srv, brk_vs_t *vs);
/* a retiring version with no readers and no fills: free it */
void brk_vs_reap(brk_srv_t *srv);
void brk_cstate_set(brk_srv_t *srv, brk_cstate_t *cs, uint64_t word);
/* publish chunk c's new state word, its own copy and the pool's */
void brk_chunk_publish(brk_srv_t *srv, brk_vs_t *vs, uint32_t c, uint64_t word);

/* cache: residency, fills, eviction */
/* ask for chunk c of vs on behalf of pend's entry slot */
void brk_cache_request(brk_srv_t *srv, brk_vs_t *vs, uint32_t c,
                       brk_pending_t *pend, uint32_t slot);
void brk_cache_fill_done(brk_srv_t *srv, brk_fill_job_t *job);
/* make room for len bytes (evicting by policy for vs): 0 and *off, or -1 */
int  brk_cache_alloc(brk_srv_t *srv, brk_vs_t *vs, uint64_t len,
                     int allow_evict_own, uint64_t *off);
/* evict chunk c if nobody pins it: 1 evicted, 0 pinned */
int  brk_cache_evict(brk_srv_t *srv, brk_vs_t *vs, uint32_t c);
int  brk_cache_pinned(brk_srv_t *srv, brk_vs_t *vs, uint32_t c);
/* a pending request got its last chunk: answer it */
void brk_pending_done(brk_srv_t *srv, brk_pending_t *pend);
cxl_broker_epoch_stat_t *brk_vs_epoch_stat(brk_vs_t *vs);

/* a read served from a chunk the client had pinned */
void brk_cache_touch(brk_srv_t *srv, brk_vs_t *vs, uint32_t c,
                     uint32_t reads);
/* start a fill nobody waits for (plan prefetch) into space at off */
void brk_cache_prefetch(brk_srv_t *srv, brk_vs_t *vs, uint32_t c, uint64_t off);
/* pin policy: bytes of vs that stay resident */
uint64_t brk_pin_budget(const brk_srv_t *srv, const brk_vs_t *vs);

/* eviction policies: the chunk to evict for a request of vs, or -1 */
int  brk_policy_victim(brk_srv_t *srv, brk_vs_t *for_vs, int allow_own,
                       brk_vs_t **vs_p, uint32_t *chunk_p);
int  brk_plan_set(brk_vs_t *vs, const uint64_t *order, uint64_t n);
void brk_plan_touch(brk_vs_t *vs, uint32_t chunk);
uint64_t brk_plan_next_use(const brk_vs_t *vs, uint32_t chunk);
void brk_plan_free(brk_plan_t *plan);
/* plan policy: start fills of the next chunks of the plan */
void brk_plan_prefetch(brk_srv_t *srv, brk_vs_t *vs);
/* a reader missed chunk c (c = UINT32_MAX: a fill finished): fill ahead,
 * plan by its prefetch, pin and lru by read-ahead of the chunks after c
 * into free space */
void brk_policy_ahead(brk_srv_t *srv, brk_vs_t *vs, uint32_t c);

/* requests (brk_req.c) */
void brk_req_dispatch(brk_srv_t *srv, brk_conn_t *conn, const brk_req_hdr_t *hdr,
                      const void *payload, size_t len);
void brk_reply(brk_srv_t *srv, brk_conn_t *conn, uint64_t req_id, uint32_t type,
               int status, const void *payload, size_t len);
void brk_reply_error(brk_srv_t *srv, brk_conn_t *conn, uint64_t req_id,
                     uint32_t type, int status, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
void brk_conn_drop(brk_srv_t *srv, brk_conn_t *conn, const char *why);
void brk_handle_close(brk_srv_t *srv, brk_handle_t *h);
struct brk_req_decoded;
void brk_add_start(brk_srv_t *srv, brk_conn_t *conn, uint64_t req_id,
                   const struct brk_req_decoded *req);
void brk_add_finish(brk_srv_t *srv);
void brk_req_unpin_failed(brk_srv_t *srv, brk_pending_t *pend);
void brk_lease_check(brk_srv_t *srv);

double brk_now(void);
uint64_t brk_now_ns(void);

#endif
