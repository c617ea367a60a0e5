/*
 * test_coll_lines - the flagged lines and small slots of a team partition
 * (coll_region.h, doc/design/collectives.md), step by step: rank 0 is the
 * real library, rank 1 a partition this program writes line by line, so
 * every intermediate state a reader can meet is met on purpose.
 *
 *   - reader: a flagged publication of rank 1 is taken only once every
 *     line carries the step (a line with an older step is not; a line of
 *     the step alone is not), and the bytes are the lines' payloads;
 *   - writer: rank 0's flagged lines and small slot hold the step and the
 *     data in the layout the readers expect;
 *   - reuse: a root publishes NSIG small publications while its reader
 *     makes no progress (they go into the small slots of the signal lines,
 *     not the two data slots), and one that comes back to a slot the
 *     reader may still read waits (here: times out) instead of
 *     overwriting it;
 *   - the watched word: a test() that finds the word its last poll waited
 *     for unchanged does not run the collective, so the word must be the
 *     right one: the first test() after the signal, after each further
 *     ready chunk, after the last flagged line, finishes what it can;
 *   - the short path (blocking calls without a request): rank 0 writes
 *     the lines the request path writes, reads rank 1's inline and
 *     flagged publications, calls the team's progress function while it
 *     waits (here rank 1 publishes from it), and fails a wait that
 *     outlasts CXL_COLL_TIMEOUT, the team with it;
 *   - idle: a wait calls the progress function every progress_interval
 *     polls while it spins, then before every yield;
 *   - a peer that left: rank 1's partition freed and zeroed for another
 *     team fails rank 0's wait within CXL_COLL_PEER_CHECK; a failed
 *     team's destroy keeps its partition while rank 1 may still read it;
 *     publications of another team (its tag) in rank 1's partition are
 *     not taken for this team's steps.
 *
 * hw coherence (the sw protocol runs in coll_check's sw configurations).
 * Ends with "test_coll_lines: N passed, N failed".
 */
#include "coll_fake_peer.h"
#include "coll_int.h"
#include "coll_test_harness.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINES_REGION (256ull << 10)

static struct {
    cxlpool_t        *pool;
    cxl_fake_peer_t   peer;      /* rank 1's partition, rank 0's offset */
    uint64_t          tag;       /* the team's: xor'ed into the steps of
                                    ready words and flags (coll_int.h) */
    uint64_t          call;      /* hash of the call rank 0 makes, which
                                    rank 1's publications carry */
    char              path[256];
} g;

static void pattern(uint8_t *p, size_t len, unsigned seed)
{
    size_t i;

    for (i = 0; i < len; ++i) {
        p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
    }
}

/* The arguments of a call, without buffers. */
static void args_of(cxl_coll_args_t *a, cxl_coll_type_t type, size_t count,
                    cxl_coll_dtype_t dtype, cxl_coll_op_t op, int root)
{
    memset(a, 0, sizeof(*a));
    a->type  = type;
    a->count = count;
    a->dtype = dtype;
    a->op    = op;
    a->root  = root;
}

/* The hash of a call (cxl_coll_call_make), as publications carry it. */
static uint64_t call_hash(cxl_coll_type_t type, size_t count,
                          cxl_coll_dtype_t dtype, cxl_coll_op_t op, int root)
{
    cxl_coll_args_t a;
    cxl_coll_call_t c;

    args_of(&a, type, count, dtype, op, root);
    cxl_coll_call_make(&a, cxl_coll_dtype_size(dtype), 1, 1, &c);
    return c.hash;
}

/* Rank 0's bcast of len bytes from root */
static uint64_t bcast_hash(size_t len, int root)
{
    return call_hash(CXL_COLL_BCAST, len, CXL_COLL_UINT8, CXL_COLL_SUM, root);
}

/* Rank 1 writes line i of step: its share of data, then flag (g.call). */
static void peer_line(uint64_t step, unsigned i, const uint8_t *data,
                      size_t len, uint64_t flag)
{
    cxl_coll_ll_line_t *line = cxl_coll_ll_line(g.peer.part, step, i);
    size_t x = (size_t)i * CXL_COLL_LL_PAYLOAD;
    size_t n = (len - x < CXL_COLL_LL_PAYLOAD) ? len - x : CXL_COLL_LL_PAYLOAD;

    memcpy(line->w, data + x, n);
    cxl_coll_store(&line->flag, cxl_coll_ll_flag(flag ^ g.tag, g.call));
}

static void peer_done(uint64_t v)
{
    cxl_coll_store(&cxl_coll_done_line(g.peer.part)->value, v);
}

static cxl_coll_status_t bcast_post(cxl_coll_team_t *team, void *buf,
                                    size_t len, int root,
                                    cxl_coll_req_t **req)
{
    cxl_coll_args_t a;

    args_of(&a, CXL_COLL_BCAST, len, CXL_COLL_UINT8, CXL_COLL_SUM, root);
    a.rbuf = buf;
    return cxl_coll_post(team, &a, req);
}

/* Rank 0 posts a bcast of len bytes rooted at rank 1 (checked: what) */
static int reader_post(cxl_coll_team_t *team, void *buf, size_t len,
                       uint64_t step, const char *what, cxl_coll_req_t **req)
{
    cxl_coll_status_t st = bcast_post(team, buf, len, 1, req);

    cxl_th_check(st == CXL_COLL_OK, "%s step %llu: post", what,
                 (unsigned long long)step);
    return st == CXL_COLL_OK;
}

