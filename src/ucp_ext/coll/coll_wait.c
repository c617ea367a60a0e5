/*
 * Waiting: a bounded spin that backs off to sched_yield(), so a rank never
 * starves the one it waits for when there are more ranks than cores (the
 * caller's progress function every progress_interval polls of the spin,
 * then at every yield); and,
 * every CXL_COLL_PEER_CHECK of waiting, the liveness of the peers
 * (pool attachments) and their abort lines, so a dead peer turns into
 * CXL_COLL_ERR_PEER_DEAD in bounded time instead of a hang.
 */
#include "coll_int.h"

#include <stdlib.h>

#include <sched.h>
#include <time.h>
#include <immintrin.h>

#define CXL_COLL_CLOCK_POLLS 16u

uint64_t cxl_coll_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void cxl_coll_idle(const cxl_coll_team_t *team, cxl_coll_idle_t *idle)
{
    if (idle->spins < team->cfg.spin) {
        ++idle->spins;
        if ((team->progress != NULL) && (--idle->until_progress == 0)) {
            team->progress(team->progress_arg);
            idle->until_progress = team->progress_interval;
        }
        _mm_pause();
        return;
    }
    /*
     * Backing off: the wait is long, and whatever waits for this rank's
     * progress meanwhile (one-sided operations its memory serves, which
     * the transport executes in the owner's progress; a rendezvous send to
     * it) would otherwise wait progress_interval yields, hundreds of
     * microseconds each time.  A progress call costs less than the yield.
     */
    if (team->progress != NULL) {
        team->progress(team->progress_arg);
    }
    sched_yield();
}

void cxl_coll_abort(cxl_coll_team_t *team, cxl_coll_status_t status)
{
    cxl_coll_word_line_t *line = cxl_coll_abort_line(team->part);

    team->failed = status;
    cxl_coll_store(&line->value, 1 + (uint64_t)status);
    cxl_coh_publish(team->coh, line, sizeof(*line));
}

static cxl_coll_status_t cxl_coll_check_peer(cxl_coll_team_t *team, int p,
                                             const cxl_coll_call_t *call)
{
    cxl_coll_status_t status;
    cxl_coll_word_line_t *line;
    uint64_t v;

    if (!cxlpool_owner_alive(team->pool, team->peers[p].token)) {
        /* died, or gave up the team and exited (its abort line may be
         * freed memory by now: not read) */
        return cxl_coll_error(CXL_COLL_ERR_PEER_DEAD, "rank %d of %d is gone: "
                              "died, or gave up the team and exited (its pool "
                              "attachment 0x%llx ended)", p,
                              team->size,
                              (unsigned long long)team->peers[p].token);
    }
    if (cxlpool_extent_check(team->pool, team->peers[p].ext_index,
                             team->peers[p].ext_gen,
                             (uint64_t)(team->peers[p].part - team->pool_base),
                             team->region) != CXLPOOL_OK) {
        /* gave up the team and destroyed it: its abort line said so, but
         * the partition may belong to another team by now, zeroed */
        return cxl_coll_error(CXL_COLL_ERR_PEER_DEAD, "rank %d of %d gave up "
                              "the team and left it: its partition (pool "
                              "extent %u) was freed", p, team->size,
                              (unsigned)team->peers[p].ext_index);
    }
    /* its partition is still its own: its records say whether it made
     * another call, which is why it (or this rank) gives up, if it did */
    if (call != NULL) {
        status = cxl_coll_call_check(team, call, p);
        if (status != CXL_COLL_OK) {
            return status;
        }
    }
    line = cxl_coll_abort_line(team->peers[p].part);
    cxl_coh_invalidate(team->coh, line, sizeof(*line));
    v = cxl_coll_load(&line->value);
    if (v == 1 + (uint64_t)CXL_COLL_ERR_MISMATCH) {
        /* the call that differs may be this rank's: its peer saw it first
         * (its sw record may not be written back) */
        return cxl_coll_error(CXL_COLL_ERR_MISMATCH, "rank %d of %d found "
                              "that the ranks' calls differ and gave up the "
                              "team", p, team->size);
    }
    if (v != 0) {
        return cxl_coll_error(CXL_COLL_ERR_PEER_DEAD, "rank %d of %d gave up "
                              "the team (%s)", p, team->size,
                              cxl_coll_strerror((cxl_coll_status_t)(v - 1)));
    }
    return CXL_COLL_OK;
}

