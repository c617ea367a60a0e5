/*
 * Create, attach, close and destroy pools.
 */
#include "pool_int.h"
#include "emulate_nc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CXLPOOL_DEFAULT_SIZE (1ull << 30)

void cxlpool_params_init(cxlpool_params_t *params)
{
    memset(params, 0, sizeof(*params));
    params->numa_node = -1;
    params->coherence = CXL_COH_HW;
    params->host_index = -1;
}

const char *cxlpool_default_path(char *buf, size_t len)
{
    snprintf(buf, len, "/dev/shm/ucx-cxl-%u.pool", (unsigned)getuid());
    return buf;
}

int cxlpool_parse_uint(const char *str, uint64_t max, uint64_t *value)
{
    unsigned long long v;
    char *end;

    if ((str == NULL) || (*str < '0') || (*str > '9')) {
        return -1;
    }
    errno = 0;
    v     = strtoull(str, &end, 10);
    if ((errno != 0) || (*end != '\0') || (v > max)) {
        return -1;
    }
    *value = v;
    return 0;
}

int cxlpool_parse_size(const char *str, uint64_t *size)
{
    unsigned long long v;
    uint64_t mult = 1;
    char *end;

    /* digits first: strtoull would also take blanks and a sign, and
     * " -1" would become 2^64 - 1 */
    if ((str == NULL) || (*str < '0') || (*str > '9')) {
        return -1;
    }

    errno = 0;
    v     = strtoull(str, &end, 10);
    if ((errno != 0) || (end == str)) {
        return -1;
    }

    switch (*end) {
    case '\0':
        break;
    case 'k': case 'K':
        mult = 1ull << 10; ++end;
        break;
    case 'm': case 'M':
        mult = 1ull << 20; ++end;
        break;
    case 'g': case 'G':
        mult = 1ull << 30; ++end;
        break;
    case 't': case 'T':
        mult = 1ull << 40; ++end;
        break;
    default:
        return -1;
    }

    if ((*end == 'i') || (*end == 'I')) {
        ++end;
    }
    if ((*end == 'b') || (*end == 'B')) {
        ++end;
    }
    if ((*end != '\0') || (v > UINT64_MAX / mult)) {
        return -1;
    }

    *size = v * mult;
    return 0;
}

uint64_t cxlpool_default_size(void)
{
    const char *env = getenv("UCX_CXL_POOL_SIZE");
    uint64_t size;

    if ((env != NULL) && (cxlpool_parse_size(env, &size) == 0)) {
        return size;
    }
    return CXLPOOL_DEFAULT_SIZE;
}

static const cxlpool_backend_ops_t *
cxlpool_pick_backend(const char *path, cxlpool_backend_t *kind)
{
    struct stat st;

    if (((stat(path, &st) == 0) && S_ISCHR(st.st_mode)) ||
        !strncmp(path, "/dev/dax", 8)) {
        *kind = CXLPOOL_BACKEND_DEVDAX;
        return &cxlpool_backend_devdax_ops;
    }

    *kind = (!strncmp(path, "/dev/shm/", 9) ||
             !strncmp(path, "/dev/hugepages/", 15)) ?
            CXLPOOL_BACKEND_EMULATED : CXLPOOL_BACKEND_FILE;
    return &cxlpool_backend_file_ops;
}

