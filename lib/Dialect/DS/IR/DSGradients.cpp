//===- DSGradients.cpp - Vector-Jacobian products of ds ops ---------------===//
//
// DifferentiableOpInterface::buildVJP for every differentiable ds op. Each
// rule is written with other ds ops, so the backward graph stays in the
// dialect where the training passes (precision, sparsity, loss scaling) see
// and rewrite it. Ops whose gradient would be slow or awkward as a
// composition (convolution, pooling, embedding, GELU, cross-entropy) use
// dedicated backward kernels. The rules are those documented on each op in
// DSOps.td and match PyTorch's autograd (including its tie-breaking).
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/CausalGemm.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/IR/ShapeUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace mlir::ds;

namespace {

/// Small helpers that build ds ops at one location; every VJP uses them.
class GradBuilder {
public:
  GradBuilder(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  static RankedTensorType typeOf(Value v) {
    return cast<RankedTensorType>(v.getType());
  }

  /// A rank-0 constant of the given element type.
  Value scalar(Type elementType, double value) {
    auto type = RankedTensorType::get({}, elementType);
    Attribute attr;
    if (auto ft = dyn_cast<FloatType>(elementType))
      attr = DenseElementsAttr::get(type, FloatAttr::get(ft, value));
    else
      attr = DenseElementsAttr::get(
          type, IntegerAttr::get(elementType, static_cast<int64_t>(value)));
    return arith::ConstantOp::create(b, loc, type, cast<TypedAttr>(attr));
  }
  Value scalarLike(Value v, double value) {
    return scalar(typeOf(v).getElementType(), value);
  }
  Value zeros(RankedTensorType type) {
    return arith::ConstantOp::create(
        b, loc, type,
        DenseElementsAttr::get(
            type, FloatAttr::get(cast<FloatType>(type.getElementType()), 0.0)));
  }

  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value neg(Value x) { return NegOp::create(b, loc, x); }
  Value exp(Value x) { return ExpOp::create(b, loc, x); }
  Value rsqrt(Value x) { return RsqrtOp::create(b, loc, x); }
  Value sigmoid(Value x) { return SigmoidOp::create(b, loc, x); }
  Value compare(ComparePredicate p, Value x, Value y) {
    return CompareOp::create(b, loc, p, x, y);
  }
  Value select(Value c, Value x, Value y) {
    return SelectOp::create(b, loc, c, x, y);
  }
  Value castTo(Value x, Type elementType) {
    RankedTensorType t = typeOf(x);
    if (t.getElementType() == elementType)
      return x;
    return CastOp::create(b, loc, t.clone(elementType), x);
  }
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    RankedTensorType t = typeOf(x);
    if (t.getShape() == shape)
      return x;
    return ReshapeOp::create(b, loc, t.clone(shape), x);
  }
  Value reduceSum(Value x, ArrayRef<int64_t> dims, bool keepDims) {
    if (dims.empty())
      return x;
    return ReduceSumOp::create(b, loc, x, b.getDenseI64ArrayAttr(dims),
                               keepDims);
  }
  Value reduceMean(Value x, ArrayRef<int64_t> dims, bool keepDims) {
    return ReduceMeanOp::create(b, loc, x, b.getDenseI64ArrayAttr(dims),
                                keepDims);
  }
  Value transposeLast2(Value x) {
    int64_t r = typeOf(x).getRank();
    SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, r));
    std::swap(perm[r - 1], perm[r - 2]);
    return TransposeOp::create(b, loc, x, b.getDenseI64ArrayAttr(perm));
  }
  Value matmul(Value x, Value y, bool tx, bool ty) {
    return MatMulOp::create(b, loc, x, y, tx, ty);
  }

  /// Sums `grad` (of a broadcast result's shape) back to `target`'s shape:
  /// over the dimensions the operand was repeated along, then reshaped.
  Value reduceToShape(Value grad, RankedTensorType target) {
    RankedTensorType g = typeOf(grad);
    if (g.getShape() == target.getShape())
      return grad;
    SmallVector<int64_t> dims = broadcastDims(target.getShape(), g.getShape());
    Value summed = reduceSum(grad, dims, /*keepDims=*/target.getRank() != 0);
    return reshape(summed, target.getShape());
  }

  /// Broadcasts `x` (a reduction result of `full` along `dims`, with or
  /// without kept dimensions) back to `full`'s shape.
  Value broadcastBack(Value x, RankedTensorType full, ArrayRef<int64_t> dims) {
    Value kept = reshape(x, reducedShape(full.getShape(), dims, true));
    if (typeOf(kept).getShape() == full.getShape())
      return kept;
    SmallVector<int64_t> identity =
        llvm::to_vector(llvm::seq<int64_t>(0, full.getRank()));
    return BroadcastOp::create(b, loc, full.clone(typeOf(x).getElementType()),
                               kept, b.getDenseI64ArrayAttr(identity));
  }

  OpBuilder &b;
  Location loc;
};

