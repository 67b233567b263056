//===- InsertOptimizer.cpp - Append the parameter update ------------------===//
//
// Implements ds-insert-optimizer: turns a step that returns gradients
// (`ds.grad` results, from ds-autodiff) into a complete training step that
// returns the updated parameters. Optimizer memory (moments, momentum
// buffers) and the shared step counter become state arguments with update
// results, per the training-step contract; the learning rate follows a
// schedule driven by the step counter.
//
// The update formulas are torch.optim's single-tensor implementations, in
// the same order of operations, so that a ds step tracks PyTorch to rounding:
//   SGD:   g += wd p; buf = (t == 0) ? g : mu buf + (1 - dampening) g;
//          g = nesterov ? g + mu buf : buf;  p -= lr g
//   Adam:  g += wd p (coupled);  AdamW: p *= 1 - lr wd (decoupled);
//          m = m + (1 - b1)(g - m)   (torch's lerp_)
//          v = v b2 + (1 - b2) g^2;  t += 1
//          p += -(lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// Scalars (learning rate, bias corrections) are computed in f64 as Python
// does and rounded once to the parameter's element type.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/IR/TrainingContract.h"
#include "ds/Transforms/Passes.h"

#include "Sparsity/Sparsity.h"
#include "StepUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "llvm/ADT/StringSwitch.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/MathExtras.h"
#include <cmath>

namespace mlir::ds {
#define GEN_PASS_DEF_INSERTOPTIMIZERPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

namespace {

/// One parameter's resolved optimizer settings: the pass options with the
/// kind's defaults applied (`momentum` is SGD with momentum 0.9; negative
/// `momentum` / `weight-decay` mean the kind's default), then the
/// parameter's `ds.optim` overrides.
struct OptimizerConfig {
  enum class Kind { Sgd, Adam, AdamW };
  Kind kind = Kind::AdamW;
  LRSchedule schedule = LRSchedule::Constant;
  double lr = 1e-3, momentum = 0.0, dampening = 0.0;
  bool nesterov = false;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0.0;
  int64_t warmupSteps = 0, totalSteps = 0;
  double warmupStartFactor = 1e-3, minLrFactor = 0.0;

