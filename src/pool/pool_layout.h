/*
 * On-media layout of a ucx-cxl pool (layout version 1.1).
 *
 * All integers little-endian, all references offsets from the pool base.
 * Every structure is cache-line aligned and, where possible, each cache
 * line has one writer (see doc/design/pool-layout.md for who writes what).
 *
 *   0        superblock      (4 KiB, written once at format)
 *   4 KiB    metadata locks  (1 line per host partition, written by the
 *                             lock holder of that partition)
 *   8 KiB    attachment table: max_attach x 128 B
 *   ...      extent table:     max_extents x 64 B   (4 KiB aligned)
 *   heap_off heap, 2 MiB aligned, to the end of the pool
 *
 * Layout 1.1 adds host partitions (sb.nr_hosts, 0 in 1.0 pools = 1): host
 * partition k owns lock line k, a contiguous share of the attachment slots
 * and extent records, and heap arena k.  Only processes of host k write
 * them, so no line is written by two hosts (see cxlpool_part_* below).
 */
#ifndef CXLPOOL_LAYOUT_H
#define CXLPOOL_LAYOUT_H

#include <stdint.h>
#include <ucx_cxl/cxlpool.h>

#ifdef __cplusplus
#define CXLPOOL_STATIC_ASSERT static_assert
#else
#define CXLPOOL_STATIC_ASSERT _Static_assert
#endif

#define CXLPOOL_MAGIC          0x4c4f4f504c584355ull /* "UCXLPOOL" */
#define CXLPOOL_VERSION_MAJOR  1
#define CXLPOOL_VERSION_MINOR  1
#define CXLPOOL_LINE           64
#define CXLPOOL_SB_SIZE        4096ull
#define CXLPOOL_LOCK_OFFSET    4096ull
#define CXLPOOL_ATTACH_OFFSET  8192ull
#define CXLPOOL_HEAP_ALIGN     (2ull << 20)
#define CXLPOOL_MIN_SIZE       (4ull << 20)

/* Superblock: written once by the formatter, read-only afterwards. */
typedef struct {
    uint64_t magic;
    uint32_t version_major;
    uint32_t version_minor;
    uint8_t  uuid[CXLPOOL_UUID_LEN];
    uint64_t size;            /* bytes of the whole pool */
    uint64_t create_ns;       /* CLOCK_REALTIME at format */
    uint64_t attach_offset;
    uint32_t max_attach;
    uint32_t attach_rec_size;
    uint64_t extent_offset;
    uint32_t max_extents;
    uint32_t extent_rec_size;
    uint64_t heap_offset;
    uint64_t heap_size;
    uint32_t coherence;       /* cxl_coh_mode_t the pool was made for */
    uint32_t flags;
    uint8_t  reserved[16];
    uint32_t nr_hosts;        /* host partitions; 0 (layout 1.0) means 1 */
    uint32_t crc;             /* crc32c of everything above */
} __attribute__((aligned(CXLPOOL_LINE))) cxlpool_sb_t;

/*
 * Metadata lock.  token is claimed with CAS; the holder then fills in the
 * rest so that others can tell a dead holder from a slow one.
 */
typedef struct {
    volatile uint64_t token;      /* 0 = free, else holder's lock token */
    volatile uint64_t acquire_ns; /* CLOCK_REALTIME when taken */
    volatile uint64_t start_time; /* holder's process start time */
    volatile uint64_t host_id;
    uint8_t  pad[32];
} __attribute__((aligned(CXLPOOL_LINE))) cxlpool_lock_t;

#define CXLPOOL_ATT_FREE   0u
#define CXLPOOL_ATT_ACTIVE 0x41435456u /* "ACTV" */

/*
 * Attachment record: line 0 is written under the metadata lock when the
 * slot is claimed or reclaimed; line 1 only by the owner (heartbeat).
 */
