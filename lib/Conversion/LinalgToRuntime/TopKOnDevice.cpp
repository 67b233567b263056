//===- TopKOnDevice.cpp - DGC's top-k encoder in the step -----------------===//
//
// The runtime's encodeTopK (lib/Runtime/CommCompress.cpp) as linalg on
// tensors:
//
//   v = g + r, a = |v|
//   threshold  the lower (1 - p0) quantile of a strided sample of a (DGC)
//   selected   a >= threshold, unless more than 2k are: then the k largest
//              of a, ties to the lower index (k = ceil(p0 n))
//
// The exact re-selection is the k-th largest value T by radix select over
// the score's digits (buildKthLargest), everything above it, and the first
// k - #{a > T} of the ties in index order: cheaper than a select over
// (score, index) keys, whose index digits would double the passes.
//
// The selected elements are then compacted on the device, so that only
// they cross PCIe. A scan does not fit linalg; a count pyramid does: the
// mask's counts by blocks of 32, the blocks' by 32, up to the total. The
// p-th selected element is found from the top, one level at a time, by
// the 32 counts under the node reached (as radix select finds a digit).
// That is 32 loads a level for each of at most 2k slots, and the pyramid
// is one pass over the mask. The same descent finds the tie that ends the
// exact selection.
//
//===----------------------------------------------------------------------===//

#include "DeviceEncoders.h"

#include "../DSToLinalg/LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cmath>
#include <tuple>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::lowering;

std::optional<double> ds::constantTopKRatio(Value params) {
  DenseElementsAttr attr;
  if (!params || !matchPattern(params, m_Constant(&attr)) ||
      attr.getNumElements() != 3 || !attr.getElementType().isF64())
    return std::nullopt;
  double p0 = (*attr.getValues<APFloat>().begin()).convertToDouble();
  // What dsrt::comm::checkScheme accepts.
  if (!(p0 >= 0 && p0 <= 1))
    return std::nullopt;
  return p0;
}

namespace {

/// The runtime's k: ceil(p0 n), clamped to [0, n].
int64_t topKCount(int64_t n, double ratio) {
  return std::clamp<int64_t>(static_cast<int64_t>(std::ceil(ratio * double(n))),
                             0, n);
}

/// The fan-out of the count pyramid.
constexpr int64_t kFanOut = 32;

Value i32Constant(OpBuilder &b, Location loc, int32_t value) {
  return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(value));
}

/// The map of a loop nest of `loops` dimensions to element `i` of a 1-D
/// operand.
AffineMap elementMap(MLIRContext *ctx, unsigned loops, int64_t i) {
  return AffineMap::get(loops, 0, getAffineConstantExpr(i, ctx));
}

/// The counts of a 0/1 mask by blocks of kFanOut, level by level, up to
/// the total. `padded[l]` is level l padded with zeros to whole blocks:
/// the children of node q of level l + 1 are padded[l][q * kFanOut + d].
struct CountPyramid {
  SmallVector<Value> padded; // [0]: the mask (i8), then i32 counts
  Value total;               // [1] i32
};

