#include "cxl_uct_util.h"

#include <atomic>
#include <fcntl.h>
#include <sys/mman.h>
#include <errno.h>
#include <fstream>
#include <sstream>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

namespace cxluct {

uint32_t rkey_crc(const packed_rkey &key)
{
    packed_rkey tmp = key;

    tmp.crc = 0;
    return cxlpool_crc32c(0, &tmp, sizeof(tmp));
}

void rkey_fix_crc(packed_rkey *key)
{
    key->crc = rkey_crc(*key);
}

uct_component_h cxl_component()
{
    uct_component_h *components, found = nullptr;
    unsigned i, count;

    if (uct_query_components(&components, &count) != UCS_OK) {
        return nullptr;
    }
    for (i = 0; i < count; ++i) {
        uct_component_attr_t attr;
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
        if ((uct_component_query(components[i], &attr) == UCS_OK) &&
            !strcmp(attr.name, "cxl")) {
            found = components[i];
            break;
        }
    }
    /* components are static objects: the handle outlives the list */
    uct_release_component_list(components);
    return found;
}

static std::atomic<unsigned> g_pool_counter{0};

std::string unique_pool_path(const char *tag)
{
    char buf[128];

    snprintf(buf, sizeof(buf), "/dev/shm/cxlu-%d-%u%s.pool", (int)getpid(),
             g_pool_counter++, tag);
    return buf;
}

std::string dev_name_of(const std::string &path)
{
    std::string base = path.substr(path.rfind('/') + 1);

    if ((base.size() > 5) && (base.compare(base.size() - 5, 5, ".pool") == 0)) {
        base.resize(base.size() - 5);
    }
    return base;
}

std::string create_pool(const std::string &path, uint64_t size,
                        cxl_coh_mode_t coh, uint32_t nr_hosts)
{
    cxlpool_params_t params;
    cxlpool_t *pool;

    cxlpool_params_init(&params);
    params.path      = path.c_str();
    params.size      = size;
    params.coherence = coh;
    params.nr_hosts  = nr_hosts;
    params.flags     = CXLPOOL_CREATE | CXLPOOL_EXCL | CXLPOOL_NO_ATTACH |
                       CXLPOOL_NO_HEARTBEAT;
    if (cxlpool_open(&params, &pool) != CXLPOOL_OK) {
        return cxlpool_last_error();
    }
    cxlpool_close(pool);
    return "";
}

std::vector<mapping> find_mappings(const std::string &path, bool writable)
{
    std::vector<mapping> result;
    std::ifstream maps("/proc/self/maps");
    std::string line;

    while (std::getline(maps, line)) {
        unsigned long start, end, offset;
        char perms[8], file[512];

        file[0] = '\0';
        if (sscanf(line.c_str(), "%lx-%lx %7s %lx %*s %*s %511s", &start, &end,
                   perms, &offset, file) < 4) {
            continue;
        }
        if ((path != file) || (writable && (perms[1] != 'w'))) {
            continue;
        }
        result.push_back({start, end, offset});
    }
    return result;
}

void fill_random(void *p, size_t len, uint64_t seed)
{
    uint8_t *b = (uint8_t*)p;
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
    size_t i   = 0;

    while (i < len) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        for (unsigned k = 0; (k < 8) && (i < len); ++k, ++i) {
            b[i] = (uint8_t)(x >> (8 * k));
        }
    }
}

uint8_t guard_byte(size_t index)
{
    return (uint8_t)(0xa5 ^ (index * 29) ^ (index >> 8));
}

void fill_guard(void *p, size_t len, size_t index0)
{
    uint8_t *b = (uint8_t*)p;

    for (size_t i = 0; i < len; ++i) {
        b[i] = guard_byte(index0 + i);
    }
}

ssize_t guard_mismatch(const void *p, size_t len, size_t index0)
{
    const uint8_t *b = (const uint8_t*)p;

    for (size_t i = 0; i < len; ++i) {
        if (b[i] != guard_byte(index0 + i)) {
            return (ssize_t)i;
        }
    }
    return -1;
}

