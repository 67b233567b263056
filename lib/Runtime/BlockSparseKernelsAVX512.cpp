//===- BlockSparseKernelsAVX512.cpp - AVX-512F block-sparse kernels -------===//
//
// The micro-kernels of BlockSparse.h for AVX-512F. A block is 8 wide and a
// zmm register 16, so every register holds two rows of the chunk,
// interleaved lane by lane: lane 2j + s belongs to row 2i + s of pair i.
// The row panels come packed that way (SparseKernels::pairedRows: element k
// of the pair's two rows is the float pair at 2k), so a pair's two values
// for one k are one 8-byte broadcast from memory, and no kernel needs a
// shuffle in its inner loop:
//
//  - Y = X * B: per k, the panel row with each element doubled (one shuffle
//    shared by the tile) times the broadcast pair of X values, into one
//    accumulator per row pair, 8 pairs per tile; the accumulators are
//    de-interleaved into rows once per tile.
//  - SDDMM: per row pair, the inner operand's 16 values are one load (lane
//    2n + s: element n of row s) and row t of the block takes the group
//    operand's broadcast pair for t; the two rows' halves of each lane pair
//    are summed once per chunk.
//
// Written with the compiler's generic vector types rather than intrinsics,
// so that BlockSparseKernelsAVX512Portable.cpp can compile the same source
// without the AVX-512 target: DSRT_SPARSE_KERNEL=avx512-portable then runs
// this algorithm on any CPU, and the unit tests check it everywhere (no
// AVX-512 CPU may be at hand). Instruction selection is the compiler's.
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
typedef float V2 __attribute__((vector_size(8)));

/// Row pairs per register tile of Y = X * B: 8 accumulators.
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

/// [p[0], p[1]] repeated 8 times.
DSRT_AVX512 inline V16 broadcastPair(const float *p) {
  V2 v;
  std::memcpy(&v, p, sizeof(v));
  return __builtin_shufflevector(v, v, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
                                 0, 1);
}

DSRT_AVX512 inline V16 fma16(V16 a, V16 b, V16 c) {
#if __has_builtin(__builtin_elementwise_fma)
  return __builtin_elementwise_fma(a, b, c);
#else
  return a * b + c;
#endif
}

/// The even lanes (row 0 of the pair) and the odd lanes (row 1).
DSRT_AVX512 inline V8 evenLanes(V16 v) {
  return __builtin_shufflevector(v, v, 0, 2, 4, 6, 8, 10, 12, 14);
}
DSRT_AVX512 inline V8 oddLanes(V16 v) {
  return __builtin_shufflevector(v, v, 1, 3, 5, 7, 9, 11, 13, 15);
}

/// Y(r0 .. r0 + rows, 8g .. 8g + 8) for one group g, rows <= 2 * MP; the
/// tile reads MP whole pairs (an odd last row pairs with the chunk's zero
/// padding row, whose result is not stored).
template <int MP>
DSRT_AVX512 inline void spmmTile(const SpmmArgs &a, int64_t g, int64_t r0,
                                 int64_t rows) {
  V16 acc[MP];
  for (int q = 0; q < MP; ++q)
    acc[q] = V16{};
  // r0 is even: pair r0 / 2 starts at 16 * (r0 / 2) = 8 * r0.
  const float *x = a.x + r0 * 8;
  for (int64_t p = a.start[g], end = a.start[g + 1]; p < end; ++p) {
    const float *xb = x + a.inner[p] * a.xBlockStride;
    const float *panel = a.panels + p * 64;
    for (int k = 0; k < 8; ++k) {
      V8 row = load8(panel + 8 * k);
      V16 w = __builtin_shufflevector(row, row, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5,
                                      5, 6, 6, 7, 7);
      for (int q = 0; q < MP; ++q)
        acc[q] = fma16(broadcastPair(xb + 16 * q + 2 * k), w, acc[q]);
    }
  }
  float *y = a.y + r0 * a.ldy + g * 8;
  for (int q = 0; q < MP; ++q) {
    store8(y + (2 * q) * a.ldy, evenLanes(acc[q]));
    if (2 * q + 1 < rows)
      store8(y + (2 * q + 1) * a.ldy, oddLanes(acc[q]));
  }
}

DSRT_AVX512_ENTRY void spmmAVX512(const SpmmArgs &a, int64_t gBegin,
                                  int64_t gEnd) {
  constexpr int64_t tileRows = 2 * kPairs;
  for (int64_t g = gBegin; g < gEnd; ++g) {
    int64_t r0 = 0;
    for (; r0 + tileRows <= a.rows; r0 += tileRows)
      spmmTile<kPairs>(a, g, r0, tileRows);
    int64_t rows = a.rows - r0;
    switch ((rows + 1) / 2) {
    case 0:
      break;
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
    default:
      spmmTile<8>(a, g, r0, rows);
      break;
    }
  }
}

DSRT_AVX512_ENTRY void sddmmAVX512(const SddmmArgs &a, int64_t gBegin,
                                   int64_t gEnd) {
  int64_t pairs = (a.rows + 1) / 2;
  for (int64_t g = gBegin; g < gEnd; ++g) {
    const float *rowsA = a.a + g * a.aBlockStride;
    for (int64_t p = a.start[g]; p < a.start[g + 1]; ++p) {
      const float *rowsB = a.b + a.inner[p] * a.bBlockStride;
      V16 acc[8];
      for (int t = 0; t < 8; ++t)
        acc[t] = V16{};
      for (int64_t i = 0; i < pairs; ++i) {
        V16 bv = load16(rowsB + 16 * i);
        for (int t = 0; t < 8; ++t)
          acc[t] = fma16(broadcastPair(rowsA + 16 * i + 2 * t), bv, acc[t]);
      }
      float *block = a.blocks + p * 64;
      for (int t = 0; t < 8; ++t)
        store8(block + t * 8,
               load8(block + t * 8) + evenLanes(acc[t]) + oddLanes(acc[t]));
    }
  }
}

} // namespace

#ifdef DSRT_SPARSE_AVX512_PORTABLE
const SparseKernels &dsrt::portableAVX512SparseKernels() {
  static const SparseKernels kernels{"avx512-portable", 2 * kPairs, true,
                                     spmmAVX512, sddmmAVX512};
  return kernels;
}
#else
const SparseKernels &dsrt::avx512SparseKernels() {
  static const SparseKernels kernels{"avx512", 2 * kPairs, true, spmmAVX512,
                                     sddmmAVX512};
  return kernels;
}
#endif
