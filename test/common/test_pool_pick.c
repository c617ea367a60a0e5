/*
 * test_pool_pick - cxl_pool_pick_from (src/ucp_ext/common/cxl_pool_pick.c),
 * the pool an extension library attaches when its caller names none: the
 * first of UCX_CXL_POOL unless "auto", else the first devdax device the
 * transport's "auto" takes, else the emulated default (may be created).
 * Devices come from a fake enumerator; "holds a pool" is the real
 * cxlpool_probe on files this test creates (two pools and one file that is
 * not a pool); and cxl_pool_pick_params, how such a pool is opened.
 * Prints "ok N - ..." / "not ok N - ...: why" and
 * "test_pool_pick: N checks, N failed".
 */
#include "cxl_pool_pick.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TPP_MAX_DEVS 8

static cxlpool_devdax_info_t tpp_devs[TPP_MAX_DEVS];
static unsigned tpp_ndevs;
static cxlpool_status_t tpp_foreach_status;
static unsigned tpp_checks, tpp_failed;
/* device paths: at most cxlpool_devdax_info_t.path */
static char tpp_pool_a[64], tpp_pool_b[64], tpp_nopool[64], tpp_pool_sw[64];
static char tpp_default[256];

static cxlpool_status_t tpp_foreach(cxlpool_devdax_cb_t cb, void *arg)
{
    unsigned i;

    for (i = 0; i < tpp_ndevs; ++i) {
        cb(&tpp_devs[i], arg);
    }
    return tpp_foreach_status;
}

/* fake device i: path, enabled, system-ram */
static void tpp_dev(unsigned i, const char *path, int enabled, int system_ram)
{
    memset(&tpp_devs[i], 0, sizeof(tpp_devs[i]));
    snprintf(tpp_devs[i].path, sizeof(tpp_devs[i].path), "%s", path);
    tpp_devs[i].enabled    = enabled;
    tpp_devs[i].system_ram = system_ram;
    tpp_devs[i].numa_node  = -1;
    tpp_devs[i].region_id  = (int)i;
    tpp_ndevs = (i + 1 > tpp_ndevs) ? i + 1 : tpp_ndevs;
}

static const char *tpp_src_name(cxl_pool_pick_src_t src)
{
    switch (src) {
    case CXL_POOL_PICK_LISTED:  return "listed";
    case CXL_POOL_PICK_DEVDAX:  return "devdax";
    case CXL_POOL_PICK_DEFAULT: return "default (may be created)";
    }
    return "?";
}

/* env and the fake devices set: the pick must be want_path from want_src */
static void tpp_expect(const char *what, const char *env, const char *want_path,
                       cxl_pool_pick_src_t want_src)
{
    cxl_pool_pick_src_t src = CXL_POOL_PICK_LISTED;
    char buf[256];
    int rc;

    memset(buf, 'x', sizeof(buf));
    rc = cxl_pool_pick_from(env, tpp_foreach, buf, sizeof(buf), &src);
    ++tpp_checks;
    if ((rc == 0) && !strcmp(buf, want_path) && (src == want_src)) {
        printf("ok %u - %s: %s, %s\n", tpp_checks, what, buf, tpp_src_name(src));
        return;
    }
    ++tpp_failed;
    printf("not ok %u - %s (UCX_CXL_POOL=%s, %u fake device(s)): got %d '%s' "
           "%s, want '%s' %s\n", tpp_checks, what, env ? env : "unset",
           tpp_ndevs, rc, (rc == 0) ? buf : "", tpp_src_name(src), want_path,
           tpp_src_name(want_src));
}

static void tpp_check(int ok, const char *what)
{
    ++tpp_checks;
    tpp_failed += !ok;
    printf("%sok %u - %s\n", ok ? "" : "not ", tpp_checks, what);
}

static int tpp_make_pool(const char *path, cxl_coh_mode_t coh)
{
    cxlpool_params_t params;
    cxlpool_t *pool;

    unlink(path);
    cxlpool_params_init(&params);
    params.path      = path;
    params.size      = 32ull << 20;
    params.flags     = CXLPOOL_CREATE | CXLPOOL_EXCL | CXLPOOL_NO_ATTACH |
                       CXLPOOL_NO_HEARTBEAT;
    params.coherence = coh;
    if (cxlpool_open(&params, &pool) != CXLPOOL_OK) {
        fprintf(stderr, "test_pool_pick: pool %s: %s\n", path,
                cxlpool_last_error());
        return -1;
    }
    cxlpool_close(pool);
    return 0;
}