  static OptimizerConfig fromOptions(const InsertOptimizerPassOptions &o);
  /// Switches to `kind` with that kind's defaults, as the option does.
  void setKind(OptimizerKind kind);
  /// This configuration with the overrides of a `ds.optim` dictionary
  /// (`kind`, `lr`, `momentum`, `dampening`, `nesterov`, `beta1`, `beta2`,
  /// `eps`, `weight_decay`), validated. Fails with a message in `error`.
  FailureOr<OptimizerConfig> withOverrides(DictionaryAttr overrides,
                                           std::string &error) const;
  /// Checks the hyperparameters; fails naming the option (as the pass
  /// spells it) and the reason.
  LogicalResult validate(std::string &option, std::string &reason) const;
};

} // namespace

void OptimizerConfig::setKind(OptimizerKind k) {
  switch (k) {
  case OptimizerKind::Sgd:
    kind = Kind::Sgd, momentum = 0.0, weightDecay = 0.0;
    return;
  case OptimizerKind::Momentum:
    kind = Kind::Sgd, momentum = 0.9, weightDecay = 0.0;
    return;
  case OptimizerKind::Adam:
    kind = Kind::Adam, weightDecay = 0.0;
    return;
  case OptimizerKind::AdamW:
    kind = Kind::AdamW, weightDecay = 0.01;
    return;
  }
}

OptimizerConfig
OptimizerConfig::fromOptions(const InsertOptimizerPassOptions &o) {
  OptimizerConfig c;
  c.setKind(o.kind);
  c.schedule = o.schedule;
  // Negative means "the kind's default" for these two.
  if (o.momentum >= 0)
    c.momentum = o.momentum;
  if (o.weightDecay >= 0)
    c.weightDecay = o.weightDecay;
  c.lr = o.lr;
  c.dampening = o.dampening;
  c.nesterov = o.nesterov;
  c.beta1 = o.beta1;
  c.beta2 = o.beta2;
  c.eps = o.eps;
  c.warmupSteps = o.warmupSteps;
  c.totalSteps = o.totalSteps;
  c.warmupStartFactor = o.warmupStartFactor;
  c.minLrFactor = o.minLrFactor;
  return c;
}

LogicalResult
mlir::ds::validateOptimizerOptions(const InsertOptimizerPassOptions &options,
                                   std::string &error) {
  std::string option, reason;
  // -1 (the default) means the kind's value; other negatives are mistakes.
  if (options.momentum < 0 && options.momentum != -1.0)
    option = "momentum", reason = "must be in [0, 1), or -1 for the kind's "
                                  "default, got " +
                                  std::to_string(options.momentum);
  else if (options.weightDecay < 0 && options.weightDecay != -1.0)
    option = "weight-decay", reason = "must be >= 0, or -1 for the kind's "
                                      "default, got " +
                                      std::to_string(options.weightDecay);
  else if (succeeded(
               OptimizerConfig::fromOptions(options).validate(option, reason)))
    return success();
  error = optionError("ds-insert-optimizer", option, reason);
  return failure();
}

LogicalResult OptimizerConfig::validate(std::string &option,
                                        std::string &reason) const {
  auto fail = [&](StringRef name, const Twine &why) {
    option = name.str();
    reason = why.str();
    return failure();
  };
  auto got = [](double v) { return ", got " + std::to_string(v); };
  if (!(lr > 0) || !std::isfinite(lr))
    return fail("lr", "must be positive and finite" + got(lr));
  if (!(momentum >= 0 && momentum < 1))
    return fail("momentum", "must be in [0, 1)" + got(momentum));
  if (!(dampening >= 0 && dampening <= 1))
    return fail("dampening", "must be in [0, 1]" + got(dampening));
  if (nesterov && (momentum <= 0 || dampening != 0))
    return fail("nesterov", "needs momentum > 0 and dampening = 0");
  if (!(beta1 >= 0 && beta1 < 1))
    return fail("beta1", "must be in [0, 1)" + got(beta1));
  if (!(beta2 >= 0 && beta2 < 1))
    return fail("beta2", "must be in [0, 1)" + got(beta2));
  if (!(eps > 0) || !std::isfinite(eps))
    return fail("eps", "must be positive and finite" + got(eps));
  if (!(weightDecay >= 0) || !std::isfinite(weightDecay))
    return fail("weight-decay", "must be >= 0 and finite" + got(weightDecay));
  if (schedule == LRSchedule::WarmupCosine) {
    if (totalSteps <= 0 || warmupSteps < 0 || warmupSteps >= totalSteps)
      return fail("schedule", "warmup-cosine needs 0 <= warmup-steps < "
                              "total-steps, got warmup-steps=" +
                                  Twine(warmupSteps) +
                                  " total-steps=" + Twine(totalSteps));
    if (!(warmupStartFactor > 0 && warmupStartFactor <= 1))
      return fail("warmup-start-factor",
                  "must be in (0, 1]" + got(warmupStartFactor));
    if (!(minLrFactor >= 0 && minLrFactor <= 1))
      return fail("min-lr-factor", "must be in [0, 1]" + got(minLrFactor));
  }
  return success();
}

FailureOr<OptimizerConfig>
OptimizerConfig::withOverrides(DictionaryAttr overrides,
                               std::string &error) const {
  OptimizerConfig c = *this;
  if (!overrides)
    return c;
  auto number = [&](StringRef key, double &field) {
    Attribute v = overrides.get(key);
    if (auto f = dyn_cast_or_null<FloatAttr>(v))
      field = f.getValueAsDouble();
    else if (auto i = dyn_cast_or_null<IntegerAttr>(v))
      field = static_cast<double>(i.getInt());
  };
  // A kind switches the kind's defaults too, as the pass option does.
  if (auto kind = overrides.getAs<StringAttr>("kind")) {
    std::optional<OptimizerKind> k =
        llvm::StringSwitch<std::optional<OptimizerKind>>(kind.getValue())
            .Case("sgd", OptimizerKind::Sgd)
            .Case("momentum", OptimizerKind::Momentum)
            .Case("adam", OptimizerKind::Adam)
            .Case("adamw", OptimizerKind::AdamW)
            .Default(std::nullopt);
    if (!k) {
      error = "unknown optimizer kind '" + kind.getValue().str() +
              "'; expected sgd, momentum, adam or adamw";
      return failure();
    }
    c.setKind(*k);
  }
  number("lr", c.lr);
  number("momentum", c.momentum);
  number("dampening", c.dampening);
  number("beta1", c.beta1);
  number("beta2", c.beta2);
  number("eps", c.eps);
  number("weight_decay", c.weightDecay);
  if (auto nesterov = overrides.getAs<BoolAttr>("nesterov"))
    c.nesterov = nesterov.getValue();
  std::string option, reason;
  if (failed(c.validate(option, reason))) {
    error = option + " " + reason;
    return failure();
  }
  return c;
}

namespace {

/// Learning-rate factor at step `t` (the number of updates already done),
/// equal to torch's SequentialLR(LinearLR(start, 1, W), CosineAnnealingLR(
/// T - W, min * lr), milestones=[W]) evaluated in closed form.
Value scheduleFactor(ScalarBuilder &s, const OptimizerConfig &c, Value t) {
  if (c.schedule == LRSchedule::Constant)
    return s.f64(1.0);
  OpBuilder &b = s.b;
  Location loc = s.loc;
  double w = static_cast<double>(c.warmupSteps);
  double span = static_cast<double>(c.totalSteps - c.warmupSteps);
  // Warm-up: start + (1 - start) t / W.
  Value warm =
      s.add(s.f64(c.warmupStartFactor),
            s.mul(s.f64((1.0 - c.warmupStartFactor) / std::max(w, 1.0)), t));
  // Cosine: min + (1 - min)(1 + cos(pi min(t - W, T - W) / (T - W))) / 2.
  Value progress = s.minf(s.sub(t, s.f64(w)), s.f64(span));
  Value cosine = s.cos(s.mul(s.f64(llvm::numbers::pi / span), progress));
  Value decay =
      s.add(s.f64(c.minLrFactor), s.mul(s.f64((1.0 - c.minLrFactor) / 2.0),
                                        s.add(s.f64(1.0), cosine)));
  Value inWarmup =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, t, s.f64(w));
  return arith::SelectOp::create(b, loc, inWarmup, warm, decay);
}

} // namespace

