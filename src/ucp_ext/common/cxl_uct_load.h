/*
 * cxl_uct_load.h - load libuct_cxl.so before ucp_init (UCX 1.13 does not).
 */
#ifndef CXL_UCT_LOAD_H
#define CXL_UCT_LOAD_H

#include <stddef.h>

/*
 * Load the cxl transport module unless it is in the process already.
 * Looks in $CXL_LIBDIR, then next to the calling library or binary, then
 * in the installation's LIBDIR (each with its ucx/).
 * Returns 0 when it is loaded or there is none to load (UCX then runs
 * without cxl); -1 with a message in err when a module was found and
 * failed to load (built against another UCX, for instance).
 */
/* hidden: every library that links it keeps its own copy and lookup path */
__attribute__((visibility("hidden")))
int cxl_uct_load(char *err, size_t errlen);

#endif
