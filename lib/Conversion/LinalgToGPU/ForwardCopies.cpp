//===- ForwardCopies.cpp - Readers of a copy read its source --------------===//
//
// Implements ds-forward-copies (see Passes.td).
//
// A library GEMM that rounds its own product (NarrowGemmOutputs) leaves
// the kernel that used to round it with nothing to do but copy: in the
// FP8 GPT step, the q, k and v projections' products are copied into the
// buffers the head split reads, and the attention's gradients into the
// one the head merge reads. Each such copy reads and writes a whole
// activation. Where nothing writes the source while the copy's readers
// run, they read the source instead, and the copy goes.
//
//===----------------------------------------------------------------------===//

#include "ds/Conversion/Passes.h"

#include "BufferAccess.h"
#include "KernelUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::ds {
#define GEN_PASS_DEF_FORWARDCOPIESPASS
#include "ds/Conversion/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds::gpu_kernels;

namespace {

/// A whole-buffer copy: `source`'s elements into the allocation `dest`,
/// element for element (both of one type, so any view of one is a view of
/// the other).
struct Copy {
  Value source;
  Value dest; // a memref.alloc
};

/// `op` as a Copy: a memref.copy, or an all-parallel linalg.generic whose
/// one output is an allocation, written through the identity map with the
/// element an identity-mapped input gives (other inputs unused: the scales
/// and biases a library GEMM's epilogue took over).
std::optional<Copy> asCopy(Operation *op) {
  Value source, dest;
  if (auto copy = dyn_cast<memref::CopyOp>(op)) {
    source = copy.getSource();
    dest = copy.getTarget();
  } else if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
    if (!generic.hasPureBufferSemantics() || generic.getNumDpsInits() != 1 ||
        generic.getNumParallelLoops() != generic.getNumLoops())
      return std::nullopt;
    OpOperand *init = generic.getDpsInitOperand(0);
    auto yield = cast<linalg::YieldOp>(generic.getBody()->getTerminator());
    auto arg = dyn_cast<BlockArgument>(yield.getValues().front());
    if (!arg || arg.getOwner() != generic.getBody() ||
        !generic.getMatchingIndexingMap(init).isIdentity() ||
        generic.getBody()->getOperations().size() != 1)
      return std::nullopt;
    OpOperand *in = generic.getMatchingOpOperand(arg);
    if (generic.isDpsInit(in) ||
        !generic.getMatchingIndexingMap(in).isIdentity())
      return std::nullopt;
    source = in->get();
    dest = init->get();
  } else {
    return std::nullopt;
  }
  auto alloc = dest.getDefiningOp<memref::AllocOp>();
  auto type = dyn_cast<MemRefType>(dest.getType());
  if (!alloc || source.getType() != dest.getType() || !type.hasStaticShape() ||
      viewRoot(source) == dest)
    return std::nullopt;
  return Copy{source, alloc.getResult()};
}

/// The memref an `!llvm.ptr` operand points into: an aligned pointer
/// taken from it (how a library GEMM gets its scales); a null pointer
/// points at nothing. Failure: unknown.
FailureOr<Value> pointee(Value ptr) {
  if (ptr.getDefiningOp<LLVM::ZeroOp>())
    return Value();
  auto toPtr = ptr.getDefiningOp<LLVM::IntToPtrOp>();
  auto cast = toPtr ? toPtr.getArg().getDefiningOp<arith::IndexCastOp>()
                    : arith::IndexCastOp();
  auto extract =
      cast
          ? cast.getIn().getDefiningOp<memref::ExtractAlignedPointerAsIndexOp>()
          : memref::ExtractAlignedPointerAsIndexOp();
  if (!extract)
    return failure();
  return extract.getSource();
}

/// What `op` reads and writes. A library GEMM (`dsrt_cuda_matmul_*`,
/// include/ds/Runtime/ds_runtime_cuda.h) writes its third memref, C,
/// (A, B, C, then the bias where there is one) and reads its
/// other memrefs and the memrefs its pointers point into; any other call
/// is unknown.
AccessSet accessesOf(Operation *op) {
  auto call = dyn_cast<func::CallOp>(op);
  if (!call || !call.getCallee().starts_with("dsrt_cuda_matmul_"))
    return AccessSet(op);
  AccessSet set(op); // unknown: a call declares no effects
  set.unknown = false;
  unsigned memrefs = 0;
  for (Value v : call.getOperands()) {
    if (isa<MemRefType>(v.getType())) {
      (memrefs++ == 2 ? set.writes : set.reads).push_back({v, viewRoot(v)});
      continue;
    }
    if (!isa<LLVM::LLVMPointerType>(v.getType()))
      continue;
    FailureOr<Value> memref = pointee(v);
    if (failed(memref)) {
      set.unknown = true;
      return set;
    }
    if (*memref)
      set.reads.push_back({*memref, viewRoot(*memref)});
  }
  if (memrefs < 3)
    set.unknown = true;
  return set;
}

/// Whether `v` is `buffer` or a reshape of it: all of its elements.
bool isWholeBuffer(Value v, Value buffer) {
  while (v != buffer) {
    if (auto expand = v.getDefiningOp<memref::ExpandShapeOp>())
      v = expand.getSrc();
    else if (auto collapse = v.getDefiningOp<memref::CollapseShapeOp>())
      v = collapse.getSrc();
    else
      return false;
  }
  return true;
}

