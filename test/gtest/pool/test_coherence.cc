/*
 * Coherence primitives: mode parsing, instruction choice from CPUID (checked
 * against the kernel's view in /proc/cpuinfo), and that flushing keeps data.
 */
#include "pool_test_util.h"

#include <fstream>
#include <sstream>

static bool cpu_has(const std::string &flag)
{
    std::ifstream f("/proc/cpuinfo");
    std::string line;

    while (std::getline(f, line)) {
        if (line.compare(0, 5, "flags") == 0) {
            std::istringstream ss(line.substr(line.find(':') + 1));
            std::string w;
            while (ss >> w) {
                if (w == flag) {
                    return true;
                }
            }
            return false;
        }
    }
    return false;
}

TEST(coherence, mode_parse)
{
    cxl_coh_mode_t m;

    EXPECT_EQ(0, cxl_coh_mode_parse("hw", &m));
    EXPECT_EQ(CXL_COH_HW, m);
    EXPECT_EQ(0, cxl_coh_mode_parse("sw", &m));
    EXPECT_EQ(CXL_COH_SW, m);
    EXPECT_EQ(-1, cxl_coh_mode_parse("auto", &m));
    EXPECT_EQ(-1, cxl_coh_mode_parse("", &m));
    EXPECT_STREQ("sw", cxl_coh_mode_name(CXL_COH_SW));
    EXPECT_STREQ("hw", cxl_coh_mode_name(CXL_COH_HW));
}

TEST(coherence, instruction_choice_matches_cpu)
{
    cxl_coh_insn_t wb  = cxl_coh_writeback_insn();
    cxl_coh_insn_t inv = cxl_coh_invalidate_insn();

    if (cpu_has("clwb")) {
        EXPECT_EQ(CXL_COH_INSN_CLWB, wb);
    } else if (cpu_has("clflushopt")) {
        EXPECT_EQ(CXL_COH_INSN_CLFLUSHOPT, wb);
    } else {
        EXPECT_EQ(CXL_COH_INSN_CLFLUSH, wb);
    }
    /* invalidation must evict: never clwb */
    EXPECT_NE(CXL_COH_INSN_CLWB, inv);
    EXPECT_EQ(cpu_has("clflushopt") ? CXL_COH_INSN_CLFLUSHOPT :
              CXL_COH_INSN_CLFLUSH, inv);
    std::cout << "write-back: " << cxl_coh_insn_name(wb)
              << ", invalidate: " << cxl_coh_insn_name(inv) << std::endl;
}

TEST(coherence, flush_preserves_data)
{
    std::vector<uint8_t> buf(8192 + 13);

    for (cxl_coh_mode_t mode : {CXL_COH_HW, CXL_COH_SW}) {
        cxltest::fill_pattern(buf.data(), buf.size(), mode + 1);
        /* unaligned start and length cover partial lines at both ends */
        cxl_coh_writeback(mode, buf.data() + 3, buf.size() - 3);
        cxl_coh_fence(mode);
        EXPECT_TRUE(cxltest::check_pattern(buf.data(), buf.size(), mode + 1));
        cxl_coh_invalidate(mode, buf.data() + 5, buf.size() - 5);
        EXPECT_TRUE(cxltest::check_pattern(buf.data(), buf.size(), mode + 1));
        cxl_coh_publish(mode, buf.data(), 0);
    }
}

/* cxl_coh_copy: memcpy plus write-back, whole lines streamed in sw mode;
 * partial lines at both ends, the bytes around the range untouched. */
TEST(coherence, copy_writes_exactly_the_range)
{
    std::vector<uint8_t> src(8192 + 200), dst(8192 + 400);

    for (cxl_coh_mode_t mode : {CXL_COH_HW, CXL_COH_SW}) {
        for (size_t off : {0, 3, 64, 100}) {
            for (size_t len : {0, 1, 48, 64, 130, 8192 + 77}) {
                uint8_t *d = (uint8_t*)(((uintptr_t)dst.data() + 63) & ~63ul) + off;
                cxltest::fill_pattern(src.data(), len, off + len);
                memset(dst.data(), 0xee, dst.size());
                cxl_coh_copy(mode, d, src.data(), len);
                cxl_coh_fence(mode);
                EXPECT_EQ(0, memcmp(d, src.data(), len)) << off << "+" << len;
                for (uint8_t *p = dst.data(); p < d; ++p) {
                    ASSERT_EQ(0xee, *p) << "before " << off << "+" << len;
                }
                for (uint8_t *p = d + len; p < dst.data() + dst.size(); ++p) {
                    ASSERT_EQ(0xee, *p) << "after " << off << "+" << len;
                }
            }
        }
    }
}

