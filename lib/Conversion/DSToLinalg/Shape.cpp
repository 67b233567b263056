//===- Shape.cpp - Lower ds shape ops to tensor and linalg ops ------------===//
//
// Shape ops move no arithmetic, so they map onto the tensor dialect, whose
// ops bufferize to views where possible: reshape to collapse/expand_shape
// (through a 1-D collapse when no direct reassociation exists), slice and
// insert_slice to their strided tensor counterparts, concat to a chain of
// insert_slices into a `tensor.empty` (which bufferizes in place), and
// transpose to `linalg.transpose`.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::lowering;

namespace {

SmallVector<OpFoldResult> asFoldResults(OpBuilder &b, ArrayRef<int64_t> v) {
  return getAsIndexOpFoldResult(b.getContext(), v);
}

struct ReshapeLowering : OpConversionPattern<ReshapeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ReshapeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, reshapeTo(rewriter, op.getLoc(), adaptor.getInput(),
                                     op.getType().getShape()));
    return success();
  }
};

struct TransposeLowering : OpConversionPattern<TransposeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(TransposeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op.getType());
    ArrayRef<int64_t> perm = op.getPermutation();
    if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size()))) {
      rewriter.replaceOp(op, adaptor.getInput());
      return success();
    }
    Value init = createEmpty(rewriter, op.getLoc(), type.getShape(),
                             type.getElementType());
    auto t = linalg::TransposeOp::create(rewriter, op.getLoc(),
                                         adaptor.getInput(), init, perm);
    rewriter.replaceOp(op, t.getResult());
    return success();
  }
};

struct SliceLowering : OpConversionPattern<SliceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(SliceOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    Value r = tensor::ExtractSliceOp::create(
        rewriter, op.getLoc(), type, adaptor.getInput(),
        asFoldResults(rewriter, op.getOffsets()),
        asFoldResults(rewriter, type.getShape()),
        asFoldResults(rewriter, op.getStridesOrOnes()));
    rewriter.replaceOp(op, r);
    return success();
  }
};

struct InsertSliceLowering : OpConversionPattern<InsertSliceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(InsertSliceOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value r = tensor::InsertSliceOp::create(
        rewriter, op.getLoc(), adaptor.getSource(), adaptor.getDest(),
        asFoldResults(rewriter, op.getOffsets()),
        asFoldResults(rewriter, op.getSource().getType().getShape()),
        asFoldResults(rewriter, op.getStridesOrOnes()));
    rewriter.replaceOp(op, r);
    return success();
  }
};

struct ConcatLowering : OpConversionPattern<ConcatOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ConcatOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getType());
    ValueRange inputs = adaptor.getInputs();
    if (inputs.size() == 1) {
      rewriter.replaceOp(op, inputs.front());
      return success();
    }
    int64_t axis = op.getAxis();
    int64_t rank = type.getRank();
    Value acc =
        createEmpty(rewriter, loc, type.getShape(), type.getElementType());
    int64_t offset = 0;
    for (Value input : inputs) {
      ArrayRef<int64_t> shape =
          cast<RankedTensorType>(input.getType()).getShape();
      SmallVector<int64_t> offsets(rank, 0), strides(rank, 1);
      offsets[axis] = offset;
      offset += shape[axis];
      if (shape[axis] == 0)
        continue;
      acc = tensor::InsertSliceOp::create(
          rewriter, loc, input, acc, asFoldResults(rewriter, offsets),
          asFoldResults(rewriter, shape), asFoldResults(rewriter, strides));
    }
    rewriter.replaceOp(op, acc);
    return success();
  }
};

} // namespace

void lowering::populateShapePatterns(RewritePatternSet &patterns) {
  patterns.add<ReshapeLowering, TransposeLowering, SliceLowering,
               InsertSliceLowering, ConcatLowering>(patterns.getContext());
}
