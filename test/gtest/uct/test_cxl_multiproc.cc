/*
 * Several processes, each with its own UCT stack on one pool: counters
 * hammered with fetch-add, atomic add and cswap loops (totals exact), and
 * put/get between processes in both directions (the owner's virtual
 * address is translated by the key).
 */
#include "cxl_uct_util.h"

#include <functional>
#include <signal.h>
#include <string.h>
#include <unistd.h>

using namespace cxluct;

namespace {

const int      NCHILD = 2;
const uint64_t N      = 100000;

/* counter offsets in the shared buffer, one cache line each */
const size_t OFF_FADD64 = 4096;
const size_t OFF_ADD32  = 4096 + 64;
const size_t OFF_CAS64  = 4096 + 128;
const size_t OFF_CAS32  = 4096 + 192;
const size_t OFF_END    = 4096 + 256;

struct counter_result {
    int32_t  rc;
    uint32_t pad;
    uint64_t fadd_sum;      /* sum of the fetched values */
    uint64_t fadd_sumsq;    /* sum of their squares */
    uint64_t cas_retries;
    char     error[128];
};

/* One participant: N of each operation through ep.  Fetched values of one
 * process must increase strictly (the counter only grows). */
void hammer(uct_ep_h ep, uct_rkey_t key, uint64_t base, counter_result *res)
{
    uint64_t prev = 0, expect64 = 0, r64;
    uint32_t expect32 = 0, r32;
    ucs_status_t status;

    memset(res, 0, sizeof(*res));
    for (uint64_t i = 0; i < N; ++i) {
        status = uct_ep_atomic64_fetch(ep, UCT_ATOMIC_OP_ADD, 1, &r64,
                                       base + OFF_FADD64, key, NULL);
        if (status != UCS_OK) {
            snprintf(res->error, sizeof(res->error), "fetch-add64: %s",
                     ucs_status_string(status));
            res->rc = 1;
            return;
        }
        if ((i > 0) && (r64 <= prev)) {
            snprintf(res->error, sizeof(res->error),
                     "fetch-add64 went back: %lu after %lu", (unsigned long)r64,
                     (unsigned long)prev);
            res->rc = 2;
            return;
        }
        prev             = r64;
        res->fadd_sum   += r64;
        res->fadd_sumsq += r64 * r64;

        status = uct_ep_atomic32_post(ep, UCT_ATOMIC_OP_ADD, 1,
                                      base + OFF_ADD32, key);
        if (status != UCS_OK) {
            snprintf(res->error, sizeof(res->error), "add32: %s",
                     ucs_status_string(status));
            res->rc = 3;
            return;
        }

        for (;;) {
            status = uct_ep_atomic_cswap64(ep, expect64, expect64 + 1,
                                           base + OFF_CAS64, key, &r64, NULL);
            if (status != UCS_OK) {
                res->rc = 4;
                return;
            }
            if (r64 == expect64) {
                ++expect64;
                break;
            }
            expect64 = r64;
            ++res->cas_retries;
        }
        for (;;) {
            status = uct_ep_atomic_cswap32(ep, expect32, expect32 + 1,
                                           base + OFF_CAS32, key, &r32, NULL);
            if (status != UCS_OK) {
                res->rc = 5;
                return;
            }
            if (r32 == expect32) {
                ++expect32;
                break;
            }
            expect32 = r32;
            ++res->cas_retries;
        }
    }
    status = uct_ep_flush(ep, 0, NULL);
    if (status != UCS_OK) {
        res->rc = 6;
    }
}

struct child_pipes {
    int to[2];
    int from[2];
};

} // namespace

class cxl_multiproc : public cxl_test {
protected:
    void TearDown() override
    {
        for (pid_t pid : m_pids) {
            kill(pid, SIGKILL);
            cxltest::wait_child(pid);
        }
        cxl_test::TearDown();
    }

