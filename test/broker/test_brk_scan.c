/*
 * The dataset scanners against inputs made here: a directory tree, .npy
 * files written byte by byte, tar shards made by GNU tar (gnu and pax
 * formats, with long names), raw record files.  Every sample is read back
 * the way the broker will: the chunk rebuilt from the files through its
 * segments, then the sample cut out of it.  Then the chunking rules, the
 * fingerprint, the metadata blob and its checker, and bad inputs, each of
 * which must fail with the file's name in the error.
 */
#define _GNU_SOURCE
#include "brk_scan.h"

#include <ucx_cxl/cxlpool.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define KIB        1024u
#define CHUNK      (10 * KIB)
#define MAX_EXP    256
#define MAX_MEMB   4

static int  g_pass, g_fail;
static char g_dir[64];
static char g_why[1024];

static void check(const char *name, int ok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void check(const char *name, int ok, const char *fmt, ...)
{
    va_list ap;

    if (ok) {
        printf("ok %s\n", name);
        ++g_pass;
        return;
    }
    printf("FAIL %s: ", name);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    ++g_fail;
}

/* Set g_why and return -1, for the verifiers. */
static int why(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int why(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(g_why, sizeof(g_why), fmt, ap);
    va_end(ap);
    return -1;
}

static char *tpath(const char *rel)
{
    char *p;

    if (asprintf(&p, "%s/%s", g_dir, rel) < 0) {
        abort();
    }
    return p;
}

static void fill(uint8_t *buf, size_t len, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    size_t i;

    for (i = 0; i < len; ++i) {
        x = x * 1103515245u + 12345u;
        buf[i] = (uint8_t)(x >> 16);
    }
}

static int write_file(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    int ret;

    if (f == NULL) {
        return -1;
    }
    ret = ((len == 0) || (fwrite(buf, 1, len, f) == len)) ? 0 : -1;
    return (fclose(f) == 0) ? ret : -1;
}

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0, r;

    if (f == NULL) {
        return NULL;
    }
    do {
        if (n == cap) {
            cap = cap ? cap * 2 : 4096;
            buf = realloc(buf, cap);
            if (buf == NULL) {
                abort();
            }
        }
        r  = fread(buf + n, 1, cap - n, f);
        n += r;
    } while (r > 0);
    fclose(f);
    *len = n;
    return buf;
}

/* A file of len pseudo-random bytes; its contents in *out (malloc'd). */
static int make_file(const char *rel, size_t len, uint32_t seed,
                     uint8_t **out)
{
    uint8_t *buf = malloc(len ? len : 1);
    char *p = tpath(rel);
    int ret;

    fill(buf, len, seed);
    ret = write_file(p, buf, len);
    free(p);
    if (out != NULL) {
        *out = buf;
    } else {
        free(buf);
    }
    return ret;
}

static void mkdir_rel(const char *rel)
{
    char *p = tpath(rel);

    if (mkdir(p, 0755) != 0) {
        fprintf(stderr, "mkdir %s: %s\n", p, strerror(errno));
        abort();
    }
    free(p);
}

static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int run(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    return system(cmd);
}

/* stdout of a command, NUL-terminated; its length in *len. */
static char *run_out(const char *cmd, size_t *len)
{
    FILE *f = popen(cmd, "r");
    char *buf = NULL;
    size_t cap = 0, n = 0, r;

    if (f == NULL) {
        return NULL;
    }
    do {
        if (cap - n < 2) {
            cap = cap ? cap * 2 : 4096;
            buf = realloc(buf, cap);
            if (buf == NULL) {
                abort();
            }
        }
        r  = fread(buf + n, 1, cap - n - 1, f);
        n += r;
    } while (r > 0);
    buf[n] = '\0';
    if (pclose(f) != 0) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

/* ---- reading a desc back the way the broker will ---- */

static const char *fpath(const brk_desc_t *d, uint32_t file, char *buf,
                         size_t size)
{
    const brk_file_t *f = &d->files[file];

    snprintf(buf, size, "%.*s", (int)f->path_len, d->strings + f->path_off);
    return buf;
}

/* The bytes of chunk ci, rebuilt from the files through its segments. */
static uint8_t *read_chunk(const brk_desc_t *d, uint64_t ci)
{
    const brk_chunk_t *c = &d->chunks[ci];
    const brk_seg_t *g;
    uint8_t *buf = malloc(c->len ? c->len : 1);
    char path[4096];
    uint32_t k;
    int fd;

    for (k = 0; k < c->nsegs; ++k) {
        g  = &d->segs[c->first_seg + k];
        fd = open(fpath(d, g->file, path, sizeof(path)), O_RDONLY);
        if ((fd < 0) ||
            (pread(fd, buf + g->chunk_off, g->len, (off_t)g->file_off) !=
             (ssize_t)g->len)) {
            if (fd >= 0) {
                close(fd);
            }
            free(buf);
            return NULL;
        }
        close(fd);
    }
    return buf;
}

/* Each sample's bytes, via its chunk, to a callback. */
typedef int (*sample_fn_t)(const brk_desc_t *d, uint64_t i,
                           const uint8_t *bytes, void *arg);

static int for_each_sample(const brk_desc_t *d, sample_fn_t fn, void *arg)
{
    const brk_sample_t *s;
    uint64_t ci, i;
    uint8_t *buf;
    int ret = 0;

    for (ci = 0; (ret == 0) && (ci < d->nchunks); ++ci) {
        buf = read_chunk(d, ci);
        if (buf == NULL) {
            return why("chunk %llu: cannot read its segments",
                       (unsigned long long)ci);
        }
        for (i = d->chunks[ci].first_sample;
             (ret == 0) &&
             (i < d->chunks[ci].first_sample + d->chunks[ci].nsamples); ++i) {
            s   = &d->samples[i];
            ret = fn(d, i, buf + s->off, arg);
        }
        free(buf);
    }
    return ret;
}

typedef struct {
    const uint8_t *data;
    size_t         len;
} exp_t;

static int cmp_exp(const brk_desc_t *d, uint64_t i, const uint8_t *bytes,
                   void *arg)
{
    const exp_t *e = (const exp_t*)arg + i;

    if (d->samples[i].len != e->len) {
        return why("sample %llu: %llu bytes, expected %zu",
                   (unsigned long long)i,
                   (unsigned long long)d->samples[i].len, e->len);
    }
    if ((e->len > 0) && (memcmp(bytes, e->data, e->len) != 0)) {
        return why("sample %llu: bytes differ", (unsigned long long)i);
    }
    return 0;
}

static int verify_bytes(const brk_desc_t *d, const exp_t *exp, size_t n)
{
    if (d->nsamples != n) {
        return why("%llu samples, expected %zu",
                   (unsigned long long)d->nsamples, n);
    }
    return for_each_sample(d, cmp_exp, (void*)exp);
}

/* The chunking rules of brk_scan.h, checked on the result. */
static int verify_layout(const brk_desc_t *d)
{
    const brk_chunk_t *c;
    const brk_sample_t *s;
    const brk_seg_t *g, *h;
    uint64_t ci, i, k, off, want = 0, bytes = 0;

    for (ci = 0; ci < d->nchunks; ++ci) {
        c = &d->chunks[ci];
        if ((c->first_sample != want) || (c->nsamples == 0)) {
            return why("chunk %llu: samples do not follow on",
                       (unsigned long long)ci);
        }
        want += c->nsamples;
        if ((c->len > d->chunk_size) && (c->nsamples != 1)) {
            return why("chunk %llu: %llu bytes over chunk_size with %u "
                       "samples", (unsigned long long)ci,
                       (unsigned long long)c->len, c->nsamples);
        }
        if ((ci > 0) &&
            (d->chunks[ci - 1].len + d->samples[c->first_sample].len <=
             d->chunk_size)) {
            return why("chunk %llu: its first sample would have fit in "
                       "chunk %llu", (unsigned long long)ci,
                       (unsigned long long)ci - 1);
        }
        /* samples end to end, never past the chunk */
        off = 0;
        for (i = c->first_sample; i < c->first_sample + c->nsamples; ++i) {
            s = &d->samples[i];
            if ((s->chunk != ci) || (s->off != off)) {
                return why("sample %llu: chunk %u off %llu, expected %llu "
                           "at %llu", (unsigned long long)i, s->chunk,
                           (unsigned long long)s->off,
                           (unsigned long long)ci, (unsigned long long)off);
            }
            off   += s->len;
            bytes += s->len;
            /* its bytes come from segments of its own file */
            for (k = 0; k < c->nsegs; ++k) {
                g = &d->segs[c->first_seg + k];
                if ((g->chunk_off < s->off + s->len) &&
                    (s->off < g->chunk_off + g->len) &&
                    (g->file != s->file)) {
                    return why("sample %llu of file %u overlaps a segment "
                               "of file %u", (unsigned long long)i, s->file,
                               g->file);
                }
            }
        }
        if (off != c->len) {
            return why("chunk %llu: samples cover %llu of %llu bytes",
                       (unsigned long long)ci, (unsigned long long)off,
                       (unsigned long long)c->len);
        }
        off = 0;
        for (k = 0; k < c->nsegs; ++k) {
            g = &d->segs[c->first_seg + k];
            if ((g->chunk_off != off) || (g->len == 0)) {
                return why("chunk %llu: segment %llu not end to end",
                           (unsigned long long)ci, (unsigned long long)k);
            }
            if (k > 0) {
                h = g - 1;
                if ((h->file == g->file) &&
                    (h->file_off + h->len == g->file_off)) {
                    return why("chunk %llu: segments %llu and %llu are one "
                               "contiguous run of file %u",
                               (unsigned long long)ci,
                               (unsigned long long)k - 1,
                               (unsigned long long)k, g->file);
                }
            }
            off += g->len;
        }
        if (off != c->len) {
            return why("chunk %llu: segments cover %llu of %llu bytes",
                       (unsigned long long)ci, (unsigned long long)off,
                       (unsigned long long)c->len);
        }
    }
    if ((want != d->nsamples) || (bytes != d->bytes)) {
        return why("chunks cover %llu of %llu samples, %llu of %llu bytes",
                   (unsigned long long)want,
                   (unsigned long long)d->nsamples,
                   (unsigned long long)bytes, (unsigned long long)d->bytes);
    }
    return 0;
}

/* Write the blob, check it, and compare it with the desc field by field. */
static int verify_meta(const brk_desc_t *d)
{
    uint64_t len = brk_desc_meta_size(d);
    char err[512];
    brk_meta_t h;
    uint8_t *b;
    int ret = 0;

    b = malloc(len);
    brk_desc_write_meta(d, b);
    memcpy(&h, b, sizeof(h));
    if (brk_meta_check(b, len, err, sizeof(err)) != 0) {
        ret = why("meta_check of a fresh blob: %s", err);
    } else if ((h.magic != BRK_META_MAGIC) || (h.len != len) ||
               (h.format != (uint32_t)d->format) ||
               (h.nsamples != d->nsamples) || (h.nchunks != d->nchunks) ||
               (h.nsegs != d->nsegs) || (h.nfiles != d->nfiles) ||
               (h.strings_len != d->strings_len)) {
        ret = why("header fields differ from the desc");
    } else if ((h.samples_off % 8) || (h.chunks_off % 8) ||
               (h.segs_off % 8) || (h.files_off % 8)) {
        ret = why("an array is not 8-aligned");
    } else if (memcmp(b + h.samples_off, d->samples,
                      d->nsamples * sizeof(brk_sample_t)) ||
               memcmp(b + h.chunks_off, d->chunks,
                      d->nchunks * sizeof(brk_chunk_t)) ||
               memcmp(b + h.segs_off, d->segs,
                      d->nsegs * sizeof(brk_seg_t)) ||
               memcmp(b + h.files_off, d->files,
                      d->nfiles * sizeof(brk_file_t)) ||
               memcmp(b + h.strings_off, d->strings, d->strings_len)) {
        ret = why("an array differs from the desc");
    }
    free(b);
    return ret;
}

/* layout, meta, and (if exp) bytes of one scan, as named checks */
static void verify_all(const char *what, const brk_desc_t *d,
                       const exp_t *exp, size_t n)
{
    char name[128];
    int r;

    if (exp != NULL) {
        snprintf(name, sizeof(name), "%s: sample bytes via segments", what);
        r = verify_bytes(d, exp, n);
        check(name, r == 0, "%s", g_why);
    }
    snprintf(name, sizeof(name), "%s: chunking rules", what);
    r = verify_layout(d);
    check(name, r == 0, "%s", g_why);
    snprintf(name, sizeof(name), "%s: meta round trip", what);
    r = verify_meta(d);
    check(name, r == 0, "%s", g_why);
}

static int scan1(const char *path, brk_format_t fmt, uint64_t chunk,
                 uint64_t record, brk_desc_t *d, char *err, size_t errlen)
{
    const char *paths[1] = { path };
    brk_scan_opts_t o = { fmt, chunk, record };

    return brk_scan(paths, 1, &o, d, err, errlen);
}

/* ---- FILES ---- */

typedef struct {
    const char *rel;
    size_t      len;
    uint8_t    *data;
    char       *full;
} tfile_t;

static int tfile_cmp(const void *a, const void *b)
{
    return strcmp(((const tfile_t*)a)->full, ((const tfile_t*)b)->full);
}

static void test_files(void)
{
    static const char *const rels[] = {
        "files/a.txt", "files/a/x", "files/a/y/z.bin", "files/b",
        "files/c.dat", "files/d/e/f", "files/A", "files/a-b"
    };
    static const size_t lens[] = { 5000, 3000, 25000, 0, 9000, 100, 7, 4000 };
    tfile_t tf[64];
    exp_t exp[64];
    brk_desc_t d;
    char err[512], name[64], path[4096], *p, *q;
    size_t n = 0, i;
    int r, paths_ok;

    mkdir_rel("files");
    mkdir_rel("files/a");
    mkdir_rel("files/a/y");
    mkdir_rel("files/d");
    mkdir_rel("files/d/e");
    mkdir_rel("files/m");
    for (i = 0; i < sizeof(rels) / sizeof(rels[0]); ++i, ++n) {
        tf[n].rel = rels[i];
        tf[n].len = lens[i];
        make_file(rels[i], lens[i], (uint32_t)n, &tf[n].data);
    }
    for (i = 0; i < 40; ++i, ++n) {
        snprintf(name, sizeof(name), "files/m/%03zu", i);
        tf[n].rel = strdup(name);
        tf[n].len = 100 + (i * 397) % 1400;
        make_file(tf[n].rel, tf[n].len, (uint32_t)n, &tf[n].data);
    }
    /* a symlink is followed: a sample with c.dat's bytes */
    p = tpath("files/link");
    symlink("c.dat", p);
    free(p);
    tf[n].rel  = "files/link";
    tf[n].len  = tf[4].len;
    tf[n].data = malloc(tf[4].len);
    memcpy(tf[n].data, tf[4].data, tf[4].len);
    ++n;
    /* a fifo is no regular file: passed over */
    p = tpath("files/fifo");
    mkfifo(p, 0644);
    free(p);

    for (i = 0; i < n; ++i) {
        tf[i].full = tpath(tf[i].rel);
    }
    qsort(tf, n, sizeof(tf[0]), tfile_cmp);
    for (i = 0; i < n; ++i) {
        exp[i].data = tf[i].data;
        exp[i].len  = tf[i].len;
    }

    p = tpath("files");
    r = scan1(p, BRK_FMT_AUTO, CHUNK, 0, &d, err, sizeof(err));
    check("files: scan a directory", r == 0, "%s", err);
    if (r == 0) {
        check("files: auto picks files", d.format == BRK_FMT_FILES,
              "format %d", d.format);
        check("files: one file per regular file", d.nfiles == n,
              "%llu files, expected %zu", (unsigned long long)d.nfiles, n);
        paths_ok = (d.nfiles == n);
        for (i = 0; paths_ok && (i < n); ++i) {
            if (strcmp(fpath(&d, (uint32_t)i, path, sizeof(path)),
                       tf[i].full) != 0) {
                paths_ok = 0;
                check("files: bytewise path order", 0, "file %zu is %s, "
                      "expected %s", i, path, tf[i].full);
            }
        }
        if (paths_ok) {
            check("files: bytewise path order", 1, "%s", "");
        }
        verify_all("files", &d, exp, n);
        {
            uint64_t k, alone = 0;

            for (k = 0; k < d.nchunks; ++k) {
                alone += (d.chunks[k].len == 25000) &&
                         (d.chunks[k].nsamples == 1);
            }
            check("files: oversized sample alone", alone == 1,
                  "%llu chunks of the 25000-byte file alone",
                  (unsigned long long)alone);
        }
        brk_desc_free(&d);
    }
    free(p);

    /* a file given directly, twice: two samples; trailing '/' on a dir */
    {
        const char *paths[3];
        brk_scan_opts_t o = { BRK_FMT_FILES, CHUNK, 0 };
        exp_t e2[2];

        p = tpath("files/a.txt");
        q = tpath("files/d/");
        paths[0] = p;
        paths[1] = q;
        r = brk_scan(paths, 2, &o, &d, err, sizeof(err));
        check("files: a file and a dir/ given", r == 0, "%s", err);
        if (r == 0) {
            for (i = 0; i < n; ++i) {
                if (strcmp(tf[i].rel, "files/a.txt") == 0) {
                    e2[0].data = tf[i].data;
                    e2[0].len  = tf[i].len;
                } else if (strcmp(tf[i].rel, "files/d/e/f") == 0) {
                    e2[1].data = tf[i].data;
                    e2[1].len  = tf[i].len;
                }
            }
            check("files: joined path without '//'",
                  (d.nfiles == 2) &&
                  (strcmp(fpath(&d, 1, path, sizeof(path)) + strlen(g_dir),
                          "/files/d/e/f") == 0), "path %s",
                  (d.nfiles == 2) ? path : "?");
            verify_all("files given", &d, e2, 2);
            brk_desc_free(&d);
        }
        free(p);
        free(q);
    }

    for (i = 0; i < n; ++i) {
        free(tf[i].data);
        free(tf[i].full);
        if (strncmp(tf[i].rel, "files/m/", 8) == 0) {
            free((char*)tf[i].rel);
        }
    }
}

/* ---- NPY ---- */

/* A .npy file as numpy writes it: header padded so the data is 64-aligned. */
static int write_npy(const char *rel, int major, const char *dict,
                     const void *data, size_t len)
{
    size_t plen = (major == 1) ? 10 : 12, dlen = strlen(dict), hlen, tot;
    uint8_t *buf;
    char *p;
    int ret;

    hlen = dlen + 1;
    hlen = ((plen + hlen + 63) / 64) * 64 - plen;
    tot  = plen + hlen + len;
    buf  = malloc(tot);
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    buf[8] = (uint8_t)hlen;
    buf[9] = (uint8_t)(hlen >> 8);
    if (major != 1) {
        buf[10] = (uint8_t)(hlen >> 16);
        buf[11] = (uint8_t)(hlen >> 24);
    }
    memcpy(buf + plen, dict, dlen);
    memset(buf + plen + dlen, ' ', hlen - dlen - 1);
    buf[plen + hlen - 1] = '\n';
    if (len > 0) {
        memcpy(buf + plen + hlen, data, len);
    }
    p   = tpath(rel);
    ret = write_file(p, buf, tot);
    free(p);
    free(buf);
    return ret;
}

typedef struct {
    const char *rel;
    int         major;
    const char *descr;
    const char *shape;
    size_t      rows, rowbytes;
    const char *info;
    uint8_t    *data;
} tnpy_t;

static void test_npy(void)
{
    tnpy_t t[] = {
        { "npy/a.npy", 1, "<f4", "(50, 8, 8)", 50, 256,
          "descr=<f4 shape=8,8", NULL },
        { "npy/b.npy", 1, "|u1", "(1000,)", 1000, 1, "descr=|u1 shape=",
          NULL },
        { "npy/c.npy", 2, "<i8", "(7, 3000)", 7, 24000,
          "descr=<i8 shape=3000", NULL },
        { "npy/d.npy", 1, "<f8", "()", 1, 8, "descr=<f8 shape=", NULL },
        { "npy/e.npy", 3, ">f8", "(4, 2, 1, 3)", 4, 48,
          "descr=>f8 shape=2,1,3", NULL },
        { "npy/f.npy", 1, "|b1", "(30, 5)", 30, 5, "descr=|b1 shape=5",
          NULL },
    };
    const size_t nt = sizeof(t) / sizeof(t[0]);
    const char *paths[8];
    brk_scan_opts_t o = { BRK_FMT_AUTO, CHUNK, 0 };
    exp_t *exp;
    brk_desc_t d;
    char err[512], dict[256], info[128];
    size_t i, r, n = 0, total = 0;
    int ret, info_ok = 1;

    mkdir_rel("npy");
    for (i = 0; i < nt; ++i) {
        total     += t[i].rows;
        t[i].data  = malloc(t[i].rows * t[i].rowbytes);
        fill(t[i].data, t[i].rows * t[i].rowbytes, 100 + (uint32_t)i);
        snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': "
                 "False, 'shape': %s, }", t[i].descr, t[i].shape);
        write_npy(t[i].rel, t[i].major, dict, t[i].data,
                  t[i].rows * t[i].rowbytes);
        paths[i] = tpath(t[i].rel);
    }
    exp = calloc(total, sizeof(*exp));
    for (i = 0; i < nt; ++i) {
        for (r = 0; r < t[i].rows; ++r, ++n) {
            exp[n].data = t[i].data + r * t[i].rowbytes;
            exp[n].len  = t[i].rowbytes;
        }
    }
    ret = brk_scan(paths, (unsigned)nt, &o, &d, err, sizeof(err));
    check("npy: scan v1, v2, v3 files", ret == 0, "%s", err);
    if (ret == 0) {
        check("npy: auto picks npy", d.format == BRK_FMT_NPY, "format %d",
              d.format);
        check("npy: one sample per row (0-d: one)", d.nsamples == total,
              "%llu samples, expected %zu", (unsigned long long)d.nsamples,
              total);
        for (i = 0; (i < nt) && (i < d.nfiles); ++i) {
            snprintf(info, sizeof(info), "%.*s", (int)d.files[i].info_len,
                     d.strings + d.files[i].info_off);
            if (strcmp(info, t[i].info) != 0) {
                info_ok = 0;
                check("npy: file info", 0, "%s: '%s', expected '%s'",
                      t[i].rel, info, t[i].info);
            }
        }
        if (info_ok) {
            check("npy: file info", 1, "%s", "");
        }
        verify_all("npy", &d, exp, total);
        /* c.npy's rows are 24000 bytes: one chunk each */
        {
            uint64_t big = 0, k;

            for (k = 0; k < d.nchunks; ++k) {
                big += (d.chunks[k].len == 24000) &&
                       (d.chunks[k].nsamples == 1);
            }
            check("npy: oversized rows alone", big == 7,
                  "%llu chunks of one 24000-byte row, expected 7",
                  (unsigned long long)big);
        }
        /* rows of one file in a chunk are one segment */
        {
            uint64_t k, bad = 0;

            for (k = 0; k < d.nchunks; ++k) {
                const brk_sample_t *s = &d.samples[d.chunks[k].first_sample];
                uint32_t files = 1, j;

                for (j = 1; j < d.chunks[k].nsamples; ++j) {
                    files += (s[j].file != s[j - 1].file);
                }
                bad += (d.chunks[k].nsegs != ((s->len > 0) ? files : 0));
            }
            check("npy: one segment per file run in a chunk", bad == 0,
                  "%llu chunks with more", (unsigned long long)bad);
        }
        brk_desc_free(&d);
    }
    for (i = 0; i < nt; ++i) {
        free(t[i].data);
        free((char*)paths[i]);
    }
    free(exp);
}

/* ---- TAR ---- */

typedef struct {
    int         n;
    const char *memb[MAX_MEMB];     /* names, as tar lists them */
    size_t      len[MAX_MEMB];
    uint8_t    *data[MAX_MEMB];
} tgroup_t;

typedef struct {
    tgroup_t g[64];
    int      ng;
    char     list[8192];            /* tar -T input: one name a line */
    size_t   listlen;
} tshard_t;

static char g_long[200];

static void tar_add(tshard_t *s, int newgroup, const char *name, size_t len,
                    uint32_t seed)
{
    tgroup_t *g;

    if (newgroup) {
        s->ng++;
    }
    g = &s->g[s->ng - 1];
    g->memb[g->n] = name;
    g->len[g->n]  = len;
    make_file(name, len, seed, &g->data[g->n]);
    g->n++;
    s->listlen += (size_t)snprintf(s->list + s->listlen,
                                   sizeof(s->list) - s->listlen, "%s\n",
                                   name + strlen("tarsrc/"));
}

static void tar_dir(tshard_t *s, const char *name)
{
    s->listlen += (size_t)snprintf(s->list + s->listlen,
                                   sizeof(s->list) - s->listlen, "%s\n",
                                   name);
}

static char *names_of(const tgroup_t *g)
{
    char *buf = calloc(1, 8192);
    int i;

    for (i = 0; i < g->n; ++i) {
        strcat(buf, g->memb[i] + strlen("tarsrc/"));
        strcat(buf, "\n");
    }
    return buf;
}

/* A sample is a tar stream of exactly its group's members. */
static int cmp_tar(const brk_desc_t *d, uint64_t i, const uint8_t *bytes,
                   void *arg)
{
    const tshard_t *s = arg;
    const tgroup_t *g = &s->g[i];
    char *p = tpath("sample.tar"), cmd[4200], *out, *want;
    size_t len, off = 0;
    int k, ret = 0;

    if (d->files[d->samples[i].file].info_len != 0) {
        ret = why("sample %llu: a tar file has info",
                  (unsigned long long)i);
        goto out;
    }
    write_file(p, bytes, d->samples[i].len);
    snprintf(cmd, sizeof(cmd), "tar -tf %s", p);
    out  = run_out(cmd, &len);
    want = names_of(g);
    if ((out == NULL) || (strcmp(out, want) != 0)) {
        ret = why("sample %llu: tar -tf lists '%s', expected '%s'",
                  (unsigned long long)i, out ? out : "(tar failed)", want);
    }
    free(out);
    free(want);
    if (ret != 0) {
        goto out;
    }
    snprintf(cmd, sizeof(cmd), "tar -xOf %s", p);
    out = run_out(cmd, &len);
    for (k = 0; (out != NULL) && (k < g->n); ++k) {
        if ((off + g->len[k] > len) ||
            memcmp(out + off, g->data[k], g->len[k])) {
            break;
        }
        off += g->len[k];
    }
    if ((out == NULL) || (k != g->n) || (off != len)) {
        ret = why("sample %llu: tar -xOf gives other bytes",
                  (unsigned long long)i);
    }
    free(out);
out:
    free(p);
    return ret;
}

static void tar_list_write(const tshard_t *s, const char *rel)
{
    char *p = tpath(rel);

    write_file(p, s->list, s->listlen);
    free(p);
}

static void tar_build(tshard_t *s)
{
    static char names[128][256];
    int k = 0, i;

    memset(s, 0, sizeof(*s));
    mkdir_rel("tarsrc");
    mkdir_rel("tarsrc/sub");
    mkdir_rel("tarsrc/sub.d");
#define N(fmt, ...) (snprintf(names[k], sizeof(names[k]), fmt, __VA_ARGS__), \
                     names[k++])
    for (i = 0; i < 30; ++i) {
        size_t jl = (i == 7) ? 25000 : 100 + (size_t)(i * 977) % 6000;

        tar_add(s, 1, N("tarsrc/%06d.jpg", i), jl, 1000 + (uint32_t)i);
        if (i == 10) {
            continue;           /* a key of one member */
        }
        tar_add(s, 0, N("tarsrc/%06d.cls", i), 1 + (size_t)i % 3,
                2000 + (uint32_t)i);
        if (i == 3) {
            tar_add(s, 0, N("tarsrc/%06d.meta.json", i), 700, 3000);
        }
        if (i == 15) {
            tar_dir(s, "sub");  /* a directory entry between samples */
        }
    }
    /* a key of 120 characters: GNU 'L' records or pax 'x' path records,
     * in the middle of its group too */
    memset(g_long, 'k', 120);
    g_long[120] = '\0';
    tar_add(s, 1, N("tarsrc/%s.jpg", g_long), 3000, 4000);
    tar_add(s, 0, N("tarsrc/%s.cls", g_long), 2, 4001);
    tar_add(s, 1, N("tarsrc/sub/%06d.txt", 100), 50, 4002);
    tar_add(s, 1, N("tarsrc/sub.d/%06d.txt", 200), 60, 4003);
    tar_add(s, 0, N("tarsrc/sub.d/%06d.cls", 200), 1, 4004);
#undef N
    tar_list_write(s, "tarsrc.list");
}

