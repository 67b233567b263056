//===- TrainingContract.cpp - The training-step contract ------------------===//
//
// Reading and checking the contract from function attributes, and its
// round trip through the module-level `ds.contract` table.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/TrainingContract.h"

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/IR/ShapeUtils.h"
#include "mlir/Interfaces/CallInterfaces.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::ds;

StringRef mlir::ds::stringifyArgRole(ArgRole role) {
  switch (role) {
  case ArgRole::Param:
    return "param";
  case ArgRole::Input:
    return "input";
  case ArgRole::State:
    return "state";
  }
  llvm_unreachable("unknown ArgRole");
}

StringRef mlir::ds::stringifyResultRole(ResultRole role) {
  switch (role) {
  case ResultRole::Loss:
    return "loss";
  case ResultRole::Update:
    return "update";
  case ResultRole::Grad:
    return "grad";
  case ResultRole::Metric:
    return "metric";
  }
  llvm_unreachable("unknown ResultRole");
}

/// The number of values an integer input may take, read off its uses: the
/// rows of the embedding table it indexes or the classes of the
/// cross-entropy it labels (through reshapes). 0 when no use says.
static int64_t inferIndexRange(Value v) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (auto e = dyn_cast<EmbeddingOp>(user); e && use.getOperandNumber() == 1)
      return e.getTable().getType().getDimSize(0);
    if (auto e = dyn_cast<EmbeddingGradOp>(user);
        e && use.getOperandNumber() == 1)
      return e.getResult().getType().getDimSize(0);
    if (auto ce = dyn_cast<CrossEntropyOp>(user);
        ce && use.getOperandNumber() == 1)
      return ce.getLogits().getType().getDimSize(1);
    if (auto ce = dyn_cast<CrossEntropyGradOp>(user);
        ce && use.getOperandNumber() == 1)
      return ce.getLogits().getType().getDimSize(1);
    if (auto r = dyn_cast<ReshapeOp>(user))
      if (int64_t range = inferIndexRange(r.getResult()))
        return range;
    // A pipeline's stage function slices micro-batches off the input and
    // hands them to its forward and backward functions.
    if (user->getName().getStringRef() == "tensor.extract_slice" &&
        use.getOperandNumber() == 0)
      if (int64_t range = inferIndexRange(user->getResult(0)))
        return range;
    if (auto call = dyn_cast<CallOpInterface>(user))
      if (auto callee =
              dyn_cast_or_null<FunctionOpInterface>(call.resolveCallable());
          callee && !callee.isExternal()) {
        unsigned i = use.getOperandNumber() -
                     call.getArgOperands().getBeginOperandIndex();
        if (i < callee.getNumArguments())
          if (int64_t range = inferIndexRange(callee.getArgument(i)))
            return range;
      }
  }
  return 0;
}

/// The value of an argument-index attribute: a signless integer or index of
/// at most 64 bits. Anything else (ui8, i128, floats) is rejected rather than
/// truncated.
/// The numeric keys of `ds.optim` (ds-insert-optimizer's option names, with
/// `weight_decay` spelled as torch.optim does).
static constexpr StringLiteral kOptimNumericKeys[] = {
    "lr", "momentum", "dampening", "beta1", "beta2", "eps", "weight_decay"};

static std::optional<int64_t> getArgIndex(Attribute attr) {
  auto i = dyn_cast_or_null<IntegerAttr>(attr);
  if (!i)
    return std::nullopt;
  Type t = i.getType();
  if (!t.isIndex() &&
      !(t.isSignlessInteger() && t.getIntOrFloatBitWidth() <= 64))
    return std::nullopt;
  return i.getValue().getSExtValue();
}

//===----------------------------------------------------------------------===//
// Attribute value checks
//===----------------------------------------------------------------------===//

