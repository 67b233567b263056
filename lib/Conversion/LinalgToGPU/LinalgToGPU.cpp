//===- LinalgToGPU.cpp - Buffer-level linalg and host memory to kernels ---===//
//
// Implements convert-linalg-to-ds-gpu (see Passes.td): after it, a host
// function of the GPU path touches device memory only through gpu ops and
// runtime calls. The kernel shapes live in GPUKernelBuilders; this file
// decides which one each op gets and moves host memory operations to the
// device.
//
//===----------------------------------------------------------------------===//

#include "GPUKernelBuilders.h"
#include "ReductionSiblings.h"
#include "RowGroups.h"
#include "UniformGuards.h"
#include "UnreadRowTails.h"
#include "VectorKernels.h"

#include "ds/Conversion/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::ds {
#define GEN_PASS_DEF_CONVERTLINALGTOGPUPASS
#include "ds/Conversion/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::gpu_kernels;

namespace {

bool inKernel(Operation *op) { return op->getParentOfType<gpu::LaunchOp>(); }

/// Copies of at most this many elements are kernels even when contiguous:
/// a DMA of a few bytes costs the host as much as a launch, and a kernel
/// may join its neighbours (ds-merge-gpu-launches), as the FP8 amax
/// history's newest entry does.
constexpr int64_t kMaxKernelCopyElements = 4096;

/// Copies between device buffers: a large contiguous one is a DMA
/// (`gpu.memcpy`), any other a kernel (through linalg.copy).
void convertCopies(func::FuncOp f) {
  SmallVector<memref::CopyOp> copies;
  f.walk([&](memref::CopyOp c) {
    if (!inKernel(c))
      copies.push_back(c);
  });
  for (memref::CopyOp c : copies) {
    OpBuilder b(c);
    auto src = cast<MemRefType>(c.getSource().getType());
    auto dst = cast<MemRefType>(c.getTarget().getType());
    if (memref::isStaticShapeAndContiguousRowMajor(src) &&
        memref::isStaticShapeAndContiguousRowMajor(dst) &&
        src.getShape() == dst.getShape() && src.getLayout().isIdentity() &&
        dst.getLayout().isIdentity() &&
        src.getNumElements() > kMaxKernelCopyElements)
      gpu::MemcpyOp::create(b, c.getLoc(), Type(), ValueRange{}, c.getTarget(),
                            c.getSource());
    else
      linalg::CopyOp::create(b, c.getLoc(), c.getSource(), c.getTarget());
    c.erase();
  }
}

/// Static number of reduced elements per output, or -1 when dynamic.
int64_t staticReductionSize(linalg::GenericOp op) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  int64_t n = 1;
  for (auto [d, it] : llvm::enumerate(op.getIteratorTypesArray()))
    if (it == utils::IteratorType::reduction) {
      if (ShapedType::isDynamic(ranges[d]))
        return -1;
      n *= ranges[d];
    }
  return n;
}

/// Why some output of `op` would be written by several parallel
/// iterations, if it would: a parallel dimension it does not index, or an
/// indexing map that is not a projection of the loop dimensions (d0 floordiv
/// 2). Those iterations run on different threads: a race on a GPU, where the
/// CPU's loops write in order.
std::optional<std::string> racingOutput(linalg::LinalgOp op) {
  for (OpOperand &init : op.getDpsInitsMutable()) {
    AffineMap map = op.getMatchingIndexingMap(&init);
    if (!map.isProjectedPermutation(/*allowZeroInResults=*/true))
      return "the indexing map of output " +
             std::to_string(init.getOperandNumber()) +
             " is not a projection of the loop dimensions";
    for (auto [d, it] : llvm::enumerate(op.getIteratorTypesArray()))
      if (it == utils::IteratorType::parallel && !map.isFunctionOfDim(d))
        return "parallel dimension " + std::to_string(d) +
               " does not index output " +
               std::to_string(init.getOperandNumber());
  }
  return std::nullopt;
}

