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

struct FuseElementwisePass
    : public mlir::ds::impl::FuseElementwisePassBase<FuseElementwisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    linalg::ControlFusionFn control = [](OpOperand *fused) {
      Operation *consumer = fused->getOwner();
      Operation *producer = fused->get().getDefiningOp();
      auto isGemm = [](Operation *op) {
        return isa_and_nonnull<linalg::MatmulOp, linalg::BatchMatmulOp>(op);
      };
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
      // of one, in each layer of the GPT benchmark.
      for (Value result : producer->getResults())
        for (OpOperand &use : result.getUses())
          if (isGemm(use.getOwner()) || !linalg::areElementwiseOpsFusable(&use))
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
