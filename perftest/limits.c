/*
 * limits.c - machine limits for perftest/run-bench.sh.
 *
 * Prints CSV lines on stdout (no header):
 *
 *   memcpy,<size>,<MB/s>,<GB/s>          one line per --sizes entry
 *   cacheline_rt,64,<ns per round trip>     median of single round trips
 *   cacheline_oneway,64,<ns one way>        (that / 2)
 *   cacheline_rt_avg,64,<ns per round trip> median of chunk averages
 *   swline_rt,64,<ns per round trip>        the same with software coherence
 *   swline_oneway,64,<ns one way>
 *   swcopy_in,<size>,<MB/s>,<GB/s>          sw-mode copy into shared memory
 *   swcopy_out,<size>,<MB/s>,<GB/s>         sw-mode copy out of it
 *   swinval,<size>,<MB/s>,<GB/s>            sw-mode invalidate of clean lines
 *   xread,<size>,<ns>,<GB/s>                cross-core read, per --xread entry
 *   xwrite,<size>,<ns>,<GB/s>               cross-core overwrite, the same
 *
 * memcpy: one thread pinned to --cpu-a copies a SIZE buffer into another
 * SIZE buffer repeatedly for about --ms milliseconds (after one untimed
 * copy, so the pages exist).  Small sizes therefore run in cache, 64 MiB
 * does not.  MB/s is 2^20 bytes per second (the unit ucx_perftest prints),
 * GB/s is 10^9 bytes per second.  The value reported is the median of
 * --trials timed trials (short trials, so that on a busy machine the
 * median is still a trial that ran undisturbed).
 *
 * cache-line round trip: two threads pinned to --cpu-a and --cpu-b
 * ping-pong a counter in one 64-byte cache line (A stores an odd value,
 * B waits for it and stores the next even value, A waits for that).  Every
 * round trip is timed with the TSC (calibrated against CLOCK_MONOTONIC over
 * the run); the median single round trip is reported, like ucx_perftest's
 * "typical" latency, so a preempted round trip does not move it.  The
 * median over --chunks chunks of the chunk's average round trip is printed
 * as well.
 *
 * Software coherence (the transport's own primitives from
 * src/coherence/cxl_coherence.c, built in): the cache-line ping-pong again,
 * but as UCX_CXL_COHERENCE=sw must do it across hosts: the writer stores
 * the line, writes it back and fences; the reader invalidates the line
 * before every load, so each poll reads memory.  That round trip is the
 * floor of any sw-mode message latency on this machine.  swcopy_in is
 * cxl_coh_copy() of SIZE bytes from a cached buffer plus the fence (what a
 * sender pays to publish SIZE bytes); swcopy_out is cxl_coh_invalidate() of
 * the SIZE bytes plus memcpy() out of them (what a receiver pays).  A
 * pipelined sw transfer can not run faster than the slower of the two.
 * swinval is cxl_coh_invalidate() alone of SIZE bytes of lines held clean:
 * what the owner of memory pays per byte another host puts into it.
 *
 * xread (--xread LIST): a thread on --cpu-b writes SIZE bytes into a
 * shared buffer and raises a flag; the thread on --cpu-a, spinning on the
 * flag, times memcpy() of the SIZE bytes into its own buffer (xread),
 * then acknowledges; the writer times its memcpy() of the next round's
 * values from its own cached buffer into the shared one, whose lines the
 * reader holds (xwrite).  Medians.  xread is the least a rank can spend
 * receiving SIZE bytes another core just produced, xwrite the least it
 * spends handing SIZE bytes of its own to a core that read the last ones,
 * with any protocol: the floors of the collectives in
 * perftest/coll_report.py.
 *
 * (The two-core collectives themselves, timed as coll_bench times MPI's,
 * are perftest/ref_coll.c.)
 *
 * This program measures and prints; it never judges the numbers.
 *
 * Usage: limits [--sizes 8192,65536,...] [--ms N] [--trials N]
 *               [--chunk N] [--chunks N] [--cpu-a N] [--cpu-b N]
 *               [--xread LIST]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include <time.h>

#include <ucx_cxl/coherence.h>

#define MAX_TRIALS 1001
#define LINE       64

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int pin_to(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return (n % 2) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Keep the compiler from dropping the copies. */
static volatile uint8_t sink;

