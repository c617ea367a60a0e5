/*
 * The desc builder: growable arrays, the strings table, and the chunker,
 * which places each sample as it arrives.  Chunks are closed greedily: a
 * sample joins the open chunk while the chunk stays within chunk_size,
 * otherwise it opens a new one (alone if it is larger than chunk_size).
 */
#include "brk_scan_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(brk_sample_t) == 24, "brk_sample_t layout");
_Static_assert(sizeof(brk_chunk_t) == 32, "brk_chunk_t layout");
_Static_assert(sizeof(brk_seg_t) == 32, "brk_seg_t layout");
_Static_assert(sizeof(brk_file_t) == 32, "brk_file_t layout");

/* Make room for one more element of *arr (count n, capacity *cap). */
static int brk_desc_grow(void **arr, uint64_t *cap, uint64_t n, size_t elem)
{
    uint64_t ncap;
    void *p;

    if (n < *cap) {
        return 0;
    }
    ncap = (*cap == 0) ? 16 : *cap * 2;
    if ((ncap < *cap) || (ncap > SIZE_MAX / elem)) {
        errno = ENOMEM;
        return -1;
    }
    p = realloc(*arr, (size_t)ncap * elem);
    if (p == NULL) {
        return -1;
    }
    *arr = p;
    *cap = ncap;
    return 0;
}

/* Append s to the strings table; its offset in *off. */
static int brk_desc_add_string(brk_desc_t *d, const char *s, uint32_t *off,
                               uint32_t *len)
{
    size_t n = strlen(s);

    /* offsets and lengths are 32-bit in brk_file_t */
    if ((n > UINT32_MAX) || (d->strings_len > UINT32_MAX - n)) {
        errno = EOVERFLOW;
        return -1;
    }
    *off = (uint32_t)d->strings_len;
    *len = (uint32_t)n;
    if (n == 0) {
        return 0;
    }
    while (d->strings_len + n > d->cap_strings) {
        uint64_t ncap = (d->cap_strings == 0) ? 256 : d->cap_strings * 2;
        char *p = realloc(d->strings, ncap);

        if (p == NULL) {
            return -1;
        }
        d->strings     = p;
        d->cap_strings = ncap;
    }
    memcpy(d->strings + d->strings_len, s, n);
    d->strings_len += n;
    return 0;
}

