/*
 * Software coherence against the strict non-coherent emulator
 * (UCX_CXL_POOL=emulate-nc:PATH): two processes on two emulated hosts
 * exchange active messages whose payloads are checked byte by byte.
 *
 * The same exchange runs with the test-only knob that leaves out the
 * write-back of record bodies (UCX_CXL_TEST_SKIP_WRITEBACK=y): on the
 * emulator the receiver must then see wrong payloads - the emulator
 * catches a missing flush - while on a coherent pool the knob changes
 * nothing, which shows that it is the emulator that catches it.
 */
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "cxl_uct_util.h"
#include "../../../src/uct/cxl/cxl_channel.h"

extern "C" int uct_cxl_membarrier_registered; /* cxl_event.c */

#include <chrono>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace cxluct;

namespace {

typedef std::chrono::steady_clock clk;

const uint8_t  AM_ID   = 11;
const unsigned NUM_MSG = 200;
/* 1000 bytes: inline, 16 record lines, the body spans lines; a bulk test
 * sets more than UCT_CXL_BULK_MIN_LENGTH (the children inherit it) */
size_t         MSG_LEN = 1000;

struct rx_result {
    uint32_t good;
    uint32_t bad;
    int32_t  rc;
    char     error[128];
};

struct addr_msg {
    uint32_t dev_len;
    uint32_t iface_len;
    uint8_t  dev[32];
    uint8_t  iface[32];
};

uint8_t pattern(unsigned msg, size_t i)
{
    return (uint8_t)(msg * 131 + i * 7 + 1);
}

struct rx_state {
    uint32_t good = 0;
    uint32_t bad  = 0;
};

ucs_status_t rx_cb(void *arg, void *data, size_t length, unsigned)
{
    rx_state *st     = static_cast<rx_state*>(arg);
    const uint8_t *p = static_cast<const uint8_t*>(data);
    uint32_t msg;

    if (length != MSG_LEN) {
        st->bad++;
        return UCS_OK;
    }
    memcpy(&msg, p, sizeof(msg));
    for (size_t i = sizeof(msg); i < MSG_LEN; ++i) {
        if (p[i] != pattern(msg, i)) {
            st->bad++;
            return UCS_OK;
        }
    }
    st->good++;
    return UCS_OK;
}

struct tx_arg {
    unsigned msg;
};

size_t tx_pack(void *dest, void *arg)
{
    unsigned msg = static_cast<tx_arg*>(arg)->msg;
    uint8_t *p   = static_cast<uint8_t*>(dest);
    uint32_t m   = msg;

    memcpy(p, &m, sizeof(m));
    for (size_t i = sizeof(m); i < MSG_LEN; ++i) {
        p[i] = pattern(msg, i);
    }
    return MSG_LEN;
}

void set_env(const char *pool, const char *coherence, const char *host,
             bool skip_wb)
{
    setenv("UCX_CXL_POOL", pool, 1);
    setenv("UCX_CXL_COHERENCE", coherence, 1);
    if (host != nullptr) {
        setenv("UCX_CXL_HOST_INDEX", host, 1);
    } else {
        unsetenv("UCX_CXL_HOST_INDEX");
    }
    setenv("UCX_CXL_TEST_SKIP_WRITEBACK", skip_wb ? "y" : "n", 1);
}

/*
 * Open a receiving interface on dev that counts into *st, and describe it
 * in *am.  Returns NULL, or what failed (am->dev_len is then 0).
 */
const char *open_receiver(stack &s, const std::string &dev, rx_state *st,
                          addr_msg *am)
{
    memset(am, 0, sizeof(*am));
    if (s.open(dev) != UCS_OK) {
        return "open";
    }
    if (uct_iface_set_am_handler(s.iface, AM_ID, rx_cb, st,
                                 UCT_CB_FLAG_ASYNC) != UCS_OK) {
        return "set_am_handler";
    }
    uct_iface_progress_enable(s.iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    am->dev_len   = (uint32_t)s.dev_addr.size();
    am->iface_len = (uint32_t)s.iface_addr.size();
    memcpy(am->dev, s.dev_addr.data(), am->dev_len);
    memcpy(am->iface, s.iface_addr.data(), am->iface_len);
    return NULL;
}

/* Progress until want messages arrived (good or bad), 20 s at most. */
void receive(stack &s, const rx_state &st, unsigned want)
{
    clk::time_point deadline = clk::now() + std::chrono::seconds(20);

    while ((st.good + st.bad < want) && (clk::now() < deadline)) {
        uct_worker_progress(s.worker);
    }
}

/* Send n checked messages and flush; on error res->rc and res->error. */
int send_n(stack &s, uct_ep_h ep, unsigned n, rx_result *res)
{
    for (unsigned m = 0; m < n; ++m) {
        tx_arg arg = {m};
        ssize_t len;
        clk::time_point deadline = clk::now() + std::chrono::seconds(20);

        while ((len = uct_ep_am_bcopy(ep, AM_ID, tx_pack, &arg, 0)) ==
               UCS_ERR_NO_RESOURCE) {
            uct_worker_progress(s.worker);
            if (clk::now() > deadline) {
                break;
            }
        }
        if (len != (ssize_t)MSG_LEN) {
            res->rc = 4;
            snprintf(res->error, sizeof(res->error), "am_bcopy %u: %zd", m, len);
            return res->rc;
        }
    }
    if (uct_ep_flush(ep, 0, NULL) != UCS_OK) {
        res->rc = 5;
        snprintf(res->error, sizeof(res->error), "flush failed");
    }
    return res->rc;
}

/* Receiver child: publish the address, count good and bad messages. */
int run_receiver(const std::string &dev, int addr_fd, int res_fd, int go_fd)
{
    rx_result res = {};
    rx_state st;
    addr_msg am;
    stack s;
    char byte;
    const char *failed = open_receiver(s, dev, &st, &am);

    write_full(addr_fd, &am, sizeof(am)); /* dev_len 0: failed */
    if (failed != NULL) {
        res.rc = 1;
        snprintf(res.error, sizeof(res.error), "%s: %s", failed,
                 s.error.c_str());
        write_full(res_fd, &res, sizeof(res));
        return 1;
    }

    receive(s, st, NUM_MSG);
    res.good = st.good;
    res.bad  = st.bad;
    write_full(res_fd, &res, sizeof(res));
    read_full(go_fd, &byte, 1); /* the sender is gone: close */
    return 0;
}

/* Sender child: connect and send NUM_MSG checked messages. */
int run_sender(const std::string &dev, int addr_fd, int res_fd, int go_fd)
{
    rx_result res = {};
    addr_msg am;
    uct_ep_h ep;
    stack s;
    char byte;

    if (!read_full(addr_fd, &am, sizeof(am)) || (am.dev_len == 0)) {
        res.rc = 1;
        snprintf(res.error, sizeof(res.error), "no receiver address");
    } else if (s.open(dev) != UCS_OK) {
        res.rc = 2;
        snprintf(res.error, sizeof(res.error), "open: %s", s.error.c_str());
    } else if (s.connect(am.dev, am.iface, &ep) != UCS_OK) {
        res.rc = 3;
        snprintf(res.error, sizeof(res.error), "connect: %s", s.error.c_str());
    } else {
        send_n(s, ep, NUM_MSG, &res);
    }
    write_full(res_fd, &res, sizeof(res));
    read_full(go_fd, &byte, 1);
    return 0;
}

} // namespace

class cxl_sw : public cxl_test {
protected:
    /*
     * Receiver on host rx_host, sender on host tx_host of the pool spec;
     * returns what the receiver counted.
     */
    rx_result exchange(const std::string &spec, const std::string &dev,
                       const char *coherence, const char *rx_host,
                       const char *tx_host, bool skip_wb)
    {
        int addr[2], rres[2], tres[2], rgo[2], tgo[2];
        rx_result rx = {}, tx = {};
        pid_t rpid, tpid;
        int status;

        rx.rc = -1;
        if ((pipe(addr) < 0) || (pipe(rres) < 0) || (pipe(tres) < 0) ||
            (pipe(rgo) < 0) || (pipe(tgo) < 0)) {
            ADD_FAILURE() << "pipe: " << strerror(errno);
            return rx;
        }

        rpid = fork();
        if (rpid == 0) {
            set_env(spec.c_str(), coherence, rx_host, false);
            int rc = run_receiver(dev, addr[1], rres[1], rgo[0]);
            fflush(NULL); /* UCX's log is a buffered stdio stream */
            _exit(rc);
        }
        tpid = fork();
        if (tpid == 0) {
            set_env(spec.c_str(), coherence, tx_host, skip_wb);
            int rc = run_sender(dev, addr[0], tres[1], tgo[0]);
            fflush(NULL);
            _exit(rc);
        }

        bool ok_r = read_full(rres[0], &rx, sizeof(rx));
        bool ok_t = read_full(tres[0], &tx, sizeof(tx));
        char byte = 1;
        write_full(tgo[1], &byte, 1);
        waitpid(tpid, &status, 0);
        EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0))
                << "sender status " << status;
        write_full(rgo[1], &byte, 1);
        waitpid(rpid, &status, 0);
        EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0))
                << "receiver status " << status;

        for (int *p : {addr, rres, tres, rgo, tgo}) {
            close(p[0]);
            close(p[1]);
        }
        EXPECT_TRUE(ok_r && ok_t) << "a child died before reporting";
        /*
         * With the knob on the emulator the receiver may also stop at a
         * record it cannot parse, and the sender then runs out of room:
         * the missing write-back is caught either way, so only correct
         * code must deliver everything.
         */
        if (!skip_wb || (rx_host == nullptr)) {
            EXPECT_EQ(0, tx.rc) << "sender: " << tx.error;
        } else if (tx.rc != 0) {
            m_sender_stalled = true;
        }
        EXPECT_EQ(0, rx.rc) << "receiver: " << rx.error;
        return rx;
    }

    bool m_sender_stalled = false; /* knob runs: the sender ran out of room */

    void expect_intact(const rx_result &r)
    {
        EXPECT_EQ(NUM_MSG, r.good);
        EXPECT_EQ(0u, r.bad);
    }

    std::string emu_pool()
    {
        /* 8 host arenas of 32 MiB: room for a few 8 MiB receive blocks each */
        std::string path = new_pool(256ull << 20, CXL_COH_SW);
        return path;
    }
};

