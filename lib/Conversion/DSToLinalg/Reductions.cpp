//===- Reductions.cpp - Lower reductions, softmax, norms and losses -------===//
//
// Everything that reduces: reduce_sum/mean/max, softmax and log_softmax,
// layer/RMS/batch norm, cross-entropy (and its gradient) and MSE. Each is a
// short chain of `linalg.generic`s: reductions (reduced dimensions dropped
// from the output, accumulated in the element type, sums flagged
// `reassoc` so LLVM may vectorise them) and parallel generics that read the
// reduced tensors back through projected maps.
//
// Numerics follow PyTorch: softmax, log_softmax and cross-entropy subtract
// the row maximum first; variances are two-pass (sum of squared deviations
// from the mean), biased for normalisation and unbiased (M / (M - 1)) for
// batch norm's running variance.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::lowering;

namespace {

/// All dimensions of a rank-`rank` tensor except `keep`.
SmallVector<int64_t> allDimsBut(int64_t rank, int64_t keep) {
  SmallVector<int64_t> dims;
  for (int64_t i = 0; i < rank; ++i)
    if (i != keep)
      dims.push_back(i);
  return dims;
}

/// The trailing `count` dimensions of a rank-`rank` tensor.
SmallVector<int64_t> trailingDims(int64_t rank, int64_t count) {
  return llvm::to_vector(llvm::seq<int64_t>(rank - count, rank));
}

/// Product of the sizes at `dims`.
int64_t countOf(ArrayRef<int64_t> shape, ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= shape[d];
  return n;
}

/// Sum over `dims` of `map(x)` for the single input `x` (identity map).
Value sumOf(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> dims,
            function_ref<Value(OpBuilder &, Location, Value)> map = nullptr) {
  auto type = cast<RankedTensorType>(x.getType());
  Value zero = createScalar(b, loc, type.getElementType(), 0.0);
  return buildReduction(
      b, loc, type.getShape(), dims, {x},
      {b.getMultiDimIdentityMap(type.getRank())}, {zero},
      [&](OpBuilder &nb, Location l, ValueRange args) -> SmallVector<Value> {
        Value v = map ? map(nb, l, args[0]) : args[0];
        return {addReassoc(nb, l, args[1], v)};
      })[0];
}

/// Maximum over `dims` (NaN propagates, as torch.amax).
Value maxOf(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> dims) {
  auto type = cast<RankedTensorType>(x.getType());
  return buildReduction(
      b, loc, type.getShape(), dims, {x},
      {b.getMultiDimIdentityMap(type.getRank())},
      {createNegInf(b, loc, type.getElementType())},
      [&](OpBuilder &nb, Location l, ValueRange args) -> SmallVector<Value> {
        return {maxNaN(nb, l, args[1], args[0])};
      })[0];
}

/// Sum over `dims` of `(x - sum / n)^2`, where `sum` is the reduced sum of
/// `x`: n times the biased variance, computed in two passes.
Value sumSqDev(OpBuilder &b, Location loc, Value x, Value sum,
               ArrayRef<int64_t> dims, int64_t n) {
  auto type = cast<RankedTensorType>(x.getType());
  Type elem = type.getElementType();
  int64_t rank = type.getRank();
  Value zero = createScalar(b, loc, elem, 0.0);
  return buildReduction(
      b, loc, type.getShape(), dims, {x, sum},
      {b.getMultiDimIdentityMap(rank),
       getDropDimsMap(b.getContext(), rank, dims)},
      {zero},
      [&](OpBuilder &nb, Location l, ValueRange args) -> SmallVector<Value> {
        Value mean =
            arith::DivFOp::create(nb, l, args[1], createScalar(nb, l, elem, n));
        Value d = arith::SubFOp::create(nb, l, args[0], mean);
        return {addReassoc(nb, l, args[2], arith::MulFOp::create(nb, l, d, d))};
      })[0];
}

/// Converts every value to the compute type of its float type.
SmallVector<Value> toCompute(OpBuilder &b, Location loc, ValueRange values) {
  SmallVector<Value> out;
  for (Value v : values)
    out.push_back(convertFloat(b, loc, v, getComputeType(v.getType())));
  return out;
}

//===----------------------------------------------------------------------===//
// reduce_sum, reduce_mean, reduce_max
//===----------------------------------------------------------------------===//

enum class ReduceKind { Sum, Mean, Max };

template <typename OpTy, ReduceKind Kind>
struct ReduceLowering : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value x = adaptor.getInput();
    auto type = cast<RankedTensorType>(x.getType());
    Type elem = type.getElementType();
    if (!isa<FloatType>(elem))
      return rewriter.notifyMatchFailure(op, "expects a float tensor");
    ArrayRef<int64_t> dims = op.getDims();
    Value r = Kind == ReduceKind::Max ? maxOf(rewriter, loc, x, dims)
                                      : sumOf(rewriter, loc, x, dims);
    if (Kind == ReduceKind::Mean) {
      int64_t n = countOf(type.getShape(), dims);
      auto rType = cast<RankedTensorType>(r.getType());
      r = buildElementwise(rewriter, loc, rType, {r},
                           [&](OpBuilder &b, Location l, ValueRange args) {
                             return arith::DivFOp::create(
                                 b, l, args[0], createScalar(b, l, elem, n));
                           });
    }
    rewriter.replaceOp(
        op, reshapeTo(rewriter, loc, r,
                      cast<RankedTensorType>(op.getType()).getShape()));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// softmax, log_softmax
//===----------------------------------------------------------------------===//

template <typename OpTy, bool IsLog>
struct SoftmaxLowering : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value x = adaptor.getInput();
    auto type = cast<RankedTensorType>(x.getType());
    Type elem = type.getElementType();
    int64_t rank = type.getRank();
    int64_t axis = op.getAxis();
    SmallVector<int64_t> dims = {axis};
    MLIRContext *ctx = rewriter.getContext();
    AffineMap id = rewriter.getMultiDimIdentityMap(rank);
    AffineMap reduced = getDropDimsMap(ctx, rank, dims);

