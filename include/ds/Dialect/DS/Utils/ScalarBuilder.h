//===- ScalarBuilder.h - Scalar arithmetic for ds passes -------*- C++ -*-===//
//
// One builder for the scalar arithmetic that passes and lowerings emit
// around tensors: constants, float/integer arithmetic dispatched on the
// operand type, comparisons and selects, float conversions (f16 <-> bf16
// through f32, which holds both exactly) and rank-0 tensor packing. Passes
// that build update rules (optimizer, loss scaling, clipping) and the
// ds-to-linalg lowering share it, so that a conversion rule is written once.
//
// Constants are cached per builder: a pass that asks for `f64(1.0)` ten
// times gets one `arith.constant`, which keeps the update rules readable in
// the IR and in lit tests without a canonicalize run.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_UTILS_SCALARBUILDER_H
#define DS_DIALECT_DS_UTILS_SCALARBUILDER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <utility>

namespace mlir::ds {

/// Builds scalar (f64 / i1 / i32 / i64) arithmetic at one location and
/// converts between scalars and rank-0 tensors.
///
/// Constants are reused: `f64(1.0)` returns the Value of an earlier
/// `f64(1.0)` of the same builder. That suits the passes, which build their
/// scalars sequentially in one block (before the step's terminator). A cached
/// constant is only returned when it dominates the insertion point (it is
/// in the insertion block, before the insertion point); anywhere else a new
/// one is created and cached instead. The cache assumes that the constants
/// it handed out are not erased while the builder is in use.
class ScalarBuilder {
public:
  ScalarBuilder(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  Value f64(double v);
  /// A constant `v` of the float type `type` (rounded to it).
  Value floatOf(Type type, double v);
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

private:
  /// An `arith.constant` of `attr` (a float or integer of at most 64 bits),
  /// the cached one when it dominates the insertion point.
  Value constant(TypedAttr attr);

  /// The constants built so far, by type and bit pattern (so +0.0 and -0.0
  /// are two entries).
  llvm::DenseMap<std::pair<Type, uint64_t>, Value> constants;
};

} // namespace mlir::ds

#endif // DS_DIALECT_DS_UTILS_SCALARBUILDER_H
