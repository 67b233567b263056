//===- PrecisionAssigner.h - ds-assign-precision on one step --*- C++ -*-===//
//
// ds-assign-precision's work on one step function, in the
// analyse-then-mutate style, one method per phase (see run()). The pass
// (AssignPrecision.cpp) adds the time level around it: a high-precision
// variant and the schedule. Internal to lib/Transforms.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_TRANSFORMS_PRECISIONASSIGNER_H
#define DS_LIB_TRANSFORMS_PRECISIONASSIGNER_H

#include "ChannelPrecision.h"
#include "PrecisionMaterializer.h"

#include "ds/Transforms/PrecisionPolicy.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

#include <deque>
#include <optional>
#include <string>

namespace mlir::ds::detail {

/// Applies a precision policy to one training step.
class PrecisionAssigner {
public:
  /// With `observe`, builds the high-precision variant: the same state and
  /// metrics, nothing rounded.
  PrecisionAssigner(FunctionOpInterface func, const PrecisionPolicy &policy,
                    bool observe);

  /// Runs the phases in order: check the step, decide, validate, select the
  /// channel-level layers, materialise the forward, then the backward,
  /// keep narrow copies for the backward, append the new state.
  LogicalResult run();

  /// Records the decisions under the step's name in the module's
  /// `ds.precision_map` (after run()).
  void recordMap();

private:
  /// What the pass decided for one forward op.
  struct Decision {
    Operation *op;
    const PrecisionRule *rule = nullptr;
    std::string role, label;
    /// Why no rule applies although one may match ("" : the rule decides).
    std::string overridden;
  };

  /// The step must have gradients and no parameter updates yet.
  LogicalResult checkStep();
  /// Roles (written as `ds.role`, inherited by backward ops through
  /// `ds.op_id`) and the first matching rule of every forward ds op.
  void decide();
  /// FP8 only for matmuls; f32 operands wherever a rule applies.
  LogicalResult validate();
  /// The channel level's layers: matched matmuls and convolutions whose rule
  /// narrows them and that the split can handle.
  LogicalResult selectChannelLayers();
  /// Casts, FP8 scaling and rebuilt GEMMs for the forward ops.
  LogicalResult materializeForward();
  /// The backward's gradient kernels of ops with a `grad` type (or under
  /// the channel level), and the channel estimates' updates.
  LogicalResult materializeBackward();
  /// One gradient kernel (not channel-split) of an op under `rule`: its
  /// cotangent operand in `grad`, the other in the forward's compute type,
  /// its result kept in `grad-storage`. `op` may be replaced.
  LogicalResult materializeGradKernel(Operation *op,
                                      std::array<bool, 2> cotangent,
                                      const PrecisionRule &rule, StringRef role,
                                      StringRef label);
  /// A linear layer's storage rounding comes after its bias, as
  /// torch.autocast's F.linear and Transformer Engine's Linear round once,
  /// in the GEMM's epilogue: when `product` (a matmul's f32 result) is only
  /// read by a ds.add without a rule of its own (not in `ruled`) that adds
  /// a vector along the last dimension, and `storage` is bf16 or f16, the
  /// bias is rounded to `storage` (autocast casts it with the weight) and
  /// the sum is returned, to be kept in `storage` instead of the product.
  /// Null otherwise, or in observe mode.
  Value roundedAfterBias(Value product, Type storage,
                         const llvm::DenseSet<Operation *> &ruled);
  /// The gradient of a linear layer's output kept after its bias
  /// (roundedAfterBias) in that type too, as autocast keeps a bf16 tensor's
  /// gradient in bf16: the bias gradient and the layer's gradient kernels
  /// read the cotangent rounded (an FP8 `grad` quantises the rounded
  /// value, as Transformer Engine quantises a bf16 gradient). Its other
  /// readers keep the f32 value.
  void keepLinearCotangentsNarrow();
  /// Makes every user of `result` (f32) read it as kept in `type`: rounded
  /// to it and widened back. Nothing for f32 or in observe mode.
  void keepResultIn(Value result, Type type);
  /// Repeats forward widening casts inside the backward, so that the narrow
  /// value is what lives from the forward to the backward.
  void keepNarrowCopiesForBackward();
  /// Appends one entry of the precision map.
  void addEntry(Operation *op, StringRef role, StringRef label, Type compute,
                Type storage, Type grad, const PrecisionRule *rule,
                bool channelSplit, StringRef overridden = "");

  FunctionOpInterface func;
  const PrecisionPolicy &policy;
  const bool observe;
  Block *body = nullptr;
  OpBuilder b;
  Type f32;

  SmallVector<Decision> decisions;
  /// The linear layers kept after their bias whose rule has a `grad` type:
  /// the matmul's and the add's `ds.op_id`, and the storage type.
  struct LinearLayer {
    int64_t matmul, biasAdd;
    Type storage;
  };
  SmallVector<LinearLayer> linears;
  /// The rules made for layers a quant rule keeps in a type (stable
  /// addresses: decisions point at them).
  std::deque<PrecisionRule> keptRules;
  /// The rule and label of each forward op by `ds.op_id`, for its backward
  /// kernels (the forward op itself may be rebuilt).
  llvm::DenseMap<int64_t, const PrecisionRule *> ruleById;
  llvm::DenseMap<int64_t, std::string> labelById;
  /// In program order: the estimates become state in this order, the same
  /// in both variants.
  llvm::MapVector<Operation *, ChannelLayer> channelLayers;
  llvm::DenseMap<int64_t, ChannelLayer *> channelById;

  std::optional<Materializer> m;
  std::optional<ChannelSplitter> splitter;
  SmallVector<Attribute> entries;
};

} // namespace mlir::ds::detail

#endif // DS_LIB_TRANSFORMS_PRECISIONASSIGNER_H
