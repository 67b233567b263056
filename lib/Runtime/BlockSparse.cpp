//===- BlockSparse.cpp - The block-sparse entry points of the C ABI -------===//
//
// _mlir_ciface_dsrt_block_sparse_{matmul,sddmm}_f32 check the descriptors
// against each other, reduce the call to a SparseMatmulProblem or an
// SddmmProblem (BlockSparse.h), pick a kernel and count the call. Checking
// happens before anything is written, so a call that fails leaves its output
// untouched.
//
// The kernel is chosen per call, from DSRT_SPARSE_KERNEL and the CPU:
//
//   auto    dense above the crossover density (below), else the best ISA
//           the CPU has: AVX-512F, AVX2 + FMA, or the portable loops;
//   scalar, avx2, avx512
//           that micro-kernel set (an ISA the CPU lacks is an error);
//   avx512-portable
//           the AVX-512 kernels' source built for the baseline ISA: slow,
//           for tests on CPUs without AVX-512;
//   dense   oneDNN's sgemm: on a masked copy of W for Y = X op(W), and on
//           the full product followed by zeroing the inactive blocks for
//           the SDDMM.
//
// The crossover (benchmarks/runtime/BlockSparseBenchmark.cpp; the AVX2
// kernels against oneDNN's sgemm on an AVX2 EPYC, M = 2048, weights
// 1024x1024, 4096x1024 and 1024x4096): the forward and dX break even at a
// density of about 60-70 % (active blocks / all blocks) and the SDDMM at
// about 70-80 %; above that dense wins, by up to 1.4x at 80 % and more at
// 100 %, the all-ones mask of a regrow step. Auto runs dense from the lower
// end of each range (kMatmulDenseDensity, kSddmmDenseDensity).
//
//===----------------------------------------------------------------------===//

#include "BlockSparse.h"

#include "ds/Runtime/ds_runtime.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

using namespace dsrt;

