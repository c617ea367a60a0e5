/*
 * Bulk rings: am_bcopy payloads in the sender's own pool memory, records
 * in the receiver's channel that point at them (src/uct/cxl/cxl_bulk.c).
 */
#include "cxl_uct_util.h"
#include "../../../src/uct/cxl/cxl_channel.h"

#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

using namespace cxluct;

namespace {

uint8_t pattern(uint32_t msg, size_t i)
{
    return (uint8_t)(msg * 37 + i * 11 + 5);
}

/* Message n: its number, then a pattern; its length varies with n. */
struct pack_arg {
    uint32_t n;
    size_t   length;
};

size_t pack_msg(void *dest, void *arg)
{
    const pack_arg *a = static_cast<const pack_arg*>(arg);
    uint8_t *p        = static_cast<uint8_t*>(dest);

    memcpy(p, &a->n, sizeof(a->n));
    for (size_t i = sizeof(a->n); i < a->length; ++i) {
        p[i] = pattern(a->n, i);
    }
    return a->length;
}

class cxl_bulk : public cxl_test {
protected:
    static const uint8_t AM_ID = 9;

    static ucs_status_t am_cb(void *arg, void *data, size_t length, unsigned)
    {
        cxl_bulk *self   = static_cast<cxl_bulk*>(arg);
        const uint8_t *p = static_cast<const uint8_t*>(data);
        uint32_t n;

        if (length < sizeof(n)) {
            self->m_bad++;
            return UCS_OK;
        }
        memcpy(&n, p, sizeof(n));
        if ((n != self->m_next) || (length != self->length_of(n))) {
            self->m_bad++;
        } else {
            for (size_t i = sizeof(n); i < length; ++i) {
                if (p[i] != pattern(n, i)) {
                    self->m_bad++;
                    break;
                }
            }
        }
        self->m_next = n + 1;
        self->m_recv++;
        return UCS_OK;
    }

    /* sizes around the inline limit, up to a full segment */
    size_t length_of(uint32_t n) const
    {
        static const size_t sizes[] = {8, 1000, 1024, 1025, 4000, 8256, 3000,
                                       2049};
        return std::min(sizes[n % 8], m_seg);
    }

    void set_handler(stack &r)
    {
        ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(r.iface, AM_ID, am_cb, this,
                                                   UCT_CB_FLAG_ASYNC));
        uct_iface_progress_enable(r.iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    }

