/*
 * Interface of the "cxl" transport: capabilities by coherence mode,
 * addresses (the same device address in every process on one pool),
 * reachability by pool identity, flush and fence, and visibility of data
 * written by another process after its flush.
 */
#include "cxl_uct_util.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

using namespace cxluct;

namespace {

const uint64_t all_ops  = UCS_BIT(UCT_ATOMIC_OP_ADD) | UCS_BIT(UCT_ATOMIC_OP_AND) |
                          UCS_BIT(UCT_ATOMIC_OP_OR) | UCS_BIT(UCT_ATOMIC_OP_XOR);
const uint64_t all_fops = all_ops | UCS_BIT(UCT_ATOMIC_OP_SWAP) |
                          UCS_BIT(UCT_ATOMIC_OP_CSWAP);

} // namespace

class cxl_iface : public cxl_test {
};

TEST_F(cxl_iface, atomics_advertised_with_hw_coherence)
{
    stack s;

    set_coherence("hw");
    open_stack(s);
    ASSERT_FALSE(HasFatalFailure());
    const uct_iface_attr_t &a = s.iface_attr;
    EXPECT_TRUE(a.cap.flags & UCT_IFACE_FLAG_ATOMIC_CPU);
    EXPECT_EQ(all_ops, a.cap.atomic32.op_flags & all_ops);
    EXPECT_EQ(all_ops, a.cap.atomic64.op_flags & all_ops);
    EXPECT_EQ(all_fops, a.cap.atomic32.fop_flags & all_fops);
    EXPECT_EQ(all_fops, a.cap.atomic64.fop_flags & all_fops);
}

/*
 * sw mode: RMA and atomics too, through the memory's owner when it lives on
 * another host (CPU atomics of the owner's host); no get_short, which
 * could not complete inside the call when it needs the owner.
 */
TEST_F(cxl_iface, rma_and_atomics_with_sw_coherence)
{
    stack s;

    set_coherence("sw");
    open_stack(s);
    ASSERT_FALSE(HasFatalFailure());
    const uct_iface_attr_t &a = s.iface_attr;
    EXPECT_TRUE(a.cap.flags & UCT_IFACE_FLAG_ATOMIC_CPU);
    EXPECT_FALSE(a.cap.flags & UCT_IFACE_FLAG_ATOMIC_DEVICE);
    EXPECT_EQ(all_ops, a.cap.atomic32.op_flags & all_ops);
    EXPECT_EQ(all_ops, a.cap.atomic64.op_flags & all_ops);
    EXPECT_EQ(all_fops, a.cap.atomic32.fop_flags & all_fops);
    EXPECT_EQ(all_fops, a.cap.atomic64.fop_flags & all_fops);
    EXPECT_TRUE(a.cap.flags & UCT_IFACE_FLAG_PUT_SHORT);
    EXPECT_TRUE(a.cap.flags & UCT_IFACE_FLAG_PUT_BCOPY);
    EXPECT_TRUE(a.cap.flags & UCT_IFACE_FLAG_PUT_ZCOPY);
    EXPECT_TRUE(a.cap.flags & UCT_IFACE_FLAG_GET_BCOPY);
    EXPECT_TRUE(a.cap.flags & UCT_IFACE_FLAG_GET_ZCOPY);
    EXPECT_FALSE(a.cap.flags & UCT_IFACE_FLAG_GET_SHORT);
    /* active messages, pending and peer failure stay */
    EXPECT_TRUE(a.cap.flags & UCT_IFACE_FLAG_AM_SHORT);
    EXPECT_TRUE(a.cap.flags & UCT_IFACE_FLAG_AM_BCOPY);
    EXPECT_TRUE(a.cap.flags & UCT_IFACE_FLAG_PENDING);
    EXPECT_TRUE(a.cap.flags & UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE);
}

