/*
 * RMA and atomics on memory outside the pool (UCX_CXL_REG_ANY=y, the
 * default): the key names the owner process, which executes every
 * operation on its own memory when its interface progresses.
 */
#include "cxl_uct_util.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace cxluct;

namespace {

struct completion {
    uct_completion_t uct;
    bool             done;
    ucs_status_t     status;

    completion() { reset(); }
    void reset()
    {
        uct.func   = cb;
        uct.count  = 1;
        uct.status = UCS_OK;
        done       = false;
        status     = UCS_OK;
    }
    static void cb(uct_completion_t *self)
    {
        completion *c = ucs_container_of(self, completion, uct);
        c->done   = true;
        c->status = self->status;
    }
};

struct unpack_ctx {
    std::vector<uint8_t> data;
    unsigned             calls = 0;
};

size_t pack_cb(void *dest, void *arg)
{
    const std::vector<uint8_t> *src = (const std::vector<uint8_t>*)arg;
    memcpy(dest, src->data(), src->size());
    return src->size();
}

void unpack_cb(void *arg, const void *data, size_t length)
{
    unpack_ctx *ctx = (unpack_ctx*)arg;
    ctx->data.assign((const uint8_t*)data, (const uint8_t*)data + length);
    ctx->calls++;
}

/* Progress until the endpoint's flush completes; its status. */
ucs_status_t flush_ep(stack &s, uct_ep_h ep)
{
    ucs_status_t status;

    for (int i = 0; i < 10000000; ++i) {
        status = uct_ep_flush(ep, 0, NULL);
        if (status != UCS_INPROGRESS) {
            return status;
        }
        uct_worker_progress(s.worker);
    }
    return UCS_ERR_TIMED_OUT;
}

bool wait_comp(stack &s, completion &c)
{
    for (int i = 0; (i < 10000000) && !c.done; ++i) {
        uct_worker_progress(s.worker);
    }
    return c.done;
}

} // namespace

class cxl_proxy : public cxl_test {
protected:
    static const size_t SIZE = 256 * 1024;

    void SetUp() override
    {
        ASSERT_NO_FATAL_FAILURE(cxl_test::SetUp());
        open_stack(m_s);
        ASSERT_FALSE(HasFatalFailure());
        ASSERT_TRUE(m_s.md_attr.cap.flags & UCT_MD_FLAG_REG)
                << "UCX_CXL_REG_ANY=y is the default";
        uct_iface_progress_enable(m_s.iface, UCT_PROGRESS_SEND |
                                             UCT_PROGRESS_RECV);
        ASSERT_EQ(UCS_OK, m_s.connect_to(m_s, &m_ep)) << m_s.error;
        ASSERT_EQ(0, posix_memalign(&m_mem, 64, SIZE));
        memset(m_mem, 0, SIZE);
        ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_s.md, m_mem, SIZE,
                                         UCT_MD_MEM_ACCESS_ALL, &m_memh));
        std::vector<uint8_t> buf;
        ASSERT_EQ(UCS_OK, m_s.pack(m_memh, &buf));
        ASSERT_EQ(UCS_OK, m_key.unpack(m_s.component, buf.data()));
    }

    void TearDown() override
    {
        m_key.release();
        if (m_memh != nullptr) {
            uct_md_mem_dereg(m_s.md, m_memh);
        }
        m_s.close();
        free(m_mem);
        cxl_test::TearDown();
    }

    uint64_t addr(size_t offset) const { return (uintptr_t)m_mem + offset; }
    uint8_t *mem() const { return (uint8_t*)m_mem; }

    stack      m_s;
    uct_ep_h   m_ep   = nullptr;
    void      *m_mem  = nullptr;
    uct_mem_h  m_memh = nullptr;
    rkey       m_key;
};

/*
 * Every put and get flavour on ordinary memory through a loopback endpoint.
 * Nothing lands before the owner's interface progresses: the data path is
 * the channel, not a store into the memory.
 */
