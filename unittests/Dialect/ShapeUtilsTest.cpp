//===- ShapeUtilsTest.cpp - Shape rules of ds ops -------------------------===//

#include "ds/Dialect/DS/IR/ShapeUtils.h"

#include "gtest/gtest.h"

using namespace mlir;
using namespace mlir::ds;

namespace {

SmallVector<int64_t> bcast(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  std::string error;
  FailureOr<SmallVector<int64_t>> r = broadcastShapes(a, b, error);
  EXPECT_TRUE(succeeded(r)) << error;
  return succeeded(r) ? *r : SmallVector<int64_t>{};
}

TEST(ShapeUtils, BroadcastEqualRank) {
  EXPECT_EQ(bcast({4, 1}, {1, 8}), (SmallVector<int64_t>{4, 8}));
  EXPECT_EQ(bcast({2, 3, 5}, {2, 3, 5}), (SmallVector<int64_t>{2, 3, 5}));
  EXPECT_EQ(bcast({1, 1, 7}, {3, 5, 1}), (SmallVector<int64_t>{3, 5, 7}));
}

TEST(ShapeUtils, BroadcastScalar) {
  EXPECT_EQ(bcast({}, {3, 5}), (SmallVector<int64_t>{3, 5}));
  EXPECT_EQ(bcast({3, 5}, {}), (SmallVector<int64_t>{3, 5}));
  EXPECT_EQ(bcast({}, {}), (SmallVector<int64_t>{}));
}

TEST(ShapeUtils, BroadcastRejects) {
  std::string error;
  EXPECT_TRUE(failed(broadcastShapes({4, 3}, {4, 5}, error)));
  EXPECT_NE(error.find("dimension 1 is not broadcastable (3 vs 5"),
            std::string::npos)
      << error;
  EXPECT_TRUE(failed(broadcastShapes({4, 3}, {3}, error)));
  EXPECT_NE(error.find("ranks differ"), std::string::npos) << error;
}

TEST(ShapeUtils, BroadcastDims) {
  EXPECT_EQ(broadcastDims({4, 1}, {4, 8}), (SmallVector<int64_t>{1}));
  EXPECT_EQ(broadcastDims({1, 1}, {4, 8}), (SmallVector<int64_t>{0, 1}));
  EXPECT_EQ(broadcastDims({}, {4, 8}), (SmallVector<int64_t>{0, 1}));
  EXPECT_EQ(broadcastDims({4, 8}, {4, 8}), (SmallVector<int64_t>{}));
  // A size-1 dimension that stays size 1 is not a broadcast.
  EXPECT_EQ(broadcastDims({1, 8}, {1, 8}), (SmallVector<int64_t>{}));
}

TEST(ShapeUtils, Reductions) {
  std::string error;
  EXPECT_TRUE(succeeded(checkReductionDims({0, 2}, 3, error)));
  EXPECT_TRUE(failed(checkReductionDims({2, 0}, 3, error)));
  EXPECT_NE(error.find("strictly increasing"), std::string::npos);
  EXPECT_TRUE(failed(checkReductionDims({3}, 3, error)));
  EXPECT_NE(error.find("out of range"), std::string::npos);
  EXPECT_EQ(reducedShape({2, 3, 4}, {1}, false), (SmallVector<int64_t>{2, 4}));
  EXPECT_EQ(reducedShape({2, 3, 4}, {0, 2}, true),
            (SmallVector<int64_t>{1, 3, 1}));
  EXPECT_EQ(reducedShape({2, 3}, {0, 1}, false), (SmallVector<int64_t>{}));
}

TEST(ShapeUtils, Permutation) {
  std::string error;
  EXPECT_TRUE(succeeded(checkPermutation({2, 0, 1}, 3, error)));
  EXPECT_TRUE(failed(checkPermutation({0, 0, 1}, 3, error)));
  EXPECT_TRUE(failed(checkPermutation({0, 1}, 3, error)));
  EXPECT_TRUE(failed(checkPermutation({0, 1, 3}, 3, error)));
}

TEST(ShapeUtils, WindowOutputSize) {
  // 28x28 input, 3x3 kernel, padding 1, stride 1: same size.
  EXPECT_EQ(*windowOutputSize(28, 3, 1, 1, 1), 28);
  // 2x2 pooling with stride 2.
  EXPECT_EQ(*windowOutputSize(28, 2, 2, 0, 1), 14);
  EXPECT_EQ(*windowOutputSize(7, 2, 2, 0, 1), 3);
  // Dilation 2 widens a 3-tap kernel to 5.
  EXPECT_EQ(*windowOutputSize(9, 3, 1, 0, 2), 5);
  EXPECT_TRUE(failed(windowOutputSize(2, 5, 1, 0, 1)));
  EXPECT_TRUE(failed(windowOutputSize(8, 3, 0, 0, 1)));
}

TEST(ShapeUtils, NumElementsAndFormat) {
  EXPECT_EQ(numElements({}), 1);
  EXPECT_EQ(numElements({2, 3, 4}), 24);
  EXPECT_EQ(formatShape({2, 3}), "[2, 3]");
  EXPECT_EQ(formatShape({}), "[]");
}

} // namespace
