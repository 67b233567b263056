//===- GPUStreamOrder.cpp - One in-order stream per step ------------------===//
//
// Implements ds-gpu-stream-order (see Passes.td). gpu-async-region is
// correct for independent streams; on the runtime's single in-order step
// stream its blocking waits are pure host stalls, one per GEMM call.
//
//===----------------------------------------------------------------------===//

#include "ds/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mlir::ds {
#define GEN_PASS_DEF_GPUSTREAMORDERPASS
#include "ds/Conversion/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;

namespace {

struct GPUStreamOrderPass
    : public mlir::ds::impl::GPUStreamOrderPassBase<GPUStreamOrderPass> {
  void runOnOperation() override {
    func::FuncOp f = getOperation();
    if (f.isExternal())
      return;
    // Host control flow around device work (a top-k wait's loop over the
    // ranks, a branch on a runtime call's result): its blocks' chains end
    // in blocking waits too, as needless on the one in-order stream (the
    // host reads no buffer itself: ds-convert-linalg-to-gpu moved such
    // reads into kernels). Their chains start anew (the top level's cannot
    // be continued across regions), on the same stream.
    Block &body = f.getBody().front();
    SmallVector<gpu::WaitOp> nested;
    f.walk([&](gpu::WaitOp wait) {
      if (wait->getBlock() != &body && !wait.getAsyncToken())
        nested.push_back(wait);
    });
    for (gpu::WaitOp wait : nested)
      wait.erase();
    // The body's top level: each chain continues the last one.
    Value chain;
    for (Operation &op : llvm::make_early_inc_range(f.getBody().front())) {
      auto wait = dyn_cast<gpu::WaitOp>(op);
      if (!wait)
        continue;
      if (!wait.getAsyncToken()) {
        // A blocking wait: remember the chain it ended.
        if (wait.getAsyncDependencies().size() == 1)
          chain = wait.getAsyncDependencies().front();
        wait.erase();
        continue;
      }
      // A new chain without dependencies continues the last one.
      if (wait.getAsyncDependencies().empty() && chain) {
        wait.getAsyncToken().replaceAllUsesWith(chain);
        wait.erase();
      }
    }
  }
};

} // namespace