int64_t brk_scan_mtime_ns(const struct stat *st)
{
    return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

int brk_desc_add_file(brk_scan_ctx_t *ctx, const char *path,
                      const struct stat *st, const char *info,
                      uint32_t *file)
{
    brk_desc_t *d = ctx->desc;
    brk_file_t *f;

    if (d->nfiles >= UINT32_MAX) {
        return brk_scan_err(ctx, "%s: too many files (the limit is %u)",
                            path, UINT32_MAX);
    }
    if (brk_desc_grow((void**)&d->files, &d->cap_files, d->nfiles,
                      sizeof(*d->files)) != 0) {
        return brk_scan_err(ctx, "%s: out of memory", path);
    }
    f = &d->files[d->nfiles];
    memset(f, 0, sizeof(*f));
    f->size     = (uint64_t)st->st_size;
    f->mtime_ns = brk_scan_mtime_ns(st);
    if ((brk_desc_add_string(d, path, &f->path_off, &f->path_len) != 0) ||
        (brk_desc_add_string(d, (info != NULL) ? info : "", &f->info_off,
                             &f->info_len) != 0)) {
        return brk_scan_err(ctx, "%s: %s", path,
                            (errno == EOVERFLOW) ?
                            "the path table exceeds 4 GiB" : "out of memory");
    }
    *file = (uint32_t)d->nfiles++;
    return 0;
}

/* Open a new chunk at the end; it starts at the next sample and segment. */
static int brk_desc_new_chunk(brk_desc_t *d)
{
    brk_chunk_t *c;

    if ((d->nchunks >= UINT32_MAX) || (d->nsegs >= UINT32_MAX) ||
        (brk_desc_grow((void**)&d->chunks, &d->cap_chunks, d->nchunks,
                       sizeof(*d->chunks)) != 0)) {
        return -1;
    }
    c = &d->chunks[d->nchunks++];
    memset(c, 0, sizeof(*c));
    c->first_sample = d->nsamples;
    c->first_seg    = (uint32_t)d->nsegs;
    return 0;
}

/* Does a sample of len bytes join chunk c? */
static int brk_desc_fits(const brk_desc_t *d, const brk_chunk_t *c,
                         uint64_t len)
{
    if (c->nsamples == 0) {
        return 1;
    }
    /* nsamples is 32-bit: a chunk of that many samples is full anyway */
    return (c->nsamples < UINT32_MAX) && (c->len <= d->chunk_size) &&
           (len <= d->chunk_size - c->len);
}

int brk_desc_add_sample(brk_scan_ctx_t *ctx, uint32_t file,
                        uint64_t file_off, uint64_t len)
{
    brk_desc_t *d = ctx->desc;
    const char *path = d->strings + d->files[file].path_off;
    int plen = (int)d->files[file].path_len;
    brk_sample_t *s;
    brk_chunk_t *c;
    brk_seg_t *g;

    if (((d->nchunks == 0) ||
         !brk_desc_fits(d, &d->chunks[d->nchunks - 1], len)) &&
        (brk_desc_new_chunk(d) != 0)) {
        goto err;
    }
    c = &d->chunks[d->nchunks - 1];
    if (brk_desc_grow((void**)&d->samples, &d->cap_samples, d->nsamples,
                      sizeof(*d->samples)) != 0) {
        goto err;
    }
    if (len > 0) {
        g = (c->nsegs > 0) ? &d->segs[c->first_seg + c->nsegs - 1] : NULL;
        if ((g != NULL) && (g->file == file) &&
            (g->file_off + g->len == file_off)) {
            g->len += len;  /* the file's run continues: one read */
        } else {
            if ((d->nsegs >= UINT32_MAX) ||
                (brk_desc_grow((void**)&d->segs, &d->cap_segs, d->nsegs,
                               sizeof(*d->segs)) != 0)) {
                goto err;
            }
            g = &d->segs[d->nsegs++];
            memset(g, 0, sizeof(*g));
            g->file      = file;
            g->file_off  = file_off;
            g->len       = len;
            g->chunk_off = c->len;
            c->nsegs++;
        }
    }
    s = &d->samples[d->nsamples++];
    s->chunk = (uint32_t)(d->nchunks - 1);
    s->file  = file;
    s->off   = c->len;
    s->len   = len;
    c->len  += len;
    c->nsamples++;
    d->bytes += len;
    return 0;

err:
    return brk_scan_err(ctx, "%.*s: out of memory or over the index limits "
                        "(%u chunks or segments)", plen, path, UINT32_MAX);
}

/* FNV-1a, 64-bit: cheap, and enough to tell a changed input set. */
static uint64_t brk_fnv(uint64_t h, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    size_t i;

    for (i = 0; i < len; ++i) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t brk_fnv_u64(uint64_t h, uint64_t v)
{
    unsigned char b[8];
    int i;

    for (i = 0; i < 8; ++i) {   /* little endian, whatever the host */
        b[i] = (unsigned char)(v >> (8 * i));
    }
    return brk_fnv(h, b, sizeof(b));
}

uint64_t brk_desc_fingerprint(const brk_desc_t *d)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const brk_file_t *f;
    uint64_t i;

    h = brk_fnv_u64(h, (uint64_t)d->format);
    h = brk_fnv_u64(h, d->chunk_size);
    h = brk_fnv_u64(h, d->record_size);
    h = brk_fnv_u64(h, d->nfiles);
    for (i = 0; i < d->nfiles; ++i) {
        f = &d->files[i];
        /* the length first, so "ab"+"c" and "a"+"bc" differ */
        h = brk_fnv_u64(h, f->path_len);
        h = brk_fnv(h, d->strings + f->path_off, f->path_len);
        h = brk_fnv_u64(h, f->size);
        h = brk_fnv_u64(h, (uint64_t)f->mtime_ns);
    }
    return h;
}

void brk_desc_free(brk_desc_t *desc)
{
    if (desc == NULL) {
        return;
    }
    free(desc->samples);
    free(desc->chunks);
    free(desc->segs);
    free(desc->files);
    free(desc->strings);
    memset(desc, 0, sizeof(*desc));
}
