/*
 * File backend: the emulated default (a file under /dev/shm or hugetlbfs)
 * and any file path, e.g. on a DAX filesystem.
 *
 * A new pool is built in a private temporary file next to the target and
 * published with link(2), which fails if the target exists.  So racing
 * creators produce exactly one format, and nobody ever sees a pool that is
 * half formatted.
 */
#include "pool_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/statvfs.h>
#include <inttypes.h>
#include <unistd.h>

#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC 0x958458f6
#endif

static cxlpool_status_t cxlpool_file_open(const char *path, int rdonly,
                                          int *fd_p, uint64_t *size,
                                          uint64_t *align)
{
    struct statfs sfs;
    struct stat st;
    int fd;

    fd = open(path, (rdonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
    if (fd < 0) {
        return cxlpool_error_errno(errno, path, "open");
    }

    if (fstat(fd, &st) < 0) {
        close(fd);
        return cxlpool_error_errno(errno, path, "fstat");
    }

    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return cxlpool_error(CXLPOOL_ERR_INVAL,
                             "%s: not a regular file or devdax device", path);
    }

    *align = sysconf(_SC_PAGESIZE);
    if ((fstatfs(fd, &sfs) == 0) && (sfs.f_type == HUGETLBFS_MAGIC)) {
        *align = sfs.f_bsize;
    }

    *size = st.st_size;
    *fd_p = fd;
    return CXLPOOL_OK;
}

/* A sparse file larger than its filesystem could never be backed. */
static cxlpool_status_t cxlpool_file_check_space(const char *path, int fd,
                                                 uint64_t size)
{
    struct statvfs vfs;
    uint64_t total;

    if (fstatvfs(fd, &vfs) < 0) {
        return cxlpool_error_errno(errno, path, "statvfs");
    }
    total = (uint64_t)vfs.f_blocks * vfs.f_frsize;
    if ((total != 0) && (size > total)) {
        return cxlpool_error(CXLPOOL_ERR_NO_SPACE,
                             "%s: pool size %" PRIu64 " is larger than its "
                             "filesystem (%" PRIu64 " bytes); choose a smaller "
                             "--size or a larger filesystem", path, size,
                             total);
    }
    return CXLPOOL_OK;
}

static cxlpool_status_t
cxlpool_file_create(const cxlpool_params_t *params, const char *path,
                    cxlpool_status_t (*fmt)(void*, uint64_t,
                                            const cxlpool_params_t*))
{
    mode_t mode = (params->flags & CXLPOOL_GROUP) ? 0660 : 0600;
    cxlpool_status_t status;
    char tmp[300];
    void *base;
    int fd, ret;

    ret = snprintf(tmp, sizeof(tmp), "%s.tmp.%d.%lx", path, (int)getpid(),
                   (unsigned long)random());
    if (ret >= (int)sizeof(tmp)) {
        return cxlpool_error(CXLPOOL_ERR_INVAL, "%s: path too long", path);
    }

    fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) {
        return cxlpool_error_errno(errno, path, "create");
    }

    /* umask must not silently take away group access that was asked for */
    if (fchmod(fd, mode) < 0) {
        status = cxlpool_error_errno(errno, path, "fchmod");
        goto err_unlink;
    }

    status = cxlpool_file_check_space(path, fd, params->size);
    if (status != CXLPOOL_OK) {
        goto err_unlink;
    }

    if (ftruncate(fd, (off_t)params->size) < 0) {
        status = cxlpool_error_errno(errno, path, "ftruncate");
        goto err_unlink;
    }

    base = mmap(NULL, params->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        status = cxlpool_error_errno(errno, path, "mmap");
        goto err_unlink;
    }

    /* policy first: the format is the first touch of the metadata pages */
    status = (params->numa_node >= 0) ?
             cxlpool_numa_bind(path, base, params->size, params->numa_node) :
             CXLPOOL_OK;
    if (status == CXLPOOL_OK) {
        status = fmt(base, params->size, params);
    }
    if (status == CXLPOOL_OK) {
        if (msync(base, CXLPOOL_SB_SIZE, MS_SYNC) < 0) {
            status = cxlpool_error_errno(errno, path, "msync");
        }
    }
    munmap(base, params->size);
    if (status != CXLPOOL_OK) {
        goto err_unlink;
    }

    if (link(tmp, path) < 0) {
        status = cxlpool_error_errno(errno, path, "link");
        goto err_unlink;
    }

    unlink(tmp);
    close(fd);
    return CXLPOOL_OK;

err_unlink:
    unlink(tmp);
    close(fd);
    return status;
}

static cxlpool_status_t cxlpool_file_destroy(const char *path, int fd,
                                             uint64_t map_align)
{
    (void)fd;
    (void)map_align;
    if (unlink(path) == 0) {
        return CXLPOOL_OK;
    }
    if ((errno == EPERM) || (errno == EACCES)) {
        return cxlpool_error(CXLPOOL_ERR_PERM,
                             "%s: permission denied (unlink: %s); only the "
                             "pool file's owner (or root) can destroy it",
                             path, strerror(errno));
    }
    return cxlpool_error_errno(errno, path, "unlink");
}

const cxlpool_backend_ops_t cxlpool_backend_file_ops = {
    .name    = "file",
    .open    = cxlpool_file_open,
    .create  = cxlpool_file_create,
    .destroy = cxlpool_file_destroy
};
