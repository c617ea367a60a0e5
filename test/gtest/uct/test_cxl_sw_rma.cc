/*
 * RMA and atomics on pool memory of another host with software coherence
 * (doc/design/sw-coherence.md, "RMA and atomics"), on the strict
 * non-coherent emulator (UCX_CXL_POOL=emulate-nc:PATH).
 *
 * The owner, a child on emulated host 1, allocates pool memory, hands its
 * keys over, then only progresses and, when told, stores into or checks
 * its memory with plain loads and stores (nothing written back by hand).
 * The requester, this process on emulated host 0, puts, gets and applies
 * atomics through the keys.  Correct code shows every byte where it
 * belongs; with the owner leaving out its invalidate or its write-back
 * (UCX_CXL_TEST_SKIP_OWNER_SYNC, test only) the emulator makes the
 * difference seen, while a coherent mapping of the same pool hides it.
 */
#include "cxl_uct_util.h"

#include <chrono>
#include <fcntl.h>
#include <random>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace cxluct;

namespace {

typedef std::chrono::steady_clock clk;

const size_t BUF_LEN  = 4ull << 20;  /* the owner's main buffer */
const size_t BUF2_LEN = 256 * 1024;  /* freed on request: stale key */
const uint64_t FILL_A = 1000;        /* what the owner stores first */

enum {
    CMD_FILL = 1,  /* store fill_random(seed) over buffer 0, expect it */
    CMD_EXPECT,    /* a put wrote fill_random(seed) at [off, +len) */
    CMD_CHECK,     /* buffer 0 == what is expected? first difference */
    CMD_READ,      /* 8 bytes at off */
    CMD_WRITE,     /* store seed as 8 bytes at off */
    CMD_FREE2,     /* free buffer 1 */
    CMD_PAUSE,     /* stop progressing */
    CMD_QUIT
};

struct command {
    uint32_t op;
    uint32_t pad;
    uint64_t seed;
    uint64_t off;
    uint64_t len;
};

struct answer {
    int64_t  result;
    uint64_t value;
};

struct hello {
    peer_info info[2];
    int32_t   rc;
    char      error[120];
};

void set_env(const std::string &pool, const char *host, const char *skip)
{
    setenv("UCX_CXL_POOL", pool.c_str(), 1);
    setenv("UCX_CXL_COHERENCE", "sw", 1);
    setenv("UCX_CXL_HOST_INDEX", host, 1);
    if (skip != nullptr) {
        setenv("UCX_CXL_TEST_SKIP_OWNER_SYNC", skip, 1);
    } else {
        unsetenv("UCX_CXL_TEST_SKIP_OWNER_SYNC");
    }
}

/* The owner child: serves the requester's operations by progressing, and
 * the test's commands on its memory with plain loads and stores. */
int run_owner(const std::string &dev, int hello_fd, int cmd_fd, int ans_fd)
{
    std::vector<uint8_t> expect(BUF_LEN), tmp;
    uct_allocated_memory_t mem[2];
    bool paused = false, freed = false;
    hello h;
    stack s;

    memset(&h, 0, sizeof(h));
    alarm(300);
    if ((s.open(dev) != UCS_OK) || (s.alloc(BUF_LEN, &mem[0]) != UCS_OK) ||
        (s.alloc(BUF2_LEN, &mem[1]) != UCS_OK) ||
        !make_peer_info(s, mem[0], &h.info[0]) ||
        !make_peer_info(s, mem[1], &h.info[1])) {
        h.rc = 1;
        snprintf(h.error, sizeof(h.error), "owner: %s", s.error.c_str());
        write_full(hello_fd, &h, sizeof(h));
        return 1;
    }
    uct_iface_progress_enable(s.iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    write_full(hello_fd, &h, sizeof(h));

    fcntl(cmd_fd, F_SETFL, O_NONBLOCK);
    uint8_t *buf = (uint8_t*)mem[0].address;
    for (;;) {
        command c;
        answer a = {0, 0};

        if (!paused) {
            uct_worker_progress(s.worker);
        }
        ssize_t n = read(cmd_fd, &c, sizeof(c));
        if (n == 0) {
            break; /* the test is gone */
        } else if (n != (ssize_t)sizeof(c)) {
            if (paused) {
                usleep(1000);
            }
            continue;
        }
        switch (c.op) {
        case CMD_FILL:
            fill_random(expect.data(), BUF_LEN, c.seed);
            memcpy(buf, expect.data(), BUF_LEN);
            break;
        case CMD_EXPECT:
            tmp.resize(c.len);
            fill_random(tmp.data(), c.len, c.seed);
            memcpy(expect.data() + c.off, tmp.data(), c.len);
            break;
        case CMD_CHECK:
            a.result = first_diff(buf, expect.data(), BUF_LEN);
            break;
        case CMD_READ:
            memcpy(&a.value, buf + c.off, sizeof(a.value));
            break;
        case CMD_WRITE:
            memcpy(buf + c.off, &c.seed, sizeof(c.seed));
            break;
        case CMD_FREE2:
            a.result = uct_mem_free(&mem[1]);
            freed    = true;
            break;
        case CMD_PAUSE:
            paused = true;
            break;
        case CMD_QUIT:
            goto out;
        }
        write_full(ans_fd, &a, sizeof(a));
    }
out:
    if (!freed) {
        uct_mem_free(&mem[1]);
    }
    uct_mem_free(&mem[0]);
    s.close();
    return 0;
}

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
};

void unpack_cb(void *arg, const void *data, size_t length)
{
    unpack_ctx *ctx = (unpack_ctx*)arg;
    ctx->data.assign((const uint8_t*)data, (const uint8_t*)data + length);
}

size_t pack_cb(void *dest, void *arg)
{
    const std::vector<uint8_t> *src = (const std::vector<uint8_t>*)arg;
    memcpy(dest, src->data(), src->size());
    return src->size();
}

std::vector<uint8_t> random_bytes(size_t len, uint64_t seed)
{
    std::vector<uint8_t> v(len);
    fill_random(v.data(), len, seed);
    return v;
}

} // namespace

