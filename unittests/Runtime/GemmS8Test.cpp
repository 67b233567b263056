//===- GemmS8Test.cpp - The int8 GEMM against an exact integer loop -------===//
//
// dsrt_matmul_s8s8s32 must be exact on every CPU, whichever kernel it picks:
// full-range int8 operands (which make oneDNN's vpmaddubsw kernels saturate
// on CPUs without VNNI), 7-bit activations (which oneDNN's u8 x s8 GEMM
// takes), every transpose, padded and transposed layouts, shared B, and every
// kernel forced through DSRT_INT8_GEMM where it is safe.
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/ds_runtime.h"

#include "gtest/gtest.h"

#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

/// A [batches, rows, cols] view: dense, rows padded, or a transposed view.
enum class Layout { Dense, Padded, Transposed };

template <typename T, typename D> struct View {
  std::vector<T> storage;
  D desc{};
  int64_t index(int64_t b, int64_t i, int64_t j) const {
    return desc.offset + b * desc.strides[0] + i * desc.strides[1] +
           j * desc.strides[2];
  }
  T at(int64_t b, int64_t i, int64_t j) const {
    return storage[index(b, i, j)];
  }
};

template <typename T, typename D>
View<T, D> makeView(int64_t batches, int64_t rows, int64_t cols, Layout layout,
                    T fill) {
  View<T, D> v;
  int64_t s0, s1, s2, offset = 0;
  switch (layout) {
  case Layout::Dense:
    s2 = 1, s1 = cols, s0 = rows * cols;
    break;
  case Layout::Padded:
    offset = 3, s2 = 1, s1 = cols + 5, s0 = rows * s1 + 2;
    break;
  case Layout::Transposed:
    s1 = 1, s2 = rows, s0 = rows * cols;
    break;
  }
  v.desc.offset = offset;
  v.desc.sizes[0] = batches, v.desc.sizes[1] = rows, v.desc.sizes[2] = cols;
  v.desc.strides[0] = s0, v.desc.strides[1] = s1, v.desc.strides[2] = s2;
  v.storage.assign(offset + batches * s0 + rows * s1 + cols * s2 + 8, fill);
  v.desc.allocated = v.desc.aligned = v.storage.data();
  return v;
}

using I8 = View<int8_t, dsrt_memref3_i8>;
using I32 = View<int32_t, dsrt_memref3_i32>;

/// Fills a view's elements from `draw`.
template <typename Draw> void fill(I8 &v, Draw draw) {
  for (int64_t b = 0; b < v.desc.sizes[0]; ++b)
    for (int64_t i = 0; i < v.desc.sizes[1]; ++i)
      for (int64_t j = 0; j < v.desc.sizes[2]; ++j)
        v.storage[v.index(b, i, j)] = draw();
}

struct Case {
  int64_t batches, m, n, k;
  bool transA, transB, sharedB;
  Layout aLayout, bLayout, cLayout;
};

class GemmS8Test : public ::testing::Test {
protected:
  void SetUp() override {
    dsrt_clear_error();
    unsetenv("DSRT_INT8_GEMM");
  }
  void TearDown() override { unsetenv("DSRT_INT8_GEMM"); }

  /// Runs one case with A drawn from [aLo, aHi] and B from [-128, 127] and
  /// compares C with an int64 triple loop; the padding of C must survive.
  ::testing::AssertionResult run(const Case &c, int aLo, int aHi,
                                 int bLo = -128, int bHi = 127) {
    std::mt19937 rng(c.m * 7919 + c.n * 131 + c.k);
    std::uniform_int_distribution<int> da(aLo, aHi), db(bLo, bHi);
    I8 a = c.transA ? makeView<int8_t, dsrt_memref3_i8>(c.batches, c.k, c.m,
                                                        c.aLayout, 77)
                    : makeView<int8_t, dsrt_memref3_i8>(c.batches, c.m, c.k,
                                                        c.aLayout, 77);
    int64_t bb = c.sharedB ? 1 : c.batches;
    I8 b = c.transB
               ? makeView<int8_t, dsrt_memref3_i8>(bb, c.n, c.k, c.bLayout, 77)
               : makeView<int8_t, dsrt_memref3_i8>(bb, c.k, c.n, c.bLayout, 77);
    I32 out =
        makeView<int32_t, dsrt_memref3_i32>(c.batches, c.m, c.n, c.cLayout, -7);
    lastHadNegative = false;
    fill(a, [&] {
      int8_t v = int8_t(da(rng));
      lastHadNegative |= v < 0;
      return v;
    });
    fill(b, [&] { return int8_t(db(rng)); });
    std::vector<int32_t> before = out.storage;
    _mlir_ciface_dsrt_matmul_s8s8s32(&a.desc, &b.desc, &out.desc, c.transA,
                                     c.transB);
    if (const char *e = dsrt_last_error())
      return ::testing::AssertionFailure() << "runtime error: " << e;
    std::vector<bool> written(out.storage.size(), false);
    for (int64_t bt = 0; bt < c.batches; ++bt)
      for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < c.n; ++j) {
          int64_t sum = 0;
          for (int64_t k = 0; k < c.k; ++k) {
            int64_t x = c.transA ? a.at(bt, k, i) : a.at(bt, i, k);
            int64_t bbt = c.sharedB ? 0 : bt;
            int64_t y = c.transB ? b.at(bbt, j, k) : b.at(bbt, k, j);
            sum += x * y;
          }
          written[out.index(bt, i, j)] = true;
          if (out.at(bt, i, j) != sum)
            return ::testing::AssertionFailure()
                   << "C(" << bt << ", " << i << ", " << j
                   << ") = " << out.at(bt, i, j) << ", exact " << sum << " (M "
                   << c.m << ", N " << c.n << ", K " << c.k << ", transA "
                   << c.transA << ", transB " << c.transB << ")";
        }
    for (size_t e = 0; e < out.storage.size(); ++e)
      if (!written[e] && out.storage[e] != before[e])
        return ::testing::AssertionFailure()
               << "storage element " << e << " outside C was written";
    return ::testing::AssertionSuccess();
  }

  /// Whether the last run's A had a negative element (not 7-bit).
  bool lastHadNegative = false;

  std::vector<Case> cases() {
    std::vector<Case> all;
    for (bool tA : {false, true})
      for (bool tB : {false, true})
        for (Layout la : {Layout::Dense, Layout::Padded, Layout::Transposed})
          for (Layout lc : {Layout::Dense, Layout::Padded, Layout::Transposed})
            all.push_back(
                {2, 9, 13, 70, tA, tB, false, la, Layout::Padded, lc});
    all.push_back({3, 64, 48, 257, false, true, true, Layout::Dense,
                   Layout::Dense, Layout::Dense});
    all.push_back({1, 1, 1, 1, false, false, false, Layout::Dense,
                   Layout::Dense, Layout::Dense});
    return all;
  }
};

