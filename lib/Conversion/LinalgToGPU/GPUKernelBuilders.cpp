//===- GPUKernelBuilders.cpp - gpu.launch shapes of the GPU path ----------===//
//
// See GPUKernelBuilders.h. Launch sizes are computed on the host from the
// (usually constant) iteration space, so canonicalization folds them to
// constants for static shapes; kernels see their bounds as captured values.
//
//===----------------------------------------------------------------------===//

#include "GPUKernelBuilders.h"
#include "KernelUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;
using namespace mlir::ds::gpu_kernels;

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
    function_ref<void(OpBuilder &, Location, Value)> body, bool elementwise) {
  Value threads = indexConstant(b, loc, shape.blockSize);
  std::optional<int64_t> size = getConstantIntValue(total);
  Value blocks =
      elementwise && size && *size <= kOneBlockElements
          ? indexConstant(b, loc, 1)
          : clampBlocks(b, loc,
                        arith::CeilDivUIOp::create(b, loc, total, threads),
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