    void open_pair(stack &r, stack &s, uct_ep_h *ep)
    {
        open_stack(r);
        open_stack(s);
        ASSERT_FALSE(HasFatalFailure());
        set_handler(r);
        /* as UCP does: the sender's interface is progressed too */
        uct_iface_progress_enable(s.iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
        ASSERT_EQ(UCS_OK, s.connect_to(r, ep)) << s.error;
        m_seg = s.iface_attr.cap.am.max_bcopy;
    }

    ssize_t send(uct_ep_h ep, uint32_t n)
    {
        pack_arg a = {n, length_of(n)};
        return uct_ep_am_bcopy(ep, AM_ID, pack_msg, &a, 0);
    }

    /* Messages of full segments sent before the channel is full, with the
     * receiver not progressing. */
    unsigned depth(uct_ep_h ep)
    {
        unsigned count = 0;
        pack_arg a     = {0, m_seg};

        while (count < 100000) {
            a.n = count;
            if (uct_ep_am_bcopy(ep, AM_ID, pack_msg, &a, 0) == UCS_ERR_NO_RESOURCE) {
                break;
            }
            ++count;
        }
        return count;
    }

    uint64_t pool_used()
    {
        cxlpool_stats_t st;
        pool_stats(&st);
        return st.used_bytes;
    }

    uint32_t m_next = 0;
    unsigned m_recv = 0;
    unsigned m_bad  = 0;
    size_t   m_seg  = 0;
};

} // namespace

/*
 * The point of the bulk ring: one sender can have a bulk ring's worth of
 * segments in flight, not a receive ring's.  With the receiver's 64 KiB
 * ring alone that was 7 segments of 8 KiB, and the copy-in of the sender
 * and the copy-out of the receiver never overlapped (UCP tag_bw 1 MiB at
 * about half of posix).
 */
TEST_F(cxl_bulk, channel_holds_a_bulk_ring_of_segments)
{
    scoped_env ring("UCX_CXL_RING_SIZE", "64k");
    scoped_env bulk("UCX_CXL_BULK_SIZE", "512k");
    stack r, s;
    uct_ep_h ep;

    open_pair(r, s, &ep);
    ASSERT_FALSE(HasFatalFailure());
    unsigned n = depth(ep);
    /* 512 KiB of 8256-byte payloads in 64-byte lines: 62 of them */
    EXPECT_GE(n, (512u << 10) / ((m_seg + 63) & ~(size_t)63) - 2) << "segments";
    EXPECT_GT(n, (64u << 10) / m_seg) << "no deeper than the receive ring";
}

/* BULK_SIZE=0: everything inline, the receive ring is the depth again. */
TEST_F(cxl_bulk, bulk_size_zero_keeps_payloads_inline)
{
    scoped_env ring("UCX_CXL_RING_SIZE", "64k");
    scoped_env bulk("UCX_CXL_BULK_SIZE", "0");
    stack r, s;
    uct_ep_h ep;

    uint64_t before = pool_used();
    open_pair(r, s, &ep);
    ASSERT_FALSE(HasFatalFailure());
    uint64_t blocks = pool_used() - before;
    unsigned n = depth(ep);
    EXPECT_LE(n, (64u << 10) / m_seg);
    EXPECT_EQ(blocks, pool_used() - before) << "a bulk ring was allocated";
}

/*
 * Every size around the inline limit, through many turns of both rings (a
 * small bulk ring, so its end is skipped often): all arrive, in order,
 * intact.
 */
TEST_F(cxl_bulk, messages_arrive_in_order_through_many_ring_turns)
{
    scoped_env ring("UCX_CXL_RING_SIZE", "64k");
    scoped_env bulk("UCX_CXL_BULK_SIZE", "64k");
    const uint32_t num = 5000;
    stack r, s;
    uct_ep_h ep;
    ssize_t ret;

    open_pair(r, s, &ep);
    ASSERT_FALSE(HasFatalFailure());
    for (uint32_t n = 0; n < num; ++n) {
        int tries = 0;
        while ((ret = send(ep, n)) == UCS_ERR_NO_RESOURCE) {
            uct_worker_progress(r.worker);
            uct_worker_progress(s.worker);
            ASSERT_LT(++tries, 1000000) << "message " << n;
        }
        ASSERT_EQ((ssize_t)length_of(n), ret) << "message " << n;
    }
    for (int i = 0; (i < 1000000) && (m_recv < num); ++i) {
        uct_worker_progress(r.worker);
    }
    EXPECT_EQ(num, m_recv);
    EXPECT_EQ(0u, m_bad);
}

/*
 * A pair that sends only short messages takes no bulk ring; the first
 * large am_bcopy takes one; it is freed once the receiver consumed what
 * points into it, not before, even after the endpoint is gone.
 */
TEST_F(cxl_bulk, ring_lives_until_the_receiver_read_it)
{
    scoped_env bulk("UCX_CXL_BULK_SIZE", "256k");
    stack r, s;
    uct_ep_h ep;

    open_pair(r, s, &ep);
    ASSERT_FALSE(HasFatalFailure());
    uint64_t base = pool_used();
    ASSERT_EQ((ssize_t)8, send(ep, 0)); /* short: inline, no ring */
    EXPECT_EQ(base, pool_used());
    ASSERT_EQ((ssize_t)1000, send(ep, 1)); /* inline too */
    EXPECT_EQ(base, pool_used());
    ASSERT_EQ((ssize_t)1024, send(ep, 2));
    ASSERT_EQ((ssize_t)1025, send(ep, 3)); /* into the bulk ring */
    EXPECT_EQ(base + (256u << 10), pool_used());

    s.disconnect(ep);
    for (int i = 0; i < 100; ++i) {
        uct_worker_progress(s.worker);
    }
    EXPECT_EQ(base + (256u << 10), pool_used())
            << "freed while the receiver had not read it";

    for (int i = 0; (i < 1000) && (m_recv < 4); ++i) {
        uct_worker_progress(r.worker);
    }
    EXPECT_EQ(4u, m_recv);
    EXPECT_EQ(0u, m_bad) << "the payload changed before it was read";
    for (int i = 0; (i < 1000) && (pool_used() > base); ++i) {
        uct_worker_progress(s.worker);
    }
    EXPECT_EQ(base, pool_used()) << "not freed after the receiver read it";
}

/* A receiver that closed never reads again: the ring goes at once. */
TEST_F(cxl_bulk, ring_freed_when_the_receiver_is_gone)
{
    scoped_env bulk("UCX_CXL_BULK_SIZE", "256k");
    stack r, s;
    uct_ep_h ep;

    open_pair(r, s, &ep);
    ASSERT_FALSE(HasFatalFailure());
    uint64_t base = pool_used();
    ASSERT_EQ((ssize_t)4000, send(ep, 4));
    EXPECT_EQ(base + (256u << 10), pool_used());

    r.close();
    uint64_t without_r = pool_used();
    s.disconnect(ep);
    EXPECT_EQ(without_r - (256u << 10), pool_used());
}

/*
 * A record is the receiver's input from a peer: one that points outside
 * the pool's heap stops the channel with an error, it is not dereferenced.
 */
TEST_F(cxl_bulk, record_pointing_outside_the_heap_is_refused)
{
    scoped_env channels("UCX_CXL_NUM_CHANNELS", "1");
    stack r, s;
    uct_ep_h ep;
    iface_addr addr;

    open_pair(r, s, &ep);
    ASSERT_FALSE(HasFatalFailure());
    memcpy(&addr, r.iface_addr.data(), sizeof(addr));

    pool_map map(m_path);
    ASSERT_TRUE(map.ok()) << m_path;
    uct_cxl_block_hdr_t *hdr = (uct_cxl_block_hdr_t*)map.at(addr.block_offset);
    uct_cxl_chan_ctl_t *chan = uct_cxl_block_chan(hdr, 0);
    uct_cxl_rec_t *rec       = (uct_cxl_rec_t*)uct_cxl_chan_ring(chan);
    uct_cxl_rec_bulk_t *desc = (uct_cxl_rec_bulk_t*)(rec + 1);

    /* where the channel's own sender would write its next record */
    ASSERT_EQ(0u, chan->head);
    rec->am_id     = AM_ID;
    rec->flags     = UCT_CXL_REC_BULK;
    rec->length    = 4096;
    desc->offset   = map.size() - 100; /* runs past the end */
    desc->bulk_end = 4096;
    {
        hide_errors hide;
        rec->check = uct_cxl_rec_check((uint32_t)chan->seq,
                                       uct_cxl_chan_first_seq(addr.id, 0));
        __atomic_store_n(&rec->seq, (uint32_t)chan->seq, __ATOMIC_RELEASE);
        for (int i = 0; i < 100; ++i) {
            uct_worker_progress(r.worker);
        }
        bool said = false;
        for (const std::string &m : hide_errors::messages()) {
            said = said || (m.find("corrupt record") != std::string::npos);
        }
        EXPECT_TRUE(said) << "no error about the record";
    }
    EXPECT_EQ(0u, m_recv + m_bad) << "a record outside the heap was delivered";
}

/*
 * The record's header is a peer's to rewrite at any time: a receiver that
 * checks 'length' and then loads it again hands its callback a length it
 * never checked.  Deterministically: the page of the record is made
 * inaccessible in the transport's mapping, and every load of 'length'
 * from it traps; the first sees 4096, every later one 2^31 (written
 * through a second mapping), as if a peer rewrote it in between; each
 * trapped instruction is then single-stepped and the page closed again.
 * Before the receive path loaded the header once, a BULK record's length
 * was loaded again after its payload's invalidate (a compiler barrier in
 * hw mode) and the callback got 2^31 bytes.
 */
namespace {

struct trap_state {
    uint8_t           *page;        /* in the transport's mapping */
    uint32_t          *length;      /* the field, transport's mapping */
    volatile uint32_t *alias;       /* the same field, second mapping */
    unsigned           loads;
    struct sigaction   old_segv, old_trap;
};

trap_state g_trap;

void trap_segv(int sig, siginfo_t *si, void *ctx)
{
    ucontext_t *uc = static_cast<ucontext_t*>(ctx);
    uint8_t *a     = static_cast<uint8_t*>(si->si_addr);

    if ((a < g_trap.page) || (a >= g_trap.page + 4096)) {
        sigaction(sig, &g_trap.old_segv, NULL); /* a real crash */
        return;
    }
    if (a == (uint8_t*)g_trap.length) {
        *g_trap.alias = (g_trap.loads++ == 0) ? 4096u : 0x80000000u;
    }
    mprotect(g_trap.page, 4096, PROT_READ | PROT_WRITE);
    uc->uc_mcontext.gregs[REG_EFL] |= 0x100; /* trap after one instruction */
}

void trap_step(int, siginfo_t *, void *ctx)
{
    ucontext_t *uc = static_cast<ucontext_t*>(ctx);

    uc->uc_mcontext.gregs[REG_EFL] &= ~0x100;
    mprotect(g_trap.page, 4096, PROT_NONE);
}

/* The transport's mapping of the pool file: the one that is not ours. */
uint8_t *transport_mapping(const std::string &path, const void *ours)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096], name[4096];
    unsigned long lo, hi, off;
    uint8_t *found = NULL;

