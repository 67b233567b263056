//===- BlockSparseRun.cpp - Tiling and threads of block-sparse products ---===//
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
//  2. cut M into chunks of a few register tiles (kChunkTiles);
//     with fewer chunks than threads (small M), also split the output block
//     columns, balanced by block count; a task is one chunk (and part);
//  3. per task: pack its rows of X, then for each output block column run
//     the micro-kernel over the chunk, so that the column's panels stay in L1
//     while the row tiles stream past them.
//
// SDDMM (dW), D = A^T B on the active blocks:
//  1. list the active blocks by block row of D (A's block columns, the
//     "groups"), or by block column when D is wider than tall, so that the
//     other operand, whose packed rows every group reads, is the narrower;
//  2. a task is a chunk of M (and, for small M, a part of the groups): pack
//     the chunk's rows of the narrow operand's used block columns (they stay
//     in L2), then per group pack its own panel (it stays in L1) and run the
//     micro-kernel over its blocks, accumulating into the thread's own copy
//     of the active blocks;
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

/// Rows of X per chunk of Y = X * B, in register tiles: a group's panels
/// are loaded once per chunk and reused from L1 by every tile, and the
/// rows of X the next block needs are prefetched, so reuse matters more
/// than keeping the chunk in L2 (measured with AVX2 on 2048 rows: 8 tiles
/// beat 2 tiles that fit L2 by 10-30 % for K = 4096, and 21 tiles by
/// 10-30 % for K = 1024).
constexpr int64_t kChunkTiles = 8;
/// At most this many bytes of packed X per chunk (a very wide X gets
/// fewer rows, down to 2 tiles).
constexpr int64_t kXChunkBytes = 2 * 1024 * 1024;
/// Bytes of the packed rows of the SDDMM's inner operand per chunk: they
/// stay in L2 while the groups' blocks are accumulated (a group's own panel
/// is packed just before use and stays in L1).
constexpr int64_t kSddmmInnerBytes = 512 * 1024;
/// The most memory the SDDMM's per-worker copies of D's active blocks take
/// together (256 MiB: a 4096 x 16384 weight at 70 % density is 188 MB a
/// copy, so one worker; GPT-sized layers keep every thread).
constexpr int64_t kSddmmAccumulatorBytes = int64_t(256) << 20;
/// Y = X * B packs its panels on one thread from this many rows of X, or
/// below this many panels.
constexpr int64_t kSerialPackRows = 256, kSerialPackPanels = 4096;
/// Bounds on the rows of an SDDMM chunk.
constexpr int64_t kMinChunkRows = 16, kMaxChunkRows = 256;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Rows per chunk of Y = X * B for an X of `width` columns and register
/// tiles of `tile` rows.
int64_t spmmChunkRows(int64_t width, int64_t tile) {
  int64_t fit =
      kXChunkBytes / (std::max<int64_t>(width, 8) * int64_t(sizeof(float)));
  return std::clamp(fit / tile, int64_t(2), kChunkTiles) * tile;
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
    packRowPanels(p.x, m0, rows, 0, p.x.cols / kSparseBlock, xPacked.get(),
                  kernels->pairedRows);
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
  // Packing is O(active weights) against O(M * active weights) of
  // multiply-adds: for a large M one thread packs, sparing a parallel region
  // (each costs a wake-up and a join, which on shared cores can mean a
  // scheduler time slice).
  bool packAlone = m >= kSerialPackRows || list.count() < kSerialPackPanels;
  packPanels(p.b, list, panels.get(), packAlone ? 1 : threads);

  // 2. Chunks of M; for small M, parts of the output block columns too.
  int64_t chunkRows = spmmChunkRows(k, kernels.rowTile);
  chunkRows =
      std::min(chunkRows, ceilDiv(m, kernels.rowTile) * kernels.rowTile);
  int64_t chunks = ceilDiv(m, chunkRows);
  int64_t groupParts = chunks >= threads ? 1 : ceilDiv(threads, chunks);
  groupParts = std::min(groupParts, std::max<int64_t>(list.groups, 1));
  bool direct = directOutput(p.y);
  int64_t panelStride = rowPanelStride(chunkRows);

  // 3. The tasks. Every worker's scratch is allocated first, so that running
  //    out of memory fails before any tile of Y is written.
  int64_t tasks = chunks * groupParts;
  int64_t workers = workersFor(tasks, threads);
  std::vector<Buffer<float>> xScratch(workers), yScratch(workers);
  for (int64_t w = 0; w < workers; ++w) {
    xScratch[w] =
        allocateBuffer<float>(kBlocks * panelStride, "packed rows of X");
    if (!xScratch[w])
      return Status::failure();
    if (direct)
      continue;
    yScratch[w] = allocateBuffer<float>(chunkRows * n, "block-sparse output");
    if (!yScratch[w])
      return Status::failure();
  }
  return runTasks(tasks, threads, [&](int64_t w) {
    return SpmmWorker{p,
                      list,
                      panels.get(),
                      &kernels,
                      chunkRows,
                      groupParts,
                      direct,
                      std::move(xScratch[w]),
                      std::move(yScratch[w])};
  });
}

namespace {

/// The scratch and body of one thread of the SDDMM.
struct SddmmWorker {
  const Matrix<const float> &groupSide, &innerSide;
  const BlockList &list;
  const std::vector<std::vector<int32_t>> &usedInner;
  const SparseKernels *kernels;
  int64_t chunkRows, parts;
  Buffer<float> groupPacked, innerPacked;
  float *blocks; ///< This thread's accumulators, zeroed.

  bool ok() const { return groupPacked && innerPacked && blocks; }

