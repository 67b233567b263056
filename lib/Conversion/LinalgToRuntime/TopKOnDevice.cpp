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

namespace {

/// The least and the greatest value `v` can take when it is a constant in
/// [0, 1] or an arith.select among such values (DGC's warm-up); nothing
/// otherwise, or past `budget` operations (a select's operands can be
/// shared).
std::optional<std::pair<double, double>> fractionRange(Value v, int &budget) {
  if (--budget < 0)
    return std::nullopt;
  FloatAttr attr;
  if (matchPattern(v, m_Constant(&attr))) {
    double x = attr.getValueAsDouble();
    // What dsrt::comm::checkScheme accepts.
    if (!(x >= 0 && x <= 1))
      return std::nullopt;
    return std::make_pair(x, x);
  }
  auto select = v.getDefiningOp<arith::SelectOp>();
  if (!select)
    return std::nullopt;
  auto a = fractionRange(select.getTrueValue(), budget);
  auto c = a ? fractionRange(select.getFalseValue(), budget) : std::nullopt;
  if (!c)
    return std::nullopt;
  return std::make_pair(std::min(a->first, c->first),
                        std::max(a->second, c->second));
}

} // namespace

std::optional<TopKRatio> ds::topKRatio(Value params) {
  auto type = params ? dyn_cast<RankedTensorType>(params.getType()) : nullptr;
  if (!type || type.getNumElements() != 3 || !type.getElementType().isF64())
    return std::nullopt;
  std::optional<std::pair<double, double>> range;
  DenseElementsAttr attr;
  int budget = 64;
  if (matchPattern(params, m_Constant(&attr))) {
    double p0 = (*attr.getValues<APFloat>().begin()).convertToDouble();
    if (p0 >= 0 && p0 <= 1)
      range = std::make_pair(p0, p0);
  } else if (auto elements = params.getDefiningOp<tensor::FromElementsOp>()) {
    range = fractionRange(elements.getElements().front(), budget);
  }
  if (!range)
    return std::nullopt;
  return TopKRatio{params, range->first, range->second};
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

/// What the runtime derives from a p0 the step computes (DGC's warm-up),
/// as rank-0 tensors, in its f64 operations: k = ceil(p0 n) clamped to
/// [0, n] (i32, and i64 as the exact re-selection's rank), min(2k, n)
/// (i32), and the sample's threshold as the (m - floor((m - 1)(1 - p0)))-th
/// largest of its m values (i64).
struct ComputedCounts {
  Value k, twoK, kRank, sampleRank;
};

ComputedCounts buildComputedCounts(OpBuilder &b, Location loc, Value params,
                                   int64_t n, int64_t m) {
  MLIRContext *ctx = b.getContext();
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  AffineMap none = AffineMap::get(0, 0, {}, ctx);
  auto generic = linalg::GenericOp::create(
      b, loc,
      TypeRange{RankedTensorType::get({}, i32), RankedTensorType::get({}, i32),
                RankedTensorType::get({}, i64), RankedTensorType::get({}, i64)},
      ValueRange{params},
      ValueRange{createEmpty(b, loc, {}, i32), createEmpty(b, loc, {}, i32),
                 createEmpty(b, loc, {}, i64), createEmpty(b, loc, {}, i64)},
      ArrayRef<AffineMap>{elementMap(ctx, 0, 0), none, none, none, none},
      ArrayRef<utils::IteratorType>{},
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value p0 = args[0];
        auto f64 = [&](double x) -> Value {
          return arith::ConstantOp::create(nb, l, nb.getF64FloatAttr(x));
        };
        auto clamp = [&](Value x, int64_t low, int64_t high) -> Value {
          return arith::MinSIOp::create(
              nb, l, arith::MaxSIOp::create(nb, l, x, createI64(nb, l, low)),
              createI64(nb, l, high));
        };
        Value k = clamp(
            arith::FPToSIOp::create(
                nb, l, nb.getI64Type(),
                math::CeilOp::create(
                    nb, l, arith::MulFOp::create(nb, l, p0, f64(double(n))))),
            0, n);
        Value q = arith::SubFOp::create(nb, l, f64(1.0), p0);
        Value below =
            clamp(arith::FPToSIOp::create(
                      nb, l, nb.getI64Type(),
                      math::FloorOp::create(
                          nb, l,
                          arith::MulFOp::create(nb, l, f64(double(m - 1)), q))),
                  0, m - 1);
        Value twoK = arith::MinSIOp::create(
            nb, l, arith::AddIOp::create(nb, l, k, k), createI64(nb, l, n));
        Type i32 = nb.getI32Type();
        linalg::YieldOp::create(
            nb, l,
            ValueRange{
                arith::TruncIOp::create(nb, l, i32, k),
                arith::TruncIOp::create(nb, l, i32, twoK), k,
                arith::SubIOp::create(nb, l, createI64(nb, l, m), below)});
      });
  return {generic.getResult(0), generic.getResult(1), generic.getResult(2),
          generic.getResult(3)};
}

} // namespace

