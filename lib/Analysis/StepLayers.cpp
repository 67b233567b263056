//===- StepLayers.cpp - A training step as a chain of layers -------------===//
//
// The phases of a step's ops (what runs per micro-batch, what once per
// step), its layers (segments of the forward between the narrowest cuts)
// and their costs for the pipeline planner.
//
//===----------------------------------------------------------------------===//

#include "ds/Analysis/StepLayers.h"

#include "ds/Analysis/CostModel.h"
#include "ds/Analysis/StepQueries.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/IR/TrainingContract.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::ds;
using ::ds::partition::LayerCost;

FailureOr<StepPhases> mlir::ds::classifyStep(func::FuncOp step) {
  StepPhases phases;
  if (!step.getBody().hasOneBlock())
    return step.emitOpError("expects a step with one block");
  Block &body = step.getBody().front();

  // Ops that depend on a batch input (per micro-batch values).
  llvm::DenseSet<Operation *> onInput;
  auto isInputArg = [&](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner() == &body &&
           step.getArgAttr(arg.getArgNumber(), DSDialect::kInputAttrName);
  };
  llvm::DenseMap<int64_t, Operation *> forwardById;
  for (Operation &op : body.without_terminator()) {
    if (llvm::any_of(op.getOperands(), [&](Value v) {
          Operation *def = v.getDefiningOp();
          return isInputArg(v) || (def && onInput.contains(def));
        }))
      onInput.insert(&op);
    auto id = op.getAttrOfType<IntegerAttr>(DSDialect::kOpIdAttrName);
    if (id && !op.hasAttr(DSDialect::kVjpOfAttrName) && onInput.contains(&op)) {
      phases.phase[&op] = OpPhase::Forward;
      phases.forward.push_back(&op);
      forwardById[id.getInt()] = &op;
    }
  }
  for (Operation &op : body.without_terminator()) {
    if (!op.hasAttr(DSDialect::kVjpOfAttrName))
      continue;
    // Ops a later pass added to the backward without a forward op (the
    // casts of ds-assign-precision) are classified by what they read and
    // feed, below.
    auto id = op.getAttrOfType<IntegerAttr>(DSDialect::kOpIdAttrName);
    if (!id)
      continue;
    // A backward op that reads no per-micro-batch value (a constant, a
    // reshaped weight) is free: each stage that needs it computes it.
    if (!onInput.contains(&op))
      continue;
    if (Operation *fwd = forwardById.lookup(id.getInt())) {
      phases.phase[&op] = OpPhase::Backward;
      phases.ownerOf[&op] = fwd;
    }
  }

  // Ops that depend on the backward, and ops that feed it.
  llvm::DenseSet<Operation *> onBackward, feedsBackward;
  for (Operation &op : body.without_terminator())
    if (llvm::any_of(op.getOperands(), [&](Value v) {
          Operation *def = v.getDefiningOp();
          return def && (phases.of(def) == OpPhase::Backward ||
                         onBackward.contains(def));
        }))
      onBackward.insert(&op);
  for (Operation &op : llvm::reverse(body.without_terminator()))
    if (llvm::any_of(op.getUsers(), [&](Operation *user) {
          return phases.of(user) == OpPhase::Backward ||
                 feedsBackward.contains(user);
        }))
      feedsBackward.insert(&op);

  for (Operation &op : body.without_terminator()) {
    if (phases.phase.count(&op))
      continue;
    if (onBackward.contains(&op)) {
      phases.phase[&op] =
          feedsBackward.contains(&op) ? OpPhase::Free : OpPhase::Update;
      continue;
    }
    // An untagged op computed from the forward's values (an activation's
    // cast, a metric of the loss) goes with the latest forward op it reads.
    Operation *owner = nullptr;
    for (Value v : op.getOperands()) {
      Operation *def = v.getDefiningOp();
      if (!def || phases.of(def) != OpPhase::Forward)
        continue;
      Operation *root = phases.ownerOf.lookup(def);
      root = root ? root : def;
      if (!owner || owner->isBeforeInBlock(root))
        owner = root;
    }
    if (owner) {
      phases.phase[&op] = OpPhase::Forward;
      phases.ownerOf[&op] = owner;
    } else {
      phases.phase[&op] = OpPhase::Free;
    }
  }
  if (phases.forward.empty())
    return step.emitOpError("has no forward op that reads a batch input");
  return phases;
}

