/*
 * Format, attach and validation: every corruption class gives its own error
 * and leaves the backing file byte-for-byte unchanged.
 */
#include "pool_test_util.h"

extern "C" {
#include "pool_layout.h"
#include "pool_int.h"
}

#include <fcntl.h>
#include <grp.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace cxltest;

class pool_format : public pool_test {
protected:
    /* Damage the file, try to attach, expect status and an unchanged file. */
    void expect_refused(const std::function<void(std::vector<uint8_t>&)> &damage,
                        cxlpool_status_t expected, const char *needle)
    {
        std::vector<uint8_t> data = read_file(m_path);
        cxlpool_t *pool           = NULL;

        ASSERT_FALSE(data.empty());
        damage(data);
        write_file(m_path, data);

        for (unsigned flags : {0u, (unsigned)CXLPOOL_NO_ATTACH,
                               (unsigned)CXLPOOL_CREATE}) {
            cxlpool_status_t status = open(&pool, flags | CXLPOOL_NO_HEARTBEAT);
            EXPECT_EQ(expected, status) << cxlpool_last_error();
            if (status == CXLPOOL_OK) {
                cxlpool_close(pool);
                continue;
            }
            std::string msg = cxlpool_last_error();
            EXPECT_NE(std::string::npos, msg.find(m_path)) << msg;
            EXPECT_NE(std::string::npos, msg.find(needle)) << msg;
        }

        cxlpool_info_t info;
        EXPECT_EQ(expected, cxlpool_probe(path(), &info));
        EXPECT_TRUE(read_file(m_path) == data) << "refused pool was modified";
    }
};

TEST_F(pool_format, create_attach_info)
{
    cxlpool_t *pool;
    cxlpool_info_t info;
    cxlpool_stats_t st;
    struct stat sb;

    create(64ull << 20);
    ASSERT_EQ(0, stat(path(), &sb));
    EXPECT_EQ(0600u, sb.st_mode & 0777) << "pools are private by default";
    EXPECT_EQ(64ll << 20, sb.st_size);

    ASSERT_EQ(CXLPOOL_OK, open(&pool)) << cxlpool_last_error();
    cxlpool_info(pool, &info);
    EXPECT_EQ(64ull << 20, info.size);
    EXPECT_EQ(1u, info.version_major);
    EXPECT_EQ(CXLPOOL_BACKEND_EMULATED, info.backend);
    EXPECT_EQ(0u, (uintptr_t)cxlpool_base(pool) % (2u << 20))
            << "mapping must be 2 MiB aligned";
    EXPECT_EQ(0u, info.heap_offset % (2u << 20));
    ASSERT_EQ(CXLPOOL_OK, cxlpool_stats(pool, &st));
    EXPECT_EQ(1u, st.attach_used);
    EXPECT_EQ(st.heap_size, st.free_bytes);
    EXPECT_EQ(0.0, st.fragmentation);
    EXPECT_NE(0u, cxlpool_token(pool));
    cxlpool_close(pool);

    /* attaching twice sees the same uuid, and detaching frees the slot */
    cxlpool_info_t info2;
    ASSERT_EQ(CXLPOOL_OK, cxlpool_probe(path(), &info2));
    EXPECT_EQ(0, memcmp(info.uuid, info2.uuid, sizeof(info.uuid)));
    ASSERT_EQ(CXLPOOL_OK, open(&pool));
    ASSERT_EQ(CXLPOOL_OK, cxlpool_stats(pool, &st));
    EXPECT_EQ(1u, st.attach_used);
    cxlpool_close(pool);
}

TEST_F(pool_format, group_mode)
{
    struct stat sb;
    mode_t old = umask(077);

    create(8ull << 20, CXLPOOL_GROUP);
    umask(old);
    ASSERT_EQ(0, stat(path(), &sb));
    EXPECT_EQ(0660u, sb.st_mode & 0777);
}

