//===- BlockSparseTest.cpp - Block-sparse products against f64 loops ------===//
//
// The three block-sparse training products (forward, dX, sampled dW) against
// plain f64 loops on W * expand(mask), for every kernel this CPU can run
// (forced with DSRT_SPARSE_KERNEL) and the automatic choice: odd and empty M,
// R != C, empty block rows and columns, 0 % and 100 % density, blocks of 8
// and 16, NaN in the inactive blocks of W, strided and transposed operands,
// strided outputs whose gaps must survive, one and two threads. Then the
// errors (which leave the output untouched) and the counters. The AVX-512
// kernels' algorithm runs on every CPU as DSRT_SPARSE_KERNEL=avx512-portable
// (the same source built for the baseline ISA); on an AVX-512 CPU the real
// build runs too.
//
// Error bound per element: |err| <= 4 * K * eps32 * sum_k |x_ik| |w_kj|, with
// K the contraction length (a blocked f32 sum of K products).
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/ds_runtime.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr float kSentinel = 12345.0f;
constexpr double kEps32 = std::numeric_limits<float>::epsilon();

/// How a [rows, cols] matrix sits in memory.
enum class Layout {
  Contiguous,   ///< Row-major.
  PaddedRows,   ///< Row stride cols + 5, offset 3.
  Transposed,   ///< Column-major: a view of a row-major [cols, rows].
  InnerStride2, ///< Column stride 2, odd row stride: no unit stride.
};

const char *layoutName(Layout layout) {
  switch (layout) {
  case Layout::Contiguous:
    return "Contiguous";
  case Layout::PaddedRows:
    return "PaddedRows";
  case Layout::Transposed:
    return "Transposed";
  case Layout::InnerStride2:
    return "InnerStride2";
  }
  return "?";
}

/// Owned storage and a rank-2 descriptor of a view into it; storage outside
/// the view holds kSentinel.
template <typename T, typename D> struct Mat {
  std::vector<T> storage;
  std::vector<bool> inView;
  D desc;

  int64_t index(int64_t i, int64_t j) const {
    return desc.offset + i * desc.strides[0] + j * desc.strides[1];
  }
  T &at(int64_t i, int64_t j) { return storage[index(i, j)]; }
  T at(int64_t i, int64_t j) const { return storage[index(i, j)]; }
  int64_t rows() const { return desc.sizes[0]; }
  int64_t cols() const { return desc.sizes[1]; }
};
using F32 = Mat<float, dsrt_memref2_f32>;
using I8 = Mat<int8_t, dsrt_memref2_i8>;

template <typename T, typename D>
Mat<T, D> makeLayout(int64_t rows, int64_t cols, Layout layout, T fill) {
  int64_t offset = 0, s0 = 0, s1 = 0;
  switch (layout) {
  case Layout::Contiguous:
    s0 = cols, s1 = 1;
    break;
  case Layout::PaddedRows:
    offset = 3, s0 = cols + 5, s1 = 1;
    break;
  case Layout::Transposed:
    s0 = 1, s1 = rows;
    break;
  case Layout::InnerStride2:
    offset = 1, s0 = 2 * cols + 1, s1 = 2;
    break;
  }
  Mat<T, D> m;
  m.desc.offset = offset;
  m.desc.sizes[0] = rows, m.desc.sizes[1] = cols;
  m.desc.strides[0] = s0, m.desc.strides[1] = s1;
  int64_t extent = offset + 1 + 5;
  if (rows > 0 && cols > 0)
    extent += (rows - 1) * s0 + (cols - 1) * s1;
  m.storage.assign(extent, T(kSentinel));
  m.inView.assign(extent, false);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      m.inView[m.index(i, j)] = true;
      m.at(i, j) = fill;
    }
  m.desc.allocated = m.storage.data();
  m.desc.aligned = m.storage.data();
  return m;
}

/// Random values in [-1, 1).
F32 randomMat(int64_t rows, int64_t cols, Layout layout, std::mt19937 &rng) {
  F32 m = makeLayout<float, dsrt_memref2_f32>(rows, cols, layout, 0.0f);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      m.at(i, j) = dist(rng);
  return m;
}

