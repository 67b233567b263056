//===- MatMul.cpp - Lower ds.matmul to linalg.matmul / batch_matmul -------===//
//
// ds.matmul becomes a named contraction into a `linalg.fill`-zeroed
// `tensor.empty`, because a later pass recognises exactly that shape after
// bufferization and calls a library GEMM. Transposes and the shared
// right-hand side are expressed through the ops' `indexing_maps`, never
// through materialised transposes or broadcasts:
//
//   rank 2 x rank 2           linalg.matmul
//   [b.., M, K] x [K, N]      collapse lhs to [B*M, K], one linalg.matmul
//                             (a bigger GEMM), expand the result
//   [b.., K, M]^T x [K, N]    collapse batches, linalg.batch_matmul with a
//                             batch-free rhs map (a shared rhs that is also
//                             transposed is transposed first: batch_matmul
//                             only broadcasts an untransposed rhs)
//   [b.., M, K] x [b.., K, N] collapse batches, linalg.batch_matmul
//
// The contraction accumulates in the wider of the operand and result
// element types, and in at least f32 (linalg promotes the operands); a
// narrower result is rounded once afterwards. Narrow operands (bf16, f16,
// FP8) are extended to f32 by an elementwise op first: the GEMM is then an
// f32 one that convert-linalg-to-ds-runtime hands to the library (oneDNN's
// own BF16 GEMM runs at half its f32 speed on these CPUs, and it has no
// FP8), and the extension fuses with the cast that rounded the operand.
// With narrow-gemms (the GPU path) bf16 and f16 operands stay as they are,
// for cuBLASLt's BF16/F16 GEMMs with f32 accumulation; with fp8-gemms (sm_89
// and newer) so do E4M3 operands of the GEMMs cuBLASLt's FP8 path takes.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "ds/Conversion/DSToLinalg.h"
#include "ds/Dialect/DS/IR/CausalGemm.h"
#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::lowering;

namespace {

/// Collapses all leading (batch) dimensions of `value` into one, keeping
/// the two innermost: `[b0, b1, .., X, Y] -> [B, X, Y]`.
Value collapseBatch(OpBuilder &b, Location loc, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  ArrayRef<int64_t> shape = type.getShape();
  int64_t rank = shape.size();
  if (rank == 3)
    return value;
  int64_t batch = 1;
  for (int64_t s : shape.drop_back(2))
    batch *= s;
  return reshapeTo(b, loc, value, {batch, shape[rank - 2], shape[rank - 1]});
}

/// The maps of a matmul-like contraction over loops `(batch.., m, n, k)`.
/// `batched` adds a leading batch loop; `rhsShared` drops it from rhs.
SmallVector<AffineMap> contractionMaps(MLIRContext *ctx, bool batched,
                                       bool transposeLhs, bool transposeRhs,
                                       bool rhsShared) {
  unsigned n = batched ? 4 : 3;
  unsigned base = batched ? 1 : 0;
  AffineExpr bd = getAffineDimExpr(0, ctx);
  AffineExpr m = getAffineDimExpr(base, ctx),
             nn = getAffineDimExpr(base + 1, ctx),
             k = getAffineDimExpr(base + 2, ctx);
  auto make = [&](bool withBatch, AffineExpr x, AffineExpr y) {
    SmallVector<AffineExpr> e;
    if (withBatch)
      e.push_back(bd);
    e.push_back(x);
    e.push_back(y);
    return AffineMap::get(n, 0, e, ctx);
  };
  AffineMap lhs = transposeLhs ? make(batched, k, m) : make(batched, m, k);
  AffineMap rhs = transposeRhs ? make(batched && !rhsShared, nn, k)
                               : make(batched && !rhsShared, k, nn);
  AffineMap out = make(batched, m, nn);
  return {lhs, rhs, out};
}

struct MatMulLowering : OpConversionPattern<MatMulOp> {
  MatMulLowering(MLIRContext *ctx, bool narrowGemms, bool fp8Gemms)
      : OpConversionPattern(ctx), narrowGemms(narrowGemms), fp8Gemms(fp8Gemms) {
  }
  /// Keep bf16/f16 operands (a mixed-type linalg contraction that
  /// accumulates in f32): the GPU path's cuBLASLt GEMMs take them as they
  /// are, at twice the speed and half the traffic of f32.
  bool narrowGemms;
  /// Keep E4M3 operands where cuBLASLt's FP8 GEMM takes them as they are:
  /// its FP8 kernels need the "TN" layout (X * W^T in row-major terms) and
  /// M, N, K multiples of 16. The rest (the backward's dY * W, dY^T * X)
  /// is extended to f32.
  bool fp8Gemms;

