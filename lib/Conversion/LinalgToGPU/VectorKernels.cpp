//===- VectorKernels.cpp - Elementwise kernels on 16-byte vectors ---------===//
//
// See VectorKernels.h. The body of the host loop is cloned per element
// with its loads and stores redirected: to lanes of vector loads and
// stores in the vector loop, to the 1-D views in the scalar loops. No
// delinearization is left: a 1-D view's index is the loop's own.
//
//===----------------------------------------------------------------------===//

#include "VectorKernels.h"
#include "GenericVectors.h"
#include "KernelUtils.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <tuple>

using namespace mlir;
using namespace mlir::ds::gpu_kernels;

namespace {

Value accessedBuffer(Operation *op) {
  if (auto load = dyn_cast<memref::LoadOp>(op))
    return load.getMemRef();
  return cast<memref::StoreOp>(op).getMemRef();
}

ValueRange accessIndices(Operation *op) {
  if (auto load = dyn_cast<memref::LoadOp>(op))
    return load.getIndices();
  return cast<memref::StoreOp>(op).getIndices();
}

/// How a qualifying loop's kernel reads and writes.
struct VectorPlan {
  SmallVector<int64_t> counts;
  int64_t total = 1;
  /// Elements a vector (a power of two, at least 2).
  int64_t width = 0;
  /// The loads and stores indexed by the innermost induction variable.
  llvm::SmallPtrSet<Operation *, 8> vectorAccesses;
  /// The ops whose results differ between a vector's lanes: the vector
  /// loads and what depends on them.
  llvm::SmallPtrSet<Operation *, 16> perLane;
  /// The buffers of the vector accesses, each once.
  SmallVector<Value> buffers;
};

std::optional<VectorPlan> planVectorLoop(scf::ParallelOp p) {
  VectorPlan plan;
  for (auto [lb, ub, step] :
       llvm::zip(p.getLowerBound(), p.getUpperBound(), p.getStep())) {
    std::optional<int64_t> l = getConstantIntValue(lb);
    std::optional<int64_t> u = getConstantIntValue(ub);
    std::optional<int64_t> s = getConstantIntValue(step);
    if (!l || !u || !s || *l != 0 || *s != 1 || *u < 0)
      return std::nullopt;
    plan.counts.push_back(*u);
    plan.total *= *u;
  }
  Block &body = *p.getBody();
  if (plan.total <= kOneBlockElements || !canUnrollElementwise(body))
    return std::nullopt;
  SmallVector<Value> ivs = llvm::to_vector(p.getInductionVars());
  Value innermost = ivs.back();
  for (Value iv : ivs)
    for (Operation *user : iv.getUsers())
      if (!isa<memref::LoadOp, memref::StoreOp>(user) ||
          user->getBlock() != &body)
        return std::nullopt;
  auto varies = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return def && plan.perLane.contains(def);
  };
  int64_t widest = 1, accesses = 0;
  for (Operation &op : body.without_terminator()) {
    if (!isa<memref::LoadOp, memref::StoreOp>(op)) {
      bool lane = false;
      op.walk([&](Operation *nested) {
        lane |= llvm::any_of(nested->getOperands(), varies);
      });
      if (lane)
        plan.perLane.insert(&op);
      continue;
    }
    ValueRange indices = accessIndices(&op);
    // Indices of a vector's lanes: the same but for the innermost.
    if (llvm::any_of(indices, varies))
      return std::nullopt;
    bool isVector = !indices.empty() && indices.back() == innermost;
    if (llvm::is_contained(indices.drop_back(isVector ? 1 : 0), innermost))
      return std::nullopt;
    if (!isVector) {
      if (isa<memref::StoreOp>(op))
        return std::nullopt;
      continue; // one element for every lane
    }
    Type element = isa<memref::LoadOp>(op)
                       ? op.getResult(0).getType()
                       : cast<memref::StoreOp>(op).getValueToStore().getType();
    std::optional<int64_t> bytes = vectorElementBytes(element);
    if (!bytes)
      return std::nullopt;
    widest = std::max(widest, *bytes);
    accesses += isa<memref::StoreOp>(op) || !op.use_empty();
    plan.vectorAccesses.insert(&op);
    if (isa<memref::LoadOp>(op))
      plan.perLane.insert(&op);
    Value buffer = accessedBuffer(&op);
    if (!llvm::is_contained(plan.buffers, buffer))
      plan.buffers.push_back(buffer);
  }
  if (body.getOps<memref::StoreOp>().empty())
    return std::nullopt;
  plan.width =
      chooseVectorWidth(widest, accesses, plan.counts.back(), plan.buffers);
  if (plan.width == 0)
    return std::nullopt;
  return plan;
}

