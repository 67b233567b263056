//===- Search.cpp - Cuts and device placements for a pipeline -------------===//
//
// planPipeline's search: for each stage count, starts (device choices and
// cuts), the seed's cut -> assign -> re-cut iteration from each, then a
// local search over the devices of what each reached, the best first,
// each move re-cut exactly; the fastest predicted step wins.
// docs/PipelinePartitioning.md ("The search") explains why each part is
// there.
//
//===----------------------------------------------------------------------===//

#include "PartitionInternal.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>

using namespace ds::partition;
using namespace ds::partition::detail;
using llvm::ArrayRef;

static constexpr double kInf = std::numeric_limits<double>::infinity();

namespace {
/// Where a stage runs: a device, or two for a horizontally split layer.
struct Slot {
  unsigned device = 0;
  int partner = -1;
  bool operator==(const Slot &o) const {
    return device == o.device && partner == o.partner;
  }
};

class PlanSearch {
public:
  PlanSearch(ArrayRef<LayerCost> layers, const Cluster &cluster,
             const PlanOptions &options)
      : layers(layers), cluster(cluster), options(options) {
    unsigned numDevices = cluster.devices.size();
    times.resize(numDevices);
    totalTime.assign(numDevices, 0);
    for (unsigned d = 0; d < numDevices; ++d) {
      for (const LayerCost &layer : layers)
        times[d].push_back(layerTime(layer, cluster.devices[d]));
      totalTime[d] = std::accumulate(times[d].begin(), times[d].end(), 0.0);
      if (cluster.devices[d].memoryBytes >
          cluster.devices[largestDevice].memoryBytes)
        largestDevice = d;
      // Compared with the first device of each class found so far.
      deviceClass.push_back(deviceClasses);
      for (unsigned c = 0; c < deviceClasses; ++c) {
        if (interchangeable(d, representatives[c])) {
          deviceClass[d] = c;
          break;
        }
      }
      if (deviceClass[d] == deviceClasses) {
        representatives.push_back(d);
        ++deviceClasses;
      }
    }
  }

  /// Whether a and b have the same profile and the same paths to every
  /// other device (two GPUs of a server; two nodes of one device each).
  bool interchangeable(unsigned a, unsigned b) const {
    const DeviceProfile &p = cluster.devices[a], &q = cluster.devices[b];
    if (p.kind != q.kind || p.flops != q.flops ||
        p.sparseSpeedup != q.sparseSpeedup || p.memoryBytes != q.memoryBytes ||
        p.memoryBandwidth != q.memoryBandwidth ||
        p.linkBandwidth != q.linkBandwidth || p.linkLatency != q.linkLatency)
      return false;
    for (unsigned c = 0; c < cluster.devices.size(); ++c)
      if (c != a && c != b &&
          (cluster.bandwidth(a, c) != cluster.bandwidth(b, c) ||
           cluster.latency(a, c) != cluster.latency(b, c)))
        return false;
    return true;
  }

  /// Shares the local search's work among `count` stage counts.
  void setStageCounts(unsigned count) {
    localSearchBudget = kLocalSearchWork / std::max(1u, count);
  }
  /// The best plan with `numStages` stages, or why there is none.
  llvm::Expected<Plan> planStages(unsigned numStages);
  /// Why no stage count fits, naming the stage that comes closest;
  /// `failures[i]` says why stageCounts[i] failed.
  llvm::Error explainNoFit(ArrayRef<unsigned> stageCounts,
                           ArrayRef<std::string> failures);

