//===- NamedOps.cpp - Raise named linalg and tensor ops into ds -----------===//
//
// The structured ops torch-mlir emits by name map one to one onto ds ops;
// what needs care is the producers they absorb: the zero `linalg.fill` of
// a contraction's accumulator, the `linalg.transpose` of a weight (which
// becomes a transpose flag), the `tensor.pad` in front of a convolution or
// pooling (which becomes its padding) and the bias broadcast a convolution
// accumulates into. The absorbed producers are left for dead-code removal.
//
//===----------------------------------------------------------------------===//

#include "RaiseUtils.h"

#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Transforms/ImportLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::raise;

namespace {

/// `v` without a transpose of its two innermost dimensions, and whether
/// there was one.
std::pair<Value, bool> lookThroughInnerTranspose(Value v) {
  ArrayRef<int64_t> perm;
  Value input;
  if (auto t = v.getDefiningOp<TransposeOp>()) {
    perm = t.getPermutation();
    input = t.getInput();
  } else if (auto t = v.getDefiningOp<linalg::TransposeOp>()) {
    perm = t.getPermutation();
    input = t.getInput();
  } else {
    return {v, false};
  }
  int64_t r = perm.size();
  if (r < 2 || perm[r - 1] != r - 2 || perm[r - 2] != r - 1)
    return {v, false};
  for (int64_t i = 0; i < r - 2; ++i)
    if (perm[i] != i)
      return {v, false};
  return {input, true};
}

/// `acc + value` unless the accumulator `acc` is a zero fill.
FailureOr<Value> accumulateInto(OpBuilder &b, Location loc, Value value,
                                Value acc) {
  if (isFilledWith(acc, 0.0))
    return value;
  if (acc.getType() != value.getType() || !isDSCompatible(acc.getType()))
    return failure();
  return Value(AddOp::create(b, loc, value, acc));
}

FailureOr<Value> raiseContraction(OpBuilder &b, linalg::LinalgOp op) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInputs() != 2)
    return failure();
  auto resultType = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!resultType || !isa<FloatType>(resultType.getElementType()))
    return failure();
  auto [lhs, tl] = lookThroughInnerTranspose(op.getDpsInputs()[0]);
  auto [rhs, tr] = lookThroughInnerTranspose(op.getDpsInputs()[1]);
  for (Value v : {lhs, rhs})
    if (!isDSCompatible(v.getType()) ||
        getElementTypeOrSelf(v.getType()) != resultType.getElementType())
      return failure();
  Value mm = MatMulOp::create(b, op.getLoc(), lhs, rhs, tl, tr);
  if (mm.getType() != resultType)
    return failure();
  return accumulateInto(b, op.getLoc(), mm, op.getDpsInits()[0]);
}

/// The source and symmetric spatial padding of a constant `tensor.pad` of
/// an NCHW tensor with the given padding value, or {v, [0, 0]}.
std::pair<Value, SmallVector<int64_t>> lookThroughPad(Value v, double value) {
  auto pad = v.getDefiningOp<tensor::PadOp>();
  SmallVector<int64_t> none = {0, 0};
  if (!pad || pad.getNofold())
    return {v, none};
  Value padValue = pad.getConstantPaddingValue();
  std::optional<double> c =
      padValue ? getScalarConstant(padValue) : std::nullopt;
  ArrayRef<int64_t> low = pad.getStaticLow(), high = pad.getStaticHigh();
  if (!c || *c != value || low.size() != 4 || low != high || low[0] != 0 ||
      low[1] != 0 || llvm::any_of(low, [](int64_t x) {
        return ShapedType::isDynamic(x) || x < 0;
      }))
    return {v, none};
  return {pad.getSource(), {low[2], low[3]}};
}

SmallVector<int64_t> toVector(DenseIntElementsAttr attr) {
  SmallVector<int64_t> out;
  for (const APInt &v : attr.getValues<APInt>())
    out.push_back(v.getSExtValue());
  return out;
}

