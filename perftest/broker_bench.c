/*
 * broker_bench.c - reader processes for perftest/run-broker-bench.sh: random
 * samples of a dataset of fixed-size records, read through the dataset
 * broker (libcxl_broker) or as users do today (pread / mmap of the same
 * file in the page cache), and the memcpy limit in the same harness.
 *
 *   broker_bench --mode M [OPTIONS]
 *   broker_bench --gen FILE NRECORDS SIZE SEED   write a raw file of records
 *
 * Modes (every mode forks --readers processes; each has its own buffer of
 * --batch samples):
 *   broker  connect to the broker, open --dataset, and read samples with
 *           cxl_broker_read_batch() (--batch samples per call: gets in
 *           flight together) into the buffer; --copy get|map sets
 *           CXL_BROKER_COPY (how read_batch copies: ucp_get, or a memcpy
 *           out of this process's mapping of the pool, the default where
 *           it maps the pool)
 *   view    the same samples through cxl_broker_view() (the zero-copy view
 *           of a resident sample, for readers that map the pool; needs
 *           it: --local 1 is implied) and a memcpy out of it into the
 *           buffer, view released after the copy
 *   pread   open --file once, pread() sample i from offset i * --record
 *   mmap    mmap --file once (MAP_POPULATE), memcpy sample i out of it
 *   memcpy  memcpy --record blocks at random block offsets out of one
 *           shared buffer of --memcpy-src bytes (default 1 GiB, larger
 *           than the LLC) filled before the fork: the copy limit
 *   crc     CRC32C (cxlpool_crc32c(), what the broker's fill computes over
 *           every chunk) of --record blocks of that buffer, in place: the
 *           fill's CPU ceiling per thread
 *   crc-hw  the same CRC32C with this program's own loop of the SSE4.2
 *           crc32 instruction (x86-64), checked against cxlpool_crc32c()
 *           once: the instruction's speed, whatever the library uses
 *
 * Sample indices: uniform over the dataset, from a xorshift64* generator
 * seeded with --seed and the reader's number, the same sequence in every
 * mode.  --epoch instead reads one seeded permutation of all samples, each
 * exactly once, split into --readers contiguous slices (the cold epoch);
 * --order seq makes that permutation the identity (a sequential read of
 * the file in --record blocks: the raw read bandwidth, timed like an epoch).
 *
 * Timing: every reader sets up (connects, opens, maps), reads untimed for
 * --warmup seconds, and waits; the parent then starts all of them at once
 * and stops them after --seconds (or, --count N / --epoch, waits until all
 * are done).  While they run (at --pss-at of the window; at the end with
 * --count/--epoch) the parent reads /proc/PID/smaps_rollup of every reader
 * (and of --pss-pid, e.g. the broker), mincore() of --file (its bytes in
 * the page cache) and the allocated bytes of --pool-file.
 *
 * --check compares every sample read with its bytes in --file (pread at
 * i * --record, not through the broker's metadata) and counts the ones
 * that differ in `errors` (--inject-error flips a bit of the first sample
 * of every batch after the read: the check must see it); the digest (sum over samples of CRC32C(sample)
 * times 2i + 1, mod 2^64) does not depend on the order, so an --epoch
 * digest is the same in every mode when every mode read the same bytes.
 *
 * Output: CSV lines on stdout (--header prints the header first), one per
 * reader (row=reader) and one for all (row=total; samples_per_s and
 * gb_per_s over the parent's window, min/max_reader_sps the spread, the
 * PSS columns summed over the readers):
 *   row,mode,record,readers,reader,batch,phase,seconds,samples,bytes,
 *   samples_per_s,gb_per_s,min_reader_sps,max_reader_sps,pss_kib,
 *   pss_anon_kib,pss_file_kib,pss_shmem_kib,rss_kib,other_pss_kib,
 *   file_cache_kib,pool_kib,local,errors,digest,faults
 * faults: the page faults (minor + major, getrusage) the readers took in
 * the timed window: a mode whose window is mostly faults measures the
 * kernel, not the copy (see bb_prefault()).
 * GB/s is 10^9 bytes per second.  This program measures; it judges nothing.
 * Exit 0 when every reader finished without a failed read (and, with
 * --check, no difference), 1 otherwise, 2 for bad usage.
 *
 * Options: --mode M --readers N --batch K --record BYTES --file PATH
 *   --dataset NAME --broker HOST:PORT --local -1|0|1 --copy get|map
 *   --seconds S
 *   --warmup S --count N --epoch --order seq|random --seed N --check
 *   --pss-at F --pss-pid PID
 *   --pool-file PATH --memcpy-src BYTES --inject-error --header --help
 */
#define _GNU_SOURCE
#include <ucx_cxl/broker.h>
#include <ucx_cxl/cxlpool.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BB_MAX_READERS 64
#define BB_MAX_BATCH   1024
#define BB_ERR_LEN     256

