/*
 * Active-message channels: endpoints of one interface share one channel
 * per peer interface, the channel is handed back only with the last of
 * them, and every endpoint keeps its order.
 */
#include "cxl_uct_util.h"
#include "../../../src/uct/cxl/cxl_channel.h"

#include <map>
#include <unistd.h>

using namespace cxluct;

namespace {

struct am_msg {
    uint32_t sender; /* which endpoint */
    uint32_t n;      /* its message number */
};

class cxl_am : public cxl_test {
protected:
    static const uint8_t AM_ID = 7;

    static ucs_status_t am_cb(void *arg, void *data, size_t length,
                              unsigned)
    {
        cxl_am *self = static_cast<cxl_am*>(arg);
        am_msg m;

        if (length != sizeof(uint64_t) + sizeof(m)) {
            self->m_bad++;
            return UCS_OK;
        }
        memcpy(&m, (uint8_t*)data + sizeof(uint64_t), sizeof(m));
        self->m_recv.push_back(m);
        return UCS_OK;
    }

    void set_handler(stack &r)
    {
        ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(r.iface, AM_ID, am_cb, this,
                                                   UCT_CB_FLAG_ASYNC));
        uct_iface_progress_enable(r.iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    }

    /* Send one message, progressing both sides while the channel is full. */
    void send(stack &s, stack &r, uct_ep_h ep, uint32_t sender, uint32_t n)
    {
        am_msg m = {sender, n};
        ucs_status_t status;
        int tries = 0;

        do {
            status = uct_ep_am_short(ep, AM_ID, 0x1234, &m, sizeof(m));
            if (status == UCS_ERR_NO_RESOURCE) {
                uct_worker_progress(r.worker);
                uct_worker_progress(s.worker);
            }
        } while ((status == UCS_ERR_NO_RESOURCE) && (++tries < 1000000));
        ASSERT_EQ(UCS_OK, status) << "sender " << sender << " message " << n;
    }

    void drain(stack &r, size_t expected)
    {
        for (int i = 0; (i < 1000000) && (m_recv.size() < expected); ++i) {
            uct_worker_progress(r.worker);
        }
        ASSERT_EQ(expected, m_recv.size());
    }

    /* Sender i's counts[i] messages arrived once each, in the order sent. */
    void check_order(const std::vector<uint32_t> &counts)
    {
        std::map<uint32_t, uint32_t> next;

        EXPECT_EQ(0u, m_bad);
        for (const am_msg &m : m_recv) {
            ASSERT_LT(m.sender, counts.size());
            EXPECT_EQ(next[m.sender], m.n) << "sender " << m.sender;
            next[m.sender] = m.n + 1;
        }
        for (unsigned i = 0; i < counts.size(); ++i) {
            EXPECT_EQ(counts[i], next[i]) << "sender " << i;
        }
    }

    /* the bodies of the tests below, also run on the emulator */
    void reused_block();
    void stale_record();

    std::vector<am_msg> m_recv;
    unsigned            m_bad = 0;
};

} // namespace

/*
 * UCX's test_uct_pending.pending_ucs_ok_dc_arbiter_bug connects 2048
 * endpoints of one interface to one peer.  Each endpoint used to claim a
 * channel of its own, so the 3rd one failed here.
 */
TEST_F(cxl_am, many_endpoints_share_one_channel)
{
    const unsigned num_eps = 300, rounds = 3;
    scoped_env channels("UCX_CXL_NUM_CHANNELS", "2");
    stack r, s;
    std::vector<uct_ep_h> eps(num_eps);

    open_stack(r);
    open_stack(s);
    ASSERT_FALSE(HasFatalFailure());
    set_handler(r);

    for (unsigned i = 0; i < num_eps; ++i) {
        ASSERT_EQ(UCS_OK, s.connect_to(r, &eps[i])) << "ep " << i << ": "
                                                     << s.error;
    }
    for (unsigned n = 0; n < rounds; ++n) {
        for (unsigned i = 0; i < num_eps; ++i) {
            send(s, r, eps[i], i, n);
            ASSERT_FALSE(HasFatalFailure());
        }
    }
    drain(r, num_eps * rounds);
    check_order(std::vector<uint32_t>(num_eps, rounds));
}

