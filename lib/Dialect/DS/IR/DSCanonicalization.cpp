//===- DSCanonicalization.cpp - Canonicalization patterns of the ds ops ---===//
//
// Rewrites that, unlike the folders (DSFolders.cpp), make new ops. They are
// exact too, and run where the folders do: in the training pipeline's
// cleanup of the finished step (canonicalize, then CSE).
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::ds;

namespace {

/// cast(reshape(x)) is reshape(cast(x)) when the step casts x itself the
/// same way before: a cast converts each element on its own and a reshape
/// keeps the elements in row-major order, so the two commute, bit for bit,
/// and the earlier cast's result serves both. Mixed precision rounds a
/// cotangent for its layer's input-gradient GEMM as [B, T, N] and for the
/// weight-gradient GEMM as [B*T, N]; each rounding was a pass over the
/// tensor (10 us per linear layer of the GPU benchmark step in BF16).
/// Only then: moving every cast before its reshape would also move the
/// roundings that other rewrites find after a reshape (a GEMM's narrowed
/// output), and cost more than it saves. A `ds.seed` op is left alone.
struct ReuseCastThroughReshape : OpRewritePattern<CastOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CastOp op,
                                PatternRewriter &rewriter) const override {
    auto reshape = op.getInput().getDefiningOp<ReshapeOp>();
    if (!reshape || op->hasAttr(DSDialect::kSeedAttrName) ||
        reshape->hasAttr(DSDialect::kSeedAttrName))
      return failure();
    Value source = reshape.getInput();
    CastOp earlier;
    for (Operation *user : source.getUsers()) {
      auto other = dyn_cast<CastOp>(user);
      if (other && other != op && other->getBlock() == op->getBlock() &&
          other->isBeforeInBlock(op) &&
          !other->hasAttr(DSDialect::kSeedAttrName) &&
          other.getType().getElementType() == op.getType().getElementType() &&
          other.getSaturate() == op.getSaturate())
        earlier = other;
    }
    if (!earlier)
      return failure();
    auto late = ReshapeOp::create(rewriter, reshape.getLoc(), op.getType(),
                                  earlier.getResult());
    late->setDiscardableAttrs(reshape->getDiscardableAttrDictionary());
    rewriter.replaceOp(op, late.getResult());
    return success();
  }
};

} // namespace

void CastOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                         MLIRContext *context) {
  patterns.add<ReuseCastThroughReshape>(context);
}
