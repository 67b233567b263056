//===- StepUtils.cpp - Edit a training step's signature -------------------===//
//
// Implements the signature editing and scalar helpers of StepUtils.h.
//
//===----------------------------------------------------------------------===//

#include "StepUtils.h"

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <limits>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

StepEditor::StepEditor(FunctionOpInterface func)
    : func(func), body(func.getFunctionBody().front()),
      terminator(body.getTerminator()) {}

Value StepEditor::addState(StringRef kind, StringRef of, RankedTensorType type,
                           InitKind init, double value) {
  MLIRContext *ctx = func->getContext();
  unsigned index = func.getNumArguments();
  NamedAttrList attrs;
  attrs.set(DSDialect::kStateAttrName, StateAttr::get(ctx, kind, of));
  attrs.set(DSDialect::kInitAttrName,
            InitAttr::get(ctx, init, llvm::APFloat(value)));
  (void)func.insertArgument(index, type, attrs.getDictionary(ctx),
                            func.getLoc());
  return body.getArgument(index);
}

Value StepEditor::addParam(StringRef name, RankedTensorType type, InitKind init,
                           double value, DictionaryAttr optim) {
  MLIRContext *ctx = func->getContext();
  unsigned index = func.getNumArguments();
  NamedAttrList attrs;
  attrs.set(DSDialect::kParamAttrName, StringAttr::get(ctx, name));
  attrs.set(DSDialect::kInitAttrName,
            InitAttr::get(ctx, init, llvm::APFloat(value)));
  if (optim)
    attrs.set(DSDialect::kOptimAttrName, optim);
  (void)func.insertArgument(index, type, attrs.getDictionary(ctx),
                            func.getLoc());
  return body.getArgument(index);
}

Value StepEditor::addInput(StringRef name, RankedTensorType type) {
  MLIRContext *ctx = func->getContext();
  unsigned index = func.getNumArguments();
  NamedAttrList attrs;
  attrs.set(DSDialect::kInputAttrName, StringAttr::get(ctx, name));
  (void)func.insertArgument(index, type, attrs.getDictionary(ctx),
                            func.getLoc());
  return body.getArgument(index);
}

void StepEditor::addUpdate(Value state, Value newValue) {
  Builder b(func->getContext());
  unsigned index = cast<BlockArgument>(state).getArgNumber();
  newResults.push_back(newValue);
  newResultAttrs.push_back(b.getDictionaryAttr(
      b.getNamedAttr(DSDialect::kUpdateAttrName, b.getI64IntegerAttr(index))));
}

void StepEditor::addMetric(StringRef name, Value value) {
  Builder b(func->getContext());
  newResults.push_back(value);
  newResultAttrs.push_back(b.getDictionaryAttr(
      b.getNamedAttr(DSDialect::kMetricAttrName, b.getStringAttr(name))));
}

void StepEditor::finish() {
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> attrs;
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    if (droppedResults.contains(i))
      continue;
    results.push_back(terminator->getOperand(i));
    attrs.push_back(func.getResultAttrDict(i));
  }
  llvm::append_range(results, newResults);
  llvm::append_range(attrs, newResultAttrs);
  terminator->setOperands(results);
  SmallVector<Type> types;
  for (Value r : results)
    types.push_back(r.getType());
  func.setType(
      FunctionType::get(func->getContext(), func.getArgumentTypes(), types));
  func.setAllResultAttrs(attrs);
  newResults.clear();
  newResultAttrs.clear();
  droppedResults.clear();
}

FailureOr<Value>
mlir::ds::detail::getOrAddIteration(StepEditor &ed,
                                    const TrainingContract &contract) {
  OpBuilder b(ed.terminator);
  Location loc = ed.func.getLoc();
  auto i64 = RankedTensorType::get({}, b.getI64Type());
  Value iteration;
  std::optional<unsigned> index =
      contract.findArg(ArgRole::State, kIterationStateKind);
  if (index) {
    iteration = ed.body.getArgument(*index);
    if (iteration.getType() != i64)
      return ed.func->emitOpError("the '")
             << kIterationStateKind << "' state must be a tensor<i64>, got "
             << iteration.getType();
    if (contract.findUpdateOf(*index))
      return iteration;
  } else {
    iteration = ed.addState(kIterationStateKind, "", i64, InitKind::zeros);
  }
  ScalarBuilder s(b, loc);
  ed.addUpdate(iteration, s.tensor(s.add(s.extractRaw(iteration), s.i64(1)),
                                   b.getI64Type()));
  return iteration;
}

//===----------------------------------------------------------------------===//
// Tensor helpers
//===----------------------------------------------------------------------===//

Value mlir::ds::detail::reduceAll(OpBuilder &b, Location loc, Value t,
                                  bool max) {
  auto type = cast<RankedTensorType>(t.getType());
  if (type.getRank() == 0)
    return t;
  SmallVector<int64_t> dims =
      llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
  if (max)
    return ReduceMaxOp::create(b, loc, t, b.getDenseI64ArrayAttr(dims), false);
  return ReduceSumOp::create(b, loc, t, b.getDenseI64ArrayAttr(dims), false);
}

