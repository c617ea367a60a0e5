/*
 * Extent allocator.
 *
 * The extent table is the only allocation metadata: free space is what no
 * allocated record covers.  So there is no free list to corrupt, and a crash
 * at any store leaves a consistent heap: a record counts only once its state
 * word says ALLOCATED, and it is written last.  Allocation is first fit over
 * the gaps between allocated extents, under the metadata lock.
 *
 * With host partitions a process allocates from its host's heap arena and
 * records and frees only extents recorded there; every host reads all
 * records (invalidating each line first) for lookups and key checks.
 */
#include "pool_int.h"
#include "emulate_nc.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t offset;
    uint64_t length;
} cxlpool_range_t;

static int cxlpool_range_cmp(const void *a, const void *b)
{
    const cxlpool_range_t *ra = a, *rb = b;

    return (ra->offset > rb->offset) - (ra->offset < rb->offset);
}

/*
 * A private copy of record index (any process that maps the pool may write
 * the table): 1 if it is an allocated extent that passes its checksum and
 * lies inside the heap, the only records readers report or act on.
 */
static int cxlpool_extent_read(cxlpool_t *pool, uint32_t index,
                               cxlpool_extent_rec_t *rec)
{
    const cxlpool_sb_t *sb = pool->sb;

    cxl_coh_invalidate(pool->coh, &pool->ext[index], sizeof(*rec));
    memcpy(rec, (const void*)&pool->ext[index], sizeof(*rec));
    return (rec->state == CXLPOOL_EXT_ALLOCATED) &&
           (cxlpool_extent_crc(rec) == rec->crc) &&
           (rec->offset >= sb->heap_offset) && (rec->offset < sb->size) &&
           !(rec->offset % CXLPOOL_MIN_ALIGN) && (rec->length != 0) &&
           (rec->length <= sb->size - rec->offset);
}

/*
 * Sorted list of allocated ranges in records [first, end), each clipped to
 * [lo, hi); caller frees.  Any record in the allocated state counts, even
 * one that fails its checks: the allocator keeps off what it may cover.
 */
static cxlpool_range_t *cxlpool_used_ranges(cxlpool_t *pool, uint32_t first,
                                            uint32_t end, uint64_t lo,
                                            uint64_t hi, uint32_t *count)
{
    cxlpool_range_t *ranges;
    cxlpool_extent_rec_t rec;
    uint64_t start, stop;
    uint32_t i, n = 0;

    ranges = malloc(sizeof(*ranges) * (end - first + 1));
    if (ranges == NULL) {
        return NULL;
    }

    for (i = first; i < end; ++i) {
        cxlpool_extent_read(pool, i, &rec);
        if (rec.state != CXLPOOL_EXT_ALLOCATED) {
            continue;
        }
        start = (rec.offset > lo) ? rec.offset : lo;
        stop  = (rec.length > UINT64_MAX - rec.offset) ? UINT64_MAX :
                rec.offset + rec.length;
        stop  = (stop < hi) ? stop : hi;
        if (start < stop) {
            ranges[n].offset = start;
            ranges[n].length = stop - start;
            ++n;
        }
    }

    qsort(ranges, n, sizeof(*ranges), cxlpool_range_cmp);
    *count = n;
    return ranges;
}

/* First fit in [cursor, end) among the sorted used ranges. */
static int cxlpool_find_gap(uint64_t cursor, uint64_t end,
                            const cxlpool_range_t *used, uint32_t n,
                            uint64_t length, uint64_t align, uint64_t *offset)
{
    uint64_t start;
    uint32_t i;

    for (i = 0; i <= n; ++i) {
        uint64_t gap_end = (i < n) ? used[i].offset : end;

        start = (cursor + align - 1) & ~(align - 1);
        if ((start <= gap_end) && (gap_end - start >= length)) {
            *offset = start;
            return 1;
        }
        if ((i < n) && (used[i].offset + used[i].length > cursor)) {
            cursor = used[i].offset + used[i].length;
        }
    }
    return 0;
}

static void cxlpool_fill_extent(const cxlpool_extent_rec_t *rec, uint32_t index,
                                cxlpool_extent_t *out)
{
    out->offset = rec->offset;
    out->length = rec->length;
    out->index  = index;
    out->gen    = rec->gen;
    out->owner  = rec->owner;
    out->flags  = rec->flags;
    memcpy(out->name, rec->name, sizeof(out->name));
    out->name[CXLPOOL_NAME_MAX - 1] = '\0';
}

