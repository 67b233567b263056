//===- GenericVectors.cpp - A linalg generic's iteration in vectors -------===//
//
// See GenericVectors.h.
//
//===----------------------------------------------------------------------===//

#include "GenericVectors.h"
#include "MaskedReads.h"
#include "ReductionKernels.h"
#include "VectorKernels.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"

using namespace mlir;
using namespace mlir::ds::gpu_kernels;

namespace {

/// Whether `map` reads along `innermost` as a vector access does: its last
/// result is that dimension and no other result uses it. `uses`: whether
/// it uses the dimension at all.
bool vectorMap(AffineMap map, unsigned innermost, bool &uses) {
  uses = map.isFunctionOfDim(innermost);
  if (!uses || map.getNumResults() == 0)
    return false;
  auto last = dyn_cast<AffineDimExpr>(map.getResults().back());
  if (!last || last.getPosition() != innermost)
    return false;
  return llvm::none_of(map.getResults().drop_back(), [&](AffineExpr e) {
    return e.isFunctionOfDim(innermost);
  });
}

} // namespace

std::optional<GenericVectors> mlir::ds::gpu_kernels::planGenericVectors(
    linalg::GenericOp op, unsigned innermost, int64_t innermostSize,
    bool reduction, ArrayRef<OpOperand *> leftToCaller) {
  for (Operation &inner : op.getBody()->without_terminator())
    if (!isMemoryEffectFree(&inner))
      return std::nullopt;
  GenericVectors plan;
  plan.op = op;
  plan.innermost = innermost;
  plan.isVector.assign(op->getNumOperands(), false);
  int64_t widest = 1, accesses = 0;
  for (OpOperand &operand : op->getOpOperands()) {
    bool isInit = op.isDpsInit(&operand);
    if ((isInit && reduction) || llvm::is_contained(leftToCaller, &operand))
      continue; // the accumulator, or an output the caller stores
    BlockArgument arg = op.getMatchingBlockArgument(&operand);
    if (!isInit && arg.use_empty())
      continue;
    auto type = dyn_cast<MemRefType>(operand.get().getType());
    if (!type) {
      if (isInit)
        return std::nullopt;
      continue; // a scalar operand
    }
    bool uses = false;
    bool vector =
        vectorMap(op.getMatchingIndexingMap(&operand), innermost, uses);
    if (!uses && !isInit)
      continue; // one element for all lanes
    std::optional<int64_t> bytes = vectorElementBytes(type.getElementType());
    if (!vector || !bytes)
      return std::nullopt;
    widest = std::max(widest, *bytes);
    ++accesses;
    plan.isVector[operand.getOperandNumber()] = true;
    if (!llvm::is_contained(plan.buffers, operand.get()))
      plan.buffers.push_back(operand.get());
  }
  if (plan.buffers.empty())
    return std::nullopt;
  plan.width = chooseVectorWidth(widest, accesses, innermostSize, plan.buffers);
  if (plan.width == 0)
    return std::nullopt;
  return plan;
}

Value mlir::ds::gpu_kernels::storeVectorOutput(OpBuilder &b, Location loc,
                                               const GenericVectors &plan,
                                               OpOperand &init,
                                               ArrayRef<Value> lanes,
                                               ArrayRef<Value> ivs) {
  SmallVector<Value> idx = applyMap(
      b, loc, linalg::GenericOp(plan.op).getMatchingIndexingMap(&init), ivs);
  return storeLanes(b, loc, lanes, init.get(), idx);
}

