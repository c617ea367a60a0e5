/*
 * The page size a file store is mapped with.
 *
 * It costs more than it looks: every process takes a fault for each page
 * it first touches, and under shadow paging (some VMs) each one is also a
 * hypervisor exit, about 1.6 us.  A reader of a 64 MiB dataset on 4 KiB
 * pages takes 16384 of them; on the 2 MiB pages a DAX device is mapped
 * with, 32.  So an emulated pool should sit where the kernel backs it with
 * huge pages, and the tools say where it does not.
 *
 *   hugetlbfs                          its block size
 *   tmpfs huge=always | within_size    the PMD size
 *   tmpfs huge=advise                  the PMD size (the map asks for it
 *                                      with MADV_HUGEPAGE)
 *   tmpfs huge=never or no huge=       the base page, unless the kernel's
 *                                      shmem_enabled is "force"
 *   anything else                      the base page
 */
#include "pool_int.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>

#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC 0x958458f6
#endif
#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

#define CXLPOOL_THP_DIR "/sys/kernel/mm/transparent_hugepage/"

/* The bracketed word of a sysfs choice file ("always [never] force"). */
static int cxlpool_pages_sysfs_choice(const char *file, char *out, size_t len)
{
    char buf[128], *lb, *rb;
    FILE *f = fopen(file, "re");
    int ok;

    if (f == NULL) {
        return 0;
    }
    ok = (fgets(buf, sizeof(buf), f) != NULL);
    fclose(f);
    lb = ok ? strchr(buf, '[') : NULL;
    rb = (lb != NULL) ? strchr(lb, ']') : NULL;
    if (rb == NULL) {
        return 0;
    }
    *rb = '\0';
    snprintf(out, len, "%s", lb + 1);
    return 1;
}

static uint64_t cxlpool_pages_pmd_size(void)
{
    unsigned long long v = 0;
    FILE *f = fopen(CXLPOOL_THP_DIR "hpage_pmd_size", "re");

    if (f != NULL) {
        if (fscanf(f, "%llu", &v) != 1) {
            v = 0;
        }
        fclose(f);
    }
    return v ? v : (2ull << 20);
}

/*
 * The huge= option of the mount whose device is dev, from the super
 * options after " - fstype source " in /proc/self/mountinfo: "" when the
 * mount has none, NULL when the mount is not found.
 */
static const char *cxlpool_pages_huge_opt(dev_t dev, char *out, size_t len)
{
    char line[4096], want[32], dev_s[32], *sep, *opts, *h, *end;
    const char *found = NULL;
    unsigned skip;
    FILE *f;

    f = fopen("/proc/self/mountinfo", "re");
    if (f == NULL) {
        return NULL;
    }
    snprintf(want, sizeof(want), "%u:%u", major(dev), minor(dev));
    while ((found == NULL) && (fgets(line, sizeof(line), f) != NULL)) {
        /* field 3 is major:minor */
        if ((sscanf(line, "%*s %*s %31s", dev_s) != 1) ||
            strcmp(dev_s, want)) {
            continue;
        }
        sep = strstr(line, " - ");
        if (sep == NULL) {
            continue;
        }
        /* skip fstype and source: the super options follow */
        opts = sep + 3;
        for (skip = 0; (skip < 2) && (opts != NULL); ++skip) {
            opts = strchr(opts, ' ');
            opts = (opts != NULL) ? opts + 1 : NULL;
        }
        out[0] = '\0';
        found  = out;
        h      = (opts != NULL) ? strstr(opts, "huge=") : NULL;
        if ((h != NULL) && ((h == opts) || (h[-1] == ','))) {
            h  += 5;
            end = h + strcspn(h, ", \n");
            snprintf(out, len, "%.*s", (int)(end - h), h);
        }
    }
    fclose(f);
    return found;
}

static uint64_t cxlpool_file_page_size(int fd, char *source, size_t len)
{
    uint64_t base = (uint64_t)sysconf(_SC_PAGESIZE);
    char huge[32], force[32] = "";
    struct statfs sfs;
    struct stat st;

    if ((fstatfs(fd, &sfs) < 0) || (fstat(fd, &st) < 0)) {
        snprintf(source, len, "unknown filesystem");
        return base;
    }
    if (sfs.f_type == HUGETLBFS_MAGIC) {
        snprintf(source, len, "hugetlbfs");
        return (uint64_t)sfs.f_bsize;
    }
    if (sfs.f_type != TMPFS_MAGIC) {
        snprintf(source, len, "not tmpfs or hugetlbfs");
        return base;
    }
    cxlpool_pages_sysfs_choice(CXLPOOL_THP_DIR "shmem_enabled", force,
                               sizeof(force));
    if (!strcmp(force, "force") || !strcmp(force, "deny")) {
        snprintf(source, len, "tmpfs, shmem_enabled %s", force);
        return !strcmp(force, "force") ? cxlpool_pages_pmd_size() : base;
    }
    if (cxlpool_pages_huge_opt(st.st_dev, huge, sizeof(huge)) == NULL) {
        snprintf(source, len, "tmpfs, mount not found");
        return base;
    }
    if (!strcmp(huge, "always") || !strcmp(huge, "within_size") ||
        !strcmp(huge, "advise")) {
        snprintf(source, len, "tmpfs huge=%s", huge);
        return cxlpool_pages_pmd_size();
    }
    snprintf(source, len, "tmpfs %s%s", huge[0] ? "huge=" : "without huge=",
             huge);
    return base;
}

uint64_t cxlpool_store_page_size(cxlpool_backend_t kind, int fd,
                                 uint64_t align, char *source, size_t len)
{
    if (kind == CXLPOOL_BACKEND_DEVDAX) {
        /* a device maps in units of its alignment */
        snprintf(source, len, "devdax");
        return align;
    }
    return cxlpool_file_page_size(fd, source, len);
}
