//===- GPUKernelBuilders.h - gpu.launch shapes of the GPU path --*- C++ -*-===//
//
// The kernel shapes convert-linalg-to-ds-gpu emits, as reusable builders:
// a 1-D grid-stride loop over an iteration space, parallel reductions
// (a block, a warp or a thread per output), and a one-thread kernel for scalar
// host code. Each builds a `gpu.launch` at the builder's insertion point;
// outlining and NVVM lowering come later in ds-gpu-pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_CONVERSION_LINALGTOGPU_GPUKERNELBUILDERS_H
#define DS_LIB_CONVERSION_LINALGTOGPU_GPUKERNELBUILDERS_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"

#include <utility>

namespace mlir::ds::gpu_kernels {

/// Threads per block and the grid's cap (grid-stride loops cover the rest).
struct LaunchShape {
  int64_t blockSize = 256;
  int64_t maxBlocks = 4096;
  /// Elements per thread per iteration of an elementwise grid-stride loop
  /// (unrollFactor); 0 picks it from the element types.
  int64_t unroll = 0;
  /// Elementwise loops over contiguous buffers move 16-byte vectors
  /// (buildVectorElementwiseLaunch, VectorKernels.h).
  bool vectorize = true;
  /// A warp's row group keeps the row elements several members read in
  /// registers (RowGroupKernels.cpp).
  bool cacheRows = true;
  /// A row group takes the column sums over its rows (RowGroups.h).
  bool rowColumns = true;
};

/// The most elements per thread per iteration of an elementwise loop.
constexpr int64_t kMaxUnroll = 16;

/// The index values of `linear` in a row-major space of `sizes` (the last
/// dimension fastest).
SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value linear,
                               ArrayRef<Value> sizes);

/// Elementwise spaces of at most this many elements (a constant count) run
/// in one block: a few elements per thread cost less than a launch, and a
/// one-block launch can join the one-block launches around it
/// (ds-merge-gpu-launches), as the FP8 amax history's updates do.
constexpr int64_t kOneBlockElements = 4096;

/// A 1-D launch's grid-stride loop start for the thread (its global index
/// along x) and its stride (the grid's threads along x).
std::pair<Value, Value> gridStrideStart(OpBuilder &b, Location loc,
                                        gpu::LaunchOp launch);

/// Emits `for (i = lb; i < ub; i += stride) body(b, loc, i)` as a loop
/// nothing reorders. `unroll` (0: unrollFactor's choice, 1: none, N: N)
/// elements may instead go in groups: each iteration of a first loop takes
/// `unroll` elements a stride apart, and the bodies' stores move after all
/// of them, so that a thread has `unroll` loads in flight rather than one
/// (without the move, a load could not pass the previous element's store:
/// the buffers may alias; and one small load per thread at a time keeps too
/// few bytes in flight to fill the memory system); the loop one element at
/// a time then takes what is left. Only where an iteration
/// canUnrollElementwise (the iterations being independent, as a parallel
/// loop's are). Returns the elements per group (1: no groups).
int64_t buildStridedLoop(OpBuilder &b, Location loc, Value lb, Value ub,
                         Value stride, int64_t unroll,
                         function_ref<void(OpBuilder &, Location, Value)> body);

/// Emits a launch of min(ceil(total / (blockSize * u)), maxBlocks) blocks
/// in which every i in [0, total) runs `body(b, loc, i)` once, in a
/// grid-stride loop (buildStridedLoop, with `unroll`; u elements a group).
/// `elementwise`: each iteration is one element's work, so a constant total
/// of at most kOneBlockElements gets one block (not so for a column
/// reduction's tasks, each a run of many elements).
gpu::LaunchOp
buildGridStrideLaunch(OpBuilder &b, Location loc, Value total,
                      const LaunchShape &shape,
                      function_ref<void(OpBuilder &, Location, Value)> body,
                      bool elementwise = false, int64_t unroll = 1);

/// Whether the operations of `body` (an iteration of a parallel loop) may
/// run `unroll` iterations with their stores moved after all of them: each
/// is a memref.load, a memref.store or a memory-effect-free operation, and
/// no load follows a store.
bool canUnrollElementwise(Block &body);