TEST_F(cxl_proxy, put_and_get_every_flavour)
{
    std::vector<uint8_t> s1(100), s2(5000), s3(200000), back(200000);
    fill_random(s1.data(), s1.size(), 1);
    fill_random(s2.data(), s2.size(), 2);
    fill_random(s3.data(), s3.size(), 3);

    ASSERT_EQ(UCS_OK, uct_ep_put_short(m_ep, s1.data(), s1.size(), addr(0),
                                       m_key.get()));
    ASSERT_EQ((ssize_t)s2.size(),
              uct_ep_put_bcopy(m_ep, pack_cb, &s2, addr(1000), m_key.get()));
    uct_iov_t iov = {s3.data(), s3.size(), nullptr, s3.size(), 1};
    /* larger than the 64 KiB channel: the rest streams from progress */
    ASSERT_EQ(UCS_OK, uct_ep_put_zcopy(m_ep, &iov, 1, addr(40000),
                                       m_key.get(), nullptr));
    EXPECT_EQ(-1, first_diff(mem(), std::vector<uint8_t>(SIZE, 0).data(),
                             SIZE))
            << "a put landed before the owner progressed";

    ASSERT_EQ(UCS_OK, flush_ep(m_s, m_ep));
    EXPECT_EQ(-1, first_diff(mem(), s1.data(), s1.size()));
    EXPECT_EQ(-1, first_diff(mem() + 1000, s2.data(), s2.size()));
    EXPECT_EQ(-1, first_diff(mem() + 40000, s3.data(), s3.size()));

    /* get_zcopy into two iov elements */
    completion c;
    uct_iov_t giov[2] = {{back.data(), 70000, nullptr, 70000, 1},
                         {back.data() + 70000, 130000, nullptr, 130000, 1}};
    ucs_status_t st = uct_ep_get_zcopy(m_ep, giov, 2, addr(40000), m_key.get(),
                                       &c.uct);
    ASSERT_EQ(UCS_INPROGRESS, st);
    ASSERT_TRUE(wait_comp(m_s, c));
    EXPECT_EQ(UCS_OK, c.status);
    EXPECT_EQ(-1, first_diff(back.data(), s3.data(), s3.size()));

    unpack_ctx ctx;
    c.reset();
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_get_bcopy(m_ep, unpack_cb, &ctx, 3000,
                                               addr(1000), m_key.get(), &c.uct));
    ASSERT_TRUE(wait_comp(m_s, c));
    EXPECT_EQ(UCS_OK, c.status);
    ASSERT_EQ(1u, ctx.calls);
    ASSERT_EQ(3000u, ctx.data.size());
    EXPECT_EQ(-1, first_diff(ctx.data.data(), s2.data(), 3000));

    /* get_short would have to wait for the owner inside the call */
    uint64_t word = 0;
    hide_errors hide;
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, uct_ep_get_short(m_ep, &word, sizeof(word),
                                                    addr(0), m_key.get()));
}

/*
 * A get larger than the channel streams from the owner's memory; a put
 * issued after it must not change what it returns.  The owner copies the
 * rest of the answer aside before it executes the put.
 */
TEST_F(cxl_proxy, later_put_does_not_change_an_earlier_get)
{
    const size_t len = 200000;
    std::vector<uint8_t> before(len), after(len), back(len);
    fill_random(before.data(), len, 11);
    fill_random(after.data(), len, 12);
    memcpy(mem(), before.data(), len);

    completion c;
    uct_iov_t giov = {back.data(), len, nullptr, len, 1};
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_get_zcopy(m_ep, &giov, 1, addr(0),
                                               m_key.get(), &c.uct));
    /* the put's first records still fit behind the get; the rest streams */
    uct_iov_t piov = {after.data(), len, nullptr, len, 1};
    ASSERT_EQ(UCS_OK, uct_ep_put_zcopy(m_ep, &piov, 1, addr(0), m_key.get(),
                                       nullptr));
    ASSERT_TRUE(wait_comp(m_s, c));
    EXPECT_EQ(UCS_OK, c.status);
    EXPECT_EQ(-1, first_diff(back.data(), before.data(), len))
            << "the get returned data of the later put";
    ASSERT_EQ(UCS_OK, flush_ep(m_s, m_ep));
    EXPECT_EQ(-1, first_diff(mem(), after.data(), len));
}

