//===- TrainingContract.h - The training-step contract ---------*- C++ -*-===//
//
// A training step is a pure function: every parameter, batch tensor and piece
// of state comes in as an argument, and the loss, the new values and metrics
// go out as results. The attributes on arguments and results say which is
// which (docs/TrainingStepContract.md). TrainingContract is the checked,
// structured view of those attributes: the dialect verifier builds it to
// validate a step, passes build it to find parameters and state, and ds-run
// reads it (from the function, or from the module's `ds.contract` table once
// the function has been lowered) to know what to feed and what to keep.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_IR_TRAININGCONTRACT_H
#define DS_DIALECT_DS_IR_TRAININGCONTRACT_H

#include "ds/Dialect/DS/IR/DSAttrs.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include <optional>
#include <string>

namespace mlir {
class ModuleOp;
namespace ds {

enum class ArgRole { Param, Input, State };

/// On an integer input: the number of values it takes, [0, range), when no
/// use inside the function says (ds-partition-pipeline writes it on stage
/// functions that only pass the input on).
inline constexpr llvm::StringLiteral kRangeAttrName = "ds.range";

/// The two shared counters every pass that needs one reuses
/// (docs/TrainingStepContract.md): `step`, the optimizer steps taken
/// (frozen on a skipped step, as torch.optim's), and `iteration`, the steps
/// run (always advances), which every schedule reads.
inline constexpr llvm::StringLiteral kStepStateKind = "step";
inline constexpr llvm::StringLiteral kIterationStateKind = "iteration";
enum class ResultRole { Loss, Update, Grad, Metric };

StringRef stringifyArgRole(ArgRole role);
StringRef stringifyResultRole(ResultRole role);

/// One argument of a training step.
struct ContractArg {
  ArgRole role;
  /// The parameter or input name; for state, its key (`kind` or `kind@of`).
  std::string name;
  RankedTensorType type;
  /// Set for parameters and state.
  InitAttr init;
  /// Set for state.
  StateAttr state;
  /// For integer inputs that index something (embedding rows, class
  /// labels): values must lie in [0, range). 0 when unknown.
  int64_t range = 0;
};

/// One result of a training step.
struct ContractResult {
  ResultRole role;
  RankedTensorType type;
  /// For updates: the index of the argument this result is the new value
  /// of; for gradients: the index of the parameter it is the gradient of.
  int64_t argIndex = -1;
  /// For metrics: the metric's name.
  std::string name;
};

/// The checked contract of one training-step function.
struct TrainingContract {
  std::string funcName;
  SmallVector<ContractArg> args;
  SmallVector<ContractResult> results;

  /// Reads the contract from the attributes of `func` and checks it: every
  /// argument and result has exactly one role, names and state keys are
  /// unique, there is exactly one rank-0 floating-point loss, updates point
  /// at parameter or state arguments of the same type, shapes are static.
  /// Emits a diagnostic on `func` and fails when anything is wrong.
  static FailureOr<TrainingContract> fromFunction(FunctionOpInterface func);

  /// Reads one entry of the module-level `ds.contract` table (see toAttr).
  static FailureOr<TrainingContract>
  fromAttr(StringRef funcName, Attribute attr,
           function_ref<InFlightDiagnostic()> emitError);

  /// The table entry that describes this contract: a dictionary with `args`
  /// and `results` arrays, so the contract survives lowering.
  DictionaryAttr toAttr(MLIRContext *ctx) const;

  /// Index of the loss result.
  unsigned getLossIndex() const;
  /// Indices of the arguments with the given role, in order.
  SmallVector<unsigned> getArgIndices(ArgRole role) const;
  /// The argument index of the parameter or input called `name`, or of the
  /// state with key `name`; std::nullopt when there is none.
  std::optional<unsigned> findArg(ArgRole role, StringRef name) const;
  /// The result index that updates argument `argIndex`, if any.
  std::optional<unsigned> findUpdateOf(unsigned argIndex) const;
  /// The result index that is the gradient of parameter `argIndex`, if any.
  std::optional<unsigned> findGradOf(unsigned argIndex) const;
  /// Whether the step returns parameter gradients (after ds-autodiff,
  /// before ds-insert-optimizer).
  bool hasGrads() const;
  /// Whether the step updates any parameter, i.e. it is a complete training
  /// step rather than a forward + loss (which may still update state such as
  /// batch-norm running statistics).
  bool hasParamUpdates() const;
};

/// Checks the value of one contract attribute on argument `argIndex` of `op`
/// (`ds.param`, `ds.input`: non-empty strings; `ds.state`: #ds.state;
/// `ds.init`: #ds.init); any other `ds.` name is an error.
LogicalResult verifyContractArgAttr(Operation *op, unsigned argIndex,
                                    NamedAttribute attr);

/// Checks the value of one contract attribute on result `resultIndex`
/// (`ds.loss`: unit; `ds.update`, `ds.grad`: argument index; `ds.metric`:
/// non-empty string).
LogicalResult verifyContractResultAttr(Operation *op, unsigned resultIndex,
                                       NamedAttribute attr);

/// Reads every contract of a module: from the `ds.contract` table when the
/// module has one, otherwise from the functions marked `ds.train_step`.
FailureOr<SmallVector<TrainingContract>> readContracts(ModuleOp module);

} // namespace ds
} // namespace mlir

#endif // DS_DIALECT_DS_IR_TRAININGCONTRACT_H
