/*
 * Team creation and destruction: open the pool, allocate this rank's
 * partition (owned by the own attachment, so a dead rank's partition is
 * reclaimed like any dead owner's), exchange what the peers need over the
 * caller's out-of-band allgather, validate what they sent (the pool is
 * shared memory: offsets and extents are checked, not trusted), and agree
 * on the verdict in a second exchange so every rank fails alike.
 *
 * Creation is a request (cxl_coll_team_create_start/_test): with the
 * caller's non-blocking allgather, starting it does only local work, and
 * each test moves it from one exchange to the next, so a caller whose
 * collectives must start without waiting for the other ranks (MPI's
 * non-blocking ones) can make the team in the background.  The blocking
 * cxl_coll_team_create() runs the same steps with oob_allgather.
 */
#include "coll_int.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cxl_coll_team_params_init(cxl_coll_team_params_t *params)
{
    memset(params, 0, sizeof(*params));
    params->spin = -1;
}

int cxl_coll_team_rank(const cxl_coll_team_t *team)
{
    return team->rank;
}

int cxl_coll_team_size(const cxl_coll_team_t *team)
{
    return team->size;
}

static cxl_coll_status_t cxl_coll_team_open_pool(cxl_coll_team_t *team,
                                                 const char *given)
{
    cxl_coll_status_t status;
    char pathbuf[256];
    cxlpool_info_t info;
    const char *path;

    status = cxl_coll_pool_pick_get(given, &team->cfg, pathbuf,
                                    sizeof(pathbuf), &path, &team->pool);
    if (status != CXL_COLL_OK) {
        team->pool = NULL;
        return status;
    }
    cxlpool_info(team->pool, &info);
    team->pool_base   = cxlpool_base(team->pool);
    team->pool_size   = info.size;
    team->heap_offset = info.heap_offset;
    team->coh         = cxlpool_coherence(team->pool);
    cxl_coll_alias_init(team, path);
    return CXL_COLL_OK;
}

/*
 * The partition's size: given (params) or CXL_COLL_REGION_SIZE, in 4 KiB
 * pages, with room for the control lines and two data slots of a chunk
 * and of a line per rank each.
 */
static cxl_coll_status_t cxl_coll_team_region(cxl_coll_team_t *team,
                                              uint64_t given)
{
    uint64_t region = given ? given : team->cfg.region_size;
    uint64_t slot   = team->cfg.chunk_size, need;
    const char *what = given ? "cxl_coll_team_params_t.region_size" :
                               "CXL_COLL_REGION_SIZE";

    if (slot < 64ull * team->size) {
        slot = 64ull * team->size;
    }
    slot = (slot + 4095) & ~4095ull;
    need = CXL_COLL_OFF_DATA + CXL_COLL_NSLOTS * slot;
    if (region > CXL_COLL_MAX_REGION) {
        return cxl_coll_error(CXL_COLL_ERR_INVAL, "%s=%llu: at most %llu "
                              "bytes", what, (unsigned long long)region,
                              (unsigned long long)CXL_COLL_MAX_REGION);
    }
    if (((region + 4095) & ~4095ull) < need) {
        return cxl_coll_error(CXL_COLL_ERR_INVAL, "%s=%llu: a team of %d "
                              "ranks with CXL_COLL_CHUNK_SIZE=%llu needs at "
                              "least %llu bytes (control lines, and two data "
                              "slots of %llu)", what,
                              (unsigned long long)region, team->size,
                              (unsigned long long)team->cfg.chunk_size,
                              (unsigned long long)need,
                              (unsigned long long)slot);
    }
    team->region     = (region + 4095) & ~4095ull;
    team->slot_bytes = cxl_coll_slot_bytes(team->region);
    return CXL_COLL_OK;
}