  /// Whether cuBLASLt's FP8 path takes this matmul (fp8GemmObstacle);
  /// matchAndRewrite then transposes its operands into that path's one
  /// layout, X * W^T, as Transformer Engine does for the backward's GEMMs.
  bool takesFp8(RankedTensorType lhs, RankedTensorType rhs, bool tl,
                bool tr) const {
    return fp8Gemms &&
           isa<Float8E4M3FNType, Float8E5M2Type>(lhs.getElementType()) &&
           isa<Float8E4M3FNType, Float8E5M2Type>(rhs.getElementType()) &&
           fp8GemmObstacle(lhs, rhs, tl, tr).empty();
  }
  LogicalResult
  matchAndRewrite(MatMulOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    RankedTensorType resultType = op.getType();
    Value lhs = adaptor.getLhs(), rhs = adaptor.getRhs();
    auto lhsType = cast<RankedTensorType>(lhs.getType());
    auto rhsType = cast<RankedTensorType>(rhs.getType());
    auto inElem = dyn_cast<FloatType>(lhsType.getElementType());
    auto outElem = dyn_cast<FloatType>(resultType.getElementType());
    if (!inElem || !outElem)
      return rewriter.notifyMatchFailure(op, "expects float operands");
    bool tl = op.getTransposeLhs(), tr = op.getTransposeRhs();
    // In terms of the logical product, so any layout below keeps it.
    std::optional<CausalGemm> causal = getCausalGemm(op);
    int64_t lhsRank = lhsType.getRank(), rhsRank = rhsType.getRank();
    if (lhsRank < 2 || rhsRank < 2 || (rhsRank != 2 && rhsRank != lhsRank))
      return rewriter.notifyMatchFailure(op, "unsupported operand ranks");

    // Accumulate in the wider of the two element types, and in at least
    // f32: narrow operands (bf16, f16, FP8) are extended to f32 up front
    // (exact, and fused with the cast that produced them), so the product
    // is an f32 GEMM for the library and rounds once into a narrow result.
    FloatType acc = inElem.getWidth() > outElem.getWidth() ? inElem : outElem;
    if (acc.getWidth() < 32)
      acc = rewriter.getF32Type();
    bool sameType = lhsType.getElementType() == rhsType.getElementType();
    bool fp8 = acc.isF32() && takesFp8(lhsType, rhsType, tl, tr);
    bool keepNarrow = fp8 || (acc.isF32() && sameType && narrowGemms &&
                              (inElem.isBF16() || inElem.isF16()));
    if (fp8) {
      // Into X * W^T: a transposed lhs and an untransposed rhs are copied
      // transposed (one byte per element, next to an O(MNK) GEMM).
      auto transpose = [&](Value v) {
        auto t = cast<RankedTensorType>(v.getType());
        Value init =
            createEmpty(rewriter, loc, {t.getDimSize(1), t.getDimSize(0)},
                        t.getElementType());
        return linalg::TransposeOp::create(rewriter, loc, v, init,
                                           ArrayRef<int64_t>{1, 0})
            .getResult()[0];
      };
      if (tl) {
        lhs = transpose(lhs);
        lhsType = cast<RankedTensorType>(lhs.getType());
        tl = false;
      }
      if (!tr) {
        rhs = transpose(rhs);
        rhsType = cast<RankedTensorType>(rhs.getType());
        tr = true;
      }
    }
    if (inElem != acc && inElem.getWidth() < 32 && !keepNarrow) {
      auto extend = [&](Value v) {
        auto type = cast<RankedTensorType>(v.getType());
        return buildElementwise(rewriter, loc, type.clone(acc), {v},
                                [&](OpBuilder &b, Location l, ValueRange args) {
                                  return convertFloat(b, l, args[0], acc);
                                });
      };
      lhs = extend(lhs);
      rhs = extend(rhs);
      lhsType = cast<RankedTensorType>(lhs.getType());
      rhsType = cast<RankedTensorType>(rhs.getType());
    }
    ArrayRef<int64_t> outShape = resultType.getShape();
    int64_t m = outShape[outShape.size() - 2], n = outShape.back();
    int64_t batch = 1;
    for (int64_t s : outShape.drop_back(2))
      batch *= s;

    auto zeroInit = [&](ArrayRef<int64_t> shape) {
      return createZeros(rewriter, loc, shape, acc);
    };
    Value product;
    bool rhsShared = lhsRank > 2 && rhsRank == 2;
    if (lhsRank == 2 || (rhsShared && !tl)) {
      // One 2-D GEMM; a batched lhs is flattened to [B*M, K].
      Value a = lhsRank == 2
                    ? lhs
                    : reshapeTo(rewriter, loc, lhs,
                                {batch * m, lhsType.getShape().back()});
      Value init = zeroInit({batch * m, n});
      auto mm =
          linalg::MatmulOp::create(rewriter, loc, TypeRange{init.getType()},
                                   ValueRange{a, rhs}, ValueRange{init});
      if (tl || tr)
        mm.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(
            contractionMaps(ctx, /*batched=*/false, tl, tr, false)));
      // A flattened lhs mixes the batches into the rows, where the lhs's
      // and the result's triangles no longer line up; the rhs's still do.
      if (causal && lhsRank != 2) {
        causal->lhs = CausalGemm::Operand::Dense;
        causal->resultLower = false;
      }
      if (causal)
        setCausalGemm(mm, *causal);
      product = mm.getResult(0);
    } else {
      // linalg.batch_matmul accepts a batch-free rhs only as [K, N]: a
      // shared rhs that is also transposed is transposed once up front
      // (it is a weight, small next to the activations).
      if (rhsShared && tr) {
        ArrayRef<int64_t> rs = rhsType.getShape();
        Value init = createEmpty(rewriter, loc, {rs[1], rs[0]},
                                 rhsType.getElementType());
        rhs = linalg::TransposeOp::create(rewriter, loc, rhs, init,
                                          ArrayRef<int64_t>{1, 0})
                  .getResult()[0];
        tr = false;
      }
      Value a = collapseBatch(rewriter, loc, lhs);
      Value bm = rhsShared ? rhs : collapseBatch(rewriter, loc, rhs);
      Value init = zeroInit({batch, m, n});
      auto bmm = linalg::BatchMatmulOp::create(
          rewriter, loc, TypeRange{init.getType()}, ValueRange{a, bm},
          ValueRange{init});
      if (tl || tr || rhsShared)
        bmm.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(
            contractionMaps(ctx, /*batched=*/true, tl, tr, rhsShared)));
      if (causal)
        setCausalGemm(bmm, *causal);
      product = bmm.getResult(0);
    }
    product = reshapeTo(rewriter, loc, product, outShape);
    if (acc != outElem) {
      auto accType = cast<RankedTensorType>(product.getType());
      product =
          buildElementwise(rewriter, loc, accType.clone(outElem), {product},
                           [&](OpBuilder &b, Location l, ValueRange args) {
                             return convertFloat(b, l, args[0], outElem);
                           });
    }
    rewriter.replaceOp(op, product);
    return success();
  }
};

} // namespace