static int tar_make(const char *format, const char *out, const char *list)
{
    return run("cd %s/tarsrc && tar --format=%s --no-recursion -cf %s/%s "
               "-T %s/%s", g_dir, format, g_dir, out, g_dir, list);
}

static void test_tar_one(const tshard_t *s, const char *format,
                         const char *rel, const char *list)
{
    char err[512], name[64];
    brk_desc_t d;
    char *p = tpath(rel);
    int r;

    snprintf(name, sizeof(name), "tar %s: tar makes the shard", format);
    r = tar_make(format, rel, list);
    check(name, r == 0, "tar exit %d", r);
    r = scan1(p, BRK_FMT_AUTO, CHUNK, 0, &d, err, sizeof(err));
    snprintf(name, sizeof(name), "tar %s: scan", format);
    check(name, r == 0, "%s", err);
    if (r == 0) {
        snprintf(name, sizeof(name), "tar %s: one sample per key", format);
        check(name, (d.format == BRK_FMT_TAR) &&
              (d.nsamples == (uint64_t)s->ng), "format %d, %llu samples, "
              "expected %d", d.format, (unsigned long long)d.nsamples,
              s->ng);
        if (d.nsamples == (uint64_t)s->ng) {
            snprintf(name, sizeof(name), "tar %s: samples are tar streams "
                     "of their members", format);
            r = for_each_sample(&d, cmp_tar, (void*)s);
            check(name, r == 0, "%s", g_why);
        }
        snprintf(name, sizeof(name), "tar %s", format);
        verify_all(name, &d, NULL, 0);
        brk_desc_free(&d);
    }
    free(p);
}

