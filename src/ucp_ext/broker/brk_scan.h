/*
 * Dataset scanners: from `cxl-broker add NAME PATH...` to the sample index
 * of one dataset version (brk_desc_t), built once, in memory, in the exact
 * records of the pool-resident metadata blob (brk_layout.h).
 *
 * Formats (brk_format_t):
 *   FILES  a directory, walked recursively in bytewise path order, or
 *          regular files given as paths: one sample per regular file.
 *   NPY    .npy arrays (C order, simple dtypes): one sample per row
 *          (shape[0] rows of shape[1:]); file info "descr=<f4 shape=3,32,32".
 *   TAR    WebDataset .tar shards: consecutive members with the same key
 *          (path up to the first '.' of the last component) form a sample;
 *          its bytes are the members' headers and data as they lie in the
 *          shard, so a sample is itself a small tar stream.
 *   RAW    files of fixed-size records (record_size): one sample per record.
 *   AUTO   NPY if every path ends in .npy, TAR if every path ends in .tar,
 *          else FILES; RAW only when asked for.
 *
 * Chunking: samples in order; a chunk takes consecutive samples while its
 * length stays within chunk_size; a sample longer than chunk_size gets a
 * chunk of its own; a sample never straddles chunks.  Contiguous bytes of
 * one file within a chunk are one segment, so a chunk of a .npy, .tar or
 * raw file is one large sequential read.
 */
#ifndef BRK_SCAN_H
#define BRK_SCAN_H

#include "brk_layout.h"

#include <stddef.h>
#include <stdint.h>

#define BRK_DEFAULT_CHUNK_SIZE (4ull << 20)

typedef struct {
    brk_format_t format;        /* BRK_FMT_AUTO: from the paths */
    uint64_t     chunk_size;    /* 0: BRK_DEFAULT_CHUNK_SIZE */
    uint64_t     record_size;   /* RAW: bytes per record, required */
} brk_scan_opts_t;

typedef struct {
    brk_format_t  format;       /* the one used (never AUTO) */
    uint64_t      chunk_size;
    uint64_t      record_size;
    brk_sample_t *samples;
    brk_chunk_t  *chunks;
    brk_seg_t    *segs;
    brk_file_t   *files;
    char         *strings;      /* paths and infos, no NULs */
    uint64_t      nsamples, nchunks, nsegs, nfiles, strings_len;
    uint64_t      bytes;        /* sum of sample lengths */
    uint64_t      fingerprint;  /* format, options, each path, size, mtime */
    /* capacities, private to the builder */
    uint64_t      cap_samples, cap_chunks, cap_segs, cap_files, cap_strings;
} brk_desc_t;

/*
 * Scan paths into desc (zeroed first).  Returns 0, or -1 with one line in
 * err that names the file and what is wrong with it (missing, unreadable,
 * truncated, does not parse, unsupported dtype, ...); desc is then freed.
 */
int  brk_scan(const char *const *paths, unsigned npaths,
              const brk_scan_opts_t *opts, brk_desc_t *desc,
              char *err, size_t errlen);
void brk_desc_free(brk_desc_t *desc);

/* Size of the metadata blob, and writing it (crc included) into dst. */
uint64_t brk_desc_meta_size(const brk_desc_t *desc);
void     brk_desc_write_meta(const brk_desc_t *desc, void *dst);

/*
 * Validate a metadata blob of len bytes from untrusted memory: magic,
 * crc, every offset and count inside the blob, every sample inside its
 * chunk, every segment inside its chunk and file, chunks covering their
 * samples in order.  Returns 0, or -1 with the first problem in err.
 */
int brk_meta_check(const void *blob, uint64_t len, char *err, size_t errlen);

/*
 * The same, and the header exactly as checked in *checked: a reader of a
 * blob in shared memory uses that private copy, never the blob's header,
 * which a peer may rewrite after the check.
 */
int brk_meta_check_hdr(const void *blob, uint64_t len, brk_meta_t *checked,
                       char *err, size_t errlen);

/*
 * The arrays of a blob that brk_meta_check() accepted, for its readers
 * (the broker's fills, the client library): the one place that turns the
 * header's offsets into pointers.  The blob must be 8-aligned in memory.
 */
typedef struct {
    const brk_meta_t   *meta;
    const brk_sample_t *samples;
    const brk_chunk_t  *chunks;
    const brk_seg_t    *segs;
    const brk_file_t   *files;
    const char         *strings;
} brk_meta_view_t;

void brk_meta_view(const void *blob, brk_meta_view_t *view);

/* Names of formats and policies ("files", "npy", "tar", "raw"; "pin",
 * "lru", "plan"), and their parsers (0, or -1 for an unknown name). */
const char *brk_format_name(brk_format_t format);
int         brk_format_parse(const char *name, brk_format_t *format);
const char *brk_policy_name(brk_policy_t policy);
int         brk_policy_parse(const char *name, brk_policy_t *policy);

#endif
