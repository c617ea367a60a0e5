/*
 * emulate-nc: a strict emulator of a non-coherent multi-host pool
 * (doc/design/sw-coherence.md).  "emulate-nc:PATH" opens the ordinary pool
 * file PATH as the shared memory; every emulated host k maps a private
 * view PATH.host<k>, and software write-back / invalidate of the view
 * (cxl_coh_writeback/invalidate in sw mode) are the only way data moves
 * between a view and the memory.
 */
#ifndef CXLPOOL_EMULATE_NC_H
#define CXLPOOL_EMULATE_NC_H

#include "pool_int.h"

/* The pool file of "emulate-nc:PATH", or NULL for any other path. */
const char *cxlpool_emu_strip(const char *path);

/*
 * After the pool file is open as pool->fd and its superblock validated:
 * map it as the memory, choose the emulated host (params->host_index,
 * UCX_CXL_HOST_INDEX, else the lowest free one), join or fill its view and
 * map the view as pool->base.  Sets pool->emu and pool->host_index.  On
 * error the caller runs cxlpool_close(), which undoes what was done.
 */
cxlpool_status_t cxlpool_emu_open(cxlpool_t *pool,
                                  const cxlpool_params_t *params);

/* Unmap view and memory; the last process of the host removes the view. */
void cxlpool_emu_close(cxlpool_t *pool);

/*
 * A freed extent's bytes carry nothing anybody may read: drop them from
 * memory and from this host's view, so that tmpfs gives the pages back
 * and a later view fill does not copy them.
 */
void cxlpool_emu_discard(cxlpool_t *pool, uint64_t offset, uint64_t length);

/* After the pool file is destroyed: remove views that no process holds. */
void cxlpool_emu_remove_stale(const char *path);

/* pool_open.c: map fd (pool->size bytes) at a 2 MiB aligned address. */
cxlpool_status_t cxlpool_map_fd(cxlpool_t *pool, int fd, int prot,
                                uint8_t **addr_p);

#endif