static cxl_coll_status_t cxl_coll_team_alloc_part(cxl_coll_team_t *team,
                                                  cxlpool_extent_t *ext)
{
    cxl_coll_hdr_t *hdr;
    cxlpool_status_t st;
    char name[CXLPOOL_NAME_MAX];

    static unsigned teams; /* names are unique in a pool */

    /* named for 'cxlpool info': cxl-coll:<pid>:<team of the process> */
    snprintf(name, sizeof(name), "cxl-coll:%x:%x", (unsigned)getpid(),
             __atomic_fetch_add(&teams, 1, __ATOMIC_RELAXED));
    if (team->region > team->pool_size - team->heap_offset) {
        return cxl_coll_error(CXL_COLL_ERR_NO_MEMORY, "team partition of %llu "
                              "bytes: the pool's heap holds %llu",
                              (unsigned long long)team->region,
                              (unsigned long long)(team->pool_size -
                                                   team->heap_offset));
    }
    if (cxl_coll_pool_part_take(team->pool, team->region, ext,
                                &team->part_use)) {
        st = CXLPOOL_OK; /* an ended team's, no peer reads it any more */
    } else {
        team->part_use = 0;
        st = cxlpool_alloc(team->pool, team->region, 4096, name, 0, ext);
        if (st == CXLPOOL_ERR_EXISTS) {
            st = cxlpool_alloc(team->pool, team->region, 4096, NULL, 0, ext);
        }
    }
    if (st != CXLPOOL_OK) {
        /* INVAL: longer than this host's arena (the rest of the request
         * is valid): no space as well */
        return cxl_coll_error(((st == CXLPOOL_ERR_NO_SPACE) ||
                               (st == CXLPOOL_ERR_INVAL)) ?
                              CXL_COLL_ERR_NO_MEMORY : CXL_COLL_ERR_POOL,
                              "team partition of %llu bytes: %s",
                              (unsigned long long)team->region,
                              cxlpool_last_error());
    }
    team->part_ext = *ext;
    team->part     = team->pool_base + ext->offset;
    /* the initial state, before any peer can read it: a reused extent
     * holds a previous owner's bytes */
    memset(team->part, 0, CXL_COLL_OFF_DATA);
    hdr              = cxl_coll_hdr(team->part);
    hdr->rank        = team->rank;
    hdr->size        = team->size;
    hdr->region_size = team->region;
    hdr->magic       = CXL_COLL_MAGIC;
    cxl_coh_publish(team->coh, team->part, CXL_COLL_OFF_DATA);
    return CXL_COLL_OK;
}

/* Check the peers' records; the same inputs give the same verdict. */
static cxl_coll_status_t cxl_coll_team_validate(cxl_coll_team_t *team,
                                                const cxl_coll_oob_rec_t *recs)
{
    const cxl_coll_oob_rec_t *me = &recs[team->rank], *r;
    cxlpool_status_t st;
    int i;

    for (i = 0; i < team->size; ++i) {
        r = &recs[i];
        if ((r->magic != CXL_COLL_MAGIC) ||
            (r->version != CXL_COLL_OOB_VERSION) || (r->rank != i) ||
            (r->size != team->size)) {
            return cxl_coll_error(CXL_COLL_ERR_INVAL, "rank %d sent a record "
                                  "for rank %d of %d (version %u): ranks or "
                                  "sizes of the team differ", i, r->rank,
                                  r->size, r->version);
        }
        if (r->status != CXL_COLL_OK) {
            return cxl_coll_error((cxl_coll_status_t)r->status, "rank %d could "
                                  "not open its pool or partition", i);
        }
    }
    for (i = 0; i < team->size; ++i) {
        r = &recs[i];
        if (memcmp(r->uuid, me->uuid, CXLPOOL_UUID_LEN) != 0) {
            return cxl_coll_error(CXL_COLL_ERR_NOT_SAME_POOL, "rank %d maps "
                                  "another pool than rank %d (uuids differ)",
                                  i, team->rank);
        }
        if (r->coh != me->coh) {
            return cxl_coll_error(CXL_COLL_ERR_NOT_SAME_POOL, "rank %d uses "
                                  "%s coherence, rank %d %s", i,
                                  cxl_coh_mode_name((cxl_coh_mode_t)r->coh),
                                  team->rank,
                                  cxl_coh_mode_name((cxl_coh_mode_t)me->coh));
        }
        if (r->region != me->region) {
            return cxl_coll_error(CXL_COLL_ERR_INVAL, "rank %d has a region of"
                                  " %llu bytes, rank %d of %llu: "
                                  "CXL_COLL_REGION_SIZE must be equal", i,
                                  (unsigned long long)r->region, team->rank,
                                  (unsigned long long)me->region);
        }
        if (r->oneshot_max != me->oneshot_max) {
            return cxl_coll_error(CXL_COLL_ERR_INVAL, "rank %d has "
                                  "CXL_COLL_ONESHOT_MAX=%llu, rank %d %llu:"
                                  " it must be equal", i,
                                  (unsigned long long)r->oneshot_max,
                                  team->rank,
                                  (unsigned long long)me->oneshot_max);
        }
        if ((r->part_len < r->region) || (r->part_off < team->heap_offset) ||
            (r->part_off > team->pool_size) ||
            (r->region > team->pool_size - r->part_off)) {
            return cxl_coll_error(CXL_COLL_ERR_POOL, "rank %d: partition "
                                  "0x%llx+%llu lies outside the pool heap", i,
                                  (unsigned long long)r->part_off,
                                  (unsigned long long)r->region);
        }
        st = cxlpool_extent_check(team->pool, r->ext_index, r->ext_gen,
                                  r->part_off, r->region);
        if (st != CXLPOOL_OK) {
            return cxl_coll_error(CXL_COLL_ERR_POOL, "rank %d: partition "
                                  "0x%llx is no allocated extent: %s", i,
                                  (unsigned long long)r->part_off,
                                  cxlpool_last_error());
        }
    }
    return CXL_COLL_OK;
}

