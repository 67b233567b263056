//===- KernelUtils.h - IR helpers of the GPU kernel builders ----*- C++ -*-===//
//
// What the kernel builders (GPUKernelBuilders.h) share: launches of a
// given size, index arithmetic, and a linalg body cloned at given loop
// indices. Internal to lib/Conversion/LinalgToGPU.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_CONVERSION_LINALGTOGPU_KERNELUTILS_H
#define DS_LIB_CONVERSION_LINALGTOGPU_KERNELUTILS_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"

namespace mlir {
class IRMapping;
} // namespace mlir

namespace mlir::ds::gpu_kernels {

Value indexConstant(OpBuilder &b, Location loc, int64_t v);

/// The product of `values` (1 for none).
Value product(OpBuilder &b, Location loc, ArrayRef<Value> values);

/// Builds a launch of `blocks` x (`threads`, `threadsY`) whose body `body`
/// fills (`threadsY` null: one), with `workgroup` shared-memory buffers.
gpu::LaunchOp buildLaunch(OpBuilder &b, Location loc, Value blocks,
                          Value threads,
                          function_ref<void(OpBuilder &, gpu::LaunchOp)> body,
                          Value threadsY = {}, TypeRange workgroup = {});

/// min(max(n, 1), cap): a launch needs one block even for an empty space.
Value clampBlocks(OpBuilder &b, Location loc, Value n, int64_t cap);

/// A transpose tile's side: a warp's width, so that each warp reads one
/// tile row and writes one tile column, both contiguous in memory.
constexpr int64_t kTransposeTile = 32;

/// A 32 x 33 shared-memory tile for elements of `et` (8 to 64 bits): raw
/// bits widened to 32 (or 64), so that each element is a whole bank word
/// and FP8, BF16 and f32 share the code; the extra column staggers a tile
/// column across the banks.
MemRefType transposeTileType(Type et);

/// Where a thread of a tiled launch (built at the start of its body) works
/// in each tile: column `tx` = tid mod 32 and first row `ty` = tid / 32,
/// then every `passStride` = blockSize / 32 rows; `side` is the tile's side
/// as an index.
struct TileThread {
  Value side, tx, ty, passStride;
};
TileThread tileThread(OpBuilder &b, Location loc, gpu::LaunchOp launch,
                      int64_t blockSize);

/// Stores `v` into `tile` (transposeTileType) at (`row`, `col`), and loads
/// it back as `et`.
void storeToTile(OpBuilder &b, Location loc, Value v, Value tile, Value row,
                 Value col);
Value loadFromTile(OpBuilder &b, Location loc, Type et, Value tile, Value row,
                   Value col);

/// The values of `map`'s results at `ivs`.
SmallVector<Value> applyMap(OpBuilder &b, Location loc, AffineMap map,
                            ArrayRef<Value> ivs);

/// The gpu.all_reduce kind of a reduction's combiner op, if it has one.
std::optional<gpu::AllReduceOperation> combinerKind(Operation *op);

/// The neutral element of `kind` in `t` (null: none).
TypedAttr identityOf(gpu::AllReduceOperation kind, Type t);

/// The combiner of a reduction generic: the op the body yields, which must
/// read the output's block argument, and only it (null: none).
Operation *combinerOf(linalg::GenericOp op);

/// The allocation or argument `v` is a view of (through every view-like
/// op).
Value viewRoot(Value v);

/// Clones `op`'s body (its terminator aside) at loop indices `ivs` into
/// `map`, loading each operand the body uses and `map` does not give.
/// `maskReads`: an input element the body does not use at `ivs`
/// (MaskedReads.h) is not loaded; only for a caller that takes nothing but
/// the body's results from `map` (not the loaded elements, for another op).
void cloneBodyAt(OpBuilder &b, Location loc, linalg::GenericOp op,
                 ArrayRef<Value> ivs, IRMapping &map, bool maskReads = false);

/// Stores what `op`'s body yields at loop indices `ivs` (cloned there into
/// `map`, cloneBodyAt) into its outputs where their maps say, and returns
/// the values stored, one per output.
SmallVector<Value> storeYieldedAt(OpBuilder &b, Location loc,
                                  linalg::GenericOp op, ArrayRef<Value> ivs,
                                  const IRMapping &map);

} // namespace mlir::ds::gpu_kernels

#endif // DS_LIB_CONVERSION_LINALGTOGPU_KERNELUTILS_H
