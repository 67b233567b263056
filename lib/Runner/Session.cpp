//===- Session.cpp - Compile and call a training step ---------------------===//
//
// Level detection, the passes that bring a module to a training step, the
// JIT, and the C calling convention of compiled steps: every argument and
// then every result (an out-parameter after bufferization) is passed as a
// pointer to a memref descriptor {allocated, aligned, offset, sizes[r],
// strides[r]} through the ExecutionEngine's packed wrapper of
// `_mlir_ciface_<step>`.
//
//===----------------------------------------------------------------------===//

#include "ds/Runner/Session.h"

#include "ds/InitDS.h"
#include "ds/Runner/OptimizeModule.h"
#include "ds/Runner/Report.h"
#include "ds/Runner/SplitLargeBlocks.h"
#include "ds/Runtime/ds_runtime.h"
#ifdef DSRT_HAVE_CUDA
#include "ds/Runtime/ds_runtime_cuda.h"
#endif

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

#include <cstdlib>

using namespace mlir;
using namespace ::ds::runner;
using llvm::Error;
using llvm::Expected;

auto ::ds::runner::stringifyModuleLevel(ModuleLevel level) -> llvm::StringRef {
  switch (level) {
  case ModuleLevel::ForwardLoss:
    return "forward + loss";
  case ModuleLevel::GradientStep:
    return "gradient step";
  case ModuleLevel::TrainingStep:
    return "training step";
  case ModuleLevel::Lowered:
    return "lowered training step";
  }
  llvm_unreachable("unknown level");
}

void ::ds::runner::registerSessionDialects(DialectRegistry &registry) {
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
  mlir::ds::registerDSDialects(registry);
}

auto ::ds::runner::dtypeOf(RankedTensorType type) -> Expected<DType> {
  Type et = type.getElementType();
  if (et.isF32())
    return DType::F32;
  if (et.isF64())
    return DType::F64;
  if (et.isF16())
    return DType::F16;
  if (et.isBF16())
    return DType::BF16;
  if (et.isInteger(64))
    return DType::I64;
  if (et.isInteger(32))
    return DType::I32;
  if (et.isInteger(8))
    return DType::I8;
  if (et.isInteger(1))
    return DType::Bool;
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "element type " << et << " of " << type
     << " cannot be exchanged with the runner";
  return llvm::createStringError(s);
}

auto ::ds::runner::makeTensor(RankedTensorType type) -> Expected<HostTensor> {
  Expected<DType> dtype = dtypeOf(type);
  if (!dtype)
    return dtype.takeError();
  return HostTensor(*dtype, type.getShape());
}

namespace {

/// Whether a parameter of `step` carries per-parameter optimizer settings.
bool hasOptimAttrs(FunctionOpInterface step) {
  for (unsigned i = 0, e = step.getNumArguments(); i < e; ++i)
    if (step.getArgAttr(i, mlir::ds::DSDialect::kOptimAttrName))
      return true;
  return false;
}

/// LLVM optimisation level of the JIT: DS_RUN_OPT_LEVEL (0-3), default 3.
unsigned optLevel() {
  if (const char *v = std::getenv("DS_RUN_OPT_LEVEL"))
    if (*v >= '0' && *v <= '3' && v[1] == 0)
      return unsigned(*v - '0');
  return 3;
}

/// The most instructions a basic block may keep before code generation
/// (see SplitLargeBlocks.h); DS_RUN_SPLIT_BLOCKS overrides it, 0 turns the
/// splitting off.
unsigned blockSplitLimit() {
  unsigned limit = 250;
  if (const char *v = std::getenv("DS_RUN_SPLIT_BLOCKS"))
    if (llvm::StringRef(v).getAsInteger(10, limit))
      limit = 250;
  return limit;
}

/// `file:line:col` of the file location inside `loc` (through name, call
/// site and fused locations), as compilers print it; else `loc` itself.
std::string formatLocation(Location loc) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (auto file = loc->findInstanceOf<FileLineColLoc>())
    os << file.getFilename().getValue() << ":" << file.getLine() << ":"
       << file.getColumn();
  else
    os << loc;
  return text;
}

/// Collects MLIR diagnostics so that a failure can report them.
class DiagnosticCollector {
public:
  DiagnosticCollector(MLIRContext *ctx, bool showWarnings)
      : handler(ctx, [this, showWarnings](Diagnostic &d) {
          // Warnings are shown as they come (the compile goes on), each in
          // one write: other ranks may be writing theirs.
          if (d.getSeverity() == DiagnosticSeverity::Warning) {
            if (showWarnings) {
              std::string line;
              llvm::raw_string_ostream(line) << formatLocation(d.getLocation())
                                             << ": warning: " << d << "\n";
              llvm::errs() << line;
              llvm::errs().flush();
            }
            return success();
          }
          llvm::raw_string_ostream os(text);
          os << formatLocation(d.getLocation()) << ": "
             << (d.getSeverity() == DiagnosticSeverity::Error ? "error: "
                                                              : "note: ")
             << d << "\n";
          for (Diagnostic &note : d.getNotes())
            os << formatLocation(note.getLocation()) << ": note: " << note
               << "\n";
          return success();
        }) {}
  Error error(const llvm::Twine &what) {
    return llvm::createStringError(what + (text.empty() ? "" : ":\n") + text);
  }

private:
  std::string text;
  ScopedDiagnosticHandler handler;
};

