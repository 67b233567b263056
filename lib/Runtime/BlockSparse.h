//===- BlockSparse.h - Block-sparse products and kernels --------*- C++ -*-===//
//
// The block-sparse training products of ds_runtime.h keep the weight W dense
// ([R, C], any strides) next to an int8 block mask, and list the active 8x8
// blocks from the mask on every call. That layout is the training loop's
// choice, not the kernels': pruning or regrowing a block is a rewrite of one
// mask byte and the zeroing of 64 weights, with no re-layout of the
// parameter, its gradient or the optimizer's moment tensors, and no state in
// the runtime to invalidate. The kernels pay for it by packing the active
// blocks per call, which is O(active weights) against the O(M * active
// weights) of the product itself.
//
// BlockSparse.cpp validates a call and reduces it to one of two problems:
//
//   SparseMatmulProblem  Y[M, N] = X[M, K] * B[K, N], B = op(W) * expand(mask)
//                        (op(W) = W^T for the forward, W for dX; the
//                        transpose is folded into the strides as in Gemm.h);
//   SddmmProblem         D[R, C] = A[M, R]^T * B[M, C] on the active blocks.
//
// BlockSparsePack.cpp builds the block lists and the packed panels,
// BlockSparseRun.cpp tiles and threads the products over a SparseKernels
// table, and BlockSparseKernels{Scalar,AVX2,AVX512}.cpp are the tables: one
// micro-kernel per product per ISA, all on the packed layouts below
// (BlockSparseKernelsAVX512Portable.cpp builds the AVX-512 source for any
// CPU, for tests). The library is built for the baseline ISA; only the
// kernel files carry target attributes, and BlockSparse.cpp calls them
// after asking the CPU.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_BLOCKSPARSE_H
#define DS_LIB_RUNTIME_BLOCKSPARSE_H

#include "Gemm.h"
#include "RuntimeInternal.h"

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace dsrt {

/// The granularity of every kernel: masks with larger blocks are expanded to
/// 8x8 blocks when the block lists are built.
constexpr int64_t kSparseBlock = 8;

//===----------------------------------------------------------------------===//
// Problems
//===----------------------------------------------------------------------===//

/// Y = X * B with B = op(W) restricted to the active blocks of `mask`.
/// x is M x K, b is K x N, mask is (K / block) x (N / block) (the mask of b,
/// transposed with it), y is M x N; K and N are multiples of `block`, itself
/// a positive multiple of 8. Sizes may be 0.
struct SparseMatmulProblem {
  Matrix<const float> x;
  Matrix<const float> b;
  Matrix<const int8_t> mask;
  Matrix<float> y;
  int64_t block;
};

/// D = A^T * B on the active blocks of `mask`, 0 elsewhere. a is M x R,
/// b is M x C, mask is (R / block) x (C / block), d is R x C.
struct SddmmProblem {
  Matrix<const float> a;
  Matrix<const float> b;
  Matrix<const int8_t> mask;
  Matrix<float> d;
  int64_t block;
};

//===----------------------------------------------------------------------===//
// Threads
//===----------------------------------------------------------------------===//

/// The threads runTasks uses for `tasks` tasks.
inline int64_t workersFor(int64_t tasks, int threads) {
  return std::max<int64_t>(1, std::min<int64_t>(tasks, threads));
}

/// Runs tasks [0, tasks) on workersFor(tasks, threads) threads of
/// parallelFor, each taking the next task from a shared counter rather than
/// a fixed share: the cores are often shared with other processes, and a
/// thread that is descheduled for a while then holds up one task, not a
/// share of the work. `worker(w)` is called once per thread w and returns
/// that thread's task body: an object holding its scratch, with `ok()`
/// (false if allocating it failed, the error recorded) and
/// `bool operator()(int64_t task)` (false, the error recorded, stops the
/// thread). Returns failure if any worker failed.
template <typename MakeWorker>
Status runTasks(int64_t tasks, int threads, MakeWorker &&worker) {
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  parallelFor(workersFor(tasks, threads), threads,
              [&](int64_t begin, int64_t end) {
                for (int64_t w = begin; w < end; ++w) {
                  auto body = worker(w);
                  if (!body.ok()) {
                    failed = true;
                    return;
                  }
                  for (int64_t task; (task = next.fetch_add(1)) < tasks;)
                    if (!body(task)) {
                      failed = true;
                      return;
                    }
                }
              });
  return failed ? Status::failure() : Status::success();
}

/// runTasks with a fixed assignment: worker w runs tasks [w T / W, (w + 1)
/// T / W) in order, so what each worker accumulates, and therefore a sum
/// over workers, is the same on every run with the same thread count (the
/// SDDMM's per-worker partial sums; a resumed run must reproduce them).
template <typename MakeWorker>
Status runTasksOrdered(int64_t tasks, int threads, MakeWorker &&worker) {
  std::atomic<bool> failed{false};
  int64_t workers = workersFor(tasks, threads);
  parallelFor(workers, threads, [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) {
      auto body = worker(w);
      if (!body.ok()) {
        failed = true;
        return;
      }
      for (int64_t task = w * tasks / workers, last = (w + 1) * tasks / workers;
           task < last; ++task)
        if (!body(task)) {
          failed = true;
          return;
        }
    }
  });
  return failed ? Status::failure() : Status::success();
}