/* POSIX ustar: a path over 100 bytes is split into prefix and name. */
static void test_tar_ustar(void)
{
    static tshard_t u;
    static char deep[2][256];
    char dir[256];
    int g, m;

    memset(&u, 0, sizeof(u));
    mkdir_rel("tarsrc/u");
    snprintf(dir, sizeof(dir), "tarsrc/u/%.60s", g_long);
    mkdir_rel(dir);
    snprintf(dir + strlen(dir), sizeof(dir) - strlen(dir), "/%.50s", g_long);
    mkdir_rel(dir);
    snprintf(deep[0], sizeof(deep[0]), "%s/000300.bin", dir);
    snprintf(deep[1], sizeof(deep[1]), "%s/000300.cls", dir);
    tar_add(&u, 1, "tarsrc/u/000001.jpg", 900, 5000);
    tar_add(&u, 0, "tarsrc/u/000001.cls", 1, 5001);
    tar_add(&u, 1, deep[0], 1200, 5002);
    tar_add(&u, 0, deep[1], 2, 5003);
    tar_list_write(&u, "tarsrc-u.list");
    test_tar_one(&u, "ustar", "shard-ustar.tar", "tarsrc-u.list");
    for (g = 0; g < u.ng; ++g) {
        for (m = 0; m < u.g[g].n; ++m) {
            free(u.g[g].data[m]);
        }
    }
}

