/*
 * Helpers shared by the pool tests: scratch pools, file snapshots, forking.
 */
#ifndef POOL_TEST_UTIL_H
#define POOL_TEST_UTIL_H

#include <ucx_cxl/cxlpool.h>

#include <gtest/gtest.h>
#include <functional>
#include <string>
#include <vector>

namespace cxltest {

/* A unique pool path under /dev/shm, removed when the fixture ends. */
class pool_test : public ::testing::Test {
protected:
    void SetUp() override;
    void TearDown() override;

    /* Create a pool at path() (fails the test on error). */
    void create(uint64_t size = 64ull << 20, unsigned flags = 0,
                uint32_t max_extents = 0);
    /* Attach path(); returns status, *pool set on success. */
    cxlpool_status_t open(cxlpool_t **pool, unsigned flags = CXLPOOL_NO_HEARTBEAT);

    const char *path() const { return m_path.c_str(); }

    std::string m_path;
};

std::vector<uint8_t> read_file(const std::string &path);
void write_file(const std::string &path, const std::vector<uint8_t> &data);

/* Run fn in a child process; returns the child's exit status (0 = ok). */
pid_t fork_child(const std::function<int()> &fn);
int   wait_child(pid_t pid);

/* Fill / verify a byte pattern derived from seed. */
void fill_pattern(void *p, size_t len, uint64_t seed);
bool check_pattern(const void *p, size_t len, uint64_t seed);

} // namespace cxltest

#endif