/// One vector of `body` at the indices `at` of the induction variables
/// `ivs` (the innermost a multiple of plan.width): the ops shared by the
/// lanes once, the vector loads, the body's per-lane ops once per lane,
/// the vector stores.
void cloneVector(OpBuilder &b, Location loc, Block &body,
                 const VectorPlan &plan, ArrayRef<Value> ivs,
                 ArrayRef<Value> at) {
  auto vectorOf = [&](Type element) {
    return VectorType::get({plan.width}, element);
  };
  auto alignment = [&](Type element) {
    return vectorAlignment(plan.width, element);
  };
  IRMapping shared;
  for (auto [iv, index] : llvm::zip(ivs, at))
    shared.map(iv, index);
  auto indices = [&](Operation *op) {
    return llvm::map_to_vector(
        accessIndices(op), [&](Value v) { return shared.lookupOrDefault(v); });
  };
  DenseMap<Operation *, Value> loaded;
  SmallVector<memref::StoreOp> stores;
  for (Operation &op : body.without_terminator()) {
    if (auto store = dyn_cast<memref::StoreOp>(op)) {
      stores.push_back(store);
    } else if (!plan.vectorAccesses.contains(&op)) {
      if (!plan.perLane.contains(&op))
        b.clone(op, shared);
    } else if (!op.use_empty()) {
      Type element = op.getResult(0).getType();
      loaded[&op] = vector::LoadOp::create(
          b, loc, vectorOf(element), accessedBuffer(&op), indices(&op),
          /*nontemporal=*/false, alignment(element));
    }
  }
  DenseMap<Operation *, SmallVector<Value>> lanes;
  for (int64_t k = 0; k < plan.width; ++k) {
    IRMapping map = shared;
    for (Operation &op : body.without_terminator()) {
      if (auto store = dyn_cast<memref::StoreOp>(op)) {
        lanes[&op].push_back(map.lookupOrDefault(store.getValueToStore()));
      } else if (loaded.count(&op)) {
        map.map(op.getResult(0),
                vector::ExtractOp::create(b, loc, loaded.lookup(&op),
                                          ArrayRef<int64_t>{k}));
      } else if (plan.perLane.contains(&op)) {
        b.clone(op, map);
      }
    }
  }
  for (memref::StoreOp store : stores)
    storeLanes(b, loc, lanes[store], store.getMemRef(), indices(store));
}

} // namespace

std::optional<int64_t> mlir::ds::gpu_kernels::vectorElementBytes(Type t) {
  if (!t.isIntOrFloat())
    return std::nullopt;
  unsigned bits = t.getIntOrFloatBitWidth();
  if (bits != 8 && bits != 16 && bits != 32 && bits != 64)
    return std::nullopt;
  return bits / 8;
}