/// An output: NaN in the view (every element must be written).
F32 outputMat(int64_t rows, int64_t cols, Layout layout) {
  return makeLayout<float, dsrt_memref2_f32>(rows, cols, layout, NAN);
}

/// Mask patterns.
enum class Pattern {
  Random,    ///< Each block active with probability `density`.
  EmptyRows, ///< Random at `density`, with block row 1 and column 0 empty.
  Ones,      ///< Every block active.
  Zeros,     ///< No block active.
};

I8 makeMask(int64_t rows, int64_t cols, Pattern pattern, double density,
            std::mt19937 &rng, Layout layout = Layout::Contiguous) {
  I8 m = makeLayout<int8_t, dsrt_memref2_i8>(rows, cols, layout, int8_t(0));
  std::bernoulli_distribution on(density);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      bool active =
          pattern == Pattern::Ones || (pattern != Pattern::Zeros && on(rng));
      if (pattern == Pattern::EmptyRows && (i == 1 || j == 0))
        active = false;
      // Any nonzero byte means active.
      m.at(i, j) = active ? int8_t(1 + (i + 3 * j) % 120) : int8_t(0);
    }
  return m;
}

/// Writes NaN into every inactive block of w: the kernels must not read it.
void poisonInactive(F32 &w, const I8 &mask, int64_t block) {
  for (int64_t i = 0; i < w.rows(); ++i)
    for (int64_t j = 0; j < w.cols(); ++j)
      if (mask.at(i / block, j / block) == 0)
        w.at(i, j) = NAN;
}

/// W * expand(mask) at (i, j), as a double.
double maskedW(const F32 &w, const I8 &mask, int64_t block, int64_t i,
               int64_t j) {
  return mask.at(i / block, j / block) != 0 ? double(w.at(i, j)) : 0.0;
}

/// Checks out(i, j) against sum / magnitude of a K-term product, and that
/// nothing outside out's view was written.
struct Checker {
  const F32 &out;
  int64_t k;
  std::string failure;

  bool element(int64_t i, int64_t j, double sum, double magnitude) {
    double got = out.at(i, j);
    double bound = 4.0 * double(k) * kEps32 * magnitude;
    if (std::fabs(got - sum) <= bound)
      return true;
    std::ostringstream os;
    os << "(" << i << ", " << j << ") = " << got << ", reference " << sum
       << " (bound " << bound << ")";
    failure = os.str();
    return false;
  }
  bool gaps() {
    for (size_t e = 0; e < out.storage.size(); ++e)
      if (!out.inView[e] && out.storage[e] != kSentinel) {
        failure = "storage element " + std::to_string(e) +
                  " outside the output's view was written";
        return false;
      }
    return true;
  }
};

/// The reference of Y = X * op(W * expand(mask)).
::testing::AssertionResult checkMatmul(const F32 &x, const F32 &w,
                                       const I8 &mask, const F32 &y,
                                       bool transW, int64_t block) {
  int64_t m = y.rows(), n = y.cols(), k = x.cols();
  Checker check{y, k, ""};
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        double wv = transW ? maskedW(w, mask, block, j, kk)
                           : maskedW(w, mask, block, kk, j);
        sum += double(x.at(i, kk)) * wv;
        magnitude += std::fabs(double(x.at(i, kk)) * wv);
      }
      if (!check.element(i, j, sum, magnitude))
        return ::testing::AssertionFailure() << "Y" << check.failure;
    }
  if (!check.gaps())
    return ::testing::AssertionFailure() << check.failure;
  return ::testing::AssertionSuccess();
}

