/*
 * brk_seeds: writes seed inputs of the broker's harnesses with the real
 * code, so the seeds are what the broker itself writes.  Built by the
 * fuzz build (build-fuzz/test/fuzz/brk_seeds); run it from the top of the
 * source tree, so the paths inside the seeds are relative.
 *
 *   brk_seeds meta OUTDIR FILE...
 *       metadata blobs (fuzz_brk_meta: a flags byte 0, then the blob) of
 *       real scans: each FILE alone (format from its name: .npy, .tar,
 *       else files), all .npy together, all .tar together, every FILE as
 *       raw records of 16 bytes where it divides, and all as plain files.
 */
#include "brk_scan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int seeds_write(const char *dir, const char *name, const void *flags,
                       size_t nflags, const void *data, size_t len)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "wb");
    if ((f == NULL) || (fwrite(flags, 1, nflags, f) != nflags) ||
        (fwrite(data, 1, len, f) != len) || fclose(f)) {
        fprintf(stderr, "brk_seeds: cannot write %s\n", path);
        exit(1);
    }
    return 0;
}

/* Scan paths; write the blob as OUTDIR/meta-NAME.bin.  0, or 1 if the
 * scan refused (a seed less, not an error: raw needs whole records). */
static int seeds_meta_one(const char *dir, const char *name,
                          const char *const *paths, unsigned n,
                          brk_format_t fmt, uint64_t record)
{
    brk_scan_opts_t opts = { .format = fmt, .chunk_size = 2048,
                             .record_size = record };
    static const uint8_t flags = 0;
    char err[512], fname[256];
    brk_desc_t d;
    uint64_t len;
    void *blob;

    if (brk_scan(paths, n, &opts, &d, err, sizeof(err)) != 0) {
        return 1;
    }
    len  = brk_desc_meta_size(&d);
    blob = malloc(len);
    if (blob == NULL) {
        abort();
    }
    brk_desc_write_meta(&d, blob);
    snprintf(fname, sizeof(fname), "meta-%s.bin", name);
    seeds_write(dir, fname, &flags, 1, blob, len);
    free(blob);
    brk_desc_free(&d);
    return 0;
}

static int seeds_meta(const char *dir, int n, char **files)
{
    const char **npy = calloc((size_t)n, sizeof(char*));
    const char **tar = calloc((size_t)n, sizeof(char*));
    unsigned nnpy = 0, ntar = 0;
    char name[128];
    const char *base;
    int i;

    if ((npy == NULL) || (tar == NULL)) {
        abort();
    }
    for (i = 0; i < n; ++i) {
        const char *one[1] = { files[i] };

        base = strrchr(files[i], '/');
        base = base ? base + 1 : files[i];
        snprintf(name, sizeof(name), "%s", base);
        seeds_meta_one(dir, name, one, 1, BRK_FMT_AUTO, 0);
        snprintf(name, sizeof(name), "raw16-%s", base);
        seeds_meta_one(dir, name, one, 1, BRK_FMT_RAW, 16);
        if (strstr(base, ".npy")) {
            npy[nnpy++] = files[i];
        } else if (strstr(base, ".tar")) {
            tar[ntar++] = files[i];
        }
    }
    if (nnpy) {
        seeds_meta_one(dir, "all-npy", npy, nnpy, BRK_FMT_NPY, 0);
    }
    if (ntar) {
        seeds_meta_one(dir, "all-tar", tar, ntar, BRK_FMT_TAR, 0);
    }
    seeds_meta_one(dir, "all-files", (const char *const*)files, (unsigned)n,
                   BRK_FMT_FILES, 0);
    free(npy);
    free(tar);
    return 0;
}

int main(int argc, char **argv)
{
    if ((argc >= 4) && !strcmp(argv[1], "meta")) {
        return seeds_meta(argv[2], argc - 3, argv + 3);
    }
    fprintf(stderr, "usage: brk_seeds meta OUTDIR FILE...\n");
    return 2;
}