/*
 * The team's tag: rank 0's partition extent (index and generation: no two
 * live teams share it, and the pool's reuse changes the generation; the
 * process's own reuse, coll_pool.c, counts in part_use) and its
 * attachment, mixed (splitmix64's finaliser), top bit set so that no
 * step's tag is the 0 of a fresh line.
 */
static uint64_t cxl_coll_team_tag(const cxl_coll_oob_rec_t *recs)
{
    uint64_t x = ((uint64_t)recs[0].ext_index << 32) ^ recs[0].ext_gen ^
                 (recs[0].token * 0x9e3779b97f4a7c15ull) ^ recs[0].part_off ^
                 (recs[0].part_use * 0xd1b54a32d192ed03ull);

    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x | (1ull << 63);
}

static cxl_coll_status_t cxl_coll_team_setup(cxl_coll_team_t *team,
                                             const cxl_coll_oob_rec_t *recs)
{
    /* one more than CXL_COLL_MAX_REQS: the blocking calls' own (they
     * never fail with BUSY for requests the caller has not freed) */
    unsigned n = (unsigned)team->cfg.max_reqs + 1, i;

    team->peers   = calloc(team->size, sizeof(*team->peers));
    team->reqs    = calloc(n, sizeof(*team->reqs));
    team->got_mem = calloc((size_t)n * team->size, sizeof(uint64_t));
    team->queue   = calloc(n, sizeof(*team->queue));
    team->pubs    = calloc(team->size, sizeof(*team->pubs));
    /* the own flagged publications, then one copy-out buffer per peer */
    team->ll_own  = calloc((size_t)CXL_COLL_NSIG + team->size,
                           CXL_COLL_LL_MAX);
    if ((team->pubs == NULL) || (team->peers == NULL) || (team->reqs == NULL) ||
        (team->got_mem == NULL) || (team->queue == NULL) ||
        (team->ll_own == NULL)) {
        return cxl_coll_error(CXL_COLL_ERR_NO_MEMORY, "team of %d ranks",
                              team->size);
    }
    for (i = 0; i < (unsigned)team->size; ++i) {
        team->peers[i].part  = team->pool_base + recs[i].part_off;
        team->peers[i].token = recs[i].token;
        team->peers[i].ext_index = recs[i].ext_index;
        team->peers[i].ext_gen   = recs[i].ext_gen;
        team->peers[i].host  = recs[i].host;
        team->peers[i].ll_buf = team->ll_own +
                                (size_t)(CXL_COLL_NSIG + i) * CXL_COLL_LL_MAX;
    }
    for (i = 0; i < n; ++i) {
        team->reqs[i].team = team;
        team->reqs[i].got  = team->got_mem + (size_t)i * team->size;
    }
    team->tag       = cxl_coll_team_tag(recs);
    team->next_step = 1;
    return CXL_COLL_OK;
}

static void cxl_coll_team_free(cxl_coll_team_t *team)
{
    if ((team->part != NULL) && team->part_idle) {
        cxl_coll_pool_part_keep(team->pool, team->region, &team->part_ext,
                                team->part_use);
    } else if (team->part != NULL) {
        cxlpool_free(team->pool, team->part_ext.offset);
    }
    if (team->pool != NULL) {
        cxl_coll_mem_cleanup(team);
        if (!team->keep_pool) {
            cxl_coll_pool_put(team->pool);
        }
    }
    free(team->mem_offs);
    free(team->peers);
    free(team->reqs);
    free(team->got_mem);
    free(team->queue);
    free(team->pubs);
    free(team->ll_own);
    free(team);
}

