//===- ErrorTest.cpp - The runtime's error slot ---------------------------===//
//
// Failing calls record a message naming what mismatched, leave C untouched,
// and the first error wins until dsrt_clear_error, also under concurrency.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtils.h"

#include "ds/Runtime/ds_runtime.h"

#include "gtest/gtest.h"

#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace dsrt_test;

namespace {

class ErrorTest : public ::testing::Test {
protected:
  void SetUp() override { dsrt_clear_error(); }
  void TearDown() override { dsrt_clear_error(); }

  /// Calls the f32 GEMM on fresh tensors of the given [B, R, C] sizes and
  /// returns the recorded error ("" if none); expects C unchanged on error.
  std::string failF32(std::vector<int64_t> a, std::vector<int64_t> b,
                      std::vector<int64_t> c, bool transA = false,
                      bool transB = false) {
    std::mt19937 rng(3);
    Tensor<float> ta =
        makeTensor<float>(a[0], a[1], a[2], Layout::Contiguous, rng);
    Tensor<float> tb =
        makeTensor<float>(b[0], b[1], b[2], Layout::Contiguous, rng);
    Tensor<float> tc =
        makeTensor<float>(c[0], c[1], c[2], Layout::Contiguous, rng);
    std::vector<float> before = tc.storage;
    bool clean = dsrt_last_error() == nullptr;
    _mlir_ciface_dsrt_matmul_f32(&ta.desc, &tb.desc, &tc.desc, transA, transB);
    const char *error = dsrt_last_error();
    if (clean && error)
      EXPECT_EQ(before, tc.storage) << "a failed call wrote into C";
    return error ? error : "";
  }
};

bool contains(const char *haystack, const char *needle) {
  return haystack && std::strstr(haystack, needle);
}
bool contains(const std::string &haystack, const char *needle) {
  return contains(haystack.c_str(), needle);
}

TEST_F(ErrorTest, NoErrorInitially) { EXPECT_EQ(dsrt_last_error(), nullptr); }

TEST_F(ErrorTest, MismatchedKNamesSizes) {
  std::string error = failF32({1, 7, 3}, {1, 4, 5}, {1, 7, 5});
  ASSERT_FALSE(error.empty());
  EXPECT_TRUE(contains(error, "dsrt_matmul_f32")) << error;
  EXPECT_TRUE(contains(error, "op(A) is 7x3")) << error;
  EXPECT_TRUE(contains(error, "op(B) is 4x5")) << error;
  EXPECT_TRUE(contains(error, "A [1, 7, 3]")) << error;
  EXPECT_TRUE(contains(error, "B [1, 4, 5]")) << error;
}

TEST_F(ErrorTest, MismatchedKWithTransposes) {
  // op(A) = 7x3, op(B) = 4x5 again, stored transposed.
  std::string error = failF32({2, 3, 7}, {2, 5, 4}, {2, 7, 5}, true, true);
  EXPECT_TRUE(contains(error, "op(A) is 7x3")) << error;
  EXPECT_TRUE(contains(error, "transA = 1")) << error;
}

TEST_F(ErrorTest, MismatchedMAndN) {
  EXPECT_TRUE(contains(failF32({1, 6, 3}, {1, 3, 5}, {1, 7, 5}),
                       "op(A) has 6 rows but C has 7"));
  dsrt_clear_error();
  EXPECT_TRUE(contains(failF32({1, 7, 3}, {1, 3, 4}, {1, 7, 5}),
                       "op(B) has 4 columns but C has 5"));
}

TEST_F(ErrorTest, MismatchedBatches) {
  EXPECT_TRUE(contains(failF32({2, 7, 3}, {3, 3, 5}, {3, 7, 5}),
                       "A has 2 batches but C has 3"));
  dsrt_clear_error();
  EXPECT_TRUE(contains(failF32({3, 7, 3}, {2, 3, 5}, {3, 7, 5}),
                       "B has 2 batches; expected 1 or 3"));
}

TEST_F(ErrorTest, BadDescriptors) {
  std::mt19937 rng(5);
  Tensor<double> a = makeTensor<double>(1, 2, 2, Layout::Contiguous, rng);
  Tensor<double> b = a, c = a;
  b.desc.aligned = b.storage.data(), c.desc.aligned = c.storage.data();

  _mlir_ciface_dsrt_matmul_f64(&a.desc, nullptr, &c.desc, 0, 0);
  EXPECT_TRUE(contains(dsrt_last_error(), "descriptor of B is null"));
  dsrt_clear_error();

  b.desc.strides[1] = -2;
  _mlir_ciface_dsrt_matmul_f64(&a.desc, &b.desc, &c.desc, 0, 0);
  EXPECT_TRUE(contains(dsrt_last_error(), "B has negative size or stride"));
  dsrt_clear_error();
  b.desc.strides[1] = 2;

  c.desc.aligned = nullptr;
  _mlir_ciface_dsrt_matmul_f64(&a.desc, &b.desc, &c.desc, 0, 0);
  EXPECT_TRUE(contains(dsrt_last_error(), "C has elements but a null data"));
  dsrt_clear_error();
  c.desc.aligned = c.storage.data();

  // Two rows of C on top of each other.
  c.desc.strides[1] = 0;
  _mlir_ciface_dsrt_matmul_f64(&a.desc, &b.desc, &c.desc, 0, 0);
  EXPECT_TRUE(contains(dsrt_last_error(), "C has stride 0 in dimension 1"));
}

TEST_F(ErrorTest, FirstErrorWinsUntilCleared) {
  std::string first = failF32({1, 7, 3}, {1, 4, 5}, {1, 7, 5});
  ASSERT_FALSE(first.empty());
  const char *slot = dsrt_last_error();
  failF32({2, 7, 3}, {3, 3, 5}, {3, 7, 5});
  EXPECT_EQ(first, dsrt_last_error());
  EXPECT_EQ(slot, dsrt_last_error()) << "the message must stay put";

  // A successful call neither sets nor clears it.
  EXPECT_EQ(failF32({1, 7, 3}, {1, 3, 5}, {1, 7, 5}), first);

  dsrt_clear_error();
  EXPECT_EQ(dsrt_last_error(), nullptr);
  EXPECT_TRUE(
      contains(failF32({2, 7, 3}, {3, 3, 5}, {3, 7, 5}), "A has 2 batches"));
}

TEST_F(ErrorTest, SuccessfulCallsLeaveNoError) {
  EXPECT_EQ(failF32({2, 7, 3}, {2, 3, 5}, {2, 7, 5}), "");
  EXPECT_EQ(failF32({2, 7, 3}, {1, 3, 5}, {2, 7, 5}), "");
}

/// Many threads failing at once: exactly one complete message is kept.
TEST_F(ErrorTest, ConcurrentFailuresKeepOneMessage) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([t] {
      std::mt19937 rng(t);
      Tensor<double> a =
          makeTensor<double>(1, 2, t + 3, Layout::Contiguous, rng);
      Tensor<double> b = makeTensor<double>(1, 2, 2, Layout::Contiguous, rng);
      Tensor<double> c = makeTensor<double>(1, 2, 2, Layout::Contiguous, rng);
      for (int i = 0; i < 100; ++i)
        _mlir_ciface_dsrt_matmul_f64(&a.desc, &b.desc, &c.desc, 0, 0);
    });
  for (std::thread &t : threads)
    t.join();
  const char *error = dsrt_last_error();
  ASSERT_NE(error, nullptr);
  std::string message = error;
  bool fromOneThread = false;
  for (int t = 0; t < 8; ++t) {
    std::string expected = "op(A) is 2x" + std::to_string(t + 3) +
                           " but op(B) is 2x2; A [1, 2, " +
                           std::to_string(t + 3) + "]";
    fromOneThread |= contains(message, expected.c_str());
  }
  EXPECT_TRUE(fromOneThread) << message;
}

} // namespace
