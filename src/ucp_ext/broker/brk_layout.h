/*
 * The broker's pool-resident state (doc/design/broker.md).
 *
 * Everything lives in one persistent pool extent named "cxl-broker", the
 * arena, so one UCP key covers it and a client of any pod reaches every
 * byte with ucp_get.  Nothing here is a pointer: every reference is an
 * offset from the arena base.
 *
 *   arena:  [brk_hdr_t][brk_vrec_t x BRK_MAX_VERSIONS][heap ...]
 *   heap:   metadata blobs of dataset versions (immutable once published),
 *           chunk-state arrays, pin bitmaps of local readers, chunk bytes.
 *
 * One writer: the broker writes every line here except a local reader's
 * pin bitmap, which only that reader writes (one writer per line).
 */
#ifndef BRK_LAYOUT_H
#define BRK_LAYOUT_H

#include <stdint.h>

#define BRK_ARENA_NAME      "cxl-broker"
#define BRK_MAGIC           0x314b5242584c4355ull   /* "UCLXBRK1" */
#define BRK_META_MAGIC      0x3154454d4b524258ull   /* "XBRKMET1" */
#define BRK_LAYOUT_VERSION  2u     /* 2: records of 256 bytes, 128 KiB */
#define BRK_MAX_VERSIONS    256u
#define BRK_NAME_MAX        48u    /* dataset name, with the NUL */
#define BRK_ADDR_MAX        64u    /* "HOST:PORT", with the NUL */
#define BRK_LINE            64u

/* Arena header: written by the broker at creation and at each start. */
typedef struct {
    uint64_t magic;
    uint32_t layout_version;
    uint32_t hdr_size;          /* sizeof(brk_hdr_t) */
    uint64_t arena_size;        /* bytes, header included */
    uint64_t heap_off;          /* first heap byte */
    uint64_t chunk_size;        /* default chunk size of new datasets */
    uint64_t create_ns;
    uint64_t start_ns;          /* last broker start */
    uint64_t broker_token;      /* pool attachment of the serving broker */
    int32_t  broker_pid;
    uint32_t boot;              /* broker starts, 1 for the first */
    uint64_t next_dsid;         /* dataset ids are never reused */
    char     addr[BRK_ADDR_MAX];/* where the serving broker listens */
    uint32_t crc;               /* CRC32C of the header, crc = 0 */
    uint32_t pad;
} brk_hdr_t;

typedef enum {
    BRK_VREC_FREE = 0,
    BRK_VREC_BUILDING,          /* metadata being written: not visible */
    BRK_VREC_ACTIVE,            /* newest version of its dataset */
    BRK_VREC_RETIRING           /* replaced or removed; freed at last close */
} brk_vrec_state_t;

typedef enum {
    BRK_FMT_AUTO = 0,           /* from the paths (add only) */
    BRK_FMT_FILES,              /* a directory: one sample per file */
    BRK_FMT_NPY,                /* .npy arrays: one sample per row */
    BRK_FMT_TAR,                /* WebDataset .tar shards: one per key */
    BRK_FMT_RAW,                /* raw files of fixed-size records */
    BRK_FMT_LAST
} brk_format_t;

typedef enum {
    BRK_POLICY_PIN = 0,         /* a fixed subset stays, the rest streams */
    BRK_POLICY_LRU,
    BRK_POLICY_PLAN,            /* evict by next use in the epoch plan */
    BRK_POLICY_LAST
} brk_policy_t;

/* One dataset version: 256 bytes, written only by the broker. */
typedef struct {
    char     name[BRK_NAME_MAX];
    uint32_t state;             /* brk_vrec_state_t */
    uint32_t version;           /* 1, 2, ... per name */
    uint64_t dsid;              /* unique per (name, version) */
    uint32_t format;            /* brk_format_t */
    uint32_t policy;            /* brk_policy_t */
    uint64_t nsamples;
    uint64_t nchunks;
    uint64_t nfiles;
    uint64_t bytes;             /* sum of sample lengths */
    uint64_t chunk_size;
    uint64_t pin_bytes;         /* pin policy: bytes that stay resident */
    uint64_t meta_off;          /* arena offset of the brk_meta_t blob */
    uint64_t meta_len;
    uint64_t states_off;        /* arena offset of brk_cstate_t[nchunks] */
    uint64_t fingerprint;       /* of paths, sizes, mtimes, options */
    uint64_t create_ns;
    uint64_t record_size;       /* raw format */
    uint8_t  reserved[256 - 176];
    uint32_t crc;               /* CRC32C of the record, crc = 0 */
    uint32_t pad;
} brk_vrec_t;

