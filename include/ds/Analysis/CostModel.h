//===- CostModel.h - What one op of a training step costs ------*- C++ -*-===//
//
// The cost model of ds-partition-pipeline and ds-plan: per op of a step,
// its FLOPs at the precision ds-assign-precision chose (read off the
// operand element types: f8 -> FP8, bf16/f16 -> BF16, i8 -> INT8, f32,
// f64), the FLOPs a block-sparse kernel really executes (scaled by the
// mask density the sparsity schedule targets), and the bytes it moves; per
// step argument the bytes it keeps resident. ds-partition-pipeline sums
// these per layer into the planner's LayerCost (Planner.h).
//
//===----------------------------------------------------------------------===//

#ifndef DS_ANALYSIS_COSTMODEL_H
#define DS_ANALYSIS_COSTMODEL_H

#include "ds/Partition/Cluster.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

namespace mlir::ds {

struct OpCost {
  /// FLOPs of one execution, by precision; those of block-sparse kernels
  /// (already scaled by the density) apart from dense ones.
  ::ds::partition::PerPrecision denseFlops{}, sparseFlops{};
  /// Bytes read and written (operands + results), for the roofline.
  double bytesMoved = 0;

  OpCost &operator+=(const OpCost &other);
};

/// The cost of one op of a step (forward, backward or update). Ops with no
/// arithmetic (transpose, slice, concat) cost their bytes only; views
/// (reshape, constants, stop_gradient) cost nothing; unknown ops cost one
/// FLOP per result element at their precision. The per-element weights of
/// each op are listed in lib/Analysis/CostModel.cpp.
OpCost costOf(Operation *op);

/// The precision an op computes in, from its operand and result types.
::ds::partition::Precision precisionOf(Operation *op);

/// Bytes of a value's tensor type (0 for non-tensors).
double bytesOf(Value v);

/// The density (kept fraction of 8x8 blocks) a block-sparse op runs at: the
/// final target of the module's sparsity schedule (`ds.sparsity`): 1 - final
/// for the uniform and global distributions, the weight's own ERK target
/// for `erk`; 1 without a schedule.
double blockDensityOf(Operation *op);

} // namespace mlir::ds

#endif // DS_ANALYSIS_COSTMODEL_H
