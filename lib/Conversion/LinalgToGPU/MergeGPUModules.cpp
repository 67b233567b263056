//===- MergeGPUModules.cpp - One gpu.module for all kernels ---------------===//
//
// Implements ds-merge-gpu-modules (see Passes.td): the outlined kernels of a
// step compile as one PTX module with one ptxas run, and load as one cubin.
//
//===----------------------------------------------------------------------===//

#include "ds/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"

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

/// `op`'s attributes without its symbol name.
SmallVector<NamedAttribute> attrsButName(Operation *op) {
  SmallVector<NamedAttribute> kept;
  for (NamedAttribute attr : op->getAttrs())
    if (attr.getName() != SymbolTable::getSymbolAttrName())
      kept.push_back(attr);
  return kept;
}

/// A hash of what isDuplicate compares: the attributes (but the name) and
/// every nested operation's name, attributes and types.
llvm::hash_code shapeHash(Operation *symbol) {
  llvm::hash_code h = llvm::hash_combine(
      symbol->getName(), llvm::hash_combine_range(attrsButName(symbol)));
  symbol->walk([&](Operation *op) {
    if (op != symbol)
      h = llvm::hash_combine(h, OperationEquivalence::computeHash(
                                    op, OperationEquivalence::ignoreHashValue,
                                    OperationEquivalence::ignoreHashValue,
                                    OperationEquivalence::IgnoreLocations));
  });
  return h;
}

/// Whether two symbols of the same kind are copies of each other: equal
/// attributes but for the name, and equivalent regions.
bool isDuplicate(Operation *a, Operation *b) {
  if (a->getName() != b->getName() || attrsButName(a) != attrsButName(b) ||
      a->getNumRegions() != b->getNumRegions())
    return false;
  for (auto [ra, rb] : llvm::zip(a->getRegions(), b->getRegions()))
    if (!OperationEquivalence::isRegionEquivalentTo(
            &ra, &rb, OperationEquivalence::IgnoreLocations))
      return false;
  return true;
}

/// Erases the symbols of `target` that duplicate an earlier one and returns
/// old name -> name kept; the caller points the uses at the kept ones (one
/// walk for all: a walk per symbol would be quadratic in the module).
/// Constant globals go first, so that kernels which differed only in the
/// name of the same constant become duplicates too. (A step's layers of
/// equal shapes outline equal kernels: the 12-layer GPT's 1229 launches
/// need 256 kernels.)
template <typename OpTy>
llvm::DenseMap<StringAttr, StringAttr>
removeDuplicates(gpu::GPUModuleOp target, function_ref<bool(OpTy)> eligible) {
  llvm::DenseMap<StringAttr, StringAttr> replaced;
  llvm::MapVector<llvm::hash_code, SmallVector<OpTy, 1>> kept;
  for (OpTy op : llvm::make_early_inc_range(target.getOps<OpTy>())) {
    if (!eligible(op))
      continue;
    SmallVector<OpTy, 1> &same = kept[shapeHash(op)];
    auto original =
        llvm::find_if(same, [&](OpTy k) { return isDuplicate(k, op); });
    if (original == same.end()) {
      same.push_back(op);
      continue;
    }
    replaced[SymbolTable::getSymbolName(op)] =
        SymbolTable::getSymbolName(*original);
    op->erase();
  }
  return replaced;
}

/// Points every reference to a renamed symbol of `target` (from inside it)
/// at the name kept.
void renameUses(gpu::GPUModuleOp target,
                const llvm::DenseMap<StringAttr, StringAttr> &renamed) {
  if (renamed.empty())
    return;
  AttrTypeReplacer replacer;
  replacer.addReplacement(
      [&](FlatSymbolRefAttr ref) -> std::optional<Attribute> {
        auto it = renamed.find(ref.getAttr());
        if (it == renamed.end())
          return std::nullopt;
        return FlatSymbolRefAttr::get(it->second);
      });
  target.walk([&](Operation *op) {
    replacer.replaceElementsIn(op, /*replaceAttrs=*/true);
  });
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
    renameUses(target, removeDuplicates<memref::GlobalOp>(
                           target, [](memref::GlobalOp g) {
                             // A public one might be looked up by its name.
                             return g.getConstant() && g.isPrivate();
                           }));
    llvm::DenseMap<StringAttr, StringAttr> kernels =
        removeDuplicates<gpu::GPUFuncOp>(
            target, [](gpu::GPUFuncOp f) { return f.isKernel(); });
    if (!kernels.empty())
      module.walk([&](gpu::LaunchFuncOp launch) {
        if (launch.getKernelModuleName() != target.getSymNameAttr())
          return;
        auto it = kernels.find(launch.getKernelName());
        if (it != kernels.end())
          launch.setKernelAttr(SymbolRefAttr::get(
              target.getSymNameAttr(), {FlatSymbolRefAttr::get(it->second)}));
      });
    for (gpu::GPUModuleOp source : llvm::drop_begin(modules))
      if (source.getBody()->without_terminator().empty())
        source.erase();
  }
};

} // namespace
