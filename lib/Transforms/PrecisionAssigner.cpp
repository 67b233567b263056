//===- PrecisionAssigner.cpp - ds-assign-precision on one step ------------===//
//
// The phases of ds-assign-precision on one step (PrecisionAssigner.h):
//  1. decide: roles (RoleAnalysis), written as `ds.role` and inherited by
//     backward ops through `ds.op_id`; one rule per forward op from the
//     policy (first match wins);
//  2. validate: no FP8 outside matmuls, f32 operands; the channel level's
//     layers and their high type;
//  3. materialise the forward (PrecisionMaterializer.h): casts for compute
//     and storage types, FP8 scaling (delayed with amax-history state,
//     current, or block), FP32 accumulation and descaling for GEMMs; the
//     channel split (ChannelPrecision.h);
//  4. materialise the backward: gradient GEMMs and convolution gradients
//     take the `grad` type of their forward op's rule for the cotangent
//     operand, the forward's compute type for the primal one;
//  5. keep the narrow copies for the backward, append the new state (amax
//     histories, channel estimates) as argument/update pairs; the decisions
//     go to the module's `ds.precision_map`.
// Decisions are all taken (and checked) before the first op is rewritten.
//
//===----------------------------------------------------------------------===//

#include "PrecisionAssigner.h"

#include "ds/Analysis/Activity.h"
#include "ds/Analysis/RoleAnalysis.h"
#include "ds/Analysis/StepQueries.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/IR/TrainingContract.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/Format.h"

#include <array>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

static std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

static std::string locText(LocationAttr loc) {
  if (auto f = dyn_cast_or_null<FileLineColLoc>(loc))
    return (f.getFilename().strref() + ":" + Twine(f.getLine())).str();
  return "";
}

/// Parameters an op consumes (through views), by name.
static SmallVector<StringRef> consumedParamNames(Operation *op) {
  SmallVector<StringRef> names;
  for (BlockArgument arg : consumedParams(op))
    names.push_back(getParamName(arg));
  return names;
}

/// A label for state keys and the map: the module path, else role#id.
static std::string opLabel(Operation *op, StringRef role, int64_t id) {
  if (auto m = op->getAttrOfType<StringAttr>(DSDialect::kModuleAttrName))
    return (m.getValue() + "#" + Twine(id)).str();
  return ((role.empty() ? StringRef("op") : role) + "#" + Twine(id)).str();
}

/// Whether an op can run on narrower operands by retyping it.
static bool isRetypable(Operation *op) {
  return op->hasTrait<ds::OpTrait::Retypable>();
}

PrecisionAssigner::PrecisionAssigner(FunctionOpInterface func,
                                     const PrecisionPolicy &policy,
                                     bool observe)
    : func(func), policy(policy), observe(observe), b(func->getContext()),
      f32(b.getF32Type()) {}

LogicalResult PrecisionAssigner::run() {
  if (failed(checkStep()))
    return failure();
  decide();
  if (failed(validate()) || failed(selectChannelLayers()))
    return failure();
  m.emplace(func, policy, observe);
  splitter.emplace(*m, policy.channel);
  if (failed(materializeForward()))
    return failure();
  // Before the gradient GEMMs are rebuilt, so that their FP8 quantisation
  // (its amax included) reads the rounded cotangent, as TE quantises the
  // bf16 gradient.
  keepLinearCotangentsNarrow();
  if (failed(materializeBackward()))
    return failure();
  keepNarrowCopiesForBackward();
  m->finish();
  return success();
}

LogicalResult PrecisionAssigner::checkStep() {
  FailureOr<TrainingContract> contract = TrainingContract::fromFunction(func);
  if (failed(contract))
    return failure();
  if (contract->hasParamUpdates())
    return func->emitOpError("the step already updates "
                             "its parameters; run ds-assign-precision before "
                             "ds-insert-optimizer");
  if (!contract->hasGrads())
    return func->emitOpError("the step has no gradients "
                             "('")
           << DSDialect::kGradAttrName
           << "' results); run ds-autodiff first, so that the backward gets "
              "its precisions too";
  body = &func.getFunctionBody().front();
  return success();
}

