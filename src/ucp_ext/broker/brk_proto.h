/*
 * The broker's wire protocol: UCP active messages.  A request is
 * BRK_AM_REQ with a brk_req_hdr_t header and a payload, sent with
 * UCP_AM_SEND_FLAG_REPLY; the broker answers on the reply endpoint with
 * BRK_AM_REP, a brk_rep_hdr_t header (same req_id) and a payload, or on a
 * failure a status and one line of text.  Chunk bytes never travel in
 * messages: readers ucp_get them from the arena.
 *
 * Both ends are little-endian with the same structure layout (x86-64);
 * proto_version guards against mismatched builds.
 */
#ifndef BRK_PROTO_H
#define BRK_PROTO_H

#include "brk_layout.h"

#include <ucx_cxl/broker.h>
#include <stdint.h>

#define BRK_PROTO_VERSION  2u
#define BRK_AM_REQ         0x62u
#define BRK_AM_REP         0x63u
#define BRK_RKEY_MAX       4096u
#define BRK_PATH_MAX       256u
#define BRK_ERRMSG_MAX     512u

typedef enum {
    BRK_REQ_HELLO = 1,
    BRK_REQ_OPEN,
    BRK_REQ_CLOSE,
    BRK_REQ_PIN,        /* make chunks resident; a remote handle also pins */
    BRK_REQ_UNPIN,      /* remote handles; no answer */
    BRK_REQ_EPOCH,
    BRK_REQ_ADD,
    BRK_REQ_RM,
    BRK_REQ_EVICT,
    BRK_REQ_LIST,
    BRK_REQ_STAT,
    BRK_REQ_TOUCH,      /* reads served from pinned chunks; no answer */
    BRK_REQ_LAST
} brk_req_type_t;

typedef struct {
    uint32_t type;          /* brk_req_type_t */
    uint32_t proto;         /* BRK_PROTO_VERSION */
    uint64_t req_id;
} brk_req_hdr_t;

typedef struct {
    uint32_t type;
    int32_t  status;        /* cxl_broker_status_t */
    uint64_t req_id;
} brk_rep_hdr_t;

/* HELLO: the client's process, for the broker's log and `stat`. */
typedef struct {
    int32_t  pid;
    uint32_t pad;
    char     host[64];
} brk_hello_req_t;

/* ... answered with where the arena is and the key to reach it. */
typedef struct {
    uint64_t arena_va;      /* the broker's address of the arena (gets) */
    uint64_t arena_size;
    uint64_t arena_pool_off;/* the arena's offset in the pool */
    uint8_t  pool_uuid[16];
    char     pool_path[BRK_PATH_MAX];
    uint32_t coherence;     /* cxl_coh_mode_t of the pool */
    uint32_t rkey_len;
    /* rkey_len bytes of packed UCP key follow */
} brk_hello_rep_t;

/* OPEN: by name and version (0: newest); token: the client's own pool
 * attachment when it maps the pool (its lease guards its pins), else 0. */
typedef struct {
    char     name[BRK_NAME_MAX];
    uint32_t version;
    uint32_t local;         /* 1: keeps a pin bitmap in the arena */
    uint64_t token;
} brk_open_req_t;

typedef struct {
    uint64_t handle;
    uint64_t dsid;
    uint32_t version;
    uint32_t format;
    uint64_t nsamples;
    uint64_t nchunks;
    uint64_t meta_off;      /* arena offsets */
    uint64_t meta_len;
    uint64_t states_off;
    uint64_t bitmap_off;    /* 0 for remote handles */
    uint64_t bitmap_len;
} brk_open_rep_t;

typedef struct {
    uint64_t handle;
} brk_handle_req_t;

/* PIN / UNPIN: n chunk numbers follow.  TOUCH: n (chunk, reads) pairs of
 * uint32 follow, the reads the client served from chunks it had pinned
 * (hits the broker never saw), distinct chunks in the order of their first
 * read since the last TOUCH, so LRU recency, the plan's clock and hit
 * counts stay true to within one batch. */
enum {
    BRK_PIN_FILL_ONLY = 1u << 0,  /* warm: fill, take no pin, evict nothing
                                     resident of this dataset */
};

typedef struct {
    uint64_t handle;
    uint32_t n;
    uint32_t flags;
    /* uint32_t chunk[n], or for TOUCH brk_touch_ent_t[n] */
} brk_pin_req_t;

typedef struct {
    uint32_t chunk;
    uint32_t reads;
} brk_touch_ent_t;

typedef struct {
    uint32_t chunk;
    int32_t  status;
    uint64_t word;          /* brk_cstate_t.word when it became resident */
    uint64_t off;           /* arena offset of the bytes */
    uint64_t len;
} brk_pin_ent_t;

typedef struct {
    uint32_t n;
    uint32_t pad;
    /* brk_pin_ent_t ent[n] */
} brk_pin_rep_t;

typedef struct {
    uint64_t handle;
    uint32_t epoch;
    uint32_t pad;
    uint64_t n;             /* 0: no order (epoch counters only) */
    /* uint64_t order[n] */
} brk_epoch_req_t;

/* ADD: npaths NUL-terminated paths follow. */
typedef struct {
    char     name[BRK_NAME_MAX];
    uint32_t format;
    uint32_t policy;
    uint64_t chunk_size;
    uint64_t record_size;
    uint64_t pin_bytes;
    uint32_t npaths;
    uint32_t pad;
} brk_add_req_t;

/* RM, EVICT: by name ("" for EVICT: every dataset). */
typedef struct {
    char     name[BRK_NAME_MAX];
} brk_name_req_t;

typedef struct {
    uint64_t count;
} brk_count_rep_t;

/* LIST: n cxl_broker_dsinfo_t follow. STAT: the stat, then n epoch stats. */
typedef struct {
    uint32_t n;
    uint32_t pad;
} brk_list_rep_t;

#endif
