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

/// Whether `g` applies one `CastOp` to its one input elementwise and does
/// nothing else: identity maps, parallel loops, a payload of that cast.
template <typename CastOp> bool isElementwiseCast(linalg::GenericOp g) {
  if (g.getNumDpsInputs() != 1 || g.getNumDpsInits() != 1 ||
      g.getNumParallelLoops() != g.getNumLoops() ||
      !llvm::all_of(g.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isIdentity(); }))
    return false;
  Block &body = g.getRegion().front();
  auto cast = dyn_cast<CastOp>(body.front());
  return body.getOperations().size() == 2 && cast &&
         cast->getOperand(0) == body.getArgument(0) &&
         body.getTerminator()->getOperand(0) == cast->getResult(0);
}

/// A generic that only rounds its input to a narrower float type.
bool isNarrowingCast(linalg::GenericOp g) {
  return isElementwiseCast<arith::TruncFOp>(g);
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

/// `source` widened elementwise to the element type of `wide` (a tensor
/// type of its shape): a generic with one extf, what isWideningCast
/// matches.
Value wideningCast(OpBuilder &b, Location loc, Value source,
                   RankedTensorType wide) {
  Value empty =
      tensor::EmptyOp::create(b, loc, wide.getShape(), wide.getElementType());
  AffineMap id = b.getMultiDimIdentityMap(wide.getRank());
  return linalg::GenericOp::create(
             b, loc, TypeRange{wide}, ValueRange{source}, ValueRange{empty},
             ArrayRef<AffineMap>{id, id},
             SmallVector<utils::IteratorType>(wide.getRank(),
                                              utils::IteratorType::parallel),
             [&](OpBuilder &nb, Location l, ValueRange args) {
               Value r =
                   arith::ExtFOp::create(nb, l, wide.getElementType(), args[0]);
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
/// generic's result that is otherwise only rounded to the same type (directly
/// or through other such reshapes), becomes `reshape(truncf(x))`, with one
/// truncf for all: the cast then fuses into `x`'s producer, and `x` is never
/// written wide. The head split reshapes the bias add's [B, T, H*D] result to
/// [B, T, H, D] before transposing it; without this hop the cast that
/// NarrowBeforeTranspose moved stops at that reshape, and the add writes f32
/// for a kernel of its own to round. The GELU's output is rounded for the
/// next GEMM and, flattened to [B*T, F], for that GEMM's weight gradient:
/// two casts, so the GELU wrote f32 for both to read.
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
    // whose result nothing else reads unrounded. Elsewhere (a GEMM's result)
    // the cast would only stop fusing into its consumers across the reshape.
    Value source = reshape->getOperand(0);
    auto producer = source.getDefiningOp<linalg::GenericOp>();
    if (!producer || producer.getNumParallelLoops() != producer.getNumLoops())
      return rewriter.notifyMatchFailure(round, "no elementwise producer");
    Type narrow = getElementTypeOrSelf(round.getResult(0).getType());
    auto roundsTo = [&](Operation *op) {
      auto g = dyn_cast<linalg::GenericOp>(op);
      return g && g.hasPureTensorSemantics() && isNarrowingCast(g) &&
             getElementTypeOrSelf(g.getResult(0).getType()) == narrow &&
             g->getBlock() == producer->getBlock();
    };
    SmallVector<Operation *> direct;
    SmallVector<std::pair<Operation *, Operation *>> reshaped;
    for (Operation *user : source.getUsers()) {
      if (roundsTo(user)) {
        direct.push_back(user);
        continue;
      }
      Value view = user->getNumResults() == 1 ? user->getResult(0) : Value();
      if (!isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(user) ||
          !view.hasOneUse() || !roundsTo(*view.getUsers().begin()))
        return rewriter.notifyMatchFailure(round, "the source is read wide");
      reshaped.push_back({user, *view.getUsers().begin()});
    }
    rewriter.setInsertionPointAfter(producer);
    Value rounded = narrowingCast(rewriter, round.getLoc(), source, narrow);
    for (Operation *cast : direct)
      rewriter.replaceOp(cast, rounded);
    for (auto [view, cast] : reshaped) {
      rewriter.setInsertionPoint(cast);
      rewriter.replaceOp(cast, reshapeNarrow(rewriter, view, rounded));
    }
    return success();
  }
};

/// `reshape(extf(x))` becomes `extf(reshape(x))`: the widening then fuses
/// into the reshape's readers, and the reshape no longer needs the wide
/// tensor in memory. A value a policy keeps in bf16 is read widened; when
/// the backward reads it reshaped (the GELU output, flattened for the
/// second MLP GEMM's weight gradient), that reshape kept the widening out
/// of its other readers.
template <typename ReshapeOp>
struct WidenAfterReshape : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern<ReshapeOp>::OpRewritePattern;

  LogicalResult matchAndRewrite(ReshapeOp reshape,
                                PatternRewriter &rewriter) const override {
    auto widen = reshape.getSrc().template getDefiningOp<linalg::GenericOp>();
    if (!widen || !widen.hasPureTensorSemantics() || !ds::isWideningCast(widen))
      return rewriter.notifyMatchFailure(reshape, "not of a widening cast");
    // Only where the widening will fuse into every reader (else it is one
    // more kernel, and the wide tensor is written anyway).
    if (!ds::readersTakeWidening(reshape))
      return rewriter.notifyMatchFailure(reshape, "read other than fused");
    Value narrow =
        reshapeNarrow(rewriter, reshape, widen.getDpsInputOperand(0)->get());
    rewriter.replaceOp(reshape,
                       wideningCast(rewriter, reshape.getLoc(), narrow,
                                    cast<RankedTensorType>(reshape.getType())));
    return success();
  }
};

/// `transpose(extf(x))` becomes `extf(transpose(x))`, where everything
/// that reads the transpose, directly or through reshapes, takes the
/// widening: the transpose then moves the narrow elements, and the widening
/// fuses into its readers. Attention's context leaves its batched matmul in
/// bf16 (the policies' storage) and is read widened: the head merge
/// transposed it in f32, which a kernel of its own had widened, and the
/// output projection's FP8 amax and cast read the f32 result (three passes
/// over 16.8 MB of bf16 made 117 MB of traffic where one pass makes 34).
/// Widening commutes with moving elements, so this is exact.
struct WidenAfterTranspose : OpRewritePattern<linalg::TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::TransposeOp transpose,
                                PatternRewriter &rewriter) const override {
    if (!transpose.hasPureTensorSemantics())
      return failure();
    auto widen = transpose.getInput().getDefiningOp<linalg::GenericOp>();
    if (!widen || !widen.hasPureTensorSemantics() || !ds::isWideningCast(widen))
      return rewriter.notifyMatchFailure(transpose, "not of a widening cast");
    Value result = transpose.getResult()[0];
    if (!ds::readersTakeWidening(transpose))
      return rewriter.notifyMatchFailure(transpose, "read other than fused");
    Location loc = transpose.getLoc();
    Value narrow = widen.getDpsInputOperand(0)->get();
    auto type = cast<RankedTensorType>(result.getType());
    Type narrowType = getElementTypeOrSelf(narrow.getType());
    Value init =
        tensor::EmptyOp::create(rewriter, loc, type.getShape(), narrowType);
    Value moved = linalg::TransposeOp::create(rewriter, loc, narrow, init,
                                              transpose.getPermutation())
                      .getResult()[0];
    rewriter.replaceOp(transpose, wideningCast(rewriter, loc, moved, type));
    return success();
  }
};

} // namespace