class cxl_sw_rma : public cxl_test {
protected:
    void TearDown() override
    {
        stop();
        unsetenv("UCX_CXL_HOST_INDEX");
        unsetenv("UCX_CXL_TEST_SKIP_OWNER_SYNC");
        unsetenv("UCX_CXL_TEST_VIA_OWNER");
        if (!m_path_sw.empty()) {
            /* also the view of a killed owner, which nobody else removes */
            cxlpool_destroy(("emulate-nc:" + m_path_sw).c_str(), 1);
        }
        cxl_test::TearDown();
    }

    /*
     * Owner on host owner_host (with the knob skip, or none), requester
     * here on req_host; emulated: the pool through emulate-nc, else a
     * coherent mapping of the same sw pool.
     */
    void start(const char *owner_host, const char *req_host,
               const char *skip = nullptr, bool emulated = true)
    {
        /* 8 host arenas of 32 MiB: an 8.4 MiB receive block and the
         * buffers per host */
        std::string path = new_pool(256ull << 20, CXL_COH_SW);
        std::string spec = emulated ? "emulate-nc:" + path : path;

        m_path_sw = path;
        std::string dev  = dev_name_of(path);
        int hp[2], cp[2], ap[2];
        hello h;

        ASSERT_EQ(0, pipe(hp));
        ASSERT_EQ(0, pipe(cp));
        ASSERT_EQ(0, pipe(ap));
        m_owner = cxltest::fork_child([&]() -> int {
            close(hp[0]);
            close(cp[1]);
            close(ap[0]);
            set_env(spec, owner_host, skip);
            return run_owner(dev, hp[1], cp[0], ap[1]);
        });
        ASSERT_GT(m_owner, 0);
        close(hp[1]);
        close(cp[0]);
        close(ap[1]);
        m_cmd = cp[1];
        m_ans = ap[0];
        ASSERT_TRUE(read_full(hp[0], &h, sizeof(h))) << "the owner died";
        close(hp[0]);
        ASSERT_EQ(0, h.rc) << h.error;
        m_info[0] = h.info[0];
        m_info[1] = h.info[1];

        set_env(spec, req_host, nullptr);
        ASSERT_EQ(UCS_OK, m_s.open(dev)) << m_s.error;
        uct_iface_progress_enable(m_s.iface, UCT_PROGRESS_SEND |
                                             UCT_PROGRESS_RECV);
        ASSERT_EQ(UCS_OK, m_s.connect(m_info[0].dev_addr,
                                      m_info[0].iface_addr, &m_ep))
                << m_s.error;
        ASSERT_EQ(UCS_OK, m_key.unpack(m_s.component, m_info[0].rkey));
        ASSERT_EQ(UCS_OK, m_key2.unpack(m_s.component, m_info[1].rkey));
    }

