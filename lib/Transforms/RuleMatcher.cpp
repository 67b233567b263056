//===- RuleMatcher.cpp - Which policy rule applies to an op ---------------===//
//
// Parsing keeps the policy's messages (and their positions) exactly: each
// key is checked when it is read, so the first error is the one reported.
//
//===----------------------------------------------------------------------===//

#include "ds/Transforms/RuleMatcher.h"
#include "ds/Analysis/RoleAnalysis.h"
#include "ds/Dialect/DS/IR/DSDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OperationSupport.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/YAMLParser.h"

using namespace mlir;
using namespace mlir::ds;
namespace yaml = llvm::yaml;

FailureOr<std::string> mlir::ds::readPolicyScalar(yaml::Node *n, StringRef what,
                                                  PolicyErrorFn fail) {
  auto *s = dyn_cast_or_null<yaml::ScalarNode>(n);
  if (!s) {
    (void)fail(n, what + " must be a scalar");
    return failure();
  }
  SmallString<32> storage;
  return s->getValue(storage).str();
}

FailureOr<SmallVector<std::string>>
mlir::ds::readPolicyScalarOrList(yaml::Node *n, StringRef what,
                                 PolicyErrorFn fail) {
  SmallVector<std::string> out;
  if (auto *seq = dyn_cast<yaml::SequenceNode>(n)) {
    for (yaml::Node &item : *seq) {
      FailureOr<std::string> s = readPolicyScalar(&item, what, fail);
      if (failed(s))
        return failure();
      out.push_back(*s);
    }
    return out;
  }
  FailureOr<std::string> s = readPolicyScalar(n, what, fail);
  if (failed(s))
    return failure();
  out.push_back(*s);
  return out;
}

bool RuleMatch::isMatchKey(StringRef key) {
  return key == "op" || key == "role" || key == "param" || key == "module";
}

LogicalResult RuleMatch::parseKey(StringRef key, yaml::Node *value,
                                  MLIRContext *ctx, PolicyErrorFn fail) {
  if (key == "op") {
    auto names = readPolicyScalarOrList(value, "op", fail);
    if (failed(names))
      return failure();
    for (std::string &op : *names) {
      if (!StringRef(op).starts_with("ds."))
        op = "ds." + op;
      if (!RegisteredOperationName::lookup(op, ctx))
        return fail(value, "unknown op '" + op + "'");
    }
    ops = std::move(*names);
    return success();
  }
  if (key == "role") {
    auto names = readPolicyScalarOrList(value, "role", fail);
    if (failed(names))
      return failure();
    for (const std::string &r : *names)
      if (!llvm::is_contained(allRoles(), StringRef(r))) {
        std::string known;
        for (StringRef k : allRoles())
          known += (known.empty() ? "" : ", ") + k.str();
        return fail(value,
                    "unknown role '" + r + "'; expected one of " + known);
      }
    roles = std::move(*names);
    return success();
  }
  assert((key == "param" || key == "module") && "not a match key");
  auto glob = readPolicyScalar(value, key, fail);
  if (failed(glob))
    return failure();
  if (auto e = llvm::GlobPattern::create(*glob); !e) {
    std::string msg = llvm::toString(e.takeError());
    return fail(value, "bad pattern '" + *glob + "': " + msg);
  }
  (key == "param" ? param : module) = *glob;
  return success();
}

std::string RuleMatch::describe() const {
  if (!roles.empty())
    return "role " + llvm::join(roles, ",");
  if (!ops.empty())
    return "op " + llvm::join(ops, ",");
  if (!param.empty())
    return "param " + param;
  return "module " + module;
}

std::optional<unsigned> RuleMatcher::match(Operation *op, StringRef role,
                                           ArrayRef<StringRef> params) const {
  StringRef module;
  if (auto m = op->getAttrOfType<StringAttr>(DSDialect::kModuleAttrName))
    module = m.getValue();
  return match(op->getName().getStringRef(), role, module, params);
}

std::optional<unsigned> RuleMatcher::match(StringRef opName, StringRef role,
                                           StringRef module,
                                           ArrayRef<StringRef> params) const {
  // Globs are compiled per query: a GlobPattern refers to its text, and
  // policies are small.
  for (auto [i, m] : llvm::enumerate(matches)) {
    if (!m.ops.empty() && !llvm::is_contained(m.ops, opName))
      continue;
    if (!m.roles.empty() && !llvm::is_contained(m.roles, role))
      continue;
    // A pattern that does not compile matches nothing.
    if (!m.module.empty()) {
      auto glob = llvm::GlobPattern::create(m.module);
      if (!glob || !glob->match(module))
        continue;
    }
    if (!m.param.empty()) {
      auto glob = llvm::GlobPattern::create(m.param);
      if (!glob ||
          llvm::none_of(params, [&](StringRef p) { return glob->match(p); }))
        continue;
    }
    return static_cast<unsigned>(i);
  }
  return std::nullopt;
}
