/*
 * vm_atomics: are atomics on a pool atomic between two machines?  Run by
 * test/vm/guest-tests.sh in two QEMU guests sharing one device: both add
 * 1 to one pool word with an atomic fetch-add for SECS seconds, at the
 * same time (by time, not by count: a fixed count may finish before the
 * other side starts), each counting its own adds; the word must end as
 * the sum of both counts.  The pool's lock and the
 * transport's channel claims are compare-and-swaps on shared memory, so a
 * setup that loses increments here tests nothing across machines (QEMU's
 * TCG with -smp 1 and any CXL window in QEMU 7.2 lose them, see
 * test/vm/README.md).
 *
 *   vm_atomics POOL create SECS   allocate the extent "vm-atomics", wait
 *                                 for the peer, add, report, free
 *   vm_atomics POOL join SECS     find it (60 s), add, report
 *
 * Prints "atomics: WORD of EXPECTED (own N, peer N)"; exit 0 when equal,
 * 1 when not or on a timeout (120 s per wait), 2 on a bad command line.
 */
#include <ucx_cxl/cxlpool.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define VM_ATOMICS_NAME "vm-atomics"
#define VM_ATOMICS_WAIT 120.0

/* the counter; steps both sides passed (barriers); each side's own adds */
typedef struct {
    uint64_t counter;
    uint64_t step;
    uint64_t adds[2];
} vm_atomics_t;

static double vm_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* arrive at a barrier: wait until both sides have taken `total` steps */
static int vm_barrier(vm_atomics_t *w, uint64_t total, const char *what)
{
    double deadline = vm_now() + VM_ATOMICS_WAIT;

    unsigned long spins = 0;

    /* spinning, so that both sides leave the barrier together */
    __atomic_fetch_add(&w->step, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&w->step, __ATOMIC_SEQ_CST) < total) {
        if (((++spins % 4096) == 0) && (vm_now() > deadline)) {
            fprintf(stderr, "vm_atomics: no peer at '%s' within %.0f s\n",
                    what, VM_ATOMICS_WAIT);
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    cxlpool_params_t params;
    cxlpool_extent_t ext;
    cxlpool_status_t status;
    cxlpool_t *pool;
    vm_atomics_t *w;
    uint64_t sum, own = 0, peer;
    double deadline, secs, end;
    int create, rc = 1, i;

    if ((argc != 4) || (strcmp(argv[2], "create") && strcmp(argv[2], "join"))) {
        fprintf(stderr, "usage: vm_atomics POOL create|join COUNT\n");
        return 2;
    }
    create = !strcmp(argv[2], "create");
    secs   = strtod(argv[3], NULL);

    cxlpool_params_init(&params);
    params.path = argv[1];
    status      = cxlpool_open(&params, &pool);
    if (status != CXLPOOL_OK) {
        fprintf(stderr, "vm_atomics: %s\n", cxlpool_last_error());
        return 1;
    }

    if (create) {
        status = cxlpool_alloc(pool, 4096, 0, VM_ATOMICS_NAME, 0, &ext);
        if (status == CXLPOOL_OK) {
            memset((uint8_t*)cxlpool_base(pool) + ext.offset, 0, sizeof(*w));
            __atomic_thread_fence(__ATOMIC_SEQ_CST);
        }
    } else {
        deadline = vm_now() + 60.0;
        while (((status = cxlpool_lookup(pool, VM_ATOMICS_NAME, &ext)) !=
                CXLPOOL_OK) && (vm_now() < deadline)) {
            usleep(100000);
        }
    }
    if (status != CXLPOOL_OK) {
        fprintf(stderr, "vm_atomics: %s: %s\n", VM_ATOMICS_NAME,
                cxlpool_last_error());
        goto out;
    }
    w = (vm_atomics_t*)((uint8_t*)cxlpool_base(pool) + ext.offset);

    if (vm_barrier(w, 2, "start") < 0) {
        goto out;
    }
    end = vm_now() + secs;
    do {
        for (i = 0; i < 4096; ++i) {
            __atomic_fetch_add(&w->counter, 1, __ATOMIC_SEQ_CST);
        }
        own += 4096;
    } while (vm_now() < end);
    __atomic_store_n(&w->adds[!create], own, __ATOMIC_SEQ_CST);
    if (vm_barrier(w, 4, "done") < 0) {
        goto out;
    }
    sum  = __atomic_load_n(&w->counter, __ATOMIC_SEQ_CST);
    peer = __atomic_load_n(&w->adds[create], __ATOMIC_SEQ_CST);
    printf("atomics: %" PRIu64 " of %" PRIu64 " (own %" PRIu64 ", peer %"
           PRIu64 ")\n", sum, own + peer, own, peer);
    rc = (sum == own + peer) ? 0 : 1;
    /* the creator frees the extent only after the peer has read it */
    if (vm_barrier(w, 6, "read") < 0) {
        rc = 1;
    }

out:
    cxlpool_close(pool);
    return rc;
}
