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
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

#include <optional>
#include <unordered_map>

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

/// Whether the launch's body holds an op of one of the types `Ops`.
template <typename... Ops> bool bodyHolds(gpu::LaunchOp launch) {
  return launch.getBody()
      .walk([](Operation *op) {
        return isa<Ops...>(op) ? WalkResult::interrupt()
                               : WalkResult::advance();
      })
      .wasInterrupted();
}

/// Whether the body asks for the grid's size other than through the
/// launch's own arguments (which a merge maps to the original size).
bool readsGridSize(gpu::LaunchOp launch) {
  return bodyHolds<gpu::GridDimOp, gpu::ClusterIdOp, gpu::ClusterDimOp,
                   gpu::ClusterBlockIdOp, gpu::ClusterDimBlocksOp>(launch);
}

/// Whether the body asks for its block or thread ids or sizes other than
/// through the launch's arguments (which a stack maps to its own block 0
/// and, for a one-thread launch, thread 0).
bool readsIdsDirectly(gpu::LaunchOp launch) {
  return readsGridSize(launch) ||
         bodyHolds<gpu::BlockIdOp, gpu::ThreadIdOp, gpu::BlockDimOp,
                   gpu::GlobalIdOp>(launch);
}

/// Whether neither launch touches a buffer the other writes, so that their
/// bodies may run in one kernel in any interleaving.
bool independent(gpu::LaunchOp a, gpu::LaunchOp b, bool distinctArguments) {
  AccessSet accessesA(a), accessesB(b);
  return !accessesA.unknown && !accessesB.unknown &&
         !conflict(accessesA, accessesB, distinctArguments);
}

/// Whether the body synchronises its threads (a barrier, a block or warp
/// reduction, a shuffle).
bool hasSynchronisation(gpu::LaunchOp launch) {
  return bodyHolds<gpu::BarrierOp, gpu::AllReduceOp, gpu::SubgroupReduceOp,
                   gpu::ShuffleOp>(launch);
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

/// Whether the thread is (0, 0, 0) in `launch`'s block.
Value isThreadZero(OpBuilder &b, Location loc, gpu::LaunchOp launch,
                   Value zero) {
  gpu::KernelDim3 tid = launch.getThreadIds();
  Value cond;
  for (Value id : {tid.x, tid.y, tid.z}) {
    Value isZero =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, id, zero);
    cond = cond ? arith::AndIOp::create(b, loc, cond, isZero) : isZero;
  }
  return cond;
}

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
    Value cond = isThreadZero(b, loc, first, zero);
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

/// A grid-stride loop over at most as many rows as the launch has blocks
/// (`for r = block id x; r < U; r += grid x` with U <= grid x) runs once on
/// the first U blocks: it becomes `if (block id x < U)` (or nothing, when
/// U is the grid), so that a kernel several such launches merge into is
/// straight-line code around its collectives.
void foldOneTripGridLoops(gpu::LaunchOp launch) {
  std::optional<std::array<int64_t, 3>> grid =
      constantExtents(launch.getGridSizeOperandValues());
  if (!grid)
    return;
  Value blockId = launch.getBlockIds().x, extent = launch.getGridSize().x;
  SmallVector<scf::ForOp> loops;
  launch.getBody().walk([&](scf::ForOp loop) {
    std::optional<int64_t> upper = getConstantIntValue(loop.getUpperBound());
    if (loop.getLowerBound() == blockId && loop.getStep() == extent &&
        loop.getInitArgs().empty() && upper && *upper <= (*grid)[0])
      loops.push_back(loop);
  });
  IRRewriter rewriter(launch.getContext());
  for (scf::ForOp loop : loops) {
    rewriter.setInsertionPoint(loop);
    Operation *at = loop;
    if (*getConstantIntValue(loop.getUpperBound()) < (*grid)[0]) {
      Value inRange = arith::CmpIOp::create(rewriter, loop.getLoc(),
                                            arith::CmpIPredicate::ult, blockId,
                                            loop.getUpperBound());
      auto guard = scf::IfOp::create(rewriter, loop.getLoc(), inRange,
                                     /*withElseRegion=*/false);
      at = guard.thenBlock()->getTerminator();
    }
    rewriter.eraseOp(loop.getBody()->getTerminator());
    rewriter.inlineBlockBefore(loop.getBody(), at, ValueRange{blockId});
    rewriter.eraseOp(loop);
  }
}

