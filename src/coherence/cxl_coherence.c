/*
 * Cache write-back / invalidate / fence, chosen once from CPUID.
 *
 * Write-back prefers CLWB (keeps the line cached), then CLFLUSHOPT, then
 * CLFLUSH.  Invalidation must evict, so it never uses CLWB.  CLFLUSHOPT and
 * CLWB are weakly ordered: an SFENCE after them orders the flushes before
 * the next store, which is what a publish needs.
 */
#include <ucx_cxl/coherence.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <pthread.h>
#include <cpuid.h>
#include <emmintrin.h>

/*
 * Registered emulate-nc views (see doc/design/sw-coherence.md).  Readers on
 * the write-back / invalidate path take no lock: each slot is a seqlock, so
 * a lookup never sees a half-written {view, mem, len}.  Registration and
 * removal are rare and serialised by cxl_coh_emu_mutex.
 */
#define CXL_COH_EMU_SLOTS 16

/* One registered view, as the write-back and invalidate paths use it. */
typedef struct {
    uintptr_t view;  /* 0: free */
    uintptr_t mem;
    uintptr_t clean; /* the view's lines as last synchronised with mem */
    uintptr_t locks; /* the view's stripe locks */
    size_t    len;
} cxl_coh_emu_reg_t;

typedef struct {
    unsigned          seq; /* odd while the slot is being changed */
    cxl_coh_emu_reg_t reg;
} cxl_coh_emu_slot_t;

static cxl_coh_emu_slot_t cxl_coh_emu_tab[CXL_COH_EMU_SLOTS];
static unsigned           cxl_coh_emu_count; /* slots in use */
static pthread_mutex_t    cxl_coh_emu_mutex = PTHREAD_MUTEX_INITIALIZER;

/*
 * A line's emulated write-back and reload change three copies (view, mem,
 * clean) word by word.  Two threads of this process doing that to one line
 * at once could leave memory with one's older word and clean with the
 * other's newer one (the view then looks clean: a write-back lost), or see
 * the other's reload half done and write back words it never stored.  So
 * one thread at a time synchronises a line: a lock per stripe of 64 KiB
 * blocks, taken once per block a call touches (16 per MiB: large copies
 * barely pay it).  Stores into the view need no lock (the CAS in the
 * reload keeps them).  The processes of one emulated host share its view,
 * so the locks are shared too: a table of robust process-shared mutexes
 * that every registration names (cxl_coh_emu_locks_init(); the pool keeps
 * it in the view's file).
 */
#define CXL_COH_EMU_STRIPE_SHIFT 16

/*
 * A stripe's lock and its intent record.  A word's sync changes two
 * copies: the view then clean (reload), or memory then clean (write-back).
 * A process killed between the two leaves clean old: after a reload the
 * word looks stored-into, and the next sync writes memory's value of that
 * moment back over newer data; after a write-back a later store of the old
 * value looks clean and is never written back.  So the holder first
 * records the line (and a reload the words it is about to store), and
 * whoever takes the lock from a dead holder finishes that line
 * (cxl_coh_emu_recover()).  Only the holder writes the record.  A record
 * per line, and without a write-back's words: one per word made a 1 MiB
 * write-back 1.5x as slow (86 -> 125 us), one per line with the words too
 * (129 us); this one costs nothing there (83 us).
 */
#define CXL_COH_EMU_LINE_WORDS (CXL_CACHE_LINE / sizeof(uint64_t))
#define CXL_COH_EMU_REC_SET    2ull /* op: a record; low bits of the line's */
#define CXL_COH_EMU_REC_RELOAD 1ull /* offset, which are free */

typedef struct {
    pthread_mutex_t mutex;
    uint64_t        op;  /* 0, or view offset | REC_SET [| REC_RELOAD] */
    uint64_t        val[CXL_COH_EMU_LINE_WORDS]; /* a reload's new words,
                                                    valid while op is set */
} cxl_coh_emu_stripe_t;

static inline cxl_coh_emu_stripe_t *
cxl_coh_emu_stripe_of(const cxl_coh_emu_reg_t *reg, uintptr_t p)
{
    return (cxl_coh_emu_stripe_t*)reg->locks +
           ((p - reg->view) >> CXL_COH_EMU_STRIPE_SHIFT);
}

