//===- WidenInReaders.cpp - A widening folded into its readers ------------===//
//
// Implements WidenInReaders.h.
//
//===----------------------------------------------------------------------===//

#include "WidenInReaders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

namespace {

/// `view` (a slice or reshape of the wide tensor) applied to `narrow`: the
/// same op with the narrow element type.
Value narrowView(OpBuilder &b, Operation *view, Value narrow) {
  Type et = cast<RankedTensorType>(narrow.getType()).getElementType();
  auto type = cast<RankedTensorType>(view->getResult(0).getType()).clone(et);
  Location loc = view->getLoc();
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(view))
    return tensor::ExtractSliceOp::create(
        b, loc, type, narrow, slice.getMixedOffsets(), slice.getMixedSizes(),
        slice.getMixedStrides());
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(view))
    return tensor::ExpandShapeOp::create(b, loc, type, narrow,
                                         expand.getReassociationIndices(),
                                         expand.getMixedOutputShape());
  auto collapse = cast<tensor::CollapseShapeOp>(view);
  return tensor::CollapseShapeOp::create(b, loc, type, narrow,
                                         collapse.getReassociationIndices());
}

/// Widens the block argument of the generic input `use` at the top of the
/// body, the operand now `narrow`.
void widenInBody(OpBuilder &b, OpOperand &use, Value narrow) {
  auto generic = cast<linalg::GenericOp>(use.getOwner());
  BlockArgument arg = generic.getMatchingBlockArgument(&use);
  Type wideType = arg.getType();
  use.set(narrow);
  arg.setType(cast<RankedTensorType>(narrow.getType()).getElementType());
  b.setInsertionPointToStart(generic.getBody());
  Value widened = arith::ExtFOp::create(b, generic.getLoc(), wideType, arg);
  arg.replaceAllUsesExcept(widened, widened.getDefiningOp());
}

} // namespace

bool mlir::ds::widenInReaders(OpBuilder &b, Value narrow, Value wide) {
  OpBuilder::InsertionGuard guard(b);
  for (OpOperand &use : llvm::make_early_inc_range(wide.getUses())) {
    Operation *user = use.getOwner();
    if (isa<tensor::ExtractSliceOp, tensor::ExpandShapeOp,
            tensor::CollapseShapeOp>(user)) {
      b.setInsertionPoint(user);
      if (widenInReaders(b, narrowView(b, user, narrow), user->getResult(0)))
        user->erase();
      continue;
    }
    auto generic = dyn_cast<linalg::GenericOp>(user);
    if (generic && generic.isDpsInput(&use))
      widenInBody(b, use, narrow);
  }
  return wide.use_empty();
}
