//===- RoleAnalysis.cpp - What each op of a model is for ------------------===//
//
// Structure first, names second. The analysis looks for the two shapes
// every transformer block and MLP is made of:
//  - attention: a softmax whose input is (up to scaling and masking) a
//    product of two activations, the scores, and whose output multiplies a
//    third, the context. Tracing the three activations back through views
//    (reshape, transpose, slice, cast) and bias adds reaches the q, k and v
//    projections; one projection feeding both q and k through slices is a
//    fused QKV. The projection that consumes the context is the attention
//    output.
//  - feed-forward: an activation (GELU, ReLU, SiLU, ...) between two
//    projections: up, activation, down; an activation whose result is
//    multiplied by a second projection is SwiGLU's gate.
// A projection is a matmul with a parameter operand (through views). The
// projection feeding the loss is the head; norms, softmaxes, losses,
// embeddings and reductions are recognised by op. Module paths
// (`ds.module`, from the front end) only name projections the structure
// left generic ("linear"), and a `ds.role` already present is kept.
//
//===----------------------------------------------------------------------===//

#include "ds/Analysis/RoleAnalysis.h"
#include "ds/Analysis/StepQueries.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::ds;

ArrayRef<StringLiteral> mlir::ds::allRoles() {
  static const StringLiteral kAll[] = {
      role::kAttnQ,      role::kAttnK,       role::kAttnV,     role::kAttnQKV,
      role::kAttnScores, role::kAttnContext, role::kAttnOut,   role::kFfnUp,
      role::kFfnGate,    role::kFfnAct,      role::kFfnDown,   role::kNorm,
      role::kSoftmax,    role::kLoss,        role::kEmbedding, role::kHead,
      role::kReduction,  role::kLinear,      role::kConv};
  return kAll;
}

bool mlir::ds::role::isAttention(StringRef r) {
  return llvm::is_contained(
      {kAttnQ, kAttnK, kAttnV, kAttnQKV, kAttnScores, kAttnContext, kAttnOut},
      r);
}

bool mlir::ds::role::isFeedForward(StringRef r) {
  return llvm::is_contained({kFfnUp, kFfnGate, kFfnAct, kFfnDown}, r);
}

