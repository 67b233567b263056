//===- GemmS8.cpp - Exact int8 x int8 -> int32 batched GEMM ---------------===//
//
// The GEMM of quantized inference. oneDNN's integer GEMMs are fast, but on
// CPUs without VNNI they multiply u8 x s8 pairs with vpmaddubsw, whose int16
// sums saturate (oneDNN's "Nuances of int8 computations"; torch.ao's x86
// qconfig uses 7-bit activations, reduce_range, for this reason). Machines of
// this project's kind differ (some are AVX2-only AMD EPYCs), so the kernel is
// chosen per call:
//
//   - oneDNN reports a VNNI ISA: dnnl_gemm_s8s8s32 (vpdpbusd accumulates
//     in int32; nothing saturates);
//   - every element of A is in [0, 127]: dnnl_gemm_u8s8s32 on A's bytes as
//     they are (a pair sums to at most 2 * 127 * 128 = 32512 < 2^15);
//   - otherwise: A split into 7-bit halves, two u8 x s8 GEMMs: with
//     u = A + 128 = 2h + l (h in [0, 127], l in {0, 1}),
//     A B = 2 (h B) + (l B) - 128 colsum(B), each product safe as above;
//   - or (forced only) widening loops, int8 -> int16 products summed in
//     int32 (pmaddwd cannot saturate), compiled for several ISAs and
//     dispatched at run time: the reference the others are tested against.
//
// DSRT_INT8_GEMM=onednn|split|widening forces a kernel (tests use it).
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"

#include "ds/Runtime/ds_runtime.h"

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>

using namespace dsrt;

namespace {

enum class Int8Kernel { Auto, OneDNN, Split, Widening };

/// DSRT_INT8_GEMM, read per call (a lookup, nothing next to a GEMM); an
/// unknown value is refused with an error.
std::optional<Int8Kernel> forcedKernel() {
  const char *v = std::getenv("DSRT_INT8_GEMM");
  if (!v || !*v || !std::strcmp(v, "auto"))
    return Int8Kernel::Auto;
  if (!std::strcmp(v, "onednn"))
    return Int8Kernel::OneDNN;
  if (!std::strcmp(v, "split"))
    return Int8Kernel::Split;
  if (!std::strcmp(v, "widening"))
    return Int8Kernel::Widening;
  (void)DS_ERROR("dsrt_matmul_s8s8s32: DSRT_INT8_GEMM='%s' is not one of "
                 "auto, onednn, split, widening",
                 v);
  return std::nullopt;
}

bool oneDNNHasVNNI() {
  static const bool vnni = [] {
    unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
    // The VNNI bits of dnnl_cpu_isa_avx512_core_vnni (and every ISA above
    // it) and of dnnl_cpu_isa_avx2_vnni.
    unsigned avx512Vnni = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_vnni) &
                          ~static_cast<unsigned>(dnnl_cpu_isa_avx512_core);
    unsigned avx2Vnni = static_cast<unsigned>(dnnl_cpu_isa_avx2_vnni) &
                        ~static_cast<unsigned>(dnnl_cpu_isa_avx2);
    return (isa & avx512Vnni) != 0 || (isa & avx2Vnni) != 0;
  }();
  return vnni;
}

/// Whether every element of every batch of A lies in [0, 127].
bool allSevenBit(const GemmProblem<int8_t, int32_t> &p) {
  int64_t batches = p.a.invariant() ? 1 : p.batches;
  for (int64_t b = 0; b < batches; ++b) {
    Matrix<const int8_t> a = p.a[b];
    for (int64_t i = 0; i < a.rows; ++i)
      for (int64_t j = 0; j < a.cols; ++j)
        if (a.at(i, j) < 0)
          return false;
  }
  return true;
}

/// sum_k a[k] * b[k] in int32, from int16 rows (each product and each pair
/// sum fits int32 exactly). Cloned per ISA; the loader picks the best.
__attribute__((target_clones("avx512bw", "avx2", "default"))) int32_t
dotWidened(const int16_t *a, const int16_t *b, int64_t k) {
  int32_t sum = 0;
  for (int64_t i = 0; i < k; ++i)
    sum += int32_t(a[i]) * int32_t(b[i]);
  return sum;
}

