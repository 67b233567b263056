//===- GPUKernelBuilders.cpp - gpu.launch shapes of the GPU path ----------===//
//
// See GPUKernelBuilders.h. Launch sizes are computed on the host from the
// (usually constant) iteration space, so canonicalization folds them to
// constants for static shapes; kernels see their bounds as captured values.
//
//===----------------------------------------------------------------------===//

#include "GPUKernelBuilders.h"
#include "KernelUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/bit.h"

#include <tuple>

using namespace mlir;
using namespace mlir::ds::gpu_kernels;

SmallVector<Value> mlir::ds::gpu_kernels::delinearize(OpBuilder &b,
                                                      Location loc,
                                                      Value linear,
                                                      ArrayRef<Value> sizes) {
  SmallVector<Value> idx(sizes.size());
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    if (d == 0) {
      idx[0] = linear;
      break;
    }
    idx[d] = arith::RemUIOp::create(b, loc, linear, sizes[d]);
    linear = arith::DivUIOp::create(b, loc, linear, sizes[d]);
  }
  return idx;
}

std::pair<Value, Value>
mlir::ds::gpu_kernels::gridStrideStart(OpBuilder &b, Location loc,
                                       gpu::LaunchOp launch) {
  Value first = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, launch.getBlockIds().x,
                            launch.getBlockSize().x),
      launch.getThreadIds().x);
  Value stride = arith::MulIOp::create(b, loc, launch.getGridSize().x,
                                       launch.getBlockSize().x);
  return {first, stride};
}

int64_t mlir::ds::gpu_kernels::buildStridedLoop(
    OpBuilder &b, Location loc, Value lb, Value ub, Value stride,
    int64_t unroll, function_ref<void(OpBuilder &, Location, Value)> body) {
  // The loop one element at a time, which also shows what an iteration is.
  auto single =
      scf::ForOp::create(b, loc, lb, ub, stride, ValueRange{},
                         [&](OpBuilder &fb, Location l, Value i, ValueRange) {
                           body(fb, l, i);
                           scf::YieldOp::create(fb, l);
                         });
  Block &iteration = *single.getBody();
  if (unroll == 1 || !canUnrollElementwise(iteration))
    return 1;
  unroll = unrollFactor(iteration, unroll);
  if (unroll == 1)
    return 1;
  // Before it, groups i, i + stride, ..., i + (unroll - 1) * stride while
  // the last is in range (the bounds compare signed: a negative bound runs
  // no group). The loop carries where the single loop then starts: after
  // the last full group, or at `lb` when there is none.
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(single);
  Value span =
      arith::MulIOp::create(b, loc, stride, indexConstant(b, loc, unroll - 1));
  Value step = arith::AddIOp::create(b, loc, span, stride);
  Value end = arith::SubIOp::create(b, loc, ub, span);
  auto groups = scf::ForOp::create(b, loc, lb, end, step, ValueRange{lb});
  OpBuilder gb = OpBuilder::atBlockEnd(groups.getBody());
  Value i = groups.getInductionVar();
  for (int64_t k = 0; k < unroll; ++k) {
    body(gb, loc, i);
    if (k + 1 < unroll)
      i = arith::AddIOp::create(gb, loc, i, stride);
  }
  auto yield = scf::YieldOp::create(
      gb, loc,
      arith::AddIOp::create(gb, loc, groups.getInductionVar(), step)
          .getResult());
  // Every load of the group before any store.
  SmallVector<memref::StoreOp> stores(
      groups.getBody()->getOps<memref::StoreOp>());
  for (memref::StoreOp store : stores)
    store->moveBefore(yield);
  single.setLowerBound(groups.getResult(0));
  return unroll;
}

