//===- AssignPrecision.cpp - Per-op precisions and FP8 scaling ------------===//
//
// Implements ds-assign-precision in the analyse-then-mutate style:
//  1. roles (RoleAnalysis), written as `ds.role` and inherited by backward
//     ops through `ds.op_id`;
//  2. one decision per forward op from the policy (first matching rule),
//     checked (no FP8 reductions); backward GEMMs take the `grad` type of
//     their forward op's rule for the cotangent operand;
//  3. materialisation: casts for compute and storage types, FP8 scaling
//     (delayed with amax-history state, current, or block), FP32
//     accumulation and descaling for GEMMs;
//  4. the new state (amax histories) as argument/update pairs, and the
//     decisions as the module's `ds.precision_map`;
//  5. with a schedule, a high-precision variant of the step with the same
//     signature and the `ds.precision_schedule` the runner follows.
// Everything is built from ds ops, so the same IR lowers for the CPU
// (emulated narrow types) and later for the GPU (real FP8 GEMMs).
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/IR/TrainingContract.h"
#include "ds/Transforms/Passes.h"
#include "ds/Transforms/PrecisionPolicy.h"
#include "ds/Transforms/RoleAnalysis.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include <cmath>
#include <functional>
#include <map>

namespace mlir::ds {
#define GEN_PASS_DEF_ASSIGNPRECISIONPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

bool isForward(Operation *op) { return !op->hasAttr("ds.vjp_of"); }

RankedTensorType tensorType(Value v) {
  return dyn_cast<RankedTensorType>(v.getType());
}

bool isFloatTensor(Value v) {
  auto t = tensorType(v);
  return t && isa<FloatType>(t.getElementType());
}

std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

std::string locText(LocationAttr loc) {
  if (auto f = dyn_cast_or_null<FileLineColLoc>(loc))
    return (f.getFilename().strref() + ":" + Twine(f.getLine())).str();
  return "";
}

/// Parameters an op consumes (through views), by name.
SmallVector<StringRef> consumedParams(Operation *op, FunctionOpInterface func) {
  SmallVector<StringRef> names;
  for (Value v : op->getOperands()) {
    while (Operation *def = v.getDefiningOp()) {
      if (!isa<ReshapeOp, TransposeOp, CastOp, BroadcastOp, SliceOp>(def))
        break;
      v = def->getOperand(0);
    }
    if (auto arg = dyn_cast<BlockArgument>(v))
      if (auto name = func.getArgAttrOfType<StringAttr>(
              arg.getArgNumber(), DSDialect::kParamAttrName))
        names.push_back(name.getValue());
  }
  return names;
}

/// Whether `v` is a parameter (through views).
bool isParamDerived(Value v, FunctionOpInterface func) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<ReshapeOp, TransposeOp, CastOp, BroadcastOp, SliceOp>(def))
      return false;
    v = def->getOperand(0);
  }
  auto arg = dyn_cast<BlockArgument>(v);
  return arg && func.getArgAttr(arg.getArgNumber(), DSDialect::kParamAttrName);
}

/// A label for state keys and the map: the module path, else role#id.
std::string opLabel(Operation *op, StringRef role, int64_t id) {
  if (auto m = op->getAttrOfType<StringAttr>("ds.module"))
    return (m.getValue() + "#" + Twine(id)).str();
  return ((role.empty() ? StringRef("op") : role) + "#" + Twine(id)).str();
}

/// Records the ops a builder inserts.
struct CreatedOps : public OpBuilder::Listener {
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    ops.push_back(op);
  }
  SmallVector<Operation *> ops;
};

/// What the pass decided for one op.
struct Decision {
  Operation *op;
  const PrecisionRule *rule = nullptr;
  std::string role, label;
};

/// Builds the scaling and cast ops, and collects the new state.
class Materializer {
public:
  Materializer(FunctionOpInterface func, const PrecisionPolicy &policy)
      : func(func), policy(policy), ctx(func->getContext()) {}

