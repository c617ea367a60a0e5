/*
 * Host partitions (layout 1.1): each host of a software-coherent pool
 * writes only its own lock line, attachment slots, extent records and heap
 * arena.  Processes stand in for hosts by choosing a host index.
 */
#include "pool_test_util.h"

extern "C" {
#include "pool_layout.h"
#include "pool_int.h"
}

#include <map>
#include <random>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

using namespace cxltest;

class pool_partition : public pool_test {
protected:
    void TearDown() override
    {
        unsetenv("UCX_CXL_HOST_INDEX");
        pool_test::TearDown();
    }

    cxlpool_status_t create_hosts(uint32_t nr_hosts, uint64_t size = 64ull << 20,
                                  cxl_coh_mode_t coh = CXL_COH_SW,
                                  uint32_t max_attach = 0)
    {
        cxlpool_params_t params;
        cxlpool_t *pool;
        cxlpool_status_t status;

        cxlpool_params_init(&params);
        params.path       = path();
        params.size       = size;
        params.coherence  = coh;
        params.nr_hosts   = nr_hosts;
        params.max_attach = max_attach;
        params.flags      = CXLPOOL_CREATE | CXLPOOL_EXCL | CXLPOOL_NO_ATTACH;
        status = cxlpool_open(&params, &pool);
        if (status == CXLPOOL_OK) {
            cxlpool_close(pool);
        }
        return status;
    }

    cxlpool_status_t open_host(cxlpool_t **pool, int host_index,
                               unsigned flags = CXLPOOL_NO_HEARTBEAT,
                               cxl_coh_mode_t coh = CXL_COH_SW)
    {
        cxlpool_params_t params;

        cxlpool_params_init(&params);
        params.path       = path();
        params.flags      = flags;
        params.coherence  = coh;
        params.host_index = host_index;
        return cxlpool_open(&params, pool);
    }

    static void collect(const cxlpool_extent_t *e, void *arg)
    {
        (*(std::map<uint64_t, cxlpool_extent_t>*)arg)[e->offset] = *e;
    }

    cxlpool_sb_t raw_sb()
    {
        std::vector<uint8_t> data = read_file(m_path);
        cxlpool_sb_t sb;

        memset(&sb, 0, sizeof(sb));
        if (data.size() >= sizeof(sb)) {
            memcpy(&sb, data.data(), sizeof(sb));
        }
        return sb;
    }
};

TEST_F(pool_partition, partition_ranges_cover_tables)
{
    for (uint32_t count : {1u, 7u, 64u, 100u, 256u, 1000u, 65536u}) {
        for (uint32_t hosts = 1; (hosts <= CXLPOOL_MAX_HOSTS) && (hosts <= count);
             ++hosts) {
            EXPECT_EQ(0u, cxlpool_part_first(count, hosts, 0));
            EXPECT_EQ(count, cxlpool_part_first(count, hosts, hosts));
            for (uint32_t i = 0; i < count; ++i) {
                uint32_t k = cxlpool_part_of(count, hosts, i);
                ASSERT_LT(k, hosts) << count << "/" << hosts << " item " << i;
                ASSERT_LE(cxlpool_part_first(count, hosts, k), i);
                ASSERT_LT(i, cxlpool_part_first(count, hosts, k + 1));
            }
        }
    }
}

