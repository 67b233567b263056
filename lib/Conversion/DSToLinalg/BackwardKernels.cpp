//===- BackwardKernels.cpp - Lower pool and embedding gradients -----------===//
//
// The backward halves of the windowed and gather ops (the convolution
// gradients are in Conv.cpp):
//
// - max_pool2d_grad: a reduction `linalg.generic` finds each window's first
//   maximum (ties and NaN resolved by the smallest row-major position, so
//   the result does not depend on iteration order), then a gather: every
//   input element sums the cotangents of the windows that contain it and
//   chose it. avg_pool2d_grad is the same gather without the choice. The
//   gather form is parallel over the input and needs no scatter.
// - embedding_grad: a scatter-add, an `scf.for` over positions adding each
//   `grad` row into the table row at the clamped index (O(P * D), correct
//   for repeated indices).
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::lowering;

namespace {

//===----------------------------------------------------------------------===//
// max_pool2d_grad, avg_pool2d_grad
//===----------------------------------------------------------------------===//

/// Window geometry of a pooling op.
struct PoolGeometry {
  int64_t kh, kw, sh, sw, ph, pw, oh, ow;
};

/// For each window, the row-major position `kh * KW + kw` of its first
/// maximum in the -inf padded input (NaN counts as the largest value).
Value windowArgMax(OpBuilder &b, Location loc, Value input,
                   const PoolGeometry &g, ArrayRef<int64_t> outShape) {
  MLIRContext *ctx = b.getContext();
  Type elem = cast<RankedTensorType>(input.getType()).getElementType();
  Value xp = padWith(b, loc, input, {0, 0, g.ph, g.pw}, {0, 0, g.ph, g.pw},
                     createNegInf(b, loc, elem));
  SmallVector<AffineExpr> e = dimExprs(ctx, 6);
  // Loops (n, c, oh, ow, kh, kw); the window operand gives kh, kw bounds.
  AffineMap xMap = AffineMap::get(
      6, 0, {e[0], e[1], e[2] * g.sh + e[4], e[3] * g.sw + e[5]}, ctx);
  AffineMap winMap = AffineMap::get(6, 0, {e[4], e[5]}, ctx);
  Value window = createEmpty(b, loc, {g.kh, g.kw}, elem);
  SmallVector<int64_t> loops(outShape);
  loops.push_back(g.kh);
  loops.push_back(g.kw);
  SmallVector<Value> r = buildReduction(
      b, loc, loops, {4, 5}, {xp, window}, {xMap, winMap},
      {createNegInf(b, loc, elem), createIndex(b, loc, g.kh * g.kw)},
      [&](OpBuilder &nb, Location l, ValueRange a) -> SmallVector<Value> {
        Value x = a[0], best = a[2], bestIdx = a[3];
        Value idx = arith::AddIOp::create(
            nb, l,
            arith::MulIOp::create(nb, l, linalg::IndexOp::create(nb, l, 4),
                                  createIndex(nb, l, g.kw)),
            linalg::IndexOp::create(nb, l, 5));
        auto cmp = [&](arith::CmpFPredicate pred, Value u, Value v) -> Value {
          return arith::CmpFOp::create(nb, l, pred, u, v);
        };
        Value xNaN = cmp(arith::CmpFPredicate::UNO, x, x);
        Value bNaN = cmp(arith::CmpFPredicate::UNO, best, best);
        Value notBNaN = arith::XOrIOp::create(
            nb, l, bNaN,
            arith::ConstantOp::create(nb, l, nb.getBoolAttr(true)));
        // Strictly better, or equal (both NaN counts) at an earlier position.
        Value better =
            arith::OrIOp::create(nb, l, cmp(arith::CmpFPredicate::OGT, x, best),
                                 arith::AndIOp::create(nb, l, xNaN, notBNaN));
        Value same =
            arith::OrIOp::create(nb, l, cmp(arith::CmpFPredicate::OEQ, x, best),
                                 arith::AndIOp::create(nb, l, xNaN, bNaN));
        Value earlier = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::slt,
                                              idx, bestIdx);
        Value take = arith::OrIOp::create(
            nb, l, better, arith::AndIOp::create(nb, l, same, earlier));
        return {arith::SelectOp::create(nb, l, take, x, best),
                arith::SelectOp::create(nb, l, take, idx, bestIdx)};
      });
  return r[1];
}