    void stop()
    {
        m_key.release();
        m_key2.release();
        m_s.close();
        if (m_owner > 0) {
            owner(CMD_QUIT);
            close(m_cmd);
            close(m_ans);
            EXPECT_EQ(0, cxltest::wait_child(m_owner)) << "owner exit status";
            m_owner = 0;
        }
    }

    answer owner(uint32_t op, uint64_t seed = 0, uint64_t off = 0,
                 uint64_t len = 0)
    {
        command c = {op, 0, seed, off, len};
        answer a  = {-2, 0};

        EXPECT_TRUE(write_full(m_cmd, &c, sizeof(c)));
        if (op != CMD_QUIT) {
            EXPECT_TRUE(read_full(m_ans, &a, sizeof(a))) << "owner died";
        }
        return a;
    }

    uint64_t raddr(size_t off) const { return m_info[0].address + off; }

    bool progress_until(const bool &flag, int seconds = 20)
    {
        clk::time_point deadline = clk::now() + std::chrono::seconds(seconds);

        while (!flag && (clk::now() < deadline)) {
            uct_worker_progress(m_s.worker);
        }
        return flag;
    }

    ucs_status_t flush()
    {
        clk::time_point deadline = clk::now() + std::chrono::seconds(20);
        ucs_status_t status;

        do {
            status = uct_ep_flush(m_ep, 0, NULL);
            if (status != UCS_INPROGRESS) {
                return status;
            }
            uct_worker_progress(m_s.worker);
        } while (clk::now() < deadline);
        return UCS_ERR_TIMED_OUT;
    }

    /* A put_zcopy from iov; waits for its local completion. */
    void put_zcopy(const uct_iov_t *iov, size_t iovcnt, uint64_t addr,
                   uct_rkey_t key, ucs_status_t expect = UCS_OK)
    {
        completion c;
        ucs_status_t status;

        while ((status = uct_ep_put_zcopy(m_ep, iov, iovcnt, addr, key,
                                          &c.uct)) == UCS_ERR_NO_RESOURCE) {
            uct_worker_progress(m_s.worker);
        }
        if (status == UCS_INPROGRESS) {
            ASSERT_TRUE(progress_until(c.done)) << "put_zcopy never completed";
            status = c.status;
        }
        EXPECT_EQ(expect, status) << ucs_status_string(status);
    }

    void put_zcopy(const std::vector<uint8_t> &data, size_t off)
    {
        uct_iov_t iov = {(void*)data.data(), data.size(), nullptr, data.size(),
                         1};
        put_zcopy(&iov, 1, raddr(off), m_key.get());
    }

    ucs_status_t get_zcopy(uint8_t *dst, size_t len, uint64_t addr,
                           uct_rkey_t key)
    {
        uct_iov_t iov = {dst, len, nullptr, len, 1};
        completion c;
        ucs_status_t status;

        while ((status = uct_ep_get_zcopy(m_ep, &iov, 1, addr, key,
                                          &c.uct)) == UCS_ERR_NO_RESOURCE) {
            uct_worker_progress(m_s.worker);
        }
        if (status != UCS_INPROGRESS) {
            return status;
        }
        EXPECT_TRUE(progress_until(c.done)) << "get_zcopy never completed";
        return c.status;
    }

    ucs_status_t get_bcopy(unpack_ctx *ctx, size_t len, uint64_t addr,
                           uct_rkey_t key)
    {
        completion c;
        ucs_status_t status;

        while ((status = uct_ep_get_bcopy(m_ep, unpack_cb, ctx, len, addr, key,
                                          &c.uct)) == UCS_ERR_NO_RESOURCE) {
            uct_worker_progress(m_s.worker);
        }
        if (status != UCS_INPROGRESS) {
            return status;
        }
        EXPECT_TRUE(progress_until(c.done)) << "get_bcopy never completed";
        return c.status;
    }

