/*
 * Harness: extent and attachment records (pool_alloc.c, pool_attach.c,
 * pool_check.c) that a peer scribbled on.  The superblock is a real one
 * (cxlpool_format, one of four layouts), the attachment table, the extent
 * table and the lock lines come from the input; the harness opens the
 * pool (read-only as cxlpool info/check do, or attached, which recovers
 * dead owners and claims a slot) and runs list, lookup, find, key check,
 * stats, check, repair, alloc and free on it.  Properties:
 * fuzz_pool_common.h.
 *
 * Input: byte 0: layout (bits 0-1), fix record checksums (bit 2), open
 * mode FUZZ_POOL_* (bits 3-6); byte 1: n, then n operation bytes
 * (fuzz_pool_run); the rest overwrites the attachment table, then the
 * extent table, then the lock lines.
 *
 * FUZZ_POOL_WRITE_SEEDS=DIR writes seed inputs made by the real code
 * (attachments, named and persistent allocations) into DIR and exits.
 */
#define _GNU_SOURCE
#include "fuzz_pool_common.h"

#include "pool_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    uint64_t       size;
    uint32_t       max_attach, max_extents, nr_hosts;
    cxl_coh_mode_t coh;
    uint8_t       *image;  /* formatted metadata, [0, heap_offset) */
    uint64_t       heap_offset;
} fuzz_layout_t;

static fuzz_layout_t layouts[4] = {
    {4ull << 20,  8,   32,   1, CXL_COH_HW, NULL, 0},
    {8ull << 20,  8,   32,   2, CXL_COH_SW, NULL, 0},
    {4ull << 20,  0,   0,    1, CXL_COH_HW, NULL, 0}, /* the defaults */
    {12ull << 20, 16,  64,   4, CXL_COH_SW, NULL, 0}
};

static void fuzz_records_seeds(const char *dir);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    cxlpool_params_t params;
    const cxlpool_sb_t *sb;
    uint8_t *base;
    unsigned i;

    (void)argc;
    (void)argv;
    for (i = 0; i < 4; ++i) {
        base = calloc(1, layouts[i].size);
        cxlpool_params_init(&params);
        params.max_attach  = layouts[i].max_attach;
        params.max_extents = layouts[i].max_extents;
        params.nr_hosts    = layouts[i].nr_hosts;
        params.coherence   = layouts[i].coh;
        if ((base == NULL) ||
            (cxlpool_format(base, layouts[i].size, &params) != CXLPOOL_OK)) {
            fprintf(stderr, "fuzz_pool_records: format: %s\n",
                    cxlpool_last_error());
            abort();
        }
        sb = (const cxlpool_sb_t*)base;
        layouts[i].image       = base;
        layouts[i].heap_offset = sb->heap_offset;
    }
    if (getenv("FUZZ_POOL_WRITE_SEEDS") != NULL) {
        fuzz_records_seeds(getenv("FUZZ_POOL_WRITE_SEEDS"));
        exit(0);
    }
    return 0;
}

/* Copy len bytes of src to the image at off, up to the table's end. */
static size_t fuzz_records_put(uint8_t *image, uint64_t off, uint64_t room,
                               const uint8_t *src, size_t len)
{
    size_t n = (len < room) ? len : room;

    memcpy(image + off, src, n);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const fuzz_layout_t *l;
    const cxlpool_sb_t *sb;
    fuzz_pool_image_t img;
    const uint8_t *ops;
    size_t nops, n;
    uint8_t ctl;

    if (fuzz_pool_split(&data, &size, &ctl, &ops, &nops) != 0) {
        return 0;
    }

    l  = &layouts[ctl & 3];
    sb = (const cxlpool_sb_t*)l->image;
    fuzz_pool_image_init(&img, l->size, l->image, l->heap_offset);
    n = fuzz_records_put(img.orig, sb->attach_offset,
                         (uint64_t)sb->max_attach * sizeof(cxlpool_attach_rec_t),
                         data, size);
    data += n;
    size -= n;
    n = fuzz_records_put(img.orig, sb->extent_offset,
                         (uint64_t)sb->max_extents * sizeof(cxlpool_extent_rec_t),
                         data, size);
    data += n;
    size -= n;
    fuzz_records_put(img.orig, CXLPOOL_LOCK_OFFSET,
                     (uint64_t)cxlpool_sb_nr_hosts(sb) * sizeof(cxlpool_lock_t),
                     data, size);
    if (ctl & 4) {
        fuzz_pool_fix_record_crcs(img.orig, l->size);
    }
    /* the rest of the metadata area is zero in the memory file anyway */
    fuzz_pool_image_write(&img, sb->extent_offset + (uint64_t)sb->max_extents *
                                                    sizeof(cxlpool_extent_rec_t));
    fuzz_pool_run(&img, (ctl >> 3) & 0xf, ops, nops);
    fuzz_pool_image_free(&img);
    return 0;
}