  std::vector<std::string> log;

private:
  std::vector<char> mustSplit(unsigned numStages) const;
  std::vector<CutSlot> cutSlotsFor(ArrayRef<Slot> slots,
                                   ArrayRef<char> split) const;
  std::vector<unsigned> allDevices() const {
    std::vector<unsigned> devices(cluster.devices.size());
    std::iota(devices.begin(), devices.end(), 0);
    return devices;
  }
  /// The device classes of `slots`, in order: starts equal in them lead to
  /// equal plans.
  std::vector<unsigned> classesOf(ArrayRef<Slot> slots) const {
    std::vector<unsigned> classes;
    for (const Slot &slot : slots) {
      classes.push_back(deviceClass[slot.device]);
      classes.push_back(slot.partner < 0 ? ~0u : deviceClass[slot.partner]);
    }
    return classes;
  }
  /// Devices in cluster order, the `count` best by `better`.
  std::vector<unsigned>
  pickDevices(unsigned count,
              llvm::function_ref<bool(unsigned, unsigned)> better) const;
  /// Slots for `devices` (cluster order): plain, or split where a nominal
  /// cut puts a must-split layer.
  std::vector<Slot> initialSlots(ArrayRef<unsigned> devices, unsigned numStages,
                                 ArrayRef<char> split) const;
  /// The stages of `ends` assigned to devices; empty when none fits.
  std::vector<Slot> assign(ArrayRef<unsigned> ends, ArrayRef<Slot> slots) const;
  Plan makePlan(ArrayRef<unsigned> ends, ArrayRef<Slot> slots) const;
  /// Runs cut -> assign -> re-cut from `slots`; updates `best`.
  llvm::Error improve(std::vector<Slot> slots, ArrayRef<char> split,
                      std::optional<Plan> &best);
  /// A device placement scored: feasible ones by step time, the others by
  /// how far the closest cut is from fitting (minPressure).
  struct Candidate {
    std::vector<Slot> slots;
    std::optional<Plan> plan; ///< when feasible
    double pressure = kInf;
    bool operator<(const Candidate &o) const {
      if (plan && o.plan)
        return plan->stepSeconds < o.plan->stepSeconds * (1 - 1e-12);
      if (plan || o.plan)
        return bool(plan);
      return pressure < o.pressure * (1 - 1e-12);
    }
  };
  Candidate evaluate(std::vector<Slot> slots, ArrayRef<char> split) const;
  /// Moves on the devices of `current` (swaps, replacements by unused
  /// devices, rotations, reversals; pairs of them on short pipelines), each
  /// re-cut exactly, kept when the candidate improves; returns how many
  /// were kept. `work` counts what the cuts cost (L^2 per cut) against
  /// localSearchBudget.
  unsigned localSearch(Candidate &current, ArrayRef<char> split,
                       double &work) const;

  static constexpr unsigned kMaxLocalPasses = 16;
  static constexpr unsigned kMaxDoubleSwapPositions = 8;
  static constexpr unsigned kMaxPermutedPositions = 5;
  /// What the local searches of one planPipeline may spend, in L^2 per
  /// cut (about half a second on a 2020s core), shared by the stage
  /// counts; small chains never reach it.
  static constexpr double kLocalSearchWork = 1.5e7;
  double localSearchBudget = kLocalSearchWork;

  ArrayRef<LayerCost> layers;
  const Cluster &cluster;
  const PlanOptions &options;
  std::vector<std::vector<double>> times; ///< [device][layer] seconds
  std::vector<double> totalTime;          ///< per device, all layers
  unsigned largestDevice = 0;
  /// Interchangeable devices share a class: swapping them changes nothing.
  std::vector<unsigned> deviceClass, representatives;
  unsigned deviceClasses = 0;
};
} // namespace

/// `devices` sorted by `better`, ties by index (a stable sort without
/// libstdc++'s deprecated temporary buffer).
static std::vector<unsigned>
sortedBy(std::vector<unsigned> devices,
         llvm::function_ref<bool(unsigned, unsigned)> better) {
  llvm::sort(devices, [&](unsigned a, unsigned b) {
    return better(a, b) || (!better(b, a) && a < b);
  });
  return devices;
}

static std::vector<Slot> slotsOf(const Plan &plan) {
  std::vector<Slot> slots;
  for (const StagePlan &stage : plan.stages)
    slots.push_back({stage.device, stage.splitDevice});
  return slots;
}

std::vector<char> PlanSearch::mustSplit(unsigned numStages) const {
  // A splittable layer that alone would not fit the largest device at the
  // first stage's in-flight count (the most any stage keeps) is split.
  std::vector<char> split(layers.size(), 0);
  if (!options.allowHorizontalSplit)
    return split;
  double largest = cluster.devices[largestDevice].memoryBytes;
  for (unsigned l = 0; l < layers.size(); ++l)
    split[l] = layers[l].splittable &&
               stageMemory(layers, l, l + 1, 0, numStages, options) > largest;
  return split;
}

