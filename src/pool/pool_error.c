/*
 * Error reporting: a status code plus a per-thread message that names the
 * pool and tells the user what to do.
 */
#include "pool_int.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static __thread char cxlpool_errbuf[512];

static const char *cxlpool_status_names[CXLPOOL_ERR_LAST] = {
    [CXLPOOL_OK]              = "success",
    [CXLPOOL_ERR_INVAL]       = "invalid argument",
    [CXLPOOL_ERR_NOENT]       = "no such pool",
    [CXLPOOL_ERR_EXISTS]      = "pool already exists",
    [CXLPOOL_ERR_PERM]        = "permission denied",
    [CXLPOOL_ERR_BAD_MAGIC]   = "not a ucx-cxl pool (bad magic)",
    [CXLPOOL_ERR_VERSION]     = "unsupported pool layout version",
    [CXLPOOL_ERR_CHECKSUM]    = "superblock checksum mismatch",
    [CXLPOOL_ERR_TRUNCATED]   = "pool backing store is truncated",
    [CXLPOOL_ERR_RESIZED]     = "pool backing store was resized",
    [CXLPOOL_ERR_CORRUPT]     = "pool metadata is corrupt",
    [CXLPOOL_ERR_NO_SPACE]    = "no space left in pool",
    [CXLPOOL_ERR_NO_SLOT]     = "pool table full",
    [CXLPOOL_ERR_NOT_FOUND]   = "not found",
    [CXLPOOL_ERR_BUSY]        = "pool is in use",
    [CXLPOOL_ERR_IO]          = "I/O error",
    [CXLPOOL_ERR_UNSUPPORTED] = "not supported",
    [CXLPOOL_ERR_STALE]       = "stale extent reference",
};

const char *cxlpool_strerror(cxlpool_status_t status)
{
    if ((unsigned)status >= CXLPOOL_ERR_LAST) {
        return "unknown error";
    }
    return cxlpool_status_names[status];
}

const char *cxlpool_last_error(void)
{
    return cxlpool_errbuf;
}

cxlpool_status_t cxlpool_error(cxlpool_status_t status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(cxlpool_errbuf, sizeof(cxlpool_errbuf), fmt, ap);
    va_end(ap);
    return status;
}

cxlpool_status_t cxlpool_error_errno(int err, const char *path, const char *what)
{
    switch (err) {
    case ENOENT:
        return cxlpool_error(CXLPOOL_ERR_NOENT,
                             "%s: no such pool (%s: %s); create it with "
                             "'cxlpool create %s --size SIZE'",
                             path, what, strerror(err), path);
    case EACCES:
    case EPERM:
    case EROFS:
        return cxlpool_error(CXLPOOL_ERR_PERM,
                             "%s: permission denied (%s: %s); ask the pool's "
                             "owner to share it (cxlpool create --group) or "
                             "use a pool of your own",
                             path, what, strerror(err));
    case EEXIST:
        return cxlpool_error(CXLPOOL_ERR_EXISTS,
                             "%s: already exists; an existing pool is never "
                             "reformatted, remove it first with "
                             "'cxlpool destroy %s'", path, path);
    case ENOSPC:
    case ENOMEM:
        return cxlpool_error(CXLPOOL_ERR_NO_SPACE,
                             "%s: %s: %s; choose a smaller --size or free "
                             "space on the backing filesystem",
                             path, what, strerror(err));
    default:
        return cxlpool_error(CXLPOOL_ERR_IO, "%s: %s: %s", path, what,
                             strerror(err));
    }
}

void cxlpool_fault_point(const char *point)
{
    const char *want = getenv("CXLPOOL_TEST_CRASH_AT");

    if ((want != NULL) && !strcmp(want, point)) {
        raise(SIGKILL);
    }
}