bool isFloatTensor(Value v) {
  return isa<FloatType>(getElementTypeOrSelf(v.getType()));
}

/// Fills `operandGrads` with nulls for `op`'s operands.
void noGrads(Operation *op, SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(op->getNumOperands(), Value());
}

/// The usual case: one operand grad per operand, given in order; nulls for
/// operands that are not floating-point.
void setGrads(Operation *op, SmallVectorImpl<Value> &operandGrads,
              ArrayRef<Value> grads) {
  operandGrads.assign(grads.begin(), grads.end());
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    if (!isFloatTensor(v))
      operandGrads[i] = Value();
}

} // namespace

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

LogicalResult MatMulOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dc = resultGrads[0];
  if (!dc)
    return success();
  GradBuilder g(builder, getLoc());
  Value a = getLhs(), b = getRhs();
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  // Mixed precision: the gradient GEMMs run in the operands' type.
  dc = g.castTo(dc, getLhs().getType().getElementType());

  if (!isRhsBroadcast()) {
    operandGrads[0] =
        ta ? g.matmul(b, dc, tb, true) : g.matmul(dc, b, false, !tb);
    operandGrads[1] =
        tb ? g.matmul(dc, a, true, ta) : g.matmul(a, dc, !ta, false);
    return success();
  }
  // rhs is one matrix shared by every batch of lhs.
  Value x = g.matmul(dc, b, false, !tb); // dC op(B)^T = op(A)'s gradient
  operandGrads[0] = ta ? g.transposeLast2(x) : x;
  // Its gradient sums over the batches: flatten them into the rows.
  Value a2 = ta ? g.transposeLast2(a) : a;
  RankedTensorType at = GradBuilder::typeOf(a2), ct = GradBuilder::typeOf(dc);
  int64_t k = at.getShape().back(), n = ct.getShape().back();
  int64_t rows = numElements(at.getShape()) / k;
  Value aFlat = g.reshape(a2, {rows, k});
  Value cFlat = g.reshape(dc, {rows, n});
  operandGrads[1] = tb ? g.matmul(cFlat, aFlat, true, false)
                       : g.matmul(aFlat, cFlat, true, false);
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise binary ops
//===----------------------------------------------------------------------===//

/// Shared shape of the binary VJPs: per-operand full-shape gradients reduced
/// back to the operands' shapes.
static LogicalResult binaryVJP(Operation *op, GradBuilder &g, Value lhsFull,
                               Value rhsFull,
                               SmallVectorImpl<Value> &operandGrads) {
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  setGrads(
      op, operandGrads,
      {lhsFull ? g.reduceToShape(lhsFull, GradBuilder::typeOf(lhs)) : Value(),
       rhsFull ? g.reduceToShape(rhsFull, GradBuilder::typeOf(rhs)) : Value()});
  return success();
}

LogicalResult AddOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dy = resultGrads[0];
  if (!dy || !isFloatTensor(getResult()))
    return success();
  GradBuilder g(builder, getLoc());
  return binaryVJP(*this, g, dy, dy, operandGrads);
}

LogicalResult SubOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dy = resultGrads[0];
  if (!dy || !isFloatTensor(getResult()))
    return success();
  GradBuilder g(builder, getLoc());
  return binaryVJP(*this, g, dy, g.neg(dy), operandGrads);
}

