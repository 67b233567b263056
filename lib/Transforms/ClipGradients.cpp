//===- ClipGradients.cpp - Global and adaptive gradient clipping ----------===//
//
// Implements ds-clip-gradients on a gradient step (after ds-autodiff and
// ds-insert-loss-scaling, before ds-insert-optimizer):
//
//  - global: torch.nn.utils.clip_grad_norm_ (total L2 or infinity norm,
//    coefficient max_norm / (norm + 1e-6) clamped to 1);
//  - adaptive: the seeds' per-component clipping, g * min(1, t / ||g||)
//    with the L2 norm for attention and the infinity norm for FFN
//    parameters, and a threshold that follows the mean of the last `history`
//    global norms, t = 0.9 t + 0.1 mean (t = the first norm at first).
//
// The history is explicit state: a ring buffer of f64 norms plus a count
// (the ring index is count mod history, written by a select against an
// iota; the number of valid entries
// min(count, history)), so a checkpoint holds it exactly. Norms and the
// threshold are computed in f64 scalars; the coefficients are rounded to the
// gradient's element type, as torch multiplies by clip_coef.to(g.dtype).
//
//===----------------------------------------------------------------------===//

#include "StepUtils.h"

#include "ds/Analysis/RoleAnalysis.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/IR/TrainingContract.h"
#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

#include "llvm/ADT/StringExtras.h"

#include <cmath>

