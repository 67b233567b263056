//===- CutDP.cpp - Cutting a layer chain into pipeline stages -------------===//
//
// PipeDream's dynamic program (Narayanan et al., SOSP 2019): the best cut of
// layers [0, j) into k+1 stages is the best over i of the best cut of
// [0, i) into k stages and stage k = [i, j), each cut scored by its slowest
// stage. Stage memory follows the schedule (stageMemory), so a cut is
// checked against the device each stage lands on.
//
//===----------------------------------------------------------------------===//

#include "PartitionInternal.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <limits>

using namespace ds::partition;
using namespace ds::partition::detail;
using llvm::ArrayRef;

static constexpr double kInf = std::numeric_limits<double>::infinity();
/// Bound on the re-cuts that trade stage time for update time.
static constexpr unsigned kMaxUpdateRounds = 8;

double ds::partition::stageMemory(ArrayRef<LayerCost> layers, unsigned first,
                                  unsigned end, unsigned stage,
                                  unsigned numStages,
                                  const PlanOptions &options) {
  double resident = 0, activations = 0;
  for (unsigned l = first; l < end; ++l) {
    resident +=
        layers[l].paramBytes + layers[l].optimizerBytes + layers[l].stateBytes;
    activations += layers[l].activationBytes;
  }
  // GPipe runs every forward before any backward: all M micro-batches keep
  // their activations. 1F1B lets stage k start backwards after S - k
  // forwards, so at most that many are in flight.
  unsigned inFlight = options.microBatches;
  if (options.schedule == Schedule::OneFOneB)
    inFlight = std::min(options.microBatches, numStages - stage);
  return resident + double(inFlight) * activations;
}

std::string ds::partition::detail::describeLayers(ArrayRef<LayerCost> layers,
                                                  unsigned first,
                                                  unsigned end) {
  if (end == first + 1)
    return llvm::formatv("layer {0}: {1}", first, layers[first].name).str();
  return llvm::formatv("layers {0}..{1}: {2}..{3}", first, end - 1,
                       layers[first].name, layers[end - 1].name)
      .str();
}

std::vector<unsigned> ds::partition::detail::minMaxCut(
    unsigned numLayers, unsigned numStages,
    llvm::function_ref<double(unsigned, unsigned, unsigned)> cost,
    double *best) {
  if (best)
    *best = kInf;
  if (numStages == 0 || numStages > numLayers)
    return {};
  unsigned width = numLayers + 1;
  // value[k * width + j]: the best slowest stage of [0, j) in k + 1 stages;
  // from[k * width + j]: where its last stage starts.
  std::vector<double> value(numStages * width, kInf);
  std::vector<unsigned> from(numStages * width, 0);
  for (unsigned j = 1; j + numStages - 1 <= numLayers; ++j)
    value[j] = cost(0, 0, j);
  for (unsigned k = 1; k < numStages; ++k) {
    // Stage k ends at j and leaves at least one layer per later stage.
    for (unsigned j = k + 1; j + numStages - 1 - k <= numLayers; ++j) {
      // Growing stage k (i falling) only makes it dearer: stop once it
      // alone is no better than the best found.
      double &cell = value[k * width + j];
      for (unsigned i = j; i-- > k;) {
        double before = value[(k - 1) * width + i];
        if (before >= cell) // also skips forbidden prefixes
          continue;
        double stage = cost(k, i, j);
        if (stage >= cell)
          break;
        double candidate = std::max(before, stage);
        if (candidate < cell) {
          cell = candidate;
          from[k * width + j] = i;
        }
      }
    }
  }
  double optimum = value[(numStages - 1) * width + numLayers];
  if (std::isinf(optimum))
    return {};
  if (best)
    *best = optimum;
  std::vector<unsigned> ends(numStages);
  unsigned end = numLayers;
  for (unsigned k = numStages; k-- > 0;) {
    ends[k] = end;
    end = k ? from[k * width + end] : 0;
  }
  return ends;
}

namespace {
/// Stage costs over the slots in O(1) each, from prefix sums.
class SlotCosts {
public:
  SlotCosts(ArrayRef<LayerCost> layers, ArrayRef<CutSlot> slots,
            ArrayRef<char> mustSplit, const PlanOptions &options)
      : layers(layers), slots(slots), options(options) {
    unsigned numLayers = layers.size();
    // Infinite layer times (an unsupported precision) are counted apart:
    // inf - inf in a prefix difference would be NaN.
    for (const CutSlot &slot : slots) {
      std::vector<double> sum(numLayers + 1, 0), update(numLayers + 1, 0);
      std::vector<unsigned> inf(numLayers + 1, 0);
      for (unsigned l = 0; l < numLayers; ++l) {
        double t = slot.layerSeconds[l];
        sum[l + 1] = sum[l] + (std::isinf(t) ? 0 : t);
        inf[l + 1] = inf[l] + (std::isinf(t) ? 1 : 0);
        if (!slot.layerUpdate.empty())
          update[l + 1] = update[l] + slot.layerUpdate[l];
      }
      prefixSeconds.push_back(std::move(sum));
      prefixInf.push_back(std::move(inf));
      prefixUpdate.push_back(std::move(update));
      withUpdate |= !slot.layerUpdate.empty();
    }
    prefixSplit.assign(numLayers + 1, 0);
    prefixResident.assign(numLayers + 1, 0);
    prefixActivations.assign(numLayers + 1, 0);
    for (unsigned l = 0; l < numLayers; ++l) {
      const LayerCost &layer = layers[l];
      prefixSplit[l + 1] =
          prefixSplit[l] + (!mustSplit.empty() && mustSplit[l] ? 1 : 0);
      prefixResident[l + 1] = prefixResident[l] + layer.paramBytes +
                              layer.optimizerBytes + layer.stateBytes;
      prefixActivations[l + 1] = prefixActivations[l] + layer.activationBytes;
    }
  }