/// dx[n, c, h, w] = sum over (kh, kw) of the windows (oh, ow) with
/// `h + ph = oh * sh + kh` (likewise w) of `contribution(dy, kh, kw)`.
/// `argmax`, when given, restricts each window to its chosen position.
Value gatherPoolGrad(OpBuilder &b, Location loc, RankedTensorType dxType,
                     Value dy, Value argmax, const PoolGeometry &g) {
  MLIRContext *ctx = b.getContext();
  Type elem = dxType.getElementType();
  SmallVector<AffineExpr> e = dimExprs(ctx, 6);
  AffineMap winMap = AffineMap::get(6, 0, {e[4], e[5]}, ctx);
  Value window = createEmpty(b, loc, {g.kh, g.kw}, elem);
  SmallVector<int64_t> loops(dxType.getShape());
  loops.push_back(g.kh);
  loops.push_back(g.kw);
  double count = static_cast<double>(g.kh * g.kw);
  return buildReduction(
      b, loc, loops, {4, 5}, {window}, {winMap},
      {createScalar(b, loc, elem, 0.0)},
      [&](OpBuilder &nb, Location l, ValueRange a) -> SmallVector<Value> {
        Value n = linalg::IndexOp::create(nb, l, 0);
        Value c = linalg::IndexOp::create(nb, l, 1);
        Value kh = linalg::IndexOp::create(nb, l, 4);
        Value kw = linalg::IndexOp::create(nb, l, 5);
        Value valid;
        // The window index along one axis, clamped, and whether it exists.
        auto windowOf = [&](unsigned loop, Value k, int64_t pad, int64_t stride,
                            int64_t size) {
          Value pos = arith::SubIOp::create(
              nb, l,
              arith::AddIOp::create(nb, l, linalg::IndexOp::create(nb, l, loop),
                                    createIndex(nb, l, pad)),
              k);
          Value strideV = createIndex(nb, l, stride);
          Value q = arith::DivSIOp::create(nb, l, pos, strideV);
          Value ok = arith::AndIOp::create(
              nb, l,
              arith::CmpIOp::create(nb, l, arith::CmpIPredicate::sge, pos,
                                    createIndex(nb, l, 0)),
              arith::CmpIOp::create(nb, l, arith::CmpIPredicate::eq,
                                    arith::RemSIOp::create(nb, l, pos, strideV),
                                    createIndex(nb, l, 0)));
          ok = arith::AndIOp::create(
              nb, l, ok,
              arith::CmpIOp::create(nb, l, arith::CmpIPredicate::slt, q,
                                    createIndex(nb, l, size)));
          valid = valid ? arith::AndIOp::create(nb, l, valid, ok) : ok;
          return clampIndex(nb, l, q, size);
        };
        Value oh = windowOf(2, kh, g.ph, g.sh, g.oh);
        Value ow = windowOf(3, kw, g.pw, g.sw, g.ow);
        SmallVector<Value> at = {n, c, oh, ow};
        Value v = tensor::ExtractOp::create(nb, l, dy, at);
        if (argmax) {
          Value chosen = tensor::ExtractOp::create(nb, l, argmax, at);
          Value here = arith::AddIOp::create(
              nb, l, arith::MulIOp::create(nb, l, kh, createIndex(nb, l, g.kw)),
              kw);
          valid = arith::AndIOp::create(
              nb, l, valid,
              arith::CmpIOp::create(nb, l, arith::CmpIPredicate::eq, chosen,
                                    here));
        } else {
          v = arith::DivFOp::create(nb, l, v, createScalar(nb, l, elem, count));
        }
        v = arith::SelectOp::create(nb, l, valid, v,
                                    createScalar(nb, l, elem, 0.0));
        return {addReassoc(nb, l, a[1], v)};
      })[0];
}

