/*
 * coll_check [--mode all|hw|sw|neg|shared] [--np LIST] [--part LIST] [--quick]
 *            [--watchdog S] [-v] - the process-level checker of libcxl_coll,
 * written against <ucx_cxl/coll.h> only.
 *
 * Forks N ranks (test/coll/coll_test_harness), creates one team per
 * configuration and runs a list of collectives that every rank builds
 * alike: every collective x dtype x supported op x count (0, 1, 37) x root
 * (all for np <= 4, else first/middle/last) x in-place, at np 1, 2, 3, 4,
 * 5, 8 ("main"; sampled at np 5 and 8); large counts (1 MiB and more, many
 * chunks) sampled across dtypes and ops ("large"); the large ones again
 * with a 64 KiB region, 4 KiB chunks and a 1 KiB one-shot limit, so every
 * message goes in rounds ("rounds"); 2000 back-to-back calls ("b2b");
 * non-blocking groups of 4 and 16 outstanding requests, tested in turn
 * ("nb"); pairs of a posted collective and a blocking one that fits the
 * short path, on half the ranks called while the first is still queued,
 * so the short and the request path meet in one step ("mix"); user buffers from cxl_coll_mem_alloc (read in place) in a share
 * of all of them.  Input element e of rank q in call k is a function of
 * (k, q, e), so data change with every call.
 *
 * Every rank checks its own output against values it computes itself with
 * coll_ref.c (reductions folded in rank order 0..N-1), guard bytes around
 * every output, untouched inputs and root-only outputs; at the end the
 * ranks exchange a hash of every output over the out-of-band channel and
 * those that must be equal (bcast, allreduce, allgather) are compared
 * bitwise.  "bad" checks the errors for bad input (count overflow,
 * unsupported dtype/op, root out of range, NULL buffer, too many requests)
 * and that a good collective works afterwards; "pools" a team over two
 * pools (CXL_COLL_ERR_NOT_SAME_POOL on every rank, no hang).
 *
 * Modes: hw on a normal pool; sw on the strict non-coherent emulator
 * (emulate-nc, every rank an emulated host of its own); neg, the negative
 * control: sw with CXL_COLL_TEST_SKIP_WB=y, where some checks must
 * fail (it passes when they do); shared: sw with two ranks per emulated
 * host, as on a pod of multi-core hosts (np 4 and 8 only: hosts 0 0 1
 * 1 ...).  all (default): hw, sw, neg, shared.
 *
 * Ends with "coll-check: N passed, N failed" (one per case, plus one per
 * configuration for the ranks' exit); exit 1 on any failure.
 */
#include "coll_ref.h"
#include "coll_test_harness.h"

#include <ucx_cxl/coll.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define CK_MAX_CASES    16384
#define CK_GUARD        64
#define CK_GUARD_BYTE   0xa5
#define CK_FILL_BYTE    0xcd
#define CK_MAX_REPORT   6
#define CK_HASH_BATCH   512
#define CK_POOL_SIZE    (512ull << 20)

typedef struct {
    uint8_t  type;
    uint8_t  dtype;
    uint8_t  op;
    uint8_t  inplace;
    uint8_t  poolbuf;   /* buffers from cxl_coll_mem_alloc */
    uint8_t  nullbuf;   /* NULL where the buffer is not significant */
    uint8_t  group;     /* > 1: first of a non-blocking group of that many */
    uint8_t  mix;       /* first of a pair: posted, the second blocking */
    uint8_t  jitter;    /* one rank sleeps before calling */
    int      root;
    size_t   count;
    uint32_t call;      /* seed of the data */
} ck_case_t;

typedef struct {
    const char *name;
    int         np;
    int         sw;
    int         skip_wb;
    const char *region;   /* CXL_COLL_* for the team; NULL: default */
    const char *chunk;
    const char *oneshot;
    int       (*fn)(cxl_th_rank_t *r);
    ck_case_t  *cases;
    int         ncases;
} ck_config_t;

/* shared by all ranks and the parent (anonymous MAP_SHARED before fork) */
typedef struct {
    uint32_t fails[CK_MAX_CASES];  /* ranks that failed case k */
    uint64_t arrive[CXL_TH_MAX_RANKS];
    uint32_t extra_fails;          /* checks outside the case list */
    uint32_t extra_checks;
} ck_shared_t;

static ck_shared_t *ck_sh;
static int          ck_verbose;
static const char  *ck_pool_a, *ck_pool_b; /* specs of the current run */
static unsigned     ck_reported;           /* per rank process */
static int          ck_neg;                /* in the negative control */

static const char *ck_mode_name(const ck_config_t *cfg)
{
    return cfg->skip_wb ? "neg" : (cfg->sw > 1) ? "shared" :
           cfg->sw ? "sw" : "hw";
}

static void ck_report(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* one write per line: ranks print concurrently */
static void ck_report(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    int n;

    if (ck_reported++ >= CK_MAX_REPORT) {
        return;
    }
    va_start(ap, fmt);
    n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return;
    }
    if ((size_t)n > sizeof(line) - 2) {
        n = sizeof(line) - 2;
    }
    line[n++] = '\n';
    if (ck_neg && (write(STDOUT_FILENO, "(expected) ", 11) < 0)) {
        return;
    }
    if (write(STDOUT_FILENO, line, n) < 0) {
        /* nothing to do about it */
    }
}

static double ck_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- data: a function of (call, rank, element) ---- */

static uint64_t ck_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x  = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x  = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t ck_gen(const ck_case_t *c, int rank, size_t e)
{
    static const uint64_t ispecial[] = {0, ~0ull, 100, 127, 0x80,
                                        0x7fffffffffffffffull,
                                        0x8000000000000000ull, 1};
    uint64_t h = ck_mix(ck_mix(((uint64_t)c->call << 20) ^ (uint64_t)rank) ^
                        (uint64_t)e);
    unsigned sel = h >> 58, sign = (h >> 57) & 1;
    int d        = (int)((h >> 40) % 9) - 4; /* exponent offset */
    double small = (double)(int)((h >> 32) % 9) - 4.0;
    size_t size  = cxl_coll_dtype_size(c->dtype);

    if (coll_ref_dtype_is_int(c->dtype)) {
        if (sel == 0) {
            h = ispecial[(h >> 8) % 8];
        }
        return (size == 8) ? h : (h & ((1ull << (8 * size)) - 1));
    }
    switch (c->dtype) {
    case CXL_COLL_FLOAT32:
        if (sel == 0) {
            static const uint32_t sp[] = {0, 0x80000000, 0x7f800000, 0xff800000,
                                          0x7fc00000, 0x7f7fffff, 0x3f800000,
                                          0x00000001};
            return sp[(h >> 8) % 8];
        }
        if (sel < 8) {
            float f = (float)small;
            uint32_t b;
            memcpy(&b, &f, 4);
            return b;
        }
        return ((uint64_t)sign << 31) | ((uint64_t)(127 + d) << 23) |
               (h & 0x7fffff);
    case CXL_COLL_FLOAT64:
        if (sel == 0) {
            static const uint64_t sp[] = {0, 0x8000000000000000ull,
                                          0x7ff0000000000000ull,
                                          0xfff0000000000000ull,
                                          0x7ff8000000000000ull,
                                          0x7fefffffffffffffull,
                                          0x3ff0000000000000ull, 1};
            return sp[(h >> 8) % 8];
        }
        if (sel < 8) {
            uint64_t b;
            memcpy(&b, &small, 8);
            return b;
        }
        return ((uint64_t)sign << 63) | ((uint64_t)(1023 + d) << 52) |
               (h & 0xfffffffffffffull);
    case CXL_COLL_FLOAT16:
        if (sel == 0) {
            static const uint16_t sp[] = {0, 0x8000, 0x7c00, 0xfc00, 0x7e00,
                                          0x7bff, 0x3c00, 0x0001};
            return sp[(h >> 8) % 8];
        }
        if (sel < 8) {
            return coll_ref_encode(coll_ref_fmt_f16, small);
        }
        return ((uint64_t)sign << 15) | ((uint64_t)(15 + d) << 10) |
               (h & 0x3ff);
    default:
        if (sel == 0) {
            static const uint16_t sp[] = {0, 0x8000, 0x7f80, 0xff80, 0x7fc0,
                                          0x7f7f, 0x3f80, 0x0001};
            return sp[(h >> 8) % 8];
        }
        if (sel < 8) {
            return coll_ref_encode(coll_ref_fmt_bf16, small);
        }
        return ((uint64_t)sign << 15) | ((uint64_t)(127 + d) << 7) | (h & 0x7f);
    }
}

