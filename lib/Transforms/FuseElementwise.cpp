//===- FuseElementwise.cpp - Elementwise fusion around GEMMs --------------===//
//
// Implements ds-fuse-elementwise: upstream's elementwise fusion patterns
// with a control function that keeps matmuls named, so that they still reach
// the runtime's GEMM after bufferization.
//
//===----------------------------------------------------------------------===//

#include "NarrowBeforeTranspose.h"

#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::ds {
#define GEN_PASS_DEF_FUSEELEMENTWISEPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;

namespace {

/// The inputs of `op` (a linalg op) with as many elements as its first
/// result: the tensors, not the broadcast vectors and scalars, that
/// recomputing it reads. A dynamic shape counts as full size.
unsigned countFullSizeInputs(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || op->getNumResults() == 0)
    return 0;
  auto resultType = dyn_cast<ShapedType>(op->getResult(0).getType());
  if (!resultType)
    return 0;
  llvm::SmallPtrSet<Value, 4> seen;
  unsigned full = 0;
  for (OpOperand *input : linalgOp.getDpsInputOperands()) {
    auto type = dyn_cast<ShapedType>(input->get().getType());
    if (!type || !seen.insert(input->get()).second)
      continue;
    if (!type.hasStaticShape() || !resultType.hasStaticShape() ||
        type.getNumElements() >= resultType.getNumElements())
      ++full;
  }
  return full;
}

bool isGemm(Operation *op) {
  return isa_and_nonnull<linalg::MatmulOp, linalg::BatchMatmulOp>(op);
}

/// Whether some use of `producer`'s results keeps it: a GEMM, or an op
/// that elementwise fusion cannot take it into (a reshape, the return).
bool producerStays(Operation *producer) {
  return llvm::any_of(producer->getResults(), [](Value result) {
    return llvm::any_of(result.getUses(), [](OpOperand &use) {
      return isGemm(use.getOwner()) || !linalg::areElementwiseOpsFusable(&use);
    });
  });
}

/// A producer that stays (producerStays) fused into its first consumer,
/// when that consumer is elementwise over the same elements: the fused op
/// computes the producer's results once and writes them for the other
/// uses, so one pass reads the producer's inputs and writes both ops'
/// results, instead of one pass writing the producer's result and another
/// reading it back. Upstream's pattern does not do this: it makes the
/// consumer recompute the producer and leaves the producer for the other
/// uses. AdamW's moments are step results that the parameter update reads:
/// three passes over a parameter's size became one.
///
/// Conditions: both ops all-parallel over the same elements, the consumer
/// reading the producer's result once, through a permutation; the
/// producer's results written through permutations; every other use of
/// them after the consumer, which the fused op replaces (a use before it
/// would keep the producer, and the fused op would compute it again from
/// all of its inputs); the producer straight-line arithmetic (no loops, no
/// gathers); neither op just a cast (isCastOnly).
struct FuseKeepingProducer : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp consumer,
                                PatternRewriter &rewriter) const override {
    if (!consumer.hasPureTensorSemantics() ||
        consumer.getNumParallelLoops() != consumer.getNumLoops() ||
        isCastOnly(consumer))
      return failure();
    for (OpOperand *fused : consumer.getDpsInputOperands()) {
      auto producer = fused->get().getDefiningOp<linalg::GenericOp>();
      if (!producer || !linalg::areElementwiseOpsFusable(fused) ||
          !keepable(producer, consumer, fused))
        continue;
      FailureOr<linalg::ElementwiseOpFusionResult> result =
          linalg::fuseElementwiseOps(rewriter, fused);
      if (failed(result))
        return failure();
      for (auto [original, replacement] : result->replacements)
        rewriter.replaceAllUsesWith(original, replacement);
      rewriter.eraseOp(consumer);
      rewriter.eraseOp(producer);
      return success();
    }
    return failure();
  }

  /// A generic that only converts its one input (a rounding or a
  /// widening): NarrowBeforeTranspose's patterns place those (one rounding
  /// for all of a value's readers, widenings in their readers).
  static bool isCastOnly(linalg::GenericOp op) {
    Block *body = op.getBody();
    return op.getNumDpsInputs() == 1 && body->getOperations().size() == 2 &&
           isa<arith::TruncFOp, arith::ExtFOp>(body->front());
  }

  static bool keepable(linalg::GenericOp producer, linalg::GenericOp consumer,
                       OpOperand *fused) {
    if (producer.getNumParallelLoops() != producer.getNumLoops() ||
        isCastOnly(producer) ||
        consumer.getNumLoops() != producer.getNumLoops() ||
        !consumer.getMatchingIndexingMap(fused).isPermutation() ||
        !producerStays(producer))
      return false;
    for (OpOperand &init : producer.getDpsInitsMutable())
      if (!producer.getMatchingIndexingMap(&init).isPermutation() ||
          producer.payloadUsesValueFromOperand(&init))
        return false;
    bool plain = true;
    producer.getBody()->walk([&](Operation *op) {
      plain &= op->getNumRegions() == 0 && !isa<tensor::ExtractOp>(op);
    });
    if (!plain)
      return false;
    // The consumer reads the producer once; every other use comes after it.
    Block *block = consumer->getBlock();
    unsigned consumerUses = 0;
    for (OpOperand &use : producer->getUses()) {
      if (use.getOwner() == consumer) {
        ++consumerUses;
        continue;
      }
      Operation *user = block->findAncestorOpInBlock(*use.getOwner());
      if (!user || !consumer->isBeforeInBlock(user))
        return false;
    }
    return consumerUses == 1;
  }
};

