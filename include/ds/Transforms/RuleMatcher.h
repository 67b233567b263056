//===- RuleMatcher.h - Which policy rule applies to an op -----*- C++ -*-===//
//
// The matching half of a policy rule, shared by every section of a policy
// file that assigns something per op (today `rules:` of the precision
// policy; the coming `quant:` and `sparsity:` sections): an op matches a
// rule when it is one of the rule's op kinds, has one of its roles, consumes
// a parameter whose name fits its glob and sits in a module whose path fits
// its glob (absent keys match everything). The first matching rule wins.
// Nothing here knows what a rule assigns.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TRANSFORMS_RULEMATCHER_H
#define DS_TRANSFORMS_RULEMATCHER_H

#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace llvm::yaml {
class Node;
} // namespace llvm::yaml

namespace mlir::ds {

/// Emits `message` at the position of `node` in the policy file and returns
/// failure.
using PolicyErrorFn =
    llvm::function_ref<LogicalResult(llvm::yaml::Node *node, const Twine &)>;

/// The text of the scalar `node` of a policy file; "<what> must be a
/// scalar" through `fail` otherwise. Shared by every policy section.
FailureOr<std::string> readPolicyScalar(llvm::yaml::Node *node,
                                        llvm::StringRef what,
                                        PolicyErrorFn fail);

/// A scalar or a list of scalars of a policy file.
FailureOr<llvm::SmallVector<std::string>>
readPolicyScalarOrList(llvm::yaml::Node *node, llvm::StringRef what,
                       PolicyErrorFn fail);

/// What one rule matches. Empty keys match every op.
struct RuleMatch {
  llvm::SmallVector<std::string> ops;   ///< op names, e.g. "ds.matmul"
  llvm::SmallVector<std::string> roles; ///< roles, e.g. "attn.q"
  std::string param;                    ///< glob over consumed parameter names
  std::string module;                   ///< glob over `ds.module`

  /// The keys a rule mapping may hold for matching.
  static bool isMatchKey(llvm::StringRef key);

  /// Parses the value of match key `key` of a rule mapping (an op name or
  /// list, known to `ctx`, `ds.` optional; a role or list; a glob),
  /// reporting errors through `fail`.
  LogicalResult parseKey(llvm::StringRef key, llvm::yaml::Node *value,
                         MLIRContext *ctx, PolicyErrorFn fail);

  /// Whether no key was given.
  bool empty() const {
    return ops.empty() && roles.empty() && param.empty() && module.empty();
  }

  /// What the rule is selected by, for its label: "role a,b", else "op ...",
  /// "param ..." or "module ...".
  std::string describe() const;
};

/// First-match-wins over an ordered list of rule matches.
class RuleMatcher {
public:
  /// Appends a match; its index is the number of matches before it.
  void append(RuleMatch match) { matches.push_back(std::move(match)); }

  size_t size() const { return matches.size(); }
  const RuleMatch &operator[](size_t i) const { return matches[i]; }

  /// The index of the first match for `op`, with role `role` ("" for none)
  /// and consuming the parameters named `params`; none when no rule
  /// matches.
  std::optional<unsigned> match(Operation *op, llvm::StringRef role,
                                llvm::ArrayRef<llvm::StringRef> params) const;

  /// The same by op name and module path, for callers without an op.
  std::optional<unsigned> match(llvm::StringRef opName, llvm::StringRef role,
                                llvm::StringRef module,
                                llvm::ArrayRef<llvm::StringRef> params) const;

private:
  llvm::SmallVector<RuleMatch> matches;
};

} // namespace mlir::ds

#endif // DS_TRANSFORMS_RULEMATCHER_H
