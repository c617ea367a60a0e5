/*
 * Configuration: the CXL_COLL_* environment variables, one table with
 * name, default and help text.  cxl_coll_team_create() reads them; a value
 * that does not parse or is out of range fails the team with its name.
 */
#include "coll_int.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum {
    CXL_COLL_CFG_STRING,
    CXL_COLL_CFG_SIZE,   /* bytes: 4m, 64k, 4096 */
    CXL_COLL_CFG_UINT,
    CXL_COLL_CFG_TIME,   /* ns from 2ms, 1s, 500us, 0 */
    CXL_COLL_CFG_BOOL    /* y/n, yes/no, 1/0 */
} cxl_coll_cfg_type_t;

typedef struct {
    const char          *name;   /* after CXL_COLL_ */
    const char          *dflt;
    cxl_coll_cfg_type_t  type;
    size_t               offset;
    uint64_t             min;    /* for sizes and integers */
    uint64_t             max;
    const char          *help;
} cxl_coll_cfg_field_t;

#define CXL_COLL_CFG_OFF(f) offsetof(cxl_coll_config_t, f)

static const cxl_coll_cfg_field_t cxl_coll_cfg_table[] = {
    {"POOL", "", CXL_COLL_CFG_STRING, CXL_COLL_CFG_OFF(pool), 0, 0,
     "Pool of the teams whose caller names none (cxl_coll_team_params_t.\n"
     "pool_path NULL): a pool file, a devdax device or emulate-nc:PATH.\n"
     "Empty: the pool the cxl transport attaches first: the first of\n"
     "UCX_CXL_POOL unless that is 'auto', else the first devdax device that\n"
     "holds a pool, else the per-user emulated default\n"
     "/dev/shm/ucx-cxl-<uid>.pool (created on first use)."},
    {"REGION_SIZE", "4m", CXL_COLL_CFG_SIZE, CXL_COLL_CFG_OFF(region_size),
     CXL_COLL_MIN_REGION, CXL_COLL_MAX_REGION,
     "Pool bytes each rank owns for a team (its partition: 40 KiB of control\n"
     "lines, flagged lines and small slots, then two data slots of a chunk,\n"
     "or 64 B per rank if more, in 4 KiB pages: 168 KiB with the default\n"
     "chunk).  Larger messages go\n"
     "through it in rounds; the pool space a team uses never depends on\n"
     "message sizes.  Equal on all ranks."},
    {"CHUNK_SIZE", "64k", CXL_COLL_CFG_SIZE, CXL_COLL_CFG_OFF(chunk_size),
     4096, 1ull << 30,
     "Pipelining unit: a writer signals readiness after each chunk, so\n"
     "readers copy (and reduce) while it still writes."},
    {"ONESHOT_MAX", "16k", CXL_COLL_CFG_SIZE, CXL_COLL_CFG_OFF(oneshot_max),
     0, 1ull << 36,
     "Allreduce and reduce of up to this many bytes: one-shot (every rank\n"
     "publishes its vector, the result ranks reduce all of them).  Above:\n"
     "two-shot (rank i reduces slice i of every vector, then all read all\n"
     "slices), in rounds and chunks.  Teams of 2 ranks always reduce\n"
     "one-shot (in rounds): the same bytes cross, in one step, not two."},
    {"MAX_REQS", "16", CXL_COLL_CFG_UINT, CXL_COLL_CFG_OFF(max_reqs), 1, 1024,
     "Non-blocking collectives per team posted and not yet freed; one more\n"
     "post fails with CXL_COLL_ERR_BUSY.  Blocking calls have a request of\n"
     "their own (one at a time: not from the team's progress function)."},
    {"SPIN", "200", CXL_COLL_CFG_UINT, CXL_COLL_CFG_OFF(spin), 0, 1u << 30,
     "Polls a waiting rank spins before it yields the CPU (sched_yield) on\n"
     "every further poll: with more ranks than cores the rank waited for\n"
     "gets to run."},
    {"PEER_CHECK", "2ms", CXL_COLL_CFG_TIME, CXL_COLL_CFG_OFF(peer_check_ns),
     100000, 60000000000ull,
     "While a rank waits, this often it checks the pool attachments of its\n"
     "peers (dead process: CXL_COLL_ERR_PEER_DEAD) and their abort lines\n"
     "(a peer that gave up)."},
    {"TIMEOUT", "0", CXL_COLL_CFG_TIME, CXL_COLL_CFG_OFF(timeout_ns), 0,
     UINT64_MAX,
     "A collective that waits this long fails with CXL_COLL_ERR_TIMEOUT,\n"
     "the team with it.  Its clock starts when it first waits (within 16\n"
     "polls of a blocking call, or of test() and wait() that find it at\n"
     "the head of the team's queue), not at the post: a call that never\n"
     "waits reads no clock.  0: none (a dead peer is detected anyway)."},
    {"POOL_INPLACE", "y", CXL_COLL_CFG_BOOL, CXL_COLL_CFG_OFF(pool_inplace),
     0, 1,
     "Read input buffers that lie in the team's pool (cxl_coll_mem_alloc)\n"
     "in place, without the copy into the team region."},
    {"LOG", "n", CXL_COLL_CFG_BOOL, CXL_COLL_CFG_OFF(log), 0, 1,
     "One line on stderr per collective: which algorithm ran."},
    {"HELP", "n", CXL_COLL_CFG_BOOL, CXL_COLL_CFG_OFF(help), 0, 1,
     "Print this table on stderr when a team is created."},
    {"TEST_SKIP_WB", "n", CXL_COLL_CFG_BOOL, CXL_COLL_CFG_OFF(skip_wb), 0, 1,
     "Test only, never in production: leave the write-back of published data\n"
     "out, so software-coherent readers see stale memory (a test on the\n"
     "emulate-nc pool must then fail)."},
};

