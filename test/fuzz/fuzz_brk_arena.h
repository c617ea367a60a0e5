/*
 * The input format of fuzz_brk_arena, shared with its seed writer: a
 * flags byte, then the arena header, the first FUZZ_ARENA_VRECS version
 * records, and the first bytes of the heap, of an arena of
 * FUZZ_ARENA_SIZE bytes (the rest zero).
 */
#ifndef FUZZ_BRK_ARENA_H
#define FUZZ_BRK_ARENA_H

#include "brk_layout.h"

#define FUZZ_ARENA_HEAP   (64u << 10)
#define FUZZ_ARENA_SIZE   (BRK_HDR_REGION + FUZZ_ARENA_HEAP)
#define FUZZ_ARENA_VRECS  4u

enum {
    FUZZ_ARENA_FIX_HDR    = 1u << 0,  /* store the header's right CRC */
    FUZZ_ARENA_FIX_VRECS  = 1u << 1,  /* ... each record's */
    FUZZ_ARENA_FIX_META   = 1u << 2,  /* ... each record's metadata blob's */
    FUZZ_ARENA_VERIFY     = 1u << 3,  /* serve --verify: chunk CRCs checked */
    FUZZ_ARENA_FIX_CHUNKS = 1u << 4   /* store resident chunks' right CRCs */
};

#endif
