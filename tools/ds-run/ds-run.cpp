//===- ds-run.cpp - Compile and run training steps ------------------------===//
//
// A thin command line over lib/Runner: parse a module at any level, bring it
// to a compiled training step (Session), and run it (Trainer). Everything it
// needs to know about the step comes from the training-step contract.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Pipelines/Pipelines.h"
#include "ds/Runner/Checkpoint.h"
#include "ds/Runner/Random.h"
#include "ds/Runner/Report.h"
#include "ds/Runner/Session.h"
#include "ds/Runner/StepExport.h"
#include "ds/Runner/Trainer.h"
#include "ds/Runtime/StepGraphs.h"
#include "ds/Runtime/ds_runtime.h"
#ifdef DSRT_HAVE_CUDA
#include "ds/Runtime/ds_runtime_cuda.h"
#endif

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <cstdlib>
#include <unistd.h>

using namespace llvm;
using namespace ds::runner;

namespace {
cl::OptionCategory runCat("Running");
cl::OptionCategory
    optCat("Optimizer (for forward + loss and gradient modules)");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<module.mlir>"),
                               cl::Required);
cl::opt<int64_t> steps("steps", cl::desc("Total number of steps (default 100)"),
                       cl::init(100), cl::cat(runCat));
cl::opt<std::string>
    device("device",
           cl::desc("Where the step runs: cpu (default; ds-cpu-pipeline, the "
                    "JIT) or cuda (ds-gpu-pipeline, the runtime's CUDA "
                    "backend; needs a driver and a device)"),
           cl::init("cpu"), cl::cat(runCat));
cl::opt<std::string> gpuChip(
    "gpu-chip",
    cl::desc("With --device cuda: the chip the kernels are compiled for "
             "(default sm_90)"),
    cl::init("sm_90"), cl::cat(runCat));
cl::opt<bool> gpuEmulateKernels(
    "gpu-emulate-kernels",
    cl::desc("With --device cuda, for testing without a GPU: run the "
             "kernels on the host as loops (ds-gpu-pipeline{emulate-"
             "kernels}); only on the stub libcuda, whose device memory is "
             "host memory"),
    cl::init(false), cl::cat(runCat));
cl::opt<int64_t> gpuMaxBlocks(
    "gpu-max-blocks",
    cl::desc("With --device cuda: blocks at most per kernel launch (default "
             "4096; the kernels' grid-stride loops cover the rest). A small "
             "value makes those loops take several trips, which the "
             "emulated kernels' tests use"),
    cl::init(4096), cl::cat(runCat));
cl::opt<int64_t> gpuUnroll(
    "gpu-unroll",
    cl::desc("With --device cuda: elements per thread per iteration of an "
             "elementwise kernel, their loads issued together "
             "(ds-gpu-pipeline's unroll; default 0: 16 bytes' worth of the "
             "widest element, 2 to 8; 1 to compare)"),
    cl::init(0), cl::cat(runCat));
cl::opt<bool> gpuVectorize(
    "gpu-vectorize",
    cl::desc("With --device cuda: kernels over buffers contiguous along "
             "the innermost dimension (elementwise, row groups, reductions, "
             "cast-transposes) load and store vectors of up to 16 bytes "
             "(ds-gpu-pipeline's vectorize; default true, =false to "
             "compare)"),
    cl::init(true), cl::cat(runCat));
cl::opt<bool> gpuNativeCasts(
    "gpu-native-casts",
    cl::desc("With --device cuda: convert bf16/f16 (sm_80+) and FP8 "
             "(sm_89+) in kernels with the chip's instructions "
             "(ds-gpu-pipeline's native-casts; default true, =false for the "
             "integer code the CPU runs, to compare)"),
    cl::init(true), cl::cat(runCat));
cl::opt<bool> gpuIndex32(
    "gpu-index32",
    cl::desc("With --device cuda: kernels' index arithmetic in 32 bits "
             "where every index fits (ds-gpu-pipeline's index32; off by "
             "default until measured on a GPU)"),
    cl::init(false), cl::cat(runCat));
cl::opt<bool> gpuFuseRows(
    "gpu-fuse-rows",
    cl::desc("With --device cuda: run a softmax's or a layer norm's passes "
             "over each row as one block-per-row launch (ds-gpu-pipeline's "
             "fuse-rows; default true, =false to compare)"),
    cl::init(true), cl::cat(runCat));
cl::opt<bool> gpuFuseSiblings(
    "gpu-fuse-siblings",
    cl::desc("With --device cuda: run a tensor's amax (a reduction over "
             "every element) and the elementwise op after it that reads the "
             "tensor (its FP8 cast) as one launch, and column sums of one "
             "tensor with the op before them that writes it "
             "(ds-gpu-pipeline's fuse-siblings; default true, =false to "
             "compare)"),
    cl::init(true), cl::cat(runCat));
cl::opt<bool> gpuCacheRows(
    "gpu-cache-rows",
    cl::desc("With --device cuda: a warp's row group keeps the row "
             "elements several of its ops read in registers "
             "(ds-gpu-pipeline's cache-rows; default true, =false to "
             "compare)"),
    cl::init(true), cl::cat(runCat));
cl::opt<int64_t> causalBlock(
    "causal-block",
    cl::desc("Run causal attention's matmuls as one library GEMM per block "
             "of this many rows, over the lower block triangle only, on the "
             "CPU and with --device cuda (default 256; 0: one GEMM each, to "
             "compare)"),
    cl::init(mlir::ds::kDefaultCausalBlock), cl::cat(runCat));
cl::opt<bool> gpuRowColumns(
    "gpu-row-columns",
    cl::desc("With --device cuda: a row group's kernel also folds the "
             "column sums over its rows, such as a layer norm's weight and "
             "bias gradients (ds-gpu-pipeline's row-columns; default true, "
             "=false to compare)"),
    cl::init(true), cl::cat(runCat));
cl::opt<bool> gpuBucketViews(
    "gpu-bucket-views",
    cl::desc("With --device cuda: a data-parallel bucket's gradients are "
             "computed in their slices of it, not copied in "
             "(ds-gpu-pipeline's bucket-views; default true, =false to "
             "compare)"),
    cl::init(true), cl::cat(runCat));
cl::opt<bool> gpuDeviceEncoders(
    "gpu-device-encoders",
    cl::desc("With --device cuda: a three-tier or top-k compressed bucket "
             "is encoded on the device and only what its payload needs goes "
             "to the host (ds-gpu-pipeline's device-encoders; default true, "
             "=false: the host encodes it, to compare)"),
    cl::init(true), cl::cat(runCat));
cl::opt<int64_t> gpuDeviceEncodersMin(
    "gpu-device-encoders-min",
    cl::desc("With --device cuda: encode on the device only compressed "
             "buckets of at least this many elements (default 65536); "
             "smaller ones go to the host encoder (ds-gpu-pipeline's "
             "device-encoders-min)"),
    cl::init(65536), cl::cat(runCat));
