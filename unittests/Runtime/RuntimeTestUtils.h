//===- RuntimeTestUtils.h - Strided tensors and a GEMM reference -*- C++
//-*-===//
//
// Helpers for the runtime tests: rank-3 tensors stored in any of the layouts
// generated code hands the runtime (padded rows, transposed views, inner
// stride 2, interleaved batches, shared batches), a triple-loop reference
// GEMM that reads through the same index formula, and a checker that also
// proves the runtime wrote nothing outside C's view.
//
//===----------------------------------------------------------------------===//

#ifndef DS_UNITTESTS_RUNTIME_RUNTIMETESTUTILS_H
#define DS_UNITTESTS_RUNTIME_RUNTIMETESTUTILS_H

#include "ds/Runtime/ds_runtime.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace dsrt_test {

/// The descriptor type and entry point of each element type.
template <typename T> struct Memref;
template <> struct Memref<float> {
  using Descriptor = dsrt_memref3_f32;
  static constexpr double tolerance = 1e-5;
  static void matmul(Descriptor *a, Descriptor *b, Descriptor *c, bool tA,
                     bool tB) {
    _mlir_ciface_dsrt_matmul_f32(a, b, c, tA, tB);
  }
};
template <> struct Memref<double> {
  using Descriptor = dsrt_memref3_f64;
  static constexpr double tolerance = 1e-12;
  static void matmul(Descriptor *a, Descriptor *b, Descriptor *c, bool tA,
                     bool tB) {
    _mlir_ciface_dsrt_matmul_f64(a, b, c, tA, tB);
  }
};

/// How a logical [B, R, C] tensor sits in memory.
enum class Layout {
  Contiguous,       ///< Dense row-major [B, R, C].
  PaddedRows,       ///< Row stride C + 3, nonzero offset.
  Transposed,       ///< A view of a dense [B, C, R]: strides[2] = R != 1.
  PaddedTransposed, ///< As Transposed with column stride R + 2.
  InnerStride2,     ///< Column stride 2, odd row stride: no unit stride.
  BatchInterleaved, ///< A view of a dense [R, B, C] (attention heads).
  BatchStride0,     ///< One matrix repeated: batch stride 0 (inputs only).
  OverlappingRows,  ///< Row stride C / 2: rows overlap, or repeat when C is 1
                    ///< (inputs only).
};

inline const char *layoutName(Layout layout) {
  switch (layout) {
  case Layout::Contiguous:
    return "Contiguous";
  case Layout::PaddedRows:
    return "PaddedRows";
  case Layout::Transposed:
    return "Transposed";
  case Layout::PaddedTransposed:
    return "PaddedTransposed";
  case Layout::InnerStride2:
    return "InnerStride2";
  case Layout::BatchInterleaved:
    return "BatchInterleaved";
  case Layout::BatchStride0:
    return "BatchStride0";
  case Layout::OverlappingRows:
    return "OverlappingRows";
  }
  return "?";
}

/// Every layout an input may have, and every layout an output may have.
inline std::vector<Layout> inputLayouts() {
  return {Layout::Contiguous,   Layout::PaddedRows,
          Layout::Transposed,   Layout::PaddedTransposed,
          Layout::InnerStride2, Layout::BatchInterleaved,
          Layout::BatchStride0, Layout::OverlappingRows};
}
inline std::vector<Layout> outputLayouts() {
  return {Layout::Contiguous,   Layout::PaddedRows,
          Layout::Transposed,   Layout::PaddedTransposed,
          Layout::InnerStride2, Layout::BatchInterleaved};
}

/// Value of every storage element outside a view; must survive any call.
constexpr double kSentinel = 12345.0;

/// Owned storage and a descriptor of a view into it.
template <typename T> struct Tensor {
  std::vector<T> storage;
  std::vector<bool> inView;
  typename Memref<T>::Descriptor desc;

  int64_t index(int64_t b, int64_t i, int64_t j) const {
    return desc.offset + b * desc.strides[0] + i * desc.strides[1] +
           j * desc.strides[2];
  }
  T &at(int64_t b, int64_t i, int64_t j) { return storage[index(b, i, j)]; }
  T at(int64_t b, int64_t i, int64_t j) const {
    return storage[index(b, i, j)];
  }
  int64_t size(int d) const { return desc.sizes[d]; }
};

