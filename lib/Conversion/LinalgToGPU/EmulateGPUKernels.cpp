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
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::ds {
#define GEN_PASS_DEF_EMULATEGPUKERNELSPASS
#include "ds/Conversion/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;

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

/// Whether a per-thread value of type `t` can be kept in a buffer; others
/// (views) are recomputed where they are read.
bool storable(Type t) { return t.isIntOrIndexOrFloat(); }

Value indexConstant(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// Rewrites one gpu.launch into host loops.
class LaunchEmulator {
public:
  explicit LaunchEmulator(gpu::LaunchOp launch) : launch(launch) {}

  LogicalResult run() {
    if (failed(checkSupported()) || failed(checkAccesses()) ||
        failed(checkBlockRaces()))
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
      if (failed(emitFatal(fb, loc,
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

  /// Before each load and store of the body, a check that its indices are
  /// in bounds, and for a vector access that claims more alignment than its
  /// element's (the kernels' 16-byte vectors, VectorKernels.h), that its
  /// address has it. The host runs what a GPU would not: an access past a
  /// buffer's end reads or corrupts another allocation (on a GPU, another
  /// buffer, or an illegal-address fault), and a misaligned vector access
  /// faults ("misaligned address"). Without the checks, a kernel that
  /// did either could still match its reference here.
  LogicalResult checkAccesses() {
    SmallVector<Operation *> accesses;
    launch.getBody().walk([&](Operation *op) {
      if (isa<memref::LoadOp, memref::StoreOp, vector::LoadOp, vector::StoreOp>(
              op))
        accesses.push_back(op);
    });
    for (Operation *op : accesses) {
      Value base;
      ValueRange indices;
      std::optional<uint64_t> alignment;
      int64_t lanes = 1;
      if (auto load = dyn_cast<memref::LoadOp>(op)) {
        base = load.getMemRef();
        indices = load.getIndices();
      } else if (auto store = dyn_cast<memref::StoreOp>(op)) {
        base = store.getMemRef();
        indices = store.getIndices();
      } else if (auto load = dyn_cast<vector::LoadOp>(op)) {
        base = load.getBase();
        indices = load.getIndices();
        alignment = load.getAlignment();
        lanes = load.getVectorType().getNumElements();
      } else {
        auto store = cast<vector::StoreOp>(op);
        base = store.getBase();
        indices = store.getIndices();
        alignment = store.getAlignment();
        lanes = store.getVectorType().getNumElements();
      }
      OpBuilder b(op);
      Location loc = op->getLoc();
      // In bounds: every index below its extent (unsigned, so a negative
      // one is not), the last one's vector too.
      Value fails = arith::ConstantIntOp::create(b, loc, 0, 1);
      for (auto [d, index] : llvm::enumerate(indices)) {
        Value last = index;
        if (d + 1 == indices.size() && lanes > 1)
          last = arith::AddIOp::create(b, loc, index,
                                       indexConstant(b, loc, lanes - 1));
        Value extent = memref::DimOp::create(b, loc, base, d);
        fails = arith::OrIOp::create(
            b, loc, fails,
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, last,
                                  extent));
      }
      if (!indices.empty() &&
          failed(emitCheck(b, loc, op, fails,
                           "out of bounds (a GPU reads or writes another "
                           "buffer, or faults: illegal address)")))
        return failure();
      Type element = cast<MemRefType>(base.getType()).getElementType();
      if (!alignment || !element.isIntOrFloat() ||
          *alignment * 8 <= element.getIntOrFloatBitWidth())
        continue;
      auto meta = memref::ExtractStridedMetadataOp::create(b, loc, base);
      Value linear = meta.getOffset();
      for (auto [index, stride] : llvm::zip(indices, meta.getStrides()))
        linear = arith::AddIOp::create(
            b, loc, linear, arith::MulIOp::create(b, loc, index, stride));
      Value bytes = arith::MulIOp::create(
          b, loc, linear,
          indexConstant(b, loc,
                        llvm::divideCeil(element.getIntOrFloatBitWidth(), 8)));
      Value address = arith::AddIOp::create(
          b, loc, memref::ExtractAlignedPointerAsIndexOp::create(b, loc, base),
          bytes);
      Value misaligned = arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::ne,
          arith::AndIOp::create(
              b, loc, address,
              indexConstant(b, loc, static_cast<int64_t>(*alignment) - 1)),
          indexConstant(b, loc, 0));
      if (failed(emitCheck(b, loc, op, misaligned,
                           "claims " + Twine(*alignment) +
                               "-byte alignment at an address without it "
                               "(a GPU faults: misaligned address)")))
        return failure();
    }
    return success();
  }

  /// A buffer the launch writes, and who touched each of its elements so
  /// far in this launch: the block that wrote it and the block that read it
  /// (-1: none; -2: several).
  struct Shadow {
    Value writer, reader;
    SmallVector<Value> dims; // the buffer's extents, for row-major indices
  };

  /// Elements of a buffer that one block writes and another reads or writes
  /// in the same launch: on a GPU the blocks run in any order and at once,
  /// so what the reader sees depends on timing. Run one after another here,
  /// the blocks would give one of those orders, and the result might match
  /// by luck. So each buffer the launch stores to (defined outside it)
  /// gets two shadows of its elements, and each load and store of it checks
  /// and updates them. Views of a buffer taken outside the launch are
  /// tracked apart from each other, and so are threads of one block.
  LogicalResult checkBlockRaces() {
    SmallVector<Operation *> accesses;
    llvm::MapVector<Value, Shadow> shadows;
    auto baseOf = [](Operation *op) -> Value {
      if (auto load = dyn_cast<memref::LoadOp>(op))
        return load.getMemRef();
      if (auto store = dyn_cast<memref::StoreOp>(op))
        return store.getMemRef();
      if (auto load = dyn_cast<vector::LoadOp>(op))
        return load.getBase();
      if (auto store = dyn_cast<vector::StoreOp>(op))
        return store.getBase();
      return Value();
    };
    launch.getBody().walk([&](Operation *op) {
      Value base = baseOf(op);
      if (!base)
        return;
      accesses.push_back(op);
      if (isa<memref::StoreOp, vector::StoreOp>(op) &&
          !launch.getBody().isAncestor(base.getParentRegion()))
        shadows.insert({base, Shadow()});
    });
    if (shadows.empty())
      return success();

    Location loc = launch.getLoc();
    OpBuilder b(launch);
    Type i32 = b.getI32Type();
    for (auto &[base, shadow] : shadows) {
      auto type = cast<MemRefType>(base.getType());
      Value count = indexConstant(b, loc, 1);
      for (int64_t d = 0; d < type.getRank(); ++d) {
        shadow.dims.push_back(b.createOrFold<memref::DimOp>(loc, base, d));
        count = b.createOrFold<arith::MulIOp>(loc, count, shadow.dims.back());
      }
      auto shadowType = MemRefType::get({ShapedType::kDynamic}, i32);
      shadow.writer = memref::AllocOp::create(b, loc, shadowType, count);
      shadow.reader = memref::AllocOp::create(b, loc, shadowType, count);
      buffers.push_back(shadow.writer);
      buffers.push_back(shadow.reader);
      Value none = arith::ConstantIntOp::create(b, loc, -1, 32);
      auto init = scf::ForOp::create(b, loc, indexConstant(b, loc, 0), count,
                                     indexConstant(b, loc, 1));
      OpBuilder ib = OpBuilder::atBlockTerminator(init.getBody());
      memref::StoreOp::create(ib, loc, none, shadow.writer,
                              init.getInductionVar());
      memref::StoreOp::create(ib, loc, none, shadow.reader,
                              init.getInductionVar());
    }

    // The block's linear id, from the launch's own arguments.
    OpBuilder bb = OpBuilder::atBlockBegin(&launch.getBody().front());
    gpu::KernelDim3 ids = launch.getBlockIds();
    gpu::KernelDim3 grid = launch.getGridSize();
    Value linear = arith::AddIOp::create(
        bb, loc, ids.x,
        arith::MulIOp::create(
            bb, loc, grid.x,
            arith::AddIOp::create(
                bb, loc, ids.y,
                arith::MulIOp::create(bb, loc, grid.y, ids.z))));
    Value block = arith::IndexCastOp::create(bb, loc, i32, linear);

    FailureOr<func::FuncOp> checker = raceChecker();
    if (failed(checker))
      return failure();
    for (Operation *op : accesses) {
      auto it = shadows.find(baseOf(op));
      if (it == shadows.end())
        continue;
      const Shadow &shadow = it->second;
      bool writes = isa<memref::StoreOp, vector::StoreOp>(op);
      ValueRange indices =
          TypeSwitch<Operation *, ValueRange>(op)
              .Case([](memref::LoadOp o) { return o.getIndices(); })
              .Case([](memref::StoreOp o) { return o.getIndices(); })
              .Case([](vector::LoadOp o) { return o.getIndices(); })
              .Case([](vector::StoreOp o) { return o.getIndices(); });
      int64_t lanes = 1;
      if (auto load = dyn_cast<vector::LoadOp>(op))
        lanes = load.getVectorType().getNumElements();
      else if (auto store = dyn_cast<vector::StoreOp>(op))
        lanes = store.getVectorType().getNumElements();
      OpBuilder ob(op);
      Location at = op->getLoc();
      // Row-major element index (in bounds: checkAccesses stops first).
      Value element = indexConstant(ob, at, 0);
      for (auto [index, dim] : llvm::zip(indices, shadow.dims))
        element = arith::AddIOp::create(
            ob, at, arith::MulIOp::create(ob, at, element, dim), index);
      std::string text = where(op);
      FailureOr<Value> whereText = stringGlobal(ob, at, text);
      if (failed(whereText))
        return failure();
      func::CallOp::create(
          ob, at, *checker,
          ValueRange{shadow.writer, shadow.reader, element,
                     indexConstant(ob, at, lanes), block,
                     arith::ConstantIntOp::create(ob, at, writes, 1),
                     *whereText,
                     arith::ConstantIntOp::create(ob, at, text.size(), 64)});
    }
    return success();
  }

  /// The module's `__ds_emulate_race_check(writer, reader, element, lanes,
  /// block, writes, where, whereLength)`, made on first use: for elements
  /// [element, element + lanes) of a shadowed buffer, records this block as
  /// their writer or reader, and stops the emulation with `where` and what
  /// happened if another block wrote one, or a write meets another block's
  /// read. One call an access, out of line: the checks inline at every
  /// access more than doubled the emulated steps' LLVM time.
  FailureOr<func::FuncOp> raceChecker() {
    StringRef name = "__ds_emulate_race_check";
    auto module = launch->getParentOfType<ModuleOp>();
    MLIRContext *ctx = module.getContext();
    Type i32 = IntegerType::get(ctx, 32);
    Type index = IndexType::get(ctx);
    auto shadowType = MemRefType::get({ShapedType::kDynamic}, i32);
    auto type = FunctionType::get(
        ctx,
        {shadowType, shadowType, index, index, i32, IntegerType::get(ctx, 1),
         LLVM::LLVMPointerType::get(ctx), IntegerType::get(ctx, 64)},
        {});
    if (Operation *existing = module.lookupSymbol(name)) {
      auto f = dyn_cast<func::FuncOp>(existing);
      if (f && f.getFunctionType() == type)
        return f;
      return existing->emitError("ds-emulate-gpu-kernels: '")
             << name << "' is taken by another symbol";
    }
    Location loc = module.getLoc();
    OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
    auto f = func::FuncOp::create(mb, loc, name, type);
    f.setPrivate();
    f->setAttr("no_inline", UnitAttr::get(ctx));
    OpBuilder b = OpBuilder::atBlockBegin(f.addEntryBlock());
    auto args = f.getArguments();
    Value writerShadow = args[0], readerShadow = args[1], block = args[4],
          writes = args[5];
    auto c32 = [&](int64_t v) {
      return arith::ConstantIntOp::create(b, loc, v, 32);
    };
    auto lanes =
        scf::ForOp::create(b, loc, indexConstant(b, loc, 0), args[3],
                           indexConstant(b, loc, 1), ValueRange{c32(0)});
    {
      OpBuilder lb = OpBuilder::atBlockBegin(lanes.getBody());
      std::swap(b, lb);
      Value e = arith::AddIOp::create(b, loc, args[2], lanes.getInductionVar());
      Value writer = memref::LoadOp::create(b, loc, writerShadow, e);
      Value reader = memref::LoadOp::create(b, loc, readerShadow, e);
      // Another block: an id (>= 0) other than this one, or several (-2).
      auto other = [&](Value who) -> Value {
        return arith::AndIOp::create(
            b, loc,
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, who,
                                  c32(-1)),
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, who,
                                  block));
      };
      Value readMet = arith::AndIOp::create(b, loc, writes, other(reader));
      Value code = arith::SelectOp::create(
          b, loc, other(writer), c32(1),
          arith::SelectOp::create(b, loc, readMet, c32(2), c32(0)));
      code = arith::MaxSIOp::create(b, loc, lanes.getRegionIterArgs()[0], code);
      // A write records its block; a read its block where none or only
      // this one read before, else "several".
      Value firstReader = arith::OrIOp::create(
          b, loc,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, reader,
                                c32(-1)),
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, reader,
                                block));
      Value newReader = arith::SelectOp::create(
          b, loc, writes, reader,
          arith::SelectOp::create(b, loc, firstReader, block, c32(-2)));
      Value newWriter = arith::SelectOp::create(b, loc, writes, block, writer);
      memref::StoreOp::create(b, loc, newWriter, writerShadow, e);
      memref::StoreOp::create(b, loc, newReader, readerShadow, e);
      scf::YieldOp::create(b, loc, code);
      std::swap(b, lb);
    }
    // 1: another block wrote; 2: this write meets another block's read.
    Value code = lanes.getResult(0);
    auto is = [&](OpBuilder &at, Value v, int64_t c) -> Value {
      return arith::CmpIOp::create(
          at, loc, arith::CmpIPredicate::eq, v,
          arith::ConstantIntOp::create(at, loc, c, 32));
    };
    auto failing = scf::IfOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, code, c32(0)));
    {
      OpBuilder fb = OpBuilder::atBlockTerminator(failing.thenBlock());
      if (failed(emitWrite(fb, loc, "ds-emulate-gpu-kernels: ")))
        return failure();
      writeTo2(fb, loc, args[6], args[7]);
      std::string race =
          " in the same launch (blocks run in any order and at once on a "
          "GPU: a race)\n";
      Value reads = arith::XOrIOp::create(
          fb, loc, writes, arith::ConstantIntOp::create(fb, loc, 1, 1));
      std::pair<Value, std::string> messages[] = {
          {arith::AndIOp::create(fb, loc, is(fb, code, 1), reads),
           " reads an element that another block writes" + race},
          {arith::AndIOp::create(fb, loc, is(fb, code, 1), writes),
           " writes an element that another block writes" + race},
          {is(fb, code, 2),
           " writes an element that another block reads" + race}};
      for (auto &m : messages) {
        auto branch = scf::IfOp::create(fb, loc, m.first);
        OpBuilder mb = OpBuilder::atBlockTerminator(branch.thenBlock());
        if (failed(emitWrite(mb, loc, m.second)))
          return failure();
      }
      func::CallOp::create(fb, loc, "abort", TypeRange{}, ValueRange{});
    }
    func::ReturnOp::create(b, loc);
    return f;
  }

  /// Stops the emulation with `ds-emulate-gpu-kernels: FILE:LINE:COL: <op>
  /// <what>` where `fails` holds.
  LogicalResult emitCheck(OpBuilder &b, Location loc, Operation *op,
                          Value fails, const Twine &what) {
    auto branch = scf::IfOp::create(b, loc, fails);
    OpBuilder fb = OpBuilder::atBlockTerminator(branch.thenBlock());
    return emitFatal(fb, loc,
                     "ds-emulate-gpu-kernels: " + where(op) + " " + what);
  }

  /// `FILE:LINE:COL: <op>`, as compilers print a location.
  static std::string where(Operation *op) {
    std::string text;
    llvm::raw_string_ostream os(text);
    Location loc = op->getLoc();
    if (auto file = loc->findInstanceOf<FileLineColLoc>())
      os << file.getFilename().getValue() << ":" << file.getLine() << ":"
         << file.getColumn();
    else
      os << loc;
    os << ": " << op->getName().getStringRef();
    return text;
  }

  static Value trueValue(OpBuilder &b, Location loc) {
    return arith::ConstantIntOp::create(b, loc, 1, 1);
  }

  /// Writes `text` to standard error (unbuffered: write(2)).
  LogicalResult emitWrite(OpBuilder &b, Location loc, const Twine &text) {
    FailureOr<Value> addr = stringGlobal(b, loc, text);
    if (failed(addr))
      return failure();
    writeTo2(b, loc, *addr,
             arith::ConstantIntOp::create(b, loc, text.str().size(), 64));
    return success();
  }

  /// The address of a constant global holding `text` (named by its hash,
  /// so made once a module), with libc's write and abort declared.
  FailureOr<Value> stringGlobal(OpBuilder &b, Location loc, const Twine &text) {
    auto module = launch->getParentOfType<ModuleOp>();
    MLIRContext *ctx = b.getContext();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    std::string str = text.str();
    std::string name =
        "__ds_emulate_msg_" +
        llvm::utohexstr(static_cast<uint64_t>(llvm::hash_value(str)));
    OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
    if (!module.lookupSymbol(name))
      LLVM::GlobalOp::create(
          mb, loc,
          LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8), str.size()),
          /*isConstant=*/true, LLVM::Linkage::Internal, name,
          mb.getStringAttr(str));
    // libc's write and abort, declared unless the module has them.
    auto declare = [&](StringRef fn, FunctionType type) -> LogicalResult {
      Operation *existing = module.lookupSymbol(fn);
      if (!existing) {
        func::FuncOp::create(mb, loc, fn, type).setPrivate();
        return success();
      }
      auto f = dyn_cast<func::FuncOp>(existing);
      if (f && f.getFunctionType() == type)
        return success();
      return existing->emitError("ds-emulate-gpu-kernels: the emulated "
                                 "kernels call libc's '")
             << fn << "' as " << type << ", which this symbol is not";
    };
    if (failed(declare("write", FunctionType::get(
                                    ctx, {b.getI32Type(), ptr, b.getI64Type()},
                                    {b.getI64Type()}))) ||
        failed(declare("abort", FunctionType::get(ctx, {}, {}))))
      return failure();
    return Value(LLVM::AddressOfOp::create(b, loc, ptr, name));
  }

  static void writeTo2(OpBuilder &b, Location loc, Value addr, Value size) {
    Value fd = arith::ConstantIntOp::create(b, loc, 2, 32);
    func::CallOp::create(b, loc, "write", TypeRange{b.getI64Type()},
                         ValueRange{fd, addr, size});
  }

  /// Writes `message` to standard error and aborts.
  LogicalResult emitFatal(OpBuilder &b, Location loc, const Twine &message) {
    if (failed(emitWrite(b, loc, message + "\n")))
      return failure();
    func::CallOp::create(b, loc, "abort", TypeRange{}, ValueRange{});
    return success();
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
