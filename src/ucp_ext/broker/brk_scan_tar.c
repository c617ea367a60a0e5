/*
 * TAR: WebDataset shards in ustar, GNU or pax format.  The shard is read
 * header by header (512-byte blocks); member data is skipped, not read,
 * except the data of GNU long-name ('L') and pax ('x') records, which name
 * the next member.  Consecutive regular members with the same key (the
 * path up to the first '.' of its last component) are one sample, whose
 * bytes run from the first member's first header block (its 'L'/'x'
 * records included) to the end of the last member's padded data: a small
 * tar stream that tar itself reads.  The end is two zero blocks, or EOF at
 * a block boundary.  Anything else that does not add up is an error: a
 * shard that parses halfway would silently lose samples.
 */
#include "brk_scan_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BRK_TAR_BLOCK    512u
#define BRK_TAR_MAX_EXT  (1u << 20)     /* an 'L' or 'x' record's data */
#define BRK_TAR_NONE     UINT64_MAX

/* ustar header fields: offsets and lengths */
#define BRK_TAR_NAME     0
#define BRK_TAR_NAME_LEN 100
#define BRK_TAR_SIZE     124
#define BRK_TAR_SIZE_LEN 12
#define BRK_TAR_CSUM     148
#define BRK_TAR_CSUM_LEN 8
#define BRK_TAR_TYPE     156
#define BRK_TAR_MAGIC    257
#define BRK_TAR_PREFIX   345
#define BRK_TAR_PREFIX_LEN 155

typedef struct {
    brk_scan_ctx_t *ctx;
    const char     *path;
    int             fd;
    uint64_t        fsize;
    uint32_t        file;
    /* extended records ('L', 'K', 'x') waiting for their member */
    uint64_t        ext_start;      /* BRK_TAR_NONE: none */
    char           *long_name;
    char           *pax_path;
    uint64_t        pax_size;       /* BRK_TAR_NONE: none */
    /* the sample being grouped */
    char           *key;
    uint64_t        group_start, group_end;
} brk_tar_t;

static void brk_tar_ext_clear(brk_tar_t *t)
{
    free(t->long_name);
    free(t->pax_path);
    t->long_name = NULL;
    t->pax_path  = NULL;
    t->pax_size  = BRK_TAR_NONE;
    t->ext_start = BRK_TAR_NONE;
}

/* Octal digits, space or NUL padded. */
static int brk_tar_octal(const unsigned char *f, size_t n, uint64_t *v)
{
    uint64_t x = 0;
    size_t i = 0;
    int digits = 0;

    while ((i < n) && (f[i] == ' ')) {
        ++i;
    }
    for (; (i < n) && (f[i] >= '0') && (f[i] <= '7'); ++i, ++digits) {
        if (x >> 60) {
            return -1;
        }
        x = (x << 3) | (uint64_t)(f[i] - '0');
    }
    for (; i < n; ++i) {
        if ((f[i] != ' ') && (f[i] != '\0')) {
            return -1;
        }
    }
    *v = x;
    return (digits > 0) ? 0 : -1;
}

/* A size: octal, or GNU base-256 (high bit of the first byte set). */
static int brk_tar_size(const unsigned char *f, size_t n, uint64_t *v)
{
    uint64_t x;
    size_t i;

    if (!(f[0] & 0x80)) {
        return brk_tar_octal(f, n, v);
    }
    if (f[0] & 0x40) {
        return -1;                      /* negative */
    }
    x = f[0] & 0x3f;
    for (i = 1; i < n; ++i) {
        if (x >> 55) {
            return -1;                  /* past 2^63: no file is that big */
        }
        x = (x << 8) | f[i];
    }
    *v = x;
    return 0;
}

