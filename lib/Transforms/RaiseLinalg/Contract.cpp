//===- Contract.cpp - The training-step contract from import options ------===//
//
// torch-mlir's output is a plain function; ds-import-linalg's `args` and
// `results` options say what each argument and result is, positionally, in
// the words the front end knows (parameter and buffer names). This file
// turns them into the contract attributes and checks them; the dialect's
// contract verifier then checks the result like any other step.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/DSAttrs.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/TrainingContract.h"
#include "ds/Transforms/ImportLinalg.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::ds;

/// Splits `role:name` at the first colon (name empty when there is none).
static std::pair<StringRef, StringRef> splitRole(StringRef entry) {
  return entry.split(':');
}

LogicalResult mlir::ds::attachContract(FunctionOpInterface func,
                                       const ImportContractSpec &spec) {
  MLIRContext *ctx = func->getContext();
  auto fail = [&]() { return func->emitOpError(""); };
  if (func->hasAttr(DSDialect::kTrainStepAttrName))
    return fail() << "@" << func.getName()
                  << " already has a training-step contract; drop the 'args' "
                     "and 'results' options";
  if (spec.args.size() != func.getNumArguments())
    return fail() << "'args' gives " << spec.args.size() << " roles but @"
                  << func.getName() << " has " << func.getNumArguments()
                  << " arguments";
  if (spec.results.size() != func.getNumResults())
    return fail() << "'results' gives " << spec.results.size() << " roles but @"
                  << func.getName() << " has " << func.getNumResults()
                  << " results";

  // Arguments: param:<name>, state:<kind>, input:<name>.
  Builder b(ctx);
  llvm::StringMap<unsigned> updatable;
  SmallVector<SmallVector<NamedAttribute>> argAttrs(func.getNumArguments());
  for (auto [i, entry] : llvm::enumerate(spec.args)) {
    auto [role, name] = splitRole(entry);
    if (role != "param" && role != "state" && role != "input")
      return fail() << "args entry #" << i << " '" << entry
                    << "' has unknown role '" << role
                    << "' (expected param:<name>, state:<kind> or "
                       "input:<name>)";
    if (name.empty())
      return fail() << "args entry #" << i << " '" << entry
                    << "' has an empty name";
    auto init = InitAttr::get(ctx, InitKind::file, llvm::APFloat(0.0));
    if (role == "param") {
      argAttrs[i].push_back(
          b.getNamedAttr(DSDialect::kParamAttrName, b.getStringAttr(name)));
      argAttrs[i].push_back(b.getNamedAttr(DSDialect::kInitAttrName, init));
      updatable[name] = i;
    } else if (role == "state") {
      argAttrs[i].push_back(b.getNamedAttr(DSDialect::kStateAttrName,
                                           StateAttr::get(ctx, name, "")));
      argAttrs[i].push_back(b.getNamedAttr(DSDialect::kInitAttrName, init));
      updatable[name] = i;
    } else {
      argAttrs[i].push_back(
          b.getNamedAttr(DSDialect::kInputAttrName, b.getStringAttr(name)));
    }
  }

  // Results: loss, update:<param or state>, metric:<name>.
  SmallVector<NamedAttribute> resultAttrs;
  for (auto [i, entry] : llvm::enumerate(spec.results)) {
    auto [role, name] = splitRole(entry);
    if (role == "loss" && name.empty()) {
      resultAttrs.push_back(
          b.getNamedAttr(DSDialect::kLossAttrName, b.getUnitAttr()));
    } else if (role == "update" && !name.empty()) {
      auto it = updatable.find(name);
      if (it == updatable.end())
        return fail() << "results entry #" << i << " '" << entry
                      << "' updates '" << name
                      << "', which is no parameter or state in 'args'";
      resultAttrs.push_back(b.getNamedAttr(DSDialect::kUpdateAttrName,
                                           b.getI64IntegerAttr(it->second)));
    } else if (role == "metric" && !name.empty()) {
      resultAttrs.push_back(
          b.getNamedAttr(DSDialect::kMetricAttrName, b.getStringAttr(name)));
    } else {
      return fail() << "results entry #" << i << " '" << entry
                    << "' is not a result role (expected loss, "
                       "update:<name> or metric:<name>)";
    }
  }

  for (auto [i, attrs] : llvm::enumerate(argAttrs))
    for (NamedAttribute a : attrs)
      func.setArgAttr(i, a.getName(), a.getValue());
  for (auto [i, a] : llvm::enumerate(resultAttrs))
    func.setResultAttr(i, a.getName(), a.getValue());
  func->setAttr(DSDialect::kTrainStepAttrName, b.getUnitAttr());
  return failure(failed(TrainingContract::fromFunction(func)));
}
