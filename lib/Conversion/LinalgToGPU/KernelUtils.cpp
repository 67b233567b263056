//===- KernelUtils.cpp - IR helpers of the GPU kernel builders ------------===//
//
// See KernelUtils.h.
//
//===----------------------------------------------------------------------===//

#include "KernelUtils.h"
#include "MaskedReads.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace mlir::ds::gpu_kernels {

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
                          Value threadsY, TypeRange workgroup) {
  Value one = indexConstant(b, loc, 1);
  auto launch = gpu::LaunchOp::create(
      b, loc, blocks, one, one, threads, threadsY ? threadsY : one, one,
      /*dynamicSharedMemorySize=*/Value(), /*asyncTokenType=*/Type(),
      /*asyncDependencies=*/ValueRange{}, workgroup);
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

MemRefType transposeTileType(Type et) {
  MLIRContext *ctx = et.getContext();
  unsigned width = et.getIntOrFloatBitWidth();
  Type word = IntegerType::get(ctx, width > 32 ? 64 : 32);
  return MemRefType::get({kTransposeTile, kTransposeTile + 1}, word,
                         AffineMap(),
                         gpu::AddressSpaceAttr::get(
                             ctx, gpu::GPUDialect::getWorkgroupAddressSpace()));
}

TileThread tileThread(OpBuilder &b, Location loc, gpu::LaunchOp launch,
                      int64_t blockSize) {
  Value tid = launch.getThreadIds().x;
  Value side = indexConstant(b, loc, kTransposeTile);
  return {side, arith::RemUIOp::create(b, loc, tid, side),
          arith::DivUIOp::create(b, loc, tid, side),
          indexConstant(b, loc, blockSize / kTransposeTile)};
}

void storeToTile(OpBuilder &b, Location loc, Value v, Value tile, Value row,
                 Value col) {
  Type word = cast<MemRefType>(tile.getType()).getElementType();
  Type bits = b.getIntegerType(v.getType().getIntOrFloatBitWidth());
  Value raw = arith::BitcastOp::create(b, loc, bits, v);
  if (bits != word)
    raw = arith::ExtUIOp::create(b, loc, word, raw);
  memref::StoreOp::create(b, loc, raw, tile, ValueRange{row, col});
}

Value loadFromTile(OpBuilder &b, Location loc, Type et, Value tile, Value row,
                   Value col) {
  Type word = cast<MemRefType>(tile.getType()).getElementType();
  Type bits = b.getIntegerType(et.getIntOrFloatBitWidth());
  Value raw = memref::LoadOp::create(b, loc, tile, ValueRange{row, col});
  if (bits != word)
    raw = arith::TruncIOp::create(b, loc, bits, raw);
  return arith::BitcastOp::create(b, loc, et, raw);
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
                 ArrayRef<Value> ivs, IRMapping &map, bool maskReads) {
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
    auto load = [&](OpBuilder &lb, Location l) -> Value {
      return memref::LoadOp::create(lb, l, v, idx);
    };
    map.map(arg, maskReads
                     ? loadIfUsed(b, loc, operand, ivs, arg.getType(), load)
                     : load(b, loc));
  }
  for (Operation &inner : body.without_terminator()) {
    if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
      map.map(index.getResult(), ivs[index.getDim()]);
      continue;
    }
    b.clone(inner, map);
  }
}

SmallVector<Value> storeYieldedAt(OpBuilder &b, Location loc,
                                  linalg::GenericOp op, ArrayRef<Value> ivs,
                                  const IRMapping &map) {
  auto yield = cast<linalg::YieldOp>(op.getBody()->getTerminator());
  SmallVector<Value> stored;
  for (auto [init, value] :
       llvm::zip(op.getDpsInitsMutable(), yield.getValues())) {
    stored.push_back(map.lookupOrDefault(value));
    memref::StoreOp::create(
        b, loc, stored.back(), init.get(),
        applyMap(b, loc, op.getMatchingIndexingMap(&init), ivs));
  }
  return stored;
}

Value viewRoot(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

} // namespace mlir::ds::gpu_kernels