std::vector<CutSlot> PlanSearch::cutSlotsFor(ArrayRef<Slot> slots,
                                             ArrayRef<char> split) const {
  std::vector<CutSlot> cut(slots.size());
  for (unsigned k = 0; k < slots.size(); ++k) {
    unsigned a = slots[k].device;
    const DeviceProfile &device = cluster.devices[a];
    if (slots[k].partner < 0) {
      cut[k].layerSeconds = times[a];
      cut[k].memoryLimit = device.memoryBytes;
      for (unsigned l = 0; l < layers.size(); ++l)
        cut[k].layerUpdate.push_back(
            updateSeconds(layers, l, l + 1, device, cluster));
    } else {
      unsigned b = unsigned(slots[k].partner);
      const DeviceProfile &partner = cluster.devices[b];
      cut[k].split = true;
      cut[k].memoryLimit = std::min(device.memoryBytes, partner.memoryBytes);
      for (unsigned l = 0; l < layers.size(); ++l) {
        cut[k].layerSeconds.push_back(
            split[l] ? splitLayerTime(layers[l], cluster, a, b) : kInf);
        LayerCost half = halfLayer(layers[l]);
        cut[k].layerUpdate.push_back(
            std::max(updateSeconds(half, 0, 1, device, cluster),
                     updateSeconds(half, 0, 1, partner, cluster)));
      }
    }
    if (k + 1 < slots.size()) {
      unsigned next = slots[k + 1].device;
      cut[k].sendPerByte = 1 / cluster.bandwidth(a, next);
      cut[k].sendLatency = cluster.latency(a, next);
    }
  }
  return cut;
}

std::vector<unsigned> PlanSearch::pickDevices(
    unsigned count, llvm::function_ref<bool(unsigned, unsigned)> better) const {
  std::vector<unsigned> order = sortedBy(allDevices(), better);
  order.resize(count);
  llvm::sort(order);
  return order;
}

std::vector<Slot> PlanSearch::initialSlots(ArrayRef<unsigned> devices,
                                           unsigned numStages,
                                           ArrayRef<char> split) const {
  std::vector<Slot> slots;
  if (llvm::none_of(split, [](char s) { return s; })) {
    for (unsigned d : devices)
      slots.push_back({d, -1});
    return slots;
  }
  // Which stages hold a must-split layer depends on the cut: take it from
  // a cut on a nominal device (the fastest of `devices`, the largest
  // memory) before any device is placed.
  unsigned fastest = devices[0];
  for (unsigned d : devices)
    if (totalTime[d] < totalTime[fastest])
      fastest = d;
  double limit = cluster.devices[largestDevice].memoryBytes;
  std::vector<unsigned> ends = minMaxCut(
      layers.size(), numStages, [&](unsigned k, unsigned i, unsigned j) {
        bool single = j == i + 1 && split[i];
        for (unsigned l = i; l < j; ++l)
          if (split[l] && !single)
            return kInf;
        double memory = stageMemory(layers, i, j, k, numStages, options);
        if ((single ? memory / 2 : memory) > limit)
          return kInf;
        double t = 0;
        for (unsigned l = i; l < j; ++l)
          t += times[fastest][l];
        return single ? t / 2 : t;
      });
  if (ends.empty())
    return {};
  unsigned next = 0;
  for (unsigned k = 0, first = 0; k < numStages; first = ends[k++]) {
    Slot slot{devices[next++], -1};
    if (ends[k] == first + 1 && split[first])
      slot.partner = int(devices[next++]);
    slots.push_back(slot);
  }
  return slots;
}

