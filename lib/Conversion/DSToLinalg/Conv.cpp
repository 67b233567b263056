//===- Conv.cpp - Lower conv2d and its gradients --------------------------===//
//
// - conv2d: `tensor.pad` with zeros, then the named `linalg.conv_2d_nchw_fchw`
//   (groups = 1) or `linalg.conv_2d_ngchw_gfchw` (operands reshaped to
//   expose the group dimension), accumulating into the bias broadcast over
//   the output (or zeros).
// - conv2d_grad_input: a transposed convolution written as an ordinary one.
//   `grad` is spread with zeros between rows/columns (stride) and padded by
//   `dilation * (K - 1) - padding` on each side (one strided
//   `tensor.insert_slice` into zeros does both; rows that would land in
//   negative padding are dropped, they only ever touched padding), and is
//   convolved at stride 1 with the weight flipped in space and with its
//   channel roles swapped (a `linalg.generic` copy with `K - 1 - k` maps).
//   The convolution itself is lowered as the forward pass's.
// - conv2d_grad_weight: one `linalg.generic` contraction over
//   (g, o, c, kh, kw | n, oh, ow) reading the padded input at
//   `oh * s + kh * d`, grouped channels exposed by reshapes.
//
// With `asGemm` (convert-ds-to-linalg{gemm-convs}, the GPU path), the
// ungrouped f32/bf16/f16 convolutions become GEMMs for the library instead
// of loop nests: the padded input is unfolded into patches (im2col: one row
// per output position, one column per (c, kh, kw)), the forward and the
// input gradient multiply the patches by the weight as `ds.matmul`s
// (lowered like any other, so cuBLASLt runs them), and the weight gradient
// multiplies the output gradient's transpose by the patches. The patches
// cost KH * KW times the input's memory; the GEMMs run at library speed
// where the loop nests ran one thread per output element.
//
// A narrow-float (bf16, f16) convolution left to the loop nests is rebuilt
// on f32 operands and rounded once at the end, as matmuls are: the named
// convolutions would otherwise accumulate in bf16, one rounding per add.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::lowering;

