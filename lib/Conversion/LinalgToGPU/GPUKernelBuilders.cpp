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
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/MapVector.h"
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

/// Builds a launch of `blocks` x (`threads`, `threadsY`) whose body `body`
/// fills (`threadsY` null: one).
gpu::LaunchOp buildLaunch(OpBuilder &b, Location loc, Value blocks,
                          Value threads,
                          function_ref<void(OpBuilder &, gpu::LaunchOp)> body,
                          Value threadsY = {}) {
  Value one = indexConstant(b, loc, 1);
  auto launch = gpu::LaunchOp::create(b, loc, blocks, one, one, threads,
                                      threadsY ? threadsY : one, one);
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

/// Clones `op`'s body (its terminator aside) at loop indices `ivs` into
/// `map`: every operand whose block argument `map` does not already give
/// and the body uses is loaded where its indexing map says (a scalar
/// operand is used as is), and `linalg.index` is the index itself.
void cloneBodyAt(OpBuilder &b, Location loc, linalg::GenericOp op,
                 ArrayRef<Value> ivs, IRMapping &map) {
  Block &body = *op.getBody();
  for (OpOperand &operand : op->getOpOperands()) {
    BlockArgument arg = op.getMatchingBlockArgument(&operand);
    Value v = operand.get();
    if (map.contains(arg) || arg.use_empty())
      continue;
    if (!isa<MemRefType>(v.getType())) {
      map.map(arg, v);
      continue;
    }
    SmallVector<Value> idx =
        applyMap(b, loc, op.getMatchingIndexingMap(&operand), ivs);
    map.map(arg, memref::LoadOp::create(b, loc, v, idx));
  }
  for (Operation &inner : body.without_terminator()) {
    if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
      map.map(index.getResult(), ivs[index.getDim()]);
      continue;
    }
    b.clone(inner, map);
  }
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

namespace {

/// Blocks that fill a large GPU (an H100/H200 runs 132 SMs x 8 blocks of
/// 256 threads at once): a reduction with fewer outputs than this splits
/// each output's range over several blocks.
constexpr int64_t kBlocksToFill = 1024;
/// Reduced elements per thread at least, in each block of a split
/// reduction: fewer, and the second pass costs more than it saves.
constexpr int64_t kMinElementsPerThread = 8;
/// Reduced elements per thread at least in a split column reduction (each
/// thread folds a run of its output's elements): fewer, and the partial
/// results cost more to write and fold than the elements they stand for.
constexpr int64_t kMinColumnRun = 32;

/// A parallel reduction generic taken apart: its combiner, its loops split
/// into the output (parallel) and reduced dimensions, and their sizes.
struct Reduction {
  linalg::GenericOp op;
  Operation *comb;
  BlockArgument outArg; // the body's accumulator
  Value x;              // the combiner's other operand
  gpu::AllReduceOperation kind;
  TypedAttr identity;
  TypedAttr init; // kConstantInitAttr: what the output holds, not read
  SmallVector<unsigned> parDims, redDims;
  SmallVector<Value> parSizes, redSizes;
  SmallVector<int64_t> parStatic;
  int64_t numOutStatic = 1, numRedStatic = 1; // -1 when dynamic

  Reduction(OpBuilder &b, linalg::GenericOp op) : op(op), comb(combinerOf(op)) {
    Location loc = op.getLoc();
    outArg = op.getBody()->getArgument(op.getNumDpsInputs());
    x = comb->getOperand(0) == outArg ? comb->getOperand(1)
                                      : comb->getOperand(0);
    kind = *combinerKind(comb);
    identity = identityOf(kind, comb->getResult(0).getType());
    init = op->getAttrOfType<TypedAttr>(kConstantInitAttr);
    SmallVector<Range> ranges =
        cast<linalg::LinalgOp>(op.getOperation()).createLoopRanges(b, loc);
    SmallVector<int64_t> staticRanges = op.getStaticLoopRanges();
    for (auto [d, it] : llvm::enumerate(op.getIteratorTypesArray())) {
      Value size = getValueOrCreateConstantIndexOp(b, loc, ranges[d].size);
      bool reduced = it == utils::IteratorType::reduction;
      int64_t &count = reduced ? numRedStatic : numOutStatic;
      count = ShapedType::isDynamic(staticRanges[d]) || count < 0
                  ? -1
                  : count * staticRanges[d];
      (reduced ? redDims : parDims).push_back(d);
      (reduced ? redSizes : parSizes).push_back(size);
      if (!reduced)
        parStatic.push_back(staticRanges[d]);
    }
  }

  Value memOut() { return op.getDpsInitOperand(0)->get(); }

  /// The launch's tasks: an output each, or `split` parts of each.
  struct Tasks {
    Value numOut, numRed, split, count;
  };
  Tasks tasks(OpBuilder &b, Location loc, int64_t split) {
    Tasks t;
    t.numOut = product(b, loc, parSizes);
    t.numRed = product(b, loc, redSizes);
    t.split = indexConstant(b, loc, split);
    t.count =
        split > 1 ? arith::MulIOp::create(b, loc, t.numOut, t.split) : t.numOut;
    return t;
  }

  /// The loop indices of output `parIdx`, reduced element `redIdx`.
  SmallVector<Value> loopIndices(ArrayRef<Value> parIdx,
                                 ArrayRef<Value> redIdx) {
    SmallVector<Value> ivs(op.getNumLoops());
    for (auto [i, d] : llvm::enumerate(parDims))
      ivs[d] = parIdx[i];
    for (auto [i, d] : llvm::enumerate(redDims))
      ivs[d] = redIdx[i];
    return ivs;
  }

  /// `acc` combined with the element at loop indices `ivs`: the body,
  /// its inputs loaded where their maps say.
  Value combineElement(OpBuilder &b, Location loc, ArrayRef<Value> ivs,
                       Value acc) {
    IRMapping map;
    map.map(outArg, acc);
    cloneBodyAt(b, loc, op, ivs, map);
    return map.lookup(comb->getResult(0));
  }

  /// The elements from `first` to `end` by `step`, folded from the
  /// identity, for output `parIdx`.
  Value foldRange(OpBuilder &b, Location loc, ArrayRef<Value> parIdx,
                  Value first, Value end, Value step) {
    Value init = arith::ConstantOp::create(b, loc, identity);
    auto loop = scf::ForOp::create(
        b, loc, first, end, step, ValueRange{init},
        [&](OpBuilder &rb, Location l, Value r, ValueRange acc) {
          SmallVector<Value> redIdx = delinearize(rb, l, r, redSizes);
          scf::YieldOp::create(
              rb, l,
              combineElement(rb, l, loopIndices(parIdx, redIdx), acc[0]));
        });
    return loop.getResult(0);
  }

  /// Stores the combination of `total` and output `parIdx`'s value into it.
  void foldIntoOutput(OpBuilder &b, Location loc, ArrayRef<Value> parIdx,
                      Value total) {
    SmallVector<Value> ivs(op.getNumLoops(), indexConstant(b, loc, 0));
    for (auto [i, d] : llvm::enumerate(parDims))
      ivs[d] = parIdx[i];
    SmallVector<Value> idx = applyMap(
        b, loc, op.getMatchingIndexingMap(op.getDpsInitOperand(0)), ivs);
    // An output that would hold a constant (foldConstantInits) is not
    // read: the constant is folded in instead.
    Value old = init ? arith::ConstantOp::create(b, loc, init).getResult()
                     : memref::LoadOp::create(b, loc, memOut(), idx);
    IRMapping fold;
    fold.map(outArg, old);
    fold.map(x, total);
    Value folded = b.clone(*comb, fold)->getResult(0);
    memref::StoreOp::create(b, loc, folded, memOut(), idx);
  }

  /// A buffer for `split` partial results per output: [outputs..., split].
  Value allocPartials(OpBuilder &b, Location loc, int64_t split) {
    SmallVector<int64_t> shape(parStatic);
    shape.push_back(split);
    return memref::AllocOp::create(
        b, loc, MemRefType::get(shape, comb->getResult(0).getType()));
  }

  /// Folds `partials` ([outputs..., split], written by a first launch) into
  /// the output, as a linalg reduction of its own (outputs' dimensions, then
  /// the split one) with the same combiner: its rows are contiguous, so it
  /// gets a block per output. Frees `partials` after.
  void foldPartials(OpBuilder &b, Location loc, Value partials,
                    const LaunchShape &shape) {
    MLIRContext *ctx = b.getContext();
    unsigned numPar = parDims.size();
    SmallVector<AffineExpr> toNew(op.getNumLoops(),
                                  getAffineConstantExpr(0, ctx));
    for (auto [i, d] : llvm::enumerate(parDims))
      toNew[d] = getAffineDimExpr(i, ctx);
    AffineMap outMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
    AffineMap newOutMap =
        outMap.replaceDimsAndSymbols(toNew, {}, numPar + 1, 0);
    AffineMap partialMap = AffineMap::getMultiDimIdentityMap(numPar + 1, ctx);
    SmallVector<utils::IteratorType> iterators(numPar,
                                               utils::IteratorType::parallel);
    iterators.push_back(utils::IteratorType::reduction);
    auto finish = linalg::GenericOp::create(
        b, loc, ValueRange{partials}, ValueRange{memOut()},
        ArrayRef<AffineMap>{partialMap, newOutMap}, iterators,
        [&](OpBuilder &fb, Location l, ValueRange args) {
          IRMapping fold;
          fold.map(outArg, args[1]);
          fold.map(x, args[0]);
          Operation *folded = fb.clone(*comb, fold);
          linalg::YieldOp::create(fb, l, folded->getResult(0));
        });
    if (init)
      finish->setAttr(kConstantInitAttr, init);
    buildReductionLaunch(b, finish, shape);
    finish->erase();
    memref::DeallocOp::create(b, loc, partials);
  }
};

/// Blocks per output for a block reduction of `numOut` outputs of `numRed`
/// elements each (static sizes; 1: no split).
int64_t blockSplit(int64_t numOut, int64_t numRed, const LaunchShape &shape) {
  if (numOut <= 0 || numRed <= 0 || numOut >= kBlocksToFill)
    return 1;
  int64_t byWork = numRed / (shape.blockSize * kMinElementsPerThread);
  int64_t byBlocks = llvm::divideCeil(kBlocksToFill, numOut);
  return std::max<int64_t>(1, std::min(byWork, byBlocks));
}

/// Threads per block for a block per output of `numRed` elements (-1:
/// dynamic). A row shorter than the block size gets as many threads as it
/// has elements, rounded up to whole warps: an SM holds a fixed number of
/// threads, so 64-thread blocks on rows of 64 put four times as many rows
/// in flight as 256-thread blocks whose other 192 threads would idle.
int64_t threadsPerRow(int64_t numRed, const LaunchShape &shape) {
  if (numRed < 0 || numRed >= shape.blockSize)
    return shape.blockSize;
  return std::max<int64_t>(32, llvm::alignTo(numRed, 32));
}

/// Runs of elements per output for a column reduction of `numOut` outputs
/// of `numRed` elements each (static sizes; 1: no split): enough threads to
/// fill the GPU, each folding at least kMinColumnRun elements.
int64_t columnSplit(int64_t numOut, int64_t numRed, const LaunchShape &shape) {
  if (numOut <= 0 || numRed <= 0)
    return 1;
  int64_t threadsToFill = kBlocksToFill * shape.blockSize;
  int64_t byWork = numRed / kMinColumnRun;
  int64_t byThreads = llvm::divideCeil(threadsToFill, numOut);
  return std::max<int64_t>(1, std::min(byWork, byThreads));
}

/// A warp's width on NVIDIA GPUs: the lanes gpu.subgroup_reduce combines.
constexpr int64_t kWarpSize = 32;
/// The longest row a warp takes alone: 32 elements per lane. PyTorch's
/// softmax gives rows up to 1024 elements a warp each as well.
constexpr int64_t kMaxWarpRow = 1024;

/// Whether `numOut` outputs (rows) of `numRed` elements each, static, get a
/// warp each rather than a block: rows short enough for a warp's lanes to
/// cover in a few strides, and many enough for warps alone to fill the GPU
/// (kBlocksToFill blocks' worth). The lanes then combine with shuffles
/// alone, where a block per row needs shared memory and barriers, and a
/// block runs blockSize / 32 rows at once.
bool warpPerRow(int64_t numOut, int64_t numRed, const LaunchShape &shape) {
  if (shape.blockSize % kWarpSize != 0 || numRed < kMinParallelReduction ||
      numRed > kMaxWarpRow)
    return false;
  return numOut >= kBlocksToFill * (shape.blockSize / kWarpSize);
}

/// The threads that share one row (an output of a reduction, a row of a row
/// group) and how they combine their partial results: a whole block, or a
/// warp.
struct RowTeam {
  Value row;    // the team's row (a warp past the last row: the last row)
  Value first;  // this thread's first element of the row
  Value stride; // the distance to its next one
  Value leader; // i1: the one thread that writes the row's single values
  Value real;   // i1: whether the row is the team's own; null when all are
  bool warp = false;

  /// Every team thread's `partial` combined, in each of them.
  Value combine(OpBuilder &b, Location loc, Value partial,
                gpu::AllReduceOperation kind) const {
    if (warp)
      return gpu::SubgroupReduceOp::create(b, loc, partial, kind,
                                           /*uniform=*/true);
    return gpu::AllReduceOp::create(
        b, loc, partial, gpu::AllReduceOperationAttr::get(b.getContext(), kind),
        /*uniform=*/true);
  }

  /// Emits `body` where `cond` holds (`cond` null: everywhere).
  static void emitIf(OpBuilder &b, Location loc, Value cond,
                     function_ref<void(OpBuilder &, Location)> body) {
    if (!cond) {
      body(b, loc);
      return;
    }
    scf::IfOp::create(b, loc, cond, [&](OpBuilder &ib, Location il) {
      body(ib, il);
      scf::YieldOp::create(ib, il);
    });
  }
};

/// Emits a launch in which teams of threads take the rows [0, numRows) in
/// turn, running `body` for their row, in a grid-stride loop past
/// maxBlocks:
/// - `warp`: a warp per row, blocks of (32, blockSize / 32) threads; a
///   warp past the last row (numRows not a multiple of the warps per
///   block) rereads the last one but writes nothing;
/// - otherwise a block of `threads` threads per row.
/// Every thread of a block runs the loop the same number of times, as
/// barriers and all-reduces in `body` require (and a warp's lanes, as its
/// shuffles do).
void buildRowLaunch(OpBuilder &b, Location loc, int64_t numRows, bool warp,
                    int64_t threads, const LaunchShape &shape,
                    function_ref<void(OpBuilder &, Location, RowTeam &)> body) {
  int64_t perBlock = warp ? shape.blockSize / kWarpSize : 1;
  Value blocks = clampBlocks(
      b, loc, indexConstant(b, loc, llvm::divideCeil(numRows, perBlock)),
      shape.maxBlocks);
  Value threadsX = indexConstant(b, loc, warp ? kWarpSize : threads);
  Value threadsY = warp ? indexConstant(b, loc, perBlock) : Value();
  buildLaunch(
      b, loc, blocks, threadsX,
      [&](OpBuilder &kb, gpu::LaunchOp launch) {
        Value tid = launch.getThreadIds().x;
        Value zero = indexConstant(kb, loc, 0);
        Value perBlockValue = indexConstant(kb, loc, perBlock);
        Value isFirst =
            arith::CmpIOp::create(kb, loc, arith::CmpIPredicate::eq, tid, zero);
        // The block's first row, uniform across the block.
        Value start = arith::MulIOp::create(kb, loc, launch.getBlockIds().x,
                                            perBlockValue);
        Value step = arith::MulIOp::create(kb, loc, launch.getGridSize().x,
                                           perBlockValue);
        scf::ForOp::create(
            kb, loc, start, indexConstant(kb, loc, numRows), step, ValueRange{},
            [&](OpBuilder &ob, Location l, Value blockRow, ValueRange) {
              RowTeam team;
              team.warp = warp;
              team.first = tid;
              team.stride = launch.getBlockSize().x;
              team.row = blockRow;
              team.leader = isFirst;
              if (warp) {
                team.row = arith::AddIOp::create(ob, l, blockRow,
                                                 launch.getThreadIds().y);
                if (numRows % perBlock != 0) {
                  Value last = indexConstant(ob, l, numRows - 1);
                  team.real = arith::CmpIOp::create(
                      ob, l, arith::CmpIPredicate::ule, team.row, last);
                  team.row = arith::MinUIOp::create(ob, l, team.row, last);
                  team.leader =
                      arith::AndIOp::create(ob, l, team.leader, team.real);
                }
              }
              body(ob, l, team);
              scf::YieldOp::create(ob, l);
            });
      },
      threadsY);
}

/// A warp per output (warpPerRow): the lanes stride over the output's
/// reduced elements, combine with gpu.subgroup_reduce, and lane 0 folds the
/// total into the output.
void buildWarpReduction(OpBuilder &b, Reduction &red,
                        const LaunchShape &shape) {
  Location loc = red.op.getLoc();
  Value numRed = product(b, loc, red.redSizes);
  buildRowLaunch(
      b, loc, red.numOutStatic, /*warp=*/true, kWarpSize, shape,
      [&](OpBuilder &ob, Location l, RowTeam &team) {
        SmallVector<Value> parIdx = delinearize(ob, l, team.row, red.parSizes);
        Value partial =
            red.foldRange(ob, l, parIdx, team.first, numRed, team.stride);
        Value total = team.combine(ob, l, partial, red.kind);
        RowTeam::emitIf(ob, l, team.leader, [&](OpBuilder &ib, Location il) {
          red.foldIntoOutput(ib, il, parIdx, total);
        });
      });
}

/// A block per output (or per part of one): the block's threads stride
/// over the output's reduced elements, then combine their partial results
/// with a block-wide gpu.all_reduce, and thread 0 folds the total into the
/// output (or writes it as a partial result, when split).
void buildBlockReduction(OpBuilder &b, Reduction &red,
                         const LaunchShape &shape) {
  Location loc = red.op.getLoc();
  // Few outputs of many elements (a tensor's amax or norm: one output):
  // the first launch writes `split` partial results per output, each from
  // its own block, into `partials` [outputs..., split]; a second reduction
  // over the partials folds them into the output.
  int64_t split = blockSplit(red.numOutStatic, red.numRedStatic, shape);
  Value partials = split > 1 ? red.allocPartials(b, loc, split) : Value();
  Reduction::Tasks tasks = red.tasks(b, loc, split);
  Value numRed = tasks.numRed, splitValue = tasks.split, numTasks = tasks.count;
  Value threads = indexConstant(
      b, loc,
      split > 1 ? shape.blockSize : threadsPerRow(red.numRedStatic, shape));
  Value blocks = clampBlocks(b, loc, numTasks, shape.maxBlocks);

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
              SmallVector<Value> parIdx = delinearize(ob, l, o, red.parSizes);
              Value partial =
                  red.foldRange(ob, l, parIdx, first, numRed, stride);
              Value total = gpu::AllReduceOp::create(
                  ob, l, partial,
                  gpu::AllReduceOperationAttr::get(ob.getContext(), red.kind),
                  /*uniform=*/true);
              Value isFirst = arith::CmpIOp::create(
                  ob, l, arith::CmpIPredicate::eq, tid, zero);
              scf::IfOp::create(
                  ob, l, isFirst, [&](OpBuilder &ib, Location l3) {
                    if (partials) {
                      SmallVector<Value> idx(parIdx);
                      idx.push_back(part);
                      memref::StoreOp::create(ib, l3, total, partials, idx);
                    } else {
                      red.foldIntoOutput(ib, l3, parIdx, total);
                    }
                    scf::YieldOp::create(ib, l3);
                  });
              scf::YieldOp::create(ob, l);
            });
      });
  if (partials)
    red.foldPartials(b, loc, partials, shape);
}

