//===- FakeQuantSite.cpp - Observe and fake-quantize one value ------------===//
//
// Implements FakeQuantSite.h with ds ops on f32 tensors of the parameters'
// shape (rank 0 per tensor, [C] per channel), each step of torch.ao's
// formulas one op, so that the results are bit-identical to its f32
// arithmetic.
//
//===----------------------------------------------------------------------===//

#include "FakeQuantSite.h"

#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::quant;

namespace {

/// ds ops on f32 tensors, with rank-0 constants that broadcast.
class TensorMath {
public:
  TensorMath(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  /// A rank-0 f32 constant, or a splat of `type`.
  Value c(double v, RankedTensorType type = {}) {
    if (!type)
      type = RankedTensorType::get({}, b.getF32Type());
    return arith::ConstantOp::create(
        b, loc, type,
        DenseElementsAttr::get(type, b.getFloatAttr(b.getF32Type(), v)));
  }
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value max(Value x, Value y) { return MaximumOp::create(b, loc, x, y); }
  Value min(Value x, Value y) { return MinimumOp::create(b, loc, x, y); }
  Value neg(Value x) { return NegOp::create(b, loc, x); }
  Value abs(Value x) { return AbsOp::create(b, loc, x); }
  Value round(Value x) { return RoundOp::create(b, loc, x); }
  Value compare(ComparePredicate p, Value x, Value y) {
    return CompareOp::create(b, loc, p, x, y);
  }
  Value select(Value cond, Value x, Value y) {
    return SelectOp::create(b, loc, cond, x, y);
  }
  Value i64(int64_t v) {
    auto type = RankedTensorType::get({}, b.getI64Type());
    return arith::ConstantOp::create(
        b, loc, type, DenseElementsAttr::get(type, llvm::ArrayRef<int64_t>{v}));
  }
  Value reduceMax(Value x, ArrayRef<int64_t> dims) {
    return ReduceMaxOp::create(b, loc, x, b.getDenseI64ArrayAttr(dims),
                               /*keep_dims=*/false);
  }
  Value reduceMean(Value x, ArrayRef<int64_t> dims) {
    return ReduceMeanOp::create(b, loc, x, b.getDenseI64ArrayAttr(dims),
                                /*keep_dims=*/false);
  }
  Value stopGradient(Value x) { return StopGradientOp::create(b, loc, x); }

  OpBuilder &b;
  Location loc;
};

/// torch.ao's calculate_qparams: (scale, zero point) of the range [lo, hi].
std::pair<Value, Value> computeQParams(TensorMath &m, Value lo, Value hi,
                                       const QuantSpec &spec, Value qminV,
                                       Value qmaxV) {
  auto paramType = cast<RankedTensorType>(lo.getType());
  const double eps = std::numeric_limits<float>::epsilon();
  Value minNeg = m.min(lo, m.c(0.0)), maxPos = m.max(hi, m.c(0.0));
  double qmin = spec.qmin, qmax = spec.qmax;
  if (spec.observer == QuantObserver::MaxAbs) {
    // The seeds' per-step scale: max|x| / (2^(b-1) - 1).
    Value scale = m.div(m.max(m.neg(minNeg), maxPos), qmaxV);
    return {m.max(scale, m.c(eps)), m.c(0.0, paramType)};
  }
  if (spec.symmetric) {
    // (qmax - qmin) / 2, of the grid in effect (a constant unless the
    // bit-width is dynamic).
    Value half = spec.tier ? m.div(m.sub(qmaxV, qminV), m.c(2.0))
                           : m.c((qmax - qmin) / 2);
    Value scale = m.div(m.max(m.neg(minNeg), maxPos), half);
    // An unsigned symmetric grid is centred on its midpoint (quint8: 128).
    double zp = qmin >= 0 ? std::floor((qmin + qmax) / 2) : 0.0;
    return {m.max(scale, m.c(eps)), m.c(zp, paramType)};
  }
  Value scale = m.max(m.div(m.sub(maxPos, minNeg), m.c(qmax - qmin)), m.c(eps));
  Value zp = m.sub(m.c(qmin), m.round(m.div(minNeg, scale)));
  return {scale, m.min(m.max(zp, m.c(qmin)), m.c(qmax))};
}

/// The shape of a value's quantization parameters and how to reduce the
/// value onto it: `paramShape` (rank 0 per tensor, [C] per channel, the
/// value's shape with the axis divided per group), the dimensions to reduce
/// and, per group, the shape that splits the axis into groups x elements.
struct ParamLayout {
  SmallVector<int64_t> paramShape, dims, split;

