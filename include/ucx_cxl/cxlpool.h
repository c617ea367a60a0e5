/*
 * ucx-cxl pool layer: a persistent, checksummed, offset-based memory pool
 * that many processes (and hosts) map at the same time.
 *
 * A pool lives on a devdax device (/dev/daxX.Y), on a file (DAX filesystem
 * or any path), or in the emulated default: a shared file under /dev/shm.
 * Nothing in the pool is a pointer: every reference is an offset from the
 * pool base, so each process may map it at any address.
 */
#ifndef UCX_CXL_CXLPOOL_H
#define UCX_CXL_CXLPOOL_H

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#include <ucx_cxl/coherence.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cxlpool cxlpool_t;

typedef enum {
    CXLPOOL_OK = 0,
    CXLPOOL_ERR_INVAL,         /* bad argument */
    CXLPOOL_ERR_NOENT,         /* pool does not exist */
    CXLPOOL_ERR_EXISTS,        /* pool already exists (create refused) */
    CXLPOOL_ERR_PERM,          /* caller may not use the pool */
    CXLPOOL_ERR_BAD_MAGIC,     /* not a ucx-cxl pool */
    CXLPOOL_ERR_VERSION,       /* unknown layout version */
    CXLPOOL_ERR_CHECKSUM,      /* superblock checksum mismatch */
    CXLPOOL_ERR_TRUNCATED,     /* backing store smaller than the pool */
    CXLPOOL_ERR_RESIZED,       /* backing store larger than the pool */
    CXLPOOL_ERR_CORRUPT,       /* inconsistent metadata */
    CXLPOOL_ERR_NO_SPACE,      /* no free extent large enough */
    CXLPOOL_ERR_NO_SLOT,       /* attachment or extent table full */
    CXLPOOL_ERR_NOT_FOUND,     /* no such allocation / name */
    CXLPOOL_ERR_BUSY,          /* pool in use (destroy refused) */
    CXLPOOL_ERR_IO,            /* system call failed */
    CXLPOOL_ERR_UNSUPPORTED,   /* not possible on this backend/machine */
    CXLPOOL_ERR_STALE,         /* key refers to a freed/reused extent */
    CXLPOOL_ERR_LAST
} cxlpool_status_t;

typedef enum {
    CXLPOOL_BACKEND_EMULATED = 0, /* shared file under /dev/shm, or on a
                                     hugetlbfs mount (/dev/hugepages/...):
                                     huge pages are asked for by the path */
    CXLPOOL_BACKEND_FILE,         /* any file, e.g. on a DAX filesystem */
    CXLPOOL_BACKEND_DEVDAX,       /* /dev/daxX.Y character device */
    CXLPOOL_BACKEND_EMULATE_NC    /* "emulate-nc:PATH": a strict emulator of
                                     a non-coherent multi-host pool; every
                                     emulated host maps a private view */
} cxlpool_backend_t;

/* Path prefix that selects the non-coherent pool emulator. */
#define CXLPOOL_EMULATE_NC_PREFIX "emulate-nc:"
/* Host partitions of a pool (software-coherent pools share one per host). */
#define CXLPOOL_MAX_HOSTS         64
/* Host partitions of a software-coherent pool created with nr_hosts = 0. */
#define CXLPOOL_DEFAULT_SW_HOSTS  8
/*
 * cxlpool_host_index() of a handle without an attachment (NO_ATTACH,
 * READONLY) whose partition could not be chosen: it may read the pool,
 * and its writes (allocation, free, repair) fail naming UCX_CXL_HOST_INDEX.
 */
#define CXLPOOL_HOST_INDEX_NONE   0xffffffffu

/* cxlpool_params_t.flags */
enum {
    CXLPOOL_CREATE       = 1u << 0, /* format if the pool does not exist */
    CXLPOOL_EXCL         = 1u << 1, /* with CREATE: fail if it exists */
    CXLPOOL_GROUP        = 1u << 2, /* create 0660 instead of 0600 */
    CXLPOOL_NO_ATTACH    = 1u << 4, /* map only, take no attachment slot */
    CXLPOOL_NO_HEARTBEAT = 1u << 5, /* no lease thread (short-lived tools) */
    CXLPOOL_FORCE        = 1u << 6, /* format a devdax device that holds a pool */
    CXLPOOL_READONLY     = 1u << 7  /* map read-only (implies NO_ATTACH): for
                                       inspection; writes would fault */
};

typedef struct {
    const char     *path;        /* NULL: the per-user emulated default */
    uint64_t        size;        /* bytes, for create; 0: default */
    unsigned        flags;
    int             numa_node;   /* -1: no binding */
    uint32_t        max_extents; /* 0: derived from the size */
    uint32_t        max_attach;  /* 0: default */
    uint32_t        lease_ms;    /* heartbeat lease; 0: default */
    cxl_coh_mode_t  coherence;
    uint32_t        nr_hosts;    /* create: host partitions; 0: 1 for hw,
                                    CXLPOOL_DEFAULT_SW_HOSTS for sw */
    int             host_index;  /* which partition this process's host
                                    writes; -1: auto (UCX_CXL_HOST_INDEX,
                                    the emulator's choice, or 0 when the
                                    pool has one partition) */
} cxlpool_params_t;

