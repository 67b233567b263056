//===- ThreeTierOnDevice.cpp - The three-tier encoder in the step ---------===//
//
// The runtime's encoder (lib/Runtime/CommCompress.cpp, encodeThreeTier) as
// linalg on tensors, which ds-gpu-pipeline makes kernels: the same f32
// operations in the same order, so the codes decode to the host encoder's
// values and the residual is its residual, bit for bit where the device
// rounds as the host does (the emulated runs compare them). Also the
// pieces the top-k encoder shares (DeviceEncoders.h).
//
//===----------------------------------------------------------------------===//

#include "DeviceEncoders.h"

#include "../DSToLinalg/LoweringUtils.h"

#include "ds/Runtime/ds_runtime.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::lowering;

std::optional<ThreeTierParams> ds::constantThreeTierParams(Value params) {
  DenseElementsAttr attr;
  if (!params || !matchPattern(params, m_Constant(&attr)) ||
      attr.getNumElements() != 3 || !attr.getElementType().isF64())
    return std::nullopt;
  SmallVector<double> p;
  for (const APFloat &x : attr.getValues<APFloat>())
    p.push_back(x.convertToDouble());
  // What dsrt::comm::checkScheme accepts.
  if (p[0] == 0 && p[1] >= 0 && p[1] <= 1 && p[2] >= 0 && p[2] <= 1)
    return ThreeTierParams{false, p[1], p[2]};
  if (p[0] == 1 && p[1] >= 0 && p[2] >= 0 && std::isfinite(p[1]) &&
      std::isfinite(p[2]))
    return ThreeTierParams{true, p[1], p[2]};
  return std::nullopt;
}

namespace {

Value f32Constant(OpBuilder &b, Location loc, float value) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
}

Value i32Constant(OpBuilder &b, Location loc, int32_t value) {
  return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(value));
}

/// A rank-0 f32 tensor holding `value`.
Value scalarTensor(OpBuilder &b, Location loc, float value) {
  return createFilled(b, loc, {}, f32Constant(b, loc, value));
}

} // namespace

std::pair<Value, Value> ds::buildFeedbackSum(OpBuilder &b, Location loc,
                                             Value grad, Value residual) {
  auto type = cast<RankedTensorType>(grad.getType());
  AffineMap id = AffineMap::getMultiDimIdentityMap(1, b.getContext());
  Value v =
      buildParallel(b, loc, type, {grad, residual}, {id, id},
                    [](OpBuilder &nb, Location l, ValueRange args) {
                      return arith::AddFOp::create(nb, l, args[0], args[1]);
                    });
  Value probe =
      buildReduction(
          b, loc, {type.getNumElements()}, {0}, v, id, f32Constant(b, loc, 0),
          [](OpBuilder &nb, Location l, ValueRange args) {
            Value diff = arith::SubFOp::create(nb, l, args[0], args[0]);
            return SmallVector<Value>{addReassoc(nb, l, args[1], diff)};
          })
          .front();
  return {v, probe};
}

Value ds::buildLowerQuantile(OpBuilder &b, Location loc, Value a, double q) {
  int64_t n = cast<RankedTensorType>(a.getType()).getNumElements();
  // The k-th smallest is the (n - k)-th largest.
  int64_t k = static_cast<int64_t>(std::floor(double(n - 1) * q));
  k = std::clamp<int64_t>(k, 0, n - 1);
  Value rank = arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                             b.getI64IntegerAttr(n - k).getValue()));
  return buildKthLargest(b, loc, a, rank);
}

