//===- PrecisionMaterializer.cpp - Casts, FP8 scaling, precision state ----===//
//
// Implements PrecisionMaterializer.h: the cast and FP8 building blocks,
// and the operand preparation and matmul rebuilding ds-assign-precision's
// forward and backward phases share.
//
//===----------------------------------------------------------------------===//

#include "PrecisionMaterializer.h"

#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

Value Materializer::f32(OpBuilder &b, Location loc, double v) {
  auto t = RankedTensorType::get({}, b.getF32Type());
  return arith::ConstantOp::create(
      b, loc, t, DenseElementsAttr::get(t, b.getF32FloatAttr(v)));
}

Value Materializer::cast(OpBuilder &b, Location loc, Value x, Type elementType,
                         bool saturate) {
  auto t = tensorType(x);
  if (observe || !elementType || t.getElementType() == elementType)
    return x;
  return CastOp::create(b, loc, t.clone(elementType), x,
                        saturate ? b.getUnitAttr() : UnitAttr());
}

Value Materializer::reshape(OpBuilder &b, Location loc, Value x,
                            ArrayRef<int64_t> shape) {
  auto t = tensorType(x);
  if (t.getShape() == shape)
    return x;
  return ReshapeOp::create(b, loc, t.clone(shape), x);
}

Value Materializer::amax(OpBuilder &b, Location loc, Value x,
                         ArrayRef<int64_t> dims, bool keep) {
  // The maximum over every element does not depend on the shape: look
  // through reshapes, so that a tensor and its reshaped views (a gradient
  // GEMM pair quantises its cotangent as [B, T, N] and as [B*T, N]) share
  // one reduction after CSE instead of reading the tensor twice.
  if (dims.empty() && !keep)
    while (auto r = x.getDefiningOp<ReshapeOp>())
      x = r.getInput();
  SmallVector<int64_t> all(dims);
  if (all.empty())
    for (int64_t i = 0, e = tensorType(x).getRank(); i < e; ++i)
      all.push_back(i);
  Value a = AbsOp::create(b, loc, x);
  if (all.empty())
    return a;
  return ReduceMaxOp::create(b, loc, a, b.getDenseI64ArrayAttr(all), keep);
}

Value Materializer::scaleFrom(OpBuilder &b, Location loc, Value amaxV,
                              double fmax) {
  Value zero = f32(b, loc, 0.0);
  Value inf = f32(b, loc, std::numeric_limits<double>::infinity());
  Value positive = CompareOp::create(b, loc, ComparePredicate::gt, amaxV, zero);
  Value finite = CompareOp::create(b, loc, ComparePredicate::lt, amaxV, inf);
  Value ok = SelectOp::create(b, loc, positive, finite, positive);
  double m = std::ldexp(1.0, -static_cast<int>(policy.fp8.margin));
  Value raw = DivOp::create(b, loc, f32(b, loc, fmax * m), amaxV);
  return SelectOp::create(b, loc, ok, raw, f32(b, loc, 1.0));
}

/// What quantising `x` per tensor quantises, as (value, widened-to type):
/// reshapes are looked through (one scale for all elements, and the cast
/// moves no element), and a widening ds.cast is named by its input and
/// result type, since the backward re-creates the widening of a value kept
/// narrow (`storage`) next to its own readers. So the weight-gradient
/// GEMM's copy of a linear layer's input, and a cotangent quantised as
/// [B, T, N] and as [B*T, N], find the quantisation already made.
static std::pair<Value, Type> quantisationSource(Value x) {
  while (auto r = x.getDefiningOp<ReshapeOp>())
    x = r.getInput();
  if (auto c = x.getDefiningOp<CastOp>()) {
    auto from = dyn_cast<FloatType>(getElementTypeOrSelf(c.getInput()));
    auto to = dyn_cast<FloatType>(getElementTypeOrSelf(c.getType()));
    if (from && to && from.getWidth() < to.getWidth())
      return {c.getInput(), to};
  }
  return {x, Type()};
}

/// Whether `v` may be used at `b`'s insertion point: a block argument of
/// its block, or a value defined before it there.
static bool isAvailable(OpBuilder &b, Value v) {
  Block *block = b.getInsertionBlock();
  Operation *def = v.getDefiningOp();
  if (!def)
    return cast<BlockArgument>(v).getOwner() == block;
  return def->getBlock() == block &&
         (b.getInsertionPoint() == block->end() ||
          def->isBeforeInBlock(&*b.getInsertionPoint()));
}