/* Correct code on the emulator: every payload arrives intact. */
TEST_F(cxl_sw, emulated_hosts_exchange_checked_messages)
{
    std::string path = emu_pool();
    rx_result r = exchange("emulate-nc:" + path, dev_name_of(path), "sw",
                           "1", "0", false);

    expect_intact(r);
}

/* One write-back left out: the emulator makes the receiver see it. */
TEST_F(cxl_sw, emulator_catches_missing_writeback)
{
    std::string path = emu_pool();
    rx_result r = exchange("emulate-nc:" + path, dev_name_of(path), "sw",
                           "1", "0", true);

    EXPECT_GT(r.bad + (NUM_MSG - r.good - r.bad), 0u)
            << "all " << r.good << " messages arrived intact although their "
            << "bodies were never written back";
    EXPECT_LT(r.good, NUM_MSG);
}

/* Payloads in the sender's bulk ring (am_bcopy above 1 KiB) arrive intact
 * across emulated hosts, and leaving out their write-back is caught. */
TEST_F(cxl_sw, emulated_hosts_exchange_checked_bulk_messages)
{
    std::string path = emu_pool();

    MSG_LEN = 6000;
    rx_result r = exchange("emulate-nc:" + path, dev_name_of(path), "sw",
                           "1", "0", false);
    expect_intact(r);

    r = exchange("emulate-nc:" + path, dev_name_of(path), "sw", "1", "0", true);
    MSG_LEN = 1000;
    EXPECT_LT(r.good, NUM_MSG) << "all bulk messages arrived intact although "
                               << "their payloads were never written back";
}

