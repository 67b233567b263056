//===- MergeGPULaunches.cpp - One-block launches appended to each other ---===//
//
// Implements ds-merge-gpu-launches (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "ds/Conversion/Passes.h"

#include "BufferAccess.h"

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
using namespace mlir::ds::gpu_kernels;

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

bool sameBlock(gpu::LaunchOp a, gpu::LaunchOp b) {
  return constantExtents(a.getBlockSizeOperandValues()) ==
         constantExtents(b.getBlockSizeOperandValues());
}

bool sameShape(gpu::LaunchOp a, gpu::LaunchOp b) {
  return sameBlock(a, b) && constantExtents(a.getGridSizeOperandValues()) ==
                                constantExtents(b.getGridSizeOperandValues());
}

/// Whether the body asks for the grid's size other than through the
/// launch's own arguments (which a merge maps to the original size).
bool readsGridSize(gpu::LaunchOp launch) {
  return launch.getBody()
      .walk([](Operation *op) {
        return isa<gpu::GridDimOp, gpu::ClusterIdOp, gpu::ClusterDimOp,
                   gpu::ClusterBlockIdOp, gpu::ClusterDimBlocksOp>(op)
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

/// Whether neither launch touches a buffer the other writes, so that their
/// bodies may run in one kernel in any interleaving.
bool independent(gpu::LaunchOp a, gpu::LaunchOp b, bool distinctArguments) {
  AccessSet accessesA(a), accessesB(b);
  return !accessesA.unknown && !accessesB.unknown &&
         !conflict(accessesA, accessesB, distinctArguments);
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

/// Maps each of `from`'s three values to `to`'s.
void mapDims(IRMapping &map, gpu::KernelDim3 from, gpu::KernelDim3 to) {
  map.map(from.x, to.x);
  map.map(from.y, to.y);
  map.map(from.z, to.z);
}

/// How a launch joins the one before it.
enum class Join {
  /// One block each, the same threads: after a barrier.
  Ordered,
  /// One block, then one thread: after a barrier, on thread (0, 0, 0).
  OrderedOnThread0,
  /// The same grid and block, touching no buffer the other writes: as is.
  Independent,
  /// The same block on other grids, touching no buffer the other writes:
  /// over the larger grid, each body on the blocks of its own.
  IndependentOnOwnBlocks,
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
  mapDims(map, second.getBlockIds(), first.getBlockIds());
  mapDims(map, second.getGridSize(), first.getGridSize());
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
    mapDims(map, second.getThreadIds(), {zero, zero, zero});
    mapDims(map, second.getBlockSize(), {one, one, one});
    auto ifOp = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/false);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  } else {
    mapDims(map, second.getThreadIds(), first.getThreadIds());
    mapDims(map, second.getBlockSize(), first.getBlockSize());
  }
  for (Operation &op : second.getBody().front().without_terminator())
    b.clone(op, map);
  second.erase();
}

/// Whether each block id is below `own`'s extent, in the dimensions where
/// `extents` are below the merged grid's.
Value blocksBelow(OpBuilder &b, Location loc, gpu::KernelDim3 ids,
                  gpu::KernelDim3 own, ArrayRef<int64_t> extents,
                  ArrayRef<int64_t> merged) {
  Value cond;
  Value id[3] = {ids.x, ids.y, ids.z};
  Value bound[3] = {own.x, own.y, own.z};
  for (int d = 0; d < 3; ++d) {
    if (extents[d] == merged[d])
      continue;
    Value in = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, id[d],
                                     bound[d]);
    cond = cond ? arith::AndIOp::create(b, loc, cond, in) : in;
  }
  return cond;
}

/// Joins two independent launches of the same block on different grids:
/// `first` grows to the larger extent of each dimension, and each body runs
/// on the blocks it had, under a guard that depends on the block alone
/// (so barriers inside stay uniform), seeing its own grid size.
void appendOnOwnBlocks(gpu::LaunchOp first, gpu::LaunchOp second) {
  Location loc = second.getLoc();
  std::array<int64_t, 3> gridA =
      *constantExtents(first.getGridSizeOperandValues());
  std::array<int64_t, 3> gridB =
      *constantExtents(second.getGridSizeOperandValues());
  std::array<int64_t, 3> merged;
  for (int d = 0; d < 3; ++d)
    merged[d] = std::max(gridA[d], gridB[d]);

  // The merged grid's extents, defined above the launch.
  OpBuilder outer(first);
  OpOperand *gridOperands[3] = {&first.getGridSizeXMutable(),
                                &first.getGridSizeYMutable(),
                                &first.getGridSizeZMutable()};
  for (int d = 0; d < 3; ++d)
    if (merged[d] != gridA[d])
      gridOperands[d]->set(
          arith::ConstantIndexOp::create(outer, loc, merged[d]));

  Block &body = first.getBody().front();
  gpu::KernelDim3 blockIds = first.getBlockIds();
  auto ownGrid = [&](OpBuilder &b, ArrayRef<int64_t> grid,
                     gpu::KernelDim3 fallback) {
    Value v[3] = {fallback.x, fallback.y, fallback.z};
    for (int d = 0; d < 3; ++d)
      if (grid[d] != merged[d])
        v[d] = arith::ConstantIndexOp::create(b, loc, grid[d]);
    return gpu::KernelDim3{v[0], v[1], v[2]};
  };

  // The first body: on its own blocks, seeing its own grid.
  if (merged != gridA) {
    OpBuilder b(&body, body.begin());
    gpu::KernelDim3 own = ownGrid(b, gridA, first.getGridSize());
    gpu::KernelDim3 args = first.getGridSize();
    Value from[3] = {args.x, args.y, args.z};
    Value to[3] = {own.x, own.y, own.z};
    for (int d = 0; d < 3; ++d)
      if (from[d] != to[d])
        from[d].replaceAllUsesWith(to[d]);
    Value cond = blocksBelow(b, loc, blockIds, own, gridA, merged);
    auto guard = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/false);
    Block *then = guard.thenBlock();
    for (Operation &op : llvm::make_early_inc_range(
             llvm::make_range(std::next(guard->getIterator()),
                              body.getTerminator()->getIterator())))
      op.moveBefore(then->getTerminator());
  }

  // The second body after it, likewise.
  OpBuilder b(body.getTerminator());
  IRMapping map;
  mapDims(map, second.getBlockIds(), blockIds);
  mapDims(map, second.getThreadIds(), first.getThreadIds());
  mapDims(map, second.getBlockSize(), first.getBlockSize());
  gpu::KernelDim3 own = ownGrid(b, gridB, first.getGridSize());
  mapDims(map, second.getGridSize(), own);
  if (merged != gridB) {
    Value cond = blocksBelow(b, loc, blockIds, own, gridB, merged);
    auto guard = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/false);
    b.setInsertionPoint(guard.thenBlock()->getTerminator());
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
    for (Block *block : blocks) {
      gatherOneBlockLaunches(*block);
      mergeIn(*block);
    }
  }

  /// Whether `second`, run right after `first`, would be appended to it.
  static bool joinable(gpu::LaunchOp first, gpu::LaunchOp second) {
    return isPlainLaunch(first) && isOneBlock(first) && isPlainLaunch(second) &&
           isOneBlock(second) &&
           (sameShape(first, second) ||
            (isOne(constantExtents(second.getBlockSizeOperandValues())) &&
             !hasSynchronisation(second)));
  }

  /// Moves each one-block launch next to another one-block launch it can
  /// be appended to, past ops that touch nothing it touches: up to the one
  /// before it (a scale computed from the state), else down to the one
  /// after it (an amax's last fold, a history's newest entry). The step's
  /// bookkeeping chains lie between the big launches that produce and use
  /// their values, and gather so.
  void gatherOneBlockLaunches(Block &block) {
    SmallVector<gpu::LaunchOp> launches;
    for (Operation &op : block)
      if (auto launch = dyn_cast<gpu::LaunchOp>(op);
          launch && isPlainLaunch(launch) && isOneBlock(launch))
        launches.push_back(launch);
    for (gpu::LaunchOp launch : launches) {
      auto prev = dyn_cast_or_null<gpu::LaunchOp>(launch->getPrevNode());
      // Right after a launch it joins (moved there, or so placed): stays.
      if (!(prev && joinable(prev, launch)) && !hoistToJoin(launch))
        sinkToJoin(launch);
    }
  }

  bool hoistToJoin(gpu::LaunchOp launch) {
    AccessSet mine(launch);
    if (mine.unknown)
      return false;
    gpu::LaunchOp target;
    for (Operation *op = launch->getPrevNode(); op; op = op->getPrevNode()) {
      auto prev = dyn_cast<gpu::LaunchOp>(op);
      if (prev && joinable(prev, launch)) {
        target = prev;
        break;
      }
      // Running earlier than a free of what it uses is fine.
      if (!isSeparable(op) &&
          conflict(mine, AccessSet(op, /*libraryGemms=*/true), distinct))
        return false;
    }
    if (!target || target->getNextNode() == launch)
      return false;
    SmallVector<Operation *> needed = opsToHoist(target, launch);
    if (!llvm::all_of(needed, isSeparable))
      return false;
    // In order after the target (one of them may be right after it).
    Operation *after = target;
    for (Operation *op : needed) {
      op->moveAfter(after);
      after = op;
    }
    launch->moveAfter(after);
    return true;
  }

  void sinkToJoin(gpu::LaunchOp launch) {
    AccessSet mine(launch);
    if (mine.unknown)
      return;
    for (Operation *op = launch->getNextNode(); op; op = op->getNextNode()) {
      auto next = dyn_cast<gpu::LaunchOp>(op);
      if (next && joinable(launch, next)) {
        if (next != launch->getNextNode())
          launch->moveBefore(next);
        return;
      }
      // Unlike an allocation, a free of what it uses must stay after it.
      if (op->hasTrait<OpTrait::IsTerminator>() ||
          ((!isSeparable(op) || isa<memref::DeallocOp, gpu::DeallocOp>(op)) &&
           conflict(mine, AccessSet(op, /*libraryGemms=*/true), distinct)))
        return;
    }
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
    if (!join && sameBlock(first, second) &&
        independent(first, second, distinct)) {
      if (sameShape(first, second))
        join = Join::Independent;
      else if (!readsGridSize(first) && !readsGridSize(second))
        join = Join::IndependentOnOwnBlocks;
    }
    if (!join)
      return false;
    for (Operation *op : opsToHoist(first, second))
      op->moveBefore(first);
    if (*join == Join::IndependentOnOwnBlocks)
      appendOnOwnBlocks(first, second);
    else
      appendLaunch(first, second, *join);
    return true;
  }
};

} // namespace
