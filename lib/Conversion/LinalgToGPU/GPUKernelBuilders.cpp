//===- GPUKernelBuilders.cpp - gpu.launch shapes of the GPU path ----------===//
//
// See GPUKernelBuilders.h. Launch sizes are computed on the host from the
// (usually constant) iteration space, so canonicalization folds them to
// constants for static shapes; kernels see their bounds as captured values.
//
//===----------------------------------------------------------------------===//

#include "GPUKernelBuilders.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>

using namespace mlir;
using namespace mlir::ds::gpu_kernels;

namespace {

Value indexConstant(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

Value product(OpBuilder &b, Location loc, ArrayRef<Value> values) {
  Value p = indexConstant(b, loc, 1);
  for (Value v : values)
    p = arith::MulIOp::create(b, loc, p, v);
  return p;
}

/// Builds a launch of `blocks` x `threads` whose body `body` fills.
gpu::LaunchOp buildLaunch(OpBuilder &b, Location loc, Value blocks,
                          Value threads,
                          function_ref<void(OpBuilder &, gpu::LaunchOp)> body) {
  Value one = indexConstant(b, loc, 1);
  auto launch =
      gpu::LaunchOp::create(b, loc, blocks, one, one, threads, one, one);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&launch.getBody().front());
  body(b, launch);
  gpu::TerminatorOp::create(b, loc);
  return launch;
}

/// min(max(n, 1), cap): a launch needs one block even for an empty space
/// (whose loops then run no iteration).
Value clampBlocks(OpBuilder &b, Location loc, Value n, int64_t cap) {
  Value one = indexConstant(b, loc, 1);
  Value atLeastOne = arith::MaxUIOp::create(b, loc, n, one);
  return arith::MinUIOp::create(b, loc, atLeastOne, indexConstant(b, loc, cap));
}

/// The values of `map`'s results at `ivs`.
SmallVector<Value> applyMap(OpBuilder &b, Location loc, AffineMap map,
                            ArrayRef<Value> ivs) {
  SmallVector<Value> out;
  for (AffineExpr e : map.getResults()) {
    if (auto d = dyn_cast<AffineDimExpr>(e))
      out.push_back(ivs[d.getPosition()]);
    else if (auto c = dyn_cast<AffineConstantExpr>(e))
      out.push_back(indexConstant(b, loc, c.getValue()));
    else
      out.push_back(affine::AffineApplyOp::create(
          b, loc, AffineMap::get(map.getNumDims(), 0, e), ivs));
  }
  return out;
}

/// The gpu.all_reduce kind of a combiner op of element type `t`.
std::optional<gpu::AllReduceOperation> combinerKind(Operation *op) {
  using K = gpu::AllReduceOperation;
  return llvm::TypeSwitch<Operation *, std::optional<K>>(op)
      .Case<arith::AddFOp, arith::AddIOp>([](auto) { return K::ADD; })
      .Case<arith::MulFOp, arith::MulIOp>([](auto) { return K::MUL; })
      .Case<arith::MaximumFOp>([](auto) { return K::MAXIMUMF; })
      .Case<arith::MinimumFOp>([](auto) { return K::MINIMUMF; })
      .Case<arith::MaxNumFOp>([](auto) { return K::MAXNUMF; })
      .Case<arith::MinNumFOp>([](auto) { return K::MINNUMF; })
      .Case<arith::MaxSIOp>([](auto) { return K::MAXSI; })
      .Case<arith::MinSIOp>([](auto) { return K::MINSI; })
      .Case<arith::MaxUIOp>([](auto) { return K::MAXUI; })
      .Case<arith::MinUIOp>([](auto) { return K::MINUI; })
      .Case<arith::OrIOp>([](auto) { return K::OR; })
      .Case<arith::AndIOp>([](auto) { return K::AND; })
      .Case<arith::XOrIOp>([](auto) { return K::XOR; })
      .Default([](Operation *) { return std::nullopt; });
}

/// The neutral element of `kind` in `t`: every thread starts from it, so a
/// thread with no element contributes nothing.
TypedAttr identityOf(gpu::AllReduceOperation kind, Type t) {
  using K = gpu::AllReduceOperation;
  Builder b(t.getContext());
  if (auto ft = dyn_cast<FloatType>(t)) {
    const llvm::fltSemantics &sem = ft.getFloatSemantics();
    switch (kind) {
    case K::ADD:
      return b.getFloatAttr(t, 0.0);
    case K::MUL:
      return b.getFloatAttr(t, 1.0);
    case K::MAXIMUMF:
    case K::MAXNUMF:
      return b.getFloatAttr(t, APFloat::getInf(sem, /*Negative=*/true));
    case K::MINIMUMF:
    case K::MINNUMF:
      return b.getFloatAttr(t, APFloat::getInf(sem, /*Negative=*/false));
    default:
      return {};
    }
  }
  unsigned w = t.getIntOrFloatBitWidth();
  switch (kind) {
  case K::ADD:
  case K::OR:
  case K::XOR:
  case K::MAXUI:
    return b.getIntegerAttr(t, 0);
  case K::MUL:
    return b.getIntegerAttr(t, 1);
  case K::AND:
  case K::MINUI:
    return b.getIntegerAttr(t, APInt::getAllOnes(w));
  case K::MAXSI:
    return b.getIntegerAttr(t, APInt::getSignedMinValue(w));
  case K::MINSI:
    return b.getIntegerAttr(t, APInt::getSignedMaxValue(w));
  default:
    return {};
  }
}

/// The combiner of a reduction generic: the op the body yields, which must
/// read the output's block argument, and only it.
Operation *combinerOf(linalg::GenericOp op) {
  Block &body = *op.getBody();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (yield.getNumOperands() != 1)
    return nullptr;
  Operation *comb = yield.getOperand(0).getDefiningOp();
  BlockArgument out = body.getArgument(op.getNumDpsInputs());
  if (!comb || comb->getBlock() != &body || comb->getNumOperands() != 2 ||
      !out.hasOneUse() || out.use_begin()->getOwner() != comb ||
      comb->getOperand(0) == comb->getOperand(1))
    return nullptr;
  return comb;
}

} // namespace

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

