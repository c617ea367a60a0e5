/*
 * ucx-cxl dataset-chunk broker: client library (libcxl_broker).
 *
 * A broker daemon (`cxl-broker serve`) keeps one copy of each dataset's
 * chunks in a CXL pool for every reader of the pod.  A client connects
 * over UCP (UCX_TLS, default "cxl,tcp": through the pool inside the pod,
 * tcp from elsewhere), opens a dataset by name and version, and reads
 * samples with ucp_get from the pool into its own buffers.  A client that
 * maps the same pool also gets zero-copy views of resident samples.
 *
 * Errors: every call returns a cxl_broker_status_t; cxl_broker_last_error()
 * gives the full text of the last error on the calling thread (it names
 * the dataset, file, limit or address concerned).
 */
#ifndef UCX_CXL_BROKER_H
#define UCX_CXL_BROKER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    CXL_BROKER_OK = 0,
    CXL_BROKER_ERR_INVAL,        /* bad argument */
    CXL_BROKER_ERR_NOT_FOUND,    /* no such dataset or version */
    CXL_BROKER_ERR_CONNECT,      /* no broker at the address */
    CXL_BROKER_ERR_DISCONNECTED, /* the broker went away */
    CXL_BROKER_ERR_TIMEOUT,
    CXL_BROKER_ERR_NO_SPACE,     /* capacity too small for what is pinned */
    CXL_BROKER_ERR_IO,           /* the broker could not read a file */
    CXL_BROKER_ERR_CORRUPT,      /* a check failed (crc, metadata) */
    CXL_BROKER_ERR_STALE,        /* a chunk changed under a get */
    CXL_BROKER_ERR_UNSUPPORTED,  /* e.g. a view without the pool mapped */
    CXL_BROKER_ERR_UCX,          /* a UCX call failed */
    CXL_BROKER_ERR_NO_MEMORY,
    CXL_BROKER_ERR_EXISTS,
    CXL_BROKER_ERR_BUSY,
    CXL_BROKER_ERR_LAST
} cxl_broker_status_t;

typedef struct cxl_broker        cxl_broker_t;
typedef struct cxl_broker_ds     cxl_broker_ds_t;

/* Formats of datasets; the values are those of the pool layout. */
typedef enum {
    CXL_BROKER_FMT_AUTO = 0,
    CXL_BROKER_FMT_FILES,
    CXL_BROKER_FMT_NPY,
    CXL_BROKER_FMT_TAR,
    CXL_BROKER_FMT_RAW
} cxl_broker_format_t;

typedef enum {
    CXL_BROKER_POLICY_PIN = 0,
    CXL_BROKER_POLICY_LRU,
    CXL_BROKER_POLICY_PLAN
} cxl_broker_policy_t;

/* The address clients use when none is given: CXL_BROKER, else the one
 * the serving broker recorded in the default pool, else 127.0.0.1 and the
 * per-user default port. */
#define CXL_BROKER_ENV          "CXL_BROKER"
#define CXL_BROKER_DEFAULT_PORT_BASE 17300

const char *cxl_broker_strerror(cxl_broker_status_t status);
const char *cxl_broker_last_error(void);
/* The default address as above, into buf ("HOST:PORT"). */
const char *cxl_broker_default_addr(char *buf, size_t len);

/* ---- connection ---- */

typedef struct {
    const char *addr;           /* "HOST:PORT"; NULL: the default */
    double      timeout_s;      /* connect and each request; 0: 10 s */
    int         local;          /* -1 auto: map the broker's pool when this
                                   process can; 0 never; 1 required */
} cxl_broker_params_t;

/*
 * Environment read at connect:
 *   CXL_BROKER_PIN_CACHE=N  chunks a dataset handle keeps pinned between
 *                           reads (default 64)
 *   CXL_BROKER_COPY=map|get how cxl_broker_read() and _read_batch() copy a
 *                           pinned sample: map (default) copies out of this
 *                           process's own mapping of the pool when it maps
 *                           it, as a view reads; get always uses ucp_get,
 *                           as readers that do not map the pool do
 * A process that maps the broker's pool while its cxl transport attaches
 * other pools (UCX_CXL_POOL) gets one line on stderr at connect: its
 * requests and gets would otherwise go over tcp without a word.
 */
