/*
 * Several processes on one pool: racing creation, concurrent allocation,
 * processes killed while holding extents (and the metadata lock), leases.
 */
#include "pool_test_util.h"

extern "C" {
#include "pool_layout.h"
#include "pool_int.h"
}

#include <dirent.h>
#include <map>
#include <random>
#include <set>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace cxltest;

class pool_multiproc : public pool_test {
protected:
    /* Extents of the calling process, keyed by offset. */
    typedef std::map<uint64_t, cxlpool_extent_t> extent_map_t;

    static void collect(const cxlpool_extent_t *e, void *arg)
    {
        (*(extent_map_t*)arg)[e->offset] = *e;
    }

    extent_map_t all_extents(cxlpool_t *pool)
    {
        extent_map_t m;
        cxlpool_foreach_extent(pool, collect, &m);
        return m;
    }
};

TEST_F(pool_multiproc, racing_create_formats_once)
{
    const int nproc = 8;
    int go[2], res[2];
    std::vector<pid_t> pids;

    ASSERT_EQ(0, pipe(go));
    ASSERT_EQ(0, pipe(res));
    for (int i = 0; i < nproc; ++i) {
        pids.push_back(fork_child([&]() {
            char c;
            close(go[1]);
            if (read(go[0], &c, 1) != 0) { /* released when the pipe closes */
                return 3;
            }
            cxlpool_params_t params;
            cxlpool_t *pool;
            cxlpool_params_init(&params);
            params.path  = path();
            params.size  = 32ull << 20;
            params.flags = CXLPOOL_CREATE | CXLPOOL_NO_HEARTBEAT;
            if (cxlpool_open(&params, &pool) != CXLPOOL_OK) {
                fprintf(stderr, "%s\n", cxlpool_last_error());
                return 1;
            }
            cxlpool_info_t info;
            cxlpool_info(pool, &info);
            /* the whole pool is there: heap end is mapped and formatted */
            volatile uint8_t *end = (uint8_t*)cxlpool_base(pool) + info.size - 1;
            (void)*end;
            if (write(res[1], info.uuid, sizeof(info.uuid)) != sizeof(info.uuid)) {
                return 2;
            }
            cxlpool_close(pool);
            return 0;
        }));
    }
    close(go[0]);
    close(go[1]); /* release all children at once */
    close(res[1]);

    std::set<std::string> uuids;
    uint8_t uuid[CXLPOOL_UUID_LEN];
    int count = 0;
    while (read(res[0], uuid, sizeof(uuid)) == sizeof(uuid)) {
        uuids.insert(std::string((char*)uuid, sizeof(uuid)));
        ++count;
    }
    close(res[0]);
    for (pid_t pid : pids) {
        EXPECT_EQ(0, wait_child(pid));
    }

    EXPECT_EQ(nproc, count);
    EXPECT_EQ(1u, uuids.size()) << "more than one format happened";

    cxlpool_info_t info;
    ASSERT_EQ(CXLPOOL_OK, cxlpool_probe(path(), &info));
    EXPECT_EQ(*uuids.begin(), std::string((char*)info.uuid, sizeof(info.uuid)));

    /* no temporary files left behind by the losers */
    DIR *d = opendir("/dev/shm");
    ASSERT_TRUE(d != NULL);
    std::string base = m_path.substr(strlen("/dev/shm/")) + ".tmp.";
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        EXPECT_NE(0, strncmp(de->d_name, base.c_str(), base.size()))
                << de->d_name;
    }
    closedir(d);
}