TEST_F(pool_partition, one_host_layout_is_the_old_one)
{
    cxlpool_info_t info;
    cxlpool_t *pool;

    ASSERT_EQ(CXLPOOL_OK, create_hosts(0, 64ull << 20, CXL_COH_HW))
            << cxlpool_last_error();
    cxlpool_sb_t sb = raw_sb();
    EXPECT_EQ(1u, sb.version_major);
    EXPECT_EQ(1u, sb.version_minor);
    EXPECT_EQ(1u, sb.nr_hosts);
    /* the 1.0 geometry of a 64 MiB pool: 256 slots, 1024 records */
    EXPECT_EQ(8192u, sb.attach_offset);
    EXPECT_EQ(256u, sb.max_attach);
    EXPECT_EQ(8192u + 256 * 128, sb.extent_offset);
    EXPECT_EQ(1024u, sb.max_extents);
    EXPECT_EQ(2ull << 20, sb.heap_offset);
    EXPECT_EQ((64ull << 20) - (2ull << 20), sb.heap_size);
    EXPECT_EQ(sb.heap_offset, cxlpool_arena_start(&sb, 0));
    EXPECT_EQ(sb.size, cxlpool_arena_end(&sb, 0));

    ASSERT_EQ(CXLPOOL_OK, cxlpool_probe(path(), &info));
    EXPECT_EQ(1u, info.nr_hosts);

    ASSERT_EQ(CXLPOOL_OK, open(&pool)) << cxlpool_last_error();
    EXPECT_EQ(1u, cxlpool_nr_hosts(pool));
    EXPECT_EQ(0u, cxlpool_host_index(pool));
    /* the whole heap is the one arena: an allocation of all of it fits */
    cxlpool_extent_t ext;
    ASSERT_EQ(CXLPOOL_OK, cxlpool_alloc(pool, sb.heap_size, 0, NULL, 0, &ext))
            << cxlpool_last_error();
    EXPECT_EQ(sb.heap_offset, ext.offset);
    EXPECT_EQ(CXLPOOL_OK, cxlpool_free(pool, ext.offset));
    cxlpool_close(pool);
}

TEST_F(pool_partition, layout_1_0_reads_as_one_host)
{
    cxlpool_info_t info;
    cxlpool_t *pool;

    /* a 1.0 superblock: minor 0 and the field that is now nr_hosts zero */
    ASSERT_EQ(CXLPOOL_OK, create_hosts(1, 64ull << 20, CXL_COH_HW));
    std::vector<uint8_t> data = read_file(m_path);
    cxlpool_sb_t *sb = (cxlpool_sb_t*)data.data();
    sb->version_minor = 0;
    sb->nr_hosts      = 0;
    sb->crc           = cxlpool_sb_crc(sb);
    write_file(m_path, data);

    ASSERT_EQ(CXLPOOL_OK, cxlpool_probe(path(), &info)) << cxlpool_last_error();
    EXPECT_EQ(0u, info.version_minor);
    EXPECT_EQ(1u, info.nr_hosts);

    ASSERT_EQ(CXLPOOL_OK, open(&pool)) << cxlpool_last_error();
    EXPECT_EQ(1u, cxlpool_nr_hosts(pool));
    EXPECT_EQ(0u, cxlpool_host_index(pool));
    cxlpool_extent_t ext;
    ASSERT_EQ(CXLPOOL_OK, cxlpool_alloc(pool, 4096, 0, "old", 0, &ext));
    cxlpool_check_report_t rep;
    EXPECT_EQ(CXLPOOL_OK, cxlpool_check(pool, 0, &rep, NULL, NULL));
    EXPECT_EQ(0u, rep.out_of_bounds);
    cxlpool_close(pool);
}

TEST_F(pool_partition, default_hosts_by_coherence)
{
    cxlpool_info_t info;

    ASSERT_EQ(CXLPOOL_OK, create_hosts(0, 64ull << 20, CXL_COH_SW))
            << cxlpool_last_error();
    ASSERT_EQ(CXLPOOL_OK, cxlpool_probe(path(), &info));
    EXPECT_EQ((uint32_t)CXLPOOL_DEFAULT_SW_HOSTS, info.nr_hosts);
    EXPECT_EQ(CXL_COH_SW, info.coherence);
    cxlpool_sb_t sb = raw_sb();
    EXPECT_EQ(0u, cxlpool_arena_size(&sb) % (2ull << 20));
    for (uint32_t k = 0; k < info.nr_hosts; ++k) {
        EXPECT_GE(cxlpool_arena_end(&sb, k) - cxlpool_arena_start(&sb, k),
                  2ull << 20);
    }
}

