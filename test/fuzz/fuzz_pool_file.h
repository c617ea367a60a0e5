/*
 * A pool for the harnesses that run the real stack on one (the transport
 * harnesses, fuzz_coll_sig): a memory file formatted in place and named by
 * its /proc/self/fd path, so that nothing is left behind whatever happens
 * to the harness.
 */
#ifndef FUZZ_POOL_FILE_H
#define FUZZ_POOL_FILE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Format a hw-coherent pool of size bytes in a new memory file and put
 * "/proc/self/fd/N" into path (the fd stays open).  uuid: CXLPOOL_UUID_LEN
 * bytes of a fixed identity (seeds that name the pool), or NULL for the
 * one cxlpool_format chose.  Aborts on failure.
 */
void fuzz_pool_file_make(uint64_t size, const char *uuid, char *path,
                         size_t len);

#endif
