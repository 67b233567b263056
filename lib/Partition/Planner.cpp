//===- Planner.cpp - Pipeline plans on heterogeneous clusters -------------===//
//
// Layer times (roofline), the evaluation of a plan (step time, bubble,
// utilisation), planPipeline's checks and baselines, and printing; the
// search itself is in Search.cpp. docs/PipelinePartitioning.md ("Planner")
// explains the model.
//
//===----------------------------------------------------------------------===//

#include "PartitionInternal.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <limits>

using namespace ds::partition;
using namespace ds::partition::detail;
using llvm::ArrayRef;

static constexpr double kInf = std::numeric_limits<double>::infinity();

llvm::StringRef ds::partition::stringifySchedule(Schedule s) {
  switch (s) {
  case Schedule::GPipe:
    return "gpipe";
  case Schedule::OneFOneB:
    return "1f1b";
  }
  llvm_unreachable("unknown schedule");
}

//===----------------------------------------------------------------------===//
// Layer and stage costs
//===----------------------------------------------------------------------===//

/// The rate `device` runs precision `p` at: its own, else the next wider
/// one it has (INT8 -> FP8 -> BF16 -> F32 -> F64), and F64 falls back to
/// F32 (a device without F64 emulates it no faster). 0: none.
static double rateFor(const DeviceProfile &device, unsigned p) {
  for (int q = int(p); q >= 0; --q)
    if (device.flops[q] > 0)
      return device.flops[q];
  unsigned f32 = unsigned(Precision::F32);
  if (p == unsigned(Precision::F64) && device.flops[f32] > 0)
    return device.flops[f32];
  return 0;
}

double ds::partition::layerTime(const LayerCost &layer,
                                const DeviceProfile &device) {
  double compute = 0;
  for (unsigned p = 0; p < kNumPrecisions; ++p) {
    double dense = layer.denseFlops[p], sparse = layer.sparseFlops[p];
    if (dense <= 0 && sparse <= 0)
      continue;
    double rate = rateFor(device, p);
    if (rate <= 0)
      return kInf;
    compute += dense / rate + sparse / (rate * device.sparseSpeedup);
  }
  double memory = device.memoryBandwidth > 0
                      ? layer.bytesMoved / device.memoryBandwidth
                      : 0;
  double stream = device.memoryBandwidth > 0
                      ? layer.streamBytes / device.memoryBandwidth
                      : 0;
  return std::max(compute, memory) + stream;
}

LayerCost ds::partition::detail::halfLayer(const LayerCost &layer) {
  LayerCost half = layer;
  for (unsigned p = 0; p < kNumPrecisions; ++p) {
    half.denseFlops[p] /= 2;
    half.sparseFlops[p] /= 2;
  }
  half.bytesMoved /= 2;
  half.streamBytes /= 2;
  half.paramBytes /= 2;
  half.optimizerBytes /= 2;
  half.stateBytes /= 2;
  half.activationBytes /= 2;
  half.allReduceBytes /= 2;
  return half;
}

double ds::partition::detail::splitLayerTime(const LayerCost &layer,
                                             const Cluster &cluster, unsigned a,
                                             unsigned b) {
  LayerCost half = halfLayer(layer);
  double compute = std::max(layerTime(half, cluster.devices[a]),
                            layerTime(half, cluster.devices[b]));
  return compute + 2 * cluster.transferTime(a, b, layer.outputBytes / 2);
}

double ds::partition::detail::updateSeconds(ArrayRef<LayerCost> layers,
                                            unsigned first, unsigned end,
                                            const DeviceProfile &device,
                                            const Cluster &cluster) {
  double traffic = 0, allReduce = 0;
  for (unsigned l = first; l < end; ++l) {
    traffic += 3 * layers[l].paramBytes + 2 * layers[l].optimizerBytes;
    allReduce += layers[l].allReduceBytes;
  }
  double t = device.memoryBandwidth > 0 ? traffic / device.memoryBandwidth : 0;
  if (allReduce > 0)
    t += 2 * allReduce / cluster.interconnectBandwidth;
  return t;
}

