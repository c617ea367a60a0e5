/* Memory-file input for the harnesses (fuzz_input.h). */
#define _GNU_SOURCE
#include "fuzz_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int fuzz_input_memfd(const uint8_t *data, size_t size, const char *name,
                     char *path, size_t pathlen)
{
    size_t done = 0;
    ssize_t n;
    int fd;

    fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) {
        perror("fuzz: memfd_create");
        abort();
    }
    while (done < size) {
        n = write(fd, data + done, size - done);
        if (n <= 0) {
            perror("fuzz: write");
            abort();
        }
        done += (size_t)n;
    }
    snprintf(path, pathlen, "/proc/self/fd/%d", fd);
    return fd;
}
