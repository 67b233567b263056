//===- ScalarBuilder.h - Scalar arithmetic for ds passes -------*- C++ -*-===//
//
// One builder for the scalar arithmetic that passes and lowerings emit
// around tensors: constants, float/integer arithmetic dispatched on the
// operand type, comparisons and selects, float conversions (f16 <-> bf16
// through f32, which holds both exactly) and rank-0 tensor packing. Passes
// that build update rules (optimizer, loss scaling, clipping) and the
// ds-to-linalg lowering share it, so that a conversion rule is written once.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_UTILS_SCALARBUILDER_H
#define DS_DIALECT_DS_UTILS_SCALARBUILDER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"

namespace mlir::ds {

/// Builds scalar (f64 / i1 / i32 / i64) arithmetic at one location and
/// converts between scalars and rank-0 tensors.
class ScalarBuilder {
public:
  ScalarBuilder(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  Value f64(double v);
  Value i32(int32_t v);
  Value i64(int64_t v);
  /// `x + y`, `x - y`, `x * y`: arith's float or integer op by the type.
  Value add(Value x, Value y);
  Value sub(Value x, Value y);
  Value mul(Value x, Value y);
  Value div(Value x, Value y);
  /// Float min / max that propagate NaN.
  Value minf(Value x, Value y);
  Value maxf(Value x, Value y);
  Value pow(Value x, Value y);
  Value sqrt(Value x);
  Value cos(Value x);
  Value cmpf(arith::CmpFPredicate p, Value x, Value y);
  Value cmpi(arith::CmpIPredicate p, Value x, Value y);
  Value select(Value c, Value x, Value y);
  Value andi(Value x, Value y);
  Value ori(Value x, Value y);
  Value noti(Value x);
  /// Whether the float `x` is finite (neither inf nor NaN).
  Value isFinite(Value x);
  /// The element of a rank-0 tensor, converted to f64 if it is a float.
  Value extract(Value t);
  /// The element of a rank-0 tensor as it is.
  Value extractRaw(Value t);
  /// A float scalar converted to `type`: extf or truncf, and for two types
  /// of one width (f16 <-> bf16) both, through f32.
  Value convert(Value x, Type type);
  /// A rank-0 tensor holding `x` (converted to `elementType` first).
  Value tensor(Value x, Type elementType);

  OpBuilder &b;
  Location loc;
};

} // namespace mlir::ds

#endif // DS_DIALECT_DS_UTILS_SCALARBUILDER_H
