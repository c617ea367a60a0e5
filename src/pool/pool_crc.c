/*
 * CRC32C (Castagnoli).  Metadata records are small, but the broker checks
 * every chunk it fills (megabytes), and the byte-wise table ran at under
 * 1 GB/s: 75% of a fill's time.  Where the CPU has SSE4.2, its crc32
 * instruction computes the same polynomial eight bytes at a time; the
 * table stays for other CPUs (and is what the test compares against).
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
__attribute__((target("sse4.2")))
static uint32_t cxlpool_crc32c_sse42(uint32_t crc, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    uint64_t c = ~crc, w;

    for (; len && ((uintptr_t)p & 7); --len) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
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