void PrecisionAssigner::decide() {
  MLIRContext *ctx = func->getContext();
  // Roles, written as `ds.role` (this pass owns them; the analysis only
  // reads); backward ops inherit theirs.
  RoleAnalysis roles(func);
  for (Operation &op : body->without_terminator())
    if (StringRef r = roles.roleOf(&op); !r.empty())
      op.setAttr(DSDialect::kRoleAttrName, StringAttr::get(ctx, r));
  llvm::DenseMap<int64_t, Operation *> forwardById;
  for (Operation &op : body->without_terminator())
    if (auto id = op.getAttrOfType<IntegerAttr>(DSDialect::kOpIdAttrName);
        id && isForwardOp(&op))
      forwardById[id.getInt()] = &op;
  for (Operation &op : body->without_terminator()) {
    auto id = op.getAttrOfType<IntegerAttr>(DSDialect::kOpIdAttrName);
    if (!id || isForwardOp(&op))
      continue;
    if (Operation *fwd = forwardById.lookup(id.getInt()))
      if (auto r = fwd->getAttrOfType<StringAttr>(DSDialect::kRoleAttrName))
        op.setAttr(DSDialect::kRoleAttrName, r);
  }

  // One decision per forward ds op with a float result.
  int64_t counter = 0;
  for (Operation &op : body->without_terminator()) {
    if (!isForwardOp(&op) || !isa<DSDialect>(op.getDialect()))
      continue;
    if (!llvm::any_of(op.getResults(), isFloatTensor))
      continue;
    // The observers and fake-quantizers of QAT keep their f32 arithmetic.
    if (op.hasAttr(DSDialect::kQuantAttrName))
      continue;
    StringRef role = roles.roleOf(&op);
    SmallVector<StringRef> params = consumedParamNames(&op);
    Decision d{&op, policy.match(&op, role, params), role.str(),
               opLabel(&op, role, counter++), /*overridden=*/""};
    // A layer a quant rule keeps unquantized in a type: that type, whatever
    // the precision rule says (DESIGN.md: the quant rule wins).
    if (auto keep = op.getAttrOfType<TypeAttr>(DSDialect::kQuantKeepAttrName)) {
      PrecisionRule &kept = keptRules.emplace_back();
      kept.compute = keep.getValue();
      kept.label = "quant: kept in " + typeName(keep.getValue()) +
                   " by the quantization policy";
      d.overridden = kept.label + (d.rule ? ", which wins over the rule '" +
                                                d.rule->label + "'"
                                          : std::string());
      d.rule = &kept;
    } else if (isa<MatMulOp, Conv2DOp>(op) &&
               llvm::any_of(op.getOperands(), [](Value v) {
                 return v.getDefiningOp() &&
                        v.getDefiningOp()->hasAttr(DSDialect::kQuantAttrName);
               })) {
      d.overridden = "quant: its inputs are fake-quantized "
                     "(ds-insert-fake-quant), which wins over " +
                     (d.rule ? "the rule '" + d.rule->label + "'"
                             : std::string("the policy"));
      d.rule = nullptr;
    }
    decisions.push_back(std::move(d));
  }
  for (Decision &d : decisions)
    if (auto id = d.op->getAttrOfType<IntegerAttr>(DSDialect::kOpIdAttrName)) {
      ruleById[id.getInt()] = d.rule;
      labelById[id.getInt()] = d.label;
    }
}

LogicalResult PrecisionAssigner::validate() {
  for (Decision &d : decisions) {
    if (!d.rule)
      continue;
    Operation &op = *d.op;
    bool fp8 = (d.rule->compute && isFP8(d.rule->compute)) ||
               (d.rule->storage && isFP8(d.rule->storage)) ||
               (d.rule->grad && isFP8(d.rule->grad));
    // A block-sparse layer matched by an FP8 rule runs the runtime's f32
    // kernels; materialization says so ("compute type not applied").
    if (fp8 && !isa<MatMulOp, BlockSparseMatMulOp>(op)) {
      InFlightDiagnostic diag =
          op.emitOpError("")
          << d.rule->label << " maps this op to FP8; only matmuls run in FP8 "
          << "(reductions, norms, softmax, losses and elementwise ops stay "
             "in at least BF16)";
      diag.attachNote(Location(d.rule->loc)) << "the rule is here";
      return failure();
    }
    for (Value v : op.getOperands())
      if (isFloatTensor(v) && !tensorType(v).getElementType().isF32())
        return op.emitOpError("expects f32 operands, "
                              "got ")
               << v.getType();
  }
  return success();
}

