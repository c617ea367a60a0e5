/*
 * Harness: brk_meta_check on an arbitrary metadata blob, the dataset
 * index that lives in the pool where any process of the pod can write it.
 * The input is a flags byte (bit 0: store the right CRC, as a peer that
 * scribbles on purpose would) and the blob.  A refusal is one line; an
 * accepted blob is walked the way the broker and the client index it
 * (fuzz_brk_walk_meta), and through the client library's own accessors
 * (cxl_broker_sample_len/path/info, chunk_samples, sample_lens, ds_info)
 * on a dataset handle made over it as cxl_broker_open makes one.
 */
#include "fuzz_brk.h"

#include "brk_client_int.h"

#include <ucx_cxl/cxlpool.h>

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static void fuzz_meta_inside(const void *blob, uint64_t len, const char *p,
                             size_t n, const char *what, uint64_t i)
{
    const char *b = blob;

    if ((p < b) || (p > b + len) || (n > (size_t)(b + len - p))) {
        fuzz_brk_fail("%s of sample %llu outside the blob", what,
                      (unsigned long long)i);
    }
}

/* The client library's accessors on a handle over the blob. */
static void fuzz_meta_client(const void *blob, uint64_t len)
{
    cxl_broker_t b;
    cxl_broker_ds_t ds;
    cxl_broker_dsinfo_t info;
    brk_meta_view_t v;
    uint64_t i, first, count, *lens;
    const char *p;
    size_t n;

    memset(&b, 0, sizeof(b));
    memset(&ds, 0, sizeof(ds));
    brk_meta_view(blob, &v);
    /* as cxl_broker_open: the header as checked, an arena that holds any
     * chunk (the accessors bound a sample's bytes by it) */
    if (brk_meta_check_hdr(blob, len, &ds.mh, NULL, 0) != 0) {
        fuzz_brk_fail("brk_meta_check_hdr refuses what brk_meta_check took");
    }
    b.arena_size    = UINT64_MAX / 2;
    ds.b            = &b;
    ds.meta         = v.meta;
    ds.samples      = v.samples;
    ds.chunks       = v.chunks;
    ds.files        = v.files;
    ds.strings      = v.strings;
    ds.rep.nsamples = v.meta->nsamples;
    ds.rep.nchunks  = v.meta->nchunks;
    if ((cxl_broker_nsamples(&ds) != v.meta->nsamples) ||
        (cxl_broker_nchunks(&ds) != v.meta->nchunks)) {
        fuzz_brk_fail("counts differ from the blob's");
    }
    lens = malloc((v.meta->nsamples + 1) * sizeof(*lens));
    if (lens == NULL) {
        abort();
    }
    cxl_broker_sample_lens(&ds, lens);
    for (i = 0; i <= v.meta->nsamples; ++i) {
        if (cxl_broker_sample_len(&ds, i) !=
            ((i < v.meta->nsamples) ? lens[i] : 0)) {
            fuzz_brk_fail("sample_len(%llu) differs from sample_lens",
                          (unsigned long long)i);
        }
        p = cxl_broker_sample_path(&ds, i, &n);
        if ((p == NULL) != (i == v.meta->nsamples)) {
            fuzz_brk_fail("sample_path(%llu): %s", (unsigned long long)i,
                          p ? "an answer past the end" : "no answer");
        }
        if (p != NULL) {
            fuzz_meta_inside(blob, len, p, n, "path", i);
        }
        p = cxl_broker_sample_info(&ds, i, &n);
        if (p != NULL) {
            fuzz_meta_inside(blob, len, p, n, "info", i);
        }
    }
    free(lens);
    for (i = 0; i <= v.meta->nchunks; ++i) {
        if ((cxl_broker_chunk_samples(&ds, i, &first, &count) == 0) !=
            (i < v.meta->nchunks)) {
            fuzz_brk_fail("chunk_samples(%llu) answers past the end",
                          (unsigned long long)i);
        }
        if ((i < v.meta->nchunks) &&
            ((first > v.meta->nsamples) ||
             (count > v.meta->nsamples - first))) {
            fuzz_brk_fail("chunk %llu: samples [%llu, +%llu) past the end",
                          (unsigned long long)i, (unsigned long long)first,
                          (unsigned long long)count);
        }
    }
    cxl_broker_ds_info(&ds, &info);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const size_t at = offsetof(brk_meta_t, crc);
    char err[256];
    uint64_t len;
    uint32_t crc;
    uint8_t *blob;

    if (size < 1) {
        return 0;
    }
    len  = size - 1;
    blob = malloc(len ? len : 1);       /* exactly the blob: ASan sees past it */
    if (blob == NULL) {
        abort();
    }
    memcpy(blob, data + 1, len);
    if ((data[0] & 1) && (len >= sizeof(brk_meta_t))) {
        memset(blob + at, 0, sizeof(crc));
        crc = cxlpool_crc32c(0, blob, len);
        memcpy(blob + at, &crc, sizeof(crc));
    }
    if (brk_meta_check(blob, len, err, sizeof(err)) == 0) {
        fuzz_brk_walk_meta(blob, len);
        fuzz_meta_client(blob, len);
    } else {
        fuzz_brk_check_err(err);
    }
    free(blob);
    return 0;
}