TEST_F(cxl_iface, auto_coherence_follows_the_pool)
{
    /* 8 host partitions: arenas large enough for a receive block */
    std::string sw_pool = new_pool(128ull << 20, CXL_COH_SW);

    set_coherence("auto");
    {
        stack s;
        open_stack(s, m_path); /* created hardware-coherent */
        ASSERT_FALSE(HasFatalFailure());
        EXPECT_TRUE(s.iface_attr.cap.flags & UCT_IFACE_FLAG_GET_SHORT);
    }
    use_pools(sw_pool);
    /* a sw pool has several host partitions: say which one this host is */
    struct env_guard {
        env_guard() { setenv("UCX_CXL_HOST_INDEX", "0", 1); }
        ~env_guard() { unsetenv("UCX_CXL_HOST_INDEX"); }
    } host_index;
    {
        stack s;
        open_stack(s, sw_pool);
        ASSERT_FALSE(HasFatalFailure());
        EXPECT_FALSE(s.iface_attr.cap.flags & UCT_IFACE_FLAG_GET_SHORT)
                << "get_short is hw-only";
    }
}

TEST_F(cxl_iface, address_lengths)
{
    stack s1, s2;

    open_stack(s1);
    open_stack(s2);
    ASSERT_FALSE(HasFatalFailure());
    EXPECT_EQ(16u, s1.iface_attr.device_addr_len);
    EXPECT_GT(s1.iface_attr.iface_addr_len, 0u);
    EXPECT_EQ(0u, s1.iface_attr.ep_addr_len);
    EXPECT_EQ(s1.dev_addr, s2.dev_addr) << "one pool, one device address";
    EXPECT_NE(s1.iface_addr, s2.iface_addr) << "interfaces must differ";

    /* the address is stable */
    std::vector<uint8_t> again(s1.iface_attr.device_addr_len);
    ASSERT_EQ(UCS_OK, uct_iface_get_device_address(
                              s1.iface, (uct_device_addr_t*)again.data()));
    EXPECT_EQ(s1.dev_addr, again);
}

TEST_F(cxl_iface, device_address_same_in_two_processes)
{
    int fds[2];

    /* the child first: it opens its own UCT stack from nothing */
    ASSERT_EQ(0, pipe(fds));
    pid_t pid = cxltest::fork_child([&]() {
        stack s;
        uint32_t len;
        alarm(60);
        close(fds[0]);
        if (s.open(dev_name_of(m_path)) != UCS_OK) {
            fprintf(stderr, "child: %s\n", s.error.c_str());
            return 1;
        }
        len = (uint32_t)s.dev_addr.size();
        return (write_full(fds[1], &len, sizeof(len)) &&
                write_full(fds[1], s.dev_addr.data(), len)) ? 0 : 2;
    });
    close(fds[1]);

    uint32_t len = 0;
    std::vector<uint8_t> child_addr;
    ASSERT_TRUE(read_full(fds[0], &len, sizeof(len)));
    ASSERT_EQ(16u, len);
    child_addr.resize(len);
    ASSERT_TRUE(read_full(fds[0], child_addr.data(), len));
    close(fds[0]);
    ASSERT_EQ(0, cxltest::wait_child(pid));

    stack s;
    open_stack(s);
    ASSERT_FALSE(HasFatalFailure());
    EXPECT_EQ(s.dev_addr, child_addr);
    EXPECT_TRUE(uct_iface_is_reachable(s.iface,
                                       (uct_device_addr_t*)child_addr.data(),
                                       (uct_iface_addr_t*)s.iface_addr.data()));
}

TEST_F(cxl_iface, reachability_is_pool_identity)
{
    std::string other = new_pool(64ull << 20);
    stack s1, s2, s3;

    use_pools(m_path + "," + other);
    open_stack(s1, m_path);
    open_stack(s2, m_path);
    open_stack(s3, other);
    ASSERT_FALSE(HasFatalFailure());

    EXPECT_NE(s1.dev_addr, s3.dev_addr);
    EXPECT_TRUE(uct_iface_is_reachable(s1.iface,
                                       (uct_device_addr_t*)s1.dev_addr.data(),
                                       (uct_iface_addr_t*)s1.iface_addr.data()));
    EXPECT_TRUE(uct_iface_is_reachable(s1.iface,
                                       (uct_device_addr_t*)s2.dev_addr.data(),
                                       (uct_iface_addr_t*)s2.iface_addr.data()));
    EXPECT_FALSE(uct_iface_is_reachable(s1.iface,
                                        (uct_device_addr_t*)s3.dev_addr.data(),
                                        (uct_iface_addr_t*)s3.iface_addr.data()))
            << "an interface on another pool is not reachable";
    EXPECT_FALSE(uct_iface_is_reachable(s3.iface,
                                        (uct_device_addr_t*)s1.dev_addr.data(),
                                        (uct_iface_addr_t*)s1.iface_addr.data()));

    std::vector<uint8_t> forged = s1.dev_addr;
    forged[7] ^= 1;
    EXPECT_FALSE(uct_iface_is_reachable(s1.iface,
                                        (uct_device_addr_t*)forged.data(),
                                        (uct_iface_addr_t*)s1.iface_addr.data()));
}

