/*
 * Harness: the broker's WebDataset .tar scanner (brk_scan_tar.c: ustar,
 * GNU long names, pax headers) on arbitrary shard bytes.  A refusal is one
 * line; an accepted shard gives an index brk_meta_check accepts, every
 * segment inside the file, and samples that are themselves tar streams:
 * whole 512-byte blocks, in file order, none overlapping another.
 */
#include "fuzz_brk.h"
#include "fuzz_input.h"

#include <stdlib.h>
#include <unistd.h>

/* The file offset of sample i: through the segment of its chunk that
 * holds its first byte (a tar sample is never empty: it has a header). */
static uint64_t fuzz_tar_sample_off(const brk_desc_t *d, uint64_t i)
{
    const brk_sample_t *s = &d->samples[i];
    const brk_chunk_t *c  = &d->chunks[s->chunk];
    const brk_seg_t *g;
    uint32_t j;

    for (j = 0; j < c->nsegs; ++j) {
        g = &d->segs[c->first_seg + j];
        if ((s->off >= g->chunk_off) && (s->off - g->chunk_off < g->len)) {
            if (s->len > g->len - (s->off - g->chunk_off)) {
                fuzz_brk_fail("tar sample %llu straddles two segments",
                              (unsigned long long)i);
            }
            return g->file_off + (s->off - g->chunk_off);
        }
    }
    fuzz_brk_fail("tar sample %llu is in no segment of its chunk",
                  (unsigned long long)i);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    brk_scan_opts_t opts = { .format = BRK_FMT_TAR, .chunk_size = 2048 };
    char path[64], err[256];
    const char *paths[1] = { path };
    uint64_t fsize = size, i, off, prev_end = 0;
    brk_desc_t desc;
    int fd;

    fd = fuzz_input_memfd(data, size, "x.tar", path, sizeof(path));
    if (brk_scan(paths, 1, &opts, &desc, err, sizeof(err)) == 0) {
        fuzz_brk_check_desc(&desc, &fsize, 1);
        for (i = 0; i < desc.nsamples; ++i) {
            off = fuzz_tar_sample_off(&desc, i);
            if ((off % 512) || (desc.samples[i].len % 512) ||
                (desc.samples[i].len == 0) || (off < prev_end)) {
                fuzz_brk_fail("tar sample %llu: %llu bytes at %llu (the one "
                              "before ends at %llu)", (unsigned long long)i,
                              (unsigned long long)desc.samples[i].len,
                              (unsigned long long)off,
                              (unsigned long long)prev_end);
            }
            prev_end = off + desc.samples[i].len;
        }
        brk_desc_free(&desc);
    } else {
        fuzz_brk_check_err(err);
    }
    close(fd);
    return 0;
}