/*
 * Record before the line's first store (a reload stores val first: op is
 * cleared, by cxl_coh_emu_rec_done(), before val changes again, so a
 * record that is set is whole).  A killed process's stores all land, in
 * program order (x86-TSO); the signal fences keep the compiler from moving
 * the sync's stores out from between the two.
 */
static inline void cxl_coh_emu_rec(cxl_coh_emu_stripe_t *s, uint64_t op)
{
    __atomic_store_n(&s->op, op | CXL_COH_EMU_REC_SET, __ATOMIC_RELEASE);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static inline void cxl_coh_emu_rec_done(cxl_coh_emu_stripe_t *s)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    __atomic_store_n(&s->op, 0, __ATOMIC_RELEASE);
}

/*
 * Finish the recorded line, word by word.  After a reload, a word whose
 * view holds its recorded value was reloaded: clean gets the value.
 * Otherwise the CAS failed or never ran, or a store of this host followed
 * it: the word keeps its state.  After a write-back, clean gets memory's
 * word: a word written back is memory's, a word not yet written back is
 * still the same in memory and clean (and, if dirty, written back by the
 * next sync).  That needs no values in the record, since only this host
 * writes back the lines it stores into (one writer per line), and it
 * holds the lock; a write-back records the line only, two stores instead
 * of nine.  (A store of this host of exactly the recorded value, racing a
 * reload, is taken as made before it, as any store of the value a word
 * already holds.  The finisher copies words the program reads and writes,
 * as the syncs do, and test/tsan/tsan.supp names it.)
 */
static void cxl_coh_emu_finish_line(const cxl_coh_emu_stripe_t *s,
                                    const cxl_coh_emu_reg_t *reg, uint64_t op)
{
    uint64_t off      = op & ~(uint64_t)(CXL_CACHE_LINE - 1);
    const uint64_t *v = (const uint64_t*)(reg->view + off);
    const uint64_t *m = (const uint64_t*)(reg->mem + off);
    uint64_t *c       = (uint64_t*)(reg->clean + off);
    uint64_t val;
    size_t i;

    if (!(op & CXL_COH_EMU_REC_RELOAD)) {
        for (i = 0; i < CXL_COH_EMU_LINE_WORDS; ++i) {
            __atomic_store_n(&c[i], __atomic_load_n(&m[i], __ATOMIC_RELAXED),
                             __ATOMIC_RELAXED);
        }
        return;
    }
    for (i = 0; i < CXL_COH_EMU_LINE_WORDS; ++i) {
        val = __atomic_load_n(&s->val[i], __ATOMIC_RELAXED);
        if (__atomic_load_n(&v[i], __ATOMIC_RELAXED) == val) {
            __atomic_store_n(&c[i], val, __ATOMIC_RELAXED);
        }
    }
}

/*
 * The holder died (EOWNERDEAD): finish its line, clear the record, only
 * then mark the lock consistent.  A taker killed here leaves the lock
 * owner-dead and the record set; finishing a line twice is harmless.
 */
static void cxl_coh_emu_recover(cxl_coh_emu_stripe_t *s,
                                const cxl_coh_emu_reg_t *reg)
{
    uint64_t op = __atomic_load_n(&s->op, __ATOMIC_ACQUIRE);

    if ((op & CXL_COH_EMU_REC_SET) &&
        ((op & ~(uint64_t)(CXL_CACHE_LINE - 1)) < reg->len)) {
        cxl_coh_emu_finish_line(s, reg, op);
    }
    __atomic_store_n(&s->op, 0, __ATOMIC_RELEASE);
    pthread_mutex_consistent(&s->mutex);
}

static void cxl_coh_emu_stripe_lock(cxl_coh_emu_stripe_t *s,
                                    const cxl_coh_emu_reg_t *reg)
{
    /*
     * A process of this host died holding it, in the middle of a sync.
     * The view (the host's cache) outlives it, and a word it had not yet
     * copied still differs from its clean copy, so the next sync of the
     * line writes it back; the line it was syncing is in the record.
     */
    if (pthread_mutex_lock(&s->mutex) == EOWNERDEAD) {
        cxl_coh_emu_recover(s, reg);
    }
}