  Value f32(OpBuilder &b, Location loc, double v) {
    auto t = RankedTensorType::get({}, b.getF32Type());
    return arith::ConstantOp::create(
        b, loc, t, DenseElementsAttr::get(t, b.getF32FloatAttr(v)));
  }
  Value cast(OpBuilder &b, Location loc, Value x, Type elementType,
             bool saturate = false) {
    auto t = tensorType(x);
    if (t.getElementType() == elementType)
      return x;
    return CastOp::create(b, loc, t.clone(elementType), x,
                          saturate ? b.getUnitAttr() : UnitAttr());
  }
  Value reshape(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> shape) {
    auto t = tensorType(x);
    if (t.getShape() == shape)
      return x;
    return ReshapeOp::create(b, loc, t.clone(shape), x);
  }
  /// max |x| over `dims` (all when empty), kept as size-1 dims if `keep`.
  Value amax(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> dims = {},
             bool keep = false) {
    SmallVector<int64_t> all(dims);
    if (all.empty())
      for (int64_t i = 0, e = tensorType(x).getRank(); i < e; ++i)
        all.push_back(i);
    Value a = AbsOp::create(b, loc, x);
    if (all.empty())
      return a;
    return ReduceMaxOp::create(b, loc, a, b.getDenseI64ArrayAttr(all), keep);
  }
  /// `fmax / amax` where amax > 0 and finite, else 1 (so all-zero and
  /// poisoned tensors keep a usable scale).
  Value scaleFrom(OpBuilder &b, Location loc, Value amaxV, double fmax) {
    Value zero = f32(b, loc, 0.0);
    Value inf = f32(b, loc, std::numeric_limits<double>::infinity());
    Value positive =
        CompareOp::create(b, loc, ComparePredicate::gt, amaxV, zero);
    Value finite = CompareOp::create(b, loc, ComparePredicate::lt, amaxV, inf);
    Value ok = SelectOp::create(b, loc, positive, finite, positive);
    double m = std::ldexp(1.0, -static_cast<int>(policy.fp8.margin));
    Value raw = DivOp::create(b, loc, f32(b, loc, fmax * m), amaxV);
    return SelectOp::create(b, loc, ok, raw, f32(b, loc, 1.0));
  }

  /// A new state argument (zeros) whose update is set later.
  BlockArgument addState(StringRef kind, RankedTensorType type, Location loc) {
    unsigned index = func.getNumArguments();
    NamedAttrList attrs;
    attrs.set(DSDialect::kStateAttrName, StateAttr::get(ctx, kind, ""));
    attrs.set(DSDialect::kInitAttrName,
              InitAttr::get(ctx, InitKind::zeros, llvm::APFloat(0.0)));
    (void)func.insertArgument(index, type, attrs.getDictionary(ctx), loc);
    newStates.push_back({kind.str(), nullptr});
    return func.getFunctionBody().getArgument(index);
  }

  /// Per-tensor FP8 quantisation of f32 `x` to `t`: returns the FP8 tensor
  /// and its scale (rank-0 f32): x ~= cast(q) / scale.
  std::pair<Value, Value> quantize(OpBuilder &b, Location loc, Value x, Type t,
                                   FP8Scaling scaling, StringRef key) {
    auto cacheKey =
        std::make_tuple(x.getAsOpaquePointer(), t.getAsOpaquePointer());
    if (auto it = quantized.find(cacheKey); it != quantized.end())
      return it->second;
    double fmax = largestFinite(t);
    Value scale;
    Value now = amax(b, loc, x);
    if (scaling == FP8Scaling::Delayed) {
      int64_t len = policy.fp8.amaxHistoryLen;
      auto histType = RankedTensorType::get({len}, b.getF32Type());
      BlockArgument hist =
          addState(("fp8.amax_history." + key).str(), histType, loc);
      Value prev =
          ReduceMaxOp::create(b, loc, hist, b.getDenseI64ArrayAttr({0}),
                              /*keepDims=*/false);
      scale = scaleFrom(b, loc, prev, fmax);
      // Newest first; a non-finite amax (an overflowing step) is not
      // recorded, so one bad step cannot poison the scale.
      Value head = reshape(b, loc, now, {1});
      Value rolled = head;
      if (len > 1) {
        Value tail =
            SliceOp::create(b, loc, histType.clone({len - 1}), hist,
                            b.getDenseI64ArrayAttr({0}), DenseI64ArrayAttr());
        rolled = ConcatOp::create(b, loc, ValueRange{head, tail},
                                  b.getI64IntegerAttr(0));
      }
      Value finite = CompareOp::create(
          b, loc, ComparePredicate::lt, now,
          f32(b, loc, std::numeric_limits<double>::infinity()));
      newStates.back().update = SelectOp::create(b, loc, finite, rolled, hist);
    } else {
      scale = scaleFrom(b, loc, now, fmax);
    }
    Value q =
        cast(b, loc, MulOp::create(b, loc, x, scale), t, /*saturate=*/true);
    auto result = std::make_pair(q, scale);
    quantized[cacheKey] = result;
    return result;
  }

