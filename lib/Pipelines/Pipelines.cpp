//===- Pipelines.cpp - ds pass pipelines ----------------------------------===//
//
// ds-training-pipeline: the technique passes in their canonical order.
// ds-cpu-pipeline: a ds module down to the LLVM dialect for the CPU JIT.
// Both are built from pass objects (`pm.addPass(create...(options))`), so
// options are typed end to end and a bad one is the option parser's
// diagnostic, never a re-parse of a string, and a tool that runs them
// needs no pass registered. Each step's position is explained where it is
// added. This library may depend on everything (as IREE's
// Pipelines/); tools and the runner call its builders.
//
//===----------------------------------------------------------------------===//

#include "ds/Pipelines/Pipelines.h"

#include "ds/Conversion/Passes.h"
#include "ds/Transforms/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ConvertToLLVM/ToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Conversion/VectorToSCF/VectorToSCF.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/Vector/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::ds;

namespace {
/// Upstream's buffer-results-to-out-params, hoisting static allocations,
/// erases a returned allocation when it rewrites the allocation's first
/// result, so a buffer returned twice (two results CSE made equal, as a
/// pipeline stage's update can return) crashes it, and a returned argument
/// has no allocation to hoist. Each such result gets its own copy.
struct CopyAliasedResultsPass
    : public PassWrapper<CopyAliasedResultsPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(CopyAliasedResultsPass)
  StringRef getArgument() const final { return "ds-copy-aliased-results"; }
  StringRef getDescription() const final {
    return "Give a buffer returned twice, or a returned argument, its own "
           "copy";
  }
  void runOnOperation() override {
    getOperation().walk([](func::ReturnOp ret) {
      llvm::DenseSet<Value> seen;
      OpBuilder b(ret);
      for (OpOperand &o : ret->getOpOperands()) {
        auto type = dyn_cast<MemRefType>(o.get().getType());
        if (!type || !type.hasStaticShape() || !type.getLayout().isIdentity())
          continue;
        if (seen.insert(o.get()).second && !isa<BlockArgument>(o.get()))
          continue;
        Value copy = memref::AllocOp::create(b, ret.getLoc(), type);
        memref::CopyOp::create(b, ret.getLoc(), o.get(), copy);
        o.set(copy);
      }
    });
  }
};
} // namespace

std::unique_ptr<Pass> mlir::ds::createCopyAliasedResultsPass() {
  return std::make_unique<CopyAliasedResultsPass>();
}