LogicalResult MulOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dy = resultGrads[0];
  if (!dy || !isFloatTensor(getResult()))
    return success();
  GradBuilder g(builder, getLoc());
  return binaryVJP(*this, g, g.mul(dy, getRhs()), g.mul(dy, getLhs()),
                   operandGrads);
}

LogicalResult DivOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dy = resultGrads[0];
  if (!dy || !isFloatTensor(getResult()))
    return success();
  GradBuilder g(builder, getLoc());
  Value dl = g.div(dy, getRhs());
  // d(l/r)/dr = -l/r^2 = -y/r.
  Value dr = g.neg(g.mul(dl, getResult()));
  return binaryVJP(*this, g, dl, dr, operandGrads);
}

/// max/min: the cotangent flows to the winning operand and is split evenly
/// on ties, as torch.maximum/minimum.
static LogicalResult extremumVJP(Operation *op, OpBuilder &builder, Value dy,
                                 ComparePredicate wins,
                                 SmallVectorImpl<Value> &operandGrads) {
  noGrads(op, operandGrads);
  if (!dy || !isFloatTensor(op->getResult(0)))
    return success();
  GradBuilder g(builder, op->getLoc());
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  Value zero = g.scalarLike(dy, 0.0);
  Value half = g.mul(dy, g.scalarLike(dy, 0.5));
  Value tie = g.compare(ComparePredicate::eq, lhs, rhs);
  ComparePredicate loses = wins == ComparePredicate::gt ? ComparePredicate::lt
                                                        : ComparePredicate::gt;
  Value dl = g.select(g.compare(wins, lhs, rhs), dy, g.select(tie, half, zero));
  Value dr =
      g.select(g.compare(loses, lhs, rhs), dy, g.select(tie, half, zero));
  return binaryVJP(op, g, dl, dr, operandGrads);
}

LogicalResult MaximumOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  return extremumVJP(*this, builder, resultGrads[0], ComparePredicate::gt,
                     operandGrads);
}

LogicalResult MinimumOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  return extremumVJP(*this, builder, resultGrads[0], ComparePredicate::lt,
                     operandGrads);
}

LogicalResult SelectOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dy = resultGrads[0];
  if (!dy || !isFloatTensor(getResult()))
    return success();
  GradBuilder g(builder, getLoc());
  Value zero = g.scalarLike(dy, 0.0);
  operandGrads[1] =
      g.reduceToShape(g.select(getCond(), dy, zero), getOnTrue().getType());
  operandGrads[2] =
      g.reduceToShape(g.select(getCond(), zero, dy), getOnFalse().getType());
  return success();
}

LogicalResult BroadcastOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dy = resultGrads[0];
  if (!dy || !isFloatTensor(getResult()))
    return success();
  GradBuilder g(builder, getLoc());
  ArrayRef<int64_t> in = getInput().getType().getShape();
  ArrayRef<int64_t> out = getResult().getType().getShape();
  SmallVector<int64_t> summed;
  for (int64_t d = 0, e = out.size(); d < e; ++d) {
    const auto *it = llvm::find(getDims(), d);
    bool isNew = it == getDims().end();
    bool repeated = !isNew && in[it - getDims().begin()] == 1 && out[d] != 1;
    if (isNew || repeated)
      summed.push_back(d);
  }
  Value r = g.reduceSum(dy, summed, /*keepDims=*/false);
  operandGrads[0] = g.reshape(r, in);
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise unary ops
//===----------------------------------------------------------------------===//

/// Builds `dx` for a unary op from `dy`, `x` and `y`.
template <typename OpTy, typename Fn>
static LogicalResult unaryVJP(OpTy op, OpBuilder &builder,
                              ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads, Fn rule) {
  noGrads(op, operandGrads);
  Value dy = resultGrads[0];
  if (!dy)
    return success();
  GradBuilder g(builder, op.getLoc());
  operandGrads[0] = rule(g, dy, op.getInput(), op.getResult());
  return success();
}

