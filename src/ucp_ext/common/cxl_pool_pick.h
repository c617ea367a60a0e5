/*
 * cxl_pool_pick.h - the pool a process attaches when its caller names
 * none: the one the cxl transport attaches first (UCX_CXL_POOL, else its
 * "auto" rule), so that a library's buffers and peers are the transport's.
 */
#ifndef CXL_POOL_PICK_H
#define CXL_POOL_PICK_H

#include <ucx_cxl/cxlpool.h>

#include <stddef.h>

/* Where the pick came from */
typedef enum {
    CXL_POOL_PICK_LISTED,  /* the first entry of UCX_CXL_POOL */
    CXL_POOL_PICK_DEVDAX,  /* "auto": the first devdax device with a pool */
    CXL_POOL_PICK_DEFAULT  /* "auto", no such device: the per-user emulated
                              default, which the opener may create (with
                              cxlpool_default_size()), as the transport does */
} cxl_pool_pick_src_t;

/* Enumerates devdax devices the way cxlpool_devdax_foreach does */
typedef cxlpool_status_t (*cxl_pool_pick_foreach_t)(cxlpool_devdax_cb_t cb,
                                                    void *arg);

/*
 * The pool, into buf: the first non-empty entry of env (UCX_CXL_POOL)
 * unless it is "auto"; else the first device foreach reports that the
 * transport's "auto" takes (enabled, not in system-ram mode, holding a
 * pool: cxlpool_probe), else the emulated default.  env NULL or empty:
 * "auto".  Returns 0 with *src set, or -1 when the name does not fit in
 * len bytes.
 */
__attribute__((visibility("hidden")))
int cxl_pool_pick_from(const char *env, cxl_pool_pick_foreach_t foreach,
                       char *buf, size_t len, cxl_pool_pick_src_t *src);

/* The same for this process: UCX_CXL_POOL and libdaxctl's devices */
__attribute__((visibility("hidden")))
int cxl_pool_pick(char *buf, size_t len, cxl_pool_pick_src_t *src);

/*
 * cxlpool_open() parameters for path as the transport opens it: created on
 * first use only when create (the emulated default: CXL_POOL_PICK_DEFAULT),
 * in the coherence mode the pool was created with (emulate-nc: always sw).
 * params keeps path, which must outlive the open.
 */
__attribute__((visibility("hidden")))
void cxl_pool_pick_params(const char *path, int create,
                          cxlpool_params_t *params);

#endif
