/*
 * emulate-nc: the strict non-coherent pool emulator.  Each emulated host
 * sees the pool through a private view; only write-back and invalidate move
 * data between a view and the pool file ("memory").  These tests check the
 * values each host sees, so a missing copy, an early copy or a wrong host
 * choice fails them.
 */
#include "pool_test_util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace {

const char *host_env = "UCX_CXL_HOST_INDEX";

class emulate_nc : public cxltest::pool_test {
protected:
    void SetUp() override
    {
        cxltest::pool_test::SetUp();
        unsetenv(host_env);
        m_emu = std::string(CXLPOOL_EMULATE_NC_PREFIX) + m_path;

        cxlpool_params_t params;
        cxlpool_t *pool;

        cxlpool_params_init(&params);
        params.path  = m_emu.c_str();
        params.size  = pool_size;
        params.flags = CXLPOOL_CREATE | CXLPOOL_EXCL | CXLPOOL_NO_ATTACH |
                       CXLPOOL_NO_HEARTBEAT;
        ASSERT_EQ(CXLPOOL_OK, cxlpool_open(&params, &pool))
                << cxlpool_last_error();
        cxlpool_info_t info;
        cxlpool_info(pool, &info);
        m_heap = info.heap_offset;
        cxlpool_close(pool);
    }

    void TearDown() override
    {
        unsetenv(host_env);
        for (int k = 0; k < CXLPOOL_MAX_HOSTS; ++k) {
            unlink(view(k).c_str());
            unlink((view(k) + ".lock").c_str());
        }
        cxltest::pool_test::TearDown();
    }

    cxlpool_status_t open_host(int host, cxlpool_t **pool,
                               unsigned flags = CXLPOOL_NO_ATTACH |
                                                CXLPOOL_NO_HEARTBEAT)
    {
        cxlpool_params_t params;

        cxlpool_params_init(&params);
        params.path       = m_emu.c_str();
        params.flags      = flags;
        params.host_index = host;
        return cxlpool_open(&params, pool);
    }

    std::string view(int k) const
    {
        return m_path + ".host" + std::to_string(k);
    }

    bool exists(const std::string &p) const
    {
        return access(p.c_str(), F_OK) == 0;
    }

    /* heap word i as host pool sees it */
    volatile uint64_t *word(cxlpool_t *pool, size_t i) const
    {
        return (volatile uint64_t*)((uint8_t*)cxlpool_base(pool) + m_heap) + i;
    }

    /* heap word i in memory (the pool file), read past every view */
    uint64_t mem_word(size_t i) const
    {
        uint64_t v = 0xdeadull;
        int fd     = ::open(path(), O_RDONLY);

        if (fd >= 0) {
            if (pread(fd, &v, sizeof(v), m_heap + i * sizeof(v)) != sizeof(v)) {
                v = 0xdeadull;
            }
            close(fd);
        }
        return v;
    }

    pid_t start_syncing(int host,
                        const std::function<void(volatile uint64_t *)> &sync);

    static constexpr uint64_t pool_size = 32ull << 20;

    std::string m_emu;
    uint64_t    m_heap = 0;
};

/*
 * Pipes to and from one child.  The parent closes the child's ends after
 * the fork, so a child that dies early gives EOF instead of a hang.
 */
struct chan {
    int to_child[2]   = {-1, -1};
    int to_parent[2]  = {-1, -1};

    bool open()
    {
        return (pipe(to_child) == 0) && (pipe(to_parent) == 0);
    }
    void parent_side()
    {
        close(to_child[0]);
        close(to_parent[1]);
        to_child[0] = to_parent[1] = -1;
    }
    ~chan()
    {
        for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) {
            if (fd >= 0) {
                close(fd);
            }
        }
    }
};

/*
 * A process of emulated host `host` that calls sync(heap word 0 of its
 * view) for ever, for the caller to kill: its pid once it runs, or -1
 * (reported).
 */
pid_t emulate_nc::start_syncing(
        int host, const std::function<void(volatile uint64_t *)> &sync)
{
    chan ch_;
    char c;

    if (!ch_.open()) {
        ADD_FAILURE() << "pipe: " << strerror(errno);
        return -1;
    }
    pid_t pid = cxltest::fork_child([&]() {
        cxlpool_t *ch;

        if (open_host(host, &ch) != CXLPOOL_OK) {
            return 1;
        }
        volatile uint64_t *line = word(ch, 0);
        if (write(ch_.to_parent[1], "r", 1) != 1) {
            return 2;
        }
        for (;;) {
            sync(line);
        }
    });
    if (pid <= 0) {
        ADD_FAILURE() << "fork failed";
        return -1;
    }
    ch_.parent_side();
    if (read(ch_.to_parent[0], &c, 1) != 1) {
        ADD_FAILURE() << "the host " << host << " process did not start: exit "
                      << cxltest::wait_child(pid);
        return -1;
    }
    return pid;
}

/* 8 words per cache line */
const size_t LINE_WORDS = CXL_CACHE_LINE / sizeof(uint64_t);

} // namespace

TEST_F(emulate_nc, opens_as_sw_pool_of_its_own_backend)
{
    cxlpool_t *h;
    cxlpool_info_t info;

    ASSERT_EQ(CXLPOOL_OK, open_host(3, &h)) << cxlpool_last_error();
    cxlpool_info(h, &info);
    EXPECT_EQ(CXL_COH_SW, cxlpool_coherence(h));
    EXPECT_EQ(CXLPOOL_BACKEND_EMULATE_NC, info.backend);
    EXPECT_EQ(3u, cxlpool_host_index(h));
    EXPECT_EQ((uint32_t)CXLPOOL_DEFAULT_SW_HOSTS, cxlpool_nr_hosts(h));
    EXPECT_STREQ(path(), info.path);
    EXPECT_TRUE(exists(view(3)));
    cxlpool_close(h);

    ASSERT_EQ(CXLPOOL_OK, cxlpool_probe(m_emu.c_str(), &info))
            << cxlpool_last_error();
    EXPECT_EQ(CXLPOOL_BACKEND_EMULATE_NC, info.backend);
    EXPECT_EQ(CXL_COH_SW, info.coherence);
    /* the pool file itself is an ordinary pool */
    ASSERT_EQ(CXLPOOL_OK, cxlpool_probe(path(), &info));
    EXPECT_NE(CXLPOOL_BACKEND_EMULATE_NC, info.backend);
}

