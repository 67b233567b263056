//===- Matmul.cpp - Row-major batched GEMMs on cuBLASLt -------------------===//
//
// The dsrt_cuda_matmul_* entry points and dsrt_cuda_gemm: check the memref
// descriptors as the CPU GEMM does (Gemm.cpp), map the row-major problem
// onto cuBLASLt's column-major one, and enqueue one cublasLtMatmul on the
// step stream.
//
// The mapping. A row-major matrix is the column-major storage of its
// transpose, so the runtime computes C^T = op(B)^T * op(A)^T: cuBLASLt's
// m = N, n = M, k = K, its first operand is B and its second A. A logical
// matrix Y [R, C] with strides (yr, yc) is handed to cuBLASLt as
//   op N, rows R, cols C, ld yc   when yr == 1 (column-major storage), or
//   op T, rows C, cols R, ld yr   when yc == 1 (row-major storage),
// a dimension of size 1 counting as unit-strided. The output takes no op,
// so when C has its unit stride along M instead (a column-major C) the
// runtime computes C = op(A) * op(B) directly (m = M, n = N). For
// contiguous operands this gives, with C row-major:
//   transA transB | cuBLASLt opA (holds B) opB (holds A)
//     0      0    |   N   N
//     0      1    |   T   N        <- the only layout FP8 accepts ("TN")
//     1      0    |   N   T
//     1      1    |   T   T
// cuBLASLt's FP8 kernels take only TN: in row-major terms, op(A) and op(B)
// both stored with unit stride along K (A [M, K], B [N, K] with transB = 1:
// X * W^T). The other three rows are refused for FP8 (the column-major-C
// orientation requires the same), f32/bf16/f16 take all four.
//
// cuBLASLt descriptors, layouts and the algorithm its heuristic picks are
// cached per problem (types, ops, shapes, leading dimensions, batch strides
// and pointer alignments), so a training step pays the heuristic once per
// GEMM shape; only the FP8 scale pointers are set per call.
//
//===----------------------------------------------------------------------===//

#include "CublasLt.h"
#include "Profile.h"

#include "ds/Runtime/ds_runtime_cuda.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

using namespace dsrt;
using namespace dsrt::cuda;

namespace {

//===----------------------------------------------------------------------===//
// Problems
//===----------------------------------------------------------------------===//

enum class Element { F32, BF16, F16, E4M3, E5M2 };

cudaDataType_t dataType(Element e) {
  switch (e) {
  case Element::F32:
    return CUDA_R_32F;
  case Element::BF16:
    return CUDA_R_16BF;
  case Element::F16:
    return CUDA_R_16F;
  case Element::E4M3:
    return CUDA_R_8F_E4M3;
  case Element::E5M2:
    return CUDA_R_8F_E5M2;
  }
  return CUDA_R_32F;
}

int64_t elementBytes(Element e) {
  switch (e) {
  case Element::F32:
    return 4;
  case Element::BF16:
  case Element::F16:
    return 2;
  case Element::E4M3:
  case Element::E5M2:
    return 1;
  }
  return 1;
}

const char *elementName(Element e) {
  switch (e) {
  case Element::F32:
    return "f32";
  case Element::BF16:
    return "bf16";
  case Element::F16:
    return "f16";
  case Element::E4M3:
    return "e4m3";
  case Element::E5M2:
    return "e5m2";
  }
  return "?";
}

/// A rank-3 memref of any element type, as the entry points receive it.
struct Memref3 {
  const void *aligned;
  int64_t offset;
  int64_t sizes[3];
  int64_t strides[3];
};

template <typename D> Memref3 toMemref3(const D &d) {
  Memref3 m{d.aligned, d.offset, {}, {}};
  std::copy(d.sizes, d.sizes + 3, m.sizes);
  std::copy(d.strides, d.strides + 3, m.strides);
  return m;
}

/// One batched operand seen as op(X): batch b, element (i, j) at
/// data + (b * batchStride + i * rowStride + j * colStride) elements.
struct View {
  char *data;
  int64_t batches, rows, cols;
  int64_t batchStride, rowStride, colStride;