LogicalResult PrecisionAssigner::selectChannelLayers() {
  const ChannelSettings &channel = policy.channel;
  if (!channel.enabled)
    return success();
  for (Decision &d : decisions) {
    if (!d.rule || !llvm::is_contained(channel.roles, d.role))
      continue;
    bool narrow = (d.rule->compute && !d.rule->compute.isF32()) ||
                  (d.rule->storage && !d.rule->storage.isF32()) ||
                  (d.rule->grad && !d.rule->grad.isF32());
    if (!narrow)
      continue;
    // The promoted channels must get more bits, not fewer.
    Type high = channel.high ? channel.high : f32;
    for (Type t : {d.rule->compute, d.rule->storage, d.rule->grad})
      if (t && t.getIntOrFloatBitWidth() > high.getIntOrFloatBitWidth()) {
        InFlightDiagnostic diag = d.op->emitOpError("the channel level's "
                                                    "high type ")
                                  << high << " is narrower than " << t << " of "
                                  << d.rule->label;
        diag.attachNote(Location(channel.loc)) << "the channel section";
        return failure();
      }
    ChannelLayer layer;
    std::string why = channelCandidate(d.op, func, layer);
    if (!why.empty()) {
      if (!observe)
        d.op->emitWarning("the channel level does not "
                          "apply to this ")
            << d.role << " op: " << why;
      continue;
    }
    channelLayers[d.op] = layer;
  }
  for (auto &[op, layer] : channelLayers)
    if (auto id = op->getAttrOfType<IntegerAttr>(DSDialect::kOpIdAttrName))
      channelById[id.getInt()] = &layer;
  return success();
}

void PrecisionAssigner::addEntry(Operation *op, StringRef role, StringRef label,
                                 Type compute, Type storage, Type grad,
                                 const PrecisionRule *rule, bool channelSplit,
                                 StringRef overridden) {
  SmallVector<NamedAttribute> f;
  std::string why = !overridden.empty() ? overridden.str()
                    : rule              ? rule->label
                                        : "no rule: f32";
  if (rule && !locText(rule->loc).empty())
    why += " at " + locText(rule->loc);
  if (observe) {
    // The high-precision variant: everything f32.
    compute = storage = f32;
    grad = Type();
    why = "time level: the high-precision variant (" + why + " observed)";
    rule = nullptr;
  } else if (rule && rule->compute && !rule->compute.isF32() &&
             !isa<MatMulOp, Conv2DOp>(op) && !isRetypable(op)) {
    why += " (compute type not applied: " + op->getName().getStringRef().str() +
           " runs in f32)";
    compute = f32;
  }
  f.push_back(
      b.getNamedAttr("op", b.getStringAttr(op->getName().getStringRef())));
  f.push_back(b.getNamedAttr("label", b.getStringAttr(label)));
  if (!role.empty())
    f.push_back(b.getNamedAttr("role", b.getStringAttr(role)));
  f.push_back(b.getNamedAttr("compute", b.getStringAttr(typeName(compute))));
  f.push_back(b.getNamedAttr("storage", b.getStringAttr(typeName(storage))));
  if (grad)
    f.push_back(b.getNamedAttr("grad", b.getStringAttr(typeName(grad))));
  if (rule && ((rule->compute && isFP8(rule->compute)) ||
               (rule->grad && isFP8(rule->grad))))
    f.push_back(b.getNamedAttr(
        "scaling", b.getStringAttr(stringifyFP8Scaling(rule->scaling))));
  if (channelSplit) {
    const ChannelSettings &channel = policy.channel;
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "output channels whose gradient variance exceeds "
       << llvm::format("%g", channel.threshold)
       << "x the layer mean (running estimate, momentum "
       << llvm::format("%g", channel.momentum) << ") run in "
       << typeName(observe ? f32 : channel.high);
    f.push_back(b.getNamedAttr("channel", b.getStringAttr(text)));
  }
  f.push_back(b.getNamedAttr("rule", b.getStringAttr(why)));
  entries.push_back(b.getDictionaryAttr(f));
}