/* The same knob on a coherent mapping changes nothing: it is the emulator
 * that exposes the bug, not the knob that breaks the protocol. */
TEST_F(cxl_sw, knob_is_harmless_on_coherent_pool)
{
    rx_result r = exchange(m_path, dev_name_of(m_path), "sw", nullptr, nullptr,
                           true);

    expect_intact(r);
}

/* Two processes of one emulated host share its view: coherent between
 * them, like processes that share one host's caches. */
TEST_F(cxl_sw, same_emulated_host_processes_share_view)
{
    std::string path = emu_pool();
    rx_result r = exchange("emulate-nc:" + path, dev_name_of(path), "sw",
                           "2", "2", false);

    expect_intact(r);
}

/*
 * A sender must not keep dirty lines of a peer's block.  It used to leave
 * its producer line (head/seq) dirty after every send; when the peer closed
 * and a new interface reused the block, the sender's next flush of that
 * line (at its claim) wrote the old head over the new block, and the
 * channel then looked owned and far ahead.  Seen as "corrupt record" in
 * the sw-mode MPI test.
 */
namespace {

const unsigned N_OLD = 200, N_NEW = 10;

int reuse_receiver(const std::string &dev, int addr_fd, int res_fd, int sync_fd)
{
    rx_result res = {};
    rx_state st;
    addr_msg am;
    char byte;

    for (int round = 0; round < 2; ++round) {
        unsigned want = (round == 0) ? N_OLD : N_NEW;
        stack s;

        st = rx_state();
        if (open_receiver(s, dev, &st, &am) != NULL) {
            write_full(addr_fd, &am, sizeof(am));
            return 1;
        }
        write_full(addr_fd, &am, sizeof(am));
        receive(s, st, want);
        res.good += st.good;
        res.bad  += st.bad;
        if (round == 0) {
            s.close();                   /* the block is freed ... */
            write_full(addr_fd, &am, sizeof(am));
            read_full(sync_fd, &byte, 1); /* ... and the sender let go */
        } else {
            write_full(res_fd, &res, sizeof(res));
            read_full(sync_fd, &byte, 1);
        }
    }
    return 0;
}

/* res.error carries the two blocks' offsets (first field of an address) */
int reuse_sender(const std::string &dev, int addr_fd, int res_fd, int back_fd,
                 int go_fd)
{
    rx_result res = {};
    addr_msg am;
    uct_ep_h ep;
    stack s;
    char byte = 1;

    if (!read_full(addr_fd, &am, sizeof(am)) || (am.dev_len == 0) ||
        (s.open(dev) != UCS_OK) || (s.connect(am.dev, am.iface, &ep) != UCS_OK) ||
        send_n(s, ep, N_OLD, &res)) {
        res.rc = 1;
    }
    memcpy(res.error, am.iface, sizeof(uint64_t));
    read_full(addr_fd, &am, sizeof(am));   /* the receiver closed */
    if (res.rc == 0) {
        s.disconnect(ep);                  /* the peer is gone: no release */
    }
    write_full(back_fd, &byte, 1);
    if ((res.rc == 0) &&
        (!read_full(addr_fd, &am, sizeof(am)) || (am.dev_len == 0) ||
         (s.connect(am.dev, am.iface, &ep) != UCS_OK) ||
         send_n(s, ep, N_NEW, &res))) {
        res.rc = 2;
    }
    memcpy(res.error + sizeof(uint64_t), am.iface, sizeof(uint64_t));
    write_full(res_fd, &res, sizeof(res));
    read_full(go_fd, &byte, 1);
    return 0;
}

} // namespace

TEST_F(cxl_sw, no_dirty_line_survives_a_closed_peer)
{
    std::string path = emu_pool();
    std::string spec = "emulate-nc:" + path, dev = dev_name_of(path);
    int addr[2], back[2], rres[2], tres[2], rgo[2], tgo[2];
    rx_result rx = {}, tx = {};
    pid_t rpid, tpid;
    int status;

    ASSERT_EQ(0, pipe(addr));
    ASSERT_EQ(0, pipe(back));
    ASSERT_EQ(0, pipe(rres));
    ASSERT_EQ(0, pipe(tres));
    ASSERT_EQ(0, pipe(rgo));
    ASSERT_EQ(0, pipe(tgo));
    rpid = fork();
    if (rpid == 0) {
        set_env(spec.c_str(), "sw", "1", false);
        int rc = reuse_receiver(dev, addr[1], rres[1], rgo[0]);
        fflush(NULL);
        _exit(rc);
    }
    tpid = fork();
    if (tpid == 0) {
        set_env(spec.c_str(), "sw", "0", false);
        int rc = reuse_sender(dev, addr[0], tres[1], back[1], tgo[0]);
        fflush(NULL);
        _exit(rc);
    }

    /* relay: the sender let go of the closed receiver -> receiver reopens */
    char byte;
    ASSERT_TRUE(read_full(back[0], &byte, 1));
    ASSERT_TRUE(write_full(rgo[1], &byte, 1));
    bool ok_r = read_full(rres[0], &rx, sizeof(rx));
    bool ok_t = read_full(tres[0], &tx, sizeof(tx));

    /* the new block in memory, through a coherent mapping of the file; it
     * must sit where the closed one was, or there is nothing to catch */
    uint64_t old_off, block_off;
    memcpy(&old_off, tx.error, sizeof(old_off));
    memcpy(&block_off, tx.error + sizeof(old_off), sizeof(block_off));
    EXPECT_EQ(old_off, block_off);
    cxlpool_t *ro = open_readonly(path);
    ASSERT_TRUE(ro != nullptr) << cxlpool_last_error();
    const uint8_t *blk = (const uint8_t*)cxlpool_base(ro) + block_off;
    uint32_t num_channels, num_hosts;
    uint64_t stride, head;
    memcpy(&num_channels, blk + 24, 4);
    memcpy(&stride, blk + 32, 8);
    memcpy(&num_hosts, blk + 48, 4);
    ASSERT_GT(num_hosts, 0u);
    ASSERT_LE(num_hosts, (uint32_t)CXLPOOL_MAX_HOSTS);
    for (uint32_t c = 0; c < num_channels; ++c) {
        memcpy(&head, blk + 64 + 64ull * num_hosts + c * stride + 8, 8);
        EXPECT_LE(head, (uint64_t)N_NEW * 1024)
                << "channel " << c << " of the new block carries a head the "
                << "sender wrote for the closed one";
    }
    cxlpool_close(ro);

    byte = 1;
    write_full(tgo[1], &byte, 1);
    waitpid(tpid, &status, 0);
    write_full(rgo[1], &byte, 1);
    waitpid(rpid, &status, 0);
    for (int *p : {addr, back, rres, tres, rgo, tgo}) {
        close(p[0]);
        close(p[1]);
    }
    EXPECT_TRUE(ok_r && ok_t);
    EXPECT_EQ(0, tx.rc);
    EXPECT_EQ(N_OLD + N_NEW, rx.good);
    EXPECT_EQ(0u, rx.bad);
}