static double memcpy_mbs(uint8_t *dst, uint8_t *src, size_t size, double ms)
{
    double t0, t;
    size_t reps = 0;

    t0 = now_sec();
    do {
        /* check the clock every few copies only */
        for (int k = 0; k < 4; ++k) {
            memcpy(dst, src, size);
            src[reps % size] ^= 1;
            ++reps;
        }
        t = now_sec() - t0;
    } while (t * 1e3 < ms);
    sink = dst[reps % size];
    return (double)size * reps / t / (1024.0 * 1024.0);
}

/* ---- cache-line ping-pong ---- */

struct pingpong {
    _Alignas(LINE) volatile uint64_t flag;
    char pad[LINE - sizeof(uint64_t)];
};

static struct pingpong pp;
static long pp_iters;   /* round trips per chunk */
static int  pp_trials;  /* timed chunks */
static int  pp_cpu_b;
static int  pp_pin_err;
static cxl_coh_mode_t pp_mode; /* CXL_COH_SW: write back / invalidate */

static inline uint64_t pp_load(void)
{
    cxl_coh_invalidate(pp_mode, (const void*)&pp.flag, sizeof(pp.flag));
    return __atomic_load_n(&pp.flag, __ATOMIC_ACQUIRE);
}

static inline void pp_store(uint64_t v)
{
    __atomic_store_n(&pp.flag, v, __ATOMIC_RELEASE);
    cxl_coh_writeback(pp_mode, (const void*)&pp.flag, sizeof(pp.flag));
    cxl_coh_fence(pp_mode);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *pong_thread(void *arg)
{
    uint64_t v = 1;
    long total = pp_iters * (pp_trials + 1);

    (void)arg;
    if (pin_to(pp_cpu_b) != 0) {
        pp_pin_err = 1;
    }
    for (long i = 0; i < total; ++i, v += 2) {
        while (pp_load() != v) {
            cpu_relax();
        }
        pp_store(v + 1);
    }
    return NULL;
}

static inline uint64_t ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000ull + ts.tv_nsec;
#endif
}