static void hdr_type_nul(uint8_t *b)
{
    b[156] = '\0';
}

static void hdr_size_b256(uint8_t *b)
{
    uint64_t v = 0;
    int i;

    for (i = 124; (i < 135) && (b[i] >= '0') && (b[i] <= '7'); ++i) {
        v = v * 8 + (uint64_t)(b[i] - '0');
    }
    memset(b + 124, 0, 12);
    b[124] = 0x80;
    for (i = 135; i > 127; --i, v >>= 8) {
        b[i] = (uint8_t)v;
    }
}

/* The gnu shard with its first header edited (checksum redone) must
 * scan to the same samples. */
static void test_tar_rehdr(void (*edit)(uint8_t*), const char *what)
{
    char *a = tpath("shard-gnu.tar"), *b = tpath("shard-edit.tar");
    char err[512], name[128];
    brk_desc_t d0, d1;
    unsigned sum = 0, i;
    uint8_t *buf;
    size_t len;
    int r0, r1;

    buf = read_file(a, &len);
    edit(buf);
    memset(buf + 148, ' ', 8);
    for (i = 0; i < 512; ++i) {
        sum += buf[i];
    }
    snprintf((char*)buf + 148, 8, "%06o", sum);
    buf[155] = ' ';
    write_file(b, buf, len);
    free(buf);
    r0 = scan1(a, BRK_FMT_TAR, CHUNK, 0, &d0, err, sizeof(err));
    r1 = scan1(b, BRK_FMT_TAR, CHUNK, 0, &d1, err, sizeof(err));
    snprintf(name, sizeof(name), "tar: %s", what);
    check(name, (r0 == 0) && (r1 == 0) && (d0.nsamples == d1.nsamples) &&
          (memcmp(d0.samples, d1.samples,
                  d0.nsamples * sizeof(*d0.samples)) == 0),
          "%s", (r1 != 0) ? err : "other samples");
    if (r0 == 0) {
        brk_desc_free(&d0);
    }
    if (r1 == 0) {
        brk_desc_free(&d1);
    }
    free(a);
    free(b);
}

