//===- ReductionKernels.cpp - Parallel reductions on the GPU --------------===//
//
// Implements buildReductionLaunch and its shapes (a block, a warp or a
// thread per output, split or not), and the launch over rows that row
// groups share (ReductionKernels.h).
//
//===----------------------------------------------------------------------===//

#include "ReductionKernels.h"
#include "GenericVectors.h"

using namespace mlir;
using namespace mlir::ds::gpu_kernels;

bool mlir::ds::gpu_kernels::isParallelReduction(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInits() != 1 ||
      op.getNumReductionLoops() == 0)
    return false;
  Type et = getElementTypeOrSelf(op.getDpsInitOperand(0)->get().getType());
  if (!et.isF32() && !et.isF64() && !et.isInteger(32) && !et.isInteger(64))
    return false;
  // Inputs read through affine maps at the loop indices; anything else
  // (an index-dependent body is fine, a region-carrying op is not) stays
  // on the serial path.
  for (Operation &inner : op.getBody()->without_terminator())
    if (inner.getNumRegions() != 0)
      return false;
  Operation *comb = combinerOf(op);
  if (!comb || comb->getResult(0).getType() != et)
    return false;
  std::optional<gpu::AllReduceOperation> kind = combinerKind(comb);
  return kind && identityOf(*kind, et);
}

namespace {

/// Reduced elements per thread at least, in each block of a split
/// reduction: fewer, and the second pass costs more than it saves.
constexpr int64_t kMinElementsPerThread = 8;
/// Reduced elements per thread at least in a split column reduction (each
/// thread folds a run of its output's elements): fewer, and the partial
/// results cost more to write and fold than the elements they stand for.
constexpr int64_t kMinColumnRun = 32;

/// The longest row a warp takes alone: 32 elements per lane. PyTorch's
/// softmax gives rows up to 1024 elements a warp each as well.
constexpr int64_t kMaxWarpRow = 1024;

/// Blocks per output for a block reduction of `numOut` outputs of `numRed`
/// elements each (static sizes; 1: no split).
int64_t blockSplit(int64_t numOut, int64_t numRed, const LaunchShape &shape) {
  if (numOut <= 0 || numRed <= 0 || numOut >= kBlocksToFill)
    return 1;
  int64_t byWork = numRed / (shape.blockSize * kMinElementsPerThread);
  int64_t byBlocks = llvm::divideCeil(kBlocksToFill, numOut);
  return std::max<int64_t>(1, std::min(byWork, byBlocks));
}

/// Runs of elements per output for a column reduction of `numOut` outputs
/// of `numRed` elements each (static sizes; 1: no split): enough threads to
/// fill the GPU, each folding at least kMinColumnRun elements.
int64_t columnSplit(int64_t numOut, int64_t numRed, const LaunchShape &shape) {
  if (numOut <= 0 || numRed <= 0)
    return 1;
  int64_t threadsToFill = kBlocksToFill * shape.blockSize;
  int64_t byWork = numRed / kMinColumnRun;
  int64_t byThreads = llvm::divideCeil(threadsToFill, numOut);
  return std::max<int64_t>(1, std::min(byWork, byThreads));
}

} // namespace

/// Threads per block for a block per output of `numRed` elements (-1:
/// dynamic). A row shorter than the block size gets as many threads as it
/// has elements, rounded up to whole warps: an SM holds a fixed number of
/// threads, so 64-thread blocks on rows of 64 put four times as many rows
/// in flight as 256-thread blocks whose other 192 threads would idle.
int64_t mlir::ds::gpu_kernels::threadsPerRow(int64_t numRed,
                                             const LaunchShape &shape) {
  if (numRed < 0 || numRed >= shape.blockSize)
    return shape.blockSize;
  return std::max<int64_t>(32, llvm::alignTo(numRed, 32));
}

/// Whether `numOut` outputs (rows) of `numRed` elements each, static, get a
/// warp each rather than a block: rows short enough for a warp's lanes to
/// cover in a few strides, and many enough for warps alone to fill the GPU
/// (kBlocksToFill blocks' worth). The lanes then combine with shuffles
/// alone, where a block per row needs shared memory and barriers, and a
/// block runs blockSize / 32 rows at once.
bool mlir::ds::gpu_kernels::warpPerRow(int64_t numOut, int64_t numRed,
                                       const LaunchShape &shape) {
  if (shape.blockSize % kWarpSize != 0 || numRed < kMinParallelReduction ||
      numRed > kMaxWarpRow)
    return false;
  return numOut >= kBlocksToFill * (shape.blockSize / kWarpSize);
}