//===----------------------------------------------------------------------===//
// Block lists and packed layouts
//===----------------------------------------------------------------------===//

/// The active 8x8 blocks of a block mask, grouped by block column (CSC):
/// the blocks of column group g are the block rows inner[p] for p in
/// [start[g], start[g + 1]), in increasing order. A product groups by the
/// blocks it writes: the column blocks of B for Y = X * B (each output block
/// column of Y sums over the blocks of one column of B), and the row blocks
/// of D for the SDDMM (pass the mask transposed).
struct BlockList {
  int64_t groups = 0;      ///< Column blocks (of 8) of the expanded mask.
  int64_t innerBlocks = 0; ///< Row blocks (of 8) of the expanded mask.
  Buffer<int64_t> start;   ///< groups + 1 offsets into inner.
  Buffer<int32_t> inner;   ///< The row block of each active block.

  int64_t count() const { return start[groups]; }
  int64_t count(int64_t g) const { return start[g + 1] - start[g]; }
};

/// Lists the active blocks of `mask`, a mask of `block`-sized blocks
/// expanded to 8x8 ones (a 16x16 block is 2x2 active 8x8 blocks).
Status buildBlockList(const Matrix<const int8_t> &mask, int64_t block,
                      BlockList &list);

/// Packs the active blocks of b (K x N) as 8x8 panels in list order, the
/// orientation every micro-kernel multiplies by: block p of group g and row
/// block h = inner[p] is panels[64 p + 8 k + n] = b(8 h + k, 8 g + n).
/// Shares the work among up to `threads` threads when there is enough.
void packPanels(const Matrix<const float> &b, const BlockList &list,
                float *panels, int threads);

/// The packed form of `rows` consecutive rows of a matrix S: one panel per
/// block column h of 8, rows after rows,
///   dst[h * rowPanelStride(rows) + 8 r + k] = S(m0 + r, 8 h + k),
/// or, for kernels that take rows in pairs (SparseKernels::pairedRows), the
/// two rows of each pair interleaved,
///   dst[h * rowPanelStride(rows) + 16 (r / 2) + 2 k + r % 2] = S(...).
/// A panel holds an even number of rows (an odd count gets a zero row) and
/// starts 64-byte aligned; panels are not a multiple of 4 KiB apart, which
/// would map the rows of all panels to the same L1 sets while packing.
int64_t rowPanelStride(int64_t rows);

/// Packs block columns [hBegin, hEnd) of rows [m0, m0 + rows) of s (whose
/// column count is a multiple of 8) as described at rowPanelStride, with the
/// panel of block column hBegin at dst.
void packRowPanels(const Matrix<const float> &s, int64_t m0, int64_t rows,
                   int64_t hBegin, int64_t hEnd, float *dst, bool paired);