static void cxl_coh_emu_stripe_unlock(cxl_coh_emu_stripe_t *s)
{
    pthread_mutex_unlock(&s->mutex);
}

size_t cxl_coh_emu_locks_size(size_t len)
{
    size_t stripe = (size_t)1 << CXL_COH_EMU_STRIPE_SHIFT;

    return ((len + stripe - 1) / stripe) * sizeof(cxl_coh_emu_stripe_t);
}

int cxl_coh_emu_locks_init(void *locks, size_t len)
{
    size_t i, n = cxl_coh_emu_locks_size(len) / sizeof(cxl_coh_emu_stripe_t);
    cxl_coh_emu_stripe_t *s = locks;
    pthread_mutexattr_t attr;
    int rc;

    if ((locks == NULL) ||
        ((uintptr_t)locks % _Alignof(cxl_coh_emu_stripe_t))) {
        return -1;
    }
    if (pthread_mutexattr_init(&attr) != 0) {
        return -1;
    }
    rc = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    if (rc == 0) {
        rc = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    }
    for (i = 0; (rc == 0) && (i < n); ++i) {
        rc = pthread_mutex_init(&s[i].mutex, &attr);
        s[i].op = 0;
    }
    pthread_mutexattr_destroy(&attr);
    return (rc == 0) ? 0 : -1;
}

/* Operation counts (cxl_coh_count_*): off unless a test turns them on. */
static int              cxl_coh_counting;
static cxl_coh_counts_t cxl_coh_counts;

static inline size_t cxl_coh_nlines(const void *addr, size_t len)
{
    uintptr_t first = (uintptr_t)addr & ~(uintptr_t)(CXL_CACHE_LINE - 1);

    return ((uintptr_t)addr + len - first + CXL_CACHE_LINE - 1) /
           CXL_CACHE_LINE;
}

void cxl_coh_count_start(void)
{
    memset(&cxl_coh_counts, 0, sizeof(cxl_coh_counts));
    __atomic_store_n(&cxl_coh_counting, 1, __ATOMIC_SEQ_CST);
}

void cxl_coh_count_get(cxl_coh_counts_t *counts)
{
    *counts = cxl_coh_counts;
}

void cxl_coh_count_stop(void)
{
    __atomic_store_n(&cxl_coh_counting, 0, __ATOMIC_SEQ_CST);
}

static cxl_coh_insn_t cxl_coh_wb_insn  = CXL_COH_INSN_NONE;
static cxl_coh_insn_t cxl_coh_inv_insn = CXL_COH_INSN_NONE;
static int            cxl_coh_dir64b   = 0; /* MOVDIR64B */
static pthread_once_t cxl_coh_once     = PTHREAD_ONCE_INIT;

static void cxl_coh_detect(void)
{
    unsigned eax, ebx, ecx, edx;
    int has_clflush = 0, has_clflushopt = 0, has_clwb = 0;

    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
        has_clflush = !!(edx & (1u << 19));
    }
    if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
        has_clflushopt = !!(ebx & (1u << 23));
        has_clwb       = !!(ebx & (1u << 24));
        cxl_coh_dir64b = !!(ecx & (1u << 28));
    }

    if (has_clflushopt) {
        cxl_coh_inv_insn = CXL_COH_INSN_CLFLUSHOPT;
    } else if (has_clflush) {
        cxl_coh_inv_insn = CXL_COH_INSN_CLFLUSH;
    }

    cxl_coh_wb_insn = has_clwb ? CXL_COH_INSN_CLWB : cxl_coh_inv_insn;
}

cxl_coh_insn_t cxl_coh_writeback_insn(void)
{
    pthread_once(&cxl_coh_once, cxl_coh_detect);
    return cxl_coh_wb_insn;
}

cxl_coh_insn_t cxl_coh_invalidate_insn(void)
{
    pthread_once(&cxl_coh_once, cxl_coh_detect);
    return cxl_coh_inv_insn;
}

int cxl_coh_line_atomic(void)
{
    pthread_once(&cxl_coh_once, cxl_coh_detect);
    return cxl_coh_dir64b;
}

int cxl_coh_mode_parse(const char *str, cxl_coh_mode_t *mode)
{
    if (!strcmp(str, "hw")) {
        *mode = CXL_COH_HW;
    } else if (!strcmp(str, "sw")) {
        *mode = CXL_COH_SW;
    } else {
        return -1;
    }
    return 0;
}

