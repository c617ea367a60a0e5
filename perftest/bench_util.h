/*
 * Helpers shared by the standalone benchmark programs (limits.c,
 * mpi_bench.c), which run-bench.sh compiles on their own.
 */
#ifndef PERFTEST_BENCH_UTIL_H
#define PERFTEST_BENCH_UTIL_H

#include <stddef.h>
#include <stdlib.h>

#define MAX_SIZES 32

/*
 * "64,4k,1M" -> sizes (k/M/G suffixes, powers of 1024); returns how many,
 * or -1 for a malformed list or a zero size.  At most MAX_SIZES.
 */
static int parse_sizes(const char *s, size_t *sizes)
{
    int n = 0;
    char *end;

    while (*s && n < MAX_SIZES) {
        unsigned long long v = strtoull(s, &end, 0);
        if (end == s) {
            return -1;
        }
        if (*end == 'k' || *end == 'K') { v <<= 10; ++end; }
        else if (*end == 'm' || *end == 'M') { v <<= 20; ++end; }
        else if (*end == 'g' || *end == 'G') { v <<= 30; ++end; }
        if (v == 0) {
            return -1;
        }
        sizes[n++] = v;
        s = end;
        if (*s == ',') {
            ++s;
        } else if (*s) {
            return -1;
        }
    }
    return n;
}

#endif
