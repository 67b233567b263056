//===- InsertFakeQuant.cpp - Quantization-aware training ------------------===//
//
// Implements ds-insert-fake-quant: finds the linear layers (a ds.matmul
// with a parameter operand), convolutions and batch norms of the forward,
// takes the first rule of the policy's quant: section that matches each
// (the seeds' tiers by default), and replaces the weight and activation
// inputs of the layers it quantizes by observed fake-quantized values
// (Quant/FakeQuantSite.h), a batch norm's output by its dynamic-FP8 value,
// and marks the layers a rule keeps for ds-assign-precision. A value several
// layers read (the input of the Q, K and V projections) is quantized once, as
// one torch.ao observer would see it.
//
//===----------------------------------------------------------------------===//

#include "Quant/FakeQuantSite.h"
#include "StepUtils.h"

#include "ds/Analysis/RoleAnalysis.h"
#include "ds/Analysis/StepQueries.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Transforms/Passes.h"
#include "ds/Transforms/PrecisionPolicy.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/MapVector.h"

#include <cmath>
#include <map>

namespace mlir::ds {
#define GEN_PASS_DEF_INSERTFAKEQUANTPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;
using namespace mlir::ds::quant;

namespace {

/// A layer (a matmul with a parameter operand, a convolution with a
/// parameter weight) or a batch norm, and the quant rule that matched it.
struct Site {
  Operation *op;
  const QuantRule *rule;
  /// For layers: the weight operand and its output-channel dimension; the
  /// input operand.
  OpOperand *weight = nullptr, *input = nullptr;
  int64_t outAxis = 0;
  /// The layer's weight parameter, which names its state.
  std::string param;
};

/// The layers and batch norms of the forward, in program order, with the
/// rule of `quant` each matches (sites no rule matches are dropped).
SmallVector<Site> findSites(FunctionOpInterface func,
                            const QuantSettings &quant) {
  RoleAnalysis roles(func);
  SmallVector<Site> sites;
  for (Operation &op : func.getFunctionBody().front()) {
    if (!isForwardOp(&op))
      continue;
    Site site{&op, nullptr};
    if (auto mm = dyn_cast<MatMulOp>(op)) {
      // The weight is quantized per output channel: the dimension that is
      // not contracted.
      int64_t rhsRank = mm.getRhs().getType().getRank();
      int64_t lhsRank = mm.getLhs().getType().getRank();
      if (traceToParam(mm.getRhs())) {
        site.weight = &op.getOpOperand(1);
        site.input = &op.getOpOperand(0);
        site.outAxis = mm.getTransposeRhs() ? rhsRank - 2 : rhsRank - 1;
      } else if (traceToParam(mm.getLhs())) {
        site.weight = &op.getOpOperand(0);
        site.input = &op.getOpOperand(1);
        site.outAxis = mm.getTransposeLhs() ? lhsRank - 1 : lhsRank - 2;
      } else {
        continue;
      }
    } else if (auto bs = dyn_cast<BlockSparseMatMulOp>(op)) {
      // A block-sparse layer (ds-sparsify-matmul ran first): its weight is
      // the parameter, quantized per output channel.
      site.weight = &op.getOpOperand(1);
      site.input = &op.getOpOperand(0);
      site.outAxis = bs.getTransposeWeight() ? 0 : 1;
    } else if (auto conv = dyn_cast<Conv2DOp>(op)) {
      if (!traceToParam(conv.getWeight()))
        continue;
      site.weight = &op.getOpOperand(1);
      site.input = &op.getOpOperand(0);
    } else if (!isa<BatchNormOp>(op)) {
      continue;
    }
    SmallVector<StringRef> params;
    for (BlockArgument p : consumedParams(&op))
      params.push_back(getParamName(p));
    // Rules name linear layers `ds.matmul`, sparse or not.
    if (isa<BlockSparseMatMulOp>(op)) {
      StringRef module;
      if (auto m = op.getAttrOfType<StringAttr>(DSDialect::kModuleAttrName))
        module = m.getValue();
      std::optional<unsigned> i = quant.matcher.match(
          MatMulOp::getOperationName(), roles.roleOf(&op), module, params);
      site.rule = i ? &quant.rules[*i] : nullptr;
    } else {
      site.rule = quant.match(&op, roles.roleOf(&op), params);
    }
    if (!site.rule)
      continue;
    if (site.weight)
      site.param = getParamName(traceToParam(site.weight->get())).str();
    sites.push_back(site);
  }
  return sites;
}

/// "file:line:col" of a policy rule.
std::string ruleAt(const QuantRule &rule) {
  std::string text = rule.label;
  if (auto loc = dyn_cast_or_null<FileLineColLoc>(rule.loc))
    text += " at " + loc.getFilename().str() + ":" +
            std::to_string(loc.getLine()) + ":" +
            std::to_string(loc.getColumn());
  return text;
}

/// The policy: the file's quant: section, or the default tiers.
FailureOr<PrecisionPolicy>
loadQuantPolicy(FunctionOpInterface func,
                const InsertFakeQuantPassOptions &options) {
  if (options.policy.empty())
    return PrecisionPolicy::parse(
        PrecisionPolicy::defaultQuantText(options.weightBits,
                                          options.activationBits),
        "<default quant policy>", func->getContext());
  FailureOr<PrecisionPolicy> policy =
      PrecisionPolicy::load(options.policy, func.getLoc());
  if (succeeded(policy) && !policy->quant.enabled) {
    emitError(FileLineColLoc::get(func->getContext(), options.policy, 1, 1))
        << "the policy has no 'quant:' section for ds-insert-fake-quant";
    return failure();
  }
  return policy;
}

} // namespace

LogicalResult
mlir::ds::validateFakeQuantOptions(const InsertFakeQuantPassOptions &options,
                                   std::string &error) {
  const char *pass = "ds-insert-fake-quant";
  auto bits = [&](StringRef option, int64_t value) {
    if (value >= 2 && value <= 16)
      return true;
    error =
        optionError(pass, option, "must be in [2, 16], got " + Twine(value));
    return false;
  };
  if (!bits("weight-bits", options.weightBits) ||
      !bits("activation-bits", options.activationBits))
    return failure();
  if (options.reduceRange && options.activationBits < 3) {
    error = optionError(pass, "reduce-range",
                        "needs activation-bits >= 3, got " +
                            Twine(options.activationBits));
    return failure();
  }
  if (!(options.averagingConstant > 0 && options.averagingConstant <= 1)) {
    error = optionError(pass, "averaging-constant",
                        "must be in (0, 1], got " +
                            Twine(std::to_string(options.averagingConstant)));
    return failure();
  }
  if (options.freezeObserversAt < 0) {
    error = optionError(pass, "freeze-observers-at",
                        "must be >= 0 (0: never), got " +
                            Twine(options.freezeObserversAt));
    return failure();
  }
  if (options.fakeQuantFrom < 0) {
    error = optionError(pass, "fake-quant-from",
                        "must be >= 0, got " + Twine(options.fakeQuantFrom));
    return failure();
  }
  if (options.freezeObserversAt > 0 &&
      options.freezeObserversAt <= options.fakeQuantFrom) {
    error = optionError(
        pass, "freeze-observers-at",
        "freezes the observers at iteration " +
            Twine(options.freezeObserversAt) +
            ", before fake quantization starts (fake-quant-from = " +
            Twine(options.fakeQuantFrom) + ")");
    return failure();
  }
  if (options.observer == QuantObserver::MaxAbs) {
    error = optionError(pass, "observer",
                        "max-abs is the seeds' symmetric weight scale; the "
                        "activation grid is affine (use moving-average, "
                        "min-max or current)");
    return failure();
  }
  if (options.learnScales && options.dynamicBits) {
    error = optionError(pass, "learn-scales",
                        "and 'dynamic-bits' do not combine: a learned scale "
                        "belongs to one grid");
    return failure();
  }
  if (!(options.scaleLr >= 0) || std::isinf(options.scaleLr)) {
    error = optionError(pass, "scale-lr",
                        "must be >= 0 and finite (0: the optimizer's), got " +
                            Twine(std::to_string(options.scaleLr)));
    return failure();
  }
  if (options.scaleLr > 0 && !options.learnScales) {
    error = optionError(pass, "scale-lr",
                        "needs 'learn-scales' (observed scales are not "
                        "trained)");
    return failure();
  }
  if (options.learnScales && options.freezeObserversAt > 0) {
    error = optionError(pass, "freeze-observers-at",
                        "has nothing to freeze with 'learn-scales' (no "
                        "observer runs; the scales are parameters)");
    return failure();
  }
  if (!options.weights && !options.activations) {
    error = optionError(pass, "weights",
                        "and 'activations' are both off: nothing to do");
    return failure();
  }
  return success();
}

LogicalResult
mlir::ds::insertFakeQuant(FunctionOpInterface func,
                          const InsertFakeQuantPassOptions &options) {
  FailureOr<TrainingContract> contract = TrainingContract::fromFunction(func);
  if (failed(contract))
    return failure();
  if (contract->hasGrads() || contract->hasParamUpdates())
    return func->emitOpError(
        "runs on the forward + loss step, before ds-autodiff; this step "
        "already has gradients or updates");
  if (hasStateWithPrefix(*contract, "qat."))
    return func->emitOpError(
        "the step is already fake-quantized (it has 'qat.*' state)");
  Region &region = func.getFunctionBody();
  if (!region.hasOneBlock())
    return func->emitOpError("expects a function with one block");

  FailureOr<PrecisionPolicy> policy = loadQuantPolicy(func, options);
  if (failed(policy))
    return failure();
  SmallVector<Site> sites = findSites(func, policy->quant);
  if (sites.empty()) {
    func->emitWarning("found no layer the quantization policy matches; the "
                      "step is unchanged");
    return success();
  }

  auto specFor = [&](int64_t bits, bool weight) {
    QuantSpec spec;
    spec.observer = weight ? options.weightObserver : options.observer;
    spec.averagingConstant = options.averagingConstant;
    spec.scaleLr = options.scaleLr;
    if (weight) {
      spec.symmetric = true;
      spec.qmin = -(int64_t(1) << (bits - 1));
      spec.qmax = (int64_t(1) << (bits - 1)) - 1;
    } else {
      int64_t b = bits - (options.reduceRange ? 1 : 0);
      spec.qmin = 0;
      spec.qmax = (int64_t(1) << b) - 1;
    }
    return spec;
  };

  // Plan every quantized value and check the plan before the IR changes,
  // so that an error leaves the step as it was.
  struct Planned {
    OpOperand *operand;
    const char *kind;
    std::string param;
    QuantSpec spec;
    int64_t tier = -1;
    const QuantRule *rule;
  };
  SmallVector<Planned> plan;
  for (Site &site : sites) {
    const QuantRule &rule = *site.rule;
    if (rule.keep)
      continue;
    if (site.weight && rule.weightBits && options.weights) {
      QuantSpec spec = specFor(rule.weightBits, /*weight=*/true);
      spec.axis = site.outAxis;
      if (rule.groupSize) {
        auto w = cast<RankedTensorType>(site.weight->get().getType());
        if (w.getRank() != 2)
          return site.op->emitOpError("'")
                 << site.param << "' is " << w.getRank()
                 << "-D: per-group weights (" << ruleAt(rule)
                 << ") need a 2-D weight; use per-channel";
        int64_t reduction = 1 - site.outAxis;
        if (w.getDimSize(reduction) % rule.groupSize != 0)
          return site.op->emitOpError("group ")
                 << rule.groupSize << " of " << ruleAt(rule)
                 << " does not divide the reduction dimension "
                 << w.getDimSize(reduction) << " of '" << site.param << "'";
        spec.axis = reduction;
        spec.groupSize = rule.groupSize;
      }
      int64_t tier = -1;
      if (options.dynamicBits) {
        if (rule.groupSize || (rule.weightBits != 4 && rule.weightBits != 8))
          return site.op->emitOpError("dynamic-bits moves weights between "
                                      "int4 and int8 per channel, but ")
                 << ruleAt(rule) << " quantizes '" << site.param << "' to int"
                 << rule.weightBits << (rule.groupSize ? " per group" : "")
                 << "; give it 'weight: int4' or 'int8' and 'group: channel'";
        tier = rule.weightBits == 4 ? 0 : 1;
      }
      plan.push_back({site.weight, "weight", site.param, spec, tier, &rule});
    }
    if (site.input && rule.activationBits && options.activations)
      plan.push_back({site.input, "input", site.param,
                      specFor(rule.activationBits, /*weight=*/false), -1,
                      &rule});
  }
  // One value is quantized once (several layers reading it share it), so
  // their rules must agree; and one state name holds one value.
  {
    llvm::DenseMap<Value, const Planned *> byValue;
    std::map<std::pair<std::string, std::string>, const Planned *> byName;
    for (const Planned &p : plan) {
      Operation *layer = p.operand->getOwner();
      auto [it, fresh] = byValue.try_emplace(p.operand->get(), &p);
      if (!fresh) {
        const QuantSpec &a = it->second->spec, &b = p.spec;
        if (a.qmin != b.qmin || a.qmax != b.qmax || a.axis != b.axis ||
            a.groupSize != b.groupSize || it->second->tier != p.tier ||
            std::string(it->second->kind) != p.kind)
          return layer->emitOpError("reads a value that another layer (at ")
                 << it->second->operand->getOwner()->getLoc()
                 << ") also reads, quantized differently ("
                 << ruleAt(*it->second->rule) << " and " << ruleAt(*p.rule)
                 << "); one value has one fake-quantizer";
        continue;
      }
      auto [jt, newName] = byName.try_emplace({p.kind, p.param}, &p);
      if (!newName)
        return layer->emitOpError("is the second layer whose ")
               << p.kind << " is named after '" << p.param
               << "' but is another value (the first is at "
               << jt->second->operand->getOwner()->getLoc() << "): its 'qat."
               << p.kind << ".*@" << p.param
               << "' state would be ambiguous; give the layers their own "
                  "parameters";
    }
  }

  StepEditor ed(func);
  FailureOr<Value> iteration = getOrAddIteration(ed, *contract);
  if (failed(iteration))
    return failure();
  QuantSchedule schedule{options.freezeObserversAt, options.fakeQuantFrom,
                         options.observe};

  // One fake-quantized value per quantized value, built right after its
  // definition (so it dominates every layer that reads it); those of
  // arguments before the first op, in the order of the layers. Everything
  // built is marked as quantization machinery.
  llvm::MapVector<Value, Value> quantized;
  Operation *firstOp = &region.front().front();
  auto quantize = [&](OpOperand *operand, StringRef kind, StringRef param,
                      QuantSpec spec, int64_t tier = -1) {
    Value v = operand->get();
    auto it = quantized.find(v);
    if (it == quantized.end()) {
      OpBuilder b(func.getContext());
      if (isa<BlockArgument>(v))
        b.setInsertionPoint(firstOp);
      else
        b.setInsertionPointAfter(v.getDefiningOp());
      if (tier >= 0) {
        spec.tier = ed.addState("qat.weight.tier", param,
                                RankedTensorType::get({}, b.getF32Type()),
                                InitKind::constant, double(tier));
        // ds-qat-bit-width replaces this update.
        ed.addUpdate(spec.tier, spec.tier);
      }
      CreatedOps created;
      b.setListener(&created);
      Location loc = operand->getOwner()->getLoc();
      Value q = options.learnScales
                    ? learnAndFakeQuantize(ed, b, loc, v, kind, param, spec,
                                           schedule, *iteration)
                    : observeAndFakeQuantize(ed, b, loc, v, kind, param, spec,
                                             schedule, *iteration);
      for (Operation *op : created.getOps())
        op->setAttr(DSDialect::kQuantAttrName, b.getUnitAttr());
      it = quantized.insert({v, q}).first;
    }
    operand->set(it->second);
  };
  for (const Planned &p : plan)
    quantize(p.operand, p.kind, p.param, p.spec, p.tier);
  for (Site &site : sites) {
    const QuantRule &rule = *site.rule;
    if (rule.keep) {
      site.op->setAttr(DSDialect::kQuantKeepAttrName, TypeAttr::get(rule.keep));
      continue;
    }
    if (rule.outputFP8) {
      // This step's scale: no state. Uses of the result move to the
      // quantized value (but not the ops computing its scale).
      Value result = site.op->getResult(0);
      OpBuilder b(site.op->getContext());
      b.setInsertionPointAfter(site.op);
      CreatedOps created;
      b.setListener(&created);
      Value q = dynamicFP8(b, site.op->getLoc(), result);
      for (Operation *op : created.getOps())
        op->setAttr(DSDialect::kQuantAttrName, b.getUnitAttr());
      result.replaceUsesWithIf(
          q, [&](OpOperand &use) { return !created.contains(use.getOwner()); });
    }
  }
  ed.finish();
  return success();
}

namespace {
struct InsertFakeQuantPass
    : public mlir::ds::impl::InsertFakeQuantPassBase<InsertFakeQuantPass> {
  using Base::Base;

  void runOnOperation() override {
    ScopedPassNamePrefix named(&getContext(), getArgument());
    ModuleOp module = getOperation();
    if (failed(checkOptionsGivenOnce(
            module, getArgument(),
            {&weights, &activations, &weightBits, &activationBits, &reduceRange,
             &observer, &averagingConstant, &freezeObserversAt, &fakeQuantFrom,
             &observe, &policy, &dynamicBits, &learnScales, &scaleLr})))
      return signalPassFailure();
    InsertFakeQuantPassOptions options;
    options.weights = weights;
    options.activations = activations;
    options.weightBits = weightBits;
    options.activationBits = activationBits;
    options.reduceRange = reduceRange;
    options.observer = observer;
    options.weightObserver = weightObserver;
    options.averagingConstant = averagingConstant;
    options.freezeObserversAt = freezeObserversAt;
    options.fakeQuantFrom = fakeQuantFrom;
    options.observe = observe;
    options.policy = policy;
    options.dynamicBits = dynamicBits;
    options.learnScales = learnScales;
    options.scaleLr = scaleLr;
    std::string error;
    if (failed(validateFakeQuantOptions(options, error))) {
      module.emitError(error);
      return signalPassFailure();
    }
    if (failed(forEachTrainStep(module, getArgument(),
                                [&](FunctionOpInterface func) {
                                  return insertFakeQuant(func, options);
                                })))
      signalPassFailure();
  }
};
} // namespace