template <typename OpTy, bool IsMax>
struct PoolGradLowering : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto dxType = cast<RankedTensorType>(op.getType());
    if (!isa<FloatType>(dxType.getElementType()))
      return rewriter.notifyMatchFailure(op, "expects float tensors");
    ArrayRef<int64_t> k = op.getKernel(), p = op.getPadding();
    SmallVector<int64_t> s = op.getStridesOrKernel();
    if (k.size() != 2 || p.size() != 2 || s.size() != 2)
      return rewriter.notifyMatchFailure(op, "expects 2-element attributes");
    ArrayRef<int64_t> dy =
        cast<RankedTensorType>(adaptor.getGrad().getType()).getShape();
    PoolGeometry g{k[0], k[1], s[0], s[1], p[0], p[1], dy[2], dy[3]};
    Value argmax;
    if (IsMax)
      argmax = windowArgMax(rewriter, loc, adaptor.getInput(), g, dy);
    rewriter.replaceOp(op, gatherPoolGrad(rewriter, loc, dxType,
                                          adaptor.getGrad(), argmax, g));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// embedding_grad
//===----------------------------------------------------------------------===//

/// What both lowerings of ds.embedding_grad start from: the zero table,
/// and the indices and gradient rows flattened to [positions] and
/// [positions, dim]. Without rows to scatter (no vocabulary or no
/// positions) the op is replaced by the zero table and `indices` is null.
struct EmbeddingGradOperands {
  Type elem;
  int64_t vocab = 0, dim = 0, positions = 0;
  Value zeros, indices, grad;
};

EmbeddingGradOperands
prepareEmbeddingGrad(EmbeddingGradOp op, EmbeddingGradOp::Adaptor adaptor,
                     ConversionPatternRewriter &rewriter) {
  Location loc = op.getLoc();
  RankedTensorType tableType = op.getType();
  EmbeddingGradOperands in;
  in.elem = tableType.getElementType();
  in.vocab = tableType.getDimSize(0);
  in.dim = tableType.getDimSize(1);
  in.positions =
      cast<RankedTensorType>(adaptor.getIndices().getType()).getNumElements();
  in.zeros = createZeros(rewriter, loc, tableType.getShape(), in.elem);
  if (in.vocab < 1 || in.positions == 0) {
    rewriter.replaceOp(op, in.zeros);
    return in;
  }
  in.indices = reshapeTo(rewriter, loc, adaptor.getIndices(), {in.positions});
  in.grad = reshapeTo(rewriter, loc, adaptor.getGrad(), {in.positions, in.dim});
  return in;
}