/* A saved last error without its "<strerror>: " prefix. */
static const char *cxl_coll_team_detail(const char *msg,
                                        cxl_coll_status_t status)
{
    const char *name = cxl_coll_strerror(status);
    size_t n         = strlen(name);

    return (!strncmp(msg, name, n) && (msg[n] == ':')) ? msg + n + 2 : msg;
}

/*
 * A team creation under way: the two exchanges (records, then verdicts),
 * each a blocking oob_allgather or a started oob_iallgather that
 * cxl_coll_team_create_test() tests.
 */
struct cxl_coll_team_creq {
    cxl_coll_team_t          *team;
    cxl_coll_oob_iallgather_t oob_start; /* NULL: blocking exchanges */
    cxl_coll_oob_test_t       oob_test;
    void                     *oob_req;   /* the exchange under way */
    int                       round;     /* 0: records, 1: verdicts */
    cxl_coll_status_t         local;     /* this rank's own preparation */
    cxl_coll_oob_rec_t        rec, *recs;
    int32_t                   verdict, *verdicts;
    char                      detail[512];
};

static void cxl_coll_creq_free(cxl_coll_team_creq_t *creq)
{
    if (creq->team != NULL) {
        cxl_coll_team_free(creq->team);
    }
    free(creq->recs);
    free(creq->verdicts);
    free(creq);
}

/* The exchange of creq->round failed (starting it, or in its test) */
static cxl_coll_status_t
cxl_coll_creq_oob_failed(const cxl_coll_team_creq_t *creq)
{
    return cxl_coll_error(CXL_COLL_ERR_OOB, "team creation: the out-of-band "
                          "allgather of the %s (%zu bytes) failed",
                          creq->round ? "verdict" : "record",
                          creq->round ? sizeof(creq->verdict) :
                                        sizeof(creq->rec));
}

/* Start exchange number creq->round; 0, or an error that was set */
static int cxl_coll_creq_exchange(cxl_coll_team_creq_t *creq)
{
    cxl_coll_team_t *team = creq->team;
    const void *sbuf = creq->round ? (const void *)&creq->verdict :
                                     (const void *)&creq->rec;
    void *rbuf       = creq->round ? (void *)creq->verdicts :
                                     (void *)creq->recs;
    size_t len       = creq->round ? sizeof(creq->verdict) :
                                     sizeof(creq->rec);
    int rc;

    creq->oob_req = NULL;
    if (creq->oob_start != NULL) {
        rc = creq->oob_start(team->oob_arg, sbuf, rbuf, len, &creq->oob_req);
        if ((rc == 0) && (creq->oob_req == NULL)) {
            rc = -1; /* a started exchange has a handle to test */
        }
    } else {
        rc = team->oob(team->oob_arg, sbuf, rbuf, len);
    }
    if (rc != 0) {
        creq->oob_req = NULL;
        (void)cxl_coll_creq_oob_failed(creq);
    }
    return rc;
}

/* Everything up to the first exchange: local, and may fail locally (the
 * record says so, and the rank still takes part in both exchanges) */
