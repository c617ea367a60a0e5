/*
 * Memory domain "cxl".
 *
 * Memory is allocated from the pool (UCT_MD_FLAG_ALLOC), so UCP places
 * buffers there with UCX_ALLOC_PRIO=md:cxl or ucp_mem_map(ALLOCATE).
 *
 * Registration has two modes (UCX_CXL_REG_ANY):
 *  y (default): any host memory registers (UCT_MD_FLAG_REG), so UCP
 *     registers its buffers and moves rendezvous data from pool-resident
 *     buffers with one copy (get_zcopy).  Pool memory gets a key that
 *     every process of the pool uses with plain loads, stores and CPU
 *     atomics.  Memory outside the pool gets a key naming its owner
 *     process: every process can use it too, but each operation on it is a
 *     record in the owner's channel that the owner executes on its own
 *     memory when it progresses (cxl_proxy.c), the owner's own operations
 *     included, so one memory never has two atomic paths.  Callers with a
 *     fallback (UCT_MD_MEM_FLAG_HIDE_ERRORS: UCP's rendezvous buffers) are
 *     declined for memory outside the pool: UCP's pipelined active
 *     messages move bulk data faster than the owner can stream it.
 *     RKEY_PTR is not advertised by default: no pointer reaches another
 *     process's private memory, and UCP 1.13's rkey_ptr rendezvous fails
 *     instead of falling back on a key it cannot map.  UCX_CXL_RKEY_PTR=yes
 *     advertises it anyway (see below).
 *  n: UCT_MD_FLAG_REG is not advertised; mem_reg works only for ranges
 *     inside one pool allocation and rkey_ptr is advertised.  UCP can then
 *     not register its send buffers, so its rendezvous copies through
 *     active messages, and it emulates RMA and atomics on ordinary memory
 *     with active messages itself.
 *
 * UCX_CXL_RKEY_PTR=yes (for UCX_TLS=cxl,cma on one host): RKEY_PTR with
 * REG_ANY=y too.  UCP 1.13 tries its rkey_ptr rendezvous before any get
 * lane, so a rendezvous from a pool-resident buffer is one copy out of the
 * pool by the receiver, all of it through cxl; without it UCP splits that
 * rendezvous by bandwidth between cxl's and cma's get_zcopy, and the cma
 * half (process_vm_readv) costs a third of the bandwidth at 64 KiB.  UCP's
 * own rendezvous keys of the cxl MD are pool keys (memory outside the pool
 * is declined above); a receive fails instead of falling back when the
 * sender passes its own memh of memory outside the pool, or when the
 * buffer lies in a pool the receiver does not attach.
 *
 * With software coherence RKEY_PTR is not advertised either: a peer on
 * another host would load the buffer straight from pool memory through the
 * pointer, with no invalidate before and while the owner's writes may
 * still sit in the owner's cache (nothing writes them back for it).  A key
 * of pool memory names its owner and the owner's host partition: a peer on
 * the same host uses it directly, one on another host goes through the
 * owner (cxl_proxy.c, doc/design/sw-coherence.md).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cxl_md.h"

#include <uct/api/v2/uct_v2.h>
#include <ucs/debug/log.h>
#include <ucs/sys/sys.h>
#include <sys/random.h>
#include <pthread.h>
#include <unistd.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/string.h>
#include <string.h>

static const char *uct_cxl_coh_names[] = {
    [UCT_CXL_COH_CFG_HW]   = "hw",
    [UCT_CXL_COH_CFG_SW]   = "sw",
    [UCT_CXL_COH_CFG_AUTO] = "auto",
    [UCT_CXL_COH_CFG_LAST] = NULL
};

static ucs_config_field_t uct_cxl_md_config_table[] = {
    {"", "", NULL, ucs_offsetof(uct_cxl_md_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_md_config_table)},

    {"POOL", "auto",
     "CXL pools to attach, one UCT device each. 'auto': the devdax devices\n"
     "that hold a ucx-cxl pool, else the per-user emulated default pool\n"
     "/dev/shm/ucx-cxl-<uid>.pool (created on first use). Otherwise a\n"
     "comma-separated list of devdax devices (/dev/daxX.Y) and pool files;\n"
     "those must exist (see 'cxlpool create').",
     ucs_offsetof(uct_cxl_md_config_t, pools), UCS_CONFIG_TYPE_STRING_ARRAY},

    {"POOL_SIZE", "1g",
     "Size of the emulated default pool when this process creates it.",
     ucs_offsetof(uct_cxl_md_config_t, pool_size), UCS_CONFIG_TYPE_MEMUNITS},

    {"COHERENCE", "auto",
     "Cache coherence of the pool memory:\n"
     " hw   - hardware keeps caches coherent (one host, or CXL 3.x sharing);\n"
     "        CPU atomics are advertised.\n"
     " sw   - software coherence (CXL 2.0 multi-host sharing): every write\n"
     "        is written back and every read of shared data invalidated;\n"
     "        RMA and atomics on memory of another host go through its owner.\n"
     " auto - the mode the pool was created with (cxlpool create --coherence).",
     ucs_offsetof(uct_cxl_md_config_t, coherence),
     UCS_CONFIG_TYPE_ENUM(uct_cxl_coh_names)},

    {"REG_ANY", "y",
     "Register any host memory, not only pool allocations.\n"
     " y - UCP registers its buffers: rendezvous from pool-resident buffers\n"
     "     moves data with one copy (get_zcopy). Memory outside the pool that\n"
     "     UCP maps for RMA gets keys too: the owner process executes each\n"
     "     operation on it when it progresses. Rendezvous buffers outside the\n"
     "     pool are declined, so UCP pipelines them through active messages.\n"
     "     rkey_ptr is not offered.\n"
     " n - only pool allocations register (UCT_MD_FLAG_REG off) and rkey_ptr\n"
     "     is offered; UCP's rendezvous copies through active messages.",
     ucs_offsetof(uct_cxl_md_config_t, reg_any), UCS_CONFIG_TYPE_BOOL},

    {"RKEY_PTR", "try",
     "Offer rkey_ptr (UCT_MD_FLAG_RKEY_PTR; never with software coherence),\n"
     "which UCP 1.13 prefers to every get lane for the rendezvous of a\n"
     "pool-resident buffer: the receiver copies straight out of the pool.\n"
     " try - only with UCX_CXL_REG_ANY=n;\n"
     " yes - with UCX_CXL_REG_ANY=y too: for UCX_TLS=cxl,cma on one host, so\n"
     "       that a pool-resident rendezvous stays on cxl instead of being\n"
     "       split with cma. UCP 1.13 does not fall back from rkey_ptr: a\n"
     "       rendezvous from a memh the sender passes of memory outside the\n"
     "       pool, or from a pool the receiver does not attach, fails;\n"
     " no  - never.",
     ucs_offsetof(uct_cxl_md_config_t, rkey_ptr), UCS_CONFIG_TYPE_TERNARY},

    {"NUMA_NODE", "-1",
     "Bind the pool memory to this NUMA node (to stand in for a CPU-less CXL\n"
     "memory node); -1: no binding.",
     ucs_offsetof(uct_cxl_md_config_t, numa_node), UCS_CONFIG_TYPE_INT},

    {"HOST_INDEX", "auto",
     "Which host partition of a software-coherent multi-host pool this process\n"
     "writes (0..N-1; the same for all processes of one host, different for\n"
     "every host; see 'cxlpool create --hosts'). Processes write pool\n"
     "metadata only in their own host's partition, since hosts share no\n"
     "coherence. 'auto': 0 for pools with one partition (and hardware-coherent\n"
     "pools), the emulator's choice for emulate-nc: pools, otherwise it must\n"
     "be set.",
     ucs_offsetof(uct_cxl_md_config_t, host_index), UCS_CONFIG_TYPE_STRING},

    {"TEST_VIA_OWNER", "n",
     "Test only, never in production: with software coherence, treat keys of\n"
     "pool memory of this host as another host's, so that every put, get and\n"
     "atomic on them goes through the memory's owner (its write-back and\n"
     "invalidate requests) even within one process, e.g. for UCX's UCT tests.",
     ucs_offsetof(uct_cxl_md_config_t, test_via_owner), UCS_CONFIG_TYPE_BOOL},

    {NULL}
};

static void uct_cxl_md_close(uct_md_h tl_md)
{
    uct_cxl_md_t *md = ucs_derived_of(tl_md, uct_cxl_md_t);
    unsigned i;

    for (i = 0; i < md->num_pools; ++i) {
        uct_cxl_pool_put(md->pools[i]);
    }
    ucs_free(md);
}

static ucs_status_t uct_cxl_md_query(uct_md_h tl_md, uct_md_attr_t *attr)
{
    uct_cxl_md_t *md = ucs_derived_of(tl_md, uct_cxl_md_t);
    unsigned i;

    int sw = 0;

    for (i = 0; i < md->num_pools; ++i) {
        sw |= (md->pools[i]->coh == CXL_COH_SW);
    }

    attr->cap.flags = UCT_MD_FLAG_ALLOC | UCT_MD_FLAG_NEED_RKEY;
    if (md->reg_any) {
        attr->cap.flags        |= UCT_MD_FLAG_REG;
        attr->cap.reg_mem_types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    } else {
        attr->cap.reg_mem_types = 0;
    }
    if (!sw && ((md->rkey_ptr == UCS_YES) ||
                ((md->rkey_ptr == UCS_TRY) && !md->reg_any))) {
        /* sw: a direct pointer would read what the owner never wrote back */
        attr->cap.flags        |= UCT_MD_FLAG_RKEY_PTR;
    }
    attr->cap.alloc_mem_types  = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    attr->cap.access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    attr->cap.detect_mem_types = 0;
    attr->cap.max_reg          = md->reg_any ? SIZE_MAX : 0;
    attr->cap.max_alloc        = 0;
    for (i = 0; i < md->num_pools; ++i) {
        attr->cap.max_alloc = ucs_max(attr->cap.max_alloc,
                                      md->pools[i]->size -
                                      md->pools[i]->heap_offset);
    }
    attr->rkey_packed_size = sizeof(uct_cxl_packed_rkey_t);
    attr->reg_cost         = ucs_linear_func_make(0, 0);
    memset(&attr->local_cpus, 0xff, sizeof(attr->local_cpus));
    return UCS_OK;
}