  View transposed() const {
    return {data, batches, cols, rows, batchStride, colStride, rowStride};
  }
};

View viewOf(const Memref3 &m, int64_t bytes, bool transpose) {
  // An empty memref may have a null pointer; never offset it.
  char *data = m.aligned ? static_cast<char *>(const_cast<void *>(m.aligned)) +
                               m.offset * bytes
                         : nullptr;
  View v{data,         m.sizes[0],   m.sizes[1],  m.sizes[2],
         m.strides[0], m.strides[1], m.strides[2]};
  return transpose ? v.transposed() : v;
}

/// A validated GEMM: c[b] = a[b] * b[b], a M x K, b K x N, c M x N.
struct Problem {
  const char *fn;
  Element typeA, typeB;
  /// C's type: f32, or bf16/f16 rounded once from the FP32 accumulator.
  Element typeC = Element::F32;
  View a, b, c;
  int64_t batches, m, n, k;
  /// FP8 dequantisation scales (device pointers) or null.
  const float *scaleA = nullptr, *scaleB = nullptr;
  /// The epilogue's bias (N elements of C's type, device memory) or null.
  const void *bias = nullptr;
  /// For messages: "A [1, 7, 3] (transA = 0), ...".
  char shapes[400];
};

Status checkDescriptor(const Memref3 &m, const char *fn, const char *operand) {
  if (m.offset < 0)
    return DS_ERROR("%s: %s has negative offset %lld", fn, operand,
                    static_cast<long long>(m.offset));
  bool empty = false;
  for (int d = 0; d < 3; ++d) {
    if (m.sizes[d] < 0 || m.strides[d] < 0)
      return DS_ERROR("%s: %s has negative size or stride in dimension %d "
                      "(size %lld, stride %lld)",
                      fn, operand, d, static_cast<long long>(m.sizes[d]),
                      static_cast<long long>(m.strides[d]));
    empty |= m.sizes[d] == 0;
  }
  if (!empty && !m.aligned)
    return DS_ERROR("%s: %s has elements but a null data pointer", fn, operand);
  return Status::success();
}

void formatShape(const Memref3 &m, char *out, size_t size) {
  std::snprintf(
      out, size, "[%lld, %lld, %lld] strides [%lld, %lld, %lld]",
      static_cast<long long>(m.sizes[0]), static_cast<long long>(m.sizes[1]),
      static_cast<long long>(m.sizes[2]), static_cast<long long>(m.strides[0]),
      static_cast<long long>(m.strides[1]),
      static_cast<long long>(m.strides[2]));
}

/// Checks the descriptors against each other (the rules of the CPU GEMM)
/// and builds the problem.
Status buildProblem(const char *fn, const Memref3 *a, const Memref3 *b,
                    const Memref3 *c, bool transA, bool transB, Element typeA,
                    Element typeB, Element typeC, Problem &p) {
  if (!a || !b || !c)
    return DS_ERROR("%s: the descriptor of %s is null", fn,
                    !a   ? "A"
                    : !b ? "B"
                         : "C");
  DS_RETURN_IF_ERROR(checkDescriptor(*a, fn, "A"));
  DS_RETURN_IF_ERROR(checkDescriptor(*b, fn, "B"));
  DS_RETURN_IF_ERROR(checkDescriptor(*c, fn, "C"));

  p.fn = fn;
  p.typeA = typeA;
  p.typeB = typeB;
  p.typeC = typeC;
  p.a = viewOf(*a, elementBytes(typeA), transA);
  p.b = viewOf(*b, elementBytes(typeB), transB);
  p.c = viewOf(*c, elementBytes(typeC), false);
  p.batches = c->sizes[0];
  p.m = c->sizes[1];
  p.n = c->sizes[2];
  p.k = p.a.cols;
  char as[96], bs[96], cs[96];
  formatShape(*a, as, sizeof(as));
  formatShape(*b, bs, sizeof(bs));
  formatShape(*c, cs, sizeof(cs));
  std::snprintf(p.shapes, sizeof(p.shapes),
                "A %s (transA = %d), B %s (transB = %d), C %s", as, transA, bs,
                transB, cs);

  bool emptyC = p.batches == 0 || p.m == 0 || p.n == 0;
  for (int d = 0; d < 3 && !emptyC; ++d)
    if (c->sizes[d] > 1 && c->strides[d] == 0)
      return DS_ERROR("%s: C has stride 0 in dimension %d of size %lld, so "
                      "its elements alias; %s",
                      fn, d, static_cast<long long>(c->sizes[d]), p.shapes);
  if (p.a.cols != p.b.rows)
    return DS_ERROR("%s: contraction sizes differ: op(A) is %lldx%lld but "
                    "op(B) is %lldx%lld; %s",
                    fn, static_cast<long long>(p.a.rows),
                    static_cast<long long>(p.a.cols),
                    static_cast<long long>(p.b.rows),
                    static_cast<long long>(p.b.cols), p.shapes);
  if (p.a.rows != p.m)
    return DS_ERROR("%s: op(A) has %lld rows but C has %lld; %s", fn,
                    static_cast<long long>(p.a.rows),
                    static_cast<long long>(p.m), p.shapes);
  if (p.b.cols != p.n)
    return DS_ERROR("%s: op(B) has %lld columns but C has %lld; %s", fn,
                    static_cast<long long>(p.b.cols),
                    static_cast<long long>(p.n), p.shapes);
  if (p.a.batches != p.batches)
    return DS_ERROR("%s: A has %lld batches but C has %lld; %s", fn,
                    static_cast<long long>(p.a.batches),
                    static_cast<long long>(p.batches), p.shapes);
  if (p.b.batches != p.batches && p.b.batches != 1)
    return DS_ERROR("%s: B has %lld batches; expected 1 or %lld (as C); %s", fn,
                    static_cast<long long>(p.b.batches),
                    static_cast<long long>(p.batches), p.shapes);
  if (p.batches > INT32_MAX)
    return DS_ERROR("%s: %lld batches; cuBLASLt takes at most 2^31 - 1", fn,
                    static_cast<long long>(p.batches));
  return Status::success();
}

//===----------------------------------------------------------------------===//
// The column-major mapping
//===----------------------------------------------------------------------===//

/// One matrix as cuBLASLt sees it: op(stored), stored column-major
/// rows x cols with leading dimension ld, `batches` of them `batchStride`
/// elements apart.
struct LtMatrix {
  cublasOperation_t op;
  int64_t rows, cols, ld;
  int64_t batches, batchStride;