void mlir::ds::gpu_kernels::buildRowLaunch(
    OpBuilder &b, Location loc, int64_t numRows, bool warp, int64_t threads,
    const LaunchShape &shape,
    function_ref<void(OpBuilder &, Location, RowTeam &)> body,
    const RowLaunchExtras &extras) {
  int64_t perBlock = 1;
  if (warp)
    perBlock = extras.warpsPerBlock ? extras.warpsPerBlock
                                    : shape.blockSize / kWarpSize;
  Value blocks = clampBlocks(
      b, loc, indexConstant(b, loc, llvm::divideCeil(numRows, perBlock)),
      extras.maxBlocks ? extras.maxBlocks : shape.maxBlocks);
  Value threadsX = indexConstant(b, loc, warp ? kWarpSize : threads);
  Value threadsY = warp ? indexConstant(b, loc, perBlock) : Value();
  buildLaunch(
      b, loc, blocks, threadsX,
      [&](OpBuilder &kb, gpu::LaunchOp launch) {
        Value tid = launch.getThreadIds().x;
        Value zero = indexConstant(kb, loc, 0);
        Value perBlockValue = indexConstant(kb, loc, perBlock);
        Value isFirst =
            arith::CmpIOp::create(kb, loc, arith::CmpIPredicate::eq, tid, zero);
        // The block's first row, uniform across the block.
        Value start = arith::MulIOp::create(kb, loc, launch.getBlockIds().x,
                                            perBlockValue);
        Value step = arith::MulIOp::create(kb, loc, launch.getGridSize().x,
                                           perBlockValue);
        if (extras.before)
          extras.before(kb, loc, launch);
        scf::ForOp::create(
            kb, loc, start, indexConstant(kb, loc, numRows), step, ValueRange{},
            [&](OpBuilder &ob, Location l, Value blockRow, ValueRange) {
              RowTeam team;
              team.warp = warp;
              team.first = tid;
              team.stride = launch.getBlockSize().x;
              team.row = blockRow;
              team.leader = isFirst;
              team.index = zero;
              if (warp) {
                team.index = launch.getThreadIds().y;
                team.row = arith::AddIOp::create(ob, l, blockRow,
                                                 launch.getThreadIds().y);
                if (numRows % perBlock != 0) {
                  Value last = indexConstant(ob, l, numRows - 1);
                  team.real = arith::CmpIOp::create(
                      ob, l, arith::CmpIPredicate::ule, team.row, last);
                  team.row = arith::MinUIOp::create(ob, l, team.row, last);
                  team.leader =
                      arith::AndIOp::create(ob, l, team.leader, team.real);
                }
              }
              body(ob, l, team);
              scf::YieldOp::create(ob, l);
            });
        if (extras.after)
          extras.after(kb, loc, launch);
      },
      threadsY, extras.workgroup);
}

