/*
 * RMA of the "cxl" transport: put/get short, bcopy and zcopy (1-4 iov
 * entries with stride and count) at every size class, at unaligned remote
 * offsets and across page boundaries, in loopback and between two
 * interfaces, in hardware- and software-coherent mode.  Data is checked byte
 * for byte, and the bytes around the target range must stay untouched.
 * Operations outside the key range fail with UCS_ERR_INVALID_ADDR and write
 * nothing.
 */
#include "cxl_uct_util.h"

#include <functional>
#include <sstream>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace cxluct;

namespace {

const size_t KiB = 1024, MiB = 1024 * 1024;

const size_t rma_sizes[]   = {1, 7, 8, 63, 64, 65, 4095, 4096, 4097,
                              65536 + 3, MiB + 5};
/* from a page-aligned base; 4093 makes every range of 4+ bytes cross a
 * 4 KiB page boundary */
const size_t rma_offsets[] = {0, 1, 3, 63, 4093};

const size_t TARGET_SIZE = 4 * MiB;
const size_t HEAD        = 4096;  /* target ranges start at base + HEAD + off */
const size_t GUARD       = 256;   /* bytes checked on either side */

uint64_t case_seed(size_t size, size_t off, int op)
{
    return (size * 131 + off) * 17 + (uint64_t)op;
}

/* Local iov layout: the data in `total` bytes spread over `n` entries, the
 * second one strided (count 2) and the last one with count 3 where the
 * sizes allow, with guard gaps between all elements. */
struct iov_layout {
    std::vector<uint8_t>                    buf;
    std::vector<uct_iov_t>                  iov;
    std::vector<std::pair<size_t, size_t>>  elems; /* (offset in buf, length) */
    std::vector<uint8_t>                    is_data;

    iov_layout(size_t total, unsigned n)
    {
        struct plan {
            size_t start, length, stride;
            unsigned count;
        };
        std::vector<size_t> parts(n, total / n);
        std::vector<plan> plans;
        size_t cursor = 16, sum = 0;

        if ((n >= 2) && (parts[1] % 2)) {
            parts[1] -= 1;
        }
        for (unsigned i = 0; i + 1 < n; ++i) {
            sum += parts[i];
        }
        parts[n - 1] = total - sum;

        for (unsigned i = 0; i < n; ++i) {
            plan p;
            p.count = 1;
            if ((n == 1) && (parts[i] >= 4) && (parts[i] % 4 == 0)) {
                p.count = 4;
            } else if ((i == 1) && (parts[i] >= 2) && (parts[i] % 2 == 0)) {
                p.count = 2;
            } else if ((n >= 3) && (i == n - 1) && (parts[i] >= 3) &&
                       (parts[i] % 3 == 0)) {
                p.count = 3;
            }
            p.length = parts[i] / p.count;
            p.stride = (p.count > 1) ? p.length + 16 : p.length;
            p.start  = cursor;
            cursor  += p.count * p.stride + 16;
            plans.push_back(p);
        }

        buf.resize(cursor);
        fill_guard(buf.data(), buf.size(), 0);
        is_data.assign(cursor, 0);
        for (const plan &p : plans) {
            uct_iov_t v;
            v.buffer = buf.data() + p.start;
            v.length = p.length;
            v.memh   = UCT_MEM_HANDLE_NULL;
            v.stride = p.stride;
            v.count  = p.count;
            iov.push_back(v);
            for (unsigned j = 0; j < p.count; ++j) {
                elems.push_back({p.start + j * p.stride, p.length});
                memset(&is_data[p.start + j * p.stride], 1, p.length);
            }
        }
    }

    /* put: the data goes into the elements */
    void scatter(const uint8_t *data)
    {
        size_t pos = 0;
        for (auto &e : elems) {
            memcpy(&buf[e.first], data + pos, e.second);
            pos += e.second;
        }
    }