namespace mlir::ds {
#define GEN_PASS_DEF_CLIPGRADIENTSPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

LogicalResult
mlir::ds::validateClipOptions(const ClipGradientsPassOptions &options,
                              std::string &error) {
  auto fail = [&](StringRef option, const Twine &reason) {
    error = optionError("ds-clip-gradients", option, reason);
    return failure();
  };
  if (options.mode == ClipMode::Adaptive &&
      options.normType != ClipNormType::L2)
    return fail("norm-type", "applies to mode=global; the adaptive mode picks "
                             "the norm per parameter");
  if (!(options.maxNorm > 0) || !std::isfinite(options.maxNorm))
    return fail("max-norm", "must be positive and finite, got " +
                                std::to_string(options.maxNorm));
  if (options.history < 1 || options.history > (int64_t(1) << 24))
    return fail("history",
                "must be in [1, 2^24], got " + std::to_string(options.history));
  if (!(options.noiseStd >= 0) || !std::isfinite(options.noiseStd))
    return fail("noise-std", "must be finite and >= 0, got " +
                                 std::to_string(options.noiseStd));
  return success();
}

ClipNormKind mlir::ds::classifyClipNorm(StringRef name,
                                        ArrayRef<StringRef> annotations) {
  SmallVector<StringRef> texts{name};
  llvm::append_range(texts, annotations);
  // Attention first: `attn.out_proj` is attention even if it also looks
  // like something else.
  for (StringRef text : texts) {
    std::string lower = text.lower();
    for (StringRef kw :
         {"attn", "attention", "q_proj", "k_proj", "v_proj", "out_proj", "qkv"})
      if (StringRef(lower).contains(kw))
        return ClipNormKind::L2;
  }
  for (StringRef text : texts) {
    std::string lower = text.lower();
    SmallVector<StringRef> parts;
    StringRef(lower).split(parts, '.');
    for (StringRef part : parts)
      for (StringRef kw : {"mlp", "ffn", "fc", "up", "down", "gate"}) {
        if (part == kw || part.ends_with(("_" + kw).str()))
          return ClipNormKind::Inf;
        if (part.starts_with(kw) && part.size() > kw.size() &&
            (llvm::isDigit(part[kw.size()]) || part[kw.size()] == '_'))
          return ClipNormKind::Inf;
      }
  }
  return ClipNormKind::L2;
}

LogicalResult mlir::ds::clipGradients(FunctionOpInterface func,
                                      const ClipGradientsPassOptions &config) {
  FailureOr<TrainingContract> contract =
      detail::requireGradientStep(func, "ds-clip-gradients");
  if (failed(contract))
    return failure();
  if (hasStateWithPrefix(*contract, "clip.") ||
      findMetric(func, *contract, "clip_norm"))
    return func->emitOpError("the gradients are already "
                             "clipped");

  StepEditor ed(func);
  Location loc = func.getLoc();
  OpBuilder b(ed.terminator);
  ScalarBuilder s(b, loc);
  Type f64 = b.getF64Type();
  auto i64T = RankedTensorType::get({}, b.getI64Type());

  // A skipped step (ds-insert-loss-scaling) keeps the clipping state; so
  // does a mask update of ds-sparsify-matmul (no optimizer step, and its
  // weight gradients are the dense ones RigL scores).
  Value skip;
  for (StringRef metric : {"found_inf", "sparsity.mask_update"})
    if (Value m = findMetric(func, *contract, metric)) {
      Value set = s.cmpf(arith::CmpFPredicate::OGT, s.extract(m), s.f64(0.5));
      skip = skip ? s.ori(skip, set) : set;
    }

  struct Grad {
    unsigned result;
    Value value;
    ClipNormKind kind;
  };
  SmallVector<Grad> grads;
  Block &body = ed.body;
  // Each parameter's norm, first by what the structure says the parameter
  // is for: the roles of the forward ops consuming it, inferred here so that
  // this does not depend on ds-assign-precision having written `ds.role`.
  // Attention first (as in the keyword rules): L2; FFN: the infinity norm.
  // When the structure gives neither, the keywords of its name and of the
  // `ds.module` / `ds.role` of the ops using it decide (classifyClipNorm).
  RoleAnalysis roles(func);
  for (auto [i, r] : llvm::enumerate(contract->results)) {
    if (r.role != ResultRole::Grad)
      continue;
    BlockArgument param = body.getArgument(r.argIndex);
    SmallVector<StringRef> consumerRoles = roles.rolesOfConsumers(param);
    ClipNormKind kind;
    if (llvm::any_of(consumerRoles, role::isAttention)) {
      kind = ClipNormKind::L2;
    } else if (llvm::any_of(consumerRoles, role::isFeedForward)) {
      kind = ClipNormKind::Inf;
    } else {
      SmallVector<StringRef> annotations;
      for (Operation *user : param.getUsers())
        for (StringRef attr :
             {DSDialect::kModuleAttrName, DSDialect::kRoleAttrName})
          if (auto str = user->getAttrOfType<StringAttr>(attr))
            annotations.push_back(str.getValue());
      kind = classifyClipNorm(contract->args[r.argIndex].name, annotations);
    }
    grads.push_back(
        {static_cast<unsigned>(i), ed.terminator->getOperand(i), kind});
  }

  auto sumSquares = [&](Value g) {
    return s.extract(reduceAll(b, loc, MulOp::create(b, loc, g, g)));
  };
  auto maxAbs = [&](Value g) {
    return s.extract(reduceAll(b, loc, AbsOp::create(b, loc, g), /*max=*/true));
  };
  auto scaleBy = [&](Value g, Value coefF64) {
    Type et = cast<RankedTensorType>(g.getType()).getElementType();
    return Value(MulOp::create(b, loc, g, s.tensor(coefF64, et)));
  };

  // The global L2 norm (torch: the L2 norm of the per-tensor L2 norms).
  auto globalL2 = [&]() {
    Value sum = s.f64(0.0);
    for (Grad &g : grads) {
      Value n = s.sqrt(sumSquares(g.value));
      sum = s.add(sum, s.mul(n, n));
    }
    return s.sqrt(sum);
  };

  SmallVector<Value> clipped;
  if (config.mode == ClipMode::Global) {
    Value total;
    if (config.normType == ClipNormType::Inf) {
      for (Grad &g : grads) {
        Value m = maxAbs(g.value);
        total = total ? s.maxf(total, m) : m;
      }
    } else {
      total = globalL2();
    }
    Value coef = s.div(s.f64(config.maxNorm), s.add(total, s.f64(1e-6)));
    Value clamped = s.minf(coef, s.f64(1.0));
    for (Grad &g : grads)
      clipped.push_back(scaleBy(g.value, clamped));
    ed.addMetric("clip_coef", s.tensor(clamped, f64));
    ed.addMetric("clip_norm", s.tensor(total, f64));
  } else {
    int64_t h = config.history;
    auto histT = RankedTensorType::get({h}, f64);
    // The threshold is held as tensor<1xf64>: as a rank-0 tensor its update
    // would be the very value of the `clip_threshold` metric, and
    // buffer-results-to-out-params mishandles a buffer returned twice.
    auto thrT = RankedTensorType::get({1}, f64);
    Value thrState = ed.addState("clip.threshold", "", thrT, InitKind::zeros);
    Value thrOld = tensor::ExtractOp::create(
        b, loc, thrState,
        ValueRange{arith::ConstantIndexOp::create(b, loc, 0)});
    auto thrTensor = [&](Value x) -> Value {
      return tensor::FromElementsOp::create(b, loc, thrT, ValueRange{x});
    };
    Value countState = ed.addState("clip.count", "", i64T, InitKind::zeros);
    Value histState = ed.addState("clip.history", "", histT, InitKind::zeros);
    Value norm = globalL2();
    Value count = s.extractRaw(countState);
    Value hI64 = s.i64(h);
    // hist[count mod H] = norm, as a select against an iota (elementwise,
    // so it lowers and vectorises like every other ds op).
    Value slot = tensor::FromElementsOp::create(
        b, loc, i64T, ValueRange{arith::RemSIOp::create(b, loc, count, hI64)});
    auto iotaT = RankedTensorType::get({h}, b.getI64Type());
    Value iota = arith::ConstantOp::create(
        b, loc, iotaT,
        DenseElementsAttr::get(
            iotaT, ArrayRef(llvm::to_vector(llvm::seq<int64_t>(0, h)))));
    Value atSlot = CompareOp::create(b, loc, ComparePredicate::eq, iota, slot);
    Value hist =
        SelectOp::create(b, loc, atSlot, s.tensor(norm, f64), histState);
    Value count1 = s.add(count, s.i64(1));
    Value valid = arith::MinSIOp::create(b, loc, count1, hI64);
    Value mean = s.div(s.extract(reduceAll(b, loc, hist)),
                       arith::SIToFPOp::create(b, loc, f64, valid));
    Value first = s.cmpi(arith::CmpIPredicate::eq, count, s.i64(0));
    Value thr = s.select(
        first, norm, s.add(s.mul(s.f64(0.9), thrOld), s.mul(s.f64(0.1), mean)));
    for (Grad &g : grads) {
      Value n = g.kind == ClipNormKind::L2 ? s.sqrt(sumSquares(g.value))
                                           : maxAbs(g.value);
      Value coef = s.select(s.cmpf(arith::CmpFPredicate::OGT, n, thr),
                            s.div(thr, n), s.f64(1.0));
      clipped.push_back(scaleBy(g.value, coef));
    }
    if (skip) {
      Value skipT = tensor::FromElementsOp::create(
          b, loc, RankedTensorType::get({}, b.getI1Type()), ValueRange{skip});
      ed.addUpdate(thrState, thrTensor(s.select(skip, thrOld, thr)));
      ed.addUpdate(countState, tensor::FromElementsOp::create(
                                   b, loc, i64T,
                                   ValueRange{s.select(skip, count, count1)}));
      ed.addUpdate(histState, SelectOp::create(b, loc, skipT, histState, hist));
    } else {
      ed.addUpdate(thrState, thrTensor(thr));
      ed.addUpdate(countState, tensor::FromElementsOp::create(
                                   b, loc, i64T, ValueRange{count1}));
      ed.addUpdate(histState, hist);
    }
    ed.addMetric("clip_threshold", s.tensor(thr, f64));
    ed.addMetric("clip_norm", s.tensor(norm, f64));
  }

  // Gaussian noise from the explicit Philox key `clip.rng`.
  if (config.noiseStd > 0) {
    auto rngT = RankedTensorType::get({2}, b.getI64Type());
    Value rngState = ed.addState("clip.rng", "", rngT, InitKind::zeros);
    Value rng = rngState;
    for (Value &g : clipped) {
      auto type = cast<RankedTensorType>(g.getType());
      auto noise = RandomNormalOp::create(b, loc, type, rngT, rng,
                                          b.getF64FloatAttr(config.noiseStd));
      rng = noise.getNewRng();
      g = AddOp::create(b, loc, g, noise.getResult());
    }
    if (skip) {
      Value skipT = tensor::FromElementsOp::create(
          b, loc, RankedTensorType::get({}, b.getI1Type()), ValueRange{skip});
      rng = SelectOp::create(b, loc, skipT, rngState, rng);
    }
    ed.addUpdate(rngState, rng);
  }

  for (auto [g, c] : llvm::zip_equal(grads, clipped))
    ed.terminator->setOperand(g.result, c);
  ed.finish();
  return success();
}

namespace {
struct ClipGradientsPass
    : public mlir::ds::impl::ClipGradientsPassBase<ClipGradientsPass> {
  using Base::Base;
  void runOnOperation() override {
    ScopedPassNamePrefix named(&getContext(), getArgument());
    if (failed(checkOptionsGivenOnce(
            getOperation(), getArgument(),
            {&mode, &maxNorm, &normType, &history, &noiseStd})))
      return signalPassFailure();
    ClipGradientsPassOptions options;
    options.mode = mode;
    options.maxNorm = maxNorm;
    options.normType = normType;
    options.history = history;
    options.noiseStd = noiseStd;
    ModuleOp module = getOperation();
    std::string error;
    if (failed(validateClipOptions(options, error))) {
      module.emitError(error);
      return signalPassFailure();
    }
    if (failed(mlir::ds::detail::forEachTrainStep(
            module, "ds-clip-gradients", [&](FunctionOpInterface func) {
              return clipGradients(func, options);
            })))
      signalPassFailure();
  }
};
} // namespace