TEST_F(pool_format, create_never_reformats)
{
    cxlpool_params_t params;
    cxlpool_info_t before, after;
    cxlpool_t *pool;

    create(8ull << 20);
    ASSERT_EQ(CXLPOOL_OK, cxlpool_probe(path(), &before));

    cxlpool_params_init(&params);
    params.path  = path();
    params.size  = 16ull << 20;
    params.flags = CXLPOOL_CREATE | CXLPOOL_EXCL | CXLPOOL_NO_ATTACH;
    EXPECT_EQ(CXLPOOL_ERR_EXISTS, cxlpool_open(&params, &pool));
    EXPECT_NE(std::string::npos,
              std::string(cxlpool_last_error()).find("never reformatted"));

    /* CREATE without EXCL attaches what is there, ignoring the size */
    params.flags = CXLPOOL_CREATE | CXLPOOL_NO_ATTACH;
    ASSERT_EQ(CXLPOOL_OK, cxlpool_open(&params, &pool)) << cxlpool_last_error();
    EXPECT_EQ(8ull << 20, cxlpool_size(pool));
    cxlpool_close(pool);
    ASSERT_EQ(CXLPOOL_OK, cxlpool_probe(path(), &after));
    EXPECT_EQ(0, memcmp(before.uuid, after.uuid, sizeof(before.uuid)));
}

TEST_F(pool_format, bad_sizes)
{
    cxlpool_params_t params;
    cxlpool_t *pool;

    cxlpool_params_init(&params);
    params.path  = path();
    params.flags = CXLPOOL_CREATE | CXLPOOL_NO_ATTACH;

    params.size = 3ull << 20; /* not a multiple of 2 MiB */
    EXPECT_EQ(CXLPOOL_ERR_INVAL, cxlpool_open(&params, &pool));
    params.size = 2ull << 20; /* too small for metadata + heap */
    EXPECT_EQ(CXLPOOL_ERR_INVAL, cxlpool_open(&params, &pool));
    EXPECT_NE(std::string::npos,
              std::string(cxlpool_last_error()).find("too small"));
    EXPECT_NE(0, access(path(), F_OK)) << "failed create must leave nothing";
}

TEST_F(pool_format, missing_pool)
{
    cxlpool_t *pool;

    EXPECT_EQ(CXLPOOL_ERR_NOENT, open(&pool));
    EXPECT_NE(std::string::npos,
              std::string(cxlpool_last_error()).find("cxlpool create"));
}

TEST_F(pool_format, flipped_superblock_byte)
{
    create();
    expect_refused([](std::vector<uint8_t> &d) {
        d[offsetof(cxlpool_sb_t, uuid) + 3] ^= 0x10;
    }, CXLPOOL_ERR_CHECKSUM, "checksum");
}

TEST_F(pool_format, flipped_size_field)
{
    create();
    expect_refused([](std::vector<uint8_t> &d) {
        d[offsetof(cxlpool_sb_t, heap_offset) + 1] ^= 0x01;
    }, CXLPOOL_ERR_CHECKSUM, "checksum");
}

TEST_F(pool_format, bad_magic)
{
    create();
    expect_refused([](std::vector<uint8_t> &d) {
        d[0] ^= 0xff;
    }, CXLPOOL_ERR_BAD_MAGIC, "not a ucx-cxl pool");
}

TEST_F(pool_format, foreign_file)
{
    std::vector<uint8_t> junk(8 << 20, 0xab);

    write_file(m_path, junk);
    expect_refused([](std::vector<uint8_t>&) {}, CXLPOOL_ERR_BAD_MAGIC,
                   "bad magic");
}

TEST_F(pool_format, empty_file)
{
    write_file(m_path, {});
    cxlpool_t *pool;
    EXPECT_EQ(CXLPOOL_ERR_BAD_MAGIC, open(&pool));
    EXPECT_NE(std::string::npos,
              std::string(cxlpool_last_error()).find("empty"));
    EXPECT_EQ(0u, read_file(m_path).size());
}

TEST_F(pool_format, wrong_version)
{
    create();
    expect_refused([](std::vector<uint8_t> &d) {
        cxlpool_sb_t sb;
        memcpy(&sb, d.data(), sizeof(sb));
        sb.version_major = 7;
        sb.version_minor = 0;
        sb.crc           = cxlpool_sb_crc(&sb); /* a well-formed future pool */
        memcpy(d.data(), &sb, sizeof(sb));
    }, CXLPOOL_ERR_VERSION, "version 7.0");
}

TEST_F(pool_format, truncated)
{
    create();
    expect_refused([](std::vector<uint8_t> &d) {
        d.resize(d.size() - (2 << 20));
    }, CXLPOOL_ERR_TRUNCATED, "truncated");
}

TEST_F(pool_format, truncated_below_superblock)
{
    create();
    expect_refused([](std::vector<uint8_t> &d) {
        d.resize(40);
    }, CXLPOOL_ERR_TRUNCATED, "truncated");
}

TEST_F(pool_format, resized)
{
    create();
    expect_refused([](std::vector<uint8_t> &d) {
        d.resize(d.size() + (2 << 20), 0);
    }, CXLPOOL_ERR_RESIZED, "resized");
}