std::vector<Slot> PlanSearch::assign(ArrayRef<unsigned> ends,
                                     ArrayRef<Slot> slots) const {
  // One row per device a stage needs: a plain stage's cost on device d is
  // its compute there; each half of a split layer is a row of its own.
  unsigned numStages = ends.size(), numDevices = cluster.devices.size();
  std::vector<double> cost;
  std::vector<unsigned> rowStage;
  for (unsigned k = 0, first = 0; k < numStages; first = ends[k++]) {
    double memory = stageMemory(layers, first, ends[k], k, numStages, options);
    bool split = slots[k].partner >= 0;
    LayerCost half;
    if (split)
      half = halfLayer(layers[first]);
    for (unsigned row = 0; row < (split ? 2u : 1u); ++row) {
      for (unsigned d = 0; d < numDevices; ++d) {
        const DeviceProfile &device = cluster.devices[d];
        double seconds = 0;
        if (split) {
          seconds = layerTime(half, device);
        } else {
          for (unsigned l = first; l < ends[k]; ++l)
            seconds += times[d][l];
        }
        bool fits = (split ? memory / 2 : memory) <= device.memoryBytes;
        cost.push_back(fits ? seconds : kInf);
      }
      rowStage.push_back(k);
    }
  }
  unsigned rows = rowStage.size();
  Assignment a = options.objective == AssignObjective::Sum
                     ? solveAssignment(cost, rows, numDevices)
                     : solveBottleneckAssignment(cost, rows, numDevices);
  if (std::isinf(a.cost))
    return {};
  std::vector<Slot> assigned(numStages);
  for (unsigned row = 0; row < rows; ++row) {
    Slot &slot = assigned[rowStage[row]];
    if (row > 0 && rowStage[row - 1] == rowStage[row])
      slot.partner = a.rowToCol[row];
    else
      slot.device = unsigned(a.rowToCol[row]);
  }
  return assigned;
}

Plan PlanSearch::makePlan(ArrayRef<unsigned> ends, ArrayRef<Slot> slots) const {
  Plan plan;
  for (unsigned k = 0, first = 0; k < ends.size(); first = ends[k++]) {
    StagePlan stage;
    stage.firstLayer = first;
    stage.endLayer = ends[k];
    stage.device = slots[k].device;
    stage.splitDevice = slots[k].partner;
    plan.stages.push_back(stage);
  }
  evaluatePlan(layers, cluster, plan, options);
  return plan;
}

llvm::Error PlanSearch::improve(std::vector<Slot> slots, ArrayRef<char> split,
                                std::optional<Plan> &best) {
  for (unsigned round = 1; round <= std::max(1u, options.maxRounds); ++round) {
    llvm::Expected<std::vector<unsigned>> ends =
        cutSlots(layers, cutSlotsFor(slots, split), split, options);
    if (!ends)
      return ends.takeError();
    Plan plan = makePlan(*ends, slots);
    plan.rounds = round;
    if (!best || plan.stepSeconds < best->stepSeconds)
      best = std::move(plan);
    if (round == options.maxRounds)
      break;
    std::vector<Slot> assigned = assign(*ends, slots);
    if (assigned.empty() || assigned == slots)
      break; // converged, or no assignment fits this cut
    slots = std::move(assigned);
  }
  return llvm::Error::success();
}