//===----------------------------------------------------------------------===//
// Micro-kernels
//===----------------------------------------------------------------------===//

/// One call of the Y = X * B micro-kernel: a chunk of `rows` rows of X,
/// packed by packRowPanels, times the panels of groups [gBegin, gEnd).
struct SpmmArgs {
  const float *x;       ///< Packed rows of X.
  int64_t xBlockStride; ///< Floats between block columns of x.
  int64_t rows;         ///< Rows of the chunk (>= 1).
  const int64_t *start; ///< BlockList::start.
  const int32_t *inner; ///< BlockList::inner.
  const float *panels;  ///< packPanels of B.
  float *y;             ///< Y(r, 8 g + n) of the chunk at y[r * ldy + 8 g + n].
  int64_t ldy;
};

/// One call of the SDDMM micro-kernel: adds the contribution of a chunk of
/// `rows` rows of two operands, both packed by packRowPanels, to the active
/// blocks of groups [gBegin, gEnd): for D = A^T B grouped by block rows of
/// D, a is A and b is B; grouped by block columns, a is B and b is A, and
/// every block is accumulated transposed.
struct SddmmArgs {
  /// Packed rows of the group operand: block column g at a + g *
  /// aBlockStride (a stride of 0 when a holds only the one group's panel).
  const float *a;
  int64_t aBlockStride;
  const float *b; ///< Packed rows of the inner operand.
  int64_t bBlockStride;
  int64_t rows;         ///< Rows of the chunk (>= 1).
  const int64_t *start; ///< BlockList::start.
  const int32_t *inner; ///< BlockList::inner: the inner block columns.
  /// 64 floats per active block in list order, accumulated into:
  /// blocks[64 p + 8 t + n] += sum_r a(r, 8 g + t) * b(r, 8 inner[p] + n).
  float *blocks;
};

/// One instruction-set variant of the micro-kernels.
struct SparseKernels {
  const char *name;
  /// Rows of X one register tile covers: chunks are sized in multiples.
  int64_t rowTile;
  /// Whether the kernels read row panels packed with rows in pairs.
  bool pairedRows;
  /// Y(r, 8g..8g+8) = sum over the blocks p of g of X(r, 8 inner[p]..+8) *
  /// panel p, for every row r of the chunk and every g in [gBegin, gEnd):
  /// overwrites those columns of Y (a group without blocks gets zeros).
  void (*spmm)(const SpmmArgs &args, int64_t gBegin, int64_t gEnd);
  /// blocks[p] += A(rows, 8 g..+8)^T * B(rows, 8 inner[p]..+8).
  void (*sddmm)(const SddmmArgs &args, int64_t gBegin, int64_t gEnd);
};

/// Portable loops; always available.
const SparseKernels &scalarSparseKernels();
/// AVX2 + FMA; call only where the CPU has both.
const SparseKernels &avx2SparseKernels();
/// AVX-512F; call only where the CPU has it.
const SparseKernels &avx512SparseKernels();
/// The AVX-512F kernels' source compiled for the baseline ISA: the same
/// algorithm on any CPU, so tests exercise it where no AVX-512 CPU is at
/// hand (DSRT_SPARSE_KERNEL=avx512-portable). Slow; never chosen by auto.
const SparseKernels &portableAVX512SparseKernels();

//===----------------------------------------------------------------------===//
// Drivers
//===----------------------------------------------------------------------===//

/// Computes a validated problem with nonzero M, K-or-N on the packed panels
/// with `kernels` on `threads` threads.
Status runSparseMatmul(const SparseMatmulProblem &problem,
                       const SparseKernels &kernels, int threads);

/// Computes a validated SDDMM (any M, including 0) with `kernels`.
Status runSparseSddmm(const SddmmProblem &problem, const SparseKernels &kernels,
                      int threads);

} // namespace dsrt

#endif // DS_LIB_RUNTIME_BLOCKSPARSE_H
