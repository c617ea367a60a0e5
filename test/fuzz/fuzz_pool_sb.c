/*
 * Harness: superblock and metadata validation of the pool layer
 * (pool_format.c cxlpool_sb_validate, pool_open.c probe/open, pool_check.c)
 * on a pool image whose first bytes are the input: whoever may map a pool
 * may write its superblock, and every process that opens the pool trusts
 * only what the validator accepted.  Properties: fuzz_pool_common.h.
 *
 * Input: byte 0 chooses the store size (bits 0-1), the open mode (bits
 * 2-4, FUZZ_POOL_*) and whether the harness fixes the superblock checksum
 * (bit 5; the fuzzer cannot compute crc32c) and the record checksums (bit
 * 6); then a length byte n and n operation bytes (fuzz_pool_run); the rest
 * is the image from offset 0 (superblock, lock lines, tables).
 *
 * FUZZ_POOL_WRITE_SEEDS=DIR writes seed inputs (superblocks that
 * cxlpool_format writes for several layouts) into DIR and exits.
 */
#include "fuzz_pool_common.h"

#include "pool_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_SB_IMAGE_MAX (64u << 10)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint64_t sizes[4] = {4ull << 20, 6ull << 20, 8ull << 20,
                                      (4ull << 20) + 4096};
    fuzz_pool_image_t img;
    const uint8_t *ops;
    size_t nops;
    uint8_t ctl;

    if (fuzz_pool_split(&data, &size, &ctl, &ops, &nops) != 0) {
        return 0;
    }
    if (size > FUZZ_SB_IMAGE_MAX) {
        size = FUZZ_SB_IMAGE_MAX;
    }

    fuzz_pool_image_init(&img, sizes[ctl & 3], data, size);
    if (ctl & 0x20) {
        fuzz_pool_fix_sb_crc(img.orig);
    }
    if (ctl & 0x40) {
        fuzz_pool_fix_record_crcs(img.orig, FUZZ_SB_IMAGE_MAX);
    }
    fuzz_pool_image_write(&img, FUZZ_SB_IMAGE_MAX);
    fuzz_pool_run(&img, (ctl >> 2) & 7, ops, nops);
    fuzz_pool_image_free(&img);
    return 0;
}

/* ---- seeds: superblocks cxlpool_format writes ---- */

static void fuzz_sb_seed(const char *dir, const char *what, uint8_t ctl,
                         uint64_t size, uint32_t max_attach,
                         uint32_t max_extents, uint32_t nr_hosts,
                         cxl_coh_mode_t coh)
{
    static const uint8_t ops[] = {0, 2, 3, 4, 8, 0, 1, 0, 0, 0, 0, 0, 0, 1};
    cxlpool_params_t params;
    char path[512];
    uint8_t *image, seed[2 + sizeof(ops) + 3 * 4096];
    size_t len = 0;
    FILE *f;

    image = calloc(1, size);
    cxlpool_params_init(&params);
    params.max_attach  = max_attach;
    params.max_extents = max_extents;
    params.nr_hosts    = nr_hosts;
    params.coherence   = coh;
    if ((image == NULL) || (cxlpool_format(image, size, &params) != CXLPOOL_OK)) {
        fprintf(stderr, "seed format: %s\n", cxlpool_last_error());
        abort();
    }
    seed[len++] = ctl | 0x20; /* the harness fixes the checksum */
    seed[len++] = sizeof(ops);
    memcpy(seed + len, ops, sizeof(ops));
    len += sizeof(ops);
    /* the superblock page and the lock page; the tables are zero */
    memcpy(seed + len, image, sizeof(cxlpool_sb_t));
    len += sizeof(cxlpool_sb_t);
    snprintf(path, sizeof(path), "%s/%s.bin", dir, what);
    f = fopen(path, "wb");
    if ((f == NULL) || (fwrite(seed, 1, len, f) != len) || fclose(f)) {
        perror(path);
        abort();
    }
    free(image);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *dir = getenv("FUZZ_POOL_WRITE_SEEDS");

    (void)argc;
    (void)argv;
    if (dir == NULL) {
        return 0;
    }
    /* ctl: size index | open mode << 2 (1 rdonly, 2 attach, 4 sw) */
    fuzz_sb_seed(dir, "hw-4m-rdonly", 0 | (1 << 2), 4ull << 20, 0, 0, 1, CXL_COH_HW);
    fuzz_sb_seed(dir, "hw-4m-attach", 0 | (2 << 2), 4ull << 20, 8, 32, 1, CXL_COH_HW);
    fuzz_sb_seed(dir, "hw-6m-noattach", 1, 6ull << 20, 16, 64, 1, CXL_COH_HW);
    fuzz_sb_seed(dir, "sw-8m-2hosts", 2 | (6 << 2), 8ull << 20, 8, 32, 2, CXL_COH_SW);
    fuzz_sb_seed(dir, "sw-8m-3hosts", 2 | (1 << 2), 8ull << 20, 0, 0, 3, CXL_COH_SW);
    fuzz_sb_seed(dir, "hw-odd-size", 3 | (2 << 2), (4ull << 20) + 4096, 0, 0, 1, CXL_COH_HW);
    exit(0);
}
