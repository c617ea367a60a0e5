/* A formatted pool in a memory file (fuzz_pool_file.h). */
#define _GNU_SOURCE
#include "fuzz_pool_file.h"

#include "pool_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define fuzz_pool_file_check(_cond, _what) \
    do { \
        if (!(_cond)) { \
            fprintf(stderr, "fuzz: pool file: %s failed\n", _what); \
            abort(); \
        } \
    } while (0)

void fuzz_pool_file_make(uint64_t size, const char *uuid, char *path,
                         size_t len)
{
    cxlpool_params_t params;
    void *base;
    int fd;

    fd = memfd_create("ucx-cxl-fuzz.pool", MFD_CLOEXEC);
    fuzz_pool_file_check((fd >= 0) && (ftruncate(fd, (off_t)size) == 0),
                         "memfd");
    base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    fuzz_pool_file_check(base != MAP_FAILED, "mmap pool");
    cxlpool_params_init(&params);
    params.coherence = CXL_COH_HW;
    fuzz_pool_file_check(cxlpool_format(base, size, &params) == CXLPOOL_OK,
                         "cxlpool_format");
    if (uuid != NULL) {
        memcpy(((cxlpool_sb_t*)base)->uuid, uuid, CXLPOOL_UUID_LEN);
        ((cxlpool_sb_t*)base)->crc = cxlpool_sb_crc(base);
    }
    munmap(base, size);
    snprintf(path, len, "/proc/self/fd/%d", fd);
}
