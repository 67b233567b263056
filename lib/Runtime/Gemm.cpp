//===- Gemm.cpp - The batched GEMM entry points of the C ABI --------------===//
//
// _mlir_ciface_dsrt_matmul_{f32,f64,s8s8s32} check the three memref descriptors
// against each other, fold the transpose flags into the strides, and hand a
// GemmProblem to the element-type kernel. Checking happens before anything is
// written, so a call that fails leaves C untouched. Degenerate problems are
// settled here: an empty C needs no work and K == 0 means C = 0.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"

#include "ds/Runtime/ds_runtime.h"

#include <chrono>
#include <cstdio>

using namespace dsrt;

namespace {

/// Element type traits: the input and output types, their descriptors and
/// the kernel, per input type.
template <typename T> struct GemmTraits;
template <> struct GemmTraits<float> {
  using Out = float;
  using Descriptor = dsrt_memref3_f32;
  using OutDescriptor = dsrt_memref3_f32;
  static constexpr const char *name = "dsrt_matmul_f32";
  static Status run(const GemmProblem<float> &p) { return runGemmF32(p); }
};
template <> struct GemmTraits<double> {
  using Out = double;
  using Descriptor = dsrt_memref3_f64;
  using OutDescriptor = dsrt_memref3_f64;
  static constexpr const char *name = "dsrt_matmul_f64";
  static Status run(const GemmProblem<double> &p) { return runGemmF64(p); }
};
template <> struct GemmTraits<int8_t> {
  using Out = int32_t;
  using Descriptor = dsrt_memref3_i8;
  using OutDescriptor = dsrt_memref3_i32;
  static constexpr const char *name = "dsrt_matmul_s8s8s32";
  static Status run(const GemmProblem<int8_t, int32_t> &p) {
    return runGemmS8(p);
  }
};

template <typename T>
using ProblemOf = GemmProblem<T, typename GemmTraits<T>::Out>;

/// "[2, 3, 4]"
template <typename D> void formatSizes(const D &m, char *out, size_t size) {
  std::snprintf(
      out, size, "[%lld, %lld, %lld]", static_cast<long long>(m.sizes[0]),
      static_cast<long long>(m.sizes[1]), static_cast<long long>(m.sizes[2]));
}

/// "A [1, 7, 3] (transA = 0), B [1, 4, 5] (transB = 0), C [1, 7, 5]": the
/// context every shape error ends with.
template <typename D, typename DC>
void formatShapes(const D &a, const D &b, const DC &c, bool transA, bool transB,
                  char *out, size_t size) {
  char as[80], bs[80], cs[80];
  formatSizes(a, as, sizeof(as));
  formatSizes(b, bs, sizeof(bs));
  formatSizes(c, cs, sizeof(cs));
  std::snprintf(out, size, "A %s (transA = %d), B %s (transB = %d), C %s", as,
                transA, bs, transB, cs);
}

/// Local facts about one descriptor: present, no negative size, offset or
/// stride, and a data pointer when it has elements.
template <typename D>
Status checkDescriptor(const D *m, const char *fn, const char *operand) {
  if (!m)
    return DS_ERROR("%s: the descriptor of %s is null", fn, operand);
  if (m->offset < 0)
    return DS_ERROR("%s: %s has negative offset %lld", fn, operand,
                    static_cast<long long>(m->offset));
  bool empty = false;
  for (int d = 0; d < 3; ++d) {
    if (m->sizes[d] < 0 || m->strides[d] < 0)
      return DS_ERROR("%s: %s has negative size or stride in dimension %d "
                      "(size %lld, stride %lld)",
                      fn, operand, d, static_cast<long long>(m->sizes[d]),
                      static_cast<long long>(m->strides[d]));
    empty |= m->sizes[d] == 0;
  }
  if (!empty && !m->aligned)
    return DS_ERROR("%s: %s has elements but a null data pointer", fn, operand);
  return Status::success();
}

/// The view of op(X) for a descriptor of X.
template <typename T, typename D>
BatchedMatrix<T> viewOf(const D &m, bool transpose) {
  // An empty memref may have a null pointer; never offset it.
  T *data = m.aligned ? m.aligned + m.offset : nullptr;
  BatchedMatrix<T> view{
      {data, m.sizes[1], m.sizes[2], m.strides[1], m.strides[2]},
      m.sizes[0],
      m.strides[0]};
  return transpose ? view.transposed() : view;
}

/// Checks the descriptors against each other and builds the problem.
template <typename T>
Status buildProblem(const typename GemmTraits<T>::Descriptor *a,
                    const typename GemmTraits<T>::Descriptor *b,
                    const typename GemmTraits<T>::OutDescriptor *c, bool transA,
                    bool transB, ProblemOf<T> &problem) {
  const char *fn = GemmTraits<T>::name;
  DS_RETURN_IF_ERROR(checkDescriptor(a, fn, "A"));
  DS_RETURN_IF_ERROR(checkDescriptor(b, fn, "B"));
  DS_RETURN_IF_ERROR(checkDescriptor(c, fn, "C"));

  problem.a = viewOf<const T>(*a, transA);
  problem.b = viewOf<const T>(*b, transB);
  problem.c = viewOf<typename GemmTraits<T>::Out>(*c, false);
  problem.batches = c->sizes[0];
  problem.m = c->sizes[1];
  problem.n = c->sizes[2];
  problem.k = problem.a.first.cols;

  const Matrix<const T> &opA = problem.a.first, &opB = problem.b.first;
  // Writes through a zero stride would race and leave one arbitrary batch
  // (row, column) behind: C must not alias itself that way. An empty C has
  // no elements to alias (and MLIR gives it zero strides).
  bool emptyC = problem.batches == 0 || problem.m == 0 || problem.n == 0;
  int aliasedDim = -1;
  for (int d = 0; d < 3 && !emptyC && aliasedDim < 0; ++d)
    if (c->sizes[d] > 1 && c->strides[d] == 0)
      aliasedDim = d;
  bool consistent =
      opA.cols == opB.rows && opA.rows == problem.m && opB.cols == problem.n &&
      problem.a.batches == problem.batches &&
      (problem.b.batches == problem.batches || problem.b.batches == 1) &&
      aliasedDim < 0;
  if (consistent)
    return Status::success();

  // Only a failing call pays for formatting the shapes.
  char shapes[320];
  formatShapes(*a, *b, *c, transA, transB, shapes, sizeof(shapes));
  if (opA.cols != opB.rows)
    return DS_ERROR("%s: contraction sizes differ: op(A) is %lldx%lld but "
                    "op(B) is %lldx%lld; %s",
                    fn, static_cast<long long>(opA.rows),
                    static_cast<long long>(opA.cols),
                    static_cast<long long>(opB.rows),
                    static_cast<long long>(opB.cols), shapes);
  if (opA.rows != problem.m)
    return DS_ERROR("%s: op(A) has %lld rows but C has %lld; %s", fn,
                    static_cast<long long>(opA.rows),
                    static_cast<long long>(problem.m), shapes);
  if (opB.cols != problem.n)
    return DS_ERROR("%s: op(B) has %lld columns but C has %lld; %s", fn,
                    static_cast<long long>(opB.cols),
                    static_cast<long long>(problem.n), shapes);
  if (problem.a.batches != problem.batches)
    return DS_ERROR("%s: A has %lld batches but C has %lld; %s", fn,
                    static_cast<long long>(problem.a.batches),
                    static_cast<long long>(problem.batches), shapes);
  if (problem.b.batches != problem.batches && problem.b.batches != 1)
    return DS_ERROR("%s: B has %lld batches; expected 1 or %lld (as C); %s", fn,
                    static_cast<long long>(problem.b.batches),
                    static_cast<long long>(problem.batches), shapes);
  return DS_ERROR("%s: C has stride 0 in dimension %d of size %lld, so its "
                  "elements alias; %s",
                  fn, aliasedDim, static_cast<long long>(c->sizes[aliasedDim]),
                  shapes);
}

/// C = 0, for K == 0 (beta = 0: an empty sum).
template <typename T, typename TC>
void zeroFill(const GemmProblem<T, TC> &problem) {
  for (int64_t b = 0; b < problem.batches; ++b) {
    Matrix<TC> c = problem.c[b];
    for (int64_t i = 0; i < c.rows; ++i)
      for (int64_t j = 0; j < c.cols; ++j)
        c.at(i, j) = TC(0);
  }
}

/// The whole call: check, compute, count.
template <typename T>
void matmul(const typename GemmTraits<T>::Descriptor *a,
            const typename GemmTraits<T>::Descriptor *b,
            const typename GemmTraits<T>::OutDescriptor *c, int64_t transA,
            int64_t transB) {
  auto start = std::chrono::steady_clock::now();
  ProblemOf<T> problem;
  if (buildProblem<T>(a, b, c, transA != 0, transB != 0, problem).failed())
    return;

  bool empty = problem.batches == 0 || problem.m == 0 || problem.n == 0;
  if (!empty && problem.k == 0)
    zeroFill(problem);
  else if (!empty && GemmTraits<T>::run(problem).failed())
    return;

  std::chrono::duration<double> elapsed =
      std::chrono::steady_clock::now() - start;
  recordGemm(2.0 * static_cast<double>(problem.batches) *
                 static_cast<double>(problem.m) *
                 static_cast<double>(problem.n) *
                 static_cast<double>(problem.k),
             elapsed.count());
}

} // namespace

void _mlir_ciface_dsrt_matmul_f32(dsrt_memref3_f32 *a, dsrt_memref3_f32 *b,
                                  dsrt_memref3_f32 *c, int64_t transA,
                                  int64_t transB) {
  matmul<float>(a, b, c, transA, transB);
}

void _mlir_ciface_dsrt_matmul_f64(dsrt_memref3_f64 *a, dsrt_memref3_f64 *b,
                                  dsrt_memref3_f64 *c, int64_t transA,
                                  int64_t transB) {
  matmul<double>(a, b, c, transA, transB);
}

void _mlir_ciface_dsrt_matmul_s8s8s32(dsrt_memref3_i8 *a, dsrt_memref3_i8 *b,
                                      dsrt_memref3_i32 *c, int64_t transA,
                                      int64_t transB) {
  matmul<int8_t>(a, b, c, transA, transB);
}