/*
 * A sender in sw mode re-reads the receiver's header line only every
 * UCX_CXL_PEER_CHECK, so a receiver's close is not seen at once.  The
 * receiver therefore frees its block only twice that long after its
 * close: a sender that checked just before the close and sends right
 * after the block came back to a new interface must find the header
 * changed.  With the close not waiting (and a check interval longer than
 * a close and reopen) the old endpoint's send succeeds here and writes
 * into the new interface's block.
 */
namespace {

const char *PEER_CHECK = "300ms";

int linger_receiver(const std::string &dev, int addr_fd, int res_fd,
                    int go_fd)
{
    rx_result res = {};
    rx_state st, st2;
    addr_msg am;
    char byte;

    {
        stack s;
        if (open_receiver(s, dev, &st, &am) != NULL) {
            write_full(addr_fd, &am, sizeof(am));
            return 1;
        }
        write_full(addr_fd, &am, sizeof(am));
        receive(s, st, 1);
        res.good = st.good + st.bad;    /* an 8-byte message: counted bad */
    } /* closed: the block goes back to the pool */

    stack s2;
    if (open_receiver(s2, dev, &st2, &am) != NULL) {
        res.rc = 1;
    }
    write_full(addr_fd, &am, sizeof(am));
    read_full(go_fd, &byte, 1);         /* the old endpoint sent */
    for (int i = 0; i < 1000; ++i) {
        uct_worker_progress(s2.worker);
    }
    res.bad = st2.good + st2.bad;       /* nothing may arrive here */
    write_full(res_fd, &res, sizeof(res));
    read_full(go_fd, &byte, 1);
    return 0;
}

struct linger_result {
    int32_t  rc;
    int32_t  status;    /* of the old endpoint's send after the reopen */
    uint64_t old_off;
    uint64_t new_off;
};

int linger_sender(const std::string &dev, int addr_fd, int res_fd, int back_fd,
                  int go_fd)
{
    linger_result res = {};
    uint64_t payload  = 0;
    addr_msg am;
    uct_ep_h ep;
    stack s;
    char byte = 1;

    res.status = UCS_OK;
    if (!read_full(addr_fd, &am, sizeof(am)) || (am.dev_len == 0) ||
        (s.open(dev) != UCS_OK) || (s.connect(am.dev, am.iface, &ep) != UCS_OK) ||
        (uct_ep_am_short(ep, AM_ID, 0, &payload, sizeof(payload)) != UCS_OK)) {
        res.rc = 1;
    }
    memcpy(&res.old_off, am.iface, sizeof(uint64_t));
    if (!read_full(addr_fd, &am, sizeof(am)) || (am.dev_len == 0)) {
        res.rc = 2;
    }
    memcpy(&res.new_off, am.iface, sizeof(uint64_t));
    if (res.rc == 0) {
        res.status = uct_ep_am_short(ep, AM_ID, 0, &payload, sizeof(payload));
    }
    write_full(back_fd, &byte, 1);
    write_full(res_fd, &res, sizeof(res));
    read_full(go_fd, &byte, 1);
    return 0;
}

} // namespace

TEST_F(cxl_sw, closed_receiver_outlives_the_senders_check_interval)
{
    std::string path = emu_pool();
    std::string spec = "emulate-nc:" + path, dev = dev_name_of(path);
    int addr[2], back[2], rres[2], tres[2], rgo[2], tgo[2];
    rx_result rx = {};
    linger_result tx = {};
    pid_t rpid, tpid;
    int status;

    for (int *p : {addr, back, rres, tres, rgo, tgo}) {
        ASSERT_EQ(0, pipe(p));
    }
    rpid = fork();
    if (rpid == 0) {
        set_env(spec.c_str(), "sw", "1", false);
        setenv("UCX_CXL_PEER_CHECK", PEER_CHECK, 1);
        int rc = linger_receiver(dev, addr[1], rres[1], rgo[0]);
        fflush(NULL);
        _exit(rc);
    }
    tpid = fork();
    if (tpid == 0) {
        set_env(spec.c_str(), "sw", "0", false);
        setenv("UCX_CXL_PEER_CHECK", PEER_CHECK, 1);
        int rc = linger_sender(dev, addr[0], tres[1], back[1], tgo[0]);
        fflush(NULL);
        _exit(rc);
    }

    char byte;
    bool ok = read_full(back[0], &byte, 1) && write_full(rgo[1], &byte, 1);
    bool ok_t = read_full(tres[0], &tx, sizeof(tx));
    bool ok_r = read_full(rres[0], &rx, sizeof(rx));
    byte = 1;
    write_full(tgo[1], &byte, 1);
    waitpid(tpid, &status, 0);
    write_full(rgo[1], &byte, 1);
    waitpid(rpid, &status, 0);
    for (int *p : {addr, back, rres, tres, rgo, tgo}) {
        close(p[0]);
        close(p[1]);
    }

    ASSERT_TRUE(ok && ok_t && ok_r) << "a child died before reporting";
    EXPECT_EQ(0, tx.rc);
    EXPECT_EQ(0, rx.rc);
    EXPECT_EQ(1u, rx.good);
    ASSERT_EQ(tx.old_off, tx.new_off) << "the scenario needs the block reused";
    EXPECT_EQ(UCS_ERR_CONNECTION_RESET, tx.status)
            << "the old endpoint wrote into the reused block";
    EXPECT_EQ(0u, rx.bad);
}

