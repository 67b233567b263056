//===- StepUtils.h - Edit a training step's signature ----------*- C++ -*-===//
//
// Helpers shared by the passes that sit between ds-autodiff and
// ds-insert-optimizer (ds-insert-loss-scaling, ds-clip-gradients): adding
// state and input arguments, appending update and metric results, and the
// scalar arithmetic on rank-0 tensors those passes build. Internal to
// lib/Transforms; the public entry points are declared in Passes.h.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_TRANSFORMS_STEPUTILS_H
#define DS_LIB_TRANSFORMS_STEPUTILS_H

#include "ds/Dialect/DS/IR/DSAttrs.h"
#include "ds/Dialect/DS/IR/TrainingContract.h"
#include "ds/Dialect/DS/Utils/ScalarBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/CommandLine.h"

#include <string>

namespace mlir::ds::detail {

/// Appends arguments and results to a training step. Arguments go at the
/// end (existing indices stay valid); results are collected and appended
/// by `finish()`, which also rewrites the function type.
class StepEditor {
public:
  explicit StepEditor(FunctionOpInterface func);

  /// A new `ds.state` argument with `ds.init = #ds.init<init[, value]>`.
  Value addState(StringRef kind, StringRef of, RankedTensorType type,
                 InitKind init, double value = 0.0);
  /// A new `ds.input` argument.
  Value addInput(StringRef name, RankedTensorType type);
  /// A new `ds.param` argument with `ds.init = #ds.init<init[, value]>` and,
  /// if given, its optimizer overrides (`ds.optim`).
  Value addParam(StringRef name, RankedTensorType type, InitKind init,
                 double value = 0.0, DictionaryAttr optim = {});
  /// Appends a result `ds.update = <index of state>`.
  void addUpdate(Value state, Value newValue);
  /// Appends a result `ds.metric = name`.
  void addMetric(StringRef name, Value value);
  /// Removes the existing result `index` when finishing (e.g. a `ds.grad`
  /// an update replaces).
  void dropResult(unsigned index) { droppedResults.insert(index); }
  /// Appends the collected results to the terminator and the signature.
  void finish();

  FunctionOpInterface func;
  Block &body;
  Operation *terminator;

private:
  SmallVector<Value> newResults;
  SmallVector<DictionaryAttr> newResultAttrs;
  llvm::SmallDenseSet<unsigned> droppedResults;
};

/// The shared `iteration` counter: the number of steps run so far, which,
/// unlike `step` (optimizer steps taken, frozen on a skipped step), always
/// advances. Every schedule reads it, so that a skipped or mask-update
/// step never stalls one. Returns the state argument (its value before this
/// step), adding the argument and its `+ 1` update when the step lacks
/// them. Fails with a located error when it is not a `tensor<i64>`.
FailureOr<Value> getOrAddIteration(StepEditor &ed,
                                   const TrainingContract &contract);

/// The sum over all elements of the float tensor `t` as a rank-0 tensor of
/// its element type (ds.reduce_sum over every dimension).
Value reduceAll(OpBuilder &b, Location loc, Value t, bool max = false);

/// A rank-0 f64 NaN iff `t` has an element that is inf or NaN, else 0:
/// the sum over `t - t`, which IEEE arithmetic keeps exact (only
/// `reassoc` is allowed on reductions, never `nnan`/`ninf`).
Value nonFiniteProbe(OpBuilder &b, Location loc, Value t);

/// `t` times the rank-0 float tensor `s` (converted to `t`'s element type).
Value scaleTensor(OpBuilder &b, Location loc, Value t, Value s);

/// The metric result called `name`, or null.
Value findMetric(FunctionOpInterface func, const TrainingContract &contract,
                 StringRef name);

/// The contract of `func` if it is a gradient step (after ds-autodiff,
/// before ds-insert-optimizer); otherwise a located error saying what
/// `pass` must run after or before.
FailureOr<TrainingContract> requireGradientStep(FunctionOpInterface func,
                                                StringRef pass);

/// A rank-0 i1 tensor, set on a step that takes no optimizer step: its
/// `found_inf` (ds-insert-loss-scaling) or `sparsity.mask_update`
/// (ds-sparsify-matmul; RigL takes no optimizer step while the masks
/// change) metric is set. Null when the step has neither metric. Built at
/// the builder's insertion point.
Value buildSkipFlag(OpBuilder &b, Location loc, FunctionOpInterface func,
                    const TrainingContract &contract);

/// Whether the step has a state whose kind starts with `prefix`.
bool hasStateWithPrefix(const TrainingContract &contract, StringRef prefix);

/// The message of a bad pass option: "in option 'O' of pass 'P': R" (pass
/// options are not in the input file, so the location cannot say it).
std::string optionError(StringRef pass, StringRef option, const Twine &reason);

/// Fails with "in option 'O' of pass 'P': given twice" on `module` when one
/// of `options` was given more than once (the last value would silently
/// win).
LogicalResult
checkOptionsGivenOnce(ModuleOp module, StringRef pass,
                      std::initializer_list<const llvm::cl::Option *> options);

/// While alive, names the pass in every diagnostic emitted in `ctx`:
/// "<pass>: " goes before the message (after the "'op' op " of an op
/// error), unless the message already starts with a ds pass name or says
/// "of pass '...'". Library
/// functions (insertOptimizer, clipGradients, ...) leave their messages
/// unnamed, since a tool or another pass may call them; the pass that calls
/// them installs this.
class ScopedPassNamePrefix {
public:
  ScopedPassNamePrefix(MLIRContext *ctx, StringRef pass);

private:
  LogicalResult handle(Diagnostic &diag);

  MLIRContext *ctx;
  std::string prefix;
  bool reemitting = false;
  ScopedDiagnosticHandler handler;
};

/// Applies `fn` to each function of `module` marked `ds.train_step` (those
/// present on entry: functions `fn` adds are not visited). Fails at the
/// first failure, and with "`pass`: no function is marked 'ds.train_step'"
/// when there is none.
LogicalResult
forEachTrainStep(ModuleOp module, StringRef pass,
                 llvm::function_ref<LogicalResult(FunctionOpInterface)> fn);

} // namespace mlir::ds::detail

#endif // DS_LIB_TRANSFORMS_STEPUTILS_H
