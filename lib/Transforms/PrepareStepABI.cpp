//===- PrepareStepABI.cpp - Make steps callable by the runner -------------===//
//
// Implements ds-prepare-step-abi: the runner calls a compiled step through
// the C interface with one memref descriptor per argument and out-parameter,
// and relies on the step never writing into its arguments.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace mlir::ds {
#define GEN_PASS_DEF_PREPARESTEPABIPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

LogicalResult mlir::ds::prepareStepABI(ModuleOp module) {
  auto table =
      module->getAttrOfType<DictionaryAttr>(DSDialect::kContractAttrName);
  if (!table)
    return module.emitError("ds-prepare-step-abi: the module has no '")
           << DSDialect::kContractAttrName
           << "' table; run ds-export-contract first";
  Builder b(module.getContext());
  for (NamedAttribute entry : table) {
    auto func = dyn_cast_or_null<FunctionOpInterface>(
        module.lookupSymbol(entry.getName()));
    if (!func || func.isExternal())
      return module.emitError("ds-prepare-step-abi: '")
             << DSDialect::kContractAttrName << "' names '"
             << entry.getName().strref()
             << "', which is not a function with a body in this module";
    func->setAttr("llvm.emit_c_interface", b.getUnitAttr());
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
      func.setArgAttr(i, "bufferization.writable", b.getBoolAttr(false));
  }
  return success();
}

namespace {
struct PrepareStepABIPass
    : public mlir::ds::impl::PrepareStepABIPassBase<PrepareStepABIPass> {
  void runOnOperation() override {
    if (failed(prepareStepABI(getOperation())))
      signalPassFailure();
  }
};
} // namespace