static void test_tar(void)
{
    static tshard_t s;
    const char *paths[2];
    brk_scan_opts_t o = { BRK_FMT_TAR, CHUNK, 0 };
    char err[512];
    brk_desc_t d;
    int r, g, m;
    size_t len;
    char *out, cmd[256];

    tar_build(&s);
    test_tar_one(&s, "gnu", "shard-gnu.tar", "tarsrc.list");
    test_tar_one(&s, "pax", "shard-pax.tar", "tarsrc.list");
    test_tar_ustar();
    test_tar_rehdr(hdr_type_nul, "typeflag NUL is a regular file");
    test_tar_rehdr(hdr_size_b256, "a base-256 size");

    /* the records the long name needs are really there */
    snprintf(cmd, sizeof(cmd), "grep -c ././@LongLink %s/shard-gnu.tar",
             g_dir);
    out = run_out(cmd, &len);
    check("tar gnu: has 'L' long-name records", out != NULL, "%s",
          "no ././@LongLink in the shard");
    free(out);
    snprintf(cmd, sizeof(cmd), "grep -c PaxHeaders %s/shard-pax.tar", g_dir);
    out = run_out(cmd, &len);
    check("tar pax: has 'x' records", out != NULL, "%s",
          "no PaxHeaders in the shard");
    free(out);

    /* two shards, one dataset */
    paths[0] = tpath("shard-gnu.tar");
    paths[1] = tpath("shard-pax.tar");
    r = brk_scan(paths, 2, &o, &d, err, sizeof(err));
    check("tar: two shards", (r == 0) && (d.nsamples == 2u * s.ng) &&
          (d.nfiles == 2), "%s", (r == 0) ? "wrong counts" : err);
    if (r == 0) {
        verify_all("tar two shards", &d, NULL, 0);
        brk_desc_free(&d);
    }
    free((char*)paths[0]);
    free((char*)paths[1]);

    for (g = 0; g < s.ng; ++g) {
        for (m = 0; m < s.g[g].n; ++m) {
            free(s.g[g].data[m]);
        }
    }
}

