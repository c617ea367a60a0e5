/*
 * The client subcommands (add, ls, warm, stat, evict, rm): each parses its
 * own options, prints a true --help, talks to the broker through
 * libcxl_broker, and fails with one line on stderr and a non-zero exit.
 */
#include "cxl_broker.h"
#include "brk_srv.h"

#include <ucx_cxl/cxlpool.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CXLB_OPT_BROKER \
    "  --broker HOST:PORT  the broker (default: $" CXL_BROKER_ENV \
    ", else this user's default address)\n"

static int cxlb_common_opt(int opt, cxlb_common_t *c)
{
    switch (opt) {
    case 'b':
        c->broker = optarg;
        return 1;
    case 'j':
        c->json = 1;
        return 1;
    default:
        return 0;
    }
}

/* ---- add ---- */

static void cxlb_free_paths(char **paths, unsigned n)
{
    unsigned i;

    for (i = 0; i < n; ++i) {
        free(paths[i]);
    }
    free(paths);
}

int cxlb_add(int argc, char **argv)
{
    static const struct option opts[] = {
        {"format", required_argument, NULL, 'f'},
        {"record-size", required_argument, NULL, 'R'},
        {"chunk-size", required_argument, NULL, 's'},
        {"policy", required_argument, NULL, 'P'},
        {"pin-bytes", required_argument, NULL, 'n'},
        {"broker", required_argument, NULL, 'b'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    cxl_broker_add_params_t prm;
    cxl_broker_dsinfo_t info;
    cxlb_common_t c = {0};
    brk_format_t fmt;
    brk_policy_t pol;
    cxl_broker_t *b;
    char sz[32], **paths;
    unsigned npaths, i;
    int opt, rc;

    cxl_broker_add_params_init(&prm);
    optind = 1;
    while ((opt = getopt_long(argc, argv, "f:R:s:P:n:b:jh", opts, NULL)) != -1) {
        if (cxlb_common_opt(opt, &c)) {
            continue;
        }
        switch (opt) {
        case 'f':
            if (brk_format_parse(optarg, &fmt)) {
                return cxlb_fail("--format '%s': auto, files, npy, tar or raw",
                                 optarg);
            }
            prm.format = (cxl_broker_format_t)fmt;
            break;
        case 'R':
            if (cxlb_size("--record-size", optarg, &prm.record_size)) {
                return 1;
            }
            break;
        case 's':
            if (cxlb_size("--chunk-size", optarg, &prm.chunk_size)) {
                return 1;
            }
            break;
        case 'P':
            if (brk_policy_parse(optarg, &pol)) {
                return cxlb_fail("--policy '%s': pin, lru or plan", optarg);
            }
            prm.policy = (cxl_broker_policy_t)pol;
            break;
        case 'n':
            if (cxlb_size("--pin-bytes", optarg, &prm.pin_bytes)) {
                return 1;
            }
            break;
        case 'h':
            printf("Usage: cxl-broker add [OPTIONS] NAME PATH...\n\n"
                   "Register dataset NAME (the broker indexes its samples once). "
                   "Adding a\nchanged dataset publishes a new version; readers "
                   "of the old one finish on\nit. An unchanged one keeps its "
                   "version.\n\n"
                   "  --format F        auto (default: npy if every PATH is .npy, "
                   "tar if\n"
                   "                    every PATH is .tar, else files), files "
                   "(one sample\n"
                   "                    per file of the directories), npy (one per "
                   "row),\n"
                   "                    tar (WebDataset shards: one per key), raw "
                   "(fixed-size\n"
                   "                    records, needs --record-size)\n"
                   "  --record-size N   bytes per record of raw files\n"
                   "  --chunk-size SIZE chunk size (default: the broker's, 4m)\n"
                   "  --policy P        pin (default: a fixed subset stays "
                   "resident, the rest\n"
                   "                    streams), lru, or plan (evict by next "
                   "use in the epoch\n"
                   "                    order readers announce)\n"
                   "  --pin-bytes SIZE  pin: bytes that stay (default: the "
                   "capacity less a\n"
                   "                    streaming window)\n"
                   CXLB_OPT_BROKER
                   "  --json            print the result as JSON\n");
            return 0;
        default:
            return 2;
        }
    }
    if (argc - optind < 2) {
        return cxlb_fail("add: NAME and at least one PATH (--help)");
    }
    if ((prm.format == CXL_BROKER_FMT_RAW) && (prm.record_size == 0)) {
        return cxlb_fail("add: --format raw needs --record-size");
    }
    /* the broker reads the files from its own working directory */
    npaths = (unsigned)(argc - optind - 1);
    paths  = calloc(npaths, sizeof(*paths));
    if (paths == NULL) {
        return cxlb_fail("out of memory");
    }
    for (i = 0; i < npaths; ++i) {
        paths[i] = realpath(argv[optind + 1 + i], NULL);
        if (paths[i] == NULL) {
            rc = cxlb_fail("add %s: %s: %s", argv[optind], argv[optind + 1 + i],
                           strerror(errno));
            cxlb_free_paths(paths, i);
            return rc;
        }
    }
    if (cxlb_connect(&c, &b)) {
        cxlb_free_paths(paths, npaths);
        return 1;
    }
    rc = cxl_broker_add(b, argv[optind], (const char *const*)paths, npaths,
                        &prm, &info);
    cxlb_free_paths(paths, npaths);
    if (rc != CXL_BROKER_OK) {
        cxl_broker_disconnect(b);
        return cxlb_fail("add %s: %s", argv[optind], cxl_broker_last_error());
    }
    cxlb_human(info.bytes, sz, sizeof(sz));
    if (c.json) {
        printf("{\"name\": ");
        cxlb_json_str(stdout, info.name);
        printf(", \"version\": %u, \"new\": %s, \"format\": \"%s\", "
               "\"samples\": %" PRIu64 ", \"chunks\": %" PRIu64 ", \"files\": %"
               PRIu64 ", \"bytes\": %" PRIu64 "}\n", info.version,
               info.epoch ? "true" : "false", brk_format_name(info.format),
               info.nsamples, info.nchunks, info.nfiles, info.bytes);
    } else {
        printf("%s version %u%s: %" PRIu64 " samples, %" PRIu64 " chunks, %"
               PRIu64 " files, %s (%s, %s)\n", info.name, info.version,
               info.epoch ? "" : " (unchanged)", info.nsamples, info.nchunks,
               info.nfiles, sz, brk_format_name(info.format),
               brk_policy_name(info.policy));
    }
    cxl_broker_disconnect(b);
    return 0;
}

/* ---- ls ---- */

typedef struct {
    int json;
    int n;
} cxlb_ls_t;

static void cxlb_ls_cb(const cxl_broker_dsinfo_t *i, void *arg)
{
    cxlb_ls_t *ls = arg;
    char sz[32], rs[32];

    if (ls->json) {
        printf("%s{\"name\": ", ls->n ? ",\n " : "");
        cxlb_json_str(stdout, i->name);
        printf(", \"version\": %u, \"active\": %s, \"format\": \"%s\", "
               "\"policy\": \"%s\", \"samples\": %" PRIu64 ", \"chunks\": %"
               PRIu64 ", \"files\": %" PRIu64 ", \"bytes\": %" PRIu64
               ", \"resident_chunks\": %" PRIu64 ", \"resident_bytes\": %"
               PRIu64 ", \"pinned_bytes\": %" PRIu64 ", \"readers\": %u, "
               "\"epoch\": %u}", i->version, i->active ? "true" : "false",
               brk_format_name(i->format), brk_policy_name(i->policy),
               i->nsamples, i->nchunks, i->nfiles, i->bytes, i->resident_chunks,
               i->resident_bytes, i->pin_bytes, i->readers, i->epoch);
    } else {
        if (ls->n == 0) {
            printf("%-20s %4s %-8s %-6s %-5s %10s %10s %10s %8s\n", "NAME", "VER",
                   "STATE", "FORMAT", "POL", "SAMPLES", "SIZE", "RESIDENT",
                   "READERS");
        }
        cxlb_human(i->bytes, sz, sizeof(sz));
        cxlb_human(i->resident_bytes, rs, sizeof(rs));
        printf("%-20s %4u %-8s %-6s %-5s %10" PRIu64 " %10s %10s %8u\n",
               i->name, i->version, i->active ? "active" : "retiring",
               brk_format_name(i->format), brk_policy_name(i->policy),
               i->nsamples, sz, rs, i->readers);
    }
    ls->n++;
}

static int cxlb_simple_opts(int argc, char **argv, cxlb_common_t *c,
                            const char *usage, int json_ok)
{
    static const struct option opts[] = {
        {"broker", required_argument, NULL, 'b'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int opt;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "b:jh", opts, NULL)) != -1) {
        if ((opt == 'j') && !json_ok) {
            cxlb_fail("%s: no --json", argv[0]);
            return 2;
        }
        if (cxlb_common_opt(opt, c)) {
            continue;
        }
        if (opt == 'h') {
            printf("%s" CXLB_OPT_BROKER "%s", usage,
                   json_ok ? "  --json            print JSON\n" : "");
            return 1;
        }
        return 2;
    }
    return 0;
}

int cxlb_ls(int argc, char **argv)
{
    cxlb_common_t c = {0};
    cxlb_ls_t ls = {0};
    cxl_broker_t *b;
    int rc;

    rc = cxlb_simple_opts(argc, argv, &c, "Usage: cxl-broker ls [OPTIONS]\n\n"
                          "List the datasets and how much of each is "
                          "resident.\n\n", 1);
    if (rc) {
        return rc - 1;
    }
    if (optind != argc) {
        return cxlb_fail("ls: unexpected argument '%s'", argv[optind]);
    }
    if (cxlb_connect(&c, &b)) {
        return 1;
    }
    ls.json = c.json;
    if (c.json) {
        printf("[");
    }
    rc = cxl_broker_list(b, cxlb_ls_cb, &ls);
    if (c.json) {
        printf("]\n");
    } else if ((rc == CXL_BROKER_OK) && (ls.n == 0)) {
        printf("no datasets (cxl-broker add NAME PATH... registers one)\n");
    }
    cxl_broker_disconnect(b);
    return (rc == CXL_BROKER_OK) ? 0 : cxlb_fail("ls: %s", cxl_broker_last_error());
}

/* ---- warm ---- */

static void cxlb_warm_cb(uint64_t done, uint64_t total, void *arg)
{
    cxlb_progress_update(arg, done, total);
}

int cxlb_warm(int argc, char **argv)
{
    static const struct option opts[] = {
        {"version", required_argument, NULL, 'V'},
        {"broker", required_argument, NULL, 'b'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    cxlb_common_t c = {0};
    cxlb_progress_t pr;
    cxl_broker_ds_t *ds;
    cxl_broker_stat_t st0, st1;
    cxl_broker_t *b;
    uint64_t version = 0;
    uint64_t total = 0, done = 0, i;
    char what[80];
    int opt, rc;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "V:b:h", opts, NULL)) != -1) {
        if (cxlb_common_opt(opt, &c)) {
            continue;
        }
        if (opt == 'V') {
            if (cxlpool_parse_uint(optarg, UINT32_MAX, &version)) {
                return cxlb_fail("--version '%s': a number from 0 to %u",
                                 optarg, UINT32_MAX);
            }
            continue;
        }
        if (opt == 'h') {
            printf("Usage: cxl-broker warm [OPTIONS] NAME\n\n"
                   "Load dataset NAME into the pool (what its policy lets "
                   "stay), with a\nprogress bar on a terminal and plain lines "
                   "otherwise.\n\n"
                   "  --version N       that version (default: the newest)\n"
                   CXLB_OPT_BROKER);
            return 0;
        }
        return 2;
    }
    if (argc - optind != 1) {
        return cxlb_fail("warm: one dataset NAME (--help)");
    }
    if (cxlb_connect(&c, &b)) {
        return 1;
    }
    if (cxl_broker_open(b, argv[optind], (uint32_t)version, &ds) != CXL_BROKER_OK) {
        cxl_broker_disconnect(b);
        return cxlb_fail("warm: %s", cxl_broker_last_error());
    }
    for (i = 0; i < cxl_broker_nsamples(ds); ++i) {
        total += cxl_broker_sample_len(ds, i);
    }
    (void)total;
    cxl_broker_stat(b, &st0, NULL, NULL);
    snprintf(what, sizeof(what), "warm %s", argv[optind]);
    cxlb_progress_init(&pr, what);
    rc = cxl_broker_warm(ds, cxlb_warm_cb, &pr);
    cxl_broker_stat(b, &st1, NULL, NULL);
    {
        /* the last progress call had the final figures */
        cxl_broker_dsinfo_t info;
        cxl_broker_ds_info(ds, &info);
        done = st1.file_bytes_read - st0.file_bytes_read;
    }
    cxl_broker_close(ds);
    cxl_broker_disconnect(b);
    if (rc != CXL_BROKER_OK) {
        fprintf(stderr, "\n");
        return cxlb_fail("warm %s: %s", argv[optind], cxl_broker_last_error());
    }
    {
        char rd[32];
        cxlb_human(done, rd, sizeof(rd));
        fprintf(stderr, "warm %s: done, %s read from files\n", argv[optind], rd);
    }
    return 0;
}