llvm::Expected<Plan> PlanSearch::planStages(unsigned numStages) {
  std::vector<char> split = mustSplit(numStages);
  unsigned splits = llvm::count(split, 1);
  unsigned numDevices = cluster.devices.size(), numLayers = layers.size();
  if (numStages + splits > numDevices)
    return llvm::createStringError(llvm::formatv(
        "{0} stages with {1} split layers need {2} devices, the cluster has "
        "{3}",
        numStages, splits, numStages + splits, numDevices));

  // Starts from devices: the fastest, as the seed does, and the largest
  // (when memory binds, the fastest may hold no cut).
  std::vector<std::vector<Slot>> starts;
  unsigned count = numStages + splits;
  std::vector<unsigned> fastest =
      pickDevices(count, [&](unsigned a, unsigned b) {
        return totalTime[a] < totalTime[b];
      });
  std::vector<unsigned> largest =
      pickDevices(count, [&](unsigned a, unsigned b) {
        return cluster.devices[a].memoryBytes > cluster.devices[b].memoryBytes;
      });
  // Each in cluster order, by memory and by speed, and each reversed: the
  // chain may want its big stages first (1F1B keeps more activations
  // there) or last, its slow devices anywhere.
  auto byMemory = [&](unsigned a, unsigned b) {
    return cluster.devices[a].memoryBytes > cluster.devices[b].memoryBytes;
  };
  auto bySpeed = [&](unsigned a, unsigned b) {
    return totalTime[a] < totalTime[b];
  };
  for (const std::vector<unsigned> *devices : {&fastest, &largest}) {
    if (devices == &largest && largest == fastest)
      continue;
    std::vector<unsigned> memoryOrder = sortedBy(*devices, byMemory),
                          speedOrder = sortedBy(*devices, bySpeed);
    for (const std::vector<unsigned> *order :
         {devices, (const std::vector<unsigned> *)&memoryOrder,
          (const std::vector<unsigned> *)&speedOrder}) {
      starts.push_back(initialSlots(*order, numStages, split));
      std::vector<unsigned> reversed(order->rbegin(), order->rend());
      starts.push_back(initialSlots(reversed, numStages, split));
    }
  }
  // The fastest devices of each node that has enough: sends between
  // stages stay on its links.
  std::map<unsigned, std::vector<unsigned>> byNode;
  for (unsigned d : sortedBy(allDevices(), bySpeed))
    byNode[cluster.devices[d].node].push_back(d);
  for (auto &[node, devices] : byNode) {
    if (devices.size() < count || devices.size() == numDevices)
      continue;
    devices.resize(count);
    llvm::sort(devices);
    starts.push_back(initialSlots(devices, numStages, split));
    std::vector<unsigned> reversed(devices.rbegin(), devices.rend());
    starts.push_back(initialSlots(reversed, numStages, split));
  }
  // Starts from cuts, assigned to the devices that hold them: the cut
  // fastest on the fastest device, and the one that balances memory.
  if (splits == 0) {
    unsigned fastestDevice = fastest.front();
    for (unsigned d : fastest)
      if (totalTime[d] < totalTime[fastestDevice])
        fastestDevice = d;
    double limit = cluster.devices[largestDevice].memoryBytes;
    auto memory = [&](unsigned k, unsigned i, unsigned j) {
      return stageMemory(layers, i, j, k, numStages, options);
    };
    auto seconds = [&](unsigned k, unsigned i, unsigned j) {
      if (memory(k, i, j) > limit)
        return kInf;
      double t = 0;
      for (unsigned l = i; l < j; ++l)
        t += times[fastestDevice][l];
      return t;
    };
    std::vector<Slot> plain(numStages);
    for (std::vector<unsigned> ends : {minMaxCut(numLayers, numStages, seconds),
                                       minMaxCut(numLayers, numStages, memory)})
      if (!ends.empty())
        starts.push_back(assign(ends, plain));
  }

  // The seed's iteration from each start, then local search from what
  // each reached (from the start itself when no cut fits it: the search
  // first lowers the memory pressure).
  std::optional<std::string> firstError;
  std::vector<Candidate> reached;
  std::set<std::vector<unsigned>> seen;
  for (const std::vector<Slot> &slots : starts) {
    if (slots.empty() || !seen.insert(classesOf(slots)).second)
      continue; // no start, or one already run up to interchangeable devices
    std::optional<Plan> plan;
    if (llvm::Error err = improve(slots, split, plan)) {
      std::string message = llvm::toString(std::move(err));
      if (!firstError)
        firstError = message;
    }
    Candidate candidate;
    if (plan) {
      candidate.slots = slotsOf(*plan);
      candidate.plan = std::move(plan);
    } else {
      candidate = evaluate(slots, split);
    }
    if (llvm::none_of(reached, [&](const Candidate &c) {
          return c.slots == candidate.slots;
        }))
      reached.push_back(std::move(candidate));
  }
  // The local search runs from each, the best first, while its budget
  // lasts (it costs far more than the iteration).
  llvm::sort(reached, [](const Candidate &a, const Candidate &b) {
    auto key = [](const Candidate &c) {
      return std::make_pair(!c.plan, c.plan ? c.plan->stepSeconds : c.pressure);
    };
    return key(a) < key(b);
  });
  Candidate result;
  unsigned moves = 0;
  double work = 0;
  for (Candidate &candidate : reached) {
    if (options.localSearch)
      moves += localSearch(candidate, split, work);
    if (candidate < result)
      result = std::move(candidate);
  }
  if (result.plan) {
    log.push_back(llvm::formatv("{0} stages: step {1:f3} ms ({2} round(s), "
                                "{3} local move(s))",
                                numStages, result.plan->stepSeconds * 1e3,
                                result.plan->rounds, moves));
    return std::move(*result.plan);
  }
  return llvm::createStringError(
      firstError ? *firstError
                 : llvm::formatv("no cut into {0} stages places the layers "
                                 "that need horizontal splitting",
                                 numStages)
                       .str());
}