Value mlir::ds::detail::nonFiniteProbe(OpBuilder &b, Location loc, Value t) {
  Value diff = SubOp::create(b, loc, t, t);
  ScalarBuilder s(b, loc);
  return s.extract(reduceAll(b, loc, diff));
}

Value mlir::ds::detail::scaleTensor(OpBuilder &b, Location loc, Value t,
                                    Value s) {
  Type et = cast<RankedTensorType>(t.getType()).getElementType();
  auto st = cast<RankedTensorType>(s.getType());
  if (st.getElementType() != et)
    s = CastOp::create(b, loc, st.clone(et), s);
  return MulOp::create(b, loc, t, s);
}

Value mlir::ds::detail::findMetric(FunctionOpInterface func,
                                   const TrainingContract &contract,
                                   StringRef name) {
  Operation *terminator = func.getFunctionBody().front().getTerminator();
  for (auto [i, r] : llvm::enumerate(contract.results))
    if (r.role == ResultRole::Metric && r.name == name)
      return terminator->getOperand(i);
  return Value();
}

FailureOr<TrainingContract>
mlir::ds::detail::requireGradientStep(FunctionOpInterface func,
                                      StringRef pass) {
  FailureOr<TrainingContract> contract = TrainingContract::fromFunction(func);
  if (failed(contract))
    return failure();
  if (contract->hasParamUpdates())
    return func->emitOpError(pass)
           << ": the step already updates its parameters; " << pass
           << " must run before ds-insert-optimizer";
  if (!contract->hasGrads())
    return func->emitOpError(pass)
           << ": the step has no gradients; run ds-autodiff first";
  return contract;
}

Value mlir::ds::detail::buildSkipFlag(OpBuilder &b, Location loc,
                                      FunctionOpInterface func,
                                      const TrainingContract &contract) {
  Value skip;
  for (StringRef name :
       {StringRef("found_inf"), StringRef("sparsity.mask_update")}) {
    Value flag = findMetric(func, contract, name);
    if (!flag)
      continue;
    auto ft = cast<RankedTensorType>(flag.getType());
    Value half = arith::ConstantOp::create(
        b, loc, ft,
        DenseElementsAttr::get(
            ft, FloatAttr::get(cast<FloatType>(ft.getElementType()), 0.5)));
    Value set = CompareOp::create(b, loc, ComparePredicate::gt, flag, half);
    // skip || set, as a select (ds has no logical or).
    skip = skip ? Value(SelectOp::create(b, loc, skip, skip, set)) : set;
  }
  return skip;
}

bool mlir::ds::detail::hasStateWithPrefix(const TrainingContract &contract,
                                          StringRef prefix) {
  return llvm::any_of(contract.args, [&](const ContractArg &a) {
    return a.role == ArgRole::State && a.state.getKind().starts_with(prefix);
  });
}

LogicalResult mlir::ds::detail::forEachTrainStep(
    ModuleOp module, StringRef pass,
    llvm::function_ref<LogicalResult(FunctionOpInterface)> fn) {
  SmallVector<FunctionOpInterface> steps;
  for (auto func : module.getOps<FunctionOpInterface>())
    if (func->hasAttr(DSDialect::kTrainStepAttrName))
      steps.push_back(func);
  if (steps.empty())
    return module.emitError(pass) << ": no function is marked '"
                                  << DSDialect::kTrainStepAttrName << "'";
  for (FunctionOpInterface func : steps)
    if (failed(fn(func)))
      return failure();
  return success();
}

ScopedPassNamePrefix::ScopedPassNamePrefix(MLIRContext *ctx, StringRef pass)
    : ctx(ctx), prefix((pass + ": ").str()),
      handler(ctx, [this](Diagnostic &diag) { return handle(diag); }) {}

LogicalResult ScopedPassNamePrefix::handle(Diagnostic &diag) {
  // The named copy goes to the handlers registered before this one.
  if (reemitting)
    return failure();
  std::string message = diag.str();
  StringRef text(message);
  // An op error reads "'func.func' op <message>": the name goes after that.
  size_t start = 0;
  if (text.starts_with("'")) {
    size_t op = text.find("' op ");
    if (op != StringRef::npos)
      start = op + 5;
  }
  if (text.drop_front(start).starts_with("ds-") || text.contains(" of pass '"))
    return failure();
  Diagnostic named(diag.getLocation(), diag.getSeverity());
  named << text.take_front(start) << prefix << text.drop_front(start);
  for (Diagnostic &note : diag.getNotes())
    named.attachNote(note.getLocation()) << note.str();
  reemitting = true;
  ctx->getDiagEngine().emit(std::move(named));
  reemitting = false;
  return success();
}

std::string mlir::ds::detail::optionError(StringRef pass, StringRef option,
                                          const Twine &reason) {
  return ("in option '" + option + "' of pass '" + pass + "': " + reason).str();
}

LogicalResult mlir::ds::detail::checkOptionsGivenOnce(
    ModuleOp module, StringRef pass,
    std::initializer_list<const llvm::cl::Option *> options) {
  for (const llvm::cl::Option *option : options)
    if (option->getNumOccurrences() > 1)
      return module.emitError(
          optionError(pass, option->ArgStr,
                      "given " + Twine(option->getNumOccurrences()) +
                          " times; give each option once"));
  return success();
}
