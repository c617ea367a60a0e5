/*
 * Layout of one rank's partition of a team region, and the inline
 * accessors for its lines (doc/design/collectives.md).  Every line of a
 * partition is written by its owner only; the others read it.
 *
 *   0                 header line (written once at team creation)
 *   128               done line: the last step this rank fully consumed
 *   256               abort line: nonzero once this rank gave up
 *   384 + 128*k       signal line k (k < CXL_COLL_NSIG)
 *   2048 + 128*j      call record j (j < CXL_COLL_NREC): what the owner
 *                     called, read by a peer that waits too long for it
 *   4096 + 512*k      flagged lines of signal line k (k < CXL_COLL_NSIG):
 *                     publications of up to CXL_COLL_LL_MAX bytes, 56 B a
 *                     line, each line carrying its step
 *   8192 + 4096*k     small slot of signal line k: publications of up to
 *                     CXL_COLL_SMALL_MAX bytes
 *   40960 + k*slot    data of slot k (k < CXL_COLL_NSLOTS; slot bytes, a
 *                     multiple of 4 KiB)
 *
 * Step s (the team's monotonic 64-bit step counter, 1 upward) uses signal
 * line s % CXL_COLL_NSIG and, when its data does not fit the line, data
 * slot s % CXL_COLL_NSLOTS, so nobody needs to say which carries it.  More
 * signal lines than data slots: a small step reuses its line only after
 * NSIG steps, by when the peers' done lines are known without reading
 * them (coll_step.c).  A publication too large for the signal line but
 * of a few lines (<= CXL_COLL_LL_MAX bytes in its slot layout) goes into
 * the flagged lines of its signal line instead: every line says by itself
 * that it belongs to step s, so a reader needs one transfer of the lines
 * (loaded together), not the signal line's and then the data's.  Up to
 * CXL_COLL_SMALL_MAX bytes go into the small slot of the signal line.
 * Both are reused like the signal line, after NSIG steps: no writer waits
 * on the done line of a reader that read its previous publication
 * (data slots come round every NSLOTS steps, before the peers' progress
 * is known without reading it).
 */
#ifndef CXL_COLL_REGION_H
#define CXL_COLL_REGION_H

#include <ucx_cxl/coherence.h>

#include <stdint.h>

#define CXL_COLL_MAGIC         0x6c6c6f636c7863ull   /* "cxlcoll" */
#define CXL_COLL_NSLOTS        2
#define CXL_COLL_NSIG          8
/* Lines are 128 B apart: the adjacent-line prefetcher pairs 64 B lines. */
#define CXL_COLL_LINE_STRIDE   128
#define CXL_COLL_OFF_HDR       0
#define CXL_COLL_OFF_DONE      128
#define CXL_COLL_OFF_ABORT     256
#define CXL_COLL_OFF_SIG       384
#define CXL_COLL_OFF_REC       2048
#define CXL_COLL_NREC          16
#define CXL_COLL_OFF_LL        4096
/* Flagged lines: word 0 the step, words 1-7 payload (56 B) */
#define CXL_COLL_LL_PAYLOAD    56
#define CXL_COLL_LL_LINES      5
#define CXL_COLL_LL_MAX        (CXL_COLL_LL_LINES * CXL_COLL_LL_PAYLOAD)
#define CXL_COLL_LL_STRIDE     512    /* bytes of lines per signal line */
#define CXL_COLL_OFF_SMALL     (CXL_COLL_OFF_LL + \
                                CXL_COLL_NSIG * CXL_COLL_LL_STRIDE)
#define CXL_COLL_SMALL_MAX     4096   /* bytes of a small slot */
#define CXL_COLL_OFF_DATA      (CXL_COLL_OFF_SMALL + \
                                CXL_COLL_NSIG * CXL_COLL_SMALL_MAX)
/* the control lines and two data slots of the smallest chunk (4 KiB) */
#define CXL_COLL_MIN_REGION    (CXL_COLL_OFF_DATA + CXL_COLL_NSLOTS * 4096ull)
#define CXL_COLL_MAX_REGION    (1ull << 36)
/* Bytes of payload in a signal line (words 2..6). */
#define CXL_COLL_INLINE_MAX    40
/* ready = tag of the step in the top bits | bytes in the low bits */
#define CXL_COLL_READY_BITS    40
#define CXL_COLL_READY_MASK    ((1ull << CXL_COLL_READY_BITS) - 1)
/* a flagged line's word 0: the tagged step, bits 40-62 xor'ed with the
 * call's hash (cxl_coll_ll_flag) */
#define CXL_COLL_LL_CALL_MASK  (((1ull << 23) - 1) << CXL_COLL_READY_BITS)

typedef struct {
    uint64_t magic;
    uint64_t rank;
    uint64_t size;
    uint64_t region_size;
    uint64_t pad[4];
} cxl_coll_hdr_t;