PlanSearch::Candidate PlanSearch::evaluate(std::vector<Slot> slots,
                                           ArrayRef<char> split) const {
  Candidate candidate;
  std::vector<CutSlot> cut = cutSlotsFor(slots, split);
  llvm::Expected<std::vector<unsigned>> ends =
      cutSlots(layers, cut, split, options);
  if (ends) {
    Plan plan = makePlan(*ends, slots);
    candidate.plan = std::move(plan);
    candidate.pressure = 0;
  } else {
    llvm::consumeError(ends.takeError());
    candidate.pressure = minPressure(layers, cut, split, options);
  }
  candidate.slots = std::move(slots);
  return candidate;
}

unsigned PlanSearch::localSearch(Candidate &current, ArrayRef<char> split,
                                 double &work) const {
  std::vector<Slot> slots = current.slots;
  unsigned numStages = slots.size();
  // Every device the plan uses, as (stage, is the partner).
  std::vector<std::pair<unsigned, bool>> positions;
  auto collectPositions = [&] {
    positions.clear();
    for (unsigned k = 0; k < numStages; ++k) {
      positions.push_back({k, false});
      if (slots[k].partner >= 0)
        positions.push_back({k, true});
    }
  };
  auto deviceAt = [&](std::pair<unsigned, bool> p) -> unsigned {
    return p.second ? unsigned(slots[p.first].partner) : slots[p.first].device;
  };
  auto setDevice = [&](std::pair<unsigned, bool> p, unsigned d) {
    if (p.second)
      slots[p.first].partner = int(d);
    else
      slots[p.first].device = d;
  };
  // Keeps the move if it improves on `current`, else undoes it. Each costs
  // a cut, about L^2 stage evaluations (each stage grows from its end only
  // while it can still win); the budget bounds the search on long chains.
  unsigned moves = 0;
  double cutWork = double(layers.size()) * layers.size();
  auto exhausted = [&] { return work > localSearchBudget; };
  auto tryMove = [&](llvm::function_ref<void()> undo) {
    work += cutWork;
    Candidate candidate = evaluate(slots, split);
    if (candidate < current) {
      if (candidate.plan && current.plan)
        candidate.plan->rounds = current.plan->rounds;
      current = std::move(candidate);
      ++moves;
      return true;
    }
    undo();
    return false;
  };
  // First improvement, pass after pass, until a pass changes nothing.
  for (unsigned pass = 0; pass < kMaxLocalPasses && !exhausted(); ++pass) {
    unsigned before = moves;
    collectPositions();
    for (unsigned p = 0; p < positions.size() && !exhausted(); ++p) {
      for (unsigned q = p + 1; q < positions.size(); ++q) {
        unsigned a = deviceAt(positions[p]), b = deviceAt(positions[q]);
        if (deviceClass[a] == deviceClass[b])
          continue; // interchangeable devices
        setDevice(positions[p], b);
        setDevice(positions[q], a);
        tryMove([&] {
          setDevice(positions[p], a);
          setDevice(positions[q], b);
        });
      }
      std::vector<char> used(cluster.devices.size(), 0),
          tried(deviceClasses, 0);
      for (auto position : positions)
        used[deviceAt(position)] = 1;
      unsigned a = deviceAt(positions[p]);
      tried[deviceClass[a]] = 1;
      for (unsigned u = 0; u < cluster.devices.size(); ++u) {
        if (used[u] || tried[deviceClass[u]])
          continue;
        tried[deviceClass[u]] = 1;
        setDevice(positions[p], u);
        tryMove([&] { setDevice(positions[p], a); });
        if (deviceAt(positions[p]) != a)
          break; // moved; the used set changed
      }
    }
    // Stage p's devices move to position q, those between shift by one: a
    // rotation, which swaps reach only through worse plans.
    auto move = [&](unsigned from, unsigned to) {
      if (from < to)
        std::rotate(slots.begin() + from, slots.begin() + from + 1,
                    slots.begin() + to + 1);
      else
        std::rotate(slots.begin() + to, slots.begin() + from,
                    slots.begin() + from + 1);
    };
    for (unsigned p = 0; p < numStages && !exhausted(); ++p) {
      for (unsigned q = 0; q < numStages; ++q) {
        if (q == p || q == p + 1 || q + 1 == p)
          continue; // nothing, or a swap
        move(p, q);
        tryMove([&] { move(q, p); });
      }
    }
    // Stages p..q in reverse order (2-opt): devices sorted one way along
    // the chain reach the other way only through worse plans.
    for (unsigned p = 0; p < numStages && !exhausted(); ++p) {
      for (unsigned q = p + 2; q < numStages; ++q) {
        std::reverse(slots.begin() + p, slots.begin() + q + 1);
        tryMove(
            [&] { std::reverse(slots.begin() + p, slots.begin() + q + 1); });
      }
    }
    if (moves != before)
      continue;
    // Stuck. On very short pipelines: every order of the devices used.
    collectPositions();
    unsigned n = positions.size();
    if (n <= kMaxPermutedPositions) {
      std::vector<unsigned> devices, order(n), identity(n);
      for (auto position : positions)
        devices.push_back(deviceAt(position));
      std::iota(identity.begin(), identity.end(), 0);
      order = identity;
      auto place = [&](ArrayRef<unsigned> o) {
        for (unsigned p = 0; p < n; ++p)
          setDevice(positions[p], devices[o[p]]);
      };
      while (std::next_permutation(order.begin(), order.end()) &&
             !exhausted()) {
        place(order);
        if (tryMove([&] { place(identity); }))
          break; // improved; the next pass starts from here
      }
    }
    if (moves != before)
      continue;
    // On short ones: two swaps at once (the pairs grow as S^4) ...
    if (n > kMaxDoubleSwapPositions)
      break;
    auto swap = [&](unsigned p, unsigned q) {
      unsigned a = deviceAt(positions[p]), b = deviceAt(positions[q]);
      setDevice(positions[p], b);
      setDevice(positions[q], a);
    };
    for (unsigned p = 0; p < n && !exhausted(); ++p)
      for (unsigned q = p + 1; q < n; ++q)
        for (unsigned r = p + 1; r < n; ++r)
          for (unsigned t = r + 1; t < n; ++t) {
            if (r == q || t == q)
              continue;
            swap(p, q);
            swap(r, t);
            tryMove([&] {
              swap(r, t);
              swap(p, q);
            });
          }
    // ... or three devices in a cycle (p -> q -> r -> p, both ways: r > q
    // or r < q) ...
    for (unsigned p = 0; p < n && !exhausted(); ++p)
      for (unsigned q = 0; q < n; ++q)
        for (unsigned r = 0; r < n; ++r) {
          if (q <= p || r <= p || r == q)
            continue;
          unsigned a = deviceAt(positions[p]), b = deviceAt(positions[q]),
                   c = deviceAt(positions[r]);
          setDevice(positions[p], c);
          setDevice(positions[q], a);
          setDevice(positions[r], b);
          tryMove([&] {
            setDevice(positions[p], a);
            setDevice(positions[q], b);
            setDevice(positions[r], c);
          });
        }
    // ... or a device swapped for an unused one and two others swapped.
    for (unsigned p = 0; p < n && !exhausted(); ++p) {
      std::vector<char> used(cluster.devices.size(), 0),
          tried(deviceClasses, 0);
      for (auto position : positions)
        used[deviceAt(position)] = 1;
      unsigned a = deviceAt(positions[p]);
      tried[deviceClass[a]] = 1;
      bool moved = false;
      for (unsigned u = 0; u < cluster.devices.size() && !moved; ++u) {
        if (used[u] || tried[deviceClass[u]])
          continue;
        tried[deviceClass[u]] = 1;
        for (unsigned q = 0; q < n && !moved; ++q)
          for (unsigned r = q + 1; r < n && !moved; ++r) {
            setDevice(positions[p], u);
            swap(q, r);
            moved = tryMove([&] {
              swap(q, r);
              setDevice(positions[p], a);
            });
          }
      }
    }
    if (moves == before)
      break;
  }
  return moves;
}