struct EmbeddingGradLowering : OpConversionPattern<EmbeddingGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(EmbeddingGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    EmbeddingGradOperands in = prepareEmbeddingGrad(op, adaptor, rewriter);
    if (!in.indices)
      return success(); // nothing to scatter: replaced by zeros
    Type elem = in.elem;
    int64_t vocab = in.vocab, dim = in.dim, positions = in.positions;
    Value zeros = in.zeros, indices = in.indices, grad = in.grad;
    auto rowType = RankedTensorType::get({1, dim}, elem);
    SmallVector<OpFoldResult> rowSizes = foldResults(rewriter, {1, dim});
    SmallVector<OpFoldResult> unit = foldResults(rewriter, {1, 1});
    OpFoldResult zero = rewriter.getIndexAttr(0);

    // for p: table[clamp(idx[p])] += grad[p]
    auto loop = scf::ForOp::create(
        rewriter, loc, createIndex(rewriter, loc, 0),
        createIndex(rewriter, loc, positions), createIndex(rewriter, loc, 1),
        ValueRange{zeros},
        [&](OpBuilder &b, Location l, Value pos, ValueRange iter) {
          Value row = clampIndex(
              b, l, tensor::ExtractOp::create(b, l, indices, ValueRange{pos}),
              vocab);
          SmallVector<OpFoldResult> at = {row, zero};
          Value dst = tensor::ExtractSliceOp::create(b, l, rowType, iter[0], at,
                                                     rowSizes, unit);
          Value src = tensor::ExtractSliceOp::create(
              b, l, rowType, grad, SmallVector<OpFoldResult>{pos, zero},
              rowSizes, unit);
          AffineMap id = b.getMultiDimIdentityMap(2);
          auto sum = linalg::GenericOp::create(
              b, l, TypeRange{rowType}, ValueRange{src}, ValueRange{dst},
              ArrayRef<AffineMap>{id, id},
              ArrayRef<utils::IteratorType>{utils::IteratorType::parallel,
                                            utils::IteratorType::parallel},
              [](OpBuilder &nb, Location nl, ValueRange a) {
                linalg::YieldOp::create(
                    nb, nl,
                    ValueRange{arith::AddFOp::create(nb, nl, a[1], a[0])});
              });
          Value updated = tensor::InsertSliceOp::create(
              b, l, sum.getResult(0), iter[0], at, rowSizes, unit);
          scf::YieldOp::create(b, l, updated);
        });
    rewriter.replaceOp(op, loop.getResult(0));
    return success();
  }
};

/// The GPU path's embedding gradient, parallel and deterministic without
/// atomics or a sort: the positions that select each table row are linked
/// in ascending order, and every table element walks its row's list.
///   first[v] = min{p : row(p) == v}           (a min-reduction over p)
///   next[p]  = min{q > p : row(q) == row(p)}  (a min-reduction over q)
///   table[v, d] = sum over the list from first[v] of grad[p, d]
/// with P (positions) for "none". The sum adds the rows in ascending
/// position order starting from zero, as the CPU's loop does, so both paths
/// give the same bits. Work: (V + P) * P compares in block reductions and
/// (V + P) * D loads and adds, where one masked reduction per table element
/// would be V * D * P (10^14 for a 50k vocabulary over 8k positions).
struct EmbeddingGradLinkedRows : OpConversionPattern<EmbeddingGradOp> {
  EmbeddingGradLinkedRows(MLIRContext *ctx)
      : OpConversionPattern(ctx, /*benefit=*/2) {}
  LogicalResult
  matchAndRewrite(EmbeddingGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    EmbeddingGradOperands in = prepareEmbeddingGrad(op, adaptor, rewriter);
    if (!in.indices)
      return success(); // nothing to scatter: replaced by zeros
    MLIRContext *ctx = rewriter.getContext();
    Type i64 = rewriter.getI64Type();
    int64_t vocab = in.vocab, positions = in.positions;
    // "No position" (P), made where it is used so that kernels own it.
    auto none = [&](OpBuilder &b, Location l) {
      return createI64(b, l, positions);
    };
    auto asI64 = [&](OpBuilder &b, Location l, Value index) -> Value {
      return arith::IndexCastOp::create(b, l, i64, index);
    };

    // The clamped table row of every position, once.
    Value rows =
        buildParallel(rewriter, loc, RankedTensorType::get({positions}, i64),
                      {in.indices}, {rewriter.getMultiDimIdentityMap(1)},
                      [&](OpBuilder &b, Location l, ValueRange a) {
                        return asI64(b, l, clampIndex(b, l, a[0], vocab));
                      });

    // out[i] = min over j of (match(i, j) ? j : P), i and j the two loops.
    auto firstMatch = [&](int64_t outer, int64_t inner, AffineMap outerRow,
                          AffineMap innerRow, bool after) -> Value {
      SmallVector<Value> inputs = {rows};
      SmallVector<AffineMap> maps = {innerRow};
      if (outerRow) {
        inputs.push_back(rows);
        maps.push_back(outerRow);
      }
      maps.push_back(AffineMap::get(2, 0, {getAffineDimExpr(0, ctx)}, ctx));
      Value init = createFilled(rewriter, loc, {outer}, none(rewriter, loc));
      auto reduce = linalg::GenericOp::create(
          rewriter, loc, TypeRange{init.getType()}, inputs, ValueRange{init},
          maps,
          ArrayRef<utils::IteratorType>{utils::IteratorType::parallel,
                                        utils::IteratorType::reduction},
          [&](OpBuilder &b, Location l, ValueRange a) {
            Value i = asI64(b, l, linalg::IndexOp::create(b, l, 0));
            Value j = asI64(b, l, linalg::IndexOp::create(b, l, 1));
            Value key = outerRow ? a[1] : i;
            Value match = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq,
                                                a[0], key);
            if (after)
              match = arith::AndIOp::create(
                  b, l, match,
                  arith::CmpIOp::create(b, l, arith::CmpIPredicate::sgt, j, i));
            Value candidate =
                arith::SelectOp::create(b, l, match, j, none(b, l));
            linalg::YieldOp::create(
                b, l,
                ValueRange{arith::MinSIOp::create(b, l, a.back(), candidate)});
          });
      return reduce.getResult(0);
    };
    AffineExpr i, j;
    bindDims(ctx, i, j);
    Value first = firstMatch(vocab, positions, AffineMap(),
                             AffineMap::get(2, 0, {j}, ctx), /*after=*/false);
    Value next =
        firstMatch(positions, positions, AffineMap::get(2, 0, {i}, ctx),
                   AffineMap::get(2, 0, {j}, ctx), /*after=*/true);

