//===- Autodiff.cpp - Reverse-mode differentiation of a step --------------===//
//
// Implements ds-autodiff: appends to a forward + loss training step the
// backward pass that computes the gradient of the loss with respect to every
// `ds.param` argument, and returns each gradient as a `ds.grad` result.
//
// The algorithm is the textbook one, shaped by the training-step contract:
//  1. Activity analysis: a value is active when it is a floating-point
//     tensor that depends on a parameter and that the loss depends on. Only
//     active values get cotangents; integer values, inputs and constants
//     never do.
//  2. The seed, d loss / d loss = 1, is an explicit constant marked
//     `ds.seed`, so that loss scaling can find and scale it.
//  3. Ops are visited in reverse; each active op builds its vector-Jacobian
//     product through DifferentiableOpInterface, at the end of the body.
//     Cotangents of values with several uses are summed (fan-out).
//  4. Each parameter's cotangent (zeros when the loss does not depend on
//     it) becomes a result marked `ds.grad = <argument index>`.
// Every op the backward creates carries `ds.vjp_of` (the forward op's name),
// `ds.op_id` (a number it shares with the forward op) and the forward op's
// `ds.module` / `ds.role`, so later passes can treat a gradient GEMM
// according to the layer and the op it belongs to.
//
//===----------------------------------------------------------------------===//

#include "ds/Analysis/Activity.h"
#include "ds/Analysis/StepQueries.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/IR/TrainingContract.h"
#include "ds/Transforms/Passes.h"

#include "StepUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::ds {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

LogicalResult mlir::ds::differentiateTrainingStep(FunctionOpInterface func) {
  // Callable outside a pass manager: make sure what it builds is loaded.
  FailureOr<TrainingContract> contract = TrainingContract::fromFunction(func);
  if (failed(contract))
    return failure();
  if (contract->hasGrads())
    return func->emitOpError("the step already returns "
                             "gradients ('")
           << DSDialect::kGradAttrName
           << "' results); differentiate a forward + loss step";
  if (contract->hasParamUpdates())
    return func->emitOpError("the step already updates its "
                             "parameters; run ds-autodiff before "
                             "ds-insert-optimizer");
  Region &region = func.getFunctionBody();
  if (!region.hasOneBlock())
    return func->emitOpError("expects a function with one block");
  Block &body = region.front();
  Operation *terminator = body.getTerminator();
  Value loss = terminator->getOperand(contract->getLossIndex());

  SmallVector<unsigned> paramIndices = contract->getArgIndices(ArgRole::Param);
  SmallVector<Value> params;
  for (unsigned i : paramIndices)
    params.push_back(body.getArgument(i));
  ActivityAnalysis activity(body, params, loss);

  // The forward ops, before the backward is appended.
  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator())
    forward.push_back(&op);

  OpBuilder b(terminator);
  CreatedOps created;
  b.setListener(&created);
  llvm::DenseMap<Value, Value> grads;
  int64_t nextOpId = 0;
  auto accumulate = [&](Value v, Value g) {
    auto [it, inserted] = grads.try_emplace(v, g);
    if (!inserted)
      it->second = AddOp::create(b, g.getLoc(), it->second, g);
  };

  // The seed: d loss / d loss = 1, marked for loss scaling.
  if (activity.isActive(loss)) {
    auto type = cast<RankedTensorType>(loss.getType());
    auto seed = arith::ConstantOp::create(
        b, loss.getLoc(), type,
        DenseElementsAttr::get(
            type, FloatAttr::get(cast<FloatType>(type.getElementType()), 1.0)));
    seed->setAttr(DSDialect::kSeedAttrName, b.getUnitAttr());
    grads[loss] = seed;
  }

  for (Operation *op : llvm::reverse(forward)) {
    bool hasActiveGrad = llvm::any_of(op->getResults(), [&](Value r) {
      return activity.isActive(r) && grads.count(r);
    });
    if (!hasActiveGrad)
      continue;
    auto differentiable = dyn_cast<DifferentiableOpInterface>(op);
    if (!differentiable)
      return op->emitOpError("no gradient rule for '")
             << op->getName()
             << "', which lies between the parameters and the loss";
    SmallVector<Value> resultGrads;
    for (Value r : op->getResults())
      resultGrads.push_back(activity.isActive(r) ? grads.lookup(r) : Value());
    size_t firstCreated = created.size();
    SmallVector<Value> operandGrads;
    if (failed(differentiable.buildVJP(b, resultGrads, operandGrads)))
      return op->emitOpError("building the gradient failed");
    if (operandGrads.size() != op->getNumOperands())
      return op->emitOpError("gradient rule returned ")
             << operandGrads.size() << " gradients for " << op->getNumOperands()
             << " operands";
    for (auto [operand, g] : llvm::zip_equal(op->getOperands(), operandGrads))
      if (g && activity.isActive(operand))
        accumulate(operand, g);
    // Tag what this rule (and the accumulations) created, and link it to
    // the forward op by a shared number.
    StringAttr vjpOf = b.getStringAttr(op->getName().getStringRef());
    IntegerAttr opId = b.getI64IntegerAttr(nextOpId++);
    op->setAttr(DSDialect::kOpIdAttrName, opId);
    for (Operation *newOp : created.getOps().drop_front(firstCreated)) {
      newOp->setAttr(DSDialect::kVjpOfAttrName, vjpOf);
      newOp->setAttr(DSDialect::kOpIdAttrName, opId);
      for (StringRef name :
           {DSDialect::kModuleAttrName, DSDialect::kRoleAttrName})
        if (Attribute a = op->getAttr(name))
          newOp->setAttr(name, a);
    }
  }

  // One ds.grad result per parameter, zeros for the unused ones.
  SmallVector<Value> newResults(terminator->getOperands());
  unsigned numResults = func.getNumResults();
  for (auto [k, argIndex] : llvm::enumerate(paramIndices)) {
    Value param = body.getArgument(argIndex);
    Value g = grads.lookup(param);
    auto type = cast<RankedTensorType>(param.getType());
    if (!g)
      g = arith::ConstantOp::create(
          b, param.getLoc(), type,
          DenseElementsAttr::get(
              type,
              FloatAttr::get(cast<FloatType>(type.getElementType()), 0.0)));
    newResults.push_back(g);
    if (failed(func.insertResult(
            numResults + k, type,
            b.getDictionaryAttr(b.getNamedAttr(
                DSDialect::kGradAttrName, b.getI64IntegerAttr(argIndex))))))
      return failure();
  }
  terminator->setOperands(newResults);

  // Rules compute every operand's gradient; drop the ones nobody needs
  // (inputs, labels), newest first so that chains die together.
  for (Operation *op : llvm::reverse(created.getOps()))
    if (isOpTriviallyDead(op))
      op->erase();
  return success();
}

namespace {
struct AutodiffPass : public mlir::ds::impl::AutodiffPassBase<AutodiffPass> {
  void runOnOperation() override {
    mlir::ds::detail::ScopedPassNamePrefix named(&getContext(), getArgument());
    ModuleOp module = getOperation();
    if (failed(mlir::ds::detail::forEachTrainStep(module, "ds-autodiff",
                                                  differentiateTrainingStep)))
      signalPassFailure();
  }
};
} // namespace