/// `x` (1-D) with zeros after it up to whole blocks of kFanOut.
Value padToBlocks(OpBuilder &b, Location loc, Value x) {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t n = type.getNumElements();
  int64_t blocks = llvm::divideCeil(n, kFanOut);
  if (blocks * kFanOut == n)
    return x;
  Value zeros = createZeros(b, loc, {blocks * kFanOut}, type.getElementType());
  return tensor::InsertSliceOp::create(
      b, loc, x, zeros, ArrayRef<OpFoldResult>{b.getIndexAttr(0)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(n)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
}

/// The pyramid of `mask` (1-D i8, 0 or 1): a reduction over [blocks, 32]
/// per level, each level's padding a copy into zeros.
CountPyramid buildCountPyramid(OpBuilder &b, Location loc, Value mask) {
  MLIRContext *ctx = b.getContext();
  Type i32 = b.getI32Type();
  CountPyramid p;
  Value level = mask;
  do {
    Value padded = padToBlocks(b, loc, level);
    p.padded.push_back(padded);
    int64_t blocks =
        cast<RankedTensorType>(padded.getType()).getNumElements() / kFanOut;
    Value grid = tensor::ExpandShapeOp::create(
        b, loc,
        RankedTensorType::get({blocks, kFanOut},
                              getElementTypeOrSelf(padded.getType())),
        padded, ArrayRef<ReassociationIndices>{{0, 1}});
    level = buildReduction(b, loc, {blocks, kFanOut}, {1}, grid,
                           AffineMap::getMultiDimIdentityMap(2, ctx),
                           i32Constant(b, loc, 0),
                           [&](OpBuilder &nb, Location l, ValueRange args) {
                             Value x = args[0];
                             if (x.getType() != i32)
                               x = arith::ExtUIOp::create(nb, l, i32, x);
                             return SmallVector<Value>{
                                 arith::AddIOp::create(nb, l, args[1], x)};
                           })
                .front();
  } while (cast<RankedTensorType>(level.getType()).getNumElements() > 1);
  p.total = level;
  return p;
}

/// Inside a linalg body: the index (i32) of the element of rank `r` (i32,
/// 0-based) among the mask's set elements in index order. Meaningless when
/// r >= the total; the caller checks.
Value findSetElement(OpBuilder &b, Location loc, const CountPyramid &p,
                     Value r) {
  using P = arith::CmpIPredicate;
  Type i32 = b.getI32Type();
  Value node = i32Constant(b, loc, 0);
  for (Value level : llvm::reverse(p.padded)) {
    // The first child whose running count passes r; r then counts within
    // it. Unrolled: the 32 loads are independent.
    Value base =
        arith::MulIOp::create(b, loc, node, i32Constant(b, loc, kFanOut));
    Value before = i32Constant(b, loc, 0);
    Value found = arith::ConstantOp::create(b, loc, b.getBoolAttr(false));
    Value child = base, rank = r;
    for (int64_t d = 0; d < kFanOut; ++d) {
      Value at = arith::AddIOp::create(b, loc, base, i32Constant(b, loc, d));
      Value count =
          tensor::ExtractOp::create(b, loc, level,
                                    ValueRange{arith::IndexCastUIOp::create(
                                        b, loc, b.getIndexType(), at)});
      if (count.getType() != i32)
        count = arith::ExtUIOp::create(b, loc, i32, count);
      Value through = arith::AddIOp::create(b, loc, before, count);
      Value hit = arith::AndIOp::create(
          b, loc,
          arith::XOrIOp::create(
              b, loc, found,
              arith::ConstantOp::create(b, loc, b.getBoolAttr(true))),
          arith::CmpIOp::create(b, loc, P::sgt, through, r));
      child = arith::SelectOp::create(b, loc, hit, at, child);
      rank = arith::SelectOp::create(
          b, loc, hit, arith::SubIOp::create(b, loc, r, before), rank);
      found = arith::OrIOp::create(b, loc, found, hit);
      before = through;
    }
    node = child;
    r = rank;
  }
  return node;
}

/// #{i : a[i] `predicate` x} of the 1-D f32 `a` and the rank-0 `x`, as a
/// rank-0 i32 tensor.
Value countWhere(OpBuilder &b, Location loc, Value a,
                 arith::CmpFPredicate predicate, Value x) {
  MLIRContext *ctx = b.getContext();
  int64_t n = cast<RankedTensorType>(a.getType()).getNumElements();
  return buildReduction(
             b, loc, {n}, {0}, ValueRange{a, x},
             {AffineMap::getMultiDimIdentityMap(1, ctx),
              AffineMap::get(1, 0, {}, ctx)},
             i32Constant(b, loc, 0),
             [&](OpBuilder &nb, Location l, ValueRange args) {
               Value in =
                   arith::CmpFOp::create(nb, l, predicate, args[0], args[1]);
               return SmallVector<Value>{arith::AddIOp::create(
                   nb, l, args[2],
                   arith::ExtUIOp::create(nb, l, nb.getI32Type(), in))};
             })
      .front();
}

/// A rank-0 i32 tensor of `value`.
Value scalarI32(OpBuilder &b, Location loc, int32_t value) {
  return createFilled(b, loc, {}, i32Constant(b, loc, value));
}

} // namespace

int64_t ds::topKSlots(int64_t n, double ratio) {
  return std::max<int64_t>(1, std::min(n, 2 * topKCount(n, ratio)));
}

DeviceTopK ds::buildTopKOnDevice(OpBuilder &b, Location loc, Value grad,
                                 Value residual, double ratio) {
  using F = arith::CmpFPredicate;
  using P = arith::CmpIPredicate;
  auto type = cast<RankedTensorType>(grad.getType());
  int64_t n = type.getNumElements();
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type(), i32 = b.getI32Type(), i8 = b.getI8Type();
  AffineMap id = AffineMap::getMultiDimIdentityMap(1, ctx);
  AffineMap scalar = AffineMap::get(1, 0, {}, ctx);
  auto index = [](OpBuilder &nb, Location l) -> Value {
    return arith::IndexCastUIOp::create(nb, l, nb.getI32Type(),
                                        linalg::IndexOp::create(nb, l, 0));
  };

  Value v, probe;
  std::tie(v, probe) = buildFeedbackSum(b, loc, grad, residual);
  Value a = buildParallel(b, loc, type, {v}, {id},
                          [](OpBuilder &nb, Location l, ValueRange args) {
                            return math::AbsFOp::create(nb, l, args[0]);
                          });

  // DGC's threshold: the lower (1 - p0) quantile of m elements of a at the
  // strides i n / m.
  int64_t m = std::min<int64_t>(n, std::max<int64_t>(64, (n + 99) / 100));
  Value sample = buildParallel(
      b, loc, RankedTensorType::get({m}, f32), ValueRange{}, {},
      [&](OpBuilder &nb, Location l, ValueRange) -> Value {
        Type i64 = nb.getI64Type();
        Value i = arith::IndexCastUIOp::create(
            nb, l, i64, linalg::IndexOp::create(nb, l, 0));
        Value at = arith::DivUIOp::create(
            nb, l, arith::MulIOp::create(nb, l, i, createI64(nb, l, n)),
            createI64(nb, l, m));
        return tensor::ExtractOp::create(
            nb, l, a,
            ValueRange{
                arith::IndexCastUIOp::create(nb, l, nb.getIndexType(), at)});
      });
  Value threshold = buildLowerQuantile(b, loc, sample, 1.0 - ratio);
  Value count = countWhere(b, loc, a, F::OGE, threshold);

  // The exact re-selection, where more than 2k can pass the threshold: the
  // k-th largest T, the #{a > T} above it, and the first index past the
  // k - above ties that complete k. Unused (k = 0: nothing) otherwise.
  int64_t k = topKCount(n, ratio);
  bool exact = k > 0 && 2 * k < n;
  Value kth = createFilled(
      b, loc, {}, arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0)));
  Value cutoff = scalarI32(b, loc, 0);
  if (exact) {
    Value rank = arith::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                               b.getI64IntegerAttr(k).getValue()));
    kth = buildKthLargest(b, loc, a, rank);
    Value above = countWhere(b, loc, a, F::OGT, kth);
    Value ties = buildParallel(
        b, loc, RankedTensorType::get({n}, i8), ValueRange{a, kth},
        {id, scalar}, [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
          return arith::ExtUIOp::create(
              nb, l, i8,
              arith::CmpFOp::create(nb, l, F::OEQ, args[0], args[1]));
        });
    CountPyramid tied = buildCountPyramid(b, loc, ties);
    AffineMap none = AffineMap::get(0, 0, {}, ctx);
    cutoff = buildParallel(
        b, loc, RankedTensorType::get({}, i32), ValueRange{above, tied.total},
        {none, elementMap(ctx, 0, 0)},
        [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
          Value wanted = arith::SubIOp::create(
              nb, l, i32Constant(nb, l, int32_t(k)), args[0]);
          Value at = findSetElement(nb, l, tied, wanted);
          Value exists = arith::CmpIOp::create(nb, l, P::slt, wanted, args[1]);
          return arith::SelectOp::create(nb, l, exists, at,
                                         i32Constant(nb, l, int32_t(n)));
        });
  }

  // Each element: sent or not, and its new residual: 0 where sent (v - v),
  // v where not, the old residual when the bucket is not finite.
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{RankedTensorType::get({n}, i8), type},
      ValueRange{v, residual, threshold, count, kth, cutoff, probe},
      ValueRange{createEmpty(b, loc, {n}, i8), createEmpty(b, loc, {n}, f32)},
      ArrayRef<AffineMap>{id, id, scalar, scalar, scalar, scalar, scalar, id,
                          id},
      ArrayRef<utils::IteratorType>{utils::IteratorType::parallel},
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value x = args[0], r = args[1];
        Value mag = math::AbsFOp::create(nb, l, x);
        Value sent =
            arith::CmpFOp::create(nb, l, F::OGE, mag, args[2]).getResult();
        if (exact) {
          Value higher = arith::CmpFOp::create(nb, l, F::OGT, mag, args[4]);
          Value tieBefore = arith::AndIOp::create(
              nb, l, arith::CmpFOp::create(nb, l, F::OEQ, mag, args[4]),
              arith::CmpIOp::create(nb, l, P::slt, index(nb, l), args[5]));
          Value top = arith::OrIOp::create(nb, l, higher, tieBefore);
          Value many = arith::CmpIOp::create(
              nb, l, P::sgt, args[3], i32Constant(nb, l, int32_t(2 * k)));
          sent = arith::SelectOp::create(nb, l, many, top, sent);
        } else if (k == 0) {
          sent = arith::ConstantOp::create(nb, l, nb.getBoolAttr(false));
        }
        Value finite = arith::CmpFOp::create(nb, l, F::ORD, args[6], args[6]);
        Value next = arith::SelectOp::create(
            nb, l, sent, arith::SubFOp::create(nb, l, x, x), x);
        next = arith::SelectOp::create(nb, l, finite, next, r);
        linalg::YieldOp::create(
            nb, l,
            ValueRange{arith::ExtUIOp::create(nb, l, nb.getI8Type(), sent),
                       next});
      });
  Value sent = generic.getResult(0);

  // The compaction: slot p holds the p-th sent element, or -1 and 0.
  int64_t slots = topKSlots(n, ratio);
  CountPyramid pyramid = buildCountPyramid(b, loc, sent);
  auto compact = linalg::GenericOp::create(
      b, loc,
      TypeRange{RankedTensorType::get({slots}, i32),
                RankedTensorType::get({slots}, f32)},
      ValueRange{pyramid.total},
      ValueRange{createEmpty(b, loc, {slots}, i32),
                 createEmpty(b, loc, {slots}, f32)},
      ArrayRef<AffineMap>{elementMap(ctx, 1, 0), id, id},
      ArrayRef<utils::IteratorType>{utils::IteratorType::parallel},
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value p = index(nb, l);
        Value at = findSetElement(nb, l, pyramid, p);
        Value exists = arith::CmpIOp::create(nb, l, P::slt, p, args[0]);
        // Clamped so that an empty slot reads in bounds; the select drops it.
        Value clamped = arith::MinUIOp::create(
            nb, l, at, i32Constant(nb, l, int32_t(n - 1)));
        Value value =
            tensor::ExtractOp::create(nb, l, v,
                                      ValueRange{arith::IndexCastUIOp::create(
                                          nb, l, nb.getIndexType(), clamped)});
        linalg::YieldOp::create(
            nb, l,
            ValueRange{
                arith::SelectOp::create(nb, l, exists, at,
                                        i32Constant(nb, l, -1)),
                arith::SelectOp::create(
                    nb, l, exists, value,
                    arith::ConstantOp::create(nb, l, nb.getF32FloatAttr(0)))});
      });
  Value scalars =
      tensor::ExpandShapeOp::create(b, loc, RankedTensorType::get({1}, f32),
                                    probe, ArrayRef<ReassociationIndices>{});
  return {compact.getResult(0), compact.getResult(1), scalars,
          generic.getResult(1)};
}
