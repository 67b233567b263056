//===- Quant.cpp - Lower ds.fake_quant and its gradient -------------------===//
//
// One parallel linalg.generic over the input per op. The scale and zero
// point are read through a map from the input's loops: none (per tensor),
// the channel dimension, or the channel dimension divided by the group
// size (per group); qmin / qmax are rank-0. The scalar arithmetic is
// torch.ao's (see ds.fake_quant), written once here for the forward and
// for each gradient.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/Utils/ScalarBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::lowering;

namespace {

/// The map from the input's loop nest to `scale` / `zero_point`.
AffineMap getScaleMap(MLIRContext *ctx, unsigned rank,
                      std::optional<int64_t> axis,
                      std::optional<int64_t> groupSize) {
  if (!axis)
    return AffineMap::get(rank, 0, {}, ctx);
  if (!groupSize)
    return AffineMap::get(rank, 0, {getAffineDimExpr(*axis, ctx)}, ctx);
  SmallVector<AffineExpr> results;
  for (unsigned d = 0; d < rank; ++d) {
    AffineExpr e = getAffineDimExpr(d, ctx);
    results.push_back(d == *axis ? e.floorDiv(*groupSize) : e);
  }
  return AffineMap::get(rank, 0, results, ctx);
}

/// One element's quantization arithmetic, in the compute type: f32, or
/// f64 for f64 inputs.
class QuantScalar {
public:
  QuantScalar(OpBuilder &b, Location loc, ValueRange args, Type inputType,
              std::optional<Type> format, bool learned)
      : s(b, loc), format(format) {
    compute = getComputeType(inputType);
    x = s.convert(args[0], compute);
    // torch.ao: inv_scale = 1.0f / scale, in f32.
    Value scale32 = s.convert(args[1], b.getF32Type());
    inv = s.convert(s.div(s.floatOf(b.getF32Type(), 1.0), scale32), compute);
    scale = s.convert(args[1], compute);
    zp = s.convert(args[2], compute);
    qmin = s.convert(args[3], compute);
    qmax = s.convert(args[4], compute);
    // A learned zero point is a float: torch rounds and clamps it first.
    if (learned)
      zp = clamp(math::RoundEvenOp::create(b, loc, zp));
  }

  Value clamp(Value v) { return s.minf(s.maxf(v, qmin), qmax); }
  Value round(Value v) { return math::RoundEvenOp::create(s.b, s.loc, v); }
  /// The forward's grid index: zero_point + nearbyint(x * inv).
  Value forwardIndex() { return s.add(zp, round(s.mul(x, inv))); }
  /// The learnable kernels' backward index: nearbyint(x * inv + zp).
  Value backwardIndex() { return round(s.add(s.mul(x, inv), zp)); }
  Value inRange(Value q) {
    return s.andi(s.cmpf(arith::CmpFPredicate::OGE, q, qmin),
                  s.cmpf(arith::CmpFPredicate::OLE, q, qmax));
  }

  Value forward() {
    if (format) {
      // Through f32: the FP8 emulation rounds from f32 exactly.
      Value v = s.convert(clamp(s.mul(x, inv)), s.b.getF32Type());
      Value q = arith::TruncFOp::create(s.b, s.loc, *format, v);
      return s.mul(s.convert(q, compute), scale);
    }
    return s.mul(s.sub(clamp(forwardIndex()), zp), scale);
  }

  /// Where the straight-through estimator passes the gradient.
  Value passes(bool learned) {
    if (format)
      return inRange(s.mul(x, inv));
    return inRange(learned ? backwardIndex() : forwardIndex());
  }

  ScalarBuilder s;
  std::optional<Type> format;
  Type compute;
  Value x, inv, scale, zp, qmin, qmax;
};

/// The operands every fake-quant op reads, in the order QuantScalar takes.
template <typename OpTy>
SmallVector<Value> quantOperands(typename OpTy::Adaptor adaptor) {
  return {adaptor.getInput(), adaptor.getScale(), adaptor.getZeroPoint(),
          adaptor.getQmin(), adaptor.getQmax()};
}

template <typename OpTy>
SmallVector<AffineMap> quantMaps(OpBuilder &b, OpTy op) {
  unsigned rank = op.getInput().getType().getRank();
  AffineMap scaleMap =
      getScaleMap(b.getContext(), rank, op.getAxis(), op.getGroupSize());
  AffineMap scalar = AffineMap::get(rank, 0, {}, b.getContext());
  return {b.getMultiDimIdentityMap(rank), scaleMap, scaleMap, scalar, scalar};
}

struct FakeQuantLowering : OpConversionPattern<FakeQuantOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(FakeQuantOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    std::optional<Type> format = op.getFormat();
    bool learned = op.getLearned();
    Value result = buildParallel(
        rewriter, op.getLoc(), type, quantOperands<decltype(op)>(adaptor),
        quantMaps(rewriter, op),
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          QuantScalar q(b, loc, args, type.getElementType(), format, learned);
          return q.s.convert(q.forward(), type.getElementType());
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct FakeQuantGradLowering : OpConversionPattern<FakeQuantGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(FakeQuantGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    std::optional<Type> format = op.getFormat();
    bool learned = op.getLearned();
    FakeQuantGradOf of = op.getOf();
    SmallVector<Value> inputs = quantOperands<decltype(op)>(adaptor);
    inputs.push_back(adaptor.getGrad());
    SmallVector<AffineMap> maps = quantMaps(rewriter, op);
    maps.push_back(maps.front());
    Value result = buildParallel(
        rewriter, op.getLoc(), type, inputs, maps,
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          QuantScalar q(b, loc, args.take_front(5), type.getElementType(),
                        format, learned);
          ScalarBuilder &s = q.s;
          Value dy = s.convert(args[5], q.compute);
          Value zero = s.floatOf(q.compute, 0.0);
          Value g;
          switch (of) {
          case FakeQuantGradOf::input:
            // dy * mask, as torch (so a negative dy masked out gives -0).
            g = s.mul(dy, s.select(q.passes(learned), s.floatOf(q.compute, 1.0),
                                   zero));
            break;
          case FakeQuantGradOf::scale: {
            // Inside: ((q - zp) * scale - x) / scale; below: qmin - zp;
            // above: qmax - zp (torch's learnable kernels).
            Value idx = q.backwardIndex();
            Value inside =
                s.div(s.sub(s.mul(s.sub(idx, q.zp), q.scale), q.x), q.scale);
            Value below = s.sub(q.qmin, q.zp), above = s.sub(q.qmax, q.zp);
            Value d = s.select(
                s.cmpf(arith::CmpFPredicate::OLT, idx, q.qmin), below,
                s.select(s.cmpf(arith::CmpFPredicate::OGT, idx, q.qmax), above,
                         inside));
            g = s.mul(dy, d);
            break;
          }
          case FakeQuantGradOf::zero_point: {
            Value negScale = arith::NegFOp::create(b, loc, q.scale);
            g = s.select(q.inRange(q.backwardIndex()), zero,
                         s.mul(dy, negScale));
            break;
          }
          }
          return s.convert(g, type.getElementType());
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

void lowering::populateQuantPatterns(RewritePatternSet &patterns) {
  patterns.add<FakeQuantLowering, FakeQuantGradLowering>(patterns.getContext());
}