/// One block's body in a launch of one-block bodies side by side: the ops
/// under `guard`, whose condition `test` compares the block id with the
/// member's index.
struct StackMember {
  scf::IfOp guard;
  arith::CmpIOp test;
};

/// `if (block id x == index)`, empty, at `b`'s insertion point.
StackMember buildMember(OpBuilder &b, Location loc, gpu::LaunchOp launch,
                        int64_t index) {
  Value k = arith::ConstantIndexOp::create(b, loc, index);
  auto test = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                    launch.getBlockIds().x, k);
  auto guard = scf::IfOp::create(b, loc, test, /*withElseRegion=*/false);
  return {guard, test};
}

/// Clones the body of `second`, a one-block launch, at `b`'s insertion
/// point in `first`: its block ids are 0 and its grid 1; it runs on
/// `first`'s threads, or on thread (0, 0, 0) alone (`onThread0`, for a
/// one-thread launch).
void cloneOneBlockBody(OpBuilder b, gpu::LaunchOp first, gpu::LaunchOp second,
                       bool onThread0) {
  Location loc = second.getLoc();
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  IRMapping map;
  mapDims(map, second.getBlockIds(), {zero, zero, zero});
  mapDims(map, second.getGridSize(), {one, one, one});
  if (onThread0) {
    Value cond = isThreadZero(b, loc, first, zero);
    auto ifOp = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/false);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    mapDims(map, second.getThreadIds(), {zero, zero, zero});
    mapDims(map, second.getBlockSize(), {one, one, one});
  } else {
    mapDims(map, second.getThreadIds(), first.getThreadIds());
    mapDims(map, second.getBlockSize(), first.getBlockSize());
  }
  for (Operation &op : second.getBody().front().without_terminator())
    b.clone(op, map);
}

/// Turns `launch`, of one block, into a stack of one member: its body
/// sees block id 0 and grid 1 as constants, under `if (block id x == 0)`.
StackMember makeStack(gpu::LaunchOp launch) {
  Location loc = launch.getLoc();
  Block &body = launch.getBody().front();
  OpBuilder b(&body, body.begin());
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  gpu::KernelDim3 ids = launch.getBlockIds(), grid = launch.getGridSize();
  for (Value id : {ids.x, ids.y, ids.z})
    id.replaceAllUsesExcept(zero, zero.getDefiningOp());
  for (Value extent : {grid.x, grid.y, grid.z})
    extent.replaceAllUsesExcept(one, one.getDefiningOp());
  StackMember member = buildMember(b, loc, launch, 0);
  Operation *yield = member.guard.thenBlock()->getTerminator();
  for (Operation &op : llvm::make_early_inc_range(
           llvm::make_range(std::next(member.guard->getIterator()),
                            body.getTerminator()->getIterator())))
    op.moveBefore(yield);
  return member;
}

/// Sets the grid of a stack to one block per member, and each member's
/// test to its index.
void renumberStack(gpu::LaunchOp launch, ArrayRef<StackMember> members) {
  Location loc = launch.getLoc();
  // Sets `operand` to the constant `value`, dropping the old constant when
  // nothing else uses it.
  auto setConstant = [&](OpOperand &operand, int64_t value) {
    if (getConstantIntValue(operand.get()) == value)
      return;
    Value old = operand.get();
    OpBuilder b(operand.getOwner());
    operand.set(arith::ConstantIndexOp::create(b, loc, value));
    if (Operation *def = old.getDefiningOp();
        def && isa<arith::ConstantOp>(def) && def->use_empty())
      def->erase();
  };
  setConstant(launch.getGridSizeXMutable(),
              static_cast<int64_t>(members.size()));
  for (size_t i = 0; i < members.size(); ++i) {
    arith::CmpIOp test = members[i].test;
    setConstant(test.getRhsMutable(), static_cast<int64_t>(i));
  }
}

