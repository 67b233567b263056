//===- StatsTest.cpp - GEMM counters --------------------------------------===//

#include "RuntimeTestUtils.h"

#include "ds/Runtime/ds_runtime.h"

#include "gtest/gtest.h"

using namespace dsrt_test;

namespace {

class StatsTest : public ::testing::Test {
protected:
  void SetUp() override {
    dsrt_clear_error();
    dsrt_reset_stats();
  }
  void TearDown() override { dsrt_clear_error(); }
};

/// C = op(A) * op(B) on fresh contiguous tensors of the given sizes.
template <typename T>
void gemm(int64_t batches, int64_t m, int64_t n, int64_t k, int64_t bBatches) {
  std::mt19937 rng(11);
  Tensor<T> a = makeTensor<T>(batches, m, k, Layout::Contiguous, rng);
  Tensor<T> b = makeTensor<T>(bBatches, k, n, Layout::Contiguous, rng);
  Tensor<T> c = makeTensor<T>(batches, m, n, Layout::Contiguous, rng);
  Memref<T>::matmul(&a.desc, &b.desc, &c.desc, false, false);
}

TEST_F(StatsTest, StartsAtZeroAfterReset) {
  gemm<float>(1, 2, 2, 2, 1);
  dsrt_reset_stats();
  dsrt_stats stats = {1, 1.0, 1.0, 1, 1};
  dsrt_get_stats(&stats);
  EXPECT_EQ(stats.gemm_calls, 0u);
  EXPECT_EQ(stats.gemm_flops, 0.0);
  EXPECT_EQ(stats.gemm_seconds, 0.0);
}

TEST_F(StatsTest, CountsCallsAndFlops) {
  gemm<float>(3, 7, 5, 3, 3);     // 2 * 7*5*3 * 3 = 630
  gemm<double>(2, 33, 17, 65, 1); // 2 * 33*17*65 * 2 = 145860
  gemm<float>(64, 128, 128, 64, 64);
  ASSERT_EQ(dsrt_last_error(), nullptr);
  dsrt_stats stats;
  dsrt_get_stats(&stats);
  EXPECT_EQ(stats.gemm_calls, 3u);
  EXPECT_EQ(stats.gemm_flops, 630.0 + 145860.0 + 2.0 * 128 * 128 * 64 * 64);
  EXPECT_GT(stats.gemm_seconds, 0.0);
  EXPECT_LT(stats.gemm_seconds, 60.0);
}

TEST_F(StatsTest, FailedCallsAreNotCounted) {
  gemm<float>(3, 7, 5, 3, 2); // B has 2 batches, C 3
  ASSERT_NE(dsrt_last_error(), nullptr);
  dsrt_stats stats;
  dsrt_get_stats(&stats);
  EXPECT_EQ(stats.gemm_calls, 0u);
  EXPECT_EQ(stats.gemm_flops, 0.0);
}

TEST_F(StatsTest, NullOutputIsIgnored) { dsrt_get_stats(nullptr); }

} // namespace
