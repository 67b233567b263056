//===- Activity.cpp - Activity and seed dependence of a step --------------===//
//
// Both analyses are sweeps over one block in program order: values are
// defined before they are used, so a forward sweep sees every operand's
// fact before the op, and a reverse sweep every result's before its
// operands.
//
//===----------------------------------------------------------------------===//

#include "ds/Analysis/Activity.h"
#include "ds/Analysis/StepQueries.h"
#include "ds/Dialect/DS/IR/DSDialect.h"

#include "mlir/IR/Operation.h"

using namespace mlir;
using namespace mlir::ds;

ActivityAnalysis::ActivityAnalysis(Block &body, ArrayRef<Value> sources,
                                   Value target)
    : fromSources(sources.begin(), sources.end()), toTarget({target}) {
  // 1. Forward: what depends on a source. Only float tensors carry the
  //    dependence on (integers and masks have no gradient).
  for (Operation &op : body)
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return fromSources.contains(v); }))
      for (Value r : op.getResults())
        if (isFloatTensor(r))
          fromSources.insert(r);
  // 2. Backward: what the target depends on.
  for (Operation &op : llvm::reverse(body))
    if (llvm::any_of(op.getResults(),
                     [&](Value v) { return toTarget.contains(v); }))
      for (Value v : op.getOperands())
        if (isFloatTensor(v))
          toTarget.insert(v);
}

bool ActivityAnalysis::hasActiveResult(Operation *op) const {
  return llvm::any_of(op->getResults(), [&](Value r) { return isActive(r); });
}

SeedDependence::SeedDependence(Block &body) {
  for (Operation &op : body) {
    bool dep =
        op.hasAttr(DSDialect::kSeedAttrName) ||
        (!isForwardOp(&op) && llvm::any_of(op.getOperands(), [&](Value v) {
          return dependent.contains(v);
        }));
    if (dep)
      dependent.insert(op.result_begin(), op.result_end());
  }
}