    /* Fork a child that reads a peer_info, opens its own stack, connects
     * and runs fn(stack, ep, key, peer); its return value is the exit code. */
    pid_t spawn(child_pipes *p,
                const std::function<int(stack&, uct_ep_h, rkey&,
                                        const peer_info&, child_pipes*)> &fn)
    {
        EXPECT_EQ(0, pipe(p->to));
        EXPECT_EQ(0, pipe(p->from));
        pid_t pid = cxltest::fork_child([=]() -> int {
            child_pipes cp = *p;
            peer_info peer;
            uct_ep_h ep;
            stack s;
            rkey key;

            alarm(120);
            close(cp.to[1]);
            close(cp.from[0]);
            if (s.open(dev_name_of(m_path)) != UCS_OK) {
                fprintf(stderr, "child %d: %s\n", (int)getpid(), s.error.c_str());
                return 10;
            }
            if (!read_full(cp.to[0], &peer, sizeof(peer))) {
                return 11;
            }
            if (key.unpack(s.component, peer.rkey) != UCS_OK) {
                fprintf(stderr, "child %d: unpacking the key failed\n",
                        (int)getpid());
                return 12;
            }
            if (!uct_iface_is_reachable(s.iface,
                                        (uct_device_addr_t*)peer.dev_addr,
                                        (uct_iface_addr_t*)peer.iface_addr)) {
                fprintf(stderr, "child %d: parent unreachable\n", (int)getpid());
                return 13;
            }
            if (s.connect(peer.dev_addr, peer.iface_addr, &ep) != UCS_OK) {
                return 14;
            }
            return fn(s, ep, key, peer, &cp);
        });
        close(p->to[0]);
        close(p->from[1]);
        m_pids.push_back(pid);
        return pid;
    }

    int reap(pid_t pid)
    {
        for (auto it = m_pids.begin(); it != m_pids.end(); ++it) {
            if (*it == pid) {
                m_pids.erase(it);
                break;
            }
        }
        return cxltest::wait_child(pid);
    }

    std::vector<pid_t> m_pids;
};

TEST_F(cxl_multiproc, counters_exact_totals)
{
    child_pipes pipes[NCHILD];
    pid_t pids[NCHILD];
    counter_result results[NCHILD + 1];

    /* children first, before this process opens anything */
    for (int i = 0; i < NCHILD; ++i) {
        pids[i] = spawn(&pipes[i], [](stack&, uct_ep_h ep, rkey &key,
                                      const peer_info &peer, child_pipes *cp) {
            counter_result res;
            char c = 'r';
            /* ready, then wait for the start */
            if (!write_full(cp->from[1], &c, 1) || !read_full(cp->to[0], &c, 1)) {
                return 20;
            }
            hammer(ep, key.get(), peer.address, &res);
            return write_full(cp->from[1], &res, sizeof(res)) ? 0 : 21;
        });
    }

    stack s;
    uct_allocated_memory_t mem;
    peer_info info;
    uct_ep_h ep;
    rkey key;

    open_stack(s);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_EQ(UCS_OK, s.alloc(64 * 1024, &mem)) << s.error;
    uint8_t *base = (uint8_t*)mem.address;
    fill_guard(base, mem.length, 0);
    memset(base + OFF_FADD64, 0, OFF_END - OFF_FADD64);
    ASSERT_TRUE(make_peer_info(s, mem, &info));
    ASSERT_EQ(UCS_OK, s.connect_to(s, &ep));
    ASSERT_EQ(UCS_OK, key.unpack(s.component, info.rkey));

    for (int i = 0; i < NCHILD; ++i) {
        ASSERT_TRUE(write_full(pipes[i].to[1], &info, sizeof(info)));
    }
    for (int i = 0; i < NCHILD; ++i) {
        char c = 0;
        ASSERT_TRUE(read_full(pipes[i].from[0], &c, 1))
                << "child " << i << " did not get ready";
    }
    for (int i = 0; i < NCHILD; ++i) {
        char c = 'g';
        ASSERT_TRUE(write_full(pipes[i].to[1], &c, 1));
    }

    hammer(ep, key.get(), (uintptr_t)base, &results[NCHILD]);
    EXPECT_EQ(0, results[NCHILD].rc) << results[NCHILD].error;

    for (int i = 0; i < NCHILD; ++i) {
        EXPECT_TRUE(read_full(pipes[i].from[0], &results[i], sizeof(results[i])))
                << "child " << i << " sent no result";
        EXPECT_EQ(0, results[i].rc) << "child " << i << ": " << results[i].error;
        close(pipes[i].to[1]);
        close(pipes[i].from[0]);
        EXPECT_EQ(0, reap(pids[i])) << "child " << i;
    }
    ASSERT_FALSE(HasFailure());

    const uint64_t T = (NCHILD + 1) * N;
    uint64_t sum = 0, sumsq = 0, retries = 0, v64;
    uint32_t v32;
    for (const counter_result &r : results) {
        sum     += r.fadd_sum;
        sumsq   += r.fadd_sumsq;
        retries += r.cas_retries;
    }

    memcpy(&v64, base + OFF_FADD64, 8);
    EXPECT_EQ(T, v64) << "fetch-add64 total";
    EXPECT_EQ(T * (T - 1) / 2, sum)
            << "every fetched value 0..T-1 exactly once";
    EXPECT_EQ((T - 1) * T * (2 * T - 1) / 6, sumsq);
    memcpy(&v32, base + OFF_ADD32, 4);
    EXPECT_EQ((uint32_t)T, v32) << "atomic add32 total";
    memcpy(&v64, base + OFF_CAS64, 8);
    EXPECT_EQ(T, v64) << "cswap64 increments";
    memcpy(&v32, base + OFF_CAS32, 4);
    EXPECT_EQ((uint32_t)T, v32) << "cswap32 increments";

    /* the upper halves next to the 32-bit counters and everything else */
    EXPECT_EQ(0, memcmp(base + OFF_ADD32 + 4, std::vector<uint8_t>(60, 0).data(), 60));
    EXPECT_EQ(-1, guard_mismatch(base, OFF_FADD64, 0));
    EXPECT_EQ(-1, guard_mismatch(base + OFF_END, mem.length - OFF_END, OFF_END));
    RecordProperty("cas_retries", (int)std::min<uint64_t>(retries, INT32_MAX));

    key.release();
    EXPECT_EQ(UCS_OK, uct_mem_free(&mem));
}

