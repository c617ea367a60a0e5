/*
 * Option values of cxl-broker: sizes, numbers, addresses, and the whole
 * option list of serve, apart from the commands themselves so that the
 * fuzz harness parses with exactly this code (test/fuzz/fuzz_cli_parse.c).
 */
#include "cxl_broker.h"
#include "brk_wire.h"

#include <ucx_cxl/cxlpool.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int cxlb_fail(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "cxl-broker: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

int cxlb_size(const char *opt, const char *arg, uint64_t *size)
{
    if (cxlpool_parse_size(arg, size) != 0) {
        return cxlb_fail("%s '%s': not a size (e.g. 4m, 2g, 4096)", opt, arg);
    }
    return 0;
}

int cxlb_serve_opts(int argc, char **argv, brk_serve_params_t *prm)
{
    static const struct option opts[] = {
        {"pool", required_argument, NULL, 'p'},
        {"listen", required_argument, NULL, 'l'},
        {"capacity", required_argument, NULL, 'c'},
        {"chunk-size", required_argument, NULL, 's'},
        {"readers", required_argument, NULL, 'r'},
        {"readahead", required_argument, NULL, 'a'},
        {"buffered", no_argument, NULL, 'b'},
        {"verify", no_argument, NULL, 'v'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    char host[BRK_ADDR_MAX], err[BRK_ADDR_MAX + 128];
    uint64_t readers, ra;
    uint16_t port;
    int opt;

    memset(prm, 0, sizeof(*prm));
    optind = 1;
    while ((opt = getopt_long(argc, argv, "p:l:c:s:r:a:bvqh", opts, NULL)) != -1) {
        switch (opt) {
        case 'p':
            prm->pool_path = optarg;
            break;
        case 'l':
            if (brk_addr_split(optarg, 1, host, sizeof(host), &port, err,
                               sizeof(err))) {
                return cxlb_fail("--listen: %s", err);
            }
            prm->listen = optarg;
            break;
        case 'c':
            if (cxlb_size("--capacity", optarg, &prm->capacity)) {
                return 1;
            }
            break;
        case 's':
            if (cxlb_size("--chunk-size", optarg, &prm->chunk_size)) {
                return 1;
            }
            break;
        case 'r':
            if (cxlpool_parse_uint(optarg, 256, &readers) || (readers == 0)) {
                return cxlb_fail("--readers '%s': 1 to 256", optarg);
            }
            prm->readers = (unsigned)readers;
            break;
        case 'a':
            if (cxlpool_parse_uint(optarg, 256, &ra)) {
                return cxlb_fail("--readahead '%s': 0 to 256", optarg);
            }
            prm->readahead     = (unsigned)ra;
            prm->readahead_set = 1;
            break;
        case 'b':
            prm->buffered = 1;
            break;
        case 'v':
            prm->verify = 1;
            break;
        case 'q':
            prm->quiet = 1;
            break;
        case 'h':
            return CXLB_OPTS_HELP;
        default:
            return 2;
        }
    }
    if (optind != argc) {
        return cxlb_fail("serve: unexpected argument '%s'", argv[optind]);
    }
    return 0;
}