  auto key() const {
    return std::make_tuple(static_cast<int>(op), rows, cols, ld, batches,
                           batchStride);
  }
};

/// The column-major form of the logical matrix Y [r, c] with strides
/// (yr, yc), op N preferred unless `preferT`. False when Y has no unit
/// stride (or its columns would overlap).
bool describe(int64_t r, int64_t c, int64_t yr, int64_t yc, bool preferT,
              LtMatrix &out) {
  // Y stored column-major: Y itself, ld = yc.
  auto asN = [&]() {
    if (!(yr == 1 || r == 1))
      return false;
    int64_t ld = c == 1 ? std::max<int64_t>(1, r) : yc;
    if (ld < std::max<int64_t>(1, r))
      return false;
    out.op = CUBLAS_OP_N;
    out.rows = r;
    out.cols = c;
    out.ld = ld;
    return true;
  };
  // Y stored row-major: its transpose, column-major c x r with ld = yr.
  auto asT = [&]() {
    if (!(yc == 1 || c == 1))
      return false;
    int64_t ld = r == 1 ? std::max<int64_t>(1, c) : yr;
    if (ld < std::max<int64_t>(1, c))
      return false;
    out.op = CUBLAS_OP_T;
    out.rows = c;
    out.cols = r;
    out.ld = ld;
    return true;
  };
  return preferT ? (asT() || asN()) : (asN() || asT());
}

/// The cuBLASLt problem: D = opA(first) * opB(second), D m x n.
struct LtProblem {
  const void *first, *second;
  Element typeFirst, typeSecond;
  LtMatrix lfirst, lsecond, d;
  void *dData;
  /// True in the C^T orientation, where the first operand holds B.
  bool swapped;
};

Status refuseLayout(const Problem &p, const char *operand) {
  return DS_ERROR("%s: %s needs a unit stride in one of its two inner "
                  "dimensions (cuBLASLt's matrices are strided in one "
                  "dimension only); %s",
                  p.fn, operand, p.shapes);
}

/// Maps the row-major problem; `fp8` asks for the TN layout.
Status mapProblem(const Problem &p, bool fp8, LtProblem &lt) {
  const View &a = p.a, &b = p.b, &c = p.c;
  // The orientation: C^T (cuBLASLt m = N) when C is unit-strided along N,
  // else C itself (m = M).
  bool transposed;
  if (c.colStride == 1 || p.n == 1)
    transposed = true;
  else if (c.rowStride == 1 || p.m == 1)
    transposed = false;
  else
    return refuseLayout(p, "C");

  LtMatrix la, lb;
  la.batches = lb.batches = lt.d.batches = p.batches;
  la.batchStride = p.batches > 1 ? a.batchStride : 0;
  lb.batchStride = p.batches > 1 && b.batches > 1 ? b.batchStride : 0;
  lt.d.batchStride = p.batches > 1 ? c.batchStride : 0;
  bool okA, okB;
  if (transposed) {
    // D = C^T [N, M] = op(B)^T [N, K] * op(A)^T [K, M].
    okB = describe(p.n, p.k, b.colStride, b.rowStride, /*preferT=*/fp8, lb);
    okA = describe(p.k, p.m, a.colStride, a.rowStride, /*preferT=*/false, la);
    bool okD = describe(p.n, p.m, c.colStride, c.rowStride, false, lt.d);
    if (!okD || lt.d.op != CUBLAS_OP_N)
      return refuseLayout(p, "C");
    lt.swapped = true;
    lt.first = b.data;
    lt.typeFirst = p.typeB;
    lt.lfirst = lb;
    lt.second = a.data;
    lt.typeSecond = p.typeA;
    lt.lsecond = la;
  } else {
    // D = C [M, N] = op(A) [M, K] * op(B) [K, N].
    okA = describe(p.m, p.k, a.rowStride, a.colStride, /*preferT=*/fp8, la);
    okB = describe(p.k, p.n, b.rowStride, b.colStride, /*preferT=*/false, lb);
    bool okD = describe(p.m, p.n, c.rowStride, c.colStride, false, lt.d);
    if (!okD || lt.d.op != CUBLAS_OP_N)
      return refuseLayout(p, "C");
    lt.swapped = false;
    lt.first = a.data;
    lt.typeFirst = p.typeA;
    lt.lfirst = la;
    lt.second = b.data;
    lt.typeSecond = p.typeB;
    lt.lsecond = lb;
  }
  if (!okA)
    return refuseLayout(p, "A");
  if (!okB)
    return refuseLayout(p, "B");
  // Both unit strides along K is what makes the first operand T and the
  // second N, whichever the orientation.
  if (fp8 && (lt.lfirst.op != CUBLAS_OP_T || lt.lsecond.op != CUBLAS_OP_N))
    return DS_ERROR("%s: FP8 GEMMs need A and B stored with unit stride along "
                    "K (cuBLASLt's FP8 kernels take only the TN layout; "
                    "row-major: A [M, K] with transA = 0 and B [N, K] with "
                    "transB = 1); %s",
                    p.fn, p.shapes);
  lt.dData = c.data;
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Plans
//===----------------------------------------------------------------------===//

/// The largest power of two (at most 256) that divides the address: what
/// cuBLASLt's heuristic must assume about a pointer.
uint32_t alignmentOf(const void *ptr) {
  auto address = reinterpret_cast<uintptr_t>(ptr);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment)
    alignment /= 2;
  return alignment;
}

/// Everything a plan depends on.
/// A bias pointer's alignment is part of it: the heuristic reads it.
using PlanKey =
    std::tuple<int, int, int, decltype(LtMatrix().key()),
               decltype(LtMatrix().key()), decltype(LtMatrix().key()), uint32_t,
               uint32_t, uint32_t, bool, bool, uint32_t>;

PlanKey keyOf(const LtProblem &lt, Element typeD, bool scaled,
              const void *bias) {
  return PlanKey(
      static_cast<int>(lt.typeFirst), static_cast<int>(lt.typeSecond),
      static_cast<int>(typeD), lt.lfirst.key(), lt.lsecond.key(), lt.d.key(),
      alignmentOf(lt.first), alignmentOf(lt.second), alignmentOf(lt.dData),
      scaled, bias != nullptr, bias ? alignmentOf(bias) : 0);
}

/// A ready-to-run cublasLtMatmul: descriptors and the heuristic's choice.
struct Plan {
  MatmulDesc desc;
  MatrixLayout first, second, d;
  cublasLtMatmulAlgo_t algo;
};

/// Beyond this many shapes the cache starts over (a step has a few dozen).
constexpr size_t kMaxPlans = 1024;

std::mutex gemmMutex;
std::map<PlanKey, std::unique_ptr<Plan>> plans;

template <typename T>
Status setDescAttribute(cublasLtMatmulDesc_t desc,
                        cublasLtMatmulDescAttributes_t attribute,
                        const T &value) {
  return DS_LT(cublasLtMatmulDescSetAttribute, desc, attribute, &value,
               sizeof(value));
}

Status createLayout(Element type, const LtMatrix &m, MatrixLayout &out) {
  cublasLtMatrixLayout_t layout = nullptr;
  DS_RETURN_IF_ERROR(DS_LT(cublasLtMatrixLayoutCreate, &layout, dataType(type),
                           static_cast<uint64_t>(m.rows),
                           static_cast<uint64_t>(m.cols), m.ld));
  out.reset(layout);
  if (m.batches > 1) {
    int32_t count = static_cast<int32_t>(m.batches);
    DS_RETURN_IF_ERROR(DS_LT(cublasLtMatrixLayoutSetAttribute, layout,
                             CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                             sizeof(count)));
    int64_t stride = m.batchStride;
    DS_RETURN_IF_ERROR(DS_LT(cublasLtMatrixLayoutSetAttribute, layout,
                             CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                             &stride, sizeof(stride)));
  }
  return Status::success();
}

/// The FP8 scale pointers in cuBLASLt's operand order (A first, B second),
/// 16-byte aligned (see alignScales).
struct LtScales {
  const float *first = nullptr, *second = nullptr;
};

Status setScales(cublasLtMatmulDesc_t desc, const LtScales &scales) {
  DS_RETURN_IF_ERROR(setDescAttribute(
      desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, scales.first));
  return setDescAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                          scales.second);
}

