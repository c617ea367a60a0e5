/*
 * Message decoding (brk_wire.h): sizes, counts and strings first, so the
 * handlers only ever see a request whose arrays lie inside its payload
 * and a client only indexes with what it asked for.
 */
#include "brk_wire.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int brk_wire_fail(char *err, size_t errlen, int status,
                         const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int brk_wire_fail(char *err, size_t errlen, int status,
                         const char *fmt, ...)
{
    va_list ap;

    if ((err != NULL) && (errlen > 0)) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return status;
}

#define BRK_WIRE_INVAL(...) \
    brk_wire_fail(err, errlen, CXL_BROKER_ERR_INVAL, __VA_ARGS__)
#define BRK_WIRE_CORRUPT(...) \
    brk_wire_fail(err, errlen, CXL_BROKER_ERR_CORRUPT, __VA_ARGS__)

/* n elements of elem bytes fit in the len - skip bytes after skip? */
static int brk_wire_fits(size_t len, size_t skip, size_t elem, uint64_t n)
{
    return (len >= skip) && ((len - skip) / elem >= n);
}

/* A name field: must end within its BRK_NAME_MAX bytes and hold no
 * control characters (names are printed in answers and logs, one line). */
static int brk_wire_name(const char *field, char *name)
{
    const unsigned char *c;

    if (memchr(field, '\0', BRK_NAME_MAX) == NULL) {
        return -1;
    }
    for (c = (const unsigned char*)field; *c != '\0'; ++c) {
        if ((*c < 0x20) || (*c == 0x7f)) {
            return -1;
        }
    }
    memcpy(name, field, BRK_NAME_MAX);
    return 0;
}

static int brk_req_decode_add(const void *p, size_t len, brk_req_t *req,
                              char *err, size_t errlen)
{
    const char *s, *end, *nul;
    uint32_t i;

    if ((len < sizeof(req->u.add)) || (req->u.add.npaths == 0) ||
        (req->u.add.npaths > BRK_ADD_MAX_PATHS)) {
        return BRK_WIRE_INVAL("malformed add request (no paths?)");
    }
    if ((req->name[0] == '\0') || strpbrk(req->name, " /")) {
        return BRK_WIRE_INVAL("dataset name '%s': 1 to %u characters, no "
                              "spaces or '/'", req->name, BRK_NAME_MAX - 1);
    }
    if ((req->u.add.format >= BRK_FMT_LAST) ||
        (req->u.add.policy >= BRK_POLICY_LAST)) {
        return BRK_WIRE_INVAL("unknown format or policy");
    }
    req->paths     = (const char*)p + sizeof(req->u.add);
    req->paths_len = len - sizeof(req->u.add);
    s   = req->paths;
    end = s + req->paths_len;
    for (i = 0; i < req->u.add.npaths; ++i) {
        nul = (s < end) ? memchr(s, '\0', (size_t)(end - s)) : NULL;
        if (nul == NULL) {
            return BRK_WIRE_INVAL("malformed path list in add request");
        }
        s = nul + 1;
    }
    return CXL_BROKER_OK;
}