/// A thread per output (or per run of one output's elements, when split),
/// consecutive threads on consecutive outputs: for reductions whose inputs
/// are contiguous along the outputs rather than the reduced dimensions (a
/// bias gradient sums [tokens, features] over the tokens), where a block
/// per output would read one element per row. Each thread folds its run in
/// order, so an unsplit reduction adds in the CPU's order.
void buildColumnReduction(OpBuilder &b, Reduction &red,
                          const LaunchShape &shape) {
  Location loc = red.op.getLoc();
  int64_t split = columnSplit(red.numOutStatic, red.numRedStatic, shape);
  Value partials = split > 1 ? red.allocPartials(b, loc, split) : Value();
  Reduction::Tasks tasks = red.tasks(b, loc, split);
  Value numOut = tasks.numOut, numRed = tasks.numRed, numTasks = tasks.count;
  // Runs of ceil(numRed / split) elements; the last may be short or empty.
  Value run =
      split > 1
          ? indexConstant(b, loc, llvm::divideCeil(red.numRedStatic, split))
          : numRed;
  buildGridStrideLaunch(
      b, loc, numTasks, shape, [&](OpBuilder &kb, Location l, Value task) {
        Value o = task, part;
        if (split > 1) {
          o = arith::RemUIOp::create(kb, l, task, numOut);
          part = arith::DivUIOp::create(kb, l, task, numOut);
        }
        SmallVector<Value> parIdx = delinearize(kb, l, o, red.parSizes);
        Value first = indexConstant(kb, l, 0), end = numRed;
        if (split > 1) {
          first = arith::MulIOp::create(kb, l, part, run);
          end = arith::MinUIOp::create(
              kb, l, arith::AddIOp::create(kb, l, first, run), numRed);
        }
        Value total =
            red.foldRange(kb, l, parIdx, first, end, indexConstant(kb, l, 1));
        if (!partials) {
          red.foldIntoOutput(kb, l, parIdx, total);
          return;
        }
        SmallVector<Value> idx(parIdx);
        idx.push_back(part);
        memref::StoreOp::create(kb, l, total, partials, idx);
      });
  if (partials)
    red.foldPartials(b, loc, partials, shape);
}

} // namespace

