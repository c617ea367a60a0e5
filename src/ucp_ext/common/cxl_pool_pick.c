/*
 * cxl_pool_pick.c - which pool "the transport's pool" is (see the header).
 *
 * The rule is libuct_cxl's (uct_cxl_md_open, uct_cxl_devdax_scan_cb in
 * src/uct/cxl/cxl_md.c); the extension libraries that open a pool of their
 * own (collectives, the Dask comm's frames, the broker client's check)
 * share this one copy of it, so none of them lands in another pool than
 * the transport's peers.
 */
#include "cxl_pool_pick.h"

#include <stdlib.h>
#include <string.h>

#define CXL_POOL_PICK_AUTO "auto"

typedef struct {
    char path[sizeof(((cxlpool_devdax_info_t*)0)->path)];
} cxl_pool_pick_dax_t;

/* The transport's filter; it never formats a device, so no pool: skipped */
static void cxl_pool_pick_dax_cb(const cxlpool_devdax_info_t *dev, void *arg)
{
    cxl_pool_pick_dax_t *pick = arg;
    cxlpool_info_t info;
    size_t n;

    if ((pick->path[0] != '\0') || dev->system_ram || !dev->enabled ||
        (cxlpool_probe(dev->path, &info) != CXLPOOL_OK)) {
        return;
    }
    n = strnlen(dev->path, sizeof(pick->path) - 1);
    memcpy(pick->path, dev->path, n);
    pick->path[n] = '\0';
}

static int cxl_pool_pick_copy(const char *name, size_t n, char *buf, size_t len)
{
    if (n >= len) {
        if (len > 0) {
            buf[0] = '\0';
        }
        return -1;
    }
    memcpy(buf, name, n);
    buf[n] = '\0';
    return 0;
}

int cxl_pool_pick_from(const char *env, cxl_pool_pick_foreach_t foreach,
                       char *buf, size_t len, cxl_pool_pick_src_t *src)
{
    cxl_pool_pick_dax_t dax = {.path = ""};
    char def[256];
    size_t n = 0;

    if (env != NULL) {
        env += strspn(env, ",");  /* UCX's list parser skips empty entries */
        n    = strcspn(env, ",");
    }
    if ((n > 0) && ((n != strlen(CXL_POOL_PICK_AUTO)) ||
                    strncmp(env, CXL_POOL_PICK_AUTO, n))) {
        *src = CXL_POOL_PICK_LISTED;
        return cxl_pool_pick_copy(env, n, buf, len);
    }
    /* an enumeration that fails finds nothing: the default, as in the
     * transport */
    (void)foreach(cxl_pool_pick_dax_cb, &dax);
    if (dax.path[0] != '\0') {
        *src = CXL_POOL_PICK_DEVDAX;
        return cxl_pool_pick_copy(dax.path, strlen(dax.path), buf, len);
    }
    *src = CXL_POOL_PICK_DEFAULT;
    cxlpool_default_path(def, sizeof(def));
    return cxl_pool_pick_copy(def, strlen(def), buf, len);
}

int cxl_pool_pick(char *buf, size_t len, cxl_pool_pick_src_t *src)
{
    return cxl_pool_pick_from(getenv("UCX_CXL_POOL"), cxlpool_devdax_foreach,
                              buf, len, src);
}

void cxl_pool_pick_params(const char *path, int create,
                          cxlpool_params_t *params)
{
    cxlpool_info_t info;

    cxlpool_params_init(params);
    params->path = path;
    if (create) {
        params->flags = CXLPOOL_CREATE;
        params->size  = cxlpool_default_size();
    }
    /* a pool that does not exist yet is made hardware-coherent */
    params->coherence = (cxlpool_probe(path, &info) == CXLPOOL_OK) ?
                        info.coherence : CXL_COH_HW;
}
