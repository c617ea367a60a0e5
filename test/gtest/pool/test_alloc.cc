/*
 * Allocator in one process: sizes, alignment, reuse, names, generations,
 * fragmentation, exhaustion, ownership and check().
 */
#include "pool_test_util.h"

extern "C" {
#include "pool_layout.h"
#include "pool_int.h"
}

#include <algorithm>
#include <map>
#include <random>

using namespace cxltest;

class pool_alloc : public pool_test {
protected:
    void SetUp() override
    {
        pool_test::SetUp();
        create(256ull << 20);
        ASSERT_EQ(CXLPOOL_OK, open(&m_pool)) << cxlpool_last_error();
    }

    void TearDown() override
    {
        cxlpool_close(m_pool);
        pool_test::TearDown();
    }

    uint8_t *ptr(const cxlpool_extent_t &e)
    {
        return (uint8_t*)cxlpool_base(m_pool) + e.offset;
    }

    cxlpool_t *m_pool;
};

TEST_F(pool_alloc, sizes_and_alignment)
{
    std::vector<cxlpool_extent_t> exts;
    const uint64_t sizes[]  = {1, 63, 64, 65, 4095, 4096, 100000, 1 << 20,
                               (3 << 20) + 5, 64 << 20};
    const uint64_t aligns[] = {0, 64, 128, 4096, 65536, 1 << 20, 2 << 20};

    for (uint64_t size : sizes) {
        for (uint64_t align : aligns) {
            cxlpool_extent_t e;
            ASSERT_EQ(CXLPOOL_OK,
                      cxlpool_alloc(m_pool, size, align, NULL, 0, &e))
                    << "size " << size << " align " << align << ": "
                    << cxlpool_last_error();
            EXPECT_GE(e.length, size);
            EXPECT_EQ(0u, e.length % 64);
            EXPECT_EQ(0u, e.offset % std::max<uint64_t>(align, 64));
            EXPECT_EQ(0u, (uintptr_t)ptr(e) % std::max<uint64_t>(align, 64))
                    << "virtual address must honour the alignment too";
            fill_pattern(ptr(e), e.length, e.offset);
            exts.push_back(e);
            if (size >= (64 << 20)) {
                break; /* one huge extent is enough */
            }
        }
    }

    /* no overlap, patterns intact */
    std::sort(exts.begin(), exts.end(),
              [](const cxlpool_extent_t &a, const cxlpool_extent_t &b) {
                  return a.offset < b.offset;
              });
    for (size_t i = 1; i < exts.size(); ++i) {
        EXPECT_LE(exts[i - 1].offset + exts[i - 1].length, exts[i].offset);
    }
    for (const auto &e : exts) {
        EXPECT_TRUE(check_pattern(ptr(e), e.length, e.offset));
        EXPECT_EQ(CXLPOOL_OK, cxlpool_free(m_pool, e.offset));
    }

    cxlpool_stats_t st;
    ASSERT_EQ(CXLPOOL_OK, cxlpool_stats(m_pool, &st));
    EXPECT_EQ(st.heap_size, st.free_bytes);
    EXPECT_EQ(0u, st.extents_used);
}

TEST_F(pool_alloc, bad_requests)
{
    cxlpool_extent_t e;

    EXPECT_EQ(CXLPOOL_ERR_INVAL, cxlpool_alloc(m_pool, 0, 0, NULL, 0, &e));
    EXPECT_EQ(CXLPOOL_ERR_INVAL, cxlpool_alloc(m_pool, 64, 96, NULL, 0, &e));
    EXPECT_EQ(CXLPOOL_ERR_INVAL, cxlpool_alloc(m_pool, 64, 4 << 20, NULL, 0, &e));
    EXPECT_EQ(CXLPOOL_ERR_INVAL, cxlpool_alloc(m_pool, 1ull << 40, 0, NULL, 0, &e));
    EXPECT_EQ(CXLPOOL_ERR_INVAL,
              cxlpool_alloc(m_pool, 64, 0, "a-name-that-is-far-too-long", 0, &e));
    EXPECT_EQ(CXLPOOL_ERR_INVAL, cxlpool_alloc(m_pool, 64, 0, "", 0, &e));
    EXPECT_EQ(CXLPOOL_ERR_NOT_FOUND, cxlpool_free(m_pool, 12345));
}

