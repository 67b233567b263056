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

#include "mlir/Dialect/Arith/IR/Arith.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

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
  /// Appends a result `ds.update = <index of state>`.
  void addUpdate(Value state, Value newValue);
  /// Appends a result `ds.metric = name`.
  void addMetric(StringRef name, Value value);
  /// Appends the collected results to the terminator and the signature.
  void finish();

  FunctionOpInterface func;
  Block &body;
  Operation *terminator;

private:
  SmallVector<Value> newResults;
  SmallVector<DictionaryAttr> newResultAttrs;
};

/// Scalar (f64 / i1 / i32) arithmetic and rank-0 tensor conversions.
struct Scalars {
  Scalars(OpBuilder &b, Location loc) : b(b), loc(loc) {}
  Value f64(double v);
  Value i32(int32_t v);
  Value add(Value x, Value y);
  Value sub(Value x, Value y);
  Value mul(Value x, Value y);
  Value div(Value x, Value y);
  Value minf(Value x, Value y);
  Value maxf(Value x, Value y);
  Value sqrt(Value x);
  Value cmpf(arith::CmpFPredicate p, Value x, Value y);
  Value cmpi(arith::CmpIPredicate p, Value x, Value y);
  Value select(Value c, Value x, Value y);
  Value andi(Value x, Value y);
  Value ori(Value x, Value y);
  Value noti(Value x);
  /// Whether the f64 `x` is finite (neither inf nor NaN).
  Value isFinite(Value x);
  /// The element of a rank-0 tensor, converted to f64 if it is a float.
  Value extract(Value t);
  /// The element of a rank-0 tensor as it is.
  Value extractRaw(Value t);
  /// A float scalar converted (extended or truncated) to `type`.
  Value convert(Value x, Type type);
  /// A rank-0 tensor holding `x` (converted to `elementType` first).
  Value tensor(Value x, Type elementType);

  OpBuilder &b;
  Location loc;
};

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

/// Whether the step has a state whose kind starts with `prefix`.
bool hasStateWithPrefix(const TrainingContract &contract, StringRef prefix);

/// Applies `fn` to each function of `module` marked `ds.train_step` (those
/// present on entry: functions `fn` adds are not visited). Fails at the
/// first failure, and with "`pass`: no function is marked 'ds.train_step'"
/// when there is none.
LogicalResult
forEachTrainStep(ModuleOp module, StringRef pass,
                 llvm::function_ref<LogicalResult(FunctionOpInterface)> fn);

} // namespace mlir::ds::detail

#endif // DS_LIB_TRANSFORMS_STEPUTILS_H
