//===- ChannelPrecision.cpp - Channel-level precision split ---------------===//
//
// Implements ChannelPrecision.h. Every tensor indexed by the output channel
// (the weight's channel, the output, the output's cotangent) is selected
// per channel between its high and its low rounding; the layer's kernels
// (one GEMM or convolution each) then run in FP32 on the mixed operands.
//
//===----------------------------------------------------------------------===//

#include "ChannelPrecision.h"

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"

#include <limits>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

/// The result index of the `ds.grad` of argument `arg`, if any.
static std::optional<unsigned> gradResultOf(FunctionOpInterface func,
                                            BlockArgument arg) {
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    if (auto g =
            func.getResultAttrOfType<IntegerAttr>(i, DSDialect::kGradAttrName);
        g && g.getInt() == arg.getArgNumber())
      return i;
  return std::nullopt;
}

std::string mlir::ds::detail::channelCandidate(Operation *op,
                                               FunctionOpInterface func,
                                               ChannelLayer &layer) {
  Value input, weight;
  int64_t weightAxis = 0, outAxis = 0, weightRank = 0;
  if (auto mm = dyn_cast<MatMulOp>(op)) {
    input = mm.getLhs();
    weight = mm.getRhs();
    weightRank = 2;
    weightAxis = mm.getTransposeRhs() ? 0 : 1;
    outAxis = mm.getType().getRank() - 1;
  } else if (auto conv = dyn_cast<Conv2DOp>(op)) {
    input = conv.getInput();
    weight = conv.getWeight();
    weightRank = 4; // OIHW
    outAxis = 1;    // NCHW
  } else {
    return "only matmuls and 2-D convolutions are split by channel";
  }
  auto w = dyn_cast<BlockArgument>(weight);
  if (!w || !func.getArgAttr(w.getArgNumber(), DSDialect::kParamAttrName))
    return "its weight operand is not a parameter";
  if (tensorType(w).getRank() != weightRank)
    return "its weight has an unexpected rank";
  std::optional<unsigned> grad = gradResultOf(func, w);
  if (!grad)
    return "its weight has no gradient";
  layer.input = input;
  layer.weight = w;
  layer.weightAxis = weightAxis;
  layer.outAxis = outAxis;
  layer.gradResult = *grad;
  layer.outType = cast<RankedTensorType>(op->getResult(0).getType());
  return "";
}

bool mlir::ds::detail::isChannelBackwardKernel(Operation *op) {
  return isa<MatMulOp, Conv2DGradInputOp, Conv2DGradWeightOp>(op);
}

/// The contraction dimension of operand `index` of a matmul (for block
/// scaling's 1 x B tiles); 1 (the channels) for convolution operands.
static int64_t contractionAxis(Operation *op, unsigned index) {
  auto mm = dyn_cast<MatMulOp>(op);
  if (!mm)
    return 1;
  int64_t rank = tensorType(op->getOperand(index)).getRank();
  if (index == 0)
    return mm.getTransposeLhs() ? rank - 2 : rank - 1;
  return mm.getTransposeRhs() ? rank - 1 : rank - 2;
}

FailureOr<Value> ChannelSplitter::selectByChannel(
    OpBuilder &b, Operation *op, Value x, ChannelLayer &layer, int64_t axis,
    Type low, FP8Scaling scaling, StringRef key, int64_t kAxis, bool weight) {
  Location loc = op->getLoc();
  // Without a narrow low type every channel already has at least the high
  // precision.
  if (!low || low.isF32())
    return x;
  FailureOr<Value> hi = m.roundTrip(b, loc, op, x, high(b), scaling,
                                    (key + ".high").str(), kAxis, weight);
  FailureOr<Value> lo =
      m.roundTrip(b, loc, op, x, low, scaling, key, kAxis, weight);
  if (failed(hi) || failed(lo))
    return failure();
  if (m.observe || *hi == *lo)
    return *hi;
  // The mask along `axis`: the f32 estimate reshaped, then compared.
  ArrayRef<int64_t> shape = tensorType(x).getShape();
  SmallVector<int64_t> dims(shape.size(), 1);
  dims[axis] = shape[axis];
  Value shaped = ReshapeOp::create(b, loc, tensorType(layer.state).clone(dims),
                                   layer.state);
  Value mask = CompareOp::create(b, loc, ComparePredicate::gt, shaped,
                                 m.f32(b, loc, settings.threshold));
  return SelectOp::create(b, loc, mask, *hi, *lo).getResult();
}

