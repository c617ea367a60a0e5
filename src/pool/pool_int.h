/*
 * Internal interfaces of the pool layer.
 */
#ifndef CXLPOOL_INT_H
#define CXLPOOL_INT_H

#include "pool_layout.h"

#include <pthread.h>
#include <stdarg.h>

/* A backend knows how to open, create, map and remove one kind of store. */
typedef struct cxlpool_backend_ops {
    const char *name;
    /* Open an existing store read-write; fill *size and *align. */
    cxlpool_status_t (*open)(const char *path, int rdonly, int *fd,
                             uint64_t *size, uint64_t *align);
    /*
     * Make a new store of params->size, format it with fmt() and make it
     * visible under path atomically: racing creators see one format.
     */
    cxlpool_status_t (*create)(const cxlpool_params_t *params, const char *path,
                               cxlpool_status_t (*fmt)(void *base, uint64_t size,
                                                       const cxlpool_params_t *p));
    /* map_align: the store's mapping alignment (a device's align) */
    cxlpool_status_t (*destroy)(const char *path, int fd, uint64_t map_align);
} cxlpool_backend_ops_t;

extern const cxlpool_backend_ops_t cxlpool_backend_file_ops;
extern const cxlpool_backend_ops_t cxlpool_backend_devdax_ops;

/*
 * The smallest mapping of a device dax store: the kernel refuses (EINVAL)
 * any mapping whose start or end is not aligned to the device alignment,
 * which may be 1 GiB.
 */
static inline uint64_t cxlpool_devdax_map_len(uint64_t align)
{
    return (align > CXLPOOL_HEAP_ALIGN) ? align : CXLPOOL_HEAP_ALIGN;
}

struct cxlpool {
    char                   path[256];
    cxlpool_backend_t      backend;
    const cxlpool_backend_ops_t *ops;
    int                    fd;
    int                    rdonly;
    uint8_t               *base;
    uint64_t               size;
    uint64_t               map_align;
    uint64_t               page_size;   /* what the mapping is backed by */
    char                   page_source[48]; /* why (pool_pages.c) */
    cxl_coh_mode_t         coh;
    cxlpool_sb_t          *sb;          /* &sb_copy: the validated copy */
    cxlpool_sb_t           sb_copy;     /* read and checked at open; the
                                           mapped one may change under us */
    cxlpool_lock_t        *lock;        /* own partition's lock line */
    cxlpool_attach_rec_t  *att;
    cxlpool_extent_rec_t  *ext;
    uint64_t               host_id;
    uint32_t               nr_hosts;    /* host partitions (1 for v1.0) */
    uint32_t               host_index;  /* own partition, or
                                           CXLPOOL_HOST_INDEX_NONE */
    struct cxlpool_emu    *emu;         /* emulate-nc state, else NULL */
    uint64_t               lock_token;  /* this process's metadata lock token */
    uint64_t               start_time;  /* this process's, read once at
                                           open: the attachment record and
                                           every lock fill store it */
    uint64_t               token;       /* attachment token, 0 if none */
    uint32_t               slot;
    uint32_t               lock_broken; /* dead holders' locks broken */
    uint32_t               reclaimed_ext; /* totals of recover_locked() */
    uint32_t               reclaimed_att;
    pthread_t              hb_thread;
    int                    hb_running;
    pthread_mutex_t        hb_mutex;
    pthread_cond_t         hb_cond;
    int                    hb_stop;
};

/* The page size a store's mapping gets, and why (pool_pages.c). */
uint64_t cxlpool_store_page_size(cxlpool_backend_t kind, int fd,
                                 uint64_t align, char *source, size_t len);