/* ---- RAW ---- */

static void test_raw(void)
{
    const char *paths[2];
    brk_scan_opts_t o = { BRK_FMT_RAW, CHUNK, 300 };
    uint8_t *r1, *r2;
    exp_t exp[105];
    char err[512], info[64];
    brk_desc_t d;
    int i, r;

    mkdir_rel("raw");
    make_file("raw/r1.bin", 100 * 300, 7, &r1);
    make_file("raw/r2.bin", 5 * 300, 8, &r2);
    for (i = 0; i < 105; ++i) {
        exp[i].data = (i < 100) ? r1 + i * 300 : r2 + (i - 100) * 300;
        exp[i].len  = 300;
    }
    paths[0] = tpath("raw/r1.bin");
    paths[1] = tpath("raw/r2.bin");
    r = brk_scan(paths, 2, &o, &d, err, sizeof(err));
    check("raw: scan", r == 0, "%s", err);
    if (r == 0) {
        snprintf(info, sizeof(info), "%.*s", (int)d.files[0].info_len,
                 d.strings + d.files[0].info_off);
        check("raw: file info", strcmp(info, "record=300") == 0, "'%s'",
              info);
        check("raw: 34 records a chunk",
              (d.chunks[0].nsamples == 34) && (d.chunks[0].nsegs == 1),
              "%u samples, %u segments", d.chunks[0].nsamples,
              d.chunks[0].nsegs);
        verify_all("raw", &d, exp, 105);
        brk_desc_free(&d);
    }
    free((char*)paths[0]);
    free((char*)paths[1]);
    free(r1);
    free(r2);
}

/* ---- fingerprint ---- */

static int fp_of(const char *path, uint64_t chunk, uint64_t *fp)
{
    char err[512];
    brk_desc_t d;

    if (scan1(path, BRK_FMT_FILES, chunk, 0, &d, err, sizeof(err)) != 0) {
        printf("# fingerprint scan: %s\n", err);
        return -1;
    }
    *fp = d.fingerprint;
    brk_desc_free(&d);
    return 0;
}

static void test_fingerprint(void)
{
    char *dir = tpath("files"), *f = tpath("files/a/x");
    uint64_t a = 0, b = 1, c = 2, e = 3, g = 4, h = 5;
    struct timespec ts[2];
    struct stat st;
    int fd;

    fp_of(dir, CHUNK, &a);
    fp_of(dir, CHUNK, &b);
    check("fingerprint: same inputs, same value", a == b, "%llx vs %llx",
          (unsigned long long)a, (unsigned long long)b);
    stat(f, &st);
    ts[0]         = st.st_atim;
    ts[1]         = st.st_mtim;
    ts[1].tv_sec -= 3600;
    utimensat(AT_FDCWD, f, ts, 0);
    fp_of(dir, CHUNK, &c);
    check("fingerprint: mtime change", c != a, "unchanged %llx",
          (unsigned long long)c);
    ts[1] = st.st_mtim;
    utimensat(AT_FDCWD, f, ts, 0);
    fp_of(dir, CHUNK, &e);
    check("fingerprint: mtime restored, value back", e == a, "%llx vs %llx",
          (unsigned long long)e, (unsigned long long)a);
    fd = open(f, O_WRONLY | O_APPEND);
    if ((fd < 0) || (write(fd, "z", 1) != 1)) {
        perror("append");
    }
    close(fd);
    utimensat(AT_FDCWD, f, ts, 0);  /* the same mtime: only the size */
    fp_of(dir, CHUNK, &g);
    check("fingerprint: size change", g != a, "unchanged %llx",
          (unsigned long long)g);
    fp_of(dir, 2 * CHUNK, &h);
    check("fingerprint: chunk size change", h != g, "unchanged %llx",
          (unsigned long long)h);
    free(dir);
    free(f);
}

/* ---- meta_check on bad blobs ---- */

static void meta_recrc(uint8_t *b, uint64_t len)
{
    uint32_t crc = 0;

    memcpy(b + offsetof(brk_meta_t, crc), &crc, sizeof(crc));
    crc = cxlpool_crc32c(0, b, len);
    memcpy(b + offsetof(brk_meta_t, crc), &crc, sizeof(crc));
}

static int meta_reject(const uint8_t *blob, uint64_t len, uint64_t uselen,
                       void (*edit)(uint8_t*, const brk_meta_t*), int recrc,
                       const char *needle, char *err, size_t errlen)
{
    uint8_t *b = malloc(len);
    brk_meta_t h;
    int r;

    memcpy(b, blob, len);
    memcpy(&h, b, sizeof(h));
    if (edit != NULL) {
        edit(b, &h);
    }
    if (recrc) {
        meta_recrc(b, len);
    }
    err[0] = '\0';
    r = brk_meta_check(b, uselen, err, errlen);
    free(b);
    return (r == -1) && (strstr(err, needle) != NULL);
}

static void ed_flip(uint8_t *b, const brk_meta_t *h)
{
    b[h->len / 2] ^= 0x10;
}

static void ed_sample_off(uint8_t *b, const brk_meta_t *h)
{
    brk_sample_t s;
    brk_chunk_t c;

    memcpy(&s, b + h->samples_off, sizeof(s));
    memcpy(&c, b + h->chunks_off + s.chunk * sizeof(c), sizeof(c));
    s.off = c.len - s.len + 1;
    memcpy(b + h->samples_off, &s, sizeof(s));
}

static void ed_sample_huge(uint8_t *b, const brk_meta_t *h)
{
    brk_sample_t s;

    memcpy(&s, b + h->samples_off, sizeof(s));
    s.off = UINT64_MAX - 2;   /* off + len wraps */
    memcpy(b + h->samples_off, &s, sizeof(s));
}

static void ed_count(uint8_t *b, const brk_meta_t *h)
{
    brk_meta_t m = *h;

    m.nsamples = UINT64_MAX / sizeof(brk_sample_t) + 2;  /* * 24 wraps */
    memcpy(b, &m, sizeof(m));
}