bool mlir::ds::gpu_kernels::holdsVectors(Value buffer, int64_t width) {
  auto type = cast<MemRefType>(buffer.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  if (type.getRank() == 0 ||
      failed(type.getStridesAndOffset(strides, offset)) ||
      ShapedType::isDynamic(offset) || strides.back() != 1 ||
      offset % width != 0)
    return false;
  // The outer dimensions step by whole vectors (a unit one does not step).
  for (int64_t d = 0; d + 1 < type.getRank(); ++d)
    if (type.getDimSize(d) != 1 &&
        (ShapedType::isDynamic(strides[d]) || strides[d] % width != 0))
      return false;
  return true;
}

int64_t mlir::ds::gpu_kernels::chooseVectorWidth(int64_t widest,
                                                 int64_t accesses,
                                                 int64_t innermostSize,
                                                 ArrayRef<Value> buffers) {
  auto fits = [&](int64_t width) {
    return accesses * width * widest <= kAccessesPerGroup * kVectorBytes &&
           innermostSize % width == 0 && llvm::all_of(buffers, [&](Value v) {
             return holdsVectors(v, width);
           });
  };
  int64_t width = kVectorBytes / widest;
  while (width >= 2 && !fits(width))
    width /= 2;
  return width >= 2 ? width : 0;
}

llvm::MaybeAlign mlir::ds::gpu_kernels::vectorAlignment(int64_t width,
                                                        Type element) {
  return llvm::MaybeAlign(width * *vectorElementBytes(element));
}

Value mlir::ds::gpu_kernels::storeLanes(OpBuilder &b, Location loc,
                                        ArrayRef<Value> lanes, Value buffer,
                                        ValueRange indices) {
  if (lanes.size() == 1) {
    memref::StoreOp::create(b, loc, lanes.front(), buffer, indices);
    return lanes.front();
  }
  Type element = lanes.front().getType();
  int64_t width = lanes.size();
  Value vector = vector::FromElementsOp::create(
      b, loc, VectorType::get({width}, element), lanes);
  vector::StoreOp::create(b, loc, vector, buffer, indices,
                          /*nontemporal=*/false,
                          vectorAlignment(width, element));
  return vector;
}

gpu::LaunchOp mlir::ds::gpu_kernels::buildVectorElementwiseLaunch(
    OpBuilder &b, scf::ParallelOp p, const LaunchShape &shape,
    function_ref<void(OpBuilder &, Location, Value)> element) {
  // linalg's loops index through affine.apply of identity maps.
  for (auto apply :
       llvm::make_early_inc_range(p.getBody()->getOps<affine::AffineApplyOp>()))
    if (apply.getAffineMap().isIdentity()) {
      apply.replaceAllUsesWith(apply.getMapOperands().front());
      apply.erase();
    }
  std::optional<VectorPlan> plan = planVectorLoop(p);
  if (!plan)
    return {};
  Location loc = p.getLoc();
  int64_t vectors = plan->total / plan->width;
  int64_t blocks = std::clamp<int64_t>(
      (vectors + shape.blockSize - 1) / shape.blockSize, 1, shape.maxBlocks);
  Block &body = *p.getBody();
  SmallVector<Value> ivs = llvm::to_vector(p.getInductionVars());
  return buildLaunch(
      b, loc, indexConstant(b, loc, blocks),
      indexConstant(b, loc, shape.blockSize),
      [&](OpBuilder &kb, gpu::LaunchOp launch) {
        Value first, stride;
        std::tie(first, stride) = gridStrideStart(kb, loc, launch);
        // Every buffer's address a multiple of 16 (the static offsets and
        // strides are whole vectors): the same answer in every thread.
        Value aligned = buffersAligned(kb, loc, plan->buffers);
        scf::IfOp::create(
            kb, loc, aligned,
            [&](OpBuilder &tb, Location l) {
              // Vector g of the space whose innermost extent is in vectors.
              SmallVector<Value> extents =
                  llvm::map_to_vector(plan->counts, [&](int64_t c) {
                    return indexConstant(tb, l, c);
                  });
              extents.back() =
                  indexConstant(tb, l, plan->counts.back() / plan->width);
              scf::ForOp::create(
                  tb, l, first, indexConstant(tb, l, vectors), stride,
                  ValueRange{},
                  [&](OpBuilder &fb, Location fl, Value g, ValueRange) {
                    SmallVector<Value> at = delinearize(fb, fl, g, extents);
                    at.back() = arith::MulIOp::create(
                        fb, fl, at.back(), indexConstant(fb, fl, plan->width));
                    cloneVector(fb, fl, body, *plan, ivs, at);
                    scf::YieldOp::create(fb, fl);
                  });
              scf::YieldOp::create(tb, l);
            },
            [&](OpBuilder &eb, Location l) {
              buildStridedLoop(eb, l, first, indexConstant(eb, l, plan->total),
                               stride, shape.unroll, element);
              scf::YieldOp::create(eb, l);
            });
      });
}