/*
 * No pointer to memory outside the pool: uct_rkey_ptr (and so ucp_rkey_ptr)
 * used to return the owner's address, meaningless in any other process.
 */
TEST_F(cxl_proxy, rkey_ptr_is_unreachable)
{
    void *p = nullptr;

    EXPECT_EQ(UCS_ERR_UNREACHABLE, m_key.ptr(addr(0), &p));
    EXPECT_EQ(nullptr, p);
}

/* Every atomic, both widths, against a model. */
TEST_F(cxl_proxy, atomics_match_a_model)
{
    const unsigned ops[] = {UCT_ATOMIC_OP_ADD, UCT_ATOMIC_OP_AND,
                            UCT_ATOMIC_OP_OR, UCT_ATOMIC_OP_XOR,
                            UCT_ATOMIC_OP_SWAP};
    uint64_t *w64 = (uint64_t*)mem();
    uint32_t *w32 = (uint32_t*)(mem() + 64);
    uint64_t m64  = 0x0123456789abcdefull;
    uint32_t m32  = 0x89abcdefu;
    *w64 = m64;
    *w32 = m32;

    for (unsigned round = 0; round < 3; ++round) {
        for (unsigned op : ops) {
            uint64_t v64 = 0x1111111111111111ull * (round + 1) + op;
            uint32_t v32 = 0x01010101u * (round + 3) + op;
            uint64_t r64 = 0;
            uint32_t r32 = 0;
            completion c64, c32;

            ASSERT_EQ(UCS_INPROGRESS,
                      uct_ep_atomic64_fetch(m_ep, (uct_atomic_op_t)op, v64,
                                            &r64, addr(0), m_key.get(),
                                            &c64.uct));
            ASSERT_EQ(UCS_INPROGRESS,
                      uct_ep_atomic32_fetch(m_ep, (uct_atomic_op_t)op, v32,
                                            &r32, addr(64), m_key.get(),
                                            &c32.uct));
            ASSERT_TRUE(wait_comp(m_s, c64) && wait_comp(m_s, c32));
            EXPECT_EQ(m64, r64) << "op " << op;
            EXPECT_EQ(m32, r32) << "op " << op;
            switch (op) {
            case UCT_ATOMIC_OP_ADD: m64 += v64; m32 += v32; break;
            case UCT_ATOMIC_OP_AND: m64 &= v64; m32 &= v32; break;
            case UCT_ATOMIC_OP_OR:  m64 |= v64; m32 |= v32; break;
            case UCT_ATOMIC_OP_XOR: m64 ^= v64; m32 ^= v32; break;
            default:                m64 = v64;  m32 = v32;  break;
            }
            if (op != UCT_ATOMIC_OP_SWAP) {
                ASSERT_EQ(UCS_OK, uct_ep_atomic64_post(m_ep, (uct_atomic_op_t)op,
                                                       v64, addr(0),
                                                       m_key.get()));
                ASSERT_EQ(UCS_OK, uct_ep_atomic32_post(m_ep, (uct_atomic_op_t)op,
                                                       v32, addr(64),
                                                       m_key.get()));
                ASSERT_EQ(UCS_OK, flush_ep(m_s, m_ep));
                switch (op) {
                case UCT_ATOMIC_OP_ADD: m64 += v64; m32 += v32; break;
                case UCT_ATOMIC_OP_AND: m64 &= v64; m32 &= v32; break;
                case UCT_ATOMIC_OP_OR:  m64 |= v64; m32 |= v32; break;
                default:                m64 ^= v64; m32 ^= v32; break;
                }
            }
            EXPECT_EQ(m64, *w64) << "op " << op;
            EXPECT_EQ(m32, *w32) << "op " << op;
        }
    }

    /* compare-and-swap: a miss, then a hit */
    for (int hit = 0; hit < 2; ++hit) {
        uint64_t r64 = 0;
        uint32_t r32 = 0;
        completion c64, c32;
        uint64_t cmp64 = hit ? m64 : m64 + 1;
        uint32_t cmp32 = hit ? m32 : m32 + 1;

        ASSERT_EQ(UCS_INPROGRESS,
                  uct_ep_atomic_cswap64(m_ep, cmp64, 42, addr(0), m_key.get(),
                                        &r64, &c64.uct));
        ASSERT_EQ(UCS_INPROGRESS,
                  uct_ep_atomic_cswap32(m_ep, cmp32, 43, addr(64), m_key.get(),
                                        &r32, &c32.uct));
        ASSERT_TRUE(wait_comp(m_s, c64) && wait_comp(m_s, c32));
        EXPECT_EQ(m64, r64);
        EXPECT_EQ(m32, r32);
        if (hit) {
            m64 = 42;
            m32 = 43;
        }
        EXPECT_EQ(m64, *w64);
        EXPECT_EQ(m32, *w32);
    }
}

