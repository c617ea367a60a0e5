/*
 * Barrier: one step in which every rank publishes its signal (no data)
 * and reads every other rank's: all-read-all, one pool round trip.  The
 * step's done line, written after the reads, is also what lets a rank
 * reuse the slot two steps later.
 */
#include "coll_int.h"

static cxl_coll_status_t cxl_coll_barrier_progress(cxl_coll_req_t *req)
{
    cxl_coll_team_t *team = req->team;
    uint64_t step         = req->step0;
    cxl_coll_status_t status;
    int i, w, missing = 0;

    if (req->nsteps == 0) {
        return CXL_COLL_OK;
    }
    if (req->phase == 0) {
        status = cxl_coll_slot_acquire(team, step, 0);
        if (status != CXL_COLL_OK) {
            return status;
        }
        cxl_coll_publish_signal(team, step);
        req->phase = 1;
    }
    for (i = 1; i < team->size; ++i) {
        w = cxl_coll_peer_at(team, team->rank, i);
        if (req->got[w]) {
            continue;
        }
        status = cxl_coll_peek_signal(team, w, step);
        if (status == CXL_COLL_OK) {
            req->got[w] = 1;
        } else if (status == CXL_COLL_INPROGRESS) {
            missing = 1;
        } else {
            return status;
        }
    }
    if (missing) {
        return CXL_COLL_INPROGRESS;
    }
    cxl_coll_got_clear(req);
    cxl_coll_step_done(team, step);
    return CXL_COLL_OK;
}

cxl_coll_status_t cxl_coll_barrier_post(cxl_coll_req_t *req)
{
    req->nsteps   = (req->team->size > 1) ? 1 : 0;
    req->progress = cxl_coll_barrier_progress;
    if (req->team->cfg.log) {
        cxl_coll_log(req->team, "barrier: all-read-all of %d signal lines, "
                     "%s", req->team->size,
                     req->nsteps ? "1 step" : "nothing to do");
    }
    return CXL_COLL_OK;
}
