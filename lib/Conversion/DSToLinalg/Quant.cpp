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
#include "mlir/Dialect/Linalg/IR/Linalg.h"
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

/// ds.quantize: the grid index of ds.fake_quant's forward, converted to the
/// integer result type (exact: it is an integer in [qmin, qmax]).
struct QuantizeLowering : OpConversionPattern<QuantizeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(QuantizeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    Type inputType = op.getInput().getType().getElementType();
    unsigned rank = type.getRank();
    AffineMap scaleMap =
        getScaleMap(rewriter.getContext(), rank, op.getAxis(), std::nullopt);
    AffineMap scalar = AffineMap::get(rank, 0, {}, rewriter.getContext());
    Value result = buildParallel(
        rewriter, op.getLoc(), type,
        {adaptor.getInput(), adaptor.getScale(), adaptor.getZeroPoint(),
         adaptor.getQmin(), adaptor.getQmax()},
        {rewriter.getMultiDimIdentityMap(rank), scaleMap, scaleMap, scalar,
         scalar},
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          QuantScalar q(b, loc, args, inputType, std::nullopt, false);
          return arith::FPToSIOp::create(b, loc, type.getElementType(),
                                         q.clamp(q.forwardIndex()));
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// ds.quantized_matmul: an i8 x i8 -> i32 linalg.matmul into a zero-filled
/// tensor (which convert-linalg-to-ds-runtime hands to the runtime's
/// integer GEMM), the rhs column and lhs row sums for the zero-point
/// corrections, and one elementwise generic that corrects and scales.
struct QuantizedMatMulLowering : OpConversionPattern<QuantizedMatMulOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(QuantizedMatMulOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    RankedTensorType resultType = op.getType();
    Value lhs = adaptor.getLhs(), rhs = adaptor.getRhs();
    ArrayRef<int64_t> lhsShape = op.getLhs().getType().getShape();
    int64_t k = lhsShape.back(), n = resultType.getShape().back();
    int64_t rows = 1;
    for (int64_t d : lhsShape.drop_back())
      rows *= d;
    bool tr = op.getTransposeRhs();
    Type i32 = rewriter.getI32Type();

    // acc[p, n] = sum_k lhs[p, k] * rhs[k, n], p over the flattened rows.
    Value lhs2 = reshapeTo(rewriter, loc, lhs, {rows, k});
    Value init = createZeros(rewriter, loc, {rows, n}, i32);
    auto mm = linalg::MatmulOp::create(rewriter, loc, TypeRange{init.getType()},
                                       ValueRange{lhs2, rhs}, ValueRange{init});
    if (tr) {
      AffineExpr m = getAffineDimExpr(0, ctx), nn = getAffineDimExpr(1, ctx),
                 kk = getAffineDimExpr(2, ctx);
      mm.setIndexingMapsAttr(
          rewriter.getAffineMapArrayAttr({AffineMap::get(3, 0, {m, kk}, ctx),
                                          AffineMap::get(3, 0, {nn, kk}, ctx),
                                          AffineMap::get(3, 0, {m, nn}, ctx)}));
    }
    Value acc = mm.getResult(0);

    // colsum[n] = sum_k rhs[k, n], over loops (n, k).
    AffineExpr dn = getAffineDimExpr(0, ctx), dk = getAffineDimExpr(1, ctx);
    AffineMap rhsMap = AffineMap::get(
        2, 0, tr ? ArrayRef<AffineExpr>{dn, dk} : ArrayRef<AffineExpr>{dk, dn},
        ctx);
    Value zero32 = createScalar(rewriter, loc, i32, 0.0);
    Value colsum =
        buildReduction(rewriter, loc, {n, k}, {1}, {rhs}, {rhsMap}, {zero32},
                       [&](OpBuilder &b, Location l, ValueRange args) {
                         Value w = arith::ExtSIOp::create(b, l, i32, args[0]);
                         return SmallVector<Value>{
                             arith::AddIOp::create(b, l, args[1], w)};
                       })
            .front();

    // rowsum[p] = sum_k lhs[p, k], over loops (p, k).
    Value rowsum =
        buildReduction(rewriter, loc, {rows, k}, {1}, {lhs2},
                       {rewriter.getMultiDimIdentityMap(2)}, {zero32},
                       [&](OpBuilder &b, Location l, ValueRange args) {
                         Value x = arith::ExtSIOp::create(b, l, i32, args[0]);
                         return SmallVector<Value>{
                             arith::AddIOp::create(b, l, args[1], x)};
                       })
            .front();

    // result = (acc - zx * colsum[n] - zw[n] * rowsum[p] + K * zx * zw[n])
    //          * (lhs_scale * rhs_scale[n]), the correction in i32, exact.
    Type elem = resultType.getElementType();
    Type f32 = rewriter.getF32Type();
    bool perChannel = op.getRhsScale().getType().getRank() == 1;
    AffineMap id = rewriter.getMultiDimIdentityMap(2);
    AffineMap row = AffineMap::get(2, 0, {getAffineDimExpr(0, ctx)}, ctx);
    AffineMap col = AffineMap::get(2, 0, {getAffineDimExpr(1, ctx)}, ctx);
    AffineMap none = AffineMap::get(2, 0, {}, ctx);
    AffineMap channel = perChannel ? col : none;
    auto flatType = RankedTensorType::get({rows, n}, elem);
    Value out = buildParallel(
        rewriter, loc, flatType,
        {acc, colsum, rowsum, adaptor.getLhsScale(), adaptor.getLhsZeroPoint(),
         adaptor.getRhsScale(), adaptor.getRhsZeroPoint()},
        {id, col, row, none, none, channel, channel},
        [&](OpBuilder &b, Location l, ValueRange args) -> Value {
          auto toInt = [&](Value v) -> Value {
            return arith::FPToSIOp::create(b, l, i32,
                                           convertFloat(b, l, v, f32));
          };
          auto mul = [&](Value x, Value y) -> Value {
            return arith::MulIOp::create(b, l, x, y);
          };
          Value zx = toInt(args[4]), zw = toInt(args[6]);
          Value kc = arith::ConstantOp::create(b, l, b.getI32IntegerAttr(k));
          Value corrected = arith::SubIOp::create(
              b, l, args[0],
              arith::AddIOp::create(b, l, mul(zx, args[1]), mul(zw, args[2])));
          corrected =
              arith::AddIOp::create(b, l, corrected, mul(kc, mul(zx, zw)));
          Value scale =
              arith::MulFOp::create(b, l, convertFloat(b, l, args[3], f32),
                                    convertFloat(b, l, args[5], f32));
          Value v = arith::MulFOp::create(
              b, l, arith::SIToFPOp::create(b, l, f32, corrected), scale);
          return convertFloat(b, l, v, elem);
        });
    rewriter.replaceOp(op,
                       reshapeTo(rewriter, loc, out, resultType.getShape()));
    return success();
  }
};

} // namespace

void lowering::populateQuantPatterns(RewritePatternSet &patterns) {
  patterns.add<FakeQuantLowering, FakeQuantGradLowering, QuantizeLowering,
               QuantizedMatMulLowering>(patterns.getContext());
}
