/*
 * emulate-nc backend: the pool file PATH is the CXL memory; emulated host k
 * sees it only through its view PATH.host<k>, a tmpfs file that all
 * processes of host k map MAP_SHARED (they share one "cache", so they are
 * coherent among themselves), filled from memory when the host's first
 * process arrives.  After that only cxl_coh_writeback() (view -> memory)
 * and cxl_coh_invalidate() (memory -> view) move data.
 *
 * Files per emulated host k:
 *   PATH.host<k>       the view, its clean copy, then its stripe locks
 *                      (cxl_coh_emu_locks_init(): the host's processes
 *                      serialise their syncs of a line there).  Every live
 *                      process of host k holds an flock on it: LOCK_SH
 *                      when the index was given, LOCK_EX when it was chosen
 *                      automatically (then the process is a host of its
 *                      own).  A view nobody holds is stale: the next opener
 *                      fills it again.
 *   PATH.host<k>.lock  init lock, held LOCK_EX only while a process joins
 *                      or leaves host k, so racing openers see one fill and
 *                      the last closer can remove both files.
 */
#define _GNU_SOURCE /* SEEK_DATA, SEEK_HOLE */
#include "emulate_nc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CXLPOOL_EMU_HOST_ENV "UCX_CXL_HOST_INDEX"

struct cxlpool_emu {
    uint8_t  *mem;       /* the pool file, mapped a second time */
    uint8_t  *view;      /* this host's view; pool->base */
    uint8_t  *clean;     /* the view as last synchronised (second part of
                            the view file) */
    void     *locks;     /* the stripe locks (third part) */
    uint64_t  len;
    uint64_t  locks_len; /* bytes mapped at locks, whole pages */
    int       view_fd;   /* carries the liveness flock */
    int       registered;
    char      view_path[sizeof(((cxlpool_t*)0)->path) + 16];
    char      lock_path[sizeof(((cxlpool_t*)0)->path) + 16];
};

const char *cxlpool_emu_strip(const char *path)
{
    size_t n = strlen(CXLPOOL_EMULATE_NC_PREFIX);

    if ((path == NULL) || strncmp(path, CXLPOOL_EMULATE_NC_PREFIX, n)) {
        return NULL;
    }
    return path + n;
}

static int cxlpool_emu_paths(struct cxlpool_emu *emu, const char *path,
                             uint32_t k)
{
    int n1 = snprintf(emu->view_path, sizeof(emu->view_path), "%s.host%u",
                      path, k);
    int n2 = snprintf(emu->lock_path, sizeof(emu->lock_path), "%s.host%u.lock",
                      path, k);

    return ((n1 < 0) || (n1 >= (int)sizeof(emu->view_path)) ||
            (n2 < 0) || (n2 >= (int)sizeof(emu->lock_path))) ? -1 : 0;
}

/* The stripe locks' bytes, in whole pages (they are mapped on their own). */
static uint64_t cxlpool_emu_locks_len(uint64_t len)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);

    return (cxl_coh_emu_locks_size(len) + page - 1) / page * page;
}

/* view, clean copy, stripe locks */
static uint64_t cxlpool_emu_file_size(const struct cxlpool_emu *emu)
{
    return 2 * emu->len + emu->locks_len;
}

/*
 * Take host k's init lock.  The last closer unlinks the lock file while it
 * holds it, so a lock taken on a file no longer under that name protects
 * nothing: retry on the current one.  Returns 0 or an errno (no message:
 * close uses it too and must not clobber the caller's error).
 */
static int cxlpool_emu_lock_init(const char *lock_path, mode_t mode, int *fd_p)
{
    struct stat st_fd, st_path;
    int fd, err;

    for (;;) {
        fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, mode);
        if (fd < 0) {
            return errno;
        }
        if (flock(fd, LOCK_EX) < 0) {
            err = errno;
            close(fd);
            if (err == EINTR) {
                continue;
            }
            return err;
        }
        if (fstat(fd, &st_fd) < 0) {
            err = errno;
            close(fd);
            return err;
        }
        if (stat(lock_path, &st_path) == 0) {
            if ((st_fd.st_dev == st_path.st_dev) &&
                (st_fd.st_ino == st_path.st_ino)) {
                *fd_p = fd;
                return 0;
            }
        } else if (errno != ENOENT) {
            err = errno;
            close(fd);
            return err;
        }
        close(fd); /* removed or replaced meanwhile */
    }
}

