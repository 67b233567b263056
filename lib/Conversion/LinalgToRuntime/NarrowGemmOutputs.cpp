//===- NarrowGemmOutputs.cpp - Library GEMMs that write bf16 or f16 -------===//
//
// The buffer analysis and retyping behind convert-linalg-to-ds-runtime's
// bf16/f16 outputs (NarrowGemmOutputs.h). After bufferization and fusion,
// a product the policy stores in bf16 looks like
//
//   %c = memref.alloc() : memref<4x16x16xf32>
//   linalg.batch_matmul ins(%a, %b : ...bf16...) outs(%c : ...f32)
//   %v = memref.expand_shape %c ... into memref<2x2x16x16xf32>
//   linalg.generic ins(%v, ...) ... {
//   ^bb0(%in: f32, ...):
//     %r = arith.truncf %in : f32 to bf16
//     ...                                 // %in used nowhere else
//   }
//
// and every reader of %c is such a generic. Then %c may as well hold bf16:
// the GEMM rounds in its epilogue and the readers take %r from memory.
//
//===----------------------------------------------------------------------===//

#include "NarrowGemmOutputs.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::ds;

namespace {

/// The uses of buffer `v` that are not reshapes, looking through
/// memref.expand_shape / collapse_shape (collected into `views`).
void collectUses(Value v, SmallVectorImpl<OpOperand *> &uses,
                 SmallVectorImpl<Operation *> &views) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (isa<memref::ExpandShapeOp, memref::CollapseShapeOp>(user)) {
      views.push_back(user);
      collectUses(user->getResult(0), uses, views);
      continue;
    }
    uses.push_back(&use);
  }
}

/// Whether `arg` is used only by default-rounding arith.truncf ops, all to
/// one type, which `type` then holds (left as is for an unused argument).
bool onlyRounded(BlockArgument arg, FloatType &type) {
  for (Operation *user : arg.getUsers()) {
    auto trunc = dyn_cast<arith::TruncFOp>(user);
    if (!trunc || trunc.getRoundingmodeAttr())
      return false;
    auto to = dyn_cast<FloatType>(trunc.getType());
    if (!to || (type && type != to))
      return false;
    type = to;
  }
  return true;
}

/// The output buffer's allocation, if it is one of static shape in the
/// GEMM's block.
memref::AllocOp outputAlloc(linalg::LinalgOp gemm) {
  if (gemm.getNumDpsInits() != 1)
    return nullptr;
  auto alloc =
      gemm.getDpsInitOperand(0)->get().getDefiningOp<memref::AllocOp>();
  if (!alloc || !alloc.getType().hasStaticShape() ||
      alloc->getBlock() != gemm->getBlock())
    return nullptr;
  return alloc;
}

} // namespace

std::optional<FloatType> mlir::ds::roundedOutputType(linalg::LinalgOp gemm,
                                                     Operation *ignore) {
  memref::AllocOp alloc = outputAlloc(gemm);
  if (!alloc || !alloc.getType().getElementType().isF32())
    return std::nullopt;
  SmallVector<OpOperand *> uses;
  SmallVector<Operation *> views;
  collectUses(alloc.getResult(), uses, views);
  FloatType type;
  for (OpOperand *use : uses) {
    Operation *user = use->getOwner();
    if (user == ignore || isa<memref::DeallocOp>(user))
      continue;
    if (user == gemm.getOperation()) {
      if (!gemm.isDpsInit(use))
        return std::nullopt; // The GEMM would read its own output.
      continue;
    }
    auto reader = dyn_cast<linalg::GenericOp>(user);
    if (!reader || !reader.isDpsInput(use) ||
        reader->getBlock() != gemm->getBlock() ||
        !gemm->isBeforeInBlock(reader))
      return std::nullopt;
    if (!onlyRounded(reader.getMatchingBlockArgument(use), type))
      return std::nullopt;
  }
  if (!type || !(type.isBF16() || type.isF16()))
    return std::nullopt;
  return type;
}

void mlir::ds::narrowOutputBuffer(linalg::LinalgOp gemm, FloatType type) {
  memref::AllocOp alloc = outputAlloc(gemm);
  SmallVector<OpOperand *> uses;
  SmallVector<Operation *> views;
  collectUses(alloc.getResult(), uses, views);
  auto retype = [&](Value v) {
    v.setType(cast<MemRefType>(v.getType()).clone(type));
  };
  retype(alloc.getResult());
  for (Operation *view : views)
    retype(view->getResult(0));
  for (OpOperand *use : uses) {
    auto reader = dyn_cast<linalg::GenericOp>(use->getOwner());
    if (!reader || !reader.isDpsInput(use))
      continue; // The GEMM itself (about to become a call), or the ignored
                // zero fill.
    BlockArgument arg = reader.getMatchingBlockArgument(use);
    arg.setType(type);
    for (Operation *user : llvm::make_early_inc_range(arg.getUsers())) {
      user->getResult(0).replaceAllUsesWith(arg);
      user->erase();
    }
  }
}
