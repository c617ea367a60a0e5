/*
 * cxlpool: create, list, inspect, check and destroy ucx-cxl pools.
 *
 * Exit codes: 0 success, 1 operation failed or pool damaged, 2 usage error.
 * Every error is one line on stderr.
 */
#include <ucx_cxl/cxlpool.h>

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef HAVE_CONFIG_H
#include "ucx_cxl_config.h"
#endif

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "dev"
#endif

#define EXIT_USAGE 2
/* long-only options get values outside the char range of short options */
#define LONGOPT(_c) (0x100 + (_c))

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;
    const char *help;
} cxlpool_cmd_t;

static const cxlpool_cmd_t *cur_cmd;

static void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2),
                                                           noreturn));

static void die_usage(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "cxlpool: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see 'cxlpool %s%s--help')\n",
            cur_cmd ? cur_cmd->name : "", cur_cmd ? " " : "");
    exit(EXIT_USAGE);
}

static void bad_option(int c, char **argv, const struct option *opts)
    __attribute__((noreturn));

/*
 * getopt_long reports three cases with '?' or ':': an unknown long option
 * (optopt 0), a long flag given "=value" (optopt = its LONGOPT val) and an
 * unknown short option.
 */
static void bad_option(int c, char **argv, const struct option *opts)
{
    const struct option *o;

    if (c == ':') {
        die_usage("option '%s' needs a value", argv[optind - 1]);
    }
    if (optopt == 0) {
        die_usage("unknown option '%s'", argv[optind - 1]);
    }
    for (o = opts; (optopt >= LONGOPT(0)) && (o->name != NULL); ++o) {
        if ((o->val == optopt) && (o->has_arg == no_argument)) {
            die_usage("option '--%s' takes no value (got '%s')", o->name,
                      argv[optind - 1]);
        }
    }
    die_usage("unknown option '-%c'", optopt);
}

static int fail(cxlpool_status_t status)
{
    const char *msg = cxlpool_last_error();

    fprintf(stderr, "cxlpool: %s\n", (msg && *msg) ? msg :
            cxlpool_strerror(status));
    return 1;
}

