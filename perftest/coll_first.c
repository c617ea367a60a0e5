/*
 * coll_first - a program that only starts non-blocking collectives: on
 * each of --dups fresh communicators (MPI_Comm_dup of MPI_COMM_WORLD) it
 * times the first MPI_Iallreduce + MPI_Wait (with coll/cxl this call
 * makes the communicator's team) and then the mean of --calls more; it
 * also times each MPI_Comm_dup (Open MPI agrees on the new context id with
 * MPI_Iallreduce calls on MPI_COMM_WORLD, libnbc's under coll/cxl's
 * coll_cxl_cid_prev).
 * Driven by perftest/run-coll-first.sh, which runs it under coll/cxl and
 * under what Open MPI gives without it.
 *
 * Each figure is the slowest rank's (MPI_MAX over the ranks), per
 * communicator; the program prints the median, min and max over the
 * communicators as one CSV line:
 *   first_med,first_min,first_max,steady_med,steady_min,steady_max,
 *   dup_med,dup_min,dup_max (us)
 * Every result is checked; a wrong one exits 1.
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cf_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static long cf_arg(const char *s, long lo, long hi)
{
    char *end;
    long v = strtol(s, &end, 10);

    if ((*s == '\0') || (*end != '\0') || (v < lo) || (v > hi)) {
        fprintf(stderr, "coll_first: '%s' is not a number in %ld..%ld\n", s,
                lo, hi);
        exit(2);
    }
    return v;
}

/* one MPI_Iallreduce of a value that changes per call; 0 if right */
static int cf_call(MPI_Comm comm, int rank, int size, long call)
{
    int64_t in = (int64_t)rank * 1000003 + call, out = -1, want;
    MPI_Request req;

    want = (int64_t)size * call + 1000003LL * size * (size - 1) / 2;
    MPI_Iallreduce(&in, &out, 1, MPI_INT64_T, MPI_SUM, comm, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    return out != want;
}

int main(int argc, char **argv)
{
    long dups = 20, calls = 200, d, c, bad = 0;
    double *first, *steady, *dupt, t, mine;
    int rank, size;
    MPI_Comm comm;

    MPI_Init(&argc, &argv);
    if ((argc > 1) && !strcmp(argv[1], "--help")) {
        printf("usage: coll_first [DUPS [CALLS]]  (default 20 200)\n");
        MPI_Finalize();
        return 0;
    }
    if (argc > 1) {
        dups = cf_arg(argv[1], 1, 100000);
    }
    if (argc > 2) {
        calls = cf_arg(argv[2], 1, 100000000);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    first  = calloc((size_t)dups, sizeof(*first));
    steady = calloc((size_t)dups, sizeof(*steady));
    dupt   = calloc((size_t)dups, sizeof(*dupt));
    if ((first == NULL) || (steady == NULL) || (dupt == NULL)) {
        fprintf(stderr, "coll_first: no memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (d = 0; d < dups; ++d) {
        /* the previous communicator's teardown skews the ranks */
        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        mine = (MPI_Wtime() - t) * 1e6;
        MPI_Reduce(&mine, &dupt[d], 1, MPI_DOUBLE, MPI_MAX, 0,
                   MPI_COMM_WORLD);
        t     = MPI_Wtime();
        bad  += cf_call(comm, rank, size, 0);
        mine  = (MPI_Wtime() - t) * 1e6;
        MPI_Reduce(&mine, &first[d], 1, MPI_DOUBLE, MPI_MAX, 0,
                   MPI_COMM_WORLD);
        t = MPI_Wtime();
        for (c = 1; c <= calls; ++c) {
            bad += cf_call(comm, rank, size, c);
        }
        mine = (MPI_Wtime() - t) * 1e6 / (double)calls;
        MPI_Reduce(&mine, &steady[d], 1, MPI_DOUBLE, MPI_MAX, 0,
                   MPI_COMM_WORLD);
        MPI_Comm_free(&comm);
    }
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        qsort(first, (size_t)dups, sizeof(*first), cf_cmp);
        qsort(steady, (size_t)dups, sizeof(*steady), cf_cmp);
        qsort(dupt, (size_t)dups, sizeof(*dupt), cf_cmp);
        if (bad != 0) {
            fprintf(stderr, "coll_first: %ld wrong results\n", bad);
        }
        printf("%.2f,%.2f,%.2f,%.3f,%.3f,%.3f,%.2f,%.2f,%.2f\n",
               first[dups / 2], first[0], first[dups - 1], steady[dups / 2],
               steady[0], steady[dups - 1], dupt[dups / 2], dupt[0],
               dupt[dups - 1]);
    }
    free(first);
    free(steady);
    free(dupt);
    MPI_Finalize();
    return bad != 0;
}