LogicalResult ChannelSplitter::splitForward(OpBuilder &b, Operation *op,
                                            ChannelLayer &layer,
                                            const PrecisionRule &rule,
                                            Type compute, Type storage,
                                            StringRef label) {
  b.setInsertionPoint(op);
  Location loc = op->getLoc();
  // The input as it is now: the ops before this one may have been rebuilt
  // or retyped since the analysis.
  layer.input = op->getOperand(0);
  int64_t channels = tensorType(layer.weight).getShape()[layer.weightAxis];
  auto vecType = RankedTensorType::get({channels}, b.getF32Type());
  // Starts at -1: the first observation replaces it (no warm-up bias).
  layer.state = m.addState(("channel.grad_var." + label).str(), vecType,
                           InitKind::constant, -1.0);
  layer.mask = CompareOp::create(b, loc, ComparePredicate::gt, layer.state,
                                 m.f32(b, loc, settings.threshold));
  FailureOr<Value> x =
      m.roundTrip(b, loc, op, layer.input, compute, rule.scaling,
                  (label + ".input").str(), contractionAxis(op, 0), false);
  FailureOr<Value> w = selectByChannel(
      b, op, layer.weight, layer, layer.weightAxis, compute, rule.scaling,
      (label + ".weight").str(), contractionAxis(op, 1), /*weight=*/true);
  if (failed(x) || failed(w))
    return failure();
  layer.inputEff = *x;
  layer.weightEff = *w;
  Operation *rebuilt = b.clone(*op);
  rebuilt->setOperand(0, *x);
  rebuilt->setOperand(1, *w);
  Value out = rebuilt->getResult(0);
  if (storage && !storage.isF32()) {
    FailureOr<Value> stored =
        selectByChannel(b, op, out, layer, layer.outAxis, storage, rule.scaling,
                        (label + ".output").str(), layer.outAxis, false);
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
  op->getResult(0).replaceAllUsesWith(out);
  op->erase();
  return success();
}

LogicalResult ChannelSplitter::splitBackward(OpBuilder &b, Operation *op,
                                             ChannelLayer &layer,
                                             const PrecisionRule &rule,
                                             Type compute, StringRef label,
                                             ArrayRef<bool> cotangent) {
  b.setInsertionPoint(op);
  DictionaryAttr tags = op->getDiscardableAttrDictionary();
  CreatedOps created;
  b.setListener(&created);
  int64_t channels = tensorType(layer.state).getShape()[0];
  bool block = rule.scaling == FP8Scaling::Block;
  auto operand = [&](unsigned i) -> FailureOr<Value> {
    Value v = op->getOperand(i);
    int64_t kAxis = contractionAxis(op, i);
    // The forward's operands as the forward read them (block-scaled ones
    // are re-tiled along this kernel's contraction), also through the
    // reshape a batched matmul's gradient applies.
    auto reshaped = v.getDefiningOp<ReshapeOp>();
    Value base = reshaped ? reshaped.getInput() : v;
    if (!block && (base == layer.input || base == layer.weight)) {
      Value eff = base == layer.input ? layer.inputEff : layer.weightEff;
      if (!reshaped)
        return eff;
      return ReshapeOp::create(b, op->getLoc(), reshaped.getType(), eff)
          .getResult();
    }
    if (v == layer.weight)
      return layer.weightEff;
    if (!cotangent[i])
      return m.roundTrip(b, op->getLoc(), op, v, compute, rule.scaling,
                         (label + ".operand" + Twine(i)).str(), kAxis, false);
    std::string key = (label + ".cotangent").str();
    // A cotangent of the output: its channels along the output's channel
    // dimension (convolutions), or along the last one (matmuls, also when
    // the batch dimensions are flattened).
    auto shape = tensorType(v).getShape();
    if (shape == layer.outType.getShape())
      return selectByChannel(b, op, v, layer, layer.outAxis, rule.grad,
                             rule.scaling, key, kAxis, false);
    if (isa<MatMulOp>(op) && !shape.empty() && shape.back() == channels)
      return selectByChannel(b, op, v, layer, shape.size() - 1, rule.grad,
                             rule.scaling, key, kAxis, false);
    return m.roundTrip(b, op->getLoc(), op, v, rule.grad, rule.scaling, key,
                       kAxis, false);
  };
  FailureOr<Value> lhs = operand(0), rhs = operand(1);
  if (failed(lhs) || failed(rhs)) {
    b.setListener(nullptr);
    return failure();
  }
  Operation *rebuilt = b.clone(*op);
  rebuilt->setOperand(0, *lhs);
  rebuilt->setOperand(1, *rhs);
  b.setListener(nullptr);
  // What the rebuild creates belongs to the backward: tag it alike.
  for (Operation *c : created.getOps())
    for (NamedAttribute tag : tags)
      if (!c->hasAttr(tag.getName()))
        c->setAttr(tag.getName(), tag.getValue());
  op->getResult(0).replaceAllUsesWith(rebuilt->getResult(0));
  op->erase();
  return success();
}

void ChannelSplitter::updateEstimate(OpBuilder &b, ChannelLayer &layer,
                                     Operation *terminator) {
  // Per output channel, the variance of the weight gradient over the
  // channel's fan-in, relative to the layer's mean (invariant under loss
  // scaling); v <- m v + (1 - m) r, the first observation taken as it is,
  // a non-finite step not recorded.
  b.setInsertionPoint(terminator);
  Location loc = layer.state.getLoc();
  Value g = terminator->getOperand(layer.gradResult);
  SmallVector<int64_t> fanIn;
  for (int64_t i = 0, e = tensorType(g).getRank(); i < e; ++i)
    if (i != layer.weightAxis)
      fanIn.push_back(i);
  auto dims = b.getDenseI64ArrayAttr(fanIn);
  Value mean = ReduceMeanOp::create(b, loc, g, dims, false);
  Value meanSq =
      ReduceMeanOp::create(b, loc, MulOp::create(b, loc, g, g), dims, false);
  Value var = MaximumOp::create(
      b, loc, SubOp::create(b, loc, meanSq, MulOp::create(b, loc, mean, mean)),
      m.f32(b, loc, 0.0));
  Value layerMean =
      ReduceMeanOp::create(b, loc, var, b.getDenseI64ArrayAttr({0}), false);
  Value positive = CompareOp::create(b, loc, ComparePredicate::gt, layerMean,
                                     m.f32(b, loc, 0.0));
  Value finite =
      CompareOp::create(b, loc, ComparePredicate::lt, layerMean,
                        m.f32(b, loc, std::numeric_limits<double>::infinity()));
  Value ok = SelectOp::create(b, loc, positive, finite, positive);
  Value ratio = DivOp::create(b, loc, var, layerMean);
  Value ema = AddOp::create(
      b, loc,
      MulOp::create(b, loc, layer.state, m.f32(b, loc, settings.momentum)),
      MulOp::create(b, loc, ratio, m.f32(b, loc, 1.0 - settings.momentum)));
  Value fresh = CompareOp::create(b, loc, ComparePredicate::lt, layer.state,
                                  m.f32(b, loc, 0.0));
  Value next = SelectOp::create(b, loc, fresh, ratio, ema);
  m.update(layer.state, SelectOp::create(b, loc, ok, next, layer.state));
}