/*
 * Rank 0 reads a flagged bcast of len bytes from rank 1 at step, whose
 * lines still carry old_flag: nothing is taken until every line carries
 * step.
 */
static void check_reader(cxl_coll_team_t *team, uint64_t step, size_t len,
                         uint64_t old_flag, unsigned seed)
{
    unsigned i, nlines = (unsigned)((len + CXL_COLL_LL_PAYLOAD - 1) /
                                    CXL_COLL_LL_PAYLOAD);
    uint8_t *data = malloc(len), *buf = malloc(len);
    cxl_coll_req_t *req = NULL;
    cxl_coll_status_t st;

    pattern(data, len, seed);
    memset(buf, 0xee, len);
    g.call = bcast_hash(len, 1);
    for (i = 0; i < nlines; ++i) {
        peer_line(step, i, data, len, old_flag);
    }
    if (!reader_post(team, buf, len, step, "reader", &req)) {
        free(data);
        free(buf);
        return;
    }
    cxl_th_check(cxl_coll_test(req) == CXL_COLL_INPROGRESS,
                 "reader step %llu, %zu B: lines of step %llu are not taken",
                 (unsigned long long)step, len,
                 (unsigned long long)old_flag);
    /* all lines but the last, in reverse order */
    for (i = nlines - 1; i-- > 0;) {
        peer_line(step, i, data, len, step);
        cxl_th_check(cxl_coll_test(req) == CXL_COLL_INPROGRESS,
                     "reader step %llu: %u of %u lines published: waits",
                     (unsigned long long)step, nlines - 1 - i, nlines);
    }
    peer_line(step, nlines - 1, data, len, step);
    st = cxl_coll_test(req);
    cxl_th_check(st == CXL_COLL_OK, "reader step %llu: all %u lines: done "
                 "(%s)", (unsigned long long)step, nlines,
                 cxl_coll_strerror(st));
    cxl_th_check(memcmp(buf, data, len) == 0,
                 "reader step %llu: %zu B as published",
                 (unsigned long long)step, len);
    cxl_coll_req_free(req);
    free(data);
    free(buf);
}

/* Rank 0 as root of a bcast of len bytes at step: what it wrote (verify
 * 2: through the blocking call, the short path) */
static cxl_coll_status_t root_bcast(cxl_coll_team_t *team, uint64_t step,
                                    size_t len, unsigned seed, int verify)
{
    uint8_t *part = (uint8_t*)cxlpool_base(g.pool) + g.peer.own_off;
    uint8_t *data = malloc(len), *got = malloc(len);
    cxl_coll_req_t *req = NULL;
    cxl_coll_ll_line_t *line;
    cxl_coll_status_t st;
    cxl_coll_sig_t *sig;
    unsigned i, nlines;
    int64_t ready;
    size_t x, n;

    pattern(data, len, seed);
    if (verify == 2) {
        st = cxl_coll_bcast(team, data, len, CXL_COLL_UINT8, 0);
    } else {
        st = bcast_post(team, data, len, 0, &req);
        if (st == CXL_COLL_OK) {
            st = cxl_coll_wait(req);
            cxl_coll_req_free(req);
        }
    }
    if (!verify || (st != CXL_COLL_OK)) {
        free(data);
        free(got);
        return st;
    }
    if (cxl_coll_pub_kind(1, len, (len + 63) & ~63ull) == CXL_COLL_PUB_LL) {
        nlines = (unsigned)((len + CXL_COLL_LL_PAYLOAD - 1) /
                            CXL_COLL_LL_PAYLOAD);
        for (i = 0; i < nlines; ++i) {
            line = cxl_coll_ll_line(part, step, i);
            x    = (size_t)i * CXL_COLL_LL_PAYLOAD;
            n    = (len - x < CXL_COLL_LL_PAYLOAD) ? len - x :
                   CXL_COLL_LL_PAYLOAD;
            cxl_th_check(cxl_coll_load(&line->flag) ==
                         cxl_coll_ll_flag(step ^ g.tag, bcast_hash(len, 0)),
                         "root step %llu: line %u carries the step "
                         "(%llu)", (unsigned long long)step, i,
                         (unsigned long long)line->flag);
            memcpy(got + x, line->w, n);
        }
        cxl_th_check(memcmp(got, data, len) == 0, "root step %llu: %zu B in "
                     "%u flagged lines", (unsigned long long)step, len,
                     nlines);
    } else if (len <= CXL_COLL_INLINE_MAX) {
        sig   = cxl_coll_sig(part, step);
        ready = cxl_coll_ready_bytes(sig->ready, step ^ g.tag);
        cxl_th_check((sig->seq == step) && (ready == (int64_t)len) &&
                     (memcmp(sig->u.inl, data, len) == 0), "root step %llu: "
                     "%zu B inline in the signal line (seq %llu, ready %lld)",
                     (unsigned long long)step, len,
                     (unsigned long long)sig->seq, (long long)ready);
    } else {
        sig   = cxl_coll_sig(part, step);
        ready = cxl_coll_ready_bytes(sig->ready, step ^ g.tag);
        cxl_th_check((sig->seq == step) && (ready >= (int64_t)len) &&
                     (sig->u.ext.buf_off == 0), "root step %llu: signal "
                     "(seq %llu, ready %lld, buf_off %llu)",
                     (unsigned long long)step, (unsigned long long)sig->seq,
                     (long long)ready,
                     (unsigned long long)sig->u.ext.buf_off);
        cxl_th_check(memcmp(cxl_coll_small_slot(part, step), data, len) == 0,
                     "root step %llu: %zu B in the small slot",
                     (unsigned long long)step, len);
    }
    free(data);
    free(got);
    return st;
}