FailureOr<Value> raiseConv(OpBuilder &b, linalg::Conv2DNchwFchwOp op) {
  if (!op.hasPureTensorSemantics())
    return failure();
  Location loc = op.getLoc();
  auto [input, padding] = lookThroughPad(op.getInputs()[0], 0.0);
  Value weight = op.getInputs()[1];
  auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
  auto inType = dyn_cast<RankedTensorType>(input.getType());
  auto wType = dyn_cast<RankedTensorType>(weight.getType());
  if (!isDSCompatible(inType) || !isDSCompatible(wType) ||
      !isDSCompatible(resultType) ||
      !isa<FloatType>(resultType.getElementType()))
    return failure();
  SmallVector<int64_t> strides = toVector(op.getStrides());
  SmallVector<int64_t> dilation = toVector(op.getDilations());
  // ds.conv2d's output size must be what linalg computes.
  for (int i = 0; i < 2; ++i) {
    int64_t size = (inType.getDimSize(2 + i) + 2 * padding[i] -
                    dilation[i] * (wType.getDimSize(2 + i) - 1) - 1) /
                       strides[i] +
                   1;
    if (size != resultType.getDimSize(2 + i))
      return failure();
  }
  // A per-channel bias broadcast into the accumulator becomes the bias.
  Value init = op.getDpsInits()[0], bias;
  if (auto bc = init.getDefiningOp<BroadcastOp>()) {
    if (bc.getInput().getType().getRank() == 1 &&
        bc.getDims() == ArrayRef<int64_t>{1})
      bias = bc.getInput();
  } else if (auto bc = init.getDefiningOp<linalg::BroadcastOp>()) {
    if (bc.getInput().getType().getRank() == 1 &&
        bc.getDimensions() == ArrayRef<int64_t>{0, 2, 3})
      bias = bc.getInput();
  }
  if (bias && !isDSCompatible(bias.getType()))
    return failure();
  Value conv = Conv2DOp::create(b, loc, resultType, input, weight, bias,
                                strides, padding, dilation, 1);
  if (bias)
    return conv;
  return accumulateInto(b, loc, conv, init);
}

FailureOr<Value> raiseMaxPool(OpBuilder &b, linalg::PoolingNchwMaxOp op) {
  if (!op.hasPureTensorSemantics())
    return failure();
  Location loc = op.getLoc();
  double negInf = -std::numeric_limits<double>::infinity();
  auto [input, padding] = lookThroughPad(op.getInputs()[0], negInf);
  auto inType = dyn_cast<RankedTensorType>(input.getType());
  auto window = dyn_cast<RankedTensorType>(op.getInputs()[1].getType());
  auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
  if (!isDSCompatible(inType) || !window || !window.hasStaticShape() ||
      !isDSCompatible(resultType) ||
      !isa<FloatType>(resultType.getElementType()))
    return failure();
  SmallVector<int64_t> strides = toVector(op.getStrides());
  SmallVector<int64_t> kernel(window.getShape());
  if (llvm::any_of(toVector(op.getDilations()),
                   [](int64_t d) { return d != 1; }))
    return failure();
  for (int i = 0; i < 2; ++i) {
    if (2 * padding[i] > kernel[i])
      return failure();
    int64_t size =
        (inType.getDimSize(2 + i) + 2 * padding[i] - kernel[i]) / strides[i] +
        1;
    if (size != resultType.getDimSize(2 + i))
      return failure();
  }
  Value pool = MaxPool2DOp::create(
      b, loc, resultType, input, b.getDenseI64ArrayAttr(kernel),
      b.getDenseI64ArrayAttr(strides), b.getDenseI64ArrayAttr(padding));
  Value init = op.getDpsInits()[0];
  if (isFilledWith(init, negInf))
    return pool;
  if (!isDSCompatible(init.getType()))
    return failure();
  return Value(MaximumOp::create(b, loc, pool, init));
}

FailureOr<Value> raiseExtractSlice(OpBuilder &b, tensor::ExtractSliceOp op) {
  auto src = op.getSourceType();
  auto res = op.getResultType();
  if (!isDSCompatible(src) || !isDSCompatible(res))
    return failure();
  ArrayRef<int64_t> offsets = op.getStaticOffsets(),
                    sizes = op.getStaticSizes(),
                    strides = op.getStaticStrides();
  for (ArrayRef<int64_t> a : {offsets, sizes, strides})
    if (llvm::any_of(a, ShapedType::isDynamic))
      return failure();
  Value slice = SliceOp::create(b, op.getLoc(), src.clone(sizes),
                                op.getSource(), b.getDenseI64ArrayAttr(offsets),
                                b.getDenseI64ArrayAttr(strides));
  return reshapeTo(b, op.getLoc(), slice, res.getShape());
}