#define CXL_COLL_CFG_N (sizeof(cxl_coll_cfg_table) / sizeof(cxl_coll_cfg_table[0]))

static int cxl_coll_parse_bool(const char *s, int *v)
{
    if (!strcasecmp(s, "y") || !strcasecmp(s, "yes") || !strcmp(s, "1") ||
        !strcasecmp(s, "on") || !strcasecmp(s, "true")) {
        *v = 1;
    } else if (!strcasecmp(s, "n") || !strcasecmp(s, "no") ||
               !strcmp(s, "0") || !strcasecmp(s, "off") ||
               !strcasecmp(s, "false")) {
        *v = 0;
    } else {
        return -1;
    }
    return 0;
}

/* strtoull() would skip blanks and take a sign: "-1" would be 2^64 - 1 */
static int cxl_coll_is_digit(char c)
{
    return (c >= '0') && (c <= '9');
}

static int cxl_coll_parse_uint(const char *s, uint64_t *v)
{
    unsigned long long x;
    char *end;

    if (!cxl_coll_is_digit(*s)) {
        return -1;
    }
    errno = 0;
    x     = strtoull(s, &end, 10);
    if ((errno != 0) || (*end != '\0')) {
        return -1;
    }
    *v = x;
    return 0;
}

static int cxl_coll_parse_time(const char *s, uint64_t *ns)
{
    static const struct {
        const char *suffix;
        uint64_t    mult;
    } units[] = {{"ns", 1}, {"us", 1000}, {"ms", 1000000},
                 {"s", 1000000000ull}, {"", 1000000000ull}};
    unsigned long long x;
    char *end;
    size_t i;

    if (!cxl_coll_is_digit(*s)) {
        return -1;
    }
    errno = 0;
    x     = strtoull(s, &end, 10);
    if ((errno != 0) || (end == s)) {
        return -1;
    }
    for (i = 0; i < sizeof(units) / sizeof(units[0]); ++i) {
        if (!strcmp(end, units[i].suffix)) {
            if (x > UINT64_MAX / units[i].mult) {
                return -1;
            }
            *ns = x * units[i].mult;
            return 0;
        }
    }
    return -1;
}