static cxl_coll_team_t *make_team(void)
{
    cxl_coll_team_t *team = NULL;
    cxl_coll_status_t st;

    st = cxl_fake_peer_team(&g.peer, g.path, LINES_REGION, &team);
    cxl_th_check(st == CXL_COLL_OK, "team of rank 0 and a written partition: "
                 "%s", cxl_coll_last_error());
    g.tag = (st == CXL_COLL_OK) ? team->tag : 0;
    return (st == CXL_COLL_OK) ? team : NULL;
}

/* A team whose waits call progress(arg) every interval polls (spin < 0:
 * the configuration's spin); NULL, and a failed check, if it fails. */
static cxl_coll_team_t *make_team_progress(void (*progress)(void *arg),
                                           void *arg, unsigned interval,
                                           int spin, const char *what)
{
    cxl_coll_team_params_t params;
    cxl_coll_team_t *team = NULL;
    cxl_coll_status_t st;

    cxl_coll_team_params_init(&params);
    params.pool_path         = g.path;
    params.region_size       = LINES_REGION;
    params.progress          = progress;
    params.progress_arg      = arg;
    params.progress_interval = interval;
    params.spin              = spin;
    st = cxl_fake_peer_team_params(&g.peer, &params, &team);
    cxl_th_check(st == CXL_COLL_OK, "%s: team with a progress function every "
                 "%u polls, spin %d (%s)", what, interval, spin,
                 cxl_coll_strerror(st));
    g.tag = (st == CXL_COLL_OK) ? team->tag : 0;
    return (st == CXL_COLL_OK) ? team : NULL;
}

static void destroy_team(cxl_coll_team_t *team)
{
    peer_done(UINT64_MAX >> 1); /* whatever rank 0 may wait for */
    cxl_coll_team_destroy(team);
}

/* Readers and writers of flagged lines and small slots. */
static void team_a(void)
{
    cxl_coll_team_t *team = make_team();
    cxl_coll_status_t st;
    uint64_t step;

    if (team == NULL) {
        return;
    }
    /* steps 1-2: flagged publications of rank 1, 2 and 5 lines */
    check_reader(team, 1, 100, 0, 1);
    check_reader(team, 2, CXL_COLL_LL_MAX, 0, 2);
    /* steps 3-8: rank 0's own, flagged and in the small slot */
    st = root_bcast(team, 3, 200, 3, 1);
    cxl_th_check(st == CXL_COLL_OK, "root step 3 (%s)", cxl_coll_strerror(st));
    for (step = 4; step <= CXL_COLL_NSIG; ++step) {
        st = root_bcast(team, step, 1000 + step, (unsigned)step, 1);
        cxl_th_check(st == CXL_COLL_OK, "root step %llu (%s)",
                     (unsigned long long)step, cxl_coll_strerror(st));
    }
    /* step 9: signal line 1 again, whose lines still carry step 1 */
    check_reader(team, 9, 100, 1, 9);
    destroy_team(team);
}

/*
 * A root ahead of a reader that makes no progress (done line 0, nothing
 * published): NSIG small publications go out, the next waits.
 */
static void team_b(void)
{
    cxl_coll_team_t *team = make_team();
    cxl_coll_status_t st;
    uint8_t *keep, *own;
    uint64_t step;

    if (team == NULL) {
        return;
    }
    for (step = 1; step <= CXL_COLL_NSIG; ++step) {
        st = root_bcast(team, step, 1000 + step, (unsigned)step, 1);
        cxl_th_check(st == CXL_COLL_OK, "root step %llu: small publication "
                     "without the reader's progress (two data slots would "
                     "wait from step 3 on) (%s)", (unsigned long long)step,
                     cxl_coll_strerror(st));
    }
    /* step 9: the small slot of step 1 may still be read: no overwrite */
    own  = (uint8_t*)cxlpool_base(g.pool) + g.peer.own_off;
    keep = malloc(1001);
    memcpy(keep, cxl_coll_small_slot(own, 1), 1001);
    st = root_bcast(team, 9, 1000, 9, 0);
    cxl_th_check(st == CXL_COLL_ERR_TIMEOUT, "root step 9: waits for the "
                 "reader of step 1, then times out (%s)",
                 cxl_coll_strerror(st));
    cxl_th_check(memcmp(keep, cxl_coll_small_slot(own, 1), 1001) == 0,
                 "root step 9: the small slot of step 1 is intact");
    free(keep);
    destroy_team(team);
}

/*
 * Rank 1 publishes a bcast of len bytes at step through its small slot,
 * the signal first with `first` bytes ready, then the rest: the first
 * test() after each store sees it.
 */
