//===- TransposingKernels.cpp - Elementwise ops with transposed outputs ---===//
//
// Implements isTiledTranspose, asTransposingCopy, isTransposingGeneric,
// buildTransposingLaunch (GPUKernelBuilders.h) and
// buildTransposingSiblingLaunch (ReductionKernels.h): Transformer Engine's
// cast-transpose, the scaled FP8 cast writing the tensor and its transpose
// (and, beside a full reduction, the amax too) in one pass over 32 x 32
// tiles, and a plain transposing copy the same way.
//
//===----------------------------------------------------------------------===//

#include "GenericVectors.h"
#include "ReductionKernels.h"
#include "VectorKernels.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "ds/Dialect/Linalg/IndexingMaps.h"

using namespace mlir;
using namespace mlir::ds::gpu_kernels;

namespace {

/// Tile rows a thread loads before it stores any (see the in-phase below):
/// 4, a 256-thread block's whole share of a 32 x 32 tile.
constexpr int64_t kRowsInFlight = 4;

/// The transposed outputs of `op` and the loop they are innermost along
/// (isTransposingGeneric); none when `op` is not one.
struct Transposed {
  SmallVector<OpOperand *> outputs;
  unsigned rowLoop = 0;
};
Transposed transposedOutputs(linalg::GenericOp op) {
  Transposed none, t;
  unsigned n = op.getNumLoops();
  if (!op.hasPureBufferSemantics() || n < 2 || op.getNumParallelLoops() != n ||
      llvm::any_of(op.getStaticLoopRanges(), ShapedType::isDynamic) ||
      !coalescedAlong(op, n - 1))
    return none;
  for (OpOperand &out : op.getDpsInitsMutable()) {
    auto type = dyn_cast<MemRefType>(out.get().getType());
    std::optional<unsigned> inner =
        ds::getInnermostLoop(op.getMatchingIndexingMap(&out));
    if (!type || !inner || !op.getMatchingIndexingMap(&out).isPermutation())
      return none;
    if (*inner == n - 1)
      continue;
    // One other loop for all transposed outputs, whose elements fit a
    // tile's bank words.
    Type et = type.getElementType();
    if ((!t.outputs.empty() && *inner != t.rowLoop) || !et.isIntOrFloat() ||
        et.getIntOrFloatBitWidth() < 8 || et.getIntOrFloatBitWidth() > 64)
      return none;
    t.rowLoop = *inner;
    t.outputs.push_back(&out);
  }
  return t;
}

/// Lanes of a thread's vector along a tile's columns at most: 4, so that
/// a tile of 32 rows of 32 vectors is 16 KiB of 32-bit words (an SM then
/// still holds 8 blocks of 256 threads).
constexpr int64_t kMaxTileVector = 4;

/// How a transposing op's iteration (and its reductions') moves vectors
/// along the innermost loop, the tiles' columns: the op's plan, whose
/// transposed outputs go to the tiles lane by lane, the full reduction's
/// and the column reduction's.
struct TileVectors {
  GenericVectors op;
  std::optional<GenericVectors> red, cols;
  SmallVector<Value> buffers; // every plan's, each once
};

std::optional<TileVectors> planTileVectors(linalg::GenericOp op,
                                           const Transposed &t, Reduction *red,
                                           Reduction *cols,
                                           const LaunchShape &shape) {
  if (!shape.vectorize)
    return std::nullopt;
  SmallVector<int64_t> sizes = op.getStaticLoopRanges();
  unsigned colLoop = sizes.size() - 1;
  std::optional<GenericVectors> opPlan = planGenericVectors(
      op, colLoop, sizes[colLoop], /*reduction=*/false, t.outputs);
  if (!opPlan)
    return std::nullopt;
  TileVectors plan{*opPlan, std::nullopt, std::nullopt, opPlan->buffers};
  int64_t width = std::min(opPlan->width, kMaxTileVector);
  if (red) {
    // The reduction's lanes are the op's: the same loops, or consecutive
    // elements of its last loop (iteration k of each is element k).
    SmallVector<int64_t> redRanges = red->op.getStaticLoopRanges();
    unsigned inner = red->shared->sameLoops ? colLoop : red->redDims.back();
    plan.red = planGenericVectors(red->op, inner, redRanges[inner],
                                  /*reduction=*/true);
    if (!plan.red)
      return std::nullopt;
    width = std::min(width, plan.red->width);
    appendBuffers(plan.buffers, plan.red->buffers);
  }
  if (cols) {
    // A lane per column: its own accumulator (the same loops as the op's).
    plan.cols = planGenericVectors(cols->op, colLoop, sizes[colLoop],
                                   /*reduction=*/true);
    if (!plan.cols)
      return std::nullopt;
    width = std::min(width, plan.cols->width);
    appendBuffers(plan.buffers, plan.cols->buffers);
  }
  // Narrowing keeps a plan valid (GenericVectors.cpp).
  plan.op.width = width;
  for (std::optional<GenericVectors> *other : {&plan.red, &plan.cols})
    if (*other)
      (*other)->width = width;
  return plan;
}

/// Elements of each transposed output a thread stores as one vector in the
/// out-phase, along the output's innermost dimension (the tile's rows): 16
/// bytes' worth of the widest of them, as far as the outputs' layouts and
/// the `rows` extent allow (chooseVectorWidth, as for every other vector
/// access), and at most a thread's share of a tile of 32 x 32 x `width`
/// elements, so that every warp has tile columns to write; 1: none. An FP8
/// output then takes 16-byte stores where it took 1-byte ones
/// (Transformer Engine's cast-transpose writes 8 bytes a thread).
int64_t outVectorWidth(const Transposed &t, int64_t rows, int64_t width,
                       const LaunchShape &shape) {
  if (!shape.vectorize)
    return 1;
  int64_t widest = 1;
  SmallVector<Value> buffers;
  for (OpOperand *out : t.outputs) {
    std::optional<int64_t> bytes = vectorElementBytes(
        cast<MemRefType>(out->get().getType()).getElementType());
    if (!bytes)
      return 1;
    widest = std::max(widest, *bytes);
    appendBuffers(buffers, out->get());
  }
  int64_t vector = chooseVectorWidth(widest, t.outputs.size(), rows, buffers);
  int64_t share = kTransposeTile * kTransposeTile * width / shape.blockSize;
  while (vector > share)
    vector /= 2;
  return vector >= 2 ? vector : 1;
}

/// The launch for both builders: `red` (null: none) is folded over the
/// elements of each block's tiles, `op` is its sibling or stands alone.
/// `cols` (null: none) is folded over each tile's columns: a thread folds
/// its column (or a lane its own) over its rows of the tile, the warps'
/// sums meet in shared memory after the in-phase, and the first 32 x W
/// threads each fold a column's in warp order and store it into row
/// (outer, tile row) of a [tile rows, columns] buffer, which a second
/// launch folds over the tile rows (a column reduction).
///
/// A tile is 32 rows (of the transposed outputs' innermost loop) by 32 x W
/// columns (of the op's innermost loop). In: warp w takes tile rows w,
/// w + 8, ... (with 256 threads), lane x the columns x*W to x*W + W - 1,
/// a vector of W elements when W > 1; all of a thread's rows are loaded
/// before any is stored (a store might alias a later row's input, so
/// otherwise each load would wait for the previous row's stores). The
/// plain outputs are stored in place, the transposed ones put in the tile
/// at [row][l*32 + x] for lane l, so that a warp's stores hit 32 banks.
/// After a barrier, out: with V elements a store (outVectorWidth), warp w
/// takes tile columns wV to wV + V - 1, then the next 8V (with 256
/// threads), ...; of each, 32 / V lanes write a run of 32 of a transposed
/// output's innermost dimension, lane x the tile rows (x mod 32/V)V to
/// (x mod 32/V)V + V - 1 of column x / (32/V) as a vector, which reads 32
/// banks. Vectors need 16-byte aligned buffers, checked in the kernel:
/// otherwise the same code with W = V = 1.
void buildLaunchOverTiles(OpBuilder &b, linalg::GenericOp op,
                          const LaunchShape &shape, Reduction *red,
                          Reduction *cols) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  Transposed t = transposedOutputs(op);
  SmallVector<int64_t> sizes = op.getStaticLoopRanges();
  unsigned n = sizes.size(), colLoop = n - 1, rowLoop = t.rowLoop;
  const int64_t tile = kTransposeTile;
  std::optional<TileVectors> vectors = planTileVectors(op, t, red, cols, shape);
  int64_t widest = vectors ? vectors->op.width : 1;
  // Tiles: the other loops in order, then the tile rows and columns.
  SmallVector<unsigned> outer;
  SmallVector<int64_t> outerSizes;
  for (unsigned d = 0; d < n; ++d)
    if (d != rowLoop && d != colLoop) {
      outer.push_back(d);
      outerSizes.push_back(sizes[d]);
    }
  auto tileSpaceOf = [&](int64_t width) {
    SmallVector<int64_t> space(outerSizes);
    space.push_back(llvm::divideCeil(sizes[rowLoop], tile));
    space.push_back(llvm::divideCeil(sizes[colLoop], tile * width));
    return space;
  };
  auto countOf = [](ArrayRef<int64_t> space) {
    int64_t count = 1;
    for (int64_t s : space)
      count *= s;
    return count;
  };
  int64_t numTiles = countOf(tileSpaceOf(widest));