TEST_F(pool_format, permission_denied)
{
    create();
    /* root bypasses file modes: check as an unprivileged user in a child */
    pid_t pid = fork_child([this]() {
        if ((getuid() == 0) && (setgroups(0, NULL) != 0 || setgid(65534) != 0 ||
                               setuid(65534) != 0)) {
            return 10;
        }
        cxlpool_t *pool;
        cxlpool_status_t status = open(&pool);
        if (status != CXLPOOL_ERR_PERM) {
            return 11;
        }
        std::string msg = cxlpool_last_error();
        if ((msg.find("permission denied") == std::string::npos) ||
            (msg.find(m_path) == std::string::npos)) {
            return 12;
        }
        return 0;
    });
    EXPECT_EQ(0, wait_child(pid));
}

TEST_F(pool_format, group_pool_shared_with_group)
{
    create(8ull << 20, CXLPOOL_GROUP);
    ASSERT_EQ(0, chown(path(), 0, 65534));
    pid_t pid = fork_child([this]() {
        if ((getuid() == 0) && (setgroups(0, NULL) != 0 || setgid(65534) != 0 ||
                               setuid(65533) != 0)) {
            return 10;
        }
        cxlpool_t *pool;
        if (open(&pool) != CXLPOOL_OK) {
            fprintf(stderr, "%s\n", cxlpool_last_error());
            return 11;
        }
        cxlpool_close(pool);
        return 0;
    });
    EXPECT_EQ(0, wait_child(pid));
}

TEST_F(pool_format, parse_size)
{
    uint64_t v;

    EXPECT_EQ(0, cxlpool_parse_size("64M", &v));
    EXPECT_EQ(64ull << 20, v);
    EXPECT_EQ(0, cxlpool_parse_size("1GiB", &v));
    EXPECT_EQ(1ull << 30, v);
    EXPECT_EQ(0, cxlpool_parse_size("4096", &v));
    EXPECT_EQ(4096u, v);
    EXPECT_EQ(-1, cxlpool_parse_size("", &v));
    EXPECT_EQ(-1, cxlpool_parse_size("-1G", &v));
    EXPECT_EQ(-1, cxlpool_parse_size("12Q", &v));
    EXPECT_EQ(-1, cxlpool_parse_size("99999999999T", &v));
}

TEST_F(pool_format, default_pool_path)
{
    char buf[64];

    cxlpool_default_path(buf, sizeof(buf));
    EXPECT_EQ("/dev/shm/ucx-cxl-" + std::to_string(getuid()) + ".pool",
              std::string(buf));
}

TEST_F(pool_format, numa_bind)
{
    cxlpool_params_t params;
    cxlpool_t *pool;

    create(8ull << 20);
    cxlpool_params_init(&params);
    params.path      = path();
    params.flags     = CXLPOOL_NO_HEARTBEAT;
    params.numa_node = 0;
    ASSERT_EQ(CXLPOOL_OK, cxlpool_open(&params, &pool)) << cxlpool_last_error();
    cxlpool_close(pool);

    params.numa_node = 4000;
    EXPECT_EQ(CXLPOOL_ERR_INVAL, cxlpool_open(&params, &pool));
    EXPECT_NE(std::string::npos,
              std::string(cxlpool_last_error()).find("NUMA node 4000"));
}

TEST_F(pool_format, destroy_refuses_live_attachments)
{
    cxlpool_t *pool;

    create(8ull << 20);
    ASSERT_EQ(CXLPOOL_OK, open(&pool));
    EXPECT_EQ(CXLPOOL_ERR_BUSY, cxlpool_destroy(path(), 0));
    EXPECT_EQ(0, access(path(), F_OK));
    cxlpool_close(pool);
    EXPECT_EQ(CXLPOOL_OK, cxlpool_destroy(path(), 0)) << cxlpool_last_error();
    EXPECT_NE(0, access(path(), F_OK));
}

/* Regression: a bad NUMA node used to leave a formatted pool behind. */
TEST_F(pool_format, bad_numa_node_creates_nothing)
{
    cxlpool_params_t params;
    cxlpool_t *pool;

    cxlpool_params_init(&params);
    params.path      = path();
    params.size      = 8ull << 20;
    params.numa_node = 4000;
    params.flags     = CXLPOOL_CREATE | CXLPOOL_EXCL | CXLPOOL_NO_ATTACH;
    EXPECT_EQ(CXLPOOL_ERR_INVAL, cxlpool_open(&params, &pool));
    EXPECT_NE(0, access(path(), F_OK));
}