/// The reference of D = (A^T B) * expand(mask): inactive blocks exactly 0.
::testing::AssertionResult checkSddmm(const F32 &a, const F32 &b,
                                      const I8 &mask, const F32 &d,
                                      int64_t block) {
  int64_t m = a.rows();
  Checker check{d, m, ""};
  for (int64_t i = 0; i < d.rows(); ++i)
    for (int64_t j = 0; j < d.cols(); ++j) {
      double sum = 0, magnitude = 0;
      if (mask.at(i / block, j / block) != 0)
        for (int64_t r = 0; r < m; ++r) {
          sum += double(a.at(r, i)) * double(b.at(r, j));
          magnitude += std::fabs(double(a.at(r, i)) * double(b.at(r, j)));
        }
      if (!check.element(i, j, sum, magnitude))
        return ::testing::AssertionFailure() << "D" << check.failure;
    }
  if (!check.gaps())
    return ::testing::AssertionFailure() << check.failure;
  return ::testing::AssertionSuccess();
}

/// The kernels DSRT_SPARSE_KERNEL can force on this CPU, and auto. The
/// AVX-512 kernels' algorithm runs everywhere as avx512-portable.
std::vector<std::string> runnableKernels() {
  std::vector<std::string> kernels = {"auto", "scalar", "dense",
                                      "avx512-portable"};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    kernels.push_back("avx2");
  if (__builtin_cpu_supports("avx512f"))
    kernels.push_back("avx512");
  return kernels;
}

/// One product's problem: sizes, layouts, mask.
struct Case {
  int64_t m, r, c, block;
  Pattern pattern;
  double density;
  Layout xLayout = Layout::Contiguous, wLayout = Layout::Contiguous,
         yLayout = Layout::Contiguous, maskLayout = Layout::Contiguous;

  std::string describe() const {
    std::ostringstream os;
    os << "M " << m << ", W [" << r << ", " << c << "], block " << block
       << ", density " << density << " pattern " << int(pattern) << ", X "
       << layoutName(xLayout) << ", W " << layoutName(wLayout) << ", Y "
       << layoutName(yLayout) << ", mask " << layoutName(maskLayout)
       << ", kernel "
       << (std::getenv("DSRT_SPARSE_KERNEL") ? std::getenv("DSRT_SPARSE_KERNEL")
                                             : "auto")
       << ", threads " << dsrt_get_num_threads();
    return os.str();
  }
};

class BlockSparseTest : public ::testing::Test {
protected:
  void SetUp() override {
    dsrt_clear_error();
    dsrt_set_num_threads(0);
    unsetenv("DSRT_SPARSE_KERNEL");
  }
  void TearDown() override {
    unsetenv("DSRT_SPARSE_KERNEL");
    dsrt_set_num_threads(0);
    dsrt_clear_error();
  }

  /// Runs one product (0: forward, 1: dX, 2: SDDMM) on case `s` and checks
  /// it against the reference.
  ::testing::AssertionResult run(int product, const Case &s) {
    std::mt19937 rng(s.m * 7919 + s.r * 131 + s.c * 17 + s.block +
                     int(s.pattern) * 3 + product);
    I8 mask = makeMask(s.r / s.block, s.c / s.block, s.pattern, s.density, rng,
                       s.maskLayout);
    ::testing::AssertionResult result = ::testing::AssertionSuccess();
    if (product == 2) {
      F32 a = randomMat(s.m, s.r, s.xLayout, rng);
      F32 b = randomMat(s.m, s.c, s.wLayout, rng);
      F32 d = outputMat(s.r, s.c, s.yLayout);
      _mlir_ciface_dsrt_block_sparse_sddmm_f32(&a.desc, &b.desc, &mask.desc,
                                               &d.desc, s.block);
      if (const char *error = dsrt_last_error())
        return ::testing::AssertionFailure()
               << "runtime error: " << error << "\n  sddmm " << s.describe();
      result = checkSddmm(a, b, mask, d, s.block);
    } else {
      bool transW = product == 0;
      int64_t k = transW ? s.c : s.r, n = transW ? s.r : s.c;
      F32 x = randomMat(s.m, k, s.xLayout, rng);
      F32 w = randomMat(s.r, s.c, s.wLayout, rng);
      poisonInactive(w, mask, s.block);
      F32 y = outputMat(s.m, n, s.yLayout);
      _mlir_ciface_dsrt_block_sparse_matmul_f32(&x.desc, &w.desc, &mask.desc,
                                                &y.desc, transW, s.block);
      if (const char *error = dsrt_last_error())
        return ::testing::AssertionFailure()
               << "runtime error: " << error << "\n  "
               << (transW ? "forward " : "dX ") << s.describe();
      result = checkMatmul(x, w, mask, y, transW, s.block);
    }
    if (!result)
      result << "\n  "
             << (product == 0   ? "forward "
                 : product == 1 ? "dX "
                                : "sddmm ")
             << s.describe();
    return result;
  }