/*
 * A sender stores its position in the producer line only every half ring
 * (and at release).  When it dies, the next owner of its channel (a
 * process of the same host) walks the ring from there to the dead
 * owner's last record; without that walk it would write at an old
 * position with old sequence numbers, which the receiver never accepts.
 */
namespace {

const unsigned N_DEAD = 100, N_HEIR = 20; /* 100 KiB: periodic stores, then a walk */

int heir_receiver(const std::string &dev, int addr_fd, int res_fd, int go_fd)
{
    rx_result res = {};
    rx_state st;
    addr_msg am;
    stack s;
    char byte;
    const char *failed = open_receiver(s, dev, &st, &am);

    write_full(addr_fd, &am, sizeof(am));
    write_full(addr_fd, &am, sizeof(am)); /* one for each sender */
    if (failed != NULL) {
        res.rc = 1;
        write_full(res_fd, &res, sizeof(res));
        return 1;
    }
    receive(s, st, N_DEAD + N_HEIR);
    res.good = st.good;
    res.bad  = st.bad;
    write_full(res_fd, &res, sizeof(res));
    read_full(go_fd, &byte, 1);
    return 0;
}

/* first: sends N_DEAD and waits to be killed; heir: opens first (so that
 * the emulated host stays alive), connects when told, sends N_HEIR */
int heir_sender(const std::string &dev, bool first, int addr_fd, int res_fd,
                int go_fd)
{
    rx_result res = {};
    addr_msg am;
    uct_ep_h ep;
    stack s;
    char byte = 1;

    if (!read_full(addr_fd, &am, sizeof(am)) || (am.dev_len == 0) ||
        (s.open(dev) != UCS_OK)) {
        res.rc = 1;
    }
    write_full(res_fd, &byte, 1);          /* open */
    read_full(go_fd, &byte, 1);            /* (heir: the first one is dead) */
    if ((res.rc == 0) && ((s.connect(am.dev, am.iface, &ep) != UCS_OK) ||
                          send_n(s, ep, first ? N_DEAD : N_HEIR, &res))) {
        res.rc = 2;
    }
    write_full(res_fd, &res, sizeof(res));
    if (first) {
        pause();                           /* killed here, channel held */
    }
    read_full(go_fd, &byte, 1);
    return 0;
}

} // namespace

TEST_F(cxl_sw, channel_of_a_dead_sender_continues_where_it_stopped)
{
    std::string path = emu_pool();
    std::string spec = "emulate-nc:" + path, dev = dev_name_of(path);
    int addr[2], rres[2], ares[2], bres[2], rgo[2], ago[2], bgo[2];
    rx_result rx = {}, a = {}, b = {};
    pid_t rpid, apid, bpid;
    char byte = 1;
    int status;

    for (int *p : {addr, rres, ares, bres, rgo, ago, bgo}) {
        ASSERT_EQ(0, pipe(p));
    }
    rpid = fork();
    if (rpid == 0) {
        set_env(spec.c_str(), "sw", "1", false);
        setenv("UCX_CXL_NUM_CHANNELS", "8", 1); /* one channel per host */
        int rc = heir_receiver(dev, addr[1], rres[1], rgo[0]);
        fflush(NULL);
        _exit(rc);
    }
    bpid = fork();
    if (bpid == 0) {
        set_env(spec.c_str(), "sw", "0", false);
        int rc = heir_sender(dev, false, addr[0], bres[1], bgo[0]);
        fflush(NULL);
        _exit(rc);
    }
    ASSERT_TRUE(read_full(bres[0], &byte, 1)); /* the heir keeps host 0 up */
    apid = fork();
    if (apid == 0) {
        set_env(spec.c_str(), "sw", "0", false);
        int rc = heir_sender(dev, true, addr[0], ares[1], ago[0]);
        fflush(NULL);
        _exit(rc);
    }
    ASSERT_TRUE(read_full(ares[0], &byte, 1));
    write_full(ago[1], &byte, 1);
    bool ok_a = read_full(ares[0], &a, sizeof(a));
    kill(apid, SIGKILL);                       /* it still owns the channel */
    waitpid(apid, &status, 0);
    write_full(bgo[1], &byte, 1);
    bool ok_b = read_full(bres[0], &b, sizeof(b));
    bool ok_r = read_full(rres[0], &rx, sizeof(rx));
    write_full(bgo[1], &byte, 1);
    waitpid(bpid, &status, 0);
    write_full(rgo[1], &byte, 1);
    waitpid(rpid, &status, 0);
    for (int *p : {addr, rres, ares, bres, rgo, ago, bgo}) {
        close(p[0]);
        close(p[1]);
    }

    ASSERT_TRUE(ok_a && ok_b && ok_r) << "a child died before reporting";
    EXPECT_EQ(0, a.rc) << a.error;
    EXPECT_EQ(0, b.rc) << b.error;
    EXPECT_EQ(0, rx.rc);
    EXPECT_EQ(N_DEAD + N_HEIR, rx.good);
    EXPECT_EQ(0u, rx.bad);
}

/*
 * What the sw-mode data path costs, counted: write-backs, invalidates and
 * fences per message on each side (cxl_coh_count_*), two interfaces of one
 * process on a directly mapped sw pool.  The bounds are the ones argued in
 * doc/design/sw-coherence.md ("What the data path flushes"); each is
 * exceeded by the code before that change.
 */
