//===- PartitionInternal.h - Shared helpers of lib/Partition ---*- C++ -*-===//
//
// What the files of the planner share and nobody else needs: the min-max
// cut search behind cutLayers() and planPipeline() (which adds
// horizontally split stages), and message helpers.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_PARTITION_PARTITIONINTERNAL_H
#define DS_LIB_PARTITION_PARTITIONINTERNAL_H

#include "ds/Partition/Planner.h"

#include "llvm/ADT/STLFunctionalExtras.h"

namespace ds::partition::detail {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

/// "h100, h200, ..., custom" (+ the registered kinds), for diagnostics.
std::string knownKinds();

/// "layers 3..5: block3..block5" (inclusive, as people count them).
std::string describeLayers(llvm::ArrayRef<LayerCost> layers, unsigned first,
                           unsigned end);

/// Minimises max_k cost(k, first, end) over the cuts of [0, numLayers) into
/// numStages consecutive non-empty stages (dynamic program, O(S L^2) calls
/// of `cost` at most); +infinity forbids a stage. `cost` must not fall as
/// a stage grows (cost(k, i - 1, j) >= cost(k, i, j)): the search stops
/// growing a stage once it alone is no better than the best cut found. Returns
/// the end of each stage, empty when every cut has a forbidden stage, and the
/// optimum in `best`.
std::vector<unsigned>
minMaxCut(unsigned numLayers, unsigned numStages,
          llvm::function_ref<double(unsigned, unsigned, unsigned)> cost,
          double *best = nullptr);

/// One stage position of the cut search: the device (or the pair of
/// devices) it runs on, seen through the numbers the cut needs.
struct CutSlot {
  std::vector<double> layerSeconds; ///< per layer, on this slot
  double memoryLimit = 0;           ///< bytes, per device
  double sendPerByte = 0;           ///< seconds per byte to the next slot
  double sendLatency = 0;           ///< seconds per message to the next slot
  /// Per layer, seconds of its optimizer step (and gradient all-reduce) on
  /// this slot, once per step; empty: the cut ignores the update.
  std::vector<double> layerUpdate;
  /// A horizontally split slot: holds exactly one layer of `mustSplit`,
  /// each of its two devices half of that layer's memory.
  bool split = false;
};

/// cutLayers() over slots: layers of `mustSplit` (empty: none) go alone
/// on split slots, all others on plain ones. With `layerUpdate` given, the
/// cut minimises the step time, (M + S - 1) x the slowest stage + the
/// slowest update, rather than the slowest stage alone.
llvm::Expected<std::vector<unsigned>> cutSlots(llvm::ArrayRef<LayerCost> layers,
                                               llvm::ArrayRef<CutSlot> slots,
                                               llvm::ArrayRef<char> mustSplit,
                                               const PlanOptions &options);

/// How close the best cut over `slots` comes to fitting: the least, over
/// the cuts, of the largest stage memory / limit (<= 1: some cut fits the
/// memory); +infinity when no cut obeys the split rules.
double minPressure(llvm::ArrayRef<LayerCost> layers,
                   llvm::ArrayRef<CutSlot> slots,
                   llvm::ArrayRef<char> mustSplit, const PlanOptions &options);

/// One of the two halves of a horizontally split layer: half the FLOPs,
/// traffic and resident bytes; the output (after the gather) is whole.
LayerCost halfLayer(const LayerCost &layer);

/// Seconds of a split layer per micro-batch on devices a and b: the slower
/// half, then the gather of the halves' outputs, forward and backward.
double splitLayerTime(const LayerCost &layer, const Cluster &cluster,
                      unsigned a, unsigned b);

/// Seconds of the optimizer step of layers [first, end) on `device`, once
/// per step: it reads gradients, parameters and optimizer state and writes
/// the last two (3 x params + 2 x state bytes), then all-reduces the
/// gradient with the stage's data-parallel replicas in other pipelines
/// over the interconnect (a ring sends ~2x the payload).
double updateSeconds(llvm::ArrayRef<LayerCost> layers, unsigned first,
                     unsigned end, const DeviceProfile &device,
                     const Cluster &cluster);

/// planPipeline's heterogeneity-aware search (Search.cpp), its arguments
/// already checked.
llvm::Expected<Plan> searchPlan(llvm::ArrayRef<LayerCost> layers,
                                const Cluster &cluster,
                                const PlanOptions &options);

} // namespace ds::partition::detail

#endif // DS_LIB_PARTITION_PARTITIONINTERNAL_H