namespace {

/// Whether `v` is a rank-0 or splat constant (a scale, a mask fill). Only
/// the ops that turn a scalar into a splat are looked through here (not
/// transposes or slices), as the score patterns this recognises use them.
bool isConstantLike(Value v) {
  if (Operation *def = v.getDefiningOp())
    return matchPattern(def, m_Constant()) ||
           (isa<ReshapeOp, BroadcastOp, CastOp>(def) &&
            isConstantLike(def->getOperand(0)));
  return false;
}

/// A matmul with a parameter operand: a linear layer.
bool isProjection(Operation *op) {
  // A block-sparse layer (ds-sparsify-matmul) always reads its weight.
  if (isa<BlockSparseMatMulOp>(op))
    return isForwardOp(op);
  auto mm = dyn_cast<MatMulOp>(op);
  return mm && isForwardOp(op) &&
         (traceToParam(mm.getLhs()) || traceToParam(mm.getRhs()));
}

/// Bias adds: `y + b` with `b` a parameter (through views).
bool isBiasAdd(Operation *op) {
  auto add = dyn_cast<AddOp>(op);
  return add && (traceToParam(add.getLhs()) || traceToParam(add.getRhs()));
}

/// Scaling and masking of attention scores: multiplied or divided by a
/// constant, plus an additive mask, masked by a select or causal mask.
bool isScoreAdjustment(Operation *op) {
  if (isa<CausalMaskOp, SelectOp, AddOp, SubOp>(op))
    return true;
  if (isa<MulOp, DivOp>(op))
    return isConstantLike(op->getOperand(1)) ||
           isConstantLike(op->getOperand(0));
  return false;
}

/// The op that produced `v`, looking back through views, bias adds and
/// (when `adjustments`) score scaling and masking.
Operation *sourceOf(Value v, bool adjustments = false) {
  while (Operation *def = v.getDefiningOp()) {
    if (isLookThroughOp(def) || isBiasAdd(def)) {
      // A bias add: follow the non-parameter operand.
      if (auto add = dyn_cast<AddOp>(def))
        v = traceToParam(add.getLhs()) ? add.getRhs() : add.getLhs();
      else
        v = def->getOperand(0);
      continue;
    }
    if (adjustments && isScoreAdjustment(def)) {
      // Follow the operand that is not a constant (or, for select, the
      // value masked).
      if (auto sel = dyn_cast<SelectOp>(def))
        v = isConstantLike(sel.getOnTrue()) ? sel.getOnFalse()
                                            : sel.getOnTrue();
      else if (def->getNumOperands() == 2 && isConstantLike(def->getOperand(0)))
        v = def->getOperand(1);
      else
        v = def->getOperand(0);
      continue;
    }
    return def;
  }
  return nullptr;
}

/// The forward ops that consume `v`, looking forward through views and
/// bias adds.
SmallVector<Operation *> usersOf(Value v) {
  SmallVector<Operation *> out;
  SmallVector<Value> todo{v};
  llvm::DenseSet<Value> seen;
  while (!todo.empty()) {
    Value x = todo.pop_back_val();
    if (!seen.insert(x).second)
      continue;
    for (Operation *user : x.getUsers()) {
      if (!isForwardOp(user))
        continue;
      if (isLookThroughOp(user) || isBiasAdd(user))
        todo.push_back(user->getResult(0));
      else
        out.push_back(user);
    }
  }
  return out;
}

bool isActivation(Operation *op) {
  return op->hasTrait<ds::OpTrait::Activation>();
}

/// The role a module path names, for projections: `layers.0.attn.q_proj`
/// -> attn.q. Empty when the name says nothing.
StringRef roleFromName(StringRef path) {
  StringRef last =
      path.rsplit('.').second.empty() ? path : path.rsplit('.').second;
  struct Entry {
    StringRef role;
    std::initializer_list<StringRef> names;
  };
  static const Entry kNames[] = {
      {role::kAttnQ, {"q_proj", "q", "query", "wq", "to_q"}},
      {role::kAttnK, {"k_proj", "k", "key", "wk", "to_k"}},
      {role::kAttnV, {"v_proj", "v", "value", "wv", "to_v"}},
      {role::kAttnQKV,
       {"qkv", "qkv_proj", "c_attn", "in_proj", "wqkv", "to_qkv"}},
      {role::kAttnOut, {"out_proj", "o_proj", "wo", "to_out"}},
      {role::kFfnUp, {"up_proj", "up", "fc1", "w1", "c_fc", "fc_in"}},
      {role::kFfnGate, {"gate_proj", "gate", "w3"}},
      {role::kFfnDown, {"down_proj", "down", "fc2", "w2", "fc_out"}},
      {role::kHead, {"lm_head", "head", "classifier"}},
  };
  std::string lower = last.lower();
  for (const Entry &e : kNames)
    for (StringRef n : e.names)
      if (lower == n)
        return e.role;
  return StringRef();
}

} // namespace

void RoleAnalysis::set(Operation *op, StringRef r, bool fromStructure) {
  if (!op || roles.count(op))
    return;
  roles[op] = r.str();
  if (fromStructure)
    structural.insert(op);
}

void RoleAnalysis::findAttention(Operation *softmax) {
  Operation *scores = sourceOf(softmax->getOperand(0), /*adjustments=*/true);
  auto scoresMM = dyn_cast_or_null<MatMulOp>(scores);
  if (!scoresMM || isProjection(scoresMM))
    return;
  // The probabilities multiply v.
  MatMulOp contextMM;
  for (Operation *user : usersOf(softmax->getResult(0)))
    if (auto mm = dyn_cast<MatMulOp>(user); mm && !isProjection(mm)) {
      contextMM = mm;
      break;
    }
  if (!contextMM)
    return;
  Value probs = softmax->getResult(0);
  Value vSide =
      sourceOf(contextMM.getLhs()) == softmax || contextMM.getLhs() == probs
          ? contextMM.getRhs()
          : contextMM.getLhs();
  Operation *q = sourceOf(scoresMM.getLhs());
  Operation *k = sourceOf(scoresMM.getRhs());
  Operation *v = sourceOf(vSide);
  set(softmax, role::kSoftmax);
  set(scoresMM, role::kAttnScores);
  set(contextMM, role::kAttnContext);
  if (q && q == k && isProjection(q)) {
    set(q, role::kAttnQKV);
  } else {
    if (q && isProjection(q))
      set(q, role::kAttnQ);
    if (k && isProjection(k))
      set(k, role::kAttnK);
  }
  if (v && isProjection(v) && !roles.count(v))
    set(v, role::kAttnV);
  for (Operation *user : usersOf(contextMM.getResult()))
    if (isProjection(user))
      set(user, role::kAttnOut);
}

