//===- RowGroupKernels.cpp - A row group's ops in one launch --------------===//
//
// Implements buildRowGroupLaunch (GPUKernelBuilders.h): the members of a row
// group (RowGroups.h) run in turn on each row, by a block or a warp, with
// barriers between them; a warp keeps the row elements several members read
// in registers.
//
//===----------------------------------------------------------------------===//

#include "GenericVectors.h"
#include "MaskedReads.h"
#include "ReductionKernels.h"
#include "RowGroups.h"
#include "UnreadRowTails.h"
#include "VectorKernels.h"

#include "ds/Dialect/DS/IR/DSDialect.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/MapVector.h"

#include <algorithm>
#include <optional>

using namespace mlir;
using namespace mlir::ds::gpu_kernels;

namespace {

/// Stores, at loop indices `ivs`, what the all-parallel `op`'s body yields
/// there: its inputs (and the outputs it reads) loaded where their maps say.
void emitParallelIteration(OpBuilder &b, Location loc, linalg::GenericOp op,
                           ArrayRef<Value> ivs, IRMapping map = {}) {
  cloneBodyAt(b, loc, op, ivs, map, /*maskReads=*/true);
  storeYieldedAt(b, loc, op, ivs, map);
}

/// The rank of a row-group member's iteration space.
unsigned memberRank(Operation *op) {
  if (auto fill = dyn_cast<linalg::FillOp>(op))
    return cast<MemRefType>(fill.getOutputs()[0].getType()).getRank();
  if (auto copy = dyn_cast<memref::CopyOp>(op))
    return cast<MemRefType>(copy.getTarget().getType()).getRank();
  return cast<linalg::GenericOp>(op).getNumLoops();
}

/// What a row-group member reads at each element of its loops: (buffer,
/// indexing map) pairs, a reduction's accumulator aside.
SmallVector<std::pair<Value, AffineMap>> memberReads(Operation *op) {
  SmallVector<std::pair<Value, AffineMap>> reads;
  if (auto copy = dyn_cast<memref::CopyOp>(op)) {
    unsigned rank = cast<MemRefType>(copy.getSource().getType()).getRank();
    reads.push_back({copy.getSource(), AffineMap::getMultiDimIdentityMap(
                                           rank, op->getContext())});
  } else if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
    for (OpOperand *in : generic.getDpsInputOperands())
      if (isa<MemRefType>(in->get().getType()) &&
          !generic.getMatchingBlockArgument(in).use_empty())
        reads.push_back({in->get(), generic.getMatchingIndexingMap(in)});
  }
  return reads;
}

/// The buffers a row-group member writes.
SmallVector<Value> memberWrites(Operation *op) {
  if (auto copy = dyn_cast<memref::CopyOp>(op))
    return {copy.getTarget()};
  if (auto fill = dyn_cast<linalg::FillOp>(op))
    return {fill.getOutputs()[0]};
  return llvm::to_vector(cast<linalg::GenericOp>(op).getDpsInits());
}

/// A value of `buffer` read through `map` that the caller already has (null:
/// none; load it).
using CachedRead = function_ref<Value(Value buffer, AffineMap map)>;

/// One member of a row group at loop indices `ivs` (a fill or a copy, whose
/// loops are its buffer's dimensions, or an all-parallel generic), taking
/// what `cached` has instead of loading it.
void emitMemberIteration(OpBuilder &b, Location loc, Operation *op,
                         ArrayRef<Value> ivs, CachedRead cached = nullptr) {
  if (auto fill = dyn_cast<linalg::FillOp>(op)) {
    memref::StoreOp::create(b, loc, fill.getInputs()[0], fill.getOutputs()[0],
                            ivs);
    return;
  }
  if (auto copy = dyn_cast<memref::CopyOp>(op)) {
    Value v =
        cached ? cached(copy.getSource(), memberReads(op)[0].second) : Value();
    if (!v)
      v = memref::LoadOp::create(b, loc, copy.getSource(), ivs);
    memref::StoreOp::create(b, loc, v, copy.getTarget(), ivs);
    return;
  }
  auto generic = cast<linalg::GenericOp>(op);
  IRMapping map;
  if (cached)
    for (OpOperand *in : generic.getDpsInputOperands())
      if (Value v = cached(in->get(), generic.getMatchingIndexingMap(in)))
        map.map(generic.getMatchingBlockArgument(in), v);
  emitParallelIteration(b, loc, generic, ivs, map);
}

/// How member `op` over a row's elements (`rank` loops, the last
/// `reduced.size()` of them over the row) moves vectors along the row, if
/// it can: a generic's iteration along its innermost loop, a reduction's
/// along its innermost reduced one (GenericVectors.h).
std::optional<GenericVectors> planMemberVectors(Operation *op, unsigned rank,
                                                ArrayRef<int64_t> reduced) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic)
    return std::nullopt;
  bool reduction = generic.getNumReductionLoops() > 0;
  unsigned innermost = rank - 1;
  // A row reduction moves along its last reduced loop; a column member,
  // whose last loop is its output's, along that one, a column a lane.
  if (reduction &&
      generic.getIteratorTypesArray().back() != utils::IteratorType::parallel) {
    SmallVector<unsigned> redDims;
    generic.getReductionDims(redDims);
    innermost = redDims.back();
  }
  return planGenericVectors(generic, innermost, reduced.back(), reduction);
}