/// C = A * B on widening loops: A's rows and B's columns are copied to
/// contiguous int16 rows once, then every C element is one dot product.
Status runWidening(const GemmProblem<int8_t, int32_t> &p) {
  Buffer<int16_t> a16 = allocateBuffer<int16_t>(p.m * p.k, "widened A");
  Buffer<int16_t> bt16 = allocateBuffer<int16_t>(p.n * p.k, "widened B");
  if (!a16 || !bt16)
    return Status::failure();
  int threads = numThreads();
  for (int64_t b = 0; b < p.batches; ++b) {
    Matrix<const int8_t> a = p.a[b], bm = p.b[b];
    Matrix<int32_t> c = p.c[b];
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t k = 0; k < p.k; ++k)
        a16[i * p.k + k] = a.at(i, k);
    if (b == 0 || !p.b.invariant())
      for (int64_t j = 0; j < p.n; ++j)
        for (int64_t k = 0; k < p.k; ++k)
          bt16[j * p.k + k] = bm.at(k, j);
    parallelFor(p.m, threads, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        for (int64_t j = 0; j < p.n; ++j)
          c.at(i, j) = dotWidened(&a16[i * p.k], &bt16[j * p.k], p.k);
    });
  }
  return Status::success();
}

/// C = A * B on oneDNN: u8 x s8 when `sevenBitA`, else s8 x s8.
Status runOneDNN(const GemmProblem<int8_t, int32_t> &problem, bool sevenBitA) {
  GemmProblem<int8_t, int32_t> p = problem;
  if (planLayout(p.c.first).layout == Layout::ColMajor && !sevenBitA) {
    // C^T = B^T A^T is row-major (only for s8 x s8: the u8 operand must
    // stay first).
    BatchedMatrix<const int8_t> a = p.a;
    p.a = p.b.transposed();
    p.b = a.transposed();
    p.c = p.c.transposed();
    std::swap(p.m, p.n);
  }
  LayoutPlan aPlan = planLayout(p.a.first), bPlan = planLayout(p.b.first);
  LayoutPlan cPlan = planLayout(p.c.first);
  Buffer<int8_t> aScratch, bScratch;
  Buffer<int32_t> cScratch;
  if ((aPlan.layout == Layout::Packed &&
       !(aScratch = allocateBuffer<int8_t>(p.m * p.k, "packed A"))) ||
      (bPlan.layout == Layout::Packed &&
       !(bScratch = allocateBuffer<int8_t>(p.k * p.n, "packed B"))) ||
      (cPlan.layout != Layout::RowMajor &&
       !(cScratch = allocateBuffer<int32_t>(p.m * p.n, "packed C"))))
    return Status::failure();
  int64_t ldc = cScratch ? std::max<int64_t>(1, p.n) : cPlan.ld;
  applyThreadsToCaller();
  const int32_t zero = 0;
  for (int64_t b = 0; b < p.batches; ++b) {
    GemmInput<int8_t> a = present(p.a[b], aPlan, aScratch.get());
    GemmInput<int8_t> bIn = present(p.b[b], bPlan, bScratch.get());
    Matrix<int32_t> c = p.c[b];
    int32_t *cData = cScratch ? cScratch.get() : c.data;
    dnnl_status_t status =
        sevenBitA
            ? dnnl_gemm_u8s8s32(a.trans, bIn.trans, 'F', p.m, p.n, p.k, 1.0f,
                                reinterpret_cast<const uint8_t *>(a.data), a.ld,
                                0, bIn.data, bIn.ld, 0, 0.0f, cData, ldc, &zero)
            : dnnl_gemm_s8s8s32(a.trans, bIn.trans, 'F', p.m, p.n, p.k, 1.0f,
                                a.data, a.ld, 0, bIn.data, bIn.ld, 0, 0.0f,
                                cData, ldc, &zero);
    if (status != dnnl_success)
      return DS_ERROR("dsrt_matmul_s8s8s32: oneDNN %s failed: %s (M = %lld, "
                      "N = %lld, K = %lld)",
                      sevenBitA ? "gemm_u8s8s32" : "gemm_s8s8s32",
                      dnnl_status2str(status), static_cast<long long>(p.m),
                      static_cast<long long>(p.n), static_cast<long long>(p.k));
    if (cScratch)
      unpackRowMajor(cScratch.get(), c);
  }
  return Status::success();
}