/* a file where a pool would be, holding something else */
static int tpp_make_nopool(const char *path)
{
    static const char junk[4096] = "not a pool";
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
    int ok;

    if (fd < 0) {
        perror(path);
        return -1;
    }
    ok = write(fd, junk, sizeof(junk)) == (ssize_t)sizeof(junk);
    close(fd);
    return ok ? 0 : -1;
}

static void tpp_auto_cases(void)
{
    const char *autos[] = {NULL, "", "auto", "auto,x", ",auto"};
    char what[96];
    size_t i;

    for (i = 0; i < sizeof(autos) / sizeof(autos[0]); ++i) {
        tpp_ndevs = 0;
        snprintf(what, sizeof(what), "'%s', no devdax device",
                 autos[i] ? autos[i] : "unset");
        tpp_expect(what, autos[i], tpp_default, CXL_POOL_PICK_DEFAULT);
        tpp_dev(0, tpp_pool_a, 1, 0);
        snprintf(what, sizeof(what), "'%s', a devdax device holding a pool",
                 autos[i] ? autos[i] : "unset");
        tpp_expect(what, autos[i], tpp_pool_a, CXL_POOL_PICK_DEVDAX);
    }

    tpp_ndevs = 0;
    tpp_dev(0, tpp_pool_a, 0, 0);
    tpp_expect("a disabled device is not taken", NULL, tpp_default,
               CXL_POOL_PICK_DEFAULT);
    tpp_dev(0, tpp_pool_a, 1, 1);
    tpp_expect("a device in system-ram mode is not taken", NULL, tpp_default,
               CXL_POOL_PICK_DEFAULT);
    tpp_dev(0, tpp_nopool, 1, 0);
    tpp_expect("a device holding no pool is not taken", NULL, tpp_default,
               CXL_POOL_PICK_DEFAULT);
    tpp_dev(0, "/dev/shm/test-pool-pick-absent", 1, 0);
    tpp_expect("a device that cannot be opened is not taken", NULL,
               tpp_default, CXL_POOL_PICK_DEFAULT);

    tpp_ndevs = 0;
    tpp_dev(0, tpp_pool_b, 1, 0);
    tpp_dev(1, tpp_pool_a, 1, 0);
    tpp_expect("two devices with pools: the first (libdaxctl's order)", NULL,
               tpp_pool_b, CXL_POOL_PICK_DEVDAX);
    tpp_ndevs = 0;
    tpp_dev(0, tpp_pool_a, 0, 0);
    tpp_dev(1, tpp_pool_a, 1, 1);
    tpp_dev(2, tpp_nopool, 1, 0);
    tpp_dev(3, tpp_pool_b, 1, 0);
    tpp_dev(4, tpp_pool_a, 1, 0);
    tpp_expect("disabled, system-ram, no pool, then two pools: the first "
               "pool", "auto", tpp_pool_b, CXL_POOL_PICK_DEVDAX);

    /* the transport logs a failed enumeration and takes the default */
    tpp_ndevs          = 0;
    tpp_foreach_status = CXLPOOL_ERR_UNSUPPORTED;
    tpp_expect("no devdax enumeration (no libdaxctl)", NULL, tpp_default,
               CXL_POOL_PICK_DEFAULT);
    tpp_dev(0, tpp_pool_a, 1, 0);
    tpp_expect("an enumeration that fails after a pool", NULL, tpp_pool_a,
               CXL_POOL_PICK_DEVDAX);
    tpp_foreach_status = CXLPOOL_OK;
}

static void tpp_listed_cases(void)
{
    /* an explicit pool wins over a devdax device */
    tpp_ndevs = 0;
    tpp_dev(0, tpp_pool_a, 1, 0);
    tpp_expect("explicit path", "/dev/shm/explicit.pool",
               "/dev/shm/explicit.pool", CXL_POOL_PICK_LISTED);
    tpp_expect("explicit list: its first", "/dev/dax3.0,/dev/shm/b.pool",
               "/dev/dax3.0", CXL_POOL_PICK_LISTED);
    tpp_expect("list after an empty entry (UCX skips it)", ",,/p1,/p2", "/p1",
               CXL_POOL_PICK_LISTED);
    tpp_expect("'auto' second", "/p1,auto", "/p1", CXL_POOL_PICK_LISTED);
    tpp_expect("a name that starts with auto is a name", "autox", "autox",
               CXL_POOL_PICK_LISTED);
    tpp_expect("a name that 'auto' starts with is a name", "aut,/p2", "aut",
               CXL_POOL_PICK_LISTED);
    tpp_expect("emulate-nc spec", "emulate-nc:/dev/shm/nc.pool",
               "emulate-nc:/dev/shm/nc.pool", CXL_POOL_PICK_LISTED);
}

