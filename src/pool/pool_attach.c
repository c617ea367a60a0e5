/*
 * The attachment table: one record per attached process, with leases.
 *
 * Line 0 of a record (identity) is written under the metadata lock when a
 * slot is claimed or reclaimed.  Line 1 (heartbeat) is written only by the
 * owner.  A process on this host is judged by its pid and start time, which
 * is exact; a process on another host by its lease: a heartbeat older than
 * lease_ms means it is gone.  Reclaiming a dead owner frees exactly the
 * extents whose owner token names its slot and slot generation.
 *
 * With host partitions a process claims slots and reclaims dead owners only
 * in its own host's partition: only processes of that host write its lines.
 * Liveness is judged for every slot (readers invalidate both lines first),
 * but dead owners elsewhere are left to a process of their host.
 */
#include "pool_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CXLPOOL_DEFAULT_LEASE_MS 30000u

uint64_t cxlpool_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int cxlpool_read_small(const char *path, char *buf, size_t len)
{
    ssize_t n;
    int fd;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0) {
        return -1;
    }
    buf[n] = '\0';
    return 0;
}

/*
 * Host identity: boot id plus pid namespace.  Two processes with the same
 * id can judge each other by pid; all others must use leases.
 */
uint64_t cxlpool_host_id(void)
{
    char boot[64] = "", ns[64] = "";
    uint64_t id;
    ssize_t n;

    cxlpool_read_small("/proc/sys/kernel/random/boot_id", boot, sizeof(boot));
    n = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
    ns[(n > 0) ? n : 0] = '\0';

    id = cxlpool_crc32c(0, boot, strlen(boot));
    id = (id << 32) | cxlpool_crc32c(0x5a5a5a5a, ns, strlen(ns));
    return id ? id : 1;
}

/* Start time of a process in clock ticks since boot; 0 if it is gone. */
uint64_t cxlpool_proc_start_time(int pid)
{
    char path[64], buf[1024], *p;
    unsigned long long start = 0;
    int field;

    if (pid <= 0) {
        return 0;
    }
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    if (cxlpool_read_small(path, buf, sizeof(buf)) < 0) {
        return 0;
    }

    /* skip "pid (comm)": comm may hold spaces and parentheses */
    p = strrchr(buf, ')');
    if (p == NULL) {
        return 0;
    }
    /* after ')' come fields 3.. ; starttime is field 22 */
    for (field = 2; (field < 22) && (p != NULL); ++field) {
        p = strchr(p + 1, ' ');
    }
    if ((p == NULL) || (sscanf(p + 1, "%llu", &start) != 1)) {
        return 0;
    }
    /* a zombie is dead for our purposes */
    if (strstr(buf, ") Z ") != NULL) {
        return 0;
    }
    return start ? start : 1;
}

static cxlpool_attach_rec_t *cxlpool_att(cxlpool_t *pool, uint32_t slot)
{
    return &pool->att[slot];
}

/* Liveness of an active slot, as seen from this process. */
int cxlpool_attach_alive(cxlpool_t *pool, uint32_t slot)
{
    cxlpool_attach_rec_t *rec = cxlpool_att(pool, slot);
    uint64_t hb, now;

    cxl_coh_invalidate(pool->coh, rec, sizeof(*rec));
    if (rec->state != CXLPOOL_ATT_ACTIVE) {
        return 0;
    }

    if (rec->host_id == pool->host_id) {
        return cxlpool_proc_start_time(rec->pid) == rec->start_time;
    }

    /* the owner's heartbeat thread stores it at any time: one load */
    hb = __atomic_load_n(&rec->heartbeat_ns, __ATOMIC_RELAXED);
    if (hb == 0) {
        hb = rec->attach_ns;
    }
    now = cxlpool_now_ns();
    return (now < hb) || ((now - hb) <= (uint64_t)rec->lease_ms * 1000000ull);
}

int cxlpool_token_alive(cxlpool_t *pool, uint64_t token)
{
    uint32_t slot = cxlpool_token_slot(token);
    cxlpool_attach_rec_t *rec;

    if (token == 0) {
        return 1; /* persistent: owned by the pool */
    }
    if (slot >= pool->sb->max_attach) {
        return 0;
    }
    rec = cxlpool_att(pool, slot);
    cxl_coh_invalidate(pool->coh, rec, sizeof(*rec));
    return (rec->gen == cxlpool_token_gen(token)) &&
           cxlpool_attach_alive(pool, slot);
}

