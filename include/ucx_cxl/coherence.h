/*
 * ucx-cxl coherence primitives.
 *
 * Every writer of shared pool state calls cxl_coh_writeback() on what it
 * wrote and cxl_coh_fence() before publishing; every reader of state written
 * by another party calls cxl_coh_invalidate() first.  In hardware-coherent
 * mode ("hw", CXL 3.x or one host) write-back and invalidate cost nothing but
 * a compiler barrier; in software-coherent mode ("sw", CXL 2.0 multi-host
 * sharing) they flush cache lines with the best instruction the CPU has.
 */
#ifndef UCX_CXL_COHERENCE_H
#define UCX_CXL_COHERENCE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    CXL_COH_HW = 0, /* hardware keeps caches coherent */
    CXL_COH_SW = 1  /* software must write back and invalidate */
} cxl_coh_mode_t;

typedef enum {
    CXL_COH_INSN_NONE = 0,
    CXL_COH_INSN_CLFLUSH,
    CXL_COH_INSN_CLFLUSHOPT,
    CXL_COH_INSN_CLWB
} cxl_coh_insn_t;

#define CXL_CACHE_LINE 64

/* Parse "hw" / "sw"; returns 0 on success, -1 on anything else. */
int cxl_coh_mode_parse(const char *str, cxl_coh_mode_t *mode);
const char *cxl_coh_mode_name(cxl_coh_mode_t mode);
const char *cxl_coh_insn_name(cxl_coh_insn_t insn);

/* Instructions picked from CPUID for write-back and for invalidation. */
cxl_coh_insn_t cxl_coh_writeback_insn(void);
cxl_coh_insn_t cxl_coh_invalidate_insn(void);

/* The software-coherent bodies of the three calls below. */
void cxl_coh_writeback_sw(const void *addr, size_t len);
void cxl_coh_invalidate_sw(const void *addr, size_t len);
void cxl_coh_fence_sw(void);

/*
 * In hw mode each of these is only a compiler barrier (x86 TSO keeps
 * stores ordered), so it is inline: the data path of the transport calls
 * them several times per message.
 */

/* Write back the cache lines covering [addr, addr+len). */
static inline void cxl_coh_writeback(cxl_coh_mode_t mode, const void *addr,
                                     size_t len)
{
    if ((mode == CXL_COH_HW) || (len == 0)) {
        asm volatile("" ::: "memory");
        return;
    }
    cxl_coh_writeback_sw(addr, len);
}

/* Drop the cache lines covering [addr, addr+len) so the next load reads memory. */
static inline void cxl_coh_invalidate(cxl_coh_mode_t mode, const void *addr,
                                      size_t len)
{
    if ((mode == CXL_COH_HW) || (len == 0)) {
        asm volatile("" ::: "memory");
        return;
    }
    cxl_coh_invalidate_sw(addr, len);
}

/* Order all earlier stores and flushes before later ones (store fence). */
static inline void cxl_coh_fence(cxl_coh_mode_t mode)
{
    if (mode == CXL_COH_HW) {
        asm volatile("" ::: "memory");
        return;
    }
    cxl_coh_fence_sw();
}

/*
 * Invalidate the cache lines of lines[0..count-1] (one line each, anywhere
 * in the pool) with one pair of fences instead of one per line, and start
 * loading them, so that the misses of the loads that follow overlap.  Each
 * line is then as after cxl_coh_invalidate() on it.
 */
void cxl_coh_invalidate_lines(cxl_coh_mode_t mode, const void *const *lines,
                              unsigned count);
/*
 * Copy [src, src+len) to dst and write it back: once the next
 * cxl_coh_fence() returns, the bytes are in memory, as after memcpy() and
 * cxl_coh_writeback().  In sw mode the lines dst covers whole are written
 * with non-temporal stores, which need no read for ownership of the line
 * and leave nothing in the cache to write back; a partial line at either
 * end is copied and written back.  hw mode: memcpy().
 */
void cxl_coh_copy(cxl_coh_mode_t mode, void *dst, const void *src, size_t len);

/*
 * Whether cxl_coh_store_line() writes a line atomically here: the CPU has
 * MOVDIR64B (64-byte direct store with 64-byte write atomicity), or the
 * process runs on the non-coherent emulator (which models it).
 */
int cxl_coh_line_atomic(void);

/*
 * Store the 64 bytes at src into the line-aligned dst and write them back
 * as one: a reader that invalidates and loads the line sees all of it or
 * none of it.  Only where cxl_coh_line_atomic() says so (sw mode), or in
 * hw mode (a plain copy).  Ordered like a non-temporal store: a later
 * cxl_coh_fence() orders it before later stores.
 */
void cxl_coh_store_line(cxl_coh_mode_t mode, void *dst, const void *src);

/*
 * Counts of the software-coherence operations this process performed
 * (sw mode only; hw-mode calls cost nothing and are not counted), for tests
 * and diagnostics that check how many write-backs, invalidates and fences a
 * code path needs.  Counting is off until cxl_coh_count_start(); the
 * counters are plain process-wide integers, exact for one thread.
 */
typedef struct {
    unsigned long writeback;        /* cxl_coh_writeback() and _copy() calls */
    unsigned long writeback_lines;  /* cache lines they covered */
    unsigned long invalidate;       /* cxl_coh_invalidate() and _lines() calls */
    unsigned long invalidate_lines;
    unsigned long fence;            /* cxl_coh_fence() calls */
} cxl_coh_counts_t;

/* Zero the counters and start counting. */
void cxl_coh_count_start(void);
/* The counts since cxl_coh_count_start(); counting goes on. */
void cxl_coh_count_get(cxl_coh_counts_t *counts);
/* Stop counting. */
void cxl_coh_count_stop(void);

/*
 * Non-coherent pool emulator (emulate-nc): a private view of [view,
 * view+len) stands for this host's cache, [mem, mem+len) for the shared
 * memory, and [clean, clean+len) holds the view's lines as this host last
 * synchronised them (to tell lines it stored into).  In sw mode, write-back
 * of a registered range copies its cache lines view -> memory; invalidate
 * writes back lines the host stored into, then reloads them memory ->
 * view (clean and invalidate, like CLFLUSHOPT).  Two syncs of one line
 * never interleave: locks is a table from cxl_coh_emu_locks_init() that
 * every process mapping this view maps too (the processes of one emulated
 * host).  Returns 0, or -1 for unaligned or overlapping ranges, no lock
 * table, or when the registry is full.
 */
int  cxl_coh_emu_register(void *view, const void *mem, void *clean, size_t len,
                          void *locks);
void cxl_coh_emu_unregister(void *view);

/*
 * The stripe locks of a view of len bytes: their size in bytes, and their
 * initialisation in shared memory, once, before any process registers the
 * view with them (robust, process-shared mutexes, each with the record
 * of the line its holder is syncing, which whoever takes the lock from a
 * dead holder finishes).  Returns 0 or -1.
 */
size_t cxl_coh_emu_locks_size(size_t len);
int    cxl_coh_emu_locks_init(void *locks, size_t len);

/*
 * Publish a record: write back its body, fence, so that a following flag
 * store can not become visible before the body.
 */
static inline void cxl_coh_publish(cxl_coh_mode_t mode, const void *addr,
                                   size_t len)
{
    cxl_coh_writeback(mode, addr, len);
    cxl_coh_fence(mode);
}

#ifdef __cplusplus
}
#endif

#endif
