/*
 * MPI datatypes and operations the library reduces.  Only predefined C
 * types with a fixed two's complement or IEEE layout and the arithmetic
 * and bitwise predefined operations; everything else (MPI_CHAR and
 * MPI_BYTE, which MPI does not reduce, long double, complex, logical and
 * pair types, Fortran types, user operations, MINLOC/MAXLOC, the logical
 * operations) goes to the previous module.
 */
#include "coll_cxl.h"

#include "ompi/datatype/ompi_datatype.h"

#include <stdbool.h>

/* signed or unsigned integer of a C type's size */
static int coll_cxl_int_by_size(size_t size, int is_signed,
                                cxl_coll_dtype_t *out)
{
    switch (size) {
    case 1: *out = is_signed ? CXL_COLL_INT8  : CXL_COLL_UINT8;  return 1;
    case 2: *out = is_signed ? CXL_COLL_INT16 : CXL_COLL_UINT16; return 1;
    case 4: *out = is_signed ? CXL_COLL_INT32 : CXL_COLL_UINT32; return 1;
    case 8: *out = is_signed ? CXL_COLL_INT64 : CXL_COLL_UINT64; return 1;
    default: return 0;
    }
}

/* the types the library reduces, and what each is there */
static int coll_cxl_dtype_scan(const struct ompi_datatype_t *dtype,
                               cxl_coll_dtype_t *out)
{
    static const struct {
        MPI_Datatype type;
        size_t       size;
        int          is_signed;
    } ints[] = {
        {MPI_INT8_T, 1, 1},   {MPI_UINT8_T, 1, 0},
        {MPI_INT16_T, 2, 1},  {MPI_UINT16_T, 2, 0},
        {MPI_INT32_T, 4, 1},  {MPI_UINT32_T, 4, 0},
        {MPI_INT64_T, 8, 1},  {MPI_UINT64_T, 8, 0},
        {MPI_SIGNED_CHAR, sizeof(signed char), 1},
        {MPI_UNSIGNED_CHAR, sizeof(unsigned char), 0},
        {MPI_SHORT, sizeof(short), 1},
        {MPI_UNSIGNED_SHORT, sizeof(unsigned short), 0},
        {MPI_INT, sizeof(int), 1},
        {MPI_UNSIGNED, sizeof(unsigned), 0},
        {MPI_LONG, sizeof(long), 1},
        {MPI_UNSIGNED_LONG, sizeof(unsigned long), 0},
        {MPI_LONG_LONG_INT, sizeof(long long), 1},
        {MPI_UNSIGNED_LONG_LONG, sizeof(unsigned long long), 0},
        {MPI_AINT, sizeof(MPI_Aint), 1},
        {MPI_OFFSET, sizeof(MPI_Offset), 1},
        {MPI_COUNT, sizeof(MPI_Count), 1},
    };
    size_t i;

    if (dtype == MPI_FLOAT) {
        *out = CXL_COLL_FLOAT32;
        return sizeof(float) == 4;
    }
    if (dtype == MPI_DOUBLE) {
        *out = CXL_COLL_FLOAT64;
        return sizeof(double) == 8;
    }
    for (i = 0; i < sizeof(ints) / sizeof(ints[0]); ++i) {
        if (dtype == ints[i].type) {
            return coll_cxl_int_by_size(ints[i].size, ints[i].is_signed, out);
        }
    }
    return 0;
}

/*
 * Each call's answer for a predefined type, kept by the type's id: a
 * reduction looks its datatype up on every call, and the scan above is
 * ~95 instructions for MPI_INT.  A slot holds the type it answers for
 * (two types behind one id: the second is scanned every time); the first
 * thread to claim an empty slot fills it, then publishes the type, and a
 * thread that sees another type, or none yet, just scans.
 */
#define COLL_CXL_SLOT_BUSY ((const struct ompi_datatype_t *)1)
typedef struct {
    const struct ompi_datatype_t *type;  /* NULL: nothing kept yet */
    int                           takes;
    cxl_coll_dtype_t              out;
} coll_cxl_dtype_slot_t;

static coll_cxl_dtype_slot_t coll_cxl_dtype_slots[OMPI_DATATYPE_MAX_PREDEFINED];

int mca_coll_cxl_reduce_dtype(const struct ompi_datatype_t *dtype,
                              cxl_coll_dtype_t *out)
{
    const struct ompi_datatype_t *empty = NULL;
    coll_cxl_dtype_slot_t *slot;
    int takes;

    if (!ompi_datatype_is_predefined(dtype) || (dtype->id < 0) ||
        (dtype->id >= OMPI_DATATYPE_MAX_PREDEFINED)) {
        return coll_cxl_dtype_scan(dtype, out);
    }
    slot = &coll_cxl_dtype_slots[dtype->id];
    if (__atomic_load_n(&slot->type, __ATOMIC_ACQUIRE) == dtype) {
        *out = slot->out;
        return slot->takes;
    }
    takes = coll_cxl_dtype_scan(dtype, out);
    /* the first to claim the empty slot fills it */
    if (__atomic_compare_exchange_n(&slot->type, &empty, COLL_CXL_SLOT_BUSY,
                                    0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        slot->takes = takes;
        slot->out   = takes ? *out : CXL_COLL_UINT8;
        __atomic_store_n(&slot->type, dtype, __ATOMIC_RELEASE);
    }
    return takes;
}

int mca_coll_cxl_reduce_op(const struct ompi_op_t *op, cxl_coll_op_t *out)
{
    static const struct {
        MPI_Op        op;
        cxl_coll_op_t cxl;
    } ops[] = {
        {MPI_SUM, CXL_COLL_SUM},   {MPI_PROD, CXL_COLL_PROD},
        {MPI_MIN, CXL_COLL_MIN},   {MPI_MAX, CXL_COLL_MAX},
        {MPI_BAND, CXL_COLL_BAND}, {MPI_BOR, CXL_COLL_BOR},
        {MPI_BXOR, CXL_COLL_BXOR},
    };
    size_t i;

    for (i = 0; i < sizeof(ops) / sizeof(ops[0]); ++i) {
        if (op == ops[i].op) {
            *out = ops[i].cxl;
            return 1;
        }
    }
    return 0;
}