cl::opt<std::string> gpuLaunchReport(
    "gpu-launch-report",
    cl::desc("With --device cuda: write what each kernel launch and "
             "library GEMM of the step moves and computes, and the step's "
             "roofline bound at an H200's peaks, to FILE (- for standard "
             "error; ds-gpu-pipeline's launch-report, docs/GPUBackend.md)"),
    cl::value_desc("FILE"), cl::cat(runCat));
cl::opt<std::string> emitStep(
    "emit-step",
    cl::desc("Compile the step ahead of time instead of running it: write "
             "DIR/step.so (the host code; a GPU step's cubins embedded), "
             "DIR/step.json (its arguments and results) and DIR/init (the "
             "initial state, a checkpoint) for ds-step-run or a program of "
             "your own (docs/AheadOfTime.md); --steps is the schedules' "
             "length"),
    cl::value_desc("DIR"), cl::cat(runCat));
cl::opt<bool> emitInit(
    "emit-init",
    cl::desc("With --emit-step: also write the initial state, DIR/init "
             "(default true; =false for a step whose state is drawn where it "
             "runs, ds-step-run --init-random)"),
    cl::init(true), cl::cat(runCat));
cl::opt<uint64_t> seed("seed", cl::desc("Seed of initialisation and data"),
                       cl::init(0), cl::cat(runCat));
cl::opt<std::string> paramsDir("params",
                               cl::desc("Load parameters from DIR/<name>.npy"),
                               cl::value_desc("DIR"), cl::cat(runCat));
cl::list<std::string> dataFiles("data",
                                cl::desc("Feed input NAME from a data set "
                                         ".npy [S, ...] (repeatable)"),
                                cl::value_desc("NAME=FILE"), cl::cat(runCat));
cl::list<std::string> evalFiles("eval-data",
                                cl::desc("Held-out data set for input NAME"),
                                cl::value_desc("NAME=FILE"), cl::cat(runCat));
cl::opt<int64_t> evalEvery("eval-every",
                           cl::desc("Report held-out loss every K steps"),
                           cl::init(0), cl::cat(runCat));
cl::opt<int64_t> evalBatches("eval-batches",
                             cl::desc("Held-out batches per evaluation"),
                             cl::init(8), cl::cat(runCat));
cl::opt<int64_t> printEvery("print-every",
                            cl::desc("Progress line every K steps"),
                            cl::init(1), cl::cat(runCat));
cl::opt<int64_t> reportEvery(
    "report-every",
    cl::desc("Read the loss and metrics back every K steps (default: 1 on "
             "the CPU; 10 with --device cuda, whose steps are enqueued "
             "without waiting in between)"),
    cl::init(0), cl::cat(runCat));
cl::opt<bool> cudaGraphs(
    "cuda-graphs",
    cl::desc("With --device cuda: capture the step as CUDA graphs (one per "
             "set of buffers, from the second step on) and replay them, one "
             "launch per step instead of one per kernel"),
    cl::init(false), cl::cat(runCat));
cl::opt<bool> quiet("quiet", cl::desc("No progress output"), cl::init(false),
                    cl::cat(runCat));
cl::opt<std::string> reportPath("report", cl::desc("Write a JSON report"),
                                cl::value_desc("FILE.json"), cl::cat(runCat));
cl::opt<std::string> checkpointDir("checkpoint",
                                   cl::desc("Save all state to DIR at the end"),
                                   cl::value_desc("DIR"), cl::cat(runCat));
cl::opt<int64_t> checkpointEvery("checkpoint-every",
                                 cl::desc("Also save every K steps"),
                                 cl::init(0), cl::cat(runCat));
cl::opt<std::string> resumeDir("resume", cl::desc("Resume from a checkpoint"),
                               cl::value_desc("DIR"), cl::cat(runCat));
cl::opt<std::string>
    saveResults("save-results",
                cl::desc("Write every result of the last step as .npy"),
                cl::value_desc("DIR"), cl::cat(runCat));
cl::opt<bool> allowNonfiniteLoss(
    "allow-nonfinite-loss",
    cl::desc("Go on when the loss is NaN or inf on a step loss scaling did "
             "not skip (default: stop, keeping the last good state)"),
    cl::init(false), cl::cat(runCat));
cl::opt<bool> allowNonfiniteInputs(
    "allow-nonfinite-inputs",
    cl::desc("Accept NaN and inf in float data files (default: refused, "
             "naming the file, row and column)"),
    cl::init(false), cl::cat(runCat));
cl::opt<std::string> entry("entry", cl::desc("Step function to run"),
                           cl::cat(runCat));
cl::opt<bool> asIs("as-is",
                   cl::desc("Do not add autodiff or an optimizer; run the "
                            "module's function as it is"),
                   cl::init(false), cl::cat(runCat));

cl::OptionCategory
    guardCat("Loss scaling, clipping and fault injection (for forward + loss "
             "and gradient modules)");
cl::opt<std::string> precision(
    "precision", cl::ValueOptional,
    cl::desc("Add ds-assign-precision after autodiff: the default policy "
             "(the seeds' mixed FP8/BF16 mapping), or the policy file given"),
    cl::value_desc("POLICY"), cl::cat(guardCat));
cl::opt<int64_t> anomalySteps(
    "anomaly-steps",
    cl::desc("With --precision: after a gradient anomaly, run the "
             "high-precision variant of the step for K steps (0: only log)"),
    cl::value_desc("K"), cl::init(0), cl::cat(guardCat));
cl::opt<std::string> lossScaling(
    "loss-scaling", cl::ValueOptional,
    cl::desc("Add ds-insert-loss-scaling (torch.amp.GradScaler's defaults); "
             "a value gives its options, e.g. "
             "--loss-scaling='growth-interval=3 hysteresis=2'"),
    cl::value_desc("OPTIONS"), cl::cat(guardCat));
cl::opt<std::string> fakeQuant(
    "fake-quant", cl::ValueOptional,
    cl::desc("Add ds-insert-fake-quant (quantization-aware training with "
             "torch.ao's x86 qconfig) before autodiff; a value gives its "
             "options, e.g. --fake-quant='weight-bits=4 "
             "freeze-observers-at=500'"),
    cl::value_desc("OPTIONS"), cl::cat(guardCat));
cl::opt<std::string> sparsity(
    "sparsity", cl::ValueOptional,
    cl::desc("Add ds-sparsify-matmul and ds-update-sparsity-masks (dynamic "
             "8x8 block sparsity: the seeds' cosine schedule 0.8 -> 0.98 "
             "over the run, masks updated every 100 steps); a value gives "
             "its options, e.g. --sparsity='schedule=constant final=0.9 "
             "regrow'"),
    cl::value_desc("OPTIONS"), cl::cat(guardCat));