void cxlpool_attach_fill_info(cxlpool_t *pool, uint32_t slot,
                              cxlpool_attach_info_t *info)
{
    cxlpool_attach_rec_t *rec = cxlpool_att(pool, slot);
    char *p;

    memset(info, 0, sizeof(*info));
    info->slot         = slot;
    info->gen          = rec->gen;
    info->token        = cxlpool_token_make(slot, rec->gen);
    info->pid          = rec->pid;
    info->start_time   = rec->start_time;
    info->attach_ns    = rec->attach_ns;
    info->heartbeat_ns = __atomic_load_n(&rec->heartbeat_ns, __ATOMIC_RELAXED);
    info->lease_ms     = rec->lease_ms;
    info->same_host    = (rec->host_id == pool->host_id);
    info->alive        = cxlpool_attach_alive(pool, slot);
    memcpy(info->hostname, rec->hostname, sizeof(rec->hostname));
    info->hostname[sizeof(rec->hostname)] = '\0';
    /* any process that maps the pool may write the record: what tools
     * print stays one line of plain characters */
    for (p = info->hostname; *p != '\0'; ++p) {
        if ((*p < 0x20) || (*p > 0x7e)) {
            *p = '?';
        }
    }
}

cxlpool_status_t cxlpool_attach_claim(cxlpool_t *pool, uint32_t lease_ms)
{
    cxlpool_attach_rec_t *rec = NULL;
    uint32_t slot, first, end;

    cxlpool_own_slots(pool, &first, &end);
    for (slot = first; slot < end; ++slot) {
        rec = cxlpool_att(pool, slot);
        cxl_coh_invalidate(pool->coh, rec, sizeof(*rec));
        if (rec->state == CXLPOOL_ATT_FREE) {
            break;
        }
    }

    if (slot == end) {
        return cxlpool_error(CXLPOOL_ERR_NO_SLOT,
                             "%s: all %u attachment slots of host partition "
                             "%u (of %u) are in use by live processes; detach "
                             "some or recreate the pool with more slots",
                             pool->path, end - first, pool->host_index,
                             pool->nr_hosts);
    }

    rec->gen        += 1;
    rec->host_id     = pool->host_id;
    rec->pid         = getpid();
    rec->start_time  = pool->start_time;
    rec->attach_ns   = cxlpool_now_ns();
    rec->lease_ms    = lease_ms ? lease_ms : CXLPOOL_DEFAULT_LEASE_MS;
    memset(rec->hostname, 0, sizeof(rec->hostname));
    gethostname(rec->hostname, sizeof(rec->hostname) - 1);
    rec->crc          = cxlpool_attach_crc(rec);
    rec->heartbeat_ns = rec->attach_ns;
    cxl_coh_publish(pool->coh, rec, sizeof(*rec));
    cxlpool_fault_point("attach-record");
    rec->state = CXLPOOL_ATT_ACTIVE;
    cxl_coh_publish(pool->coh, rec, sizeof(*rec));

    pool->slot  = slot;
    pool->token = cxlpool_token_make(slot, rec->gen);
    return CXLPOOL_OK;
}

void cxlpool_attach_release(cxlpool_t *pool)
{
    cxlpool_attach_rec_t *rec = cxlpool_att(pool, pool->slot);

    if ((rec->state == CXLPOOL_ATT_ACTIVE) &&
        (rec->gen == cxlpool_token_gen(pool->token))) {
        rec->state = CXLPOOL_ATT_FREE;
        cxl_coh_publish(pool->coh, rec, sizeof(*rec));
    }
    pool->token = 0;
}

uint32_t cxlpool_reclaim_token_locked(cxlpool_t *pool, uint64_t token)
{
    cxlpool_extent_rec_t *rec;
    uint32_t i, first, end, count = 0;

    /* an owner of this partition has its extents in this partition only */
    cxlpool_own_records(pool, &first, &end);
    for (i = first; i < end; ++i) {
        rec = &pool->ext[i];
        cxl_coh_invalidate(pool->coh, rec, sizeof(*rec));
        if ((token != 0) && (rec->state == CXLPOOL_EXT_ALLOCATED) &&
            (rec->owner == token)) {
            cxlpool_extent_release_locked(pool, rec);
            ++count;
        }
    }
    return count;
}

