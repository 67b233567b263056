//===- MergeGPULaunches.cpp - One-block launches appended to each other ---===//
//
// Implements ds-merge-gpu-launches (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "ds/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

#include <optional>

namespace mlir::ds {
#define GEN_PASS_DEF_MERGEGPULAUNCHESPASS
#include "ds/Conversion/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;

namespace {

/// The three extents of `dims` when they are all constants.
std::optional<std::array<int64_t, 3>> constantExtents(gpu::KernelDim3 dims) {
  std::array<int64_t, 3> out;
  Value values[3] = {dims.x, dims.y, dims.z};
  for (int d = 0; d < 3; ++d) {
    std::optional<int64_t> v = getConstantIntValue(values[d]);
    if (!v)
      return std::nullopt;
    out[d] = *v;
  }
  return out;
}

bool isOne(std::optional<std::array<int64_t, 3>> extents) {
  return extents && (*extents)[0] == 1 && (*extents)[1] == 1 &&
         (*extents)[2] == 1;
}

/// A launch of one block that the pass may extend or append: synchronous,
/// without clusters, dynamic shared memory or memory attributions.
bool isPlainOneBlockLaunch(gpu::LaunchOp launch) {
  return launch.getAsyncDependencies().empty() && !launch.getAsyncToken() &&
         !launch.hasClusterSize() && !launch.getDynamicSharedMemorySize() &&
         launch.getNumWorkgroupAttributions() == 0 &&
         launch.getNumPrivateAttributions() == 0 &&
         isOne(constantExtents(launch.getGridSizeOperandValues()));
}

bool hasSynchronisation(gpu::LaunchOp launch) {
  return launch.getBody()
      .walk([](Operation *op) {
        return isa<gpu::BarrierOp, gpu::AllReduceOp, gpu::SubgroupReduceOp,
                   gpu::ShuffleOp>(op)
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

/// Ops that may stand between two launches that merge: they read and write
/// no memory a kernel could touch.
bool isSeparable(Operation *op) {
  if (auto alloc = dyn_cast<gpu::AllocOp>(op))
    return alloc.getAsyncDependencies().empty() && !alloc.getAsyncToken();
  if (auto dealloc = dyn_cast<gpu::DeallocOp>(op))
    return dealloc.getAsyncDependencies().empty() && !dealloc.getAsyncToken();
  if (isa<memref::AllocOp, memref::DeallocOp>(op))
    return true;
  return op->getNumRegions() == 0 && isPure(op);
}

/// The ops between `first` and `second` that `second` depends on, in
/// order. Only allocations and pure ops lie between (isSeparable), and each
/// may move above `first`: an allocation may happen earlier.
SmallVector<Operation *> opsToHoist(gpu::LaunchOp first,
                                    gpu::LaunchOp second) {
  llvm::SetVector<Operation *> needed;
  SmallVector<Value> work;
  second->walk([&](Operation *op) {
    for (Value v : op->getOperands())
      work.push_back(v);
  });
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || def->getBlock() != first->getBlock() ||
        !first->isBeforeInBlock(def) || !def->isBeforeInBlock(second) ||
        !needed.insert(def))
      continue;
    llvm::append_range(work, def->getOperands());
  }
  SmallVector<Operation *> ordered(needed.begin(), needed.end());
  llvm::sort(ordered,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return ordered;
}

/// Appends `second`'s body to `first`'s and erases `second`.
void appendLaunch(gpu::LaunchOp first, gpu::LaunchOp second,
                  bool secondOnOneThread) {
  Location loc = second.getLoc();
  Block &body = first.getBody().front();
  OpBuilder b(body.getTerminator());
  // In one block a barrier orders memory as the kernel boundary did (a
  // single thread needs none).
  if (!isOne(constantExtents(first.getBlockSizeOperandValues())))
    gpu::BarrierOp::create(b, loc);
  IRMapping map;
  auto mapDims = [&](gpu::KernelDim3 from, gpu::KernelDim3 to) {
    map.map(from.x, to.x);
    map.map(from.y, to.y);
    map.map(from.z, to.z);
  };
  mapDims(second.getBlockIds(), first.getBlockIds());
  mapDims(second.getGridSize(), first.getGridSize());
  if (secondOnOneThread) {
    // Thread (0, 0, 0) alone, as the one-thread launch ran.
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    gpu::KernelDim3 tid = first.getThreadIds();
    Value cond;
    for (Value id : {tid.x, tid.y, tid.z}) {
      Value isZero =
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, id, zero);
      cond = cond ? arith::AndIOp::create(b, loc, cond, isZero) : isZero;
    }
    mapDims(second.getThreadIds(), {zero, zero, zero});
    mapDims(second.getBlockSize(), {one, one, one});
    auto ifOp = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/false);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  } else {
    mapDims(second.getThreadIds(), first.getThreadIds());
    mapDims(second.getBlockSize(), first.getBlockSize());
  }
  for (Operation &op : second.getBody().front().without_terminator())
    b.clone(op, map);
  second.erase();
}

struct MergeGPULaunchesPass
    : public mlir::ds::impl::MergeGPULaunchesPassBase<MergeGPULaunchesPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<Block *> blocks;
    getOperation()->walk([&](Block *block) {
      if (!block->getParentOp() || !isa<gpu::LaunchOp>(block->getParentOp()))
        blocks.push_back(block);
    });
    for (Block *block : blocks)
      mergeIn(*block);
  }

  void mergeIn(Block &block) {
    gpu::LaunchOp open; // the one-block launch later ones may join
    for (Operation &op : llvm::make_early_inc_range(block)) {
      auto launch = dyn_cast<gpu::LaunchOp>(op);
      if (!launch) {
        if (!isSeparable(&op))
          open = nullptr;
        continue;
      }
      if (open && tryAppend(open, launch))
        continue;
      open = isPlainOneBlockLaunch(launch) ? launch : nullptr;
    }
  }

  bool tryAppend(gpu::LaunchOp first, gpu::LaunchOp second) {
    if (!isPlainOneBlockLaunch(second))
      return false;
    auto firstBlock = constantExtents(first.getBlockSizeOperandValues());
    auto secondBlock = constantExtents(second.getBlockSizeOperandValues());
    bool sameThreads = firstBlock && secondBlock && *firstBlock == *secondBlock;
    bool oneThread = isOne(secondBlock) && !hasSynchronisation(second);
    if (!sameThreads && !oneThread)
      return false;
    for (Operation *op : opsToHoist(first, second))
      op->moveBefore(first);
    appendLaunch(first, second, /*secondOnOneThread=*/!sameThreads);
    return true;
  }
};

} // namespace
