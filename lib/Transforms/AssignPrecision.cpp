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

#include "StepUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Format.h"

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
  /// With `observe`, nothing is rounded: the step keeps computing in f32
  /// but records the same statistics (amax histories, channel variances),
  /// so that a high-precision variant has the low one's signature and hands
  /// it calibrated state.
  Materializer(FunctionOpInterface func, const PrecisionPolicy &policy,
               bool observe)
      : observe(observe), editor(func), func(func), policy(policy),
        ctx(func->getContext()) {}

  Value f32(OpBuilder &b, Location loc, double v) {
    auto t = RankedTensorType::get({}, b.getF32Type());
    return arith::ConstantOp::create(
        b, loc, t, DenseElementsAttr::get(t, b.getF32FloatAttr(v)));
  }
  Value cast(OpBuilder &b, Location loc, Value x, Type elementType,
             bool saturate = false) {
    auto t = tensorType(x);
    if (observe || !elementType || t.getElementType() == elementType)
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

  /// A new state argument; its update is appended with `update`.
  Value addState(StringRef kind, RankedTensorType type,
                 InitKind init = InitKind::zeros, double value = 0.0) {
    return editor.addState(kind, "", type, init, value);
  }
  void update(Value state, Value next) { editor.addUpdate(state, next); }
  void metric(StringRef name, Value value) { editor.addMetric(name, value); }

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
      Value hist = addState(("fp8.amax_history." + key).str(), histType);
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
      update(hist, SelectOp::create(b, loc, finite, rolled, hist));
    } else {
      scale = scaleFrom(b, loc, now, fmax);
    }
    if (observe) {
      auto result = std::make_pair(x, Value());
      quantized[cacheKey] = result;
      return result;
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
    if (observe)
      return x;
    Value blocks = reshape(b, loc, x, split);
    Value scale =
        scaleFrom(b, loc, amax(b, loc, blocks, dims, /*keep=*/true), fmax);
    Value q = cast(b, loc, MulOp::create(b, loc, blocks, scale), t, true);
    Value d = DivOp::create(b, loc, cast(b, loc, q, b.getF32Type()), scale);
    return reshape(b, loc, d, shape);
  }

  /// `x` (f32) as it reads after rounding to `t` (FP8 with its scaling);
  /// `x` itself for f32 or a null type.
  FailureOr<Value> roundTrip(OpBuilder &b, Location loc, Operation *op, Value x,
                             Type t, FP8Scaling scaling, StringRef key,
                             int64_t axis, bool weight) {
    if (!t || t.isF32())
      return x;
    if (!isFP8(t))
      return cast(b, loc, cast(b, loc, x, t), b.getF32Type());
    if (scaling == FP8Scaling::Block)
      return blockRoundTrip(b, loc, op, x, t, axis, weight);
    auto [q, scale] = quantize(b, loc, x, t, scaling, key);
    if (!scale)
      return q;
    return DivOp::create(b, loc, cast(b, loc, q, b.getF32Type()), scale)
        .getResult();
  }

  /// Appends the new state's updates and metrics to the signature.
  void finish() { editor.finish(); }

  const bool observe;

private:
  mlir::ds::detail::StepEditor editor;
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

/// A layer under the channel level: `y = x W` with W a parameter whose
/// output channels (columns, or rows when transposed) each get the low or
/// the high precision from the running estimate of their gradient
/// variance.
struct ChannelLayer {
  Value input, weight;     ///< the forward operands
  int64_t weightAxis = 1;  ///< W's channel dimension
  unsigned gradResult = 0; ///< the `ds.grad` result of W
  RankedTensorType outType;
  Value state, mask;         ///< the estimate [C] and `state > t`
  Value inputEff, weightEff; ///< the operands as the GEMMs read them
};