cl::opt<bool> integerEval(
    "integer-eval",
    cl::desc("With --fake-quant and --eval-every: also evaluate the forward "
             "converted to integer inference (ds-convert-fake-quant: int8 "
             "GEMMs) and the plain f32 forward on the same held-out batches, "
             "with their losses and forward times"),
    cl::init(false), cl::cat(guardCat));
cl::opt<std::string> exportQuantized(
    "export-quantized",
    cl::desc("With --fake-quant: after the run, write the int8 model (int8 "
             "weights, scales and zero points as .npy, other parameters in "
             "f32, and quantized.json with torch.ao's names; "
             "ds_torch.load_quantized builds the torch.ao model from it)"),
    cl::value_desc("DIR"), cl::cat(guardCat));
cl::opt<std::string> clipGradients(
    "clip-gradients", cl::ValueOptional,
    cl::desc("Add ds-clip-gradients with these options, e.g. "
             "--clip-gradients='mode=global max-norm=1.0' or 'mode=adaptive'"),
    cl::value_desc("OPTIONS"), cl::cat(guardCat));
cl::opt<std::string> injectNonfinite(
    "inject-nonfinite",
    cl::desc("Poison an activation inside the step on N random steps "
             "(seeded by --seed), or on the listed steps (3,17,40 or at:17); "
             "needs --loss-scaling"),
    cl::value_desc("N|S1,S2,..."), cl::cat(guardCat));

cl::OptionCategory
    dpCat("Data parallelism (run under scripts/ds-mpirun or mpirun)");
cl::opt<bool> dataParallel(
    "data-parallel",
    cl::desc("Add ds-data-parallel: average the gradients over the ranks; "
             "rank r trains on rows [r b, (r + 1) b) of global batches of "
             "N b rows (b: the module's batch)"),
    cl::init(false), cl::cat(dpCat));
cl::opt<std::string> fuseAllReduce(
    "fuse-allreduce", cl::ValueOptional,
    cl::desc("Add ds-fuse-allreduce (DDP's 25 MiB buckets, the first 1 MiB); "
             "a value gives its options, e.g. --fuse-allreduce="
             "'bucket-bytes=65536 first-bucket-bytes=16384'"),
    cl::value_desc("OPTIONS"), cl::cat(dpCat));
cl::opt<std::string> compressAllReduce(
    "compress-allreduce", cl::ValueOptional,
    cl::desc("Add ds-compress-allreduce (the seed's three tiers by default); "
             "a value gives its options, e.g. --compress-allreduce="
             "'scheme=topk ratio=0.001'"),
    cl::value_desc("OPTIONS"), cl::cat(dpCat));
cl::opt<double> commTimeout(
    "comm-timeout",
    cl::desc("Seconds a collective may wait for the other ranks before the "
             "run fails (a stopped or dead rank); 0 waits forever "
             "(default 300)"),
    cl::init(300.0), cl::cat(dpCat));
cl::opt<bool> deterministic(
    "deterministic",
    cl::desc("Sum gradients in rank order: bit-identical results for any "
             "bucketing and MPI algorithm"),
    cl::init(false), cl::cat(dpCat));
cl::opt<int64_t> checkReplicas(
    "check-replicas",
    cl::desc("Compare a hash of every rank's parameters every K steps (0: "
             "at the start, at checkpoints and at the end)"),
    cl::init(0), cl::cat(dpCat));
cl::opt<int64_t> globalBatch(
    "global-batch",
    cl::desc("Check that the global batch is B rows: the module's batch "
             "times the number of ranks"),
    cl::value_desc("B"), cl::init(0), cl::cat(dpCat));

cl::OptionCategory
    ppCat("Pipeline parallelism and gradient accumulation (ranks = stages x "
          "replicas under scripts/ds-mpirun)");
cl::opt<int64_t> pipelineStages(
    "stages",
    cl::desc("Add ds-partition-pipeline: cut the step into S stages, one per "
             "rank (rank r is stage r % S of replica r / S)"),
    cl::value_desc("S"), cl::init(0), cl::cat(ppCat));
cl::opt<int64_t> microBatches(
    "micro-batches",
    cl::desc("Micro-batches per step of the pipeline: the step's batch "
             "inputs grow M times (default 1)"),
    cl::value_desc("M"), cl::init(1), cl::cat(ppCat));
cl::opt<std::string> pipelineSchedule("pipeline-schedule",
                                      cl::desc("1f1b (default) or gpipe"),
                                      cl::init("1f1b"), cl::cat(ppCat));
cl::opt<std::string> clusterFile(
    "cluster",
    cl::desc("Cluster file the pipeline is planned for "
             "(docs/PipelinePartitioning.md); default: identical devices"),
    cl::value_desc("FILE"), cl::cat(ppCat));
cl::opt<std::string> pipelineObjective(
    "pipeline-objective",
    cl::desc("Stage-to-device assignment: bottleneck (default) or sum"),
    cl::init("bottleneck"), cl::cat(ppCat));
cl::opt<int64_t> accumulateSteps(
    "accumulate",
    cl::desc("Gradient accumulation: M micro-batches per step, their mean "
             "gradient applied once (one stage of ds-partition-pipeline)"),
    cl::value_desc("M"), cl::init(0), cl::cat(ppCat));

cl::opt<mlir::ds::OptimizerKind>
    optKind("optimizer", cl::desc("Optimizer"),
            cl::init(mlir::ds::OptimizerKind::AdamW),
            mlir::ds::optimizerKindValues(), cl::cat(optCat));
cl::opt<double> lr("lr", cl::desc("Learning rate"), cl::init(1e-3),
                   cl::cat(optCat));
cl::opt<double> momentum("momentum", cl::desc("SGD momentum (-1: default)"),
                         cl::init(-1.0), cl::cat(optCat));
cl::opt<double> weightDecay("weight-decay",
                            cl::desc("Weight decay (-1: optimizer default)"),
                            cl::init(-1.0), cl::cat(optCat));
cl::opt<double> beta1("beta1", cl::desc("Adam beta1"), cl::init(0.9),
                      cl::cat(optCat));
cl::opt<double> beta2("beta2", cl::desc("Adam beta2"), cl::init(0.999),
                      cl::cat(optCat));
cl::opt<double> eps("eps", cl::desc("Adam epsilon"), cl::init(1e-8),
                    cl::cat(optCat));
cl::opt<mlir::ds::LRSchedule> schedule("schedule",
                                       cl::desc("Learning-rate schedule"),
                                       cl::init(mlir::ds::LRSchedule::Constant),
                                       mlir::ds::lrScheduleValues(),
                                       cl::cat(optCat));
cl::opt<int64_t> warmupSteps("warmup-steps",
                             cl::desc("Linear warm-up steps (warmup-cosine)"),
                             cl::init(0), cl::cat(optCat));