/* (1) a store that is never written back never reaches another host */
TEST_F(emulate_nc, store_without_writeback_is_invisible)
{
    cxlpool_t *h0, *h1;

    ASSERT_EQ(CXLPOOL_OK, open_host(0, &h0)) << cxlpool_last_error();
    ASSERT_EQ(CXLPOOL_OK, open_host(1, &h1)) << cxlpool_last_error();
    ASSERT_NE(cxlpool_base(h0), cxlpool_base(h1));

    *word(h0, 0) = 0x1111;
    cxl_coh_fence(CXL_COH_SW);
    cxl_coh_invalidate(CXL_COH_SW, (void*)word(h1, 0), sizeof(uint64_t));
    EXPECT_EQ(0u, *word(h1, 0));
    EXPECT_EQ(0u, mem_word(0));
    /* host 0 itself sees its own store */
    EXPECT_EQ(0x1111u, *word(h0, 0));

    cxlpool_close(h1);
    cxlpool_close(h0);
}

/* (2) written back: memory has it, host 1 is stale until it invalidates */
TEST_F(emulate_nc, writeback_then_stale_until_invalidate)
{
    cxlpool_t *h0, *h1;

    ASSERT_EQ(CXLPOOL_OK, open_host(0, &h0)) << cxlpool_last_error();
    ASSERT_EQ(CXLPOOL_OK, open_host(1, &h1)) << cxlpool_last_error();
    EXPECT_EQ(0u, *word(h1, 0));

    /* two words of line 0 and one of line 1; write back one byte of line 0 */
    *word(h0, 0)              = 0xa0;
    *word(h0, 3)              = 0xa3;
    *word(h0, LINE_WORDS + 1) = 0xb1;
    cxl_coh_writeback(CXL_COH_SW, (uint8_t*)word(h0, 0) + 5, 1);
    cxl_coh_fence(CXL_COH_SW);

    EXPECT_EQ(0xa0u, mem_word(0));
    EXPECT_EQ(0xa3u, mem_word(3));  /* the whole line went */
    EXPECT_EQ(0u, mem_word(LINE_WORDS + 1)); /* not the next one */

    EXPECT_EQ(0u, *word(h1, 0));    /* stale */
    EXPECT_EQ(0u, *word(h1, 3));
    cxl_coh_invalidate(CXL_COH_SW, (void*)word(h1, 3), 1);
    EXPECT_EQ(0xa0u, *word(h1, 0));
    EXPECT_EQ(0xa3u, *word(h1, 3));
    EXPECT_EQ(0u, *word(h1, LINE_WORDS + 1));

    /* a range over both lines carries the rest */
    cxl_coh_publish(CXL_COH_SW, (void*)word(h0, 0), 2 * CXL_CACHE_LINE);
    cxl_coh_invalidate(CXL_COH_SW, (void*)word(h1, 0), 2 * CXL_CACHE_LINE);
    EXPECT_EQ(0xb1u, *word(h1, LINE_WORDS + 1));

    /* hw mode is a no-op even on an emulated view */
    *word(h0, 0) = 0xc0;
    cxl_coh_writeback(CXL_COH_HW, (void*)word(h0, 0), 8);
    EXPECT_EQ(0xa0u, mem_word(0));

    cxlpool_close(h1);
    cxlpool_close(h0);
}

/* (3) processes of one emulated host share its view: coherent, CAS works */
TEST_F(emulate_nc, same_host_processes_are_coherent)
{
    const int iters = 20000;
    cxlpool_t *h;
    char c = 0;
    chan ch_;
    int *to_child = ch_.to_child, *to_parent = ch_.to_parent;

    ASSERT_EQ(CXLPOOL_OK, open_host(2, &h)) << cxlpool_last_error();
    ASSERT_TRUE(ch_.open());

    pid_t pid = cxltest::fork_child([&]() {
        cxlpool_t *ch;
        char b = 0;

        if (open_host(2, &ch) != CXLPOOL_OK) {
            return 1;
        }
        if (cxlpool_host_index(ch) != 2) {
            return 2;
        }
        *word(ch, 0) = 0x5eed;                 /* no write-back */
        if ((write(to_parent[1], "s", 1) != 1) ||
            (read(to_child[0], &b, 1) != 1)) {
            return 3;
        }
        if (*word(ch, 1) != 0xfeed) {          /* parent's, no invalidate */
            return 4;
        }
        for (int i = 0; i < iters; ++i) {
            __atomic_fetch_add(word(ch, 2), 1, __ATOMIC_SEQ_CST);
        }
        cxlpool_close(ch);
        return 0;
    });
    ASSERT_GT(pid, 0);
    ch_.parent_side();

    ASSERT_EQ(1, read(to_parent[0], &c, 1));
    EXPECT_EQ(0x5eedu, *word(h, 0));
    EXPECT_EQ(0u, mem_word(0));               /* still only in the view */
    *word(h, 1) = 0xfeed;
    ASSERT_EQ(1, write(to_child[1], "g", 1));
    for (int i = 0; i < iters; ++i) {
        __atomic_fetch_add(word(h, 2), 1, __ATOMIC_SEQ_CST);
    }
    EXPECT_EQ(0, cxltest::wait_child(pid));
    EXPECT_EQ(2u * iters, *word(h, 2));
    /* the host is still live in the parent: its view stays */
    EXPECT_TRUE(exists(view(2)));
    cxlpool_close(h);
}

/* (4) automatic choice: one host per process, freed when it exits */
TEST_F(emulate_nc, auto_choice_per_process)
{
    cxlpool_t *h, *other;
    uint32_t mine, theirs = 99, again = 99;

    ASSERT_EQ(CXLPOOL_OK, open_host(-1, &h)) << cxlpool_last_error();
    mine = cxlpool_host_index(h);
    EXPECT_EQ(0u, mine);

    /* an auto host is exclusive: an explicit index cannot join it */
    EXPECT_EQ(CXLPOOL_ERR_BUSY, open_host((int)mine, &other));

    /* runs an auto-choosing child; returns its host index, 99 if none */
    auto child_host = [&](chan &c, pid_t *pid) {
        uint32_t k = 99;

        if (!c.open()) {
            return k;
        }
        *pid = cxltest::fork_child([&]() {
            cxlpool_t *ch;
            uint32_t idx;
            char b;

            if (open_host(-1, &ch) != CXLPOOL_OK) {
                return 1;
            }
            idx = cxlpool_host_index(ch);
            if ((write(c.to_parent[1], &idx, sizeof(idx)) != sizeof(idx)) ||
                (read(c.to_child[0], &b, 1) != 1)) {
                return 2;
            }
            cxlpool_close(ch);
            return 0;
        });
        c.parent_side();
        if (read(c.to_parent[0], &k, sizeof(k)) != sizeof(k)) {
            k = 99;
        }
        return k;
    };
    chan c1, c2;
    pid_t pid = -1;

    theirs = child_host(c1, &pid);
    ASSERT_GT(pid, 0);
    ASSERT_NE(99u, theirs);
    EXPECT_NE(mine, theirs);
    EXPECT_LT(theirs, (uint32_t)CXLPOOL_DEFAULT_SW_HOSTS);
    /* while the child lives, its host is taken */
    ASSERT_EQ(CXLPOOL_OK, open_host(-1, &other)) << cxlpool_last_error();
    EXPECT_NE(mine, cxlpool_host_index(other));
    EXPECT_NE(theirs, cxlpool_host_index(other));
    cxlpool_close(other);
    ASSERT_EQ(1, write(c1.to_child[1], "x", 1));
    EXPECT_EQ(0, cxltest::wait_child(pid));

    /* the exited child's host is free again: the next process gets it */
    again = child_host(c2, &pid);
    ASSERT_GT(pid, 0);
    EXPECT_EQ(theirs, again);
    ASSERT_EQ(1, write(c2.to_child[1], "x", 1));
    EXPECT_EQ(0, cxltest::wait_child(pid));

    cxlpool_close(h);
}