/// Why `op` cannot run under the channel level ("" when it can); fills
/// `layer` when it can.
std::string channelCandidate(Operation *op, FunctionOpInterface func,
                             ChannelLayer &layer) {
  auto mm = dyn_cast<MatMulOp>(op);
  if (!mm)
    return "only matmuls are split by channel";
  auto w = dyn_cast<BlockArgument>(mm.getRhs());
  if (!w || !func.getArgAttr(w.getArgNumber(), DSDialect::kParamAttrName))
    return "its right operand is not a parameter";
  if (mm.getRhs().getType().getRank() != 2)
    return "its weight is not a matrix";
  Operation *term = func.getFunctionBody().front().getTerminator();
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    if (auto g =
            func.getResultAttrOfType<IntegerAttr>(i, DSDialect::kGradAttrName);
        g && g.getInt() == w.getArgNumber()) {
      layer.gradResult = i;
      layer.input = mm.getLhs();
      layer.weight = w;
      layer.weightAxis = mm.getTransposeRhs() ? 0 : 1;
      layer.outType = mm.getType();
      (void)term;
      return "";
    }
  return "its weight has no gradient";
}

/// The channel mask `estimate > threshold` shaped to broadcast along
/// dimension `axis` of `shape`.
Value maskAlong(OpBuilder &b, Location loc, Value estimate, Value threshold,
                ArrayRef<int64_t> shape, int64_t axis) {
  SmallVector<int64_t> dims(shape.size(), 1);
  dims[axis] = shape[axis];
  auto t = cast<RankedTensorType>(estimate.getType());
  Value shaped = ReshapeOp::create(b, loc, t.clone(dims), estimate);
  return CompareOp::create(b, loc, ComparePredicate::gt, shaped, threshold);
}

} // namespace