TEST_F(pool_partition, create_refuses_impossible_partitions)
{
    /* 16 MiB: 14 MiB of heap, not enough for 8 arenas of 2 MiB */
    EXPECT_EQ(CXLPOOL_ERR_INVAL, create_hosts(8, 16ull << 20));
    EXPECT_NE(nullptr, strstr(cxlpool_last_error(), "too small for 8 host "
                                                    "partitions"))
            << cxlpool_last_error();
    EXPECT_EQ(CXLPOOL_ERR_INVAL, create_hosts(CXLPOOL_MAX_HOSTS + 1));
    EXPECT_EQ(CXLPOOL_ERR_INVAL, create_hosts(4, 64ull << 20, CXL_COH_SW, 2));
    EXPECT_NE(0, access(path(), F_OK)) << "no pool after a refused create";
    /* 7 arenas fit */
    EXPECT_EQ(CXLPOOL_OK, create_hosts(7, 16ull << 20)) << cxlpool_last_error();
}

TEST_F(pool_partition, host_index_resolution)
{
    cxlpool_t *pool;

    ASSERT_EQ(CXLPOOL_OK, create_hosts(4));

    /* a writer of a multi-host sw pool must say which host it is */
    unsetenv("UCX_CXL_HOST_INDEX");
    EXPECT_EQ(CXLPOOL_ERR_INVAL, open_host(&pool, -1));
    EXPECT_NE(nullptr, strstr(cxlpool_last_error(), "set UCX_CXL_HOST_INDEX"))
            << cxlpool_last_error();

    setenv("UCX_CXL_HOST_INDEX", "2", 1);
    ASSERT_EQ(CXLPOOL_OK, open_host(&pool, -1)) << cxlpool_last_error();
    EXPECT_EQ(2u, cxlpool_host_index(pool));
    EXPECT_EQ(4u, cxlpool_nr_hosts(pool));
    cxlpool_info_t info;
    cxlpool_info(pool, &info);
    EXPECT_EQ(2u, info.host_index);
    EXPECT_EQ(4u, info.nr_hosts);
    cxlpool_close(pool);

    /* explicit beats the environment */
    ASSERT_EQ(CXLPOOL_OK, open_host(&pool, 3)) << cxlpool_last_error();
    EXPECT_EQ(3u, cxlpool_host_index(pool));
    cxlpool_close(pool);

    setenv("UCX_CXL_HOST_INDEX", "two", 1);
    EXPECT_EQ(CXLPOOL_ERR_INVAL, open_host(&pool, -1));
    EXPECT_NE(nullptr, strstr(cxlpool_last_error(), "UCX_CXL_HOST_INDEX='two'"))
            << cxlpool_last_error();
    setenv("UCX_CXL_HOST_INDEX", "-1", 1);
    EXPECT_EQ(CXLPOOL_ERR_INVAL, open_host(&pool, -1));
    setenv("UCX_CXL_HOST_INDEX", "4", 1);
    EXPECT_EQ(CXLPOOL_ERR_INVAL, open_host(&pool, -1));
    EXPECT_NE(nullptr, strstr(cxlpool_last_error(), "out of range"))
            << cxlpool_last_error();
    setenv("UCX_CXL_HOST_INDEX", "auto", 1);
    EXPECT_EQ(CXLPOOL_ERR_INVAL, open_host(&pool, -1));
    unsetenv("UCX_CXL_HOST_INDEX");

    EXPECT_EQ(CXLPOOL_ERR_INVAL, open_host(&pool, 4));
    EXPECT_EQ(CXLPOOL_ERR_INVAL, open_host(&pool, -2));

    /* a reader needs no partition; its writes ask for one */
    ASSERT_EQ(CXLPOOL_OK, open_host(&pool, -1, CXLPOOL_READONLY));
    EXPECT_EQ(CXLPOOL_HOST_INDEX_NONE, cxlpool_host_index(pool));
    cxlpool_stats_t st;
    EXPECT_EQ(CXLPOOL_OK, cxlpool_stats(pool, &st));
    cxlpool_close(pool);
    ASSERT_EQ(CXLPOOL_OK, open_host(&pool, -1, CXLPOOL_NO_ATTACH));
    cxlpool_extent_t ext;
    EXPECT_EQ(CXLPOOL_ERR_INVAL, cxlpool_alloc(pool, 4096, 0, NULL,
                                               CXLPOOL_ALLOC_PERSIST, &ext));
    EXPECT_NE(nullptr, strstr(cxlpool_last_error(), "UCX_CXL_HOST_INDEX"))
            << cxlpool_last_error();
    cxlpool_check_report_t rep;
    EXPECT_EQ(CXLPOOL_ERR_INVAL, cxlpool_check(pool, 1, &rep, NULL, NULL));
    EXPECT_EQ(CXLPOOL_ERR_INVAL, cxlpool_recover(pool, NULL, NULL));
    cxlpool_close(pool);

    /* a hardware-coherent handle of a hw pool defaults to partition 0 */
    unlink(path());
    ASSERT_EQ(CXLPOOL_OK, create_hosts(4, 64ull << 20, CXL_COH_HW));
    ASSERT_EQ(CXLPOOL_OK, open_host(&pool, -1, CXLPOOL_NO_HEARTBEAT,
                                    CXL_COH_HW)) << cxlpool_last_error();
    EXPECT_EQ(0u, cxlpool_host_index(pool));
    cxlpool_close(pool);
}