    // table[v, d]: walk the list of row v.
    RankedTensorType tableType = op.getType();
    Type elem = in.elem;
    Value grad = in.grad;
    Value table = buildParallel(
        rewriter, loc, tableType, {first},
        {AffineMap::get(2, 0, {getAffineDimExpr(0, ctx)}, ctx)},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value d = linalg::IndexOp::create(b, l, 1);
          Value zero = arith::ConstantOp::create(b, l, b.getZeroAttr(elem));
          auto walk = scf::WhileOp::create(
              b, l, TypeRange{i64, elem}, ValueRange{a[0], zero},
              [&](OpBuilder &wb, Location wl, ValueRange args) {
                Value more = arith::CmpIOp::create(
                    wb, wl, arith::CmpIPredicate::slt, args[0], none(wb, wl));
                scf::ConditionOp::create(wb, wl, more, args);
              },
              [&](OpBuilder &wb, Location wl, ValueRange args) {
                Value p = arith::IndexCastOp::create(wb, wl, wb.getIndexType(),
                                                     args[0]);
                Value g =
                    tensor::ExtractOp::create(wb, wl, grad, ValueRange{p, d});
                Value sum = arith::AddFOp::create(wb, wl, args[1], g);
                Value link = tensor::ExtractOp::create(wb, wl, next, p);
                scf::YieldOp::create(wb, wl, ValueRange{link, sum});
              });
          return walk.getResult(1);
        });
    rewriter.replaceOp(op, table);
    return success();
  }
};

} // namespace

void lowering::populateParallelScatterPatterns(RewritePatternSet &patterns) {
  patterns.add<EmbeddingGradLinkedRows>(patterns.getContext());
}

void lowering::populateBackwardKernelPatterns(RewritePatternSet &patterns) {
  patterns.add<PoolGradLowering<MaxPool2DGradOp, true>,
               PoolGradLowering<AvgPool2DGradOp, false>, EmbeddingGradLowering>(
      patterns.getContext());
}