LogicalResult ReluOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  return unaryVJP(*this, builder, resultGrads, operandGrads,
                  [](GradBuilder &g, Value dy, Value x, Value) {
                    Value zero = g.scalarLike(x, 0.0);
                    return g.select(g.compare(ComparePredicate::gt, x, zero),
                                    dy, zero);
                  });
}

LogicalResult SiluOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  return unaryVJP(*this, builder, resultGrads, operandGrads,
                  [](GradBuilder &g, Value dy, Value x, Value) {
                    Value s = g.sigmoid(x);
                    Value one = g.scalarLike(x, 1.0);
                    Value inner = g.add(one, g.mul(x, g.sub(one, s)));
                    return g.mul(dy, g.mul(s, inner));
                  });
}

LogicalResult SigmoidOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  return unaryVJP(*this, builder, resultGrads, operandGrads,
                  [](GradBuilder &g, Value dy, Value, Value y) {
                    Value one = g.scalarLike(y, 1.0);
                    return g.mul(dy, g.mul(y, g.sub(one, y)));
                  });
}

LogicalResult TanhOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  return unaryVJP(*this, builder, resultGrads, operandGrads,
                  [](GradBuilder &g, Value dy, Value, Value y) {
                    Value one = g.scalarLike(y, 1.0);
                    return g.mul(dy, g.sub(one, g.mul(y, y)));
                  });
}

LogicalResult ExpOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  return unaryVJP(
      *this, builder, resultGrads, operandGrads,
      [](GradBuilder &g, Value dy, Value, Value y) { return g.mul(dy, y); });
}

LogicalResult LogOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  return unaryVJP(
      *this, builder, resultGrads, operandGrads,
      [](GradBuilder &g, Value dy, Value x, Value) { return g.div(dy, x); });
}

LogicalResult SqrtOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  return unaryVJP(*this, builder, resultGrads, operandGrads,
                  [](GradBuilder &g, Value dy, Value, Value y) {
                    return g.div(g.mul(dy, g.scalarLike(y, 0.5)), y);
                  });
}

LogicalResult RsqrtOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  return unaryVJP(*this, builder, resultGrads, operandGrads,
                  [](GradBuilder &g, Value dy, Value, Value y) {
                    Value y3 = g.mul(y, g.mul(y, y));
                    return g.mul(g.mul(dy, g.scalarLike(y, -0.5)), y3);
                  });
}

LogicalResult NegOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  return unaryVJP(
      *this, builder, resultGrads, operandGrads,
      [](GradBuilder &g, Value dy, Value, Value) { return g.neg(dy); });
}

LogicalResult RoundOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  // Piecewise constant: no gradient (an operand that only reaches the loss
  // through ds.round gets zeros).
  noGrads(*this, operandGrads);
  return success();
}

bool StopGradientOp::isDifferentiableOperand(unsigned) { return false; }

LogicalResult StopGradientOp::buildVJP(OpBuilder &builder,
                                       ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  return success();
}

LogicalResult AbsOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  return unaryVJP(
      *this, builder, resultGrads, operandGrads,
      [](GradBuilder &g, Value dy, Value x, Value) {
        Value zero = g.scalarLike(x, 0.0);
        Value neg =
            g.select(g.compare(ComparePredicate::lt, x, zero), g.neg(dy), zero);
        return g.select(g.compare(ComparePredicate::gt, x, zero), dy, neg);
      });
}

LogicalResult GeluOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  if (Value dy = resultGrads[0])
    operandGrads[0] =
        GeluGradOp::create(builder, getLoc(), getInput(), dy, getApproximate());
  return success();
}

LogicalResult CastOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dy = resultGrads[0];
  if (!dy || !isFloatTensor(getInput()) || !isFloatTensor(getResult()))
    return success();
  GradBuilder g(builder, getLoc());
  operandGrads[0] = g.castTo(dy, getInput().getType().getElementType());
  return success();
}

LogicalResult CausalMaskOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  if (Value dy = resultGrads[0])
    operandGrads[0] = CausalMaskOp::create(builder, getLoc(), dy,
                                           builder.getF64FloatAttr(0.0));
  return success();
}

