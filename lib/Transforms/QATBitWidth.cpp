//===- QATBitWidth.cpp - Dynamic per-layer QAT bit-width ------------------===//
//
// Implements ds-qat-bit-width: the seed's "when a layer's gradient variance
// exceeds a threshold, raise its precision", for the weights
// ds-insert-fake-quant{dynamic-bits} gave a `qat.weight.tier` state. The
// ratio of a layer's gradient variance to the mean over the quantized
// layers is invariant under loss scaling and the loss's magnitude (as the
// channel level's), so one threshold fits every layer and run. All of it
// is scalar f64 arithmetic in the step: the tier moves on the device.
//
//===----------------------------------------------------------------------===//

#include "StepUtils.h"

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace mlir::ds {
#define GEN_PASS_DEF_QATBITWIDTHPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

namespace {
/// One weight with a dynamic bit-width.
struct Layer {
  std::string param;
  Value tier, grad;
  double baseTier;
  unsigned tierUpdate; ///< the result holding the tier's next value
};
} // namespace

LogicalResult
mlir::ds::validateQATBitWidthOptions(const QATBitWidthPassOptions &options,
                                     std::string &error) {
  const char *pass = "ds-qat-bit-width";
  if (!(options.threshold > 0) || !std::isfinite(options.threshold)) {
    error = optionError(pass, "threshold",
                        "must be positive and finite, got " +
                            Twine(std::to_string(options.threshold)));
    return failure();
  }
  if (options.window < 1) {
    error = optionError(pass, "window",
                        "must be >= 1, got " + Twine(options.window));
    return failure();
  }
  if (!(options.momentum >= 0 && options.momentum < 1)) {
    error = optionError(pass, "momentum",
                        "must be in [0, 1), got " +
                            Twine(std::to_string(options.momentum)));
    return failure();
  }
  return success();
}

LogicalResult
mlir::ds::adaptQATBitWidth(FunctionOpInterface func,
                           const QATBitWidthPassOptions &options) {
  FailureOr<TrainingContract> contract =
      requireGradientStep(func, "ds-qat-bit-width");
  if (failed(contract))
    return failure();
  if (hasStateWithPrefix(*contract, "qat.weight.grad_var"))
    return func->emitOpError("the step already adapts its bit-widths (it has "
                             "'qat.weight.grad_var' state)");
  StepEditor ed(func);
  Block &body = ed.body;
  SmallVector<Layer> layers;
  for (auto [i, arg] : llvm::enumerate(contract->args)) {
    if (arg.role != ArgRole::State || !arg.state ||
        arg.state.getKind() != "qat.weight.tier")
      continue;
    StringRef param = arg.state.getOf();
    std::optional<unsigned> p = contract->findArg(ArgRole::Param, param);
    std::optional<unsigned> g = p ? contract->findGradOf(*p) : std::nullopt;
    std::optional<unsigned> u = contract->findUpdateOf(i);
    if (!g || !u)
      return func->emitOpError("the bit-width of '")
             << param << "' needs its gradient and its tier's update";
    layers.push_back({param.str(), body.getArgument(i),
                      ed.terminator->getOperand(*g),
                      arg.init ? arg.init.getValueAsDouble() : 0.0, *u});
  }
  if (layers.empty())
    return func->emitOpError(
        "has no 'qat.weight.tier' state: run "
        "ds-insert-fake-quant{dynamic-bits} on its forward first");

  OpBuilder b(ed.terminator);
  Location loc = func.getLoc();
  ScalarBuilder s(b, loc);
  Type f64 = b.getF64Type();
  auto f64Tensor = RankedTensorType::get({}, f64);
  // Each layer's gradient variance, E[g^2] - E[g]^2, and their mean.
  SmallVector<Value> variances;
  for (Layer &l : layers) {
    auto type = cast<RankedTensorType>(l.grad.getType());
    Value n = s.f64(double(type.getNumElements()));
    Value sq = MulOp::create(b, loc, l.grad, l.grad);
    Value meanSq = s.div(s.extract(reduceAll(b, loc, sq)), n);
    Value mean = s.div(s.extract(reduceAll(b, loc, l.grad)), n);
    variances.push_back(s.sub(meanSq, s.mul(mean, mean)));
  }
  Value total = s.f64(0.0);
  for (Value v : variances)
    total = s.add(total, v);
  Value layerMean = s.div(total, s.f64(double(layers.size())));
  Value positive = s.cmpf(arith::CmpFPredicate::OGT, layerMean, s.f64(0.0));
  Value skipped;
  if (Value found = findMetric(func, *contract, "found_inf"))
    skipped = s.cmpf(arith::CmpFPredicate::OGT, s.extract(found), s.f64(0.5));

  const double threshold = options.threshold, m = options.momentum;
  for (auto [l, var] : llvm::zip_equal(layers, variances)) {
    Value estState = ed.addState("qat.weight.grad_var", l.param, f64Tensor,
                                 InitKind::constant, -1.0);
    Value calmState =
        ed.addState("qat.weight.calm", l.param, f64Tensor, InitKind::zeros);
    Value est = s.extract(estState), calm = s.extract(calmState);
    Value tier = s.extract(l.tier);
    Value r = s.select(positive, s.div(var, layerMean), s.f64(1.0));
    Value first = s.cmpf(arith::CmpFPredicate::OLT, est, s.f64(0.0));
    Value newEst = s.select(
        first, r, s.add(s.mul(s.f64(m), est), s.mul(s.f64(1.0 - m), r)));
    Value up = s.cmpf(arith::CmpFPredicate::OGT, newEst, s.f64(threshold));
    Value low = s.cmpf(arith::CmpFPredicate::OLT, newEst, s.f64(threshold / 2));
    Value newTier =
        s.select(up, s.minf(s.add(tier, s.f64(1.0)), s.f64(2.0)), tier);
    Value newCalm = s.select(
        up, s.f64(0.0), s.select(low, s.add(calm, s.f64(1.0)), s.f64(0.0)));
    // Back down after a calm window, never below the rule's tier.
    Value demote =
        s.andi(s.cmpf(arith::CmpFPredicate::OGE, newCalm,
                      s.f64(double(options.window))),
               s.cmpf(arith::CmpFPredicate::OGT, tier, s.f64(l.baseTier)));
    newTier = s.select(demote, s.sub(tier, s.f64(1.0)), newTier);
    newCalm = s.select(demote, s.f64(0.0), newCalm);
    if (skipped) {
      newEst = s.select(skipped, est, newEst);
      newTier = s.select(skipped, tier, newTier);
      newCalm = s.select(skipped, calm, newCalm);
    }
    ed.addUpdate(estState, s.tensor(newEst, f64));
    ed.addUpdate(calmState, s.tensor(newCalm, f64));
    ed.terminator->setOperand(l.tierUpdate, s.tensor(newTier, b.getF32Type()));
    // The bit-width this step ran with.
    Value bits = s.select(
        s.cmpf(arith::CmpFPredicate::OLT, tier, s.f64(0.5)), s.f64(4.0),
        s.select(s.cmpf(arith::CmpFPredicate::OLT, tier, s.f64(1.5)),
                 s.f64(8.0), s.f64(32.0)));
    ed.addMetric("qat.bits." + l.param, s.tensor(bits, b.getF32Type()));
  }
  ed.finish();
  return success();
}

namespace {
struct QATBitWidthPass
    : public mlir::ds::impl::QATBitWidthPassBase<QATBitWidthPass> {
  using Base::Base;
  void runOnOperation() override {
    ScopedPassNamePrefix named(&getContext(), getArgument());
    ModuleOp module = getOperation();
    if (failed(checkOptionsGivenOnce(module, getArgument(),
                                     {&threshold, &window, &momentum})))
      return signalPassFailure();
    QATBitWidthPassOptions options;
    options.threshold = threshold;
    options.window = window;
    options.momentum = momentum;
    std::string error;
    if (failed(validateQATBitWidthOptions(options, error))) {
      module.emitError(error);
      return signalPassFailure();
    }
    if (failed(forEachTrainStep(module, getArgument(),
                                [&](FunctionOpInterface func) {
                                  return adaptQATBitWidth(func, options);
                                })))
      signalPassFailure();
  }
};
} // namespace
