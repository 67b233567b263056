//===- InsertFakeQuant.cpp - Quantization-aware training ------------------===//
//
// Implements ds-insert-fake-quant: finds the linear layers (a ds.matmul
// with a parameter operand) and convolutions of the forward, and replaces
// their weight and activation inputs by observed fake-quantized values
// (Quant/FakeQuantSite.h). A value several layers read (the input of the
// Q, K and V projections) is quantized once, as one torch.ao observer
// would see it.
//
//===----------------------------------------------------------------------===//

#include "Quant/FakeQuantSite.h"
#include "StepUtils.h"

#include "ds/Analysis/StepQueries.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::ds {
#define GEN_PASS_DEF_INSERTFAKEQUANTPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;
using namespace mlir::ds::quant;

namespace {

/// One operand to fake-quantize.
struct Site {
  OpOperand *operand;
  bool isWeight;
  /// The weight's output-channel dimension.
  int64_t axis = 0;
  /// The layer's weight parameter, which names the state of both its
  /// weight and its input.
  std::string param;
};

/// The linear layers and convolutions of the forward, in program order:
/// the ops with a weight operand that is a parameter.
SmallVector<Site> findSites(Block &body) {
  SmallVector<Site> sites;
  auto add = [&](Operation *op, unsigned weightIndex, unsigned inputIndex,
                 int64_t axis) {
    StringRef param = getParamName(traceToParam(op->getOperand(weightIndex)));
    sites.push_back({&op->getOpOperand(weightIndex), true, axis, param.str()});
    sites.push_back({&op->getOpOperand(inputIndex), false, 0, param.str()});
  };
  for (Operation &op : body) {
    if (!isForwardOp(&op))
      continue;
    if (auto mm = dyn_cast<MatMulOp>(op)) {
      // The weight is quantized per output channel: the dimension that is
      // not contracted.
      int64_t rhsRank = mm.getRhs().getType().getRank();
      int64_t lhsRank = mm.getLhs().getType().getRank();
      if (traceToParam(mm.getRhs()))
        add(&op, 1, 0, mm.getTransposeRhs() ? rhsRank - 2 : rhsRank - 1);
      else if (traceToParam(mm.getLhs()))
        add(&op, 0, 1, mm.getTransposeLhs() ? lhsRank - 1 : lhsRank - 2);
    } else if (auto conv = dyn_cast<Conv2DOp>(op)) {
      if (traceToParam(conv.getWeight()))
        add(&op, 1, 0, /*axis=*/0);
    }
  }
  return sites;
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

  SmallVector<Site> sites = findSites(region.front());
  if (sites.empty()) {
    func->emitWarning("found no linear layer or convolution to "
                      "fake-quantize; the step is unchanged");
    return success();
  }

  StepEditor ed(func);
  FailureOr<Value> iteration = getOrAddIteration(ed, *contract);
  if (failed(iteration))
    return failure();
  QuantSchedule schedule{options.freezeObserversAt, options.fakeQuantFrom,
                         options.observe};
  QuantSpec weightSpec, activationSpec;
  weightSpec.symmetric = true;
  weightSpec.qmin = -(int64_t(1) << (options.weightBits - 1));
  weightSpec.qmax = (int64_t(1) << (options.weightBits - 1)) - 1;
  int64_t activationBits =
      options.activationBits - (options.reduceRange ? 1 : 0);
  activationSpec.qmin = 0;
  activationSpec.qmax = (int64_t(1) << activationBits) - 1;
  for (QuantSpec *spec : {&weightSpec, &activationSpec}) {
    spec->observer = options.observer;
    spec->averagingConstant = options.averagingConstant;
  }

  // One fake-quantized value per quantized value, built right after its
  // definition (so it dominates every layer that reads it); those of
  // arguments before the first op, in the order of the layers.
  llvm::MapVector<Value, Value> quantized;
  Operation *firstOp = &region.front().front();
  for (Site &site : sites) {
    if ((site.isWeight && !options.weights) ||
        (!site.isWeight && !options.activations))
      continue;
    Value v = site.operand->get();
    auto it = quantized.find(v);
    if (it == quantized.end()) {
      OpBuilder b(func.getContext());
      if (isa<BlockArgument>(v))
        b.setInsertionPoint(firstOp);
      else
        b.setInsertionPointAfter(v.getDefiningOp());
      // Everything built here is quantization machinery.
      CreatedOps created;
      b.setListener(&created);
      QuantSpec spec = site.isWeight ? weightSpec : activationSpec;
      if (site.isWeight)
        spec.axis = site.axis;
      Value q =
          observeAndFakeQuantize(ed, b, site.operand->getOwner()->getLoc(), v,
                                 site.isWeight ? "weight" : "input", site.param,
                                 spec, schedule, *iteration);
      for (Operation *op : created.getOps())
        op->setAttr(DSDialect::kQuantAttrName, b.getUnitAttr());
      it = quantized.insert({v, q}).first;
    }
    site.operand->set(it->second);
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
    if (failed(checkOptionsGivenOnce(module, getArgument(),
                                     {&weights, &activations, &weightBits,
                                      &activationBits, &reduceRange, &observer,
                                      &averagingConstant, &freezeObserversAt,
                                      &fakeQuantFrom, &observe})))
      return signalPassFailure();
    InsertFakeQuantPassOptions options;
    options.weights = weights;
    options.activations = activations;
    options.weightBits = weightBits;
    options.activationBits = activationBits;
    options.reduceRange = reduceRange;
    options.observer = observer;
    options.averagingConstant = averagingConstant;
    options.freezeObserversAt = freezeObserversAt;
    options.fakeQuantFrom = fakeQuantFrom;
    options.observe = observe;
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