static void cxl_coll_creq_prepare(cxl_coll_team_creq_t *creq,
                                  const cxl_coll_team_params_t *params)
{
    cxl_coll_team_t *team = creq->team;
    cxl_coll_oob_rec_t *rec = &creq->rec;
    cxl_coll_status_t local;
    cxlpool_extent_t ext;
    cxlpool_info_t info;

    memset(rec, 0, sizeof(*rec));
    local = cxl_coll_config_read(&team->cfg);
    if ((local == CXL_COLL_OK) && team->cfg.help && (team->rank == 0)) {
        cxl_coll_config_print(stderr);
    }
    team->progress          = params->progress;
    team->progress_arg      = params->progress_arg;
    team->progress_interval = params->progress_interval ?
                              params->progress_interval : 256;
    if ((local == CXL_COLL_OK) && (params->spin >= 0)) {
        team->cfg.spin = (uint64_t)params->spin;
    }
    if (local == CXL_COLL_OK) {
        local = cxl_coll_team_region(team, params->region_size);
    }
    if (local == CXL_COLL_OK) {
        local = cxl_coll_team_open_pool(team, params->pool_path);
    }
    if (local == CXL_COLL_OK) {
        local = cxl_coll_team_alloc_part(team, &ext);
    }
    if (local == CXL_COLL_OK) {
        cxlpool_info(team->pool, &info);
        memcpy(rec->uuid, info.uuid, sizeof(rec->uuid));
        rec->part_off  = ext.offset;
        rec->part_len  = ext.length;
        rec->ext_index = ext.index;
        rec->ext_gen   = ext.gen;
        rec->part_use  = team->part_use;
        rec->token     = cxlpool_token(team->pool);
        rec->host      = cxlpool_host_index(team->pool);
        rec->coh       = team->coh;
    }
    snprintf(creq->detail, sizeof(creq->detail), "%s", cxl_coll_last_error());
    rec->magic       = CXL_COLL_MAGIC;
    rec->version     = CXL_COLL_OOB_VERSION;
    rec->status      = local;
    rec->rank        = team->rank;
    rec->size        = team->size;
    rec->region      = team->region;
    rec->oneshot_max = team->cfg.oneshot_max;
    creq->local      = local;
}

/* After the verdicts: the team, or the first failure any rank had */
static cxl_coll_status_t cxl_coll_creq_finish(cxl_coll_team_creq_t *creq)
{
    cxl_coll_team_t *team = creq->team;
    cxl_coll_status_t status, own = (cxl_coll_status_t)creq->verdict;
    int i;

    for (i = 0; i < team->size; ++i) {
        if (creq->verdicts[i] == CXL_COLL_OK) {
            continue;
        }
        status = (cxl_coll_status_t)creq->verdicts[i];
        if (own != CXL_COLL_OK) {
            /* the own reason, with its detail */
            return cxl_coll_error(own, "rank %d: %s", team->rank,
                                  cxl_coll_team_detail(creq->detail, own));
        }
        return cxl_coll_error(status, "rank %d failed team creation (%s); "
                              "this rank found nothing wrong", i,
                              cxl_coll_strerror(status));
    }
    status = cxl_coll_team_setup(team, creq->recs);
    if (status != CXL_COLL_OK) {
        /* after a good verdict only host memory can fail here; peers learn
         * of it through the abort line */
        cxl_coll_abort(team, status);
    }
    return status;
}

cxl_coll_status_t
cxl_coll_team_create_start(const cxl_coll_team_params_t *params,
                           cxl_coll_team_creq_t **creq_p)
{
    cxl_coll_team_creq_t *creq;
    cxl_coll_team_t *team;

    if ((params == NULL) || (creq_p == NULL) ||
        (params->oob_allgather == NULL) || (params->size < 1) ||
        (params->size > CXL_COLL_MAX_RANKS) || (params->rank < 0) ||
        (params->rank >= params->size) ||
        ((params->oob_iallgather == NULL) != (params->oob_test == NULL))) {
        return cxl_coll_error(CXL_COLL_ERR_INVAL, "team parameters: rank %d of"
                              " %d, oob %s, oob_iallgather %s, oob_test %s "
                              "(1 to %d ranks, an oob allgather, the "
                              "non-blocking one with its test or neither)",
                              params ? params->rank : -1,
                              params ? params->size : -1,
                              (params && params->oob_allgather) ? "set" :
                              "missing",
                              (params && params->oob_iallgather) ? "set" :
                              "missing",
                              (params && params->oob_test) ? "set" :
                              "missing", CXL_COLL_MAX_RANKS);
    }

    creq = calloc(1, sizeof(*creq));
    team = calloc(1, sizeof(*team));
    if ((creq == NULL) || (team == NULL)) {
        free(creq);
        free(team);
        return cxl_coll_error(CXL_COLL_ERR_NO_MEMORY, "team of %d ranks",
                              params->size);
    }
    creq->team     = team;
    creq->recs     = calloc(params->size, sizeof(*creq->recs));
    creq->verdicts = calloc(params->size, sizeof(*creq->verdicts));
    team->rank     = params->rank;
    team->size     = params->size;
    team->call     = &cxl_coll_call_none;
    team->oob      = params->oob_allgather;
    team->oob_arg  = params->oob_arg;
    if ((creq->recs == NULL) || (creq->verdicts == NULL)) {
        cxl_coll_creq_free(creq);
        return cxl_coll_error(CXL_COLL_ERR_NO_MEMORY, "team of %d ranks",
                              params->size);
    }
    creq->oob_start = params->oob_iallgather;
    creq->oob_test  = params->oob_test;

    cxl_coll_creq_prepare(creq, params);
    if (cxl_coll_creq_exchange(creq) != 0) {
        cxl_coll_creq_free(creq);
        return CXL_COLL_ERR_OOB;
    }
    *creq_p = creq;
    return CXL_COLL_OK;
}