/// C = A * B as two 7-bit GEMMs on oneDNN (see the file comment): exact on
/// every CPU, about twice the 7-bit GEMM's time.
Status runSplit(const GemmProblem<int8_t, int32_t> &p) {
  LayoutPlan bPlan = planLayout(p.b.first), cPlan = planLayout(p.c.first);
  Buffer<uint8_t> hi = allocateBuffer<uint8_t>(p.m * p.k, "split A");
  Buffer<uint8_t> lo = allocateBuffer<uint8_t>(p.m * p.k, "split A");
  Buffer<int32_t> cHi = allocateBuffer<int32_t>(p.m * p.n, "split C");
  Buffer<int32_t> offsets = allocateBuffer<int32_t>(p.n, "column sums");
  Buffer<int8_t> bScratch;
  Buffer<int32_t> cScratch;
  if (!hi || !lo || !cHi || !offsets ||
      (bPlan.layout == Layout::Packed &&
       !(bScratch = allocateBuffer<int8_t>(p.k * p.n, "packed B"))) ||
      (cPlan.layout != Layout::RowMajor &&
       !(cScratch = allocateBuffer<int32_t>(p.m * p.n, "packed C"))))
    return Status::failure();
  int64_t ldc = cScratch ? p.n : cPlan.ld;
  applyThreadsToCaller();
  const int32_t zero = 0;
  for (int64_t b = 0; b < p.batches; ++b) {
    Matrix<const int8_t> a = p.a[b], bm = p.b[b];
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t k = 0; k < p.k; ++k) {
        unsigned u = unsigned(int(a.at(i, k)) + 128);
        hi[i * p.k + k] = uint8_t(u >> 1);
        lo[i * p.k + k] = uint8_t(u & 1);
      }
    GemmInput<int8_t> bIn = present(bm, bPlan, bScratch.get());
    if (b == 0 || !p.b.invariant())
      for (int64_t j = 0; j < p.n; ++j) {
        int32_t sum = 0;
        for (int64_t k = 0; k < p.k; ++k)
          sum += bm.at(k, j);
        offsets[j] = -128 * sum;
      }
    Matrix<int32_t> c = p.c[b];
    int32_t *cData = cScratch ? cScratch.get() : c.data;
    // C = l B - 128 colsum(B), then C += 2 (h B).
    dnnl_status_t status = dnnl_gemm_u8s8s32(
        'N', bIn.trans, 'R', p.m, p.n, p.k, 1.0f, lo.get(), p.k, 0, bIn.data,
        bIn.ld, 0, 0.0f, cData, ldc, offsets.get());
    if (status == dnnl_success)
      status = dnnl_gemm_u8s8s32('N', bIn.trans, 'F', p.m, p.n, p.k, 1.0f,
                                 hi.get(), p.k, 0, bIn.data, bIn.ld, 0, 0.0f,
                                 cHi.get(), p.n, &zero);
    if (status != dnnl_success)
      return DS_ERROR("dsrt_matmul_s8s8s32: oneDNN gemm_u8s8s32 failed: %s "
                      "(M = %lld, N = %lld, K = %lld)",
                      dnnl_status2str(status), static_cast<long long>(p.m),
                      static_cast<long long>(p.n), static_cast<long long>(p.k));
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j)
        cData[i * ldc + j] += 2 * cHi[i * p.n + j];
    if (cScratch)
      unpackRowMajor(cScratch.get(), c);
  }
  return Status::success();
}

} // namespace

Status dsrt::runGemmS8(const GemmProblem<int8_t, int32_t> &p) {
  std::optional<Int8Kernel> forced = forcedKernel();
  if (!forced)
    return Status::failure();
  Int8Kernel kernel = *forced;
  bool sevenBitA = allSevenBit(p);
  if (kernel == Int8Kernel::Auto)
    kernel =
        (sevenBitA || oneDNNHasVNNI()) ? Int8Kernel::OneDNN : Int8Kernel::Split;
  Status status = kernel == Int8Kernel::Split      ? runSplit(p)
                  : kernel == Int8Kernel::Widening ? runWidening(p)
                                                   : runOneDNN(p, sevenBitA);
  // The counters cover successful calls only.
  if (!status.failed())
    recordInt8Gemm(kernel != Int8Kernel::OneDNN);
  return status;
}

int dsrt_int8_gemm_has_vnni(void) { return oneDNNHasVNNI() ? 1 : 0; }