/* ((x0 OP x1) OP x2) ... of element e over all ranks */
static uint64_t ck_fold(const ck_case_t *c, int np, size_t e, int *any_nan)
{
    uint64_t acc = ck_gen(c, 0, e);
    int q;

    *any_nan = 0;
    for (q = 1; q < np; q++) {
        acc = coll_ref_op(c->dtype, c->op, acc, ck_gen(c, q, e), any_nan);
    }
    return acc;
}

static int ck_is_reduction(int type)
{
    return (type == CXL_COLL_REDUCE) || (type == CXL_COLL_ALLREDUCE) ||
           (type == CXL_COLL_REDUCE_SCATTER);
}

static int ck_is_rooted(int type)
{
    return (type == CXL_COLL_BCAST) || (type == CXL_COLL_REDUCE) ||
           (type == CXL_COLL_GATHER) || (type == CXL_COLL_SCATTER);
}

/* results that are equal on every rank: compared by hash */
static int ck_same_everywhere(int type)
{
    return (type == CXL_COLL_BCAST) || (type == CXL_COLL_ALLREDUCE) ||
           (type == CXL_COLL_ALLGATHER);
}

/* ---- buffers ---- */

typedef struct {
    uint8_t *mem;     /* with guards; NULL: none */
    uint8_t *data;
    size_t   bytes;
    int      pool;
} ck_buf_t;

static int ck_buf_alloc(cxl_coll_team_t *team, ck_buf_t *b, size_t bytes,
                        int pool)
{
    b->bytes = bytes;
    b->pool  = pool;
    b->mem   = pool ? cxl_coll_mem_alloc(team, bytes + 2 * CK_GUARD) :
                      malloc(bytes + 2 * CK_GUARD);
    if (b->mem == NULL) {
        return -1;
    }
    b->data = b->mem + CK_GUARD;
    memset(b->mem, CK_GUARD_BYTE, CK_GUARD);
    memset(b->data + bytes, CK_GUARD_BYTE, CK_GUARD);
    memset(b->data, CK_FILL_BYTE, bytes);
    return 0;
}

static void ck_buf_free(cxl_coll_team_t *team, ck_buf_t *b)
{
    if (b->mem == NULL) {
        return;
    }
    if (b->pool) {
        cxl_coll_mem_free(team, b->mem);
    } else {
        free(b->mem);
    }
    b->mem = NULL;
}

static int ck_guards_ok(const ck_buf_t *b)
{
    size_t i;

    if (b->mem == NULL) {
        return 1;
    }
    for (i = 0; i < CK_GUARD; i++) {
        if ((b->mem[i] != CK_GUARD_BYTE) ||
            (b->data[b->bytes + i] != CK_GUARD_BYTE)) {
            return 0;
        }
    }
    return 1;
}

/* ---- one collective ---- */

typedef struct {
    const ck_case_t *c;
    int              idx;
    ck_buf_t         s, r;
    int              s_input; /* s holds this rank's generated input */
    size_t           r_check; /* result elements at the start of r */
    cxl_coll_args_t  args;
    cxl_coll_req_t  *req;
    uint64_t         hash;
} ck_op_t;

/* whether this rank passes CXL_COLL_IN_PLACE (as sbuf; scatter: as rbuf) */
static int ck_uses_inplace(const ck_case_t *c, int rank)
{
    if (!c->inplace) {
        return 0;
    }
    switch (c->type) {
    case CXL_COLL_REDUCE:
    case CXL_COLL_GATHER:
    case CXL_COLL_SCATTER:
        return rank == c->root;
    case CXL_COLL_ALLREDUCE:
    case CXL_COLL_ALLGATHER:
    case CXL_COLL_REDUCE_SCATTER:
    case CXL_COLL_ALLTOALL:
        return 1;
    default:
        return 0;
    }
}

static void ck_store(const ck_case_t *c, uint8_t *p, size_t idx, uint64_t v)
{
    size_t size = cxl_coll_dtype_size(c->dtype);

    coll_ref_store_bits(p + idx * size, size, v);
}

static uint64_t ck_load(const ck_case_t *c, const uint8_t *p, size_t idx)
{
    size_t size = cxl_coll_dtype_size(c->dtype);

    return coll_ref_load_bits(p + idx * size, size);
}

/*
 * The buffers of this rank: how many elements sbuf and rbuf have, whether
 * they are significant here (an insignificant one is NULL with nullbuf,
 * else a buffer that must stay untouched), and where the input goes.
 */
typedef struct {
    size_t scount, rcount;
    int    s_sig, r_sig;     /* significant on this rank */
    int    s_none, r_none;   /* no buffer at all (in-place, bcast sbuf) */
    int    in_r;             /* input written into rbuf (in-place) */
    size_t in_count;         /* input elements */
    size_t in_off;           /* first input element's index in its buffer */
    size_t r_check;          /* result elements to check in rbuf */
} ck_layout_t;

static void ck_layout(const ck_case_t *c, int rank, int np, ck_layout_t *l)
{
    size_t n = c->count, all = (size_t)np * n;
    int root = (rank == c->root), ip = ck_uses_inplace(c, rank);

    memset(l, 0, sizeof(*l));
    l->s_sig = l->r_sig = 1;
    switch (c->type) {
    case CXL_COLL_BARRIER:
        l->s_none = l->r_none = 1;
        break;
    case CXL_COLL_BCAST: /* buf is rbuf; the root's input is there */
        l->s_none   = 1;
        l->rcount   = n;
        l->in_r     = root;
        l->in_count = root ? n : 0;
        l->r_check  = n;
        break;
    case CXL_COLL_REDUCE:
    case CXL_COLL_ALLREDUCE:
        l->scount   = n;
        l->rcount   = n;
        l->in_count = n;
        l->r_sig    = (c->type == CXL_COLL_ALLREDUCE) || root;
        l->r_check  = l->r_sig ? n : 0;
        break;
    case CXL_COLL_GATHER:
    case CXL_COLL_ALLGATHER:
        l->scount   = n;
        l->rcount   = all;
        l->in_count = n;
        l->r_sig    = (c->type == CXL_COLL_ALLGATHER) || root;
        l->r_check  = l->r_sig ? all : 0;
        if (ip) {
            l->in_off = (size_t)rank * n;
        }
        break;
    case CXL_COLL_SCATTER:
        l->scount   = all;
        l->rcount   = n;
        l->s_sig    = root;
        l->in_count = root ? all : 0;
        l->r_check  = ip ? 0 : n;
        l->r_none   = ip;
        break;
    case CXL_COLL_REDUCE_SCATTER:
        l->scount   = all;
        l->rcount   = ip ? all : n;
        l->in_count = all;
        l->r_check  = n;
        break;
    default: /* alltoall */
        l->scount   = all;
        l->rcount   = all;
        l->in_count = all;
        l->r_check  = all;
        break;
    }
    if (ip && (c->type != CXL_COLL_SCATTER)) {
        l->s_none = 1;
        l->in_r   = 1;
    }
}

