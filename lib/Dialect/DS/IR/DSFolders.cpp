//===- DSFolders.cpp - Folders of the ds ops ------------------------------===//
//
// The folders of the ds ops. Every fold here is exact: the folded value is
// bit for bit the value the op computes, signed zeros and NaNs included
// (up to the quieting of a signaling NaN, which no ds op produces; upstream
// arith and LLVM make the same choice). So a fold never changes numerics,
// and the training pipeline may canonicalize the finished step:
//
//  - `x * 1`, `1 * x`, `x / 1`, `x + -0.0`, `-0.0 + x`, `x - +0.0` (and the
//    integer forms with 0 and 1) are `x`. `x + +0.0` is not: `-0.0 + +0.0`
//    is `+0.0`. The constant may be a splat `arith.constant` seen through
//    ds.reshape, ds.broadcast and exact float casts.
//  - A reshape of a reshape is one reshape; a reshape, broadcast or cast to
//    the operand's own type is the operand.
//  - A transpose of a transpose is one transpose (the composed
//    permutation); the identity permutation is the operand.
//  - A cast that narrows back to the type an exact widening started from is
//    the widening's operand. The opposite order (narrow, then widen) is
//    mixed precision's rounding and never folds.
//
// A fold only replaces an op by a value of its own result type: the binary
// ops broadcast, and `x * 1` with a larger `1` is a broadcast, not `x`.
// Ops marked `ds.seed` never fold, and a `ds.seed` constant is never seen as
// a one: it is the backward seed that ds-insert-loss-scaling scales.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/APInt.h"

#include <optional>

using namespace mlir;
using namespace mlir::ds;

//===----------------------------------------------------------------------===//
// Splat constants
//===----------------------------------------------------------------------===//

namespace {
/// The element of a splat tensor: a float or an integer.
struct SplatValue {
  std::optional<APFloat> f;
  std::optional<APInt> i;

  bool isOne() const { return f ? f->isExactlyValue(1.0) : i->isOne(); }
  /// Zero of the given sign; integers have one zero.
  bool isZero(bool negative) const {
    return f ? f->isZero() && f->isNegative() == negative : i->isZero();
  }
};
} // namespace

/// Whether `op` is the backward seed (or carries its marker): never folded,
/// never read as a constant.
static bool isSeed(Operation *op) {
  return op->hasAttr(DSDialect::kSeedAttrName);
}

/// `value` converted exactly to the float type `to`, or nothing when the
/// conversion would round (then the cast's own rounding rules would matter).
static std::optional<SplatValue> convertExactly(const SplatValue &value,
                                                FloatType to) {
  APFloat result(to.getFloatSemantics());
  APFloat::opStatus status;
  if (value.f) {
    result = *value.f;
    bool losesInfo = false;
    status = result.convert(to.getFloatSemantics(),
                            APFloat::rmNearestTiesToEven, &losesInfo);
    if (losesInfo)
      return std::nullopt;
  } else {
    // ds.cast reads i1 as unsigned (true is 1) and wider integers as signed.
    status = result.convertFromAPInt(*value.i, value.i->getBitWidth() != 1,
                                     APFloat::rmNearestTiesToEven);
  }
  if (status != APFloat::opOK)
    return std::nullopt;
  return SplatValue{result, std::nullopt};
}