TEST_F(emulate_nc, auto_choice_runs_out_of_hosts)
{
    std::vector<cxlpool_t*> hs;
    cxlpool_t *h;

    /* each handle holds its own host, like a process of its own */
    for (uint32_t k = 0; k < CXLPOOL_DEFAULT_SW_HOSTS; ++k) {
        ASSERT_EQ(CXLPOOL_OK, open_host(-1, &h)) << cxlpool_last_error();
        EXPECT_EQ(k, cxlpool_host_index(h));
        hs.push_back(h);
    }
    EXPECT_EQ(CXLPOOL_ERR_NO_SLOT, open_host(-1, &h));
    EXPECT_NE(nullptr, strstr(cxlpool_last_error(), "emulated hosts"));

    cxlpool_close(hs[5]);
    ASSERT_EQ(CXLPOOL_OK, open_host(-1, &h)) << cxlpool_last_error();
    EXPECT_EQ(5u, cxlpool_host_index(h));
    hs[5] = h;
    for (cxlpool_t *p : hs) {
        cxlpool_close(p);
    }
    for (int k = 0; k < CXLPOOL_DEFAULT_SW_HOSTS; ++k) {
        EXPECT_FALSE(exists(view(k))) << view(k);
    }
}

/* (5) invalidate drops this host's own un-written-back data in the line */
TEST_F(emulate_nc, invalidate_writes_back_own_stores_first)
{
    cxlpool_t *h0, *h1;

    ASSERT_EQ(CXLPOOL_OK, open_host(0, &h0)) << cxlpool_last_error();
    ASSERT_EQ(CXLPOOL_OK, open_host(1, &h1)) << cxlpool_last_error();

    *word(h0, 0) = 0x77;
    cxl_coh_publish(CXL_COH_SW, (void*)word(h0, 0), 8);
    *word(h0, 1) = 0x88;                    /* same line, not written back */
    *word(h0, LINE_WORDS) = 0x99;           /* next line, not written back */
    /* clean and invalidate (CLFLUSHOPT): the host's own store survives and
     * reaches memory */
    cxl_coh_invalidate(CXL_COH_SW, (void*)word(h0, 0), 8);
    EXPECT_EQ(0x77u, *word(h0, 0));
    EXPECT_EQ(0x88u, *word(h0, 1));
    EXPECT_EQ(0x99u, *word(h0, LINE_WORDS)); /* other lines untouched */

    cxl_coh_invalidate(CXL_COH_SW, (void*)word(h1, 0), 2 * CXL_CACHE_LINE);
    EXPECT_EQ(0x77u, *word(h1, 0));
    EXPECT_EQ(0x88u, *word(h1, 1));
    EXPECT_EQ(0u, *word(h1, LINE_WORDS));   /* never flushed: invisible */

    /* a line host 1 did not store into takes host 0's newer data ... */
    *word(h0, 2) = 0xaa;
    cxl_coh_writeback(CXL_COH_SW, (void*)word(h0, 2), 8);
    cxl_coh_invalidate(CXL_COH_SW, (void*)word(h1, 2), 8);
    EXPECT_EQ(0xaau, *word(h1, 2));
    /* ... but two hosts storing into one line clobber each other: the
     * one-writer-per-line rule, made visible */
    *word(h1, 3) = 0xbb;
    *word(h0, 4) = 0xcc;
    cxl_coh_writeback(CXL_COH_SW, (void*)word(h0, 4), 8);
    cxl_coh_writeback(CXL_COH_SW, (void*)word(h1, 3), 8);
    cxl_coh_invalidate(CXL_COH_SW, (void*)word(h0, 0), 8);
    EXPECT_EQ(0xbbu, *word(h0, 3));
    EXPECT_EQ(0u, *word(h0, 4)) << "host 1's write-back carried its stale "
                                   "copy of host 0's word";

    cxlpool_close(h1);
    cxlpool_close(h0);
}

/* (6) bad host indexes, from params and from the environment */
TEST_F(emulate_nc, bad_host_index)
{
    cxlpool_t *h;

    EXPECT_EQ(CXLPOOL_ERR_INVAL, open_host(CXLPOOL_DEFAULT_SW_HOSTS, &h));
    EXPECT_NE(nullptr, strstr(cxlpool_last_error(), "out of range"))
            << cxlpool_last_error();
    EXPECT_EQ(CXLPOOL_ERR_INVAL, open_host(CXLPOOL_MAX_HOSTS + 1, &h));
    EXPECT_EQ(CXLPOOL_ERR_INVAL, open_host(-2, &h));

    for (const char *bad : {"abc", "1x", "-1", "", " 1", "99999999999999"}) {
        setenv(host_env, bad, 1);
        EXPECT_EQ(CXLPOOL_ERR_INVAL, open_host(-1, &h)) << "'" << bad << "'";
        EXPECT_NE(nullptr, strstr(cxlpool_last_error(), host_env))
                << cxlpool_last_error();
    }
    setenv(host_env, "8", 1);
    EXPECT_EQ(CXLPOOL_ERR_INVAL, open_host(-1, &h));
    EXPECT_NE(nullptr, strstr(cxlpool_last_error(), host_env))
            << cxlpool_last_error();

    /* failed opens leave no view behind */
    for (int k = 0; k < CXLPOOL_MAX_HOSTS; ++k) {
        EXPECT_FALSE(exists(view(k))) << view(k);
        EXPECT_FALSE(exists(view(k) + ".lock")) << view(k);
    }

    /* a good one is used; params win over the environment */
    setenv(host_env, "6", 1);
    ASSERT_EQ(CXLPOOL_OK, open_host(-1, &h)) << cxlpool_last_error();
    EXPECT_EQ(6u, cxlpool_host_index(h));
    cxlpool_close(h);
    ASSERT_EQ(CXLPOOL_OK, open_host(4, &h)) << cxlpool_last_error();
    EXPECT_EQ(4u, cxlpool_host_index(h));
    cxlpool_close(h);
    setenv(host_env, "auto", 1);
    ASSERT_EQ(CXLPOOL_OK, open_host(-1, &h)) << cxlpool_last_error();
    EXPECT_EQ(0u, cxlpool_host_index(h));
    cxlpool_close(h);

    /* no pool behind the prefix */
    std::string missing = m_emu + ".missing";
    cxlpool_params_t params;
    cxlpool_params_init(&params);
    params.path  = missing.c_str();
    params.flags = CXLPOOL_NO_ATTACH;
    EXPECT_EQ(CXLPOOL_ERR_NOENT, cxlpool_open(&params, &h));
}