/// How far apart, in elements, the elements input `in` of `op` reads at two
/// iterations one apart along loop dimension `d` are: 0 when it does not
/// depend on `d`; nullopt when unknown (a dynamic stride, `d` inside a
/// compound index expression).
static std::optional<int64_t> strideAlong(linalg::GenericOp op, OpOperand *in,
                                          unsigned d) {
  auto type = cast<MemRefType>(in->get().getType());
  AffineMap map = op.getMatchingIndexingMap(in);
  if (!map.isFunctionOfDim(d))
    return 0;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)))
    return std::nullopt;
  int64_t stride = 0;
  for (auto [k, e] : llvm::enumerate(map.getResults())) {
    if (!e.isFunctionOfDim(d))
      continue;
    auto dim = dyn_cast<AffineDimExpr>(e);
    if (!dim || ShapedType::isDynamic(strides[k]))
      return std::nullopt;
    stride += strides[k];
  }
  return stride;
}

bool mlir::ds::gpu_kernels::coalescedAlong(linalg::GenericOp op, unsigned d) {
  return llvm::all_of(op.getDpsInputOperands(), [&](OpOperand *in) {
    if (!isa<MemRefType>(in->get().getType()))
      return true;
    std::optional<int64_t> s = strideAlong(op, in, d);
    return s && (*s == 0 || *s == 1);
  });
}