/* Buffers and arguments of case c for this rank; 0 on success. */
static int ck_prepare(cxl_coll_team_t *team, int rank, int np, ck_op_t *o)
{
    const ck_case_t *c = o->c;
    size_t size = cxl_coll_dtype_size(c->dtype), e;
    int ip = ck_uses_inplace(c, rank), null_all = c->nullbuf && !c->count;
    ck_layout_t l;
    uint8_t *in;

    memset(&o->s, 0, sizeof(o->s));
    memset(&o->r, 0, sizeof(o->r));
    o->req = NULL;
    ck_layout(c, rank, np, &l);
    if (!l.s_none && !null_all && (l.s_sig || !c->nullbuf) &&
        (ck_buf_alloc(team, &o->s, l.scount * size, c->poolbuf) != 0)) {
        return -1;
    }
    if (!l.r_none && !null_all && (l.r_sig || !c->nullbuf) &&
        (ck_buf_alloc(team, &o->r, l.rcount * size, c->poolbuf) != 0)) {
        ck_buf_free(team, &o->s);
        return -1;
    }
    in         = l.in_r ? o->r.data : o->s.data;
    o->s_input = !l.in_r && (o->s.mem != NULL) && l.s_sig;
    o->r_check = (o->r.mem != NULL) && l.r_sig ? l.r_check : 0;
    for (e = 0; (in != NULL) && (e < l.in_count); e++) {
        ck_store(c, in, l.in_off + e, ck_gen(c, rank, e));
    }

    memset(&o->args, 0, sizeof(o->args));
    o->args.type  = c->type;
    o->args.sbuf  = (ip && (c->type != CXL_COLL_SCATTER)) ? CXL_COLL_IN_PLACE :
                    o->s.mem ? o->s.data : NULL;
    o->args.rbuf  = (ip && (c->type == CXL_COLL_SCATTER)) ?
                    (void*)CXL_COLL_IN_PLACE : o->r.mem ? o->r.data : NULL;
    o->args.count = c->count;
    o->args.dtype = c->dtype;
    o->args.op    = c->op;
    o->args.root  = c->root;
    return 0;
}

/* FNV-1a of the bytes */
static uint64_t ck_hash(const uint8_t *p, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i;

    for (i = 0; i < len; i++) {
        h = (h ^ p[i]) * 0x100000001b3ull;
    }
    return h;
}

static const char *ck_desc(const ck_case_t *c, char *buf, size_t len)
{
    snprintf(buf, len, "%s %s%s%s count %zu root %d%s%s%s%s (call %u)",
             cxl_coll_type_name(c->type), cxl_coll_dtype_name(c->dtype),
             ck_is_reduction(c->type) ? " " : "",
             ck_is_reduction(c->type) ? cxl_coll_op_name(c->op) : "",
             c->count, c->root, c->inplace ? " in-place" : "",
             c->poolbuf ? " pool-buffers" : "", c->nullbuf ? " null" : "",
             c->group ? " non-blocking" : "", c->call);
    return buf;
}

/* expected value of output element idx of this rank */
static uint64_t ck_expected(const ck_case_t *c, int rank, int np, size_t idx,
                            int *any_nan)
{
    size_t n = c->count;

    *any_nan = 0;
    switch (c->type) {
    case CXL_COLL_BCAST:
        return ck_gen(c, c->root, idx);
    case CXL_COLL_REDUCE:
    case CXL_COLL_ALLREDUCE:
        return ck_fold(c, np, idx, any_nan);
    case CXL_COLL_GATHER:
    case CXL_COLL_ALLGATHER:
        return ck_gen(c, (int)(idx / n), idx % n);
    case CXL_COLL_SCATTER:
        return ck_gen(c, c->root, (size_t)rank * n + idx);
    case CXL_COLL_REDUCE_SCATTER:
        return ck_fold(c, np, (size_t)rank * n + idx, any_nan);
    default: /* alltoall: block rank of rank idx / n */
        return ck_gen(c, (int)(idx / n), (size_t)rank * n + idx % n);
    }
}

/* Checks the outputs of o on this rank; returns 1 if all is right. */
static int ck_verify(int rank, int np, ck_op_t *o, cxl_coll_status_t st)
{
    const ck_case_t *c = o->c;
    size_t e, i;
    uint64_t got, exp;
    int any_nan, ok = 1;
    char d[200];

    o->hash = 0;
    if (st != CXL_COLL_OK) {
        ck_report("FAIL rank %d case %d %s: %s (%s)", rank, o->idx,
                  ck_desc(c, d, sizeof(d)), cxl_coll_strerror(st),
                  cxl_coll_last_error());
        return 0;
    }
    if (c->type == CXL_COLL_BARRIER) {
        for (i = 0; i < (size_t)np; i++) {
            if (__atomic_load_n(&ck_sh->arrive[i], __ATOMIC_ACQUIRE) <
                c->call) {
                ck_report("FAIL rank %d case %d barrier returned before rank"
                          " %zu arrived", rank, o->idx, i);
                return 0;
            }
        }
        return 1;
    }
    for (e = 0; e < o->r_check; e++) {
        got = ck_load(c, o->r.data, e);
        exp = ck_expected(c, rank, np, e, &any_nan);
        if (any_nan ? !coll_ref_is_nan(c->dtype, got) : (got != exp)) {
            ck_report("FAIL rank %d case %d %s: element %zu = 0x%llx, "
                      "expected 0x%llx%s", rank, o->idx,
                      ck_desc(c, d, sizeof(d)), e, (unsigned long long)got,
                      (unsigned long long)exp, any_nan ? " (a NaN)" : "");
            ok = 0;
            break;
        }
    }
    /* an rbuf that is not significant here stays untouched */
    if (ok && (o->r_check == 0) && (o->r.mem != NULL)) {
        for (i = 0; i < o->r.bytes; i++) {
            if (o->r.data[i] != CK_FILL_BYTE) {
                ck_report("FAIL rank %d case %d %s: rbuf written though not "
                          "significant here (byte %zu)", rank, o->idx,
                          ck_desc(c, d, sizeof(d)), i);
                ok = 0;
                break;
            }
        }
    }
    /* inputs unchanged; an insignificant sbuf untouched */
    for (e = 0; ok && (o->s.mem != NULL) &&
                (e < o->s.bytes / cxl_coll_dtype_size(c->dtype)); e++) {
        if (o->s_input ? (ck_load(c, o->s.data, e) != ck_gen(c, rank, e)) :
                         (o->s.data[e] != CK_FILL_BYTE)) {
            ck_report("FAIL rank %d case %d %s: sbuf element %zu changed",
                      rank, o->idx, ck_desc(c, d, sizeof(d)), e);
            ok = 0;
        }
    }
    if (ok && (!ck_guards_ok(&o->s) || !ck_guards_ok(&o->r))) {
        ck_report("FAIL rank %d case %d %s: a guard byte changed", rank,
                  o->idx, ck_desc(c, d, sizeof(d)));
        ok = 0;
    }
    if (o->r_check > 0) {
        o->hash = ck_hash(o->r.data, o->r_check * cxl_coll_dtype_size(c->dtype));
    }
    return ok;
}

/* blocking call: cxl_coll_run, or the named function (every other case) */
static cxl_coll_status_t ck_call(cxl_coll_team_t *team, ck_op_t *o)
{
    const cxl_coll_args_t *a = &o->args;

    if ((o->c->call & 1) == 0) {
        return cxl_coll_run(team, a);
    }
    switch (a->type) {
    case CXL_COLL_BARRIER:
        return cxl_coll_barrier(team);
    case CXL_COLL_BCAST:
        return cxl_coll_bcast(team, a->rbuf, a->count, a->dtype, a->root);
    case CXL_COLL_REDUCE:
        return cxl_coll_reduce(team, a->sbuf, a->rbuf, a->count, a->dtype,
                               a->op, a->root);
    case CXL_COLL_ALLREDUCE:
        return cxl_coll_allreduce(team, a->sbuf, a->rbuf, a->count, a->dtype,
                                  a->op);
    case CXL_COLL_GATHER:
        return cxl_coll_gather(team, a->sbuf, a->rbuf, a->count, a->dtype,
                               a->root);
    case CXL_COLL_SCATTER:
        return cxl_coll_scatter(team, a->sbuf, a->rbuf, a->count, a->dtype,
                                a->root);
    case CXL_COLL_ALLGATHER:
        return cxl_coll_allgather(team, a->sbuf, a->rbuf, a->count, a->dtype);
    case CXL_COLL_REDUCE_SCATTER:
        return cxl_coll_reduce_scatter(team, a->sbuf, a->rbuf, a->count,
                                       a->dtype, a->op);
    default:
        return cxl_coll_alltoall(team, a->sbuf, a->rbuf, a->count, a->dtype);
    }
}

