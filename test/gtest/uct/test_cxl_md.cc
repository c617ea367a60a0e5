/*
 * Component and memory domain "cxl": registration, attributes, devices,
 * allocation from the pool, registration of pool ranges, remote keys
 * (packing, unpacking, and rejection of forged, out-of-bounds, foreign and
 * stale keys).
 */
#include "cxl_uct_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <random>
#include <set>
#include <string.h>
#include <unistd.h>

using namespace cxluct;

namespace {

bool inside(const std::vector<mapping> &maps, const void *addr, size_t len,
            uint64_t *pool_offset = nullptr)
{
    uintptr_t a = (uintptr_t)addr;

    for (const mapping &m : maps) {
        if ((a >= m.start) && (a <= m.end) && (len <= m.end - a)) {
            if (pool_offset != nullptr) {
                *pool_offset = a - m.start + m.file_offset;
            }
            return true;
        }
    }
    return false;
}

packed_rkey to_key(const std::vector<uint8_t> &buf)
{
    packed_rkey key;

    EXPECT_EQ(sizeof(key), buf.size());
    memcpy(&key, buf.data(), sizeof(key));
    return key;
}

const uint64_t KiB = 1024, MiB = 1024 * 1024;

} // namespace

/* ------------------------------------------------------------------ */
/* component and MD                                                     */
/* ------------------------------------------------------------------ */

class cxl_md : public cxl_test {
};

TEST_F(cxl_md, component_listed)
{
    uct_component_h *components;
    unsigned count, found = 0;

    ASSERT_EQ(UCS_OK, uct_query_components(&components, &count));
    for (unsigned i = 0; i < count; ++i) {
        uct_component_attr_t attr;

        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME |
                          UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT |
                          UCT_COMPONENT_ATTR_FIELD_FLAGS;
        ASSERT_EQ(UCS_OK, uct_component_query(components[i], &attr));
        if (strcmp(attr.name, "cxl") != 0) {
            continue;
        }

        ++found;
        ASSERT_EQ(1u, attr.md_resource_count);
        std::vector<uct_md_resource_desc_t> res(attr.md_resource_count);
        attr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        attr.md_resources = res.data();
        ASSERT_EQ(UCS_OK, uct_component_query(components[i], &attr));
        EXPECT_STREQ("cxl", res[0].md_name);
        EXPECT_EQ(components[i], cxl_component());
    }
    uct_release_component_list(components);
    EXPECT_EQ(1u, found) << "component \"cxl\" must be listed exactly once";
}

TEST_F(cxl_md, md_attributes)
{
    cxlpool_info_t info;
    stack s;

    ASSERT_EQ(UCS_OK, s.open_md()) << s.error;
    pool_info(&info);

    const uct_md_attr_t &a = s.md_attr;
    EXPECT_STREQ("cxl", a.component_name);
    EXPECT_TRUE(a.cap.flags & UCT_MD_FLAG_ALLOC);
    EXPECT_TRUE(a.cap.flags & UCT_MD_FLAG_NEED_RKEY);
    /* default (UCX_CXL_REG_ANY=y): any host memory registers, so UCP can
     * register its buffers; no rkey_ptr (no pointer reaches another
     * process's private memory) */
    EXPECT_TRUE(a.cap.flags & UCT_MD_FLAG_REG);
    EXPECT_TRUE(a.cap.reg_mem_types & UCS_BIT(UCS_MEMORY_TYPE_HOST));
    EXPECT_FALSE(a.cap.flags & UCT_MD_FLAG_RKEY_PTR);
    EXPECT_TRUE(a.cap.alloc_mem_types & UCS_BIT(UCS_MEMORY_TYPE_HOST));
    EXPECT_TRUE(a.cap.access_mem_types & UCS_BIT(UCS_MEMORY_TYPE_HOST));
    EXPECT_EQ(sizeof(packed_rkey), a.rkey_packed_size);
    EXPECT_GT(a.cap.max_alloc, 0u);
    EXPECT_LE(a.cap.max_alloc, info.size);
    EXPECT_GE(a.cap.max_alloc, info.size / 2);
}

TEST_F(cxl_md, max_alloc_is_allocatable)
{
    uct_allocated_memory_t mem;
    stack s;

    ASSERT_EQ(UCS_OK, s.open_md()) << s.error;
    /* an empty pool must give what the MD advertises as its maximum */
    ASSERT_EQ(UCS_OK, s.alloc(s.md_attr.cap.max_alloc, &mem))
            << "max_alloc " << s.md_attr.cap.max_alloc << ": " << s.error;
    EXPECT_GE(mem.length, s.md_attr.cap.max_alloc);
    EXPECT_EQ(UCS_OK, uct_mem_free(&mem));
}

TEST_F(cxl_md, one_device_per_pool)
{
    std::vector<uct_tl_resource_desc_t> res;
    stack s;

    ASSERT_EQ(UCS_OK, s.open_md()) << s.error;
    ASSERT_EQ(UCS_OK, s.devices(&res)) << s.error;
    ASSERT_EQ(1u, res.size());
    EXPECT_STREQ("cxl", res[0].tl_name);
    EXPECT_EQ(dev_name_of(m_path), res[0].dev_name);
    EXPECT_EQ(UCT_DEVICE_TYPE_SHM, res[0].dev_type);

    /* the device opens */
    ASSERT_EQ(UCS_OK, s.open_iface(res[0].dev_name)) << s.error;
}

