//===- ImportLinalg.cpp - Raise torch-mlir linalg-on-tensors into ds -----===//
//
// Implements ds-import-linalg. The input is torch-mlir's linalg-on-tensors
// output: one function, weights as arguments, bodies of `linalg.generic`
// ops, named contractions, convolutions and pooling, tensor reshapes. The
// pass
//  1. attaches the training-step contract given as options (args, results)
//     to the function that has none;
//  2. refuses `tm_tensor` ops, which have no ds meaning (located error);
//  3. raises every op it recognises, in program order, so that each op sees
//     its producers already raised (a matmul finds the ds.transpose of its
//     weight); then constant `tensor.pad`s nobody absorbed;
//  4. removes the dead upstream ops (fills, empties, absorbed transposes and
//     pads, scalar constants);
//  5. checks, on a training step, that no upstream op is left between the
//     parameters (or state) and the loss that ds-autodiff has no gradient
//     rule for: an elementwise `linalg.generic` whose body has no ds
//     equivalent (sin, erf, floor, ...) stays and is differentiated from
//     its scalar body (ds/Dialect/Linalg/GenericVJP.h); and reports the
//     fraction raised as a remark.
// Upstream ops that stay (integer label arithmetic, masks, iotas) are
// tolerated by ds-autodiff, which never differentiates them, and lowered
// by ds-cpu-pipeline as they are.
//
//===----------------------------------------------------------------------===//

#include "ds/Transforms/ImportLinalg.h"
#include "ds/Analysis/Activity.h"
#include "ds/Analysis/StepQueries.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/IR/TrainingContract.h"
#include "ds/Dialect/Linalg/GenericVJP.h"
#include "ds/Transforms/Passes.h"

#include "StepUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/FormatVariadic.h"

namespace mlir::ds {
#define GEN_PASS_DEF_IMPORTLINALGPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

/// The first non-ds op of `body` that produces an active value: one that
/// depends on `sources` (parameters and state) and that `loss` depends on,
/// and that ds-autodiff has no gradient rule for. Elementwise generics the
/// raise left are differentiated from their scalar body (GenericVJP.h);
/// `why` says what stops one that cannot be.
static Operation *findBlockingOp(Block &body, ArrayRef<Value> sources,
                                 Value loss, std::string &why) {
  ActivityAnalysis activity(body, sources, loss);
  for (Operation &op : body) {
    if (isa<DSDialect>(op.getDialect()) || !activity.hasActiveResult(&op))
      continue;
    if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
      why = whyNotDifferentiable(generic);
      if (why.empty())
        continue;
    }
    return &op;
  }
  return nullptr;
}

LogicalResult mlir::ds::importLinalg(FunctionOpInterface func,
                                     ImportReport &report) {
  MLIRContext *ctx = func->getContext();
  Region &region = func.getFunctionBody();
  if (region.empty())
    return success();
  if (!region.hasOneBlock())
    return func->emitOpError("expects a function with one "
                             "block");
  Block &body = region.front();

  // tm_tensor ops (scatter, sort, attention) have no ds meaning here.
  WalkResult walk = func->walk([&](Operation *op) {
    if (op->getName().getDialectNamespace() == "tm_tensor") {
      op->emitOpError("cannot handle '")
          << op->getName()
          << "' (tm_tensor ops have no ds equivalent; export the model "
             "without it)";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();

  report = ImportReport();
  SmallVector<Operation *> original;
  for (Operation &op : body.without_terminator())
    original.push_back(&op);
  report.numOps = original.size();

  // Keeps the ops the import created, so that what is left of the input
  // can be counted.
  CreatedOps created;
  IRRewriter rewriter(ctx, &created);
  auto tryRaise = [&](Operation *op, bool raisePad) {
    FailureOr<SmallVector<Value>> repl = raiseOp(rewriter, op, raisePad);
    if (failed(repl))
      return;
    for (auto [res, v] : llvm::zip_equal(op->getResults(), *repl))
      if (v)
        rewriter.replaceAllUsesWith(res, v);
    if (op->use_empty())
      rewriter.eraseOp(op);
  };
  // Program order: producers are raised before their consumers look at
  // them. Pads go last, once convolutions and pooling have absorbed theirs.
  for (Operation *op : original)
    if (!isa<tensor::PadOp>(op))
      tryRaise(op, false);
  SmallVector<Operation *> pads;
  for (Operation &op : body)
    if (isa<tensor::PadOp>(op) && !op.use_empty())
      pads.push_back(&op);
  for (Operation *op : pads)
    tryRaise(op, true);

  // Dead code: what the raised ops absorbed and what failed attempts left.
  bool changed = true;
  while (changed) {
    changed = false;
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (isOpTriviallyDead(&op)) {
        rewriter.eraseOp(&op);
        changed = true;
      }
  }

  unsigned left = 0;
  for (Operation &op : body.without_terminator())
    if (!created.contains(&op)) {
      ++left;
      ++report.left[op.getName().getStringRef()];
    }
  report.numRaised = report.numOps - left;

  if (!func->hasAttr(DSDialect::kTrainStepAttrName))
    return success();
  FailureOr<TrainingContract> contract = TrainingContract::fromFunction(func);
  if (failed(contract))
    return failure();
  SmallVector<Value> sources;
  for (ArgRole role : {ArgRole::Param, ArgRole::State})
    for (unsigned i : contract->getArgIndices(role))
      sources.push_back(body.getArgument(i));
  Value loss = body.getTerminator()->getOperand(contract->getLossIndex());
  std::string why;
  if (Operation *blocking = findBlockingOp(body, sources, loss, why)) {
    InFlightDiagnostic diag = blocking->emitOpError("cannot raise '")
                              << blocking->getName()
                              << "', which lies between the parameters and "
                                 "the loss";
    if (!why.empty())
      diag << ", nor differentiate it: " << why;
    return diag;
  }
  return success();
}

namespace {
struct ImportLinalgPass
    : public mlir::ds::impl::ImportLinalgPassBase<ImportLinalgPass> {
  using Base::Base;

  void runOnOperation() override {
    mlir::ds::detail::ScopedPassNamePrefix named(&getContext(), getArgument());
    ModuleOp module = getOperation();
    if (!args.empty() || !results.empty()) {
      auto target = dyn_cast_or_null<FunctionOpInterface>(
          SymbolTable::lookupSymbolIn(module, funcName));
      if (!target) {
        module.emitError("no function named '")
            << funcName << "' to attach the contract to";
        return signalPassFailure();
      }
      ImportContractSpec spec;
      spec.args.assign(args.begin(), args.end());
      spec.results.assign(results.begin(), results.end());
      if (failed(attachContract(target, spec)))
        return signalPassFailure();
    }
    for (auto func : llvm::to_vector(module.getOps<FunctionOpInterface>())) {
      if (func.isExternal())
        continue;
      ImportReport report;
      if (failed(importLinalg(func, report)))
        return signalPassFailure();
      if (!reportFraction)
        continue;
      std::string leftText;
      for (auto [name, count] : report.left)
        leftText += (leftText.empty() ? "" : ", ") + std::to_string(count) +
                    " " + name.str();
      double pct =
          report.numOps ? 100.0 * report.numRaised / report.numOps : 100.0;
      // At the location only: the function itself would be printed with it.
      mlir::emitRemark(func.getLoc()) << llvm::formatv(
          "ds-import-linalg: raised {0} of {1} ops ({2:F1}%) into ds; left "
          "as upstream ops: {3}",
          report.numRaised, report.numOps, pct,
          leftText.empty() ? std::string("none") : leftText);
    }
  }
};
} // namespace
