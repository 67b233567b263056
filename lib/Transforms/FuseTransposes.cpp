//===- FuseTransposes.cpp - Transposed copies written by their producer ---===//
//
// Implements ds-fuse-transposes: a linalg.transpose of the two innermost
// dimensions of an all-parallel generic's result becomes a second output
// of the generic, written through a permuted indexing map, so that the
// value is not read back from memory to be copied (Transformer Engine's
// cast-transpose, for the TN layout of cuBLASLt's FP8 GEMMs).
//
//===----------------------------------------------------------------------===//

#include "ds/Transforms/Passes.h"

#include "ds/Dialect/Linalg/IndexingMaps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::ds {
#define GEN_PASS_DEF_FUSETRANSPOSESPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;

LogicalResult mlir::ds::fuseTransposeIntoProducer(RewriterBase &rewriter,
                                                  linalg::TransposeOp op) {
  if (!op.hasPureTensorSemantics() ||
      !ds::swapsInnermostTwo(op.getPermutation()))
    return failure();
  // The transposed value: a generic's result, or a collapse of one that
  // keeps the innermost dimension ([B, T, K] read as [B*T, K]).
  Value input = op.getInput();
  auto collapse = input.getDefiningOp<tensor::CollapseShapeOp>();
  if (collapse)
    input = collapse.getSrc();
  auto result = dyn_cast<OpResult>(input);
  auto producer =
      result ? dyn_cast<linalg::GenericOp>(result.getOwner()) : nullptr;
  if (!producer || !producer.hasPureTensorSemantics() ||
      producer.getNumLoops() != producer.getNumParallelLoops())
    return failure();
  auto type = cast<RankedTensorType>(result.getType());
  OpOperand *init = producer.getDpsInitOperand(result.getResultNumber());
  if (!type.hasStaticShape() ||
      !producer.getMatchingIndexingMap(init).isIdentity() ||
      producer.payloadUsesValueFromOperand(init))
    return failure();
  int64_t rank = type.getRank();
  SmallVector<ReassociationIndices> groups;
  if (collapse)
    groups = collapse.getReassociationIndices();
  else
    for (int64_t d = 0; d < rank; ++d)
      groups.push_back({d});
  int64_t m = groups.size();
  if (m < 2 || groups.back().size() != 1)
    return failure();

  // The copy in the producer's loops: the collapsed dimensions before the
  // last two, then the innermost, then the second-to-last group's.
  SmallVector<int64_t> order;
  for (int64_t g = 0; g + 2 < m; ++g)
    llvm::append_range(order, groups[g]);
  order.push_back(groups[m - 1].front());
  llvm::append_range(order, groups[m - 2]);
  MLIRContext *ctx = rewriter.getContext();
  SmallVector<AffineExpr> exprs;
  SmallVector<int64_t> shape;
  for (int64_t d : order) {
    exprs.push_back(getAffineDimExpr(d, ctx));
    shape.push_back(type.getDimSize(d));
  }
  AffineMap copyMap = AffineMap::get(rank, 0, exprs, ctx);

  Location loc = op.getLoc();
  rewriter.setInsertionPoint(producer);
  Value empty =
      tensor::EmptyOp::create(rewriter, loc, shape, type.getElementType());
  SmallVector<Value> inits(producer.getDpsInits());
  inits.push_back(empty);
  SmallVector<AffineMap> maps = producer.getIndexingMapsArray();
  maps.push_back(copyMap);
  SmallVector<Type> resultTypes(producer->getResultTypes());
  resultTypes.push_back(empty.getType());
  auto fused = linalg::GenericOp::create(
      rewriter, producer.getLoc(), resultTypes, producer.getDpsInputs(), inits,
      maps, producer.getIteratorTypesArray(),
      [&](OpBuilder &b, Location l, ValueRange args) {
        // The old body, its arguments the new ones (the copy's is last and
        // unused); the transposed value is yielded a second time.
        IRMapping map;
        Block *body = producer.getBody();
        map.map(body->getArguments(), args.drop_back());
        for (Operation &inner : body->without_terminator())
          b.clone(inner, map);
        auto yield = cast<linalg::YieldOp>(body->getTerminator());
        SmallVector<Value> values;
        for (Value v : yield.getValues())
          values.push_back(map.lookupOrDefault(v));
        values.push_back(values[result.getResultNumber()]);
        linalg::YieldOp::create(b, l, values);
      });
  fused->setDiscardableAttrs(producer->getDiscardableAttrDictionary());
  rewriter.replaceOp(producer,
                     fused->getResults().take_front(producer->getNumResults()));
  Value copy = fused->getResults().back();
  if (collapse) {
    // Back to the transpose's 2-D (or batched) shape: the groups, with the
    // innermost one moved before the second-to-last.
    SmallVector<ReassociationIndices> copyGroups;
    int64_t next = 0;
    auto take = [&](size_t n) {
      ReassociationIndices g;
      for (size_t i = 0; i < n; ++i)
        g.push_back(next++);
      copyGroups.push_back(g);
    };
    for (int64_t g = 0; g + 2 < m; ++g)
      take(groups[g].size());
    take(1);
    take(groups[m - 2].size());
    rewriter.setInsertionPoint(op);
    copy = tensor::CollapseShapeOp::create(
        rewriter, loc, op.getResultTypes()[0], copy, copyGroups);
  }
  rewriter.replaceOp(op, copy);
  return success();
}

namespace {

struct FuseTransposePattern : OpRewritePattern<linalg::TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::TransposeOp op,
                                PatternRewriter &rewriter) const override {
    return ds::fuseTransposeIntoProducer(rewriter, op);
  }
};

struct FuseTransposesPass
    : public mlir::ds::impl::FuseTransposesPassBase<FuseTransposesPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseTransposePattern>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
