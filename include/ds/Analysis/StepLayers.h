//===- StepLayers.h - A training step as a chain of layers -----*- C++ -*-===//
//
// Pipeline partitioning cuts a step between layers. A layer here is a
// segment of the forward (in block order) between two cut candidates: the
// points where the activations live across are one tensor of the smallest
// size seen (between the blocks of a transformer: the residual stream).
// Every op of the step belongs to one layer: forward ops by position,
// backward ops through the forward op they differentiate (`ds.op_id`),
// update ops through the parameter or state they update. The costs of a
// layer are the sums of its ops' costs (CostModel.h).
//
//===----------------------------------------------------------------------===//

#ifndef DS_ANALYSIS_STEPLAYERS_H
#define DS_ANALYSIS_STEPLAYERS_H

#include "ds/Partition/Planner.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <vector>

namespace mlir::ds {

/// What each op of a training step is to pipeline partitioning:
///  - Forward: an op of the forward (it has a `ds.op_id` and no
///    `ds.vjp_of`) that depends on a batch input: it runs per micro-batch on
///    the stage of its layer; also an untagged op computed from such ops
///    (it goes with the latest of them);
///  - Backward: an op of the backward (`ds.vjp_of`) of a Forward op that
///    reads per-micro-batch values;
///  - Update: an op that depends on the backward's values and feeds no
///    Backward op (loss-scale unscaling, all-reduces, clipping, the
///    optimizer): it runs once per step on the micro-batches' mean;
///  - Free: everything else (constants, state arithmetic, ops of parameters
///    alone): pure, cloned into whichever function needs it.
enum class OpPhase { Free, Forward, Backward, Update };

struct StepPhases {
  llvm::DenseMap<Operation *, OpPhase> phase;
  /// For Backward ops: the Forward op they differentiate; for derived
  /// Forward ops: the owned Forward op they go with.
  llvm::DenseMap<Operation *, Operation *> ownerOf;
  /// Forward ops that own their place, in block order.
  SmallVector<Operation *> forward;
  OpPhase of(Operation *op) const { return phase.lookup(op); }
};

/// Classifies the ops of `step` (one block). Fails with a diagnostic when the
/// step has more than one block or no forward op reads a batch input.
FailureOr<StepPhases> classifyStep(func::FuncOp step);

struct StepLayers {
  /// Per layer: its cost for the planner (name: the common prefix of its
  /// parameters, or "layer<i>").
  std::vector<::ds::partition::LayerCost> costs;
  StepPhases phases;
  /// The layer of each Forward op (phases.forward).
  llvm::DenseMap<Operation *, unsigned> layerOf;
  /// The forward values crossing each cut candidate (cut i lies after
  /// layer i), i.e. what a stage boundary there sends.
  std::vector<SmallVector<Value>> crossing;
};

/// Splits `step` (a training step after ds-insert-optimizer) into layers
/// and costs them. The step's batch is one micro-batch (ds-partition-
/// pipeline feeds M of them per step), so the costs are per micro-batch.
/// Fails with a diagnostic on `step` when the forward has no cut candidate.
FailureOr<StepLayers> collectStepLayers(func::FuncOp step);

} // namespace mlir::ds

#endif // DS_ANALYSIS_STEPLAYERS_H