TEST_F(cxl_md, two_pools_two_devices)
{
    std::string second = new_pool(64 * MiB);
    std::vector<uct_tl_resource_desc_t> res;
    std::set<std::string> names;
    stack s, s1, s2;

    use_pools(m_path + "," + second);
    ASSERT_EQ(UCS_OK, s.open_md()) << s.error;
    ASSERT_EQ(UCS_OK, s.devices(&res)) << s.error;
    ASSERT_EQ(2u, res.size());
    for (const uct_tl_resource_desc_t &r : res) {
        EXPECT_STREQ("cxl", r.tl_name);
        names.insert(r.dev_name);
    }
    EXPECT_EQ((std::set<std::string>{dev_name_of(m_path), dev_name_of(second)}),
              names);

    /* each device opens, on its own pool */
    ASSERT_EQ(UCS_OK, s1.open(dev_name_of(m_path))) << s1.error;
    ASSERT_EQ(UCS_OK, s2.open(dev_name_of(second))) << s2.error;
    EXPECT_NE(s1.dev_addr, s2.dev_addr);
    EXPECT_GE(s.md_attr.cap.max_alloc, 64 * MiB / 2);

    /* a device name no pool has */
    hide_errors hide;
    stack s3;
    ASSERT_EQ(UCS_OK, s3.open_md()) << s3.error;
    EXPECT_NE(UCS_OK, s3.open_iface("no-such-pool"));
}

TEST_F(cxl_md, missing_pool_fails)
{
    std::string missing = unique_pool_path("-missing");
    cxlpool_stats_t st;
    hide_errors hide;

    unlink(missing.c_str());
    m_pools.push_back(missing); /* removed in TearDown should it appear */

    use_pools(missing);
    {
        stack s;
        EXPECT_NE(UCS_OK, s.open_md());
        EXPECT_TRUE(s.md == nullptr);
    }
    EXPECT_NE(0, access(missing.c_str(), F_OK))
            << "a listed pool that does not exist must not be created";

    /* a good pool before the missing one: fails, and lets the good one go */
    use_pools(m_path + "," + missing);
    {
        stack s;
        EXPECT_NE(UCS_OK, s.open_md());
    }
    pool_stats(&st);
    EXPECT_EQ(0u, st.attach_used)
            << "a failed md_open must detach the pools it attached";

    /* and the good pool alone still works */
    use_pools(m_path);
    stack s;
    ASSERT_EQ(UCS_OK, s.open_md()) << s.error;
}

TEST_F(cxl_md, not_a_pool_fails)
{
    std::string junk = unique_pool_path("-junk");
    std::vector<uint8_t> data(4 * MiB, 0);

    m_pools.push_back(junk);
    fill_random(data.data() + 4096, data.size() - 4096, 7);
    cxltest::write_file(junk, data);

    use_pools(junk);
    hide_errors hide;
    stack s;
    EXPECT_NE(UCS_OK, s.open_md());
    EXPECT_EQ(data, cxltest::read_file(junk)) << "the file must not be touched";
}

/* ------------------------------------------------------------------ */
/* allocation                                                           */
/* ------------------------------------------------------------------ */

class cxl_alloc : public cxl_test {
protected:
    void SetUp() override
    {
        ASSERT_NO_FATAL_FAILURE(cxl_test::SetUp());
        m_small = new_pool(64 * MiB);
        use_pools(m_small);
        ASSERT_EQ(UCS_OK, m_stack.open_md()) << m_stack.error;
        m_ro = open_readonly(m_small);
        ASSERT_TRUE(m_ro != nullptr) << cxlpool_last_error();
        m_maps = find_mappings(m_small, true);
        ASSERT_FALSE(m_maps.empty()) << "no writable mapping of " << m_small;
        ASSERT_EQ(CXLPOOL_OK, cxlpool_stats(m_ro, &m_base_stats));
    }

    void TearDown() override
    {
        if (m_ro != nullptr) {
            cxlpool_close(m_ro);
        }
        m_stack.close();
        cxl_test::TearDown();
    }

    uint64_t used()
    {
        cxlpool_stats_t st;
        EXPECT_EQ(CXLPOOL_OK, cxlpool_stats(m_ro, &st));
        return st.used_bytes;
    }

    std::string          m_small;
    stack                m_stack;
    cxlpool_t           *m_ro = nullptr;
    std::vector<mapping> m_maps;
    cxlpool_stats_t      m_base_stats;
};

TEST_F(cxl_alloc, reuse_10000_times)
{
    const size_t size = 1 * MiB;

    for (int i = 0; i < 10000; ++i) {
        uct_allocated_memory_t mem;
        uint64_t offset;

        ASSERT_EQ(UCS_OK, m_stack.alloc(size, &mem))
                << "iteration " << i << ": " << m_stack.error;
        ASSERT_EQ(size, mem.length) << "iteration " << i;
        ASSERT_TRUE(inside(m_maps, mem.address, mem.length, &offset))
                << "iteration " << i << ": " << mem.address
                << " is not inside the pool mapping";
        ASSERT_EQ(m_base_stats.used_bytes + size, used()) << "iteration " << i;
        ((volatile uint8_t*)mem.address)[0]               = (uint8_t)i;
        ((volatile uint8_t*)mem.address)[mem.length - 1] = (uint8_t)i;
        if (i % 500 == 0) {
            cxlpool_extent_t ext;
            ASSERT_EQ(CXLPOOL_OK,
                      cxlpool_extent_find(m_ro, offset, mem.length, &ext))
                    << cxlpool_last_error();
            EXPECT_EQ(offset, ext.offset);
            EXPECT_EQ(mem.length, ext.length);
        }
        ASSERT_EQ(UCS_OK, uct_mem_free(&mem)) << "iteration " << i;
        ASSERT_EQ(m_base_stats.used_bytes, used())
                << "iteration " << i << ": free did not return the memory";
    }
}