  /// Whether some slot models the optimizer step.
  bool modelsUpdate() const { return withUpdate; }

  /// Seconds of stage k's optimizer step.
  double update(unsigned k, unsigned first, unsigned end) const {
    return prefixUpdate[k][end] - prefixUpdate[k][first];
  }

  /// The predicted step time of a cut: (M + S - 1) x the slowest stage +
  /// the slowest update (as evaluatePlan computes it).
  double stepSeconds(ArrayRef<unsigned> ends) const {
    double slowest = 0, slowestUpdate = 0;
    for (unsigned k = 0, first = 0; k < ends.size(); first = ends[k++]) {
      slowest = std::max(slowest, seconds(k, first, ends[k]));
      slowestUpdate = std::max(slowestUpdate, update(k, first, ends[k]));
    }
    return double(options.microBatches + ends.size() - 1) * slowest +
           slowestUpdate;
  }

  /// Whether [first, end) may go on slot k: a split slot holds exactly one
  /// must-split layer, a plain slot none.
  bool allowed(unsigned k, unsigned first, unsigned end) const {
    unsigned splits = prefixSplit[end] - prefixSplit[first];
    if (slots[k].split)
      return end == first + 1 && splits == 1;
    return splits == 0;
  }

  /// Bytes per device of stage k = [first, end) (stageMemory, from the
  /// prefix sums).
  double memory(unsigned k, unsigned first, unsigned end) const {
    unsigned inFlight = options.microBatches;
    if (options.schedule == Schedule::OneFOneB)
      inFlight = std::min(options.microBatches, unsigned(slots.size()) - k);
    double bytes =
        prefixResident[end] - prefixResident[first] +
        inFlight * (prefixActivations[end] - prefixActivations[first]);
    return slots[k].split ? bytes / 2 : bytes;
  }

  /// Compute + send seconds per micro-batch, +inf when forbidden.
  double seconds(unsigned k, unsigned first, unsigned end) const {
    if (!allowed(k, first, end) ||
        memory(k, first, end) > slots[k].memoryLimit ||
        prefixInf[k][end] != prefixInf[k][first])
      return kInf;
    double t = prefixSeconds[k][end] - prefixSeconds[k][first];
    double out = layers[end - 1].outputBytes;
    if (k + 1 < slots.size() && out > 0)
      t += 2 * (slots[k].sendLatency + out * slots[k].sendPerByte);
    return t;
  }

  /// Memory over the limit (a ratio; <= 1 fits), +inf when forbidden.
  double pressure(unsigned k, unsigned first, unsigned end) const {
    if (!allowed(k, first, end))
      return kInf;
    return memory(k, first, end) / slots[k].memoryLimit;
  }

  /// Why a cut scored +inf: its worst stage, by memory then by runnability.
  llvm::Error explain(ArrayRef<unsigned> ends) const {
    unsigned numLayers = layers.size(), numStages = slots.size();
    unsigned worst = 0;
    double worstPressure = -1;
    for (unsigned k = 0, first = 0; k < numStages; first = ends[k++]) {
      double p = pressure(k, first, ends[k]);
      if (p > worstPressure) {
        worstPressure = p;
        worst = k;
      }
    }
    unsigned first = worst ? ends[worst - 1] : 0;
    std::string what = describeLayers(layers, first, ends[worst]);
    if (worstPressure > 1)
      return llvm::createStringError(llvm::formatv(
          "stage {0} ({1}) needs {2:f2} GiB but its device has {3:f2} GiB; "
          "no cut of the {4} layers into {5} stages fits",
          worst, what, memory(worst, first, ends[worst]) / kGiB,
          slots[worst].memoryLimit / kGiB, numLayers, numStages));
    for (unsigned k = 0, first = 0; k < numStages; first = ends[k++])
      if (std::isinf(seconds(k, first, ends[k])))
        return llvm::createStringError(llvm::formatv(
            "stage {0} ({1}) cannot run on its device: it supports none of "
            "the precisions its layers use",
            k, describeLayers(layers, first, ends[k])));
    return llvm::createStringError("no cut fits");
  }

private:
  ArrayRef<LayerCost> layers;
  ArrayRef<CutSlot> slots;
  const PlanOptions &options;
  std::vector<std::vector<double>> prefixSeconds, prefixUpdate;
  std::vector<std::vector<unsigned>> prefixInf;
  std::vector<unsigned> prefixSplit;
  std::vector<double> prefixResident, prefixActivations;
  bool withUpdate = false;
};
} // namespace

