//===- BufferAccess.cpp - Which buffers ops read and write ----------------===//
//
// See BufferAccess.h.
//
//===----------------------------------------------------------------------===//

#include "BufferAccess.h"
#include "KernelUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::ds::gpu_kernels {

static bool isFunctionArgument(Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  return arg && isa<FunctionOpInterface>(arg.getOwner()->getParentOp());
}

bool mayAlias(Value a, Value b, bool distinctArguments) {
  if (a == b)
    return true;
  if (distinctArguments && isFunctionArgument(a) && isFunctionArgument(b))
    return false;
  auto fresh = [](Value v) {
    return v.getDefiningOp<memref::AllocOp>() ||
           v.getDefiningOp<gpu::AllocOp>();
  };
  if (fresh(a) || fresh(b))
    return false;
  auto globalA = a.getDefiningOp<memref::GetGlobalOp>();
  auto globalB = b.getDefiningOp<memref::GetGlobalOp>();
  if (globalA && globalB)
    return globalA.getName() == globalB.getName();
  // The runner allocates a step's arguments; none is a global.
  if (distinctArguments && (globalA || globalB) &&
      (isFunctionArgument(a) || isFunctionArgument(b)))
    return false;
  return true;
}

/// Whether `a` and `b` are static subviews of one memref whose ranges miss
/// each other in some dimension.
static bool disjointSubviews(Value a, Value b) {
  auto viewA = a.getDefiningOp<memref::SubViewOp>();
  auto viewB = b.getDefiningOp<memref::SubViewOp>();
  if (!viewA || !viewB || viewA.getSource() != viewB.getSource())
    return false;
  ArrayRef<int64_t> offA = viewA.getStaticOffsets(),
                    offB = viewB.getStaticOffsets();
  ArrayRef<int64_t> sizeA = viewA.getStaticSizes(),
                    sizeB = viewB.getStaticSizes();
  ArrayRef<int64_t> strideA = viewA.getStaticStrides(),
                    strideB = viewB.getStaticStrides();
  for (size_t d = 0; d < offA.size(); ++d) {
    int64_t values[] = {offA[d],  offB[d],    sizeA[d],
                        sizeB[d], strideA[d], strideB[d]};
    if (llvm::any_of(values, ShapedType::isDynamic) || sizeA[d] == 0 ||
        sizeB[d] == 0)
      continue;
    int64_t lastA = offA[d] + (sizeA[d] - 1) * strideA[d];
    int64_t lastB = offB[d] + (sizeB[d] - 1) * strideB[d];
    if (lastA < offB[d] || lastB < offA[d])
      return true;
  }
  return false;
}

bool mayOverlap(const Access &a, const Access &b, bool distinctArguments) {
  return mayAlias(a.root, b.root, distinctArguments) &&
         !disjointSubviews(a.view, b.view);
}

/// The buffer whose address `ptr` is (inttoptr of its aligned pointer, as
/// the runtime calls take an FP8 scale), or null.
static Value pointedBuffer(Value ptr) {
  auto toPtr = ptr.getDefiningOp<LLVM::IntToPtrOp>();
  if (!toPtr)
    return {};
  Value address = toPtr.getArg();
  if (auto cast = address.getDefiningOp<arith::IndexCastOp>())
    address = cast.getIn();
  auto extract =
      address.getDefiningOp<memref::ExtractAlignedPointerAsIndexOp>();
  return extract ? extract.getSource() : Value();
}

static bool isKernelLocal(MemRefType type) {
  auto space = dyn_cast_or_null<gpu::AddressSpaceAttr>(type.getMemorySpace());
  return space && space.getValue() != gpu::AddressSpace::Global;
}

bool collectAccesses(Operation *root, SmallVectorImpl<Access> &reads,
                     SmallVectorImpl<Access> &writes, bool libraryGemms) {
  WalkResult result = root->walk([&](Operation *op) {
    // Collectives exchange registers within the block, not buffers (a
    // region of an all_reduce is walked op by op).
    if (isa<gpu::BarrierOp, gpu::AllReduceOp, gpu::SubgroupReduceOp,
            gpu::ShuffleOp, gpu::YieldOp>(op))
      return WalkResult::advance();
    // A library GEMM writes its third operand (C) and reads the others:
    // ds_runtime_cuda.h's contract for dsrt_cuda_matmul_*. Its FP8 scales
    // come as pointers, each the address of a buffer it reads.
    if (auto call = dyn_cast<func::CallOp>(op);
        libraryGemms && call &&
        call.getCallee().starts_with("dsrt_cuda_matmul_")) {
      for (auto [i, v] : llvm::enumerate(call.getOperands())) {
        if (isa<MemRefType>(v.getType())) {
          (i == 2 ? writes : reads).push_back({v, viewRoot(v)});
          continue;
        }
        if (!isa<LLVM::LLVMPointerType>(v.getType()))
          continue;
        if (v.getDefiningOp<LLVM::ZeroOp>())
          continue; // null: no scale
        Value buffer = pointedBuffer(v);
        if (!buffer)
          return WalkResult::interrupt();
        reads.push_back({buffer, viewRoot(buffer)});
      }
      return WalkResult::advance();
    }
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    if (!effects)
      return op->hasTrait<OpTrait::HasRecursiveMemoryEffects>() || isPure(op) ||
                     isa<gpu::TerminatorOp>(op)
                 ? WalkResult::advance()
                 : WalkResult::interrupt();
    SmallVector<MemoryEffects::EffectInstance> list;
    effects.getEffects(list);
    for (const MemoryEffects::EffectInstance &e : list) {
      Value v = e.getValue();
      bool isRead = isa<MemoryEffects::Read>(e.getEffect());
      // A freed buffer may be reused by the next allocation: freeing
      // conflicts with any earlier or later access, as a write does.
      bool isWrite =
          isa<MemoryEffects::Write, MemoryEffects::Free>(e.getEffect());
      if (!isRead && !isWrite)
        continue; // allocation effects of values local to the body
      if (!v || !isa<MemRefType>(v.getType()))
        return WalkResult::interrupt();
      // A kernel's shared and private memory lives only as long as the
      // kernel: no other op can see it.
      if (isKernelLocal(cast<MemRefType>(v.getType())))
        continue;
      (isWrite ? writes : reads).push_back({v, viewRoot(v)});
    }
    return WalkResult::advance();
  });
  return !result.wasInterrupted();
}

bool conflict(const AccessSet &a, const AccessSet &b, bool distinctArguments) {
  if ((a.unknown && b.touchesMemory()) || (b.unknown && a.touchesMemory()))
    return true;
  auto writesInto = [&](ArrayRef<Access> writes, const AccessSet &other) {
    for (const Access &w : writes) {
      for (const Access &r : other.reads)
        if (mayOverlap(w, r, distinctArguments))
          return true;
      for (const Access &o : other.writes)
        if (mayOverlap(w, o, distinctArguments))
          return true;
    }
    return false;
  };
  return writesInto(a.writes, b) || writesInto(b.writes, a);
}

bool conflictsWithAny(const AccessSet &a, ArrayRef<AccessSet> others,
                      bool distinctArguments) {
  return llvm::any_of(others, [&](const AccessSet &o) {
    return conflict(a, o, distinctArguments);
  });
}

} // namespace mlir::ds::gpu_kernels