typedef enum { BB_BROKER, BB_PREAD, BB_MMAP, BB_MEMCPY, BB_CRC, BB_CRC_HW,
               BB_VIEW, BB_NMODES } bb_mode_t;
static const char *const bb_mode_names[] = {"broker", "pread", "mmap", "memcpy",
                                            "crc", "crc-hw", "view"};
/* the modes that connect to the broker */
#define BB_BRK_MODE(m) (((m) == BB_BROKER) || ((m) == BB_VIEW))
/* the modes that read the shared in-memory buffer, not the dataset */
#define BB_MEM_MODE(m) (((m) == BB_MEMCPY) || ((m) == BB_CRC) || ((m) == BB_CRC_HW))

typedef struct {
    bb_mode_t   mode;
    unsigned    readers;
    unsigned    batch;
    uint64_t    record;
    const char *file;
    const char *dataset;
    const char *broker;
    int         local;
    double      seconds;
    double      warmup;
    uint64_t    count;
    int         epoch;
    int         seq;            /* --order seq */
    uint64_t    seed;
    int         check;
    int         inject;
    double      pss_at;
    int         pss_pid;
    const char *pool_file;
    uint64_t    memcpy_src;
} bb_cfg_t;

typedef struct {
    uint64_t samples, bytes, errors, digest;
    uint64_t faults;            /* page faults in the timed window */
    double   seconds;
    int      failed;
    int      local;
    char     err[BB_ERR_LEN];
} bb_result_t;

typedef struct {
    uint64_t pss, pss_anon, pss_file, pss_shmem, rss;   /* KiB */
} bb_mem_t;

/* Shared by the parent and the readers (MAP_SHARED | MAP_ANONYMOUS). */
typedef struct {
    volatile int ready;         /* readers set up and warm */
    volatile int go;
    volatile int stop;
    volatile int done;          /* readers through --count / --epoch */
    bb_result_t  res[BB_MAX_READERS];
} bb_ctl_t;

static bb_ctl_t *ctl;
static uint8_t  *memcpy_src;    /* memcpy mode: shared, filled before fork */
static volatile uint32_t crc_sink;
static uint64_t *epoch_order;   /* --epoch: the permutation, before fork */

static double now_sec(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t xs_next(uint64_t *s)
{
    uint64_t x = *s;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

static uint64_t xs_seed(uint64_t seed, unsigned reader)
{
    uint64_t s = (seed + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)reader << 40);

    return s ? s : 1;
}

/* uniform in [0, n): 128-bit multiply, no modulo bias worth the name */
static uint64_t xs_below(uint64_t *s, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)xs_next(s) * n) >> 64);
}

static uint64_t bb_faults(void)
{
    struct rusage ru;

    if (getrusage(RUSAGE_SELF, &ru) != 0) {
        return 0;
    }
    return (uint64_t)ru.ru_minflt + (uint64_t)ru.ru_majflt;
}

/*
 * Map every page of the shared memcpy source into this reader's page
 * tables before it is timed.  A MAP_SHARED mapping is not copied into the
 * child's page tables at fork, so each first touch of a page in the timed
 * window was a page fault; and under a hypervisor with shadow paging the
 * first load of a page costs an exit even after the guest's fault (about
 * 4 us here).  The source is 16 times a dataset, so the warm-up, which
 * touches every page of a dataset, left most of it cold: the "memcpy
 * limit" of 4 KiB blocks measured 227k samples/s where the copy does
 * 1.4M.  Untimed: MADV_POPULATE_READ (Linux 5.14) builds the guest's
 * entries in one call, then one load per page warms the rest.
 */
static void bb_prefault(const uint8_t *p, uint64_t len)
{
    long pg = sysconf(_SC_PAGESIZE);
    volatile uint8_t sink = 0;
    uint64_t i;

    (void)madvise((void*)p, len, MADV_POPULATE_READ); /* the loads do it too */
    for (i = 0; i < len; i += (uint64_t)((pg > 0) ? pg : 4096)) {
        sink += p[i];
    }
    (void)sink;
}

static uint64_t digest_of(uint64_t index, const void *p, size_t len)
{
    return (uint64_t)cxlpool_crc32c(0, p, len) * (2 * index + 1);
}

/* CRC32C with the SSE4.2 instruction (the pool's polynomial, ~crc in/out) */
#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t bb_crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    uint64_t c = ~crc, v;

    for (; len >= 8; len -= 8, p += 8) {
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
    }
    for (; len > 0; --len, ++p) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p);
    }
    return ~(uint32_t)c;
}

static int bb_crc_hw_check(void)
{
    uint8_t b[4099];
    size_t i;

    if (!__builtin_cpu_supports("sse4.2")) {
        fprintf(stderr, "broker_bench: crc-hw: no SSE4.2 on this CPU\n");
        return -1;
    }
    for (i = 0; i < sizeof(b); ++i) {
        b[i] = (uint8_t)(i * 131 + 7);
    }
    if (bb_crc32c_hw(0, b, sizeof(b)) != cxlpool_crc32c(0, b, sizeof(b))) {
        fprintf(stderr, "broker_bench: crc-hw: differs from cxlpool_crc32c\n");
        return -1;
    }
    return 0;
}
#else
static uint32_t bb_crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
    return cxlpool_crc32c(crc, buf, len);
}

