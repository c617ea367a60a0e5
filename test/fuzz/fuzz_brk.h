/*
 * Checks shared by the broker's harnesses: what a scanner produced, and
 * a walk over an accepted metadata blob the way its readers index it.
 */
#ifndef FUZZ_BRK_H
#define FUZZ_BRK_H

#include "brk_scan.h"

#include <stddef.h>
#include <stdint.h>

/* abort() with a message: a property of the code under test failed */
void fuzz_brk_fail(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));

/*
 * A scanner accepted its input (nfiles files of the given sizes): every
 * segment inside its file, bytes the sum of the samples, and the blob
 * written from it accepted by brk_meta_check and safe to walk.
 */
void fuzz_brk_check_desc(const brk_desc_t *d, const uint64_t *file_sizes,
                         uint64_t nfiles);

/* A refusal is one non-empty line. */
void fuzz_brk_check_err(const char *err);

/*
 * Walk a blob brk_meta_check accepted (8-aligned, len bytes) as the
 * broker's fills, its plan and the client library index it: every sample,
 * chunk, segment, file and string inside the blob, every index inside the
 * array it selects from, every byte range inside its chunk.
 */
void fuzz_brk_walk_meta(const void *blob, uint64_t len);

#endif