llvm::Error PlanSearch::explainNoFit(ArrayRef<unsigned> stageCounts,
                                     ArrayRef<std::string> failures) {
  // The cut whose largest stage needs least, over the stage counts.
  double bestNeed = kInf;
  std::vector<unsigned> bestEnds;
  unsigned bestStages = 0, bestIndex = 0;
  for (unsigned index = 0; index < stageCounts.size(); ++index) {
    unsigned numStages = stageCounts[index];
    std::vector<char> split = mustSplit(numStages);
    auto need = [&](unsigned k, unsigned i, unsigned j) {
      bool single = j == i + 1 && split[i];
      for (unsigned l = i; l < j; ++l)
        if (split[l] && !single)
          return kInf;
      double memory = stageMemory(layers, i, j, k, numStages, options);
      return single ? memory / 2 : memory;
    };
    double value;
    std::vector<unsigned> ends =
        minMaxCut(layers.size(), numStages, need, &value);
    if (!ends.empty() && value < bestNeed) {
      bestNeed = value;
      bestEnds = ends;
      bestStages = numStages;
      bestIndex = index;
    }
  }
  const DeviceProfile &largest = cluster.devices[largestDevice];
  if (bestEnds.empty() || bestNeed <= largest.memoryBytes)
    return llvm::createStringError(
        llvm::formatv("no plan fits the cluster; with {0} stages: {1}",
                      stageCounts[bestIndex], failures[bestIndex]));
  std::vector<char> split = mustSplit(bestStages);
  for (unsigned k = 0, first = 0; k < bestStages; first = bestEnds[k++]) {
    double memory =
        stageMemory(layers, first, bestEnds[k], k, bestStages, options);
    bool single = bestEnds[k] == first + 1 && split[first];
    if ((single ? memory / 2 : memory) < bestNeed)
      continue;
    return llvm::createStringError(llvm::formatv(
        "no device can hold stage {0} ({1}{2}): it needs {3:f2} GiB, the "
        "largest device ({4}) has {5:f2} GiB",
        k, describeLayers(layers, first, bestEnds[k]),
        single ? ", split over two devices" : "", bestNeed / kGiB, largest.name,
        largest.memoryBytes / kGiB));
  }
  llvm_unreachable("the largest stage is in the cut");
}

