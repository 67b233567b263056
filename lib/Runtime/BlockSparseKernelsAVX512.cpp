//===- BlockSparseKernelsAVX512.cpp - AVX-512F block-sparse kernels -------===//
//
// The micro-kernels of BlockSparse.h for AVX-512F, kept simple: a block is
// 8 wide and a zmm register 16, so every register holds two rows side by
// side ([row r: 8 lanes | row r + 1: 8 lanes]), which the packed layouts
// already provide: rows r and r + 1 of one block column are 16 contiguous
// floats (chunks are padded to an even row count with a zero row).
//
//  - Y = X * B: per block, load a tile's X values as 8 row-pair registers;
//    per k, duplicate the panel row into both halves and take lane k of each
//    row of a pair (a vpermps with a constant index) as the multiplier; the
//    8 accumulators hold 16 rows of Y, unpacked into halves at the end.
//  - SDDMM: per pair of rows, one load of A's and one of B's pair; per row t
//    of the block, lanes t of A's two rows times B's two rows; the two
//    halves of each accumulator are summed at the end.
//
// Written with the compiler's generic vector types, not intrinsics, so that
// the same source compiled without the target attribute
// (DSRT_SPARSE_AVX512_PORTABLE, as the unit tests do) runs the identical
// algorithm on any CPU: the data movement is tested where no AVX-512 CPU is
// at hand, and the instruction selection is the compiler's.
//
//===----------------------------------------------------------------------===//

#include "BlockSparse.h"

#include <cstring>

using namespace dsrt;

#ifdef DSRT_SPARSE_AVX512_PORTABLE
#define DSRT_AVX512 __attribute__((always_inline))
#define DSRT_AVX512_ENTRY
#else
#define DSRT_AVX512 __attribute__((target("avx512f"), always_inline))
#define DSRT_AVX512_ENTRY __attribute__((target("avx512f")))
#endif

