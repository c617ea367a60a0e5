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

    /* s's endpoint to r (its handler set) and r's interface address */
    void connect_single(stack &r, stack &s, uct_ep_h *ep, iface_addr *addr)
    {
        open_stack(r);
        open_stack(s);
        ASSERT_FALSE(HasFatalFailure());
        set_handler(r);
        ASSERT_EQ(UCS_OK, s.connect_to(r, ep)) << s.error;
        memcpy(addr, r.iface_addr.data(), sizeof(*addr));
    }

    /* the bodies of the tests below, also run on the emulator */
    void reused_block();
    void stale_record();
    void stale_payload();

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

    connect_single(r, s, &ep, &addr);
    ASSERT_FALSE(HasFatalFailure());

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
 * A ring position that held the middle of a long record in one lap holds a
 * record header in the next.  Until the sender gets there, the receiver
 * finds the old record's payload at that position: any bytes a program
 * sent, among them the sequence number it expects next (zeroes, once the
 * numbers wrap through 0).  The sequence number alone let such a line pass
 * for a record; this one was delivered as message {99, 99}.
 */
struct stale_pack_arg {
    uint8_t data[1000];
};

static size_t stale_pack(void *dest, void *arg)
{
    memcpy(dest, static_cast<stale_pack_arg*>(arg)->data, 1000);
    return 1000;
}

void cxl_am::stale_payload()
{
    scoped_env channels("UCX_CXL_NUM_CHANNELS", "1");
    stack r, s;
    iface_addr addr;
    uct_ep_h ep;

    connect_single(r, s, &ep, &addr);
    ASSERT_FALSE(HasFatalFailure());
    pool_map map(m_path);
    ASSERT_TRUE(map.ok()) << m_path;
    const uct_cxl_block_hdr_t *hdr =
            (const uct_cxl_block_hdr_t*)map.at(addr.block_offset);
    const uint64_t ring = hdr->ring_size;
    const uint64_t big  = uct_cxl_rec_size(1000);   /* lines 0..15 */
    ASSERT_EQ(0u, (ring - big) % UCT_CXL_LINE);
    const uint64_t fill = (ring - big) / UCT_CXL_LINE;
    const uint32_t first = uct_cxl_chan_first_seq(addr.id, 0);

    /* lap 0: the long record at 0, whose second line looks like the record
     * the receiver expects at offset 64 in lap 1 (one line, length 16) */
    stale_pack_arg a;
    memset(a.data, 0, sizeof(a.data));
    uct_cxl_rec_t image;
    memset(&image, 0, sizeof(image));
    image.seq    = first + (uint32_t)fill + 2;
    image.am_id  = AM_ID;
    image.length = sizeof(uint64_t) + sizeof(am_msg);
    uint8_t *line1 = a.data + UCT_CXL_LINE - UCT_CXL_REC_HDR;
    memcpy(line1, &image, sizeof(image));
    uint64_t am_hdr = 0x1234;
    am_msg phantom  = {99, 99};
    memcpy(line1 + UCT_CXL_REC_HDR, &am_hdr, sizeof(am_hdr));
    memcpy(line1 + UCT_CXL_REC_HDR + sizeof(am_hdr), &phantom, sizeof(phantom));
    ASSERT_EQ(1000, uct_ep_am_bcopy(ep, AM_ID, stale_pack, &a, 0));

    /* the rest of lap 0 and the first record of lap 1: one line each */
    for (uint32_t n = 0; n < fill + 1; ++n) {
        send(s, r, ep, 0, n);
        ASSERT_FALSE(HasFatalFailure());
    }
    for (int i = 0; i < 1000; ++i) {
        uct_worker_progress(r.worker);
    }
    EXPECT_EQ(1u, m_bad);           /* the long one */
    ASSERT_EQ(fill + 1, m_recv.size()) << "a stale payload line was delivered";
    m_bad = 0;
    check_order({(uint32_t)fill + 1});

    /* and the record that is really written there next arrives */
    send(s, r, ep, 0, (uint32_t)fill + 1);
    drain(r, fill + 2);
    check_order({(uint32_t)fill + 2});
}

TEST_F(cxl_am, stale_payload_of_an_earlier_lap_is_not_a_record)
{
    stale_payload();
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

TEST_F(cxl_am_emu, stale_payload_of_an_earlier_lap_is_not_a_record)
{
    stale_payload();
}