namespace {

/* the receiver's look at its claim lines: every 16 progress calls
 * (UCT_CXL_CLAIM_POLL), one line per host partition of the pool */
const unsigned CLAIM_POLL  = 16;
const unsigned CLAIM_LINES = CXLPOOL_DEFAULT_SW_HOSTS;

struct coh_phase {
    cxl_coh_counts_t c;
    unsigned         n; /* messages (or progress calls) of the phase */

    double per(unsigned long v) const { return (double)v / n; }
};

std::ostream &operator<<(std::ostream &os, const coh_phase &p)
{
    return os << "per op: writeback " << p.per(p.c.writeback) << " ("
              << p.per(p.c.writeback_lines) << " lines), invalidate "
              << p.per(p.c.invalidate) << " (" << p.per(p.c.invalidate_lines)
              << " lines), fence " << p.per(p.c.fence) << " over " << p.n;
}

} // namespace

class cxl_sw_cost : public cxl_test {
protected:
    void SetUp() override
    {
        cxl_test::SetUp();
        m_sw = new_pool(256ull << 20, CXL_COH_SW);
        use_pools(m_sw);
        set_coherence("sw");
        setenv("UCX_CXL_HOST_INDEX", "0", 1);
        /* the header re-read comes at the first send only, even in a slow
         * (sanitizer) build; each close then waits 200 ms */
        setenv("UCX_CXL_PEER_CHECK", "100ms", 1);
    }

    void TearDown() override
    {
        cxl_coh_count_stop();
        unsetenv("UCX_CXL_HOST_INDEX");
        unsetenv("UCX_CXL_PEER_CHECK");
        unsetenv("UCX_CXL_NUM_CHANNELS");
        cxl_test::TearDown();
    }

    static ucs_status_t count_cb(void *arg, void *, size_t,
                                 unsigned)
    {
        (*static_cast<unsigned*>(arg))++;
        return UCS_OK;
    }

    void open_pair(stack &r, stack &s, uct_ep_h *ep)
    {
        ASSERT_NO_FATAL_FAILURE(open_stack(r, m_sw));
        ASSERT_NO_FATAL_FAILURE(open_stack(s, m_sw));
        ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(r.iface, AM_ID, count_cb,
                                                   &m_received,
                                                   UCT_CB_FLAG_ASYNC));
        uct_iface_progress_enable(r.iface, UCT_PROGRESS_SEND |
                                  UCT_PROGRESS_RECV);
        uct_iface_progress_enable(s.iface, UCT_PROGRESS_SEND |
                                  UCT_PROGRESS_RECV);
        ASSERT_EQ(UCS_OK, s.connect_to(r, ep)) << s.error;
    }

    coh_phase end_phase(unsigned n)
    {
        coh_phase p;

        cxl_coh_count_get(&p.c);
        p.n = n;
        return p;
    }

    std::string m_sw;
    unsigned    m_received = 0;
};

/* 8-byte am_short: one-line records. */
TEST_F(cxl_sw_cost, short_message)
{
    const unsigned n = 64, idle = 1024;
    uint64_t payload = 0x5a5a;
    stack r, s;
    uct_ep_h ep;

    open_pair(r, s, &ep);
    ASSERT_FALSE(HasFatalFailure());

    /* sender: no receiver progress in between (the ring holds them all) */
    cxl_coh_count_start();
    for (unsigned i = 0; i < n; ++i) {
        ASSERT_EQ(UCS_OK, uct_ep_am_short(ep, AM_ID, i, &payload,
                                          sizeof(payload)));
    }
    coh_phase tx = end_phase(n);

    cxl_coh_count_start();
    unsigned calls = 0;
    while ((m_received < n) && (calls < 100000)) {
        uct_iface_progress(r.iface);
        ++calls;
    }
    ASSERT_EQ(n, m_received);
    coh_phase rx = end_phase(n);

    cxl_coh_count_start();
    for (unsigned i = 0; i < idle; ++i) {
        uct_iface_progress(r.iface);
    }
    coh_phase empty = end_phase(idle);
    cxl_coh_count_stop();

    std::cout << "sender  " << tx << "\nreceiver " << rx << " (" << calls
              << " progress calls)\nempty poll " << empty << std::endl;

    /* sender: the record (body, then the line with its sequence number)
     * with one fence between them, no producer line (only every half
     * ring); the receiver's header is re-read only at the first send
     * (PEER_CHECK), and waking a receiver reads no line from memory */
    EXPECT_LE(tx.c.writeback, 2ul * n);
    EXPECT_LE(tx.c.fence, 1ul * n);
    EXPECT_LE(tx.c.invalidate, 1ul);
    if (cxl_coh_line_atomic()) {
        /* one-line records: one atomic line store each, no fence */
        EXPECT_EQ((unsigned long)n, tx.c.writeback);
        EXPECT_EQ(0ul, tx.c.fence);
    }
    /* receiver: each record line is fetched once (not again for its
     * body), the line after the last one once per progress call, and the
     * claim lines (one call for all hosts) only every CLAIM_POLL calls */
    EXPECT_LE(rx.c.invalidate, n + calls + 1ul);
    EXPECT_LE(rx.c.invalidate_lines, n + calls + CLAIM_LINES);
    EXPECT_LE(empty.per(empty.c.invalidate), 1.0 + 1.0 / CLAIM_POLL);
    EXPECT_LE(empty.per(empty.c.invalidate_lines),
              1.0 + (double)CLAIM_LINES / CLAIM_POLL);
    EXPECT_EQ(0ul, empty.c.writeback);
    EXPECT_EQ(0ul, empty.c.fence);
}

/*
 * Records that stream (the receiver's previous look found more than one):
 * the lines ahead are invalidated UCT_CXL_RX_WINDOW at a time, so their
 * misses overlap; before, each record was one invalidate and one memory
 * round trip of its own (sw am_bw 8 B 3.7 M/s, now 14.5 M/s on the VM).
 */