TEST_F(pool_format, larger_than_filesystem)
{
    cxlpool_params_t params;
    cxlpool_t *pool;

    cxlpool_params_init(&params);
    params.path  = path();
    params.size  = 1ull << 50;
    params.flags = CXLPOOL_CREATE | CXLPOOL_EXCL | CXLPOOL_NO_ATTACH;
    EXPECT_EQ(CXLPOOL_ERR_NO_SPACE, cxlpool_open(&params, &pool));
    EXPECT_NE(std::string::npos,
              std::string(cxlpool_last_error()).find("larger than its filesystem"));
    EXPECT_NE(0, access(path(), F_OK));
}

/* Regression: inspection (info, check) used to write the lock line. */
TEST_F(pool_format, readonly_inspection_writes_nothing)
{
    cxlpool_t *pool, *holder;
    cxlpool_extent_t e;
    cxlpool_stats_t st;
    cxlpool_check_report_t rep;

    create(8ull << 20);
    ASSERT_EQ(CXLPOOL_OK, open(&holder));
    ASSERT_EQ(CXLPOOL_OK, cxlpool_alloc(holder, 4096, 0, "x", 0, &e));
    std::vector<uint8_t> before = read_file(m_path);

    ASSERT_EQ(CXLPOOL_OK, open(&pool, CXLPOOL_READONLY));
    EXPECT_EQ(0u, cxlpool_token(pool));
    EXPECT_EQ(CXLPOOL_OK, cxlpool_stats(pool, &st));
    EXPECT_EQ(1u, st.extents_used);
    EXPECT_EQ(CXLPOOL_OK, cxlpool_lookup(pool, "x", &e));
    EXPECT_EQ(CXLPOOL_OK, cxlpool_check(pool, 0, &rep, NULL, NULL));
    EXPECT_EQ(CXLPOOL_ERR_INVAL, cxlpool_check(pool, 1, &rep, NULL, NULL));
    cxlpool_close(pool);
    EXPECT_TRUE(read_file(m_path) == before) << "read-only inspection wrote";
    cxlpool_close(holder);
}

namespace cxltest {

/* The crc32 instruction path and the table compute one CRC32C: every
 * length 0..300 at every alignment 0..7, chained, and the standard check
 * value of "123456789". */
TEST(pool_crc32c, instruction_matches_table)
{
    uint8_t buf[320];
    unsigned i, len, off;

    for (i = 0; i < sizeof(buf); ++i) {
        buf[i] = (uint8_t)(i * 131u + 7u);
    }
    EXPECT_EQ(0xe3069283u, cxlpool_crc32c(0, "123456789", 9));
    EXPECT_EQ(0xe3069283u, cxlpool_crc32c_table(0, "123456789", 9));
    for (off = 0; off < 8; ++off) {
        for (len = 0; len + off <= 300; ++len) {
            ASSERT_EQ(cxlpool_crc32c_table(0x1234u, buf + off, len),
                      cxlpool_crc32c(0x1234u, buf + off, len))
                    << "offset " << off << " length " << len;
        }
    }
}

/* Long buffers go in rounds of three 8 KiB streams joined by shifts: the
 * same CRC as the table at lengths around the round boundaries, at every
 * alignment, chained from any start value. */
TEST(pool_crc32c, three_streams_match_table)
{
    const unsigned round = 3 * 8192;
    std::vector<uint8_t> buf(4 * round + 64 + 8);   /* lengths + offsets */
    unsigned i, off;

    for (i = 0; i < buf.size(); ++i) {
        buf[i] = (uint8_t)((i * 2654435761u) >> 13);
    }
    for (size_t len : {(size_t)round - 1, (size_t)round, (size_t)round + 1,
                       (size_t)round + 8, (size_t)2 * round + 7,
                       (size_t)4 * round, (size_t)4 * round + 63}) {
        for (off = 0; off < 8; ++off) {
            ASSERT_EQ(cxlpool_crc32c_table(0xdeadbeefu, buf.data() + off, len),
                      cxlpool_crc32c(0xdeadbeefu, buf.data() + off, len))
                    << "offset " << off << " length " << len;
        }
    }
    /* chained: a CRC continued over a second buffer */
    uint32_t part = cxlpool_crc32c(0, buf.data(), round + 5);
    EXPECT_EQ(cxlpool_crc32c_table(0, buf.data(), 3 * round),
              cxlpool_crc32c(part, buf.data() + round + 5, 2 * round - 5));
}

} // namespace cxltest
