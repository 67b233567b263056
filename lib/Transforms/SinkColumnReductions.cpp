//===- SinkColumnReductions.cpp - Column sums after the row-wise op -------===//
//
// Implements ds-sink-column-reductions (see Passes.td): a column sum moves
// past the row-wise op after it that reads the same tensor, so that the op
// gets a buffer of its own at bufferization and can join its rows'
// statistics in one row group on the GPU.
//
//===----------------------------------------------------------------------===//

#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace mlir::ds {
#define GEN_PASS_DEF_SINKCOLUMNREDUCTIONSPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;

namespace {

/// Ops after a column sum searched for the row-wise op: a layer norm's
/// input gradient follows its weight and bias gradients within a few.
constexpr int kSearchWindow = 32;

/// A generic on tensors that reduces every loop but the innermost.
bool isColumnReduction(linalg::GenericOp op) {
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  return op.hasPureTensorSemantics() && iterators.size() >= 2 &&
         iterators.back() == utils::IteratorType::parallel &&
         llvm::all_of(ArrayRef(iterators).drop_back(), [](auto it) {
           return it == utils::IteratorType::reduction;
         });
}

/// Whether `op` is a row-wise op the column sum `red` may move past: an
/// all-parallel generic on tensors over `red`'s loops, every output
/// through the identity, that reads one of `red`'s tensors through the
/// same map and a value per row.
bool isRowWiseReader(linalg::GenericOp op, linalg::GenericOp red) {
  unsigned n = op.getNumLoops();
  if (!op.hasPureTensorSemantics() || op.getNumParallelLoops() != n ||
      op.getStaticLoopRanges() != red.getStaticLoopRanges() ||
      llvm::any_of(op.getDpsInitsMutable(), [&](OpOperand &init) {
        return !op.getMatchingIndexingMap(&init).isIdentity();
      }))
    return false;
  bool shared = false, perRow = false;
  for (OpOperand *in : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(in);
    perRow |= map.getNumResults() > 0 && !map.isFunctionOfDim(n - 1) &&
              llvm::any_of(llvm::seq<unsigned>(0, n - 1),
                           [&](unsigned d) { return map.isFunctionOfDim(d); });
    for (OpOperand *mine : red.getDpsInputOperands())
      shared |=
          mine->get() == in->get() && red.getMatchingIndexingMap(mine) == map;
  }
  return shared && perRow;
}

/// Whether `op`, or an op nested in it, uses a result of `def`.
bool uses(Operation *op, Operation *def) {
  return op
      ->walk([&](Operation *inner) {
        return llvm::any_of(inner->getOperands(),
                            [&](Value v) { return v.getDefiningOp() == def; })
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

/// The row-wise op `red` moves past, or null: the first generic within
/// the window that isRowWiseReader, where no op up to it uses `red`.
linalg::GenericOp rowWiseReaderAfter(linalg::GenericOp red) {
  Operation *op = red->getNextNode();
  for (int seen = 0; op && seen < kSearchWindow;
       op = op->getNextNode(), ++seen) {
    if (uses(op, red))
      return {};
    if (auto generic = dyn_cast<linalg::GenericOp>(op);
        generic && isRowWiseReader(generic, red))
      return generic;
  }
  return {};
}

struct SinkColumnReductionsPass
    : public mlir::ds::impl::SinkColumnReductionsPassBase<
          SinkColumnReductionsPass> {
  void runOnOperation() override {
    SmallVector<std::pair<linalg::GenericOp, linalg::GenericOp>> moves;
    getOperation()->walk([&](linalg::GenericOp op) {
      if (!isColumnReduction(op))
        return;
      if (linalg::GenericOp reader = rowWiseReaderAfter(op))
        moves.push_back({op, reader});
    });
    // Each after the reader and the ones moved there before it, in order.
    llvm::DenseMap<Operation *, Operation *> lastAfter;
    for (auto [red, reader] : moves) {
      Operation *&last = lastAfter[reader];
      red->moveAfter(last ? last : reader.getOperation());
      last = red;
    }
  }
};

} // namespace