std::string mlir::ds::fp8GemmObstacle(RankedTensorType lhs,
                                      RankedTensorType rhs, bool transposeLhs,
                                      bool transposeRhs) {
  if (isa<Float8E5M2Type>(lhs.getElementType()) &&
      isa<Float8E5M2Type>(rhs.getElementType()))
    return "E5M2 x E5M2 (cuBLASLt has no such FP8 kernel)";
  int64_t lr = lhs.getRank(), rr = rhs.getRank();
  if (rr != 2)
    return "a batched rhs (cuBLASLt's FP8 path takes one 2-D weight)";
  if (lr != 2 && transposeLhs)
    return "a batched, transposed lhs";
  int64_t k = transposeLhs ? lhs.getShape()[lr - 2] : lhs.getShape().back();
  int64_t rows = lhs.getNumElements() / std::max<int64_t>(k, 1);
  int64_t n = transposeRhs ? rhs.getShape()[0] : rhs.getShape()[1];
  if (rows % 16 || n % 16 || k % 16)
    return "M = " + std::to_string(rows) + ", N = " + std::to_string(n) +
           ", K = " + std::to_string(k) +
           " (cuBLASLt's FP8 path needs multiples of 16)";
  return "";
}

void lowering::populateMatMulPatterns(RewritePatternSet &patterns,
                                      bool narrowGemms, bool fp8Gemms) {
  patterns.add<MatMulLowering>(patterns.getContext(), narrowGemms, fp8Gemms);
}