static void ck_fail_case(int idx)
{
    __atomic_fetch_add(&ck_sh->fails[idx], 1, __ATOMIC_RELAXED);
}

static void ck_before(const ck_case_t *c, int rank, int np)
{
    if (c->jitter && (rank == (int)(c->call % np))) {
        usleep(300 + (c->call % 7) * 100);
    }
    if (c->type == CXL_COLL_BARRIER) {
        __atomic_store_n(&ck_sh->arrive[rank], c->call, __ATOMIC_RELEASE);
    }
}

/* cases [k, k + g): posted together, tested in turn, then verified */
static void ck_run_group(cxl_coll_team_t *team, const ck_config_t *cfg,
                         int rank, int k, int g, uint64_t *hashes)
{
    ck_op_t ops[32];
    cxl_coll_status_t st[32];
    int i, left, done[32];
    char d[200];

    for (i = 0; i < g; i++) {
        ops[i].c   = &cfg->cases[k + i];
        ops[i].idx = k + i;
        done[i]    = 0;
        st[i]      = CXL_COLL_OK;
        if (ck_prepare(team, rank, cfg->np, &ops[i]) != 0) {
            ck_report("FAIL rank %d case %d: no memory for the buffers", rank,
                      k + i);
            st[i]   = CXL_COLL_ERR_NO_MEMORY;
            done[i] = 2;
            continue;
        }
        ck_before(ops[i].c, rank, cfg->np);
        st[i] = cxl_coll_post(team, &ops[i].args, &ops[i].req);
        if (st[i] != CXL_COLL_OK) {
            done[i] = 1;
            ops[i].req = NULL;
        }
    }
    for (left = g; left > 0;) {
        for (left = 0, i = 0; i < g; i++) {
            if (done[i]) {
                continue;
            }
            st[i] = cxl_coll_test(ops[i].req);
            if (st[i] == CXL_COLL_INPROGRESS) {
                left++;
            } else {
                done[i] = 1;
            }
        }
    }
    for (i = 0; i < g; i++) {
        if (ops[i].req != NULL) {
            cxl_coll_req_free(ops[i].req);
        }
        if (done[i] == 2) {
            ck_fail_case(k + i);
            continue;
        }
        if (!ck_verify(rank, cfg->np, &ops[i], st[i])) {
            ck_fail_case(k + i);
        }
        hashes[k + i] = ops[i].hash;
        ck_buf_free(team, &ops[i].s);
        ck_buf_free(team, &ops[i].r);
        (void)d;
    }
}

/*
 * Cases k (posted) and k + 1 (blocking, short enough for the short path):
 * on every other rank the first is still queued when the second is
 * called, so that rank runs the second as a request while the others
 * take the short path: both paths in one step, all collectives.
 */
static void ck_run_mix(cxl_coll_team_t *team, const ck_config_t *cfg,
                       int rank, int k, uint64_t *hashes)
{
    int early = ((k / 2 + rank) % 2) == 0, i, bad[2] = {0, 0};
    cxl_coll_status_t st[2] = {CXL_COLL_OK, CXL_COLL_OK};
    cxl_coll_req_t *req = NULL;
    ck_op_t ops[2];

    for (i = 0; i < 2; i++) {
        ops[i].c   = &cfg->cases[k + i];
        ops[i].idx = k + i;
        if (ck_prepare(team, rank, cfg->np, &ops[i]) != 0) {
            ck_report("FAIL rank %d case %d: no memory for the buffers", rank,
                      k + i);
            bad[i] = 1;
        }
    }
    if (bad[0] || bad[1]) {
        /* every rank must make the same calls: none at all here */
        ck_fail_case(k);
        ck_fail_case(k + 1);
        return;
    }
    ck_before(ops[0].c, rank, cfg->np);
    st[0] = cxl_coll_post(team, &ops[0].args, &req);
    if ((st[0] == CXL_COLL_OK) && early) {
        st[0] = cxl_coll_wait(req);
    }
    ck_before(ops[1].c, rank, cfg->np);
    st[1] = ck_call(team, &ops[1]);
    if (req != NULL) {
        st[0] = cxl_coll_wait(req); /* done by now: the status again */
        cxl_coll_req_free(req);
    }
    for (i = 0; i < 2; i++) {
        if (!ck_verify(rank, cfg->np, &ops[i], st[i])) {
            ck_fail_case(k + i);
        }
        hashes[k + i] = ops[i].hash;
        ck_buf_free(team, &ops[i].s);
        ck_buf_free(team, &ops[i].r);
    }
}

/* Compares the hashes of results that must be equal on every rank. */
static int ck_compare_hashes(cxl_th_rank_t *r, const ck_config_t *cfg,
                             const uint64_t *hashes)
{
    uint64_t *all = malloc(sizeof(uint64_t) * CK_HASH_BATCH * r->size);
    uint64_t mine[CK_HASH_BATCH];
    int k, i, q, n;
    char d[200];

    if (all == NULL) {
        return -1;
    }
    for (k = 0; k < cfg->ncases; k += CK_HASH_BATCH) {
        n = (cfg->ncases - k < CK_HASH_BATCH) ? cfg->ncases - k : CK_HASH_BATCH;
        memset(mine, 0, sizeof(mine));
        memcpy(mine, hashes + k, n * sizeof(uint64_t));
        if (cxl_th_oob_allgather(r, mine, all, sizeof(mine)) != 0) {
            free(all);
            return -1;
        }
        for (i = 0; i < n; i++) {
            if (!ck_same_everywhere(cfg->cases[k + i].type) ||
                (cfg->cases[k + i].count == 0)) {
                continue;
            }
            for (q = 1; q < r->size; q++) {
                if (all[q * CK_HASH_BATCH + i] != all[i]) {
                    if (r->rank == 0) {
                        ck_report("FAIL case %d %s: rank %d's result differs "
                                  "from rank 0's", k + i,
                                  ck_desc(&cfg->cases[k + i], d, sizeof(d)),
                                  q);
                    }
                    if (r->rank == q) {
                        ck_fail_case(k + i);
                    }
                }
            }
        }
    }
    free(all);
    return 0;
}

static void ck_setenv(const char *name, const char *value)
{
    if (value != NULL) {
        setenv(name, value, 1);
    }
}

static int ck_rank_cases(cxl_th_rank_t *r)
{
    const ck_config_t *cfg = r->arg;
    cxl_coll_team_t *team;
    cxl_coll_status_t st;
    uint64_t *hashes;
    ck_op_t o;
    int k, rc = 0;

    ck_setenv("CXL_COLL_REGION_SIZE", cfg->region);
    ck_setenv("CXL_COLL_CHUNK_SIZE", cfg->chunk);
    ck_setenv("CXL_COLL_ONESHOT_MAX", cfg->oneshot);
    if (cfg->skip_wb) {
        setenv("CXL_COLL_TEST_SKIP_WB", "y", 1);
        ck_neg = 1;
    }
    hashes = calloc(cfg->ncases + 1, sizeof(uint64_t));
    st     = cxl_th_team(r, NULL, &team);
    if ((st != CXL_COLL_OK) || (hashes == NULL)) {
        ck_report("FAIL rank %d: team of %d on %s: %s (%s)", r->rank, r->size,
                  r->pool, cxl_coll_strerror(st), cxl_coll_last_error());
        return 1;
    }
    for (k = 0; k < cfg->ncases;) {
        if (cfg->cases[k].mix && (k + 1 < cfg->ncases)) {
            ck_run_mix(team, cfg, r->rank, k, hashes);
            k += 2;
            continue;
        }
        if (cfg->cases[k].group > 1) {
            ck_run_group(team, cfg, r->rank, k, cfg->cases[k].group, hashes);
            k += cfg->cases[k].group;
            continue;
        }
        o.c   = &cfg->cases[k];
        o.idx = k;
        if (ck_prepare(team, r->rank, r->size, &o) != 0) {
            ck_report("FAIL rank %d case %d: no memory for the buffers",
                      r->rank, k);
            ck_fail_case(k);
            k++;
            continue;
        }
        ck_before(o.c, r->rank, r->size);
        st = ck_call(team, &o);
        if (!ck_verify(r->rank, r->size, &o, st)) {
            ck_fail_case(k);
        }
        hashes[k] = o.hash;
        ck_buf_free(team, &o.s);
        ck_buf_free(team, &o.r);
        k++;
    }
    if (ck_compare_hashes(r, cfg, hashes) != 0) {
        ck_report("FAIL rank %d: hash exchange", r->rank);
        rc = 1;
    }
    cxl_coll_team_destroy(team);
    free(hashes);
    return rc;
}