/* ---- seeds: tables written by the real allocator ---- */

static void fuzz_records_seed(const char *dir, unsigned li, unsigned flags,
                              const char *what)
{
    static const uint8_t ops[] = {2, 3, 4, 0, 5, 'b', 'u', 'f', '0', 0, 0, 0, 0,
                                  8, 0, 16, 0, 0, 0, 0, 0, 0, 10, 1};
    const fuzz_layout_t *l = &layouts[li];
    const cxlpool_sb_t *sb = (const cxlpool_sb_t*)l->image;
    uint64_t att_len = (uint64_t)sb->max_attach * sizeof(cxlpool_attach_rec_t);
    uint64_t ext_len = (uint64_t)sb->max_extents * sizeof(cxlpool_extent_rec_t);
    uint64_t lock_len = (uint64_t)cxlpool_sb_nr_hosts(sb) * sizeof(cxlpool_lock_t);
    cxlpool_params_t params;
    fuzz_pool_image_t img;
    cxlpool_extent_t ext;
    cxlpool_t *pool;
    char path[512], name[16];
    uint8_t *seed;
    size_t len = 0;
    unsigned i;
    FILE *f;

    fuzz_pool_image_init(&img, l->size, l->image, l->heap_offset);
    fuzz_pool_image_write(&img, l->heap_offset);
    cxlpool_params_init(&params);
    params.path       = img.path;
    params.coherence  = l->coh;
    params.host_index = 0;
    params.flags      = CXLPOOL_NO_HEARTBEAT;
    if (cxlpool_open(&params, &pool) != CXLPOOL_OK) {
        fprintf(stderr, "seed open: %s\n", cxlpool_last_error());
        abort();
    }
    for (i = 0; i < 4; ++i) {
        snprintf(name, sizeof(name), "buf%u", i);
        cxlpool_alloc(pool, 4096u << i, 0, name,
                      (i & 1) ? CXLPOOL_ALLOC_PERSIST : 0, &ext);
    }
    cxlpool_alloc(pool, 100, 64, NULL, 0, &ext);

    seed = malloc(2 + sizeof(ops) + att_len + ext_len + lock_len);
    seed[len++] = (uint8_t)(li | 4 | (flags << 3)); /* checksums fixed */
    seed[len++] = sizeof(ops);
    memcpy(seed + len, ops, sizeof(ops));
    len += sizeof(ops);
    memcpy(seed + len, pool->base + sb->attach_offset, att_len);
    len += att_len;
    memcpy(seed + len, pool->base + sb->extent_offset, ext_len);
    len += ext_len;
    memcpy(seed + len, pool->base + CXLPOOL_LOCK_OFFSET, lock_len);
    len += lock_len;
    /* the records as a live process leaves them (pool not closed) */
    snprintf(path, sizeof(path), "%s/%s.bin", dir, what);
    f = fopen(path, "wb");
    if ((f == NULL) || (fwrite(seed, 1, len, f) != len) || fclose(f)) {
        perror(path);
        abort();
    }
    free(seed);
    cxlpool_close(pool);
    fuzz_pool_image_free(&img);
}

static void fuzz_records_seeds(const char *dir)
{
    fuzz_records_seed(dir, 0, FUZZ_POOL_ATTACH, "hw-attach");
    fuzz_records_seed(dir, 0, FUZZ_POOL_RDONLY, "hw-rdonly");
    fuzz_records_seed(dir, 1, FUZZ_POOL_ATTACH | FUZZ_POOL_SW, "sw2-attach");
    fuzz_records_seed(dir, 1, FUZZ_POOL_ATTACH | FUZZ_POOL_SW | FUZZ_POOL_HOST1,
                      "sw2-host1");
    fuzz_records_seed(dir, 3, 0, "sw4-noattach");
}