static void check_watch_small(cxl_coll_team_t *team, uint64_t step,
                              size_t len, size_t first)
{
    cxl_coll_sig_t *sig = cxl_coll_sig(g.peer.part, step);
    uint8_t *data = malloc(len), *buf = malloc(len);
    cxl_coll_req_t *req = NULL;
    cxl_coll_status_t st;
    unsigned i;

    pattern(data, len, (unsigned)step);
    memset(buf, 0xee, len);
    memcpy(cxl_coll_small_slot(g.peer.part, step), data, len);
    if (!reader_post(team, buf, len, step, "watch", &req)) {
        free(data);
        free(buf);
        return;
    }
    /* more polls than CXL_COLL_WATCH_POLLS on the unchanged signal */
    for (i = 0; i < 3 * CXL_COLL_WATCH_POLLS; ++i) {
        st = cxl_coll_test(req);
        if (st != CXL_COLL_INPROGRESS) {
            break;
        }
    }
    cxl_th_check(st == CXL_COLL_INPROGRESS, "watch step %llu: no signal, "
                 "%u polls: waits (%s)", (unsigned long long)step, i,
                 cxl_coll_strerror(st));
    sig->u.ext.buf_off = 0;
    sig->u.ext.stride  = (len + 63) & ~63ull;
    sig->call          = bcast_hash(len, 1);
    cxl_coll_store(&sig->ready, cxl_coll_ready_make(step ^ g.tag, first));
    cxl_coll_store(&sig->seq, step);
    st = cxl_coll_test(req);
    cxl_th_check(st == CXL_COLL_INPROGRESS, "watch step %llu: %zu of %zu B "
                 "ready: waits (%s)", (unsigned long long)step, first, len,
                 cxl_coll_strerror(st));
    cxl_th_check(memcmp(buf, data, first) == 0, "watch step %llu: the first "
                 "test() after the signal took the %zu B ready",
                 (unsigned long long)step, first);
    for (i = 0; i < 3 * CXL_COLL_WATCH_POLLS; ++i) {
        (void)cxl_coll_test(req);
    }
    cxl_coll_store(&sig->ready, cxl_coll_ready_make(step ^ g.tag, len));
    st = cxl_coll_test(req);
    cxl_th_check(st == CXL_COLL_OK, "watch step %llu: the first test() after "
                 "the rest is ready finishes (%s)", (unsigned long long)step,
                 cxl_coll_strerror(st));
    cxl_th_check(memcmp(buf, data, len) == 0, "watch step %llu: %zu B as "
                 "published", (unsigned long long)step, len);
    cxl_coll_req_free(req);
    free(data);
    free(buf);
}

/* The word a waiting poll watches, for the signal, the ready word, the
 * flagged lines (check_reader: the first test() after the last line) and
 * the peer's done line */
static void team_c(void)
{
    cxl_coll_team_t *team = make_team();
    uint8_t buf[100] = {0};
    cxl_coll_req_t *req = NULL;
    cxl_coll_status_t st;
    uint64_t step;
    unsigned i;

    if (team == NULL) {
        return;
    }
    check_watch_small(team, 1, 3000, 1000);
    check_reader(team, 2, CXL_COLL_LL_MAX, 0, 2);
    check_watch_small(team, 3, CXL_COLL_SMALL_MAX, 64);
    /* rank 0 publishes on; step NSIG + 3 needs rank 1 done with step 3
     * (rank 1's publication of step 3 says it finished step 2 only) */
    for (step = 4; step <= CXL_COLL_NSIG + 2; ++step) {
        st = root_bcast(team, step, sizeof(buf), (unsigned)step, 0);
        cxl_th_check(st == CXL_COLL_OK, "watch: root step %llu (%s)",
                     (unsigned long long)step, cxl_coll_strerror(st));
    }
    st = bcast_post(team, buf, sizeof(buf), 0, &req);
    for (i = 0; (st == CXL_COLL_OK) && (i < 3 * CXL_COLL_WATCH_POLLS); ++i) {
        st = (cxl_coll_test(req) == CXL_COLL_INPROGRESS) ? CXL_COLL_OK :
             CXL_COLL_ERR_INVAL;
    }
    cxl_th_check(st == CXL_COLL_OK, "watch: root step %d waits for rank 1's "
                 "done line", CXL_COLL_NSIG + 3);
    if (st == CXL_COLL_OK) {
        peer_done(3);
        st = cxl_coll_test(req);
        cxl_th_check(st == CXL_COLL_OK, "watch: the first test() after rank "
                     "1's done line reaches 3 publishes step %d (%s)",
                     CXL_COLL_NSIG + 3, cxl_coll_strerror(st));
        cxl_coll_req_free(req);
    }
    destroy_team(team);
}

/* Rank 1's publication, written from rank 0's progress function. */
static struct {
    unsigned calls;  /* of the progress function */
    unsigned bad_arg;
    uint64_t step;
    size_t   len;    /* 0: rank 1 publishes nothing */
    uint8_t  data[CXL_COLL_LL_MAX];
} g_prog;

