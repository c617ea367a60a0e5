/*
 * mpool/cxl: an Open MPI 4.1 memory pool component (mpool API 3.0.0) that
 * gives MPI_Alloc_mem memory from the CXL pool the collectives use, so
 * that coll/cxl reads such buffers in place instead of copying them into
 * the team region (one copy less per collective, the receivers'), and pml
 * ucx moves them with one get from the pool.
 *
 * Open MPI 4.1's MPI_Alloc_mem asks every mpool component for a module
 * (mca_mpool_base_module_lookup) with the info key "mpool_hints" as hints,
 * and takes the highest priority above the default allocator's 50; when
 * the chosen module returns NULL it gives malloc'd memory instead.  This
 * component answers:
 *   - hints naming it ("cxl" or "mpool=cxl" among comma-separated
 *     hints): priority 100, whatever mpool_cxl_priority says;
 *   - no hints: mpool_cxl_priority (default 0: not chosen;
 *     contrib/openmpi-cxl.conf sets 60, so every MPI_Alloc_mem of a job
 *     run with it comes from the pool).
 * A failed allocation (pool full, no pool) is reported on stderr the first
 * time, with the reason, because Open MPI then silently hands out malloc'd
 * memory; mpool_cxl_verbose 1 reports every allocation.
 */
#include "opal_config.h"

#include "opal/mca/base/base.h"
#include "opal/mca/mpool/mpool.h"

#include <ucx_cxl/coll.h>

#include <stdio.h>
#include <string.h>

typedef struct {
    mca_mpool_base_component_t super;
    int                        priority;
    int                        verbose;
    char                      *pool;
    int                        warned;  /* a failure was reported */
} mca_mpool_cxl_component_t;

static int mpool_cxl_register(void);
static int mpool_cxl_query(const char *hints, int *priority,
                           mca_mpool_base_module_t **module);

mca_mpool_cxl_component_t mca_mpool_cxl_component = {
    .super = {
        .mpool_version = {
            MCA_MPOOL_BASE_VERSION_3_0_0,
            .mca_component_name = "cxl",
            MCA_BASE_MAKE_VERSION(component, OPAL_MAJOR_VERSION,
                                  OPAL_MINOR_VERSION, OPAL_RELEASE_VERSION),
            .mca_register_component_params = mpool_cxl_register,
        },
        .mpool_data = {
            MCA_BASE_METADATA_PARAM_NONE
        },
        .mpool_query = mpool_cxl_query,
    },
    .priority = 0,
    .verbose  = 0,
    .pool     = NULL,
};

static void mpool_cxl_var(const char *name, const char *help,
                          mca_base_var_type_t type, void *storage)
{
    (void)mca_base_component_var_register(
            &mca_mpool_cxl_component.super.mpool_version, name, help, type,
            NULL, 0, 0, OPAL_INFO_LVL_9, MCA_BASE_VAR_SCOPE_READONLY,
            storage);
}

static int mpool_cxl_register(void)
{
    mca_mpool_cxl_component_t *c = &mca_mpool_cxl_component;

    c->priority = 0;
    mpool_cxl_var("priority",
                  "Priority of mpool/cxl for MPI_Alloc_mem without the info "
                  "key mpool_hints (Open MPI's default allocator has 50: "
                  "above 50 MPI_Alloc_mem memory comes from the CXL pool, "
                  "where coll/cxl reads it in place; 0: only when "
                  "mpool_hints names cxl)",
                  MCA_BASE_VAR_TYPE_INT, &c->priority);
    c->pool = "";
    mpool_cxl_var("pool",
                  "CXL pool to allocate from (a path or emulate-nc:PATH); "
                  "empty: coll_cxl_pool if set, else the collectives "
                  "library's choice (CXL_COLL_POOL, else the pool the cxl "
                  "transport attaches first), so that coll/cxl's teams "
                  "find the memory in their pool",
                  MCA_BASE_VAR_TYPE_STRING, &c->pool);
    c->verbose = 0;
    mpool_cxl_var("verbose",
                  "1: report every allocation and release on stderr "
                  "(failures are reported the first time anyway)",
                  MCA_BASE_VAR_TYPE_INT, &c->verbose);
    return OPAL_SUCCESS;
}

