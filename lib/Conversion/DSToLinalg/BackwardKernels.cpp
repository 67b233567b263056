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
#include "llvm/Support/MathExtras.h"

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
/// with P (positions) for "none". Work: (V + P) * P compares in block
/// reductions and (V + P) * D loads and adds, where one masked reduction per
/// table element would be V * D * P (10^14 for a 50k vocabulary over 8k
/// positions).
///
/// A walk is serial, one dependent load a link, and a token that fills most
/// of the batch (padding) makes its list thousands of links long. So when a
/// list can be longer than K = max(32, 2^ceil(log2(P) / 2)), it is walked in
/// two levels, as PyTorch's embedding backward splits long segments:
///   rank[p]     = #{q < p : row(q) == row(p)}   (a sum, beside `next`)
///   jump[p]     = the K-th link after p          (log2 K pointer doublings)
///   partial[p, d] = the sum of the K links from p, where rank[p] % K == 0
///   table[v, d] = sum over first[v], jump[first[v]], ... of partial[., d]
/// At most K + P / K dependent loads (192 for P = 8192) instead of P.
/// Both levels add in ascending position order from zero, so a list of at
/// most K positions gives the CPU loop's bits; a longer one rounds its K-long
/// pieces' sums once more.
struct EmbeddingGradLinkedRows : OpConversionPattern<EmbeddingGradOp> {
  EmbeddingGradLinkedRows(MLIRContext *ctx)
      : OpConversionPattern(ctx, /*benefit=*/2) {}

  /// The links of a list longer than this are walked in two levels.
  static int64_t pieceLength(int64_t positions) {
    return std::max<int64_t>(
        32, int64_t(1) << ((llvm::Log2_64_Ceil(positions) + 1) / 2));
  }

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
    int64_t piece = pieceLength(positions);
    bool twoLevels = positions > piece;
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