static void ed_seg_file(uint8_t *b, const brk_meta_t *h)
{
    brk_seg_t g;
    brk_file_t f;

    memcpy(&g, b + h->segs_off, sizeof(g));
    memcpy(&f, b + h->files_off + g.file * sizeof(f), sizeof(f));
    g.file_off = f.size;
    memcpy(b + h->segs_off, &g, sizeof(g));
}

static void ed_chunk_order(uint8_t *b, const brk_meta_t *h)
{
    brk_chunk_t c;

    memcpy(&c, b + h->chunks_off + sizeof(c), sizeof(c));
    c.first_sample++;
    memcpy(b + h->chunks_off + sizeof(c), &c, sizeof(c));
}

static void ed_path(uint8_t *b, const brk_meta_t *h)
{
    brk_file_t f;

    memcpy(&f, b + h->files_off, sizeof(f));
    f.path_off = (uint32_t)h->strings_len;
    memcpy(b + h->files_off, &f, sizeof(f));
}

static void ed_magic(uint8_t *b, const brk_meta_t *h)
{
    (void)h;
    b[0] ^= 1;
}

static void test_meta(void)
{
    char *p = tpath("raw/r1.bin"), err[512];
    brk_desc_t d;
    uint8_t *b;
    uint64_t len;
    int r;

    r = scan1(p, BRK_FMT_RAW, CHUNK, 300, &d, err, sizeof(err));
    free(p);
    if (r != 0) {
        check("meta: scan", 0, "%s", err);
        return;
    }
    len = brk_desc_meta_size(&d);
    b   = malloc(len);
    brk_desc_write_meta(&d, b);
    check("meta: fresh blob passes",
          brk_meta_check(b, len, err, sizeof(err)) == 0, "%s", err);
    check("meta: rejects a flipped byte (crc)",
          meta_reject(b, len, len, ed_flip, 0, "crc", err, sizeof(err)),
          "'%s'", err);
    check("meta: rejects bad magic",
          meta_reject(b, len, len, ed_magic, 1, "magic", err, sizeof(err)),
          "'%s'", err);
    check("meta: rejects a truncated blob",
          meta_reject(b, len, len - 8, NULL, 0, "truncated", err,
                      sizeof(err)), "'%s'", err);
    check("meta: rejects a blob shorter than its header",
          meta_reject(b, len, 20, NULL, 0, "header", err, sizeof(err)),
          "'%s'", err);
    check("meta: rejects a sample past its chunk",
          meta_reject(b, len, len, ed_sample_off, 1, "sample 0", err,
                      sizeof(err)), "'%s'", err);
    check("meta: rejects a sample offset that wraps",
          meta_reject(b, len, len, ed_sample_huge, 1, "sample 0", err,
                      sizeof(err)), "'%s'", err);
    check("meta: rejects a count that overflows",
          meta_reject(b, len, len, ed_count, 1, "outside", err,
                      sizeof(err)), "'%s'", err);
    check("meta: rejects a segment past its file",
          meta_reject(b, len, len, ed_seg_file, 1, "outside file", err,
                      sizeof(err)), "'%s'", err);
    check("meta: rejects chunks out of order",
          meta_reject(b, len, len, ed_chunk_order, 1, "chunk 1", err,
                      sizeof(err)), "'%s'", err);
    check("meta: rejects a path outside the strings",
          meta_reject(b, len, len, ed_path, 1, "strings", err, sizeof(err)),
          "'%s'", err);
    free(b);
    brk_desc_free(&d);
}

/* ---- bad inputs ---- */

static int is_zero(const brk_desc_t *d)
{
    static const brk_desc_t z;

    return memcmp(d, &z, sizeof(z)) == 0;
}

static void expect_err(const char *name, const char *path, brk_format_t fmt,
                       uint64_t record, const char *needle)
{
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char err[512];
    brk_desc_t d;
    int r;

    memset(err, 0, sizeof(err));
    r = scan1(path, fmt, CHUNK, record, &d, err, sizeof(err));
    check(name, (r == -1) && is_zero(&d) && (strstr(err, base) != NULL) &&
          ((needle == NULL) || (strstr(err, needle) != NULL)) &&
          (strchr(err, '\n') == NULL),
          "ret %d, error '%s' (want the name %s%s%s)", r, err, base,
          needle ? " and " : "", needle ? needle : "");
    if (r == 0) {
        brk_desc_free(&d);
    }
}

static void copy_cut(const char *from, const char *to, size_t cut,
                     size_t flip)
{
    char *a = tpath(from), *b = tpath(to);
    uint8_t *buf;
    size_t len;

    buf = read_file(a, &len);
    if (buf == NULL) {
        abort();
    }
    if (flip < len) {
        buf[flip] ^= 0x01;
    }
    write_file(b, buf, (cut < len) ? cut : len);
    free(buf);
    free(a);
    free(b);
}

/*
 * Root reads a mode-000 file, so as root the check runs in a child that
 * became nobody; where that is not allowed it is skipped, with a note.
 */
static void unreadable_as_nobody(const char *path)
{
    const char *name = "err: unreadable file (as uid 65534)";
    int status = 0;
    pid_t pid;

    chmod(g_dir, 0711);         /* nobody must reach the file itself */
    pid = fork();
    if (pid == 0) {
        char err[512] = "";
        brk_desc_t d;
        int r;

        if ((setgroups(0, NULL) != 0) || (setgid(65534) != 0) ||
            (setuid(65534) != 0)) {
            _exit(77);
        }
        r = scan1(path, BRK_FMT_FILES, CHUNK, 0, &d, err, sizeof(err));
        printf("# %s: %s\n", name, err);
        _exit(((r == -1) && (strstr(err, "bad/locked") != NULL) &&
               (strstr(err, "cannot open") != NULL)) ? 0 : 1);
    }
    if ((pid < 0) || (waitpid(pid, &status, 0) != pid)) {
        status = -1;
    }
    chmod(g_dir, 0700);
    if (WIFEXITED(status) && (WEXITSTATUS(status) == 77)) {
        printf("# note: %s skipped: running as root and cannot become "
               "nobody, and root reads a mode-000 file\n", name);
        return;
    }
    check(name, WIFEXITED(status) && (WEXITSTATUS(status) == 0),
          "child status 0x%x", status);
}

