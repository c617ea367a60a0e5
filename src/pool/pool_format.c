/*
 * Formatting a pool and validating its superblock.
 *
 * Validation only reads: a pool that fails it is never written to.
 */
#include "pool_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/syscall.h>

#define CXLPOOL_DEFAULT_ATTACH 256u

static uint64_t cxlpool_align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) & ~(a - 1);
}

static void cxlpool_gen_uuid(uint8_t *uuid)
{
    ssize_t n = 0;
    int fd;

    fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = read(fd, uuid, CXLPOOL_UUID_LEN);
        close(fd);
    }
    if (n != CXLPOOL_UUID_LEN) {
        uint64_t t = cxlpool_now_ns() ^ ((uint64_t)getpid() << 40);
        memcpy(uuid, &t, 8);
        t = cxlpool_crc32c((uint32_t)t, &t, sizeof(t)) * 0x9e3779b97f4a7c15ull;
        memcpy(uuid + 8, &t, 8);
    }
    uuid[6] = (uuid[6] & 0x0f) | 0x40; /* RFC 4122 version 4 */
    uuid[8] = (uuid[8] & 0x3f) | 0x80;
}

/* Host partitions a new pool gets: 0 means 1 for hw, several for sw. */
static uint32_t cxlpool_create_hosts(const cxlpool_params_t *params)
{
    if (params->nr_hosts != 0) {
        return params->nr_hosts;
    }
    return (params->coherence == CXL_COH_SW) ? CXLPOOL_DEFAULT_SW_HOSTS : 1;
}

/* Lay out the tables for a pool of the given size. */
static cxlpool_status_t cxlpool_layout(cxlpool_sb_t *sb, uint64_t size,
                                       const cxlpool_params_t *params)
{
    uint64_t max_ext   = params->max_extents;
    uint64_t max_att   = params->max_attach ? params->max_attach :
                         CXLPOOL_DEFAULT_ATTACH;
    uint32_t nr_hosts  = cxlpool_create_hosts(params);

    if (max_ext == 0) {
        max_ext = size / (64 * 1024);
        max_ext = (max_ext < 1024) ? 1024 : (max_ext > 65536) ? 65536 : max_ext;
    }

    /* every partition needs a lock line, a slot, a record and an arena */
    if ((nr_hosts > CXLPOOL_MAX_HOSTS) || (max_att < nr_hosts) ||
        (max_ext < nr_hosts)) {
        return cxlpool_error(CXLPOOL_ERR_INVAL,
                             "%u host partitions are not possible: at most %u, "
                             "and at most one per attachment slot (%" PRIu64
                             ") and extent record (%" PRIu64 ")", nr_hosts,
                             CXLPOOL_MAX_HOSTS, max_att, max_ext);
    }

    memset(sb, 0, sizeof(*sb));
    sb->version_major   = CXLPOOL_VERSION_MAJOR;
    sb->version_minor   = CXLPOOL_VERSION_MINOR;
    sb->size            = size;
    sb->create_ns       = cxlpool_now_ns();
    sb->attach_offset   = CXLPOOL_ATTACH_OFFSET;
    sb->max_attach      = (uint32_t)max_att;
    sb->attach_rec_size = sizeof(cxlpool_attach_rec_t);
    sb->extent_offset   = cxlpool_align_up(CXLPOOL_ATTACH_OFFSET +
                                           max_att * sizeof(cxlpool_attach_rec_t),
                                           4096);
    sb->max_extents     = (uint32_t)max_ext;
    sb->extent_rec_size = sizeof(cxlpool_extent_rec_t);
    sb->heap_offset     = cxlpool_align_up(sb->extent_offset +
                                           max_ext * sizeof(cxlpool_extent_rec_t),
                                           CXLPOOL_HEAP_ALIGN);
    sb->coherence       = params->coherence;
    sb->nr_hosts        = nr_hosts;

    if ((size < CXLPOOL_MIN_SIZE) || (sb->heap_offset + CXLPOOL_HEAP_ALIGN > size)) {
        return cxlpool_error(CXLPOOL_ERR_INVAL,
                             "pool size %" PRIu64 " is too small: metadata "
                             "needs %" PRIu64 " bytes plus at least 2 MiB of "
                             "heap (minimum 4 MiB)",
                             size, sb->heap_offset);
    }

    sb->heap_size = size - sb->heap_offset;
    if (cxlpool_arena_size(sb) < CXLPOOL_HEAP_ALIGN) {
        return cxlpool_error(CXLPOOL_ERR_INVAL,
                             "pool size %" PRIu64 " is too small for %u host "
                             "partitions: each needs a heap arena of at least "
                             "2 MiB, so the pool needs at least %" PRIu64
                             " bytes (or fewer hosts)", size, nr_hosts,
                             (uint64_t)(sb->heap_offset +
                                        nr_hosts * CXLPOOL_HEAP_ALIGN));
    }

    cxlpool_gen_uuid(sb->uuid);
    return CXLPOOL_OK;
}