struct FuseElementwisePass
    : public mlir::ds::impl::FuseElementwisePassBase<FuseElementwisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    linalg::ControlFusionFn control = [](OpOperand *fused) {
      Operation *consumer = fused->getOwner();
      Operation *producer = fused->get().getDefiningOp();
      if (isGemm(consumer) || isGemm(producer))
        return false;
      // A value kept narrow (a policy's `storage`) and read widened: the
      // widening joins the readers, not the producer, so that the producer
      // writes the narrow type and the readers read it (half the traffic
      // both ways). An FP8 policy's GELU output, rounded to bf16 and read by
      // its amax and its scaled cast, was written in f32 otherwise.
      // Reshapes and transposes count as readers: the widening moves past
      // them (WidenAfterReshape, WidenAfterTranspose).
      if (ds::isWideningCast(consumer) &&
          llvm::all_of(consumer->getResult(0).getUses(), [&](OpOperand &use) {
            Operation *reader = use.getOwner();
            return (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp,
                        linalg::TransposeOp>(reader) &&
                    ds::takesWidening(use)) ||
                   (!isGemm(reader) && linalg::areElementwiseOpsFusable(&use));
          }))
        return false;
      // A producer whose body loops (the GPU embedding gradient's list
      // walk) is computed once: in a reduction it would also turn the
      // reduction serial on the GPU (its kernels need straight-line bodies).
      bool loops = false;
      if (auto generic = dyn_cast_or_null<linalg::GenericOp>(producer))
        for (Operation &op : generic.getBody()->without_terminator())
          loops |= op.getNumRegions() != 0;
      if (loops)
        return false;
      // Fusing a producer with several users copies its computation into
      // each of them. For arithmetic that is cheaper than a round trip
      // through memory, but not for gathers (an embedding lookup ended up in
      // 26 consumers of a GPT step): those are computed once.
      if (fused->get().hasOneUse())
        return true;
      bool gathers = false;
      producer->walk([&](tensor::ExtractOp) { gathers = true; });
      if (gathers)
        return false;
      // Nor where the producer stays: if any user needs its result in
      // memory (a GEMM, a reshape, the return), it is written anyway, and a
      // consumer that recomputes it reads all of its inputs instead of that
      // one result. The GELU gradient that a GEMM reads, recomputed in its
      // bias gradient, made that reduction read two 134 MB tensors instead
      // of one, in each layer of the GPT benchmark. (An elementwise
      // consumer takes it in as one op with both results instead:
      // FuseKeepingProducer.)
      if (producerStays(producer))
        return false;
      // Recomputed, the producer reads its inputs in every consumer: a win
      // for one tensor of its result's size (a cast, a scaling), which each
      // consumer reads instead of the result, but not for several. A
      // residual stream's gradient, a sum, was otherwise recomputed in each
      // of its readers, and so were the sums it was made of: the 12-layer
      // FP8 step moved 110 GB instead of 79.
      return countFullSizeInputs(producer) <= 1;
    };
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    patterns.add<FuseKeepingProducer>(&getContext());
    // Round before a transpose, not after: the rounding then fuses with
    // the transpose's producer.
    ds::populateNarrowBeforeTransposePatterns(patterns);
    affine::AffineApplyOp::getCanonicalizationPatterns(patterns, &getContext());
    // Top-down traversal: on a 12-layer GPT step the driver's default order
    // took 36 s to reach the fixpoint, top-down 0.3 s, with the same 1116
    // fused generics (and 2 % fewer recomputed additions in them).
    GreedyRewriteConfig config;
    config.setUseTopDownTraversal(true);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      signalPassFailure();
  }
};
} // namespace
