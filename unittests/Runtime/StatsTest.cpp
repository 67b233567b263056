//===- StatsTest.cpp - GEMM and block-sparse counters ---------------------===//

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
  dsrt_stats stats = {1, 1.0, 1.0, 1, 1, 1, 1.0, 1.0, 1.0, 1};
  dsrt_get_stats(&stats);
  EXPECT_EQ(stats.gemm_calls, 0u);
  EXPECT_EQ(stats.gemm_flops, 0.0);
  EXPECT_EQ(stats.gemm_seconds, 0.0);
  EXPECT_EQ(stats.sparse_calls, 0u);
  EXPECT_EQ(stats.sparse_flops, 0.0);
  EXPECT_EQ(stats.sparse_dense_flops, 0.0);
  EXPECT_EQ(stats.sparse_seconds, 0.0);
  EXPECT_EQ(stats.sparse_fallback_calls, 0u);
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

/// Y = X W^T on a [16, 24] weight with `active` of its 6 8x8 blocks active.
void sparseForward(int64_t m, int active) {
  std::vector<float> x(m * 24, 0.5f), w(16 * 24, 0.25f), y(m * 16);
  std::vector<int8_t> mask(6, 0);
  for (int i = 0; i < active; ++i)
    mask[i] = 1;
  dsrt_memref2_f32 xd = {x.data(), x.data(), 0, {m, 24}, {24, 1}};
  dsrt_memref2_f32 wd = {w.data(), w.data(), 0, {16, 24}, {24, 1}};
  dsrt_memref2_i8 md = {mask.data(), mask.data(), 0, {2, 3}, {3, 1}};
  dsrt_memref2_f32 yd = {y.data(), y.data(), 0, {m, 16}, {16, 1}};
  _mlir_ciface_dsrt_block_sparse_matmul_f32(&xd, &wd, &md, &yd, 1, 8);
}

TEST_F(StatsTest, CountsBlockSparseCallsApartFromGemms) {
  sparseForward(5, 2); // 2 * 5 * (2 * 64) useful, 2 * 5 * 16 * 24 dense
  sparseForward(3, 0);
  gemm<float>(1, 2, 2, 2, 1);
  ASSERT_EQ(dsrt_last_error(), nullptr);
  dsrt_stats stats;
  dsrt_get_stats(&stats);
  EXPECT_EQ(stats.sparse_calls, 2u);
  EXPECT_EQ(stats.sparse_flops, 2.0 * 5 * 128);
  EXPECT_EQ(stats.sparse_dense_flops, 2.0 * 5 * 384 + 2.0 * 3 * 384);
  EXPECT_GT(stats.sparse_seconds, 0.0);
  EXPECT_LT(stats.sparse_seconds, 60.0);
  EXPECT_EQ(stats.gemm_calls, 1u);
  EXPECT_EQ(stats.gemm_flops, 16.0);
  dsrt_reset_stats();
  dsrt_get_stats(&stats);
  EXPECT_EQ(stats.sparse_calls, 0u);
  EXPECT_EQ(stats.sparse_flops, 0.0);
}

TEST_F(StatsTest, NullOutputIsIgnored) { dsrt_get_stats(nullptr); }

} // namespace