/// `p`'s scales in cuBLASLt's order. cuBLASLt refuses a scale pointer that
/// is not 16-byte aligned (CUBLAS_STATUS_NOT_SUPPORTED from cublasLtMatmul;
/// seen on the H200 with cuBLASLt 13: a scale 4 bytes past another one),
/// so such a scale is first copied, in stream order, into one of the
/// session's aligned slots (the GEMM before has read the slot by then).
Status alignScales(const Problem &p, const LtProblem &lt,
                   const LtSession &session, LtScales &out) {
  const float *scales[] = {lt.swapped ? p.scaleB : p.scaleA,
                           lt.swapped ? p.scaleA : p.scaleB};
  for (int i = 0; i < 2; ++i) {
    if (scales[i] && reinterpret_cast<uintptr_t>(scales[i]) % 16) {
      CUdeviceptr slot = session.scaleSlots + 16 * i;
      DS_RETURN_IF_ERROR(DS_CU(cuMemcpyAsync, slot,
                               reinterpret_cast<CUdeviceptr>(scales[i]),
                               sizeof(float), stepStream()));
      scales[i] = reinterpret_cast<const float *>(slot);
    }
  }
  out = LtScales{scales[0], scales[1]};
  return Status::success();
}

Status createPlan(const Problem &p, const LtProblem &lt, bool fp8,
                  const LtScales &scales, const LtSession &session,
                  Plan &plan) {
  cublasLtMatmulDesc_t desc = nullptr;
  // FP32 accumulation and f32 alpha/beta for every input type.
  // CUBLAS_COMPUTE_32F never uses TF32 (CUBLAS_COMPUTE_32F_FAST_TF32 would).
  DS_RETURN_IF_ERROR(
      DS_LT(cublasLtMatmulDescCreate, &desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  plan.desc.reset(desc);
  DS_RETURN_IF_ERROR(setDescAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                      static_cast<int32_t>(lt.lfirst.op)));
  DS_RETURN_IF_ERROR(setDescAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                      static_cast<int32_t>(lt.lsecond.op)));
  if (fp8) {
    // Keep promoting partial sums to FP32: no fast accumulation. The scales
    // are set before the heuristic, as the algorithm may depend on them.
    DS_RETURN_IF_ERROR(
        setDescAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, int8_t(0)));
    DS_RETURN_IF_ERROR(setScales(desc, scales));
  }
  if (p.bias) {
    // D = sum + bias[row of D], a vector of D's type (cuBLASLt's default
    // for bf16 and f16 D, set anyway), broadcast over the batches. The
    // heuristic takes the pointer's alignment from its value.
    DS_RETURN_IF_ERROR(setDescAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                        uint32_t(CUBLASLT_EPILOGUE_BIAS)));
    DS_RETURN_IF_ERROR(
        setDescAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                         static_cast<int32_t>(dataType(p.typeC))));
    DS_RETURN_IF_ERROR(
        setDescAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias));
  }
  DS_RETURN_IF_ERROR(createLayout(lt.typeFirst, lt.lfirst, plan.first));
  DS_RETURN_IF_ERROR(createLayout(lt.typeSecond, lt.lsecond, plan.second));
  // C (read only with beta != 0, never here) and D share D's layout.
  DS_RETURN_IF_ERROR(createLayout(p.typeC, lt.d, plan.d));

  cublasLtMatmulPreference_t rawPref = nullptr;
  DS_RETURN_IF_ERROR(DS_LT(cublasLtMatmulPreferenceCreate, &rawPref));
  MatmulPreference pref(rawPref);
  uint64_t workspace = session.workspaceBytes;
  DS_RETURN_IF_ERROR(DS_LT(cublasLtMatmulPreferenceSetAttribute, rawPref,
                           CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                           sizeof(workspace)));
  // The heuristic assumes 256-byte aligned pointers unless told otherwise,
  // and a kernel relying on that would fault on a view into a buffer.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, const void *>
      alignments[] = {{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, lt.first},
                      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, lt.second},
                      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, lt.dData},
                      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, lt.dData}};
  for (const auto &[attribute, ptr] : alignments) {
    uint32_t alignment = alignmentOf(ptr);
    DS_RETURN_IF_ERROR(DS_LT(cublasLtMatmulPreferenceSetAttribute, rawPref,
                             attribute, &alignment, sizeof(alignment)));
  }

  cublasLtMatmulHeuristicResult_t result;
  std::memset(&result, 0, sizeof(result));
  int found = 0;
  DS_RETURN_IF_ERROR(DS_LT(cublasLtMatmulAlgoGetHeuristic, session.handle, desc,
                           plan.first.get(), plan.second.get(), plan.d.get(),
                           plan.d.get(), rawPref, 1, &result, &found));
  if (found < 1)
    return DS_ERROR("%s: cuBLASLt has no algorithm for this %s x %s GEMM "
                    "(M=%lld N=%lld K=%lld, %lld batches); %s",
                    p.fn, elementName(p.typeA), elementName(p.typeB),
                    static_cast<long long>(p.m), static_cast<long long>(p.n),
                    static_cast<long long>(p.k),
                    static_cast<long long>(p.batches), p.shapes);
  plan.algo = result.algo;
  return Status::success();
}