namespace {

/// `red`'s fold in vectors (GenericVectors.h), if the launch shape allows
/// it and the reduction (and its sibling) qualify.
std::optional<ReductionVectors> reductionVectors(Reduction &red,
                                                 const LaunchShape &shape) {
  if (!shape.vectorize)
    return std::nullopt;
  return planReductionVectors(red);
}

/// Output `parIdx`'s elements `first`, `first + step`, ... folded: in
/// vectors where `vectors` has a plan and `aligned` holds.
Value foldPart(OpBuilder &b, Location loc, Reduction &red,
               const std::optional<ReductionVectors> &vectors, Value aligned,
               ArrayRef<Value> parIdx, Value first, Value numRed, Value step) {
  if (vectors)
    return foldVectorsOrElements(b, loc, red, *vectors, parIdx, first, step,
                                 aligned);
  return red.foldRange(b, loc, parIdx, first, numRed, step);
}

/// A warp per output (warpPerRow): the lanes stride over the output's
/// reduced elements, combine with gpu.subgroup_reduce, and lane 0 folds the
/// total into the output.
void buildWarpReduction(OpBuilder &b, Reduction &red,
                        const LaunchShape &shape) {
  Location loc = red.op.getLoc();
  Value numRed = product(b, loc, red.redSizes);
  std::optional<ReductionVectors> vectors = reductionVectors(red, shape);
  buildRowLaunch(
      b, loc, red.numOutStatic, /*warp=*/true, kWarpSize, shape,
      [&](OpBuilder &ob, Location l, RowTeam &team) {
        SmallVector<Value> parIdx = delinearize(ob, l, team.row, red.parSizes);
        Value aligned =
            vectors ? buffersAligned(ob, l, vectors->buffers) : Value();
        Value partial = foldPart(ob, l, red, vectors, aligned, parIdx,
                                 team.first, numRed, team.stride);
        Value total = team.combine(ob, l, partial, red.kind);
        RowTeam::emitIf(ob, l, team.leader, [&](OpBuilder &ib, Location il) {
          red.foldIntoOutput(ib, il, parIdx, total);
        });
      });
}

/// A block per output (or per part of one): the block's threads stride
/// over the output's reduced elements, then combine their partial results
/// with a block-wide gpu.all_reduce, and thread 0 folds the total into the
/// output (or writes it as a partial result, when split).
void buildBlockReduction(OpBuilder &b, Reduction &red,
                         const LaunchShape &shape) {
  Location loc = red.op.getLoc();
  // Few outputs of many elements (a tensor's amax or norm: one output):
  // the first launch writes `split` partial results per output, each from
  // its own block, into `partials` [outputs..., split]; a second reduction
  // over the partials folds them into the output.
  int64_t split = blockSplit(red.numOutStatic, red.numRedStatic, shape);
  Value partials = split > 1 ? red.allocPartials(b, loc, split) : Value();
  Reduction::Tasks tasks = red.tasks(b, loc, split);
  Value numRed = tasks.numRed, splitValue = tasks.split, numTasks = tasks.count;
  Value threads = indexConstant(
      b, loc,
      split > 1 ? shape.blockSize : threadsPerRow(red.numRedStatic, shape));
  Value blocks = clampBlocks(b, loc, numTasks, shape.maxBlocks);
  std::optional<ReductionVectors> vectors = reductionVectors(red, shape);

  buildLaunch(
      b, loc, blocks, threads, [&](OpBuilder &kb, gpu::LaunchOp launch) {
        Value tid = launch.getThreadIds().x;
        Value zero = indexConstant(kb, loc, 0);
        Value aligned =
            vectors ? buffersAligned(kb, loc, vectors->buffers) : Value();
        // Tasks (an output, or a part of one): uniform across the block
        // (every thread of a block works on the same one), as the
        // block-wide all-reduce requires.
        scf::ForOp::create(
            kb, loc, launch.getBlockIds().x, numTasks, launch.getGridSize().x,
            ValueRange{},
            [&](OpBuilder &ob, Location l, Value task, ValueRange) {
              // Part `part` of a split output reads the reduced elements
              // (or vectors) part x blockSize + tid, then every split x
              // blockSize-th.
              Value o = task, first = tid, stride = launch.getBlockSize().x;
              Value part;
              if (split > 1) {
                o = arith::DivUIOp::create(ob, l, task, splitValue);
                part = arith::RemUIOp::create(ob, l, task, splitValue);
                first = arith::AddIOp::create(
                    ob, l, arith::MulIOp::create(ob, l, part, stride), tid);
                stride = arith::MulIOp::create(ob, l, stride, splitValue);
              }
              SmallVector<Value> parIdx = delinearize(ob, l, o, red.parSizes);
              Value partial = foldPart(ob, l, red, vectors, aligned, parIdx,
                                       first, numRed, stride);
              Value total = gpu::AllReduceOp::create(
                  ob, l, partial,
                  gpu::AllReduceOperationAttr::get(ob.getContext(), red.kind),
                  /*uniform=*/true);
              Value isFirst = arith::CmpIOp::create(
                  ob, l, arith::CmpIPredicate::eq, tid, zero);
              scf::IfOp::create(
                  ob, l, isFirst, [&](OpBuilder &ib, Location l3) {
                    if (partials) {
                      SmallVector<Value> idx(parIdx);
                      idx.push_back(part);
                      memref::StoreOp::create(ib, l3, total, partials, idx);
                    } else {
                      red.foldIntoOutput(ib, l3, parIdx, total);
                    }
                    scf::YieldOp::create(ib, l3);
                  });
              scf::YieldOp::create(ob, l);
            });
      });
  if (partials)
    red.foldPartials(b, loc, partials, shape);
}

/// How the threads of a column reduction take their tasks: an output (or
/// `vectors`: a vector of consecutive outputs) and a run of its elements.
struct ColumnTasks {
  Value numOut, numRed, run;
  int64_t lanes; // outputs a task
  Value count;   // tasks
};

/// One reduction of a column group (buildColumnReduction): the reduction,
/// its vector plan (null: elements) and its partial results' buffer (null:
/// none, the task folds into the output).
struct ColumnMember {
  Reduction *red;
  const GenericVectors *vectors;
  Value partials;
};

/// A column group's producer (ColumnGroup, ReductionSiblings.h) and its
/// vector plan (null: elements).
struct ColumnProducer {
  linalg::GenericOp op;
  const GenericVectors *vectors;
};

/// What the members before have loaded of a buffer through a map: the
/// value (an element or a vector) each of them would load again. The
/// producer's outputs come first, so that a member reads what it wrote.
using LoadedOperands =
    SmallVector<std::tuple<Value, AffineMap, Value>, 4>; // buffer, map, value

Value lookupLoaded(const LoadedOperands &loaded, linalg::GenericOp op,
                   OpOperand *operand) {
  for (auto [buffer, map, value] : loaded)
    if (buffer == operand->get() && map == op.getMatchingIndexingMap(operand))
      return value;
  return {};
}

/// The producer's iteration at `ivs`, its outputs stored: an element, or
/// with a plan a vector. Records in `loaded` its outputs' values, then what
/// it loaded of its inputs.
void emitProducerIteration(OpBuilder &b, Location loc,
                           const ColumnProducer &producer, ArrayRef<Value> ivs,
                           LoadedOperands &loaded) {
  linalg::GenericOp op = producer.op;
  if (producer.vectors) {
    SmallVector<Value> vectorsLoaded;
    SmallVector<SmallVector<Value>> lanes;
    emitGenericVector(b, loc, *producer.vectors, ivs, /*red=*/nullptr, {}, {},
                      &vectorsLoaded, &lanes);
    for (auto [init, values] : llvm::zip(op.getDpsInitsMutable(), lanes))
      loaded.push_back(
          {init.get(), op.getMatchingIndexingMap(&init),
           storeVectorOutput(b, loc, *producer.vectors, init, values, ivs)});
    for (OpOperand *in : op.getDpsInputOperands())
      if (Value v = vectorsLoaded[in->getOperandNumber()])
        loaded.push_back({in->get(), op.getMatchingIndexingMap(in), v});
    return;
  }
  IRMapping map;
  // Unmasked: the members may use what it loads.
  cloneBodyAt(b, loc, op, ivs, map, /*maskReads=*/false);
  for (auto [init, v] :
       llvm::zip(op.getDpsInitsMutable(), storeYieldedAt(b, loc, op, ivs, map)))
    loaded.push_back({init.get(), op.getMatchingIndexingMap(&init), v});
  for (OpOperand *in : op.getDpsInputOperands())
    if (BlockArgument arg = op.getMatchingBlockArgument(in); map.contains(arg))
      loaded.push_back(
          {in->get(), op.getMatchingIndexingMap(in), map.lookup(arg)});
}

/// Task `task` of a column reduction group: each member's outputs'
/// elements in its run, folded in order (one accumulator per output and
/// member) into the outputs or, with partials, written there. An input
/// that several members read through the same map is loaded once. With a
/// `producer`, its iteration at each element comes first.
void emitColumnTask(OpBuilder &b, Location loc, ArrayRef<ColumnMember> members,
                    const ColumnProducer *producer, const ColumnTasks &t,
                    bool vectors, Value task) {
  Reduction &lead = *members.front().red;
  bool split = static_cast<bool>(members.front().partials);
  // Consecutive tasks on consecutive outputs (or vectors of them).
  Value outVectors = t.numOut;
  if (t.lanes > 1)
    outVectors = arith::DivUIOp::create(b, loc, t.numOut,
                                        indexConstant(b, loc, t.lanes));
  Value o = task, part;
  if (split) {
    o = arith::RemUIOp::create(b, loc, task, outVectors);
    part = arith::DivUIOp::create(b, loc, task, outVectors);
  }
  if (t.lanes > 1)
    o = arith::MulIOp::create(b, loc, o, indexConstant(b, loc, t.lanes));
  SmallVector<Value> parIdx = delinearize(b, loc, o, lead.parSizes);
  Value first = indexConstant(b, loc, 0), end = t.numRed;
  if (split) {
    first = arith::MulIOp::create(b, loc, part, t.run);
    end = arith::MinUIOp::create(
        b, loc, arith::AddIOp::create(b, loc, first, t.run), t.numRed);
  }
  Value one = indexConstant(b, loc, 1);
  // Alone, a reduction skips the elements its body discards
  // (MaskedReads.h); in a group, what one member loads another may use.
  bool shareLoads = members.size() > 1 || producer;
  // A member's t.lanes accumulators after another's.
  SmallVector<Value> init;
  for (const ColumnMember &m : members)
    init.append(t.lanes, arith::ConstantOp::create(b, loc, m.red->identity));
  auto loop = scf::ForOp::create(
      b, loc, first, end, one, init,
      [&](OpBuilder &rb, Location l, Value r, ValueRange accs) {
        SmallVector<Value> ivs =
            lead.loopIndices(parIdx, delinearize(rb, l, r, lead.redSizes));
        SmallVector<Value> next;
        LoadedOperands loaded;
        if (producer)
          emitProducerIteration(rb, l, *producer, ivs, loaded);
        for (auto [k, m] : llvm::enumerate(members)) {
          linalg::GenericOp op = m.red->op;
          ValueRange mine = accs.slice(k * t.lanes, t.lanes);
          if (!vectors) {
            IRMapping map;
            map.map(m.red->outArg, mine.front());
            for (OpOperand *in : op.getDpsInputOperands())
              if (Value v = lookupLoaded(loaded, op, in))
                map.map(op.getMatchingBlockArgument(in), v);
            cloneBodyAt(rb, l, op, ivs, map, /*maskReads=*/!shareLoads);
            for (OpOperand *in : op.getDpsInputOperands())
              if (BlockArgument arg = op.getMatchingBlockArgument(in);
                  map.contains(arg) && !lookupLoaded(loaded, op, in))
                loaded.push_back({in->get(), op.getMatchingIndexingMap(in),
                                  map.lookup(arg)});
            next.push_back(map.lookup(m.red->comb->getResult(0)));
            continue;
          }
          SmallVector<GivenVector> given;
          for (OpOperand *in : op.getDpsInputOperands())
            if (Value v = lookupLoaded(loaded, op, in))
              given.push_back({in, v});
          SmallVector<Value> vectorsLoaded;
          llvm::append_range(next, emitGenericVectorLanes(
                                       rb, l, *m.vectors, ivs, *m.red,
                                       SmallVector<Value>(mine), given,
                                       shareLoads ? &vectorsLoaded : nullptr));
          if (!shareLoads)
            continue;
          for (OpOperand *in : op.getDpsInputOperands())
            if (Value v = vectorsLoaded[in->getOperandNumber()];
                v && !lookupLoaded(loaded, op, in))
              loaded.push_back({in->get(), op.getMatchingIndexingMap(in), v});
        }
        scf::YieldOp::create(rb, l, next);
      });
  for (auto [k, m] : llvm::enumerate(members)) {
    for (int64_t lane = 0; lane < t.lanes; ++lane) {
      Value total = loop.getResult(k * t.lanes + lane);
      SmallVector<Value> laneIdx(parIdx);
      if (lane > 0)
        laneIdx.back() = arith::AddIOp::create(b, loc, laneIdx.back(),
                                               indexConstant(b, loc, lane));
      if (!split) {
        m.red->foldIntoOutput(b, loc, laneIdx, total);
        continue;
      }
      laneIdx.push_back(part);
      memref::StoreOp::create(b, loc, total, m.partials, laneIdx);
    }
  }
}

/// A thread per output (or per run of one output's elements, when split),
/// consecutive threads on consecutive outputs: for reductions whose inputs
/// are contiguous along the outputs rather than the reduced dimensions (a
/// bias gradient sums [tokens, features] over the tokens), where a block
/// per output would read one element per row. Each thread folds its run in
/// order, so an unsplit reduction adds in the CPU's order.
///
/// Where the inputs move 16-byte vectors along the outputs' innermost
/// loop (GenericVectors.h) and are aligned (checked in the kernel), a
/// thread takes a vector's outputs instead, one accumulator a lane: the
/// same sums in the same order, in a fraction of the load instructions.
/// The grid is sized for those tasks; the misaligned case's scalar tasks
/// take more trips of the grid-stride loop.
///
/// `reds`: one reduction, or a group of them over the same loops
/// (columnGroups, ReductionSiblings.h), which the same threads fold side by
/// side, loading what they share once: a layer norm's weight and bias
/// gradients both sum the cotangent over the rows. `producer`: the group's
/// (buildColumnGroupLaunch), computed at each element first; vectors only
/// where it moves them too.
void buildColumnReduction(OpBuilder &b, ArrayRef<Reduction *> reds,
                          const LaunchShape &shape,
                          linalg::GenericOp producer = {}) {
  Reduction &red = *reds.front();
  Location loc = red.op.getLoc();
  // Vectors when every member has a plan, at the narrowest width.
  SmallVector<GenericVectors> plans;
  if (shape.vectorize && red.numOutStatic > 0 &&
      !ShapedType::isDynamic(red.parStatic.back()))
    for (Reduction *r : reds) {
      std::optional<GenericVectors> plan =
          planGenericVectors(r->op, r->parDims.back(), r->parStatic.back(),
                             /*reduction=*/true);
      if (!plan) {
        plans.clear();
        break;
      }
      plans.push_back(*plan);
    }
  std::optional<GenericVectors> producerPlan;
  if (producer && !plans.empty()) {
    producerPlan =
        planGenericVectors(producer, red.parDims.back(), red.parStatic.back(),
                           /*reduction=*/false);
    if (!producerPlan)
      plans.clear();
  }
  int64_t lanes = plans.empty() ? 1 : plans.front().width;
  SmallVector<Value> alignedBuffers;
  for (const GenericVectors &plan : plans) {
    lanes = std::min(lanes, plan.width);
    appendBuffers(alignedBuffers, plan.buffers);
  }
  if (producerPlan) { // planned only beside the members' plans
    lanes = std::min(lanes, producerPlan->width);
    appendBuffers(alignedBuffers, producerPlan->buffers);
  }
  // Narrowing keeps a plan valid (GenericVectors.cpp).
  for (GenericVectors &plan : plans)
    plan.width = lanes;
  if (producerPlan)
    producerPlan->width = lanes;
  ColumnProducer scalarProducer{producer, nullptr};
  ColumnProducer vectorProducer{producer,
                                plans.empty() ? nullptr : &*producerPlan};
  // Split for the vector tasks' count: as many threads as scalar tasks
  // would have, where the runs stay long enough.
  int64_t split =
      columnSplit(red.numOutStatic / lanes, red.numRedStatic, shape);
  SmallVector<ColumnMember> scalarMembers, vectorMembers;
  for (auto [k, r] : llvm::enumerate(reds)) {
    Value partials = split > 1 ? r->allocPartials(b, loc, split) : Value();
    scalarMembers.push_back({r, nullptr, partials});
    vectorMembers.push_back({r, plans.empty() ? nullptr : &plans[k], partials});
  }
  Reduction::Tasks tasks = red.tasks(b, loc, split);
  ColumnTasks scalar{tasks.numOut, tasks.numRed, Value(), 1, tasks.count};
  // Runs of ceil(numRed / split) elements; the last may be short or empty.
  scalar.run =
      split > 1
          ? indexConstant(b, loc, llvm::divideCeil(red.numRedStatic, split))
          : tasks.numRed;
  ColumnTasks vector = scalar;
  if (!plans.empty()) {
    vector.lanes = lanes;
    vector.count = indexConstant(b, loc, red.numOutStatic / lanes * split);
  }
  Value blocks = clampBlocks(
      b, loc,
      arith::CeilDivUIOp::create(b, loc, vector.count,
                                 indexConstant(b, loc, shape.blockSize)),
      shape.maxBlocks);
  buildLaunch(b, loc, blocks, indexConstant(b, loc, shape.blockSize),
              [&](OpBuilder &kb, gpu::LaunchOp launch) {
                Value start, stride;
                std::tie(start, stride) = gridStrideStart(kb, loc, launch);
                auto tasksOf = [&](OpBuilder &ib, Location il,
                                   const ColumnTasks &t,
                                   ArrayRef<ColumnMember> members,
                                   const ColumnProducer &p) {
                  scf::ForOp::create(
                      ib, il, start, t.count, stride, ValueRange{},
                      [&](OpBuilder &fb, Location fl, Value task, ValueRange) {
                        emitColumnTask(fb, fl, members, p.op ? &p : nullptr, t,
                                       members.front().vectors, task);
                        scf::YieldOp::create(fb, fl);
                      });
                };
                if (plans.empty()) {
                  tasksOf(kb, loc, scalar, scalarMembers, scalarProducer);
                  return;
                }
                scf::IfOp::create(
                    kb, loc, buffersAligned(kb, loc, alignedBuffers),
                    [&](OpBuilder &ib, Location il) {
                      tasksOf(ib, il, vector, vectorMembers, vectorProducer);
                      scf::YieldOp::create(ib, il);
                    },
                    [&](OpBuilder &ib, Location il) {
                      tasksOf(ib, il, scalar, scalarMembers, scalarProducer);
                      scf::YieldOp::create(ib, il);
                    });
              });
  for (const ColumnMember &m : scalarMembers)
    if (m.partials)
      m.red->foldPartials(b, loc, m.partials, shape);
}

} // namespace