void mlir::ds::gpu_kernels::buildReductionLaunch(OpBuilder &b,
                                                 linalg::GenericOp op,
                                                 const LaunchShape &shape) {
  Reduction red(b, op);
  // A block per output reads along the reduced dimensions, a thread per
  // output along the outputs: pick the one whose loads coalesce, the block
  // when both or neither do.
  bool columns = !red.parDims.empty() &&
                 !coalescedAlong(op, red.redDims.back()) &&
                 coalescedAlong(op, red.parDims.back());
  if (columns)
    buildColumnReduction(b, red, shape);
  else if (warpPerRow(red.numOutStatic, red.numRedStatic, shape))
    buildWarpReduction(b, red, shape);
  else
    buildBlockReduction(b, red, shape);
}

bool mlir::ds::gpu_kernels::isBlockRowReduction(linalg::GenericOp op,
                                                const LaunchShape &shape) {
  if (!isParallelReduction(op) || !op.hasPureBufferSemantics())
    return false;
  // Output dimensions first, then the reduced ones, all static.
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  unsigned numPar = op.getNumParallelLoops();
  if (numPar == 0 ||
      llvm::any_of(ArrayRef(iterators).take_front(numPar),
                   [](auto it) { return it != utils::IteratorType::parallel; }))
    return false;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (llvm::any_of(ranges, ShapedType::isDynamic))
    return false;
  int64_t numOut = 1, numRed = 1;
  for (auto [d, size] : llvm::enumerate(ranges))
    (d < numPar ? numOut : numRed) *= size;
  return numRed >= kMinParallelReduction &&
         blockSplit(numOut, numRed, shape) == 1 &&
         coalescedAlong(op, op.getNumLoops() - 1);
}