/* mpool_cxl_pool, else coll/cxl's pool parameter, else NULL (the library's) */
static const char *mpool_cxl_pool_path(void)
{
    const mca_base_var_t *var = NULL;
    const char *p = mca_mpool_cxl_component.pool;
    int idx;

    if ((p != NULL) && (p[0] != '\0')) {
        return p;
    }
    idx = mca_base_var_find("ompi", "coll", "cxl", "pool");
    if ((idx >= 0) && (mca_base_var_get(idx, &var) == OPAL_SUCCESS) &&
        (var->mbv_storage != NULL) && (var->mbv_storage->stringval != NULL) &&
        (var->mbv_storage->stringval[0] != '\0')) {
        return var->mbv_storage->stringval;
    }
    return NULL;
}

static void *mpool_cxl_alloc(mca_mpool_base_module_t *mpool, size_t size,
                             size_t align, uint32_t flags)
{
    mca_mpool_cxl_component_t *c = &mca_mpool_cxl_component;
    const char *path = mpool_cxl_pool_path();
    void *p;

    (void)mpool;
    (void)flags;
    if (size == 0) {
        return NULL;    /* Open MPI's default allocator answers it */
    }
    p = cxl_coll_pool_mem_alloc(path, size, align);
    if (p == NULL) {
        if (!c->warned || c->verbose) {
            fprintf(stderr, "mpool/cxl: MPI_Alloc_mem of %zu bytes from %s "
                    "failed: %s; Open MPI hands out malloc'd memory instead "
                    "(not read in place by coll/cxl)%s\n", size,
                    path ? path : "the collectives' pool",
                    cxl_coll_last_error(),
                    c->verbose ? "" : "; later failures are not reported "
                    "(mpool_cxl_verbose 1 reports them)");
            c->warned = 1;
        }
        return NULL;
    }
    if (c->verbose) {
        fprintf(stderr, "mpool/cxl: %zu bytes at %p from %s\n", size, p,
                path ? path : "the collectives' pool");
    }
    return p;
}

static void mpool_cxl_free(mca_mpool_base_module_t *mpool, void *addr)
{
    (void)mpool;
    if (cxl_coll_pool_mem_free(addr) != CXL_COLL_OK) {
        fprintf(stderr, "mpool/cxl: MPI_Free_mem(%p): %s\n", addr,
                cxl_coll_last_error());
    } else if (mca_mpool_cxl_component.verbose) {
        fprintf(stderr, "mpool/cxl: %p released\n", addr);
    }
}

static mca_mpool_base_module_t mpool_cxl_module = {
    .mpool_component       = &mca_mpool_cxl_component.super,
    .mpool_alloc           = mpool_cxl_alloc,
    .mpool_free            = mpool_cxl_free,
    .mpool_allocation_unit = 4096,
    .mpool_name            = "cxl",
};

/* "cxl" or "mpool=cxl" among the comma-separated hints */
static int mpool_cxl_named(const char *hints)
{
    const char *p = hints, *e;
    size_t n;

    while ((p != NULL) && (*p != '\0')) {
        e = strchr(p, ',');
        n = e ? (size_t)(e - p) : strlen(p);
        if (((n == 3) && !strncmp(p, "cxl", 3)) ||
            ((n == 9) && !strncmp(p, "mpool=cxl", 9))) {
            return 1;
        }
        p = e ? e + 1 : NULL;
    }
    return 0;
}

static int mpool_cxl_query(const char *hints, int *priority,
                           mca_mpool_base_module_t **module)
{
    if ((hints != NULL) && (hints[0] != '\0')) {
        if (!mpool_cxl_named(hints)) {
            return OPAL_ERR_NOT_FOUND;  /* hints for another mpool */
        }
        *priority = 100;
    } else {
        *priority = mca_mpool_cxl_component.priority;
    }
    *module = &mpool_cxl_module;
    return OPAL_SUCCESS;
}