/* `iters` round trips; each one's duration in ticks goes to rt[] if set */
static void ping_chunk(uint64_t *v, long iters, uint64_t *rt)
{
    uint64_t t_prev = ticks(), t;

    for (long i = 0; i < iters; ++i, *v += 2) {
        pp_store(*v);
        while (pp_load() != *v + 1) {
            cpu_relax();
        }
        t = ticks();
        if (rt != NULL) {
            rt[i] = t - t_prev;
        }
        t_prev = t;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
    return (x > y) - (x < y);
}

/*
 * Ping-pong of one cache line between two threads: one untimed warm-up
 * chunk, then `chunks` timed chunks; prints NAME_rt, NAME_oneway and (hw
 * mode) NAME_rt_avg.
 */
static int run_pingpong(cxl_coh_mode_t mode, const char *name, long iters,
                        int chunks, int cpu_b)
{
    static double vals[MAX_TRIALS];
    pthread_t th;

    pp.flag   = 0;
    pp_mode   = mode;
    pp_iters  = iters;
    pp_trials = chunks;
    pp_cpu_b  = cpu_b;
    if (pthread_create(&th, NULL, pong_thread, NULL) != 0) {
        fprintf(stderr, "limits: pthread_create: %s\n", strerror(errno));
        return 1;
    }
    {
        uint64_t *rt = malloc(sizeof(*rt) * iters * chunks);
        uint64_t v = 1, tk0, tk1;
        double t0, t1, ns_per_tick, rt_p50, rt_avg;

        if (rt == NULL) {
            fprintf(stderr, "limits: out of memory\n");
            return 1;
        }
        ping_chunk(&v, iters, NULL);
        t0  = now_sec();
        tk0 = ticks();
        for (int t = 0; t < chunks; ++t) {
            double c0 = now_sec();
            ping_chunk(&v, iters, rt + (size_t)t * iters);
            vals[t] = (now_sec() - c0) * 1e9 / iters;
        }
        tk1 = ticks();
        t1  = now_sec();
        pthread_join(th, NULL);
        if (pp_pin_err) {
            fprintf(stderr, "limits: cannot pin the second thread to cpu %d\n",
                    cpu_b);
            free(rt);
            return 1;
        }
        ns_per_tick = (t1 - t0) * 1e9 / (double)(tk1 - tk0);
        qsort(rt, (size_t)iters * chunks, sizeof(*rt), cmp_u64);
        rt_p50 = rt[(size_t)iters * chunks / 2] * ns_per_tick;
        rt_avg = median(vals, chunks);
        free(rt);
        /* p50 of single round trips: what ucx_perftest calls "typical" */
        printf("%s_rt,64,%.2f\n", name, rt_p50);
        printf("%s_oneway,64,%.2f\n", name, rt_p50 / 2);
        if (mode == CXL_COH_HW) {
            /* median over chunks of the chunk's average round trip */
            printf("%s_rt_avg,64,%.2f\n", name, rt_avg);
        }
        fflush(stdout);
    }
    return 0;
}

/* The three software-coherence transfers swcopy measures. */
typedef enum { SW_COPY_IN, SW_COPY_OUT, SW_INVAL } sw_kind_t;

/*
 * One sw transfer of size bytes; returns the seconds that count.
 * SW_COPY_IN: cxl_coh_copy() in sw mode + fence, from a cached source.
 * SW_COPY_OUT: cxl_coh_invalidate() + memcpy() to a cached destination, of
 * a buffer that was written back first (untimed), so the reads miss as a
 * receiver's do.  SW_INVAL: cxl_coh_invalidate() alone of lines this core
 * holds clean (it read them, untimed): what the owner of pool memory pays
 * per byte a peer of another host puts into it, before the put completes.
 */
static double sw_step(sw_kind_t kind, uint8_t *src, uint8_t *shm, uint8_t *dst,
                      size_t size, long n)
{
    double t0;

    switch (kind) {
    case SW_COPY_IN:
        src[n & 63]++;
        t0 = now_sec();
        cxl_coh_copy(CXL_COH_SW, shm, src, size);
        cxl_coh_fence(CXL_COH_SW);
        return now_sec() - t0;
    case SW_COPY_OUT:
        cxl_coh_writeback(CXL_COH_SW, shm, size);
        cxl_coh_fence(CXL_COH_SW);
        t0 = now_sec();
        cxl_coh_invalidate(CXL_COH_SW, shm, size);
        memcpy(dst, shm, size);
        t0 = now_sec() - t0;
        sink += dst[n & 63];
        return t0;
    case SW_INVAL:
    default:
        memcpy(dst, shm, size);
        t0 = now_sec();
        cxl_coh_invalidate(CXL_COH_SW, shm, size);
        return now_sec() - t0;
    }
}

/* Median MB/s of `trials` trials of about `ms` counted milliseconds each. */
static double sw_rate(sw_kind_t kind, uint8_t *src, uint8_t *shm, uint8_t *dst,
                      size_t size, double ms, int trials, double *vals)
{
    for (int t = 0; t < trials; ++t) {
        double el = 0;
        long n = 0;

        do {
            el += sw_step(kind, src, shm, dst, size, n++);
        } while (el * 1e3 < ms);
        vals[t] = (double)size * n / el / (1024.0 * 1024.0);
    }
    return median(vals, trials);
}

/* swcopy_in, swcopy_out and swinval of one size (see sw_step). */
static int run_swcopy(size_t size, double ms, int trials, double *vals)
{
    static const char *const names[] = {"swcopy_in", "swcopy_out", "swinval"};
    uint8_t *src, *shm, *dst;

    if (posix_memalign((void**)&src, 2u << 20, size) ||
        posix_memalign((void**)&shm, 2u << 20, size) ||
        posix_memalign((void**)&dst, 2u << 20, size)) {
        fprintf(stderr, "limits: out of memory for %zu bytes\n", size);
        return 1;
    }
    memset(src, 0x5a, size);
    memset(shm, 0xa5, size);
    memset(dst, 0x3c, size);
    for (int k = SW_COPY_IN; k <= SW_INVAL; ++k) {
        double mbs = sw_rate((sw_kind_t)k, src, shm, dst, size, ms, trials, vals);

        printf("%s,%zu,%.1f,%.3f\n", names[k], size, mbs,
               mbs * 1024.0 * 1024.0 / 1e9);
    }
    fflush(stdout);
    free(src);
    free(shm);
    free(dst);
    return 0;
}

/* ---- cross-core read (--xread) ---- */
struct xr_shared {
    _Alignas(LINE) volatile uint64_t flag;  /* written by the writer */
    _Alignas(LINE) volatile uint64_t ack;   /* written by the reader */
};

static struct xr_shared xr;
static uint8_t *xr_buf;   /* shared */
static uint8_t *xr_src;   /* the writer's own data */
static uint64_t *xr_dtw;  /* the writer's copy times */
static size_t   xr_size;
static long     xr_rounds;
static int      xr_cpu;
static int      xr_pin_err;

/* the TSC once every earlier instruction executed (its loads are done) */
static inline uint64_t xr_ticks(void)
{
#if defined(__x86_64__)
    unsigned aux;

    return __builtin_ia32_rdtscp(&aux);
#else
    return ticks();
#endif
}

static void *xr_writer(void *arg)
{
    uint64_t a;

    (void)arg;
    if (pin_to(xr_cpu) != 0) {
        xr_pin_err = 1;
    }
    for (long i = 1; i <= xr_rounds; ++i) {
        while (__atomic_load_n(&xr.ack, __ATOMIC_ACQUIRE) != (uint64_t)i - 1) {
            cpu_relax();
        }
        memset(xr_src, (int)(i & 0xff), xr_size); /* new values, cached */
        a = xr_ticks();
        memcpy(xr_buf, xr_src, xr_size);
        xr_dtw[i - 1] = xr_ticks() - a;
        __atomic_store_n(&xr.flag, (uint64_t)i, __ATOMIC_RELEASE);
    }
    return NULL;
}

static int run_xread(size_t size, int cpu_b)
{
    uint8_t *dst;
    uint64_t *dt, tk0, tk1;
    double t0, t1, ns_per_tick, ns;
    pthread_t th;
    long i;

    /* about 0.1 s of copying at 10 GB/s, between 200 and 20000 rounds */
    xr_rounds = (long)(1e9 / (double)(size + 4096));
    xr_rounds = (xr_rounds < 200) ? 200 : (xr_rounds > 20000) ? 20000 :
                xr_rounds;
    xr_size = size;
    xr_cpu  = cpu_b;
    xr.flag = 0;
    xr.ack  = 0;
    if (posix_memalign((void**)&xr_buf, 2u << 20, size) ||
        posix_memalign((void**)&xr_src, 2u << 20, size) ||
        posix_memalign((void**)&dst, 2u << 20, size) ||
        ((dt = malloc(sizeof(*dt) * xr_rounds)) == NULL) ||
        ((xr_dtw = malloc(sizeof(*xr_dtw) * xr_rounds)) == NULL)) {
        fprintf(stderr, "limits: out of memory for %zu bytes\n", size);
        return 1;
    }
    memset(dst, 0, size);
    if (pthread_create(&th, NULL, xr_writer, NULL) != 0) {
        fprintf(stderr, "limits: pthread_create: %s\n", strerror(errno));
        return 1;
    }
    t0  = now_sec();
    tk0 = ticks();
    for (i = 1; i <= xr_rounds; ++i) {
        uint64_t a;

        while (__atomic_load_n(&xr.flag, __ATOMIC_ACQUIRE) != (uint64_t)i) {
            cpu_relax();
        }
        a = xr_ticks();
        memcpy(dst, xr_buf, size);
        dt[i - 1] = xr_ticks() - a;
        sink ^= dst[size - 1];
        __atomic_store_n(&xr.ack, (uint64_t)i, __ATOMIC_RELEASE);
    }
    tk1 = ticks();
    t1  = now_sec();
    pthread_join(th, NULL);
    if (xr_pin_err) {
        fprintf(stderr, "limits: cannot pin the writer to cpu %d\n", cpu_b);
        return 1;
    }
    ns_per_tick = (t1 - t0) * 1e9 / (double)(tk1 - tk0);
    qsort(dt, (size_t)xr_rounds, sizeof(*dt), cmp_u64);
    ns = dt[xr_rounds / 2] * ns_per_tick;
    printf("xread,%zu,%.1f,%.3f\n", size, ns, (double)size / ns);
    qsort(xr_dtw, (size_t)xr_rounds, sizeof(*xr_dtw), cmp_u64);
    ns = xr_dtw[xr_rounds / 2] * ns_per_tick;
    printf("xwrite,%zu,%.1f,%.3f\n", size, ns, (double)size / ns);
    fflush(stdout);
    free(xr_dtw);
    free(dt);
    free(dst);
    free(xr_src);
    free(xr_buf);
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: limits [--sizes LIST] [--ms N] [--trials N] [--chunk N]\n"
            "              [--chunks N] [--cpu-a N] [--cpu-b N] [--xread LIST]\n"
            "  --sizes   memcpy sizes, comma-separated, K/M/G suffixes\n"
            "            (default 8K,64K,1M,4M,64M)\n"
            "  --ms      milliseconds per memcpy trial (default 10; at least\n"
            "            one copy per trial)\n"
            "  --trials  memcpy trials per size; median printed (default 15)\n"
            "  --chunk   round trips per ping-pong chunk (default 2000)\n"
            "  --chunks  timed ping-pong chunks; median printed (default 101)\n"
            "  --cpu-a, --cpu-b  the two cores (default 0 and 1)\n"
            "  --xread   also the cross-core read and overwrite of these\n"
            "            sizes (the reader on --cpu-a, the writer on --cpu-b)\n");
}