/// Whether convertLinalgOps gives `op` a parallel reduction kernel
/// (buildReductionLaunch or a row group), rather than loops.
bool getsReductionKernel(Operation *op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic || !isParallelReduction(generic))
    return false;
  int64_t n = staticReductionSize(generic);
  return n < 0 || n >= kMinParallelReduction;
}

/// The constant `t` holds at `reader`: one linalg.fill of a constant
/// writes it before `reader` in their block, and any other op that may
/// write it (one that does more than copy from it or free it) comes after
/// `reader`. Null otherwise. `t` is an allocation or, with
/// `distinctArguments` (no other argument shares its memory), an argument
/// of the function: bufferization may fill a step's result with the zeros
/// that the accumulators of its gradient's reductions copy.
TypedAttr filledConstant(Value t, Operation *reader, bool distinctArguments) {
  auto arg = dyn_cast<BlockArgument>(t);
  bool argument = arg && distinctArguments &&
                  isa<FunctionOpInterface>(arg.getOwner()->getParentOp());
  if (!t.getDefiningOp<memref::AllocOp>() && !argument)
    return {};
  Block *block = reader->getBlock();
  TypedAttr value;
  for (Operation *user : t.getUsers()) {
    if (auto copy = dyn_cast<memref::CopyOp>(user);
        copy && copy.getSource() == t && copy.getTarget() != t)
      continue;
    if (isa<memref::DeallocOp>(user))
      continue;
    Operation *at = block->findAncestorOpInBlock(*user);
    if (!at)
      return {};
    auto fill = dyn_cast<linalg::FillOp>(user);
    if (fill && at->isBeforeInBlock(reader)) {
      auto c = fill.getInputs()[0].getDefiningOp<arith::ConstantOp>();
      if (value || !c)
        return {};
      value = c.getValue();
      continue;
    }
    if (!reader->isBeforeInBlock(at))
      return {};
  }
  return value;
}

/// The first op after `from` in its block that uses `target` (directly, or
/// nested in it), or null.
Operation *nextUser(Operation *from, Value target) {
  for (Operation *op = from->getNextNode(); op; op = op->getNextNode()) {
    bool touches = false;
    op->walk([&](Operation *inner) {
      touches |= llvm::is_contained(inner->getOperands(), target);
    });
    if (touches)
      return op;
  }
  return nullptr;
}

/// `op` as a reduction that gets a kernel and writes `target` as its one
/// output without reading it otherwise, or null.
linalg::GenericOp reductionInto(Operation *op, Value target) {
  if (!op || !getsReductionKernel(op))
    return {};
  auto generic = cast<linalg::GenericOp>(op);
  if (generic.getDpsInitOperand(0)->get() != target ||
      llvm::is_contained(generic.getDpsInputs(), target))
    return {};
  return generic;
}

/// Whether `v` is a buffer only its own uses reach: an allocation, or with
/// `distinctArguments` an argument of the function.
bool isOwnBuffer(Value v, bool distinctArguments) {
  if (v.getDefiningOp<memref::AllocOp>())
    return true;
  auto arg = dyn_cast<BlockArgument>(v);
  return arg && distinctArguments &&
         isa<FunctionOpInterface>(arg.getOwner()->getParentOp());
}