TEST_F(cxl_alloc, exhaust_and_recover)
{
    std::vector<uct_allocated_memory_t> mems;
    uct_allocated_memory_t mem;
    ucs_status_t status;
    hide_errors hide;

    for (;;) {
        status = m_stack.alloc(1 * MiB, &mem);
        if (status != UCS_OK) {
            break;
        }
        mems.push_back(mem);
        ASSERT_LE(mems.size(), 64u) << "more than 64 MiB from a 64 MiB pool";
    }
    EXPECT_EQ(UCS_ERR_NO_MEMORY, status);
    EXPECT_GE(mems.size(), m_base_stats.heap_size / MiB - 1);

    /* no two allocations overlap */
    std::sort(mems.begin(), mems.end(),
              [](const uct_allocated_memory_t &a, const uct_allocated_memory_t &b) {
                  return a.address < b.address;
              });
    for (size_t i = 1; i < mems.size(); ++i) {
        EXPECT_LE((uint8_t*)mems[i - 1].address + mems[i - 1].length,
                  (uint8_t*)mems[i].address);
    }

    for (uct_allocated_memory_t &m : mems) {
        ASSERT_EQ(UCS_OK, uct_mem_free(&m));
    }
    EXPECT_EQ(m_base_stats.used_bytes, used());
    ASSERT_EQ(UCS_OK, m_stack.alloc(32 * MiB, &mem)) << m_stack.error;
    EXPECT_EQ(UCS_OK, uct_mem_free(&mem));
}

TEST_F(cxl_alloc, sizes_rounded_and_aligned)
{
    const size_t sizes[] = {1, 7, 63, 64, 65, 4095, 4096, 4097, 65539,
                            2 * MiB - 1, 2 * MiB, 3 * MiB + 5};
    std::vector<uct_allocated_memory_t> mems;
    uint64_t total = 0;

    for (size_t size : sizes) {
        uct_allocated_memory_t mem;
        cxlpool_extent_t ext;
        uint64_t offset;

        ASSERT_EQ(UCS_OK, m_stack.alloc(size, &mem)) << size << ": "
                                                     << m_stack.error;
        mems.push_back(mem);
        EXPECT_GE(mem.length, size);
        EXPECT_EQ(0u, mem.length % 64) << "size " << size;
        EXPECT_LT(mem.length, size + 64) << "size " << size;
        EXPECT_EQ(0u, (uintptr_t)mem.address % 4096) << "size " << size;
        if (size >= 2 * MiB) {
            EXPECT_EQ(0u, (uintptr_t)mem.address % (2 * MiB)) << "size " << size;
        }
        ASSERT_TRUE(inside(m_maps, mem.address, mem.length, &offset));
        ASSERT_EQ(CXLPOOL_OK, cxlpool_extent_find(m_ro, offset, mem.length, &ext))
                << cxlpool_last_error();
        EXPECT_EQ(offset, ext.offset);
        EXPECT_EQ(mem.length, ext.length);
        fill_random(mem.address, mem.length, size);
        total += mem.length;
    }
    EXPECT_EQ(m_base_stats.used_bytes + total, used());

    for (size_t i = 0; i < mems.size(); ++i) {
        std::vector<uint8_t> expect(mems[i].length);
        fill_random(expect.data(), expect.size(), sizes[i]);
        EXPECT_EQ(-1, first_diff(expect.data(), mems[i].address, expect.size()))
                << "allocations overlap: size " << sizes[i];
        ASSERT_EQ(UCS_OK, uct_mem_free(&mems[i]));
    }
    EXPECT_EQ(m_base_stats.used_bytes, used());
}

/* ------------------------------------------------------------------ */
/* registration                                                         */
/* ------------------------------------------------------------------ */

class cxl_reg : public cxl_test {
protected:
    /* starts in the pool-only mode (UCX_CXL_REG_ANY=n) */
    void SetUp() override
    {
        ASSERT_NO_FATAL_FAILURE(cxl_test::SetUp());
        setenv("UCX_CXL_REG_ANY", "n", 1);
        ASSERT_EQ(UCS_OK, m_stack.open_md()) << m_stack.error;
        EXPECT_FALSE(m_stack.md_attr.cap.flags & UCT_MD_FLAG_REG);
        EXPECT_TRUE(m_stack.md_attr.cap.flags & UCT_MD_FLAG_RKEY_PTR);
    }

    void TearDown() override
    {
        m_stack.close();
        unsetenv("UCX_CXL_REG_ANY");
        cxl_test::TearDown();
    }

    /* reopen the MD with UCX_CXL_REG_ANY=y */
    void reg_any()
    {
        m_stack.close();
        setenv("UCX_CXL_REG_ANY", "y", 1);
        ASSERT_EQ(UCS_OK, m_stack.open_md()) << m_stack.error;
        EXPECT_TRUE(m_stack.md_attr.cap.flags & UCT_MD_FLAG_REG);
        EXPECT_TRUE(m_stack.md_attr.cap.reg_mem_types &
                    UCS_BIT(UCS_MEMORY_TYPE_HOST));
        EXPECT_FALSE(m_stack.md_attr.cap.flags & UCT_MD_FLAG_RKEY_PTR)
                << "UCP 1.13's rkey_ptr rendezvous aborts on unreachable keys";
    }