    // exp(x - max), evaluated in the compute type, rounded to elem.
    auto expShifted = [&](OpBuilder &b, Location l, Value v, Value m) {
      Value d = arith::SubFOp::create(b, l, v, m);
      Value c = convertFloat(b, l, d, getComputeType(elem));
      return convertFloat(b, l, math::ExpOp::create(b, l, c), elem);
    };
    Value m = maxOf(rewriter, loc, x, dims);
    if (IsLog) {
      // y = x - m - log(sum(exp(x - m)))
      Value zero = createScalar(rewriter, loc, elem, 0.0);
      Value s = buildReduction(
          rewriter, loc, type.getShape(), dims, {x, m}, {id, reduced}, {zero},
          [&](OpBuilder &b, Location l, ValueRange a) -> SmallVector<Value> {
            return {addReassoc(b, l, a[2], expShifted(b, l, a[0], a[1]))};
          })[0];
      Value y =
          buildParallel(rewriter, loc, type, {x, m, s}, {id, reduced, reduced},
                        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                          SmallVector<Value> c = toCompute(b, l, a);
                          Value r = arith::SubFOp::create(
                              b, l, arith::SubFOp::create(b, l, c[0], c[1]),
                              math::LogOp::create(b, l, c[2]));
                          return convertFloat(b, l, r, elem);
                        });
      rewriter.replaceOp(op, y);
      return success();
    }
    // e = exp(x - m); y = e / sum(e)
    Value e = buildParallel(rewriter, loc, type, {x, m}, {id, reduced},
                            [&](OpBuilder &b, Location l, ValueRange a) {
                              return expShifted(b, l, a[0], a[1]);
                            });
    Value s = sumOf(rewriter, loc, e, dims);
    Value y = buildParallel(rewriter, loc, type, {e, s}, {id, reduced},
                            [&](OpBuilder &b, Location l, ValueRange a) {
                              return arith::DivFOp::create(b, l, a[0], a[1]);
                            });
    rewriter.replaceOp(op, y);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// layer_norm, rms_norm, batch_norm
//===----------------------------------------------------------------------===//

