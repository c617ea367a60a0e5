/*
 * NPY: "\x93NUMPY", version major.minor, the header length (2 bytes LE in
 * 1.x, 4 in 2.x and 3.x), then a Python dict literal with exactly the keys
 * 'descr', 'fortran_order' and 'shape', then the data.  One sample per row
 * (shape[0] rows of shape[1:]), a 0-d array is one sample.  Only simple
 * descrs ('<f4', '|u1', ...): a structured or object dtype has no fixed
 * meaning as bytes for the reader, so it is refused, not guessed at.
 */
#include "brk_scan_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BRK_NPY_MAX_HEADER (1u << 20)   /* numpy writes a few hundred */
#define BRK_NPY_MAX_DIMS   64           /* numpy's NPY_MAXDIMS */
#define BRK_NPY_DESCR_MAX  32
#define BRK_NPY_MAX_EMPTY_ROWS (1u << 20)

typedef struct {
    char     descr[BRK_NPY_DESCR_MAX];
    int      have_descr, have_fortran, have_shape;
    int      fortran;
    unsigned ndim;
    uint64_t shape[BRK_NPY_MAX_DIMS];
    uint64_t itemsize;
} brk_npy_hdr_t;

typedef struct {
    const char *p, *end;
    const char *why;            /* what did not parse */
} brk_npy_lex_t;

static void brk_npy_ws(brk_npy_lex_t *x)
{
    while ((x->p < x->end) && isspace((unsigned char)*x->p)) {
        ++x->p;
    }
}

static int brk_npy_eat(brk_npy_lex_t *x, char c)
{
    brk_npy_ws(x);
    if ((x->p < x->end) && (*x->p == c)) {
        ++x->p;
        return 1;
    }
    return 0;
}

/* A quoted string without escapes (numpy never writes any in a header). */
static int brk_npy_string(brk_npy_lex_t *x, char *buf, size_t size)
{
    const char *s;
    char q;

    brk_npy_ws(x);
    if ((x->p >= x->end) || ((*x->p != '\'') && (*x->p != '"'))) {
        x->why = "a string expected";
        return -1;
    }
    q = *x->p++;
    for (s = x->p; (x->p < x->end) && (*x->p != q); ++x->p) {
        if (*x->p == '\\') {
            x->why = "an escape in a string";
            return -1;
        }
    }
    if (x->p >= x->end) {
        x->why = "an unterminated string";
        return -1;
    }
    if ((size_t)(x->p - s) >= size) {
        x->why = "a string too long";
        return -1;
    }
    memcpy(buf, s, (size_t)(x->p - s));
    buf[x->p - s] = '\0';
    ++x->p;
    return 0;
}

static int brk_npy_word(brk_npy_lex_t *x, const char *w)
{
    size_t n = strlen(w);

    brk_npy_ws(x);
    if (((size_t)(x->end - x->p) >= n) && (memcmp(x->p, w, n) == 0)) {
        x->p += n;
        return 1;
    }
    return 0;
}

static int brk_npy_uint(brk_npy_lex_t *x, uint64_t *v)
{
    uint64_t n = 0;
    int digits = 0;

    brk_npy_ws(x);
    while ((x->p < x->end) && isdigit((unsigned char)*x->p)) {
        if (n > (UINT64_MAX - 9) / 10) {
            x->why = "a dimension too large";
            return -1;
        }
        n = n * 10 + (uint64_t)(*x->p++ - '0');
        ++digits;
    }
    /* Python 2 numpy wrote longs as "3L" */
    if ((x->p < x->end) && (*x->p == 'L')) {
        ++x->p;
    }
    if (digits == 0) {
        x->why = "a dimension expected";
        return -1;
    }
    *v = n;
    return 0;
}

/* (d0, d1, ...), with an optional trailing comma, () for 0-d. */
static int brk_npy_shape(brk_npy_lex_t *x, brk_npy_hdr_t *h)
{
    if (!brk_npy_eat(x, '(')) {
        x->why = "shape is not a tuple";
        return -1;
    }
    h->ndim = 0;
    while (!brk_npy_eat(x, ')')) {
        if (h->ndim == BRK_NPY_MAX_DIMS) {
            x->why = "more than 64 dimensions";
            return -1;
        }
        if (brk_npy_uint(x, &h->shape[h->ndim]) != 0) {
            return -1;
        }
        ++h->ndim;
        if (!brk_npy_eat(x, ',')) {
            if (!brk_npy_eat(x, ')')) {
                x->why = "shape tuple not closed";
                return -1;
            }
            break;
        }
    }
    return 0;
}