    stack m_stack;
};

TEST_F(cxl_reg, sub_range_of_pool_memory)
{
    uct_allocated_memory_t mem;
    std::vector<uint8_t> buf, wbuf;
    uct_mem_h memh, wmemh;
    rkey key;
    void *p;

    ASSERT_EQ(UCS_OK, m_stack.alloc(64 * KiB, &mem)) << m_stack.error;
    uint8_t *base = (uint8_t*)mem.address;

    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_stack.md, base + 4096, 8192,
                                     UCT_MD_MEM_ACCESS_ALL, &memh));
    ASSERT_EQ(UCS_OK, m_stack.pack(memh, &buf));
    ASSERT_EQ(UCS_OK, m_stack.pack(mem.memh, &wbuf));
    packed_rkey k = to_key(buf), wk = to_key(wbuf);
    EXPECT_EQ(wk.offset + 4096, k.offset);
    EXPECT_EQ(8192u, k.length);
    EXPECT_EQ((uintptr_t)(base + 4096), k.owner_va);
    EXPECT_EQ(wk.ext_index, k.ext_index);
    EXPECT_EQ(wk.ext_gen, k.ext_gen);

    ASSERT_EQ(UCS_OK, key.unpack(m_stack.component, buf.data()));
    ASSERT_EQ(UCS_OK, key.ptr((uintptr_t)(base + 4096), &p));
    EXPECT_EQ(base + 4096, p);
    ASSERT_EQ(UCS_OK, key.ptr((uintptr_t)(base + 4096 + 8191), &p));
    EXPECT_EQ(base + 4096 + 8191, p);
    EXPECT_NE(UCS_OK, key.ptr((uintptr_t)(base + 4095), &p))
            << "the key grants only the registered sub-range";
    EXPECT_NE(UCS_OK, key.ptr((uintptr_t)(base + 4096 + 8192 + 1), &p));
    key.release();
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_stack.md, memh));

    /* the whole allocation, and an odd unaligned piece */
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_stack.md, base, mem.length,
                                     UCT_MD_MEM_ACCESS_ALL, &wmemh));
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_stack.md, wmemh));
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_stack.md, base + 3, 5,
                                     UCT_MD_MEM_ACCESS_ALL, &wmemh));
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_stack.md, wmemh));

    /* past the end of the extent: not one allocation */
    EXPECT_EQ(UCS_ERR_UNSUPPORTED,
              uct_md_mem_reg(m_stack.md, base + mem.length - 64, 128,
                             UCT_MD_MEM_ACCESS_ALL, &wmemh));

    ASSERT_EQ(UCS_OK, uct_mem_free(&mem));
}

/* By default (no UCT_MD_FLAG_REG) memory outside the pool does not register. */
TEST_F(cxl_reg, foreign_memory_unsupported_without_reg_any)
{
    void *heap = malloc(64 * KiB);
    uct_mem_h memh;

    ASSERT_TRUE(heap != nullptr);
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, uct_md_mem_reg(m_stack.md, heap, 64 * KiB,
                                                  UCT_MD_MEM_ACCESS_ALL, &memh));
    free(heap);
}

/* Status of unpacking buf in a child process (another process, same pool). */
static ucs_status_t unpack_in_child(uct_component_h component,
                                    const std::vector<uint8_t> &buf)
{
    int status;
    pid_t pid = fork();

    if (pid == 0) {
        rkey k;
        _exit(-k.unpack(component, buf.data()));
    }
    if ((pid < 0) || (waitpid(pid, &status, 0) != pid) || !WIFEXITED(status)) {
        return UCS_ERR_IO_ERROR;
    }
    return (ucs_status_t)-WEXITSTATUS(status);
}

/*
 * With UCX_CXL_REG_ANY=y memory outside the pool registers, and its key
 * unpacks in every process: operations on it go to the owner (cxl_proxy).
 */
TEST_F(cxl_reg, foreign_memory_key_is_usable_everywhere)
{
    void *heap = malloc(64 * KiB);
    uint8_t on_stack[4096];
    std::vector<uint8_t> buf;
    uct_mem_h memh;
    rkey key;

    ASSERT_NO_FATAL_FAILURE(reg_any());
    ASSERT_TRUE(heap != nullptr);
    for (auto r : {std::make_pair(heap, (size_t)64 * KiB),
                   std::make_pair((void*)on_stack, sizeof(on_stack))}) {
        ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_stack.md, r.first, r.second,
                                         UCT_MD_MEM_ACCESS_ALL, &memh));
        ASSERT_EQ(UCS_OK, m_stack.pack(memh, &buf));
        EXPECT_EQ(UCS_OK, key.unpack(m_stack.component, buf.data()));
        key.release();
        EXPECT_EQ(UCS_OK, unpack_in_child(m_stack.component, buf));
        /* the key is still protected: a flipped byte is forged */
        buf[20] ^= 1;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, key.unpack(m_stack.component, buf.data()));
        EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_stack.md, memh));
    }
    free(heap);
}

/*
 * A caller with a fallback (UCT_MD_MEM_FLAG_HIDE_ERRORS: UCP's rendezvous
 * buffers) gets no key for memory outside the pool, so UCP pipelines bulk
 * data through active messages instead of having the owner stream it
 * (MPI bandwidth at 1 MiB was 0.31x sm that way).  Pool memory registers.
 */