namespace {

/// Densities (active blocks / all blocks) from which auto runs dense.
constexpr double kMatmulDenseDensity = 0.60;
constexpr double kSddmmDenseDensity = 0.75;

enum class SparseKernel { Auto, Scalar, AVX2, AVX512, AVX512Portable, Dense };

bool cpuHasAVX2() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
bool cpuHasAVX512() { return __builtin_cpu_supports("avx512f"); }

/// DSRT_SPARSE_KERNEL, read per call (a lookup, nothing next to the
/// product); an unknown value, or an ISA this CPU lacks, is an error.
std::optional<SparseKernel> requestedKernel(const char *fn) {
  const char *v = std::getenv("DSRT_SPARSE_KERNEL");
  if (!v || !*v || !std::strcmp(v, "auto"))
    return SparseKernel::Auto;
  if (!std::strcmp(v, "scalar"))
    return SparseKernel::Scalar;
  if (!std::strcmp(v, "dense"))
    return SparseKernel::Dense;
  if (!std::strcmp(v, "avx512-portable"))
    return SparseKernel::AVX512Portable;
  if (!std::strcmp(v, "avx2")) {
    if (cpuHasAVX2())
      return SparseKernel::AVX2;
    (void)DS_ERROR("%s: DSRT_SPARSE_KERNEL=avx2 but this CPU lacks AVX2 or "
                   "FMA",
                   fn);
    return std::nullopt;
  }
  if (!std::strcmp(v, "avx512")) {
    if (cpuHasAVX512())
      return SparseKernel::AVX512;
    (void)DS_ERROR("%s: DSRT_SPARSE_KERNEL=avx512 but this CPU lacks "
                   "AVX-512F",
                   fn);
    return std::nullopt;
  }
  (void)DS_ERROR("%s: DSRT_SPARSE_KERNEL='%s' is not one of auto, scalar, "
                 "avx2, avx512, avx512-portable, dense",
                 fn, v);
  return std::nullopt;
}

/// The kernel a call runs: the request, or for auto the choice by density.
SparseKernel resolveKernel(SparseKernel requested, double density,
                           double denseFrom) {
  if (requested != SparseKernel::Auto)
    return requested;
  if (density >= denseFrom)
    return SparseKernel::Dense;
  if (cpuHasAVX512())
    return SparseKernel::AVX512;
  if (cpuHasAVX2())
    return SparseKernel::AVX2;
  return SparseKernel::Scalar;
}

const SparseKernels &kernelsFor(SparseKernel kernel) {
  switch (kernel) {
  case SparseKernel::AVX512:
    return avx512SparseKernels();
  case SparseKernel::AVX2:
    return avx2SparseKernels();
  case SparseKernel::AVX512Portable:
    return portableAVX512SparseKernels();
  default:
    return scalarSparseKernels();
  }
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

/// Local facts about one descriptor: present, no negative size, offset or
/// stride, and a data pointer when it has elements.
template <typename D>
Status checkDescriptor(const D *m, const char *fn, const char *operand) {
  if (!m)
    return DS_ERROR("%s: the descriptor of %s is null", fn, operand);
  if (m->offset < 0)
    return DS_ERROR("%s: %s has negative offset %lld", fn, operand,
                    static_cast<long long>(m->offset));
  for (int d = 0; d < 2; ++d)
    if (m->sizes[d] < 0 || m->strides[d] < 0)
      return DS_ERROR("%s: %s has negative size or stride in dimension %d "
                      "(size %lld, stride %lld)",
                      fn, operand, d, static_cast<long long>(m->sizes[d]),
                      static_cast<long long>(m->strides[d]));
  if (m->sizes[0] > 0 && m->sizes[1] > 0 && !m->aligned)
    return DS_ERROR("%s: %s has elements but a null data pointer", fn, operand);
  return Status::success();
}

/// The view of a descriptor.
template <typename T, typename D> Matrix<T> viewOf(const D &m) {
  // An empty memref may have a null pointer; never offset it.
  T *data = m.aligned ? m.aligned + m.offset : nullptr;
  return {data, m.sizes[0], m.sizes[1], m.strides[0], m.strides[1]};
}

/// The bytes [first, last) a view can touch; empty for an empty view.
struct ByteRange {
  uintptr_t first = 0, last = 0;
};
template <typename D> ByteRange bytesOf(const D &m) {
  if (m.sizes[0] == 0 || m.sizes[1] == 0)
    return {};
  size_t element = sizeof(*m.aligned);
  int64_t extent = m.offset + (m.sizes[0] - 1) * m.strides[0] +
                   (m.sizes[1] - 1) * m.strides[1];
  uintptr_t base = reinterpret_cast<uintptr_t>(m.aligned);
  return {base + m.offset * element, base + (extent + 1) * element};
}
bool overlap(ByteRange a, ByteRange b) {
  return a.first < a.last && b.first < b.last && a.first < b.last &&
         b.first < a.last;
}

/// An output must neither alias itself (a zero stride on a dimension of
/// size > 1) nor overlap an input's memory.
template <typename... Inputs>
Status checkOutput(const dsrt_memref2_f32 &out, const char *fn,
                   const char *name, const Inputs &...inputs) {
  for (int d = 0; d < 2; ++d)
    if (out.sizes[0] > 0 && out.sizes[1] > 0 && out.sizes[d] > 1 &&
        out.strides[d] == 0)
      return DS_ERROR("%s: %s has stride 0 in dimension %d of size %lld, so "
                      "its elements alias",
                      fn, name, d, static_cast<long long>(out.sizes[d]));
  ByteRange range = bytesOf(out);
  bool overlaps = (overlap(range, bytesOf(inputs)) || ...);
  if (overlaps)
    return DS_ERROR("%s: %s overlaps the memory of an input", fn, name);
  return Status::success();
}

/// The block size, the weight dimensions [r, c] against it, and the mask.
Status checkBlocks(const char *fn, int64_t block, int64_t r, int64_t c,
                   const dsrt_memref2_i8 &mask) {
  if (block <= 0 || block % kSparseBlock != 0)
    return DS_ERROR("%s: block size %lld is not a positive multiple of 8", fn,
                    static_cast<long long>(block));
  for (int64_t dim : {r, c})
    if (dim % block != 0)
      return DS_ERROR("%s: weight dimension %lld is not a multiple of the "
                      "block size %lld",
                      fn, static_cast<long long>(dim),
                      static_cast<long long>(block));
  if (mask.sizes[0] != r / block || mask.sizes[1] != c / block)
    return DS_ERROR(
        "%s: mask is [%lld, %lld] but a weight [%lld, %lld] with "
        "block size %lld needs [%lld, %lld]",
        fn, static_cast<long long>(mask.sizes[0]),
        static_cast<long long>(mask.sizes[1]), static_cast<long long>(r),
        static_cast<long long>(c), static_cast<long long>(block),
        static_cast<long long>(r / block), static_cast<long long>(c / block));
  return Status::success();
}

/// Active 8x8 blocks of the expanded mask.
int64_t activeBlocks(const Matrix<const int8_t> &mask, int64_t block) {
  int64_t active = 0;
  for (int64_t i = 0; i < mask.rows; ++i)
    for (int64_t j = 0; j < mask.cols; ++j)
      active += mask.at(i, j) != 0;
  int64_t scale = block / kSparseBlock;
  return active * scale * scale;
}

//===----------------------------------------------------------------------===//
// Dense fallback
//===----------------------------------------------------------------------===//

/// One oneDNN sgemm, c = a * b, through the batched GEMM (any strides).
Status denseGemm(Matrix<const float> a, Matrix<const float> b,
                 Matrix<float> c) {
  GemmProblem<float> gemm{{a, 1, 0}, {b, 1, 0}, {c, 1, 0}, 1,
                          c.rows,    c.cols,    a.cols};
  return runGemmF32(gemm);
}

/// Copies the active blocks of `src` (rows x cols, whose block mask is
/// `mask`) into the row-major `dst` and zeroes the others, which also drops
/// whatever the inactive blocks of `src` hold.
void copyMasked(const Matrix<const float> &src,
                const Matrix<const int8_t> &mask, int64_t block, float *dst,
                int threads) {
  parallelFor(src.rows, threads, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float *row = dst + i * src.cols;
      for (int64_t q = 0; q < mask.cols; ++q) {
        bool on = mask.at(i / block, q) != 0;
        for (int64_t j = q * block; j < (q + 1) * block; ++j)
          row[j] = on ? src.at(i, j) : 0.0f;
      }
    }
  });
}