/// Bufferization gives each reduction's accumulator its own buffer, a copy
/// of one filled with the reduction's start value (0, -inf): a device copy
/// per reduction, 91 per layer of the FP8 GPT step. When the copy's target
/// is fresh (or a step's result) and the next op to touch it is a
/// reduction that gets a kernel, the copy goes and the reduction folds the
/// constant in (kConstantInitAttr); a fill nothing copies from any more
/// goes too. So does a fill whose next user is such a reduction: the
/// template a step's result holds, which its own gradient's reduction then
/// accumulates into.
void foldConstantInits(func::FuncOp f, bool distinctArguments) {
  SmallVector<memref::CopyOp> copies;
  for (Operation &op : f.getBody().front())
    if (auto copy = dyn_cast<memref::CopyOp>(op))
      copies.push_back(copy);
  llvm::SetVector<Value> templates;
  for (memref::CopyOp copy : copies) {
    Value target = copy.getTarget();
    auto type = cast<MemRefType>(target.getType());
    TypedAttr value = filledConstant(copy.getSource(), copy, distinctArguments);
    if (!value || !isOwnBuffer(target, distinctArguments) ||
        !type.getLayout().isIdentity() ||
        copy.getSource().getType() != target.getType())
      continue;
    // The next op that touches the target (through any use, a view
    // included) must be the reduction, writing it as its one output.
    linalg::GenericOp generic = reductionInto(nextUser(copy, target), target);
    if (!generic)
      continue;
    generic->setAttr(kConstantInitAttr, value);
    templates.insert(copy.getSource());
    copy.erase();
  }
  for (Value t : templates) {
    // Kept while anything but its fill and its dealloc uses it, and always
    // when it is an argument (a result of the step).
    if (isa<BlockArgument>(t) || !llvm::all_of(t.getUsers(), [](Operation *u) {
          return isa<linalg::FillOp, memref::DeallocOp>(u);
        }))
      continue;
    for (Operation *user : llvm::make_early_inc_range(t.getUsers()))
      if (isa<linalg::FillOp>(user))
        user->erase();
  }
  SmallVector<linalg::FillOp> fills;
  for (Operation &op : f.getBody().front())
    if (auto fill = dyn_cast<linalg::FillOp>(op))
      fills.push_back(fill);
  for (linalg::FillOp fill : fills) {
    Value target = fill.getOutputs()[0];
    auto c = fill.getInputs()[0].getDefiningOp<arith::ConstantOp>();
    auto type = dyn_cast<MemRefType>(target.getType());
    if (!c || !type || !type.getLayout().isIdentity() ||
        !isOwnBuffer(target, distinctArguments))
      continue;
    linalg::GenericOp generic = reductionInto(nextUser(fill, target), target);
    if (!generic || generic->hasAttr(kConstantInitAttr))
      continue;
    generic->setAttr(kConstantInitAttr, c.getValue());
    fill.erase();
  }
}

/// Each row group of `f` (RowGroups.h) becomes one block-per-row launch.
void fuseRowGroups(func::FuncOp f, const LaunchShape &shape) {
  for (RowGroup &group : findRowGroups(f, shape)) {
    OpBuilder b(group.ops.back());
    buildRowGroupLaunch(b, group.ops, group.rows, group.reduced, shape);
    for (Operation *op : llvm::reverse(group.ops))
      op->erase();
  }
}