    AffineExpr i, j;
    bindDims(ctx, i, j);
    // out[i] = the reduction over j of combine(match, i, j, acc), where
    // match is row(j) == i (over table rows) or row(j) == row(i) (over
    // positions). One output each: the GPU reduces single outputs in
    // parallel.
    using Combine =
        function_ref<Value(OpBuilder &, Location, Value, Value, Value, Value)>;
    auto reducePairs = [&](int64_t outer, bool overPositions, Value init,
                           Combine combine) -> Value {
      SmallVector<Value> inputs = {rows};
      SmallVector<AffineMap> maps = {AffineMap::get(2, 0, {j}, ctx)};
      if (overPositions) {
        inputs.push_back(rows);
        maps.push_back(AffineMap::get(2, 0, {i}, ctx));
      }
      return buildReduction(
                 rewriter, loc, {outer, positions}, {1}, inputs, maps, {init},
                 [&](OpBuilder &b, Location l,
                     ValueRange a) -> SmallVector<Value> {
                   Value x = asI64(b, l, linalg::IndexOp::create(b, l, 0));
                   Value y = asI64(b, l, linalg::IndexOp::create(b, l, 1));
                   Value match =
                       arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq,
                                             a[0], overPositions ? a[1] : x);
                   return {combine(b, l, match, x, y, a.back())};
                 })
          .front();
    };
    // first[v] = min over p of (row(p) == v ? p : P).
    Value first = reducePairs(
        vocab, /*overPositions=*/false, none(rewriter, loc),
        [&](OpBuilder &b, Location l, Value match, Value, Value p, Value acc) {
          Value candidate = arith::SelectOp::create(b, l, match, p, none(b, l));
          return arith::MinSIOp::create(b, l, acc, candidate).getResult();
        });
    // next[p] = min over q of (row(q) == row(p) && q > p ? q : P).
    Value next = reducePairs(
        positions, /*overPositions=*/true, none(rewriter, loc),
        [&](OpBuilder &b, Location l, Value match, Value p, Value q,
            Value acc) {
          Value after = arith::AndIOp::create(
              b, l, match,
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::sgt, q, p));
          Value candidate = arith::SelectOp::create(b, l, after, q, none(b, l));
          return arith::MinSIOp::create(b, l, acc, candidate).getResult();
        });

    RankedTensorType tableType = op.getType();
    AffineMap byRow = AffineMap::get(2, 0, {i}, ctx);
    if (!twoLevels) {
      rewriter.replaceOp(
          op, buildParallel(rewriter, loc, tableType, {first}, {byRow},
                            [&](OpBuilder &b, Location l, ValueRange a) {
                              return sumList(b, l, a[0], next, in.grad,
                                             positions, /*limit=*/Value());
                            }));
      return success();
    }

    // rank[p] = the number of q < p with row(q) == row(p), beside next
    // (one row group reads rows for both).
    Value rank = reducePairs(
        positions, /*overPositions=*/true, createI64(rewriter, loc, 0),
        [&](OpBuilder &b, Location l, Value match, Value p, Value q,
            Value acc) {
          Value before = arith::AndIOp::create(
              b, l, match,
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, q, p));
          Value one = arith::ExtUIOp::create(b, l, i64, before);
          return arith::AddIOp::create(b, l, acc, one).getResult();
        });
    // jump = next applied K times, by doubling: j'[p] = j[j[p]].
    Value jump = next;
    auto linkType = RankedTensorType::get({positions}, i64);
    for (int64_t n = 1; n < piece; n *= 2)
      jump = buildParallel(
          rewriter, loc, linkType, {jump}, {rewriter.getMultiDimIdentityMap(1)},
          [&, jump](OpBuilder &b, Location l, ValueRange a) -> Value {
            Value valid = arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt,
                                                a[0], none(b, l));
            // Clamped so that "none" reads in bounds; the select drops it.
            Value at = arith::IndexCastOp::create(
                b, l, b.getIndexType(),
                arith::MinSIOp::create(b, l, a[0],
                                       createI64(b, l, positions - 1)));
            Value twice = tensor::ExtractOp::create(b, l, jump, at);
            return arith::SelectOp::create(b, l, valid, twice, none(b, l));
          });

    // partial[p, d]: the K links from p, at the positions whose rank is a
    // multiple of K (the pieces' starts); zero elsewhere.
    auto partialType = RankedTensorType::get({positions, in.dim}, in.elem);
    Value partial = buildParallel(
        rewriter, loc, partialType, {rank}, {byRow},
        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value p = asI64(b, l, linalg::IndexOp::create(b, l, 0));
          Value offset =
              arith::AndIOp::create(b, l, a[0], createI64(b, l, piece - 1));
          Value starts = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq,
                                               offset, createI64(b, l, 0));
          Value limit = arith::SelectOp::create(
              b, l, starts, createI64(b, l, piece), createI64(b, l, 0));
          return sumList(b, l, p, next, in.grad, positions, limit);
        });
    rewriter.replaceOp(
        op, buildParallel(rewriter, loc, tableType, {first}, {byRow},
                          [&](OpBuilder &b, Location l, ValueRange a) {
                            return sumList(b, l, a[0], jump, partial, positions,
                                           /*limit=*/Value());
                          }));
    return success();
  }

  /// Inside a parallel generic over (list, d): the sum from zero of
  /// values[p, d] over the list that starts at `start` (i64) and follows
  /// `links` until P, or for at most `limit` (i64) links where given.
  static Value sumList(OpBuilder &b, Location loc, Value start, Value links,
                       Value values, int64_t positions, Value limit) {
    Type i64 = b.getI64Type();
    Type elem = cast<RankedTensorType>(values.getType()).getElementType();
    Value d = linalg::IndexOp::create(b, loc, 1);
    Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(elem));
    SmallVector<Value> init = {start, zero};
    SmallVector<Type> types = {i64, elem};
    if (limit) {
      init.push_back(createI64(b, loc, 0));
      types.push_back(i64);
    }
    auto walk = scf::WhileOp::create(
        b, loc, types, init,
        [&](OpBuilder &wb, Location wl, ValueRange args) {
          Value more =
              arith::CmpIOp::create(wb, wl, arith::CmpIPredicate::slt, args[0],
                                    createI64(wb, wl, positions));
          if (limit)
            more = arith::AndIOp::create(
                wb, wl, more,
                arith::CmpIOp::create(wb, wl, arith::CmpIPredicate::slt,
                                      args[2], limit));
          scf::ConditionOp::create(wb, wl, more, args);
        },
        [&](OpBuilder &wb, Location wl, ValueRange args) {
          Value p =
              arith::IndexCastOp::create(wb, wl, wb.getIndexType(), args[0]);
          Value value =
              tensor::ExtractOp::create(wb, wl, values, ValueRange{p, d});
          SmallVector<Value> yielded = {
              tensor::ExtractOp::create(wb, wl, links, p),
              arith::AddFOp::create(wb, wl, args[1], value)};
          if (limit)
            yielded.push_back(
                arith::AddIOp::create(wb, wl, args[2], createI64(wb, wl, 1)));
          scf::YieldOp::create(wb, wl, yielded);
        });
    return walk.getResult(1);
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