  /// run() for every product.
  ::testing::AssertionResult runAll(const Case &s) {
    for (int product = 0; product < 3; ++product) {
      ::testing::AssertionResult result = run(product, s);
      if (!result)
        return result;
    }
    return ::testing::AssertionSuccess();
  }
};

void forceKernel(const std::string &kernel) {
  setenv("DSRT_SPARSE_KERNEL", kernel.c_str(), 1);
}

TEST_F(BlockSparseTest, OddRowCountsEveryKernel) {
  for (const std::string &kernel : runnableKernels()) {
    forceKernel(kernel);
    for (int threads : {1, 2}) {
      dsrt_set_num_threads(threads);
      for (int64_t m : {1, 7, 33})
        for (double density : {0.3, 0.7})
          ASSERT_TRUE(runAll({m, 24, 40, 8, Pattern::Random, density}));
    }
  }
}

TEST_F(BlockSparseTest, EmptyRowsAndNonSquareWeights) {
  for (const std::string &kernel : runnableKernels()) {
    forceKernel(kernel);
    for (auto [r, c] : {std::pair<int64_t, int64_t>{40, 16}, {16, 56}})
      for (int64_t m : {5, 26})
        ASSERT_TRUE(runAll({m, r, c, 8, Pattern::EmptyRows, 0.6}));
  }
}

TEST_F(BlockSparseTest, ZeroAndFullDensity) {
  for (const std::string &kernel : runnableKernels()) {
    forceKernel(kernel);
    for (Pattern pattern : {Pattern::Zeros, Pattern::Ones})
      for (int64_t m : {3, 17})
        ASSERT_TRUE(runAll({m, 32, 24, 8, pattern, 0.0}));
  }
}

TEST_F(BlockSparseTest, EmptyOperands) {
  for (const std::string &kernel : runnableKernels()) {
    forceKernel(kernel);
    // M = 0: Y is empty, D = 0.
    ASSERT_TRUE(runAll({0, 16, 24, 8, Pattern::Random, 0.5}));
    // An empty weight: forward Y [M, 0], dX Y = 0 ([M, 16] from K = 0).
    ASSERT_TRUE(runAll({4, 0, 16, 8, Pattern::Random, 0.5}));
    ASSERT_TRUE(runAll({4, 16, 0, 8, Pattern::Random, 0.5}));
  }
}

TEST_F(BlockSparseTest, Blocks16) {
  for (const std::string &kernel : runnableKernels()) {
    forceKernel(kernel);
    for (int64_t m : {1, 13})
      for (Pattern pattern : {Pattern::Random, Pattern::EmptyRows})
        ASSERT_TRUE(runAll({m, 48, 32, 16, pattern, 0.5}));
  }
}

TEST_F(BlockSparseTest, StridedAndTransposedOperands) {
  std::vector<Layout> layouts = {Layout::Contiguous, Layout::PaddedRows,
                                 Layout::Transposed, Layout::InnerStride2};
  for (const std::string &kernel : runnableKernels()) {
    forceKernel(kernel);
    for (Layout x : layouts)
      for (Layout w : layouts) {
        Case s{9, 24, 16, 8, Pattern::Random, 0.5, x, w};
        ASSERT_TRUE(runAll(s));
      }
    // Tall and wide weights (the SDDMM groups its blocks either way).
    for (auto [r, c] : {std::pair<int64_t, int64_t>{24, 16}, {16, 32}})
      for (Layout y : layouts) {
        Case s{9, r, c, 8, Pattern::EmptyRows, 0.7};
        s.yLayout = y;
        s.maskLayout =
            y == Layout::Transposed ? Layout::Transposed : Layout::PaddedRows;
        ASSERT_TRUE(runAll(s));
      }
  }
}