/// The level of `module` and, for levels before lowering, its step.
Expected<std::pair<ModuleLevel, FunctionOpInterface>>
detectLevel(ModuleOp module, StringRef entry) {
  if (module->hasAttr(mlir::ds::DSDialect::kContractAttrName)) {
    bool lowered = !module.getOps<LLVM::LLVMFuncOp>().empty();
    if (lowered)
      return std::make_pair(ModuleLevel::Lowered, FunctionOpInterface());
  }
  FunctionOpInterface step;
  for (auto func : module.getOps<FunctionOpInterface>()) {
    if (!func->hasAttr(mlir::ds::DSDialect::kTrainStepAttrName))
      continue;
    if (entry.empty() || func.getName() == entry) {
      step = func;
      break;
    }
  }
  if (!step)
    return llvm::createStringError(
        entry.empty()
            ? ("the module has no function marked '" +
               mlir::ds::DSDialect::kTrainStepAttrName + "' (and no lowered '" +
               mlir::ds::DSDialect::kContractAttrName + "' table)")
                  .str()
            : ("no training step named '" + entry + "'").str());
  FailureOr<mlir::ds::TrainingContract> c =
      mlir::ds::TrainingContract::fromFunction(step);
  if (failed(c))
    return llvm::createStringError("invalid training-step contract");
  ModuleLevel level = c->hasParamUpdates() ? ModuleLevel::TrainingStep
                      : c->hasGrads()      ? ModuleLevel::GradientStep
                                           : ModuleLevel::ForwardLoss;
  return std::make_pair(level, step);
}

/// The step's entry of the module's `ds.precision_schedule`, or null.
DictionaryAttr scheduleOf(ModuleOp module, StringRef step) {
  auto all = module->getAttrOfType<DictionaryAttr>(
      mlir::ds::DSDialect::kPrecisionScheduleAttrName);
  return all ? all.getAs<DictionaryAttr>(step) : DictionaryAttr();
}

/// The variants the schedule of `step` names besides the step.
std::vector<std::string> scheduledVariants(ModuleOp module,
                                           FunctionOpInterface step) {
  std::vector<std::string> names;
  if (DictionaryAttr s = step ? scheduleOf(module, step.getName()) : nullptr)
    if (auto high = s.getAs<StringAttr>("high"))
      names.push_back(high.str());
  return names;
}

/// Whether two contracts take and return the same tensors.
bool sameSignature(const mlir::ds::TrainingContract &a,
                   const mlir::ds::TrainingContract &b) {
  if (a.args.size() != b.args.size() || a.results.size() != b.results.size())
    return false;
  for (auto [x, y] : llvm::zip(a.args, b.args))
    if (x.type != y.type || x.name != y.name || x.role != y.role)
      return false;
  for (auto [x, y] : llvm::zip(a.results, b.results))
    if (x.type != y.type || x.role != y.role || x.argIndex != y.argIndex ||
        x.name != y.name)
      return false;
  return true;
}

} // namespace

Error StepProgram::readSchedule(ModuleOp module, StringRef step,
                                StepProgram &program) {
  DictionaryAttr s = scheduleOf(module, step);
  if (!s)
    return Error::success();
  auto error = [&](const Twine &what) {
    return llvm::createStringError(
        "'" + mlir::ds::DSDialect::kPrecisionScheduleAttrName + "' of '" +
        step + "': " + what);
  };
  auto high = s.getAs<StringAttr>("high");
  auto total = s.getAs<IntegerAttr>("total_steps");
  auto anomaly = s.getAs<IntegerAttr>("anomaly_steps");
  auto phases = s.getAs<ArrayAttr>("phases");
  if (!high || !total || !anomaly || !phases)
    return error("expected high, total_steps, anomaly_steps and phases");
  PrecisionSchedule schedule;
  program.variantNames = {high.str()};
  schedule.high = 1;
  schedule.totalSteps = total.getInt();
  schedule.anomalySteps = anomaly.getInt();
  for (Attribute a : phases) {
    auto p = dyn_cast<DictionaryAttr>(a);
    auto name = p ? p.getAs<StringAttr>("phase") : nullptr;
    auto variant = p ? p.getAs<StringAttr>("variant") : nullptr;
    auto begin = p ? p.getAs<IntegerAttr>("begin") : nullptr;
    auto end = p ? p.getAs<IntegerAttr>("end") : nullptr;
    if (!name || !variant || !begin || !end)
      return error("a phase needs phase, variant, begin and end");
    if (variant.getValue() != step && variant.getValue() != high.getValue())
      return error("phase '" + name.getValue() + "' runs '" +
                   variant.getValue() + "', which is not a variant");
    schedule.phases.push_back({name.str(), variant.getValue() == step ? 0u : 1u,
                               begin.getInt(), end.getInt()});
  }
  program.precisionSchedule = std::move(schedule);
  return Error::success();
}

