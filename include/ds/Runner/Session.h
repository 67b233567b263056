//===- Session.h - Compile and call a training step ------------*- C++ -*-===//
//
// The MLIR half of the runner: bring a module at any level (forward + loss,
// gradient step, training step, lowered) to the LLVM dialect, JIT-compile
// it, and call the step with host tensors. Everything ds-run knows about a
// step comes from its contract (TrainingContract); nothing here is specific
// to a model.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNNER_SESSION_H
#define DS_RUNNER_SESSION_H

#include "ds/Dialect/DS/IR/TrainingContract.h"
#include "ds/Pipelines/Pipelines.h"
#include "ds/Runner/Npy.h"
#include "ds/Runner/QuantizedExport.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace ds::runner {

/// The level a module arrives at, read off its contract.
enum class ModuleLevel {
  ForwardLoss,  ///< loss but no gradients or parameter updates
  GradientStep, ///< returns ds.grad results
  TrainingStep, ///< returns parameter updates
  Lowered,      ///< already in the LLVM dialect with a ds.contract table
};

llvm::StringRef stringifyModuleLevel(ModuleLevel level);

/// How to bring a module to a runnable training step.
struct PrepareOptions {
  /// The passes applied to forward + loss and gradient modules, as
  /// ds-training-pipeline runs them; the module's level decides whether
  /// ds-autodiff and ds-insert-optimizer run.
  mlir::ds::TrainingPipelineConfig pipeline;
  /// The optimizer flags the user gave (e.g. "--lr 0.01"): a module whose
  /// optimizer is compiled in refuses them rather than ignore them.
  std::vector<std::string> optimizerFlags;
  /// Textual forms of the options, for the progress line.
  std::string optimizerSpelling = "kind=adamw";
  std::string lossScalingSpelling, clipSpelling, fakeQuantSpelling,
      sparsitySpelling, fuseSpelling, compressSpelling;
  /// Run the module as it is (no autodiff / optimizer): for gradient checks.
  bool asIs = false;
  /// Function to run when the module has several steps ("" = the first).
  std::string entry;
  /// With pipeline parallelism (ds-partition-pipeline, in `pipeline` or
  /// already in the module): the stage this process runs; the step's stage
  /// function `<entry>_s<stage>` is the one compiled and called.
  unsigned pipelineStage = 0;
  std::string partitionSpelling;
  /// Where the step runs: "cpu" (ds-cpu-pipeline, the default) or "cuda"
  /// (ds-gpu-pipeline for `gpuChip`, the runtime's CUDA backend).
  std::string device = "cpu";
  std::string gpuChip = "sm_90";
  /// Testing: the kernels run on the host (ds-gpu-pipeline{emulate-
  /// kernels}), which needs a driver whose device memory is host memory
  /// (the stub libcuda).
  bool gpuEmulateKernels = false;
  /// Blocks at most per kernel launch (ds-gpu-pipeline's max-blocks).
  int64_t gpuMaxBlocks = 4096;
  /// Elements per thread per iteration of an elementwise kernel
  /// (ds-gpu-pipeline's unroll; 0: from the element types).
  int64_t gpuUnroll = 0;
  /// Elementwise kernels on 16-byte vectors (ds-gpu-pipeline's vectorize).
  bool gpuVectorize = true;
  /// Narrow-float casts in kernels as the chip's instructions
  /// (ds-gpu-pipeline's native-casts).
  bool gpuNativeCasts = true;
  /// 32-bit kernel indices where they fit (ds-gpu-pipeline's index32).
  bool gpuIndex32 = false;
  /// Row groups as one launch (ds-gpu-pipeline's fuse-rows).
  bool gpuFuseRows = true;
  /// A full reduction and the elementwise op reading its tensor as one
  /// launch (ds-gpu-pipeline's fuse-siblings).
  bool gpuFuseSiblings = true;
  /// Rows kept in registers by warps' row groups (ds-gpu-pipeline's
  /// cache-rows).
  bool gpuCacheRows = true;
  /// Column sums over a row group's rows in its kernel (ds-gpu-pipeline's
  /// row-columns).
  bool gpuRowColumns = true;
  /// Gradients computed in their data-parallel buckets (ds-gpu-pipeline's
  /// bucket-views).
  bool gpuBucketViews = true;
  /// Three-tier and top-k buckets encoded on the device, those of at least
  /// gpuDeviceEncodersMin elements (ds-gpu-pipeline's device-encoders and
  /// device-encoders-min).
  bool gpuDeviceEncoders = true;
  int64_t gpuDeviceEncodersMin = 65536;
  /// Where ds-gpu-launch-report writes ("-": standard error); empty: none.
  std::string gpuLaunchReport;
  /// Compile without running here: keep the machine code so that
  /// writeObject can save it (ds-run --emit-step). With device "cuda" no
  /// device is needed (the kernels are compiled for `gpuChip`).
  bool compileOnly = false;
  /// Print the compiler's warnings (ds-run: replica 0 of each stage alone,
  /// as every replica compiles the same step).
  bool showWarnings = true;
  /// For forward + loss modules: also compile the forward alone, so that
  /// held-out evaluation does not run the backward and the update.
  bool forwardForEval = false;
  /// With forwardForEval and fake quantization: also compile the forward
  /// converted to integer inference (ds-convert-fake-quant) and the plain
  /// f32 forward, evaluated beside the fake-quantized one.
  bool integerEval = false;
};