TEST_F(pool_multiproc, concurrent_alloc_free_patterns)
{
    const int nproc = 4, iters = 1500;
    std::vector<pid_t> pids;

    create(128ull << 20);
    for (int p = 0; p < nproc; ++p) {
        pids.push_back(fork_child([&, p]() {
            std::mt19937_64 rng(p * 7919 + 1);
            std::vector<cxlpool_extent_t> mine;
            cxlpool_t *pool;
            if (open(&pool) != CXLPOOL_OK) {
                return 1;
            }
            uint8_t *base = (uint8_t*)cxlpool_base(pool);
            for (int i = 0; i < iters; ++i) {
                if (mine.empty() || (rng() % 3 != 0)) {
                    uint64_t len   = 64 + rng() % (64 * 1024);
                    uint64_t align = 64ull << (rng() % 8);
                    cxlpool_extent_t e;
                    cxlpool_status_t st = cxlpool_alloc(pool, len, align, NULL,
                                                        0, &e);
                    if (st == CXLPOOL_ERR_NO_SPACE) {
                        continue;
                    }
                    if (st != CXLPOOL_OK || e.offset % align) {
                        return 2;
                    }
                    fill_pattern(base + e.offset, e.length, e.offset ^ e.gen);
                    mine.push_back(e);
                } else {
                    size_t k = rng() % mine.size();
                    cxlpool_extent_t e = mine[k];
                    if (!check_pattern(base + e.offset, e.length,
                                       e.offset ^ e.gen)) {
                        return 3; /* someone else wrote into our extent */
                    }
                    if (cxlpool_free(pool, e.offset) != CXLPOOL_OK) {
                        return 4;
                    }
                    mine[k] = mine.back();
                    mine.pop_back();
                }
            }
            for (const auto &e : mine) {
                if (!check_pattern(base + e.offset, e.length, e.offset ^ e.gen)) {
                    return 5;
                }
            }
            cxlpool_close(pool);   /* frees what is left */
            return 0;
        }));
    }
    for (pid_t pid : pids) {
        EXPECT_EQ(0, wait_child(pid));
    }

    cxlpool_t *pool;
    cxlpool_stats_t st;
    ASSERT_EQ(CXLPOOL_OK, open(&pool));
    ASSERT_EQ(CXLPOOL_OK, cxlpool_stats(pool, &st));
    EXPECT_EQ(0u, st.extents_used) << "nothing lost, nothing leaked";
    EXPECT_EQ(st.heap_size, st.free_bytes);
    EXPECT_EQ(1u, st.attach_used);
    cxlpool_close(pool);
}

/*
 * Holders keep extents with patterns; a victim is killed at a fault point
 * (or at a random moment) inside the allocator, possibly holding the
 * metadata lock.  Repair must reclaim exactly the victim's extents.
 */
class pool_kill : public pool_multiproc {
protected:
    void SetUp() override
    {
        pool_multiproc::SetUp();
        create(64ull << 20);
        ASSERT_EQ(CXLPOOL_OK, open(&m_pool)) << cxlpool_last_error();
        for (int i = 0; i < 6; ++i) {
            cxlpool_extent_t e;
            ASSERT_EQ(CXLPOOL_OK, cxlpool_alloc(m_pool, 8192 + i * 64, 0, NULL,
                                                0, &e));
            fill_pattern((uint8_t*)cxlpool_base(m_pool) + e.offset, e.length,
                         e.offset);
        }
        cxlpool_extent_t e;
        ASSERT_EQ(CXLPOOL_OK, cxlpool_alloc(m_pool, 4096, 0, "keep",
                                            CXLPOOL_ALLOC_PERSIST, &e));
        fill_pattern((uint8_t*)cxlpool_base(m_pool) + e.offset, e.length,
                     e.offset);
        m_before = all_extents(m_pool);
    }

    void TearDown() override
    {
        cxlpool_close(m_pool);
        pool_multiproc::TearDown();
    }

    /* Victim: attach, allocate n extents, then allocate with crash_at set. */
    pid_t spawn_victim(int n, const char *crash_at, int ready_fd)
    {
        return fork_child([=]() {
            cxlpool_t *pool;
            cxlpool_extent_t e;
            if (open(&pool) != CXLPOOL_OK) {
                return 1;
            }
            for (int i = 0; i < n; ++i) {
                if (cxlpool_alloc(pool, 4096, 0, NULL, 0, &e) != CXLPOOL_OK) {
                    return 2;
                }
            }
            uint64_t token = cxlpool_token(pool);
            if (write(ready_fd, &token, sizeof(token)) != sizeof(token)) {
                return 3;
            }
            if (crash_at != NULL) {
                setenv("CXLPOOL_TEST_CRASH_AT", crash_at, 1);
                cxlpool_alloc(pool, 4096, 0, NULL, 0, &e);
                return 4; /* must not get here */
            }
            for (;;) { /* churn until killed */
                if (cxlpool_alloc(pool, 4096, 0, NULL, 0, &e) == CXLPOOL_OK) {
                    cxlpool_free(pool, e.offset);
                }
            }
        });
    }

