//===- SyncBatchNorm.cpp - Batch statistics over all ranks ----------------===//
//
// Implements ds-sync-batch-norm: PyTorch's SyncBatchNorm. Each
// `ds.batch_norm` of the forward becomes its decomposition with the batch
// statistics summed over the ranks:
//
//   count = all_reduce(M_local)                  elements per channel
//   mean  = all_reduce(sum(x)) / count
//   var   = all_reduce(sum((x - mean)^2)) / count  (biased, two passes)
//   y     = (x - mean) * rsqrt(var + eps) * weight + bias
//   running stats as ds.batch_norm (the unbiased var * count / (count - 1)).
//
// It runs on the forward, before ds-autodiff: the all-reduce's gradient is
// the all-reduce of the gradient, so autodiff derives SyncBatchNorm's
// backward (the two gradient sums reduced over the ranks) from the rules it
// has. The statistics are those of the global batch, so a data-parallel
// step normalizes exactly as a single process on the global batch does, and
// the running statistics agree on every rank without a broadcast.
//
//===----------------------------------------------------------------------===//

#include "DataParallel.h"

#include "../StepUtils.h"

#include "ds/Analysis/StepQueries.h"
#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"

namespace mlir::ds {
#define GEN_PASS_DEF_SYNCBATCHNORMPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

namespace {

/// A constant tensor of `shape` filled with `v` in `elementType`.
Value splat(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
            Type elementType, double v) {
  auto type = RankedTensorType::get(shape, elementType);
  return arith::ConstantOp::create(
      b, loc, type,
      DenseElementsAttr::get(type,
                             FloatAttr::get(cast<FloatType>(elementType), v)));
}

void synchronize(BatchNormOp bn) {
  OpBuilder b(bn);
  Location loc = bn.getLoc();
  Value x = bn.getInput();
  auto xType = cast<RankedTensorType>(x.getType());
  Type et = xType.getElementType();
  int64_t rank = xType.getRank();
  int64_t channels = xType.getDimSize(1);
  SmallVector<int64_t> dims{0};
  for (int64_t d = 2; d < rank; ++d)
    dims.push_back(d);
  SmallVector<int64_t> keep(rank, 1), one(rank, 1);
  keep[1] = channels;
  auto keepType = RankedTensorType::get(keep, et);
  auto sumOver = [&](Value v) -> Value {
    Value s =
        ReduceSumOp::create(b, loc, keepType, v, b.getDenseI64ArrayAttr(dims),
                            /*keep_dims=*/true);
    return AllReduceOp::create(b, loc, s, ReductionKind::sum);
  };
  int64_t local = xType.getNumElements() / channels;
  Value count = AllReduceOp::create(b, loc, splat(b, loc, one, et, local),
                                    ReductionKind::sum);
  Value mean = DivOp::create(b, loc, sumOver(x), count);
  Value centered = SubOp::create(b, loc, x, mean);
  Value var = DivOp::create(
      b, loc, sumOver(MulOp::create(b, loc, centered, centered)), count);
  Value rstd = RsqrtOp::create(
      b, loc,
      AddOp::create(b, loc, var,
                    splat(b, loc, one, et, bn.getEps().convertToDouble())));
  auto asChannels = [&](Value v) -> Value {
    return ReshapeOp::create(b, loc, keepType, v);
  };
  Value y =
      MulOp::create(b, loc, centered,
                    MulOp::create(b, loc, rstd, asChannels(bn.getWeight())));
  y = AddOp::create(b, loc, y, asChannels(bn.getBias()));

  // The running statistics, as ds.batch_norm updates them.
  auto statType = cast<RankedTensorType>(bn.getRunningMean().getType());
  auto flat = [&](Value v) -> Value {
    return ReshapeOp::create(b, loc, statType, v);
  };
  double m = bn.getMomentum().convertToDouble();
  auto blend = [&](Value running, Value batch) -> Value {
    Value kept = MulOp::create(b, loc, running, splat(b, loc, {1}, et, 1 - m));
    return AddOp::create(
        b, loc, kept,
        MulOp::create(b, loc, flat(batch), splat(b, loc, {1}, et, m)));
  };
  Value unbiased = MulOp::create(
      b, loc, var,
      DivOp::create(b, loc, count,
                    SubOp::create(b, loc, count, splat(b, loc, one, et, 1))));
  Value newMean = blend(bn.getRunningMean(), mean);
  Value newVar = blend(bn.getRunningVar(), unbiased);
  bn.getResult().replaceAllUsesWith(y);
  bn.getNewRunningMean().replaceAllUsesWith(newMean);
  bn.getNewRunningVar().replaceAllUsesWith(newVar);
  bn.erase();
}

} // namespace

LogicalResult mlir::ds::syncBatchNorm(FunctionOpInterface func) {
  SmallVector<BatchNormOp> norms;
  func->walk([&](BatchNormOp op) {
    if (isForwardOp(op))
      norms.push_back(op);
  });
  for (BatchNormOp bn : norms)
    synchronize(bn);
  return success();
}

namespace {
struct SyncBatchNormPass
    : public mlir::ds::impl::SyncBatchNormPassBase<SyncBatchNormPass> {
  void runOnOperation() override {
    ScopedPassNamePrefix named(&getContext(), getArgument());
    if (failed(forEachTrainStep(
            getOperation(), getArgument(),
            [](FunctionOpInterface func) { return syncBatchNorm(func); })))
      signalPassFailure();
  }
};
} // namespace
