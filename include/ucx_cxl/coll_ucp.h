/*
 * ucx-cxl collectives bootstrapped over UCP (libcxl_coll_ucp).
 *
 * cxl_coll_team_create() takes an out-of-band allgather; this helper
 * provides one that runs over UCP tag messages between endpoints the
 * program already has, and, for programs that have nothing, a bootstrap
 * that exchanges worker addresses through a TCP rendezvous at rank 0 and
 * creates the endpoints itself:
 *
 *     cxl_coll_ucp_params_t p;
 *     cxl_coll_ucp_params_init(&p);
 *     p.worker = worker; p.rank = rank; p.size = size;
 *     p.rendezvous = "10.0.0.1:7000";       // where rank 0 listens
 *     cxl_coll_ucp_bootstrap(&p, &oob);     // or cxl_coll_ucp_oob_create()
 *     cxl_coll_team_params_init(&tp);
 *     cxl_coll_ucp_team_params(oob, &tp);   // rank, size, allgather, arg
 *     cxl_coll_team_create(&tp, &team);
 *     ...
 *     cxl_coll_team_destroy(team);
 *     cxl_coll_ucp_oob_destroy(oob);        // before the worker
 *
 * Tags: every message of the helper carries the 16-bit prefix tag_prefix
 * in bits 63..48 of its tag (default CXL_COLL_UCP_TAG_PREFIX); the program
 * must not send or receive tags with that prefix on the worker (nor
 * receive with a mask that would match them).  Bits 47..32 hold the
 * object's instance (drawn by rank 0 at each bootstrap; 0 for objects of
 * cxl_coll_ucp_oob_create), bits 31..16 the sequence number of the
 * allgather, bits 15..0 the sender's rank.  So every live oob object on a
 * worker needs its own prefix (a second one with the same is refused:
 * CXL_COLL_ERR_INVAL).  A peer's late message of a failed call stays
 * queued in UCP under its tag: a new bootstrap on the same worker and
 * prefix has another instance and never takes it, but a new object of
 * cxl_coll_ucp_oob_create() after a failed call should take another
 * prefix.
 *
 * The worker needs UCP_FEATURE_TAG.  Threads: an oob object and its worker
 * are used by one thread at a time.  Errors: functions return a
 * cxl_coll_status_t; the allgather returns it as an int (0: success).
 * cxl_coll_ucp_last_error() has the detail, which is also printed on
 * stderr as "cxl-coll-ucp[rank R]: ...".
 */
#ifndef UCX_CXL_COLL_UCP_H
#define UCX_CXL_COLL_UCP_H

#include <ucx_cxl/coll.h>
#include <ucp/api/ucp.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CXL_COLL_UCP_TAG_PREFIX     0xC0C1u  /* bits 63..48 of the tags */
#define CXL_COLL_UCP_TIMEOUT_DEFAULT 60.0    /* seconds */

typedef struct cxl_coll_ucp_oob cxl_coll_ucp_oob_t;

typedef struct {
    ucp_worker_h  worker;      /* required; UCP_FEATURE_TAG */
    int           rank;        /* 0 .. size-1 */
    int           size;        /* 1 .. 65536 */
    /* cxl_coll_ucp_oob_create(): an endpoint to every other rank, indexed
     * by rank, NULL at the own rank; they stay the caller's. */
    ucp_ep_h     *eps;
    /* cxl_coll_ucp_bootstrap(): "HOST:PORT" (IPv6: "[ADDR]:PORT") where
     * rank 0 listens and the others connect; rank 0 may give PORT 0 and
     * learns the port from the listening callback. */
    const char   *rendezvous;
    /* Seconds one allgather may take, and the whole bootstrap (its
     * rendezvous and closing check allgather together); 0: the default
     * (CXL_COLL_UCP_TIMEOUT_DEFAULT). */
    double        timeout;
    /* Bits 63..48 of every tag; 0: CXL_COLL_UCP_TAG_PREFIX. */
    unsigned      tag_prefix;
    /* Rank 0 of cxl_coll_ucp_bootstrap(), optional: called once it
     * listens, with the port (useful with PORT 0). */
    void        (*listening)(void *arg, int port);
    void         *listening_arg;
} cxl_coll_ucp_params_t;

void cxl_coll_ucp_params_init(cxl_coll_ucp_params_t *params);

/* The allgather over the caller's endpoints (copied; no call is made). */
cxl_coll_status_t cxl_coll_ucp_oob_create(const cxl_coll_ucp_params_t *params,
                                          cxl_coll_ucp_oob_t **oob_p);

/*
 * Collective over params->size processes: exchange worker addresses
 * through the TCP rendezvous, create endpoints to every other rank
 * (UCP_ERR_HANDLING_MODE_PEER: a peer that fails makes the allgather fail
 * once the transport notices, instead of at the timeout; over UCX_TLS=cxl
 * that is UCP's keepalive, UCX_KEEPALIVE_INTERVAL, 20 s by default, so
 * the timeout comes first unless it is set lower), check them with one
 * allgather.  The
 * endpoints belong to the oob object: cxl_coll_ucp_oob_destroy() closes
 * them.  Fails on every rank that is there, within the timeout, when a
 * rank does not show up or the ranks disagree on size.
 */
cxl_coll_status_t cxl_coll_ucp_bootstrap(const cxl_coll_ucp_params_t *params,
                                         cxl_coll_ucp_oob_t **oob_p);

/* Closes the endpoints the bootstrap created, frees the object. */
void cxl_coll_ucp_oob_destroy(cxl_coll_ucp_oob_t *oob);

/* cxl_coll_oob_allgather_t; arg is a cxl_coll_ucp_oob_t. */
int cxl_coll_ucp_allgather(void *arg, const void *sbuf, void *rbuf,
                           size_t len);

/* Sets rank, size, oob_allgather and oob_arg of team params. */
void cxl_coll_ucp_team_params(cxl_coll_ucp_oob_t *oob,
                              cxl_coll_team_params_t *params);

/* An endpoint of the oob object (NULL at the own rank). */
ucp_ep_h cxl_coll_ucp_ep(const cxl_coll_ucp_oob_t *oob, int rank);

/* The detail of this thread's last error of the helper. */
const char *cxl_coll_ucp_last_error(void);

#ifdef __cplusplus
}
#endif

#endif
