//===- StepQueries.cpp - Small read-only queries on a step ----------------===//
//
// What counts as a view is decided by the ops themselves (the DataMovement
// trait), plus casts, so that every pass traces parameters the same way.
//
//===----------------------------------------------------------------------===//

#include "ds/Analysis/StepQueries.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::ds;

bool mlir::ds::isForwardOp(Operation *op) {
  return !op->hasAttr(DSDialect::kVjpOfAttrName);
}

bool mlir::ds::isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

bool mlir::ds::isLookThroughOp(Operation *op) {
  // Casts and fake quantization round and so are not DataMovement, but the
  // value they round is still the same parameter or activation.
  return op->hasTrait<ds::OpTrait::DataMovement>() ||
         isa<CastOp, FakeQuantOp>(op);
}

BlockArgument mlir::ds::traceToParam(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isLookThroughOp(def))
      return nullptr;
    v = def->getOperand(0);
  }
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg)
    return nullptr;
  auto func = dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
  if (!func || !func.getArgAttr(arg.getArgNumber(), DSDialect::kParamAttrName))
    return nullptr;
  return arg;
}

SmallVector<BlockArgument> mlir::ds::consumedParams(Operation *op) {
  SmallVector<BlockArgument> params;
  for (Value v : op->getOperands())
    if (BlockArgument arg = traceToParam(v))
      params.push_back(arg);
  return params;
}

StringRef mlir::ds::getParamName(BlockArgument param) {
  auto func = dyn_cast<FunctionOpInterface>(param.getOwner()->getParentOp());
  if (!func)
    return StringRef();
  auto name = func.getArgAttrOfType<StringAttr>(param.getArgNumber(),
                                                DSDialect::kParamAttrName);
  return name ? name.getValue() : StringRef();
}