/// Where an all-parallel member may stop along its row: every output of
/// `op` has row tails nothing reads (UnreadRowTails.h), of one block, and
/// is indexed by a row loop and then the row's one element loop.
struct MemberRowTails {
  int64_t block;
  unsigned rowLoop;
};
std::optional<MemberRowTails> memberRowTails(Operation *op, unsigned rank,
                                             ArrayRef<int64_t> reduced) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic || reduced.size() != 1 || generic.getNumLoops() != rank ||
      generic.getNumReductionLoops() != 0)
    return std::nullopt;
  std::optional<MemberRowTails> tails;
  for (OpOperand &init : generic.getDpsInitsMutable()) {
    std::optional<int64_t> block = unreadRowTailsBlock(generic, init);
    AffineMap map = generic.getMatchingIndexingMap(&init);
    unsigned n = map.getNumResults();
    if (n < 2)
      return std::nullopt;
    auto row = dyn_cast<AffineDimExpr>(map.getResult(n - 2));
    auto col = dyn_cast<AffineDimExpr>(map.getResult(n - 1));
    if (!block || !row || !col || col.getPosition() != rank - 1 ||
        row.getPosition() >= rank - 1 ||
        (tails &&
         (tails->block != *block || tails->rowLoop != row.getPosition())))
      return std::nullopt;
    tails = MemberRowTails{*block, row.getPosition()};
  }
  return tails;
}

/// Puts the fraction of their buffers that the stores into `outputs` among
/// the ops a builder inserted after `prev` (null: from the block's start)
/// write, for the launch report (DSDialect::kWriteFractionAttrName).
void markWriteFraction(OpBuilder &b, Operation *prev, ValueRange outputs,
                       double fraction) {
  Block *block = b.getInsertionBlock();
  Block::iterator it = prev ? std::next(prev->getIterator()) : block->begin();
  Attribute attr = b.getF64FloatAttr(fraction);
  for (; it != b.getInsertionPoint(); ++it)
    it->walk([&](MemoryEffectOpInterface op) {
      SmallVector<MemoryEffects::EffectInstance> effects;
      op.getEffects(effects);
      for (const MemoryEffects::EffectInstance &e : effects)
        if (isa<MemoryEffects::Write>(e.getEffect()) &&
            llvm::is_contained(outputs, e.getValue()))
          op->setAttr(ds::DSDialect::kWriteFractionAttrName, attr);
    });
}

/// Registers (32-bit) per lane a warp's row cache may take.
constexpr int64_t kMaxCachedRegisters = 64;
/// The most elements per lane (rows of 256) for which a warp caches its row.
/// The members' unrolled iterations keep every element's addresses and
/// operands live besides the cache: in the GPT benchmark's 1-layer FP8 step,
/// rows of 256 need at most 64 registers, rows of 512 need 120, and rows of
/// 1024 run out at 255 and spill.
constexpr int64_t kMaxCachedPerLane = 8;

/// A (buffer, indexing map) pair a row-group member reads through.
using RowRead = std::pair<Value, AffineMap>;

/// Where the members of `ops` over `rank` loops that read `read` do not
/// use its element (MaskedReads.h): the mask of each such read, or none
/// where one of them uses it everywhere.
SmallVector<ReadMask> cachedReadMasks(ArrayRef<Operation *> ops, unsigned rank,
                                      RowRead read) {
  SmallVector<ReadMask> masks;
  for (Operation *op : ops) {
    if (memberRank(op) != rank)
      continue;
    auto generic = dyn_cast<linalg::GenericOp>(op);
    if (!generic) {
      if (llvm::is_contained(memberReads(op), read))
        return {};
      continue;
    }
    for (OpOperand *in : generic.getDpsInputOperands()) {
      if (RowRead{in->get(), generic.getMatchingIndexingMap(in)} != read ||
          generic.getMatchingBlockArgument(in).use_empty())
        continue;
      std::optional<ReadMask> mask = readMask(generic, in);
      if (!mask)
        return {};
      masks.push_back(*mask);
    }
  }
  return masks;
}

/// A cached read's load at loop indices `ivs` (and the `width` - 1 after
/// them along the last loop), skipped where no member uses it.
Value loadCached(OpBuilder &b, Location loc, ArrayRef<ReadMask> masks,
                 std::optional<double> fraction, ArrayRef<Value> ivs,
                 int64_t width, Type type,
                 function_ref<Value(OpBuilder &, Location)> load) {
  if (masks.empty())
    return load(b, loc);
  Value unused;
  for (const ReadMask &mask : masks) {
    Value u = emitUnused(b, loc, mask, ivs, ivs.size() - 1, width);
    unused = unused ? arith::AndIOp::create(b, loc, unused, u).getResult() : u;
  }
  return loadUnlessUnused(b, loc, unused, type, fraction, load);
}

/// Of the reads counted in `readers` (by how many members make each), those
/// two or more members make and none writes (`written`: view roots), most
/// read first (among equals, in the order the members read them), while
/// their registers per lane (`registersOf` an element type) fit in
/// kMaxCachedRegisters.
SmallVector<RowRead>
chooseCachedReads(llvm::MapVector<RowRead, int> readers,
                  const llvm::DenseSet<Value> &written,
                  function_ref<int64_t(Type)> registersOf) {
  auto reads = readers.takeVector();
  SmallVector<std::pair<int, size_t>> order; // (-readers, position)
  for (auto [k, entry] : llvm::enumerate(reads))
    if (entry.second >= 2 && !written.contains(viewRoot(entry.first.first)))
      order.push_back({-entry.second, k});
  llvm::sort(order);
  SmallVector<RowRead> chosen;
  int64_t registers = 0;
  for (auto [negCount, k] : order) {
    RowRead read = reads[k].first;
    int64_t cost =
        registersOf(cast<MemRefType>(read.first.getType()).getElementType());
    if (registers + cost > kMaxCachedRegisters)
      continue;
    registers += cost;
    chosen.push_back(read);
  }
  return chosen;
}

/// A lane's k-th place in a row of `count` places (elements or vectors)
/// that a warp's lanes take in turn: place lane + 32 k, clamped to the
/// last where the row has fewer (loaded there, but not used), and whether
/// it is in the row (null: always).
std::pair<Value, Value> lanePlace(OpBuilder &b, Location loc, Value lane,
                                  int64_t k, int64_t count) {
  Value place =
      arith::AddIOp::create(b, loc, lane, indexConstant(b, loc, k * kWarpSize));
  if ((k + 1) * kWarpSize <= count)
    return {place, Value()};
  Value last = indexConstant(b, loc, count - 1);
  Value inRow =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule, place, last);
  return {arith::MinUIOp::create(b, loc, place, last), inRow};
}

