//===- BlockSparseKernelsScalar.cpp - Portable block-sparse kernels -------===//
//
// The micro-kernels of BlockSparse.h as plain loops over the packed layouts,
// compiled for the baseline ISA: the path on CPUs without AVX2, and the one
// DSRT_SPARSE_KERNEL=scalar forces so tests can hold the vector kernels
// against it. A tile of 4 rows times the 8 columns of a panel keeps the
// accumulators in registers (the compiler vectorizes the 8-wide inner loop
// with SSE); the arithmetic is the same multiply-add chain per output.
//
//===----------------------------------------------------------------------===//

#include "BlockSparse.h"

#include <algorithm>

using namespace dsrt;

namespace {

constexpr int64_t kRowTile = 4;

void spmmScalar(const SpmmArgs &a, int64_t gBegin, int64_t gEnd) {
  for (int64_t g = gBegin; g < gEnd; ++g)
    for (int64_t r0 = 0; r0 < a.rows; r0 += kRowTile) {
      int64_t tile = std::min(kRowTile, a.rows - r0);
      float acc[kRowTile][8] = {};
      for (int64_t p = a.start[g]; p < a.start[g + 1]; ++p) {
        const float *x = a.x + a.inner[p] * a.xBlockStride + r0 * 8;
        const float *w = a.panels + p * 64;
        for (int64_t r = 0; r < tile; ++r)
          for (int64_t k = 0; k < 8; ++k)
            for (int64_t n = 0; n < 8; ++n)
              acc[r][n] += x[r * 8 + k] * w[k * 8 + n];
      }
      for (int64_t r = 0; r < tile; ++r)
        std::copy(acc[r], acc[r] + 8, a.y + (r0 + r) * a.ldy + g * 8);
    }
}

void sddmmScalar(const SddmmArgs &a, int64_t gBegin, int64_t gEnd) {
  for (int64_t g = gBegin; g < gEnd; ++g) {
    const float *rowsA = a.a + g * a.aBlockStride;
    for (int64_t p = a.start[g]; p < a.start[g + 1]; ++p) {
      const float *rowsB = a.b + a.inner[p] * a.bBlockStride;
      float acc[8][8];
      std::copy(a.blocks + p * 64, a.blocks + p * 64 + 64, &acc[0][0]);
      for (int64_t r = 0; r < a.rows; ++r)
        for (int64_t t = 0; t < 8; ++t)
          for (int64_t n = 0; n < 8; ++n)
            acc[t][n] += rowsA[r * 8 + t] * rowsB[r * 8 + n];
      std::copy(&acc[0][0], &acc[0][0] + 64, a.blocks + p * 64);
    }
  }
}

} // namespace

const SparseKernels &dsrt::scalarSparseKernels() {
  static const SparseKernels kernels{"scalar", kRowTile, false, spmmScalar,
                                     sddmmScalar};
  return kernels;
}