    while ((f != NULL) && fgets(line, sizeof(line), f)) {
        name[0] = '\0';
        if ((sscanf(line, "%lx-%lx %*s %lx %*s %*s %4095s", &lo, &hi, &off,
                    name) == 4) && (path == name) && (off == 0) &&
            ((void*)lo != ours)) {
            found = (uint8_t*)lo;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return found;
}

struct seen_lengths {
    unsigned delivered = 0;
    size_t   length    = 0;
};

ucs_status_t record_length_cb(void *arg, void *, size_t length, unsigned)
{
    seen_lengths *s = static_cast<seen_lengths*>(arg);

    s->delivered++;
    s->length = length;
    return UCS_OK;
}

} // namespace

TEST_F(cxl_bulk, record_length_rewritten_under_the_receiver)
{
    static const uint8_t TRAP_AM = 11;
    scoped_env channels("UCX_CXL_NUM_CHANNELS", "1");
    struct sigaction sa;
    seen_lengths seen;
    stack r, s;
    uct_ep_h ep;
    iface_addr addr;

    open_pair(r, s, &ep);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(r.iface, TRAP_AM,
                                               record_length_cb, &seen,
                                               UCT_CB_FLAG_ASYNC));
    memcpy(&addr, r.iface_addr.data(), sizeof(addr));
    pool_map map(m_path);
    ASSERT_TRUE(map.ok()) << m_path;
    uint8_t *base = transport_mapping(m_path, map.at(0));
    ASSERT_TRUE(base != NULL) << "no mapping of " << m_path << " but ours";

