//===- GPUPipeline.cpp - ds-gpu-pipeline ----------------------------------===//
//
// A ds module down to the LLVM dialect for NVIDIA GPUs: the same front half
// as ds-cpu-pipeline (contract, ds -> linalg, elementwise fusion,
// bufferization with results as out-parameters), then GEMMs as cuBLASLt
// calls, every other op a gpu.launch kernel, and the kernels through NVVM
// to a cubin that ptxas assembles now and gpu-module-to-binary embeds in
// the host module. The host code calls only the runtime (the mgpu* and
// dsrt_cuda_* functions of ds_runtime_cuda.h).
//
//===----------------------------------------------------------------------===//

#include "ds/Pipelines/Pipelines.h"

#include "ds/Conversion/Passes.h"
#include "ds/Transforms/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ConvertToLLVM/ToLLVMPass.h"
#include "mlir/Conversion/GPUCommon/GPUCommonPass.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Regex.h"

#include <cstdlib>

using namespace mlir;
using namespace mlir::ds;

GPUPipelineConfig GPUPipelineOptions::getConfig() const {
  GPUPipelineConfig c;
  c.chip = chip;
  c.features = features;
  c.format = format;
  c.blockSize = blockSize;
  c.maxBlocks = maxBlocks;
  c.unroll = unroll;
  c.vectorize = vectorize;
  c.nativeCasts = nativeCasts;
  c.index32 = index32;
  c.fuseRows = fuseRows;
  c.fuseSiblings = fuseSiblings;
  c.cacheRows = cacheRows;
  c.rowColumns = rowColumns;
  c.forwardCopies = forwardCopies;
  c.bucketViews = bucketViews;
  c.deviceEncoders = deviceEncoders;
  c.deviceEncodersMin = deviceEncodersMin;
  c.causalBlock = causalBlock;
  c.mergeLaunches = mergeLaunches;
  c.launchReport = launchReport;
  c.launchReportCollectives = launchReportCollectives;
  c.optLevel = optLevel;
  c.toolkit = toolkit;
  c.emulateKernels = emulateKernels;
  return c;
}

std::string mlir::ds::ptxFeaturesFor(StringRef chip) {
  // CUDA 13's ptxas targets Turing (sm_75) and newer; each chip needs the
  // PTX ISA version that introduced it (the PTX ISA manual's target table).
  // PTX 8.1 (CUDA 12.1, drivers since 2023) is the floor: it has sm_90a and
  // everything older, and kernel parameters up to 32764 bytes instead of
  // 4352. Fusion makes kernels with many buffers, each a 7-word memref
  // descriptor: the backward of a 12-layer GPT (d_model 1024) has a kernel
  // of 63 buffers (4568 bytes) that PTX 8.0 cannot take.
  return llvm::StringSwitch<std::string>(chip)
      .Cases({"sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a"},
             "+ptx81")
      .Cases({"sm_100", "sm_100a", "sm_101", "sm_101a"}, "+ptx86")
      .Cases({"sm_120", "sm_120a"}, "+ptx87")
      .Cases({"sm_103", "sm_103a", "sm_121", "sm_121a"}, "+ptx88")
      .Default("");
}

/// The toolkit gpu-module-to-binary runs ptxas and finds libdevice in.
static std::string toolkitPath(const GPUPipelineConfig &config) {
  if (!config.toolkit.empty())
    return config.toolkit;
  if (const char *home = std::getenv("CUDA_HOME"); home && *home)
    return home;
  return "/usr/local/cuda";
}