static int brk_npy_dict(brk_npy_lex_t *x, brk_npy_hdr_t *h, int *structured)
{
    char key[32];

    if (!brk_npy_eat(x, '{')) {
        x->why = "the header is not a dict";
        return -1;
    }
    while (!brk_npy_eat(x, '}')) {
        if (brk_npy_string(x, key, sizeof(key)) != 0) {
            return -1;
        }
        if (!brk_npy_eat(x, ':')) {
            x->why = "':' expected";
            return -1;
        }
        if (strcmp(key, "descr") == 0) {
            brk_npy_ws(x);
            if ((x->p < x->end) && (*x->p == '[')) {
                *structured = 1;    /* a list of fields */
                return -1;
            }
            if (brk_npy_string(x, h->descr, sizeof(h->descr)) != 0) {
                return -1;
            }
            h->have_descr = 1;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (brk_npy_word(x, "True")) {
                h->fortran = 1;
            } else if (brk_npy_word(x, "False")) {
                h->fortran = 0;
            } else {
                x->why = "fortran_order is not True or False";
                return -1;
            }
            h->have_fortran = 1;
        } else if (strcmp(key, "shape") == 0) {
            if (brk_npy_shape(x, h) != 0) {
                return -1;
            }
            h->have_shape = 1;
        } else {
            x->why = "an unknown key";
            return -1;
        }
        if (!brk_npy_eat(x, ',')) {
            if (!brk_npy_eat(x, '}')) {
                x->why = "',' or '}' expected";
                return -1;
            }
            break;
        }
    }
    if (!h->have_descr || !h->have_fortran || !h->have_shape) {
        x->why = "a key of descr, fortran_order, shape is missing";
        return -1;
    }
    brk_npy_ws(x);
    if (x->p != x->end) {
        x->why = "bytes after the dict";
        return -1;
    }
    return 0;
}

/*
 * A simple descr: byte order [<>|=] (optional), a kind, an item size.
 * Kinds with a fixed meaning as bytes: b i u f c, and S/V (n bytes) and
 * U (n UCS-4 characters).  'O' (pointers) and the rest are refused.
 */
static int brk_npy_descr(brk_npy_hdr_t *h)
{
    const char *d = h->descr;
    unsigned long long n;
    char kind, *end;

    if ((*d == '<') || (*d == '>') || (*d == '|') || (*d == '=')) {
        ++d;
    }
    kind = *d++;
    if ((strchr("biufcSVU", kind) == NULL) || (kind == '\0') ||
        !isdigit((unsigned char)*d)) {
        return -1;
    }
    n = strtoull(d, &end, 10);
    if ((*end != '\0') || (n == 0) || (n > (1ull << 30))) {
        return -1;
    }
    switch (kind) {
    case 'b':
        if (n != 1) {
            return -1;
        }
        break;
    case 'i': case 'u':
        if ((n != 1) && (n != 2) && (n != 4) && (n != 8)) {
            return -1;
        }
        break;
    case 'f':
        if ((n != 2) && (n != 4) && (n != 8) && (n != 12) && (n != 16)) {
            return -1;
        }
        break;
    case 'c':
        if ((n != 8) && (n != 16) && (n != 24) && (n != 32)) {
            return -1;
        }
        break;
    case 'U':
        n *= 4;
        break;
    default:
        break;
    }
    h->itemsize = n;
    return 0;
}