TEST_F(pool_alloc, exhaustion_and_reuse)
{
    cxlpool_stats_t st;
    cxlpool_extent_t e, big;

    ASSERT_EQ(CXLPOOL_OK, cxlpool_stats(m_pool, &st));
    ASSERT_EQ(CXLPOOL_OK, cxlpool_alloc(m_pool, st.heap_size, 0, NULL, 0, &big))
            << cxlpool_last_error();
    EXPECT_EQ(CXLPOOL_ERR_NO_SPACE, cxlpool_alloc(m_pool, 64, 0, NULL, 0, &e));
    EXPECT_NE(std::string::npos,
              std::string(cxlpool_last_error()).find("no free extent"));
    ASSERT_EQ(CXLPOOL_OK, cxlpool_free(m_pool, big.offset));

    /* a long run of alloc/free never exhausts the pool */
    for (int i = 0; i < 5000; ++i) {
        ASSERT_EQ(CXLPOOL_OK,
                  cxlpool_alloc(m_pool, 1 << 20, 0, NULL, 0, &e)) << i;
        ASSERT_EQ(CXLPOOL_OK, cxlpool_free(m_pool, e.offset));
    }
}

TEST_F(pool_alloc, extent_table_full)
{
    cxlpool_t *pool;
    cxlpool_extent_t e;

    cxlpool_close(m_pool);
    unlink(path());
    create(8ull << 20, 0, 4);
    ASSERT_EQ(CXLPOOL_OK, open(&pool));
    for (int i = 0; i < 4; ++i) {
        ASSERT_EQ(CXLPOOL_OK, cxlpool_alloc(pool, 64, 0, NULL, 0, &e));
    }
    EXPECT_EQ(CXLPOOL_ERR_NO_SLOT, cxlpool_alloc(pool, 64, 0, NULL, 0, &e));
    cxlpool_close(pool);
    ASSERT_EQ(CXLPOOL_OK, open(&m_pool));
}

TEST_F(pool_alloc, named_rendezvous)
{
    cxlpool_extent_t a, b, found;

    ASSERT_EQ(CXLPOOL_OK, cxlpool_alloc(m_pool, 4096, 0, "ring0", 0, &a));
    EXPECT_STREQ("ring0", a.name);
    EXPECT_EQ(CXLPOOL_ERR_EXISTS, cxlpool_alloc(m_pool, 64, 0, "ring0", 0, &b));
    ASSERT_EQ(CXLPOOL_OK, cxlpool_lookup(m_pool, "ring0", &found));
    EXPECT_EQ(a.offset, found.offset);
    EXPECT_EQ(a.gen, found.gen);
    EXPECT_EQ(CXLPOOL_ERR_NOT_FOUND, cxlpool_lookup(m_pool, "ring1", &found));

    /* another process finds it by name and sees our data */
    strcpy((char*)cxlpool_base(m_pool) + a.offset, "hello from parent");
    pid_t pid = fork_child([this]() {
        cxlpool_t *pool;
        cxlpool_extent_t e;
        if (open(&pool) != CXLPOOL_OK ||
            cxlpool_lookup(pool, "ring0", &e) != CXLPOOL_OK) {
            return 1;
        }
        int rc = strcmp((char*)cxlpool_base(pool) + e.offset,
                        "hello from parent") ? 2 : 0;
        cxlpool_close(pool);
        return rc;
    });
    EXPECT_EQ(0, wait_child(pid));

    ASSERT_EQ(CXLPOOL_OK, cxlpool_free(m_pool, a.offset));
    EXPECT_EQ(CXLPOOL_ERR_NOT_FOUND, cxlpool_lookup(m_pool, "ring0", &found));
}

