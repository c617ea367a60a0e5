/*
 * A two-rank team whose rank 0 is the real library and whose rank 1 is a
 * pool extent the test (or fuzzer) writes by hand: the out-of-band
 * allgather that makes rank 1's record from rank 0's.  For tests that must
 * put a peer's lines into states a live peer passes through too quickly
 * to test (test_coll_lines) or never (fuzz_coll_sig).
 */
#ifndef CXL_COLL_FAKE_PEER_H
#define CXL_COLL_FAKE_PEER_H

#include <ucx_cxl/coll.h>
#include <ucx_cxl/cxlpool.h>

#include <stddef.h>
#include <stdint.h>

typedef struct {
    cxlpool_extent_t ext;      /* rank 1's partition, allocated by the test */
    uint8_t         *part;     /* ... in the test's mapping of the pool */
    uint64_t         own_off;  /* rank 0's partition, from its record */
} cxl_fake_peer_t;

/*
 * cxl_coll_oob_allgather_t with arg = cxl_fake_peer_t: rank 1's
 * contribution is rank 0's, except in the team creation record, where it
 * names the extent (its attachment token stays rank 0's, which is alive,
 * so liveness checks pass).
 */
int cxl_fake_peer_oob(void *arg, const void *sbuf, void *rbuf, size_t len);

/*
 * Rank 0 of a team of 2 on pool_path (region bytes each, 0: the
 * configuration) with rank 1 the extent of peer, zeroed first as a fresh
 * member leaves its partition.
 */
cxl_coll_status_t cxl_fake_peer_team(cxl_fake_peer_t *peer,
                                     const char *pool_path, size_t region,
                                     cxl_coll_team_t **team);
/* The same with the caller's parameters (rank, size and the out-of-band
 * exchange are filled in). */
cxl_coll_status_t cxl_fake_peer_team_params(cxl_fake_peer_t *peer,
                                            cxl_coll_team_params_t *params,
                                            cxl_coll_team_t **team);

#endif