void cxl_broker_params_init(cxl_broker_params_t *params);
cxl_broker_status_t cxl_broker_connect(const cxl_broker_params_t *params,
                                       cxl_broker_t **broker_p);
void cxl_broker_disconnect(cxl_broker_t *broker);
/* Whether samples can be viewed in place (the pool is mapped here). */
int  cxl_broker_is_local(const cxl_broker_t *broker);

/* ---- datasets ---- */

typedef struct {
    char     name[48];
    uint32_t version;
    uint32_t format;            /* cxl_broker_format_t */
    uint32_t policy;            /* cxl_broker_policy_t */
    int      active;            /* 0: retiring (replaced or removed) */
    uint64_t nsamples;
    uint64_t nchunks;
    uint64_t nfiles;
    uint64_t bytes;
    uint64_t chunk_size;
    uint64_t resident_chunks;
    uint64_t resident_bytes;
    uint64_t pin_bytes;
    uint32_t readers;           /* open handles */
    uint32_t epoch;             /* last epoch a reader announced */
} cxl_broker_dsinfo_t;

typedef struct {
    cxl_broker_format_t format;
    cxl_broker_policy_t policy;
    uint64_t chunk_size;        /* 0: the broker's default */
    uint64_t record_size;       /* raw format */
    uint64_t pin_bytes;         /* pin policy; 0: what fits */
} cxl_broker_add_params_t;

void cxl_broker_add_params_init(cxl_broker_add_params_t *params);
/* Register (or re-register) a dataset; the version published in *info.
 * An unchanged dataset keeps its version. */
cxl_broker_status_t cxl_broker_add(cxl_broker_t *broker, const char *name,
                                   const char *const *paths, unsigned npaths,
                                   const cxl_broker_add_params_t *params,
                                   cxl_broker_dsinfo_t *info);
/* Retire a dataset: no new opens; freed when its last reader closes. */
cxl_broker_status_t cxl_broker_rm(cxl_broker_t *broker, const char *name);
/* Drop the resident chunks nobody pins (name NULL: of every dataset). */
cxl_broker_status_t cxl_broker_evict(cxl_broker_t *broker, const char *name,
                                     uint64_t *chunks_evicted);

typedef void (*cxl_broker_list_cb_t)(const cxl_broker_dsinfo_t *info, void *arg);
cxl_broker_status_t cxl_broker_list(cxl_broker_t *broker,
                                    cxl_broker_list_cb_t cb, void *arg);

/* version 0: the newest */
cxl_broker_status_t cxl_broker_open(cxl_broker_t *broker, const char *name,
                                    uint32_t version, cxl_broker_ds_t **ds_p);
void     cxl_broker_close(cxl_broker_ds_t *ds);
void     cxl_broker_ds_info(const cxl_broker_ds_t *ds, cxl_broker_dsinfo_t *info);
uint64_t cxl_broker_nsamples(const cxl_broker_ds_t *ds);
/* Length of sample i (0 if out of range). */
uint64_t cxl_broker_sample_len(const cxl_broker_ds_t *ds, uint64_t i);
/* The format-specific description of the file sample i comes from (e.g.
 * "descr=<f4 shape=3,32,32"), and that file's path; NULL if out of range.
 * Valid while ds is open. */
const char *cxl_broker_sample_info(const cxl_broker_ds_t *ds, uint64_t i,
                                   size_t *len);
const char *cxl_broker_sample_path(const cxl_broker_ds_t *ds, uint64_t i,
                                   size_t *len);
/* The format info every file of the dataset has (so every sample: one
 * dtype and row shape of .npy files), *len bytes, not NUL-terminated;
 * NULL when files differ or there are none. */
const char *cxl_broker_common_info(const cxl_broker_ds_t *ds, size_t *len);

/* Chunks: the unit of residency; chunk c holds samples [*first, *first +
 * *count), in order.  Streaming readers go chunk by chunk. */
uint64_t cxl_broker_nchunks(const cxl_broker_ds_t *ds);
int      cxl_broker_chunk_samples(const cxl_broker_ds_t *ds, uint64_t c,
                                  uint64_t *first, uint64_t *count);