    /*
     * The owner stores pattern A over its buffer, without writing it back;
     * every put flavour lands in parts of it, some unaligned at both ends
     * (their partial lines are the owner's to store).  After the flush the
     * owner checks, with plain loads, every put and every byte around them.
     * Returns the owner's first differing offset, or -1.
     */
    int64_t puts_then_owner_checks()
    {
        struct {
            size_t off, len;
        } zc[] = {{0, 1 << 20}, {(1 << 20) + 7, 100000}, {(3 << 20) + 5, 3000}};
        uint64_t seed = 1;

        EXPECT_EQ(0, owner(CMD_FILL, FILL_A).result);
        for (auto &z : zc) {
            std::vector<uint8_t> data = random_bytes(z.len, seed);
            put_zcopy(data, z.off);
            owner(CMD_EXPECT, seed++, z.off, z.len);
        }

        /* two iov elements, 70000 bytes, odd start */
        std::vector<uint8_t> d = random_bytes(70000, seed);
        uct_iov_t iov[2] = {{d.data(), 30000, nullptr, 30000, 1},
                            {d.data() + 30000, 40000, nullptr, 40000, 1}};
        put_zcopy(iov, 2, raddr((2 << 20) + 33), m_key.get());
        owner(CMD_EXPECT, seed++, (2 << 20) + 33, d.size());

        /* put_short and put_bcopy: a small one is executed by the owner, a
         * large one is copied aside and written like a put_zcopy */
        d = random_bytes(100, seed);
        EXPECT_EQ(UCS_OK, uct_ep_put_short(m_ep, d.data(), d.size(),
                                           raddr((3 << 20) + 8192 + 3),
                                           m_key.get()));
        owner(CMD_EXPECT, seed++, (3 << 20) + 8192 + 3, d.size());
        d = random_bytes(50000, seed);
        ucs_status_t st;
        while ((st = uct_ep_put_short(m_ep, d.data(), d.size(),
                                      raddr((3 << 20) + 65536 + 9),
                                      m_key.get())) == UCS_ERR_NO_RESOURCE) {
            uct_worker_progress(m_s.worker);
        }
        EXPECT_EQ(UCS_OK, st);
        fill_random(d.data(), d.size(), seed + 1000); /* may be reused now */
        owner(CMD_EXPECT, seed++, (3 << 20) + 65536 + 9, d.size());
        d = random_bytes(20000, seed);
        ssize_t packed;
        while ((packed = uct_ep_put_bcopy(m_ep, pack_cb, &d,
                                          raddr((3 << 20) + 16384 + 1),
                                          m_key.get())) ==
               UCS_ERR_NO_RESOURCE) {
            uct_worker_progress(m_s.worker);
        }
        EXPECT_EQ((ssize_t)d.size(), packed);
        owner(CMD_EXPECT, seed++, (3 << 20) + 16384 + 1, d.size());

        EXPECT_EQ(UCS_OK, flush());
        return owner(CMD_CHECK).result;
    }

    /*
     * The owner stores a pattern without writing it back, the requester
     * gets parts of it (zcopy, bcopy, unaligned), twice with different
     * patterns (the second get must not return lines of the first).
     * Returns the number of gets that returned something else.
     */
    int gets_of_owner_stores()
    {
        std::vector<uint8_t> expect(BUF_LEN), back;
        int bad = 0;

        for (uint64_t seed : {FILL_A, FILL_A + 1}) {
            EXPECT_EQ(0, owner(CMD_FILL, seed).result);
            fill_random(expect.data(), BUF_LEN, seed);

            back.assign(1 << 20, 0);
            EXPECT_EQ(UCS_OK, get_zcopy(back.data(), back.size(), raddr(0),
                                        m_key.get()));
            bad += (first_diff(back.data(), expect.data(), back.size()) != -1);

            back.assign(77777, 0);
            EXPECT_EQ(UCS_OK, get_zcopy(back.data(), back.size(),
                                        raddr((2 << 20) + 13), m_key.get()));
            bad += (first_diff(back.data(), expect.data() + (2 << 20) + 13,
                               back.size()) != -1);

            unpack_ctx ctx;
            EXPECT_EQ(UCS_OK, get_bcopy(&ctx, 5000, raddr((3 << 20) + 3),
                                        m_key.get()));
            bad += (ctx.data.size() != 5000) ||
                   (first_diff(ctx.data.data(), expect.data() + (3 << 20) + 3,
                               5000) != -1);
        }
        return bad;
    }

    stack    m_s;
    uct_ep_h m_ep    = nullptr;
    rkey     m_key, m_key2;
    peer_info m_info[2];
    pid_t    m_owner = 0;
    int      m_cmd   = -1;
    int      m_ans   = -1;
    std::string m_path_sw;
};

/* Puts land where they belong, and nothing around them changes. */
TEST_F(cxl_sw_rma, put_is_visible_to_the_owner_after_flush)
{
    ASSERT_NO_FATAL_FAILURE(start("1", "0"));
    EXPECT_EQ(-1, puts_then_owner_checks())
            << "the owner sees other bytes than the puts and its own stores";
}