Expected<std::unique_ptr<StepProgram>>
StepProgram::compile(ModuleOp module, const PrepareOptions &options,
                     const std::function<void(const std::string &)> &log) {
  MLIRContext *ctx = module.getContext();
  DiagnosticCollector diags(ctx, options.showWarnings);
  std::unique_ptr<StepProgram> program(new StepProgram());

  // The device first: without one there is nothing to compile for (unless
  // the step is only compiled, to run elsewhere).
  bool forGPU = options.device == "cuda";
  if (options.device == "cuda" && options.compileOnly) {
    log("ds-run: compiling for CUDA " + options.gpuChip +
        " (no device needed: nothing runs here)");
  } else if (options.device == "cuda") {
#ifdef DSRT_HAVE_CUDA
    dsrt_clear_error();
    if (dsrt_cuda_init() != 0)
      return diags.error(dsrt_last_error() ? dsrt_last_error()
                                           : "no CUDA device");
    program->onGPU = true;
    if (options.gpuEmulateKernels && dsrt_cuda_device_memory_is_host() != 1)
      return diags.error(std::string("--gpu-emulate-kernels runs the kernels "
                                     "on the host, which cannot address "
                                     "the memory of ") +
                         dsrt_cuda_device_name() +
                         ": it is a testing aid for the stub libcuda "
                         "(DS_CUDA_DRIVER=<build>/lib/stub-cuda/libcuda.so.1)");
    log(std::string("ds-run: device: ") + dsrt_cuda_device_name() + " (sm_" +
        std::to_string(dsrt_cuda_compute_capability()) + "), compiling for " +
        options.gpuChip);
#else
    return diags.error("this ds-run was built without the CUDA backend (no "
                       "CUDA toolkit at configure time); --device cuda is "
                       "not available");
#endif
  } else if (options.device != "cpu") {
    return diags.error("unknown device '" + options.device +
                       "' (expected cpu or cuda)");
  }

  // A module partitioned before (ds-opt --ds-partition-pipeline) holds every
  // stage's functions: the stage picks its own below.
  bool prePartitioned = module->hasAttr(mlir::ds::DSDialect::kPipelineAttrName);
  auto level = detectLevel(module, options.entry);
  if (!level)
    return diags.error(llvm::toString(level.takeError()));
  program->level = level->first;
  FunctionOpInterface step = level->second;

  // Flags that cannot be applied to this level are refused, naming what the
  // module has compiled in, rather than ignored.
  if (!options.asIs && program->level == ModuleLevel::Lowered) {
    const mlir::ds::TrainingPipelineConfig &p = options.pipeline;
    const char *flag = p.sparsity      ? "--sparsity"
                       : p.fakeQuant   ? "--fake-quant"
                       : p.precision   ? "--precision"
                       : p.lossScaling ? "--loss-scaling"
                       : p.clip        ? "--clip-gradients"
                                       : nullptr;
    if (flag)
      return diags.error(llvm::Twine(flag) +
                         " cannot be applied: the module is already lowered "
                         "(its passes are compiled in); apply it to the ds "
                         "module before lowering");
  }
  if (!options.asIs && !options.optimizerFlags.empty() &&
      (program->level == ModuleLevel::Lowered ||
       program->level == ModuleLevel::TrainingStep)) {
    std::string compiled = "compiled in";
    if (auto all = module->getAttrOfType<DictionaryAttr>(
            mlir::ds::DSDialect::kOptimizerAttrName)) {
      StringRef name = step ? step.getName() : StringRef(options.entry);
      auto one = name.empty() ? StringAttr() : all.getAs<StringAttr>(name);
      if (!one && !all.empty())
        one = dyn_cast<StringAttr>(all.begin()->getValue());
      if (one)
        compiled = "compiled in: " + one.str();
    }
    return diags.error(
        options.optimizerFlags.front() +
        " cannot be applied: the module is a " +
        stringifyModuleLevel(program->level).str() + " whose optimizer is " +
        compiled +
        "; give optimizer flags with a forward + loss or gradient module");
  }

  double start = nowSeconds();
  std::string stepName = step ? step.getName().str() : options.entry;
  std::string evalNames[4];
  std::string &evalName = evalNames[0];
  if (program->level != ModuleLevel::Lowered) {
    // Keep only the chosen step and its variants: others would be compiled
    // for nothing.
    std::vector<std::string> keep = scheduledVariants(module, step);
    for (auto func :
         llvm::make_early_inc_range(module.getOps<FunctionOpInterface>()))
      if (!prePartitioned && func != step &&
          func->hasAttr(mlir::ds::DSDialect::kTrainStepAttrName) &&
          !llvm::is_contained(keep, func.getName()))
        func->erase();
    bool needGrad = program->level == ModuleLevel::ForwardLoss;
    bool needOpt = program->level != ModuleLevel::TrainingStep;
    // A forward-only copy for evaluation, compiled beside the step. The
    // passes append arguments, so its arguments are a prefix of the step's.
    // The passes after precision treat the step's variants alike, so the
    // pipeline runs on every training step left in the module; the
    // evaluation copy joins after it, untouched.
    OwningOpRef<Operation *> evalCopies[4];
    OwningOpRef<Operation *> &evalCopy = evalCopies[0];
    if (needGrad && !options.asIs && options.forwardForEval) {
      const char *suffixes[3] = {"_eval", "_eval_int8", "_eval_f32"};
      unsigned copies = options.integerEval ? 3 : 1;
      for (unsigned k = 0; k < copies; ++k) {
        evalCopies[k] = step->clone();
        evalNames[k] = (step.getName() + suffixes[k]).str();
        SymbolTable::setSymbolName(cast<FunctionOpInterface>(*evalCopies[k]),
                                   evalNames[k]);
      }
    }
    if (options.integerEval && !evalCopies[1])
      return diags.error("integer inference (--integer-eval, "
                         "--export-quantized) converts the fake-quantized "
                         "forward: it needs a forward + loss module");
    if (options.integerEval && !options.pipeline.fakeQuant)
      return diags.error("integer evaluation converts the fake-quantized "
                         "forward: it needs --fake-quant");
    if (options.asIs) {
      log("ds-run: running the " + stringifyModuleLevel(program->level).str() +
          " as it is; applying " +
          (forGPU ? "ds-gpu-pipeline" : "ds-cpu-pipeline"));
    } else {
      const mlir::ds::TrainingPipelineConfig &requested = options.pipeline;
      if ((requested.lossScaling || requested.clip || requested.precision ||
           requested.dataParallel) &&
          !needOpt)
        return diags.error("loss scaling, gradient clipping and data "
                           "parallelism apply to forward + loss and gradient "
                           "modules; this module already is a training step");
      if (requested.sparsity && !needGrad)
        return diags.error(
            "--sparsity cannot be applied: it rewrites the forward before "
            "ds-autodiff, and this module is a " +
            stringifyModuleLevel(program->level).str() +
            "; give it a forward + loss module");
      // Fake quantization rewrites the forward before autodiff.
      if (requested.fakeQuant && !needGrad)
        return diags.error(
            "--fake-quant cannot be applied: it rewrites the forward before "
            "ds-autodiff, and this module is a " +
            stringifyModuleLevel(program->level).str() +
            "; give it a forward + loss module");
      mlir::ds::TrainingPipelineConfig config = requested;
      config.autodiff = needGrad;
      if (!needOpt)
        config.optimizer.reset();
      config.lower = false;
      std::string steps;
      if (config.sparsity)
        steps += "ds-sparsify-matmul{" + options.sparsitySpelling + "}, ";
      if (config.fakeQuant)
        steps += "ds-insert-fake-quant{" + options.fakeQuantSpelling + "}, ";
      if (config.autodiff)
        steps += "ds-autodiff, ";
      if (config.precision)
        steps += "ds-assign-precision{" +
                 (config.precision->policy.empty()
                      ? std::string("default policy")
                      : "policy=" + config.precision->policy) +
                 "}, ";
      if (config.lossScaling)
        steps +=
            "ds-insert-loss-scaling{" + options.lossScalingSpelling + "}, ";
      if (config.dataParallel)
        steps += "ds-data-parallel, ";
      if (config.fuseAllReduce)
        steps += "ds-fuse-allreduce{" + options.fuseSpelling + "}, ";
      if (config.compressAllReduce)
        steps += "ds-compress-allreduce{" + options.compressSpelling + "}, ";
      if (config.clip)
        steps += "ds-clip-gradients{" + options.clipSpelling + "}, ";
      if (config.sparsity)
        steps += "ds-update-sparsity-masks, ";
      if (config.partition)
        steps += "ds-partition-pipeline{" + options.partitionSpelling + "}, ";
      if (config.optimizer)
        steps += "ds-insert-optimizer{" + options.optimizerSpelling + "}" +
                 (hasOptimAttrs(step)
                      ? (" (overridden per parameter by the module's " +
                         mlir::ds::DSDialect::kOptimAttrName + " attributes)")
                            .str()
                      : "") +
                 ", ";
      log("ds-run: " + stringifyModuleLevel(program->level).str() +
          " module; applying " + steps +
          (forGPU ? "ds-gpu-pipeline" : "ds-cpu-pipeline") +
          (evalName.empty() ? ""
                            : " (and a forward-only copy for evaluation)"));
      std::vector<std::string> variants = scheduledVariants(module, step);
      PassManager pm(ctx);
      mlir::ds::buildTrainingPipeline(pm, config);
      if (failed(pm.run(module)))
        return diags.error("the training pipeline failed");
      for (const std::string &name : variants)
        log("ds-run: time level: compiled the high-precision variant " + name +
            " beside " + stepName);
      // ds-partition-pipeline replaced the step by its stage functions.
      if (config.partition)
        step = nullptr;
    }
    if (auto p = module->getAttrOfType<DictionaryAttr>(
            mlir::ds::DSDialect::kPipelineAttrName)) {
      // Only this stage's functions are compiled: erase the others' drivers;
      // symbol-dce then drops their forward, backward and update.
      if (options.pipelineStage >=
          unsigned(p.getAs<IntegerAttr>("stages").getInt()))
        return diags.error(
            "stage " + std::to_string(options.pipelineStage) +
            " of a pipeline of " +
            std::to_string(p.getAs<IntegerAttr>("stages").getInt()) +
            " stages");
      NamedAttrList marked(p.getValue());
      marked.set("compiled_stage", IntegerAttr::get(IntegerType::get(ctx, 64),
                                                    options.pipelineStage));
      module->setAttr(mlir::ds::DSDialect::kPipelineAttrName,
                      marked.getDictionary(ctx));
      for (auto func :
           llvm::make_early_inc_range(module.getOps<FunctionOpInterface>()))
        if (auto k = func->getAttrOfType<IntegerAttr>(
                mlir::ds::DSDialect::kPipelineStageAttrName);
            k && k.getInt() != int64_t(options.pipelineStage))
          func->erase();
      PassManager dce(ctx);
      dce.addPass(createSymbolDCEPass());
      if (failed(dce.run(module)))
        return diags.error("dropping the other stages' functions failed");
    }
    if (evalCopy) {
      // Evaluation runs the layers block-sparse on the training step's
      // masks (no update happens there). The integer and f32 copies keep
      // dense layers (the weights are zero outside the masks; the int8
      // conversion knows dense matmuls) but take the masks too, so that
      // every copy's arguments are a prefix of the step's.
      if (const auto &sp = options.pipeline.sparsity)
        for (unsigned k : {0u, 1u, 2u})
          if (evalCopies[k] &&
              failed(mlir::ds::sparsifyMatMul(
                  cast<FunctionOpInterface>(*evalCopies[k]), *sp,
                  /*rewriteLayers=*/k == 0)))
            return diags.error("sparsifying the evaluation step failed");
      // Evaluation quantizes as training does, with the scales and zero
      // points the training step keeps (its observers do not run there).
      if (const auto &fq = options.pipeline.fakeQuant) {
        mlir::ds::InsertFakeQuantPassOptions frozen = *fq;
        frozen.observe = false;
        for (unsigned k : {0u, 1u})
          if (evalCopies[k] &&
              failed(mlir::ds::insertFakeQuant(
                  cast<FunctionOpInterface>(*evalCopies[k]), frozen)))
            return diags.error("fake-quantizing the evaluation step failed");
      }
      if (evalCopies[1]) {
        FailureOr<mlir::ds::FakeQuantConversion> done =
            mlir::ds::convertFakeQuant(
                cast<FunctionOpInterface>(*evalCopies[1]));
        if (failed(done))
          return diags.error("converting the evaluation step to integer "
                             "inference (ds-convert-fake-quant) failed");
        program->conversion.assign(done->left.begin(), done->left.end());
        // Weights are quantized once per evaluation, as a deployed model
        // has them, not on every call.
        FailureOr<FunctionOpInterface> prep = mlir::ds::splitWeightPreparation(
            cast<FunctionOpInterface>(*evalCopies[1]));
        if (failed(prep))
          return diags.error("splitting the weight preparation off the "
                             "integer evaluation step failed");
        if (*prep) {
          evalNames[3] = prep->getName().str();
          evalCopies[3] = prep->getOperation();
        }
        program->quantized =
            describeQuantized(cast<FunctionOpInterface>(*evalCopies[1]), *prep);
        log("ds-run: integer evaluation: " + std::to_string(done->converted) +
            " matmuls on int8 GEMMs" +
            (done->left.empty() ? std::string()
                                : "; left fake-quantized in f32: " +
                                      llvm::join(done->left, "; ")));
      }
      for (auto &copy : evalCopies)
        if (copy)
          SymbolTable(module).insert(copy.release());
    }

    // The precision decisions, for the report (before lowering, which
    // keeps module attributes but is no place to depend on that).
    if (auto maps = module->getAttrOfType<DictionaryAttr>(
            mlir::ds::DSDialect::kPrecisionMapAttrName))
      if (auto entries = maps.getAs<ArrayAttr>(stepName))
        for (Attribute e : entries) {
          llvm::json::Object obj;
          for (NamedAttribute f : cast<DictionaryAttr>(e))
            if (auto s = dyn_cast<StringAttr>(f.getValue()))
              obj[f.getName().str()] = s.getValue().str();
          program->precision.push_back(std::move(obj));
        }
    PassManager pm(ctx);
    if (forGPU) {
      mlir::ds::GPUPipelineConfig gpu;
      gpu.chip = options.gpuChip;
      gpu.emulateKernels = options.gpuEmulateKernels;
      gpu.maxBlocks = options.gpuMaxBlocks;
      gpu.unroll = options.gpuUnroll;
      gpu.vectorize = options.gpuVectorize;
      gpu.nativeCasts = options.gpuNativeCasts;
      gpu.index32 = options.gpuIndex32;
      gpu.fuseRows = options.gpuFuseRows;
      gpu.fuseSiblings = options.gpuFuseSiblings;
      gpu.cacheRows = options.gpuCacheRows;
      gpu.rowColumns = options.gpuRowColumns;
      gpu.bucketViews = options.gpuBucketViews;
      gpu.deviceEncoders = options.gpuDeviceEncoders;
      gpu.deviceEncodersMin = options.gpuDeviceEncodersMin;
      gpu.causalBlock = options.pipeline.causalBlock;
      gpu.launchReport = options.gpuLaunchReport;
      std::string why;
      if (failed(mlir::ds::buildGPUPipeline(pm, gpu, why)))
        return diags.error(why);
      if (failed(pm.run(module)))
        return diags.error("lowering with ds-gpu-pipeline failed");
    } else {
      mlir::ds::buildCPUPipeline(pm, options.pipeline.libraryGemm,
                                 options.pipeline.gemmConvs,
                                 options.pipeline.causalBlock);
      if (failed(pm.run(module)))
        return diags.error("lowering with ds-cpu-pipeline failed");
    }
    // A pipeline stage calls its forward and backward once per micro-batch:
    // inlined, LLVM would optimise M copies of each.
    if (module->hasAttr(mlir::ds::DSDialect::kPipelineAttrName))
      module.walk([](LLVM::LLVMFuncOp f) {
        StringRef name = f.getName();
        if (name.ends_with("_fwd") || name.ends_with("_bwd") ||
            name.ends_with("_update"))
          f.setNoInline(true);
      });
  } else {
    log("ds-run: lowered module; compiling it as it is");
  }
  program->compileTimes.mlir = nowSeconds() - start;

  FailureOr<SmallVector<mlir::ds::TrainingContract>> contracts =
      mlir::ds::readContracts(module);
  if (failed(contracts) || contracts->empty())
    return diags.error(("the lowered module has no usable '" +
                        mlir::ds::DSDialect::kContractAttrName + "' table")
                           .str());
  // Without a name, the first step that is not another step's variant.
  std::vector<std::string> variantsOfAny;
  if (auto all = module->getAttrOfType<DictionaryAttr>(
          mlir::ds::DSDialect::kPrecisionScheduleAttrName))
    for (NamedAttribute entry : all)
      if (auto s = dyn_cast<DictionaryAttr>(entry.getValue()))
        if (auto high = s.getAs<StringAttr>("high"))
          variantsOfAny.push_back(high.str());
  // A pipeline: this stage's function of the step.
  if (auto p = module->getAttrOfType<DictionaryAttr>(
          mlir::ds::DSDialect::kPipelineAttrName)) {
    program->stages = p.getAs<IntegerAttr>("stages").getInt();
    if (auto m = p.getAs<IntegerAttr>("micro_batches"))
      program->micro = m.getInt();
    for (NamedAttribute e : p) {
      if (auto i = dyn_cast<IntegerAttr>(e.getValue()))
        program->plan[e.getName().str()] = i.getInt();
      else if (auto f = dyn_cast<FloatAttr>(e.getValue()))
        program->plan[e.getName().str()] = f.getValueAsDouble();
      else if (auto s = dyn_cast<StringAttr>(e.getValue()))
        program->plan[e.getName().str()] = s.getValue().str();
    }
    if (auto stagesPlan = p.getAs<ArrayAttr>("plan")) {
      llvm::json::Array rows;
      for (Attribute a : stagesPlan) {
        llvm::json::Object row;
        for (NamedAttribute f : cast<DictionaryAttr>(a)) {
          if (auto i = dyn_cast<IntegerAttr>(f.getValue()))
            row[f.getName().str()] = i.getInt();
          else if (auto d = dyn_cast<FloatAttr>(f.getValue()))
            row[f.getName().str()] = d.getValueAsDouble();
          else if (auto s = dyn_cast<StringAttr>(f.getValue()))
            row[f.getName().str()] = s.getValue().str();
          else if (auto arr = dyn_cast<ArrayAttr>(f.getValue())) {
            llvm::json::Array names;
            for (Attribute n : arr)
              if (auto s = dyn_cast<StringAttr>(n))
                names.push_back(s.getValue().str());
            row[f.getName().str()] = std::move(names);
          }
        }
        rows.push_back(std::move(row));
      }
      program->plan["plan"] = std::move(rows);
    }
    std::string suffix = "_s" + std::to_string(options.pipelineStage);
    if (prePartitioned && options.entry.empty())
      stepName.clear();
    if (!stepName.empty() && !StringRef(stepName).ends_with(suffix))
      stepName += suffix;
    if (stepName.empty())
      for (const auto &c : *contracts)
        if (StringRef(c.funcName).ends_with(suffix) &&
            !llvm::is_contained(variantsOfAny, c.funcName)) {
          stepName = c.funcName;
          break;
        }
  }
  const mlir::ds::TrainingContract *chosen = nullptr;
  for (const auto &c : *contracts) {
    if (c.funcName == evalNames[0])
      program->evalSteps[0] = c;
    else if (c.funcName == evalNames[1])
      program->evalSteps[1] = c;
    else if (c.funcName == evalNames[2])
      program->evalSteps[2] = c;
    else if (!evalNames[3].empty() && c.funcName == evalNames[3])
      program->evalSteps[3] = c;
    else if (stepName.empty()
                 ? !chosen && !llvm::is_contained(variantsOfAny, c.funcName)
                 : c.funcName == stepName)
      chosen = &c;
  }
  if (chosen)
    if (Error e = readSchedule(module, chosen->funcName, *program))
      return diags.error(llvm::toString(std::move(e)));
  if (!chosen)
    return diags.error("no step named '" + stepName + "' in the '" +
                       mlir::ds::DSDialect::kContractAttrName + "' table");
  program->stepContract = *chosen;
  // The runner feeds an evaluation copy the leading arguments of the step
  // (the integer one, then its prepared weights), so each copy's shared
  // arguments must be the step's, in order: a pass applied to the step but
  // not to a copy would shift them.
  for (unsigned k = 0; k < 3; ++k) {
    const auto &eval = program->evalSteps[k];
    if (!eval)
      continue;
    size_t n = std::min(eval->args.size(), chosen->args.size());
    if (k == 1)
      n = std::min(n, program->evalSteps[0] ? program->evalSteps[0]->args.size()
                                            : n);
    for (size_t i = 0; i < n; ++i)
      if (eval->args[i].name != chosen->args[i].name ||
          eval->args[i].type != chosen->args[i].type)
        return diags.error("internal error: argument #" + std::to_string(i) +
                           " of the evaluation copy '" + eval->funcName +
                           "' is '" + eval->args[i].name +
                           "', not the step's '" + chosen->args[i].name + "'");
  }
  program->variants.push_back(*chosen);
  program->dataParallel =
      module->hasAttr(mlir::ds::DSDialect::kDataParallelAttrName);
  if (program->precisionSchedule)
    for (const std::string &name : program->variantNames) {
      auto it = llvm::find_if(
          *contracts, [&](const auto &c) { return c.funcName == name; });
      if (it == contracts->end())
        return diags.error("the step variant '" + name + "' is not in the '" +
                           mlir::ds::DSDialect::kContractAttrName + "' table");
      if (!sameSignature(*it, *chosen))
        return diags.error("the step variant '" + name +
                           "' does not share the signature of '" +
                           chosen->funcName + "'");
      program->variants.push_back(*it);
    }

  start = nowSeconds();
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  ExecutionEngineOptions engineOptions;
  // Host tuning (a target machine for LLVM's cost models) lets the loop
  // vectoriser work, but on these large single-function steps it more than
  // doubles LLVM's compile time for under 10 % of step time (GPT block, d 256:
  // 5.1 s / 268 ms vs 1.8 s / 306 ms), so it is opt-in: DS_RUN_TUNE_HOST=1.
  std::unique_ptr<llvm::TargetMachine> targetMachine;
  if (const char *tune = std::getenv("DS_RUN_TUNE_HOST");
      tune && *tune && *tune != '0') {
    auto machineBuilder = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!machineBuilder)
      return diags.error("cannot describe the host CPU: " +
                         llvm::toString(machineBuilder.takeError()));
    machineBuilder->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
    auto tm = machineBuilder->createTargetMachine();
    if (!tm)
      return diags.error("cannot create a target machine for the host: " +
                         llvm::toString(tm.takeError()));
    targetMachine = std::move(*tm);
  }
  // The transformer is a function_ref: keep the function alive.
  std::function<llvm::Error(llvm::Module *)> optimize =
      [level = optLevel(), tm = targetMachine.get(),
       limit = blockSplitLimit()](llvm::Module *m) -> llvm::Error {
    if (llvm::Error e = optimizeModule(*m, level, tm))
      return e;
    if (!limit)
      return llvm::Error::success();
    splitLargeBlocks(*m, limit);
    // A broken module would abort in code generation: say what happened.
    std::string problems;
    llvm::raw_string_ostream os(problems);
    if (llvm::verifyModule(*m, &os))
      return llvm::createStringError(
          "internal error: the step's LLVM IR is invalid after splitting its "
          "large blocks (DS_RUN_SPLIT_BLOCKS=0 turns that off): " +
          problems);
    return llvm::Error::success();
  };
  engineOptions.transformer = optimize;
  engineOptions.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  engineOptions.enableObjectDump = options.compileOnly;
  program->objectKept = options.compileOnly;
  // memrefCopy (copies between differently laid out buffers) lives in
  // MLIR's C runner utilities.
  SmallVector<StringRef, 1> libs = {DS_MLIR_C_RUNNER_UTILS};
  engineOptions.sharedLibPaths = libs;
  // DS_RUN_PROFILE=1 lets `perf record -k 1` + `perf inject --jit` (and
  // gdb) name the functions of the compiled step.
  if (const char *profile = std::getenv("DS_RUN_PROFILE");
      profile && *profile && *profile != '0') {
    engineOptions.enablePerfNotificationListener = true;
    engineOptions.enableGDBNotificationListener = true;
  }
  auto engine = ExecutionEngine::create(module, engineOptions);
  if (!engine)
    return diags.error("JIT compilation failed: " +
                       llvm::toString(engine.takeError()));
  program->engine = std::move(*engine);
  // The JIT generates machine code on the first lookup: do it now, so that
  // the compile time is reported as such and, in an MPI job, no rank waits
  // in a collective (polling a core) while a peer compiles its first step.
  for (const mlir::ds::TrainingContract &c : program->variants)
    if (auto fn = program->engine->lookupPacked("_mlir_ciface_" + c.funcName);
        !fn)
      return diags.error("JIT compilation of '" + c.funcName +
                         "' failed: " + llvm::toString(fn.takeError()));
  program->compileTimes.llvm = nowSeconds() - start;
  // Compiled only: the module constructors that ran at the lookup may have
  // tried to load a GPU step's kernels on a machine without a device.
  if (options.compileOnly)
    dsrt_clear_error();
  return program;
}

