/*
 * Test helper: attach a pool, allocate extents, fill them with a pattern,
 * print them, and optionally hold them until killed.
 *
 *   cxlpool_holder PATH [-n COUNT] [-s SIZE] [-N NAME] [-p] [-H] [-L MS] [-B]
 *     -n COUNT  extents to allocate (default 1)
 *     -s SIZE   bytes per extent (default 4096)
 *     -N NAME   name the first extent
 *     -p        persistent allocation
 *     -H        hold: print "ready" and sleep until killed
 *     -L MS     lease of the attachment (default: the library's)
 *     -B        keep the lease alive with the heartbeat thread (without it
 *               a process on another host sees the holder dead once the
 *               lease has run out; on its own host by pid)
 *
 * Exits 0 on success, 1 with the library's message on failure.
 */
#include <ucx_cxl/cxlpool.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    unsigned long count = 1;
    uint64_t size       = 4096;
    const char *name    = NULL;
    unsigned flags      = 0;
    unsigned long lease_ms = 0;
    int hold = 0, beat = 0, c;
    cxlpool_params_t params;
    cxlpool_extent_t ext;
    cxlpool_status_t status;
    cxlpool_t *pool;
    unsigned long i;

    while ((c = getopt(argc, argv, "n:s:N:pHL:B")) != -1) {
        switch (c) {
        case 'n':
            count = strtoul(optarg, NULL, 0);
            break;
        case 's':
            if (cxlpool_parse_size(optarg, &size) < 0) {
                fprintf(stderr, "cxlpool_holder: bad size '%s'\n", optarg);
                return 2;
            }
            break;
        case 'N':
            name = optarg;
            break;
        case 'p':
            flags |= CXLPOOL_ALLOC_PERSIST;
            break;
        case 'H':
            hold = 1;
            break;
        case 'L':
            lease_ms = strtoul(optarg, NULL, 0);
            break;
        case 'B':
            beat = 1;
            break;
        default:
            fprintf(stderr, "usage: cxlpool_holder PATH [-n N] [-s SIZE] "
                    "[-N NAME] [-p] [-H] [-L MS] [-B]\n");
            return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "cxlpool_holder: need exactly one pool path\n");
        return 2;
    }

    cxlpool_params_init(&params);
    params.path  = argv[optind];
    params.flags    = beat ? 0 : CXLPOOL_NO_HEARTBEAT;
    params.lease_ms = (uint32_t)lease_ms;
    status       = cxlpool_open(&params, &pool);
    if (status != CXLPOOL_OK) {
        fprintf(stderr, "cxlpool_holder: %s\n", cxlpool_last_error());
        return 1;
    }

    for (i = 0; i < count; ++i) {
        status = cxlpool_alloc(pool, size, 0, (i == 0) ? name : NULL, flags,
                               &ext);
        if (status != CXLPOOL_OK) {
            fprintf(stderr, "cxlpool_holder: %s\n", cxlpool_last_error());
            cxlpool_close(pool);
            return 1;
        }
        memset((uint8_t*)cxlpool_base(pool) + ext.offset,
               (int)(ext.offset >> 6) & 0xff, ext.length);
        printf("extent %" PRIu64 " %" PRIu64 "\n", ext.offset, ext.length);
    }

    if (hold) {
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        for (;;) {
            pause();
        }
    }

    fflush(stdout);
    cxlpool_close(pool);
    return 0;
}
