/*
 * Atomics of the "cxl" transport at both widths: post add/and/or/xor, fetch
 * add/and/or/xor/swap, cswap (success and failure), against values computed
 * here.  Debian's libuct (GCC 12) miscompiles the sm fetch-and/or/xor; the
 * module must not.  Misaligned and out-of-key addresses fail with
 * UCS_ERR_INVALID_ADDR and change nothing.
 */
#include "cxl_uct_util.h"

#include <random>
#include <sstream>
#include <string.h>

using namespace cxluct;

namespace {

const char *op_name(uct_atomic_op_t op)
{
    switch (op) {
    case UCT_ATOMIC_OP_ADD:   return "add";
    case UCT_ATOMIC_OP_AND:   return "and";
    case UCT_ATOMIC_OP_OR:    return "or";
    case UCT_ATOMIC_OP_XOR:   return "xor";
    case UCT_ATOMIC_OP_SWAP:  return "swap";
    case UCT_ATOMIC_OP_CSWAP: return "cswap";
    default:                  return "?";
    }
}

template <typename T> T apply(uct_atomic_op_t op, T old, T value)
{
    switch (op) {
    case UCT_ATOMIC_OP_ADD:  return (T)(old + value);
    case UCT_ATOMIC_OP_AND:  return (T)(old & value);
    case UCT_ATOMIC_OP_OR:   return (T)(old | value);
    case UCT_ATOMIC_OP_XOR:  return (T)(old ^ value);
    case UCT_ATOMIC_OP_SWAP: return value;
    default:                 abort();
    }
}

const uct_atomic_op_t post_ops[]  = {UCT_ATOMIC_OP_ADD, UCT_ATOMIC_OP_AND,
                                     UCT_ATOMIC_OP_OR, UCT_ATOMIC_OP_XOR};
const uct_atomic_op_t fetch_ops[] = {UCT_ATOMIC_OP_ADD, UCT_ATOMIC_OP_AND,
                                     UCT_ATOMIC_OP_OR, UCT_ATOMIC_OP_XOR,
                                     UCT_ATOMIC_OP_SWAP};

/* (initial, operand): carries across halves, all-ones, zeros, mixed bits */
const std::pair<uint64_t, uint64_t> values[] = {
    {0xf0e1d2c3b4a59687ull, 0x8f1e2d3c4b5a6979ull},
    {0x00000000ffffffffull, 0x0000000000000001ull},
    {0xffffffffffffffffull, 0x0000000000000001ull},
    {0x0000000000000000ull, 0x0000000000000000ull},
    {0x5555aaaa5555aaaaull, 0xffff0000ffff0000ull},
    {0x8000000080000000ull, 0x8000000080000000ull},
};

std::string amo_param_name(const ::testing::TestParamInfo<bool> &info)
{
    return info.param ? "two_ifaces" : "loopback";
}

} // namespace