namespace {

/// The smallest power of two >= x (x >= 0, finite): 1 for 0, at most
/// 2^127 (the host's powerOfTwoAtLeast, without frexp: a subnormal is
/// scaled by 2^64 first, exactly, and its result back).
Value powerOfTwoAtLeast(OpBuilder &b, Location loc, Value x) {
  using P = arith::CmpIPredicate;
  Type i32 = b.getI32Type();
  Value bits = arith::BitcastOp::create(b, loc, i32, x);
  Value exponent =
      arith::ShRUIOp::create(b, loc, bits, i32Constant(b, loc, 23));
  Value subnormal =
      arith::CmpIOp::create(b, loc, P::eq, exponent, i32Constant(b, loc, 0));
  Value y = arith::SelectOp::create(
      b, loc, subnormal,
      arith::MulFOp::create(b, loc, x, f32Constant(b, loc, 0x1p64f)), x);
  Value yBits = arith::BitcastOp::create(b, loc, i32, y);
  Value mantissa =
      arith::AndIOp::create(b, loc, yBits, i32Constant(b, loc, 0x7fffff));
  Value next = arith::ShLIOp::create(
      b, loc,
      arith::AddIOp::create(
          b, loc,
          arith::ShRUIOp::create(b, loc, yBits, i32Constant(b, loc, 23)),
          i32Constant(b, loc, 1)),
      i32Constant(b, loc, 23));
  Value exact =
      arith::CmpIOp::create(b, loc, P::eq, mantissa, i32Constant(b, loc, 0));
  Value up = arith::SelectOp::create(
      b, loc, exact, y, arith::BitcastOp::create(b, loc, b.getF32Type(), next));
  up = arith::SelectOp::create(
      b, loc, subnormal,
      arith::MulFOp::create(b, loc, up, f32Constant(b, loc, 0x1p-64f)), up);
  using F = arith::CmpFPredicate;
  Value positive =
      arith::CmpFOp::create(b, loc, F::OGT, x, f32Constant(b, loc, 0));
  Value huge =
      arith::CmpFOp::create(b, loc, F::OGE, x, f32Constant(b, loc, 0x1p127f));
  up = arith::SelectOp::create(b, loc, huge, f32Constant(b, loc, 0x1p127f), up);
  return arith::SelectOp::create(b, loc, positive, up,
                                 f32Constant(b, loc, 1.0f));
}

} // namespace