/// Records the optimizer compiled into `func` in the module's
/// `ds.optimizer`, so that a tool can say what a flag would have changed.
static void recordOptimizer(FunctionOpInterface func,
                            const OptimizerConfig &c) {
  auto module = func->getParentOfType<ModuleOp>();
  if (!module)
    return;
  std::string text;
  llvm::raw_string_ostream os(text);
  switch (c.kind) {
  case OptimizerConfig::Kind::Sgd:
    os << "sgd lr=" << llvm::format("%g", c.lr)
       << " momentum=" << llvm::format("%g", c.momentum)
       << " dampening=" << llvm::format("%g", c.dampening)
       << (c.nesterov ? " nesterov" : "");
    break;
  case OptimizerConfig::Kind::Adam:
  case OptimizerConfig::Kind::AdamW:
    os << (c.kind == OptimizerConfig::Kind::Adam ? "adam" : "adamw")
       << " lr=" << llvm::format("%g", c.lr)
       << " beta1=" << llvm::format("%g", c.beta1)
       << " beta2=" << llvm::format("%g", c.beta2)
       << " eps=" << llvm::format("%g", c.eps);
    break;
  }
  os << " weight-decay=" << llvm::format("%g", c.weightDecay);
  if (c.schedule == LRSchedule::WarmupCosine)
    os << " schedule=warmup-cosine warmup-steps=" << c.warmupSteps
       << " total-steps=" << c.totalSteps;
  MLIRContext *ctx = func->getContext();
  NamedAttrList all;
  if (auto old =
          module->getAttrOfType<DictionaryAttr>(DSDialect::kOptimizerAttrName))
    all.append(old.getValue());
  all.set(SymbolTable::getSymbolName(func), StringAttr::get(ctx, text));
  module->setAttr(DSDialect::kOptimizerAttrName, all.getDictionary(ctx));
}

