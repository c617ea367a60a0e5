/*
 * Harness: the broker's control messages through their real decoders
 * (brk_wire.c), both ways: a request as the broker receives it from
 * anyone who reaches its port, and each answer as the client library
 * receives it (input format in fuzz_brk_proto.h).  A refusal is one line
 * with an error status; what is accepted has every length inside the
 * message: the arrays a handler walks, the paths of an ADD, a name ended
 * within its field; an answer's key, entries and arena ranges.
 */
#include "fuzz_brk.h"
#include "fuzz_brk_proto.h"

#include "brk_wire.h"

#include <stdlib.h>
#include <string.h>

static void fuzz_proto_inside(const void *msg, size_t len, const void *p,
                              uint64_t n, const char *what)
{
    const char *b = msg, *q = p;

    if ((q < b) || (q > b + len) || (n > (uint64_t)(b + len - q))) {
        fuzz_brk_fail("%s: %llu bytes at %lld of a %zu-byte message", what,
                      (unsigned long long)n, (long long)(q - b), len);
    }
}

static void fuzz_proto_refused(int rc, const char *err)
{
    if (rc == CXL_BROKER_OK) {
        fuzz_brk_fail("refusal with status OK");
    }
    fuzz_brk_check_err(err);
}

static void fuzz_proto_req(const uint8_t *data, size_t size)
{
    char err[BRK_ERRMSG_MAX];
    brk_req_hdr_t hdr;
    const char *path;
    brk_req_t req;
    size_t len, pos = 0;
    uint8_t *p;
    uint32_t i;
    int rc;

    if (size < sizeof(hdr)) {
        return;
    }
    memcpy(&hdr, data, sizeof(hdr));
    len = size - sizeof(hdr);
    p   = malloc(len ? len : 1);    /* the broker's copy: 8-aligned */
    if (p == NULL) {
        abort();
    }
    memcpy(p, data + sizeof(hdr), len);
    err[0] = '\0';
    rc = brk_req_decode(&hdr, p, len, &req, err, sizeof(err));
    if (rc != CXL_BROKER_OK) {
        fuzz_proto_refused(rc, err);
        free(p);
        return;
    }
    if ((req.type != hdr.type) || (hdr.proto != BRK_PROTO_VERSION) ||
        (req.type == 0) || (req.type >= BRK_REQ_LAST)) {
        fuzz_brk_fail("accepted request type %u proto %u", hdr.type,
                      hdr.proto);
    }
    if (memchr(req.name, '\0', sizeof(req.name)) == NULL) {
        fuzz_brk_fail("a name without its end");
    }
    for (i = 0; req.name[i] != '\0'; ++i) {
        if (((unsigned char)req.name[i] < 0x20) || (req.name[i] == 0x7f)) {
            fuzz_brk_fail("a name with control characters accepted");
        }
    }
    switch (req.type) {
    case BRK_REQ_PIN:
    case BRK_REQ_UNPIN:
        fuzz_proto_inside(p, len, req.chunks,
                          (uint64_t)req.u.pin.n * sizeof(uint32_t), "chunks");
        for (i = 0; i < req.u.pin.n; ++i) {
            if (req.chunks[i] == UINT32_MAX - 1) {
                err[0] = 1;     /* read each, as the handler does */
            }
        }
        break;
    case BRK_REQ_TOUCH:
        fuzz_proto_inside(p, len, req.touches,
                          (uint64_t)req.u.pin.n * sizeof(*req.touches),
                          "touches");
        for (i = 0; i < req.u.pin.n; ++i) {
            if (req.touches[i].chunk + req.touches[i].reads == 1) {
                err[0] = 1;     /* read each, as the handler does */
            }
        }
        break;
    case BRK_REQ_EPOCH:
        if (req.u.epoch.n) {
            fuzz_proto_inside(p, len, req.order,
                              req.u.epoch.n * sizeof(uint64_t), "order");
            if ((uintptr_t)req.order % 8) {
                fuzz_brk_fail("epoch order misaligned");
            }
        }
        break;
    case BRK_REQ_ADD:
        if ((req.name[0] == '\0') || strpbrk(req.name, " \t\n/") ||
            (req.u.add.format >= BRK_FMT_LAST) ||
            (req.u.add.policy >= BRK_POLICY_LAST) ||
            (req.u.add.npaths == 0) ||
            (req.u.add.npaths > BRK_ADD_MAX_PATHS)) {
            fuzz_brk_fail("add request accepted with a bad name, format, "
                          "policy or path count");
        }
        for (i = 0; i < req.u.add.npaths; ++i) {
            path = brk_req_next_path(&req, &pos);
            if (path == NULL) {
                fuzz_brk_fail("add: path %u of %u missing", i,
                              req.u.add.npaths);
            }
            fuzz_proto_inside(p, len, path, strlen(path) + 1, "path");
        }
        break;
    default:
        break;
    }
    free(p);
}

