//===- UnreadRowTails.cpp - Entries no one reads above a block diagonal ---===//
//
// Implements UnreadRowTails.h.
//
//===----------------------------------------------------------------------===//

#include "UnreadRowTails.h"
#include "KernelUtils.h"
#include "MaskedReads.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <algorithm>

using namespace mlir;

namespace mlir::ds::gpu_kernels {

int64_t rowTailStart(int64_t row, int64_t block, int64_t cols) {
  return std::min(cols, (row / block + 1) * block);
}

Value emitRowTailStart(OpBuilder &b, Location loc, Value row, int64_t block,
                       int64_t cols) {
  Value blockSize = indexConstant(b, loc, block);
  Value blocks = arith::AddIOp::create(
      b, loc, arith::DivUIOp::create(b, loc, row, blockSize),
      indexConstant(b, loc, 1));
  return arith::MinUIOp::create(
      b, loc, arith::MulIOp::create(b, loc, blocks, blockSize),
      indexConstant(b, loc, cols));
}

double rowHeadsFraction(int64_t rows, int64_t cols, int64_t block) {
  double heads = 0;
  for (int64_t i = 0; i < rows; ++i)
    heads += static_cast<double>(rowTailStart(i, block, cols));
  return heads / (static_cast<double>(rows) * static_cast<double>(cols));
}

namespace {

/// Where a view lies in the buffer's matrix, as far as a GEMM's read of it
/// matters: its first row, and its columns [col, col + width).
struct Window {
  int64_t row = 0, col = 0, width = 0;
};

/// Everything that touches one buffer, if the kinds are all known.
class BufferUses {
public:
  BufferUses(int64_t rows, int64_t cols) : rows(rows), cols(cols) {}

  /// Takes every use of `view` (covering `window`; `whole`: the whole
  /// matrix, not a subview); false at a use it does not know.
  bool take(Value view, Window window, bool whole) {
    for (OpOperand &use : view.getUses())
      if (!takeUse(use, window, whole))
        return false;
    return true;
  }

  /// The block whose row tails nothing reads (none: the readers reach
  /// every tail).
  std::optional<int64_t> unreadBlock() const {
    int64_t block = 1;
    for (auto [firstRow, endCol] : gemmReads)
      if (firstRow == 0)
        block = std::max(block, endCol);
    if (block >= cols)
      return std::nullopt;
    for (auto [firstRow, endCol] : gemmReads)
      if (endCol > rowTailStart(firstRow, block, cols))
        return std::nullopt;
    auto tailStart = [&](int64_t i) { return rowTailStart(i, block, cols); };
    for (const auto &[input, mask] : maskedReads) {
      linalg::GenericOp op = mask.op;
      AffineMap map = op.getMatchingIndexingMap(input);
      unsigned rank = map.getNumResults();
      auto row = dyn_cast<AffineDimExpr>(map.getResult(rank - 2));
      auto col = dyn_cast<AffineDimExpr>(map.getResult(rank - 1));
      if (!row || !col ||
          !unusedOnRowTails(mask, row.getPosition(), col.getPosition(), rows,
                            cols, tailStart))
        return std::nullopt;
    }
    return block;
  }

  /// The generics that write the buffer, with the output they write it as.
  ArrayRef<std::pair<linalg::GenericOp, unsigned>> writers() const {
    return writes;
  }

private:
  bool takeUse(OpOperand &use, Window window, bool whole) {
    Operation *user = use.getOwner();
    if (isa<memref::DeallocOp>(user))
      return true;
    if (auto fill = dyn_cast<linalg::FillOp>(user))
      return fill.isDpsInit(&use);
    if (isa<memref::CastOp>(user))
      return take(user->getResult(0), window, whole);
    if (isa<memref::ExpandShapeOp, memref::CollapseShapeOp>(user))
      return keepsMatrix(user) && take(user->getResult(0), window, whole);
    if (auto subview = dyn_cast<memref::SubViewOp>(user))
      return takeSubview(subview, window);
    if (auto call = dyn_cast<func::CallOp>(user)) {
      // Read or written whole, as far as this analysis knows.
      if (!call.getCallee().starts_with("dsrt_cuda_matmul"))
        return false;
      gemmReads.push_back({window.row, window.col + window.width});
      return true;
    }
    auto generic = dyn_cast<linalg::GenericOp>(user);
    if (!generic || !whole)
      return false;
    if (generic.isDpsInit(&use)) {
      if (!generic.getMatchingBlockArgument(&use).use_empty())
        return false; // read as it is written
      writes.push_back(
          {generic, use.getOperandNumber() - generic.getNumDpsInputs()});
      return true;
    }
    if (generic.getMatchingBlockArgument(&use).use_empty())
      return true;
    std::optional<ReadMask> mask = readMask(generic, &use);
    if (!mask)
      return false;
    maskedReads.push_back({&use, std::move(*mask)});
    return true;
  }

