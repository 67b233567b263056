//===- Elementwise.cpp - Lower elementwise ds ops to linalg.generic -------===//
//
// Binary ops, unary ops, gelu and its gradient, compare/select, cast,
// broadcast and causal_mask all become one parallel `linalg.generic` with a
// `tensor.empty` init. Broadcast operands are read through affine maps with
// constant-0 results (size-1 dimensions) or no results (rank-0 operands),
// so no broadcast is ever materialised.
//
// Transcendental math on narrow floats (f16, bf16, FP8) is evaluated in f32
// and rounded once at the end, as PyTorch's CPU kernels do; everything else
// stays in the element type. The formulas follow PyTorch: maximum/minimum
// propagate NaN, gelu uses erf (exact) or the 0.044715 tanh form, sigmoid
// uses exp(-|x|) so that it never overflows.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/Dialect/Math/IR/Math.h"

#include <cmath>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::lowering;

namespace {

//===----------------------------------------------------------------------===//
// Binary ops
//===----------------------------------------------------------------------===//

/// `result = FloatOp(lhs, rhs)` or `IntOp(lhs, rhs)` with broadcasting.
template <typename OpTy, typename FloatOp, typename IntOp>
struct BinaryLowering : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto resultType = cast<RankedTensorType>(op.getType());
    Type elem = resultType.getElementType();
    bool isFloat = isa<FloatType>(elem);
    if (!isFloat && !isa<IntegerType>(elem))
      return rewriter.notifyMatchFailure(op, "unsupported element type");
    Value result = buildElementwise(
        rewriter, op.getLoc(), resultType, {adaptor.getLhs(), adaptor.getRhs()},
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          if (isFloat)
            return FloatOp::create(b, loc, args[0], args[1]);
          return IntOp::create(b, loc, args[0], args[1]);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Unary ops
//===----------------------------------------------------------------------===//

/// Computes one element in the compute type.
using UnaryFn = Value (*)(OpBuilder &, Location, Value);

Value cst(OpBuilder &b, Location loc, Value like, double v) {
  return createScalar(b, loc, like.getType(), v);
}

/// sigmoid(x) = 1 / (1 + e) for x >= 0, e / (1 + e) otherwise, with
/// e = exp(-|x|) <= 1: no overflow for any x, full relative accuracy.
Value emitSigmoid(OpBuilder &b, Location loc, Value x) {
  Value e = math::ExpOp::create(
      b, loc, arith::NegFOp::create(b, loc, math::AbsFOp::create(b, loc, x)));
  Value r = arith::DivFOp::create(
      b, loc, cst(b, loc, x, 1.0),
      arith::AddFOp::create(b, loc, cst(b, loc, x, 1.0), e));
  Value nonNeg = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, x,
                                       cst(b, loc, x, 0.0));
  return arith::SelectOp::create(b, loc, nonNeg, r,
                                 arith::MulFOp::create(b, loc, e, r));
}

/// relu(x) = x > 0 ? x : 0; `ugt` keeps NaN as NaN (torch.relu).
Value emitRelu(OpBuilder &b, Location loc, Value x) {
  Value zero = cst(b, loc, x, 0.0);
  Value pos = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UGT, x, zero);
  return arith::SelectOp::create(b, loc, pos, x, zero);
}

Value emitSilu(OpBuilder &b, Location loc, Value x) {
  return arith::MulFOp::create(b, loc, x, emitSigmoid(b, loc, x));
}

template <typename MathOp> Value emitMath(OpBuilder &b, Location loc, Value x) {
  return MathOp::create(b, loc, x);
}

/// Applies `fn` to every element, evaluated in the compute type.
template <typename OpTy> struct UnaryLowering : OpConversionPattern<OpTy> {
  UnaryLowering(MLIRContext *ctx, UnaryFn fn)
      : OpConversionPattern<OpTy>(ctx), fn(fn) {}
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op.getType());
    Type elem = type.getElementType();
    if (!isa<FloatType>(elem))
      return rewriter.notifyMatchFailure(op, "expects a float tensor");
    Type compute = getComputeType(elem);
    Value result = buildElementwise(
        rewriter, op.getLoc(), type, {adaptor.getInput()},
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          Value x = convertFloat(b, loc, args[0], compute);
          return convertFloat(b, loc, fn(b, loc, x), elem);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
  UnaryFn fn;
};

