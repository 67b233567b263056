//===- ThreadsTest.cpp - Thread count control
//------------------------------===//

#include "RuntimeTestUtils.h"

#include "ds/Runtime/ds_runtime.h"

#include "gtest/gtest.h"

#include <thread>

using namespace dsrt_test;

namespace {

class ThreadsTest : public ::testing::Test {
protected:
  void SetUp() override {
    dsrt_clear_error();
    dsrt_set_num_threads(0);
  }
  void TearDown() override {
    dsrt_set_num_threads(0);
    dsrt_clear_error();
  }
};

TEST_F(ThreadsTest, DefaultIsPositive) { EXPECT_GE(dsrt_get_num_threads(), 1); }

TEST_F(ThreadsTest, SetAndGet) {
  int initial = dsrt_get_num_threads();
  dsrt_set_num_threads(1);
  EXPECT_EQ(dsrt_get_num_threads(), 1);
  dsrt_set_num_threads(3);
  EXPECT_EQ(dsrt_get_num_threads(), 3);
  dsrt_set_num_threads(0);
  EXPECT_EQ(dsrt_get_num_threads(), initial);
  EXPECT_EQ(dsrt_last_error(), nullptr);
}

TEST_F(ThreadsTest, NegativeIsAnErrorAndChangesNothing) {
  dsrt_set_num_threads(2);
  dsrt_set_num_threads(-1);
  ASSERT_NE(dsrt_last_error(), nullptr);
  EXPECT_NE(std::string(dsrt_last_error()).find("got -1"), std::string::npos)
      << dsrt_last_error();
  EXPECT_EQ(dsrt_get_num_threads(), 2);
}

/// The count is process-wide, not a per-thread OpenMP setting.
TEST_F(ThreadsTest, AppliesToOtherThreads) {
  dsrt_set_num_threads(1);
  int seen = 0;
  std::thread other([&] {
    seen = dsrt_get_num_threads();
    // GEMMs from this thread (whose own OpenMP setting is the default)
    // still compute correctly.
    std::mt19937 rng(2);
    Tensor<float> a = makeTensor<float>(4, 20, 30, Layout::Contiguous, rng);
    Tensor<float> b = makeTensor<float>(4, 30, 10, Layout::Contiguous, rng);
    Tensor<float> c = makeTensor<float>(4, 20, 10, Layout::Contiguous, rng);
    _mlir_ciface_dsrt_matmul_f32(&a.desc, &b.desc, &c.desc, 0, 0);
    EXPECT_TRUE(matchesReference(a, b, c, false, false));
  });
  other.join();
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(dsrt_last_error(), nullptr);
}

} // namespace