/// Every linalg op of `f` becomes a kernel: parallel reductions directly
/// (with their `siblings`, which then go; with `groupColumns`, column
/// reductions of one tensor as one launch), the rest through scf.parallel
/// (reduction loops stay serial inside). `distinctArguments`: as
/// scheduleReductionSiblings'.
LogicalResult convertLinalgOps(func::FuncOp f, const LaunchShape &shape,
                               ArrayRef<ReductionSibling> siblings,
                               bool groupColumns, bool distinctArguments) {
  // Each unit becomes one launch where its last op, the elementwise one,
  // was; the reductions before it go with it.
  llvm::DenseMap<Operation *, const ReductionSibling *> unitOf;
  llvm::DenseSet<Operation *> absorbed;
  for (const ReductionSibling &pair : siblings) {
    unitOf[pair.elementwise] = &pair;
    for (linalg::GenericOp op : {pair.reduction, pair.columns})
      if (op)
        absorbed.insert(op);
  }
  // Column reductions that read the same tensor: one launch, where the last
  // of each group was.
  llvm::DenseSet<Operation *> taken(absorbed);
  for (const ReductionSibling &pair : siblings)
    taken.insert(pair.elementwise);
  SmallVector<ColumnGroup> groups;
  if (groupColumns)
    groups = columnGroups(f, taken, distinctArguments);
  llvm::DenseMap<Operation *, const ColumnGroup *> groupOf;
  for (const ColumnGroup &group : groups) {
    groupOf[group.members.back()] = &group;
    for (linalg::GenericOp op : ArrayRef(group.members).drop_back())
      absorbed.insert(op);
    if (group.producer)
      absorbed.insert(group.producer);
  }
  SmallVector<linalg::LinalgOp> ops;
  f.walk([&](linalg::LinalgOp op) {
    if (!inKernel(op))
      ops.push_back(op);
  });
  IRRewriter rewriter(f.getContext());
  for (linalg::LinalgOp op : ops) {
    if (absorbed.contains(op)) // erased with its unit or column group
      continue;
    if (!op.hasPureBufferSemantics())
      return op->emitError("not supported by ds-gpu-pipeline: '")
             << op->getName() << "' on tensors after bufferization";
    if (std::optional<std::string> why = racingOutput(op))
      return op->emitError("not supported by ds-gpu-pipeline: '")
             << op->getName() << "': " << *why
             << " (its iterations would race on the same elements)";
    if (auto transpose = dyn_cast<linalg::TransposeOp>(op.getOperation());
        transpose && isTiledTranspose(transpose)) {
      // The copy as a generic with a transposed output, which gets the
      // cast-transposes' tiled kernel.
      OpBuilder b(op);
      linalg::GenericOp copy = asTransposingCopy(b, transpose);
      buildTransposingLaunch(b, copy, shape);
      copy->erase();
      op->erase();
      continue;
    }
    auto generic = dyn_cast<linalg::GenericOp>(op.getOperation());
    if (const ColumnGroup *group = groupOf.lookup(op)) {
      OpBuilder b(op);
      buildColumnGroupLaunch(b, group->members, shape, group->producer);
      for (linalg::GenericOp member : llvm::reverse(group->members))
        member->erase();
      if (group->producer)
        group->producer->erase();
      continue;
    }
    if (const ReductionSibling *unit = unitOf.lookup(op)) {
      OpBuilder b(op);
      if (unit->reduction)
        buildReductionLaunch(b, unit->reduction, shape, generic, unit->columns);
      else
        buildTransposingLaunch(b, generic, shape, unit->columns);
      for (linalg::GenericOp member : {unit->columns, unit->reduction})
        if (member)
          member->erase();
      op->erase();
      continue;
    }
    if (generic && isTransposingGeneric(generic)) {
      OpBuilder b(op);
      buildTransposingLaunch(b, generic, shape);
      op->erase();
      continue;
    }
    if (generic && isParallelReduction(generic)) {
      int64_t n = staticReductionSize(generic);
      if (n < 0 || n >= kMinParallelReduction) {
        OpBuilder b(op);
        buildReductionLaunch(b, generic, shape);
        op->erase();
        continue;
      }
    }
    rewriter.setInsertionPoint(op);
    // Parallel dimensions first, so that they form one outer scf.parallel
    // (one kernel) and reductions loop inside each thread.
    if (generic) {
      SmallVector<unsigned> perm;
      for (auto [d, it] : llvm::enumerate(generic.getIteratorTypesArray()))
        if (it == utils::IteratorType::parallel)
          perm.push_back(d);
      for (auto [d, it] : llvm::enumerate(generic.getIteratorTypesArray()))
        if (it != utils::IteratorType::parallel)
          perm.push_back(d);
      if (!llvm::equal(perm, llvm::seq<unsigned>(0, perm.size()))) {
        FailureOr<linalg::GenericOp> swapped =
            linalg::interchangeGenericOp(rewriter, generic, perm);
        if (succeeded(swapped))
          op = cast<linalg::LinalgOp>(swapped->getOperation());
      }
    }
    if (failed(linalg::linalgOpToParallelLoops(rewriter, op)))
      return op->emitError("not supported by ds-gpu-pipeline: cannot map '")
             << op->getName() << "' to loops";
    rewriter.eraseOp(op);
  }
  return success();
}

