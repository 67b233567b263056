//===- RowGroups.cpp - Runs of row-wise ops that one kernel can take ------===//
//
// See RowGroups.h.
//
//===----------------------------------------------------------------------===//

#include "RowGroups.h"
#include "BufferAccess.h"
#include "GenericVectors.h"
#include "KernelUtils.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::ds::gpu_kernels;

namespace {

/// One buffer access of a member: the value, the map from the member's
/// loops (null: any element, a load in its body), and whether it writes.
struct RowAccess {
  Value buffer;
  AffineMap map;
  bool writes;
  /// A column member's output (RowGroups.h), written once after every row.
  bool columns = false;
};

/// `a` seen through reshapes that only add or drop unit dimensions (a
/// reduction's [rows] output read back as [rows, 1] by the next op): the
/// reshape's source and the map composed with it, so that two members
/// reaching one buffer through such views compare equal. An index into a
/// unit dimension can only be 0.
void throughUnitReshapes(RowAccess &a) {
  MLIRContext *ctx = a.map.getContext();
  while (true) {
    Value source;
    SmallVector<ReassociationIndices> groups;
    ArrayRef<int64_t> wide; // the shape of the side with more dimensions
    bool expanding;
    if (auto expand = a.buffer.getDefiningOp<memref::ExpandShapeOp>()) {
      source = expand.getSrc();
      groups = expand.getReassociationIndices();
      wide = expand.getResultType().getShape();
      expanding = true;
    } else if (auto collapse =
                   a.buffer.getDefiningOp<memref::CollapseShapeOp>()) {
      source = collapse.getSrc();
      groups = collapse.getReassociationIndices();
      wide = collapse.getSrcType().getShape();
      expanding = false;
    } else {
      return;
    }
    // Each group of the wider side: at most one dimension not of size 1.
    SmallVector<AffineExpr> exprs;
    for (auto [g, group] : llvm::enumerate(groups)) {
      auto big = llvm::make_filter_range(
          group, [&](int64_t d) { return wide[d] != 1; });
      int64_t count = std::distance(big.begin(), big.end());
      if (count > 1 || llvm::any_of(group, [&](int64_t d) {
            return ShapedType::isDynamic(wide[d]);
          }))
        return;
      if (expanding) {
        // One source dimension per group: the index of its big member.
        exprs.push_back(count ? a.map.getResult(*big.begin())
                              : getAffineConstantExpr(0, ctx));
      } else {
        // Each source dimension of the group: the group's index for the
        // big one, 0 for the unit ones.
        for (int64_t d : group)
          exprs.push_back(wide[d] != 1 ? a.map.getResult(g)
                                       : getAffineConstantExpr(0, ctx));
      }
    }
    a.buffer = source;
    a.map = AffineMap::get(a.map.getNumDims(), 0, exprs, ctx);
  }
}

/// The shape of a row-group candidate.
enum class Kind { None, Reduction, OverRows, OverRowElements, Columns };

/// What `op` is to a group over `rows` x `reduced` (None: not a member),
/// with its buffer accesses.
Kind classify(Operation *op, ArrayRef<int64_t> rows, ArrayRef<int64_t> reduced,
              const LaunchShape &shape, SmallVectorImpl<RowAccess> &accesses) {
  SmallVector<int64_t> rowElements(rows);
  llvm::append_range(rowElements, reduced);
  auto spaceKind = [&](ArrayRef<int64_t> space) {
    if (space == ArrayRef(rows))
      return Kind::OverRows;
    if (space == ArrayRef(rowElements))
      return Kind::OverRowElements;
    return Kind::None;
  };
  auto identity = [&](unsigned rank) {
    return AffineMap::getMultiDimIdentityMap(rank, op->getContext());
  };
  if (auto fill = dyn_cast<linalg::FillOp>(op)) {
    auto type = dyn_cast<MemRefType>(fill.getOutputs()[0].getType());
    if (!type || !type.hasStaticShape())
      return Kind::None;
    accesses.push_back({fill.getOutputs()[0], identity(type.getRank()), true});
    return spaceKind(type.getShape());
  }
  if (auto copy = dyn_cast<memref::CopyOp>(op)) {
    auto src = cast<MemRefType>(copy.getSource().getType());
    auto dst = cast<MemRefType>(copy.getTarget().getType());
    if (!src.hasStaticShape() || src.getShape() != dst.getShape())
      return Kind::None;
    accesses.push_back({copy.getSource(), identity(src.getRank()), false});
    accesses.push_back({copy.getTarget(), identity(dst.getRank()), true});
    return spaceKind(src.getShape());
  }
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic || !generic.hasPureBufferSemantics())
    return Kind::None;
  for (Operation &inner : generic.getBody()->without_terminator())
    if (inner.getNumRegions() != 0)
      return Kind::None;
  SmallVector<int64_t> ranges = generic.getStaticLoopRanges();
  bool columns = shape.rowColumns && ranges == rowElements &&
                 isColumnMember(generic, rows.size());
  for (OpOperand &operand : generic->getOpOperands()) {
    if (!isa<MemRefType>(operand.get().getType()))
      continue;
    bool writes = generic.isDpsInit(&operand);
    RowAccess a{operand.get(), generic.getMatchingIndexingMap(&operand), writes,
                writes && columns};
    throughUnitReshapes(a);
    accesses.push_back(a);
  }
  // A load in the body (a gather, from tensor.extract) may read any element
  // of its buffer: another row's, if the group writes it. A pointer jump
  // that reads next[next[p]] after the reduction that writes next would
  // otherwise join its group and read rows that other blocks have not
  // written yet.
  generic.getBody()->walk([&](memref::LoadOp load) {
    if (!generic.getRegion().isAncestor(load.getMemRef().getParentRegion()))
      accesses.push_back({load.getMemRef(), AffineMap(), false});
  });
  if (columns)
    return Kind::Columns;
  if (generic.getNumReductionLoops() > 0) {
    return ranges == rowElements &&
                   generic.getNumParallelLoops() == rows.size() &&
                   isBlockRowReduction(generic, shape)
               ? Kind::Reduction
               : Kind::None;
  }
  Kind kind = spaceKind(ranges);
  // Over a row's elements, the threads stride along the last loop.
  if (kind == Kind::OverRowElements &&
      !coalescedAlong(generic, generic.getNumLoops() - 1))
    return Kind::None;
  return kind;
}