/* Index of the extent called name (its copy in *rec), -1 if none. */
static int cxlpool_find_name(cxlpool_t *pool, const char *name,
                             cxlpool_extent_rec_t *rec)
{
    uint32_t i;

    for (i = 0; i < pool->sb->max_extents; ++i) {
        if (cxlpool_extent_read(pool, i, rec) &&
            !strncmp(rec->name, name, CXLPOOL_NAME_MAX)) {
            return (int)i;
        }
    }
    return -1;
}

cxlpool_status_t cxlpool_alloc(cxlpool_t *pool, uint64_t length, uint64_t align,
                               const char *name, unsigned flags,
                               cxlpool_extent_t *extent)
{
    cxlpool_extent_rec_t *rec = NULL;
    cxlpool_status_t status   = CXLPOOL_OK;
    cxlpool_extent_rec_t copy;
    cxlpool_range_t *used;
    uint64_t offset, arena_start, arena_end;
    uint32_t i, n, first, end;

    status = cxlpool_partition_required(pool, "allocate");
    if (status != CXLPOOL_OK) {
        return status;
    }
    arena_start = cxlpool_arena_start(pool->sb, pool->host_index);
    arena_end   = cxlpool_arena_end(pool->sb, pool->host_index);

    if (align == 0) {
        align = CXLPOOL_MIN_ALIGN;
    }
    if ((length == 0) || (align & (align - 1)) || (align > CXLPOOL_MAX_ALIGN) ||
        (length > arena_end - arena_start)) {
        return cxlpool_error(CXLPOOL_ERR_INVAL,
                             "%s: bad allocation request: length %" PRIu64
                             ", alignment %" PRIu64 " (alignment must be a "
                             "power of two up to 2 MiB, length non-zero and at "
                             "most the heap arena size %" PRIu64 ")",
                             pool->path, length, align,
                             arena_end - arena_start);
    }
    if (align < CXLPOOL_MIN_ALIGN) {
        align = CXLPOOL_MIN_ALIGN;
    }
    if ((name != NULL) && ((*name == '\0') || (strlen(name) >= CXLPOOL_NAME_MAX))) {
        return cxlpool_error(CXLPOOL_ERR_INVAL,
                             "%s: allocation name must have 1-%d characters",
                             pool->path, CXLPOOL_NAME_MAX - 1);
    }
    if (!(flags & CXLPOOL_ALLOC_PERSIST) && (pool->token == 0)) {
        return cxlpool_error(CXLPOOL_ERR_INVAL,
                             "%s: this handle is not attached (opened with "
                             "CXLPOOL_NO_ATTACH): only persistent allocations "
                             "are possible", pool->path);
    }

    length = (length + CXLPOOL_MIN_ALIGN - 1) & ~(CXLPOOL_MIN_ALIGN - 1);

    cxlpool_lock(pool);

    if ((name != NULL) && (cxlpool_find_name(pool, name, &copy) >= 0)) {
        status = cxlpool_error(CXLPOOL_ERR_EXISTS,
                               "%s: an allocation named '%s' already exists",
                               pool->path, name);
        goto out;
    }

    cxlpool_own_records(pool, &first, &end);
    for (i = first; i < end; ++i) {
        cxl_coh_invalidate(pool->coh, &pool->ext[i], sizeof(pool->ext[i]));
        if (pool->ext[i].state == CXLPOOL_EXT_FREE) {
            rec = &pool->ext[i];
            break;
        }
    }
    if (rec == NULL) {
        status = cxlpool_error(CXLPOOL_ERR_NO_SLOT,
                               "%s: all %u extent records of host partition "
                               "%u (of %u) are in use; free some or recreate "
                               "the pool with more extents", pool->path,
                               end - first, pool->host_index, pool->nr_hosts);
        goto out;
    }

    /* only this partition's records can place extents in its arena */
    used = cxlpool_used_ranges(pool, first, end, arena_start, arena_end, &n);
    if (used == NULL) {
        status = cxlpool_error(CXLPOOL_ERR_NO_SPACE, "%s: out of memory",
                               pool->path);
        goto out;
    }
    if (!cxlpool_find_gap(arena_start, arena_end, used, n, length, align,
                          &offset)) {
        free(used);
        status = cxlpool_error(CXLPOOL_ERR_NO_SPACE,
                               "%s: no free extent of %" PRIu64 " bytes "
                               "(alignment %" PRIu64 ") in the heap arena of "
                               "host partition %u", pool->path, length, align,
                               pool->host_index);
        goto out;
    }
    free(used);

    /* body first, state last: a crash before the state store loses nothing */
    rec->owner  = (flags & CXLPOOL_ALLOC_PERSIST) ? 0 : pool->token;
    rec->offset = offset;
    rec->length = length;
    rec->gen   += 1;
    rec->flags  = flags;
    memset(rec->name, 0, sizeof(rec->name));
    if (name != NULL) {
        strncpy(rec->name, name, sizeof(rec->name) - 1);
    }
    rec->crc = cxlpool_extent_crc(rec);
    cxl_coh_publish(pool->coh, rec, sizeof(*rec));
    cxlpool_fault_point("alloc-record");
    rec->state = CXLPOOL_EXT_ALLOCATED;
    cxl_coh_publish(pool->coh, rec, sizeof(*rec));
    cxlpool_fault_point("alloc-published");

    memcpy(&copy, rec, sizeof(copy));
    cxlpool_fill_extent(&copy, (uint32_t)(rec - pool->ext), extent);

out:
    cxlpool_unlock(pool);
    return status;
}

