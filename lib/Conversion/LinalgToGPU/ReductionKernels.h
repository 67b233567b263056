//===- ReductionKernels.h - Parallel reductions on the GPU ------*- C++ -*-===//
//
// The pieces of the reduction kernels that row groups (RowGroupKernels.cpp)
// reuse: a reduction generic taken apart, the threads that share a row, and
// the launch over rows. Internal to lib/Conversion/LinalgToGPU.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_CONVERSION_LINALGTOGPU_REDUCTIONKERNELS_H
#define DS_LIB_CONVERSION_LINALGTOGPU_REDUCTIONKERNELS_H

#include "GPUKernelBuilders.h"
#include "GenericVectors.h"
#include "KernelUtils.h"
#include "ReductionSiblings.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::ds::gpu_kernels {

/// A warp's width on NVIDIA GPUs: the lanes gpu.subgroup_reduce combines.
constexpr int64_t kWarpSize = 32;

/// Blocks that fill a large GPU (an H100/H200 runs 132 SMs x 8 blocks of
/// 256 threads at once): a reduction with fewer outputs than this splits
/// each output's range over several blocks.
constexpr int64_t kBlocksToFill = 1024;

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
  // An all-parallel generic that runs at each element the reduction
  // combines (ReductionSiblings.h), and the tensor they share; null when
  // none.
  linalg::GenericOp sibling;
  std::optional<SharedInput> shared;

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

  /// `acc` and `v` combined by a clone of the combiner.
  Value combine(OpBuilder &b, Value acc, Value v) const {
    IRMapping fold;
    fold.map(outArg, acc);
    fold.map(x, v);
    return b.clone(*comb, fold)->getResult(0);
  }

  /// Column `col` of a `[rows, columns]` buffer of partial results (a row
  /// per warp or team) folded from the identity, in row order.
  Value foldColumn(OpBuilder &b, Location loc, Value buffer, int64_t rows,
                   Value col) const {
    Value sum = arith::ConstantOp::create(b, loc, identity);
    for (int64_t r = 0; r < rows; ++r)
      sum = combine(
          b, sum,
          memref::LoadOp::create(b, loc, buffer,
                                 ValueRange{indexConstant(b, loc, r), col}));
    return sum;
  }

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
  /// `acc` combined with the element at loop indices `ivs` (number
  /// `linear` in row-major order): the body, its inputs loaded where their
  /// maps say; and the sibling's iteration there, if there is one.
  Value combineElement(OpBuilder &b, Location loc, ArrayRef<Value> ivs,
                       Value linear, Value acc) {
    IRMapping map;
    map.map(outArg, acc);
    // The sibling takes the shared tensor's element from `map`.
    cloneBodyAt(b, loc, op, ivs, map, /*maskReads=*/!sibling);
    if (sibling)
      computeSibling(b, loc, ivs, linear, map);
    return map.lookup(comb->getResult(0));
  }

  /// The sibling's iteration at the reduction's element `ivs` (`linear`),
  /// its results stored. The element of the tensor the two share is not
  /// loaded again (`map`: the reduction's body cloned there).
  void computeSibling(OpBuilder &b, Location loc, ArrayRef<Value> ivs,
                      Value linear, const IRMapping &map) {
    SmallVector<Value> siblingIvs(ivs);
    if (!shared->sameLoops) {
      SmallVector<Value> sizes;
      for (int64_t size : sibling.getStaticLoopRanges())
        sizes.push_back(indexConstant(b, loc, size));
      siblingIvs = delinearize(b, loc, linear, sizes);
    }
    IRMapping siblingMap;
    BlockArgument mine = op.getMatchingBlockArgument(shared->reduction);
    if (shared->sameLoops)
      mapElementsReadBy(op, map, sibling, siblingMap);
    else if (map.contains(mine))
      siblingMap.map(sibling.getMatchingBlockArgument(shared->elementwise),
                     map.lookup(mine));
    cloneBodyAt(b, loc, sibling, siblingIvs, siblingMap, /*maskReads=*/true);
    storeYieldedAt(b, loc, sibling, siblingIvs, siblingMap);
  }

  /// The elements from `first` to `end` by `step`, folded from `init` (null:
  /// the identity), for output `parIdx`.
  Value foldRange(OpBuilder &b, Location loc, ArrayRef<Value> parIdx,
                  Value first, Value end, Value step, Value init = {}) {
    if (!init)
      init = arith::ConstantOp::create(b, loc, identity);
    auto loop = scf::ForOp::create(
        b, loc, first, end, step, ValueRange{init},
        [&](OpBuilder &rb, Location l, Value r, ValueRange acc) {
          SmallVector<Value> redIdx = delinearize(rb, l, r, redSizes);
          scf::YieldOp::create(
              rb, l,
              combineElement(rb, l, loopIndices(parIdx, redIdx), r, acc[0]));
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
    memref::StoreOp::create(b, loc, combine(b, old, total), memOut(), idx);
  }

  /// A buffer for `split` partial results per output: [outputs..., split],
  /// or with `splitFirst` [split, outputs...] (a row of outputs per part).
  Value allocPartials(OpBuilder &b, Location loc, int64_t split,
                      bool splitFirst = false) {
    SmallVector<int64_t> shape(parStatic);
    shape.insert(splitFirst ? shape.begin() : shape.end(), split);
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
          linalg::YieldOp::create(fb, l, combine(fb, args[1], args[0]));
        });
    if (init)
      finish->setAttr(kConstantInitAttr, init);
    buildReductionLaunch(b, finish, shape);
    finish->erase();
    memref::DeallocOp::create(b, loc, partials);
  }
};