/* ---- bad input and two pools ---- */

static void ck_extra(int ok, int rank, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void ck_extra(int ok, int rank, const char *fmt, ...)
{
    char msg[300];
    va_list ap;

    __atomic_fetch_add(&ck_sh->extra_checks, 1, __ATOMIC_RELAXED);
    if (ok) {
        return;
    }
    __atomic_fetch_add(&ck_sh->extra_fails, 1, __ATOMIC_RELAXED);
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    ck_report("FAIL rank %d: %s", rank, msg);
}

/* allreduce of 37 int32 sums; 1 if the result is right */
/* A checked blocking allreduce of count int32 */
static int ck_allreduce_n(cxl_coll_team_t *team, int rank, int np,
                          uint32_t call, size_t count)
{
    ck_case_t c = {.type = CXL_COLL_ALLREDUCE, .dtype = CXL_COLL_INT32,
                   .op = CXL_COLL_SUM, .count = count, .call = call};
    ck_op_t o   = {.c = &c, .idx = -1};
    int ok;

    if (ck_prepare(team, rank, np, &o) != 0) {
        return 0;
    }
    ok = ck_verify(rank, np, &o, ck_call(team, &o));
    ck_buf_free(team, &o.s);
    ck_buf_free(team, &o.r);
    return ok;
}

static int ck_good_allreduce(cxl_coll_team_t *team, int rank, int np,
                             uint32_t call)
{
    return ck_allreduce_n(team, rank, np, call, 37);
}

/* A checked allgather of 2 int32 per rank into rb, from sbuf = rb + at */
static int ck_allgather_from(cxl_coll_team_t *team, const cxl_th_rank_t *r,
                             int32_t *rb, int at)
{
    cxl_coll_status_t st;
    int i, ok;

    for (i = 0; i < 2; i++) {
        rb[at + i] = r->rank * 10 + i;
    }
    st = cxl_coll_allgather(team, rb + at, rb, 2, CXL_COLL_INT32);
    ok = (st == CXL_COLL_OK);
    for (i = 0; ok && (i < 2 * r->size); i++) {
        ok = (rb[i] == (i / 2) * 10 + (i % 2));
    }
    if (st != CXL_COLL_OK) {
        fprintf(stderr, "allgather from rb + %d: %s\n", at,
                cxl_coll_strerror(st));
    }
    return ok;
}

static int ck_is_err(cxl_coll_status_t st, cxl_coll_status_t a,
                     cxl_coll_status_t b)
{
    return ((st == a) || (st == b)) && (cxl_coll_last_error() != NULL) &&
           (cxl_coll_last_error()[0] != '\0');
}

static int ck_rank_bad(cxl_th_rank_t *r)
{
    const int reqs = 16; /* CXL_COLL_MAX_REQS set by the parent */
    int32_t sb[64], rb[64];
    cxl_coll_req_t *req[17];
    cxl_coll_args_t a;
    cxl_coll_team_t *team;
    cxl_coll_status_t st;
    uint32_t call = 900000;
    int i, ok;

    memset(sb, 0, sizeof(sb));
    setenv("CXL_COLL_MAX_REQS", "16", 1);
    st = cxl_th_team(r, NULL, &team);
    ck_extra(st == CXL_COLL_OK, r->rank, "team: %s", cxl_coll_strerror(st));
    if (st != CXL_COLL_OK) {
        return 1;
    }
#define CK_BAD(_expr, _e1, _e2, _what) \
    st = (_expr); \
    ck_extra(ck_is_err(st, _e1, _e2), r->rank, "%s: got %s (%s)", _what, \
             cxl_coll_strerror(st), cxl_coll_last_error()); \
    ck_extra(ck_good_allreduce(team, r->rank, r->size, call++), r->rank, \
             "good allreduce after %s", _what)

    CK_BAD(cxl_coll_allreduce(team, sb, rb, SIZE_MAX / 2, CXL_COLL_INT32,
                              CXL_COLL_SUM), CXL_COLL_ERR_INVAL,
           CXL_COLL_ERR_INVAL, "count * 4 > SIZE_MAX");
    CK_BAD(cxl_coll_alltoall(team, sb, rb, SIZE_MAX / 4 / r->size + 1,
                             CXL_COLL_INT32), CXL_COLL_ERR_INVAL,
           CXL_COLL_ERR_INVAL, r->size > 1 ? "alltoall size * count * 4 > "
           "SIZE_MAX" : "alltoall count * 4 near SIZE_MAX");
    CK_BAD(cxl_coll_allreduce(team, sb, rb, 8, CXL_COLL_FLOAT32,
                              CXL_COLL_BAND), CXL_COLL_ERR_UNSUPPORTED,
           CXL_COLL_ERR_UNSUPPORTED, "band on float32");
    CK_BAD(cxl_coll_reduce_scatter(team, sb, rb, 4, CXL_COLL_BFLOAT16,
                                   CXL_COLL_BXOR), CXL_COLL_ERR_UNSUPPORTED,
           CXL_COLL_ERR_UNSUPPORTED, "bxor on bfloat16");
    CK_BAD(cxl_coll_allreduce(team, sb, rb, 8, (cxl_coll_dtype_t)99,
                              CXL_COLL_SUM), CXL_COLL_ERR_INVAL,
           CXL_COLL_ERR_UNSUPPORTED, "dtype 99");
    CK_BAD(cxl_coll_allreduce(team, sb, rb, 8, CXL_COLL_INT32,
                              (cxl_coll_op_t)99), CXL_COLL_ERR_INVAL,
           CXL_COLL_ERR_UNSUPPORTED, "op 99");
    CK_BAD(cxl_coll_bcast(team, rb, 8, CXL_COLL_INT32, r->size),
           CXL_COLL_ERR_INVAL, CXL_COLL_ERR_INVAL, "bcast root = size");
    CK_BAD(cxl_coll_reduce(team, sb, rb, 8, CXL_COLL_INT32, CXL_COLL_SUM, -1),
           CXL_COLL_ERR_INVAL, CXL_COLL_ERR_INVAL, "reduce root -1");
    CK_BAD(cxl_coll_allreduce(team, sb, NULL, 5, CXL_COLL_INT32,
                              CXL_COLL_SUM), CXL_COLL_ERR_INVAL,
           CXL_COLL_ERR_INVAL, "allreduce rbuf NULL");
    memset(&a, 0, sizeof(a));
    a.type = (cxl_coll_type_t)99;
    CK_BAD(cxl_coll_run(team, &a), CXL_COLL_ERR_INVAL, CXL_COLL_ERR_INVAL,
           "collective type 99");
    /* input and result that overlap in part: refused (an aliased
     * allreduce came out different by path: the request path's one-shot
     * reduction read rank 2's input after folding into it) */
    CK_BAD(cxl_coll_alltoall(team, rb, rb + 3, 2, CXL_COLL_INT32),
           CXL_COLL_ERR_INVAL, CXL_COLL_ERR_INVAL, "alltoall rbuf inside "
           "sbuf");
    CK_BAD(cxl_coll_allgather(team, rb + 2 * r->size - 1, rb, 2,
                              CXL_COLL_INT32), CXL_COLL_ERR_INVAL,
           CXL_COLL_ERR_INVAL, "allgather sbuf's first element in rbuf's "
           "last");
    CK_BAD(cxl_coll_reduce_scatter(team, rb + 1, rb, 2, CXL_COLL_INT32,
                                   CXL_COLL_SUM), CXL_COLL_ERR_INVAL,
           CXL_COLL_ERR_INVAL, "reduce_scatter rbuf inside sbuf");
    /* exactly the in-place form, written with pointers: run as it */
    for (i = 0; i < 5; i++) {
        rb[i] = r->rank + 1 + i;
    }
    st = cxl_coll_allreduce(team, rb, rb, 5, CXL_COLL_INT32, CXL_COLL_SUM);
    ok = (st == CXL_COLL_OK);
    for (i = 0; ok && (i < 5); i++) {
        ok = (rb[i] == r->size * (r->size + 1) / 2 + r->size * i);
    }
    ck_extra(ok, r->rank, "allreduce with sbuf == rbuf, as in place: %s",
             cxl_coll_strerror(st));
    {   /* the request path: ranks 2 and up came out wrong */
        const size_t n = 4096;
        int32_t *big = malloc(n * sizeof(*big));
        size_t k;

        for (k = 0; (big != NULL) && (k < n); k++) {
            big[k] = r->rank + 1 + (int32_t)k;
        }
        st = (big == NULL) ? CXL_COLL_ERR_NO_MEMORY :
             cxl_coll_allreduce(team, big, big, n, CXL_COLL_INT32,
                                CXL_COLL_SUM);
        ok = (st == CXL_COLL_OK);
        for (k = 0; ok && (k < n); k++) {
            ok = (big[k] == r->size * (r->size + 1) / 2 +
                            r->size * (int32_t)k);
        }
        ck_extra(ok, r->rank, "allreduce of 16 KiB with sbuf == rbuf, as in "
                 "place: %s", cxl_coll_strerror(st));
        free(big);
    }
    ck_extra(ck_allgather_from(team, r, rb, 2 * r->rank), r->rank,
             "allgather from the own block of rbuf, as in place");
    /* adjacent is not overlapping: a real allgather */
    ck_extra(ck_allgather_from(team, r, rb, 2 * r->size), r->rank,
             "allgather with sbuf right behind rbuf");

    /* one request more than CXL_COLL_MAX_REQS */
    memset(&a, 0, sizeof(a));
    a.type  = CXL_COLL_BARRIER;
    ok      = 1;
    for (i = 0; i < reqs; i++) {
        st  = cxl_coll_post(team, &a, &req[i]);
        ok &= (st == CXL_COLL_OK);
        if (st != CXL_COLL_OK) {
            req[i] = NULL;
        }
    }
    ck_extra(ok, r->rank, "%d outstanding barriers posted", reqs);
    st = cxl_coll_post(team, &a, &req[reqs]);
    ck_extra(ck_is_err(st, CXL_COLL_ERR_BUSY, CXL_COLL_ERR_BUSY), r->rank,
             "post %d of %d: got %s", reqs + 1, reqs, cxl_coll_strerror(st));
    if (st == CXL_COLL_OK) {
        cxl_coll_wait(req[reqs]);   /* keep the ranks in step */
        cxl_coll_req_free(req[reqs]);
    }
    for (i = 0; i < reqs; i++) {
        if (req[i] != NULL) {
            st = cxl_coll_wait(req[i]);
            ck_extra(st == CXL_COLL_OK, r->rank, "wait barrier %d: %s", i,
                     cxl_coll_strerror(st));
            cxl_coll_req_free(req[i]);
        }
    }
    ck_extra(ck_good_allreduce(team, r->rank, r->size, call++), r->rank,
             "good allreduce after the busy post");

    /* every request completed and none freed: a blocking call still runs,
     * through the request path too (it failed with BUSY there, locally,
     * while the peers waited in the collective) */
    memset(&a, 0, sizeof(a));
    a.type = CXL_COLL_BARRIER;
    for (i = 0; i < reqs; i++) {
        st = cxl_coll_post(team, &a, &req[i]);
        if (st == CXL_COLL_OK) {
            st = cxl_coll_wait(req[i]);
        } else {
            req[i] = NULL;
        }
        ck_extra(st == CXL_COLL_OK, r->rank, "barrier %d, not freed: %s", i,
                 cxl_coll_strerror(st));
    }
    ck_extra(ck_allreduce_n(team, r->rank, r->size, call++, 16384), r->rank,
             "blocking allreduce of 64 KiB with %d requests not freed", reqs);
    ck_extra(ck_good_allreduce(team, r->rank, r->size, call++), r->rank,
             "blocking allreduce of 8 B with %d requests not freed", reqs);
    for (i = 0; i < reqs; i++) {
        cxl_coll_req_free(req[i]);
    }
#undef CK_BAD
    cxl_coll_team_destroy(team);
    return 0;
}

/* ranks [0, size/2) on pool A, the others on pool B */
static int ck_rank_pools(cxl_th_rank_t *r)
{
    cxl_coll_team_t *team = NULL;
    cxl_coll_status_t st;

    st = cxl_th_team(r, (r->rank < r->size / 2) ? ck_pool_a : ck_pool_b,
                     &team);
    ck_extra(ck_is_err(st, CXL_COLL_ERR_NOT_SAME_POOL,
                       CXL_COLL_ERR_NOT_SAME_POOL), r->rank,
             "team over two pools: got %s (%s)", cxl_coll_strerror(st),
             cxl_coll_last_error());
    if (st == CXL_COLL_OK) {
        cxl_coll_team_destroy(team);
    }
    st = cxl_th_team(r, ck_pool_a, &team);
    ck_extra(st == CXL_COLL_OK, r->rank, "team on one pool after that: %s (%s)",
             cxl_coll_strerror(st), cxl_coll_last_error());
    if (st != CXL_COLL_OK) {
        return 1;
    }
    ck_extra(ck_good_allreduce(team, r->rank, r->size, 910000), r->rank,
             "allreduce on that team");
    cxl_coll_team_destroy(team);
    return 0;
}

/* ---- the case lists ---- */

typedef struct {
    ck_case_t *c;
    int        n;
    uint32_t   call;
} ck_list_t;

static ck_case_t *ck_add(ck_list_t *l)
{
    ck_case_t *c;

    if (l->n >= CK_MAX_CASES) {
        fprintf(stderr, "coll-check: more than %d cases\n", CK_MAX_CASES);
        exit(2);
    }
    c = &l->c[l->n++];
    memset(c, 0, sizeof(*c));
    c->call = ++l->call;
    return c;
}

static int ck_roots(int np, int *roots)
{
    int i;

    if (np <= 4) {
        for (i = 0; i < np; i++) {
            roots[i] = i;
        }
        return np;
    }
    roots[0] = 0;
    roots[1] = np / 2;
    roots[2] = np - 1;
    return 3;
}

static int ck_has_inplace(int type)
{
    return (type != CXL_COLL_BARRIER) && (type != CXL_COLL_BCAST);
}

/*
 * main: the full matrix at counts 0, 1, 37; np >= 5 keeps one in 'sample'
 * of the non-zero-count cases (chosen by a hash, so all dtypes/ops appear).
 */
static void ck_list_main(ck_list_t *l, int np, int sample)
{
    static const size_t counts[] = {0, 1, 37};
    int roots[8], nroots, t, dt, op, ci, ri, ip, nops;
    unsigned long seq = 0;
    ck_case_t *c;

    nroots = ck_roots(np, roots);
    for (t = 0; t < CXL_COLL_TYPE_LAST; t++) {
        for (dt = 0; dt < CXL_COLL_DTYPE_LAST; dt++) {
            nops = ck_is_reduction(t) ? CXL_COLL_OP_LAST : 1;
            for (op = 0; op < nops; op++) {
                if (ck_is_reduction(t) && !cxl_coll_op_supported(dt, op)) {
                    continue;
                }
                for (ci = 0; ci < 3; ci++) {
                    for (ri = 0; ri < (ck_is_rooted(t) ? nroots : 1); ri++) {
                        for (ip = 0; ip < (ck_has_inplace(t) ? 2 : 1); ip++) {
                            seq++;
                            if ((t == CXL_COLL_BARRIER) && (dt > 0)) {
                                continue;
                            }
                            if ((sample > 1) && (counts[ci] > 0) &&
                                (ck_mix(seq * 7 + np) % sample != 0)) {
                                continue;
                            }
                            c          = ck_add(l);
                            c->type    = t;
                            c->dtype   = dt;
                            c->op      = op;
                            c->count   = counts[ci];
                            c->root    = ck_is_rooted(t) ? roots[ri] : 0;
                            c->inplace = ip;
                            c->poolbuf = (seq % 7) == 3;
                            c->nullbuf = (seq % 2) == 1;
                            c->jitter  = (seq % 53) == 0;
                        }
                    }
                }
            }
        }
    }
}

/* large: several chunks, 1 MiB and more of data, sampled dtypes/ops */
static void ck_list_large(ck_list_t *l, int np, int per_type)
{
    static int combo_seq;
    int t, j, dt, op, tries;
    size_t bytes;
    ck_case_t *c;

    for (t = CXL_COLL_BCAST; t < CXL_COLL_TYPE_LAST; t++) {
        for (j = 0; j < per_type; j++) {
            tries = 0;
            do { /* next supported (dtype, op), round robin over all runs */
                combo_seq++;
                dt = (combo_seq * 5) % CXL_COLL_DTYPE_LAST;
                op = ck_is_reduction(t) ? (combo_seq / 3) % CXL_COLL_OP_LAST : 0;
            } while (!cxl_coll_op_supported(dt, op) && (++tries < 100));
            /* per-rank blocks of the all-to-all types stay moderate */
            bytes = ((t == CXL_COLL_GATHER) || (t == CXL_COLL_SCATTER) ||
                     (t == CXL_COLL_ALLGATHER) ||
                     (t == CXL_COLL_ALLTOALL) ||
                     (t == CXL_COLL_REDUCE_SCATTER)) ?
                    (2u << 20) / np : (1u << 20) + 4096 * (j + 1);
            c          = ck_add(l);
            c->type    = t;
            c->dtype   = dt;
            c->op      = op;
            c->count   = bytes / cxl_coll_dtype_size(dt) + 2 * j + 1;
            c->root    = ck_is_rooted(t) ? ((j == 0) ? np - 1 : np / 2) : 0;
            c->inplace = ck_has_inplace(t) && (j % 2 == 1);
            c->poolbuf = (j == 1);
        }
    }
    /* in place with the last rank as root: the result overwrites the
     * input of a rank >= 2 while it reduces (rooted reduce in rounds) */
    for (t = CXL_COLL_REDUCE; t <= CXL_COLL_ALLREDUCE; t++) {
        c          = ck_add(l);
        c->type    = t;
        c->dtype   = CXL_COLL_FLOAT32;
        c->op      = CXL_COLL_SUM;
        c->count   = ((3u << 20) + 4096) / 4 + 3;
        c->root    = np - 1;
        c->inplace = 1;
        c->poolbuf = 0;
    }
}

/* back-to-back: many small calls, data changing every call */
static void ck_list_b2b(ck_list_t *l, int np, int n)
{
    static const int types[] = {CXL_COLL_ALLREDUCE, CXL_COLL_BCAST,
                                CXL_COLL_ALLREDUCE, CXL_COLL_ALLGATHER,
                                CXL_COLL_REDUCE, CXL_COLL_BARRIER,
                                CXL_COLL_ALLREDUCE, CXL_COLL_ALLTOALL};
    ck_case_t *c;
    int i;

    for (i = 0; i < n; i++) {
        c        = ck_add(l);
        c->type  = types[i % 8];
        c->dtype = (i % 3 == 0) ? CXL_COLL_FLOAT32 :
                   (i % 3 == 1) ? CXL_COLL_INT32 : CXL_COLL_UINT8;
        c->op    = (i % 5 == 0) ? CXL_COLL_MAX : CXL_COLL_SUM;
        c->count = 1 + (i * 7) % 64;
        c->root  = i % np;
        c->jitter = (i % 97) == 0;
    }
}

/* non-blocking: groups of 4 mixed collectives and one group of 16 */
static void ck_list_nb(ck_list_t *l, int np)
{
    static const int types[] = {CXL_COLL_ALLREDUCE, CXL_COLL_BCAST,
                                CXL_COLL_ALLGATHER, CXL_COLL_REDUCE_SCATTER,
                                CXL_COLL_GATHER, CXL_COLL_SCATTER,
                                CXL_COLL_ALLTOALL, CXL_COLL_REDUCE,
                                CXL_COLL_BARRIER};
    int g, i, size;
    ck_case_t *c;

    for (g = 0; g < 5; g++) {
        size = (g == 4) ? 16 : 4;
        for (i = 0; i < size; i++) {
            c          = ck_add(l);
            c->group   = (i == 0) ? size : 0;
            c->type    = types[(g * 4 + i) % 9];
            c->dtype   = (g + i) % CXL_COLL_DTYPE_LAST;
            c->op      = CXL_COLL_SUM;
            c->count   = (i == 1 && g == 2) ? (300000 / np) + 1 : 37 + i;
            c->root    = (g + i) % np;
            c->inplace = ck_has_inplace(c->type) && (i % 3 == 2);
        }
    }
}

/*
 * Pairs for ck_run_mix(): a posted collective, then every collective
 * small enough for the short path, its publication (the blocks of all
 * ranks for scatter, alltoall and reduce_scatter) about 40 B (in the
 * signal line), 250 B (flagged lines) or 3500 B (the small slot), with
 * every root and in place where it has a form.
 */
static void ck_list_mix(ck_list_t *l, int np)
{
    static const cxl_coll_dtype_t dts[] = {CXL_COLL_UINT8, CXL_COLL_INT16,
                                           CXL_COLL_FLOAT32, CXL_COLL_INT64,
                                           CXL_COLL_FLOAT64};
    static const size_t totals[] = {40, 250, 3500};
    int t, v, multi;
    size_t es, most;
    ck_case_t *c;

    for (t = 0; t < CXL_COLL_TYPE_LAST; t++) {
        multi = (t == CXL_COLL_SCATTER) || (t == CXL_COLL_ALLTOALL) ||
                (t == CXL_COLL_REDUCE_SCATTER);
        for (v = 0; v < 3 * np; v++) {
            c        = ck_add(l);
            c->mix   = 1;
            c->type  = (v % 2) ? CXL_COLL_ALLREDUCE : CXL_COLL_BCAST;
            c->dtype = CXL_COLL_INT32;
            c->op    = CXL_COLL_SUM;
            c->count = (v % 3 == 0) ? 1 : 37;
            c->root  = v % np;

            c        = ck_add(l);
            c->type  = t;
            c->dtype = dts[v % 5];
            es       = cxl_coll_dtype_size(c->dtype);
            most     = totals[v % 3] / (es * (multi ? (size_t)np : 1));
            if (most == 0) {
                c->dtype = CXL_COLL_UINT8;
                most     = totals[v % 3] / (multi ? (size_t)np : 1);
            }
            c->op      = (v % 4 == 3) ? CXL_COLL_MAX : CXL_COLL_SUM;
            c->count   = (v % 6 < 3) ? most : (most + 1) / 2;
            c->root    = (v / 2) % np;
            c->inplace = ck_has_inplace(t) && (v % 4 >= 2);
        }
    }
}

/* ---- configurations ---- */

static unsigned long ck_passed, ck_failed;

static void ck_run_config(ck_config_t *cfg, const char *pool, unsigned wd)
{
    int bad, k, failed_cases = 0;
    double t0 = ck_now();
    uint32_t extra_f;

    memset(ck_sh, 0, sizeof(*ck_sh));
    bad = cxl_th_run(cfg->np, pool, cfg->sw, cfg->fn, cfg, wd, NULL);
    for (k = 0; k < cfg->ncases; k++) {
        failed_cases += (ck_sh->fails[k] != 0);
    }
    extra_f = ck_sh->extra_fails;
    if (cfg->skip_wb) {
        /* negative control: the checks must have caught the missing
         * write-back */
        printf("coll-check: neg np=%d %s: %d of %d cases failed with "
               "CXL_COLL_TEST_SKIP_WB=y (must be > 0) %.1f s\n", cfg->np,
               cfg->name, failed_cases, cfg->ncases, ck_now() - t0);
        if ((failed_cases > 0) || (bad > 0)) {
            ck_passed++;
        } else {
            ck_failed++;
            printf("FAIL: the negative control passed: the sw checks cannot "
                   "see a missing write-back\n");
        }
        return;
    }
    ck_passed += cfg->ncases - failed_cases +
                 (ck_sh->extra_checks - extra_f);
    ck_failed += failed_cases + extra_f;
    if (bad > 0) {
        ck_failed++;
    } else {
        ck_passed++;
    }
    printf("coll-check: %s np=%d %s: %d cases%s, %d failed%s%s, %.1f s\n",
           ck_mode_name(cfg), cfg->np, cfg->name,
           cfg->ncases + (int)ck_sh->extra_checks,
           cfg->region ? " (64 KiB region, 4 KiB chunks)" : "",
           failed_cases + (int)extra_f, bad ? ", ranks failed: " : "",
           bad ? "yes" : "", ck_now() - t0);
    if (failed_cases + extra_f + bad) {
        printf("coll-check: reproduce: coll_check --mode %s --np %d --part %s\n",
               ck_mode_name(cfg), cfg->np, cfg->name);
    }
    fflush(stdout);
}

static int ck_in_list(const char *list, const char *item)
{
    size_t n = strlen(item);
    const char *p;

    if (list == NULL) {
        return 1;
    }
    for (p = list; (p = strstr(p, item)) != NULL; p += n) {
        if (((p == list) || (p[-1] == ',')) &&
            ((p[n] == '\0') || (p[n] == ','))) {
            return 1;
        }
    }
    return 0;
}

static void ck_usage(void)
{
    printf("usage: coll_check [--mode all|hw|sw|neg|shared] [--np LIST] "
           "[--part main,large,rounds,b2b,nb,mix,bad,pools] [--quick] "
           "[--watchdog S]\n");
}

int main(int argc, char **argv)
{
    static const int nps[] = {1, 2, 3, 4, 5, 8};
    const char *mode = "all", *np_list = NULL, *parts = NULL;
    unsigned wd = 300;
    int quick = 0, i, m, sw, np;
    char path[2][256], spec[2][300], nbuf[8];
    ck_list_t list;
    ck_config_t cfg;
    double t0 = ck_now();

    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mode") && (i + 1 < argc)) {
            mode = argv[++i];
        } else if (!strcmp(argv[i], "--np") && (i + 1 < argc)) {
            np_list = argv[++i];
        } else if (!strcmp(argv[i], "--part") && (i + 1 < argc)) {
            parts = argv[++i];
        } else if (!strcmp(argv[i], "--watchdog") && (i + 1 < argc)) {
            wd = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--quick")) {
            quick = 1;
        } else if (!strcmp(argv[i], "-v")) {
            ck_verbose = 1;
        } else {
            ck_usage();
            return (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) ? 0 : 2;
        }
    }
    ck_sh = mmap(NULL, sizeof(*ck_sh), PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    list.c = malloc(sizeof(ck_case_t) * CK_MAX_CASES);
    if ((ck_sh == MAP_FAILED) || (list.c == NULL)) {
        perror("coll-check");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);

    for (m = 0; m < 4; m++) {
        static const char *const modes[] = {"hw", "sw", "neg", "shared"};
        if (strcmp(mode, "all") && strcmp(mode, modes[m])) {
            continue;
        }
        sw = (m == 3) ? 2 : (m > 0); /* ranks per emulated host */
        if (cxl_th_pool_create(modes[m], sw, CK_POOL_SIZE, path[0],
                               sizeof(path[0]), spec[0], sizeof(spec[0])) ||
            cxl_th_pool_create("b", 0, 64ull << 20, path[1], sizeof(path[1]),
                               spec[1], sizeof(spec[1]))) {
            printf("coll-check: cannot create the pools\n");
            ck_failed++;
            continue;
        }
        ck_pool_a = spec[0];
        ck_pool_b = spec[1];
        memset(&cfg, 0, sizeof(cfg));
        cfg.sw      = sw;
        cfg.skip_wb = (m == 2);
        cfg.cases   = list.c;

        if (cfg.skip_wb) {
            /* the negative control: a short list that moves data between
             * ranks in every way */
            cfg.np   = 3;
            cfg.fn   = ck_rank_cases;
            cfg.name = "main";
            list.n   = 0;
            list.call = 0;
            ck_list_main(&list, 3, 16);
            ck_list_large(&list, 3, 1);
            cfg.ncases = list.n;
            ck_run_config(&cfg, spec[0], 120);
            cxl_th_pool_destroy(path[0], sw);
            cxl_th_pool_destroy(path[1], 0);
            continue;
        }
        for (i = 0; i < (int)(sizeof(nps) / sizeof(nps[0])); i++) {
            np = nps[i];
            snprintf(nbuf, sizeof(nbuf), "%d", np);
            if (!ck_in_list(np_list, nbuf) ||
                ((sw > 1) && (np != 4) && (np != 8))) {
                continue;
            }
            cfg.np = np;
            cfg.fn = ck_rank_cases;
            cfg.region = cfg.chunk = cfg.oneshot = NULL;
            /* main, large, b2b and nb in one team */
            list.n = 0;
            list.call = (uint32_t)np << 24;
            if (ck_in_list(parts, "main")) {
                ck_list_main(&list, np, quick ? 8 : (np >= 5) ? 3 : 1);
            }
            if (ck_in_list(parts, "large")) {
                ck_list_large(&list, np, quick ? 1 : 2);
            }
            if (ck_in_list(parts, "b2b")) {
                ck_list_b2b(&list, np, quick ? 200 : 2000);
            }
            if (ck_in_list(parts, "nb")) {
                ck_list_nb(&list, np);
            }
            if (ck_in_list(parts, "mix")) {
                ck_list_mix(&list, np);
            }
            cfg.name   = parts ? parts : "main,large,b2b,nb,mix";
            cfg.ncases = list.n;
            if (list.n > 0) {
                ck_run_config(&cfg, spec[0], wd);
            }
            /* rounds: the large ones through a 64 KiB region */
            if (ck_in_list(parts, "rounds") && ((np == 2) || (np == 3) ||
                                                (np == 5))) {
                list.n     = 0;
                cfg.region = "64k";
                cfg.chunk  = "4k";
                cfg.oneshot = "1k";
                ck_list_large(&list, np, 1);
                cfg.name   = "rounds";
                cfg.ncases = list.n;
                ck_run_config(&cfg, spec[0], wd);
                cfg.region = cfg.chunk = cfg.oneshot = NULL;
            }
            if (ck_in_list(parts, "bad") && (np == 3)) {
                cfg.fn = ck_rank_bad;
                cfg.name = "bad";
                cfg.ncases = 0;
                ck_run_config(&cfg, spec[0], wd);
            }
            if (ck_in_list(parts, "pools") && (np == 4) && !sw) {
                cfg.fn = ck_rank_pools;
                cfg.name = "pools";
                cfg.ncases = 0;
                ck_run_config(&cfg, spec[0], 60);
            }
        }
        cxl_th_pool_destroy(path[0], sw);
        cxl_th_pool_destroy(path[1], 0);
    }
    printf("coll-check: %lu passed, %lu failed (%.0f s)\n", ck_passed,
           ck_failed, ck_now() - t0);
    free(list.c);
    munmap(ck_sh, sizeof(*ck_sh));
    return ck_failed ? 1 : 0;
}