static void tpp_edge_cases(void)
{
    cxl_pool_pick_src_t src;
    char small[8], buf[256];

    tpp_ndevs = 0;
    tpp_check(cxl_pool_pick_from("/dev/shm/long.pool", tpp_foreach, small,
                                 sizeof(small), &src) == -1,
              "a listed name longer than the buffer: -1");
    tpp_check(cxl_pool_pick_from("/dev/dax", tpp_foreach, small,
                                 sizeof(small), &src) == -1,
              "a name of exactly the buffer's size (no room for NUL): -1");
    tpp_check((cxl_pool_pick_from("/dev/da", tpp_foreach, small, sizeof(small),
                                  &src) == 0) && !strcmp(small, "/dev/da"),
              "a name one shorter than the buffer fits");
    tpp_check(cxl_pool_pick_from(NULL, tpp_foreach, small, sizeof(small),
                                 &src) == -1,
              "the default path longer than the buffer: -1");
    tpp_dev(0, tpp_pool_a, 1, 0);
    tpp_check(cxl_pool_pick_from(NULL, tpp_foreach, small, sizeof(small),
                                 &src) == -1,
              "a devdax path longer than the buffer: -1 (not the next one)");

    /* the public entry point reads UCX_CXL_POOL */
    setenv("UCX_CXL_POOL", "/dev/shm/from-env.pool,auto", 1);
    tpp_check((cxl_pool_pick(buf, sizeof(buf), &src) == 0) &&
              !strcmp(buf, "/dev/shm/from-env.pool") &&
              (src == CXL_POOL_PICK_LISTED),
              "cxl_pool_pick reads UCX_CXL_POOL");
    unsetenv("UCX_CXL_POOL");
}

/* how the picked pool is opened: as the transport opens it */
static void tpp_params_cases(void)
{
    const char *absent = "/dev/shm/test-pool-pick-absent";
    cxlpool_params_t params;

    cxl_pool_pick_params(absent, 1, &params);
    tpp_check((params.path == absent) && (params.flags == CXLPOOL_CREATE) &&
              (params.size == cxlpool_default_size()) &&
              (params.coherence == CXL_COH_HW),
              "the emulated default: created with the default size, hw");
    cxl_pool_pick_params(tpp_pool_a, 0, &params);
    tpp_check((params.flags == 0) && (params.size == 0) &&
              (params.coherence == CXL_COH_HW),
              "an existing hw pool: opened, not created, hw");
    cxl_pool_pick_params(tpp_pool_sw, 0, &params);
    tpp_check((params.flags == 0) && (params.coherence == CXL_COH_SW),
              "an existing sw pool: opened in its mode, sw");
    cxl_pool_pick_params(tpp_pool_sw, 1, &params);
    tpp_check((params.flags == CXLPOOL_CREATE) &&
              (params.coherence == CXL_COH_SW),
              "the default when it exists: its own mode");
}

int main(void)
{
    pid_t pid = getpid();
    int rc    = 1;

    snprintf(tpp_pool_a, sizeof(tpp_pool_a), "/dev/shm/test-pool-pick-%d-a.pool",
             (int)pid);
    snprintf(tpp_pool_b, sizeof(tpp_pool_b), "/dev/shm/test-pool-pick-%d-b.pool",
             (int)pid);
    snprintf(tpp_nopool, sizeof(tpp_nopool), "/dev/shm/test-pool-pick-%d-none",
             (int)pid);
    snprintf(tpp_pool_sw, sizeof(tpp_pool_sw),
             "/dev/shm/test-pool-pick-%d-sw.pool", (int)pid);
    cxlpool_default_path(tpp_default, sizeof(tpp_default));
    if (tpp_make_pool(tpp_pool_a, CXL_COH_HW) ||
        tpp_make_pool(tpp_pool_b, CXL_COH_HW) ||
        tpp_make_pool(tpp_pool_sw, CXL_COH_SW) || tpp_make_nopool(tpp_nopool)) {
        goto out;
    }
    tpp_auto_cases();
    tpp_listed_cases();
    tpp_edge_cases();
    tpp_params_cases();
    printf("test_pool_pick: %u checks, %u failed\n", tpp_checks, tpp_failed);
    rc = tpp_failed ? 1 : 0;
out:
    cxlpool_destroy(tpp_pool_a, 1);
    cxlpool_destroy(tpp_pool_b, 1);
    cxlpool_destroy(tpp_pool_sw, 1);
    unlink(tpp_pool_a);
    unlink(tpp_pool_b);
    unlink(tpp_pool_sw);
    unlink(tpp_nopool);
    return rc;
}