/* A child puts patterns into the parent's memory; the parent checks them. */
TEST_F(cxl_multiproc, child_puts_parent_verifies)
{
    const size_t sizes[] = {1, 7, 64, 65, 4097, 65539, (1 << 20) + 5};
    const size_t len     = 4u << 20;
    child_pipes p;

    pid_t pid = spawn(&p, [&](stack&, uct_ep_h ep, rkey &key,
                              const peer_info &peer, child_pipes *cp) -> int {
        uint64_t pos = 4096 + 3;
        int n = 0;
        for (size_t size : sizes) {
            std::vector<uint8_t> src(size);
            fill_random(src.data(), size, size);
            ucs_status_t st;
            switch (n++ % 3) {
            case 0:
                st = uct_ep_put_short(ep, src.data(), (unsigned)size,
                                      peer.address + pos, key.get());
                break;
            case 1: {
                uct_iov_t iov[2] = {
                    {src.data(), size / 2, UCT_MEM_HANDLE_NULL, size / 2, 1},
                    {src.data() + size / 2, size - size / 2,
                     UCT_MEM_HANDLE_NULL, size - size / 2, 1}};
                st = uct_ep_put_zcopy(ep, iov, 2, peer.address + pos, key.get(),
                                      NULL);
                break;
            }
            default: {
                struct arg_t { const uint8_t *p; size_t n; } a = {src.data(), size};
                ssize_t r = uct_ep_put_bcopy(ep, [](void *dest, void *arg) {
                    arg_t *x = (arg_t*)arg;
                    memcpy(dest, x->p, x->n);
                    return x->n;
                }, &a, peer.address + pos, key.get());
                st = (r == (ssize_t)size) ? UCS_OK : UCS_ERR_IO_ERROR;
                break;
            }
            }
            if (st != UCS_OK) {
                fprintf(stderr, "child: put of %zu: %s\n", size,
                        ucs_status_string(st));
                return 30;
            }
            pos += size + 4096 + 1;
        }
        if (uct_ep_flush(ep, 0, NULL) != UCS_OK) {
            return 31;
        }
        char c = 'd';
        return write_full(cp->from[1], &c, 1) ? 0 : 32;
    });

    stack s;
    uct_allocated_memory_t mem;
    peer_info info;

    open_stack(s);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_EQ(UCS_OK, s.alloc(len, &mem)) << s.error;
    uint8_t *base = (uint8_t*)mem.address;
    fill_guard(base, mem.length, 0);
    ASSERT_TRUE(make_peer_info(s, mem, &info));
    ASSERT_TRUE(write_full(p.to[1], &info, sizeof(info)));
    char c = 0;
    EXPECT_TRUE(read_full(p.from[0], &c, 1));
    close(p.to[1]);
    close(p.from[0]);
    ASSERT_EQ(0, reap(pid));

    uint64_t pos = 4096 + 3, prev_end = 0;
    for (size_t size : sizes) {
        std::vector<uint8_t> expect(size);
        fill_random(expect.data(), size, size);
        EXPECT_EQ(-1, first_diff(base + pos, expect.data(), size)) << "size " << size;
        EXPECT_EQ(-1, guard_mismatch(base + prev_end, pos - prev_end, prev_end))
                << "bytes before the range of size " << size;
        prev_end = pos + size;
        pos     += size + 4096 + 1;
    }
    EXPECT_EQ(-1, guard_mismatch(base + prev_end, mem.length - prev_end, prev_end));
    EXPECT_EQ(UCS_OK, uct_mem_free(&mem));
}