static int bb_crc_hw_check(void)
{
    fprintf(stderr, "broker_bench: crc-hw: x86-64 only\n");
    return -1;
}
#endif

/* ---- --gen: a raw file of records, each tagged with its index ---- */

static int bb_gen(const char *path, uint64_t n, uint64_t size, uint64_t seed)
{
    uint64_t *buf, words = (size + 7) / 8, i, k, s;
    FILE *f;

    buf = malloc(words * 8);
    f   = fopen(path, "wb");
    if ((buf == NULL) || (f == NULL)) {
        fprintf(stderr, "broker_bench: cannot write %s: %s\n", path,
                strerror(errno));
        free(buf);
        if (f != NULL) {
            fclose(f);
        }
        return 1;
    }
    s = xs_seed(seed, 0);
    for (i = 0; i < n; ++i) {
        buf[0] = i;
        for (k = 1; k < words; ++k) {
            buf[k] = xs_next(&s);
        }
        if (fwrite(buf, 1, size, f) != size) {
            fprintf(stderr, "broker_bench: write %s: %s\n", path, strerror(errno));
            fclose(f);
            free(buf);
            return 1;
        }
    }
    free(buf);
    if (fclose(f) != 0) {
        fprintf(stderr, "broker_bench: close %s: %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}

/* ---- memory figures ---- */

static int bb_read_mem(int pid, bb_mem_t *m)
{
    char path[64], line[256];
    unsigned long long v;
    FILE *f;

    memset(m, 0, sizeof(*m));
    snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "Pss: %llu", &v) == 1) {
            m->pss = v;
        } else if (sscanf(line, "Pss_Anon: %llu", &v) == 1) {
            m->pss_anon = v;
        } else if (sscanf(line, "Pss_File: %llu", &v) == 1) {
            m->pss_file = v;
        } else if (sscanf(line, "Pss_Shmem: %llu", &v) == 1) {
            m->pss_shmem = v;
        } else if (sscanf(line, "Rss: %llu", &v) == 1) {
            m->rss = v;
        }
    }
    fclose(f);
    return 0;
}

/* KiB of the file in the page cache (mincore), -1 if unknown */
static long long bb_file_cache_kib(const char *path)
{
    long page = sysconf(_SC_PAGESIZE);
    unsigned char *vec;
    struct stat st;
    long long kib = 0;
    size_t pages, i;
    void *p;
    int fd;

    if ((path == NULL) || ((fd = open(path, O_RDONLY)) < 0)) {
        return -1;
    }
    if ((fstat(fd, &st) != 0) || (st.st_size == 0)) {
        close(fd);
        return -1;
    }
    p = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        return -1;
    }
    pages = (st.st_size + page - 1) / page;
    vec   = malloc(pages);
    if ((vec == NULL) || (mincore(p, st.st_size, vec) != 0)) {
        free(vec);
        munmap(p, st.st_size);
        return -1;
    }
    for (i = 0; i < pages; ++i) {
        kib += (vec[i] & 1) ? page / 1024 : 0;
    }
    free(vec);
    munmap(p, st.st_size);
    return kib;
}

/* KiB allocated to a (tmpfs) pool file: the pool's resident bytes */
static long long bb_alloc_kib(const char *path)
{
    struct stat st;

    if ((path == NULL) || (stat(path, &st) != 0)) {
        return -1;
    }
    return (long long)st.st_blocks * 512 / 1024;
}

/* ---- one reader ---- */

typedef struct {
    const bb_cfg_t   *cfg;
    unsigned          id;
    uint64_t          nsamples;
    uint8_t          *buf;          /* batch * record */
    uint8_t          *tmp;          /* --check */
    int               fd;           /* --file */
    const uint8_t    *map;          /* mmap mode */
    cxl_broker_t     *b;
    cxl_broker_ds_t  *ds;
    cxl_broker_iov_t *iov;
    bb_result_t      *res;
} bb_reader_t;

static int bb_fail(bb_reader_t *r, const char *fmt, const char *what)
{
    r->res->failed = 1;
    snprintf(r->res->err, sizeof(r->res->err), fmt, what);
    return -1;
}