TEST_F(pool_partition, attach_slots_in_own_partition)
{
    const uint32_t hosts = 4, slots = 8; /* two slots per host */
    cxlpool_t *pools[3], *other;

    ASSERT_EQ(CXLPOOL_OK, create_hosts(hosts, 64ull << 20, CXL_COH_SW, slots));
    for (uint32_t k = 0; k < hosts; ++k) {
        ASSERT_EQ(CXLPOOL_OK, open_host(&pools[0], k)) << cxlpool_last_error();
        uint32_t slot = cxlpool_token_slot(cxlpool_token(pools[0]));
        EXPECT_GE(slot, k * slots / hosts);
        EXPECT_LT(slot, (k + 1) * slots / hosts);
        cxlpool_close(pools[0]);
    }

    /* host 1's slots fill up while other partitions still have room */
    ASSERT_EQ(CXLPOOL_OK, open_host(&pools[0], 1));
    ASSERT_EQ(CXLPOOL_OK, open_host(&pools[1], 1));
    EXPECT_EQ(CXLPOOL_ERR_NO_SLOT, open_host(&pools[2], 1));
    EXPECT_NE(nullptr, strstr(cxlpool_last_error(), "host partition 1"))
            << cxlpool_last_error();
    ASSERT_EQ(CXLPOOL_OK, open_host(&other, 2)) << cxlpool_last_error();
    cxlpool_close(other);
    cxlpool_close(pools[1]);
    cxlpool_close(pools[0]);
}

