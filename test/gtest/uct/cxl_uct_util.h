/*
 * Helpers of the UCT transport tests: a scratch pool per fixture, a UCT
 * stack (MD + worker + interface) that also works in forked children, the
 * mirror of the packed remote key, patterns and guard bytes.
 *
 * Only the public UCT API is used.  The transport is linked into the test
 * binary, so its ELF constructor registers the component "cxl".
 */
#ifndef CXL_UCT_UTIL_H
#define CXL_UCT_UTIL_H

#include "../pool/pool_test_util.h"

#include <uct/api/uct.h>
#include <ucs/async/async_fwd.h>
#include <ucs/debug/log_def.h>

#include <gtest/gtest.h>
#include <cstdlib>
#include <string>
#include <vector>

namespace cxluct {

/*
 * Mirror of the transport's packed remote key.  The CRC is CRC32C over the
 * 72 bytes with the crc field zeroed, computed with cxlpool_crc32c(0, ...).
 */
struct packed_rkey {
    uint32_t magic;
    uint32_t crc;
    uint8_t  uuid[CXLPOOL_UUID_LEN];
    uint64_t offset;
    uint64_t length;
    uint64_t owner_va;
    uint32_t ext_index;
    uint32_t ext_gen;
    uint64_t owner;      /* the registering process */
    uint32_t host;       /* its host partition of the pool */
    uint32_t reserved;
} __attribute__((packed));

static_assert(sizeof(packed_rkey) == 72, "the packed key is 72 bytes");

uint32_t rkey_crc(const packed_rkey &key);
void     rkey_fix_crc(packed_rkey *key);

/* The "cxl" component, NULL when it is not registered. */
uct_component_h cxl_component();

/* A short unique pool path under /dev/shm ("/dev/shm/cxlu-<pid>-<n><tag>.pool")
 * so the device name (basename without ".pool") fits UCT_DEVICE_NAME_MAX. */
std::string unique_pool_path(const char *tag = "");
/* "/dev/shm/x-1.pool" -> "x-1" */
std::string dev_name_of(const std::string &path);
/* Create a pool (CREATE|EXCL|NO_ATTACH); returns "" or the error text. */
std::string create_pool(const std::string &path, uint64_t size,
                        cxl_coh_mode_t coh = CXL_COH_HW,
                        uint32_t nr_hosts = 0);

/* A read-only, unattached handle on a pool (NULL on error), for
 * inspection next to the transport's own handle. */
cxlpool_t *open_readonly(const std::string &path);

/* Writable shared mapping of path in this process (from /proc/self/maps). */
struct mapping {
    uintptr_t start;
    uintptr_t end;
    uint64_t  file_offset;
};
std::vector<mapping> find_mappings(const std::string &path, bool writable);

/* Pseudo-random bytes from seed; guard bytes are a fixed function of index. */
void    fill_random(void *p, size_t len, uint64_t seed);
uint8_t guard_byte(size_t index);
void    fill_guard(void *p, size_t len, size_t index0);
/* Index of the first byte of p that is not the guard, or -1. */
ssize_t guard_mismatch(const void *p, size_t len, size_t index0);
/* Index of the first differing byte, or -1. */
ssize_t first_diff(const void *a, const void *b, size_t len);

/*
 * MD + async context + worker + interface + endpoints, opened from the
 * environment as it is when open_md() is called.  No gtest assertions, so
 * children of fork() can use it: every call returns a status and leaves a
 * description in error.
 */
class stack {
public:
    stack() = default;
    ~stack() { close(); }
    stack(const stack&) = delete;
    stack &operator=(const stack&) = delete;

    ucs_status_t open_md();
    ucs_status_t devices(std::vector<uct_tl_resource_desc_t> *res);
    ucs_status_t open_iface(const std::string &dev,
                            ucs_thread_mode_t mode = UCS_THREAD_MODE_SINGLE);
    /* open_md() + open_iface(dev) */
    ucs_status_t open(const std::string &dev);
    /* close() destroys the endpoints first, then the interface and MD.
     * Close a stack whose endpoints connect to another stack's interface
     * before that one. */

    ucs_status_t connect(const void *dev_addr, const void *iface_addr,
                         uct_ep_h *ep_p);
    ucs_status_t connect_to(const stack &peer, uct_ep_h *ep_p)
    {
        return connect(peer.dev_addr.data(), peer.iface_addr.data(), ep_p);
    }

    /* destroy one endpoint of this stack */
    void disconnect(uct_ep_h ep);

    /* uct_mem_alloc() with the MD method on this MD */
    ucs_status_t alloc(size_t length, uct_allocated_memory_t *mem);
    ucs_status_t pack(uct_mem_h memh, std::vector<uint8_t> *buf);

    void close();

