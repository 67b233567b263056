//===- VectorizeCPU.cpp - Tile and vectorise non-GEMM linalg ops ----------===//
//
// Implements ds-vectorize-cpu. On tensors, before bufferization, every
// linalg op other than the library GEMMs is tiled so that one tile is
// 1 x ... x 1 x V along the innermost loop (the contiguous dimension of the
// ops convert-ds-to-linalg produces) and the tile is vectorised with
// linalg::vectorize. Ops the vectoriser rejects are left alone and become
// scalar loops later, so the pass only ever changes speed, not results.
//
//===----------------------------------------------------------------------===//

#include "ds/Transforms/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/Transforms/LoweringPatterns.h"
#include "mlir/Dialect/Vector/Transforms/VectorRewritePatterns.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::ds {
#define GEN_PASS_DEF_VECTORIZECPUPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// Vector register width assumed for lane counts (AVX-512).
constexpr int64_t kVectorBits = 512;
/// Largest innermost reduction kept whole in one vector.
constexpr int64_t kMaxReductionRow = 1024;

/// The largest divisor of `n` that is at most `limit`.
int64_t largestDivisorAtMost(int64_t n, int64_t limit) {
  for (int64_t d = std::min(n, limit); d > 1; --d)
    if (n % d == 0)
      return d;
  return 1;
}

/// Lanes per vector for `op`: the register width over its widest element.
int64_t laneCount(linalg::LinalgOp op) {
  unsigned bits = 8;
  for (OpOperand &operand : op->getOpOperands()) {
    Type et = getElementTypeOrSelf(operand.get().getType());
    if (!et.isIntOrIndexOrFloat())
      return 0;
    bits = std::max(bits, et.isIndex() ? 64u : et.getIntOrFloatBitWidth());
  }
  return std::min<int64_t>(16, kVectorBits / bits);
}

/// Whether a `tensor.extract` in `op`'s body reads at an index computed
/// from another one's result: a chain of dependent gathers (the top-k
/// encoder's descent through its count pyramid). The vectoriser would make
/// them gathers anyway, and its classification of their indices walks
/// every path through the chain, which grows exponentially with its length.
bool hasDependentGathers(linalg::LinalgOp op) {
  bool found = false;
  op->walk([&](tensor::ExtractOp extract) {
    SetVector<Operation *> slice;
    BackwardSliceOptions options;
    options.omitBlockArguments = true;
    for (Value index : extract.getIndices())
      (void)getBackwardSlice(index, &slice, options);
    found |= llvm::any_of(slice, llvm::IsaPred<tensor::ExtractOp>);
    return found ? WalkResult::interrupt() : WalkResult::advance();
  });
  return found;
}

/// Tile sizes for `op` (0 = untiled), or nothing if it is not a candidate.
std::optional<SmallVector<int64_t>> chooseTileSizes(linalg::LinalgOp op) {
  if (isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op) ||
      !op.hasPureTensorSemantics() || op.getNumLoops() == 0 ||
      op.hasDynamicShape())
    return std::nullopt;
  for (AffineMap map : op.getIndexingMapsArray())
    if (!map.isProjectedPermutation(/*allowZeroInResults=*/true))
      return std::nullopt;
  // i1 tensors stay scalar: LLVM stores a vector of i1 bit-packed while
  // scalar accesses to the same buffer are a byte per element, so a mask
  // written by a vector and read by a broadcasting loop (or the reverse)
  // would read the wrong bits.
  if (llvm::any_of(op->getOperandTypes(),
                   [](Type t) { return getElementTypeOrSelf(t).isInteger(1); }))
    return std::nullopt;
  int64_t lanes = laneCount(op);
  if (lanes == 0 || hasDependentGathers(op))
    return std::nullopt;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (llvm::any_of(ranges, [](int64_t r) { return r <= 0; }))
    return std::nullopt;
  // The vectoriser's own checks, on the untiled op (static shapes).
  if (failed(linalg::vectorizeOpPrecondition(op, {}, {},
                                             /*vectorizeNDExtract=*/true)))
    return std::nullopt;
  unsigned last = ranges.size() - 1;
  SmallVector<int64_t> tiles(ranges.size(), 1);
  int64_t inner = ranges[last];
  if (linalg::isReductionIterator(op.getIteratorTypesArray()[last]) &&
      inner <= kMaxReductionRow)
    tiles[last] = inner;
  else
    tiles[last] = largestDivisorAtMost(inner, lanes);
  // A tile as large as the dimension means no loop.
  for (auto [tile, range] : llvm::zip(tiles, ranges))
    if (tile == range)
      tile = 0;
  return tiles;
}

} // namespace

LogicalResult mlir::ds::vectorizeLinalgOpForCPU(RewriterBase &rewriter,
                                                linalg::LinalgOp op) {
  std::optional<SmallVector<int64_t>> tiles = chooseTileSizes(op);
  if (!tiles)
    return rewriter.notifyMatchFailure(op, "not a vectorisation candidate");
  Operation *target = op;
  if (llvm::any_of(*tiles, [](int64_t t) { return t != 0; })) {
    scf::SCFTilingOptions options;
    options.setLoopType(scf::SCFTilingOptions::LoopType::ForOp);
    options.setTileSizes(getAsIndexOpFoldResult(op->getContext(), *tiles));
    rewriter.setInsertionPoint(op);
    FailureOr<scf::SCFTilingResult> tiled = scf::tileUsingSCF(
        rewriter, cast<TilingInterface>(op.getOperation()), options);
    if (failed(tiled))
      return rewriter.notifyMatchFailure(op, "tiling failed");
    rewriter.replaceOp(op, tiled->replacements);
    target = tiled->tiledOps.back();
  }
  rewriter.setInsertionPoint(target);
  FailureOr<linalg::VectorizationResult> vectorized =
      linalg::vectorize(rewriter, target, {}, {}, /*vectorizeNDExtract=*/true);
  // The tiled op stays a (correct) linalg op when this fails.
  if (failed(vectorized))
    return failure();
  rewriter.replaceOp(target, vectorized->replacements);
  return success();
}

namespace {
struct VectorizeCPUPass
    : public mlir::ds::impl::VectorizeCPUPassBase<VectorizeCPUPass> {
  void runOnOperation() override {
    SmallVector<linalg::LinalgOp> candidates;
    getOperation()->walk([&](linalg::LinalgOp op) {
      if (chooseTileSizes(op))
        candidates.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : candidates)
      (void)vectorizeLinalgOpForCPU(rewriter, op);

    // Unit dimensions off the vectors, reads and writes straight from the
    // tensors the slices were taken of.
    RewritePatternSet patterns(&getContext());
    vector::populateCastAwayVectorLeadingOneDimPatterns(patterns);
    vector::populateVectorTransferDropUnitDimsPatterns(patterns);
    tensor::populateFoldTensorSubsetIntoVectorTransferPatterns(patterns);
    vector::TransferReadOp::getCanonicalizationPatterns(patterns,
                                                        &getContext());
    vector::TransferWriteOp::getCanonicalizationPatterns(patterns,
                                                         &getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
