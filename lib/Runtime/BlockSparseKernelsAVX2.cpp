//===- BlockSparseKernelsAVX2.cpp - AVX2+FMA block-sparse kernels ---------===//
//
// The micro-kernels of BlockSparse.h for AVX2 with FMA. The library is built
// for the baseline ISA (machines differ), so only these functions carry
// target("avx2,fma"); BlockSparse.cpp calls them after
// __builtin_cpu_supports says the CPU has both.
//
// Y = X * B: one 8-float panel row is one ymm register, so a tile of 12 rows
// of X keeps 12 accumulators (one per row) and, per k of a block, loads the
// panel row once and broadcasts X(r, k) from the packed rows (a
// vbroadcastss from memory is a load, not a shuffle). 12 independent FMA
// chains cover the FMA latency of two pipes; 13 loads per 12 FMAs stay
// within the load ports. Row panels are [block column][row][8], so the 12 x 8
// values a block needs are 384 contiguous bytes.
//
// SDDMM: a block of D is a sum over rows of outer products of an 8-vector of
// A and one of B; the 8 rows of the block are 8 accumulators, and per row of
// the chunk the kernel loads B's 8 values once and broadcasts A's 8.
//
//===----------------------------------------------------------------------===//

#include "BlockSparse.h"

#include <immintrin.h>

using namespace dsrt;

#define DSRT_AVX2 __attribute__((target("avx2,fma")))

namespace {

constexpr int64_t kRowTile = 12;

/// Y(r0 .. r0 + MR, 8g .. 8g + 8) for one group g.
template <int MR>
DSRT_AVX2 inline void spmmTile(const SpmmArgs &a, int64_t g, int64_t r0) {
  __m256 acc[MR];
  for (int r = 0; r < MR; ++r)
    acc[r] = _mm256_setzero_ps();
  const float *x = a.x + r0 * 8;
  for (int64_t p = a.start[g], end = a.start[g + 1]; p < end; ++p) {
    const float *xb = x + a.inner[p] * a.xBlockStride;
    const float *w = a.panels + p * 64;
    // The next block's rows of X lie at an unpredictable block column:
    // fetch them into L1 while this block computes.
    if (p + 1 < end) {
      const float *next = x + a.inner[p + 1] * a.xBlockStride;
      for (int line = 0; line < MR * 8; line += 16)
        _mm_prefetch(reinterpret_cast<const char *>(next + line), _MM_HINT_T0);
    }
    for (int k = 0; k < 8; ++k) {
      __m256 wk = _mm256_load_ps(w + k * 8);
      for (int r = 0; r < MR; ++r)
        acc[r] =
            _mm256_fmadd_ps(_mm256_broadcast_ss(xb + r * 8 + k), wk, acc[r]);
    }
  }
  float *y = a.y + r0 * a.ldy + g * 8;
  for (int r = 0; r < MR; ++r)
    _mm256_storeu_ps(y + r * a.ldy, acc[r]);
}

/// The last tile of a chunk, `rows` < kRowTile rows.
DSRT_AVX2 void spmmTail(const SpmmArgs &a, int64_t g, int64_t r0,
                        int64_t rows) {
  switch (rows) {
  case 1:
    return spmmTile<1>(a, g, r0);
  case 2:
    return spmmTile<2>(a, g, r0);
  case 3:
    return spmmTile<3>(a, g, r0);
  case 4:
    return spmmTile<4>(a, g, r0);
  case 5:
    return spmmTile<5>(a, g, r0);
  case 6:
    return spmmTile<6>(a, g, r0);
  case 7:
    return spmmTile<7>(a, g, r0);
  case 8:
    return spmmTile<8>(a, g, r0);
  case 9:
    return spmmTile<9>(a, g, r0);
  case 10:
    return spmmTile<10>(a, g, r0);
  case 11:
    return spmmTile<11>(a, g, r0);
  default:
    return;
  }
}

DSRT_AVX2 void spmmAVX2(const SpmmArgs &a, int64_t gBegin, int64_t gEnd) {
  for (int64_t g = gBegin; g < gEnd; ++g) {
    int64_t r0 = 0;
    for (; r0 + kRowTile <= a.rows; r0 += kRowTile)
      spmmTile<kRowTile>(a, g, r0);
    if (r0 < a.rows)
      spmmTail(a, g, r0, a.rows - r0);
  }
}

DSRT_AVX2 void sddmmAVX2(const SddmmArgs &a, int64_t gBegin, int64_t gEnd) {
  for (int64_t g = gBegin; g < gEnd; ++g) {
    const float *rowsA = a.a + g * a.aBlockStride;
    for (int64_t p = a.start[g]; p < a.start[g + 1]; ++p) {
      const float *rowsB = a.b + a.inner[p] * a.bBlockStride;
      float *block = a.blocks + p * 64;
      __m256 acc[8];
      for (int t = 0; t < 8; ++t)
        acc[t] = _mm256_load_ps(block + t * 8);
      for (int64_t r = 0; r < a.rows; ++r) {
        __m256 bv = _mm256_load_ps(rowsB + r * 8);
        for (int t = 0; t < 8; ++t)
          acc[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(rowsA + r * 8 + t), bv,
                                   acc[t]);
      }
      for (int t = 0; t < 8; ++t)
        _mm256_store_ps(block + t * 8, acc[t]);
    }
  }
}

} // namespace

const SparseKernels &dsrt::avx2SparseKernels() {
  static const SparseKernels kernels{"avx2", kRowTile, false, spmmAVX2,
                                     sddmmAVX2};
  return kernels;
}