FailureOr<Value> raisePad(OpBuilder &b, tensor::PadOp op) {
  auto res = op.getResultType();
  Value padValue = op.getConstantPaddingValue();
  Attribute attr;
  if (!padValue || !matchPattern(padValue, m_Constant(&attr)) ||
      !isDSCompatible(res) || !isDSCompatible(op.getSourceType()))
    return failure();
  ArrayRef<int64_t> low = op.getStaticLow();
  if (llvm::any_of(
          low, [](int64_t x) { return ShapedType::isDynamic(x) || x < 0; }) ||
      llvm::any_of(op.getStaticHigh(),
                   [](int64_t x) { return ShapedType::isDynamic(x) || x < 0; }))
    return failure();
  auto typed = dyn_cast<TypedAttr>(attr);
  if (!typed || typed.getType() != res.getElementType())
    return failure();
  Value dest = arith::ConstantOp::create(b, op.getLoc(), res,
                                         DenseElementsAttr::get(res, typed));
  return Value(InsertSliceOp::create(b, op.getLoc(), op.getSource(), dest,
                                     b.getDenseI64ArrayAttr(low), nullptr));
}

} // namespace

FailureOr<Value> mlir::ds::raiseNamedOp(RewriterBase &rewriter, Operation *op,
                                        bool raisePadOps) {
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  OpBuilder &b = rewriter;
  if (op->getNumResults() != 1)
    return failure();
  return llvm::TypeSwitch<Operation *, FailureOr<Value>>(op)
      .Case<linalg::MatmulOp>([&](linalg::MatmulOp mm) -> FailureOr<Value> {
        if (mm.hasUserDefinedMaps())
          return failure();
        return raiseContraction(b, mm);
      })
      .Case<linalg::BatchMatmulOp>(
          [&](linalg::BatchMatmulOp mm) -> FailureOr<Value> {
            if (mm.hasUserDefinedMaps())
              return failure();
            return raiseContraction(b, mm);
          })
      .Case<linalg::TransposeOp>(
          [&](linalg::TransposeOp t) -> FailureOr<Value> {
            if (!t.hasPureTensorSemantics() ||
                !isDSCompatible(t.getInput().getType()))
              return failure();
            return Value(TransposeOp::create(
                b, t.getLoc(), t.getInput(),
                b.getDenseI64ArrayAttr(t.getPermutation())));
          })
      .Case<linalg::BroadcastOp>(
          [&](linalg::BroadcastOp bc) -> FailureOr<Value> {
            auto res = cast<RankedTensorType>(bc->getResult(0).getType());
            if (!bc.hasPureTensorSemantics() ||
                !isDSCompatible(bc.getInput().getType()) ||
                !isDSCompatible(res))
              return failure();
            SmallVector<int64_t> dims;
            for (int64_t d = 0; d < res.getRank(); ++d)
              if (!llvm::is_contained(bc.getDimensions(), d))
                dims.push_back(d);
            return Value(BroadcastOp::create(b, bc.getLoc(), res, bc.getInput(),
                                             b.getDenseI64ArrayAttr(dims)));
          })
      .Case<linalg::Conv2DNchwFchwOp>(
          [&](linalg::Conv2DNchwFchwOp c) { return raiseConv(b, c); })
      .Case<linalg::PoolingNchwMaxOp>(
          [&](linalg::PoolingNchwMaxOp p) { return raiseMaxPool(b, p); })
      .Case<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(
          [&](Operation *r) -> FailureOr<Value> {
            Value src = r->getOperand(0);
            Type res = r->getResult(0).getType();
            if (!isDSCompatible(src.getType()) || !isDSCompatible(res))
              return failure();
            return Value(ReshapeOp::create(b, r->getLoc(), res, src));
          })
      .Case<tensor::ExtractSliceOp>(
          [&](tensor::ExtractSliceOp s) { return raiseExtractSlice(b, s); })
      .Case<tensor::ConcatOp>([&](tensor::ConcatOp c) -> FailureOr<Value> {
        if (!isDSCompatible(c.getResultType()) ||
            llvm::any_of(c.getInputs(),
                         [](Value v) { return !isDSCompatible(v.getType()); }))
          return failure();
        return Value(
            ConcatOp::create(b, c.getLoc(), c.getInputs(), c.getDim()));
      })
      .Case<tensor::PadOp>([&](tensor::PadOp p) -> FailureOr<Value> {
        if (!raisePadOps)
          return failure();
        return raisePad(b, p);
      })
      .Default([](Operation *) { return failure(); });
}

FailureOr<SmallVector<Value>> mlir::ds::raiseOp(RewriterBase &rewriter,
                                                Operation *op, bool raisePad) {
  if (auto generic = dyn_cast<linalg::GenericOp>(op))
    return raiseGeneric(rewriter, generic);
  FailureOr<Value> v = raiseNamedOp(rewriter, op, raisePad);
  if (failed(v))
    return failure();
  return SmallVector<Value>{*v};
}
