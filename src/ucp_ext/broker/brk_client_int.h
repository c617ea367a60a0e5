/*
 * Client library internals: the connection (brk_client.c), requests
 * (brk_call.c), and the read path (brk_read.c).
 */
#ifndef BRK_CLIENT_INT_H
#define BRK_CLIENT_INT_H

#include "brk_layout.h"
#include "brk_proto.h"

#include <ucx_cxl/broker.h>
#include <ucx_cxl/cxlpool.h>
#include <ucp/api/ucp.h>
#include <stdarg.h>

#define BRK_CALL_SLOTS 8

typedef struct {
    uint64_t req_id;            /* 0: free */
    brk_req_hdr_t hdr;          /* read by UCP until the send completes */
    void    *sreq;              /* the send, until it completes */
    int      done;
    int      status;
    void    *data;              /* malloc'ed reply payload */
    size_t   len;
} brk_call_slot_t;

struct cxl_broker {
    ucp_context_h   ucp;
    ucp_worker_h    worker;
    ucp_ep_h        ep;
    ucp_rkey_h      rkey;
    double          timeout;
    int             dead;       /* the endpoint failed */
    ucs_status_t    ep_status;
    uint64_t        next_req;
    brk_call_slot_t slots[BRK_CALL_SLOTS];
    char            addr[BRK_ADDR_MAX];
    /* the arena */
    uint64_t        arena_va;
    uint64_t        arena_size;
    uint64_t        arena_pool_off;
    uint8_t         uuid[16];
    char            pool_path[BRK_PATH_MAX];
    /* local: this process maps the pool too */
    cxlpool_t      *pool;
    uint8_t        *arena;      /* own mapping, NULL if remote */
    const uint8_t  *arena_ro;   /* views' mapping: read-only, else arena */
    void           *ro_map;     /* that read-only mapping, if made */
    uint64_t        ro_len;
    unsigned        pin_cache;  /* chunks a handle keeps pinned */
    int             copy_get;   /* CXL_BROKER_COPY=get: reads always ucp_get */
    int             copy_mapped; /* reads memcpy out of arena_ro */
};

struct cxl_broker_ds {
    cxl_broker_t       *b;
    brk_open_rep_t      rep;
    char                name[BRK_NAME_MAX];
    void               *meta_copy; /* remote: the blob, fetched once */
    const brk_meta_t   *meta;      /* local: in the pool, a peer can write it */
    brk_meta_t          mh;        /* its header as checked: what is used */
    const brk_sample_t *samples;
    const brk_chunk_t  *chunks;
    const brk_file_t   *files;
    const char         *strings;
    const brk_cstate_t *states;    /* local only */
    uint64_t           *bitmap;    /* local only: written only here */
    /* pin cache, per chunk */
    uint64_t           *pin_word;  /* 0: not pinned */
    uint64_t           *pin_off;
    uint32_t           *views;
    uint32_t           *lru_prev, *lru_next;
    uint32_t            lru_head, lru_tail;
    uint32_t            npinned;
    uint32_t           *unpin_buf; /* remote: pins to give back */
    uint32_t            nunpin;
    /* reads from pinned chunks, to report: one entry per distinct chunk,
     * touch_slot[c] = its index + 1 (0: none yet) */
    brk_touch_ent_t    *touch_buf;
    uint32_t           *touch_slot;
    uint32_t            ntouch;
    uint32_t            touch_reads;
};

#define BRK_NIL         UINT32_MAX
/* A TOUCH goes out after this many distinct chunks or reads.  Each message
 * wakes a sleeping broker (a write and a cross-CPU wake-up: ~15 us on this
 * VM), so one per 256 reads cost 10-14 % of 4 KiB reads; counted entries
 * make it one per 4096 reads at the same or better recency per chunk. */
#define BRK_TOUCH       256
#define BRK_TOUCH_READS 4096

/* report the reads served from pinned chunks (before any request) */
void brk_touch_flush(cxl_broker_ds_t *ds);

/* errors: set the thread's last error and return the status */
cxl_broker_status_t brk_cerr(cxl_broker_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
cxl_broker_status_t brk_req_failed(cxl_broker_t *b, ucs_status_t us,
                                   const char *what);
double brk_cnow(void);

/* requests: post one (slot index >= 0, or a status < 0 negated), wait */
int  brk_call_post(cxl_broker_t *b, uint32_t type, const void *payload,
                   size_t len, int want_reply);
cxl_broker_status_t brk_call_wait(cxl_broker_t *b, int slot, void **data,
                                  size_t *len);
/* post and wait; on failure the error text is the broker's */
cxl_broker_status_t brk_call(cxl_broker_t *b, uint32_t type,
                             const void *payload, size_t len,
                             void **data, size_t *rlen);
cxl_broker_status_t brk_get(cxl_broker_t *b, void *buf, size_t len,
                            uint64_t arena_off);
int brk_client_init_am(cxl_broker_t *b);

#endif
