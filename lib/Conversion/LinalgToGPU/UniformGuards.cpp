//===- UniformGuards.cpp - Kernels that usually write nothing -------------===//
//
// See UniformGuards.h.
//
//===----------------------------------------------------------------------===//

#include "UniformGuards.h"

#include "ds/Dialect/DS/IR/DSDialect.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::gpu_kernels;

namespace {

/// The allocation `v` is a view of, or null when it is anything else (an
/// argument, which may alias any other buffer).
Operation *allocationOf(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  Operation *def = v.getDefiningOp();
  return def && isa<memref::AllocOp, gpu::AllocOp>(def) ? def : nullptr;
}

/// Collects into `slice` the ops of `body` that `v` depends on; false when
/// one of them may differ between iterations or between threads: a loop
/// index, a load at an index computed in the loop or of a buffer that may
/// be `written`, an op with memory effects or regions.
bool collectUniformSlice(Value v, Block &body, Operation *written,
                         llvm::SetVector<Operation *> &slice) {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return arg.getOwner() != &body;
  Operation *def = v.getDefiningOp();
  if (def->getBlock() != &body || slice.contains(def))
    return true;
  if (def->getNumRegions() != 0)
    return false;
  if (auto load = dyn_cast<memref::LoadOp>(def)) {
    Operation *from = allocationOf(load.getMemRef());
    if (!from || from == written)
      return false;
    for (Value index : load.getIndices()) {
      auto arg = dyn_cast<BlockArgument>(index);
      if (index.getParentBlock() == &body || (arg && arg.getOwner() == &body))
        return false;
    }
  } else if (!isMemoryEffectFree(def)) {
    return false;
  }
  for (Value operand : def->getOperands())
    if (!collectUniformSlice(operand, body, written, slice))
      return false;
  slice.insert(def);
  return true;
}

/// Whether two indices are the same value: one SSA value, or the same
/// affine.apply of the same operands (the loops' lowering applies the
/// indexing maps for each access apart).
bool sameIndex(Value a, Value b) {
  if (a == b)
    return true;
  auto applyA = a.getDefiningOp<affine::AffineApplyOp>();
  auto applyB = b.getDefiningOp<affine::AffineApplyOp>();
  return applyA && applyB && applyA.getAffineMap() == applyB.getAffineMap() &&
         llvm::equal(applyA.getMapOperands(), applyB.getMapOperands());
}

} // namespace

std::optional<UniformGuard>
mlir::ds::gpu_kernels::uniformGuard(scf::ParallelOp loop) {
  Block &body = *loop.getBody();
  memref::StoreOp store;
  for (Operation &op : body.without_terminator()) {
    if (op.getNumRegions() != 0)
      return std::nullopt;
    if (isa<memref::LoadOp>(op) || isMemoryEffectFree(&op))
      continue;
    if (store || !isa<memref::StoreOp>(op))
      return std::nullopt;
    store = cast<memref::StoreOp>(op);
  }
  if (!store)
    return std::nullopt;
  auto select = store.getValue().getDefiningOp<arith::SelectOp>();
  if (!select)
    return std::nullopt;
  // The arm that is the stored element itself, loaded in this iteration.
  auto isOwnElement = [&](Value v) {
    auto load = v.getDefiningOp<memref::LoadOp>();
    return load && load->getBlock() == &body &&
           load.getMemRef() == store.getMemRef() &&
           llvm::equal(load.getIndices(), store.getIndices(), sameIndex);
  };
  UniformGuard guard;
  if (isOwnElement(select.getFalseValue()))
    guard.writesWhen = true;
  else if (isOwnElement(select.getTrueValue()))
    guard.writesWhen = false;
  else
    return std::nullopt;
  Operation *written = allocationOf(store.getMemRef());
  llvm::SetVector<Operation *> slice;
  if (!written ||
      !collectUniformSlice(select.getCondition(), body, written, slice))
    return std::nullopt;
  guard.slice.assign(slice.begin(), slice.end());
  llvm::sort(guard.slice,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  guard.condition = select.getCondition();
  guard.buffer = store.getMemRef();
  return guard;
}

void mlir::ds::gpu_kernels::guardLaunch(gpu::LaunchOp launch,
                                        const UniformGuard &guard) {
  Block &body = launch.getBody().front();
  SmallVector<Operation *> work;
  for (Operation &op : body.without_terminator())
    work.push_back(&op);
  OpBuilder b(&body, body.begin());
  Location loc = launch.getLoc();
  IRMapping map;
  for (Operation *op : guard.slice)
    b.clone(*op, map);
  Value condition = map.lookupOrDefault(guard.condition);
  if (!guard.writesWhen)
    condition = arith::XOrIOp::create(
        b, loc, condition, arith::ConstantIntOp::create(b, loc, 1, 1));
  auto ifOp = scf::IfOp::create(b, loc, condition, /*withElseRegion=*/false);
  Block *then = ifOp.thenBlock();
  for (Operation *op : work)
    op->moveBefore(then->getTerminator());
  // What the report counts is the finite bucket's kernel: the probe read.
  Builder attrs(launch.getContext());
  Operation *written = allocationOf(guard.buffer);
  then->walk([&](MemoryEffectOpInterface op) {
    SmallVector<MemoryEffects::EffectInstance> effects;
    op.getEffects(effects);
    for (const MemoryEffects::EffectInstance &e : effects) {
      if (!e.getValue() || allocationOf(e.getValue()) != written)
        continue;
      if (isa<MemoryEffects::Read>(e.getEffect()))
        op->setAttr(DSDialect::kReadFractionAttrName, attrs.getF64FloatAttr(0));
      if (isa<MemoryEffects::Write>(e.getEffect()))
        op->setAttr(DSDialect::kWriteFractionAttrName,
                    attrs.getF64FloatAttr(0));
    }
  });
}