DeviceThreeTier ds::buildThreeTierOnDevice(OpBuilder &b, Location loc,
                                           Value grad, Value residual,
                                           const ThreeTierParams &params) {
  auto type = cast<RankedTensorType>(grad.getType());
  int64_t n = type.getNumElements();
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type(), i16 = b.getIntegerType(16);
  AffineMap id = AffineMap::getMultiDimIdentityMap(1, ctx);
  AffineMap scalar = AffineMap::get(1, 0, {}, ctx);
  auto element = [&](int64_t i) {
    return AffineMap::get(1, 0, getAffineConstantExpr(i, ctx));
  };

  // v = g + r, its probe (NaN exactly when an element is not finite), |v|.
  auto [v, probe] = buildFeedbackSum(b, loc, grad, residual);
  Value a = buildParallel(b, loc, type, {v}, {id},
                          [](OpBuilder &nb, Location l, ValueRange args) {
                            return math::AbsFOp::create(nb, l, args[0]);
                          });

  // The thresholds, fixed or the quantiles of |v| (of a non-finite bucket
  // too: its codes are then all "none", whatever they are).
  Value low, high;
  if (params.fixed) {
    low = scalarTensor(b, loc, static_cast<float>(params.low));
    high = scalarTensor(b, loc, static_cast<float>(params.high));
  } else {
    low = buildLowerQuantile(b, loc, a, params.low);
    high = params.high == params.low
               ? low
               : buildLowerQuantile(b, loc, a, params.high);
  }

  // The 8-bit tier's largest magnitude (0 when the tier is empty).
  Value maxHigh =
      buildReduction(
          b, loc, {n}, {0}, ValueRange{a, high}, {id, scalar},
          f32Constant(b, loc, 0),
          [](OpBuilder &nb, Location l, ValueRange args) {
            Value in = arith::CmpFOp::create(nb, l, arith::CmpFPredicate::OGT,
                                             args[0], args[1]);
            Value x = arith::SelectOp::create(
                nb, l, in, args[0],
                arith::ConstantOp::create(nb, l, nb.getF32FloatAttr(0)));
            return SmallVector<Value>{
                arith::MaximumFOp::create(nb, l, args[2], x)};
          })
          .front();

  // [s8, t16, probe]: what the host writes into the payload's header.
  Value scalars = buildParallel(
      b, loc, RankedTensorType::get({3}, f32), ValueRange{maxHigh, high, probe},
      {scalar, scalar, scalar},
      [](OpBuilder &nb, Location l, ValueRange args) -> Value {
        Value s8 = arith::DivFOp::create(
            nb, l, args[0],
            arith::ConstantOp::create(nb, l, nb.getF32FloatAttr(127.0f)));
        Value t16 = powerOfTwoAtLeast(nb, l, args[1]);
        Value i = arith::IndexCastOp::create(nb, l, nb.getI64Type(),
                                             linalg::IndexOp::create(nb, l, 0));
        auto is = [&](int64_t at) {
          return arith::CmpIOp::create(
              nb, l, arith::CmpIPredicate::eq, i,
              arith::ConstantOp::create(nb, l, nb.getI64IntegerAttr(at)));
        };
        return arith::SelectOp::create(
            nb, l, is(0), s8,
            arith::SelectOp::create(nb, l, is(1), t16, args[2]));
      });

  // Each element's code and its new residual: v minus what it decodes to,
  // or the old residual when the bucket is not finite (nothing is sent).
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{RankedTensorType::get({n}, i16), type},
      ValueRange{v, residual, low, high, scalars, scalars, scalars},
      ValueRange{createEmpty(b, loc, {n}, i16), createEmpty(b, loc, {n}, f32)},
      ArrayRef<AffineMap>{id, id, scalar, scalar, element(0), element(1),
                          element(2), id, id},
      ArrayRef<utils::IteratorType>{utils::IteratorType::parallel},
      [&](OpBuilder &nb, Location l, ValueRange args) {
        using F = arith::CmpFPredicate;
        Value x = args[0], r = args[1], lo = args[2], hi = args[3];
        Value s8 = args[4], t16 = args[5], p = args[6];
        Value mag = math::AbsFOp::create(nb, l, x);
        Value finite = arith::CmpFOp::create(nb, l, F::ORD, p, p);
        Value isHigh = arith::CmpFOp::create(nb, l, F::OGT, mag, hi);
        Value isMid = arith::CmpFOp::create(nb, l, F::OGT, mag, lo);
        // 8 bits: clamp(rint(v / s8), -127, 127), 0x7800 | its byte.
        Value q = math::RoundEvenOp::create(
            nb, l, arith::DivFOp::create(nb, l, x, s8));
        q = arith::MaxNumFOp::create(nb, l, q, f32Constant(nb, l, -127.0f));
        q = arith::MinNumFOp::create(nb, l, q, f32Constant(nb, l, 127.0f));
        Value qi = arith::FPToSIOp::create(nb, l, nb.getI32Type(), q);
        Value code8 = arith::TruncIOp::create(
            nb, l, i16,
            arith::OrIOp::create(
                nb, l, i32Constant(nb, l, DSRT_THREE_TIER_CODE_HIGH),
                arith::AndIOp::create(nb, l, qi, i32Constant(nb, l, 0xff))));
        Value dec8 = arith::MulFOp::create(
            nb, l, arith::SIToFPOp::create(nb, l, nb.getF32Type(), qi), s8);
        // 16 bits: f16(v / t16).
        Value h = arith::TruncFOp::create(nb, l, nb.getF16Type(),
                                          arith::DivFOp::create(nb, l, x, t16));
        Value code16 = arith::BitcastOp::create(nb, l, i16, h);
        Value dec16 = arith::MulFOp::create(
            nb, l, arith::ExtFOp::create(nb, l, nb.getF32Type(), h), t16);
        Value noneCode = arith::ConstantOp::create(
            nb, l, nb.getIntegerAttr(i16, DSRT_THREE_TIER_CODE_NONE));
        Value code = arith::SelectOp::create(
            nb, l, isHigh, code8,
            arith::SelectOp::create(nb, l, isMid, code16, noneCode));
        code = arith::SelectOp::create(nb, l, finite, code, noneCode);
        Value dec = arith::SelectOp::create(
            nb, l, isHigh, dec8,
            arith::SelectOp::create(nb, l, isMid, dec16,
                                    f32Constant(nb, l, 0.0f)));
        Value next = arith::SelectOp::create(
            nb, l, finite, arith::SubFOp::create(nb, l, x, dec), r);
        linalg::YieldOp::create(nb, l, ValueRange{code, next});
      });
  return {generic.getResult(0), scalars, generic.getResult(1)};
}