/// emitGenericVector and emitGenericVectorLanes: for a reduction, `accs`
/// holds one accumulator that every lane combines into in turn, or one per
/// lane; it is updated in place.
static void emitVectorIteration(OpBuilder &b, Location loc,
                                const GenericVectors &plan, ArrayRef<Value> ivs,
                                Reduction *red, MutableArrayRef<Value> accs,
                                ArrayRef<GivenVector> given,
                                SmallVectorImpl<Value> *loaded,
                                SmallVectorImpl<SmallVector<Value>> *yields) {
  linalg::GenericOp op = plan.op;
  auto vectorOf = [&](Type element) {
    return VectorType::get({plan.width}, element);
  };
  auto alignment = [&](Type element) {
    return vectorAlignment(plan.width, element);
  };
  // What each block argument is: a vector (one lane each) or one value.
  llvm::MapVector<BlockArgument, Value> vectors; // in operand order
  IRMapping shared;
  for (OpOperand &operand : op->getOpOperands()) {
    BlockArgument arg = op.getMatchingBlockArgument(&operand);
    if ((red && op.isDpsInit(&operand)) || arg.use_empty())
      continue;
    Value v = operand.get();
    if (!isa<MemRefType>(v.getType())) {
      shared.map(arg, v);
      continue;
    }
    bool isVector = plan.isVector[operand.getOperandNumber()];
    const GivenVector *mine = llvm::find_if(
        given, [&](const GivenVector &g) { return g.operand == &operand; });
    if (isVector && mine != given.end()) {
      vectors[arg] = mine->vector;
      continue;
    }
    SmallVector<Value> idx =
        applyMap(b, loc, op.getMatchingIndexingMap(&operand), ivs);
    auto load = [&](OpBuilder &lb, Location l) -> Value {
      if (isVector)
        return vector::LoadOp::create(lb, l, vectorOf(arg.getType()), v, idx,
                                      /*nontemporal=*/false,
                                      alignment(arg.getType()));
      return memref::LoadOp::create(lb, l, v, idx);
    };
    // Skipped where no lane uses it, unless another op takes what this
    // iteration loads.
    Type type = isVector ? Type(vectorOf(arg.getType())) : arg.getType();
    Value value = loaded ? load(b, loc)
                         : loadIfUsed(b, loc, operand, ivs, type, load,
                                      plan.innermost, plan.width);
    if (isVector)
      vectors[arg] = value;
    else
      shared.map(arg, value);
  }
  if (loaded) {
    loaded->assign(op->getNumOperands(), Value());
    for (auto [arg, vector] : vectors)
      (*loaded)[op.getMatchingOpOperand(arg)->getOperandNumber()] = vector;
  }
  auto yield = cast<linalg::YieldOp>(op.getBody()->getTerminator());
  SmallVector<SmallVector<Value>> lanes(yield.getNumOperands());
  for (int64_t k = 0; k < plan.width; ++k) {
    IRMapping map = shared;
    for (auto [arg, vector] : vectors)
      map.map(arg,
              vector::ExtractOp::create(b, loc, vector, ArrayRef<int64_t>{k}));
    Value &acc = accs.size() == 1 ? accs[0] : accs[k];
    if (red)
      map.map(red->outArg, acc);
    SmallVector<Value> laneIvs(ivs);
    laneIvs[plan.innermost] = arith::AddIOp::create(b, loc, ivs[plan.innermost],
                                                    indexConstant(b, loc, k));
    for (Operation &inner : op.getBody()->without_terminator()) {
      if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
        map.map(index.getResult(), laneIvs[index.getDim()]);
        continue;
      }
      b.clone(inner, map);
    }
    if (red) {
      acc = map.lookup(red->comb->getResult(0));
      continue;
    }
    for (auto [i, v] : llvm::enumerate(yield.getOperands()))
      lanes[i].push_back(map.lookupOrDefault(v));
  }
  if (red)
    return;
  if (yields) {
    yields->assign(lanes.begin(), lanes.end());
    return;
  }
  for (auto [init, values] : llvm::zip(op.getDpsInitsMutable(), lanes))
    storeVectorOutput(b, loc, plan, init, values, ivs);
}

Value mlir::ds::gpu_kernels::emitGenericVector(
    OpBuilder &b, Location loc, const GenericVectors &plan, ArrayRef<Value> ivs,
    Reduction *red, Value acc, ArrayRef<GivenVector> given,
    SmallVectorImpl<Value> *loaded,
    SmallVectorImpl<SmallVector<Value>> *yields) {
  Value accs[] = {acc};
  emitVectorIteration(b, loc, plan, ivs, red, accs, given, loaded, yields);
  return red ? accs[0] : Value();
}

SmallVector<Value> mlir::ds::gpu_kernels::emitGenericVectorLanes(
    OpBuilder &b, Location loc, const GenericVectors &plan, ArrayRef<Value> ivs,
    Reduction &red, ArrayRef<Value> accs, ArrayRef<GivenVector> given,
    SmallVectorImpl<Value> *loaded) {
  assert(static_cast<int64_t>(accs.size()) == plan.width &&
         "an accumulator per lane");
  SmallVector<Value> lanes(accs);
  emitVectorIteration(b, loc, plan, ivs, &red, lanes, given, loaded, nullptr);
  return lanes;
}

Value mlir::ds::gpu_kernels::buffersAligned(OpBuilder &b, Location loc,
                                            ArrayRef<Value> buffers) {
  Value low = indexConstant(b, loc, 0);
  for (Value buffer : buffers)
    low = arith::OrIOp::create(
        b, loc, low,
        memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer));
  low = arith::AndIOp::create(b, loc, low,
                              indexConstant(b, loc, kVectorBytes - 1));
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, low,
                               indexConstant(b, loc, 0));
}

std::optional<ReductionVectors>
mlir::ds::gpu_kernels::planReductionVectors(Reduction &red) {
  SmallVector<int64_t> ranges = red.op.getStaticLoopRanges();
  unsigned innermost = red.redDims.back();
  if (red.numRedStatic <= 0 || ShapedType::isDynamic(ranges[innermost]))
    return std::nullopt;
  std::optional<GenericVectors> reduction = planGenericVectors(
      red.op, innermost, ranges[innermost], /*reduction=*/true);
  if (!reduction)
    return std::nullopt;
  ReductionVectors plan{*reduction, std::nullopt, reduction->buffers};
  if (!red.sibling)
    return plan;
  SmallVector<int64_t> siblingRanges = red.sibling.getStaticLoopRanges();
  unsigned siblingInnermost =
      red.shared->sameLoops ? innermost : siblingRanges.size() - 1;
  plan.sibling =
      planGenericVectors(red.sibling, siblingInnermost,
                         siblingRanges[siblingInnermost], /*reduction=*/false);
  if (!plan.sibling)
    return std::nullopt;
  // Narrowing keeps a plan valid: a power of two that divides the extent
  // and the layouts still does when halved.
  int64_t width = std::min(plan.reduction.width, plan.sibling->width);
  plan.reduction.width = plan.sibling->width = width;
  appendBuffers(plan.buffers, plan.sibling->buffers);
  return plan;
}