static int bb_reader_setup(bb_reader_t *r)
{
    const bb_cfg_t *cfg = r->cfg;
    cxl_broker_params_t prm;
    struct stat st;

    r->fd = -1;
    if (cfg->file != NULL) {
        r->fd = open(cfg->file, O_RDONLY);
        if ((r->fd < 0) || (fstat(r->fd, &st) != 0)) {
            return bb_fail(r, "cannot open %s", cfg->file);
        }
        r->nsamples = (uint64_t)st.st_size / cfg->record;
    }
    if (BB_BRK_MODE(cfg->mode)) {
        cxl_broker_params_init(&prm);
        prm.addr  = cfg->broker;
        prm.local = (cfg->mode == BB_VIEW) ? 1 : cfg->local;
        if (cxl_broker_connect(&prm, &r->b) != CXL_BROKER_OK) {
            return bb_fail(r, "connect: %s", cxl_broker_last_error());
        }
        if (cxl_broker_open(r->b, cfg->dataset, 0, &r->ds) != CXL_BROKER_OK) {
            return bb_fail(r, "open: %s", cxl_broker_last_error());
        }
        if ((r->nsamples != 0) && (r->nsamples != cxl_broker_nsamples(r->ds))) {
            return bb_fail(r, "%s: the dataset's sample count is not the "
                           "file's", cfg->dataset);
        }
        r->nsamples   = cxl_broker_nsamples(r->ds);
        r->res->local = cxl_broker_is_local(r->b);
        if ((r->nsamples > 0) &&
            (cxl_broker_sample_len(r->ds, 0) != cfg->record)) {
            return bb_fail(r, "%s: samples are not --record bytes",
                           cfg->dataset);
        }
        r->iov = calloc(cfg->batch, sizeof(*r->iov));
        if (r->iov == NULL) {
            return bb_fail(r, "%s", "out of memory");
        }
    } else if (cfg->mode == BB_MMAP) {
        r->map = mmap(NULL, r->nsamples * cfg->record, PROT_READ,
                      MAP_SHARED | MAP_POPULATE, r->fd, 0);
        if (r->map == MAP_FAILED) {
            r->map = NULL;
            return bb_fail(r, "mmap %s failed", cfg->file);
        }
    } else if (BB_MEM_MODE(cfg->mode)) {
        r->nsamples = cfg->memcpy_src / cfg->record;
        bb_prefault(memcpy_src, cfg->memcpy_src);
    }
    if (r->nsamples == 0) {
        return bb_fail(r, "%s", "no samples");
    }
    r->buf = aligned_alloc(4096, ((cfg->batch * cfg->record) + 4095) & ~4095ull);
    r->tmp = malloc(cfg->record);
    if ((r->buf == NULL) || (r->tmp == NULL)) {
        return bb_fail(r, "%s", "out of memory");
    }
    memset(r->buf, 0, cfg->batch * cfg->record);   /* its pages exist */
    return 0;
}

static void bb_reader_cleanup(bb_reader_t *r)
{
    if (r->ds != NULL) {
        cxl_broker_close(r->ds);
    }
    if (r->b != NULL) {
        cxl_broker_disconnect(r->b);
    }
    if (r->map != NULL) {
        munmap((void*)r->map, r->nsamples * r->cfg->record);
    }
    if (r->fd >= 0) {
        close(r->fd);
    }
    free(r->iov);
    free(r->buf);
    free(r->tmp);
}

/* Read samples idx[0..m) into the buffer; 0 or -1 (res->err set). */
static int bb_read(bb_reader_t *r, const uint64_t *idx, unsigned m)
{
    const bb_cfg_t *cfg = r->cfg;
    uint64_t rec = cfg->record;
    unsigned k;
    ssize_t n;

    switch (cfg->mode) {
    case BB_BROKER:
        for (k = 0; k < m; ++k) {
            r->iov[k].index = idx[k];
            r->iov[k].buf   = r->buf + (size_t)k * rec;
            r->iov[k].len   = rec;
        }
        if (cxl_broker_read_batch(r->ds, r->iov, m) != CXL_BROKER_OK) {
            return bb_fail(r, "read: %s", cxl_broker_last_error());
        }
        for (k = 0; k < m; ++k) {
            if (r->iov[k].got != rec) {
                return bb_fail(r, "%s", "a sample of the wrong length");
            }
        }
        return 0;
    case BB_VIEW:
        for (k = 0; k < m; ++k) {
            cxl_broker_view_t v;

            if (cxl_broker_view(r->ds, idx[k], &v) != CXL_BROKER_OK) {
                return bb_fail(r, "view: %s", cxl_broker_last_error());
            }
            if (v.len != rec) {
                cxl_broker_view_release(r->ds, &v);
                return bb_fail(r, "%s", "a sample of the wrong length");
            }
            memcpy(r->buf + (size_t)k * rec, v.data, rec);
            cxl_broker_view_release(r->ds, &v);
        }
        return 0;
    case BB_PREAD:
        for (k = 0; k < m; ++k) {
            n = pread(r->fd, r->buf + (size_t)k * rec, rec, (off_t)(idx[k] * rec));
            if (n != (ssize_t)rec) {
                return bb_fail(r, "pread: %s", (n < 0) ? strerror(errno) : "short");
            }
        }
        return 0;
    case BB_MMAP:
        for (k = 0; k < m; ++k) {
            memcpy(r->buf + (size_t)k * rec, r->map + idx[k] * rec, rec);
        }
        return 0;
    case BB_CRC:
        for (k = 0; k < m; ++k) {
            crc_sink += cxlpool_crc32c(0, memcpy_src + idx[k] * rec, rec);
        }
        return 0;
    case BB_CRC_HW:
        for (k = 0; k < m; ++k) {
            crc_sink += bb_crc32c_hw(0, memcpy_src + idx[k] * rec, rec);
        }
        return 0;
    case BB_MEMCPY:
    default:
        for (k = 0; k < m; ++k) {
            memcpy(r->buf + (size_t)k * rec, memcpy_src + idx[k] * rec, rec);
        }
        return 0;
    }
}