LogicalResult PrecisionAssigner::materializeForward() {
  llvm::DenseSet<Operation *> ruled;
  for (const Decision &d : decisions)
    if (d.rule)
      ruled.insert(d.op);
  for (Decision &d : decisions) {
    Operation *op = d.op;
    const PrecisionRule *rule = d.rule;
    auto opId = op->getAttrOfType<IntegerAttr>(DSDialect::kOpIdAttrName);
    Type compute = rule && rule->compute ? rule->compute : f32;
    // Matmuls and convolutions accumulate and return FP32; other ops keep
    // their result in the type they compute in unless told otherwise.
    Type storage = rule && rule->storage ? rule->storage
                   : isa<MatMulOp, Conv2DOp, BlockSparseMatMulOp>(op) ? f32
                                                                      : compute;
    Type grad = rule ? rule->grad : Type();
    // Ops that only move data get no entry: they have no precision of their
    // own. Concat moves data too (from several operands, so it is not
    // DataMovement); casts are not here: they round.
    if (!op->hasTrait<ds::OpTrait::DataMovement>() && !isa<ConcatOp>(op))
      addEntry(op, d.role, d.label, compute, storage, grad, rule,
               channelLayers.count(op), d.overridden);
    if (!rule)
      continue;
    Location loc = op->getLoc();
    if (auto it = channelLayers.find(op); it != channelLayers.end()) {
      if (failed(splitter->splitForward(b, op, it->second, *rule, compute,
                                        storage, d.label)))
        return failure();
      continue;
    }
    // The f32 value the op's consumers read, and the value of that type
    // in the op's own precision when it computed in a narrow type.
    Value result = op->getNumResults() == 1 ? op->getResult(0) : Value();
    Value narrow;
    if (auto mm = dyn_cast<MatMulOp>(op)) {
      if (rule->compute && compute != f32) {
        FailureOr<Value> y = m->rebuildMatmul(b, mm, compute, compute,
                                              rule->scaling, d.label, "", "");
        if (failed(y))
          return failure();
        result = *y;
      }
    } else if (isa<Conv2DOp>(op) && rule->compute && compute != f32) {
      // Operands rounded to the compute type; the convolution accumulates
      // in FP32 (FP8 convolutions are refused by validate()).
      b.setInsertionPoint(op);
      for (unsigned i = 0; i < 2; ++i) {
        FailureOr<Value> r =
            m->roundTrip(b, loc, op, op->getOperand(i), compute, rule->scaling,
                         d.label + (i ? ".weight" : ".input"), 1, i == 1);
        if (failed(r))
          return failure();
        op->setOperand(i, *r);
      }
    } else if (rule->compute && compute != f32 && isRetypable(op) && !observe) {
      b.setInsertionPoint(op);
      for (OpOperand &operand : op->getOpOperands())
        if (isFloatTensor(operand.get()))
          operand.set(m->cast(b, loc, operand.get(), compute));
      narrow = op->getResult(0);
      narrow.setType(tensorType(narrow).clone(compute));
      b.setInsertionPointAfter(op);
      result = m->cast(b, loc, narrow, f32);
      narrow.replaceAllUsesExcept(result, result.getDefiningOp());
    }
    // Storage: what consumers (and the backward) read is the value kept in
    // the storage type; an op that computed in it already is. A linear
    // layer's product is kept after its bias add (roundedAfterBias).
    if (rule->storage && result && !(narrow && storage == compute) &&
        tensorType(result).getElementType() == f32) {
      if (isa<MatMulOp>(op))
        if (Value sum = roundedAfterBias(result, storage, ruled)) {
          auto addId = sum.getDefiningOp()->getAttrOfType<IntegerAttr>(
              DSDialect::kOpIdAttrName);
          if (opId && addId && rule->grad)
            linears.push_back({opId.getInt(), addId.getInt(), storage});
          result = sum;
        }
      keepResultIn(result, storage);
    }
  }
  return success();
}

