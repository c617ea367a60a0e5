/*
 * UCT component and memory domain "cxl": memory lives in CXL pools, keys
 * are pool offsets.
 */
#ifndef UCT_CXL_MD_H
#define UCT_CXL_MD_H

#include <uct/base/uct_md.h>
#include <inttypes.h>
#include <ucs/datastruct/list.h>
#include <pthread.h>
#include <ucx_cxl/cxlpool.h>

#define UCT_CXL_NAME       "cxl"
#define UCT_CXL_MAX_POOLS  8
#define UCT_CXL_RKEY_MAGIC       0x59454b4cu  /* "LKEY" */
#define UCT_CXL_RKEY_MAGIC_LOCAL 0x4c434f4cu  /* "LOCL": not in a pool extent */

typedef enum {
    UCT_CXL_COH_CFG_HW,
    UCT_CXL_COH_CFG_SW,
    UCT_CXL_COH_CFG_AUTO,
    UCT_CXL_COH_CFG_LAST
} uct_cxl_coh_cfg_t;

/* One attached pool; shared by every MD of the process, refcounted. */
typedef struct uct_cxl_pool {
    ucs_list_link_t  list;
    unsigned         refcount;
    cxlpool_t       *cxlpool;
    uint8_t         *base;
    uint64_t         size;
    uint64_t         heap_offset;
    uint8_t          uuid[CXLPOOL_UUID_LEN];
    cxl_coh_mode_t   coh;
    cxlpool_backend_t backend;
    char             path[256];
    char             dev_name[UCT_DEVICE_NAME_MAX]; /* device shown to UCT */
    unsigned         host_index;  /* this process's host partition */
    int              test_via_owner; /* UCX_CXL_TEST_VIA_OWNER (test only) */
    pthread_mutex_t  allocs_lock;
    ucs_list_link_t  allocs;      /* this process's allocations (memh) */
} uct_cxl_pool_t;

typedef struct uct_cxl_md_config {
    uct_md_config_t           super;
    ucs_config_names_array_t  pools;
    size_t                    pool_size;
    int                       coherence;  /* uct_cxl_coh_cfg_t */
    int                       numa_node;
    int                       reg_any;
    int                       rkey_ptr;   /* UCS_YES / UCS_NO / UCS_TRY */
    char                     *host_index; /* "auto" or a host partition */
    int                       test_via_owner; /* test only, see cxl_md.c */
} uct_cxl_md_config_t;

typedef struct uct_cxl_md {
    uct_md_t         super;
    int              reg_any;   /* register memory outside the pool too */
    int              rkey_ptr;  /* UCX_CXL_RKEY_PTR: yes / no / try */
    unsigned         num_pools;
    uct_cxl_pool_t  *pools[UCT_CXL_MAX_POOLS];
} uct_cxl_md_t;

/*
 * Memory handle: a range inside one allocated extent of a pool, or (pool
 * NULL) any other memory, whose key sends every operation to this process.
 */
typedef struct uct_cxl_memh {
    ucs_list_link_t  list;        /* allocated: in pool->allocs; outside
                                   * the pool: in the local registrations */
    uct_cxl_pool_t  *pool;
    void            *address;
    size_t           length;
    uint64_t         offset;      /* of address, from the pool base */
    uint32_t         ext_index;
    uint32_t         ext_gen;
    int              allocated;   /* from mem_alloc: free the extent too */
} uct_cxl_memh_t;

/*
 * Packed remote key: pool identity, the range it grants, the owner's
 * virtual address of that range, and the extent generation that makes it
 * stale once the extent is freed; who registered the memory (its owner,
 * uct_cxl_proc_id()) and on which host partition of the pool it lives, so
 * that a requester on another host of a software-coherent pool asks the
 * owner to write back and invalidate (see doc/design/sw-coherence.md).
 * The CRC catches corrupt or forged keys.
 */
typedef struct uct_cxl_packed_rkey {
    uint32_t magic;
    uint32_t crc;
    uint8_t  uuid[CXLPOOL_UUID_LEN];
    uint64_t offset;      /* memory outside the pool: 0 */
    uint64_t length;
    uint64_t owner_va;
    uint32_t ext_index;
    uint32_t ext_gen;
    uint64_t owner;       /* the registering process */
    uint32_t host;        /* its host partition of the pool */
    uint32_t reserved;
} UCS_S_PACKED uct_cxl_packed_rkey_t;

/*
 * Unpacked key: local address = remote address + delta, valid only inside
 * [lo, hi).  Every operation checks the range, so no key can reach outside
 * the extent it was made for.
 */
typedef struct uct_cxl_rkey {
    intptr_t         delta;
    uintptr_t        lo;
    uintptr_t        hi;
    uct_cxl_pool_t  *pool;      /* NULL: memory outside the pool */
    uint64_t         owner;     /* the owner's uct_cxl_proc_id() */
    int              via_owner; /* operations need the owner: memory outside
                                 * the pool, or pool memory of another host
                                 * of a software-coherent pool */
} uct_cxl_rkey_t;

extern uct_component_t uct_cxl_component;

/* Operations on this key need its owner (cxl_proxy.c), not plain loads and
 * stores alone. */
static UCS_F_ALWAYS_INLINE int uct_cxl_rkey_proxied(uct_rkey_t rkey)
{
    return (rkey != UCT_INVALID_RKEY) && (rkey != 0) &&
           ((const uct_cxl_rkey_t*)rkey)->via_owner;
}

/* [addr, +length) lies inside what key grants (addr in its address space). */
static UCS_F_ALWAYS_INLINE int
uct_cxl_rkey_covers(const uct_cxl_rkey_t *key, uintptr_t addr, size_t length)
{
    return (addr >= key->lo) && (addr <= key->hi) &&
           (length <= key->hi - addr);
}

/* Local address for [remote_addr, +length) under rkey, NULL if outside. */
static UCS_F_ALWAYS_INLINE void *
uct_cxl_rkey_addr(uct_rkey_t rkey, uint64_t remote_addr, size_t length)
{
    const uct_cxl_rkey_t *key = (const uct_cxl_rkey_t*)rkey;
    uintptr_t addr;

    if (ucs_unlikely((rkey == UCT_INVALID_RKEY) || (rkey == 0) ||
                     key->via_owner)) {
        return NULL; /* no key, or memory only its owner may touch alone */
    }
    addr = (uintptr_t)remote_addr + key->delta;
    if (ucs_unlikely(!uct_cxl_rkey_covers(key, addr, length))) {
        return NULL;
    }
    return (void*)addr;
}

/* This process, for keys of memory outside the pool; new after fork. */
uint64_t uct_cxl_proc_id(void);
/* [addr, addr + length) lies in a live registration or pool allocation of
 * this process: operations an owner executes for others touch only that. */
int      uct_cxl_local_reg_covers(uintptr_t addr, size_t length);

/* process-wide pool registry (cxl_pool.c) */
ucs_status_t uct_cxl_pool_get(const char *path, const uct_cxl_md_config_t *cfg,
                              uct_cxl_pool_t **pool_p);
void         uct_cxl_pool_put(uct_cxl_pool_t *pool);
uct_cxl_pool_t *uct_cxl_pool_find_uuid(const uint8_t *uuid);
uct_cxl_pool_t *uct_cxl_pool_find_addr(const void *addr, size_t length);
/* [addr, addr + length) lies inside one allocation of this process */
int          uct_cxl_pool_alloc_covers(uintptr_t addr, size_t length);
ucs_status_t uct_cxl_pool_status(cxlpool_status_t status);

#endif
