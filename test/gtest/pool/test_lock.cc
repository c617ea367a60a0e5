/*
 * Judging the metadata lock's holder: a live holder is never judged dead,
 * however the line changes hands while a waiter looks; a holder whose pid
 * was reused is.
 */
#include "pool_test_util.h"

extern "C" {
#include "pool_layout.h"
#include "pool_int.h"
}

#include <atomic>
#include <chrono>
#include <signal.h>
#include <string>
#include <thread>
#include <unistd.h>

using namespace cxltest;

class pool_lock_judge : public pool_test {
protected:
    void SetUp() override
    {
        pool_test::SetUp();
        create(32ull << 20);
        ASSERT_EQ(CXLPOOL_OK, open(&m_pool)) << cxlpool_last_error();
        for (int i = 0; i < 2; ++i) {
            m_child[i] = fork_child([]() { pause(); return 0; });
            ASSERT_GT(m_child[i], 0);
            m_start[i] = cxlpool_proc_start_time(m_child[i]);
            ASSERT_NE(0u, m_start[i]);
        }
    }

    void TearDown() override
    {
        for (int i = 0; i < 2; ++i) {
            if (m_child[i] > 0) {
                kill(m_child[i], SIGKILL);
                wait_child(m_child[i]);
            }
        }
        if (m_pool != NULL) {
            m_pool->lock->token = 0;
            cxlpool_close(m_pool);
        }
        pool_test::TearDown();
    }

    /* the token process pid of this host would take the lock with */
    uint64_t token_of(pid_t pid) const
    {
        return ((uint64_t)pid << 32) | (uint32_t)m_pool->lock_token;
    }

    /* what a holder's cxlpool_lock() and cxlpool_unlock() store, in order */
    void take(uint64_t token, uint64_t acquire_ns, uint64_t start_time)
    {
        /* atomic, as the library's: the judge reads them meanwhile */
        __atomic_store_n(&m_pool->lock->token, token, __ATOMIC_RELAXED);
        __atomic_store_n(&m_pool->lock->acquire_ns, acquire_ns,
                         __ATOMIC_RELAXED);
        __atomic_store_n(&m_pool->lock->start_time, start_time,
                         __ATOMIC_RELAXED);
    }

    void release()
    {
        __atomic_store_n(&m_pool->lock->start_time, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&m_pool->lock->acquire_ns, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&m_pool->lock->token, 0, __ATOMIC_RELAXED);
    }

    cxlpool_t *m_pool  = NULL;
    pid_t m_child[2]   = {0, 0};
    uint64_t m_start[2] = {0, 0};
};

/*
 * Two live processes take turns with the lock while a waiter judges each
 * token it sees.  A look that mixes one holder's fields with the other's
 * token must not read as "pid reused": breaking a live holder's lock lets
 * two processes allocate the same bytes (seen as pool_multiproc.
 * concurrent_alloc_free_patterns failing under ASan).
 */
TEST_F(pool_lock_judge, a_line_changing_hands_is_no_dead_holder)
{
    std::atomic<bool> stop(false);
    uint64_t tok[2] = {token_of(m_child[0]), token_of(m_child[1])};
    cxlpool_lock_wait_t wait = {};
    long judged = 0, dead = 0;

    std::thread holders([&]() {
        uint64_t n = 1;
        while (!stop.load(std::memory_order_relaxed)) {
            for (int i = 0; i < 2; ++i) {
                take(tok[i], n++, m_start[i]);
                release();
            }
        }
    });

    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (std::chrono::steady_clock::now() < until) {
        uint64_t cur = __atomic_load_n(&m_pool->lock->token, __ATOMIC_RELAXED);
        if (cur == 0) {
            continue;
        }
        ++judged;
        dead += cxlpool_lock_holder_dead(m_pool, &wait, cur);
    }
    stop = true;
    holders.join();

    EXPECT_GT(judged, 0);
    EXPECT_EQ(0, dead) << "live holders judged dead in " << judged << " looks";
}

/* The same look twice (a dead holder's line under a reused pid): dead. */
TEST_F(pool_lock_judge, reused_pid_is_dead_on_the_second_same_look)
{
    uint64_t tok = token_of(m_child[0]);
    cxlpool_lock_wait_t wait = {};

    take(tok, 1234567, m_start[0] + 1);
    EXPECT_EQ(0, cxlpool_lock_holder_dead(m_pool, &wait, tok)) << "first look";
    EXPECT_EQ(1, cxlpool_lock_holder_dead(m_pool, &wait, tok)) << "second look";

    /* and a waiter breaks the lock, then holds it itself */
    cxlpool_lock(m_pool);
    EXPECT_EQ(1u, m_pool->lock_broken);
    EXPECT_EQ(m_pool->lock_token, m_pool->lock->token);
    cxlpool_unlock(m_pool);
}

/* A new acquisition between two looks (acquire_ns moved): not dead. */
TEST_F(pool_lock_judge, a_new_acquisition_between_looks_is_not_dead)
{
    uint64_t tok = token_of(m_child[1]);
    cxlpool_lock_wait_t wait = {};

    take(tok, 1000, m_start[0]);
    EXPECT_EQ(0, cxlpool_lock_holder_dead(m_pool, &wait, tok));
    release();
    take(tok, 2000, m_start[0]);
    EXPECT_EQ(0, cxlpool_lock_holder_dead(m_pool, &wait, tok));
    /* its own start time: alive on any look */
    take(tok, 3000, m_start[1]);
    EXPECT_EQ(0, cxlpool_lock_holder_dead(m_pool, &wait, tok));
    EXPECT_EQ(0, cxlpool_lock_holder_dead(m_pool, &wait, tok));
}