    uct_cxl_block_hdr_t *hdr = (uct_cxl_block_hdr_t*)map.at(addr.block_offset);
    uct_cxl_chan_ctl_t *chan = uct_cxl_block_chan(hdr, 0);
    uct_cxl_rec_t *rec       = (uct_cxl_rec_t*)uct_cxl_chan_ring(chan);
    uct_cxl_rec_bulk_t *desc = (uct_cxl_rec_bulk_t*)(rec + 1);
    uint64_t rec_off         = (uint8_t*)rec - (uint8_t*)map.at(0);

    ASSERT_EQ(0u, chan->head);
    rec->am_id     = TRAP_AM;
    rec->flags     = UCT_CXL_REC_BULK;
    rec->length    = 4096;
    desc->offset   = map.size() - 8192; /* inside the heap */
    desc->bulk_end = 0;

    g_trap.length = (uint32_t*)(base + rec_off + offsetof(uct_cxl_rec_t, length));
    g_trap.page   = (uint8_t*)((uintptr_t)g_trap.length & ~(uintptr_t)4095);
    g_trap.alias  = &rec->length;
    g_trap.loads  = 0;
    memset(&sa, 0, sizeof(sa));
    sa.sa_flags     = SA_SIGINFO;
    sa.sa_sigaction = trap_segv;
    ASSERT_EQ(0, sigaction(SIGSEGV, &sa, &g_trap.old_segv));
    sa.sa_sigaction = trap_step;
    ASSERT_EQ(0, sigaction(SIGTRAP, &sa, &g_trap.old_trap));

    rec->check = uct_cxl_rec_check((uint32_t)chan->seq,
                                   uct_cxl_chan_first_seq(addr.id, 0));
    __atomic_store_n(&rec->seq, (uint32_t)chan->seq, __ATOMIC_RELEASE);
    ASSERT_EQ(0, mprotect(g_trap.page, 4096, PROT_NONE));
    uct_worker_progress(r.worker);
    mprotect(g_trap.page, 4096, PROT_READ | PROT_WRITE);
    sigaction(SIGSEGV, &g_trap.old_segv, NULL);
    sigaction(SIGTRAP, &g_trap.old_trap, NULL);

    EXPECT_GE(g_trap.loads, 1u) << "the receiver never loaded the length";
    EXPECT_EQ(1u, seen.delivered) << "loads of the length: " << g_trap.loads;
    EXPECT_EQ(4096u, seen.length) << "a delivery of a length the receiver "
                                  "did not check (loads of the length: "
                                  << g_trap.loads << ")";
}