namespace {

/// Stores, at loop indices `ivs`, what the all-parallel `op`'s body yields
/// there: its inputs (and the outputs it reads) loaded where their maps say.
void emitParallelIteration(OpBuilder &b, Location loc, linalg::GenericOp op,
                           ArrayRef<Value> ivs, IRMapping map = {}) {
  cloneBodyAt(b, loc, op, ivs, map);
  auto yield = cast<linalg::YieldOp>(op.getBody()->getTerminator());
  for (auto [init, value] :
       llvm::zip(op.getDpsInitsMutable(), yield.getOperands())) {
    SmallVector<Value> idx =
        applyMap(b, loc, op.getMatchingIndexingMap(&init), ivs);
    memref::StoreOp::create(b, loc, map.lookupOrDefault(value), init.get(),
                            idx);
  }
}

/// The rank of a row-group member's iteration space.
unsigned memberRank(Operation *op) {
  if (auto fill = dyn_cast<linalg::FillOp>(op))
    return cast<MemRefType>(fill.getOutputs()[0].getType()).getRank();
  if (auto copy = dyn_cast<memref::CopyOp>(op))
    return cast<MemRefType>(copy.getTarget().getType()).getRank();
  return cast<linalg::GenericOp>(op).getNumLoops();
}

/// What a row-group member reads at each element of its loops: (buffer,
/// indexing map) pairs, a reduction's accumulator aside.
SmallVector<std::pair<Value, AffineMap>> memberReads(Operation *op) {
  SmallVector<std::pair<Value, AffineMap>> reads;
  if (auto copy = dyn_cast<memref::CopyOp>(op)) {
    unsigned rank = cast<MemRefType>(copy.getSource().getType()).getRank();
    reads.push_back({copy.getSource(), AffineMap::getMultiDimIdentityMap(
                                           rank, op->getContext())});
  } else if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
    for (OpOperand *in : generic.getDpsInputOperands())
      if (isa<MemRefType>(in->get().getType()) &&
          !generic.getMatchingBlockArgument(in).use_empty())
        reads.push_back({in->get(), generic.getMatchingIndexingMap(in)});
  }
  return reads;
}

/// The buffers a row-group member writes.
SmallVector<Value> memberWrites(Operation *op) {
  if (auto copy = dyn_cast<memref::CopyOp>(op))
    return {copy.getTarget()};
  if (auto fill = dyn_cast<linalg::FillOp>(op))
    return {fill.getOutputs()[0]};
  return llvm::to_vector(cast<linalg::GenericOp>(op).getDpsInits());
}

/// A value of `buffer` read through `map` that the caller already has (null:
/// none; load it).
using CachedRead = function_ref<Value(Value buffer, AffineMap map)>;

/// One member of a row group at loop indices `ivs` (a fill or a copy, whose
/// loops are its buffer's dimensions, or an all-parallel generic), taking
/// what `cached` has instead of loading it.
void emitMemberIteration(OpBuilder &b, Location loc, Operation *op,
                         ArrayRef<Value> ivs, CachedRead cached = nullptr) {
  if (auto fill = dyn_cast<linalg::FillOp>(op)) {
    memref::StoreOp::create(b, loc, fill.getInputs()[0], fill.getOutputs()[0],
                            ivs);
    return;
  }
  if (auto copy = dyn_cast<memref::CopyOp>(op)) {
    Value v =
        cached ? cached(copy.getSource(), memberReads(op)[0].second) : Value();
    if (!v)
      v = memref::LoadOp::create(b, loc, copy.getSource(), ivs);
    memref::StoreOp::create(b, loc, v, copy.getTarget(), ivs);
    return;
  }
  auto generic = cast<linalg::GenericOp>(op);
  IRMapping map;
  if (cached)
    for (OpOperand *in : generic.getDpsInputOperands())
      if (Value v = cached(in->get(), generic.getMatchingIndexingMap(in)))
        map.map(generic.getMatchingBlockArgument(in), v);
  emitParallelIteration(b, loc, generic, ivs, map);
}

