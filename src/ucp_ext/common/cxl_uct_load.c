/*
 * cxl_uct_load.c - make the cxl transport known to UCX before ucp_init.
 *
 * UCX 1.13 loads only the transport modules whose names are compiled into
 * libuct, so libuct_cxl.so must already be in the process when ucp_init
 * queries the components (its ELF constructor registers "cxl").  Users
 * preload it; the libraries of this project load it themselves, so that
 * cxl-broker, a reader or a Dask worker run without LD_PRELOAD and UCX
 * does not print "transport 'cxl' is not available" (on stdout, where it
 * broke --json output).
 */

#define _GNU_SOURCE
#include "cxl_uct_load.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CXL_UCT_LOAD_NAME   "libuct_cxl.so"

static pthread_mutex_t cxl_uct_load_lock = PTHREAD_MUTEX_INITIALIZER;
static int cxl_uct_load_done;

/* Already in the process: LD_PRELOAD, the Python package, an earlier call */
static int cxl_uct_load_present(void)
{
    return dlsym(RTLD_DEFAULT, "uct_cxl_component") != NULL;
}

/* dir/name and dir/ucx/name, where they exist; 0 when found */
static int cxl_uct_load_probe(const char *dir, char *path, size_t len)
{
    static const char *subs[] = {"", "ucx/"};
    size_t i;
    int n;

    for (i = 0; i < sizeof(subs) / sizeof(subs[0]); ++i) {
        n = snprintf(path, len, "%s/%s%s", dir, subs[i], CXL_UCT_LOAD_NAME);
        if ((n > 0) && ((size_t)n < len) && (access(path, R_OK) == 0)) {
            return 0;
        }
    }
    return -1;
}

/*
 * Where to look: $CXL_LIBDIR (as the Python package), then the folder of
 * the library or binary this code is linked into (a build tree's .libs
 * holds both; an installation puts the module in LIBDIR/ucx), then the
 * installation's own LIBDIR/ucx.
 */
static int cxl_uct_load_find(char *path, size_t len)
{
    const char *env = getenv("CXL_LIBDIR");
    char dir[PATH_MAX];
    Dl_info info;
    char *slash;

    if ((env != NULL) && (*env != '\0') &&
        (cxl_uct_load_probe(env, path, len) == 0)) {
        return 0;
    }
    if ((dladdr((void*)cxl_uct_load_find, &info) == 0) ||
        (info.dli_fname == NULL) ||
        (realpath(info.dli_fname, dir) == NULL)) {
        return -1;
    }
    slash = strrchr(dir, '/');
    if (slash != NULL) {
        *slash = '\0';
        if (cxl_uct_load_probe(dir, path, len) == 0) {
            return 0;
        }
    }
    /* a binary under bin/ of an installation: the installed module */
    return cxl_uct_load_probe(CXL_UCT_MODULEDIR "/..", path, len);
}

int cxl_uct_load(char *err, size_t errlen)
{
    char path[PATH_MAX];
    int ret = 0;

    pthread_mutex_lock(&cxl_uct_load_lock);
    if (cxl_uct_load_done || cxl_uct_load_present()) {
        goto out;
    }
    if (cxl_uct_load_find(path, sizeof(path)) != 0) {
        /* nothing to load: UCX runs without cxl (and says so if asked for it) */
        goto out;
    }
    if (dlopen(path, RTLD_NOW | RTLD_GLOBAL) == NULL) {
        snprintf(err, errlen, "loading the cxl transport %s: %s", path,
                 dlerror());
        ret = -1;
        goto out;
    }
out:
    if (ret == 0) {
        cxl_uct_load_done = 1;
    }
    pthread_mutex_unlock(&cxl_uct_load_lock);
    return ret;
}
