//===- ExportContract.cpp - Record contracts in the module ----------------===//
//
// Implements ds-export-contract: the training-step contract moves from the
// function's argument and result attributes, which lowering does not keep,
// into the module-level `ds.contract` table, which it does.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/TrainingContract.h"
#include "ds/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace mlir::ds {
#define GEN_PASS_DEF_EXPORTCONTRACTPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

/// Removes every contract attribute from `func`.
static void stripContract(FunctionOpInterface func) {
  func->removeAttr(DSDialect::kTrainStepAttrName);
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    for (StringRef name : {DSDialect::kParamAttrName, DSDialect::kInputAttrName,
                           DSDialect::kStateAttrName, DSDialect::kInitAttrName,
                           DSDialect::kOptimAttrName, kRangeAttrName})
      func.removeArgAttr(i, name);
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    for (StringRef name :
         {DSDialect::kLossAttrName, DSDialect::kUpdateAttrName,
          DSDialect::kGradAttrName, DSDialect::kMetricAttrName})
      func.removeResultAttr(i, StringAttr::get(func->getContext(), name));
}

LogicalResult mlir::ds::exportContracts(ModuleOp module, bool strip) {
  MLIRContext *ctx = module.getContext();
  NamedAttrList table;
  if (auto existing =
          module->getAttrOfType<DictionaryAttr>(DSDialect::kContractAttrName))
    table.append(existing.getValue());

  for (auto func : module.getOps<FunctionOpInterface>()) {
    if (!func->hasAttr(DSDialect::kTrainStepAttrName))
      continue;
    FailureOr<TrainingContract> contract = TrainingContract::fromFunction(func);
    if (failed(contract))
      return failure();
    table.set(func.getName(), contract->toAttr(ctx));
    if (strip)
      stripContract(func);
  }
  if (!table.empty())
    module->setAttr(DSDialect::kContractAttrName, table.getDictionary(ctx));
  return success();
}

namespace {
struct ExportContractPass
    : public mlir::ds::impl::ExportContractPassBase<ExportContractPass> {
  using Base::Base;
  void runOnOperation() override {
    if (failed(exportContracts(getOperation(), strip)))
      signalPassFailure();
  }
};
} // namespace