TEST_F(pool_partition, concurrent_hosts_stay_in_their_arenas)
{
    const int hosts = 4, iters = 400;
    std::vector<pid_t> pids;

    ASSERT_EQ(CXLPOOL_OK, create_hosts(hosts, 128ull << 20));
    for (int h = 0; h < hosts; ++h) {
        pids.push_back(fork_child([&, h]() {
            alarm(120);
            std::mt19937_64 rng(h * 104729 + 3);
            std::vector<cxlpool_extent_t> mine;
            cxlpool_t *pool;
            if (open_host(&pool, h) != CXLPOOL_OK) {
                fprintf(stderr, "host %d: %s\n", h, cxlpool_last_error());
                return 1;
            }
            cxlpool_sb_t *sb = (cxlpool_sb_t*)cxlpool_base(pool);
            uint64_t lo = cxlpool_arena_start(sb, h), hi = cxlpool_arena_end(sb, h);
            uint8_t *base = (uint8_t*)cxlpool_base(pool);
            for (int i = 0; i < iters; ++i) {
                if (mine.empty() || (rng() % 3 != 0)) {
                    cxlpool_extent_t e;
                    uint64_t len = 64 + rng() % (64 * 1024);
                    if (cxlpool_alloc(pool, len, 0, NULL, 0, &e) != CXLPOOL_OK) {
                        continue; /* arena full: free some below */
                    }
                    if ((e.offset < lo) || (e.offset + e.length > hi)) {
                        fprintf(stderr, "host %d: extent 0x%lx+%lu outside "
                                "arena 0x%lx-0x%lx\n", h, (unsigned long)e.offset,
                                (unsigned long)e.length, (unsigned long)lo,
                                (unsigned long)hi);
                        return 2;
                    }
                    fill_pattern(base + e.offset, e.length, e.offset ^ h);
                    mine.push_back(e);
                } else {
                    size_t j = rng() % mine.size();
                    cxlpool_extent_t e = mine[j];
                    if (!check_pattern(base + e.offset, e.length, e.offset ^ h)) {
                        fprintf(stderr, "host %d: extent 0x%lx overwritten\n",
                                h, (unsigned long)e.offset);
                        return 3;
                    }
                    if (cxlpool_free(pool, e.offset) != CXLPOOL_OK) {
                        fprintf(stderr, "host %d: %s\n", h, cxlpool_last_error());
                        return 4;
                    }
                    mine.erase(mine.begin() + j);
                }
            }
            /* leave persistent extents for the parent to inspect */
            for (int i = 0; i < 8; ++i) {
                cxlpool_extent_t e;
                char name[CXLPOOL_NAME_MAX];
                snprintf(name, sizeof(name), "h%d-%d", h, i);
                if (cxlpool_alloc(pool, 8192, 0, name, CXLPOOL_ALLOC_PERSIST,
                                  &e) != CXLPOOL_OK) {
                    fprintf(stderr, "host %d: %s\n", h, cxlpool_last_error());
                    return 5;
                }
            }
            for (const cxlpool_extent_t &e : mine) {
                if (!check_pattern(base + e.offset, e.length, e.offset ^ h)) {
                    return 6;
                }
            }
            cxlpool_close(pool);
            return 0;
        }));
    }
    for (pid_t pid : pids) {
        EXPECT_EQ(0, wait_child(pid));
    }

    cxlpool_t *pool;
    ASSERT_EQ(CXLPOOL_OK, open_host(&pool, -1, CXLPOOL_READONLY));
    std::map<uint64_t, cxlpool_extent_t> all;
    cxlpool_foreach_extent(pool, collect, &all);
    EXPECT_EQ((size_t)hosts * 8, all.size()) << "only persistent ones remain";
    cxlpool_sb_t *sb = (cxlpool_sb_t*)cxlpool_base(pool);
    uint64_t prev_end = 0;
    for (auto &kv : all) {
        const cxlpool_extent_t &e = kv.second;
        int h = e.name[1] - '0';
        EXPECT_GE(e.offset, prev_end) << "overlap at " << e.name;
        prev_end = e.offset + e.length;
        EXPECT_GE(e.offset, cxlpool_arena_start(sb, h)) << e.name;
        EXPECT_LE(e.offset + e.length, cxlpool_arena_end(sb, h)) << e.name;
        EXPECT_EQ((uint32_t)h, cxlpool_part_of(sb->max_extents, hosts, e.index))
                << e.name << " recorded outside its host's records";
    }
    cxlpool_check_report_t rep;
    EXPECT_EQ(CXLPOOL_OK, cxlpool_check(pool, 0, &rep, NULL, NULL))
            << cxlpool_last_error();
    EXPECT_EQ(0u, rep.overlaps);
    EXPECT_EQ(0u, rep.out_of_bounds);
    cxlpool_close(pool);
}