TrainingPipelineConfig TrainingPipelineOptions::getConfig() const {
  TrainingPipelineConfig config;
  // An option of a technique turns the technique on.
  auto given = [](const llvm::cl::Option &o) {
    return o.getNumOccurrences() > 0;
  };
  if (given(pipelineStages) || given(pipelineMicroBatches) ||
      given(pipelineSchedule) || given(pipelineCluster) ||
      given(pipelineObjective)) {
    PartitionPipelinePassOptions &o = config.partition.emplace();
    o.stages = pipelineStages;
    o.microBatches = pipelineMicroBatches;
    o.schedule = pipelineSchedule;
    o.cluster = pipelineCluster;
    o.objective = pipelineObjective;
  }
  if (fuse || given(fuseBucketBytes) || given(fuseFirstBucketBytes)) {
    FuseAllReducePassOptions &o = config.fuseAllReduce.emplace();
    o.bucketBytes = fuseBucketBytes;
    o.firstBucketBytes = fuseFirstBucketBytes;
  }
  if (compress || given(compressScheme) || given(compressFixedThresholds) ||
      given(compressQuantileLow) || given(compressQuantileHigh) ||
      given(compressThetaLow) || given(compressThetaHigh) ||
      given(compressRatio) || given(compressWarmupIterations) ||
      given(compressMomentum) || given(compressLocalClip) ||
      given(compressRank) || given(compressStartIteration)) {
    CompressAllReducePassOptions &o = config.compressAllReduce.emplace();
    o.scheme = compressScheme;
    o.fixedThresholds = compressFixedThresholds;
    o.quantileLow = compressQuantileLow;
    o.quantileHigh = compressQuantileHigh;
    o.thetaLow = compressThetaLow;
    o.thetaHigh = compressThetaHigh;
    o.ratio = compressRatio;
    o.warmupIterations = compressWarmupIterations;
    o.momentum = compressMomentum;
    o.localClip = compressLocalClip;
    o.rank = compressRank;
    o.startIteration = compressStartIteration;
  }
  config.dataParallel = dataParallel || config.fuseAllReduce.has_value() ||
                        config.compressAllReduce.has_value();
  if (sparsity || given(spPolicy) || given(spBlock) || given(spSchedule) ||
      given(spInitial) || given(spFinal) || given(spHold) ||
      given(spTotalSteps) || given(spUpdateEvery) || spRegrow ||
      given(spDropFraction) || given(spRegrowEnd) || given(spScore) ||
      given(spDistribution)) {
    SparsifyMatMulPassOptions &o = config.sparsity.emplace();
    o.policy = spPolicy;
    o.block = spBlock;
    o.schedule = spSchedule;
    o.initial = spInitial;
    o.final = spFinal;
    o.hold = spHold;
    // One training length, unless the schedule is given its own.
    o.totalSteps = spTotalSteps ? spTotalSteps : totalSteps;
    o.updateEvery = spUpdateEvery;
    o.regrow = spRegrow;
    o.dropFraction = spDropFraction;
    o.regrowEnd = spRegrowEnd;
    o.score = spScore;
    o.distribution = spDistribution;
  }
  if (fakeQuant || given(fqPolicy) || given(fqWeights) ||
      given(fqActivations) || given(fqWeightBits) || given(fqActivationBits) ||
      given(fqReduceRange) || given(fqObserver) || given(fqWeightObserver) ||
      given(fqAveragingConstant) || given(fqFreezeObserversAt) ||
      given(fqFrom) || fqDynamicBits || given(fqBitsThreshold) ||
      given(fqBitsWindow) || given(fqBitsMomentum) || fqLearnScales ||
      given(fqScaleLr)) {
    InsertFakeQuantPassOptions &o = config.fakeQuant.emplace();
    o.policy = fqPolicy;
    o.weights = fqWeights;
    o.activations = fqActivations;
    o.weightBits = fqWeightBits;
    o.activationBits = fqActivationBits;
    o.reduceRange = fqReduceRange;
    o.observer = fqObserver;
    o.weightObserver = fqWeightObserver;
    o.averagingConstant = fqAveragingConstant;
    o.freezeObserversAt = fqFreezeObserversAt;
    o.fakeQuantFrom = fqFrom;
    o.learnScales = fqLearnScales;
    o.scaleLr = fqScaleLr;
    o.dynamicBits = fqDynamicBits || given(fqBitsThreshold) ||
                    given(fqBitsWindow) || given(fqBitsMomentum);
    if (o.dynamicBits) {
      QATBitWidthPassOptions &b = config.qatBitWidth.emplace();
      b.threshold = fqBitsThreshold;
      b.window = fqBitsWindow;
      b.momentum = fqBitsMomentum;
    }
  }
  if (precision || given(policy) || given(anomalySteps)) {
    AssignPrecisionPassOptions &o = config.precision.emplace();
    o.policy = policy;
    o.totalSteps = totalSteps;
    o.anomalySteps = anomalySteps;
  }
  if (lossScaling || given(lsInitScale) || given(lsGrowthFactor) ||
      given(lsBackoffFactor) || given(lsGrowthInterval) ||
      given(lsHysteresis) || given(lsMinScale) || given(lsCapGamma) ||
      given(lsCapMax) || given(lsAnomaly) || given(lsAnomalyEpsilon) ||
      given(lsAnomalyCount) || given(lsInjectNonfinite)) {
    InsertLossScalingPassOptions &o = config.lossScaling.emplace();
    o.initScale = lsInitScale;
    o.growthFactor = lsGrowthFactor;
    o.backoffFactor = lsBackoffFactor;
    o.growthInterval = lsGrowthInterval;
    o.hysteresis = lsHysteresis;
    o.minScale = lsMinScale;
    o.capGamma = lsCapGamma;
    o.capMax = lsCapMax;
    o.anomaly = lsAnomaly;
    o.anomalyEpsilon = lsAnomalyEpsilon;
    o.anomalyCount = lsAnomalyCount;
    o.injectNonfinite = lsInjectNonfinite;
  }
  if (clip || given(clipMode) || given(clipMaxNorm) || given(clipNormType) ||
      given(clipHistory) || given(clipNoiseStd)) {
    ClipGradientsPassOptions &o = config.clip.emplace();
    o.mode = clipMode;
    o.maxNorm = clipMaxNorm;
    o.normType = clipNormType;
    o.history = clipHistory;
    o.noiseStd = clipNoiseStd;
  }
  InsertOptimizerPassOptions &o = *config.optimizer;
  o.kind = optKind;
  o.lr = optLr;
  o.momentum = optMomentum;
  o.dampening = optDampening;
  o.nesterov = optNesterov;
  o.beta1 = optBeta1;
  o.beta2 = optBeta2;
  o.eps = optEps;
  o.weightDecay = optWeightDecay;
  o.schedule = optSchedule;
  o.warmupSteps = optWarmupSteps;
  // One training length for the precision schedule and the cosine, unless
  // the cosine is given its own.
  o.totalSteps = optTotalSteps ? optTotalSteps : totalSteps;
  o.warmupStartFactor = optWarmupStartFactor;
  o.minLrFactor = optMinLrFactor;
  config.lower = lower;
  config.libraryGemm = libraryGemm;
  config.gemmConvs = gemmConvs;
  config.causalBlock = causalBlock;
  return config;
}