  /// Block-scaled FP8 round trip of f32 `x` (DeepSeek-V3): per 1 x B tile
  /// along `axis`, or per B x B block over the last two dims (`weight`).
  /// Returns the dequantised f32 tensor.
  FailureOr<Value> blockRoundTrip(OpBuilder &b, Location loc, Operation *op,
                                  Value x, Type t, int64_t axis, bool weight) {
    auto type = tensorType(x);
    ArrayRef<int64_t> shape = type.getShape();
    int64_t rank = type.getRank();
    double fmax = largestFinite(t);
    SmallVector<int64_t> split, dims;
    if (weight) {
      int64_t blk = policy.fp8.weightBlock;
      int64_t r = shape[rank - 2], c = shape[rank - 1];
      if (r % blk || c % blk)
        return op->emitOpError("ds-assign-precision: block scaling needs the "
                               "weight's dims ")
               << r << "x" << c << " divisible by fp8.weight-block " << blk;
      split.append(shape.begin(), shape.end() - 2);
      split.append({r / blk, blk, c / blk, blk});
      dims = {rank - 1, rank + 1};
    } else {
      int64_t blk = policy.fp8.activationBlock;
      int64_t k = shape[axis];
      if (k % blk)
        return op->emitOpError("ds-assign-precision: block scaling needs the "
                               "contraction size ")
               << k << " divisible by fp8.activation-block " << blk;
      for (int64_t i = 0; i < rank; ++i) {
        if (i == axis) {
          split.append({k / blk, blk});
          dims.push_back(i + 1);
        } else {
          split.push_back(shape[i]);
        }
      }
    }
    Value blocks = reshape(b, loc, x, split);
    Value scale =
        scaleFrom(b, loc, amax(b, loc, blocks, dims, /*keep=*/true), fmax);
    Value q = cast(b, loc, MulOp::create(b, loc, blocks, scale), t, true);
    Value d = DivOp::create(b, loc, cast(b, loc, q, b.getF32Type()), scale);
    return reshape(b, loc, d, shape);
  }

  /// Appends the collected state's update results.
  void finish() {
    Block &body = func.getFunctionBody().front();
    Operation *term = body.getTerminator();
    unsigned firstArg = func.getNumArguments() - newStates.size();
    SmallVector<Value> results(term->getOperands());
    SmallVector<DictionaryAttr> attrs;
    for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
      attrs.push_back(func.getResultAttrDict(i));
    OpBuilder b(ctx);
    for (auto [k, st] : llvm::enumerate(newStates)) {
      results.push_back(st.update ? st.update : body.getArgument(firstArg + k));
      attrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
          DSDialect::kUpdateAttrName, b.getI64IntegerAttr(firstArg + k))));
    }
    term->setOperands(results);
    SmallVector<Type> types;
    for (Value r : results)
      types.push_back(r.getType());
    func.setType(FunctionType::get(ctx, func.getArgumentTypes(), types));
    func.setAllResultAttrs(attrs);
  }

  struct State {
    std::string kind;
    Value update;
  };
  SmallVector<State> newStates;

private:
  FunctionOpInterface func;
  const PrecisionPolicy &policy;
  MLIRContext *ctx;
  std::map<std::tuple<void *, const void *>, std::pair<Value, Value>> quantized;
};

