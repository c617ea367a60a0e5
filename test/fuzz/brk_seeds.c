/*
 * brk_seeds: writes seed inputs of the broker's harnesses with the real
 * code, so the seeds are what the broker itself writes.  Built by the
 * fuzz build (build-fuzz/test/fuzz/brk_seeds); run it from the top of the
 * source tree, so the paths inside the seeds are relative.
 *
 *   brk_seeds meta OUTDIR FILE...
 *       metadata blobs (fuzz_brk_meta: a flags byte 0, then the blob) of
 *       real scans: each FILE alone (format from its name: .npy, .tar,
 *       else files), all .npy together, all .tar together, every FILE as
 *       raw records of 16 bytes where it divides, and all as plain files.
 *
 *   brk_seeds arena OUTDIR FILE...
 *       arena images (fuzz_brk_arena.h) made by the broker's own code:
 *       brk_arena_format, brk_vs_publish of each FILE as a dataset, some
 *       chunks made RESIDENT (their bytes and CRC), one LOADING, and an
 *       image with an unfinished (BUILDING) version; each with flags 0 and
 *       with the CRC-fixing flags.
 *
 *   brk_seeds proto OUTDIR
 *       messages (fuzz_brk_proto.h): every request as the client library
 *       lays it out, and the answers as the broker lays them out.
 */
#include "brk_srv.h"
#include "fuzz_brk_arena.h"
#include "fuzz_brk_proto.h"

#include <ucx_cxl/coherence.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int seeds_write(const char *dir, const char *name, const void *flags,
                       size_t nflags, const void *data, size_t len)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "wb");
    if ((f == NULL) || (fwrite(flags, 1, nflags, f) != nflags) ||
        (fwrite(data, 1, len, f) != len) || fclose(f)) {
        fprintf(stderr, "brk_seeds: cannot write %s\n", path);
        exit(1);
    }
    return 0;
}

/* Scan paths; write the blob as OUTDIR/meta-NAME.bin.  0, or 1 if the
 * scan refused (a seed less, not an error: raw needs whole records). */
static int seeds_meta_one(const char *dir, const char *name,
                          const char *const *paths, unsigned n,
                          brk_format_t fmt, uint64_t record)
{
    brk_scan_opts_t opts = { .format = fmt, .chunk_size = 2048,
                             .record_size = record };
    static const uint8_t flags = 0;
    char err[512], fname[256];
    brk_desc_t d;
    uint64_t len;
    void *blob;

    if (brk_scan(paths, n, &opts, &d, err, sizeof(err)) != 0) {
        return 1;
    }
    len  = brk_desc_meta_size(&d);
    blob = malloc(len);
    if (blob == NULL) {
        abort();
    }
    brk_desc_write_meta(&d, blob);
    snprintf(fname, sizeof(fname), "meta-%s.bin", name);
    seeds_write(dir, fname, &flags, 1, blob, len);
    free(blob);
    brk_desc_free(&d);
    return 0;
}

static int seeds_meta(const char *dir, int n, char **files)
{
    const char **npy = calloc((size_t)n, sizeof(char*));
    const char **tar = calloc((size_t)n, sizeof(char*));
    unsigned nnpy = 0, ntar = 0;
    char name[128];
    const char *base;
    int i;

    if ((npy == NULL) || (tar == NULL)) {
        abort();
    }
    for (i = 0; i < n; ++i) {
        const char *one[1] = { files[i] };

        base = strrchr(files[i], '/');
        base = base ? base + 1 : files[i];
        snprintf(name, sizeof(name), "%s", base);
        seeds_meta_one(dir, name, one, 1, BRK_FMT_AUTO, 0);
        snprintf(name, sizeof(name), "raw16-%s", base);
        seeds_meta_one(dir, name, one, 1, BRK_FMT_RAW, 16);
        if (strstr(base, ".npy")) {
            npy[nnpy++] = files[i];
        } else if (strstr(base, ".tar")) {
            tar[ntar++] = files[i];
        }
    }
    if (nnpy) {
        seeds_meta_one(dir, "all-npy", npy, nnpy, BRK_FMT_NPY, 0);
    }
    if (ntar) {
        seeds_meta_one(dir, "all-tar", tar, ntar, BRK_FMT_TAR, 0);
    }
    seeds_meta_one(dir, "all-files", (const char *const*)files, (unsigned)n,
                   BRK_FMT_FILES, 0);
    free(npy);
    free(tar);
    return 0;
}

