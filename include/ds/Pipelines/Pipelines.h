//===- Pipelines.h - ds pass pipelines -------------------------*- C++ -*-===//
//
// ds-training-pipeline (the training techniques in their canonical order)
// and ds-cpu-pipeline (a ds module down to the LLVM dialect for the JIT),
// built from pass objects. ds-opt, the mlir-opt plugin and the runner call
// the same builders, so the pass order is decided in one place
// (lib/Pipelines/Pipelines.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef DS_PIPELINES_PIPELINES_H
#define DS_PIPELINES_PIPELINES_H

#include "ds/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <optional>

namespace mlir::ds {

/// Rows per library GEMM of causal attention's products (ds.causal_gemm):
/// a 1024-token context runs as 4 GEMMs over its lower block triangle,
/// 10/16 of the work (0: one GEMM each). 256 rather than 128 rows: the
/// GEMMs with a 64-deep contraction are bound by memory, and each block
/// rereads its share of the other operand (docs/Rationale.md).
constexpr int64_t kDefaultCausalBlock = 256;

/// Options of ds-cpu-pipeline.
struct CPUPipelineOptions : public PassPipelineOptions<CPUPipelineOptions> {
  PassOptions::Option<bool> libraryGemm{
      *this, "library-gemm",
      llvm::cl::desc("Run f32/f64 matmuls through the runtime's GEMM "
                     "(oneDNN) instead of compiled loops"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> gemmConvs{
      *this, "gemm-convs",
      llvm::cl::desc("With library-gemm, lower ungrouped f32/bf16/f16 "
                     "convolutions and their gradients as im2col + the "
                     "library GEMM instead of loop nests"),
      llvm::cl::init(true)};
  PassOptions::Option<int64_t> causalBlock{
      *this, "causal-block",
      llvm::cl::desc("With library-gemm, run causal attention's matmuls as "
                     "one GEMM per block of this many rows over the lower "
                     "block triangle only (0: one GEMM each)"),
      llvm::cl::init(kDefaultCausalBlock)};
};

/// What ds-gpu-pipeline compiles for: the target chip, the kernels' launch
/// shape and what gpu-module-to-binary embeds.
struct GPUPipelineConfig {
  std::string chip = "sm_90";
  /// PTX ISA features; empty: the lowest ISA version that has `chip`.
  std::string features;
  /// `bin` (a cubin, assembled by ptxas now), `isa` (PTX, assembled by the
  /// driver at load time), `fatbin`, or `llvm` (NVVM IR, for inspection).
  std::string format = "bin";
  int64_t blockSize = 256;
  int64_t maxBlocks = 4096;
  /// Elements per thread per iteration of an elementwise kernel, loaded
  /// together (convert-linalg-to-ds-gpu's unroll; 0: from the element
  /// types, 1: one at a time).
  int64_t unroll = 0;
  /// Kernels over buffers contiguous along the innermost dimension
  /// (elementwise, row groups, reductions, cast-transposes) load and store
  /// vectors of up to 16 bytes (convert-linalg-to-ds-gpu's vectorize).
  bool vectorize = true;
  /// Kernels convert narrow floats with the chip's instructions: bf16 and
  /// f16 on sm_80 and newer, FP8 on sm_89 and newer (false: integer code,
  /// as on the CPU).
  bool nativeCasts = true;
  /// Kernels' index arithmetic in 32 bits where every index fits
  /// (ds-convert-kernels-to-nvvm{index32}). Off until a GPU has measured
  /// it: ptxas spilled in one merged kernel of a GPT block with it.
  bool index32 = false;
  /// Consecutive row-wise ops over the same rows as one block-per-row
  /// launch (convert-linalg-to-ds-gpu's fuse-rows).
  bool fuseRows = true;
  /// A full reduction and an elementwise op reading the same tensor as
  /// one launch, and column reductions of one tensor with the op before
  /// them that writes it (convert-linalg-to-ds-gpu's fuse-siblings).
  bool fuseSiblings = true;
  /// A warp's row group keeps the row elements several members read in
  /// registers (convert-linalg-to-ds-gpu's cache-rows).
  bool cacheRows = true;
  /// Row groups take the column sums over their rows
  /// (convert-linalg-to-ds-gpu's row-columns).
  bool rowColumns = true;
  /// Readers of a whole-buffer copy read its source (ds-forward-copies).
  bool forwardCopies = true;
  /// Gradients computed in their all-reduce bucket
  /// (convert-ds-to-runtime's bucket-views).
  bool bucketViews = true;
  /// Three-tier and top-k buckets encoded on the device, those of at
  /// least deviceEncodersMin elements (convert-ds-to-runtime's
  /// device-encoders and device-encoders-min).
  bool deviceEncoders = true;
  int64_t deviceEncodersMin = 65536;
  /// Rows per cuBLASLt GEMM of causal attention's products, over their
  /// lower block triangle (convert-ds-to-linalg's causal-block; 0: off).
  int64_t causalBlock = kDefaultCausalBlock;
  /// Launches that may share a kernel merged (ds-merge-gpu-launches).
  bool mergeLaunches = true;
  /// Where ds-gpu-launch-report writes, after the merge ("-": standard
  /// error); empty: no report.
  std::string launchReport;
  /// What the report counts the uncompressed collectives on: nccl or host.
  std::string launchReportCollectives = "nccl";
  unsigned optLevel = 3;
  /// The CUDA toolkit (ptxas, libdevice); empty: $CUDA_HOME or
  /// /usr/local/cuda.
  std::string toolkit;
  /// Testing: run the kernels on the host (ds-emulate-gpu-kernels), for
  /// the stub libcuda, whose device memory is host memory.
  bool emulateKernels = false;
};

/// Options of ds-gpu-pipeline.
struct GPUPipelineOptions : public PassPipelineOptions<GPUPipelineOptions> {
  PassOptions::Option<std::string> chip{
      *this, "chip",
      llvm::cl::desc("Target GPU, sm_<major><minor> (sm_80, "
                     "sm_90, sm_90a, ...)"),
      llvm::cl::init("sm_90")};
  PassOptions::Option<std::string> features{
      *this, "features",
      llvm::cl::desc("PTX features (default: the lowest PTX ISA that has the "
                     "chip, e.g. +ptx81)"),
      llvm::cl::init("")};
  PassOptions::Option<std::string> format{
      *this, "format",
      llvm::cl::desc("What is embedded: bin (cubin), isa (PTX), fatbin, llvm"),
      llvm::cl::init("bin")};
  PassOptions::Option<int64_t> blockSize{*this, "block-size",
                                         llvm::cl::desc("Threads per block"),
                                         llvm::cl::init(256)};
  PassOptions::Option<int64_t> maxBlocks{
      *this, "max-blocks",
      llvm::cl::desc("Blocks at most per launch (grid-stride loops)"),
      llvm::cl::init(4096)};
  PassOptions::Option<int64_t> unroll{
      *this, "unroll",
      llvm::cl::desc("Elements per thread per iteration of an elementwise "
                     "kernel, loaded together (0: 16 bytes' worth of the "
                     "widest element, 2 to 8; 1: one at a time)"),
      llvm::cl::init(0)};
  PassOptions::Option<bool> vectorize{
      *this, "vectorize",
      llvm::cl::desc("Kernels over buffers contiguous along the innermost "
                     "dimension (elementwise, row groups, reductions, "
                     "cast-transposes) load and store vectors of up to 16 "
                     "bytes (false: one element an access)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> nativeCasts{
      *this, "native-casts",
      llvm::cl::desc("Convert narrow floats in kernels with the chip's "
                     "instructions (bf16/f16 on sm_80+, FP8 on sm_89+); "
                     "false: integer code, as on the CPU"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> index32{
      *this, "index32",
      llvm::cl::desc("Kernels' index arithmetic in 32 bits where every "
                     "index fits (default: 64 bits)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> fuseRows{
      *this, "fuse-rows",
      llvm::cl::desc("Run a softmax's or a layer norm's passes over each row "
                     "as one block-per-row launch"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> fuseSiblings{
      *this, "fuse-siblings",
      llvm::cl::desc("Run a full reduction and an elementwise op reading the "
                     "same tensor (an FP8 amax and cast) as one launch, and "
                     "column reductions of one tensor with the op before "
                     "them that writes it"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> cacheRows{
      *this, "cache-rows",
      llvm::cl::desc("Keep the row elements several members of a warp's "
                     "row group read in registers (=false: each member "
                     "rereads them, to compare)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> rowColumns{
      *this, "row-columns",
      llvm::cl::desc("Fold the column sums over a row group's rows (a layer "
                     "norm's weight and bias gradients) into its kernel "
                     "(=false: launches of their own, to compare)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> forwardCopies{
      *this, "forward-copies",
      llvm::cl::desc("Make the readers of a whole-buffer copy read its "
                     "source, and drop the copy (ds-forward-copies; =false "
                     "to compare)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> bucketViews{
      *this, "bucket-views",
      llvm::cl::desc("Compute the gradients of a data-parallel bucket in "
                     "their slices of it (convert-ds-to-runtime's "
                     "bucket-views; =false: copied in, to compare)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> deviceEncoders{
      *this, "device-encoders",
      llvm::cl::desc("Encode a three-tier or top-k compressed bucket on the "
                     "device and send the host only what its payload needs "
                     "(convert-ds-to-runtime's device-encoders; =false: the "
                     "host encodes the bucket, to compare)"),
      llvm::cl::init(true)};
  PassOptions::Option<int64_t> deviceEncodersMin{
      *this, "device-encoders-min",
      llvm::cl::desc("With device-encoders: encode on the device only "
                     "buckets of at least this many elements; smaller ones "
                     "go to the host encoder (convert-ds-to-runtime's "
                     "device-encoders-min)"),
      llvm::cl::init(65536)};
  PassOptions::Option<bool> mergeLaunches{
      *this, "merge-launches",
      llvm::cl::desc("Merge each launch that may share a kernel with the "
                     "launch before it (ds-merge-gpu-launches; =false to "
                     "compare)"),
      llvm::cl::init(true)};
  PassOptions::Option<int64_t> causalBlock{
      *this, "causal-block",
      llvm::cl::desc("Run causal attention's matmuls as one cuBLASLt GEMM "
                     "per block of this many rows over the lower block "
                     "triangle only (0: one GEMM each, to compare)"),
      llvm::cl::init(kDefaultCausalBlock)};
  PassOptions::Option<std::string> launchReport{
      *this, "launch-report",
      llvm::cl::desc("Write what each kernel launch and library GEMM moves "
                     "and computes, and the step's roofline bound at an "
                     "H200's peaks, to this file (- for standard error; "
                     "ds-gpu-launch-report)"),
      llvm::cl::init("")};
  PassOptions::Option<std::string> launchReportCollectives{
      *this, "launch-report-collectives",
      llvm::cl::desc("What the launch report counts the uncompressed "
                     "all-reduces and broadcasts on: nccl (device copies) or "
                     "host (staged, as without NCCL)"),
      llvm::cl::init("nccl")};
  PassOptions::Option<unsigned> optLevel{
      *this, "opt-level", llvm::cl::desc("NVPTX optimisation level"),
      llvm::cl::init(3)};
  PassOptions::Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("CUDA toolkit path (default: $CUDA_HOME or "
                     "/usr/local/cuda)"),
      llvm::cl::init("")};
  PassOptions::Option<bool> emulateKernels{
      *this, "emulate-kernels",
      llvm::cl::desc("Testing: run the kernels on the host as loops "
                     "(ds-emulate-gpu-kernels); the step then runs only on "
                     "the stub libcuda, whose device memory is host memory"),
      llvm::cl::init(false)};
  GPUPipelineConfig getConfig() const;
};

/// What ds-training-pipeline runs, as the passes' own generated option
/// structs: a pass whose entry is empty does not run. Tools and the runner
/// fill this directly; the registered pipeline fills it from
/// TrainingPipelineOptions.
struct TrainingPipelineConfig {
  std::optional<SparsifyMatMulPassOptions> sparsity;
  std::optional<InsertFakeQuantPassOptions> fakeQuant;
  /// ds-autodiff (off for a step that already has its gradients).
  bool autodiff = true;
  std::optional<AssignPrecisionPassOptions> precision;
  std::optional<InsertLossScalingPassOptions> lossScaling;
  std::optional<QATBitWidthPassOptions> qatBitWidth;
  /// ds-data-parallel, and the bucketing and compression of its all-reduce.
  bool dataParallel = false;
  /// With dataParallel and autodiff: ds-sync-batch-norm first.
  bool syncBatchNorm = true;
  std::optional<FuseAllReducePassOptions> fuseAllReduce;
  std::optional<CompressAllReducePassOptions> compressAllReduce;
  std::optional<ClipGradientsPassOptions> clip;
  /// ds-insert-optimizer (empty for a step that already updates).
  std::optional<InsertOptimizerPassOptions> optimizer =
      InsertOptimizerPassOptions();
  /// ds-partition-pipeline (slot 7): stages and micro-batches.
  std::optional<PartitionPipelinePassOptions> partition;
  /// Append ds-cpu-pipeline, with its `library-gemm` and `gemm-convs`.
  bool lower = false;
  bool libraryGemm = true;
  bool gemmConvs = true;
  int64_t causalBlock = kDefaultCausalBlock;
};

/// Options of ds-training-pipeline: every option of every pass it runs,
/// flat and typed, spelled `<pass prefix>-<option>` (`optimizer-lr`,
/// `loss-scaling-growth-interval`, `clip-max-norm`); ds-assign-precision's
/// are `policy`, `total-steps` and `anomaly-steps`. Setting an option of a
/// technique turns that technique on, as `policy` turns on `precision`.
/// Defaults are the passes' own.
struct TrainingPipelineOptions
    : public PassPipelineOptions<TrainingPipelineOptions> {
  using Opt = PassOptions;

  // ds-assign-precision.
  Opt::Option<bool> precision{*this, "precision",
                              llvm::cl::desc("Run ds-assign-precision"),
                              llvm::cl::init(false)};
  Opt::Option<std::string> policy{
      *this, "policy",
      llvm::cl::desc("ds-assign-precision's policy file (implies precision)"),
      llvm::cl::init(AssignPrecisionPassOptions().policy)};
  Opt::Option<int64_t> totalSteps{
      *this, "total-steps",
      llvm::cl::desc("Training length: ds-assign-precision's schedule, and "
                     "the cosine when optimizer-total-steps is 0"),
      llvm::cl::init(AssignPrecisionPassOptions().totalSteps)};
  Opt::Option<int64_t> anomalySteps{
      *this, "anomaly-steps",
      llvm::cl::desc("ds-assign-precision's anomaly-steps (steps in the "
                     "high-precision variant after a gradient anomaly)"),
      llvm::cl::init(AssignPrecisionPassOptions().anomalySteps)};

  // ds-insert-loss-scaling.
  Opt::Option<bool> lossScaling{*this, "loss-scaling",
                                llvm::cl::desc("Run ds-insert-loss-scaling"),
                                llvm::cl::init(false)};
  Opt::Option<double> lsInitScale{
      *this, "loss-scaling-init-scale", llvm::cl::desc("Initial scale"),
      llvm::cl::init(InsertLossScalingPassOptions().initScale)};
  Opt::Option<double> lsGrowthFactor{
      *this, "loss-scaling-growth-factor",
      llvm::cl::desc("Scale factor after growth-interval clean steps"),
      llvm::cl::init(InsertLossScalingPassOptions().growthFactor)};
  Opt::Option<double> lsBackoffFactor{
      *this, "loss-scaling-backoff-factor",
      llvm::cl::desc("Scale factor on overflow"),
      llvm::cl::init(InsertLossScalingPassOptions().backoffFactor)};
  Opt::Option<int64_t> lsGrowthInterval{
      *this, "loss-scaling-growth-interval",
      llvm::cl::desc("Clean steps in a row before growing"),
      llvm::cl::init(InsertLossScalingPassOptions().growthInterval)};
  Opt::Option<int64_t> lsHysteresis{
      *this, "loss-scaling-hysteresis",
      llvm::cl::desc("Overflows before backing off (Megatron)"),
      llvm::cl::init(InsertLossScalingPassOptions().hysteresis)};
  Opt::Option<double> lsMinScale{
      *this, "loss-scaling-min-scale",
      llvm::cl::desc("Floor of the backed-off scale; 0 = none"),
      llvm::cl::init(InsertLossScalingPassOptions().minScale)};
  Opt::Option<double> lsCapGamma{
      *this, "loss-scaling-activation-cap-gamma",
      llvm::cl::desc("Cap at gamma * max|activation|; 0 = off"),
      llvm::cl::init(InsertLossScalingPassOptions().capGamma)};
  Opt::Option<double> lsCapMax{
      *this, "loss-scaling-activation-cap-max",
      llvm::cl::desc("Cap at S_max; 0 = off"),
      llvm::cl::init(InsertLossScalingPassOptions().capMax)};
  Opt::Option<bool> lsAnomaly{
      *this, "loss-scaling-anomaly",
      llvm::cl::desc("Add the gradient anomaly detector"),
      llvm::cl::init(InsertLossScalingPassOptions().anomaly)};
  Opt::Option<double> lsAnomalyEpsilon{
      *this, "loss-scaling-anomaly-epsilon",
      llvm::cl::desc("Relative growth of the gradient norm that counts"),
      llvm::cl::init(InsertLossScalingPassOptions().anomalyEpsilon)};
  Opt::Option<int64_t> lsAnomalyCount{
      *this, "loss-scaling-anomaly-count",
      llvm::cl::desc("Consecutive growing steps that make an anomaly"),
      llvm::cl::init(InsertLossScalingPassOptions().anomalyCount)};
  Opt::Option<bool> lsInjectNonfinite{
      *this, "loss-scaling-inject-nonfinite",
      llvm::cl::desc("Add the fault-injection input 'inject_nonfinite'"),
      llvm::cl::init(InsertLossScalingPassOptions().injectNonfinite)};

  // ds-sparsify-matmul (and ds-update-sparsity-masks).
  Opt::Option<bool> sparsity{
      *this, "sparsity",
      llvm::cl::desc("Run ds-sparsify-matmul and ds-update-sparsity-masks "
                     "(dynamic block sparsity)"),
      llvm::cl::init(false)};
  Opt::Option<std::string> spPolicy{
      *this, "sparsity-policy",
      llvm::cl::desc("Policy file with a sparsity: section"),
      llvm::cl::init(SparsifyMatMulPassOptions().policy)};
  Opt::Option<int64_t> spBlock{
      *this, "sparsity-block", llvm::cl::desc("Block size"),
      llvm::cl::init(SparsifyMatMulPassOptions().block)};
  Opt::Option<SparsitySchedule> spSchedule{
      *this, "sparsity-schedule", llvm::cl::desc("cosine, constant or cubic"),
      llvm::cl::init(SparsifyMatMulPassOptions().schedule),
      sparsityScheduleValues()};
  Opt::Option<double> spInitial{
      *this, "sparsity-initial", llvm::cl::desc("Initial sparsity"),
      llvm::cl::init(SparsifyMatMulPassOptions().initial)};
  Opt::Option<double> spFinal{
      *this, "sparsity-final",
      llvm::cl::desc("Final sparsity (constant: throughout)"),
      llvm::cl::init(SparsifyMatMulPassOptions().final)};
  Opt::Option<double> spHold{
      *this, "sparsity-hold",
      llvm::cl::desc("Fraction of the steps at the initial sparsity"),
      llvm::cl::init(SparsifyMatMulPassOptions().hold)};
  Opt::Option<int64_t> spTotalSteps{
      *this, "sparsity-total-steps",
      llvm::cl::desc("Training length of the schedule (0: total-steps)"),
      llvm::cl::init(0)};
  Opt::Option<int64_t> spUpdateEvery{
      *this, "sparsity-update-every",
      llvm::cl::desc("Iterations between mask updates"),
      llvm::cl::init(SparsifyMatMulPassOptions().updateEvery)};
  Opt::Option<bool> spRegrow{
      *this, "sparsity-regrow", llvm::cl::desc("RigL regrowth"),
      llvm::cl::init(SparsifyMatMulPassOptions().regrow)};
  Opt::Option<double> spDropFraction{
      *this, "sparsity-drop-fraction", llvm::cl::desc("RigL's drop fraction"),
      llvm::cl::init(SparsifyMatMulPassOptions().dropFraction)};
  Opt::Option<double> spRegrowEnd{
      *this, "sparsity-regrow-end",
      llvm::cl::desc("Fraction of the steps where regrowth ends"),
      llvm::cl::init(SparsifyMatMulPassOptions().regrowEnd)};
  Opt::Option<BlockScore> spScore{
      *this, "sparsity-score", llvm::cl::desc("l1 or l2 block scores"),
      llvm::cl::init(SparsifyMatMulPassOptions().score), blockScoreValues()};
  Opt::Option<SparsityDistribution> spDistribution{
      *this, "sparsity-distribution", llvm::cl::desc("uniform, erk or global"),
      llvm::cl::init(SparsifyMatMulPassOptions().distribution),
      sparsityDistributionValues()};

  // ds-insert-fake-quant.
  Opt::Option<bool> fakeQuant{*this, "fake-quant",
                              llvm::cl::desc("Run ds-insert-fake-quant (QAT)"),
                              llvm::cl::init(false)};
  Opt::Option<std::string> fqPolicy{
      *this, "fake-quant-policy",
      llvm::cl::desc("Policy file with a quant: section (default: the "
                     "seeds' tiers)"),
      llvm::cl::init(InsertFakeQuantPassOptions().policy)};
  Opt::Option<bool> fqWeights{
      *this, "fake-quant-weights", llvm::cl::desc("Fake-quantize the weights"),
      llvm::cl::init(InsertFakeQuantPassOptions().weights)};
  Opt::Option<bool> fqActivations{
      *this, "fake-quant-activations",
      llvm::cl::desc("Fake-quantize the activation inputs"),
      llvm::cl::init(InsertFakeQuantPassOptions().activations)};
  Opt::Option<int64_t> fqWeightBits{
      *this, "fake-quant-weight-bits", llvm::cl::desc("Weight bits"),
      llvm::cl::init(InsertFakeQuantPassOptions().weightBits)};
  Opt::Option<int64_t> fqActivationBits{
      *this, "fake-quant-activation-bits", llvm::cl::desc("Activation bits"),
      llvm::cl::init(InsertFakeQuantPassOptions().activationBits)};
  Opt::Option<bool> fqReduceRange{
      *this, "fake-quant-reduce-range",
      llvm::cl::desc("One activation bit less (x86 qconfig)"),
      llvm::cl::init(InsertFakeQuantPassOptions().reduceRange)};
  Opt::Option<QuantObserver> fqObserver{
      *this, "fake-quant-observer", llvm::cl::desc("Range observer"),
      llvm::cl::init(InsertFakeQuantPassOptions().observer),
      quantObserverValues()};
  Opt::Option<QuantObserver> fqWeightObserver{
      *this, "fake-quant-weight-observer",
      llvm::cl::desc("Weight range observer"),
      llvm::cl::init(InsertFakeQuantPassOptions().weightObserver),
      quantObserverValues()};
  Opt::Option<double> fqAveragingConstant{
      *this, "fake-quant-averaging-constant",
      llvm::cl::desc("Moving-average observer constant"),
      llvm::cl::init(InsertFakeQuantPassOptions().averagingConstant)};
  Opt::Option<int64_t> fqFreezeObserversAt{
      *this, "fake-quant-freeze-observers-at",
      llvm::cl::desc("Observers update while iteration < N; 0 = always"),
      llvm::cl::init(InsertFakeQuantPassOptions().freezeObserversAt)};
  Opt::Option<bool> fqDynamicBits{
      *this, "fake-quant-dynamic-bits",
      llvm::cl::desc("Dynamic per-layer weight bit-width (adds "
                     "ds-qat-bit-width)"),
      llvm::cl::init(false)};
  Opt::Option<double> fqBitsThreshold{
      *this, "fake-quant-bits-threshold",
      llvm::cl::desc("ds-qat-bit-width's threshold"),
      llvm::cl::init(QATBitWidthPassOptions().threshold)};
  Opt::Option<int64_t> fqBitsWindow{
      *this, "fake-quant-bits-window",
      llvm::cl::desc("ds-qat-bit-width's window"),
      llvm::cl::init(QATBitWidthPassOptions().window)};
  Opt::Option<double> fqBitsMomentum{
      *this, "fake-quant-bits-momentum",
      llvm::cl::desc("ds-qat-bit-width's momentum"),
      llvm::cl::init(QATBitWidthPassOptions().momentum)};
  Opt::Option<bool> fqLearnScales{
      *this, "fake-quant-learn-scales",
      llvm::cl::desc("LSQ / LSQ+: learned scales and activation zero points"),
      llvm::cl::init(false)};
  Opt::Option<double> fqScaleLr{
      *this, "fake-quant-scale-lr",
      llvm::cl::desc("Learning rate of learned scales (0: the optimizer's)"),
      llvm::cl::init(0.0)};
  Opt::Option<int64_t> fqFrom{
      *this, "fake-quant-from",
      llvm::cl::desc("Fake quantization from this iteration on"),
      llvm::cl::init(InsertFakeQuantPassOptions().fakeQuantFrom)};

  // ds-clip-gradients.
  Opt::Option<bool> clip{*this, "clip", llvm::cl::desc("Run ds-clip-gradients"),
                         llvm::cl::init(false)};
  Opt::Option<ClipMode> clipMode{
      *this, "clip-mode", llvm::cl::desc("Clipping mode"),
      llvm::cl::init(ClipGradientsPassOptions().mode), clipModeValues()};
  Opt::Option<double> clipMaxNorm{
      *this, "clip-max-norm", llvm::cl::desc("Largest total norm (global)"),
      llvm::cl::init(ClipGradientsPassOptions().maxNorm)};
  Opt::Option<ClipNormType> clipNormType{
      *this, "clip-norm-type", llvm::cl::desc("Norm of the global mode"),
      llvm::cl::init(ClipGradientsPassOptions().normType),
      clipNormTypeValues()};
  Opt::Option<int64_t> clipHistory{
      *this, "clip-history",
      llvm::cl::desc("Global norms averaged by the adaptive threshold"),
      llvm::cl::init(ClipGradientsPassOptions().history)};
  Opt::Option<double> clipNoiseStd{
      *this, "clip-noise-std",
      llvm::cl::desc("Std of the Gaussian noise added; 0 = none"),
      llvm::cl::init(ClipGradientsPassOptions().noiseStd)};

  // ds-partition-pipeline.
  Opt::Option<int64_t> pipelineStages{
      *this, "pipeline-stages",
      llvm::cl::desc("Pipeline stages (runs ds-partition-pipeline)"),
      llvm::cl::init(0)};
  Opt::Option<int64_t> pipelineMicroBatches{
      *this, "pipeline-micro-batches",
      llvm::cl::desc("Micro-batches per step (runs ds-partition-pipeline)"),
      llvm::cl::init(1)};
  Opt::Option<std::string> pipelineSchedule{*this, "pipeline-schedule",
                                            llvm::cl::desc("1f1b or gpipe"),
                                            llvm::cl::init("1f1b")};
  Opt::Option<std::string> pipelineCluster{
      *this, "pipeline-cluster",
      llvm::cl::desc("Cluster file of ds-partition-pipeline"),
      llvm::cl::init("")};
  Opt::Option<std::string> pipelineObjective{
      *this, "pipeline-objective",
      llvm::cl::desc("bottleneck or sum (Hungarian)"),
      llvm::cl::init("bottleneck")};

  // ds-data-parallel, ds-fuse-allreduce, ds-compress-allreduce.
  Opt::Option<bool> dataParallel{
      *this, "data-parallel",
      llvm::cl::desc("Run ds-data-parallel (implied by fuse and compress)"),
      llvm::cl::init(false)};
  Opt::Option<bool> fuse{*this, "fuse", llvm::cl::desc("Run ds-fuse-allreduce"),
                         llvm::cl::init(false)};
  Opt::Option<int64_t> fuseBucketBytes{
      *this, "fuse-bucket-bytes", llvm::cl::desc("Bytes per bucket"),
      llvm::cl::init(FuseAllReducePassOptions().bucketBytes)};
  Opt::Option<int64_t> fuseFirstBucketBytes{
      *this, "fuse-first-bucket-bytes",
      llvm::cl::desc("Bytes of the first bucket"),
      llvm::cl::init(FuseAllReducePassOptions().firstBucketBytes)};
  Opt::Option<bool> compress{*this, "compress",
                             llvm::cl::desc("Run ds-compress-allreduce"),
                             llvm::cl::init(false)};
  Opt::Option<CompressionScheme> compressScheme{
      *this, "compress-scheme",
      llvm::cl::desc("three-tier, topk, fp16, bf16 or powersgd"),
      llvm::cl::init(CompressAllReducePassOptions().scheme),
      compressionSchemeValues()};
  Opt::Option<bool> compressFixedThresholds{
      *this, "compress-fixed-thresholds",
      llvm::cl::desc("three-tier: fixed theta-low / theta-high"),
      llvm::cl::init(false)};
  Opt::Option<double> compressQuantileLow{
      *this, "compress-quantile-low", llvm::cl::desc("three-tier"),
      llvm::cl::init(CompressAllReducePassOptions().quantileLow)};
  Opt::Option<double> compressQuantileHigh{
      *this, "compress-quantile-high", llvm::cl::desc("three-tier"),
      llvm::cl::init(CompressAllReducePassOptions().quantileHigh)};
  Opt::Option<double> compressThetaLow{
      *this, "compress-theta-low", llvm::cl::desc("three-tier, fixed"),
      llvm::cl::init(CompressAllReducePassOptions().thetaLow)};
  Opt::Option<double> compressThetaHigh{
      *this, "compress-theta-high", llvm::cl::desc("three-tier, fixed"),
      llvm::cl::init(CompressAllReducePassOptions().thetaHigh)};
  Opt::Option<double> compressRatio{
      *this, "compress-ratio", llvm::cl::desc("topk: the fraction sent"),
      llvm::cl::init(CompressAllReducePassOptions().ratio)};
  Opt::Option<double> compressMomentum{
      *this, "compress-momentum",
      llvm::cl::desc("DGC's momentum correction (0: off)"),
      llvm::cl::init(CompressAllReducePassOptions().momentum)};
  Opt::Option<double> compressLocalClip{
      *this, "compress-local-clip",
      llvm::cl::desc("DGC's local clipping norm (0: off)"),
      llvm::cl::init(CompressAllReducePassOptions().localClip)};
  Opt::Option<int64_t> compressRank{
      *this, "compress-rank", llvm::cl::desc("powersgd: approximation rank"),
      llvm::cl::init(CompressAllReducePassOptions().rank)};
  Opt::Option<int64_t> compressStartIteration{
      *this, "compress-start-iteration",
      llvm::cl::desc("powersgd: uncompressed iterations first"),
      llvm::cl::init(CompressAllReducePassOptions().startIteration)};
  Opt::Option<int64_t> compressWarmupIterations{
      *this, "compress-warmup-iterations",
      llvm::cl::desc("topk: iterations per DGC warm-up stage"),
      llvm::cl::init(CompressAllReducePassOptions().warmupIterations)};

  // ds-insert-optimizer (always runs).
  Opt::Option<OptimizerKind> optKind{
      *this, "optimizer-kind", llvm::cl::desc("Optimizer"),
      llvm::cl::init(InsertOptimizerPassOptions().kind), optimizerKindValues()};
  Opt::Option<double> optLr{*this, "optimizer-lr",
                            llvm::cl::desc("Learning rate"),
                            llvm::cl::init(InsertOptimizerPassOptions().lr)};
  Opt::Option<double> optMomentum{
      *this, "optimizer-momentum",
      llvm::cl::desc("SGD momentum (negative: the kind's default)"),
      llvm::cl::init(InsertOptimizerPassOptions().momentum)};
  Opt::Option<double> optDampening{
      *this, "optimizer-dampening", llvm::cl::desc("SGD dampening"),
      llvm::cl::init(InsertOptimizerPassOptions().dampening)};
  Opt::Option<bool> optNesterov{
      *this, "optimizer-nesterov", llvm::cl::desc("Nesterov momentum"),
      llvm::cl::init(InsertOptimizerPassOptions().nesterov)};
  Opt::Option<double> optBeta1{
      *this, "optimizer-beta1", llvm::cl::desc("Adam beta1"),
      llvm::cl::init(InsertOptimizerPassOptions().beta1)};
  Opt::Option<double> optBeta2{
      *this, "optimizer-beta2", llvm::cl::desc("Adam beta2"),
      llvm::cl::init(InsertOptimizerPassOptions().beta2)};
  Opt::Option<double> optEps{*this, "optimizer-eps",
                             llvm::cl::desc("Adam epsilon"),
                             llvm::cl::init(InsertOptimizerPassOptions().eps)};
  Opt::Option<double> optWeightDecay{
      *this, "optimizer-weight-decay",
      llvm::cl::desc("Weight decay (negative: the kind's default)"),
      llvm::cl::init(InsertOptimizerPassOptions().weightDecay)};
  Opt::Option<LRSchedule> optSchedule{
      *this, "optimizer-schedule", llvm::cl::desc("Learning-rate schedule"),
      llvm::cl::init(InsertOptimizerPassOptions().schedule),
      lrScheduleValues()};
  Opt::Option<int64_t> optWarmupSteps{
      *this, "optimizer-warmup-steps",
      llvm::cl::desc("Linear warm-up steps (warmup-cosine)"),
      llvm::cl::init(InsertOptimizerPassOptions().warmupSteps)};
  Opt::Option<int64_t> optTotalSteps{
      *this, "optimizer-total-steps",
      llvm::cl::desc("Steps at which the cosine reaches its floor "
                     "(0: total-steps)"),
      llvm::cl::init(InsertOptimizerPassOptions().totalSteps)};
  Opt::Option<double> optWarmupStartFactor{
      *this, "optimizer-warmup-start-factor",
      llvm::cl::desc("Learning-rate factor of the first warm-up step"),
      llvm::cl::init(InsertOptimizerPassOptions().warmupStartFactor)};
  Opt::Option<double> optMinLrFactor{
      *this, "optimizer-min-lr-factor",
      llvm::cl::desc("Final learning-rate factor of the cosine"),
      llvm::cl::init(InsertOptimizerPassOptions().minLrFactor)};

  // Lowering.
  Opt::Option<bool> lower{*this, "lower",
                          llvm::cl::desc("Append ds-cpu-pipeline"),
                          llvm::cl::init(false)};
  Opt::Option<bool> libraryGemm{
      *this, "library-gemm",
      llvm::cl::desc("ds-cpu-pipeline's library-gemm (with lower)"),
      llvm::cl::init(CPUPipelineOptions().libraryGemm)};
  Opt::Option<bool> gemmConvs{
      *this, "gemm-convs",
      llvm::cl::desc("ds-cpu-pipeline's gemm-convs (with lower)"),
      llvm::cl::init(CPUPipelineOptions().gemmConvs)};
  Opt::Option<int64_t> causalBlock{
      *this, "causal-block",
      llvm::cl::desc("ds-cpu-pipeline's causal-block (with lower)"),
      llvm::cl::init(kDefaultCausalBlock)};

  /// The passes these options run, with their options.
  TrainingPipelineConfig getConfig() const;
  /// The first option given more than once, or "" (the last value would
  /// silently win).
  std::string getRepeatedOption() const;
};

/// Appends ds-training-pipeline to `pm`: the technique passes in the
/// canonical order of DESIGN.md (the order and the slots of the passes
/// still to come are documented in lib/Pipelines/Pipelines.cpp).
void buildTrainingPipeline(OpPassManager &pm,
                           const TrainingPipelineConfig &config);

/// Appends ds-cpu-pipeline to `pm`: from a ds training step (or any ds
/// module) to the LLVM dialect, ready for the JIT, with the contract in
/// `ds.contract`. With `libraryGemm`, f32/f64 matmuls call the runtime's
/// GEMM, and with `gemmConvs` too so do the ungrouped f32/bf16/f16
/// convolutions (im2col + GEMM), and causal attention's products run in
/// blocks of `causalBlock` rows over their lower block triangle.
void buildCPUPipeline(OpPassManager &pm, bool libraryGemm = true,
                      bool gemmConvs = true,
                      int64_t causalBlock = kDefaultCausalBlock);

/// Registers ds-training-pipeline and ds-cpu-pipeline.
/// Gives a buffer returned twice, or a returned argument, its own copy
/// (works around upstream buffer-results-to-out-params; see Pipelines.cpp).
std::unique_ptr<Pass> createCopyAliasedResultsPass();

/// Step 3 of ds-cpu-pipeline and ds-gpu-pipeline: one-shot bufferization
/// with identity layouts at function boundaries, then the step's results
/// as out-parameters (aliased results copied first, static allocations
/// hoisted) and a canonicalisation.
void buildStepBufferization(OpPassManager &pm);

/// Appends ds-gpu-pipeline: a ds module down to the LLVM dialect, host code
/// calling the runtime (ds_runtime_cuda.h) and kernels embedded as
/// `gpu.binary` for `config.chip`. Fails, with the reason in `error`, on a
/// chip or format it cannot target.
LogicalResult buildGPUPipeline(OpPassManager &pm,
                               const GPUPipelineConfig &config,
                               std::string &error);

/// The lowest PTX ISA version that can target `chip` (sm_XY[a|f]), as a
/// feature string ("+ptx81"), or "" when the chip is not an NVIDIA SM
/// architecture this toolchain knows.
std::string ptxFeaturesFor(StringRef chip);

void registerDSPipelines();

} // namespace mlir::ds

#endif // DS_PIPELINES_PIPELINES_H