void cxlpool_emu_discard(cxlpool_t *pool, uint64_t offset, uint64_t length)
{
    struct cxlpool_emu *emu = pool->emu;
    const int mode          = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;

    if ((emu == NULL) || (length == 0) || (offset + length > emu->len)) {
        return;
    }
    /* best effort: a filesystem without hole punching keeps the bytes */
    (void)fallocate(pool->fd, mode, (off_t)offset, (off_t)length);
    if (emu->view_fd >= 0) {
        (void)fallocate(emu->view_fd, mode, (off_t)offset, (off_t)length);
        (void)fallocate(emu->view_fd, mode, (off_t)(emu->len + offset),
                        (off_t)length);
    }
}

/*
 * A fresh view holds what memory holds: copy only the parts of the pool
 * file that have data, so that untouched heap stays unallocated in both.
 * The copy is an invalidate of those lines, with the view registered.
 */
static cxlpool_status_t cxlpool_emu_fill(cxlpool_t *pool,
                                         struct cxlpool_emu *emu)
{
    off_t size = (off_t)emu->len;
    off_t data = 0, hole;

    while (data < size) {
        data = lseek(pool->fd, data, SEEK_DATA);
        if (data < 0) {
            if (errno == ENXIO) {
                break; /* no data after this point */
            }
            if (errno != EINVAL) {
                return cxlpool_error_errno(errno, pool->path, "SEEK_DATA");
            }
            data = 0; /* filesystem cannot tell: copy everything */
            hole = size;
        } else {
            hole = lseek(pool->fd, data, SEEK_HOLE);
            if (hole < 0) {
                return cxlpool_error_errno(errno, pool->path, "SEEK_HOLE");
            }
        }
        if (data >= size) {
            break;
        }
        if (hole > size) {
            hole = size;
        }
        cxl_coh_invalidate(CXL_COH_SW, emu->view + data, (size_t)(hole - data));
        data = hole;
    }
    return CXLPOOL_OK;
}

/*
 * Become a process of emulated host k.  Under the init lock: if no process
 * holds the view, it is new or left behind by dead processes; either way
 * it is refilled from memory.  excl (automatic choice) wants the host for
 * itself and gives up with *busy = 1 when anyone holds it.
 */
static cxlpool_status_t cxlpool_emu_join(cxlpool_t *pool,
                                         struct cxlpool_emu *emu, uint32_t k,
                                         int excl, mode_t mode, int *busy)
{
    cxlpool_status_t status = CXLPOOL_OK;
    int fresh = 0, lock_fd = -1, fd, err;
    struct stat st;

    *busy = 0;
    if (cxlpool_emu_paths(emu, pool->path, k) != 0) {
        return cxlpool_error(CXLPOOL_ERR_INVAL, "%s: path too long for the "
                             "emulate-nc view files", pool->path);
    }

    err = cxlpool_emu_lock_init(emu->lock_path, mode, &lock_fd);
    if (err != 0) {
        return cxlpool_error_errno(err, emu->lock_path,
                                   "emulate-nc init lock");
    }

    fd = open(emu->view_path, O_RDWR | O_CREAT | O_CLOEXEC, mode);
    if (fd < 0) {
        status = cxlpool_error_errno(errno, emu->view_path,
                                     "open emulate-nc view");
        goto out_unlock;
    }

    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
        fresh = 1;
    } else if (errno != EWOULDBLOCK) {
        status = cxlpool_error_errno(errno, emu->view_path, "flock");
        goto out_close;
    } else if (excl) {
        *busy = 1;
        goto out_close;
    } else if (flock(fd, LOCK_SH | LOCK_NB) < 0) {
        if (errno == EWOULDBLOCK) {
            status = cxlpool_error(CXLPOOL_ERR_BUSY,
                                   "%s: emulated host %u is held by a process "
                                   "that chose it automatically; an explicit "
                                   "host index cannot share it: pick another "
                                   "index or stop that process",
                                   pool->path, k);
        } else {
            status = cxlpool_error_errno(errno, emu->view_path, "flock");
        }
        goto out_close;
    }

    if (fresh) {
        /* drop whatever a dead host left, then size it like the pool */
        if ((ftruncate(fd, 0) < 0) ||
            (ftruncate(fd, (off_t)cxlpool_emu_file_size(emu)) < 0)) {
            status = cxlpool_error_errno(errno, emu->view_path, "ftruncate");
            goto out_close;
        }
    } else if (fstat(fd, &st) < 0) {
        status = cxlpool_error_errno(errno, emu->view_path, "fstat");
        goto out_close;
    } else if ((uint64_t)st.st_size != cxlpool_emu_file_size(emu)) {
        status = cxlpool_error(CXLPOOL_ERR_CORRUPT,
                               "%s: emulate-nc view has %lld bytes, not the "
                               "%llu a pool of %llu needs (view, clean copy, "
                               "locks); stop the processes of host %u",
                               emu->view_path, (long long)st.st_size,
                               (unsigned long long)cxlpool_emu_file_size(emu),
                               (unsigned long long)emu->len, k);
        goto out_close;
    }

    status = cxlpool_map_fd(pool, fd, PROT_READ | PROT_WRITE, &emu->view);
    if (status != CXLPOOL_OK) {
        goto out_close;
    }

    emu->clean = mmap(NULL, emu->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                      (off_t)emu->len);
    if (emu->clean == MAP_FAILED) {
        emu->clean = NULL;
        status     = cxlpool_error_errno(errno, emu->view_path, "mmap");
        goto out_unmap;
    }

    emu->locks = mmap(NULL, emu->locks_len, PROT_READ | PROT_WRITE,
                      MAP_SHARED, fd, (off_t)(2 * emu->len));
    if (emu->locks == MAP_FAILED) {
        emu->locks = NULL;
        status     = cxlpool_error_errno(errno, emu->view_path, "mmap");
        goto out_unmap;
    }
    /* nobody else maps a fresh view yet: the init lock is held */
    if (fresh && (cxl_coh_emu_locks_init(emu->locks, emu->len) != 0)) {
        status = cxlpool_error(CXLPOOL_ERR_IO, "%s: cannot initialise the "
                               "emulate-nc stripe locks", emu->view_path);
        goto out_unmap;
    }

    if (cxl_coh_emu_register(emu->view, emu->mem, emu->clean, emu->len,
                            emu->locks) != 0) {
        status = cxlpool_error(CXLPOOL_ERR_NO_SLOT,
                               "%s: too many emulate-nc pools open in this "
                               "process", pool->path);
        goto out_unmap;
    }
    emu->registered = 1;

    if (fresh) {
        status = cxlpool_emu_fill(pool, emu);
        if (status != CXLPOOL_OK) {
            goto out_unregister;
        }
        /* not atomic, but every flock of the view is taken under the init
         * lock, which is still held */
        if (!excl && (flock(fd, LOCK_SH) < 0)) {
            status = cxlpool_error_errno(errno, emu->view_path, "flock");
            goto out_unregister;
        }
    }

    emu->view_fd = fd;
    close(lock_fd);
    return CXLPOOL_OK;

