/*
 * Harness: the broker's .npy scanner (brk_scan_npy.c) on arbitrary file
 * bytes.  A .npy header is a Python dict literal written by whoever made
 * the dataset; the scanner must accept or refuse it with one error line,
 * and whatever it accepts must produce a sample index that the pool-side
 * checker (brk_meta_check) accepts too, with every segment inside the file.
 */
#include "fuzz_brk.h"
#include "fuzz_input.h"

#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    brk_scan_opts_t opts = { .format = BRK_FMT_NPY, .chunk_size = 4096 };
    char path[64], err[256];
    const char *paths[1] = { path };
    uint64_t fsize = size;
    brk_desc_t desc;
    int fd;

    fd = fuzz_input_memfd(data, size, "x.npy", path, sizeof(path));
    if (brk_scan(paths, 1, &opts, &desc, err, sizeof(err)) == 0) {
        fuzz_brk_check_desc(&desc, &fsize, 1);
        brk_desc_free(&desc);
    } else {
        fuzz_brk_check_err(err);
    }
    close(fd);
    return 0;
}