LogicalResult DropoutOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  // The same generator state gives the same mask: dx = dropout(dy).
  if (Value dy = resultGrads[0])
    operandGrads[0] =
        DropoutOp::create(builder, getLoc(), dy, getRng(), getP()).getResult();
  return success();
}

//===----------------------------------------------------------------------===//
// Softmax and normalisations
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dy = resultGrads[0];
  if (!dy)
    return success();
  GradBuilder g(builder, getLoc());
  Value y = getResult();
  // Above a causal mask's diagonal y is 0, and so is y * dy for a finite
  // dy: the cotangent there is masked rather than read, as flash attention
  // never computes it (the GPU's kernels then skip those loads). The
  // product in the sum is masked after it is formed, which gives the same
  // bits (y * dy below the diagonal, +0 above it) and reads neither y nor
  // dy above the diagonal: then y's readers all stop at the diagonal,
  // which lets its kernel stop storing there (UnreadRowTails.h).
  auto type = cast<RankedTensorType>(dy.getType());
  auto mask = [&](Value v) -> Value {
    return CausalMaskOp::create(builder, getLoc(), v,
                                builder.getF64FloatAttr(0.0));
  };
  bool causal = getAxis() == type.getRank() - 1 && isCausallyMasked(getInput());
  Value product = g.mul(dy, y);
  if (causal) {
    product = mask(product);
    dy = mask(dy);
  }
  Value s = g.reduceSum(product, {static_cast<int64_t>(getAxis())},
                        /*keepDims=*/true);
  operandGrads[0] = g.mul(y, g.sub(dy, s));
  return success();
}

LogicalResult LogSoftmaxOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dy = resultGrads[0];
  if (!dy)
    return success();
  GradBuilder g(builder, getLoc());
  Value s =
      g.reduceSum(dy, {static_cast<int64_t>(getAxis())}, /*keepDims=*/true);
  operandGrads[0] = g.sub(dy, g.mul(g.exp(getResult()), s));
  return success();
}

/// The leading (batch) and trailing (normalised) dimensions of a layer or
/// RMS norm, and the weight reshaped to broadcast against the input.
struct NormDims {
  SmallVector<int64_t> leading, trailing;
  Value weight;
};

static NormDims normDims(GradBuilder &g, Value input, Value weight) {
  NormDims n;
  int64_t rank = GradBuilder::typeOf(input).getRank();
  ArrayRef<int64_t> w = GradBuilder::typeOf(weight).getShape();
  int64_t lead = rank - w.size();
  for (int64_t d = 0; d < rank; ++d)
    (d < lead ? n.leading : n.trailing).push_back(d);
  SmallVector<int64_t> shape(lead, 1);
  shape.append(w.begin(), w.end());
  n.weight = g.reshape(weight, shape);
  return n;
}

LogicalResult LayerNormOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dy = resultGrads[0];
  if (!dy)
    return success();
  GradBuilder g(builder, getLoc());
  Value x = getInput();
  NormDims n = normDims(g, x, getWeight());
  // Recompute the statistics (cheaper than keeping them alive).
  Value mean = g.reduceMean(x, n.trailing, true);
  Value xc = g.sub(x, mean);
  Value var = g.reduceMean(g.mul(xc, xc), n.trailing, true);
  Value eps = g.scalarLike(x, getEps().convertToDouble());
  Value rstd = g.rsqrt(g.add(var, eps));
  Value xhat = g.mul(xc, rstd);
  Value gw = g.mul(dy, n.weight);
  Value meanG = g.reduceMean(gw, n.trailing, true);
  Value meanGX = g.reduceMean(g.mul(gw, xhat), n.trailing, true);
  operandGrads[0] = g.mul(rstd, g.sub(g.sub(gw, meanG), g.mul(xhat, meanGX)));
  RankedTensorType wt = getWeight().getType();
  operandGrads[1] =
      g.reshape(g.reduceSum(g.mul(dy, xhat), n.leading, false), wt.getShape());
  operandGrads[2] = g.reshape(g.reduceSum(dy, n.leading, false), wt.getShape());
  return success();
}

