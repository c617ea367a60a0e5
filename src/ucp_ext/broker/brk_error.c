/*
 * Client errors: a status and, per thread, the full text of the last one.
 */
#include "brk_client_int.h"

#include <stdio.h>
#include <time.h>

static __thread char brk_last_err[BRK_ERRMSG_MAX];

static const char *const brk_status_names[] = {
    [CXL_BROKER_OK]                = "success",
    [CXL_BROKER_ERR_INVAL]         = "invalid argument",
    [CXL_BROKER_ERR_NOT_FOUND]     = "not found",
    [CXL_BROKER_ERR_CONNECT]       = "cannot reach the broker",
    [CXL_BROKER_ERR_DISCONNECTED]  = "the broker went away",
    [CXL_BROKER_ERR_TIMEOUT]       = "timed out",
    [CXL_BROKER_ERR_NO_SPACE]      = "no space in the cache",
    [CXL_BROKER_ERR_IO]            = "file error",
    [CXL_BROKER_ERR_CORRUPT]       = "check failed",
    [CXL_BROKER_ERR_STALE]         = "chunk changed during the read",
    [CXL_BROKER_ERR_UNSUPPORTED]   = "not supported",
    [CXL_BROKER_ERR_UCX]           = "UCX error",
    [CXL_BROKER_ERR_NO_MEMORY]     = "out of memory",
    [CXL_BROKER_ERR_EXISTS]        = "exists",
    [CXL_BROKER_ERR_BUSY]          = "busy",
};

const char *cxl_broker_strerror(cxl_broker_status_t status)
{
    return ((unsigned)status < CXL_BROKER_ERR_LAST) ? brk_status_names[status]
                                                    : "unknown status";
}

const char *cxl_broker_last_error(void)
{
    return brk_last_err;
}

cxl_broker_status_t brk_cerr(cxl_broker_status_t status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(brk_last_err, sizeof(brk_last_err), fmt, ap);
    va_end(ap);
    return status;
}

double brk_cnow(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