int64_t ds::topKSlots(int64_t n, double ratio) {
  return std::max<int64_t>(1, std::min(n, 2 * topKCount(n, ratio)));
}

DeviceTopK ds::buildTopKOnDevice(OpBuilder &b, Location loc, Value grad,
                                 Value residual, const TopKRatio &ratio) {
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
  // k, and what depends on it: constants when the step fixes p0, else
  // computed from it (DGC's warm-up).
  bool fixed = ratio.fixed();
  int64_t kLeast = topKCount(n, ratio.min), kMost = topKCount(n, ratio.max);
  std::optional<ComputedCounts> computed;
  if (!fixed)
    computed = buildComputedCounts(b, loc, ratio.params, n, m);
  Value threshold = fixed
                        ? buildLowerQuantile(b, loc, sample, 1.0 - ratio.max)
                        : buildKthLargest(b, loc, sample, computed->sampleRank);
  Value count = countWhere(b, loc, a, F::OGE, threshold);

  // The exact re-selection, where more than 2k can pass the threshold: the
  // k-th largest T, the #{a > T} above it, and the first index past the
  // k - above ties that complete k. Unused (k = 0: nothing) otherwise.
  bool exact = kMost > 0 && 2 * kLeast < n;
  Value kth = createFilled(
      b, loc, {}, arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0)));
  Value cutoff = scalarI32(b, loc, 0);
  if (exact) {
    Value rank = fixed ? arith::ConstantOp::create(
                             b, loc,
                             DenseElementsAttr::get(
                                 RankedTensorType::get({}, b.getI64Type()),
                                 b.getI64IntegerAttr(kMost).getValue()))
                             .getResult()
                       : computed->kRank;
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
    SmallVector<Value> inputs{above, tied.total};
    SmallVector<AffineMap> maps{none, elementMap(ctx, 0, 0)};
    if (!fixed) {
      inputs.push_back(computed->k);
      maps.push_back(none);
    }
    cutoff = buildParallel(
        b, loc, RankedTensorType::get({}, i32), inputs, maps,
        [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
          Value k = fixed ? i32Constant(nb, l, int32_t(kMost)) : args[2];
          Value wanted = arith::SubIOp::create(nb, l, k, args[0]);
          Value at = findSetElement(nb, l, tied, wanted);
          Value exists = arith::CmpIOp::create(nb, l, P::slt, wanted, args[1]);
          return arith::SelectOp::create(nb, l, exists, at,
                                         i32Constant(nb, l, int32_t(n)));
        });
  }

  // Each element: sent or not, and its new residual: 0 where sent (v - v),
  // v where not, the old residual when the bucket is not finite.
  SmallVector<Value> inputs{v, residual, threshold, count, kth, cutoff, probe};
  SmallVector<AffineMap> maps{id, id, scalar, scalar, scalar, scalar, scalar};
  if (exact && !fixed) {
    inputs.push_back(computed->twoK);
    maps.push_back(scalar);
  }
  maps.append({id, id});
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{RankedTensorType::get({n}, i8), type}, inputs,
      ValueRange{createEmpty(b, loc, {n}, i8), createEmpty(b, loc, {n}, f32)},
      maps, ArrayRef<utils::IteratorType>{utils::IteratorType::parallel},
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
          // More than 2k pass: count > min(2k, n) (count <= n).
          Value twoK = fixed ? i32Constant(nb, l, int32_t(2 * kMost)) : args[7];
          Value many = arith::CmpIOp::create(nb, l, P::sgt, args[3], twoK);
          sent = arith::SelectOp::create(nb, l, many, top, sent);
        } else if (kMost == 0) {
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

  // The compaction: slot p holds the p-th sent element, or -1 and 0. A
  // non-finite bucket's slots are all empty: the ranks that decode them
  // on the device (gathered on NCCL) skip it as the host's decoder skips
  // its empty payload.
  int64_t slots = topKSlots(n, ratio.max);
  CountPyramid pyramid = buildCountPyramid(b, loc, sent);
  auto compact = linalg::GenericOp::create(
      b, loc,
      TypeRange{RankedTensorType::get({slots}, i32),
                RankedTensorType::get({slots}, f32)},
      ValueRange{pyramid.total, probe},
      ValueRange{createEmpty(b, loc, {slots}, i32),
                 createEmpty(b, loc, {slots}, f32)},
      ArrayRef<AffineMap>{elementMap(ctx, 1, 0), scalar, id, id},
      ArrayRef<utils::IteratorType>{utils::IteratorType::parallel},
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value p = index(nb, l);
        Value at = findSetElement(nb, l, pyramid, p);
        Value exists = arith::AndIOp::create(
            nb, l, arith::CmpIOp::create(nb, l, P::slt, p, args[0]),
            arith::CmpFOp::create(nb, l, F::ORD, args[1], args[1]));
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
  return {compact.getResult(0), compact.getResult(1), pyramid.total, scalars,
          generic.getResult(1)};
}