static void test_errors(void)
{
    uint8_t data[1000];
    char *p, dict[256], need[128];
    size_t off2;

    mkdir_rel("bad");
    p = tpath("bad/missing-file");
    expect_err("err: missing path", p, BRK_FMT_AUTO, 0, "No such file");
    free(p);
    p = tpath("bad/missing.npy");
    expect_err("err: missing .npy", p, BRK_FMT_AUTO, 0, NULL);
    free(p);
    p = tpath("bad/missing.tar");
    expect_err("err: missing .tar", p, BRK_FMT_AUTO, 0, NULL);
    free(p);

    make_file("bad/locked", 100, 1, NULL);
    p = tpath("bad/locked");
    chmod(p, 0);
    if (geteuid() != 0) {
        expect_err("err: unreadable file", p, BRK_FMT_FILES, 0,
                   "cannot open");
    } else {
        unreadable_as_nobody(p);
    }
    chmod(p, 0644);
    free(p);

    /* tar: the first member (000000.jpg, 100 bytes) is cut after 50 */
    copy_cut("shard-gnu.tar", "bad/cut-member.tar", 512 + 50, SIZE_MAX);
    p = tpath("bad/cut-member.tar");
    expect_err("err: tar cut mid-member", p, BRK_FMT_AUTO, 0,
               "truncated shard");
    free(p);
    copy_cut("shard-gnu.tar", "bad/cut-header.tar", 512 * 7 + 100, SIZE_MAX);
    p = tpath("bad/cut-header.tar");
    expect_err("err: tar cut elsewhere", p, BRK_FMT_AUTO, 0,
               "truncated shard");
    free(p);
    copy_cut("shard-gnu.tar", "bad/csum0.tar", SIZE_MAX, 3);
    p = tpath("bad/csum0.tar");
    expect_err("err: tar bad checksum (first header)", p, BRK_FMT_AUTO, 0,
               "does not parse (bad header checksum at offset 0)");
    free(p);
    /* the second header: after 000000.jpg's 100 bytes, padded to 512 */
    off2 = 512 + 512;
    copy_cut("shard-gnu.tar", "bad/csum1.tar", SIZE_MAX, off2 + 2);
    p = tpath("bad/csum1.tar");
    snprintf(need, sizeof(need), "bad header checksum at offset %zu", off2);
    expect_err("err: tar bad checksum (second header)", p, BRK_FMT_AUTO, 0,
               need);
    free(p);
    p = tpath("tarsrc");
    expect_err("err: tar format given a directory", p, BRK_FMT_TAR, 0,
               "directory");
    free(p);

    /* npy */
    fill(data, sizeof(data), 5);
    snprintf(dict, sizeof(dict), "{'descr': '<f4', 'fortran_order': False, "
             "'shape': (250,), }");
    write_npy("bad/magic.npy", 1, dict, data, sizeof(data));
    copy_cut("bad/magic.npy", "bad/magic2.npy", SIZE_MAX, 1);
    p = tpath("bad/magic2.npy");
    expect_err("err: npy bad magic", p, BRK_FMT_AUTO, 0, "magic");
    free(p);
    write_npy("bad/short.npy", 1, dict, data, sizeof(data) - 10);
    p = tpath("bad/short.npy");
    expect_err("err: npy truncated data", p, BRK_FMT_AUTO, 0,
               "truncated: 990 bytes of data, header says 1000");
    free(p);
    snprintf(dict, sizeof(dict), "{'descr': '<f4', 'fortran_order': True, "
             "'shape': (25, 10), }");
    write_npy("bad/fortran.npy", 1, dict, data, sizeof(data));
    p = tpath("bad/fortran.npy");
    expect_err("err: npy fortran_order True", p, BRK_FMT_AUTO, 0,
               "fortran_order");
    free(p);
    snprintf(dict, sizeof(dict), "{'descr': [('a', '<f4'), ('b', '<i4')], "
             "'fortran_order': False, 'shape': (125,), }");
    write_npy("bad/struct.npy", 1, dict, data, sizeof(data));
    p = tpath("bad/struct.npy");
    expect_err("err: npy structured dtype", p, BRK_FMT_AUTO, 0,
               "unsupported dtype");
    free(p);
    snprintf(dict, sizeof(dict), "{'descr': '|O', 'fortran_order': False, "
             "'shape': (125,), }");
    write_npy("bad/object.npy", 1, dict, data, sizeof(data));
    p = tpath("bad/object.npy");
    expect_err("err: npy object dtype", p, BRK_FMT_AUTO, 0,
               "unsupported dtype");
    free(p);
    snprintf(dict, sizeof(dict), "{'descr': '<f4', 'fortran_order': False, "
             "'shape': (250,) ");
    write_npy("bad/dict.npy", 2, dict, data, sizeof(data));
    p = tpath("bad/dict.npy");
    expect_err("err: npy header does not parse", p, BRK_FMT_AUTO, 0,
               "does not parse");
    free(p);

    /* raw */
    make_file("bad/odd.raw", 1001, 2, NULL);
    p = tpath("bad/odd.raw");
    expect_err("err: raw size not a multiple", p, BRK_FMT_RAW, 100,
               "size 1001 is not a multiple of the record size 100");
    expect_err("err: raw without a record size", p, BRK_FMT_RAW, 0,
               "record size");
    free(p);

    /* directories */
    mkdir_rel("bad/empty");
    p = tpath("bad/empty");
    expect_err("err: empty directory", p, BRK_FMT_AUTO, 0, "no samples in");
    free(p);
    mkdir_rel("bad/dangling");
    p = tpath("bad/dangling/gone");
    symlink("nowhere", p);
    free(p);
    p = tpath("bad/dangling");
    {
        char err[512];
        brk_desc_t d;
        int r = scan1(p, BRK_FMT_FILES, CHUNK, 0, &d, err, sizeof(err));

        check("err: dangling symlink in a directory",
              (r == -1) && (strstr(err, "dangling/gone") != NULL), "ret %d "
              "'%s'", r, err);
    }
    free(p);
    mkdir_rel("bad/loop");
    p = tpath("bad/loop/self");
    symlink("..", p);
    free(p);
    p = tpath("bad/loop");
    {
        char err[512];
        brk_desc_t d;
        int r = scan1(p, BRK_FMT_FILES, CHUNK, 0, &d, err, sizeof(err));

        check("err: symlink loop", (r == -1) && (strstr(err, "loop") != NULL),
              "ret %d '%s'", r, err);
    }
    free(p);
}

static void test_names(void)
{
    brk_format_t f;
    brk_policy_t p;
    int ok = 1, i;

    for (i = BRK_FMT_AUTO; i < BRK_FMT_LAST; ++i) {
        ok = ok && (brk_format_parse(brk_format_name((brk_format_t)i), &f) ==
                    0) && (f == (brk_format_t)i);
    }
    for (i = BRK_POLICY_PIN; i < BRK_POLICY_LAST; ++i) {
        ok = ok && (brk_policy_parse(brk_policy_name((brk_policy_t)i), &p) ==
                    0) && (p == (brk_policy_t)i);
    }
    ok = ok && (strcmp(brk_format_name(BRK_FMT_NPY), "npy") == 0) &&
         (strcmp(brk_policy_name(BRK_POLICY_PLAN), "plan") == 0) &&
         (brk_format_parse("zip", &f) == -1) &&
         (brk_policy_parse("mru", &p) == -1);
    check("names: formats and policies round trip", ok, "%s", "mismatch");
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);   /* lines in order with tar's */
    strcpy(g_dir, "/tmp/brk_scan.XXXXXX");
    if (mkdtemp(g_dir) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    test_names();
    test_files();
    test_npy();
    test_tar();
    test_raw();
    test_fingerprint();
    test_meta();
    test_errors();
    if (run("rm -rf %s", g_dir) != 0) {
        fprintf(stderr, "could not remove %s\n", g_dir);
    }
    printf("brk_scan: %d passed, %d failed\n", g_pass, g_fail);
    return (g_fail == 0) ? 0 : 1;
}
