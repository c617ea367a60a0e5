/*
 * Harness: the collectives' reading of a peer's partition (coll_step.c
 * cxl_coll_peek/cxl_coll_fetch and every engine above it: coll_barrier.c,
 * coll_move.c, coll_reduce_alg.c).  A team member may write anything into
 * its own partition of the team region: signal lines (seq, ready, inline
 * payload, the pool offset and stride of a buffer to read in place), its
 * done and abort lines, its data slots.  The real library runs rank 0 of a
 * two-rank team; rank 1 is an allocated extent of the pool whose bytes are
 * the input, announced through the harness's out-of-band exchange.
 *
 * Properties, whatever rank 1 wrote:
 *   - every collective returns, OK or an error (CXL_COLL_TIMEOUT bounds a
 *     wait for a peer that never moves), and the team is destroyed;
 *   - rank 0 writes nothing into rank 1's partition (it only reads peers);
 *   - every copy lands inside the caller's buffers: they are malloc'd at
 *     their exact size, so ASan reports a byte outside;
 *   - every read stays inside the pool mapping (outside it faults).
 *
 * Input: byte 0 (ctl): bits 0-1 collectives - 1; bit 2: the harness stamps
 * seq of signal line k, and the flag of each of its flagged lines, with
 * the steps the team will use (1..8; flags tagged as the team tags them),
 * and the call word of the signal line and the flags with the hash of the
 * collective that takes step k if each takes one (the last one's beyond),
 * bit 3: it stamps the step tag into each ready word (the fuzzer would
 * have to find both 64-bit values); then 4 bytes per collective (type, count low,
 * count high | root << 7, dtype/op); the rest is rank 1's partition from
 * offset 0 (header, done, abort, 8 signal lines, their flagged lines and
 * small slots, then its data slots).
 *
 * FUZZ_COLL_WRITE_SEEDS=DIR writes seed inputs into DIR and exits.
 */
#define _GNU_SOURCE
#include "coll_fake_peer.h"
#include "coll_int.h"
#include "fuzz_pool_file.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_COLL_POOL_SIZE  (16ull << 20)
#define FUZZ_COLL_REGION     (64ull << 10)
#define FUZZ_COLL_MAX_OPS    4
#define FUZZ_COLL_HDR_BYTES  (1 + 4 * FUZZ_COLL_MAX_OPS)

#define fuzz_coll_check(_cond, _what) \
    do { \
        if (!(_cond)) { \
            fprintf(stderr, "fuzz_coll_sig: %s\n", _what); \
            abort(); \
        } \
    } while (0)

static struct {
    char              path[64];
    cxlpool_t        *pool;   /* the harness's own handle: rank 1's extent */
    cxl_fake_peer_t   peer;   /* rank 1's partition */
} fuzz_coll;

static void fuzz_coll_make_pool(void)
{
    cxlpool_params_t params;

    fuzz_pool_file_make(FUZZ_COLL_POOL_SIZE, NULL, fuzz_coll.path,
                        sizeof(fuzz_coll.path));
    cxlpool_params_init(&params);
    params.path = fuzz_coll.path;
    fuzz_coll_check(cxlpool_open(&params, &fuzz_coll.pool) == CXLPOOL_OK,
                    "open the pool");
    fuzz_coll_check(cxlpool_alloc(fuzz_coll.pool, FUZZ_COLL_REGION, 4096,
                                  "fuzz-coll-rank1", 0, &fuzz_coll.peer.ext) ==
                    CXLPOOL_OK, "rank 1's partition");
    fuzz_coll.peer.part = (uint8_t*)cxlpool_base(fuzz_coll.pool) +
                          fuzz_coll.peer.ext.offset;
}

/*
 * Seeds: per collective type, counts for each kind of publication
 * (inline, flagged lines, small slot, data slot),
 * with rank 1's lines as an honest peer leaves them for the steps the
 * team uses: seq and ready stamped by the harness (ctl bits 2-3), ready
 * bytes covering the whole publication, done far ahead, abort 0.
 */
