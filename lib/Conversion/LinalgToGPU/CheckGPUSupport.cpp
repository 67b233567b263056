//===- CheckGPUSupport.cpp - Refuse what the GPU path cannot lower --------===//
//
// Implements ds-check-gpu-support. The GPU path covers the dense training
// step; the technique ops below have CPU kernels only (the runtime's
// block-sparse and int8 kernels, MPI collectives) until their CUDA kernels
// and NCCL come in. Each is refused by name at its location, before any
// lowering could turn it into something that runs but computes the wrong
// thing. FP8 GEMMs that will run as f32 GEMMs get a warning: the result
// is the same, the speed is not what the policy asked for.
//
//===----------------------------------------------------------------------===//

#include "ds/Conversion/DSToLinalg.h"
#include "ds/Conversion/Passes.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/StringExtras.h"

#include <utility>
#include <vector>

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

bool isFp8(Type t) { return isa<Float8E4M3FNType, Float8E5M2Type>(t); }

/// Warns once per reason about the FP8 x FP8 matmuls of `func` that will
/// run as f32 GEMMs, at the first of them, with their number.
void warnAboutF32Fp8Gemms(func::FuncOp func, bool fp8Gemms) {
  // In order of first appearance; a handful of reasons at most.
  std::vector<std::pair<std::string, SmallVector<ds::MatMulOp>>> byReason;
  func.walk([&](ds::MatMulOp mm) {
    auto lhs = cast<RankedTensorType>(mm.getLhs().getType());
    auto rhs = cast<RankedTensorType>(mm.getRhs().getType());
    if (!isFp8(lhs.getElementType()) || !isFp8(rhs.getElementType()))
      return;
    std::string why =
        fp8Gemms ? ds::fp8GemmObstacle(lhs, rhs, mm.getTransposeLhs(),
                                       mm.getTransposeRhs())
                 : "the chip has no FP8 GEMMs (cuBLASLt's need sm_89 or newer)";
    if (why.empty())
      return;
    auto it = llvm::find_if(byReason, [&](auto &r) { return r.first == why; });
    if (it == byReason.end())
      it = byReason.insert(byReason.end(), {why, {}});
    it->second.push_back(mm);
  });
  for (auto &[why, mms] : byReason) {
    bool one = mms.size() == 1;
    mms.front()->emitWarning()
        << mms.size() << " FP8 matmul" << (one ? "" : "s") << " of '"
        << func.getSymName() << "' run"
        << (one ? "s as an f32 GEMM on its" : " as f32 GEMMs on their")
        << " FP8 values under ds-gpu-pipeline (the same numbers, at f32 "
           "speed): "
        << why;
  }
}

/// Warns about the policy's block-scaled FP8 GEMMs (the precision map's
/// `scaling = "block"` entries): their operands are dequantised, one scale
/// per tile, before an f32 GEMM.
void warnAboutBlockScaledGemms(ModuleOp module) {
  auto map = module->getAttrOfType<DictionaryAttr>(
      ds::DSDialect::kPrecisionMapAttrName);
  if (!map)
    return;
  for (NamedAttribute fn : map) {
    auto entries = dyn_cast<ArrayAttr>(fn.getValue());
    if (!entries)
      continue;
    SmallVector<StringRef> labels;
    for (Attribute e : entries) {
      auto entry = dyn_cast<DictionaryAttr>(e);
      auto scaling = entry ? entry.getAs<StringAttr>("scaling") : nullptr;
      auto label = entry ? entry.getAs<StringAttr>("label") : nullptr;
      if (scaling && scaling.getValue() == "block" && label)
        labels.push_back(label.getValue());
    }
    if (labels.empty())
      continue;
    // At the function's location, without the function printed after it.
    Operation *at = module.lookupSymbol(fn.getName());
    emitWarning(at ? at->getLoc() : module.getLoc())
        << "the block-scaled FP8 GEMMs of '" << fn.getName().getValue() << "' ("
        << llvm::join(labels, ", ")
        << ") run under ds-gpu-pipeline as f32 GEMMs on operands "
           "dequantised tile by tile (the same numbers, at f32 speed): "
           "cuBLASLt's block-scaled FP8 GEMMs are not used yet";
  }
}

struct CheckGPUSupportPass
    : public mlir::ds::impl::CheckGPUSupportPassBase<CheckGPUSupportPass> {
  using CheckGPUSupportPassBase::CheckGPUSupportPassBase;
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
    if (failedAny) {
      signalPassFailure();
      return;
    }
    for (auto func : getOperation().getOps<func::FuncOp>())
      warnAboutF32Fp8Gemms(func, fp8Gemms);
    warnAboutBlockScaledGemms(getOperation());
  }
};

} // namespace