gpu::LaunchOp mlir::ds::gpu_kernels::buildGridStrideLaunch(
    OpBuilder &b, Location loc, Value total, const LaunchShape &shape,
    function_ref<void(OpBuilder &, Location, Value)> body) {
  Value threads = indexConstant(b, loc, shape.blockSize);
  Value blocks =
      clampBlocks(b, loc, arith::CeilDivUIOp::create(b, loc, total, threads),
                  shape.maxBlocks);
  return buildLaunch(
      b, loc, blocks, threads, [&](OpBuilder &kb, gpu::LaunchOp launch) {
        Value first = arith::AddIOp::create(
            kb, loc,
            arith::MulIOp::create(kb, loc, launch.getBlockIds().x,
                                  launch.getBlockSize().x),
            launch.getThreadIds().x);
        Value stride = arith::MulIOp::create(kb, loc, launch.getGridSize().x,
                                             launch.getBlockSize().x);
        scf::ForOp::create(kb, loc, first, total, stride, ValueRange{},
                           [&](OpBuilder &fb, Location l, Value i, ValueRange) {
                             body(fb, l, i);
                             scf::YieldOp::create(fb, l);
                           });
      });
}

bool mlir::ds::gpu_kernels::isParallelReduction(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInits() != 1 ||
      op.getNumReductionLoops() == 0)
    return false;
  Type et = getElementTypeOrSelf(op.getDpsInitOperand(0)->get().getType());
  if (!et.isF32() && !et.isF64() && !et.isInteger(32) && !et.isInteger(64))
    return false;
  // Inputs read through affine maps at the loop indices; anything else
  // (an index-dependent body is fine, a region-carrying op is not) stays
  // on the serial path.
  for (Operation &inner : op.getBody()->without_terminator())
    if (inner.getNumRegions() != 0)
      return false;
  Operation *comb = combinerOf(op);
  if (!comb || comb->getResult(0).getType() != et)
    return false;
  std::optional<gpu::AllReduceOperation> kind = combinerKind(comb);
  return kind && identityOf(*kind, et);
}

/// Blocks that fill a large GPU (an H100/H200 runs 132 SMs x 8 blocks of
/// 256 threads at once): a reduction with fewer outputs than this splits
/// each output's range over several blocks.
constexpr int64_t kBlocksToFill = 1024;
/// Reduced elements per thread at least, in each block of a split
/// reduction: fewer, and the second pass costs more than it saves.
constexpr int64_t kMinElementsPerThread = 8;

