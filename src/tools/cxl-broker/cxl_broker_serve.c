/*
 * The subcommands that act on the pool itself: serve (the daemon) and
 * destroy (removing its arena).  Same conventions as cxl_broker_cmds.c.
 */
#include "cxl_broker.h"
#include "brk_srv.h"

#include <ucx_cxl/cxlpool.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- serve ---- */

int cxlb_serve(int argc, char **argv)
{
    brk_serve_params_t prm;
    char addr[64], path[256];
    int rc;

    rc = cxlb_serve_opts(argc, argv, &prm);
    if (rc == CXLB_OPTS_HELP) {
        printf("Usage: cxl-broker serve [OPTIONS]\n\n"
               "Serve datasets from a chunk cache in a CXL pool until "
               "SIGINT or SIGTERM.\nThe cache (an extent '%s' of the pool) "
               "and its index persist: a\nrestarted broker finds its "
               "resident chunks and does not read them again.\n\n"
               "  --pool PATH         pool (default %s, created if absent)\n"
               "  --listen HOST:PORT  where clients connect (default %s;\n"
               "                      0.0.0.0:PORT for clients in other "
               "pods)\n"
               "  --capacity SIZE     cache size when it is created "
               "(default: half the\n"
               "                      pool's largest free range)\n"
               "  --chunk-size SIZE   default chunk size of datasets "
               "(default 4m)\n"
               "  --readers N         reader threads that fill chunks "
               "(default 4)\n"
               "  --readahead N       pin and lru datasets: after a miss, "
               "fill the chunks\n"
               "                      that follow in file order, N fills in "
               "flight, into\n"
               "                      free space only (default: --readers; "
               "0: off)\n"
               "  --buffered          read dataset files through the page "
               "cache (default:\n"
               "                      O_DIRECT for the aligned part of files "
               "from 64 KiB,\n"
               "                      where the file system supports it, so "
               "the files do\n"
               "                      not fill the page cache with a second "
               "copy)\n"
               "  --verify            check the CRC of every resident "
               "chunk at start\n"
               "  --quiet             no log lines on stderr\n\n"
               "UCX_TLS defaults to cxl,tcp: readers in the pod get through "
               "the pool,\nothers over tcp.\n", BRK_ARENA_NAME,
               cxlpool_default_path(path, sizeof(path)),
               cxl_broker_default_addr(addr, sizeof(addr)));
        return 0;
    }
    if (rc != 0) {
        return rc;
    }
    return brk_serve(&prm);
}

/* ---- destroy ---- */

int cxlb_destroy(int argc, char **argv)
{
    static const struct option opts[] = {
        {"pool", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *path = NULL;
    cxlpool_params_t pp;
    cxlpool_extent_t ext;
    cxlpool_t *pool;
    char dpath[256], addr[BRK_ADDR_MAX];
    const brk_hdr_t *hdr;
    int opt, pid;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "p:h", opts, NULL)) != -1) {
        if (opt == 'p') {
            path = optarg;
        } else if (opt == 'h') {
            printf("Usage: cxl-broker destroy [--pool PATH]\n\nRemove the "
                   "broker's arena (index and cached chunks) from the pool.\n"
                   "Refused while a broker serves it.\n\n"
                   "  --pool PATH   pool (default %s)\n",
                   cxlpool_default_path(dpath, sizeof(dpath)));
            return 0;
        } else {
            return 2;
        }
    }
    cxlpool_params_init(&pp);
    pp.path  = path;
    pp.flags = CXLPOOL_NO_HEARTBEAT;
    if (cxlpool_open(&pp, &pool) != CXLPOOL_OK) {
        return cxlb_fail("%s", cxlpool_last_error());
    }
    if (cxlpool_lookup(pool, BRK_ARENA_NAME, &ext) != CXLPOOL_OK) {
        cxlpool_close(pool);
        return cxlb_fail("destroy: the pool has no broker arena");
    }
    hdr = (const brk_hdr_t*)((const uint8_t*)cxlpool_base(pool) + ext.offset);
    if ((hdr->magic == BRK_MAGIC) && hdr->broker_token &&
        cxlpool_owner_alive(pool, hdr->broker_token)) {
        /* the header is in the mapping cxlpool_close() removes */
        pid = hdr->broker_pid;
        snprintf(addr, sizeof(addr), "%.*s", (int)sizeof(hdr->addr) - 1,
                 hdr->addr);
        for (opt = 0; addr[opt] != '\0'; ++opt) {  /* pool bytes: one line */
            if ((addr[opt] < 0x20) || (addr[opt] > 0x7e)) {
                addr[opt] = '?';
            }
        }
        cxlpool_close(pool);
        return cxlb_fail("destroy: a broker (pid %d) serves this pool at "
                         "%s: stop it first", pid, addr);
    }
    if (cxlpool_free(pool, ext.offset) != CXLPOOL_OK) {
        cxlpool_close(pool);
        return cxlb_fail("destroy: %s", cxlpool_last_error());
    }
    cxlpool_close(pool);
    printf("broker arena removed (%" PRIu64 " MiB)\n", ext.length >> 20);
    return 0;
}