static void uuid_str(const uint8_t *u, char *buf)
{
    sprintf(buf, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
            "%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3], u[4], u[5],
            u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

static const char *backend_name(cxlpool_backend_t b)
{
    switch (b) {
    case CXLPOOL_BACKEND_DEVDAX:
        return "devdax";
    case CXLPOOL_BACKEND_FILE:
        return "file";
    case CXLPOOL_BACKEND_EMULATE_NC:
        return "emulate-nc";
    default:
        return "emulated";
    }
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; ++s) {
        unsigned char c = (unsigned char)*s;
        if ((c == '"') || (c == '\\')) {
            fprintf(f, "\\%c", c);
        } else if (c < 0x20) {
            fprintf(f, "\\u%04x", c);
        } else {
            fputc(c, f);
        }
    }
    fputc('"', f);
}

static const char *path_arg(int argc, char **argv, char *defbuf, size_t len)
{
    if (optind < argc - 1) {
        die_usage("unexpected argument '%s'", argv[optind + 1]);
    }
    if (optind == argc - 1) {
        return argv[optind];
    }
    return cxlpool_default_path(defbuf, len);
}

static unsigned long parse_uint(const char *opt, const char *str, unsigned long max)
{
    uint64_t v;

    if (cxlpool_parse_uint(str, max, &v) != 0) {
        die_usage("invalid value '%s' for %s", str, opt);
    }
    return (unsigned long)v;
}

/* ---- create ---- */

static int cmd_create(int argc, char **argv)
{
    static const struct option opts[] = {
        {"size", required_argument, NULL, 's'},
        {"group", no_argument, NULL, LONGOPT('g')},
        {"numa-node", required_argument, NULL, LONGOPT('n')},
        {"max-extents", required_argument, NULL, LONGOPT('e')},
        {"max-attach", required_argument, NULL, LONGOPT('a')},
        {"coherence", required_argument, NULL, LONGOPT('c')},
        {"hosts", required_argument, NULL, LONGOPT('h')},
        {"force", no_argument, NULL, LONGOPT('f')},
        {NULL, 0, NULL, 0}
    };
    cxlpool_params_t params;
    cxlpool_status_t status;
    cxlpool_info_t info;
    char defpath[64], uuid[40];
    cxlpool_t *pool;
    int c;

    cxlpool_params_init(&params);
    params.flags = CXLPOOL_CREATE | CXLPOOL_EXCL | CXLPOOL_NO_ATTACH;
    while ((c = getopt_long(argc, argv, ":s:", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            if ((cxlpool_parse_size(optarg, &params.size) < 0) ||
                (params.size == 0)) {
                die_usage("invalid size '%s' (examples: 64M, 1G, 4GiB)",
                          optarg);
            }
            break;
        case LONGOPT('g'):
            params.flags |= CXLPOOL_GROUP;
            break;
        case LONGOPT('n'):
            params.numa_node = (int)parse_uint("--numa-node", optarg, 4095);
            break;
        case LONGOPT('e'):
            params.max_extents = parse_uint("--max-extents", optarg, 1u << 24);
            break;
        case LONGOPT('a'):
            params.max_attach = parse_uint("--max-attach", optarg, 65536);
            break;
        case LONGOPT('c'):
            if (cxl_coh_mode_parse(optarg, &params.coherence) < 0) {
                die_usage("invalid coherence '%s' (hw or sw)", optarg);
            }
            break;
        case LONGOPT('h'):
            params.nr_hosts = parse_uint("--hosts", optarg, ULONG_MAX);
            if ((params.nr_hosts == 0) ||
                (params.nr_hosts > CXLPOOL_MAX_HOSTS)) {
                die_usage("invalid value '%s' for --hosts (1..%d)", optarg,
                          CXLPOOL_MAX_HOSTS);
            }
            break;
        case LONGOPT('f'):
            params.flags |= CXLPOOL_FORCE;
            break;
        default:
            bad_option(c, argv, opts);
        }
    }

    params.path = path_arg(argc, argv, defpath, sizeof(defpath));
    status      = cxlpool_open(&params, &pool);
    if (status != CXLPOOL_OK) {
        return fail(status);
    }

    cxlpool_info(pool, &info);
    uuid_str(info.uuid, uuid);
    printf("created %s pool %s: %" PRIu64 " bytes, uuid %s",
           backend_name(info.backend), info.path, info.size, uuid);
    if (info.nr_hosts > 1) {
        printf(", %u host partitions", info.nr_hosts);
    }
    printf("\n");
    cxlpool_close(pool);
    return 0;
}

/* ---- list ---- */

typedef struct {
    int json;
    int count;
} list_ctx_t;

static void list_devdax_cb(const cxlpool_devdax_info_t *dev, void *arg)
{
    list_ctx_t *ctx = arg;
    cxlpool_info_t info;
    int is_pool = (cxlpool_probe(dev->path, &info) == CXLPOOL_OK);

    if (ctx->json) {
        printf("%s{\"kind\":\"devdax\",\"path\":", ctx->count ? "," : "");
        json_str(stdout, dev->path);
        printf(",\"size\":%" PRIu64 ",\"align\":%" PRIu64 ",\"numa_node\":%d,"
               "\"region\":%d,\"enabled\":%s,\"system_ram\":%s,"
               "\"pool\":%s}", dev->size, dev->align, dev->numa_node,
               dev->region_id, dev->enabled ? "true" : "false",
               dev->system_ram ? "true" : "false", is_pool ? "true" : "false");
    } else {
        printf("devdax    %-40s %14" PRIu64 "  align %" PRIu64 " node %d%s%s\n",
               dev->path, dev->size, dev->align, dev->numa_node,
               dev->system_ram ? " (system-ram: not usable)" : "",
               is_pool ? " [pool]" : "");
    }
    ctx->count++;
}

static void list_dir(list_ctx_t *ctx, const char *dir)
{
    char path[512], uuid[40];
    cxlpool_info_t info;
    struct dirent *de;
    DIR *d;

    d = opendir(dir);
    if (d == NULL) {
        return;
    }
    while ((de = readdir(d)) != NULL) {
        if ((de->d_type != DT_REG) && (de->d_type != DT_UNKNOWN)) {
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (cxlpool_probe(path, &info) != CXLPOOL_OK) {
            continue;  /* not a pool, or not ours to read */
        }
        uuid_str(info.uuid, uuid);
        if (ctx->json) {
            printf("%s{\"kind\":\"emulated\",\"path\":", ctx->count ? "," : "");
            json_str(stdout, path);
            printf(",\"size\":%" PRIu64 ",\"uuid\":\"%s\"}", info.size, uuid);
        } else {
            printf("emulated  %-40s %14" PRIu64 "  uuid %s\n", path,
                   info.size, uuid);
        }
        ctx->count++;
    }
    closedir(d);
}

static int cmd_list(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, LONGOPT('j')},
        {NULL, 0, NULL, 0}
    };
    list_ctx_t ctx = {0, 0};
    cxlpool_status_t status;
    int c;

    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        if (c == LONGOPT('j')) {
            ctx.json = 1;
        } else {
            bad_option(c, argv, opts);
        }
    }
    if (optind < argc) {
        die_usage("unexpected argument '%s'", argv[optind]);
    }

    if (ctx.json) {
        printf("[");
    }
    status = cxlpool_devdax_foreach(list_devdax_cb, &ctx);
    if (status != CXLPOOL_OK) {
        if (ctx.json) {
            printf("]\n");
        }
        return fail(status);
    }
    list_dir(&ctx, "/dev/shm");
    list_dir(&ctx, "/dev/hugepages");
    if (ctx.json) {
        printf("]\n");
    } else if (ctx.count == 0) {
        printf("no devdax devices and no emulated pools found\n");
    }
    return 0;
}