/// Several chunks of M, more chunks than threads and fewer, the split of
/// output blocks when M is small, and several panel-packing tasks.
TEST_F(BlockSparseTest, ChunkingAndThreads) {
  std::vector<std::string> kernels = runnableKernels();
  for (const std::string &kernel : kernels) {
    if (kernel == "dense")
      continue;
    forceKernel(kernel);
    for (int threads : {1, 2, 3}) {
      dsrt_set_num_threads(threads);
      ASSERT_TRUE(runAll({301, 64, 96, 8, Pattern::Random, 0.2}));
      ASSERT_TRUE(run(0, {70, 16, 2048, 8, Pattern::Random, 0.1}));
      ASSERT_TRUE(run(2, {300, 16, 2048, 8, Pattern::Random, 0.1}));
      ASSERT_TRUE(runAll({2, 128, 64, 8, Pattern::EmptyRows, 0.3}));
      // More panels than one packing task holds, packed on one thread (for
      // a large M) and on several.
      ASSERT_TRUE(runAll({260, 256, 64, 8, Pattern::EmptyRows, 0.7}));
      ASSERT_TRUE(run(0, {3, 1024, 512, 8, Pattern::Random, 0.55}));
    }
  }
}

// The weight gradient sums per-thread partial results; with a fixed thread
// count it must be the same bits on every call (a resumed run reproduces
// an uninterrupted one).
TEST_F(BlockSparseTest, SampledProductIsReproducible) {
  std::mt19937 rng(5);
  int64_t m = 700, r = 64, c = 96;
  F32 a = randomMat(m, r, Layout::Contiguous, rng);
  F32 b = randomMat(m, c, Layout::Contiguous, rng);
  I8 mask = makeMask(r / 8, c / 8, Pattern::Random, 0.3, rng);
  for (const std::string &kernel : runnableKernels()) {
    forceKernel(kernel);
    dsrt_set_num_threads(3);
    F32 first = outputMat(r, c, Layout::Contiguous);
    _mlir_ciface_dsrt_block_sparse_sddmm_f32(&a.desc, &b.desc, &mask.desc,
                                             &first.desc, 8);
    for (int rep = 0; rep < 5; ++rep) {
      F32 again = outputMat(r, c, Layout::Contiguous);
      _mlir_ciface_dsrt_block_sparse_sddmm_f32(&a.desc, &b.desc, &mask.desc,
                                               &again.desc, 8);
      ASSERT_EQ(dsrt_last_error(), nullptr) << dsrt_last_error();
      ASSERT_EQ(std::memcmp(first.storage.data(), again.storage.data(),
                            first.storage.size() * sizeof(float)),
                0)
          << kernel << ": call " << rep + 2 << " differs from the first";
    }
  }
  dsrt_set_num_threads(0);
}

