/*
 * RAW: files of fixed-size records, one sample per record.  A size that
 * is not a whole number of records means a cut file or a wrong record
 * size; either way the last sample would be wrong, so it is an error.
 */
#include "brk_scan_int.h"

#include <stdio.h>
#include <unistd.h>

int brk_scan_raw(brk_scan_ctx_t *ctx, const char *path)
{
    uint64_t rs = ctx->desc->record_size, size, n, i;
    char info[32];
    struct stat st;
    uint32_t file;
    int fd;

    if (rs == 0) {
        return brk_scan_err(ctx, "%s: the raw format needs a record size "
                            "(bytes per record, > 0)", path);
    }
    fd = brk_scan_open(ctx, path, &st);
    if (fd < 0) {
        return -1;
    }
    close(fd);
    size = (uint64_t)st.st_size;
    if ((size % rs) != 0) {
        return brk_scan_err(ctx, "%s: size %llu is not a multiple of the "
                            "record size %llu (truncated?)", path,
                            (unsigned long long)size, (unsigned long long)rs);
    }
    snprintf(info, sizeof(info), "record=%llu", (unsigned long long)rs);
    if (brk_desc_add_file(ctx, path, &st, info, &file) != 0) {
        return -1;
    }
    n = size / rs;
    for (i = 0; i < n; ++i) {
        if (brk_desc_add_sample(ctx, file, i * rs, rs) != 0) {
            return -1;
        }
    }
    return 0;
}
