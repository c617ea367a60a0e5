/*
 * UCX gtest uct/test_md.cc for one MD component only (see ucx_gtest_tl.h).
 *
 * test_md.cc #defines UCT_MD_INSTANTIATE_TEST_CASE itself as a
 * UCS_PP_FOREACH of _UCT_MD_INSTANTIATE_TEST_CASE over a fixed list of
 * component names (knem, cma, posix, sysv, xpmem, cuda_cpy, cuda_ipc,
 * rocm_cpy, rocm_ipc, ib, ugni, sockcm, rdmacm), so that list cannot be
 * replaced before the #include.  The per-name macro comes from test_md.h,
 * which has an include guard: make it a no-op for the included file, then
 * instantiate test_md and test_md_fork for UCX_GTEST_MD_COMPONENT only.
 */
#include "ucx_gtest_tl.h"
#include <uct/test_md.h>

#undef _UCT_MD_INSTANTIATE_TEST_CASE
#define _UCT_MD_INSTANTIATE_TEST_CASE(_test_case, _cmpt_name) /* dropped */

#include <uct/test_md.cc>

/* Two levels so that UCX_GTEST_MD_COMPONENT is expanded before gtest pastes
 * and stringifies it. */
#define UCX_GTEST_MD_INSTANTIATE(_test_case, _cmpt_name) \
    INSTANTIATE_TEST_SUITE_P(_cmpt_name, _test_case, \
                             testing::ValuesIn(_test_case::enum_mds(UCS_PP_QUOTE(_cmpt_name))));

UCX_GTEST_MD_INSTANTIATE(test_md, UCX_GTEST_MD_COMPONENT)
UCX_GTEST_MD_INSTANTIATE(test_md_fork, UCX_GTEST_MD_COMPONENT)