static cxl_coll_status_t cxl_coll_cfg_set(cxl_coll_config_t *cfg,
                                          const cxl_coll_cfg_field_t *f,
                                          const char *value)
{
    void *field = (char*)cfg + f->offset;
    uint64_t v  = 0;
    int b, rc;

    switch (f->type) {
    case CXL_COLL_CFG_STRING:
        if (strlen(value) >= sizeof(cfg->pool)) {
            return cxl_coll_error(CXL_COLL_ERR_INVAL,
                                  "CXL_COLL_%s: value too long", f->name);
        }
        strcpy((char*)field, value);
        return CXL_COLL_OK;
    case CXL_COLL_CFG_BOOL:
        if (cxl_coll_parse_bool(value, &b) != 0) {
            return cxl_coll_error(CXL_COLL_ERR_INVAL,
                                  "CXL_COLL_%s='%s': expected y or n",
                                  f->name, value);
        }
        *(int*)field = b;
        return CXL_COLL_OK;
    case CXL_COLL_CFG_SIZE:
        rc = cxlpool_parse_size(value, &v);
        break;
    case CXL_COLL_CFG_UINT:
        rc = cxl_coll_parse_uint(value, &v);
        break;
    default:
        rc = cxl_coll_parse_time(value, &v);
        break;
    }
    if ((rc != 0) || (v < f->min) || (v > f->max)) {
        return cxl_coll_error(CXL_COLL_ERR_INVAL,
                              "CXL_COLL_%s='%s': expected %s from %llu "
                              "to %llu%s", f->name, value,
                              (f->type == CXL_COLL_CFG_SIZE) ? "a size" :
                              (f->type == CXL_COLL_CFG_TIME) ? "a time" :
                              "an integer",
                              (unsigned long long)f->min,
                              (unsigned long long)f->max,
                              (f->type == CXL_COLL_CFG_TIME) ? " ns" :
                              (f->type == CXL_COLL_CFG_SIZE) ? " bytes" : "");
    }
    *(uint64_t*)field = v;
    return CXL_COLL_OK;
}

cxl_coll_status_t cxl_coll_config_read(cxl_coll_config_t *cfg)
{
    cxl_coll_status_t status;
    char name[64];
    const char *value;
    size_t i;

    memset(cfg, 0, sizeof(*cfg));
    for (i = 0; i < CXL_COLL_CFG_N; ++i) {
        snprintf(name, sizeof(name), "CXL_COLL_%s",
                 cxl_coll_cfg_table[i].name);
        value = getenv(name);
        if (value == NULL) {
            value = cxl_coll_cfg_table[i].dflt;
        }
        status = cxl_coll_cfg_set(cfg, &cxl_coll_cfg_table[i], value);
        if (status != CXL_COLL_OK) {
            return status;
        }
    }
    if (cfg->chunk_size % 64) {
        return cxl_coll_error(CXL_COLL_ERR_INVAL, "CXL_COLL_CHUNK_SIZE=%llu:"
                              " must be a multiple of 64",
                              (unsigned long long)cfg->chunk_size);
    }
    return CXL_COLL_OK;
}

void cxl_coll_config_print(FILE *stream)
{
    const char *p, *nl;
    size_t i;

    fprintf(stream, "# libcxl_coll configuration (environment)\n");
    for (i = 0; i < CXL_COLL_CFG_N; ++i) {
        fprintf(stream, "#\n");
        for (p = cxl_coll_cfg_table[i].help; *p != '\0'; p = nl + 1) {
            nl = strchr(p, '\n');
            if (nl == NULL) {
                fprintf(stream, "# %s\n", p);
                break;
            }
            fprintf(stream, "# %.*s\n", (int)(nl - p), p);
        }
        fprintf(stream, "CXL_COLL_%s=%s\n", cxl_coll_cfg_table[i].name,
                cxl_coll_cfg_table[i].dflt);
    }
}