/// Each outermost host scf.parallel becomes one grid-stride kernel over its
/// iteration space, flattened.
void convertParallelLoops(func::FuncOp f, const LaunchShape &shape) {
  SmallVector<scf::ParallelOp> loops;
  f.walk([&](scf::ParallelOp p) {
    if (!inKernel(p) && !p->getParentOfType<scf::ParallelOp>() &&
        p.getNumReductions() == 0)
      loops.push_back(p);
  });
  for (scf::ParallelOp p : loops) {
    OpBuilder b(p);
    Location loc = p.getLoc();
    // Folded as they are built: a constant total lets
    // buildGridStrideLaunch size the grid (one block for a small space).
    SmallVector<Value> counts;
    for (auto [lb, ub, step] :
         llvm::zip(p.getLowerBound(), p.getUpperBound(), p.getStep())) {
      Value extent = b.createOrFold<arith::SubIOp>(loc, ub, lb);
      counts.push_back(b.createOrFold<arith::CeilDivUIOp>(loc, extent, step));
    }
    Value total = arith::ConstantIndexOp::create(b, loc, 1);
    for (Value c : counts)
      total = b.createOrFold<arith::MulIOp>(loc, total, c);
    // An iteration with a loop inside (a reduction left serial per output)
    // is more than one element's work: no one-block grid for it.
    bool hasInnerLoop =
        p.getBody()
            ->walk([](LoopLikeOpInterface) { return WalkResult::interrupt(); })
            .wasInterrupted();
    auto element = [&](OpBuilder &kb, Location l, Value i) {
      SmallVector<Value> idx = delinearize(kb, l, i, counts);
      IRMapping map;
      for (auto [d, iv] : llvm::enumerate(p.getInductionVars())) {
        Value scaled = arith::MulIOp::create(kb, l, idx[d], p.getStep()[d]);
        map.map(iv, arith::AddIOp::create(kb, l, p.getLowerBound()[d], scaled));
      }
      for (Operation &op : p.getBody()->without_terminator())
        kb.clone(op, map);
    };
    // Analysed before the launch takes the body's ops.
    std::optional<UniformGuard> guard = uniformGuard(p);
    gpu::LaunchOp launch;
    if (shape.vectorize && !hasInnerLoop)
      launch = buildVectorElementwiseLaunch(b, p, shape, element);
    if (!launch)
      launch =
          buildGridStrideLaunch(b, loc, total, shape, element,
                                /*elementwise=*/!hasInnerLoop, shape.unroll);
    if (guard)
      guardLaunch(launch, *guard);
    p.erase();
  }
}

/// Whether no operation of `f` can write the buffer `v` reads: its root
/// (through views) is an argument of `f`, and every use of it or of a view
/// of it only reads.
bool isReadOnlyInFunction(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  if (!isa<BlockArgument>(v))
    return false;
  SmallVector<Value> worklist = {v};
  while (!worklist.empty()) {
    Value alias = worklist.pop_back_val();
    for (Operation *user : alias.getUsers()) {
      if (isa<memref::LoadOp>(user))
        continue;
      if (auto view = dyn_cast<ViewLikeOpInterface>(user);
          view && view.getViewSource() == alias) {
        for (Value r : user->getResults())
          worklist.push_back(r);
        continue;
      }
      return false; // a store, copy, call or anything else may write it
    }
  }
  return true;
}

/// Whether `op` may be recomputed anywhere after its operands: it computes
/// a scalar, or reads a buffer nothing in the step writes.
bool movesFreely(Operation *op) {
  if (auto load = dyn_cast<memref::LoadOp>(op))
    return isReadOnlyInFunction(load.getMemRef());
  return isMemoryEffectFree(op) && op->getNumRegions() == 0;
}

