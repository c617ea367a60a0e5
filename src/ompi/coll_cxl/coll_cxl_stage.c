/*
 * Staging of user buffers for the data-movement collectives.  The library
 * moves bytes; a buffer whose datatype is contiguous for the count is
 * handed over in place (from its true lower bound), any other is packed
 * into (or unpacked from) a temporary contiguous copy with Open MPI's
 * convertor.  The choice is local: the library call itself happens on
 * every rank alike whatever each rank's datatype is.  The contiguous
 * case, every call's, is inline in coll_cxl.h; the copies are here.
 */
#include "coll_cxl.h"

#include "opal/datatype/opal_convertor.h"

#include <stdlib.h>

int mca_coll_cxl_stage_tmp(mca_coll_cxl_stage_t *st, int pack)
{
    opal_convertor_t conv;
    struct iovec iov;
    uint32_t iov_count = 1;
    size_t max_data;
    int rc;

    st->tmp = malloc(st->bytes);
    if (st->tmp == NULL) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    st->ptr = st->tmp;
    if (!pack) {
        return OMPI_SUCCESS;
    }
    OBJ_CONSTRUCT(&conv, opal_convertor_t);
    rc = opal_convertor_copy_and_prepare_for_send(ompi_mpi_local_convertor,
                                                  &st->dtype->super, st->count,
                                                  st->user, 0, &conv);
    if (rc == OPAL_SUCCESS) {
        iov.iov_base = st->tmp;
        iov.iov_len  = st->bytes;
        max_data     = st->bytes;
        rc = (opal_convertor_pack(&conv, &iov, &iov_count, &max_data) < 0) ||
             (max_data != st->bytes) ? OMPI_ERROR : OMPI_SUCCESS;
    }
    OBJ_DESTRUCT(&conv);
    if (rc != OMPI_SUCCESS) {
        free(st->tmp);
        st->tmp = NULL;
    }
    return rc;
}

int mca_coll_cxl_stage_release(mca_coll_cxl_stage_t *st, int unpack)
{
    opal_convertor_t conv;
    struct iovec iov;
    uint32_t iov_count = 1;
    size_t max_data;
    int rc = OMPI_SUCCESS;

    if (unpack) {
        OBJ_CONSTRUCT(&conv, opal_convertor_t);
        rc = opal_convertor_copy_and_prepare_for_recv(ompi_mpi_local_convertor,
                                                      &st->dtype->super,
                                                      st->count, st->user, 0,
                                                      &conv);
        if (rc == OPAL_SUCCESS) {
            iov.iov_base = st->tmp;
            iov.iov_len  = st->bytes;
            max_data     = st->bytes;
            rc = (opal_convertor_unpack(&conv, &iov, &iov_count,
                                        &max_data) < 0) ||
                 (max_data != st->bytes) ? OMPI_ERROR : OMPI_SUCCESS;
        }
        OBJ_DESTRUCT(&conv);
    }
    free(st->tmp);
    st->tmp = NULL;
    return rc;
}