/// C = 0 for K == 0 (an empty sum; beta = 0), one 2-D memset per batch
/// (+0.0 is all zero bits in every C type).
Status zeroFill(const LtProblem &lt, Element typeC) {
  int64_t bytes = elementBytes(typeC);
  for (int64_t batch = 0; batch < lt.d.batches; ++batch) {
    auto dst = reinterpret_cast<CUdeviceptr>(static_cast<char *>(lt.dData) +
                                             batch * lt.d.batchStride * bytes);
    size_t pitch = static_cast<size_t>(lt.d.ld * bytes);
    size_t width = static_cast<size_t>(lt.d.rows);
    size_t height = static_cast<size_t>(lt.d.cols);
    DS_RETURN_IF_ERROR(bytes == 4 ? DS_CU(cuMemsetD2D32Async, dst, pitch, 0u,
                                          width, height, stepStream())
                                  : DS_CU(cuMemsetD2D16Async, dst, pitch,
                                          static_cast<uint16_t>(0), width,
                                          height, stepStream()));
  }
  return Status::success();
}

/// The C types cuBLASLt's FP32-accumulating GEMMs write: f32 for every
/// operand type; bf16 for bf16 and FP8 operands, f16 for f16 and FP8 ones
/// (its matmul type table; C and D share the type).
Status checkOutputType(const Problem &p) {
  bool fp8 = p.typeA == Element::E4M3 || p.typeA == Element::E5M2;
  bool ok = p.typeC == Element::F32 ||
            (p.typeC == Element::BF16 && (fp8 || p.typeA == Element::BF16)) ||
            (p.typeC == Element::F16 && (fp8 || p.typeA == Element::F16));
  if (ok)
    return Status::success();
  return DS_ERROR("%s: cuBLASLt has no %s x %s GEMM writing %s (f32 always; "
                  "bf16 from bf16 or FP8 operands, f16 from f16 or FP8)",
                  p.fn, elementName(p.typeA), elementName(p.typeB),
                  elementName(p.typeC));
}

/// A GEMM's name in a profile: "cublasLt e4m3 x e4m3 -> bf16 MxNxK[xB]".
std::string profileName(const Problem &p) {
  char name[128];
  std::snprintf(name, sizeof(name), "cublasLt %s x %s -> %s %lldx%lldx%lld",
                elementName(p.typeA), elementName(p.typeB),
                elementName(p.typeC), static_cast<long long>(p.m),
                static_cast<long long>(p.n), static_cast<long long>(p.k));
  std::string out = name;
  if (p.batches > 1)
    out += "x" + std::to_string(p.batches);
  if (p.bias)
    out += " +bias";
  return out;
}

