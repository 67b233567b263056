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
// they compute from rank-0 buffers (delayed scaling's amaxes), and a linear
// layer's readers add its bias, rounded to bf16 as autocast rounds it, from
// a vector along the product's columns:
//
//   %b = arith.extf(arith.truncf %bias_in : f32 to bf16) : bf16 to f32
//   %r = arith.truncf(arith.addf(arith.mulf(%in, %scale), %b)) : f32 to bf16
//
// The scale is then computed once into a rank-0 buffer before the GEMM,
// for cuBLASLt's scale pointer, the bias into a vector, for its bias
// epilogue, and the readers again take %r from memory.
//
//===----------------------------------------------------------------------===//

#include "NarrowGemmOutputs.h"

#include "ds/Dialect/Linalg/IndexingMaps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;
using namespace mlir::ds;

namespace {

//===----------------------------------------------------------------------===//
// The output buffer and its readers
//===----------------------------------------------------------------------===//

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

/// One reader of a GEMM's output: a generic, the operand through which it
/// reads the output, and the element's block argument.
struct Reader {
  linalg::GenericOp op;
  OpOperand *operand;
  BlockArgument arg;
};

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
    readers.push_back({reader, use, reader.getMatchingBlockArgument(use)});
  }
  return readers;
}

/// The reader's loop along the product's columns (its last dimension):
/// the last result of its map for the product, when every view between
/// the buffer and the operand keeps the last dimension whole.
std::optional<unsigned> columnLoop(Reader r, Value buffer) {
  for (Value v = r.operand->get(); v != buffer;) {
    Operation *def = v.getDefiningOp();
    SmallVector<ReassociationIndices> groups;
    if (auto expand = dyn_cast_or_null<memref::ExpandShapeOp>(def)) {
      groups = expand.getReassociationIndices();
      v = expand.getSrc();
    } else if (auto collapse = dyn_cast_or_null<memref::CollapseShapeOp>(def)) {
      groups = collapse.getReassociationIndices();
      v = collapse.getSrc();
    } else {
      return std::nullopt;
    }
    if (groups.empty() || groups.back().size() != 1)
      return std::nullopt;
  }
  return getInnermostLoop(r.op.getMatchingIndexingMap(r.operand));
}

//===----------------------------------------------------------------------===//
// Values the readers compute from other buffers
//===----------------------------------------------------------------------===//

