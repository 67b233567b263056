//===- RaiseUtils.h - Helpers shared by the linalg raisers ------*- C++ -*-===//
//
// Private to lib/Transforms/RaiseLinalg: moving values between a linalg
// op's iteration space and its operands' layouts with ds.reshape and
// ds.transpose, and recognising constants and fills.
//
// In the iteration space of an op with loop sizes `loops`, a value has rank
// `loops.size()` and, in dimension j, either size loops[j] or size 1 (it is
// then repeated along j by the broadcasting of ds's binary ops); rank-0
// scalars broadcast everywhere.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_TRANSFORMS_RAISELINALG_RAISEUTILS_H
#define DS_LIB_TRANSFORMS_RAISELINALG_RAISEUTILS_H

#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include <optional>

namespace mlir::ds::raise {

/// `v` reshaped to `shape` (v itself when it already has it).
Value reshapeTo(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape);

/// `v` transposed by `perm` (result dim k = input dim perm[k]); v itself for
/// the identity.
Value transposeBy(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> perm);

/// `v` broadcast (ds.broadcast) to `shape` of the same rank, or from rank 0.
Value broadcastTo(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape);

/// Brings operand `v`, whose dimension k is loop dims[k] (-1: a size-1
/// dimension the map pins to 0), into the iteration space of `loops`.
/// Fails when the sizes do not match the loops.
FailureOr<Value> placeInLoops(OpBuilder &b, Location loc, Value v,
                              ArrayRef<int64_t> dims, ArrayRef<int64_t> loops);

/// The inverse: the value of type `resultType` whose dimension k is loop
/// dims[k] (-1: size 1), read from the iteration-space value `w`. Dimensions
/// of `w` that are not in `dims` must have size 1 (reduced); dimensions in
/// `dims` where `w` has size 1 are broadcast.
FailureOr<Value> extractFromLoops(OpBuilder &b, Location loc, Value w,
                                  ArrayRef<int64_t> dims,
                                  ArrayRef<int64_t> loops,
                                  RankedTensorType resultType);

/// The value of a scalar `arith.constant` (float or integer), if `v` is one.
std::optional<double> getScalarConstant(Value v);

/// Whether `v` is a tensor filled with `value`: a `linalg.fill` of a
/// constant or a splat `arith.constant`.
bool isFilledWith(Value v, double value);

/// A rank-0 `arith.constant dense<attr>` of `attr`'s type.
Value scalarTensorConstant(OpBuilder &b, Location loc, TypedAttr attr);

/// Whether `t` is a ranked tensor with a static shape and an element type
/// ds tensors may have (float or signless integer).
bool isDSCompatible(Type t);

} // namespace mlir::ds::raise

#endif // DS_LIB_TRANSFORMS_RAISELINALG_RAISEUTILS_H