/// Checks, maps and enqueues one problem.
Status run(Problem &p, bool fp8) {
  DS_RETURN_IF_ERROR(checkOutputType(p));
  if (p.batches == 0 || p.m == 0 || p.n == 0)
    return Status::success();
  DS_RETURN_IF_ERROR(ensureReady());
  if (fp8) {
    if (p.typeA == Element::E5M2 && p.typeB == Element::E5M2)
      return DS_ERROR("%s: FP8 GEMMs with E5M2 x E5M2 operands are not "
                      "supported by cuBLASLt; make A or B E4M3",
                      p.fn);
    if (computeCapability() < 89)
      return DS_ERROR("FP8 GEMMs need sm_89 or newer; this device is sm_%d",
                      computeCapability());
    if (p.m % 16 || p.n % 16 || p.k % 16)
      return DS_ERROR("%s: FP8 GEMMs need M, N and K multiples of 16; got "
                      "M=%lld N=%lld K=%lld",
                      p.fn, static_cast<long long>(p.m),
                      static_cast<long long>(p.n), static_cast<long long>(p.k));
  }
  LtProblem lt;
  if (p.k == 0 && p.bias)
    return DS_ERROR("%s: K = 0 with a bias (C would be the bias broadcast, "
                    "which is no GEMM); %s",
                    p.fn, p.shapes);
  if (p.k == 0) {
    // Only C matters; map with trivially valid operands.
    View unit{nullptr, p.batches, 1, 1, 0, 1, 1};
    Problem zero = p;
    zero.a = unit;
    zero.b = unit;
    zero.k = 1;
    DS_RETURN_IF_ERROR(mapProblem(zero, false, lt));
    return zeroFill(lt, p.typeC);
  }
  DS_RETURN_IF_ERROR(mapProblem(p, fp8, lt));
  // cuBLASLt adds the bias along D's rows, C's columns in the C^T
  // orientation only.
  if (p.bias && !lt.swapped)
    return DS_ERROR("%s: a bias needs C unit-strided along N (cuBLASLt adds "
                    "it along the rows of its column-major D); %s",
                    p.fn, p.shapes);

  std::lock_guard<std::mutex> lock(gemmMutex);
  LtSession *session = nullptr;
  DS_RETURN_IF_ERROR(ltSession(session));
  bool scaled = fp8 && (p.scaleA || p.scaleB);
  LtScales scales;
  if (scaled)
    DS_RETURN_IF_ERROR(alignScales(p, lt, *session, scales));
  PlanKey key = keyOf(lt, p.typeC, scaled, p.bias);
  auto it = plans.find(key);
  if (it == plans.end()) {
    auto plan = std::make_unique<Plan>();
    DS_RETURN_IF_ERROR(createPlan(p, lt, fp8, scales, *session, *plan));
    if (plans.size() >= kMaxPlans)
      plans.clear();
    it = plans.emplace(key, std::move(plan)).first;
  }
  Plan &plan = *it->second;
  if (fp8)
    DS_RETURN_IF_ERROR(setScales(plan.desc.get(), scales));
  if (p.bias)
    DS_RETURN_IF_ERROR(setDescAttribute(
        plan.desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias));
  ProfiledWork work(profiling() ? profileName(p) : std::string());
  counters().gemms.fetch_add(1, std::memory_order_relaxed);
  counters().gemmFlops.fetch_add(uint64_t(2 * p.batches * p.m * p.n * p.k),
                                 std::memory_order_relaxed);
  const float alpha = 1.0f, beta = 0.0f;
  return DS_LT(cublasLtMatmul, session->handle, plan.desc.get(), &alpha,
               lt.first, plan.first.get(), lt.second, plan.second.get(), &beta,
               lt.dData, plan.d.get(), lt.dData, plan.d.get(), &plan.algo,
               reinterpret_cast<void *>(session->workspace),
               session->workspaceBytes, stepStream());
}

/// The bias of `p` from its descriptor: N elements of C's type, unit
/// stride (any stride for N <= 1).
Status checkBias(const dsrt_memref1_raw *bias, Problem &p) {
  if (!bias)
    return DS_ERROR("%s: the descriptor of the bias is null", p.fn);
  if (bias->offset < 0 || bias->sizes[0] != p.n ||
      (p.n > 1 && bias->strides[0] != 1) || (p.n > 0 && !bias->aligned))
    return DS_ERROR("%s: the bias must be %lld contiguous elements of C's type "
                    "(one per column of C); got size %lld, stride %lld, "
                    "offset %lld%s",
                    p.fn, static_cast<long long>(p.n),
                    static_cast<long long>(bias->sizes[0]),
                    static_cast<long long>(bias->strides[0]),
                    static_cast<long long>(bias->offset),
                    bias->aligned ? "" : ", null data");
  if (p.n > 0)
    p.bias = static_cast<const char *>(bias->aligned) +
             bias->offset * elementBytes(p.typeC);
  return Status::success();
}

