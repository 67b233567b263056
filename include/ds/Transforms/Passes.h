//===- Passes.h - ds transformation passes ---------------------*- C++ -*-===//
//
// Declarations of the ds passes, the reusable functions they are thin
// wrappers of, and their registration.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TRANSFORMS_PASSES_H
#define DS_TRANSFORMS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

#include <string>

namespace mlir {
class RewriterBase;
namespace linalg {
class LinalgOp;
} // namespace linalg
} // namespace mlir

namespace mlir::ds {

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

/// A checked optimizer configuration (see ds-insert-optimizer).
struct OptimizerConfig {
  enum class Kind { Sgd, Adam, AdamW };
  enum class Schedule { Constant, WarmupCosine };
  Kind kind = Kind::AdamW;
  Schedule schedule = Schedule::Constant;
  double lr = 1e-3, momentum = 0.0, dampening = 0.0;
  bool nesterov = false;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0.0;
  int64_t warmupSteps = 0, totalSteps = 0;
  double warmupStartFactor = 1e-3, minLrFactor = 0.0;

  /// Builds a configuration from pass options; negative `momentum` and
  /// `weightDecay` mean the kind's default. Fails with a message in `error`.
  static FailureOr<OptimizerConfig>
  get(StringRef kind, StringRef schedule, double lr, double momentum,
      double dampening, bool nesterov, double beta1, double beta2, double eps,
      double weightDecay, int64_t warmupSteps, int64_t totalSteps,
      double warmupStartFactor, double minLrFactor, std::string &error);

  /// This configuration with the per-parameter overrides of a `ds.optim`
  /// dictionary applied (`kind`, `lr`, `momentum`, `dampening`, `nesterov`,
  /// `beta1`, `beta2`, `eps`, `weight_decay`), validated like the options.
  /// The schedule stays the step's. Fails with a message in `error`.
  FailureOr<OptimizerConfig> withOverrides(DictionaryAttr overrides,
                                           std::string &error) const;

private:
  /// Checks the hyperparameters; fails with a message in `error`.
  LogicalResult validate(std::string &error) const;
};

/// Replaces the `ds.grad` results of `func` by parameter updates, adding the
/// optimizer's state (see ds-insert-optimizer).
LogicalResult insertOptimizer(FunctionOpInterface func,
                              const OptimizerConfig &config);

/// A checked loss-scaling configuration (see ds-insert-loss-scaling).
struct LossScalingConfig {
  double initScale = 65536.0, growthFactor = 2.0, backoffFactor = 0.5;
  int64_t growthInterval = 2000;
  /// Megatron: overflows before a back-off, and the back-off's floor.
  int64_t hysteresis = 1;
  double minScale = 0.0;
  /// Activation-based cap min(gamma * max|a|, S_max); 0 = that term off.
  double capGamma = 0.0, capMax = 0.0;
  /// Gradient anomaly detector.
  bool anomaly = true;
  double anomalyEpsilon = 0.25;
  int64_t anomalyCount = 3;
  /// Add the `inject_nonfinite` fault-injection input.
  bool injectNonfinite = false;

  /// Checks the values; fails with a message in `error`.
  LogicalResult validate(std::string &error) const;
};

/// Parses a ds-insert-loss-scaling option string ("growth-interval=3
/// hysteresis=2") into a checked configuration; fails with a message.
FailureOr<LossScalingConfig> parseLossScalingOptions(StringRef options,
                                                     std::string &error);

/// Adds dynamic loss scaling (and the anomaly detector) to the gradient
/// step `func` (see ds-insert-loss-scaling). Emits a located error and
/// fails when the step has no gradients, already updates its parameters or
/// has no `ds.seed`.
class PrecisionPolicy;
/// The time-level settings of ds-assign-precision.
struct AssignPrecisionOptions {
  /// Training length, for the policy's schedule.
  int64_t totalSteps = 0;
  /// Steps the runner spends in the high-precision variant after a
  /// gradient anomaly (0: none).
  int64_t anomalySteps = 0;
};

/// Applies `policy` to the differentiated step `func` (see
/// ds-assign-precision) and records the decisions under the function's
/// name in the module's `ds.precision_map`. With a schedule (or
/// `anomalySteps`), also builds the high-precision variant
/// `<name>_high` with the same signature, records the module's
/// `ds.precision_schedule` and returns the variant; otherwise null.
FailureOr<FunctionOpInterface>
assignPrecision(FunctionOpInterface func, const PrecisionPolicy &policy,
                const AssignPrecisionOptions &options = {});

LogicalResult insertLossScaling(FunctionOpInterface func,
                                const LossScalingConfig &config);

/// A checked gradient-clipping configuration (see ds-clip-gradients).
struct ClipConfig {
  enum class Mode { Global, Adaptive };
  Mode mode = Mode::Global;
  double maxNorm = 1.0;
  /// The global mode's norm: 2 or infinity.
  bool infNorm = false;
  int64_t history = 1000;
  double noiseStd = 0.0;