/* ---- info ---- */

typedef struct {
    int      json;
    int      count;
    uint32_t nr_hosts;
    uint32_t attach_max;
} info_ctx_t;

static void info_attach_cb(const cxlpool_attach_info_t *a, void *arg)
{
    info_ctx_t *ctx = arg;

    if (ctx->json) {
        printf("%s{\"slot\":%u,\"pid\":%d,\"host\":", ctx->count ? "," : "",
               a->slot, a->pid);
        json_str(stdout, a->hostname);
        /* slots are split among host partitions like the library does */
        printf(",\"same_host\":%s,\"alive\":%s,\"lease_ms\":%u"
               ",\"host_partition\":%u}", a->same_host ? "true" : "false",
               a->alive ? "true" : "false", a->lease_ms,
               (uint32_t)((((uint64_t)a->slot + 1) * ctx->nr_hosts - 1) /
                          ctx->attach_max));
    } else {
        printf("  slot %-4u pid %-8d host %-20s %s\n", a->slot, a->pid,
               a->hostname, a->alive ? "alive" : "DEAD");
    }
    ctx->count++;
}

static void info_extent_cb(const cxlpool_extent_t *e, void *arg)
{
    info_ctx_t *ctx = arg;

    if (e->name[0] == '\0') {
        return;
    }
    if (ctx->json) {
        printf("%s{\"name\":", ctx->count ? "," : "");
        json_str(stdout, e->name);
        printf(",\"offset\":%" PRIu64 ",\"length\":%" PRIu64 ",\"persistent\":%s}",
               e->offset, e->length, e->owner ? "false" : "true");
    } else {
        printf("  %-24s offset 0x%-12" PRIx64 " length %" PRIu64 "%s\n",
               e->name, e->offset, e->length, e->owner ? "" : " (persistent)");
    }
    ctx->count++;
}

/* Open params->path with the coherence mode recorded in its superblock
 * (the handle's default is hw); a pool that does not probe keeps the
 * default, and cxlpool_open() reports what is wrong with it. */
static void coherence_as_made(cxlpool_params_t *params)
{
    cxlpool_info_t info;

    if (cxlpool_probe(params->path, &info) == CXLPOOL_OK) {
        params->coherence = info.coherence;
    }
}

/* The pages behind the mapping, and what to do when they are small. */
static void info_pages(const cxlpool_info_t *info)
{
    uint64_t p = info->page_size;

    printf("pages         %" PRIu64 " %s (%s)\n",
           (p >= (1ull << 20)) ? p >> 20 : p >> 10,
           (p >= (1ull << 20)) ? "MiB" : "KiB", info->page_source);
    if ((p < (2ull << 20)) && (info->backend != CXLPOOL_BACKEND_DEVDAX)) {
        printf("              every process faults on each page it first "
               "touches; a tmpfs\n              mounted with "
               "huge=within_size backs the pool with 2 MiB pages,\n"
               "              as a DAX device maps it\n");
    }
}