/* Gets return the owner's latest stores, never written back by it. */
TEST_F(cxl_sw_rma, get_sees_the_owners_latest_stores)
{
    ASSERT_NO_FATAL_FAILURE(start("1", "0"));
    EXPECT_EQ(0, gets_of_owner_stores());
}

/* The owner leaves out its invalidate after a put: it keeps reading the
 * lines it had loaded before the put (the emulator never refreshes them). */
TEST_F(cxl_sw_rma, emulator_catches_owner_skipping_invalidate)
{
    ASSERT_NO_FATAL_FAILURE(start("1", "0", "invalidate"));
    EXPECT_NE(-1, puts_then_owner_checks())
            << "all puts visible although the owner never invalidated";
}

/* The owner leaves out its write-back: a get misses its stores, and its
 * dirty lines overwrite a put when they are finally written back. */
TEST_F(cxl_sw_rma, emulator_catches_owner_skipping_writeback)
{
    ASSERT_NO_FATAL_FAILURE(start("1", "0", "writeback"));
    EXPECT_GT(gets_of_owner_stores(), 0)
            << "gets saw stores the owner never wrote back";
    EXPECT_NE(-1, puts_then_owner_checks())
            << "puts survived the owner's dirty lines";
}

/* The same knob on a coherent mapping changes nothing: the emulator
 * catches the missing step, the protocol is not broken by the knob. */
TEST_F(cxl_sw_rma, knob_is_harmless_on_a_coherent_pool)
{
    ASSERT_NO_FATAL_FAILURE(start("1", "0", "writeback", false));
    EXPECT_EQ(0, gets_of_owner_stores());
    EXPECT_EQ(-1, puts_then_owner_checks());
}

/* A requester on the owner's host shares its caches: plain loads and
 * stores, no requests to the owner (which would skip them anyway). */
TEST_F(cxl_sw_rma, same_host_needs_no_owner)
{
    void *p = nullptr;

    ASSERT_NO_FATAL_FAILURE(start("2", "2", "writeback"));
    EXPECT_EQ(UCS_OK, m_key.ptr(raddr(0), &p)) << "a direct key";
    EXPECT_EQ(0, gets_of_owner_stores());
    EXPECT_EQ(-1, puts_then_owner_checks());
}

/* No pointer and no get_short for memory of another host. */
TEST_F(cxl_sw_rma, other_host_key_has_no_pointer_nor_get_short)
{
    uint64_t word = 0;
    void *p       = nullptr;

    ASSERT_NO_FATAL_FAILURE(start("1", "0"));
    EXPECT_EQ(UCS_ERR_UNREACHABLE, m_key.ptr(raddr(0), &p));
    EXPECT_FALSE(m_s.iface_attr.cap.flags & UCT_IFACE_FLAG_GET_SHORT);
    hide_errors hide;
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, uct_ep_get_short(m_ep, &word, sizeof(word),
                                                    raddr(0), m_key.get()));
}

/* Atomics, executed by the owner, against a model; the owner's plain
 * stores before and loads after see the same values, and so does a get. */
