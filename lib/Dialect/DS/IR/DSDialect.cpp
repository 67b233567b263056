//===- DSDialect.cpp - ds dialect -----------------------------------------===//
//
// Registers the ds ops and attributes and verifies the attributes of the
// training-step contract wherever they appear: on functions (`ds.train_step`),
// on their arguments and results, and on the module (`ds.contract`).
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/IR/TrainingContract.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::ds;

#include "ds/Dialect/DS/IR/DSDialect.cpp.inc"

void DSDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ds/Dialect/DS/IR/DSOps.cpp.inc"
      >();
  registerAttributes();
}

/// Discardable op attributes that ds passes attach to ops, and what their
/// values must be. Anything else under the `ds.` prefix is a typo.
static LogicalResult verifyOpAnnotation(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().strref();
  // Names from the front end (module path) and analyses (role), and the link
  // from a generated backward op to the forward op it differentiates.
  if (name == DSDialect::kModuleAttrName || name == DSDialect::kRoleAttrName ||
      name == DSDialect::kVjpOfAttrName) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitOpError("attribute '") << name << "' must be a string";
    return success();
  }
  // The forward op an op is, or differentiates: ds-autodiff numbers each
  // differentiated forward op and gives its backward ops the same number,
  // so passes after it (precision assignment) treat a gradient GEMM
  // according to the forward op it belongs to.
  if (name == DSDialect::kOpIdAttrName) {
    if (!isa<IntegerAttr>(attr.getValue()))
      return op->emitOpError("attribute 'ds.op_id' must be an integer");
    return success();
  }
  // Unit markers: the backward seed (the cotangent of the loss) that
  // ds-autodiff creates and loss scaling multiplies, and a tensor-level
  // matmul whose accumulator is not read (ds-prepare-library-gemms).
  if (name == DSDialect::kSeedAttrName ||
      name == DSDialect::kGemmOverwriteAttrName ||
      name == DSDialect::kQuantAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitOpError("attribute '") << name << "' is a unit attribute";
    return success();
  }
  if (name == DSDialect::kGradsAttrName) {
    auto names = dyn_cast<ArrayAttr>(attr.getValue());
    if (!names || !llvm::all_of(names, llvm::IsaPred<StringAttr>))
      return op->emitOpError("attribute '")
             << name << "' must be an array of parameter names";
    return success();
  }
  if (name == DSDialect::kQuantKeepAttrName) {
    auto t = dyn_cast<TypeAttr>(attr.getValue());
    if (!t || !isa<FloatType>(t.getValue()))
      return op->emitOpError("attribute '")
             << name << "' must be a float type (bf16, f16 or f32)";
    return success();
  }
  return op->emitOpError("unknown ds attribute '") << name << "'";
}

LogicalResult DSDialect::verifyOperationAttribute(Operation *op,
                                                  NamedAttribute attr) {
  StringRef name = attr.getName().strref();
  if (name == kTrainStepAttrName) {
    auto func = dyn_cast<FunctionOpInterface>(op);
    if (!func)
      return op->emitOpError("'")
             << kTrainStepAttrName << "' may only mark a function";
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitOpError("'")
             << kTrainStepAttrName << "' is a unit attribute";
    return TrainingContract::fromFunction(func);
  }
  if (name == kContractAttrName) {
    if (!isa<ModuleOp>(op))
      return op->emitOpError("'")
             << kContractAttrName << "' may only be attached to a module";
    auto table = dyn_cast<DictionaryAttr>(attr.getValue());
    if (!table)
      return op->emitOpError("'")
             << kContractAttrName
             << "' must be a dictionary from function name to contract";
    for (NamedAttribute entry : table) {
      if (failed(TrainingContract::fromAttr(entry.getName().strref(),
                                            entry.getValue(),
                                            [&] { return op->emitOpError(); })))
        return failure();
    }
    return success();
  }
  // ds-assign-precision's record of its decisions (per step function, a
  // list of dictionaries), the time-level schedule the runner follows, and
  // ds-insert-optimizer's record of the optimizer it compiled in (per step
  // function, its settings as text), and ds-sparsify-matmul's settings (per
  // step function).
  if (name == kPrecisionMapAttrName || name == kPrecisionScheduleAttrName ||
      name == kOptimizerAttrName || name == kSparsityAttrName ||
      name == kDataParallelAttrName) {
    if (!isa<ModuleOp>(op))
      return op->emitOpError("'")
             << name << "' may only be attached to a module";
    if (!isa<DictionaryAttr>(attr.getValue()))
      return op->emitOpError("'") << name << "' must be a dictionary";
    return success();
  }
  return verifyOpAnnotation(op, attr);
}

/// The function owning a region argument or result attribute must be a
/// training step; the whole contract is checked there.
static LogicalResult requireTrainStep(Operation *op, StringRef attrName,
                                      StringRef where, unsigned index) {
  if (!isa<FunctionOpInterface>(op))
    return op->emitOpError("'") << attrName << "' on " << where << " #" << index
                                << " is only valid on a function";
  if (!op->hasAttr(DSDialect::kTrainStepAttrName))
    return op->emitOpError("'") << attrName << "' on " << where << " #" << index
                                << " requires the function to be marked '"
                                << DSDialect::kTrainStepAttrName << "'";
  return success();
}

LogicalResult DSDialect::verifyRegionArgAttribute(Operation *op,
                                                  unsigned regionIndex,
                                                  unsigned argIndex,
                                                  NamedAttribute attr) {
  if (failed(verifyContractArgAttr(op, argIndex, attr)))
    return failure();
  return requireTrainStep(op, attr.getName().strref(), "argument", argIndex);
}

LogicalResult DSDialect::verifyRegionResultAttribute(Operation *op,
                                                     unsigned regionIndex,
                                                     unsigned resultIndex,
                                                     NamedAttribute attr) {
  if (failed(verifyContractResultAttr(op, resultIndex, attr)))
    return failure();
  return requireTrainStep(op, attr.getName().strref(), "result", resultIndex);
}