struct LayerNormLowering : OpConversionPattern<LayerNormOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(LayerNormOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value x = adaptor.getInput();
    RankedTensorType type = op.getType();
    Type elem = type.getElementType();
    int64_t rank = type.getRank();
    int64_t k = op.getWeight().getType().getRank();
    SmallVector<int64_t> dims = trailingDims(rank, k);
    int64_t n = countOf(type.getShape(), dims);
    double eps = op.getEps().convertToDouble();
    MLIRContext *ctx = rewriter.getContext();

    Value sum = sumOf(rewriter, loc, x, dims);
    Value sq = sumSqDev(rewriter, loc, x, sum, dims, n);
    AffineMap id = rewriter.getMultiDimIdentityMap(rank);
    AffineMap reduced = getDropDimsMap(ctx, rank, dims);
    AffineMap trailing = getTrailingMap(ctx, rank, k);
    Value y = buildParallel(
        rewriter, loc, type,
        {x, sum, sq, adaptor.getWeight(), adaptor.getBias()},
        {id, reduced, reduced, trailing, trailing},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          SmallVector<Value> c = toCompute(b, l, a);
          Type ct = c[0].getType();
          Value invN = createScalar(b, l, ct, 1.0 / static_cast<double>(n));
          Value mean =
              arith::DivFOp::create(b, l, c[1], createScalar(b, l, ct, n));
          Value var = arith::MulFOp::create(b, l, c[2], invN);
          Value rstd = math::RsqrtOp::create(
              b, l,
              arith::AddFOp::create(b, l, var, createScalar(b, l, ct, eps)));
          Value xhat = arith::MulFOp::create(
              b, l, arith::SubFOp::create(b, l, c[0], mean), rstd);
          Value r = arith::AddFOp::create(
              b, l, arith::MulFOp::create(b, l, xhat, c[3]), c[4]);
          return convertFloat(b, l, r, elem);
        });
    rewriter.replaceOp(op, y);
    return success();
  }
};

struct RmsNormLowering : OpConversionPattern<RmsNormOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(RmsNormOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value x = adaptor.getInput();
    RankedTensorType type = op.getType();
    Type elem = type.getElementType();
    int64_t rank = type.getRank();
    int64_t k = op.getWeight().getType().getRank();
    SmallVector<int64_t> dims = trailingDims(rank, k);
    int64_t n = countOf(type.getShape(), dims);
    double eps = op.getEps().convertToDouble();
    MLIRContext *ctx = rewriter.getContext();

    Value sq = sumOf(rewriter, loc, x, dims,
                     [](OpBuilder &b, Location l, Value v) -> Value {
                       return arith::MulFOp::create(b, l, v, v);
                     });
    Value y = buildParallel(
        rewriter, loc, type, {x, sq, adaptor.getWeight()},
        {rewriter.getMultiDimIdentityMap(rank), getDropDimsMap(ctx, rank, dims),
         getTrailingMap(ctx, rank, k)},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          SmallVector<Value> c = toCompute(b, l, a);
          Type ct = c[0].getType();
          Value ms =
              arith::DivFOp::create(b, l, c[1], createScalar(b, l, ct, n));
          Value r = math::RsqrtOp::create(
              b, l,
              arith::AddFOp::create(b, l, ms, createScalar(b, l, ct, eps)));
          Value v = arith::MulFOp::create(
              b, l, arith::MulFOp::create(b, l, c[0], r), c[2]);
          return convertFloat(b, l, v, elem);
        });
    rewriter.replaceOp(op, y);
    return success();
  }
};

