//===- MergeGPUModules.cpp - One gpu.module for all kernels ---------------===//
//
// Implements ds-merge-gpu-modules (see Passes.td): the outlined kernels of a
// step compile as one PTX module with one ptxas run, and load as one cubin.
//
//===----------------------------------------------------------------------===//

#include "ds/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/DenseMap.h"

namespace mlir::ds {
#define GEN_PASS_DEF_MERGEGPUMODULESPASS
#include "ds/Conversion/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;

namespace {

/// Whether `a` and `b` compile alike (same targets, offloading handler and
/// other attributes), so that their kernels may share a binary.
bool compatible(gpu::GPUModuleOp a, gpu::GPUModuleOp b) {
  auto attrs = [](gpu::GPUModuleOp m) {
    SmallVector<NamedAttribute> kept;
    for (NamedAttribute attr : m->getAttrs())
      if (attr.getName() != SymbolTable::getSymbolAttrName())
        kept.push_back(attr);
    return kept;
  };
  return attrs(a) == attrs(b);
}

struct MergeGPUModulesPass
    : public mlir::ds::impl::MergeGPUModulesPassBase<MergeGPUModulesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::GPUModuleOp> modules(module.getOps<gpu::GPUModuleOp>());
    if (modules.size() < 2)
      return;
    gpu::GPUModuleOp target = modules.front();
    SymbolTable targetSymbols(target);
    // Old kernel reference -> new one, for the launches.
    llvm::DenseMap<Attribute, SymbolRefAttr> moved;
    for (gpu::GPUModuleOp source : llvm::drop_begin(modules)) {
      if (!compatible(source, target))
        continue;
      StringAttr sourceName = source.getSymNameAttr();
      // Rename in the source first, so that its internal uses follow: a
      // kernel takes its module's name (unique among modules, and kernels
      // keep the names the merged modules had), anything else a fresh one.
      SmallVector<Operation *> symbols;
      for (Operation &op : source.getBody()->without_terminator())
        if (SymbolTable::getSymbolName(&op))
          symbols.push_back(&op);
      for (Operation *op : symbols) {
        StringAttr oldName = SymbolTable::getSymbolName(op);
        bool kernel =
            isa<gpu::GPUFuncOp>(op) && cast<gpu::GPUFuncOp>(op).isKernel();
        StringAttr newName = oldName;
        if (kernel)
          newName = sourceName;
        if (targetSymbols.lookup(newName)) {
          // A helper both modules cloned: give this copy a fresh name.
          unsigned suffix = 0;
          do
            newName = StringAttr::get(&getContext(),
                                      sourceName.getValue() + "_" +
                                          oldName.getValue() +
                                          (suffix ? "_" + Twine(suffix) : ""));
          while (targetSymbols.lookup(newName) && ++suffix);
        }
        if (newName != oldName &&
            failed(SymbolTable::replaceAllSymbolUses(op, newName, source))) {
          source.emitError("cannot rename '") << oldName << "'";
          return signalPassFailure();
        }
        SymbolTable::setSymbolName(op, newName);
        if (kernel)
          moved[SymbolRefAttr::get(sourceName,
                                   {FlatSymbolRefAttr::get(oldName)})] =
              SymbolRefAttr::get(target.getSymNameAttr(),
                                 {FlatSymbolRefAttr::get(newName)});
      }
      for (Operation *op : symbols) {
        op->moveBefore(target.getBody(), target.getBody()->end());
        targetSymbols.insert(op);
      }
    }
    // Every launch of a moved kernel now names the merged module.
    module.walk([&](gpu::LaunchFuncOp launch) {
      auto it = moved.find(launch.getKernel());
      if (it != moved.end())
        launch.setKernelAttr(it->second);
    });
    for (gpu::GPUModuleOp source : llvm::drop_begin(modules))
      if (source.getBody()->without_terminator().empty())
        source.erase();
  }
};

} // namespace