/*
 * Each sending interface has its own channel; with all channels taken a
 * third interface is refused with a clear error, not silently multiplexed.
 */
TEST_F(cxl_am, interfaces_get_separate_channels)
{
    scoped_env channels("UCX_CXL_NUM_CHANNELS", "2");
    stack r, s1, s2, s3;
    uct_ep_h ep1, ep1b, ep2, ep3;

    open_stack(r);
    open_stack(s1);
    open_stack(s2);
    open_stack(s3);
    ASSERT_FALSE(HasFatalFailure());
    set_handler(r);

    ASSERT_EQ(UCS_OK, s1.connect_to(r, &ep1)) << s1.error;
    ASSERT_EQ(UCS_OK, s1.connect_to(r, &ep1b)) << s1.error;
    ASSERT_EQ(UCS_OK, s2.connect_to(r, &ep2)) << s2.error;
    {
        hide_errors hide;
        EXPECT_EQ(UCS_ERR_NO_RESOURCE, s3.connect_to(r, &ep3));
    }

    send(s1, r, ep1, 0, 0);
    send(s2, r, ep2, 1, 0);
    send(s1, r, ep1b, 2, 0);
    drain(r, 3);
    check_order({1, 1, 1});
}

/*
 * The channel goes back to the receiver only with the last endpoint that
 * uses it; the next owner continues its sequence numbers.
 */
TEST_F(cxl_am, channel_released_with_last_endpoint)
{
    scoped_env channels("UCX_CXL_NUM_CHANNELS", "1");
    stack r, s1, s2;
    uct_ep_h a, b, c;

    open_stack(r);
    open_stack(s1);
    open_stack(s2);
    ASSERT_FALSE(HasFatalFailure());
    set_handler(r);

    ASSERT_EQ(UCS_OK, s1.connect_to(r, &a)) << s1.error;
    ASSERT_EQ(UCS_OK, s1.connect_to(r, &b)) << s1.error;
    send(s1, r, a, 0, 0);
    send(s1, r, b, 1, 0);
    {
        hide_errors hide;
        EXPECT_EQ(UCS_ERR_NO_RESOURCE, s2.connect_to(r, &c));
    }

    s1.disconnect(a);
    send(s1, r, b, 1, 1); /* the channel is still there for b */
    {
        hide_errors hide;
        EXPECT_EQ(UCS_ERR_NO_RESOURCE, s2.connect_to(r, &c));
    }

    s1.disconnect(b);
    ASSERT_EQ(UCS_OK, s2.connect_to(r, &c)) << s2.error;
    send(s2, r, c, 2, 0);
    send(s2, r, c, 2, 1);
    drain(r, 5);
    check_order({1, 2, 2});
}

/*
 * A sender must notice that the interface it connected to is gone even when
 * a new interface already sits in the same block: the send path used to
 * check only the header's magic, so an old endpoint wrote its records and
 * its producer line into the new interface's channel.  (Open MPI's osc ucx
 * opens and closes a worker per window and hit this as "corrupt record".)
 */