cl::opt<int64_t> totalSteps("total-steps",
                            cl::desc("Cosine length (default: --steps)"),
                            cl::init(0), cl::cat(optCat));

/// `--threads N`: LLVM's own libraries already register a global option
/// named "threads", so ds-run takes this one out of argv before the
/// command-line parser sees it. Returns false on a malformed value.
bool extractThreads(int &argc, char **argv, int &threads) {
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    StringRef arg(argv[i]);
    StringRef value;
    if (arg == "--threads" || arg == "-threads") {
      if (i + 1 >= argc)
        return false;
      value = argv[++i];
    } else if (arg.consume_front("--threads=") ||
               arg.consume_front("-threads=")) {
      value = arg;
    } else {
      argv[out++] = argv[i];
      continue;
    }
    if (value.getAsInteger(10, threads) || threads < 0)
      return false;
  }
  argc = out;
  return true;
}

/// The spelling of an enum option's value, as its parser knows it.
template <typename T> StringRef spellingOf(cl::opt<T> &option) {
  cl::OptionValue<T> value(option.getValue());
  const auto &parser = option.getParser();
  for (unsigned i = 0, e = parser.getNumOptions(); i < e; ++i)
    if (parser.getOptionValue(i).compare(value))
      return parser.getOption(i);
  return "";
}

/// Reads a pass's option string ("growth-interval=3 hysteresis=2") into
/// ds-training-pipeline's options, where the pass's options are spelled
/// `<prefix>-<option>`, and turns the pass on. Returns false with a message.
bool parseTechniqueOptions(mlir::ds::TrainingPipelineOptions &options,
                           StringRef prefix, StringRef text,
                           std::string &error) {
  std::string prefixed = prefix.str();
  SmallVector<StringRef> words;
  text.split(words, ' ', -1, /*KeepEmpty=*/false);
  for (StringRef word : words)
    prefixed += " " + prefix.str() + "-" + word.str();
  // The parser prints what it rejects; say which word it was.
  if (succeeded(options.parseFromString(prefixed))) {
    std::string twice = options.getRepeatedOption();
    if (twice.empty())
      return true;
    error = "option '" + StringRef(twice).drop_front(prefix.size() + 1).str() +
            "' is given more than once";
    return false;
  }
  error =
      "cannot parse the options '" + text.str() + "' (see the message above)";
  return false;
}

/// Parses NAME=FILE options into a map.
bool parseAssignments(const cl::list<std::string> &list, StringRef flag,
                      StringMap<std::string> &out) {
  for (const std::string &item : list) {
    auto [name, file] = StringRef(item).split('=');
    if (name.empty() || file.empty()) {
      errs() << "ds-run: error: --" << flag << " expects NAME=FILE, got '"
             << item << "'\n";
      return false;
    }
    auto [it, inserted] = out.try_emplace(name, file.str());
    if (!inserted) {
      errs() << "ds-run: error: --" << flag << " gives input '" << name
             << "' twice ('" << it->second << "' and '" << file << "')\n";
      return false;
    }
  }
  return true;
}
} // namespace

/// The 1-based steps `--inject-nonfinite` poisons: an explicit list
/// ("3,17,40", "at:17") or N distinct random steps of [1, steps] drawn from
/// the seeded stream. Returns false with a message on a malformed value.
bool parseInjectSteps(StringRef value, int64_t steps, uint64_t seed,
                      std::vector<int64_t> &out, std::string &error) {
  bool isList = value.consume_front("at:") || value.contains(',');
  if (isList) {
    SmallVector<StringRef> parts;
    value.split(parts, ',', -1, /*KeepEmpty=*/false);
    for (StringRef p : parts) {
      int64_t s;
      if (p.trim().getAsInteger(10, s) || s < 1) {
        error = "--inject-nonfinite: '" + p.str() + "' is not a step >= 1";
        return false;
      }
      out.push_back(s);
    }
  } else {
    int64_t n;
    if (value.getAsInteger(10, n) || n < 0 || n > steps) {
      error = "--inject-nonfinite: expected a count in [0, --steps] or a list "
              "of steps, got '" +
              value.str() + "'";
      return false;
    }
    // A partial Fisher-Yates shuffle of 1..steps.
    RandomStream rng(seed, hashBytes("inject-nonfinite") >> 2);
    std::vector<int64_t> all(steps);
    for (int64_t i = 0; i < steps; ++i)
      all[i] = i + 1;
    for (int64_t i = 0; i < n; ++i)
      std::swap(all[i], all[i + rng.uniformInt(steps - i)]);
    out.assign(all.begin(), all.begin() + n);
  }
  llvm::sort(out);
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return true;
}

