//===- EmulateGPUKernels.cpp - gpu.launch bodies as host loops ------------===//
//
// Implements ds-emulate-gpu-kernels (see Passes.td), a testing aid: each
// gpu.launch becomes a loop over its blocks, and each stretch of its body
// between two synchronisations a loop over the block's threads. Values one
// stretch computes and a later one reads are kept per thread; a value a
// synchronising op needs (a loop bound, a condition) must agree across the
// threads, and the emitted code checks that it does.
//
//===----------------------------------------------------------------------===//

#include "EmulationChecks.h"

#include "ds/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Utils/GPUUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/StringExtras.h"

namespace mlir::ds {
#define GEN_PASS_DEF_EMULATEGPUKERNELSPASS
#include "ds/Conversion/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
namespace emulation = mlir::ds::emulation;

namespace {

/// The lanes of a subgroup (a warp): consecutive threads, x fastest, as
/// NVIDIA GPUs form them.
constexpr int64_t kSubgroupSize = 32;

bool isSync(Operation *op) {
  return isa<gpu::BarrierOp, gpu::AllReduceOp, gpu::SubgroupReduceOp>(op);
}

bool containsSync(Operation *op) {
  return op
      ->walk([](Operation *inner) {
        return isSync(inner) ? WalkResult::interrupt() : WalkResult::advance();
      })
      .wasInterrupted();
}

/// Whether a per-thread value of type `t` can be kept in a buffer (a
/// scalar, or a vector of them: a row cache's); others (views) are
/// recomputed where they are read.
bool storable(Type t) {
  if (auto v = dyn_cast<VectorType>(t))
    return v.hasStaticShape() && !v.isScalable() &&
           v.getElementType().isIntOrIndexOrFloat();
  return t.isIntOrIndexOrFloat();
}

Value indexConstant(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// Rewrites one gpu.launch into host loops.
class LaunchEmulator {
public:
  explicit LaunchEmulator(gpu::LaunchOp launch) : launch(launch) {}

  LogicalResult run() {
    if (failed(checkSupported()) || failed(emulation::checkAccesses(launch)) ||
        failed(emulation::checkBlockRaces(launch, buffers)) ||
        failed(emulation::checkThreadRaces(launch, buffers)))
      return failure();
    replaceIndexOps();
    Location loc = launch.getLoc();
    OpBuilder b(launch);
    gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
    gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
    blockX = block.x;
    blockY = block.y;
    // Folded, so that a constant block size gives static per-thread
    // buffers.
    blockXY = b.createOrFold<arith::MulIOp>(loc, block.x, block.y);
    numThreads = b.createOrFold<arith::MulIOp>(loc, blockXY, block.z);
    Value gridXY = b.createOrFold<arith::MulIOp>(loc, grid.x, grid.y);
    Value numBlocks = b.createOrFold<arith::MulIOp>(loc, gridXY, grid.z);

    // Shared memory: one host buffer, which the blocks, running one after
    // another, use in turn (CUDA leaves it uninitialised at each block's
    // start too).
    for (BlockArgument a : launch.getWorkgroupAttributions()) {
      auto type = cast<MemRefType>(a.getType());
      Value shared = memref::AllocOp::create(
          b, loc, MemRefType::get(type.getShape(), type.getElementType()));
      uniform.map(a, shared);
      buffers.push_back(shared);
    }
    auto blockLoop = scf::ForOp::create(b, loc, indexConstant(b, loc, 0),
                                        numBlocks, indexConstant(b, loc, 1));
    bufferBuilder = std::make_unique<OpBuilder>(blockLoop);
    OpBuilder lb = OpBuilder::atBlockTerminator(blockLoop.getBody());
    Value id = reversed(lb, loc, blockLoop.getInductionVar(), numBlocks);
    gpu::KernelDim3 ids = launch.getBlockIds();
    uniform.map(ids.x, arith::RemUIOp::create(lb, loc, id, grid.x));
    uniform.map(ids.y, arith::RemUIOp::create(
                           lb, loc, arith::DivUIOp::create(lb, loc, id, grid.x),
                           grid.y));
    uniform.map(ids.z, arith::DivUIOp::create(lb, loc, id, gridXY));
    gpu::KernelDim3 gridArgs = launch.getGridSize();
    gpu::KernelDim3 blockArgs = launch.getBlockSize();
    uniform.map(gridArgs.x, grid.x);
    uniform.map(gridArgs.y, grid.y);
    uniform.map(gridArgs.z, grid.z);
    uniform.map(blockArgs.x, block.x);
    uniform.map(blockArgs.y, block.y);
    uniform.map(blockArgs.z, block.z);

    if (failed(emitBlock(lb, launch.getBody().front())))
      return failure();
    b.setInsertionPointAfter(blockLoop);
    for (Value buffer : buffers)
      memref::DeallocOp::create(b, loc, buffer);
    launch.erase();
    return success();
  }

private:
  LogicalResult checkSupported() {
    auto refuse = [&](Operation *at, const Twine &what) {
      return at->emitError("ds-emulate-gpu-kernels: cannot run ") << what;
    };
    if (launch.hasClusterSize())
      return refuse(launch, "a launch with thread-block clusters");
    if (launch.getDynamicSharedMemorySize())
      return refuse(launch, "a launch with dynamic shared memory");
    if (launch.getNumPrivateAttributions())
      return refuse(launch, "a launch with private memory attributions");
    for (BlockArgument a : launch.getWorkgroupAttributions()) {
      auto type = dyn_cast<MemRefType>(a.getType());
      if (!type || !type.hasStaticShape() || !type.getLayout().isIdentity())
        return refuse(launch, "a workgroup attribution that is not a static "
                              "identity-layout buffer");
    }
    if (!launch.getAsyncDependencies().empty() || launch.getAsyncToken())
      return refuse(launch, "an asynchronous launch (emulate before "
                            "gpu-async-region)");
    if (!launch.getBody().hasOneBlock())
      return refuse(launch, "a launch body of several blocks (emulate "
                            "before convert-scf-to-cf)");
    WalkResult r = launch.getBody().walk([&](Operation *op) {
      if (isa<gpu::ShuffleOp, gpu::LaunchOp, gpu::LaneIdOp, gpu::GlobalIdOp,
              gpu::SubgroupIdOp, gpu::NumSubgroupsOp, gpu::SubgroupSizeOp,
              gpu::ClusterIdOp, gpu::ClusterDimOp, gpu::ClusterBlockIdOp,
              gpu::ClusterDimBlocksOp, gpu::PrintfOp>(op) ||
          op->getName().getStringRef() == "gpu.dynamic_shared_memory") {
        (void)refuse(op, Twine("'") + op->getName().getStringRef() + "'");
        return WalkResult::interrupt();
      }
      if (auto reduce = dyn_cast<gpu::SubgroupReduceOp>(op);
          reduce && (reduce.getClusterSize() || !storable(reduce.getType()))) {
        (void)refuse(op, "a clustered or vector subgroup_reduce");
        return WalkResult::interrupt();
      }
      if (auto reduce = dyn_cast<gpu::AllReduceOp>(op);
          reduce && !reduce.getOp()) {
        (void)refuse(op, "an all-reduce with a region (only its operation "
                         "attribute form)");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    return failure(r.wasInterrupted());
  }

  /// n - 1 - i: blocks and threads run last first. The CPU path runs its
  /// loops first to last, so a kernel whose result depends on the order of
  /// its threads (two threads writing one element, one reading what
  /// another writes) differs from it, instead of matching by luck.
  static Value reversed(OpBuilder &b, Location loc, Value i, Value n) {
    Value last = arith::SubIOp::create(b, loc, n, indexConstant(b, loc, 1));
    return arith::SubIOp::create(b, loc, last, i);
  }

  /// gpu.thread_id and its kin inside the body become the launch's own
  /// block arguments, which the loops map.
  void replaceIndexOps() {
    auto pick = [](gpu::KernelDim3 dims, gpu::Dimension d) {
      return d == gpu::Dimension::x   ? dims.x
             : d == gpu::Dimension::y ? dims.y
                                      : dims.z;
    };
    SmallVector<Operation *> dead;
    launch.getBody().walk([&](Operation *op) {
      Value v;
      if (auto t = dyn_cast<gpu::ThreadIdOp>(op))
        v = pick(launch.getThreadIds(), t.getDimension());
      else if (auto b = dyn_cast<gpu::BlockIdOp>(op))
        v = pick(launch.getBlockIds(), b.getDimension());
      else if (auto bd = dyn_cast<gpu::BlockDimOp>(op))
        v = pick(launch.getBlockSize(), bd.getDimension());
      else if (auto gd = dyn_cast<gpu::GridDimOp>(op))
        v = pick(launch.getGridSize(), gd.getDimension());
      if (!v)
        return;
      op->getResult(0).replaceAllUsesWith(v);
      dead.push_back(op);
    });
    for (Operation *op : dead)
      op->erase();
  }

  bool definedInLaunch(Value v) {
    return launch.getBody().isAncestor(v.getParentRegion());
  }

  bool isThreadId(Value v) {
    gpu::KernelDim3 t = launch.getThreadIds();
    return v == t.x || v == t.y || v == t.z;
  }

  /// The op of `block` that defines `v` or holds its definition, if any.
  static Operation *ancestorIn(Block &block, Value v) {
    Operation *def = v.getDefiningOp();
    if (!def)
      def = cast<BlockArgument>(v).getOwner()->getParentOp();
    return def ? block.findAncestorOpInBlock(*def) : nullptr;
  }

  /// A buffer of one `type` element per thread, allocated before the loop
  /// over blocks and freed after it.
  Value newBuffer(Type type, Location loc) {
    Value buffer;
    if (std::optional<int64_t> n = getConstantIntValue(numThreads))
      buffer = memref::AllocOp::create(*bufferBuilder, loc,
                                       MemRefType::get({*n}, type));
    else
      buffer = memref::AllocOp::create(
          *bufferBuilder, loc, MemRefType::get({ShapedType::kDynamic}, type),
          ValueRange{numThreads});
    buffers.push_back(buffer);
    return buffer;
  }

  /// Emits the ops of `block` (without its terminator) at `b`: stretches
  /// without synchronisation as loops over the threads, synchronising ops
  /// between them.
  LogicalResult emitBlock(OpBuilder &b, Block &block) {
    SmallVector<Operation *> stretch;
    for (Operation &op : block.without_terminator()) {
      if (!containsSync(&op)) {
        stretch.push_back(&op);
        continue;
      }
      if (failed(emitStretch(b, block, stretch)) || failed(emitSync(b, &op)))
        return failure();
      stretch.clear();
    }
    return emitStretch(b, block, stretch);
  }

  /// `v` inside the loop over threads of a stretch of `block` (`inStretch`),
  /// at iteration `t`: from the stretch itself (cloned in order), a buffer,
  /// or recomputed from its operands.
  LogicalResult materialize(OpBuilder &b, Block &block, Value v, Value t,
                            IRMapping &m,
                            const llvm::SmallPtrSetImpl<Operation *> &in) {
    if (m.contains(v) || !definedInLaunch(v))
      return success();
    if (Operation *a = ancestorIn(block, v); a && in.count(a))
      return success();
    Location loc = launch.getLoc();
    if (auto it = perThread.find(v); it != perThread.end()) {
      m.map(v, memref::LoadOp::create(b, loc, it->second, t));
      return success();
    }
    Operation *def = v.getDefiningOp();
    if (!def || !isMemoryEffectFree(def) || def->getNumRegions() != 0)
      return launch.emitError("ds-emulate-gpu-kernels: cannot keep a value "
                              "of type ")
             << v.getType() << " per thread across a synchronisation";
    for (Value operand : def->getOperands())
      if (failed(materialize(b, block, operand, t, m, in)))
        return failure();
    b.clone(*def, m);
    return success();
  }

  /// Keeps `v` (a result of the stretch being emitted, mapped to `mapped`)
  /// for later stretches: a scalar in a buffer, a view through the scalars
  /// it is computed from.
  void keepForLater(OpBuilder &b, Block &block, Value v, Value t, IRMapping &m,
                    const llvm::SmallPtrSetImpl<Operation *> &in) {
    if (perThread.count(v))
      return;
    Operation *def = v.getDefiningOp();
    if (def && def->hasTrait<OpTrait::ConstantLike>())
      return; // recomputed where it is read
    if (storable(v.getType())) {
      Value buffer = newBuffer(v.getType(), v.getLoc());
      memref::StoreOp::create(b, v.getLoc(), m.lookup(v), buffer, t);
      perThread[v] = buffer;
      return;
    }
    if (!def || !isMemoryEffectFree(def))
      return; // materialize reports it where it is needed
    for (Value operand : def->getOperands())
      if (Operation *a = ancestorIn(block, operand); a && in.count(a))
        keepForLater(b, block, operand, t, m, in);
  }

  /// The ops of `stretch` (consecutive ops of `block`) for every thread.
  LogicalResult emitStretch(OpBuilder &b, Block &block,
                            ArrayRef<Operation *> stretch) {
    if (stretch.empty())
      return success();
    Location loc = stretch.front()->getLoc();
    llvm::SmallPtrSet<Operation *, 16> in(stretch.begin(), stretch.end());
    auto loop = scf::ForOp::create(b, loc, indexConstant(b, loc, 0), numThreads,
                                   indexConstant(b, loc, 1));
    OpBuilder lb = OpBuilder::atBlockTerminator(loop.getBody());
    Value t = reversed(lb, loc, loop.getInductionVar(), numThreads);
    IRMapping m = uniform;
    gpu::KernelDim3 tids = launch.getThreadIds();
    m.map(tids.x, arith::RemUIOp::create(lb, loc, t, blockX));
    m.map(tids.y,
          arith::RemUIOp::create(
              lb, loc, arith::DivUIOp::create(lb, loc, t, blockX), blockY));
    m.map(tids.z, arith::DivUIOp::create(lb, loc, t, blockXY));
    for (Operation *op : stretch) {
      WalkResult r = op->walk([&](Operation *inner) {
        for (Value v : inner->getOperands())
          if (failed(materialize(lb, block, v, t, m, in)))
            return WalkResult::interrupt();
        return WalkResult::advance();
      });
      if (r.wasInterrupted())
        return failure();
    }
    for (Operation *op : stretch)
      lb.clone(*op, m);
    for (Operation *op : stretch)
      for (Value r : op->getResults())
        if (llvm::any_of(r.getUsers(), [&](Operation *user) {
              Operation *a = block.findAncestorOpInBlock(*user);
              return !a || !in.count(a);
            }))
          keepForLater(lb, block, r, t, m, in);
    return success();
  }

  /// Thread `t`'s copy of `v` at `b`, outside the loops over threads.
  Value perThreadValue(OpBuilder &b, Value v, Value t) {
    if (auto it = perThread.find(v); it != perThread.end())
      return memref::LoadOp::create(b, launch.getLoc(), it->second, t);
    return uniform.lookupOrDefault(v);
  }

  /// `v` where every thread must see the same value (a synchronising
  /// loop's bounds, a condition): thread 0's, after checking that every
  /// thread agrees. `scope` holds the values computed at `b` so far.
  FailureOr<Value> uniformValue(OpBuilder &b, Value v, IRMapping &scope) {
    if (scope.contains(v) || !definedInLaunch(v))
      return scope.lookupOrDefault(v);
    Location loc = launch.getLoc();
    if (isThreadId(v))
      return launch.emitError("ds-emulate-gpu-kernels: a synchronisation "
                              "depends on the thread id (every thread of a "
                              "block must reach it)"),
             failure();
    if (auto it = perThread.find(v); it != perThread.end()) {
      Value buffer = it->second;
      Value first = memref::LoadOp::create(
          b, loc, buffer, ValueRange{indexConstant(b, loc, 0)});
      auto check = scf::ForOp::create(b, loc, indexConstant(b, loc, 1),
                                      numThreads, indexConstant(b, loc, 1));
      OpBuilder cb = OpBuilder::atBlockTerminator(check.getBody());
      Value other =
          memref::LoadOp::create(cb, loc, buffer, check.getInductionVar());
      Value same = isa<FloatType>(v.getType())
                       ? arith::CmpFOp::create(
                             cb, loc, arith::CmpFPredicate::OEQ, other, first)
                             .getResult()
                       : arith::CmpIOp::create(
                             cb, loc, arith::CmpIPredicate::eq, other, first)
                             .getResult();
      auto differs = scf::IfOp::create(
          cb, loc, arith::XOrIOp::create(cb, loc, same, trueValue(cb, loc)));
      OpBuilder fb = OpBuilder::atBlockTerminator(differs.thenBlock());
      if (failed(emulation::emitFatal(
              fb, loc,
              "ds-emulate-gpu-kernels: the threads of a block "
              "disagree on a value that decides a "
              "synchronisation")))
        return failure();
      scope.map(v, first);
      return first;
    }
    Operation *def = v.getDefiningOp();
    if (!def || !isMemoryEffectFree(def) || def->getNumRegions() != 0)
      return launch.emitError("ds-emulate-gpu-kernels: cannot use a value of "
                              "type ")
                 << v.getType() << " computed per thread to synchronise",
             failure();
    for (Value operand : def->getOperands())
      if (failed(uniformValue(b, operand, scope)))
        return failure();
    b.clone(*def, scope);
    return scope.lookup(v);
  }

  static Value trueValue(OpBuilder &b, Location loc) {
    return arith::ConstantIntOp::create(b, loc, 1, 1);
  }

  LogicalResult emitSync(OpBuilder &b, Operation *op) {
    Location loc = op->getLoc();
    if (isa<gpu::BarrierOp>(op))
      return success(); // the stretch before it ran for every thread
    if (auto reduce = dyn_cast<gpu::AllReduceOp>(op)) {
      // Threads' values folded in thread order.
      Value v = reduce.getValue();
      Value first = perThreadValue(b, v, indexConstant(b, loc, 0));
      auto fold =
          scf::ForOp::create(b, loc, indexConstant(b, loc, 1), numThreads,
                             indexConstant(b, loc, 1), ValueRange{first});
      OpBuilder fb = OpBuilder::atBlockEnd(fold.getBody());
      Value next = perThreadValue(fb, v, fold.getInductionVar());
      Value acc = vector::makeArithReduction(
          fb, loc, gpu::convertReductionKind(*reduce.getOp()),
          fold.getRegionIterArgs()[0], next);
      scf::YieldOp::create(fb, loc, acc);
      uniform.map(reduce.getResult(), fold.getResult(0));
      return success();
    }
    if (auto reduce = dyn_cast<gpu::SubgroupReduceOp>(op)) {
      // Each subgroup's values folded in lane order, the total kept for
      // each of its threads.
      Value v = reduce.getValue();
      Value lanes = indexConstant(b, loc, kSubgroupSize);
      Value totals = newBuffer(v.getType(), loc);
      auto groups = scf::ForOp::create(b, loc, indexConstant(b, loc, 0),
                                       numThreads, lanes);
      OpBuilder gb = OpBuilder::atBlockTerminator(groups.getBody());
      Value first = groups.getInductionVar();
      Value end = arith::MinUIOp::create(
          gb, loc, arith::AddIOp::create(gb, loc, first, lanes), numThreads);
      Value one = indexConstant(gb, loc, 1);
      auto fold = scf::ForOp::create(
          gb, loc, arith::AddIOp::create(gb, loc, first, one), end, one,
          ValueRange{perThreadValue(gb, v, first)});
      OpBuilder fb = OpBuilder::atBlockEnd(fold.getBody());
      Value acc = vector::makeArithReduction(
          fb, loc, gpu::convertReductionKind(reduce.getOp()),
          fold.getRegionIterArgs()[0],
          perThreadValue(fb, v, fold.getInductionVar()));
      scf::YieldOp::create(fb, loc, acc);
      auto spread = scf::ForOp::create(gb, loc, first, end, one);
      OpBuilder sb = OpBuilder::atBlockTerminator(spread.getBody());
      memref::StoreOp::create(sb, loc, fold.getResult(0), totals,
                              spread.getInductionVar());
      perThread[reduce.getResult()] = totals;
      return success();
    }
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      if (loop.getNumRegionIterArgs() != 0)
        return op->emitError("ds-emulate-gpu-kernels: cannot run a loop that "
                             "carries values across a synchronisation");
      IRMapping scope = uniform;
      FailureOr<Value> lb = uniformValue(b, loop.getLowerBound(), scope);
      FailureOr<Value> ub = uniformValue(b, loop.getUpperBound(), scope);
      FailureOr<Value> step = uniformValue(b, loop.getStep(), scope);
      if (failed(lb) || failed(ub) || failed(step))
        return failure();
      auto copy = scf::ForOp::create(b, loc, *lb, *ub, *step);
      copy.setUnsignedCmp(loop.getUnsignedCmp());
      uniform.map(loop.getInductionVar(), copy.getInductionVar());
      OpBuilder body = OpBuilder::atBlockTerminator(copy.getBody());
      return emitBlock(body, *loop.getBody());
    }
    if (auto branch = dyn_cast<scf::IfOp>(op)) {
      if (branch.getNumResults() != 0)
        return op->emitError("ds-emulate-gpu-kernels: cannot run an scf.if "
                             "with results around a synchronisation");
      IRMapping scope = uniform;
      FailureOr<Value> cond = uniformValue(b, branch.getCondition(), scope);
      if (failed(cond))
        return failure();
      bool hasElse = !branch.getElseRegion().empty();
      auto copy = scf::IfOp::create(b, loc, *cond, hasElse);
      OpBuilder thenB = OpBuilder::atBlockTerminator(copy.thenBlock());
      if (failed(emitBlock(thenB, *branch.thenBlock())))
        return failure();
      if (!hasElse)
        return success();
      OpBuilder elseB = OpBuilder::atBlockTerminator(copy.elseBlock());
      return emitBlock(elseB, *branch.elseBlock());
    }
    return op->emitError("ds-emulate-gpu-kernels: cannot run '")
           << op->getName() << "' around a synchronisation";
  }

  gpu::LaunchOp launch;
  Value numThreads, blockX, blockY, blockXY;
  /// Values that are the same for every thread of a block, valid outside
  /// the loops over threads: block ids and sizes, all-reduce results, the
  /// induction variables of synchronising loops.
  IRMapping uniform;
  /// Scalars a stretch computes per thread that later stretches read.
  DenseMap<Value, Value> perThread;
  SmallVector<Value> buffers;
  /// Allocates the per-thread buffers, before the loop over blocks.
  std::unique_ptr<OpBuilder> bufferBuilder;
};

struct EmulateGPUKernelsPass
    : public mlir::ds::impl::EmulateGPUKernelsPassBase<EmulateGPUKernelsPass> {
  void runOnOperation() override {
    SmallVector<gpu::LaunchOp> launches;
    getOperation().walk([&](gpu::LaunchOp l) { launches.push_back(l); });
    for (gpu::LaunchOp launch : launches)
      if (failed(LaunchEmulator(launch).run()))
        return signalPassFailure();
  }
};

} // namespace