struct BatchNormLowering : OpConversionPattern<BatchNormOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(BatchNormOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value x = adaptor.getInput();
    RankedTensorType type = op.getResult().getType();
    auto statType = cast<RankedTensorType>(op.getWeight().getType());
    Type elem = type.getElementType();
    int64_t rank = type.getRank();
    SmallVector<int64_t> dims = allDimsBut(rank, 1);
    int64_t m = countOf(type.getShape(), dims);
    if (m < 2)
      return rewriter.notifyMatchFailure(op, "needs two values per channel");
    double eps = op.getEps().convertToDouble();
    double momentum = op.getMomentum().convertToDouble();
    MLIRContext *ctx = rewriter.getContext();

    Value sum = sumOf(rewriter, loc, x, dims);
    Value sq = sumSqDev(rewriter, loc, x, sum, dims, m);
    AffineMap id = rewriter.getMultiDimIdentityMap(rank);
    AffineMap chan = getDropDimsMap(ctx, rank, dims);
    Value y = buildParallel(
        rewriter, loc, type,
        {x, sum, sq, adaptor.getWeight(), adaptor.getBias()},
        {id, chan, chan, chan, chan},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          SmallVector<Value> c = toCompute(b, l, a);
          Type ct = c[0].getType();
          Value mean =
              arith::DivFOp::create(b, l, c[1], createScalar(b, l, ct, m));
          Value var =
              arith::DivFOp::create(b, l, c[2], createScalar(b, l, ct, m));
          Value rstd = math::RsqrtOp::create(
              b, l,
              arith::AddFOp::create(b, l, var, createScalar(b, l, ct, eps)));
          Value xhat = arith::MulFOp::create(
              b, l, arith::SubFOp::create(b, l, c[0], mean), rstd);
          Value r = arith::AddFOp::create(
              b, l, arith::MulFOp::create(b, l, xhat, c[3]), c[4]);
          return convertFloat(b, l, r, elem);
        });

    // new = (1 - momentum) * running + momentum * stat, where stat is the
    // batch mean, or the unbiased variance sum_sq / (M - 1).
    AffineMap id1 = rewriter.getMultiDimIdentityMap(1);
    auto update = [&](Value running, Value stat, int64_t divisor) {
      return buildParallel(
          rewriter, loc, statType, {running, stat}, {id1, id1},
          [&](OpBuilder &b, Location l, ValueRange a) -> Value {
            SmallVector<Value> c = toCompute(b, l, a);
            Type ct = c[0].getType();
            Value s = arith::DivFOp::create(b, l, c[1],
                                            createScalar(b, l, ct, divisor));
            Value r = arith::AddFOp::create(
                b, l,
                arith::MulFOp::create(
                    b, l, createScalar(b, l, ct, 1 - momentum), c[0]),
                arith::MulFOp::create(b, l, createScalar(b, l, ct, momentum),
                                      s));
            return convertFloat(b, l, r, elem);
          });
    };
    Value newMean = update(adaptor.getRunningMean(), sum, m);
    Value newVar = update(adaptor.getRunningVar(), sq, m - 1);
    rewriter.replaceOp(op, {y, newMean, newVar});
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

/// Row maximum and sum of exp(x - max) of a [N, C] logits tensor.
std::pair<Value, Value> rowMaxAndExpSum(OpBuilder &b, Location loc,
                                        Value logits) {
  auto type = cast<RankedTensorType>(logits.getType());
  Type elem = type.getElementType();
  SmallVector<int64_t> dims = {1};
  Value m = maxOf(b, loc, logits, dims);
  Value s = buildReduction(
      b, loc, type.getShape(), dims, {logits, m},
      {b.getMultiDimIdentityMap(2), getDropDimsMap(b.getContext(), 2, dims)},
      {createScalar(b, loc, elem, 0.0)},
      [&](OpBuilder &nb, Location l, ValueRange a) -> SmallVector<Value> {
        Value d = convertFloat(nb, l, arith::SubFOp::create(nb, l, a[0], a[1]),
                               getComputeType(elem));
        Value e = convertFloat(nb, l, math::ExpOp::create(nb, l, d), elem);
        return {addReassoc(nb, l, a[2], e)};
      })[0];
  return {m, s};
}

struct CrossEntropyLowering : OpConversionPattern<CrossEntropyOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CrossEntropyOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value logits = adaptor.getLogits(), labels = adaptor.getLabels();
    auto type = cast<RankedTensorType>(logits.getType());
    Type elem = type.getElementType();
    int64_t n = type.getDimSize(0), c = type.getDimSize(1);
    if (c < 1)
      return rewriter.notifyMatchFailure(op, "no classes");
    auto [m, s] = rowMaxAndExpSum(rewriter, loc, logits);

    // sum_n (m + log(s) - logits[n, label]); out-of-range labels read 0.
    AffineMap id1 = rewriter.getMultiDimIdentityMap(1);
    Value total = buildReduction(
        rewriter, loc, {n}, {0}, {m, s, labels}, {id1, id1, id1},
        {createScalar(rewriter, loc, elem, 0.0)},
        [&](OpBuilder &b, Location l, ValueRange a) -> SmallVector<Value> {
          Value row = linalg::IndexOp::create(b, l, 0);
          Value label =
              arith::IndexCastOp::create(b, l, b.getIndexType(), a[2]);
          Value inRange = arith::AndIOp::create(
              b, l,
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge, label,
                                    createIndex(b, l, 0)),
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, label,
                                    createIndex(b, l, c)));
          Value col = clampIndex(b, l, label, c);
          Value target =
              tensor::ExtractOp::create(b, l, logits, ValueRange{row, col});
          target = arith::SelectOp::create(b, l, inRange, target,
                                           createScalar(b, l, elem, 0.0));
          Value lse = arith::AddFOp::create(
              b, l, a[0],
              convertFloat(
                  b, l,
                  math::LogOp::create(
                      b, l, convertFloat(b, l, a[1], getComputeType(elem))),
                  elem));
          return {
              addReassoc(b, l, a[3], arith::SubFOp::create(b, l, lse, target))};
        })[0];
    Value loss = buildElementwise(
        rewriter, loc, cast<RankedTensorType>(op.getType()), {total},
        [&](OpBuilder &b, Location l, ValueRange a) {
          return arith::DivFOp::create(b, l, a[0], createScalar(b, l, elem, n));
        });
    rewriter.replaceOp(op, loss);
    return success();
  }
};