template <typename DA, typename DC>
void matmul(const char *fn, DA *a, DA *b, DC *c, int64_t transA, int64_t transB,
            Element typeA, Element typeB, bool fp8,
            const float *scaleA = nullptr, const float *scaleB = nullptr,
            Element typeC = Element::F32,
            const dsrt_memref1_raw *bias = nullptr, bool biased = false) {
  Memref3 ma, mb, mc;
  if (a)
    ma = toMemref3(*a);
  if (b)
    mb = toMemref3(*b);
  if (c)
    mc = toMemref3(*c);
  Problem p;
  if (buildProblem(fn, a ? &ma : nullptr, b ? &mb : nullptr, c ? &mc : nullptr,
                   transA != 0, transB != 0, typeA, typeB, typeC, p)
          .failed())
    return;
  p.scaleA = scaleA;
  p.scaleB = scaleB;
  if (biased && checkBias(bias, p).failed())
    return;
  (void)run(p, fp8);
}

bool fp8Element(int64_t type, const char *fn, const char *operand,
                Element &out) {
  if (type == DSRT_FP8_E4M3 || type == DSRT_FP8_E5M2) {
    out = type == DSRT_FP8_E4M3 ? Element::E4M3 : Element::E5M2;
    return true;
  }
  (void)DS_ERROR("%s: %s type %lld is not an FP8 format (0 = E4M3, 1 = E5M2)",
                 fn, operand, static_cast<long long>(type));
  return false;
}

} // namespace

void dsrt::cuda::clearMatmulPlans() {
  std::lock_guard<std::mutex> lock(gemmMutex);
  plans.clear();
}

//===----------------------------------------------------------------------===//
// C ABI
//===----------------------------------------------------------------------===//

void _mlir_ciface_dsrt_cuda_matmul_f32(dsrt_memref3_f32 *a, dsrt_memref3_f32 *b,
                                       dsrt_memref3_f32 *c, int64_t transA,
                                       int64_t transB) {
  matmul("dsrt_cuda_matmul_f32", a, b, c, transA, transB, Element::F32,
         Element::F32, false);
}

void _mlir_ciface_dsrt_cuda_matmul_bf16(dsrt_memref3_raw *a,
                                        dsrt_memref3_raw *b,
                                        dsrt_memref3_f32 *c, int64_t transA,
                                        int64_t transB) {
  matmul("dsrt_cuda_matmul_bf16", a, b, c, transA, transB, Element::BF16,
         Element::BF16, false);
}

void _mlir_ciface_dsrt_cuda_matmul_f16(dsrt_memref3_raw *a, dsrt_memref3_raw *b,
                                       dsrt_memref3_f32 *c, int64_t transA,
                                       int64_t transB) {
  matmul("dsrt_cuda_matmul_f16", a, b, c, transA, transB, Element::F16,
         Element::F16, false);
}

void _mlir_ciface_dsrt_cuda_matmul_bf16_to_bf16(dsrt_memref3_raw *a,
                                                dsrt_memref3_raw *b,
                                                dsrt_memref3_raw *c,
                                                int64_t transA,
                                                int64_t transB) {
  matmul("dsrt_cuda_matmul_bf16_to_bf16", a, b, c, transA, transB,
         Element::BF16, Element::BF16, false, nullptr, nullptr, Element::BF16);
}

void _mlir_ciface_dsrt_cuda_matmul_f16_to_f16(dsrt_memref3_raw *a,
                                              dsrt_memref3_raw *b,
                                              dsrt_memref3_raw *c,
                                              int64_t transA, int64_t transB) {
  matmul("dsrt_cuda_matmul_f16_to_f16", a, b, c, transA, transB, Element::F16,
         Element::F16, false, nullptr, nullptr, Element::F16);
}

void _mlir_ciface_dsrt_cuda_matmul_f8(dsrt_memref3_raw *a, dsrt_memref3_raw *b,
                                      dsrt_memref3_f32 *c, int64_t transA,
                                      int64_t transB, int64_t aType,
                                      int64_t bType, float *aScale,
                                      float *bScale) {
  const char *fn = "dsrt_cuda_matmul_f8";
  Element typeA, typeB;
  if (!fp8Element(aType, fn, "A", typeA) || !fp8Element(bType, fn, "B", typeB))
    return;
  matmul(fn, a, b, c, transA, transB, typeA, typeB, true, aScale, bScale);
}

void _mlir_ciface_dsrt_cuda_matmul_e5m2_e4m3(dsrt_memref3_raw *a,
                                             dsrt_memref3_raw *b,
                                             dsrt_memref3_f32 *c,
                                             int64_t transA, int64_t transB,
                                             float *aScale, float *bScale) {
  matmul("dsrt_cuda_matmul_e5m2_e4m3", a, b, c, transA, transB, Element::E5M2,
         Element::E4M3, true, aScale, bScale);
}

void _mlir_ciface_dsrt_cuda_matmul_e4m3_e5m2(dsrt_memref3_raw *a,
                                             dsrt_memref3_raw *b,
                                             dsrt_memref3_f32 *c,
                                             int64_t transA, int64_t transB,
                                             float *aScale, float *bScale) {
  matmul("dsrt_cuda_matmul_e4m3_e5m2", a, b, c, transA, transB, Element::E4M3,
         Element::E5M2, true, aScale, bScale);
}

