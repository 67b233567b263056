//===- NN.cpp - Lower pooling, embedding and dropout ----------------------===//
//
// The forward layers of the ds dialect (conv2d is in Conv.cpp):
//
// - max_pool2d / avg_pool2d: `tensor.pad` with -inf / 0, then
//   `linalg.pooling_nchw_max` / `pooling_nchw_sum` (the average divides by
//   the full window, PyTorch's count_include_pad).
// - embedding: a parallel `linalg.generic` over the output that gathers
//   with `tensor.extract` at the clamped index.
// - dropout, random_normal: Philox4x32-10 evaluated inline per element
//   (integer arith on i32 words, 32x32->64 multiplies in i64; Box-Muller in
//   f64 for random_normal). The round keys depend only on the key, so they
//   are computed once outside the loop nest.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <array>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::lowering;

namespace {

//===----------------------------------------------------------------------===//
// max_pool2d, avg_pool2d
//===----------------------------------------------------------------------===//

template <typename OpTy, bool IsMax>
struct Pool2DLowering : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto outType = cast<RankedTensorType>(op.getType());
    Type elem = outType.getElementType();
    ArrayRef<int64_t> kernel = op.getKernel();
    ArrayRef<int64_t> pad = op.getPadding();
    SmallVector<int64_t> strides = op.getStridesOrKernel();
    if (!isa<FloatType>(elem))
      return rewriter.notifyMatchFailure(op, "expects float tensors");
    if (kernel.size() != 2 || pad.size() != 2 || strides.size() != 2)
      return rewriter.notifyMatchFailure(op, "expects 2-element attributes");