static int brk_tar_csum_ok(const unsigned char *b)
{
    uint64_t want, usum = 0;
    int64_t ssum = 0;
    unsigned i;

    if (brk_tar_octal(b + BRK_TAR_CSUM, BRK_TAR_CSUM_LEN, &want) != 0) {
        return 0;
    }
    for (i = 0; i < BRK_TAR_BLOCK; ++i) {
        unsigned char c = ((i >= BRK_TAR_CSUM) &&
                           (i < BRK_TAR_CSUM + BRK_TAR_CSUM_LEN)) ? ' ' : b[i];

        usum += c;
        ssum += (signed char)c;     /* some old tars summed signed bytes */
    }
    return (want == usum) || ((int64_t)want == ssum);
}

static int brk_tar_zero(const unsigned char *b)
{
    unsigned i;

    for (i = 0; i < BRK_TAR_BLOCK; ++i) {
        if (b[i] != 0) {
            return 0;
        }
    }
    return 1;
}

/* The header's own name: prefix "/" name for POSIX ustar. */
static void brk_tar_hdr_name(const unsigned char *b, char *name)
{
    size_t n = 0, m;

    if (memcmp(b + BRK_TAR_MAGIC, "ustar\0", 6) == 0) {
        m = strnlen((const char*)b + BRK_TAR_PREFIX, BRK_TAR_PREFIX_LEN);
        if (m > 0) {
            memcpy(name, b + BRK_TAR_PREFIX, m);
            name[m] = '/';
            n = m + 1;
        }
    }
    m = strnlen((const char*)b + BRK_TAR_NAME, BRK_TAR_NAME_LEN);
    memcpy(name + n, b + BRK_TAR_NAME, m);
    name[n + m] = '\0';
}

/* Read the data of an extended record into a NUL-terminated buffer. */
static int brk_tar_ext_data(brk_tar_t *t, uint64_t off, uint64_t size,
                            char **out)
{
    char *buf;

    if (size > BRK_TAR_MAX_EXT) {
        return brk_scan_err(t->ctx, "%s: does not parse (an extended header "
                            "of %llu bytes at offset %llu)", t->path,
                            (unsigned long long)size,
                            (unsigned long long)off);
    }
    buf = malloc(size + 1);
    if (buf == NULL) {
        return brk_scan_err(t->ctx, "%s: out of memory", t->path);
    }
    if (brk_scan_pread(t->ctx, t->fd, t->path, buf, size,
                       off + BRK_TAR_BLOCK) != 0) {
        free(buf);
        return -1;
    }
    buf[size] = '\0';
    *out = buf;
    return 0;
}

/* pax records: "LEN key=value\n", LEN counting the whole record. */
static int brk_tar_pax(brk_tar_t *t, uint64_t off, const char *d, size_t n)
{
    const char *rec = d, *key, *eq, *val, *nl, *p;
    unsigned long long v;
    size_t len;
    char *end;

    while (rec < d + n) {
        len = 0;
        for (p = rec; (p < d + n) && (*p >= '0') && (*p <= '9'); ++p) {
            len = len * 10 + (size_t)(*p - '0');
            if (len > n) {
                goto bad;
            }
        }
        if ((p == rec) || (p >= d + n) || (*p != ' ') || (len > n) ||
            ((size_t)(rec - d) > n - len)) {
            goto bad;
        }
        key = p + 1;
        nl  = rec + len - 1;
        if ((nl < key) || (*nl != '\n')) {
            goto bad;
        }
        eq = memchr(key, '=', (size_t)(nl - key));
        if (eq == NULL) {
            goto bad;
        }
        val = eq + 1;
        if (((size_t)(eq - key) == 4) && (memcmp(key, "path", 4) == 0)) {
            free(t->pax_path);
            t->pax_path = strndup(val, (size_t)(nl - val));
            if (t->pax_path == NULL) {
                return brk_scan_err(t->ctx, "%s: out of memory", t->path);
            }
        } else if (((size_t)(eq - key) == 4) &&
                   (memcmp(key, "size", 4) == 0)) {
            if ((*val < '0') || (*val > '9')) {
                goto bad;
            }
            v = strtoull(val, &end, 10);
            if ((end != nl) || (v > INT64_MAX)) {
                goto bad;
            }
            t->pax_size = v;
        }
        rec += len;
    }
    return 0;

bad:
    return brk_scan_err(t->ctx, "%s: does not parse (a bad pax record in "
                        "the extended header at offset %llu)", t->path,
                        (unsigned long long)off);
}