/* The header and the version records, before the heap. */
#define BRK_HDR_REGION      ((uint64_t)128 << 10)

_Static_assert(sizeof(brk_vrec_t) == 256, "brk_vrec_t is 256 bytes");
_Static_assert(sizeof(brk_hdr_t) + BRK_MAX_VERSIONS * sizeof(brk_vrec_t) <=
               BRK_HDR_REGION, "the version records end before the heap");

/*
 * Chunk state, one 32-byte entry per chunk, written only by the broker.
 * word = gen << 8 | state.  gen changes on every transition, so a reader
 * that saw (RESIDENT, g) before its get and sees the same word after it
 * knows the bytes it copied were the chunk's (seqlock).  off, len and crc
 * are written before the word that publishes them (release) and change
 * only after the word leaves RESIDENT.
 */
typedef enum {
    BRK_CHUNK_ABSENT = 0,
    BRK_CHUNK_LOADING,          /* a reader thread fills it */
    BRK_CHUNK_RESIDENT,
    BRK_CHUNK_EVICTING          /* pin bitmaps being checked */
} brk_chunk_state_t;

typedef struct {
    uint64_t word;              /* gen << 8 | brk_chunk_state_t */
    uint64_t off;               /* arena offset of the bytes */
    uint64_t len;
    uint32_t crc;               /* CRC32C of the bytes */
    uint32_t pad;
} brk_cstate_t;

#define BRK_CSTATE_STATE(w)  ((uint32_t)((w) & 0xff))
#define BRK_CSTATE_GEN(w)    ((w) >> 8)
#define BRK_CSTATE_WORD(g, s) (((uint64_t)(g) << 8) | (uint64_t)(s))

/* ---- the metadata blob of a dataset version: immutable once ACTIVE ---- */

/* A sample: bytes [off, off + len) of chunk `chunk`, from file `file`. */
typedef struct {
    uint32_t chunk;
    uint32_t file;
    uint64_t off;               /* in the chunk */
    uint64_t len;
} brk_sample_t;

/* A chunk: its bytes are segments, in order, laid end to end. */
typedef struct {
    uint64_t len;
    uint64_t first_sample;
    uint32_t nsamples;
    uint32_t first_seg;
    uint32_t nsegs;
    uint32_t pad;
} brk_chunk_t;

/* A run of one file's bytes that becomes part of a chunk. */
typedef struct {
    uint32_t file;
    uint32_t pad;
    uint64_t file_off;
    uint64_t len;
    uint64_t chunk_off;
} brk_seg_t;

/*
 * A file.  info: format-specific text, e.g. "descr=<f4 shape=3,32,32" for
 * a .npy row, "record=4096" for raw records.  Strings are in the blob's
 * string table, without NUL.
 */
typedef struct {
    uint64_t size;
    int64_t  mtime_ns;
    uint32_t path_off;
    uint32_t path_len;
    uint32_t info_off;
    uint32_t info_len;
} brk_file_t;

/* Header of the blob; the arrays follow at the given offsets (8-aligned). */
typedef struct {
    uint64_t magic;             /* BRK_META_MAGIC */
    uint64_t len;               /* whole blob */
    uint32_t format;
    uint32_t pad;
    uint64_t nsamples, nchunks, nsegs, nfiles, strings_len;
    uint64_t samples_off, chunks_off, segs_off, files_off, strings_off;
    uint32_t crc;               /* CRC32C of the blob, crc = 0 */
    uint32_t pad2;
} brk_meta_t;

#endif