LogicalResult mlir::ds::buildGPUPipeline(OpPassManager &pm,
                                         const GPUPipelineConfig &config,
                                         std::string &error) {
  std::string features = config.features;
  if (features.empty()) {
    features = ptxFeaturesFor(config.chip);
    if (features.empty()) {
      error = "ds-gpu-pipeline: cannot target chip '" + config.chip +
              "': the CUDA 13 toolkit targets sm_75 and newer (sm_75, "
              "sm_80, sm_86, sm_87, sm_89, sm_90[a], sm_100[a], sm_101[a], "
              "sm_103[a], sm_120[a], sm_121[a])";
      return failure();
    }
  }
  if (config.blockSize < 32 || config.blockSize > 1024 ||
      config.blockSize % 32 != 0 || config.maxBlocks < 1) {
    error = "ds-gpu-pipeline: block-size must be a multiple of 32 in [32, "
            "1024] and max-blocks at least 1 (got " +
            std::to_string(config.blockSize) + " and " +
            std::to_string(config.maxBlocks) + ")";
    return failure();
  }
  if (config.deviceEncodersMin < 0) {
    error = "ds-gpu-pipeline: device-encoders-min is a number of elements, "
            "not " +
            std::to_string(config.deviceEncodersMin);
    return failure();
  }
  if (config.unroll < 0 || config.unroll > 16) { // the pass's kMaxUnroll
    error = "ds-gpu-pipeline: unroll must be in [0, 16] (got " +
            std::to_string(config.unroll) + ")";
    return failure();
  }
  if (!llvm::is_contained({"bin", "isa", "fatbin", "llvm"}, config.format)) {
    error = "ds-gpu-pipeline: unknown format '" + config.format +
            "' (expected bin, isa, fatbin or llvm)";
    return failure();
  }
  auto cleanup = [&] {
    OpPassManager &f = pm.nest<func::FuncOp>();
    f.addPass(createCanonicalizerPass());
    f.addPass(createCSEPass());
  };

  // cuBLASLt's FP8 GEMMs need Ada or Hopper (sm_89) or newer.
  int sm = 0;
  bool fp8Gemms = StringRef(config.chip).starts_with("sm_") &&
                  !StringRef(config.chip)
                       .drop_front(3)
                       .take_while(llvm::isDigit)
                       .getAsInteger(10, sm) &&
                  sm >= 89;
  // 0. Refuse, by name, what has no GPU lowering yet; warn where FP8 GEMMs
  //    will run in f32.
  CheckGPUSupportPassOptions check;
  check.fp8Gemms = fp8Gemms;
  pm.addPass(createCheckGPUSupportPass(check));
  // 1-3. As ds-cpu-pipeline: contract, ds -> linalg with elementwise chains
  //      fused while they are values, GEMMs detached from their zero fills,
  //      then bufferization with results as out-parameters (the runner's
  //      device buffers). No CPU vectorisation: the GPU's parallelism
  //      comes from the kernels' threads.
  pm.addPass(createExportContractPass());
  pm.addPass(createPrepareStepABIPass());
  ConvertDSToLinalgPassOptions toLinalg;
  toLinalg.parallelScatter = true;
  toLinalg.narrowGemms = true; // cuBLASLt's BF16/F16 GEMMs
  toLinalg.gemmConvs = true;   // convolutions on cuBLASLt too
  toLinalg.fp8Gemms = fp8Gemms;
  toLinalg.causalBlock = config.causalBlock;
  pm.addNestedPass<func::FuncOp>(createConvertDSToLinalgPass(toLinalg));
  cleanup();
  pm.addNestedPass<func::FuncOp>(createFuseElementwisePass());
  cleanup();
  //    The FP8 GEMMs' transposed operands are written by the casts that
  //    make them (TE's cast-transpose), not copied after.
  pm.addNestedPass<func::FuncOp>(createFuseTransposesPass());
  //    A head merge that only generics read (the FP8 cast-transposes of
  //    attention's context and of the q, k and v gradients) is computed
  //    in them, not written and read back.
  pm.addNestedPass<func::FuncOp>(createFuseCollapsedTransposesPass());
  //    A layer norm's weight and bias gradients come after its input
  //    gradient, which then gets a buffer of its own and joins the row
  //    group of the statistics it reads.
  pm.addNestedPass<func::FuncOp>(createSinkColumnReductionsPass());
  pm.addNestedPass<func::FuncOp>(createPrepareLibraryGemmsPass());
  math::MathExpandOpsPassOptions expandPowI;
  expandPowI.opMnemonics = {"fpowi"};
  pm.addNestedPass<func::FuncOp>(math::createMathExpandOpsPass(expandPowI));
  //    Each fresh tensor gets a buffer of its own, so that unrelated
  //    kernels do not chain through one reused buffer.
  pm.addNestedPass<func::FuncOp>(createSplitEmptyTensorsPass());
  //    Collectives become the runtime's host-staged MPI calls on device
  //    buffers, after the last CSE (see ds-cpu-pipeline's step 2c).
  ConvertDSToRuntimePassOptions collectives;
  collectives.target = "cuda";
  collectives.bucketViews = config.bucketViews;
  collectives.deviceEncoders = config.deviceEncoders;
  collectives.deviceEncodersMin = config.deviceEncodersMin;
  pm.addPass(createConvertDSToRuntimePass(collectives));
  buildStepBufferization(pm);
  // 4. GEMMs on cuBLASLt while they are recognisable linalg ops.
  ConvertLinalgToDSRuntimePassOptions gemms;
  gemms.target = "cuda";
  pm.addPass(createConvertLinalgToDSRuntimePass(gemms));
  math::MathExtendToSupportedTypesOptions extendMath;
  extendMath.targetTypeStr = "f32";
  pm.addNestedPass<func::FuncOp>(
      math::createMathExtendToSupportedTypes(extendMath));
  //    A product cuBLASLt rounded itself is read where it lies, not
  //    copied first.
  if (config.forwardCopies) {
    ForwardCopiesPassOptions forward;
    forward.distinctArguments = true;
    pm.addNestedPass<func::FuncOp>(createForwardCopiesPass(forward));
  }
  bufferization::buildBufferDeallocationPipeline(pm);
  // 5. Everything else becomes kernels; buffers and copies move to the
  //    device.
  ConvertLinalgToGPUPassOptions kernels;
  kernels.blockSize = config.blockSize;
  kernels.maxBlocks = config.maxBlocks;
  kernels.unroll = config.unroll;
  kernels.vectorize = config.vectorize;
  kernels.fuseRows = config.fuseRows;
  kernels.fuseSiblings = config.fuseSiblings;
  kernels.cacheRows = config.cacheRows;
  kernels.rowColumns = config.rowColumns;
  pm.addPass(createConvertLinalgToGPUPass(kernels));
  cleanup();
  //    Launches that may share a kernel become one.
  if (config.mergeLaunches) {
    // A step's results are buffers of their own (docs/AheadOfTime.md).
    MergeGPULaunchesPassOptions merge;
    merge.distinctArguments = true;
    pm.addNestedPass<func::FuncOp>(createMergeGPULaunchesPass(merge));
    cleanup();
  }
  // Kernels named <function>_k<N>, as the launch report and profiles show.
  pm.addNestedPass<func::FuncOp>(createNameGPUKernelsPass());
  if (!config.launchReport.empty()) {
    GPULaunchReportPassOptions report;
    report.output = config.launchReport;
    report.collectives = config.launchReportCollectives;
    pm.addPass(createGPULaunchReportPass(report));
  }
  // 6. Narrow floats as on the CPU (one rounding per op; FP8 casts as exact
  //    integer code, which NVPTX needs too: LLVM has no FP8 type), so the
  //    two paths round alike.
  arith::ArithEmulateUnsupportedFloatsOptions emulate;
  emulate.sourceTypeStrs = {"bf16", "f16", "f8E4M3FN", "f8E5M2"};
  emulate.targetTypeStr = "f32";
  pm.addPass(arith::createArithEmulateUnsupportedFloats(emulate));
  // Kernels for sm_80 and newer convert between f32 and bf16/f16 in one
  // instruction (cvt.rn.bf16.f32), where the integer code takes a dozen,
  // and sm_89 and newer FP8 too: those casts stay for NVPTX once the
  // kernels are outlined (the host's are emulated, as LLVM's x86 bf16
  // rounding is a libcall). Emulated kernels run on the host, so there
  // everything is emulated.
  bool nativeCasts = config.nativeCasts && !config.emulateKernels && sm >= 80;
  if (!nativeCasts)
    pm.addPass(createEmulateNarrowFloatsPass());
  // Testing without a GPU: the kernels as host loops (nothing is outlined).
  if (config.emulateKernels)
    pm.addPass(createEmulateGPUKernelsPass());
  // 7. Kernels out of the host functions, into one module (one PTX module,
  //    one ptxas run, one cubin); the host's GPU work on one
  //    in-order stream with no synchronisation inside a step.
  // Constants and index computations move into the launches first:
  // outlining passes whatever a body uses from outside as a kernel
  // parameter, and a shape's extents as parameters turn every index
  // division into a 64-bit division subroutine, and leave ptxas no
  // constant trip counts to unroll by.
  pm.addNestedPass<func::FuncOp>(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(createMergeGPUModulesPass());
  if (nativeCasts) {
    // FP8 casts as sm_89's cvt instructions, before the emulation would
    // take them.
    if (sm >= 89)
      pm.addNestedPass<gpu::GPUModuleOp>(createLowerFP8CastsToNVVMPass());
    pm.addNestedPass<func::FuncOp>(createEmulateNarrowFloatsPass());
    EmulateNarrowFloatsPassOptions kernelCasts;
    kernelCasts.keepF32Casts = true;
    pm.addNestedPass<gpu::GPUModuleOp>(
        createEmulateNarrowFloatsPass(kernelCasts));
  }
  pm.addNestedPass<func::FuncOp>(createGpuAsyncRegionPass());
  pm.addNestedPass<func::FuncOp>(createGPUStreamOrderPass());
  // 8. Kernels to NVVM for the chip.
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  GpuNVVMAttachTargetOptions target;
  target.chip = config.chip;
  target.features = features;
  target.optLevel = config.optLevel;
  pm.addPass(createGpuNVVMAttachTarget(target));
  {
    OpPassManager &k = pm.nest<gpu::GPUModuleOp>();
    // Kernels take each buffer as a bare pointer (every kernel memref has a
    // static shape, layout and offset), the host passes the same: as
    // upstream's gpu-lower-to-nvvm-pipeline{kernel-bare-ptr-calling-
    // convention}. A descriptor would be 3 + 2 x rank parameters; the host
    // code storing them all was half of a 12-layer GPT step's LLVM time.
    // Warp reductions as shuffles first: convert-gpu-to-nvvm lowers only
    // i32 ones.
    k.addPass(createLowerGPUSubgroupReducePass());
    // Index arithmetic in 32 bits where every index fits (the grid's
    // threads times 16 elements within kIndex32Limit's margin).
    ConvertKernelsToNVVMPassOptions nvvm;
    nvvm.index32 = config.index32 && config.maxBlocks * config.blockSize * 16 <=
                                         (int64_t(1) << 31) - kIndex32Limit;
    k.addPass(createConvertKernelsToNVVMPass(nvvm));
    k.addPass(createCanonicalizerPass());
    k.addPass(createCSEPass());
    k.addPass(createReconcileUnrealizedCastsPass());
  }
  // 9. Host code to LLVM: gpu ops become mgpu* calls.
  GpuToLLVMConversionPassOptions host;
  host.kernelBarePtrCallConv = true; // as the kernels (step 8)
  pm.addPass(createGpuToLLVMConversionPass(host));
  pm.addPass(createConvertMathToLLVMPass());
  // Emulated kernels call libm where a GPU's call libdevice.
  if (config.emulateKernels)
    pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  // 10. ptxas assembles the kernels (a chip it rejects fails here) and the
  //     binary is embedded in the host module.
  GpuModuleToBinaryPassOptions binary;
  binary.toolkitPath = toolkitPath(config);
  binary.compilationTarget = config.format;
  pm.addPass(createGpuModuleToBinaryPass(binary));
  return success();
}