  // The tiles: 32 rows of 32 x widest raw words, and a padding word that
  // staggers a tile column across the banks.
  SmallVector<Type> tileTypes;
  auto workgroup = gpu::AddressSpaceAttr::get(
      ctx, gpu::GPUDialect::getWorkgroupAddressSpace());
  for (OpOperand *out : t.outputs) {
    MemRefType word = transposeTileType(
        cast<MemRefType>(out->get().getType()).getElementType());
    tileTypes.push_back(MemRefType::get({tile, tile * widest + 1},
                                        word.getElementType(), AffineMap(),
                                        workgroup));
  }
  // Each thread's running reduction, kept in shared memory between tiles
  // rather than carried in a register across the tiles' barriers (which
  // the host emulation of kernels cannot split a loop at).
  if (red)
    tileTypes.push_back(MemRefType::get(
        {shape.blockSize}, red->identity.getType(), AffineMap(), workgroup));
  // Each warp's column sums of the tile, a column (tile*widest) per word.
  int64_t warps = shape.blockSize / kTransposeTile;
  if (cols)
    tileTypes.push_back(MemRefType::get({warps, tile * widest},
                                        cols->identity.getType(), AffineMap(),
                                        workgroup));
  // With a reduction, every block writes one partial result, so the grid
  // is fixed (no more blocks than tiles: none is left without one), and
  // only as large as fills the GPU: its partials are folded by one block.
  int64_t numBlocks =
      std::min({numTiles, shape.maxBlocks, red ? kBlocksToFill : numTiles});
  Value partials = red ? red->allocPartials(b, loc, numBlocks) : Value();
  // A row of column sums per tile row of each index of the outer loops
  // that `cols` reduces; the outer loops it keeps index the row's columns
  // with the tile's (a [tile rows, outputs...] buffer).
  SmallVector<unsigned> keptOuter, reducedOuter; // positions in `outer`
  int64_t tileRows = llvm::divideCeil(sizes[rowLoop], tile);
  if (cols)
    for (auto [i, d] : llvm::enumerate(outer)) {
      bool kept = llvm::is_contained(cols->parDims, d);
      (kept ? keptOuter : reducedOuter).push_back(i);
      if (!kept)
        tileRows *= outerSizes[i];
    }
  Value colPartials = cols ? cols->allocPartials(b, loc, tileRows,
                                                 /*splitFirst=*/true)
                           : Value();
  Value blocks = red ? indexConstant(b, loc, numBlocks)
                     : clampBlocks(b, loc, indexConstant(b, loc, numTiles),
                                   shape.maxBlocks);
  Value one = indexConstant(b, loc, 1);
  auto launch = gpu::LaunchOp::create(
      b, loc, blocks, one, one, indexConstant(b, loc, shape.blockSize), one,
      one, /*dynamicSharedMemorySize=*/Value(), /*asyncTokenType=*/Type(),
      /*asyncDependencies=*/ValueRange{}, tileTypes);
  ValueRange tiles = launch.getWorkgroupAttributions();
  Value running, colSums;
  if (cols) {
    colSums = tiles.back();
    tiles = tiles.drop_back();
  }
  if (red) {
    running = tiles.back();
    tiles = tiles.drop_back();
  }
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&launch.getBody().front());
  Value tid = launch.getThreadIds().x;
  TileThread thread = tileThread(b, loc, launch, shape.blockSize);
  Value tv = thread.side, tx = thread.tx, ty = thread.ty,
        passStride = thread.passStride;
  Value rowsV = indexConstant(b, loc, sizes[rowLoop]),
        colsV = indexConstant(b, loc, sizes[colLoop]);
  Value lastRowV = indexConstant(b, loc, sizes[rowLoop] - 1);
  // A thread's tile rows in the in-phase, all of them in groups of
  // kRowsInFlight at most.
  int64_t rowsPerGroup = std::min<int64_t>(
      kRowsInFlight, llvm::divideCeil(tile, shape.blockSize / kTransposeTile));
  SmallVector<Value> loopSizesV;
  for (int64_t s : sizes)
    loopSizesV.push_back(indexConstant(b, loc, s));
  if (red)
    memref::StoreOp::create(b, loc,
                            arith::ConstantOp::create(b, loc, red->identity),
                            running, ValueRange{tid});

  // The loop indices of `op` at tile element (row, col).
  auto ivsAt = [&](ArrayRef<Value> outerIdx, Value row, Value col) {
    SmallVector<Value> ivs(n);
    for (auto [i, d] : llvm::enumerate(outer))
      ivs[d] = outerIdx[i];
    ivs[rowLoop] = row;
    ivs[colLoop] = col;
    return ivs;
  };
  // The reduction's loop indices at `op`'s: the same loops, or the same
  // row-major position of a reshaped view.
  auto reductionIvs = [&](OpBuilder &fb, Location fl, ArrayRef<Value> ivs) {
    if (red->shared->sameLoops)
      return SmallVector<Value>(ivs);
    Value linear = indexConstant(fb, fl, 0);
    for (auto [iv, size] : llvm::zip(ivs, loopSizesV))
      linear = arith::AddIOp::create(
          fb, fl, arith::MulIOp::create(fb, fl, linear, size), iv);
    return red->loopIndices({}, delinearize(fb, fl, linear, red->redSizes));
  };
  auto lessThan = [](OpBuilder &fb, Location fl, Value a, Value bound) {
    return arith::CmpIOp::create(fb, fl, arith::CmpIPredicate::ult, a, bound)
        .getResult();
  };
  auto yield = cast<linalg::YieldOp>(op.getBody()->getTerminator());

  // The tile loop with W lanes a thread (`plan`: the vectors; null, W = 1:
  // one element) in, and V = `outWidth` out.
  auto emitTileLoop = [&](OpBuilder &tb, Location tl, const TileVectors *plan,
                          int64_t outWidth) {
    int64_t width = plan ? plan->op.width : 1;
    Value widthV = indexConstant(tb, tl, width);
    SmallVector<Value> tileSpaceV;
    for (int64_t s : tileSpaceOf(width))
      tileSpaceV.push_back(indexConstant(tb, tl, s));
    Value tileCols = indexConstant(tb, tl, tile * width);
    // The last column a thread's first lane may take: its vector ends at
    // the last column (the extent is a multiple of W).
    Value lastColV = indexConstant(tb, tl, sizes[colLoop] - width);
    // Tiles are uniform across the block, as its barriers require.
    scf::ForOp::create(
        tb, tl, launch.getBlockIds().x,
        indexConstant(tb, tl, countOf(tileSpaceOf(width))),
        launch.getGridSize().x, ValueRange{},
        [&](OpBuilder &ob, Location l, Value tileId, ValueRange) {
          // Carried over the thread's rows: the full reduction's running
          // value, then a column sum per lane (from the identity each tile).
          SmallVector<Value> acc;
          if (red)
            acc.push_back(
                memref::LoadOp::create(ob, l, running, ValueRange{tid}));
          size_t colAt = acc.size();
          if (cols)
            acc.append(width, arith::ConstantOp::create(ob, l, cols->identity));
          SmallVector<Value> idx = delinearize(ob, l, tileId, tileSpaceV);
          SmallVector<Value> outerIdx(ArrayRef(idx).drop_back(2));
          Value r0 = arith::MulIOp::create(ob, l, idx[idx.size() - 2], tv);
          Value c0 = arith::MulIOp::create(ob, l, idx.back(), tileCols);
          Value firstCol = arith::AddIOp::create(
              ob, l, c0,
              width > 1 ? arith::MulIOp::create(ob, l, tx, widthV).getResult()
                        : tx);
          Value groupStride = arith::MulIOp::create(
              ob, l, passStride, indexConstant(ob, l, rowsPerGroup));
          ValueRange folded =
              scf::ForOp::create(
                  ob, l, ty, tv, groupStride, acc,
                  [&](OpBuilder &fb, Location fl, Value k0, ValueRange accIn) {
                    SmallVector<Value> carried(accIn);
                    struct Row {
                      Value k, ok;
                      SmallVector<Value> ivs;
                      // Each yielded value: one per lane.
                      SmallVector<SmallVector<Value>> lanes;
                    };
                    SmallVector<Row> group(rowsPerGroup);
                    for (auto [j, row] : llvm::enumerate(group)) {
                      row.k = arith::AddIOp::create(
                          fb, fl, k0,
                          arith::MulIOp::create(
                              fb, fl, passStride,
                              indexConstant(fb, fl, static_cast<int64_t>(j))));
                      Value r = arith::AddIOp::create(fb, fl, r0, row.k);
                      row.ok = arith::AndIOp::create(
                          fb, fl,
                          arith::AndIOp::create(fb, fl,
                                                lessThan(fb, fl, row.k, tv),
                                                lessThan(fb, fl, r, rowsV)),
                          lessThan(fb, fl, firstCol, colsV));
                      // In range, the clamped indices are the element's
                      // own; out of range, valid ones whose results are
                      // dropped.
                      row.ivs = ivsAt(
                          outerIdx, arith::MinUIOp::create(fb, fl, r, lastRowV),
                          arith::MinUIOp::create(fb, fl, firstCol, lastColV));
                      // The column sums take what the op loaded (or was
                      // given) of the tensor they share, and fold where the
                      // row is in range.
                      Value inRange = row.ok;
                      auto foldColumns = [&](ArrayRef<Value> next) {
                        for (auto [k, v] : llvm::enumerate(next))
                          carried[colAt + k] = arith::SelectOp::create(
                              fb, fl, inRange, v, carried[colAt + k]);
                      };
                      if (plan) {
                        SmallVector<GivenVector> given;
                        if (red) {
                          SmallVector<Value> loaded;
                          Value next = emitGenericVector(
                              fb, fl, *plan->red, reductionIvs(fb, fl, row.ivs),
                              red, carried.front(), {}, &loaded);
                          carried.front() = arith::SelectOp::create(
                              fb, fl, row.ok, next, carried.front());
                          given = sharedVectors(*red, loaded);
                        }
                        SmallVector<Value> opLoaded;
                        emitGenericVector(fb, fl, plan->op, row.ivs, nullptr,
                                          {}, given, cols ? &opLoaded : nullptr,
                                          &row.lanes);
                        if (cols)
                          foldColumns(emitGenericVectorLanes(
                              fb, fl, *plan->cols, row.ivs, *cols,
                              ArrayRef(carried).drop_front(colAt),
                              vectorsReadBy(op, opLoaded, cols->op)));
                        continue;
                      }
                      IRMapping map;
                      if (red) {
                        IRMapping redMap;
                        redMap.map(red->outArg, carried.front());
                        cloneBodyAt(fb, fl, red->op,
                                    reductionIvs(fb, fl, row.ivs), redMap);
                        carried.front() = arith::SelectOp::create(
                            fb, fl, row.ok,
                            redMap.lookup(red->comb->getResult(0)),
                            carried.front());
                        BlockArgument mine = red->op.getMatchingBlockArgument(
                            red->shared->reduction);
                        if (red->shared->sameLoops)
                          mapElementsReadBy(red->op, redMap, op, map);
                        else if (redMap.contains(mine))
                          map.map(op.getMatchingBlockArgument(
                                      red->shared->elementwise),
                                  redMap.lookup(mine));
                      }
                      // An element the column sums read is loaded, whether
                      // or not the op uses it.
                      cloneBodyAt(fb, fl, op, row.ivs, map,
                                  /*maskReads=*/!cols);
                      for (Value v : yield.getValues())
                        row.lanes.push_back({map.lookupOrDefault(v)});
                      if (cols) {
                        IRMapping colMap;
                        colMap.map(cols->outArg, carried[colAt]);
                        mapElementsReadBy(op, map, cols->op, colMap);
                        cloneBodyAt(fb, fl, cols->op, row.ivs, colMap);
                        foldColumns(colMap.lookup(cols->comb->getResult(0)));
                      }
                    }
                    // Then the group's stores.
                    for (Row &row : group) {
                      RowTeam::emitIf(
                          fb, fl, row.ok, [&](OpBuilder &ib, Location il) {
                            for (auto [out, lanes] : llvm::zip(
                                     op.getDpsInitsMutable(), row.lanes)) {
                              auto *it = llvm::find(t.outputs, &out);
                              if (it != t.outputs.end()) {
                                for (auto [lane, v] : llvm::enumerate(lanes)) {
                                  Value col = tx;
                                  if (lane > 0)
                                    col = arith::AddIOp::create(
                                        ib, il, tx,
                                        indexConstant(
                                            ib, il,
                                            static_cast<int64_t>(lane) * tile));
                                  storeToTile(ib, il, v,
                                              tiles[it - t.outputs.begin()],
                                              row.k, col);
                                }
                                continue;
                              }
                              if (plan) {
                                storeVectorOutput(ib, il, plan->op, out, lanes,
                                                  row.ivs);
                                continue;
                              }
                              memref::StoreOp::create(
                                  ib, il, lanes.front(), out.get(),
                                  applyMap(ib, il,
                                           op.getMatchingIndexingMap(&out),
                                           row.ivs));
                            }
                          });
                    }
                    scf::YieldOp::create(fb, fl, carried);
                  })
                  .getResults();
          if (red)
            memref::StoreOp::create(ob, l, folded.front(), running,
                                    ValueRange{tid});
          // The thread's column sums at their tile columns (lane k of
          // thread x: column x*W + k), in its warp's row.
          for (int64_t k = 0; cols && k < width; ++k) {
            Value col = tx;
            if (width > 1)
              col = arith::AddIOp::create(
                  ob, l, arith::MulIOp::create(ob, l, tx, widthV),
                  indexConstant(ob, l, k));
            memref::StoreOp::create(ob, l, folded[colAt + k], colSums,
                                    ValueRange{ty, col});
          }
          gpu::BarrierOp::create(ob, l);
          // Thread j < 32 x W folds tile column j over the warps, in
          // order, into the tile row's partial sums.
          if (cols) {
            Value col = arith::AddIOp::create(ob, l, c0, tid);
            Value ok =
                arith::AndIOp::create(ob, l, lessThan(ob, l, tid, tileCols),
                                      lessThan(ob, l, col, colsV));
            RowTeam::emitIf(ob, l, ok, [&](OpBuilder &ib, Location il) {
              Value sum = cols->foldColumn(ib, il, colSums, warps, tid);
              // The tile row: the reduced outer indices, then the tile's
              // row of tiles, row-major.
              Value tileRow = indexConstant(ib, il, 0);
              SmallVector<Value> at;
              auto append = [&](Value i, int64_t size) {
                tileRow = arith::AddIOp::create(
                    ib, il,
                    arith::MulIOp::create(ib, il, tileRow,
                                          indexConstant(ib, il, size)),
                    i);
              };
              for (unsigned i : reducedOuter)
                append(idx[i], outerSizes[i]);
              append(idx[idx.size() - 2],
                     llvm::divideCeil(sizes[rowLoop], tile));
              at.push_back(tileRow);
              for (unsigned i : keptOuter)
                at.push_back(idx[i]);
              at.push_back(col);
              memref::StoreOp::create(ib, il, sum, colPartials, at);
            });
          }
          // Out: tile columns ty*V, ty*V + blockSize/32*V, ..., of each
          // the element (r0 + the row, the column's) and the V - 1 after
          // it, written where the transposed outputs' maps put it (warp
          // lanes along their innermost dimension). Tile columns are a
          // multiple of V (both powers of two, V <= 16).
          Value outV = indexConstant(ob, l, outWidth);
          Value lanesPerColumn = indexConstant(ob, l, tile / outWidth);
          Value firstRow = arith::MulIOp::create(
              ob, l, arith::RemUIOp::create(ob, l, tx, lanesPerColumn), outV);
          Value columnInStep =
              arith::DivUIOp::create(ob, l, tx, lanesPerColumn);
          scf::ForOp::create(
              ob, l, arith::MulIOp::create(ob, l, ty, outV), tileCols,
              arith::MulIOp::create(ob, l, passStride, outV), ValueRange{},
              [&](OpBuilder &fb, Location fl, Value qStep, ValueRange) {
                Value q = arith::AddIOp::create(fb, fl, qStep, columnInStep);
                Value r = arith::AddIOp::create(fb, fl, r0, firstRow);
                Value c = q;
                if (width > 1)
                  c = arith::AddIOp::create(
                      fb, fl,
                      arith::MulIOp::create(
                          fb, fl, arith::RemUIOp::create(fb, fl, q, tv),
                          widthV),
                      arith::DivUIOp::create(fb, fl, q, tv));
                c = arith::AddIOp::create(fb, fl, c0, c);
                // The rows are a multiple of V, so a vector that starts in
                // range ends in range.
                Value ok =
                    arith::AndIOp::create(fb, fl, lessThan(fb, fl, r, rowsV),
                                          lessThan(fb, fl, c, colsV));
                RowTeam::emitIf(fb, fl, ok, [&](OpBuilder &ib, Location il) {
                  SmallVector<Value> ivs = ivsAt(outerIdx, r, c);
                  for (auto [out, tileMem] : llvm::zip(t.outputs, tiles)) {
                    Type et =
                        cast<MemRefType>(out->get().getType()).getElementType();
                    SmallVector<Value> idx =
                        applyMap(ib, il, op.getMatchingIndexingMap(out), ivs);
                    SmallVector<Value> lanes;
                    for (int64_t j = 0; j < outWidth; ++j) {
                      Value row = firstRow;
                      if (j > 0)
                        row = arith::AddIOp::create(ib, il, firstRow,
                                                    indexConstant(ib, il, j));
                      lanes.push_back(
                          loadFromTile(ib, il, et, tileMem, row, q));
                    }
                    storeLanes(ib, il, lanes, out->get(), idx);
                  }
                });
                scf::YieldOp::create(fb, fl);
              });
          // The next tile overwrites these.
          gpu::BarrierOp::create(ob, l);
          scf::YieldOp::create(ob, l);
        });
  };
  // Vectors in and out where the buffers allow, each where it can.
  int64_t outWidth =
      outVectorWidth(t, sizes[rowLoop], vectors ? vectors->op.width : 1, shape);
  SmallVector<Value> alignedBuffers;
  if (vectors)
    alignedBuffers = vectors->buffers;
  if (outWidth > 1)
    for (OpOperand *out : t.outputs)
      appendBuffers(alignedBuffers, out->get());
  const TileVectors *in = vectors ? &*vectors : nullptr;
  if (!alignedBuffers.empty()) {
    scf::IfOp::create(
        b, loc, buffersAligned(b, loc, alignedBuffers),
        [&](OpBuilder &ib, Location il) {
          emitTileLoop(ib, il, in, outWidth);
          scf::YieldOp::create(ib, il);
        },
        [&](OpBuilder &ib, Location il) {
          emitTileLoop(ib, il, nullptr, 1);
          scf::YieldOp::create(ib, il);
        });
  } else {
    emitTileLoop(b, loc, nullptr, 1);
  }
  if (red) {
    Value mine = memref::LoadOp::create(b, loc, running, ValueRange{tid});
    Value total = gpu::AllReduceOp::create(
        b, loc, mine,
        gpu::AllReduceOperationAttr::get(b.getContext(), red->kind),
        /*uniform=*/true);
    Value isFirst = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid,
                                          indexConstant(b, loc, 0));
    scf::IfOp::create(b, loc, isFirst, [&](OpBuilder &ib, Location il) {
      memref::StoreOp::create(ib, il, total, partials,
                              ValueRange{launch.getBlockIds().x});
      scf::YieldOp::create(ib, il);
    });
  }
  gpu::TerminatorOp::create(b, loc);
  // The column sums' fold first: its launch has shared memory, which
  // ds-merge-gpu-launches does not join, and the full reduction's one-block
  // fold then still joins the one-block launches after it.
  b.setInsertionPointAfter(launch);
  if (cols)
    foldColumnPartials(b, loc, {cols}, {colPartials}, tileRows, shape);
  if (red)
    red->foldPartials(b, loc, partials, shape);
}

} // namespace

