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

#include "ReductionKernels.h"

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

/// The launch for both builders: `red` (null: none) is folded over the
/// elements of each block's tiles, `op` is its sibling or stands alone.
void buildLaunchOverTiles(OpBuilder &b, linalg::GenericOp op,
                          const LaunchShape &shape, Reduction *red) {
  Location loc = op.getLoc();
  Transposed t = transposedOutputs(op);
  SmallVector<int64_t> sizes = op.getStaticLoopRanges();
  unsigned n = sizes.size(), colLoop = n - 1, rowLoop = t.rowLoop;
  const int64_t tile = kTransposeTile;
  // Tiles: the other loops in order, then the tile rows and columns.
  SmallVector<unsigned> outer;
  SmallVector<int64_t> tileSpace;
  for (unsigned d = 0; d < n; ++d)
    if (d != rowLoop && d != colLoop) {
      outer.push_back(d);
      tileSpace.push_back(sizes[d]);
    }
  tileSpace.push_back(llvm::divideCeil(sizes[rowLoop], tile));
  tileSpace.push_back(llvm::divideCeil(sizes[colLoop], tile));
  int64_t numTiles = 1;
  for (int64_t s : tileSpace)
    numTiles *= s;

  SmallVector<Type> tileTypes;
  for (OpOperand *out : t.outputs)
    tileTypes.push_back(transposeTileType(
        cast<MemRefType>(out->get().getType()).getElementType()));
  // Each thread's running reduction, kept in shared memory between tiles
  // rather than carried in a register across the tiles' barriers (which
  // the host emulation of kernels cannot split a loop at).
  if (red)
    tileTypes.push_back(MemRefType::get(
        {shape.blockSize}, red->identity.getType(), AffineMap(),
        gpu::AddressSpaceAttr::get(
            b.getContext(), gpu::GPUDialect::getWorkgroupAddressSpace())));
  // With a reduction, every block writes one partial result, so the grid
  // is fixed (no more blocks than tiles: none is left without one), and
  // only as large as fills the GPU: its partials are folded by one block.
  int64_t numBlocks =
      std::min({numTiles, shape.maxBlocks, red ? kBlocksToFill : numTiles});
  Value partials = red ? red->allocPartials(b, loc, numBlocks) : Value();
  Value blocks = red ? indexConstant(b, loc, numBlocks)
                     : clampBlocks(b, loc, indexConstant(b, loc, numTiles),
                                   shape.maxBlocks);
  Value one = indexConstant(b, loc, 1);
  auto launch = gpu::LaunchOp::create(
      b, loc, blocks, one, one, indexConstant(b, loc, shape.blockSize), one,
      one, /*dynamicSharedMemorySize=*/Value(), /*asyncTokenType=*/Type(),
      /*asyncDependencies=*/ValueRange{}, tileTypes);
  ValueRange tiles = launch.getWorkgroupAttributions();
  Value running;
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
  Value lastRowV = indexConstant(b, loc, sizes[rowLoop] - 1),
        lastColV = indexConstant(b, loc, sizes[colLoop] - 1);
  // A thread's tile rows in the in-phase, all of them in groups of
  // kRowsInFlight at most.
  int64_t rowsPerGroup = std::min<int64_t>(
      kRowsInFlight, llvm::divideCeil(tile, shape.blockSize / kTransposeTile));
  SmallVector<Value> tileSpaceV, loopSizesV, redSizesV;
  for (int64_t s : tileSpace)
    tileSpaceV.push_back(indexConstant(b, loc, s));
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
  // Rows ty, ty + blockSize/32, ... of a tile at column tx: `position`
  // gives the element (row, column) a tile row stands for; `body` runs on
  // those in range, with the value carried through the rows, and returns
  // the new one.
  using Position = std::pair<Value, Value>;
  auto forTileRows =
      [&](OpBuilder &ob, Location l, ValueRange init,
          function_ref<Position(OpBuilder &, Location, Value)> position,
          function_ref<SmallVector<Value>(OpBuilder &, Location, Value, Value,
                                          Value, ValueRange)>
              body) {
        return scf::ForOp::create(
                   ob, l, ty, tv, passStride, init,
                   [&](OpBuilder &fb, Location fl, Value k, ValueRange acc) {
                     Position rc = position(fb, fl, k);
                     Value r = rc.first, c = rc.second;
                     Value ok = arith::AndIOp::create(
                         fb, fl,
                         arith::CmpIOp::create(
                             fb, fl, arith::CmpIPredicate::ult, r, rowsV),
                         arith::CmpIOp::create(
                             fb, fl, arith::CmpIPredicate::ult, c, colsV));
                     auto branch =
                         scf::IfOp::create(fb, fl, TypeRange(ValueRange(acc)),
                                           ok, /*withElseRegion=*/true);
                     // Each branch yields the carried value (the body's
                     // result, or unchanged out of range).
                     auto fill = [&](Block *block, bool then) {
                       if (!block->empty())
                         block->back().erase();
                       OpBuilder ib = OpBuilder::atBlockEnd(block);
                       SmallVector<Value> out(acc);
                       if (then)
                         out = body(ib, fl, k, r, c, acc);
                       scf::YieldOp::create(ib, fl, out);
                     };
                     fill(branch.thenBlock(), true);
                     fill(branch.elseBlock(), false);
                     scf::YieldOp::create(fb, fl, branch.getResults());
                   })
            .getResults();
      };

  // Tiles are uniform across the block, as its barriers require.
  scf::ForOp::create(
      b, loc, launch.getBlockIds().x, indexConstant(b, loc, numTiles),
      launch.getGridSize().x, ValueRange{},
      [&](OpBuilder &ob, Location l, Value tileId, ValueRange) {
        SmallVector<Value> acc;
        if (red)
          acc.push_back(
              memref::LoadOp::create(ob, l, running, ValueRange{tid}));
        SmallVector<Value> idx = delinearize(ob, l, tileId, tileSpaceV);
        SmallVector<Value> outerIdx(ArrayRef(idx).drop_back(2));
        Value r0 = arith::MulIOp::create(ob, l, idx[idx.size() - 2], tv);
        Value c0 = arith::MulIOp::create(ob, l, idx.back(), tv);
        // In: the element at (r0 + k, c0 + tx) is computed (a warp along
        // the innermost loop), the plain outputs stored, the transposed
        // ones put in the tiles at [k][tx]. A thread's rows go in groups
        // of kRowsInFlight, all of a group's elements loaded (at indices
        // clamped into range) before any is stored: a store could alias a
        // later row's input, so otherwise each load waited for the
        // previous row's stores, one element in flight per thread.
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
                    IRMapping map;
                  };
                  SmallVector<Row> group(rowsPerGroup);
                  for (auto [j, row] : llvm::enumerate(group)) {
                    row.k = arith::AddIOp::create(
                        fb, fl, k0,
                        arith::MulIOp::create(
                            fb, fl, passStride,
                            indexConstant(fb, fl, static_cast<int64_t>(j))));
                    Value r = arith::AddIOp::create(fb, fl, r0, row.k);
                    Value c = arith::AddIOp::create(fb, fl, c0, tx);
                    row.ok = arith::AndIOp::create(
                        fb, fl,
                        arith::AndIOp::create(
                            fb, fl,
                            arith::CmpIOp::create(
                                fb, fl, arith::CmpIPredicate::ult, row.k, tv),
                            arith::CmpIOp::create(
                                fb, fl, arith::CmpIPredicate::ult, r, rowsV)),
                        arith::CmpIOp::create(fb, fl, arith::CmpIPredicate::ult,
                                              c, colsV));
                    // In range, the clamped indices are the element's own;
                    // out of range, a valid element whose results are
                    // dropped.
                    Value rc = arith::MinUIOp::create(fb, fl, r, lastRowV);
                    Value cc = arith::MinUIOp::create(fb, fl, c, lastColV);
                    row.ivs = ivsAt(outerIdx, rc, cc);
                    if (red) {
                      // The reduction's element: the same loops, or the
                      // same row-major position of a reshaped view.
                      SmallVector<Value> redIvs = row.ivs;
                      if (!red->shared->sameLoops) {
                        Value linear = indexConstant(fb, fl, 0);
                        for (auto [iv, size] : llvm::zip(row.ivs, loopSizesV))
                          linear = arith::AddIOp::create(
                              fb, fl,
                              arith::MulIOp::create(fb, fl, linear, size), iv);
                        redIvs = red->loopIndices(
                            {}, delinearize(fb, fl, linear, red->redSizes));
                      }
                      IRMapping redMap;
                      redMap.map(red->outArg, carried.front());
                      cloneBodyAt(fb, fl, red->op, redIvs, redMap);
                      carried.front() = arith::SelectOp::create(
                          fb, fl, row.ok,
                          redMap.lookup(red->comb->getResult(0)),
                          carried.front());
                      BlockArgument mine = red->op.getMatchingBlockArgument(
                          red->shared->reduction);
                      if (redMap.contains(mine))
                        row.map.map(op.getMatchingBlockArgument(
                                        red->shared->elementwise),
                                    redMap.lookup(mine));
                    }
                    cloneBodyAt(fb, fl, op, row.ivs, row.map);
                  }
                  auto yield =
                      cast<linalg::YieldOp>(op.getBody()->getTerminator());
                  for (Row &row : group) {
                    RowTeam::emitIf(
                        fb, fl, row.ok, [&](OpBuilder &ib, Location il) {
                          for (auto [out, value] :
                               llvm::zip(op.getDpsInitsMutable(),
                                         yield.getValues())) {
                            Value v = row.map.lookupOrDefault(value);
                            auto *it = llvm::find(t.outputs, &out);
                            if (it != t.outputs.end()) {
                              storeToTile(ib, il, v,
                                          tiles[it - t.outputs.begin()], row.k,
                                          tx);
                              continue;
                            }
                            memref::StoreOp::create(
                                ib, il, v, out.get(),
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
        gpu::BarrierOp::create(ob, l);
        // Out: tile column tx, the elements (r0 + tx, c0 + k), written
        // where the transposed outputs' maps put them (a warp along their
        // innermost dimension).
        forTileRows(
            ob, l, ValueRange{},
            [&](OpBuilder &fb, Location fl, Value k) -> Position {
              return {arith::AddIOp::create(fb, fl, r0, tx),
                      arith::AddIOp::create(fb, fl, c0, k)};
            },
            [&](OpBuilder &ib, Location il, Value k, Value r, Value c,
                ValueRange) -> SmallVector<Value> {
              SmallVector<Value> ivs = ivsAt(outerIdx, r, c);
              for (auto [out, tileMem] : llvm::zip(t.outputs, tiles)) {
                Type et =
                    cast<MemRefType>(out->get().getType()).getElementType();
                Value v = loadFromTile(ib, il, et, tileMem, tx, k);
                memref::StoreOp::create(
                    ib, il, v, out->get(),
                    applyMap(ib, il, op.getMatchingIndexingMap(out), ivs));
              }
              return {};
            });
        // The next tile overwrites these.
        gpu::BarrierOp::create(ob, l);
        scf::YieldOp::create(ob, l);
      });
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
  if (red) {
    b.setInsertionPointAfter(launch);
    red->foldPartials(b, loc, partials, shape);
  }
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

void mlir::ds::gpu_kernels::buildTransposingLaunch(OpBuilder &b,
                                                   linalg::GenericOp op,
                                                   const LaunchShape &shape) {
  buildLaunchOverTiles(b, op, shape, /*red=*/nullptr);
}

void mlir::ds::gpu_kernels::buildTransposingSiblingLaunch(
    OpBuilder &b, Reduction &red, const LaunchShape &shape) {
  buildLaunchOverTiles(b, red.sibling, shape, &red);
}
