/*
 * Decoding of the broker's messages (brk_proto.h), apart from UCP so that
 * the fuzz harnesses call exactly what the broker and the client library
 * call.  A message is untrusted: a request may come from any process that
 * reaches the broker's port, and an answer is checked against what was
 * asked and against the arena before the client indexes anything with it.
 * Every decoder returns 0 (CXL_BROKER_OK) with every length and count of
 * the message inside it, or a cxl_broker_status_t with one line in err.
 */
#ifndef BRK_WIRE_H
#define BRK_WIRE_H

#include "brk_proto.h"
#include "brk_scan.h"

#include <stddef.h>
#include <stdint.h>

/* A request: its fixed part copied out (aligned), its arrays in place. */
typedef struct brk_req_decoded {
    uint32_t type;              /* brk_req_type_t */
    union {
        brk_hello_req_t  hello; /* zeroed when the client sent none */
        brk_open_req_t   open;
        brk_handle_req_t handle;
        brk_pin_req_t    pin;   /* PIN, UNPIN, TOUCH */
        brk_epoch_req_t  epoch;
        brk_add_req_t    add;
        brk_name_req_t   name_req;
    } u;
    char            name[BRK_NAME_MAX]; /* OPEN, ADD, RM, EVICT */
    const uint32_t *chunks;     /* PIN, UNPIN: u.pin.n of them */
    const brk_touch_ent_t *touches; /* TOUCH: u.pin.n of them */
    const uint64_t *order;      /* EPOCH: u.epoch.n of them (may be NULL) */
    const char     *paths;      /* ADD: u.add.npaths NUL-terminated strings */
    size_t          paths_len;  /*      in paths[0 .. paths_len) */
} brk_req_t;

#define BRK_ADD_MAX_PATHS 65536u

/*
 * Decode the payload p[0 .. len) of a request of hdr->type; p must be
 * 8-aligned (the broker copies every payload into a buffer of its own).
 * Checks the protocol version, the fixed part's size, each array's count
 * against the bytes that follow it, that names end within their field
 * and hold no control characters (and for ADD: 1 to BRK_NAME_MAX - 1
 * characters, no spaces or '/', a
 * known format and policy, 1 to BRK_ADD_MAX_PATHS paths that all end in
 * the message).  It does not check handles and chunk numbers: those are
 * the broker's state.
 */
int brk_req_decode(const brk_req_hdr_t *hdr, const void *p, size_t len,
                   brk_req_t *req, char *err, size_t errlen);

/* The next of the paths of a decoded ADD: *pos starts at 0. */
const char *brk_req_next_path(const brk_req_t *req, size_t *pos);

/* ---- answers, checked by the client ---- */

/* HELLO: the fixed part, then rkey_len bytes of key (*rkey). */
int brk_hello_rep_decode(const void *data, size_t len, brk_hello_rep_t *rep,
                         const void **rkey, char *err, size_t errlen);

/*
 * OPEN: the metadata blob inside the arena of arena_size bytes; for a
 * local handle (one that maps the arena) also the chunk states and the pin
 * bitmap, 8-aligned, the bitmap with a bit for every chunk.
 */
int brk_open_rep_decode(const void *data, size_t len, uint64_t arena_size,
                        int local, brk_open_rep_t *rep, char *err,
                        size_t errlen);

/*
 * PIN: one entry for each chunk asked[0 .. n), in order; an entry that
 * says OK must name the chunk asked and hold its chunk_len[] bytes inside
 * the arena.  *ent points at the entries (the answer is 8-aligned).
 */
int brk_pin_rep_decode(const void *data, size_t len, const uint32_t *asked,
                       uint32_t n, const brk_chunk_t *chunks,
                       uint64_t arena_size, const brk_pin_ent_t **ent,
                       char *err, size_t errlen);

/* A LIST or STAT answer: skip bytes, a brk_list_rep_t, then n elements
 * of elem bytes; *n and *elems on success. */
int brk_array_rep_decode(const void *data, size_t len, size_t skip,
                         size_t elem, uint32_t *n, const void **elems,
                         char *err, size_t errlen);

/* ---- addresses ---- */

/*
 * Split "HOST:PORT" (the last ':' separates them) into host and port:
 * the port is 1 to 65535 in decimal digits, the host has no blanks or
 * control characters and may be empty only if empty_host (a listener:
 * every address); the whole must fit in
 * BRK_ADDR_MAX - 1 characters, the host in hostlen (with its NUL).
 */
int brk_addr_split(const char *addr, int empty_host, char *host,
                   size_t hostlen, uint16_t *port, char *err, size_t errlen);

#endif