void cxl_am::reused_block()
{
    scoped_env channels("UCX_CXL_NUM_CHANNELS", "1");
    stack r, s, s2;
    iface_addr old_addr, new_addr;
    uct_ep_h old_ep, ep2;
    am_msg m = {9, 9};

    open_stack(r);
    open_stack(s);
    open_stack(s2);
    ASSERT_FALSE(HasFatalFailure());
    set_handler(r);
    ASSERT_EQ(UCS_OK, s.connect_to(r, &old_ep)) << s.error;
    send(s, r, old_ep, 0, 0);
    drain(r, 1);
    ASSERT_EQ(sizeof(old_addr), r.iface_addr.size());
    memcpy(&old_addr, r.iface_addr.data(), sizeof(old_addr));

    /* the receiver closes; a new interface gets the same block */
    r.close();
    open_stack(r);
    ASSERT_FALSE(HasFatalFailure());
    set_handler(r);
    memcpy(&new_addr, r.iface_addr.data(), sizeof(new_addr));
    ASSERT_EQ(old_addr.block_offset, new_addr.block_offset)
            << "the scenario needs the block to be reused";
    ASSERT_NE(old_addr.id, new_addr.id);

    {
        hide_errors hide;
        EXPECT_EQ(UCS_ERR_CONNECTION_RESET,
                  uct_ep_am_short(old_ep, AM_ID, 0x1234, &m, sizeof(m)));
        EXPECT_EQ(UCS_ERR_CONNECTION_RESET,
                  uct_ep_am_short(old_ep, AM_ID, 0x1234, &m, sizeof(m)));
    }

    /* the new interface's only channel is intact for its own sender */
    ASSERT_EQ(UCS_OK, s2.connect_to(r, &ep2)) << s2.error;
    m_recv.clear();
    for (uint32_t n = 0; n < 3; ++n) {
        send(s2, r, ep2, 0, n);
    }
    drain(r, 3);
    check_order({3});
    uct_worker_progress(s.worker); /* the old endpoint's failure report */
}

TEST_F(cxl_am, sender_never_writes_into_a_reused_block)
{
    reused_block();
}

/*
 * The residue of the race above: a sender that checked the header just
 * before the block was reused writes one record into the new interface's
 * ring.  Channels used to start at sequence number 1 in every block, so
 * such a record (an old channel's first one) was delivered as a message.
 */
void cxl_am::stale_record()
{
    scoped_env channels("UCX_CXL_NUM_CHANNELS", "1");
    stack r, s;
    iface_addr addr;
    uct_ep_h ep;

    open_stack(r);
    open_stack(s);
    ASSERT_FALSE(HasFatalFailure());
    set_handler(r);
    ASSERT_EQ(UCS_OK, s.connect_to(r, &ep)) << s.error;
    memcpy(&addr, r.iface_addr.data(), sizeof(addr));

    /* what a late sender of an earlier life of this block would write */
    pool_map map(m_path);
    ASSERT_TRUE(map.ok()) << m_path;
    uct_cxl_block_hdr_t *hdr = (uct_cxl_block_hdr_t*)map.at(addr.block_offset);
    ASSERT_EQ(addr.id, hdr->iface_id);
    uct_cxl_rec_t *rec = (uct_cxl_rec_t*)
            uct_cxl_chan_ring(uct_cxl_block_chan(hdr, 0));
    uint64_t payload[2] = {0x1234, 0};
    rec->am_id  = AM_ID;
    rec->flags  = 0;
    rec->length = sizeof(payload);
    memcpy(rec + 1, payload, sizeof(payload));
    __atomic_store_n(&rec->seq, 1, __ATOMIC_RELEASE);

    for (int i = 0; i < 1000; ++i) {
        uct_worker_progress(r.worker);
    }
    EXPECT_EQ(0u, m_recv.size() + m_bad) << "a stale record was delivered";

    /* the channel's own sender is not disturbed */
    m_recv.clear();
    m_bad = 0;
    for (uint32_t n = 0; n < 3; ++n) {
        send(s, r, ep, 0, n);
    }
    drain(r, 3);
    check_order({3});
}

TEST_F(cxl_am, record_from_an_earlier_block_life_is_not_delivered)
{
    stale_record();
}

/*
 * Both in software-coherent mode on the non-coherent emulator (one
 * emulated host: the interfaces of one process share its caches), where
 * a sender re-reads the receiver's header only every UCX_CXL_PEER_CHECK
 * and the receiver's close waits for that (test_cxl_sw.cc has the
 * two-host case).
 */
class cxl_am_emu : public cxl_am {
protected:
    void SetUp() override
    {
        cxl_am::SetUp();
        m_path = new_pool(128ull << 20, CXL_COH_SW, "", 1);
        use_pools("emulate-nc:" + m_path);
        set_coherence("sw");
    }
};

TEST_F(cxl_am_emu, sender_never_writes_into_a_reused_block)
{
    reused_block();
}

TEST_F(cxl_am_emu, record_from_an_earlier_block_life_is_not_delivered)
{
    stale_record();
}