/// Whether `map` reaches a buffer at the row loops' own indices first
/// (results 0..n-1 are d0..dn-1), its other results not involving them.
bool rowLocal(AffineMap map, unsigned numRows) {
  if (!map || map.getNumResults() < numRows)
    return false;
  for (auto [k, e] : llvm::enumerate(map.getResults())) {
    if (k < numRows) {
      auto dim = dyn_cast<AffineDimExpr>(e);
      if (!dim || dim.getPosition() != k)
        return false;
      continue;
    }
    for (unsigned d = 0; d < numRows; ++d)
      if (e.isFunctionOfDim(d))
        return false;
  }
  return true;
}

/// Whether no row of `accesses` (all the group's) touches an element of a
/// buffer the group writes that another row touches, and nothing but its
/// column member touches a column member's output.
bool rowsIndependent(ArrayRef<RowAccess> accesses, unsigned numRows) {
  llvm::DenseMap<Value, Value> written; // root -> the one value reaching it
  llvm::SmallPtrSet<Value, 4> columnOutputs;
  for (const RowAccess &a : accesses)
    if (a.columns) {
      if (!columnOutputs.insert(viewRoot(a.buffer)).second)
        return false; // two column members' outputs
    } else if (a.writes)
      written[viewRoot(a.buffer)] = a.buffer;
  for (const RowAccess &a : accesses) {
    if (columnOutputs.contains(viewRoot(a.buffer))) {
      if (!a.columns)
        return false;
      continue;
    }
    auto it = written.find(viewRoot(a.buffer));
    if (it == written.end())
      continue;
    auto type = cast<MemRefType>(a.buffer.getType());
    if (a.buffer != it->second || !type.getLayout().isIdentity() ||
        !rowLocal(a.map, numRows))
      return false;
  }
  return true;
}

