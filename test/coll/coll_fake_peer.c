/* The out-of-band exchange of a team with a hand-written rank 1. */
#include "coll_fake_peer.h"

#include "coll_int.h"

#include <string.h>

int cxl_fake_peer_oob(void *arg, const void *sbuf, void *rbuf, size_t len)
{
    cxl_fake_peer_t *peer = arg;
    cxl_coll_oob_rec_t *r1;

    memcpy(rbuf, sbuf, len);
    memcpy((uint8_t*)rbuf + len, sbuf, len);
    if (len == sizeof(cxl_coll_oob_rec_t)) {
        peer->own_off = ((const cxl_coll_oob_rec_t*)sbuf)->part_off;
        r1            = (cxl_coll_oob_rec_t*)((uint8_t*)rbuf + len);
        r1->rank      = 1;
        r1->part_off  = peer->ext.offset;
        r1->part_len  = peer->ext.length;
        r1->ext_index = peer->ext.index;
        r1->ext_gen   = peer->ext.gen;
    }
    return 0;
}

cxl_coll_status_t cxl_fake_peer_team(cxl_fake_peer_t *peer,
                                     const char *pool_path, size_t region,
                                     cxl_coll_team_t **team)
{
    cxl_coll_team_params_t params;

    cxl_coll_team_params_init(&params);
    params.pool_path   = pool_path;
    params.region_size = region;
    return cxl_fake_peer_team_params(peer, &params, team);
}

cxl_coll_status_t cxl_fake_peer_team_params(cxl_fake_peer_t *peer,
                                            cxl_coll_team_params_t *params,
                                            cxl_coll_team_t **team)
{
    memset(peer->part, 0, peer->ext.length);
    params->rank          = 0;
    params->size          = 2;
    params->oob_allgather = cxl_fake_peer_oob;
    params->oob_arg       = peer;
    return cxl_coll_team_create(params, team);
}