/* type in set?  (strchr would find a NUL type in any set) */
static int brk_tar_type_in(int type, const char *set)
{
    return (type != '\0') && (strchr(set, type) != NULL);
}

/* Emit the sample being grouped, if any. */
static int brk_tar_flush(brk_tar_t *t)
{
    int ret = 0;

    if (t->key != NULL) {
        ret = brk_desc_add_sample(t->ctx, t->file, t->group_start,
                                  t->group_end - t->group_start);
        free(t->key);
        t->key = NULL;
    }
    return ret;
}

/* A regular member whose headers start at start and data ends at end. */
static int brk_tar_member(brk_tar_t *t, const char *name, uint64_t start,
                          uint64_t end)
{
    const char *last = strrchr(name, '/'), *dot;
    size_t klen;

    last = (last != NULL) ? last + 1 : name;
    dot  = strchr(last, '.');
    klen = (dot != NULL) ? (size_t)(dot - name) : strlen(name);
    if ((t->key != NULL) && (start == t->group_end) &&
        (strlen(t->key) == klen) && (memcmp(t->key, name, klen) == 0)) {
        t->group_end = end;
        return 0;
    }
    if (brk_tar_flush(t) != 0) {
        return -1;
    }
    t->key = strndup(name, klen);
    if (t->key == NULL) {
        return brk_scan_err(t->ctx, "%s: out of memory", t->path);
    }
    t->group_start = start;
    t->group_end   = end;
    return 0;
}

/*
 * One header at off: *next is the offset after its data, or BRK_TAR_NONE
 * at the end of the archive.
 */