/*
 * A key whose memory was deregistered: the owner refuses to touch it.  A
 * get completes with an error, a put is dropped.
 */
TEST_F(cxl_proxy, owner_refuses_deregistered_memory)
{
    std::vector<uint8_t> data(512, 0x5a);
    unpack_ctx ctx;
    completion c;

    ASSERT_EQ(UCS_OK, uct_md_mem_dereg(m_s.md, m_memh));
    m_memh = nullptr;

    hide_errors hide;
    ASSERT_EQ(UCS_OK, uct_ep_put_short(m_ep, data.data(), data.size(), addr(0),
                                       m_key.get()));
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_get_bcopy(m_ep, unpack_cb, &ctx, 64,
                                               addr(0), m_key.get(), &c.uct));
    ASSERT_TRUE(wait_comp(m_s, c));
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, c.status);
    EXPECT_EQ(0u, ctx.calls);
    ASSERT_EQ(UCS_OK, flush_ep(m_s, m_ep));
    EXPECT_EQ(0, mem()[0]) << "a put into deregistered memory was executed";
}

/*
 * Two processes: the child owns ordinary memory and only progresses; the
 * parent reads, adds and writes it through the child's key.
 */
TEST_F(cxl_proxy, another_process_reaches_ordinary_memory)
{
    const size_t len = 100000, adds = 500;
    int info_pipe[2], quit_pipe[2];

    ASSERT_EQ(0, pipe(info_pipe));
    ASSERT_EQ(0, pipe(quit_pipe));
    pid_t pid = cxltest::fork_child([&]() -> int {
        stack s;
        void *buf = nullptr;
        uct_allocated_memory_t mem;
        peer_info info;
        char c;

        alarm(120);
        close(info_pipe[0]);
        close(quit_pipe[1]);
        if ((s.open(dev_name_of(m_path)) != UCS_OK) ||
            (posix_memalign(&buf, 64, len) != 0)) {
            return 2;
        }
        uct_iface_progress_enable(s.iface, UCT_PROGRESS_SEND |
                                           UCT_PROGRESS_RECV);
        cxltest::fill_pattern(buf, len, 77);
        memset(&mem, 0, sizeof(mem));
        mem.address = buf;
        mem.length  = len;
        if ((uct_md_mem_reg(s.md, buf, len, UCT_MD_MEM_ACCESS_ALL,
                            &mem.memh) != UCS_OK) ||
            !make_peer_info(s, mem, &info) ||
            !write_full(info_pipe[1], &info, sizeof(info))) {
            return 3;
        }
        /* serve until told to stop */
        fcntl(quit_pipe[0], F_SETFL, O_NONBLOCK);
        while (read(quit_pipe[0], &c, 1) != 1) {
            uct_worker_progress(s.worker);
        }
        /* what the parent wrote: counter at 0, pattern 78 behind it */
        int ok = (*(uint64_t*)buf == 1000 + adds) &&
                 cxltest::check_pattern((uint8_t*)buf + 64, len - 64, 78);
        uct_md_mem_dereg(s.md, mem.memh);
        s.close();
        free(buf);
        fflush(stdout);
        return ok ? 0 : 4;
    });
    ASSERT_GT(pid, 0);
    close(info_pipe[1]);
    close(quit_pipe[0]);

    peer_info info;
    ASSERT_TRUE(read_full(info_pipe[0], &info, sizeof(info)));
    stack s;
    rkey key;
    uct_ep_h ep;
    open_stack(s);
    ASSERT_FALSE(HasFatalFailure());
    uct_iface_progress_enable(s.iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    ASSERT_EQ(UCS_OK, s.connect(info.dev_addr, info.iface_addr, &ep)) << s.error;
    ASSERT_EQ(UCS_OK, key.unpack(s.component, info.rkey));

    std::vector<uint8_t> back(len), expect(len);
    completion c;
    uct_iov_t iov = {back.data(), len, nullptr, len, 1};
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_get_zcopy(ep, &iov, 1, info.address,
                                               key.get(), &c.uct));
    ASSERT_TRUE(wait_comp(s, c));
    EXPECT_EQ(UCS_OK, c.status);
    cxltest::fill_pattern(expect.data(), len, 77);
    EXPECT_EQ(-1, first_diff(back.data(), expect.data(), len));

    /* a counter: swap in 1000, then fetch-and-add one by one */
    uint64_t old = 0;
    c.reset();
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_atomic64_fetch(ep, UCT_ATOMIC_OP_SWAP,
                                                    1000, &old, info.address,
                                                    key.get(), &c.uct));
    ASSERT_TRUE(wait_comp(s, c));
    EXPECT_EQ(*(uint64_t*)expect.data(), old);
    for (uint64_t i = 0; i < adds; ++i) {
        c.reset();
        ASSERT_EQ(UCS_INPROGRESS, uct_ep_atomic64_fetch(ep, UCT_ATOMIC_OP_ADD,
                                                        1, &old, info.address,
                                                        key.get(), &c.uct));
        ASSERT_TRUE(wait_comp(s, c));
        ASSERT_EQ(1000 + i, old);
    }

    cxltest::fill_pattern(expect.data(), len - 64, 78);
    uct_iov_t piov = {expect.data(), len - 64, nullptr, len - 64, 1};
    ASSERT_EQ(UCS_OK, uct_ep_put_zcopy(ep, &piov, 1, info.address + 64,
                                       key.get(), nullptr));
    ASSERT_EQ(UCS_OK, flush_ep(s, ep));

    key.release();
    s.close();
    ASSERT_EQ(1, write(quit_pipe[1], "q", 1));
    EXPECT_EQ(0, cxltest::wait_child(pid));
    close(info_pipe[0]);
    close(quit_pipe[1]);
}