TEST_F(cxl_reg, foreign_memory_declined_when_the_caller_has_a_fallback)
{
    const unsigned flags = UCT_MD_MEM_ACCESS_ALL | UCT_MD_MEM_FLAG_HIDE_ERRORS;
    std::vector<uint8_t> heap(64 * KiB);
    uct_allocated_memory_t mem;
    uct_mem_h memh;

    ASSERT_NO_FATAL_FAILURE(reg_any());
    EXPECT_EQ(UCS_ERR_UNSUPPORTED,
              uct_md_mem_reg(m_stack.md, heap.data(), heap.size(), flags,
                             &memh));
    ASSERT_EQ(UCS_OK, m_stack.alloc(64 * KiB, &mem)) << m_stack.error;
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_stack.md, mem.address, 4096, flags,
                                     &memh));
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_stack.md, memh));
    ASSERT_EQ(UCS_OK, uct_mem_free(&mem));
}

/* Pool memory that no allocation holds does not register at all: the
 * owner would execute operations on whatever is allocated there next. */
TEST_F(cxl_reg, freed_pool_memory_does_not_register)
{
    uct_allocated_memory_t mem;
    uct_mem_h memh;

    ASSERT_NO_FATAL_FAILURE(reg_any());
    ASSERT_EQ(UCS_OK, m_stack.alloc(64 * KiB, &mem)) << m_stack.error;
    void *addr = mem.address;
    ASSERT_EQ(UCS_OK, uct_mem_free(&mem));
    hide_errors hide;
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              uct_md_mem_reg(m_stack.md, addr, 4096, UCT_MD_MEM_ACCESS_ALL,
                             &memh));
}

/* ------------------------------------------------------------------ */
/* remote keys                                                          */
/* ------------------------------------------------------------------ */

class cxl_rkey : public cxl_test {
protected:
    void SetUp() override
    {
        ASSERT_NO_FATAL_FAILURE(cxl_test::SetUp());
        ASSERT_EQ(UCS_OK, m_stack.open_md()) << m_stack.error;
        ASSERT_EQ(UCS_OK, m_stack.alloc(64 * KiB, &m_mem)) << m_stack.error;
        m_allocated = true;
        ASSERT_EQ(UCS_OK, m_stack.pack(m_mem.memh, &m_buf));
        m_key = to_key(m_buf);
        pool_info(&m_info);
        m_maps = find_mappings(m_path, true);
        ASSERT_FALSE(m_maps.empty());
    }

    void TearDown() override
    {
        if (m_allocated) {
            EXPECT_EQ(UCS_OK, uct_mem_free(&m_mem));
        }
        m_stack.close();
        cxl_test::TearDown();
    }

    ucs_status_t unpack(const packed_rkey &k)
    {
        rkey key;
        return key.unpack(m_stack.component, &k);
    }

    stack                  m_stack;
    uct_allocated_memory_t m_mem;
    bool                   m_allocated = false;
    std::vector<uint8_t>   m_buf;
    packed_rkey            m_key;
    cxlpool_info_t         m_info;
    std::vector<mapping>   m_maps;
};

TEST_F(cxl_rkey, packed_layout)
{
    cxlpool_t *ro = open_readonly(m_path);
    cxlpool_extent_t ext;
    uint64_t offset;

    ASSERT_EQ(sizeof(packed_rkey), m_stack.md_attr.rkey_packed_size);
    ASSERT_TRUE(ro != nullptr);
    ASSERT_TRUE(inside(m_maps, m_mem.address, m_mem.length, &offset));
    ASSERT_EQ(CXLPOOL_OK, cxlpool_extent_find(ro, offset, m_mem.length, &ext));
    cxlpool_close(ro);

    EXPECT_EQ(rkey_crc(m_key), m_key.crc);
    EXPECT_EQ(0, memcmp(m_info.uuid, m_key.uuid, sizeof(m_key.uuid)));
    EXPECT_EQ(offset, m_key.offset);
    EXPECT_EQ(m_mem.length, m_key.length);
    EXPECT_EQ((uintptr_t)m_mem.address, m_key.owner_va);
    EXPECT_EQ(ext.index, m_key.ext_index);
    EXPECT_EQ(ext.gen, m_key.ext_gen);

    /* packing is deterministic */
    std::vector<uint8_t> again;
    ASSERT_EQ(UCS_OK, m_stack.pack(m_mem.memh, &again));
    EXPECT_EQ(m_buf, again);
}

TEST_F(cxl_rkey, unpack_same_process)
{
    uint8_t *base = (uint8_t*)m_mem.address;
    rkey key;
    void *p;

    ASSERT_EQ(UCS_OK, key.unpack(m_stack.component, m_buf.data()));
    ASSERT_EQ(UCS_OK, key.ptr((uintptr_t)base, &p));
    EXPECT_EQ(base, p) << "same process: delta must be 0";
    ASSERT_EQ(UCS_OK, key.ptr((uintptr_t)base + 12345, &p));
    EXPECT_EQ(base + 12345, p);
    ASSERT_EQ(UCS_OK, key.ptr((uintptr_t)base + m_mem.length - 1, &p));
    EXPECT_EQ(base + m_mem.length - 1, p);

    /* the pointer is the memory */
    *(volatile uint8_t*)p = 0;
    ((volatile uint8_t*)base)[m_mem.length - 1] = 0x5c;
    EXPECT_EQ(0x5c, *(volatile uint8_t*)p);

    /* outside the range */
    const uint64_t bad[] = {(uintptr_t)base - 1, (uintptr_t)base - 4096,
                            (uintptr_t)base + m_mem.length + 1,
                            (uintptr_t)base + m_mem.length + 4096, 0, 1,
                            UINT64_MAX, UINT64_MAX - 4095};
    for (uint64_t addr : bad) {
        p = (void*)0x1;
        EXPECT_EQ(UCS_ERR_INVALID_ADDR, key.ptr(addr, &p))
                << "rkey_ptr(0x" << std::hex << addr << ") for key 0x"
                << (uintptr_t)base << "+0x" << m_mem.length;
    }

    /* two unpacks of one key are independent */
    rkey key2;
    ASSERT_EQ(UCS_OK, key2.unpack(m_stack.component, m_buf.data()));
    key.release();
    ASSERT_EQ(UCS_OK, key2.ptr((uintptr_t)base, &p));
    EXPECT_EQ(base, p);
}