/// Ops that may lie between members: the launch goes where the last member
/// is, so they run before it, which only ops without memory effects (and
/// allocations) allow.
bool mayLieBetween(Operation *op) {
  if (isa<memref::AllocOp>(op))
    return true;
  return op->getNumRegions() == 0 && isMemoryEffectFree(op) &&
         !op->hasTrait<OpTrait::IsTerminator>();
}

/// Whether `op`, between members, may instead run after the group: it has
/// no results (nothing between uses it). It then runs after the members
/// before it, as it did, and after the members that follow it, which must
/// not touch a buffer it writes nor write one it touches (conflictsWithAny).
bool mayMoveAfter(Operation *op) {
  return op->getNumResults() == 0 && !op->hasTrait<OpTrait::IsTerminator>();
}

/// Ops just before a row group's first member that it may run first: the
/// generics before `first` (allocations and pure ops between) over the
/// group's rows or their elements, while every row's accesses stay its own
/// (`accesses`: the members'), up to the earliest one over the elements
/// that writes a buffer a later one reads, which moves 16-byte vectors along
/// the row as the members may; none of them a member of the group before
/// (`previous`). In program order. A layer norm's statistics then read the
/// residual sum that the producer has just written (or, backward, the sum
/// of the q, k and v projections' input gradients) from the cache, not
/// from DRAM.
SmallVector<std::pair<Operation *, Kind>>
producersBefore(Operation *first, const RowGroup &group,
                ArrayRef<RowAccess> accesses, const LaunchShape &shape,
                const RowGroup *previous) {
  constexpr int kMaxLookBack = 4;
  SmallVector<RowAccess> more(accesses);
  SmallVector<std::pair<Operation *, Kind>> prefix; // latest first
  size_t taken = 0;
  llvm::SmallPtrSet<Value, 8> read;
  for (const RowAccess &a : accesses)
    if (!a.writes)
      read.insert(viewRoot(a.buffer));
  Operation *prev = first->getPrevNode();
  for (int k = 0; k < kMaxLookBack; ++k, prev = prev->getPrevNode()) {
    while (prev && mayLieBetween(prev))
      prev = prev->getPrevNode();
    auto op = dyn_cast_or_null<linalg::GenericOp>(prev);
    if (!op || (previous && llvm::is_contained(previous->ops, prev)))
      break;
    SmallVector<RowAccess> next(more);
    Kind kind = classify(op, group.rows, group.reduced, shape, next);
    if ((kind != Kind::OverRows && kind != Kind::OverRowElements) ||
        !rowsIndependent(next, group.rows.size()))
      break;
    bool producer = kind == Kind::OverRowElements &&
                    llvm::any_of(op.getDpsInits(), [&](Value out) {
                      return read.contains(viewRoot(out));
                    });
    unsigned inner = op.getNumLoops() - 1;
    if (kind == Kind::OverRowElements &&
        !planGenericVectors(op, inner, op.getStaticLoopRanges()[inner],
                            /*reduction=*/false))
      break;
    more = std::move(next);
    prefix.push_back({op, kind});
    for (Value in : op.getDpsInputs())
      if (isa<MemRefType>(in.getType()))
        read.insert(viewRoot(in));
    if (producer)
      taken = prefix.size();
  }
  prefix.resize(taken);
  return SmallVector<std::pair<Operation *, Kind>>(llvm::reverse(prefix));
}

} // namespace

bool mlir::ds::gpu_kernels::isColumnMember(linalg::GenericOp op,
                                           unsigned numRows) {
  if (!isParallelReduction(op) || op.getNumLoops() != numRows + 1 ||
      op.getNumReductionLoops() != numRows ||
      op.getIteratorTypesArray().back() != utils::IteratorType::parallel ||
      llvm::any_of(op.getStaticLoopRanges(), ShapedType::isDynamic) ||
      !coalescedAlong(op, numRows))
    return false;
  AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  return out.getNumResults() == 1 &&
         out.getResult(0) == getAffineDimExpr(numRows, op.getContext());
}

