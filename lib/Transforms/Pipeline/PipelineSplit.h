//===- PipelineSplit.h - A step cut into pipeline stages -------*- C++ -*-===//
//
// The IR half of ds-partition-pipeline: given a step, its layers and the
// stage of each layer, write per stage the micro-batch forward and
// backward functions, the once-per-step update and the driver that runs the
// schedule (see the pass description in Passes.td).
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_TRANSFORMS_PIPELINE_PIPELINESPLIT_H
#define DS_LIB_TRANSFORMS_PIPELINE_PIPELINESPLIT_H

#include "ds/Analysis/StepLayers.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::ds::pipeline {

enum class ScheduleKind { GPipe, OneFOneB };

struct SplitOptions {
  unsigned stages = 1;
  unsigned microBatches = 1;
  ScheduleKind schedule = ScheduleKind::OneFOneB;
};

/// One slot of a stage's schedule: the forward or backward of micro-batch
/// `micro`.
struct Slot {
  bool forward;
  unsigned micro;
};

/// The order in which stage `stage` runs the forwards and backwards of the
/// micro-batches. GPipe: all forwards, then all backwards; 1F1B
/// (PipeDream-Flush): min(S - 1 - k, M) forwards, then one forward and one
/// backward alternately, then the remaining backwards. Backwards run in
/// micro-batch order in both, so gradients accumulate in the same order as
/// with one stage.
SmallVector<Slot> stageSchedule(const SplitOptions &options, unsigned stage);

/// Rewrites `step` into the stage functions (`@<step>_s<k>` and its
/// `_fwd`, `_bwd`, `_update`) and erases it. `stageOfLayer[l]` is the stage
/// of layer l of `layers`. Channel tags start at `nextTag`, which is
/// advanced. Fails with a diagnostic naming what cannot be split.
LogicalResult splitStep(func::FuncOp step, const StepLayers &layers,
                        ArrayRef<unsigned> stageOfLayer,
                        const SplitOptions &options, int64_t &nextTag);

} // namespace mlir::ds::pipeline

#endif // DS_LIB_TRANSFORMS_PIPELINE_PIPELINESPLIT_H