/*
 * Operations the owner executes stream a bulk ring's worth per progress
 * turn of the owner, not a receive ring's: a 200 KB put goes out whole
 * (the endpoint is not held streaming it), so the next operation is taken
 * at once.  Through the 64 KiB ring alone, the put streamed from progress
 * and UCP's ucp_put_bw 1 MiB ran at 312 MB/s (786 with the bulk ring;
 * ucp_get 4 MiB 86 -> 1800-2200 MB/s).
 */
TEST_F(cxl_proxy, large_put_goes_out_through_the_bulk_ring)
{
    std::vector<uint8_t> s3(200000);
    uint64_t word = 0x1122334455667788ull;

    fill_random(s3.data(), s3.size(), 7);
    uct_iov_t iov = {s3.data(), s3.size(), nullptr, s3.size(), 1};
    ASSERT_EQ(UCS_OK, uct_ep_put_zcopy(m_ep, &iov, 1, addr(0), m_key.get(),
                                       nullptr));
    EXPECT_EQ(UCS_OK, uct_ep_put_short(m_ep, &word, sizeof(word),
                                       addr(SIZE - sizeof(word)), m_key.get()))
            << "the endpoint is still streaming the first put";
    ASSERT_EQ(UCS_OK, flush_ep(m_s, m_ep));
    EXPECT_EQ(-1, first_diff(mem(), s3.data(), s3.size()));
    EXPECT_EQ(0, memcmp(mem() + SIZE - sizeof(word), &word, sizeof(word)));
}
