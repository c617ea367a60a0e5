#include "pool_test_util.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <atomic>

namespace cxltest {

static std::atomic<unsigned> g_counter{0};

void pool_test::SetUp()
{
    const ::testing::TestInfo *info =
            ::testing::UnitTest::GetInstance()->current_test_info();
    char buf[256];

    snprintf(buf, sizeof(buf), "/dev/shm/cxlpool-gtest-%d-%u-%s.pool",
             (int)getpid(), g_counter++, info->name());
    m_path = buf;
    unlink(path());
}

void pool_test::TearDown()
{
    unlink(path());
}

void pool_test::create(uint64_t size, unsigned flags, uint32_t max_extents)
{
    cxlpool_params_t params;
    cxlpool_t *pool;

    cxlpool_params_init(&params);
    params.path        = path();
    params.size        = size;
    params.max_extents = max_extents;
    params.flags       = CXLPOOL_CREATE | CXLPOOL_EXCL | CXLPOOL_NO_ATTACH | flags;
    ASSERT_EQ(CXLPOOL_OK, cxlpool_open(&params, &pool)) << cxlpool_last_error();
    cxlpool_close(pool);
}

cxlpool_status_t pool_test::open(cxlpool_t **pool, unsigned flags)
{
    cxlpool_params_t params;

    cxlpool_params_init(&params);
    params.path  = path();
    params.flags = flags;
    return cxlpool_open(&params, pool);
}

std::vector<uint8_t> read_file(const std::string &path)
{
    std::vector<uint8_t> data;
    FILE *f = fopen(path.c_str(), "rb");
    uint8_t buf[65536];
    size_t n;

    if (f == NULL) {
        return data;
    }
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
        data.insert(data.end(), buf, buf + n);
    }
    fclose(f);
    return data;
}

void write_file(const std::string &path, const std::vector<uint8_t> &data)
{
    FILE *f = fopen(path.c_str(), "wb");

    ASSERT_TRUE(f != NULL);
    if (!data.empty()) {
        ASSERT_EQ(data.size(), fwrite(data.data(), 1, data.size(), f));
    }
    fclose(f);
}

pid_t fork_child(const std::function<int()> &fn)
{
    pid_t pid = fork();

    if (pid == 0) {
        int rc = fn();
        fflush(NULL);
        _exit(rc);
    }
    return pid;
}

int wait_child(pid_t pid)
{
    int status;

    if (waitpid(pid, &status, 0) != pid) {
        return -1;
    }
    if (WIFEXITED(status)) {
        return WEXITSTATUS(status);
    }
    return 128 + WTERMSIG(status);
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

void fill_pattern(void *p, size_t len, uint64_t seed)
{
    uint8_t *b = (uint8_t*)p;

    for (size_t i = 0; i < len; ++i) {
        b[i] = (uint8_t)(mix(seed + i / 8) >> ((i % 8) * 8));
    }
}

bool check_pattern(const void *p, size_t len, uint64_t seed)
{
    const uint8_t *b = (const uint8_t*)p;

    for (size_t i = 0; i < len; ++i) {
        if (b[i] != (uint8_t)(mix(seed + i / 8) >> ((i % 8) * 8))) {
            return false;
        }
    }
    return true;
}

} // namespace cxltest