/// A [batches, rows, cols] tensor in `layout`, its view filled with random
/// values in [-1, 1) (or NaN when `random` is false: outputs must be
/// overwritten) and the rest of the storage with kSentinel.
template <typename T>
Tensor<T> makeTensor(int64_t batches, int64_t rows, int64_t cols, Layout layout,
                     std::mt19937 &rng, bool random = true) {
  int64_t offset = 0, s0 = 0, s1 = 0, s2 = 0;
  switch (layout) {
  case Layout::Contiguous:
    s2 = 1, s1 = cols, s0 = rows * cols;
    break;
  case Layout::PaddedRows:
    offset = 5, s2 = 1, s1 = cols + 3, s0 = rows * s1 + 1;
    break;
  case Layout::Transposed:
    s1 = 1, s2 = rows, s0 = rows * cols;
    break;
  case Layout::PaddedTransposed:
    offset = 3, s1 = 1, s2 = rows + 2, s0 = cols * s2;
    break;
  case Layout::InnerStride2:
    offset = 2, s2 = 2, s1 = 2 * cols + 1, s0 = rows * s1 + 3;
    break;
  case Layout::BatchInterleaved:
    s2 = 1, s0 = cols, s1 = batches * cols;
    break;
  case Layout::BatchStride0:
    s2 = 1, s1 = cols, s0 = 0;
    break;
  case Layout::OverlappingRows:
    s2 = 1, s1 = cols / 2, s0 = rows * cols;
    break;
  }
  Tensor<T> t;
  t.desc.offset = offset;
  t.desc.sizes[0] = batches, t.desc.sizes[1] = rows, t.desc.sizes[2] = cols;
  t.desc.strides[0] = s0, t.desc.strides[1] = s1, t.desc.strides[2] = s2;
  int64_t extent = offset + 1 + 7; // slack after the last element
  if (batches > 0 && rows > 0 && cols > 0)
    extent += (batches - 1) * s0 + (rows - 1) * s1 + (cols - 1) * s2;
  t.storage.assign(extent, T(kSentinel));
  t.inView.assign(extent, false);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        t.inView[t.index(b, i, j)] = true;
        t.at(b, i, j) = random ? T(dist(rng)) : T(NAN);
      }
  t.desc.allocated = t.storage.data();
  t.desc.aligned = t.storage.data();
  return t;
}

/// A [rows, cols] matrix given as a [1, rows, cols] tensor: B shared by
/// every batch.
template <typename T>
Tensor<T> makeShared(int64_t rows, int64_t cols, std::mt19937 &rng) {
  return makeTensor<T>(1, rows, cols, Layout::Contiguous, rng);
}

/// op(X)[b](i, j) of a tensor, with a shared tensor's batch ignored.
template <typename T>
double opAt(const Tensor<T> &x, bool trans, int64_t b, int64_t i, int64_t j) {
  int64_t batch = x.size(0) == 1 ? 0 : b;
  return trans ? x.at(batch, j, i) : x.at(batch, i, j);
}

/// Checks c against a triple-loop reference of op(A) * op(B), within
/// tolerance * sum_k |a_ik * b_kj| per element, and that no storage element
/// outside c's view changed. Reports the first mismatch only.
template <typename T>
::testing::AssertionResult
matchesReference(const Tensor<T> &a, const Tensor<T> &b, const Tensor<T> &c,
                 bool transA, bool transB) {
  int64_t batches = c.size(0), m = c.size(1), n = c.size(2);
  int64_t k = transA ? a.size(1) : a.size(2);
  for (int64_t bt = 0; bt < batches; ++bt)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        long double sum = 0, magnitude = 0;
        for (int64_t kk = 0; kk < k; ++kk) {
          long double term =
              static_cast<long double>(opAt(a, transA, bt, i, kk)) *
              opAt(b, transB, bt, kk, j);
          sum += term;
          magnitude += std::fabs(term);
        }
        double got = c.at(bt, i, j);
        double bound = Memref<T>::tolerance * double(magnitude) + 1e-30;
        if (!(std::fabs(got - double(sum)) <= bound))
          return ::testing::AssertionFailure()
                 << "C(" << bt << ", " << i << ", " << j << ") = " << got
                 << ", reference " << double(sum) << " (bound " << bound << ")";
      }
  for (size_t e = 0; e < c.storage.size(); ++e)
    if (!c.inView[e] && c.storage[e] != T(kSentinel))
      return ::testing::AssertionFailure()
             << "storage element " << e
             << " outside C's view was written: " << c.storage[e];
  return ::testing::AssertionSuccess();
}

/// "A [3, 7, 4] Transposed" for traces.
template <typename T>
std::string describe(const char *name, const Tensor<T> &t, Layout layout) {
  std::ostringstream os;
  os << name << " [" << t.size(0) << ", " << t.size(1) << ", " << t.size(2)
     << "] " << layoutName(layout);
  return os.str();
}

} // namespace dsrt_test

#endif // DS_UNITTESTS_RUNTIME_RUNTIMETESTUTILS_H