namespace {

typedef float V16 __attribute__((vector_size(64)));
typedef float V8 __attribute__((vector_size(32)));

/// Row pairs per register tile: 8 accumulators and 8 X registers of 32.
constexpr int kPairs = 8;

DSRT_AVX512 inline V16 load16(const float *p) {
  V16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

DSRT_AVX512 inline V8 load8(const float *p) {
  V8 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

DSRT_AVX512 inline void store8(float *p, V8 v) {
  std::memcpy(p, &v, sizeof(v));
}

DSRT_AVX512 inline V16 fma16(V16 a, V16 b, V16 c) {
#if __has_builtin(__builtin_elementwise_fma)
  return __builtin_elementwise_fma(a, b, c);
#else
  return a * b + c;
#endif
}

/// [v[K] x 8 | v[8 + K] x 8]: lane K of each row of a row pair.
template <int K> DSRT_AVX512 inline V16 laneOfPair(V16 v) {
  return __builtin_shufflevector(v, v, K, K, K, K, K, K, K, K, 8 + K, 8 + K,
                                 8 + K, 8 + K, 8 + K, 8 + K, 8 + K, 8 + K);
}

DSRT_AVX512 inline V8 lowHalf(V16 v) {
  return __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
}
DSRT_AVX512 inline V8 highHalf(V16 v) {
  return __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
}

/// acc[q] += X(pair q, k) * panel row k, for one k.
template <int K, int MP>
DSRT_AVX512 inline void spmmStep(V16 (&acc)[MP], const V16 (&xv)[MP],
                                 const float *panel) {
  V8 row = load8(panel + 8 * K);
  V16 wk = __builtin_shufflevector(row, row, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2,
                                   3, 4, 5, 6, 7);
  for (int q = 0; q < MP; ++q)
    acc[q] = fma16(laneOfPair<K>(xv[q]), wk, acc[q]);
}

/// Y(r0 .. r0 + rows, 8g .. 8g + 8), rows <= 2 * MP, for one group g.
template <int MP>
DSRT_AVX512 inline void spmmTile(const SpmmArgs &a, int64_t g, int64_t r0,
                                 int64_t rows) {
  V16 acc[MP];
  for (int q = 0; q < MP; ++q)
    acc[q] = V16{};
  const float *x = a.x + r0 * 8;
  for (int64_t p = a.start[g], end = a.start[g + 1]; p < end; ++p) {
    const float *xb = x + a.inner[p] * a.xBlockStride;
    const float *panel = a.panels + p * 64;
    V16 xv[MP];
    for (int q = 0; q < MP; ++q)
      xv[q] = load16(xb + 16 * q);
    spmmStep<0>(acc, xv, panel);
    spmmStep<1>(acc, xv, panel);
    spmmStep<2>(acc, xv, panel);
    spmmStep<3>(acc, xv, panel);
    spmmStep<4>(acc, xv, panel);
    spmmStep<5>(acc, xv, panel);
    spmmStep<6>(acc, xv, panel);
    spmmStep<7>(acc, xv, panel);
  }
  float *y = a.y + r0 * a.ldy + g * 8;
  for (int q = 0; q < MP; ++q) {
    store8(y + (2 * q) * a.ldy, lowHalf(acc[q]));
    if (2 * q + 1 < rows)
      store8(y + (2 * q + 1) * a.ldy, highHalf(acc[q]));
  }
}

DSRT_AVX512_ENTRY void spmmAVX512(const SpmmArgs &a, int64_t gBegin,
                                  int64_t gEnd) {
  constexpr int64_t tileRows = 2 * kPairs;
  for (int64_t g = gBegin; g < gEnd; ++g) {
    int64_t r0 = 0;
    for (; r0 + tileRows <= a.rows; r0 += tileRows)
      spmmTile<kPairs>(a, g, r0, tileRows);
    // The last tile reads whole pairs: an odd last row pairs with the zero
    // padding row of the chunk, whose result is not stored.
    int64_t rows = a.rows - r0;
    switch ((rows + 1) / 2) {
    case 1:
      spmmTile<1>(a, g, r0, rows);
      break;
    case 2:
      spmmTile<2>(a, g, r0, rows);
      break;
    case 3:
      spmmTile<3>(a, g, r0, rows);
      break;
    case 4:
      spmmTile<4>(a, g, r0, rows);
      break;
    case 5:
      spmmTile<5>(a, g, r0, rows);
      break;
    case 6:
      spmmTile<6>(a, g, r0, rows);
      break;
    case 7:
      spmmTile<7>(a, g, r0, rows);
      break;
    case 8:
      spmmTile<8>(a, g, r0, rows);
      break;
    default:
      break;
    }
  }
}

/// acc[T] += A(pair, T) * B(pair, :) for one row T of the block.
template <int T>
DSRT_AVX512 inline void sddmmStep(V16 (&acc)[8], V16 av, V16 bv) {
  acc[T] = fma16(laneOfPair<T>(av), bv, acc[T]);
}

DSRT_AVX512_ENTRY void sddmmAVX512(const SddmmArgs &a, int64_t gBegin,
                                   int64_t gEnd) {
  for (int64_t g = gBegin; g < gEnd; ++g) {
    const float *rowsA = a.a + g * a.aBlockStride;
    for (int64_t p = a.start[g]; p < a.start[g + 1]; ++p) {
      const float *rowsB = a.b + a.inner[p] * a.bBlockStride;
      V16 acc[8];
      for (int t = 0; t < 8; ++t)
        acc[t] = V16{};
      // Whole pairs: an odd chunk ends with the zero padding row.
      for (int64_t r = 0; r < a.rows; r += 2) {
        V16 av = load16(rowsA + r * 8), bv = load16(rowsB + r * 8);
        sddmmStep<0>(acc, av, bv);
        sddmmStep<1>(acc, av, bv);
        sddmmStep<2>(acc, av, bv);
        sddmmStep<3>(acc, av, bv);
        sddmmStep<4>(acc, av, bv);
        sddmmStep<5>(acc, av, bv);
        sddmmStep<6>(acc, av, bv);
        sddmmStep<7>(acc, av, bv);
      }
      float *block = a.blocks + p * 64;
      for (int t = 0; t < 8; ++t)
        store8(block + t * 8, load8(block + t * 8) + lowHalf(acc[t]) +
                                  highHalf(acc[t]));
    }
  }
}

} // namespace

#ifdef DSRT_SPARSE_AVX512_PORTABLE
/// The same kernels built for the baseline ISA, for the unit tests.
const SparseKernels &portableAVX512SparseKernels() {
#else
const SparseKernels &dsrt::avx512SparseKernels() {
#endif
  static const SparseKernels kernels{"avx512", 2 * kPairs, spmmAVX512,
                                     sddmmAVX512};
  return kernels;
}