Error StepProgram::writeObject(StringRef path) const {
  if (!objectKept)
    return llvm::createStringError(
        "internal error: the step was not compiled with compileOnly");
  // dumpToObjectFile reports failures on stderr only: check the file.
  (void)llvm::sys::fs::remove(path);
  engine->dumpToObjectFile(path);
  uint64_t size = 0;
  if (llvm::sys::fs::file_size(path, size) || size == 0)
    return llvm::createStringError("cannot write the object file '" + path +
                                   "'");
  return Error::success();
}

StepProgram::~StepProgram() { releaseDeviceBuffers(); }

void *StepProgram::deviceBuffer(unsigned index, size_t bytes) {
#ifdef DSRT_HAVE_CUDA
  if (deviceBuffers.size() <= index)
    deviceBuffers.resize(index + 1, {nullptr, 0});
  auto &[ptr, size] = deviceBuffers[index];
  if (ptr && size == bytes)
    return ptr;
  if (ptr)
    dsrt_cuda_free(ptr);
  // A zero-byte tensor still needs a distinct address.
  ptr = dsrt_cuda_alloc(static_cast<int64_t>(std::max<size_t>(bytes, 1)));
  size = ptr ? bytes : 0;
  return ptr;
#else
  (void)index;
  (void)bytes;
  return nullptr;
#endif
}