/*
 * The first byte past the key is outside the key range as well.
 * See the report: uct_cxl_rkey_ptr() calls uct_cxl_rkey_addr(rkey, raddr, 0)
 * whose checks accept addr == hi with a zero length.
 */
TEST_F(cxl_rkey, rkey_ptr_end_of_range)
{
    uint8_t *base = (uint8_t*)m_mem.address;
    rkey key;
    void *p = nullptr;

    ASSERT_EQ(UCS_OK, key.unpack(m_stack.component, m_buf.data()));
    EXPECT_EQ(UCS_ERR_INVALID_ADDR,
              key.ptr((uintptr_t)base + m_mem.length, &p))
            << "rkey_ptr() of the first address past the key returned "
            << p;
}

TEST_F(cxl_rkey, forged_byte_rejected)
{
    for (size_t pos = 0; pos < sizeof(packed_rkey); ++pos) {
        for (uint8_t bit : {0x01, 0x80}) {
            std::vector<uint8_t> buf = m_buf;
            buf[pos] ^= bit;
            rkey key;
            EXPECT_EQ(UCS_ERR_INVALID_PARAM,
                      key.unpack(m_stack.component, buf.data()))
                    << "byte " << pos << " bit 0x" << std::hex << (int)bit;
        }
    }
    /* the original still works */
    EXPECT_EQ(UCS_OK, unpack(m_key));
}

/*
 * UCP 1.13 releases the key of every MD of a partly unpacked remote key,
 * including one whose unpack failed; that used to free whatever the
 * bundle held (a segfault seen in the namespace pods test).
 */
TEST_F(cxl_rkey, release_after_failed_unpack)
{
    std::vector<uint8_t> buf = m_buf;
    uct_rkey_bundle_t bundle;

    buf[20] ^= 1; /* forged */
    memset(&bundle, 0xa5, sizeof(bundle));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_rkey_unpack(m_stack.component, buf.data(), &bundle));
    EXPECT_EQ(nullptr, bundle.handle);
    EXPECT_EQ(UCS_OK, uct_rkey_release(m_stack.component, &bundle));
}

TEST_F(cxl_rkey, zero_and_garbage_rejected)
{
    std::vector<uint8_t> zero(sizeof(packed_rkey), 0), ones(sizeof(packed_rkey), 0xff);
    rkey key;

    EXPECT_EQ(UCS_ERR_INVALID_PARAM, key.unpack(m_stack.component, zero.data()));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, key.unpack(m_stack.component, ones.data()));
    for (uint64_t seed = 0; seed < 1000; ++seed) {
        std::vector<uint8_t> junk(sizeof(packed_rkey));
        fill_random(junk.data(), junk.size(), seed);
        EXPECT_NE(UCS_OK, key.unpack(m_stack.component, junk.data()))
                << "seed " << seed;
    }
}

TEST_F(cxl_rkey, out_of_bounds_rejected)
{
    const uint64_t size = m_info.size, heap = m_info.heap_offset;
    const uint64_t off = m_key.offset, len = m_key.length;
    struct range {
        uint64_t offset, length;
    };
    std::vector<range> ranges = {
        {size, 64},                 /* just past the pool */
        {size + 4096, 4096},        /* far past */
        {size - 64, 128},           /* straddles the end */
        {0, 64},                    /* the superblock */
        {0, size},                  /* the whole pool */
        {off, UINT64_MAX},          /* wraps */
        {UINT64_MAX - 63, 64},      /* wraps */
        {1ull << 63, 1ull << 63},
        {off, 0},                   /* empty */
        {off, len + 64},            /* past the extent */
        {off + len, 64},            /* after the extent, inside the heap */
        {off + len - 64, 128},      /* straddles the extent end */
        {off + 1ull * 1024 * 1024, 4096}, /* free heap */
    };
    if (heap >= 64) {
        ranges.push_back({heap - 64, 64});   /* metadata below the heap */
        ranges.push_back({heap - 64, 128});  /* straddles the heap start */
    }
    if (off > heap) {
        ranges.push_back({off - 64, 128});   /* straddles the extent start */
    }

    for (const range &r : ranges) {
        packed_rkey k = m_key;
        k.offset      = r.offset;
        k.length      = r.length;
        rkey_fix_crc(&k);
        EXPECT_EQ(UCS_ERR_INVALID_ADDR, unpack(k))
                << "range 0x" << std::hex << r.offset << "+0x" << r.length;
    }

    /* an extent index the pool does not have */
    for (uint32_t index : {0x7fffffffu, 0xffffffffu, 1u << 20}) {
        packed_rkey k = m_key;
        k.ext_index   = index;
        rkey_fix_crc(&k);
        EXPECT_EQ(UCS_ERR_INVALID_ADDR, unpack(k)) << "ext_index " << index;
    }

    /* the owner address is only a translation base: any value is safe */
    for (uint64_t va : {0ull, 1ull, ~0ull, (unsigned long long)off}) {
        packed_rkey k = m_key;
        k.owner_va    = va;
        rkey_fix_crc(&k);
        rkey key;
        void *p;
        ASSERT_EQ(UCS_OK, key.unpack(m_stack.component, &k));
        ASSERT_EQ(UCS_OK, key.ptr(va, &p));
        EXPECT_EQ(m_mem.address, p);
        ASSERT_EQ(UCS_OK, key.ptr(va + len - 1, &p));
        EXPECT_EQ((uint8_t*)m_mem.address + len - 1, p);
        EXPECT_NE(UCS_OK, key.ptr(va - 1, &p));
    }
}

