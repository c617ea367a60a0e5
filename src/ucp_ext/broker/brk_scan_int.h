/*
 * Private to the scanners: the builder every format scanner feeds, and
 * the helpers they share.  A scanner adds its files and, in order, their
 * samples; the builder chunks as samples arrive (brk_scan.h's rules), so
 * no second pass is needed.
 */
#ifndef BRK_SCAN_INT_H
#define BRK_SCAN_INT_H

#include "brk_scan.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

typedef struct {
    brk_desc_t *desc;
    char       *err;
    size_t      errlen;
} brk_scan_ctx_t;

/* Format one error line into ctx->err; returns -1 for `return` chaining. */
int brk_scan_err(brk_scan_ctx_t *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Open path for reading and stat it: returns the fd, or -1 with the error
 * (missing, unreadable, not a regular file) in ctx.
 */
int brk_scan_open(brk_scan_ctx_t *ctx, const char *path, struct stat *st);

/* Read exactly len bytes at off: 0, or -1 with "PATH: ..." in ctx. */
int brk_scan_pread(brk_scan_ctx_t *ctx, int fd, const char *path,
                   void *buf, size_t len, uint64_t off);

int64_t brk_scan_mtime_ns(const struct stat *st);

/* Add a file (info may be NULL); its index in *file.  0, or -1 (ctx). */
int brk_desc_add_file(brk_scan_ctx_t *ctx, const char *path,
                      const struct stat *st, const char *info,
                      uint32_t *file);

/* Append the sample [file_off, file_off + len) of file: 0, or -1 (ctx). */
int brk_desc_add_sample(brk_scan_ctx_t *ctx, uint32_t file,
                        uint64_t file_off, uint64_t len);

/* Of format, options, and each file's path, size and mtime. */
uint64_t brk_desc_fingerprint(const brk_desc_t *d);

/* One path of each format; path is as the user gave it. */
int brk_scan_files(brk_scan_ctx_t *ctx, const char *path);
int brk_scan_npy(brk_scan_ctx_t *ctx, const char *path);
int brk_scan_tar(brk_scan_ctx_t *ctx, const char *path);
int brk_scan_raw(brk_scan_ctx_t *ctx, const char *path);

#endif
