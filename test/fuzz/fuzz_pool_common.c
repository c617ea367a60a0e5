/* Pool images and the operations run on them (fuzz_pool_common.h). */
#define _GNU_SOURCE
#include "fuzz_pool_common.h"

#include "pool_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FUZZ_POOL_MAX_OPS 16

#define fuzz_pool_fail(...) \
    do { \
        fprintf(stderr, "fuzz_pool: " __VA_ARGS__); \
        fputc('\n', stderr); \
        abort(); \
    } while (0)

void fuzz_pool_image_init(fuzz_pool_image_t *img, uint64_t size,
                          const uint8_t *prefix, size_t len)
{
    img->size = size;
    /* not calloc: ASan would clear megabytes of recycled memory per input */
    img->orig = mmap(NULL, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (img->orig == MAP_FAILED) {
        fuzz_pool_fail("out of memory");
    }
    memcpy(img->orig, prefix, (len < size) ? len : size);
    /* a metadata lock held by a foreign token is broken after this long
     * (default 10 s: a fuzz input would be a hang) */
    setenv("CXLPOOL_LOCK_TIMEOUT_MS", "1", 0);
    img->fd = memfd_create("pool", MFD_CLOEXEC);
    if ((img->fd < 0) || (ftruncate(img->fd, (off_t)size) != 0)) {
        perror("fuzz_pool: memfd");
        abort();
    }
    snprintf(img->path, sizeof(img->path), "/proc/self/fd/%d", img->fd);
}

void fuzz_pool_image_write(fuzz_pool_image_t *img, uint64_t len)
{
    if (len > img->size) {
        len = img->size;
    }
    if (pwrite(img->fd, img->orig, len, 0) != (ssize_t)len) {
        perror("fuzz_pool: pwrite");
        abort();
    }
}

void fuzz_pool_image_free(fuzz_pool_image_t *img)
{
    close(img->fd);
    munmap(img->orig, img->size);
}

void fuzz_pool_fix_sb_crc(uint8_t *orig)
{
    cxlpool_sb_t *sb = (cxlpool_sb_t*)orig;

    sb->crc = cxlpool_sb_crc(sb);
}

/* [off, off + count * rec) inside [0, size), without overflow */
static int fuzz_pool_table_in(uint64_t off, uint64_t count, uint64_t rec,
                              uint64_t size)
{
    return (off <= size) && (count <= (size - off) / rec);
}

void fuzz_pool_fix_record_crcs(uint8_t *orig, uint64_t size)
{
    const cxlpool_sb_t *sb = (const cxlpool_sb_t*)orig;
    cxlpool_attach_rec_t *att;
    cxlpool_extent_rec_t *ext;
    uint32_t i;

    if (fuzz_pool_table_in(sb->attach_offset, sb->max_attach, sizeof(*att),
                           size) && !(sb->attach_offset % CXLPOOL_LINE)) {
        att = (cxlpool_attach_rec_t*)(orig + sb->attach_offset);
        for (i = 0; i < sb->max_attach; ++i) {
            if (att[i].state != CXLPOOL_ATT_FREE) {
                att[i].crc = cxlpool_attach_crc(&att[i]);
            }
        }
    }
    if (fuzz_pool_table_in(sb->extent_offset, sb->max_extents, sizeof(*ext),
                           size) && !(sb->extent_offset % CXLPOOL_LINE)) {
        ext = (cxlpool_extent_rec_t*)(orig + sb->extent_offset);
        for (i = 0; i < sb->max_extents; ++i) {
            if (ext[i].state != CXLPOOL_EXT_FREE) {
                ext[i].crc = cxlpool_extent_crc(&ext[i]);
            }
        }
    }
}

/* What an accepted pool looks like (copied before close). */
typedef struct {
    uint64_t size, heap_offset, attach_offset, extent_offset;
    uint32_t max_attach, max_extents, nr_hosts, host_index;
} fuzz_pool_geom_t;

static void fuzz_pool_check_geometry(cxlpool_t *pool, const fuzz_pool_image_t *img,
                                     fuzz_pool_geom_t *g)
{
    const cxlpool_sb_t *sb = pool->sb;
    uint64_t att_end, ext_end;
    uint32_t k;

    g->size          = sb->size;
    g->heap_offset   = sb->heap_offset;
    g->attach_offset = sb->attach_offset;
    g->extent_offset = sb->extent_offset;
    g->max_attach    = sb->max_attach;
    g->max_extents   = sb->max_extents;
    g->nr_hosts      = pool->nr_hosts;
    g->host_index    = pool->host_index;

    if ((sb->size != img->size) || (pool->size != img->size)) {
        fuzz_pool_fail("accepted a pool of %lu bytes in a store of %lu",
                       (unsigned long)sb->size, (unsigned long)img->size);
    }
    if ((g->nr_hosts == 0) || (g->nr_hosts > CXLPOOL_MAX_HOSTS) ||
        (g->nr_hosts > g->max_attach) || (g->nr_hosts > g->max_extents)) {
        fuzz_pool_fail("accepted %u host partitions", g->nr_hosts);
    }
    if ((g->attach_offset < CXLPOOL_ATTACH_OFFSET) ||
        !fuzz_pool_table_in(g->attach_offset, g->max_attach,
                            sizeof(cxlpool_attach_rec_t), g->size)) {
        fuzz_pool_fail("attachment table at 0x%lx (%u slots) outside the "
                       "metadata area", (unsigned long)g->attach_offset,
                       g->max_attach);
    }
    att_end = g->attach_offset + (uint64_t)g->max_attach *
                                 sizeof(cxlpool_attach_rec_t);
    if ((g->extent_offset < att_end) ||
        !fuzz_pool_table_in(g->extent_offset, g->max_extents,
                            sizeof(cxlpool_extent_rec_t), g->size)) {
        fuzz_pool_fail("extent table at 0x%lx (%u records) overlaps the "
                       "attachment table or leaves the image",
                       (unsigned long)g->extent_offset, g->max_extents);
    }
    ext_end = g->extent_offset + (uint64_t)g->max_extents *
                                 sizeof(cxlpool_extent_rec_t);
    if ((g->heap_offset < ext_end) || (g->heap_offset >= g->size) ||
        (sb->heap_offset + sb->heap_size != g->size)) {
        fuzz_pool_fail("heap at 0x%lx overlaps the tables or leaves the "
                       "image", (unsigned long)g->heap_offset);
    }
    if ((pool->att != (void*)(pool->base + g->attach_offset)) ||
        (pool->ext != (void*)(pool->base + g->extent_offset))) {
        fuzz_pool_fail("tables are not where the superblock says");
    }
    for (k = 0; k < g->nr_hosts; ++k) {
        if ((cxlpool_arena_start(sb, k) < g->heap_offset) ||
            (cxlpool_arena_end(sb, k) > g->size) ||
            (cxlpool_arena_start(sb, k) >= cxlpool_arena_end(sb, k))) {
            fuzz_pool_fail("heap arena %u outside the heap", k);
        }
    }
}

static void fuzz_pool_check_extent(const fuzz_pool_geom_t *g,
                                   const cxlpool_extent_t *ext, const char *what)
{
    if ((ext->offset < g->heap_offset) || (ext->offset > g->size) ||
        (ext->length == 0) || (ext->length > g->size - ext->offset) ||
        (ext->index >= g->max_extents)) {
        fuzz_pool_fail("%s reported extent %u at 0x%lx+%lu outside the heap "
                       "[0x%lx, 0x%lx)", what, ext->index,
                       (unsigned long)ext->offset, (unsigned long)ext->length,
                       (unsigned long)g->heap_offset, (unsigned long)g->size);
    }
    if (memchr(ext->name, '\0', sizeof(ext->name)) == NULL) {
        fuzz_pool_fail("%s reported an unterminated name", what);
    }
}

static void fuzz_pool_extent_cb(const cxlpool_extent_t *ext, void *arg)
{
    fuzz_pool_check_extent(arg, ext, "foreach_extent");
}

static void fuzz_pool_attach_cb(const cxlpool_attach_info_t *att, void *arg)
{
    const fuzz_pool_geom_t *g = arg;

    if ((att->slot >= g->max_attach) ||
        (memchr(att->hostname, '\0', sizeof(att->hostname)) == NULL)) {
        fuzz_pool_fail("foreach_attach reported slot %u of %u", att->slot,
                       g->max_attach);
    }
}

static void fuzz_pool_msg_cb(const char *line, void *arg)
{
    const char *c;

    (void)arg;
    /* one line of plain text, whatever the records hold */
    for (c = line; *c != '\0'; ++c) {
        if ((unsigned char)*c < 0x20) {
            fuzz_pool_fail("check message with control character 0x%02x: "
                           "'%s'", (unsigned char)*c, line);
        }
    }
}

static uint64_t fuzz_pool_u64(const uint8_t **p, const uint8_t *end)
{
    uint64_t v = 0;
    size_t n   = ((size_t)(end - *p) < sizeof(v)) ? (size_t)(end - *p) :
                 sizeof(v);

    memcpy(&v, *p, n);
    *p += n;
    return v;
}

/* One operation; returns 0 to stop (the handle is gone). */
static void fuzz_pool_op(cxlpool_t *pool, fuzz_pool_image_t *img,
                         const fuzz_pool_geom_t *g, uint8_t op,
                         const uint8_t **p, const uint8_t *end)
{
    cxlpool_check_report_t rep;
    cxlpool_extent_t ext;
    cxlpool_stats_t stats;
    uint64_t a, b, arena_start, arena_end;
    char name[CXLPOOL_NAME_MAX];
    uint8_t scribble[8];

    switch (op % 12) {
    case 0:
        cxlpool_check(pool, 0, &rep, fuzz_pool_msg_cb, NULL);
        break;
    case 1:
        if (!pool->rdonly) {
            cxlpool_check(pool, 1, &rep, fuzz_pool_msg_cb, NULL);
        }
        break;
    case 2:
        cxlpool_foreach_extent(pool, fuzz_pool_extent_cb, (void*)g);
        break;
    case 3:
        cxlpool_foreach_attach(pool, fuzz_pool_attach_cb, (void*)g);
        break;
    case 4:
        if ((cxlpool_stats(pool, &stats) == CXLPOOL_OK) &&
            ((stats.extents_used > g->max_extents) ||
             (stats.attach_used > g->max_attach) ||
             (stats.largest_free > stats.free_bytes))) {
            fuzz_pool_fail("stats: %u of %u extents, largest free %lu of %lu",
                           stats.extents_used, g->max_extents,
                           (unsigned long)stats.largest_free,
                           (unsigned long)stats.free_bytes);
        }
        break;
    case 5:
        a = fuzz_pool_u64(p, end);
        memset(name, 0, sizeof(name));
        memcpy(name, &a, sizeof(a));
        if (name[0] == '\0') {
            name[0] = 'x';
        }
        if (cxlpool_lookup(pool, name, &ext) == CXLPOOL_OK) {
            fuzz_pool_check_extent(g, &ext, "lookup");
        }
        break;
    case 6:
        a = fuzz_pool_u64(p, end);
        b = fuzz_pool_u64(p, end) & 0xffffff;
        if (cxlpool_extent_find(pool, a, b, &ext) == CXLPOOL_OK) {
            fuzz_pool_check_extent(g, &ext, "extent_find");
            if ((a < ext.offset) || (b > ext.length) ||
                (a - ext.offset > ext.length - b)) {
                fuzz_pool_fail("extent_find: extent does not cover the range");
            }
        }
        break;
    case 7:
        a = fuzz_pool_u64(p, end);
        b = fuzz_pool_u64(p, end);
        if ((cxlpool_extent_check(pool, (uint32_t)a, (uint32_t)(a >> 32), b,
                                  b >> 40) == CXLPOOL_OK) &&
            ((b < g->heap_offset) || (b > g->size) ||
             ((b >> 40) > g->size - b))) {
            fuzz_pool_fail("extent_check accepted 0x%lx+%lu outside the heap",
                           (unsigned long)b, (unsigned long)(b >> 40));
        }
        break;
    case 8:
        a = fuzz_pool_u64(p, end);
        if ((g->host_index == CXLPOOL_HOST_INDEX_NONE) ||
            (cxlpool_alloc(pool, (a & 0xfffff) + 1, 1ull << ((a >> 20) % 22),
                           NULL, (pool->token == 0) ? CXLPOOL_ALLOC_PERSIST : 0,
                           &ext) != CXLPOOL_OK)) {
            break;
        }
        fuzz_pool_check_extent(g, &ext, "alloc");
        arena_start = cxlpool_arena_start(pool->sb, g->host_index);
        arena_end   = cxlpool_arena_end(pool->sb, g->host_index);
        if ((ext.offset < arena_start) || (ext.length > arena_end - ext.offset)) {
            fuzz_pool_fail("alloc: 0x%lx+%lu outside the own heap arena "
                           "[0x%lx, 0x%lx)", (unsigned long)ext.offset,
                           (unsigned long)ext.length,
                           (unsigned long)arena_start, (unsigned long)arena_end);
        }
        if (cxlpool_free(pool, ext.offset) != CXLPOOL_OK) {
            fuzz_pool_fail("free of a fresh allocation failed: %s",
                           cxlpool_last_error());
        }
        break;
    case 9:
        cxlpool_free(pool, fuzz_pool_u64(p, end));
        break;
    case 10:
        if (!pool->rdonly && (g->host_index != CXLPOOL_HOST_INDEX_NONE)) {
            cxlpool_recover(pool, NULL, NULL);
        }
        break;
    case 11:
        /* a peer writes 8 bytes somewhere in the metadata while we run
         * (superblock included: what was validated at open must hold) */
        a = fuzz_pool_u64(p, end) % g->heap_offset;
        b = fuzz_pool_u64(p, end);
        memcpy(scribble, &b, sizeof(scribble));
        if (a + sizeof(scribble) > g->heap_offset) {
            a = g->heap_offset - sizeof(scribble);
        }
        if (pwrite(img->fd, scribble, sizeof(scribble), (off_t)a) !=
            (ssize_t)sizeof(scribble)) {
            fuzz_pool_fail("scribble pwrite");
        }
        memcpy(img->orig + a, scribble, sizeof(scribble));
        break;
    }
}

/* The heap [from, size) of the memory file is still zero: the harness
 * never writes it, so only pages the file holds need a look (SEEK_DATA). */
static void fuzz_pool_check_heap(const fuzz_pool_image_t *img, uint64_t from)
{
    static const uint8_t zero[4096];
    uint8_t buf[4096];
    off_t data, hole;
    uint64_t pos;
    ssize_t n;

    for (pos = from; pos < img->size; pos = (uint64_t)hole) {
        data = lseek(img->fd, (off_t)pos, SEEK_DATA);
        if (data < 0) {
            return; /* ENXIO: no data up to the end */
        }
        hole = lseek(img->fd, data, SEEK_HOLE);
        for (pos = (uint64_t)data; pos < (uint64_t)hole; pos += (uint64_t)n) {
            n = pread(img->fd, buf, sizeof(buf), (off_t)pos);
            if (n <= 0) {
                fuzz_pool_fail("pread for the heap check");
            }
            if (memcmp(buf, zero, (size_t)n)) {
                fuzz_pool_fail("the heap near 0x%lx was written",
                               (unsigned long)pos);
            }
        }
    }
}

/* Nothing outside the lock lines and the tables changed. */
static void fuzz_pool_check_writes(const fuzz_pool_image_t *img,
                                   const fuzz_pool_geom_t *g)
{
    uint64_t ranges[3][2] = {
        {CXLPOOL_LOCK_OFFSET, CXLPOOL_LOCK_OFFSET +
                              (uint64_t)g->nr_hosts * sizeof(cxlpool_lock_t)},
        {g->attach_offset, g->attach_offset + (uint64_t)g->max_attach *
                                              sizeof(cxlpool_attach_rec_t)},
        {g->extent_offset, g->extent_offset + (uint64_t)g->max_extents *
                                              sizeof(cxlpool_extent_rec_t)}
    };
    uint64_t pos = 0, next, i, n;
    uint8_t now[16384];
    unsigned r;

    /* ranges are ordered and disjoint (fuzz_pool_check_geometry); read by
     * pread: a read fault on a hole of the memory file would fill it */
    for (r = 0; r <= 3; ++r) {
        next = (r < 3) ? ranges[r][0] : g->heap_offset;
        for (; pos < next; pos += n) {
            n = ((next - pos) < sizeof(now)) ? next - pos : sizeof(now);
            if (pread(img->fd, now, n, (off_t)pos) != (ssize_t)n) {
                fuzz_pool_fail("pread for the write check");
            }
            if (memcmp(now, img->orig + pos, n)) {
                for (i = 0; (i < n) && (now[i] == img->orig[pos + i]); ++i) {
                }
                fuzz_pool_fail("byte 0x%lx outside the metadata tables was "
                               "written", (unsigned long)(pos + i));
            }
        }
        if (r < 3) {
            pos = ranges[r][1];
        }
    }
    fuzz_pool_check_heap(img, g->heap_offset);
}

void fuzz_pool_run(fuzz_pool_image_t *img, unsigned flags, const uint8_t *ops,
                   size_t len)
{
    const uint8_t *p = ops, *end = ops + len;
    cxlpool_params_t params;
    cxlpool_status_t status;
    fuzz_pool_geom_t geom;
    cxlpool_info_t info;
    cxlpool_t *pool;
    unsigned n;

    status = cxlpool_probe(img->path, &info);
    if ((status == CXLPOOL_OK) && (info.size != img->size)) {
        fuzz_pool_fail("probe accepted a pool of %lu bytes in %lu",
                       (unsigned long)info.size, (unsigned long)img->size);
    }

    cxlpool_params_init(&params);
    params.path       = img->path;
    params.coherence  = (flags & FUZZ_POOL_SW) ? CXL_COH_SW : CXL_COH_HW;
    params.host_index = (flags & FUZZ_POOL_HOST1) ? 1 : 0;
    params.flags      = CXLPOOL_NO_HEARTBEAT;
    if (flags & FUZZ_POOL_RDONLY) {
        params.flags |= CXLPOOL_READONLY;
    } else if (!(flags & FUZZ_POOL_ATTACH)) {
        params.flags |= CXLPOOL_NO_ATTACH;
    }
    params.lease_ms = 1000;

    status = cxlpool_open(&params, &pool);
    if (status != CXLPOOL_OK) {
        if (cxlpool_last_error()[0] == '\0') {
            fuzz_pool_fail("open refused (%d) without a message", status);
        }
        return;
    }
    fuzz_pool_check_geometry(pool, img, &geom);
    for (n = 0; (n < FUZZ_POOL_MAX_OPS) && (p < end); ++n) {
        uint8_t op = *p++;
        fuzz_pool_op(pool, img, &geom, op, &p, end);
    }
    cxlpool_close(pool);
    fuzz_pool_check_writes(img, &geom);
}

int fuzz_pool_split(const uint8_t **data, size_t *size, uint8_t *ctl,
                    const uint8_t **ops, size_t *nops)
{
    if (*size < 2) {
        return -1;
    }
    *ctl  = (*data)[0];
    *nops = (*data)[1];
    if (*nops > *size - 2) {
        *nops = *size - 2;
    }
    *ops   = *data + 2;
    *data += 2 + *nops;
    *size -= 2 + *nops;
    return 0;
}