static void prog_publish(void *arg)
{
    cxl_coll_sig_t *sig;
    unsigned i;

    g_prog.bad_arg += (arg != &g_prog);
    if ((++g_prog.calls != 1) || (g_prog.len == 0)) {
        return;
    }
    if (g_prog.len <= CXL_COLL_INLINE_MAX) {
        sig = cxl_coll_sig(g.peer.part, g_prog.step);
        memcpy(sig->u.inl, g_prog.data, g_prog.len);
        sig->call = g.call;
        cxl_coll_store(&sig->ready, cxl_coll_ready_make(g_prog.step ^ g.tag,
                                                        g_prog.len));
        cxl_coll_store(&sig->seq, g_prog.step);
        return;
    }
    for (i = 0; i * CXL_COLL_LL_PAYLOAD < g_prog.len; ++i) {
        peer_line(g_prog.step, i, g_prog.data, g_prog.len, g_prog.step);
    }
}

static void prog_expect(uint64_t step, size_t len, unsigned seed)
{
    g_prog.calls = 0;
    g_prog.step  = step;
    g_prog.len   = len;
    g.call       = bcast_hash(len, 1); /* rank 0's call, unless said */
    pattern(g_prog.data, len, seed);
}

/* The short path: blocking calls, rank 1 published while rank 0 waits. */
static void team_d(void)
{
    uint8_t *part = (uint8_t*)cxlpool_base(g.pool) + g.peer.own_off;
    uint32_t in[2] = {1, 2}, out[2] = {0, 0}, peer_in[2] = {10, 20};
    cxl_coll_team_t *team;
    uint8_t buf[CXL_COLL_LL_MAX];
    cxl_coll_status_t st;
    cxl_coll_sig_t *sig;
    uint64_t t0;

    team = make_team_progress(prog_publish, &g_prog, 4, -1, "short");
    if (team == NULL) {
        return;
    }
    /* steps 1-2: rank 1's bcast, inline and in flagged lines */
    prog_expect(1, 8, 11);
    st = cxl_coll_bcast(team, buf, 8, CXL_COLL_UINT8, 1);
    cxl_th_check((st == CXL_COLL_OK) && (memcmp(buf, g_prog.data, 8) == 0) &&
                 (g_prog.calls == 1), "short: bcast of 8 B from rank 1, "
                 "published from the progress function (%s, %u calls)",
                 cxl_coll_strerror(st), g_prog.calls);
    cxl_th_check(cxl_coll_done_line(part)->value == 1, "short: done line "
                 "after step 1 (%llu)",
                 (unsigned long long)cxl_coll_done_line(part)->value);
    prog_expect(2, 100, 12);
    st = cxl_coll_bcast(team, buf, 100, CXL_COLL_UINT8, 1);
    cxl_th_check((st == CXL_COLL_OK) && (memcmp(buf, g_prog.data, 100) == 0),
                 "short: bcast of 100 B from rank 1 in flagged lines (%s)",
                 cxl_coll_strerror(st));
    /* step 3: allreduce of 8 B, both inline */
    prog_expect(3, 8, 0);
    g.call = call_hash(CXL_COLL_ALLREDUCE, 2, CXL_COLL_UINT32, CXL_COLL_SUM, 0);
    memcpy(g_prog.data, peer_in, sizeof(peer_in));
    st  = cxl_coll_allreduce(team, in, out, 2, CXL_COLL_UINT32, CXL_COLL_SUM);
    sig = cxl_coll_sig(part, 3);
    cxl_th_check((st == CXL_COLL_OK) && (out[0] == 11) && (out[1] == 22),
                 "short: allreduce sums {1, 2} and {10, 20} (%s: %u %u)",
                 cxl_coll_strerror(st), out[0], out[1]);
    cxl_th_check((sig->seq == 3) && (memcmp(sig->u.inl, in, 8) == 0) &&
                 (cxl_coll_ready_bytes(sig->ready, 3 ^ g.tag) == 8),
                 "short: rank 0's input inline in its signal line of step 3");
    /* steps 4-6: rank 0's bcasts, inline, flagged and in the small slot */
    g_prog.len = 0;
    cxl_th_check(root_bcast(team, 4, 24, 4, 2) == CXL_COLL_OK,
                 "short: root step 4, 24 B");
    cxl_th_check(root_bcast(team, 5, 200, 5, 2) == CXL_COLL_OK,
                 "short: root step 5, 200 B");
    cxl_th_check(root_bcast(team, 6, 3000, 6, 2) == CXL_COLL_OK,
                 "short: root step 6, 3000 B");
    /* step 7: rank 1 never publishes: CXL_COLL_TIMEOUT (100 ms) ends the
     * wait, and the team refuses what follows */
    prog_expect(7, 0, 0);
    t0 = cxl_coll_now_ns();
    st = cxl_coll_bcast(team, buf, 8, CXL_COLL_UINT8, 1);
    cxl_th_check((st == CXL_COLL_ERR_TIMEOUT) &&
                 (cxl_coll_now_ns() - t0 < 5000000000ull) &&
                 (g_prog.calls > 1), "short: a wait for a peer that never "
                 "publishes times out (%s after %.3f s, %u progress calls)",
                 cxl_coll_strerror(st), (cxl_coll_now_ns() - t0) / 1e9,
                 g_prog.calls);
    st = cxl_coll_barrier(team);
    cxl_th_check(st == CXL_COLL_ERR_TIMEOUT, "short: the team refuses the "
                 "next call (%s)", cxl_coll_strerror(st));
    cxl_th_check(g_prog.bad_arg == 0, "short: the progress function got its "
                 "argument every time (%u times not)", g_prog.bad_arg);
    destroy_team(team);
}

