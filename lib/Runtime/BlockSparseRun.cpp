//===- BlockSparseRun.cpp - Tiling and threads of the block-sparse products ===//
//
// The drivers between a validated problem and the micro-kernels of one ISA.
// Work is cut into tasks that threads take from a shared counter rather than
// in fixed shares: the cores are often shared with other processes, and a
// thread that is descheduled for a while then delays only the task it holds.
// Each thread packs what it reads into its own scratch, so no task waits for
// another's packing.
//
// Y = X * B (forward and dX):
//  1. list the active blocks by output block column and pack them as panels;
//  2. cut M into chunks whose packed rows of X stay in L2 (kXChunkBytes);
//     with fewer chunks than threads (small M), also split the output block
//     columns, balanced by block count; a task is one chunk (and part);
//  3. per task: pack its rows of X, then for each output block column run
//     the micro-kernel over the chunk, so that the column's panels stay in L1
//     while the row tiles stream past them.
//
// SDDMM (dW):
//  1. list the active blocks by block row of D;
//  2. a task is a chunk of M (and, for small M, a part of the block rows):
//     pack its rows of the block columns of A and B the blocks use, then run
//     the micro-kernel per block row (that row's A panel stays in L1),
//     accumulating into the thread's own copy of the active blocks;
//  3. sum the threads' copies per block and write D: the sums on active
//     blocks, zeros elsewhere. Splitting M rather than the blocks means every
//     row of A and B is packed once in all, and a thread's work does not
//     depend on how the active blocks fall.
//
//===----------------------------------------------------------------------===//

#include "BlockSparse.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

using namespace dsrt;

namespace {

/// Bytes of packed X rows per chunk: with the chunk's output tile and one
/// block column of panels this stays within a 1 MiB L2, and a chunk is long
/// enough that the panels are read from L1 many times per load.
constexpr int64_t kXChunkBytes = 384 * 1024;
/// Rows of an SDDMM chunk: the thread's accumulators are read and written
/// once per chunk, a panel of A or B is 32 bytes per row.
constexpr int64_t kSddmmChunkRows = 128;
/// Bounds on the rows of a chunk.
constexpr int64_t kMinChunkRows = 16, kMaxChunkRows = 256;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Rows per chunk for a packed width of `width` floats: as many as fit
/// `bytes`, a multiple of `tile`, within [kMinChunkRows, kMaxChunkRows].
int64_t chunkRowsFor(int64_t width, int64_t bytes, int64_t tile) {
  int64_t rows = bytes / (std::max<int64_t>(width, 8) * int64_t(sizeof(float)));
  rows = std::clamp(rows, kMinChunkRows, kMaxChunkRows);
  return std::max(tile, rows / tile * tile);
}

/// Groups [begin, end) of part `part` of `parts`, balanced by the work of a
/// group: its blocks plus one (a group without blocks still writes zeros).
std::pair<int64_t, int64_t> splitGroups(const BlockList &list, int64_t parts,
                                        int64_t part) {
  int64_t total = list.count() + list.groups;
  auto boundary = [&](int64_t s) {
    if (s == 0)
      return int64_t(0);
    if (s == parts)
      return list.groups;
    int64_t target = total * s / parts;
    // The first g with start[g] + g >= target.
    int64_t lo = 0, hi = list.groups;
    while (lo < hi) {
      int64_t mid = (lo + hi) / 2;
      if (list.start[mid] + mid >= target)
        hi = mid;
      else
        lo = mid + 1;
    }
    return lo;
  };
  return {boundary(part), boundary(part + 1)};
}

/// Whether the micro-kernels can store into y as it is: unit column stride
/// and rows that do not overlap.
bool directOutput(const Matrix<float> &y) {
  return (y.cols <= 1 || y.colStride == 1) &&
         (y.rows <= 1 || y.rowStride >= y.cols);
}

/// The scratch and body of one thread of Y = X * B.
struct SpmmWorker {
  const SparseMatmulProblem &p;
  const BlockList &list;
  const float *panels;
  const SparseKernels *kernels;
  int64_t chunkRows, groupParts;
  bool direct;
  Buffer<float> xPacked, yScratch;

