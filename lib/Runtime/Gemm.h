//===- Gemm.h - Batched GEMM problems shared by the kernels -----*- C++ -*-===//
//
// Gemm.cpp turns the memref descriptors of a dsrt_matmul_* call into a
// validated GemmProblem: strided 2-D views of op(A), op(B) and C (the
// transposes already folded into the strides) plus a batch stride each. The
// kernels (GemmF32.cpp on oneDNN, GemmF64.cpp as plain loops) only see
// problems with every size >= 1, so they need no shape checks of their own.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_GEMM_H
#define DS_LIB_RUNTIME_GEMM_H

#include "RuntimeInternal.h"

#include <algorithm>
#include <cstdint>

namespace dsrt {

/// A strided 2-D view: element (i, j) is data[i * rowStride + j * colStride].
template <typename T> struct Matrix {
  T *data;
  int64_t rows, cols;
  int64_t rowStride, colStride;

  T &at(int64_t i, int64_t j) const {
    return data[i * rowStride + j * colStride];
  }
  /// The same elements seen as a cols x rows matrix.
  Matrix transposed() const { return {data, cols, rows, colStride, rowStride}; }
};

/// One operand of a batched GEMM: the view of batch 0 and how to reach the
/// others. An operand with one batch is shared by every batch of C.
template <typename T> struct BatchedMatrix {
  Matrix<T> first;
  int64_t batches;
  int64_t batchStride;

  Matrix<T> operator[](int64_t b) const {
    Matrix<T> m = first;
    if (batches > 1)
      m.data += b * batchStride;
    return m;
  }
  /// True when every batch sees the same elements, so work done on the
  /// operand (packing) can be done once per call.
  bool invariant() const { return batches == 1 || batchStride == 0; }
  BatchedMatrix transposed() const {
    return {first.transposed(), batches, batchStride};
  }
};

/// A validated batched GEMM: c[b] = a[b] * b[b] for b < batches, with
/// a[b] m x k, b[b] k x n and c[b] m x n; every size >= 1. The inputs are
/// of type T, C of type TC (int8 inputs accumulate into int32).
template <typename T, typename TC = T> struct GemmProblem {
  BatchedMatrix<const T> a;
  BatchedMatrix<const T> b;
  BatchedMatrix<TC> c;
  int64_t batches, m, n, k;
};

/// How a kernel can hand a view to a row-major GEMM.
enum class Layout {
  RowMajor, ///< (i, j) at data[i * ld + j].
  ColMajor, ///< (i, j) at data[i + j * ld]: the transpose is row-major.
  Packed,   ///< Neither: copy to a packed row-major buffer first.
};

struct LayoutPlan {
  Layout layout;
  /// Leading dimension (>= 1) of the view, or of the packed copy.
  int64_t ld;
};

/// Picks the cheapest way to present `m` to a row-major GEMM that accepts
/// either orientation with a leading dimension. Strides of dimensions of
/// size 1 are never used, so they are ignored (MLIR leaves them arbitrary).
template <typename T> LayoutPlan planLayout(const Matrix<T> &m) {
  bool oneRow = m.rows <= 1, oneCol = m.cols <= 1;
  int64_t minRowLd = std::max<int64_t>(1, m.cols);
  int64_t minColLd = std::max<int64_t>(1, m.rows);
  if ((oneCol || m.colStride == 1) && (oneRow || m.rowStride >= minRowLd))
    return {Layout::RowMajor, oneRow ? minRowLd : m.rowStride};
  if ((oneRow || m.rowStride == 1) && (oneCol || m.colStride >= minColLd))
    return {Layout::ColMajor, oneCol ? minColLd : m.colStride};
  return {Layout::Packed, minRowLd};
}

/// Copies `src` into the row-major buffer `dst` (leading dimension cols).
template <typename T> void packRowMajor(const Matrix<const T> &src, T *dst) {
  for (int64_t i = 0; i < src.rows; ++i)
    for (int64_t j = 0; j < src.cols; ++j)
      dst[i * src.cols + j] = src.at(i, j);
}

/// Copies the row-major buffer `src` (leading dimension cols) into `dst`.
template <typename T> void unpackRowMajor(const T *src, const Matrix<T> &dst) {
  for (int64_t i = 0; i < dst.rows; ++i)
    for (int64_t j = 0; j < dst.cols; ++j)
      dst.at(i, j) = src[i * dst.cols + j];
}

/// An input operand as oneDNN's row-major GEMMs (dnnl_sgemm,
/// dnnl_gemm_u8s8s32, ...) take it: data, 'N' or 'T', leading dimension.
template <typename T> struct GemmInput {
  const T *data;
  char trans;
  int64_t ld;
};

/// Presents view `m` according to `plan`; a packed plan uses `packed`,
/// filling it first unless it already holds `m` (`fill` false).
template <typename T>
GemmInput<T> present(const Matrix<const T> &m, const LayoutPlan &plan,
                     T *packed, bool fill = true) {
  switch (plan.layout) {
  case Layout::RowMajor:
    return {m.data, 'N', plan.ld};
  case Layout::ColMajor:
    return {m.data, 'T', plan.ld};
  case Layout::Packed:
    break;
  }
  if (fill)
    packRowMajor(m, packed);
  return {packed, 'N', plan.ld};
}

/// Computes an f32 problem with oneDNN's sgemm.
Status runGemmF32(const GemmProblem<float> &problem);

/// Computes an f64 problem with cache-friendly loops.
Status runGemmF64(const GemmProblem<double> &problem);

/// Computes an int8 x int8 -> int32 problem exactly: as one oneDNN integer
/// GEMM where its kernels cannot saturate, else as two on A split into
/// 7-bit halves (see GemmS8.cpp).
Status runGemmS8(const GemmProblem<int8_t, int32_t> &problem);

} // namespace dsrt

#endif // DS_LIB_RUNTIME_GEMM_H