const char *cxl_coh_mode_name(cxl_coh_mode_t mode)
{
    return (mode == CXL_COH_SW) ? "sw" : "hw";
}

const char *cxl_coh_insn_name(cxl_coh_insn_t insn)
{
    switch (insn) {
    case CXL_COH_INSN_CLFLUSH:
        return "clflush";
    case CXL_COH_INSN_CLFLUSHOPT:
        return "clflushopt";
    case CXL_COH_INSN_CLWB:
        return "clwb";
    default:
        return "none";
    }
}

/* Encoded by hand so that no -m flag is needed and old assemblers work. */
static inline void cxl_coh_clflush(const volatile void *p)
{
    asm volatile("clflush %0" : "+m"(*(volatile char*)p));
}

static inline void cxl_coh_clflushopt(const volatile void *p)
{
    asm volatile(".byte 0x66; clflush %0" : "+m"(*(volatile char*)p));
}

static inline void cxl_coh_clwb(const volatile void *p)
{
    asm volatile(".byte 0x66, 0x0f, 0xae, 0x30" :: "a"(p) : "memory");
}

static void cxl_coh_lines(cxl_coh_insn_t insn, const void *addr, size_t len)
{
    uintptr_t p   = (uintptr_t)addr & ~(uintptr_t)(CXL_CACHE_LINE - 1);
    uintptr_t end = (uintptr_t)addr + len;

    for (; p < end; p += CXL_CACHE_LINE) {
        switch (insn) {
        case CXL_COH_INSN_CLWB:
            cxl_coh_clwb((const void*)p);
            break;
        case CXL_COH_INSN_CLFLUSHOPT:
            cxl_coh_clflushopt((const void*)p);
            break;
        case CXL_COH_INSN_CLFLUSH:
            cxl_coh_clflush((const void*)p);
            break;
        default:
            return;
        }
    }
}

static inline int cxl_coh_emu_active(void)
{
    return __atomic_load_n(&cxl_coh_emu_count, __ATOMIC_ACQUIRE) != 0;
}

static void cxl_coh_emu_read_slot(const cxl_coh_emu_slot_t *slot,
                                  cxl_coh_emu_reg_t *reg)
{
    unsigned seq;

    for (;;) {
        seq = __atomic_load_n(&slot->seq, __ATOMIC_ACQUIRE);
        if (seq & 1) {
            continue;
        }
        reg->view  = __atomic_load_n(&slot->reg.view, __ATOMIC_RELAXED);
        reg->mem   = __atomic_load_n(&slot->reg.mem, __ATOMIC_RELAXED);
        reg->clean = __atomic_load_n(&slot->reg.clean, __ATOMIC_RELAXED);
        reg->locks = __atomic_load_n(&slot->reg.locks, __ATOMIC_RELAXED);
        reg->len   = __atomic_load_n(&slot->reg.len, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&slot->seq, __ATOMIC_RELAXED) == seq) {
            return;
        }
    }
}

static void cxl_coh_emu_write_slot(cxl_coh_emu_slot_t *slot,
                                   const cxl_coh_emu_reg_t *reg)
{
    unsigned seq = __atomic_load_n(&slot->seq, __ATOMIC_RELAXED);

    __atomic_store_n(&slot->seq, seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&slot->reg.view, reg->view, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->reg.mem, reg->mem, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->reg.clean, reg->clean, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->reg.locks, reg->locks, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->reg.len, reg->len, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->seq, seq + 2, __ATOMIC_RELEASE);
}

/*
 * The registration covering p: returns 1 and fills *reg.  Else 0, and
 * *next is the start of the nearest registered view above p (or
 * UINTPTR_MAX), so the caller can flush the gap for real in one go.
 */
static int cxl_coh_emu_find(uintptr_t p, cxl_coh_emu_reg_t *reg,
                            uintptr_t *next)
{
    cxl_coh_emu_reg_t r;
    int i;

    *next = UINTPTR_MAX;
    for (i = 0; i < CXL_COH_EMU_SLOTS; ++i) {
        cxl_coh_emu_read_slot(&cxl_coh_emu_tab[i], &r);
        if (r.view == 0) {
            continue;
        }
        if ((p >= r.view) && (p - r.view < r.len)) {
            *reg = r;
            return 1;
        }
        if ((r.view > p) && (r.view < *next)) {
            *next = r.view;
        }
    }
    return 0;
}

