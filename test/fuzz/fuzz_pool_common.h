/*
 * Shared part of the pool harnesses (fuzz_pool_sb, fuzz_pool_records): a
 * pool image in a memory file, opened through the real cxlpool_open() by
 * its /proc/self/fd path, driven by a short program of operations taken
 * from the input, and checked against what the pool layer promises
 * whatever the image holds:
 *   - an accepted superblock describes tables and a heap inside the image,
 *     in order, not overlapping the superblock or the lock lines;
 *   - every extent the layer reports (list, lookup, find, key check,
 *     allocation) lies inside the heap, an allocation inside the own arena;
 *   - nothing outside the lock lines, the attachment table and the extent
 *     table is ever written (the superblock and the heap stay as they were).
 * A violation aborts; ASan catches any access outside the mapping.
 */
#ifndef FUZZ_POOL_COMMON_H
#define FUZZ_POOL_COMMON_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint8_t  *orig;      /* what the image holds, as the harness wrote it */
    uint64_t  size;      /* bytes of the memory file */
    int       fd;
    char      path[64];  /* /proc/self/fd/N */
} fuzz_pool_image_t;

/* How the harness opens the image (fuzz_pool_run flags). */
enum {
    FUZZ_POOL_RDONLY = 1u << 0, /* read-only, no attachment (cxlpool info) */
    FUZZ_POOL_ATTACH = 1u << 1, /* attach: recovery and a slot claim */
    FUZZ_POOL_SW     = 1u << 2, /* open with software coherence */
    FUZZ_POOL_HOST1  = 1u << 3  /* host partition 1 instead of 0 */
};

/* An image of size bytes, zero but for prefix; the caller may edit orig
 * before fuzz_pool_image_write() puts it into the memory file. */
/*
 * Split an input into a control byte, an operation program (its length is
 * the second byte, clipped) and the rest, the image bytes.  0, or -1 for an
 * input shorter than two bytes.
 */
int fuzz_pool_split(const uint8_t **data, size_t *size, uint8_t *ctl,
                    const uint8_t **ops, size_t *nops);

void fuzz_pool_image_init(fuzz_pool_image_t *img, uint64_t size,
                          const uint8_t *prefix, size_t len);
/* Write orig[0, len) into the memory file (the rest is zero). */
void fuzz_pool_image_write(fuzz_pool_image_t *img, uint64_t len);
void fuzz_pool_image_free(fuzz_pool_image_t *img);

/* Fix the checksums of the superblock at the start of orig. */
void fuzz_pool_fix_sb_crc(uint8_t *orig);
/* Fix the checksums of every non-free record the superblock at the start of
 * orig describes (only where the table lies inside the image). */
void fuzz_pool_fix_record_crcs(uint8_t *orig, uint64_t size);

/* Probe and open the image, run the operations ops[0, len) describe, check
 * every result, close, and check what was written. */
void fuzz_pool_run(fuzz_pool_image_t *img, unsigned flags, const uint8_t *ops,
                   size_t len);

#endif