ssize_t first_diff(const void *a, const void *b, size_t len)
{
    const uint8_t *x = (const uint8_t*)a, *y = (const uint8_t*)b;

    if (memcmp(a, b, len) == 0) {
        return -1;
    }
    for (size_t i = 0; i < len; ++i) {
        if (x[i] != y[i]) {
            return (ssize_t)i;
        }
    }
    return -1;
}

/* ---- stack ---- */

ucs_status_t stack::open_md()
{
    uct_component_attr_t attr;
    uct_md_config_t *config;
    ucs_status_t status;

    component = cxl_component();
    if (component == nullptr) {
        error = "component \"cxl\" is not registered";
        return UCS_ERR_NO_DEVICE;
    }

    uct_md_resource_desc_t resources[4];
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    status          = uct_component_query(component, &attr);
    if ((status != UCS_OK) || (attr.md_resource_count != 1)) {
        error = "component query failed or md_resource_count != 1";
        return (status != UCS_OK) ? status : UCS_ERR_INVALID_PARAM;
    }
    attr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attr.md_resources = resources;
    status            = uct_component_query(component, &attr);
    if (status != UCS_OK) {
        error = "component query (md resources) failed";
        return status;
    }

    status = uct_md_config_read(component, NULL, NULL, &config);
    if (status != UCS_OK) {
        error = "uct_md_config_read failed";
        return status;
    }
    status = uct_md_open(component, resources[0].md_name, config, &md);
    uct_config_release(config);
    if (status != UCS_OK) {
        md    = nullptr;
        error = std::string("uct_md_open failed: ") + ucs_status_string(status);
        return status;
    }

    status = uct_md_query(md, &md_attr);
    if (status != UCS_OK) {
        error = "uct_md_query failed";
    }
    return status;
}

ucs_status_t stack::devices(std::vector<uct_tl_resource_desc_t> *res)
{
    uct_tl_resource_desc_t *resources;
    unsigned count;
    ucs_status_t status;

    status = uct_md_query_tl_resources(md, &resources, &count);
    if (status != UCS_OK) {
        error = "uct_md_query_tl_resources failed";
        return status;
    }
    res->assign(resources, resources + count);
    uct_release_tl_resource_list(resources);
    return UCS_OK;
}

ucs_status_t stack::open_iface(const std::string &dev, ucs_thread_mode_t mode)
{
    uct_iface_config_t *config;
    uct_iface_params_t params;
    ucs_status_t status;

    status = ucs_async_context_create(UCS_ASYNC_MODE_POLL, &async);
    if (status != UCS_OK) {
        async = nullptr;
        error = "ucs_async_context_create failed";
        return status;
    }
    status = uct_worker_create(async, mode, &worker);
    if (status != UCS_OK) {
        worker = nullptr;
        error  = "uct_worker_create failed";
        return status;
    }

    status = uct_md_iface_config_read(md, "cxl", NULL, NULL, &config);
    if (status != UCS_OK) {
        error = "uct_md_iface_config_read failed";
        return status;
    }

    memset(&params, 0, sizeof(params));
    params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                  UCT_IFACE_PARAM_FIELD_DEVICE;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = "cxl";
    params.mode.device.dev_name = dev.c_str();
    status = uct_iface_open(md, worker, &params, config, &iface);
    uct_config_release(config);
    if (status != UCS_OK) {
        iface = nullptr;
        error = std::string("uct_iface_open(") + dev + ") failed: " +
                ucs_status_string(status);
        return status;
    }

    status = uct_iface_query(iface, &iface_attr);
    if (status != UCS_OK) {
        error = "uct_iface_query failed";
        return status;
    }

    /* a little slack: a transport writing past the advertised length
     * shows up as a changed byte */
    dev_addr.assign(iface_attr.device_addr_len + 8, 0xee);
    iface_addr.assign(iface_attr.iface_addr_len + 8, 0xee);
    status = uct_iface_get_device_address(iface,
                                          (uct_device_addr_t*)dev_addr.data());
    if (status != UCS_OK) {
        error = "uct_iface_get_device_address failed";
        return status;
    }
    status = uct_iface_get_address(iface, (uct_iface_addr_t*)iface_addr.data());
    if (status != UCS_OK) {
        error = "uct_iface_get_address failed";
        return status;
    }
    for (size_t i = 0; i < 8; ++i) {
        if ((dev_addr[iface_attr.device_addr_len + i] != 0xee) ||
            (iface_addr[iface_attr.iface_addr_len + i] != 0xee)) {
            error = "an address was written past its advertised length";
            return UCS_ERR_BUFFER_TOO_SMALL;
        }
    }
    dev_addr.resize(iface_attr.device_addr_len);
    iface_addr.resize(iface_attr.iface_addr_len);
    return UCS_OK;
}