/// The view-free buffer `v` is a view of.
Value viewRoot(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

/// Registers (32-bit) per lane a warp's row cache may take.
constexpr int64_t kMaxCachedRegisters = 64;
/// The most elements per lane (rows of 256) for which a warp caches its row.
/// The members' unrolled iterations keep every element's addresses and
/// operands live besides the cache: in the GPT benchmark's 1-layer FP8 step,
/// rows of 256 need at most 64 registers, rows of 512 need 120, and rows of
/// 1024 run out at 255 and spill.
constexpr int64_t kMaxCachedPerLane = 8;

/// A warp's copy of the row elements that several members of its row group
/// read, as PyTorch's persistent softmax keeps them: each lane loads its
/// elements of the row (lane, lane + 32, ...) once, into registers, and
/// the members compute from there rather than rereading the row from L1 or
/// L2 in each pass. The members' loops over the row are unrolled, so rows
/// are at most 32 x kMaxCachedPerLane elements long.
class RowCache {
public:
  /// Chooses the (buffer, map) pairs that two or more of `ops` (the members
  /// over the row's elements) read and none writes, most-read first,
  /// within kMaxCachedRegisters.
  RowCache(ArrayRef<Operation *> ops, unsigned rank, int64_t numRed)
      : numRed(numRed), perLane(llvm::divideCeil(numRed, kWarpSize)) {
    if (perLane > kMaxCachedPerLane)
      return;
    llvm::DenseSet<Value> written;
    llvm::MapVector<std::pair<Value, AffineMap>, int> readers;
    for (Operation *op : ops) {
      for (Value w : memberWrites(op))
        written.insert(viewRoot(w));
      if (memberRank(op) != rank)
        continue;
      llvm::SmallDenseSet<std::pair<Value, AffineMap>, 4> seen;
      for (auto read : memberReads(op))
        if (seen.insert(read).second)
          ++readers[read];
    }
    // Most-read first; among equals, in the order the members read them.
    SmallVector<std::pair<int, size_t>> order; // (-readers, position)
    auto reads = readers.takeVector();
    for (auto [k, entry] : llvm::enumerate(reads))
      if (entry.second >= 2 && !written.contains(viewRoot(entry.first.first)))
        order.push_back({-entry.second, k});
    llvm::sort(order);
    int64_t registers = 0;
    for (auto [negCount, k] : order) {
      std::pair<Value, AffineMap> read = reads[k].first;
      Type et = cast<MemRefType>(read.first.getType()).getElementType();
      int64_t cost = perLane * llvm::divideCeil(et.getIntOrFloatBitWidth(), 32);
      if (registers + cost > kMaxCachedRegisters)
        continue;
      registers += cost;
      entries.push_back({read.first, read.second, {}});
    }
  }

  bool empty() const { return entries.empty(); }
  int64_t elementsPerLane() const { return perLane; }

  /// Emits the lane's loads of row `rowIdx`: element i of the lane is row
  /// element lane + 32 i, clamped to the last one where the row is not a
  /// multiple of 32 long (such an element is loaded, but not used).
  void load(OpBuilder &b, Location loc, ArrayRef<Value> rowIdx, Value lane,
            ArrayRef<Value> redSizes) {
    Value last = indexConstant(b, loc, numRed - 1);
    for (int64_t i = 0; i < perLane; ++i) {
      Value c = arith::AddIOp::create(b, loc, lane,
                                      indexConstant(b, loc, i * kWarpSize));
      Value inRow;
      if ((i + 1) * kWarpSize > numRed) {
        inRow =
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule, c, last);
        c = arith::MinUIOp::create(b, loc, c, last);
      }
      SmallVector<Value> ivs(rowIdx);
      llvm::append_range(ivs, delinearize(b, loc, c, redSizes));
      for (Entry &e : entries)
        e.values.push_back(memref::LoadOp::create(
            b, loc, e.buffer, applyMap(b, loc, e.map, ivs)));
      valid.push_back(inRow);
      indices.push_back(std::move(ivs));
    }
  }

  /// Whether element i of the lane is in the row (null: always).
  Value inRow(int64_t i) const { return valid[i]; }
  /// The loop indices of element i of the lane.
  ArrayRef<Value> ivs(int64_t i) const { return indices[i]; }
  /// Element i of the lane of `buffer` read through `map`, if cached.
  Value lookup(Value buffer, AffineMap map, int64_t i) const {
    for (const Entry &e : entries)
      if (e.buffer == buffer && e.map == map)
        return e.values[i];
    return {};
  }

private:
  struct Entry {
    Value buffer;
    AffineMap map;
    SmallVector<Value> values; // one per element of the lane
  };
  SmallVector<Entry> entries;
  int64_t numRed, perLane;
  SmallVector<Value> valid;
  SmallVector<SmallVector<Value>> indices;
};

/// A row reduction member over a warp's cached row: the lane's elements
/// folded in order (those past the row's end skipped), with the cached
/// reads taken from `cache`.
Value foldCachedRow(OpBuilder &b, Location loc, Reduction &red,
                    const RowCache &cache) {
  Value acc = arith::ConstantOp::create(b, loc, red.identity);
  for (int64_t i = 0; i < cache.elementsPerLane(); ++i) {
    IRMapping map;
    map.map(red.outArg, acc);
    for (OpOperand *in : red.op.getDpsInputOperands())
      if (Value v =
              cache.lookup(in->get(), red.op.getMatchingIndexingMap(in), i))
        map.map(red.op.getMatchingBlockArgument(in), v);
    cloneBodyAt(b, loc, red.op, cache.ivs(i), map);
    Value next = map.lookup(red.comb->getResult(0));
    acc = cache.inRow(i)
              ? arith::SelectOp::create(b, loc, cache.inRow(i), next, acc)
                    .getResult()
              : next;
  }
  return acc;
}

} // namespace

