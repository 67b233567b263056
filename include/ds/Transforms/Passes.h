//===- Passes.h - ds transformation passes ---------------------*- C++ -*-===//
//
// Declarations of the ds passes, the reusable functions they are thin
// wrappers of, and their registration.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TRANSFORMS_PASSES_H
#define DS_TRANSFORMS_PASSES_H

#include "ds/Dialect/DS/IR/DSAttrs.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"
#include "llvm/Support/CommandLine.h"

#include <string>

namespace mlir {
class RewriterBase;
namespace linalg {
class LinalgOp;
class TransposeOp;
} // namespace linalg
} // namespace mlir

namespace mlir::ds {

/// The optimizers of ds-insert-optimizer (torch.optim's formulas).
enum class OptimizerKind { Sgd, Momentum, Adam, AdamW };
/// The learning-rate schedules of ds-insert-optimizer.
enum class LRSchedule { Constant, WarmupCosine };
/// The modes of ds-clip-gradients.
enum class ClipMode { Global, Adaptive };
/// The norm of ds-clip-gradients' global mode.
enum class ClipNormType { L2, Inf };
/// The range observers of ds-insert-fake-quant.
enum class QuantObserver { MovingAverage, MinMax, Current, MaxAbs };
/// The sparsity schedules of ds-sparsify-matmul.
enum class SparsitySchedule { Cosine, Constant, Cubic };
/// How ds-sparsify-matmul scores a block.
enum class BlockScore { L1, L2 };
/// How ds-sparsify-matmul spreads the sparsity over the layers.
enum class SparsityDistribution { Uniform, ERK, Global };

/// The spellings of the enum options, shared by the passes and
/// ds-training-pipeline.
inline llvm::cl::ValuesClass optimizerKindValues() {
  return llvm::cl::values(
      clEnumValN(::mlir::ds::OptimizerKind::Sgd, "sgd",
                 "torch.optim.SGD (momentum 0)"),
      clEnumValN(::mlir::ds::OptimizerKind::Momentum, "momentum",
                 "torch.optim.SGD with momentum 0.9"),
      clEnumValN(::mlir::ds::OptimizerKind::Adam, "adam",
                 "torch.optim.Adam (coupled L2 weight decay)"),
      clEnumValN(::mlir::ds::OptimizerKind::AdamW, "adamw",
                 "torch.optim.AdamW (decoupled weight decay 0.01)"));
}
inline llvm::cl::ValuesClass lrScheduleValues() {
  return llvm::cl::values(
      clEnumValN(::mlir::ds::LRSchedule::Constant, "constant",
                 "The same rate every step"),
      clEnumValN(::mlir::ds::LRSchedule::WarmupCosine, "warmup-cosine",
                 "Linear warm-up, then a cosine to its floor"));
}
inline llvm::cl::ValuesClass clipModeValues() {
  return llvm::cl::values(
      clEnumValN(::mlir::ds::ClipMode::Global, "global",
                 "torch.nn.utils.clip_grad_norm_"),
      clEnumValN(::mlir::ds::ClipMode::Adaptive, "adaptive",
                 "Per-component clipping with a moving threshold"));
}
inline llvm::cl::ValuesClass clipNormTypeValues() {
  return llvm::cl::values(
      clEnumValN(::mlir::ds::ClipNormType::L2, "2", "The L2 norm"),
      clEnumValN(::mlir::ds::ClipNormType::Inf, "inf",
                 "The infinity norm (largest |g|)"));
}

inline llvm::cl::ValuesClass compressionSchemeValues() {
  return llvm::cl::values(
      clEnumValN(::mlir::ds::CompressionScheme::three_tier, "three-tier",
                 "the seed's 8-bit / f16 / dropped tiers, error feedback"),
      clEnumValN(::mlir::ds::CompressionScheme::topk, "topk",
                 "DGC's top-k with error feedback"),
      clEnumValN(::mlir::ds::CompressionScheme::fp16, "fp16",
                 "DDP's fp16 compression hook"),
      clEnumValN(::mlir::ds::CompressionScheme::bf16, "bf16",
                 "DDP's bf16 compression hook"),
      clEnumValN(::mlir::ds::CompressionScheme::powersgd, "powersgd",
                 "PowerSGD (DDP's powerSGD_hook), error feedback, warm "
                 "start"));
}
inline llvm::cl::ValuesClass sparsityScheduleValues() {
  return llvm::cl::values(
      clEnumValN(::mlir::ds::SparsitySchedule::Cosine, "cosine",
                 "the seeds': initial for hold * T, then a cosine to final"),
      clEnumValN(::mlir::ds::SparsitySchedule::Constant, "constant",
                 "final from iteration 0 on"),
      clEnumValN(::mlir::ds::SparsitySchedule::Cubic, "cubic",
                 "Zhu & Gupta: final + (initial - final)(1 - p)^3 after "
                 "hold * T"));
}
inline llvm::cl::ValuesClass blockScoreValues() {
  return llvm::cl::values(
      clEnumValN(::mlir::ds::BlockScore::L1, "l1", "sum of |x| over a block"),
      clEnumValN(::mlir::ds::BlockScore::L2, "l2", "sum of x^2 over a block"));
}
inline llvm::cl::ValuesClass sparsityDistributionValues() {
  return llvm::cl::values(
      clEnumValN(::mlir::ds::SparsityDistribution::Uniform, "uniform",
                 "every layer at the scheduled sparsity"),
      clEnumValN(::mlir::ds::SparsityDistribution::ERK, "erk",
                 "RigL's Erdos-Renyi-Kernel: density proportional to "
                 "(sum of dims) / (product of dims)"),
      clEnumValN(::mlir::ds::SparsityDistribution::Global, "global",
                 "one ranking of the blocks of every layer"));
}
inline llvm::cl::ValuesClass quantObserverValues() {
  return llvm::cl::values(
      clEnumValN(::mlir::ds::QuantObserver::MovingAverage, "moving-average",
                 "torch.ao's MovingAverage(PerChannel)MinMaxObserver"),
      clEnumValN(::mlir::ds::QuantObserver::MinMax, "min-max",
                 "torch.ao's (PerChannel)MinMaxObserver"),
      clEnumValN(::mlir::ds::QuantObserver::Current, "current",
                 "This step's min and max (torchao's weight scales)"),
      clEnumValN(::mlir::ds::QuantObserver::MaxAbs, "max-abs",
                 "This step's max |x| / qmax (the seeds')"));
}

#define GEN_PASS_DECL
#include "ds/Transforms/Passes.h.inc"

/// Records the contract of every `ds.train_step` function of `module` in the
/// module's `ds.contract` table (merged with any existing entries) and, when
/// `strip` is set, removes the contract attributes from the functions.
/// Emits a diagnostic and fails when a contract is invalid.
LogicalResult exportContracts(ModuleOp module, bool strip);

/// Appends the backward pass to the training step `func`: one `ds.grad`
/// result per parameter (see ds-autodiff). Emits a located error and fails
/// on an op without a gradient rule or a step in the wrong state.
LogicalResult differentiateTrainingStep(FunctionOpInterface func);

/// Checks the options of ds-insert-optimizer; fails with a message naming
/// the option in `error`.
LogicalResult
validateOptimizerOptions(const InsertOptimizerPassOptions &options,
                         std::string &error);

/// Replaces the `ds.grad` results of `func` by parameter updates, adding the
/// optimizer's state (see ds-insert-optimizer). The options must have been
/// validated; per-parameter `ds.optim` overrides are checked here.
LogicalResult insertOptimizer(FunctionOpInterface func,
                              const InsertOptimizerPassOptions &options);

/// Checks the options of ds-insert-loss-scaling; fails with a message naming
/// the option in `error`.
LogicalResult
validateLossScalingOptions(const InsertLossScalingPassOptions &options,
                           std::string &error);

/// Adds dynamic loss scaling (and the anomaly detector) to the gradient
/// step `func` (see ds-insert-loss-scaling). Emits a located error and
/// fails when the step has no gradients, already updates its parameters or
/// has no `ds.seed`.
LogicalResult insertLossScaling(FunctionOpInterface func,
                                const InsertLossScalingPassOptions &options);

/// Checks the options of ds-insert-fake-quant; fails with a message naming
/// the option in `error`.
LogicalResult
validateFakeQuantOptions(const InsertFakeQuantPassOptions &options,
                         std::string &error);

/// Checks ds-sparsify-matmul's options; fails with "in option 'O' of pass
/// 'ds-sparsify-matmul': why" in `error`.
LogicalResult validateSparsityOptions(const SparsifyMatMulPassOptions &options,
                                      std::string &error);

/// ds-sparsify-matmul on one forward + loss step (see the pass). Without
/// `rewriteLayers` only the state (the `iteration` counter and the masks)
/// and the metric are added and the layers stay dense: for a copy of the
/// step whose arguments must match the sparse step's but whose layers are
/// converted otherwise (ds-run's integer evaluation; the weights are zero
/// outside the masks, so a dense product computes the same).
LogicalResult sparsifyMatMul(FunctionOpInterface func,
                             const SparsifyMatMulPassOptions &options,
                             bool rewriteLayers = true);

/// ds-update-sparsity-masks on one gradient step (see the pass).
LogicalResult updateSparsityMasks(FunctionOpInterface func);

/// Fake-quantizes the weight and activation inputs of the linear layers and
/// convolutions of the forward + loss step `func`, adding the observers'
/// state (see ds-insert-fake-quant). The options must have been validated.
LogicalResult insertFakeQuant(FunctionOpInterface func,
                              const InsertFakeQuantPassOptions &options);

/// What names the parameters ds-insert-fake-quant{learn-scales} adds: the
/// learned scale of layer `fc1`'s weight is `fc1.weight<this>scale`, that
/// of its input `fc1.input<this>scale`. They belong to the quantizers, not
/// to the model (an export leaves them out).
inline constexpr llvm::StringLiteral kFakeQuantParamInfix = "_fake_quant.";

/// What ds-convert-fake-quant did to one step.
struct FakeQuantConversion {
  /// ds.matmul ops now computed by ds.quantized_matmul.
  int64_t converted = 0;
  /// Layers left fake-quantized in f32, each "<op> at <loc>: <why>".
  SmallVector<std::string> left;
};

/// Converts the frozen fake-quantized forward `func` to integer inference
/// (see ds-convert-fake-quant). Emits a located error and fails when `func`
/// has no ds.fake_quant, has gradients or updates, still observes, or has
/// nothing convertible.
FailureOr<FakeQuantConversion> convertFakeQuant(FunctionOpInterface func);

/// The state kind of a weight's int8 grid indices, prepared once for
/// integer inference (see splitWeightPreparation).
inline constexpr llvm::StringLiteral kQuantizedWeightStateKind =
    "qat.weight.int8";

/// Splits the weight quantization off the integer inference step `func`
/// (after convertFakeQuant): every ds.quantize that depends on no batch
/// input becomes a new state argument `qat.weight.int8@<param>` of `func`,
/// and a new step `<func>_weights` with the same arguments computes them
/// (a zero loss and one update per new state). Returns the new step, not
/// yet inserted into any symbol table, or null when there is nothing to
/// split.
FailureOr<FunctionOpInterface> splitWeightPreparation(FunctionOpInterface func);

/// Checks the options of ds-qat-bit-width.
LogicalResult validateQATBitWidthOptions(const QATBitWidthPassOptions &options,
                                         std::string &error);

/// Adds the dynamic per-layer bit-width update to the gradient step `func`
/// (see ds-qat-bit-width).
LogicalResult adaptQATBitWidth(FunctionOpInterface func,
                               const QATBitWidthPassOptions &options);

class PrecisionPolicy;
/// The time-level settings of ds-assign-precision (its `policy` option is
/// loaded by the caller).
using AssignPrecisionOptions = AssignPrecisionPassOptions;

/// Applies `policy` to the differentiated step `func` (see
/// ds-assign-precision) and records the decisions under the function's
/// name in the module's `ds.precision_map`. With a schedule (or
/// `anomalySteps`), also builds the high-precision variant
/// `<name>_high` with the same signature, records the module's
/// `ds.precision_schedule` and returns the variant; otherwise null.
FailureOr<FunctionOpInterface>
assignPrecision(FunctionOpInterface func, const PrecisionPolicy &policy,
                const AssignPrecisionOptions &options = {});

/// Averages the gradients of `func` over the ranks and makes found_inf,
/// the loss, metrics and state from this rank's data agree across them (see
/// ds-data-parallel).
LogicalResult dataParallel(FunctionOpInterface func);

/// Synchronizes the batch statistics of every forward ds.batch_norm of
/// `func` over the ranks (see ds-sync-batch-norm).
LogicalResult syncBatchNorm(FunctionOpInterface func);

/// Packs the gradient all-reduces of `func` into buckets (see
/// ds-fuse-allreduce). The sizes must be > 0.
LogicalResult fuseAllReduce(FunctionOpInterface func, int64_t bucketBytes,
                            int64_t firstBucketBytes);

/// Checks the options of ds-compress-allreduce; fails with a message naming
/// the option in `error`.
LogicalResult
validateCompressOptions(const CompressAllReducePassOptions &options,
                        std::string &error);

/// Compresses the gradient buckets of `func` (see ds-compress-allreduce).
/// The options must have been validated.
LogicalResult compressAllReduce(FunctionOpInterface func,
                                const CompressAllReducePassOptions &options);

/// Checks the options of ds-clip-gradients; fails with a message naming the
/// option in `error`.
LogicalResult validateClipOptions(const ClipGradientsPassOptions &options,
                                  std::string &error);

/// How ds-clip-gradients' adaptive mode measures a parameter's gradient.
enum class ClipNormKind { L2, Inf };

/// The norm the adaptive mode uses for parameter `name` whose uses carry
/// the `ds.module` / `ds.role` strings `annotations`: L2 for attention,
/// infinity for FFN, L2 otherwise.
ClipNormKind classifyClipNorm(StringRef name, ArrayRef<StringRef> annotations);

/// Clips the gradients of `func` (see ds-clip-gradients). The options must
/// have been validated.
LogicalResult clipGradients(FunctionOpInterface func,
                            const ClipGradientsPassOptions &options);

/// Marks every step of the module's `ds.contract` table for the C calling
/// convention with read-only arguments (see ds-prepare-step-abi).
LogicalResult prepareStepABI(ModuleOp module);

/// Tiles `op` to 1 x ... x 1 x V tiles along its innermost loop and
/// vectorises the tile (see ds-vectorize-cpu). Fails, leaving `op` as it was,
/// when `op` is not a candidate (library GEMMs, dynamic shapes, ops the
/// vectoriser rejects); if vectorising the tile fails, the tiled op stays.
LogicalResult vectorizeLinalgOpForCPU(RewriterBase &rewriter,
                                      linalg::LinalgOp op);

/// Makes the transposed copy `transpose` a second output of the
/// all-parallel linalg.generic that computes its input (see
/// ds-fuse-transposes), replacing and erasing `transpose`. Fails, changing
/// nothing, when the copy is not of that form.
LogicalResult fuseTransposeIntoProducer(RewriterBase &rewriter,
                                        linalg::TransposeOp transpose);

/// The narrow float types ds-emulate-narrow-floats can emulate: bf16, f16,
/// f8E4M3FN and f8E5M2.
SmallVector<Type> getDefaultNarrowFloatTypes(MLIRContext *ctx);

/// Adds the patterns of ds-emulate-narrow-floats: `arith.truncf` into and
/// `arith.extf` out of the float types `types` (a subset of
/// getDefaultNarrowFloatTypes) become integer code on bitcasts, on scalars
/// and vectors, exactly rounded (nearest, ties to even). `keepF32Casts`:
/// casts between f32 and bf16 or f16 stay casts, without their `contract`
/// flag (ds-emulate-narrow-floats{keep-f32-casts}).
void populateEmulateNarrowFloatsPatterns(RewritePatternSet &patterns,
                                         ArrayRef<Type> types,
                                         bool keepF32Casts = false);

/// Checks that every narrow-float cast under `root` can be emulated for
/// `types` (see ds-emulate-narrow-floats); emits a located error otherwise.
LogicalResult checkNarrowFloatCasts(Operation *root, ArrayRef<Type> types);

#define GEN_PASS_REGISTRATION
#include "ds/Transforms/Passes.h.inc"

/// Registers every ds pass (the pipelines: ds/Pipelines/Pipelines.h).
void registerAllDSPasses();

} // namespace mlir::ds

#endif // DS_TRANSFORMS_PASSES_H