LogicalResult RmsNormOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dy = resultGrads[0];
  if (!dy)
    return success();
  GradBuilder g(builder, getLoc());
  Value x = getInput();
  NormDims n = normDims(g, x, getWeight());
  Value ms = g.reduceMean(g.mul(x, x), n.trailing, true);
  Value r = g.rsqrt(g.add(ms, g.scalarLike(x, getEps().convertToDouble())));
  Value gw = g.mul(dy, n.weight);
  Value meanGX = g.reduceMean(g.mul(gw, x), n.trailing, true);
  Value corr = g.mul(x, g.mul(g.mul(r, r), meanGX));
  operandGrads[0] = g.mul(r, g.sub(gw, corr));
  operandGrads[1] =
      g.reshape(g.reduceSum(g.mul(dy, g.mul(x, r)), n.leading, false),
                getWeight().getType().getShape());
  return success();
}

LogicalResult BatchNormOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dy = resultGrads[0];
  if (!dy)
    return success();
  GradBuilder g(builder, getLoc());
  Value x = getInput();
  int64_t rank = getInput().getType().getRank();
  int64_t c = getInput().getType().getDimSize(1);
  SmallVector<int64_t> dims = {0};
  for (int64_t d = 2; d < rank; ++d)
    dims.push_back(d);
  SmallVector<int64_t> chanShape(rank, 1);
  chanShape[1] = c;
  Value w = g.reshape(getWeight(), chanShape);
  Value mean = g.reduceMean(x, dims, true);
  Value xc = g.sub(x, mean);
  Value var = g.reduceMean(g.mul(xc, xc), dims, true);
  Value rstd = g.rsqrt(g.add(var, g.scalarLike(x, getEps().convertToDouble())));
  Value xhat = g.mul(xc, rstd);
  Value meanDy = g.reduceMean(dy, dims, true);
  Value meanDyX = g.reduceMean(g.mul(dy, xhat), dims, true);
  Value inner = g.sub(g.sub(dy, meanDy), g.mul(xhat, meanDyX));
  operandGrads[0] = g.mul(g.mul(w, rstd), inner);
  operandGrads[1] = g.reduceSum(g.mul(dy, xhat), dims, false);
  operandGrads[2] = g.reduceSum(dy, dims, false);
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

LogicalResult ReduceSumOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  if (Value dy = resultGrads[0]) {
    GradBuilder g(builder, getLoc());
    operandGrads[0] = g.broadcastBack(dy, getInput().getType(), getDims());
  }
  return success();
}

LogicalResult ReduceMeanOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dy = resultGrads[0];
  if (!dy)
    return success();
  GradBuilder g(builder, getLoc());
  ArrayRef<int64_t> shape = getInput().getType().getShape();
  int64_t n = 1;
  for (int64_t d : getDims())
    n *= shape[d];
  Value scaled = g.div(dy, g.scalarLike(dy, static_cast<double>(n)));
  operandGrads[0] = g.broadcastBack(scaled, getInput().getType(), getDims());
  return success();
}

LogicalResult ReduceMaxOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dy = resultGrads[0];
  if (!dy)
    return success();
  GradBuilder g(builder, getLoc());
  RankedTensorType in = getInput().getType();
  Value maxFull = g.broadcastBack(getResult(), in, getDims());
  Value isMax = g.compare(ComparePredicate::eq, getInput(), maxFull);
  Value ones = g.select(isMax, g.scalarLike(dy, 1.0), g.scalarLike(dy, 0.0));
  Value count = g.reduceSum(ones, getDims(), /*keepDims=*/true);
  Value share = g.div(g.broadcastBack(dy, in, getDims()), count);
  operandGrads[0] = g.mul(ones, share);
  return success();
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dy = resultGrads[0];
  if (!dy || !isFloatTensor(getResult()))
    return success();
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  operandGrads[0] = TransposeOp::create(builder, getLoc(), dy,
                                        builder.getDenseI64ArrayAttr(inverse));
  return success();
}

