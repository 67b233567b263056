//===- ShapeUtils.h - Static shape rules of ds ops -------------*- C++ -*-===//
//
// The shape rules ds ops share (broadcasting, reductions, permutations) as
// plain functions on static shapes, so verifiers, type inference, passes and
// unit tests use one definition. Failures carry a message for the caller to
// attach to its diagnostic.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_IR_SHAPEUTILS_H
#define DS_DIALECT_DS_IR_SHAPEUTILS_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace mlir::ds {

/// Formats a shape as `[2, 3, 4]`.
std::string formatShape(ArrayRef<int64_t> shape);

/// The broadcast of two shapes under ds's explicit rule: equal ranks where
/// each pair of dimensions is equal or contains a 1, or one shape of rank 0.
FailureOr<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> lhs,
                                                ArrayRef<int64_t> rhs,
                                                std::string &error);

/// The dimensions of `result` along which `operand` is repeated by a
/// broadcast (operand dim 1, result dim > 1), or every dimension for a rank-0
/// operand broadcast to a non-scalar. `operand` must broadcast to `result`.
SmallVector<int64_t> broadcastDims(ArrayRef<int64_t> operand,
                                   ArrayRef<int64_t> result);

/// Checks that `dims` is strictly increasing and within `[0, rank)`.
LogicalResult checkReductionDims(ArrayRef<int64_t> dims, int64_t rank,
                                 std::string &error);

/// The shape after reducing `dims` (checked), keeping them as 1 or removing.
SmallVector<int64_t> reducedShape(ArrayRef<int64_t> shape,
                                  ArrayRef<int64_t> dims, bool keepDims);

/// Checks that `perm` is a permutation of `[0, rank)`.
LogicalResult checkPermutation(ArrayRef<int64_t> perm, int64_t rank,
                               std::string &error);

/// The number of elements of a static shape.
int64_t numElements(ArrayRef<int64_t> shape);

/// Output size of a sliding window along one dimension:
/// `(in + 2 pad - dilation (kernel - 1) - 1) / stride + 1`, or failure when
/// the window does not fit.
FailureOr<int64_t> windowOutputSize(int64_t in, int64_t kernel, int64_t stride,
                                    int64_t pad, int64_t dilation);

} // namespace mlir::ds

#endif // DS_DIALECT_DS_IR_SHAPEUTILS_H