/*
 * The peer waited for, only (its liveness, then whether it made the same
 * call, call): another peer that died after it published
 * what this collective needs from it does not fail the collective (a rank
 * that finished and died is not missed), and one that died before would be
 * waited for itself sooner or later; a peer that is alive but waits for a
 * dead one gives up the team and says so in its abort line, which is
 * checked here.  Without a peer waited for: every other.
 */
static cxl_coll_status_t cxl_coll_check_peers(cxl_coll_team_t *team,
                                              const cxl_coll_call_t *call)
{
    cxl_coll_status_t status;
    int first = (int)team->blocked_peer, p;

    /* sw: what this rank calls, for a peer that waits for it in vain */
    cxl_coll_call_flush(team);
    if ((first < team->size) && (first != team->rank)) {
        return cxl_coll_check_peer(team, first, call);
    }
    for (p = 0; p < team->size; ++p) {
        if (p == team->rank) {
            continue;
        }
        status = cxl_coll_check_peer(team, p, call);
        if (status != CXL_COLL_OK) {
            return status;
        }
    }
    return CXL_COLL_OK;
}

cxl_coll_status_t cxl_coll_wait_check_at(cxl_coll_team_t *team,
                                         const cxl_coll_call_t *call,
                                         uint64_t *post_ns, unsigned *polls)
{
    cxl_coll_type_t type = (cxl_coll_type_t)(call->what & 0xff);
    cxl_coll_status_t status;
    uint64_t now;

    /* the clock costs as much as a look at a line: read it every
     * CXL_COLL_CLOCK_POLLS polls, and first then for the timeout's start */
    if ((++*polls % CXL_COLL_CLOCK_POLLS) != 0) {
        return CXL_COLL_INPROGRESS;
    }
    now = cxl_coll_now_ns();
    if (*post_ns == 0) {
        *post_ns = now;
    }
    if ((team->cfg.timeout_ns != 0) &&
        (now - *post_ns >= team->cfg.timeout_ns)) {
        return cxl_coll_error(CXL_COLL_ERR_TIMEOUT, "%s not done %.3f s after "
                              "it began to wait (CXL_COLL_TIMEOUT), waiting "
                              "for rank %u", cxl_coll_type_name(type),
                              (now - *post_ns) / 1e9, team->blocked_peer);
    }
    if (now - team->last_check_ns < team->cfg.peer_check_ns) {
        return CXL_COLL_INPROGRESS;
    }
    team->last_check_ns = now;
    status = cxl_coll_check_peers(team, call);
    return (status == CXL_COLL_OK) ? CXL_COLL_INPROGRESS : status;
}

int cxl_coll_drain(cxl_coll_team_t *team)
{
    uint64_t last = team->next_step - 1, t0 = cxl_coll_now_ns(), now;
    uint64_t checked = t0;
    cxl_coll_word_line_t *line;
    cxl_coll_idle_t idle;
    int p, busy, check;
    uint8_t *gone;

    gone = calloc((size_t)team->size, 1);
    if (gone == NULL) {
        return 0;
    }
    cxl_coll_idle_init(team, &idle);
    for (;;) {
        now   = cxl_coll_now_ns();
        check = (now - checked >= team->cfg.peer_check_ns);
        busy  = 0;
        for (p = 0; p < team->size; ++p) {
            if ((p == team->rank) || gone[p]) {
                continue;
            }
            line = cxl_coll_done_line(team->peers[p].part);
            cxl_coh_invalidate(team->coh, line, sizeof(*line));
            if ((cxl_coll_load(&line->value) >= last) ||
                (check && (cxl_coll_check_peer(team, p, NULL) !=
                           CXL_COLL_OK))) {
                gone[p] = 1; /* done with it, or dead, gave up, left */
                continue;
            }
            busy = 1;
        }
        if (check) {
            checked = now;
        }
        if (!busy || (now - t0 >= CXL_COLL_DRAIN_NS)) {
            break;
        }
        cxl_coll_idle(team, &idle);
    }
    free(gone);
    return !busy;
}