LogicalResult
mlir::ds::insertOptimizer(FunctionOpInterface func,
                          const InsertOptimizerPassOptions &options) {
  OptimizerConfig config = OptimizerConfig::fromOptions(options);
  FailureOr<TrainingContract> contract = TrainingContract::fromFunction(func);
  if (failed(contract))
    return failure();
  if (contract->hasParamUpdates())
    return func->emitOpError("the step already updates "
                             "its parameters");
  if (!contract->hasGrads())
    return func->emitOpError("the step returns no "
                             "gradients; run ds-autodiff first");
  StepEditor ed(func);
  Block &body = ed.body;
  Operation *terminator = ed.terminator;
  OpBuilder b(terminator);
  Location loc = func.getLoc();
  ScalarBuilder s(b, loc);

  // The shared step counter: reuse one if the step has it.
  auto i64 = RankedTensorType::get({}, b.getI64Type());
  Value step;
  std::optional<unsigned> stepIndex =
      contract->findArg(ArgRole::State, kStepStateKind);
  if (stepIndex) {
    step = body.getArgument(*stepIndex);
    if (step.getType() != i64)
      return func->emitOpError("the '")
             << kStepStateKind << "' state must be a tensor<i64>, got "
             << step.getType();
    if (contract->findUpdateOf(*stepIndex))
      return func->emitOpError("the '")
             << kStepStateKind << "' state is already updated";
  } else {
    step = ed.addState(kStepStateKind, "", i64, InitKind::zeros);
  }

  // Scalars shared by every parameter. The learning-rate schedule and
  // Adam's bias corrections follow `step`: they are the optimizer's own
  // count, which a skipped step does not advance (GradScaler skipping
  // optimizer.step()).
  Value stepInt = s.extractRaw(step);
  Value t = arith::SIToFPOp::create(b, loc, b.getF64Type(), stepInt);
  Value factor = scheduleFactor(s, config, t);
  Value t1 = s.add(t, s.f64(1.0));
  Value isFirst = s.cmpi(arith::CmpIPredicate::eq, stepInt, s.i64(0));
  // The `lr` metric: the learning rate of the first trained parameter.
  Value lrMetricF64;

  // A step is skipped when its `found_inf` (ds-insert-loss-scaling) or
  // `sparsity.mask_update` (ds-sparsify-matmul; RigL takes no optimizer
  // step while the masks change) metric is set: every update selects the
  // old value, on the device.
  Value skip = buildSkipFlag(b, loc, func, *contract);
  auto guard = [&](Value old, Value updated) -> Value {
    return skip ? SelectOp::create(b, updated.getLoc(), skip, old, updated)
                : updated;
  };
  // Block-sparse parameters (ds-update-sparsity-masks gave their masks'
  // new values): the parameter and its optimizer state stay exactly zero
  // outside the new mask, so dropped blocks are zeroed and grown ones start
  // at zero.
  llvm::StringMap<std::pair<Value, int64_t>> newMasks;
  for (auto [i, arg] : llvm::enumerate(contract->args)) {
    if (arg.role != ArgRole::State || !arg.state ||
        arg.state.getKind() != sparsity::kMaskStateKind)
      continue;
    std::optional<unsigned> update = contract->findUpdateOf(i);
    if (!update)
      return func->emitOpError("the block mask '")
             << arg.name
             << "' is never updated; run ds-update-sparsity-masks before "
                "ds-insert-optimizer";
    FailureOr<sparsity::SparsityConfig> sc = sparsity::lookupConfig(func);
    if (failed(sc))
      return failure();
    newMasks[arg.state.getOf()] = {terminator->getOperand(*update), sc->block};
  }
  auto masked = [&](StringRef param, Value v) -> Value {
    auto it = newMasks.find(param);
    if (it == newMasks.end())
      return v;
    return sparsity::applyMask(b, v.getLoc(), v, it->second.first,
                               it->second.second);
  };

  // Per parameter, with its `ds.optim` overrides (a front end's
  // param_groups) on top of the pass options. Updates are appended in the
  // order: parameters, then optimizer state, then the counters.
  SmallVector<std::pair<Value, Value>> paramUpdates, stateUpdates;
  for (unsigned argIndex : contract->getArgIndices(ArgRole::Param)) {
    std::optional<unsigned> gradIndex = contract->findGradOf(argIndex);
    if (!gradIndex)
      continue; // Not trained: keeps its value.
    const std::string &name = contract->args[argIndex].name;
    std::string error;
    FailureOr<OptimizerConfig> paramConfig =
        config.withOverrides(func.getArgAttrOfType<DictionaryAttr>(
                                 argIndex, DSDialect::kOptimAttrName),
                             error);
    if (failed(paramConfig))
      return func->emitOpError("'")
             << DSDialect::kOptimAttrName << "' of parameter '" << name
             << "': " << error;
    const OptimizerConfig &pc = *paramConfig;
    Value lrT = s.mul(s.f64(pc.lr), factor);
    if (!lrMetricF64)
      lrMetricF64 = lrT;
    Value bc1, bc2Sqrt;
    if (pc.kind != OptimizerConfig::Kind::Sgd) {
      bc1 = s.sub(s.f64(1.0), s.pow(s.f64(pc.beta1), t1));
      bc2Sqrt = s.sqrt(s.sub(s.f64(1.0), s.pow(s.f64(pc.beta2), t1)));
    }
    Value p = body.getArgument(argIndex);
    Value p0 = p;
    Value g = terminator->getOperand(*gradIndex);
    ed.dropResult(*gradIndex);
    auto type = cast<RankedTensorType>(p.getType());
    Type et = type.getElementType();
    Location ploc = p.getLoc();
    auto mul = [&](Value x, Value y) -> Value {
      return MulOp::create(b, ploc, x, y);
    };
    auto add = [&](Value x, Value y) -> Value {
      return AddOp::create(b, ploc, x, y);
    };
    auto sub = [&](Value x, Value y) -> Value {
      return SubOp::create(b, ploc, x, y);
    };
    auto div = [&](Value x, Value y) -> Value {
      return DivOp::create(b, ploc, x, y);
    };
    auto scalarT = [&](Value x) { return s.tensor(x, et); };
    auto constT = [&](double v) { return s.tensor(s.f64(v), et); };

    Value newP;
    if (pc.kind == OptimizerConfig::Kind::Sgd) {
      if (pc.weightDecay != 0)
        g = add(g, mul(p, constT(pc.weightDecay)));
      if (pc.momentum != 0) {
        Value buf = ed.addState("momentum_buffer", name, type, InitKind::zeros);
        Value next = add(mul(buf, constT(pc.momentum)),
                         mul(g, constT(1.0 - pc.dampening)));
        Value cond = tensor::FromElementsOp::create(
            b, loc, RankedTensorType::get({}, b.getI1Type()),
            ValueRange{isFirst});
        Value newBuf = SelectOp::create(b, ploc, cond, g, next);
        stateUpdates.push_back({buf, masked(name, guard(buf, newBuf))});
        g = pc.nesterov ? add(g, mul(newBuf, constT(pc.momentum))) : newBuf;
      }
      newP = sub(p, mul(g, scalarT(lrT)));
    } else {
      // Narrow (f16, bf16) parameters: the moments, eps and the update are
      // f32, as mixed-precision optimizers keep them (eps = 1e-8 is 0 in
      // f16, and v underflows), and only the new parameter is rounded.
      Type wide = et;
      if (auto ft = dyn_cast<FloatType>(et); ft && ft.getWidth() < 32)
        wide = b.getF32Type();
      auto wideType = type.clone(wide);
      auto widen = [&](Value x) -> Value {
        return wide == et ? x : Value(CastOp::create(b, ploc, wideType, x));
      };
      auto scalarW = [&](Value x) { return s.tensor(x, wide); };
      auto constW = [&](double v) { return s.tensor(s.f64(v), wide); };
      Value m = ed.addState("adam.m", name, wideType, InitKind::zeros);
      Value v = ed.addState("adam.v", name, wideType, InitKind::zeros);
      Value pw = widen(p);
      g = widen(g);
      if (pc.kind == OptimizerConfig::Kind::Adam && pc.weightDecay != 0)
        g = add(g, mul(pw, constW(pc.weightDecay)));
      if (pc.kind == OptimizerConfig::Kind::AdamW && pc.weightDecay != 0)
        pw = mul(pw,
                 scalarW(s.sub(s.f64(1.0), s.mul(lrT, s.f64(pc.weightDecay)))));
      Value m1 = add(m, mul(sub(g, m), constW(1.0 - pc.beta1)));
      Value v1 =
          add(mul(v, constW(pc.beta2)), mul(mul(g, g), constW(1.0 - pc.beta2)));
      Value denom = add(div(SqrtOp::create(b, ploc, v1), scalarW(bc2Sqrt)),
                        constW(pc.eps));
      Value stepSize = scalarW(s.sub(s.f64(0.0), s.div(lrT, bc1)));
      newP = add(pw, mul(stepSize, div(m1, denom)));
      if (wide != et)
        newP = CastOp::create(b, ploc, type, newP);
      stateUpdates.push_back({m, masked(name, guard(m, m1))});
      stateUpdates.push_back({v, masked(name, guard(v, v1))});
    }
    paramUpdates.push_back({p0, masked(name, guard(p0, newP))});
  }

  Value newStep =
      guard(step, s.tensor(s.add(stepInt, s.i64(1)), b.getI64Type()));
  Value lrMetric =
      s.tensor(lrMetricF64 ? lrMetricF64 : s.mul(s.f64(config.lr), factor),
               b.getF64Type());
  for (auto [param, value] : paramUpdates)
    ed.addUpdate(param, value);
  for (auto [state, value] : stateUpdates)
    ed.addUpdate(state, value);
  ed.addUpdate(step, newStep);
  // The iteration counter advances on a skipped step too.
  if (failed(getOrAddIteration(ed, *contract)))
    return failure();
  ed.addMetric("lr", lrMetric);
  ed.finish();
  recordOptimizer(func, config);
  return success();
}

