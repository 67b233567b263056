//===- Planner.h - Pipeline stage cuts and device assignment ---*- C++ -*-===//
//
// The planner of ds-partition-pipeline and ds-plan, over a chain of layers
// with costs (CostModel.h builds them from IR; ds-plan also from shapes):
//
//  - cutLayers: PipeDream's dynamic program over cut points, minimising the
//    slowest stage with each stage inside its device's memory;
//  - solveAssignment: the Hungarian algorithm (rectangular allowed), the
//    seed's "minimise sum(task_cost * mismatch_penalty)";
//    solveBottleneckAssignment: minimise the largest assigned cost;
//  - planPipeline: cut -> assign -> re-cut for the assigned devices,
//    bounded, from several starts, then a local search over the devices,
//    keeping the best predicted step time; horizontal blocking of a layer
//    no single device can hold.
// Pure C++ over LLVMSupport: no MLIR here.
//
//===----------------------------------------------------------------------===//

#ifndef DS_PARTITION_PLANNER_H
#define DS_PARTITION_PLANNER_H

#include "ds/Partition/Cluster.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace ds::partition {

/// One layer of the chain: what one micro-batch costs in it (forward and
/// backward together) and what it keeps resident.
struct LayerCost {
  std::string name;
  /// Executed FLOPs per micro-batch by the precision they run in; dense
  /// ones and those of block-sparse kernels (already scaled by the density)
  /// apart, since devices speed them up differently.
  PerPrecision denseFlops{}, sparseFlops{};
  double bytesMoved = 0; ///< memory traffic per micro-batch (roofline)
  /// Bytes of the memory-bound ops (elementwise, reductions, norms, data
  /// movement: everything but GEMMs and convolutions) per micro-batch. They
  /// run at the device's memory bandwidth one after another, so their time
  /// adds to the GEMMs' instead of hiding under it: a layer's time is
  /// max(GEMM FLOPs / rate, bytesMoved / bandwidth) + streamBytes /
  /// bandwidth.
  double streamBytes = 0;
  /// Resident bytes: parameters, optimizer state, technique state (masks,
  /// residuals, amax histories, observers).
  double paramBytes = 0, optimizerBytes = 0, stateBytes = 0;
  /// Activations kept per in-flight micro-batch for the backward.
  double activationBytes = 0;
  /// Bytes sent to the next layer per micro-batch (the cotangent coming
  /// back is as large).
  double outputBytes = 0;
  /// Bytes of its gradient all-reduce per step (after compression) when
  /// data parallelism is on; 0 otherwise.
  double allReduceBytes = 0;
  /// A matmul whose weight may be split by output blocks over two devices
  /// (horizontal blocking) when no single device holds it.
  bool splittable = false;
};

/// Seconds one micro-batch spends in `layer` on `device`: compute (each
/// precision at the device's rate, falling back to the next wider
/// precision it supports, INT8 -> FP8 -> BF16 -> F32 -> F64, and F64 to
/// F32 on a device without F64; sparse FLOPs at `sparseSpeedup` times the
/// dense rate) or memory traffic, whichever is slower (roofline). +infinity
/// when the device runs none of the fallbacks.
double layerTime(const LayerCost &layer, const DeviceProfile &device);

enum class Schedule { GPipe, OneFOneB };
llvm::StringRef stringifySchedule(Schedule s);

enum class AssignObjective {
  Sum,       ///< Hungarian: minimise the sum of stage costs (the seed)
  Bottleneck ///< minimise the slowest stage (the step time)
};

struct PlanOptions {
  unsigned microBatches = 1;
  Schedule schedule = Schedule::OneFOneB;
  AssignObjective objective = AssignObjective::Bottleneck;
  /// Number of stages; 0 = choose the fastest count <= devices.
  unsigned stages = 0;
  /// Rounds of cut -> assign -> re-cut.
  unsigned maxRounds = 4;
  /// Then improve the best plan by local moves on its devices (swaps,
  /// replacements, rotations, reversals), each re-cut; off: the
  /// iteration's plan as is.
  bool localSearch = true;
  /// Baselines for ds-plan: cut into equal layer counts (uniform), or plan
  /// as if every device were the cluster's slowest (homogeneous-only),
  /// then evaluate on the real devices.
  bool uniformSplit = false, homogeneousOnly = false;
  /// Allow horizontal blocking of a splittable layer over two devices.
  bool allowHorizontalSplit = true;
};

struct StagePlan {
  unsigned firstLayer = 0, endLayer = 0; ///< layers [first, end)
  unsigned device = 0;
  /// With horizontal blocking: the second device holding half of the
  /// (single, splittable) layer's output blocks; -1 otherwise.
  int splitDevice = -1;
  double computeSeconds = 0; ///< per micro-batch, forward + backward
  double sendSeconds = 0;    ///< per micro-batch, activation + cotangent
  double memoryBytes = 0;    ///< peak, with the schedule's in-flight count
  double memoryLimit = 0;
};

