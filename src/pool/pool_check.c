/*
 * Offline and online consistency check ("cxlpool check").
 *
 * Without repair it only reads.  With repair it takes the metadata lock and
 * reclaims what dead owners hold; records that fail their checksum are
 * reported and left alone, since no rewrite could know what they held.
 * Every host partition is checked; repair writes only the own partition
 * (other hosts' lines are theirs to write) and counts what it left.
 */
#include "pool_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    cxlpool_check_msg_cb_t cb;
    void                  *arg;
} cxlpool_check_out_t;

static void cxlpool_check_say(cxlpool_check_out_t *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void cxlpool_check_say(cxlpool_check_out_t *out, const char *fmt, ...)
{
    char line[512];
    va_list ap;

    if (out->cb == NULL) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    out->cb(line, out->arg);
}

typedef struct {
    uint64_t offset;
    uint64_t length;
    uint32_t index;
} cxlpool_check_range_t;

static int cxlpool_check_range_cmp(const void *a, const void *b)
{
    const cxlpool_check_range_t *ra = a, *rb = b;

    return (ra->offset > rb->offset) - (ra->offset < rb->offset);
}

/* Whether repair by this handle may write slot / record i. */
static int cxlpool_check_own_slot(cxlpool_t *pool, uint32_t i)
{
    return (pool->host_index != CXLPOOL_HOST_INDEX_NONE) &&
           (cxlpool_slot_part(pool, i) == pool->host_index);
}

static int cxlpool_check_own_record(cxlpool_t *pool, uint32_t i)
{
    return (pool->host_index != CXLPOOL_HOST_INDEX_NONE) &&
           (cxlpool_record_part(pool, i) == pool->host_index);
}

/* " (host partition k)" for pools with several partitions, else "" */
static const char *cxlpool_check_part(cxlpool_t *pool, uint32_t k, char *buf,
                                      size_t len)
{
    buf[0] = '\0';
    if (pool->nr_hosts > 1) {
        snprintf(buf, len, " (host partition %u)", k);
    }
    return buf;
}

/* A record's name as one line of plain characters (a peer may have
 * written anything there). */
static const char *cxlpool_check_name(const char *name, char *buf)
{
    unsigned i;

    for (i = 0; (i < CXLPOOL_NAME_MAX - 1) && (name[i] != '\0'); ++i) {
        buf[i] = ((name[i] < 0x20) || (name[i] > 0x7e)) ? '?' : name[i];
    }
    buf[i] = '\0';
    return buf;
}

/* Heap arena that holds offset (offset inside the heap). */
static uint32_t cxlpool_arena_of(cxlpool_t *pool, uint64_t offset)
{
    uint64_t k = (offset - pool->sb->heap_offset) / cxlpool_arena_size(pool->sb);

    return (k >= pool->nr_hosts) ? pool->nr_hosts - 1 : (uint32_t)k;
}

static void cxlpool_check_attach(cxlpool_t *pool, cxlpool_check_report_t *rep,
                                 cxlpool_check_out_t *out)
{
    cxlpool_attach_rec_t *att;
    cxlpool_attach_info_t info;
    char part[32];
    uint32_t i;

    for (i = 0; i < pool->sb->max_attach; ++i) {
        att = &pool->att[i];
        cxl_coh_invalidate(pool->coh, att, sizeof(*att));
        if (att->state == CXLPOOL_ATT_FREE) {
            continue;
        }
        if ((att->state != CXLPOOL_ATT_ACTIVE) ||
            (cxlpool_attach_crc(att) != att->crc)) {
            rep->bad_records++;
            cxlpool_check_say(out, "attachment %u: checksum mismatch "
                              "(state 0x%08x)", i, att->state);
            continue;
        }
        cxlpool_attach_fill_info(pool, i, &info);
        if (!info.alive) {
            rep->dead_attach++;
            rep->other_dead_attach += !cxlpool_check_own_slot(pool, i);
            cxlpool_check_say(out, "attachment %u%s: pid %d on %s is dead "
                              "(%s)", i, cxlpool_check_part(pool,
                              cxlpool_slot_part(pool, i), part, sizeof(part)),
                              info.pid, info.hostname, info.same_host ?
                              "process gone" : "lease expired");
        }
    }
}

static void cxlpool_check_extents(cxlpool_t *pool, cxlpool_check_report_t *rep,
                                  cxlpool_check_out_t *out)
{
    cxlpool_check_range_t *ranges;
    cxlpool_extent_rec_t *rec;
    char part[32], name[CXLPOOL_NAME_MAX];
    uint32_t i, n = 0;

    ranges = calloc(pool->sb->max_extents + 1, sizeof(*ranges));
    for (i = 0; i < pool->sb->max_extents; ++i) {
        rec = &pool->ext[i];
        cxl_coh_invalidate(pool->coh, rec, sizeof(*rec));
        if (rec->state == CXLPOOL_EXT_FREE) {
            continue;
        }
        if ((rec->state != CXLPOOL_EXT_ALLOCATED) ||
            (cxlpool_extent_crc(rec) != rec->crc)) {
            rep->bad_records++;
            cxlpool_check_say(out, "extent %u: checksum mismatch", i);
            continue;
        }
        if ((rec->offset < pool->sb->heap_offset) ||
            (rec->offset % CXLPOOL_MIN_ALIGN) || (rec->length == 0) ||
            (rec->length > pool->sb->size - rec->offset)) {
            rep->out_of_bounds++;
            cxlpool_check_say(out, "extent %u: 0x%" PRIx64 "+%" PRIu64
                              " lies outside the heap", i, rec->offset,
                              rec->length);
            continue;
        }
        if ((cxlpool_arena_of(pool, rec->offset) != cxlpool_record_part(pool, i)) ||
            (rec->length > cxlpool_arena_end(pool->sb, cxlpool_record_part(pool, i)) -
                           rec->offset)) {
            rep->out_of_bounds++;
            cxlpool_check_say(out, "extent %u: 0x%" PRIx64 "+%" PRIu64
                              " lies outside the heap arena of its host "
                              "partition %u", i, rec->offset, rec->length,
                              cxlpool_record_part(pool, i));
            continue;
        }
        if (!cxlpool_token_alive(pool, rec->owner)) {
            rep->dead_extents++;
            rep->dead_bytes += rec->length;
            rep->other_dead_extents += !cxlpool_check_own_record(pool, i);
            cxlpool_check_say(out, "extent %u%s: 0x%" PRIx64 "+%" PRIu64
                              " '%s' held by dead owner slot %u gen %u", i,
                              cxlpool_check_part(pool,
                                                 cxlpool_record_part(pool, i),
                                                 part, sizeof(part)),
                              rec->offset, rec->length,
                              cxlpool_check_name(rec->name, name),
                              cxlpool_token_slot(rec->owner),
                              cxlpool_token_gen(rec->owner));
        }
        if (ranges != NULL) {
            ranges[n].offset = rec->offset;
            ranges[n].length = rec->length;
            ranges[n].index  = i;
            ++n;
        }
    }

    if (ranges == NULL) {
        return;
    }
    qsort(ranges, n, sizeof(*ranges), cxlpool_check_range_cmp);
    for (i = 1; i < n; ++i) {
        if (ranges[i - 1].offset + ranges[i - 1].length > ranges[i].offset) {
            rep->overlaps++;
            cxlpool_check_say(out, "extents %u and %u overlap",
                              ranges[i - 1].index, ranges[i].index);
        }
    }
    free(ranges);
}

cxlpool_status_t cxlpool_check(cxlpool_t *pool, int repair,
                               cxlpool_check_report_t *report,
                               cxlpool_check_msg_cb_t cb, void *arg)
{
    cxlpool_check_out_t out = {cb, arg};
    const cxlpool_lock_t *locks = (const cxlpool_lock_t*)(pool->base +
                                                          CXLPOOL_LOCK_OFFSET);
    uint32_t ext0, att0, k;
    cxlpool_status_t status;
    char part[32];
    uint64_t holder;

    memset(report, 0, sizeof(*report));
    if (repair && pool->rdonly) {
        return cxlpool_error(CXLPOOL_ERR_INVAL, "%s: opened read-only, cannot "
                             "repair", pool->path);
    }
    if (repair) {
        status = cxlpool_partition_required(pool, "repair");
        if (status != CXLPOOL_OK) {
            return status;
        }
    }

    ext0 = pool->reclaimed_ext;
    att0 = pool->reclaimed_att;

    if (repair) {
        uint32_t broken = pool->lock_broken;

        /* breaking a dead holder's lock already reclaims: counted below */
        cxlpool_lock(pool);
        report->lock_recovered = (pool->lock_broken != broken);
        if (report->lock_recovered) {
            cxlpool_check_say(&out, "broke the metadata lock of a dead holder");
        }
    }
    for (k = 0; k < pool->nr_hosts; ++k) {
        if (repair && (k == pool->host_index)) {
            continue; /* held by this check */
        }
        cxl_coh_invalidate(pool->coh, &locks[k], sizeof(locks[k]));
        holder = locks[k].token;
        if (holder != 0) {
            cxlpool_check_say(&out, "metadata lock%s held by token 0x%016"
                              PRIx64, cxlpool_check_part(pool, k, part,
                                                         sizeof(part)),
                              holder);
        }
    }

    cxlpool_check_attach(pool, report, &out);
    cxlpool_check_extents(pool, report, &out);

    if (repair) {
        cxlpool_recover_locked(pool, NULL, NULL);
        cxlpool_unlock(pool);
        report->reclaimed_extents = pool->reclaimed_ext - ext0;
        report->reclaimed_attach  = pool->reclaimed_att - att0;
        if (report->reclaimed_extents || report->reclaimed_attach) {
            cxlpool_check_say(&out, "repaired: reclaimed %u extent(s) and "
                              "%u attachment(s) of dead owners%s",
                              report->reclaimed_extents,
                              report->reclaimed_attach,
                              (pool->nr_hosts > 1) ? " in this host's "
                              "partition" : "");
        }
        if (report->other_dead_extents || report->other_dead_attach) {
            cxlpool_check_say(&out, "left %u extent(s) and %u attachment(s) "
                              "of dead owners in other host partitions: only "
                              "a process of their host may reclaim them",
                              report->other_dead_extents,
                              report->other_dead_attach);
        }
    }

    if (report->bad_records || report->overlaps || report->out_of_bounds) {
        return cxlpool_error(CXLPOOL_ERR_CORRUPT,
                             "%s: damaged: %u bad record(s), %u overlap(s), "
                             "%u extent(s) out of bounds", pool->path,
                             report->bad_records, report->overlaps,
                             report->out_of_bounds);
    }
    return CXLPOOL_OK;
}