struct CrossEntropyGradLowering : OpConversionPattern<CrossEntropyGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CrossEntropyGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value logits = adaptor.getLogits();
    RankedTensorType type = op.getType();
    Type elem = type.getElementType();
    int64_t n = type.getDimSize(0);
    MLIRContext *ctx = rewriter.getContext();
    auto [m, s] = rowMaxAndExpSum(rewriter, loc, logits);
    AffineMap row = AffineMap::get(2, 0, {getAffineDimExpr(0, ctx)}, ctx);
    AffineMap scalar = AffineMap::get(2, 0, {}, ctx);
    // grad * (exp(x - m) / s - (c == label)) / N
    Value result = buildParallel(
        rewriter, loc, type,
        {logits, m, s, adaptor.getLabels(), adaptor.getGrad()},
        {rewriter.getMultiDimIdentityMap(2), row, row, row, scalar},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          SmallVector<Value> v =
              toCompute(b, l, ValueRange{a[0], a[1], a[2], a[4]});
          Type ct = v[0].getType();
          Value p = arith::DivFOp::create(
              b, l,
              math::ExpOp::create(b, l,
                                  arith::SubFOp::create(b, l, v[0], v[1])),
              v[2]);
          Value col = linalg::IndexOp::create(b, l, 1);
          Value label =
              arith::IndexCastOp::create(b, l, b.getIndexType(), a[3]);
          Value hit =
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, col, label);
          Value onehot =
              arith::SelectOp::create(b, l, hit, createScalar(b, l, ct, 1.0),
                                      createScalar(b, l, ct, 0.0));
          Value scale =
              arith::DivFOp::create(b, l, v[3], createScalar(b, l, ct, n));
          Value r = arith::MulFOp::create(
              b, l, arith::SubFOp::create(b, l, p, onehot), scale);
          return convertFloat(b, l, r, elem);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct MseLossLowering : OpConversionPattern<MseLossOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MseLossOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(adaptor.getInput().getType());
    Type elem = type.getElementType();
    int64_t rank = type.getRank();
    SmallVector<int64_t> dims = llvm::to_vector(llvm::seq<int64_t>(0, rank));
    int64_t n = type.getNumElements();
    AffineMap id = rewriter.getMultiDimIdentityMap(rank);
    Value total = buildReduction(
        rewriter, loc, type.getShape(), dims,
        {adaptor.getInput(), adaptor.getTarget()}, {id, id},
        {createScalar(rewriter, loc, elem, 0.0)},
        [&](OpBuilder &b, Location l, ValueRange a) -> SmallVector<Value> {
          Value d = arith::SubFOp::create(b, l, a[0], a[1]);
          return {addReassoc(b, l, a[2], arith::MulFOp::create(b, l, d, d))};
        })[0];
    Value loss = buildElementwise(
        rewriter, loc, cast<RankedTensorType>(op.getType()), {total},
        [&](OpBuilder &b, Location l, ValueRange a) {
          return arith::DivFOp::create(b, l, a[0], createScalar(b, l, elem, n));
        });
    rewriter.replaceOp(op, loss);
    return success();
  }
};

} // namespace

void lowering::populateReductionPatterns(RewritePatternSet &patterns) {
  patterns.add<ReduceLowering<ReduceSumOp, ReduceKind::Sum>,
               ReduceLowering<ReduceMeanOp, ReduceKind::Mean>,
               ReduceLowering<ReduceMaxOp, ReduceKind::Max>,
               SoftmaxLowering<SoftmaxOp, false>,
               SoftmaxLowering<LogSoftmaxOp, true>, LayerNormLowering,
               RmsNormLowering, BatchNormLowering, CrossEntropyLowering,
               CrossEntropyGradLowering, MseLossLowering>(
      patterns.getContext());
}