TEST_F(pool_alloc, generations_detect_stale_references)
{
    cxlpool_extent_t a, b;

    ASSERT_EQ(CXLPOOL_OK, cxlpool_alloc(m_pool, 8192, 0, NULL, 0, &a));
    EXPECT_EQ(CXLPOOL_OK, cxlpool_extent_check(m_pool, a.index, a.gen,
                                               a.offset, a.length));
    EXPECT_EQ(CXLPOOL_OK, cxlpool_extent_check(m_pool, a.index, a.gen,
                                               a.offset + 64, 128));
    EXPECT_EQ(CXLPOOL_ERR_INVAL, cxlpool_extent_check(m_pool, a.index, a.gen,
                                                      a.offset + 64, a.length));
    EXPECT_EQ(CXLPOOL_ERR_INVAL, cxlpool_extent_check(m_pool, a.index, a.gen,
                                                      a.offset - 64, 64));
    EXPECT_EQ(CXLPOOL_ERR_INVAL, cxlpool_extent_check(m_pool, 1u << 30, a.gen,
                                                      a.offset, 64));
    EXPECT_EQ(CXLPOOL_ERR_STALE, cxlpool_extent_check(m_pool, a.index,
                                                      a.gen + 1, a.offset, 64));

    ASSERT_EQ(CXLPOOL_OK, cxlpool_free(m_pool, a.offset));
    EXPECT_EQ(CXLPOOL_ERR_STALE, cxlpool_extent_check(m_pool, a.index, a.gen,
                                                      a.offset, 64));
    ASSERT_EQ(CXLPOOL_OK, cxlpool_alloc(m_pool, 8192, 0, NULL, 0, &b));
    EXPECT_EQ(a.index, b.index) << "record is reused";
    EXPECT_NE(a.gen, b.gen);
    EXPECT_EQ(CXLPOOL_ERR_STALE, cxlpool_extent_check(m_pool, a.index, a.gen,
                                                      a.offset, 64));
}

TEST_F(pool_alloc, fragmentation_reported)
{
    std::vector<cxlpool_extent_t> exts(16);
    cxlpool_stats_t st;

    for (auto &e : exts) {
        ASSERT_EQ(CXLPOOL_OK, cxlpool_alloc(m_pool, 1 << 20, 0, NULL, 0, &e));
    }
    for (size_t i = 0; i < exts.size(); i += 2) {
        ASSERT_EQ(CXLPOOL_OK, cxlpool_free(m_pool, exts[i].offset));
    }
    ASSERT_EQ(CXLPOOL_OK, cxlpool_stats(m_pool, &st));
    EXPECT_EQ(9u, st.free_ranges);   /* 8 holes + the tail */
    EXPECT_EQ(8u, st.extents_used);
    EXPECT_EQ(8ull << 20, st.used_bytes);
    EXPECT_EQ(st.heap_size - (8ull << 20), st.free_bytes);
    EXPECT_GT(st.fragmentation, 0.0);
    EXPECT_LT(st.fragmentation, 1.0);

    /* a freed hole is reused first (first fit) */
    cxlpool_extent_t e;
    ASSERT_EQ(CXLPOOL_OK, cxlpool_alloc(m_pool, 1 << 20, 0, NULL, 0, &e));
    EXPECT_EQ(exts[0].offset, e.offset);
}

TEST_F(pool_alloc, persistent_outlives_owner_and_others_are_freed)
{
    cxlpool_extent_t p, t, found;

    ASSERT_EQ(CXLPOOL_OK, cxlpool_alloc(m_pool, 4096, 0, "dataset",
                                        CXLPOOL_ALLOC_PERSIST, &p));
    ASSERT_EQ(CXLPOOL_OK, cxlpool_alloc(m_pool, 4096, 0, "scratch", 0, &t));
    EXPECT_EQ(0u, p.owner);
    EXPECT_EQ(cxlpool_token(m_pool), t.owner);
    cxlpool_close(m_pool);

    ASSERT_EQ(CXLPOOL_OK, open(&m_pool));
    EXPECT_EQ(CXLPOOL_OK, cxlpool_lookup(m_pool, "dataset", &found));
    EXPECT_EQ(p.offset, found.offset);
    EXPECT_EQ(CXLPOOL_ERR_NOT_FOUND, cxlpool_lookup(m_pool, "scratch", &found))
            << "a process's extents return to the pool when it detaches";
    EXPECT_EQ(CXLPOOL_OK, cxlpool_free(m_pool, p.offset));
}