    /* get: elements hold data, everything else is still the guard */
    std::string check(const uint8_t *data) const
    {
        size_t pos = 0;
        for (auto &e : elems) {
            ssize_t d = first_diff(&buf[e.first], data + pos, e.second);
            if (d >= 0) {
                std::ostringstream os;
                os << "iov element at " << e.first << " differs at byte " << d;
                return os.str();
            }
            pos += e.second;
        }
        for (size_t i = 0; i < buf.size(); ++i) {
            if (!is_data[i] && (buf[i] != guard_byte(i))) {
                std::ostringstream os;
                os << "local byte " << i << " outside the iov elements changed";
                return os.str();
            }
        }
        return "";
    }
};

struct bcopy_arg {
    const uint8_t *src;
    uint8_t       *dst;
    size_t         length;
    unsigned       calls;
};

size_t pack_cb(void *dest, void *arg)
{
    bcopy_arg *a = (bcopy_arg*)arg;

    ++a->calls;
    memcpy(dest, a->src, a->length);
    return a->length;
}

/* packs like pack_cb and records where it was asked to pack */
struct place_arg {
    const uint8_t *src;
    size_t         length;
    void          *dest;
    unsigned       calls;
};

size_t pack_place_cb(void *dest, void *arg)
{
    place_arg *a = (place_arg*)arg;

    ++a->calls;
    a->dest = dest;
    memcpy(dest, a->src, a->length);
    return a->length;
}

void unpack_cb(void *arg, const void *data, size_t length)
{
    bcopy_arg *a = (bcopy_arg*)arg;

    ++a->calls;
    a->length = length;
    memcpy(a->dst, data, length);
}

struct rma_param {
    bool        two_ifaces;
    const char *coherence;
};

std::ostream &operator<<(std::ostream &os, const rma_param &p)
{
    return os << (p.two_ifaces ? "two_ifaces" : "loopback") << "/"
              << p.coherence;
}

std::string rma_param_name(const ::testing::TestParamInfo<rma_param> &info)
{
    return std::string(info.param.two_ifaces ? "two_ifaces" : "loopback") +
           "_" + info.param.coherence;
}

} // namespace

class cxl_rma : public cxl_target_test,
                public ::testing::WithParamInterface<rma_param> {
protected:
    void SetUp() override
    {
        ASSERT_NO_FATAL_FAILURE(cxl_test::SetUp());
        set_coherence(GetParam().coherence);
        ASSERT_NO_FATAL_FAILURE(open_target(GetParam().two_ifaces, TARGET_SIZE));
    }

    void TearDown() override
    {
        close_target();
        cxl_test::TearDown();
    }

    uint64_t raddr(size_t pos) const { return (uintptr_t)m_base + pos; }

    /* the bytes around [pos, pos+size) of the target are still the guard */
    void check_guards(size_t pos, size_t size, const std::string &what)
    {
        size_t lo = (pos >= GUARD) ? pos - GUARD : 0;
        size_t hi = std::min(pos + size + GUARD, (size_t)m_mem.length);

        ASSERT_EQ(-1, guard_mismatch(m_base + lo, pos - lo, lo))
                << what << ": a byte before the target range changed";
        ASSERT_EQ(-1, guard_mismatch(m_base + pos + size, hi - pos - size,
                                     pos + size))
                << what << ": a byte after the target range changed";
    }

    void check_whole_target(const std::string &what)
    {
        ssize_t bad = guard_mismatch(m_base, m_mem.length, 0);
        ASSERT_EQ(-1, bad) << what << ": target byte " << bad << " changed";
    }

    void flush()
    {
        ASSERT_EQ(UCS_OK, uct_ep_flush(m_ep, 0, NULL));
    }

    /* put: op(src, remote_addr, size) writes src to the remote range */
    void test_put(const char *name, unsigned min_size,
                  const std::function<void(const uint8_t*, uint64_t, size_t)> &op,
                  size_t max_size = SIZE_MAX)
    {
        for (size_t size : rma_sizes) {
            if ((size < min_size) || (size > max_size)) {
                continue;
            }
            for (size_t off : rma_offsets) {
                std::ostringstream what;
                what << name << " size " << size << " offset +" << off;
                size_t pos = HEAD + off;
                std::vector<uint8_t> src(size);

                fill_random(src.data(), size, case_seed(size, off, 1));
                op(src.data(), raddr(pos), size);
                ASSERT_FALSE(HasFatalFailure()) << what.str();
                flush();
                ssize_t d = first_diff(m_base + pos, src.data(), size);
                ASSERT_EQ(-1, d) << what.str() << ": byte " << d << " differs";
                check_guards(pos, size, what.str());
                ASSERT_FALSE(HasFatalFailure());
                fill_guard(m_base + pos, size, pos);
            }
        }
        check_whole_target(name);
    }

    /* get: op(dst, remote_addr, size) reads the remote range into dst;
     * check(dst) verifies (returns "" when fine) */
    void test_get(const char *name, unsigned min_size,
                  const std::function<void(const uint8_t *expect, uint64_t,
                                           size_t)> &op)
    {
        for (size_t size : rma_sizes) {
            if (size < min_size) {
                continue;
            }
            for (size_t off : rma_offsets) {
                std::ostringstream what;
                what << name << " size " << size << " offset +" << off;
                size_t pos = HEAD + off;
                std::vector<uint8_t> expect(size);

                fill_random(expect.data(), size, case_seed(size, off, 2));
                memcpy(m_base + pos, expect.data(), size);
                flush();
                op(expect.data(), raddr(pos), size);
                ASSERT_FALSE(HasFatalFailure()) << what.str();
                ASSERT_EQ(-1, first_diff(m_base + pos, expect.data(), size))
                        << what.str() << ": get changed the remote data";
                check_guards(pos, size, what.str());
                ASSERT_FALSE(HasFatalFailure());
                fill_guard(m_base + pos, size, pos);
            }
        }
        check_whole_target(name);
    }

};