out_unregister:
    cxl_coh_emu_unregister(emu->view);
    emu->registered = 0;
out_unmap:
    if (emu->locks != NULL) {
        munmap(emu->locks, emu->locks_len);
        emu->locks = NULL;
    }
    if (emu->clean != NULL) {
        munmap(emu->clean, emu->len);
        emu->clean = NULL;
    }
    munmap(emu->view, emu->len);
    emu->view = NULL;
out_close:
    if (fresh) {
        /* nobody else uses them: a failed first join leaves no files */
        unlink(emu->view_path);
        unlink(emu->lock_path);
    }
    close(fd);
out_unlock:
    close(lock_fd);
    return status;
}

/* params->host_index, else UCX_CXL_HOST_INDEX ("auto" or unset: -1). */
static cxlpool_status_t cxlpool_emu_want(cxlpool_t *pool,
                                         const cxlpool_params_t *params,
                                         int *index, const char **from)
{
    const char *env;

    *from  = "params.host_index";
    *index = params->host_index;
    if (*index < -1) {
        return cxlpool_error(CXLPOOL_ERR_INVAL, "%s: host index %d is "
                             "invalid (-1: auto, else 0..%u)", pool->path,
                             *index, pool->nr_hosts - 1);
    }
    if (*index >= 0) {
        return CXLPOOL_OK;
    }

    env   = getenv(CXLPOOL_EMU_HOST_ENV);
    *from = CXLPOOL_EMU_HOST_ENV;
    if (cxlpool_parse_host_index(env, index) != 0) {
        return cxlpool_error(CXLPOOL_ERR_INVAL,
                             "%s: %s='%s' is not a host index: give a decimal "
                             "number 0..%u or 'auto'", pool->path,
                             CXLPOOL_EMU_HOST_ENV, env, pool->nr_hosts - 1);
    }
    return CXLPOOL_OK;
}