  bool ok() const { return xPacked && (direct || yScratch); }

  bool operator()(int64_t task) {
    int64_t chunk = task / groupParts, part = task % groupParts;
    int64_t m0 = chunk * chunkRows;
    int64_t rows = std::min(chunkRows, p.x.rows - m0);
    int64_t n = p.y.cols;
    auto [gBegin, gEnd] = splitGroups(list, groupParts, part);
    packRowPanels(p.x, m0, rows, 0, p.x.cols / kSparseBlock, xPacked.get());
    SpmmArgs args{xPacked.get(),
                  rowPanelStride(rows),
                  rows,
                  list.start.get(),
                  list.inner.get(),
                  panels,
                  direct ? p.y.data + m0 * p.y.rowStride : yScratch.get(),
                  direct ? p.y.rowStride : n};
    kernels->spmm(args, gBegin, gEnd);
    if (!direct)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = gBegin * 8; j < gEnd * 8; ++j)
          p.y.at(m0 + r, j) = yScratch[r * n + j];
    return true;
  }
};

} // namespace

Status dsrt::runSparseMatmul(const SparseMatmulProblem &p,
                             const SparseKernels &kernels, int threads) {
  int64_t m = p.x.rows, k = p.x.cols, n = p.y.cols;
  int64_t kBlocks = k / kSparseBlock;

  // 1. Block list and panels.
  BlockList list;
  DS_RETURN_IF_ERROR(buildBlockList(p.mask, p.block, list));
  Buffer<float> panels =
      allocateBuffer<float>(list.count() * 64, "block-sparse weight panels");
  if (!panels)
    return Status::failure();
  packPanels(p.b, list, panels.get(), threads);

  // 2. Chunks of M; for small M, parts of the output block columns too.
  int64_t chunkRows = chunkRowsFor(k, getenv("XCB") ? atoi(getenv("XCB")) * 1024 : kXChunkBytes, kernels.rowTile); if (getenv("XCR")) chunkRows = atoi(getenv("XCR"));
  chunkRows = std::min(chunkRows, ceilDiv(m, kernels.rowTile) * kernels.rowTile);
  int64_t chunks = ceilDiv(m, chunkRows);
  int64_t groupParts = chunks >= threads ? 1 : ceilDiv(threads, chunks);
  groupParts = std::min(groupParts, std::max<int64_t>(list.groups, 1));
  bool direct = directOutput(p.y);
  int64_t panelStride = rowPanelStride(chunkRows);

  // 3. The tasks.
  return runTasks(chunks * groupParts, threads, [&](int64_t) {
    return SpmmWorker{
        p,
        list,
        panels.get(),
        &kernels,
        chunkRows,
        groupParts,
        direct,
        allocateBuffer<float>(kBlocks * panelStride, "packed rows of X"),
        direct ? nullptr
               : allocateBuffer<float>(chunkRows * n, "block-sparse output")};
  });
}

namespace {

/// The scratch and body of one thread of the SDDMM.
struct SddmmWorker {
  const SddmmProblem &p;
  const BlockList &list;
  const std::vector<std::vector<int32_t>> &usedColumns;
  const SparseKernels *kernels;
  int64_t chunkRows, rowParts;
  Buffer<float> aPacked, bPacked;
  float *blocks; ///< This thread's accumulators, zeroed.

  bool ok() const { return aPacked && bPacked && blocks; }

  bool operator()(int64_t task) {
    int64_t chunk = task / rowParts, part = task % rowParts;
    int64_t m0 = chunk * chunkRows;
    int64_t rows = std::min(chunkRows, p.a.rows - m0);
    auto [gBegin, gEnd] = splitGroups(list, rowParts, part);
    for (int64_t g = gBegin; g < gEnd; ++g)
      if (list.count(g) > 0)
        packRowPanels(p.a, m0, rows, g, g + 1, aPacked.get());
    for (int32_t c : usedColumns[part])
      packRowPanels(p.b, m0, rows, c, c + 1, bPacked.get());
    SddmmArgs args{aPacked.get(), rowPanelStride(rows),
                   bPacked.get(), rowPanelStride(rows),
                   rows,          list.start.get(),
                   list.inner.get(), blocks};
    kernels->sddmm(args, gBegin, gEnd);
    return true;
  }
};

} // namespace

