//===- PrepareWeights.cpp - Split weight quantization off inference -------===//
//
// An integer inference step quantizes its weights on every call, though the
// weights change only when the model does: at batch 64 that costs as much
// as the int8 GEMMs save. splitWeightPreparation moves every ds.quantize
// whose value depends on no batch input into a step of its own, run once
// per model, whose results become state the inference step reads: the
// deployment form (quantize once, run many), inside the training-step
// contract.
//
//===----------------------------------------------------------------------===//

#include "../StepUtils.h"

#include "ds/Analysis/StepQueries.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/IR/TrainingContract.h"
#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

namespace {

/// Whether `v` depends on a batch input (memoised over `known`).
bool dependsOnBatch(Value v, const TrainingContract &contract,
                    llvm::DenseMap<Value, bool> &known) {
  if (auto it = known.find(v); it != known.end())
    return it->second;
  bool result;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    result = contract.args[arg.getArgNumber()].role == ArgRole::Input;
  } else {
    Operation *op = v.getDefiningOp();
    // Ops with regions could read anything; treat them as batch-dependent.
    result = op->getNumRegions() > 0;
    for (Value operand : op->getOperands())
      result = result || dependsOnBatch(operand, contract, known);
  }
  known[v] = result;
  return result;
}

/// Erases the ops of `func` that have no uses and no effects, last first.
void eraseDeadOps(FunctionOpInterface func) {
  for (Block &block : func.getFunctionBody())
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
      if (isOpTriviallyDead(&op))
        op.erase();
}

} // namespace

FailureOr<FunctionOpInterface>
mlir::ds::splitWeightPreparation(FunctionOpInterface func) {
  FailureOr<TrainingContract> contract = TrainingContract::fromFunction(func);
  if (failed(contract))
    return failure();
  llvm::DenseMap<Value, bool> known;
  SmallVector<QuantizeOp> weights;
  func.walk([&](QuantizeOp q) {
    if (!dependsOnBatch(q.getResult(), *contract, known))
      weights.push_back(q);
  });
  if (weights.empty())
    return FunctionOpInterface();

  // One state per quantized weight, `of` its parameter (the contract wants
  // `of` to name a parameter); a second one of the same parameter, or one
  // of no parameter, gets a numbered kind instead.
  StepEditor ed(func);
  SmallVector<Value> states;
  llvm::StringSet<> used;
  for (auto [i, q] : llvm::enumerate(weights)) {
    std::string kind = kQuantizedWeightStateKind.str(), of;
    if (BlockArgument p = traceToParam(q.getInput()))
      of = getParamName(p).str();
    if (of.empty() || !used.insert(of).second)
      kind += "." + std::to_string(i);
    states.push_back(ed.addState(kind, of, q.getType(), InitKind::zeros));
  }

  // The preparation step: the same arguments, a zero loss (the contract
  // wants one) and the update of every new state.
  auto prep = cast<FunctionOpInterface>(func->clone());
  SymbolTable::setSymbolName(prep, (func.getName() + "_weights").str());
  SmallVector<QuantizeOp> prepWeights;
  {
    SmallVector<QuantizeOp> all;
    prep.walk([&](QuantizeOp q) { all.push_back(q); });
    SmallVector<QuantizeOp> original;
    func.walk([&](QuantizeOp q) { original.push_back(q); });
    for (auto [o, c] : llvm::zip_equal(original, all))
      if (llvm::is_contained(weights, o))
        prepWeights.push_back(c);
  }
  {
    Block &body = prep.getFunctionBody().front();
    Operation *ret = body.getTerminator();
    OpBuilder b(ret);
    auto f32 = RankedTensorType::get({}, b.getF32Type());
    Value zero = arith::ConstantOp::create(
        b, prep.getLoc(), f32,
        DenseElementsAttr::get(f32, b.getFloatAttr(b.getF32Type(), 0.0)));
    SmallVector<Value> results{zero};
    SmallVector<DictionaryAttr> attrs{b.getDictionaryAttr(
        b.getNamedAttr(DSDialect::kLossAttrName, b.getUnitAttr()))};
    for (auto [q, state] : llvm::zip_equal(prepWeights, states)) {
      results.push_back(q.getResult());
      attrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
          DSDialect::kUpdateAttrName,
          b.getI64IntegerAttr(cast<BlockArgument>(state).getArgNumber()))));
    }
    ret->setOperands(results);
    SmallVector<Type> types;
    for (Value r : results)
      types.push_back(r.getType());
    prep.setType(
        FunctionType::get(func->getContext(), prep.getArgumentTypes(), types));
    prep.setAllResultAttrs(attrs);
    eraseDeadOps(prep);
  }

  // The inference step reads the prepared weights.
  for (auto [q, state] : llvm::zip_equal(weights, states)) {
    q.getResult().replaceAllUsesWith(state);
    q->erase();
  }
  eraseDeadOps(func);
  return prep;
}