/// Scalars the host computes from buffers nothing in the step writes (the
/// generator key of dropout, read from its state argument; hoisted out of
/// the loops by canonicalization) are recomputed inside the kernels that
/// use them, so the host never reads device memory. Reverse order: a
/// value's users move first, then the value follows them in.
void sinkReadOnlyScalarsIntoKernels(func::FuncOp f) {
  SmallVector<Operation *> ops;
  for (Operation &op : f.getBody().front())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops)) {
    bool readOnlyLoad = false;
    if (auto load = dyn_cast<memref::LoadOp>(op))
      readOnlyLoad = isReadOnlyInFunction(load.getMemRef());
    bool pure = isMemoryEffectFree(op) && op->getNumRegions() == 0 &&
                !isa<arith::ConstantOp, ViewLikeOpInterface>(op) &&
                !op->hasTrait<OpTrait::ConstantLike>();
    if ((!readOnlyLoad && !pure) || op->getNumResults() == 0 ||
        op->hasTrait<OpTrait::IsTerminator>())
      continue;
    llvm::DenseMap<Operation *, Operation *> cloneIn;
    for (OpOperand &use : llvm::make_early_inc_range(op->getUses())) {
      auto launch = use.getOwner()->getParentOfType<gpu::LaunchOp>();
      if (!launch || launch->getBlock() != op->getBlock())
        continue;
      Operation *&clone = cloneIn[launch];
      if (!clone) {
        OpBuilder b(&launch.getBody().front(),
                    launch.getBody().front().begin());
        clone = b.clone(*op);
      }
      use.set(clone->getResult(cast<OpResult>(use.get()).getResultNumber()));
    }
    if (op->use_empty())
      op->erase();
  }
}

/// Host operations that may stay on the host: they enqueue device work,
/// manage buffers, or only compute addresses and scalars.
bool staysOnHost(Operation *op);

/// Host control flow around device work (a top-k wait's loop over the
/// ranks whose slots it decodes, a branch on a runtime call's result): a
/// loop or branch whose body, kernels aside, only enqueues device work,
/// manages buffers or computes host scalars stays on the host whole.
bool isHostControlFlow(Operation *op) {
  if (!isa<scf::ForOp, scf::IfOp>(op))
    return false;
  WalkResult r = op->walk<WalkOrder::PreOrder>([&](Operation *inner) {
    if (inner == op)
      return WalkResult::advance();
    if (isa<gpu::LaunchOp>(inner))
      return WalkResult::skip();
    if (isa<memref::LoadOp, memref::StoreOp>(inner) || !staysOnHost(inner))
      return WalkResult::interrupt();
    // A nested loop or branch was checked whole by staysOnHost.
    return inner->getNumRegions() ? WalkResult::skip() : WalkResult::advance();
  });
  return !r.wasInterrupted();
}

bool staysOnHost(Operation *op) {
  if (isa<gpu::LaunchOp, gpu::MemcpyOp, gpu::MemsetOp, func::CallOp,
          func::ReturnOp, memref::AllocOp, memref::AllocaOp, memref::DeallocOp,
          memref::GetGlobalOp>(op))
    return true;
  return isMemoryEffectFree(op) || isHostControlFlow(op);
}