/* ---- stat ---- */

typedef struct {
    int json;
    int n;
} cxlb_stat_t;

static void cxlb_stat_cb(const cxl_broker_epoch_stat_t *e, void *arg)
{
    cxlb_stat_t *s = arg;
    uint64_t req = e->hits + e->misses;
    double rate = req ? 100.0 * (double)e->hits / (double)req : 0;

    if (s->json) {
        printf("%s{\"name\": ", s->n ? ", " : "");
        cxlb_json_str(stdout, e->name);
        printf(", \"version\": %u, \"epoch\": %u, \"hits\": %" PRIu64
               ", \"misses\": %" PRIu64 ", \"hit_rate\": %.4f, \"fills\": %"
               PRIu64 ", \"fill_bytes\": %" PRIu64 ", \"evictions\": %" PRIu64
               "}", e->version, e->epoch, e->hits, e->misses, rate / 100,
               e->fills, e->fill_bytes, e->evictions);
    } else {
        if (s->n == 0) {
            printf("\n%-20s %4s %6s %10s %10s %8s %8s %10s\n", "DATASET", "VER",
                   "EPOCH", "HITS", "MISSES", "HIT%", "FILLS", "EVICTIONS");
        }
        printf("%-20s %4u %6u %10" PRIu64 " %10" PRIu64 " %7.1f%% %8" PRIu64
               " %10" PRIu64 "\n", e->name, e->version, e->epoch, e->hits,
               e->misses, rate, e->fills, e->evictions);
    }
    s->n++;
}