gpu::LaunchOp mlir::ds::gpu_kernels::buildGridStrideLaunch(
    OpBuilder &b, Location loc, Value total, const LaunchShape &shape,
    function_ref<void(OpBuilder &, Location, Value)> body, bool elementwise,
    int64_t unroll) {
  Value threads = indexConstant(b, loc, shape.blockSize);
  std::optional<int64_t> size = getConstantIntValue(total);
  bool oneBlock = elementwise && size && *size <= kOneBlockElements;
  auto gridFor = [&](int64_t perThread) -> Value {
    if (oneBlock)
      return indexConstant(b, loc, 1);
    Value perBlock = indexConstant(b, loc, shape.blockSize * perThread);
    return clampBlocks(b, loc,
                       arith::CeilDivUIOp::create(b, loc, total, perBlock),
                       shape.maxBlocks);
  };
  int64_t used = 1;
  gpu::LaunchOp launch = buildLaunch(
      b, loc, gridFor(1), threads, [&](OpBuilder &kb, gpu::LaunchOp launch) {
        Value first, stride;
        std::tie(first, stride) = gridStrideStart(kb, loc, launch);
        // A one-block launch (at most 16 elements a thread) joins the
        // one-block chains of a step's bookkeeping (ds-merge-gpu-launches),
        // where every group's addresses would add to one kernel's
        // registers: a GPT block's merged AdamW updates spilled.
        used = buildStridedLoop(kb, loc, first, total, stride,
                                oneBlock ? 1 : unroll, body);
      });
  // Elements in groups of `used` a thread: a grid that many times smaller
  // still gives each thread a group.
  if (used > 1 && !oneBlock) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(launch);
    Value unused = launch.getGridSizeX();
    launch.getGridSizeXMutable().assign(gridFor(used));
    if (Operation *def = unused.getDefiningOp(); def && def->use_empty())
      def->erase(); // the minui; canonicalization drops the rest
  }
  return launch;
}

bool mlir::ds::gpu_kernels::canUnrollElementwise(Block &body) {
  bool stored = false;
  for (Operation &op : body.without_terminator()) {
    if (isa<memref::LoadOp>(op)) {
      if (stored)
        return false;
      continue;
    }
    if (isa<memref::StoreOp>(op)) {
      stored = true;
      continue;
    }
    if (!isMemoryEffectFree(&op))
      return false;
  }
  return true;
}

int64_t mlir::ds::gpu_kernels::unrollFactor(Block &body, int64_t requested) {
  if (requested > 0)
    return requested;
  // The widest element moved, and the loads that differ from element to
  // element: a load at indices from outside the loop (a rank-0 scalar, a
  // row's maximum in a row's loop) is the same for every element, and LLVM
  // keeps one; an output's load the payload never reads is dead.
  auto variesInLoop = [&](Value v) {
    if (Operation *def = v.getDefiningOp())
      return body.findAncestorOpInBlock(*def) != nullptr;
    return cast<BlockArgument>(v).getOwner() == &body;
  };
  int64_t widest = 1, loads = 0, stores = 0;
  for (Operation &op : body.without_terminator()) {
    Type t;
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      t = load.getType();
      loads +=
          !load->use_empty() && llvm::any_of(load.getIndices(), variesInLoop);
    } else if (auto store = dyn_cast<memref::StoreOp>(op)) {
      t = store.getValueToStore().getType();
      ++stores;
    } else {
      continue;
    }
    widest = std::max<int64_t>(
        widest, t.isIntOrFloat() ? (t.getIntOrFloatBitWidth() + 7) / 8 : 8);
  }
  // 16 bytes of the widest element, at most kAccessesPerGroup loads and
  // stores a group: each holds a value and an address until the group's
  // stores, and more cost registers past what the occupancy they take
  // back repays (an AdamW update's 4 loads and 3 stores, at 4 elements,
  // used 80 registers and spilled). A power of two.
  int64_t byAccesses = kAccessesPerGroup / std::max<int64_t>(loads + stores, 1);
  return std::clamp<int64_t>(
      llvm::bit_floor(static_cast<uint64_t>(
          std::max<int64_t>(std::min(16 / widest, byAccesses), 1))),
      1, 8);
}

gpu::LaunchOp
mlir::ds::gpu_kernels::buildSingleThreadLaunch(OpBuilder &b,
                                               ArrayRef<Operation *> ops) {
  Location loc = ops.front()->getLoc();
  b.setInsertionPoint(ops.front());
  Value one = indexConstant(b, loc, 1);
  return buildLaunch(b, loc, one, one, [&](OpBuilder &kb, gpu::LaunchOp) {
    for (Operation *op : ops)
      op->moveBefore(kb.getInsertionBlock(), kb.getInsertionPoint());
  });
}