/// A memref descriptor of a row-major tensor at `data`: {allocated,
/// aligned, offset, sizes..., strides...}.
static std::vector<int64_t> describeTensor(const void *data,
                                           llvm::ArrayRef<int64_t> shape) {
  auto base = reinterpret_cast<int64_t>(data);
  std::vector<int64_t> d = {base, base, 0};
  d.insert(d.end(), shape.begin(), shape.end());
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  d.insert(d.end(), strides.begin(), strides.end());
  return d;
}

void StepProgram::releaseDeviceBuffers() {
#ifdef DSRT_HAVE_CUDA
  for (auto &[ptr, bytes] : deviceBuffers)
    if (ptr)
      dsrt_cuda_free(ptr);
#endif
  deviceBuffers.clear();
}

Error StepProgram::invoke(const mlir::ds::TrainingContract &c,
                          std::vector<std::vector<int64_t>> &descriptors) {
  std::vector<void *> pointers;
  for (auto &d : descriptors)
    pointers.push_back(d.data());
  std::vector<void *> packed;
  for (void *&p : pointers)
    packed.push_back(&p);
  return engine->invokePacked("_mlir_ciface_" + c.funcName, packed);
}

Error StepProgram::runAt(llvm::ArrayRef<void *> data, unsigned variant) {
  return runContractAt(variant == 0 ? stepContract : variants[variant], data);
}