Status dsrt::runSparseSddmm(const SddmmProblem &p, const SparseKernels &kernels,
                            int threads) {
  int64_t m = p.a.rows, rBlocks = p.d.rows / kSparseBlock,
          cBlocks = p.d.cols / kSparseBlock;

  // 1. Blocks by block row of D: the block list of the transposed mask.
  BlockList list;
  DS_RETURN_IF_ERROR(buildBlockList(p.mask.transposed(), p.block, list));
  int64_t nnz = list.count();

  // 2. Tasks: chunks of M, and for small M parts of the block rows.
  int64_t chunkRows = std::min(kSddmmChunkRows, std::max<int64_t>(m, 1));
  int64_t chunks = ceilDiv(m, chunkRows);
  int64_t rowParts = chunks >= threads ? 1 : ceilDiv(threads, chunks);
  rowParts = std::min(rowParts, std::max<int64_t>(rBlocks, 1));
  if (nnz == 0)
    chunks = 0; // D = 0: nothing to accumulate.
  int64_t tasks = chunks * rowParts;
  int64_t workers = workersFor(tasks, threads);
  int64_t panelStride = rowPanelStride(chunkRows);

  // The block columns of B each part reads, in increasing order.
  std::vector<std::vector<int32_t>> usedColumns(rowParts);
  {
    std::vector<uint8_t> seen(cBlocks);
    for (int64_t part = 0; part < rowParts; ++part) {
      auto [gBegin, gEnd] = splitGroups(list, rowParts, part);
      std::fill(seen.begin(), seen.end(), 0);
      for (int64_t q = list.start[gBegin]; q < list.start[gEnd]; ++q)
        seen[list.inner[q]] = 1;
      for (int64_t c = 0; c < cBlocks; ++c)
        if (seen[c])
          usedColumns[part].push_back(static_cast<int32_t>(c));
    }
  }

  // Every thread accumulates into its own copy of the active blocks.
  Buffer<float> accumulators = allocateBuffer<float>(
      workers * nnz * 64, "block-sparse gradient accumulators");
  if (!accumulators)
    return Status::failure();
  DS_RETURN_IF_ERROR(runTasks(tasks, threads, [&](int64_t w) {
    float *blocks = accumulators.get() + w * nnz * 64;
    std::memset(blocks, 0, nnz * 64 * sizeof(float));
    return SddmmWorker{
        p,
        list,
        usedColumns,
        &kernels,
        chunkRows,
        rowParts,
        allocateBuffer<float>(rBlocks * panelStride, "packed rows of A"),
        allocateBuffer<float>(cBlocks * panelStride, "packed rows of B"),
        blocks};
  }));

  // 3. Sum the copies and write D, block row by block row.
  parallelFor(rBlocks, threads, [&](int64_t gBegin, int64_t gEnd) {
    float sum[64];
    for (int64_t g = gBegin; g < gEnd; ++g) {
      int64_t q = list.start[g];
      for (int64_t c = 0; c < cBlocks; ++c) {
        const float *src = nullptr;
        if (q < list.start[g + 1] && list.inner[q] == c) {
          src = accumulators.get() + 64 * q;
          if (workers > 1) {
            std::copy(src, src + 64, sum);
            for (int64_t w = 1; w < workers; ++w)
              for (int64_t e = 0; e < 64; ++e)
                sum[e] += src[w * nnz * 64 + e];
            src = sum;
          }
          ++q;
        }
        for (int64_t t = 0; t < 8; ++t) {
          float *row = &p.d.at(8 * g + t, 8 * c);
          if (p.d.colStride == 1) {
            if (src)
              std::memcpy(row, src + t * 8, 8 * sizeof(float));
            else
              std::memset(row, 0, 8 * sizeof(float));
            continue;
          }
          for (int64_t j = 0; j < 8; ++j)
            row[j * p.d.colStride] = src ? src[t * 8 + j] : 0.0f;
        }
      }
    }
  });
  return Status::success();
}