/* The progress function of team_nested(): rank 1's input of the step
 * rank 0 waits in, and (g_nest.nest) a blocking bcast of rank 0's made
 * from inside the wait, on the same team. */
static struct {
    cxl_coll_team_t  *team;
    int               nest;
    cxl_coll_status_t nested;
    uint64_t          value;
} g_nest;

static void prog_nested(void *arg)
{
    prog_publish(arg);
    if ((g_prog.calls == 1) && g_nest.nest) {
        g_nest.nest   = 0;
        g_nest.nested = cxl_coll_bcast(g_nest.team, &g_nest.value, 1,
                                       CXL_COLL_UINT64, 0);
    }
}

/*
 * A blocking call made from the progress function while a repeated call
 * (the kept one, team->memo) waits: it runs on a call prepared on its
 * own, and the kept one, which the waiting call reads in place, stays the
 * allreduce.
 */
static void team_nested(void)
{
    uint8_t *part = (uint8_t*)cxlpool_base(g.pool) + g.peer.own_off;
    uint32_t in[2] = {1, 2}, out[2], peer_in[2] = {10, 20};
    cxl_coll_team_t *team;
    cxl_coll_status_t st;
    cxl_coll_sig_t *sig;
    uint64_t step;

    team = make_team_progress(prog_nested, &g_prog, 4, -1, "nested");
    if (team == NULL) {
        return;
    }
    g_nest.team = team;
    /* step 1 prepares the allreduce, step 2 repeats it and rank 0 makes a
     * bcast (step 3) from inside its wait; step 4 repeats it again */
    for (step = 1; step <= 4; step += (step == 2) ? 2 : 1) {
        prog_expect(step, 8, 0);
        g.call = call_hash(CXL_COLL_ALLREDUCE, 2, CXL_COLL_UINT32,
                           CXL_COLL_SUM, 0);
        memcpy(g_prog.data, peer_in, sizeof(peer_in));
        g_nest.nest   = (step == 2);
        g_nest.nested = CXL_COLL_ERR_INVAL;
        g_nest.value  = 0x1122334455667788ull;
        out[0] = out[1] = 0;
        st = cxl_coll_allreduce(team, in, out, 2, CXL_COLL_UINT32,
                                CXL_COLL_SUM);
        cxl_th_check((st == CXL_COLL_OK) && (out[0] == 11) && (out[1] == 22),
                     "nested: allreduce of step %llu sums {1, 2} and "
                     "{10, 20} (%s: %u %u)", (unsigned long long)step,
                     cxl_coll_strerror(st), out[0], out[1]);
        if (step != 2) {
            continue;
        }
        sig = cxl_coll_sig(part, 3);
        cxl_th_check((g_nest.nested == CXL_COLL_OK) && (sig->seq == 3) &&
                     (memcmp(sig->u.inl, &g_nest.value, 8) == 0),
                     "nested: the bcast made in the wait took step 3, its "
                     "8 B inline (%s)", cxl_coll_strerror(g_nest.nested));
        cxl_th_check(team->memo_valid && !team->memo_busy &&
                     (team->memo_key.type == CXL_COLL_ALLREDUCE) &&
                     (team->memo.args.count == 2),
                     "nested: the kept call is still the allreduce (type "
                     "%d, busy %d)", (int)team->memo_key.type,
                     team->memo_busy);
    }
    cxl_th_check(g_prog.bad_arg == 0, "nested: the progress function got "
                 "its argument every time");
    destroy_team(team);
}

/* Counts the calls of the team's progress function by cxl_coll_idle(). */
static void prog_count(void *arg)
{
    ++*(unsigned*)arg;
}

/*
 * How a wait progresses the caller: every progress_interval polls while it
 * spins, then before every yield.  A rank waiting in a collective also
 * serves, through its progress, the one-sided operations its peers make on
 * its memory (the cxl transport executes those in the owner's progress):
 * with the interval counted in yields too, an MPI_Fetch_and_op on a rank
 * that sat in MPI_Barrier took 695 us instead of 5.
 */
static void team_idle(void)
{
    cxl_coll_team_t *team;
    cxl_coll_idle_t idle;
    unsigned calls = 0, i;

    team = make_team_progress(prog_count, &calls, 100, 250, "idle");
    if (team == NULL) {
        return;
    }
    cxl_coll_idle_init(team, &idle);
    for (i = 0; i < 250; ++i) {
        cxl_coll_idle(team, &idle);
    }
    cxl_th_check(calls == 2, "idle: 250 spinning polls progress every 100th "
                 "(%u calls, expected 2)", calls);
    for (i = 0; i < 20; ++i) {
        cxl_coll_idle(team, &idle);
    }
    cxl_th_check(calls == 22, "idle: after the spin, every one of 20 yields "
                 "is preceded by a progress call (%u calls, expected 22)",
                 calls);
    destroy_team(team);
}

/*
 * A peer that gave up the team and destroyed it: its partition is freed and
 * may be another team's by now, zeroed, so no abort line is left to read.
 * A rank that waits for it learns from the extent's generation that it
 * left, within CXL_COLL_PEER_CHECK, not at CXL_COLL_TIMEOUT (here 10 s).
 */
