/*
 * The last error of this thread (cxl_coll_last_error) and the one debug
 * line per collective (CXL_COLL_LOG).
 */
#include "coll_int.h"

#include <stdarg.h>
#include <stdio.h>

static __thread char cxl_coll_errbuf[512] = "no error";

cxl_coll_status_t cxl_coll_error(cxl_coll_status_t status, const char *fmt, ...)
{
    va_list ap;
    int n;

    n = snprintf(cxl_coll_errbuf, sizeof(cxl_coll_errbuf), "%s: ",
                 cxl_coll_strerror(status));
    if ((n < 0) || ((size_t)n >= sizeof(cxl_coll_errbuf))) {
        return status;
    }
    va_start(ap, fmt);
    vsnprintf(cxl_coll_errbuf + n, sizeof(cxl_coll_errbuf) - n, fmt, ap);
    va_end(ap);
    return status;
}

const char *cxl_coll_last_error(void)
{
    return cxl_coll_errbuf;
}

void cxl_coll_log(const cxl_coll_team_t *team, const char *fmt, ...)
{
    char line[400];
    va_list ap;

    if (!team->cfg.log) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    /* one write: lines of several ranks do not interleave */
    fprintf(stderr, "cxl-coll[rank %d]: %s\n", team->rank, line);
}

const char *cxl_coll_bytes_str(uint64_t bytes, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    unsigned u = 0;

    while ((u + 1 < sizeof(units) / sizeof(units[0])) && (bytes >= 1024) &&
           ((bytes % 1024) == 0)) {
        bytes /= 1024;
        u++;
    }
    snprintf(buf, len, "%llu %s", (unsigned long long)bytes, units[u]);
    return buf;
}
