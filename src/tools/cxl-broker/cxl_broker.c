/*
 * cxl-broker: serve | add | ls | warm | stat | evict | rm | destroy.
 */
#include "cxl_broker.h"

#include <ucx_cxl/cxlpool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const struct {
    const char *name;
    int (*fn)(int, char**);
    const char *help;
} cxlb_cmds[] = {
    {"serve",   cxlb_serve,   "run the broker daemon on a pool"},
    {"add",     cxlb_add,     "register a dataset (NAME PATH...); a changed "
                              "one gets a new version"},
    {"ls",      cxlb_ls,      "list datasets and what of them is resident"},
    {"warm",    cxlb_warm,    "load a dataset into the pool, with progress"},
    {"stat",    cxlb_stat,    "cache counters and per-epoch hit rates"},
    {"evict",   cxlb_evict,   "drop the resident chunks nobody pins"},
    {"rm",      cxlb_rm,      "retire a dataset (freed after its last reader)"},
    {"destroy", cxlb_destroy, "remove the broker's arena from the pool"},
};

#define CXLB_NCMDS (sizeof(cxlb_cmds) / sizeof(cxlb_cmds[0]))

static void cxlb_usage(FILE *f)
{
    char addr[64];
    unsigned i;

    fprintf(f, "Usage: cxl-broker COMMAND [OPTIONS] [ARGS]\n\n"
            "A dataset-chunk broker: one copy of each dataset per CXL pool,\n"
            "served to every reader of the pod through UCP get.\n\nCommands:\n");
    for (i = 0; i < CXLB_NCMDS; ++i) {
        fprintf(f, "  %-8s %s\n", cxlb_cmds[i].name, cxlb_cmds[i].help);
    }
    fprintf(f, "\n'cxl-broker COMMAND --help' describes each command.\n"
            "Clients find the broker at --broker HOST:PORT, else $%s,\n"
            "else %s (this user's default).\n", CXL_BROKER_ENV,
            cxl_broker_default_addr(addr, sizeof(addr)));
}

int cxlb_connect(const cxlb_common_t *c, cxl_broker_t **b)
{
    cxl_broker_params_t prm;

    cxl_broker_params_init(&prm);
    prm.addr = c->broker;
    if (cxl_broker_connect(&prm, b) != CXL_BROKER_OK) {
        return cxlb_fail("%s", cxl_broker_last_error());
    }
    return 0;
}

void cxlb_human(uint64_t bytes, char *buf, size_t len)
{
    static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    unsigned i = 0;

    while ((v >= 1024) && (i < 4)) {
        v /= 1024;
        i++;
    }
    snprintf(buf, len, (i == 0) ? "%.0f %s" : "%.1f %s", v, u[i]);
}

void cxlb_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; ++s) {
        if ((*s == '"') || (*s == '\\')) {
            fprintf(f, "\\%c", *s);
        } else if ((unsigned char)*s < 0x20) {
            fprintf(f, "\\u%04x", *s);
        } else {
            fputc(*s, f);
        }
    }
    fputc('"', f);
}

int main(int argc, char **argv)
{
    unsigned i;

    if ((argc < 2) || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        cxlb_usage(stdout);
        return (argc < 2) ? 2 : 0;
    }
    for (i = 0; i < CXLB_NCMDS; ++i) {
        if (!strcmp(argv[1], cxlb_cmds[i].name)) {
            return cxlb_cmds[i].fn(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "cxl-broker: unknown command '%s'\n", argv[1]);
    cxlb_usage(stderr);
    return 2;
}
