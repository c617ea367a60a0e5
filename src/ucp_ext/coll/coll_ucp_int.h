/*
 * Internals of libcxl_coll_ucp: the oob object shared by the allgather
 * (coll_oob_ucp.c) and the TCP rendezvous bootstrap (coll_boot_ucp.c).
 */
#ifndef CXL_COLL_UCP_INT_H
#define CXL_COLL_UCP_INT_H

#include <ucx_cxl/coll_ucp.h>

#include <stdint.h>

#define CXL_COLL_UCP_MAX_RANKS 65536        /* bits 15..0 of a tag */
#define CXL_COLL_UCP_SEQ_SHIFT 16           /* bits 31..16, wrapping */
#define CXL_COLL_UCP_SEQ_MASK  0xffffull
#define CXL_COLL_UCP_INST_SHIFT 32          /* bits 47..32 */
#define CXL_COLL_UCP_PFX_SHIFT 48

typedef struct cxl_coll_ucp_call cxl_coll_ucp_call_t;

/* Error handler argument of an endpoint the bootstrap created. */
typedef struct {
    cxl_coll_ucp_oob_t *oob;
    int                 rank;
    int                 failed;     /* the handler ran */
    ucs_status_t        status;
} cxl_coll_ucp_peer_t;

struct cxl_coll_ucp_oob {
    ucp_worker_h         worker;
    int                  rank;
    int                  size;
    ucp_ep_h            *eps;       /* size entries, NULL at rank */
    cxl_coll_ucp_peer_t *peers;     /* bootstrap only: owned endpoints */
    double               timeout;
    double               deadline;  /* > 0: every call's, instead of
                                       its start + timeout (the
                                       bootstrap's check allgather) */
    uint64_t             prefix;    /* tag_prefix << 48 */
    uint64_t             instance;  /* << 32: a bootstrap's, drawn by rank
                                       0 (oob_create: 0), so a late message
                                       of an earlier object's failed call
                                       on the same worker and prefix is
                                       never this one's */
    uint32_t             seq;       /* of the next allgather */
    int                  failed;    /* status of the call that failed */
    /* a failed call whose requests UCX may still touch: freed once owned
     * endpoints are closed, else left (one per object at most) */
    cxl_coll_ucp_call_t *orphan;
    struct cxl_coll_ucp_oob *next;  /* the process's live objects */
};

double cxl_coll_ucp_now(void);

/* Record (and print) an error of rank; returns status. */
cxl_coll_status_t cxl_coll_ucp_error(int rank, cxl_coll_status_t status,
                                     const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Checks the fields both entry points share; allocates the object with an
 * eps array of params->size NULLs. */
cxl_coll_status_t cxl_coll_ucp_oob_alloc(const cxl_coll_ucp_params_t *params,
                                         cxl_coll_ucp_oob_t **oob_p);

#endif