/// Blocks per output for a reduction of `numOut` outputs of `numRed`
/// elements each (static sizes; 1: no split).
static int64_t splitFactor(int64_t numOut, int64_t numRed,
                           const LaunchShape &shape) {
  if (numOut <= 0 || numRed <= 0 || numOut >= kBlocksToFill)
    return 1;
  int64_t byWork = numRed / (shape.blockSize * kMinElementsPerThread);
  int64_t byBlocks = llvm::divideCeil(kBlocksToFill, numOut);
  return std::max<int64_t>(1, std::min(byWork, byBlocks));
}

void mlir::ds::gpu_kernels::buildReductionLaunch(OpBuilder &b,
                                                 linalg::GenericOp op,
                                                 const LaunchShape &shape) {
  Location loc = op.getLoc();
  Operation *comb = combinerOf(op);
  Block &body = *op.getBody();
  BlockArgument outArg = body.getArgument(op.getNumDpsInputs());
  Value x =
      comb->getOperand(0) == outArg ? comb->getOperand(1) : comb->getOperand(0);
  gpu::AllReduceOperation kind = *combinerKind(comb);
  Type et = comb->getResult(0).getType();
  TypedAttr identity = identityOf(kind, et);

  // Split the loops into the parallel (output) and reduced ones.
  SmallVector<Range> ranges =
      cast<linalg::LinalgOp>(op.getOperation()).createLoopRanges(b, loc);
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  SmallVector<unsigned> parDims, redDims;
  SmallVector<Value> parSizes, redSizes;
  SmallVector<int64_t> parStatic;
  int64_t numOutStatic = 1, numRedStatic = 1;
  SmallVector<int64_t> staticRanges = op.getStaticLoopRanges();
  for (auto [d, it] : llvm::enumerate(iterators)) {
    Value size = getValueOrCreateConstantIndexOp(b, loc, ranges[d].size);
    int64_t &count =
        it == utils::IteratorType::reduction ? numRedStatic : numOutStatic;
    count = ShapedType::isDynamic(staticRanges[d]) || count < 0
                ? -1
                : count * staticRanges[d];
    if (it == utils::IteratorType::reduction) {
      redDims.push_back(d);
      redSizes.push_back(size);
    } else {
      parDims.push_back(d);
      parSizes.push_back(size);
      parStatic.push_back(staticRanges[d]);
    }
  }
  // Few outputs of many elements (a tensor's amax or norm: one output):
  // the first launch writes `split` partial results per output, each from
  // its own block, into `partials` [outputs..., split]; a second reduction
  // over the partials folds them into the output.
  int64_t split = splitFactor(numOutStatic, numRedStatic, shape);
  Value partials;
  if (split > 1) {
    SmallVector<int64_t> partialShape(parStatic);
    partialShape.push_back(split);
    partials =
        memref::AllocOp::create(b, loc, MemRefType::get(partialShape, et));
  }
  Value numOut = product(b, loc, parSizes);
  Value numRed = product(b, loc, redSizes);
  Value splitValue = indexConstant(b, loc, split);
  Value numTasks =
      split > 1 ? arith::MulIOp::create(b, loc, numOut, splitValue) : numOut;
  Value threads = indexConstant(b, loc, shape.blockSize);
  Value blocks = clampBlocks(b, loc, numTasks, shape.maxBlocks);
  Value memOut = op.getDpsInitOperand(0)->get();
  AffineMap outMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  unsigned numLoops = op.getNumLoops();

  buildLaunch(
      b, loc, blocks, threads, [&](OpBuilder &kb, gpu::LaunchOp launch) {
        Value tid = launch.getThreadIds().x;
        Value zero = indexConstant(kb, loc, 0);
        // Tasks (an output, or a part of one): uniform across the block
        // (every thread of a block works on the same one), as the
        // block-wide all-reduce requires.
        scf::ForOp::create(
            kb, loc, launch.getBlockIds().x, numTasks, launch.getGridSize().x,
            ValueRange{},
            [&](OpBuilder &ob, Location l, Value task, ValueRange) {
              // Part `part` of a split output reads the reduced elements
              // part x blockSize + tid, then every split x blockSize-th.
              Value o = task, first = tid, stride = launch.getBlockSize().x;
              Value part;
              if (split > 1) {
                o = arith::DivUIOp::create(ob, l, task, splitValue);
                part = arith::RemUIOp::create(ob, l, task, splitValue);
                first = arith::AddIOp::create(
                    ob, l, arith::MulIOp::create(ob, l, part, stride), tid);
                stride = arith::MulIOp::create(ob, l, stride, splitValue);
              }
              SmallVector<Value> parIdx = delinearize(ob, l, o, parSizes);
              Value init = arith::ConstantOp::create(ob, l, identity);
              auto partial = scf::ForOp::create(
                  ob, l, first, numRed, stride, ValueRange{init},
                  [&](OpBuilder &rb, Location l2, Value r, ValueRange acc) {
                    SmallVector<Value> redIdx =
                        delinearize(rb, l2, r, redSizes);
                    SmallVector<Value> ivs(numLoops);
                    for (auto [i, d] : llvm::enumerate(parDims))
                      ivs[d] = parIdx[i];
                    for (auto [i, d] : llvm::enumerate(redDims))
                      ivs[d] = redIdx[i];
                    IRMapping map;
                    for (OpOperand *in : op.getDpsInputOperands()) {
                      Value v = in->get();
                      BlockArgument arg =
                          body.getArgument(in->getOperandNumber());
                      if (!isa<MemRefType>(v.getType())) {
                        map.map(arg, v); // a scalar operand
                        continue;
                      }
                      SmallVector<Value> idx =
                          applyMap(rb, l2, op.getMatchingIndexingMap(in), ivs);
                      map.map(arg, memref::LoadOp::create(rb, l2, v, idx));
                    }
                    map.map(outArg, acc[0]);
                    for (Operation &inner : body.without_terminator()) {
                      if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
                        map.map(index.getResult(), ivs[index.getDim()]);
                        continue;
                      }
                      rb.clone(inner, map);
                    }
                    scf::YieldOp::create(rb, l2,
                                         map.lookup(comb->getResult(0)));
                  });
              Value total = gpu::AllReduceOp::create(
                  ob, l, partial.getResult(0),
                  gpu::AllReduceOperationAttr::get(ob.getContext(), kind),
                  /*uniform=*/true);
              Value isFirst = arith::CmpIOp::create(
                  ob, l, arith::CmpIPredicate::eq, tid, zero);
              scf::IfOp::create(
                  ob, l, isFirst, [&](OpBuilder &ib, Location l3) {
                    if (partials) {
                      SmallVector<Value> idx(parIdx);
                      idx.push_back(part);
                      memref::StoreOp::create(ib, l3, total, partials, idx);
                      scf::YieldOp::create(ib, l3);
                      return;
                    }
                    SmallVector<Value> ivs(numLoops, zero);
                    for (auto [i, d] : llvm::enumerate(parDims))
                      ivs[d] = parIdx[i];
                    SmallVector<Value> idx = applyMap(ib, l3, outMap, ivs);
                    Value old = memref::LoadOp::create(ib, l3, memOut, idx);
                    IRMapping fold;
                    fold.map(outArg, old);
                    fold.map(x, total);
                    Value folded = ib.clone(*comb, fold)->getResult(0);
                    memref::StoreOp::create(ib, l3, folded, memOut, idx);
                    scf::YieldOp::create(ib, l3);
                  });
              scf::YieldOp::create(ob, l);
            });
      });
  if (!partials)
    return;

  // The partials' reduction, as a linalg reduction of its own (outputs'
  // dimensions, then the split one) that folds them into the output with
  // the same combiner: G partials per output, so one block per output.
  MLIRContext *ctx = b.getContext();
  unsigned numPar = parDims.size();
  SmallVector<AffineExpr> toNew(numLoops, getAffineConstantExpr(0, ctx));
  for (auto [i, d] : llvm::enumerate(parDims))
    toNew[d] = getAffineDimExpr(i, ctx);
  AffineMap newOutMap = outMap.replaceDimsAndSymbols(toNew, {}, numPar + 1, 0);
  AffineMap partialMap = AffineMap::getMultiDimIdentityMap(numPar + 1, ctx);
  SmallVector<utils::IteratorType> newIterators(numPar,
                                                utils::IteratorType::parallel);
  newIterators.push_back(utils::IteratorType::reduction);
  auto finish = linalg::GenericOp::create(
      b, loc, ValueRange{partials}, ValueRange{memOut},
      ArrayRef<AffineMap>{partialMap, newOutMap}, newIterators,
      [&](OpBuilder &fb, Location l, ValueRange args) {
        IRMapping fold;
        fold.map(outArg, args[1]);
        fold.map(x, args[0]);
        Operation *folded = fb.clone(*comb, fold);
        linalg::YieldOp::create(fb, l, folded->getResult(0));
      });
  buildReductionLaunch(b, finish, shape);
  finish->erase();
  memref::DeallocOp::create(b, loc, partials);
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