class cxl_amo : public cxl_target_test,
                public ::testing::WithParamInterface<bool> {
protected:
    void SetUp() override
    {
        ASSERT_NO_FATAL_FAILURE(cxl_test::SetUp());
        ASSERT_NO_FATAL_FAILURE(open_target(GetParam(), 64 * 1024));
    }

    void TearDown() override
    {
        close_target();
        cxl_test::TearDown();
    }

    /* the word under test lives at WORD; everything else is the guard */
    static const size_t WORD = 4096 + 64;

    uint64_t raddr(size_t pos) const { return (uintptr_t)m_base + pos; }

    template <typename T> void set(T v)
    {
        memcpy(m_base + WORD, &v, sizeof(v));
    }

    template <typename T> T get()
    {
        T v;
        memcpy(&v, m_base + WORD, sizeof(v));
        return v;
    }

    void check_neighbours(size_t width, const std::string &what)
    {
        ASSERT_EQ(-1, guard_mismatch(m_base, WORD, 0))
                << what << ": a byte before the word changed";
        ASSERT_EQ(-1, guard_mismatch(m_base + WORD + width,
                                     m_mem.length - WORD - width, WORD + width))
                << what << ": a byte after the word changed";
    }

    void restore(size_t width) { fill_guard(m_base + WORD, width, WORD); }

    ucs_status_t post(uct_atomic_op_t op, uint32_t v, uint64_t ra, uct_rkey_t k)
    {
        return uct_ep_atomic32_post(m_ep, op, v, ra, k);
    }
    ucs_status_t post(uct_atomic_op_t op, uint64_t v, uint64_t ra, uct_rkey_t k)
    {
        return uct_ep_atomic64_post(m_ep, op, v, ra, k);
    }
    ucs_status_t fetch(uct_atomic_op_t op, uint32_t v, uint32_t *r, uint64_t ra,
                       uct_rkey_t k)
    {
        return uct_ep_atomic32_fetch(m_ep, op, v, r, ra, k, NULL);
    }
    ucs_status_t fetch(uct_atomic_op_t op, uint64_t v, uint64_t *r, uint64_t ra,
                       uct_rkey_t k)
    {
        return uct_ep_atomic64_fetch(m_ep, op, v, r, ra, k, NULL);
    }
    ucs_status_t cswap(uint32_t c, uint32_t s, uint32_t *r, uint64_t ra,
                       uct_rkey_t k)
    {
        return uct_ep_atomic_cswap32(m_ep, c, s, ra, k, r, NULL);
    }
    ucs_status_t cswap(uint64_t c, uint64_t s, uint64_t *r, uint64_t ra,
                       uct_rkey_t k)
    {
        return uct_ep_atomic_cswap64(m_ep, c, s, ra, k, r, NULL);
    }

    template <typename T> void test_all_ops()
    {
        const unsigned bits = 8 * sizeof(T);

        for (auto &vp : values) {
            const T init = (T)vp.first, operand = (T)vp.second;
            std::ostringstream vs;
            vs << bits << "-bit init 0x" << std::hex << (uint64_t)init
               << " operand 0x" << (uint64_t)operand;

            for (uct_atomic_op_t op : post_ops) {
                std::string what = std::string("post ") + op_name(op) + " " +
                                   vs.str();
                set<T>(init);
                ASSERT_EQ(UCS_OK, post(op, operand, raddr(WORD), m_key.get()))
                        << what;
                ASSERT_EQ(UCS_OK, uct_ep_flush(m_ep, 0, NULL));
                EXPECT_EQ(apply<T>(op, init, operand), get<T>()) << what;
                check_neighbours(sizeof(T), what);
                restore(sizeof(T));
            }

            for (uct_atomic_op_t op : fetch_ops) {
                std::string what = std::string("fetch ") + op_name(op) + " " +
                                   vs.str();
                T result = (T)0x1234567890abcdefull;
                set<T>(init);
                ASSERT_EQ(UCS_OK, fetch(op, operand, &result, raddr(WORD),
                                        m_key.get()))
                        << what;
                ASSERT_EQ(UCS_OK, uct_ep_flush(m_ep, 0, NULL));
                EXPECT_EQ(init, result) << what << ": fetched value";
                EXPECT_EQ(apply<T>(op, init, operand), get<T>())
                        << what << ": memory";
                check_neighbours(sizeof(T), what);
                restore(sizeof(T));
            }

            /* cswap: success, and failures that differ in the low bit, the
             * top bit, and (64-bit) only in the upper half */
            {
                std::string what = "cswap success " + vs.str();
                T result = (T)0x1234567890abcdefull;
                set<T>(init);
                ASSERT_EQ(UCS_OK, cswap(init, operand, &result, raddr(WORD),
                                        m_key.get()));
                EXPECT_EQ(init, result) << what;
                EXPECT_EQ(operand, get<T>()) << what;
                check_neighbours(sizeof(T), what);
                restore(sizeof(T));
            }
            std::vector<T> wrong = {(T)(init ^ 1), (T)(init ^ ((T)1 << (bits - 1)))};
            if (bits == 64) {
                wrong.push_back((T)(init ^ ((T)1 << (bits / 2 + 3))));
            }
            for (T compare : wrong) {
                std::ostringstream what;
                what << "cswap failure compare 0x" << std::hex
                     << (uint64_t)compare << " " << vs.str();
                T result = (T)0x1234567890abcdefull;
                set<T>(init);
                ASSERT_EQ(UCS_OK, cswap(compare, operand, &result, raddr(WORD),
                                        m_key.get()));
                EXPECT_EQ(init, result) << what.str();
                EXPECT_EQ(init, get<T>()) << what.str() << ": memory changed";
                check_neighbours(sizeof(T), what.str());
                restore(sizeof(T));
            }
        }
    }

    /* a random chain of operations against a model */
    template <typename T> void test_chain(uint64_t seed)
    {
        std::mt19937_64 rng(seed);
        T model = (T)rng();

        set<T>(model);
        for (int i = 0; i < 5000; ++i) {
            T operand = (T)rng(), result = 0;
            unsigned kind = rng() % 3;
            uct_atomic_op_t op = fetch_ops[rng() % 5];

            if ((kind == 0) && (op != UCT_ATOMIC_OP_SWAP)) {
                ASSERT_EQ(UCS_OK, post(op, operand, raddr(WORD), m_key.get()));
                model = apply<T>(op, model, operand);
            } else if (kind <= 1) {
                ASSERT_EQ(UCS_OK, fetch(op, operand, &result, raddr(WORD),
                                        m_key.get()));
                ASSERT_EQ(model, result) << "step " << i << " " << op_name(op);
                model = apply<T>(op, model, operand);
            } else {
                T compare = (rng() % 2) ? model : (T)(model ^ operand ^ 1);
                ASSERT_EQ(UCS_OK, cswap(compare, operand, &result, raddr(WORD),
                                        m_key.get()));
                ASSERT_EQ(model, result) << "step " << i << " cswap";
                if (compare == model) {
                    model = operand;
                }
            }
            ASSERT_EQ(model, get<T>()) << "step " << i;
        }
        check_neighbours(sizeof(T), "chain");
        restore(sizeof(T));
    }

    /* every operation at ra fails with UCS_ERR_INVALID_ADDR, changes nothing */
    template <typename T> void expect_invalid(uint64_t ra, uct_rkey_t key,
                                              const std::string &what)
    {
        T result = (T)0x1234567890abcdefull;

        for (uct_atomic_op_t op : post_ops) {
            EXPECT_EQ(UCS_ERR_INVALID_ADDR, post(op, (T)1, ra, key))
                    << what << " post " << op_name(op);
        }
        for (uct_atomic_op_t op : fetch_ops) {
            EXPECT_EQ(UCS_ERR_INVALID_ADDR, fetch(op, (T)1, &result, ra, key))
                    << what << " fetch " << op_name(op);
        }
        EXPECT_EQ(UCS_ERR_INVALID_ADDR, cswap((T)0, (T)1, &result, ra, key))
                << what << " cswap";
        EXPECT_EQ((T)0x1234567890abcdefull, result)
                << what << ": a failed atomic wrote its result";
        ssize_t bad = guard_mismatch(m_base, m_mem.length, 0);
        ASSERT_EQ(-1, bad) << what << ": byte " << bad << " changed";
    }

};