/* The number of emulated hosts is the pool's host partitions. */
TEST_F(emulate_nc, host_count_from_superblock)
{
    std::string two = m_path + ".two", emu_two = m_emu + ".two";
    cxlpool_params_t params;
    cxlpool_t *a, *b, *c;

    cxlpool_params_init(&params);
    params.path     = emu_two.c_str();
    params.size     = 32ull << 20;
    params.nr_hosts = 2;
    params.flags    = CXLPOOL_CREATE | CXLPOOL_EXCL | CXLPOOL_NO_ATTACH |
                      CXLPOOL_NO_HEARTBEAT;
    ASSERT_EQ(CXLPOOL_OK, cxlpool_open(&params, &a)) << cxlpool_last_error();
    EXPECT_EQ(2u, cxlpool_nr_hosts(a));
    EXPECT_EQ(0u, cxlpool_host_index(a));

    params.flags = CXLPOOL_NO_ATTACH | CXLPOOL_NO_HEARTBEAT;
    ASSERT_EQ(CXLPOOL_OK, cxlpool_open(&params, &b)) << cxlpool_last_error();
    EXPECT_EQ(1u, cxlpool_host_index(b));
    EXPECT_EQ(CXLPOOL_ERR_NO_SLOT, cxlpool_open(&params, &c));
    params.host_index = 2;
    EXPECT_EQ(CXLPOOL_ERR_INVAL, cxlpool_open(&params, &c));
    cxlpool_close(b);
    cxlpool_close(a);

    EXPECT_EQ(CXLPOOL_OK, cxlpool_destroy(emu_two.c_str(), 0))
            << cxlpool_last_error();
    EXPECT_FALSE(exists(two));
    EXPECT_FALSE(exists(two + ".host0"));
}

/* (7) the last close removes the view; a killed only user leaves a stale
 * view that the next opener refills from memory */
TEST_F(emulate_nc, view_lifetime_and_refill_after_kill)
{
    const size_t far = (1u << 20) / sizeof(uint64_t); /* a page memory
                                                          never got */
    cxlpool_t *h, *h2;
    chan ch_;
    char c;

    ASSERT_EQ(CXLPOOL_OK, open_host(3, &h)) << cxlpool_last_error();
    ASSERT_EQ(CXLPOOL_OK, open_host(3, &h2)) << cxlpool_last_error();
    EXPECT_TRUE(exists(view(3)));
    cxlpool_close(h);
    EXPECT_TRUE(exists(view(3)));           /* h2 still uses it */
    cxlpool_close(h2);
    EXPECT_FALSE(exists(view(3)));
    EXPECT_FALSE(exists(view(3) + ".lock"));

    ASSERT_TRUE(ch_.open());
    pid_t pid = cxltest::fork_child([&]() {
        cxlpool_t *ch;

        if (open_host(3, &ch) != CXLPOOL_OK) {
            return 1;
        }
        *word(ch, 0)          = 0xdead;     /* dirty, never written back */
        *word(ch, LINE_WORDS) = 0x600d;
        *word(ch, far)        = 0xbad;
        cxl_coh_publish(CXL_COH_SW, (void*)word(ch, LINE_WORDS), 8);
        if (write(ch_.to_parent[1], "r", 1) != 1) {
            return 2;
        }
        for (;;) {
            pause();
        }
    });
    ASSERT_GT(pid, 0);
    ch_.parent_side();
    if (read(ch_.to_parent[0], &c, 1) != 1) {
        kill(pid, SIGKILL);
        FAIL() << "child failed: " << cxltest::wait_child(pid);
    }
    ASSERT_EQ(0, kill(pid, SIGKILL));
    EXPECT_EQ(128 + SIGKILL, cxltest::wait_child(pid));
    EXPECT_TRUE(exists(view(3)));           /* left behind, unheld */

    ASSERT_EQ(CXLPOOL_OK, open_host(3, &h)) << cxlpool_last_error();
    EXPECT_EQ(0u, *word(h, 0));             /* the dead cache is gone */
    EXPECT_EQ(0x600du, *word(h, LINE_WORDS));
    EXPECT_EQ(0u, *word(h, far));
    EXPECT_EQ(0u, mem_word(far));
    cxlpool_close(h);
    EXPECT_FALSE(exists(view(3)));

    /* destroy removes views nobody holds */
    pid = cxltest::fork_child([&]() {
        cxlpool_t *ch;
        if (open_host(5, &ch) != CXLPOOL_OK) {
            return 1;
        }
        _exit(0);                           /* no close */
    });
    EXPECT_EQ(0, cxltest::wait_child(pid));
    EXPECT_TRUE(exists(view(5)));
    EXPECT_EQ(CXLPOOL_OK, cxlpool_destroy(m_emu.c_str(), 0))
            << cxlpool_last_error();
    EXPECT_FALSE(exists(path()));
    EXPECT_FALSE(exists(view(5)));
    EXPECT_FALSE(exists(view(5) + ".lock"));
}