/// The forward-only copies of a step that evaluation runs.
enum class EvalKind {
  Forward, ///< the step's forward (fake-quantized as in training)
  Integer, ///< converted to integer inference (int8 GEMMs)
  Float,   ///< without fake quantization, in f32
  Weights, ///< the integer copy's weight preparation (once per evaluation)
};

/// Timings of compilation, in seconds.
/// The time level (the module's `ds.precision_schedule`): which step
/// variant runs which steps. Variant 0 is the step itself.
struct PrecisionSchedule {
  struct Phase {
    std::string name; ///< "warm-up", "policy", "fine-tune"
    unsigned variant = 0;
    int64_t begin = 0, end = 0; ///< 0-based steps [begin, end)
  };
  std::vector<Phase> phases;
  unsigned high = 0;        ///< the high-precision variant
  int64_t totalSteps = 0;   ///< what the schedule was built for
  int64_t anomalySteps = 0; ///< steps in `high` after an anomaly
};

struct CompileTimes {
  double mlir = 0; ///< ds passes and lowering to the LLVM dialect
  double llvm = 0; ///< translation to LLVM IR, optimisation, machine code
};

/// Whether `arg` is state each data-parallel rank keeps for itself (the
/// compressors' error feedback, kinds "comm.*"): a checkpoint of N ranks
/// holds N copies of it, `key@rank<r>`.
inline bool isPerRankState(const mlir::ds::ContractArg &arg) {
  return arg.role == mlir::ds::ArgRole::State &&
         arg.state.getKind().starts_with("comm.");
}

/// A compiled training step.
class StepProgram {
public:
  ~StepProgram();
  StepProgram(const StepProgram &) = delete;
  StepProgram &operator=(const StepProgram &) = delete;
  /// Brings `module` to the LLVM dialect as described by `options`, then
  /// JIT-compiles it. `log` receives one line per decision ("applying
  /// ds-autodiff ..."). Errors carry the diagnostics MLIR emitted.
  static llvm::Expected<std::unique_ptr<StepProgram>>
  compile(mlir::ModuleOp module, const PrepareOptions &options,
          const std::function<void(const std::string &)> &log);

  const mlir::ds::TrainingContract &contract() const { return stepContract; }
  /// The forward-only copy of the step (see PrepareOptions::forwardForEval),
  /// or null. Its arguments are the first arguments of the step.
  const mlir::ds::TrainingContract *
  evalContract(EvalKind kind = EvalKind::Forward) const {
    const auto &c = evalSteps[static_cast<unsigned>(kind)];
    return c ? &*c : nullptr;
  }
  /// What ds-convert-fake-quant did to the integer copy (with integerEval).
  const std::vector<std::string> &integerConversion() const {
    return conversion;
  }
  /// The values the integer copy quantizes (with integerEval).
  const std::vector<QuantizedValue> &quantizedValues() const {
    return quantized;
  }
  ModuleLevel inputLevel() const { return level; }
  const CompileTimes &times() const { return compileTimes; }
  /// The step's entries of the module's `ds.precision_map` (one object per
  /// op: compute, storage and gradient types and the rule); empty when the
  /// module has none.
  const llvm::json::Array &precisionMap() const { return precision; }