/// Pairs of an input of `from` and one of `to` that read the same buffer
/// through the same map.
static SmallVector<std::pair<OpOperand *, OpOperand *>>
sameReads(linalg::GenericOp from, linalg::GenericOp to) {
  SmallVector<std::pair<OpOperand *, OpOperand *>> pairs;
  for (OpOperand *mine : from.getDpsInputOperands())
    for (OpOperand *theirs : to.getDpsInputOperands())
      if (isa<MemRefType>(mine->get().getType()) &&
          theirs->get() == mine->get() &&
          to.getMatchingIndexingMap(theirs) ==
              from.getMatchingIndexingMap(mine))
        pairs.push_back({mine, theirs});
  return pairs;
}

SmallVector<GivenVector> mlir::ds::gpu_kernels::vectorsReadBy(
    linalg::GenericOp from, ArrayRef<Value> loaded, linalg::GenericOp to) {
  SmallVector<GivenVector> given;
  for (const auto &pair : sameReads(from, to)) {
    OpOperand *theirs = pair.second;
    Value vector = loaded[pair.first->getOperandNumber()];
    if (vector && llvm::none_of(given, [&](const GivenVector &g) {
          return g.operand == theirs;
        }))
      given.push_back({theirs, vector});
  }
  return given;
}

SmallVector<GivenVector>
mlir::ds::gpu_kernels::sharedVectors(const Reduction &red,
                                     ArrayRef<Value> loaded) {
  if (red.shared->sameLoops)
    return vectorsReadBy(red.op, loaded, red.sibling);
  Value vector = loaded[red.shared->reduction->getOperandNumber()];
  if (!vector)
    return {};
  return {{red.shared->elementwise, vector}};
}

void mlir::ds::gpu_kernels::mapElementsReadBy(linalg::GenericOp from,
                                              const IRMapping &fromMap,
                                              linalg::GenericOp to,
                                              IRMapping &toMap) {
  for (auto [mine, theirs] : sameReads(from, to)) {
    BlockArgument arg = from.getMatchingBlockArgument(mine);
    if (fromMap.contains(arg))
      toMap.map(to.getMatchingBlockArgument(theirs), fromMap.lookup(arg));
  }
}

void mlir::ds::gpu_kernels::appendBuffers(SmallVectorImpl<Value> &buffers,
                                          ArrayRef<Value> more) {
  for (Value v : more)
    if (!llvm::is_contained(buffers, v))
      buffers.push_back(v);
}

Value mlir::ds::gpu_kernels::foldVectorsOrElements(
    OpBuilder &b, Location loc, Reduction &red, const ReductionVectors &plan,
    ArrayRef<Value> parIdx, Value first, Value step, Value aligned) {
  int64_t width = plan.reduction.width, numRed = red.numRedStatic;
  Value init = arith::ConstantOp::create(b, loc, red.identity);
  Value zero = indexConstant(b, loc, 0);
  Value vectors = arith::SelectOp::create(
      b, loc, aligned, indexConstant(b, loc, numRed / width), zero);
  SmallVector<Value> siblingSizes;
  if (plan.sibling)
    for (int64_t size : red.sibling.getStaticLoopRanges())
      siblingSizes.push_back(indexConstant(b, loc, size));
  auto loop = scf::ForOp::create(
      b, loc, first, vectors, step, ValueRange{init},
      [&](OpBuilder &rb, Location l, Value v, ValueRange acc) {
        Value c = arith::MulIOp::create(rb, l, v, indexConstant(rb, l, width));
        SmallVector<Value> ivs =
            red.loopIndices(parIdx, delinearize(rb, l, c, red.redSizes));
        // The sibling takes the shared tensor's vector as loaded (so the
        // reduction's mask must not skip it); without one, nothing is
        // shared.
        SmallVector<Value> loaded;
        Value next = emitGenericVector(rb, l, plan.reduction, ivs, &red, acc[0],
                                       {}, plan.sibling ? &loaded : nullptr);
        if (plan.sibling) {
          // The sibling's lanes are the reduction's elements c, c + 1, ...:
          // the shared tensor's vector is the one just loaded.
          SmallVector<Value> siblingIvs =
              red.shared->sameLoops ? ivs : delinearize(rb, l, c, siblingSizes);
          emitGenericVector(rb, l, *plan.sibling, siblingIvs, nullptr, {},
                            sharedVectors(red, loaded));
        }
        scf::YieldOp::create(rb, l, next);
      });
  Value elements = arith::SelectOp::create(b, loc, aligned, zero,
                                           indexConstant(b, loc, numRed));
  return red.foldRange(b, loc, parIdx, first, elements, step,
                       loop.getResult(0));
}