static int cmd_info(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, LONGOPT('j')},
        {NULL, 0, NULL, 0}
    };
    info_ctx_t ctx = {0, 0, 1, 1};
    char defpath[64], uuid[40];
    cxlpool_params_t params;
    cxlpool_status_t status;
    cxlpool_stats_t st;
    cxlpool_info_t info;
    cxlpool_t *pool;
    int c;

    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        if (c == LONGOPT('j')) {
            ctx.json = 1;
        } else {
            bad_option(c, argv, opts);
        }
    }

    cxlpool_params_init(&params);
    params.path  = path_arg(argc, argv, defpath, sizeof(defpath));
    params.flags = CXLPOOL_READONLY;
    /* read a sw pool as a sw reader (invalidate before each line), and
     * report the mode it was made with, not the handle's default */
    coherence_as_made(&params);
    status       = cxlpool_open(&params, &pool);
    if (status != CXLPOOL_OK) {
        return fail(status);
    }

    cxlpool_info(pool, &info);
    status = cxlpool_stats(pool, &st);
    if (status != CXLPOOL_OK) {
        cxlpool_close(pool);
        return fail(status);
    }
    uuid_str(info.uuid, uuid);
    ctx.nr_hosts   = info.nr_hosts;
    ctx.attach_max = st.attach_max;

    if (ctx.json) {
        printf("{\"path\":");
        json_str(stdout, info.path);
        printf(",\"backend\":\"%s\",\"uuid\":\"%s\",\"size\":%" PRIu64
               ",\"layout_version\":\"%u.%u\",\"create_ns\":%" PRIu64
               ",\"heap_offset\":%" PRIu64 ",\"heap_size\":%" PRIu64
               ",\"used_bytes\":%" PRIu64 ",\"free_bytes\":%" PRIu64
               ",\"largest_free\":%" PRIu64 ",\"free_ranges\":%u"
               ",\"fragmentation\":%.4f,\"extents_used\":%u,\"extents_max\":%u"
               ",\"attach_used\":%u,\"attach_max\":%u,\"nr_hosts\":%u"
               ",\"coherence\":\"%s\",\"page_size\":%" PRIu64
               ",\"page_source\":\"%s\",\"attachments\":[",
               backend_name(info.backend), uuid, info.size, info.version_major,
               info.version_minor, info.create_ns, info.heap_offset,
               st.heap_size, st.used_bytes, st.free_bytes, st.largest_free,
               st.free_ranges, st.fragmentation, st.extents_used,
               st.extents_max, st.attach_used, st.attach_max, info.nr_hosts,
               cxl_coh_mode_name(info.coherence), info.page_size,
               info.page_source);
        cxlpool_foreach_attach(pool, info_attach_cb, &ctx);
        printf("],\"named\":[");
        ctx.count = 0;
        cxlpool_foreach_extent(pool, info_extent_cb, &ctx);
        printf("]}\n");
    } else {
        time_t created = (time_t)(info.create_ns / 1000000000ull);
        char tbuf[64];

        strftime(tbuf, sizeof(tbuf), "%Y-%m-%d %H:%M:%S UTC", gmtime(&created));
        printf("pool          %s\n", info.path);
        printf("backend       %s\n", backend_name(info.backend));
        printf("uuid          %s\n", uuid);
        printf("size          %" PRIu64 " bytes\n", info.size);
        printf("layout        %u.%u\n", info.version_major, info.version_minor);
        printf("hosts         %u host partition(s)\n", info.nr_hosts);
        printf("coherence     %s\n", cxl_coh_mode_name(info.coherence));
        info_pages(&info);
        printf("created       %s\n", tbuf);
        printf("heap          %" PRIu64 " bytes at offset 0x%" PRIx64 "\n",
               st.heap_size, info.heap_offset);
        printf("used          %" PRIu64 " bytes in %u of %u extents\n",
               st.used_bytes, st.extents_used, st.extents_max);
        printf("free          %" PRIu64 " bytes in %u ranges, largest %" PRIu64
               "\n", st.free_bytes, st.free_ranges, st.largest_free);
        printf("fragmentation %.1f%%\n", st.fragmentation * 100.0);
        printf("attachments   %u of %u\n", st.attach_used, st.attach_max);
        cxlpool_foreach_attach(pool, info_attach_cb, &ctx);
        printf("named allocations:\n");
        ctx.count = 0;
        cxlpool_foreach_extent(pool, info_extent_cb, &ctx);
        if (ctx.count == 0) {
            printf("  (none)\n");
        }
    }

    cxlpool_close(pool);
    return 0;
}