TEST_F(cxl_sw_rma, atomics_match_a_model)
{
    const unsigned ops[] = {UCT_ATOMIC_OP_ADD, UCT_ATOMIC_OP_AND,
                            UCT_ATOMIC_OP_OR, UCT_ATOMIC_OP_XOR,
                            UCT_ATOMIC_OP_SWAP, UCT_ATOMIC_OP_CSWAP};
    /* two 64-bit words on lines of their own, two 32-bit ones sharing one */
    const size_t off64[2] = {0, 64}, off32[2] = {128, 132};
    uint64_t m64[2]       = {0x0123456789abcdefull, 0xfedcba9876543210ull};
    uint32_t m32[2]       = {0x89abcdefu, 0x01234567u};
    std::mt19937_64 rng(42);

    ASSERT_NO_FATAL_FAILURE(start("1", "0"));
    owner(CMD_WRITE, m64[0], off64[0]);
    owner(CMD_WRITE, m64[1], off64[1]);
    owner(CMD_WRITE, ((uint64_t)m32[1] << 32) | m32[0], off32[0]);

    for (int i = 0; i < 400; ++i) {
        unsigned op  = ops[rng() % 6];
        bool wide    = rng() & 1;
        bool fetch   = (op == UCT_ATOMIC_OP_SWAP) ||
                       (op == UCT_ATOMIC_OP_CSWAP) || (rng() & 1);
        unsigned w   = rng() & 1;
        uint64_t v   = rng();
        uint64_t cmp = (rng() & 1) ? (wide ? m64[w] : m32[w]) : rng();
        uint64_t r64 = 0, old;
        uint32_t r32 = 0;
        uint64_t a   = raddr(wide ? off64[w] : off32[w]);
        completion c;
        ucs_status_t st;

        do {
            if (op == UCT_ATOMIC_OP_CSWAP) {
                st = wide ? uct_ep_atomic_cswap64(m_ep, cmp, v, a, m_key.get(),
                                                  &r64, &c.uct) :
                            uct_ep_atomic_cswap32(m_ep, (uint32_t)cmp,
                                                  (uint32_t)v, a, m_key.get(),
                                                  &r32, &c.uct);
            } else if (fetch) {
                st = wide ? uct_ep_atomic64_fetch(m_ep, (uct_atomic_op_t)op, v,
                                                  &r64, a, m_key.get(),
                                                  &c.uct) :
                            uct_ep_atomic32_fetch(m_ep, (uct_atomic_op_t)op,
                                                  (uint32_t)v, &r32, a,
                                                  m_key.get(), &c.uct);
            } else {
                st = wide ? uct_ep_atomic64_post(m_ep, (uct_atomic_op_t)op, v,
                                                 a, m_key.get()) :
                            uct_ep_atomic32_post(m_ep, (uct_atomic_op_t)op,
                                                 (uint32_t)v, a, m_key.get());
            }
            if (st == UCS_ERR_NO_RESOURCE) {
                uct_worker_progress(m_s.worker);
            }
        } while (st == UCS_ERR_NO_RESOURCE);
        if (st == UCS_INPROGRESS) {
            ASSERT_TRUE(progress_until(c.done)) << "atomic " << i;
            st = c.status;
        }
        ASSERT_EQ(UCS_OK, st) << "atomic " << i;

        old = wide ? m64[w] : m32[w];
        if (fetch) {
            ASSERT_EQ(old, wide ? r64 : (uint64_t)r32)
                    << "atomic " << i << " op " << op << (wide ? " 64" : " 32");
        }
        uint64_t nv;
        switch (op) {
        case UCT_ATOMIC_OP_ADD:   nv = old + v; break;
        case UCT_ATOMIC_OP_AND:   nv = old & v; break;
        case UCT_ATOMIC_OP_OR:    nv = old | v; break;
        case UCT_ATOMIC_OP_XOR:   nv = old ^ v; break;
        case UCT_ATOMIC_OP_SWAP:  nv = v; break;
        default:                  nv = (old == (wide ? cmp : (uint32_t)cmp)) ?
                                       v : old; break;
        }
        if (wide) {
            m64[w] = nv;
        } else {
            m32[w] = (uint32_t)nv;
        }
    }
    ASSERT_EQ(UCS_OK, flush());
    EXPECT_EQ(m64[0], owner(CMD_READ, 0, off64[0]).value);
    EXPECT_EQ(m64[1], owner(CMD_READ, 0, off64[1]).value);
    EXPECT_EQ(((uint64_t)m32[1] << 32) | m32[0],
              owner(CMD_READ, 0, off32[0]).value);

    uint64_t back[3] = {};
    ASSERT_EQ(UCS_OK, get_zcopy((uint8_t*)&back[0], 8, raddr(off64[0]),
                                m_key.get()));
    ASSERT_EQ(UCS_OK, get_zcopy((uint8_t*)&back[1], 8, raddr(off64[1]),
                                m_key.get()));
    ASSERT_EQ(UCS_OK, get_zcopy((uint8_t*)&back[2], 8, raddr(off32[0]),
                                m_key.get()));
    EXPECT_EQ(m64[0], back[0]);
    EXPECT_EQ(m64[1], back[1]);
    EXPECT_EQ(((uint64_t)m32[1] << 32) | m32[0], back[2]);
}

/* Nothing of one endpoint passes a direct put: an atomic and a get issued
 * right after it, without a flush, see its data. */
