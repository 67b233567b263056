//===- Passes.td - ds lowering passes ----------------------*- tablegen -*-===//
//
// Lowerings out of the ds dialect. Named convert-ds-to-<target>.
//
//===----------------------------------------------------------------------===//

#ifndef DS_CONVERSION_PASSES_TD
#define DS_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertDSToLinalgPass : Pass<"convert-ds-to-linalg"> {
  let summary = "Lower every ds op to linalg, tensor, arith, math and scf";
  let description = [{
    Rewrites every `ds` op into upstream ops on tensors: elementwise ops and
    reductions into `linalg.generic` (broadcasts as affine maps), matmuls
    into `linalg.matmul` / `linalg.batch_matmul` with transposes and the
    shared right-hand side expressed as indexing maps, shape ops into
    `tensor` ops, convolutions and pooling into linalg's named convolution
    and pooling ops over padded inputs (with `gemm-convs`, ungrouped
    convolutions and their gradients into im2col patches and matmuls
    instead), and the rest (embedding, dropout's
    Philox generator, the backward kernels) into `linalg.generic`, `scf`
    and `tensor` ops. The result is ready for elementwise fusion and
    one-shot bufferization. A ds op that cannot be lowered is a located
    error naming it. With `runtime-kernels`, the ops convert-ds-to-runtime
    makes runtime calls (f32 block-sparse products, top-k masks) are left
    for it; otherwise they get dense reference lowerings.
  }];
  let options = [
    Option<"runtimeKernels", "runtime-kernels", "bool", /*default=*/"false",
           "Leave the ops with runtime kernels for convert-ds-to-runtime">,
    Option<"parallelScatter", "parallel-scatter", "bool", /*default=*/"false",
           "Lower scatters (embedding_grad) as linked rows that every table "
           "element walks in parallel, long lists in pieces, instead of "
           "serial loops (the GPU path)">,
    Option<"narrowGemms", "narrow-gemms", "bool", /*default=*/"false",
           "Keep the bf16 and f16 operands of matmuls, accumulating in f32 "
           "(the GPU path: cuBLASLt's BF16/F16 GEMMs); by default they are "
           "extended to f32 first (FP8 operands always are)">,
    Option<"fp8Gemms", "fp8-gemms", "bool", /*default=*/"false",
           "Also keep E4M3 x E4M3 operands of the matmuls cuBLASLt's FP8 "
           "path takes (X * W^T, rows, columns and depth multiples of 16; "
           "the GPU path on sm_89 and newer); other FP8 matmuls are "
           "extended to f32">,
    Option<"gemmConvs", "gemm-convs", "bool", /*default=*/"false",
           "Lower ungrouped f32/bf16/f16 convolutions and their gradients "
           "as im2col + matmul, for the library GEMM (oneDNN on the CPU "
           "with library-gemm, cuBLASLt on the GPU) instead of loop nests">,
    Option<"causalBlock", "causal-block", "int64_t", /*default=*/"0",
           "Annotate the matmuls of causal attention (ds.causal_gemm: a "
           "product with probabilities or their gradient, zero above the "
           "diagonal, or scores read only on and below it) so that the "
           "library GEMM runs them in blocks of this many rows over just "
           "the lower block triangle (0: off)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

def PrepareLibraryGemmsPass : Pass<"ds-prepare-library-gemms"> {
  let summary = "Detach tensor-level matmuls from their zero fills";
  let description = [{
    Runs before bufferization. A `linalg.matmul` / `linalg.batch_matmul`
    whose accumulator is a zero `linalg.fill` gets a fresh `tensor.empty`
    accumulator instead and the unit attribute `ds.gemm_overwrite`, meaning
    "the result is the product; the accumulator's contents are not read".
    This keeps CSE'd zero fills from turning into buffer copies, and lets
    convert-linalg-to-ds-runtime call the library GEMM (which overwrites its
    output) for the op after bufferization. The attribute is only valid for
    that lowering, which must follow.
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

def ConvertLinalgToDSRuntimePass
    : Pass<"convert-linalg-to-ds-runtime", "::mlir::ModuleOp"> {
  let summary = "Run buffer-level matmuls through the runtime's library GEMM";
  let description = [{
    After bufferization, replaces every `linalg.matmul` and
    `linalg.batch_matmul` on f32 or f64 memrefs, or on i8 operands into an
    i32 output (quantized inference), that overwrites its output (marked
    `ds.gemm_overwrite` by ds-prepare-library-gemms, or right after a zero
    `linalg.fill` of the output) by a call to the runtime's
    `dsrt_matmul_f32` / `dsrt_matmul_f64` / `dsrt_matmul_s8s8s32`
    (include/ds/Runtime/ds_runtime.h): oneDNN's GEMM for f32, a blocked loop
    for f64, oneDNN's integer GEMM (exact, whatever the CPU) for int8. Operands
    are passed as rank-3 strided memrefs; transposes and a right-hand side
    shared by every batch, read off the ops' indexing maps, become flags
    and a batch of size 1. The zero fill is dropped (the call overwrites
    the output). Matmuls in any other form stay as they are and are lowered
    to loops; a marked matmul that cannot be called is given back its zero
    fill, so the loops compute the right thing.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "cpu (the dsrt_matmul_* calls) or cuda (dsrt_cuda_matmul_* on "
           "cuBLASLt, also for bf16 and f16 operands into f32, and E4M3 x "
           "E4M3 into f32 in the X * W^T layout with dimensions multiples "
           "of 16)">
  ];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
}

def ConvertDSToRuntimePass
    : Pass<"convert-ds-to-runtime", "::mlir::ModuleOp"> {
  let summary = "Run the ds ops whose kernels live in the runtime as calls";
  let description = [{
    Runs on tensors right before one-shot bufferization (after the last
    CSE, which would merge the buffer views of two calls and so move a
    read before an in-place write), on what convert-ds-to-linalg with
    `runtime-kernels` left. Replaces each f32
    `ds.block_sparse_matmul` and `ds.block_sampled_matmul` (block a multiple
    of 8) by a call to the runtime's 8x8 block-sparse kernels
    (`dsrt_block_sparse_matmul_f32`, `dsrt_block_sparse_sddmm_f32`), and
    each `ds.top_k_mask` on f32 or f64 scores by `dsrt_top_k_mask_f32/f64`
    (include/ds/Runtime/ds_runtime.h). Operands are flattened to 2-D (1-D
    for the top-k) and handed over as read-only buffers
    (`bufferization.to_buffer`); the result is a fresh buffer the call
    writes, returned as a tensor (`bufferization.to_tensor restrict
    writable`), so one-shot bufferization needs no copy. The ops it leaves
    (other element types, other block sizes) get convert-ds-to-linalg's
    dense reference lowering.

    Collectives (`ds.all_reduce`, its start and wait, `ds.comm_broadcast`,
    `ds.comm_rank`, `ds.send`, `ds.recv`) always become calls to the
    runtime's MPI layer. With `target=cuda` (ds-gpu-pipeline) only they are
    converted, and each call that takes buffers goes to the runtime's
    host-staged form instead (`dsrt_cuda_allreduce_f32`, ...; the same
    arguments, in device memory): it copies its inputs to the host on the
    step stream, runs the CPU collective and copies its outputs back.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "cpu, or cuda (collectives only, as the runtime's host-staged "
           "dsrt_cuda_* calls on device buffers)">,
    Option<"bucketViews", "bucket-views", "bool", /*default=*/"true",
           "Build a bucket that concatenates gradients in a buffer of its "
           "own that their GEMMs and elementwise kernels write in place "
           "(DDP's gradient_as_bucket_view; =false: copied in, to compare)">,
    Option<"deviceEncoders", "device-encoders", "bool", /*default=*/"true",
           "With target=cuda: a three-tier or top-k bucket whose parameters "
           "the step fixes (top-k's fraction may be chosen among constants, "
           "DGC's warm-up) is encoded on the device, and only what its "
           "payload needs goes to the host: three tiers' 16-bit codes "
           "(dsrt_cuda_allreduce_start_three_tier_f32), top-k's sent "
           "elements, compacted (dsrt_cuda_allreduce_start_topk_f32); "
           "=false: the host encodes the bucket, to compare">,
    Option<"deviceEncodersMin", "device-encoders-min", "int64_t",
           /*default=*/"65536",
           "With device-encoders: encode on the device only buckets of at "
           "least this many elements; smaller ones, whose copies cost less "
           "than the encoder's launches, go to the host encoder">
  ];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

def CheckGPUSupportPass : Pass<"ds-check-gpu-support", "::mlir::ModuleOp"> {
  let summary = "Refuse, by name, the ds ops ds-gpu-pipeline does not lower";
  let description = [{
    The first step of ds-gpu-pipeline. The technique ops whose kernels are
    CPU-only today (the quantized int8 GEMM of integer inference, and every
    collective: all-reduce, broadcast, send/receive, which need NCCL) are
    each a located error `not supported by ds-gpu-pipeline: '<op>'`, rather
    than a mis-compiled step or an error deep inside the lowering. Fake
    quantization lowers to elementwise kernels like any other op; the 8x8
    block-sparse products run as dense GEMMs on masked operands (a warning
    says so, once per function) and the top-k masks as reductions.

    It also warns, once per function and reason, where an FP8 GEMM of the
    precision policy will run as an f32 GEMM on its FP8-rounded values (the
    numbers the CPU path computes, at f32 speed): without `fp8-gemms` (a
    chip before sm_89), for the shapes and types cuBLASLt's FP8 path does
    not take, and for block-scaled operands (`scaling: block`), which are
    dequantised before their GEMM.
  }];
  let options = [
    Option<"fp8Gemms", "fp8-gemms", "bool", /*default=*/"false",
           "The chip has FP8 GEMMs (sm_89 and newer): ds-gpu-pipeline sets "
           "it with convert-ds-to-linalg's">,
  ];
}

def ConvertLinalgToGPUPass
    : Pass<"convert-linalg-to-ds-gpu", "::mlir::ModuleOp"> {
  let summary = "Map buffer-level linalg ops and host memory to GPU kernels";
  let description = [{
    Runs after bufferization and the library GEMMs of
    convert-linalg-to-ds-runtime{target=cuda}, on the step functions (host
    code whose memrefs are device memory). Every linalg op becomes a
    `gpu.launch`:
    - a reduction with one output and a recognised combiner (add, mul,
      min/max, and/or/xor) runs one block per output element (a
      grid-stride loop over outputs when there are more than the grid),
      `block-size` threads striding over the reduced elements, then a
      block-wide `gpu.all_reduce` (shuffles and shared memory); with few
      outputs of many elements (a tensor's amax or norm), each output's
      range is split over several blocks that write partial results, and
      a second launch folds those into the output; a reduction whose
      inputs are contiguous along its outputs instead (a bias gradient)
      runs a thread per output;
    - a run of row-wise ops over the same rows (a softmax's max, sum and
      normalisation; a layer norm's statistics and output) that starts at
      a block-per-row reduction becomes one launch (`fuse-rows`): a block
      per row runs them in turn with barriers between, so each row is
      read from DRAM once;
    - a reduction over every loop (an FP8 amax, a norm) and the first
      later elementwise op over the same loops that reads the same tensor
      the same way (the FP8 cast) become one launch (`fuse-siblings`):
      the reduction's threads also compute the elementwise op at each
      element they load, so the tensor is read from DRAM once. The
      reduction moves down to the elementwise op, and the ops between
      that depend on it move after, only where that keeps every
      dependence (through values, and through the buffers they touch);
    - with it, adjacent column reductions over the same loops that read a
      tensor in common (a layer norm's weight and bias gradients) become
      one launch that loads it once, and so does the all-parallel op just
      before them that writes what they read at the same elements (a GELU
      gradient and the bias gradient summing it): each thread computes,
      stores and folds the elements of its run;
    - a transpose of the two innermost dimensions moves 32 x 32 tiles
      through shared memory, so that both its reads and its writes
      coalesce;
    - everything else (elementwise chains, fills, copies, transposes, and
      reductions it cannot parallelise, serial per output) becomes a 1-D
      grid-stride loop over its parallel iteration space with
      `block-size` threads per block. An elementwise one over buffers
      contiguous along the innermost dimension (broadcasts and outer
      permutations included) moves 16-byte vectors (`vectorize`) when its
      buffers are 16-byte aligned, which it checks at run time; otherwise
      it takes `unroll` elements a grid stride apart per thread and
      iteration, and loads them all before it stores any. Row groups,
      block, warp and column reductions and the transposing tiles move
      vectors the same way (`vectorize`), behind the same check.
    Host memory operations follow the data: `memref.alloc`/`dealloc`
    become `gpu.alloc`/`gpu.dealloc`, contiguous copies `gpu.memcpy` (any
    other copy a kernel), constants used by kernels are cloned into them
    (so outlining moves the globals to the device), and the scalar code
    left on the host that reads or writes a buffer runs as a one-thread
    kernel. A host operation that needs a device value on the host (a
    loop bound read from a buffer) is an error naming it.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "Threads per block (a multiple of 32, at most 1024)">,
    Option<"maxBlocks", "max-blocks", "int64_t", /*default=*/"4096",
           "Blocks at most per launch; grid-stride loops cover the rest">,
    Option<"unroll", "unroll", "int64_t", /*default=*/"0",
           "Elements per thread per iteration of an elementwise kernel, "
           "their loads issued together (0: 16 bytes' worth of the widest "
           "element, 2 to 8; 1: one at a time)">,
    Option<"vectorize", "vectorize", "bool", /*default=*/"true",
           "Kernels over contiguous buffers (elementwise, row groups, "
           "reductions, cast-transposes) load and store vectors of up to "
           "16 bytes where the buffers are aligned (false: one element an "
           "access)">,
    Option<"fuseRows", "fuse-rows", "bool", /*default=*/"true",
           "Run consecutive row-wise ops over the same rows as one "
           "block-per-row launch">,
    Option<"fuseSiblings", "fuse-siblings", "bool", /*default=*/"true",
           "Run a full reduction and an elementwise op reading the same "
           "tensor (an FP8 amax and cast) as one launch, and column "
           "reductions of one tensor with the op before them that writes "
           "it">,
    Option<"cacheRows", "cache-rows", "bool", /*default=*/"true",
           "A warp's row group keeps the row elements several members "
           "read in registers (rows of up to 256 elements, or of up to "
           "256 16-byte vectors where the buffers are aligned); false: "
           "each member rereads them">,
    Option<"rowColumns", "row-columns", "bool", /*default=*/"true",
           "A row group also takes the column sums over its rows (a layer "
           "norm's weight and bias gradients), folded in shared memory; "
           "false: they read the rows again in launches of their own">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::affine::AffineDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::vector::VectorDialect"];
}

def EmulateGPUKernelsPass
    : Pass<"ds-emulate-gpu-kernels", "::mlir::ModuleOp"> {
  let summary = "Run gpu.launch bodies on the host, as loops (testing)";
  let description = [{
    A testing aid for the GPU path on machines without a GPU: every
    `gpu.launch` of the function becomes host loops that run its blocks and
    threads one after the other, so a step compiled by
    ds-gpu-pipeline{emulate-kernels} executes its kernels on the CPU. The
    buffers stay device buffers (`gpu.alloc`, `gpu.memcpy`, the cuBLASLt
    calls): the emulated step runs only where device memory is host memory,
    on the test stub libcuda, which then checks the whole GPU lowering but
    the NVVM back end numerically.

    Threads of a block run one at a time, last first (blocks too: the CPU
    path runs its loops first to last, so a kernel whose result depends on
    the order of its threads differs from it); a `gpu.barrier` or a
    `gpu.all_reduce` ends one such loop over the threads and the next
    starts after it: the code between two synchronisations runs for every
    thread before any thread goes past the second. A value one stretch
    computes and a later one reads is kept per thread (a scalar in a
    buffer of `block size` elements, a view recomputed). `gpu.all_reduce`
    folds the threads' values in thread order. A synchronisation must sit
    in the launch body or in `scf.for`/`scf.if` ops whose bounds and
    conditions are the same for every thread of the block (as CUDA
    requires): the emulation checks that those values agree across the
    threads and, when they do not, writes a message to standard error and
    aborts. So does a load or store whose indices are out of bounds, or a
    vector one whose address lacks the alignment it claims (more than its
    element's), where a GPU would read another buffer or fault. So does an
    element of a buffer the launch stores to that one block writes and
    another block reads or writes in the same launch: on a GPU the blocks
    run in any order and at once, so the result would depend on timing,
    where here it would match in the one order the emulation runs. Each
    such buffer gets two shadows per launch (the block that wrote each
    element, the block that read it), which every load and store of it
    checks and updates through one out-of-line function. So does an
    element (of such a buffer, or of shared memory) that one thread writes
    and another thread of its block reads or writes between the same two
    barriers or all-reduces: each thread counts the block-wide
    synchronisations it passed (its phase), and a second pair of shadows
    records which thread of which phase touched each element. Subgroup
    reductions end no phase (they order no memory between warps). Views of
    a buffer are shadowed apart, and views taken inside the launch not at
    all.
    `gpu.subgroup_reduce` (scalar, unclustered) folds each run of 32
    consecutive threads (x fastest: a warp) in lane order and gives every
    thread of the run the total.
    Shared memory (a static workgroup attribution) is one host buffer,
    which the blocks use in turn.
    Anything else it cannot run (shuffles, private attributions,
    all-reduce regions, loops that carry values across a synchronisation)
    is an error at the launch.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect"];
}

def GPUStreamOrderPass : Pass<"ds-gpu-stream-order", "::mlir::func::FuncOp"> {
  let summary = "One in-order stream per step: drop gpu-async-region's host waits";
  let description = [{
    Runs after upstream gpu-async-region, which chains the GPU operations of
    a host function on async tokens but blocks the host (`gpu.wait [%t]`)
    before every other side-effecting operation (each runtime GEMM call)
    and before the return, then starts a new chain. The runtime gives every
    chain one in-order stream (`mgpuStreamCreate` returns the step stream,
    ds_runtime_cuda.h) and enqueues its GEMMs on it too, so those waits
    only stall the host: this pass removes the blocking waits of the
    function's body and continues the first chain where a new one would
    start. Host loops and branches around device work (a top-k wait's loop
    over the ranks whose slots NCCL gathered) lose their blocking waits
    too; their chains start anew on the same stream. A step then enqueues
    all its work without synchronising once; the runner synchronises when
    it reads results.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def MergeGPUModulesPass
    : Pass<"ds-merge-gpu-modules", "::mlir::ModuleOp"> {
  let summary = "Gather the outlined kernels into one gpu.module";
  let description = [{
    Runs after upstream gpu-kernel-outlining, which puts every kernel in a
    gpu.module of its own. gpu-module-to-binary then runs the NVPTX back
    end and ptxas once per module (about 25 ms each: 91 % of the MLIR time
    of a GPT block's 148 kernels), and the compiled step loads one cubin
    per kernel at start. This pass moves every symbol of the other
    gpu.modules into the first one, giving each kernel its module's
    (unique) name and renaming any other clashing symbol, and points every
    `gpu.launch_func` at the merged module: one PTX module, one ptxas run,
    one cubin. Modules that already carry targets or other attributes than
    the first are left alone. In the merged module, kernels that are copies
    of each other (equal attributes but the name, equivalent bodies; the
    kernels of a step's equally shaped layers) are kept once, after
    constant globals that differ only in name are merged, and launches
    name the copy kept: the 12-layer GPT's 1229 launches need 256 kernels,
    which halves gpu-module-to-binary's time and the cubin.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def ConvertKernelsToNVVMPass
    : Pass<"ds-convert-kernels-to-nvvm", "::mlir::gpu::GPUModuleOp"> {
  let summary = "convert-gpu-to-nvvm, with 32-bit indices where they fit";
  let description = [{
    Runs upstream's `convert-gpu-to-nvvm` with bare-pointer kernel
    arguments. With `index32`, the module's index arithmetic is 32-bit
    when every index its kernels can form fits in 32 bits (see
    kernelsFitIn32BitIndices): every memref static, addressing elements
    below 2^31 - 2^27, every index constant within that, and no kernel
    taking an index argument (the host passes 64 bits).

    The margin covers what a grid-stride loop adds past the last element:
    at most 16 elements a thread times a grid of blocks. ds-gpu-pipeline
    caps that product below 2^27, or sets no `index32`. PyTorch's kernels
    make the same choice (`canUse32BitIndexMath`).

    A GPU's integer units are 32-bit. 64-bit adds and multiplies take two
    or more instructions, and an address or loop counter holds two
    registers. So a memory-bound kernel with narrow elements can spend
    more on its indices than on its loads. The addresses themselves stay
    64-bit: a 32-bit element index is widened into the address.
  }];
  let options = [
    Option<"index32", "index32", "bool", /*default=*/"true",
           "32-bit index arithmetic where every index fits">,
  ];
  let dependentDialects = ["::mlir::NVVM::NVVMDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def LowerFP8CastsToNVVMPass
    : Pass<"ds-lower-fp8-casts-to-nvvm", "::mlir::gpu::GPUModuleOp"> {
  let summary = "FP8 casts in kernels as sm_89's cvt instructions";
  let description = [{
    LLVM has no FP8 type, so ds-emulate-narrow-floats rounds into
    f8E4M3FN and f8E5M2 with about 30 integer instructions. At one byte
    per element, a memory-bound kernel can afford about 4. Ada and Hopper
    (sm_89 and newer) convert two values per instruction. This pass
    rewrites a kernel's scalar `arith.truncf` into FP8, from f32, f16 or
    bf16 (widened first, exactly), as `nvvm.convert.f32x2.to.f8x2` (rn,
    satfinite) with x in both halves. The instruction saturates where the
    arith op does not: past 464 an E4M3FN rounding is NaN, and from 61440
    an E5M2 rounding is inf. So a compare and a select restore those
    (2 instructions; a saturating `ds.cast` has clamped its input already).
    It rewrites `arith.extf` out of FP8 as `nvvm.convert.f8x2.to.f16x2`,
    then an exact widening to the result type.

    Casts from f64 are left for ds-emulate-narrow-floats: through f32 they
    would round twice. ds-gpu-pipeline runs this pass on sm_89 and newer,
    unless `native-casts=false`.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::NVVM::NVVMDialect"];
}

def LowerGPUSubgroupReducePass
    : Pass<"ds-lower-gpu-subgroup-reduce", "::mlir::gpu::GPUModuleOp"> {
  let summary = "gpu.subgroup_reduce as butterfly shuffles, for NVVM";
  let description = [{
    convert-gpu-to-nvvm lowers `gpu.subgroup_reduce` only for i32 (to
    `redux.sync`); the warp-per-row reductions of convert-linalg-to-ds-gpu
    reduce f32, f64 and i64 too. This pass applies upstream's
    shuffle-expansion patterns: log2(subgroup-size) `gpu.shuffle xor`
    steps, each followed by the combiner, so every lane ends with the
    total. Values of 32 bits or fewer shuffle as 32-bit words; 64-bit
    values as one 64-bit shuffle, which the NVVM lowering splits into two.
  }];
  let options = [
    Option<"subgroupSize", "subgroup-size", "unsigned", "32",
           "Lanes of a subgroup (a warp on NVIDIA GPUs)">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::vector::VectorDialect"];
}

def GPULaunchReportPass
    : Pass<"ds-gpu-launch-report", "::mlir::ModuleOp"> {
  let summary = "What each kernel launch and library GEMM of a step moves "
                "and computes, and the step's roofline bound";
  let description = [{
    Run where the kernels are still `gpu.launch` regions (ds-gpu-pipeline
    runs it after ds-merge-gpu-launches with `launch-report=FILE`). For
    each host function, one line per kernel launch, library GEMM
    (`dsrt_cuda_matmul_*`) and `gpu.memcpy`, in the order the step
    enqueues them:
    - a launch's grid and block, and the bytes of the distinct buffers its
      body reads and writes, each counted once at its view's size: the
      DRAM traffic of a kernel that streams its operands, as the fused
      elementwise, reduction and row kernels do (re-reads that hit in L1 or
      L2 are not traffic; buffers of the kernel's own are not counted);
    - a GEMM's batch x M x N x K, 2 x batch x M x N x K FLOPs, and its
      operands' and result's bytes;
    - a collective staged through the host (`dsrt_cuda_allreduce_*` and the
      other calls of data and pipeline parallelism): the bytes it copies to
      the host ("read") and back ("written"), at the host link's
      bandwidth (the network's time is not counted);
    - each line's bound: the larger of its bytes over the bandwidth and its
      FLOPs over the tensor cores' peak for its operand width.
    The totals give the step's roofline bound without launch gaps: what a
    measured step time is compared with. The defaults are an H200 SXM's
    (4.8 TB/s of HBM3e; dense 1979 FP8, 989 BF16 and 67 FP32 TFLOP/s; PCIe
    5.0 x16, of which copies from and to pageable memory get about 25
    GB/s).
  }];
  let options = [
    Option<"output", "output", "std::string", "\"-\"",
           "Where the report goes: a file, or - for standard error">,
    Option<"bandwidth", "bandwidth", "double", "4800.0",
           "Memory bandwidth, GB/s">,
    Option<"fp8Tflops", "fp8-tflops", "double", "1979.0",
           "Dense FP8 GEMM peak, TFLOP/s">,
    Option<"bf16Tflops", "bf16-tflops", "double", "989.0",
           "Dense BF16/F16 GEMM peak, TFLOP/s">,
    Option<"f32Tflops", "f32-tflops", "double", "67.0",
           "F32 (and F64) GEMM peak without TF32, TFLOP/s">,
    Option<"hostBandwidth", "host-bandwidth", "double", "25.0",
           "Copies between the device and pageable host memory, GB/s (the "
           "collectives' staging)">,
    Option<"collectives", "collectives", "std::string", "\"nccl\"",
           "What the runtime runs the uncompressed all-reduces and the "
           "broadcasts on: nccl (device copies, the network not counted) "
           "or host (staged, as the compressed ones always are)">,
  ];
}

def NameGPUKernelsPass
    : Pass<"ds-name-gpu-kernels", "::mlir::func::FuncOp"> {
  let summary = "Names each gpu.launch's kernel after its function and its "
                "place in it";
  let description = [{
    Gives every `gpu.launch` without a `function` attribute the name
    `<function>_k<N>`, N counting the function's launches from 0 in the
    order the step enqueues them; gpu-kernel-outlining then names the
    kernel so (instead of `<function>_kernel`, uniqued). ds-gpu-pipeline
    runs it before ds-gpu-launch-report, which prints the names, so a
    kernel's measured device time (ds-step-run --profile, which reports
    kernels by name) can be set against its line. A kernel that
    ds-merge-gpu-modules finds identical to an earlier one keeps the
    earlier one's name: the profile then counts several calls of it.
  }];
}

def ForwardCopiesPass : Pass<"ds-forward-copies", "::mlir::func::FuncOp"> {
  let summary = "Makes a whole-buffer copy's readers read its source";
  let description = [{
    A library GEMM that rounds its own product (and adds the bias and the
    FP8 dequantisation scale in its epilogue) leaves the kernel that did
    that with nothing to do but copy the product into the buffer its
    readers read: in the FP8 GPT step, the q, k and v projections' products
    into the buffers the head split transposes, and attention's three
    gradients into the one the head merge transposes. Each copy reads and
    writes a whole activation.

    A copy here is a `memref.copy`, or an all-parallel `linalg.generic`
    whose one output is an allocation, written through the identity map
    with the element of an identity-mapped input (other inputs unused), of
    the same type. The ops after it, up to the one that overwrites the
    whole allocation without reading it (or the block's end), may read the
    allocation only as long as nothing has written the source, and may not
    write it. Those readers then read the source instead (views of the
    allocation are rebuilt on the source), and the copy is erased. Buffers
    are traced through views to allocations, globals and arguments; a call
    to a library GEMM (`dsrt_cuda_matmul_*`) writes its third memref
    operand and reads its other memrefs and the buffers its pointers come
    from; any other op with undeclared effects stops the search.
    ds-gpu-pipeline runs it after convert-linalg-to-ds-runtime, before
    deallocations are placed.
  }];
  let options = [
    Option<"distinctArguments", "distinct-arguments", "bool", "false",
           "The memref arguments of a step (a function ds-prepare-step-abi "
           "marked llvm.emit_c_interface) never overlap">,
  ];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def MergeGPULaunchesPass
    : Pass<"ds-merge-gpu-launches", "::mlir::func::FuncOp"> {
  let summary = "Appends launches to the launch before them";
  let description = [{
    A training step's bookkeeping (the finiteness checks of loss scaling,
    the FP8 policy's amax and scale updates, the norms of clipping) ends in
    chains of tiny kernels: a one-block reduction, then a one-thread kernel
    that folds its result into a scalar. On a GPU each costs a launch and
    a gap of a few microseconds for almost no work: 76 of the 328 kernels
    of a layer of the FP8 GPT step.

    Where a `gpu.launch` of one block follows another launch of one block,
    with nothing between them but allocations, deallocations and pure ops,
    its body is appended to the earlier body after a `gpu.barrier`, which
    in one block orders memory as the kernel boundary did:
    - a launch with the same block size runs on the same threads;
    - a one-thread launch runs on thread (0, 0, 0), if it holds no
      synchronisation (a barrier or a collective on one thread of a larger
      block would diverge).
    A launch of any size joins the launch before it when both have the
    same constant block and neither touches a buffer the other writes (the
    buffers traced through views to allocations, globals and arguments;
    distinct allocations never overlap, nor do static subviews of one
    buffer whose ranges miss each other; collectives exchange registers,
    not buffers):
    - on the same grid, its body is appended as is;
    - on another grid, the launch takes the larger extents and each body
      runs on the blocks it had, under a guard on the block id (uniform in
      a block, so barriers inside stay legal), seeing its own grid size.
      A body that reads the grid size other than through the launch's
      arguments is left alone.
    Between the two launches may lie allocations, deallocations, pure ops
    and up to three launches the later one cannot join but may run before
    (it touches nothing they write and writes nothing they touch). Values
    the appended body needs that are defined between the two launches (an
    allocation, a view) move above the earlier launch.
    Launches with async dependencies, clusters, dynamic shared memory or
    memory attributions are left alone.

    One-block launches that share no buffer run side by side rather than
    one after the other: the launch becomes a stack, each member on a
    block of its own under a guard on the block id. A later one-block
    launch that depends on one member follows it in its block, after a
    barrier; one that depends on several joins their blocks into one first
    (they are independent, so any order is right); one that depends on
    none gets a block of its own.

    Before merging, each one-block launch moves next to another it can be
    appended to, past ops that touch nothing it touches: up to the
    earliest such launch (in order, so that a rising chain keeps its
    order), else down to the latest (in reverse order, with the frees of
    its buffers), library GEMMs taken at ds_runtime_cuda.h's word. A
    grid-stride loop over at most as many rows as the launch has blocks
    runs once per block and is unrolled into a guard first, so that the
    kernels merges make are straight-line code around their collectives.
  }];
  let options = [
    Option<"distinctArguments", "distinct-arguments", "bool", "false",
           "The memref arguments of a step (a function ds-prepare-step-abi "
           "marked llvm.emit_c_interface) never overlap: the step ABI gives "
           "each result a buffer of its own, and arguments are only read">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::scf::SCFDialect"];
}

#endif // DS_CONVERSION_PASSES_TD