/// Whether an op can run on narrower operands by retyping it (elementwise
/// and shape ops whose operands and result share the element type).
bool isRetypable(Operation *op) {
  return isa<AddOp, SubOp, MulOp, DivOp, MaximumOp, MinimumOp, ReluOp, SiluOp,
             SigmoidOp, TanhOp, GeluOp, NegOp, AbsOp, SqrtOp, RsqrtOp>(op);
}

} // namespace

/// Applies `policy` to `func`; appends map entries to `map`.
static LogicalResult assignPrecisionImpl(FunctionOpInterface func,
                                         const PrecisionPolicy &policy,
                                         SmallVectorImpl<Attribute> &map) {
  MLIRContext *ctx = func->getContext();
  FailureOr<TrainingContract> contract = TrainingContract::fromFunction(func);
  if (failed(contract))
    return failure();
  if (contract->hasParamUpdates())
    return func->emitOpError("ds-assign-precision: the step already updates "
                             "its parameters; run ds-assign-precision before "
                             "ds-insert-optimizer");
  if (!contract->hasGrads())
    return func->emitOpError("ds-assign-precision: the step has no gradients "
                             "('ds.grad' results); run ds-autodiff first, so "
                             "that the backward gets its precisions too");
  Block &body = func.getFunctionBody().front();

  // 1. Roles; backward ops inherit theirs.
  RoleAnalysis roles(func);
  roles.annotate();
  llvm::DenseMap<int64_t, Operation *> forwardById;
  for (Operation &op : body.without_terminator())
    if (auto id = op.getAttrOfType<IntegerAttr>("ds.op_id");
        id && isForward(&op))
      forwardById[id.getInt()] = &op;
  for (Operation &op : body.without_terminator()) {
    auto id = op.getAttrOfType<IntegerAttr>("ds.op_id");
    if (!id || isForward(&op))
      continue;
    if (Operation *fwd = forwardById.lookup(id.getInt()))
      if (auto r = fwd->getAttrOfType<StringAttr>("ds.role"))
        op.setAttr("ds.role", r);
  }

  // 2. Decisions for forward ops.
  SmallVector<Decision> decisions;
  int64_t counter = 0;
  for (Operation &op : body.without_terminator()) {
    if (!isForward(&op) || !isa<DSDialect>(op.getDialect()))
      continue;
    if (!llvm::any_of(op.getResults(), isFloatTensor))
      continue;
    StringRef role = roles.roleOf(&op);
    SmallVector<StringRef> params = consumedParams(&op, func);
    Decision d{&op, policy.match(&op, role, params), role.str(),
               opLabel(&op, role, counter++)};
    if (d.rule) {
      bool fp8 = (d.rule->compute && isFP8(d.rule->compute)) ||
                 (d.rule->storage && isFP8(d.rule->storage));
      if (fp8 && !isa<MatMulOp>(op)) {
        InFlightDiagnostic diag =
            op.emitOpError("ds-assign-precision: ")
            << d.rule->label << " maps this op to FP8; only matmuls run in FP8 "
            << "(reductions, norms, softmax, losses and elementwise ops stay "
               "in at least BF16)";
        diag.attachNote(Location(d.rule->loc)) << "the rule is here";
        return failure();
      }
      for (Value v : op.getOperands())
        if (isFloatTensor(v) && !tensorType(v).getElementType().isF32())
          return op.emitOpError("ds-assign-precision: expects f32 operands, "
                                "got ")
                 << v.getType();
    }
    decisions.push_back(std::move(d));
  }

  // 3. Materialise, forward then backward.
  Materializer m(func, policy);
  OpBuilder b(ctx);
  Type f32 = b.getF32Type();
  // The rule of each forward op by number, for its backward GEMMs (the
  // forward op itself may be rebuilt below).
  llvm::DenseMap<int64_t, const PrecisionRule *> ruleById;
  llvm::DenseMap<int64_t, std::string> labelById;
  llvm::DenseMap<int64_t, unsigned> gradGemms;
  for (Decision &d : decisions)
    if (auto id = d.op->getAttrOfType<IntegerAttr>("ds.op_id")) {
      ruleById[id.getInt()] = d.rule;
      labelById[id.getInt()] = d.label;
    }
  // Quantises one matmul operand; returns (operand, scale or null).
  auto prepareOperand = [&](Operation *op, Value x, Type t, FP8Scaling scaling,
                            StringRef key, int64_t kAxis,
                            bool weight) -> FailureOr<std::pair<Value, Value>> {
    Location loc = op->getLoc();
    if (!isFP8(t))
      return std::make_pair(m.cast(b, loc, x, t), Value());
    if (scaling == FP8Scaling::Block) {
      FailureOr<Value> d = m.blockRoundTrip(b, loc, op, x, t, kAxis, weight);
      if (failed(d))
        return failure();
      return std::make_pair(*d, Value());
    }
    return m.quantize(b, loc, x, t, scaling, key);
  };
  // Rebuilds matmul `mm` with operand types (ta, tb) and an f32 result
  // (FP32 accumulation); per-tensor FP8 scales are divided out after it.
  // Returns the value that replaces the matmul's result.
  auto rebuildMatmul = [&](MatMulOp mm, Type ta, Type tb, FP8Scaling scaling,
                           StringRef label, StringRef nameA,
                           StringRef nameB) -> FailureOr<Value> {
    b.setInsertionPoint(mm);
    Location loc = mm.getLoc();
    int64_t rankA = mm.getLhs().getType().getRank();
    int64_t rankB = mm.getRhs().getType().getRank();
    // The contraction axis of each operand, for 1 x B tiles.
    int64_t kA = mm.getTransposeLhs() ? rankA - 2 : rankA - 1;
    int64_t kB = mm.getTransposeRhs() ? rankB - 1 : rankB - 2;
    bool weightA = isParamDerived(mm.getLhs(), func);
    bool weightB = isParamDerived(mm.getRhs(), func);
    auto a = prepareOperand(
        mm, mm.getLhs(), ta, scaling,
        (label + "." + (nameA.empty() ? (weightA ? "weight" : "input") : nameA))
            .str(),
        kA, weightA);
    if (failed(a))
      return failure();
    auto bb = prepareOperand(
        mm, mm.getRhs(), tb, scaling,
        (label + "." + (nameB.empty() ? (weightB ? "weight" : "input") : nameB))
            .str(),
        kB, weightB);
    if (failed(bb))
      return failure();
    Value y =
        MatMulOp::create(b, loc, mm.getType(), a->first, bb->first,
                         mm.getTransposeLhsAttr(), mm.getTransposeRhsAttr());
    y.getDefiningOp()->setDiscardableAttrs(mm->getDiscardableAttrDictionary());
    if (a->second || bb->second) {
      Value s = a->second && bb->second
                    ? MulOp::create(b, loc, a->second, bb->second)
                    : (a->second ? a->second : bb->second);
      y = MulOp::create(b, loc, y,
                        DivOp::create(b, loc, m.f32(b, loc, 1.0), s));
    }
    mm.getResult().replaceAllUsesWith(y);
    mm->erase();
    return y;
  };

  SmallVector<Attribute> entries;
  auto entry = [&](Operation *op, StringRef role, StringRef label, Type compute,
                   Type storage, Type grad, const PrecisionRule *rule) {
    SmallVector<NamedAttribute> f;
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
    std::string why = rule ? rule->label : "no rule: f32";
    if (rule && !locText(rule->loc).empty())
      why += " at " + locText(rule->loc);
    f.push_back(b.getNamedAttr("rule", b.getStringAttr(why)));
    entries.push_back(b.getDictionaryAttr(f));
  };

  for (Decision &d : decisions) {
    Operation *op = d.op;
    const PrecisionRule *rule = d.rule;
    Type compute = rule && rule->compute ? rule->compute : f32;
    // A matmul accumulates and returns FP32; other ops keep their result
    // in the type they compute in unless told otherwise.
    Type storage = rule && rule->storage ? rule->storage
                   : isa<MatMulOp>(op)   ? f32
                                         : compute;
    Type grad = rule ? rule->grad : Type();
    if (!isa<ReshapeOp, TransposeOp, SliceOp, BroadcastOp, ConcatOp>(op))
      entry(op, d.role, d.label, compute, storage, grad, rule);
    if (!rule)
      continue;
    Location loc = op->getLoc();
    // The f32 value the op's consumers read, and the value of that type
    // in the op's own precision when it computed in a narrow type.
    Value result = op->getNumResults() == 1 ? op->getResult(0) : Value();
    Value narrow;
    if (auto mm = dyn_cast<MatMulOp>(op)) {
      if (rule->compute && compute != f32) {
        FailureOr<Value> y =
            rebuildMatmul(mm, compute, compute, rule->scaling, d.label, "", "");
        if (failed(y))
          return failure();
        result = *y;
      }
    } else if (rule->compute && compute != f32 && isRetypable(op)) {
      b.setInsertionPoint(op);
      for (OpOperand &operand : op->getOpOperands())
        if (isFloatTensor(operand.get()))
          operand.set(m.cast(b, loc, operand.get(), compute));
      narrow = op->getResult(0);
      narrow.setType(tensorType(narrow).clone(compute));
      b.setInsertionPointAfter(op);
      result = m.cast(b, loc, narrow, f32);
      narrow.replaceAllUsesExcept(result, result.getDefiningOp());
    }
    // Storage: what consumers (and the backward) read is the value kept in
    // the storage type; an op that computed in it already is.
    if (rule->storage && storage != f32 && result &&
        !(narrow && storage == compute) &&
        tensorType(result).getElementType() == f32) {
      b.setInsertionPointAfterValue(result);
      Value stored = m.cast(b, loc, result, storage);
      Value back = m.cast(b, loc, stored, f32);
      result.replaceAllUsesExcept(back, stored.getDefiningOp());
    }
  }

  // Backward GEMMs of ops with a `grad` type: the cotangent operand in
  // that type, the primal operand in the forward's compute type.
  llvm::DenseMap<Value, bool> dependsOnSeed;
  for (Operation &opRef :
       llvm::make_early_inc_range(body.without_terminator())) {
    auto mm = dyn_cast<MatMulOp>(&opRef);
    if (!mm || isForward(mm))
      continue;
    auto id = mm->getAttrOfType<IntegerAttr>("ds.op_id");
    const PrecisionRule *rule = id ? ruleById.lookup(id.getInt()) : nullptr;
    if (!rule || !rule->grad)
      continue;
    // A cotangent depends on the backward seed; a primal value (a weight,
    // an activation, maybe reshaped by the backward) does not.
    std::function<bool(Value)> isCotangent = [&](Value v) -> bool {
      auto it = dependsOnSeed.find(v);
      if (it != dependsOnSeed.end())
        return it->second;
      Operation *def = v.getDefiningOp();
      bool dep =
          def &&
          (def->hasAttr("ds.seed") ||
           (!isForward(def) && llvm::any_of(def->getOperands(), isCotangent)));
      dependsOnSeed[v] = dep;
      return dep;
    };
    Type fwdType = rule->compute ? rule->compute : f32;
    Type ta = isCotangent(mm.getLhs()) ? rule->grad : fwdType;
    Type tb = isCotangent(mm.getRhs()) ? rule->grad : fwdType;
    // The k-th gradient GEMM of the forward op labelled L is L.grad<k>.
    std::string label = labelById.lookup(id.getInt()) + ".grad" +
                        std::to_string(gradGemms[id.getInt()]++);
    Type compute = ta == rule->grad ? ta : tb;
    entry(mm,
          mm->getAttrOfType<StringAttr>("ds.role")
              ? mm->getAttrOfType<StringAttr>("ds.role").getValue()
              : StringRef(),
          label, compute, f32, Type(), rule);
    // What the rebuild creates belongs to the backward: tag it like the
    // gradient GEMM, so later passes and the memory accounting see it so.
    DictionaryAttr tags = mm->getDiscardableAttrDictionary();
    CreatedOps created;
    b.setListener(&created);
    FailureOr<Value> y = rebuildMatmul(mm, ta, tb, rule->scaling, label,
                                       ta == rule->grad ? "cotangent" : "",
                                       tb == rule->grad ? "cotangent" : "");
    b.setListener(nullptr);
    if (failed(y))
      return failure();
    for (Operation *op : created.ops)
      for (NamedAttribute tag : tags)
        if (!op->hasAttr(tag.getName()))
          op->setAttr(tag.getName(), tag.getValue());
  }
  // 4. What the backward keeps is the narrow copy: a forward widening cast
  //    (storage -> f32) read by backward ops is repeated inside the
  //    backward, so the narrow value, not its f32 widening, lives from the
  //    forward to the backward (the memory the storage type saves).
  for (Operation &opRef :
       llvm::make_early_inc_range(body.without_terminator())) {
    auto widen = dyn_cast<CastOp>(&opRef);
    if (!widen || !isForward(widen) ||
        !widen.getType().getElementType().isF32())
      continue;
    Type from = widen.getInput().getType().getElementType();
    if (!isa<FloatType>(from) || from.isF32() || from.isF64())
      continue;
    SmallVector<OpOperand *> backwardUses;
    for (OpOperand &use : widen->getUses())
      if (!isForward(use.getOwner()))
        backwardUses.push_back(&use);
    if (backwardUses.empty())
      continue;
    // Before the first backward user (uses are in program order once sorted).
    Operation *first = backwardUses.front()->getOwner();
    for (OpOperand *use : backwardUses)
      if (use->getOwner()->isBeforeInBlock(first))
        first = use->getOwner();
    b.setInsertionPoint(first);
    Operation *copy = b.clone(*widen);
    copy->setAttr("ds.vjp_of", b.getStringAttr("ds.cast"));
    for (OpOperand *use : backwardUses)
      use->set(copy->getResult(0));
  }
  m.finish();
  map.append(entries.begin(), entries.end());
  return success();
}

