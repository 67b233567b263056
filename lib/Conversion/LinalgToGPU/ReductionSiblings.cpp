//===- ReductionSiblings.cpp - A reduction and an op reading its input ----===//
//
// See ReductionSiblings.h.
//
//===----------------------------------------------------------------------===//

#include "ReductionSiblings.h"
#include "BufferAccess.h"
#include "KernelUtils.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <optional>

using namespace mlir;
using namespace mlir::ds::gpu_kernels;

namespace {

/// Ops past a reduction searched for its sibling: the FP8 cast follows its
/// amax within a few dozen (the scale's history update between them).
constexpr int kSearchWindow = 256;

/// Reductions of fewer elements are not paired: their tensors (an amax
/// history, a scale) are a few KiB, in cache for the second read, and
/// moving them would only break up the chains of one-block launches that
/// ds-merge-gpu-launches joins.
constexpr int64_t kMinSiblingElements = 1 << 16;

bool allIterators(linalg::GenericOp op, utils::IteratorType type) {
  return llvm::all_of(op.getIteratorTypesArray(),
                      [&](utils::IteratorType it) { return it == type; });
}

/// The iterations of `op`, when its loops are static (else -1).
int64_t staticIterations(linalg::GenericOp op) {
  int64_t n = 1;
  for (int64_t r : op.getStaticLoopRanges()) {
    if (ShapedType::isDynamic(r))
      return -1;
    n *= r;
  }
  return n;
}

/// A reduction over every loop of at least kMinSiblingElements elements,
/// which gets a parallel kernel of its own.
bool isLargeFullReduction(linalg::GenericOp op) {
  return isParallelReduction(op) &&
         allIterators(op, utils::IteratorType::reduction) &&
         staticIterations(op) >=
             std::max(kMinParallelReduction, kMinSiblingElements);
}

/// The buffer `v` reshapes (through expand_shape and collapse_shape only),
/// when every view on the way has an identity layout: then `v` lists the
/// buffer's elements in its own row-major order.
Value reshapedBuffer(Value v) {
  while (true) {
    auto type = dyn_cast<MemRefType>(v.getType());
    if (!type || !type.hasStaticShape() || !type.getLayout().isIdentity())
      return {};
    if (auto expand = v.getDefiningOp<memref::ExpandShapeOp>())
      v = expand.getSrc();
    else if (auto collapse = v.getDefiningOp<memref::CollapseShapeOp>())
      v = collapse.getSrc();
    else
      return v;
  }
}

/// Whether `a` and `b` hold the same elements in the same row-major order.
bool sameElementsInOrder(Value a, Value b) {
  Value root = reshapedBuffer(a);
  return root && root == reshapedBuffer(b) &&
         cast<MemRefType>(a.getType()).getNumElements() ==
             cast<MemRefType>(b.getType()).getNumElements();
}

/// Whether an op nested in `op` (or `op`) uses a result of an op in `defs`.
bool usesResultOf(Operation *op,
                  const llvm::SmallPtrSetImpl<Operation *> &defs) {
  WalkResult r = op->walk([&](Operation *inner) {
    for (Value v : inner->getOperands())
      if (Operation *def = v.getDefiningOp(); def && defs.contains(def))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return r.wasInterrupted();
}

/// The units scheduled so far, each a run of adjacent ops that moves as
/// one: its first op -> its last.
using Units = llvm::DenseMap<Operation *, Operation *>;

/// Tries to bring `mover` next to the unit from `first` to `last` (later in
/// its block): see scheduleReductionSiblings.
bool schedule(Operation *mover, Operation *first, Operation *last,
              const Units &units, bool distinctArguments) {
  // The ops between that depend on the mover, transitively.
  llvm::SmallPtrSet<Operation *, 16> dependents = {mover};
  SmallVector<AccessSet> dependentAccesses;
  dependentAccesses.emplace_back(mover);
  SmallVector<Operation *> moved;
  auto dependsOnMoved = [&](Operation *op) {
    if (usesResultOf(op, dependents))
      return true;
    AccessSet accesses(op);
    return accesses.touchesMemory() &&
           conflictsWithAny(accesses, dependentAccesses, distinctArguments);
  };
  for (Operation *op = mover->getNextNode(); op != first;) {
    SmallVector<Operation *, 3> unit = {op};
    if (Operation *unitLast = units.lookup(op))
      for (Operation *member = op; member != unitLast;) {
        member = member->getNextNode();
        unit.push_back(member);
      }
    op = unit.back()->getNextNode();
    if (!llvm::any_of(unit, dependsOnMoved))
      continue;
    for (Operation *member : unit) {
      dependents.insert(member);
      dependentAccesses.emplace_back(member);
      moved.push_back(member);
    }
  }
  for (Operation *op = first;; op = op->getNextNode()) {
    if (dependsOnMoved(op))
      return false;
    if (op == last)
      break;
  }
  mover->moveBefore(first);
  Operation *after = last;
  for (Operation *op : moved) {
    op->moveAfter(after);
    after = op;
  }
  return true;
}

/// The first generic within kSearchWindow ops after `op` that `fits`, or
/// null.
linalg::GenericOp firstWithin(Operation *op,
                              function_ref<bool(linalg::GenericOp)> fits) {
  op = op->getNextNode();
  for (int seen = 0; op && seen < kSearchWindow; op = op->getNextNode(), ++seen)
    if (auto generic = dyn_cast<linalg::GenericOp>(op);
        generic && fits(generic))
      return generic;
  return {};
}

/// A reduction that keeps the innermost loop and reduces some other (a
/// column's sum; per index of the other kept loops, as a bias gradient
/// over [B, T, H, D] read from [B, H, T, D] keeps H), of at least
/// kMinSiblingElements elements.
bool isLargeColumnReduction(linalg::GenericOp op) {
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  if (!isParallelReduction(op) || iterators.size() < 2 ||
      iterators.back() != utils::IteratorType::parallel ||
      llvm::none_of(ArrayRef(iterators).drop_back(), [](auto it) {
        return it == utils::IteratorType::reduction;
      }))
    return false;
  return staticIterations(op) >= kMinSiblingElements;
}

} // namespace

std::optional<SharedInput>
mlir::ds::gpu_kernels::sharedInput(linalg::GenericOp reduction,
                                   linalg::GenericOp elementwise) {
  bool sameRanges =
      elementwise.getStaticLoopRanges() == reduction.getStaticLoopRanges();
  for (OpOperand *in : reduction.getDpsInputOperands()) {
    if (!isa<MemRefType>(in->get().getType()))
      continue;
    AffineMap map = reduction.getMatchingIndexingMap(in);
    for (OpOperand *other : elementwise.getDpsInputOperands()) {
      if (!isa<MemRefType>(other->get().getType()))
        continue;
      AffineMap otherMap = elementwise.getMatchingIndexingMap(other);
      if (sameRanges && other->get() == in->get() && otherMap == map &&
          map.isPermutation())
        return SharedInput{in, other, /*sameLoops=*/true};
      if (map.isIdentity() && otherMap.isIdentity() &&
          sameElementsInOrder(in->get(), other->get()))
        return SharedInput{in, other, /*sameLoops=*/false};
    }
  }
  return std::nullopt;
}

bool mlir::ds::gpu_kernels::canShareReductionKernel(
    linalg::GenericOp reduction, linalg::GenericOp elementwise) {
  if (!elementwise.hasPureBufferSemantics() ||
      !allIterators(elementwise, utils::IteratorType::parallel) ||
      llvm::any_of(elementwise.getStaticLoopRanges(), ShapedType::isDynamic))
    return false;
  for (Operation &inner : elementwise.getBody()->without_terminator())
    if (inner.getNumRegions() != 0)
      return false;
  for (OpOperand &init : elementwise.getDpsInitsMutable())
    if (!elementwise.getMatchingIndexingMap(&init).isPermutation())
      return false;
  return sharedInput(reduction, elementwise).has_value();
}

bool mlir::ds::gpu_kernels::canShareColumnTiles(linalg::GenericOp columns,
                                                linalg::GenericOp elementwise) {
  // The tiles' rows are reduced: a tile's column sum then belongs to one
  // output.
  std::optional<unsigned> rowLoop = transposedRowLoop(elementwise);
  if (!isLargeColumnReduction(columns) || !rowLoop ||
      elementwise.getStaticLoopRanges() != columns.getStaticLoopRanges() ||
      columns.getIteratorTypesArray()[*rowLoop] !=
          utils::IteratorType::reduction)
    return false;
  for (Operation &inner : elementwise.getBody()->without_terminator())
    if (inner.getNumRegions() != 0)
      return false;
  std::optional<SharedInput> shared = sharedInput(columns, elementwise);
  return shared && shared->sameLoops;
}

SmallVector<ReductionSibling>
mlir::ds::gpu_kernels::scheduleReductionSiblings(func::FuncOp f,
                                                 bool distinctArguments) {
  SmallVector<linalg::GenericOp> reductions;
  for (Operation &op : f.getBody().front())
    if (auto generic = dyn_cast<linalg::GenericOp>(op);
        generic && isLargeFullReduction(generic))
      reductions.push_back(generic);
  SmallVector<ReductionSibling> pairs;
  llvm::DenseMap<Operation *, size_t> pairOf; // elementwise -> its pair
  Units units;
  for (linalg::GenericOp reduction : reductions) {
    linalg::GenericOp elementwise =
        firstWithin(reduction, [&](linalg::GenericOp generic) {
          return !pairOf.contains(generic) &&
                 canShareReductionKernel(reduction, generic);
        });
    if (!elementwise || !schedule(reduction, elementwise, elementwise, units,
                                  distinctArguments))
      continue;
    pairOf[elementwise] = pairs.size();
    units[reduction] = elementwise;
    pairs.push_back({reduction, elementwise, {}});
  }
  // Column reductions join the cast-transposes after them, with their
  // full reductions if they have one.
  SmallVector<linalg::GenericOp> columnReductions;
  for (Operation &op : f.getBody().front())
    if (auto generic = dyn_cast<linalg::GenericOp>(op);
        generic && isLargeColumnReduction(generic))
      columnReductions.push_back(generic);
  llvm::SmallPtrSet<Operation *, 16> withColumns;
  for (linalg::GenericOp columns : columnReductions) {
    linalg::GenericOp elementwise =
        firstWithin(columns, [&](linalg::GenericOp generic) {
          return !withColumns.contains(generic) &&
                 canShareColumnTiles(columns, generic);
        });
    if (!elementwise)
      continue;
    auto it = pairOf.find(elementwise);
    Operation *first = it == pairOf.end()
                           ? elementwise.getOperation()
                           : pairs[it->second].reduction.getOperation();
    if (!schedule(columns, first, elementwise, units, distinctArguments))
      continue;
    withColumns.insert(elementwise);
    units.erase(first);
    units[columns] = elementwise;
    if (it == pairOf.end()) {
      pairOf[elementwise] = pairs.size();
      pairs.push_back({{}, elementwise, columns});
    } else {
      pairs[it->second].columns = columns;
    }
  }
  assert(llvm::all_of(pairs,
                      [](const ReductionSibling &p) {
                        Operation *next = p.elementwise;
                        for (linalg::GenericOp op : {p.reduction, p.columns})
                          if (op) {
                            if (op->getNextNode() != next)
                              return false;
                            next = op;
                          }
                        return true;
                      }) &&
         "a unit moves as one");
  return pairs;
}

/// Whether `a` and `b` read one buffer through one map.
static bool shareAnInput(linalg::GenericOp a, linalg::GenericOp b) {
  for (OpOperand *x : a.getDpsInputOperands())
    for (OpOperand *y : b.getDpsInputOperands())
      if (isa<MemRefType>(x->get().getType()) && x->get() == y->get() &&
          a.getMatchingIndexingMap(x) == b.getMatchingIndexingMap(y))
        return true;
  return false;
}

/// Ops that may lie between two members of a column group: they touch no
/// memory.
static bool isSeparable(Operation &op) {
  return isa<memref::AllocOp>(op) || (op.getNumRegions() == 0 && isPure(&op));
}

/// The generic before `members`' first (past separable ops) that can run
/// in their launch as its producer (ColumnGroup), or null.
static linalg::GenericOp
columnProducer(ArrayRef<linalg::GenericOp> members,
               const llvm::DenseSet<Operation *> &taken,
               bool distinctArguments) {
  Operation *prev = members.front()->getPrevNode();
  while (prev && isSeparable(*prev))
    prev = prev->getPrevNode();
  auto producer = dyn_cast_or_null<linalg::GenericOp>(prev);
  if (!producer || taken.contains(producer) ||
      !producer.hasPureBufferSemantics() ||
      !allIterators(producer, utils::IteratorType::parallel) ||
      producer.getStaticLoopRanges() !=
          linalg::GenericOp(members.front()).getStaticLoopRanges() ||
      isTransposingGeneric(producer))
    return {};
  for (Operation &op : producer.getBody()->without_terminator())
    if (op.getNumRegions() != 0)
      return {};
  for (OpOperand &init : producer.getDpsInitsMutable())
    if (!producer.getMatchingIndexingMap(&init).isPermutation())
      return {};
  AccessSet produced(producer);
  bool forwards = false;
  for (linalg::GenericOp member : members) {
    AccessSet access(member);
    for (OpOperand *in : member.getDpsInputOperands()) {
      OpOperand *written = nullptr;
      for (OpOperand &init : producer.getDpsInitsMutable())
        if (init.get() == in->get())
          written = &init;
      if (!written)
        continue;
      if (producer.getMatchingIndexingMap(written) !=
          member.getMatchingIndexingMap(in))
        return {};
      // The member takes this value from the producer's iteration at the
      // same element, not from memory.
      forwards = true;
      llvm::erase_if(access.reads,
                     [&](const Access &a) { return a.view == in->get(); });
    }
    if (conflict(produced, access, distinctArguments))
      return {};
  }
  return forwards ? producer : linalg::GenericOp();
}

SmallVector<ColumnGroup>
mlir::ds::gpu_kernels::columnGroups(func::FuncOp f,
                                    const llvm::DenseSet<Operation *> &taken,
                                    bool distinctArguments) {
  auto candidate = [&](Operation &op) -> linalg::GenericOp {
    auto generic = dyn_cast<linalg::GenericOp>(op);
    if (!generic || taken.contains(generic) ||
        !generic.hasPureBufferSemantics() || !getsColumnReduction(generic) ||
        llvm::any_of(generic.getStaticLoopRanges(), ShapedType::isDynamic))
      return {};
    // As convertLinalgOps: fewer elements per output loop in a thread.
    int64_t reduced = 1;
    for (auto [size, it] : llvm::zip(generic.getStaticLoopRanges(),
                                     generic.getIteratorTypesArray()))
      if (it == utils::IteratorType::reduction)
        reduced *= size;
    return reduced >= kMinParallelReduction ? generic : linalg::GenericOp();
  };
  SmallVector<ColumnGroup> groups;
  Block &body = f.getBody().front();
  for (auto it = body.begin(); it != body.end(); ++it) {
    linalg::GenericOp first = candidate(*it);
    if (!first)
      continue;
    ColumnGroup group;
    group.members = {first};
    SmallVector<AccessSet> accesses;
    accesses.emplace_back(first);
    auto next = std::next(it);
    for (; next != body.end(); ++next) {
      if (isSeparable(*next))
        continue;
      linalg::GenericOp member = candidate(*next);
      if (!member ||
          member.getStaticLoopRanges() != first.getStaticLoopRanges() ||
          member.getIteratorTypesArray() != first.getIteratorTypesArray() ||
          llvm::none_of(
              group.members,
              [&](linalg::GenericOp m) { return shareAnInput(m, member); }) ||
          conflictsWithAny(AccessSet(member), accesses, distinctArguments))
        break;
      group.members.push_back(member);
      accesses.emplace_back(member);
    }
    group.producer = columnProducer(group.members, taken, distinctArguments);
    if (group.members.size() < 2 && !group.producer)
      continue;
    it = group.members.back()->getIterator();
    groups.push_back(std::move(group));
  }
  return groups;
}

/// `member` with its input `operand` (the output of `producer`, read
/// through the identity over the same loops) replaced by `producer`'s
/// inputs, and `producer`'s body computed first for its value. Built
/// before `member`, which is left in place.
static linalg::GenericOp inlineProducer(linalg::GenericOp member,
                                        OpOperand *operand,
                                        linalg::GenericOp producer) {
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  for (OpOperand *in : member.getDpsInputOperands())
    if (in != operand) {
      inputs.push_back(in->get());
      maps.push_back(member.getMatchingIndexingMap(in));
    }
  size_t producerInputs = inputs.size();
  for (OpOperand *in : producer.getDpsInputOperands()) {
    inputs.push_back(in->get());
    maps.push_back(producer.getMatchingIndexingMap(in));
  }
  SmallVector<Value> outputs;
  for (OpOperand &init : member.getDpsInitsMutable()) {
    outputs.push_back(init.get());
    maps.push_back(member.getMatchingIndexingMap(&init));
  }
  OpBuilder b(member);
  auto fused = linalg::GenericOp::create(
      b, member.getLoc(), TypeRange{}, inputs, outputs, maps,
      member.getIteratorTypesArray(),
      [&](OpBuilder &nb, Location loc, ValueRange args) {
        IRMapping map;
        for (auto [k, in] : llvm::enumerate(producer.getDpsInputOperands()))
          map.map(producer.getMatchingBlockArgument(in),
                  args[producerInputs + k]);
        for (Operation &op : producer.getBody()->without_terminator())
          nb.clone(op, map);
        auto produced =
            cast<linalg::YieldOp>(producer.getBody()->getTerminator());
        size_t next = 0;
        for (OpOperand *in : member.getDpsInputOperands())
          map.map(member.getMatchingBlockArgument(in),
                  in == operand ? map.lookupOrDefault(produced.getOperand(0))
                                : args[next++]);
        for (auto [k, init] : llvm::enumerate(member.getDpsInitsMutable()))
          map.map(member.getMatchingBlockArgument(&init),
                  args[inputs.size() + k]);
        for (Operation &op : member.getBody()->without_terminator())
          nb.clone(op, map);
        SmallVector<Value> yielded;
        for (Value v : member.getBody()->getTerminator()->getOperands())
          yielded.push_back(map.lookupOrDefault(v));
        linalg::YieldOp::create(nb, loc, yielded);
      });
  fused->setDiscardableAttrs(member->getDiscardableAttrDictionary());
  return fused;
}

/// Whether `op` writes a new value over all of `buffer` (its one output):
/// all-parallel over the buffer's static shape, through the identity, and
/// reading nothing of what the buffer held.
static bool overwritesWhole(linalg::GenericOp op, Value buffer) {
  OpOperand *init =
      op.getNumDpsInits() == 1 ? op.getDpsInitOperand(0) : nullptr;
  return init && init->get() == buffer && op.hasPureBufferSemantics() &&
         op.getNumParallelLoops() == op.getNumLoops() &&
         op.getMatchingIndexingMap(init).isIdentity() &&
         !op.payloadUsesValueFromOperand(init) &&
         op.getStaticLoopRanges() ==
             cast<MemRefType>(buffer.getType()).getShape() &&
         llvm::none_of(op.getDpsInputs(),
                       [&](Value in) { return viewRoot(in) == buffer; });
}

/// The producer inlineSharedProducers may move into `unit`'s members, and
/// the temporary it writes; none when the conditions fail.
static std::pair<linalg::GenericOp, Value>
sharedProducer(const ReductionSibling &unit, bool distinctArguments) {
  linalg::GenericOp e = unit.elementwise;
  linalg::GenericOp first = unit.columns ? unit.columns : unit.reduction;
  std::optional<SharedInput> shared =
      first ? sharedInput(unit.reduction ? unit.reduction : unit.columns, e)
            : std::nullopt;
  if (!shared || !shared->sameLoops)
    return {};
  Value buffer = shared->elementwise->get();
  auto alloc = buffer.getDefiningOp<memref::AllocOp>();
  if (!alloc || alloc->getBlock() != e->getBlock())
    return {};
  SmallVector<linalg::GenericOp> members = {e};
  for (linalg::GenericOp op : {unit.reduction, unit.columns})
    if (op)
      members.push_back(op);
  // The writer: the last generic before the unit that writes the buffer,
  // all-parallel over its whole shape, so that it overwrites what the
  // buffer held before (bufferization reuses one allocation for values
  // that are not live at once).
  linalg::GenericOp producer;
  Operation *unitStart = first ? first.getOperation() : e.getOperation();
  for (Operation *user : buffer.getUsers())
    if (auto generic = dyn_cast<linalg::GenericOp>(user);
        generic && generic->getBlock() == e->getBlock() &&
        generic->isBeforeInBlock(unitStart) && generic.getNumDpsInits() == 1 &&
        generic.getDpsInitOperand(0)->get() == buffer &&
        (!producer || producer->isBeforeInBlock(generic)))
      producer = generic;
  if (!producer || !overwritesWhole(producer, buffer) ||
      producer.getStaticLoopRanges() != e.getStaticLoopRanges())
    return {};
  // What reads the value it writes: the members alone (each once, through
  // the identity over its loops), until a deallocation or the next value
  // written over all of the buffer. Uses before it saw an earlier value.
  // Whatever is derived from the buffer (views, casts, its address)
  // counts as touching it where it is used.
  Block *block = e->getBlock();
  llvm::SmallPtrSet<Operation *, 4> readers;
  llvm::SetVector<Operation *> touching; // in the block
  SmallVector<Value> derived = {buffer};
  llvm::SmallPtrSet<Operation *, 8> seen;
  while (!derived.empty()) {
    Value v = derived.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *at = block->findAncestorOpInBlock(*use.getOwner());
      if (!at)
        return {};
      touching.insert(at);
      if (seen.insert(use.getOwner()).second)
        llvm::append_range(derived, use.getOwner()->getResults());
      if (at == producer || at->isBeforeInBlock(producer))
        continue;
      if (!e->isBeforeInBlock(at)) {
        // Up to the unit's end: the members' reads, of the buffer itself.
        auto generic = dyn_cast<linalg::GenericOp>(use.getOwner());
        if (!generic || v != buffer || !llvm::is_contained(members, generic) ||
            generic.isDpsInit(&use) ||
            !generic.getMatchingIndexingMap(&use).isIdentity() ||
            !readers.insert(generic).second) // one read per member
          return {};
      }
    }
  }
  // After the unit, the first op that touches it must free or overwrite it.
  Operation *next = nullptr;
  for (Operation *op : touching)
    if (e->isBeforeInBlock(op) && (!next || op->isBeforeInBlock(next)))
      next = op;
  if (next && !isa<memref::DeallocOp>(next)) {
    auto overwrite = dyn_cast<linalg::GenericOp>(next);
    if (!overwrite || !overwritesWhole(overwrite, buffer))
      return {};
  }
  for (Operation &op : producer.getBody()->without_terminator())
    if (op.getNumRegions() != 0)
      return {};
  // Its inputs unchanged until the unit, which writes none of them.
  SmallVector<AccessSet> producerAccesses;
  producerAccesses.emplace_back(producer);
  for (Operation *op = producer->getNextNode(); op != (first ? first : e);
       op = op->getNextNode()) {
    AccessSet accesses(op);
    if (accesses.touchesMemory() &&
        conflictsWithAny(accesses, producerAccesses, distinctArguments))
      return {};
  }
  for (linalg::GenericOp member : members)
    for (OpOperand &init : member.getDpsInitsMutable())
      for (OpOperand *in : producer.getDpsInputOperands())
        if (viewRoot(init.get()) == viewRoot(in->get()))
          return {};
  return {producer, buffer};
}

void mlir::ds::gpu_kernels::inlineSharedProducers(
    MutableArrayRef<ReductionSibling> units, bool distinctArguments) {
  for (ReductionSibling &unit : units) {
    auto [producer, buffer] = sharedProducer(unit, distinctArguments);

    if (!producer)
      continue;
    for (linalg::GenericOp *member :
         {&unit.columns, &unit.reduction, &unit.elementwise}) {
      if (!*member)
        continue;
      for (OpOperand *in : member->getDpsInputOperands())
        if (in->get() == buffer) {
          linalg::GenericOp fused = inlineProducer(*member, in, producer);
          (*member)->erase();
          *member = fused;
          break;
        }
    }
    producer->erase();
    // The buffer goes if nothing but its deallocations uses it any more.
    if (llvm::all_of(buffer.getUsers(), [](Operation *user) {
          return isa<memref::DeallocOp>(user);
        })) {
      for (Operation *user : llvm::make_early_inc_range(buffer.getUsers()))
        user->erase();
      buffer.getDefiningOp()->erase();
    }
  }
}
