/*
 * CRC32C (Castagnoli).  Metadata records are small, but the broker checks
 * every chunk it fills (megabytes), and the byte-wise table ran at under
 * 1 GB/s: 75% of a fill's time.  Where the CPU has SSE4.2, its crc32
 * instruction computes the same polynomial eight bytes at a time; the
 * table stays for other CPUs (and is what the test compares against).
 *
 * One crc32 instruction waits for the previous one (3 cycles of latency,
 * one issued per cycle): a single stream ran at 6.4 GB/s, 30% of a
 * broker fill.  Long buffers go in rounds of three blocks computed side
 * by side and joined: the CRC register is linear, so the register after
 * A|B|C is shift(R(A), |B|+|C|) ^ shift(R(B), |C|) ^ R(C), where R(B) and
 * R(C) start from 0 and shift(x, n) is x after n zero bytes, a linear map
 * tabulated once per bit for the two block distances.
 */
#include "pool_int.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>

static uint32_t cxlpool_crc_table[256];
static pthread_once_t cxlpool_crc_once = PTHREAD_ONCE_INIT;

static void cxlpool_crc_init(void)
{
    uint32_t i, j, c;

    for (i = 0; i < 256; ++i) {
        c = i;
        for (j = 0; j < 8; ++j) {
            c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : (c >> 1);
        }
        cxlpool_crc_table[i] = c;
    }
}

uint32_t cxlpool_crc32c_table(uint32_t crc, const void *buf, size_t len)
{
    const uint8_t *p = buf;

    pthread_once(&cxlpool_crc_once, cxlpool_crc_init);
    crc = ~crc;
    while (len--) {
        crc = cxlpool_crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    }
    return ~crc;
}

#if defined(__x86_64__)
#define CXLPOOL_CRC_BLOCK 8192      /* bytes of each of the three streams */

/* shift by one and by two blocks of zero bytes, the image of each bit */
static uint32_t cxlpool_crc_shift1[32], cxlpool_crc_shift2[32];
static pthread_once_t cxlpool_crc_shift_once = PTHREAD_ONCE_INIT;

__attribute__((target("sse4.2")))
static uint32_t cxlpool_crc_zeros(uint32_t c, size_t n)
{
    uint64_t r = c;

    for (; n >= 8; n -= 8) {
        r = __builtin_ia32_crc32di(r, 0);
    }
    return (uint32_t)r;
}

__attribute__((target("sse4.2")))
static void cxlpool_crc_shift_init(void)
{
    unsigned i;

    for (i = 0; i < 32; ++i) {
        cxlpool_crc_shift1[i] = cxlpool_crc_zeros(1u << i, CXLPOOL_CRC_BLOCK);
        cxlpool_crc_shift2[i] = cxlpool_crc_zeros(1u << i,
                                                  2 * CXLPOOL_CRC_BLOCK);
    }
}

static uint32_t cxlpool_crc_shift(const uint32_t *image, uint32_t x)
{
    uint32_t r = 0;

    for (; x != 0; x &= x - 1) {
        r ^= image[__builtin_ctz(x)];
    }
    return r;
}

__attribute__((target("sse4.2")))
static uint32_t cxlpool_crc32c_sse42(uint32_t crc, const void *buf, size_t len)
{
    const size_t block = CXLPOOL_CRC_BLOCK;
    const uint8_t *p   = buf;
    uint64_t c = ~crc, w, a, b, d, wb, wd;
    size_t k;

    for (; len && ((uintptr_t)p & 7); --len) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
    }
    if (len >= 3 * block) {
        pthread_once(&cxlpool_crc_shift_once, cxlpool_crc_shift_init);
    }
    for (; len >= 3 * block; len -= 3 * block, p += 3 * block) {
        a = c;
        b = 0;
        d = 0;
        for (k = 0; k < block; k += 8) {
            memcpy(&w, p + k, sizeof(w));
            memcpy(&wb, p + block + k, sizeof(wb));
            memcpy(&wd, p + 2 * block + k, sizeof(wd));
            a = __builtin_ia32_crc32di(a, w);
            b = __builtin_ia32_crc32di(b, wb);
            d = __builtin_ia32_crc32di(d, wd);
        }
        c = cxlpool_crc_shift(cxlpool_crc_shift2, (uint32_t)a) ^
            cxlpool_crc_shift(cxlpool_crc_shift1, (uint32_t)b) ^ (uint32_t)d;
    }
    for (; len >= 8; len -= 8, p += 8) {
        memcpy(&w, p, sizeof(w));
        c = __builtin_ia32_crc32di(c, w);
    }
    for (; len; --len) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
    }
    return ~(uint32_t)c;
}
#endif

uint32_t cxlpool_crc32c(uint32_t crc, const void *buf, size_t len)
{
#if defined(__x86_64__)
    static int hw = -1;

    if (hw < 0) {
        hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    }
    if (hw) {
        return cxlpool_crc32c_sse42(crc, buf, len);
    }
#endif
    return cxlpool_crc32c_table(crc, buf, len);
}

uint32_t cxlpool_sb_crc(const cxlpool_sb_t *sb)
{
    return cxlpool_crc32c(0, sb, offsetof(cxlpool_sb_t, crc));
}

uint32_t cxlpool_attach_crc(const cxlpool_attach_rec_t *rec)
{
    /* the state word is covered as "active": a free slot is not checked */
    cxlpool_attach_rec_t tmp;

    memcpy(&tmp, (const void*)rec, offsetof(cxlpool_attach_rec_t, crc));
    tmp.state = CXLPOOL_ATT_ACTIVE;
    return cxlpool_crc32c(0, &tmp, offsetof(cxlpool_attach_rec_t, crc));
}

uint32_t cxlpool_extent_crc(const cxlpool_extent_rec_t *rec)
{
    cxlpool_extent_rec_t tmp;

    memcpy(&tmp, (const void*)rec, sizeof(tmp));
    tmp.state = CXLPOOL_EXT_ALLOCATED;
    tmp.crc   = 0;
    return cxlpool_crc32c(0, &tmp, sizeof(tmp));
}
