/*
 * Calls that differ across ranks: an erroneous program (a bcast whose
 * ranks pass different counts, two roots, an allreduce with sum here and
 * max there) must get an error, not a hang or data read with another
 * call's layout.  Two ways to see it:
 *
 * - At once, where a publication of the step is there: the signal line's
 *   call word and the flagged lines' word 0 carry a hash of the writer's
 *   call (cxl_coll_peek checks it; cxl_coll_call_differs reports it).
 * - Where nothing the reader expects ever comes (the writer's call put its
 *   data elsewhere, made no step, or both ranks wait to read): every rank
 *   records each call in a ring of lines of its partition, and a rank
 *   that waited CXL_COLL_PEER_CHECK looks at the records of the peer it
 *   waits for (cxl_coll_call_check, from the liveness check).
 *
 * A record costs its owner a few stores to a line only a stuck peer reads
 * (hw); in sw mode the owner writes its records back only when it waits
 * itself, or destroys the team (doc/design/collectives.md).
 */
#include "coll_int.h"

#include <string.h>

const cxl_coll_call_t cxl_coll_call_none = {.lag = 2};

void cxl_coll_call_record(cxl_coll_team_t *team, cxl_coll_call_t *call)
{
    uint64_t no = ++team->callno;
    cxl_coll_rec_t *rec;

    call->callno = no;
    if (team->size < 2) {
        return; /* nobody reads it */
    }
    rec = cxl_coll_rec(team->part, no);
    cxl_coll_store(&rec->callno, 0);
    rec->first  = call->first;
    rec->nsteps = call->nsteps;
    rec->what   = call->what;
    rec->bytes  = call->bytes;
    cxl_coll_store(&rec->callno, no);
}

void cxl_coll_call_start(cxl_coll_team_t *team, const cxl_coll_args_t *args,
                         size_t es, uint64_t first, uint64_t nsteps,
                         cxl_coll_call_t *call)
{
    cxl_coll_call_make(args, es, first, nsteps, call);
    cxl_coll_call_record(team, call);
}

void cxl_coll_call_flush(cxl_coll_team_t *team)
{
    uint64_t no;

    if ((team->coh == CXL_COH_HW) || (team->rec_flushed == team->callno)) {
        return;
    }
    no = (team->callno - team->rec_flushed > CXL_COLL_NREC) ?
         team->callno - CXL_COLL_NREC : team->rec_flushed;
    while (no++ < team->callno) {
        cxl_coh_writeback(team->coh, cxl_coll_rec(team->part, no),
                          sizeof(cxl_coll_rec_t));
    }
    cxl_coh_fence(team->coh);
    team->rec_flushed = team->callno;
}

/* "allreduce (sum, int32) of 16 B", "bcast of 8 B from root 1" */
static const char *cxl_coll_call_str(uint64_t what, uint64_t bytes,
                                     uint64_t nsteps, char *buf, size_t len)
{
    cxl_coll_type_t type = (cxl_coll_type_t)(what & 0xff);
    char b[32], red[64] = "", root[32] = "";

    if (type == CXL_COLL_BARRIER) {
        snprintf(buf, len, "a barrier");
        return buf;
    }
    if (CXL_COLL_TYPE_BIT(type) & CXL_COLL_REDUCING) {
        snprintf(red, sizeof(red), " (%s, %s)",
                 cxl_coll_op_name((cxl_coll_op_t)((what >> 16) & 0xff)),
                 cxl_coll_dtype_name((cxl_coll_dtype_t)((what >> 8) & 0xff)));
    }
    if (CXL_COLL_TYPE_BIT(type) & CXL_COLL_ROOTED) {
        snprintf(root, sizeof(root), " %s root %u",
                 (type == CXL_COLL_BCAST) || (type == CXL_COLL_SCATTER) ?
                 "from" : "to", (unsigned)(what >> 32));
    }
    snprintf(buf, len, "%s%s of %s%s%s", cxl_coll_type_name(type), red,
             cxl_coll_bytes_str(bytes, b, sizeof(b)), root,
             (nsteps == 0) ? " (no step)" : "");
    return buf;
}

/*
 * Peer's record of its call number no: 1 and *out, or 0 where it is not
 * (yet, or any more) visible.  Ranks number their calls alike (every call
 * that passed its checks), as they number their steps.
 */
static int cxl_coll_call_find(cxl_coll_team_t *team, int peer, uint64_t no,
                              cxl_coll_rec_t *out)
{
    cxl_coll_rec_t *rec = cxl_coll_rec(team->peers[peer].part, no);

    cxl_coh_invalidate(team->coh, rec, sizeof(*rec));
    out->callno = cxl_coll_load(&rec->callno);
    out->first  = cxl_coll_load(&rec->first);
    out->nsteps = cxl_coll_load(&rec->nsteps);
    out->what   = cxl_coll_load(&rec->what);
    out->bytes  = cxl_coll_load(&rec->bytes);
    return (out->callno == no) && (cxl_coll_load(&rec->callno) == no);
}

static cxl_coll_status_t cxl_coll_call_error(cxl_coll_team_t *team, int peer,
                                             const cxl_coll_call_t *mine,
                                             const cxl_coll_rec_t *theirs)
{
    char mine_s[128], theirs_s[128];

    cxl_coll_call_str(mine->what, mine->bytes, mine->nsteps, mine_s,
                      sizeof(mine_s));
    if (theirs == NULL) {
        snprintf(theirs_s, sizeof(theirs_s), "another call");
    } else {
        cxl_coll_call_str(theirs->what, theirs->bytes, theirs->nsteps,
                          theirs_s, sizeof(theirs_s));
    }
    return cxl_coll_error(CXL_COLL_ERR_MISMATCH, "rank %d made %s where "
                          "rank %d (this one) made %s "
                          "(call %llu of the team: a collective, count, root, "
                          "datatype or operation not the same on every rank)",
                          peer, theirs_s, team->rank, mine_s,
                          (unsigned long long)mine->callno);
}

cxl_coll_status_t cxl_coll_call_differs(cxl_coll_team_t *team, int peer)
{
    const cxl_coll_call_t *mine = team->call;
    cxl_coll_rec_t theirs;

    /* sw: its record may not be written back yet */
    return cxl_coll_call_error(team, peer, mine,
                               cxl_coll_call_find(team, peer, mine->callno,
                                                  &theirs) ? &theirs : NULL);
}

cxl_coll_status_t cxl_coll_call_check(cxl_coll_team_t *team,
                                      const cxl_coll_call_t *call, int peer)
{
    cxl_coll_rec_t theirs;

    if (!cxl_coll_call_find(team, peer, call->callno, &theirs) ||
        ((theirs.first == call->first) && (theirs.nsteps == call->nsteps) &&
         (theirs.what == call->what) && (theirs.bytes == call->bytes))) {
        return CXL_COLL_OK; /* not there yet, or the same call */
    }
    return cxl_coll_call_error(team, peer, call, &theirs);
}
