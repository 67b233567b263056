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
/// fills (`threadsY` null: one).
gpu::LaunchOp buildLaunch(OpBuilder &b, Location loc, Value blocks,
                          Value threads,
                          function_ref<void(OpBuilder &, gpu::LaunchOp)> body,
                          Value threadsY = {});

/// min(max(n, 1), cap): a launch needs one block even for an empty space.
Value clampBlocks(OpBuilder &b, Location loc, Value n, int64_t cap);

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
void cloneBodyAt(OpBuilder &b, Location loc, linalg::GenericOp op,
                 ArrayRef<Value> ivs, IRMapping &map);

} // namespace mlir::ds::gpu_kernels

#endif // DS_LIB_CONVERSION_LINALGTOGPU_KERNELUTILS_H