TEST_F(pool_partition, arena_full_while_others_free)
{
    cxlpool_t *pool;
    cxlpool_extent_t e;

    ASSERT_EQ(CXLPOOL_OK, create_hosts(4));
    ASSERT_EQ(CXLPOOL_OK, open_host(&pool, 0));
    cxlpool_sb_t *sb = (cxlpool_sb_t*)cxlpool_base(pool);
    uint64_t arena = cxlpool_arena_size(sb);
    ASSERT_EQ(CXLPOOL_OK, cxlpool_alloc(pool, arena, 0, NULL, 0, &e))
            << cxlpool_last_error();
    EXPECT_EQ(cxlpool_arena_start(sb, 0), e.offset);
    EXPECT_EQ(CXLPOOL_ERR_NO_SPACE, cxlpool_alloc(pool, 64, 0, NULL, 0, &e));
    /* more than one arena is never one allocation */
    EXPECT_EQ(CXLPOOL_ERR_INVAL, cxlpool_alloc(pool, arena + 4096, 0, NULL, 0,
                                               &e));
    cxlpool_stats_t st;
    ASSERT_EQ(CXLPOOL_OK, cxlpool_stats(pool, &st));
    EXPECT_EQ(arena, st.used_bytes);
    EXPECT_EQ(st.heap_size - arena, st.free_bytes);
    EXPECT_EQ(3u, st.free_ranges) << "one free range per empty arena";
    EXPECT_EQ(cxlpool_arena_end(sb, 3) - cxlpool_arena_start(sb, 3),
              st.largest_free);
    cxlpool_close(pool);
}

TEST_F(pool_partition, free_of_foreign_extent_refused)
{
    cxlpool_t *h0, *h1;
    cxlpool_extent_t e, found;

    ASSERT_EQ(CXLPOOL_OK, create_hosts(4));
    ASSERT_EQ(CXLPOOL_OK, open_host(&h0, 0));
    ASSERT_EQ(CXLPOOL_OK, open_host(&h1, 1));
    ASSERT_EQ(CXLPOOL_OK, cxlpool_alloc(h0, 4096, 0, "shared", 
                                        CXLPOOL_ALLOC_PERSIST, &e));

    EXPECT_EQ(CXLPOOL_ERR_PERM, cxlpool_free(h1, e.offset));
    EXPECT_NE(nullptr, strstr(cxlpool_last_error(), "host partition 0"))
            << cxlpool_last_error();
    EXPECT_EQ(CXLPOOL_OK, cxlpool_lookup(h1, "shared", &found));
    EXPECT_EQ(CXLPOOL_ERR_NOT_FOUND, cxlpool_free(h1, e.offset + 64));

    EXPECT_EQ(CXLPOOL_OK, cxlpool_free(h0, e.offset)) << cxlpool_last_error();
    EXPECT_EQ(CXLPOOL_ERR_NOT_FOUND, cxlpool_lookup(h1, "shared", &found));
    cxlpool_close(h1);
    cxlpool_close(h0);
}

TEST_F(pool_partition, lookup_and_keys_across_partitions)
{
    cxlpool_t *h0, *h3;
    cxlpool_extent_t e, found;

    ASSERT_EQ(CXLPOOL_OK, create_hosts(4));
    ASSERT_EQ(CXLPOOL_OK, open_host(&h0, 0));
    ASSERT_EQ(CXLPOOL_OK, open_host(&h3, 3));
    ASSERT_EQ(CXLPOOL_OK, cxlpool_alloc(h3, 10000, 0, "ring3", 0, &e));

    ASSERT_EQ(CXLPOOL_OK, cxlpool_lookup(h0, "ring3", &found));
    EXPECT_EQ(e.offset, found.offset);
    EXPECT_EQ(e.index, found.index);
    EXPECT_EQ(cxlpool_token(h3), found.owner);
    EXPECT_EQ(CXLPOOL_OK, cxlpool_extent_check(h0, e.index, e.gen, e.offset + 64,
                                               128));
    EXPECT_EQ(CXLPOOL_OK, cxlpool_extent_find(h0, e.offset + 100, 10, &found));
    EXPECT_EQ(e.index, found.index);
    EXPECT_TRUE(cxlpool_owner_alive(h0, e.owner));
    /* names stay unique across partitions */
    EXPECT_EQ(CXLPOOL_ERR_EXISTS, cxlpool_alloc(h0, 64, 0, "ring3", 0, &found));

    uint32_t gen = e.gen;
    ASSERT_EQ(CXLPOOL_OK, cxlpool_free(h3, e.offset));
    EXPECT_EQ(CXLPOOL_ERR_STALE, cxlpool_extent_check(h0, e.index, gen, e.offset,
                                                      64));
    cxlpool_close(h3);
    cxlpool_close(h0);
}

