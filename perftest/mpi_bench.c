/*
 * mpi_bench.c - small OSU-style MPI benchmark for perftest/run-bench.sh.
 *
 * Two ranks.  Rank 0 prints one CSV line per measurement on stdout:
 *
 *   <test>,<size in bytes>,<value>,<unit>,<better>
 *
 *   lat      ping-pong MPI_Send/MPI_Recv; one-way latency (round trip / 2), us
 *   bw       rank 0 posts a window of MPI_Isend, rank 1 the matching
 *            MPI_Irecv, then a zero-byte ack; MB/s (2^20 bytes/s, the unit
 *            ucx_perftest prints)
 *   bibw     both ranks send a window and receive a window at once;
 *            MB/s counted in both directions
 *   put_lat  MPI_Put + MPI_Win_flush to rank 1, passive target
 *            (MPI_Win_lock_all), window from MPI_Win_allocate; us per op
 *   get_lat  MPI_Get + MPI_Win_flush, same window; us per op
 *   acc_lat  MPI_Accumulate (MPI_SUM, MPI_LONG) + MPI_Win_flush; us per op
 *
 * Each figure is measured after a warm-up; rank 1 is in MPI_Barrier
 * (progressing) while rank 0 runs the one-sided loops.
 *
 * Usage: mpirun -np 2 ... mpi_bench [--quick] [--sizes LIST] [--osizes LIST]
 *   --quick   fewer iterations and sizes
 *   --sizes   message sizes for lat/bw/bibw (default 8,1K,64K,1M,4M)
 *   --osizes  sizes for put_lat/get_lat (default 8,64K); acc_lat is 8 B
 *
 * It measures and prints; it never judges the numbers.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

#define WINDOW    64
#define MBYTE     (1024.0 * 1024.0)

static int rank;
static int quick;

/* iterations: about `bytes_budget` bytes per figure, within [lo, hi] */
static long iters_for(size_t size, double bytes_budget, long lo, long hi)
{
    long n = (long)(bytes_budget / (double)size);
    if (n < lo) n = lo;
    if (n > hi) n = hi;
    return n;
}

static void report(const char *test, size_t size, double value,
                   const char *unit, const char *better)
{
    if (rank == 0) {
        printf("%s,%zu,%.4f,%s,%s\n", test, size, value, unit, better);
        fflush(stdout);
    }
}