int brk_req_decode(const brk_req_hdr_t *hdr, const void *p, size_t len,
                   brk_req_t *req, char *err, size_t errlen)
{
    static const size_t fixed[BRK_REQ_LAST] = {
        [BRK_REQ_HELLO] = 0,    /* optional: only for the log */
        [BRK_REQ_OPEN]  = sizeof(brk_open_req_t),
        [BRK_REQ_CLOSE] = sizeof(brk_handle_req_t),
        [BRK_REQ_PIN]   = sizeof(brk_pin_req_t),
        [BRK_REQ_UNPIN] = sizeof(brk_pin_req_t),
        [BRK_REQ_EPOCH] = sizeof(brk_epoch_req_t),
        [BRK_REQ_ADD]   = sizeof(brk_add_req_t),
        [BRK_REQ_RM]    = sizeof(brk_name_req_t),
        [BRK_REQ_EVICT] = sizeof(brk_name_req_t),
        [BRK_REQ_LIST]  = 0,
        [BRK_REQ_STAT]  = 0,
        [BRK_REQ_TOUCH] = sizeof(brk_pin_req_t),
    };
    const char *field = NULL;
    size_t copy;

    memset(req, 0, sizeof(*req));
    req->type = hdr->type;
    if (hdr->proto != BRK_PROTO_VERSION) {
        return brk_wire_fail(err, errlen, CXL_BROKER_ERR_UNSUPPORTED,
                             "client protocol %u, broker %u: rebuild one of "
                             "them", hdr->proto, BRK_PROTO_VERSION);
    }
    if ((hdr->type == 0) || (hdr->type >= BRK_REQ_LAST)) {
        return BRK_WIRE_INVAL("unknown request type %u", hdr->type);
    }
    if (((p == NULL) && (len > 0)) || ((uintptr_t)p % 8 != 0)) {
        return BRK_WIRE_INVAL("malformed request (payload not 8-aligned)");
    }
    if (len < fixed[hdr->type]) {
        return BRK_WIRE_INVAL("malformed request (%zu bytes, a %s request "
                              "has %zu)", len,
                              (hdr->type == BRK_REQ_PIN) ? "pin" :
                              (hdr->type == BRK_REQ_EPOCH) ? "epoch" :
                              (hdr->type == BRK_REQ_ADD) ? "add" : "this",
                              fixed[hdr->type]);
    }
    copy = (hdr->type == BRK_REQ_HELLO) ?
           ((len >= sizeof(req->u.hello)) ? sizeof(req->u.hello) : 0) :
           fixed[hdr->type];
    if (copy > 0) {
        memcpy(&req->u, p, copy);
    }

    switch (hdr->type) {
    case BRK_REQ_OPEN:
        field = req->u.open.name;
        break;
    case BRK_REQ_ADD:
        field = req->u.add.name;
        break;
    case BRK_REQ_RM:
    case BRK_REQ_EVICT:
        field = req->u.name_req.name;
        break;
    default:
        break;
    }
    if ((field != NULL) && brk_wire_name(field, req->name)) {
        return BRK_WIRE_INVAL("dataset name not terminated within its %u "
                              "bytes, or with control characters",
                              BRK_NAME_MAX);
    }

    switch (hdr->type) {
    case BRK_REQ_PIN:
    case BRK_REQ_UNPIN:
    case BRK_REQ_TOUCH:
        if (!brk_wire_fits(len, sizeof(brk_pin_req_t),
                           (hdr->type == BRK_REQ_TOUCH) ?
                           sizeof(brk_touch_ent_t) : sizeof(uint32_t),
                           req->u.pin.n)) {
            return BRK_WIRE_INVAL("malformed %s request (%u chunks in %zu "
                                  "bytes)", (hdr->type == BRK_REQ_PIN) ?
                                  "pin" : (hdr->type == BRK_REQ_UNPIN) ?
                                  "unpin" : "touch", req->u.pin.n, len);
        }
        if (hdr->type == BRK_REQ_TOUCH) {
            req->touches = (const brk_touch_ent_t*)((const char*)p +
                                                    sizeof(brk_pin_req_t));
        } else {
            req->chunks = (const uint32_t*)((const char*)p +
                                            sizeof(brk_pin_req_t));
        }
        break;
    case BRK_REQ_EPOCH:
        if (!brk_wire_fits(len, sizeof(brk_epoch_req_t), sizeof(uint64_t),
                           req->u.epoch.n)) {
            return BRK_WIRE_INVAL("malformed epoch request (%" PRIu64
                                  " samples in %zu bytes)", req->u.epoch.n,
                                  len);
        }
        req->order = req->u.epoch.n ?
                     (const uint64_t*)((const char*)p +
                                       sizeof(brk_epoch_req_t)) : NULL;
        break;
    case BRK_REQ_ADD:
        return brk_req_decode_add(p, len, req, err, errlen);
    default:
        break;
    }
    return CXL_BROKER_OK;
}