/// A warp's copy of the row elements that several members of its row group
/// read, as PyTorch's persistent softmax keeps them: each lane loads its
/// elements of the row (lane, lane + 32, ...) once, into registers, and
/// the members compute from there rather than rereading the row from L1 or
/// L2 in each pass. The members' loops over the row are unrolled, so rows
/// are at most 32 x kMaxCachedPerLane elements long.
class RowCache {
public:
  /// Chooses the (buffer, map) pairs that two or more of `ops` (the members
  /// over the row's elements) read and none writes, most-read first,
  /// within kMaxCachedRegisters.
  RowCache(ArrayRef<Operation *> ops, unsigned rank, int64_t numRed)
      : numRed(numRed), perLane(llvm::divideCeil(numRed, kWarpSize)) {
    if (perLane > kMaxCachedPerLane)
      return;
    llvm::DenseSet<Value> written;
    llvm::MapVector<RowRead, int> readers;
    for (Operation *op : ops) {
      for (Value w : memberWrites(op))
        written.insert(viewRoot(w));
      if (memberRank(op) != rank)
        continue;
      llvm::SmallDenseSet<RowRead, 4> seen;
      for (RowRead read : memberReads(op))
        if (seen.insert(read).second)
          ++readers[read];
    }
    // An element a register (or two), unpacked.
    for (RowRead read : chooseCachedReads(readers, written, [&](Type et) {
           return perLane * llvm::divideCeil(et.getIntOrFloatBitWidth(), 32);
         })) {
      SmallVector<ReadMask> masks = cachedReadMasks(ops, rank, read);
      std::optional<double> fraction = usedFraction(masks);
      entries.push_back(
          {read.first, read.second, {}, std::move(masks), fraction});
    }
  }

  bool empty() const { return entries.empty(); }
  int64_t elementsPerLane() const { return perLane; }

  /// Emits the lane's loads of row `rowIdx`: element i of the lane is row
  /// element lane + 32 i, clamped to the last one where the row is not a
  /// multiple of 32 long (such an element is loaded, but not used).
  void load(OpBuilder &b, Location loc, ArrayRef<Value> rowIdx, Value lane,
            ArrayRef<Value> redSizes) {
    for (int64_t i = 0; i < perLane; ++i) {
      Value c, inRow;
      std::tie(c, inRow) = lanePlace(b, loc, lane, i, numRed);
      SmallVector<Value> ivs(rowIdx);
      llvm::append_range(ivs, delinearize(b, loc, c, redSizes));
      for (Entry &e : entries)
        e.values.push_back(
            loadCached(b, loc, e.masks, e.fraction, ivs, /*width=*/1,
                       cast<MemRefType>(e.buffer.getType()).getElementType(),
                       [&](OpBuilder &lb, Location l) -> Value {
                         return memref::LoadOp::create(
                             lb, l, e.buffer, applyMap(lb, l, e.map, ivs));
                       }));
      valid.push_back(inRow);
      indices.push_back(std::move(ivs));
    }
  }

  /// Whether element i of the lane is in the row (null: always).
  Value inRow(int64_t i) const { return valid[i]; }
  /// The loop indices of element i of the lane.
  ArrayRef<Value> ivs(int64_t i) const { return indices[i]; }
  /// Element i of the lane of `buffer` read through `map`, if cached.
  Value lookup(Value buffer, AffineMap map, int64_t i) const {
    for (const Entry &e : entries)
      if (e.buffer == buffer && e.map == map)
        return e.values[i];
    return {};
  }

private:
  struct Entry {
    Value buffer;
    AffineMap map;
    SmallVector<Value> values;   // one per element of the lane
    SmallVector<ReadMask> masks; // where no member uses an element
    std::optional<double> fraction;
  };
  SmallVector<Entry> entries;
  int64_t numRed, perLane;
  SmallVector<Value> valid;
  SmallVector<SmallVector<Value>> indices;
};

/// A row reduction member over a warp's cached row: the lane's elements
/// folded in order (those past the row's end skipped), with the cached
/// reads taken from `cache`.
Value foldCachedRow(OpBuilder &b, Location loc, Reduction &red,
                    const RowCache &cache) {
  Value acc = arith::ConstantOp::create(b, loc, red.identity);
  for (int64_t i = 0; i < cache.elementsPerLane(); ++i) {
    IRMapping map;
    map.map(red.outArg, acc);
    for (OpOperand *in : red.op.getDpsInputOperands())
      if (Value v =
              cache.lookup(in->get(), red.op.getMatchingIndexingMap(in), i))
        map.map(red.op.getMatchingBlockArgument(in), v);
    cloneBodyAt(b, loc, red.op, cache.ivs(i), map, /*maskReads=*/true);
    Value next = map.lookup(red.comb->getResult(0));
    acc = cache.inRow(i)
              ? arith::SelectOp::create(b, loc, cache.inRow(i), next, acc)
                    .getResult()
              : next;
  }
  return acc;
}

/// The most vectors per lane a warp's vector row cache holds: rows of 1024
/// f32 elements (2048 bf16) in 16-byte vectors; kMaxCachedRegisters bounds
/// it too. PyTorch's persistent softmax keeps rows of up to 1024 elements
/// in registers.
constexpr int64_t kMaxCachedVectors = 8;

