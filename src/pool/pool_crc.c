/*
 * CRC32C (Castagnoli), table driven.  Metadata records are small, so the
 * table is fast enough and works on every CPU and in every emulator.
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

uint32_t cxlpool_crc32c(uint32_t crc, const void *buf, size_t len)
{
    const uint8_t *p = buf;

    pthread_once(&cxlpool_crc_once, cxlpool_crc_init);
    crc = ~crc;
    while (len--) {
        crc = cxlpool_crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    }
    return ~crc;
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
