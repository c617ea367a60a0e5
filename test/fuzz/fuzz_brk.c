/* Shared checks of the broker's harnesses (fuzz_brk.h). */
#include "fuzz_brk.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fuzz_brk_fail(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "fuzz property violated: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

void fuzz_brk_check_err(const char *err)
{
    if ((err[0] == '\0') || (strchr(err, '\n') != NULL)) {
        fuzz_brk_fail("refusal is not one line: '%s'", err);
    }
}

void fuzz_brk_check_desc(const brk_desc_t *d, const uint64_t *file_sizes,
                         uint64_t nfiles)
{
    uint64_t i, len = brk_desc_meta_size(d), bytes = 0;
    char err[256];
    void *blob;

    if (d->nfiles != nfiles) {
        fuzz_brk_fail("%llu files indexed, %llu scanned",
                      (unsigned long long)d->nfiles,
                      (unsigned long long)nfiles);
    }
    for (i = 0; i < d->nsegs; i++) {
        if ((d->segs[i].file >= nfiles) ||
            (d->segs[i].file_off > file_sizes[d->segs[i].file]) ||
            (d->segs[i].len > file_sizes[d->segs[i].file] -
                              d->segs[i].file_off)) {
            fuzz_brk_fail("segment %llu beyond its file",
                          (unsigned long long)i);
        }
    }
    for (i = 0; i < d->nsamples; i++) {
        bytes += d->samples[i].len;
    }
    if (bytes != d->bytes) {
        fuzz_brk_fail("samples sum to %llu bytes, the desc says %llu",
                      (unsigned long long)bytes,
                      (unsigned long long)d->bytes);
    }
    blob = malloc(len);
    if (blob == NULL) {
        abort();
    }
    brk_desc_write_meta(d, blob);
    if (brk_meta_check(blob, len, err, sizeof(err)) != 0) {
        fuzz_brk_fail("scanner output refused by brk_meta_check: %s", err);
    }
    fuzz_brk_walk_meta(blob, len);
    free(blob);
}

/* p[0 .. n) inside [lo, lo + len)? */
static void fuzz_brk_inside(const void *lo, uint64_t len, const void *p,
                            uint64_t n, const char *what, uint64_t i)
{
    const char *b = lo, *q = p;

    if ((q < b) || (q > b + len) || (n > (uint64_t)(b + len - q))) {
        fuzz_brk_fail("%s %llu: %llu bytes at blob offset %lld, outside the "
                      "%llu-byte blob", what, (unsigned long long)i,
                      (unsigned long long)n, (long long)(q - b),
                      (unsigned long long)len);
    }
}

void fuzz_brk_walk_meta(const void *blob, uint64_t len)
{
    volatile uint8_t sink = 0;
    const brk_sample_t *s;
    const brk_chunk_t *c;
    const brk_seg_t *g;
    const brk_file_t *f;
    brk_meta_view_t v;
    uint64_t i, j, end;

    brk_meta_view(blob, &v);
    for (i = 0; i < v.meta->nchunks; ++i) {
        /* the broker's fill: segments end to end into a chunk buffer */
        c = &v.chunks[i];
        fuzz_brk_inside(blob, len, c, sizeof(*c), "chunk", i);
        if ((c->first_sample > v.meta->nsamples) ||
            (c->nsamples > v.meta->nsamples - c->first_sample) ||
            ((uint64_t)c->first_seg + c->nsegs > v.meta->nsegs)) {
            fuzz_brk_fail("chunk %llu selects outside the arrays",
                          (unsigned long long)i);
        }
        for (j = 0, end = 0; j < c->nsegs; ++j) {
            g = &v.segs[c->first_seg + j];
            fuzz_brk_inside(blob, len, g, sizeof(*g), "segment", j);
            if ((g->file >= v.meta->nfiles) || (g->chunk_off > c->len) ||
                (g->len > c->len - g->chunk_off)) {
                fuzz_brk_fail("chunk %llu: segment %llu outside its chunk or "
                              "file table", (unsigned long long)i,
                              (unsigned long long)j);
            }
            f = &v.files[g->file];
            fuzz_brk_inside(blob, len, f, sizeof(*f), "file", g->file);
            fuzz_brk_inside(blob, len, v.strings + f->path_off, f->path_len,
                            "path of file", g->file);
            if (f->path_len) {
                sink ^= (uint8_t)v.strings[f->path_off + f->path_len - 1];
            }
            end = g->chunk_off + g->len;
        }
        (void)end;
    }
    for (i = 0; i < v.meta->nsamples; ++i) {
        /* the client: a sample's chunk (pin arrays of nchunks entries, the
         * plan's CSR of nchunks + 1), its bytes in the chunk, its file's
         * path and info (cxl_broker_sample_path/info) */
        s = &v.samples[i];
        fuzz_brk_inside(blob, len, s, sizeof(*s), "sample", i);
        if ((s->chunk >= v.meta->nchunks) || (s->file >= v.meta->nfiles)) {
            fuzz_brk_fail("sample %llu: chunk %u or file %u out of range",
                          (unsigned long long)i, s->chunk, s->file);
        }
        c = &v.chunks[s->chunk];
        if ((s->off > c->len) || (s->len > c->len - s->off)) {
            fuzz_brk_fail("sample %llu: bytes outside its chunk",
                          (unsigned long long)i);
        }
        if ((i < c->first_sample) || (i - c->first_sample >= c->nsamples)) {
            fuzz_brk_fail("sample %llu is not among its chunk's samples",
                          (unsigned long long)i);
        }
        f = &v.files[s->file];
        fuzz_brk_inside(blob, len, f, sizeof(*f), "file", s->file);
        fuzz_brk_inside(blob, len, v.strings + f->path_off, f->path_len,
                        "path of file", s->file);
        fuzz_brk_inside(blob, len, v.strings + f->info_off, f->info_len,
                        "info of file", s->file);
        if (f->info_len) {
            sink ^= (uint8_t)v.strings[f->info_off + f->info_len - 1];
        }
    }
    (void)sink;
}
