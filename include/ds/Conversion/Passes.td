//===- Passes.td - ds lowering passes ----------------------*- tablegen -*-===//
//
// Lowerings out of the ds dialect. Named convert-ds-to-<target>.
//
//===----------------------------------------------------------------------===//

#ifndef DS_CONVERSION_PASSES_TD
#define DS_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertDSToLinalgPass : Pass<"convert-ds-to-linalg"> {
  let summary = "Lower every ds op to linalg, tensor, arith, math and scf";
  let description = [{
    Rewrites every `ds` op into upstream ops on tensors: elementwise ops and
    reductions into `linalg.generic` (broadcasts as affine maps), matmuls
    into `linalg.matmul` / `linalg.batch_matmul` with transposes and the
    shared right-hand side expressed as indexing maps, shape ops into
    `tensor` ops, and the rest (convolutions, pooling, embedding, dropout's
    Philox generator, the backward kernels) into `linalg.generic`, `scf`
    and `tensor` ops. The result is ready for elementwise fusion and
    one-shot bufferization.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

#endif // DS_CONVERSION_PASSES_TD