LogicalResult ReshapeOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dy = resultGrads[0];
  if (!dy || !isFloatTensor(getResult()))
    return success();
  GradBuilder g(builder, getLoc());
  operandGrads[0] = g.reshape(dy, getInput().getType().getShape());
  return success();
}

LogicalResult SliceOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dy = resultGrads[0];
  if (!dy || !isFloatTensor(getResult()))
    return success();
  GradBuilder g(builder, getLoc());
  operandGrads[0] = InsertSliceOp::create(builder, getLoc(), dy,
                                          g.zeros(getInput().getType()),
                                          getOffsetsAttr(), getStridesAttr());
  return success();
}

LogicalResult InsertSliceOp::buildVJP(OpBuilder &builder,
                                      ValueRange resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dy = resultGrads[0];
  if (!dy || !isFloatTensor(getResult()))
    return success();
  GradBuilder g(builder, getLoc());
  operandGrads[0] = SliceOp::create(builder, getLoc(), getSource().getType(),
                                    dy, getOffsetsAttr(), getStridesAttr());
  operandGrads[1] =
      InsertSliceOp::create(builder, getLoc(), g.zeros(getSource().getType()),
                            dy, getOffsetsAttr(), getStridesAttr());
  return success();
}

LogicalResult ConcatOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dy = resultGrads[0];
  if (!dy || !isFloatTensor(getResult()))
    return success();
  int64_t axis = getAxis(), offset = 0;
  int64_t rank = getResult().getType().getRank();
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    auto type = cast<RankedTensorType>(input.getType());
    SmallVector<int64_t> offsets(rank, 0);
    offsets[axis] = offset;
    operandGrads[i] = SliceOp::create(builder, getLoc(), type, dy,
                                      builder.getDenseI64ArrayAttr(offsets),
                                      DenseI64ArrayAttr());
    offset += type.getDimSize(axis);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Embedding, convolution, pooling, losses
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  if (Value dy = resultGrads[0])
    operandGrads[0] = EmbeddingGradOp::create(
        builder, getLoc(), getTable().getType(), dy, getIndices());
  return success();
}

LogicalResult Conv2DOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dy = resultGrads[0];
  if (!dy)
    return success();
  Location loc = getLoc();
  operandGrads[0] = Conv2DGradInputOp::create(
      builder, loc, getInput().getType(), dy, getWeight(), getStridesAttr(),
      getPaddingAttr(), getDilationAttr(), getGroupsAttr());
  operandGrads[1] = Conv2DGradWeightOp::create(
      builder, loc, getWeight().getType(), dy, getInput(), getStridesAttr(),
      getPaddingAttr(), getDilationAttr(), getGroupsAttr());
  if (getBias()) {
    GradBuilder g(builder, loc);
    operandGrads[2] = g.reduceSum(dy, {0, 2, 3}, false);
  }
  return success();
}

LogicalResult MaxPool2DOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  if (Value dy = resultGrads[0])
    operandGrads[0] = MaxPool2DGradOp::create(builder, getLoc(), getInput(), dy,
                                              getKernelAttr(), getStridesAttr(),
                                              getPaddingAttr());
  return success();
}

LogicalResult AvgPool2DOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  if (Value dy = resultGrads[0])
    operandGrads[0] = AvgPool2DGradOp::create(builder, getLoc(), getInput(), dy,
                                              getKernelAttr(), getStridesAttr(),
                                              getPaddingAttr());
  return success();
}

LogicalResult CrossEntropyOp::buildVJP(OpBuilder &builder,
                                       ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  if (Value dy = resultGrads[0])
    operandGrads[0] = CrossEntropyGradOp::create(builder, getLoc(), getLogits(),
                                                 getLabels(), dy);
  return success();
}

LogicalResult MseLossOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dy = resultGrads[0];
  if (!dy)
    return success();
  GradBuilder g(builder, getLoc());
  double n = static_cast<double>(getInput().getType().getNumElements());
  Value diff = g.sub(getInput(), getTarget());
  Value scale = g.mul(dy, g.scalarLike(dy, 2.0 / n));
  Value d = g.mul(diff, scale);
  operandGrads[0] = d;
  operandGrads[1] = g.neg(d);
  return success();
}