ucs_status_t stack::open(const std::string &dev)
{
    ucs_status_t status = open_md();

    return (status == UCS_OK) ? open_iface(dev) : status;
}

ucs_status_t stack::connect(const void *dev, const void *ifa, uct_ep_h *ep_p)
{
    uct_ep_params_t params;
    ucs_status_t status;

    memset(&params, 0, sizeof(params));
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                        UCT_EP_PARAM_FIELD_IFACE_ADDR;
    params.iface      = iface;
    params.dev_addr   = (const uct_device_addr_t*)dev;
    params.iface_addr = (const uct_iface_addr_t*)ifa;
    status = uct_ep_create(&params, ep_p);
    if (status != UCS_OK) {
        error = "uct_ep_create failed";
        return status;
    }
    eps.push_back(*ep_p);
    return UCS_OK;
}

void stack::disconnect(uct_ep_h ep)
{
    for (auto it = eps.begin(); it != eps.end(); ++it) {
        if (*it == ep) {
            eps.erase(it);
            uct_ep_destroy(ep);
            return;
        }
    }
}

ucs_status_t stack::alloc(size_t length, uct_allocated_memory_t *mem)
{
    uct_alloc_method_t method = UCT_ALLOC_METHOD_MD;
    uct_mem_alloc_params_t params;
    ucs_status_t status;

    memset(&params, 0, sizeof(params));
    params.field_mask = UCT_MEM_ALLOC_PARAM_FIELD_FLAGS |
                        UCT_MEM_ALLOC_PARAM_FIELD_MEM_TYPE |
                        UCT_MEM_ALLOC_PARAM_FIELD_MDS |
                        UCT_MEM_ALLOC_PARAM_FIELD_NAME;
    params.flags      = UCT_MD_MEM_ACCESS_ALL;
    params.mem_type   = UCS_MEMORY_TYPE_HOST;
    params.mds.mds    = &md;
    params.mds.count  = 1;
    params.name       = "cxl-gtest";
    status = uct_mem_alloc(length, &method, 1, &params, mem);
    if (status != UCS_OK) {
        error = std::string("uct_mem_alloc failed: ") + ucs_status_string(status);
        return status;
    }
    if ((mem->method != UCT_ALLOC_METHOD_MD) || (mem->md != md)) {
        error = "uct_mem_alloc did not allocate from the cxl MD";
        uct_mem_free(mem);
        return UCS_ERR_UNSUPPORTED;
    }
    return UCS_OK;
}

ucs_status_t stack::pack(uct_mem_h memh, std::vector<uint8_t> *buf)
{
    buf->assign(md_attr.rkey_packed_size, 0);
    return uct_md_mkey_pack(md, memh, buf->data());
}

void stack::close()
{
    for (uct_ep_h ep : eps) {
        uct_ep_destroy(ep);
    }
    eps.clear();
    if (iface != nullptr) {
        uct_iface_close(iface);
        iface = nullptr;
    }
    if (worker != nullptr) {
        uct_worker_destroy(worker);
        worker = nullptr;
    }
    if (async != nullptr) {
        ucs_async_context_destroy(async);
        async = nullptr;
    }
    if (md != nullptr) {
        uct_md_close(md);
        md = nullptr;
    }
}

