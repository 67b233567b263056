//===- GemmF64.cpp - f64 batched GEMM as plain loops ----------------------===//
//
// f64 GEMMs serve gradient checks on small shapes, so a correct loop nest is
// enough: i-k-j order, with the inner loop running along a unit-stride row of
// op(B) (packed first when it has none) into a row accumulator that is then
// stored to C through its strides. Rows of all batches are split over the
// threads; each element of C is summed by one thread in k order, so results
// do not depend on the thread count.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"

#include <atomic>

using namespace dsrt;

namespace {
/// Below this many multiply-adds a call stays on the calling thread: a
/// parallel region costs microseconds, far more when other processes hold
/// the cores.
constexpr double kParallelMinWork = 1 << 17;
} // namespace

Status dsrt::runGemmF64(const GemmProblem<double> &p) {
  const Matrix<const double> &b0 = p.b.first;
  bool bDirect = b0.cols <= 1 || b0.colStride == 1;
  Buffer<double> bShared;
  if (!bDirect && p.b.invariant()) {
    if (!(bShared = allocateBuffer<double>(p.k * p.n, "packed B")))
      return Status::failure();
    packRowMajor(p.b[0], bShared.get());
  }

  std::atomic<bool> failed{false};
  // Rows r = batch * m + i of the stacked C.
  auto runRows = [&](int64_t begin, int64_t end) {
    Buffer<double> acc = allocateBuffer<double>(p.n, "f64 GEMM row");
    Buffer<double> bScratch;
    if (!acc || (!bDirect && !bShared &&
                 !(bScratch = allocateBuffer<double>(p.k * p.n, "packed B")))) {
      failed = true;
      return;
    }
    int64_t packedBatch = -1;
    for (int64_t r = begin; r < end; ++r) {
      int64_t batch = r / p.m, i = r % p.m;
      Matrix<const double> a = p.a[batch];
      Matrix<double> c = p.c[batch];
      const double *bData = bShared.get();
      int64_t ldb = p.n;
      if (bDirect) {
        Matrix<const double> b = p.b[batch];
        bData = b.data;
        ldb = b.rowStride;
      } else if (!bShared) {
        if (packedBatch != batch)
          packRowMajor(p.b[batch], bScratch.get());
        packedBatch = batch;
        bData = bScratch.get();
      }
      double *row = acc.get();
      for (int64_t j = 0; j < p.n; ++j)
        row[j] = 0.0;
      for (int64_t k = 0; k < p.k; ++k) {
        double aik = a.at(i, k);
        const double *bRow = bData + k * ldb;
        for (int64_t j = 0; j < p.n; ++j)
          row[j] += aik * bRow[j];
      }
      for (int64_t j = 0; j < p.n; ++j)
        c.at(i, j) = row[j];
    }
  };

  double work = double(p.batches) * double(p.m) * double(p.n) * double(p.k);
  parallelFor(p.batches * p.m, work < kParallelMinWork ? 1 : numThreads(),
              runRows);
  return failed ? Status::failure() : Status::success();
}