#define CXLPOOL_NAME_MAX      24   /* including the terminating NUL */
#define CXLPOOL_UUID_LEN      16
#define CXLPOOL_MAX_ALIGN     (2ull << 20)
#define CXLPOOL_MIN_ALIGN     64ull

/* cxlpool_alloc() flags */
enum {
    CXLPOOL_ALLOC_PERSIST = 1u << 0  /* owned by the pool, survives the caller */
};

typedef struct {
    uint64_t offset;   /* from the pool base */
    uint64_t length;
    uint32_t index;    /* extent record index */
    uint32_t gen;      /* record generation: changes on every reuse */
    uint64_t owner;    /* owner token, 0 for persistent extents */
    unsigned flags;
    char     name[CXLPOOL_NAME_MAX];
} cxlpool_extent_t;

typedef struct {
    uint64_t heap_size;
    uint64_t used_bytes;
    uint64_t free_bytes;
    uint64_t largest_free;
    uint32_t free_ranges;
    uint32_t extents_used;
    uint32_t extents_max;
    uint32_t attach_used;
    uint32_t attach_max;
    double   fragmentation;  /* 1 - largest_free / free_bytes */
} cxlpool_stats_t;

typedef struct {
    uint32_t slot;
    uint32_t gen;
    uint64_t token;
    int      pid;
    uint64_t start_time;
    uint64_t attach_ns;
    uint64_t heartbeat_ns;
    uint32_t lease_ms;
    int      same_host;
    int      alive;
    char     hostname[32];
} cxlpool_attach_info_t;

typedef struct {
    uint8_t          uuid[CXLPOOL_UUID_LEN];
    uint64_t         size;
    uint32_t         version_major;
    uint32_t         version_minor;
    uint64_t         create_ns;
    uint64_t         heap_offset;
    cxlpool_backend_t backend;
    cxl_coh_mode_t   coherence;
    uint64_t         map_align;
    uint32_t         nr_hosts;     /* host partitions in the layout */
    uint32_t         host_index;   /* this process's partition */
    char             path[256];
    /* the pages the mapping is backed by: 4 KiB pages cost every process
     * a fault per page it first touches, 2 MiB ones (DAX, hugetlbfs, tmpfs
     * with huge=) 512 times fewer */
    uint64_t         page_size;
    char             page_source[48]; /* e.g. "tmpfs huge=within_size" */
} cxlpool_info_t;

void        cxlpool_params_init(cxlpool_params_t *params);
/* CRC32C (Castagnoli) of a buffer, continuing from crc (0 to start). */
uint32_t    cxlpool_crc32c(uint32_t crc, const void *buf, size_t len);
const char *cxlpool_strerror(cxlpool_status_t status);
/* Full text of the last error on this thread: names the pool and the remedy. */
const char *cxlpool_last_error(void);
/* The per-user emulated default path: /dev/shm/ucx-cxl-<uid>.pool */
const char *cxlpool_default_path(char *buf, size_t len);
/* Default size of an emulated pool: UCX_CXL_POOL_SIZE or 1 GiB. */
uint64_t    cxlpool_default_size(void);
/* A size: decimal digits, then an optional k/m/g/t (binary units, any
 * case) with optional "i" and "b" ("4m", "2GiB").  Returns 0, or -1 for
 * anything else or a value past 2^64 - 1. */
int         cxlpool_parse_size(const char *str, uint64_t *size);
/* Decimal digits only, at most max: 0, or -1 (no sign, blank or suffix). */
int         cxlpool_parse_uint(const char *str, uint64_t max, uint64_t *value);
/* A host index as UCX_CXL_HOST_INDEX gives it: NULL or "auto" -> -1, a
 * decimal 0..CXLPOOL_MAX_HOSTS-1 -> itself.  Returns 0, or -1 if invalid. */
int         cxlpool_parse_host_index(const char *str, int *index);

cxlpool_status_t cxlpool_open(const cxlpool_params_t *params, cxlpool_t **pool_p);
void             cxlpool_close(cxlpool_t *pool);
/* Remove a pool: unlink a file, wipe the superblock of a devdax device. */
cxlpool_status_t cxlpool_destroy(const char *path, int force);

void            *cxlpool_base(cxlpool_t *pool);
uint64_t         cxlpool_size(cxlpool_t *pool);
cxl_coh_mode_t   cxlpool_coherence(cxlpool_t *pool);
void             cxlpool_info(cxlpool_t *pool, cxlpool_info_t *info);
/* Own attachment token (0 if opened with CXLPOOL_NO_ATTACH). */
uint64_t         cxlpool_token(cxlpool_t *pool);
/* Host partitions of the pool, and the one this process writes. */
uint32_t         cxlpool_nr_hosts(cxlpool_t *pool);
uint32_t         cxlpool_host_index(cxlpool_t *pool);

