//===- NarrowBeforeTranspose.cpp - Round before moving, not after ---------===//
//
// A mixed-precision step often transposes a tensor and then rounds it: the
// attention heads are split ([B, T, H, D] -> [B, H, T, D]) in f32 and then
// cast to bf16 for the batched matmul, and the context is merged back in
// f32 and then cast for the output projection. Rounding first moves half
// the bytes through the transpose, and the cast, now elementwise on the
// transpose's input, fuses into the kernel that produced it (the bias add),
// so the f32 tensor is never written. Rounding commutes with moving
// elements, so the rewrite is exact.
//
//   %t = linalg.transpose ins(%x : f32) ...       %n = cast(%x) : bf16
//   %v = tensor.collapse_shape %t ...        =>   %t = linalg.transpose ins(%n)
//   %r = cast(%v) : bf16                          %r = tensor.collapse_shape %t
//
//===----------------------------------------------------------------------===//

#include "NarrowBeforeTranspose.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;

namespace {

/// Whether `g` rounds its one input elementwise to a narrower float type
/// and does nothing else: identity maps, parallel loops, a payload of one
/// arith.truncf of the input.
bool isNarrowingCast(linalg::GenericOp g) {
  if (g.getNumDpsInputs() != 1 || g.getNumDpsInits() != 1 ||
      g.getNumParallelLoops() != g.getNumLoops() ||
      !llvm::all_of(g.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isIdentity(); }))
    return false;
  Block &body = g.getRegion().front();
  if (body.getOperations().size() != 2)
    return false;
  auto trunc = dyn_cast<arith::TruncFOp>(body.front());
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  return trunc && trunc.getIn() == body.getArgument(0) &&
         yield.getValues().size() == 1 &&
         yield.getValues()[0] == trunc.getResult();
}

/// `source` rounded to `narrow` elementwise: a generic with one truncf,
/// what isNarrowingCast matches.
Value narrowingCast(OpBuilder &b, Location loc, Value source, Type narrow) {
  auto sourceType = cast<RankedTensorType>(source.getType());
  Value empty = tensor::EmptyOp::create(b, loc, sourceType.getShape(), narrow);
  int64_t rank = sourceType.getRank();
  AffineMap id = b.getMultiDimIdentityMap(rank);
  return linalg::GenericOp::create(
             b, loc, TypeRange{empty.getType()}, ValueRange{source},
             ValueRange{empty}, ArrayRef<AffineMap>{id, id},
             SmallVector<utils::IteratorType>(rank,
                                              utils::IteratorType::parallel),
             [&](OpBuilder &nb, Location l, ValueRange args) {
               Value r = arith::TruncFOp::create(nb, l, narrow, args[0]);
               linalg::YieldOp::create(nb, l, r);
             })
      .getResult(0);
}

/// `reshape` applied again to `narrowSource`, its source rounded: the same
/// reshape, of the narrow element type.
Value reshapeNarrow(OpBuilder &b, Operation *reshape, Value narrowSource) {
  IRMapping mapping;
  mapping.map(reshape->getOperand(0), narrowSource);
  Operation *copy = b.clone(*reshape, mapping);
  auto type = cast<RankedTensorType>(reshape->getResult(0).getType());
  copy->getResult(0).setType(
      type.clone(getElementTypeOrSelf(narrowSource.getType())));
  return copy->getResult(0);
}

struct NarrowBeforeTranspose : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp round,
                                PatternRewriter &rewriter) const override {
    if (!round.hasPureTensorSemantics() || !isNarrowingCast(round))
      return rewriter.notifyMatchFailure(round, "not a narrowing cast");
    // Through reshapes (each used only here) to a transpose used only here.
    SmallVector<Operation *> reshapes;
    Value v = round.getDpsInputOperand(0)->get();
    while (isa_and_nonnull<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(
        v.getDefiningOp())) {
      if (!v.hasOneUse())
        return failure();
      reshapes.push_back(v.getDefiningOp());
      v = v.getDefiningOp()->getOperand(0);
    }
    auto transpose = v.getDefiningOp<linalg::TransposeOp>();
    if (!transpose || !v.hasOneUse() || !transpose.hasPureTensorSemantics())
      return rewriter.notifyMatchFailure(round, "not a transpose's only use");

    Location loc = round.getLoc();
    Type narrow = getElementTypeOrSelf(round.getResult(0).getType());
    Value rounded = narrowingCast(rewriter, loc, transpose.getInput(), narrow);
    auto resultType =
        cast<RankedTensorType>(transpose.getResult()[0].getType());
    Value init =
        tensor::EmptyOp::create(rewriter, loc, resultType.getShape(), narrow);
    Value moved = linalg::TransposeOp::create(rewriter, loc, rounded, init,
                                              transpose.getPermutation())
                      .getResult()[0];
    // The reshapes again, innermost first, on the narrow tensor.
    for (Operation *reshape : llvm::reverse(reshapes))
      moved = reshapeNarrow(rewriter, reshape, moved);
    rewriter.replaceOp(round, moved);
    return success();
  }
};

/// `truncf(reshape(x))`, the reshape used only there and `x` an elementwise
/// generic's result used only by it, becomes `reshape(truncf(x))`: the
/// cast then fuses into `x`'s producer, and `x` is never written wide. The head
/// split reshapes the bias add's [B, T, H*D] result to [B, T, H, D] before
/// transposing it; without this hop the cast that NarrowBeforeTranspose moved
/// stops at that reshape, and the add writes f32 for a kernel of its own to
/// round.
struct NarrowBeforeReshape : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp round,
                                PatternRewriter &rewriter) const override {
    if (!round.hasPureTensorSemantics() || !isNarrowingCast(round))
      return rewriter.notifyMatchFailure(round, "not a narrowing cast");
    Value v = round.getDpsInputOperand(0)->get();
    Operation *reshape = v.getDefiningOp();
    if (!isa_and_nonnull<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(
            reshape) ||
        !v.hasOneUse())
      return rewriter.notifyMatchFailure(round, "not a reshape's only use");
    // Only where the cast will join the producer: an elementwise generic
    // whose result nothing else reads. Elsewhere (a GEMM's result) the cast
    // would only stop fusing into its consumers across the reshape.
    Value source = reshape->getOperand(0);
    auto producer = source.getDefiningOp<linalg::GenericOp>();
    if (!producer || !source.hasOneUse() ||
        producer.getNumParallelLoops() != producer.getNumLoops())
      return rewriter.notifyMatchFailure(round, "no elementwise producer");
    Type narrow = getElementTypeOrSelf(round.getResult(0).getType());
    Value rounded = narrowingCast(rewriter, round.getLoc(), source, narrow);
    rewriter.replaceOp(round, reshapeNarrow(rewriter, reshape, rounded));
    return success();
  }
};

} // namespace

void mlir::ds::populateNarrowBeforeTransposePatterns(
    RewritePatternSet &patterns) {
  patterns.add<NarrowBeforeTranspose, NarrowBeforeReshape>(
      patterns.getContext());
}