Error StepProgram::runEvalAt(EvalKind kind, llvm::ArrayRef<void *> data) {
  return runContractAt(*evalContract(kind), data);
}

Error StepProgram::runContractAt(const mlir::ds::TrainingContract &c,
                                 llvm::ArrayRef<void *> data) {
  if (data.size() != c.args.size() + c.results.size())
    return llvm::createStringError("step called with the wrong number of "
                                   "tensors");
  std::vector<std::vector<int64_t>> descriptors;
  descriptors.reserve(data.size());
  for (auto [i, arg] : llvm::enumerate(c.args))
    descriptors.push_back(describeTensor(data[i], arg.type.getShape()));
  for (auto [r, res] : llvm::enumerate(c.results))
    descriptors.push_back(
        describeTensor(data[c.args.size() + r], res.type.getShape()));
  dsrt_clear_error();
  if (Error e = invoke(c, descriptors))
    return e;
  if (const char *err = dsrt_last_error())
    return llvm::createStringError(std::string("runtime error: ") + err);
  return Error::success();
}

Error StepProgram::call(const mlir::ds::TrainingContract &c,
                        llvm::ArrayRef<HostTensor *> args,
                        llvm::MutableArrayRef<HostTensor> results) {
  if (args.size() != c.args.size() || results.size() != c.results.size())
    return llvm::createStringError("step called with the wrong number of "
                                   "tensors");
  std::vector<std::vector<int64_t>> descriptors;
  descriptors.reserve(args.size() + results.size());
  for (HostTensor *t : args)
    descriptors.push_back(describeTensor(t->bytes.data(), t->shape));
  for (HostTensor &t : results)
    descriptors.push_back(describeTensor(t.bytes.data(), t.shape));
  dsrt_clear_error();
  // On the GPU the step reads and writes device buffers: the arguments go
  // up before the call and the results come back after it, on the
  // runtime's one stream (the copy back waits for the step).
  auto hostTensor = [&](unsigned i) -> HostTensor & {
    return i < args.size() ? *args[i] : results[i - args.size()];
  };
#ifdef DSRT_HAVE_CUDA
  if (onGPU)
    for (unsigned i = 0; i < descriptors.size(); ++i) {
      HostTensor &t = hostTensor(i);
      void *device = deviceBuffer(i, t.bytes.size());
      if (!device)
        return llvm::createStringError(std::string("runtime error: ") +
                                       (dsrt_last_error()
                                            ? dsrt_last_error()
                                            : "cannot allocate device memory"));
      descriptors[i][0] = descriptors[i][1] = reinterpret_cast<int64_t>(device);
      if (i < args.size() && !t.bytes.empty() &&
          dsrt_cuda_copy_to_device(device, t.bytes.data(),
                                   static_cast<int64_t>(t.bytes.size())) != 0)
        return llvm::createStringError(std::string("runtime error: ") +
                                       dsrt_last_error());
    }
#endif
  (void)hostTensor;
  if (llvm::Error e = invoke(c, descriptors))
    return e;
#ifdef DSRT_HAVE_CUDA
  // The results come back on the step's stream, then one wait for all.
  if (onGPU && !dsrt_last_error()) {
    for (unsigned i = args.size(); i < descriptors.size(); ++i) {
      HostTensor &t = hostTensor(i);
      if (!t.bytes.empty())
        mgpuMemcpy(t.bytes.data(), deviceBuffers[i].first,
                   static_cast<int64_t>(t.bytes.size()), dsrt_cuda_stream());
    }
    dsrt_cuda_synchronize();
  }
#endif
  if (const char *err = dsrt_last_error())
    return llvm::createStringError(std::string("runtime error: ") + err);
  return Error::success();
}