/* digest, bytes and (--check) the comparison with the file */
static void bb_account(bb_reader_t *r, const uint64_t *idx, unsigned m)
{
    uint64_t rec = r->cfg->record;
    const uint8_t *p;
    unsigned k;

    r->res->samples += m;
    r->res->bytes   += m * rec;
    if (!r->cfg->check) {
        return;
    }
    if (r->cfg->inject && (m > 0)) {
        r->buf[rec / 2] ^= 0x40;    /* the negative control of --check */
    }
    for (k = 0; k < m; ++k) {
        p = r->buf + (size_t)k * rec;
        r->res->digest += digest_of(idx[k], p, rec);
        if ((r->fd >= 0) && !BB_MEM_MODE(r->cfg->mode)) {
            if ((pread(r->fd, r->tmp, rec, (off_t)(idx[k] * rec)) != (ssize_t)rec) ||
                memcmp(r->tmp, p, rec)) {
                if (r->res->errors++ == 0) {
                    fprintf(stderr, "broker_bench: reader %u: sample %" PRIu64
                            " differs from %s at offset %" PRIu64 "\n", r->id,
                            idx[k], r->cfg->file, idx[k] * rec);
                }
            }
        }
    }
}

static int bb_reader_main(const bb_cfg_t *cfg, unsigned id)
{
    uint64_t idx[BB_MAX_BATCH], s = xs_seed(cfg->seed, id), pos = 0, end = 0;
    bb_reader_t r;
    double t0, tw;
    unsigned k, m;
    int rc = 0;

    memset(&r, 0, sizeof(r));
    r.cfg = cfg;
    r.id  = id;
    r.res = &ctl->res[id];
    if (bb_reader_setup(&r) != 0) {
        goto out;
    }
    if (cfg->epoch) {
        pos = r.nsamples * id / cfg->readers;
        end = r.nsamples * (id + 1) / cfg->readers;
    }
    /* warm-up: the same kind of reads, untimed, not counted */
    tw = now_sec() + cfg->warmup;
    while (!cfg->epoch && (now_sec() < tw)) {
        for (k = 0; k < cfg->batch; ++k) {
            idx[k] = xs_below(&s, r.nsamples);
        }
        if (bb_read(&r, idx, cfg->batch) != 0) {
            goto out;
        }
    }
    __atomic_add_fetch(&ctl->ready, 1, __ATOMIC_SEQ_CST);
    while (!ctl->go && !ctl->stop) {
        usleep(200);
    }
    r.res->faults = bb_faults();
    t0 = now_sec();
    while (!ctl->stop) {
        if (cfg->epoch) {
            if (pos >= end) {
                break;
            }
            m = (end - pos < cfg->batch) ? (unsigned)(end - pos) : cfg->batch;
            memcpy(idx, epoch_order + pos, m * sizeof(*idx));
            pos += m;
        } else {
            if ((cfg->count != 0) && (r.res->samples >= cfg->count)) {
                break;
            }
            m = cfg->batch;
            if ((cfg->count != 0) && (cfg->count - r.res->samples < m)) {
                m = (unsigned)(cfg->count - r.res->samples);
            }
            for (k = 0; k < m; ++k) {
                idx[k] = xs_below(&s, r.nsamples);
            }
        }
        if (bb_read(&r, idx, m) != 0) {
            break;
        }
        bb_account(&r, idx, m);
    }
    r.res->seconds = now_sec() - t0;
    r.res->faults  = bb_faults() - r.res->faults;
out:
    rc = r.res->failed;
    if (rc) {
        /* the parent stops waiting for this one */
        __atomic_add_fetch(&ctl->ready, 1, __ATOMIC_SEQ_CST);
    }
    __atomic_add_fetch(&ctl->done, 1, __ATOMIC_SEQ_CST);
    /* stay mapped and connected until the parent has read our memory */
    while (!ctl->stop) {
        usleep(500);
    }
    bb_reader_cleanup(&r);
    return rc;
}

