/*
 * test_coll_config - the CXL_COLL_* variables and the team region's size
 * (coll_config.c, coll_team.c): values that must be refused are, with the
 * variable's name in the message; the smallest region that works for a
 * chunk size is the one the message names; a region larger than the pool
 * is "no pool space".  One-rank teams, no second process.
 *
 * Ends with "test_coll_config: N passed, N failed".
 */
#include "coll_int.h"
#include "coll_test_harness.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char g_path[256];

/* the out-of-band allgather of a team of one */
static int one_oob(void *arg, const void *sbuf, void *rbuf, size_t len)
{
    (void)arg;
    memcpy(rbuf, sbuf, len);
    return 0;
}

/* CXL_COLL_<name>=value read alone: its status; the message must name it */
static cxl_coll_status_t read_one(const char *name, const char *value,
                                  cxl_coll_config_t *cfg)
{
    char var[64];
    cxl_coll_status_t st;

    snprintf(var, sizeof(var), "CXL_COLL_%s", name);
    setenv(var, value, 1);
    st = cxl_coll_config_read(cfg);
    unsetenv(var);
    if (st != CXL_COLL_OK) {
        cxl_th_check(strstr(cxl_coll_last_error(), var) != NULL,
                     "%s='%s': the message names it (%s)", var, value,
                     cxl_coll_last_error());
    }
    return st;
}

static void refused(const char *name, const char *value)
{
    cxl_coll_config_t cfg;
    cxl_coll_status_t st = read_one(name, value, &cfg);

    cxl_th_check(st == CXL_COLL_ERR_INVAL, "CXL_COLL_%s='%s' refused (%s)",
                 name, value, cxl_coll_strerror(st));
}

static void parsing(void)
{
    cxl_coll_config_t cfg;
    cxl_coll_status_t st;

    /* strtoull() skips blanks and takes a sign: " -1ns" was 2^64-1 ns */
    refused("TIMEOUT", " -1ns");
    refused("TIMEOUT", "-1");
    refused("TIMEOUT", "+5ms");
    refused("TIMEOUT", "5 ms");
    refused("TIMEOUT", "");
    refused("MAX_REQS", " 8");
    refused("MAX_REQS", "+8");
    refused("MAX_REQS", "0");
    refused("MAX_REQS", "1025");
    refused("REGION_SIZE", "40k");
    refused("REGION_SIZE", "65g");
    refused("CHUNK_SIZE", "1000");
    refused("LOG", "maybe");

    st = read_one("TIMEOUT", "5ms", &cfg);
    cxl_th_check((st == CXL_COLL_OK) && (cfg.timeout_ns == 5000000),
                 "CXL_COLL_TIMEOUT=5ms is 5000000 ns (%llu)",
                 (unsigned long long)cfg.timeout_ns);
    st = read_one("MAX_REQS", "8", &cfg);
    cxl_th_check((st == CXL_COLL_OK) && (cfg.max_reqs == 8),
                 "CXL_COLL_MAX_REQS=8");
    st = read_one("REGION_SIZE", "48k", &cfg);
    cxl_th_check((st == CXL_COLL_OK) && (cfg.region_size == 48 << 10),
                 "CXL_COLL_REGION_SIZE=48k parses (40 KiB of lines and two "
                 "slots of the smallest chunk)");
}

/* A team of one with region_size (0: the variables); its status. */
static cxl_coll_status_t team_of_one(size_t region_size)
{
    cxl_coll_team_params_t params;
    cxl_coll_team_t *team = NULL;
    cxl_coll_status_t st;

    cxl_coll_team_params_init(&params);
    params.rank          = 0;
    params.size          = 1;
    params.oob_allgather = one_oob;
    params.pool_path     = g_path;
    params.region_size   = region_size;
    st = cxl_coll_team_create(&params, &team);
    if (st == CXL_COLL_OK) {
        st = cxl_coll_barrier(team);
        cxl_coll_team_destroy(team);
    }
    return st;
}

static void region(const char *region, const char *chunk, size_t given,
                   cxl_coll_status_t expect, const char *says)
{
    cxl_coll_status_t st;

    setenv("CXL_COLL_REGION_SIZE", region, 1);
    setenv("CXL_COLL_CHUNK_SIZE", chunk, 1);
    st = team_of_one(given);
    cxl_th_check((st == expect) && ((st == CXL_COLL_OK) ||
                                    (strstr(cxl_coll_last_error(), says) !=
                                     NULL)),
                 "region %s (given %zu), chunk %s: %s%s%s", region, given,
                 chunk, cxl_coll_strerror(st),
                 (st == CXL_COLL_OK) ? "" : ": ",
                 (st == CXL_COLL_OK) ? "" : cxl_coll_last_error());
    unsetenv("CXL_COLL_REGION_SIZE");
    unsetenv("CXL_COLL_CHUNK_SIZE");
}

static void sizing(void)
{
    /* 40 KiB of lines + 2 slots of a 64 KiB chunk = 168 KiB: the message
     * said "at least 65536" of a region of 65536 */
    region("64k", "64k", 0, CXL_COLL_ERR_INVAL,
           "CXL_COLL_REGION_SIZE=65536: a team of 1 ranks with "
           "CXL_COLL_CHUNK_SIZE=65536 needs at least 172032 bytes");
    region("168k", "64k", 0, CXL_COLL_OK, "");
    region("64k", "4k", 0, CXL_COLL_OK, "");
    region("48k", "4k", 0, CXL_COLL_OK, "");
    region("4m", "1g", 0, CXL_COLL_ERR_INVAL, "CXL_COLL_CHUNK_SIZE=1073741824");
    /* the parameter: a slot size that underflowed, a size that wrapped */
    region("4m", "64k", 20000, CXL_COLL_ERR_INVAL,
           "region_size=20000: a team of 1 ranks");
    region("4m", "64k", SIZE_MAX, CXL_COLL_ERR_INVAL,
           "region_size=18446744073709551615: at most");
    /* larger than the pool (64 MiB): no pool space, not a pool error */
    region("64g", "64k", 0, CXL_COLL_ERR_NO_MEMORY, "the pool's heap holds");
}

int main(void)
{
    char spec[300];

    unsetenv("CXL_COLL_REGION_SIZE");
    unsetenv("CXL_COLL_CHUNK_SIZE");
    unsetenv("CXL_COLL_TIMEOUT");
    unsetenv("CXL_COLL_MAX_REQS");
    if (cxl_th_pool_create("config", 0, 64ull << 20, g_path, sizeof(g_path),
                           spec, sizeof(spec)) != 0) {
        return 1;
    }
    parsing();
    sizing();
    cxl_th_pool_destroy(g_path, 0);
    return cxl_th_summary("test_coll_config");
}
