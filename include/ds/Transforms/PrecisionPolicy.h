//===- PrecisionPolicy.h - Precision policies for ds-assign-precision -*- C++
//-*-===//
//
// A precision policy maps ops (by kind, role, parameter or module name) to
// a compute type, a storage type and a gradient type, with the FP8 scaling
// recipe; plus the channel- and time-level settings. Policies are YAML
// files (JSON is YAML too); every error points at the line of the file.
// See docs/PrecisionPolicy.md.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TRANSFORMS_PRECISIONPOLICY_H
#define DS_TRANSFORMS_PRECISIONPOLICY_H

#include "ds/Transforms/RuleMatcher.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Types.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace mlir::ds {

/// How an FP8 tensor gets its scale.
enum class FP8Scaling {
  /// Transformer Engine's DelayedScaling: from an amax history (state).
  Delayed,
  /// The amax of this step.
  Current,
  /// DeepSeek-V3: one scale per 1 x B activation tile and B x B weight
  /// block, from this step's values.
  Block,
};

llvm::StringRef stringifyFP8Scaling(FP8Scaling s);

/// What one rule assigns; what it matches is the policy's matcher entry of
/// the same index. Unset fields assign nothing (the op keeps f32 there).
struct PrecisionRule {
  Type compute, storage, grad;
  /// The type the results of the op's gradient GEMMs (the cotangents of its
  /// operands) are kept in; unset keeps them FP32. bf16 with `grad: bf16`
  /// is torch.autocast's backward, whose GEMMs return the operands' type.
  Type gradStorage;
  FP8Scaling scaling = FP8Scaling::Delayed;
  /// Where the rule is written (file:line:col), and a short description.
  LocationAttr loc;
  std::string label;
};

struct FP8Settings {
  int64_t amaxHistoryLen = 1024; ///< TE's amax_history_len
  int64_t margin = 0;            ///< scale = max / amax / 2^margin
  int64_t activationBlock = 128; ///< 1 x 128 activation tiles
  int64_t weightBlock = 128;     ///< 128 x 128 weight blocks
};

/// Channel level: output channels of the matched layers whose gradient
/// variance (running estimate) exceeds `threshold` keep `high` precision.
struct ChannelSettings {
  bool enabled = false;
  llvm::SmallVector<std::string> roles;
  double threshold = 2.0; ///< x the layer's mean gradient variance
  double momentum = 0.9;  ///< v <- momentum v + (1 - momentum) var
  Type high;
  LocationAttr loc;
};

/// Time level: high precision for the first `warmup` and the last
/// `finetune` fraction of `total-steps`, the policy in between.
struct ScheduleSettings {
  bool enabled = false;
  double warmup = 0.1, finetune = 0.1;
  LocationAttr loc;
};

/// One rule of the `quant:` section (ds-insert-fake-quant): how the layers
/// it matches are quantized. What it matches is the quant matcher's entry
/// of the same index.
struct QuantRule {
  /// Weight grid bits (8: qint8 per channel; 4: int4 per group); 0: the
  /// weight is not quantized.
  int64_t weightBits = 0;
  /// Group size along the reduction axis for per-group weights; 0: per
  /// output channel.
  int64_t groupSize = 0;
  /// Activation grid bits (unsigned, affine, per tensor); 0: none.
  int64_t activationBits = 0;
  /// Fake-quantize the op's output to FP8 E4M3 with this step's scale (the
  /// seeds' "dynamic FP8" batch norm).
  bool outputFP8 = false;
  /// Not quantized: the layer computes in this type (ds-assign-precision
  /// applies it, whatever its own rules say).
  Type keep;
  LocationAttr loc;
  std::string label;
};

/// The `quant:` section: first matching rule wins.
struct QuantSettings {
  bool enabled = false;
  llvm::SmallVector<QuantRule> rules;
  RuleMatcher matcher;
  /// The rule for `op`, or null.
  const QuantRule *match(Operation *op, llvm::StringRef role,
                         llvm::ArrayRef<llvm::StringRef> params) const {
    std::optional<unsigned> i = matcher.match(op, role, params);
    return i ? &rules[*i] : nullptr;
  }
};

/// One rule of the `sparsity:` section (ds-sparsify-matmul): whether the
/// linear layers it matches get a block-sparse weight.
struct SparsityRule {
  bool sparse = true;
  LocationAttr loc;
  std::string label;
};

/// The `sparsity:` section: first matching rule wins; a layer no rule
/// matches stays dense.
struct SparsitySettings {
  bool enabled = false;
  llvm::SmallVector<SparsityRule> rules;
  RuleMatcher matcher;
  const SparsityRule *match(Operation *op, llvm::StringRef role,
                            llvm::ArrayRef<llvm::StringRef> params) const {
    std::optional<unsigned> i = matcher.match(op, role, params);
    return i ? &rules[*i] : nullptr;
  }
};

class PrecisionPolicy {
public:
  /// Parses a policy; errors are emitted at locations in `bufferName`.
  static FailureOr<PrecisionPolicy>
  parse(llvm::StringRef text, llvm::StringRef bufferName, MLIRContext *ctx);
  /// Reads and parses a file.
  static FailureOr<PrecisionPolicy> load(llvm::StringRef path, Location errLoc);
  /// The seeds' mapping (docs/PrecisionPolicy.md): q/k/v projections in FP8
  /// (E4M3 forward, E5M2 gradients, delayed scaling), FFN intermediate
  /// activations BF16, everything else FP32.
  static PrecisionPolicy getDefault(MLIRContext *ctx);
  /// The default policy's text.
  static llvm::StringRef defaultText();

  /// The first rule matching `op` (with role `role`, consuming parameters
  /// `params`), or null.
  const PrecisionRule *match(Operation *op, llvm::StringRef role,
                             llvm::ArrayRef<llvm::StringRef> params) const;

  /// The rules in file order; `rules[i]` applies where `matcher` picks i.
  llvm::SmallVector<PrecisionRule> rules;
  RuleMatcher matcher;
  FP8Settings fp8;
  ChannelSettings channel;
  ScheduleSettings schedule;
  QuantSettings quant;
  SparsitySettings sparsity;

  /// The default `sparsity:` section: every linear layer but the embedding
  /// and the head (RigL's and the seeds' choice).
  static llvm::StringRef defaultSparsityText();

  /// The default `quant:` section: the seeds' tiers (attention projections
  /// kept in BF16, batch norm in dynamic FP8, other linear layers and
  /// convolutions with torch.ao's x86 qconfig at the given bit-widths).
  static std::string defaultQuantText(int64_t weightBits,
                                      int64_t activationBits);
};

/// Whether `t` is one of the FP8 types.
bool isFP8(Type t);
/// The largest finite value of a float type (448 for E4M3FN).
double largestFinite(Type t);

} // namespace mlir::ds

#endif // DS_TRANSFORMS_PRECISIONPOLICY_H