    Value padValue = IsMax ? createNegInf(rewriter, loc, elem)
                           : createScalar(rewriter, loc, elem, 0.0);
    Value x = padWith(rewriter, loc, adaptor.getInput(), {0, 0, pad[0], pad[1]},
                      {0, 0, pad[0], pad[1]}, padValue);
    Value init = createFilled(rewriter, loc, outType.getShape(), padValue);
    Value window = createEmpty(rewriter, loc, kernel, elem);
    DenseIntElementsAttr s = getPairAttr(rewriter, strides);
    DenseIntElementsAttr d = getPairAttr(rewriter, {1, 1});
    Value result;
    if (IsMax) {
      result = linalg::PoolingNchwMaxOp::create(
                   rewriter, loc, TypeRange{outType}, ValueRange{x, window},
                   ValueRange{init}, s, d)
                   .getResult(0);
    } else {
      Value sum = linalg::PoolingNchwSumOp::create(
                      rewriter, loc, TypeRange{outType}, ValueRange{x, window},
                      ValueRange{init}, s, d)
                      .getResult(0);
      double count = static_cast<double>(kernel[0] * kernel[1]);
      result =
          buildElementwise(rewriter, loc, outType, {sum},
                           [&](OpBuilder &b, Location l, ValueRange a) {
                             return arith::DivFOp::create(
                                 b, l, a[0], createScalar(b, l, elem, count));
                           });
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// embedding
//===----------------------------------------------------------------------===//

struct EmbeddingLowering : OpConversionPattern<EmbeddingOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(EmbeddingOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto outType = cast<RankedTensorType>(op.getType());
    Value table = adaptor.getTable();
    int64_t vocab = cast<RankedTensorType>(table.getType()).getDimSize(0);
    if (vocab < 1)
      return rewriter.notifyMatchFailure(op, "empty table");
    int64_t rank = outType.getRank();
    MLIRContext *ctx = rewriter.getContext();
    // The indices are read over the leading loops, the column is the last.
    AffineMap idxMap =
        AffineMap::getMultiDimIdentityMap(rank, ctx).getMajorSubMap(rank - 1);
    Value result = buildParallel(
        rewriter, op.getLoc(), outType, {adaptor.getIndices()}, {idxMap},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value row = clampIndex(b, l, a[0], vocab);
          Value col = linalg::IndexOp::create(b, l, rank - 1);
          return tensor::ExtractOp::create(b, l, table, ValueRange{row, col});
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// dropout (Philox4x32-10)
//===----------------------------------------------------------------------===//

constexpr uint32_t kPhiloxM0 = 0xD2511F53, kPhiloxM1 = 0xCD9E8D57;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9, kPhiloxW1 = 0xBB67AE85;
constexpr int kPhiloxRounds = 10;

Value i32Const(OpBuilder &b, Location loc, uint32_t v) {
  return arith::ConstantOp::create(
      b, loc, b.getIntegerAttr(b.getI32Type(), static_cast<int32_t>(v)));
}

/// The high and low 32-bit words of `m * x` (both u32), via an i64 product.
std::pair<Value, Value> mulHiLo(OpBuilder &b, Location loc, uint32_t m,
                                Value x) {
  Value x64 = arith::ExtUIOp::create(b, loc, b.getI64Type(), x);
  Value p = arith::MulIOp::create(b, loc, x64,
                                  createI64(b, loc, static_cast<int64_t>(m)));
  Value hi = arith::TruncIOp::create(
      b, loc, b.getI32Type(),
      arith::ShRUIOp::create(b, loc, p, createI64(b, loc, 32)));
  Value lo = arith::TruncIOp::create(b, loc, b.getI32Type(), p);
  return {hi, lo};
}

/// The key and counter of a `tensor<2xi64>` RNG state and the ten Philox
/// round keys (k0 + r W0, k1 + r W1), which depend only on the key and are
/// computed once outside the loop nest.
struct PhiloxKeys {
  Value key, counter;
  SmallVector<std::pair<Value, Value>> roundKeys;
};

PhiloxKeys philoxKeys(OpBuilder &b, Location loc, Value rng) {
  PhiloxKeys k;
  k.key = tensor::ExtractOp::create(b, loc, rng,
                                    ValueRange{createIndex(b, loc, 0)});
  k.counter = tensor::ExtractOp::create(b, loc, rng,
                                        ValueRange{createIndex(b, loc, 1)});
  Type i32 = b.getI32Type();
  Value k0 = arith::TruncIOp::create(b, loc, i32, k.key);
  Value k1 = arith::TruncIOp::create(
      b, loc, i32,
      arith::ShRUIOp::create(b, loc, k.key, createI64(b, loc, 32)));
  for (int r = 0; r < kPhiloxRounds; ++r) {
    k.roundKeys.push_back({k0, k1});
    k0 = arith::AddIOp::create(b, loc, k0, i32Const(b, loc, kPhiloxW0));
    k1 = arith::AddIOp::create(b, loc, k1, i32Const(b, loc, kPhiloxW1));
  }
  return k;
}

/// Inside a linalg body over `shape`: the four output words of the Philox
/// block of counter {lo32(c), hi32(c), 0, 0}, c = counter + the row-major
/// linear index of the element.
std::array<Value, 4> philoxWords(OpBuilder &b, Location l, const PhiloxKeys &k,
                                 ArrayRef<int64_t> shape) {
  Value linear = createIndex(b, l, 0);
  for (int64_t d = 0, e = shape.size(); d < e; ++d) {
    linear = arith::MulIOp::create(b, l, linear, createIndex(b, l, shape[d]));
    linear =
        arith::AddIOp::create(b, l, linear, linalg::IndexOp::create(b, l, d));
  }
  Value c = arith::AddIOp::create(
      b, l, k.counter,
      arith::IndexCastOp::create(b, l, b.getI64Type(), linear));
  Value c0 = arith::TruncIOp::create(b, l, b.getI32Type(), c);
  Value c1 = arith::TruncIOp::create(
      b, l, b.getI32Type(),
      arith::ShRUIOp::create(b, l, c, createI64(b, l, 32)));
  Value c2 = i32Const(b, l, 0), c3 = i32Const(b, l, 0);
  for (auto [ka, kb] : k.roundKeys) {
    auto [hi0, lo0] = mulHiLo(b, l, kPhiloxM0, c0);
    auto [hi1, lo1] = mulHiLo(b, l, kPhiloxM1, c2);
    Value n0 =
        arith::XOrIOp::create(b, l, arith::XOrIOp::create(b, l, hi1, c1), ka);
    Value n2 =
        arith::XOrIOp::create(b, l, arith::XOrIOp::create(b, l, hi0, c3), kb);
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  return {c0, c1, c2, c3};
}

/// `[key, counter + n]`: the state after drawing n blocks.
Value advanceRng(OpBuilder &b, Location loc, const PhiloxKeys &k,
                 RankedTensorType type, int64_t n) {
  Value newCounter =
      arith::AddIOp::create(b, loc, k.counter, createI64(b, loc, n));
  return tensor::FromElementsOp::create(b, loc, type,
                                        ValueRange{k.key, newCounter});
}

struct DropoutLowering : OpConversionPattern<DropoutOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(DropoutOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType type = op.getResult().getType();
    Type elem = type.getElementType();
    ArrayRef<int64_t> shape = type.getShape();
    int64_t rank = type.getRank();
    double p = op.getP().convertToDouble();
    if (!isa<FloatType>(elem))
      return rewriter.notifyMatchFailure(op, "expects a float tensor");
    PhiloxKeys keys = philoxKeys(rewriter, loc, adaptor.getRng());
    Value result = buildParallel(
        rewriter, loc, type, {adaptor.getInput()},
        {rewriter.getMultiDimIdentityMap(rank)},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value w = philoxWords(b, l, keys, shape)[0];
          // keep iff w * 2^-32 >= p, evaluated exactly in f64.
          Value u = arith::MulFOp::create(
              b, l, arith::UIToFPOp::create(b, l, b.getF64Type(), w),
              createScalar(b, l, b.getF64Type(), 0x1p-32));
          Value keep =
              arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGE, u,
                                    createScalar(b, l, b.getF64Type(), p));
          Value scaled = arith::DivFOp::create(
              b, l, a[0], createScalar(b, l, elem, 1.0 - p));
          return arith::SelectOp::create(b, l, keep, scaled,
                                         createScalar(b, l, elem, 0.0));
        });
    rewriter.replaceOp(
        op, {result, advanceRng(rewriter, loc, keys, op.getNewRng().getType(),
                                type.getNumElements())});
    return success();
  }
};

/// ds.random_normal: Box-Muller (cosine branch) over the first two Philox
/// words of each element, in f64.
struct RandomNormalLowering : OpConversionPattern<RandomNormalOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(RandomNormalOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType type = op.getResult().getType();
    Type elem = type.getElementType();
    ArrayRef<int64_t> shape = type.getShape();
    double std = op.getStd().convertToDouble();
    PhiloxKeys keys = philoxKeys(rewriter, loc, adaptor.getRng());
    Value result = buildParallel(
        rewriter, loc, type, {}, {},
        [&](OpBuilder &b, Location l, ValueRange) -> Value {
          std::array<Value, 4> w = philoxWords(b, l, keys, shape);
          Type f64 = b.getF64Type();
          Value scale = createScalar(b, l, f64, 0x1p-32);
          Value u1 = arith::MulFOp::create(
              b, l,
              arith::AddFOp::create(b, l,
                                    arith::UIToFPOp::create(b, l, f64, w[0]),
                                    createScalar(b, l, f64, 0.5)),
              scale);
          Value u2 = arith::MulFOp::create(
              b, l, arith::UIToFPOp::create(b, l, f64, w[1]), scale);
          Value radius = math::SqrtOp::create(
              b, l,
              arith::MulFOp::create(b, l, createScalar(b, l, f64, -2.0),
                                    math::LogOp::create(b, l, u1)));
          Value angle = math::CosOp::create(
              b, l,
              arith::MulFOp::create(
                  b, l, createScalar(b, l, f64, 2.0 * 3.14159265358979323846),
                  u2));
          Value z =
              arith::MulFOp::create(b, l, createScalar(b, l, f64, std),
                                    arith::MulFOp::create(b, l, radius, angle));
          if (elem != f64)
            z = arith::TruncFOp::create(b, l, elem, z);
          return z;
        });
    rewriter.replaceOp(
        op, {result, advanceRng(rewriter, loc, keys, op.getNewRng().getType(),
                                type.getNumElements())});
    return success();
  }
};

} // namespace

void lowering::populateNNPatterns(RewritePatternSet &patterns) {
  patterns.add<Pool2DLowering<MaxPool2DOp, true>,
               Pool2DLowering<AvgPool2DOp, false>, EmbeddingLowering,
               DropoutLowering, RandomNormalLowering>(patterns.getContext());
}