/// Y = X * (op(W) * expand(mask)) as a dense GEMM on a masked copy of the
/// weight, made along W's unit stride (the GEMM takes either orientation).
Status denseMatmul(const SparseMatmulProblem &p, int threads) {
  int64_t k = p.b.rows, n = p.b.cols;
  Buffer<float> masked = allocateBuffer<float>(k * n, "masked weight");
  if (!masked)
    return Status::failure();
  if (p.b.rowStride == 1 && p.b.colStride != 1) {
    // op(W) is a transposed view (the forward): copy W itself, [n, k].
    copyMasked(p.b.transposed(), p.mask.transposed(), p.block, masked.get(),
               threads);
    return denseGemm(p.x, {masked.get(), k, n, 1, k}, p.y);
  }
  copyMasked(p.b, p.mask, p.block, masked.get(), threads);
  return denseGemm(p.x, {masked.get(), k, n, n, 1}, p.y);
}

/// D = A^T B on every block, then the inactive blocks zeroed.
Status denseSddmm(const SddmmProblem &p, int threads) {
  DS_RETURN_IF_ERROR(denseGemm(p.a.transposed(), p.b, p.d));
  parallelFor(p.d.rows, threads, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      for (int64_t q = 0; q < p.mask.cols; ++q)
        if (p.mask.at(i / p.block, q) == 0)
          for (int64_t j = q * p.block; j < (q + 1) * p.block; ++j)
            p.d.at(i, j) = 0.0f;
  });
  return Status::success();
}