static ucs_status_t
uct_cxl_mem_alloc(uct_md_h tl_md, size_t *length_p, void **address_p,
                  ucs_memory_type_t mem_type, unsigned flags,
                  const char *alloc_name, uct_mem_h *memh_p)
{
    uct_cxl_md_t *md = ucs_derived_of(tl_md, uct_cxl_md_t);
    uct_cxl_pool_t *pool;
    cxlpool_status_t cstatus;
    cxlpool_extent_t ext;
    uct_cxl_memh_t *memh;
    uint64_t align;

    if ((mem_type != UCS_MEMORY_TYPE_HOST) || (flags & UCT_MD_MEM_FLAG_FIXED) ||
        (md->num_pools == 0)) {
        return UCS_ERR_UNSUPPORTED;
    }

    memh = ucs_malloc(sizeof(*memh), "cxl_memh");
    if (memh == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    /* page alignment for buffers; 2 MiB for large ones (huge pages, dax) */
    pool    = md->pools[0];
    align   = (*length_p >= CXLPOOL_MAX_ALIGN) ? CXLPOOL_MAX_ALIGN : 4096;
    cstatus = cxlpool_alloc(pool->cxlpool, *length_p, align, NULL, 0, &ext);
    if (cstatus != CXLPOOL_OK) {
        ucs_debug("cxl: allocating %zu bytes for '%s' failed: %s", *length_p,
                  alloc_name, cxlpool_last_error());
        ucs_free(memh);
        return uct_cxl_pool_status(cstatus);
    }

    memh->pool      = pool;
    memh->address   = pool->base + ext.offset;
    memh->length    = ext.length;
    memh->offset    = ext.offset;
    memh->ext_index = ext.index;
    memh->ext_gen   = ext.gen;
    memh->allocated = 1;
    pthread_mutex_lock(&pool->allocs_lock);
    ucs_list_add_tail(&pool->allocs, &memh->list);
    pthread_mutex_unlock(&pool->allocs_lock);

    *length_p  = ext.length;
    *address_p = memh->address;
    *memh_p    = memh;
    ucs_trace("cxl: allocated %p length %zu offset 0x%" PRIx64 " for '%s'",
              memh->address, memh->length, memh->offset, alloc_name);
    return UCS_OK;
}

static ucs_status_t uct_cxl_mem_free(uct_md_h tl_md, uct_mem_h tl_memh)
{
    uct_cxl_memh_t *memh = tl_memh;
    cxlpool_status_t cstatus;

    pthread_mutex_lock(&memh->pool->allocs_lock);
    ucs_list_del(&memh->list);
    pthread_mutex_unlock(&memh->pool->allocs_lock);
    cstatus = cxlpool_free(memh->pool->cxlpool, memh->offset);
    if (cstatus != CXLPOOL_OK) {
        ucs_error("cxl: %s", cxlpool_last_error());
    }
    ucs_free(memh);
    return uct_cxl_pool_status(cstatus);
}

/*
 * The extent holding [address, address + length): first among this
 * process's own allocations (UCP registers every rendezvous buffer, and
 * most live there), else by a scan of the pool's extent table.
 */
static int uct_cxl_find_extent(uct_cxl_pool_t *pool, void *address,
                               size_t length, cxlpool_extent_t *ext)
{
    uintptr_t start = (uintptr_t)address;
    uct_cxl_memh_t *alloc;
    int found = 0;

    pthread_mutex_lock(&pool->allocs_lock);
    ucs_list_for_each(alloc, &pool->allocs, list) {
        if ((start >= (uintptr_t)alloc->address) &&
            (length <= alloc->length) &&
            (start - (uintptr_t)alloc->address <= alloc->length - length)) {
            ext->index = alloc->ext_index;
            ext->gen   = alloc->ext_gen;
            found      = 1;
            break;
        }
    }
    pthread_mutex_unlock(&pool->allocs_lock);

    return found ||
           (cxlpool_extent_find(pool->cxlpool, (uint8_t*)address - pool->base,
                                length, ext) == CXLPOOL_OK);
}

/*
 * Identity of this process for keys of memory outside the pool: random,
 * made again after fork (a child has the memory, but not the interfaces
 * that execute operations on it).  Interfaces publish it in their block
 * header, so a proxied operation goes only to an interface of the owner.
 */
uint64_t uct_cxl_proc_id(void)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static pid_t owner          = 0;
    static uint64_t value;
    uint64_t id;

    pthread_mutex_lock(&lock);
    if (owner != getpid()) {
        if ((getrandom(&value, sizeof(value), 0) != (ssize_t)sizeof(value)) ||
            (value == 0)) {
            value = ucs_generate_uuid((uintptr_t)&owner) | 1;
        }
        owner = getpid();
    }
    id = value;
    pthread_mutex_unlock(&lock);
    return id;
}