/// The bias operand of `add` when it adds a vector along the last
/// dimension to `product` (shape [..., N] against [1, ..., 1, N] or [N]),
/// else null.
static Value biasOperand(AddOp add, Value product) {
  auto sum = tensorType(add.getResult());
  Value bias = add.getLhs() == product ? add.getRhs() : add.getLhs();
  auto biasType = tensorType(bias);
  if (add.getLhs() == add.getRhs() || !sum || !biasType ||
      tensorType(product) != sum || !biasType.hasStaticShape() ||
      !sum.hasStaticShape() || biasType.getRank() == 0 ||
      biasType.getRank() > sum.getRank() || !biasType.getElementType().isF32())
    return nullptr;
  ArrayRef<int64_t> shape = biasType.getShape();
  if (shape.back() != sum.getShape().back() ||
      llvm::any_of(shape.drop_back(), [](int64_t d) { return d != 1; }))
    return nullptr;
  return bias;
}

Value PrecisionAssigner::roundedAfterBias(
    Value product, Type storage, const llvm::DenseSet<Operation *> &ruled) {
  if (observe || !(storage.isBF16() || storage.isF16()) || !product.hasOneUse())
    return nullptr;
  auto add = dyn_cast<AddOp>(*product.getUsers().begin());
  if (!add || ruled.contains(add) || !isForwardOp(add))
    return nullptr;
  Value bias = biasOperand(add, product);
  if (!bias)
    return nullptr;
  // The bias in the storage type too, as autocast casts it with the
  // weight: the GEMM's epilogue then adds a vector of D's type.
  b.setInsertionPoint(add);
  Value rounded = m->cast(b, bias.getLoc(), bias, storage);
  Value back = m->cast(b, bias.getLoc(), rounded, f32);
  add->setOperand(add.getLhs() == bias ? 0 : 1, back);
  return add.getResult();
}

void PrecisionAssigner::keepLinearCotangentsNarrow() {
  auto idOf = [](Operation *op) -> std::optional<int64_t> {
    if (auto id = op->getAttrOfType<IntegerAttr>(DSDialect::kOpIdAttrName))
      return id.getInt();
    return std::nullopt;
  };
  for (const LinearLayer &linear : linears) {
    // The bias gradient sums the cotangent of the layer's output.
    ReduceSumOp biasGrad;
    for (auto sum : body->getOps<ReduceSumOp>())
      if (!isForwardOp(sum) && idOf(sum) == linear.biasAdd)
        biasGrad = sum;
    if (!biasGrad)
      continue;
    Value cotangent = biasGrad.getInput();
    // Only where the layer's own backward ops are its only readers: the
    // bias gradient and the GEMMs' gradient kernels (through their casts
    // and reshapes). A residual stream's gradient is also the cotangent of
    // the projections that feed it; it stays f32 for the stream, and a
    // rounded copy beside it would be one more pass (and, fused into the
    // stream's chain of adds, a recomputation of it).
    auto own = [&](OpOperand &use) {
      std::optional<int64_t> id = idOf(use.getOwner());
      return id == linear.biasAdd || id == linear.matmul;
    };
    if (!llvm::all_of(cotangent.getUses(), own))
      continue;
    b.setInsertionPointAfterValue(cotangent);
    Location loc = cotangent.getLoc();
    Value rounded = m->cast(b, loc, cotangent, linear.storage);
    Value widened = m->cast(b, loc, rounded, f32);
    if (widened == cotangent)
      continue;
    // Backward ops, like the rest of the cotangent's computation: the
    // gradient GEMMs' FP8 quantisation reads them as a cotangent (`grad`),
    // not as a forward value (SeedDependence follows `ds.vjp_of`).
    for (Value v : {rounded, widened})
      v.getDefiningOp()->setAttr(DSDialect::kVjpOfAttrName,
                                 b.getStringAttr(CastOp::getOperationName()));
    cotangent.replaceAllUsesExcept(widened, rounded.getDefiningOp());
  }
}