//===----------------------------------------------------------------------===//
// Quantization
//===----------------------------------------------------------------------===//

bool FakeQuantOp::isDifferentiableOperand(unsigned index) {
  // The input always; scale and zero point only when learned (LSQ);
  // qmin / qmax never.
  return index == 0 || (getLearned() && (index == 1 || index == 2));
}

/// Sums a per-element gradient (of the input's shape) into the shape of the
/// op's scale: over everything (per tensor), over all but the channel
/// axis, or over each group (the axis split into groups x group_size).
static Value sumIntoScale(GradBuilder &g, FakeQuantOp op, Value perElement) {
  RankedTensorType input = op.getInput().getType();
  int64_t rank = input.getRank();
  std::optional<int64_t> axis = op.getAxis();
  if (!axis)
    return g.reduceSum(perElement, llvm::to_vector(llvm::seq<int64_t>(0, rank)),
                       /*keepDims=*/false);
  std::optional<int64_t> groupSize = op.getGroupSize();
  if (!groupSize) {
    SmallVector<int64_t> dims;
    for (int64_t d = 0; d < rank; ++d)
      if (d != *axis)
        dims.push_back(d);
    return g.reduceSum(perElement, dims, /*keepDims=*/false);
  }
  SmallVector<int64_t> split(input.getShape());
  split[*axis] /= *groupSize;
  split.insert(split.begin() + *axis + 1, *groupSize);
  return g.reduceSum(g.reshape(perElement, split), {*axis + 1},
                     /*keepDims=*/false);
}

LogicalResult FakeQuantOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dy = resultGrads[0];
  if (!dy)
    return success();
  GradBuilder g(builder, getLoc());
  auto perElement = [&](FakeQuantGradOf of) -> Value {
    return FakeQuantGradOp::create(
        builder, getLoc(), getInput().getType(), getInput(), getScale(),
        getZeroPoint(), getQmin(), getQmax(), dy,
        FakeQuantGradOfAttr::get(getContext(), of), getAxisAttr(),
        getGroupSizeAttr(), getFormatAttr(), getLearnedAttr());
  };
  operandGrads[0] = perElement(FakeQuantGradOf::input);
  if (!getLearned())
    return success();
  Type paramType = getScale().getType().getElementType();
  // LSQ's gradient scale, 1 / sqrt(numel * qmax), with the bit-width's
  // qmax of this step.
  Value factor;
  if (getGradScaling())
    factor = g.rsqrt(g.mul(
        g.scalar(paramType, getInput().getType().getNumElements()), getQmax()));
  for (auto [index, of] : {std::pair(1u, FakeQuantGradOf::scale),
                           std::pair(2u, FakeQuantGradOf::zero_point)}) {
    Value summed = sumIntoScale(g, *this, g.castTo(perElement(of), paramType));
    operandGrads[index] = factor ? g.mul(summed, factor) : summed;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Block sparsity
//===----------------------------------------------------------------------===//

bool BlockSparseMatMulOp::isDifferentiableOperand(unsigned index) {
  return index < 2;
}

LogicalResult
BlockSparseMatMulOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  noGrads(*this, operandGrads);
  Value dy = resultGrads[0];
  if (!dy)
    return success();
  Location loc = getLoc();
  bool t = getTransposeWeight();
  int64_t block = getBlock();
  // The input's gradient: the same sparse weight, the other orientation.
  operandGrads[0] = BlockSparseMatMulOp::create(builder, loc, dy, getWeight(),
                                                getMask(), block, !t);
  // The weight's: sampled on the mask. With W = [R, C], a transposed
  // weight has dW = dY^T X ([R] from dY), an untransposed one X^T dY.
  Value lhs = t ? dy : getInput(), rhs = t ? getInput() : dy;
  operandGrads[1] = BlockSampledMatMulOp::create(
      builder, loc, getWeight().getType(), lhs, rhs, getMask(),
      builder.getI64IntegerAttr(block));
  return success();
}
