//===- ImportLinalg.h - Raise linalg-on-tensors into ds ---------*- C++ -*-===//
//
// The reusable pieces of ds-import-linalg: one raising function per kind of
// upstream op (linalg.generic bodies, contractions, convolutions and
// pooling, shape ops), the contract attachment from pass options, and the
// whole-function import. Each raising function builds ds ops in front of
// the op and returns the values that replace its results; it leaves the op
// itself in place (the caller replaces and erases it) and fails, having
// created at most dead ops, when it does not recognise the op.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TRANSFORMS_IMPORTLINALG_H
#define DS_TRANSFORMS_IMPORTLINALG_H

#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/MapVector.h"

#include <string>

namespace mlir {
namespace linalg {
class GenericOp;
} // namespace linalg
namespace ds {

/// Raises a `linalg.generic` on static tensors: elementwise bodies (arith,
/// math, cmpf/cmpi + select, casts, the exact GELU body), reductions
/// (`addf` / `maximumf` into the output), gathers (`tensor.extract` with an
/// integer-operand index: ds.embedding for row lookups, a one-hot
/// compare/select/reduce_sum otherwise). Inputs with projected-permutation
/// indexing maps (constant-0 results allowed) are brought into the
/// iteration space with ds.reshape / ds.transpose, size-1 dimensions
/// broadcasting. Returns one value per result; results without uses (the
/// index of an argmax) may get a null value. Fails when a used result is
/// not floating point or the body holds something not recognised.
FailureOr<SmallVector<Value>> raiseGeneric(RewriterBase &rewriter,
                                           linalg::GenericOp op);

/// Raises the named linalg and tensor ops: `linalg.matmul`,
/// `linalg.batch_matmul` (transposes that feed them become transpose
/// flags, a non-zero init an add), `linalg.transpose`, `linalg.broadcast`,
/// `linalg.conv_2d_nchw_fchw` (with its zero `tensor.pad` and a broadcast
/// bias init), `linalg.pooling_nchw_max` (with a -inf pad),
/// `tensor.expand_shape` / `collapse_shape`, `tensor.extract_slice`,
/// `tensor.concat` and, with `raisePad`, a constant `tensor.pad`
/// (ds.insert_slice into a constant). Returns the replacement of the op's
/// single result.
FailureOr<Value> raiseNamedOp(RewriterBase &rewriter, Operation *op,
                              bool raisePad = false);

/// Raises `op` with whichever of the functions above applies.
FailureOr<SmallVector<Value>> raiseOp(RewriterBase &rewriter, Operation *op,
                                      bool raisePad = false);

/// The contract given as ds-import-linalg options: one role per argument
/// (`param:<name>`, `state:<kind>`, `input:<name>`) and per result (`loss`,
/// `update:<param or state kind>`, `metric:<name>`).
struct ImportContractSpec {
  SmallVector<std::string> args;
  SmallVector<std::string> results;
};

/// Attaches the contract in `spec` to `func` (which must have none):
/// argument and result attributes, `ds.init = #ds.init<file>` on parameters
/// and state, and `ds.train_step`; then verifies it. Emits a located,
/// specific error and fails on a count mismatch, an unknown role, an empty
/// name or an update of an unknown argument.
LogicalResult attachContract(FunctionOpInterface func,
                             const ImportContractSpec &spec);

/// What importing one function did.
struct ImportReport {
  /// Top-level ops of the function before the import (terminator excluded).
  unsigned numOps = 0;
  /// How many of them were raised into ds ops or became dead.
  unsigned numRaised = 0;
  /// The upstream ops left, by name, in order of first appearance.
  llvm::MapVector<StringRef, unsigned> left;
};

/// Raises every recognised op of `func`'s body into ds, removes the dead
/// ops, and, when `func` is a training step, fails with a located error at
/// the first upstream op that lies between the parameters (or state) and
/// the loss. A `tm_tensor` op is an error. Fills `report`.
LogicalResult importLinalg(FunctionOpInterface func, ImportReport &report);

} // namespace ds
} // namespace mlir

#endif // DS_TRANSFORMS_IMPORTLINALG_H
