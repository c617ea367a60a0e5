/*
 * The metadata blob of a dataset version: brk_meta_t, then the samples,
 * chunks, segments and files (each array 8-aligned), then the strings;
 * the length is padded to 8 so blobs can follow one another in the heap.
 *
 * brk_meta_check() reads memory a client got from the pool, so it trusts
 * nothing: every record is copied out before use (no alignment assumed)
 * and every sum is checked against overflow before it is compared.
 */
#include "brk_scan_int.h"

#include <ucx_cxl/cxlpool.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define BRK_ALIGN8(x) (((x) + 7) & ~(uint64_t)7)

typedef struct {
    uint64_t samples_off, chunks_off, segs_off, files_off, strings_off, len;
} brk_meta_layout_t;

static void brk_meta_layout(const brk_desc_t *d, brk_meta_layout_t *l)
{
    l->samples_off = BRK_ALIGN8((uint64_t)sizeof(brk_meta_t));
    l->chunks_off  = BRK_ALIGN8(l->samples_off +
                                d->nsamples * sizeof(brk_sample_t));
    l->segs_off    = BRK_ALIGN8(l->chunks_off +
                                d->nchunks * sizeof(brk_chunk_t));
    l->files_off   = BRK_ALIGN8(l->segs_off + d->nsegs * sizeof(brk_seg_t));
    l->strings_off = BRK_ALIGN8(l->files_off +
                                d->nfiles * sizeof(brk_file_t));
    l->len         = BRK_ALIGN8(l->strings_off + d->strings_len);
}

uint64_t brk_desc_meta_size(const brk_desc_t *desc)
{
    brk_meta_layout_t l;

    brk_meta_layout(desc, &l);
    return l.len;
}

static void brk_meta_put(char *dst, uint64_t off, const void *src,
                         uint64_t len)
{
    if (len > 0) {
        memcpy(dst + off, src, len);
    }
}

void brk_desc_write_meta(const brk_desc_t *desc, void *dst)
{
    brk_meta_layout_t l;
    brk_meta_t h;
    uint32_t crc;

    brk_meta_layout(desc, &l);
    memset(dst, 0, l.len);      /* the alignment gaps too: crc covers them */
    memset(&h, 0, sizeof(h));
    h.magic       = BRK_META_MAGIC;
    h.len         = l.len;
    h.format      = (uint32_t)desc->format;
    h.nsamples    = desc->nsamples;
    h.nchunks     = desc->nchunks;
    h.nsegs       = desc->nsegs;
    h.nfiles      = desc->nfiles;
    h.strings_len = desc->strings_len;
    h.samples_off = l.samples_off;
    h.chunks_off  = l.chunks_off;
    h.segs_off    = l.segs_off;
    h.files_off   = l.files_off;
    h.strings_off = l.strings_off;
    memcpy(dst, &h, sizeof(h));
    brk_meta_put(dst, l.samples_off, desc->samples,
                 desc->nsamples * sizeof(brk_sample_t));
    brk_meta_put(dst, l.chunks_off, desc->chunks,
                 desc->nchunks * sizeof(brk_chunk_t));
    brk_meta_put(dst, l.segs_off, desc->segs,
                 desc->nsegs * sizeof(brk_seg_t));
    brk_meta_put(dst, l.files_off, desc->files,
                 desc->nfiles * sizeof(brk_file_t));
    brk_meta_put(dst, l.strings_off, desc->strings, desc->strings_len);
    crc = cxlpool_crc32c(0, dst, l.len);
    memcpy((char*)dst + offsetof(brk_meta_t, crc), &crc, sizeof(crc));
}

static int brk_meta_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int brk_meta_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if ((err != NULL) && (errlen > 0)) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

#define BRK_META_FAIL(...) brk_meta_fail(err, errlen, "metadata: " __VA_ARGS__)

/* n records of size at off lie inside [sizeof(brk_meta_t), len)? */
static int brk_meta_array_ok(uint64_t off, uint64_t n, uint64_t size,
                             uint64_t len)
{
    return (off % 8 == 0) && (off >= sizeof(brk_meta_t)) && (off <= len) &&
           (n <= (len - off) / size);
}