/// Applies `policy` to `func`; appends map entries to `map`.
/// With `observe`, builds the high-precision variant: the same state and
/// metrics, nothing rounded.
static LogicalResult assignPrecisionImpl(FunctionOpInterface func,
                                         const PrecisionPolicy &policy,
                                         bool observe,
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

  // Channel level: the matched matmuls whose rule narrows them.
  // (In program order: the estimates become state in this order, the same
  // in both variants.)
  llvm::MapVector<Operation *, ChannelLayer> channelLayers;
  const ChannelSettings &channel = policy.channel;
  if (channel.enabled)
    for (Decision &d : decisions) {
      if (!d.rule || !llvm::is_contained(channel.roles, d.role))
        continue;
      bool narrow = (d.rule->compute && !d.rule->compute.isF32()) ||
                    (d.rule->storage && !d.rule->storage.isF32()) ||
                    (d.rule->grad && !d.rule->grad.isF32());
      if (!narrow)
        continue;
      ChannelLayer layer;
      std::string why = channelCandidate(d.op, func, layer);
      if (!why.empty()) {
        if (!observe)
          d.op->emitWarning("ds-assign-precision: the channel level does not "
                            "apply to this ")
              << d.role << " op: " << why;
        continue;
      }
      channelLayers[d.op] = layer;
    }
  llvm::DenseMap<int64_t, ChannelLayer *> channelById;
  for (auto &[op, layer] : channelLayers)
    if (auto id = op->getAttrOfType<IntegerAttr>("ds.op_id"))
      channelById[id.getInt()] = &layer;

  // 3. Materialise, forward then backward.
  Materializer m(func, policy, observe);
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
                   Type storage, Type grad, const PrecisionRule *rule,
                   bool channelSplit) {
    SmallVector<NamedAttribute> f;
    std::string why = rule ? rule->label : "no rule: f32";
    if (rule && !locText(rule->loc).empty())
      why += " at " + locText(rule->loc);
    if (observe) {
      // The high-precision variant: everything f32.
      compute = storage = f32;
      grad = Type();
      why = "time level: the high-precision variant (" + why + " observed)";
      rule = nullptr;
    } else if (rule && rule->compute && !rule->compute.isF32() &&
               !isa<MatMulOp>(op) && !isRetypable(op)) {
      why +=
          " (compute type not applied: " + op->getName().getStringRef().str() +
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
      std::string text;
      llvm::raw_string_ostream os(text);
      os << "output channels whose gradient variance exceeds "
         << llvm::format("%g", channel.threshold)
         << "x the layer mean (running estimate, momentum "
         << llvm::format("%g", channel.momentum) << ") run in "
         << typeName(observe ? Type(f32) : channel.high);
      f.push_back(b.getNamedAttr("channel", b.getStringAttr(text)));
    }
    f.push_back(b.getNamedAttr("rule", b.getStringAttr(why)));
    entries.push_back(b.getDictionaryAttr(f));
  };

  // The channel split of a forward matmul: the input rounded once to the
  // rule's compute type (it is shared by all output channels), each weight
  // channel and each output channel to the high type where the channel's
  // estimate exceeds the threshold and to the rule's type elsewhere; one
  // FP32-accumulating GEMM over the mixed operand (docs/Rationale.md).
  Type high = channel.high ? channel.high : f32;
  auto selectByChannel = [&](Operation *op, Value x, Value layerState,
                             int64_t axis, Type low, FP8Scaling scaling,
                             StringRef key, int64_t kAxis,
                             bool weight) -> FailureOr<Value> {
    Location loc = op->getLoc();
    FailureOr<Value> hi = m.roundTrip(b, loc, op, x, high, scaling,
                                      (key + ".high").str(), kAxis, weight);
    FailureOr<Value> lo =
        m.roundTrip(b, loc, op, x, low, scaling, key, kAxis, weight);
    if (failed(hi) || failed(lo))
      return failure();
    if (m.observe || *hi == *lo)
      return *hi;
    Value shaped =
        maskAlong(b, loc, layerState, m.f32(b, loc, channel.threshold),
                  tensorType(x).getShape(), axis);
    return SelectOp::create(b, loc, shaped, *hi, *lo).getResult();
  };
  auto splitForward = [&](MatMulOp mm, ChannelLayer &layer,
                          const PrecisionRule *rule, Type compute, Type storage,
                          StringRef label) -> LogicalResult {
    b.setInsertionPoint(mm);
    Location loc = mm.getLoc();
    int64_t channels = tensorType(layer.weight).getShape()[layer.weightAxis];
    auto vecType = RankedTensorType::get({channels}, f32);
    // Starts at -1: the first observation replaces it (no warm-up bias).
    layer.state = m.addState(("channel.grad_var." + label).str(), vecType,
                             InitKind::constant, -1.0);
    layer.mask = CompareOp::create(b, loc, ComparePredicate::gt, layer.state,
                                   m.f32(b, loc, channel.threshold));
    int64_t rankA = mm.getLhs().getType().getRank();
    int64_t kA = mm.getTransposeLhs() ? rankA - 2 : rankA - 1;
    FailureOr<Value> x =
        m.roundTrip(b, loc, mm, layer.input, compute, rule->scaling,
                    (label + ".input").str(), kA, /*weight=*/false);
    FailureOr<Value> w = selectByChannel(
        mm, layer.weight, layer.state, layer.weightAxis, compute, rule->scaling,
        (label + ".weight").str(), 1 - layer.weightAxis, /*weight=*/true);
    if (failed(x) || failed(w))
      return failure();
    layer.inputEff = *x;
    layer.weightEff = *w;
    Value y =
        MatMulOp::create(b, loc, mm.getType(), *x, *w, mm.getTransposeLhsAttr(),
                         mm.getTransposeRhsAttr());
    y.getDefiningOp()->setDiscardableAttrs(mm->getDiscardableAttrDictionary());
    Value out = y;
    if (rule->storage && !rule->storage.isF32()) {
      FailureOr<Value> stored = selectByChannel(
          mm, y, layer.state, layer.outType.getRank() - 1, storage,
          rule->scaling, (label + ".output").str(), layer.outType.getRank() - 1,
          /*weight=*/false);
      if (failed(stored))
        return failure();
      out = *stored;
    }
    // Which channels ran in the high type, as a metric.
    Value one = m.f32(b, loc, 1.0);
    m.metric(("channel.high." + label).str(),
             m.observe
                 ? BroadcastOp::create(b, loc, vecType, one,
                                       b.getDenseI64ArrayAttr({}))
                       .getResult()
                 : SelectOp::create(b, loc, layer.mask, one, m.f32(b, loc, 0.0))
                       .getResult());
    mm.getResult().replaceAllUsesWith(out);
    mm->erase();
    return success();
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
      entry(op, d.role, d.label, compute, storage, grad, rule,
            channelLayers.count(op));
    if (!rule)
      continue;
    Location loc = op->getLoc();
    if (auto it = channelLayers.find(op); it != channelLayers.end()) {
      if (failed(splitForward(cast<MatMulOp>(op), it->second, rule, compute,
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
        FailureOr<Value> y =
            rebuildMatmul(mm, compute, compute, rule->scaling, d.label, "", "");
        if (failed(y))
          return failure();
        result = *y;
      }
    } else if (rule->compute && compute != f32 && isRetypable(op) && !observe) {
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
    if (rule->storage && storage != f32 && result && !observe &&
        !(narrow && storage == compute) &&
        tensorType(result).getElementType() == f32) {
      b.setInsertionPointAfterValue(result);
      Value stored = m.cast(b, loc, result, storage);
      Value back = m.cast(b, loc, stored, f32);
      result.replaceAllUsesExcept(back, stored.getDefiningOp());
    }
  }

  // A gradient GEMM of a channel-split layer: the forward's operands as the
  // forward read them, the output's cotangent rounded per output channel.
  auto splitBackward =
      [&](MatMulOp mm, ChannelLayer &layer, const PrecisionRule *rule,
          Type fwdType, StringRef label,
          const std::function<bool(Value)> &isCotangent) -> LogicalResult {
    b.setInsertionPoint(mm);
    DictionaryAttr tags = mm->getDiscardableAttrDictionary();
    CreatedOps created;
    b.setListener(&created);
    auto operand = [&](Value v, StringRef name,
                       int64_t kAxis) -> FailureOr<Value> {
      if (v == layer.input)
        return layer.inputEff;
      if (v == layer.weight)
        return layer.weightEff;
      std::string key = (label + "." + name).str();
      if (!isCotangent(v))
        return m.roundTrip(b, mm.getLoc(), mm, v, fwdType, rule->scaling, key,
                           kAxis, false);
      if (tensorType(v).getShape() == layer.outType.getShape())
        return selectByChannel(mm, v, layer.state, layer.outType.getRank() - 1,
                               rule->grad, rule->scaling, key, kAxis, false);
      return m.roundTrip(b, mm.getLoc(), mm, v, rule->grad, rule->scaling, key,
                         kAxis, false);
    };
    int64_t rankA = mm.getLhs().getType().getRank();
    int64_t rankB = mm.getRhs().getType().getRank();
    FailureOr<Value> lhs =
        operand(mm.getLhs(), isCotangent(mm.getLhs()) ? "cotangent" : "lhs",
                mm.getTransposeLhs() ? rankA - 2 : rankA - 1);
    FailureOr<Value> rhs =
        operand(mm.getRhs(), isCotangent(mm.getRhs()) ? "cotangent" : "rhs",
                mm.getTransposeRhs() ? rankB - 1 : rankB - 2);
    if (failed(lhs) || failed(rhs)) {
      b.setListener(nullptr);
      return failure();
    }
    Value y =
        MatMulOp::create(b, mm.getLoc(), mm.getType(), *lhs, *rhs,
                         mm.getTransposeLhsAttr(), mm.getTransposeRhsAttr());
    b.setListener(nullptr);
    for (Operation *op : created.ops)
      for (NamedAttribute tag : tags)
        if (!op->hasAttr(tag.getName()))
          op->setAttr(tag.getName(), tag.getValue());
    mm.getResult().replaceAllUsesWith(y);
    mm->erase();
    return success();
  };

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
    ChannelLayer *layer = id ? channelById.lookup(id.getInt()) : nullptr;
    if (!rule || (!rule->grad && !layer))
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
    if (layer) {
      std::string label = labelById.lookup(id.getInt()) + ".grad" +
                          std::to_string(gradGemms[id.getInt()]++);
      entry(mm, mm->getAttrOfType<StringAttr>("ds.role").getValue(), label,
            rule->grad ? rule->grad : fwdType, f32, Type(), rule,
            /*channelSplit=*/true);
      if (failed(splitBackward(mm, *layer, rule, fwdType, label, isCotangent)))
        return failure();
      continue;
    }
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
          label, compute, f32, Type(), rule, /*channelSplit=*/false);
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
  // The channel estimates: per output channel, the variance of the weight
  // gradient over the channel's fan-in, relative to the layer's mean
  // (invariant under loss scaling); v <- m v + (1 - m) r, the first
  // observation taken as it is, a non-finite step not recorded.
  for (auto &[op, layer] : channelLayers) {
    Operation *term = body.getTerminator();
    b.setInsertionPoint(term);
    Location loc = layer.state.getLoc();
    Value g = term->getOperand(layer.gradResult);
    auto other = b.getDenseI64ArrayAttr({1 - layer.weightAxis});
    Value mean = ReduceMeanOp::create(b, loc, g, other, false);
    Value meanSq =
        ReduceMeanOp::create(b, loc, MulOp::create(b, loc, g, g), other, false);
    Value var = MaximumOp::create(
        b, loc,
        SubOp::create(b, loc, meanSq, MulOp::create(b, loc, mean, mean)),
        m.f32(b, loc, 0.0));
    Value layerMean =
        ReduceMeanOp::create(b, loc, var, b.getDenseI64ArrayAttr({0}), false);
    Value positive = CompareOp::create(b, loc, ComparePredicate::gt, layerMean,
                                       m.f32(b, loc, 0.0));
    Value finite = CompareOp::create(
        b, loc, ComparePredicate::lt, layerMean,
        m.f32(b, loc, std::numeric_limits<double>::infinity()));
    Value ok = SelectOp::create(b, loc, positive, finite, positive);
    Value ratio = DivOp::create(b, loc, var, layerMean);
    Value ema = AddOp::create(
        b, loc,
        MulOp::create(b, loc, layer.state, m.f32(b, loc, channel.momentum)),
        MulOp::create(b, loc, ratio, m.f32(b, loc, 1.0 - channel.momentum)));
    Value fresh = CompareOp::create(b, loc, ComparePredicate::lt, layer.state,
                                    m.f32(b, loc, 0.0));
    Value next = SelectOp::create(b, loc, fresh, ratio, ema);
    m.update(layer.state, SelectOp::create(b, loc, ok, next, layer.state));
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

/// Records `entries` under `func`'s name in the module's `ds.precision_map`.
static void recordMap(FunctionOpInterface func, ArrayRef<Attribute> entries) {
  MLIRContext *ctx = func->getContext();
  auto module = func->getParentOfType<ModuleOp>();
  NamedAttrList maps;
  if (auto old = module->getAttrOfType<DictionaryAttr>("ds.precision_map"))
    maps.append(old.getValue());
  maps.set(SymbolTable::getSymbolName(func), ArrayAttr::get(ctx, entries));
  module->setAttr("ds.precision_map", maps.getDictionary(ctx));
}

/// The runner's schedule for `step`: which variant runs which steps, and
/// how long the high variant runs after a gradient anomaly.
static DictionaryAttr scheduleAttr(FunctionOpInterface step,
                                   FunctionOpInterface high,
                                   const PrecisionPolicy &policy,
                                   const AssignPrecisionOptions &options) {
  Builder b(step->getContext());
  StringAttr low = b.getStringAttr(SymbolTable::getSymbolName(step).str());
  StringAttr hi = b.getStringAttr(SymbolTable::getSymbolName(high).str());
  SmallVector<Attribute> phases;
  auto phase = [&](StringRef name, StringAttr variant, int64_t begin,
                   int64_t end) {
    if (begin < end)
      phases.push_back(b.getDictionaryAttr(
          {b.getNamedAttr("phase", b.getStringAttr(name)),
           b.getNamedAttr("variant", variant),
           b.getNamedAttr("begin", b.getI64IntegerAttr(begin)),
           b.getNamedAttr("end", b.getI64IntegerAttr(end))}));
  };
  int64_t total = options.totalSteps;
  if (policy.schedule.enabled) {
    auto warm =
        static_cast<int64_t>(std::llround(policy.schedule.warmup * total));
    auto fine =
        static_cast<int64_t>(std::llround(policy.schedule.finetune * total));
    phase("warm-up", hi, 0, warm);
    phase("policy", low, warm, total - fine);
    phase("fine-tune", hi, total - fine, total);
  }
  return b.getDictionaryAttr(
      {b.getNamedAttr("high", hi),
       b.getNamedAttr("total_steps", b.getI64IntegerAttr(total)),
       b.getNamedAttr("anomaly_steps",
                      b.getI64IntegerAttr(options.anomalySteps)),
       b.getNamedAttr("phases", b.getArrayAttr(phases))});
}

FailureOr<FunctionOpInterface>
mlir::ds::assignPrecision(FunctionOpInterface func,
                          const PrecisionPolicy &policy,
                          const AssignPrecisionOptions &options) {
  MLIRContext *ctx = func->getContext();
  ctx->loadDialect<arith::ArithDialect, DSDialect>();
  auto module = func->getParentOfType<ModuleOp>();
  if (!module)
    return func->emitOpError("ds-assign-precision: the step must be in a "
                             "module");
  const ScheduleSettings &schedule = policy.schedule;
  if (schedule.enabled && options.totalSteps <= 0) {
    InFlightDiagnostic diag =
        func->emitOpError("ds-assign-precision: the policy's schedule needs "
                          "the training length: pass total-steps=N (ds-run "
                          "passes its --steps)");
    diag.attachNote(Location(schedule.loc)) << "the schedule is here";
    return failure();
  }
  if (options.anomalySteps < 0)
    return func->emitOpError("ds-assign-precision: anomaly-steps must be "
                             "non-negative, got ")
           << options.anomalySteps;
  // The time level: a high-precision variant, cloned before any change and
  // then given the same state, so both share one signature.
  FunctionOpInterface high;
  if (schedule.enabled || options.anomalySteps > 0) {
    high = cast<FunctionOpInterface>(func->clone());
    SymbolTable::setSymbolName(
        high, (SymbolTable::getSymbolName(func).getValue() + "_high").str());
    SymbolTable(module).insert(high, std::next(Block::iterator(func)));
  }
  SmallVector<Attribute> map;
  if (failed(assignPrecisionImpl(func, policy, /*observe=*/false, map)))
    return failure();
  recordMap(func, map);
  if (!high)
    return FunctionOpInterface();
  map.clear();
  if (failed(assignPrecisionImpl(high, policy, /*observe=*/true, map)))
    return failure();
  recordMap(high, map);
  if (high.getFunctionType() != func.getFunctionType())
    return func->emitOpError("ds-assign-precision: internal error: the "
                             "high-precision variant's signature differs");
  NamedAttrList schedules;
  if (auto old = module->getAttrOfType<DictionaryAttr>("ds.precision_schedule"))
    schedules.append(old.getValue());
  schedules.set(SymbolTable::getSymbolName(func),
                scheduleAttr(func, high, policy, options));
  module->setAttr("ds.precision_schedule", schedules.getDictionary(ctx));
  return high;
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
    bool any = false;
    for (auto func : llvm::to_vector(module.getOps<FunctionOpInterface>())) {
      if (!func->hasAttr(DSDialect::kTrainStepAttrName))
        continue;
      any = true;
      if (failed(assignPrecision(func, *loaded, {totalSteps, anomalySteps})))
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
