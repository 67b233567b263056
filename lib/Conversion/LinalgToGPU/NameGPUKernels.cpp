//===- NameGPUKernels.cpp - Kernels named after their place in the step ---===//
//
// Implements ds-name-gpu-kernels (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "ds/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mlir::ds {
#define GEN_PASS_DEF_NAMEGPUKERNELSPASS
#include "ds/Conversion/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;

namespace {

struct NameGPUKernelsPass
    : public mlir::ds::impl::NameGPUKernelsPassBase<NameGPUKernelsPass> {
  void runOnOperation() override {
    func::FuncOp f = getOperation();
    unsigned next = 0;
    // Launches do not nest, so any walk visits them in program order.
    f.walk([&](gpu::LaunchOp launch) {
      unsigned index = next++;
      if (launch.getFunctionAttr())
        return;
      launch.setFunctionAttr(FlatSymbolRefAttr::get(
          &getContext(), (f.getSymName() + "_k" + Twine(index)).str()));
    });
  }
};

} // namespace
