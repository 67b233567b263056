//===- AssignPrecision.cpp - Per-op precisions and FP8 scaling ------------===//
//
// Implements ds-assign-precision: the pass, and the time level around the
// per-step work. PrecisionAssigner (PrecisionAssigner.h) applies the policy
// to one step in phases: decide (roles, one rule per forward op), validate,
// materialise the forward and the backward, keep narrow copies for the
// backward, record the decisions as the module's `ds.precision_map`. Here,
// with a schedule or anomaly steps, a high-precision variant of the step is
// cloned first and given the same state ("observe" mode, nothing rounded),
// so both share one signature, and the `ds.precision_schedule` the runner
// follows says which variant runs when. Everything is built from ds ops, so
// the same IR lowers for the CPU (emulated narrow types) and later for the
// GPU (real FP8 GEMMs).
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Transforms/Passes.h"
#include "ds/Transforms/PrecisionPolicy.h"

#include "PrecisionAssigner.h"
#include "StepUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include <cmath>

namespace mlir::ds {
#define GEN_PASS_DEF_ASSIGNPRECISIONPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
using mlir::ds::detail::PrecisionAssigner;

/// The runner's schedule for `step`: which variant runs which steps, and
/// how long the high variant runs after a gradient anomaly.
static DictionaryAttr scheduleAttr(FunctionOpInterface step,
                                   FunctionOpInterface high,
                                   const PrecisionPolicy &policy,
                                   const AssignPrecisionOptions &options) {
  Builder b(step->getContext());
  StringAttr low = b.getStringAttr(SymbolTable::getSymbolName(step).str());
  StringAttr hi = b.getStringAttr(SymbolTable::getSymbolName(high).str());
  SmallVector<Attribute> phases;
  auto phase = [&](StringRef name, StringAttr variant, int64_t begin,
                   int64_t end) {
    if (begin < end)
      phases.push_back(b.getDictionaryAttr(
          {b.getNamedAttr("phase", b.getStringAttr(name)),
           b.getNamedAttr("variant", variant),
           b.getNamedAttr("begin", b.getI64IntegerAttr(begin)),
           b.getNamedAttr("end", b.getI64IntegerAttr(end))}));
  };
  int64_t total = options.totalSteps;
  if (policy.schedule.enabled) {
    auto warm =
        static_cast<int64_t>(std::llround(policy.schedule.warmup * total));
    auto fine =
        static_cast<int64_t>(std::llround(policy.schedule.finetune * total));
    phase("warm-up", hi, 0, warm);
    phase("policy", low, warm, total - fine);
    phase("fine-tune", hi, total - fine, total);
  }
  return b.getDictionaryAttr(
      {b.getNamedAttr("high", hi),
       b.getNamedAttr("total_steps", b.getI64IntegerAttr(total)),
       b.getNamedAttr("anomaly_steps",
                      b.getI64IntegerAttr(options.anomalySteps)),
       b.getNamedAttr("phases", b.getArrayAttr(phases))});
}

FailureOr<FunctionOpInterface>
mlir::ds::assignPrecision(FunctionOpInterface func,
                          const PrecisionPolicy &policy,
                          const AssignPrecisionOptions &options) {
  MLIRContext *ctx = func->getContext();
  auto module = func->getParentOfType<ModuleOp>();
  if (!module)
    return func->emitOpError("the step must be in a "
                             "module");
  const ScheduleSettings &schedule = policy.schedule;
  if (schedule.enabled && options.totalSteps <= 0) {
    InFlightDiagnostic diag =
        func->emitOpError("the policy's schedule needs "
                          "the training length: pass total-steps=N (ds-run "
                          "passes its --steps)");
    diag.attachNote(Location(schedule.loc)) << "the schedule is here";
    return failure();
  }
  if (options.anomalySteps < 0)
    return func->emitOpError("anomaly-steps must be "
                             "non-negative, got ")
           << options.anomalySteps;
  // The time level: a high-precision variant, cloned before any change and
  // then given the same state, so both share one signature.
  FunctionOpInterface high;
  if (schedule.enabled || options.anomalySteps > 0) {
    high = cast<FunctionOpInterface>(func->clone());
    SymbolTable::setSymbolName(
        high, (SymbolTable::getSymbolName(func).getValue() + "_high").str());
    SymbolTable(module).insert(high, std::next(Block::iterator(func)));
    // Per-step records of earlier passes follow the variant.
    for (StringRef record : {DSDialect::kSparsityAttrName})
      if (auto table = module->getAttrOfType<DictionaryAttr>(record))
        if (Attribute entry = table.get(SymbolTable::getSymbolName(func))) {
          NamedAttrList entries(table.getValue());
          entries.set(SymbolTable::getSymbolName(high), entry);
          module->setAttr(record, entries.getDictionary(module.getContext()));
        }
  }
  PrecisionAssigner low(func, policy, /*observe=*/false);
  if (failed(low.run()))
    return failure();
  low.recordMap();
  if (!high)
    return FunctionOpInterface();
  PrecisionAssigner observed(high, policy, /*observe=*/true);
  if (failed(observed.run()))
    return failure();
  observed.recordMap();
  if (high.getFunctionType() != func.getFunctionType())
    return func->emitOpError("internal error: the "
                             "high-precision variant's signature differs");
  NamedAttrList schedules;
  if (auto old = module->getAttrOfType<DictionaryAttr>(
          DSDialect::kPrecisionScheduleAttrName))
    schedules.append(old.getValue());
  schedules.set(SymbolTable::getSymbolName(func),
                scheduleAttr(func, high, policy, options));
  module->setAttr(DSDialect::kPrecisionScheduleAttrName,
                  schedules.getDictionary(ctx));
  return high;
}

namespace {
struct AssignPrecisionPass
    : public mlir::ds::impl::AssignPrecisionPassBase<AssignPrecisionPass> {
  using Base::Base;
  void runOnOperation() override {
    mlir::ds::detail::ScopedPassNamePrefix named(&getContext(), getArgument());
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    FailureOr<PrecisionPolicy> loaded =
        policy.empty()
            ? FailureOr<PrecisionPolicy>(PrecisionPolicy::getDefault(ctx))
            : PrecisionPolicy::load(policy, module.getLoc());
    if (failed(loaded))
      return signalPassFailure();
    if (failed(mlir::ds::detail::checkOptionsGivenOnce(
            getOperation(), getArgument(),
            {&policy, &totalSteps, &anomalySteps})))
      return signalPassFailure();
    AssignPrecisionPassOptions options;
    options.policy = policy;
    options.totalSteps = totalSteps;
    options.anomalySteps = anomalySteps;
    // The high-precision variants the steps gain are not visited.
    if (failed(mlir::ds::detail::forEachTrainStep(
            module, "ds-assign-precision", [&](FunctionOpInterface func) {
              return assignPrecision(func, *loaded, options);
            })))
      signalPassFailure();
  }
};
} // namespace
