//===- TestPasses.td - ds passes for tests and docs --------*- tablegen -*-===//
//
// Passes ds-opt registers for tests only. ds-test-loss-ema is the example of
// docs/WritingAPass.md.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TEST_TRANSFORMS_TESTPASSES_TD
#define DS_TEST_TRANSFORMS_TESTPASSES_TD

include "mlir/Pass/PassBase.td"

def TestLossEMAPass : Pass<"ds-test-loss-ema", "::mlir::ModuleOp"> {
  let summary = "Keep a bias-corrected moving average of the loss (the "
                "example of docs/WritingAPass.md)";
  let description = [{
    Adds the state `loss_ema` (tensor<f64>, zeros), updated to
    `decay * ema + (1 - decay) * loss` on every step that loss scaling does
    not skip, and the metric `loss_ema`, the average divided by
    `1 - decay^(n + 1)` (Adam's bias correction) where `n` counts the
    steps recorded so far, read from the shared `iteration` counter.
    Runs between ds-autodiff and ds-insert-optimizer.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::ds::DSDialect"];
  let options = [
    Option<"decay", "decay", "double", /*default=*/"0.9",
           "Weight of the old average, in (0, 1)">
  ];
}

#endif // DS_TEST_TRANSFORMS_TESTPASSES_TD
