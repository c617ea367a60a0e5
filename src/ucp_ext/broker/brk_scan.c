/*
 * brk_scan(): pick the format, run its scanner over each path in the
 * order given, and finish the desc (bytes, fingerprint).  Also the helpers
 * the scanners share and the names of formats and policies.
 */
#include "brk_scan_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int brk_scan_err(brk_scan_ctx_t *ctx, const char *fmt, ...)
{
    va_list ap;
    char *p;

    if ((ctx->err == NULL) || (ctx->errlen == 0)) {
        return -1;
    }
    va_start(ap, fmt);
    vsnprintf(ctx->err, ctx->errlen, fmt, ap);
    va_end(ap);
    /* one line, whatever the path holds */
    for (p = ctx->err; *p != '\0'; ++p) {
        if ((unsigned char)*p < 0x20) {
            *p = '?';
        }
    }
    return -1;
}

int brk_scan_open(brk_scan_ctx_t *ctx, const char *path, struct stat *st)
{
    int fd;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return brk_scan_err(ctx, "%s: cannot open: %s", path,
                            strerror(errno));
    }
    if (fstat(fd, st) != 0) {
        brk_scan_err(ctx, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st->st_mode)) {
        brk_scan_err(ctx, "%s: %s", path, S_ISDIR(st->st_mode) ?
                     "is a directory (only the files format walks "
                     "directories)" : "not a regular file");
        close(fd);
        return -1;
    }
    return fd;
}

int brk_scan_pread(brk_scan_ctx_t *ctx, int fd, const char *path,
                   void *buf, size_t len, uint64_t off)
{
    char *p = buf;
    ssize_t n;

    while (len > 0) {
        n = pread(fd, p, len, (off_t)off);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return brk_scan_err(ctx, "%s: read error at offset %llu: %s",
                                path, (unsigned long long)off,
                                strerror(errno));
        }
        if (n == 0) {
            return brk_scan_err(ctx, "%s: file shrank while scanning "
                                "(EOF at offset %llu)", path,
                                (unsigned long long)off);
        }
        p   += n;
        off += (uint64_t)n;
        len -= (size_t)n;
    }
    return 0;
}

static int brk_scan_has_ext(const char *path, const char *ext)
{
    size_t n = strlen(path), e = strlen(ext);

    return (n > e) && (strcmp(path + n - e, ext) == 0);
}

/* AUTO: NPY if every path ends in .npy, TAR if every one in .tar. */
static brk_format_t brk_scan_detect(const char *const *paths,
                                    unsigned npaths)
{
    int npy = 1, tar = 1;
    unsigned i;

    for (i = 0; i < npaths; ++i) {
        npy = npy && brk_scan_has_ext(paths[i], ".npy");
        tar = tar && brk_scan_has_ext(paths[i], ".tar");
    }
    return npy ? BRK_FMT_NPY : tar ? BRK_FMT_TAR : BRK_FMT_FILES;
}

int brk_scan(const char *const *paths, unsigned npaths,
             const brk_scan_opts_t *opts, brk_desc_t *desc,
             char *err, size_t errlen)
{
    static const brk_scan_opts_t defaults = { BRK_FMT_AUTO, 0, 0 };
    brk_scan_ctx_t ctx = { desc, err, errlen };
    int (*scan)(brk_scan_ctx_t*, const char*);
    unsigned i;

    memset(desc, 0, sizeof(*desc));
    if ((err != NULL) && (errlen > 0)) {
        err[0] = '\0';
    }
    if (opts == NULL) {
        opts = &defaults;
    }
    if ((paths == NULL) || (npaths == 0)) {
        return brk_scan_err(&ctx, "no paths to scan");
    }
    for (i = 0; i < npaths; ++i) {
        if ((paths[i] == NULL) || (paths[i][0] == '\0')) {
            return brk_scan_err(&ctx, "path %u of %u is empty", i + 1,
                                npaths);
        }
    }

    desc->format      = (opts->format == BRK_FMT_AUTO) ?
                        brk_scan_detect(paths, npaths) : opts->format;
    desc->chunk_size  = (opts->chunk_size == 0) ? BRK_DEFAULT_CHUNK_SIZE :
                        opts->chunk_size;
    desc->record_size = opts->record_size;
    switch (desc->format) {
    case BRK_FMT_FILES: scan = brk_scan_files; break;
    case BRK_FMT_NPY:   scan = brk_scan_npy;   break;
    case BRK_FMT_TAR:   scan = brk_scan_tar;   break;
    case BRK_FMT_RAW:
        if (desc->record_size == 0) {
            brk_scan_err(&ctx, "%s: the raw format needs a record size "
                         "(bytes per record, > 0)", paths[0]);
            goto err;
        }
        scan = brk_scan_raw;
        break;
    default:
        brk_scan_err(&ctx, "%s: unknown format %d", paths[0],
                     (int)desc->format);
        goto err;
    }

    for (i = 0; i < npaths; ++i) {
        if (scan(&ctx, paths[i]) != 0) {
            goto err;
        }
    }
    if (desc->nsamples == 0) {
        if (npaths == 1) {
            brk_scan_err(&ctx, "no samples in %s (format %s)", paths[0],
                         brk_format_name(desc->format));
        } else {
            brk_scan_err(&ctx, "no samples in %s and the %u other paths "
                         "(format %s)", paths[0], npaths - 1,
                         brk_format_name(desc->format));
        }
        goto err;
    }
    desc->fingerprint = brk_desc_fingerprint(desc);
    return 0;

err:
    brk_desc_free(desc);
    return -1;
}

static const char *const brk_format_names[BRK_FMT_LAST] = {
    [BRK_FMT_AUTO]  = "auto",
    [BRK_FMT_FILES] = "files",
    [BRK_FMT_NPY]   = "npy",
    [BRK_FMT_TAR]   = "tar",
    [BRK_FMT_RAW]   = "raw"
};

static const char *const brk_policy_names[BRK_POLICY_LAST] = {
    [BRK_POLICY_PIN]  = "pin",
    [BRK_POLICY_LRU]  = "lru",
    [BRK_POLICY_PLAN] = "plan"
};

const char *brk_format_name(brk_format_t format)
{
    return ((unsigned)format < BRK_FMT_LAST) ? brk_format_names[format] :
           "unknown";
}

int brk_format_parse(const char *name, brk_format_t *format)
{
    unsigned i;

    for (i = 0; (name != NULL) && (i < BRK_FMT_LAST); ++i) {
        if (strcmp(name, brk_format_names[i]) == 0) {
            *format = (brk_format_t)i;
            return 0;
        }
    }
    return -1;
}

const char *brk_policy_name(brk_policy_t policy)
{
    return ((unsigned)policy < BRK_POLICY_LAST) ? brk_policy_names[policy] :
           "unknown";
}

int brk_policy_parse(const char *name, brk_policy_t *policy)
{
    unsigned i;

    for (i = 0; (name != NULL) && (i < BRK_POLICY_LAST); ++i) {
        if (strcmp(name, brk_policy_names[i]) == 0) {
            *policy = (brk_policy_t)i;
            return 0;
        }
    }
    return -1;
}