std::string TrainingPipelineOptions::getRepeatedOption() const {
  std::vector<std::string> repeated;
  for (const auto &entry : OptionsMap)
    if (entry.second->getNumOccurrences() > 1)
      repeated.push_back(entry.first.str());
  llvm::sort(repeated);
  return repeated.empty() ? std::string() : repeated.front();
}

void mlir::ds::buildStepBufferization(OpPassManager &pm) {
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  // Results become out-parameters the runner allocates; a result that
  // aliases an argument or another result is copied first.
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.hoistStaticAllocs = true;
  outParams.modifyPublicFunctions = true;
  pm.addPass(createCopyAliasedResultsPass());
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  pm.addPass(createCanonicalizerPass());
}

void mlir::ds::buildCPUPipeline(OpPassManager &pm, bool libraryGemm,
                                bool gemmConvs, int64_t causalBlock) {
  auto cleanup = [&] {
    OpPassManager &f = pm.nest<func::FuncOp>();
    f.addPass(createCanonicalizerPass());
    f.addPass(createCSEPass());
  };
  // 1. The contract moves to the module table before lowering drops the
  //    argument attributes; the step gets the runner's calling convention.
  pm.addPass(createExportContractPass());
  pm.addPass(createPrepareStepABIPass());
  // 2. ds -> linalg/tensor on tensors, then fuse elementwise chains while
  //    they are still values (one loop nest per chain, no temporaries),
  //    leaving matmuls named for the library GEMM of step 4.
  //    The ops whose kernels live in the runtime (block-sparse products,
  //    top-k) stay for step 2c; without library kernels they get the dense
  //    reference lowering.
  ConvertDSToLinalgPassOptions toLinalg;
  toLinalg.runtimeKernels = libraryGemm;
  // Convolutions as im2col + the same GEMM: 5.9x faster than the loop
  // nests for a CNN on 32 x 32 images (benchmarks/conv_step.py).
  toLinalg.gemmConvs = libraryGemm && gemmConvs;
  // Causal attention's products over their lower block triangle: 10/16 of
  // the work at 1024 tokens (convert-linalg-to-ds-runtime splits them).
  toLinalg.causalBlock = libraryGemm ? causalBlock : 0;
  pm.addNestedPass<func::FuncOp>(createConvertDSToLinalgPass(toLinalg));
  cleanup();
  pm.addNestedPass<func::FuncOp>(createFuseElementwisePass());
  cleanup();
  if (libraryGemm)
    pm.addNestedPass<func::FuncOp>(createPrepareLibraryGemmsPass());
  // 2b. Everything but the GEMMs is tiled and vectorised while it is still
  //     on tensors: tiles become slices that bufferization writes in place,
  //     and the vector reads/writes fold onto the whole tensors.
  //     math.fpowi first becomes products (constant exponents) or
  //     powf(x, float(n)), which libm's pow computes exactly for integral
  //     exponents of negative bases: LLVM's powi takes a scalar exponent,
  //     and a vectorised body would give it a vector.
  math::MathExpandOpsPassOptions expandPowI;
  expandPowI.opMnemonics = {"fpowi"};
  pm.addNestedPass<func::FuncOp>(math::createMathExpandOpsPass(expandPowI));
  pm.addNestedPass<func::FuncOp>(createVectorizeCPUPass());
  cleanup();
  // 2c. Runtime kernels become calls on buffer views of their operands,
  //     after the last CSE (which could merge two calls' views of one
  //     tensor and so move a read past an in-place write). Collectives
  //     always become calls; kernels only with library-gemm.
  pm.addPass(createConvertDSToRuntimePass());
  // 3. Tensors -> buffers. Results become out-parameters that the runner
  //    allocates; static allocations of results are written in place.
  buildStepBufferization(pm);
  // 4. GEMMs go to the runtime's library call while they are still
  //    recognisable linalg ops on buffers; everything else becomes loops.
  if (libraryGemm)
    pm.addPass(createConvertLinalgToDSRuntimePass());
  // 5. f32 transcendentals as inline polynomials (on the vectors of step
  //    2b too), then loops for what was not vectorised, the vector ops
  //    lowered to 1-D vectors (reductions may be reassociated), and LLVM.
  //    Math on narrow floats is first extended to f32 (the patterns match
  //    f32 only, and LLVM has no FP8 math).
  math::MathExtendToSupportedTypesOptions extendMath;
  extendMath.targetTypeStr = "f32";
  pm.addNestedPass<func::FuncOp>(
      math::createMathExtendToSupportedTypes(extendMath));
  pm.addNestedPass<func::FuncOp>(createApproximateMathPass());
  bufferization::buildBufferDeallocationPipeline(pm);
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  {
    OpPassManager &f = pm.nest<func::FuncOp>();
    f.addPass(vector::createLowerVectorMultiReductionPass(
        vector::VectorMultiReductionLowering::InnerReduction));
    f.addPass(createConvertVectorToSCFPass(
        VectorTransferToSCFOptions().enableFullUnroll()));
  }
  // 6. Narrow floats, on the final scalars and 1-D vectors: arithmetic on
  //    bf16/f16/FP8 becomes f32 arithmetic between extf/truncf (one rounding
  //    per op, as PyTorch's CPU kernels do), and every extf/truncf of those
  //    types becomes exact integer code (LLVM has no FP8 types, and its bf16
  //    truncation is a libcall or a subnormal-flushing instruction). Storage
  //    stays narrow: the LLVM lowering represents FP8 as i8.
  arith::ArithEmulateUnsupportedFloatsOptions emulate;
  emulate.sourceTypeStrs = {"bf16", "f16", "f8E4M3FN", "f8E5M2"};
  emulate.targetTypeStr = "f32";
  pm.addPass(arith::createArithEmulateUnsupportedFloats(emulate));
  pm.addPass(createEmulateNarrowFloatsPass());
  // 7. LLVM.
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  ConvertVectorToLLVMPassOptions vectorToLLVM;
  vectorToLLVM.reassociateFPReductions = true;
  pm.addPass(createConvertVectorToLLVMPass(vectorToLLVM));
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void mlir::ds::buildTrainingPipeline(OpPassManager &pm,
                                     const TrainingPipelineConfig &config) {
  // The canonical order (DESIGN.md). Every technique still to come has its
  // slot here, so that its issue plugs in without re-deciding the order:
  //
  //  0. ds-sparsify-matmul, then ds-insert-fake-quant, on the forward,
  //     before autodiff: they rewrite forward ops into ops whose gradient
  //     rules give the sparse backward and the straight-through estimator,
  //     so autodiff builds a consistent backward; sparsify first, so a
  //     weight observer sees the masked weight.
  //  1. ds-autodiff.
  //  2. ds-assign-precision.
  //  3. ds-insert-loss-scaling.
  //  4. ds-data-parallel, ds-fuse-allreduce, ds-compress-allreduce on the
  //     unscaled gradients (error-feedback residuals keep their units when
  //     the scale changes); found_inf is MAX-reduced so every rank skips
  //     the same steps. Before 3b, so the QAT bit-width reads the averaged
  //     gradients and agrees on every rank.
  //  5. ds-clip-gradients, on the averaged gradients (clip_grad_norm_ after
  //     DDP's all-reduce).
  //  5b. ds-update-sparsity-masks, on the final gradients (every rank sees
  //     the same ones, so the masks agree).
  //  6. ds-insert-optimizer.
  //  7. [ds-partition-pipeline], last: it cuts the finished step.
  //  7b. canonicalize + cse on the finished step.
  //  8. Lowering (ds-cpu-pipeline).
  // Bracketed passes do not exist yet.

  // 0. Block sparsity, then fake quantization, rewrite the forward; autodiff
  //    then builds the sparse and straight-through backward from the ops'
  //    rules.
  if (config.sparsity)
    pm.addPass(createSparsifyMatMulPass(*config.sparsity));
  if (config.fakeQuant)
    pm.addPass(createInsertFakeQuantPass(*config.fakeQuant));
  // 0b. Data parallelism synchronizes batch norm on the forward, so that
  //     autodiff derives SyncBatchNorm's backward.
  if (config.dataParallel && config.autodiff && config.syncBatchNorm)
    pm.addPass(createSyncBatchNormPass());
  // 1. The backward first: every technique below works on gradients.
  if (config.autodiff)
    pm.addPass(createAutodiffPass());
  // 2. Precisions see forward and backward, so gradient GEMMs get their own
  //    formats; loss scaling then scales what the low-precision backward
  //    carries. The high-precision variant it may add is a training step
  //    too: every pass below treats it alike, so both keep one signature.
  if (config.precision)
    pm.addPass(createAssignPrecisionPass(*config.precision));
  // 3. Loss scaling multiplies the seed and unscales the gradients; the
  //    clipping that follows sees true gradient norms.
  if (config.lossScaling)
    pm.addPass(createInsertLossScalingPass(*config.lossScaling));
  // 4. Data parallelism on the unscaled gradients: every pass below sees
  //    the averaged gradients and one found_inf for all ranks.
  if (config.dataParallel)
    pm.addPass(createDataParallelPass());
  if (config.fuseAllReduce)
    pm.addPass(createFuseAllReducePass(*config.fuseAllReduce));
  if (config.compressAllReduce)
    pm.addPass(createCompressAllReducePass(*config.compressAllReduce));
  // 3b. The dynamic QAT bit-width reads the unscaled gradients (and
  //     found_inf, to skip what loss scaling skips).
  if (config.qatBitWidth)
    pm.addPass(createQATBitWidthPass(*config.qatBitWidth));
  // 5. Clipping on the unscaled gradients.
  if (config.clip)
    pm.addPass(createClipGradientsPass(*config.clip));
  // 5b. The mask updates score the final gradients; the optimizer then
  //     keeps the weights and their state zero outside the new masks.
  if (config.sparsity)
    pm.addPass(createUpdateSparsityMasksPass());
  // 6. The update last, guarded by found_inf when loss scaling ran.
  if (config.optimizer)
    pm.addPass(createInsertOptimizerPass(*config.optimizer));
  // 7. The pipeline cut last, on the finished step (it reads the
  //    forward/backward annotations the cleanup below may drop).
  if (config.partition)
    pm.addPass(createPartitionPipelinePass(*config.partition));
  // 7b. Clean up the finished step, so that what a reader or a lit test sees
  //     has no `x * 1`, reshape pairs, repeated scalar code or a tensor
  //     rounded twice (a cast of its reshape reuses its cast). The ds folds
  //     are exact, so numerics do not change. Not earlier: the greedy
  //     driver merges equal constants, which would drop the `ds.seed`
  //     marker before ds-insert-loss-scaling finds it, and folding or CSE
  //     would lose the forward/backward annotations (`ds.op_id`,
  //     `ds.vjp_of`) that ds-assign-precision reads.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // 8. Lowering.
  if (config.lower)
    buildCPUPipeline(pm, config.libraryGemm, config.gemmConvs,
                     config.causalBlock);
}

void mlir::ds::registerDSPipelines() {
  // Registered through registerPassPipeline rather than
  // PassPipelineRegistration, whose builders cannot fail.
  registerPassPipeline(
      "ds-training-pipeline",
      "The training techniques in their canonical order: "
      "ds-sparsify-matmul, ds-insert-fake-quant, ds-autodiff, "
      "ds-assign-precision, ds-insert-loss-scaling, ds-clip-gradients, "
      "ds-update-sparsity-masks, ds-insert-optimizer, ds-partition-pipeline, "
      "then canonicalize and cse (and ds-cpu-pipeline "
      "with lower=true)",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> emitError) {
        TrainingPipelineOptions options;
        if (failed(options.parseFromString(text)))
          return emitError("ds-training-pipeline: cannot parse the options '" +
                           text + "'");
        if (std::string twice = options.getRepeatedOption(); !twice.empty())
          return emitError("in option '" + twice +
                           "' of pass 'ds-training-pipeline': given more than "
                           "once; give each option once");
        buildTrainingPipeline(pm, options.getConfig());
        return success();
      },
      [](function_ref<void(const ::mlir::detail::PassOptions &)> optHandler) {
        optHandler(TrainingPipelineOptions());
      });
  registerPassPipeline(
      "ds-cpu-pipeline",
      "Lower a ds module to the LLVM dialect for the CPU JIT (contract "
      "export, convert-ds-to-linalg, fusion, bufferization, library GEMMs, "
      "loops, LLVM)",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> emitError) {
        CPUPipelineOptions options;
        if (failed(options.parseFromString(text)))
          return emitError("ds-cpu-pipeline: cannot parse the options '" +
                           text + "'");
        buildCPUPipeline(pm, options.libraryGemm, options.gemmConvs,
                         options.causalBlock);
        return success();
      },
      [](function_ref<void(const ::mlir::detail::PassOptions &)> optHandler) {
        optHandler(CPUPipelineOptions());
      });
  registerPassPipeline(
      "ds-gpu-pipeline",
      "Lower a ds module to the LLVM dialect for NVIDIA GPUs (contract "
      "export, convert-ds-to-linalg, fusion, bufferization, cuBLASLt GEMMs, "
      "gpu.launch kernels, NVVM, a cubin embedded by gpu-module-to-binary)",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> emitError) {
        GPUPipelineOptions options;
        if (failed(options.parseFromString(text)))
          return emitError("ds-gpu-pipeline: cannot parse the options '" +
                           text + "'");
        std::string error;
        if (failed(buildGPUPipeline(pm, options.getConfig(), error)))
          return emitError(error);
        return success();
      },
      [](function_ref<void(const ::mlir::detail::PassOptions &)> optHandler) {
        optHandler(GPUPipelineOptions());
      });
}