void mlir::ds::gpu_kernels::buildRowGroupLaunch(OpBuilder &b,
                                                ArrayRef<Operation *> ops,
                                                ArrayRef<int64_t> rows,
                                                ArrayRef<int64_t> reduced,
                                                const LaunchShape &shape) {
  Location loc = ops.front()->getLoc();
  b.setInsertionPoint(ops.back());
  int64_t numRows = 1, numRed = 1;
  for (int64_t s : rows)
    numRows *= s;
  for (int64_t s : reduced)
    numRed *= s;
  SmallVector<Value> rowSizes, redSizes;
  for (int64_t s : rows)
    rowSizes.push_back(indexConstant(b, loc, s));
  for (int64_t s : reduced)
    redSizes.push_back(indexConstant(b, loc, s));
  Value numRedValue = indexConstant(b, loc, numRed);
  bool warp = warpPerRow(numRows, numRed, shape);
  unsigned rank = rows.size() + reduced.size();
  buildRowLaunch(
      b, loc, numRows, warp, threadsPerRow(numRed, shape), shape,
      [&](OpBuilder &ob, Location l, RowTeam &team) {
        SmallVector<Value> rowIdx = delinearize(ob, l, team.row, rowSizes);
        std::optional<RowCache> cache;
        if (warp) {
          cache.emplace(ops, rank, numRed);
          if (cache->empty())
            cache.reset();
          else
            cache->load(ob, l, rowIdx, team.first, redSizes);
        }
        for (auto [i, member] : llvm::enumerate(ops)) {
          Operation *op = member; // captured by the lambdas below
          Location ol = op->getLoc();
          auto generic = dyn_cast<linalg::GenericOp>(op);
          if (generic && generic.getNumReductionLoops() > 0) {
            Reduction red(ob, generic);
            Value partial = cache ? foldCachedRow(ob, ol, red, *cache)
                                  : red.foldRange(ob, ol, rowIdx, team.first,
                                                  numRedValue, team.stride);
            Value total = team.combine(ob, ol, partial, red.kind);
            RowTeam::emitIf(ob, ol, team.leader,
                            [&](OpBuilder &ib, Location il) {
                              red.foldIntoOutput(ib, il, rowIdx, total);
                            });
          } else if (memberRank(op) == rows.size()) {
            // One element per row: the team's leader computes it.
            RowTeam::emitIf(ob, ol, team.leader,
                            [&](OpBuilder &ib, Location il) {
                              emitMemberIteration(ib, il, op, rowIdx);
                            });
          } else if (cache) {
            // The lane's elements of the row, unrolled, from the cache.
            for (int64_t e = 0; e < cache->elementsPerLane(); ++e) {
              Value cond = team.real;
              if (Value inRow = cache->inRow(e))
                cond =
                    cond
                        ? arith::AndIOp::create(ob, ol, cond, inRow).getResult()
                        : inRow;
              RowTeam::emitIf(ob, ol, cond, [&](OpBuilder &ib, Location il) {
                emitMemberIteration(ib, il, op, cache->ivs(e),
                                    [&](Value buffer, AffineMap map) {
                                      return cache->lookup(buffer, map, e);
                                    });
              });
            }
          } else {
            // The row's elements, strided over the team's threads.
            RowTeam::emitIf(ob, ol, team.real, [&](OpBuilder &ib, Location il) {
              scf::ForOp::create(
                  ib, il, team.first, numRedValue, team.stride, ValueRange{},
                  [&](OpBuilder &eb, Location el, Value c, ValueRange) {
                    SmallVector<Value> ivs(rowIdx);
                    llvm::append_range(ivs, delinearize(eb, el, c, redSizes));
                    emitMemberIteration(eb, el, op, ivs);
                    scf::YieldOp::create(eb, el);
                  });
            });
          }
          // What this member wrote, another thread of the team may read in
          // the next. (A warp's lanes would need only __syncwarp; the block
          // barrier is as correct, every warp running the same members.)
          if (i + 1 < ops.size())
            gpu::BarrierOp::create(ob, ol);
        }
      });
}

bool mlir::ds::gpu_kernels::isTiledTranspose(linalg::TransposeOp op) {
  if (!op.hasPureBufferSemantics())
    return false;
  ArrayRef<int64_t> perm = op.getPermutation();
  int64_t n = perm.size();
  if (n < 2 || perm[n - 2] != n - 1 || perm[n - 1] != n - 2)
    return false;
  for (int64_t i = 0; i + 2 < n; ++i)
    if (perm[i] != i)
      return false;
  auto in = cast<MemRefType>(op.getInput().getType());
  Type et = in.getElementType();
  return in.hasStaticShape() && et.isIntOrFloat() &&
         et.getIntOrFloatBitWidth() >= 8 && et.getIntOrFloatBitWidth() <= 64;
}

/// The transpose tile's side: a warp's width, so that each warp reads one
/// tile row and writes one tile column, both contiguous in memory.
constexpr int64_t kTransposeTile = 32;