TEST_P(cxl_rma, iface_caps)
{
    const uct_iface_attr_t &a = m_s1.iface_attr;
    const uint64_t rma_flags  = UCT_IFACE_FLAG_PUT_SHORT |
                                UCT_IFACE_FLAG_PUT_BCOPY |
                                UCT_IFACE_FLAG_PUT_ZCOPY |
                                UCT_IFACE_FLAG_GET_SHORT |
                                UCT_IFACE_FLAG_GET_BCOPY |
                                UCT_IFACE_FLAG_GET_ZCOPY;

    EXPECT_TRUE(a.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE);
    if (std::string(GetParam().coherence) == "sw") {
        /* everything but get_short, which could not complete inside the
         * call when the memory's owner lives on another host (the tests
         * below are on one host, where get_short still works) */
        EXPECT_EQ(rma_flags & ~UCT_IFACE_FLAG_GET_SHORT, a.cap.flags & rma_flags);
        return;
    }
    EXPECT_EQ(rma_flags, a.cap.flags & rma_flags);
    EXPECT_TRUE(a.cap.flags & UCT_IFACE_FLAG_PUT_SHORT);
    EXPECT_TRUE(a.cap.flags & UCT_IFACE_FLAG_PUT_BCOPY);
    EXPECT_TRUE(a.cap.flags & UCT_IFACE_FLAG_PUT_ZCOPY);
    EXPECT_TRUE(a.cap.flags & UCT_IFACE_FLAG_GET_SHORT);
    EXPECT_TRUE(a.cap.flags & UCT_IFACE_FLAG_GET_BCOPY);
    EXPECT_TRUE(a.cap.flags & UCT_IFACE_FLAG_GET_ZCOPY);
    /* what the tests below use must be within the limits */
    EXPECT_GE(a.cap.put.max_short, MiB + 5);
    /* put_bcopy is bounded: memory outside the pool needs a pack buffer */
    EXPECT_GE(a.cap.put.max_bcopy, 64u * 1024 + 3);
    EXPECT_LT(a.cap.put.max_bcopy, SIZE_MAX);
    EXPECT_GE(a.cap.put.max_zcopy, MiB + 5);
    EXPECT_GE(a.cap.get.max_short, MiB + 5);
    EXPECT_GE(a.cap.get.max_bcopy, MiB + 5);
    EXPECT_GE(a.cap.get.max_zcopy, MiB + 5);
    EXPECT_GE(a.cap.put.max_iov, 4u);
    EXPECT_GE(a.cap.get.max_iov, 4u);
}

