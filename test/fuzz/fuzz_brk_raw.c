/*
 * Harness: the broker's raw-record and plain-files scanners
 * (brk_scan_raw.c, brk_scan_files.c) on an arbitrary file.  The input is
 * a mode byte (bit 0: files format, else raw), a 16-bit record size, then
 * the file.  Exact oracle: raw accepts iff the record size is > 0 and
 * divides a non-empty file, with one sample per record; files makes one
 * sample of the whole file.  Either way the index passes the shared
 * checks (fuzz_brk_check_desc).
 */
#include "fuzz_brk.h"
#include "fuzz_input.h"

#include <stdlib.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    brk_scan_opts_t opts = { .chunk_size = 1024 };
    char path[64], err[256];
    const char *paths[1] = { path };
    uint64_t fsize, rs, i;
    brk_desc_t desc;
    int fd, files, rc, want;

    if (size < 3) {
        return 0;
    }
    files            = data[0] & 1;
    rs               = (uint64_t)data[1] | ((uint64_t)data[2] << 8);
    opts.format      = files ? BRK_FMT_FILES : BRK_FMT_RAW;
    opts.record_size = rs;
    fsize            = size - 3;
    fd = fuzz_input_memfd(data + 3, fsize, "x.raw", path, sizeof(path));
    rc = brk_scan(paths, 1, &opts, &desc, err, sizeof(err));
    want = files || ((rs > 0) && (fsize > 0) && (fsize % rs == 0));
    if ((rc == 0) != want) {
        fuzz_brk_fail("%s scan of %llu bytes, record size %llu: %s",
                      files ? "files" : "raw", (unsigned long long)fsize,
                      (unsigned long long)rs, rc ? err : "accepted");
    }
    if (rc == 0) {
        fuzz_brk_check_desc(&desc, &fsize, 1);
        if (desc.nsamples != (files ? 1 : fsize / rs)) {
            fuzz_brk_fail("%llu samples", (unsigned long long)desc.nsamples);
        }
        for (i = 0; i < desc.nsamples; ++i) {
            if (desc.samples[i].len != (files ? fsize : rs)) {
                fuzz_brk_fail("sample %llu has %llu bytes",
                              (unsigned long long)i,
                              (unsigned long long)desc.samples[i].len);
            }
        }
        brk_desc_free(&desc);
    } else {
        fuzz_brk_check_err(err);
    }
    close(fd);
    return 0;
}