    void verify_survivors(uint64_t victim_token)
    {
        extent_map_t after = all_extents(m_pool);
        for (const auto &kv : after) {
            EXPECT_NE(victim_token, kv.second.owner)
                    << "victim extent at " << kv.first << " not reclaimed";
        }
        EXPECT_EQ(m_before.size(), after.size());
        for (const auto &kv : m_before) {
            auto it = after.find(kv.first);
            ASSERT_TRUE(it != after.end()) << "survivor extent lost";
            EXPECT_EQ(kv.second.length, it->second.length);
            EXPECT_EQ(kv.second.gen, it->second.gen);
            EXPECT_TRUE(check_pattern((uint8_t*)cxlpool_base(m_pool) + kv.first,
                                      kv.second.length, kv.first));
        }
        cxlpool_stats_t st;
        ASSERT_EQ(CXLPOOL_OK, cxlpool_stats(m_pool, &st));
        EXPECT_EQ(1u, st.attach_used);
    }

    void crash_at(const char *point, uint32_t expect_reclaimed)
    {
        int fds[2];
        uint64_t token = 0;

        ASSERT_EQ(0, pipe(fds));
        pid_t pid = spawn_victim(5, point, fds[1]);
        ASSERT_EQ((ssize_t)sizeof(token), read(fds[0], &token, sizeof(token)));
        EXPECT_EQ(128 + SIGKILL, wait_child(pid)) << "fault point not reached";
        close(fds[0]);
        close(fds[1]);

        cxlpool_check_report_t rep;
        EXPECT_EQ(CXLPOOL_OK, cxlpool_check(m_pool, 0, &rep, NULL, NULL));
        EXPECT_EQ(1u, rep.dead_attach);
        EXPECT_EQ(expect_reclaimed, rep.dead_extents);

        /* repair takes the lock: breaks it if the victim died holding it */
        EXPECT_EQ(CXLPOOL_OK, cxlpool_check(m_pool, 1, &rep, NULL, NULL))
                << cxlpool_last_error();
        EXPECT_EQ(expect_reclaimed, rep.reclaimed_extents);
        EXPECT_EQ(1u, rep.reclaimed_attach);
        verify_survivors(token);

        EXPECT_EQ(CXLPOOL_OK, cxlpool_check(m_pool, 0, &rep, NULL, NULL));
        EXPECT_EQ(0u, rep.dead_extents + rep.dead_attach);
    }

    cxlpool_t    *m_pool;
    extent_map_t  m_before;
};

TEST_F(pool_kill, in_alloc_before_publish_holding_lock)
{
    crash_at("alloc-record", 5);
}

TEST_F(pool_kill, in_alloc_after_publish_holding_lock)
{
    crash_at("alloc-published", 6);
}

TEST_F(pool_kill, lock_broken_by_next_allocator)
{
    int fds[2];
    uint64_t token;
    cxlpool_extent_t e;

    ASSERT_EQ(0, pipe(fds));
    pid_t pid = spawn_victim(3, "alloc-record", fds[1]);
    ASSERT_EQ((ssize_t)sizeof(token), read(fds[0], &token, sizeof(token)));
    EXPECT_EQ(128 + SIGKILL, wait_child(pid));
    close(fds[0]);
    close(fds[1]);

    /* the victim died holding the lock; a plain alloc must not hang */
    ASSERT_EQ(CXLPOOL_OK, cxlpool_alloc(m_pool, 4096, 0, NULL, 0, &e));
    ASSERT_EQ(CXLPOOL_OK, cxlpool_free(m_pool, e.offset));
    verify_survivors(token);
}

TEST_F(pool_kill, random_kill_during_churn)
{
    std::mt19937 rng(12345);

    for (int round = 0; round < 5; ++round) {
        int fds[2];
        uint64_t token;

        ASSERT_EQ(0, pipe(fds));
        pid_t pid = spawn_victim(4, NULL, fds[1]);
        ASSERT_EQ((ssize_t)sizeof(token), read(fds[0], &token, sizeof(token)));
        usleep(1000 + rng() % 20000);
        kill(pid, SIGKILL);
        EXPECT_EQ(128 + SIGKILL, wait_child(pid));
        close(fds[0]);
        close(fds[1]);

        cxlpool_check_report_t rep;
        EXPECT_EQ(CXLPOOL_OK, cxlpool_check(m_pool, 1, &rep, NULL, NULL));
        EXPECT_GE(rep.reclaimed_extents, 4u);
        EXPECT_LE(rep.reclaimed_extents, 5u);
        verify_survivors(token);
    }
}

TEST_F(pool_kill, attach_recovers_dead_owner)
{
    int fds[2];
    uint64_t token;

    ASSERT_EQ(0, pipe(fds));
    pid_t pid = spawn_victim(2, "alloc-published", fds[1]);
    ASSERT_EQ((ssize_t)sizeof(token), read(fds[0], &token, sizeof(token)));
    EXPECT_EQ(128 + SIGKILL, wait_child(pid));
    close(fds[0]);
    close(fds[1]);

    /* a new attachment runs recovery */
    cxlpool_t *other;
    ASSERT_EQ(CXLPOOL_OK, open(&other));
    cxlpool_close(other);
    verify_survivors(token);
}

