/*
 * The input format of fuzz_brk_proto, shared with its seed writer: a
 * selector byte, then
 *   FUZZ_PROTO_REQ:    a brk_req_hdr_t and the request's payload;
 *   FUZZ_PROTO_HELLO, _LIST, _STAT: an answer's payload;
 *   FUZZ_PROTO_OPEN:   8 bytes arena size, 1 byte local, the answer;
 *   FUZZ_PROTO_PIN:    8 bytes arena size, 1 byte n (chunks asked, at most
 *                      FUZZ_PROTO_PIN_MAX), n x 4 bytes chunk asked, n x 8
 *                      bytes its length, the answer.
 */
#ifndef FUZZ_BRK_PROTO_H
#define FUZZ_BRK_PROTO_H

enum {
    FUZZ_PROTO_REQ = 0,
    FUZZ_PROTO_HELLO,
    FUZZ_PROTO_OPEN,
    FUZZ_PROTO_PIN,
    FUZZ_PROTO_LIST,
    FUZZ_PROTO_STAT,
    FUZZ_PROTO_LAST
};

#define FUZZ_PROTO_PIN_MAX 16u

#endif