/* Write the compact image of an arena (fuzz_brk_arena.h), both flags. */
static void seeds_arena_write(const char *dir, const char *name,
                              const uint8_t *arena)
{
    static const uint8_t flags[2] = {
        0, FUZZ_ARENA_FIX_HDR | FUZZ_ARENA_FIX_VRECS | FUZZ_ARENA_FIX_META |
           FUZZ_ARENA_FIX_CHUNKS };
    size_t head = sizeof(brk_hdr_t) + FUZZ_ARENA_VRECS * sizeof(brk_vrec_t);
    size_t heap = FUZZ_ARENA_HEAP, n;
    uint8_t *img;
    char fname[256];
    int i;

    while ((heap > 0) && (arena[BRK_HDR_REGION + heap - 1] == 0)) {
        heap--;
    }
    n   = head + heap;
    img = malloc(n);
    if (img == NULL) {
        abort();
    }
    memcpy(img, arena, head);
    memcpy(img + head, arena + BRK_HDR_REGION, heap);
    for (i = 0; i < 2; ++i) {
        snprintf(fname, sizeof(fname), "arena-%s%s.bin", name,
                 i ? "-fix" : "");
        seeds_write(dir, fname, &flags[i], 1, img, n);
    }
    free(img);
}

/* Make chunk c of vs RESIDENT, its bytes a pattern, as a fill would. */
static void seeds_arena_fill(brk_srv_t *srv, brk_vs_t *vs, uint32_t c)
{
    brk_cstate_t *cs = &vs->states[c];
    uint64_t off;

    if (brk_heap_alloc(&srv->heap, vs->chunks[c].len, &off)) {
        return;
    }
    memset(srv->arena + off, 0x40 + (int)c, vs->chunks[c].len);
    cs->off = vs->crt[c].off = off;
    cs->len = vs->crt[c].len = vs->chunks[c].len;
    cs->crc = cxlpool_crc32c(0, srv->arena + off, cs->len);
    brk_chunk_publish(srv, vs, c,
                      BRK_CSTATE_WORD(BRK_CSTATE_GEN(vs->crt[c].word) + 1,
                                      BRK_CHUNK_RESIDENT));
    vs->resident_chunks++;
    vs->resident_bytes += cs->len;
}

static int seeds_arena(const char *dir, int n, char **files)
{
    brk_add_req_t req;
    brk_srv_t srv;
    brk_desc_t d;
    brk_vs_t *vs;
    brk_scan_opts_t opts = { .format = BRK_FMT_AUTO, .chunk_size = 1024 };
    char err[BRK_ERRMSG_MAX], name[64];
    uint8_t *arena;
    const char *base;
    uint32_t c;
    int i, building;

    for (i = 0; i < n; ++i) {
        for (building = 0; building < 2; ++building) {
            const char *one[1] = { files[i] };

            arena = calloc(1, FUZZ_ARENA_SIZE);
            memset(&srv, 0, sizeof(srv));
            srv.params.quiet = 1;
            srv.coh          = CXL_COH_HW;
            if ((arena == NULL) ||
                (brk_arena_format(&srv, arena, FUZZ_ARENA_SIZE), 0) ||
                brk_arena_recover(&srv, arena, FUZZ_ARENA_SIZE, err,
                                  sizeof(err)) ||
                brk_scan(one, 1, &opts, &d, err, sizeof(err))) {
                fprintf(stderr, "brk_seeds: %s: %s\n", files[i], err);
                exit(1);
            }
            memset(&req, 0, sizeof(req));
            snprintf(req.name, sizeof(req.name), "ds%d", i);
            req.policy = (brk_policy_t)(i % BRK_POLICY_LAST);
            if (brk_vs_publish(&srv, req.name, &req, &d, &vs, err,
                               sizeof(err))) {
                fprintf(stderr, "brk_seeds: publish: %s\n", err);
                exit(1);
            }
            for (c = 0; c < vs->rec.nchunks; ++c) {
                if (c % 3 == 0) {
                    seeds_arena_fill(&srv, vs, c);
                } else if (c % 3 == 1) {
                    brk_chunk_publish(&srv, vs, c,
                                      BRK_CSTATE_WORD(1, BRK_CHUNK_LOADING));
                }
            }
            if (building) {
                vs->rec.state   = BRK_VREC_BUILDING;
                vs->vrec->state = BRK_VREC_BUILDING;
                brk_vrec_seal(&srv, vs->vrec);
            }
            base = strrchr(files[i], '/');
            snprintf(name, sizeof(name), "%s%s", base ? base + 1 : files[i],
                     building ? "-building" : "");
            seeds_arena_write(dir, name, arena);
            brk_desc_free(&d);
            brk_arena_close(&srv);
            free(arena);
        }
    }
    return 0;
}