/// A warp's row cache in 16-byte vectors: lane l holds vectors l, l + 32,
/// ... of the row, the ones the members' vector loops would give it anyway,
/// loaded once for every member that reads them. Where every member over
/// the row's elements moves vectors (GenericVectors.h) and the buffers are
/// aligned (checked by the caller), rows of 32 x kMaxCachedVectors vectors
/// are cached, where RowCache, which keeps an element and its address per
/// register, stops at 256 elements.
class VectorRowCache {
public:
  /// The cache of `ops` (a warp's row group of `rank` loops, the last
  /// `reduced.size()` of them over the row), or none: a member over the
  /// row's elements without vectors, rows too long, or no vector that two
  /// members read and none writes.
  static std::optional<VectorRowCache>
  plan(ArrayRef<Operation *> ops, unsigned rank, ArrayRef<int64_t> reduced) {
    VectorRowCache c;
    int64_t numRed = 1;
    for (int64_t s : reduced)
      numRed *= s;
    c.plans.resize(ops.size());
    llvm::DenseSet<Value> written;
    for (auto [i, op] : llvm::enumerate(ops)) {
      for (Value w : memberWrites(op))
        written.insert(viewRoot(w));
      if (memberRank(op) != rank)
        continue;
      c.plans[i] = planMemberVectors(op, rank, reduced);
      if (!c.plans[i])
        return std::nullopt;
      c.width =
          c.width ? std::min(c.width, c.plans[i]->width) : c.plans[i]->width;
      appendBuffers(c.buffers, c.plans[i]->buffers);
    }
    if (!c.width)
      return std::nullopt;
    // Every lane a vector at least: narrower vectors on short rows (rows of
    // 64 f32, 2 each). Narrowing keeps a plan valid (GenericVectors.cpp).
    while (c.width > 2 && numRed / c.width < kWarpSize)
      c.width /= 2;
    if (numRed / c.width < kWarpSize)
      return std::nullopt;
    for (std::optional<GenericVectors> &plan : c.plans)
      if (plan)
        plan->width = c.width;
    c.numVectors = numRed / c.width;
    c.perLane = llvm::divideCeil(c.numVectors, kWarpSize);
    if (c.perLane > kMaxCachedVectors)
      return std::nullopt;
    // The vectors the members read (a member's operand read once for all
    // lanes is no row read).
    llvm::MapVector<RowRead, int> readers;
    for (const std::optional<GenericVectors> &plan : c.plans) {
      if (!plan)
        continue;
      linalg::GenericOp op = plan->op;
      llvm::SmallDenseSet<RowRead, 4> seen;
      for (OpOperand *in : op.getDpsInputOperands()) {
        RowRead read{in->get(), op.getMatchingIndexingMap(in)};
        if (plan->isVector[in->getOperandNumber()] && seen.insert(read).second)
          ++readers[read];
      }
    }
    // Vectors packed: 8 bf16 elements in 4 registers.
    for (RowRead read : chooseCachedReads(readers, written, [&](Type et) {
           return llvm::divideCeil(
               c.perLane * c.width * et.getIntOrFloatBitWidth(), 32);
         })) {
      SmallVector<ReadMask> masks = cachedReadMasks(ops, rank, read);
      std::optional<double> fraction = usedFraction(masks);
      c.entries.push_back(
          {read.first, read.second, {}, std::move(masks), fraction});
    }
    if (c.entries.empty())
      return std::nullopt;
    return c;
  }

  /// The buffers whose alignment the cache and the members' vectors need.
  ArrayRef<Value> alignedBuffers() const { return buffers; }
  int64_t vectorsPerLane() const { return perLane; }
  /// Member `i`'s vectors (none for a member over the rows only).
  const std::optional<GenericVectors> &memberPlan(size_t i) const {
    return plans[i];
  }

  /// Emits lane `lane`'s loads of row `rowIdx`: its vector j is vector
  /// lane + 32 j of the row, clamped to the last one where the row has not
  /// a multiple of 32 (such a vector is loaded, but not used).
  void load(OpBuilder &b, Location loc, ArrayRef<Value> rowIdx, Value lane,
            ArrayRef<Value> redSizes) {
    Value widthV = indexConstant(b, loc, width);
    for (int64_t j = 0; j < perLane; ++j) {
      Value v, inRow;
      std::tie(v, inRow) = lanePlace(b, loc, lane, j, numVectors);
      SmallVector<Value> ivs(rowIdx);
      llvm::append_range(
          ivs, delinearize(b, loc, arith::MulIOp::create(b, loc, v, widthV),
                           redSizes));
      for (Entry &e : entries) {
        Type et = cast<MemRefType>(e.buffer.getType()).getElementType();
        auto type = VectorType::get({width}, et);
        e.values.push_back(
            loadCached(b, loc, e.masks, e.fraction, ivs, width, type,
                       [&](OpBuilder &lb, Location l) -> Value {
                         return vector::LoadOp::create(
                             lb, l, type, e.buffer, applyMap(lb, l, e.map, ivs),
                             /*nontemporal=*/false, vectorAlignment(width, et));
                       }));
      }
      valid.push_back(inRow);
      indices.push_back(std::move(ivs));
    }
  }

  /// Whether the lane's vector j is in the row (null: always).
  Value inRow(int64_t j) const { return valid[j]; }
  /// The loop indices of the first element of the lane's vector j.
  ArrayRef<Value> ivs(int64_t j) const { return indices[j]; }
  /// The cached vectors member `i` takes at its iteration over the lane's
  /// vector j.
  SmallVector<GivenVector> given(size_t i, int64_t j) const {
    SmallVector<GivenVector> out;
    const GenericVectors &plan = *plans[i];
    linalg::GenericOp op = plan.op;
    for (OpOperand *in : op.getDpsInputOperands()) {
      if (!plan.isVector[in->getOperandNumber()])
        continue;
      AffineMap map = op.getMatchingIndexingMap(in);
      for (const Entry &e : entries)
        if (e.buffer == in->get() && e.map == map)
          out.push_back({in, e.values[j]});
    }
    return out;
  }

private:
  struct Entry {
    Value buffer;
    AffineMap map;
    SmallVector<Value> values;   // the lane's vectors
    SmallVector<ReadMask> masks; // where no member uses an element
    std::optional<double> fraction;
  };
  SmallVector<Entry> entries;
  SmallVector<std::optional<GenericVectors>> plans; // per member
  SmallVector<Value> buffers;
  int64_t width = 0, numVectors = 0, perLane = 0;
  SmallVector<Value> valid;
  SmallVector<SmallVector<Value>> indices;
};

