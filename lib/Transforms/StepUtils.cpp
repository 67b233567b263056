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
  SmallVector<Value> results(terminator->getOperands());
  SmallVector<DictionaryAttr> attrs;
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    attrs.push_back(func.getResultAttrDict(i));
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
}

//===----------------------------------------------------------------------===//
// Scalars
//===----------------------------------------------------------------------===//

Value Scalars::f64(double v) {
  return arith::ConstantOp::create(b, loc, b.getF64FloatAttr(v));
}
Value Scalars::i32(int32_t v) {
  return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
}
Value Scalars::add(Value x, Value y) {
  return isa<FloatType>(x.getType())
             ? Value(arith::AddFOp::create(b, loc, x, y))
             : Value(arith::AddIOp::create(b, loc, x, y));
}
Value Scalars::sub(Value x, Value y) {
  return arith::SubFOp::create(b, loc, x, y);
}
Value Scalars::mul(Value x, Value y) {
  return arith::MulFOp::create(b, loc, x, y);
}
Value Scalars::div(Value x, Value y) {
  return arith::DivFOp::create(b, loc, x, y);
}
Value Scalars::minf(Value x, Value y) {
  return arith::MinimumFOp::create(b, loc, x, y);
}
Value Scalars::maxf(Value x, Value y) {
  return arith::MaximumFOp::create(b, loc, x, y);
}
Value Scalars::sqrt(Value x) { return math::SqrtOp::create(b, loc, x); }
Value Scalars::cmpf(arith::CmpFPredicate p, Value x, Value y) {
  return arith::CmpFOp::create(b, loc, p, x, y);
}
Value Scalars::cmpi(arith::CmpIPredicate p, Value x, Value y) {
  return arith::CmpIOp::create(b, loc, p, x, y);
}
Value Scalars::select(Value c, Value x, Value y) {
  return arith::SelectOp::create(b, loc, c, x, y);
}
Value Scalars::andi(Value x, Value y) {
  return arith::AndIOp::create(b, loc, x, y);
}
Value Scalars::ori(Value x, Value y) {
  return arith::OrIOp::create(b, loc, x, y);
}
Value Scalars::noti(Value x) {
  Value t = arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
  return arith::XOrIOp::create(b, loc, x, t);
}
Value Scalars::isFinite(Value x) {
  // |x| < inf is false for inf and (ordered compare) for NaN.
  Value a = math::AbsFOp::create(b, loc, x);
  return cmpf(arith::CmpFPredicate::OLT, a,
              f64(std::numeric_limits<double>::infinity()));
}
Value Scalars::extractRaw(Value t) {
  return tensor::ExtractOp::create(b, loc, t, ValueRange{});
}
Value Scalars::extract(Value t) {
  Value x = extractRaw(t);
  if (isa<FloatType>(x.getType()))
    return convert(x, b.getF64Type());
  return x;
}
Value Scalars::convert(Value x, Type type) {
  auto from = cast<FloatType>(x.getType());
  auto to = cast<FloatType>(type);
  if (from == to)
    return x;
  if (from.getWidth() < to.getWidth())
    return arith::ExtFOp::create(b, loc, to, x);
  return arith::TruncFOp::create(b, loc, to, x);
}
Value Scalars::tensor(Value x, Type elementType) {
  if (x.getType() != elementType && isa<FloatType>(elementType))
    x = convert(x, elementType);
  return tensor::FromElementsOp::create(
      b, loc, RankedTensorType::get({}, elementType), ValueRange{x});
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
  Scalars s(b, loc);
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