/* ---- check ---- */

static void check_msg_cb(const char *line, void *arg)
{
    (void)arg;
    printf("  %s\n", line);
}

static int cmd_check(int argc, char **argv)
{
    static const struct option opts[] = {
        {"repair", no_argument, NULL, LONGOPT('r')},
        {"host-index", required_argument, NULL, LONGOPT('x')},
        {NULL, 0, NULL, 0}
    };
    cxlpool_check_report_t rep;
    cxlpool_params_t params;
    cxlpool_status_t status;
    char defpath[64];
    cxlpool_t *pool;
    int c, repair = 0, host_index = -1;

    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        if (c == LONGOPT('r')) {
            repair = 1;
        } else if (c == LONGOPT('x')) {
            host_index = (int)parse_uint("--host-index", optarg,
                                         CXLPOOL_MAX_HOSTS - 1);
        } else {
            bad_option(c, argv, opts);
        }
    }

    cxlpool_params_init(&params);
    params.path       = path_arg(argc, argv, defpath, sizeof(defpath));
    params.flags      = repair ? CXLPOOL_NO_ATTACH : CXLPOOL_READONLY;
    params.host_index = host_index;
    /* with the coherence the pool was made for: a sw pool's lines are
     * invalidated before they are read (another host may have written
     * them), and a repair's writes are written back */
    coherence_as_made(&params);
    status = cxlpool_open(&params, &pool);
    if (status != CXLPOOL_OK) {
        return fail(status);
    }

    printf("checking %s (%s coherence)\n", params.path,
           cxl_coh_mode_name(params.coherence));
    status = cxlpool_check(pool, repair, &rep, check_msg_cb, NULL);
    cxlpool_close(pool);
    printf("superblock ok; %u bad record(s), %u overlap(s), %u out of bounds, "
           "%u dead attachment(s), %u extent(s) (%" PRIu64 " bytes) held by "
           "dead owners\n", rep.bad_records, rep.overlaps, rep.out_of_bounds,
           rep.dead_attach, rep.dead_extents, rep.dead_bytes);

    if (status != CXLPOOL_OK) {
        return fail(status);
    }
    if (repair && (rep.other_dead_extents || rep.other_dead_attach)) {
        fprintf(stderr, "cxlpool: %s: %u extent(s) and %u attachment(s) of "
                "dead owners are in other host partitions, which only their "
                "host may write; run 'cxlpool check --repair --host-index K "
                "%s' on host K\n", params.path, rep.other_dead_extents,
                rep.other_dead_attach, params.path);
        return 1;
    }
    if (!repair && (rep.dead_extents || rep.dead_attach)) {
        fprintf(stderr, "cxlpool: %s: %u extent(s) held by dead owners; run "
                "'cxlpool check --repair %s' to reclaim them\n", params.path,
                rep.dead_extents, params.path);
        return 1;
    }
    printf("%s: clean\n", params.path);
    return 0;
}

/* ---- destroy ---- */

static int cmd_destroy(int argc, char **argv)
{
    static const struct option opts[] = {
        {"force", no_argument, NULL, LONGOPT('f')},
        {NULL, 0, NULL, 0}
    };
    cxlpool_status_t status;
    char defpath[64];
    const char *path;
    int c, force = 0;

    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        if (c == LONGOPT('f')) {
            force = 1;
        } else {
            bad_option(c, argv, opts);
        }
    }

    path   = path_arg(argc, argv, defpath, sizeof(defpath));
    status = cxlpool_destroy(path, force);
    if (status != CXLPOOL_OK) {
        return fail(status);
    }
    printf("destroyed %s\n", path);
    return 0;
}