/* The parent writes; a child reads it with get short/bcopy/zcopy.  Then the
 * child's own buffer: the parent puts into it at the child's addresses. */
TEST_F(cxl_multiproc, get_and_put_both_ways)
{
    const size_t len = 1u << 20;
    child_pipes p;

    pid_t pid = spawn(&p, [&](stack &s, uct_ep_h ep, rkey &key,
                              const peer_info &peer, child_pipes *cp) -> int {
        std::vector<uint8_t> expect(len), got(len);
        fill_random(expect.data(), len, 4242);

        /* get: short, bcopy, zcopy of the parent's buffer */
        memset(got.data(), 0, len);
        if (uct_ep_get_short(ep, got.data(), 4097, peer.address + 5,
                             key.get()) != UCS_OK) {
            return 40;
        }
        if (first_diff(got.data(), expect.data() + 5, 4097) != -1) {
            return 41;
        }
        struct arg_t { uint8_t *p; } a = {got.data()};
        if (uct_ep_get_bcopy(ep, [](void *arg, const void *data, size_t n) {
                memcpy(((arg_t*)arg)->p, data, n);
            }, &a, 65539, peer.address + 63, key.get(), NULL) != UCS_OK) {
            return 42;
        }
        if (first_diff(got.data(), expect.data() + 63, 65539) != -1) {
            return 43;
        }
        uct_iov_t iov = {got.data(), len, UCT_MEM_HANDLE_NULL, len, 1};
        if (uct_ep_get_zcopy(ep, &iov, 1, peer.address, key.get(), NULL) !=
            UCS_OK) {
            return 44;
        }
        if (first_diff(got.data(), expect.data(), len) != -1) {
            return 45;
        }

        /* now the child's own memory for the parent */
        uct_allocated_memory_t mem;
        peer_info mine;
        if ((s.alloc(len, &mem) != UCS_OK) || !make_peer_info(s, mem, &mine)) {
            return 46;
        }
        memset(mem.address, 0, len);
        if (!write_full(cp->from[1], &mine, sizeof(mine))) {
            return 47;
        }
        char c;
        if (!read_full(cp->to[0], &c, 1)) { /* the parent has put */
            return 48;
        }
        std::vector<uint8_t> expect2(len);
        fill_random(expect2.data(), len, 777);
        if (first_diff(mem.address, expect2.data(), len) != -1) {
            fprintf(stderr, "child: the parent's put is not in my buffer\n");
            return 49;
        }
        uct_mem_free(&mem);
        return 0;
    });

    stack s;
    uct_allocated_memory_t mem;
    peer_info info, child_info;
    uct_ep_h ep;

    open_stack(s);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_EQ(UCS_OK, s.alloc(len, &mem)) << s.error;
    fill_random(mem.address, len, 4242);
    ASSERT_TRUE(make_peer_info(s, mem, &info));
    ASSERT_TRUE(write_full(p.to[1], &info, sizeof(info)));

    ASSERT_TRUE(read_full(p.from[0], &child_info, sizeof(child_info)))
            << "the child failed before sending its buffer";
    {
        rkey key;
        void *local;
        std::vector<uint8_t> src(len);

        fill_random(src.data(), len, 777);
        ASSERT_EQ(UCS_OK, key.unpack(s.component, child_info.rkey));
        /* the child's address translates into this process's mapping */
        ASSERT_EQ(UCS_OK, key.ptr(child_info.address, &local));
        ASSERT_TRUE(uct_iface_is_reachable(
                s.iface, (uct_device_addr_t*)child_info.dev_addr,
                (uct_iface_addr_t*)child_info.iface_addr));
        ASSERT_EQ(UCS_OK, s.connect(child_info.dev_addr, child_info.iface_addr,
                                    &ep));
        uct_iov_t iov = {src.data(), len, UCT_MEM_HANDLE_NULL, len, 1};
        ASSERT_EQ(UCS_OK, uct_ep_put_zcopy(ep, &iov, 1, child_info.address,
                                           key.get(), NULL));
        ASSERT_EQ(UCS_OK, uct_ep_flush(ep, 0, NULL));
        ASSERT_EQ(UCS_OK, key.ptr(child_info.address, &local));
        EXPECT_EQ(-1, first_diff(local, src.data(), len));
        /* before the child's interface goes away */
        s.disconnect(ep);
    }
    char c = 'p';
    EXPECT_TRUE(write_full(p.to[1], &c, 1));
    close(p.to[1]);
    close(p.from[0]);
    EXPECT_EQ(0, reap(pid));
    EXPECT_EQ(UCS_OK, uct_mem_free(&mem));
}