/// The element of `v` when it is a splat constant, looked through the ops
/// that keep a splat a splat (ds.reshape, ds.broadcast, and ds.cast where
/// it converts the element exactly). `depth` bounds the walk.
static std::optional<SplatValue> matchSplat(Value v, unsigned depth = 8) {
  Operation *def = v.getDefiningOp();
  if (!def || isSeed(def) || depth == 0)
    return std::nullopt;
  if (isa<ReshapeOp, BroadcastOp>(def))
    return matchSplat(def->getOperand(0), depth - 1);
  if (auto cast = dyn_cast<CastOp>(def)) {
    auto to = dyn_cast<FloatType>(cast.getType().getElementType());
    std::optional<SplatValue> in = matchSplat(cast.getInput(), depth - 1);
    // Casts to integers (truncation, `!= 0` for i1) are not needed here.
    if (!to || !in)
      return std::nullopt;
    return convertExactly(*in, to);
  }
  SplatElementsAttr splat;
  if (!matchPattern(v, m_Constant(&splat)))
    return std::nullopt;
  if (isa<FloatType>(splat.getElementType()))
    return SplatValue{splat.getSplatValue<APFloat>(), std::nullopt};
  if (isa<IntegerType>(splat.getElementType()))
    return SplatValue{std::nullopt, splat.getSplatValue<APInt>()};
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Elementwise binary ops
//===----------------------------------------------------------------------===//

/// `x` when `c` is a splat constant for which `isIdentity` holds and `op`'s
/// result has `x`'s type (else the op also broadcasts `x`).
static OpFoldResult
foldIdentityOperand(Operation *op, Value x, Value c,
                    function_ref<bool(const SplatValue &)> isIdentity) {
  if (isSeed(op) || x.getType() != op->getResult(0).getType())
    return {};
  std::optional<SplatValue> value = matchSplat(c);
  if (!value || !isIdentity(*value))
    return {};
  return x;
}

static bool isOne(const SplatValue &v) { return v.isOne(); }
/// -0.0 is the additive identity of IEEE floats; +0.0 is not
/// (-0.0 + +0.0 = +0.0).
static bool isNegZero(const SplatValue &v) { return v.isZero(true); }
/// x - +0.0 is x for every x (-0.0 - +0.0 = -0.0).
static bool isPosZero(const SplatValue &v) { return v.isZero(false); }

OpFoldResult AddOp::fold(FoldAdaptor) {
  // Commutative: the greedy driver moves a direct constant to the right,
  // but one seen through a reshape or cast may be on either side.
  if (OpFoldResult r =
          foldIdentityOperand(*this, getLhs(), getRhs(), isNegZero))
    return r;
  return foldIdentityOperand(*this, getRhs(), getLhs(), isNegZero);
}

OpFoldResult SubOp::fold(FoldAdaptor) {
  return foldIdentityOperand(*this, getLhs(), getRhs(), isPosZero);
}

OpFoldResult MulOp::fold(FoldAdaptor) {
  if (OpFoldResult r = foldIdentityOperand(*this, getLhs(), getRhs(), isOne))
    return r;
  return foldIdentityOperand(*this, getRhs(), getLhs(), isOne);
}

OpFoldResult DivOp::fold(FoldAdaptor) {
  return foldIdentityOperand(*this, getLhs(), getRhs(), isOne);
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

OpFoldResult BroadcastOp::fold(FoldAdaptor) {
  // Same type: the verifier leaves only the identity mapping.
  if (!isSeed(*this) && getInput().getType() == getType())
    return getInput();
  return {};
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (isSeed(*this))
    return {};
  if (getInput().getType() == getType())
    return getInput();
  // Row-major order is kept by each reshape, so only the last shape counts.
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    if (inner.getInput().getType() == getType())
      return inner.getInput();
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}

/// Whether `perm` maps every dimension to itself.
static bool isIdentityPermutation(ArrayRef<int64_t> perm) {
  for (auto [i, p] : llvm::enumerate(perm))
    if (p != static_cast<int64_t>(i))
      return false;
  return true;
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  if (isSeed(*this))
    return {};
  if (isIdentityPermutation(getPermutation()) &&
      getInput().getType() == getType())
    return getInput();
  auto inner = getInput().getDefiningOp<TransposeOp>();
  if (!inner)
    return {};
  // Result dimension k is the inner result's dimension perm[k], which is
  // the inner input's dimension innerPerm[perm[k]].
  ArrayRef<int64_t> innerPerm = inner.getPermutation();
  SmallVector<int64_t> composed;
  for (int64_t p : getPermutation())
    composed.push_back(innerPerm[p]);
  if (isIdentityPermutation(composed) &&
      inner.getInput().getType() == getType())
    return inner.getInput();
  setPermutation(composed);
  getInputMutable().assign(inner.getInput());
  return getResult();
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

/// Whether casting from `from` to `to` keeps every value exactly, so that
/// casting back recovers it: a float into a format that represents all of
/// its values (f16 -> f32, f8E4M3FN -> bf16), or an integer into a wider one.
static bool isExactWidening(Type from, Type to) {
  auto fromF = dyn_cast<FloatType>(from), toF = dyn_cast<FloatType>(to);
  if (fromF && toF)
    return APFloat::isRepresentableBy(fromF.getFloatSemantics(),
                                      toF.getFloatSemantics());
  auto fromI = dyn_cast<IntegerType>(from), toI = dyn_cast<IntegerType>(to);
  return fromI && toI && fromI.getWidth() < toI.getWidth();
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (isSeed(*this))
    return {};
  // A cast to the operand's own type converts nothing, with or without
  // `saturate` (every value is in range).
  if (getInput().getType() == getType())
    return getInput();
  // cast(cast(x : T -> W) : W -> T) with an exact widening T -> W is x:
  // every value of W it sees is a value of T, so the narrowing rounds
  // nothing, and `saturate` on either cast clamps nothing (no value is out
  // of T's range; infinities and NaNs came from T). A narrowing followed by
  // a widening is the rounding itself and does not match: T -> W is then
  // not exact.
  auto inner = getInput().getDefiningOp<CastOp>();
  if (!inner || isSeed(inner))
    return {};
  TypedValue<RankedTensorType> source = inner.getInput();
  if (source.getType() != getType() ||
      !isExactWidening(source.getType().getElementType(),
                       inner.getType().getElementType()))
    return {};
  return source;
}
