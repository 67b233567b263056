//===- MergeGPULaunches.cpp - One-block launches appended to each other ---===//
//
// Implements ds-merge-gpu-launches (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "ds/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
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

/// A launch the pass may extend or append: synchronous, of constant grid
/// and block sizes, without clusters, dynamic shared memory or memory
/// attributions.
bool isPlainLaunch(gpu::LaunchOp launch) {
  return launch.getAsyncDependencies().empty() && !launch.getAsyncToken() &&
         !launch.hasClusterSize() && !launch.getDynamicSharedMemorySize() &&
         launch.getNumWorkgroupAttributions() == 0 &&
         launch.getNumPrivateAttributions() == 0 &&
         constantExtents(launch.getGridSizeOperandValues()) &&
         constantExtents(launch.getBlockSizeOperandValues());
}

bool isOneBlock(gpu::LaunchOp launch) {
  return isOne(constantExtents(launch.getGridSizeOperandValues()));
}

bool sameShape(gpu::LaunchOp a, gpu::LaunchOp b) {
  return constantExtents(a.getGridSizeOperandValues()) ==
             constantExtents(b.getGridSizeOperandValues()) &&
         constantExtents(a.getBlockSizeOperandValues()) ==
             constantExtents(b.getBlockSizeOperandValues());
}

/// The buffer a memref value views: through subviews, reshapes and casts
/// to an allocation, a global, or an argument of the function.
Value rootBuffer(Value memref) {
  while (Operation *def = memref.getDefiningOp()) {
    auto view = dyn_cast<ViewLikeOpInterface>(def);
    if (!view)
      break;
    memref = view.getViewSource();
  }
  return memref;
}

/// Whether two root buffers may share memory. An allocation shares none
/// with any other root, and globals only with the same global; two
/// arguments share none when `distinctArguments` says so, and may otherwise
/// (a caller may pass one buffer as two arguments).
bool mayAlias(Value a, Value b, bool distinctArguments) {
  if (a == b)
    return true;
  if (distinctArguments && isa<BlockArgument>(a) && isa<BlockArgument>(b) &&
      isa<FunctionOpInterface>(
          cast<BlockArgument>(a).getOwner()->getParentOp()) &&
      isa<FunctionOpInterface>(
          cast<BlockArgument>(b).getOwner()->getParentOp()))
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
  return true;
}

/// The buffers a launch reads and writes (their roots); false when an op
/// in it touches memory in a way not stated per buffer.
bool collectAccesses(gpu::LaunchOp launch, SmallVectorImpl<Value> &reads,
                     SmallVectorImpl<Value> &writes) {
  WalkResult result = launch.getBody().walk([&](Operation *op) {
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
      bool isWrite = isa<MemoryEffects::Write>(e.getEffect());
      if (!isRead && !isWrite)
        continue; // allocation effects of values local to the body
      if (!v || !isa<MemRefType>(v.getType()))
        return WalkResult::interrupt();
      (isWrite ? writes : reads).push_back(rootBuffer(v));
    }
    return WalkResult::advance();
  });
  return !result.wasInterrupted();
}

/// Whether neither launch touches a buffer the other writes, so that their
/// bodies may run in one kernel in any interleaving.
bool independent(gpu::LaunchOp a, gpu::LaunchOp b, bool distinctArguments) {
  SmallVector<Value> readsA, writesA, readsB, writesB;
  if (!collectAccesses(a, readsA, writesA) ||
      !collectAccesses(b, readsB, writesB))
    return false;
  auto conflict = [&](ArrayRef<Value> writes, ArrayRef<Value> reads,
                      ArrayRef<Value> otherWrites) {
    for (Value w : writes) {
      for (Value r : reads)
        if (mayAlias(w, r, distinctArguments))
          return true;
      for (Value o : otherWrites)
        if (mayAlias(w, o, distinctArguments))
          return true;
    }
    return false;
  };
  return !conflict(writesA, readsB, writesB) && !conflict(writesB, readsA, {});
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
SmallVector<Operation *> opsToHoist(gpu::LaunchOp first, gpu::LaunchOp second) {
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

/// How a launch joins the one before it.
enum class Join {
  /// One block each, the same threads: after a barrier.
  Ordered,
  /// One block, then one thread: after a barrier, on thread (0, 0, 0).
  OrderedOnThread0,
  /// The same grid and block, touching no buffer the other writes: as is.
  Independent,
};

/// Appends `second`'s body to `first`'s and erases `second`.
void appendLaunch(gpu::LaunchOp first, gpu::LaunchOp second, Join join) {
  Location loc = second.getLoc();
  Block &body = first.getBody().front();
  OpBuilder b(body.getTerminator());
  bool secondOnOneThread = join == Join::OrderedOnThread0;
  // In one block a barrier orders memory as the kernel boundary did (a
  // single thread needs none).
  if (join != Join::Independent &&
      !isOne(constantExtents(first.getBlockSizeOperandValues())))
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
    // Only a step's own arguments come with the ABI's promise.
    distinct =
        distinctArguments &&
        getOperation()->hasAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName());
    SmallVector<Block *> blocks;
    getOperation()->walk([&](Block *block) {
      if (!block->getParentOp() || !isa<gpu::LaunchOp>(block->getParentOp()))
        blocks.push_back(block);
    });
    for (Block *block : blocks)
      mergeIn(*block);
  }

  void mergeIn(Block &block) {
    gpu::LaunchOp open; // the launch later ones may join
    for (Operation &op : llvm::make_early_inc_range(block)) {
      auto launch = dyn_cast<gpu::LaunchOp>(op);
      if (!launch) {
        if (!isSeparable(&op))
          open = nullptr;
        continue;
      }
      if (open && tryAppend(open, launch))
        continue;
      open = isPlainLaunch(launch) ? launch : nullptr;
    }
  }

  /// Whether this function's memref arguments never overlap.
  bool distinct = false;

  bool tryAppend(gpu::LaunchOp first, gpu::LaunchOp second) {
    if (!isPlainLaunch(second))
      return false;
    std::optional<Join> join;
    if (isOneBlock(first) && isOneBlock(second)) {
      if (sameShape(first, second))
        join = Join::Ordered;
      else if (isOne(constantExtents(second.getBlockSizeOperandValues())) &&
               !hasSynchronisation(second))
        join = Join::OrderedOnThread0;
    }
    if (!join && sameShape(first, second) &&
        independent(first, second, distinct))
      join = Join::Independent;
    if (!join)
      return false;
    for (Operation *op : opsToHoist(first, second))
      op->moveBefore(first);
    appendLaunch(first, second, *join);
    return true;
  }
};

} // namespace