/* Parse the prefix and the header of an open file; data offset in *off. */
static int brk_npy_header(brk_scan_ctx_t *ctx, int fd, const char *path,
                          uint64_t fsize, brk_npy_hdr_t *h, uint64_t *off)
{
    unsigned char pre[12];
    brk_npy_lex_t x;
    uint64_t plen, hlen;
    int structured = 0, ret;
    char *buf;

    if (fsize >= 10) {
        if (brk_scan_pread(ctx, fd, path, pre, 10, 0) != 0) {
            return -1;
        }
    }
    if ((fsize < 10) || (memcmp(pre, "\x93NUMPY", 6) != 0)) {
        return brk_scan_err(ctx, "%s: not a .npy file (bad magic)", path);
    }
    if (pre[6] == 1) {
        plen = 10;
        hlen = (uint64_t)pre[8] | ((uint64_t)pre[9] << 8);
    } else if ((pre[6] == 2) || (pre[6] == 3)) {
        plen = 12;
        if ((fsize < plen) ||
            (brk_scan_pread(ctx, fd, path, pre + 10, 2, 10) != 0)) {
            return brk_scan_err(ctx, "%s: truncated .npy header", path);
        }
        hlen = (uint64_t)pre[8] | ((uint64_t)pre[9] << 8) |
               ((uint64_t)pre[10] << 16) | ((uint64_t)pre[11] << 24);
    } else {
        return brk_scan_err(ctx, "%s: unsupported .npy version %u.%u", path,
                            pre[6], pre[7]);
    }
    if (hlen > BRK_NPY_MAX_HEADER) {
        return brk_scan_err(ctx, "%s: .npy header of %llu bytes (the limit "
                            "is %u)", path, (unsigned long long)hlen,
                            BRK_NPY_MAX_HEADER);
    }
    if (plen + hlen > fsize) {
        return brk_scan_err(ctx, "%s: truncated .npy header (%llu bytes, "
                            "the file has %llu)", path,
                            (unsigned long long)(plen + hlen),
                            (unsigned long long)fsize);
    }
    buf = malloc(hlen + 1);
    if (buf == NULL) {
        return brk_scan_err(ctx, "%s: out of memory", path);
    }
    ret = brk_scan_pread(ctx, fd, path, buf, hlen, plen);
    if (ret == 0) {
        memset(h, 0, sizeof(*h));
        x.p   = buf;
        x.end = buf + hlen;
        x.why = "";
        ret   = brk_npy_dict(&x, h, &structured);
        if (structured) {
            ret = brk_scan_err(ctx, "%s: unsupported dtype (structured: a "
                               "list of fields)", path);
        } else if (ret != 0) {
            ret = brk_scan_err(ctx, "%s: .npy header does not parse (%s at "
                               "byte %ld)", path, x.why,
                               (long)(x.p - buf + (long)plen));
        } else if (brk_npy_descr(h) != 0) {
            ret = brk_scan_err(ctx, "%s: unsupported dtype '%s' (simple "
                               "types only: b1 i u f c S V U)", path,
                               h->descr);
        } else if (h->fortran) {
            ret = brk_scan_err(ctx, "%s: fortran_order True is not supported "
                               "(rows must be contiguous: save in C order)",
                               path);
        }
    }
    free(buf);
    *off = plen + hlen;
    return ret;
}

int brk_scan_npy(brk_scan_ctx_t *ctx, const char *path)
{
    char info[BRK_NPY_DESCR_MAX + 32 + BRK_NPY_MAX_DIMS * 21];
    uint64_t off = 0, rows, rowbytes, need, have, r;
    brk_npy_hdr_t h;
    struct stat st;
    uint32_t file;
    size_t n;
    unsigned i;
    int fd, ret;

    fd = brk_scan_open(ctx, path, &st);
    if (fd < 0) {
        return -1;
    }
    ret = brk_npy_header(ctx, fd, path, (uint64_t)st.st_size, &h, &off);
    close(fd);
    if (ret != 0) {
        return -1;
    }

    rows     = (h.ndim == 0) ? 1 : h.shape[0];
    rowbytes = h.itemsize;
    n        = (size_t)snprintf(info, sizeof(info), "descr=%s shape=",
                                h.descr);
    for (i = 1; i < h.ndim; ++i) {
        if (__builtin_mul_overflow(rowbytes, h.shape[i], &rowbytes)) {
            return brk_scan_err(ctx, "%s: shape overflows 64 bits", path);
        }
        n += (size_t)snprintf(info + n, sizeof(info) - n, "%s%llu",
                              (i > 1) ? "," : "",
                              (unsigned long long)h.shape[i]);
    }
    if (__builtin_mul_overflow(rows, rowbytes, &need)) {
        return brk_scan_err(ctx, "%s: shape overflows 64 bits", path);
    }
    if ((rowbytes == 0) && (rows > BRK_NPY_MAX_EMPTY_ROWS)) {
        /* no data to bound the index by: refuse, rather than exhaust memory */
        return brk_scan_err(ctx, "%s: %llu rows of 0 bytes (a 0 in the row "
                            "shape)", path, (unsigned long long)rows);
    }
    have = (uint64_t)st.st_size - off;
    if (have != need) {
        return brk_scan_err(ctx, "%s: %s: %llu bytes of data, header says "
                            "%llu", path, (have < need) ? "truncated" :
                            "trailing bytes", (unsigned long long)have,
                            (unsigned long long)need);
    }
    if (brk_desc_add_file(ctx, path, &st, info, &file) != 0) {
        return -1;
    }
    for (r = 0; r < rows; ++r) {
        if (brk_desc_add_sample(ctx, file, off + r * rowbytes,
                                rowbytes) != 0) {
            return -1;
        }
    }
    return 0;
}