/// The loads and stores of a group of elements at most, by default
/// (unrollFactor): every one holds registers until the group's stores.
constexpr int64_t kAccessesPerGroup = 16;

/// The elements per thread per iteration for the elementwise body `body`
/// (canUnrollElementwise): `requested` when positive; otherwise 16 bytes'
/// worth of its widest loaded or stored element (4 for f32, 8 for bf16 and
/// FP8), as PyTorch's elementwise kernels take 4 to 16, but no more than
/// kAccessesPerGroup loads (that differ between elements) and stores in
/// all, rounded down to a power of two, and between 1 and 8.
int64_t unrollFactor(Block &body, int64_t requested);

/// On a reduction for buildReductionLaunch or buildRowGroupLaunch: the
/// constant its output holds when it starts (a filled accumulator), which
/// the kernel then folds in instead of reading the output.
constexpr llvm::StringLiteral kConstantInitAttr = "ds.gpu_constant_init";

/// Whether `op` is a reduction buildReductionLaunch can run in parallel:
/// one output of f32, f64, i32 or i64, whose body yields `combine(out, x)`
/// with a combiner gpu.all_reduce knows, reading `out` nowhere else.
bool isParallelReduction(linalg::GenericOp op);

/// Replaces the (buffer-level) reduction `op` by launches, in one of two
/// shapes, whichever reads its inputs at consecutive addresses from
/// consecutive threads:
/// - a block per output element (a grid-stride loop over outputs past
///   maxBlocks), when the inputs are contiguous along the reduced
///   dimensions (a row's sum, softmax's max): the block's threads stride
///   over the reduced elements, then combine their partial results with a
///   block-wide `gpu.all_reduce`, and thread 0 folds the total into the
///   output; or, for many short rows (static sizes: at least 8192 outputs
///   of at most 1024 elements), a warp per output, combining with
///   `gpu.subgroup_reduce`;
/// - a thread per output element, when they are contiguous along the
///   outputs instead (a column's sum, a bias gradient): each thread folds
///   its output's elements in order.
/// With few outputs of many elements (static sizes), each output's range
/// is split over several blocks (threads) that write partial results into
/// a buffer, and a second launch folds those into the output. Requires
/// isParallelReduction(op).
///
/// `sibling`, for a reduction over every loop: an all-parallel generic
/// that its threads also compute at each element they combine
/// (canShareReductionKernel, ReductionSiblings.h), reading the tensor the
/// two share once. The caller checks that neither writes what the other
/// touches, and erases the sibling. `columns`, with a transposing sibling
/// (isTransposingGeneric): a column reduction that runs over its tiles too
/// (canShareColumnTiles, and buildTransposingLaunch below).
void buildReductionLaunch(OpBuilder &b, linalg::GenericOp op,
                          const LaunchShape &shape,
                          linalg::GenericOp sibling = {},
                          linalg::GenericOp columns = {});

/// Whether buildReductionLaunch gives `op` (isParallelReduction) a thread
/// per output, consecutive threads on consecutive outputs (a column
/// reduction): its inputs coalesce along the outputs' innermost loop and
/// not along the reduced one.
bool getsColumnReduction(linalg::GenericOp op);

/// Emits the column reductions `ops` (getsColumnReduction, over loops of
/// the same sizes, in program order, neither writing what another touches:
/// columnGroups, ReductionSiblings.h) as one launch whose threads fold all
/// of them side by side, loading an input several read through the same
/// map once. `producer` (ColumnGroup's, ReductionSiblings.h): an
/// all-parallel generic over the same loops that each thread computes
/// first at each element it folds, storing its outputs and handing the
/// members what they read of them and of its inputs. The caller erases
/// them all.
void buildColumnGroupLaunch(OpBuilder &b, ArrayRef<linalg::GenericOp> ops,
                            const LaunchShape &shape,
                            linalg::GenericOp producer = {});

/// Below this many reduced elements per output, a block per output wastes
/// most of its threads: one thread per output loops instead.
constexpr int64_t kMinParallelReduction = 32;