namespace {

/// The common dotted prefix of `names` ("layers.3." of "layers.3.ln1.weight"
/// and "layers.3.attn.q_proj.weight"), without its trailing dot.
std::string commonPrefix(ArrayRef<std::string> names) {
  if (names.empty())
    return "";
  SmallVector<StringRef> first;
  StringRef(names.front()).split(first, '.');
  size_t n = first.size() - 1; // never the leaf name itself
  for (const std::string &name : names.drop_front()) {
    SmallVector<StringRef> parts;
    StringRef(name).split(parts, '.');
    size_t k = 0;
    while (k < n && k + 1 < parts.size() && parts[k] == first[k])
      ++k;
    n = k;
  }
  return llvm::join(ArrayRef<StringRef>(first).take_front(n), ".");
}

/// Compression ratio of the gradient all-reduce the module compiles in,
/// from its `ds.data_parallel` settings (1 without compression; the error-
/// feedback schemes' typical ratios measured in docs/DataParallel.md).
double compressionRatio(ModuleOp module) {
  auto dp = module ? module->getAttrOfType<DictionaryAttr>(
                         DSDialect::kDataParallelAttrName)
                   : DictionaryAttr();
  if (!dp)
    return 0; // no data parallelism: nothing is all-reduced
  auto scheme = dp.getAs<StringAttr>("compression");
  if (!scheme || scheme.getValue() == "none")
    return 1;
  if (scheme.getValue() == "fp16" || scheme.getValue() == "bf16")
    return 2;
  if (scheme.getValue() == "powersgd")
    return 28;
  return 14; // three-tier at its default quantiles; top-k is sparser
}

/// GEMMs and convolutions: compute-bound on every device the planner
/// knows; everything else streams memory.
bool isGemmLike(Operation *op) {
  if (isa<MatMulOp, Conv2DOp, Conv2DGradInputOp, Conv2DGradWeightOp,
          BlockSparseMatMulOp, BlockSampledMatMulOp, QuantizedMatMulOp>(op))
    return true;
  StringRef name = op->getName().getStringRef();
  return name.contains("matmul") || name.contains("conv");
}

} // namespace