TEST_F(pool_partition, recovery_only_in_own_partition)
{
    int fds[2];
    cxlpool_extent_t e;

    ASSERT_EQ(CXLPOOL_OK, create_hosts(4));
    ASSERT_EQ(0, pipe(fds));
    pid_t pid = fork_child([&]() {
        cxlpool_t *pool;
        cxlpool_extent_t x;
        close(fds[0]);
        if ((open_host(&pool, 1) != CXLPOOL_OK) ||
            (cxlpool_alloc(pool, 65536, 0, "dies", 0, &x) != CXLPOOL_OK)) {
            return 1;
        }
        if (write(fds[1], &x, sizeof(x)) != sizeof(x)) {
            return 2;
        }
        kill(getpid(), SIGKILL); /* no detach */
        return 3;
    });
    close(fds[1]);
    ASSERT_EQ((ssize_t)sizeof(e), read(fds[0], &e, sizeof(e)));
    close(fds[0]);
    EXPECT_EQ(128 + SIGKILL, wait_child(pid));

    /* host 2 attaches (which recovers) and repairs: host 1's lines stay */
    cxlpool_t *h2, *h1;
    ASSERT_EQ(CXLPOOL_OK, open_host(&h2, 2));
    uint32_t n_ext = 99, n_att = 99;
    EXPECT_EQ(CXLPOOL_OK, cxlpool_recover(h2, &n_ext, &n_att));
    EXPECT_EQ(0u, n_ext);
    EXPECT_EQ(0u, n_att);
    cxlpool_check_report_t rep;
    EXPECT_EQ(CXLPOOL_OK, cxlpool_check(h2, 1, &rep, NULL, NULL));
    EXPECT_EQ(1u, rep.dead_attach);
    EXPECT_EQ(1u, rep.dead_extents);
    EXPECT_EQ(1u, rep.other_dead_attach);
    EXPECT_EQ(1u, rep.other_dead_extents);
    EXPECT_EQ(0u, rep.reclaimed_extents);
    EXPECT_EQ(0u, rep.reclaimed_attach);
    cxlpool_extent_t found;
    EXPECT_EQ(CXLPOOL_OK, cxlpool_lookup(h2, "dies", &found));
    EXPECT_FALSE(cxlpool_owner_alive(h2, found.owner));

    /* a process of host 1 reclaims it when it attaches */
    ASSERT_EQ(CXLPOOL_OK, open_host(&h1, 1));
    EXPECT_EQ(CXLPOOL_ERR_NOT_FOUND, cxlpool_lookup(h2, "dies", &found));
    EXPECT_EQ(CXLPOOL_OK, cxlpool_check(h2, 0, &rep, NULL, NULL));
    EXPECT_EQ(0u, rep.dead_attach);
    EXPECT_EQ(0u, rep.dead_extents);
    cxlpool_close(h1);
    cxlpool_close(h2);
}

TEST_F(pool_partition, lock_lines_per_partition)
{
    cxlpool_t *h0, *h1;

    ASSERT_EQ(CXLPOOL_OK, create_hosts(4));
    ASSERT_EQ(CXLPOOL_OK, open_host(&h0, 0));
    ASSERT_EQ(CXLPOOL_OK, open_host(&h1, 1));
    cxlpool_lock_t *locks = (cxlpool_lock_t*)((uint8_t*)cxlpool_base(h0) +
                                              CXLPOOL_LOCK_OFFSET);
    /* holding host 0's lock does not keep host 1 from allocating */
    cxlpool_lock(h0);
    EXPECT_NE(0u, locks[0].token);
    EXPECT_EQ(0u, locks[1].token);
    cxlpool_extent_t e;
    EXPECT_EQ(CXLPOOL_OK, cxlpool_alloc(h1, 4096, 0, NULL, 0, &e));
    cxlpool_unlock(h0);
    EXPECT_EQ(0u, locks[0].token);
    cxlpool_close(h1);
    cxlpool_close(h0);
}