/// The threads that share one row (an output of a reduction, a row of a row
/// group) and how they combine their partial results: a whole block, or a
/// warp.
struct RowTeam {
  Value row;    // the team's row (a warp past the last row: the last row)
  Value first;  // this thread's first element of the row
  Value stride; // the distance to its next one
  Value leader; // i1: the one thread that writes the row's single values
  Value real;   // i1: whether the row is the team's own; null when all are
  Value index;  // the team's place in its block (a warp's thread y; else 0)
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

/// Threads per block for a block per output of `numRed` elements (-1:
/// dynamic): see ReductionKernels.cpp.
int64_t threadsPerRow(int64_t numRed, const LaunchShape &shape);

/// Whether `numOut` outputs (rows) of `numRed` elements each get a warp
/// each rather than a block: see ReductionKernels.cpp.
bool warpPerRow(int64_t numOut, int64_t numRed, const LaunchShape &shape);

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
/// `extras` changes the launch for a row group's column sums.
struct RowLaunchExtras {
  int64_t warpsPerBlock = 0; // with `warp`; 0: blockSize / 32
  int64_t maxBlocks = 0;     // 0: shape.maxBlocks
  SmallVector<Type> workgroup;
  /// Emitted before and after the loop over the rows, in every thread.
  function_ref<void(OpBuilder &, Location, gpu::LaunchOp)> before, after;
};
void buildRowLaunch(OpBuilder &b, Location loc, int64_t numRows, bool warp,
                    int64_t threads, const LaunchShape &shape,
                    function_ref<void(OpBuilder &, Location, RowTeam &)> body,
                    const RowLaunchExtras &extras = {});

/// The column sums of several reductions over the same outputs and `rows`:
/// `partials[k]` ([rows, outputs...], a row of partial sums per tile row or
/// block) folded into the output of `cols[k]` in one launch, then freed.
/// The outputs' innermost dimension is the columns. A block takes 32
/// columns (of one index of the other output dimensions), a lane one of
/// them, and its warps every (blockSize / 32)-th row; the warps'
/// sums meet in shared memory and the first warp folds them in warp order,
/// so each column is summed in a fixed order.
void foldColumnPartials(OpBuilder &b, Location loc, ArrayRef<Reduction *> cols,
                        ArrayRef<Value> partials, int64_t rows,
                        const LaunchShape &shape);

/// A full reduction whose sibling is a transposing generic
/// (isTransposingGeneric): buildTransposingLaunch's tiles, each block
/// folding the reduction over the elements of its tiles into one partial
/// result, which a second launch folds into the output.
/// `columns`: a column reduction over the same tiles
/// (buildTransposingLaunch's), or none.
void buildTransposingSiblingLaunch(OpBuilder &b, Reduction &red,
                                   const LaunchShape &shape,
                                   linalg::GenericOp columns = {});

} // namespace mlir::ds::gpu_kernels

#endif // DS_LIB_CONVERSION_LINALGTOGPU_REDUCTIONKERNELS_H
