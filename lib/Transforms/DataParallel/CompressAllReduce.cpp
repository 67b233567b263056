//===- CompressAllReduce.cpp - Compressed gradient all-reduce -------------===//
//
// Implements ds-compress-allreduce: sets the compression scheme of every
// gradient bucket and, for the schemes that drop or round what they send
// (three-tier, top-k), adds the bucket's error-feedback residual as state:
// `comm.residual.bucket<i>`, zeros of the bucket's type, one per rank
// (ds-run checkpoints every rank's). The encoding itself is the runtime's
// (ds_runtime.h, DSRT_COMPRESS_*); the pass decides what is sent and keeps
// the memory explicit, as every other piece of training state.
//
// The residual does not move on a step without an optimizer step
// (found_inf, a mask update): those gradients are never applied, so what
// they did not send must not be sent later either.
//
//===----------------------------------------------------------------------===//

#include "DataParallel.h"

#include "../StepUtils.h"

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/TrainingContract.h"
#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

#include <cmath>

namespace mlir::ds {
#define GEN_PASS_DEF_COMPRESSALLREDUCEPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

LogicalResult
mlir::ds::validateCompressOptions(const CompressAllReducePassOptions &o,
                                  std::string &error) {
  auto fail = [&](StringRef option, const Twine &reason) {
    error = optionError("ds-compress-allreduce", option, reason);
    return failure();
  };
  auto str = [](double v) { return std::to_string(v); };
  if (o.scheme == CompressionScheme::none)
    return fail("scheme", "expected three-tier, topk, fp16, bf16 or powersgd");
  if (o.rank < 1)
    return fail("rank", "must be >= 1, got " + std::to_string(o.rank));
  if (o.startIteration < 0)
    return fail("start-iteration",
                "must be >= 0, got " + std::to_string(o.startIteration));
  if (!(o.quantileLow >= 0 && o.quantileLow <= 1))
    return fail("quantile-low", "must be in [0, 1], got " + str(o.quantileLow));
  if (!(o.quantileHigh >= 0 && o.quantileHigh <= 1))
    return fail("quantile-high",
                "must be in [0, 1], got " + str(o.quantileHigh));
  if (o.quantileLow > o.quantileHigh)
    return fail("quantile-low", "must not exceed quantile-high (" +
                                    str(o.quantileHigh) + "), got " +
                                    str(o.quantileLow));
  if (!(o.thetaLow >= 0) || !std::isfinite(o.thetaLow))
    return fail("theta-low", "must be finite and >= 0, got " + str(o.thetaLow));
  if (!(o.thetaHigh >= 0) || !std::isfinite(o.thetaHigh))
    return fail("theta-high",
                "must be finite and >= 0, got " + str(o.thetaHigh));
  if (o.thetaLow > o.thetaHigh)
    return fail("theta-low", "must not exceed theta-high (" + str(o.thetaHigh) +
                                 "), got " + str(o.thetaLow));
  if (o.fixedThresholds && o.thetaHigh == 0)
    return fail("theta-high", "must be > 0 with fixed-thresholds");
  if (!(o.ratio > 0 && o.ratio <= 1))
    return fail("ratio", "must be in (0, 1], got " + str(o.ratio));
  if (o.warmupIterations < 0)
    return fail("warmup-iterations",
                "must be >= 0, got " + std::to_string(o.warmupIterations));
  bool feedback = o.scheme == CompressionScheme::three_tier ||
                  o.scheme == CompressionScheme::topk;
  if (!(o.momentum >= 0 && o.momentum < 1))
    return fail("momentum", "must be in [0, 1), got " + str(o.momentum));
  if (o.momentum > 0 && !feedback)
    return fail("momentum", "DGC's momentum correction needs an error-feedback "
                            "scheme (topk or three-tier)");
  if (!(o.localClip >= 0) || !std::isfinite(o.localClip))
    return fail("local-clip",
                "must be finite and >= 0, got " + str(o.localClip));
  if (o.localClip > 0 && !feedback)
    return fail("local-clip", "applies to the error-feedback schemes (topk, "
                              "three-tier)");
  return success();
}

namespace {

/// The tensor<3xf64> parameters of a start (ds.all_reduce_start).
Value buildParams(OpBuilder &b, Location loc, ScalarBuilder &s,
                  const CompressAllReducePassOptions &o, Value iteration) {
  auto type = RankedTensorType::get({3}, b.getF64Type());
  auto constant = [&](double a, double c, double d) -> Value {
    return arith::ConstantOp::create(
        b, loc, type, DenseElementsAttr::get(type, ArrayRef<double>{a, c, d}));
  };
  if (o.scheme == CompressionScheme::three_tier)
    return o.fixedThresholds ? constant(1, o.thetaLow, o.thetaHigh)
                             : constant(0, o.quantileLow, o.quantileHigh);
  if (o.scheme == CompressionScheme::powersgd) {
    // [rank, active, 0]: uncompressed before start-iteration (DDP).
    if (o.startIteration == 0)
      return constant(double(o.rank), 1, 0);
    Value active =
        s.select(s.cmpi(arith::CmpIPredicate::sge, s.extractRaw(iteration),
                        s.i64(o.startIteration)),
                 s.f64(1.0), s.f64(0.0));
    Value zero = s.f64(0);
    return tensor::FromElementsOp::create(
        b, loc, type, ValueRange{s.f64(double(o.rank)), active, zero});
  }
  if (o.warmupIterations == 0)
    return constant(o.ratio, 0, 0);
  // DGC's warm-up: 75 %, 93.75 %, 98.4375 %, 99.6 % sparsity, one stage per
  // warmup-iterations, then the final ratio (never more than it keeps).
  Value stage = arith::DivSIOp::create(b, loc, s.extractRaw(iteration),
                                       s.i64(o.warmupIterations));
  Value ratio = s.f64(o.ratio);
  const double kept[] = {0.25, 0.0625, 0.015625, 0.004};
  for (int i = 3; i >= 0; --i)
    ratio = s.select(s.cmpi(arith::CmpIPredicate::eq, stage, s.i64(i)),
                     s.f64(std::max(kept[i], double(o.ratio))), ratio);
  Value zero = s.f64(0);
  return tensor::FromElementsOp::create(b, loc, type,
                                        ValueRange{ratio, zero, zero});
}

} // namespace

LogicalResult
mlir::ds::compressAllReduce(FunctionOpInterface func,
                            const CompressAllReducePassOptions &options) {
  FailureOr<TrainingContract> contract =
      requireGradientStep(func, "ds-compress-allreduce");
  if (failed(contract))
    return failure();
  SmallVector<AllReduceStartOp> starts = dp::gradientStarts(func);
  if (starts.empty())
    return func->emitOpError("has no gradient all-reduce: run "
                             "ds-data-parallel first");
  StepEditor ed(func);
  bool residual = AllReduceStartOp::hasResidual(options.scheme);
  Value iteration;
  if ((options.scheme == CompressionScheme::topk &&
       options.warmupIterations > 0) ||
      (options.scheme == CompressionScheme::powersgd &&
       options.startIteration > 0)) {
    FailureOr<Value> it = getOrAddIteration(ed, *contract);
    if (failed(it))
      return failure();
    iteration = *it;
  }
  // The skip flag reads metrics computed after the starts: the residual
  // updates are selected before the terminator.
  OpBuilder tb(ed.terminator);
  Value skip =
      residual ? buildSkipFlag(tb, func.getLoc(), func, *contract) : Value();
  // One set of parameters for every bucket, built at the entry (it reads
  // only the iteration counter).
  Value params;
  if (residual) {
    OpBuilder eb(&ed.body, ed.body.begin());
    ScalarBuilder es(eb, func.getLoc());
    params = buildParams(eb, func.getLoc(), es, options, iteration);
  }
  for (auto [index, start] : llvm::enumerate(starts)) {
    if (start.getScheme() != CompressionScheme::none)
      return start.emitOpError("is already compressed (ds-compress-allreduce "
                               "ran twice?)");
    OpBuilder b(start);
    Location loc = start.getLoc();
    RankedTensorType type = start.getBucket().getType();
    Value old, shapes;
    if (options.scheme == CompressionScheme::powersgd) {
      // The bucket's tensors as PyTorch views them, [shape[0], rest]; the
      // state holds each matrix's error and Q (ds_runtime.h).
      SmallVector<int64_t> dims;
      int64_t stateSize = 0;
      for (Attribute name : start->getAttrOfType<ArrayAttr>(dp::kGradsAttr)) {
        std::optional<unsigned> arg = contract->findArg(
            ArgRole::Param, cast<StringAttr>(name).getValue());
        if (!arg)
          return start.emitOpError("holds the gradient of an unknown "
                                   "parameter ")
                 << name;
        RankedTensorType pt = contract->args[*arg].type;
        int64_t m = pt.getRank() == 0 ? 1 : pt.getDimSize(0);
        int64_t n = m == 0 ? 0 : pt.getNumElements() / m;
        dims.append({m, n});
        if (m > 1 && n > 1)
          stateSize += m * n + n * options.rank;
      }
      auto shapesType =
          RankedTensorType::get({int64_t(dims.size())}, b.getI64Type());
      shapes = arith::ConstantOp::create(
          b, loc, shapesType,
          DenseElementsAttr::get(shapesType, ArrayRef<int64_t>(dims)));
      old =
          ed.addState("comm.powersgd.bucket" + std::to_string(index), "",
                      RankedTensorType::get({stateSize}, type.getElementType()),
                      InitKind::zeros);
    } else if (residual) {
      old = ed.addState(
          (dp::kResidualKind + ".bucket" + std::to_string(index)).str(), "",
          type, InitKind::zeros);
    }
    Value input = start.getBucket();
    // DGC's local clipping: the bucket's L2 norm at most c / sqrt(N).
    if (options.localClip > 0) {
      ScalarBuilder s(b, loc);
      auto i64 = RankedTensorType::get({}, b.getI64Type());
      Value size = arith::SIToFPOp::create(
          b, loc, b.getF64Type(),
          s.extractRaw(CommRankOp::create(b, loc, i64, i64).getSize()));
      Value norm = s.sqrt(
          s.extract(reduceAll(b, loc, MulOp::create(b, loc, input, input))));
      Value limit = s.div(s.f64(options.localClip), s.sqrt(size));
      Value coef = s.minf(s.f64(1.0), s.div(limit, s.add(norm, s.f64(1e-6))));
      input = scaleTensor(b, loc, input, s.tensor(coef, b.getF64Type()));
    }
    // DGC's momentum correction: the rank's own momentum is what goes
    // through the error feedback.
    Value momentum, corrected;
    if (residual && options.momentum > 0) {
      momentum = ed.addState(("comm.momentum.bucket" + std::to_string(index)),
                             "", type, InitKind::zeros);
      ScalarBuilder s(b, loc);
      Value m = s.tensor(s.f64(options.momentum), b.getF64Type());
      corrected =
          AddOp::create(b, loc, scaleTensor(b, loc, momentum, m), input);
      input = corrected;
    }
    auto compressed = AllReduceStartOp::create(
        b, loc, b.getI64Type(), old ? old.getType() : Type(), input, old,
        params, shapes, options.scheme);
    compressed->setAttr(dp::kGradsAttr, start->getAttr(dp::kGradsAttr));
    start.getRequest().replaceAllUsesWith(compressed.getRequest());
    start.erase();
    if (residual) {
      Value next = compressed.getNewResidual();
      if (skip)
        next = SelectOp::create(tb, loc, skip, old, next);
      ed.addUpdate(old, next);
    }
    if (momentum) {
      // Momentum-factor masking: an element went out exactly when its new
      // residual is not residual + input (what the runtime keeps when it
      // sends nothing, bit for bit).
      b.setInsertionPointAfter(compressed);
      Value kept = AddOp::create(b, loc, old, corrected);
      Value unsent = CompareOp::create(b, loc, ComparePredicate::eq,
                                       compressed.getNewResidual(), kept);
      Value zero = arith::ConstantOp::create(
          b, loc, type,
          DenseElementsAttr::get(
              type,
              FloatAttr::get(cast<FloatType>(type.getElementType()), 0.0)));
      Value next = SelectOp::create(b, loc, unsent, corrected, zero);
      if (skip)
        next = SelectOp::create(tb, loc, skip, momentum, next);
      ed.addUpdate(momentum, next);
    }
  }
  ed.finish();
  return success();
}

namespace {
struct CompressAllReducePass
    : public mlir::ds::impl::CompressAllReducePassBase<CompressAllReducePass> {
  using Base::Base;
  void runOnOperation() override {
    ScopedPassNamePrefix named(&getContext(), getArgument());
    ModuleOp module = getOperation();
    if (failed(checkOptionsGivenOnce(module, getArgument(),
                                     {&scheme, &fixedThresholds, &quantileLow,
                                      &quantileHigh, &thetaLow, &thetaHigh,
                                      &ratio, &warmupIterations, &momentum,
                                      &localClip, &rank, &startIteration})))
      return signalPassFailure();
    CompressAllReducePassOptions options;
    options.scheme = scheme;
    options.fixedThresholds = fixedThresholds;
    options.quantileLow = quantileLow;
    options.quantileHigh = quantileHigh;
    options.thetaLow = thetaLow;
    options.thetaHigh = thetaHigh;
    options.ratio = ratio;
    options.warmupIterations = warmupIterations;
    options.momentum = momentum;
    options.localClip = localClip;
    options.rank = rank;
    options.startIteration = startIteration;
    std::string error;
    if (failed(validateCompressOptions(options, error))) {
      module.emitError(error);
      return signalPassFailure();
    }
    if (!dp::isDataParallel(module)) {
      module.emitError("ds-compress-allreduce: the module is not data "
                       "parallel: run ds-data-parallel first");
      return signalPassFailure();
    }
    if (failed(forEachTrainStep(module, getArgument(),
                                [&](FunctionOpInterface func) {
                                  return compressAllReduce(func, options);
                                })))
      return signalPassFailure();
    dp::setModuleEntry(
        module, "compression",
        StringAttr::get(&getContext(),
                        stringifyCompressionScheme(options.scheme)));
  }
};
} // namespace