/// How far apart, in elements, the elements input `in` of `op` reads at two
/// iterations one apart along loop dimension `d` are: 0 when it does not
/// depend on `d`; nullopt when unknown (a dynamic stride, `d` inside a
/// compound index expression).
static std::optional<int64_t> strideAlong(linalg::GenericOp op, OpOperand *in,
                                          unsigned d) {
  auto type = cast<MemRefType>(in->get().getType());
  AffineMap map = op.getMatchingIndexingMap(in);
  if (!map.isFunctionOfDim(d))
    return 0;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)))
    return std::nullopt;
  int64_t stride = 0;
  for (auto [k, e] : llvm::enumerate(map.getResults())) {
    if (!e.isFunctionOfDim(d))
      continue;
    auto dim = dyn_cast<AffineDimExpr>(e);
    if (!dim || ShapedType::isDynamic(strides[k]))
      return std::nullopt;
    stride += strides[k];
  }
  return stride;
}

bool mlir::ds::gpu_kernels::coalescedAlong(linalg::GenericOp op, unsigned d) {
  return llvm::all_of(op.getDpsInputOperands(), [&](OpOperand *in) {
    if (!isa<MemRefType>(in->get().getType()))
      return true;
    std::optional<int64_t> s = strideAlong(op, in, d);
    return s && (*s == 0 || *s == 1);
  });
}

