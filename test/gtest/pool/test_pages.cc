/*
 * The page size behind a pool's mapping (pool_pages.c): what cxlpool_info()
 * and cxlpool_probe() report must be what the kernel really maps, checked
 * in /proc/self/smaps after writing an extent.  Needs three tmpfs mounts
 * of its own (huge=within_size, huge=advise, huge=never), so root.
 */
#include "pool_test_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <string>

namespace {

/* The kernel's shmem_enabled choice, which overrides mount options. */
std::string shmem_enabled()
{
    char buf[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "r");
    const char *lb, *rb;

    if (f == NULL) {
        return "";
    }
    if (fgets(buf, sizeof(buf), f) == NULL) {
        buf[0] = '\0';
    }
    fclose(f);
    lb = strchr(buf, '[');
    rb = (lb != NULL) ? strchr(lb, ']') : NULL;
    return (rb != NULL) ? std::string(lb + 1, rb) : "";
}

/* kB of the smaps field (e.g. "ShmemPmdMapped:") of the mapping holding p. */
long smaps_kb(const void *p, const char *field)
{
    char line[512];
    unsigned long lo, hi;
    long kb = -1;
    int inside = 0;
    FILE *f = fopen("/proc/self/smaps", "r");

    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
            inside = ((uintptr_t)p >= lo) && ((uintptr_t)p < hi);
        } else if (inside && !strncmp(line, field, strlen(field))) {
            kb = atol(line + strlen(field));
            break;
        }
    }
    fclose(f);
    return kb;
}

class pool_pages : public ::testing::Test {
protected:
    void SetUp() override
    {
        char tmpl[] = "/tmp/cxlpool-gtest-pages.XXXXXX";

        ASSERT_NE(nullptr, mkdtemp(tmpl));
        m_dir = tmpl;
        for (const char *huge : {"within_size", "advise", "never"}) {
            std::string dir = m_dir + "/" + huge, opts = "size=64m,huge=";

            ASSERT_EQ(0, mkdir(dir.c_str(), 0700));
            opts += huge;
            if (mount("cxlpool-gtest", dir.c_str(), "tmpfs", 0,
                      opts.c_str()) != 0) {
                m_skip = std::string("mount -t tmpfs -o ") + opts + ": " +
                         strerror(errno);
                return;
            }
            m_mounts.push_back(dir);
        }
    }

    void TearDown() override
    {
        for (const std::string &d : m_mounts) {
            EXPECT_EQ(0, umount(d.c_str())) << d << ": " << strerror(errno);
        }
        for (const char *huge : {"within_size", "advise", "never"}) {
            rmdir((m_dir + "/" + huge).c_str());
        }
        rmdir(m_dir.c_str());
    }

    /*
     * Create a pool under dir, check what cxlpool_probe() and cxlpool_info()
     * say, write a 4 MiB extent and return the kB of it the kernel maps
     * with PMDs.
     */
    long check_pool(const std::string &dir, uint64_t want_page,
                    const char *want_source)
    {
        std::string path = dir + "/p.pool";
        cxlpool_params_t params;
        cxlpool_status_t status;
        cxlpool_extent_t ext;
        cxlpool_info_t info;
        cxlpool_t *pool;
        long pmd;

        cxlpool_params_init(&params);
        params.path  = path.c_str();
        params.size  = 32ull << 20;
        params.flags = CXLPOOL_CREATE | CXLPOOL_EXCL | CXLPOOL_NO_HEARTBEAT;
        status = cxlpool_open(&params, &pool);
        EXPECT_EQ(CXLPOOL_OK, status) << cxlpool_last_error();
        if (status != CXLPOOL_OK) {
            return -1;
        }
        cxlpool_info(pool, &info);
        EXPECT_EQ(want_page, info.page_size) << path;
        EXPECT_NE(nullptr, strstr(info.page_source, want_source))
                << info.page_source;
        status = cxlpool_alloc(pool, 4ull << 20, 2ull << 20, NULL, 0, &ext);
        EXPECT_EQ(CXLPOOL_OK, status) << cxlpool_last_error();
        pmd = -1;
        if (status == CXLPOOL_OK) {
            uint8_t *p = (uint8_t*)cxlpool_base(pool) + ext.offset;

            memset(p, 0x5a, ext.length);
            pmd = smaps_kb(p, "ShmemPmdMapped:");
        }
        cxlpool_close(pool);

        memset(&info, 0, sizeof(info));
        EXPECT_EQ(CXLPOOL_OK, cxlpool_probe(path.c_str(), &info));
        EXPECT_EQ(want_page, info.page_size) << "probe of " << path;
        EXPECT_EQ(CXLPOOL_OK, cxlpool_destroy(path.c_str(), 0));
        return pmd;
    }

    std::string              m_dir;
    std::string              m_skip;
    std::vector<std::string> m_mounts;
};

} // namespace

TEST_F(pool_pages, tmpfs_huge_and_not)
{
    std::string force = shmem_enabled();

    if (!m_skip.empty()) {
        GTEST_SKIP() << m_skip;
    }
    if ((force == "force") || (force == "deny")) {
        GTEST_SKIP() << "shmem_enabled is " << force
                     << ": the mount options do not decide";
    }
    /* huge=within_size: 2 MiB pages, and the kernel maps the extent with
     * PMDs (pool sizes are multiples of 2 MiB, mappings 2 MiB aligned) */
    EXPECT_GE(check_pool(m_mounts[0], 2ull << 20, "huge=within_size"), 2048);
    /* huge=advise: only because the map asks with MADV_HUGEPAGE */
    EXPECT_GE(check_pool(m_mounts[1], 2ull << 20, "huge=advise"), 2048);
    /* huge=never (the kernel may not list it): base pages, no PMD */
    EXPECT_EQ(0, check_pool(m_mounts[2], (uint64_t)sysconf(_SC_PAGESIZE),
                            "tmpfs"));
}

TEST(pool_pages_fs, not_tmpfs)
{
    char tmpl[] = "/var/tmp/cxlpool-gtest-pages.XXXXXX";
    cxlpool_params_t params;
    cxlpool_info_t info;
    cxlpool_t *pool;
    std::string path;

    ASSERT_NE(nullptr, mkdtemp(tmpl));
    path = std::string(tmpl) + "/p.pool";
    cxlpool_params_init(&params);
    params.path  = path.c_str();
    params.size  = 4ull << 20;
    params.flags = CXLPOOL_CREATE | CXLPOOL_EXCL | CXLPOOL_NO_ATTACH;
    ASSERT_EQ(CXLPOOL_OK, cxlpool_open(&params, &pool)) << cxlpool_last_error();
    cxlpool_info(pool, &info);
    cxlpool_close(pool);
    EXPECT_EQ(CXLPOOL_OK, cxlpool_destroy(path.c_str(), 0));
    rmdir(tmpl);
    /* /var/tmp is a disk filesystem here (or a tmpfs: then it says so) */
    if (strncmp(info.page_source, "tmpfs", 5) != 0) {
        EXPECT_EQ((uint64_t)sysconf(_SC_PAGESIZE), info.page_size);
        EXPECT_STREQ("not tmpfs or hugetlbfs", info.page_source);
    } else {
        EXPECT_NE(0u, info.page_size);
    }
}
