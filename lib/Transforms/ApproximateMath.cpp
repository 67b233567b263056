//===- ApproximateMath.cpp - Inline polynomial math for f32 ---------------===//
//
// Implements ds-approximate-math on top of upstream's polynomial
// approximation patterns, restricted to f32 (the patterns only match f32).
//
//===----------------------------------------------------------------------===//

#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::ds {
#define GEN_PASS_DEF_APPROXIMATEMATHPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;

namespace {
struct ApproximateMathPass
    : public mlir::ds::impl::ApproximateMathPassBase<ApproximateMathPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns, [](StringRef name) {
      return llvm::is_contained({"math.tanh", "math.erf", "math.exp",
                                 "math.expm1", "math.log", "math.log1p",
                                 "math.log2"},
                                name);
    });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
