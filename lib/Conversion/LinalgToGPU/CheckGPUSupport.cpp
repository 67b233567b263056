//===- CheckGPUSupport.cpp - Refuse what the GPU path cannot lower --------===//
//
// Implements ds-check-gpu-support. The GPU path covers the dense training
// step; the technique ops below have CPU kernels only (the runtime's
// block-sparse and int8 kernels, MPI collectives) until their CUDA kernels
// and NCCL come in. Each is refused by name at its location, before any
// lowering could turn it into something that runs but computes the wrong
// thing.
//
//===----------------------------------------------------------------------===//

#include "ds/Conversion/Passes.h"
#include "ds/Dialect/DS/IR/DSDialect.h"

#include "mlir/IR/BuiltinOps.h"

namespace mlir::ds {
#define GEN_PASS_DEF_CHECKGPUSUPPORTPASS
#include "ds/Conversion/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;

namespace {

/// The ds ops without a GPU lowering, and what they belong to.
StringRef unsupportedReason(StringRef name) {
  return llvm::StringSwitch<StringRef>(name)
      .Cases({"ds.fake_quant", "ds.fake_quant_grad", "ds.quantize",
              "ds.quantized_matmul"},
             "quantization-aware training")
      .Cases({"ds.block_sparse_matmul", "ds.block_sampled_matmul",
              "ds.top_k_mask"},
             "block sparsity")
      .Cases({"ds.all_reduce", "ds.all_reduce_start", "ds.all_reduce_wait",
              "ds.comm_broadcast", "ds.comm_rank", "ds.send", "ds.recv"},
             "collectives (data and pipeline parallelism)")
      .Default("");
}

struct CheckGPUSupportPass
    : public mlir::ds::impl::CheckGPUSupportPassBase<CheckGPUSupportPass> {
  void runOnOperation() override {
    bool failedAny = false;
    getOperation().walk([&](Operation *op) {
      StringRef why = unsupportedReason(op->getName().getStringRef());
      if (why.empty())
        return;
      op->emitError() << "not supported by ds-gpu-pipeline: '" << op->getName()
                      << "' (" << why
                      << " runs on the CPU only; use ds-cpu-pipeline, "
                         "ds-run --device cpu)";
      failedAny = true;
    });
    if (failedAny)
      signalPassFailure();
  }
};

} // namespace