LogicalResult mlir::ds::verifyContractArgAttr(Operation *op, unsigned argIndex,
                                              NamedAttribute attr) {
  StringRef name = attr.getName().strref();
  Attribute value = attr.getValue();
  auto fail = [&](StringRef expected) {
    return op->emitOpError("argument #")
           << argIndex << ": '" << name << "' must be " << expected << ", got "
           << value;
  };
  if (name == DSDialect::kParamAttrName || name == DSDialect::kInputAttrName) {
    auto str = dyn_cast<StringAttr>(value);
    if (!str || str.getValue().empty())
      return fail("a non-empty string");
  } else if (name == DSDialect::kStateAttrName) {
    if (!isa<StateAttr>(value))
      return fail("a #ds.state attribute");
  } else if (name == DSDialect::kInitAttrName) {
    if (!isa<InitAttr>(value))
      return fail("a #ds.init attribute");
  } else if (name == DSDialect::kOptimAttrName) {
    auto dict = dyn_cast<DictionaryAttr>(value);
    if (!dict)
      return fail("a dictionary of optimizer hyperparameters");
    for (NamedAttribute entry : dict) {
      StringRef key = entry.getName().strref();
      Attribute v = entry.getValue();
      bool ok;
      if (key == "kind")
        ok = isa<StringAttr>(v);
      else if (key == "nesterov")
        ok = isa<BoolAttr>(v);
      else if (llvm::is_contained(kOptimNumericKeys, key))
        ok = isa<FloatAttr, IntegerAttr>(v) && !isa<BoolAttr>(v);
      else
        return op->emitOpError("argument #")
               << argIndex << ": unknown 'ds.optim' key '" << key
               << "'; expected kind, lr, momentum, dampening, nesterov, "
                  "beta1, beta2, eps or weight_decay";
      if (!ok)
        return op->emitOpError("argument #")
               << argIndex << ": 'ds.optim' key '" << key << "' must be "
               << (key == "kind"       ? "a string"
                   : key == "nesterov" ? "a boolean"
                                       : "a number")
               << ", got " << v;
    }
  } else if (name == kRangeAttrName) {
    auto range = dyn_cast<IntegerAttr>(value);
    if (!range || range.getInt() < 1)
      return fail("a positive integer (the values an integer input takes)");
  } else {
    return op->emitOpError("argument #")
           << argIndex << ": unknown ds argument attribute '" << name
           << "'; expected ds.param, ds.input, ds.state, ds.init, ds.optim "
              "or ds.range";
  }
  return success();
}

LogicalResult mlir::ds::verifyContractResultAttr(Operation *op,
                                                 unsigned resultIndex,
                                                 NamedAttribute attr) {
  StringRef name = attr.getName().strref();
  Attribute value = attr.getValue();
  auto fail = [&](StringRef expected) {
    return op->emitOpError("result #")
           << resultIndex << ": '" << name << "' must be " << expected
           << ", got " << value;
  };
  if (name == DSDialect::kLossAttrName) {
    if (!isa<UnitAttr>(value))
      return fail("a unit attribute");
  } else if (name == DSDialect::kUpdateAttrName ||
             name == DSDialect::kGradAttrName) {
    if (!getArgIndex(value))
      return fail("an argument index (a signless integer of at most 64 bits)");
  } else if (name == DSDialect::kMetricAttrName) {
    auto str = dyn_cast<StringAttr>(value);
    if (!str || str.getValue().empty())
      return fail("a non-empty string");
  } else {
    return op->emitOpError("result #")
           << resultIndex << ": unknown ds result attribute '" << name
           << "'; expected ds.loss, ds.update, ds.grad or ds.metric";
  }
  return success();
}

namespace {
/// Emits diagnostics for one contract under construction and applies the
/// checks that do not depend on where the contract was read from.
class ContractChecker {
public:
  ContractChecker(TrainingContract &contract,
                  function_ref<InFlightDiagnostic()> emitError)
      : contract(contract), emitError(emitError) {}