/// Teams (warps or blocks) a row group with column members runs at most:
/// about eight warps an SM of an H100 or H200 (132 SMs), each with a row's
/// tensors in flight. Every block writes a row of partial sums per column
/// member, which a second launch folds: more blocks would write more of
/// them.
constexpr int64_t kColumnTeams = 1024;
/// Rows a team takes at least where it keeps column sums: the partial sums
/// (written and read once) are then at most a quarter of what a column
/// member would read again on its own.
constexpr int64_t kMinColumnRows = 8;

/// The sums of a row group's column members (RowGroups.h): for each, a
/// [teams, columns] buffer in shared memory, in which each team's threads
/// fold the row elements they take, a column a thread (the same in every
/// row), so no two threads ever touch one sum. After the rows, the block
/// folds its teams' sums in team order into a row of a [blocks, columns]
/// buffer of partial sums, which foldColumnPartials folds into the output.
class ColumnSums {
public:
  ColumnSums(ArrayRef<Operation *> ops, unsigned numRows) {
    for (auto [i, op] : llvm::enumerate(ops))
      if (auto generic = dyn_cast<linalg::GenericOp>(op);
          generic && generic.getNumReductionLoops() > 0 &&
          isColumnMember(generic, numRows)) {
        slot[i] = members.size();
        members.push_back(generic);
        bytesPerTeam += columnSumBytes(generic);
      }
  }

  bool empty() const { return members.empty(); }
  bool has(size_t i) const { return slot.contains(i); }
  ArrayRef<linalg::GenericOp> ops() const { return members; }

  /// The shared buffers for `teams` teams a block.
  SmallVector<Type> workgroupTypes(int64_t teams) const {
    SmallVector<Type> types;
    for (linalg::GenericOp op : members) {
      MLIRContext *ctx = op.getContext();
      Type et = getElementTypeOrSelf(op.getDpsInitOperand(0)->get().getType());
      types.push_back(MemRefType::get(
          {teams, op.getStaticLoopRanges().back()}, et, AffineMap(),
          gpu::AddressSpaceAttr::get(
              ctx, gpu::GPUDialect::getWorkgroupAddressSpace())));
    }
    return types;
  }

  /// Every sum of the block set to its identity, then a barrier.
  void emitInit(OpBuilder &b, Location loc, gpu::LaunchOp launch) {
    forEachColumn(
        b, loc, launch,
        [&](OpBuilder &cb, Location cl, size_t k, Reduction &red, Value col) {
          Value identity = arith::ConstantOp::create(cb, cl, red.identity);
          for (int64_t t = 0; t < numTeams; ++t)
            memref::StoreOp::create(cb, cl, identity, buffers[k],
                                    ValueRange{indexConstant(cb, cl, t), col});
        });
    gpu::BarrierOp::create(b, loc);
  }

  /// After the rows: a barrier, then the block's sums, its teams' in team
  /// order, into row `blockId` of each member's partial sums.
  void emitBlockPartials(OpBuilder &b, Location loc, gpu::LaunchOp launch,
                         ArrayRef<Value> partials) {
    gpu::BarrierOp::create(b, loc);
    forEachColumn(
        b, loc, launch,
        [&](OpBuilder &cb, Location cl, size_t k, Reduction &red, Value col) {
          Value sum = red.foldColumn(cb, cl, buffers[k], numTeams, col);
          memref::StoreOp::create(cb, cl, sum, partials[k],
                                  ValueRange{launch.getBlockIds().x, col});
        });
  }

  /// The kernel's shared buffers.
  void bind(ValueRange workgroup) {
    buffers.assign(workgroup.begin(), workgroup.end());
  }
  /// The running team's place in its block.
  void setTeam(Value index) { team = index; }

  /// Member `i` at loop indices `ivs` (row element ivs.back()): its sum
  /// there combined with the body's value, the inputs `cached` has taken
  /// from it.
  void emitElement(OpBuilder &b, Location loc, size_t i, ArrayRef<Value> ivs,
                   CachedRead cached) {
    size_t k = slot.lookup(i);
    Reduction red(b, members[k]);
    SmallVector<Value, 2> at = {team, ivs.back()};
    IRMapping map;
    map.map(red.outArg, memref::LoadOp::create(b, loc, buffers[k], at));
    if (cached)
      for (OpOperand *in : red.op.getDpsInputOperands())
        if (Value v = cached(in->get(), red.op.getMatchingIndexingMap(in)))
          map.map(red.op.getMatchingBlockArgument(in), v);
    cloneBodyAt(b, loc, red.op, ivs, map, /*maskReads=*/true);
    memref::StoreOp::create(b, loc, map.lookup(red.comb->getResult(0)),
                            buffers[k], at);
  }

  /// Member `i`'s vector at loop indices `ivs` (`plan`, `given`: as
  /// emitGenericVectorLanes'): each lane's sum combined with its element.
  void emitVector(OpBuilder &b, Location loc, size_t i,
                  const GenericVectors &plan, ArrayRef<Value> ivs,
                  ArrayRef<GivenVector> given) {
    size_t k = slot.lookup(i);
    Reduction red(b, members[k]);
    SmallVector<SmallVector<Value, 2>> at;
    SmallVector<Value> sums;
    for (int64_t lane = 0; lane < plan.width; ++lane) {
      Value col = ivs.back();
      if (lane > 0)
        col = arith::AddIOp::create(b, loc, col, indexConstant(b, loc, lane));
      at.push_back({team, col});
      sums.push_back(memref::LoadOp::create(b, loc, buffers[k], at.back()));
    }
    SmallVector<Value> next =
        emitGenericVectorLanes(b, loc, plan, ivs, red, sums, given);
    for (auto [v, idx] : llvm::zip(next, at))
      memref::StoreOp::create(b, loc, v, buffers[k], idx);
  }