TEST_F(cxl_sw_cost, streamed_records_are_fetched_in_windows)
{
    const unsigned n = 64;
    uint64_t payload = 0x5a5a;
    unsigned calls = 0;
    stack r, s;
    uct_ep_h ep;

    open_pair(r, s, &ep);
    ASSERT_FALSE(HasFatalFailure());
    /* a first stream, so that the receiver knows records stream */
    for (unsigned i = 0; i < n; ++i) {
        ASSERT_EQ(UCS_OK, uct_ep_am_short(ep, AM_ID, i, &payload,
                                          sizeof(payload)));
    }
    while ((m_received < n) && (calls < 100000)) {
        uct_iface_progress(r.iface);
        ++calls;
    }
    ASSERT_EQ(n, m_received);

    for (unsigned i = 0; i < n; ++i) {
        ASSERT_EQ(UCS_OK, uct_ep_am_short(ep, AM_ID, i, &payload,
                                          sizeof(payload)));
    }
    calls = 0;
    cxl_coh_count_start();
    while ((m_received < 2 * n) && (calls < 100000)) {
        uct_iface_progress(r.iface);
        ++calls;
    }
    coh_phase rx = end_phase(n);
    cxl_coh_count_stop();
    ASSERT_EQ(2 * n, m_received);

    std::cout << "receiver " << rx << " (" << calls << " progress calls)"
              << std::endl;
    /* per progress call: the batched fetch of the heads, a window started
     * in it, the claim lines; then one window per UCT_CXL_RX_WINDOW
     * records */
    EXPECT_LE(rx.c.invalidate, n / UCT_CXL_RX_WINDOW + 3ul * calls);
    EXPECT_LT(rx.c.invalidate, n / 2) << "one invalidate per record";
}

/*
 * One record at a time (a ping-pong): the progress call that delivers it
 * invalidates only the record line it found, and looks at the line after
 * it with a plain load, so no memory round trip lies between a delivery
 * and the reply it triggers (before: a second invalidate each time).
 */
TEST_F(cxl_sw_cost, lone_record_costs_one_invalidate)
{
    const unsigned n = 64;
    uint64_t payload = 0x5a5a;
    unsigned calls = 0;
    stack r, s;
    uct_ep_h ep;

    open_pair(r, s, &ep);
    ASSERT_FALSE(HasFatalFailure());

    /* warm up: the first send re-reads the receiver's header */
    ASSERT_EQ(UCS_OK, uct_ep_am_short(ep, AM_ID, 0, &payload,
                                      sizeof(payload)));
    while ((m_received < 1) && (calls < 100000)) {
        uct_iface_progress(r.iface);
        ++calls;
    }
    ASSERT_EQ(1u, m_received);

    calls = 0;
    cxl_coh_count_start();
    for (unsigned i = 1; i <= n; ++i) {
        ASSERT_EQ(UCS_OK, uct_ep_am_short(ep, AM_ID, i, &payload,
                                          sizeof(payload)));
        while ((m_received < i + 1) && (calls < 100000)) {
            uct_iface_progress(r.iface);
            ++calls;
        }
        ASSERT_EQ(i + 1, m_received);
    }
    coh_phase both = end_phase(n);
    cxl_coh_count_stop();

    std::cout << "sender+receiver " << both << " (" << calls
              << " progress calls)" << std::endl;
    /* the sender invalidates nothing (PEER_CHECK is 100 ms); each
     * progress call one batched fetch, plus the claim lines every
     * CLAIM_POLL calls */
    EXPECT_LE(both.c.invalidate, calls + calls / CLAIM_POLL + 1ul);
}

/* 1000-byte am_bcopy: 16-line records. */
TEST_F(cxl_sw_cost, multi_line_message)
{
    const unsigned n = 32;
    stack r, s;
    uct_ep_h ep;

    open_pair(r, s, &ep);
    ASSERT_FALSE(HasFatalFailure());

    cxl_coh_count_start();
    for (unsigned i = 0; i < n; ++i) {
        tx_arg arg = {i};
        ASSERT_EQ((ssize_t)MSG_LEN, uct_ep_am_bcopy(ep, AM_ID, tx_pack, &arg,
                                                    0));
    }
    coh_phase tx = end_phase(n);

    cxl_coh_count_start();
    unsigned calls = 0;
    while ((m_received < n) && (calls < 100000)) {
        uct_iface_progress(r.iface);
        ++calls;
    }
    ASSERT_EQ(n, m_received);
    coh_phase rx = end_phase(n);
    cxl_coh_count_stop();

    std::cout << "sender  " << tx << "\nreceiver " << rx << " (" << calls
              << " progress calls)" << std::endl;

    /* the record's lines (all but the first streamed in one call), its
     * first line again after seq, and the producer line once in these
     * 32 KiB (half the ring) */
    const unsigned long lines = uct_cxl_rec_size(MSG_LEN) / UCT_CXL_LINE;
    EXPECT_LE(tx.c.writeback, 3ul * n + 1);
    EXPECT_LE(tx.c.writeback_lines, (lines + 1) * n + 1);
    EXPECT_LE(tx.c.fence, 1ul * n);
    EXPECT_LE(tx.c.invalidate, 1ul);
    /* every line of a record once */
    EXPECT_LE(rx.c.invalidate_lines, lines * n + calls + CLAIM_LINES);
}

/*
 * Polling n empty channels: their record lines go into one invalidate, so
 * the misses overlap (before: one invalidate, one round trip, each).
 */