struct Plan {
  std::vector<StagePlan> stages;
  unsigned microBatches = 1;
  Schedule schedule = Schedule::OneFOneB;
  /// Predicted seconds per step: (M + S - 1) x the slowest stage (compute
  /// + send) + the slowest update (optimizer step: 3 x params + 2 x
  /// optimizer bytes at the device's memory bandwidth, plus 2 x
  /// allReduceBytes over the interconnect).
  double stepSeconds = 0;
  /// Idle fraction of the pipeline: 1 - M x sum(stage) / (S x pipeline
  /// time), which is (S - 1) / (M + S - 1) for equal stages.
  double bubbleFraction = 0;
  /// Busy compute seconds (M x each device's compute per micro-batch) over
  /// (devices used x step time), and over (all devices x step time).
  double utilisation = 0, clusterUtilisation = 0;
  unsigned rounds = 0; ///< cut -> assign rounds run for the chosen plan
  /// One line per decision, for the printed plan.
  std::vector<std::string> log;
};

/// Rows x cols cost matrix (row-major); every row is assigned a distinct
/// column when rows <= cols, every column a distinct row otherwise.
/// Entries may be +infinity (forbidden pairs).
struct Assignment {
  std::vector<int> rowToCol; ///< -1 for unassigned rows
  /// The objective: the sum of the assigned costs (solveAssignment) or the
  /// largest one (solveBottleneckAssignment); +infinity when no assignment
  /// avoids the forbidden pairs (then rows that found no column are -1).
  double cost = 0;
};
Assignment solveAssignment(llvm::ArrayRef<double> cost, unsigned rows,
                           unsigned cols);
Assignment solveBottleneckAssignment(llvm::ArrayRef<double> cost, unsigned rows,
                                     unsigned cols);

/// Cuts `layers` into `stageLimits.size()` consecutive non-empty stages,
/// stage k on a device with memory `stageLimits[k]` and per-layer seconds
/// `layerSeconds[k][l]`, minimising the slowest stage (compute + sending
/// its output); returns the end layer of each stage, or an error naming
/// the largest stage and the memory it needs when nothing fits.
/// `sendSeconds[k]` is seconds per byte from stage k's device to stage
/// k+1's (1 / bandwidth) and `sendLatency[k]` seconds per message (empty:
/// 0); a stage ending in layer l sends two messages of outputBytes(l) per
/// micro-batch (activation forward, cotangent back): 2 x (latency + bytes x
/// sendSeconds). The last stage sends nothing. options.uniformSplit: equal
/// layer counts (the first stages take one more) instead of the search.
llvm::Expected<std::vector<unsigned>>
cutLayers(llvm::ArrayRef<LayerCost> layers,
          llvm::ArrayRef<std::vector<double>> layerSeconds,
          llvm::ArrayRef<double> stageLimits,
          llvm::ArrayRef<double> sendSeconds, const PlanOptions &options,
          llvm::ArrayRef<double> sendLatency = {});

/// Peak memory of a stage holding `layers[first, end)` under the schedule:
/// resident bytes + activations of the micro-batches in flight (GPipe: M;
/// 1F1B: min(M, S - k) for stage k of S).
double stageMemory(llvm::ArrayRef<LayerCost> layers, unsigned first,
                   unsigned end, unsigned stage, unsigned numStages,
                   const PlanOptions &options);

/// Plans `layers` on `cluster`: for each stage count (or options.stages),
/// the seed's cut -> assign -> re-cut iteration from several device
/// choices, then local moves on the devices of the best, each re-cut
/// (docs/PipelinePartitioning.md, "Planner"); the fastest predicted step
/// wins. Errors: more stages than devices or layers, nothing fits (naming
/// the largest stage and what it needs).
llvm::Expected<Plan> planPipeline(llvm::ArrayRef<LayerCost> layers,
                                  const Cluster &cluster,
                                  const PlanOptions &options);

/// Predicted step time of a given plan's cuts and devices (used by the
/// brute-force checks and the baselines); fills in each stage's numbers
/// and the plan's totals. +infinity when a stage exceeds its memory. The
/// stage devices must be distinct.
double evaluatePlan(llvm::ArrayRef<LayerCost> layers, const Cluster &cluster,
                    Plan &plan, const PlanOptions &options);

/// Prints the plan: one line per stage (layers, device, times, memory) and
/// the step time, bubble and utilisation.
void printPlan(const Plan &plan, llvm::ArrayRef<LayerCost> layers,
               const Cluster &cluster, llvm::raw_ostream &os);

} // namespace ds::partition

#endif // DS_PARTITION_PLANNER_H