/* Record of the allocated extent starting at offset, max_extents if none. */
static uint32_t cxlpool_find_offset(cxlpool_t *pool, uint32_t first,
                                    uint32_t end, uint64_t offset)
{
    cxlpool_extent_rec_t rec;
    uint32_t i;

    for (i = first; i < end; ++i) {
        if (cxlpool_extent_read(pool, i, &rec) && (rec.offset == offset)) {
            return i;
        }
    }
    return pool->sb->max_extents;
}

void cxlpool_extent_release_locked(cxlpool_t *pool, cxlpool_extent_rec_t *rec)
{
    rec->state = CXLPOOL_EXT_FREE;
    cxl_coh_publish(pool->coh, rec, sizeof(*rec));
    if (pool->emu != NULL) {
        cxlpool_emu_discard(pool, rec->offset, rec->length);
    }
}

cxlpool_status_t cxlpool_free(cxlpool_t *pool, uint64_t offset)
{
    cxlpool_status_t status = CXLPOOL_OK;
    cxlpool_extent_rec_t *rec = NULL;
    uint32_t i, first, end, part;

    status = cxlpool_partition_required(pool, "free");
    if (status != CXLPOOL_OK) {
        return status;
    }

    cxlpool_own_records(pool, &first, &end);
    cxlpool_lock(pool);
    i = cxlpool_find_offset(pool, first, end, offset);
    if (i < pool->sb->max_extents) {
        rec = &pool->ext[i];
        if ((rec->owner != 0) && (rec->owner != pool->token)) {
            status = cxlpool_error(CXLPOOL_ERR_PERM,
                                   "%s: the allocation at offset 0x%" PRIx64
                                   " belongs to another process", pool->path,
                                   offset);
        } else {
            cxlpool_extent_release_locked(pool, rec);
        }
        goto out;
    }

    /* not in this partition: tell a foreign extent from a missing one */
    i = cxlpool_find_offset(pool, 0, pool->sb->max_extents, offset);
    if (i < pool->sb->max_extents) {
        part   = cxlpool_record_part(pool, i);
        status = cxlpool_error(CXLPOOL_ERR_PERM,
                               "%s: the allocation at offset 0x%" PRIx64
                               " belongs to host partition %u, and only "
                               "processes of that host may free it (this "
                               "process writes partition %u)", pool->path,
                               offset, part, pool->host_index);
    } else {
        status = cxlpool_error(CXLPOOL_ERR_NOT_FOUND,
                               "%s: no allocation starts at offset 0x%" PRIx64,
                               pool->path, offset);
    }
out:
    cxlpool_unlock(pool);
    return status;
}

cxlpool_status_t cxlpool_lookup(cxlpool_t *pool, const char *name,
                                cxlpool_extent_t *extent)
{
    cxlpool_extent_rec_t rec;
    int index;

    if ((name == NULL) || (*name == '\0')) {
        return cxlpool_error(CXLPOOL_ERR_INVAL, "%s: empty name", pool->path);
    }

    /* records are published state-last, so a lock-free scan is consistent */
    index = cxlpool_find_name(pool, name, &rec);
    if (index < 0) {
        return cxlpool_error(CXLPOOL_ERR_NOT_FOUND,
                             "%s: no allocation named '%s'", pool->path, name);
    }
    cxlpool_fill_extent(&rec, (uint32_t)index, extent);
    return CXLPOOL_OK;
}

