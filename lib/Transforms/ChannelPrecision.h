//===- ChannelPrecision.h - Channel-level precision split -----*- C++ -*-===//
//
// The channel level of ds-assign-precision: a layer (a matmul or a 2-D
// convolution whose weight is a parameter) keeps a running estimate of each
// output channel's gradient variance as state; channels above a threshold
// run in the high type. docs/Rationale.md explains how the split executes.
// Internal to lib/Transforms.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_TRANSFORMS_CHANNELPRECISION_H
#define DS_LIB_TRANSFORMS_CHANNELPRECISION_H

#include "PrecisionMaterializer.h"

#include "llvm/ADT/ArrayRef.h"

#include <string>

namespace mlir::ds::detail {

/// One layer under the channel level.
struct ChannelLayer {
  Value input, weight;     ///< the forward operands
  int64_t weightAxis = 0;  ///< the weight's output-channel dimension
  int64_t outAxis = 0;     ///< the result's channel dimension
  unsigned gradResult = 0; ///< the `ds.grad` result of the weight
  RankedTensorType outType;
  Value state, mask;         ///< the estimate [C] and `estimate > threshold`
  Value inputEff, weightEff; ///< the operands as the layer's kernels read them
};

/// Why `op` cannot run under the channel level ("" when it can); fills
/// `layer` when it can.
std::string channelCandidate(Operation *op, FunctionOpInterface func,
                             ChannelLayer &layer);

/// Whether `op` is one of the kernels a split layer's backward rebuilds
/// (gradient matmuls and convolution gradients).
bool isChannelBackwardKernel(Operation *op);

/// Builds the split: forward, backward kernels, the estimate's update.
class ChannelSplitter {
public:
  ChannelSplitter(Materializer &m, const ChannelSettings &settings)
      : m(m), settings(settings) {}

  /// Rebuilds the layer's forward op `op` under `rule`: the input in the
  /// rule's `compute` type (it is shared by all channels), each weight
  /// channel and output channel (when `storage` is narrow) in the high type
  /// where the channel is promoted and in the rule's type elsewhere. Adds
  /// the estimate state and the `channel.high.<label>` metric.
  LogicalResult splitForward(OpBuilder &b, Operation *op, ChannelLayer &layer,
                             const PrecisionRule &rule, Type compute,
                             Type storage, StringRef label);
  /// Rebuilds a backward kernel of the layer: the forward's operands as the
  /// forward read them, the output's cotangent per channel between the
  /// high type and the rule's `grad` type. `cotangent[i]`: whether operand
  /// `i` depends on the backward seed (SeedDependence).
  LogicalResult splitBackward(OpBuilder &b, Operation *op, ChannelLayer &layer,
                              const PrecisionRule &rule, Type compute,
                              StringRef label, ArrayRef<bool> cotangent);
  /// Appends the estimate's update, before `terminator` (whose operands are
  /// the step's results: the weight's gradient among them).
  void updateEstimate(OpBuilder &b, ChannelLayer &layer, Operation *terminator);

private:
  /// `x` rounded along `axis` per channel: the high type where promoted,
  /// `low` elsewhere.
  FailureOr<Value> selectByChannel(OpBuilder &b, Operation *op, Value x,
                                   ChannelLayer &layer, int64_t axis, Type low,
                                   FP8Scaling scaling, StringRef key,
                                   int64_t kAxis, bool weight);
  Type high(Builder &b) const {
    return settings.high ? settings.high : b.getF32Type();
  }

  Materializer &m;
  const ChannelSettings &settings;
};

} // namespace mlir::ds::detail

#endif // DS_LIB_TRANSFORMS_CHANNELPRECISION_H
