/*
 * Pool memory for user buffers: allocated from the team's pool (owned by
 * this rank's attachment), so a collective whose input lies there is read
 * by the peers in place (cxl_coll_in_pool), without the copy into the
 * team region.
 */
#include "coll_int.h"

#include <stdlib.h>

void *cxl_coll_mem_alloc(cxl_coll_team_t *team, size_t length)
{
    cxlpool_extent_t ext;
    cxlpool_status_t st;
    uint64_t *offs;
    unsigned cap;

    if ((team == NULL) || (length == 0)) {
        cxl_coll_error(CXL_COLL_ERR_INVAL, "mem_alloc: %s",
                       team ? "length 0" : "team is NULL");
        return NULL;
    }
    if (team->mem_count == team->mem_cap) {
        cap  = team->mem_cap ? 2 * team->mem_cap : 16;
        offs = realloc(team->mem_offs, cap * sizeof(*offs));
        if (offs == NULL) {
            cxl_coll_error(CXL_COLL_ERR_NO_MEMORY, "mem_alloc bookkeeping");
            return NULL;
        }
        team->mem_offs = offs;
        team->mem_cap  = cap;
    }
    /* cache-line aligned: no line is shared with another rank's data */
    st = cxlpool_alloc(team->pool, length, 4096, NULL, 0, &ext);
    if (st != CXLPOOL_OK) {
        cxl_coll_error(CXL_COLL_ERR_NO_MEMORY, "mem_alloc of %zu bytes: %s",
                       length, cxlpool_last_error());
        return NULL;
    }
    team->mem_offs[team->mem_count++] = ext.offset;
    return team->pool_base + ext.offset;
}

void cxl_coll_mem_free(cxl_coll_team_t *team, void *ptr)
{
    uint64_t off;
    unsigned i;

    if ((team == NULL) || (ptr == NULL)) {
        return;
    }
    off = (uint64_t)((uint8_t*)ptr - team->pool_base);
    for (i = 0; i < team->mem_count; ++i) {
        if (team->mem_offs[i] == off) {
            cxlpool_free(team->pool, off);
            team->mem_offs[i] = team->mem_offs[--team->mem_count];
            return;
        }
    }
    cxl_coll_error(CXL_COLL_ERR_INVAL, "mem_free: %p is no cxl_coll_mem_alloc()"
                   " buffer of this team", ptr);
}

void cxl_coll_mem_cleanup(cxl_coll_team_t *team)
{
    unsigned i;

    for (i = 0; i < team->mem_count; ++i) {
        cxlpool_free(team->pool, team->mem_offs[i]);
    }
    team->mem_count = 0;
}