/* Attached processes of two emulated hosts: opening and closing works. */
TEST_F(emulate_nc, attach_and_close)
{
    cxlpool_t *h0, *h1;

    ASSERT_EQ(CXLPOOL_OK, open_host(0, &h0, CXLPOOL_NO_HEARTBEAT))
            << cxlpool_last_error();
    ASSERT_EQ(CXLPOOL_OK, open_host(1, &h1, CXLPOOL_NO_HEARTBEAT))
            << cxlpool_last_error();
    EXPECT_NE(0u, cxlpool_token(h0));
    EXPECT_NE(0u, cxlpool_token(h1));
    cxlpool_close(h1);
    cxlpool_close(h0);
    EXPECT_FALSE(exists(view(0)));
    EXPECT_FALSE(exists(view(1)));
}

/* A stripe lock table for a view of plain buffers, which no other
 * process maps. */
struct emu_locks {
    explicit emu_locks(size_t len) : p(malloc(cxl_coh_emu_locks_size(len)))
    {
        ok = (p != NULL) && (cxl_coh_emu_locks_init(p, len) == 0);
    }
    ~emu_locks()
    {
        free(p);
    }
    void *p;
    bool ok;
};

/* The registry itself, on plain buffers. */
TEST(coherence_emu, registry)
{
    const size_t len = 4 * CXL_CACHE_LINE;
    alignas(64) static uint8_t view[len], mem[len], clean[len], other[len];

    memset(view, 0, len);
    memset(mem, 0, len);
    memset(clean, 0, len);
    emu_locks locks(len);
    ASSERT_TRUE(locks.ok);
    EXPECT_EQ(-1, cxl_coh_emu_register(view + 8, mem, clean, len - 64,
                                       locks.p));
    EXPECT_EQ(-1, cxl_coh_emu_register(view, mem, clean, 100, locks.p));
    EXPECT_EQ(-1, cxl_coh_emu_register(view, mem, NULL, len, locks.p));
    EXPECT_EQ(-1, cxl_coh_emu_register(view, mem, clean, len, NULL));
    ASSERT_EQ(0, cxl_coh_emu_register(view, mem, clean, len, locks.p));
    EXPECT_EQ(-1, cxl_coh_emu_register(view + 64, other, clean, 64,
                                       locks.p)); /* overlap */

    view[70] = 1;
    view[130] = 2;
    cxl_coh_writeback(CXL_COH_SW, view + 65, 64);  /* lines 1 and 2 */
    EXPECT_EQ(1, mem[70]);
    EXPECT_EQ(2, mem[130]);
    EXPECT_EQ(1, clean[70]);

    /* line 0 unchanged here: invalidate takes memory's new data */
    mem[0] = 3;
    cxl_coh_invalidate(CXL_COH_SW, view + 63, 1);
    EXPECT_EQ(3, view[0]);
    EXPECT_EQ(3, clean[0]);
    /* line 0 stored into here: written back first, then reloaded */
    view[10] = 4;
    cxl_coh_invalidate(CXL_COH_SW, view + 10, 1);
    EXPECT_EQ(4, mem[10]);
    EXPECT_EQ(4, view[10]);
    EXPECT_EQ(3, view[0]);

    /* several lines in one invalidate: each reloaded from memory */
    mem[64] = 9;
    mem[3 * 64 + 1] = 10;
    const void *some[] = {view + 64 + 5, view + 3 * 64 + 60};
    cxl_coh_invalidate_lines(CXL_COH_SW, some, 2);
    EXPECT_EQ(9, view[64]);
    EXPECT_EQ(10, view[3 * 64 + 1]);

    /* a copy into the view is in memory at once (nothing bypasses it) */
    uint8_t data[50];
    memset(data, 7, sizeof(data));
    cxl_coh_copy(CXL_COH_SW, view + 140, data, sizeof(data));
    EXPECT_EQ(7, mem[140]);
    EXPECT_EQ(7, mem[189]);
    EXPECT_EQ(7, view[189]);
    EXPECT_EQ(0, mem[190]);

    /* a range that runs past the view: the rest is flushed for real */
    other[0] = 5;
    cxl_coh_writeback(CXL_COH_SW, view + len - 64, 64);
    cxl_coh_writeback(CXL_COH_SW, other, sizeof(other));
    EXPECT_EQ(5, other[0]);

    cxl_coh_emu_unregister(view);
    view[200] = 6;
    cxl_coh_writeback(CXL_COH_SW, view, len);
    EXPECT_EQ(0, mem[200]);
    EXPECT_EQ(6, view[200]);
}

/* Freeing an extent drops its bytes from memory and from the view, so a
 * later view fill does not copy what nobody may read any more. */
TEST_F(emulate_nc, free_discards_the_extent)
{
    const uint64_t len = 1ull << 20;
    cxlpool_extent_t ext;
    struct stat before, after;
    cxlpool_t *h;

    ASSERT_EQ(CXLPOOL_OK, open_host(0, &h, CXLPOOL_NO_HEARTBEAT))
            << cxlpool_last_error();
    ASSERT_EQ(CXLPOOL_OK, cxlpool_alloc(h, len, 4096, NULL, 0, &ext))
            << cxlpool_last_error();
    uint8_t *p = (uint8_t*)cxlpool_base(h) + ext.offset;
    memset(p, 0x5a, len);
    cxl_coh_writeback(CXL_COH_SW, p, len);
    ASSERT_EQ(0, stat(m_path.c_str(), &before));

    ASSERT_EQ(CXLPOOL_OK, cxlpool_free(h, ext.offset)) << cxlpool_last_error();
    ASSERT_EQ(0, stat(m_path.c_str(), &after));
    EXPECT_LE((uint64_t)after.st_blocks * 512 + len / 2,
              (uint64_t)before.st_blocks * 512)
            << "the freed megabyte still occupies the pool file";
    EXPECT_EQ(0, p[0]);           /* the view dropped it too ... */
    EXPECT_EQ(0, p[len - 1]);
    cxl_coh_invalidate(CXL_COH_SW, p, 64);
    EXPECT_EQ(0, p[0]);           /* ... consistently with memory */
    cxlpool_close(h);
}

/*
 * cxl_coh_store_line: the line reaches memory whole.  A writer view keeps
 * storing lines whose eight words all hold k (k growing); a reader view of
 * the same memory keeps invalidating and reading: once it sees word 0 = k
 * the other words must hold k or later (with the write-back in word order
 * 0..7 a reader caught word 0 new and the rest old).  On real memory: the
 * store (MOVDIR64B) lands whole where the CPU has it.
 */
