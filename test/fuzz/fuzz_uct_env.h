/*
 * Shared part of the transport harnesses (fuzz_uct_*): the real "cxl" UCT
 * stack (the transport's sources are compiled into each harness) on a
 * small pool in a memory file, made once per process: one MD, one worker,
 * two interfaces (0: the one under test, 1: a peer, e.g. where answers
 * go).  Interface ids are fixed after open (and their channels' first
 * sequence numbers with them), so that the seeds, which the same code
 * writes, match in every later process.
 */
#ifndef FUZZ_UCT_ENV_H
#define FUZZ_UCT_ENV_H

#include "cxl_chan.h"

#include <uct/api/uct.h>

#define FUZZ_UCT_IFACES 2
#define FUZZ_UCT_SCRATCH (256u << 10)

typedef struct {
    uct_md_h          md;
    uct_worker_h      worker;
    ucs_async_context_t *async;
    uct_iface_h       iface[FUZZ_UCT_IFACES];
    uct_cxl_iface_t  *cxl[FUZZ_UCT_IFACES];
    uct_cxl_pool_t   *pool;
    uint8_t           dev_addr[sizeof(uct_cxl_device_addr_t)];
    uct_cxl_iface_addr_t addr[FUZZ_UCT_IFACES];
    /* memory outside the pool, registered: owner-executed operations of
     * peers may write only there; guard pages on both sides */
    uint8_t          *reg_area;   /* 3 pages: guard, registered, guard */
    uct_mem_h         reg_memh;
    size_t            page;
    uint8_t          *key_area;   /* 64 KiB pool allocation, registered */
    uct_mem_h         key_memh;
    uint64_t          scratch_offset; /* FUZZ_UCT_SCRATCH bytes of pool */
} fuzz_uct_env_t;

extern fuzz_uct_env_t fuzz_uct;

/* Set up fuzz_uct (aborts on failure); extra UCX_CXL_* settings first. */
void fuzz_uct_env_init(void);

/* The registered page (peers' puts land there) and its guards. */
static inline uint8_t *fuzz_uct_reg(void)
{
    return fuzz_uct.reg_area + fuzz_uct.page;
}

/* The guard pages are still FUZZ_UCT_GUARD bytes (else abort). */
#define FUZZ_UCT_GUARD 0x5a
void fuzz_uct_check_guards(const char *what);

/* Reset the receive state of interface i to a fresh block's: channels
 * zeroed, consumer positions 0, expected sequence numbers seq. */
void fuzz_uct_rx_reset(unsigned i, uint32_t seq);

/* Ring bytes of each channel of interface i (as it opened). */
uint64_t fuzz_uct_ring_size(unsigned i);

/* [p, p + len) lies inside the pool's heap. */
int fuzz_uct_in_heap(const void *p, uint64_t len);

/* Progress each interface rounds times. */
void fuzz_uct_progress(unsigned rounds);

#endif