bool mlir::ds::isWideningCast(Operation *op) {
  auto g = dyn_cast<linalg::GenericOp>(op);
  return g && isElementwiseCast<arith::ExtFOp>(g);
}

bool mlir::ds::takesWidening(OpOperand &use) {
  Operation *reader = use.getOwner();
  if (auto generic = dyn_cast<linalg::GenericOp>(reader))
    return generic.hasPureTensorSemantics() && generic.isDpsInput(&use);
  if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(reader))
    return readersTakeWidening(reader);
  // A transpose's input; its readers may reshape (the head merge's).
  auto transpose = dyn_cast<linalg::TransposeOp>(reader);
  return transpose && transpose.hasPureTensorSemantics() &&
         use.get() == transpose.getInput() && readersTakeWidening(transpose);
}

bool mlir::ds::readersTakeWidening(Operation *view) {
  return llvm::all_of(view->getResult(0).getUses(),
                      [](OpOperand &use) { return takesWidening(use); });
}

void mlir::ds::populateNarrowBeforeTransposePatterns(
    RewritePatternSet &patterns) {
  patterns.add<NarrowBeforeTranspose, NarrowBeforeReshape, WidenAfterTranspose,
               WidenAfterReshape<tensor::CollapseShapeOp>,
               WidenAfterReshape<tensor::ExpandShapeOp>>(patterns.getContext());
}