/* The sample lengths as a flat array (nsamples entries, valid while ds is
 * open): for readers that index without a call per sample. */
cxl_broker_status_t cxl_broker_sample_lens(const cxl_broker_ds_t *ds,
                                           uint64_t *lens);

/* ---- reading ---- */

/* Copy sample i into buf (len >= its length) with ucp_get. */
cxl_broker_status_t cxl_broker_read(cxl_broker_ds_t *ds, uint64_t i,
                                    void *buf, size_t len, size_t *got);

typedef struct {
    uint64_t            index;  /* in: sample */
    void               *buf;    /* in: destination */
    size_t              len;    /* in: buffer size */
    size_t              got;    /* out: sample length */
    cxl_broker_status_t status; /* out */
} cxl_broker_iov_t;

/* Read n samples with many gets in flight; returns the first error. */
cxl_broker_status_t cxl_broker_read_batch(cxl_broker_ds_t *ds,
                                          cxl_broker_iov_t *iov, size_t n);

/* Read samples idx[0..n), each exactly row bytes long, back to back into
 * buf (n * row bytes): sample idx[k] at buf + k * row.  A batch of
 * samples of one length without a request vector from the caller (the
 * Python binding's batch path).  CXL_BROKER_ERR_INVAL names the first
 * index out of range or sample of another length; nothing is read then. */
cxl_broker_status_t cxl_broker_read_rows(cxl_broker_ds_t *ds,
                                         const uint64_t *idx, size_t n,
                                         void *buf, size_t row);

/* A zero-copy view of resident sample i in this process's mapping of the
 * pool (cxl_broker_is_local()); its chunk stays pinned until released. */
typedef struct {
    const void *data;
    size_t      len;
    uint64_t    chunk;          /* private */
} cxl_broker_view_t;

cxl_broker_status_t cxl_broker_view(cxl_broker_ds_t *ds, uint64_t i,
                                    cxl_broker_view_t *view);
void cxl_broker_view_release(cxl_broker_ds_t *ds, cxl_broker_view_t *view);

/* Load every chunk of the dataset into the pool; progress through cb
 * (bytes resident of total) about every 100 ms. */
typedef void (*cxl_broker_progress_cb_t)(uint64_t done, uint64_t total,
                                         void *arg);
cxl_broker_status_t cxl_broker_warm(cxl_broker_ds_t *ds,
                                    cxl_broker_progress_cb_t cb, void *arg);

/* Announce an epoch and (optionally) its sample order, for per-epoch hit
 * counts and the plan policy's prefetch and eviction by next use. */
cxl_broker_status_t cxl_broker_epoch(cxl_broker_ds_t *ds, uint32_t epoch,
                                     const uint64_t *order, uint64_t n);

/* ---- statistics ---- */

typedef struct {
    char     name[48];
    uint32_t version;
    uint32_t epoch;
    uint64_t hits;              /* chunk requests found resident */
    uint64_t misses;            /* chunk requests that needed a fill */
    uint64_t fills;
    uint64_t fill_bytes;        /* bytes read from files */
    uint64_t evictions;
} cxl_broker_epoch_stat_t;

typedef struct {
    uint64_t capacity;
    uint64_t used;              /* metadata and chunks */
    uint64_t chunk_bytes;
    uint64_t resident_chunks;
    uint64_t pinned_chunks;
    uint64_t fills, fill_bytes, fill_errors;
    uint64_t file_bytes_read;   /* every byte read from files */
    uint64_t direct_bytes;      /* of them, read with O_DIRECT */
    uint64_t hits, misses, evictions;
    uint64_t readaheads;        /* fills started by read-ahead (no reader
                                   waited for them when they started) */
    uint32_t clients;
    uint32_t boot;
    double   fill_seconds;      /* summed over reader threads */
    char     pool[256];
    char     addr[64];
} cxl_broker_stat_t;

typedef void (*cxl_broker_epoch_cb_t)(const cxl_broker_epoch_stat_t *st,
                                      void *arg);
cxl_broker_status_t cxl_broker_stat(cxl_broker_t *broker,
                                    cxl_broker_stat_t *stat,
                                    cxl_broker_epoch_cb_t cb, void *arg);

#ifdef __cplusplus
}
#endif

#endif