/* A line holding one monotonic counter (done, abort). */
typedef struct {
    uint64_t value;
    uint64_t pad[7];
} cxl_coll_word_line_t;

/*
 * Signal of one slot.  The writer of step s stores the payload (inline
 * data, or the pool offset and block stride of a user buffer) and ready,
 * then seq, and writes the line back; later only ready grows, as chunks
 * land.  seq is word 0: a line reaches memory whole on hardware, and the
 * emulator writes word 0 of a line back last and reloads it first, so a
 * reader that sees the new seq sees the rest of that write-back too.
 */
typedef struct {
    uint64_t seq;                 /* step published here, monotonic */
    uint64_t ready;               /* cxl_coll_ready_make(s, bytes) */
    union {
        uint64_t inl[5];          /* payload of a small publication */
        struct {
            uint64_t buf_off;     /* pool offset of the data; 0: the slot */
            uint64_t stride;      /* bytes between blocks of the data */
        } ext;
    } u;
    uint64_t call;                /* hash of the call (cxl_coll_call_t) */
} cxl_coll_sig_t;

_Static_assert(sizeof(cxl_coll_sig_t) == CXL_CACHE_LINE, "signal is one line");

/*
 * Call record: what the owner called, one line per call in a ring of
 * CXL_COLL_NREC.  callno (monotonic from 1) is stored 0 first and last
 * with its number, so a reader that loads the same nonzero callno before
 * and after the other words read one record whole (hw: stores visible in
 * order; sw: the line reaches memory whole).
 */
typedef struct {
    uint64_t callno;
    uint64_t first;               /* first step */
    uint64_t nsteps;              /* 0: a call that makes no step */
    uint64_t what;                /* cxl_coll_call_what() */
    uint64_t bytes;               /* of a rank's block */
    uint64_t pad[3];
} cxl_coll_rec_t;

_Static_assert(sizeof(cxl_coll_rec_t) == CXL_CACHE_LINE, "record is one line");
_Static_assert(sizeof(cxl_coll_word_line_t) == CXL_CACHE_LINE, "one line");

/*
 * A flagged line.  The writer stores the payload words, then flag = step;
 * seq-like, flag is word 0 (a line reaches memory whole on hardware, the
 * emulator writes word 0 back last and reloads it first), so a reader that
 * loads the step from flag sees the payload stored before it.
 */
typedef struct {
    uint64_t flag;
    uint64_t w[7];
} cxl_coll_ll_line_t;

_Static_assert(sizeof(cxl_coll_ll_line_t) == CXL_CACHE_LINE, "one line");
_Static_assert(CXL_COLL_LL_PAYLOAD == sizeof(((cxl_coll_ll_line_t*)0)->w),
               "payload of a flagged line");
_Static_assert(CXL_COLL_LL_LINES * CXL_CACHE_LINE <= CXL_COLL_LL_STRIDE,
               "flagged lines fit");
_Static_assert(CXL_COLL_LL_MAX < CXL_COLL_SMALL_MAX, "flagged lines first");
_Static_assert(CXL_COLL_OFF_DATA % 4096 == 0, "slots page aligned");
_Static_assert(CXL_COLL_OFF_SIG + CXL_COLL_NSIG * CXL_COLL_LINE_STRIDE <=
               CXL_COLL_OFF_REC, "signal lines fit");
_Static_assert(CXL_COLL_OFF_REC + CXL_COLL_NREC * CXL_COLL_LINE_STRIDE <=
               CXL_COLL_OFF_LL, "call records fit");
_Static_assert(CXL_COLL_NSIG % CXL_COLL_NSLOTS == 0, "a line keeps its slot");

/*
 * The ready word names its step, so a reader never takes a byte count of
 * the slot's previous step (s - NSLOTS, another tag) for step s, whatever
 * order the words of a line reach it in.
 */
static inline uint64_t cxl_coll_ready_make(uint64_t step, uint64_t bytes)
{
    return (step << CXL_COLL_READY_BITS) | bytes;
}

/* Bytes ready for step, or -1 while the word belongs to another step. */
static inline int64_t cxl_coll_ready_bytes(uint64_t ready, uint64_t step)
{
    if ((ready >> CXL_COLL_READY_BITS) !=
        (step & ((1ull << (64 - CXL_COLL_READY_BITS)) - 1))) {
        return -1;
    }
    return (int64_t)(ready & CXL_COLL_READY_MASK);
}

/* Word 0 of a flagged line of a step whose tag is tstep, of a call. */
static inline uint64_t cxl_coll_ll_flag(uint64_t tstep, uint64_t call)
{
    return tstep ^ ((call << CXL_COLL_READY_BITS) & CXL_COLL_LL_CALL_MASK);
}