  /// Teams a block of `warpTeams` teams (a warp each; 1: a block per row)
  /// keeps within kMaxColumnSumBytes: halved until they fit.
  int64_t fitTeams(int64_t warpTeams) {
    int64_t t = warpTeams;
    while (t > 1 && t * bytesPerTeam > kMaxColumnSumBytes)
      t /= 2;
    numTeams = t;
    return t;
  }

private:
  /// `body` for every column of every member, the block's threads striding
  /// over the columns.
  void forEachColumn(
      OpBuilder &b, Location loc, gpu::LaunchOp launch,
      function_ref<void(OpBuilder &, Location, size_t, Reduction &, Value)>
          body) {
    Value tid = arith::AddIOp::create(
        b, loc, launch.getThreadIds().x,
        arith::MulIOp::create(b, loc, launch.getThreadIds().y,
                              launch.getBlockSize().x));
    Value threads = arith::MulIOp::create(b, loc, launch.getBlockSize().x,
                                          launch.getBlockSize().y);
    for (auto [k, op] : llvm::enumerate(members)) {
      size_t member = k;
      Reduction red(b, op);
      scf::ForOp::create(
          b, loc, tid, indexConstant(b, loc, op.getStaticLoopRanges().back()),
          threads, ValueRange{},
          [&](OpBuilder &fb, Location fl, Value col, ValueRange) {
            body(fb, fl, member, red, col);
            scf::YieldOp::create(fb, fl);
          });
    }
  }

  SmallVector<linalg::GenericOp> members;
  llvm::DenseMap<size_t, size_t> slot; // member index in ops -> in members
  int64_t bytesPerTeam = 0, numTeams = 1;
  SmallVector<Value> buffers;
  Value team;
};

/// A row group's members over one row, in turn, as the row's team runs
/// them, with a barrier between consecutive ones.
class RowMembers {
public:
  RowMembers(ArrayRef<Operation *> ops, ArrayRef<int64_t> rows,
             ArrayRef<int64_t> reduced, ArrayRef<Value> redSizes, bool warp,
             const LaunchShape &shape, RowTeam &team, SmallVector<Value> rowIdx,
             ColumnSums &columns)
      : ops(ops), rows(rows), redSizes(redSizes), warp(warp), shape(shape),
        team(team), rowIdx(std::move(rowIdx)), columns(columns),
        rank(rows.size() + reduced.size()), reduced(reduced) {
    for (int64_t s : reduced)
      numRed *= s;
  }

  /// Element by element (a warp with a RowCache for rows of up to 256),
  /// or, with `vectorize`, in the vectors each member's loop loads where
  /// the buffers are aligned.
  void emitUncached(OpBuilder &ob, Location l, bool vectorize) {
    Value numRedValue = indexConstant(ob, l, numRed);
    std::optional<RowCache> cache;
    if (warp && shape.cacheRows) {
      cache.emplace(ops, rank, numRed);
      if (cache->empty())
        cache.reset();
      else
        cache->load(ob, l, rowIdx, team.first, redSizes);
    }
    // Without a cache, the members over a contiguous row move 16-byte
    // vectors of it (GenericVectors.h), all behind one check that
    // their buffers are aligned (else the scalar loops below).
    SmallVector<std::optional<GenericVectors>> vectors(ops.size());
    SmallVector<Value> vectorBuffers;
    for (auto [i, op] : llvm::enumerate(ops)) {
      if (cache || !vectorize || memberRank(op) != rank)
        continue;
      vectors[i] = planMemberVectors(op, rank, reduced);
      if (vectors[i])
        appendBuffers(vectorBuffers, vectors[i]->buffers);
    }
    Value aligned =
        vectorBuffers.empty() ? Value() : buffersAligned(ob, l, vectorBuffers);
    for (auto [i, member] : llvm::enumerate(ops)) {
      Operation *op = member; // captured by the lambdas below
      size_t index = i;
      const std::optional<GenericVectors> &inVector = vectors[i];
      Location ol = op->getLoc();
      auto generic = dyn_cast<linalg::GenericOp>(op);
      if (isRowReduction(i, generic)) {
        Reduction red(ob, generic);
        Value partial;
        if (cache)
          partial = foldCachedRow(ob, ol, red, *cache);
        else if (inVector)
          partial = foldVectorsOrElements(
              ob, ol, red, ReductionVectors{*inVector, std::nullopt, {}},
              rowIdx, team.first, team.stride, aligned);
        else
          partial = red.foldRange(ob, ol, rowIdx, team.first, numRedValue,
                                  team.stride);
        finishReduction(ob, ol, red, partial);
      } else if (memberRank(op) == rows.size()) {
        emitRowValue(ob, ol, op);
      } else if (cache) {
        // The lane's elements of the row, unrolled, from the cache.
        TailCut cut = beginTailCut(ob, ol, index, op);
        for (int64_t e = 0; e < cache->elementsPerLane(); ++e) {
          Value cond = andIf(ob, ol, team.real, cache->inRow(e));
          cond = beforeTail(ob, ol, cond, cache->ivs(e).back(), cut);
          RowTeam::emitIf(ob, ol, cond, [&](OpBuilder &ib, Location il) {
            emitIteration(ib, il, index, op, cache->ivs(e),
                          [&](Value buffer, AffineMap map) {
                            return cache->lookup(buffer, map, e);
                          });
          });
        }
        endTailCut(ob, op, cut);
      } else {
        TailCut cut = beginTailCut(ob, ol, index, op);
        Value end = cut.tails ? cut.end : numRedValue;
        // The row's elements, strided over the team's threads, several
        // loaded at once.
        auto scalars = [&](OpBuilder &ib, Location il) {
          buildStridedLoop(ib, il, team.first, end, team.stride, shape.unroll,
                           [&](OpBuilder &eb, Location el, Value c) {
                             SmallVector<Value> ivs(rowIdx);
                             llvm::append_range(
                                 ivs, delinearize(eb, el, c, redSizes));
                             emitIteration(eb, el, index, op, ivs);
                           });
        };
        // Or vectors of the row, strided over the team's threads.
        auto inVectors = [&](OpBuilder &ib, Location il) {
          const GenericVectors &plan = *inVector;
          Value vectors =
              cut.tails ? arith::CeilDivUIOp::create(
                              ib, il, end, indexConstant(ib, il, plan.width))
                              .getResult()
                        : indexConstant(ib, il, numRed / plan.width);
          scf::ForOp::create(
              ib, il, team.first, vectors, team.stride, ValueRange{},
              [&](OpBuilder &fb, Location fl, Value v, ValueRange) {
                Value c = arith::MulIOp::create(
                    fb, fl, v, indexConstant(fb, fl, plan.width));
                SmallVector<Value> ivs(rowIdx);
                llvm::append_range(ivs, delinearize(fb, fl, c, redSizes));
                emitVectorIteration(fb, fl, index, plan, ivs);
                scf::YieldOp::create(fb, fl);
              });
        };
        RowTeam::emitIf(ob, ol, team.real, [&](OpBuilder &ib, Location il) {
          if (!inVector) {
            scalars(ib, il);
            return;
          }
          scf::IfOp::create(
              ib, il, aligned,
              [&](OpBuilder &tb, Location tl) {
                inVectors(tb, tl);
                scf::YieldOp::create(tb, tl);
              },
              [&](OpBuilder &eb, Location el) {
                scalars(eb, el);
                scf::YieldOp::create(eb, el);
              });
        });
        endTailCut(ob, op, cut);
      }
      // What this member wrote, another thread of the team may read in
      // the next. (A warp's lanes would need only __syncwarp; the block
      // barrier is as correct, every warp running the same members.)
      if (i + 1 < ops.size())
        gpu::BarrierOp::create(ob, ol);
    }
  }