/* Registrations of memory outside the pool, where proxied operations may
 * write: a stale or forged key never makes the owner touch other memory. */
static pthread_mutex_t uct_cxl_local_regs_lock = PTHREAD_MUTEX_INITIALIZER;
static UCS_LIST_HEAD(uct_cxl_local_regs);

int uct_cxl_local_reg_covers(uintptr_t addr, size_t length)
{
    uct_cxl_memh_t *memh;
    int found = 0;

    pthread_mutex_lock(&uct_cxl_local_regs_lock);
    ucs_list_for_each(memh, &uct_cxl_local_regs, list) {
        if ((addr >= (uintptr_t)memh->address) &&
            (length <= memh->length) &&
            (addr - (uintptr_t)memh->address <= memh->length - length)) {
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&uct_cxl_local_regs_lock);
    /* pool memory UCP allocated through this MD is keyed without mem_reg */
    return found || uct_cxl_pool_alloc_covers(addr, length);
}

static ucs_status_t uct_cxl_mem_reg(uct_md_h tl_md, void *address, size_t length,
                                    unsigned flags, uct_mem_h *memh_p)
{
    uct_cxl_md_t *md     = ucs_derived_of(tl_md, uct_cxl_md_t);
    uct_cxl_pool_t *pool = uct_cxl_pool_find_addr(address, length);
    cxlpool_extent_t ext;
    uct_cxl_memh_t *memh;
    unsigned i;

    memh = ucs_calloc(1, sizeof(*memh), "cxl_memh");
    if (memh == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    memh->address = address;
    memh->length  = length;

    for (i = 0; (pool != NULL) && (i < md->num_pools); ++i) {
        if (md->pools[i] == pool) {
            break;
        }
    }
    if ((pool != NULL) && (i < md->num_pools) &&
        uct_cxl_find_extent(pool, address, length, &ext)) {
        memh->pool      = pool;
        memh->offset    = (uint8_t*)address - pool->base;
        memh->ext_index = ext.index;
        memh->ext_gen   = ext.gen;
        /* its key names this process as the owner (sw mode: peers of other
         * hosts ask it to write back and invalidate) */
        pthread_mutex_lock(&uct_cxl_local_regs_lock);
        ucs_list_add_tail(&uct_cxl_local_regs, &memh->list);
        pthread_mutex_unlock(&uct_cxl_local_regs_lock);
    } else if (!md->reg_any) {
        ucs_debug("cxl: %p+%zu is not inside one pool allocation; with "
                  "UCX_CXL_REG_ANY=n only pool memory registers", address,
                  length);
        ucs_free(memh);
        return UCS_ERR_UNSUPPORTED;
    } else if (flags & UCT_MD_MEM_FLAG_HIDE_ERRORS) {
        /*
         * The caller has a fallback (UCP registers rendezvous buffers this
         * way and then moves the data with its pipelined active messages).
         * For bulk data that beats having the owner stream it (MPI
         * bandwidth at 1 MiB: 0.31x sm through the owner, above 1x through
         * the pipeline), so only memory UCP maps for RMA gets a key here.
         */
        ucs_trace("cxl: %p+%zu is outside the pool: registration declined "
                  "for a caller with a fallback", address, length);
        ucs_free(memh);
        return UCS_ERR_UNSUPPORTED;
    } else if (pool != NULL) {
        /* pool memory no allocation of ours holds: operations on it would
         * write over whatever is allocated there next */
        ucs_debug("cxl: %p+%zu lies in pool %s but not inside one allocation",
                  address, length, pool->path);
        ucs_free(memh);
        return UCS_ERR_INVALID_ADDR;
    } else {
        ucs_trace("cxl: %p+%zu is not inside one pool allocation: operations "
                  "on it are executed by this process", address, length);
        pthread_mutex_lock(&uct_cxl_local_regs_lock);
        ucs_list_add_tail(&uct_cxl_local_regs, &memh->list);
        pthread_mutex_unlock(&uct_cxl_local_regs_lock);
    }
    *memh_p = memh;
    return UCS_OK;
}

static ucs_status_t uct_cxl_mem_dereg(uct_md_h tl_md,
                                      const uct_md_mem_dereg_params_t *params)
{
    uct_cxl_memh_t *memh;

    UCT_MD_MEM_DEREG_CHECK_PARAMS(params, 0);
    memh = params->memh;
    if (memh->allocated) {
        return UCS_ERR_INVALID_PARAM; /* allocated memory goes to mem_free */
    }
    pthread_mutex_lock(&uct_cxl_local_regs_lock);
    ucs_list_del(&memh->list);
    pthread_mutex_unlock(&uct_cxl_local_regs_lock);
    ucs_free(memh);
    return UCS_OK;
}

static uint32_t uct_cxl_rkey_crc(const uct_cxl_packed_rkey_t *key)
{
    uct_cxl_packed_rkey_t tmp = *key;

    tmp.crc = 0;
    return cxlpool_crc32c(0, &tmp, sizeof(tmp));
}

static ucs_status_t uct_cxl_mkey_pack(uct_md_h tl_md, uct_mem_h tl_memh,
                                      const uct_md_mkey_pack_params_t *params,
                                      void *buffer)
{
    const uct_cxl_memh_t *memh  = tl_memh;
    uct_cxl_packed_rkey_t *key  = buffer;
    uct_cxl_packed_rkey_t packed;

    memset(&packed, 0, sizeof(packed));
    packed.length    = memh->length;
    packed.owner_va  = (uintptr_t)memh->address;
    packed.owner     = uct_cxl_proc_id();
    if (memh->pool == NULL) {
        packed.magic = UCT_CXL_RKEY_MAGIC_LOCAL;
    } else {
        packed.magic     = UCT_CXL_RKEY_MAGIC;
        packed.offset    = memh->offset;
        packed.ext_index = memh->ext_index;
        packed.ext_gen   = memh->ext_gen;
        packed.host      = memh->pool->host_index;
        memcpy(packed.uuid, memh->pool->uuid, sizeof(packed.uuid));
    }
    packed.crc = uct_cxl_rkey_crc(&packed);
    memcpy(key, &packed, sizeof(packed));
    return UCS_OK;
}

/* An unpacked key granting [lo, lo + length), local = remote + delta. */
static ucs_status_t uct_cxl_rkey_new(uct_cxl_pool_t *pool, uintptr_t lo,
                                     uint64_t length, intptr_t delta,
                                     uint64_t owner, int via_owner,
                                     uct_rkey_t *rkey_p, void **handle_p)
{
    uct_cxl_rkey_t *key = ucs_malloc(sizeof(*key), "cxl_rkey");

    if (key == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    key->pool      = pool;
    key->owner     = owner;
    key->via_owner = via_owner;
    key->lo    = lo;
    key->hi    = lo + length;
    key->delta = delta;
    *rkey_p    = (uintptr_t)key;
    *handle_p  = key;
    return UCS_OK;
}

static ucs_status_t uct_cxl_rkey_unpack(uct_component_t *component,
                                        const void *buffer, uct_rkey_t *rkey_p,
                                        void **handle_p)
{
    uct_cxl_packed_rkey_t packed;
    uct_cxl_pool_t *pool;
    cxlpool_status_t cstatus;
    ucs_status_t status;
    int via_owner;
    uintptr_t lo;

    *handle_p = NULL; /* UCP 1.13 may release a key that failed to unpack */
    memcpy(&packed, buffer, sizeof(packed));
    if ((packed.magic == UCT_CXL_RKEY_MAGIC_LOCAL) &&
        (uct_cxl_rkey_crc(&packed) == packed.crc)) {
        /* memory outside the pool: every operation goes to its owner */
        if (packed.owner_va + packed.length < packed.owner_va) {
            return UCS_ERR_INVALID_PARAM;
        }
        return uct_cxl_rkey_new(NULL, (uintptr_t)packed.owner_va,
                                packed.length, 0, packed.owner, 1, rkey_p,
                                handle_p);
    }
    if ((packed.magic != UCT_CXL_RKEY_MAGIC) ||
        (uct_cxl_rkey_crc(&packed) != packed.crc)) {
        ucs_diag("cxl: rejecting remote key: bad magic or checksum "
                 "(corrupt or forged)");
        return UCS_ERR_INVALID_PARAM;
    }

    pool = uct_cxl_pool_find_uuid(packed.uuid);
    if (pool == NULL) {
        ucs_diag("cxl: rejecting remote key: its pool is not attached by "
                 "this process");
        return UCS_ERR_UNREACHABLE;
    }

    if ((packed.length == 0) || (packed.offset < pool->heap_offset) ||
        (packed.offset > pool->size) ||
        (packed.length > pool->size - packed.offset)) {
        ucs_diag("cxl: rejecting remote key: range 0x%" PRIx64 "+%" PRIu64
                 " lies outside the heap of pool %s", packed.offset,
                 packed.length, pool->path);
        status = UCS_ERR_INVALID_ADDR;
        goto err_put;
    }

    cstatus = cxlpool_extent_check(pool->cxlpool, packed.ext_index,
                                   packed.ext_gen, packed.offset, packed.length);
    if (cstatus != CXLPOOL_OK) {
        ucs_diag("cxl: rejecting remote key: %s", cxlpool_last_error());
        status = (cstatus == CXLPOOL_ERR_STALE) ? UCS_ERR_NO_ELEM :
                 UCS_ERR_INVALID_ADDR;
        goto err_put;
    }

    /*
     * Software coherence: this host's caches are coherent only with those
     * of the owner's host.  Memory of another host is written and read
     * with the owner's help (it writes back and invalidates, cxl_proxy.c).
     */
    via_owner = (pool->coh == CXL_COH_SW) &&
                ((packed.host != pool->host_index) || pool->test_via_owner);
    lo        = (uintptr_t)pool->base + packed.offset;
    status    = uct_cxl_rkey_new(pool, lo, packed.length,
                                 (intptr_t)(lo - (uintptr_t)packed.owner_va),
                                 packed.owner, via_owner, rkey_p, handle_p);
    if (status == UCS_OK) {
        return UCS_OK;
    }

err_put:
    uct_cxl_pool_put(pool);
    return status;
}

static ucs_status_t uct_cxl_rkey_ptr(uct_component_t *component, uct_rkey_t rkey,
                                     void *handle, uint64_t raddr, void **laddr_p)
{
    void *addr;

    if (uct_cxl_rkey_proxied(rkey)) {
        /* memory outside the pool: private to its owner, even when the
         * owner is this process (its operations go through the owner too);
         * pool memory of another host: loads through a pointer would miss
         * what the owner's caches hold */
        return UCS_ERR_UNREACHABLE;
    }
    addr = uct_cxl_rkey_addr(rkey, raddr, 1); /* a byte at raddr */
    if (addr == NULL) {
        return UCS_ERR_INVALID_ADDR;
    }
    *laddr_p = addr;
    return UCS_OK;
}

static ucs_status_t uct_cxl_rkey_release(uct_component_t *component,
                                         uct_rkey_t rkey, void *handle)
{
    uct_cxl_rkey_t *key = handle;

    if (key == NULL) {
        return UCS_OK; /* a key whose unpack failed */
    }
    if (key->pool != NULL) {
        uct_cxl_pool_put(key->pool);
    }
    ucs_free(key);
    return UCS_OK;
}

static uct_md_ops_t uct_cxl_md_ops = {
    .close                  = uct_cxl_md_close,
    .query                  = uct_cxl_md_query,
    .mem_alloc              = uct_cxl_mem_alloc,
    .mem_free               = uct_cxl_mem_free,
    .mem_advise             = (uct_md_mem_advise_func_t)
                                      ucs_empty_function_return_unsupported,
    .mem_reg                = uct_cxl_mem_reg,
    .mem_dereg              = uct_cxl_mem_dereg,
    .mem_query              = (uct_md_mem_query_func_t)
                                      ucs_empty_function_return_unsupported,
    .mkey_pack              = uct_cxl_mkey_pack,
    .is_sockaddr_accessible = (uct_md_is_sockaddr_accessible_func_t)
                                      ucs_empty_function_return_zero,
    .detect_memory_type     = (uct_md_detect_memory_type_func_t)
                                      ucs_empty_function_return_unsupported
};

typedef struct {
    char     paths[UCT_CXL_MAX_POOLS][64];
    unsigned count;
} uct_cxl_devdax_scan_t;

/* 'auto': devdax devices that already hold a pool (never format one). */
static void uct_cxl_devdax_scan_cb(const cxlpool_devdax_info_t *dev, void *arg)
{
    uct_cxl_devdax_scan_t *scan = arg;
    cxlpool_info_t info;

    if (dev->system_ram || !dev->enabled) {
        return;
    }
    if (cxlpool_probe(dev->path, &info) != CXLPOOL_OK) {
        ucs_warn("cxl: %s holds no usable ucx-cxl pool (%s); format it with "
                 "'cxlpool create %s' to use it", dev->path,
                 cxlpool_last_error(), dev->path);
        return;
    }
    if (scan->count < UCT_CXL_MAX_POOLS) {
        ucs_strncpy_zero(scan->paths[scan->count++], dev->path,
                         sizeof(scan->paths[0]));
    }
}

static ucs_status_t uct_cxl_md_open(uct_component_t *component,
                                    const char *md_name,
                                    const uct_md_config_t *uct_config,
                                    uct_md_h *md_p)
{
    const uct_cxl_md_config_t *config = ucs_derived_of(uct_config,
                                                       uct_cxl_md_config_t);
    uct_cxl_devdax_scan_t scan = {.count = 0};
    const char *list[UCT_CXL_MAX_POOLS];
    unsigned i, j, count = 0;
    uct_cxl_md_t *md;
    ucs_status_t status;

    if ((config->pool_size == UCS_MEMUNITS_INF) ||
        (config->pool_size == UCS_MEMUNITS_AUTO)) {
        ucs_error("cxl: UCX_CXL_POOL_SIZE must be a size, e.g. 1g");
        return UCS_ERR_INVALID_PARAM;
    }

    md = ucs_calloc(1, sizeof(*md), "cxl_md");
    if (md == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    md->super.ops       = &uct_cxl_md_ops;
    md->super.component = &uct_cxl_component;
    md->reg_any         = config->reg_any;
    md->rkey_ptr        = config->rkey_ptr;

    if ((config->pools.count == 1) && !strcmp(config->pools.names[0], "auto")) {
        /* devdax devices with a pool first, else the emulated default */
        if (cxlpool_devdax_foreach(uct_cxl_devdax_scan_cb, &scan) != CXLPOOL_OK) {
            ucs_debug("cxl: no devdax enumeration: %s", cxlpool_last_error());
        }
        for (i = 0; i < scan.count; ++i) {
            list[count++] = scan.paths[i];
        }
        if (count == 0) {
            list[count++] = NULL; /* the per-user emulated default */
        }
    } else {
        if (config->pools.count > UCT_CXL_MAX_POOLS) {
            ucs_error("cxl: UCX_CXL_POOL lists %u pools, at most %d are "
                      "supported", config->pools.count, UCT_CXL_MAX_POOLS);
            ucs_free(md);
            return UCS_ERR_INVALID_PARAM;
        }
        for (i = 0; i < config->pools.count; ++i) {
            list[count++] = config->pools.names[i];
        }
    }

    for (i = 0; i < count; ++i) {
        status = uct_cxl_pool_get(list[i], config, &md->pools[md->num_pools]);
        if (status != UCS_OK) {
            uct_cxl_md_close(&md->super);
            return status;
        }
        ++md->num_pools;
        for (j = 0; j + 1 < md->num_pools; ++j) {
            if (!strcmp(md->pools[j]->dev_name, md->pools[i]->dev_name)) {
                ucs_error("cxl: pools %s and %s would both be device '%s'; "
                          "rename one of them", md->pools[j]->path,
                          md->pools[i]->path, md->pools[i]->dev_name);
                uct_cxl_md_close(&md->super);
                return UCS_ERR_INVALID_PARAM;
            }
        }
    }

    *md_p = &md->super;
    return UCS_OK;
}

uct_component_t uct_cxl_component = {
    .query_md_resources = uct_md_query_single_md_resource,
    .md_open            = uct_cxl_md_open,
    .cm_open            = (uct_component_cm_open_func_t)
                                  ucs_empty_function_return_unsupported,
    .rkey_unpack        = uct_cxl_rkey_unpack,
    .rkey_ptr           = uct_cxl_rkey_ptr,
    .rkey_release       = uct_cxl_rkey_release,
    .name               = UCT_CXL_NAME,
    .md_config          = {
        .name           = "CXL memory domain",
        .prefix         = "CXL_",
        .table          = uct_cxl_md_config_table,
        .size           = sizeof(uct_cxl_md_config_t),
    },
    .cm_config          = UCS_CONFIG_EMPTY_GLOBAL_LIST_ENTRY,
    .tl_list            = UCT_COMPONENT_TL_LIST_INITIALIZER(&uct_cxl_component),
    .flags              = 0,
    .md_vfs_init        = (uct_component_md_vfs_init_func_t)ucs_empty_function
};
