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

#include "StepUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "llvm/Support/MathExtras.h"

namespace mlir::ds {
#define GEN_PASS_DEF_INSERTOPTIMIZERPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

FailureOr<OptimizerConfig> OptimizerConfig::get(
    StringRef kind, StringRef schedule, double lr, double momentum,
    double dampening, bool nesterov, double beta1, double beta2, double eps,
    double weightDecay, int64_t warmupSteps, int64_t totalSteps,
    double warmupStartFactor, double minLrFactor, std::string &error) {
  OptimizerConfig c;
  if (kind == "sgd")
    c.kind = Kind::Sgd;
  else if (kind == "momentum")
    c.kind = Kind::Sgd, c.momentum = 0.9;
  else if (kind == "adam")
    c.kind = Kind::Adam;
  else if (kind == "adamw")
    c.kind = Kind::AdamW, c.weightDecay = 0.01;
  else {
    error = "unknown optimizer kind '" + kind.str() +
            "'; expected sgd, momentum, adam or adamw";
    return failure();
  }
  if (schedule == "constant")
    c.schedule = Schedule::Constant;
  else if (schedule == "warmup-cosine")
    c.schedule = Schedule::WarmupCosine;
  else {
    error = "unknown schedule '" + schedule.str() +
            "'; expected constant or warmup-cosine";
    return failure();
  }
  // Negative means "the kind's default" for these two.
  if (momentum >= 0)
    c.momentum = momentum;
  if (weightDecay >= 0)
    c.weightDecay = weightDecay;
  c.lr = lr;
  c.dampening = dampening;
  c.nesterov = nesterov;
  c.beta1 = beta1;
  c.beta2 = beta2;
  c.eps = eps;
  c.warmupSteps = warmupSteps;
  c.totalSteps = totalSteps;
  c.warmupStartFactor = warmupStartFactor;
  c.minLrFactor = minLrFactor;
  if (failed(c.validate(error)))
    return failure();
  return c;
}

LogicalResult OptimizerConfig::validate(std::string &error) const {
  auto fail = [&](const Twine &msg) {
    error = msg.str();
    return failure();
  };
  if (!(lr > 0))
    return fail("lr must be positive, got " + std::to_string(lr));
  if (momentum < 0 || momentum >= 1)
    return fail("momentum must be in [0, 1), got " + std::to_string(momentum));
  if (nesterov && (momentum <= 0 || dampening != 0))
    return fail("nesterov needs momentum > 0 and dampening = 0");
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    return fail("beta1 and beta2 must be in [0, 1)");
  if (!(eps >= 0) || weightDecay < 0)
    return fail("eps and weight-decay must be non-negative");
  if (schedule == Schedule::WarmupCosine) {
    if (totalSteps <= 0 || warmupSteps < 0 || warmupSteps >= totalSteps)
      return fail("schedule warmup-cosine needs 0 <= warmup-steps < "
                  "total-steps, got warmup-steps=" +
                  Twine(warmupSteps) + " total-steps=" + Twine(totalSteps));
    if (!(warmupStartFactor > 0 && warmupStartFactor <= 1))
      return fail("warmup-start-factor must be in (0, 1]");
    if (!(minLrFactor >= 0 && minLrFactor <= 1))
      return fail("min-lr-factor must be in [0, 1]");
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
    StringRef k = kind.getValue();
    if (k == "sgd")
      c.kind = Kind::Sgd, c.momentum = 0.0, c.weightDecay = 0.0;
    else if (k == "momentum")
      c.kind = Kind::Sgd, c.momentum = 0.9, c.weightDecay = 0.0;
    else if (k == "adam")
      c.kind = Kind::Adam, c.weightDecay = 0.0;
    else if (k == "adamw")
      c.kind = Kind::AdamW, c.weightDecay = 0.01;
    else {
      error = "unknown optimizer kind '" + k.str() +
              "'; expected sgd, momentum, adam or adamw";
      return failure();
    }
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
  if (failed(c.validate(error)))
    return failure();
  return c;
}

namespace {

/// Builds scalar (f64 / i64) arithmetic and rank-0 tensors at one place.
class ScalarBuilder {
public:
  ScalarBuilder(OpBuilder &b, Location loc) : b(b), loc(loc) {}
  Value f(double v) {
    return arith::ConstantOp::create(b, loc, b.getF64FloatAttr(v));
  }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value pow(Value x, Value y) { return math::PowFOp::create(b, loc, x, y); }
  Value sqrt(Value x) { return math::SqrtOp::create(b, loc, x); }
  Value cos(Value x) { return math::CosOp::create(b, loc, x); }
  Value min(Value x, Value y) {
    return arith::MinimumFOp::create(b, loc, x, y);
  }
  /// A rank-0 tensor holding `x` converted to `elementType`.
  Value tensor(Value x, Type elementType) {
    if (x.getType() != elementType)
      x = arith::TruncFOp::create(b, loc, elementType, x);
    return tensor::FromElementsOp::create(
        b, loc, RankedTensorType::get({}, elementType), ValueRange{x});
  }

  OpBuilder &b;
  Location loc;
};

/// Learning-rate factor at step `t` (the number of updates already done),
/// equal to torch's SequentialLR(LinearLR(start, 1, W), CosineAnnealingLR(
/// T - W, min * lr), milestones=[W]) evaluated in closed form.
Value scheduleFactor(ScalarBuilder &s, const OptimizerConfig &c, Value t) {
  if (c.schedule == OptimizerConfig::Schedule::Constant)
    return s.f(1.0);
  OpBuilder &b = s.b;
  Location loc = s.loc;
  double w = static_cast<double>(c.warmupSteps);
  double span = static_cast<double>(c.totalSteps - c.warmupSteps);
  // Warm-up: start + (1 - start) t / W.
  Value warm =
      s.add(s.f(c.warmupStartFactor),
            s.mul(s.f((1.0 - c.warmupStartFactor) / std::max(w, 1.0)), t));
  // Cosine: min + (1 - min)(1 + cos(pi min(t - W, T - W) / (T - W))) / 2.
  Value progress = s.min(s.sub(t, s.f(w)), s.f(span));
  Value cosine = s.cos(s.mul(s.f(llvm::numbers::pi / span), progress));
  Value decay =
      s.add(s.f(c.minLrFactor),
            s.mul(s.f((1.0 - c.minLrFactor) / 2.0), s.add(s.f(1.0), cosine)));
  Value inWarmup =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, t, s.f(w));
  return arith::SelectOp::create(b, loc, inWarmup, warm, decay);
}

} // namespace

LogicalResult mlir::ds::insertOptimizer(FunctionOpInterface func,
                                        const OptimizerConfig &config) {
  // Callable outside a pass manager: make sure what it builds is loaded.
  MLIRContext *context = func->getContext();
  context->loadDialect<arith::ArithDialect, math::MathDialect,
                       tensor::TensorDialect, DSDialect>();
  FailureOr<TrainingContract> contract = TrainingContract::fromFunction(func);
  if (failed(contract))
    return failure();
  if (contract->hasParamUpdates())
    return func->emitOpError("ds-insert-optimizer: the step already updates "
                             "its parameters");
  if (!contract->hasGrads())
    return func->emitOpError("ds-insert-optimizer: the step returns no "
                             "gradients; run ds-autodiff first");
  Block &body = func.getFunctionBody().front();
  Operation *terminator = body.getTerminator();
  MLIRContext *ctx = func->getContext();
  OpBuilder b(terminator);
  Location loc = func.getLoc();
  ScalarBuilder s(b, loc);

  // New state arguments go at the end; remember their update values.
  struct NewState {
    std::string kind, of;
    Value update;
    RankedTensorType type;
  };
  SmallVector<NewState> newStates;
  auto addState = [&](StringRef kind, StringRef of, RankedTensorType type,
                      InitKind init) -> FailureOr<Value> {
    unsigned index = func.getNumArguments();
    NamedAttrList attrs;
    attrs.set(DSDialect::kStateAttrName, StateAttr::get(ctx, kind, of));
    attrs.set(DSDialect::kInitAttrName,
              InitAttr::get(ctx, init, llvm::APFloat(0.0)));
    if (failed(func.insertArgument(index, type, attrs.getDictionary(ctx), loc)))
      return failure();
    return body.getArgument(index);
  };

  // The shared step counter: reuse one if the step has it.
  auto i64 = RankedTensorType::get({}, b.getI64Type());
  Value step;
  std::optional<unsigned> stepIndex = contract->findArg(ArgRole::State, "step");
  if (stepIndex) {
    step = body.getArgument(*stepIndex);
    if (step.getType() != i64)
      return func->emitOpError("ds-insert-optimizer: the 'step' state must be "
                               "a tensor<i64>, got ")
             << step.getType();
    if (contract->findUpdateOf(*stepIndex))
      return func->emitOpError("ds-insert-optimizer: the 'step' state is "
                               "already updated");
  } else {
    FailureOr<Value> created = addState("step", "", i64, InitKind::zeros);
    if (failed(created))
      return failure();
    step = *created;
  }

  // Scalars shared by every parameter.
  Value stepInt = tensor::ExtractOp::create(b, loc, step, ValueRange{});
  Value t = arith::SIToFPOp::create(b, loc, b.getF64Type(), stepInt);
  Value factor = scheduleFactor(s, config, t);
  Value t1 = s.add(t, s.f(1.0));
  Value isFirst = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::eq, stepInt,
      arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0)));
  // The `lr` metric: the learning rate of the first trained parameter.
  Value lrMetricF64;

  // A step with a `found_inf` metric (ds-insert-loss-scaling) is skipped
  // when it is set: every update selects the old value, on the device.
  Value skip;
  for (auto [i, res] : llvm::enumerate(contract->results))
    if (res.role == ResultRole::Metric && res.name == "found_inf") {
      Value found = terminator->getOperand(i);
      auto ft = cast<RankedTensorType>(found.getType());
      Value half = arith::ConstantOp::create(
          b, loc, ft,
          DenseElementsAttr::get(
              ft, FloatAttr::get(cast<FloatType>(ft.getElementType()), 0.5)));
      skip = CompareOp::create(b, loc, ComparePredicate::gt, found, half);
    }
  auto guard = [&](Value old, Value updated) -> Value {
    return skip ? SelectOp::create(b, updated.getLoc(), skip, old, updated)
                : updated;
  };

  // Per parameter, with its `ds.optim` overrides (a front end's
  // param_groups) on top of the pass options.
  SmallVector<std::pair<unsigned, Value>> paramUpdates; // arg index, value
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
      return func->emitOpError("ds-insert-optimizer: '")
             << DSDialect::kOptimAttrName << "' of parameter '"
             << name << "': " << error;
    const OptimizerConfig &pc = *paramConfig;
    Value lrT = s.mul(s.f(pc.lr), factor);
    if (!lrMetricF64)
      lrMetricF64 = lrT;
    Value bc1, bc2Sqrt;
    if (pc.kind != OptimizerConfig::Kind::Sgd) {
      bc1 = s.sub(s.f(1.0), s.pow(s.f(pc.beta1), t1));
      bc2Sqrt = s.sqrt(s.sub(s.f(1.0), s.pow(s.f(pc.beta2), t1)));
    }
    Value p = body.getArgument(argIndex);
    Value p0 = p;
    Value g = terminator->getOperand(*gradIndex);
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
    auto constT = [&](double v) { return s.tensor(s.f(v), et); };

    Value newP;
    if (pc.kind == OptimizerConfig::Kind::Sgd) {
      if (pc.weightDecay != 0)
        g = add(g, mul(p, constT(pc.weightDecay)));
      if (pc.momentum != 0) {
        FailureOr<Value> buf =
            addState("momentum_buffer", name, type, InitKind::zeros);
        if (failed(buf))
          return failure();
        Value next = add(mul(*buf, constT(pc.momentum)),
                         mul(g, constT(1.0 - pc.dampening)));
        Value cond = tensor::FromElementsOp::create(
            b, loc, RankedTensorType::get({}, b.getI1Type()),
            ValueRange{isFirst});
        Value newBuf = SelectOp::create(b, ploc, cond, g, next);
        newStates.push_back(
            {"momentum_buffer", name, guard(*buf, newBuf), type});
        g = pc.nesterov ? add(g, mul(newBuf, constT(pc.momentum))) : newBuf;
      }
      newP = sub(p, mul(g, scalarT(lrT)));
    } else {
      FailureOr<Value> m = addState("adam.m", name, type, InitKind::zeros);
      if (failed(m))
        return failure();
      FailureOr<Value> v = addState("adam.v", name, type, InitKind::zeros);
      if (failed(v))
        return failure();
      if (pc.kind == OptimizerConfig::Kind::Adam && pc.weightDecay != 0)
        g = add(g, mul(p, constT(pc.weightDecay)));
      if (pc.kind == OptimizerConfig::Kind::AdamW && pc.weightDecay != 0)
        p = mul(p, scalarT(s.sub(s.f(1.0), s.mul(lrT, s.f(pc.weightDecay)))));
      Value m1 = add(*m, mul(sub(g, *m), constT(1.0 - pc.beta1)));
      Value v1 = add(mul(*v, constT(pc.beta2)),
                     mul(mul(g, g), constT(1.0 - pc.beta2)));
      Value denom = add(div(SqrtOp::create(b, ploc, v1), scalarT(bc2Sqrt)),
                        constT(pc.eps));
      Value stepSize = scalarT(s.sub(s.f(0.0), s.div(lrT, bc1)));
      newP = add(p, mul(stepSize, div(m1, denom)));
      newStates.push_back({"adam.m", name, guard(*m, m1), type});
      newStates.push_back({"adam.v", name, guard(*v, v1), type});
    }
    paramUpdates.push_back({argIndex, guard(p0, newP)});
  }

  Value newStep = guard(
      step,
      AddOp::create(b, loc, step,
                    arith::ConstantOp::create(
                        b, loc, i64,
                        DenseElementsAttr::get(i64, b.getI64IntegerAttr(1)))));
  Value lrMetric =
      s.tensor(lrMetricF64 ? lrMetricF64 : s.mul(s.f(config.lr), factor),
               b.getF64Type());

  // Rebuild the results: drop the gradients, append the updates.
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  for (auto [i, res] : llvm::enumerate(contract->results)) {
    if (res.role == ResultRole::Grad)
      continue;
    results.push_back(terminator->getOperand(i));
    resultAttrs.push_back(func.getResultAttrDict(i));
  }
  auto updateAttr = [&](unsigned argIndex) {
    return b.getDictionaryAttr(b.getNamedAttr(DSDialect::kUpdateAttrName,
                                              b.getI64IntegerAttr(argIndex)));
  };
  for (auto [argIndex, value] : paramUpdates) {
    results.push_back(value);
    resultAttrs.push_back(updateAttr(argIndex));
  }
  // State arguments were appended in creation order after the originals.
  unsigned firstNew =
      func.getNumArguments() - newStates.size() - (stepIndex ? 0 : 1);
  unsigned stepArg = stepIndex ? *stepIndex : firstNew;
  unsigned next = stepIndex ? firstNew : firstNew + 1;
  for (NewState &st : newStates) {
    results.push_back(st.update);
    resultAttrs.push_back(updateAttr(next++));
  }
  results.push_back(newStep);
  resultAttrs.push_back(updateAttr(stepArg));
  results.push_back(lrMetric);
  resultAttrs.push_back(b.getDictionaryAttr(
      b.getNamedAttr(DSDialect::kMetricAttrName, b.getStringAttr("lr"))));

  terminator->setOperands(results);
  SmallVector<Type> resultTypes;
  for (Value r : results)
    resultTypes.push_back(r.getType());
  func.setType(FunctionType::get(ctx, func.getArgumentTypes(), resultTypes));
  func.setAllResultAttrs(resultAttrs);
  return success();
}

namespace {
struct InsertOptimizerPass
    : public mlir::ds::impl::InsertOptimizerPassBase<InsertOptimizerPass> {
  using Base::Base;
  void runOnOperation() override {
    std::string error;
    FailureOr<OptimizerConfig> config =
        OptimizerConfig::get(kind, schedule, lr, momentum, dampening, nesterov,
                             beta1, beta2, eps, weightDecay, warmupSteps,
                             totalSteps, warmupStartFactor, minLrFactor, error);
    ModuleOp module = getOperation();
    if (failed(config)) {
      module.emitError("ds-insert-optimizer: ") << error;
      return signalPassFailure();
    }
    if (failed(mlir::ds::detail::forEachTrainStep(
            module, "ds-insert-optimizer", [&](FunctionOpInterface func) {
              return insertOptimizer(func, *config);
            })))
      signalPassFailure();
  }
};
} // namespace