static void fuzz_coll_write_seeds(const char *dir)
{
    static const uint16_t counts[] = {3, 25, 700, 3000};
    enum { PART = CXL_COLL_OFF_DATA + 8192 };
    uint8_t in[FUZZ_COLL_HDR_BYTES + PART];
    _Alignas(64) uint8_t part[PART];
    cxl_coll_word_line_t *done;
    cxl_coll_sig_t *sig;
    char path[4096];
    unsigned t, c, k;
    size_t len;
    FILE *f;

    for (t = 0; t < CXL_COLL_TYPE_LAST; ++t) {
        for (c = 0; c < sizeof(counts) / sizeof(counts[0]); ++c) {
            memset(in, 0, sizeof(in));
            memset(part, 0, sizeof(part));
            in[0] = 0x0c | 1;                   /* stamps, 2 collectives */
            for (k = 0; k < 2; ++k) {
                in[1 + 4 * k] = (uint8_t)t;
                in[2 + 4 * k] = counts[c] & 0xff;
                in[3 + 4 * k] = (uint8_t)((counts[c] >> 8) | (k << 7));
                in[4 + 4 * k] = 1;              /* int32, sum */
            }
            ((cxl_coll_hdr_t*)part)->magic       = CXL_COLL_MAGIC;
            ((cxl_coll_hdr_t*)part)->rank        = 1;
            ((cxl_coll_hdr_t*)part)->size        = 2;
            ((cxl_coll_hdr_t*)part)->region_size = FUZZ_COLL_REGION;
            done = cxl_coll_done_line(part);
            done->value = 1000;
            for (k = 1; k <= CXL_COLL_NSIG; ++k) {
                sig = cxl_coll_sig(part, k);
                sig->ready = 2u * 4u * counts[c];   /* both blocks */
                sig->u.ext.buf_off = 0;
                sig->u.ext.stride  = (4u * counts[c] + 63) & ~63u;
            }
            memcpy(in + FUZZ_COLL_HDR_BYTES, part, sizeof(part));
            /* the harness zeroes what the input leaves out */
            for (len = sizeof(in); (len > 0) && (in[len - 1] == 0); --len) {
            }
            snprintf(path, sizeof(path), "%s/seed-%s-%u", dir,
                     cxl_coll_type_name((cxl_coll_type_t)t), counts[c]);
            f = fopen(path, "wb");
            fuzz_coll_check((f != NULL) &&
                            (fwrite(in, 1, len, f) == len) &&
                            (fclose(f) == 0), "write a seed");
        }
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *seeds = getenv("FUZZ_COLL_WRITE_SEEDS");

    (void)argc;
    (void)argv;
    if (seeds != NULL) {
        fuzz_coll_write_seeds(seeds);
        exit(0);
    }
    fuzz_coll_make_pool();
    setenv("CXL_COLL_POOL", fuzz_coll.path, 1);
    setenv("CXL_COLL_REGION_SIZE", "64k", 1);
    setenv("CXL_COLL_CHUNK_SIZE", "8k", 1);
    setenv("CXL_COLL_ONESHOT_MAX", "1k", 1);
    setenv("CXL_COLL_TIMEOUT", "200us", 1);
    setenv("CXL_COLL_PEER_CHECK", "100us", 1);
    setenv("CXL_COLL_SPIN", "0", 1);
    unsetenv("CXL_COLL_LOG");
    unsetenv("CXL_COLL_TEST_SKIP_WB");
    return 0;
}

/* The collective of 4 input bytes. */
static void fuzz_coll_args(const uint8_t *op, cxl_coll_args_t *a)
{
    static const cxl_coll_dtype_t dtypes[] = {
        CXL_COLL_UINT8, CXL_COLL_INT32, CXL_COLL_FLOAT32, CXL_COLL_FLOAT64
    };

    memset(a, 0, sizeof(*a));
    a->type  = (cxl_coll_type_t)(op[0] % CXL_COLL_TYPE_LAST);
    a->count = op[1] | ((size_t)(op[2] & 0x7f) << 8);  /* up to 32767 */
    a->root  = op[2] >> 7;
    a->dtype = dtypes[op[3] & 3];
    a->op    = (cxl_coll_op_t)((op[3] >> 2) % 3);      /* sum, prod, min */
}

/* Rank 1's partition from the input, with the stamps ctl asks for (ops:
 * the collectives' input bytes). */
static void fuzz_coll_write_peer(const cxl_coll_team_t *team, uint8_t ctl,
                                 const uint8_t *ops, unsigned nops,
                                 const uint8_t *data, size_t size)
{
    cxl_coll_call_t call;
    cxl_coll_args_t a;
    cxl_coll_sig_t *sig;
    uint64_t step;
    unsigned i;

    memset(fuzz_coll.peer.part, 0, FUZZ_COLL_REGION);
    memcpy(fuzz_coll.peer.part, data,
           (size < FUZZ_COLL_REGION) ? size : FUZZ_COLL_REGION);
    for (step = 1; step <= CXL_COLL_NSIG; ++step) {
        sig = cxl_coll_sig(fuzz_coll.peer.part, step);
        if (ctl & 0x4) {
            fuzz_coll_args(ops + 4 * ((step <= nops) ? step - 1 : nops - 1),
                           &a);
            cxl_coll_call_make(&a, cxl_coll_dtype_size(a.dtype), step, 1,
                               &call);
            sig->seq  = step;
            sig->call = call.hash;
            for (i = 0; i < CXL_COLL_LL_LINES; ++i) {
                cxl_coll_ll_line(fuzz_coll.peer.part, step, i)->flag =
                    cxl_coll_ll_flag(cxl_coll_tag(team, step), call.hash);
            }
        }
        if (ctl & 0x8) {
            sig->ready = cxl_coll_ready_make(cxl_coll_tag(team, step),
                                             sig->ready & CXL_COLL_READY_MASK);
        }
    }
}

/* Bytes of sbuf (in 0) and rbuf (in 1) that rank 0's role needs. */
static void fuzz_coll_sizes(const cxl_coll_args_t *a, size_t bytes,
                            size_t *sb, size_t *rb)
{
    int root = (a->root == 0);

    switch (a->type) {
    case CXL_COLL_BCAST:          *sb = 0;                *rb = bytes; break;
    case CXL_COLL_REDUCE:         *sb = bytes;            *rb = root ? bytes : 0; break;
    case CXL_COLL_GATHER:         *sb = bytes;            *rb = root ? 2 * bytes : 0; break;
    case CXL_COLL_SCATTER:        *sb = root ? 2 * bytes : 0; *rb = bytes; break;
    case CXL_COLL_ALLGATHER:      *sb = bytes;            *rb = 2 * bytes; break;
    case CXL_COLL_REDUCE_SCATTER: *sb = 2 * bytes;        *rb = bytes; break;
    case CXL_COLL_ALLTOALL:       *sb = 2 * bytes;        *rb = 2 * bytes; break;
    default:                      *sb = bytes;            *rb = bytes; break;
    }
}

/* One collective as rank 0, with buffers of their exact sizes. */
static void fuzz_coll_one(cxl_coll_team_t *team, const uint8_t *op)
{
    cxl_coll_args_t a;
    size_t es, sb, rb;
    uint8_t *s, *r;

    fuzz_coll_args(op, &a);
    es = cxl_coll_dtype_size(a.dtype);
    /* exactly what rank 0's role reads and writes (malloc(0) too: ASan
     * reports any byte touched outside) */
    fuzz_coll_sizes(&a, a.count * es, &sb, &rb);
    s = malloc(sb);
    r = malloc(rb);
    fuzz_coll_check(((s != NULL) || (sb == 0)) && ((r != NULL) || (rb == 0)),
                    "buffers");
    memset(s, 0x5a, sb);
    memset(r, 0xa5, rb);
    a.sbuf = (a.type == CXL_COLL_BCAST) ? NULL : s;
    a.rbuf = r;
    (void)cxl_coll_run(team, &a); /* OK or an error: both are fine */
    free(s);
    free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cxl_coll_team_t *team;
    uint8_t *before;
    unsigned nops, i;
    uint8_t ctl;

    if (size < FUZZ_COLL_HDR_BYTES) {
        return 0;
    }
    ctl  = data[0];
    nops = 1 + (ctl & 3);

    /* rank 1's partition as a fresh member leaves it, so creation sees a
     * valid header; then the input */
    fuzz_coll_check(cxl_fake_peer_team(&fuzz_coll.peer, fuzz_coll.path, 0,
                                       &team) == CXL_COLL_OK,
                    cxl_coll_last_error());

    fuzz_coll_write_peer(team, ctl, data + 1, nops, data + FUZZ_COLL_HDR_BYTES,
                         size - FUZZ_COLL_HDR_BYTES);
    before = malloc(FUZZ_COLL_REGION);
    fuzz_coll_check(before != NULL, "snapshot");
    memcpy(before, fuzz_coll.peer.part, FUZZ_COLL_REGION);

    for (i = 0; i < nops; ++i) {
        fuzz_coll_one(team, data + 1 + 4 * i);
    }
    fuzz_coll_check(memcmp(before, fuzz_coll.peer.part, FUZZ_COLL_REGION) == 0,
                    "rank 0 wrote into rank 1's partition");
    free(before);
    cxl_coll_team_destroy(team);
    return 0;
}