/*
 * Threads of one process share its token.  A waiter that remembered "this
 * token seen since t" from an earlier wait judged the other thread dead at
 * its first look once t was a lock timeout old, broke the lock and ran
 * beside it (MPICH's threads/comm tests in sw mode, where the waits are
 * spread over more than the 10 s timeout: "partition ... was freed or
 * reused" at team creation).  Two threads take turns for 2 s with a
 * 500 ms timeout (a holder preempted for that long between its CAS and
 * writing its start time would be judged dead: not this test's subject):
 * never two inside, no lock broken.
 */
TEST_F(pool_lock_judge, threads_of_one_process_never_break_its_lock)
{
    std::atomic<int> inside(0), overlaps(0);
    std::atomic<bool> stop(false);
    const char *old = getenv("CXLPOOL_LOCK_TIMEOUT_MS");
    std::string saved = old ? old : "";
    long turns[2] = {0, 0};

    setenv("CXLPOOL_LOCK_TIMEOUT_MS", "500", 1);
    auto worker = [&](int id) {
        while (!stop.load(std::memory_order_relaxed)) {
            cxlpool_lock(m_pool);
            if (inside.fetch_add(1) != 0) {
                overlaps++;
            }
            std::this_thread::sleep_for(std::chrono::microseconds(200));
            inside.fetch_sub(1);
            cxlpool_unlock(m_pool);
            ++turns[id];
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    };
    std::thread a(worker, 0), b(worker, 1);
    std::this_thread::sleep_for(std::chrono::seconds(2));
    stop = true;
    a.join();
    b.join();
    if (old != NULL) {
        setenv("CXLPOOL_LOCK_TIMEOUT_MS", saved.c_str(), 1);
    } else {
        unsetenv("CXLPOOL_LOCK_TIMEOUT_MS");
    }

    EXPECT_GT(turns[0], 0);
    EXPECT_GT(turns[1], 0);
    EXPECT_EQ(0, overlaps.load()) << "two threads inside the lock";
    EXPECT_EQ(0u, m_pool->lock_broken) << "a live thread's lock broken";
}

/*
 * The judgement of one wait: this process's own token with its start time
 * is a live thread, however long; the same token with another start time
 * (a process of this partition in another pid namespace) is dead once one
 * acquisition stays past the timeout, and alive while acquisitions change.
 */
TEST_F(pool_lock_judge, own_token_judged_by_start_time_and_acquisition)
{
    uint64_t own = cxlpool_proc_start_time(getpid());
    const char *old = getenv("CXLPOOL_LOCK_TIMEOUT_MS");
    std::string saved = old ? old : "";
    cxlpool_lock_wait_t wait = {};
    uint64_t tok = m_pool->lock_token;

    setenv("CXLPOOL_LOCK_TIMEOUT_MS", "5", 1);
    take(tok, 1000, own);
    EXPECT_EQ(0, cxlpool_lock_holder_dead(m_pool, &wait, tok));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(0, cxlpool_lock_holder_dead(m_pool, &wait, tok)) << "own thread";

    wait = {};
    take(tok, 2000, own + 1);
    EXPECT_EQ(0, cxlpool_lock_holder_dead(m_pool, &wait, tok)) << "first look";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    take(tok, 3000, own + 1); /* a new acquisition: the clock restarts */
    EXPECT_EQ(0, cxlpool_lock_holder_dead(m_pool, &wait, tok));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(1, cxlpool_lock_holder_dead(m_pool, &wait, tok))
        << "one acquisition past the timeout";

    /* a fresh wait remembers nothing of the last one */
    wait = {};
    EXPECT_EQ(0, cxlpool_lock_holder_dead(m_pool, &wait, tok));
    release();
    if (old != NULL) {
        setenv("CXLPOOL_LOCK_TIMEOUT_MS", saved.c_str(), 1);
    } else {
        unsetenv("CXLPOOL_LOCK_TIMEOUT_MS");
    }
}

/*
 * A holder's line carries its process's start time (read once at open)
 * and a fresh acquire_ns while it holds the lock, nothing after release:
 * the judges above read exactly these fields.
 */
TEST_F(pool_lock_judge, holder_fills_its_line_and_clears_it)
{
    ASSERT_NE(0u, m_pool->start_time);
    EXPECT_EQ(cxlpool_proc_start_time(getpid()), m_pool->start_time);

    cxlpool_lock(m_pool);
    EXPECT_EQ(m_pool->lock_token, m_pool->lock->token);
    EXPECT_EQ(m_pool->start_time, m_pool->lock->start_time);
    EXPECT_NE(0u, m_pool->lock->acquire_ns);
    cxlpool_unlock(m_pool);

    EXPECT_EQ(0u, m_pool->lock->token);
    EXPECT_EQ(0u, m_pool->lock->start_time);
    EXPECT_EQ(0u, m_pool->lock->acquire_ns);
}
