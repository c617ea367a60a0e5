/*
 * devdax backend: /dev/daxX.Y character devices, found with libdaxctl.
 *
 * A device is only ever used in the mode it is in: a device in system-ram
 * mode is refused, never reconfigured (Linux zeroes memory it onlines).
 * Mappings are MAP_SHARED at the device alignment, MAP_SYNC where accepted.
 */
#include "pool_int.h"

#include <daxctl/libdaxctl.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

cxlpool_status_t cxlpool_devdax_foreach(cxlpool_devdax_cb_t cb, void *arg)
{
    struct daxctl_region *region;
    struct daxctl_ctx *ctx;
    struct daxctl_dev *dev;
    cxlpool_devdax_info_t info;
    int ret;

    ret = daxctl_new(&ctx);
    if (ret < 0) {
        return cxlpool_error(CXLPOOL_ERR_IO, "libdaxctl: daxctl_new: %s",
                             strerror(-ret));
    }

    daxctl_region_foreach(ctx, region) {
        daxctl_dev_foreach(region, dev) {
            struct daxctl_memory *mem = daxctl_dev_get_memory(dev);

            memset(&info, 0, sizeof(info));
            snprintf(info.path, sizeof(info.path), "/dev/%s",
                     daxctl_dev_get_devname(dev));
            info.size        = daxctl_dev_get_size(dev);
            info.align       = daxctl_dev_get_align(dev);
            info.numa_node   = daxctl_dev_get_target_node(dev);
            info.region_id   = daxctl_region_get_id(region);
            info.enabled     = daxctl_dev_is_enabled(dev);
            info.system_ram  = (mem != NULL) &&
                               (daxctl_memory_is_online(mem) > 0);
            cb(&info, arg);
        }
    }

    daxctl_unref(ctx);
    return CXLPOOL_OK;
}

typedef struct {
    const char             *devname;
    cxlpool_devdax_info_t   found;
    int                     hit;
} cxlpool_devdax_find_t;

static void cxlpool_devdax_find_cb(const cxlpool_devdax_info_t *info, void *arg)
{
    cxlpool_devdax_find_t *find = arg;

    if (!strcmp(info->path + strlen("/dev/"), find->devname)) {
        find->found = *info;
        find->hit   = 1;
    }
}

/*
 * libdaxctl is asked before the device is opened: a device in system-ram
 * mode keeps its /dev node but is bound to kmem, and open() of it fails
 * with ENXIO, which would hide the reason from the user.
 */
static cxlpool_status_t cxlpool_devdax_open(const char *path, int rdonly,
                                            int *fd_p, uint64_t *size,
                                            uint64_t *align)
{
    char pathcopy[256];
    cxlpool_devdax_find_t find;
    cxlpool_status_t status;
    struct stat st;
    int fd;

    snprintf(pathcopy, sizeof(pathcopy), "%s", path);
    memset(&find, 0, sizeof(find));
    find.devname = basename(pathcopy);
    status = cxlpool_devdax_foreach(cxlpool_devdax_find_cb, &find);
    if (status != CXLPOOL_OK) {
        return status;
    }

    if (find.hit && find.found.system_ram) {
        return cxlpool_error(CXLPOOL_ERR_UNSUPPORTED,
                             "%s: device is in system-ram mode; ucx-cxl never "
                             "switches modes, reconfigure it yourself with "
                             "'daxctl reconfigure-device --mode=devdax'", path);
    }

    fd = open(path, (rdonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
    if (fd < 0) {
        return cxlpool_error_errno(errno, path, "open");
    }

    if ((fstat(fd, &st) < 0) || !S_ISCHR(st.st_mode)) {
        close(fd);
        return cxlpool_error(CXLPOOL_ERR_INVAL,
                             "%s: not a devdax character device", path);
    }

    if (!find.hit) {
        close(fd);
        return cxlpool_error(CXLPOOL_ERR_INVAL,
                             "%s: libdaxctl does not know this device; is it "
                             "a devdax device?", path);
    }

    *size  = find.found.size;
    *align = find.found.align ? find.found.align : CXLPOOL_HEAP_ALIGN;
    *fd_p  = fd;
    return CXLPOOL_OK;
}

/* A device exists already: format in place under an exclusive flock. */
static cxlpool_status_t
cxlpool_devdax_create(const cxlpool_params_t *params, const char *path,
                      cxlpool_status_t (*fmt)(void*, uint64_t,
                                              const cxlpool_params_t*))
{
    cxlpool_params_t p = *params;
    cxlpool_status_t status;
    uint64_t size, align;
    void *base;
    int fd;

    status = cxlpool_devdax_open(path, 0, &fd, &size, &align);
    if (status != CXLPOOL_OK) {
        return status;
    }

    if (flock(fd, LOCK_EX) < 0) {
        status = cxlpool_error_errno(errno, path, "flock");
        goto out;
    }

    base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        status = cxlpool_error_errno(errno, path, "mmap");
        goto out;
    }

    if ((((cxlpool_sb_t*)base)->magic == CXLPOOL_MAGIC) &&
        !(params->flags & CXLPOOL_FORCE)) {
        status = cxlpool_error(CXLPOOL_ERR_EXISTS,
                               "%s: device already holds a ucx-cxl pool; it "
                               "is never reformatted implicitly (use "
                               "'cxlpool destroy %s' or create --force)",
                               path, path);
    } else {
        p.size = size;  /* a device pool always spans the whole device */
        status = fmt(base, size, &p);
    }
    munmap(base, size);

out:
    close(fd);
    return status;
}

static cxlpool_status_t cxlpool_devdax_destroy(const char *path, int fd,
                                               uint64_t map_align)
{
    uint64_t len = cxlpool_devdax_map_len(map_align);
    cxlpool_sb_t *sb;

    sb = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (sb == MAP_FAILED) {
        return cxlpool_error_errno(errno, path, "mmap");
    }

    sb->magic = 0;
    cxl_coh_publish(CXL_COH_SW, sb, sizeof(*sb));
    munmap(sb, len);
    return CXLPOOL_OK;
}

const cxlpool_backend_ops_t cxlpool_backend_devdax_ops = {
    .name    = "devdax",
    .open    = cxlpool_devdax_open,
    .create  = cxlpool_devdax_create,
    .destroy = cxlpool_devdax_destroy
};
