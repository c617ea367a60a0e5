/*
 * The metadata lock: one cache line, taken with CAS, broken when its
 * holder is dead.
 *
 * A holder on this host is dead when its pid is gone (or was reused, by
 * process start time).  A holder on another host is dead when the same
 * token has been observed for longer than the lock timeout: metadata
 * operations take microseconds, so a token that sits for seconds belongs to
 * a crashed process.  Every update done under the lock leaves the tables
 * consistent at each store (fields first, state word last), so breaking
 * the lock needs no undo, only the usual reclaim of the dead owner.
 *
 * pool->lock is the own host partition's line: only processes of one host
 * ever CAS it (they share caches, so the CAS is atomic for all of them),
 * and the holders judged here are processes of that host.  The timeout
 * rule is for processes of the same partition in another pid namespace.
 */
#include "pool_int.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CXLPOOL_LOCK_TIMEOUT_NS (10ull * 1000 * 1000 * 1000)

static uint64_t cxlpool_monotonic_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static uint64_t cxlpool_lock_timeout_ns(void)
{
    const char *env = getenv("CXLPOOL_LOCK_TIMEOUT_MS");

    return env ? strtoull(env, NULL, 10) * 1000000ull : CXLPOOL_LOCK_TIMEOUT_NS;
}

/*
 * One look at the lock line: the holder's fields first, the token last.
 * Fields and token may belong to different acquisitions (the line changed
 * hands between the loads), so one look proves nothing about its holder.
 */
static void cxlpool_lock_look(cxlpool_t *pool, cxlpool_lock_look_t *look)
{
    cxl_coh_invalidate(pool->coh, (const void*)pool->lock, sizeof(*pool->lock));
    look->start_time = __atomic_load_n(&pool->lock->start_time, __ATOMIC_ACQUIRE);
    look->acquire_ns = __atomic_load_n(&pool->lock->acquire_ns, __ATOMIC_ACQUIRE);
    look->token      = __atomic_load_n(&pool->lock->token, __ATOMIC_ACQUIRE);
}

/*
 * What a waiter remembers lives in its wait, never longer: a token is the
 * same for all acquisitions of one process, so a memory of "token T seen
 * since t" kept across waits judged a live holder dead at the first look
 * once t was a lock timeout old (threads of one process, processes of one
 * partition in other pid namespaces: two holders, metadata corrupted).
 */
int cxlpool_lock_holder_dead(cxlpool_t *pool, cxlpool_lock_wait_t *wait,
                             uint64_t token)
{
    uint32_t host_tag = (uint32_t)(pool->host_id ^ (pool->host_id >> 32)) | 1;
    int pid           = (int)(token >> 32);
    cxlpool_lock_look_t look;
    uint64_t start, now;

    if (((uint32_t)token == host_tag) && (token != pool->lock_token)) {
        start = cxlpool_proc_start_time(pid);
        if (start == 0) {
            return 1;
        }
        /* start_time is cleared before release, so a value here is current */
        cxlpool_lock_look(pool, &look);
        if (look.start_time == start) {
            wait->reused.token = 0;
            return 0; /* that process holds it */
        }
        if ((look.token == token) && (look.start_time != 0) &&
            (look.acquire_ns != 0)) {
            /*
             * Another process's start time under this pid's token: the pid
             * was reused, or the line changed hands while we looked.  A
             * holder's fields stay put until it releases, and the token is
             * its own all that time; acquire_ns differs per acquisition.
             * So the same fields under the same token on two looks (a spin
             * interval apart) are a dead holder's.
             */
            if (!memcmp(&look, &wait->reused, sizeof(look))) {
                return 1;
            }
            wait->reused = look;
            return 0;
        }
        /* no start time yet (a holder between its CAS and the fill), or
         * a line someone else wrote: judged by the timeout below, never
         * waited on forever */
    }

    cxlpool_lock_look(pool, &look);
    if ((token == pool->lock_token) && (look.token == token) &&
        (look.start_time == pool->start_time)) {
        /* another thread of this process: alive as long as we are */
        wait->seen_since = 0;
        return 0;
    }

    /*
     * Other hosts' holders, a process of this partition in another pid
     * namespace (its token may even equal ours): dead when one acquisition
     * (token and acquire_ns) stays for longer than the lock timeout.
     * Holders that come and go are alive, however long the wait.
     */
    now = cxlpool_monotonic_ns();
    if ((wait->seen_since == 0) || (look.token != wait->seen.token) ||
        (look.acquire_ns != wait->seen.acquire_ns)) {
        wait->seen       = look;
        wait->seen_since = now;
        return 0;
    }
    return (now - wait->seen_since) > cxlpool_lock_timeout_ns();
}

/*
 * Between the CAS and these stores a judge on this host sees no start time
 * and falls back to the timeout rule; the start time comes from open, so
 * the window is a clock read and three stores, not a /proc read.
 */
static void cxlpool_lock_fill(cxlpool_t *pool)
{
    /* judges read the fields while they change: atomic stores (plain
     * ones on x86, but a data race for the compiler without them) */
    __atomic_store_n(&pool->lock->acquire_ns, cxlpool_now_ns(),
                     __ATOMIC_RELAXED);
    /* after acquire_ns: a judge that sees start_time sees this acquire_ns */
    __atomic_store_n(&pool->lock->start_time, pool->start_time,
                     __ATOMIC_RELEASE);
    __atomic_store_n(&pool->lock->host_id, pool->host_id, __ATOMIC_RELAXED);
    cxl_coh_publish(pool->coh, (const void*)pool->lock, sizeof(*pool->lock));
}

void cxlpool_lock(cxlpool_t *pool)
{
    struct timespec pause    = {0, 50000};
    cxlpool_lock_wait_t wait = {0};
    unsigned spins           = 0;
    uint64_t cur;

    for (;;) {
        cur = 0;
        if (__atomic_compare_exchange_n(&pool->lock->token, &cur,
                                        pool->lock_token, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED)) {
            break;
        }

        if ((++spins % 64) == 0) {
            if (cxlpool_lock_holder_dead(pool, &wait, cur) &&
                __atomic_compare_exchange_n(&pool->lock->token, &cur,
                                            pool->lock_token, 0,
                                            __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED)) {
                cxlpool_lock_fill(pool);
                pool->lock_broken++;
                /* the dead holder's half-done work belongs to a dead owner */
                cxlpool_recover_locked(pool, NULL, NULL);
                return;
            }
            nanosleep(&pause, NULL);
        } else {
            sched_yield();
        }
    }

    cxlpool_lock_fill(pool);
}

void cxlpool_unlock(cxlpool_t *pool)
{
    __atomic_store_n(&pool->lock->start_time, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&pool->lock->acquire_ns, 0, __ATOMIC_RELAXED);
    cxl_coh_publish(pool->coh, (const void*)pool->lock, sizeof(*pool->lock));
    __atomic_store_n(&pool->lock->token, 0, __ATOMIC_RELEASE);
    cxl_coh_publish(pool->coh, (const void*)pool->lock, sizeof(*pool->lock));
}