  InFlightDiagnostic argError(unsigned i) {
    return emitError() << "argument #" << i << ": ";
  }
  InFlightDiagnostic resultError(unsigned i) {
    return emitError() << "result #" << i << ": ";
  }

  /// Checks that `type` is a ranked tensor with a static shape.
  FailureOr<RankedTensorType> staticTensor(Type type, bool isArg, unsigned i,
                                           StringRef what) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.hasStaticShape()) {
      (isArg ? argError(i) : resultError(i))
          << what << " must be a ranked tensor with a static shape, got "
          << type;
      return failure();
    }
    return tensor;
  }

  LogicalResult checkInit(unsigned i, const ContractArg &arg) {
    if (!arg.init)
      return argError(i) << stringifyArgRole(arg.role) << " '" << arg.name
                         << "' needs a 'ds.init' attribute (e.g. "
                            "#ds.init<zeros>)";
    InitKind kind = arg.init.getKind();
    if ((kind == InitKind::normal || kind == InitKind::uniform) &&
        !isa<FloatType>(arg.type.getElementType()))
      return argError(i) << "init '" << stringifyInitKind(kind)
                         << "' needs a floating-point element type, got "
                         << arg.type.getElementType();
    return success();
  }

  /// Checks the facts that relate arguments and results.
  LogicalResult checkWhole() {
    llvm::StringSet<> params, inputs, states, metrics;
    for (auto [i, arg] : llvm::enumerate(contract.args)) {
      llvm::StringSet<> &names = arg.role == ArgRole::Param   ? params
                                 : arg.role == ArgRole::Input ? inputs
                                                              : states;
      if (!names.insert(arg.name).second)
        return argError(i) << "duplicate " << stringifyArgRole(arg.role) << " '"
                           << arg.name << "'";
    }
    for (auto [i, arg] : llvm::enumerate(contract.args)) {
      if (arg.role != ArgRole::State || arg.state.getOf().empty())
        continue;
      if (!params.contains(arg.state.getOf()))
        return argError(i) << "state '" << arg.name
                           << "' belongs to unknown parameter '"
                           << arg.state.getOf() << "'";
    }

    int64_t numLosses = 0;
    SmallVector<int64_t> updatedBy(contract.args.size(), -1);
    SmallVector<int64_t> gradBy(contract.args.size(), -1);
    for (auto [i, res] : llvm::enumerate(contract.results)) {
      switch (res.role) {
      case ResultRole::Loss:
        ++numLosses;
        if (res.type.getRank() != 0 ||
            !isa<FloatType>(res.type.getElementType()))
          return resultError(i)
                 << "the loss must be a rank-0 floating-point tensor, got "
                 << res.type;
        break;
      case ResultRole::Update: {
        int64_t target = res.argIndex;
        if (target < 0 || target >= static_cast<int64_t>(contract.args.size()))
          return resultError(i) << "'ds.update' = " << target
                                << " is out of range; the function has "
                                << contract.args.size() << " arguments";
        const ContractArg &arg = contract.args[target];
        if (arg.role == ArgRole::Input)
          return resultError(i)
                 << "'ds.update' = " << target << " names input '" << arg.name
                 << "'; only parameters and state are updated";
        if (arg.type != res.type)
          return resultError(i) << "update of " << stringifyArgRole(arg.role)
                                << " '" << arg.name << "' has type " << res.type
                                << ", but the argument has type " << arg.type;
        if (updatedBy[target] >= 0)
          return resultError(i)
                 << stringifyArgRole(arg.role) << " '" << arg.name
                 << "' is already updated by result #" << updatedBy[target];
        updatedBy[target] = i;
        break;
      }
      case ResultRole::Grad: {
        int64_t target = res.argIndex;
        if (target < 0 || target >= static_cast<int64_t>(contract.args.size()))
          return resultError(i) << "'ds.grad' = " << target
                                << " is out of range; the function has "
                                << contract.args.size() << " arguments";
        const ContractArg &arg = contract.args[target];
        if (arg.role != ArgRole::Param)
          return resultError(i) << "'ds.grad' = " << target << " names "
                                << stringifyArgRole(arg.role) << " '"
                                << arg.name << "'; gradients are of parameters";
        if (arg.type != res.type)
          return resultError(i)
                 << "gradient of param '" << arg.name << "' has type "
                 << res.type << ", but the parameter has type " << arg.type;
        if (gradBy[target] >= 0)
          return resultError(i)
                 << "param '" << arg.name
                 << "' already has its gradient in result #" << gradBy[target];
        gradBy[target] = i;
        break;
      }
      case ResultRole::Metric:
        if (!metrics.insert(res.name).second)
          return resultError(i) << "duplicate metric '" << res.name << "'";
        break;
      }
    }
    if (numLosses != 1)
      return emitError() << "a training step has exactly one result marked "
                            "'ds.loss', found "
                         << numLosses;
    return success();
  }

