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
// An FP8 GEMM's readers first multiply by the dequantisation scale, which
// they compute from rank-0 buffers (delayed scaling's amaxes): %r =
// truncf(mulf(%in, %scale)). The scale is then computed once into a rank-0
// buffer before the GEMM, for cuBLASLt's scale pointer, and the readers
// again take %r from memory.
//
//===----------------------------------------------------------------------===//

#include "NarrowGemmOutputs.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

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

/// Whether `v` is used only by default-rounding arith.truncf ops, all to
/// one type, which `type` then holds (left as is for an unused value).
bool onlyRounded(Value v, FloatType &type) {
  for (Operation *user : v.getUsers()) {
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

/// One reader of a GEMM's output: a generic and its element's argument.
using Reader = std::pair<linalg::GenericOp, BlockArgument>;

/// The readers of `gemm`'s f32 output buffer, when it is an allocation
/// only `gemm` writes and otherwise only linalg.generic ops after it read
/// (as inputs, directly or through reshapes), besides `ignore` and
/// deallocations. nullopt otherwise.
std::optional<SmallVector<Reader>> readersOf(linalg::LinalgOp gemm,
                                             Operation *ignore) {
  memref::AllocOp alloc = outputAlloc(gemm);
  if (!alloc || !alloc.getType().getElementType().isF32())
    return std::nullopt;
  SmallVector<OpOperand *> uses;
  SmallVector<Operation *> views;
  collectUses(alloc.getResult(), uses, views);
  SmallVector<Reader> readers;
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
    readers.push_back({reader, reader.getMatchingBlockArgument(use)});
  }
  return readers;
}

/// Retypes `gemm`'s output buffer (checked by readersOf), its reshapes and
/// its readers' arguments to `type`; returns the readers.
SmallVector<Reader> retypeOutput(linalg::LinalgOp gemm, FloatType type) {
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
  SmallVector<Reader> readers;
  for (OpOperand *use : uses) {
    auto reader = dyn_cast<linalg::GenericOp>(use->getOwner());
    if (!reader || !reader.isDpsInput(use))
      continue; // The GEMM itself (about to become a call), or the ignored
                // zero fill.
    BlockArgument arg = reader.getMatchingBlockArgument(use);
    arg.setType(type);
    readers.push_back({reader, arg});
  }
  return readers;
}

} // namespace

std::optional<FloatType> mlir::ds::roundedOutputType(linalg::LinalgOp gemm,
                                                     Operation *ignore) {
  std::optional<SmallVector<Reader>> readers = readersOf(gemm, ignore);
  if (!readers)
    return std::nullopt;
  FloatType type;
  for (auto [reader, arg] : *readers)
    if (!onlyRounded(arg, type))
      return std::nullopt;
  if (!type || !(type.isBF16() || type.isF16()))
    return std::nullopt;
  return type;
}

void mlir::ds::narrowOutputBuffer(linalg::LinalgOp gemm, FloatType type) {
  for (auto [reader, arg] : retypeOutput(gemm, type))
    for (Operation *user : llvm::make_early_inc_range(arg.getUsers())) {
      user->getResult(0).replaceAllUsesWith(arg);
      user->erase();
    }
}

//===----------------------------------------------------------------------===//
// FP8: a dequantisation scale, then the rounding
//===----------------------------------------------------------------------===//