void mlir::ds::gpu_kernels::buildTiledTransposeLaunch(
    OpBuilder &b, linalg::TransposeOp op, const LaunchShape &shape) {
  Location loc = op.getLoc();
  Value input = op.getInput(), output = op.getInit();
  auto inType = cast<MemRefType>(input.getType());
  ArrayRef<int64_t> dims = inType.getShape();
  int64_t rank = dims.size(), rows = dims[rank - 2], cols = dims[rank - 1];
  int64_t batch = 1;
  for (int64_t d : dims.drop_back(2))
    batch *= d;
  const int64_t t = kTransposeTile;
  int64_t tileRows = llvm::divideCeil(rows, t),
          tileCols = llvm::divideCeil(cols, t);
  // The tile holds raw bits, widened to 32 (or 64) so that each element is
  // a whole shared-memory bank word; the extra column staggers a tile
  // column across the banks.
  Type et = inType.getElementType();
  unsigned width = et.getIntOrFloatBitWidth();
  Type bits = b.getIntegerType(width);
  Type word = b.getIntegerType(width > 32 ? 64 : 32);
  auto tileType = MemRefType::get(
      {t, t + 1}, word, AffineMap(),
      gpu::AddressSpaceAttr::get(b.getContext(),
                                 gpu::GPUDialect::getWorkgroupAddressSpace()));
  int64_t numTiles = batch * tileRows * tileCols;
  Value blocks =
      clampBlocks(b, loc, indexConstant(b, loc, numTiles), shape.maxBlocks);
  Value threads = indexConstant(b, loc, shape.blockSize);
  Value one = indexConstant(b, loc, 1);
  auto launch = gpu::LaunchOp::create(b, loc, blocks, one, one, threads, one,
                                      one, /*dynamicSharedMemorySize=*/Value(),
                                      /*asyncTokenType=*/Type(),
                                      /*asyncDependencies=*/ValueRange{},
                                      /*workgroupAttributions=*/
                                      TypeRange{tileType});
  Value tile = launch.getWorkgroupAttributions().front();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&launch.getBody().front());
  Value tid = launch.getThreadIds().x;
  Value tv = indexConstant(b, loc, t);
  Value tx = arith::RemUIOp::create(b, loc, tid, tv);
  Value ty = arith::DivUIOp::create(b, loc, tid, tv);
  Value passStride = indexConstant(b, loc, shape.blockSize / t);
  Value rowsV = indexConstant(b, loc, rows),
        colsV = indexConstant(b, loc, cols);
  SmallVector<Value> tileSpace;
  for (int64_t d : dims.drop_back(2))
    tileSpace.push_back(indexConstant(b, loc, d));
  tileSpace.push_back(indexConstant(b, loc, tileRows));
  tileSpace.push_back(indexConstant(b, loc, tileCols));

  // Each thread visits rows ty, ty + blockSize/32, ... of the tile, at
  // column tx; `body` gets the tile row and the (in-range) source row and
  // column it stands for.
  auto forTileRows =
      [&](OpBuilder &ob, Location l, Value rowBase, Value colBase,
          Value numRows, Value numCols,
          function_ref<void(OpBuilder &, Location, Value, Value, Value)> body) {
        scf::ForOp::create(
            ob, l, ty, tv, passStride, ValueRange{},
            [&](OpBuilder &fb, Location fl, Value k, ValueRange) {
              Value r = arith::AddIOp::create(fb, fl, rowBase, k);
              Value c = arith::AddIOp::create(fb, fl, colBase, tx);
              Value inRange = arith::AndIOp::create(
                  fb, fl,
                  arith::CmpIOp::create(fb, fl, arith::CmpIPredicate::ult, r,
                                        numRows),
                  arith::CmpIOp::create(fb, fl, arith::CmpIPredicate::ult, c,
                                        numCols));
              scf::IfOp::create(fb, fl, inRange,
                                [&](OpBuilder &ib, Location il) {
                                  body(ib, il, k, r, c);
                                  scf::YieldOp::create(ib, il);
                                });
              scf::YieldOp::create(fb, fl);
            });
      };

  // Tiles are uniform across the block, as its barriers require.
  scf::ForOp::create(
      b, loc, launch.getBlockIds().x, indexConstant(b, loc, numTiles),
      launch.getGridSize().x, ValueRange{},
      [&](OpBuilder &ob, Location l, Value tileId, ValueRange) {
        SmallVector<Value> idx = delinearize(ob, l, tileId, tileSpace);
        Value r0 = arith::MulIOp::create(ob, l, idx[rank - 2], tv);
        Value c0 = arith::MulIOp::create(ob, l, idx[rank - 1], tv);
        SmallVector<Value> lead(ArrayRef(idx).drop_back(2));
        // In: tile[k][tx] = input[..., r0 + k, c0 + tx] (a warp reads one
        // row's 32 consecutive elements).
        forTileRows(
            ob, l, r0, c0, rowsV, colsV,
            [&](OpBuilder &ib, Location il, Value k, Value r, Value c) {
              SmallVector<Value> at(lead);
              at.append({r, c});
              Value v = memref::LoadOp::create(ib, il, input, at);
              Value raw = arith::BitcastOp::create(ib, il, bits, v);
              if (bits != word)
                raw = arith::ExtUIOp::create(ib, il, word, raw);
              memref::StoreOp::create(ib, il, raw, tile, ValueRange{k, tx});
            });
        gpu::BarrierOp::create(ob, l);
        // Out: output[..., c0 + k, r0 + tx] = tile[tx][k] (a warp writes one
        // output row's 32 consecutive elements).
        forTileRows(ob, l, c0, r0, colsV, rowsV,
                    [&](OpBuilder &ib, Location il, Value k, Value c, Value r) {
                      Value raw = memref::LoadOp::create(ib, il, tile,
                                                         ValueRange{tx, k});
                      if (bits != word)
                        raw = arith::TruncIOp::create(ib, il, bits, raw);
                      Value v = arith::BitcastOp::create(ib, il, et, raw);
                      SmallVector<Value> at(lead);
                      at.append({c, r});
                      memref::StoreOp::create(ib, il, v, output, at);
                    });
        // The next tile overwrites this one.
        gpu::BarrierOp::create(ob, l);
        scf::YieldOp::create(ob, l);
      });
  gpu::TerminatorOp::create(b, loc);
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