TEST_F(cxl_sw_rma, nothing_passes_a_put)
{
    std::vector<uint8_t> data = random_bytes(65536, 5);
    uint64_t word, old = 0;

    ASSERT_NO_FATAL_FAILURE(start("1", "0"));
    ASSERT_EQ(0, owner(CMD_FILL, FILL_A).result);
    memcpy(&word, data.data() + 4096, sizeof(word));

    uct_iov_t iov = {data.data(), data.size(), nullptr, data.size(), 1};
    completion pc, ac;
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_put_zcopy(m_ep, &iov, 1, raddr(0),
                                               m_key.get(), &pc.uct));
    ucs_status_t st;
    while ((st = uct_ep_atomic64_fetch(m_ep, UCT_ATOMIC_OP_ADD, 1, &old,
                                       raddr(4096), m_key.get(), &ac.uct)) ==
           UCS_ERR_NO_RESOURCE) {
        uct_worker_progress(m_s.worker);
    }
    ASSERT_EQ(UCS_INPROGRESS, st);
    ASSERT_TRUE(progress_until(ac.done));
    EXPECT_TRUE(pc.done) << "the atomic completed before the put it followed";
    EXPECT_EQ(word, old) << "the atomic did not see the put";

    std::vector<uint8_t> back(data.size());
    ASSERT_EQ(UCS_OK, get_zcopy(back.data(), back.size(), raddr(0),
                                m_key.get()));
    word += 1;
    memcpy(data.data() + 4096, &word, sizeof(word));
    EXPECT_EQ(-1, first_diff(back.data(), data.data(), data.size()));
}

/* Outside the key: refused at once; memory the owner no longer holds:
 * refused by the owner (a get or an atomic completes with the error). */
TEST_F(cxl_sw_rma, invalid_address_refused)
{
    std::vector<uint8_t> data = random_bytes(65536, 9);
    uct_iov_t iov = {data.data(), data.size(), nullptr, data.size(), 1};
    uint64_t old  = 0;
    unpack_ctx ctx;
    completion c;

    ASSERT_NO_FATAL_FAILURE(start("1", "0"));
    {
        hide_errors hide;
        EXPECT_EQ(UCS_ERR_INVALID_ADDR,
                  uct_ep_put_zcopy(m_ep, &iov, 1, raddr(BUF_LEN - 100),
                                   m_key.get(), &c.uct));
        EXPECT_EQ(UCS_ERR_INVALID_ADDR,
                  uct_ep_get_bcopy(m_ep, unpack_cb, &ctx, 200,
                                   raddr(BUF_LEN - 100), m_key.get(), &c.uct));
        EXPECT_EQ(UCS_ERR_INVALID_ADDR,
                  uct_ep_atomic64_fetch(m_ep, UCT_ATOMIC_OP_ADD, 1, &old,
                                        raddr(4), m_key.get(), &c.uct))
                << "misaligned";
        EXPECT_EQ(UCS_ERR_INVALID_ADDR,
                  uct_ep_atomic64_post(m_ep, UCT_ATOMIC_OP_ADD, 1,
                                       raddr(BUF_LEN), m_key.get()));
    }
    EXPECT_FALSE(c.done);

    /* the owner frees its second buffer: the key in hand is stale */
    ASSERT_EQ(UCS_OK, owner(CMD_FREE2).result);
    uint64_t a2 = m_info[1].address;
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, get_bcopy(&ctx, 200, a2, m_key2.get()));
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, get_zcopy(data.data(), 100, a2 + 64,
                                              m_key2.get()));
    c.reset();
    ucs_status_t st = uct_ep_atomic64_fetch(m_ep, UCT_ATOMIC_OP_ADD, 1, &old,
                                            a2, m_key2.get(), &c.uct);
    ASSERT_EQ(UCS_INPROGRESS, st);
    ASSERT_TRUE(progress_until(c.done));
    EXPECT_EQ(UCS_ERR_INVALID_ADDR, c.status);
    ASSERT_NO_FATAL_FAILURE(put_zcopy(&iov, 1, a2, m_key2.get(),
                                      UCS_ERR_INVALID_ADDR));
    EXPECT_EQ(UCS_OK, flush()) << "the endpoint stays usable";
    EXPECT_EQ(-1, puts_then_owner_checks());
}

/* The owner dies with requests of both kinds in flight: they complete
 * with an error instead of waiting forever, and the flush returns (the
 * endpoint has failed: UCT reports it once to the error handler). */