double ds::partition::evaluatePlan(ArrayRef<LayerCost> layers,
                                   const Cluster &cluster, Plan &plan,
                                   const PlanOptions &options) {
  unsigned numStages = plan.stages.size(), m = options.microBatches;
  plan.microBatches = m;
  plan.schedule = options.schedule;
  double slowest = 0, stageSum = 0, slowestUpdate = 0, busy = 0;
  unsigned used = 0;
  bool fits = true;
  for (unsigned k = 0; k < numStages; ++k) {
    StagePlan &stage = plan.stages[k];
    unsigned first = stage.firstLayer, end = stage.endLayer;
    const DeviceProfile &device = cluster.devices[stage.device];
    double memory = stageMemory(layers, first, end, k, numStages, options);
    if (stage.splitDevice < 0) {
      double compute = 0;
      for (unsigned l = first; l < end; ++l)
        compute += layerTime(layers[l], device);
      stage.computeSeconds = compute;
      stage.memoryBytes = memory;
      stage.memoryLimit = device.memoryBytes;
      busy += m * compute;
      slowestUpdate = std::max(
          slowestUpdate, updateSeconds(layers, first, end, device, cluster));
      ++used;
    } else {
      assert(end == first + 1 && "a split stage holds one layer");
      unsigned other = unsigned(stage.splitDevice);
      const DeviceProfile &partner = cluster.devices[other];
      LayerCost half = halfLayer(layers[first]);
      stage.computeSeconds =
          splitLayerTime(layers[first], cluster, stage.device, other);
      stage.memoryBytes = memory / 2;
      stage.memoryLimit = std::min(device.memoryBytes, partner.memoryBytes);
      busy += m * (layerTime(half, device) + layerTime(half, partner));
      for (const DeviceProfile *d : {&device, &partner})
        slowestUpdate =
            std::max(slowestUpdate, updateSeconds(half, 0, 1, *d, cluster));
      used += 2;
    }
    stage.sendSeconds =
        k + 1 < numStages
            ? 2 * cluster.transferTime(stage.device, plan.stages[k + 1].device,
                                       layers[end - 1].outputBytes)
            : 0;
    fits &= stage.memoryBytes <= stage.memoryLimit;
    double seconds = stage.computeSeconds + stage.sendSeconds;
    slowest = std::max(slowest, seconds);
    stageSum += seconds;
  }
  // Fill and drain: the slowest stage paces M + S - 1 slots.
  double pipeline = double(m + numStages - 1) * slowest;
  double step = pipeline + slowestUpdate;
  if (!fits || numStages == 0)
    step = kInf;
  plan.stepSeconds = step;
  bool finite = std::isfinite(step) && step > 0;
  plan.bubbleFraction =
      finite && pipeline > 0 ? 1 - m * stageSum / (numStages * pipeline) : 0;
  plan.utilisation = finite ? busy / (used * step) : 0;
  plan.clusterUtilisation = finite ? busy / (cluster.devices.size() * step) : 0;
  return step;
}

/// Plans as if every device were the cluster's slowest (with the smallest
/// memory, so that the plan fits wherever it lands), then places stage k
/// on the k-th device in cluster order and evaluates on the real devices.
static llvm::Expected<Plan> planHomogeneousOnly(ArrayRef<LayerCost> layers,
                                                const Cluster &cluster,
                                                const PlanOptions &options) {
  unsigned slowest = 0, smallest = 0;
  auto total = [&](unsigned d) {
    double t = 0;
    for (const LayerCost &layer : layers)
      t += layerTime(layer, cluster.devices[d]);
    return t;
  };
  for (unsigned d = 1; d < cluster.devices.size(); ++d) {
    if (total(d) > total(slowest))
      slowest = d;
    if (cluster.devices[d].memoryBytes < cluster.devices[smallest].memoryBytes)
      smallest = d;
  }
  DeviceProfile profile = cluster.devices[slowest];
  profile.memoryBytes = cluster.devices[smallest].memoryBytes;
  Cluster uniform = homogeneousCluster(profile, cluster.devices.size());
  uniform.interconnectBandwidth = cluster.interconnectBandwidth;
  uniform.interconnectLatency = cluster.interconnectLatency;
  PlanOptions inner = options;
  inner.homogeneousOnly = false;
  llvm::Expected<Plan> plan = planPipeline(layers, uniform, inner);
  if (!plan)
    return llvm::createStringError(llvm::formatv(
        "homogeneous-only (every device a {0} with {1:f2} GiB): {2}",
        cluster.devices[slowest].name, profile.memoryBytes / kGiB,
        llvm::toString(plan.takeError())));
  unsigned next = 0;
  for (StagePlan &stage : plan->stages) {
    stage.device = next++;
    if (stage.splitDevice >= 0)
      stage.splitDevice = int(next++);
  }
  double predicted = plan->stepSeconds;
  evaluatePlan(layers, cluster, *plan, options);
  plan->log.push_back(llvm::formatv(
      "homogeneous-only baseline: planned for {0} x {1} ({2:f3} ms), "
      "evaluated on the real devices: {3:f3} ms",
      cluster.devices.size(), cluster.devices[slowest].name, predicted * 1e3,
      plan->stepSeconds * 1e3));
  return plan;
}