/* Whether flag belongs to the step tagged tstep (of whatever call). */
static inline int cxl_coll_ll_same_step(uint64_t flag, uint64_t tstep)
{
    return ((flag ^ tstep) & ~CXL_COLL_LL_CALL_MASK) == 0;
}

static inline cxl_coll_rec_t *cxl_coll_rec(uint8_t *part, uint64_t callno)
{
    return (cxl_coll_rec_t*)(part + CXL_COLL_OFF_REC +
                             (callno % CXL_COLL_NREC) * CXL_COLL_LINE_STRIDE);
}

static inline cxl_coll_hdr_t *cxl_coll_hdr(uint8_t *part)
{
    return (cxl_coll_hdr_t*)(part + CXL_COLL_OFF_HDR);
}

static inline cxl_coll_word_line_t *cxl_coll_done_line(uint8_t *part)
{
    return (cxl_coll_word_line_t*)(part + CXL_COLL_OFF_DONE);
}

static inline cxl_coll_word_line_t *cxl_coll_abort_line(uint8_t *part)
{
    return (cxl_coll_word_line_t*)(part + CXL_COLL_OFF_ABORT);
}

static inline unsigned cxl_coll_slot_of(uint64_t step)
{
    return (unsigned)(step % CXL_COLL_NSLOTS);
}

static inline unsigned cxl_coll_sig_of(uint64_t step)
{
    return (unsigned)(step % CXL_COLL_NSIG);
}

static inline cxl_coll_sig_t *cxl_coll_sig(uint8_t *part, uint64_t step)
{
    return (cxl_coll_sig_t*)(part + CXL_COLL_OFF_SIG +
                             cxl_coll_sig_of(step) * CXL_COLL_LINE_STRIDE);
}

/* Flagged line i of the signal line of step. */
static inline cxl_coll_ll_line_t *cxl_coll_ll_line(uint8_t *part,
                                                   uint64_t step, unsigned i)
{
    return (cxl_coll_ll_line_t*)(part + CXL_COLL_OFF_LL +
                                 cxl_coll_sig_of(step) * CXL_COLL_LL_STRIDE +
                                 (size_t)i * CXL_CACHE_LINE);
}

/* The small slot of the signal line of step. */
static inline uint8_t *cxl_coll_small_slot(uint8_t *part, uint64_t step)
{
    return part + CXL_COLL_OFF_SMALL +
           (size_t)cxl_coll_sig_of(step) * CXL_COLL_SMALL_MAX;
}

/* Bytes of a publication's layout: nblocks blocks of blk, slot_stride apart. */
static inline uint64_t cxl_coll_layout_bytes(uint64_t nblocks, uint64_t blk,
                                             uint64_t slot_stride)
{
    return (nblocks - 1) * slot_stride + blk;
}

/*
 * Where a publication of nblocks blocks of blk bytes, slot_stride apart in
 * its layout, goes.  Writer and readers decide alike from the arguments;
 * slot_stride 0 (a reduced slice of two-shot step B) means a data slot.
 * In order of size: callers compare kinds.
 */
typedef enum {
    CXL_COLL_PUB_INLINE,  /* the signal line's payload words */
    CXL_COLL_PUB_LL,      /* flagged lines */
    CXL_COLL_PUB_SMALL,   /* the small slot */
    CXL_COLL_PUB_SLOT     /* a data slot (or a user buffer in the pool) */
} cxl_coll_pub_kind_t;

static inline cxl_coll_pub_kind_t
cxl_coll_pub_kind(uint64_t nblocks, uint64_t blk, uint64_t slot_stride)
{
    uint64_t layout;

    if (nblocks * blk <= CXL_COLL_INLINE_MAX) {
        return CXL_COLL_PUB_INLINE;
    }
    if (slot_stride == 0) {
        return CXL_COLL_PUB_SLOT;
    }
    layout = cxl_coll_layout_bytes(nblocks, blk, slot_stride);
    return (layout <= CXL_COLL_LL_MAX) ? CXL_COLL_PUB_LL :
           (layout <= CXL_COLL_SMALL_MAX) ? CXL_COLL_PUB_SMALL :
           CXL_COLL_PUB_SLOT;
}

/* Slot bytes of a partition of region bytes. */
static inline uint64_t cxl_coll_slot_bytes(uint64_t region)
{
    return ((region - CXL_COLL_OFF_DATA) / CXL_COLL_NSLOTS) & ~4095ull;
}

static inline uint8_t *cxl_coll_slot_data(uint8_t *part, uint64_t region,
                                          uint64_t step)
{
    return part + CXL_COLL_OFF_DATA +
           cxl_coll_slot_of(step) * cxl_coll_slot_bytes(region);
}

static inline uint64_t cxl_coll_load(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline void cxl_coll_store(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

#endif