static void fuzz_proto_rep(uint8_t sel, const uint8_t *data, size_t size)
{
    uint32_t asked[FUZZ_PROTO_PIN_MAX], n = 0, i, cnt;
    brk_chunk_t chunks[FUZZ_PROTO_PIN_MAX];
    uint64_t lens[FUZZ_PROTO_PIN_MAX];
    const brk_pin_ent_t *ent;
    char err[BRK_ERRMSG_MAX];
    uint64_t arena = 0;
    brk_hello_rep_t hello;
    brk_open_rep_t open;
    const void *rkey, *elems;
    int local = 0, rc = 0;
    size_t len;
    uint8_t *p;

    if ((sel == FUZZ_PROTO_OPEN) || (sel == FUZZ_PROTO_PIN)) {
        if (size < 9) {
            return;
        }
        memcpy(&arena, data, 8);
        local = data[8];
        data += 9;
        size -= 9;
    }
    memset(chunks, 0, sizeof(chunks));
    if (sel == FUZZ_PROTO_PIN) {
        n = (uint32_t)local % (FUZZ_PROTO_PIN_MAX + 1);
        if (size < n * 12) {
            return;
        }
        for (i = 0; i < n; ++i) {
            memcpy(&asked[i], data + 4 * i, 4);
            asked[i] %= FUZZ_PROTO_PIN_MAX;   /* the client's chunk numbers */
            memcpy(&lens[i], data + 4 * n + 8 * i, 8);
        }
        data += 12 * n;
        size -= 12 * n;
    }
    len = size;
    p   = malloc(len ? len : 1);    /* the client's copy: malloc'ed */
    if (p == NULL) {
        abort();
    }
    memcpy(p, data, len);
    err[0] = '\0';
    switch (sel) {
    case FUZZ_PROTO_HELLO:
        rc = brk_hello_rep_decode(p, len, &hello, &rkey, err, sizeof(err));
        if (rc == CXL_BROKER_OK) {
            fuzz_proto_inside(p, len, rkey, hello.rkey_len, "hello key");
            if (memchr(hello.pool_path, '\0', sizeof(hello.pool_path)) ==
                NULL) {
                fuzz_brk_fail("hello: pool path without its end");
            }
        }
        break;
    case FUZZ_PROTO_OPEN:
        rc = brk_open_rep_decode(p, len, arena, local & 1, &open, err,
                                 sizeof(err));
        if (rc == CXL_BROKER_OK) {
            if ((open.meta_len > arena) || (open.meta_off > arena - open.meta_len)) {
                fuzz_brk_fail("open: metadata outside the arena");
            }
            if ((local & 1) &&
                ((open.states_off % 8) ||
                 (open.nchunks > arena / sizeof(brk_cstate_t)) ||
                 (open.states_off > arena - open.nchunks *
                                          sizeof(brk_cstate_t)) ||
                 (open.bitmap_len &&
                  ((open.bitmap_off % 8) ||
                   (open.bitmap_len > arena) ||
                   (open.bitmap_off > arena - open.bitmap_len) ||
                   /* whole words, a bit for each chunk */
                   ((open.nchunks + 63) / 64 > open.bitmap_len / 8))))) {
                fuzz_brk_fail("open: states or bitmap outside the arena");
            }
        }
        break;
    case FUZZ_PROTO_PIN:
        /* chunks[] is indexed by chunk number: asked[] < PIN_MAX */
        for (i = 0; i < n; ++i) {
            chunks[asked[i]].len = lens[i];
        }
        rc = brk_pin_rep_decode(p, len, asked, n, chunks, arena, &ent, err,
                                sizeof(err));
        if (rc == CXL_BROKER_OK) {
            fuzz_proto_inside(p, len, ent, (uint64_t)n * sizeof(*ent),
                              "pin entries");
            for (i = 0; i < n; ++i) {
                if (ent[i].chunk != asked[i]) {
                    fuzz_brk_fail("pin entry %u is not the chunk asked", i);
                }
                if ((ent[i].status == CXL_BROKER_OK) &&
                    ((ent[i].len != chunks[asked[i]].len) ||
                     (ent[i].len > arena) ||
                     (ent[i].off > arena - ent[i].len))) {
                    fuzz_brk_fail("pin entry %u outside the arena", i);
                }
            }
        }
        break;
    case FUZZ_PROTO_LIST:
    case FUZZ_PROTO_STAT:
        rc = brk_array_rep_decode(p, len, (sel == FUZZ_PROTO_STAT) ?
                                  sizeof(cxl_broker_stat_t) : 0,
                                  (sel == FUZZ_PROTO_STAT) ?
                                  sizeof(cxl_broker_epoch_stat_t) :
                                  sizeof(cxl_broker_dsinfo_t), &cnt, &elems,
                                  err, sizeof(err));
        if (rc == CXL_BROKER_OK) {
            fuzz_proto_inside(p, len, elems, (uint64_t)cnt *
                              ((sel == FUZZ_PROTO_STAT) ?
                               sizeof(cxl_broker_epoch_stat_t) :
                               sizeof(cxl_broker_dsinfo_t)), "entries");
        }
        break;
    default:
        break;
    }
    if (rc != CXL_BROKER_OK) {
        fuzz_proto_refused(rc, err);
    }
    free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    if (data[0] % FUZZ_PROTO_LAST == FUZZ_PROTO_REQ) {
        fuzz_proto_req(data + 1, size - 1);
    } else {
        fuzz_proto_rep(data[0] % FUZZ_PROTO_LAST, data + 1, size - 1);
    }
    return 0;
}