static int brk_tar_header(brk_tar_t *t, uint64_t off, uint64_t *next)
{
    unsigned char b[BRK_TAR_BLOCK];
    char hname[BRK_TAR_PREFIX_LEN + 1 + BRK_TAR_NAME_LEN + 1];
    const char *name;
    uint64_t size, padded;
    char *data = NULL;
    int type, ret = 0;

    if (t->fsize - off < BRK_TAR_BLOCK) {
        return brk_scan_err(t->ctx, "%s: truncated shard (a partial header "
                            "at offset %llu)", t->path,
                            (unsigned long long)off);
    }
    if (brk_scan_pread(t->ctx, t->fd, t->path, b, sizeof(b), off) != 0) {
        return -1;
    }
    if (brk_tar_zero(b)) {
        /* the end: a second zero block, or EOF right after this one */
        if (t->fsize - off >= 2 * BRK_TAR_BLOCK) {
            if (brk_scan_pread(t->ctx, t->fd, t->path, b, sizeof(b),
                               off + BRK_TAR_BLOCK) != 0) {
                return -1;
            }
            if (!brk_tar_zero(b)) {
                return brk_scan_err(t->ctx, "%s: does not parse (a lone "
                                    "zero block at offset %llu)", t->path,
                                    (unsigned long long)off);
            }
        }
        *next = BRK_TAR_NONE;
        return 0;
    }
    if (!brk_tar_csum_ok(b)) {
        return brk_scan_err(t->ctx, "%s: does not parse (bad header checksum "
                            "at offset %llu)", t->path,
                            (unsigned long long)off);
    }
    if (brk_tar_size(b + BRK_TAR_SIZE, BRK_TAR_SIZE_LEN, &size) != 0) {
        return brk_scan_err(t->ctx, "%s: does not parse (bad size field at "
                            "offset %llu)", t->path, (unsigned long long)off);
    }
    type = b[BRK_TAR_TYPE];
    brk_tar_hdr_name(b, hname);
    name = (t->pax_path != NULL) ? t->pax_path :
           (t->long_name != NULL) ? t->long_name : hname;
    if (!brk_tar_type_in(type, "LKxg") && (t->pax_size != BRK_TAR_NONE)) {
        size = t->pax_size;     /* a member over 8 GiB */
    }
    if (brk_tar_type_in(type, "12346")) {
        size = 0;               /* links and devices have no data blocks */
    }
    padded = (size + BRK_TAR_BLOCK - 1) / BRK_TAR_BLOCK * BRK_TAR_BLOCK;
    if (padded > t->fsize - off - BRK_TAR_BLOCK) {
        return brk_scan_err(t->ctx, "%s: truncated shard (member '%s' at "
                            "offset %llu has %llu bytes of data, the shard "
                            "ends %llu bytes after its header)", t->path,
                            name, (unsigned long long)off,
                            (unsigned long long)size,
                            (unsigned long long)(t->fsize - off -
                                                 BRK_TAR_BLOCK));
    }
    *next = off + BRK_TAR_BLOCK + padded;

    switch (type) {
    case 'L':                   /* GNU: the next member's long name */
    case 'x':                   /* pax: the next member's attributes */
        if (brk_tar_ext_data(t, off, size, &data) != 0) {
            return -1;
        }
        if (type == 'L') {
            free(t->long_name);
            t->long_name = data;    /* NUL-terminated in its data */
            ret          = 0;
        } else {
            ret = brk_tar_pax(t, off, data, size);
            free(data);
        }
        /* fall through */
    case 'K':                   /* GNU: a long link name, nothing to keep */
        if (t->ext_start == BRK_TAR_NONE) {
            t->ext_start = off;
        }
        return (type == 'K') ? 0 : ret;
    case 'g':                   /* pax global header: no member's */
        return 0;
    case 'S':
    case 'M':
        return brk_scan_err(t->ctx, "%s: unsupported member '%s' at offset "
                            "%llu (GNU %s)", t->path, name,
                            (unsigned long long)off,
                            (type == 'S') ? "sparse file" : "multi-volume");
    case '0':
    case '7':
    case '\0':
        /* old tars mark a directory only by the trailing '/' */
        if ((type != '\0') || (name[0] == '\0') ||
            (name[strlen(name) - 1] != '/')) {
            ret = brk_tar_member(t, name, (t->ext_start != BRK_TAR_NONE) ?
                                 t->ext_start : off, *next);
            brk_tar_ext_clear(t);
            return ret;
        }
        /* fall through */
    default:                    /* directories, links, devices, labels */
        brk_tar_ext_clear(t);
        return brk_tar_flush(t);
    }
}

int brk_scan_tar(brk_scan_ctx_t *ctx, const char *path)
{
    brk_tar_t t;
    struct stat st;
    uint64_t off = 0;
    int ret = 0;

    memset(&t, 0, sizeof(t));
    t.ctx       = ctx;
    t.path      = path;
    t.ext_start = BRK_TAR_NONE;
    t.pax_size  = BRK_TAR_NONE;
    t.fd        = brk_scan_open(ctx, path, &st);
    if (t.fd < 0) {
        return -1;
    }
    t.fsize = (uint64_t)st.st_size;
    ret = brk_desc_add_file(ctx, path, &st, NULL, &t.file);
    while ((ret == 0) && (off != BRK_TAR_NONE) && (off < t.fsize)) {
        ret = brk_tar_header(&t, off, &off);
    }
    if ((ret == 0) && (t.ext_start != BRK_TAR_NONE)) {
        ret = brk_scan_err(ctx, "%s: truncated shard (an extended header at "
                           "offset %llu and no member after it)", path,
                           (unsigned long long)t.ext_start);
    }
    if (ret == 0) {
        ret = brk_tar_flush(&t);
    }
    free(t.key);
    brk_tar_ext_clear(&t);
    close(t.fd);
    return ret;
}