namespace {

/// The buffer `v` views (through view-like ops), for aliasing checks.
Value rootOf(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

/// Whether `op` (and what it nests) may write to a buffer whose root is in
/// `roots`; ops whose effects are unknown may.
bool mayWrite(Operation *op, ArrayRef<Value> roots) {
  if (auto effects = dyn_cast<MemoryEffectOpInterface>(op)) {
    SmallVector<MemoryEffects::EffectInstance> list;
    effects.getEffects(list);
    for (const MemoryEffects::EffectInstance &e : list) {
      if (!isa<MemoryEffects::Write, MemoryEffects::Free>(e.getEffect()))
        continue;
      if (!e.getValue() || llvm::is_contained(roots, rootOf(e.getValue())))
        return true;
    }
  } else if (!op->hasTrait<OpTrait::HasRecursiveMemoryEffects>()) {
    return true;
  }
  if (op->hasTrait<OpTrait::HasRecursiveMemoryEffects>())
    for (Region &region : op->getRegions())
      for (Operation &nested : region.getOps())
        if (mayWrite(&nested, roots))
          return true;
  return false;
}

/// The values a loop-invariant computation in `reader`'s payload reads.
struct Invariant {
  linalg::GenericOp reader;
  /// The input operands of the block arguments it reads.
  SmallVector<OpOperand *> inputs;
};

/// Whether `v`, in `inv.reader`'s payload, is the same at every iteration:
/// a constant, an input block argument with a constant indexing map (a
/// rank-0 or broadcast buffer), or a pure op of such values. Collects the
/// inputs read.
bool isInvariant(Value v, Invariant &inv) {
  Region &payload = inv.reader.getRegion();
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    if (arg.getOwner() != &payload.front())
      return false;
    OpOperand *operand = inv.reader.getMatchingOpOperand(arg);
    if (!inv.reader.isDpsInput(operand) ||
        !inv.reader.getMatchingIndexingMap(operand).isConstant())
      return false;
    if (!llvm::is_contained(inv.inputs, operand))
      inv.inputs.push_back(operand);
    return true;
  }
  Operation *def = v.getDefiningOp();
  if (def->hasTrait<OpTrait::ConstantLike>())
    return true;
  if (!payload.isAncestor(def->getParentRegion()) || def->getNumRegions() ||
      isa<linalg::IndexOp>(def) || !isPure(def))
    return false;
  return llvm::all_of(def->getOperands(),
                      [&](Value o) { return isInvariant(o, inv); });
}

/// Whether `a` (in reader `ra`) and `b` (in `rb`) compute the same value.
bool sameInvariant(Value a, linalg::GenericOp ra, Value b,
                   linalg::GenericOp rb) {
  if (a == b)
    return true;
  auto ba = dyn_cast<BlockArgument>(a), bb = dyn_cast<BlockArgument>(b);
  if (ba || bb) {
    if (!ba || !bb)
      return false;
    OpOperand *oa = ra.getMatchingOpOperand(ba);
    OpOperand *ob = rb.getMatchingOpOperand(bb);
    return oa->get() == ob->get() &&
           ra.getMatchingIndexingMap(oa).getResults() ==
               rb.getMatchingIndexingMap(ob).getResults();
  }
  Operation *da = a.getDefiningOp(), *db = b.getDefiningOp();
  if (cast<OpResult>(a).getResultNumber() !=
      cast<OpResult>(b).getResultNumber())
    return false;
  return OperationEquivalence::isEquivalentTo(
      da, db,
      [&](Value x, Value y) { return success(sameInvariant(x, ra, y, rb)); },
      /*markEquivalent=*/nullptr, OperationEquivalence::IgnoreLocations);
}

/// The ops that compute `v` (all of them, to clone).
void collectSlice(Value v, SetVector<Operation *> &ops) {
  Operation *def = v.getDefiningOp();
  if (!def || !ops.insert(def))
    return;
  for (Value operand : def->getOperands())
    collectSlice(operand, ops);
}

/// The scale `arg` is multiplied by before every use, each product only
/// rounded to one type (`type`), or null.
Value scaleOf(BlockArgument arg, linalg::GenericOp reader, FloatType &type,
              Invariant &inv) {
  Value scale;
  for (Operation *user : arg.getUsers()) {
    auto mul = dyn_cast<arith::MulFOp>(user);
    if (!mul || mul.getLhs() == mul.getRhs())
      return nullptr;
    Value other = mul.getLhs() == arg ? mul.getRhs() : mul.getLhs();
    if (!other.getType().isF32() || !isInvariant(other, inv))
      return nullptr;
    if (scale && !sameInvariant(scale, reader, other, reader))
      return nullptr;
    scale = other;
    if (!onlyRounded(mul.getResult(), type))
      return nullptr;
  }
  return scale;
}

} // namespace

