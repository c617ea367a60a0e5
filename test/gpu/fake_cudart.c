/*
 * fake_cudart.c - a stand-in libcudart.so for machines without a GPU, so
 * that the package's CUDA paths (ucx_cxl.data.device: cuda_status,
 * StagingRing) and torch_bench.py's GPU section run through their logic:
 * "device" memory is host memory (malloc), copies are memcpy, done when
 * the call returns, streams and events are tokens.  Copies check their
 * direction against where the pointers came from (a host-to-device copy
 * whose destination is not device memory fails), so code that swaps the
 * arguments or the kind fails here too.  It measures nothing about GPUs.
 *
 *   gcc -shared -fPIC -o DIR/lib64/libcudart.so fake_cudart.c
 *   CUDA_HOME=DIR python3 ...        (device.py looks in $CUDA_HOME/lib64)
 * FAKE_CUDART_CORRUPT set: every host-to-device copy flips one bit of its
 * destination (a check that compares the device's bytes must fail).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { OK = 0, ERR_VALUE = 1, ERR_MEMORY = 2, ERR_DIRECTION = 21 };
enum { H2H = 0, H2D = 1, D2H = 2, D2D = 3, DEFAULT = 4 };

#define MAX_BLOCKS 4096

static struct { char *p; size_t n; int dev; } blocks[MAX_BLOCKS];

static int block_of(const void *ptr, size_t n)
{
    const char *c = ptr;
    int i;

    for (i = 0; i < MAX_BLOCKS; ++i) {
        if ((blocks[i].p != NULL) && (c >= blocks[i].p) &&
            (c + n <= blocks[i].p + blocks[i].n)) {
            return i;
        }
    }
    return -1;
}

static int alloc(void **p, size_t n, int dev)
{
    int i;

    for (i = 0; i < MAX_BLOCKS; ++i) {
        if (blocks[i].p == NULL) {
            blocks[i].p = malloc(n ? n : 1);
            if (blocks[i].p == NULL) {
                return ERR_MEMORY;
            }
            blocks[i].n   = n;
            blocks[i].dev = dev;
            *p = blocks[i].p;
            return OK;
        }
    }
    return ERR_MEMORY;
}

static int release(void *p, int dev)
{
    int i = block_of(p, 0);

    if ((i < 0) || (blocks[i].p != p) || (blocks[i].dev != dev)) {
        return ERR_VALUE;
    }
    free(blocks[i].p);
    blocks[i].p = NULL;
    return OK;
}

/* 1: device memory, 0: host memory (registered or not) */
static int is_dev(const void *p, size_t n)
{
    int i = block_of(p, n);

    return (i >= 0) && blocks[i].dev;
}

int cudaGetDeviceCount(int *count) { *count = 1; return OK; }
int cudaSetDevice(int dev) { return (dev == 0) ? OK : ERR_VALUE; }
int cudaMalloc(void **p, size_t n) { return alloc(p, n, 1); }
int cudaFree(void *p) { return (p == NULL) ? OK : release(p, 1); }
int cudaHostAlloc(void **p, size_t n, unsigned flags) { (void)flags; return alloc(p, n, 0); }
int cudaMallocHost(void **p, size_t n) { return alloc(p, n, 0); }
int cudaFreeHost(void *p) { return release(p, 0); }
int cudaHostRegister(void *p, size_t n, unsigned flags) { (void)p; (void)n; (void)flags; return OK; }
int cudaHostUnregister(void *p) { (void)p; return OK; }

int cudaMemcpy(void *dst, const void *src, size_t n, int kind)
{
    int want_dst = (kind == H2D) || (kind == D2D);
    int want_src = (kind == D2H) || (kind == D2D);

    if ((kind != DEFAULT) &&
        ((is_dev(dst, n) != want_dst) || (is_dev(src, n) != want_src))) {
        return ERR_DIRECTION;
    }
    memmove(dst, src, n);
    if ((kind == H2D) && (n > 0) && (getenv("FAKE_CUDART_CORRUPT") != NULL)) {
        ((unsigned char*)dst)[n / 2] ^= 1;  /* the checks' negative control */
    }
    return OK;
}

int cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *stream)
{
    (void)stream;
    return cudaMemcpy(dst, src, n, kind);
}

static int token;
int cudaStreamCreate(void **s) { *s = &token; return OK; }
int cudaStreamDestroy(void *s) { (void)s; return OK; }
int cudaStreamSynchronize(void *s) { (void)s; return OK; }
int cudaEventCreate(void **e) { *e = &token; return OK; }
int cudaEventDestroy(void *e) { (void)e; return OK; }
int cudaEventRecord(void *e, void *s) { (void)e; (void)s; return OK; }
int cudaEventSynchronize(void *e) { (void)e; return OK; }
int cudaDeviceSynchronize(void) { return OK; }
int cudaGetLastError(void) { return OK; }
int cudaRuntimeGetVersion(int *v) { *v = 12000; return OK; }
int cudaDriverGetVersion(int *v) { *v = 12000; return OK; }

const char *cudaGetErrorString(int err)
{
    switch (err) {
    case OK:            return "no error (fake cudart)";
    case ERR_VALUE:     return "invalid argument (fake cudart)";
    case ERR_MEMORY:    return "out of memory (fake cudart)";
    case ERR_DIRECTION: return "invalid memcpy direction (fake cudart)";
    default:            return "unknown error (fake cudart)";
    }
}
