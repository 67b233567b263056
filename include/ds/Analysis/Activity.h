//===- Activity.h - Activity and seed dependence of a step ----*- C++ -*-===//
//
// Two dataflow facts about the one block of a training step, each computed
// by sweeps over the block in program order (a step has no control flow, so
// one pass forward and one backward reach the fixed point):
//  - activity: the float tensors that depend on a set of sources (the
//    parameters, or the parameters and the state) and that a target (the
//    loss) depends on. ds-autodiff gives exactly these values cotangents;
//    ds-import-linalg requires every op producing one to be a ds op.
//  - seed dependence: the backward values that depend on the seed
//    (`ds.seed`, d loss / d loss), i.e. the cotangents, as opposed to the
//    primal values (weights, activations) the backward also reads.
//
//===----------------------------------------------------------------------===//

#ifndef DS_ANALYSIS_ACTIVITY_H
#define DS_ANALYSIS_ACTIVITY_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::ds {

/// The values of `body` on a path from `sources` to `target`.
class ActivityAnalysis {
public:
  /// Computes activity in `body`. A value depends on the sources when it is
  /// one of them, or a float tensor result of an op with such an operand;
  /// the target depends on a value when it is the target, or a float
  /// tensor operand of an op with such a result.
  ActivityAnalysis(Block &body, ArrayRef<Value> sources, Value target);

  /// Whether `v` depends on a source and the target depends on `v`.
  bool isActive(Value v) const {
    return fromSources.contains(v) && toTarget.contains(v);
  }
  /// Whether one of `op`'s results is active.
  bool hasActiveResult(Operation *op) const;

private:
  llvm::DenseSet<Value> fromSources, toTarget;
};

/// The values of `body` that depend on the backward seed: the seed (the
/// op marked `ds.seed`) and the results of backward ops (`ds.vjp_of`) with
/// a seed-dependent operand. Forward ops never carry the dependence.
class SeedDependence {
public:
  explicit SeedDependence(Block &body);

  /// Whether `v` depends on the seed (a cotangent); false for values the
  /// sweep did not see.
  bool dependsOnSeed(Value v) const { return dependent.contains(v); }

private:
  llvm::DenseSet<Value> dependent;
};

} // namespace mlir::ds

#endif // DS_ANALYSIS_ACTIVITY_H