/// Full-range operands: the extreme products (-128 * -128, 127 * -128)
/// that saturate int16 pair sums. The automatic choice must stay exact.
TEST_F(GemmS8Test, FullRangeIsExact) {
  dsrt_stats before, after;
  dsrt_get_stats(&before);
  uint64_t notSevenBit = 0;
  for (const Case &c : cases()) {
    ASSERT_TRUE(run(c, -128, 127));
    notSevenBit += lastHadNegative;
  }
  dsrt_get_stats(&after);
  EXPECT_EQ(after.int8_gemm_calls - before.int8_gemm_calls, cases().size());
  // Without VNNI every call whose A has a negative element must have been
  // split, and only those.
  if (!dsrt_int8_gemm_has_vnni())
    EXPECT_EQ(after.int8_split_calls - before.int8_split_calls, notSevenBit);
}

/// The worst case for vpmaddubsw after oneDNN's +128 shift of a signed A:
/// A = 127 (255 once shifted) against B = -128, with one negative element
/// so that A is not 7-bit.
TEST_F(GemmS8Test, SaturatingPatternIsExact) {
  Case c{1,
         8,
         8,
         64,
         false,
         false,
         false,
         Layout::Dense,
         Layout::Dense,
         Layout::Dense};
  ASSERT_TRUE(run(c, 126, 127, -128, -127));
  ASSERT_TRUE(run(c, -1, 127, -128, -127));
}

/// 7-bit activations (torch.ao's reduce_range) go to oneDNN's u8 x s8
/// GEMM on every CPU, exactly.
TEST_F(GemmS8Test, SevenBitActivationsUseTheLibrary) {
  dsrt_stats before, after;
  dsrt_get_stats(&before);
  for (const Case &c : cases())
    ASSERT_TRUE(run(c, 0, 127));
  dsrt_get_stats(&after);
  EXPECT_EQ(after.int8_split_calls, before.int8_split_calls);
}

/// Each kernel forced where it is safe: the split and widening kernels
/// always, oneDNN on 7-bit activations (and on anything with VNNI).
TEST_F(GemmS8Test, ForcedKernels) {
  for (const char *kernel : {"split", "widening"}) {
    setenv("DSRT_INT8_GEMM", kernel, 1);
    for (const Case &c : cases())
      ASSERT_TRUE(run(c, -128, 127)) << "DSRT_INT8_GEMM=" << kernel;
  }
  setenv("DSRT_INT8_GEMM", "onednn", 1);
  for (const Case &c : cases())
    ASSERT_TRUE(run(c, 0, 127));
  if (dsrt_int8_gemm_has_vnni())
    for (const Case &c : cases())
      ASSERT_TRUE(run(c, -128, 127));
}

TEST_F(GemmS8Test, UnknownKernelIsAnError) {
  setenv("DSRT_INT8_GEMM", "fast", 1);
  I8 a = makeView<int8_t, dsrt_memref3_i8>(1, 2, 2, Layout::Dense, 1);
  I8 b = makeView<int8_t, dsrt_memref3_i8>(1, 2, 2, Layout::Dense, 1);
  I32 c = makeView<int32_t, dsrt_memref3_i32>(1, 2, 2, Layout::Dense, -7);
  _mlir_ciface_dsrt_matmul_s8s8s32(&a.desc, &b.desc, &c.desc, 0, 0);
  const char *e = dsrt_last_error();
  ASSERT_NE(e, nullptr);
  EXPECT_NE(std::string(e).find("DSRT_INT8_GEMM='fast'"), std::string::npos);
  EXPECT_EQ(c.storage[0], -7);
}

TEST_F(GemmS8Test, ShapeMismatchIsAnError) {
  I8 a = makeView<int8_t, dsrt_memref3_i8>(1, 2, 3, Layout::Dense, 1);
  I8 b = makeView<int8_t, dsrt_memref3_i8>(1, 4, 2, Layout::Dense, 1);
  I32 c = makeView<int32_t, dsrt_memref3_i32>(1, 2, 2, Layout::Dense, -7);
  _mlir_ciface_dsrt_matmul_s8s8s32(&a.desc, &b.desc, &c.desc, 0, 0);
  const char *e = dsrt_last_error();
  ASSERT_NE(e, nullptr);
  EXPECT_NE(std::string(e).find("dsrt_matmul_s8s8s32: contraction sizes"),
            std::string::npos);
}

} // namespace