TEST_F(cxl_sw_rma, owner_gone_is_an_error_not_a_hang)
{
    std::vector<uint8_t> data = random_bytes(65536, 3), back(65536);
    uct_iov_t piov = {data.data(), data.size(), nullptr, data.size(), 1};
    uct_iov_t giov = {back.data(), back.size(), nullptr, back.size(), 1};
    completion pc, gc;
    int status;

    ASSERT_NO_FATAL_FAILURE(start("1", "0"));
    owner(CMD_PAUSE);
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_get_zcopy(m_ep, &giov, 1, raddr(0),
                                               m_key.get(), &gc.uct));
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_put_zcopy(m_ep, &piov, 1, raddr(1 << 20),
                                               m_key.get(), &pc.uct));
    ASSERT_EQ(0, kill(m_owner, SIGKILL));
    ASSERT_EQ(m_owner, waitpid(m_owner, &status, 0));
    m_owner = 0;
    close(m_cmd);
    close(m_ans);

    clk::time_point t0 = clk::now();
    ASSERT_TRUE(progress_until(gc.done, 10)) << "the get still waits";
    ASSERT_TRUE(progress_until(pc.done, 10)) << "the put still waits";
    EXPECT_NE(UCS_OK, gc.status);
    EXPECT_NE(UCS_OK, pc.status);
    EXPECT_NE(UCS_ERR_TIMED_OUT, flush());
    EXPECT_LT(clk::now() - t0, std::chrono::seconds(5));
}

/*
 * UCX_CXL_TEST_VIA_OWNER=y (test only): keys of this host's memory go
 * through the owner too, so that one process runs the cross-host protocol
 * in loopback, as UCX's UCT suite does with it.
 */
TEST_F(cxl_sw_rma, via_owner_knob_in_one_process)
{
    std::string path = new_pool(256ull << 20, CXL_COH_SW);
    std::vector<uint8_t> data = random_bytes(100000, 7), back(100000);
    uct_allocated_memory_t mem;
    std::vector<uint8_t> buf;
    uint64_t old = 0;
    void *p      = nullptr;
    completion c;
    uct_ep_h ep;
    rkey key;
    stack s;

    m_path_sw = path;
    set_env("emulate-nc:" + path, "auto", nullptr);
    setenv("UCX_CXL_TEST_VIA_OWNER", "y", 1);
    ASSERT_EQ(UCS_OK, s.open(dev_name_of(path))) << s.error;
    uct_iface_progress_enable(s.iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    ASSERT_EQ(UCS_OK, s.connect_to(s, &ep)) << s.error;
    ASSERT_EQ(UCS_OK, s.alloc(1 << 20, &mem)) << s.error;
    ASSERT_EQ(UCS_OK, s.pack(mem.memh, &buf));
    ASSERT_EQ(UCS_OK, key.unpack(s.component, buf.data()));
    EXPECT_EQ(UCS_ERR_UNREACHABLE, key.ptr((uintptr_t)mem.address, &p))
            << "a key of this host's memory, but through the owner";

    uct_iov_t iov = {data.data(), data.size(), nullptr, data.size(), 1};
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_put_zcopy(ep, &iov, 1,
                                               (uintptr_t)mem.address + 3,
                                               key.get(), &c.uct));
    EXPECT_NE(0, memcmp((uint8_t*)mem.address + 3, data.data(), 64))
            << "nothing is written before the owner answered";
    clk::time_point deadline = clk::now() + std::chrono::seconds(20);
    while (!c.done && (clk::now() < deadline)) {
        uct_worker_progress(s.worker);
    }
    ASSERT_TRUE(c.done);
    EXPECT_EQ(UCS_OK, c.status);

    c.reset();
    uct_iov_t giov = {back.data(), back.size(), nullptr, back.size(), 1};
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_get_zcopy(ep, &giov, 1,
                                               (uintptr_t)mem.address + 3,
                                               key.get(), &c.uct));
    while (!c.done && (clk::now() < deadline)) {
        uct_worker_progress(s.worker);
    }
    ASSERT_TRUE(c.done);
    EXPECT_EQ(-1, first_diff(back.data(), data.data(), data.size()));

    c.reset();
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_atomic64_fetch(ep, UCT_ATOMIC_OP_ADD, 1,
                                                    &old,
                                                    (uintptr_t)mem.address + 8,
                                                    key.get(), &c.uct));
    while (!c.done && (clk::now() < deadline)) {
        uct_worker_progress(s.worker);
    }
    ASSERT_TRUE(c.done);
    uint64_t expect;
    memcpy(&expect, data.data() + 5, sizeof(expect));
    EXPECT_EQ(expect, old);

    key.release();
    EXPECT_EQ(UCS_OK, uct_mem_free(&mem));
    s.close();
}