/* The CRC of the blob with its crc field taken as 0, in two pieces. */
static uint32_t brk_meta_crc(const char *p, uint64_t len)
{
    static const uint32_t zero = 0;
    const size_t at = offsetof(brk_meta_t, crc);
    uint32_t crc;

    crc = cxlpool_crc32c(0, p, at);
    crc = cxlpool_crc32c(crc, &zero, sizeof(zero));
    return cxlpool_crc32c(crc, p + at + sizeof(zero),
                          len - at - sizeof(zero));
}

int brk_meta_check(const void *blob, uint64_t len, char *err, size_t errlen)
{
    brk_meta_t h;

    return brk_meta_check_hdr(blob, len, &h, err, errlen);
}

int brk_meta_check_hdr(const void *blob, uint64_t len, brk_meta_t *checked,
                       char *err, size_t errlen)
{
    const char *p = blob;
    uint64_t i, j, nsamp = 0, nseg = 0, end;
    brk_sample_t s;
    brk_chunk_t c;
    brk_seg_t g;
    brk_file_t f, sf;
    brk_meta_t h;

    if ((blob == NULL) || (len < sizeof(h))) {
        return BRK_META_FAIL("%" PRIu64 " bytes, shorter than its header",
                             len);
    }
    memcpy(&h, p, sizeof(h));
    if (h.magic != BRK_META_MAGIC) {
        return BRK_META_FAIL("bad magic 0x%016" PRIx64, h.magic);
    }
    if (h.len != len) {
        return BRK_META_FAIL("header says %" PRIu64 " bytes, have %" PRIu64
                             " (truncated?)", h.len, len);
    }
    if (brk_meta_crc(p, len) != h.crc) {
        return BRK_META_FAIL("crc mismatch (stored 0x%08x, computed "
                             "0x%08x)", h.crc, brk_meta_crc(p, len));
    }
    if ((h.format == BRK_FMT_AUTO) || (h.format >= BRK_FMT_LAST)) {
        return BRK_META_FAIL("bad format %u", h.format);
    }
    if (!brk_meta_array_ok(h.samples_off, h.nsamples, sizeof(s), len) ||
        !brk_meta_array_ok(h.chunks_off, h.nchunks, sizeof(c), len) ||
        !brk_meta_array_ok(h.segs_off, h.nsegs, sizeof(g), len) ||
        !brk_meta_array_ok(h.files_off, h.nfiles, sizeof(f), len) ||
        !brk_meta_array_ok(h.strings_off, h.strings_len, 1, len)) {
        return BRK_META_FAIL("an array lies outside the blob (samples %"
                             PRIu64 "@%" PRIu64 ", chunks %" PRIu64 "@%"
                             PRIu64 ", segs %" PRIu64 "@%" PRIu64
                             ", files %" PRIu64 "@%" PRIu64 ", strings %"
                             PRIu64 "@%" PRIu64 ", len %" PRIu64 ")",
                             h.nsamples, h.samples_off, h.nchunks,
                             h.chunks_off, h.nsegs, h.segs_off, h.nfiles,
                             h.files_off, h.strings_len, h.strings_off, len);
    }
    /* the records index with 32 bits */
    if ((h.nchunks > UINT32_MAX) || (h.nsegs > UINT32_MAX) ||
        (h.nfiles > UINT32_MAX) || (h.strings_len > UINT32_MAX)) {
        return BRK_META_FAIL("a count exceeds the 32-bit indices");
    }

    for (i = 0; i < h.nfiles; ++i) {
        memcpy(&f, p + h.files_off + i * sizeof(f), sizeof(f));
        if (((uint64_t)f.path_off + f.path_len > h.strings_len) ||
            ((uint64_t)f.info_off + f.info_len > h.strings_len)) {
            return BRK_META_FAIL("file %" PRIu64 ": path or info outside "
                                 "the strings", i);
        }
        if (f.path_len == 0) {
            return BRK_META_FAIL("file %" PRIu64 ": empty path", i);
        }
    }

    for (i = 0; i < h.nchunks; ++i) {
        memcpy(&c, p + h.chunks_off + i * sizeof(c), sizeof(c));
        if ((c.first_sample != nsamp) || (c.nsamples == 0) ||
            (c.nsamples > h.nsamples - nsamp)) {
            return BRK_META_FAIL("chunk %" PRIu64 ": samples [%" PRIu64
                                 ", +%u) do not follow the previous chunk's "
                                 "(%" PRIu64 " of %" PRIu64 ")", i,
                                 c.first_sample, c.nsamples, nsamp,
                                 h.nsamples);
        }
        if ((c.first_seg != nseg) || (c.nsegs > h.nsegs - nseg)) {
            return BRK_META_FAIL("chunk %" PRIu64 ": segments [%u, +%u) do "
                                 "not follow the previous chunk's (%" PRIu64
                                 " of %" PRIu64 ")", i, c.first_seg,
                                 c.nsegs, nseg, h.nsegs);
        }
        end = 0;
        for (j = 0; j < c.nsegs; ++j) {
            memcpy(&g, p + h.segs_off + (nseg + j) * sizeof(g), sizeof(g));
            if ((g.chunk_off != end) || (g.len == 0) ||
                (g.len > c.len - end) || (g.file >= h.nfiles)) {
                return BRK_META_FAIL("chunk %" PRIu64 ": segment %" PRIu64
                                     " (file %u, %" PRIu64 " bytes at %"
                                     PRIu64 ") does not continue the chunk "
                                     "at %" PRIu64 " of %" PRIu64, i,
                                     nseg + j, g.file, g.len, g.chunk_off,
                                     end, c.len);
            }
            memcpy(&f, p + h.files_off + (uint64_t)g.file * sizeof(f),
                   sizeof(f));
            if ((g.file_off > f.size) || (g.len > f.size - g.file_off)) {
                return BRK_META_FAIL("segment %" PRIu64 ": bytes [%" PRIu64
                                     ", +%" PRIu64 ") outside file %u (%"
                                     PRIu64 " bytes)", nseg + j, g.file_off,
                                     g.len, g.file, f.size);
            }
            end += g.len;
        }
        if (end != c.len) {
            return BRK_META_FAIL("chunk %" PRIu64 ": segments cover %" PRIu64
                                 " of its %" PRIu64 " bytes", i, end, c.len);
        }
        for (j = 0; j < c.nsamples; ++j) {
            memcpy(&s, p + h.samples_off + (nsamp + j) * sizeof(s),
                   sizeof(s));
            if ((s.chunk != i) || (s.file >= h.nfiles) ||
                (s.off > c.len) || (s.len > c.len - s.off)) {
                return BRK_META_FAIL("sample %" PRIu64 " (chunk %u, file %u,"
                                     " %" PRIu64 " bytes at %" PRIu64 ") "
                                     "outside chunk %" PRIu64 " (%" PRIu64
                                     " bytes)", nsamp + j, s.chunk, s.file,
                                     s.len, s.off, i, c.len);
            }
            memcpy(&sf, p + h.files_off + (uint64_t)s.file * sizeof(sf),
                   sizeof(sf));
            if (s.len > sf.size) {
                return BRK_META_FAIL("sample %" PRIu64 ": %" PRIu64 " bytes "
                                     "from file %u of %" PRIu64, nsamp + j,
                                     s.len, s.file, sf.size);
            }
        }
        nsamp += c.nsamples;
        nseg  += c.nsegs;
    }
    if ((nsamp != h.nsamples) || (nseg != h.nsegs)) {
        return BRK_META_FAIL("chunks cover %" PRIu64 " of %" PRIu64
                             " samples and %" PRIu64 " of %" PRIu64
                             " segments", nsamp, h.nsamples, nseg, h.nsegs);
    }
    *checked = h;
    return 0;
}

void brk_meta_view(const void *blob, brk_meta_view_t *view)
{
    const uint8_t *p = blob;

    view->meta    = blob;
    view->samples = (const brk_sample_t*)(p + view->meta->samples_off);
    view->chunks  = (const brk_chunk_t*)(p + view->meta->chunks_off);
    view->segs    = (const brk_seg_t*)(p + view->meta->segs_off);
    view->files   = (const brk_file_t*)(p + view->meta->files_off);
    view->strings = (const char*)(p + view->meta->strings_off);
}