/// A compiled step allocates and frees the same temporaries every step. With
/// glibc's defaults, large blocks are mmap'ed and unmapped each time, so
/// every step faults all their pages in again (about 15 % of a GPT step);
/// keeping them in the heap lets later steps reuse them.
static void keepLargeAllocations() {
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  keepLargeAllocations();
  int threads = 0;
  if (!extractThreads(argc, argv, threads)) {
    errs() << "ds-run: error: --threads expects a non-negative integer\n";
    return 1;
  }
  // --help lists ds-run's own options, not those of the LLVM libraries.
  cl::HideUnrelatedOptions({&runCat, &optCat, &guardCat, &dpCat, &ppCat});
  cl::ParseCommandLineOptions(
      argc, argv,
      "ds-run: compile a ds training step and run it on the CPU\n\n"
      "The module may be a forward + loss (autodiff and an optimizer are "
      "added), a gradient step (an optimizer is added), a training step, or "
      "an already lowered module.\n\n"
      "  --threads=<N>  Runtime threads (GEMMs); 0 = all cores (default)\n");

  auto badOption = [](StringRef msg) {
    errs() << "ds-run: error: " << msg << "\n";
    // Under mpirun a peer may wait in a collective: leave at once.
    if (dsrt_comm_size() > 1) {
      outs().flush();
      errs().flush();
      _exit(1);
    }
    dsrt_comm_finalize();
    return 1;
  };
  if (steps < 0)
    return badOption("--steps must be >= 0");
  if (evalEvery < 0 || evalBatches < 1 || printEvery < 1 || checkpointEvery < 0)
    return badOption("--eval-every and --checkpoint-every must be >= 0, "
                     "--eval-batches and --print-every >= 1");
  if (reportEvery < 0)
    return badOption("--report-every must be >= 1 (or 0: the device's "
                     "default)");
  if (!reportPath.empty()) {
    StringRef parent = sys::path::parent_path(reportPath);
    if (!parent.empty() && !sys::fs::is_directory(parent))
      return badOption(
          ("--report: directory '" + parent + "' does not exist").str());
  }

  if (commTimeout < 0 || checkReplicas < 0 || globalBatch < 0)
    return badOption("--comm-timeout, --check-replicas and --global-batch "
                     "must be >= 0");
  bool ppRequested =
      pipelineStages.getNumOccurrences() || microBatches.getNumOccurrences() ||
      clusterFile.getNumOccurrences() || accumulateSteps.getNumOccurrences();
  if (pipelineStages < 0 || microBatches < 1 || accumulateSteps < 0)
    return badOption("--stages must be >= 1, --micro-batches and "
                     "--accumulate >= 1");
  if (accumulateSteps.getNumOccurrences() &&
      (pipelineStages > 1 || microBatches.getNumOccurrences()))
    return badOption("--accumulate M is one stage with M micro-batches: give "
                     "either it or --stages / --micro-batches");
  if (accumulateSteps.getNumOccurrences() && accumulateSteps < 1)
    return badOption("--accumulate must be >= 1");
  int64_t stageCount = accumulateSteps ? 1 : pipelineStages;
  // A cluster without --stages: one stage per rank (the planner then only
  // cuts and assigns); with data parallelism the split must be given.
  if (ppRequested && stageCount == 0) {
    const char *world = std::getenv("OMPI_COMM_WORLD_SIZE");
    bool dp = dataParallel || fuseAllReduce.getNumOccurrences() ||
              compressAllReduce.getNumOccurrences();
    if (dp && world && std::atoi(world) > 1)
      return badOption("with --data-parallel, give --stages: the ranks are "
                       "stages x replicas");
    stageCount = world ? std::max(1, std::atoi(world)) : 1;
  }

  std::string error;
  std::unique_ptr<MemoryBuffer> file = mlir::openInputFile(inputFile, &error);
  if (!file) {
    errs() << "ds-run: error: " << error << "\n";
    return 1;
  }
  std::string moduleHash = formatHash(hashBytes(file->getBuffer()));

  mlir::DialectRegistry registry;
  registerSessionDialects(registry);
  mlir::MLIRContext context(registry);
  SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), SMLoc());
  mlir::SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;
  // A module partitioned before brings its stage count.
  if (auto p = (*module)->getAttrOfType<mlir::DictionaryAttr>(
          mlir::ds::DSDialect::kPipelineAttrName)) {
    if (ppRequested)
      return badOption("the module is already partitioned into a pipeline; "
                       "drop --stages, --micro-batches, --cluster and "
                       "--accumulate");
    stageCount = p.getAs<mlir::IntegerAttr>("stages").getInt();
  }
  bool pipelined = ppRequested || stageCount > 0;
  if (pipelined && (evalEvery > 0 || !exportQuantized.empty()))
    return badOption("--eval-every and --export-quantized are not supported "
                     "with a pipeline or gradient accumulation yet");
  if (!emitStep.empty()) {
    // The exported step runs elsewhere: what only a run here does is
    // refused rather than ignored.
    for (cl::Option *flag : std::initializer_list<cl::Option *>{
             &evalEvery, &exportQuantized, &checkpointDir, &checkpointEvery,
             &saveResults, &reportPath, &injectNonfinite, &reportEvery,
             std::addressof(dataFiles), std::addressof(evalFiles), &integerEval,
             &cudaGraphs, &commTimeout, &deterministic, &checkReplicas,
             &globalBatch})
      if (flag->getNumOccurrences())
        return badOption("--" + flag->ArgStr.str() +
                         " describes a run, and --emit-step only compiles "
                         "(run the step with ds-step-run)");
    // A data-parallel step exports as one rank's step, which every rank
    // of ds-step-run's MPI job loads; a pipeline's stages exchange
    // activations through ds-run.
    if (pipelined)
      return badOption("--emit-step cannot export a pipeline: its stages "
                       "exchange activations through ds-run's MPI job");
    if (dsrt_comm_launched())
      return badOption("--emit-step compiles once: run it outside mpirun, "
                       "and the exported step under it (ds-step-run)");
  }
  if (emitInit.getNumOccurrences() && emitStep.empty())
    return badOption("--emit-init goes with --emit-step");
  if (device == "cpu")
    for (cl::Option *flag : std::initializer_list<cl::Option *>{
             &gpuChip, &gpuEmulateKernels, &gpuMaxBlocks, &gpuUnroll,
             &gpuVectorize, &gpuNativeCasts, &gpuIndex32, &gpuFuseRows,
             &gpuFuseSiblings, &gpuCacheRows, &gpuRowColumns, &gpuBucketViews,
             &gpuDeviceEncoders, &gpuDeviceEncodersMin, &gpuLaunchReport,
             &cudaGraphs})
      if (flag->getNumOccurrences())
        return badOption("--" + flag->ArgStr.str() +
                         " goes with --device cuda");
  // Integer inference's int8 GEMMs are runtime kernels for the CPU; the GPU
  // pipeline refuses them (ds-check-gpu-support). Say so before compiling.
  if (device == "cuda")
    for (cl::Option *flag :
         std::initializer_list<cl::Option *>{&integerEval, &exportQuantized})
      if (flag->getNumOccurrences())
        return badOption("--" + flag->ArgStr.str() +
                         " runs the forward on int8 GEMMs, which only the "
                         "CPU has: train with --device cpu, or leave it out "
                         "(fake quantization itself runs on the GPU)");
  if (cudaGraphs && gpuEmulateKernels)
    return badOption("--cuda-graphs cannot capture kernels that run on the "
                     "host (--gpu-emulate-kernels): a graph records only what "
                     "is enqueued on the stream");
  // Only NCCL's collectives can be captured; those staged through the
  // host wait for the stream (the compression schemes below and PowerSGD
  // are checked once parsed). A world of one stages its collectives unless
  // told otherwise, or unless it is a pipeline's stage.
  if (cudaGraphs && (dataParallel || dsrt_comm_launched()))
    if (const char *why = ds::runtime::collectivesRefuseGraphs(
            deterministic, dsrt_comm_launched(), stageCount > 1 || ppRequested))
      return badOption(
          std::string(
              "--cuda-graphs can capture only NCCL's collectives, and ") +
          why);
  // The runtime reads it at the first collective; a typo should not cost a
  // compilation first.
  if (const char *choice = std::getenv("DS_CUDA_COLLECTIVES");
      device == "cuda" && choice && *choice &&
      !llvm::is_contained({"auto", "nccl", "host"}, StringRef(choice)))
    return badOption("DS_CUDA_COLLECTIVES='" + std::string(choice) +
                     "': expected auto, nccl or host");
  if (stageCount > 1 && !dsrt_comm_launched())
    return badOption("a pipeline of " + std::to_string(stageCount) +
                     " stages runs one stage per rank: start it with "
                     "scripts/ds-mpirun -np " +
                     std::to_string(stageCount) +
                     " (times the data-parallel replicas)");

  // Under mpirun every rank runs this same command. The communicator
  // starts first: only rank 0 prints, reports and writes checkpoints.
  // With a pipeline, rank and size are those of this rank's stage group
  // (its data-parallel replicas).
  int rank = 0, worldSize = 1, stage = 0;
  bool dpRequested = dataParallel || fuseAllReduce.getNumOccurrences() ||
                     compressAllReduce.getNumOccurrences();
  // One process asking for data parallelism gets the configuration too:
  // its collectives (NCCL's, with DS_CUDA_COLLECTIVES=nccl) keep
  // --comm-timeout and --deterministic. Outside mpirun no MPI call is made.
  if (dsrt_comm_launched() || dpRequested) {
    dsrt_comm_config config{commTimeout, deterministic ? 1 : 0,
                            int(std::max<int64_t>(stageCount, 1))};
    if (dsrt_comm_init(&config) != 0)
      return badOption(std::string("cannot start MPI: ") + dsrt_last_error());
    // Every way out of main finalizes MPI (the failure paths that cannot
    // leave with _exit).
    std::atexit([] { dsrt_comm_finalize(); });
    rank = dsrt_comm_rank();
    worldSize = dsrt_comm_size();
    stage = dsrt_comm_stage();
  }
  // Replica 0 of every stage writes its results (each stage has its own
  // parameters); stage 0 of replica 0 prints and reports.
  if (rank != 0 || stage != 0) {
    quiet = true;
    // A pipeline's later stages report their own timing beside it.
    if (rank == 0 && !reportPath.empty())
      reportPath += ".stage" + std::to_string(stage);
    else
      reportPath = "";
  }
  if (rank != 0)
    saveResults = "";

  PrepareOptions prepare;
  prepare.asIs = asIs;
  prepare.device = device;
  prepare.gpuChip = gpuChip;
  prepare.gpuEmulateKernels = gpuEmulateKernels;
  prepare.gpuMaxBlocks = gpuMaxBlocks;
  prepare.gpuUnroll = gpuUnroll;
  prepare.gpuVectorize = gpuVectorize;
  prepare.gpuNativeCasts = gpuNativeCasts;
  prepare.gpuIndex32 = gpuIndex32;
  prepare.gpuFuseRows = gpuFuseRows;
  prepare.gpuFuseSiblings = gpuFuseSiblings;
  prepare.gpuCacheRows = gpuCacheRows;
  prepare.gpuRowColumns = gpuRowColumns;
  prepare.gpuBucketViews = gpuBucketViews;
  prepare.gpuDeviceEncoders = gpuDeviceEncoders;
  prepare.gpuDeviceEncodersMin = gpuDeviceEncodersMin;
  prepare.gpuLaunchReport = gpuLaunchReport;
  prepare.compileOnly = !emitStep.empty();
  prepare.showWarnings = rank == 0;
  prepare.entry = entry;
  prepare.pipelineStage = stage;
  prepare.forwardForEval = evalEvery > 0;
  prepare.integerEval = integerEval || !exportQuantized.empty();
  if (!exportQuantized.empty()) {
    if (!fakeQuant.getNumOccurrences())
      return badOption("--export-quantized writes the model that QAT "
                       "trained: it needs --fake-quant");
    if (steps == 0 && resumeDir.empty())
      return badOption("--export-quantized: nothing is trained with --steps "
                       "0 and no --resume (the quantization state would be "
                       "its initial value)");
    prepare.forwardForEval = true;
  }
  if (integerEval && !fakeQuant.getNumOccurrences())
    return badOption("--integer-eval converts the fake-quantized forward: it "
                     "needs --fake-quant");
  if (integerEval && evalEvery == 0)
    return badOption("--integer-eval runs at held-out evaluations: give "
                     "--eval-every");
  int64_t cosineSteps = totalSteps ? totalSteps : steps;
  mlir::ds::TrainingPipelineConfig &pipeline = prepare.pipeline;
  if (causalBlock < 0)
    return badOption("--causal-block: expected rows per GEMM (0: off), not " +
                     std::to_string(causalBlock));
  pipeline.causalBlock = causalBlock;
  mlir::ds::InsertOptimizerPassOptions &opt = *pipeline.optimizer;
  opt.kind = optKind;
  opt.schedule = schedule;
  opt.lr = lr;
  opt.momentum = momentum;
  opt.weightDecay = weightDecay;
  opt.beta1 = beta1;
  opt.beta2 = beta2;
  opt.eps = eps;
  opt.warmupSteps = warmupSteps;
  opt.totalSteps = cosineSteps;
  if (failed(mlir::ds::validateOptimizerOptions(opt, error)))
    return badOption(error);
  if (precision.getNumOccurrences()) {
    mlir::ds::AssignPrecisionPassOptions &p = pipeline.precision.emplace();
    p.policy = precision.getValue();
    // The time-level schedule spans the training, like the cosine: the
    // --total-steps of a run split by checkpoints, else --steps.
    p.totalSteps = cosineSteps;
    p.anomalySteps = anomalySteps;
  }
  if (anomalySteps < 0)
    return badOption("--anomaly-steps: expected a non-negative count");
  if (anomalySteps > 0 && !precision.getNumOccurrences())
    return badOption("--anomaly-steps needs --precision (the high-precision "
                     "variant is built by ds-assign-precision)");
  if (anomalySteps > 0 && !lossScaling.getNumOccurrences())
    return badOption("--anomaly-steps needs --loss-scaling (its anomaly "
                     "detector raises the 'anomaly' metric that triggers the "
                     "switch)");
  // --loss-scaling and --clip-gradients take their pass's options as text;
  // they are read by ds-training-pipeline's typed options, where each is
  // spelled with the pass's prefix.
  mlir::ds::TrainingPipelineOptions techniques;
  if (lossScaling.getNumOccurrences()) {
    std::string opts = lossScaling;
    if (!injectNonfinite.empty() &&
        StringRef(opts).find("inject-nonfinite") == StringRef::npos)
      opts += " inject-nonfinite=1";
    if (!parseTechniqueOptions(techniques, "loss-scaling", opts, error))
      return badOption("--loss-scaling: " + error);
    pipeline.lossScaling = *techniques.getConfig().lossScaling;
    if (failed(
            mlir::ds::validateLossScalingOptions(*pipeline.lossScaling, error)))
      return badOption("--loss-scaling: " + error);
    prepare.lossScalingSpelling = StringRef(opts).trim().str();
  }
  if (fakeQuant.getNumOccurrences()) {
    if (!parseTechniqueOptions(techniques, "fake-quant", fakeQuant, error))
      return badOption("--fake-quant: " + error);
    mlir::ds::TrainingPipelineConfig parsed = techniques.getConfig();
    pipeline.fakeQuant = *parsed.fakeQuant;
    pipeline.qatBitWidth = parsed.qatBitWidth;
    if (failed(mlir::ds::validateFakeQuantOptions(*pipeline.fakeQuant, error)))
      return badOption("--fake-quant: " + error);
    if (pipeline.qatBitWidth && failed(mlir::ds::validateQATBitWidthOptions(
                                    *pipeline.qatBitWidth, error)))
      return badOption("--fake-quant: " + error);
    prepare.fakeQuantSpelling = fakeQuant;
  }
  if (sparsity.getNumOccurrences()) {
    if (!parseTechniqueOptions(techniques, "sparsity", sparsity, error))
      return badOption("--sparsity: " + error);
    pipeline.sparsity = *techniques.getConfig().sparsity;
    // The schedule spans the run unless given its own length.
    if (pipeline.sparsity->totalSteps == 0)
      pipeline.sparsity->totalSteps = cosineSteps;
    if (failed(mlir::ds::validateSparsityOptions(*pipeline.sparsity, error)))
      return badOption("--sparsity: " + error);
    prepare.sparsitySpelling = sparsity;
  }
  if (clipGradients.getNumOccurrences()) {
    if (!parseTechniqueOptions(techniques, "clip", clipGradients, error))
      return badOption("--clip-gradients: " + error);
    pipeline.clip = *techniques.getConfig().clip;
    if (failed(mlir::ds::validateClipOptions(*pipeline.clip, error)))
      return badOption("--clip-gradients: " + error);
    prepare.clipSpelling = clipGradients;
  }
  if (dpRequested) {
    pipeline.dataParallel = true;
    if (fuseAllReduce.getNumOccurrences()) {
      if (!parseTechniqueOptions(techniques, "fuse", fuseAllReduce, error))
        return badOption("--fuse-allreduce: " + error);
      pipeline.fuseAllReduce = *techniques.getConfig().fuseAllReduce;
      if (pipeline.fuseAllReduce->bucketBytes <= 0 ||
          pipeline.fuseAllReduce->firstBucketBytes <= 0)
        return badOption("--fuse-allreduce: bucket-bytes and "
                         "first-bucket-bytes must be > 0");
      prepare.fuseSpelling = fuseAllReduce;
    }
    if (compressAllReduce.getNumOccurrences()) {
      if (!parseTechniqueOptions(techniques, "compress", compressAllReduce,
                                 error))
        return badOption("--compress-allreduce: " + error);
      pipeline.compressAllReduce = *techniques.getConfig().compressAllReduce;
      if (failed(mlir::ds::validateCompressOptions(*pipeline.compressAllReduce,
                                                   error)))
        return badOption("--compress-allreduce: " + error);
      prepare.compressSpelling = compressAllReduce;
      // DDP's fp16/bf16 hooks run on NCCL, and so may top-k slots the
      // step encodes (the runtime gathers them when they do not outweigh
      // the bucket; a staged one fails the capture by name). The other
      // schemes' payloads (of sizes that vary) are exchanged by the host.
      mlir::ds::CompressionScheme scheme = pipeline.compressAllReduce->scheme;
      if (cudaGraphs && scheme == mlir::ds::CompressionScheme::topk &&
          !gpuDeviceEncoders)
        return badOption("--cuda-graphs can capture only NCCL's collectives, "
                         "and top-k encoded by the host "
                         "(--gpu-device-encoders=false) exchanges its "
                         "payloads through the host");
      const char *topKExchange = std::getenv("DS_CUDA_TOPK_EXCHANGE");
      if (cudaGraphs && scheme == mlir::ds::CompressionScheme::topk &&
          pipeline.compressAllReduce->warmupIterations > 0 &&
          !(topKExchange && StringRef(topKExchange) == "nccl"))
        return badOption("--cuda-graphs can capture only NCCL's collectives, "
                         "and DGC's warm-up (warmup-iterations) sizes "
                         "top-k's slots for 25 %, which the runtime stages "
                         "rather than gather hundreds of times what the "
                         "later steps send (DS_CUDA_TOPK_EXCHANGE=nccl "
                         "gathers them anyway)");
      if (cudaGraphs && scheme != mlir::ds::CompressionScheme::fp16 &&
          scheme != mlir::ds::CompressionScheme::bf16 &&
          scheme != mlir::ds::CompressionScheme::topk)
        return badOption("--cuda-graphs can capture only NCCL's collectives, "
                         "and --compress-allreduce's scheme exchanges its "
                         "payloads through the host (fp16 and bf16 run on "
                         "NCCL, and top-k's slots encoded on the device)");
      // DGC's momentum correction moves the momentum into the compressor.
      if (pipeline.compressAllReduce->momentum > 0 &&
          opt.kind != mlir::ds::OptimizerKind::Sgd)
        return badOption("--compress-allreduce: momentum (DGC's momentum "
                         "correction) keeps the momentum in the compressor; "
                         "use --optimizer sgd (plain SGD applies the "
                         "corrected update)");
    }
  }
  if (ppRequested) {
    mlir::ds::PartitionPipelinePassOptions &o = pipeline.partition.emplace();
    o.stages = stageCount;
    o.microBatches = accumulateSteps ? accumulateSteps : microBatches;
    o.schedule = pipelineSchedule;
    o.cluster = clusterFile;
    o.objective = pipelineObjective;
    o.printPlan = !quiet;
    prepare.partitionSpelling =
        "stages=" + std::to_string(o.stages) +
        " micro-batches=" + std::to_string(o.microBatches) +
        " schedule=" + o.schedule +
        (o.cluster.empty() ? std::string() : " cluster=" + o.cluster);
  }
  std::vector<int64_t> injectSteps;
  if (!injectNonfinite.empty() &&
      !parseInjectSteps(injectNonfinite, steps, seed, injectSteps, error))
    return badOption(error);
  for (cl::Option *flag : std::initializer_list<cl::Option *>{
           &optKind, &lr, &momentum, &weightDecay, &beta1, &beta2, &eps,
           &schedule, &warmupSteps, &totalSteps})
    if (flag->getNumOccurrences())
      prepare.optimizerFlags.push_back("--" + flag->ArgStr.str());
  prepare.optimizerSpelling =
      "kind=" + spellingOf(optKind).str() + " lr=" + std::to_string(lr);
  if (schedule != mlir::ds::LRSchedule::Constant)
    prepare.optimizerSpelling += " schedule=" + spellingOf(schedule).str();

  // The compile log doubles as the exported step's record of its passes.
  std::vector<std::string> compileLog;
  auto log = [&](const std::string &line) {
    compileLog.push_back(line);
    if (!quiet)
      outs() << line << "\n";
  };
  Expected<std::unique_ptr<StepProgram>> program =
      StepProgram::compile(*module, prepare, log);
  if (!program) {
    errs() << "ds-run: error: " << toString(program.takeError()) << "\n";
    return 1;
  }