TEST_P(cxl_rma, put_short)
{
    test_put("put_short", 1, [&](const uint8_t *src, uint64_t ra, size_t size) {
        ASSERT_EQ(UCS_OK, uct_ep_put_short(m_ep, src, (unsigned)size, ra,
                                           m_key.get()));
    });
}

TEST_P(cxl_rma, put_bcopy)
{
    test_put("put_bcopy", 1, [&](const uint8_t *src, uint64_t ra, size_t size) {
        bcopy_arg arg = {src, nullptr, size, 0};
        ASSERT_EQ((ssize_t)size, uct_ep_put_bcopy(m_ep, pack_cb, &arg, ra,
                                                  m_key.get()));
        ASSERT_EQ(1u, arg.calls);
    }, m_s1.iface_attr.cap.put.max_bcopy);
}

/*
 * put_bcopy packs straight into the pool, also when the key has less room
 * than max_bcopy after remote_addr (every range of the TARGET_SIZE target
 * has): no bounce buffer and no second copy.  The pool is mapped once per
 * process, so the destination is the remote address itself.
 */
TEST_P(cxl_rma, put_bcopy_packs_in_place)
{
    test_put("put_bcopy in place", 1,
             [&](const uint8_t *src, uint64_t ra, size_t size) {
        place_arg arg = {src, size, nullptr, 0};
        ASSERT_EQ((ssize_t)size, uct_ep_put_bcopy(m_ep, pack_place_cb, &arg, ra,
                                                  m_key.get()));
        ASSERT_EQ(1u, arg.calls);
        ASSERT_EQ((void*)(uintptr_t)ra, arg.dest)
                << "put_bcopy of " << size << " bytes packed elsewhere than "
                << "its destination";
    }, m_s1.iface_attr.cap.put.max_bcopy);
}

TEST_P(cxl_rma, put_zcopy)
{
    for (unsigned n = 1; n <= 4; ++n) {
        std::string name = "put_zcopy iovcnt " + std::to_string(n);
        test_put(name.c_str(), 2 * n,
                 [&](const uint8_t *src, uint64_t ra, size_t size) {
            iov_layout l(size, n);
            l.scatter(src);
            ASSERT_EQ(UCS_OK, uct_ep_put_zcopy(m_ep, l.iov.data(), l.iov.size(),
                                               ra, m_key.get(), NULL));
        });
        ASSERT_FALSE(HasFatalFailure());
    }
}

TEST_P(cxl_rma, get_short)
{
    test_get("get_short", 1, [&](const uint8_t *expect, uint64_t ra, size_t size) {
        std::vector<uint8_t> dst(size + 2 * GUARD);
        fill_guard(dst.data(), dst.size(), 0);
        ASSERT_EQ(UCS_OK, uct_ep_get_short(m_ep, dst.data() + GUARD,
                                           (unsigned)size, ra, m_key.get()));
        ASSERT_EQ(-1, first_diff(dst.data() + GUARD, expect, size));
        ASSERT_EQ(-1, guard_mismatch(dst.data(), GUARD, 0));
        ASSERT_EQ(-1, guard_mismatch(dst.data() + GUARD + size, GUARD,
                                     GUARD + size));
    });
}

TEST_P(cxl_rma, get_bcopy)
{
    test_get("get_bcopy", 1, [&](const uint8_t *expect, uint64_t ra, size_t size) {
        std::vector<uint8_t> dst(size + 2 * GUARD);
        fill_guard(dst.data(), dst.size(), 0);
        bcopy_arg arg = {nullptr, dst.data() + GUARD, 0, 0};
        ucs_status_t status = uct_ep_get_bcopy(m_ep, unpack_cb, &arg, size, ra,
                                               m_key.get(), NULL);
        ASSERT_EQ(UCS_OK, status);
        ASSERT_EQ(1u, arg.calls);
        ASSERT_EQ(size, arg.length);
        ASSERT_EQ(-1, first_diff(dst.data() + GUARD, expect, size));
        ASSERT_EQ(-1, guard_mismatch(dst.data(), GUARD, 0));
        ASSERT_EQ(-1, guard_mismatch(dst.data() + GUARD + size, GUARD,
                                     GUARD + size));
    });
}