static void bench_lat(char *sbuf, char *rbuf, size_t size)
{
    long iters = iters_for(size, quick ? 64.0 * MBYTE : 128.0 * MBYTE,
                           quick ? 50 : 50, quick ? 20000 : 30000);
    long warm  = iters / 10 + 1;
    double t0 = 0;
    int peer = 1 - rank;

    MPI_Barrier(MPI_COMM_WORLD);
    for (long i = 0; i < iters + warm; ++i) {
        if (i == warm) {
            t0 = MPI_Wtime();
        }
        if (rank == 0) {
            MPI_Send(sbuf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
            MPI_Recv(rbuf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(rbuf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            MPI_Send(sbuf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
        }
    }
    report("lat", size, (MPI_Wtime() - t0) * 1e6 / (2.0 * iters), "us",
           "lower");
}

static void bench_bw(char *sbuf, char *rbuf, size_t size, int bidir)
{
    long iters = iters_for(size * WINDOW, quick ? 128.0 * MBYTE : 256.0 * MBYTE,
                           quick ? 5 : 5, quick ? 500 : 1000);
    long warm  = iters / 10 + 1;
    MPI_Request req[2 * WINDOW];
    double t0 = 0, t;
    int peer = 1 - rank;
    char ack;

    MPI_Barrier(MPI_COMM_WORLD);
    for (long i = 0; i < iters + warm; ++i) {
        int n = 0;
        if (i == warm) {
            t0 = MPI_Wtime();
        }
        if (bidir || rank == 1) {
            for (int w = 0; w < WINDOW; ++w) {
                MPI_Irecv(rbuf + (size_t)w * size, (int)size, MPI_CHAR, peer,
                          2, MPI_COMM_WORLD, &req[n++]);
            }
        }
        if (bidir || rank == 0) {
            for (int w = 0; w < WINDOW; ++w) {
                MPI_Isend(sbuf, (int)size, MPI_CHAR, peer, 2, MPI_COMM_WORLD,
                          &req[n++]);
            }
        }
        MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
        if (!bidir) {
            if (rank == 1) {
                MPI_Send(&ack, 0, MPI_CHAR, peer, 3, MPI_COMM_WORLD);
            } else {
                MPI_Recv(&ack, 0, MPI_CHAR, peer, 3, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
            }
        }
    }
    t = MPI_Wtime() - t0;
    report(bidir ? "bibw" : "bw", size,
           (double)size * WINDOW * iters * (bidir ? 2 : 1) / t / MBYTE, "MB/s",
           "higher");
}

enum { OP_PUT, OP_GET, OP_ACC };

static void bench_rma(MPI_Win win, char *buf, size_t size, int op)
{
    static const char *names[] = {"put_lat", "get_lat", "acc_lat"};
    long iters = iters_for(size, quick ? 32.0 * MBYTE : 64.0 * MBYTE,
                           quick ? 50 : 100, quick ? 10000 : 20000);
    long warm  = iters / 10 + 1;
    double t0 = 0, t = 0;

    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        for (long i = 0; i < iters + warm; ++i) {
            if (i == warm) {
                t0 = MPI_Wtime();
            }
            switch (op) {
            case OP_PUT:
                MPI_Put(buf, (int)size, MPI_CHAR, 1, 0, (int)size, MPI_CHAR,
                        win);
                break;
            case OP_GET:
                MPI_Get(buf, (int)size, MPI_CHAR, 1, 0, (int)size, MPI_CHAR,
                        win);
                break;
            default:
                MPI_Accumulate(buf, 1, MPI_LONG, 1, 0, 1, MPI_LONG, MPI_SUM,
                               win);
                break;
            }
            MPI_Win_flush(1, win);
        }
        t = MPI_Wtime() - t0;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    report(names[op], size, t * 1e6 / iters, "us", "lower");
}

int main(int argc, char **argv)
{
    size_t sizes[MAX_SIZES], osizes[MAX_SIZES], max_size = 8, max_osize = 8;
    int nsizes = -1, nosizes = -1, nprocs;
    char *sbuf, *rbuf, *obuf, *wbase;
    MPI_Win win;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);

    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--quick")) {
            quick = 1;
        } else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            nsizes = parse_sizes(argv[++i], sizes);
        } else if (!strcmp(argv[i], "--osizes") && i + 1 < argc) {
            nosizes = parse_sizes(argv[++i], osizes);
        } else {
            if (rank == 0) {
                fprintf(stderr, "usage: mpi_bench [--quick] [--sizes LIST] "
                                "[--osizes LIST]\n");
            }
            MPI_Finalize();
            return 2;
        }
    }
    if (nsizes < 0) {
        nsizes = quick ? parse_sizes("8,64K,1M", sizes) :
                         parse_sizes("8,1K,64K,1M,4M", sizes);
    }
    if (nosizes < 0) {
        nosizes = parse_sizes("8,64K", osizes);
    }
    if (nprocs != 2 || nsizes <= 0 || nosizes <= 0) {
        if (rank == 0) {
            fprintf(stderr, "mpi_bench: needs exactly 2 ranks and valid size "
                            "lists\n");
        }
        MPI_Finalize();
        return 2;
    }
    for (int i = 0; i < nsizes; ++i) {
        max_size = (sizes[i] > max_size) ? sizes[i] : max_size;
    }
    for (int i = 0; i < nosizes; ++i) {
        max_osize = (osizes[i] > max_osize) ? osizes[i] : max_osize;
    }

    sbuf = malloc(max_size);
    rbuf = malloc(max_size * WINDOW);
    obuf = malloc(max_osize);
    if (!sbuf || !rbuf || !obuf) {
        fprintf(stderr, "mpi_bench: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(sbuf, 'a', max_size);
    memset(rbuf, 'b', max_size * WINDOW);
    memset(obuf, 0, max_osize);

    for (int i = 0; i < nsizes; ++i) {
        bench_lat(sbuf, rbuf, sizes[i]);
    }
    for (int i = 0; i < nsizes; ++i) {
        bench_bw(sbuf, rbuf, sizes[i], 0);
    }
    for (int i = 0; i < nsizes; ++i) {
        bench_bw(sbuf, rbuf, sizes[i], 1);
    }

    MPI_Win_allocate((MPI_Aint)max_osize, 1, MPI_INFO_NULL, MPI_COMM_WORLD,
                     &wbase, &win);
    memset(wbase, 0, max_osize);
    MPI_Win_lock_all(0, win);
    for (int i = 0; i < nosizes; ++i) {
        bench_rma(win, obuf, osizes[i], OP_PUT);
    }
    for (int i = 0; i < nosizes; ++i) {
        bench_rma(win, obuf, osizes[i], OP_GET);
    }
    bench_rma(win, obuf, sizeof(long), OP_ACC);
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);

    free(obuf);
    free(rbuf);
    free(sbuf);
    MPI_Finalize();
    return 0;
}
