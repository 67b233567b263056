//===- InsertLossScaling.cpp - Dynamic loss scaling -----------------------===//
//
// Implements ds-insert-loss-scaling: torch.amp.GradScaler compiled into the
// training step, plus Megatron's hysteresis / min-scale, the seeds'
// activation-based cap and the gradient anomaly detector. Everything the
// scaler remembers is explicit state; the skip decision is a value
// (`found_inf`) that ds-insert-optimizer turns into selects, so nothing goes
// back to the host.
//
// The pass is analyse-then-mutate over one function:
//  1. Find the `ds.seed` constant, the gradients and the loss op's
//     activations (the cap statistic and the fault-injection point).
//  2. Right after the seed: the scale used this step (state, capped) and
//     `seed * scale`, which every backward op now reads.
//  3. At the end: the non-finite probe, unscaling, the scale update
//     (`_amp_update_scale_`, in f64 as torch's CPU kernel, stored as f32),
//     the anomaly detector, and the new state and metric results.
//
//===----------------------------------------------------------------------===//

#include "StepUtils.h"

#include "ds/Analysis/StepQueries.h"

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/IR/TrainingContract.h"
#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

#include <cmath>
#include <limits>

namespace mlir::ds {
#define GEN_PASS_DEF_INSERTLOSSSCALINGPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

LogicalResult
mlir::ds::validateLossScalingOptions(const InsertLossScalingPassOptions &o,
                                     std::string &error) {
  auto fail = [&](StringRef option, const Twine &reason) {
    error = optionError("ds-insert-loss-scaling", option, reason);
    return failure();
  };
  auto got = [](double v) { return ", got " + std::to_string(v); };
  constexpr int64_t kMaxI32 = std::numeric_limits<int32_t>::max();
  if (!(o.initScale > 0) || !std::isfinite(o.initScale) ||
      !std::isfinite(static_cast<float>(o.initScale)))
    return fail("init-scale",
                "must be positive and finite in f32" + got(o.initScale));
  if (!(o.growthFactor > 1) || !std::isfinite(o.growthFactor))
    return fail("growth-factor",
                "must be > 1 and finite" + got(o.growthFactor));
  if (!(o.backoffFactor > 0 && o.backoffFactor < 1))
    return fail("backoff-factor", "must be in (0, 1)" + got(o.backoffFactor));
  if (o.growthInterval < 1 || o.growthInterval > kMaxI32)
    return fail("growth-interval",
                "must be in [1, 2^31), got " + Twine(o.growthInterval));
  if (o.hysteresis < 1 || o.hysteresis > kMaxI32)
    return fail("hysteresis",
                "must be in [1, 2^31), got " + Twine(o.hysteresis));
  if (!(o.minScale >= 0) || o.minScale > o.initScale)
    return fail("min-scale", "must be in [0, init-scale]" + got(o.minScale));
  if (!(o.capGamma >= 0) || !std::isfinite(o.capGamma))
    return fail("activation-cap-gamma",
                "must be >= 0 and finite" + got(o.capGamma));
  if (!(o.capMax >= 0) || !std::isfinite(o.capMax))
    return fail("activation-cap-max",
                "must be >= 0 and finite" + got(o.capMax));
  if (!(o.anomalyEpsilon >= 0) || !std::isfinite(o.anomalyEpsilon))
    return fail("anomaly-epsilon",
                "must be >= 0 and finite" + got(o.anomalyEpsilon));
  if (o.anomalyCount < 1 || o.anomalyCount > kMaxI32)
    return fail("anomaly-count",
                "must be in [1, 2^31), got " + Twine(o.anomalyCount));
  return success();
}

namespace {

/// The activations of the loss op: starting at the op defining the loss,
/// follow rank-0 float operands back until an op has non-scalar float
/// operands (the loss reduction); those that are not block arguments, or
/// all of them when every one is. Empty when there is none.
SmallVector<Value> findLossActivations(Value loss) {
  Operation *op = loss.getDefiningOp();
  llvm::SmallPtrSet<Operation *, 8> seen;
  while (op && seen.insert(op).second) {
    SmallVector<Value> wide, computed;
    Operation *next = nullptr;
    for (Value v : op->getOperands()) {
      if (!isFloatTensor(v))
        continue;
      if (cast<RankedTensorType>(v.getType()).getRank() > 0) {
        wide.push_back(v);
        if (!isa<BlockArgument>(v))
          computed.push_back(v);
      } else if (!next && v.getDefiningOp() &&
                 !v.getDefiningOp()
                      ->hasTrait<::mlir::OpTrait::ConstantLike>()) {
        next = v.getDefiningOp();
      }
    }
    if (!wide.empty())
      return computed.empty() ? wide : computed;
    op = next;
  }
  return {};
}

} // namespace

LogicalResult
mlir::ds::insertLossScaling(FunctionOpInterface func,
                            const InsertLossScalingPassOptions &config) {
  MLIRContext *ctx = func->getContext();
  FailureOr<TrainingContract> contract =
      detail::requireGradientStep(func, "ds-insert-loss-scaling");
  if (failed(contract))
    return failure();
  if (hasStateWithPrefix(*contract, "loss_scale"))
    return func->emitOpError("the step already has "
                             "loss scaling (a 'loss_scale' state)");
  if (hasStateWithPrefix(*contract, "clip.") ||
      findMetric(func, *contract, "clip_norm"))
    return func->emitOpError("the gradients are "
                             "already clipped; ds-insert-loss-scaling must "
                             "run before ds-clip-gradients");
  for (StringRef m : {"found_inf", "loss_scale", "grad_norm", "anomaly"})
    if (findMetric(func, *contract, m))
      return func->emitOpError("the step already "
                               "has a '")
             << m << "' metric";
  if (config.injectNonfinite &&
      contract->findArg(ArgRole::Input, "inject_nonfinite"))
    return func->emitOpError("the step already has "
                             "an 'inject_nonfinite' input");

  StepEditor ed(func);
  Block &body = ed.body;
  Operation *seed = nullptr;
  for (Operation &op : body)
    if (isa<arith::ConstantOp>(op) && op.hasAttr(DSDialect::kSeedAttrName)) {
      if (seed)
        return op.emitOpError("a second '")
               << DSDialect::kSeedAttrName
               << "' constant; expected exactly one";
      seed = &op;
    }
  if (!seed)
    return func->emitOpError("no backward seed "
                             "('arith.constant' marked '")
           << DSDialect::kSeedAttrName
           << "'); the gradients must come from ds-autodiff";
  Value loss = ed.terminator->getOperand(contract->getLossIndex());
  bool needActivations = config.capGamma > 0 || config.injectNonfinite;
  SmallVector<Value> activations;
  if (needActivations) {
    activations = findLossActivations(loss);
    if (activations.empty())
      return func->emitOpError("cannot find the "
                               "loss op's activations (needed by "
                               "activation-cap-gamma and inject-nonfinite)");
  }

  Location loc = func.getLoc();
  auto f32T = RankedTensorType::get({}, Float32Type::get(ctx));
  auto f64T = RankedTensorType::get({}, Float64Type::get(ctx));
  auto i32T = RankedTensorType::get({}, IntegerType::get(ctx, 32));
  Type f32 = Float32Type::get(ctx), f64 = Float64Type::get(ctx);

  // State.
  Value scaleState =
      ed.addState("loss_scale", "", f32T, InitKind::constant, config.initScale);
  Value trackerState =
      ed.addState("loss_scale.growth_tracker", "", i32T, InitKind::zeros);
  Value hystState;
  if (config.hysteresis > 1)
    hystState =
        ed.addState("loss_scale.hysteresis", "", i32T, InitKind::constant,
                    static_cast<double>(config.hysteresis));
  Value actState;
  if (config.capGamma > 0)
    actState =
        ed.addState("loss_scale.activation_max", "", f32T, InitKind::zeros);
  Value prevNormState, runState;
  if (config.anomaly) {
    prevNormState =
        ed.addState("anomaly.prev_norm", "", f64T, InitKind::constant, -1.0);
    runState = ed.addState("anomaly.run_length", "", i32T, InitKind::zeros);
  }
  Value injectFlag, injectOn;
  if (config.injectNonfinite)
    injectFlag = ed.addInput("inject_nonfinite", f32T);

  // Fault injection: the loss op's first activation becomes NaN in every
  // use, forward and backward, when the flag is set.
  if (injectFlag) {
    Value act = activations.front();
    OpBuilder b(ctx);
    b.setInsertionPointAfterValue(act);
    auto type = cast<RankedTensorType>(act.getType());
    Type et = type.getElementType();
    Value nan = arith::ConstantOp::create(
        b, loc, RankedTensorType::get({}, et),
        DenseElementsAttr::get(
            RankedTensorType::get({}, et),
            FloatAttr::get(et, std::numeric_limits<double>::quiet_NaN())));
    Value half = arith::ConstantOp::create(b, loc, f32T,
                                           DenseElementsAttr::get(f32T, 0.5f));
    injectOn =
        CompareOp::create(b, loc, ComparePredicate::gt, injectFlag, half);
    Value poisoned = SelectOp::create(b, loc, injectOn, nan, act);
    act.replaceAllUsesExcept(poisoned, poisoned.getDefiningOp());
    activations.front() = poisoned;
  }

  // 2. The scale used this step, and the scaled seed.
  OpBuilder b(seed->getBlock(), std::next(Block::iterator(seed)));
  ScalarBuilder s(b, loc);
  Value scale = s.extract(scaleState);
  double inf = std::numeric_limits<double>::infinity();
  if (config.capGamma > 0 || config.capMax > 0) {
    Value cap = s.f64(config.capMax > 0 ? config.capMax : inf);
    if (actState) {
      Value a = s.extract(actState);
      Value gammaCap = s.minf(cap, s.mul(s.f64(config.capGamma), a));
      cap = s.select(s.cmpf(arith::CmpFPredicate::OGT, a, s.f64(0.0)), gammaCap,
                     cap);
    }
    scale = s.minf(scale, cap);
  }
  // The f32 value of the scale, as the GradScaler's f32 tensor holds it.
  scale = s.convert(s.convert(scale, f32), f64);
  Value seedValue = seed->getResult(0);
  Value scaleTensorF32 = s.tensor(scale, f32);
  Value scaledSeed = scaleTensor(b, loc, seedValue, scaleTensorF32);
  // An injected fault also poisons the loss's cotangent, so that every
  // gradient is non-finite whichever values the loss op's VJP reads (the
  // VJP of a plain sum reads none).
  if (injectOn) {
    auto st = cast<RankedTensorType>(seedValue.getType());
    Value nan = arith::ConstantOp::create(
        b, loc, st,
        DenseElementsAttr::get(
            st, FloatAttr::get(st.getElementType(),
                               std::numeric_limits<double>::quiet_NaN())));
    scaledSeed = SelectOp::create(b, loc, injectOn, nan, scaledSeed);
  }
  seedValue.replaceUsesWithIf(scaledSeed, [&](OpOperand &use) {
    Operation *user = use.getOwner();
    return user->getBlock() == seed->getBlock() &&
           seed->isBeforeInBlock(user) &&
           scaledSeed.getDefiningOp()->isBeforeInBlock(user);
  });

  // 3. At the end of the body.
  b.setInsertionPoint(ed.terminator);
  SmallVector<unsigned> gradResults;
  for (auto [i, r] : llvm::enumerate(contract->results))
    if (r.role == ResultRole::Grad)
      gradResults.push_back(i);

  // found_inf over the scaled gradients.
  Value probe = s.f64(0.0);
  for (unsigned i : gradResults)
    probe = s.add(probe, nonFiniteProbe(b, loc, ed.terminator->getOperand(i)));
  // Every later use reads the flag back from the metric tensor, so that
  // ds-data-parallel, which MAX-reduces that tensor across the ranks, makes
  // the loss scale and the skip decisions agree on every rank.
  Value zeroF = s.f64(0.0), oneF = s.f64(1.0);
  Value foundMetric = s.tensor(
      s.select(s.cmpf(arith::CmpFPredicate::UNO, probe, probe), oneF, zeroF),
      f32);
  Value found =
      s.cmpf(arith::CmpFPredicate::OGT, s.extract(foundMetric), s.f64(0.5));

  // Unscale by the f32 reciprocal computed in f64.
  Value inv = s.tensor(s.div(s.f64(1.0), scale), f32);
  SmallVector<Value> unscaled;
  for (unsigned i : gradResults) {
    Value g = scaleTensor(b, loc, ed.terminator->getOperand(i), inv);
    ed.terminator->setOperand(i, g);
    unscaled.push_back(g);
  }

  // A mask-update iteration of ds-sparsify-matmul takes no optimizer step
  // and carries the dense weight gradients of RigL's scores: as when
  // GradScaler.update() is not called, the scaler's state holds.
  Value hold;
  if (Value m = findMetric(func, *contract, "sparsity.mask_update"))
    hold = s.cmpf(arith::CmpFPredicate::OGT, s.extract(m), s.f64(0.5));
  auto held = [&](Value old, Value updated) {
    return hold ? s.select(hold, old, updated) : updated;
  };

  // _amp_update_scale_ (+ Megatron's hysteresis and min-scale).
  Value tracker = s.extractRaw(trackerState);
  Value backedOff = s.mul(scale, s.f64(config.backoffFactor));
  if (config.minScale > 0)
    backedOff = s.maxf(backedOff, s.f64(config.minScale));
  Value scaleOnInf = backedOff, hystOnInf, hyst;
  if (hystState) {
    hyst = s.extractRaw(hystState);
    hystOnInf = arith::SubIOp::create(b, loc, hyst, s.i32(1));
    Value backOff = s.cmpi(arith::CmpIPredicate::sle, hystOnInf, s.i32(0));
    scaleOnInf = s.select(backOff, backedOff, scale);
  }
  Value successful = s.add(tracker, s.i32(1));
  Value grow = s.cmpi(arith::CmpIPredicate::sge, successful,
                      s.i32(static_cast<int32_t>(config.growthInterval)));
  Value grown = s.convert(s.mul(scale, s.f64(config.growthFactor)), f32);
  Value grownOk = s.isFinite(s.convert(grown, f64));
  Value scaleOnClean =
      s.select(s.andi(grow, grownOk), s.convert(grown, f64), scale);
  Value trackerOnClean = s.select(grow, s.i32(0), successful);
  Value newScale = held(scale, s.select(found, scaleOnInf, scaleOnClean));
  Value newTracker = held(tracker, s.select(found, s.i32(0), trackerOnClean));
  ed.addUpdate(scaleState, s.tensor(newScale, f32));
  ed.addUpdate(trackerState, tensor::FromElementsOp::create(
                                 b, loc, i32T, ValueRange{newTracker}));
  if (hystState) {
    Value hystOnClean =
        s.select(grow, s.i32(static_cast<int32_t>(config.hysteresis)), hyst);
    Value newHyst = held(hyst, s.select(found, hystOnInf, hystOnClean));
    ed.addUpdate(hystState, tensor::FromElementsOp::create(
                                b, loc, i32T, ValueRange{newHyst}));
  }

  // The activation statistic of this step, kept only from clean steps.
  if (actState) {
    Value amax;
    for (Value a : activations) {
      Value m =
          s.extract(reduceAll(b, loc, AbsOp::create(b, loc, a), /*max=*/true));
      amax = amax ? s.maxf(amax, m) : m;
    }
    Value keepOld = s.ori(found, s.noti(s.isFinite(amax)));
    if (hold)
      keepOld = s.ori(keepOld, hold);
    Value newAct = s.select(keepOld, s.extract(actState), amax);
    ed.addUpdate(actState, s.tensor(newAct, f32));
  }

  ed.addMetric("found_inf", foundMetric);
  ed.addMetric("loss_scale", scaleTensorF32);

  // The anomaly detector on the global L2 norm of the unscaled gradients.
  if (config.anomaly) {
    Value sumSq = s.f64(0.0);
    for (Value g : unscaled)
      sumSq = s.add(sumSq,
                    s.extract(reduceAll(b, loc, MulOp::create(b, loc, g, g))));
    Value norm = s.sqrt(sumSq);
    Value prev = s.extract(prevNormState);
    Value run = s.extractRaw(runState);
    Value grew =
        s.andi(s.cmpf(arith::CmpFPredicate::OGE, prev, zeroF),
               s.cmpf(arith::CmpFPredicate::OGT, norm,
                      s.mul(s.f64(1.0 + config.anomalyEpsilon), prev)));
    Value runNew = s.select(grew, s.add(run, s.i32(1)), s.i32(0));
    Value quiet = hold ? s.ori(found, hold) : found;
    Value isAnomaly =
        s.andi(s.noti(quiet),
               s.cmpi(arith::CmpIPredicate::sge, runNew,
                      s.i32(static_cast<int32_t>(config.anomalyCount))));
    ed.addUpdate(prevNormState, s.tensor(s.select(quiet, prev, norm), f64));
    ed.addUpdate(runState,
                 tensor::FromElementsOp::create(
                     b, loc, i32T, ValueRange{s.select(quiet, run, runNew)}));
    ed.addMetric("grad_norm", s.tensor(norm, f64));
    ed.addMetric("anomaly", s.tensor(s.select(isAnomaly, oneF, zeroF), f32));
  }
  ed.finish();
  return success();
}

namespace {
struct InsertLossScalingPass
    : public mlir::ds::impl::InsertLossScalingPassBase<InsertLossScalingPass> {
  using Base::Base;
  void runOnOperation() override {
    ScopedPassNamePrefix named(&getContext(), getArgument());
    if (failed(checkOptionsGivenOnce(
            getOperation(), getArgument(),
            {&initScale, &growthFactor, &backoffFactor, &growthInterval,
             &hysteresis, &minScale, &capGamma, &capMax, &anomaly,
             &anomalyEpsilon, &anomalyCount, &injectNonfinite})))
      return signalPassFailure();
    InsertLossScalingPassOptions options;
    options.initScale = initScale;
    options.growthFactor = growthFactor;
    options.backoffFactor = backoffFactor;
    options.growthInterval = growthInterval;
    options.hysteresis = hysteresis;
    options.minScale = minScale;
    options.capGamma = capGamma;
    options.capMax = capMax;
    options.anomaly = anomaly;
    options.anomalyEpsilon = anomalyEpsilon;
    options.anomalyCount = anomalyCount;
    options.injectNonfinite = injectNonfinite;
    ModuleOp module = getOperation();
    std::string error;
    if (failed(validateLossScalingOptions(options, error))) {
      module.emitError(error);
      return signalPassFailure();
    }
    if (failed(mlir::ds::detail::forEachTrainStep(
            module, "ds-insert-loss-scaling", [&](FunctionOpInterface func) {
              return insertLossScaling(func, options);
            })))
      signalPassFailure();
  }
};
} // namespace