llvm::Expected<std::vector<unsigned>> ds::partition::detail::cutSlots(
    ArrayRef<LayerCost> layers, ArrayRef<CutSlot> slots,
    ArrayRef<char> mustSplit, const PlanOptions &options) {
  unsigned numLayers = layers.size(), numStages = slots.size();
  if (numStages == 0)
    return llvm::createStringError("cannot cut into 0 stages");
  if (numStages > numLayers)
    return llvm::createStringError(
        llvm::formatv("{0} stages but only {1} layers", numStages, numLayers));
  SlotCosts costs(layers, slots, mustSplit, options);

  if (options.uniformSplit) {
    std::vector<unsigned> ends(numStages);
    for (unsigned k = 0, end = 0; k < numStages; ++k) {
      end += numLayers / numStages + (k < numLayers % numStages ? 1 : 0);
      ends[k] = end;
    }
    for (unsigned k = 0, first = 0; k < numStages; first = ends[k++])
      if (std::isinf(costs.seconds(k, first, ends[k])))
        return costs.explain(ends);
    return ends;
  }

  std::vector<unsigned> ends =
      minMaxCut(numLayers, numStages, [&](unsigned k, unsigned i, unsigned j) {
        return costs.seconds(k, i, j);
      });
  if (!ends.empty() && costs.modelsUpdate()) {
    // The step adds the slowest update to (M + S - 1) x the slowest stage,
    // two maxima no single min-max program holds. Descend on the update
    // bound instead: forbid every stage whose update is not faster than
    // the best cut's slowest, re-cut, keep the best step; each round lowers
    // the bound, so few rounds reach the cut with the fastest updates.
    auto slowestUpdate = [&](ArrayRef<unsigned> cut) {
      double u = 0;
      for (unsigned k = 0, first = 0; k < cut.size(); first = cut[k++])
        u = std::max(u, costs.update(k, first, cut[k]));
      return u;
    };
    double bestStep = costs.stepSeconds(ends);
    double bound = slowestUpdate(ends);
    for (unsigned round = 0; round < kMaxUpdateRounds; ++round) {
      std::vector<unsigned> next = minMaxCut(
          numLayers, numStages, [&](unsigned k, unsigned i, unsigned j) {
            return costs.update(k, i, j) < bound ? costs.seconds(k, i, j)
                                                 : kInf;
          });
      if (next.empty())
        break;
      double step = costs.stepSeconds(next);
      if (step < bestStep) {
        bestStep = step;
        ends = next;
      }
      bound = slowestUpdate(next);
    }
  }
  if (!ends.empty())
    return ends;
  // Nothing fits: report the cut that comes closest to fitting.
  ends =
      minMaxCut(numLayers, numStages, [&](unsigned k, unsigned i, unsigned j) {
        return costs.pressure(k, i, j);
      });
  if (ends.empty())
    return llvm::createStringError(llvm::formatv(
        "no cut of the {0} layers into {1} stages puts each layer that needs "
        "horizontal splitting alone on a split stage",
        numLayers, numStages));
  return costs.explain(ends);
}

double ds::partition::detail::minPressure(ArrayRef<LayerCost> layers,
                                          ArrayRef<CutSlot> slots,
                                          ArrayRef<char> mustSplit,
                                          const PlanOptions &options) {
  SlotCosts costs(layers, slots, mustSplit, options);
  double best;
  minMaxCut(
      layers.size(), slots.size(),
      [&](unsigned k, unsigned i, unsigned j) {
        return costs.pressure(k, i, j);
      },
      &best);
  return best;
}

llvm::Expected<std::vector<unsigned>> ds::partition::cutLayers(
    ArrayRef<LayerCost> layers, ArrayRef<std::vector<double>> layerSeconds,
    ArrayRef<double> stageLimits, ArrayRef<double> sendSeconds,
    const PlanOptions &options, ArrayRef<double> sendLatency) {
  assert(layerSeconds.size() == stageLimits.size() &&
         "one row of layer seconds per stage");
  std::vector<CutSlot> slots(stageLimits.size());
  for (unsigned k = 0; k < slots.size(); ++k) {
    assert(layerSeconds[k].size() == layers.size() && "one time per layer");
    slots[k].layerSeconds = layerSeconds[k];
    slots[k].memoryLimit = stageLimits[k];
    if (k < sendSeconds.size())
      slots[k].sendPerByte = sendSeconds[k];
    if (k < sendLatency.size())
      slots[k].sendLatency = sendLatency[k];
  }
  return cutSlots(layers, slots, {}, options);
}