/* errors */
cxlpool_status_t cxlpool_error(cxlpool_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
cxlpool_status_t cxlpool_error_errno(int err, const char *path, const char *what);

/* crc32c; the portable table version, for the test that checks the
 * instruction path against it */
uint32_t cxlpool_crc32c_table(uint32_t crc, const void *buf, size_t len);
uint32_t cxlpool_sb_crc(const cxlpool_sb_t *sb);
uint32_t cxlpool_attach_crc(const cxlpool_attach_rec_t *rec);
uint32_t cxlpool_extent_crc(const cxlpool_extent_rec_t *rec);

/* validation of a superblock read from the store (no writes) */
cxlpool_status_t cxlpool_sb_validate(const char *path, const cxlpool_sb_t *sb,
                                     uint64_t store_size);
cxlpool_status_t cxlpool_format(void *base, uint64_t size,
                                const cxlpool_params_t *params);

/* NUMA: validate a node, bind a mapping to it */
cxlpool_status_t cxlpool_numa_check(const char *path, int node);
cxlpool_status_t cxlpool_numa_bind(const char *path, void *addr, uint64_t len,
                                   int node);

/* system identity */
uint64_t cxlpool_host_id(void);
uint64_t cxlpool_proc_start_time(int pid);  /* 0: no such process */
uint64_t cxlpool_now_ns(void);

/*
 * Host partitions (pool_partition.c).  partition_init() reads nr_hosts from
 * the superblock; host_resolve() picks the partition this process writes
 * and points pool->lock at its lock line.  A handle that takes no
 * attachment may stay without a partition (CXLPOOL_HOST_INDEX_NONE) as
 * long as it only reads; writers call partition_required() first.
 */
void             cxlpool_partition_init(cxlpool_t *pool);
cxlpool_status_t cxlpool_host_resolve(cxlpool_t *pool,
                                      const cxlpool_params_t *params);
cxlpool_status_t cxlpool_partition_required(cxlpool_t *pool, const char *what);
/* [*first, *end) of the own partition's attachment slots / extent records */
void             cxlpool_own_slots(cxlpool_t *pool, uint32_t *first,
                                   uint32_t *end);
void             cxlpool_own_records(cxlpool_t *pool, uint32_t *first,
                                     uint32_t *end);
uint32_t         cxlpool_slot_part(cxlpool_t *pool, uint32_t slot);
uint32_t         cxlpool_record_part(cxlpool_t *pool, uint32_t index);

/* metadata lock (the own partition's line) */
typedef struct {
    uint64_t start_time;
    uint64_t acquire_ns;
    uint64_t token;
} cxlpool_lock_look_t;

/* What one wait for the lock has seen of its holders (zeroed per wait) */
typedef struct {
    cxlpool_lock_look_t reused;     /* a look under a reused pid */
    cxlpool_lock_look_t seen;       /* the acquisition seen since ... */
    uint64_t            seen_since; /* ... this time (0: none yet) */
} cxlpool_lock_wait_t;

void cxlpool_lock(cxlpool_t *pool);
void cxlpool_unlock(cxlpool_t *pool);
int  cxlpool_lock_holder_dead(cxlpool_t *pool, cxlpool_lock_wait_t *wait,
                              uint64_t token);

/* Mark an extent free (caller holds the lock); the emulator drops its bytes. */
void cxlpool_extent_release_locked(cxlpool_t *pool, cxlpool_extent_rec_t *rec);

/* attachments (caller holds the lock unless noted) */
cxlpool_status_t cxlpool_attach_claim(cxlpool_t *pool, uint32_t lease_ms);
void             cxlpool_attach_release(cxlpool_t *pool);
int              cxlpool_attach_alive(cxlpool_t *pool, uint32_t slot);
void             cxlpool_attach_fill_info(cxlpool_t *pool, uint32_t slot,
                                          cxlpool_attach_info_t *info);
int              cxlpool_token_alive(cxlpool_t *pool, uint64_t token);
uint32_t         cxlpool_reclaim_token_locked(cxlpool_t *pool, uint64_t token);
cxlpool_status_t cxlpool_recover_locked(cxlpool_t *pool, uint32_t *extents,
                                        uint32_t *attachments);
int              cxlpool_heartbeat_start(cxlpool_t *pool);
void             cxlpool_heartbeat_stop(cxlpool_t *pool);

/* test-only fault injection: CXLPOOL_TEST_CRASH_AT=<point> kills the process */
void cxlpool_fault_point(const char *point);

#endif
