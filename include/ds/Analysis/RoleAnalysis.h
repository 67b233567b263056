//===- RoleAnalysis.h - What each op of a model is for ----------*- C++ -*-===//
//
// Infers the role of the forward ops of a training step (attention q/k/v
// projection, attention output, FFN up/gate/activation/down, norm,
// softmax, loss, embedding, head, ...) from the shape of the graph alone,
// so that it works on graphs whose names were stripped; module paths from
// a front end (`ds.module`) then refine projections the structure left
// generic, and a `ds.role` already on an op is kept.
//
// A pure analysis: it never writes the roles into the IR. The pass that
// owns them (ds-assign-precision) writes `ds.role`; others (ds-clip-gradients)
// ask for them without depending on that pass having run.
//
//===----------------------------------------------------------------------===//

#ifndef DS_ANALYSIS_ROLEANALYSIS_H
#define DS_ANALYSIS_ROLEANALYSIS_H

#include "mlir/IR/Operation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace mlir::ds {

/// The role vocabulary (the values of `ds.role`).
namespace role {
inline constexpr llvm::StringLiteral kAttnQ = "attn.q";
inline constexpr llvm::StringLiteral kAttnK = "attn.k";
inline constexpr llvm::StringLiteral kAttnV = "attn.v";
inline constexpr llvm::StringLiteral kAttnQKV = "attn.qkv";
inline constexpr llvm::StringLiteral kAttnScores = "attn.scores";
inline constexpr llvm::StringLiteral kAttnContext = "attn.context";
inline constexpr llvm::StringLiteral kAttnOut = "attn.out";
inline constexpr llvm::StringLiteral kFfnUp = "ffn.up";
inline constexpr llvm::StringLiteral kFfnGate = "ffn.gate";
inline constexpr llvm::StringLiteral kFfnAct = "ffn.act";
inline constexpr llvm::StringLiteral kFfnDown = "ffn.down";
inline constexpr llvm::StringLiteral kNorm = "norm";
inline constexpr llvm::StringLiteral kSoftmax = "softmax";
inline constexpr llvm::StringLiteral kLoss = "loss";
inline constexpr llvm::StringLiteral kEmbedding = "embedding";
inline constexpr llvm::StringLiteral kHead = "head";
inline constexpr llvm::StringLiteral kReduction = "reduction";
inline constexpr llvm::StringLiteral kLinear = "linear";
inline constexpr llvm::StringLiteral kConv = "conv";

/// Whether `r` is one of the attention roles (attn.*).
bool isAttention(llvm::StringRef r);
/// Whether `r` is one of the feed-forward roles (ffn.*).
bool isFeedForward(llvm::StringRef r);
} // namespace role

/// Every role name, for policy validation and messages.
llvm::ArrayRef<llvm::StringLiteral> allRoles();

/// Roles of the forward ops (those without `ds.vjp_of`) of `func`.
class RoleAnalysis {
public:
  explicit RoleAnalysis(FunctionOpInterface func);

  /// The role of `op`, or "" when it has none.
  llvm::StringRef roleOf(Operation *op) const {
    auto it = roles.find(op);
    return it == roles.end() ? llvm::StringRef() : llvm::StringRef(it->second);
  }
  /// Whether the structure (not a name) decided `op`'s role.
  bool isStructural(Operation *op) const { return structural.contains(op); }

  /// The roles of the forward ops that consume `param` (a parameter
  /// argument), looking through data movement and casts; a bias add that
  /// has no role of its own counts as the op whose output it biases. In use
  /// order, without the empty role; may repeat.
  llvm::SmallVector<llvm::StringRef> rolesOfConsumers(Value param) const;

private:
  void set(Operation *op, llvm::StringRef role, bool fromStructure = true);
  void findAttention(Operation *softmax);
  void findFeedForward(Operation *activation);
  void findHead(Operation *loss);

  llvm::DenseMap<Operation *, std::string> roles;
  llvm::DenseSet<Operation *> structural;
};

} // namespace mlir::ds

#endif // DS_ANALYSIS_ROLEANALYSIS_H