TEST(coherence_emu, store_line_is_whole)
{
    const size_t len = CXL_CACHE_LINE;
    alignas(64) static uint64_t wview[8], rview[8], mem[8], wclean[8],
                                rclean[8], plain[8];
    const unsigned rounds = 200000;
    uint64_t line[8];

    if (!cxl_coh_line_atomic()) {
        /* callers keep the two-write publish; nothing to check here */
        std::cout << "no MOVDIR64B on this CPU: cxl_coh_store_line unused"
                  << std::endl;
        return;
    }
    for (unsigned i = 0; i < 8; ++i) {
        line[i] = 0x1111111111111111ull * (i + 1);
    }
    cxl_coh_store_line(CXL_COH_SW, plain, line);
    cxl_coh_fence(CXL_COH_SW);
    EXPECT_EQ(0, memcmp(plain, line, sizeof(line)));

    memset(wview, 0, len);
    memset(rview, 0, len);
    memset(mem, 0, len);
    memset(wclean, 0, len);
    memset(rclean, 0, len);
    emu_locks wlocks(len), rlocks(len); /* two hosts */
    ASSERT_TRUE(wlocks.ok && rlocks.ok);
    ASSERT_EQ(0, cxl_coh_emu_register(wview, mem, wclean, len, wlocks.p));
    ASSERT_EQ(0, cxl_coh_emu_register(rview, mem, rclean, len, rlocks.p));

    std::atomic<bool> done{false};
    std::atomic<unsigned long> torn{0}, seen{0};
    std::thread reader([&] {
        while (!done.load(std::memory_order_acquire)) {
            cxl_coh_invalidate(CXL_COH_SW, rview, len);
            uint64_t w0 = __atomic_load_n(&rview[0], __ATOMIC_ACQUIRE);
            for (unsigned i = 1; i < 8; ++i) {
                if (__atomic_load_n(&rview[i], __ATOMIC_RELAXED) < w0) {
                    torn++;
                }
            }
            seen++;
        }
    });
    for (uint64_t k = 1; k <= rounds; ++k) {
        for (unsigned i = 0; i < 8; ++i) {
            line[i] = k;
        }
        cxl_coh_store_line(CXL_COH_SW, wview, line);
    }
    done.store(true, std::memory_order_release);
    reader.join();
    cxl_coh_emu_unregister(rview);
    cxl_coh_emu_unregister(wview);

    EXPECT_EQ((uint64_t)rounds, mem[0]);
    EXPECT_EQ((uint64_t)rounds, mem[7]);
    EXPECT_EQ(0ul, torn.load()) << "of " << seen.load() << " reads";
    std::cout << seen.load() << " reads, none torn" << std::endl;
}

/*
 * Threads of one host synchronise the same line at once.  Another host
 * (this test, writing memory directly) owns the line and writes it whole
 * with k, k+1, ...; two threads of the view's host only invalidate and
 * read it, never store.  So this host must never write the line back:
 * before writing k+1 the owner finds k in every word.  Before the
 * stripe locks, one thread's reload between its view and clean stores
 * looked like a local store to the other thread, which wrote the half
 * reloaded line back over the owner's newer words.
 *
 * Then the two threads share a line they both store into (a word each)
 * and write back, while a third keeps invalidating it: each writer's
 * word must be in memory once its write-back returns.  Two write-backs
 * of one line at once could leave memory with one's old value and the
 * clean copy with its new one (the view then looked clean and later
 * reloaded the old value).
 */
TEST(coherence_emu, threads_of_one_host_sync_one_line)
{
    const size_t len = CXL_CACHE_LINE;
    alignas(64) static uint64_t view[8], mem[8], clean[8];
    const uint64_t rounds = 200000;
    std::atomic<bool> done{false};
    std::atomic<unsigned long> clobbered{0}, lost{0}, reads{0};

    memset(view, 0, len);
    memset(mem, 0, len);
    memset(clean, 0, len);
    emu_locks locks(len);
    ASSERT_TRUE(locks.ok);
    ASSERT_EQ(0, cxl_coh_emu_register(view, mem, clean, len, locks.p));

    auto reader = [&] {
        while (!done.load(std::memory_order_acquire)) {
            cxl_coh_invalidate(CXL_COH_SW, view, len);
            (void)__atomic_load_n(&view[3], __ATOMIC_RELAXED);
            reads++;
        }
    };
    std::thread r1(reader), r2(reader);
    for (uint64_t k = 1; k <= rounds; ++k) {
        for (unsigned i = 0; i < 8; ++i) {
            if (__atomic_load_n(&mem[i], __ATOMIC_RELAXED) != k - 1) {
                clobbered++;
            }
        }
        for (unsigned i = 8; i-- > 0;) {
            __atomic_store_n(&mem[i], k, __ATOMIC_RELEASE);
        }
    }
    done.store(true, std::memory_order_release);
    r1.join();
    r2.join();
    EXPECT_EQ(0ul, clobbered.load())
            << "words of another host's line overwritten by this host, in "
            << reads.load() << " invalidations";

    memset(mem, 0, len);
    cxl_coh_invalidate(CXL_COH_SW, view, len);
    done.store(false, std::memory_order_release);
    std::thread r3(reader);
    auto writer = [&](unsigned word) {
        for (uint64_t k = 1; k <= rounds; ++k) {
            __atomic_store_n(&view[word], k, __ATOMIC_RELAXED);
            cxl_coh_writeback(CXL_COH_SW, &view[word], sizeof(uint64_t));
            if (__atomic_load_n(&mem[word], __ATOMIC_ACQUIRE) < k) {
                lost++;
            }
        }
    };
    std::thread w1(writer, 0), w2(writer, 1);
    w1.join();
    w2.join();
    done.store(true, std::memory_order_release);
    r3.join();
    cxl_coh_emu_unregister(view);
    EXPECT_EQ(0ul, lost.load()) << "write-backs that left memory behind";
    EXPECT_EQ(rounds, mem[0]);
    EXPECT_EQ(rounds, mem[1]);
}

/*
 * The same across processes: two processes of one emulated host (one
 * shared view) each store their own word of one line and write it back,
 * while a thread in each invalidates the line.  Memory, read past every
 * view, must hold each word once its write-back returns.  Before the
 * stripe locks lived in the view file, each process serialised only its
 * own threads, and the two processes' write-backs of the line could
 * interleave as two threads' did.
 */