static void team_e(void)
{
    uint64_t old_off = g.peer.ext.offset, t0, ns;
    cxl_coll_team_t *team;
    cxl_coll_status_t st;
    cxlpool_extent_t ext;
    const char *why;

    setenv("CXL_COLL_TIMEOUT", "10s", 1);
    team = make_team();
    setenv("CXL_COLL_TIMEOUT", "100ms", 1);
    if (team == NULL) {
        return;
    }
    cxlpool_free(g.pool, old_off);
    if (cxlpool_alloc(g.pool, LINES_REGION, 4096, "test-coll-lines-rank1", 0,
                      &ext) != CXLPOOL_OK) {
        cxl_th_check(0, "left: pool extent for rank 1 again: %s",
                     cxlpool_last_error());
        cxl_coll_team_destroy(team);
        return;
    }
    g.peer.ext  = ext;
    g.peer.part = (uint8_t*)cxlpool_base(g.pool) + ext.offset;
    memset(g.peer.part, 0, ext.length); /* the next team's initial state */
    t0  = cxl_coll_now_ns();
    st  = cxl_coll_barrier(team);
    ns  = cxl_coll_now_ns() - t0;
    why = cxl_coll_last_error();
    cxl_th_check((st == CXL_COLL_ERR_PEER_DEAD) && (ns < 2000000000ull) &&
                 (strstr(why, "gave up the team and left it") != NULL), "left: a barrier "
                 "with a rank whose partition was freed and %s fails in "
                 "%.3f s (%s)", (ext.offset == old_off) ?
                 "zeroed for another team" : "another extent zeroed",
                 ns / 1e9, why);
    cxl_coll_team_destroy(team);
}

/*
 * cxl_coll_team_abort(): the caller gives up outside a collective; its
 * abort line says why (what a waiting peer reads), its calls fail, a
 * second abort changes nothing.
 */
static void team_f(void)
{
    cxl_coll_team_t *team = make_team();
    cxl_coll_word_line_t *line;
    cxl_coll_status_t st;

    if (team == NULL) {
        return;
    }
    line = cxl_coll_abort_line((uint8_t*)cxlpool_base(g.pool) +
                               g.peer.own_off);
    cxl_coll_team_abort(NULL, CXL_COLL_ERR_INVAL);
    cxl_coll_team_abort(team, CXL_COLL_OK);
    cxl_th_check(line->value == 0, "abort: with CXL_COLL_OK nothing (%llu)",
                 (unsigned long long)line->value);
    cxl_coll_team_abort(team, CXL_COLL_ERR_INVAL);
    cxl_th_check(line->value == 1 + (uint64_t)CXL_COLL_ERR_INVAL, "abort: "
                 "the abort line says invalid argument (%llu)",
                 (unsigned long long)line->value);
    cxl_coll_team_abort(team, CXL_COLL_ERR_NO_MEMORY);
    cxl_th_check(line->value == 1 + (uint64_t)CXL_COLL_ERR_INVAL, "abort: "
                 "a second abort keeps the first reason");
    st = cxl_coll_barrier(team);
    cxl_th_check(st == CXL_COLL_ERR_INVAL, "abort: the next call fails (%s)",
                 cxl_coll_strerror(st));
    cxl_coll_team_destroy(team);
}

/*
 * A failed team's destroy: rank 0 published a bcast (3000 B, small slot)
 * that rank 1 has not read, then gave up.  Freeing its partition at once
 * pulled the data from under a reader still copying it; destroy now waits,
 * at most CXL_COLL_DRAIN_NS, and keeps the partition if rank 1 never gets
 * done.  Once rank 1's done line passed the step, destroy frees at once.
 */
static void team_g(void)
{
    uint64_t t0, ns;
    cxlpool_extent_t e;
    cxl_coll_team_t *team;
    int kept, round;

    for (round = 0; round < 2; ++round) {
        team = make_team();
        if (team == NULL) {
            return;
        }
        cxl_th_check(root_bcast(team, 1, 3000, 7, 2) == CXL_COLL_OK,
                     "drain: root step 1, 3000 B, rank 1 reads it later");
        cxl_coll_team_abort(team, CXL_COLL_ERR_INVAL);
        if (round == 1) {
            peer_done(1); /* rank 1 read it */
        }
        t0 = cxl_coll_now_ns();
        cxl_coll_team_destroy(team);
        ns   = cxl_coll_now_ns() - t0;
        kept = (cxlpool_extent_find(g.pool, g.peer.own_off, 4096, &e) ==
                CXLPOOL_OK);
        if (round == 0) {
            cxl_th_check(kept && (ns >= CXL_COLL_DRAIN_NS / 2), "drain: a "
                         "failed team's partition that rank 1 may still read "
                         "is kept (%s after %.3f s)", kept ? "kept" : "freed",
                         ns / 1e9);
            if (kept) {
                cxlpool_free(g.pool, g.peer.own_off);
            }
        } else {
            cxl_th_check(!kept && (ns < CXL_COLL_DRAIN_NS / 2), "drain: freed "
                         "once rank 1 is done with it (%s after %.3f s)",
                         kept ? "kept" : "freed", ns / 1e9);
        }
    }
}