int cxlb_stat(int argc, char **argv)
{
    cxlb_common_t c = {0};
    cxlb_stat_t s = {0};
    cxl_broker_stat_t st;
    cxl_broker_t *b;
    char cap[32], used[32], rd[32];
    int rc;

    rc = cxlb_simple_opts(argc, argv, &c, "Usage: cxl-broker stat [OPTIONS]\n\n"
                          "The cache's counters and, per dataset and epoch, "
                          "hits and misses of chunk\nrequests (readers announce "
                          "epochs; see cxl_broker_epoch()).\n\n", 1);
    if (rc) {
        return rc - 1;
    }
    if (optind != argc) {
        return cxlb_fail("stat: unexpected argument '%s'", argv[optind]);
    }
    if (cxlb_connect(&c, &b)) {
        return 1;
    }
    s.json = c.json;
    if (c.json) {
        rc = cxl_broker_stat(b, &st, NULL, NULL);
        if (rc == CXL_BROKER_OK) {
            printf("{\"pool\": ");
            cxlb_json_str(stdout, st.pool);
            printf(", \"addr\": ");
            cxlb_json_str(stdout, st.addr);
            printf(", \"capacity\": %" PRIu64 ", \"used\": %" PRIu64
                   ", \"chunk_bytes\": %" PRIu64 ", \"resident_chunks\": %"
                   PRIu64 ", \"pinned_chunks\": %" PRIu64 ", \"fills\": %"
                   PRIu64 ", \"fill_bytes\": %" PRIu64 ", \"fill_errors\": %"
                   PRIu64 ", \"file_bytes_read\": %" PRIu64
                   ", \"direct_bytes\": %" PRIu64 ", \"hits\": %"
                   PRIu64 ", \"misses\": %" PRIu64 ", \"evictions\": %" PRIu64
                   ", \"readaheads\": %" PRIu64 ", \"clients\": %u, "
                   "\"boot\": %u, \"epochs\": [",
                   st.capacity, st.used, st.chunk_bytes, st.resident_chunks,
                   st.pinned_chunks, st.fills, st.fill_bytes, st.fill_errors,
                   st.file_bytes_read, st.direct_bytes, st.hits, st.misses,
                   st.evictions, st.readaheads, st.clients, st.boot);
            rc = cxl_broker_stat(b, &st, cxlb_stat_cb, &s);
            printf("]}\n");
        }
    } else {
        rc = cxl_broker_stat(b, &st, NULL, NULL);
        if (rc == CXL_BROKER_OK) {
            cxlb_human(st.capacity, cap, sizeof(cap));
            cxlb_human(st.used, used, sizeof(used));
            cxlb_human(st.file_bytes_read, rd, sizeof(rd));
            printf("broker %s, pool %s (start %u)\n"
                   "cache: %s of %s used, %" PRIu64 " chunks resident, %"
                   PRIu64 " pinned\n"
                   "requests: %" PRIu64 " hits, %" PRIu64 " misses; fills %"
                   PRIu64 " (%" PRIu64 " failed, %" PRIu64 " read ahead), "
                   "%s read from files; %" PRIu64 " evictions; %u clients\n",
                   st.addr, st.pool, st.boot, used, cap, st.resident_chunks,
                   st.pinned_chunks, st.hits, st.misses, st.fills,
                   st.fill_errors, st.readaheads, rd, st.evictions,
                   st.clients);
            rc = cxl_broker_stat(b, &st, cxlb_stat_cb, &s);
        }
    }
    cxl_broker_disconnect(b);
    return (rc == CXL_BROKER_OK) ? 0 : cxlb_fail("stat: %s",
                                                 cxl_broker_last_error());
}