cxlpool_status_t cxlpool_extent_check(cxlpool_t *pool, uint32_t index,
                                      uint32_t gen, uint64_t offset,
                                      uint64_t length)
{
    cxlpool_extent_rec_t rec;

    if (index >= pool->sb->max_extents) {
        return cxlpool_error(CXLPOOL_ERR_INVAL,
                             "%s: extent index %u out of range", pool->path,
                             index);
    }

    if (!cxlpool_extent_read(pool, index, &rec) || (rec.gen != gen)) {
        return cxlpool_error(CXLPOOL_ERR_STALE,
                             "%s: extent %u generation %u was freed or reused",
                             pool->path, index, gen);
    }
    if ((offset < rec.offset) || (length > rec.length) ||
        (offset - rec.offset > rec.length - length)) {
        return cxlpool_error(CXLPOOL_ERR_INVAL,
                             "%s: range 0x%" PRIx64 "+%" PRIu64 " is outside "
                             "extent %u", pool->path, offset, length, index);
    }
    return CXLPOOL_OK;
}

cxlpool_status_t cxlpool_extent_find(cxlpool_t *pool, uint64_t offset,
                                     uint64_t length, cxlpool_extent_t *extent)
{
    cxlpool_extent_rec_t rec;
    uint32_t i;

    for (i = 0; i < pool->sb->max_extents; ++i) {
        if (cxlpool_extent_read(pool, i, &rec) && (offset >= rec.offset) &&
            (length <= rec.length) && (offset - rec.offset <= rec.length - length)) {
            cxlpool_fill_extent(&rec, i, extent);
            return CXLPOOL_OK;
        }
    }
    return cxlpool_error(CXLPOOL_ERR_NOT_FOUND,
                         "%s: no allocated extent covers 0x%" PRIx64 "+%" PRIu64,
                         pool->path, offset, length);
}

/* Account the free gaps of heap arena k (used: all extents, sorted). */
static void cxlpool_stats_arena(cxlpool_t *pool, uint32_t k,
                                const cxlpool_range_t *used, uint32_t n,
                                cxlpool_stats_t *stats)
{
    uint64_t cursor = cxlpool_arena_start(pool->sb, k);
    uint64_t end    = cxlpool_arena_end(pool->sb, k);
    uint64_t gap_end, gap;
    uint32_t i;

    for (i = 0; (i <= n) && (cursor < end); ++i) {
        gap_end = ((i < n) && (used[i].offset < end)) ? used[i].offset : end;
        gap     = (gap_end > cursor) ? gap_end - cursor : 0;
        if (gap > 0) {
            stats->free_bytes += gap;
            stats->free_ranges++;
            if (gap > stats->largest_free) {
                stats->largest_free = gap;
            }
        }
        if ((i < n) && (used[i].offset + used[i].length > cursor)) {
            cursor = used[i].offset + used[i].length;
        }
    }
}

cxlpool_status_t cxlpool_stats(cxlpool_t *pool, cxlpool_stats_t *stats)
{
    cxlpool_range_t *used;
    uint32_t i, n;

    /* a report, not a decision: no lock, so read-only handles can use it */
    memset(stats, 0, sizeof(*stats));
    used = cxlpool_used_ranges(pool, 0, pool->sb->max_extents,
                               pool->sb->heap_offset, pool->sb->size, &n);
    if (used == NULL) {
        return cxlpool_error(CXLPOOL_ERR_NO_SPACE, "%s: out of memory",
                             pool->path);
    }

    /* no extent spans two arenas, so free space is counted per arena */
    for (i = 0; i < pool->nr_hosts; ++i) {
        cxlpool_stats_arena(pool, i, used, n, stats);
    }
    for (i = 0; i < n; ++i) {
        stats->used_bytes += used[i].length;
    }
    free(used);

    stats->heap_size     = pool->sb->heap_size;
    stats->extents_used  = n;
    stats->extents_max   = pool->sb->max_extents;
    stats->attach_max    = pool->sb->max_attach;
    for (i = 0; i < pool->sb->max_attach; ++i) {
        cxl_coh_invalidate(pool->coh, &pool->att[i], sizeof(pool->att[i]));
        stats->attach_used += (pool->att[i].state == CXLPOOL_ATT_ACTIVE);
    }
    stats->fragmentation = stats->free_bytes ?
                           1.0 - (double)stats->largest_free / stats->free_bytes :
                           0.0;
    return CXLPOOL_OK;
}

cxlpool_status_t cxlpool_foreach_extent(cxlpool_t *pool, cxlpool_extent_cb_t cb,
                                        void *arg)
{
    cxlpool_extent_rec_t rec;
    cxlpool_extent_t extent;
    uint32_t i;

    for (i = 0; i < pool->sb->max_extents; ++i) {
        if (cxlpool_extent_read(pool, i, &rec)) {
            cxlpool_fill_extent(&rec, i, &extent);
            cb(&extent, arg);
        }
    }
    return CXLPOOL_OK;
}