/// Whether moving `op` into a kernel is legal: it must not itself enqueue
/// device work or manage buffers.
bool movableToKernel(Operation *op) {
  WalkResult r = op->walk([](Operation *inner) {
    if (isa<gpu::LaunchOp, gpu::MemcpyOp, gpu::MemsetOp, func::CallOp,
            memref::AllocOp, memref::DeallocOp>(inner))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return !r.wasInterrupted();
}

/// Scalar code left on the host that reads or writes a buffer (0-d
/// updates, the loss scaler's decision, serial loops) runs on the device:
/// consecutive such operations, and the scalar code that depends on them,
/// form one single-thread kernel, cut where device work is enqueued (so the
/// order of all device work is kept). A scalar one kernel computes and a
/// later one needs is passed through a 0-d device buffer.
LogicalResult wrapHostMemoryCode(func::FuncOp f) {
  Block &block = f.getBody().front();
  SmallVector<Operation *> group;
  llvm::DenseSet<Operation *> inGroup;
  OpBuilder b(f.getContext());

  auto flush = [&](Operation *before) -> LogicalResult {
    if (group.empty())
      return success();
    // Results used outside the group are spilled to device scalars.
    SmallVector<std::pair<Value, Value>> spills; // (value, buffer)
    for (Operation *op : group)
      for (Value r : op->getResults())
        if (llvm::any_of(r.getUsers(), [&](Operation *u) {
              return !inGroup.count(block.findAncestorOpInBlock(*u));
            })) {
          auto type = MemRefType::get({}, r.getType());
          if (!type.getElementType().isIntOrIndexOrFloat() ||
              isa<IndexType>(r.getType()))
            return op->emitError("not supported by ds-gpu-pipeline: a value "
                                 "of type ")
                   << r.getType() << " computed from device memory is "
                   << "needed later on the host";
          b.setInsertionPointToStart(&block);
          Value buffer = memref::AllocOp::create(b, op->getLoc(), type);
          spills.push_back({r, buffer});
        }
    for (auto [value, buffer] : spills) {
      for (OpOperand &use : llvm::make_early_inc_range(value.getUses())) {
        if (inGroup.count(block.findAncestorOpInBlock(*use.getOwner())))
          continue;
        b.setInsertionPoint(use.getOwner());
        use.set(memref::LoadOp::create(b, use.getOwner()->getLoc(), buffer));
      }
      b.setInsertionPointAfterValue(value);
      auto store = memref::StoreOp::create(b, value.getLoc(), value, buffer);
      group.insert(llvm::find(group, value.getDefiningOp()) + 1, store);
    }
    for (auto [value, buffer] : spills) {
      b.setInsertionPoint(block.getTerminator());
      memref::DeallocOp::create(b, value.getLoc(), buffer);
    }
    b.setInsertionPoint(before);
    gpu::LaunchOp launch = buildSingleThreadLaunch(b, group);
    launch->moveBefore(before);
    group.clear();
    inGroup.clear();
    return success();
  };

  for (Operation *op = &block.front(); op;) {
    Operation *next = op->getNextNode();
    bool dependsOnGroup = llvm::any_of(op->getOperands(), [&](Value v) {
      Operation *def = v.getDefiningOp();
      return def && inGroup.count(def);
    });
    if (op->hasTrait<OpTrait::IsTerminator>()) {
      if (failed(flush(op)))
        return failure();
    } else if (staysOnHost(op) && !isMemoryEffectFree(op)) {
      // Device work or buffer management: the group so far runs first
      // (values it needs are spilled by flush and reloaded).
      if (!isa<memref::AllocOp, memref::AllocaOp>(op) && failed(flush(op)))
        return failure();
    } else if (!movesFreely(op) || dependsOnGroup) {
      if (!movableToKernel(op))
        return op->emitError("not supported by ds-gpu-pipeline: host code "
                             "that reads device memory encloses device work");
      group.push_back(op);
      inGroup.insert(op);
    }
    op = next;
  }
  return success();
}

/// After wrapping and sinking, the host must not read or write a buffer
/// itself: every buffer is device memory.
LogicalResult verifyNoHostMemoryAccess(func::FuncOp f) {
  WalkResult r = f.walk<WalkOrder::PreOrder>([](Operation *op) {
    if (isa<gpu::LaunchOp>(op))
      return WalkResult::skip();
    if (isa<memref::LoadOp, memref::StoreOp>(op)) {
      op->emitError("not supported by ds-gpu-pipeline: the host would access "
                    "device memory here (its value is needed on the host)");
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(r.wasInterrupted());
}

/// Buffers live on the device; constants read by kernels move into them
/// (kernel outlining then copies the globals into the GPU module); a
/// constant a runtime call reads is copied to a device buffer.
void moveBuffersToDevice(func::FuncOp f) {
  SmallVector<Operation *> ops;
  f.walk([&](Operation *op) {
    if (!inKernel(op) && isa<memref::AllocOp, memref::AllocaOp,
                             memref::DeallocOp, memref::GetGlobalOp>(op))
      ops.push_back(op);
  });
  SmallVector<Value> scratch; // host allocas become buffers to free
  for (Operation *op : ops) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      auto g = gpu::AllocOp::create(b, loc, alloc.getType(), Type(),
                                    ValueRange{}, alloc.getDynamicSizes(),
                                    alloc.getSymbolOperands(),
                                    /*hostShared=*/false);
      alloc.replaceAllUsesWith(g.getMemref());
      alloc.erase();
    } else if (auto alloca = dyn_cast<memref::AllocaOp>(op)) {
      auto g = gpu::AllocOp::create(b, loc, alloca.getType(), Type(),
                                    ValueRange{}, alloca.getDynamicSizes(),
                                    alloca.getSymbolOperands(), false);
      alloca.replaceAllUsesWith(g.getMemref());
      scratch.push_back(g.getMemref());
      alloca.erase();
    } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
      gpu::DeallocOp::create(b, loc, Type(), ValueRange{}, dealloc.getMemref());
      dealloc.erase();
    } else if (auto global = dyn_cast<memref::GetGlobalOp>(op)) {
      bool hostUse = false;
      for (OpOperand &use : llvm::make_early_inc_range(global->getUses())) {
        auto launch = use.getOwner()->getParentOfType<gpu::LaunchOp>();
        if (!launch) {
          hostUse = true;
          continue;
        }
        OpBuilder kb(&launch.getBody().front(),
                     launch.getBody().front().begin());
        use.set(kb.clone(*global)->getResult(0));
      }
      if (hostUse) {
        b.setInsertionPointAfter(global);
        auto type = cast<MemRefType>(global.getType());
        auto g = gpu::AllocOp::create(b, loc, type, Type(), ValueRange{},
                                      ValueRange{}, ValueRange{}, false);
        b.setInsertionPointAfter(g);
        gpu::MemcpyOp::create(b, loc, Type(), ValueRange{}, g.getMemref(),
                              global.getResult());
        global.getResult().replaceUsesWithIf(g.getMemref(), [&](OpOperand &u) {
          return !isa<gpu::MemcpyOp>(u.getOwner());
        });
        scratch.push_back(g.getMemref());
      } else {
        global.erase();
      }
    }
  }
  if (scratch.empty())
    return;
  f.walk([&](func::ReturnOp ret) {
    OpBuilder b(ret);
    for (Value v : scratch)
      gpu::DeallocOp::create(b, ret.getLoc(), Type(), ValueRange{}, v);
  });
}

struct ConvertLinalgToGPUPass
    : public mlir::ds::impl::ConvertLinalgToGPUPassBase<
          ConvertLinalgToGPUPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (blockSize < 32 || blockSize > 1024 || blockSize % 32 != 0 ||
        maxBlocks < 1 || unroll < 0 || unroll > kMaxUnroll) {
      module.emitError() << "convert-linalg-to-ds-gpu: block-size must be a "
                            "multiple of 32 in [32, 1024], max-blocks "
                            "positive and unroll in [0, "
                         << kMaxUnroll << "] (got "
                         << static_cast<int64_t>(blockSize) << ", "
                         << static_cast<int64_t>(maxBlocks) << ", "
                         << static_cast<int64_t>(unroll) << ")";
      return signalPassFailure();
    }
    LaunchShape shape{blockSize, maxBlocks, unroll,
                      vectorize, cacheRows, rowColumns};
    for (auto f : module.getOps<func::FuncOp>()) {
      if (f.isExternal())
        continue;
      // Only a step's own arguments come with the ABI's promise.
      bool distinct = f->hasAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName());
      foldConstantInits(f, distinct);
      markUnreadRowTails(f);
      if (fuseRows)
        fuseRowGroups(f, shape);
      SmallVector<ReductionSibling> siblings;
      if (fuseSiblings) {
        siblings = scheduleReductionSiblings(f, distinct);
        inlineSharedProducers(siblings, distinct);
      }
      convertCopies(f);
      if (failed(convertLinalgOps(f, shape, siblings,
                                  /*groupColumns=*/fuseSiblings, distinct)))
        return signalPassFailure();
      convertParallelLoops(f, shape);
      if (failed(wrapHostMemoryCode(f)))
        return signalPassFailure();
      sinkReadOnlyScalarsIntoKernels(f);
      if (failed(verifyNoHostMemoryAccess(f)))
        return signalPassFailure();
      moveBuffersToDevice(f);
    }
  }
};

} // namespace
