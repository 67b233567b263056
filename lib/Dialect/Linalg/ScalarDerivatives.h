//===- ScalarDerivatives.h - Forward-mode rules for scalar ops --*- C++ -*-===//
//
// Private to lib/Dialect/Linalg: the derivative of one scalar arith or math
// op, given the tangents (directional derivatives) of its operands. A null
// tangent is an exact zero, so that a body op that does not depend on the
// input being differentiated costs nothing.
//
// Where PyTorch defines a derivative at a non-differentiable point, the
// rules follow it: |x|' = sign(x) with sign(0) = 0, floor/ceil/round have
// derivative 0, pow(x, 0)' = 0 in x and pow(0, y)' = 0 in y, and max/min
// split the gradient in half on a tie (torch.maximum, ds.maximum).
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_DIALECT_LINALG_SCALARDERIVATIVES_H
#define DS_LIB_DIALECT_LINALG_SCALARDERIVATIVES_H

#include "mlir/IR/Builders.h"

namespace mlir::ds {

/// Whether the scalar op `op` has a derivative rule. Ops without float
/// results always do (their tangent is zero).
bool hasScalarDerivative(Operation *op);

/// The tangent of the single result of `op` (whose operands are values in
/// the block being built) given `operandTangents` (null: zero), built at
/// `b`'s insertion point; null when it is zero. Fails for an op without a
/// rule (hasScalarDerivative is false).
FailureOr<Value> buildScalarTangent(OpBuilder &b, Operation *op,
                                    ArrayRef<Value> operandTangents);

} // namespace mlir::ds

#endif // DS_LIB_DIALECT_LINALG_SCALARDERIVATIVES_H
