//===- FakeQuantSite.h - Observe and fake-quantize one value ----*- C++ -*-===//
//
// Private to lib/Transforms: the state, observer update, quantization
// parameters and ds.fake_quant of one quantized value, with torch.ao's
// arithmetic (MovingAverage[PerChannel]MinMaxObserver, MinMaxObserver,
// calculate_qparams, FakeQuantize's observe-then-quantize order).
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_TRANSFORMS_QUANT_FAKEQUANTSITE_H
#define DS_LIB_TRANSFORMS_QUANT_FAKEQUANTSITE_H

#include "../StepUtils.h"

#include "ds/Transforms/Passes.h"

#include <optional>

namespace mlir::ds::quant {

/// How one value is quantized.
struct QuantSpec {
  int64_t qmin = 0, qmax = 255;
  /// Symmetric around 0 (weights) or affine (activations).
  bool symmetric = false;
  /// The channel dimension of per-channel quantization, or with
  /// `groupSize` the dimension the groups run along.
  std::optional<int64_t> axis;
  /// Per group of this many elements along `axis` (0: per channel).
  int64_t groupSize = 0;
  /// Dynamic bit-width (weights): the grid follows the rank-0 f32 state
  /// `tier` (0: int4, 1: int8, 2: not quantized) instead of qmin/qmax.
  Value tier;
  QuantObserver observer = QuantObserver::MovingAverage;
  double averagingConstant = 0.01;
  /// Learned scales: their learning rate (0: the optimizer's).
  double scaleLr = 0.0;
};

/// When observers update and fake quantization applies, by `iteration`.
struct QuantSchedule {
  /// Observers update while iteration < this; 0: always.
  int64_t freezeObserversAt = 0;
  /// Fake quantization from this iteration on.
  int64_t fakeQuantFrom = 0;
  /// False: no observer runs; the state's parameters are used as they are.
  bool observe = true;
};

/// Adds the state `qat.<kind>.{min,max,scale,zero_point}` of the layer
/// whose weight is the parameter `param` to the step (kind: "weight" or
/// "input"), observes `x` and returns
/// its fake-quantized value (selected against `x` before
/// `schedule.fakeQuantFrom`). Builds at `b`'s insertion point, which must
/// follow `x`'s definition; `iteration` is the step's counter.
Value observeAndFakeQuantize(detail::StepEditor &ed, OpBuilder &b, Location loc,
                             Value x, StringRef kind, StringRef param,
                             const QuantSpec &spec,
                             const QuantSchedule &schedule, Value iteration);

/// As observeAndFakeQuantize, with LSQ / LSQ+ instead of an observer: the
/// scale (and an activation's zero point) is a parameter holding the
/// learned change from its start, LSQ's 2 mean|x| / sqrt(qmax) of the first
/// step (see ds-insert-fake-quant's `learn-scales`); the `qat.<kind>.scale`
/// and `zero_point` state follow the values in effect.
Value learnAndFakeQuantize(detail::StepEditor &ed, OpBuilder &b, Location loc,
                           Value x, StringRef kind, StringRef param,
                           const QuantSpec &spec, const QuantSchedule &schedule,
                           Value iteration);

/// The tiers of the dynamic per-layer bit-width: int4, int8, unquantized.
constexpr int64_t kTierBits[] = {4, 8, 32};

/// `x` fake-quantized to FP8 E4M3 with this step's scale, max|x| / 448
/// (floored at f32's epsilon): the seeds' "dynamic FP8", no state.
Value dynamicFP8(OpBuilder &b, Location loc, Value x);

} // namespace mlir::ds::quant

#endif // DS_LIB_TRANSFORMS_QUANT_FAKEQUANTSITE_H