/* ---- evict, rm ---- */

int cxlb_evict(int argc, char **argv)
{
    cxlb_common_t c = {0};
    cxl_broker_t *b;
    uint64_t n = 0;
    int rc;

    rc = cxlb_simple_opts(argc, argv, &c, "Usage: cxl-broker evict [OPTIONS] "
                          "[NAME]\n\nDrop the resident chunks of NAME (default: "
                          "of every dataset) that no reader\npins, pinned "
                          "subsets included.\n\n", 0);
    if (rc) {
        return rc - 1;
    }
    if (argc - optind > 1) {
        return cxlb_fail("evict: at most one dataset NAME");
    }
    if (cxlb_connect(&c, &b)) {
        return 1;
    }
    rc = cxl_broker_evict(b, (optind < argc) ? argv[optind] : NULL, &n);
    cxl_broker_disconnect(b);
    if (rc != CXL_BROKER_OK) {
        return cxlb_fail("evict: %s", cxl_broker_last_error());
    }
    printf("%" PRIu64 " chunks evicted\n", n);
    return 0;
}

int cxlb_rm(int argc, char **argv)
{
    cxlb_common_t c = {0};
    cxl_broker_t *b;
    int rc;

    rc = cxlb_simple_opts(argc, argv, &c, "Usage: cxl-broker rm [OPTIONS] NAME"
                          "\n\nRetire dataset NAME: no new readers; its chunks "
                          "are freed when the last\nreader closes it.\n\n", 0);
    if (rc) {
        return rc - 1;
    }
    if (argc - optind != 1) {
        return cxlb_fail("rm: one dataset NAME");
    }
    if (cxlb_connect(&c, &b)) {
        return 1;
    }
    rc = cxl_broker_rm(b, argv[optind]);
    cxl_broker_disconnect(b);
    return (rc == CXL_BROKER_OK) ? 0 : cxlb_fail("rm: %s", cxl_broker_last_error());
}