TEST_F(pool_alloc, cannot_free_a_live_process_extent)
{
    int fds[2];
    ASSERT_EQ(0, pipe(fds));

    pid_t pid = fork_child([&]() {
        cxlpool_t *pool;
        cxlpool_extent_t e;
        if (open(&pool) != CXLPOOL_OK ||
            cxlpool_alloc(pool, 4096, 0, "child", 0, &e) != CXLPOOL_OK) {
            return 1;
        }
        char c = 1;
        if (write(fds[1], &c, 1) != 1) {
            return 2;
        }
        pause();
        return 0;
    });

    char c;
    ASSERT_EQ(1, read(fds[0], &c, 1));
    cxlpool_extent_t e;
    ASSERT_EQ(CXLPOOL_OK, cxlpool_lookup(m_pool, "child", &e));
    EXPECT_EQ(CXLPOOL_ERR_PERM, cxlpool_free(m_pool, e.offset));
    kill(pid, SIGKILL);
    wait_child(pid);
    close(fds[0]);
    close(fds[1]);
}

TEST_F(pool_alloc, unattached_handle_only_persistent)
{
    cxlpool_t *pool;
    cxlpool_extent_t e;

    ASSERT_EQ(CXLPOOL_OK, open(&pool, CXLPOOL_NO_ATTACH));
    EXPECT_EQ(0u, cxlpool_token(pool));
    EXPECT_EQ(CXLPOOL_ERR_INVAL, cxlpool_alloc(pool, 64, 0, NULL, 0, &e));
    ASSERT_EQ(CXLPOOL_OK, cxlpool_alloc(pool, 64, 0, NULL,
                                        CXLPOOL_ALLOC_PERSIST, &e));
    EXPECT_EQ(CXLPOOL_OK, cxlpool_free(pool, e.offset));
    cxlpool_close(pool);
}

TEST_F(pool_alloc, check_clean_and_corrupt_records)
{
    cxlpool_check_report_t rep;
    cxlpool_extent_t a, b;
    std::vector<std::string> lines;
    auto collect = [](const char *line, void *arg) {
        ((std::vector<std::string>*)arg)->push_back(line);
    };

    ASSERT_EQ(CXLPOOL_OK, cxlpool_alloc(m_pool, 4096, 0, NULL, 0, &a));
    ASSERT_EQ(CXLPOOL_OK, cxlpool_alloc(m_pool, 4096, 0, NULL, 0, &b));
    ASSERT_EQ(CXLPOOL_OK, cxlpool_check(m_pool, 0, &rep, collect, &lines));
    EXPECT_EQ(0u, rep.bad_records + rep.overlaps + rep.dead_extents);

    /* flip a byte inside an extent record: reported, not "repaired" */
    cxlpool_extent_rec_t *recs = (cxlpool_extent_rec_t*)
            ((uint8_t*)cxlpool_base(m_pool) + 0) ;
    cxlpool_sb_t *sb = (cxlpool_sb_t*)cxlpool_base(m_pool);
    recs = (cxlpool_extent_rec_t*)((uint8_t*)sb + sb->extent_offset);
    recs[a.index].name[5] ^= 0x40;
    EXPECT_EQ(CXLPOOL_ERR_CORRUPT, cxlpool_check(m_pool, 1, &rep, collect, &lines));
    EXPECT_EQ(1u, rep.bad_records);
    recs[a.index].name[5] ^= 0x40;

    /* make two records overlap */
    uint64_t saved = recs[b.index].offset;
    recs[b.index].offset = a.offset + 64;
    recs[b.index].crc    = cxlpool_extent_crc(&recs[b.index]);
    EXPECT_EQ(CXLPOOL_ERR_CORRUPT, cxlpool_check(m_pool, 0, &rep, collect, &lines));
    EXPECT_EQ(1u, rep.overlaps);
    recs[b.index].offset = saved;
    recs[b.index].crc    = cxlpool_extent_crc(&recs[b.index]);
    EXPECT_EQ(CXLPOOL_OK, cxlpool_check(m_pool, 0, &rep, collect, &lines));
}
