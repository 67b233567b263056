//===- PrecisionMaterializer.h - Casts, FP8 scaling, precision state -*- C++
//-*-===//
//
// The ops ds-assign-precision builds: rounding casts, FP8 quantisation with
// per-tensor (delayed, current) or block scales, and the state they keep
// (amax histories), added to the step's signature through StepEditor.
// Internal to lib/Transforms.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_TRANSFORMS_PRECISIONMATERIALIZER_H
#define DS_LIB_TRANSFORMS_PRECISIONMATERIALIZER_H

#include "StepUtils.h"

#include "ds/Analysis/StepQueries.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Transforms/PrecisionPolicy.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include <map>
#include <tuple>

namespace mlir::ds::detail {

inline RankedTensorType tensorType(Value v) {
  return dyn_cast<RankedTensorType>(v.getType());
}

/// Builds the scaling and cast ops, and collects the new state.
class Materializer {
public:
  /// With `observe`, nothing is rounded: the step keeps computing in f32
  /// but records the same statistics (amax histories, channel variances),
  /// so that a high-precision variant has the low one's signature and hands
  /// it calibrated state.
  Materializer(FunctionOpInterface func, const PrecisionPolicy &policy,
               bool observe)
      : observe(observe), editor(func), policy(policy) {}

  /// A rank-0 f32 constant.
  Value f32(OpBuilder &b, Location loc, double v);
  /// `x` cast to `elementType` (`x` itself when it has it, in observe mode,
  /// or for a null type).
  Value cast(OpBuilder &b, Location loc, Value x, Type elementType,
             bool saturate = false);
  Value reshape(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> shape);
  /// max |x| over `dims` (all when empty), kept as size-1 dims if `keep`.
  Value amax(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> dims = {},
             bool keep = false);
  /// `fmax / amax` where amax > 0 and finite, else 1 (so all-zero and
  /// poisoned tensors keep a usable scale).
  Value scaleFrom(OpBuilder &b, Location loc, Value amaxV, double fmax);

  /// A new state argument; its update is appended with `update`.
  Value addState(StringRef kind, RankedTensorType type,
                 InitKind init = InitKind::zeros, double value = 0.0) {
    return editor.addState(kind, "", type, init, value);
  }
  void update(Value state, Value next) { editor.addUpdate(state, next); }
  void metric(StringRef name, Value value) { editor.addMetric(name, value); }

  /// Per-tensor FP8 quantisation of f32 `x` to `t`: returns the FP8 tensor
  /// and its scale (rank-0 f32): x ~= cast(q) / scale. Delayed scaling
  /// keeps the amax history `fp8.amax_history.<key>` as state. In observe
  /// mode: `x` and a null scale, the history still recorded. A tensor is
  /// quantised once: a reshape of it, or another widening of the same
  /// narrow tensor (the backward's copy of a forward input), reads the
  /// same FP8 tensor and scale, reshaped, as Transformer Engine's
  /// weight-gradient GEMM reads the input its forward quantised.
  std::pair<Value, Value> quantize(OpBuilder &b, Location loc, Value x, Type t,
                                   FP8Scaling scaling, StringRef key);
  /// Block-scaled FP8 round trip of f32 `x` (DeepSeek-V3): per 1 x B tile
  /// along `axis`, or per B x B block over the last two dims (`weight`).
  /// Returns the dequantised f32 tensor.
  FailureOr<Value> blockRoundTrip(OpBuilder &b, Location loc, Operation *op,
                                  Value x, Type t, int64_t axis, bool weight);
  /// `x` (f32) as it reads after rounding to `t` (FP8 with its scaling);
  /// `x` itself for f32 or a null type.
  FailureOr<Value> roundTrip(OpBuilder &b, Location loc, Operation *op, Value x,
                             Type t, FP8Scaling scaling, StringRef key,
                             int64_t axis, bool weight);

  /// One matmul operand `x` of `op` in type `t`: a cast for non-FP8 types,
  /// a block round trip under block scaling, else per-tensor quantisation
  /// (state key `key`). Returns the operand and its scale (null when none).
  FailureOr<std::pair<Value, Value>>
  prepareOperand(OpBuilder &b, Operation *op, Value x, Type t,
                 FP8Scaling scaling, StringRef key, int64_t kAxis, bool weight);
  /// Rebuilds `mm` with operand types (`ta`, `tb`) and an f32 result (FP32
  /// accumulation); per-tensor FP8 scales are divided out after it. Operand
  /// keys are `<label>.<name>`, the name defaulting to "weight" for a
  /// parameter and "input" otherwise. Replaces and erases `mm`; returns the
  /// value that replaces its result.
  FailureOr<Value> rebuildMatmul(OpBuilder &b, MatMulOp mm, Type ta, Type tb,
                                 FP8Scaling scaling, StringRef label,
                                 StringRef nameA, StringRef nameB);

  /// Appends the new state's updates and metrics to the signature.
  void finish() { editor.finish(); }

  const bool observe;

private:
  StepEditor editor;
  const PrecisionPolicy &policy;
  /// Per-tensor quantisations made so far, by what they quantise
  /// (quantisationSource in the .cpp), target type and scaling.
  std::map<std::tuple<void *, const void *, const void *, int>,
           std::pair<Value, Value>>
      quantized;
};

} // namespace mlir::ds::detail

#endif // DS_LIB_TRANSFORMS_PRECISIONMATERIALIZER_H