  /// Calls the step: `args` are the contract's arguments in order, and the
  /// results are written into `results` (which must already have the
  /// contract's result types, see makeTensor). Fails on a runtime error
  /// reported by the runtime library.
  llvm::Error run(llvm::ArrayRef<HostTensor *> args,
                  llvm::MutableArrayRef<HostTensor> results,
                  unsigned variant = 0) {
    return call(variant == 0 ? stepContract : variants[variant], args, results);
  }
  /// The step's variants (the step first), all with one signature, and the
  /// schedule between them (null without a time level).
  llvm::ArrayRef<mlir::ds::TrainingContract> stepVariants() const {
    return variants;
  }
  const PrecisionSchedule *schedule() const {
    return precisionSchedule ? &*precisionSchedule : nullptr;
  }
  /// Whether the step averages its gradients over the ranks of an MPI job
  /// (ds-data-parallel ran: the module has `ds.data_parallel`).
  bool isDataParallel() const { return dataParallel; }
  /// Whether the step was compiled for and runs on a CUDA device.
  bool runsOnGPU() const { return onGPU; }
  /// Pipeline parallelism (ds-partition-pipeline ran: the module has
  /// `ds.pipeline`): the number of stages, 0 without a pipeline; the
  /// micro-batches per step; and the plan, for the report.
  unsigned pipelineStages() const { return stages; }
  unsigned microBatches() const { return micro; }
  const llvm::json::Object &pipelinePlan() const { return plan; }

  /// Writes the compiled host code (with the kernels' cubins embedded for a
  /// GPU step) as a relocatable object: exactly the machine code the JIT
  /// runs. Needs PrepareOptions::compileOnly.
  llvm::Error writeObject(llvm::StringRef path) const;

  /// Calls the forward-only copy (evalContract() must be set) with the
  /// leading arguments of the step.
  llvm::Error runEval(llvm::ArrayRef<HostTensor *> args,
                      llvm::MutableArrayRef<HostTensor> results,
                      EvalKind kind = EvalKind::Forward) {
    return call(*evalContract(kind), args, results);
  }

  /// Calls variant `variant` of the step on tensors that already live at
  /// `data`: the arguments, then the results, in the contract's order and
  /// with its shapes (on the GPU, device buffers). Nothing is copied and,
  /// on the GPU, nothing waits: the step is enqueued on the runtime's
  /// stream. Fails on a runtime error reported so far.
  llvm::Error runAt(llvm::ArrayRef<void *> data, unsigned variant = 0);
  /// Likewise for the forward-only copy `kind` (evalContract(kind) must be
  /// set): `data` holds its arguments (the step's leading ones), then its
  /// results.
  llvm::Error runEvalAt(EvalKind kind, llvm::ArrayRef<void *> data);

  /// Frees the device buffers run() and runEval() copy through (they are
  /// kept for the next call otherwise).
  void releaseDeviceBuffers();

private:
  llvm::Error call(const mlir::ds::TrainingContract &contract,
                   llvm::ArrayRef<HostTensor *> args,
                   llvm::MutableArrayRef<HostTensor> results);
  llvm::Error runContractAt(const mlir::ds::TrainingContract &contract,
                            llvm::ArrayRef<void *> data);
  /// Invokes `contract`'s function on one memref descriptor per tensor.
  llvm::Error invoke(const mlir::ds::TrainingContract &contract,
                     std::vector<std::vector<int64_t>> &descriptors);
  StepProgram() = default;
  /// On the GPU: the device buffer of each argument and result (in that
  /// order), reused across calls.
  void *deviceBuffer(unsigned index, size_t bytes);
  /// Reads the module's `ds.precision_schedule` of `step`, if any.
  static llvm::Error readSchedule(mlir::ModuleOp module, llvm::StringRef step,
                                  StepProgram &program);
  mlir::ds::TrainingContract stepContract;
  std::vector<mlir::ds::TrainingContract> variants;
  std::optional<PrecisionSchedule> precisionSchedule;
  std::vector<std::string> variantNames; ///< of variants 1, 2, ...
  std::optional<mlir::ds::TrainingContract> evalSteps[4];
  std::vector<std::string> conversion;
  std::vector<QuantizedValue> quantized;
  ModuleLevel level = ModuleLevel::Lowered;
  bool dataParallel = false;
  unsigned stages = 0, micro = 1;
  llvm::json::Object plan;
  CompileTimes compileTimes;
  llvm::json::Array precision;
  bool onGPU = false;
  bool objectKept = false;
  std::vector<std::pair<void *, size_t>> deviceBuffers;
  std::unique_ptr<mlir::ExecutionEngine> engine;
};

/// The host dtype of a contract tensor type, or an error naming it.
llvm::Expected<DType> dtypeOf(mlir::RankedTensorType type);
/// A zero tensor of the contract type.
llvm::Expected<HostTensor> makeTensor(mlir::RankedTensorType type);

/// Registers every dialect and translation a session needs in `registry`,
/// and (once per process) every pass; call before parsing.
void registerSessionDialects(mlir::DialectRegistry &registry);

} // namespace ds::runner

#endif // DS_RUNNER_SESSION_H
