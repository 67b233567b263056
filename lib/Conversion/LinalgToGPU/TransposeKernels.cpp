//===- TransposeKernels.cpp - Tiled transposes through shared memory -----===//
//
// Implements isTiledTranspose and buildTiledTransposeLaunch
// (GPUKernelBuilders.h).
//
//===----------------------------------------------------------------------===//

#include "GPUKernelBuilders.h"
#include "KernelUtils.h"

#include "ds/Dialect/Linalg/IndexingMaps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::ds::gpu_kernels;

bool mlir::ds::gpu_kernels::isTiledTranspose(linalg::TransposeOp op) {
  if (!op.hasPureBufferSemantics())
    return false;
  if (!ds::swapsInnermostTwo(op.getPermutation()))
    return false;
  auto in = cast<MemRefType>(op.getInput().getType());
  Type et = in.getElementType();
  return in.hasStaticShape() && et.isIntOrFloat() &&
         et.getIntOrFloatBitWidth() >= 8 && et.getIntOrFloatBitWidth() <= 64;
}

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
  Type et = inType.getElementType();
  MemRefType tileType = transposeTileType(et);
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
  TileThread thread = tileThread(b, loc, launch, shape.blockSize);
  Value tv = thread.side, tx = thread.tx, ty = thread.ty,
        passStride = thread.passStride;
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
        forTileRows(ob, l, r0, c0, rowsV, colsV,
                    [&](OpBuilder &ib, Location il, Value k, Value r, Value c) {
                      SmallVector<Value> at(lead);
                      at.append({r, c});
                      Value v = memref::LoadOp::create(ib, il, input, at);
                      storeToTile(ib, il, v, tile, k, tx);
                    });
        gpu::BarrierOp::create(ob, l);
        // Out: output[..., c0 + k, r0 + tx] = tile[tx][k] (a warp writes one
        // output row's 32 consecutive elements).
        forTileRows(ob, l, c0, r0, colsV, rowsV,
                    [&](OpBuilder &ib, Location il, Value k, Value c, Value r) {
                      Value v = loadFromTile(ib, il, et, tile, tx, k);
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