LogicalResult PrecisionAssigner::materializeBackward() {
  // Backward GEMMs of ops with a `grad` type: the cotangent operand in
  // that type, the primal operand in the forward's compute type. A
  // cotangent depends on the backward seed; a primal value (a weight, an
  // activation, maybe reshaped by the backward) does not. Which operand is
  // which is read off the IR before any kernel is rebuilt (a rebuilt
  // kernel's result stands for the old one, with the same dependence).
  struct GradKernel {
    Operation *op;
    std::array<bool, 2> cotangent;
  };
  SmallVector<GradKernel> kernels;
  {
    SeedDependence seeds(*body);
    for (Operation &op : body->without_terminator())
      if (!isForwardOp(&op) && isChannelBackwardKernel(&op))
        kernels.push_back({&op,
                           {seeds.dependsOnSeed(op.getOperand(0)),
                            seeds.dependsOnSeed(op.getOperand(1))}});
  }
  llvm::DenseMap<int64_t, unsigned> gradGemms;
  for (GradKernel &kernel : kernels) {
    Operation *op = kernel.op;
    auto id = op->getAttrOfType<IntegerAttr>(DSDialect::kOpIdAttrName);
    const PrecisionRule *rule = id ? ruleById.lookup(id.getInt()) : nullptr;
    ChannelLayer *layer = id ? channelById.lookup(id.getInt()) : nullptr;
    if (!rule || (!rule->grad && !rule->gradStorage && !layer))
      continue;
    Type fwdType = rule->compute ? rule->compute : f32;
    // The k-th gradient kernel of the forward op labelled L is L.grad<k>.
    std::string label = labelById.lookup(id.getInt()) + ".grad" +
                        std::to_string(gradGemms[id.getInt()]++);
    auto roleAttr = op->getAttrOfType<StringAttr>(DSDialect::kRoleAttrName);
    StringRef role = roleAttr ? roleAttr.getValue() : StringRef();
    // What the gradient kernel's result is kept in (grad-storage).
    Type stored = rule->gradStorage ? rule->gradStorage : f32;
    if (layer) {
      if (stored != f32)
        op->emitWarning() << "grad-storage of " << rule->label
                          << " is not applied to a channel-level layer: its "
                             "gradient kernels keep FP32 results";
      addEntry(op, role, label, rule->grad ? rule->grad : fwdType, f32, Type(),
               rule, /*channelSplit=*/true);
      if (failed(splitter->splitBackward(b, op, *layer, *rule, fwdType, label,
                                         kernel.cotangent)))
        return failure();
      continue;
    }
    // What the rebuild creates belongs to the backward: tag it like the
    // gradient kernel, so later passes and the memory accounting see it so.
    DictionaryAttr tags = op->getDiscardableAttrDictionary();
    CreatedOps created;
    b.setListener(&created);
    LogicalResult done =
        materializeGradKernel(op, kernel.cotangent, *rule, role, label);
    b.setListener(nullptr);
    if (failed(done))
      return failure();
    for (Operation *op : created.getOps())
      for (NamedAttribute tag : tags)
        if (!op->hasAttr(tag.getName()))
          op->setAttr(tag.getName(), tag.getValue());
  }
  for (auto &[op, layer] : channelLayers)
    splitter->updateEstimate(b, layer, body->getTerminator());
  return success();
}