int64_t mlir::ds::gpu_kernels::columnSumBytes(linalg::GenericOp op) {
  Type et = getElementTypeOrSelf(op.getDpsInitOperand(0)->get().getType());
  return op.getStaticLoopRanges().back() *
         llvm::divideCeil(et.getIntOrFloatBitWidth(), 8);
}

SmallVector<RowGroup>
mlir::ds::gpu_kernels::findRowGroups(func::FuncOp f, const LaunchShape &shape) {
  SmallVector<RowGroup> groups;
  Block &block = f.getBody().front();
  // Only a step's own arguments come with the ABI's promise.
  bool distinct = f->hasAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName());
  for (auto it = block.begin(); it != block.end(); ++it) {
    auto first = dyn_cast<linalg::GenericOp>(&*it);
    if (!first || !isBlockRowReduction(first, shape))
      continue;
    RowGroup group;
    SmallVector<int64_t> ranges = first.getStaticLoopRanges();
    unsigned numRows = first.getNumParallelLoops();
    group.rows.assign(ranges.begin(), ranges.begin() + numRows);
    group.reduced.assign(ranges.begin() + numRows, ranges.end());
    SmallVector<RowAccess> accesses;
    SmallVector<Kind> kinds;
    classify(first, group.rows, group.reduced, shape, accesses);
    group.ops.push_back(first);
    kinds.push_back(Kind::Reduction);
    // Ops between members that the members do not depend on (a layer
    // norm gradient's column sums between its row statistics and dx) move
    // after the group rather than end it.
    SmallVector<AccessSet> movedAccesses;
    SmallVector<Operation *> moved;
    int64_t columnBytes = 0; // a team's column sums
    auto last = it;
    for (auto next = std::next(it); next != block.end(); ++next) {
      SmallVector<RowAccess> more(accesses);
      Kind kind = classify(&*next, group.rows, group.reduced, shape, more);
      // A column member whose sums would pass the shared memory they may
      // take, or whose output another member touches, is left out of the
      // group's way like any other op.
      if (kind == Kind::Columns &&
          (columnBytes + columnSumBytes(cast<linalg::GenericOp>(*next)) >
               kMaxColumnSumBytes ||
           !rowsIndependent(more, numRows)))
        kind = Kind::None;
      if (kind == Kind::None) {
        if (mayLieBetween(&*next))
          continue;
        if (!mayMoveAfter(&*next))
          break;
        moved.push_back(&*next);
        movedAccesses.emplace_back(&*next);
        continue;
      }
      if (!rowsIndependent(more, numRows) ||
          (!moved.empty() &&
           conflictsWithAny(AccessSet(&*next), movedAccesses, distinct)))
        break;
      if (kind == Kind::Columns)
        columnBytes += columnSumBytes(cast<linalg::GenericOp>(*next));
      accesses = std::move(more);
      group.ops.push_back(&*next);
      kinds.push_back(kind);
      last = next;
    }
    while (kinds.back() == Kind::OverRows) {
      kinds.pop_back();
      group.ops.pop_back();
    }
    SmallVector<std::pair<Operation *, Kind>> producers =
        producersBefore(first, group, accesses, shape,
                        groups.empty() ? nullptr : &groups.back());
    for (auto [op, kind] : llvm::reverse(producers)) {
      group.ops.insert(group.ops.begin(), op);
      kinds.insert(kinds.begin(), kind);
    }
    int64_t passes =
        llvm::count_if(kinds, [](Kind k) { return k != Kind::OverRows; });
    if (passes < 2)
      continue;
    // Trimmed ops stay after the launch, at the last kept member; the ops
    // moved out of the group's way follow it, in order.
    Operation *after = group.ops.back();
    for (Operation *op : moved)
      if (op->isBeforeInBlock(group.ops.back())) {
        op->moveAfter(after);
        after = op;
      }
    last = group.ops.back()->getIterator();
    groups.push_back(std::move(group));
    it = last;
  }
  return groups;
}