/// Whether consecutive threads along loop dimension `d` of `op` read every
/// buffer it reads at consecutive (or the same) addresses: the condition
/// for their loads to coalesce.
bool coalescedAlong(linalg::GenericOp op, unsigned d);

/// Whether buildReductionLaunch gives `op` a block per output, unsplit,
/// with static loops, the output dimensions first: a row reduction that a
/// row group (buildRowGroupLaunch) can take.
bool isBlockRowReduction(linalg::GenericOp op, const LaunchShape &shape);

/// Emits, before the last of `ops`, one launch in which a block per row
/// (a warp per row, for rows as buildReductionLaunch gives a warp; a
/// grid-stride loop over rows past maxBlocks) runs `ops` in order on its
/// row, with a barrier between consecutive ones: so a softmax's or a layer
/// norm's passes over a row read it from DRAM once, later passes hitting
/// the cache. Each op's loops are `rows` (thread 0 runs it: a fill, a copy
/// or an all-parallel generic) or `rows` x `reduced` (the threads stride
/// over the row: an all-parallel generic, a fill, a copy, or a row
/// reduction, as in buildReductionLaunch). The caller checks that the ops
/// may move there and that no row reads what another row's ops write
/// (RowGroups.h); the ops are left in place.
void buildRowGroupLaunch(OpBuilder &b, ArrayRef<Operation *> ops,
                         ArrayRef<int64_t> rows, ArrayRef<int64_t> reduced,
                         const LaunchShape &shape);

/// Whether `op` swaps its two innermost dimensions (the leading ones kept)
/// on static buffers of 8- to 64-bit elements: what asTransposingCopy
/// takes. PrepareLibraryGemms makes such copies for cuBLASLt's FP8 GEMMs,
/// which need the TN layout.
bool isTiledTranspose(linalg::TransposeOp op);

/// `op` (isTiledTranspose) as a copy over its input's loops that writes its
/// output transposed, built at the builder's point (`op` is left in place):
/// an isTransposingGeneric op, which buildTransposingLaunch moves through
/// shared-memory tiles, so that both the reads and the writes coalesce.
linalg::GenericOp asTransposingCopy(OpBuilder &b, linalg::TransposeOp op);

/// Whether `op` is an all-parallel generic on static buffers that writes
/// some outputs (of 8- to 64-bit elements) transposed: innermost along
/// another loop than its innermost one, which its inputs and other outputs
/// are read and written along (ds-fuse-transposes' cast-transposes).
bool isTransposingGeneric(linalg::GenericOp op);

/// The loop along which `op`'s transposed outputs are innermost (the rows
/// of its tiles), if `op` isTransposingGeneric.
std::optional<unsigned> transposedRowLoop(linalg::GenericOp op);

/// Emits `op` (isTransposingGeneric) as a launch over 32 x 32 tiles of
/// its innermost loop and the transposed outputs' one, in a grid-stride
/// loop over the tiles: a warp computes a tile row, writes the other
/// outputs' elements directly, and after a barrier writes a tile column of
/// each transposed output from shared memory (a barrier again before the
/// next tile). So the transposed writes coalesce as well as the rest,
/// where a thread per element would use one byte of every 32-byte sector
/// it writes for FP8.
///
/// `columns` (canShareColumnTiles, ReductionSiblings.h): a reduction of
/// every loop but the tiles' columns, reading a tensor `op` reads, which
/// the tiles fold too: each tile's column sums go to a partial buffer, a
/// row per tile row, folded into the output by a second launch. The caller
/// erases it.
void buildTransposingLaunch(OpBuilder &b, linalg::GenericOp op,
                            const LaunchShape &shape,
                            linalg::GenericOp columns = {});

/// Moves `ops` (consecutive in one block, in order) into a one-block,
/// one-thread launch inserted where the first was. Their results must not
/// be used after the last.
gpu::LaunchOp buildSingleThreadLaunch(OpBuilder &b, ArrayRef<Operation *> ops);

} // namespace mlir::ds::gpu_kernels

#endif // DS_LIB_CONVERSION_LINALGTOGPU_GPUKERNELBUILDERS_H