/* ---- between processes ---- */

bool make_peer_info(stack &s, const uct_allocated_memory_t &mem,
                    peer_info *info)
{
    std::vector<uint8_t> buf;

    memset(info, 0, sizeof(*info));
    if ((s.pack(mem.memh, &buf) != UCS_OK) || (buf.size() > sizeof(info->rkey)) ||
        (s.dev_addr.size() > sizeof(info->dev_addr)) ||
        (s.iface_addr.size() > sizeof(info->iface_addr))) {
        return false;
    }
    memcpy(info->rkey, buf.data(), buf.size());
    info->address        = (uintptr_t)mem.address;
    info->length         = mem.length;
    info->dev_addr_len   = (uint32_t)s.dev_addr.size();
    info->iface_addr_len = (uint32_t)s.iface_addr.size();
    memcpy(info->dev_addr, s.dev_addr.data(), s.dev_addr.size());
    memcpy(info->iface_addr, s.iface_addr.data(), s.iface_addr.size());
    return true;
}

bool write_full(int fd, const void *buf, size_t len)
{
    const uint8_t *p = (const uint8_t*)buf;

    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n <= 0) {
            if ((n < 0) && (errno == EINTR)) {
                continue;
            }
            return false;
        }
        p   += n;
        len -= n;
    }
    return true;
}

bool read_full(int fd, void *buf, size_t len)
{
    uint8_t *p = (uint8_t*)buf;

    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n <= 0) {
            if ((n < 0) && (errno == EINTR)) {
                continue;
            }
            return false;
        }
        p   += n;
        len -= n;
    }
    return true;
}

/* ---- rkey ---- */

ucs_status_t rkey::unpack(uct_component_h component, const void *buffer)
{
    ucs_status_t status;

    release();
    status = uct_rkey_unpack(component, buffer, &m_bundle);
    if (status == UCS_OK) {
        m_component = component;
    }
    return status;
}

ucs_status_t rkey::ptr(uint64_t remote_addr, void **local_p)
{
    return uct_rkey_ptr(m_component, &m_bundle, remote_addr, local_p);
}

void rkey::release()
{
    if (m_component != nullptr) {
        uct_rkey_release(m_component, &m_bundle);
        m_component = nullptr;
    }
}

/* ---- log filter ---- */

static ucs_log_func_rc_t hide_errors_handler(const char*, unsigned, const char*,
                                             ucs_log_level_t level,
                                             const ucs_log_component_config_t*,
                                             const char *message, va_list ap)
{
    char buf[512];

    if ((level > UCS_LOG_LEVEL_WARN) || (level == UCS_LOG_LEVEL_FATAL)) {
        return UCS_LOG_FUNC_RC_CONTINUE;
    }
    vsnprintf(buf, sizeof(buf), message, ap);
    hide_errors::messages().push_back(buf);
    return UCS_LOG_FUNC_RC_STOP;
}

std::vector<std::string> &hide_errors::messages()
{
    static std::vector<std::string> msgs;
    return msgs;
}

hide_errors::hide_errors()
{
    messages().clear();
    ucs_log_push_handler(hide_errors_handler);
}

hide_errors::~hide_errors()
{
    ucs_log_pop_handler();
}

/* ---- fixture ---- */

void cxl_test::SetUp()
{
    m_path = new_pool(128ull << 20);
    ASSERT_EQ(0, access(m_path.c_str(), F_OK)) << "no scratch pool " << m_path;
    use_pools(m_path);
    set_coherence("hw");
}

void cxl_test::TearDown()
{
    for (const std::string &p : m_pools) {
        unlink(p.c_str());
    }
    m_pools.clear();
    /* never let a later test fall back to the per-user default pool */
    use_pools("/dev/shm/cxlu-unset-by-teardown.pool");
    unsetenv("UCX_CXL_COHERENCE");
}