private:
  TrainingContract &contract;
  function_ref<InFlightDiagnostic()> emitError;
};

/// Lets `return bail(emitError() << ...);` end a FailureOr-returning function
/// after reporting.
FailureOr<TrainingContract> bail(InFlightDiagnostic &&diag) {
  (void)diag;
  return failure();
}
} // namespace

FailureOr<TrainingContract>
TrainingContract::fromFunction(FunctionOpInterface func) {
  TrainingContract contract;
  contract.funcName = func.getName().str();
  auto emitError = [&] { return func->emitOpError(); };
  ContractChecker checker(contract, emitError);

  if (func.isExternal())
    return bail(func->emitOpError("a training step needs a body"));

  // Check every attribute's value first, so that a malformed attribute is
  // reported as such rather than as a missing role.
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    for (NamedAttribute attr : func.getArgAttrs(i))
      if (attr.getName().strref().starts_with("ds.") &&
          failed(verifyContractArgAttr(func, i, attr)))
        return failure();
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    for (NamedAttribute attr : func.getResultAttrs(i))
      if (attr.getName().strref().starts_with("ds.") &&
          failed(verifyContractResultAttr(func, i, attr)))
        return failure();

  ArrayRef<Type> argTypes = func.getArgumentTypes();
  for (unsigned i = 0, e = argTypes.size(); i < e; ++i) {
    auto param =
        func.getArgAttrOfType<StringAttr>(i, DSDialect::kParamAttrName);
    auto input =
        func.getArgAttrOfType<StringAttr>(i, DSDialect::kInputAttrName);
    auto state = func.getArgAttrOfType<StateAttr>(i, DSDialect::kStateAttrName);
    auto init = func.getArgAttrOfType<InitAttr>(i, DSDialect::kInitAttrName);
    bool optim = func.getArgAttr(i, DSDialect::kOptimAttrName) != nullptr;
    int roles = !!param + !!input + !!state;
    if (roles == 0)
      return bail(
          checker.argError(i)
          << "has no role; mark it 'ds.param', 'ds.input' or 'ds.state'");
    if (roles > 1)
      return bail(checker.argError(i)
                  << "has more than one of 'ds.param', 'ds.input', 'ds.state'");

    if (optim && !param)
      return bail(checker.argError(i)
                  << "'ds.optim' applies to parameters only");

    ContractArg arg;
    arg.role = param ? ArgRole::Param : input ? ArgRole::Input : ArgRole::State;
    arg.name = param   ? param.getValue().str()
               : input ? input.getValue().str()
                       : state.getKey();
    arg.state = state;
    arg.init = init;
    std::string what =
        (stringifyArgRole(arg.role) + " '" + arg.name + "'").str();
    FailureOr<RankedTensorType> type =
        checker.staticTensor(argTypes[i], /*isArg=*/true, i, what);
    if (failed(type))
      return failure();
    arg.type = *type;
    if (arg.role == ArgRole::Param &&
        !isa<FloatType>(arg.type.getElementType()))
      return bail(checker.argError(i)
                  << what
                  << " must have a floating-point element type, "
                     "got "
                  << arg.type.getElementType());
    if (arg.role == ArgRole::Input) {
      if (isa<IntegerType>(arg.type.getElementType()) && !func.isExternal())
        arg.range = inferIndexRange(func.getArgument(i));
      // A function that only passes the input on (a pipeline stage that
      // does not read it) carries its range explicitly.
      if (auto range = func.getArgAttrOfType<IntegerAttr>(i, kRangeAttrName);
          range && !arg.range)
        arg.range = range.getInt();
      if (init)
        return bail(checker.argError(i)
                    << what << " takes no 'ds.init'; inputs are fed each step");
    } else if (failed(checker.checkInit(i, arg))) {
      return failure();
    }
    contract.args.push_back(std::move(arg));
  }

  ArrayRef<Type> resultTypes = func.getResultTypes();
  for (unsigned i = 0, e = resultTypes.size(); i < e; ++i) {
    bool loss = func.getResultAttr(i, DSDialect::kLossAttrName) != nullptr;
    std::optional<int64_t> update =
        getArgIndex(func.getResultAttr(i, DSDialect::kUpdateAttrName));
    std::optional<int64_t> grad =
        getArgIndex(func.getResultAttr(i, DSDialect::kGradAttrName));
    auto metric =
        func.getResultAttrOfType<StringAttr>(i, DSDialect::kMetricAttrName);
    int roles = loss + !!update + !!grad + !!metric;
    if (roles == 0)
      return bail(checker.resultError(i)
                  << "has no role; mark it 'ds.loss', 'ds.update', 'ds.grad' "
                     "or 'ds.metric'");
    if (roles > 1)
      return bail(checker.resultError(i)
                  << "has more than one of 'ds.loss', 'ds.update', 'ds.grad', "
                     "'ds.metric'");
    ContractResult res;
    res.role = loss     ? ResultRole::Loss
               : update ? ResultRole::Update
               : grad   ? ResultRole::Grad
                        : ResultRole::Metric;
    if (update)
      res.argIndex = *update;
    if (grad)
      res.argIndex = *grad;
    if (metric)
      res.name = metric.getValue().str();
    FailureOr<RankedTensorType> type = checker.staticTensor(
        resultTypes[i], /*isArg=*/false, i, stringifyResultRole(res.role));
    if (failed(type))
      return failure();
    res.type = *type;
    contract.results.push_back(std::move(res));
  }
  if (failed(checker.checkWhole()))
    return failure();
  return contract;
}