void mlir::ds::gpu_kernels::buildReductionLaunch(OpBuilder &b,
                                                 linalg::GenericOp op,
                                                 const LaunchShape &shape,
                                                 linalg::GenericOp sibling,
                                                 linalg::GenericOp columns) {
  Reduction red(b, op);
  // A full reduction gets a block reduction, whose threads visit each
  // element once: the sibling's iterations, once each.
  assert((!sibling || red.parDims.empty()) &&
         "a sibling needs a reduction over every loop");
  if (sibling) {
    red.sibling = sibling;
    red.shared = sharedInput(op, sibling);
    assert(red.shared && "not a sibling of the reduction");
    // A cast-transpose's tiles set the order the elements are visited in.
    if (isTransposingGeneric(sibling))
      return buildTransposingSiblingLaunch(b, red, shape, columns);
  }
  assert(!columns && "column reductions join cast-transposes only");
  if (getsColumnReduction(op))
    buildColumnReduction(b, {&red}, shape);
  else if (warpPerRow(red.numOutStatic, red.numRedStatic, shape))
    buildWarpReduction(b, red, shape);
  else
    buildBlockReduction(b, red, shape);
}

bool mlir::ds::gpu_kernels::isBlockRowReduction(linalg::GenericOp op,
                                                const LaunchShape &shape) {
  if (!isParallelReduction(op) || !op.hasPureBufferSemantics())
    return false;
  // Output dimensions first, then the reduced ones, all static.
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  unsigned numPar = op.getNumParallelLoops();
  if (numPar == 0 ||
      llvm::any_of(ArrayRef(iterators).take_front(numPar),
                   [](auto it) { return it != utils::IteratorType::parallel; }))
    return false;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (llvm::any_of(ranges, ShapedType::isDynamic))
    return false;
  int64_t numOut = 1, numRed = 1;
  for (auto [d, size] : llvm::enumerate(ranges))
    (d < numPar ? numOut : numRed) *= size;
  return numRed >= kMinParallelReduction &&
         blockSplit(numOut, numRed, shape) == 1 &&
         coalescedAlong(op, op.getNumLoops() - 1);
}