TEST_P(cxl_rma, get_zcopy)
{
    for (unsigned n = 1; n <= 4; ++n) {
        std::string name = "get_zcopy iovcnt " + std::to_string(n);
        test_get(name.c_str(), 2 * n,
                 [&](const uint8_t *expect, uint64_t ra, size_t size) {
            iov_layout l(size, n);
            ASSERT_EQ(UCS_OK, uct_ep_get_zcopy(m_ep, l.iov.data(), l.iov.size(),
                                               ra, m_key.get(), NULL));
            ASSERT_EQ("", l.check(expect));
        });
        ASSERT_FALSE(HasFatalFailure());
    }
}

/*
 * A key for an 8 KiB sub-range; operations that reach outside it fail with
 * UCS_ERR_INVALID_ADDR and neither write the target nor the local buffer.
 */
class cxl_rma_bounds : public cxl_rma {
protected:
    void SetUp() override
    {
        cxl_rma::SetUp();
        ASSERT_FALSE(HasFatalFailure());
        stack &t = target();
        std::vector<uint8_t> buf;
        ASSERT_EQ(UCS_OK, uct_md_mem_reg(t.md, m_base + SUB_OFF, SUB_LEN,
                                         UCT_MD_MEM_ACCESS_ALL, &m_sub_memh));
        ASSERT_EQ(UCS_OK, t.pack(m_sub_memh, &buf));
        ASSERT_EQ(UCS_OK, m_sub_key.unpack(m_s1.component, buf.data()));
    }

    void TearDown() override
    {
        m_sub_key.release();
        if (m_sub_memh != nullptr) {
            EXPECT_EQ(UCS_OK, uct_md_mem_dereg(target().md, m_sub_memh));
        }
        cxl_rma::TearDown();
    }

    uint64_t lo() const { return raddr(SUB_OFF); }
    uint64_t hi() const { return raddr(SUB_OFF + SUB_LEN); }

    /* put_bcopy of `length` bytes at `ra` in a child process: whatever the
     * transport does (error, success, abort), the parent sees the pool. */
    int put_bcopy_in_child(uint64_t ra, size_t length, ssize_t *result)
    {
        int fds[2];
        EXPECT_EQ(0, pipe(fds));
        pid_t pid = cxltest::fork_child([&]() {
            std::vector<uint8_t> src(length, 0x3c);
            bcopy_arg arg = {src.data(), nullptr, length, 0};
            close(fds[0]);
            ssize_t r = uct_ep_put_bcopy(m_ep, pack_cb, &arg, ra,
                                         m_sub_key.get());
            if (write(fds[1], &r, sizeof(r)) != sizeof(r)) {
                return 2;
            }
            return 0;
        });
        close(fds[1]);
        *result = 0x7fffffff;
        ssize_t n = read(fds[0], result, sizeof(*result));
        close(fds[0]);
        int rc = cxltest::wait_child(pid);
        return (n == sizeof(*result)) ? rc : (rc ? rc : -1);
    }

    hide_errors         m_hide; /* the errors are the point here */
    static const size_t SUB_OFF = 64 * KiB;
    static const size_t SUB_LEN = 8 * KiB;
    uct_mem_h           m_sub_memh = nullptr;
    rkey                m_sub_key;
};

