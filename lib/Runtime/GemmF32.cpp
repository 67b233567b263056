//===- GemmF32.cpp - f32 batched GEMM on oneDNN's sgemm -------------------===//
//
// Every batch is one call of dnnl_sgemm, oneDNN's row-major GEMM, which takes
// each operand either as stored or transposed, with a leading dimension. So:
//
//  1. A column-major C is computed as its transpose, C^T = op(B)^T op(A)^T,
//     which is row-major; a C that is neither goes through a packed buffer.
//  2. An input with one unit inner stride is passed as it is (the transpose
//     flag and leading dimension chosen to match); any other input is packed,
//     once per call when it is the same for every batch (a shared B).
//  3. Batches that split evenly over the threads, or small GEMMs, are
//     distributed over the threads, each calling a single-threaded sgemm
//     (inside a parallel region oneDNN runs on the calling thread); other
//     GEMMs run one after another, each on oneDNN's own threads. Both use
//     the same libgomp team (see distributeBatches for the measurements).
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include <atomic>
#include <utility>

using namespace dsrt;

namespace {

/// Whether to give each thread whole GEMMs (oneDNN then runs single-threaded
/// inside the parallel region) rather than give every GEMM all threads.
/// Measured on 2 cores: distributing is 20-40 % faster for small GEMMs
/// (64 x 128x128x64: 0.73 ms against 0.91 ms), as fast for large ones when
/// the batches split evenly, and up to 25 % slower for large ones when they
/// do not (3 x 512^3 on 2 threads).
bool distributeBatches(int64_t batches, int threads, int64_t m, int64_t n,
                       int64_t k) {
  if (threads <= 1 || batches <= 1)
    return false;
  // A parallel region costs microseconds (far more when other processes
  // hold the cores); below about 2^17 multiply-adds in all it does not pay.
  double work = double(m) * double(n) * double(k);
  if (work * double(batches) < double(1 << 17))
    return false;
  // Below about 2^19 per GEMM oneDNN's own threading barely pays.
  if (work <= double(1 << 19))
    return true;
  if (batches < threads)
    return false;
  int64_t rounds = (batches + threads - 1) / threads;
  return double(batches) / double(rounds * threads) >= 0.8;
}

/// Packs an input once per call if it needs packing and is the same for
/// every batch; `shared` stays null otherwise.
Status packShared(const BatchedMatrix<const float> &x, const LayoutPlan &plan,
                  const char *what, Buffer<float> &shared) {
  if (plan.layout != Layout::Packed || !x.invariant())
    return Status::success();
  shared = allocateBuffer<float>(x.first.rows * x.first.cols, what);
  if (!shared)
    return Status::failure();
  packRowMajor(x[0], shared.get());
  return Status::success();
}

} // namespace

Status dsrt::runGemmF32(const GemmProblem<float> &problem) {
  GemmProblem<float> p = problem;
  // 1. Make C row-major if a transpose can.
  if (planLayout(p.c.first).layout == Layout::ColMajor) {
    BatchedMatrix<const float> a = p.a;
    p.a = p.b.transposed();
    p.b = a.transposed();
    p.c = p.c.transposed();
    std::swap(p.m, p.n);
  }
  LayoutPlan aPlan = planLayout(p.a.first);
  LayoutPlan bPlan = planLayout(p.b.first);
  LayoutPlan cPlan = planLayout(p.c.first);

  // 2. Pack what every batch shares.
  Buffer<float> aShared, bShared;
  DS_RETURN_IF_ERROR(packShared(p.a, aPlan, "packed A", aShared));
  DS_RETURN_IF_ERROR(packShared(p.b, bPlan, "packed B", bShared));

  // 3. Run the batches, each worker with its own scratch buffers.
  std::atomic<bool> failed{false};
  auto runBatches = [&](int64_t begin, int64_t end) {
    Buffer<float> aScratch, bScratch, cScratch;
    if ((aPlan.layout == Layout::Packed && !aShared &&
         !(aScratch = allocateBuffer<float>(p.m * p.k, "packed A"))) ||
        (bPlan.layout == Layout::Packed && !bShared &&
         !(bScratch = allocateBuffer<float>(p.k * p.n, "packed B"))) ||
        (cPlan.layout == Layout::Packed &&
         !(cScratch = allocateBuffer<float>(p.m * p.n, "packed C")))) {
      failed = true;
      return;
    }
    for (int64_t b = begin; b < end; ++b) {
      if (failed.load(std::memory_order_relaxed))
        return;
      GemmInput<float> a = aShared
                               ? present(p.a[b], aPlan, aShared.get(), false)
                               : present(p.a[b], aPlan, aScratch.get(), true);
      GemmInput<float> bIn = bShared
                                 ? present(p.b[b], bPlan, bShared.get(), false)
                                 : present(p.b[b], bPlan, bScratch.get(), true);
      Matrix<float> c = p.c[b];
      float *cData = cScratch ? cScratch.get() : c.data;
      dnnl_status_t status =
          dnnl_sgemm(a.trans, bIn.trans, p.m, p.n, p.k, 1.0f, a.data, a.ld,
                     bIn.data, bIn.ld, 0.0f, cData, cPlan.ld);
      if (status != dnnl_success) {
        (void)DS_ERROR(
            "dsrt_matmul_f32: oneDNN sgemm failed: %s (transa = "
            "%c, transb = %c, M = %lld, N = %lld, K = %lld, lda = "
            "%lld, ldb = %lld, ldc = %lld)",
            dnnl_status2str(status), a.trans, bIn.trans,
            static_cast<long long>(p.m), static_cast<long long>(p.n),
            static_cast<long long>(p.k), static_cast<long long>(a.ld),
            static_cast<long long>(bIn.ld), static_cast<long long>(cPlan.ld));
        failed = true;
        return;
      }
      if (cScratch)
        unpackRowMajor(cScratch.get(), c);
    }
  };

  int threads = numThreads();
  applyThreadsToCaller();
  if (distributeBatches(p.batches, threads, p.m, p.n, p.k))
    parallelFor(p.batches, threads, runBatches);
  else
    runBatches(0, p.batches);
  return failed ? Status::failure() : Status::success();
}
