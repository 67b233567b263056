//===- Pipelines.cpp - ds pass pipelines ----------------------------------===//
//
// ds-training-pipeline: the technique passes in their canonical order.
// ds-cpu-pipeline: a ds module down to the LLVM dialect for the CPU JIT.
// Each step's position is explained where it is added. The upstream part is
// written as a textual pipeline: it reads like the mlir-opt invocation a
// user would type and survives upstream renames of pass-creation functions.
//
//===----------------------------------------------------------------------===//

#include "ds/Conversion/Passes.h"
#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::ds;

/// Appends a textual pipeline. Built-in strings are fixed, so failure is a
/// bug; a pipeline builder cannot fail, so options a user wrote wrong end
/// the process with the parser's message and exit code 1 (no crash dump).
static void addTextual(OpPassManager &pm, const Twine &pipeline,
                       bool fromUser = false) {
  if (failed(parsePassPipeline(pipeline.str(), pm, llvm::errs())))
    llvm::report_fatal_error("ds pipeline: bad pipeline '" + pipeline + "'",
                             /*gen_crash_diag=*/!fromUser);
}

void mlir::ds::buildCPUPipeline(OpPassManager &pm,
                                const CPUPipelineOptions &options) {
  // 1. The contract moves to the module table before lowering drops the
  //    argument attributes; the step gets the runner's calling convention.
  pm.addPass(createExportContractPass());
  pm.addPass(createPrepareStepABIPass());
  // 2. ds -> linalg/tensor on tensors, then fuse elementwise chains while
  //    they are still values (one loop nest per chain, no temporaries),
  //    leaving matmuls named for the library GEMM of step 4.
  pm.addNestedPass<func::FuncOp>(createConvertDSToLinalgPass());
  addTextual(pm, "func.func(canonicalize,cse)");
  pm.addNestedPass<func::FuncOp>(createFuseElementwisePass());
  addTextual(pm, "func.func(canonicalize,cse)");
  if (options.libraryGemm)
    pm.addNestedPass<func::FuncOp>(createPrepareLibraryGemmsPass());
  // 2b. Everything but the GEMMs is tiled and vectorised while it is still
  //     on tensors: tiles become slices that bufferization writes in place,
  //     and the vector reads/writes fold onto the whole tensors.
  pm.addNestedPass<func::FuncOp>(createVectorizeCPUPass());
  addTextual(pm, "func.func(canonicalize,cse)");
  // 3. Tensors -> buffers. Results become out-parameters that the runner
  //    allocates; static allocations of results are written in place.
  addTextual(pm, "one-shot-bufferize{bufferize-function-boundaries "
                 "function-boundary-type-conversion=identity-layout-map},"
                 "buffer-results-to-out-params{hoist-static-allocs "
                 "modify-public-functions},"
                 "canonicalize");
  // 4. GEMMs go to the runtime's library call while they are still
  //    recognisable linalg ops on buffers; everything else becomes loops.
  if (options.libraryGemm)
    pm.addPass(createConvertLinalgToDSRuntimePass());
  // 5. f32 transcendentals as inline polynomials (on the vectors of step
  //    2b too), then loops for what was not vectorised, the vector ops
  //    lowered to 1-D vectors (reductions may be reassociated), and LLVM.
  //    Math on narrow floats is first extended to f32 (the patterns match
  //    f32 only, and LLVM has no FP8 math).
  addTextual(pm, "func.func(math-extend-to-supported-types{target-type=f32})");
  pm.addNestedPass<func::FuncOp>(createApproximateMathPass());
  addTextual(pm, "buffer-deallocation-pipeline,"
                 "func.func(convert-linalg-to-loops),"
                 "func.func(lower-vector-multi-reduction{"
                 "lowering-strategy=inner-reduction},"
                 "convert-vector-to-scf{full-unroll=true})");
  // 6. Narrow floats, on the final scalars and 1-D vectors: arithmetic on
  //    bf16/f16/FP8 becomes f32 arithmetic between extf/truncf (one rounding
  //    per op, as PyTorch's CPU kernels do), and every extf/truncf of those
  //    types becomes exact integer code (LLVM has no FP8 types, and its bf16
  //    truncation is a libcall or a subnormal-flushing instruction). Storage
  //    stays narrow: the LLVM lowering represents FP8 as i8.
  addTextual(pm, "arith-emulate-unsupported-floats{"
                 "source-types=bf16,f16,f8E4M3FN,f8E5M2 target-type=f32}");
  pm.addPass(createEmulateNarrowFloatsPass());
  addTextual(pm, "expand-strided-metadata,lower-affine,convert-scf-to-cf,"
                 "convert-vector-to-llvm{reassociate-fp-reductions=true},"
                 "convert-math-to-llvm,convert-math-to-libm,"
                 "convert-to-llvm,reconcile-unrealized-casts");
}

void mlir::ds::buildTrainingPipeline(OpPassManager &pm,
                                     const TrainingPipelineOptions &options) {
  // 1. The backward first: every technique below works on gradients.
  pm.addPass(createAutodiffPass());
  // 2. Precisions see forward and backward, so gradient GEMMs get their own
  //    formats; loss scaling then scales what the low-precision backward
  //    carries.
  if (options.precision || !options.policy.empty()) {
    std::string spelling = "ds-assign-precision{";
    if (!options.policy.empty())
      spelling += "policy=" + options.policy + " ";
    spelling += "total-steps=" + std::to_string(options.totalSteps) +
                " anomaly-steps=" + std::to_string(options.anomalySteps) + "}";
    addTextual(pm, spelling, /*fromUser=*/true);
  }
  // 3. Loss scaling multiplies the seed and unscales the gradients; the
  //    clipping that follows sees true gradient norms.
  if (options.lossScaling)
    pm.addPass(createInsertLossScalingPass());
  if (!options.clip.empty())
    addTextual(pm, "ds-clip-gradients{" + options.clip + "}",
               /*fromUser=*/true);
  // 4. The update last, guarded by found_inf when loss scaling ran.
  addTextual(pm, "ds-insert-optimizer{" + options.optimizer + "}",
             /*fromUser=*/true);
  if (options.lower)
    buildCPUPipeline(pm, CPUPipelineOptions());
}

void mlir::ds::registerDSPipelines() {
  PassPipelineRegistration<TrainingPipelineOptions>(
      "ds-training-pipeline",
      "The training techniques in their canonical order: ds-autodiff, "
      "ds-assign-precision, ds-insert-loss-scaling, ds-clip-gradients, "
      "ds-insert-optimizer (and ds-cpu-pipeline with lower=true)",
      buildTrainingPipeline);
  PassPipelineRegistration<CPUPipelineOptions>(
      "ds-cpu-pipeline",
      "Lower a ds module to the LLVM dialect for the CPU JIT (contract "
      "export, convert-ds-to-linalg, fusion, bufferization, library GEMMs, "
      "loops, LLVM)",
      buildCPUPipeline);
}