TEST_F(cxl_iface, flush_and_fence)
{
    stack s1, s2;
    uct_ep_h ep_self, ep_peer;
    uct_completion_t comp;
    static bool called;

    open_stack(s1);
    open_stack(s2);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_EQ(UCS_OK, s1.connect_to(s1, &ep_self)) << s1.error;
    ASSERT_EQ(UCS_OK, s1.connect_to(s2, &ep_peer)) << s1.error;

    called      = false;
    comp.func   = [](uct_completion_t*) { called = true; };
    comp.count  = 1;
    comp.status = UCS_OK;

    for (uct_ep_h ep : {ep_self, ep_peer}) {
        EXPECT_EQ(UCS_OK, uct_ep_fence(ep, 0));
        EXPECT_EQ(UCS_OK, uct_ep_flush(ep, UCT_FLUSH_FLAG_LOCAL, NULL));
        EXPECT_EQ(UCS_OK, uct_ep_flush(ep, UCT_FLUSH_FLAG_LOCAL, &comp));
        EXPECT_EQ(UCS_OK, uct_ep_flush(ep, UCT_FLUSH_FLAG_CANCEL, NULL));
        EXPECT_EQ(1, comp.count) << "UCS_OK: the completion is not used";
    }
    EXPECT_EQ(UCS_OK, uct_iface_fence(s1.iface, 0));
    EXPECT_EQ(UCS_OK, uct_iface_flush(s1.iface, 0, NULL));
    EXPECT_EQ(UCS_OK, uct_iface_flush(s1.iface, 0, &comp));
    EXPECT_EQ(1, comp.count);
    EXPECT_FALSE(called);
    EXPECT_EQ(0u, uct_worker_progress(s1.worker));
    s1.close(); /* its endpoints before the interface they connect to */
}

/*
 * The peer interface closes (or its process ends) while an endpoint to it
 * still exists; its receive block goes back to the pool and may be
 * allocated again.  Destroying the endpoint afterwards must not write into
 * that memory.  See the report: uct_cxl_ep_t cleanup hands its channel back
 * (head, seq, owner = 0) without checking that the peer block is still the
 * one it connected to (uct_cxl_ep_peer_alive()).
 */
TEST_F(cxl_iface, ep_destroy_after_peer_closed_writes_nothing)
{
    std::vector<uct_allocated_memory_t> mems;
    stack s1, s2;
    uct_ep_h ep;

    open_stack(s1);
    open_stack(s2);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_EQ(UCS_OK, s1.connect_to(s2, &ep)) << s1.error;

    s2.close();
    {
        /* all free pool memory, with a known content */
        hide_errors hide;
        for (size_t chunk : {1u << 20, 64u << 10, 4u << 10}) {
            uct_allocated_memory_t m;
            while (s1.alloc(chunk, &m) == UCS_OK) {
                fill_guard(m.address, m.length, (uintptr_t)m.address);
                mems.push_back(m);
            }
        }
    }
    ASSERT_GT(mems.size(), 0u);

    s1.disconnect(ep);
    for (uct_allocated_memory_t &m : mems) {
        ssize_t bad = guard_mismatch(m.address, m.length, (uintptr_t)m.address);
        EXPECT_EQ(-1, bad) << "destroying the endpoint wrote into memory "
                           << "allocated after the peer closed, at "
                           << (void*)((uint8_t*)m.address + bad);
        EXPECT_EQ(UCS_OK, uct_mem_free(&m));
    }
}