TEST_F(BlockSparseTest, AutoFallsBackToDenseAboveTheCrossover) {
  std::mt19937 rng(5);
  I8 ones = makeMask(4, 4, Pattern::Ones, 1.0, rng);
  I8 sparse = makeMask(4, 4, Pattern::Random, 0.0, rng);
  sparse.at(1, 2) = 1;
  F32 x = randomMat(6, 32, Layout::Contiguous, rng);
  F32 w = randomMat(32, 32, Layout::Contiguous, rng);
  F32 y = outputMat(6, 32, Layout::Contiguous);
  F32 d = outputMat(32, 32, Layout::Contiguous);

  dsrt_reset_stats();
  _mlir_ciface_dsrt_block_sparse_matmul_f32(&x.desc, &w.desc, &ones.desc,
                                            &y.desc, 1, 8);
  _mlir_ciface_dsrt_block_sparse_sddmm_f32(&x.desc, &y.desc, &ones.desc,
                                           &d.desc, 8);
  ASSERT_EQ(dsrt_last_error(), nullptr);
  dsrt_stats stats;
  dsrt_get_stats(&stats);
  EXPECT_EQ(stats.sparse_calls, 2u);
  EXPECT_EQ(stats.sparse_fallback_calls, 2u);

  poisonInactive(w, sparse, 8);
  _mlir_ciface_dsrt_block_sparse_matmul_f32(&x.desc, &w.desc, &sparse.desc,
                                            &y.desc, 1, 8);
  _mlir_ciface_dsrt_block_sparse_sddmm_f32(&x.desc, &y.desc, &sparse.desc,
                                           &d.desc, 8);
  ASSERT_EQ(dsrt_last_error(), nullptr);
  EXPECT_TRUE(checkMatmul(x, w, sparse, y, true, 8));
  EXPECT_TRUE(checkSddmm(x, y, sparse, d, 8));
  dsrt_get_stats(&stats);
  EXPECT_EQ(stats.sparse_calls, 4u);
  EXPECT_EQ(stats.sparse_fallback_calls, 2u);
}