void _mlir_ciface_dsrt_cuda_matmul_f8_to_bf16(dsrt_memref3_raw *a,
                                              dsrt_memref3_raw *b,
                                              dsrt_memref3_raw *c,
                                              int64_t transA, int64_t transB,
                                              int64_t aType, int64_t bType,
                                              float *aScale, float *bScale) {
  const char *fn = "dsrt_cuda_matmul_f8_to_bf16";
  Element typeA, typeB;
  if (!fp8Element(aType, fn, "A", typeA) || !fp8Element(bType, fn, "B", typeB))
    return;
  matmul(fn, a, b, c, transA, transB, typeA, typeB, true, aScale, bScale,
         Element::BF16);
}

void _mlir_ciface_dsrt_cuda_matmul_e5m2_e4m3_to_bf16(
    dsrt_memref3_raw *a, dsrt_memref3_raw *b, dsrt_memref3_raw *c,
    int64_t transA, int64_t transB, float *aScale, float *bScale) {
  matmul("dsrt_cuda_matmul_e5m2_e4m3_to_bf16", a, b, c, transA, transB,
         Element::E5M2, Element::E4M3, true, aScale, bScale, Element::BF16);
}

void _mlir_ciface_dsrt_cuda_matmul_e4m3_e5m2_to_bf16(
    dsrt_memref3_raw *a, dsrt_memref3_raw *b, dsrt_memref3_raw *c,
    int64_t transA, int64_t transB, float *aScale, float *bScale) {
  matmul("dsrt_cuda_matmul_e4m3_e5m2_to_bf16", a, b, c, transA, transB,
         Element::E4M3, Element::E5M2, true, aScale, bScale, Element::BF16);
}

void _mlir_ciface_dsrt_cuda_matmul_bf16_to_bf16_bias(
    dsrt_memref3_raw *a, dsrt_memref3_raw *b, dsrt_memref3_raw *c,
    int64_t transA, int64_t transB, dsrt_memref1_raw *bias) {
  matmul("dsrt_cuda_matmul_bf16_to_bf16_bias", a, b, c, transA, transB,
         Element::BF16, Element::BF16, false, nullptr, nullptr, Element::BF16,
         bias, true);
}

void _mlir_ciface_dsrt_cuda_matmul_f16_to_f16_bias(
    dsrt_memref3_raw *a, dsrt_memref3_raw *b, dsrt_memref3_raw *c,
    int64_t transA, int64_t transB, dsrt_memref1_raw *bias) {
  matmul("dsrt_cuda_matmul_f16_to_f16_bias", a, b, c, transA, transB,
         Element::F16, Element::F16, false, nullptr, nullptr, Element::F16,
         bias, true);
}

void _mlir_ciface_dsrt_cuda_matmul_f8_to_bf16_bias(
    dsrt_memref3_raw *a, dsrt_memref3_raw *b, dsrt_memref3_raw *c,
    int64_t transA, int64_t transB, int64_t aType, int64_t bType, float *aScale,
    float *bScale, dsrt_memref1_raw *bias) {
  const char *fn = "dsrt_cuda_matmul_f8_to_bf16_bias";
  Element typeA, typeB;
  if (!fp8Element(aType, fn, "A", typeA) || !fp8Element(bType, fn, "B", typeB))
    return;
  matmul(fn, a, b, c, transA, transB, typeA, typeB, true, aScale, bScale,
         Element::BF16, bias, true);
}

int dsrt_cuda_gemm(int dtype, int64_t m, int64_t n, int64_t k, const void *a,
                   const void *b, void *c, int transA, int transB,
                   const float *aScale, const float *bScale) {
  const char *fn = "dsrt_cuda_gemm";
  Element type;
  Element typeC = Element::F32;
  if (dtype & DSRT_GEMM_C_BF16) {
    typeC = Element::BF16;
    dtype &= ~DSRT_GEMM_C_BF16;
  }
  switch (dtype) {
  case DSRT_GEMM_F32:
    type = Element::F32;
    break;
  case DSRT_GEMM_BF16:
    type = Element::BF16;
    break;
  case DSRT_GEMM_F16:
    type = Element::F16;
    break;
  case DSRT_GEMM_E4M3:
    type = Element::E4M3;
    break;
  default:
    (void)DS_ERROR("%s: unknown dtype %d (0 f32, 1 bf16, 2 f16, 3 e4m3; "
                   "| 16 for a bf16 C)",
                   fn, dtype);
    return -1;
  }
  if (m < 0 || n < 0 || k < 0) {
    (void)DS_ERROR("%s: negative size (m=%lld n=%lld k=%lld)", fn,
                   static_cast<long long>(m), static_cast<long long>(n),
                   static_cast<long long>(k));
    return -1;
  }
  // Row-major contiguous: the stored shape's last dimension has stride 1.
  auto stored = [](const void *data, int64_t rows, int64_t cols) {
    return Memref3{data, 0, {1, rows, cols}, {rows * cols, cols, 1}};
  };
  Memref3 ma = transA ? stored(a, k, m) : stored(a, m, k);
  Memref3 mb = transB ? stored(b, n, k) : stored(b, k, n);
  Memref3 mc = stored(c, m, n);
  bool fp8 = type == Element::E4M3;
  Problem p;
  if (buildProblem(fn, &ma, &mb, &mc, transA != 0, transB != 0, type, type,
                   typeC, p)
          .failed())
    return -1;
  if (fp8) {
    p.scaleA = aScale;
    p.scaleB = bScale;
  }
  return run(p, fp8).failed() ? -1 : 0;
}
