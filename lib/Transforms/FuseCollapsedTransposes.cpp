//===- FuseCollapsedTransposes.cpp - Head merges computed by their readers ===//
//
// Implements ds-fuse-collapsed-transposes (see Passes.td): a transpose that
// keeps the innermost dimension (attention's head merge, [B, H, T, D] to
// [B, T, H, D]), read through a collapse ([B, T, H*D]) only by generics, is
// computed in those generics, which then read its input in place: their
// loops are expanded through the collapse (upstream's fusion by
// expansion), and the transpose is fused into each of them (upstream's
// elementwise fusion).
//
//===----------------------------------------------------------------------===//

#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::ds {
#define GEN_PASS_DEF_FUSECOLLAPSEDTRANSPOSESPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;

namespace {

/// Whether `use` reads a value as an input of a linalg.generic on tensors
/// whose every indexing map is a projected permutation (what fusion by
/// expansion and elementwise fusion take).
bool isGenericInput(OpOperand &use) {
  auto generic = dyn_cast<linalg::GenericOp>(use.getOwner());
  return generic && generic.hasPureTensorSemantics() &&
         generic.isDpsInput(&use) &&
         llvm::all_of(generic.getIndexingMapsArray(), [](AffineMap map) {
           return map.isProjectedPermutation();
         });
}

/// Whether `op` is a transpose on tensors that keeps the innermost
/// dimension, each of whose readers is a generic's input, directly or
/// through collapse_shapes that only such generics read, with one read at
/// least through a collapse (the case elementwise fusion alone misses).
bool isCollapsedTranspose(linalg::TransposeOp op) {
  ArrayRef<int64_t> perm = op.getPermutation();
  if (!op.hasPureTensorSemantics() || perm.empty() ||
      perm.back() != static_cast<int64_t>(perm.size()) - 1 ||
      op->getResult(0).use_empty())
    return false;
  bool collapsed = false;
  for (OpOperand &use : op->getResult(0).getUses()) {
    if (isGenericInput(use))
      continue;
    auto collapse = dyn_cast<tensor::CollapseShapeOp>(use.getOwner());
    if (!collapse || collapse.getResult().use_empty() ||
        !llvm::all_of(collapse.getResult().getUses(), isGenericInput))
      return false;
    collapsed = true;
  }
  return collapsed;
}

struct FuseCollapsedTransposesPass
    : public mlir::ds::impl::FuseCollapsedTransposesPassBase<
          FuseCollapsedTransposesPass> {
  void runOnOperation() override {
    Operation *root = getOperation();
    llvm::SmallPtrSet<Operation *, 8> transposes;
    root->walk([&](linalg::TransposeOp op) {
      if (isCollapsedTranspose(op))
        transposes.insert(op);
    });
    if (transposes.empty())
      return;

    // 1. The readers' loops expanded through the collapses: they then read
    //    the transpose's result whole.
    RewritePatternSet expansion(&getContext());
    linalg::populateFoldReshapeOpsByExpansionPatterns(
        expansion, [&](OpOperand *operand) {
          auto collapse =
              operand->get().getDefiningOp<tensor::CollapseShapeOp>();
          return collapse && isa<linalg::GenericOp>(operand->getOwner()) &&
                 transposes.contains(collapse.getSrc().getDefiningOp());
        });
    if (failed(applyPatternsGreedily(root, std::move(expansion)))) {
      signalPassFailure();
      return;
    }

    // 2. Each transpose fused into every generic that reads it, which
    //    then reads the transpose's input through the permuted map.
    IRRewriter rewriter(&getContext());
    for (Operation *op : transposes) {
      auto transpose = cast<linalg::TransposeOp>(op);
      // Every reader must be a generic now, or the copy stays.
      if (!llvm::all_of(transpose->getResult(0).getUses(), isGenericInput))
        continue;
      rewriter.setInsertionPoint(transpose);
      FailureOr<linalg::GenericOp> generic =
          linalg::generalizeNamedOp(rewriter, transpose);
      if (failed(generic))
        continue;
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : generic->getResult(0).getUses())
        uses.push_back(&use);
      for (OpOperand *use : uses) {
        if (!linalg::areElementwiseOpsFusable(use))
          continue;
        Operation *consumer = use->getOwner();
        rewriter.setInsertionPoint(consumer);
        FailureOr<linalg::ElementwiseOpFusionResult> fused =
            linalg::fuseElementwiseOps(rewriter, use);
        if (failed(fused))
          continue;
        // The consumer's results only: the transpose's other readers
        // keep reading it until they are fused in turn.
        for (auto [from, to] : fused->replacements)
          if (from.getDefiningOp() != *generic)
            rewriter.replaceAllUsesWith(from, to);
        rewriter.eraseOp(consumer);
      }
      if (generic->use_empty())
        rewriter.eraseOp(*generic);
    }
    // A fused generic keeps the transpose's result as an output while
    // another reader has it; none reads those outputs now. And an expanded
    // reduction's accumulator is a reshape of a fill, which becomes a fill
    // of its own (bufferization would otherwise copy the shared zeros
    // through a view, which convert-linalg-to-ds-gpu does not fold).
    RewritePatternSet cleanup(&getContext());
    linalg::populateEraseUnusedOperandsAndResultsPatterns(cleanup);
    linalg::FillOp::getCanonicalizationPatterns(cleanup, &getContext());
    if (failed(applyPatternsGreedily(root, std::move(cleanup))))
      signalPassFailure();
  }
};

} // namespace