namespace {

/// The element types whose GEMMs the GPU path gives cuBLASLt.
bool gemmElementType(Type t) {
  return isa<Float32Type, BFloat16Type, Float16Type>(t);
}

/// The patches of a padded input `xp` [N, C, Hp, Wp] for a KH x KW window
/// at strides `s` and dilations `d` with `out` (OH, OW) positions:
/// [N * OH * OW, C * KH * KW], row (n, oh, ow), column (c, kh, kw), holding
/// xp[n, c, oh * s0 + kh * d0, ow * s1 + kw * d1].
Value im2col(OpBuilder &b, Location loc, Value xp, ArrayRef<int64_t> window,
             ArrayRef<int64_t> out, ArrayRef<int64_t> s, ArrayRef<int64_t> d) {
  MLIRContext *ctx = b.getContext();
  auto xpType = cast<RankedTensorType>(xp.getType());
  int64_t n = xpType.getDimSize(0), c = xpType.getDimSize(1);
  SmallVector<AffineExpr> e = dimExprs(ctx, 6);
  // Loops (n, oh, ow, c, kh, kw).
  AffineMap read = AffineMap::get(
      6, 0, {e[0], e[3], e[1] * s[0] + e[4] * d[0], e[2] * s[1] + e[5] * d[1]},
      ctx);
  auto patchesType = RankedTensorType::get(
      {n, out[0], out[1], c, window[0], window[1]}, xpType.getElementType());
  Value patches =
      buildParallel(b, loc, patchesType, {xp}, {read},
                    [](OpBuilder &, Location, ValueRange a) { return a[0]; });
  return reshapeTo(b, loc, patches,
                   {n * out[0] * out[1], c * window[0] * window[1]});
}

/// An ungrouped convolution of the padded input `xp` [N, C, Hp, Wp] with
/// `w` [O, C, KH, KW] into `outType` [N, O, OH, OW], plus `bias` [O] when
/// given: patches x W^T as one GEMM, then [N, OH, OW, O] back to NCHW
/// (with the bias, in one pass).
Value convAsGemm(OpBuilder &b, Location loc, Value xp, Value w,
                 ArrayRef<int64_t> s, ArrayRef<int64_t> d,
                 RankedTensorType outType, Value bias) {
  MLIRContext *ctx = b.getContext();
  ArrayRef<int64_t> ws = cast<RankedTensorType>(w.getType()).getShape();
  ArrayRef<int64_t> out = outType.getShape();
  Value patches = im2col(b, loc, xp, ws.drop_front(2), out.drop_front(2), s, d);
  Value w2 = reshapeTo(b, loc, w, {ws[0], ws[1] * ws[2] * ws[3]});
  Value product = MatMulOp::create(b, loc, patches, w2, /*transposeLhs=*/false,
                                   /*transposeRhs=*/true);
  Value rows = reshapeTo(b, loc, product, {out[0], out[2], out[3], out[1]});
  SmallVector<AffineExpr> e = dimExprs(ctx, 4);
  // Loops (n, o, oh, ow).
  SmallVector<Value> inputs = {rows};
  SmallVector<AffineMap> maps = {
      AffineMap::get(4, 0, {e[0], e[2], e[3], e[1]}, ctx)};
  if (bias) {
    inputs.push_back(bias);
    maps.push_back(AffineMap::get(4, 0, {e[1]}, ctx));
  }
  return buildParallel(b, loc, outType, inputs, maps,
                       [&](OpBuilder &nb, Location l, ValueRange a) {
                         return bias ? add(nb, l, a[0], a[1]) : a[0];
                       });
}

/// Checks the three 2-element attributes and the float type of a
/// convolution or its gradient.
template <typename OpTy>
LogicalResult checkConvAttrs(OpTy op, ConversionPatternRewriter &rewriter) {
  if (op.getStrides().size() != 2 || op.getPadding().size() != 2 ||
      op.getDilation().size() != 2)
    return rewriter.notifyMatchFailure(op, "expects 2-element attributes");
  if (!isa<FloatType>(op.getType().getElementType()))
    return rewriter.notifyMatchFailure(op, "expects float tensors");
  return success();
}

/// The three convolution patterns: with `asGemm` they are preferred
/// (benefit 2) and turn the ungrouped f32/bf16/f16 convolutions into
/// im2col + GEMM.
template <typename OpTy> struct ConvLowering : OpConversionPattern<OpTy> {
  ConvLowering(MLIRContext *ctx, bool asGemm)
      : OpConversionPattern<OpTy>(ctx, /*benefit=*/asGemm ? 2 : 1),
        asGemm(asGemm) {
    // widenNarrow recreates the op on f32, which this pattern then lowers.
    this->setHasBoundedRewriteRecursion();
  }
  bool asGemm;

  /// Whether `op` becomes im2col + GEMM.
  bool takesGemm(OpTy op) const {
    return asGemm && op.getGroups() == 1 &&
           gemmElementType(op.getType().getElementType());
  }

  /// A narrow-float (bf16, f16, FP8) convolution left to the loop nests,
  /// which would accumulate in its own type (one rounding per add), is
  /// recreated on f32 operands and its result rounded once, as matmuls
  /// are. Fails when `op` is not narrow.
  LogicalResult widenNarrow(OpTy op, ValueRange operands,
                            ConversionPatternRewriter &rewriter) const {
    RankedTensorType type = op.getType();
    auto elem = dyn_cast<FloatType>(type.getElementType());
    if (!elem || elem.getWidth() >= 32)
      return failure();
    Location loc = op.getLoc();
    Type f32 = rewriter.getF32Type();
    IRMapping wide;
    for (auto [from, to] : llvm::zip(op->getOperands(), operands)) {
      auto t = cast<RankedTensorType>(to.getType());
      wide.map(from,
               t.getElementType() == f32
                   ? to
                   : Value(CastOp::create(rewriter, loc, t.clone(f32), to)));
    }
    Operation *widened = rewriter.clone(*op, wide);
    widened->getResult(0).setType(type.clone(f32));
    rewriter.replaceOpWithNewOp<CastOp>(op, type, widened->getResult(0));
    return success();
  }

  /// Checks the op, widens a narrow one left to the loop nests, and lowers
  /// the rest with `lower`.
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const final {
    if (failed(checkConvAttrs(op, rewriter)))
      return failure();
    if (!takesGemm(op) &&
        succeeded(widenNarrow(op, adaptor.getOperands(), rewriter)))
      return success();
    return lower(op, adaptor, rewriter);
  }

  /// The lowering proper, of a checked op that is f32 or takes the GEMM.
  virtual LogicalResult lower(OpTy op, typename OpTy::Adaptor adaptor,
                              ConversionPatternRewriter &rewriter) const = 0;
};

//===----------------------------------------------------------------------===//
// conv2d
//===----------------------------------------------------------------------===//

struct Conv2DLowering : ConvLowering<Conv2DOp> {
  using ConvLowering::ConvLowering;
  LogicalResult lower(Conv2DOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto outType = cast<RankedTensorType>(op.getType());
    Type elem = outType.getElementType();
    ArrayRef<int64_t> out = outType.getShape();
    auto wType = cast<RankedTensorType>(adaptor.getWeight().getType());
    ArrayRef<int64_t> w = wType.getShape();
    ArrayRef<int64_t> pad = op.getPadding();
    int64_t groups = op.getGroups();

    Value x =
        padWith(rewriter, loc, adaptor.getInput(), {0, 0, pad[0], pad[1]},
                {0, 0, pad[0], pad[1]}, createScalar(rewriter, loc, elem, 0.0));
    if (asGemm && groups == 1 && gemmElementType(elem)) {
      rewriter.replaceOp(op, convAsGemm(rewriter, loc, x, adaptor.getWeight(),
                                        op.getStrides(), op.getDilation(),
                                        outType, adaptor.getBias()));
      return success();
    }
    // The accumulator starts as the bias broadcast over [N, O, OH, OW].
    Value init;
    if (Value bias = adaptor.getBias()) {
      MLIRContext *ctx = rewriter.getContext();
      init = buildParallel(
          rewriter, loc, outType, {bias},
          {AffineMap::get(4, 0, {getAffineDimExpr(1, ctx)}, ctx)},
          [](OpBuilder &, Location, ValueRange a) { return a[0]; });
    } else {
      init = createZeros(rewriter, loc, out, elem);
    }
    DenseIntElementsAttr strides = getPairAttr(rewriter, op.getStrides());
    DenseIntElementsAttr dilations = getPairAttr(rewriter, op.getDilation());
    Value result;
    if (groups == 1) {
      result =
          linalg::Conv2DNchwFchwOp::create(rewriter, loc, TypeRange{outType},
                                           ValueRange{x, adaptor.getWeight()},
                                           ValueRange{init}, strides, dilations)
              .getResult(0);
    } else {
      // [N, C, H, W] -> [N, G, C/G, H, W]; [O, C/G, KH, KW] ->
      // [G, O/G, C/G, KH, KW]; [N, O, OH, OW] -> [N, G, O/G, OH, OW].
      auto xShape = cast<RankedTensorType>(x.getType()).getShape();
      Value xg = reshapeTo(
          rewriter, loc, x,
          {xShape[0], groups, xShape[1] / groups, xShape[2], xShape[3]});
      Value wg = reshapeTo(rewriter, loc, adaptor.getWeight(),
                           {groups, w[0] / groups, w[1], w[2], w[3]});
      Value ig = reshapeTo(rewriter, loc, init,
                           {out[0], groups, out[1] / groups, out[2], out[3]});
      Value rg = linalg::Conv2DNgchwGfchwOp::create(
                     rewriter, loc, TypeRange{ig.getType()}, ValueRange{xg, wg},
                     ValueRange{ig}, strides, dilations)
                     .getResult(0);
      result = reshapeTo(rewriter, loc, rg, out);
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// conv2d_grad_input
//===----------------------------------------------------------------------===//

struct Conv2DGradInputLowering : ConvLowering<Conv2DGradInputOp> {
  using ConvLowering::ConvLowering;
  LogicalResult lower(Conv2DGradInputOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    RankedTensorType dxType = op.getType();
    Type elem = dxType.getElementType();
    ArrayRef<int64_t> dx = dxType.getShape();                 // N C H W
    ArrayRef<int64_t> dy = op.getGrad().getType().getShape(); // N O OH OW
    ArrayRef<int64_t> w = op.getOther().getType().getShape(); // O Cg KH KW
    ArrayRef<int64_t> s = op.getStrides(), p = op.getPadding(),
                      d = op.getDilation();
    int64_t g = op.getGroups();
    int64_t cg = w[1], og = w[0] / g;

    // 1. Spread and pad grad: T[.., padLo + i * s] = dy[.., i] inside
    //    [0, H + d (K - 1)).
    SmallVector<int64_t> tShape = {dy[0], dy[1], 0, 0};
    SmallVector<int64_t> srcOff = {0, 0, 0, 0}, srcSize(dy);
    SmallVector<int64_t> dstOff = {0, 0, 0, 0};
    for (int k = 0; k < 2; ++k) {
      int64_t span = d[k] * (w[2 + k] - 1);
      int64_t full = dx[2 + k] + span;
      int64_t padLo = span - p[k];
      // First and one-past-last rows of dy that land inside [0, full).
      int64_t first = padLo >= 0 ? 0 : (-padLo + s[k] - 1) / s[k];
      int64_t last = std::min(dy[2 + k], (full - 1 - padLo) / s[k] + 1);
      tShape[2 + k] = full;
      srcOff[2 + k] = first;
      srcSize[2 + k] = std::max<int64_t>(0, last - first);
      dstOff[2 + k] = padLo + first * s[k];
    }
    Value t = createZeros(rewriter, loc, tShape, elem);
    if (srcSize[2] > 0 && srcSize[3] > 0) {
      Value src = adaptor.getGrad();
      if (ArrayRef<int64_t>(srcSize) != dy)
        src = tensor::ExtractSliceOp::create(
            rewriter, loc, src, foldResults(rewriter, srcOff),
            foldResults(rewriter, srcSize),
            foldResults(rewriter, {1, 1, 1, 1}));
      t = tensor::InsertSliceOp::create(
          rewriter, loc, src, t, foldResults(rewriter, dstOff),
          foldResults(rewriter, srcSize),
          foldResults(rewriter, {1, 1, s[0], s[1]}));
    }

    // 2. Flipped weight with swapped channels, grouped:
    //    Wt[gi, c, o, kh, kw] = W[gi * Og + o, c, KH-1-kh, KW-1-kw].
    SmallVector<AffineExpr> e = dimExprs(ctx, 5);
    AffineMap flip = AffineMap::get(
        5, 0, {e[0] * og + e[2], e[1], w[2] - 1 - e[3], w[3] - 1 - e[4]}, ctx);
    auto wtType = RankedTensorType::get({g, cg, og, w[2], w[3]}, elem);
    Value wt =
        buildParallel(rewriter, loc, wtType, {adaptor.getOther()}, {flip},
                      [](OpBuilder &, Location, ValueRange a) { return a[0]; });

    // 3. Stride-1 convolution with the forward dilation.
    DenseIntElementsAttr ones = getPairAttr(rewriter, {1, 1});
    DenseIntElementsAttr dil = getPairAttr(rewriter, d);
    Value result;
    if (g == 1 && asGemm && gemmElementType(elem)) {
      Value wt4 = reshapeTo(rewriter, loc, wt, {cg, og, w[2], w[3]});
      result = convAsGemm(rewriter, loc, t, wt4, {1, 1}, d, dxType, Value());
    } else if (g == 1) {
      Value wt4 = reshapeTo(rewriter, loc, wt, {cg, og, w[2], w[3]});
      Value init = createZeros(rewriter, loc, dx, elem);
      result = linalg::Conv2DNchwFchwOp::create(
                   rewriter, loc, TypeRange{dxType}, ValueRange{t, wt4},
                   ValueRange{init}, ones, dil)
                   .getResult(0);
    } else {
      Value tg =
          reshapeTo(rewriter, loc, t, {tShape[0], g, og, tShape[2], tShape[3]});
      Value init =
          createZeros(rewriter, loc, {dx[0], g, cg, dx[2], dx[3]}, elem);
      Value rg = linalg::Conv2DNgchwGfchwOp::create(
                     rewriter, loc, TypeRange{init.getType()},
                     ValueRange{tg, wt}, ValueRange{init}, ones, dil)
                     .getResult(0);
      result = reshapeTo(rewriter, loc, rg, dx);
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// conv2d_grad_weight
//===----------------------------------------------------------------------===//

struct Conv2DGradWeightLowering : ConvLowering<Conv2DGradWeightOp> {
  using ConvLowering::ConvLowering;
  LogicalResult lower(Conv2DGradWeightOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    RankedTensorType dwType = op.getType();
    Type elem = dwType.getElementType();
    ArrayRef<int64_t> dw = dwType.getShape();                 // O Cg KH KW
    ArrayRef<int64_t> dy = op.getGrad().getType().getShape(); // N O OH OW
    ArrayRef<int64_t> x = op.getOther().getType().getShape(); // N C H W
    ArrayRef<int64_t> s = op.getStrides(), p = op.getPadding(),
                      d = op.getDilation();
    int64_t g = op.getGroups();
    int64_t cg = dw[1], og = dw[0] / g;

    Value xp =
        padWith(rewriter, loc, adaptor.getOther(), {0, 0, p[0], p[1]},
                {0, 0, p[0], p[1]}, createScalar(rewriter, loc, elem, 0.0));
    if (g == 1 && asGemm && gemmElementType(elem)) {
      // dW [O, C*KH*KW] = dY^T x patches, dY as [N*OH*OW, O].
      Value patches =
          im2col(rewriter, loc, xp, dw.drop_front(2), dy.drop_front(2), s, d);
      SmallVector<AffineExpr> e = dimExprs(ctx, 4);
      auto rowsType = RankedTensorType::get({dy[0], dy[2], dy[3], dy[1]}, elem);
      Value rows = buildParallel(
          rewriter, loc, rowsType, {adaptor.getGrad()},
          {AffineMap::get(4, 0, {e[0], e[3], e[1], e[2]}, ctx)},
          [](OpBuilder &, Location, ValueRange a) { return a[0]; });
      rows = reshapeTo(rewriter, loc, rows, {dy[0] * dy[2] * dy[3], dy[1]});
      Value product = MatMulOp::create(rewriter, loc, rows, patches,
                                       /*transposeLhs=*/true,
                                       /*transposeRhs=*/false);
      rewriter.replaceOp(op, reshapeTo(rewriter, loc, product, dw));
      return success();
    }
    auto xpShape = cast<RankedTensorType>(xp.getType()).getShape();
    Value xg =
        reshapeTo(rewriter, loc, xp, {x[0], g, cg, xpShape[2], xpShape[3]});
    Value dyg = reshapeTo(rewriter, loc, adaptor.getGrad(),
                          {dy[0], g, og, dy[2], dy[3]});

    // Loops (gi, o, c, kh, kw, n, oh, ow); the last three reduce.
    SmallVector<AffineExpr> e = dimExprs(ctx, 8);
    AffineMap dyMap = AffineMap::get(8, 0, {e[5], e[0], e[1], e[6], e[7]}, ctx);
    AffineMap xMap =
        AffineMap::get(8, 0,
                       {e[5], e[0], e[2], e[6] * s[0] + e[3] * d[0],
                        e[7] * s[1] + e[4] * d[1]},
                       ctx);
    SmallVector<int64_t> loops = {g, og, cg, dw[2], dw[3], dy[0], dy[2], dy[3]};
    Value sum = buildReduction(
        rewriter, loc, loops, {5, 6, 7}, {dyg, xg}, {dyMap, xMap},
        {createScalar(rewriter, loc, elem, 0.0)},
        [](OpBuilder &b, Location l, ValueRange a) -> SmallVector<Value> {
          return {
              addReassoc(b, l, a[2], arith::MulFOp::create(b, l, a[0], a[1]))};
        })[0];
    rewriter.replaceOp(op, reshapeTo(rewriter, loc, sum, dw));
    return success();
  }
};

} // namespace

void lowering::populateConvPatterns(RewritePatternSet &patterns, bool asGemm) {
  patterns
      .add<Conv2DLowering, Conv2DGradInputLowering, Conv2DGradWeightLowering>(
          patterns.getContext(), asGemm);
}