static const cxlpool_cmd_t cmds[] = {
    {"create", cmd_create, "create [PATH] --size SIZE [options]",
     "Format a new pool.  PATH is a file (under /dev/shm: emulated pool) or a\n"
     "devdax device /dev/daxX.Y; without PATH the per-user default pool\n"
     "/dev/shm/ucx-cxl-UID.pool.  An existing pool is never reformatted.\n\n"
     "  --size SIZE        pool size, a multiple of 2 MiB (K/M/G/T suffixes;\n"
     "                     default UCX_CXL_POOL_SIZE or 1G; ignored for devdax)\n"
     "  --group            make the pool file 0660 (default 0600)\n"
     "  --numa-node N      bind the pool's memory to NUMA node N\n"
     "  --max-extents N    extent records (default: size / 64 KiB, 1024-65536)\n"
     "  --max-attach N     attachment slots (default 256)\n"
     "  --coherence MODE   hw or sw: mode recorded for the pool (default hw)\n"
     "  --hosts N          host partitions, 1-64 (default 1 for hw, 8 for sw):\n"
     "                     each host of a software-coherent pool writes only\n"
     "                     its own lock, slots, extent records and 1/N of the\n"
     "                     heap; every partition needs a 2 MiB heap arena\n"
     "  --force            format a devdax device that already holds a pool\n"},
    {"list", cmd_list, "list [--json]",
     "List devdax devices (via libdaxctl) and emulated pools in /dev/shm and\n"
     "/dev/hugepages.\n\n"
     "  --json             machine-readable output\n"},
    {"info", cmd_info, "info [PATH] [--json]",
     "Show a pool's superblock, space use, fragmentation, attached processes\n"
     "and named allocations.  Reads only.\n\n"
     "  --json             machine-readable output\n"},
    {"check", cmd_check, "check [PATH] [--repair] [--host-index K]",
     "Verify every checksum and extent of every host partition, list extents\n"
     "held by dead owners.  Exit 0 when clean, 1 when damaged or holding dead\n"
     "owners' extents.\n\n"
     "  --repair           reclaim extents and slots of dead owners in this\n"
     "                     host's partition only (other hosts' partitions are\n"
     "                     reported; a process of their host must repair them)\n"
     "  --host-index K     this host's partition (default UCX_CXL_HOST_INDEX;\n"
     "                     needed for --repair of a software-coherent pool\n"
     "                     with several partitions)\n"},
    {"destroy", cmd_destroy, "destroy [PATH] [--force]",
     "Remove a pool: unlink its file, or wipe a devdax device's superblock.\n"
     "Refuses while live processes are attached.\n\n"
     "  --force            destroy even with live attachments\n"},
};

#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

static void usage(FILE *f)
{
    size_t i;

    fprintf(f, "usage: cxlpool COMMAND [ARGS]\n\n"
            "Manage ucx-cxl memory pools (devdax devices, files, emulated "
            "pools).\n\ncommands:\n");
    for (i = 0; i < NCMDS; ++i) {
        fprintf(f, "  %s\n", cmds[i].usage);
    }
    fprintf(f, "\nPATH 'emulate-nc:FILE' opens FILE through the non-coherent pool\n"
            "emulator (software coherence; see doc/design/sw-coherence.md).\n"
            "\n'cxlpool COMMAND --help' describes one command.\n"
            "Environment: UCX_CXL_POOL_SIZE (default size of emulated pools),\n"
            "UCX_CXL_HOST_INDEX (this host's partition of a shared pool)\n");
}

int main(int argc, char **argv)
{
    size_t i;
    int j;

    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        if ((argc > 2) && strcmp(argv[1], "help") == 0) {
            for (i = 0; i < NCMDS; ++i) {
                if (!strcmp(argv[2], cmds[i].name)) {
                    printf("usage: cxlpool %s\n\n%s", cmds[i].usage,
                           cmds[i].help);
                    return 0;
                }
            }
            fprintf(stderr, "cxlpool: unknown command '%s'\n", argv[2]);
            return EXIT_USAGE;
        }
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("cxlpool (ucx-cxl) %s\n", PACKAGE_VERSION);
        return 0;
    }

    for (i = 0; i < NCMDS; ++i) {
        if (strcmp(argv[1], cmds[i].name)) {
            continue;
        }
        cur_cmd = &cmds[i];
        for (j = 2; j < argc; ++j) {
            if (!strcmp(argv[j], "--help") || !strcmp(argv[j], "-h")) {
                printf("usage: cxlpool %s\n\n%s", cmds[i].usage, cmds[i].help);
                return 0;
            }
        }
        optind = 1;
        opterr = 0;
        return cmds[i].run(argc - 1, argv + 1);
    }

    fprintf(stderr, "cxlpool: unknown command '%s' (see 'cxlpool --help')\n",
            argv[1]);
    return EXIT_USAGE;
}