/* One message seed: selector, prefix (answers' context), body. */
static void seeds_msg(const char *dir, const char *name, uint8_t sel,
                      const void *pre, size_t npre, const void *body,
                      size_t nbody)
{
    uint8_t buf[4096];
    char fname[128];

    buf[0] = sel;
    if (npre) {
        memcpy(buf + 1, pre, npre);
    }
    if (nbody) {
        memcpy(buf + 1 + npre, body, nbody);
    }
    snprintf(fname, sizeof(fname), "msg-%s.bin", name);
    seeds_write(dir, fname, buf, 1, buf + 1, npre + nbody);
}

static void seeds_req(const char *dir, const char *name, uint32_t type,
                      const void *payload, size_t len)
{
    brk_req_hdr_t hdr = { .type = type, .proto = BRK_PROTO_VERSION,
                          .req_id = 7 };

    seeds_msg(dir, name, FUZZ_PROTO_REQ, &hdr, sizeof(hdr), payload, len);
}

static int seeds_proto(const char *dir)
{
    struct { brk_pin_req_t r; uint32_t c[3]; } pin = {
        { .handle = 1, .n = 3 }, { 0, 5, 9 } };
    struct { brk_pin_req_t r; brk_touch_ent_t t[2]; } touch = {
        { .handle = 1, .n = 2 }, { { 5, 17 }, { 0, 1 } } };
    struct { brk_epoch_req_t r; uint64_t o[4]; } epoch = {
        { .handle = 1, .epoch = 2, .n = 4 }, { 3, 1, 0, 2 } };
    struct { brk_add_req_t r; char p[32]; } add;
    struct { brk_hello_rep_t r; uint8_t key[24]; } hello;
    struct { brk_pin_rep_t r; brk_pin_ent_t e[2]; } pinrep;
    struct { brk_list_rep_t r; cxl_broker_dsinfo_t i[1]; } list;
    struct { cxl_broker_stat_t s; brk_list_rep_t r;
             cxl_broker_epoch_stat_t e[1]; } stat;
    struct { uint64_t arena; uint8_t n; uint32_t c[2]; uint64_t len[2]; }
        __attribute__((packed)) pinpre = { 8u << 20, 2, { 4, 6 },
                                           { 4096, 100 } };
    struct { uint64_t arena; uint8_t local; } __attribute__((packed))
        openpre = { 8u << 20, 1 };
    brk_hello_req_t hreq;
    brk_open_req_t open;
    brk_open_rep_t orep;
    brk_handle_req_t close = { .handle = 1 };
    brk_name_req_t nreq;
    size_t off;

    memset(&hreq, 0, sizeof(hreq));
    hreq.pid = 1234;
    snprintf(hreq.host, sizeof(hreq.host), "node1");
    seeds_req(dir, "hello", BRK_REQ_HELLO, &hreq, sizeof(hreq));
    memset(&open, 0, sizeof(open));
    snprintf(open.name, sizeof(open.name), "imagenet");
    open.local = 1;
    open.token = 42;
    seeds_req(dir, "open", BRK_REQ_OPEN, &open, sizeof(open));
    seeds_req(dir, "close", BRK_REQ_CLOSE, &close, sizeof(close));
    seeds_req(dir, "pin", BRK_REQ_PIN, &pin, sizeof(pin));
    seeds_req(dir, "unpin", BRK_REQ_UNPIN, &pin, sizeof(pin));
    seeds_req(dir, "touch", BRK_REQ_TOUCH, &touch, sizeof(touch));
    seeds_req(dir, "epoch", BRK_REQ_EPOCH, &epoch, sizeof(epoch));
    memset(&add, 0, sizeof(add));
    snprintf(add.r.name, sizeof(add.r.name), "ds1");
    add.r.format = BRK_FMT_TAR;
    add.r.policy = BRK_POLICY_LRU;
    add.r.npaths = 2;
    off = (size_t)snprintf(add.p, sizeof(add.p), "/data/a.tar") + 1;
    off += (size_t)snprintf(add.p + off, sizeof(add.p) - off, "/b.tar") + 1;
    seeds_req(dir, "add", BRK_REQ_ADD, &add, sizeof(add.r) + off);
    memset(&nreq, 0, sizeof(nreq));
    snprintf(nreq.name, sizeof(nreq.name), "ds1");
    seeds_req(dir, "rm", BRK_REQ_RM, &nreq, sizeof(nreq));
    seeds_req(dir, "evict", BRK_REQ_EVICT, &nreq, sizeof(nreq));
    seeds_req(dir, "list", BRK_REQ_LIST, NULL, 0);
    seeds_req(dir, "stat", BRK_REQ_STAT, NULL, 0);

    memset(&hello, 0, sizeof(hello));
    hello.r.arena_va   = 0x7f0000000000ull;
    hello.r.arena_size = 8u << 20;
    snprintf(hello.r.pool_path, sizeof(hello.r.pool_path), "/dev/shm/p");
    hello.r.rkey_len   = sizeof(hello.key);
    memset(hello.key, 0x5a, sizeof(hello.key));
    seeds_msg(dir, "rep-hello", FUZZ_PROTO_HELLO, NULL, 0, &hello,
              sizeof(hello));
    memset(&orep, 0, sizeof(orep));
    orep.handle     = 1;
    orep.nchunks    = 8;
    orep.nsamples   = 100;
    orep.meta_off   = BRK_HDR_REGION;
    orep.meta_len   = 4096;
    orep.states_off = BRK_HDR_REGION + 4096;
    orep.bitmap_off = BRK_HDR_REGION + 8192;
    orep.bitmap_len = 64;
    seeds_msg(dir, "rep-open", FUZZ_PROTO_OPEN, &openpre, sizeof(openpre),
              &orep, sizeof(orep));
    memset(&pinrep, 0, sizeof(pinrep));
    pinrep.r.n = 2;
    pinrep.e[0] = (brk_pin_ent_t){ .chunk = 4, .word = 0x102,
                                   .off = 1u << 20, .len = 4096 };
    pinrep.e[1] = (brk_pin_ent_t){ .chunk = 6,
                                   .status = CXL_BROKER_ERR_NO_SPACE };
    seeds_msg(dir, "rep-pin", FUZZ_PROTO_PIN, &pinpre, sizeof(pinpre),
              &pinrep, sizeof(pinrep));
    memset(&list, 0, sizeof(list));
    list.r.n = 1;
    snprintf(list.i[0].name, sizeof(list.i[0].name), "ds1");
    seeds_msg(dir, "rep-list", FUZZ_PROTO_LIST, NULL, 0, &list,
              sizeof(list));
    memset(&stat, 0, sizeof(stat));
    stat.r.n = 1;
    seeds_msg(dir, "rep-stat", FUZZ_PROTO_STAT, NULL, 0, &stat,
              sizeof(stat));
    return 0;
}

int main(int argc, char **argv)
{
    if ((argc == 3) && !strcmp(argv[1], "proto")) {
        return seeds_proto(argv[2]);
    }
    if ((argc >= 4) && !strcmp(argv[1], "meta")) {
        return seeds_meta(argv[2], argc - 3, argv + 3);
    }
    if ((argc >= 4) && !strcmp(argv[1], "arena")) {
        return seeds_arena(argv[2], argc - 3, argv + 3);
    }
    fprintf(stderr, "usage: brk_seeds meta|arena OUTDIR FILE... | proto OUTDIR\n");
    return 2;
}