  bool operator()(int64_t task) {
    int64_t chunk = task / parts, part = task % parts;
    int64_t m0 = chunk * chunkRows;
    int64_t rows = std::min(chunkRows, groupSide.rows - m0);
    int64_t stride = rowPanelStride(rows);
    auto [gBegin, gEnd] = splitGroups(list, parts, part);
    // The inner side's panels serve every group: pack the used ones once.
    for (int32_t h : usedInner[part])
      packRowPanels(innerSide, m0, rows, h, h + 1,
                    innerPacked.get() + h * stride, kernels->pairedRows);
    // A group's panel serves only its blocks: pack it just before.
    SddmmArgs args{groupPacked.get(),
                   0,
                   innerPacked.get(),
                   stride,
                   rows,
                   list.start.get(),
                   list.inner.get(),
                   blocks};
    for (int64_t g = gBegin; g < gEnd; ++g) {
      if (list.count(g) == 0)
        continue;
      packRowPanels(groupSide, m0, rows, g, g + 1, groupPacked.get(),
                    kernels->pairedRows);
      kernels->sddmm(args, g, g + 1);
    }
    return true;
  }
};

} // namespace

Status dsrt::runSparseSddmm(const SddmmProblem &p, const SparseKernels &kernels,
                            int threads) {
  // 1. Orientation: blocks are grouped by block rows of D (A's block
  //    columns) unless D is wider than tall; then by block columns of D and
  //    each block is accumulated transposed. Either way the inner operand,
  //    whose panels a chunk keeps, is the narrower of A and B.
  bool transposed = p.d.cols > p.d.rows;
  const Matrix<const float> &groupSide = transposed ? p.b : p.a;
  const Matrix<const float> &innerSide = transposed ? p.a : p.b;
  BlockList list;
  DS_RETURN_IF_ERROR(
      buildBlockList(transposed ? p.mask : p.mask.transposed(), p.block, list));
  int64_t m = p.a.rows, nnz = list.count();

  // 2. Tasks: chunks of M, and for small M parts of the groups.
  int64_t chunkRows =
      kSddmmInnerBytes / (std::max<int64_t>(innerSide.cols, 8) * sizeof(float));
  chunkRows = std::clamp(chunkRows / 16 * 16, kMinChunkRows, kMaxChunkRows);
  chunkRows = std::min(chunkRows, std::max<int64_t>(m, 1));
  int64_t chunks = nnz == 0 ? 0 : ceilDiv(m, chunkRows);
  int64_t parts =
      chunks >= threads ? 1 : ceilDiv(threads, std::max<int64_t>(chunks, 1));
  parts = std::min(parts, std::max<int64_t>(list.groups, 1));
  int64_t tasks = chunks * parts;
  // Each worker keeps its own copy of the active blocks of D: at most
  // kSddmmAccumulatorBytes of them, so a large weight on many threads runs
  // on fewer.
  int64_t copyBytes = std::max<int64_t>(nnz * 64 * sizeof(float), 1);
  threads = static_cast<int>(
      std::clamp<int64_t>(kSddmmAccumulatorBytes / copyBytes, 1, threads));
  int64_t workers = workersFor(tasks, threads);
  int64_t panelStride = rowPanelStride(chunkRows);

  // The inner block columns each part reads, in increasing order.
  std::vector<std::vector<int32_t>> usedInner(parts);
  {
    std::vector<uint8_t> seen(list.innerBlocks);
    for (int64_t part = 0; part < parts; ++part) {
      auto [gBegin, gEnd] = splitGroups(list, parts, part);
      std::fill(seen.begin(), seen.end(), 0);
      for (int64_t q = list.start[gBegin]; q < list.start[gEnd]; ++q)
        seen[list.inner[q]] = 1;
      for (int64_t h = 0; h < list.innerBlocks; ++h)
        if (seen[h])
          usedInner[part].push_back(static_cast<int32_t>(h));
    }
  }

  // 3. Every thread accumulates into its own copy of the active blocks,
  //    over a fixed range of tasks (so the sums are reproducible).
  Buffer<float> accumulators = allocateBuffer<float>(
      workers * nnz * 64, "block-sparse gradient accumulators");
  if (!accumulators)
    return Status::failure();
  DS_RETURN_IF_ERROR(runTasksOrdered(tasks, threads, [&](int64_t w) {
    float *blocks = accumulators.get() + w * nnz * 64;
    std::memset(blocks, 0, nnz * 64 * sizeof(float));
    return SddmmWorker{
        groupSide,
        innerSide,
        list,
        usedInner,
        &kernels,
        chunkRows,
        parts,
        allocateBuffer<float>(panelStride, "packed rows of a block column"),
        allocateBuffer<float>(list.innerBlocks * panelStride,
                              "packed rows of the SDDMM operand"),
        blocks};
  }));

  // 4. Sum the copies and write D group by group: the sums on active
  //    blocks (transposed back if need be), zeros elsewhere.
  parallelFor(list.groups, threads, [&](int64_t gBegin, int64_t gEnd) {
    float sum[64];
    for (int64_t g = gBegin; g < gEnd; ++g) {
      int64_t q = list.start[g];
      for (int64_t h = 0; h < list.innerBlocks; ++h) {
        const float *src = nullptr;
        if (q < list.start[g + 1] && list.inner[q] == h) {
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
        if (transposed) {
          // Block (g, h) holds D(8h + n, 8g + t) at [8t + n].
          for (int64_t n = 0; n < 8; ++n)
            for (int64_t t = 0; t < 8; ++t)
              p.d.at(8 * h + n, 8 * g + t) = src ? src[t * 8 + n] : 0.0f;
          continue;
        }
        for (int64_t t = 0; t < 8; ++t) {
          float *row = &p.d.at(8 * g + t, 8 * h);
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