/* ---- the parent ---- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: broker_bench --mode broker|view|pread|mmap|memcpy|crc|crc-hw\n"
            "         [--readers N]\n"
            "         [--batch K] [--record BYTES] [--file PATH] [--dataset NAME]\n"
            "         [--broker HOST:PORT] [--local -1|0|1] [--copy get|map]\n"
            "         [--seconds S]\n"
            "         [--warmup S] [--count N] [--epoch [--order seq|random]]\n"
            "         [--seed N] [--check]\n"
            "         [--pss-at F] [--pss-pid PID] [--pool-file PATH]\n"
            "         [--memcpy-src BYTES] [--inject-error] [--header]\n"
            "       broker_bench --gen FILE NRECORDS SIZE SEED\n"
            "(the comment at the top of perftest/broker_bench.c describes them)\n");
}

static uint64_t parse_size(const char *s)
{
    char *end;
    uint64_t v = strtoull(s, &end, 0);

    switch (*end) {
    case 'k': case 'K': v <<= 10; break;
    case 'm': case 'M': v <<= 20; break;
    case 'g': case 'G': v <<= 30; break;
    default: break;
    }
    return v;
}

static void bb_sample_mem(const bb_cfg_t *cfg, const pid_t *pids, bb_mem_t *per,
                          bb_mem_t *sum, bb_mem_t *other, long long *cache,
                          long long *pool)
{
    unsigned i;

    memset(sum, 0, sizeof(*sum));
    for (i = 0; i < cfg->readers; ++i) {
        bb_read_mem(pids[i], &per[i]);
        sum->pss       += per[i].pss;
        sum->pss_anon  += per[i].pss_anon;
        sum->pss_file  += per[i].pss_file;
        sum->pss_shmem += per[i].pss_shmem;
        sum->rss       += per[i].rss;
    }
    memset(other, 0, sizeof(*other));
    if (cfg->pss_pid > 0) {
        bb_read_mem(cfg->pss_pid, other);
    }
    *cache = bb_file_cache_kib(cfg->file);
    *pool  = bb_alloc_kib(cfg->pool_file);
}

static void bb_print_header(void)
{
    printf("row,mode,record,readers,reader,batch,phase,seconds,samples,bytes,"
           "samples_per_s,gb_per_s,min_reader_sps,max_reader_sps,pss_kib,"
           "pss_anon_kib,pss_file_kib,pss_shmem_kib,rss_kib,other_pss_kib,"
           "file_cache_kib,pool_kib,local,errors,digest,faults\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"mode", required_argument, NULL, 'm'},
        {"readers", required_argument, NULL, 'n'},
        {"batch", required_argument, NULL, 'k'},
        {"record", required_argument, NULL, 'r'},
        {"file", required_argument, NULL, 'f'},
        {"dataset", required_argument, NULL, 'd'},
        {"broker", required_argument, NULL, 'b'},
        {"local", required_argument, NULL, 'l'},
        {"copy", required_argument, NULL, 'y'},
        {"seconds", required_argument, NULL, 't'},
        {"warmup", required_argument, NULL, 'w'},
        {"count", required_argument, NULL, 'c'},
        {"epoch", no_argument, NULL, 'e'},
        {"order", required_argument, NULL, 'o'},
        {"seed", required_argument, NULL, 's'},
        {"check", no_argument, NULL, 'C'},
        {"inject-error", no_argument, NULL, 'X'},
        {"pss-at", required_argument, NULL, 'P'},
        {"pss-pid", required_argument, NULL, 'p'},
        {"pool-file", required_argument, NULL, 'F'},
        {"memcpy-src", required_argument, NULL, 'M'},
        {"header", no_argument, NULL, 'H'},
        {"gen", no_argument, NULL, 'g'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    bb_cfg_t cfg = {.mode = BB_BROKER, .readers = 1, .batch = 16,
                    .record = 4096, .local = -1, .seconds = 1.0, .warmup = 0.3,
                    .seed = 1, .pss_at = 0.5, .memcpy_src = 1ull << 30};
    pid_t pids[BB_MAX_READERS];
    bb_mem_t per[BB_MAX_READERS], sum, other;
    long long cache = -1, pool = -1;
    double t0, t1, tlim, wall, sps, minsps = 0, maxsps = 0;
    uint64_t samples = 0, bytes = 0, errors = 0, digest = 0, nsamp = 0, i;
    uint64_t faults = 0;
    int opt, header = 0, failed = 0, status, local = -1, sampled = 0;
    unsigned r, alive;
    const char *phase;

    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 'm':
            for (r = 0; r < BB_NMODES && strcmp(optarg, bb_mode_names[r]); ++r) {
            }
            if (r == BB_NMODES) {
                fprintf(stderr, "broker_bench: unknown mode '%s'\n", optarg);
                return 2;
            }
            cfg.mode = (bb_mode_t)r;
            break;
        case 'n': cfg.readers = (unsigned)atoi(optarg); break;
        case 'k': cfg.batch = (unsigned)atoi(optarg); break;
        case 'r': cfg.record = parse_size(optarg); break;
        case 'f': cfg.file = optarg; break;
        case 'd': cfg.dataset = optarg; break;
        case 'b': cfg.broker = optarg; break;
        case 'l': cfg.local = atoi(optarg); break;
        case 'y':
            if (strcmp(optarg, "get") && strcmp(optarg, "map")) {
                fprintf(stderr, "broker_bench: --copy '%s': get or map\n", optarg);
                return 2;
            }
            setenv("CXL_BROKER_COPY", optarg, 1);   /* the readers inherit it */
            break;
        case 't': cfg.seconds = atof(optarg); break;
        case 'w': cfg.warmup = atof(optarg); break;
        case 'c': cfg.count = strtoull(optarg, NULL, 0); break;
        case 'e': cfg.epoch = 1; break;
        case 'o':
            if (strcmp(optarg, "seq") && strcmp(optarg, "random")) {
                fprintf(stderr, "broker_bench: --order seq|random\n");
                return 2;
            }
            cfg.seq = !strcmp(optarg, "seq");
            break;
        case 's': cfg.seed = strtoull(optarg, NULL, 0); break;
        case 'C': cfg.check = 1; break;
        case 'X': cfg.inject = 1; break;
        case 'P': cfg.pss_at = atof(optarg); break;
        case 'p': cfg.pss_pid = atoi(optarg); break;
        case 'F': cfg.pool_file = optarg; break;
        case 'M': cfg.memcpy_src = parse_size(optarg); break;
        case 'H': header = 1; break;
        case 'g':
            if (argc - optind != 4) {
                usage(stderr);
                return 2;
            }
            return bb_gen(argv[optind], strtoull(argv[optind + 1], NULL, 0),
                          parse_size(argv[optind + 2]),
                          strtoull(argv[optind + 3], NULL, 0));
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if ((optind != argc) || (cfg.readers < 1) || (cfg.readers > BB_MAX_READERS) ||
        (cfg.batch < 1) || (cfg.batch > BB_MAX_BATCH) || (cfg.record == 0) ||
        (cfg.seconds <= 0) || (cfg.warmup < 0) ||
        (BB_BRK_MODE(cfg.mode) && (cfg.dataset == NULL)) ||
        (((cfg.mode == BB_PREAD) || (cfg.mode == BB_MMAP) || cfg.check) &&
         (cfg.file == NULL) && !BB_MEM_MODE(cfg.mode)) ||
        (BB_MEM_MODE(cfg.mode) && (cfg.epoch || (cfg.memcpy_src < cfg.record)))) {
        usage(stderr);
        return 2;
    }
    if (header) {
        bb_print_header();
        fflush(stdout);
    }
    ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE,
               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ctl == MAP_FAILED) {
        fprintf(stderr, "broker_bench: mmap: %s\n", strerror(errno));
        return 1;
    }
    memset(ctl, 0, sizeof(*ctl));
    if ((cfg.mode == BB_CRC_HW) && (bb_crc_hw_check() != 0)) {
        return 1;
    }
    if (BB_MEM_MODE(cfg.mode)) {
        memcpy_src = mmap(NULL, cfg.memcpy_src, PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (memcpy_src == MAP_FAILED) {
            fprintf(stderr, "broker_bench: cannot map %" PRIu64 " bytes\n",
                    cfg.memcpy_src);
            return 1;
        }
        for (i = 0; i < cfg.memcpy_src; i += 8) {
            *(uint64_t*)(memcpy_src + i) = i * 0x9e3779b97f4a7c15ull;
        }
    }
    if (cfg.epoch) {
        /* the permutation; the sample count from the file or the broker */
        struct stat st;
        uint64_t s = xs_seed(cfg.seed, 0xffff), j, t;

        if ((cfg.file != NULL) && (stat(cfg.file, &st) == 0)) {
            nsamp = (uint64_t)st.st_size / cfg.record;
        } else if (BB_BRK_MODE(cfg.mode)) {
            cxl_broker_params_t prm;
            cxl_broker_t *b;
            cxl_broker_ds_t *ds;

            cxl_broker_params_init(&prm);
            prm.addr  = cfg.broker;
            prm.local = 0;
            if ((cxl_broker_connect(&prm, &b) != CXL_BROKER_OK) ||
                (cxl_broker_open(b, cfg.dataset, 0, &ds) != CXL_BROKER_OK)) {
                fprintf(stderr, "broker_bench: %s\n", cxl_broker_last_error());
                return 1;
            }
            nsamp = cxl_broker_nsamples(ds);
            cxl_broker_close(ds);
            cxl_broker_disconnect(b);
        }
        epoch_order = malloc((nsamp ? nsamp : 1) * sizeof(*epoch_order));
        if (epoch_order == NULL) {
            fprintf(stderr, "broker_bench: out of memory\n");
            return 1;
        }
        for (i = 0; i < nsamp; ++i) {
            epoch_order[i] = i;
        }
        for (i = nsamp; !cfg.seq && (i > 1); --i) {
            j = xs_below(&s, i);
            t = epoch_order[i - 1];
            epoch_order[i - 1] = epoch_order[j];
            epoch_order[j] = t;
        }
    }
    fflush(stdout);
    for (r = 0; r < cfg.readers; ++r) {
        pids[r] = fork();
        if (pids[r] < 0) {
            fprintf(stderr, "broker_bench: fork: %s\n", strerror(errno));
            ctl->stop = 1;
            cfg.readers = r;
            failed = 1;
            break;
        }
        if (pids[r] == 0) {
            _exit(bb_reader_main(&cfg, r));
        }
    }
    /* all set up and warm (a reader that failed counts as ready) */
    tlim = now_sec() + 120 + cfg.warmup;
    while (!failed && (ctl->ready < (int)cfg.readers) && (now_sec() < tlim)) {
        usleep(1000);
    }
    if (ctl->ready < (int)cfg.readers) {
        fprintf(stderr, "broker_bench: readers not ready after 120 s\n");
        failed = 1;
    }
    t0      = now_sec();
    ctl->go = 1;
    if (!failed && (cfg.count || cfg.epoch)) {
        while (ctl->done < (int)cfg.readers) {
            usleep(200);
        }
        t1 = now_sec();
        bb_sample_mem(&cfg, pids, per, &sum, &other, &cache, &pool);
        sampled = 1;
    } else if (!failed) {
        usleep((useconds_t)(cfg.seconds * cfg.pss_at * 1e6));
        bb_sample_mem(&cfg, pids, per, &sum, &other, &cache, &pool);
        sampled = 1;
        while (((wall = now_sec() - t0) < cfg.seconds) &&
               (ctl->done < (int)cfg.readers)) {
            usleep((useconds_t)((cfg.seconds - wall) * 1e6 > 2000 ? 2000 :
                                (cfg.seconds - wall) * 1e6 + 1));
        }
        t1 = now_sec();
    } else {
        t1 = now_sec();
    }
    ctl->stop = 1;
    wall = t1 - t0;
    for (alive = 0, r = 0; r < cfg.readers; ++r) {
        if ((waitpid(pids[r], &status, 0) != pids[r]) || !WIFEXITED(status) ||
            (WEXITSTATUS(status) != 0)) {
            failed = 1;
        } else {
            alive++;
        }
    }
    if (!sampled) {
        memset(per, 0, sizeof(per));
        memset(&sum, 0, sizeof(sum));
        memset(&other, 0, sizeof(other));
    }
    phase = cfg.epoch ? "epoch" : (cfg.count ? "count" : "timed");
    for (r = 0; r < cfg.readers; ++r) {
        bb_result_t *res = &ctl->res[r];

        if (res->failed) {
            fprintf(stderr, "broker_bench: reader %u: %s\n", r, res->err);
            failed = 1;
        }
        sps = (res->seconds > 0) ? res->samples / res->seconds : 0;
        if ((r == 0) || (sps < minsps)) {
            minsps = sps;
        }
        if ((r == 0) || (sps > maxsps)) {
            maxsps = sps;
        }
        samples += res->samples;
        bytes   += res->bytes;
        errors  += res->errors;
        digest  += res->digest;
        faults  += res->faults;
        if (BB_BRK_MODE(cfg.mode)) {
            local = (r == 0 || local == res->local) ? res->local : -1;
        }
        printf("reader,%s,%" PRIu64 ",%u,%u,%u,%s,%.6f,%" PRIu64 ",%" PRIu64
               ",%.1f,%.4f,%.1f,%.1f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
               ",%" PRIu64 ",,,,%d,%" PRIu64 ",%016" PRIx64 ",%" PRIu64 "\n",
               bb_mode_names[cfg.mode], cfg.record, cfg.readers, r, cfg.batch,
               phase, res->seconds, res->samples, res->bytes, sps,
               (res->seconds > 0) ? res->bytes / res->seconds / 1e9 : 0,
               sps, sps, per[r].pss, per[r].pss_anon, per[r].pss_file,
               per[r].pss_shmem, per[r].rss, BB_BRK_MODE(cfg.mode) ? res->local : -1,
               res->errors, res->digest, res->faults);
    }
    /* --epoch: every sample read exactly once, or the digest means nothing */
    if (cfg.epoch && !failed && (samples != nsamp)) {
        fprintf(stderr, "broker_bench: epoch read %" PRIu64 " of %" PRIu64
                " samples\n", samples, nsamp);
        failed = 1;
    }
    printf("total,%s,%" PRIu64 ",%u,-1,%u,%s,%.6f,%" PRIu64 ",%" PRIu64
           ",%.1f,%.4f,%.1f,%.1f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
           ",%" PRIu64 ",%" PRIu64 ",%lld,%lld,%d,%" PRIu64 ",%016" PRIx64
           ",%" PRIu64 "\n",
           bb_mode_names[cfg.mode], cfg.record, cfg.readers, cfg.batch, phase,
           wall, samples, bytes, (wall > 0) ? samples / wall : 0,
           (wall > 0) ? bytes / wall / 1e9 : 0, minsps, maxsps, sum.pss,
           sum.pss_anon, sum.pss_file, sum.pss_shmem, sum.rss, other.pss, cache,
           pool, local, errors, digest, faults);
    fflush(stdout);
    (void)alive;
    return (failed || errors) ? 1 : 0;
}
