/*
 * Staging of user buffers for the data-movement collectives.  The library
 * moves bytes; a buffer whose datatype is contiguous for the count is
 * handed over in place (from its true lower bound), any other is packed
 * into (or unpacked from) a temporary contiguous copy with Open MPI's
 * convertor.  The choice is local: the library call itself happens on
 * every rank alike whatever each rank's datatype is.
 */
#include "coll_cxl.h"

#include "ompi/datatype/ompi_datatype.h"
#include "opal/datatype/opal_convertor.h"

#include <stdlib.h>

int mca_coll_cxl_stage_in(mca_coll_cxl_stage_t *st, const void *buf,
                          size_t count, const struct ompi_datatype_t *dtype,
                          int pack)
{
    ptrdiff_t true_lb, true_extent;
    opal_convertor_t conv;
    struct iovec iov;
    uint32_t iov_count = 1;
    size_t size, max_data;
    int rc;

    ompi_datatype_type_size(dtype, &size);
    st->user  = (void *)buf;
    st->dtype = dtype;
    st->count = count;
    st->bytes = count * size;
    st->tmp   = NULL;
    if ((st->bytes == 0) ||
        /* the count only matters as one or more */
        ompi_datatype_is_contiguous_memory_layout(dtype, (count > 1) ? 2 : 1)) {
        ompi_datatype_get_true_extent(dtype, &true_lb, &true_extent);
        st->ptr = (char *)buf + ((st->bytes == 0) ? 0 : true_lb);
        return OMPI_SUCCESS;
    }

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
                                                  &dtype->super, count, buf,
                                                  0, &conv);
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

int mca_coll_cxl_stage_out(mca_coll_cxl_stage_t *st, int unpack)
{
    opal_convertor_t conv;
    struct iovec iov;
    uint32_t iov_count = 1;
    size_t max_data;
    int rc = OMPI_SUCCESS;

    if (st->tmp == NULL) {
        return OMPI_SUCCESS;
    }
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