void RoleAnalysis::findFeedForward(Operation *activation) {
  Operation *up = sourceOf(activation->getOperand(0));
  if (!up || !isProjection(up) ||
      (roles.count(up) && roles[up] != role::kFfnDown &&
       roles[up] != role::kFfnUp && roles[up] != role::kFfnGate))
    return;
  SmallVector<Operation *> users = usersOf(activation->getResult(0));
  // SwiGLU: act(x Wg) * (x Wu), then Wd.
  for (Operation *user : users) {
    auto mul = dyn_cast<MulOp>(user);
    if (!mul)
      continue;
    Value other = mul.getLhs().getDefiningOp() == activation ? mul.getRhs()
                                                             : mul.getLhs();
    Operation *upOther = sourceOf(other);
    if (!upOther || !isProjection(upOther))
      continue;
    for (Operation *down : usersOf(mul.getResult()))
      if (isProjection(down)) {
        set(up, role::kFfnGate);
        set(upOther, role::kFfnUp);
        set(activation, role::kFfnAct);
        set(mul, role::kFfnAct);
        set(down, role::kFfnDown);
        return;
      }
  }
  for (Operation *down : users)
    if (isProjection(down)) {
      set(up, role::kFfnUp);
      set(activation, role::kFfnAct);
      set(down, role::kFfnDown);
      return;
    }
}

void RoleAnalysis::findHead(Operation *loss) {
  Operation *logits = sourceOf(loss->getOperand(0));
  if (logits && isProjection(logits))
    set(logits, role::kHead);
}

RoleAnalysis::RoleAnalysis(FunctionOpInterface func) {
  if (func.isExternal())
    return;
  Block &body = func.getFunctionBody().front();
  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator())
    if (isForwardOp(&op))
      forward.push_back(&op);
  // Roles a front end wrote are facts.
  for (Operation *op : forward)
    if (auto r = op->getAttrOfType<StringAttr>(DSDialect::kRoleAttrName))
      set(op, r.getValue(), /*fromStructure=*/false);
  for (Operation *op : forward)
    if (isa<SoftmaxOp>(op))
      findAttention(op);
  for (Operation *op : forward)
    if (isa<CrossEntropyOp, MseLossOp>(op))
      findHead(op);
  for (Operation *op : forward)
    if (isActivation(op))
      findFeedForward(op);
  for (Operation *op : forward) {
    if (isa<LayerNormOp, RmsNormOp, BatchNormOp>(op))
      set(op, role::kNorm);
    else if (isa<SoftmaxOp, LogSoftmaxOp>(op))
      set(op, role::kSoftmax);
    else if (isa<CrossEntropyOp, MseLossOp>(op))
      set(op, role::kLoss);
    else if (isa<EmbeddingOp>(op))
      set(op, role::kEmbedding);
    else if (isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>(op))
      set(op, role::kReduction);
    else if (isa<Conv2DOp>(op))
      set(op, role::kConv);
    else if (isProjection(op)) {
      // Names refine what the structure left generic.
      StringRef named;
      if (auto path = op->getAttrOfType<StringAttr>(DSDialect::kModuleAttrName))
        named = roleFromName(path.getValue());
      set(op, named.empty() ? StringRef(role::kLinear) : named,
          /*fromStructure=*/named.empty());
    }
  }
}

SmallVector<StringRef> RoleAnalysis::rolesOfConsumers(Value param) const {
  SmallVector<StringRef> out;
  SmallVector<Value> todo{param};
  llvm::DenseSet<Value> seen;
  while (!todo.empty()) {
    Value v = todo.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    for (Operation *user : v.getUsers()) {
      if (!isForwardOp(user))
        continue;
      if (isLookThroughOp(user)) {
        todo.push_back(user->getResult(0));
        continue;
      }
      StringRef r = roleOf(user);
      // A bias: what it is for is the projection it is added to.
      if (auto add = dyn_cast<AddOp>(user); add && r.empty()) {
        Value other = add.getLhs() == v ? add.getRhs() : add.getLhs();
        Operation *def = other.getDefiningOp();
        while (def && isLookThroughOp(def))
          def = def->getOperand(0).getDefiningOp();
        if (def)
          r = roleOf(def);
      }
      if (!r.empty())
        out.push_back(r);
    }
  }
  return out;
}