/* Copy out the superblock without writing anything, then validate it. */
static cxlpool_status_t cxlpool_read_sb(const char *path, int fd,
                                        cxlpool_backend_t kind,
                                        uint64_t store_size, uint64_t map_align,
                                        cxlpool_sb_t *sb)
{
    uint64_t len = cxlpool_devdax_map_len(map_align);
    ssize_t n;
    void *map;

    memset(sb, 0, sizeof(*sb));
    if (kind == CXLPOOL_BACKEND_DEVDAX) {
        /* device dax has no read(2): map the first device page read-only */
        map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
        if (map == MAP_FAILED) {
            return cxlpool_error_errno(errno, path, "mmap superblock");
        }
        cxl_coh_invalidate(CXL_COH_SW, map, sizeof(*sb));
        memcpy(sb, map, sizeof(*sb));
        munmap(map, len);
        n = sizeof(*sb);
    } else {
        n = pread(fd, sb, sizeof(*sb), 0);
        if (n < 0) {
            return cxlpool_error_errno(errno, path, "read superblock");
        }
    }

    if (n == 0) {
        return cxlpool_error(CXLPOOL_ERR_BAD_MAGIC,
                             "%s: empty file, not a ucx-cxl pool; nothing was "
                             "written to it. Remove it, or create a pool with "
                             "'cxlpool create PATH --size SIZE'", path);
    }

    if ((size_t)n < sizeof(*sb)) {
        if (sb->magic != CXLPOOL_MAGIC) {
            return cxlpool_sb_validate(path, sb, store_size);
        }
        return cxlpool_error(CXLPOOL_ERR_TRUNCATED,
                             "%s: truncated: only %zd bytes left, less than a "
                             "superblock; it was not touched. Restore the "
                             "file or recreate the pool", path, n);
    }

    return cxlpool_sb_validate(path, sb, store_size);
}

cxlpool_status_t cxlpool_probe(const char *path, cxlpool_info_t *info)
{
    const cxlpool_backend_ops_t *ops;
    cxlpool_backend_t kind;
    cxlpool_status_t status;
    uint64_t size, align;
    const char *given = path;
    cxlpool_sb_t sb;
    int fd;

    /* emulate-nc: the superblock is in the pool file behind the prefix */
    if (cxlpool_emu_strip(path) != NULL) {
        path = cxlpool_emu_strip(path);
    }

    ops    = cxlpool_pick_backend(path, &kind);
    status = ops->open(path, 1, &fd, &size, &align);
    if (status != CXLPOOL_OK) {
        return status;
    }

    status = cxlpool_read_sb(path, fd, kind, size, align, &sb);
    if ((status == CXLPOOL_OK) && (info != NULL)) {
        memset(info, 0, sizeof(*info));
        info->page_size = cxlpool_store_page_size(kind, fd, align,
                                                  info->page_source,
                                                  sizeof(info->page_source));
        memcpy(info->uuid, sb.uuid, sizeof(info->uuid));
        info->size          = sb.size;
        info->version_major = sb.version_major;
        info->version_minor = sb.version_minor;
        info->create_ns     = sb.create_ns;
        info->heap_offset   = sb.heap_offset;
        info->backend       = kind;
        info->coherence     = (cxl_coh_mode_t)sb.coherence;
        info->map_align     = align;
        info->nr_hosts      = cxlpool_sb_nr_hosts(&sb);
        info->host_index    = CXLPOOL_HOST_INDEX_NONE; /* no process here */
        snprintf(info->path, sizeof(info->path), "%s", path);
        if (given != path) {
            info->backend   = CXLPOOL_BACKEND_EMULATE_NC;
            info->coherence = CXL_COH_SW;
        }
    }
    close(fd);
    return status;
}

/*
 * Map at an address aligned to max(device alignment, 2 MiB), so that heap
 * offsets aligned to 2 MiB are also aligned virtual addresses.
 */