void zeroFill(const Matrix<float> &m) {
  for (int64_t i = 0; i < m.rows; ++i)
    for (int64_t j = 0; j < m.cols; ++j)
      m.at(i, j) = 0.0f;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

//===----------------------------------------------------------------------===//
// Calls
//===----------------------------------------------------------------------===//

constexpr const char *kMatmulName = "block-sparse matmul";
constexpr const char *kSddmmName = "block-sparse sddmm";

Status checkMatmul(const dsrt_memref2_f32 *x, const dsrt_memref2_f32 *w,
                   const dsrt_memref2_i8 *mask, const dsrt_memref2_f32 *y,
                   bool transW, int64_t block) {
  const char *fn = kMatmulName;
  DS_RETURN_IF_ERROR(checkDescriptor(x, fn, "X"));
  DS_RETURN_IF_ERROR(checkDescriptor(w, fn, "W"));
  DS_RETURN_IF_ERROR(checkDescriptor(mask, fn, "the mask"));
  DS_RETURN_IF_ERROR(checkDescriptor(y, fn, "Y"));
  int64_t r = w->sizes[0], c = w->sizes[1];
  DS_RETURN_IF_ERROR(checkBlocks(fn, block, r, c, *mask));
  // Y[M, N] = X[M, K] * op(W)[K, N].
  int64_t k = transW ? c : r, n = transW ? r : c;
  if (x->sizes[1] != k)
    return DS_ERROR("%s: X is [%lld, %lld] but W [%lld, %lld] (transW = %d) "
                    "contracts over %lld",
                    fn, static_cast<long long>(x->sizes[0]),
                    static_cast<long long>(x->sizes[1]),
                    static_cast<long long>(r), static_cast<long long>(c),
                    transW, static_cast<long long>(k));
  if (y->sizes[0] != x->sizes[0] || y->sizes[1] != n)
    return DS_ERROR("%s: Y is [%lld, %lld] but X [%lld, %lld] times W "
                    "[%lld, %lld] (transW = %d) is [%lld, %lld]",
                    fn, static_cast<long long>(y->sizes[0]),
                    static_cast<long long>(y->sizes[1]),
                    static_cast<long long>(x->sizes[0]),
                    static_cast<long long>(x->sizes[1]),
                    static_cast<long long>(r), static_cast<long long>(c),
                    transW, static_cast<long long>(x->sizes[0]),
                    static_cast<long long>(n));
  return checkOutput(*y, fn, "Y", *x, *w, *mask);
}

Status checkSddmm(const dsrt_memref2_f32 *a, const dsrt_memref2_f32 *b,
                  const dsrt_memref2_i8 *mask, const dsrt_memref2_f32 *d,
                  int64_t block) {
  const char *fn = kSddmmName;
  DS_RETURN_IF_ERROR(checkDescriptor(a, fn, "A"));
  DS_RETURN_IF_ERROR(checkDescriptor(b, fn, "B"));
  DS_RETURN_IF_ERROR(checkDescriptor(mask, fn, "the mask"));
  DS_RETURN_IF_ERROR(checkDescriptor(d, fn, "D"));
  int64_t r = d->sizes[0], c = d->sizes[1];
  DS_RETURN_IF_ERROR(checkBlocks(fn, block, r, c, *mask));
  if (a->sizes[1] != r || b->sizes[1] != c || a->sizes[0] != b->sizes[0])
    return DS_ERROR("%s: A [%lld, %lld] and B [%lld, %lld] do not give "
                    "A^T B of D's shape [%lld, %lld]",
                    fn, static_cast<long long>(a->sizes[0]),
                    static_cast<long long>(a->sizes[1]),
                    static_cast<long long>(b->sizes[0]),
                    static_cast<long long>(b->sizes[1]),
                    static_cast<long long>(r), static_cast<long long>(c));
  return checkOutput(*d, fn, "D", *a, *b, *mask);
}

void blockSparseMatmul(const dsrt_memref2_f32 *x, const dsrt_memref2_f32 *w,
                       const dsrt_memref2_i8 *mask, const dsrt_memref2_f32 *y,
                       bool transW, int64_t block) {
  auto start = std::chrono::steady_clock::now();
  if (checkMatmul(x, w, mask, y, transW, block).failed())
    return;
  std::optional<SparseKernel> requested = requestedKernel(kMatmulName);
  if (!requested)
    return;

  Matrix<const float> weight = viewOf<const float>(*w);
  Matrix<const int8_t> maskView = viewOf<const int8_t>(*mask);
  SparseMatmulProblem p{
      viewOf<const float>(*x), transW ? weight.transposed() : weight,
      transW ? maskView.transposed() : maskView, viewOf<float>(*y), block};
  int64_t m = p.x.rows, k = p.b.rows, n = p.b.cols;
  int64_t active = activeBlocks(maskView, block);
  int64_t all = (k / kSparseBlock) * (n / kSparseBlock);
  double density = all ? double(active) / double(all) : 0.0;
  SparseKernel kernel = resolveKernel(*requested, density, kMatmulDenseDensity);

  int threads = numThreads();
  applyThreadsToCaller();
  bool ranDense = false;
  if (m > 0 && n > 0) {
    if (k == 0) {
      zeroFill(p.y);
    } else if (kernel == SparseKernel::Dense) {
      if (denseMatmul(p, threads).failed())
        return;
      ranDense = true;
    } else if (runSparseMatmul(p, kernelsFor(kernel), threads).failed()) {
      return;
    }
  }
  recordSparse(2.0 * double(m) * double(active) * 64.0,
               2.0 * double(m) * double(k) * double(n), secondsSince(start),
               ranDense);
}

void blockSparseSddmm(const dsrt_memref2_f32 *a, const dsrt_memref2_f32 *b,
                      const dsrt_memref2_i8 *mask, const dsrt_memref2_f32 *d,
                      int64_t block) {
  auto start = std::chrono::steady_clock::now();
  if (checkSddmm(a, b, mask, d, block).failed())
    return;
  std::optional<SparseKernel> requested = requestedKernel(kSddmmName);
  if (!requested)
    return;

  SddmmProblem p{viewOf<const float>(*a), viewOf<const float>(*b),
                 viewOf<const int8_t>(*mask), viewOf<float>(*d), block};
  int64_t m = p.a.rows, r = p.d.rows, c = p.d.cols;
  int64_t active = activeBlocks(p.mask, block);
  int64_t all = (r / kSparseBlock) * (c / kSparseBlock);
  double density = all ? double(active) / double(all) : 0.0;
  SparseKernel kernel = resolveKernel(*requested, density, kSddmmDenseDensity);

  int threads = numThreads();
  applyThreadsToCaller();
  bool ranDense = false;
  if (r > 0 && c > 0) {
    if (m == 0) {
      zeroFill(p.d);
    } else if (kernel == SparseKernel::Dense) {
      if (denseSddmm(p, threads).failed())
        return;
      ranDense = true;
    } else if (runSparseSddmm(p, kernelsFor(kernel), threads).failed()) {
      return;
    }
  }
  recordSparse(2.0 * double(m) * double(active) * 64.0,
               2.0 * double(m) * double(r) * double(c), secondsSince(start),
               ranDense);
}

} // namespace

void _mlir_ciface_dsrt_block_sparse_matmul_f32(dsrt_memref2_f32 *x,
                                               dsrt_memref2_f32 *w,
                                               dsrt_memref2_i8 *mask,
                                               dsrt_memref2_f32 *y,
                                               int64_t transW, int64_t block) {
  blockSparseMatmul(x, w, mask, y, transW != 0, block);
}

void _mlir_ciface_dsrt_block_sparse_sddmm_f32(dsrt_memref2_f32 *a,
                                              dsrt_memref2_f32 *b,
                                              dsrt_memref2_i8 *mask,
                                              dsrt_memref2_f32 *d,
                                              int64_t block) {
  blockSparseSddmm(a, b, mask, d, block);
}
