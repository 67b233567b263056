//===- BlockSparsePack.cpp - Block lists and packed panels ----------------===//
//
// Everything the block-sparse micro-kernels read is packed here, per call:
//
//  - the block list: the active 8x8 blocks of the mask grouped by the block
//    column they contribute to (CSC), expanded from the mask's block size;
//  - the weight panels: each active block copied as 64 contiguous floats in
//    the orientation the kernels multiply by (panel[k][n], n fastest), so the
//    forward (B = W^T: the copy transposes the block) and dX (B = W: a plain
//    copy) share one micro-kernel, and the kernels never see W's strides nor
//    its inactive blocks (whatever garbage those hold is never read);
//  - the row panels of the dense operands (X of Y = X * B; A and B of the
//    SDDMM), one chunk of rows at a time: [block column][row][8], so that the
//    8 values a kernel needs per row of one block are one 32-byte line and a
//    register tile of rows is one contiguous run (the AVX-512 kernels take
//    the rows of each pair interleaved instead, see rowPanelStride).
//
// Packing costs O(active weights) for the panels and O(chunk rows * width)
// per chunk for the row panels, against O(rows * active weights) of
// multiply-adds: noise next to the product except at the highest sparsities.
//
//===----------------------------------------------------------------------===//

#include "BlockSparse.h"

#include <algorithm>
#include <climits>
#include <cstring>

using namespace dsrt;

Status dsrt::buildBlockList(const Matrix<const int8_t> &mask, int64_t block,
                            BlockList &list) {
  int64_t scale = block / kSparseBlock;
  list.groups = mask.cols * scale;
  list.innerBlocks = mask.rows * scale;
  if (list.innerBlocks > INT32_MAX)
    return DS_ERROR("block-sparse: %lld blocks of 8 along the contraction do "
                    "not fit the 32-bit block lists",
                    static_cast<long long>(list.innerBlocks));
  list.start = allocateBuffer<int64_t>(list.groups + 1, "block list offsets");
  if (!list.start)
    return Status::failure();

  // 1. Count: every active mask element of mask column q gives `scale`
  //    blocks to each of the `scale` groups it covers.
  list.start[0] = 0;
  for (int64_t q = 0; q < mask.cols; ++q) {
    int64_t active = 0;
    for (int64_t i = 0; i < mask.rows; ++i)
      active += mask.at(i, q) != 0;
    for (int64_t s = 0; s < scale; ++s) {
      int64_t g = q * scale + s;
      list.start[g + 1] = list.start[g] + active * scale;
    }
  }

  // 2. Fill, in increasing block-row order within each group.
  list.inner = allocateBuffer<int32_t>(list.count(), "block list");
  if (!list.inner)
    return Status::failure();
  for (int64_t q = 0; q < mask.cols; ++q)
    for (int64_t s = 0; s < scale; ++s) {
      int32_t *out = &list.inner[list.start[q * scale + s]];
      for (int64_t i = 0; i < mask.rows; ++i)
        if (mask.at(i, q) != 0)
          for (int64_t t = 0; t < scale; ++t)
            *out++ = static_cast<int32_t>(i * scale + t);
    }
  return Status::success();
}

namespace {

/// Panels per packing task: enough work (64 KiB) to pay for taking a task.
constexpr int64_t kPanelsPerTask = 256;

/// Packs block p (of group g) of b.
void packPanel(const Matrix<const float> &b, const BlockList &list, int64_t g,
               int64_t p, float *panels) {
  const float *src = b.data + list.inner[p] * kSparseBlock * b.rowStride +
                     g * kSparseBlock * b.colStride;
  float *dst = panels + p * 64;
  // Read along b's unit stride when it has one: the forward's B = W^T has
  // unit row stride, so its blocks are read row by row of W and transposed.
  if (b.colStride == 1 || b.rowStride != 1) {
    for (int64_t k = 0; k < 8; ++k)
      for (int64_t n = 0; n < 8; ++n)
        dst[k * 8 + n] = src[k * b.rowStride + n * b.colStride];
  } else {
    for (int64_t n = 0; n < 8; ++n)
      for (int64_t k = 0; k < 8; ++k)
        dst[k * 8 + n] = src[k * b.rowStride + n * b.colStride];
  }
}

/// The task body of packPanels: a range of kPanelsPerTask panels.
struct PanelPacker {
  const Matrix<const float> &b;
  const BlockList &list;
  float *panels;

  bool ok() const { return true; }
  bool operator()(int64_t task) const {
    int64_t pBegin = task * kPanelsPerTask;
    int64_t pEnd = std::min(pBegin + kPanelsPerTask, list.count());
    // The group of pBegin: the last g with start[g] <= pBegin.
    int64_t g = std::upper_bound(list.start.get(),
                                 list.start.get() + list.groups + 1, pBegin) -
                list.start.get() - 1;
    for (int64_t p = pBegin; p < pEnd; ++p) {
      while (list.start[g + 1] <= p)
        ++g;
      packPanel(b, list, g, p, panels);
    }
    return true;
  }
};

} // namespace

void dsrt::packPanels(const Matrix<const float> &b, const BlockList &list,
                      float *panels, int threads) {
  int64_t tasks = (list.count() + kPanelsPerTask - 1) / kPanelsPerTask;
  (void)runTasks(tasks, threads, [&](int64_t) {
    return PanelPacker{b, list, panels};
  });
}

int64_t dsrt::rowPanelStride(int64_t rows) {
  int64_t floats = (rows + 1) / 2 * 2 * 8;
  return floats % 1024 == 0 ? floats + 16 : floats;
}

void dsrt::packRowPanels(const Matrix<const float> &s, int64_t m0, int64_t rows,
                         int64_t hBegin, int64_t hEnd, float *dst,
                         bool paired) {
  int64_t padded = (rows + 1) / 2 * 2;
  int64_t blockStride = rowPanelStride(rows);
  dst -= hBegin * blockStride; // dst is block column hBegin's panel.
  if (paired) {
    // Element k of row r at 16 (r / 2) + 2 k + r % 2.
    for (int64_t r = 0; r < padded; ++r)
      for (int64_t h = hBegin; h < hEnd; ++h) {
        float *out = dst + h * blockStride + 16 * (r / 2) + r % 2;
        for (int64_t k = 0; k < 8; ++k)
          out[2 * k] = r < rows ? s.at(m0 + r, h * 8 + k) : 0.0f;
      }
    return;
  }
  if (s.colStride == 1) {
    // Row by row: each source row is read sequentially (the prefetchers
    // follow it) and scattered over the panels, which stay in cache.
    for (int64_t r = 0; r < rows; ++r) {
      const float *src = s.data + (m0 + r) * s.rowStride;
      for (int64_t h = hBegin; h < hEnd; ++h)
        std::memcpy(dst + h * blockStride + r * 8, src + h * 8,
                    8 * sizeof(float));
    }
  } else {
    for (int64_t h = hBegin; h < hEnd; ++h)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < 8; ++k)
          dst[h * blockStride + r * 8 + k] =
              s.data[(m0 + r) * s.rowStride + (h * 8 + k) * s.colStride];
  }
  for (int64_t h = hBegin; h < hEnd; ++h)
    for (int64_t r = rows; r < padded; ++r)
      std::memset(dst + h * blockStride + r * 8, 0, 8 * sizeof(float));
}