TEST_F(emulate_nc, processes_of_one_host_sync_one_line)
{
    const uint64_t rounds = 200000;
    const int nproc       = 2;
    cxlpool_t *h;
    pid_t pid[nproc];

    /* the parent keeps host 1 live, so both children join one view */
    ASSERT_EQ(CXLPOOL_OK, open_host(1, &h)) << cxlpool_last_error();
    int fd = ::open(path(), O_RDONLY);
    ASSERT_GE(fd, 0);
    size_t maplen = m_heap + CXL_CACHE_LINE;
    void *map     = mmap(NULL, maplen, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    ASSERT_NE(MAP_FAILED, map);
    const uint64_t *mem = (const uint64_t*)((const uint8_t*)map + m_heap);

    for (int w = 0; w < nproc; ++w) {
        pid[w] = cxltest::fork_child([&, w]() {
            std::atomic<bool> done{false};
            unsigned long lost = 0;
            cxlpool_t *ch;

            if (open_host(1, &ch) != CXLPOOL_OK) {
                return 1;
            }
            volatile uint64_t *line = word(ch, 0);
            std::thread reader([&] {
                while (!done.load(std::memory_order_acquire)) {
                    cxl_coh_invalidate(CXL_COH_SW, (const void*)line,
                                       CXL_CACHE_LINE);
                }
            });
            for (uint64_t k = 1; k <= rounds; ++k) {
                __atomic_store_n(&line[w], k, __ATOMIC_RELAXED);
                cxl_coh_writeback(CXL_COH_SW, (const void*)&line[w],
                                  sizeof(uint64_t));
                if (__atomic_load_n(&mem[w], __ATOMIC_ACQUIRE) < k) {
                    lost++;
                }
            }
            done.store(true, std::memory_order_release);
            reader.join();
            cxlpool_close(ch);
            if (lost != 0) {
                fprintf(stderr, "process %d: %lu write-backs left memory "
                        "behind\n", w, lost);
                return 2;
            }
            return 0;
        });
        ASSERT_GT(pid[w], 0);
    }
    for (int w = 0; w < nproc; ++w) {
        EXPECT_EQ(0, cxltest::wait_child(pid[w])) << "process " << w;
    }
    cxl_coh_invalidate(CXL_COH_SW, (const void*)word(h, 0), CXL_CACHE_LINE);
    for (int w = 0; w < nproc; ++w) {
        EXPECT_EQ(rounds, __atomic_load_n(&mem[w], __ATOMIC_ACQUIRE));
        EXPECT_EQ(rounds, *word(h, w));
    }
    munmap(map, maplen);
    cxlpool_close(h);
}

/*
 * A process of a shared emulated host killed while it syncs a line may die
 * holding that line's stripe lock.  The lock is robust: the host's other
 * processes take it over instead of waiting for ever, and the view, which
 * outlives the process like a host's cache, still holds its stores.
 */
TEST_F(emulate_nc, process_killed_mid_sync_holds_no_lock)
{
    const int kills = 20;
    cxlpool_t *h;

    ASSERT_EQ(CXLPOOL_OK, open_host(4, &h)) << cxlpool_last_error();
    for (int i = 0; i < kills; ++i) {
        uint64_t k = 0;
        pid_t pid  = start_syncing(4, [&k](volatile uint64_t *line) {
            line[1] = ++k;
            cxl_coh_writeback(CXL_COH_SW, (const void*)line, CXL_CACHE_LINE);
        });
        ASSERT_GT(pid, 0);
        usleep(200 + 97 * i);
        ASSERT_EQ(0, kill(pid, SIGKILL));
        EXPECT_EQ(128 + SIGKILL, cxltest::wait_child(pid));
    }

    /* in another process, so that a lock left held fails the test (by
     * SIGALRM) instead of hanging it */
    pid_t pid = cxltest::fork_child([&]() {
        cxlpool_t *ch;

        alarm(10);
        if (open_host(4, &ch) != CXLPOOL_OK) {
            return 1;
        }
        volatile uint64_t *line = word(ch, 0);
        uint64_t last = line[1];
        line[0] = 0x600d;
        cxl_coh_writeback(CXL_COH_SW, (const void*)line, CXL_CACHE_LINE);
        cxl_coh_invalidate(CXL_COH_SW, (const void*)line, CXL_CACHE_LINE);
        cxlpool_close(ch);
        return ((last != 0) && (mem_word(0) == 0x600d) &&
                (mem_word(1) == last)) ? 0 : 3;
    });
    ASSERT_GT(pid, 0);
    EXPECT_EQ(0, cxltest::wait_child(pid))
            << "128 + SIGALRM (" << 128 + SIGALRM << "): a stripe lock was "
            << "left held by a killed process";
    cxlpool_close(h);
}

namespace {

/*
 * The clean copy of a view, as this process maps it: the mapping of the
 * view file at offset len (the view is at 0).  Found by the file's inode
 * in /proc/self/maps, so the test needs no accessor in the library.
 */
uint8_t *clean_copy_of(const std::string &view_file, uint64_t len)
{
    struct stat st;
    char line[512];
    uint8_t *found = NULL;

    if (stat(view_file.c_str(), &st) != 0) {
        return NULL;
    }
    FILE *f = fopen("/proc/self/maps", "r");
    if (f == NULL) {
        return NULL;
    }
    while ((found == NULL) && (fgets(line, sizeof(line), f) != NULL)) {
        unsigned long start, end, off, ino;
        char perms[8], dev[16];

        if ((sscanf(line, "%lx-%lx %7s %lx %15s %lu", &start, &end, perms,
                    &off, dev, &ino) == 6) &&
            (ino == (unsigned long)st.st_ino) && (off == len)) {
            found = (uint8_t*)start;
        }
    }
    fclose(f);
    return found;
}

void die_by_sigkill(int)
{
    kill(getpid(), SIGKILL);
}

/*
 * Make this process die (SIGKILL) at its next store into the clean copy of
 * the line at offset off of the view: the emulator stores there right after
 * it changed the view (reload) or memory (write-back), so the process dies
 * in the middle of that sync, holding the stripe lock, exactly between the
 * two stores.  No hook in the library: the page is made read-only.
 */
bool die_at_clean_store(uint8_t *clean, uint64_t off)
{
    struct sigaction sa;
    long page = sysconf(_SC_PAGESIZE);

    if (clean == NULL) {
        return false;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = die_by_sigkill;
    sigemptyset(&sa.sa_mask);
    return (sigaction(SIGSEGV, &sa, NULL) == 0) &&
           (sigaction(SIGBUS, &sa, NULL) == 0) &&
           (mprotect(clean + off / page * page, page, PROT_READ) == 0);
}

} // namespace

/*
 * A process killed in the middle of a reload of a line, between storing a
 * word into the view and into the clean copy, must not leave the word
 * looking stored-into: the next sync of the line by another process of its
 * host would write back memory's value of that moment over a newer
 * write-back of the line's owner.  Another host (this test, writing memory
 * directly) owns the line; host 2's processes only invalidate it, so
 * memory must hold the owner's last write in every word afterwards.
 *
 * First at random moments (a child invalidating while the owner keeps
 * writing), then deterministically: a child dies at its first store into
 * the clean copy of the line (die_at_clean_store), i.e. in the window.
 * Before the stripe locks' intent records, every deterministic kill left
 * the line corrupted.
 */
TEST_F(emulate_nc, process_killed_mid_reload_leaves_no_stale_word)
{
    const int random_kills = 100, kills = 8;
    const unsigned seed = (unsigned)getpid();
    unsigned rnd = seed, random_bad = 0, bad = 0;
    cxlpool_t *h;

    ASSERT_EQ(CXLPOOL_OK, open_host(2, &h)) << cxlpool_last_error();
    int fd = ::open(path(), O_RDWR);
    ASSERT_GE(fd, 0);
    size_t maplen = m_heap + CXL_CACHE_LINE;
    void *map     = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED,
                         fd, 0);
    close(fd);
    ASSERT_NE(MAP_FAILED, map);
    uint64_t *mem           = (uint64_t*)((uint8_t*)map + m_heap);
    volatile uint64_t *line = word(h, 0);

    /* the owner's write-back of the whole line: word 0 last */
    auto owner_writes = [&](uint64_t k) {
        for (size_t i = LINE_WORDS; i-- > 0;) {
            __atomic_store_n(&mem[i], k, (i == 0) ? __ATOMIC_RELEASE :
                                                    __ATOMIC_RELAXED);
        }
    };
    /* after the owner's last write-back, host 2 syncs the line: memory
     * and the view must hold it whole */
    auto survivor_syncs = [&](uint64_t k) {
        cxl_coh_invalidate(CXL_COH_SW, (const void*)line, CXL_CACHE_LINE);
        for (size_t i = 0; i < LINE_WORDS; ++i) {
            if ((__atomic_load_n(&mem[i], __ATOMIC_ACQUIRE) != k) ||
                (line[i] != k)) {
                return false;
            }
        }
        return true;
    };

    uint64_t k = 1;
    owner_writes(k);
    ASSERT_TRUE(survivor_syncs(k));

    for (int r = 0; r < random_kills; ++r) {
        pid_t pid = start_syncing(2, [](volatile uint64_t *l) {
            cxl_coh_invalidate(CXL_COH_SW, (const void*)l, CXL_CACHE_LINE);
        });
        ASSERT_GT(pid, 0);

        std::atomic<bool> stop{false};
        std::thread owner([&] {
            while (!stop.load(std::memory_order_relaxed)) {
                owner_writes(++k);
            }
        });
        usleep(100 + rand_r(&rnd) % 4000);
        ASSERT_EQ(0, kill(pid, SIGKILL));
        EXPECT_EQ(128 + SIGKILL, cxltest::wait_child(pid));
        stop.store(true, std::memory_order_relaxed);
        owner.join();
        owner_writes(++k); /* newer than anything the child reloaded */
        if (!survivor_syncs(k)) {
            random_bad++;
            owner_writes(++k); /* repair, for the next round */
            ASSERT_TRUE(survivor_syncs(k));
        }
    }

    for (int r = 0; r < kills; ++r) {
        owner_writes(++k); /* the child reloads this one ... */
        pid_t pid = cxltest::fork_child([&]() {
            cxlpool_t *ch;

            if (open_host(2, &ch) != CXLPOOL_OK) {
                return 1;
            }
            if (!die_at_clean_store(clean_copy_of(view(2), pool_size),
                                    m_heap)) {
                return 2;
            }
            cxl_coh_invalidate(CXL_COH_SW, (const void*)word(ch, 0),
                               CXL_CACHE_LINE);
            return 3; /* the clean copy was never stored into */
        });
        ASSERT_GT(pid, 0);
        ASSERT_EQ(128 + SIGKILL, cxltest::wait_child(pid));
        owner_writes(++k); /* ... and the owner writes a newer one */
        if (!survivor_syncs(k)) {
            bad++;
            owner_writes(++k);
            ASSERT_TRUE(survivor_syncs(k));
        }
    }
    std::cout << random_kills << " random kills mid invalidate (seed " << seed
              << "): " << random_bad << " left a stale word; " << kills
              << " kills between view and clean copy: " << bad << std::endl;
    EXPECT_EQ(0u, random_bad) << "random kills that left a stale word";
    EXPECT_EQ(0u, bad) << "kills in the window that left a stale word";
    munmap(map, maplen);
    cxlpool_close(h);
}

/*
 * A process killed in the middle of a write-back, between storing a word
 * into memory and into the clean copy, leaves the word's clean copy old.
 * Had another process of the host then stored that old value again (a
 * lock word 0 -> 1 -> 0: a dead holder's lock broken), the word would look
 * clean, and the next invalidate would reload the dead process's value
 * from memory over the store instead of writing the store back.
 */
TEST_F(emulate_nc, process_killed_mid_writeback_keeps_later_store)
{
    const int kills = 4;
    unsigned bad    = 0;
    cxlpool_t *h;

    ASSERT_EQ(CXLPOOL_OK, open_host(3, &h)) << cxlpool_last_error();
    volatile uint64_t *line = word(h, 0);
    const size_t last       = LINE_WORDS - 1; /* copied first */

    for (int r = 0; r < kills; ++r) {
        pid_t pid = cxltest::fork_child([&]() {
            cxlpool_t *ch;

            if (open_host(3, &ch) != CXLPOOL_OK) {
                return 1;
            }
            if (!die_at_clean_store(clean_copy_of(view(3), pool_size),
                                    m_heap)) {
                return 2;
            }
            word(ch, 0)[last] = 1;         /* a lock word taken ... */
            cxl_coh_writeback(CXL_COH_SW, (const void*)word(ch, 0),
                              CXL_CACHE_LINE);
            return 3;
        });
        ASSERT_GT(pid, 0);
        ASSERT_EQ(128 + SIGKILL, cxltest::wait_child(pid));
        EXPECT_EQ(1u, mem_word(last)); /* ... which reached memory */
        line[last] = 0;                /* ... and broken */
        cxl_coh_invalidate(CXL_COH_SW, (const void*)line, CXL_CACHE_LINE);
        if ((mem_word(last) != 0) || (line[last] != 0)) {
            bad++;
            line[last] = 0;
            cxl_coh_writeback(CXL_COH_SW, (const void*)line, CXL_CACHE_LINE);
        }
    }
    std::cout << kills << " kills between memory and clean copy: " << bad
              << " lost the later store" << std::endl;
    EXPECT_EQ(0u, bad) << "stores lost after a kill mid write-back";
    cxlpool_close(h);
}