  /// Builds a configuration from pass options; fails with a message.
  static FailureOr<ClipConfig> get(StringRef mode, double maxNorm,
                                   StringRef normType, int64_t history,
                                   double noiseStd, std::string &error);
};

/// Parses a ds-clip-gradients option string ("mode=global max-norm=1")
/// into a checked configuration; fails with a message.
FailureOr<ClipConfig> parseClipOptions(StringRef options, std::string &error);

/// How ds-clip-gradients' adaptive mode measures a parameter's gradient.
enum class ClipNormKind { L2, Inf };

/// The norm the adaptive mode uses for parameter `name` whose uses carry
/// the `ds.module` / `ds.role` strings `annotations`: L2 for attention,
/// infinity for FFN, L2 otherwise.
ClipNormKind classifyClipNorm(StringRef name, ArrayRef<StringRef> annotations);

/// Clips the gradients of `func` (see ds-clip-gradients).
LogicalResult clipGradients(FunctionOpInterface func, const ClipConfig &config);

/// Marks every step of the module's `ds.contract` table for the C calling
/// convention with read-only arguments (see ds-prepare-step-abi).
LogicalResult prepareStepABI(ModuleOp module);

/// Tiles `op` to 1 x ... x 1 x V tiles along its innermost loop and
/// vectorises the tile (see ds-vectorize-cpu). Fails, leaving `op` as it was,
/// when `op` is not a candidate (library GEMMs, dynamic shapes, ops the
/// vectoriser rejects); if vectorising the tile fails, the tiled op stays.
LogicalResult vectorizeLinalgOpForCPU(RewriterBase &rewriter,
                                      linalg::LinalgOp op);

/// The narrow float types ds-emulate-narrow-floats can emulate: bf16, f16,
/// f8E4M3FN and f8E5M2.
SmallVector<Type> getDefaultNarrowFloatTypes(MLIRContext *ctx);

/// Adds the patterns of ds-emulate-narrow-floats: `arith.truncf` into and
/// `arith.extf` out of the float types `types` (a subset of
/// getDefaultNarrowFloatTypes) become integer code on bitcasts, on scalars
/// and vectors, exactly rounded (nearest, ties to even).
void populateEmulateNarrowFloatsPatterns(RewritePatternSet &patterns,
                                         ArrayRef<Type> types);

/// Checks that every narrow-float cast under `root` can be emulated for
/// `types` (see ds-emulate-narrow-floats); emits a located error otherwise.
LogicalResult checkNarrowFloatCasts(Operation *root, ArrayRef<Type> types);

/// Options of ds-cpu-pipeline.
struct CPUPipelineOptions : public PassPipelineOptions<CPUPipelineOptions> {
  PassOptions::Option<bool> libraryGemm{
      *this, "library-gemm",
      llvm::cl::desc("Run f32/f64 matmuls through the runtime's GEMM "
                     "(oneDNN) instead of compiled loops"),
      llvm::cl::init(true)};
};

/// Options of ds-training-pipeline: which technique passes run, with their
/// options as the passes spell them.
struct TrainingPipelineOptions
    : public PassPipelineOptions<TrainingPipelineOptions> {
  PassOptions::Option<bool> precision{*this, "precision",
                                      llvm::cl::desc("Run ds-assign-precision"),
                                      llvm::cl::init(false)};
  PassOptions::Option<std::string> policy{
      *this, "policy",
      llvm::cl::desc("ds-assign-precision's policy file (implies precision)"),
      llvm::cl::init("")};
  PassOptions::Option<int64_t> totalSteps{
      *this, "total-steps",
      llvm::cl::desc("ds-assign-precision's total-steps (the schedule's "
                     "training length)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> anomalySteps{
      *this, "anomaly-steps",
      llvm::cl::desc("ds-assign-precision's anomaly-steps (steps in the "
                     "high-precision variant after a gradient anomaly)"),
      llvm::cl::init(0)};
  PassOptions::Option<bool> lossScaling{
      *this, "loss-scaling",
      llvm::cl::desc("Run ds-insert-loss-scaling with its defaults"),
      llvm::cl::init(false)};
  PassOptions::Option<std::string> clip{
      *this, "clip",
      llvm::cl::desc("Run ds-clip-gradients with these options (e.g. "
                     "'mode=global max-norm=1'); empty: no clipping"),
      llvm::cl::init("")};
  PassOptions::Option<std::string> optimizer{
      *this, "optimizer", llvm::cl::desc("ds-insert-optimizer's options"),
      llvm::cl::init("kind=adamw")};
  PassOptions::Option<bool> lower{*this, "lower",
                                  llvm::cl::desc("Append ds-cpu-pipeline"),
                                  llvm::cl::init(false)};
};

/// Builds ds-training-pipeline: the technique passes in the canonical order
/// of DESIGN.md (autodiff, precision, loss scaling, clipping, optimizer).
void buildTrainingPipeline(OpPassManager &pm,
                           const TrainingPipelineOptions &options);

/// Builds ds-cpu-pipeline: from a ds training step (or any ds module) to the
/// LLVM dialect, ready for the JIT, with the contract in `ds.contract`.
void buildCPUPipeline(OpPassManager &pm, const CPUPipelineOptions &options);

/// Registers the ds pass pipelines (ds-cpu-pipeline, ds-training-pipeline).
void registerDSPipelines();

#define GEN_PASS_REGISTRATION
#include "ds/Transforms/Passes.h.inc"

/// Registers every ds pass and pipeline.
void registerAllDSPasses();

} // namespace mlir::ds

#endif // DS_TRANSFORMS_PASSES_H
