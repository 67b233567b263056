//===- SplitEmptyTensors.cpp - A tensor.empty per destination -------------===//
//
// Implements ds-split-empty-tensors (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

namespace mlir::ds {
#define GEN_PASS_DEF_SPLITEMPTYTENSORSPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;

namespace {

struct SplitEmptyTensorsPass
    : public mlir::ds::impl::SplitEmptyTensorsPassBase<SplitEmptyTensorsPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<tensor::EmptyOp> shared;
    getOperation()->walk([&](tensor::EmptyOp empty) {
      RankedTensorType type = empty.getType();
      if (maxElements > 0 &&
          (!type.hasStaticShape() || type.getNumElements() > maxElements))
        return;
      if (!empty->hasOneUse() && !empty->use_empty())
        shared.push_back(empty);
    });
    for (tensor::EmptyOp empty : shared) {
      // The first use keeps the original; each other gets a copy right
      // before its user, which the original's operands dominate too.
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : empty->getUses())
        uses.push_back(&use);
      // In program order (users in the empty's block or nested in it).
      Block *block = empty->getBlock();
      llvm::stable_sort(uses, [&](OpOperand *a, OpOperand *b) {
        Operation *x = block->findAncestorOpInBlock(*a->getOwner());
        Operation *y = block->findAncestorOpInBlock(*b->getOwner());
        return x && y && x != y && x->isBeforeInBlock(y);
      });
      for (OpOperand *use : llvm::drop_begin(uses)) {
        OpBuilder b(use->getOwner());
        use->set(b.clone(*empty)->getResult(0));
      }
    }
  }
};

} // namespace