llvm::Expected<Plan> ds::partition::planPipeline(ArrayRef<LayerCost> layers,
                                                 const Cluster &cluster,
                                                 const PlanOptions &options) {
  unsigned numDevices = cluster.devices.size(), numLayers = layers.size();
  if (numDevices == 0)
    return llvm::createStringError("the cluster has no devices");
  if (numLayers == 0)
    return llvm::createStringError("no layers to plan");
  if (options.microBatches == 0)
    return llvm::createStringError("at least one micro-batch is needed");
  if (options.stages > numDevices)
    return llvm::createStringError(
        llvm::formatv("{0} stages but the cluster has {1} devices",
                      options.stages, numDevices));
  if (options.stages > numLayers)
    return llvm::createStringError(llvm::formatv(
        "{0} stages but only {1} layers", options.stages, numLayers));
  if (options.homogeneousOnly && !options.uniformSplit)
    return planHomogeneousOnly(layers, cluster, options);

  if (options.uniformSplit) {
    // Equal layer counts on the first devices in cluster order.
    unsigned numStages =
        options.stages ? options.stages : std::min(numDevices, numLayers);
    Plan plan;
    for (unsigned k = 0, end = 0; k < numStages; ++k) {
      end += numLayers / numStages + (k < numLayers % numStages ? 1 : 0);
      StagePlan stage;
      stage.firstLayer = k ? plan.stages.back().endLayer : 0;
      stage.endLayer = end;
      stage.device = k;
      plan.stages.push_back(stage);
    }
    evaluatePlan(layers, cluster, plan, options);
    for (const StagePlan &stage : plan.stages)
      if (stage.memoryBytes > stage.memoryLimit)
        return llvm::createStringError(llvm::formatv(
            "uniform split: stage {0} ({1}) needs {2:f2} GiB but {3} has "
            "{4:f2} GiB",
            &stage - plan.stages.data(),
            describeLayers(layers, stage.firstLayer, stage.endLayer),
            stage.memoryBytes / kGiB, cluster.devices[stage.device].name,
            stage.memoryLimit / kGiB));
    plan.log.push_back(llvm::formatv(
        "uniform-split baseline: {0} stages of equal layer counts on the "
        "first devices",
        numStages));
    return plan;
  }

  return searchPlan(layers, cluster, options);
}

//===----------------------------------------------------------------------===//
// Printing
//===----------------------------------------------------------------------===//

void ds::partition::printPlan(const Plan &plan, ArrayRef<LayerCost> layers,
                              const Cluster &cluster, llvm::raw_ostream &os) {
  os << llvm::format("%-5s  %-32s  %-22s  %11s  %8s  %17s\n", "stage", "layers",
                     "device", "compute ms", "send ms", "memory GiB");
  for (unsigned k = 0; k < plan.stages.size(); ++k) {
    const StagePlan &stage = plan.stages[k];
    std::string range = layers[stage.firstLayer].name;
    if (stage.endLayer > stage.firstLayer + 1)
      range += ".." + layers[stage.endLayer - 1].name;
    std::string device = cluster.devices[stage.device].name;
    if (stage.splitDevice >= 0)
      device += "+" + cluster.devices[stage.splitDevice].name;
    os << llvm::format("%-5u  %-32s  %-22s  %11.3f  %8.3f  %7.2f / %7.2f\n", k,
                       range.c_str(), device.c_str(),
                       stage.computeSeconds * 1e3, stage.sendSeconds * 1e3,
                       stage.memoryBytes / kGiB, stage.memoryLimit / kGiB);
  }
  os << llvm::format("step %.3f ms (%u micro-batches, %s), bubble %.1f %%, "
                     "utilisation %.1f %% (cluster %.1f %%)\n",
                     plan.stepSeconds * 1e3, plan.microBatches,
                     stringifySchedule(plan.schedule).str().c_str(),
                     plan.bubbleFraction * 100, plan.utilisation * 100,
                     plan.clusterUtilisation * 100);
  for (const std::string &line : plan.log)
    os << "  " << line << "\n";
}