/* Did this host store into the line since it last synchronised it? */
static int cxl_coh_emu_dirty(const uint64_t *v, const uint64_t *c)
{
    size_t i;

    for (i = 0; i < CXL_CACHE_LINE / sizeof(uint64_t); ++i) {
        if (__atomic_load_n(&v[i], __ATOMIC_RELAXED) !=
            __atomic_load_n(&c[i], __ATOMIC_RELAXED)) {
            return 1;
        }
    }
    return 0;
}

/* The whole line view -> memory; clean records what was written. */
static void cxl_coh_emu_wb_line(const uint64_t *v, uint64_t *m, uint64_t *c,
                                cxl_coh_emu_stripe_t *s, uint64_t off)
{
    uint64_t w;
    size_t i;

    /* the line alone: its new words are memory's (cxl_coh_emu_finish_line) */
    cxl_coh_emu_rec(s, off);
    /*
     * Last word first, word 0 last (release), while a reload reads word 0
     * first (acquire): a reader that gets this write-back's word 0 gets
     * the whole line, as a line reaches memory whole on hardware.  Records
     * keep their sequence number in word 0.
     */
    for (i = CXL_COH_EMU_LINE_WORDS; i-- > 0;) {
        /* one load for both copies: a store that lands after it leaves
         * the word dirty (view != clean) instead of looking clean */
        w = __atomic_load_n(&v[i], __ATOMIC_RELAXED);
        __atomic_store_n(&m[i], w, (i == 0) ? __ATOMIC_RELEASE :
                                              __ATOMIC_RELAXED);
        __atomic_store_n(&c[i], w, __ATOMIC_RELAXED);
    }
    cxl_coh_emu_rec_done(s);
}

/*
 * Reload the line memory -> view.  Each word is replaced only if it still
 * holds its clean value (CAS): a store that another thread or process of
 * this host makes at the same moment is kept, as a real cache would keep
 * it, and stays dirty until it is written back.  A line memory holds
 * unchanged is left alone, and so is each such word: the CAS would store
 * what is there (a 1 MiB invalidate of unchanged lines: 886 -> 192 us).
 */