const char *brk_req_next_path(const brk_req_t *req, size_t *pos)
{
    const char *s;

    if (*pos >= req->paths_len) {
        return NULL;
    }
    s     = req->paths + *pos;
    *pos += strnlen(s, req->paths_len - *pos) + 1;
    return s;
}

int brk_hello_rep_decode(const void *data, size_t len, brk_hello_rep_t *rep,
                         const void **rkey, char *err, size_t errlen)
{
    if ((data == NULL) || (len < sizeof(*rep))) {
        return BRK_WIRE_CORRUPT("malformed hello (%zu bytes)", len);
    }
    memcpy(rep, data, sizeof(*rep));
    if ((rep->rkey_len == 0) || (rep->rkey_len > BRK_RKEY_MAX) ||
        (len - sizeof(*rep) < rep->rkey_len)) {
        return BRK_WIRE_CORRUPT("malformed hello (a key of %u bytes in %zu)",
                                rep->rkey_len, len - sizeof(*rep));
    }
    if ((rep->arena_size < BRK_HDR_REGION) ||
        (memchr(rep->pool_path, '\0', sizeof(rep->pool_path)) == NULL)) {
        return BRK_WIRE_CORRUPT("malformed hello (arena of %" PRIu64
                                " bytes, or no pool path)", rep->arena_size);
    }
    *rkey = (const uint8_t*)data + sizeof(*rep);
    return CXL_BROKER_OK;
}

/* [off, off + len) inside [0, size), off 8-aligned when align8 */
static int brk_wire_range(uint64_t off, uint64_t len, uint64_t size,
                          int align8)
{
    return (!align8 || (off % 8 == 0)) && (len <= size) &&
           (off <= size - len);
}

int brk_open_rep_decode(const void *data, size_t len, uint64_t arena_size,
                        int local, brk_open_rep_t *rep, char *err,
                        size_t errlen)
{
    if ((data == NULL) || (len < sizeof(*rep))) {
        return BRK_WIRE_CORRUPT("malformed open answer (%zu bytes)", len);
    }
    memcpy(rep, data, sizeof(*rep));
    if (!brk_wire_range(rep->meta_off, rep->meta_len, arena_size, 0)) {
        return BRK_WIRE_CORRUPT("metadata outside the arena");
    }
    if (!local) {
        return CXL_BROKER_OK;
    }
    if ((rep->nchunks > arena_size / sizeof(brk_cstate_t)) ||
        !brk_wire_range(rep->states_off, rep->nchunks * sizeof(brk_cstate_t),
                        arena_size, 1)) {
        return BRK_WIRE_CORRUPT("chunk states outside the arena");
    }
    if (rep->bitmap_len &&
        ((rep->bitmap_len < (rep->nchunks + 63) / 64 * 8) ||
         !brk_wire_range(rep->bitmap_off, rep->bitmap_len, arena_size, 1))) {
        return BRK_WIRE_CORRUPT("pin bitmap outside the arena or too small");
    }
    return CXL_BROKER_OK;
}

int brk_pin_rep_decode(const void *data, size_t len, const uint32_t *asked,
                       uint32_t n, const brk_chunk_t *chunks,
                       uint64_t arena_size, const brk_pin_ent_t **ent_p,
                       char *err, size_t errlen)
{
    const brk_pin_rep_t *rep = data;
    const brk_pin_ent_t *ent;
    uint32_t i;

    if ((data == NULL) || (len < sizeof(*rep)) ||
        !brk_wire_fits(len, sizeof(*rep), sizeof(*ent), rep->n) ||
        (rep->n != n)) {
        return BRK_WIRE_CORRUPT("malformed pin answer");
    }
    ent = (const brk_pin_ent_t*)(rep + 1);
    for (i = 0; i < n; ++i) {
        if (ent[i].chunk != asked[i]) {
            return BRK_WIRE_CORRUPT("malformed pin answer (entry %u is chunk "
                                    "%u, not %u)", i, ent[i].chunk, asked[i]);
        }
        if ((ent[i].status == CXL_BROKER_OK) &&
            ((ent[i].len != chunks[asked[i]].len) ||
             !brk_wire_range(ent[i].off, ent[i].len, arena_size, 0))) {
            return BRK_WIRE_CORRUPT("malformed pin answer (chunk %u: %" PRIu64
                                    " bytes at %" PRIu64 ")", asked[i],
                                    ent[i].len, ent[i].off);
        }
    }
    *ent_p = ent;
    return CXL_BROKER_OK;
}