TEST_F(cxl_rkey, unknown_pool_unreachable)
{
    packed_rkey k = m_key;

    k.uuid[0] ^= 0x5a;
    k.uuid[15] ^= 0xa5;
    rkey_fix_crc(&k);
    EXPECT_EQ(UCS_ERR_UNREACHABLE, unpack(k));

    /* a real key of a real pool this process does not attach */
    std::string other = new_pool(64 * MiB);
    std::vector<uint8_t> other_buf;
    use_pools(other);
    {
        stack s;
        uct_allocated_memory_t mem;
        ASSERT_EQ(UCS_OK, s.open_md()) << s.error;
        ASSERT_EQ(UCS_OK, s.alloc(4096, &mem)) << s.error;
        ASSERT_EQ(UCS_OK, s.pack(mem.memh, &other_buf));
        rkey key;
        /* attached: fine */
        EXPECT_EQ(UCS_OK, key.unpack(m_stack.component, other_buf.data()));
        key.release();
        ASSERT_EQ(UCS_OK, uct_mem_free(&mem));
    }
    rkey key;
    EXPECT_EQ(UCS_ERR_UNREACHABLE, key.unpack(m_stack.component, other_buf.data()))
            << "the pool of this key is no longer attached by this process";
}

TEST_F(cxl_rkey, stale_key_rejected)
{
    std::vector<uint8_t> new_buf;
    uct_allocated_memory_t mem;
    rkey key;

    ASSERT_EQ(UCS_OK, key.unpack(m_stack.component, m_buf.data()));
    key.release();

    ASSERT_EQ(UCS_OK, uct_mem_free(&m_mem));
    m_allocated = false;
    EXPECT_EQ(UCS_ERR_NO_ELEM, key.unpack(m_stack.component, m_buf.data()))
            << "key of freed memory";

    /* the same extent record, reused: a new generation */
    ASSERT_EQ(UCS_OK, m_stack.alloc(64 * KiB, &mem)) << m_stack.error;
    ASSERT_EQ(UCS_OK, m_stack.pack(mem.memh, &new_buf));
    packed_rkey nk = to_key(new_buf);
    ASSERT_EQ(m_key.ext_index, nk.ext_index)
            << "the scenario needs the extent record to be reused";
    EXPECT_NE(m_key.ext_gen, nk.ext_gen);
    EXPECT_EQ(UCS_ERR_NO_ELEM, key.unpack(m_stack.component, m_buf.data()))
            << "key of a freed extent whose record was reused";
    EXPECT_EQ(UCS_OK, key.unpack(m_stack.component, new_buf.data()));
    key.release();
    ASSERT_EQ(UCS_OK, uct_mem_free(&mem));
}

/* Whatever the fields of a key with a valid checksum say, a key that is
 * accepted grants only memory of an allocated extent inside the pool. */
TEST_F(cxl_rkey, mutated_keys_stay_inside_the_pool)
{
    std::vector<uct_allocated_memory_t> others(3);
    std::mt19937_64 rng(12345);
    cxlpool_t *ro = open_readonly(m_path);
    unsigned accepted = 0;

    ASSERT_TRUE(ro != nullptr);
    for (uct_allocated_memory_t &m : others) {
        ASSERT_EQ(UCS_OK, m_stack.alloc(8192, &m)) << m_stack.error;
    }

    for (int i = 0; i < 20000; ++i) {
        packed_rkey k = m_key;
        uint64_t r    = rng();

        switch (r % 6) {
        case 0: k.offset = rng() % (m_info.size + 65536); break;
        case 1: k.offset += (int64_t)(rng() % 16384) - 8192; break;
        case 2: k.length = (rng() % 2) ? rng() : rng() % (256 * 1024); break;
        case 3: k.ext_index = rng() % 8; break;
        case 4: k.ext_gen += (uint32_t)(rng() % 5) - 2; break;
        case 5:
            k.offset = rng() % (m_info.size + 65536);
            k.length = rng() % (128 * 1024);
            k.ext_index = rng() % 8;
            break;
        }
        k.owner_va = rng();
        rkey_fix_crc(&k);

        rkey key;
        if (key.unpack(m_stack.component, &k) != UCS_OK) {
            continue;
        }
        ++accepted;

        void *first, *last;
        uint64_t off_first, off_last;
        cxlpool_extent_t ext;
        ASSERT_EQ(UCS_OK, key.ptr(k.owner_va, &first));
        ASSERT_EQ(UCS_OK, key.ptr(k.owner_va + k.length - 1, &last));
        ASSERT_TRUE(inside(m_maps, first, 1, &off_first)) << first;
        ASSERT_TRUE(inside(m_maps, last, 1, &off_last)) << last;
        ASSERT_EQ(k.offset, off_first);
        ASSERT_EQ(k.offset + k.length - 1, off_last);
        ASSERT_EQ(CXLPOOL_OK, cxlpool_extent_find(ro, k.offset, k.length, &ext))
                << "accepted key 0x" << std::hex << k.offset << "+0x"
                << k.length << " is not inside an allocated extent";
        ASSERT_EQ(ext.index, k.ext_index);
        ASSERT_EQ(ext.gen, k.ext_gen);
    }
    EXPECT_GT(accepted, 0u) << "the mutations never kept a valid key";

    for (uct_allocated_memory_t &m : others) {
        ASSERT_EQ(UCS_OK, uct_mem_free(&m));
    }
    cxlpool_close(ro);
}