    uct_component_h      component = nullptr;
    uct_md_h             md        = nullptr;
    uct_md_attr_t        md_attr;
    ucs_async_context_t *async     = nullptr;
    uct_worker_h         worker    = nullptr;
    uct_iface_h          iface     = nullptr;
    uct_iface_attr_t     iface_attr;
    std::vector<uint8_t> dev_addr;
    std::vector<uint8_t> iface_addr;
    std::vector<uct_ep_h> eps;
    std::string          error;
};

/* What one process tells another to reach its memory (over a pipe). */
struct peer_info {
    uint8_t  rkey[96];
    uint64_t address;      /* the owner's virtual address of the buffer */
    uint64_t length;
    uint32_t dev_addr_len;
    uint32_t iface_addr_len;
    uint8_t  dev_addr[32];
    uint8_t  iface_addr[32];
};

/* Describe mem of s (packs its key); false if something does not fit. */
bool make_peer_info(stack &s, const uct_allocated_memory_t &mem,
                    peer_info *info);
bool write_full(int fd, const void *buf, size_t len);
bool read_full(int fd, void *buf, size_t len);

/* An unpacked remote key, released when it goes out of scope. */
class rkey {
public:
    rkey() { m_bundle.rkey = UCT_INVALID_RKEY; m_bundle.handle = nullptr; }
    ~rkey() { release(); }
    rkey(const rkey&) = delete;
    rkey &operator=(const rkey&) = delete;

    ucs_status_t unpack(uct_component_h component, const void *buffer);
    ucs_status_t ptr(uint64_t remote_addr, void **local_p);
    void         release();
    uct_rkey_t   get() const { return m_bundle.rkey; }
    bool         valid() const { return m_component != nullptr; }

private:
    uct_component_h   m_component = nullptr;
    uct_rkey_bundle_t m_bundle;
};

/* Set an environment variable for the life of the object. */
class scoped_env {
public:
    scoped_env(const char *name, const char *value) : m_name(name)
    {
        const char *old = getenv(name);
        m_had = (old != nullptr);
        if (m_had) {
            m_old = old;
        }
        setenv(name, value, 1);
    }
    ~scoped_env()
    {
        if (m_had) {
            setenv(m_name.c_str(), m_old.c_str(), 1);
        } else {
            unsetenv(m_name.c_str());
        }
    }
    scoped_env(const scoped_env&) = delete;
    scoped_env &operator=(const scoped_env&) = delete;

private:
    std::string m_name, m_old;
    bool        m_had;
};

/*
 * The whole pool file mapped shared in the test, for tests that play a
 * peer writing into an interface's block behind the transport's back.
 */
class pool_map {
public:
    explicit pool_map(const std::string &path);
    ~pool_map();
    pool_map(const pool_map&) = delete;
    pool_map &operator=(const pool_map&) = delete;

    bool     ok() const { return m_base != nullptr; }
    void    *at(uint64_t offset) const { return m_base + offset; }
    uint64_t size() const { return m_size; }

private:
    uint8_t *m_base = nullptr;
    uint64_t m_size = 0;
};

/* The transport's interface address (uct_cxl_iface_addr_t). */
struct iface_addr {
    uint64_t block_offset;
    uint64_t id;
};

/*
 * While alive, UCX error and warning messages are not printed but kept:
 * for tests that provoke errors on purpose.  Fatal messages still print.
 */
class hide_errors {
public:
    hide_errors();
    ~hide_errors();
    hide_errors(const hide_errors&) = delete;
    hide_errors &operator=(const hide_errors&) = delete;

    static std::vector<std::string> &messages();
};

/*
 * Fixture base: one scratch pool (128 MiB, hardware-coherent) per test,
 * selected with UCX_CXL_POOL; UCX_CXL_COHERENCE is "hw" unless a test
 * changes it.  Every pool made with new_pool() is removed in TearDown.
 */
class cxl_test : public ::testing::Test {
protected:
    void SetUp() override;
    void TearDown() override;

    std::string new_pool(uint64_t size = 64ull << 20,
                         cxl_coh_mode_t coh = CXL_COH_HW,
                         const char *tag = "", uint32_t nr_hosts = 0);
    /* UCX_CXL_POOL=value */
    static void use_pools(const std::string &value);
    static void set_coherence(const char *mode);

    /* Open stack s on the device of pool (default: m_path). */
    void open_stack(stack &s, const std::string &pool = "");
    /* Pool statistics through a separate read-only handle. */
    void pool_stats(cxlpool_stats_t *stats, const std::string &pool = "");
    void pool_info(cxlpool_info_t *info, const std::string &pool = "");

    std::string              m_path;
    std::vector<std::string> m_pools;
};

/*
 * An initiator stack m_s1 with an endpoint to a target (m_s1 itself, or a
 * second stack m_s2), and a target buffer of the given size allocated on
 * the target, filled with the guard pattern, whose key m_s1 has unpacked.
 */
class cxl_target_test : public cxl_test {
protected:
    void open_target(bool two_ifaces, size_t size);
    void close_target();
    stack &target() { return m_two_ifaces ? m_s2 : m_s1; }

    stack                  m_s1, m_s2;
    bool                   m_two_ifaces = false;
    uct_ep_h               m_ep = nullptr;
    uct_allocated_memory_t m_mem;
    bool                   m_allocated = false;
    rkey                   m_key;
    uint8_t               *m_base = nullptr;
};

} // namespace cxluct

#endif