// A block per output reads along the reduced dimensions, a thread per
// output along the outputs: the one whose loads coalesce, the block when
// both or neither do.
bool mlir::ds::gpu_kernels::getsColumnReduction(linalg::GenericOp op) {
  if (!isParallelReduction(op))
    return false;
  std::optional<unsigned> lastPar, lastRed;
  for (auto [d, it] : llvm::enumerate(op.getIteratorTypesArray()))
    (it == utils::IteratorType::reduction ? lastRed : lastPar) = d;
  return lastPar && lastRed && !coalescedAlong(op, *lastRed) &&
         coalescedAlong(op, *lastPar);
}

void mlir::ds::gpu_kernels::buildColumnGroupLaunch(
    OpBuilder &b, ArrayRef<linalg::GenericOp> ops, const LaunchShape &shape,
    linalg::GenericOp producer) {
  // Stable addresses: the members point into it.
  std::vector<Reduction> reds;
  reds.reserve(ops.size());
  for (linalg::GenericOp op : ops)
    reds.emplace_back(b, op);
  SmallVector<Reduction *> members;
  for (Reduction &red : reds)
    members.push_back(&red);
  buildColumnReduction(b, members, shape, producer);
}

void mlir::ds::gpu_kernels::foldColumnPartials(OpBuilder &b, Location loc,
                                               ArrayRef<Reduction *> cols,
                                               ArrayRef<Value> partials,
                                               int64_t rows,
                                               const LaunchShape &shape) {
  assert(!cols.empty() && cols.size() == partials.size());
  assert(llvm::all_of(cols,
                      [&](Reduction *c) {
                        return c->parStatic == cols.front()->parStatic;
                      }) &&
         "the same outputs for all");
  // The innermost output dimension is the columns; the others (a bias
  // gradient's heads, read from [B, H, T, D]) each have their bands.
  ArrayRef<int64_t> outputs = cols.front()->parStatic;
  int64_t columns = outputs.back();
  SmallVector<int64_t> leading(outputs.drop_back());
  int64_t numLeading = 1;
  for (int64_t s : leading)
    numLeading *= s;
  int64_t warps = shape.blockSize / kTransposeTile;
  MLIRContext *ctx = b.getContext();
  auto workgroup = gpu::AddressSpaceAttr::get(
      ctx, gpu::GPUDialect::getWorkgroupAddressSpace());
  // One buffer of warp sums per element type.
  auto sumTypeOf = [&](Reduction *c) -> Type {
    return MemRefType::get({warps, kTransposeTile}, c->identity.getType(),
                           AffineMap(), workgroup);
  };
  SmallVector<Type> sumTypes;
  for (Reduction *c : cols)
    if (!llvm::is_contained(sumTypes, sumTypeOf(c)))
      sumTypes.push_back(sumTypeOf(c));
  int64_t columnBands = llvm::divideCeil(columns, kTransposeTile);
  Value bands = indexConstant(b, loc, numLeading * columnBands);
  Value one = indexConstant(b, loc, 1);
  auto launch = gpu::LaunchOp::create(
      b, loc, clampBlocks(b, loc, bands, shape.maxBlocks), one, one,
      indexConstant(b, loc, shape.blockSize), one, one,
      /*dynamicSharedMemorySize=*/Value(), /*asyncTokenType=*/Type(),
      /*asyncDependencies=*/ValueRange{}, sumTypes);
  ValueRange sumBuffers = launch.getWorkgroupAttributions();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&launch.getBody().front());
  TileThread thread = tileThread(b, loc, launch, shape.blockSize);
  Value rowsV = indexConstant(b, loc, rows);
  Value lastCol = indexConstant(b, loc, columns - 1);
  Value columnsV = indexConstant(b, loc, columns);
  // Bands are uniform across the block, as its barriers require.
  scf::ForOp::create(
      b, loc, launch.getBlockIds().x, bands, launch.getGridSize().x,
      ValueRange{}, [&](OpBuilder &ob, Location l, Value band, ValueRange) {
        SmallVector<Value> at;
        if (!leading.empty()) {
          SmallVector<Value> leadingV;
          for (int64_t s : leading)
            leadingV.push_back(indexConstant(ob, l, s));
          Value columnBandsV = indexConstant(ob, l, columnBands);
          at = delinearize(ob, l,
                           arith::DivUIOp::create(ob, l, band, columnBandsV),
                           leadingV);
          band = arith::RemUIOp::create(ob, l, band, columnBandsV);
        }
        Value col = arith::AddIOp::create(
            ob, l, arith::MulIOp::create(ob, l, band, thread.side), thread.tx);
        // Past the last column: a valid one, whose sum is dropped.
        Value readCol = arith::MinUIOp::create(ob, l, col, lastCol);
        Value first = arith::CmpIOp::create(ob, l, arith::CmpIPredicate::eq,
                                            thread.ty, indexConstant(ob, l, 0));
        Value ok = arith::AndIOp::create(
            ob, l, first,
            arith::CmpIOp::create(ob, l, arith::CmpIPredicate::ult, col,
                                  columnsV));
        for (auto [c, part] : llvm::zip(cols, partials)) {
          Reduction &red = *c;
          Value sums =
              sumBuffers[llvm::find(sumTypes, sumTypeOf(c)) - sumTypes.begin()];
          Value p = part;
          Value mine =
              scf::ForOp::create(
                  ob, l, thread.ty, rowsV, thread.passStride,
                  ValueRange{arith::ConstantOp::create(ob, l, red.identity)},
                  [&](OpBuilder &rb, Location rl, Value row, ValueRange acc) {
                    SmallVector<Value> rowAt{row};
                    rowAt.append(at);
                    rowAt.push_back(readCol);
                    Value v = memref::LoadOp::create(rb, rl, p, rowAt);
                    scf::YieldOp::create(rb, rl,
                                         red.combine(rb, acc.front(), v));
                  })
                  .getResult(0);
          memref::StoreOp::create(ob, l, mine, sums,
                                  ValueRange{thread.ty, thread.tx});
          gpu::BarrierOp::create(ob, l);
          RowTeam::emitIf(ob, l, ok, [&](OpBuilder &ib, Location il) {
            SmallVector<Value> outAt(at);
            outAt.push_back(col);
            red.foldIntoOutput(ib, il, outAt,
                               red.foldColumn(ib, il, sums, warps, thread.tx));
          });
          // The next reduction or band overwrites the sums.
          gpu::BarrierOp::create(ob, l);
        }
        scf::YieldOp::create(ob, l);
      });
  gpu::TerminatorOp::create(b, loc);
  b.setInsertionPointAfter(launch);
  for (Value p : partials)
    memref::DeallocOp::create(b, loc, p);
}
