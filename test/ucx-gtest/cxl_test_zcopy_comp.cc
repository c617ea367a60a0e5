/* UCX gtest uct/test_zcopy_comp.cc, instantiated for one transport only (see ucx_gtest_tl.h). */
#include "ucx_gtest_tl.h"
#include <uct/test_zcopy_comp.cc>