  /// The row's indices.
  ArrayRef<Value> row() const { return rowIdx; }

  /// Over the lane's vectors of `cache` (loaded), unrolled.
  void emitCached(OpBuilder &ob, Location l, const VectorRowCache &cache) {
    for (auto [i, member] : llvm::enumerate(ops)) {
      Operation *op = member; // captured by the lambdas below
      size_t index = i;
      Location ol = op->getLoc();
      auto generic = dyn_cast<linalg::GenericOp>(op);
      const std::optional<GenericVectors> &plan = cache.memberPlan(i);
      if (isRowReduction(i, generic)) {
        Reduction red(ob, generic);
        Value acc = arith::ConstantOp::create(ob, ol, red.identity);
        for (int64_t j = 0; j < cache.vectorsPerLane(); ++j) {
          Value next = emitGenericVector(ob, ol, *plan, cache.ivs(j), &red, acc,
                                         cache.given(index, j));
          acc = cache.inRow(j)
                    ? arith::SelectOp::create(ob, ol, cache.inRow(j), next, acc)
                          .getResult()
                    : next;
        }
        finishReduction(ob, ol, red, acc);
      } else if (memberRank(op) == rows.size()) {
        emitRowValue(ob, ol, op);
      } else {
        // A vector before a row tail is stored whole: the lanes past its
        // start are written, not read.
        TailCut cut = beginTailCut(ob, ol, index, op);
        for (int64_t j = 0; j < cache.vectorsPerLane(); ++j) {
          Value cond = andIf(ob, ol, team.real, cache.inRow(j));
          cond = beforeTail(ob, ol, cond, cache.ivs(j).back(), cut);
          RowTeam::emitIf(ob, ol, cond, [&](OpBuilder &ib, Location il) {
            emitVectorIteration(ib, il, index, *plan, cache.ivs(j),
                                cache.given(index, j));
          });
        }
        endTailCut(ob, op, cut);
      }
      if (i + 1 < ops.size())
        gpu::BarrierOp::create(ob, ol);
    }
  }

private:
  /// An all-parallel member whose stores stop before its outputs' row
  /// tails (memberRowTails): where the row's tail starts (`end`), and the
  /// op before the member's code (null: the block's start).
  struct TailCut {
    std::optional<MemberRowTails> tails;
    Value end;
    Operation *prev = nullptr;
  };

  TailCut beginTailCut(OpBuilder &b, Location loc, size_t i, Operation *op) {
    TailCut cut;
    Block::iterator ip = b.getInsertionPoint();
    if (ip != b.getInsertionBlock()->begin())
      cut.prev = &*std::prev(ip);
    if (columns.has(i))
      return cut;
    cut.tails = memberRowTails(op, rank, reduced);
    if (cut.tails)
      cut.end = emitRowTailStart(b, loc, rowIdx[cut.tails->rowLoop],
                                 cut.tails->block, numRed);
    return cut;
  }