namespace {
struct InsertOptimizerPass
    : public mlir::ds::impl::InsertOptimizerPassBase<InsertOptimizerPass> {
  using Base::Base;
  void runOnOperation() override {
    ScopedPassNamePrefix named(&getContext(), getArgument());
    ModuleOp module = getOperation();
    if (failed(checkOptionsGivenOnce(
            getOperation(), getArgument(),
            {&kind, &lr, &momentum, &dampening, &nesterov, &beta1, &beta2, &eps,
             &weightDecay, &schedule, &warmupSteps, &totalSteps,
             &warmupStartFactor, &minLrFactor})))
      return signalPassFailure();
    InsertOptimizerPassOptions options;
    options.kind = kind;
    options.lr = lr;
    options.momentum = momentum;
    options.dampening = dampening;
    options.nesterov = nesterov;
    options.beta1 = beta1;
    options.beta2 = beta2;
    options.eps = eps;
    options.weightDecay = weightDecay;
    options.schedule = schedule;
    options.warmupSteps = warmupSteps;
    options.totalSteps = totalSteps;
    options.warmupStartFactor = warmupStartFactor;
    options.minLrFactor = minLrFactor;
    std::string error;
    if (failed(validateOptimizerOptions(options, error))) {
      module.emitError(error);
      return signalPassFailure();
    }
    if (failed(mlir::ds::detail::forEachTrainStep(
            module, "ds-insert-optimizer", [&](FunctionOpInterface func) {
              return insertOptimizer(func, options);
            })))
      signalPassFailure();
  }
};
} // namespace