cxlpool_status_t cxlpool_format(void *base, uint64_t size,
                                const cxlpool_params_t *params)
{
    cxlpool_sb_t sb, *dst = base;
    cxlpool_status_t status;
    cxl_coh_mode_t coh = CXL_COH_SW; /* format is rare: always flush */

    status = cxlpool_layout(&sb, size, params);
    if (status != CXLPOOL_OK) {
        return status;
    }

    /* Tables first (a device may hold old data), the magic last. */
    memset((uint8_t*)base + CXLPOOL_LOCK_OFFSET, 0,
           sb.heap_offset - CXLPOOL_LOCK_OFFSET);
    cxl_coh_writeback(coh, (uint8_t*)base + CXLPOOL_LOCK_OFFSET,
                      sb.heap_offset - CXLPOOL_LOCK_OFFSET);

    sb.magic = CXLPOOL_MAGIC;
    sb.crc   = cxlpool_sb_crc(&sb);
    memcpy(dst, &sb, sizeof(sb));
    dst->magic = 0;
    cxl_coh_publish(coh, dst, sizeof(sb));
    dst->magic = CXLPOOL_MAGIC;
    cxl_coh_publish(coh, dst, sizeof(sb));
    /*
     * The formatter may be the first to map the pool, but other hosts read
     * it from memory: write back the whole metadata area once more, so that
     * nothing of the format can stay in this host's cache.
     */
    cxl_coh_publish(coh, base, sb.heap_offset);
    return CXLPOOL_OK;
}

cxlpool_status_t cxlpool_sb_validate(const char *path, const cxlpool_sb_t *sb,
                                     uint64_t store_size)
{
    if (sb->magic != CXLPOOL_MAGIC) {
        return cxlpool_error(CXLPOOL_ERR_BAD_MAGIC,
                             "%s: not a ucx-cxl pool (bad magic 0x%016" PRIx64
                             "); nothing was written to it. Check the path, or "
                             "create a pool elsewhere with 'cxlpool create "
                             "PATH --size SIZE'", path, sb->magic);
    }

    if (sb->version_major != CXLPOOL_VERSION_MAJOR) {
        return cxlpool_error(CXLPOOL_ERR_VERSION,
                             "%s: pool layout version %u.%u is not supported "
                             "by this ucx-cxl (layout %u.%u); use the ucx-cxl "
                             "release that created it", path,
                             sb->version_major, sb->version_minor,
                             CXLPOOL_VERSION_MAJOR, CXLPOOL_VERSION_MINOR);
    }

    if (cxlpool_sb_crc(sb) != sb->crc) {
        return cxlpool_error(CXLPOOL_ERR_CHECKSUM,
                             "%s: superblock checksum mismatch (stored 0x%08x, "
                             "computed 0x%08x); the pool is damaged and was "
                             "not touched. Run 'cxlpool check %s' and restore "
                             "or recreate it", path, sb->crc,
                             cxlpool_sb_crc(sb), path);
    }

    if (store_size < sb->size) {
        return cxlpool_error(CXLPOOL_ERR_TRUNCATED,
                             "%s: truncated: the pool is %" PRIu64 " bytes but "
                             "its backing store has only %" PRIu64 "; it was "
                             "not touched. Restore the file or recreate the "
                             "pool", path, sb->size, store_size);
    }

    if (store_size > sb->size) {
        return cxlpool_error(CXLPOOL_ERR_RESIZED,
                             "%s: resized: the pool is %" PRIu64 " bytes but "
                             "its backing store now has %" PRIu64 "; it was "
                             "not touched. Truncate it back to %" PRIu64
                             " bytes or recreate the pool", path, sb->size,
                             store_size, sb->size);
    }

    /*
     * Tables in order after the lock lines, line aligned, each inside the
     * gap before the next: every process computes record addresses from
     * these fields, so sums that could wrap are written as differences.
     */
    if ((sb->heap_offset >= sb->size) ||
        (sb->heap_size != sb->size - sb->heap_offset) ||
        (sb->heap_offset % CXLPOOL_HEAP_ALIGN) ||
        (sb->attach_rec_size != sizeof(cxlpool_attach_rec_t)) ||
        (sb->extent_rec_size != sizeof(cxlpool_extent_rec_t)) ||
        (sb->attach_offset < CXLPOOL_ATTACH_OFFSET) ||
        (sb->attach_offset % CXLPOOL_LINE) ||
        (sb->extent_offset % CXLPOOL_LINE) ||
        (sb->extent_offset < sb->attach_offset) ||
        (sb->heap_offset < sb->extent_offset) ||
        (sb->max_extents > (sb->heap_offset - sb->extent_offset) /
                           sizeof(cxlpool_extent_rec_t)) ||
        (sb->max_attach > (sb->extent_offset - sb->attach_offset) /
                          sizeof(cxlpool_attach_rec_t)) ||
        (cxlpool_sb_nr_hosts(sb) > CXLPOOL_MAX_HOSTS) ||
        (cxlpool_sb_nr_hosts(sb) > sb->max_attach) ||
        (cxlpool_sb_nr_hosts(sb) > sb->max_extents) ||
        (cxlpool_arena_size(sb) < CXLPOOL_HEAP_ALIGN)) {
        return cxlpool_error(CXLPOOL_ERR_CORRUPT,
                             "%s: superblock describes an impossible layout; "
                             "the pool was not touched", path);
    }

    return CXLPOOL_OK;
}