int main(int argc, char **argv)
{
    size_t sizes[MAX_SIZES], xsizes[MAX_SIZES];
    int nsizes = parse_sizes("8K,64K,1M,4M,64M", sizes), nx = 0;
    static double vals[MAX_TRIALS];
    double ms = 10;
    long iters = 2000;
    int trials = 15, chunks = 101, cpu_a = 0, cpu_b = 1;

    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = (i + 1 < argc) ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return 0;
        }
        if (v == NULL) {
            usage();
            return 2;
        }
        if (!strcmp(a, "--sizes")) {
            nsizes = parse_sizes(v, sizes);
        } else if (!strcmp(a, "--ms")) {
            ms = atof(v);
        } else if (!strcmp(a, "--chunk")) {
            iters = atol(v);
        } else if (!strcmp(a, "--chunks")) {
            chunks = atoi(v);
        } else if (!strcmp(a, "--trials")) {
            trials = atoi(v);
        } else if (!strcmp(a, "--cpu-a")) {
            cpu_a = atoi(v);
        } else if (!strcmp(a, "--cpu-b")) {
            cpu_b = atoi(v);
        } else if (!strcmp(a, "--xread")) {
            nx = parse_sizes(v, xsizes);
            if (nx <= 0) {
                usage();
                return 2;
            }
        } else {
            usage();
            return 2;
        }
        ++i;
    }
    if (nsizes <= 0 || ms <= 0 || iters <= 0 || trials <= 0 ||
        trials > MAX_TRIALS || chunks <= 0 || chunks > MAX_TRIALS) {
        usage();
        return 2;
    }

    if (pin_to(cpu_a) != 0) {
        fprintf(stderr, "limits: cannot pin to cpu %d\n", cpu_a);
        return 1;
    }

    for (int s = 0; s < nsizes; ++s) {
        uint8_t *src, *dst;
        double mbs;

        if (posix_memalign((void**)&src, 2u << 20, sizes[s]) ||
            posix_memalign((void**)&dst, 2u << 20, sizes[s])) {
            fprintf(stderr, "limits: out of memory for %zu bytes\n", sizes[s]);
            return 1;
        }
        memset(src, 0x5a, sizes[s]);
        memset(dst, 0xa5, sizes[s]);
        memcpy(dst, src, sizes[s]); /* untimed warm-up */
        for (int t = 0; t < trials; ++t) {
            vals[t] = memcpy_mbs(dst, src, sizes[s], ms);
        }
        free(src);
        free(dst);
        mbs = median(vals, trials);
        printf("memcpy,%zu,%.1f,%.3f\n", sizes[s], mbs,
               mbs * 1024.0 * 1024.0 / 1e9);
        fflush(stdout);
    }

    if (run_pingpong(CXL_COH_HW, "cacheline", iters, chunks, cpu_b) != 0) {
        return 1;
    }
    for (int s = 0; s < nx; ++s) {
        if (run_xread(xsizes[s], cpu_b) != 0) {
            return 1;
        }
    }

    /* software coherence: the same ping-pong, then the bulk copies */
    for (int s = 0; s < nsizes; ++s) {
        if (sizes[s] < (64u << 10)) {
            continue; /* small copies: the ping-pong says it all */
        }
        if (run_swcopy(sizes[s], ms, trials, vals) != 0) {
            return 1;
        }
    }
    if (run_pingpong(CXL_COH_SW, "swline", iters / 4 + 1, chunks, cpu_b) != 0) {
        return 1;
    }
    return 0;
}