//===----------------------------------------------------------------------===//
// GELU and its gradient
//===----------------------------------------------------------------------===//

constexpr double kSqrt1_2 = 0.70710678118654752440;     // 1 / sqrt(2)
constexpr double kSqrt2OverPi = 0.79788456080286535588; // sqrt(2 / pi)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1 / sqrt(2 pi)
constexpr double kGeluCubic = 0.044715;

/// The tanh argument `sqrt(2/pi) (x + 0.044715 x^3)`.
Value geluTanhArg(OpBuilder &b, Location loc, Value x) {
  Value x3 =
      arith::MulFOp::create(b, loc, arith::MulFOp::create(b, loc, x, x), x);
  Value inner = arith::AddFOp::create(
      b, loc, x, arith::MulFOp::create(b, loc, cst(b, loc, x, kGeluCubic), x3));
  return arith::MulFOp::create(b, loc, cst(b, loc, x, kSqrt2OverPi), inner);
}

/// Phi(x) = (1 + erf(x / sqrt 2)) / 2.
Value normalCdf(OpBuilder &b, Location loc, Value x) {
  Value erf = math::ErfOp::create(
      b, loc, arith::MulFOp::create(b, loc, x, cst(b, loc, x, kSqrt1_2)));
  return arith::MulFOp::create(
      b, loc, cst(b, loc, x, 0.5),
      arith::AddFOp::create(b, loc, cst(b, loc, x, 1.0), erf));
}

Value emitGelu(OpBuilder &b, Location loc, Value x, GeluApproximation approx) {
  if (approx == GeluApproximation::none)
    return arith::MulFOp::create(b, loc, x, normalCdf(b, loc, x));
  Value t = math::TanhOp::create(b, loc, geluTanhArg(b, loc, x));
  Value halfX = arith::MulFOp::create(b, loc, cst(b, loc, x, 0.5), x);
  return arith::MulFOp::create(
      b, loc, halfX, arith::AddFOp::create(b, loc, cst(b, loc, x, 1.0), t));
}

/// gelu'(x): Phi(x) + x phi(x) (exact), or the derivative of the tanh form.
Value emitGeluDerivative(OpBuilder &b, Location loc, Value x,
                         GeluApproximation approx) {
  Value half = cst(b, loc, x, 0.5), one = cst(b, loc, x, 1.0);
  Value x2 = arith::MulFOp::create(b, loc, x, x);
  if (approx == GeluApproximation::none) {
    // phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
    Value phi = arith::MulFOp::create(
        b, loc, cst(b, loc, x, kInvSqrt2Pi),
        math::ExpOp::create(
            b, loc,
            arith::NegFOp::create(b, loc,
                                  arith::MulFOp::create(b, loc, half, x2))));
    return arith::AddFOp::create(b, loc, normalCdf(b, loc, x),
                                 arith::MulFOp::create(b, loc, x, phi));
  }
  Value t = math::TanhOp::create(b, loc, geluTanhArg(b, loc, x));
  // 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
  Value left = arith::MulFOp::create(b, loc, half,
                                     arith::AddFOp::create(b, loc, one, t));
  Value sech2 =
      arith::SubFOp::create(b, loc, one, arith::MulFOp::create(b, loc, t, t));
  Value du = arith::MulFOp::create(
      b, loc, cst(b, loc, x, kSqrt2OverPi),
      arith::AddFOp::create(
          b, loc, one,
          arith::MulFOp::create(b, loc, cst(b, loc, x, 3 * kGeluCubic), x2)));
  Value right =
      arith::MulFOp::create(b, loc, arith::MulFOp::create(b, loc, half, x),
                            arith::MulFOp::create(b, loc, sech2, du));
  return arith::AddFOp::create(b, loc, left, right);
}