//===----------------------------------------------------------------------===//
// The module-level table
//===----------------------------------------------------------------------===//

DictionaryAttr TrainingContract::toAttr(MLIRContext *ctx) const {
  Builder b(ctx);
  SmallVector<Attribute> argAttrs, resultAttrs;
  for (const ContractArg &arg : args) {
    SmallVector<NamedAttribute> fields;
    fields.push_back(
        b.getNamedAttr("role", b.getStringAttr(stringifyArgRole(arg.role))));
    if (arg.role == ArgRole::State)
      fields.push_back(b.getNamedAttr("state", arg.state));
    else
      fields.push_back(b.getNamedAttr("name", b.getStringAttr(arg.name)));
    fields.push_back(b.getNamedAttr("type", TypeAttr::get(arg.type)));
    if (arg.init)
      fields.push_back(b.getNamedAttr("init", arg.init));
    if (arg.range > 0)
      fields.push_back(b.getNamedAttr("range", b.getI64IntegerAttr(arg.range)));
    argAttrs.push_back(b.getDictionaryAttr(fields));
  }
  for (const ContractResult &res : results) {
    SmallVector<NamedAttribute> fields;
    fields.push_back(
        b.getNamedAttr("role", b.getStringAttr(stringifyResultRole(res.role))));
    if (res.role == ResultRole::Update || res.role == ResultRole::Grad)
      fields.push_back(b.getNamedAttr("of", b.getI64IntegerAttr(res.argIndex)));
    if (res.role == ResultRole::Metric)
      fields.push_back(b.getNamedAttr("name", b.getStringAttr(res.name)));
    fields.push_back(b.getNamedAttr("type", TypeAttr::get(res.type)));
    resultAttrs.push_back(b.getDictionaryAttr(fields));
  }
  return b.getDictionaryAttr(
      {b.getNamedAttr("args", b.getArrayAttr(argAttrs)),
       b.getNamedAttr("results", b.getArrayAttr(resultAttrs))});
}