cxlpool_status_t cxlpool_map_fd(cxlpool_t *pool, int fd, int prot,
                                uint8_t **addr_p)
{
    uint64_t align = (pool->map_align > CXLPOOL_HEAP_ALIGN) ?
                     pool->map_align : CXLPOOL_HEAP_ALIGN;
    uint8_t *resv, *addr;
    void *map = MAP_FAILED;
    uint64_t head;

    resv = mmap(NULL, pool->size + align, PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (resv == MAP_FAILED) {
        return cxlpool_error_errno(errno, pool->path, "reserve address space");
    }

    addr = (uint8_t*)(((uintptr_t)resv + align - 1) & ~(uintptr_t)(align - 1));
    head = addr - resv;

    if (pool->backend == CXLPOOL_BACKEND_DEVDAX) {
        map = mmap(addr, pool->size, prot,
                   MAP_SHARED_VALIDATE | MAP_SYNC | MAP_FIXED, fd, 0);
    }
    if (map == MAP_FAILED) {
        map = mmap(addr, pool->size, prot, MAP_SHARED | MAP_FIXED, fd, 0);
    }
    if (map == MAP_FAILED) {
        int err = errno;
        munmap(resv, pool->size + align);
        return cxlpool_error_errno(err, pool->path, "mmap");
    }

    if (pool->backend != CXLPOOL_BACKEND_DEVDAX) {
        /* a tmpfs mounted huge=advise backs it with 2 MiB pages only when
         * asked; elsewhere this is a no-op (pool_pages.c) */
        (void)madvise(map, pool->size, MADV_HUGEPAGE);
    }
    if (head > 0) {
        munmap(resv, head);
    }
    if (align - head > 0) {
        munmap(addr + pool->size, align - head);
    }

    *addr_p = map;
    return CXLPOOL_OK;
}

static cxlpool_status_t cxlpool_map(cxlpool_t *pool)
{
    return cxlpool_map_fd(pool, pool->fd,
                          pool->rdonly ? PROT_READ : (PROT_READ | PROT_WRITE),
                          &pool->base);
}

static cxlpool_status_t cxlpool_create_store(cxlpool_t *pool,
                                             const cxlpool_params_t *params)
{
    cxlpool_params_t create_params = *params;

    if (create_params.size == 0) {
        create_params.size = cxlpool_default_size();
    }
    if ((create_params.nr_hosts == 0) &&
        (pool->backend == CXLPOOL_BACKEND_EMULATE_NC)) {
        /* an emulated non-coherent pool is a software-coherent one */
        create_params.nr_hosts = CXLPOOL_DEFAULT_SW_HOSTS;
    }
    if ((pool->backend != CXLPOOL_BACKEND_DEVDAX) &&
        (create_params.size % CXLPOOL_HEAP_ALIGN)) {
        return cxlpool_error(CXLPOOL_ERR_INVAL,
                             "%s: pool size %" PRIu64 " is not a multiple of "
                             "2 MiB", pool->path, create_params.size);
    }
    return pool->ops->create(&create_params, pool->path, cxlpool_format);
}

static cxlpool_status_t cxlpool_open_store(cxlpool_t *pool,
                                           const cxlpool_params_t *params)
{
    int want_create = !!(params->flags & CXLPOOL_CREATE);
    int excl        = want_create && (params->flags & CXLPOOL_EXCL);
    int created     = 0;
    cxlpool_status_t status;
    uint64_t size;

    /* A device always exists: "create" formats it in place. */
    if (want_create && (pool->backend == CXLPOOL_BACKEND_DEVDAX)) {
        status = cxlpool_create_store(pool, params);
        if (status != CXLPOOL_OK) {
            return status;
        }
        created = 1;
    }

    for (;;) {
        status = pool->ops->open(pool->path, pool->rdonly, &pool->fd, &size,
                                 &pool->map_align);
        if (status == CXLPOOL_OK) {
            if (excl && !created) {
                close(pool->fd);
                pool->fd = -1;
                return cxlpool_error_errno(EEXIST, pool->path, "create");
            }
            break;
        }
        if ((status != CXLPOOL_ERR_NOENT) || !want_create || created) {
            return status;
        }

        status = cxlpool_create_store(pool, params);
        if (status == CXLPOOL_OK) {
            created = 1;
        } else if ((status != CXLPOOL_ERR_EXISTS) || excl) {
            return status;
        }
        /* created, or lost the race to another creator: open what is there */
    }

    pool->page_size = cxlpool_store_page_size(pool->backend, pool->fd,
                                              pool->map_align,
                                              pool->page_source,
                                              sizeof(pool->page_source));

    /* a peer that may map the pool may write its superblock at any time:
     * the layout is taken from this validated copy only */
    status = cxlpool_read_sb(pool->path, pool->fd, pool->backend, size,
                             pool->map_align, &pool->sb_copy);
    if (status != CXLPOOL_OK) {
        return status;
    }

    pool->size = pool->sb_copy.size;
    return CXLPOOL_OK;
}

cxlpool_status_t cxlpool_open(const cxlpool_params_t *params,
                              cxlpool_t **pool_p)
{
    char defpath[64];
    cxlpool_params_t emu_params;
    cxlpool_status_t status;
    const char *path, *emu_path;
    cxlpool_t *pool;

    path = params->path ? params->path :
           cxlpool_default_path(defpath, sizeof(defpath));

    /* emulate-nc:PATH: the pool file PATH, always software-coherent */
    emu_path = cxlpool_emu_strip(path);
    if (emu_path != NULL) {
        emu_params           = *params;
        emu_params.coherence = CXL_COH_SW;
        params               = &emu_params;
        path                 = emu_path;
    }
    if (strlen(path) >= sizeof(pool->path) - 32) {
        return cxlpool_error(CXLPOOL_ERR_INVAL, "%s: path too long", path);
    }

    pool = calloc(1, sizeof(*pool));
    if (pool == NULL) {
        return cxlpool_error(CXLPOOL_ERR_NO_SPACE, "%s: out of memory", path);
    }

    snprintf(pool->path, sizeof(pool->path), "%s", path);
    pool->fd     = -1;
    pool->coh    = params->coherence;
    pool->nr_hosts   = 1;
    pool->host_index = 0;
    pool->rdonly = !!(params->flags & CXLPOOL_READONLY);
    pool->ops = cxlpool_pick_backend(path, &pool->backend);
    pthread_mutex_init(&pool->hb_mutex, NULL);
    pthread_cond_init(&pool->hb_cond, NULL);

    if (emu_path != NULL) {
        if (pool->backend == CXLPOOL_BACKEND_DEVDAX) {
            status = cxlpool_error(CXLPOOL_ERR_UNSUPPORTED,
                                   "%s: emulate-nc needs a pool file (e.g. "
                                   "under /dev/shm), not a device", path);
            goto err;
        }
        pool->backend = CXLPOOL_BACKEND_EMULATE_NC;
    }

    if (params->numa_node >= 0) {
        /* before anything is created: a bad node must leave nothing behind */
        status = cxlpool_numa_check(pool->path, params->numa_node);
        if (status != CXLPOOL_OK) {
            goto err;
        }
    }

    status = cxlpool_open_store(pool, params);
    if (status != CXLPOOL_OK) {
        goto err;
    }

    /* emulate-nc: pool->base is the emulated host's view of the file */
    status = (pool->backend == CXLPOOL_BACKEND_EMULATE_NC) ?
             cxlpool_emu_open(pool, params) : cxlpool_map(pool);
    if (status != CXLPOOL_OK) {
        goto err;
    }

    pool->sb   = &pool->sb_copy;
    pool->lock = (cxlpool_lock_t*)(pool->base + CXLPOOL_LOCK_OFFSET);
    pool->att  = (cxlpool_attach_rec_t*)(pool->base + pool->sb->attach_offset);
    pool->ext  = (cxlpool_extent_rec_t*)(pool->base + pool->sb->extent_offset);
    cxlpool_partition_init(pool);
    pool->host_id    = cxlpool_host_id();
    pool->lock_token = ((uint64_t)getpid() << 32) |
                       (uint32_t)(pool->host_id ^ (pool->host_id >> 32)) | 1;
    pool->start_time = cxlpool_proc_start_time(getpid());

    if ((params->numa_node >= 0) && !pool->rdonly) {
        status = cxlpool_numa_bind(pool->path, pool->base, pool->size,
                                   params->numa_node);
        if (status != CXLPOOL_OK) {
            goto err;
        }
    }

    /* the partition this process writes; sets pool->lock */
    status = cxlpool_host_resolve(pool, params);
    if (status != CXLPOOL_OK) {
        goto err;
    }

    if (!(params->flags & (CXLPOOL_NO_ATTACH | CXLPOOL_READONLY))) {
        cxlpool_lock(pool);
        cxlpool_recover_locked(pool, NULL, NULL);
        status = cxlpool_attach_claim(pool, params->lease_ms);
        cxlpool_unlock(pool);
        if (status != CXLPOOL_OK) {
            goto err;
        }

        if (!(params->flags & CXLPOOL_NO_HEARTBEAT) &&
            (cxlpool_heartbeat_start(pool) != 0)) {
            status = cxlpool_error(CXLPOOL_ERR_IO,
                                   "%s: cannot start heartbeat thread",
                                   pool->path);
            goto err;
        }
    }

    *pool_p = pool;
    return CXLPOOL_OK;

err:
    cxlpool_close(pool);
    return status;
}

void cxlpool_close(cxlpool_t *pool)
{
    if (pool == NULL) {
        return;
    }

    cxlpool_heartbeat_stop(pool);
    if (pool->token != 0) {
        cxlpool_lock(pool);
        cxlpool_reclaim_token_locked(pool, pool->token);
        cxlpool_attach_release(pool);
        cxlpool_unlock(pool);
    }
    cxlpool_emu_close(pool); /* unmaps its view: pool->base = NULL */
    if (pool->base != NULL) {
        munmap(pool->base, pool->size);
    }
    if (pool->fd >= 0) {
        close(pool->fd);
    }
    pthread_mutex_destroy(&pool->hb_mutex);
    pthread_cond_destroy(&pool->hb_cond);
    free(pool);
}

typedef struct {
    uint32_t live;
} cxlpool_live_count_t;

static void cxlpool_count_live(const cxlpool_attach_info_t *att, void *arg)
{
    ((cxlpool_live_count_t*)arg)->live += !!att->alive;
}

cxlpool_status_t cxlpool_destroy(const char *path, int force)
{
    cxlpool_params_t params;
    cxlpool_live_count_t count = {0};
    const char *emu_path = cxlpool_emu_strip(path);
    cxlpool_status_t status;
    cxlpool_t *pool;
    int devdax;

    /* emulate-nc: memory is the truth; no emulated host is taken for this */
    if (emu_path != NULL) {
        path = emu_path;
    }

    cxlpool_params_init(&params);
    params.path  = path;
    params.flags = CXLPOOL_NO_ATTACH;
    status       = cxlpool_open(&params, &pool);
    if (status != CXLPOOL_OK) {
        return status;
    }

    cxlpool_foreach_attach(pool, cxlpool_count_live, &count);
    if ((count.live > 0) && !force) {
        cxlpool_close(pool);
        return cxlpool_error(CXLPOOL_ERR_BUSY,
                             "%s: %u process(es) still attached; stop them "
                             "first or use --force", path, count.live);
    }

    status = pool->ops->destroy(path, pool->fd, pool->map_align);
    devdax = (pool->backend == CXLPOOL_BACKEND_DEVDAX);
    cxlpool_close(pool);
    if ((status == CXLPOOL_OK) && !devdax) {
        /* views that emulate-nc hosts left behind (any file may have been
         * opened through emulate-nc); live hosts remove theirs on close */
        cxlpool_emu_remove_stale(path);
    }
    return status;
}

void *cxlpool_base(cxlpool_t *pool)
{
    return pool->base;
}

uint64_t cxlpool_size(cxlpool_t *pool)
{
    return pool->size;
}

cxl_coh_mode_t cxlpool_coherence(cxlpool_t *pool)
{
    return pool->coh;
}

uint64_t cxlpool_token(cxlpool_t *pool)
{
    return pool->token;
}

void cxlpool_info(cxlpool_t *pool, cxlpool_info_t *info)
{
    memset(info, 0, sizeof(*info));
    memcpy(info->uuid, pool->sb->uuid, sizeof(info->uuid));
    info->size          = pool->sb->size;
    info->version_major = pool->sb->version_major;
    info->version_minor = pool->sb->version_minor;
    info->create_ns     = pool->sb->create_ns;
    info->heap_offset   = pool->sb->heap_offset;
    info->backend       = pool->backend;
    info->coherence     = pool->coh;
    info->map_align     = pool->map_align;
    info->page_size     = pool->page_size;
    snprintf(info->page_source, sizeof(info->page_source), "%s",
             pool->page_source);
    info->nr_hosts      = pool->nr_hosts;
    info->host_index    = pool->host_index;
    snprintf(info->path, sizeof(info->path), "%s", pool->path);
}

uint32_t cxlpool_nr_hosts(cxlpool_t *pool)
{
    return pool->nr_hosts;
}

uint32_t cxlpool_host_index(cxlpool_t *pool)
{
    return pool->host_index;
}