bool mlir::ds::gpu_kernels::isTiledTranspose(linalg::TransposeOp op) {
  if (!op.hasPureBufferSemantics() ||
      !ds::swapsInnermostTwo(op.getPermutation()))
    return false;
  auto in = cast<MemRefType>(op.getInput().getType());
  Type et = in.getElementType();
  return in.hasStaticShape() && et.isIntOrFloat() &&
         et.getIntOrFloatBitWidth() >= 8 && et.getIntOrFloatBitWidth() <= 64;
}

linalg::GenericOp
mlir::ds::gpu_kernels::asTransposingCopy(OpBuilder &b, linalg::TransposeOp op) {
  // Loops over the input: output dimension j is input dimension perm[j].
  unsigned rank = op.getPermutation().size();
  MLIRContext *ctx = b.getContext();
  SmallVector<unsigned> perm(op.getPermutation().begin(),
                             op.getPermutation().end());
  SmallVector<AffineMap> maps = {AffineMap::getMultiDimIdentityMap(rank, ctx),
                                 AffineMap::getPermutationMap(perm, ctx)};
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  return linalg::GenericOp::create(
      b, op.getLoc(), TypeRange{}, ValueRange{op.getInput()},
      ValueRange{op.getInit()}, maps, iterators,
      [](OpBuilder &nb, Location loc, ValueRange args) {
        linalg::YieldOp::create(nb, loc, args.front());
      });
}

