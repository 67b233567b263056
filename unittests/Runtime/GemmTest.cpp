//===- GemmTest.cpp - Batched GEMM against a triple-loop reference --------===//
//
// Both element types, every transpose combination, every operand layout
// (fast library path, transposed-view path and packing path), shared B,
// strided outputs whose gaps must survive, and one and two threads.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtils.h"

#include "ds/Runtime/ds_runtime.h"

#include "gtest/gtest.h"

#include <cstring>
#include <type_traits>
#include <utility>

using namespace dsrt_test;

namespace {

/// [batches, M, N, K]: odd, non-square, including 1-sized dims.
struct Shape {
  int64_t batches, m, n, k;
};

template <typename T> class GemmTest : public ::testing::Test {
protected:
  void SetUp() override {
    dsrt_clear_error();
    dsrt_set_num_threads(0);
  }
  void TearDown() override { dsrt_set_num_threads(0); }

  /// Builds A, B and C in the given layouts, runs the runtime GEMM and
  /// checks the result against the reference.
  ::testing::AssertionResult run(Shape s, bool transA, bool transB,
                                 Layout aLayout, Layout bLayout, Layout cLayout,
                                 bool sharedB = false) {
    std::mt19937 rng(s.batches * 1000003 + s.m * 1009 + s.n * 31 + s.k);
    Tensor<T> a = transA ? makeTensor<T>(s.batches, s.k, s.m, aLayout, rng)
                         : makeTensor<T>(s.batches, s.m, s.k, aLayout, rng);
    int64_t bBatches = sharedB ? 1 : s.batches;
    Tensor<T> b = transB ? makeTensor<T>(bBatches, s.n, s.k, bLayout, rng)
                         : makeTensor<T>(bBatches, s.k, s.n, bLayout, rng);
    Tensor<T> c = makeTensor<T>(s.batches, s.m, s.n, cLayout, rng, false);
    Memref<T>::matmul(&a.desc, &b.desc, &c.desc, transA, transB);
    if (const char *error = dsrt_last_error())
      return ::testing::AssertionFailure() << "runtime error: " << error;
    ::testing::AssertionResult result =
        matchesReference(a, b, c, transA, transB);
    if (!result)
      result << "\n  " << describe("A", a, aLayout) << ", "
             << describe("B", b, bLayout) << ", " << describe("C", c, cLayout)
             << ", transA " << transA << ", transB " << transB << ", threads "
             << dsrt_get_num_threads();
    return result;
  }
};

using ElementTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(GemmTest, ElementTypes);

TYPED_TEST(GemmTest, SmallShapesAllTransposes) {
  for (Shape s : {Shape{1, 7, 5, 3}, Shape{3, 7, 5, 3}, Shape{3, 33, 17, 65},
                  Shape{2, 1, 9, 4}, Shape{2, 6, 1, 1}})
    for (int threads : {1, 2}) {
      dsrt_set_num_threads(threads);
      for (bool transA : {false, true})
        for (bool transB : {false, true})
          ASSERT_TRUE(this->run(s, transA, transB, Layout::Contiguous,
                                Layout::Contiguous, Layout::Contiguous));
    }
}

TYPED_TEST(GemmTest, EveryLayoutCombination) {
  for (int threads : {1, 2}) {
    dsrt_set_num_threads(threads);
    for (bool transA : {false, true})
      for (bool transB : {false, true})
        for (Layout aLayout : inputLayouts())
          for (Layout bLayout : inputLayouts())
            for (Layout cLayout : outputLayouts())
              ASSERT_TRUE(this->run({3, 7, 5, 3}, transA, transB, aLayout,
                                    bLayout, cLayout));
  }
}

/// Large enough (2^17 multiply-adds) for batches to go to threads, each
/// with its own packing buffers: every input layout pair, then every output
/// layout.
TYPED_TEST(GemmTest, LayoutsWithBatchesOnThreads) {
  dsrt_set_num_threads(2);
  Shape s{4, 33, 17, 65};
  for (bool transA : {false, true})
    for (bool transB : {false, true}) {
      for (Layout aLayout : inputLayouts())
        for (Layout bLayout : inputLayouts())
          ASSERT_TRUE(this->run(s, transA, transB, aLayout, bLayout,
                                Layout::Contiguous));
      for (Layout cLayout : outputLayouts())
        ASSERT_TRUE(this->run(s, transA, transB, Layout::InnerStride2,
                              Layout::Transposed, cLayout));
    }
}

TYPED_TEST(GemmTest, SharedB) {
  for (int threads : {1, 2}) {
    dsrt_set_num_threads(threads);
    for (bool transA : {false, true})
      for (bool transB : {false, true})
        for (Layout bLayout :
             {Layout::Contiguous, Layout::Transposed, Layout::InnerStride2}) {
          // Bb == 1 ...
          ASSERT_TRUE(this->run({4, 9, 6, 5}, transA, transB,
                                Layout::Contiguous, bLayout, Layout::Contiguous,
                                /*sharedB=*/true));
          // ... and Bb == Bc with batch stride 0.
          ASSERT_TRUE(this->run({4, 9, 6, 5}, transA, transB,
                                Layout::Contiguous, Layout::BatchStride0,
                                Layout::Contiguous));
        }
  }
}

TYPED_TEST(GemmTest, StridedOutputKeepsGaps) {
  for (int threads : {1, 2}) {
    dsrt_set_num_threads(threads);
    for (Layout cLayout : {Layout::PaddedRows, Layout::PaddedTransposed,
                           Layout::InnerStride2, Layout::BatchInterleaved})
      ASSERT_TRUE(this->run({3, 33, 17, 65}, false, true, Layout::Contiguous,
                            Layout::Contiguous, cLayout));
  }
}

/// 64 batches of 128x128x64: the attention shape, which the f32 path
/// distributes over threads.
TYPED_TEST(GemmTest, ManySmallBatches) {
  for (int threads : {1, 2}) {
    dsrt_set_num_threads(threads);
    ASSERT_TRUE(this->run({64, 128, 128, 64}, false, false, Layout::Contiguous,
                          Layout::Contiguous, Layout::Contiguous));
    ASSERT_TRUE(this->run({64, 128, 128, 64}, false, true,
                          Layout::BatchInterleaved, Layout::BatchInterleaved,
                          Layout::BatchInterleaved));
  }
}

/// Large enough that each GEMM uses all threads inside the library.
TYPED_TEST(GemmTest, LargeGemm) {
  for (int threads : {1, 2}) {
    dsrt_set_num_threads(threads);
    ASSERT_TRUE(this->run({2, 257, 129, 300}, true, false, Layout::Contiguous,
                          Layout::Contiguous, Layout::Contiguous));
    ASSERT_TRUE(this->run({1, 257, 129, 300}, false, true, Layout::InnerStride2,
                          Layout::PaddedRows, Layout::Transposed));
  }
}

/// K == 0: an empty sum, so C = 0 (not left as it was).
TYPED_TEST(GemmTest, ZeroK) {
  ASSERT_TRUE(this->run({2, 4, 3, 0}, false, false, Layout::Contiguous,
                        Layout::Contiguous, Layout::PaddedRows));
  std::mt19937 rng(1);
  Tensor<TypeParam> a = makeTensor<TypeParam>(2, 4, 0, Layout::Contiguous, rng);
  Tensor<TypeParam> b = makeTensor<TypeParam>(2, 0, 3, Layout::Contiguous, rng);
  Tensor<TypeParam> c = makeTensor<TypeParam>(2, 4, 3, Layout::Contiguous, rng);
  Memref<TypeParam>::matmul(&a.desc, &b.desc, &c.desc, false, false);
  EXPECT_EQ(dsrt_last_error(), nullptr);
  for (int64_t i = 0; i < 4; ++i)
    EXPECT_EQ(c.at(1, i, 2), TypeParam(0));
}

/// An empty C is a no-op, even with null data pointers.
TYPED_TEST(GemmTest, EmptyOutput) {
  ASSERT_TRUE(this->run({0, 4, 3, 2}, false, false, Layout::Contiguous,
                        Layout::Contiguous, Layout::Contiguous));
  ASSERT_TRUE(this->run({2, 0, 3, 2}, true, true, Layout::Contiguous,
                        Layout::Contiguous, Layout::Contiguous));
  typename Memref<TypeParam>::Descriptor empty = {};
  Memref<TypeParam>::matmul(&empty, &empty, &empty, false, false);
  EXPECT_EQ(dsrt_last_error(), nullptr);
}

/// The thread count must not change results beyond rounding; for f64 (one
/// thread sums each element in k order) not at all.
TYPED_TEST(GemmTest, ThreadCountIndependentResults) {
  std::mt19937 rng(7);
  Tensor<TypeParam> a =
      makeTensor<TypeParam>(8, 40, 30, Layout::Contiguous, rng);
  Tensor<TypeParam> b =
      makeTensor<TypeParam>(8, 30, 50, Layout::Contiguous, rng);
  Tensor<TypeParam> c1 =
      makeTensor<TypeParam>(8, 40, 50, Layout::Contiguous, rng, false);
  Tensor<TypeParam> c2 = c1;
  c2.desc.allocated = c2.desc.aligned = c2.storage.data();
  dsrt_set_num_threads(1);
  Memref<TypeParam>::matmul(&a.desc, &b.desc, &c1.desc, false, false);
  dsrt_set_num_threads(2);
  Memref<TypeParam>::matmul(&a.desc, &b.desc, &c2.desc, false, false);
  ASSERT_EQ(dsrt_last_error(), nullptr);
  EXPECT_TRUE(matchesReference(a, b, c1, false, false));
  EXPECT_TRUE(matchesReference(a, b, c2, false, false));
  if (std::is_same<TypeParam, double>::value)
    EXPECT_EQ(0, std::memcmp(c1.storage.data(), c2.storage.data(),
                             c1.storage.size() * sizeof(TypeParam)));
}

} // namespace