#ifdef DSRT_HAVE_CUDA
  // After main's locals (the compiled step unloads its kernels, the
  // program frees its device buffers): the runtime's stream, workspace and
  // context go last.
  if ((*program)->runsOnGPU())
    std::atexit([] { dsrt_cuda_shutdown(); });
#endif
  if (!quiet)
    outs() << format("ds-run: compiled '%s' in %.2f s (MLIR %.2f s, LLVM "
                     "%.2f s)\n",
                     (*program)->contract().funcName.c_str(),
                     (*program)->times().mlir + (*program)->times().llvm,
                     (*program)->times().mlir, (*program)->times().llvm);
  // With --emit-step the run below takes no step: it initialises the state
  // (or resumes it) and writes it as the exported step's init/.
  std::string emitTmp, emitTarget;
  bool emitExists = false, emitQuiet = quiet;
  if (!emitStep.empty()) {
    Expected<std::string> target = resolveReplaceableDir(
        emitStep, kStepManifestFile, "a compiled step", emitExists);
    if (!target)
      return badOption("--emit-step " + emitStep + ": " +
                       toString(target.takeError()));
    emitTarget = *target;
    StringRef parent = sys::path::parent_path(emitTarget);
    std::string name = sys::path::filename(emitTarget).str();
    SmallString<256> tmp;
    if (std::error_code ec = sys::fs::create_directories(parent))
      return badOption("--emit-step: " + ec.message());
    removeStaleTemporaries(parent, name);
    if (std::error_code ec =
            sys::fs::createUniqueDirectory(parent + "/." + name + ".tmp", tmp))
      return badOption("--emit-step: " + ec.message());
    emitTmp = tmp.str().str();
    SmallString<256> init(tmp);
    sys::path::append(init, kStepInitDir);
    if (emitInit)
      checkpointDir = init.str().str();
    steps = 0;
    quiet = true; // the run only writes init/
  }
  if (worldSize > 1 && !(*program)->isDataParallel())
    return badOption(
        "running under mpirun with " + std::to_string(worldSize) +
        " ranks, but the step is not data parallel: every rank would train "
        "its own copy; add --data-parallel (or run one process)");

  TrainOptions options;
  options.steps = steps;
  options.seed = seed;
  options.threads = threads;
  options.evalEvery = evalEvery;
  options.evalBatches = evalBatches;
  options.printEvery = printEvery;
  options.reportEvery = reportEvery;
  options.cudaGraphs = cudaGraphs;
  options.quiet = quiet;
  options.allowNonfiniteLoss = allowNonfiniteLoss;
  options.allowNonfiniteInputs = allowNonfiniteInputs;
  options.paramsDir = paramsDir;
  options.reportPath = reportPath;
  options.checkpointDir = checkpointDir;
  options.checkpointEvery = checkpointEvery;
  options.resumeDir = resumeDir;
  options.saveResultsDir = saveResults;
  options.exportQuantizedDir = exportQuantized;
  options.moduleHash = moduleHash;
  options.modulePath = inputFile;
  options.injectSteps = injectSteps;
  options.rank = rank;
  options.worldSize = worldSize;
  options.pipelineStage = stage;
  if (pipelined) {
    // Every stage keeps its own parameters: one checkpoint directory per
    // stage, <dir>/stage<k>.
    options.pipelineStages = int(std::max<int64_t>(stageCount, 1));
    auto stageDir = [&](const std::string &dir) {
      SmallString<256> path(dir);
      sys::path::append(path, "stage" + std::to_string(stage));
      return std::string(path);
    };
    if (!checkpointDir.empty()) {
      if (std::error_code ec = sys::fs::create_directories(checkpointDir))
        return badOption("--checkpoint " + checkpointDir + ": " + ec.message());
      options.checkpointDir = stageDir(checkpointDir);
    }
    if (!resumeDir.empty())
      options.resumeDir = stageDir(resumeDir);
  }
  options.checkReplicasEvery = checkReplicas;
  if (!parseAssignments(dataFiles, "data", options.dataFiles) ||
      !parseAssignments(evalFiles, "eval-data", options.evalFiles))
    return 1;

  if (globalBatch > 0) {
    const mlir::ds::TrainingContract &c = (*program)->contract();
    for (const mlir::ds::ContractArg &arg : c.args) {
      if (arg.role != mlir::ds::ArgRole::Input || arg.type.getRank() == 0)
        continue;
      int64_t local = arg.type.getDimSize(0);
      if (globalBatch % worldSize != 0 || globalBatch / worldSize != local)
        return badOption("--global-batch " + std::to_string(globalBatch) +
                         (globalBatch % worldSize != 0
                              ? " is not divisible by the " +
                                    std::to_string(worldSize) + " ranks"
                              : " over " + std::to_string(worldSize) +
                                    " ranks gives " +
                                    std::to_string(globalBatch / worldSize) +
                                    " rows per rank, but input '" + arg.name +
                                    "' of the step has a batch of " +
                                    std::to_string(local)));
    }
  }

  // Leaves the process: an MPI job that failed cannot finalize (a peer may
  // be stopped inside a collective), so it exits at once and mpirun ends
  // the other ranks.
  auto finish = [&](int code) -> int {
    outs().flush();
    errs().flush();
    if (code != 0 && worldSize > 1)
      _exit(code);
    dsrt_comm_finalize();
    return code;
  };
  Expected<std::unique_ptr<Trainer>> trainer =
      Trainer::create(**program, options, rank == 0 ? outs() : nulls());
  if (!trainer) {
    errs() << "ds-run: error: "
           << (worldSize > 1 ? "rank " + std::to_string(rank) + ": " : "")
           << toString(trainer.takeError()) << "\n";
    return finish(1);
  }
  if (Error e = (*trainer)->run()) {
    outs().flush();
    errs() << "ds-run: error: "
           << (worldSize > 1 ? "rank " + std::to_string(rank) + ": " : "")
           << toString(std::move(e)) << "\n";
    if (!emitTmp.empty())
      sys::fs::remove_directories(emitTmp);
    return finish(1);
  }
  if (!emitTmp.empty()) {
    StepExportInfo info;
    info.device = device;
    info.chip = gpuChip;
    info.emulatedKernels = gpuEmulateKernels;
    info.modulePath = inputFile;
    info.moduleHash = moduleHash;
    info.seed = seed;
    info.passes = compileLog;
    Error e = writeStepLibrary(**program, emitTmp, info);
    if (!e)
      e = installDirectory(emitTmp, emitTarget, emitExists);
    else
      sys::fs::remove_directories(emitTmp);
    if (e) {
      errs() << "ds-run: error: --emit-step " << emitStep << ": "
             << toString(std::move(e)) << "\n";
      return finish(1);
    }
    if (!emitQuiet)
      outs() << "ds-run: wrote the compiled step to " << emitTarget
             << (emitInit ? " (step.so, step.json, init/)"
                          : " (step.so, step.json)")
             << "; run it with ds-step-run " << emitStep << "\n";
  }
  return finish(0);
}