LogicalResult mlir::ds::assignPrecision(FunctionOpInterface func,
                                        const PrecisionPolicy &policy) {
  MLIRContext *ctx = func->getContext();
  ctx->loadDialect<arith::ArithDialect, DSDialect>();
  SmallVector<Attribute> map;
  if (failed(assignPrecisionImpl(func, policy, map)))
    return failure();
  auto module = func->getParentOfType<ModuleOp>();
  if (!module)
    return success();
  NamedAttrList maps;
  if (auto old = module->getAttrOfType<DictionaryAttr>("ds.precision_map"))
    maps.append(old.getValue());
  maps.set(SymbolTable::getSymbolName(func), ArrayAttr::get(ctx, map));
  module->setAttr("ds.precision_map", maps.getDictionary(ctx));
  return success();
}

namespace {
struct AssignPrecisionPass
    : public mlir::ds::impl::AssignPrecisionPassBase<AssignPrecisionPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    FailureOr<PrecisionPolicy> loaded =
        policy.empty()
            ? FailureOr<PrecisionPolicy>(PrecisionPolicy::getDefault(ctx))
            : PrecisionPolicy::load(policy, module.getLoc());
    if (failed(loaded))
      return signalPassFailure();
    // The channel and time levels parse (so their errors are located) but
    // are not built yet: refuse them rather than ignore them.
    for (auto [enabled, loc, what] :
         {std::make_tuple(loaded->channel.enabled, loaded->channel.loc,
                          "channel-level precision ('channel')"),
          std::make_tuple(loaded->schedule.enabled, loaded->schedule.loc,
                          "the time-level schedule ('schedule')")})
      if (enabled) {
        emitError(Location(loc)) << "ds-assign-precision: " << what
                                 << " is not implemented yet; remove the "
                                    "section to use the module-level rules";
        return signalPassFailure();
      }
    bool any = false;
    for (auto func : llvm::to_vector(module.getOps<FunctionOpInterface>())) {
      if (!func->hasAttr(DSDialect::kTrainStepAttrName))
        continue;
      any = true;
      if (failed(assignPrecision(func, *loaded)))
        return signalPassFailure();
    }
    if (!any) {
      module.emitError("ds-assign-precision: no function is marked "
                       "'ds.train_step'");
      return signalPassFailure();
    }
  }
};
} // namespace
