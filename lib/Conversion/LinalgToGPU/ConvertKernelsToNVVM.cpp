//===- ConvertKernelsToNVVM.cpp - kernels to NVVM, 32-bit where they fit --===//
//
// Implements ds-convert-kernels-to-nvvm (see Passes.td): upstream's
// convert-gpu-to-nvvm with bare-pointer kernel arguments, and index
// arithmetic in 32 bits when every index a kernel of the module can form
// fits, as PyTorch's kernels check with canUse32BitIndexMath.
//
//===----------------------------------------------------------------------===//

#include "ds/Conversion/Passes.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Pass/PassManager.h"

namespace mlir::ds {
#define GEN_PASS_DEF_CONVERTKERNELSTONVVMPASS
#include "ds/Conversion/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;

namespace {

/// The largest element index a memref of `type` addresses (its offset and
/// the last element along every stride), or nullopt when not static.
std::optional<int64_t> largestIndex(MemRefType type) {
  if (!type.hasStaticShape())
    return std::nullopt;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) ||
      ShapedType::isDynamic(offset) ||
      llvm::any_of(strides, ShapedType::isDynamic))
    return std::nullopt;
  int64_t last = offset;
  for (auto [size, stride] : llvm::zip(type.getShape(), strides)) {
    if (size == 0)
      return offset;
    last += (size - 1) * stride;
  }
  return last;
}

} // namespace

bool mlir::ds::kernelsFitIn32BitIndices(gpu::GPUModuleOp module,
                                        int64_t limit) {
  auto fits = [&](Value v) {
    auto type = dyn_cast<MemRefType>(v.getType());
    if (!type)
      return true;
    std::optional<int64_t> last = largestIndex(type);
    return last && *last >= 0 && *last < limit;
  };
  WalkResult walk = module.walk([&](Operation *op) {
    // An index argument comes from the host in 64 bits.
    if (auto func = dyn_cast<gpu::GPUFuncOp>(op);
        func && func.isKernel() &&
        llvm::any_of(func.getArgumentTypes(), llvm::IsaPred<IndexType>))
      return WalkResult::interrupt();
    if (auto c = dyn_cast<arith::ConstantIndexOp>(op);
        c && (c.value() >= limit || c.value() <= -limit))
      return WalkResult::interrupt();
    if (!llvm::all_of(op->getResults(), fits))
      return WalkResult::interrupt();
    for (Region &r : op->getRegions())
      for (Block &b : r)
        if (!llvm::all_of(b.getArguments(), fits))
          return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return !walk.wasInterrupted();
}

namespace {

struct ConvertKernelsToNVVMPass
    : public mlir::ds::impl::ConvertKernelsToNVVMPassBase<
          ConvertKernelsToNVVMPass> {
  using Base::Base;
  void runOnOperation() override {
    gpu::GPUModuleOp module = getOperation();
    ConvertGpuOpsToNVVMOpsOptions nvvm;
    nvvm.useBarePtrCallConv = true;
    if (index32 && ds::kernelsFitIn32BitIndices(module, ds::kIndex32Limit))
      nvvm.indexBitwidth = 32;
    OpPassManager pm(gpu::GPUModuleOp::getOperationName());
    pm.addPass(createConvertGpuOpsToNVVMOps(nvvm));
    if (failed(runPipeline(pm, module)))
      signalPassFailure();
  }
};

} // namespace