namespace {

void find_own_slot(const cxlpool_attach_info_t *att, void *arg)
{
    if (att->pid == getpid()) {
        *(int*)arg = (int)att->slot;
    }
}

} // namespace

/*
 * UCX_CXL_HOST_INDEX: a software-coherent pool with several host partitions
 * needs it, a bad value is refused, and the MD's attachment lands in the
 * chosen partition.
 */
TEST_F(cxl_md, host_index_of_a_multi_host_pool)
{
    struct env_guard {
        ~env_guard() { unsetenv("UCX_CXL_HOST_INDEX"); }
    } guard;
    /* sw pools get CXLPOOL_DEFAULT_SW_HOSTS partitions of 256 / 8 slots */
    std::string sw_pool = new_pool(64ull << 20, CXL_COH_SW);
    const int slots_per_host = 256 / CXLPOOL_DEFAULT_SW_HOSTS;

    use_pools(sw_pool);
    set_coherence("auto");
    {
        hide_errors quiet;
        stack s;
        unsetenv("UCX_CXL_HOST_INDEX");
        EXPECT_NE(UCS_OK, s.open_md()) << "no host index given";
        setenv("UCX_CXL_HOST_INDEX", "eight", 1);
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, s.open_md());
        setenv("UCX_CXL_HOST_INDEX", "8", 1);
        EXPECT_NE(UCS_OK, s.open_md()) << "index out of range";
    }

    setenv("UCX_CXL_HOST_INDEX", "2", 1);
    stack s;
    ASSERT_EQ(UCS_OK, s.open_md()) << s.error;
    cxlpool_t *ro = open_readonly(sw_pool);
    ASSERT_TRUE(ro != NULL);
    int slot = -1;
    cxlpool_foreach_attach(ro, find_own_slot, &slot);
    EXPECT_GE(slot, 2 * slots_per_host);
    EXPECT_LT(slot, 3 * slots_per_host);
    cxlpool_close(ro);
}

/* A peer's direct pointer would read what the owner never wrote back. */
TEST_F(cxl_md, no_rkey_ptr_with_sw_coherence)
{
    setenv("UCX_CXL_REG_ANY", "n", 1); /* the mode with rkey_ptr */
    {
        stack s;
        ASSERT_EQ(UCS_OK, s.open_md()) << s.error;
        EXPECT_TRUE(s.md_attr.cap.flags & UCT_MD_FLAG_RKEY_PTR);
    }
    set_coherence("sw");
    stack s;
    ASSERT_EQ(UCS_OK, s.open_md()) << s.error;
    EXPECT_FALSE(s.md_attr.cap.flags & UCT_MD_FLAG_RKEY_PTR);
    EXPECT_TRUE(s.md_attr.cap.flags & UCT_MD_FLAG_ALLOC);
    unsetenv("UCX_CXL_REG_ANY");
}

/*
 * UCX_CXL_RKEY_PTR: "try" (default) offers rkey_ptr only without REG_ANY,
 * "yes" with it too (the single-host line UCX_TLS=cxl,cma: UCP 1.13 then
 * moves pool-resident rendezvous out of the pool instead of splitting it
 * with cma), "no" never; software coherence never.
 */
TEST_F(cxl_md, rkey_ptr_setting)
{
    static const struct {
        const char *rkey_ptr, *reg_any;
        bool        expect;
    } cases[] = {
        {"try", "y", false}, {"try", "n", true}, {"yes", "y", true},
        {"yes", "n", true},  {"no", "y", false}, {"no", "n", false},
    };
    for (const auto &c : cases) {
        setenv("UCX_CXL_RKEY_PTR", c.rkey_ptr, 1);
        setenv("UCX_CXL_REG_ANY", c.reg_any, 1);
        stack s;
        ASSERT_EQ(UCS_OK, s.open_md()) << s.error;
        EXPECT_EQ(c.expect, !!(s.md_attr.cap.flags & UCT_MD_FLAG_RKEY_PTR))
                << "UCX_CXL_RKEY_PTR=" << c.rkey_ptr << " UCX_CXL_REG_ANY="
                << c.reg_any;
        EXPECT_EQ(!strcmp(c.reg_any, "y"),
                  !!(s.md_attr.cap.flags & UCT_MD_FLAG_REG));
    }
    setenv("UCX_CXL_RKEY_PTR", "yes", 1);
    setenv("UCX_CXL_REG_ANY", "y", 1);
    set_coherence("sw");
    {
        stack s;
        ASSERT_EQ(UCS_OK, s.open_md()) << s.error;
        EXPECT_FALSE(s.md_attr.cap.flags & UCT_MD_FLAG_RKEY_PTR);
    }
    unsetenv("UCX_CXL_RKEY_PTR");
    unsetenv("UCX_CXL_REG_ANY");
}
