/*
 * Cache write-back / invalidate / fence, chosen once from CPUID.
 *
 * Write-back prefers CLWB (keeps the line cached), then CLFLUSHOPT, then
 * CLFLUSH.  Invalidation must evict, so it never uses CLWB.  CLFLUSHOPT and
 * CLWB are weakly ordered: an SFENCE after them orders the flushes before
 * the next store, which is what a publish needs.
 */
#include <ucx_cxl/coherence.h>

#include <stdint.h>
#include <string.h>
#include <pthread.h>
#include <cpuid.h>

static cxl_coh_insn_t cxl_coh_wb_insn  = CXL_COH_INSN_NONE;
static cxl_coh_insn_t cxl_coh_inv_insn = CXL_COH_INSN_NONE;
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

void cxl_coh_writeback(cxl_coh_mode_t mode, const void *addr, size_t len)
{
    if (mode == CXL_COH_HW || len == 0) {
        asm volatile("" ::: "memory");
        return;
    }
    cxl_coh_lines(cxl_coh_writeback_insn(), addr, len);
}

void cxl_coh_invalidate(cxl_coh_mode_t mode, const void *addr, size_t len)
{
    if (mode == CXL_COH_HW || len == 0) {
        asm volatile("" ::: "memory");
        return;
    }
    /* Order earlier loads/stores before the eviction, then the eviction
     * before the loads that follow. */
    asm volatile("mfence" ::: "memory");
    cxl_coh_lines(cxl_coh_invalidate_insn(), addr, len);
    asm volatile("mfence" ::: "memory");
}

void cxl_coh_fence(cxl_coh_mode_t mode)
{
    if (mode == CXL_COH_HW) {
        /* x86 TSO keeps stores ordered; only the compiler must not move them */
        asm volatile("" ::: "memory");
        return;
    }
    asm volatile("sfence" ::: "memory");
}