static void cxl_coh_emu_reload_line(uint64_t *v, const uint64_t *m,
                                    uint64_t *c, cxl_coh_emu_stripe_t *s,
                                    uint64_t off)
{
    uint64_t old[CXL_COH_EMU_LINE_WORDS], w[CXL_COH_EMU_LINE_WORDS], o;
    int changed = 0;
    size_t i;

    for (i = 0; i < CXL_COH_EMU_LINE_WORDS; ++i) {
        old[i]   = __atomic_load_n(&c[i], __ATOMIC_RELAXED);
        w[i]     = __atomic_load_n(&m[i], (i == 0) ? __ATOMIC_ACQUIRE :
                                                     __ATOMIC_RELAXED);
        changed |= (w[i] != old[i]);
    }
    if (!changed) {
        return;
    }
    for (i = 0; i < CXL_COH_EMU_LINE_WORDS; ++i) {
        __atomic_store_n(&s->val[i], w[i], __ATOMIC_RELAXED);
    }
    cxl_coh_emu_rec(s, off | CXL_COH_EMU_REC_RELOAD);
    for (i = 0; i < CXL_COH_EMU_LINE_WORDS; ++i) {
        o = old[i];
        if ((w[i] != o) &&
            __atomic_compare_exchange_n(&v[i], &o, w[i], 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
            __atomic_store_n(&c[i], w[i], __ATOMIC_RELAXED);
        }
    }
    cxl_coh_emu_rec_done(s);
}

/*
 * Emulated lines [p, stop) of one view.  Write-back copies view -> memory.
 * Invalidate has the semantics of the instructions it stands for
 * (CLFLUSHOPT/CLFLUSH: clean and invalidate): a line the host stored into
 * since it last synchronised it is written back whole first, then the
 * line is reloaded from memory.  So a host never loses its own stores,
 * even when another thread or process of the same host invalidates the
 * line, but sees other hosts' data only by invalidating.
 */
static void cxl_coh_emu_sync(int writeback, uintptr_t p, uintptr_t stop,
                             const cxl_coh_emu_reg_t *reg)
{
    cxl_coh_emu_stripe_t *held = NULL, *stripe;
    uint64_t *v, *m, *c;
    uintptr_t off;

    for (; p < stop; p += CXL_CACHE_LINE) {
        stripe = cxl_coh_emu_stripe_of(reg, p);
        if (stripe != held) {
            if (held != NULL) {
                cxl_coh_emu_stripe_unlock(held);
            }
            cxl_coh_emu_stripe_lock(stripe, reg);
            held = stripe;
        }
        off = p - reg->view;
        v   = (uint64_t*)p;
        m   = (uint64_t*)(reg->mem + off);
        c   = (uint64_t*)(reg->clean + off);
        if (writeback || cxl_coh_emu_dirty(v, c)) {
            cxl_coh_emu_wb_line(v, m, c, held, off);
        }
        if (!writeback) {
            cxl_coh_emu_reload_line(v, m, c, held, off);
        }
    }
    if (held != NULL) {
        cxl_coh_emu_stripe_unlock(held);
    }
}

/*
 * Lines covering [addr, addr+len): those inside a registered view are
 * emulated; the rest take the real instruction.
 */
static void cxl_coh_emu_lines(int writeback, cxl_coh_insn_t insn,
                              const void *addr, size_t len)
{
    uintptr_t p   = (uintptr_t)addr & ~(uintptr_t)(CXL_CACHE_LINE - 1);
    uintptr_t end = (uintptr_t)addr + len;
    uintptr_t next, stop;
    cxl_coh_emu_reg_t reg;

    while (p < end) {
        if (cxl_coh_emu_find(p, &reg, &next)) {
            stop = (end - reg.view < reg.len) ? end : reg.view + reg.len;
            stop = (stop + CXL_CACHE_LINE - 1) &
                   ~(uintptr_t)(CXL_CACHE_LINE - 1);
            cxl_coh_emu_sync(writeback, p, stop, &reg);
        } else {
            stop = (next < end) ? next : end;
            cxl_coh_lines(insn, (const void*)p, stop - p);
            stop = (stop + CXL_CACHE_LINE - 1) &
                   ~(uintptr_t)(CXL_CACHE_LINE - 1);
        }
        p = stop;
    }
}

int cxl_coh_emu_register(void *view, const void *mem, void *clean, size_t len,
                         void *locks)
{
    cxl_coh_emu_reg_t reg = {(uintptr_t)view, (uintptr_t)mem,
                             (uintptr_t)clean, (uintptr_t)locks, len};
    cxl_coh_emu_slot_t *free_slot = NULL;
    cxl_coh_emu_reg_t old;
    int i;

    /* whole lines only, so a covering line never leaves its view */
    if ((reg.view == 0) || (reg.clean == 0) || (reg.locks == 0) ||
        (len == 0) ||
        ((reg.view | reg.mem | reg.clean | len) & (CXL_CACHE_LINE - 1)) ||
        (reg.locks % _Alignof(cxl_coh_emu_stripe_t))) {
        return -1;
    }

    pthread_mutex_lock(&cxl_coh_emu_mutex);
    for (i = 0; i < CXL_COH_EMU_SLOTS; ++i) {
        cxl_coh_emu_read_slot(&cxl_coh_emu_tab[i], &old);
        if (old.view == 0) {
            if (free_slot == NULL) {
                free_slot = &cxl_coh_emu_tab[i];
            }
        } else if ((reg.view < old.view + old.len) &&
                   (old.view < reg.view + len)) {
            free_slot = NULL; /* overlapping views would be ambiguous */
            break;
        }
    }
    if (free_slot != NULL) {
        cxl_coh_emu_write_slot(free_slot, &reg);
        __atomic_add_fetch(&cxl_coh_emu_count, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&cxl_coh_emu_mutex);
    return (free_slot != NULL) ? 0 : -1;
}

/*
 * The caller must have stopped using the view (as before munmap): a thread
 * still inside a write-back of it could copy into an unmapped range.
 */
void cxl_coh_emu_unregister(void *view)
{
    static const cxl_coh_emu_reg_t none;
    cxl_coh_emu_reg_t old;
    int i;

    pthread_mutex_lock(&cxl_coh_emu_mutex);
    for (i = 0; i < CXL_COH_EMU_SLOTS; ++i) {
        cxl_coh_emu_read_slot(&cxl_coh_emu_tab[i], &old);
        if ((old.view != 0) && (old.view == (uintptr_t)view)) {
            cxl_coh_emu_write_slot(&cxl_coh_emu_tab[i], &none);
            __atomic_sub_fetch(&cxl_coh_emu_count, 1, __ATOMIC_RELEASE);
            break;
        }
    }
    pthread_mutex_unlock(&cxl_coh_emu_mutex);
}

void cxl_coh_writeback_sw(const void *addr, size_t len)
{
    if (__builtin_expect(cxl_coh_counting, 0)) {
        cxl_coh_counts.writeback++;
        cxl_coh_counts.writeback_lines += cxl_coh_nlines(addr, len);
    }
    if (cxl_coh_emu_active()) {
        /* the copies must be complete before anything that follows */
        cxl_coh_emu_lines(1, cxl_coh_writeback_insn(), addr, len);
        asm volatile("mfence" ::: "memory");
        return;
    }
    cxl_coh_lines(cxl_coh_writeback_insn(), addr, len);
}

void cxl_coh_invalidate_sw(const void *addr, size_t len)
{
    if (__builtin_expect(cxl_coh_counting, 0)) {
        cxl_coh_counts.invalidate++;
        cxl_coh_counts.invalidate_lines += cxl_coh_nlines(addr, len);
    }
    /* Order earlier loads/stores before the eviction, then the eviction
     * before the loads that follow. */
    asm volatile("mfence" ::: "memory");
    if (cxl_coh_emu_active()) {
        cxl_coh_emu_lines(0, cxl_coh_invalidate_insn(), addr, len);
    } else {
        cxl_coh_lines(cxl_coh_invalidate_insn(), addr, len);
    }
    asm volatile("mfence" ::: "memory");
}

/* Whole lines with non-temporal 16-byte stores (SSE2: every x86-64). */
static void cxl_coh_copy_nt(uint8_t *dst, const uint8_t *src, size_t len)
{
    __m128i a, b, c, d;

    for (; len >= CXL_CACHE_LINE; len -= CXL_CACHE_LINE) {
        a = _mm_loadu_si128((const __m128i*)src);
        b = _mm_loadu_si128((const __m128i*)(src + 16));
        c = _mm_loadu_si128((const __m128i*)(src + 32));
        d = _mm_loadu_si128((const __m128i*)(src + 48));
        _mm_stream_si128((__m128i*)dst, a);
        _mm_stream_si128((__m128i*)(dst + 16), b);
        _mm_stream_si128((__m128i*)(dst + 32), c);
        _mm_stream_si128((__m128i*)(dst + 48), d);
        dst += CXL_CACHE_LINE;
        src += CXL_CACHE_LINE;
    }
}

/* Aligned 8-byte words with non-temporal stores (MOVNTI). */
static void cxl_coh_copy_nt64(uint8_t *dst, const uint8_t *src, size_t len)
{
    long long w;

    for (; len >= sizeof(w); len -= sizeof(w)) {
        memcpy(&w, src, sizeof(w));
        _mm_stream_si64((long long*)dst, w);
        dst += sizeof(w);
        src += sizeof(w);
    }
}

/* Bytes that fill no aligned word: stored and written back. */
static void cxl_coh_copy_wb(uint8_t *dst, const uint8_t *src, size_t len)
{
    if (len > 0) {
        memcpy(dst, src, len);
        cxl_coh_lines(cxl_coh_writeback_insn(), dst, len);
    }
}

void cxl_coh_copy(cxl_coh_mode_t mode, void *dst, const void *src, size_t len)
{
    uintptr_t d = (uintptr_t)dst, end = d + len;
    const uint8_t *s = src;
    uintptr_t w0, l0, l1, w1;

    if ((mode == CXL_COH_HW) || (len == 0)) {
        memcpy(dst, src, len);
        return;
    }
    if (cxl_coh_emu_active()) {
        /* the emulator copies cached lines only: nothing may bypass its
         * views */
        memcpy(dst, src, len);
        cxl_coh_writeback(mode, dst, len);
        return;
    }
    if (__builtin_expect(cxl_coh_counting, 0)) {
        cxl_coh_counts.writeback++;
        cxl_coh_counts.writeback_lines += cxl_coh_nlines(dst, len);
    }
    /* d <= w0 <= l0 <= l1 <= w1 <= end: bytes, words, lines, words, bytes */
    w0 = (d + 7) & ~(uintptr_t)7;
    w1 = end & ~(uintptr_t)7;
    if (w0 >= w1) {
        cxl_coh_copy_wb(dst, s, len);
        return;
    }
    l0 = (w0 + CXL_CACHE_LINE - 1) & ~(uintptr_t)(CXL_CACHE_LINE - 1);
    l1 = w1 & ~(uintptr_t)(CXL_CACHE_LINE - 1);
    if (l0 > l1) {
        l0 = l1 = w1;
    }
    cxl_coh_copy_wb(dst, s, w0 - d);
    cxl_coh_copy_nt64((uint8_t*)w0, s + (w0 - d), l0 - w0);
    cxl_coh_copy_nt((uint8_t*)l0, s + (l0 - d), l1 - l0);
    cxl_coh_copy_nt64((uint8_t*)l1, s + (l1 - d), w1 - l1);
    cxl_coh_copy_wb((uint8_t*)w1, s + (w1 - d), end - w1);
}

void cxl_coh_invalidate_lines(cxl_coh_mode_t mode, const void *const *lines,
                              unsigned count)
{
    cxl_coh_insn_t insn;
    unsigned i;

    if ((mode == CXL_COH_HW) || (count == 0)) {
        asm volatile("" ::: "memory");
        return;
    }
    if (__builtin_expect(cxl_coh_counting, 0)) {
        cxl_coh_counts.invalidate++;
        cxl_coh_counts.invalidate_lines += count;
    }
    insn = cxl_coh_invalidate_insn();
    asm volatile("mfence" ::: "memory");
    if (cxl_coh_emu_active()) {
        for (i = 0; i < count; ++i) {
            cxl_coh_emu_lines(0, insn, lines[i], 1);
        }
        asm volatile("mfence" ::: "memory");
        return;
    }
    for (i = 0; i < count; ++i) {
        cxl_coh_lines(insn, lines[i], 1);
    }
    asm volatile("mfence" ::: "memory");
    for (i = 0; i < count; ++i) {
        __builtin_prefetch(lines[i]);
    }
}

void cxl_coh_store_line(cxl_coh_mode_t mode, void *dst, const void *src)
{
    cxl_coh_emu_reg_t reg;
    uintptr_t next;

    if (mode == CXL_COH_HW) {
        memcpy(dst, src, CXL_CACHE_LINE);
        return;
    }
    if (__builtin_expect(cxl_coh_counting, 0)) {
        cxl_coh_counts.writeback++;
        cxl_coh_counts.writeback_lines++;
    }
    if (cxl_coh_emu_active() &&
        cxl_coh_emu_find((uintptr_t)dst, &reg, &next)) {
        /* the view (this host's cache) gets the line, then memory whole
         * (cxl_coh_emu_wb_line: word 0 last) */
        memcpy(dst, src, CXL_CACHE_LINE);
        cxl_coh_emu_sync(1, (uintptr_t)dst, (uintptr_t)dst + CXL_CACHE_LINE,
                         &reg);
        asm volatile("mfence" ::: "memory");
        return;
    }
    /* a direct store of 64 bytes with 64-byte write atomicity; a cached
     * copy of the line is written back and invalidated first */
    asm volatile("movdir64b %1, %0"
                 :
                 : "r"(dst), "m"(*(const uint8_t(*)[CXL_CACHE_LINE])src)
                 : "memory");
}

void cxl_coh_fence_sw(void)
{
    if (__builtin_expect(cxl_coh_counting, 0)) {
        cxl_coh_counts.fence++;
    }
    if (cxl_coh_emu_active()) {
        /* emulated write-backs are plain stores and loads: order both */
        asm volatile("mfence" ::: "memory");
        return;
    }
    asm volatile("sfence" ::: "memory");
}