typedef struct {
    /* line 0: identity */
    volatile uint32_t state;
    uint32_t gen;             /* bumped on every claim */
    uint64_t host_id;         /* hash of boot id + pid namespace */
    uint64_t start_time;      /* owner's /proc start time (clock ticks) */
    uint64_t attach_ns;
    int32_t  pid;
    uint32_t lease_ms;
    char     hostname[20];
    uint32_t crc;             /* crc32c of line 0 before this field */
    /* line 1: liveness, owner-written */
    volatile uint64_t heartbeat_ns __attribute__((aligned(CXLPOOL_LINE)));
    uint8_t  pad[56];
} __attribute__((aligned(CXLPOOL_LINE))) cxlpool_attach_rec_t;

#define CXLPOOL_EXT_FREE      0u
#define CXLPOOL_EXT_ALLOCATED 0x414c4c43u /* "ALLC" */

/*
 * Extent record, written only under the metadata lock.  Fields first,
 * then state: a record is part of the heap only once state says so.
 */
typedef struct {
    volatile uint32_t state;
    uint32_t crc;             /* crc32c over the record with crc = 0 */
    uint64_t owner;           /* attachment token, 0 = persistent */
    uint64_t offset;
    uint64_t length;
    uint32_t gen;             /* bumped on every reuse of the record */
    uint32_t flags;
    char     name[CXLPOOL_NAME_MAX];
} __attribute__((aligned(CXLPOOL_LINE))) cxlpool_extent_rec_t;

CXLPOOL_STATIC_ASSERT(sizeof(cxlpool_sb_t) == 2 * CXLPOOL_LINE, "superblock size");
CXLPOOL_STATIC_ASSERT(sizeof(cxlpool_lock_t) == CXLPOOL_LINE, "lock size");
CXLPOOL_STATIC_ASSERT(sizeof(cxlpool_attach_rec_t) == 2 * CXLPOOL_LINE, "attach size");
CXLPOOL_STATIC_ASSERT(sizeof(cxlpool_extent_rec_t) == CXLPOOL_LINE, "extent size");

/* Attachment token: slot index + 1 in the high half, slot generation low. */
static inline uint64_t cxlpool_token_make(uint32_t slot, uint32_t gen)
{
    return ((uint64_t)(slot + 1) << 32) | gen;
}

static inline uint32_t cxlpool_token_slot(uint64_t token)
{
    return (uint32_t)(token >> 32) - 1;
}

static inline uint32_t cxlpool_token_gen(uint64_t token)
{
    return (uint32_t)token;
}

/*
 * Host partitions.  Partition k of n owns items [k*count/n, (k+1)*count/n)
 * of a table of count items (attachment slots, extent records), so with
 * n = 1 the whole table is partition 0, as in layout 1.0.
 */
static inline uint32_t cxlpool_sb_nr_hosts(const cxlpool_sb_t *sb)
{
    return sb->nr_hosts ? sb->nr_hosts : 1;
}

static inline uint32_t cxlpool_part_first(uint32_t count, uint32_t nr_hosts,
                                          uint32_t k)
{
    return (uint32_t)(((uint64_t)count * k) / nr_hosts);
}

/* The partition that owns item i: inverse of cxlpool_part_first(). */
static inline uint32_t cxlpool_part_of(uint32_t count, uint32_t nr_hosts,
                                       uint32_t i)
{
    return (uint32_t)((((uint64_t)i + 1) * nr_hosts - 1) / count);
}

/*
 * Heap arena size: the heap split into nr_hosts equal parts, each a
 * multiple of 2 MiB; the last arena also takes the remainder, so one
 * partition's arena is the whole heap.
 */
static inline uint64_t cxlpool_arena_size(const cxlpool_sb_t *sb)
{
    return (sb->heap_size / cxlpool_sb_nr_hosts(sb)) & ~(CXLPOOL_HEAP_ALIGN - 1);
}

static inline uint64_t cxlpool_arena_start(const cxlpool_sb_t *sb, uint32_t k)
{
    return sb->heap_offset + (uint64_t)k * cxlpool_arena_size(sb);
}

static inline uint64_t cxlpool_arena_end(const cxlpool_sb_t *sb, uint32_t k)
{
    return (k + 1 == cxlpool_sb_nr_hosts(sb)) ? sb->size :
           cxlpool_arena_start(sb, k + 1);
}

#endif
