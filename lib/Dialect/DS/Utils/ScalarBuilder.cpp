//===- ScalarBuilder.cpp - Scalar arithmetic for ds passes ----------------===//
//
// Implements ScalarBuilder.h.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/Utils/ScalarBuilder.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <limits>

using namespace mlir;
using namespace mlir::ds;

Value ScalarBuilder::constant(TypedAttr attr) {
  APInt bits;
  if (auto f = dyn_cast<FloatAttr>(attr))
    bits = f.getValue().bitcastToAPInt();
  else
    bits = cast<IntegerAttr>(attr).getValue();
  Block *block = b.getInsertionBlock();
  if (!block || bits.getBitWidth() > 64)
    return arith::ConstantOp::create(b, loc, attr);
  std::pair<Type, uint64_t> key(attr.getType(), bits.getZExtValue());
  // Reuse only what dominates the new use: the constant is in the block
  // being built and before the insertion point (the builder may have moved
  // back up the block, or into another one, since it was created).
  if (Value cached = constants.lookup(key)) {
    Operation *def = cached.getDefiningOp();
    Block::iterator ip = b.getInsertionPoint();
    if (def->getBlock() == block &&
        (ip == block->end() || def->isBeforeInBlock(&*ip)))
      return cached;
  }
  Value created = arith::ConstantOp::create(b, loc, attr);
  constants[key] = created;
  return created;
}

Value ScalarBuilder::f64(double v) { return constant(b.getF64FloatAttr(v)); }
Value ScalarBuilder::floatOf(Type type, double v) {
  return constant(b.getFloatAttr(type, v));
}
Value ScalarBuilder::i32(int32_t v) { return constant(b.getI32IntegerAttr(v)); }
Value ScalarBuilder::i64(int64_t v) { return constant(b.getI64IntegerAttr(v)); }
Value ScalarBuilder::add(Value x, Value y) {
  if (isa<FloatType>(x.getType()))
    return arith::AddFOp::create(b, loc, x, y);
  return arith::AddIOp::create(b, loc, x, y);
}
Value ScalarBuilder::sub(Value x, Value y) {
  if (isa<FloatType>(x.getType()))
    return arith::SubFOp::create(b, loc, x, y);
  return arith::SubIOp::create(b, loc, x, y);
}
Value ScalarBuilder::mul(Value x, Value y) {
  if (isa<FloatType>(x.getType()))
    return arith::MulFOp::create(b, loc, x, y);
  return arith::MulIOp::create(b, loc, x, y);
}
Value ScalarBuilder::div(Value x, Value y) {
  return arith::DivFOp::create(b, loc, x, y);
}
Value ScalarBuilder::minf(Value x, Value y) {
  return arith::MinimumFOp::create(b, loc, x, y);
}
Value ScalarBuilder::maxf(Value x, Value y) {
  return arith::MaximumFOp::create(b, loc, x, y);
}
Value ScalarBuilder::pow(Value x, Value y) {
  return math::PowFOp::create(b, loc, x, y);
}
Value ScalarBuilder::sqrt(Value x) { return math::SqrtOp::create(b, loc, x); }
Value ScalarBuilder::cos(Value x) { return math::CosOp::create(b, loc, x); }
Value ScalarBuilder::cmpf(arith::CmpFPredicate p, Value x, Value y) {
  return arith::CmpFOp::create(b, loc, p, x, y);
}
Value ScalarBuilder::cmpi(arith::CmpIPredicate p, Value x, Value y) {
  return arith::CmpIOp::create(b, loc, p, x, y);
}
Value ScalarBuilder::select(Value c, Value x, Value y) {
  return arith::SelectOp::create(b, loc, c, x, y);
}
Value ScalarBuilder::andi(Value x, Value y) {
  return arith::AndIOp::create(b, loc, x, y);
}
Value ScalarBuilder::ori(Value x, Value y) {
  return arith::OrIOp::create(b, loc, x, y);
}
Value ScalarBuilder::noti(Value x) {
  Value t = constant(b.getBoolAttr(true));
  return arith::XOrIOp::create(b, loc, x, t);
}
Value ScalarBuilder::isFinite(Value x) {
  // |x| < inf is false for inf and (ordered compare) for NaN.
  Value a = math::AbsFOp::create(b, loc, x);
  Value inf = constant(
      b.getFloatAttr(x.getType(), std::numeric_limits<double>::infinity()));
  return cmpf(arith::CmpFPredicate::OLT, a, inf);
}
Value ScalarBuilder::extractRaw(Value t) {
  return tensor::ExtractOp::create(b, loc, t, ValueRange{});
}
Value ScalarBuilder::extract(Value t) {
  Value x = extractRaw(t);
  if (isa<FloatType>(x.getType()))
    return convert(x, b.getF64Type());
  return x;
}
Value ScalarBuilder::convert(Value x, Type type) {
  auto from = cast<FloatType>(x.getType());
  auto to = cast<FloatType>(type);
  if (from == to)
    return x;
  if (from.getWidth() < to.getWidth())
    return arith::ExtFOp::create(b, loc, to, x);
  if (from.getWidth() > to.getWidth())
    return arith::TruncFOp::create(b, loc, to, x);
  // One width, two formats (f16 <-> bf16): f32 holds both exactly, and a
  // truncf between types of one width is invalid.
  Value wide = arith::ExtFOp::create(b, loc, b.getF32Type(), x);
  return arith::TruncFOp::create(b, loc, to, wide);
}
Value ScalarBuilder::tensor(Value x, Type elementType) {
  if (x.getType() != elementType && isa<FloatType>(elementType))
    x = convert(x, elementType);
  return tensor::FromElementsOp::create(
      b, loc, RankedTensorType::get({}, elementType), ValueRange{x});
}