int brk_array_rep_decode(const void *data, size_t len, size_t skip,
                         size_t elem, uint32_t *n, const void **elems,
                         char *err, size_t errlen)
{
    brk_list_rep_t cnt;

    if ((data == NULL) || (len < skip) || (len - skip < sizeof(cnt))) {
        return BRK_WIRE_CORRUPT("malformed answer (%zu bytes)", len);
    }
    memcpy(&cnt, (const char*)data + skip, sizeof(cnt));
    if (!brk_wire_fits(len, skip + sizeof(cnt), elem, cnt.n)) {
        return BRK_WIRE_CORRUPT("malformed answer (%u entries in %zu bytes)",
                                cnt.n, len);
    }
    *n     = cnt.n;
    *elems = (const char*)data + skip + sizeof(cnt);
    return CXL_BROKER_OK;
}

/* A copy of s for one-line messages: control characters become '?'. */
static const char *brk_wire_printable(const char *s, char *buf, size_t len)
{
    size_t i;

    for (i = 0; (i + 1 < len) && (s[i] != '\0'); ++i) {
        buf[i] = (((unsigned char)s[i] < 0x20) || (s[i] == 0x7f)) ? '?' : s[i];
    }
    buf[i] = '\0';
    return buf;
}

int brk_addr_split(const char *addr, int empty_host, char *host,
                   size_t hostlen, uint16_t *port, char *err, size_t errlen)
{
    const char *colon, *d;
    char shown[BRK_ADDR_MAX];
    size_t alen, hlen;
    uint32_t v = 0;

    if ((addr == NULL) || ((alen = strnlen(addr, BRK_ADDR_MAX)) == 0)) {
        return BRK_WIRE_INVAL("an empty address: expected HOST:PORT");
    }
    brk_wire_printable(addr, shown, sizeof(shown));
    if (alen >= BRK_ADDR_MAX) {
        return BRK_WIRE_INVAL("address '%s...': longer than %u characters",
                              shown, BRK_ADDR_MAX - 1);
    }
    colon = strrchr(addr, ':');
    if ((colon == NULL) || (colon[1] == '\0') ||
        (!empty_host && (colon == addr))) {
        return BRK_WIRE_INVAL("address '%s': expected HOST:PORT", shown);
    }
    for (d = colon + 1; *d != '\0'; ++d) {
        if ((*d < '0') || (*d > '9') || (v > 65535)) {
            break;
        }
        v = v * 10 + (uint32_t)(*d - '0');
    }
    if ((*d != '\0') || (v == 0) || (v > 65535)) {
        return BRK_WIRE_INVAL("address '%s': the port is a number from 1 to "
                              "65535", shown);
    }
    hlen = (size_t)(colon - addr);
    if (hlen >= hostlen) {
        return BRK_WIRE_INVAL("address '%s': host name too long", shown);
    }
    for (d = addr; d < colon; ++d) {
        if (((unsigned char)*d <= 0x20) || (*d == 0x7f)) {
            return BRK_WIRE_INVAL("address '%s': a blank or control "
                                  "character in the host", shown);
        }
    }
    memcpy(host, addr, hlen);
    host[hlen] = '\0';
    *port      = (uint16_t)v;
    return CXL_BROKER_OK;
}