TEST_P(cxl_rma_bounds, outside_key_invalid_addr)
{
    struct range {
        int64_t  from_lo; /* start, relative to lo */
        size_t   length;
    };
    const range ranges[] = {
        {-1, 1}, {-1, 2}, {-64, 128}, {-4096, 8}, {-(int64_t)SUB_OFF, 8},
        {(int64_t)SUB_LEN - 3, 4}, {(int64_t)SUB_LEN - 1, 2},
        {(int64_t)SUB_LEN, 1}, {(int64_t)SUB_LEN + 1, 8},
        {(int64_t)SUB_LEN + 4096, 64}, {0, SUB_LEN + 1},
        {1, SUB_LEN}, {-1, SUB_LEN + 2}, {0, 1 * MiB},
    };
    const uint64_t wild[] = {0, 1, UINT64_MAX - 7, 1ull << 63};

    std::vector<std::pair<uint64_t, size_t>> cases;
    for (const range &r : ranges) {
        cases.push_back({lo() + r.from_lo, r.length});
    }
    for (uint64_t w : wild) {
        cases.push_back({w, 8});
    }

    for (auto &c : cases) {
        uint64_t ra = c.first;
        size_t size = c.second;
        std::ostringstream what;
        what << "0x" << std::hex << ra << "+0x" << size << " (key 0x" << lo()
             << "..0x" << hi() << ")";
        std::vector<uint8_t> src(size, 0xc3), dst(size + 2 * GUARD);
        fill_guard(dst.data(), dst.size(), 0);

        EXPECT_EQ(UCS_ERR_INVALID_ADDR,
                  uct_ep_put_short(m_ep, src.data(), (unsigned)size, ra,
                                   m_sub_key.get()))
                << "put_short " << what.str();

        iov_layout l(size, 1);
        l.scatter(src.data());
        EXPECT_EQ(UCS_ERR_INVALID_ADDR,
                  uct_ep_put_zcopy(m_ep, l.iov.data(), 1, ra, m_sub_key.get(),
                                   NULL))
                << "put_zcopy " << what.str();
        if (size >= 4) {
            iov_layout l2(size, 2);
            l2.scatter(src.data());
            EXPECT_EQ(UCS_ERR_INVALID_ADDR,
                      uct_ep_put_zcopy(m_ep, l2.iov.data(), 2, ra,
                                       m_sub_key.get(), NULL))
                    << "put_zcopy/2 " << what.str();
        }

        /* put_bcopy learns the length only from packing: here only ranges
         * whose start is already outside (see the dedicated tests below) */
        if ((ra < lo()) || (ra > hi())) {
            bcopy_arg arg = {src.data(), nullptr, size, 0};
            EXPECT_EQ((ssize_t)UCS_ERR_INVALID_ADDR,
                      uct_ep_put_bcopy(m_ep, pack_cb, &arg, ra, m_sub_key.get()))
                    << "put_bcopy " << what.str();
            EXPECT_EQ(0u, arg.calls) << "put_bcopy packed " << what.str();
        }

        EXPECT_EQ(UCS_ERR_INVALID_ADDR,
                  uct_ep_get_short(m_ep, dst.data() + GUARD, (unsigned)size, ra,
                                   m_sub_key.get()))
                << "get_short " << what.str();
        bcopy_arg garg = {nullptr, dst.data() + GUARD, 0, 0};
        EXPECT_EQ(UCS_ERR_INVALID_ADDR,
                  uct_ep_get_bcopy(m_ep, unpack_cb, &garg, size, ra,
                                   m_sub_key.get(), NULL))
                << "get_bcopy " << what.str();
        EXPECT_EQ(0u, garg.calls) << "get_bcopy unpacked " << what.str();
        iov_layout gl(size, 1);
        EXPECT_EQ(UCS_ERR_INVALID_ADDR,
                  uct_ep_get_zcopy(m_ep, gl.iov.data(), 1, ra, m_sub_key.get(),
                                   NULL))
                << "get_zcopy " << what.str();
        for (size_t i = 0; i < gl.buf.size(); ++i) {
            ASSERT_EQ(guard_byte(i), gl.buf[i])
                    << "get_zcopy wrote the local buffer " << what.str();
        }
        ASSERT_EQ(-1, guard_mismatch(dst.data(), dst.size(), 0))
                << "a failed get wrote the local buffer " << what.str();

        flush();
        check_whole_target(what.str());
        ASSERT_FALSE(HasFatalFailure());
    }

    /* the edges themselves work */
    uint8_t one = 0x42;
    ASSERT_EQ(UCS_OK, uct_ep_put_short(m_ep, &one, 1, lo(), m_sub_key.get()));
    ASSERT_EQ(UCS_OK, uct_ep_put_short(m_ep, &one, 1, hi() - 1, m_sub_key.get()));
    flush();
    EXPECT_EQ(0x42, m_base[SUB_OFF]);
    EXPECT_EQ(0x42, m_base[SUB_OFF + SUB_LEN - 1]);
}