LogicalResult PrecisionAssigner::materializeGradKernel(
    Operation *op, std::array<bool, 2> cotangent, const PrecisionRule &rule,
    StringRef role, StringRef label) {
  Type fwdType = rule.compute ? rule.compute : f32;
  Type stored = rule.gradStorage ? rule.gradStorage : f32;
  if (!rule.grad) {
    // Only grad-storage: the kernel as it is, its result rounded.
    addEntry(op, role, label, f32, stored, Type(), &rule,
             /*channelSplit=*/false);
    keepResultIn(op->getResult(0), stored);
    return success();
  }
  if (!isa<MatMulOp>(op)) {
    // A convolution gradient: the cotangent in `grad`, the other operand
    // in the forward's compute type, both rounded in f32.
    addEntry(op, role, label, rule.grad, stored, Type(), &rule,
             /*channelSplit=*/false);
    b.setInsertionPoint(op);
    for (unsigned i = 0; i < 2; ++i) {
      bool isCotangent = cotangent[i];
      FailureOr<Value> r = m->roundTrip(
          b, op->getLoc(), op, op->getOperand(i),
          isCotangent ? rule.grad : fwdType, rule.scaling,
          (label + (isCotangent ? ".cotangent" : ".operand" + Twine(i))).str(),
          1, false);
      if (failed(r))
        return failure();
      op->setOperand(i, *r);
    }
    keepResultIn(op->getResult(0), stored);
    return success();
  }
  auto mm = cast<MatMulOp>(op);
  Type ta = cotangent[0] ? rule.grad : fwdType;
  Type tb = cotangent[1] ? rule.grad : fwdType;
  Type compute = ta == rule.grad ? ta : tb;
  addEntry(mm, role, label, compute, stored, Type(), &rule,
           /*channelSplit=*/false);
  FailureOr<Value> y = m->rebuildMatmul(b, mm, ta, tb, rule.scaling, label,
                                        ta == rule.grad ? "cotangent" : "",
                                        tb == rule.grad ? "cotangent" : "");
  if (failed(y))
    return failure();
  keepResultIn(*y, stored);
  return success();
}

void PrecisionAssigner::keepResultIn(Value result, Type type) {
  if (!type || type == f32 || observe)
    return;
  b.setInsertionPointAfterValue(result);
  Location loc = result.getLoc();
  Value kept = m->cast(b, loc, result, type);
  Value back = m->cast(b, loc, kept, f32);
  result.replaceAllUsesExcept(back, kept.getDefiningOp());
}

void PrecisionAssigner::keepNarrowCopiesForBackward() {
  // What the backward keeps is the narrow copy: a forward widening cast
  // (storage -> f32) read by backward ops is repeated inside the backward,
  // so the narrow value, not its f32 widening, lives from the forward to
  // the backward (the memory the storage type saves).
  for (Operation &opRef :
       llvm::make_early_inc_range(body->without_terminator())) {
    auto widen = dyn_cast<CastOp>(&opRef);
    if (!widen || !isForwardOp(widen) ||
        !widen.getType().getElementType().isF32())
      continue;
    Type from = widen.getInput().getType().getElementType();
    if (!isa<FloatType>(from) || from.isF32() || from.isF64())
      continue;
    SmallVector<OpOperand *> backwardUses;
    for (OpOperand &use : widen->getUses())
      if (!isForwardOp(use.getOwner()))
        backwardUses.push_back(&use);
    if (backwardUses.empty())
      continue;
    // Before the first backward user (uses are in program order once
    // sorted).
    Operation *first = backwardUses.front()->getOwner();
    for (OpOperand *use : backwardUses)
      if (use->getOwner()->isBeforeInBlock(first))
        first = use->getOwner();
    b.setInsertionPoint(first);
    Operation *copy = b.clone(*widen);
    copy->setAttr(DSDialect::kVjpOfAttrName,
                  b.getStringAttr(CastOp::getOperationName()));
    for (OpOperand *use : backwardUses)
      use->set(copy->getResult(0));
  }
}

void PrecisionAssigner::recordMap() {
  MLIRContext *ctx = func->getContext();
  auto module = func->getParentOfType<ModuleOp>();
  NamedAttrList maps;
  if (auto old = module->getAttrOfType<DictionaryAttr>(
          DSDialect::kPrecisionMapAttrName))
    maps.append(old.getValue());
  maps.set(SymbolTable::getSymbolName(func), ArrayAttr::get(ctx, entries));
  module->setAttr(DSDialect::kPrecisionMapAttrName, maps.getDictionary(ctx));
}
