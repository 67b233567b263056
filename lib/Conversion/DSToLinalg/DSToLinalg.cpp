//===- DSToLinalg.cpp - Lower ds to linalg --------------------------------===//
//
// The `convert-ds-to-linalg` pass: a partial dialect conversion with the
// whole ds dialect illegal and every other op legal, so upstream ops
// already in the input pass through untouched and any ds op left over is
// reported (located, naming the op) by the conversion driver. Types do not
// change (tensors stay tensors), hence no TypeConverter.
//
// The patterns live in one file per family (Elementwise, MatMul,
// Reductions, Shape, NN, BackwardKernels, Quant, Sparse); LoweringUtils holds
// the builders they share.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "ds/Conversion/Passes.h"
#include "ds/Dialect/DS/IR/CausalGemm.h"
#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::ds {
#define GEN_PASS_DEF_CONVERTDSTOLINALGPASS
#include "ds/Conversion/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

void mlir::ds::populateDSToLinalgPatterns(RewritePatternSet &patterns,
                                          bool narrowGemms, bool fp8Gemms) {
  lowering::populateElementwisePatterns(patterns);
  lowering::populateMatMulPatterns(patterns, narrowGemms, fp8Gemms);
  lowering::populateReductionPatterns(patterns);
  lowering::populateShapePatterns(patterns);
  lowering::populateNNPatterns(patterns);
  lowering::populateConvPatterns(patterns);
  lowering::populateBackwardKernelPatterns(patterns);
  lowering::populateQuantPatterns(patterns);
  lowering::populateSparsePatterns(patterns);
}

bool mlir::ds::isCollective(Operation *op) {
  return isa<AllReduceOp, AllReduceStartOp, AllReduceWaitOp, CommBroadcastOp,
             CommRankOp, SendOp, RecvOp>(op);
}

bool mlir::ds::hasRuntimeKernel(Operation *op) {
  auto blockKernel = [](Type elementType, uint64_t block) {
    return elementType.isF32() && block >= 8 && block % 8 == 0;
  };
  if (auto mm = dyn_cast<BlockSparseMatMulOp>(op))
    return blockKernel(mm.getType().getElementType(), mm.getBlock());
  if (auto s = dyn_cast<BlockSampledMatMulOp>(op))
    return blockKernel(s.getType().getElementType(), s.getBlock());
  if (auto t = dyn_cast<TopKMaskOp>(op)) {
    Type et = t.getScores().getType().getElementType();
    return et.isF32() || et.isF64();
  }
  return isCollective(op);
}

namespace {
struct ConvertDSToLinalgPass
    : public mlir::ds::impl::ConvertDSToLinalgPassBase<ConvertDSToLinalgPass> {
  using Base::Base;
  void runOnOperation() override {
    // What is known of attention's triangular matrices is read off the ds
    // ops (masks, softmaxes) before they are gone; MatMulLowering carries
    // it to the linalg contraction.
    if (causalBlock < 0) {
      getOperation()->emitError("convert-ds-to-linalg: causal-block is rows "
                                "per GEMM (0: off), not ")
          << static_cast<int64_t>(causalBlock);
      return signalPassFailure();
    }
    if (causalBlock > 0)
      getOperation()->walk([&](MatMulOp op) {
        setCausalGemm(op, analyzeCausalMatMul(op, causalBlock));
      });
    RewritePatternSet patterns(&getContext());
    populateDSToLinalgPatterns(patterns, narrowGemms, fp8Gemms);
    if (parallelScatter)
      lowering::populateParallelScatterPatterns(patterns);
    if (gemmConvs)
      lowering::populateConvPatterns(patterns, /*asGemm=*/true);
    ConversionTarget target(getContext());
    target.addIllegalDialect<DSDialect>();
    if (runtimeKernels)
      target.addDynamicallyLegalOp<BlockSparseMatMulOp, BlockSampledMatMulOp,
                                   TopKMaskOp>(hasRuntimeKernel);
    // Collectives have no loop form: convert-ds-to-runtime always takes
    // them.
    target.addLegalOp<AllReduceOp, AllReduceStartOp, AllReduceWaitOp,
                      CommBroadcastOp, CommRankOp, SendOp, RecvOp>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
