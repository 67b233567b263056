//===- LowerGPUSubgroupReduce.cpp - subgroup reductions as shuffles -------===//
//
// Implements ds-lower-gpu-subgroup-reduce (see Passes.td) over upstream's
// shuffle-expansion patterns.
//
//===----------------------------------------------------------------------===//

#include "ds/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::ds {
#define GEN_PASS_DEF_LOWERGPUSUBGROUPREDUCEPASS
#include "ds/Conversion/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;

namespace {

struct LowerGPUSubgroupReducePass
    : public mlir::ds::impl::LowerGPUSubgroupReducePassBase<
          LowerGPUSubgroupReducePass> {
  using Base::Base;

  void runOnOperation() override {
    if (!llvm::isPowerOf2_32(subgroupSize)) {
      getOperation().emitError("ds-lower-gpu-subgroup-reduce: subgroup-size ")
          << subgroupSize << " is not a power of two";
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    // 32-bit shuffles for values that fit one (preferred: a 64-bit pattern
    // would match them too, widened); 64-bit ones for the rest.
    populateGpuLowerSubgroupReduceToShufflePatterns(
        patterns, subgroupSize, /*shuffleBitwidth=*/32, /*benefit=*/2);
    populateGpuLowerSubgroupReduceToShufflePatterns(
        patterns, subgroupSize, /*shuffleBitwidth=*/64, /*benefit=*/1);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    WalkResult left = getOperation().walk([](gpu::SubgroupReduceOp op) {
      op.emitError("ds-lower-gpu-subgroup-reduce: cannot lower a reduction "
                   "of ")
          << op.getType() << " to shuffles";
      return WalkResult::interrupt();
    });
    if (left.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
