/*
 * Harness: the broker's .npy scanner (brk_scan_npy.c) on arbitrary file
 * bytes.  A .npy header is a Python dict literal written by whoever made
 * the dataset; the scanner must accept or refuse it with one error line,
 * and whatever it accepts must produce a sample index that the pool-side
 * checker (brk_meta_check) accepts too, with every segment inside the file.
 */
#include "fuzz_input.h"

#include "brk_scan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void fuzz_check_desc(const brk_desc_t *d, size_t file_size)
{
    char err[256];
    uint64_t i, len = brk_desc_meta_size(d);
    void *blob;

    for (i = 0; i < d->nsegs; i++) {
        if (d->segs[i].file_off > file_size ||
            d->segs[i].len > file_size - d->segs[i].file_off) {
            fprintf(stderr, "segment %lu beyond the file\n", (unsigned long)i);
            abort();
        }
    }
    blob = malloc(len);
    if (blob == NULL) {
        abort();
    }
    brk_desc_write_meta(d, blob);
    if (brk_meta_check(blob, len, err, sizeof(err)) != 0) {
        fprintf(stderr, "scanner output refused by brk_meta_check: %s\n", err);
        abort();
    }
    free(blob);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    brk_scan_opts_t opts = { .format = BRK_FMT_NPY, .chunk_size = 4096 };
    char path[64], err[256];
    const char *paths[1] = { path };
    brk_desc_t desc;
    int fd;

    fd = fuzz_input_memfd(data, size, "x.npy", path, sizeof(path));
    if (brk_scan(paths, 1, &opts, &desc, err, sizeof(err)) == 0) {
        fuzz_check_desc(&desc, size);
        brk_desc_free(&desc);
    } else if (err[0] == '\0' || memchr(err, '\n', strlen(err)) != NULL) {
        fprintf(stderr, "refusal is not one line: '%s'\n", err);
        abort();
    }
    close(fd);
    return 0;
}