cxl_coll_status_t cxl_coll_team_create_test(cxl_coll_team_creq_t *creq,
                                            cxl_coll_team_t **team_p)
{
    cxl_coll_status_t status = CXL_COLL_ERR_OOB;
    int rc;

    for (;;) {
        if (creq->oob_req != NULL) {
            rc = creq->oob_test(creq->team->oob_arg, creq->oob_req);
            if (rc == 0) {
                return CXL_COLL_INPROGRESS;
            }
            creq->oob_req = NULL; /* released by the test */
            if (rc < 0) {
                status = cxl_coll_creq_oob_failed(creq);
                break;
            }
        }
        if (creq->round == 1) {
            status = cxl_coll_creq_finish(creq);
            break;
        }
        /* the records are in: this rank's verdict on them */
        if (creq->local != CXL_COLL_OK) {
            creq->verdict = creq->local;
        } else {
            creq->verdict = cxl_coll_team_validate(creq->team, creq->recs);
            snprintf(creq->detail, sizeof(creq->detail), "%s",
                     cxl_coll_last_error());
        }
        creq->round = 1;
        if (cxl_coll_creq_exchange(creq) != 0) {
            status = CXL_COLL_ERR_OOB;
            break;
        }
    }
    if (status == CXL_COLL_OK) {
        *team_p    = creq->team;
        creq->team = NULL;
    }
    cxl_coll_creq_free(creq);
    return status;
}

cxl_coll_status_t cxl_coll_team_create(const cxl_coll_team_params_t *params,
                                       cxl_coll_team_t **team_p)
{
    cxl_coll_team_params_t blocking;
    cxl_coll_team_creq_t *creq;
    cxl_coll_status_t status;

    if ((params == NULL) || (team_p == NULL)) {
        return cxl_coll_error(CXL_COLL_ERR_INVAL, "team parameters: %s "
                              "missing", params ? "team_p" : "params");
    }
    /* both exchanges in oob_allgather: the test finds them done */
    blocking                = *params;
    blocking.oob_iallgather = NULL;
    blocking.oob_test       = NULL;
    status = cxl_coll_team_create_start(&blocking, &creq);
    if (status != CXL_COLL_OK) {
        return status;
    }
    return cxl_coll_team_create_test(creq, team_p);
}

void cxl_coll_team_destroy(cxl_coll_team_t *team)
{
    int32_t x = 0, *all;

    if (team == NULL) {
        return;
    }
    /* finish what is still queued: its steps read peers' partitions */
    while ((team->q_count > 0) && (team->failed == CXL_COLL_OK)) {
        cxl_coll_wait(team->queue[team->q_head]);
    }
    /*
     * Once every rank is here, nobody reads a partition again.  The pool
     * can not tell that by itself: whoever frees after the last signal it
     * sees may still have a peer polling its lines.  A failed team skips
     * it (a peer may be dead) and waits, bounded, for its live peers to
     * finish what it published; if one does not, the partition stays to
     * the pool's reclaim of this attachment.
     */
    if ((team->failed != CXL_COLL_OK) && !cxl_coll_drain(team)) {
        /* closing the handle would free the partition with the rest of
         * the attachment: both stay until the process ends */
        team->part      = NULL;
        team->keep_pool = 1;
    } else if (team->failed == CXL_COLL_OK) {
        /* sw: a peer stuck in a call this rank did not make learns it
         * from the records (cxl_coll_call_check) */
        cxl_coll_call_flush(team);
        all = calloc(team->size, sizeof(*all));
        if ((all == NULL) ||
            (team->oob(team->oob_arg, &x, all, sizeof(x)) != 0)) {
            /* freeing now could let a peer read reused memory: leave the
             * partition, and the handle whose close would free it, to the
             * process's end */
            team->part      = NULL;
            team->keep_pool = 1;
        } else {
            team->part_idle = 1;
        }
        free(all);
    }
    cxl_coll_team_free(team);
}