/// Whether `op` writes every element of `buffer` without reading any: the
/// copy's value is dead from `op` on.
bool overwrites(Operation *op, Value buffer) {
  if (auto copy = dyn_cast<memref::CopyOp>(op))
    return isWholeBuffer(copy.getTarget(), buffer) &&
           viewRoot(copy.getSource()) != buffer;
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || !linalgOp.hasPureBufferSemantics() ||
      linalgOp.getNumParallelLoops() != linalgOp.getNumLoops())
    return false;
  bool whole = false;
  for (OpOperand &operand : linalgOp->getOpOperands()) {
    if (!isa<MemRefType>(operand.get().getType()) ||
        viewRoot(operand.get()) != buffer)
      continue;
    // Written once per iteration (all loops parallel, a permutation map),
    // through a view of the whole buffer, and the old element unused.
    if (!linalgOp.isDpsInit(&operand) ||
        !isWholeBuffer(operand.get(), buffer) ||
        !linalgOp.getMatchingIndexingMap(&operand).isPermutation() ||
        linalgOp.payloadUsesValueFromOperand(&operand))
      return false;
    whole = true;
  }
  return whole;
}

/// `v` (the copy's destination or a view of it) rebuilt on `source` before
/// `at`: the same view ops, cloned.
Value rebase(OpBuilder &b, Value v, const Copy &copy) {
  if (v == copy.dest)
    return copy.source;
  Operation *view = v.getDefiningOp();
  Value from = cast<ViewLikeOpInterface>(view).getViewSource();
  IRMapping map;
  map.map(from, rebase(b, from, copy));
  return b.clone(*view, map)->getResult(cast<OpResult>(v).getResultNumber());
}

struct ForwardCopiesPass
    : public mlir::ds::impl::ForwardCopiesPassBase<ForwardCopiesPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp f = getOperation();
    distinct = distinctArguments &&
               f->hasAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName());
    SmallVector<Operation *> copies;
    for (Block &block : f.getBody())
      for (Operation &op : block)
        if (asCopy(&op))
          copies.push_back(&op);
    for (Operation *op : copies)
      tryForward(op);
  }

  bool distinct = false;

  /// Redirects the copy's readers to its source and erases it, when every
  /// reader of the copied value reads it before anything writes the
  /// source, and nothing else touches the destination in that time.
  void tryForward(Operation *op) {
    std::optional<Copy> copy = asCopy(op);
    if (!copy)
      return;
    Block *block = op->getBlock();
    // The destination's uses, through views, each with the op of this
    // block it lies in. An allocation is reached through them alone (a
    // pointer taken from it is a use too), so nothing after the last one
    // can see it.
    SmallVector<std::pair<OpOperand *, Operation *>> uses;
    Operation *last = op;
    SmallVector<Value> worklist = {copy->dest};
    while (!worklist.empty()) {
      Value v = worklist.pop_back_val();
      for (OpOperand &use : v.getUses()) {
        Operation *user = use.getOwner();
        if (auto view = dyn_cast<ViewLikeOpInterface>(user);
            view && view.getViewSource() == v) {
          worklist.append(user->result_begin(), user->result_end());
          continue;
        }
        Operation *inBlock = block->findAncestorOpInBlock(*user);
        if (!inBlock)
          return;
        uses.push_back({&use, inBlock});
        if (last->isBeforeInBlock(inBlock))
          last = inBlock;
      }
    }

    // Walk on to the last use, or to an op that writes the destination
    // whole without reading it: the copied value ends there.
    Access destAccess{copy->dest, copy->dest};
    Access sourceAccess{copy->source, viewRoot(copy->source)};
    auto touches = [&](ArrayRef<Access> accesses, const Access &a) {
      return llvm::any_of(accesses, [&](const Access &x) {
        return mayOverlap(x, a, distinct);
      });
    };
    llvm::SmallPtrSet<Operation *, 8> readers;
    Operation *end = nullptr;
    bool sourceWritten = false;
    for (Operation *next = op; next != last;) {
      next = next->getNextNode();
      AccessSet accesses = accessesOf(next);
      if (accesses.unknown && !isPure(next))
        return;
      bool writesSource = touches(accesses.writes, sourceAccess);
      bool readsDest = touches(accesses.reads, destAccess);
      bool writesDest = touches(accesses.writes, destAccess);
      if (writesDest && !readsDest && overwrites(next, copy->dest)) {
        end = next;
        break;
      }
      if (writesDest || (readsDest && (sourceWritten || writesSource)))
        return;
      if (readsDest)
        readers.insert(next);
      sourceWritten |= writesSource;
    }

    // Every use between must be a reader's own operand (a view in between
    // is rebuilt); uses before the copy, or from `end` on, see another
    // value.
    SmallVector<OpOperand *> redirect;
    for (auto [use, inBlock] : uses) {
      if (inBlock == op || inBlock->isBeforeInBlock(op) ||
          (end && (inBlock == end || end->isBeforeInBlock(inBlock))))
        continue;
      if (use->getOwner() != inBlock || !readers.contains(inBlock))
        return;
      redirect.push_back(use);
    }
    for (OpOperand *use : redirect) {
      OpBuilder b(use->getOwner());
      use->set(rebase(b, use->get(), *copy));
    }
    op->erase();
  }
};

} // namespace