cxlpool_status_t cxlpool_emu_open(cxlpool_t *pool,
                                  const cxlpool_params_t *params)
{
    struct cxlpool_emu *emu;
    cxlpool_status_t status;
    const char *from;
    struct stat st;
    int index, busy;
    mode_t mode;
    uint32_t k;

    emu = calloc(1, sizeof(*emu));
    if (emu == NULL) {
        return cxlpool_error(CXLPOOL_ERR_NO_SPACE, "%s: out of memory",
                             pool->path);
    }
    emu->view_fd   = -1;
    emu->len       = pool->size;
    emu->locks_len = cxlpool_emu_locks_len(emu->len);
    pool->emu      = emu;
    pool->coh      = CXL_COH_SW; /* the emulated pool has no coherence */

    /* views get the pool file's permissions, so group pools stay shared */
    if (fstat(pool->fd, &st) < 0) {
        return cxlpool_error_errno(errno, pool->path, "fstat");
    }
    mode = st.st_mode & 0666;

    emu->mem = mmap(NULL, emu->len,
                    pool->rdonly ? PROT_READ : (PROT_READ | PROT_WRITE),
                    MAP_SHARED, pool->fd, 0);
    if (emu->mem == MAP_FAILED) {
        emu->mem = NULL;
        return cxlpool_error_errno(errno, pool->path, "mmap");
    }

    /* validated already; written once at format, so memory is current */
    pool->nr_hosts = cxlpool_sb_nr_hosts((const cxlpool_sb_t*)emu->mem);

    status = cxlpool_emu_want(pool, params, &index, &from);
    if (status != CXLPOOL_OK) {
        return status;
    }

    if (index >= 0) {
        if ((uint32_t)index >= pool->nr_hosts) {
            return cxlpool_error(CXLPOOL_ERR_INVAL,
                                 "%s: host index %d (from %s) is out of "
                                 "range: the pool has %u host partition(s), "
                                 "0..%u", pool->path, index, from,
                                 pool->nr_hosts, pool->nr_hosts - 1);
        }
        status = cxlpool_emu_join(pool, emu, (uint32_t)index, 0, mode, &busy);
        if (status != CXLPOOL_OK) {
            return status;
        }
        k = (uint32_t)index;
    } else {
        /* every process is a host of its own: the lowest free index */
        for (k = 0; k < pool->nr_hosts; ++k) {
            status = cxlpool_emu_join(pool, emu, k, 1, mode, &busy);
            if (status != CXLPOOL_OK) {
                return status;
            }
            if (!busy) {
                break;
            }
        }
        if (k == pool->nr_hosts) {
            return cxlpool_error(CXLPOOL_ERR_NO_SLOT,
                                 "%s: all %u emulated hosts are in use by "
                                 "other processes; close one, or give "
                                 "processes the same %s to share a host",
                                 pool->path, pool->nr_hosts,
                                 CXLPOOL_EMU_HOST_ENV);
        }
    }

    pool->base       = emu->view;
    pool->host_index = k;
    return CXLPOOL_OK;
}

/* Leave the host; the last process removes the view and the init lock. */
static void cxlpool_emu_leave(struct cxlpool_emu *emu)
{
    int lock_fd;

    /* without the init lock, keep the files: an unheld view is stale for
     * the next opener anyway */
    if (cxlpool_emu_lock_init(emu->lock_path, 0600, &lock_fd) != 0) {
        close(emu->view_fd);
        return;
    }

    if ((flock(emu->view_fd, LOCK_UN) == 0) &&
        (flock(emu->view_fd, LOCK_EX | LOCK_NB) == 0)) {
        unlink(emu->view_path);
        unlink(emu->lock_path);
    }
    close(emu->view_fd);
    close(lock_fd);
}

void cxlpool_emu_close(cxlpool_t *pool)
{
    struct cxlpool_emu *emu = pool->emu;

    if (emu == NULL) {
        return;
    }

    if (emu->registered) {
        cxl_coh_emu_unregister(emu->view);
    }
    if (emu->locks != NULL) {
        munmap(emu->locks, emu->locks_len);
    }
    if (emu->clean != NULL) {
        munmap(emu->clean, emu->len);
    }
    if (emu->view != NULL) {
        munmap(emu->view, emu->len);
        if (pool->base == emu->view) {
            pool->base = NULL;
        }
    }
    if (emu->mem != NULL) {
        munmap(emu->mem, emu->len);
    }
    if (emu->view_fd >= 0) {
        cxlpool_emu_leave(emu);
    }
    free(emu);
    pool->emu = NULL;
}

void cxlpool_emu_remove_stale(const char *path)
{
    struct cxlpool_emu emu;
    int lock_fd, fd;
    uint32_t k;

    for (k = 0; k < CXLPOOL_MAX_HOSTS; ++k) {
        if ((cxlpool_emu_paths(&emu, path, k) != 0) ||
            ((access(emu.view_path, F_OK) != 0) &&
             (access(emu.lock_path, F_OK) != 0))) {
            continue;
        }
        if (cxlpool_emu_lock_init(emu.lock_path, 0600, &lock_fd) != 0) {
            continue;
        }
        fd = open(emu.view_path, O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            unlink(emu.lock_path);
        } else {
            if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
                unlink(emu.view_path);
                unlink(emu.lock_path);
            }
            close(fd);
        }
        close(lock_fd);
    }
}