TEST_F(cxl_iface, multi_thread_worker_refused)
{
    stack s;
    hide_errors hide;

    ASSERT_EQ(UCS_OK, s.open_md()) << s.error;
    EXPECT_EQ(UCS_ERR_UNSUPPORTED,
              s.open_iface(dev_name_of(m_path), UCS_THREAD_MODE_MULTI));
}

/* ------------------------------------------------------------------ */
/* visibility after flush, across processes                            */
/* ------------------------------------------------------------------ */

class cxl_iface_xproc : public cxl_test,
                        public ::testing::WithParamInterface<const char*> {
};

TEST_P(cxl_iface_xproc, data_visible_after_flush)
{
    const size_t len = 256 * 1024;
    int to_child[2], from_child[2];
    peer_info info;

    set_coherence(GetParam());
    ASSERT_EQ(0, pipe(to_child));
    ASSERT_EQ(0, pipe(from_child));
    pid_t pid = cxltest::fork_child([&]() -> int {
        peer_info peer;
        std::vector<uint8_t> src(len);
        stack s;
        rkey key;
        uct_ep_h ep;
        char c = 'f';

        alarm(60);
        close(to_child[1]);
        close(from_child[0]);
        if (s.open(dev_name_of(m_path)) != UCS_OK) {
            fprintf(stderr, "child: %s\n", s.error.c_str());
            return 1;
        }
        if (!read_full(to_child[0], &peer, sizeof(peer))) {
            return 2;
        }
        if ((key.unpack(s.component, peer.rkey) != UCS_OK) ||
            (s.connect(peer.dev_addr, peer.iface_addr, &ep) != UCS_OK)) {
            return 3;
        }
        /* a large zcopy, an unaligned short write, a bcopy-sized tail */
        fill_random(src.data(), len, 99);
        uct_iov_t iov = {src.data(), len - 4096, UCT_MEM_HANDLE_NULL,
                         len - 4096, 1};
        if ((uct_ep_put_zcopy(ep, &iov, 1, peer.address, key.get(), NULL) !=
             UCS_OK) ||
            (uct_ep_put_short(ep, src.data() + len - 4096, 4096,
                              peer.address + len - 4096, key.get()) != UCS_OK)) {
            return 4;
        }
        if ((uct_ep_flush(ep, 0, NULL) != UCS_OK) ||
            (uct_iface_flush(s.iface, 0, NULL) != UCS_OK)) {
            return 5;
        }
        if (!write_full(from_child[1], &c, 1)) {
            return 6;
        }
        /* stay alive until the parent has looked */
        read_full(to_child[0], &c, 1);
        return 0;
    });
    close(to_child[0]);
    close(from_child[1]);

    stack s;
    uct_allocated_memory_t mem;
    open_stack(s);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_EQ(UCS_OK, s.alloc(len, &mem)) << s.error;
    memset(mem.address, 0, mem.length);
    ASSERT_TRUE(make_peer_info(s, mem, &info));
    ASSERT_TRUE(write_full(to_child[1], &info, sizeof(info)));

    char c = 0;
    EXPECT_TRUE(read_full(from_child[0], &c, 1)) << "the child failed";
    EXPECT_EQ('f', c);

    std::vector<uint8_t> expect(len), got(len);
    fill_random(expect.data(), len, 99);
    EXPECT_EQ(-1, first_diff(mem.address, expect.data(), len))
            << "the local view of the buffer";

    /* through the transport as well */
    uct_ep_h ep;
    rkey key;
    ASSERT_EQ(UCS_OK, s.connect_to(s, &ep));
    ASSERT_EQ(UCS_OK, key.unpack(s.component, info.rkey));
    uct_iov_t iov = {got.data(), len, UCT_MEM_HANDLE_NULL, len, 1};
    ASSERT_EQ(UCS_OK, uct_ep_get_zcopy(ep, &iov, 1, info.address, key.get(),
                                       NULL));
    EXPECT_EQ(-1, first_diff(got.data(), expect.data(), len));

    close(to_child[1]); /* lets the child go */
    close(from_child[0]);
    EXPECT_EQ(0, cxltest::wait_child(pid));
    key.release();
    EXPECT_EQ(UCS_OK, uct_mem_free(&mem));
}

INSTANTIATE_TEST_SUITE_P(cxl, cxl_iface_xproc, ::testing::Values("hw", "sw"));