FailureOr<TrainingContract>
TrainingContract::fromAttr(StringRef funcName, Attribute attr,
                           function_ref<InFlightDiagnostic()> emitError) {
  TrainingContract contract;
  contract.funcName = funcName.str();
  auto fail = [&](const Twine &msg) -> FailureOr<TrainingContract> {
    emitError() << "'ds.contract' entry '" << funcName << "': " << msg;
    return failure();
  };
  auto dict = dyn_cast<DictionaryAttr>(attr);
  if (!dict)
    return fail("expected a dictionary with 'args' and 'results'");
  auto argList = dict.getAs<ArrayAttr>("args");
  auto resultList = dict.getAs<ArrayAttr>("results");
  if (!argList || !resultList)
    return fail("expected arrays 'args' and 'results'");

  auto readType = [](DictionaryAttr d) -> RankedTensorType {
    auto t = d.getAs<TypeAttr>("type");
    auto tensor = t ? dyn_cast<RankedTensorType>(t.getValue()) : nullptr;
    return tensor && tensor.hasStaticShape() ? tensor : nullptr;
  };
  for (auto [i, a] : llvm::enumerate(argList)) {
    auto d = dyn_cast<DictionaryAttr>(a);
    std::string where = "argument #" + std::to_string(i);
    if (!d)
      return fail(where + " is not a dictionary");
    auto role = d.getAs<StringAttr>("role");
    ContractArg arg;
    if (!role || (role.getValue() != "param" && role.getValue() != "input" &&
                  role.getValue() != "state"))
      return fail(where + " needs role = \"param\", \"input\" or \"state\"");
    arg.role = role.getValue() == "param"   ? ArgRole::Param
               : role.getValue() == "input" ? ArgRole::Input
                                            : ArgRole::State;
    if (arg.role == ArgRole::State) {
      arg.state = d.getAs<StateAttr>("state");
      if (!arg.state)
        return fail(where + " needs state = #ds.state<...>");
      arg.name = arg.state.getKey();
    } else {
      auto name = d.getAs<StringAttr>("name");
      if (!name || name.getValue().empty())
        return fail(where + " needs a non-empty name");
      arg.name = name.getValue().str();
    }
    arg.type = readType(d);
    if (!arg.type)
      return fail(where + " needs type = <static ranked tensor type>");
    arg.init = d.getAs<InitAttr>("init");
    if (auto range = getArgIndex(d.get("range")))
      arg.range = *range;
    if (arg.role != ArgRole::Input && !arg.init)
      return fail(where + " needs init = #ds.init<...>");
    contract.args.push_back(std::move(arg));
  }
  for (auto [i, a] : llvm::enumerate(resultList)) {
    auto d = dyn_cast<DictionaryAttr>(a);
    std::string where = "result #" + std::to_string(i);
    if (!d)
      return fail(where + " is not a dictionary");
    auto role = d.getAs<StringAttr>("role");
    ContractResult res;
    if (!role || (role.getValue() != "loss" && role.getValue() != "update" &&
                  role.getValue() != "grad" && role.getValue() != "metric"))
      return fail(where + " needs role = \"loss\", \"update\", \"grad\" or "
                          "\"metric\"");
    res.role = role.getValue() == "loss"     ? ResultRole::Loss
               : role.getValue() == "update" ? ResultRole::Update
               : role.getValue() == "grad"   ? ResultRole::Grad
                                             : ResultRole::Metric;
    if (res.role == ResultRole::Update || res.role == ResultRole::Grad) {
      std::optional<int64_t> of = getArgIndex(d.get("of"));
      if (!of)
        return fail(where + " needs of = <argument index>");
      res.argIndex = *of;
    }
    if (res.role == ResultRole::Metric) {
      auto name = d.getAs<StringAttr>("name");
      if (!name || name.getValue().empty())
        return fail(where + " needs a non-empty name");
      res.name = name.getValue().str();
    }
    res.type = readType(d);
    if (!res.type)
      return fail(where + " needs type = <static ranked tensor type>");
    contract.results.push_back(std::move(res));
  }
  auto prefixed = [&]() -> InFlightDiagnostic {
    return emitError() << "'ds.contract' entry '" << funcName << "': ";
  };
  ContractChecker checker(contract, prefixed);
  if (failed(checker.checkWhole()))
    return failure();
  return contract;
}