struct GeluLowering : OpConversionPattern<GeluOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(GeluOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    Type elem = type.getElementType();
    Type compute = getComputeType(elem);
    GeluApproximation approx = op.getApproximate();
    Value result = buildElementwise(
        rewriter, op.getLoc(), type, {adaptor.getInput()},
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          Value x = convertFloat(b, loc, args[0], compute);
          return convertFloat(b, loc, emitGelu(b, loc, x, approx), elem);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct GeluGradLowering : OpConversionPattern<GeluGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(GeluGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    Type elem = type.getElementType();
    Type compute = getComputeType(elem);
    GeluApproximation approx = op.getApproximate();
    Value result = buildElementwise(
        rewriter, op.getLoc(), type, {adaptor.getInput(), adaptor.getGrad()},
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          Value x = convertFloat(b, loc, args[0], compute);
          Value dy = convertFloat(b, loc, args[1], compute);
          Value dx = arith::MulFOp::create(
              b, loc, dy, emitGeluDerivative(b, loc, x, approx));
          return convertFloat(b, loc, dx, elem);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Compare and select
//===----------------------------------------------------------------------===//

arith::CmpFPredicate floatPredicate(ComparePredicate p) {
  switch (p) {
  case ComparePredicate::eq:
    return arith::CmpFPredicate::OEQ;
  case ComparePredicate::ne:
    return arith::CmpFPredicate::UNE; // true when either side is NaN
  case ComparePredicate::lt:
    return arith::CmpFPredicate::OLT;
  case ComparePredicate::le:
    return arith::CmpFPredicate::OLE;
  case ComparePredicate::gt:
    return arith::CmpFPredicate::OGT;
  case ComparePredicate::ge:
    return arith::CmpFPredicate::OGE;
  }
  llvm_unreachable("unknown predicate");
}

arith::CmpIPredicate intPredicate(ComparePredicate p) {
  switch (p) {
  case ComparePredicate::eq:
    return arith::CmpIPredicate::eq;
  case ComparePredicate::ne:
    return arith::CmpIPredicate::ne;
  case ComparePredicate::lt:
    return arith::CmpIPredicate::slt;
  case ComparePredicate::le:
    return arith::CmpIPredicate::sle;
  case ComparePredicate::gt:
    return arith::CmpIPredicate::sgt;
  case ComparePredicate::ge:
    return arith::CmpIPredicate::sge;
  }
  llvm_unreachable("unknown predicate");
}

struct CompareLowering : OpConversionPattern<CompareOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CompareOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Type elem = getElementTypeOrSelf(adaptor.getLhs().getType());
    bool isFloat = isa<FloatType>(elem);
    if (!isFloat && !isa<IntegerType>(elem))
      return rewriter.notifyMatchFailure(op, "unsupported element type");
    ComparePredicate pred = op.getPredicate();
    Value result = buildElementwise(
        rewriter, op.getLoc(), op.getType(),
        {adaptor.getLhs(), adaptor.getRhs()},
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          if (isFloat)
            return arith::CmpFOp::create(b, loc, floatPredicate(pred), args[0],
                                         args[1]);
          return arith::CmpIOp::create(b, loc, intPredicate(pred), args[0],
                                       args[1]);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct SelectLowering : OpConversionPattern<SelectOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(SelectOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value result = buildElementwise(
        rewriter, op.getLoc(), op.getType(),
        {adaptor.getCond(), adaptor.getOnTrue(), adaptor.getOnFalse()},
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          return arith::SelectOp::create(b, loc, args[0], args[1], args[2]);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

/// Clamps finite values of `x` (a float of the source type) into the finite
/// range of `target`; NaN passes through unchanged, and so do infinities
/// when `target` has them (a target without, f8E4M3FN, gets +-max). Returns
/// `x` when the target's range covers the source's.
Value saturateTo(OpBuilder &b, Location loc, Value x, FloatType target) {
  auto source = cast<FloatType>(x.getType());
  APFloat max = APFloat::getLargest(target.getFloatSemantics());
  bool losesInfo = false;
  APFloat::opStatus status = max.convert(source.getFloatSemantics(),
                                         APFloat::rmTowardZero, &losesInfo);
  if (status & APFloat::opOverflow || max.isInfinity())
    return x;
  // A source that cannot hold the target's largest value (bf16 -> f16:
  // 65504 is not a bf16) would clamp to a smaller one: clamp in f32, which
  // holds both, and round once from there.
  if (losesInfo && source.getWidth() < 32)
    return saturateTo(b, loc, arith::ExtFOp::create(b, loc, b.getF32Type(), x),
                      target);
  Value maxV = arith::ConstantOp::create(b, loc, b.getFloatAttr(source, max));
  Value minV = arith::NegFOp::create(b, loc, maxV);
  Value absX = math::AbsFOp::create(b, loc, x);
  // Out of range and finite: |x| > max and |x| != inf (ordered, so NaN
  // fails both).
  Value over =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, absX, maxV);
  if (llvm::APFloat::semanticsHasInf(source.getFloatSemantics()) &&
      llvm::APFloat::semanticsHasInf(target.getFloatSemantics())) {
    Value inf = arith::ConstantOp::create(
        b, loc,
        b.getFloatAttr(source, APFloat::getInf(source.getFloatSemantics())));
    Value finite =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::ONE, absX, inf);
    over = arith::AndIOp::create(b, loc, over, finite);
  }
  Value positive = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x,
                                         createScalar(b, loc, source, 0.0));
  Value clamped = arith::SelectOp::create(b, loc, positive, maxV, minV);
  return arith::SelectOp::create(b, loc, over, clamped, x);
}

/// Converts one scalar; returns null for an unsupported pair of types.
Value castScalar(OpBuilder &b, Location loc, Value x, Type to, bool saturate) {
  Type from = x.getType();
  if (from == to)
    return x;
  auto fromF = dyn_cast<FloatType>(from), toF = dyn_cast<FloatType>(to);
  auto fromI = dyn_cast<IntegerType>(from), toI = dyn_cast<IntegerType>(to);
  if (fromF && toF) {
    // A target without infinities (f8E4M3FN) always saturates, as PyTorch's
    // .to() does; arith.truncf alone would give NaN for out-of-range values.
    if (!llvm::APFloat::semanticsHasInf(toF.getFloatSemantics()))
      saturate = true;
    if (saturate && toF.getWidth() <= fromF.getWidth())
      x = saturateTo(b, loc, x, toF);
    return convertFloat(b, loc, x, toF);
  }
  if (fromF && toI) {
    // Like PyTorch's .bool(): nonzero (NaN included) is true.
    if (toI.getWidth() == 1)
      return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, x,
                                   createScalar(b, loc, from, 0.0));
    return arith::FPToSIOp::create(b, loc, to, x);
  }
  if (fromI && toF) {
    if (fromI.getWidth() == 1)
      return arith::UIToFPOp::create(b, loc, to, x);
    return arith::SIToFPOp::create(b, loc, to, x);
  }
  if (fromI && toI) {
    if (toI.getWidth() == 1)
      return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, x,
                                   createScalar(b, loc, from, 0));
    if (fromI.getWidth() == 1)
      return arith::ExtUIOp::create(b, loc, to, x);
    if (fromI.getWidth() > toI.getWidth())
      return arith::TruncIOp::create(b, loc, to, x);
    return arith::ExtSIOp::create(b, loc, to, x);
  }
  return nullptr;
}

struct CastLowering : OpConversionPattern<CastOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CastOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    Type from = op.getInput().getType().getElementType();
    Type to = type.getElementType();
    if (from == to) {
      rewriter.replaceOp(op, adaptor.getInput());
      return success();
    }
    if (!isa<FloatType, IntegerType>(from) || !isa<FloatType, IntegerType>(to))
      return rewriter.notifyMatchFailure(op, "unsupported element types");
    bool saturate = op.getSaturate();
    Value result = buildElementwise(
        rewriter, op.getLoc(), type, {adaptor.getInput()},
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          return castScalar(b, loc, args[0], to, saturate);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Broadcast and causal mask
//===----------------------------------------------------------------------===//

struct BroadcastLowering : OpConversionPattern<BroadcastOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(BroadcastOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    ArrayRef<int64_t> in = op.getInput().getType().getShape();
    ArrayRef<int64_t> out = type.getShape();
    MLIRContext *ctx = rewriter.getContext();
    // Operand dimension i reads loop dimension dims[i], or 0 when repeated.
    SmallVector<AffineExpr> exprs;
    for (auto [i, d] : llvm::enumerate(op.getDims()))
      exprs.push_back(in[i] == 1 && out[d] != 1 ? getAffineConstantExpr(0, ctx)
                                                : getAffineDimExpr(d, ctx));
    AffineMap map = AffineMap::get(out.size(), 0, exprs, ctx);
    Value result = buildParallel(
        rewriter, op.getLoc(), type, {adaptor.getInput()}, {map},
        [](OpBuilder &, Location, ValueRange args) { return args[0]; });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct CausalMaskLowering : OpConversionPattern<CausalMaskOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CausalMaskOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    int64_t rank = type.getRank();
    int64_t t = type.getDimSize(rank - 2), s = type.getDimSize(rank - 1);
    double fill = op.getFill().convertToDouble();
    Value result = buildParallel(
        rewriter, op.getLoc(), type, {adaptor.getInput()},
        {rewriter.getMultiDimIdentityMap(rank)},
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          // Masked where j > i + (S - T).
          Value i = linalg::IndexOp::create(b, loc, rank - 2);
          Value j = linalg::IndexOp::create(b, loc, rank - 1);
          Value limit =
              arith::AddIOp::create(b, loc, i, createIndex(b, loc, s - t));
          Value masked = arith::CmpIOp::create(
              b, loc, arith::CmpIPredicate::sgt, j, limit);
          Value fillV = createScalar(b, loc, args[0].getType(), fill);
          return arith::SelectOp::create(b, loc, masked, fillV, args[0]);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// ds.stop_gradient is the identity once gradients exist.
struct StopGradientLowering : OpConversionPattern<StopGradientOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(StopGradientOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, adaptor.getInput());
    return success();
  }
};

} // namespace

void lowering::populateElementwisePatterns(RewritePatternSet &patterns) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<BinaryLowering<AddOp, arith::AddFOp, arith::AddIOp>,
               BinaryLowering<SubOp, arith::SubFOp, arith::SubIOp>,
               BinaryLowering<MulOp, arith::MulFOp, arith::MulIOp>,
               BinaryLowering<DivOp, arith::DivFOp, arith::DivSIOp>,
               BinaryLowering<MaximumOp, arith::MaximumFOp, arith::MaxSIOp>,
               BinaryLowering<MinimumOp, arith::MinimumFOp, arith::MinSIOp>>(
      ctx);
  patterns.add<UnaryLowering<ReluOp>>(ctx, emitRelu);
  patterns.add<UnaryLowering<SiluOp>>(ctx, emitSilu);
  patterns.add<UnaryLowering<SigmoidOp>>(ctx, emitSigmoid);
  patterns.add<UnaryLowering<TanhOp>>(ctx, emitMath<math::TanhOp>);
  patterns.add<UnaryLowering<ExpOp>>(ctx, emitMath<math::ExpOp>);
  patterns.add<UnaryLowering<LogOp>>(ctx, emitMath<math::LogOp>);
  patterns.add<UnaryLowering<SqrtOp>>(ctx, emitMath<math::SqrtOp>);
  patterns.add<UnaryLowering<RsqrtOp>>(ctx, emitMath<math::RsqrtOp>);
  patterns.add<UnaryLowering<NegOp>>(ctx, emitMath<arith::NegFOp>);
  patterns.add<UnaryLowering<AbsOp>>(ctx, emitMath<math::AbsFOp>);
  patterns.add<UnaryLowering<RoundOp>>(ctx, emitMath<math::RoundEvenOp>);
  patterns.add<StopGradientLowering>(ctx);
  patterns.add<GeluLowering, GeluGradLowering, CompareLowering, SelectLowering,
               CastLowering, BroadcastLowering, CausalMaskLowering>(ctx);
}
