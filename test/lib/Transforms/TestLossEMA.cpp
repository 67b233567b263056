//===- TestLossEMA.cpp - The example pass of docs/WritingAPass.md ---------===//
//
// The smallest complete technique pass: it adds a piece of state with its
// update, a metric, reads the shared `iteration` counter and respects a
// step that loss scaling skips. docs/WritingAPass.md walks through it.
//
//===----------------------------------------------------------------------===//

#include "StepUtils.h"

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/IR/TrainingContract.h"
#include "ds/Dialect/DS/Utils/ScalarBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace mlir::ds::test {
#define GEN_PASS_DECL
#define GEN_PASS_DEF_TESTLOSSEMAPASS
#include "TestPasses.h.inc"
} // namespace mlir::ds::test

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

/// Adds the moving average to one gradient step.
static LogicalResult addLossEMA(FunctionOpInterface func, double decay) {
  // 1. Preconditions: a step with gradients and no update yet; not twice.
  FailureOr<TrainingContract> contract =
      requireGradientStep(func, "ds-test-loss-ema");
  if (failed(contract))
    return failure();
  if (hasStateWithPrefix(*contract, "loss_ema"))
    return func->emitOpError("ds-test-loss-ema: the step already has a "
                             "'loss_ema' state");

  // 2. New state arguments go at the end; new results are appended by
  //    finish(). Everything is built before the terminator.
  StepEditor ed(func);
  OpBuilder b(ed.terminator);
  ScalarBuilder s(b, func.getLoc());
  Type f64 = b.getF64Type();
  Value ema = ed.addState("loss_ema", "", RankedTensorType::get({}, f64),
                          InitKind::zeros);
  FailureOr<Value> iteration = getOrAddIteration(ed, *contract);
  if (failed(iteration))
    return failure();

  // 3. The update, in f64 scalars.
  Value loss = ed.terminator->getOperand(contract->getLossIndex());
  Value old = s.extract(ema);
  Value updated = s.add(s.mul(s.f64(decay), old),
                        s.mul(s.f64(1.0 - decay), s.extract(loss)));
  // A step that loss scaling skips leaves the state as it was.
  if (Value found = findMetric(func, *contract, "found_inf"))
    updated = s.select(
        s.cmpf(arith::CmpFPredicate::OGT, s.extract(found), s.f64(0.5)), old,
        updated);

  // 4. The metric: the bias-corrected average after this step. (It counts
  //    skipped steps too: the example keeps to the one shared counter.)
  Value n =
      arith::SIToFPOp::create(b, func.getLoc(), f64, s.extractRaw(*iteration));
  Value correction =
      s.sub(s.f64(1.0), s.pow(s.f64(decay), s.add(n, s.f64(1.0))));
  ed.addUpdate(ema, s.tensor(updated, f64));
  ed.addMetric("loss_ema", s.tensor(s.div(updated, correction), f64));
  ed.finish();
  return success();
}

namespace {
struct TestLossEMAPass
    : public mlir::ds::test::impl::TestLossEMAPassBase<TestLossEMAPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Options are checked before any IR changes.
    if (!(decay > 0 && decay < 1)) {
      module.emitError("ds-test-loss-ema: decay must be in (0, 1), got ")
          << decay.getValue();
      return signalPassFailure();
    }
    if (failed(forEachTrainStep(
            module, "ds-test-loss-ema",
            [&](FunctionOpInterface func) { return addLossEMA(func, decay); })))
      signalPassFailure();
  }
};
} // namespace

namespace mlir::ds::test {
#define GEN_PASS_REGISTRATION
#include "TestPasses.h.inc"

void registerTestPasses() { registerDSTestPasses(); }
} // namespace mlir::ds::test