TEST_F(pool_kill, crash_while_claiming_slot)
{
    pid_t pid = fork_child([this]() {
        cxlpool_t *pool;
        setenv("CXLPOOL_TEST_CRASH_AT", "attach-record", 1);
        open(&pool);
        return 4;
    });
    EXPECT_EQ(128 + SIGKILL, wait_child(pid));

    cxlpool_stats_t st;
    cxlpool_t *other;
    ASSERT_EQ(CXLPOOL_OK, open(&other)) << "lock of the dead claimer is broken";
    ASSERT_EQ(CXLPOOL_OK, cxlpool_stats(other, &st));
    EXPECT_EQ(2u, st.attach_used);
    cxlpool_close(other);
    verify_survivors(1);
}

/* Records of processes on other hosts are judged by their lease. */
TEST_F(pool_kill, foreign_host_lease)
{
    cxlpool_sb_t *sb = (cxlpool_sb_t*)cxlpool_base(m_pool);
    cxlpool_attach_rec_t *att = (cxlpool_attach_rec_t*)
            ((uint8_t*)sb + sb->attach_offset);
    cxlpool_extent_rec_t *ext = (cxlpool_extent_rec_t*)
            ((uint8_t*)sb + sb->extent_offset);
    const uint32_t slot = sb->max_attach - 1, rec = sb->max_extents - 1;
    uint64_t now = cxlpool_now_ns();

    /* a live-looking attachment of another host, holding one extent */
    att[slot].gen          = 7;
    att[slot].host_id      = 0x1234;
    att[slot].pid          = 1;
    att[slot].lease_ms     = 1000;
    att[slot].attach_ns    = now;
    att[slot].heartbeat_ns = now;
    att[slot].crc          = cxlpool_attach_crc(&att[slot]);
    att[slot].state        = CXLPOOL_ATT_ACTIVE;
    ext[rec].owner         = cxlpool_token_make(slot, 7);
    ext[rec].offset        = sb->size - 4096;
    ext[rec].length        = 4096;
    ext[rec].gen           = 1;
    ext[rec].crc           = cxlpool_extent_crc(&ext[rec]);
    ext[rec].state         = CXLPOOL_EXT_ALLOCATED;

    uint32_t n_ext, n_att;
    ASSERT_EQ(CXLPOOL_OK, cxlpool_recover(m_pool, &n_ext, &n_att));
    EXPECT_EQ(0u, n_ext) << "a fresh lease is never reclaimed";
    EXPECT_EQ(0u, n_att);

    att[slot].heartbeat_ns = now - 5ull * 1000 * 1000 * 1000;
    cxlpool_check_report_t rep;
    EXPECT_EQ(CXLPOOL_OK, cxlpool_check(m_pool, 0, &rep, NULL, NULL));
    EXPECT_EQ(1u, rep.dead_attach);
    EXPECT_EQ(1u, rep.dead_extents);
    ASSERT_EQ(CXLPOOL_OK, cxlpool_recover(m_pool, &n_ext, &n_att));
    EXPECT_EQ(1u, n_ext);
    EXPECT_EQ(1u, n_att);
    verify_survivors(cxlpool_token_make(slot, 7));
}

TEST_F(pool_kill, heartbeat_thread_renews_lease)
{
    cxlpool_params_t params;
    cxlpool_t *pool;

    cxlpool_params_init(&params);
    params.path     = path();
    params.lease_ms = 40; /* beats every 10 ms */
    ASSERT_EQ(CXLPOOL_OK, cxlpool_open(&params, &pool));
    cxlpool_sb_t *sb = (cxlpool_sb_t*)cxlpool_base(pool);
    cxlpool_attach_rec_t *att = (cxlpool_attach_rec_t*)
            ((uint8_t*)sb + sb->attach_offset);
    uint32_t slot = cxlpool_token_slot(cxlpool_token(pool));
    /* the heartbeat thread stores it meanwhile */
    uint64_t first = __atomic_load_n(&att[slot].heartbeat_ns, __ATOMIC_RELAXED);
    usleep(100 * 1000);
    EXPECT_GT(__atomic_load_n(&att[slot].heartbeat_ns, __ATOMIC_RELAXED),
              first);
    cxlpool_close(pool);
}