FailureOr<StepLayers> mlir::ds::collectStepLayers(func::FuncOp step) {
  FailureOr<StepPhases> phases = classifyStep(step);
  if (failed(phases))
    return failure();
  StepLayers result;
  result.phases = std::move(*phases);
  const StepPhases &ph = result.phases;
  unsigned n = ph.forward.size();
  llvm::DenseMap<Operation *, unsigned> position;
  for (auto [i, op] : llvm::enumerate(ph.forward))
    position[op] = i;
  // The forward position an op of the micro-batch belongs to.
  auto positionOf = [&](Operation *op) -> std::optional<unsigned> {
    OpPhase p = ph.of(op);
    if (p != OpPhase::Forward && p != OpPhase::Backward)
      return std::nullopt;
    Operation *owner = ph.ownerOf.lookup(op);
    return position.lookup(owner ? owner : op);
  };

  // The last forward position that needs each value: users through the
  // free ops that are cloned where they are used.
  llvm::DenseMap<Value, int64_t> lastNeed;
  std::function<int64_t(Value)> lastNeedOf = [&](Value v) -> int64_t {
    auto it = lastNeed.find(v);
    if (it != lastNeed.end())
      return it->second;
    lastNeed[v] = -1; // no cycles in SSA, but keep recursion finite
    int64_t last = -1;
    for (Operation *user : v.getUsers()) {
      if (std::optional<unsigned> p = positionOf(user))
        last = std::max<int64_t>(last, *p);
      else if (ph.of(user) == OpPhase::Free)
        for (Value r : user->getResults())
          last = std::max(last, lastNeedOf(r));
    }
    return lastNeed[v] = last;
  };
  std::vector<double> crossingBytes(n, 0.0);
  result.crossing.assign(n, {});
  for (Operation &op : step.getBody().front().without_terminator()) {
    if (ph.of(&op) != OpPhase::Forward)
      continue;
    unsigned p = *positionOf(&op);
    for (Value r : op.getResults()) {
      int64_t last = lastNeedOf(r);
      for (int64_t cut = p; cut < last; ++cut) {
        crossingBytes[cut] += bytesOf(r);
        result.crossing[cut].push_back(r);
      }
    }
  }

  // Cut candidates: the narrowest cuts.
  double narrowest = std::numeric_limits<double>::infinity();
  for (unsigned i = 0; i + 1 < n; ++i)
    if (crossingBytes[i] > 0)
      narrowest = std::min(narrowest, crossingBytes[i]);
  SmallVector<unsigned> ends; // end position (exclusive) of each layer
  for (unsigned i = 0; i + 1 < n; ++i)
    if (crossingBytes[i] == narrowest)
      ends.push_back(i + 1);
  ends.push_back(n);
  std::vector<SmallVector<Value>> crossing;
  unsigned begin = 0;
  for (unsigned end : ends) {
    for (unsigned i = begin; i < end; ++i)
      result.layerOf[ph.forward[i]] = result.costs.size();
    result.costs.emplace_back();
    if (end < n) {
      result.costs.back().outputBytes = crossingBytes[end - 1];
      crossing.push_back(result.crossing[end - 1]);
    }
    begin = end;
  }
  crossing.emplace_back();
  result.crossing = std::move(crossing);
  for (auto &[op, owner] : ph.ownerOf)
    if (ph.of(op) == OpPhase::Forward)
      result.layerOf[op] = result.layerOf.lookup(owner);

  // Costs of the forward and backward ops.
  auto layerOfOp = [&](Operation *op) -> std::optional<unsigned> {
    OpPhase p = ph.of(op);
    if (p == OpPhase::Forward)
      return result.layerOf.lookup(op);
    if (p == OpPhase::Backward)
      return result.layerOf.lookup(ph.ownerOf.lookup(op));
    return std::nullopt;
  };
  Block &body = step.getBody().front();
  for (Operation &op : body.without_terminator()) {
    std::optional<unsigned> layer = layerOfOp(&op);
    if (!layer)
      continue;
    LayerCost &c = result.costs[*layer];
    OpCost cost = costOf(&op);
    if (isGemmLike(&op)) {
      for (unsigned p = 0; p < ::ds::partition::kNumPrecisions; ++p) {
        c.denseFlops[p] += cost.denseFlops[p];
        c.sparseFlops[p] += cost.sparseFlops[p];
      }
      c.bytesMoved += cost.bytesMoved;
    } else {
      // Memory-bound: its time is its traffic (see LayerCost::streamBytes).
      c.streamBytes += cost.bytesMoved;
    }
    // Activations kept for the backward.
    if (ph.of(&op) == OpPhase::Forward)
      for (Value r : op.getResults())
        if (llvm::any_of(r.getUsers(), [&](Operation *u) {
              return ph.of(u) == OpPhase::Backward;
            }))
          c.activationBytes += bytesOf(r);
  }

  // Resident bytes: each parameter in the first layer that reads it, its
  // optimizer and technique state with it.
  FailureOr<TrainingContract> contract = TrainingContract::fromFunction(step);
  if (failed(contract))
    return failure();
  double ratio = compressionRatio(step->getParentOfType<ModuleOp>());
  llvm::StringMap<unsigned> paramLayer;
  std::vector<std::vector<std::string>> names(result.costs.size());
  std::function<std::optional<unsigned>(Value)> firstLayer =
      [&](Value v) -> std::optional<unsigned> {
    std::optional<unsigned> best;
    for (Operation *user : v.getUsers()) {
      std::optional<unsigned> l = layerOfOp(user);
      if (!l && ph.of(user) == OpPhase::Free)
        for (Value r : user->getResults())
          if (std::optional<unsigned> lr = firstLayer(r))
            l = best ? std::min(*best, *lr) : *lr;
      if (l && (!best || *l < *best))
        best = l;
    }
    return best;
  };
  for (auto [i, arg] : llvm::enumerate(contract->args)) {
    if (arg.role != ArgRole::Param)
      continue;
    std::optional<unsigned> l = firstLayer(body.getArgument(i));
    if (!l)
      continue;
    paramLayer[arg.name] = *l;
    names[*l].push_back(arg.name);
    double bytes = bytesOf(body.getArgument(i));
    result.costs[*l].paramBytes += bytes;
    if (ratio > 0)
      result.costs[*l].allReduceBytes += bytes / ratio;
  }
  for (auto [i, arg] : llvm::enumerate(contract->args)) {
    if (arg.role != ArgRole::State || !arg.state || arg.state.getOf().empty())
      continue;
    auto it = paramLayer.find(arg.state.getOf());
    if (it == paramLayer.end())
      continue;
    double bytes = bytesOf(body.getArgument(i));
    StringRef kind = arg.state.getKind();
    if (kind.starts_with("adam") || kind.starts_with("momentum") ||
        kind.starts_with("sgd"))
      result.costs[it->second].optimizerBytes += bytes;
    else
      result.costs[it->second].stateBytes += bytes;
  }
  for (auto [i, c] : llvm::enumerate(result.costs)) {
    std::string prefix = commonPrefix(names[i]);
    c.name = prefix.empty() ? ("layer" + std::to_string(i)) : prefix;
  }
  return result;
}
