/*
 * ucx_gtest_tl.h - restrict UCX's own UCT gtest suites to ONE transport.
 *
 * Included first by every cxl_test_*.cc wrapper of this directory, which then
 * #includes one test file of UCX's source tree (test/gtest/uct/...).  The
 * wrappers are compiled by run-ucx-gtest.sh with the flags of UCX's own
 * test/gtest/Makefile and linked with the gtest objects built by
 * build-ucx-gtest.sh; nothing in the UCX tree is modified.
 *
 * The transport defaults to "cxl"; run-ucx-gtest.sh --tl NAME passes
 * -DUCX_GTEST_TL=NAME (e.g. posix, to validate the harness without the cxl
 * module) and -DUCX_GTEST_MD_COMPONENT=NAME for test_md.cc.
 *
 * How it works: uct_test.h defines the transport lists used by
 * UCT_INSTANTIATE_TEST_CASE / _NO_SELF_ / _NO_GPU_ and has an include guard,
 * so redefining the lists here, after including it, is what the included
 * test file sees.  UCS_PP_FOREACH with a single name is fine.
 */
#ifndef UCX_CXL_UCX_GTEST_TL_H_
#define UCX_CXL_UCX_GTEST_TL_H_

#include <uct/uct_test.h>

#ifndef UCX_GTEST_TL
#  define UCX_GTEST_TL cxl
#endif

/* Component name for test_md.cc (which enumerates MD components, not TLs). */
#ifndef UCX_GTEST_MD_COMPONENT
#  define UCX_GTEST_MD_COMPONENT UCX_GTEST_TL
#endif

#undef UCT_TEST_TLS
#undef UCT_TEST_NO_SELF_TLS
#undef UCT_TEST_NO_GPU_MEM_TYPE_TLS
#define UCT_TEST_TLS                 UCX_GTEST_TL
#define UCT_TEST_NO_SELF_TLS         UCX_GTEST_TL
#define UCT_TEST_NO_GPU_MEM_TYPE_TLS UCX_GTEST_TL

#endif