TEST_F(BlockSparseTest, CountsUsefulAndDenseFlops) {
  std::mt19937 rng(9);
  I8 mask = makeMask(3, 5, Pattern::Zeros, 0.0, rng);
  mask.at(0, 1) = 1, mask.at(2, 4) = -3, mask.at(1, 0) = 7; // 3 of 15 blocks
  F32 x = randomMat(7, 40, Layout::Contiguous, rng);
  F32 w = randomMat(24, 40, Layout::Contiguous, rng);
  F32 y = outputMat(7, 24, Layout::Contiguous);
  F32 dy = randomMat(7, 24, Layout::Contiguous, rng);
  F32 dw = outputMat(24, 40, Layout::Contiguous);
  dsrt_reset_stats();
  _mlir_ciface_dsrt_block_sparse_matmul_f32(&x.desc, &w.desc, &mask.desc,
                                            &y.desc, 1, 8);
  _mlir_ciface_dsrt_block_sparse_sddmm_f32(&dy.desc, &x.desc, &mask.desc,
                                           &dw.desc, 8);
  ASSERT_EQ(dsrt_last_error(), nullptr);
  EXPECT_TRUE(checkMatmul(x, w, mask, y, true, 8));
  EXPECT_TRUE(checkSddmm(dy, x, mask, dw, 8));
  dsrt_stats stats;
  dsrt_get_stats(&stats);
  EXPECT_EQ(stats.sparse_calls, 2u);
  EXPECT_EQ(stats.sparse_flops, 2 * (2.0 * 7 * 3 * 64));
  EXPECT_EQ(stats.sparse_dense_flops, 2 * (2.0 * 7 * 24 * 40));
  EXPECT_EQ(stats.sparse_fallback_calls, 0u);
  EXPECT_GT(stats.sparse_seconds, 0.0);
  // The GEMM counters are separate.
  EXPECT_EQ(stats.gemm_calls, 0u);
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/// Calls the forward on the given sizes and returns the recorded error;
/// expects Y unchanged when there is one.
std::string failMatmul(int64_t m, int64_t r, int64_t c, int64_t maskRows,
                       int64_t maskCols, int64_t yCols, int64_t block,
                       bool transW = true) {
  std::mt19937 rng(1);
  F32 x = randomMat(m, transW ? c : r, Layout::Contiguous, rng);
  F32 w = randomMat(r, c, Layout::Contiguous, rng);
  I8 mask = makeMask(maskRows, maskCols, Pattern::Ones, 1.0, rng);
  F32 y = randomMat(m, yCols, Layout::Contiguous, rng);
  std::vector<float> before = y.storage;
  _mlir_ciface_dsrt_block_sparse_matmul_f32(&x.desc, &w.desc, &mask.desc,
                                            &y.desc, transW, block);
  const char *error = dsrt_last_error();
  if (error)
    EXPECT_EQ(before, y.storage) << "a failed call wrote into Y";
  std::string message = error ? error : "";
  dsrt_clear_error();
  return message;
}

std::string failSddmm(int64_t m, int64_t r, int64_t c, int64_t maskRows,
                      int64_t maskCols, int64_t block, int64_t aCols) {
  std::mt19937 rng(2);
  F32 a = randomMat(m, aCols, Layout::Contiguous, rng);
  F32 b = randomMat(m, c, Layout::Contiguous, rng);
  I8 mask = makeMask(maskRows, maskCols, Pattern::Ones, 1.0, rng);
  F32 d = randomMat(r, c, Layout::Contiguous, rng);
  std::vector<float> before = d.storage;
  _mlir_ciface_dsrt_block_sparse_sddmm_f32(&a.desc, &b.desc, &mask.desc,
                                           &d.desc, block);
  const char *error = dsrt_last_error();
  if (error)
    EXPECT_EQ(before, d.storage) << "a failed call wrote into D";
  std::string message = error ? error : "";
  dsrt_clear_error();
  return message;
}

bool contains(const std::string &haystack, const char *needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST_F(BlockSparseTest, WeightNotAMultipleOfTheBlock) {
  std::string error = failMatmul(4, 12, 16, 1, 2, 12, 8);
  EXPECT_TRUE(contains(error, "block-sparse matmul: weight dimension 12 is "
                              "not a multiple of the block size 8"))
      << error;
  error = failSddmm(4, 16, 20, 2, 2, 8, 16);
  EXPECT_TRUE(contains(error, "block-sparse sddmm: weight dimension 20 is "
                              "not a multiple of the block size 8"))
      << error;
  error = failMatmul(4, 32, 24, 2, 1, 32, 16);
  EXPECT_TRUE(contains(error, "weight dimension 24 is not a multiple of the "
                              "block size 16"))
      << error;
}

TEST_F(BlockSparseTest, BadBlockSize) {
  for (int64_t block : {12, 0, -8, 4}) {
    std::string error = failMatmul(4, 24, 24, 2, 2, 24, block);
    EXPECT_TRUE(contains(error, "is not a positive multiple of 8")) << error;
  }
  std::string error = failSddmm(4, 24, 24, 2, 2, 12, 24);
  EXPECT_TRUE(contains(error, "block-sparse sddmm: block size 12 is not a "
                              "positive multiple of 8"))
      << error;
}

TEST_F(BlockSparseTest, WrongMaskShape) {
  std::string error = failMatmul(4, 24, 40, 3, 4, 24, 8);
  EXPECT_TRUE(contains(error, "mask is [3, 4] but a weight [24, 40] with "
                              "block size 8 needs [3, 5]"))
      << error;
  error = failSddmm(4, 24, 40, 5, 3, 8, 24);
  EXPECT_TRUE(contains(error, "mask is [5, 3]")) << error;
}

TEST_F(BlockSparseTest, MismatchedOperands) {
  // X of the forward contracts over C = 40; give it 24 columns (transW = 0
  // sizes X for R = 24 instead).
  std::mt19937 rng(4);
  F32 x = randomMat(4, 24, Layout::Contiguous, rng);
  F32 w = randomMat(24, 40, Layout::Contiguous, rng);
  I8 mask = makeMask(3, 5, Pattern::Ones, 1.0, rng);
  F32 y = randomMat(4, 24, Layout::Contiguous, rng);
  std::vector<float> before = y.storage;
  _mlir_ciface_dsrt_block_sparse_matmul_f32(&x.desc, &w.desc, &mask.desc,
                                            &y.desc, 1, 8);
  std::string error = dsrt_last_error() ? dsrt_last_error() : "";
  EXPECT_TRUE(contains(error, "X is [4, 24] but W [24, 40] (transW = 1) "
                              "contracts over 40"))
      << error;
  EXPECT_EQ(before, y.storage);
  dsrt_clear_error();
  // Y of the wrong width.
  error = failMatmul(4, 24, 40, 3, 5, 40, 8);
  EXPECT_TRUE(contains(error, "Y is [4, 40]")) << error;
  // A with the wrong width.
  error = failSddmm(4, 24, 40, 3, 5, 8, 16);
  EXPECT_TRUE(contains(error, "do not give A^T B of D's shape")) << error;
}

TEST_F(BlockSparseTest, NegativeStridesAndAliasing) {
  std::mt19937 rng(6);
  F32 x = randomMat(4, 16, Layout::Contiguous, rng);
  F32 w = randomMat(16, 16, Layout::Contiguous, rng);
  I8 mask = makeMask(2, 2, Pattern::Ones, 1.0, rng);
  F32 y = randomMat(4, 16, Layout::Contiguous, rng);
  std::vector<float> before = y.storage;

  F32 badX = x;
  badX.desc.aligned = badX.storage.data();
  badX.desc.strides[1] = -1;
  _mlir_ciface_dsrt_block_sparse_matmul_f32(&badX.desc, &w.desc, &mask.desc,
                                            &y.desc, 1, 8);
  EXPECT_TRUE(contains(dsrt_last_error() ? dsrt_last_error() : "",
                       "X has negative size or stride"));
  dsrt_clear_error();

  // Y with stride 0 on its rows: every row is the same memory.
  F32 aliased = y;
  aliased.desc.aligned = aliased.storage.data();
  aliased.desc.strides[0] = 0;
  _mlir_ciface_dsrt_block_sparse_matmul_f32(&x.desc, &w.desc, &mask.desc,
                                            &aliased.desc, 0, 8);
  EXPECT_TRUE(contains(dsrt_last_error() ? dsrt_last_error() : "",
                       "Y has stride 0 in dimension 0"));
  dsrt_clear_error();

  // Y in X's memory.
  dsrt_memref2_f32 inX = x.desc;
  _mlir_ciface_dsrt_block_sparse_matmul_f32(&x.desc, &w.desc, &mask.desc, &inX,
                                            0, 8);
  EXPECT_TRUE(contains(dsrt_last_error() ? dsrt_last_error() : "",
                       "Y overlaps the memory of an input"));
  dsrt_clear_error();

  // D [16, 16] whose first 4 rows are B [4, 16].
  F32 d = randomMat(16, 16, Layout::Contiguous, rng);
  dsrt_memref2_f32 bInD = d.desc;
  bInD.sizes[0] = 4;
  _mlir_ciface_dsrt_block_sparse_sddmm_f32(&x.desc, &bInD, &mask.desc, &d.desc,
                                           8);
  EXPECT_TRUE(contains(dsrt_last_error() ? dsrt_last_error() : "",
                       "D overlaps the memory of an input"));
  dsrt_clear_error();

  // A null descriptor.
  _mlir_ciface_dsrt_block_sparse_matmul_f32(&x.desc, nullptr, &mask.desc,
                                            &y.desc, 1, 8);
  EXPECT_TRUE(contains(dsrt_last_error() ? dsrt_last_error() : "",
                       "the descriptor of W is null"));
  dsrt_clear_error();
  EXPECT_EQ(before, y.storage);
}

TEST_F(BlockSparseTest, UnknownOrUnavailableKernel) {
  forceKernel("avx3");
  std::string error = failMatmul(4, 16, 16, 2, 2, 16, 8);
  EXPECT_TRUE(contains(error, "DSRT_SPARSE_KERNEL='avx3' is not one of"))
      << error;
  if (!__builtin_cpu_supports("avx512f")) {
    forceKernel("avx512");
    error = failSddmm(4, 16, 16, 2, 2, 8, 16);
    EXPECT_TRUE(contains(error, "this CPU lacks AVX-512F")) << error;
  }
  dsrt_stats stats;
  dsrt_reset_stats();
  forceKernel("avx3");
  failMatmul(4, 16, 16, 2, 2, 16, 8);
  dsrt_get_stats(&stats);
  EXPECT_EQ(stats.sparse_calls, 0u) << "a failed call was counted";
}

} // namespace