llvm::Expected<Plan>
ds::partition::detail::searchPlan(ArrayRef<LayerCost> layers,
                                  const Cluster &cluster,
                                  const PlanOptions &options) {
  PlanSearch search(layers, cluster, options);
  unsigned numDevices = cluster.devices.size(), numLayers = layers.size();
  std::vector<unsigned> stageCounts;
  if (options.stages)
    stageCounts.push_back(options.stages);
  else
    for (unsigned s = 1; s <= std::min(numDevices, numLayers); ++s)
      stageCounts.push_back(s);
  std::optional<Plan> best;
  std::vector<std::string> failures;
  search.setStageCounts(stageCounts.size());
  for (unsigned numStages : stageCounts) {
    llvm::Expected<Plan> plan = search.planStages(numStages);
    if (!plan) {
      failures.push_back(llvm::toString(plan.takeError()));
      search.log.push_back(
          llvm::formatv("{0} stages: {1}", numStages, failures.back()));
      continue;
    }
    failures.emplace_back();
    if (!best || plan->stepSeconds < best->stepSeconds)
      best = std::move(*plan);
  }
  if (!best || std::isinf(best->stepSeconds))
    return search.explainNoFit(stageCounts, failures);
  best->log = std::move(search.log);
  best->log.push_back(llvm::formatv("chose {0} stages: step {1:f3} ms",
                                    best->stages.size(),
                                    best->stepSeconds * 1e3));
  return std::move(*best);
}