//===----------------------------------------------------------------------===//
// Queries
//===----------------------------------------------------------------------===//

unsigned TrainingContract::getLossIndex() const {
  for (auto [i, res] : llvm::enumerate(results))
    if (res.role == ResultRole::Loss)
      return i;
  llvm_unreachable("a checked contract has a loss");
}

SmallVector<unsigned> TrainingContract::getArgIndices(ArgRole role) const {
  SmallVector<unsigned> indices;
  for (auto [i, arg] : llvm::enumerate(args))
    if (arg.role == role)
      indices.push_back(i);
  return indices;
}

std::optional<unsigned> TrainingContract::findArg(ArgRole role,
                                                  StringRef name) const {
  for (auto [i, arg] : llvm::enumerate(args))
    if (arg.role == role && arg.name == name)
      return i;
  return std::nullopt;
}

std::optional<unsigned>
TrainingContract::findUpdateOf(unsigned argIndex) const {
  for (auto [i, res] : llvm::enumerate(results))
    if (res.role == ResultRole::Update && res.argIndex == argIndex)
      return i;
  return std::nullopt;
}

std::optional<unsigned> TrainingContract::findGradOf(unsigned argIndex) const {
  for (auto [i, res] : llvm::enumerate(results))
    if (res.role == ResultRole::Grad && res.argIndex == argIndex)
      return i;
  return std::nullopt;
}

bool TrainingContract::hasGrads() const {
  return llvm::any_of(results, [](const ContractResult &r) {
    return r.role == ResultRole::Grad;
  });
}

bool TrainingContract::hasParamUpdates() const {
  return llvm::any_of(results, [&](const ContractResult &r) {
    return r.role == ResultRole::Update &&
           args[r.argIndex].role == ArgRole::Param;
  });
}

FailureOr<SmallVector<TrainingContract>>
mlir::ds::readContracts(ModuleOp module) {
  SmallVector<TrainingContract> contracts;
  if (auto table =
          module->getAttrOfType<DictionaryAttr>(DSDialect::kContractAttrName)) {
    for (NamedAttribute entry : table) {
      FailureOr<TrainingContract> c =
          TrainingContract::fromAttr(entry.getName().strref(), entry.getValue(),
                                     [&] { return module.emitError(); });
      if (failed(c))
        return failure();
      contracts.push_back(std::move(*c));
    }
    return contracts;
  }
  for (Operation &op : module.getBody()->getOperations()) {
    auto func = dyn_cast<FunctionOpInterface>(op);
    if (!func || !func->hasAttr(DSDialect::kTrainStepAttrName))
      continue;
    FailureOr<TrainingContract> c = TrainingContract::fromFunction(func);
    if (failed(c))
      return failure();
    contracts.push_back(std::move(*c));
  }
  return contracts;
}