bool mlir::ds::gpu_kernels::isTransposingGeneric(linalg::GenericOp op) {
  return !transposedOutputs(op).outputs.empty();
}

std::optional<unsigned>
mlir::ds::gpu_kernels::transposedRowLoop(linalg::GenericOp op) {
  Transposed t = transposedOutputs(op);
  if (t.outputs.empty())
    return std::nullopt;
  return t.rowLoop;
}

/// `columns` taken apart as a reduction that reads `op`'s tensor.
static std::optional<Reduction>
columnReduction(OpBuilder &b, linalg::GenericOp columns, linalg::GenericOp op) {
  if (!columns)
    return std::nullopt;
  assert(canShareColumnTiles(columns, op) && "not a column sibling");
  Reduction cols(b, columns);
  cols.shared = sharedInput(columns, op);
  return cols;
}

void mlir::ds::gpu_kernels::buildTransposingLaunch(OpBuilder &b,
                                                   linalg::GenericOp op,
                                                   const LaunchShape &shape,
                                                   linalg::GenericOp columns) {
  std::optional<Reduction> cols = columnReduction(b, columns, op);
  buildLaunchOverTiles(b, op, shape, /*red=*/nullptr, cols ? &*cols : nullptr);
}

void mlir::ds::gpu_kernels::buildTransposingSiblingLaunch(
    OpBuilder &b, Reduction &red, const LaunchShape &shape,
    linalg::GenericOp columns) {
  std::optional<Reduction> cols = columnReduction(b, columns, red.sibling);
  buildLaunchOverTiles(b, red.sibling, shape, &red, cols ? &*cols : nullptr);
}