  /// Whether a reshape keeps the matrix: its last two dimensions each a
  /// group of their own.
  static bool keepsMatrix(Operation *reshape) {
    SmallVector<ReassociationIndices> groups;
    if (auto e = dyn_cast<memref::ExpandShapeOp>(reshape))
      groups = e.getReassociationIndices();
    else
      groups = cast<memref::CollapseShapeOp>(reshape).getReassociationIndices();
    return groups.size() >= 2 && groups.back().size() == 1 &&
           groups[groups.size() - 2].size() == 1;
  }

  /// A static, unit-stride, rank-keeping subview: its window in the matrix.
  bool takeSubview(memref::SubViewOp subview, Window window) {
    ArrayRef<int64_t> offsets = subview.getStaticOffsets();
    ArrayRef<int64_t> sizes = subview.getStaticSizes();
    ArrayRef<int64_t> strides = subview.getStaticStrides();
    size_t rank = offsets.size();
    if (subview.getType().getRank() != static_cast<int64_t>(rank) ||
        llvm::any_of(offsets, ShapedType::isDynamic) ||
        llvm::any_of(sizes, ShapedType::isDynamic) || strides[rank - 2] != 1 ||
        strides[rank - 1] != 1)
      return false;
    Window inner{window.row + offsets[rank - 2], window.col + offsets[rank - 1],
                 sizes[rank - 1]};
    return take(subview.getResult(), inner, /*whole=*/false);
  }

  int64_t rows, cols;
  SmallVector<std::pair<int64_t, int64_t>> gemmReads; // first row, end column
  SmallVector<std::pair<OpOperand *, ReadMask>> maskedReads;
  SmallVector<std::pair<linalg::GenericOp, unsigned>> writes;
};

} // namespace

void markUnreadRowTails(func::FuncOp f) {
  f.walk([&](memref::AllocOp alloc) {
    MemRefType type = alloc.getType();
    if (type.getRank() < 2 || !type.hasStaticShape() ||
        !type.getLayout().isIdentity())
      return;
    int64_t rows = type.getDimSize(type.getRank() - 2);
    int64_t cols = type.getDimSize(type.getRank() - 1);
    if (rows == 0 || cols == 0)
      return; // nothing to store, and no fraction of it
    BufferUses uses(rows, cols);
    if (!uses.take(alloc.getResult(), Window{0, 0, cols},
                   /*whole=*/true))
      return;
    std::optional<int64_t> block = uses.unreadBlock();
    if (!block)
      return;
    Builder b(f.getContext());
    for (auto [generic, output] : uses.writers()) {
      SmallVector<int64_t> blocks(generic.getNumDpsInits(), 0);
      if (auto old =
              generic->getAttrOfType<DenseI64ArrayAttr>(kUnreadRowTailsAttr))
        blocks.assign(old.asArrayRef().begin(), old.asArrayRef().end());
      blocks[output] = *block;
      generic->setAttr(kUnreadRowTailsAttr, b.getDenseI64ArrayAttr(blocks));
    }
  });
}

std::optional<int64_t> unreadRowTailsBlock(linalg::GenericOp op,
                                           OpOperand &init) {
  auto blocks = op->getAttrOfType<DenseI64ArrayAttr>(kUnreadRowTailsAttr);
  if (!blocks || !op.isDpsInit(&init))
    return std::nullopt;
  int64_t block = blocks[init.getOperandNumber() - op.getNumDpsInputs()];
  if (block <= 0)
    return std::nullopt;
  return block;
}

} // namespace mlir::ds::gpu_kernels