  /// `cond` (null: true) where column `col` lies before the row's tail.
  Value beforeTail(OpBuilder &b, Location loc, Value cond, Value col,
                   const TailCut &cut) {
    if (!cut.tails)
      return cond;
    return andIf(
        b, loc, cond,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, col, cut.end));
  }

  /// Marks the member's stores with the part of its outputs they write.
  void endTailCut(OpBuilder &b, Operation *op, const TailCut &cut) {
    if (!cut.tails)
      return;
    auto generic = cast<linalg::GenericOp>(op);
    auto type = cast<MemRefType>(generic.getDpsInits()[0].getType());
    markWriteFraction(b, cut.prev, generic.getDpsInits(),
                      rowHeadsFraction(type.getDimSize(type.getRank() - 2),
                                       numRed, cut.tails->block));
  }

  /// `x` and `y`, either of which may be null (true).
  static Value andIf(OpBuilder &b, Location loc, Value x, Value y) {
    if (!x || !y)
      return x ? x : y;
    return arith::AndIOp::create(b, loc, x, y);
  }

  /// Member `i` (`op`) over the row's elements at loop indices `ivs`: a
  /// column member's sums, or an all-parallel member's outputs.
  void emitIteration(OpBuilder &b, Location loc, size_t i, Operation *op,
                     ArrayRef<Value> ivs, CachedRead cached = nullptr) {
    if (columns.has(i))
      columns.emitElement(b, loc, i, ivs, cached);
    else
      emitMemberIteration(b, loc, op, ivs, cached);
  }

  /// The same over the vector at `ivs` (`plan`, taking `given`).
  void emitVectorIteration(OpBuilder &b, Location loc, size_t i,
                           const GenericVectors &plan, ArrayRef<Value> ivs,
                           ArrayRef<GivenVector> given = {}) {
    if (columns.has(i))
      columns.emitVector(b, loc, i, plan, ivs, given);
    else
      emitGenericVector(b, loc, plan, ivs, nullptr, {}, given);
  }

  /// Whether member `i` (`generic`: null or the op) is a row reduction.
  bool isRowReduction(size_t i, linalg::GenericOp generic) const {
    return generic && generic.getNumReductionLoops() > 0 && !columns.has(i);
  }

  /// A reduction member's thread `partial`s combined over the team, the
  /// total folded into the row's output by the leader.
  void finishReduction(OpBuilder &b, Location loc, Reduction &red,
                       Value partial) {
    Value total = team.combine(b, loc, partial, red.kind);
    RowTeam::emitIf(b, loc, team.leader, [&](OpBuilder &ib, Location il) {
      red.foldIntoOutput(ib, il, rowIdx, total);
    });
  }

  /// A member with one element per row: the team's leader computes it.
  void emitRowValue(OpBuilder &b, Location loc, Operation *op) {
    RowTeam::emitIf(b, loc, team.leader, [&](OpBuilder &ib, Location il) {
      emitMemberIteration(ib, il, op, rowIdx);
    });
  }

  ArrayRef<Operation *> ops;
  ArrayRef<int64_t> rows;
  ArrayRef<Value> redSizes;
  bool warp;
  const LaunchShape &shape;
  RowTeam &team;
  SmallVector<Value> rowIdx;
  ColumnSums &columns;
  unsigned rank;
  ArrayRef<int64_t> reduced;
  int64_t numRed = 1;
};

} // namespace

void mlir::ds::gpu_kernels::buildRowGroupLaunch(OpBuilder &b,
                                                ArrayRef<Operation *> ops,
                                                ArrayRef<int64_t> rows,
                                                ArrayRef<int64_t> reduced,
                                                const LaunchShape &shape) {
  Location loc = ops.front()->getLoc();
  b.setInsertionPoint(ops.back());
  int64_t numRows = 1, numRed = 1;
  for (int64_t s : rows)
    numRows *= s;
  for (int64_t s : reduced)
    numRed *= s;
  SmallVector<Value> rowSizes, redSizes;
  for (int64_t s : rows)
    rowSizes.push_back(indexConstant(b, loc, s));
  for (int64_t s : reduced)
    redSizes.push_back(indexConstant(b, loc, s));
  bool warp = warpPerRow(numRows, numRed, shape);
  unsigned rank = rows.size() + reduced.size();
  // A warp's rows as vectors in registers where the buffers are aligned
  // (else element by element).
  std::optional<VectorRowCache> plannedCache;
  if (warp && shape.vectorize && shape.cacheRows)
    plannedCache = VectorRowCache::plan(ops, rank, reduced);
  // Column members: as many teams a block as their sums fit, and a grid of
  // kColumnTeams teams at most, each block writing a row of partial sums.
  ColumnSums columns(ops, rows.size());
  RowLaunchExtras extras;
  SmallVector<Value> partials;
  std::vector<Reduction> columnReductions;
  int64_t numBlocks = 0;
  if (!columns.empty()) {
    int64_t teams = columns.fitTeams(warp ? shape.blockSize / kWarpSize : 1);
    numBlocks = std::clamp<int64_t>(
        std::min<int64_t>(numRows / (teams * kMinColumnRows),
                          kColumnTeams / teams),
        1, shape.maxBlocks);
    extras.warpsPerBlock = warp ? teams : 0;
    extras.maxBlocks = numBlocks;
    extras.workgroup = columns.workgroupTypes(teams);
    for (linalg::GenericOp op : columns.ops()) {
      columnReductions.emplace_back(b, op);
      partials.push_back(columnReductions.back().allocPartials(
          b, loc, numBlocks, /*splitFirst=*/true));
    }
  }
  auto before = [&](OpBuilder &kb, Location kl, gpu::LaunchOp launch) {
    columns.bind(launch.getWorkgroupAttributions());
    columns.emitInit(kb, kl, launch);
  };
  auto after = [&](OpBuilder &kb, Location kl, gpu::LaunchOp launch) {
    columns.emitBlockPartials(kb, kl, launch, partials);
  };
  if (!columns.empty()) {
    extras.before = before;
    extras.after = after;
  }
  buildRowLaunch(
      b, loc, numRows, warp, threadsPerRow(numRed, shape), shape,
      [&](OpBuilder &kb, Location kl, RowTeam &team) {
        columns.setTeam(team.index);
        RowMembers members(ops, rows, reduced, redSizes, warp, shape, team,
                           delinearize(kb, kl, team.row, rowSizes), columns);
        if (!plannedCache) {
          members.emitUncached(kb, kl, shape.vectorize);
          return;
        }
        scf::IfOp::create(
            kb, kl, buffersAligned(kb, kl, plannedCache->alignedBuffers()),
            [&](OpBuilder &ib, Location il) {
              VectorRowCache cache = *plannedCache;
              cache.load(ib, il, members.row(), team.first, redSizes);
              members.emitCached(ib, il, cache);
              scf::YieldOp::create(ib, il);
            },
            [&](OpBuilder &ib, Location il) {
              members.emitUncached(ib, il, /*vectorize=*/false);
              scf::YieldOp::create(ib, il);
            });
      },
      extras);
  if (!columns.empty()) {
    SmallVector<Reduction *> reds;
    for (Reduction &red : columnReductions)
      reds.push_back(&red);
    foldColumnPartials(b, loc, reds, partials, numBlocks, shape);
  }
}