std::optional<ScaledRounding>
mlir::ds::scaledRoundedOutput(linalg::LinalgOp gemm, Operation *ignore) {
  std::optional<SmallVector<Reader>> readers = readersOf(gemm, ignore);
  if (!readers)
    return std::nullopt;
  DominanceInfo dominance(gemm->getParentOp());
  ScaledRounding result{};
  SmallVector<Value> scaleRoots;
  Operation *lastReader = nullptr;
  for (auto [reader, arg] : *readers) {
    Invariant inv{reader, {}};
    Value scale = scaleOf(arg, reader, result.type, inv);
    if (!scale)
      return std::nullopt;
    if (!result.scale) {
      result.reader = reader;
      result.scale = scale;
    } else if (!sameInvariant(result.scale, result.reader, scale, reader)) {
      return std::nullopt;
    }
    // The scale's buffers must hold, when the GEMM is enqueued, what the
    // reader reads.
    for (OpOperand *input : inv.inputs) {
      if (!dominance.properlyDominates(input->get(), gemm))
        return std::nullopt;
      scaleRoots.push_back(rootOf(input->get()));
    }
    if (!lastReader || lastReader->isBeforeInBlock(reader))
      lastReader = reader;
  }
  if (!result.scale || !result.type || !result.type.isBF16())
    return std::nullopt;
  for (Operation *op = gemm->getNextNode(); op != lastReader;
       op = op->getNextNode())
    if (mayWrite(op, scaleRoots))
      return std::nullopt;
  return result;
}

Value mlir::ds::narrowScaledOutputBuffer(linalg::LinalgOp gemm,
                                         ScaledRounding r) {
  // The scale, as a rank-0 generic over the buffers it reads.
  Invariant inv{r.reader, {}};
  (void)isInvariant(r.scale, inv);
  OpBuilder b(gemm);
  // At the GEMM's location: the launch report lists it with the GEMM.
  Location loc = gemm.getLoc();
  MLIRContext *ctx = b.getContext();
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  for (OpOperand *input : inv.inputs) {
    inputs.push_back(input->get());
    maps.push_back(AffineMap::get(
        0, 0, r.reader.getMatchingIndexingMap(input).getResults(), ctx));
  }
  maps.push_back(AffineMap::get(0, 0, ctx));
  Value buffer =
      memref::AllocOp::create(b, loc, MemRefType::get({}, b.getF32Type()));
  linalg::GenericOp::create(
      b, loc, inputs, ValueRange{buffer}, maps, ArrayRef<utils::IteratorType>{},
      [&](OpBuilder &nb, Location l, ValueRange args) {
        IRMapping mapping;
        for (auto [operand, arg] : llvm::zip(inv.inputs, args))
          mapping.map(r.reader.getMatchingBlockArgument(operand), arg);
        // The scale's ops: constants (wherever they are) first, then the
        // payload's in its order, so operands come before their users.
        SetVector<Operation *> slice;
        collectSlice(r.scale, slice);
        Block &payload = r.reader.getRegion().front();
        for (Operation *op : slice)
          if (op->getBlock() != &payload)
            nb.clone(*op, mapping);
        for (Operation &op : payload)
          if (slice.contains(&op))
            nb.clone(op, mapping);
        linalg::YieldOp::create(nb, l, mapping.lookup(r.scale));
      });

  // The product's buffer in the rounded type; the readers' multiply and
  // truncf fold away (the GEMM applies the scale).
  for (auto [reader, arg] : retypeOutput(gemm, r.type)) {
    for (Operation *mul : llvm::make_early_inc_range(arg.getUsers())) {
      for (Operation *trunc : llvm::make_early_inc_range(mul->getUsers())) {
        trunc->getResult(0).replaceAllUsesWith(arg);
        trunc->erase();
      }
      mul->erase();
    }
    // The scale's computation may now be dead in the reader.
    Block &body = reader.getRegion().front();
    for (bool changed = true; changed;) {
      changed = false;
      for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
        if (!op.hasTrait<OpTrait::IsTerminator>() && op.use_empty() &&
            isPure(&op)) {
          op.erase();
          changed = true;
        }
    }
  }
  return buffer;
}
