//===- Sparse.cpp - Lower the block-sparsity ops to dense linalg ----------===//
//
// The reference lowering of ds.block_sparse_matmul, ds.block_sampled_matmul
// and ds.top_k_mask: dense computations any element type can take, used for
// f64 (gradient checks against PyTorch), narrow floats, and f32 when the
// runtime's kernels are not wanted. The fast path is convert-ds-to-runtime:
// with `runtime-kernels`, convert-ds-to-linalg leaves the f32 products and
// the top-k to it, and it makes them calls into the runtime's 8x8 block
// kernels right before bufferization.
//
//   block_sparse_matmul   select(mask, W, 0) then ds.matmul
//   block_sampled_matmul  ds.matmul (lhs^T rhs) then select(mask, ., 0)
//   top_k_mask            a radix select of the k-th largest (score,
//                         index) key, then key >= it (TopKMask.cpp)
//
// The mask is a select, not a product: what a weight holds on an inactive
// block (even NaN) never reaches the result.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::lowering;

namespace {

/// `value` (2-D) where the block of each element is active in `mask`, 0
/// elsewhere.
Value applyBlockMask(OpBuilder &b, Location loc, Value value, Value mask,
                     int64_t block) {
  auto type = cast<RankedTensorType>(value.getType());
  MLIRContext *ctx = b.getContext();
  AffineMap id = AffineMap::getMultiDimIdentityMap(2, ctx);
  return buildParallel(
      b, loc, type, ValueRange{value}, {id},
      [&](OpBuilder &nb, Location nloc, ValueRange args) -> Value {
        Value bs = createIndex(nb, nloc, block);
        Value i = arith::DivUIOp::create(
            nb, nloc, linalg::IndexOp::create(nb, nloc, 0), bs);
        Value j = arith::DivUIOp::create(
            nb, nloc, linalg::IndexOp::create(nb, nloc, 1), bs);
        Value m = tensor::ExtractOp::create(nb, nloc, mask, ValueRange{i, j});
        Value active = arith::CmpIOp::create(
            nb, nloc, arith::CmpIPredicate::ne, m,
            arith::ConstantOp::create(nb, nloc, nb.getI8IntegerAttr(0)));
        Value zero = createScalar(nb, nloc, type.getElementType(), 0.0);
        return arith::SelectOp::create(nb, nloc, active, args[0], zero);
      });
}

/// `value` with all leading dimensions collapsed: `[..., X] -> [M, X]`.
Value flattenRows(OpBuilder &b, Location loc, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  int64_t last = type.getShape().back();
  return reshapeTo(b, loc, value, {type.getNumElements() / last, last});
}

struct BlockSparseMatMulLowering : OpConversionPattern<BlockSparseMatMulOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(BlockSparseMatMulOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value w = applyBlockMask(rewriter, loc, adaptor.getWeight(),
                             adaptor.getMask(), op.getBlock());
    // ds.matmul is lowered in turn by the conversion.
    Value y = MatMulOp::create(rewriter, loc, adaptor.getInput(), w,
                               /*transposeLhs=*/false, op.getTransposeWeight());
    rewriter.replaceOp(op, y);
    return success();
  }
};

struct BlockSampledMatMulLowering : OpConversionPattern<BlockSampledMatMulOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(BlockSampledMatMulOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value lhs = flattenRows(rewriter, loc, adaptor.getLhs());
    Value rhs = flattenRows(rewriter, loc, adaptor.getRhs());
    Value dense = MatMulOp::create(rewriter, loc, lhs, rhs,
                                   /*transposeLhs=*/true,
                                   /*transposeRhs=*/false);
    rewriter.replaceOp(op, applyBlockMask(rewriter, loc, dense,
                                          adaptor.getMask(), op.getBlock()));
    return success();
  }
};

struct TopKMaskLowering : OpConversionPattern<TopKMaskOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(TopKMaskOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(adaptor.getScores().getType());
    Value scores =
        reshapeTo(rewriter, loc, adaptor.getScores(), {type.getNumElements()});
    Value mask = buildTopKMask(rewriter, loc, scores, adaptor.getK());
    rewriter.replaceOp(op, reshapeTo(rewriter, loc, mask, type.getShape()));
    return success();
  }
};

} // namespace

void mlir::ds::lowering::populateSparsePatterns(RewritePatternSet &patterns) {
  patterns.add<BlockSparseMatMulLowering, BlockSampledMatMulLowering,
               TopKMaskLowering>(patterns.getContext());
}
