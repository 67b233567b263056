//===- CheckGPUSupport.cpp - Refuse what the GPU path cannot lower --------===//
//
// Implements ds-check-gpu-support. The GPU path covers the dense training
// step, fake quantization (elementwise kernels), block sparsity (dense
// GEMMs on masked weights) and the collectives (MPI on host copies of
// device buffers). The op below has a CPU kernel only (the runtime's int8
// GEMM) until its CUDA kernel comes in. It is refused by name at its
// location, before any lowering could turn it into something that runs
// but computes the wrong thing.
// FP8 GEMMs that will run as f32 GEMMs, and block-sparse products that
// will run as dense ones, get a warning: the result is the same, the speed
// is not what the policy or the mask asked for.
//
//===----------------------------------------------------------------------===//

#include "ds/Conversion/DSToLinalg.h"
#include "ds/Conversion/Passes.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/MapVector.h"
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
      .Case("ds.quantized_matmul",
            "integer inference (ds-convert-fake-quant's int8 GEMMs)")
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

/// Warns once per function, at its first block-sparse product, that its
/// products run as dense GEMMs on masked weights: the numbers of the CPU's
/// reference lowering, without the speed of skipping inactive blocks.
void warnAboutDenseBlockSparse(func::FuncOp func) {
  SmallVector<Operation *> products;
  func.walk([&](Operation *op) {
    if (isa<ds::BlockSparseMatMulOp, ds::BlockSampledMatMulOp>(op))
      products.push_back(op);
  });
  if (products.empty())
    return;
  bool one = products.size() == 1;
  products.front()->emitWarning()
      << products.size() << " block-sparse product" << (one ? "" : "s")
      << " of '" << func.getSymName() << "' run" << (one ? "s" : "")
      << " under ds-gpu-pipeline as dense GEMMs on weights (or gradients) "
         "with the inactive blocks set to zero (the same numbers, at the "
         "dense GEMM's speed): there are no block-sparse CUDA kernels yet";
}

struct CheckGPUSupportPass
    : public mlir::ds::impl::CheckGPUSupportPassBase<CheckGPUSupportPass> {
  using CheckGPUSupportPassBase::CheckGPUSupportPassBase;
  void runOnOperation() override {
    // One error per op name, at its first occurrence, with their number:
    // a data-parallel step has an all-reduce per gradient bucket.
    llvm::MapVector<OperationName, SmallVector<Operation *>> refused;
    getOperation().walk([&](Operation *op) {
      if (!unsupportedReason(op->getName().getStringRef()).empty())
        refused[op->getName()].push_back(op);
    });
    for (auto &[name, ops] : refused) {
      InFlightDiagnostic diag = ops.front()->emitError()
                                << "not supported by ds-gpu-pipeline: '" << name
                                << "' ("
                                << unsupportedReason(name.getStringRef())
                                << " runs on the CPU only; use "
                                   "ds-cpu-pipeline, ds-run --device cpu)";
      if (ops.size() > 1)
        diag << "; " << ops.size() - 1 << " more in this module";
    }
    if (!refused.empty()) {
      signalPassFailure();
      return;
    }
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      warnAboutF32Fp8Gemms(func, fp8Gemms);
      warnAboutDenseBlockSparse(func);
    }
    warnAboutBlockScaledGemms(getOperation());
  }
};

} // namespace