cxlpool_status_t cxlpool_alloc(cxlpool_t *pool, uint64_t length, uint64_t align,
                               const char *name, unsigned flags,
                               cxlpool_extent_t *extent);
cxlpool_status_t cxlpool_free(cxlpool_t *pool, uint64_t offset);
cxlpool_status_t cxlpool_lookup(cxlpool_t *pool, const char *name,
                                cxlpool_extent_t *extent);
/* Check that (index, gen) still names an allocated extent covering the range. */
cxlpool_status_t cxlpool_extent_check(cxlpool_t *pool, uint32_t index,
                                      uint32_t gen, uint64_t offset,
                                      uint64_t length);
/* Find the allocated extent that covers [offset, offset + length). */
cxlpool_status_t cxlpool_extent_find(cxlpool_t *pool, uint64_t offset,
                                     uint64_t length, cxlpool_extent_t *extent);
cxlpool_status_t cxlpool_stats(cxlpool_t *pool, cxlpool_stats_t *stats);

typedef void (*cxlpool_extent_cb_t)(const cxlpool_extent_t *extent, void *arg);
typedef void (*cxlpool_attach_cb_t)(const cxlpool_attach_info_t *att, void *arg);
cxlpool_status_t cxlpool_foreach_extent(cxlpool_t *pool, cxlpool_extent_cb_t cb,
                                        void *arg);
cxlpool_status_t cxlpool_foreach_attach(cxlpool_t *pool, cxlpool_attach_cb_t cb,
                                        void *arg);

/*
 * Whether the attachment named by token (as stored in extents and in
 * transport structures) is alive: same host by pid, other hosts by lease.
 * Token 0 (the pool itself) is always alive.
 */
int              cxlpool_owner_alive(cxlpool_t *pool, uint64_t token);

/* Refresh the own lease (also done by the heartbeat thread). */
void             cxlpool_heartbeat(cxlpool_t *pool);

typedef struct {
    uint32_t bad_records;     /* extent/attach records failing their checksum */
    uint32_t overlaps;        /* allocated extents that overlap */
    uint32_t out_of_bounds;   /* extents outside the heap */
    uint32_t dead_attach;     /* attachments of dead processes */
    uint32_t dead_extents;    /* extents held by dead owners */
    uint64_t dead_bytes;
    uint32_t reclaimed_extents;
    uint32_t reclaimed_attach;
    int      lock_recovered;  /* a dead holder's lock was broken */
    /* of dead_attach/dead_extents: those in other hosts' partitions, which
       repair leaves to a process of their host */
    uint32_t other_dead_attach;
    uint32_t other_dead_extents;
} cxlpool_check_report_t;

typedef void (*cxlpool_check_msg_cb_t)(const char *line, void *arg);

/*
 * Verify every checksum and every extent of every host partition; report
 * dead owners through cb.  With repair != 0, reclaim exactly the extents
 * and attachments of dead owners in this process's own host partition
 * (others are counted in other_dead_*).  Records failing their checksum
 * are reported, never rewritten.
 */
cxlpool_status_t cxlpool_check(cxlpool_t *pool, int repair,
                               cxlpool_check_report_t *report,
                               cxlpool_check_msg_cb_t cb, void *arg);
/* Reclaim what dead owners of the own host partition hold (done at attach
   and on lease expiry too). */
cxlpool_status_t cxlpool_recover(cxlpool_t *pool, uint32_t *extents,
                                 uint32_t *attachments);

/*
 * The other shared mappings of the pool's file in this process (the
 * transport's, for one), each as (start, length, pool offset of start).
 * Not for the non-coherent emulator (CXLPOOL_ERR_UNSUPPORTED).
 */
typedef void (*cxlpool_mapping_cb_t)(void *start, uint64_t len,
                                     uint64_t pool_off, void *arg);
cxlpool_status_t cxlpool_foreach_mapping(cxlpool_t *pool,
                                         cxlpool_mapping_cb_t cb, void *arg);

/* devdax devices as libdaxctl reports them */
typedef struct {
    char     path[64];
    uint64_t size;
    uint64_t align;
    int      numa_node;
    int      region_id;
    int      enabled;
    int      system_ram;   /* onlined as system RAM: refused as a pool */
} cxlpool_devdax_info_t;

typedef void (*cxlpool_devdax_cb_t)(const cxlpool_devdax_info_t *info, void *arg);
cxlpool_status_t cxlpool_devdax_foreach(cxlpool_devdax_cb_t cb, void *arg);

/*
 * Read and validate a pool's superblock without mapping or writing it.
 * Gives the same distinct errors as cxlpool_open().
 */
cxlpool_status_t cxlpool_probe(const char *path, cxlpool_info_t *info);

#ifdef __cplusplus
}
#endif

#endif