/// Appends `ops` (a member's body) to `into`'s, after a barrier when the
/// block has several threads (in one block it orders memory as the kernel
/// boundary did).
void appendToMember(gpu::LaunchOp launch, StackMember into, Location loc,
                    llvm::function_ref<void(OpBuilder &)> emit) {
  OpBuilder b(into.guard.thenBlock()->getTerminator());
  if (!isOne(constantExtents(launch.getBlockSizeOperandValues())))
    gpu::BarrierOp::create(b, loc);
  emit(b);
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
      for (Operation &op : *block)
        if (auto launch = dyn_cast<gpu::LaunchOp>(op))
          foldOneTripGridLoops(launch);
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
  /// be appended to, past ops that touch nothing it touches: up to the
  /// earliest such launch (a scale computed from the state), else down to
  /// the latest (an amax's last fold, a history's newest entry). The
  /// step's bookkeeping is spread between the big launches that produce
  /// and use its values; so it gathers in a few places, where launches
  /// that share no buffer run side by side (tryStack).
  void gatherOneBlockLaunches(Block &block) {
    SmallVector<gpu::LaunchOp> launches;
    for (Operation &op : block)
      if (auto launch = dyn_cast<gpu::LaunchOp>(op);
          launch && isPlainLaunch(launch) && isOneBlock(launch))
        launches.push_back(launch);
    // Upward in order, so that a chain that rises keeps its order; then
    // downward in reverse order, so that a chain that sinks keeps it too.
    llvm::SmallPtrSet<Operation *, 16> hoisted;
    for (gpu::LaunchOp launch : launches)
      if (hoistToJoin(launch))
        hoisted.insert(launch);
    for (gpu::LaunchOp launch : llvm::reverse(launches))
      if (!hoisted.contains(launch))
        sinkToJoin(launch);
    accessCache.clear();
  }

  /// What `op` touches, computed once per op (moves do not change it).
  const AccessSet &accessesOf(Operation *op) {
    return accessCache.try_emplace(op, op, /*libraryGemms=*/true).first->second;
  }
  // Node-based: a reference stays valid while others are added.
  std::unordered_map<Operation *, AccessSet> accessCache;

  /// Moves `launch` up to the earliest one-block launch it can be
  /// appended to, past ops that touch nothing it touches; true when it
  /// moved past a launch or a call (not just allocations and views).
  bool hoistToJoin(gpu::LaunchOp launch) {
    const AccessSet &mine = accessesOf(launch);
    if (mine.unknown)
      return false;
    // The launches it could be appended to, nearest first, with whether
    // something that is not separable lies between.
    SmallVector<std::pair<gpu::LaunchOp, bool>> targets;
    bool crossed = false;
    for (Operation *op = launch->getPrevNode(); op; op = op->getPrevNode()) {
      auto prev = dyn_cast<gpu::LaunchOp>(op);
      if (prev && joinable(prev, launch))
        targets.push_back({prev, crossed});
      // Running earlier than a free of what it uses is fine.
      if (isSeparable(op))
        continue;
      if (conflict(mine, accessesOf(op), distinct))
        break;
      crossed = true;
    }
    // The earliest whose values in between (allocations, views) can rise.
    for (auto [target, far] : llvm::reverse(targets)) {
      if (!far)
        return false; // it joins where it is
      SmallVector<Operation *> needed = opsToHoist(target, launch);
      if (!llvm::all_of(needed, isSeparable))
        continue;
      // In order after the target (one of them may be right after it).
      Operation *after = target;
      for (Operation *op : needed) {
        op->moveAfter(after);
        after = op;
      }
      launch->moveAfter(after);
      return true;
    }
    return false;
  }

  /// Moves `launch` down to the latest one-block launch that can be
  /// appended to it, past ops that touch nothing it touches; the frees
  /// of its buffers on the way move down after it.
  void sinkToJoin(gpu::LaunchOp launch) {
    const AccessSet &mine = accessesOf(launch);
    if (mine.unknown)
      return;
    gpu::LaunchOp target;
    bool crossed = false, far = false;
    SmallVector<Operation *> frees, freesBeforeTarget;
    for (Operation *op = launch->getNextNode(); op; op = op->getNextNode()) {
      if (op->hasTrait<OpTrait::IsTerminator>())
        break;
      auto next = dyn_cast<gpu::LaunchOp>(op);
      if (next && joinable(launch, next)) {
        target = next;
        far = crossed;
        freesBeforeTarget = frees;
      }
      if (isSeparable(op)) {
        if (isa<memref::DeallocOp, gpu::DeallocOp>(op) &&
            conflict(mine, accessesOf(op), distinct))
          frees.push_back(op);
        continue;
      }
      if (conflict(mine, accessesOf(op), distinct))
        break;
      crossed = true;
    }
    if (!target || !far)
      return;
    launch->moveBefore(target);
    for (Operation *free : llvm::reverse(freesBeforeTarget))
      free->moveAfter(launch);
  }

  void mergeIn(Block &block) {
    // The launches later ones may join, the latest last: a launch may run
    // earlier than the launches after the one it joins when it touches
    // nothing they write and writes nothing they touch.
    SmallVector<gpu::LaunchOp> open;
    for (Operation &op : llvm::make_early_inc_range(block)) {
      auto launch = dyn_cast<gpu::LaunchOp>(op);
      if (!launch) {
        if (!isSeparable(&op))
          open.clear();
        continue;
      }
      if (!isPlainLaunch(launch)) {
        open.clear();
        continue;
      }
      if (appendToAnOpen(open, launch))
        continue;
      open.push_back(launch);
      if (open.size() > kOpenLaunches)
        open.erase(open.begin());
    }
  }

  /// How many launches back a launch may look for one to join.
  static constexpr size_t kOpenLaunches = 4;

  bool appendToAnOpen(ArrayRef<gpu::LaunchOp> open, gpu::LaunchOp launch) {
    std::optional<AccessSet> mine;
    for (gpu::LaunchOp first : llvm::reverse(open)) {
      if (tryAppend(first, launch))
        return true;
      // To join an earlier one, it must be able to run before this one.
      if (!mine)
        mine.emplace(launch);
      if (mine->unknown || conflict(*mine, AccessSet(first), distinct))
        return false;
    }
    return false;
  }

  /// Whether this function's memref arguments never overlap.
  bool distinct = false;

  /// The launches this pass made of one-block launches side by side, and
  /// their members in block order.
  DenseMap<Operation *, SmallVector<StackMember>> stacks;

  /// Puts `second`, a one-block launch, into `first`, a one-block launch or
  /// a stack: on a block of its own when it touches no buffer that a
  /// member writes or writes one a member touches; else after the one
  /// member it depends on, or after the members it depends on, joined
  /// into one block (in any order, since they are independent). A chain of
  /// bookkeeping stays in one block, ordered by barriers, and independent
  /// chains run at once: the scales of a step's FP8 tensors, computed from
  /// the state, are one launch of as many blocks.
  bool tryStack(gpu::LaunchOp first, gpu::LaunchOp second) {
    if (!isOneBlock(second) || readsIdsDirectly(second))
      return false;
    bool onThread0 = false;
    if (!sameBlock(first, second)) {
      if (!isOne(constantExtents(second.getBlockSizeOperandValues())) ||
          hasSynchronisation(second))
        return false;
      onThread0 = true;
    }
    AccessSet mine(second);
    if (mine.unknown)
      return false;
    auto it = stacks.find(first);
    if (it == stacks.end()) {
      if (!isOneBlock(first) || readsIdsDirectly(first) ||
          !independent(first, second, distinct))
        return false; // appended in order (Join::Ordered)
      it = stacks.try_emplace(first, SmallVector<StackMember>{makeStack(first)})
               .first;
    }
    SmallVector<StackMember> &members = it->second;
    SmallVector<unsigned> hits;
    for (auto [i, member] : llvm::enumerate(members)) {
      AccessSet theirs(member.guard);
      if (theirs.unknown || conflict(mine, theirs, distinct))
        hits.push_back(i);
    }
    Location loc = second.getLoc();
    for (Operation *op : opsToHoist(first, second))
      op->moveBefore(first);
    auto emit = [&](OpBuilder &b) {
      cloneOneBlockBody(b, first, second, onThread0);
    };
    if (hits.empty()) {
      OpBuilder b(first.getBody().front().getTerminator());
      StackMember member = buildMember(b, loc, first, members.size());
      OpBuilder inner(member.guard.thenBlock()->getTerminator());
      emit(inner);
      members.push_back(member);
    } else {
      // The members it depends on become one, then it follows them.
      StackMember keep = members[hits.front()];
      for (unsigned i : llvm::drop_begin(hits)) {
        StackMember other = members[i];
        appendToMember(first, keep, loc, [&](OpBuilder &b) {
          for (Operation &op : llvm::make_early_inc_range(
                   other.guard.thenBlock()->without_terminator()))
            op.moveBefore(b.getInsertionBlock(), b.getInsertionPoint());
        });
        other.guard.erase();
        other.test.erase();
      }
      for (unsigned i : llvm::reverse(llvm::drop_begin(hits)))
        members.erase(members.begin() + i);
      appendToMember(first, keep, loc, emit);
    }
    second.erase();
    renumberStack(first, members);
    return true;
  }

  bool tryAppend(gpu::LaunchOp first, gpu::LaunchOp second) {
    if (!isPlainLaunch(second))
      return false;
    if (tryStack(first, second))
      return true;
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
    // Anything else makes a stack an ordinary launch again.
    stacks.erase(first);
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