std::string cxl_test::new_pool(uint64_t size, cxl_coh_mode_t coh, const char *tag,
                               uint32_t nr_hosts)
{
    std::string path = unique_pool_path(tag);

    unlink(path.c_str());
    m_pools.push_back(path);
    std::string err = create_pool(path, size, coh, nr_hosts);
    EXPECT_EQ("", err) << "creating " << path;
    return path;
}

void cxl_test::use_pools(const std::string &value)
{
    setenv("UCX_CXL_POOL", value.c_str(), 1);
}

void cxl_test::set_coherence(const char *mode)
{
    setenv("UCX_CXL_COHERENCE", mode, 1);
}

void cxl_test::open_stack(stack &s, const std::string &pool)
{
    ASSERT_EQ(UCS_OK, s.open(dev_name_of(pool.empty() ? m_path : pool)))
            << s.error;
}

cxlpool_t *open_readonly(const std::string &path)
{
    cxlpool_params_t params;
    cxlpool_t *pool;

    cxlpool_params_init(&params);
    params.path  = path.c_str();
    params.flags = CXLPOOL_READONLY | CXLPOOL_NO_ATTACH | CXLPOOL_NO_HEARTBEAT;
    return (cxlpool_open(&params, &pool) == CXLPOOL_OK) ? pool : nullptr;
}

void cxl_test::pool_stats(cxlpool_stats_t *stats, const std::string &path)
{
    cxlpool_t *pool = open_readonly(path.empty() ? m_path : path);

    ASSERT_TRUE(pool != nullptr) << cxlpool_last_error();
    EXPECT_EQ(CXLPOOL_OK, cxlpool_stats(pool, stats)) << cxlpool_last_error();
    cxlpool_close(pool);
}

void cxl_test::pool_info(cxlpool_info_t *info, const std::string &path)
{
    cxlpool_t *pool = open_readonly(path.empty() ? m_path : path);

    ASSERT_TRUE(pool != nullptr) << cxlpool_last_error();
    cxlpool_info(pool, info);
    cxlpool_close(pool);
}

void cxl_target_test::open_target(bool two_ifaces, size_t size)
{
    std::vector<uint8_t> buf;

    m_two_ifaces = two_ifaces;
    ASSERT_NO_FATAL_FAILURE(open_stack(m_s1));
    if (two_ifaces) {
        ASSERT_NO_FATAL_FAILURE(open_stack(m_s2));
    }
    stack &t = target();
    ASSERT_EQ(UCS_OK, m_s1.connect_to(t, &m_ep)) << m_s1.error;
    ASSERT_EQ(UCS_OK, t.alloc(size, &m_mem)) << t.error;
    m_allocated = true;
    ASSERT_EQ(UCS_OK, t.pack(m_mem.memh, &buf));
    ASSERT_EQ(UCS_OK, m_key.unpack(m_s1.component, buf.data()));
    m_base = (uint8_t*)m_mem.address;
    fill_guard(m_base, m_mem.length, 0);
}

void cxl_target_test::close_target()
{
    m_key.release();
    if (m_allocated) {
        EXPECT_EQ(UCS_OK, uct_mem_free(&m_mem));
        m_allocated = false;
    }
    m_s1.close();
    m_s2.close();
}

pool_map::pool_map(const std::string &path)
{
    int fd = open(path.c_str(), O_RDWR);
    void *map;
    off_t size;

    if (fd < 0) {
        return;
    }
    size = lseek(fd, 0, SEEK_END);
    map  = (size > 0) ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED,
                             fd, 0) : MAP_FAILED;
    close(fd);
    if (map != MAP_FAILED) {
        m_base = (uint8_t*)map;
        m_size = (uint64_t)size;
    }
}

pool_map::~pool_map()
{
    if (m_base != nullptr) {
        munmap(m_base, m_size);
    }
}

} // namespace cxluct