/*
 * put_bcopy at the first address past the key: the start is outside the
 * key range, so the transport must fail before calling the pack callback.
 * See the report: the start is checked with length 0, which accepts
 * remote_addr == end of key; pack_cb then writes past the key and
 * put_bcopy calls ucs_fatal() (the process aborts).  Run in a child.
 */
TEST_P(cxl_rma_bounds, put_bcopy_at_key_end)
{
    ssize_t result;
    int rc = put_bcopy_in_child(hi(), 8, &result);

    EXPECT_EQ(0, rc) << "the child doing put_bcopy died (exit/signal code " << rc
                     << ")";
    EXPECT_EQ((ssize_t)UCS_ERR_INVALID_ADDR, result);
    check_whole_target("put_bcopy at the key end");
}

/*
 * put_bcopy that fills the 8 KiB key to its last byte, and one of the last
 * 4 bytes: both pack in place (the key has far less room than max_bcopy).
 */
TEST_P(cxl_rma_bounds, put_bcopy_to_key_end_in_place)
{
    const size_t lengths[] = {SUB_LEN, 4};

    for (size_t length : lengths) {
        size_t pos = SUB_OFF + SUB_LEN - length;
        std::vector<uint8_t> src(length);
        fill_random(src.data(), length, length);
        place_arg arg = {src.data(), length, nullptr, 0};

        ASSERT_EQ((ssize_t)length, uct_ep_put_bcopy(m_ep, pack_place_cb, &arg,
                                                    raddr(pos),
                                                    m_sub_key.get()));
        EXPECT_EQ(m_base + pos, arg.dest) << "length " << length;
        flush();
        ASSERT_EQ(-1, first_diff(m_base + pos, src.data(), length))
                << "length " << length;
        fill_guard(m_base + pos, length, pos);
        check_whole_target("put_bcopy to the key end");
        ASSERT_FALSE(HasFatalFailure());
    }
}

/*
 * put_bcopy that starts inside the key and packs past its end: a caller
 * bug.  The transport packs in place, so the 12 bytes past the key are
 * already written when it learns the length (the key is a sub-range of the
 * test's own target, so they are the test's memory).  Expected: the bug is
 * reported with UCS_ERR_INVALID_ADDR, and nothing outside the packed range
 * changes.  In a child, so that an abort shows as its exit code.
 */
TEST_P(cxl_rma_bounds, put_bcopy_overrun_reported)
{
    const size_t length = 16;
    const size_t pos    = SUB_OFF + SUB_LEN - 4;
    ssize_t result;
    int rc = put_bcopy_in_child(hi() - 4, length, &result);

    EXPECT_EQ(0, rc) << "the child doing put_bcopy died (exit/signal code " << rc
                     << ")";
    EXPECT_EQ((ssize_t)UCS_ERR_INVALID_ADDR, result);
    EXPECT_EQ(-1, guard_mismatch(m_base, pos, 0))
            << "a byte before the packed range changed";
    EXPECT_EQ(-1, guard_mismatch(m_base + pos + length,
                                 m_mem.length - pos - length, pos + length))
            << "a byte after the packed range changed";
}

INSTANTIATE_TEST_SUITE_P(cxl, cxl_rma,
                         ::testing::Values(rma_param{false, "hw"},
                                           rma_param{true, "hw"},
                                           rma_param{false, "sw"},
                                           rma_param{true, "sw"}),
                         rma_param_name);

INSTANTIATE_TEST_SUITE_P(cxl, cxl_rma_bounds,
                         ::testing::Values(rma_param{false, "hw"},
                                           rma_param{true, "hw"}),
                         rma_param_name);