TEST_P(cxl_amo, ops32)
{
    test_all_ops<uint32_t>();
}

TEST_P(cxl_amo, ops64)
{
    test_all_ops<uint64_t>();
}

TEST_P(cxl_amo, random_chain32)
{
    test_chain<uint32_t>(32);
}

TEST_P(cxl_amo, random_chain64)
{
    test_chain<uint64_t>(64);
}

TEST_P(cxl_amo, misaligned_invalid_addr)
{
    hide_errors hide;

    for (size_t mis : {1, 2, 3}) {
        expect_invalid<uint32_t>(raddr(WORD + mis), m_key.get(),
                                 "32-bit +" + std::to_string(mis));
        ASSERT_FALSE(HasFatalFailure());
    }
    for (size_t mis : {1, 2, 4, 6, 7}) {
        expect_invalid<uint64_t>(raddr(WORD + mis), m_key.get(),
                                 "64-bit +" + std::to_string(mis));
        ASSERT_FALSE(HasFatalFailure());
    }
}

TEST_P(cxl_amo, outside_key_invalid_addr)
{
    stack &t = GetParam() ? m_s2 : m_s1;
    std::vector<uint8_t> buf;
    uct_mem_h memh;
    rkey sub;
    hide_errors hide;

    /* a key for the 64 bytes at WORD */
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(t.md, m_base + WORD, 64,
                                     UCT_MD_MEM_ACCESS_ALL, &memh));
    ASSERT_EQ(UCS_OK, t.pack(memh, &buf));
    ASSERT_EQ(UCS_OK, sub.unpack(m_s1.component, buf.data()));

    const uint64_t lo = raddr(WORD), hi = raddr(WORD + 64);
    for (uint64_t ra : {lo - 8, lo - 4, hi, hi + 8, hi + 4096, (uint64_t)0}) {
        std::ostringstream what;
        what << "0x" << std::hex << ra << " (key 0x" << lo << "..0x" << hi << ")";
        expect_invalid<uint32_t>(ra, sub.get(), "32-bit " + what.str());
        expect_invalid<uint64_t>(ra, sub.get(), "64-bit " + what.str());
        ASSERT_FALSE(HasFatalFailure());
    }
    /* 64 bits at hi - 4: aligned for 32, straddles the end for 64 */
    expect_invalid<uint64_t>(hi - 4, sub.get(), "64-bit straddling the key end");

    /* the last words inside work */
    uint64_t r64;
    uint32_t r32;
    ASSERT_EQ(UCS_OK, uct_ep_atomic64_fetch(m_ep, UCT_ATOMIC_OP_SWAP, 7, &r64,
                                            hi - 8, sub.get(), NULL));
    ASSERT_EQ(UCS_OK, uct_ep_atomic32_fetch(m_ep, UCT_ATOMIC_OP_SWAP, 9, &r32,
                                            hi - 4, sub.get(), NULL));
    uint32_t last[2];
    memcpy(last, m_base + WORD + 56, sizeof(last));
    EXPECT_EQ(7u, last[0]); /* little endian: low half of the 64-bit swap */
    EXPECT_EQ(9u, last[1]);

    sub.release();
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(t.md, memh));
}

INSTANTIATE_TEST_SUITE_P(cxl, cxl_amo, ::testing::Values(false, true),
                         amo_param_name);