cxlpool_status_t cxlpool_recover_locked(cxlpool_t *pool, uint32_t *extents,
                                        uint32_t *attachments)
{
    cxlpool_attach_rec_t *att;
    cxlpool_extent_rec_t *rec;
    uint32_t i, first, end, n_ext = 0, n_att = 0;

    /* own partition only: other hosts' lines are theirs to write */
    cxlpool_own_slots(pool, &first, &end);
    for (i = first; i < end; ++i) {
        att = cxlpool_att(pool, i);
        cxl_coh_invalidate(pool->coh, att, sizeof(*att));
        if ((att->state != CXLPOOL_ATT_ACTIVE) || cxlpool_attach_alive(pool, i) ||
            ((pool->token != 0) && (i == pool->slot))) {
            continue;
        }
        /*
         * Slot first, so that peers checking the owner stop using its
         * memory before it can be reused; a crash in between leaves only
         * orphans, which the scan below reclaims.
         */
        att->state = CXLPOOL_ATT_FREE;
        cxl_coh_publish(pool->coh, att, sizeof(*att));
        ++n_att;
        n_ext += cxlpool_reclaim_token_locked(pool,
                                              cxlpool_token_make(i, att->gen));
    }

    /* orphans: extents whose owner slot is free or was reused */
    cxlpool_own_records(pool, &first, &end);
    for (i = first; i < end; ++i) {
        rec = &pool->ext[i];
        cxl_coh_invalidate(pool->coh, rec, sizeof(*rec));
        if ((rec->state == CXLPOOL_EXT_ALLOCATED) && (rec->owner != 0) &&
            (rec->owner != pool->token) && !cxlpool_token_alive(pool, rec->owner)) {
            n_ext += cxlpool_reclaim_token_locked(pool, rec->owner);
        }
    }

    pool->reclaimed_ext += n_ext;
    pool->reclaimed_att += n_att;
    if (extents != NULL) {
        *extents = n_ext;
    }
    if (attachments != NULL) {
        *attachments = n_att;
    }
    return CXLPOOL_OK;
}

int cxlpool_owner_alive(cxlpool_t *pool, uint64_t token)
{
    return cxlpool_token_alive(pool, token);
}

cxlpool_status_t cxlpool_recover(cxlpool_t *pool, uint32_t *extents,
                                 uint32_t *attachments)
{
    cxlpool_status_t status;

    status = cxlpool_partition_required(pool, "reclaim dead owners");
    if (status != CXLPOOL_OK) {
        return status;
    }
    cxlpool_lock(pool);
    status = cxlpool_recover_locked(pool, extents, attachments);
    cxlpool_unlock(pool);
    return status;
}

cxlpool_status_t cxlpool_foreach_attach(cxlpool_t *pool, cxlpool_attach_cb_t cb,
                                        void *arg)
{
    cxlpool_attach_info_t info;
    uint32_t i;

    for (i = 0; i < pool->sb->max_attach; ++i) {
        cxl_coh_invalidate(pool->coh, &pool->att[i], sizeof(pool->att[i]));
        if (pool->att[i].state == CXLPOOL_ATT_ACTIVE) {
            cxlpool_attach_fill_info(pool, i, &info);
            cb(&info, arg);
        }
    }
    return CXLPOOL_OK;
}

void cxlpool_heartbeat(cxlpool_t *pool)
{
    cxlpool_attach_rec_t *rec;

    if (pool->token == 0) {
        return;
    }
    rec = cxlpool_att(pool, pool->slot);
    /* read by this process's other threads as it changes: an atomic store */
    __atomic_store_n(&rec->heartbeat_ns, cxlpool_now_ns(), __ATOMIC_RELAXED);
    cxl_coh_publish(pool->coh, (const void*)&rec->heartbeat_ns,
                    sizeof(rec->heartbeat_ns));
}

static void *cxlpool_heartbeat_thread(void *arg)
{
    cxlpool_t *pool = arg;
    uint32_t period_ms = pool->att[pool->slot].lease_ms / 4;
    struct timespec ts;

    if (period_ms == 0) {
        period_ms = 1;
    }

    pthread_mutex_lock(&pool->hb_mutex);
    while (!pool->hb_stop) {
        cxlpool_heartbeat(pool);
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec  += period_ms / 1000;
        ts.tv_nsec += (long)(period_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec  += 1;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&pool->hb_cond, &pool->hb_mutex, &ts);
    }
    pthread_mutex_unlock(&pool->hb_mutex);
    return NULL;
}

int cxlpool_heartbeat_start(cxlpool_t *pool)
{
    if (pthread_create(&pool->hb_thread, NULL, cxlpool_heartbeat_thread, pool)) {
        return -1;
    }
    pool->hb_running = 1;
    return 0;
}

void cxlpool_heartbeat_stop(cxlpool_t *pool)
{
    if (!pool->hb_running) {
        return;
    }
    pthread_mutex_lock(&pool->hb_mutex);
    pool->hb_stop = 1;
    pthread_cond_signal(&pool->hb_cond);
    pthread_mutex_unlock(&pool->hb_mutex);
    pthread_join(pool->hb_thread, NULL);
    pool->hb_running = 0;
}