/*
 * Lines of another team: rank 1's partition reused by a team whose step 1
 * and 2 publications (inline, flagged) carry the same step numbers but
 * that team's tag.  Rank 0 must not take them; it takes the same bytes
 * once they carry this team's tag.
 */
static void team_h(void)
{
    uint64_t mine, other = 0, first_off, first_tag;
    uint8_t data[100], buf[100];
    cxl_coll_team_t *team = make_team();
    cxl_coll_req_t *req = NULL;
    cxl_coll_status_t st = CXL_COLL_OK;
    cxl_coll_sig_t *sig;
    unsigned i;

    if (team == NULL) {
        return;
    }
    /* the next team in the same partitions has another tag */
    first_off = g.peer.own_off;
    first_tag = g.tag;
    destroy_team(team);
    team = make_team();
    if (team == NULL) {
        return;
    }
    cxl_th_check((g.tag != first_tag) && (g.tag >> 63), "other team: a team "
                 "made after another in %s partition has another tag "
                 "(0x%llx, 0x%llx)", (g.peer.own_off == first_off) ?
                 "the same" : "another",
                 (unsigned long long)first_tag, (unsigned long long)g.tag);
    mine  = g.tag;
    other = mine ^ 0x5a5a5a5a5a5aull; /* differs in the ready tag's bits */
    pattern(data, sizeof(data), 21);
    /* step 1: 8 B inline */
    sig = cxl_coll_sig(g.peer.part, 1);
    memcpy(sig->u.inl, data, 8);
    sig->call = bcast_hash(8, 1);
    cxl_coll_store(&sig->ready, cxl_coll_ready_make(1 ^ other, 8));
    cxl_coll_store(&sig->seq, 1);
    memset(buf, 0xee, sizeof(buf));
    if (reader_post(team, buf, 8, 1, "other team", &req)) {
        for (i = 0; i < 64; ++i) {
            st = cxl_coll_test(req);
        }
        cxl_th_check(st == CXL_COLL_INPROGRESS, "other team: an inline "
                     "publication of step 1 under another team's tag is not "
                     "taken (%s)", cxl_coll_strerror(st));
        cxl_coll_store(&sig->ready, cxl_coll_ready_make(1 ^ mine, 8));
        st = cxl_coll_test(req);
        cxl_th_check((st == CXL_COLL_OK) && !memcmp(buf, data, 8), "other "
                     "team: taken under this team's tag (%s)",
                     cxl_coll_strerror(st));
        cxl_coll_req_free(req);
    }
    /* step 2: 100 B in flagged lines */
    g.call = bcast_hash(sizeof(data), 1);
    g.tag  = other;
    for (i = 0; i * CXL_COLL_LL_PAYLOAD < sizeof(data); ++i) {
        peer_line(2, i, data, sizeof(data), 2);
    }
    g.tag = mine;
    memset(buf, 0xee, sizeof(buf));
    if (reader_post(team, buf, sizeof(data), 2, "other team", &req)) {
        for (i = 0; i < 64; ++i) {
            st = cxl_coll_test(req);
        }
        cxl_th_check(st == CXL_COLL_INPROGRESS, "other team: flagged lines of "
                     "step 2 under another team's tag are not taken (%s)",
                     cxl_coll_strerror(st));
        for (i = 0; i * CXL_COLL_LL_PAYLOAD < sizeof(data); ++i) {
            peer_line(2, i, data, sizeof(data), 2);
        }
        st = cxl_coll_test(req);
        cxl_th_check((st == CXL_COLL_OK) && !memcmp(buf, data, sizeof(data)),
                     "other team: taken under this team's tag (%s)",
                     cxl_coll_strerror(st));
        cxl_coll_req_free(req);
    }
    destroy_team(team);
}

int main(void)
{
    char spec[300];
    cxlpool_params_t pp;

    setenv("CXL_COLL_TIMEOUT", "100ms", 1);
    setenv("CXL_COLL_PEER_CHECK", "10ms", 1);
    setenv("CXL_COLL_SPIN", "0", 1);
    unsetenv("CXL_COLL_TEST_SKIP_WB");
    unsetenv("CXL_COLL_POOL_INPLACE");
    if (cxl_th_pool_create("lines", 0, 64ull << 20, g.path, sizeof(g.path), spec,
                           sizeof(spec)) != 0) {
        return 1;
    }
    cxlpool_params_init(&pp);
    pp.path = g.path;
    if ((cxlpool_open(&pp, &g.pool) != CXLPOOL_OK) ||
        (cxlpool_alloc(g.pool, LINES_REGION, 4096, "test-coll-lines-rank1", 0,
                       &g.peer.ext) != CXLPOOL_OK)) {
        fprintf(stderr, "test_coll_lines: pool %s: %s\n", g.path,
                cxlpool_last_error());
        cxl_th_pool_destroy(g.path, 0);
        return 1;
    }
    g.peer.part = (uint8_t*)cxlpool_base(g.pool) + g.peer.ext.offset;

    team_a();
    team_b();
    team_c();
    team_d();
    team_nested();
    team_idle();
    team_e();
    team_f();
    team_g();
    team_h();

    cxlpool_free(g.pool, g.peer.ext.offset);
    cxlpool_close(g.pool);
    cxl_th_pool_destroy(g.path, 0);
    return cxl_th_summary("test_coll_lines");
}
