/* UCX gtest uct/test_flush.cc, instantiated for one transport only (see ucx_gtest_tl.h). */
#include "ucx_gtest_tl.h"
#include <uct/test_flush.cc>
