/*
 * Helpers shared by the libFuzzer harnesses: most parsers under test read
 * a file by path (the broker's scanners) or a structure in a mapping (the
 * pool's validators), so the input is handed over as an anonymous memory
 * file whose /proc/self/fd path the parser opens.
 */
#ifndef FUZZ_INPUT_H
#define FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>

/*
 * Write data into a fresh memfd (sealed size: exactly size bytes) and put
 * its path, "/proc/self/fd/N", into path.  Returns the fd; the harness
 * closes it.  Aborts on failure: a harness that cannot set up its input
 * must not report "no crash".
 */
int fuzz_input_memfd(const uint8_t *data, size_t size, const char *name,
                     char *path, size_t pathlen);

#endif