/// The buffer `v` views (through view-like ops), for aliasing checks.
Value rootOf(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

/// Whether `op` (and what it nests) may write to a buffer whose root is in
/// `roots`; ops whose effects are unknown may. The runtime's CUDA calls
/// (GEMMs, host-staged collectives) touch only the buffers they are given
/// (ds_runtime_cuda.h).
bool mayWrite(Operation *op, ArrayRef<Value> roots) {
  if (auto call = dyn_cast<func::CallOp>(op);
      call && call.getCallee().starts_with("dsrt_cuda_"))
    return llvm::any_of(call.getOperands(), [&](Value v) {
      return isa<MemRefType>(v.getType()) &&
             llvm::is_contained(roots, rootOf(v));
    });
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

/// A computation in `reader`'s payload that depends on at most one of its
/// loops, `column` (none when unset).
struct Invariant {
  linalg::GenericOp reader;
  std::optional<unsigned> column;
  /// The input operands of the block arguments it reads.
  SmallVector<OpOperand *> inputs;
};

/// Whether the indexing map `map` reads at most `column`: every result a
/// constant or that loop.
bool readsAtMost(AffineMap map, std::optional<unsigned> column) {
  return llvm::all_of(map.getResults(), [&](AffineExpr e) {
    if (isa<AffineConstantExpr>(e))
      return true;
    auto dim = dyn_cast<AffineDimExpr>(e);
    return dim && column && dim.getPosition() == *column;
  });
}

/// Whether `v`, in `inv.reader`'s payload, is a constant, an input block
/// argument whose map reads at most `inv.column` (a rank-0, broadcast or
/// bias buffer), or a pure op of such values. Collects the inputs read.
bool isInvariant(Value v, Invariant &inv) {
  Region &payload = inv.reader.getRegion();
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    if (arg.getOwner() != &payload.front())
      return false;
    OpOperand *operand = inv.reader.getMatchingOpOperand(arg);
    if (!inv.reader.isDpsInput(operand) ||
        !readsAtMost(inv.reader.getMatchingIndexingMap(operand), inv.column))
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

/// Whether buffer `v` is defined before `gemm`, or is a reshape (of a
/// reshape ...) of one that is, which hoistView can move there (bufferization
/// puts a parameter's views next to their first reader).
bool availableBefore(Value v, Operation *gemm, DominanceInfo &dominance) {
  if (dominance.properlyDominates(v, gemm))
    return true;
  Operation *def = v.getDefiningOp();
  return isa_and_nonnull<memref::ExpandShapeOp, memref::CollapseShapeOp>(def) &&
         def->getNumOperands() == 1 && def->getBlock() == gemm->getBlock() &&
         availableBefore(def->getOperand(0), gemm, dominance);
}

/// Moves the reshapes that define `v` (availableBefore) before `gemm`.
void hoistView(Value v, Operation *gemm) {
  Operation *def = v.getDefiningOp();
  if (!def || def->getBlock() != gemm->getBlock() || def->isBeforeInBlock(gemm))
    return;
  hoistView(def->getOperand(0), gemm);
  def->moveBefore(gemm);
}

/// The ops that compute `v` (all of them, to clone).
void collectSlice(Value v, SetVector<Operation *> &ops) {
  Operation *def = v.getDefiningOp();
  if (!def || !ops.insert(def))
    return;
  for (Value operand : def->getOperands())
    collectSlice(operand, ops);
}

/// A generic over `shape` before `gemm` that writes `inv`'s value `v` to a
/// new buffer of `shape` x `type`: its inputs are `inv.inputs` with maps
/// whose `inv.column` loop becomes the generic's only one (rank 1) or none
/// (rank 0).
Value computeIntoBuffer(linalg::LinalgOp gemm, Invariant inv, Value v,
                        ArrayRef<int64_t> shape, Type type) {
  OpBuilder b(gemm);
  // At the GEMM's location: the launch report lists it with the GEMM.
  Location loc = gemm.getLoc();
  MLIRContext *ctx = b.getContext();
  unsigned rank = shape.size();
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  for (OpOperand *input : inv.inputs) {
    hoistView(input->get(), gemm);
    inputs.push_back(input->get());
    SmallVector<AffineExpr> results;
    for (AffineExpr e : inv.reader.getMatchingIndexingMap(input).getResults())
      results.push_back(isa<AffineDimExpr>(e) ? getAffineDimExpr(0, ctx) : e);
    maps.push_back(AffineMap::get(rank, 0, results, ctx));
  }
  maps.push_back(rank ? AffineMap::getMultiDimIdentityMap(rank, ctx)
                      : AffineMap::get(0, 0, ctx));
  Value buffer = memref::AllocOp::create(b, loc, MemRefType::get(shape, type));
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  linalg::GenericOp::create(
      b, loc, inputs, ValueRange{buffer}, maps, iterators,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        IRMapping mapping;
        for (auto [operand, arg] : llvm::zip(inv.inputs, args))
          mapping.map(inv.reader.getMatchingBlockArgument(operand), arg);
        // The value's ops: constants (wherever they are) first, then the
        // payload's in its order, so operands come before their users.
        SetVector<Operation *> slice;
        collectSlice(v, slice);
        Block &payload = inv.reader.getRegion().front();
        for (Operation *op : slice)
          if (op->getBlock() != &payload)
            nb.clone(*op, mapping);
        for (Operation &op : payload)
          if (slice.contains(&op))
            nb.clone(op, mapping);
        linalg::YieldOp::create(nb, l, mapping.lookupOrDefault(v));
      });
  return buffer;
}

//===----------------------------------------------------------------------===//
// Matching the readers' epilogue
//===----------------------------------------------------------------------===//

/// Matches the uses of the product's element in each reader against one
/// epilogue.
class EpilogueMatcher {
public:
  EpilogueMatcher(bool allowScale) : allowScale(allowScale) {}

  /// Whether every use of `r.arg` follows the epilogue seen so far.
  bool matchReader(const Reader &r, std::optional<unsigned> column) {
    reader = r.op;
    scaleInv = Invariant{r.op, std::nullopt, {}};
    biasInv = Invariant{r.op, column, {}};
    if (!follow(r.arg, /*scaled=*/false, /*biased=*/false))
      return false;
    inputs.append(scaleInv.inputs);
    inputs.append(biasInv.inputs);
    return true;
  }

  GemmEpilogue result;
  /// The buffers the scale and the bias read, in every reader.
  SmallVector<OpOperand *> inputs;

private:
  /// Follows the users of `v`, reached through a multiply (`scaled`) or an
  /// add (`biased`) or neither, to their truncf.
  bool follow(Value v, bool scaled, bool biased) {
    for (Operation *user : v.getUsers()) {
      if (auto trunc = dyn_cast<arith::TruncFOp>(user)) {
        auto to = dyn_cast<FloatType>(trunc.getType());
        if (trunc.getRoundingmodeAttr() || !to ||
            (result.type && result.type != to))
          return false;
        result.type = to;
        // Every path does the same: scaled, biased, or neither.
        if (shape && *shape != std::make_pair(scaled, biased))
          return false;
        shape = std::make_pair(scaled, biased);
        continue;
      }
      if (user->getNumOperands() != 2 ||
          user->getOperand(0) == user->getOperand(1))
        return false;
      Value other =
          user->getOperand(0) == v ? user->getOperand(1) : user->getOperand(0);
      if (isa<arith::MulFOp>(user) && allowScale && !scaled && !biased) {
        if (!other.getType().isF32() || !isInvariant(other, scaleInv) ||
            !same(result.scale, result.scaleReader, other))
          return false;
        if (!follow(user->getResult(0), true, false))
          return false;
        continue;
      }
      auto widen = other.getDefiningOp<arith::ExtFOp>();
      if (isa<arith::AddFOp>(user) && !biased && widen && biasInv.column &&
          isInvariant(widen.getIn(), biasInv) &&
          same(result.bias, result.biasReader, widen.getIn())) {
        result.biasLoop = *biasInv.column;
        if (!follow(user->getResult(0), scaled, true))
          return false;
        continue;
      }
      return false;
    }
    return true;
  }

  /// Whether `v` is what `seen` (in `seenReader`) is, recording it first.
  bool same(Value &seen, linalg::GenericOp &seenReader, Value v) {
    if (!seen) {
      seen = v;
      seenReader = reader;
      return true;
    }
    return sameInvariant(seen, seenReader, v, reader);
  }

  bool allowScale;
  linalg::GenericOp reader;
  Invariant scaleInv, biasInv;
  std::optional<std::pair<bool, bool>> shape;
};

/// Erases the epilogue's ops on the paths from `v` to the truncf ops,
/// whose results become `arg`.
void foldEpilogue(Value v, BlockArgument arg) {
  for (Operation *user : llvm::make_early_inc_range(v.getUsers())) {
    if (isa<arith::TruncFOp>(user))
      user->getResult(0).replaceAllUsesWith(arg);
    else
      foldEpilogue(user->getResult(0), arg);
    user->erase();
  }
}

} // namespace

std::optional<GemmEpilogue> mlir::ds::gemmEpilogue(linalg::LinalgOp gemm,
                                                   bool allowScale,
                                                   Operation *ignore) {
  std::optional<SmallVector<Reader>> readers = readersOf(gemm, ignore);
  if (!readers)
    return std::nullopt;
  Value buffer = outputAlloc(gemm).getResult();
  EpilogueMatcher matcher(allowScale);
  Operation *lastReader = nullptr;
  for (const Reader &r : *readers) {
    if (!matcher.matchReader(r, columnLoop(r, buffer)))
      return std::nullopt;
    if (!lastReader || lastReader->isBeforeInBlock(r.op))
      lastReader = r.op;
  }
  GemmEpilogue e = matcher.result;
  if (!e.type || !(e.type.isBF16() || e.type.isF16()) ||
      (e.bias && e.bias.getType() != e.type))
    return std::nullopt;
  // What the scale and the bias read must hold, when the GEMM is enqueued,
  // what the readers read.
  DominanceInfo dominance(gemm->getParentOp());
  SmallVector<Value> roots;
  for (OpOperand *input : matcher.inputs) {
    if (!availableBefore(input->get(), gemm, dominance))
      return std::nullopt;
    roots.push_back(rootOf(input->get()));
  }
  // (Nothing to check without a scale or a bias: a data-parallel step's
  // collectives between a forward GEMM and its backward reader kept the
  // attention scores in f32.)
  for (Operation *op = gemm->getNextNode();
       lastReader && !roots.empty() && op != lastReader; op = op->getNextNode())
    if (mayWrite(op, roots))
      return std::nullopt;
  return e;
}

EpilogueBuffers mlir::ds::applyEpilogue(linalg::LinalgOp gemm,
                                        const GemmEpilogue &e) {
  EpilogueBuffers buffers;
  if (e.scale) {
    Invariant inv{e.scaleReader, std::nullopt, {}};
    (void)isInvariant(e.scale, inv);
    buffers.scale = computeIntoBuffer(gemm, inv, e.scale, {},
                                      Float32Type::get(gemm->getContext()));
  }
  if (e.bias) {
    Invariant inv{e.biasReader, e.biasLoop, {}};
    (void)isInvariant(e.bias, inv);
    int64_t columns = outputAlloc(gemm).getType().getShape().back();
    buffers.bias = computeIntoBuffer(gemm, inv, e.bias, {columns}, e.type);
  }

  // The product's buffer in the rounded type.
  memref::AllocOp alloc = outputAlloc(gemm);
  SmallVector<OpOperand *> uses;
  SmallVector<Operation *> views;
  collectUses(alloc.getResult(), uses, views);
  auto retype = [&](Value v) {
    v.setType(cast<MemRefType>(v.getType()).clone(e.type));
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
    arg.setType(e.type);
    foldEpilogue(arg, arg);
    // The scale's and the bias's computations may now be dead.
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
  return buffers;
}
