//===- StepQueries.h - Small read-only queries on a step ------*- C++ -*-===//
//
// The questions every pass over a training step asks of single ops and
// values: is this op part of the forward, is this value a float tensor,
// which parameter does this operand read (through data movement), which
// parameters does this op consume. And the listener that records the ops a
// builder or rewriter creates, so a pass can tag or count them. Kept here,
// in one place, so that the passes agree on the answers.
//
//===----------------------------------------------------------------------===//

#ifndef DS_ANALYSIS_STEPQUERIES_H
#define DS_ANALYSIS_STEPQUERIES_H

#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::ds {

/// Whether `op` belongs to the forward: it has no `ds.vjp_of` (ds-autodiff
/// marks every op of the backward with it).
bool isForwardOp(Operation *op);

/// Whether `v` is a ranked tensor of floats (what has a gradient).
bool isFloatTensor(Value v);

/// Whether a value is traced through `op` to its operand: data movement
/// (DataMovement ops) and casts, since a rounded weight is still the weight.
bool isLookThroughOp(Operation *op);

/// The `ds.param` argument of a function that `v` is, looking back through
/// data movement and casts; null when `v` is not a parameter.
BlockArgument traceToParam(Value v);

/// The parameters `op` reads, one per operand that traces to one (in operand
/// order; a parameter read twice is listed twice).
SmallVector<BlockArgument> consumedParams(Operation *op);

/// The name of parameter `param` (its `ds.param` string), or "".
StringRef getParamName(BlockArgument param);

/// Records the ops a builder or rewriter creates, in creation order, and
/// forgets those a rewriter erases. Works as an OpBuilder listener too.
class CreatedOps : public RewriterBase::Listener {
public:
  void notifyOperationInserted(Operation *op,
                               OpBuilder::InsertPoint previous) override {
    ops.insert(op);
  }
  void notifyOperationErased(Operation *op) override { ops.remove(op); }

  /// The ops created and not erased since construction, oldest first.
  ArrayRef<Operation *> getOps() const { return ops.getArrayRef(); }
  size_t size() const { return ops.size(); }
  bool contains(Operation *op) const { return ops.contains(op); }

private:
  llvm::SetVector<Operation *> ops;
};

} // namespace mlir::ds

#endif // DS_ANALYSIS_STEPQUERIES_H