TEST_F(cxl_sw_cost, empty_poll_of_many_channels)
{
    const unsigned senders = 4, idle = 1024;
    uint64_t payload = 7;
    stack r, s[senders];
    uct_ep_h ep[senders];

    /* blocks of 2 MiB: five of them fit into a host partition's arena */
    setenv("UCX_CXL_NUM_CHANNELS", "32", 1);
    open_pair(r, s[0], &ep[0]);
    ASSERT_FALSE(HasFatalFailure());
    for (unsigned i = 1; i < senders; ++i) {
        ASSERT_NO_FATAL_FAILURE(open_stack(s[i], m_sw));
        ASSERT_EQ(UCS_OK, s[i].connect_to(r, &ep[i])) << s[i].error;
    }
    for (unsigned i = 0; i < senders; ++i) {
        ASSERT_EQ(UCS_OK, uct_ep_am_short(ep[i], AM_ID, i, &payload,
                                          sizeof(payload)));
    }
    for (int i = 0; (i < 100000) && (m_received < senders); ++i) {
        uct_iface_progress(r.iface);
    }
    ASSERT_EQ(senders, m_received);

    clk::time_point t0 = clk::now();
    for (unsigned i = 0; i < idle; ++i) {
        uct_iface_progress(r.iface);
    }
    double ns = std::chrono::duration<double, std::nano>(clk::now() - t0).count();
    cxl_coh_count_start();
    for (unsigned i = 0; i < idle; ++i) {
        uct_iface_progress(r.iface);
    }
    coh_phase empty = end_phase(idle);
    cxl_coh_count_stop();
    std::cout << "empty poll of " << senders << " channels: " << ns / idle
              << " ns per progress call; " << empty << std::endl;
    EXPECT_LE(empty.per(empty.c.invalidate), 1.0 + 1.0 / CLAIM_POLL);
    EXPECT_LE(empty.per(empty.c.invalidate_lines),
              senders + (double)CLAIM_LINES / CLAIM_POLL);
    for (unsigned i = senders; i-- > 0;) {
        s[i].close();
    }
    unsetenv("UCX_CXL_NUM_CHANNELS");
}

/*
 * A receiver that sleeps is woken (UCX_CXL_EVENTS=y: all peers share the
 * host), and the sender's check of "armed" reads no line from memory.
 */
TEST_F(cxl_sw_cost, wakeup_reads_no_line_from_memory)
{
    uint64_t payload = 1;
    stack r, s;
    uct_ep_h ep;
    int fd;

    setenv("UCX_CXL_EVENTS", "y", 1);
    open_pair(r, s, &ep);
    unsetenv("UCX_CXL_EVENTS");
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_TRUE(r.iface_attr.cap.event_flags & UCT_IFACE_FLAG_EVENT_RECV);
    ASSERT_EQ(UCS_OK, uct_iface_event_fd_get(r.iface, &fd));
    /* where the kernel offers membarrier(GLOBAL_EXPEDITED) the receiver's
     * arm carries the barrier and says so, and senders skip their
     * per-message fence (before: always UCT_CXL_EVENTS_FENCE) */
    {
        int cmds = (int)syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);

        EXPECT_EQ((cmds > 0) && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED),
                  uct_cxl_membarrier_registered != 0);
    }

    /* the first send re-reads the receiver's header */
    ASSERT_EQ(UCS_OK, uct_ep_am_short(ep, AM_ID, 0, &payload, sizeof(payload)));
    for (int i = 0; (i < 100000) && (m_received < 1); ++i) {
        uct_iface_progress(r.iface);
    }
    ASSERT_EQ(1u, m_received);
    ASSERT_EQ(UCS_OK, uct_iface_event_arm(r.iface, UCT_EVENT_RECV));

    cxl_coh_count_start();
    for (unsigned i = 0; i < 10; ++i) {
        ASSERT_EQ(UCS_OK, uct_ep_am_short(ep, AM_ID, 1, &payload,
                                          sizeof(payload)));
    }
    coh_phase tx = end_phase(10);
    cxl_coh_count_stop();
    EXPECT_EQ(0ul, tx.c.invalidate); /* before: one per send */

    struct pollfd pfd = {fd, POLLIN, 0};
    EXPECT_EQ(1, poll(&pfd, 1, 5000)) << "the sleeping receiver was not woken";
    for (int i = 0; (i < 100000) && (m_received < 11); ++i) {
        uct_iface_progress(r.iface);
    }
    EXPECT_EQ(11u, m_received);
}

/* Without UCX_CXL_EVENTS=y, sw mode has no events even on a /dev/shm
 * pool file (in hw mode it has): its peers are hosts that share no caches,
 * and a signal reaches only the own host.  So the sender's data path has
 * no fence for a receiver that might sleep. */
TEST_F(cxl_sw_cost, no_events_by_default)
{
    uint64_t payload = 1;
    stack r, s;
    uct_ep_h ep;

    {   /* the same kind of pool file in hw mode */
        stack h;
        std::string hw = new_pool(64ull << 20, CXL_COH_HW);
        use_pools(hw);
        set_coherence("hw");
        ASSERT_NO_FATAL_FAILURE(open_stack(h, hw));
        EXPECT_NE(0u, h.iface_attr.cap.event_flags & UCT_IFACE_FLAG_EVENT_RECV);
    }
    use_pools(m_sw);
    set_coherence("sw");
    open_pair(r, s, &ep);
    ASSERT_FALSE(HasFatalFailure());
    EXPECT_EQ(0u, r.iface_attr.cap.event_flags & UCT_IFACE_FLAG_EVENT_RECV);
    cxl_coh_count_start();
    for (unsigned i = 0; i < 10; ++i) {
        ASSERT_EQ(UCS_OK, uct_ep_am_short(ep, AM_ID, 0, &payload,
                                          sizeof(payload)));
    }
    coh_phase tx = end_phase(10);
    cxl_coh_count_stop();
    EXPECT_LE(tx.c.fence, 10ul);
    EXPECT_LE(tx.c.invalidate, 1ul);
}

/* The emulator's processes are hosts of their own: no events there, even
 * with UCX_CXL_EVENTS=y (waking relies on one host's caches). */
TEST_F(cxl_sw_cost, no_events_on_the_emulator)
{
    std::string path = new_pool(64ull << 20, CXL_COH_SW, "", 1);
    stack r;

    use_pools("emulate-nc:" + path);
    setenv("UCX_CXL_EVENTS", "y", 1);
    {
        hide_errors hide;
        open_stack(r, path);
    }
    unsetenv("UCX_CXL_EVENTS");
    ASSERT_FALSE(HasFatalFailure());
    EXPECT_EQ(0u, r.iface_attr.cap.event_flags & UCT_IFACE_FLAG_EVENT_RECV);
}