std::pair<Value, Value> Materializer::quantize(OpBuilder &b, Location loc,
                                               Value x, Type t,
                                               FP8Scaling scaling,
                                               StringRef key) {
  auto [source, widened] = quantisationSource(x);
  auto cacheKey =
      std::make_tuple(source.getAsOpaquePointer(), widened.getAsOpaquePointer(),
                      t.getAsOpaquePointer(), static_cast<int>(scaling));
  if (auto it = quantized.find(cacheKey);
      it != quantized.end() && isAvailable(b, it->second.first)) {
    auto [q, scale] = it->second;
    if (!scale)
      return {x, Value()};
    // The FP8 tensor made for another view of the same elements.
    return {reshape(b, loc, q, tensorType(x).getShape()), scale};
  }
  double fmax = largestFinite(t);
  Value scale;
  Value now = amax(b, loc, x);
  if (scaling == FP8Scaling::Delayed) {
    int64_t len = policy.fp8.amaxHistoryLen;
    auto histType = RankedTensorType::get({len}, b.getF32Type());
    Value hist = addState(("fp8.amax_history." + key).str(), histType);
    Value prev = ReduceMaxOp::create(b, loc, hist, b.getDenseI64ArrayAttr({0}),
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
    Value finite =
        CompareOp::create(b, loc, ComparePredicate::lt, now,
                          f32(b, loc, std::numeric_limits<double>::infinity()));
    update(hist, SelectOp::create(b, loc, finite, rolled, hist));
  } else {
    scale = scaleFrom(b, loc, now, fmax);
  }
  std::pair<Value, Value> result = {x, Value()};
  if (!observe)
    result = {cast(b, loc, MulOp::create(b, loc, x, scale), t,
                   /*saturate=*/true),
              scale};
  quantized[cacheKey] = result;
  return result;
}

FailureOr<Value> Materializer::blockRoundTrip(OpBuilder &b, Location loc,
                                              Operation *op, Value x, Type t,
                                              int64_t axis, bool weight) {
  auto type = tensorType(x);
  ArrayRef<int64_t> shape = type.getShape();
  int64_t rank = type.getRank();
  double fmax = largestFinite(t);
  SmallVector<int64_t> split, dims;
  if (weight) {
    int64_t blk = policy.fp8.weightBlock;
    int64_t r = shape[rank - 2], c = shape[rank - 1];
    if (r % blk || c % blk)
      return op->emitOpError("block scaling needs the "
                             "weight's dims ")
             << r << "x" << c << " divisible by fp8.weight-block " << blk;
    split.append(shape.begin(), shape.end() - 2);
    split.append({r / blk, blk, c / blk, blk});
    dims = {rank - 1, rank + 1};
  } else {
    int64_t blk = policy.fp8.activationBlock;
    int64_t k = shape[axis];
    if (k % blk)
      return op->emitOpError("block scaling needs the "
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

FailureOr<Value> Materializer::roundTrip(OpBuilder &b, Location loc,
                                         Operation *op, Value x, Type t,
                                         FP8Scaling scaling, StringRef key,
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

FailureOr<std::pair<Value, Value>>
Materializer::prepareOperand(OpBuilder &b, Operation *op, Value x, Type t,
                             FP8Scaling scaling, StringRef key, int64_t kAxis,
                             bool weight) {
  Location loc = op->getLoc();
  if (!isFP8(t))
    return std::make_pair(cast(b, loc, x, t), Value());
  if (scaling == FP8Scaling::Block) {
    FailureOr<Value> d = blockRoundTrip(b, loc, op, x, t, kAxis, weight);
    if (failed(d))
      return failure();
    return std::make_pair(*d, Value());
  }
  return quantize(b, loc, x, t, scaling, key);
}

FailureOr<Value> Materializer::rebuildMatmul(OpBuilder &b, MatMulOp mm, Type ta,
                                             Type tb, FP8Scaling scaling,
                                             StringRef label, StringRef nameA,
                                             StringRef nameB) {
  b.setInsertionPoint(mm);
  Location loc = mm.getLoc();
  int64_t rankA = mm.getLhs().getType().getRank();
  int64_t rankB = mm.getRhs().getType().getRank();
  // The contraction axis of each operand, for 1 x B tiles.
  int64_t kA = mm.getTransposeLhs() ? rankA - 2 : rankA - 1;
  int64_t kB = mm.getTransposeRhs() ? rankB - 1 : rankB - 2;
  bool weightA = static_cast<bool>(traceToParam(mm.getLhs()));
  bool weightB = static_cast<bool>(traceToParam(mm.getRhs()));
  auto keyOf = [&](StringRef name, bool weight) {
    return (label + "." +
            (name.empty() ? StringRef(weight ? "weight" : "input") : name))
        .str();
  };
  auto a = prepareOperand(b, mm, mm.getLhs(), ta, scaling,
                          keyOf(nameA, weightA), kA, weightA);
  if (failed(a))
    return failure();
  auto bb = prepareOperand(b, mm, mm.getRhs(), tb, scaling,
                           keyOf(nameB, weightB), kB, weightB);
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
    y = MulOp::create(b, loc, y, DivOp::create(b, loc, f32(b, loc, 1.0), s));
  }
  mm.getResult().replaceAllUsesWith(y);
  mm->erase();
  return y;
}