  ParamLayout(RankedTensorType xType, const QuantSpec &spec) {
    if (spec.groupSize) {
      paramShape.assign(xType.getShape().begin(), xType.getShape().end());
      paramShape[*spec.axis] /= spec.groupSize;
      split = paramShape;
      split.insert(split.begin() + *spec.axis + 1, spec.groupSize);
      dims.push_back(*spec.axis + 1);
      return;
    }
    for (int64_t d = 0; d < xType.getRank(); ++d) {
      if (spec.axis && d == *spec.axis)
        paramShape.push_back(xType.getDimSize(d));
      else
        dims.push_back(d);
    }
  }

  /// `x` as f32, reshaped to `split` per group: what the reductions read.
  Value reducible(OpBuilder &b, Location loc, Value x) const {
    auto xType = cast<RankedTensorType>(x.getType());
    Type f32 = b.getF32Type();
    Value xf = x;
    if (xType.getElementType() != f32)
      xf = CastOp::create(b, loc, xType.clone(f32), x);
    if (!split.empty())
      xf = ReshapeOp::create(b, loc, RankedTensorType::get(split, f32), xf);
    return xf;
  }
};

/// "fc1" for "fc1.weight": the module a quantizer's parameters belong to.
std::string moduleOf(StringRef param) {
  param.consume_back(".weight");
  return param.str();
}

} // namespace

Value quant::learnAndFakeQuantize(detail::StepEditor &ed, OpBuilder &b,
                                  Location loc, Value x, StringRef kind,
                                  StringRef param, const QuantSpec &spec,
                                  const QuantSchedule &schedule,
                                  Value iteration) {
  TensorMath m(b, loc);
  auto xType = cast<RankedTensorType>(x.getType());
  ParamLayout layout(xType, spec);
  auto paramType = RankedTensorType::get(layout.paramShape, b.getF32Type());
  const double eps = std::numeric_limits<float>::epsilon();
  bool weight = kind == "weight";
  std::string prefix = ("qat." + kind + ".").str();
  std::string owner =
      moduleOf(param) + "." + kind.str() + kFakeQuantParamInfix.str();
  // The training step and a frozen evaluation copy add the same arguments,
  // in the same order (an evaluation step's arguments are a prefix of the
  // training step's).
  Value scaleState =
      ed.addState(prefix + "scale", param, paramType, InitKind::ones);
  Value zpState =
      ed.addState(prefix + "zero_point", param, paramType, InitKind::zeros);
  SmallVector<NamedAttribute> optim{
      b.getNamedAttr("weight_decay", b.getF64FloatAttr(0.0))};
  if (spec.scaleLr > 0)
    optim.push_back(b.getNamedAttr("lr", b.getF64FloatAttr(spec.scaleLr)));
  DictionaryAttr noDecay = b.getDictionaryAttr(optim);
  Value scaleParam =
      ed.addParam(owner + "scale", paramType, InitKind::zeros, 0.0, noDecay);
  Value scaleInit =
      ed.addState(prefix + "scale_init", param, paramType, InitKind::ones);
  Value zpParam, zpInit;
  if (!weight) {
    zpParam = ed.addParam(owner + "zero_point", paramType, InitKind::zeros, 0.0,
                          noDecay);
    zpInit = ed.addState(prefix + "zero_point_init", param, paramType,
                         InitKind::zeros);
  }
  Value qminV = m.c(spec.qmin), qmaxV = m.c(spec.qmax);
  IntegerAttr axis = spec.axis ? b.getI64IntegerAttr(*spec.axis) : nullptr;
  IntegerAttr group =
      spec.groupSize ? b.getI64IntegerAttr(spec.groupSize) : nullptr;
  auto scheduled = [&](Value fq) -> Value {
    if (schedule.fakeQuantFrom <= 0)
      return fq;
    return m.select(m.compare(ComparePredicate::ge, iteration,
                              m.i64(schedule.fakeQuantFrom)),
                    fq, x);
  };
  if (!schedule.observe) {
    // Evaluation: the values in effect at the last training step.
    for (Value state : {scaleState, zpState, scaleInit})
      ed.addUpdate(state, state);
    if (zpInit)
      ed.addUpdate(zpInit, zpInit);
    return scheduled(FakeQuantOp::create(b, loc, xType, x, scaleState, zpState,
                                         qminV, qmaxV, axis, group, nullptr,
                                         nullptr, nullptr));
  }

  // LSQ's start, from this step's values, on iteration 0 only; no gradient
  // reaches the values it is computed from.
  Value first = m.compare(ComparePredicate::eq, iteration, m.i64(0));
  Value xf = layout.reducible(b, loc, x);
  Value s0 = m.div(m.mul(m.c(2.0), m.reduceMean(m.abs(xf), layout.dims)),
                   m.c(std::sqrt(double(spec.qmax))));
  s0 = m.max(m.stopGradient(s0), m.c(eps));
  Value sInit = m.select(first, s0, scaleInit);
  Value scale = m.max(m.add(sInit, scaleParam), m.c(eps));
  ed.addUpdate(scaleInit, sInit);
  ed.addUpdate(scaleState, scale);
  Value zp = m.c(0.0, paramType);
  if (!weight) {
    // torch.ao's affine zero point of this step's range for that scale.
    Value curMin = m.neg(m.reduceMax(m.neg(xf), layout.dims));
    Value z0 =
        m.sub(m.c(spec.qmin), m.round(m.div(m.min(curMin, m.c(0.0)), s0)));
    z0 = m.stopGradient(m.min(m.max(z0, qminV), qmaxV));
    Value zInit = m.select(first, z0, zpInit);
    zp = m.add(zInit, zpParam);
    ed.addUpdate(zpInit, zInit);
  }
  // The zero point as the learned kernel uses it (rounded, clamped).
  ed.addUpdate(zpState, m.min(m.max(m.round(zp), qminV), qmaxV));
  return scheduled(FakeQuantOp::create(b, loc, xType, x, scale, zp, qminV,
                                       qmaxV, axis, group, nullptr,
                                       b.getUnitAttr(), b.getUnitAttr()));
}

Value quant::observeAndFakeQuantize(detail::StepEditor &ed, OpBuilder &b,
                                    Location loc, Value x, StringRef kind,
                                    StringRef param, const QuantSpec &spec,
                                    const QuantSchedule &schedule,
                                    Value iteration) {
  TensorMath m(b, loc);
  auto xType = cast<RankedTensorType>(x.getType());
  ParamLayout layout(xType, spec);
  ArrayRef<int64_t> dims = layout.dims;
  auto paramType = RankedTensorType::get(layout.paramShape, b.getF32Type());
  const double inf = std::numeric_limits<double>::infinity();
  std::string prefix = ("qat." + kind + ".").str();
  Value minState =
      ed.addState(prefix + "min", param, paramType, InitKind::constant, inf);
  Value maxState =
      ed.addState(prefix + "max", param, paramType, InitKind::constant, -inf);
  Value scaleState =
      ed.addState(prefix + "scale", param, paramType, InitKind::ones);
  Value zpState =
      ed.addState(prefix + "zero_point", param, paramType, InitKind::zeros);

  IntegerAttr axis = spec.axis ? b.getI64IntegerAttr(*spec.axis) : nullptr;
  // The grid: constant, or chosen by the tier on the device.
  Value qminV = m.c(spec.qmin), qmaxV = m.c(spec.qmax);
  if (spec.tier) {
    Value isInt4 = m.compare(ComparePredicate::eq, spec.tier, m.c(0.0));
    qminV = m.select(isInt4, m.c(-8.0), m.c(-128.0));
    qmaxV = m.select(isInt4, m.c(7.0), m.c(127.0));
  }
  auto fakeQuantize = [&](Value scale, Value zp) -> Value {
    Value fq = FakeQuantOp::create(
        b, loc, xType, x, scale, zp, qminV, qmaxV, axis,
        spec.groupSize ? b.getI64IntegerAttr(spec.groupSize) : nullptr,
        /*format=*/nullptr, /*learned=*/nullptr, /*grad_scaling=*/nullptr);
    // The top tier is the weight as it is.
    if (spec.tier)
      fq =
          m.select(m.compare(ComparePredicate::lt, spec.tier, m.c(1.5)), fq, x);
    if (schedule.fakeQuantFrom <= 0)
      return fq;
    return m.select(m.compare(ComparePredicate::ge, iteration,
                              m.i64(schedule.fakeQuantFrom)),
                    fq, x);
  };
  if (!schedule.observe) {
    for (Value state : {minState, maxState, scaleState, zpState})
      ed.addUpdate(state, state);
    // A dynamic grid may have moved since the scale was stored: derive the
    // parameters from the stored range for the grid in effect.
    if (spec.tier) {
      auto [scale, zp] =
          computeQParams(m, minState, maxState, spec, qminV, qmaxV);
      return fakeQuantize(scale, zp);
    }
    return fakeQuantize(scaleState, zpState);
  }

  // Observe (on the value as f32; the observer sees no gradient).
  Value xf = layout.reducible(b, loc, x);
  Value curMax = m.reduceMax(xf, dims);
  Value curMin = m.neg(m.reduceMax(m.neg(xf), dims));
  Value lo, hi;
  switch (spec.observer) {
  case QuantObserver::MovingAverage: {
    // The first observation is taken as it is (the state is still +inf).
    Value first = m.compare(ComparePredicate::eq, minState, m.c(inf));
    Value c = m.c(spec.averagingConstant);
    lo = m.select(first, curMin,
                  m.add(minState, m.mul(c, m.sub(curMin, minState))));
    hi = m.select(first, curMax,
                  m.add(maxState, m.mul(c, m.sub(curMax, maxState))));
    break;
  }
  case QuantObserver::MinMax:
    lo = m.min(minState, curMin);
    hi = m.max(maxState, curMax);
    break;
  case QuantObserver::Current:
  case QuantObserver::MaxAbs:
    lo = curMin;
    hi = curMax;
    break;
  }
  auto [scale, zp] = computeQParams(m, lo, hi, spec, qminV, qmaxV);
  if (schedule.freezeObserversAt > 0) {
    // After disable_observer: the range and the parameters stay.
    Value observe = m.compare(ComparePredicate::lt, iteration,
                              m.i64(schedule.freezeObserversAt));
    lo = m.select(observe, lo, minState);
    hi = m.select(observe, hi, maxState);
    if (spec.tier) {
      // The frozen range, on the grid in effect this step.
      std::tie(scale, zp) = computeQParams(m, lo, hi, spec, qminV, qmaxV);
    } else {
      scale = m.select(observe, scale, scaleState);
      zp = m.select(observe, zp, zpState);
    }
  }
  ed.addUpdate(minState, lo);
  ed.addUpdate(maxState, hi);
  ed.addUpdate(scaleState, scale);
  ed.addUpdate(zpState, zp);

  // Quantize with the parameters just computed.
  return fakeQuantize(scale, zp);
}

Value quant::dynamicFP8(OpBuilder &b, Location loc, Value x) {
  TensorMath m(b, loc);
  auto xType = cast<RankedTensorType>(x.getType());
  Type f32 = b.getF32Type();
  Value xf = x;
  if (xType.getElementType() != f32)
    xf = CastOp::create(b, loc, xType.clone(f32), x);
  SmallVector<int64_t> all =
      llvm::to_vector(llvm::seq<int64_t>(0, xType.getRank()));
  const double e4m3Max = 448.0;
  Value amax = m.reduceMax(m.abs(xf), all);
  Value scale = m.max(m.div(amax, m.c(e4m3Max)),
                      m.c(std::numeric_limits<float>::epsilon()));
  return FakeQuantOp::create(
      b, loc, xType, x, scale, m.c(0.0), m.c(-e4m3Max), m.c(e4m3Max),
      /*axis=*/nullptr, /*group_size=*/nullptr,
      TypeAttr::get(Float8E4M3FNType::get(b.getContext())),
      /*learned=*/nullptr, /*grad_scaling=*/nullptr);
}
